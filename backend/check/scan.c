/* scan.c - the shared contract checks of the scan, scan_backward slots (check.h). */
#include "check.h"

nb_status nb_check_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices, const nb_kview *x, int dim) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)out, (void)indices, (void)x, (void)dim;
    return NB_OK;
}

nb_status nb_check_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g, const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)op, (void)gx, (void)g, (void)x, (void)out, (void)indices, (void)dim;
    return NB_OK;
}
