// attention.cu - the attention family on CUDA: the fused scaled-dot-product
// attention slot, forward and backward, with the CPU's semantics
// (backend/cpu/attention.c): bool or additive masks broadcast over the
// batch, top-left causal masking, dropout on the normalised weights by the
// Philox bits of element (b*L + i)*S + j (kept iff bits >> 11 >= ceil(p 2^53),
// scaled by 1/(1-p)), lse saved in q's dtype, NaN rows where every score is
// masked, and S == 0 giving out 0 and lse -inf.
//
// Two ways, chosen by size, same results up to rounding:
//  - short sequences (B*L*S up to 2^26 scores): the scores materialise in
//    scratch and every product is a cuBLAS strided-batched GEMM (tensor cores
//    under TF32); a row kernel applies mask, softmax and dropout. Backward
//    recomputes the scores, then dV = P'^T dO, dP' = dO V^T,
//    dS = P (dP' Z/(1-p) - D) with D = rowsum(dO o O), dQ = scale dS K,
//    dK = scale dS^T Q (FlashAttention-2's formulas).
//  - long sequences: FlashAttention's tiling (Dao et al. 2022), O(L + S)
//    memory: a block of query rows streams key/value tiles through shared
//    memory with an online softmax (float32 at head size 64: the query row
//    and accumulator in registers, k_flash_fwd64); backward in two passes, one owning the
//    dQ rows and one the dK/dV rows, each summing in a fixed order (no
//    atomics: deterministic).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "philox.h"

namespace nbc {

nb_status gemm_rm(nb_backend *be, const char *slot, nb_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  double alpha, const void *A, int64_t lda, int64_t sA, const void *B, int64_t ldb, int64_t sB,
                  double beta, void *C, int64_t ldc, int64_t sC, int64_t batch);

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
    double keep_scale;
    MaskInfo mask;
};

__device__ inline int64_t mask_base(const MaskInfo &m, int64_t b) {
    int64_t off = 0;
    for (int d = m.lead - 1; d >= 0; d--) {
        off += (b % m.shape[d]) * m.stride[d];
        b /= m.shape[d];
    }
    return off;
}

// The masked score: s + additive mask, or -inf (bool false, causal j > i).
template <typename T> __device__ inline T masked(const Att &a, int64_t mb, int64_t i, int64_t j, T s) {
    if (a.causal && j > i) return (T)-INFINITY;
    if (a.mask.ptr) {
        int64_t o = mb + i * a.mask.si + j * a.mask.sj;
        if (a.mask.is_bool) return ((const bool *)a.mask.ptr)[o] ? s : (T)-INFINITY;
        return s + ((const T *)a.mask.ptr)[o];
    }
    return s;
}

// 0 for a dropped weight, 1/(1-p) for a kept one.
__device__ inline double keep(const Att &a, int64_t b, int64_t i, int64_t j) {
    const uint64_t off = a.offset + (a.offset_base ? *a.offset_base : 0);
    uint64_t bits = nb_philox_bits(a.seed, off, (uint64_t)((b * a.L + i) * a.S + j));
    return (bits >> 11) >= a.thresh ? a.keep_scale : 0.0;
}

__device__ inline double warp_max(double v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ inline double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---- the GEMM path ----------------------------------------------------------------

// One warp per row (b, i) of s [B*L, S] (scale Q K^T): masks it, writes
// lse, and P (dropped and rescaled when dropout) over s.
template <typename T> __global__ void k_softmax_rows(Att a, T *s, T *lse) {
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= a.B * a.L) return;
    int64_t b = row / a.L, i = row % a.L, mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    T *sr = s + row * a.S;
    double mx = -INFINITY;
    for (int64_t j = lane; j < a.S; j += 32) {
        T v = masked<T>(a, mb, i, j, sr[j]);
        sr[j] = v;
        mx = fmax(mx, (double)v);
    }
    mx = warp_max(mx);
    double sum = 0;
    for (int64_t j = lane; j < a.S; j += 32) sum += exp((double)sr[j] - mx);
    sum = warp_sum(sum);
    double l = mx == -INFINITY ? -INFINITY : mx + log(sum); // all masked: -inf, then NaN weights
    if (lane == 0) lse[row] = (T)l;
    for (int64_t j = lane; j < a.S; j += 32) {
        double p = exp((double)sr[j] - l);
        if (a.dropout) p *= keep(a, b, i, j);
        sr[j] = (T)p;
    }
}

// D[row] = sum_e dO[row, e] O[row, e] (one warp per row).
template <typename T> __global__ void k_rowdot(const T *go, const T *o, double *D, int64_t rows, int64_t ev) {
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    double s = 0;
    for (int64_t e = lane; e < ev; e += 32) s += (double)go[row * ev + e] * (double)o[row * ev + e];
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

// From s (scale Q K^T, overwritten by P) and lse: P = exp(masked s - lse)
// into s, and P' = P Z/(1-p) into pd when dropout (else pd is s).
template <typename T> __global__ void k_probs(Att a, T *s, T *pd, const T *lse) {
    NBC_GRID_STRIDE(x, a.B * a.L * a.S) {
        int64_t row = x / a.S, j = x % a.S, b = row / a.L, i = row % a.L;
        int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
        double p = exp((double)masked<T>(a, mb, i, j, s[x]) - (double)lse[row]);
        s[x] = (T)p;
        if (a.dropout) pd[x] = (T)(p * keep(a, b, i, j));
    }
}

// dS = P (dP' Z/(1-p) - D), over dp in place.
template <typename T> __global__ void k_dscores(Att a, const T *p, T *dp, const double *D) {
    NBC_GRID_STRIDE(x, a.B * a.L * a.S) {
        int64_t row = x / a.S, j = x % a.S, b = row / a.L, i = row % a.L;
        double g = (double)dp[x];
        if (a.dropout) g *= keep(a, b, i, j);
        dp[x] = (T)((double)p[x] * (g - D[row]));
    }
}

// ---- the tiled (flash) path -------------------------------------------------------

constexpr int FQ = 64; // query rows per block (one thread each)
constexpr int FK = 32; // keys per tile

// Shared layout: K tile [FK][E], V tile [FK][Ev], this block's accumulators
// [FQ][Ev + 1] (padded against bank conflicts).
template <typename T> __global__ void k_flash_fwd(Att a, const T *q, const T *k, const T *v, T *out, T *lse) {
    extern __shared__ unsigned char smem[];
    T *ks = (T *)smem, *vs = ks + FK * a.E, *acc = vs + FK * a.Ev;
    int64_t b = blockIdx.y, i = (int64_t)blockIdx.x * FQ + threadIdx.x;
    bool live = i < a.L;
    T *my = acc + threadIdx.x * (a.Ev + 1);
    for (int64_t e = 0; e < a.Ev; e++) my[e] = 0;
    const T *qi = q + (b * a.L + (live ? i : 0)) * a.E;
    int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    double m = -INFINITY, l = 0;
    int64_t last = (int64_t)blockIdx.x * FQ + FQ - 1; // the block's last row, for causal cut-off
    int64_t kend = a.causal ? (last + 1 < a.S ? last + 1 : a.S) : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += FK) {
        int64_t nk = a.S - j0 < FK ? a.S - j0 : FK;
        __syncthreads();
        for (int64_t x = threadIdx.x; x < nk * a.E; x += blockDim.x) ks[x] = k[(b * a.S + j0) * a.E + x];
        for (int64_t x = threadIdx.x; x < nk * a.Ev; x += blockDim.x) vs[x] = v[(b * a.S + j0) * a.Ev + x];
        __syncthreads();
        if (!live) continue;
        T sc[FK];
        double mx = -INFINITY;
        for (int c = 0; c < nk; c++) {
            T s = 0;
            for (int64_t e = 0; e < a.E; e++) s += qi[e] * ks[c * a.E + e];
            s = masked<T>(a, mb, i, j0 + c, (T)(a.scale * s));
            sc[c] = s;
            mx = fmax(mx, (double)s);
        }
        double mnew = fmax(m, mx);
        if (mnew == -INFINITY) continue; // everything masked so far
        double alpha = exp(m - mnew), sum = 0;
        for (int c = 0; c < nk; c++) {
            double p = exp((double)sc[c] - mnew);
            sum += p;
            sc[c] = (T)(a.dropout ? p * keep(a, b, i, j0 + c) : p); // dropout after l (lse is undropped)
        }
        l = l * alpha + sum;
        m = mnew;
        for (int64_t e = 0; e < a.Ev; e++) {
            T o = (T)(alpha * (double)my[e]);
            for (int c = 0; c < nk; c++) o += sc[c] * vs[c * a.Ev + e];
            my[e] = o;
        }
    }
    if (!live) return;
    T *oi = out + (b * a.L + i) * a.Ev;
    for (int64_t e = 0; e < a.Ev; e++) oi[e] = (T)((double)my[e] / l); // l == 0: 0/0, NaN as the CPU
    lse[b * a.L + i] = (T)(l == 0 ? -INFINITY : m + log(l));
}

// The float32 forward at head size 64 (E == Ev == 64: BERT, GPT-2, Llama 3.2
// 1B), where the long-sequence path spends its time: each thread keeps its
// query row and output accumulator in registers (k_flash_fwd keeps them in
// global and shared memory), reads the key/value tile as broadcast float4s,
// and runs the online softmax in float. The same masking, dropout bits and
// lse as k_flash_fwd; the sums run in the same key order (rounding aside).
constexpr int HD = 64;
__global__ void __launch_bounds__(FQ) k_flash_fwd64(Att a, const float *q, const float *k, const float *v,
                                                     float *out, float *lse) {
    __shared__ float4 ks[FK][HD / 4], vs[FK][HD / 4];
    int64_t b = blockIdx.y, i = (int64_t)blockIdx.x * FQ + threadIdx.x;
    bool live = i < a.L;
    float qr[HD], acc[HD];
    const float4 *q4 = (const float4 *)(q + (b * a.L + (live ? i : 0)) * HD);
#pragma unroll
    for (int e = 0; e < HD / 4; e++) {
        float4 x = q4[e];
        qr[4 * e] = x.x, qr[4 * e + 1] = x.y, qr[4 * e + 2] = x.z, qr[4 * e + 3] = x.w;
    }
#pragma unroll
    for (int e = 0; e < HD; e++) acc[e] = 0;
    int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    float m = -INFINITY, l = 0, scale = (float)a.scale;
    int64_t last = (int64_t)blockIdx.x * FQ + FQ - 1;
    int64_t kend = a.causal ? (last + 1 < a.S ? last + 1 : a.S) : a.S;
    const float4 *k4 = (const float4 *)k, *v4 = (const float4 *)v;
    for (int64_t j0 = 0; j0 < kend; j0 += FK) {
        int nk = a.S - j0 < FK ? (int)(a.S - j0) : FK;
        __syncthreads();
        for (int x = threadIdx.x; x < FK * HD / 4; x += FQ) {
            int c = x / (HD / 4), e = x % (HD / 4);
            bool in = c < nk;
            ks[c][e] = in ? k4[(b * a.S + j0 + c) * (HD / 4) + e] : make_float4(0, 0, 0, 0);
            vs[c][e] = in ? v4[(b * a.S + j0 + c) * (HD / 4) + e] : make_float4(0, 0, 0, 0);
        }
        __syncthreads();
        if (!live) continue;
        float sc[FK];
        float mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < FK; c++) {
            float d = 0;
#pragma unroll
            for (int e = 0; e < HD / 4; e++) {
                float4 kk = ks[c][e];
                d += qr[4 * e] * kk.x;
                d += qr[4 * e + 1] * kk.y;
                d += qr[4 * e + 2] * kk.z;
                d += qr[4 * e + 3] * kk.w;
            }
            float sv = c < nk ? masked<float>(a, mb, i, j0 + c, scale * d) : -INFINITY;
            sc[c] = sv;
            mx = fmaxf(mx, sv);
        }
        float mnew = fmaxf(m, mx);
        if (mnew == -INFINITY) continue; // everything masked so far
        float alpha = expf(m - mnew), sum = 0;
#pragma unroll
        for (int c = 0; c < FK; c++) {
            float p = expf(sc[c] - mnew);
            sum += p;
            sc[c] = a.dropout && c < nk ? p * (float)keep(a, b, i, j0 + c) : p; // dropout after l (lse is undropped)
        }
        l = l * alpha + sum;
        m = mnew;
#pragma unroll
        for (int e = 0; e < HD; e++) acc[e] *= alpha;
#pragma unroll
        for (int c = 0; c < FK; c++) {
            float p = sc[c];
#pragma unroll
            for (int e = 0; e < HD / 4; e++) {
                float4 vv = vs[c][e];
                acc[4 * e] += p * vv.x;
                acc[4 * e + 1] += p * vv.y;
                acc[4 * e + 2] += p * vv.z;
                acc[4 * e + 3] += p * vv.w;
            }
        }
    }
    if (!live) return;
    float4 *o4 = (float4 *)(out + (b * a.L + i) * HD);
#pragma unroll
    for (int e = 0; e < HD / 4; e++) // l == 0: 0/0, NaN as the CPU
        o4[e] = make_float4(acc[4 * e] / l, acc[4 * e + 1] / l, acc[4 * e + 2] / l, acc[4 * e + 3] / l);
    lse[b * a.L + i] = l == 0 ? -INFINITY : m + logf(l);
}

// dQ rows: for query row i, dq = scale sum_j dS_ij k_j.
template <typename T>
__global__ void k_flash_dq(Att a, const T *q, const T *k, const T *v, const T *go, const T *lse, const double *D,
                           T *gq) {
    extern __shared__ unsigned char smem[];
    T *ks = (T *)smem, *vs = ks + FK * a.E, *acc = vs + FK * a.Ev;
    int64_t b = blockIdx.y, i = (int64_t)blockIdx.x * FQ + threadIdx.x;
    bool live = i < a.L;
    T *my = acc + threadIdx.x * (a.E + 1);
    for (int64_t e = 0; e < a.E; e++) my[e] = 0;
    int64_t row = b * a.L + (live ? i : 0);
    const T *qi = q + row * a.E, *gi = go + row * a.Ev;
    double li = live ? (double)lse[row] : 0, di = live ? D[row] : 0;
    int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    int64_t last = (int64_t)blockIdx.x * FQ + FQ - 1;
    int64_t kend = a.causal ? (last + 1 < a.S ? last + 1 : a.S) : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += FK) {
        int64_t nk = a.S - j0 < FK ? a.S - j0 : FK;
        __syncthreads();
        for (int64_t x = threadIdx.x; x < nk * a.E; x += blockDim.x) ks[x] = k[(b * a.S + j0) * a.E + x];
        for (int64_t x = threadIdx.x; x < nk * a.Ev; x += blockDim.x) vs[x] = v[(b * a.S + j0) * a.Ev + x];
        __syncthreads();
        if (!live) continue;
        for (int c = 0; c < nk; c++) {
            T s = 0, dp = 0;
            for (int64_t e = 0; e < a.E; e++) s += qi[e] * ks[c * a.E + e];
            for (int64_t e = 0; e < a.Ev; e++) dp += gi[e] * vs[c * a.Ev + e];
            double p = exp((double)masked<T>(a, mb, i, j0 + c, (T)(a.scale * s)) - li);
            double g = (double)dp;
            if (a.dropout) g *= keep(a, b, i, j0 + c);
            T ds = (T)(p * (g - di) * a.scale);
            for (int64_t e = 0; e < a.E; e++) my[e] += ds * ks[c * a.E + e];
        }
    }
    if (live)
        for (int64_t e = 0; e < a.E; e++) gq[row * a.E + e] = my[e];
}

// dK and dV rows: for key row j, dv = sum_i P'_ij dO_i, dk = scale sum_i dS_ij q_i.
// Shared: Q tile [FK][E], dO tile [FK][Ev], lse/D of those rows, then the
// accumulators [FQ][E + Ev + 1].
template <typename T>
__global__ void k_flash_dkv(Att a, const T *q, const T *k, const T *v, const T *go, const T *lse, const double *D,
                            T *gk, T *gv) {
    extern __shared__ unsigned char smem[];
    T *qs = (T *)smem, *gs = qs + FK * a.E;
    double *ls = (double *)(gs + FK * a.Ev), *ds_ = ls + FK;
    T *acc = (T *)(ds_ + FK);
    int64_t b = blockIdx.y, j = (int64_t)blockIdx.x * FQ + threadIdx.x;
    bool live = j < a.S;
    T *mk = acc + threadIdx.x * (a.E + a.Ev + 1), *mv = mk + a.E;
    for (int64_t e = 0; e < a.E + a.Ev; e++) mk[e] = 0;
    int64_t krow = b * a.S + (live ? j : 0);
    const T *kj = k + krow * a.E, *vj = v + krow * a.Ev;
    int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    int64_t first = a.causal ? (int64_t)blockIdx.x * FQ : 0; // rows i < j see no key j under causal masking
    for (int64_t i0 = first - first % FK; i0 < a.L; i0 += FK) {
        int64_t nq = a.L - i0 < FK ? a.L - i0 : FK;
        __syncthreads();
        for (int64_t x = threadIdx.x; x < nq * a.E; x += blockDim.x) qs[x] = q[(b * a.L + i0) * a.E + x];
        for (int64_t x = threadIdx.x; x < nq * a.Ev; x += blockDim.x) gs[x] = go[(b * a.L + i0) * a.Ev + x];
        for (int64_t x = threadIdx.x; x < nq; x += blockDim.x) {
            ls[x] = (double)lse[b * a.L + i0 + x];
            ds_[x] = D[b * a.L + i0 + x];
        }
        __syncthreads();
        if (!live) continue;
        for (int r = 0; r < nq; r++) {
            int64_t i = i0 + r;
            T s = 0, dp = 0;
            for (int64_t e = 0; e < a.E; e++) s += qs[r * a.E + e] * kj[e];
            for (int64_t e = 0; e < a.Ev; e++) dp += gs[r * a.Ev + e] * vj[e];
            double p = exp((double)masked<T>(a, mb, i, j, (T)(a.scale * s)) - ls[r]);
            double z = a.dropout ? keep(a, b, i, j) : 1.0;
            T pd = (T)(p * z), ds = (T)(p * ((double)dp * z - ds_[r]) * a.scale);
            for (int64_t e = 0; e < a.Ev; e++) mv[e] += pd * gs[r * a.Ev + e];
            for (int64_t e = 0; e < a.E; e++) mk[e] += ds * qs[r * a.E + e];
        }
    }
    if (!live) return;
    if (gk)
        for (int64_t e = 0; e < a.E; e++) gk[krow * a.E + e] = mk[e];
    if (gv)
        for (int64_t e = 0; e < a.Ev; e++) gv[krow * a.Ev + e] = mv[e];
}

template <typename T> __global__ void k_fill_empty(T *out, T *lse, int64_t no, int64_t nl) {
    NBC_GRID_STRIDE(x, no) out[x] = 0;
    NBC_GRID_STRIDE(x, nl) lse[x] = (T)-INFINITY;
}

// ---- setup ---------------------------------------------------------------------------

static nb_status setup(const char *op, Att *a, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                       const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale,
                       double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base) {
    nb_dtype dt = q->dtype;
    if (dt != NB_F32 && dt != NB_F64)
        return nb_set_error(NB_ERR_DTYPE, "%s: %s is not supported on cuda", op, nb_dtype_name(dt));
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || out->ndim != 3 || lse->ndim != 2)
        return nb_set_error(NB_ERR_SHAPE, "%s: q, k, v, out must be 3-d and lse 2-d", op);
    a->B = q->shape[0], a->L = q->shape[1], a->E = q->shape[2], a->S = k->shape[1], a->Ev = v->shape[2];
    const nb_kview *all[5] = {q, k, v, out, lse};
    for (int i = 0; i < 5; i++)
        if (all[i]->dtype != dt || !contiguous(all[i]))
            return nb_set_error(NB_ERR_SHAPE, "%s: q, k, v, out and lse must be contiguous %s", op, nb_dtype_name(dt));
    if (k->shape[0] != a->B || v->shape[0] != a->B || v->shape[1] != a->S || k->shape[2] != a->E ||
        out->shape[0] != a->B || out->shape[1] != a->L || out->shape[2] != a->Ev || lse->shape[0] != a->B ||
        lse->shape[1] != a->L)
        return nb_set_error(NB_ERR_SHAPE, "%s: q, k, v do not fit [B, L, E], [B, S, E], [B, S, Ev] with out and lse", op);
    if (!(dropout_p >= 0 && dropout_p < 1))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dropout_p %g outside [0, 1)", op, dropout_p);
    a->scale = scale, a->causal = is_causal, a->dropout = dropout_p > 0;
    a->seed = seed, a->offset = offset, a->offset_base = offset_base;
    a->thresh = (uint64_t)ceil(dropout_p * 0x1.0p53);
    a->keep_scale = 1 / (1 - dropout_p);
    a->mask = MaskInfo{};
    if (mask) {
        if (mask->ndim < 2 || mask->shape[mask->ndim - 2] != a->L || mask->shape[mask->ndim - 1] != a->S ||
            (mask->dtype != NB_BOOL && mask->dtype != dt))
            return nb_set_error(NB_ERR_SHAPE, "%s: the mask must be [..., L, S] of bool or q's dtype", op);
        int64_t prod = 1;
        a->mask.lead = mask->ndim - 2;
        for (int d = 0; d < a->mask.lead; d++) {
            a->mask.shape[d] = mask->shape[d], a->mask.stride[d] = mask->strides[d];
            prod *= mask->shape[d];
        }
        if (prod != a->B) return nb_set_error(NB_ERR_SHAPE, "%s: the mask's leading dims do not multiply to B", op);
        a->mask.si = mask->strides[mask->ndim - 2], a->mask.sj = mask->strides[mask->ndim - 1];
        a->mask.ptr = mask->data, a->mask.is_bool = mask->dtype == NB_BOOL;
    }
    return NB_OK;
}

constexpr int64_t GEMM_PATH_MAX = (int64_t)1 << 26; // scores held when B*L*S is at most this

// NB_CUDA_ATTENTION=flash takes the long-sequence path at every size (the
// tests' way to reach it), =gemm the score-matrix path; read once.
static int64_t gemm_path_max() {
    static int64_t v = -2;
    if (v == -2) {
        const char *e = getenv("NB_CUDA_ATTENTION");
        v = e && !strcmp(e, "flash") ? -1 : e && !strcmp(e, "gemm") ? INT64_MAX : GEMM_PATH_MAX;
    }
    return v;
}

static size_t flash_smem(const Att &a, size_t es, int which) {
    if (which == 2) return es * (size_t)(FK * a.E + FK * a.Ev) + 2 * sizeof(double) * FK + es * (size_t)(FQ * (a.E + a.Ev + 1));
    int64_t accw = which == 0 ? a.Ev + 1 : a.E + 1;
    return es * (size_t)(FK * a.E + FK * a.Ev + FQ * accw);
}

static bool aligned16(const nb_kview *t) { return ((uintptr_t)t->data & 15) == 0; }

static nb_status set_smem(const void *fn, size_t bytes, const char *op) {
    if (bytes > 48 * 1024) NBC_TRY(op, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return NB_OK;
}

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                                       const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal,
                                       double scale, double dropout_p, uint64_t seed, uint64_t offset,
                                       const uint64_t *offset_base) {
    const char *op = "attention";
    Att a;
    nb_status st = setup(op, &a, out, lse, q, k, v, mask, is_causal, scale, dropout_p, seed, offset, offset_base);
    if (st) return st;
    if (a.B * a.L == 0) return NB_OK;
    cudaStream_t s = stream_of(be);
    return dispatch_float(op, q->dtype, [&](auto t) -> nb_status {
        using T = decltype(t);
        if (a.S == 0) {
            k_fill_empty<T><<<blocks_for(a.B * a.L * a.Ev), THREADS, 0, s>>>((T *)out->data, (T *)lse->data,
                                                                             a.B * a.L * a.Ev, a.B * a.L);
            return launched(op);
        }
        if (a.B * a.L * a.S <= gemm_path_max()) {
            Scratch sc;
            if (!sc.alloc(be, sizeof(T) * (size_t)(a.B * a.L * a.S))) return nb_last_status();
            nb_status r = gemm_rm(be, op, q->dtype, false, true, a.L, a.S, a.E, a.scale, q->data, a.E, a.L * a.E, k->data,
                                  a.E, a.S * a.E, 0.0, sc.ptr, a.S, a.L * a.S, a.B);
            if (r) return r;
            int64_t rows = a.B * a.L;
            k_softmax_rows<T><<<(unsigned)((rows + 7) / 8), 256, 0, s>>>(a, sc.as<T>(), (T *)lse->data);
            if ((r = launched(op))) return r;
            return gemm_rm(be, op, q->dtype, false, false, a.L, a.Ev, a.S, 1.0, sc.ptr, a.S, a.L * a.S, v->data, a.Ev,
                           a.S * a.Ev, 0.0, out->data, a.Ev, a.L * a.Ev, a.B);
        }
        dim3 grid((unsigned)((a.L + FQ - 1) / FQ), (unsigned)a.B);
        if (sizeof(T) == 4 && a.E == HD && a.Ev == HD && aligned16(q) && aligned16(k) && aligned16(v) &&
            aligned16(out)) {
            k_flash_fwd64<<<grid, FQ, 0, s>>>(a, (const float *)q->data, (const float *)k->data,
                                              (const float *)v->data, (float *)out->data, (float *)lse->data);
            return launched(op);
        }
        size_t sm = flash_smem(a, sizeof(T), 0);
        nb_status r = set_smem((const void *)k_flash_fwd<T>, sm, op);
        if (r) return r;
        k_flash_fwd<T><<<grid, FQ, sm, s>>>(a, (const T *)q->data, (const T *)k->data, (const T *)v->data,
                                            (T *)out->data, (T *)lse->data);
        return launched(op);
    });
}

extern "C" nb_status nb_cuda_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk,
                                                const nb_kview *gv, const nb_kview *gout, const nb_kview *q,
                                                const nb_kview *k, const nb_kview *v, const nb_kview *out,
                                                const nb_kview *lse, const nb_kview *mask, bool is_causal, double scale,
                                                double dropout_p, uint64_t seed, uint64_t offset,
                                                const uint64_t *offset_base) {
    const char *op = "attention_backward";
    Att a;
    nb_status st = setup(op, &a, out, lse, q, k, v, mask, is_causal, scale, dropout_p, seed, offset, offset_base);
    if (st) return st;
    const nb_kview *gs[4] = {gout, gq, gk, gv};
    const nb_kview *like[4] = {out, q, k, v};
    for (int i = 0; i < 4; i++)
        if (gs[i] && (gs[i]->dtype != q->dtype || !same_shape(gs[i], like[i]) || !contiguous(gs[i])))
            return nb_set_error(NB_ERR_SHAPE, "%s: gout or a gradient does not match out/q/k/v (contiguous)", op);
    cudaStream_t s = stream_of(be);
    return dispatch_float(op, q->dtype, [&](auto t) -> nb_status {
        using T = decltype(t);
        int64_t rows = a.B * a.L;
        // S == 0 or L == 0: every gradient is zero
        if (a.S == 0 || rows == 0) {
            for (int i = 1; i < 4; i++)
                if (gs[i] && numel(gs[i])) NBC_TRY(op, cudaMemsetAsync(gs[i]->data, 0, sizeof(T) * (size_t)numel(gs[i]), s));
            return NB_OK;
        }
        Scratch dsum;
        if (!dsum.alloc(be, sizeof(double) * (size_t)rows)) return nb_last_status();
        k_rowdot<T><<<(unsigned)((rows + 7) / 8), 256, 0, s>>>((const T *)gout->data, (const T *)out->data,
                                                                dsum.as<double>(), rows, a.Ev);
        nb_status r = launched(op);
        if (r) return r;
        if (a.B * a.L * a.S <= gemm_path_max()) {
            size_t n = (size_t)(a.B * a.L * a.S);
            Scratch p, pd, dp;
            if (!p.alloc(be, sizeof(T) * n) || !dp.alloc(be, sizeof(T) * n) || (a.dropout && !pd.alloc(be, sizeof(T) * n)))
                return nb_last_status();
            T *P = p.as<T>(), *PD = a.dropout ? pd.as<T>() : P, *DP = dp.as<T>();
            if ((r = gemm_rm(be, op, q->dtype, false, true, a.L, a.S, a.E, a.scale, q->data, a.E, a.L * a.E, k->data,
                             a.E, a.S * a.E, 0.0, P, a.S, a.L * a.S, a.B)))
                return r;
            k_probs<T><<<blocks_for((int64_t)n), THREADS, 0, s>>>(a, P, PD, (const T *)lse->data);
            if ((r = launched(op))) return r;
            if (gv && (r = gemm_rm(be, op, q->dtype, true, false, a.S, a.Ev, a.L, 1.0, PD, a.S, a.L * a.S, gout->data,
                                   a.Ev, a.L * a.Ev, 0.0, gv->data, a.Ev, a.S * a.Ev, a.B)))
                return r;
            if (!gq && !gk) return NB_OK;
            if ((r = gemm_rm(be, op, q->dtype, false, true, a.L, a.S, a.Ev, 1.0, gout->data, a.Ev, a.L * a.Ev, v->data,
                             a.Ev, a.S * a.Ev, 0.0, DP, a.S, a.L * a.S, a.B)))
                return r;
            k_dscores<T><<<blocks_for((int64_t)n), THREADS, 0, s>>>(a, P, DP, dsum.as<double>());
            if ((r = launched(op))) return r;
            if (gq && (r = gemm_rm(be, op, q->dtype, false, false, a.L, a.E, a.S, a.scale, DP, a.S, a.L * a.S, k->data,
                                   a.E, a.S * a.E, 0.0, gq->data, a.E, a.L * a.E, a.B)))
                return r;
            if (gk && (r = gemm_rm(be, op, q->dtype, true, false, a.S, a.E, a.L, a.scale, DP, a.S, a.L * a.S, q->data,
                                   a.E, a.L * a.E, 0.0, gk->data, a.E, a.S * a.E, a.B)))
                return r;
            return NB_OK;
        }
        if (gq) {
            size_t sm = flash_smem(a, sizeof(T), 1);
            if ((r = set_smem((const void *)k_flash_dq<T>, sm, op))) return r;
            dim3 grid((unsigned)((a.L + FQ - 1) / FQ), (unsigned)a.B);
            k_flash_dq<T><<<grid, FQ, sm, s>>>(a, (const T *)q->data, (const T *)k->data, (const T *)v->data,
                                               (const T *)gout->data, (const T *)lse->data, dsum.as<double>(),
                                               (T *)gq->data);
            if ((r = launched(op))) return r;
        }
        if (gk || gv) {
            size_t sm = flash_smem(a, sizeof(T), 2);
            if ((r = set_smem((const void *)k_flash_dkv<T>, sm, op))) return r;
            dim3 grid((unsigned)((a.S + FQ - 1) / FQ), (unsigned)a.B);
            k_flash_dkv<T><<<grid, FQ, sm, s>>>(a, (const T *)q->data, (const T *)k->data, (const T *)v->data,
                                                (const T *)gout->data, (const T *)lse->data, dsum.as<double>(),
                                                gk ? (T *)gk->data : nullptr, gv ? (T *)gv->data : nullptr);
            if ((r = launched(op))) return r;
        }
        return NB_OK;
    });
}
