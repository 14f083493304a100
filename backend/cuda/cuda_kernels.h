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
// matmul.cu
nb_status nb_cuda_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                         double beta);
// attention.cu
nb_status nb_cuda_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                            const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale,
                            double dropout_p, uint64_t seed, uint64_t offset);
nb_status nb_cuda_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                     const nb_kview *gout, const nb_kview *q, const nb_kview *k, const nb_kview *v,
                                     const nb_kview *out, const nb_kview *lse, const nb_kview *mask, bool is_causal,
                                     double scale, double dropout_p, uint64_t seed, uint64_t offset);
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        (i)->matmul = nb_cuda_matmul; \
        (i)->attention = nb_cuda_attention; \
        (i)->attention_backward = nb_cuda_attention_backward; \
    } while (0)
