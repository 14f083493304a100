// red_util.cuh - what the reduction-family files of the CUDA backend share
// (reduce.cu, scan.cu, sort.cu, gather.cu, index.cu, softmax.cu, loss.cu;
// internal): view strings for error messages, line views (every dim but
// one) for the strided iterator, wrapping integer arithmetic, NaN tests and
// extreme values by type, and fixed-tree group reductions (warp shuffles,
// then the group's warps in order through shared memory), so that every
// reduction has one evaluation order for a given launch (deterministic, no
// atomics).
#pragma once

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <type_traits>

#include "cuda_common.cuh"

namespace nbc {
namespace red { // this family's helpers

constexpr unsigned FULL_MASK = 0xffffffffu;

// ---- host helpers ------------------------------------------------------------------

// "[2, 3] float32" into buf, for error messages (nb_view_str's short name).
inline const char *vstr(const nb_kview *v, char *buf, size_t n) { return nb_view_str(v, buf, n); }
constexpr size_t VSTR = NB_VIEW_STR;

// v seen as its lines along dim: every dim but dim, with ref's sizes and
// v's strides (views of one kernel share ref's sizes outside dim).
inline nb_kview lines_of(const nb_kview *v, const nb_kview *ref, int dim) {
    nb_kview r = *v;
    r.ndim = 0;
    for (int d = 0; d < ref->ndim; d++) {
        if (d == dim) continue;
        r.shape[r.ndim] = ref->shape[d];
        r.strides[r.ndim] = v->strides[d];
        r.ndim++;
    }
    return r;
}

// A grid-stride grid of at most `cap` blocks for n units of `per` threads' work.
inline unsigned grid_for(int64_t n, int64_t per, int64_t cap = 65535LL * 16) {
    int64_t b = (n + per - 1) / per;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

// Smallest power of two >= n (n >= 1), at most 1024.
inline int pow2_at_least(int64_t n) {
    int p = 1;
    while (p < n && p < 1024) p <<= 1;
    return p;
}

// Bits needed to write v >= 0 (at least 1): radix sorts of keys in [0, v].
inline int bits_for(uint64_t v) {
    int b = 1;
    while (b < 64 && (v >> b) != 0) b++;
    return b;
}

// Carves aligned pieces out of one scratch block.
struct Carve {
    size_t used = 0;
    template <typename T> size_t take(int64_t n) {
        size_t at = (used + 255) / 256 * 256;
        used = at + sizeof(T) * (size_t)(n > 0 ? n : 1);
        return at;
    }
};
template <typename T> inline T *at(const Scratch &s, size_t off) { return (T *)((char *)s.ptr + off); }

// ---- device helpers ------------------------------------------------------------------

// Offsets of element (or line) i of an iterator, without the div/mod walk
// when every view is dense.
template <int N> __device__ inline void iter_off(const Iter<N> &it, int64_t i, int64_t *off) {
    if (it.contig)
        for (int k = 0; k < N; k++) off[k] = i;
    else
        it.offsets(i, off);
}

template <typename T> __device__ inline bool is_nan(T v) {
    if constexpr (std::is_floating_point<T>::value) return isnan(v);
    else return false;
}

// Integer + and * wrap (two's complement, as PyTorch) without signed overflow.
template <typename T> __device__ inline T wadd(T a, T b) {
    if constexpr (std::is_integral<T>::value && !std::is_same<T, bool>::value) {
        using U = typename std::make_unsigned<T>::type;
        return (T)(U)((U)a + (U)b);
    } else {
        return a + b;
    }
}
template <typename T> __device__ inline T wmul(T a, T b) {
    if constexpr (std::is_integral<T>::value && !std::is_same<T, bool>::value) {
        using U = typename std::make_unsigned<T>::type;
        // at least unsigned int: uint16_t would promote to int, and 65535 * 65535 overflows it
        using W = typename std::conditional<(sizeof(U) < sizeof(unsigned)), unsigned, U>::type;
        return (T)(U)((W)(U)a * (W)(U)b);
    } else {
        return a * b;
    }
}

template <typename T> __device__ inline T lowest() {
    if constexpr (std::is_floating_point<T>::value) return (T)-INFINITY;
    else if constexpr (std::is_same<T, int64_t>::value) return (int64_t)(-9223372036854775807LL - 1);
    else if constexpr (std::is_same<T, int32_t>::value) return (int32_t)(-2147483647 - 1);
    else if constexpr (std::is_same<T, int16_t>::value) return (int16_t)-32768;
    else if constexpr (std::is_same<T, int8_t>::value) return (int8_t)-128;
    else return (T)0;
}
template <typename T> __device__ inline T highest() {
    if constexpr (std::is_floating_point<T>::value) return (T)INFINITY;
    else if constexpr (std::is_same<T, int64_t>::value) return (int64_t)9223372036854775807LL;
    else if constexpr (std::is_same<T, int32_t>::value) return (int32_t)2147483647;
    else if constexpr (std::is_same<T, int16_t>::value) return (int16_t)32767;
    else if constexpr (std::is_same<T, int8_t>::value) return (int8_t)127;
    else return (T)255;
}

// exp/log in the type's own precision (float: expf, as the CPU's float math).
__device__ inline float ex(float v) { return expf(v); }
__device__ inline double ex(double v) { return exp(v); }

// The CPU's MAXF(x, acc): x if x is NaN or larger; a NaN accumulator stays.
template <typename T> struct MaxNan {
    __device__ T operator()(T acc, T x) const { return is_nan(x) || x > acc ? x : acc; }
};
template <typename T> struct Plus {
    __device__ T operator()(T a, T b) const { return a + b; }
};

template <typename T> __device__ inline T shfl_down(T v, int o, int w) { return __shfl_down_sync(FULL_MASK, v, o, w); }

// Combines v over groups of g consecutive threads of the block (g a power of
// two dividing blockDim.x <= 1024) in a fixed tree: shuffles within a warp
// (or within g lanes), then the group's warp results left to right through
// smem (blockDim.x / 32 entries). Every thread of the block calls it with
// the same g (it may __syncthreads). The result is valid in the group's
// first thread.
template <typename A, typename Op> __device__ inline A group_reduce(A v, int g, Op op, A *smem) {
    int w = g < 32 ? g : 32;
    for (int o = w / 2; o > 0; o >>= 1) v = op(v, shfl_down(v, o, w));
    if (g <= 32) return v;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // the previous use of smem is over
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if ((threadIdx.x & (g - 1)) == 0) {
        A r = smem[warp];
        for (int i = 1; i < (g >> 5); i++) r = op(r, smem[warp + i]);
        v = r;
    }
    return v;
}

// Combines v over the whole block (blockDim.x a power of two) and hands
// every thread the result.
template <typename A, typename Op> __device__ inline A block_all(A v, Op op, A *smem) {
    v = group_reduce(v, (int)blockDim.x, op, smem);
    __syncthreads();
    if (threadIdx.x == 0) smem[0] = v;
    __syncthreads();
    A r = smem[0];
    __syncthreads(); // smem may be reused at once
    return r;
}

// Combines v over the warp and hands every lane the result.
template <typename A, typename Op> __device__ inline A warp_all(A v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, shfl_down(v, o, 32));
    return __shfl_sync(FULL_MASK, v, 0);
}

} // namespace red
} // namespace nbc
