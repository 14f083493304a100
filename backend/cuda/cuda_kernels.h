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
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        (i)->unary = nb_cuda_unary; \
        (i)->unary_backward = nb_cuda_unary_backward; \
        (i)->binary = nb_cuda_binary; \
    } while (0)
