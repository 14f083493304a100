/* scan.c - the shared contract checks of scan and scan_backward: the op,
 * dim, the views of x's (gx's) shape that the op uses, and their dtypes. */
#include "check.h"

/* dt is one of the dtypes in mask m (NB_DTM bits). */
nb_status nb_check_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                        const nb_kview *x, int dim) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN, fl = nb_dtype_in(x->dtype, NB_CHK_F);
    if ((unsigned)op >= NB_REDUCE_OP_COUNT) return nb_set_error(NB_ERR_INVALID_ARG, "scan: bad op %d", (int)op);
    nb_status st = nb_check_dim("scan", x, dim);
    if (st) return st;
    if (!nb_view_same_shape(out, x) || (indices && !nb_view_same_shape(indices, x)) || (ext && !indices))
        return nb_set_error(NB_ERR_SHAPE, "scan: out %s (and indices for cummax/cummin) must have x's shape %s",
                            nb_view_str(out, b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    /* SUM/PROD of integers and bool go into int64; the rest keep x's dtype */
    bool dt_ok = nb_dtype_in(x->dtype, NB_DTM_A6) && (!indices || indices->dtype == NB_I64);
    if (fl || ext) dt_ok = dt_ok && out->dtype == x->dtype;
    else dt_ok = dt_ok && out->dtype == NB_I64;
    if (op == NB_REDUCE_LOGSUMEXP && !fl) dt_ok = false;
    if (!dt_ok)
        return nb_set_error(NB_ERR_DTYPE, "scan: op %d cannot take x %s into out %s", (int)op, nb_dtype_name(x->dtype),
                            nb_dtype_name(out->dtype));
    return NB_OK;
}

nb_status nb_check_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                                 const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if ((unsigned)op >= NB_REDUCE_OP_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "scan_backward: bad op %d", (int)op);
    nb_status st = nb_check_dim("scan_backward", gx, dim);
    if (st) return st;
    bool need_xo = op == NB_REDUCE_PROD || op == NB_REDUCE_LOGSUMEXP;
    bool need_i = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    if ((need_xo && (!x || !out)) || (need_i && !indices))
        return nb_set_error(NB_ERR_INVALID_ARG, "scan_backward: op %d needs its saved tensors", (int)op);
    /* only the views the op reads: the others may be anything */
    const nb_kview *vs[] = {g, need_xo ? x : NULL, need_xo ? out : NULL, need_i ? indices : NULL};
    for (int k = 0; k < 4; k++) {
        if (!vs[k]) continue;
        if (!nb_view_same_shape(vs[k], gx))
            return nb_set_error(NB_ERR_SHAPE, "scan_backward: %s does not match gx %s",
                                nb_view_str(vs[k], b1, sizeof b1), nb_view_str(gx, b2, sizeof b2));
        if (vs[k]->dtype != (k == 3 ? NB_I64 : gx->dtype) || !nb_dtype_in(gx->dtype, NB_CHK_F))
            return nb_set_error(NB_ERR_DTYPE, "scan_backward: needs float gx, g, x, out of one dtype (%s, %s)",
                                nb_dtype_name(gx->dtype), nb_dtype_name(vs[k]->dtype));
    }
    return NB_OK;
}
