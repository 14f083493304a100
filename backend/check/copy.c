/* copy.c - the shared contract checks of the copy, fill, arange slots (check.h). */
#include "check.h"

nb_status nb_check_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)dst, (void)src;
    return NB_OK;
}

nb_status nb_check_fill(nb_backend *be, const nb_kview *dst, double value) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)dst, (void)value;
    return NB_OK;
}

nb_status nb_check_arange(nb_backend *be, const nb_kview *dst, double start, double step) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)dst, (void)start, (void)step;
    return NB_OK;
}
