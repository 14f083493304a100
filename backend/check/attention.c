/* attention.c - the shared contract checks of the attention, attention_backward slots (check.h). */
#include "check.h"

nb_status nb_check_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)lse, (void)a;
    return NB_OK;
}

nb_status nb_check_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv, const nb_kview *gout, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gq, (void)gk, (void)gv, (void)gout, (void)out, (void)lse, (void)a;
    return NB_OK;
}
