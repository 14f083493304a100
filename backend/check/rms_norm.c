/* rms_norm.c - the shared contract checks of the rms_norm, rms_norm_backward slots (check.h). */
#include "check.h"

nb_status nb_check_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x, const nb_kview *w, double eps) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)rstd, (void)x, (void)w, (void)eps;
    return NB_OK;
}

nb_status nb_check_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy, const nb_kview *x, const nb_kview *w, const nb_kview *rstd) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gw, (void)gy, (void)x, (void)w, (void)rstd;
    return NB_OK;
}
