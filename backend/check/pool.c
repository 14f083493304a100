/* pool.c - the shared contract checks of the pooling slots (check.h): the [N, C, Ho, Wo] and [N, C, H, W] sides
 * contiguous 4-d of one float dtype and the same planes, indices contiguous int64 of the output side's shape, a
 * valid window, and non-empty planes for adaptive pooling. */
#include "check.h"
#include "nb_impl.h"

/* o: the [N, C, Ho, Wo] side, i: the [N, C, H, W] side, idx: int64 like o (or NULL). */
static nb_status check_pool_views(const char *slot, const nb_kview *o, const nb_kview *i, const nb_kview *idx) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (o->ndim != 4 || i->ndim != 4 || o->shape[0] != i->shape[0] || o->shape[1] != i->shape[1])
        return nb_set_error(NB_ERR_SHAPE, "%s: planes of %s and %s differ (expected [N, C, *, *] both)", slot,
                            nb_fmt_shape(o->ndim, o->shape, a, sizeof a), nb_fmt_shape(i->ndim, i->shape, b, sizeof b));
    if (!nb_dtype_in(o->dtype, NB_CHK_FH) || o->dtype != i->dtype)
        return nb_set_error(NB_ERR_DTYPE, "%s: needs float tensors of one dtype (%s, %s)", slot,
                            nb_dtype_name(o->dtype), nb_dtype_name(i->dtype));
    if (!nb_view_is_contiguous(o) || !nb_view_is_contiguous(i))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: views must be contiguous", slot);
    if (idx && (idx->dtype != NB_I64 || !nb_view_same_shape(idx, o) || !nb_view_is_contiguous(idx)))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: indices must be contiguous int64 of shape %s", slot,
                            nb_fmt_shape(o->ndim, o->shape, a, sizeof a));
    return NB_OK;
}

static nb_status check_pool_params(const char *slot, const nb_pool_params *p) {
    for (int d = 0; d < 2; d++)
        if (p->kernel[d] < 1 || p->stride[d] < 1 || p->dilation[d] < 1 || p->padding[d] < 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: bad window (kernel %lld, stride %lld, dilation %lld, "
                                "padding %lld in dim %d)", slot, (long long)p->kernel[d], (long long)p->stride[d],
                                (long long)p->dilation[d], (long long)p->padding[d], d);
    return NB_OK;
}

/* Adaptive windows are never empty once every size is >= 1. */
static nb_status check_adaptive(const char *slot, const nb_kview *o, const nb_kview *i) {
    nb_status st = check_pool_views(slot, o, i, NULL);
    if (st) return st;
    if (o->shape[2] < 1 || o->shape[3] < 1 || i->shape[2] < 1 || i->shape[3] < 1)
        return nb_set_error(NB_ERR_SHAPE, "%s: empty plane (input %lld x %lld, output %lld x %lld)", slot,
                            (long long)i->shape[2], (long long)i->shape[3], (long long)o->shape[2],
                            (long long)o->shape[3]);
    return NB_OK;
}

nb_status nb_check_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x,
                              const nb_pool_params *p) {
    (void)be;
    nb_status st = check_pool_views("max_pool2d", out, x, indices);
    return st ? st : check_pool_params("max_pool2d", p);
}

nb_status nb_check_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                       const nb_kview *indices) {
    (void)be;
    return check_pool_views("max_pool2d_backward", gy, gx, indices);
}

nb_status nb_check_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p) {
    (void)be;
    nb_status st = check_pool_views("avg_pool2d", out, x, NULL);
    return st ? st : check_pool_params("avg_pool2d", p);
}

nb_status nb_check_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                       const nb_pool_params *p) {
    (void)be;
    nb_status st = check_pool_views("avg_pool2d_backward", gy, gx, NULL);
    return st ? st : check_pool_params("avg_pool2d_backward", p);
}

nb_status nb_check_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x) {
    (void)be;
    return check_adaptive("adaptive_avg_pool2d", out, x);
}

nb_status nb_check_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy) {
    (void)be;
    return check_adaptive("adaptive_avg_pool2d_backward", gy, gx);
}

nb_status nb_check_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                       const nb_kview *x) {
    (void)be;
    nb_status st = check_adaptive("adaptive_max_pool2d", out, x);
    return st || !indices ? st : check_pool_views("adaptive_max_pool2d", out, x, indices);
}
