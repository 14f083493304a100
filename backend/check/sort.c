/* sort.c - the shared contract checks of the sort slot (check.h). */
#include "check.h"

nb_status nb_check_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim, bool descending) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)values, (void)indices, (void)x, (void)dim, (void)descending;
    return NB_OK;
}
