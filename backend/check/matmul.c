/* matmul.c - the shared contract checks of the matmul, addmm, matmul_bgrad slots (check.h). */
#include "check.h"

nb_status nb_check_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha, double beta) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)c, (void)a, (void)b, (void)alpha, (void)beta;
    return NB_OK;
}

nb_status nb_check_addmm(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, const nb_kview *bias) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)c, (void)a, (void)b, (void)bias;
    return NB_OK;
}

nb_status nb_check_matmul_bgrad(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, const nb_kview *asum) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)c, (void)a, (void)b, (void)asum;
    return NB_OK;
}
