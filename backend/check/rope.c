/* rope.c - the shared contract checks of the rope slot (check.h). */
#include "check.h"

nb_status nb_check_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos, const nb_kview *sin, bool inverse) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)cos, (void)sin, (void)inverse;
    return NB_OK;
}
