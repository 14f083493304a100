/* conv.c - the shared contract checks of the conv2d, conv2d_backward_input, conv2d_backward_weight slots (check.h). */
#include "check.h"

nb_status nb_check_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w, const nb_kview *bias, const nb_conv_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)w, (void)bias, (void)p;
    return NB_OK;
}

nb_status nb_check_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w, const nb_conv_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gy, (void)w, (void)p;
    return NB_OK;
}

nb_status nb_check_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias, const nb_kview *gy, const nb_kview *x, const nb_conv_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gw, (void)gbias, (void)gy, (void)x, (void)p;
    return NB_OK;
}
