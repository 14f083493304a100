/* upsample.c - the shared contract checks of the upsample2d, upsample2d_backward slots (check.h). */
#include "check.h"

nb_status nb_check_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear, bool align_corners) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)bilinear, (void)align_corners;
    return NB_OK;
}

nb_status nb_check_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear, bool align_corners) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gy, (void)bilinear, (void)align_corners;
    return NB_OK;
}
