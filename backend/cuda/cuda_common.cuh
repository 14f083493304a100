// cuda_common.cuh - what every file of the CUDA backend shares (internal):
// the per-device context and its current stream, error reporting (CUDA
// calls, launches, the per-stream device error word), scratch memory from
// the caching allocator, dtype traits (float16/bfloat16 load and store
// through float), the strided iterator that elementwise kernels walk, and
// launch sizes. Kernels are deterministic: no atomics in reductions, fixed
// reduction trees, one writer per output element.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "nb_backend_util.h"

// The kernels, one per slot whose cuda column in backend/nb_slots.def is 1
// (nb_cuda_<slot> in backend/cuda/<family>.cu; cuda_backend.cu puts them
// in the vtable), and the copy for other slots' own use (no profiler row
// of its own).
extern "C" {
#define NB_CUDA_DECL_1(slot) nb_status nb_cuda_##slot NB_SLOT_PARAMS(slot);
#define NB_CUDA_DECL_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CUDA_DECL_##cuda(slot)
#include "nb_slots.def"
#undef NB_SLOT
nb_status nb_cuda_copy_into(nb_backend *be, const nb_kview *dst, const nb_kview *src);
}

namespace nbc {

constexpr int MAXD = NB_MAX_DIMS;
constexpr int THREADS = 256;

// ---- the device context ----------------------------------------------------------

// Data-dependent errors that kernels report through the stream's error word
// (see nb_backend.h, Errors): the word holds kind * 1024 + the slot's tag.
// ERR_CONVERGE: an eigen/singular value iteration did not converge (syevd,
// gesvd info > 0), which the CPU reports as NB_ERR_INVALID_ARG.
enum DevErr { ERR_NONE = 0, ERR_INDEX = 1, ERR_ZERO_DIV = 2, ERR_TARGET = 3, ERR_SINGULAR = 4, ERR_NOT_PD = 5, ERR_RANK = 6,
              ERR_CONVERGE = 7 };

struct Ctx; // cuda_backend.cu

Ctx *ctx_of(nb_backend *be);
int device_of(nb_backend *be);
// The calling thread's current stream on be's device.
inline cudaStream_t stream_of(nb_backend *be) { return (cudaStream_t)nb_backend_current_stream(be); }
// The device error word of the current stream (never NULL for a live stream).
int *err_word(nb_backend *be);
// A tag for a slot name, so the error word can name the op (tags < 1024).
int slot_tag(const char *slot);

// nb_set_error for a failed CUDA call: "<slot>: <call> failed: <reason>".
nb_status cuda_fail(const char *slot, const char *call, cudaError_t e);
// After a kernel launch: the launch's own error, if any (and counts it,
// nb_device_counters.kernel_launches).
nb_status launched(const char *slot);
// Counts a launch made by a library call (cuBLAS, cuDNN, cuSOLVER: once per
// call) on the current CUDA device.
void count_launch(void);
// Counts a host wait inside a slot (a blocking copy, a stream sync).
void count_sync(nb_backend *be);
// Whether s is being captured into a CUDA graph (host waits and host
// copies on it must be refused, NB_ERR_STATE).
bool stream_capturing(cudaStream_t s);

#define NBC_TRY(slot, call)                                                  \
    do {                                                                     \
        cudaError_t nbc_e_ = (call);                                         \
        if (nbc_e_ != cudaSuccess) return nbc::cuda_fail(slot, #call, nbc_e_); \
    } while (0)

// Device code: records a data-dependent error (the first one wins).
__device__ inline void raise(int *word, int kind, int tag) { atomicCAS(word, 0, kind * 1024 + tag); }

// ---- scratch memory ---------------------------------------------------------------

// Device memory for one slot call, from the caching allocator on the
// current stream (reused in the steady state: no cudaMalloc per op).
struct Scratch {
    nb_backend *be = nullptr;
    void *ptr = nullptr, *block = nullptr;
    Scratch() = default;
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch() {
        if (block) nb_free_raw(be, block);
    }
    // false with NB_ERR_OOM set
    bool alloc(nb_backend *b, size_t bytes) {
        be = b;
        ptr = nb_alloc_raw(b, bytes ? bytes : 1, nb_backend_current_stream(b), &block);
        return ptr != nullptr;
    }
    template <typename T> T *as() const { return (T *)ptr; }
};

// V elements of T as one aligned access (ld/st.global.v4 for float4).
template <typename T, int V> struct alignas(sizeof(T) * V) Vec {
    T v[V];
};

// ---- dtypes ------------------------------------------------------------------------

template <typename T> struct Traits {
    using acc = T; // what arithmetic runs in
    __device__ static acc load(T v) { return v; }
    __device__ static T store(acc v) { return v; }
};
template <> struct Traits<float> {
    using acc = float;
    __device__ static float load(float v) { return v; }
    __device__ static float store(float v) { return v; }
};
template <> struct Traits<__half> {
    using acc = float;
    __device__ static float load(__half v) { return __half2float(v); }
    __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Traits<__nv_bfloat16> {
    using acc = float;
    __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Eight bfloat16 or float16 values at p (16-byte aligned) as float: one
// 16-byte load (the GEMV and decode-attention kernels' rows).
__device__ inline float2 pair_f(__nv_bfloat162 x) { return __bfloat1622float2(x); }
__device__ inline float2 pair_f(__half2 x) { return __half22float2(x); }
template <typename T> struct Pair2;
template <> struct Pair2<__nv_bfloat16> { using P = __nv_bfloat162; };
template <> struct Pair2<__half> { using P = __half2; };
template <typename T> __device__ inline void f8_of(uint4 u, float f[8]) {
    const typename Pair2<T>::P *h = (const typename Pair2<T>::P *)&u;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 t = pair_f(h[e]);
        f[2 * e] = t.x, f[2 * e + 1] = t.y;
    }
}
template <typename T> __device__ inline void load8(const T *p, float f[8]) { f8_of<T>(*(const uint4 *)p, f); }

// Calls F<T>() for the C type of dtype dt: F is a lambda-like functor
// template used as `dispatch(dt, [&](auto tag) { using T = decltype(tag); ... })`.
template <typename F> nb_status dispatch_all(nb_dtype dt, F &&f) {
    switch (dt) {
    case NB_F32: return f(float());
    case NB_F64: return f(double());
    case NB_I32: return f(int32_t());
    case NB_I64: return f(int64_t());
    case NB_U8: return f(uint8_t());
    case NB_I8: return f(int8_t());
    case NB_I16: return f(int16_t());
    case NB_BOOL: return f(bool());
    case NB_F16: return f(__half());
    case NB_BF16: return f(__nv_bfloat16());
    default: return nb_set_error(NB_ERR_DTYPE, "cuda: invalid dtype %d", (int)dt);
    }
}
// float32 and float64 only (other dtypes: NB_ERR_DTYPE naming slot).
template <typename F> nb_status dispatch_float(const char *slot, nb_dtype dt, F &&f) {
    switch (dt) {
    case NB_F32: return f(float());
    case NB_F64: return f(double());
    default: return nb_set_error(NB_ERR_DTYPE, "%s: %s is not supported on cuda", slot, nb_dtype_name(dt));
    }
}

// float32, float64, bfloat16 and float16 (other dtypes: NB_ERR_DTYPE naming slot).
template <typename F> nb_status dispatch_floating(const char *slot, nb_dtype dt, F &&f) {
    switch (dt) {
    case NB_BF16: return f(__nv_bfloat16());
    case NB_F16: return f(__half());
    default: return dispatch_float(slot, dt, f);
    }
}

// matmul.cu's row-major strided-batched GEMM through cuBLAS (its comment
// gives the conventions), used by attention and the convolution's weight
// gradient. gemm_rm_ex: C in dt_c (dt, or float32 for 16-bit operands).
nb_status gemm_rm(nb_backend *be, const char *slot, nb_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  double alpha, const void *A, int64_t lda, int64_t sA, const void *B, int64_t ldb, int64_t sB,
                  double beta, void *C, int64_t ldc, int64_t sC, int64_t batch);
nb_status gemm_rm_ex(nb_backend *be, const char *slot, nb_dtype dt, nb_dtype dt_c, bool ta, bool tb, int64_t m,
                     int64_t n, int64_t k, double alpha, const void *A, int64_t lda, int64_t sA, const void *B,
                     int64_t ldb, int64_t sB, double beta, void *C, int64_t ldc, int64_t sC, int64_t batch);

// An element as double, and a double rounded into T, through Traits (the
// 16-bit types have no direct double conversions).
template <typename T> __device__ inline double load_d(T v) { return (double)Traits<T>::load(v); }
template <typename T> __device__ inline T store_d(double v) { return Traits<T>::store((typename Traits<T>::acc)v); }

// Short names for nb_backend_util.h's view helpers.
inline bool same_shape(const nb_kview *a, const nb_kview *b) { return nb_view_same_shape(a, b); }
inline int64_t numel(const nb_kview *v) { return nb_view_numel(v); }
inline bool contiguous(const nb_kview *v) { return nb_view_is_contiguous(v); }

// ---- the strided iterator ---------------------------------------------------------

// N views of one shape, walked in C order of that shape. Dims of size 1 are
// dropped and neighbouring dims merged where every view allows it, so most
// calls run with ndim 1 (and `contig` when every view is dense).
template <int N> struct Iter {
    int ndim;
    int64_t numel;
    bool contig;
    bool small = false; // numel and every view's offsets below 2^31: 32-bit index math
    int64_t shape[MAXD];
    int64_t st[N][MAXD]; // element strides
    char *ptr[N];

    __device__ void offsets(int64_t i, int64_t *off) const {
        if (small) { // 32-bit division is several times cheaper than 64-bit
            uint32_t u = (uint32_t)i;
            int32_t o[N];
            for (int k = 0; k < N; k++) o[k] = 0;
            for (int d = ndim - 1; d >= 0; d--) {
                uint32_t s = (uint32_t)shape[d], q = u / s, r = u - q * s;
                u = q;
                for (int k = 0; k < N; k++) o[k] += (int32_t)r * (int32_t)st[k][d];
            }
            for (int k = 0; k < N; k++) off[k] = o[k];
            return;
        }
        for (int k = 0; k < N; k++) off[k] = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t s = shape[d], q = i / s, r = i - q * s;
            i = q;
            for (int k = 0; k < N; k++) off[k] += r * st[k][d];
        }
    }
};

template <int N> Iter<N> make_iter(const nb_kview *const *v) {
    Iter<N> it;
    it.ndim = 0;
    it.numel = numel(v[0]);
    for (int k = 0; k < N; k++) it.ptr[k] = (char *)v[k]->data;
    for (int d = 0; d < v[0]->ndim; d++) { // drop size-1 dims
        if (v[0]->shape[d] == 1) continue;
        it.shape[it.ndim] = v[0]->shape[d];
        for (int k = 0; k < N; k++) it.st[k][it.ndim] = v[k]->strides[d];
        it.ndim++;
    }
    // merge dim d into d + 1 when every view steps through both as one
    int nd = 0;
    for (int d = 0; d < it.ndim; d++) {
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < N; k++) merge &= it.st[k][nd - 1] == it.st[k][d] * it.shape[d];
            if (merge) {
                it.shape[nd - 1] *= it.shape[d];
                for (int k = 0; k < N; k++) it.st[k][nd - 1] = it.st[k][d];
                continue;
            }
        }
        it.shape[nd] = it.shape[d];
        for (int k = 0; k < N; k++) it.st[k][nd] = it.st[k][d];
        nd++;
    }
    it.ndim = nd;
    it.small = it.numel < ((int64_t)1 << 31);
    for (int k = 0; k < N && it.small; k++) {
        int64_t span = 0; // the largest |offset| of view k
        for (int d = 0; d < nd; d++) span += (it.shape[d] - 1) * (it.st[k][d] < 0 ? -it.st[k][d] : it.st[k][d]);
        it.small = span < ((int64_t)1 << 31);
    }
    it.contig = nd == 0 || (nd == 1 && [&] {
                     for (int k = 0; k < N; k++)
                         if (it.st[k][0] != 1) return false;
                     return true;
                 }());
    return it;
}

// Blocks for n elements with grid-stride loops (capped: the loop covers the rest).
inline unsigned blocks_for(int64_t n, int threads = THREADS) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned)b;
}

#define NBC_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

} // namespace nbc

