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
// linalg.cu
nb_status nb_cuda_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
nb_status nb_cuda_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet,
                             const nb_kview *a);
nb_status nb_cuda_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper);
nb_status nb_cuda_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
// linalg_decomp.cu
nb_status nb_cuda_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a);
nb_status nb_cuda_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper);
nb_status nb_cuda_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh,
                             const nb_kview *a);
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        (i)->linalg_solve = nb_cuda_linalg_solve; \
        (i)->linalg_det = nb_cuda_linalg_det; \
        (i)->linalg_cholesky = nb_cuda_linalg_cholesky; \
        (i)->linalg_lstsq = nb_cuda_linalg_lstsq; \
        (i)->linalg_qr = nb_cuda_linalg_qr; \
        (i)->linalg_eigh = nb_cuda_linalg_eigh; \
        (i)->linalg_svd = nb_cuda_linalg_svd; \
    } while (0)
