/* reduce.c - the shared contract checks of reduce (op, dtypes, out's shape
 * against x's, no max/min over nothing) and of argmax/argmin (dim, int64
 * indices, values of x's dtype, shapes reduced at dim, a non-empty dim). */
#include "check.h"

/* dt is one of the dtypes in mask m (NB_DTM bits). */
nb_status nb_check_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale) {
    (void)be, (void)scale;
    static const char *const names[] = {"sum", "max", "min", "prod"};
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if ((unsigned)op > NB_REDUCE_PROD)
        return nb_set_error(NB_ERR_UNSUPPORTED, "reduce: op %d is not a reduction of this slot", (int)op);
    /* every dtype in, every dtype but bool out (CUDA reads and writes 16-bit
     * natively; the CPU's narrower case is its own, backend/cpu/reduce.c) */
    if (!nb_dtype_in(x->dtype, NB_DTM_A8) || !nb_dtype_in(out->dtype, NB_DTM_A8 & ~NB_DTM(NB_BOOL)))
        return nb_set_error(NB_ERR_DTYPE, "%s: cannot reduce %s into %s", names[op], nb_dtype_name(x->dtype),
                            nb_dtype_name(out->dtype));
    bool fits = out->ndim == x->ndim;
    for (int d = 0; d < x->ndim && fits; d++) fits = out->shape[d] == 1 || out->shape[d] == x->shape[d];
    if (!fits)
        return nb_set_error(NB_ERR_SHAPE, "reduce: out %s does not fit x %s (x's ndim, size 1 on reduced dims)",
                            nb_view_str(out, b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    /* outputs with nothing to reduce: an empty x under a non-empty out */
    if ((op == NB_REDUCE_MAX || op == NB_REDUCE_MIN) && nb_view_numel(out) > 0 && nb_view_numel(x) == 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: reduction over an empty dimension", names[op]);
    return NB_OK;
}

static nb_status check_arg_reduce(const char *op, const nb_kview *values, const nb_kview *indices,
                                  const nb_kview *x, int dim) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    nb_status st = nb_check_dim(op, x, dim);
    if (st) return st;
    if (!nb_dtype_in(x->dtype, NB_DTM_A6) || indices->dtype != NB_I64 || (values && values->dtype != x->dtype))
        return nb_set_error(NB_ERR_DTYPE, "%s: needs int64 indices and values of x's dtype (x %s)", op,
                            nb_dtype_name(x->dtype));
    bool ok = indices->ndim == x->ndim && (!values || values->ndim == x->ndim);
    for (int d = 0; d < x->ndim && ok; d++) {
        int64_t want = d == dim ? 1 : x->shape[d];
        ok = indices->shape[d] == want && (!values || values->shape[d] == want);
    }
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE, "%s: indices %s do not fit x %s reduced at dim %d", op,
                            nb_view_str(indices, b1, sizeof b1), nb_view_str(x, b2, sizeof b2), dim);
    if (x->shape[dim] == 0 && nb_view_numel(indices) > 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d of %s is empty", op, dim, nb_view_str(x, b1, sizeof b1));
    return NB_OK;
}

nb_status nb_check_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim) {
    (void)be;
    return check_arg_reduce("argmax", values, indices, x, dim);
}

nb_status nb_check_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim) {
    (void)be;
    return check_arg_reduce("argmin", values, indices, x, dim);
}
