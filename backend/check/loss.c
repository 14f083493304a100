/* loss.c - the shared contract checks of the cross_entropy, cross_entropy_backward slots (check.h). */
#include "check.h"

nb_status nb_check_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *logits, const nb_kview *target, int64_t ignore_index) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)loss, (void)lse, (void)logits, (void)target, (void)ignore_index;
    return NB_OK;
}

nb_status nb_check_cross_entropy_backward(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss, const nb_kview *logits, const nb_kview *lse, const nb_kview *target, int64_t ignore_index) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)glogits, (void)gloss, (void)logits, (void)lse, (void)target, (void)ignore_index;
    return NB_OK;
}
