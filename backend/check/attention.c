/* attention.c - the shared contract checks of attention and its backward:
 * a float q; k, v, out (and gout, gq, gk, gv) that fit q as [B, L|S, E|Ev]
 * (3-d, or 4-d [B1, B2, ..] with B1 B2 = B); lse a contiguous [B, L];
 * 0 <= dropout_p < 1; a bool or additive mask [..., L, S] over B. What
 * one backend alone cannot take (CUDA: other dtypes than q's, other batch
 * shapes, strided rows; the CPU: a 16-bit mask with dense float q, a 2-d
 * mask) it checks itself. */
#include "check.h"

/* The dtype the CPU computes a float view in: its adapters widen 16-bit
 * views to float32 (backend/cpu/half.c), so views of one such class mix. */
static nb_dtype wide_of(nb_dtype dt) { return dt == NB_F64 ? NB_F64 : NB_F32; }

static bool is_float(nb_dtype dt) { return nb_dtype_in(dt, NB_CHK_FH); }

/* v (NULL: fits) is [B, R, C] or [B1, B2, R, C] with B1 B2 = B, of a float dtype computed as q's. */
static bool fits(const nb_kview *v, nb_dtype qdt, int64_t B, int64_t R, int64_t C) {
    if (!v) return true;
    int nd = v->ndim;
    if ((nd != 3 && nd != 4) || !is_float(v->dtype) || wide_of(v->dtype) != wide_of(qdt)) return false;
    int64_t b = nd == 3 ? v->shape[0] : v->shape[0] * v->shape[1];
    return b == B && v->shape[nd - 2] == R && v->shape[nd - 1] == C;
}

/* B, L, S, E, Ev of q, k, v (their ndims checked). */
typedef struct att_dims {
    int64_t B, L, S, E, Ev;
} att_dims;

static att_dims dims_of(const nb_attention_args *a) {
    const nb_kview *q = a->q;
    int nd = q->ndim;
    att_dims g = {nd == 3 ? q->shape[0] : q->shape[0] * q->shape[1], q->shape[nd - 2], a->k->shape[a->k->ndim - 2],
                  q->shape[nd - 1], a->v->shape[a->v->ndim - 1]};
    return g;
}

static nb_status check_mask(const char *op, const nb_kview *mask, nb_dtype qdt, const att_dims *g) {
    char b1[NB_VIEW_STR];
    if (!mask) return NB_OK;
    if (mask->dtype != NB_BOOL && (!is_float(mask->dtype) || wide_of(mask->dtype) != wide_of(qdt)))
        return nb_set_error(NB_ERR_DTYPE, "%s: mask must be bool or %s, got %s", op, nb_dtype_name(qdt),
                            nb_dtype_name(mask->dtype));
    int nd = mask->ndim;
    int64_t lead = 1;
    for (int d = 0; d < nd - 2; d++) lead *= mask->shape[d];
    if (nd < 2 || mask->shape[nd - 2] != g->L || mask->shape[nd - 1] != g->S || lead != g->B)
        return nb_set_error(NB_ERR_SHAPE, "%s: mask %s is not [..., L=%lld, S=%lld] with leading dims of %lld elements",
                            op, nb_view_str(mask, b1, sizeof b1), (long long)g->L, (long long)g->S, (long long)g->B);
    return NB_OK;
}

/* q, k, v, out, lse, dropout_p and the mask; *g their sizes. */
static nb_status check_att(const char *op, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a,
                           att_dims *g) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    const nb_kview *q = a->q, *k = a->k, *v = a->v;
    if (!q || !k || !v) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s is NULL", op, !q ? "q" : !k ? "k" : "v");
    nb_dtype dt = q->dtype, ldt = wide_of(dt); /* 16-bit q: lse in float32 */
    if (!is_float(dt))
        return nb_set_error(NB_ERR_DTYPE, "%s: needs float32, float64, bfloat16 or float16, got %s", op,
                            nb_dtype_name(dt));
    if (nb_dtype_is_16bit(dt) && lse->dtype != NB_F32)
        return nb_set_error(NB_ERR_DTYPE, "%s: a %s q needs a float32 lse, got %s", op, nb_dtype_name(dt),
                            nb_dtype_name(lse->dtype));
    if ((q->ndim != 3 && q->ndim != 4) || (k->ndim != 3 && k->ndim != 4) || (v->ndim != 3 && v->ndim != 4))
        return nb_set_error(NB_ERR_SHAPE, "%s: q %s, k %s, v %s must be 3-d [B, L|S, E] or 4-d [B1, B2, L|S, E]", op,
                            nb_view_str(q, b1, sizeof b1), nb_view_str(k, b2, sizeof b2),
                            nb_view_str(v, b3, sizeof b3));
    *g = dims_of(a);
    if (!fits(q, dt, g->B, g->L, g->E) || !fits(k, dt, g->B, g->S, g->E) || !fits(v, dt, g->B, g->S, g->Ev) ||
        !fits(out, dt, g->B, g->L, g->Ev) || lse->ndim != 2 || lse->shape[0] != g->B || lse->shape[1] != g->L ||
        lse->dtype != ldt || !nb_view_is_contiguous(lse))
        return nb_set_error(NB_ERR_SHAPE,
                            "%s: q %s, k %s, v %s do not fit [B, L, E], [B, S, E], [B, S, Ev] with out [B, L, Ev] "
                            "and lse [B, L] (lse contiguous %s)",
                            op, nb_view_str(q, b1, sizeof b1), nb_view_str(k, b2, sizeof b2),
                            nb_view_str(v, b3, sizeof b3), nb_dtype_name(ldt));
    if (!(a->dropout_p >= 0 && a->dropout_p < 1))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dropout_p %g outside [0, 1)", op, a->dropout_p);
    return check_mask(op, a->mask, dt, g);
}

nb_status nb_check_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a) {
    (void)be;
    att_dims g;
    return check_att("attention", out, lse, a, &g);
}

nb_status nb_check_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                      const nb_kview *gout, const nb_kview *out, const nb_kview *lse,
                                      const nb_attention_args *a) {
    (void)be;
    const char *op = "attention_backward";
    char b1[NB_VIEW_STR];
    att_dims g;
    nb_status st = check_att(op, out, lse, a, &g);
    if (st) return st;
    nb_dtype dt = a->q->dtype;
    if (!fits(gout, dt, g.B, g.L, g.Ev) || !fits(gq, dt, g.B, g.L, g.E) || !fits(gk, dt, g.B, g.S, g.E) ||
        !fits(gv, dt, g.B, g.S, g.Ev))
        return nb_set_error(NB_ERR_SHAPE, "%s: gout %s or a gradient does not match out/q/k/v (as %s)", op,
                            nb_view_str(gout, b1, sizeof b1), nb_dtype_name(wide_of(dt)));
    return NB_OK;
}
