/* matmul.c - the shared contract checks of the GEMM slots (check.h): a, b, c (and addmm's bias, the sums of
 * matmul_bgrad and matmul_bgrad_b) of one float dtype, or for matmul, matmul_bgrad and matmul_bgrad_b a float32 c
 * (and sums) with 16-bit a and b; shapes that fit, c contiguous or a 2-d matrix with unit column stride. */
#include "check.h"

/* wide_c: c may be float32 when a and b are one 16-bit dtype (float32 accumulation written without rounding to
 * 16 bits: autocast's weight gradients, autograd/ops_matmul.c). */
static nb_status check_gemm_dtype(const char *slot, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                  bool wide_c) {
    bool same = nb_dtype_in(c->dtype, NB_CHK_FH) && a->dtype == c->dtype && b->dtype == c->dtype;
    bool wide = wide_c && c->dtype == NB_F32 && nb_dtype_is_16bit(a->dtype) && b->dtype == a->dtype;
    if (!same && !wide)
        return nb_set_error(NB_ERR_DTYPE, "%s: needs float operands of one dtype%s (a %s, b %s, c %s)", slot,
                            wide_c ? ", or a float32 c with 16-bit a and b" : "", nb_dtype_name(a->dtype),
                            nb_dtype_name(b->dtype), nb_dtype_name(c->dtype));
    return NB_OK;
}

/* Contiguous, or 2-d [m, n] with rows of unit stride at least n apart (a device backend's padded results). */
static nb_status check_gemm_c(const char *slot, const nb_kview *c) {
    char b[NB_VIEW_STR];
    bool rows = c->ndim == 2 && (c->shape[1] <= 1 || c->strides[1] == 1) &&
                (c->shape[0] <= 1 || c->strides[0] >= c->shape[1]);
    if (!nb_view_is_contiguous(c) && !rows)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: c %s must be contiguous (or 2-D with unit column stride)", slot,
                            nb_view_str(c, b, sizeof b));
    return NB_OK;
}

/* The views of a GEMM with an epilogue vector: a [m, k], b [k, n], c [m, n] 2-d and v [len] contiguous in c's
 * dtype (len: n for addmm's bias and matmul_bgrad_b's sums, m for matmul_bgrad's); shapes is the slot's wording of them. */
static nb_status check_epilogue_views(const char *slot, const char *shapes, const char *vname, const nb_kview *c,
                                      const nb_kview *a, const nb_kview *b, const nb_kview *v, int64_t len) {
    if (c->ndim != 2 || a->ndim != 2 || b->ndim != 2 || v->ndim != 1 || a->shape[0] != c->shape[0] ||
        b->shape[1] != c->shape[1] || a->shape[1] != b->shape[0] || v->shape[0] != len)
        return nb_set_error(NB_ERR_SHAPE, "%s: needs %s", slot, shapes);
    if (v->dtype != c->dtype || (v->shape[0] > 1 && v->strides[0] != 1))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be contiguous and of c's dtype", slot, vname);
    return NB_OK;
}

nb_status nb_check_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                          double beta) {
    (void)be, (void)alpha, (void)beta;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    nb_status st = check_gemm_dtype("matmul", c, a, b, true);
    if (st) return st;
    int nd = c->ndim;
    bool ok = nd >= 2 && a->ndim == nd && b->ndim == nd && a->shape[nd - 2] == c->shape[nd - 2] &&
              b->shape[nd - 1] == c->shape[nd - 1] && a->shape[nd - 1] == b->shape[nd - 2];
    for (int d = 0; d < nd - 2 && ok; d++) ok = a->shape[d] == c->shape[d] && b->shape[d] == c->shape[d];
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE, "matmul: a %s @ b %s does not give c %s", nb_view_str(a, b1, sizeof b1),
                            nb_view_str(b, b2, sizeof b2), nb_view_str(c, b3, sizeof b3));
    return check_gemm_c("matmul", c);
}

nb_status nb_check_addmm(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                         const nb_kview *bias) {
    (void)be;
    nb_status st = check_epilogue_views("addmm", "a [m, k], b [k, n], bias [n] and c [m, n]", "the bias", c, a, b,
                                        bias, c->ndim == 2 ? c->shape[1] : -1);
    if (!st) st = check_gemm_dtype("addmm", c, a, b, false);
    return st ? st : check_gemm_c("addmm", c);
}

nb_status nb_check_matmul_bgrad(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                const nb_kview *asum) {
    (void)be;
    nb_status st = check_epilogue_views("matmul_bgrad", "a [m, k], b [k, n], c [m, n] and asum [m]", "asum", c, a, b,
                                        asum, c->ndim == 2 ? c->shape[0] : -1);
    if (st) return st;
    st = check_gemm_dtype("matmul_bgrad", c, a, b, true);
    return st ? st : check_gemm_c("matmul_bgrad", c);
}

nb_status nb_check_matmul_bgrad_b(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                  const nb_kview *bsum) {
    (void)be;
    nb_status st = check_epilogue_views("matmul_bgrad_b", "a [m, k], b [k, n], c [m, n] and bsum [n]", "bsum", c, a,
                                        b, bsum, c->ndim == 2 ? c->shape[1] : -1);
    if (st) return st;
    st = check_gemm_dtype("matmul_bgrad_b", c, a, b, true);
    return st ? st : check_gemm_c("matmul_bgrad_b", c);
}
