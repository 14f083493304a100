// foreach.cu - multi-tensor slots: for gradient clipping norm_multi (one
// p-norm per tensor, torch._foreach_norm) and mul_multi (each tensor times
// a 0-d device tensor, torch._foreach_mul_), so clip_grad_norm_ over a
// model is a few launches instead of several per parameter; for autocast
// cast_multi (float32 parameters to bfloat16/float16 copies). The tensors'
// (pointer, size) pairs travel as a kernel-parameter struct (no host-to-
// device copy: capturable in a CUDA graph), up to FE_MAX tensors a launch.
// Deterministic: each block reduces a fixed chunk of one tensor with a fixed
// tree into scratch, and a second kernel combines each tensor's chunk
// results in chunk order with a fixed tree. The lists, the output and the
// factor are checked before the call (backend/check/foreach.c).
#include <math.h>

#include "block_reduce.cuh"
#include "cuda_common.cuh"

namespace nbc {
namespace {

constexpr int FE_MAX = 48;           // tensors per launch
constexpr int64_t FE_CHUNK = 16384;  // elements per block task
constexpr int FE_THREADS = 256;

struct FEList {
    void *ptr[FE_MAX];
    int64_t numel[FE_MAX];
    int64_t chunk_end[FE_MAX]; // tensor k owns chunks [chunk_end[k - 1], chunk_end[k])
    int n;
};

// Tensor k and its first global chunk, of global chunk c (a scan of <=
// FE_MAX ends; L: FEList or cast_multi's FECastList).
template <typename L> __device__ inline int chunk_owner(const L &l, int64_t c, int64_t *first) {
    int k = 0;
    while (c >= l.chunk_end[k]) k++;
    *first = k ? l.chunk_end[k - 1] : 0;
    return k;
}

enum NormKind { N_ONE = 0, N_TWO = 1, N_INF = 2, N_P = 3 };

template <typename A> __device__ inline A nan_max(A a, A b) { return (a > b || a != a) ? a : b; }

template <typename A> __device__ inline A warp_max(A v) {
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename A> __device__ inline A block_max(A v, A *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    A r = lane < nw ? red[lane] : (A)0;
    return warp_max(r);
}

// Per chunk: sum of |x|, x^2 or |x|^p, or max |x|, into part[c] (type A).
template <typename T, typename A>
__global__ void k_norm_chunks(FEList l, int kind, A p, A *part) {
    __shared__ A red[32];
    int64_t first;
    const int64_t c = blockIdx.x;
    const int k = chunk_owner(l, c, &first);
    const T *x = (const T *)l.ptr[k];
    const int64_t begin = (c - first) * FE_CHUNK, end = min(begin + FE_CHUNK, l.numel[k]);
    A acc = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        A v = (A)x[i], a = v < 0 ? -v : v;
        if (kind == N_ONE) acc += a;
        else if (kind == N_TWO) acc += v * v;
        else if (kind == N_INF) acc = nan_max(acc, a != a ? v : a);
        else acc += pow(a, p);
    }
    A r = kind == N_INF ? block_max(acc, red) : block_sum(acc, red);
    if (threadIdx.x == 0) part[c] = r;
}

// One block per tensor: its chunks' results in chunk order, a fixed tree,
// then the root (sqrt, 1/p power); out[k] in T.
template <typename T, typename A>
__global__ void k_norm_finish(FEList l, int kind, A p, const A *part, T *out) {
    __shared__ A red[32];
    const int k = blockIdx.x;
    const int64_t first = k ? l.chunk_end[k - 1] : 0, last = l.chunk_end[k];
    A acc = 0;
    for (int64_t c = first + threadIdx.x; c < last; c += blockDim.x)
        acc = kind == N_INF ? nan_max(acc, part[c]) : acc + part[c];
    A r = kind == N_INF ? block_max(acc, red) : block_sum(acc, red);
    if (threadIdx.x == 0) {
        if (kind == N_TWO) r = sqrt(r);
        else if (kind == N_P) r = pow(r, (A)1 / p);
        out[k] = (T)r;
    }
}

template <typename T> __global__ void k_mul_chunks(FEList l, const T *s) {
    int64_t first;
    const int64_t c = blockIdx.x;
    const int k = chunk_owner(l, c, &first);
    T *x = (T *)l.ptr[k];
    const T f = *s;
    const int64_t begin = (c - first) * FE_CHUNK, end = min(begin + FE_CHUNK, l.numel[k]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) x[i] = x[i] * f;
}

int64_t kv_numel(const nb_kview *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

// cast_multi's list: destination and source of each pair.
struct FECastList {
    void *dst[FE_MAX];
    const float *src[FE_MAX];
    int64_t numel[FE_MAX];
    int64_t chunk_end[FE_MAX];
    int n;
};

// A chunk of one pair: four elements at a time where both ends are aligned
// for it (chunk starts are multiples of 4), then the rest one by one; the
// same rounding as copy's (Traits<H>::store).
template <typename H> __global__ void k_cast_chunks(FECastList l) {
    const int64_t c = blockIdx.x;
    int64_t first;
    const int k = chunk_owner(l, c, &first);
    const float *x = l.src[k];
    H *y = (H *)l.dst[k];
    const int64_t begin = (c - first) * FE_CHUNK, end = min(begin + FE_CHUNK, l.numel[k]);
    int64_t i = begin;
    if ((((uintptr_t)x | (uintptr_t)y * 2) & 15) == 0) { // x 16-byte, y 8-byte aligned
        const int64_t vend = begin + (end - begin) / 4 * 4;
        for (int64_t j = begin + 4 * (int64_t)threadIdx.x; j < vend; j += 4 * (int64_t)blockDim.x) {
            const float4 v = *reinterpret_cast<const float4 *>(x + j);
            Vec<H, 4> o;
            o.v[0] = Traits<H>::store(v.x), o.v[1] = Traits<H>::store(v.y);
            o.v[2] = Traits<H>::store(v.z), o.v[3] = Traits<H>::store(v.w);
            *reinterpret_cast<Vec<H, 4> *>(y + j) = o;
        }
        i = vend;
    }
    for (int64_t j = i + threadIdx.x; j < end; j += blockDim.x) y[j] = Traits<H>::store(x[j]);
}

// Fills l with tensors [i0, i0 + m) of xs (m <= FE_MAX); returns the chunk count.
int64_t fill_list(FEList &l, const nb_kview *xs, int i0, int m) {
    int64_t chunks = 0;
    l.n = m;
    for (int j = 0; j < m; j++) {
        const nb_kview &v = xs[i0 + j];
        l.ptr[j] = v.data;
        l.numel[j] = kv_numel(&v);
        chunks += (l.numel[j] + FE_CHUNK - 1) / FE_CHUNK;
        if (!l.numel[j]) chunks += 1; // an empty tensor still gets its (zero) result
        l.chunk_end[j] = chunks;
    }
    return chunks;
}

} // namespace
} // namespace nbc

using namespace nbc;

nb_status nb_cuda_norm_multi(nb_backend *be, int n, const nb_kview *xs, double p, const nb_kview *out) {
    const char *slot = "norm_multi";
    if (!n) return NB_OK;
    const int kind = p == 1 ? N_ONE : p == 2 ? N_TWO : isinf(p) ? N_INF : N_P;
    cudaStream_t s = stream_of(be);
    return dispatch_float(slot, xs[0].dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        using A = T; // float32 sums in float32 (PyTorch's), float64 in float64
        for (int i0 = 0; i0 < n; i0 += FE_MAX) {
            const int m = n - i0 < FE_MAX ? n - i0 : FE_MAX;
            FEList l;
            const int64_t chunks = fill_list(l, xs, i0, m);
            Scratch part;
            if (!part.alloc(be, sizeof(A) * (size_t)chunks)) return nb_last_status();
            k_norm_chunks<T, A><<<(unsigned)chunks, FE_THREADS, 0, s>>>(l, kind, (A)p, part.as<A>());
            nb_status e = launched(slot);
            if (e) return e;
            k_norm_finish<T, A><<<m, FE_THREADS, 0, s>>>(l, kind, (A)p, part.as<A>(), (T *)out->data + i0);
            if ((e = launched(slot))) return e;
        }
        return NB_OK;
    });
}

nb_status nb_cuda_mul_multi(nb_backend *be, int n, const nb_kview *xs, const nb_kview *scalar) {
    const char *slot = "mul_multi";
    if (!n) return NB_OK;
    cudaStream_t s = stream_of(be);
    return dispatch_float(slot, xs[0].dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        for (int i0 = 0; i0 < n; i0 += FE_MAX) {
            const int m = n - i0 < FE_MAX ? n - i0 : FE_MAX;
            FEList l;
            const int64_t chunks = fill_list(l, xs, i0, m);
            k_mul_chunks<T><<<(unsigned)chunks, FE_THREADS, 0, s>>>(l, (const T *)scalar->data);
            nb_status e = launched(slot);
            if (e) return e;
        }
        return NB_OK;
    });
}

nb_status nb_cuda_cast_multi(nb_backend *be, int n, const nb_kview *dst, const nb_kview *src) {
    const char *slot = "cast_multi";
    if (!n) return NB_OK;
    cudaStream_t s = stream_of(be);
    for (int i0 = 0; i0 < n; i0 += FE_MAX) {
        const int m = n - i0 < FE_MAX ? n - i0 : FE_MAX;
        FECastList l;
        int64_t chunks = 0;
        l.n = m;
        for (int j = 0; j < m; j++) {
            l.dst[j] = dst[i0 + j].data, l.src[j] = (const float *)src[i0 + j].data;
            l.numel[j] = kv_numel(&src[i0 + j]);
            chunks += (l.numel[j] + FE_CHUNK - 1) / FE_CHUNK;
            l.chunk_end[j] = chunks;
        }
        if (!chunks) continue;
        if (dst[0].dtype == NB_BF16) k_cast_chunks<__nv_bfloat16><<<(unsigned)chunks, FE_THREADS, 0, s>>>(l);
        else k_cast_chunks<__half><<<(unsigned)chunks, FE_THREADS, 0, s>>>(l);
        nb_status st = launched(slot);
        if (st) return st;
    }
    return NB_OK;
}
