/* linalg.c - the shared contract checks of the linear-algebra slots (check.h): a a contiguous float32/float64
 * batch of matrices (square where the slot factors one), every other view contiguous, of a's dtype and batch dims,
 * with the sizes its slot gives it; svd's U and Vh given together. */
#include "check.h"

/* a: a contiguous f32/f64 batch of matrices (square if asked). */
static nb_status check_a(const char *slot, const nb_kview *a, bool square) {
    if (!nb_dtype_in(a->dtype, NB_CHK_F))
        return nb_set_error(NB_ERR_DTYPE, "%s: float32 or float64 only, got %s", slot, nb_dtype_name(a->dtype));
    if (a->ndim < 2 || !nb_view_is_contiguous(a))
        return nb_set_error(NB_ERR_SHAPE, "%s: A must be a contiguous batch of matrices", slot);
    if (square && a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
        return nb_set_error(NB_ERR_SHAPE, "%s: A must be square, got %lld x %lld", slot,
                            (long long)a->shape[a->ndim - 2], (long long)a->shape[a->ndim - 1]);
    return NB_OK;
}

/* v has a's dtype, a's batch dims followed by `tail` (0..2) dims of sizes t0, t1, and is contiguous. */
static bool fits(const nb_kview *v, const nb_kview *a, int tail, int64_t t0, int64_t t1) {
    int nb = a->ndim - 2;
    if (v->dtype != a->dtype || v->ndim != nb + tail || !nb_view_is_contiguous(v)) return false;
    for (int d = 0; d < nb; d++)
        if (v->shape[d] != a->shape[d]) return false;
    return (tail < 1 || v->shape[nb] == t0) && (tail < 2 || v->shape[nb + 1] == t1);
}

static nb_status bad_view(const char *slot, const char *what) {
    return nb_set_error(NB_ERR_SHAPE, "%s: %s does not have the shape, dtype or layout the slot needs", slot, what);
}

/* The size of b's last dim where b has a's ndim (else 0: fits fails on b's ndim anyway). */
static int64_t last_of(const nb_kview *b, const nb_kview *a) { return b->ndim == a->ndim ? b->shape[b->ndim - 1] : 0; }

nb_status nb_check_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    (void)be;
    const char *slot = "linalg_solve";
    nb_status st = check_a(slot, a, true);
    if (st) return st;
    int64_t n = a->shape[a->ndim - 1], k = last_of(b, a);
    if (!fits(b, a, 2, n, k)) return bad_view(slot, "B");
    return fits(x, a, 2, n, k) ? NB_OK : bad_view(slot, "X");
}

nb_status nb_check_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet,
                              const nb_kview *a) {
    (void)be;
    const char *slot = "linalg_det";
    nb_status st = check_a(slot, a, true);
    if (st) return st;
    if (det && !fits(det, a, 0, 0, 0)) return bad_view(slot, "det");
    if (sign && !fits(sign, a, 0, 0, 0)) return bad_view(slot, "sign");
    if (logabsdet && !fits(logabsdet, a, 0, 0, 0)) return bad_view(slot, "logabsdet");
    return NB_OK;
}

nb_status nb_check_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper) {
    (void)be, (void)upper;
    nb_status st = check_a("linalg_cholesky", a, true);
    if (st) return st;
    int64_t n = a->shape[a->ndim - 1];
    return fits(l, a, 2, n, n) ? NB_OK : bad_view("linalg_cholesky", "L");
}

nb_status nb_check_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a) {
    (void)be;
    const char *slot = "linalg_qr";
    nb_status st = check_a(slot, a, false);
    if (st) return st;
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n;
    int64_t kq = q->ndim == nd ? q->shape[nd - 1] : -1; /* min(m, n): reduced; m: complete */
    if ((kq != k && kq != m) || !fits(q, a, 2, m, kq)) return bad_view(slot, "Q");
    return fits(r, a, 2, kq, n) ? NB_OK : bad_view(slot, "R");
}

nb_status nb_check_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper) {
    (void)be, (void)upper;
    const char *slot = "linalg_eigh";
    nb_status st = check_a(slot, a, true);
    if (st) return st;
    int64_t n = a->shape[a->ndim - 1];
    if (!fits(w, a, 1, n, 0)) return bad_view(slot, "w");
    return !v || fits(v, a, 2, n, n) ? NB_OK : bad_view(slot, "V");
}

nb_status nb_check_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh,
                              const nb_kview *a) {
    (void)be;
    const char *slot = "linalg_svd";
    nb_status st = check_a(slot, a, false);
    if (st) return st;
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n;
    if (!fits(s, a, 1, k, 0)) return bad_view(slot, "S");
    if (!u != !vh) return nb_set_error(NB_ERR_INVALID_ARG, "%s: U and Vh must both be given or both be NULL", slot);
    if (!u) return NB_OK;
    /* full_matrices: u [m, m] and vh [n, n]; else u [m, k] and vh [k, n] */
    int64_t ucols = u->ndim == nd ? u->shape[nd - 1] : k, vrows = vh->ndim == nd ? vh->shape[nd - 2] : k;
    bool full = ucols == m && vrows == n;
    if ((!full && (ucols != k || vrows != k)) || !fits(u, a, 2, m, ucols) || !fits(vh, a, 2, vrows, n))
        return bad_view(slot, "U or Vh");
    return NB_OK;
}

nb_status nb_check_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    (void)be;
    const char *slot = "linalg_lstsq";
    nb_status st = check_a(slot, a, false);
    if (st) return st;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = last_of(b, a);
    if (!fits(b, a, 2, m, k)) return bad_view(slot, "B");
    return fits(x, a, 2, n, k) ? NB_OK : bad_view(slot, "X");
}
