/* random.c - the shared contract checks of the random, dropout slots (check.h). */
#include "check.h"

nb_status nb_check_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b, nb_philox_state rng) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)dst, (void)dist, (void)a, (void)b, (void)rng;
    return NB_OK;
}

nb_status nb_check_dropout(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x, double p, nb_philox_state rng) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)mask, (void)x, (void)p, (void)rng;
    return NB_OK;
}
