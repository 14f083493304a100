/* binary.c - the shared contract checks of the binary, where slots (check.h). */
#include "check.h"

nb_status nb_check_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a, const nb_kview *b) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)out, (void)a, (void)b;
    return NB_OK;
}

nb_status nb_check_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a, const nb_kview *b) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)cond, (void)a, (void)b;
    return NB_OK;
}
