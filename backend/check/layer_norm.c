/* layer_norm.c - the shared contract checks of the layer_norm, layer_norm_backward slots (check.h). */
#include "check.h"

nb_status nb_check_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd, const nb_layer_norm_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)mean, (void)rstd, (void)a;
    return NB_OK;
}

nb_status nb_check_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gb, const nb_kview *gy, const nb_kview *mean, const nb_kview *rstd, const nb_layer_norm_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gw, (void)gb, (void)gy, (void)mean, (void)rstd, (void)a;
    return NB_OK;
}
