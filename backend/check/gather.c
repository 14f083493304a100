/* gather.c - the shared contract checks of the gather, scatter slots (check.h). */
#include "check.h"

nb_status nb_check_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)dim, (void)index;
    return NB_OK;
}

nb_status nb_check_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src, nb_scatter_mode mode, bool include_self) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)dim, (void)index, (void)src, (void)mode, (void)include_self;
    return NB_OK;
}
