// Host mock of backend/cuda/cuda_common.cuh: kernels run sequentially
// (one thread, one block), scratch comes from a bounds-checked registry.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nb_backend_util.h"

// the kernels' declarations, as backend/cuda/cuda_common.cuh makes them
extern "C" {
#define NB_CUDA_DECL_1(slot) nb_status nb_cuda_##slot NB_SLOT_PARAMS(slot);
#define NB_CUDA_DECL_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CUDA_DECL_##cuda(slot)
#include "nb_slots.def"
#undef NB_SLOT
}

#define __global__
#define __device__
typedef void *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice };
struct MockDim { unsigned x; };
static const MockDim threadIdx = {0}, blockIdx = {0}, blockDim = {1}, gridDim = {1};
inline int __syncthreads_or(int p) { return p; }

// registry of live allocations, for bounds checks of every library call
void *reg_alloc(size_t bytes);
void reg_free(void *p);
void check_region(const void *p, size_t bytes, const char *what);

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st);
inline cudaError_t cudaGetLastError() { return 0; }

namespace nbc {
constexpr int MAXD = NB_MAX_DIMS;
constexpr int THREADS = 256;
enum DevErr { ERR_NONE = 0, ERR_INDEX = 1, ERR_ZERO_DIV = 2, ERR_TARGET = 3, ERR_SINGULAR = 4, ERR_NOT_PD = 5, ERR_RANK = 6,
              ERR_CONVERGE = 7 };
inline cudaStream_t stream_of(nb_backend *) { return nullptr; }
int device_of(nb_backend *be);
int *err_word(nb_backend *be);
int slot_tag(const char *slot);
nb_status cuda_fail(const char *slot, const char *call, cudaError_t e);
inline nb_status launched(const char *) { return NB_OK; }
#define NBC_TRY(slot, call)                                                  \
    do {                                                                     \
        cudaError_t nbc_e_ = (call);                                         \
        if (nbc_e_ != cudaSuccess) return nbc::cuda_fail(slot, #call, nbc_e_); \
    } while (0)
inline void raise(int *word, int kind, int tag) { if (*word == 0) *word = kind * 1024 + tag; }
struct Scratch {
    nb_backend *be = nullptr;
    void *ptr = nullptr;
    Scratch() = default;
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch() { if (ptr) reg_free(ptr); }
    bool alloc(nb_backend *b, size_t bytes) {
        be = b;
        ptr = reg_alloc(bytes ? bytes : 1);
        // poison: uninitialised scratch reads show up as NaN / garbage
        memset(ptr, 0xff, bytes ? bytes : 1);
        return true;
    }
    template <typename T> T *as() const { return (T *)ptr; }
};
template <typename F> nb_status dispatch_float(const char *slot, nb_dtype dt, F &&f) {
    switch (dt) {
    case NB_F32: return f(float());
    case NB_F64: return f(double());
    default: return nb_set_error(NB_ERR_DTYPE, "%s: %s is not supported on cuda", slot, nb_dtype_name(dt));
    }
}
inline int64_t numel(const nb_kview *v) { int64_t n = 1; for (int i = 0; i < v->ndim; i++) n *= v->shape[i]; return n; }
inline bool contiguous(const nb_kview *v) {
    int64_t s = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != s) return false;
        s *= v->shape[i];
    }
    return true;
}
inline unsigned blocks_for(int64_t, int = THREADS) { return 1; }
#define NBC_GRID_STRIDE(i, n) for (int64_t i = 0; i < (n); i++)
} // namespace nbc
