/* index.c - the shared contract checks of the index_select, index_add, index_copy, nonzero slots (check.h). */
#include "check.h"

nb_status nb_check_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)dim, (void)index;
    return NB_OK;
}

nb_status nb_check_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g, int64_t skip_index) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)dim, (void)index, (void)g, (void)skip_index;
    return NB_OK;
}

nb_status nb_check_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)dim, (void)index, (void)src;
    return NB_OK;
}

nb_status nb_check_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)count, (void)x;
    return NB_OK;
}
