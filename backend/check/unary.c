/* unary.c - the shared contract checks of the unary, unary_backward slots (check.h). */
#include "check.h"

nb_status nb_check_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)out, (void)x, (void)alpha;
    return NB_OK;
}

nb_status nb_check_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy, const nb_kview *x, const nb_kview *y, double alpha) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)gx, (void)gy, (void)x, (void)y, (void)alpha;
    return NB_OK;
}
