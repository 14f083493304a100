/* optim.c - the shared contract checks of the adam_step, sgd_step, adam_step_multi, sgd_step_multi slots (check.h). */
#include "check.h"

nb_status nb_check_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad, const nb_kview *exp_avg, const nb_kview *exp_avg_sq, const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)param, (void)grad, (void)exp_avg, (void)exp_avg_sq, (void)max_exp_avg_sq, (void)h;
    return NB_OK;
}

nb_status nb_check_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad, const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)param, (void)grad, (void)momentum_buf, (void)h;
    return NB_OK;
}

nb_status nb_check_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads, const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs, const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)n, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)max_exp_avg_sqs, (void)h;
    return NB_OK;
}

nb_status nb_check_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads, const nb_kview *momentum_bufs, const nb_sgd_hyper *h) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)n, (void)params, (void)grads, (void)momentum_bufs, (void)h;
    return NB_OK;
}
