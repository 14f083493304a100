// cuda_kernels.h - the kernel slots of the CUDA backend, one group per
// file of backend/cuda (internal). NB_CUDA_SET_KERNEL_SLOTS fills them into
// the vtable (cuda_backend.cu); their contracts are nb_backend.h's.
#pragma once

#include "nb_backend_util.h"

extern "C" {
// copy.cu
nb_status nb_cuda_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src);
nb_status nb_cuda_fill(nb_backend *be, const nb_kview *dst, double value);
nb_status nb_cuda_arange(nb_backend *be, const nb_kview *dst, double start, double step);
// unary.cu
nb_status nb_cuda_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha);
nb_status nb_cuda_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                 const nb_kview *x, const nb_kview *y, double alpha);
// binary.cu
nb_status nb_cuda_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                         const nb_kview *b);
// random.cu
nb_status nb_cuda_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b, uint64_t seed,
                         uint64_t offset);
// optim.cu
nb_status nb_cuda_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad, const nb_kview *exp_avg,
                            const nb_kview *exp_avg_sq, const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h);
nb_status nb_cuda_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *momentum_buf, const nb_sgd_hyper *h);
nb_status nb_cuda_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                  const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                  const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h);
nb_status nb_cuda_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *momentum_bufs, const nb_sgd_hyper *h);
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        (i)->unary = nb_cuda_unary; \
        (i)->unary_backward = nb_cuda_unary_backward; \
        (i)->binary = nb_cuda_binary; \
        (i)->random = nb_cuda_random; \
        (i)->adam_step = nb_cuda_adam_step; \
        (i)->sgd_step = nb_cuda_sgd_step; \
        (i)->adam_step_multi = nb_cuda_adam_step_multi; \
        (i)->sgd_step_multi = nb_cuda_sgd_step_multi; \
    } while (0)
