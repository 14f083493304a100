/* upsample.c - the shared contract checks of the upsample2d slots (check.h): input and output contiguous float32
 * or float64 [N, C, *, *] of one dtype with equal N and C, and no empty plane resized to a non-empty one. */
#include "check.h"

/* x is the [N, C, H, W] side, y the [N, C, Ho, Wo] side. */
static nb_status check_upsample(const char *slot, const nb_kview *x, const nb_kview *y) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    bool ok = x->ndim == 4 && y->ndim == 4 && x->dtype == y->dtype && nb_dtype_in(x->dtype, NB_CHK_F) &&
              nb_view_is_contiguous(x) && nb_view_is_contiguous(y) && x->shape[0] == y->shape[0] &&
              x->shape[1] == y->shape[1];
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE, "%s: input %s and output %s must be contiguous float [N, C, H, W] "
                            "tensors of one dtype with equal N and C", slot, nb_view_str(x, b1, sizeof b1),
                            nb_view_str(y, b2, sizeof b2));
    bool empty_in = x->shape[2] == 0 || x->shape[3] == 0, empty_out = y->shape[2] == 0 || y->shape[3] == 0;
    if (empty_in && !empty_out && x->shape[0] * x->shape[1] > 0)
        return nb_set_error(NB_ERR_SHAPE, "%s: cannot resize the empty planes of %s to %s", slot,
                            nb_view_str(x, b1, sizeof b1), nb_view_str(y, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear,
                              bool align_corners) {
    (void)be, (void)bilinear, (void)align_corners;
    return check_upsample("upsample2d", x, out);
}

nb_status nb_check_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear,
                                       bool align_corners) {
    (void)be, (void)bilinear, (void)align_corners;
    return check_upsample("upsample2d_backward", gx, gy);
}
