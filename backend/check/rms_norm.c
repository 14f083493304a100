/* rms_norm.c - the shared contract checks of rms_norm and its backward: x a
 * contiguous float32/float64 [R, M], the other [R, M] views like it, rstd [R]
 * and the weights [M] contiguous in x's dtype. */
#include "check.h"

/* v is NULL (an optional view left out: the dispatcher has checked the
 * required ones) or a contiguous view of n elements of dt. */
static nb_status check_vec(const char *op, const char *what, const nb_kview *v, int64_t n, nb_dtype dt) {
    char b1[NB_VIEW_STR];
    if (!v) return NB_OK;
    if (nb_view_numel(v) != n || !nb_view_is_contiguous(v) || v->dtype != dt)
        return nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be contiguous with %lld %s elements", op, what,
                            nb_view_str(v, b1, sizeof b1), (long long)n, nb_dtype_name(dt));
    return NB_OK;
}

/* x and the other [R, M] views (each may be NULL): 2-D, contiguous, float, one dtype. */
static nb_status check_rows(const char *op, const nb_kview *x, const nb_kview *const *vs, int nv) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (x->ndim != 2 || !nb_view_is_contiguous(x) || (x->dtype != NB_F32 && x->dtype != NB_F64))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: x %s must be a contiguous float [R, M] view", op,
                            nb_view_str(x, b1, sizeof b1));
    for (int i = 0; i < nv; i++)
        if (vs[i] && (!nb_view_same_shape(x, vs[i]) || !nb_view_is_contiguous(vs[i]) || vs[i]->dtype != x->dtype))
            return nb_set_error(NB_ERR_SHAPE, "%s: %s does not match x %s (contiguous, same dtype)", op,
                                nb_view_str(vs[i], b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                            const nb_kview *w, double eps) {
    (void)be, (void)eps;
    const char *op = "rms_norm";
    nb_status st = check_rows(op, x, (const nb_kview *[]){out}, 1);
    if (!st) st = check_vec(op, "rstd", rstd, x->shape[0], x->dtype);
    if (!st) st = check_vec(op, "weight", w, x->shape[1], x->dtype);
    return st;
}

nb_status nb_check_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                     const nb_kview *x, const nb_kview *w, const nb_kview *rstd) {
    (void)be;
    const char *op = "rms_norm_backward";
    nb_status st = check_rows(op, x, (const nb_kview *[]){gy, gx}, 2);
    if (!st) st = check_vec(op, "rstd", rstd, x->shape[0], x->dtype);
    if (!st) st = check_vec(op, "weight", w, x->shape[1], x->dtype);
    if (!st) st = check_vec(op, "gweight", gw, x->shape[1], x->dtype);
    return st;
}
