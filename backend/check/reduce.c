/* reduce.c - the shared contract checks of the reduce, argmax, argmin slots (check.h). */
#include "check.h"

nb_status nb_check_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)out, (void)x, (void)scale;
    return NB_OK;
}

nb_status nb_check_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)values, (void)indices, (void)x, (void)dim;
    return NB_OK;
}

nb_status nb_check_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)values, (void)indices, (void)x, (void)dim;
    return NB_OK;
}
