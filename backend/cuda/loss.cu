// loss.cu - the fused cross-entropy forward and backward on CUDA over rows
// of logits [n, c] (contiguous), with backend/cpu/loss.c's formulas
// (PyTorch's):
//   lse_i = max_i + log(sum_j exp(x_ij - max_i))   (the sum in double for float32)
//   loss_i = lse_i - x[i, t_i]   (0 where t_i == ignore_index)
//   glogits_ij = gloss_i * (exp(x_ij - lse_i) - [j == t_i])   (0 rows where ignored)
// Forward: a block per row (32 to 1024 threads by c: BERT's 30522 classes
// get 1024), the row's max and sum each in a fixed shuffle / shared-memory
// tree (deterministic, no atomics); the second pass re-reads the row from
// L2. Backward needs no reduction (lse is saved): a grid over (column
// chunks, rows), each element written once.
// bfloat16/float16 logits (autocast's cross_entropy, autograd/ops_loss.c)
// are read as float32 and computed as float32 ones, with float32 per-row
// tensors and a 16-bit gradient: the bits of casting them to float32 first,
// without the cast's traffic.
// A target outside [0, c) that is not ignore_index goes to the stream's
// error word (NB_ERR_INVALID_ARG at the next sync point); x is never read
// at it (that row's loss is NaN, its gradient row has no -gloss term).
#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// Per-row views: element i of a strided [n] vector.
template <typename T> struct RowVec {
    T *p;
    int64_t s;
    __device__ T &operator[](int64_t i) const { return p[i * s]; }
};

// Logits of storage type X read as T.
template <typename T, typename X> struct XRow {
    const X *p;
    __device__ T operator[](int64_t i) const { return (T)Traits<X>::load(p[i]); }
};

template <typename T, typename X>
__global__ void __launch_bounds__(1024) k_ce(const X *x, int64_t n, int64_t c, RowVec<const int64_t> tgt,
                                             RowVec<T> loss, RowVec<T> lse, RowVec<T> valid, int64_t ignore, int *err,
                                             int tag) {
    __shared__ T st[32];
    __shared__ double sd[32];
    const int bd = blockDim.x;
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const XRow<T, X> xr{x + r * c};
        T mx = (T)-INFINITY;
        int64_t i = threadIdx.x;
        for (; i + 3 * bd < c; i += 4 * bd) { // four loads in flight
            T v0 = xr[i], v1 = xr[i + bd], v2 = xr[i + 2 * bd], v3 = xr[i + 3 * bd];
            mx = MaxNan<T>()(mx, v0), mx = MaxNan<T>()(mx, v1), mx = MaxNan<T>()(mx, v2), mx = MaxNan<T>()(mx, v3);
        }
        for (; i < c; i += bd) mx = MaxNan<T>()(mx, xr[i]);
        mx = block_all(mx, MaxNan<T>(), st);
        double s = 0;
        i = threadIdx.x;
        for (; i + 3 * bd < c; i += 4 * bd) {
            T v0 = xr[i], v1 = xr[i + bd], v2 = xr[i + 2 * bd], v3 = xr[i + 3 * bd];
            s += (double)ex(v0 - mx), s += (double)ex(v1 - mx), s += (double)ex(v2 - mx), s += (double)ex(v3 - mx);
        }
        for (; i < c; i += bd) s += (double)ex(xr[i] - mx);
        s = group_reduce(s, bd, Plus<double>(), sd); // valid in thread 0
        if (threadIdx.x == 0) {
            T l = mx + (T)log(s);
            int64_t t = tgt[r];
            lse[r] = l;
            if (valid.p) valid[r] = (T)(t != ignore);
            if (t == ignore) {
                loss[r] = (T)0;
            } else if (t < 0 || t >= c) {
                raise(err, ERR_TARGET, tag);
                loss[r] = (T)NAN;
            } else {
                loss[r] = l - xr[t];
            }
        }
        // the next row's block_all begins with __syncthreads before reusing st/sd
    }
}

// No classes (c == 0): every target must be ignored; lse = -inf, loss = 0.
template <typename T>
__global__ void k_ce_empty(int64_t n, RowVec<const int64_t> tgt, RowVec<T> loss, RowVec<T> lse, RowVec<T> valid,
                           int64_t ignore, int *err, int tag) {
    NBC_GRID_STRIDE(r, n) {
        if (tgt[r] != ignore) raise(err, ERR_TARGET, tag);
        lse[r] = (T)-INFINITY;
        loss[r] = (T)0;
        if (valid.p) valid[r] = (T)0;
    }
}

constexpr int CEB_THREADS = 256, CEB_PER = 4; // backward: elements per thread per row chunk

// What the backward needs of row r: its target t, whether it is ignored,
// gloss and lse (0 when ignored); a target out of range is raised once
// (thread 0 of the row's first block).
template <typename T> struct CeRow {
    int64_t t;
    bool ign;
    T g, l;
};
template <typename T>
__device__ inline CeRow<T> ce_row(int64_t r, int64_t c, RowVec<const int64_t> tgt, RowVec<const T> gloss,
                                  RowVec<const T> lse, int64_t ignore, int *err, int tag) {
    CeRow<T> w;
    w.t = tgt[r], w.ign = w.t == ignore;
    if (!w.ign && (w.t < 0 || w.t >= c) && blockIdx.x == 0 && threadIdx.x == 0) raise(err, ERR_TARGET, tag);
    w.g = w.ign ? (T)0 : gloss[r], w.l = w.ign ? (T)0 : lse[r];
    return w;
}

// glogits[r, j] for the logit xv (read as T) of column j: the formula of
// both backward kernels, so they give the same bits.
template <typename T, typename X> __device__ inline X ce_grad(const CeRow<T> &w, int64_t j, T xv) {
    T v = (T)0;
    if (!w.ign) {
        v = w.g * ex(xv - w.l);
        if (j == w.t) v -= w.g;
    }
    return Traits<X>::store(v);
}

template <typename T, typename X>
__global__ void __launch_bounds__(CEB_THREADS) k_ce_back(const X *x, X *gx, int64_t n, int64_t c,
                                                         RowVec<const int64_t> tgt, RowVec<const T> gloss,
                                                         RowVec<const T> lse, int64_t ignore, int *err, int tag) {
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const CeRow<T> w = ce_row(r, c, tgt, gloss, lse, ignore, err, tag);
        const XRow<T, X> xr{x + r * c};
        X *gr = gx + r * c;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < c; j += (int64_t)gridDim.x * blockDim.x)
            gr[j] = ce_grad<T, X>(w, j, xr[j]);
    }
}

// k_ce_back for 16-bit logits and gradient with the same alignment: each
// row's elements from its first 16-byte boundary on as 8-element vectors
// (one 16-byte load and store), the few before it and after the last whole
// vector one by one. Each element's formula is k_ce_back's (ce_grad), so
// the bits are its bits; with scalar 2-byte accesses bert-base's [4096, 30522]
// gradient moved at about 1.5 TB/s.
template <typename T, typename X>
__global__ void __launch_bounds__(CEB_THREADS) k_ce_back16(const X *x, X *gx, int64_t n, int64_t c,
                                                           RowVec<const int64_t> tgt, RowVec<const T> gloss,
                                                           RowVec<const T> lse, int64_t ignore, int *err, int tag) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const CeRow<T> w = ce_row(r, c, tgt, gloss, lse, ignore, err, tag);
        const X *xr = x + r * c;
        X *gr = gx + r * c;
        auto one = [&](int64_t j, X xv) { return ce_grad<T, X>(w, j, (T)Traits<X>::load(xv)); };
        int64_t head = (int64_t)((16 - ((uintptr_t)xr & 15)) & 15) / (int64_t)sizeof(X);
        if (head > c) head = c;
        const int64_t nv = (c - head) / 8, end = head + 8 * nv;
        for (int64_t v = tid; v < nv; v += stride) {
            const int64_t j0 = head + 8 * v;
            const Vec<X, 8> in = *(const Vec<X, 8> *)(xr + j0);
            Vec<X, 8> out;
#pragma unroll
            for (int e = 0; e < 8; e++) out.v[e] = one(j0 + e, in.v[e]);
            *(Vec<X, 8> *)(gr + j0) = out;
        }
        if (tid < head) gr[tid] = one(tid, xr[tid]);
        if (tid < c - end) gr[end + tid] = one(end + tid, xr[end + tid]);
    }
}

template <typename T> static RowVec<T> rv(const nb_kview *v) {
    return v ? RowVec<T>{(T *)v->data, v->strides[0]} : RowVec<T>{nullptr, 0};
}

template <typename T, typename X>
static nb_status ce_t(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *valid,
                      const nb_kview *logits, const nb_kview *target, int64_t ignore) {
    cudaStream_t st = stream_of(be);
    int64_t n = logits->shape[0], c = logits->shape[1];
    int *err = err_word(be);
    int tag = slot_tag("cross_entropy");
    if (c == 0) {
        k_ce_empty<T><<<blocks_for(n), THREADS, 0, st>>>(n, rv<const int64_t>(target), rv<T>(loss), rv<T>(lse),
                                                         rv<T>(valid), ignore, err, tag);
        return launched("cross_entropy");
    }
    // about 8 elements per thread per pass, 32 .. 1024 threads
    int threads = pow2_at_least((c + 7) / 8);
    if (threads < 32) threads = 32;
    k_ce<T, X><<<grid_for(n, 1, 1 << 20), threads, 0, st>>>((const X *)logits->data, n, c, rv<const int64_t>(target),
                                                           rv<T>(loss), rv<T>(lse), rv<T>(valid), ignore, err, tag);
    return launched("cross_entropy");
}

template <typename T, typename X>
static nb_status ce_back_t(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss, const nb_kview *logits,
                           const nb_kview *lse, const nb_kview *target, int64_t ignore) {
    int64_t n = logits->shape[0], c = logits->shape[1];
    if constexpr (sizeof(X) == 2)
        if ((((uintptr_t)logits->data - (uintptr_t)glogits->data) & 15) == 0) { // the same alignment
            dim3 grid(grid_for((c + 7) / 8, (int64_t)CEB_THREADS * 2, 1024), (unsigned)(n < 65535 ? n : 65535));
            k_ce_back16<T, X><<<grid, CEB_THREADS, 0, stream_of(be)>>>(
                (const X *)logits->data, (X *)glogits->data, n, c, rv<const int64_t>(target), rv<const T>(gloss),
                rv<const T>(lse), ignore, err_word(be), slot_tag("cross_entropy_backward"));
            return launched("cross_entropy_backward");
        }
    dim3 grid(grid_for(c, (int64_t)CEB_THREADS * CEB_PER, 1024), (unsigned)(n < 65535 ? n : 65535));
    k_ce_back<T, X><<<grid, CEB_THREADS, 0, stream_of(be)>>>(
        (const X *)logits->data, (X *)glogits->data, n, c, rv<const int64_t>(target), rv<const T>(gloss),
        rv<const T>(lse), ignore, err_word(be), slot_tag("cross_entropy_backward"));
    return launched("cross_entropy_backward");
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse,
                                           const nb_kview *valid, const nb_kview *logits, const nb_kview *target,
                                           int64_t ignore_index) {
    // checked (but the targets' values: the kernels' error word): backend/check/loss.c
    if (logits->shape[0] == 0) return NB_OK;
    switch (logits->dtype) {
    case NB_F32: return ce_t<float, float>(be, loss, lse, valid, logits, target, ignore_index);
    case NB_BF16: return ce_t<float, __nv_bfloat16>(be, loss, lse, valid, logits, target, ignore_index);
    case NB_F16: return ce_t<float, __half>(be, loss, lse, valid, logits, target, ignore_index);
    default: return ce_t<double, double>(be, loss, lse, valid, logits, target, ignore_index);
    }
}

extern "C" nb_status nb_cuda_cross_entropy_backward(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                                    const nb_kview *logits, const nb_kview *lse,
                                                    const nb_kview *target, int64_t ignore_index) {
    // checked (but the targets' values: the kernel's error word): backend/check/loss.c
    if (logits->shape[0] == 0) return NB_OK; // c == 0 still checks the targets
    switch (logits->dtype) {
    case NB_F32: return ce_back_t<float, float>(be, glogits, gloss, logits, lse, target, ignore_index);
    case NB_BF16: return ce_back_t<float, __nv_bfloat16>(be, glogits, gloss, logits, lse, target, ignore_index);
    case NB_F16: return ce_back_t<float, __half>(be, glogits, gloss, logits, lse, target, ignore_index);
    default: return ce_back_t<double, double>(be, glogits, gloss, logits, lse, target, ignore_index);
    }
}
