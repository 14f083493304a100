/* check.c - the helpers of the shared contract checks (check.h). */
#include "check.h"

nb_status nb_check_dim(const char *slot, const nb_kview *v, int dim) {
    char b[NB_VIEW_STR];
    if (dim < 0 || dim >= v->ndim)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %s", slot, dim, nb_view_str(v, b, sizeof b));
    return NB_OK;
}

nb_status nb_check_alike(const char *slot, int n, const nb_kview *const *vs, unsigned dtypes, const char *what,
                         bool contiguous) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    const nb_kview *a = vs[0];
    for (int i = 0; i < n; i++) {
        const nb_kview *v = vs[i];
        if (!v) continue;
        if (!nb_view_same_shape(a, v))
            return nb_set_error(NB_ERR_SHAPE, "%s: shapes %s and %s differ", slot, nb_view_str(a, b1, sizeof b1),
                                nb_view_str(v, b2, sizeof b2));
        if (!nb_dtype_in(v->dtype, dtypes) || v->dtype != a->dtype)
            return nb_set_error(NB_ERR_DTYPE, "%s: needs %s tensors of one dtype (%s, %s)", slot, what,
                                nb_dtype_name(a->dtype), nb_dtype_name(v->dtype));
        if (contiguous && !nb_view_is_contiguous(v))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be contiguous", slot, nb_view_str(v, b1, sizeof b1));
    }
    return NB_OK;
}

static nb_status check_rows(const char *op, const nb_kview *x, const nb_kview *const *vs, int nv, unsigned dtypes) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!x) return nb_set_error(NB_ERR_INVALID_ARG, "%s: x is NULL", op);
    if (x->ndim != 2 || !nb_view_is_contiguous(x) || !nb_dtype_in(x->dtype, dtypes))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: x %s must be a contiguous float [R, M] view", op,
                            nb_view_str(x, b1, sizeof b1));
    for (int i = 0; i < nv; i++)
        if (vs[i] && (!nb_view_same_shape(x, vs[i]) || !nb_view_is_contiguous(vs[i]) || vs[i]->dtype != x->dtype))
            return nb_set_error(NB_ERR_SHAPE, "%s: %s does not match x %s (contiguous, same dtype)", op,
                                nb_view_str(vs[i], b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_rows(const char *op, const nb_kview *x, const nb_kview *const *vs, int nv) {
    return check_rows(op, x, vs, nv, NB_CHK_F);
}

nb_status nb_check_rows16(const char *op, const nb_kview *x, const nb_kview *const *vs, int nv) {
    return check_rows(op, x, vs, nv, NB_CHK_FH);
}

nb_status nb_check_vector(const char *op, const char *what, const nb_kview *v, int64_t n, nb_dtype dt) {
    char b1[NB_VIEW_STR];
    if (!v) return NB_OK;
    if (nb_view_numel(v) != n || !nb_view_is_contiguous(v) || v->dtype != dt)
        return nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be contiguous with %lld %s elements", op, what,
                            nb_view_str(v, b1, sizeof b1), (long long)n, nb_dtype_name(dt));
    return NB_OK;
}
