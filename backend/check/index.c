/* index.c - the shared contract checks of index_select, index_add, index_copy (dim, a 1-d int64 index, shapes
 * that fit it, one dtype, contiguous views) and nonzero (out's dtype and layout). The index values are the
 * backends' to check: they are data. */
#include "check.h"

/* big has `size` at dim, small has the index's length there and big's
 * sizes elsewhere; one dtype; all contiguous. */
static nb_status check_index_args(const char *op, const nb_kview *big, const nb_kview *small, int dim,
                                  const nb_kview *index) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    nb_status st = nb_check_dim(op, big, dim);
    if (st) return st;
    if (index->dtype != NB_I64 || index->ndim != 1)
        return nb_set_error(NB_ERR_DTYPE, "%s: index must be a 1-D int64 tensor, got %s", op,
                            nb_view_str(index, b1, sizeof b1));
    bool shape_ok = small->ndim == big->ndim && small->shape[dim] == index->shape[0];
    for (int d = 0; shape_ok && d < big->ndim; d++) shape_ok = d == dim || small->shape[d] == big->shape[d];
    if (!shape_ok)
        return nb_set_error(NB_ERR_SHAPE, "%s: shapes %s and %s do not fit index %s along dim %d", op,
                            nb_view_str(big, b1, sizeof b1), nb_view_str(small, b2, sizeof b2),
                            nb_view_str(index, b3, sizeof b3), dim);
    if (small->dtype != big->dtype)
        return nb_set_error(NB_ERR_DTYPE, "%s: dtypes %s and %s differ", op, nb_dtype_name(big->dtype),
                            nb_dtype_name(small->dtype));
    if (!nb_view_is_contiguous(big) || !nb_view_is_contiguous(small) || !nb_view_is_contiguous(index))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensors must be contiguous", op);
    return NB_OK;
}

nb_status nb_check_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                                const nb_kview *index) {
    (void)be;
    return check_index_args("index_select", x, out, dim, index);
}

nb_status nb_check_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g,
                             int64_t skip_index, bool accumulate) {
    (void)be, (void)skip_index, (void)accumulate; /* any value: INT64_MIN for none */
    nb_status st = check_index_args("index_add", gx, g, dim, index);
    if (st) return st;
    if (!nb_dtype_in(gx->dtype, NB_CHK_F | NB_DTM_INT))
        return nb_set_error(NB_ERR_DTYPE, "index_add: needs a float32, float64 or integer dtype, got %s",
                            nb_dtype_name(gx->dtype));
    return NB_OK;
}

nb_status nb_check_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                              const nb_kview *src) {
    (void)be;
    return check_index_args("index_copy", out, src, dim, index);
}

/* out (if given) contiguous int64, [n, x.ndim] or [n]; whether n is the
 * number of nonzeros depends on x's values: the backends check that. */
nb_status nb_check_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x) {
    (void)be, (void)count;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if ((unsigned)x->dtype >= NB_DTYPE_COUNT)
        return nb_set_error(NB_ERR_DTYPE, "nonzero: invalid dtype %d", (int)x->dtype);
    if (!out) return NB_OK;
    bool ok = out->dtype == NB_I64 && nb_view_is_contiguous(out) && (out->ndim == 1 || out->ndim == 2) &&
              (out->ndim == 1 || out->shape[1] == x->ndim);
    if (!ok)
        return nb_set_error(NB_ERR_INVALID_ARG, "nonzero: out %s must be contiguous int64 [n, %d] or [n] for input %s",
                            nb_view_str(out, b1, sizeof b1), x->ndim, nb_view_str(x, b2, sizeof b2));
    return NB_OK;
}
