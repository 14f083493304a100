// rms_norm.cu - the decoders' slots on CUDA: rms_norm, rms_norm_backward
// (RMSNorm, Zhang & Sennrich 2019; PyTorch's F.rms_norm), add_rms_norm (the
// residual add fused into the norm, the same kernels) and rope (the
// rotate-half rotary embedding of Llama / Hugging Face). Formulas are the
// CPU backend's (backend/cpu/rms_norm.c, rope.c). The forwards also take
// float16/bfloat16 (float32 math, one rounding; nb_backend_i.norms_16bit). Deterministic: row sums
// in double by one block per row with a fixed tree; gw in fixed chunks of
// rows summed per column in chunk order. No atomics.
#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_common.cuh"

namespace nbc {
namespace {

constexpr int RT = 256;     // threads per row block
constexpr int GW_COLS = 32; // gw: columns per block
constexpr int GW_ROWS = 64; // gw: rows per chunk

// res (may be NULL): the rows normalised are x + res, written to sum first
// (add_rms_norm); each thread reads back only what it wrote. rstd may be NULL.
template <typename T>
__global__ void k_rms_fwd(T *y, T *rstd, const T *x, const T *w, int64_t m, double eps, const T *res, T *sum) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x;
    const T *xr = x + r * m;
    double s = 0;
    if (res) {
        T *sr = sum + r * m;
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            const T v = xr[i] + res[r * m + i];
            sr[i] = v;
            s += (double)v * (double)v;
        }
        xr = sr;
    } else
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += (double)xr[i] * (double)xr[i];
    s = block_sum(s, red);
    const double rs = 1 / sqrt(s / (double)m + eps);
    const T rt = (T)rs;
    if (rstd && threadIdx.x == 0) rstd[r] = rt;
    T *yr = y + r * m;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) yr[i] = w ? w[i] * (xr[i] * rt) : xr[i] * rt;
}

template <typename T>
__global__ void k_rms_bwd_rows(T *gx, const T *gy, const T *x, const T *w, const T *rstd, int64_t m) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x;
    const T *xr = x + r * m, *gr = gy + r * m;
    const T rt = rstd[r];
    double s = 0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        T a = w ? gr[i] * w[i] : gr[i];
        s += (double)(a * (xr[i] * rt));
    }
    s = block_sum(s, red);
    const T mx = (T)(s / (double)m);
    T *g = gx + r * m;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        T a = w ? gr[i] * w[i] : gr[i];
        g[i] = rt * (a - (xr[i] * rt) * mx);
    }
}

// part[chunk][col] = sum over the chunk's rows of gy * xhat, in row order.
template <typename T>
__global__ void k_rms_gw_part(double *part, const T *gy, const T *x, const T *rstd, int64_t rows, int64_t m) {
    const int64_t c = (int64_t)blockIdx.x * GW_COLS + threadIdx.x, chunk = blockIdx.y;
    if (c >= m) return;
    const int64_t r0 = chunk * GW_ROWS, r1 = min(r0 + GW_ROWS, rows);
    double acc = 0;
    for (int64_t r = r0; r < r1; r++) acc += (double)(gy[r * m + c] * (x[r * m + c] * rstd[r]));
    part[chunk * m + c] = acc;
}

template <typename T> __global__ void k_rms_gw_sum(T *gw, const double *part, int64_t chunks, int64_t m) {
    NBC_GRID_STRIDE(c, m) {
        double acc = 0;
        for (int64_t k = 0; k < chunks; k++) acc += part[k * m + c];
        gw[c] = (T)acc;
    }
}

// One thread per (row, i < h) pair of a [N, T, D] tensor.
template <typename T>
__global__ void k_rope(T *out, const T *x, const T *cs, const T *sn, int64_t n_rows, int64_t t_len, int64_t h,
                       bool inverse) {
    NBC_GRID_STRIDE(k, n_rows * h) {
        const int64_t row = k / h, i = k % h, t = row % t_len;
        const T c = cs[t * h + i], s = inverse ? -sn[t * h + i] : sn[t * h + i];
        const T a = x[row * 2 * h + i], b = x[row * 2 * h + i + h];
        out[row * 2 * h + i] = a * c - b * s;
        out[row * 2 * h + i + h] = b * c + a * s;
    }
}

// The 16-bit forward (inference: no rstd for a backward is needed, but it is
// written in T): the float32 kernel's math on widened values, rounded once.
template <typename T>
__global__ void k_rms_fwd16(T *y, T *rstd, const T *x, const T *w, int64_t m, double eps, const T *res, T *sum) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x;
    const T *xr = x + r * m;
    double s = 0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        float v = Traits<T>::load(xr[i]);
        if (res) { // the sum rounded as the binary add rounds it
            const T h = Traits<T>::store(v + Traits<T>::load(res[r * m + i]));
            sum[r * m + i] = h;
            v = Traits<T>::load(h);
        }
        s += (double)v * (double)v;
    }
    if (res) xr = sum + r * m; // read back by the thread that wrote it
    s = block_sum(s, red);
    const float rt = (float)(1 / sqrt(s / (double)m + eps));
    if (rstd && threadIdx.x == 0) rstd[r] = Traits<T>::store(rt);
    T *yr = y + r * m;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        const float v = Traits<T>::load(xr[i]) * rt;
        yr[i] = Traits<T>::store(w ? Traits<T>::load(w[i]) * v : v);
    }
}

// k_rms_fwd16 for rows of m <= NV * RT * 8 elements, m a multiple of 8 and
// rows 16-byte aligned: every load of the row issued at once, 16 bytes a
// thread, and the row kept in registers between the sum and the scaling
// (the strided loop waited on one load at a time: 8.4 us a [1, 2048] row
// in a decode step, ncu). The same math; the sum's order is the thread's
// vectors, then the block's tree.
template <typename T, int NV>
__global__ void __launch_bounds__(RT)
    k_rms_fwd16v(T *y, T *rstd, const T *x, const T *w, int64_t m, double eps, const T *res, T *sum) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x;
    const T *xr = x + r * m;
    float v[NV][8];
#pragma unroll
    for (int u = 0; u < NV; u++) {
        const int64_t i = ((int64_t)u * RT + threadIdx.x) * 8;
        if (i < m) load8(xr + i, v[u]);
    }
    if (res) // the sum rounded as the binary add rounds it
#pragma unroll
        for (int u = 0; u < NV; u++) {
            const int64_t i = ((int64_t)u * RT + threadIdx.x) * 8;
            if (i >= m) continue;
            float rv[8];
            load8(res + r * m + i, rv);
            Vec<T, 8> h;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                h.v[e] = Traits<T>::store(v[u][e] + rv[e]);
                v[u][e] = Traits<T>::load(h.v[e]);
            }
            *reinterpret_cast<Vec<T, 8> *>(sum + r * m + i) = h;
        }
    double s = 0;
#pragma unroll
    for (int u = 0; u < NV; u++)
        if (((int64_t)u * RT + threadIdx.x) * 8 < m)
#pragma unroll
            for (int e = 0; e < 8; e++) s += (double)v[u][e] * (double)v[u][e];
    s = block_sum(s, red);
    const float rt = (float)(1 / sqrt(s / (double)m + eps));
    if (rstd && threadIdx.x == 0) rstd[r] = Traits<T>::store(rt);
    T *yr = y + r * m;
#pragma unroll
    for (int u = 0; u < NV; u++) {
        const int64_t i = ((int64_t)u * RT + threadIdx.x) * 8;
        if (i >= m) continue;
        float wf[8];
        if (w) load8(w + i, wf);
        Vec<T, 8> o;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float yv = v[u][e] * rt;
            o.v[e] = Traits<T>::store(w ? wf[e] * yv : yv);
        }
        *reinterpret_cast<Vec<T, 8> *>(yr + i) = o;
    }
}

template <typename T>
__global__ void k_rope16(T *out, const T *x, const T *cs, const T *sn, int64_t n_rows, int64_t t_len, int64_t h,
                         bool inverse) {
    NBC_GRID_STRIDE(k, n_rows * h) {
        const int64_t row = k / h, i = k % h, t = row % t_len;
        const float c = Traits<T>::load(cs[t * h + i]), sv = Traits<T>::load(sn[t * h + i]), s = inverse ? -sv : sv;
        const float a = Traits<T>::load(x[row * 2 * h + i]), b = Traits<T>::load(x[row * 2 * h + i + h]);
        out[row * 2 * h + i] = Traits<T>::store(a * c - b * s);
        out[row * 2 * h + i + h] = Traits<T>::store(b * c + a * s);
    }
}

} // namespace
} // namespace nbc

using namespace nbc;

// rms_norm, and add_rms_norm where res and sum are given (rstd NULL).
static nb_status rms_forward(nb_backend *be, const char *op, const nb_kview *out, const nb_kview *rstd,
                             const nb_kview *x, const nb_kview *w, double eps, const nb_kview *res,
                             const nb_kview *sum) {
    int64_t rows = x->shape[0], m = x->shape[1];
    if (rows == 0) return NB_OK;
    return dispatch_floating(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        T *rp = rstd ? (T *)rstd->data : nullptr, *sp = sum ? (T *)sum->data : nullptr;
        const T *wp = w ? (const T *)w->data : nullptr, *resp = res ? (const T *)res->data : nullptr;
        if constexpr (std::is_same_v<typename Traits<T>::acc, T>)
            k_rms_fwd<T><<<(unsigned)rows, RT, 0, stream_of(be)>>>((T *)out->data, rp, (const T *)x->data, wp, m, eps,
                                                                     resp, sp);
        else {
            const bool vec = m % 8 == 0 && m <= 4 * RT * 8 &&
                             ((uintptr_t)x->data | (uintptr_t)out->data | (uintptr_t)wp | (uintptr_t)resp |
                              (uintptr_t)sp) % 16 == 0;
            auto go = [&](auto kern) {
                kern<<<(unsigned)rows, RT, 0, stream_of(be)>>>((T *)out->data, rp, (const T *)x->data, wp, m, eps,
                                                               resp, sp);
            };
            if (vec && m <= RT * 8) go(k_rms_fwd16v<T, 1>);
            else if (vec && m <= 2 * RT * 8) go(k_rms_fwd16v<T, 2>);
            else if (vec) go(k_rms_fwd16v<T, 4>);
            else go(k_rms_fwd16<T>);
        }
        return launched(op);
    });
}

nb_status nb_cuda_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                           const nb_kview *w, double eps) {
    // checked: backend/check/rms_norm.c
    return rms_forward(be, "rms_norm", out, rstd, x, w, eps, nullptr, nullptr);
}

nb_status nb_cuda_add_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *sum, const nb_kview *x,
                               const nb_kview *residual, const nb_kview *w, double eps) {
    // checked: backend/check/rms_norm.c
    return rms_forward(be, "add_rms_norm", out, nullptr, x, w, eps, residual, sum);
}

nb_status nb_cuda_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                    const nb_kview *x, const nb_kview *w, const nb_kview *rstd) {
    const char *op = "rms_norm_backward"; // checked: backend/check/rms_norm.c
    int64_t rows = x->shape[0], m = x->shape[1];
    cudaStream_t s = stream_of(be);
    return dispatch_float(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        if (gx && rows) {
            k_rms_bwd_rows<T><<<(unsigned)rows, RT, 0, s>>>((T *)gx->data, (const T *)gy->data, (const T *)x->data,
                                                             w ? (const T *)w->data : nullptr,
                                                             (const T *)rstd->data, m);
            nb_status e = launched(op);
            if (e) return e;
        }
        if (gw && m) {
            const int64_t chunks = rows ? (rows + GW_ROWS - 1) / GW_ROWS : 0;
            Scratch part;
            if (chunks && !part.alloc(be, sizeof(double) * (size_t)(chunks * m))) return nb_last_status();
            if (chunks) {
                dim3 grid((unsigned)((m + GW_COLS - 1) / GW_COLS), (unsigned)chunks);
                k_rms_gw_part<T><<<grid, GW_COLS, 0, s>>>(part.as<double>(), (const T *)gy->data,
                                                          (const T *)x->data, (const T *)rstd->data, rows, m);
                nb_status e = launched(op);
                if (e) return e;
            }
            k_rms_gw_sum<T><<<blocks_for(m), THREADS, 0, s>>>((T *)gw->data, part.as<double>(), chunks, m);
            return launched(op);
        }
        return NB_OK;
    });
}

nb_status nb_cuda_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                       const nb_kview *sin, bool inverse) {
    const char *op = "rope"; // checked: backend/check/rope.c
    const int64_t n = x->shape[0], t = x->shape[1], h = x->shape[2] / 2;
    if (!n || !t || !h) return NB_OK;
    return dispatch_floating(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        if constexpr (std::is_same_v<typename Traits<T>::acc, T>)
            k_rope<T><<<blocks_for(n * t * h), THREADS, 0, stream_of(be)>>>(
                (T *)out->data, (const T *)x->data, (const T *)cos->data, (const T *)sin->data, n * t, t, h, inverse);
        else
            k_rope16<T><<<blocks_for(n * t * h), THREADS, 0, stream_of(be)>>>(
                (T *)out->data, (const T *)x->data, (const T *)cos->data, (const T *)sin->data, n * t, t, h, inverse);
        return launched(op);
    });
}
