/* gather.c - the shared contract checks of gather and scatter: dim, an int64 index that fits the views, dtypes
 * (scatter's reduce mode's). The index values are the backends' to check: they are data. */
#include "check.h"

/* index int64 with big's ndim; every dim but `dim` no larger than big's
 * (and no larger than small's, when small is given); one dtype. */
static nb_status check_args(const char *op, const nb_kview *big, const nb_kview *index, const nb_kview *small,
                            int dim) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    nb_status st = nb_check_dim(op, big, dim);
    if (st) return st;
    if (index->dtype != NB_I64)
        return nb_set_error(NB_ERR_DTYPE, "%s: index must be int64, got %s", op, nb_dtype_name(index->dtype));
    bool ok = index->ndim == big->ndim && (!small || small->ndim == big->ndim);
    for (int d = 0; ok && d < big->ndim; d++) {
        ok = d == dim || index->shape[d] <= big->shape[d];
        if (small) ok = ok && small->shape[d] >= index->shape[d];
    }
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE, "%s: index %s does not fit %s along dim %d", op,
                            nb_view_str(index, b1, sizeof b1), nb_view_str(big, b2, sizeof b2), dim);
    if (small && small->dtype != big->dtype)
        return nb_set_error(NB_ERR_DTYPE, "%s: dtypes %s and %s differ", op, nb_dtype_name(big->dtype),
                            nb_dtype_name(small->dtype));
    return NB_OK;
}

nb_status nb_check_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    nb_status st = check_args("gather", x, index, NULL, dim);
    if (st) return st;
    if (!nb_view_same_shape(out, index) || out->dtype != x->dtype)
        return nb_set_error(NB_ERR_SHAPE, "gather: out %s must have index's shape %s and input's dtype",
                            nb_view_str(out, b1, sizeof b1), nb_view_str(index, b2, sizeof b2));
    return NB_OK;
}

static const char *const mode_names[NB_SCATTER_MODE_COUNT] = {"none", "sum", "prod", "mean", "amax", "amin"};

nb_status nb_check_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                           nb_scatter_mode mode, bool include_self) {
    (void)be, (void)include_self;
    if ((unsigned)mode >= NB_SCATTER_MODE_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "scatter: bad reduce mode %d", (int)mode);
    nb_status st = check_args("scatter", out, index, src, dim);
    if (st) return st;
    /* the reductions take f32, f64, i32, i64, u8; plain scatter bool too
     * (not the 16-bit storage dtypes) */
    unsigned ok = NB_CHK_F | NB_DTM_INT | (mode == NB_SCATTER_ASSIGN ? NB_DTM(NB_BOOL) : 0);
    if (!nb_dtype_in(out->dtype, ok))
        return nb_set_error(NB_ERR_DTYPE, "scatter: reduce '%s' does not take %s", mode_names[mode],
                            nb_dtype_name(out->dtype));
    return NB_OK;
}
