/* pool.c - the shared contract checks of the max_pool2d, max_pool2d_backward, avg_pool2d, avg_pool2d_backward, adaptive_avg_pool2d, adaptive_avg_pool2d_backward, adaptive_max_pool2d slots (check.h). */
#include "check.h"

nb_status nb_check_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x, const nb_pool_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)indices, (void)x, (void)p;
    return NB_OK;
}

nb_status nb_check_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *indices) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gy, (void)indices;
    return NB_OK;
}

nb_status nb_check_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x, (void)p;
    return NB_OK;
}

nb_status nb_check_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_pool_params *p) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gy, (void)p;
    return NB_OK;
}

nb_status nb_check_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)x;
    return NB_OK;
}

nb_status nb_check_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)gx, (void)gy;
    return NB_OK;
}

nb_status nb_check_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)out, (void)indices, (void)x;
    return NB_OK;
}
