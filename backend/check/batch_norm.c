/* batch_norm.c - the shared contract checks of the batch_norm, batch_norm_backward slots (check.h). */
#include "check.h"

nb_status nb_check_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean, const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)save_mean, (void)save_invstd, (void)a;
    return NB_OK;
}

nb_status nb_check_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight, const nb_kview *gbias, const nb_kview *gy, const nb_kview *save_mean, const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gweight, (void)gbias, (void)gy, (void)save_mean, (void)save_invstd, (void)a;
    return NB_OK;
}
