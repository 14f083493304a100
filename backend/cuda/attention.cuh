// attention.cuh - what the attention family's two files share (internal):
// the problem (Att, with its mask and dropout), the masked score, the
// dropout keep mask by Philox, 16-bit conversions, and the batched matrix
// views (Mat) of q, k, v, out and their gradients. attention.cu holds the
// entry points and the tiled (flash) kernels, attention_scores.cu the
// score-matrix path on cuBLAS, attention_decode.cu the few-rows path,
// attention_cudnn.cu cuDNN's fused attention for 16-bit dtypes.
#pragma once

#include <math.h>
#include <stdint.h>

#include "block_reduce.cuh"
#include "cuda_common.cuh"
#include "philox.h"

namespace nbc {

// A value as double, and a double rounded to X (16-bit floats by their intrinsics).
template <typename X> __device__ inline double dv(X x) { return (double)x; }
template <> __device__ inline double dv<__half>(__half x) { return (double)__half2float(x); }
template <> __device__ inline double dv<__nv_bfloat16>(__nv_bfloat16 x) { return (double)__bfloat162float(x); }
template <typename X> __device__ inline X cv(double v) { return (X)v; }
template <> __device__ inline __half cv<__half>(double v) { return __double2half(v); }
template <> __device__ inline __nv_bfloat16 cv<__nv_bfloat16>(double v) { return __double2bfloat16(v); }

struct MaskInfo {
    const void *ptr; // NULL: none
    bool is_bool;
    int lead;
    int64_t shape[MAXD], stride[MAXD]; // leading dims (sizes multiply to B)
    int64_t si, sj;
};

struct Att {
    int64_t B, L, S, E, Ev;
    double scale;
    bool causal, dropout;
    uint64_t seed, offset, thresh;
    const uint64_t *offset_base; // graph capture: added to offset on the device
    double p, keep_scale;        // dropout's probability, 1 / (1 - p)
    MaskInfo mask;
};

// a / b for a >= 0, b > 0: in 32 bits when both fit (64-bit division is
// a long instruction sequence; the score kernels divide once per row).
__device__ inline int64_t idiv(int64_t a, int64_t b) {
    return a <= INT32_MAX && b <= INT32_MAX ? (int64_t)((uint32_t)a / (uint32_t)b) : a / b;
}

__device__ inline int64_t mask_base(const MaskInfo &m, int64_t b) {
    int64_t off = 0;
    for (int d = m.lead - 1; d >= 0; d--) {
        int64_t q = idiv(b, m.shape[d]);
        off += (b - q * m.shape[d]) * m.stride[d];
        b = q;
    }
    return off;
}

// The masked score: s + additive mask (of dtype M), or -inf (bool false, causal j > i).
template <typename T, typename M = T> __device__ inline T masked(const Att &a, int64_t mb, int64_t i, int64_t j, T s) {
    if (a.causal && j > i) return (T)-INFINITY;
    if (a.mask.ptr) {
        int64_t o = mb + i * a.mask.si + j * a.mask.sj;
        if (a.mask.is_bool) return ((const bool *)a.mask.ptr)[o] ? s : (T)-INFINITY;
        return s + (T)dv(((const M *)a.mask.ptr)[o]);
    }
    return s;
}

// 0 for a dropped weight, 1/(1-p) for a kept one.
__device__ inline double keep(const Att &a, int64_t b, int64_t i, int64_t j) {
    const uint64_t off = a.offset + (a.offset_base ? *a.offset_base : 0);
    uint64_t bits = nb_philox_bits(a.seed, off, (uint64_t)((b * a.L + i) * a.S + j));
    return (bits >> 11) >= a.thresh ? a.keep_scale : 0.0;
}

// keep() of elements j and j + 1 of row (b, i) (z[1] unused past the row):
// one Philox block serves both when their flat index is even (a block
// holds two elements' 64 bits), which it is for every pair when S is even.
// The Philox rounds, not memory, bound the score kernels with dropout.
__device__ inline void keep2(const Att &a, int64_t b, int64_t i, int64_t j, double z[2]) {
    const uint64_t off = a.offset + (a.offset_base ? *a.offset_base : 0);
    const uint64_t e = (uint64_t)((b * a.L + i) * a.S + j);
    if (e % 2 == 0) {
        nb_philox_u4 r = nb_philox4x32_10(off + e / 2, 0, a.seed);
        z[0] = ((((uint64_t)r.v[0] << 32) | r.v[1]) >> 11) >= a.thresh ? a.keep_scale : 0.0;
        z[1] = ((((uint64_t)r.v[2] << 32) | r.v[3]) >> 11) >= a.thresh ? a.keep_scale : 0.0;
    } else {
        z[0] = keep(a, b, i, j);
        z[1] = j + 1 < a.S ? keep(a, b, i, j + 1) : 0.0;
    }
}

// The max over a warp (every lane gets it); warp_sum is block_reduce.cuh's.
template <typename A> __device__ inline A warp_max(A v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// One operand of the attention's batched products: B matrices [R, C] with
// unit column stride, matrix b at data + (b / b2) * s1 + (b % b2) * s2 (in
// elements), rows ld apart. A [B, R, C] view has b2 = B; a [B1, B2, R, C]
// view (the heads of a [B, N, h, d] projection, transposed) has b2 = B2.
struct Mat {
    void *data;
    int64_t b2, s1, s2, ld;
};
__device__ inline int64_t mat_off(const Mat &m, int64_t b) {
    int64_t q = idiv(b, m.b2);
    return q * m.s1 + (b - q * m.b2) * m.s2;
}

// The scores path (attention_scores.cu): B*L*S scores in scratch, products
// through cuBLAS. lse is [B, L] in float32 for 16-bit dt, else in dt.
nb_status score_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                        const Mat &v, const Mat &out, void *lse);
nb_status score_backward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, const Mat &gout, const Mat *gq, const Mat *gk, const Mat *gv,
                         const void *lse);

// The decode path (attention_decode.cu): at most DEC_L query rows, no
// dropout, at most 65535 matrices, a chunk's scores within shared memory;
// q, k, v in any float dtype as they lie. lse as score_forward's.
constexpr int DEC_L = 16;
bool decode_fits(const Att &a, nb_dtype dt);
nb_status decode_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, void *lse);
// The cuDNN path (attention_cudnn.cu): bfloat16/float16, more than DEC_L
// rows, no mask but the causal one, head sizes multiples of 8 up to 256,
// views 16-byte aligned. Dropout from cuDNN's generator with
// NB_CUDA_ATTENTION_DROPOUT=cudnn where own_rng is not NULL (then set
// true), whose backward (own_rng true) must run here too, or fail; else
// nabla's keep mask as a tensor (the batch in chunks; one batch item's
// heads * L * S weights, rows padded to 8, at most 2^26), whose backward
// wants all three gradients. *ran false where it declines (the caller
// takes another path). lse as score_forward's.
nb_status cudnn_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                        const Mat &v, const Mat &out, void *lse, bool *own_rng, bool *ran);
nb_status cudnn_backward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, const Mat &gout, const Mat *gq, const Mat *gk, const Mat *gv,
                         const void *lse, bool own_rng, bool *ran);
// cudaFuncSetAttribute's dynamic shared memory limit for fn (attention.cu).
nb_status set_smem(const void *fn, size_t bytes, const char *op);

// D[b L + i] = sum_e dO o O over row (b, i) (both backward paths).
nb_status rowdot(nb_backend *be, nb_dtype dt, const Att &a, const Mat &gout, const Mat &out, double *D);

} // namespace nbc
