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
// reduce.cu
nb_status nb_cuda_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale);
nb_status nb_cuda_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim);
nb_status nb_cuda_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim);
// scan.cu
nb_status nb_cuda_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                       const nb_kview *x, int dim);
nb_status nb_cuda_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                                const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim);
// sort.cu
nb_status nb_cuda_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                       bool descending);
// gather.cu
nb_status nb_cuda_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index);
nb_status nb_cuda_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                          nb_scatter_mode mode, bool include_self);
// index.cu
nb_status nb_cuda_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                               const nb_kview *index);
nb_status nb_cuda_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g,
                            int64_t skip_index);
nb_status nb_cuda_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                             const nb_kview *src);
nb_status nb_cuda_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                        const nb_kview *b);
nb_status nb_cuda_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x);
// softmax.cu
nb_status nb_cuda_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log);
nb_status nb_cuda_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *y, int dim,
                                   bool log);
// loss.cu
nb_status nb_cuda_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *logits,
                                const nb_kview *target, int64_t ignore_index);
nb_status nb_cuda_cross_entropy_backward(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                         const nb_kview *logits, const nb_kview *lse, const nb_kview *target,
                                         int64_t ignore_index);
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        NB_CUDA_SET_REDUCE_SLOTS(i); \
    } while (0)

// reduce.cu, scan.cu, sort.cu, gather.cu, index.cu, softmax.cu, loss.cu
#define NB_CUDA_SET_REDUCE_SLOTS(i)                                 \
    do {                                                            \
        (i)->reduce = nb_cuda_reduce;                               \
        (i)->argmax = nb_cuda_argmax;                               \
        (i)->argmin = nb_cuda_argmin;                               \
        (i)->scan = nb_cuda_scan;                                   \
        (i)->scan_backward = nb_cuda_scan_backward;                 \
        (i)->sort = nb_cuda_sort;                                   \
        (i)->gather = nb_cuda_gather;                               \
        (i)->scatter = nb_cuda_scatter;                             \
        (i)->index_select = nb_cuda_index_select;                   \
        (i)->index_add = nb_cuda_index_add;                         \
        (i)->index_copy = nb_cuda_index_copy;                       \
        (i)->where = nb_cuda_where;                                 \
        (i)->nonzero = nb_cuda_nonzero;                             \
        (i)->softmax = nb_cuda_softmax;                             \
        (i)->softmax_backward = nb_cuda_softmax_backward;           \
        (i)->cross_entropy = nb_cuda_cross_entropy;                 \
        (i)->cross_entropy_backward = nb_cuda_cross_entropy_backward; \
    } while (0)
