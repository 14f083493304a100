// attention.cu - the attention family on CUDA: the fused scaled-dot-product
// attention slot, forward and backward, with the CPU's semantics
// (backend/cpu/attention.c): bool or additive masks broadcast over the
// batch, top-left causal masking, dropout on the normalised weights by the
// Philox bits of element (b*L + i)*S + j (kept iff bits >> 11 >= ceil(p 2^53),
// scaled by 1/(1-p)), lse saved in q's dtype (float32 for bfloat16 and
// float16 q), NaN rows where every score is masked, and S == 0 giving out 0
// and lse -inf. q, k, v, out and the gradients are [B, R, C] or
// [B1, B2, R, C] views with unit column stride (attention.cuh's Mat).
//
// Four ways, chosen by size and dtype, same results up to rounding:
//  - a few query rows without dropout (decoding): attention_decode.cu,
//    split over the keys, reading q, k, v as they are;
//  - bfloat16/float16 without dropout or a mask other than causal:
//    cuDNN's fused flash attention, attention_cudnn.cu (forward only);
//  - short sequences (B*L*S up to 2^26 scores): the score matrices on
//    cuBLAS, attention_scores.cu.
//  - long sequences: FlashAttention's tiling (Dao et al. 2022), O(L + S)
//    memory: a block of query rows streams key/value tiles through shared
//    memory with an online softmax (float32 at head size 64: the query row
//    and accumulator in registers, k_flash_fwd64); backward in two passes,
//    one owning the dQ rows and one the dK/dV rows, each summing in a fixed
//    order (no atomics: deterministic). These take dense [B, R, C] views in
//    float32 or float64: other views and 16-bit dtypes run on dense float32
//    or same-dtype copies.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.cuh"

namespace nbc {

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

// ---- setup ---------------------------------------------------------------------------

// q's batch dims (1 or 2) and matrix dims of a 3-d or 4-d view with unit
// column stride, as a Mat; false when it is not one.
static bool mat_of(const nb_kview *t, int nd, Mat *m) {
    if (t->ndim != nd) return false;
    int64_t R = t->shape[nd - 2], C = t->shape[nd - 1];
    if (C > 1 && t->strides[nd - 1] != 1) return false;
    m->data = t->data;
    m->ld = R > 1 ? t->strides[nd - 2] : C;
    if (m->ld < C && R > 1) return false;
    if (nd == 3) m->b2 = t->shape[0] > 0 ? t->shape[0] : 1, m->s1 = 0, m->s2 = t->strides[0];
    else m->b2 = t->shape[1] > 0 ? t->shape[1] : 1, m->s1 = t->strides[0], m->s2 = t->strides[1];
    return true;
}

// q, k, v, out as Mats and the problem (checked: backend/check/attention.c);
// this backend's own: every view of q's dtype and batch dims (the shared
// check lets the CPU's float32 class mix and fold batch dims), rows of unit
// column stride, a mask of bool or q's dtype.
static nb_status setup(const char *op, Att *a, const nb_kview *out, const nb_kview *q, const nb_kview *k,
                       const nb_kview *v, const nb_kview *mask, bool is_causal, double scale, double dropout_p,
                       uint64_t seed, uint64_t offset, const uint64_t *offset_base, Mat *mq, Mat *mk, Mat *mv,
                       Mat *mo) {
    nb_dtype dt = q->dtype;
    int nd = q->ndim;
    const nb_kview *all[4] = {q, k, v, out};
    Mat *mats[4] = {mq, mk, mv, mo};
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++) {
        ok = all[i]->dtype == dt && mat_of(all[i], nd, mats[i]);
        for (int d = 0; d < nd - 2 && ok; d++) ok = all[i]->shape[d] == q->shape[d];
    }
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE,
                            "%s: q, k, v, out must be %s [B, R, C] or [B1, B2, R, C] views with unit column stride", op,
                            nb_dtype_name(dt));
    if (mask && mask->dtype != NB_BOOL && mask->dtype != dt)
        return nb_set_error(NB_ERR_DTYPE, "%s: the mask must be [..., L, S] of bool or q's dtype", op);
    a->B = nd == 3 ? q->shape[0] : q->shape[0] * q->shape[1];
    a->L = q->shape[nd - 2], a->E = q->shape[nd - 1], a->S = k->shape[nd - 2], a->Ev = v->shape[nd - 1];
    a->scale = scale, a->causal = is_causal, a->dropout = dropout_p > 0;
    a->seed = seed, a->offset = offset, a->offset_base = offset_base;
    a->thresh = nb_bits_threshold(dropout_p);
    a->p = dropout_p, a->keep_scale = 1 / (1 - dropout_p);
    a->mask = MaskInfo{};
    if (mask) {
        a->mask.lead = mask->ndim - 2;
        for (int d = 0; d < a->mask.lead; d++) a->mask.shape[d] = mask->shape[d], a->mask.stride[d] = mask->strides[d];
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

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

nb_status set_smem(const void *fn, size_t bytes, const char *op) {
    if (bytes > 48 * 1024) NBC_TRY(op, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return NB_OK;
}

// ---- dense copies for the tiled path ---------------------------------------------------

// A dense copy of a view in dtype dt (float32 for 16-bit sources, else the
// source's); for the mask (`bcast`) broadcast dims (stride 0) stay
// broadcast, so a mask expanded over the batch is not materialised. NULL
// src: an empty view; a bool mask or a contiguous view of the wanted dtype
// passes as it is. With `fill`, src's values.
struct Dense {
    Scratch buf;
    nb_kview v{};
    const nb_kview *src = nullptr;
    bool copied = false;
};
static nb_status densify(nb_backend *be, const nb_kview *src, Dense *w, bool fill, bool bcast) {
    w->src = src;
    if (!src) return NB_OK;
    nb_dtype want = nb_dtype_is_16bit(src->dtype) ? NB_F32 : src->dtype;
    if (src->dtype == NB_BOOL || (want == src->dtype && contiguous(src))) {
        w->v = *src;
        return NB_OK;
    }
    nb_kview one = *src; // the stored extent: broadcast dims as size 1
    int64_t n = 1;
    for (int d = src->ndim - 1; d >= 0; d--) {
        if (bcast && src->strides[d] == 0) one.shape[d] = 1;
        n *= one.shape[d];
    }
    if (!w->buf.alloc(be, nb_dtype_size(want) * (size_t)n)) return nb_last_status();
    nb_kview dense = one;
    dense.dtype = want, dense.data = w->buf.ptr;
    int64_t st = 1;
    for (int d = src->ndim - 1; d >= 0; d--) dense.strides[d] = st, st *= one.shape[d];
    if (fill && n) {
        nb_status r = nb_cuda_copy_into(be, &dense, &one);
        if (r) return r;
    }
    w->v = dense, w->copied = true;
    for (int d = 0; d < src->ndim; d++) {
        w->v.shape[d] = src->shape[d];
        if (bcast && src->strides[d] == 0) w->v.strides[d] = 0;
    }
    return NB_OK;
}
static const nb_kview *dv_of(const Dense &w) { return w.src ? &w.v : nullptr; }
static nb_status undensify(nb_backend *be, const Dense &w) {
    return w.copied && numel(w.src) ? nb_cuda_copy_into(be, w.src, &w.v) : NB_OK;
}

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse,
                                       const nb_attention_args *args) {
    const nb_kview *q = args->q, *k = args->k, *v = args->v, *mask = args->mask;
    const bool is_causal = args->is_causal;
    const double scale = args->scale, dropout_p = args->dropout_p;
    const uint64_t seed = args->rng.seed, offset = args->rng.offset, *offset_base = args->rng.offset_base;
    const char *op = "attention";
    Att a;
    Mat mq, mk, mv, mo;
    nb_status st =
        setup(op, &a, out, q, k, v, mask, is_causal, scale, dropout_p, seed, offset, offset_base, &mq, &mk, &mv, &mo);
    if (st) return st;
    if (a.B * a.L == 0) return NB_OK;
    cudaStream_t s = stream_of(be);
    if (a.S == 0) { // out 0, lse -inf
        if ((st = nb_cuda_fill(be, out, 0.0))) return st;
        return nb_cuda_fill(be, lse, -INFINITY);
    }
    // a few query rows (decoding with a KV cache): split over the keys, q, k, v read as they are
    if (decode_fits(a, q->dtype) && gemm_path_max() == GEMM_PATH_MAX)
        return decode_forward(be, op, q->dtype, a, mq, mk, mv, mo, lse->data);
    if (gemm_path_max() == GEMM_PATH_MAX) { // not forced onto the other paths
        bool ran = false;
        if ((st = cudnn_forward(be, op, q->dtype, a, mq, mk, mv, mo, lse->data, args->own_rng_out, &ran)) || ran)
            return st;
    }
    if (a.B * a.L * a.S <= gemm_path_max()) return score_forward(be, op, q->dtype, a, mq, mk, mv, mo, lse->data);
    // the tiled kernels: dense float32/float64 views
    bool dense = !nb_dtype_is_16bit(q->dtype) && contiguous(q) && contiguous(k) && contiguous(v) && contiguous(out);
    if (!dense) {
        Dense w[5];
        const nb_kview *src[5] = {q, k, v, mask, out};
        for (int i = 0; i < 5; i++)
            if ((st = densify(be, src[i], &w[i], i < 4, i == 3))) return st;
        nb_attention_args wa = *args;
        wa.q = dv_of(w[0]), wa.k = dv_of(w[1]), wa.v = dv_of(w[2]), wa.mask = dv_of(w[3]);
        if ((st = nb_cuda_attention(be, dv_of(w[4]), lse, &wa))) return st;
        return undensify(be, w[4]);
    }
    return dispatch_float(op, q->dtype, [&](auto t) -> nb_status {
        using T = decltype(t);
        dim3 grid((unsigned)((a.L + FQ - 1) / FQ), (unsigned)a.B);
        if (sizeof(T) == 4 && a.E == HD && a.Ev == HD && aligned16(q->data) && aligned16(k->data) &&
            aligned16(v->data) && aligned16(out->data)) {
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
                                                const nb_kview *gv, const nb_kview *gout, const nb_kview *out,
                                                const nb_kview *lse, const nb_attention_args *args) {
    const nb_kview *q = args->q, *k = args->k, *v = args->v, *mask = args->mask;
    const bool is_causal = args->is_causal;
    const double scale = args->scale, dropout_p = args->dropout_p;
    const uint64_t seed = args->rng.seed, offset = args->rng.offset, *offset_base = args->rng.offset_base;
    const char *op = "attention_backward";
    Att a;
    Mat mq, mk, mv, mo, mg, mgx[3];
    nb_status st =
        setup(op, &a, out, q, k, v, mask, is_causal, scale, dropout_p, seed, offset, offset_base, &mq, &mk, &mv, &mo);
    if (st) return st;
    const nb_kview *gs[4] = {gout, gq, gk, gv};
    const nb_kview *like[4] = {out, q, k, v};
    Mat *gm[4] = {&mg, &mgx[0], &mgx[1], &mgx[2]};
    for (int i = 0; i < 4; i++)
        if (gs[i] && (gs[i]->dtype != q->dtype || !same_shape(gs[i], like[i]) || !mat_of(gs[i], q->ndim, gm[i])))
            return nb_set_error(NB_ERR_SHAPE, "%s: gout or a gradient does not match out/q/k/v (unit column stride)", op);
    if (a.S == 0 || a.B * a.L == 0) { // every gradient is zero
        for (int i = 1; i < 4; i++)
            if (gs[i] && numel(gs[i]) && (st = nb_cuda_fill(be, gs[i], 0.0))) return st;
        return NB_OK;
    }
    // not forced onto the other paths; or the forward's dropout came from
    // cuDNN's generator, whose backward only cuDNN's path has
    if (gemm_path_max() == GEMM_PATH_MAX || args->own_rng) {
        bool ran = false;
        if ((st = cudnn_backward(be, op, q->dtype, a, mq, mk, mv, mo, mg, gq ? &mgx[0] : nullptr,
                                 gk ? &mgx[1] : nullptr, gv ? &mgx[2] : nullptr, lse->data, args->own_rng, &ran)) ||
            ran)
            return st;
    }
    if (a.B * a.L * a.S <= gemm_path_max())
        return score_backward(be, op, q->dtype, a, mq, mk, mv, mo, mg, gq ? &mgx[0] : nullptr, gk ? &mgx[1] : nullptr,
                              gv ? &mgx[2] : nullptr, lse->data);
    const nb_kview *all[8] = {gout, q, k, v, out, gq, gk, gv};
    bool dense = !nb_dtype_is_16bit(q->dtype);
    for (int i = 0; i < 8 && dense; i++) dense = !all[i] || contiguous(all[i]);
    if (!dense) { // the tiled kernels on dense float32/float64 copies
        Dense w[9];
        const nb_kview *src[9] = {gout, q, k, v, out, mask, gq, gk, gv};
        for (int i = 0; i < 9; i++)
            if ((st = densify(be, src[i], &w[i], i < 6, i == 5))) return st;
        nb_attention_args wa = *args;
        wa.q = dv_of(w[1]), wa.k = dv_of(w[2]), wa.v = dv_of(w[3]), wa.mask = dv_of(w[5]);
        if ((st = nb_cuda_attention_backward(be, dv_of(w[6]), dv_of(w[7]), dv_of(w[8]), dv_of(w[0]), dv_of(w[4]), lse,
                                             &wa)))
            return st;
        for (int i = 6; i < 9; i++)
            if ((st = undensify(be, w[i]))) return st;
        return NB_OK;
    }
    cudaStream_t s = stream_of(be);
    return dispatch_float(op, q->dtype, [&](auto t) -> nb_status {
        using T = decltype(t);
        int64_t rows = a.B * a.L;
        Scratch dsum;
        if (!dsum.alloc(be, sizeof(double) * (size_t)rows)) return nb_last_status();
        nb_status r = rowdot(be, q->dtype, a, mg, mo, dsum.as<double>());
        if (r) return r;
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
