/* sort.c - the shared contract checks of sort: dim, int64 indices (and values) that fit x, a dtype sort takes. */
#include "check.h"
#include "nb_impl.h"

/* v has x's sizes but k at dim. */
static bool fits(const nb_kview *v, const nb_kview *x, int dim, int64_t k) {
    if (v->ndim != x->ndim || v->shape[dim] != k) return false;
    for (int d = 0; d < x->ndim; d++)
        if (d != dim && v->shape[d] != x->shape[d]) return false;
    return true;
}

nb_status nb_check_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                        bool descending) {
    (void)be, (void)descending;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    nb_status st = nb_check_dim("sort", x, dim);
    if (st) return st;
    if (indices->dtype != NB_I64)
        return nb_set_error(NB_ERR_DTYPE, "sort: indices must be int64, got %s", nb_dtype_name(indices->dtype));
    int64_t k = indices->shape[dim];
    if (k > x->shape[dim] || !fits(indices, x, dim, k) || (values && !fits(values, x, dim, k)))
        return nb_set_error(NB_ERR_SHAPE, "sort: indices %s (and values) do not fit input %s along dim %d",
                            nb_view_str(indices, b1, sizeof b1), nb_view_str(x, b2, sizeof b2), dim);
    if (values && values->dtype != x->dtype)
        return nb_set_error(NB_ERR_DTYPE, "sort: values %s and input %s dtypes differ", nb_dtype_name(values->dtype),
                            nb_dtype_name(x->dtype));
    if (!nb_dtype_is_compute(x->dtype)) /* even for an empty x */
        return nb_set_error(NB_ERR_DTYPE, "sort: not supported for %s (a storage dtype: cast first)",
                            nb_dtype_name(x->dtype));
    return NB_OK;
}
