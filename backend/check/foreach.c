/* foreach.c - the shared contract checks of the norm_multi, mul_multi, cast_multi slots (check.h). */
#include "check.h"

nb_status nb_check_norm_multi(nb_backend *be, int n, const nb_kview *xs, double p, const nb_kview *out) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)n, (void)xs, (void)p, (void)out;
    return NB_OK;
}

nb_status nb_check_mul_multi(nb_backend *be, int n, const nb_kview *xs, const nb_kview *s) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)n, (void)xs, (void)s;
    return NB_OK;
}

nb_status nb_check_cast_multi(nb_backend *be, int n, const nb_kview *dst, const nb_kview *src) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)n, (void)dst, (void)src;
    return NB_OK;
}
