// layer_norm.cu - fused layer norm over the rows of x [R, M] on CUDA
// (float32/float64, contiguous), with backend/cpu/layer_norm.c's formulas
// (PyTorch's F.layer_norm, biased variance):
//   forward   mean = sum(x)/M, rstd = 1/sqrt(sum((x-mean)^2)/M + eps) in
//             double (saved, rounded to the dtype), y = (x - mean) * rstd * w + b
//             in the dtype with the rounded mean and rstd
//   backward  xhat = (x - mean) * rstd, a = gy * w,
//             gx = rstd * (a - mean(a) - xhat * mean(a * xhat)),
//             gw = sum_rows(gy * xhat), gb = sum_rows(gy).
// One warp owns a row (llm.c's layout): the row is read with 16-byte vector
// loads where alignment allows and kept in registers for rows up to
// 32 * LN_CACHE vectors (BERT's 768 and 1024 columns), so each pass after
// the first reads registers; longer rows re-read global memory (L1/L2).
// Row sums accumulate in double per lane and combine with a fixed XOR
// butterfly. gw/gb have no atomics: blocks of 32 columns x 8 row lanes sum
// fixed chunks of LN_ROW_CHUNK rows (rows in order per lane, lanes combined
// in order) into a scratch partial per chunk, and a second kernel adds each
// column's chunk partials the same way (8 lanes, then a fixed tree). Every
// tree depends only on the shapes, so the bits repeat run to run.
#include <math.h>

#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_common.cuh"

namespace nbc {
namespace {

constexpr int LN_WARPS = 4;           // rows per block of the row kernels
constexpr int LN_CACHE = 8;           // vectors per lane kept in registers
constexpr int64_t LN_ROW_CHUNK = 64;  // rows per gw/gb partial
constexpr int LN_COL_LANES = 8;       // row lanes of a gw/gb block (x 32 columns)

template <typename T, int V> __device__ inline Vec<T, V> vload(const T *p, int64_t i) {
    return *reinterpret_cast<const Vec<T, V> *>(p + i * V);
}
template <typename T, int V> __device__ inline void vstore(T *p, int64_t i, const Vec<T, V> &a) {
    *reinterpret_cast<Vec<T, V> *>(p + i * V) = a;
}

// y = (x - mt) * rt * w + b for vector i of a row, with whichever of w, b
// there is (the CPU's four loops).
template <typename T, int V>
__device__ inline Vec<T, V> ln_out(const Vec<T, V> &xv, T mt, T rt, const T *w, const T *b, int64_t i) {
    Vec<T, V> o, wv, bv;
    if (w) wv = vload<T, V>(w, i);
    if (b) bv = vload<T, V>(b, i);
#pragma unroll
    for (int e = 0; e < V; e++) {
        T v = (xv.v[e] - mt) * rt;
        if (w) v = v * wv.v[e];
        if (b) v = v + bv.v[e];
        o.v[e] = v;
    }
    return o;
}

// Forward, one warp per row. V: elements per vector (M % V == 0 and the
// pointers aligned); CACHED: the row fits LN_CACHE vectors per lane.
template <typename T, int V, bool CACHED>
__global__ void k_ln_fwd(T *__restrict__ y, T *__restrict__ mean, T *__restrict__ rstd, const T *__restrict__ x,
                         const T *__restrict__ w, const T *__restrict__ b, int64_t R, int64_t M, double eps) {
    const int lane = threadIdx.x & 31;
    const int64_t nv = M / V;
    for (int64_t row = (int64_t)blockIdx.x * LN_WARPS + (threadIdx.x >> 5); row < R;
         row += (int64_t)gridDim.x * LN_WARPS) { // uniform across the warp
        const T *xr = x + row * M;
        T *yr = y + row * M;
        Vec<T, V> buf[CACHED ? LN_CACHE : 1];
        double s = 0;
        if (CACHED) {
#pragma unroll
            for (int k = 0; k < LN_CACHE; k++) {
                int64_t i = lane + 32 * k;
                if (i < nv) {
                    buf[k] = vload<T, V>(xr, i);
#pragma unroll
                    for (int e = 0; e < V; e++) s += (double)buf[k].v[e];
                }
            }
        } else {
            for (int64_t i = lane; i < nv; i += 32) {
                Vec<T, V> a = vload<T, V>(xr, i);
#pragma unroll
                for (int e = 0; e < V; e++) s += (double)a.v[e];
            }
        }
        const double mu = warp_sum(s) / (double)M;
        double q = 0;
        if (CACHED) {
#pragma unroll
            for (int k = 0; k < LN_CACHE; k++)
                if (lane + 32 * k < nv)
#pragma unroll
                    for (int e = 0; e < V; e++) {
                        double d = (double)buf[k].v[e] - mu;
                        q += d * d;
                    }
        } else {
            for (int64_t i = lane; i < nv; i += 32) {
                Vec<T, V> a = vload<T, V>(xr, i);
#pragma unroll
                for (int e = 0; e < V; e++) {
                    double d = (double)a.v[e] - mu;
                    q += d * d;
                }
            }
        }
        const double rs = 1 / sqrt(warp_sum(q) / (double)M + eps);
        if (lane == 0) mean[row] = (T)mu, rstd[row] = (T)rs;
        const T mt = (T)mu, rt = (T)rs;
        if (CACHED) {
#pragma unroll
            for (int k = 0; k < LN_CACHE; k++) {
                int64_t i = lane + 32 * k;
                if (i < nv) vstore<T, V>(yr, i, ln_out<T, V>(buf[k], mt, rt, w, b, i));
            }
        } else {
            for (int64_t i = lane; i < nv; i += 32) vstore<T, V>(yr, i, ln_out<T, V>(vload<T, V>(xr, i), mt, rt, w, b, i));
        }
    }
}

// Backward gx, one warp per row: the two row means in double, then one pass.
template <typename T, int V, bool CACHED>
__global__ void k_ln_bwd(T *__restrict__ gx, const T *__restrict__ gy, const T *__restrict__ x,
                         const T *__restrict__ w, const T *__restrict__ mean, const T *__restrict__ rstd, int64_t R,
                         int64_t M) {
    const int lane = threadIdx.x & 31;
    const int64_t nv = M / V;
    for (int64_t row = (int64_t)blockIdx.x * LN_WARPS + (threadIdx.x >> 5); row < R;
         row += (int64_t)gridDim.x * LN_WARPS) {
        const T *xr = x + row * M, *gr = gy + row * M;
        T *gxr = gx + row * M;
        const T mt = mean[row], rt = rstd[row];
        Vec<T, V> bx[CACHED ? LN_CACHE : 1], bg[CACHED ? LN_CACHE : 1];
        double s1 = 0, s2 = 0;
        auto terms = [&](const Vec<T, V> &xv, const Vec<T, V> &gv, int64_t i) {
            Vec<T, V> wv;
            if (w) wv = vload<T, V>(w, i);
#pragma unroll
            for (int e = 0; e < V; e++) {
                T a = w ? gv.v[e] * wv.v[e] : gv.v[e];
                T xh = (xv.v[e] - mt) * rt;
                s1 += (double)a;
                s2 += (double)(a * xh);
            }
        };
        if (CACHED) {
#pragma unroll
            for (int k = 0; k < LN_CACHE; k++) {
                int64_t i = lane + 32 * k;
                if (i < nv) {
                    bx[k] = vload<T, V>(xr, i), bg[k] = vload<T, V>(gr, i);
                    terms(bx[k], bg[k], i);
                }
            }
        } else {
            for (int64_t i = lane; i < nv; i += 32) terms(vload<T, V>(xr, i), vload<T, V>(gr, i), i);
        }
        const T ma = (T)(warp_sum(s1) / (double)M), mx = (T)(warp_sum(s2) / (double)M);
        auto out = [&](const Vec<T, V> &xv, const Vec<T, V> &gv, int64_t i) {
            Vec<T, V> o, wv;
            if (w) wv = vload<T, V>(w, i);
#pragma unroll
            for (int e = 0; e < V; e++) {
                T a = w ? gv.v[e] * wv.v[e] : gv.v[e];
                T xh = (xv.v[e] - mt) * rt;
                o.v[e] = rt * (a - ma - xh * mx);
            }
            vstore<T, V>(gxr, i, o);
        };
        if (CACHED) {
#pragma unroll
            for (int k = 0; k < LN_CACHE; k++)
                if (lane + 32 * k < nv) out(bx[k], bg[k], lane + 32 * k);
        } else {
            for (int64_t i = lane; i < nv; i += 32) out(vload<T, V>(xr, i), vload<T, V>(gr, i), i);
        }
    }
}

// gw/gb partials: block (column tile, row chunk); thread (row lane l,
// column c) sums rows r0 + l, r0 + l + 8, ... in order, then row lane 0
// adds the 8 lanes in order. pw/pb [chunks, M].
template <typename T>
__global__ void k_ln_gwb_partial(double *pw, double *pb, const T *__restrict__ gy, const T *__restrict__ x,
                                 const T *__restrict__ mean, const T *__restrict__ rstd, int64_t R, int64_t M,
                                 int64_t chunks) {
    __shared__ double sw[LN_COL_LANES][32], sb[LN_COL_LANES][32];
    const int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    const int64_t col = (int64_t)blockIdx.x * 32 + lane;
    for (int64_t ch = blockIdx.y; ch < chunks; ch += gridDim.y) { // uniform across the block
        const int64_t r0 = ch * LN_ROW_CHUNK, r1 = r0 + LN_ROW_CHUNK < R ? r0 + LN_ROW_CHUNK : R;
        double aw = 0, ab = 0;
        if (col < M)
            for (int64_t r = r0 + rl; r < r1; r += LN_COL_LANES) {
                const T g = gy[r * M + col], xh = (x[r * M + col] - mean[r]) * rstd[r];
                aw += (double)(g * xh);
                ab += (double)g;
            }
        __syncthreads(); // the previous chunk's sums have been read
        sw[rl][lane] = aw, sb[rl][lane] = ab;
        __syncthreads();
        if (rl == 0 && col < M) {
            double tw = 0, tb = 0;
            for (int l = 0; l < LN_COL_LANES; l++) tw += sw[l][lane], tb += sb[l][lane];
            pw[ch * M + col] = tw, pb[ch * M + col] = tb;
        }
    }
}

// gw[c], gb[c] (either may be NULL) = the sum of column c's chunk partials:
// a block takes 32 columns; row lane l of it sums chunks l, l + 8, ... in
// order, then a fixed tree over the 8 lanes (one thread per column summing
// every chunk left the GPU nearly idle: 41 us for bert's 768 columns).
template <typename T>
__global__ void k_ln_gwb_final(T *gw, T *gb, const double *pw, const double *pb, int64_t M, int64_t chunks) {
    __shared__ double sw[LN_COL_LANES][33], sb[LN_COL_LANES][33];
    const int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    const int64_t c = (int64_t)blockIdx.x * 32 + lane;
    double tw = 0, tb = 0;
    if (c < M)
        for (int64_t k = rl; k < chunks; k += LN_COL_LANES) tw += pw[k * M + c], tb += pb[k * M + c];
    sw[rl][lane] = tw, sb[rl][lane] = tb;
    __syncthreads();
    for (int w = LN_COL_LANES / 2; w > 0; w >>= 1) {
        if (rl < w) sw[rl][lane] += sw[rl + w][lane], sb[rl][lane] += sb[rl + w][lane];
        __syncthreads();
    }
    if (rl == 0 && c < M) {
        if (gw) gw[c] = (T)sw[0][lane];
        if (gb) gb[c] = (T)sb[0][lane];
    }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

unsigned row_grid(int64_t rows) {
    int64_t b = (rows + LN_WARPS - 1) / LN_WARPS;
    return (unsigned)(b < 1 ? 1 : b < 65535LL * 16 ? b : 65535LL * 16);
}

// Picks the vector width (16 bytes when every row pointer allows it) and
// whether the row fits the register cache; f(V, CACHED) launches.
template <typename T, typename F> nb_status with_layout(int64_t M, bool aligned, F &&f) {
    constexpr int VW = 16 / sizeof(T);
    if (aligned && M % VW == 0) {
        if (M / VW <= 32 * LN_CACHE) return f(std::integral_constant<int, VW>(), std::true_type());
        return f(std::integral_constant<int, VW>(), std::false_type());
    }
    if (M <= 32 * LN_CACHE) return f(std::integral_constant<int, 1>(), std::true_type());
    return f(std::integral_constant<int, 1>(), std::false_type());
}

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean,
                                        const nb_kview *rstd, const nb_layer_norm_args *args) {
    const nb_kview *x = args->x, *w = args->w, *b = args->b;
    const double eps = args->eps;
    const char *op = "layer_norm"; // checked: backend/check/layer_norm.c
    int64_t rows = x->shape[0], m = x->shape[1];
    if (rows == 0) return NB_OK; // m == 0: mean and rstd are NaN, as the CPU's
    bool aligned = aligned16(x->data) && aligned16(out->data) && (!w || aligned16(w->data)) &&
                   (!b || aligned16(b->data));
    return dispatch_float(op, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        return with_layout<T>(m, aligned, [&](auto vw, auto cached) {
            k_ln_fwd<T, decltype(vw)::value, decltype(cached)::value><<<row_grid(rows), 32 * LN_WARPS, 0,
                                                                         stream_of(be)>>>(
                (T *)out->data, (T *)mean->data, (T *)rstd->data, (const T *)x->data, w ? (const T *)w->data : nullptr,
                b ? (const T *)b->data : nullptr, rows, m, eps);
            return launched(op);
        });
    });
}

extern "C" nb_status nb_cuda_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw,
                                                 const nb_kview *gb, const nb_kview *gy, const nb_kview *mean,
                                                 const nb_kview *rstd, const nb_layer_norm_args *args) {
    const nb_kview *x = args->x, *w = args->w;
    const char *op = "layer_norm_backward"; // checked: backend/check/layer_norm.c
    int64_t rows = x->shape[0], m = x->shape[1];
    return dispatch_float(op, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        cudaStream_t s = stream_of(be);
        const T *pw = w ? (const T *)w->data : nullptr;
        if (gx && rows > 0 && m > 0) {
            bool aligned = aligned16(x->data) && aligned16(gy->data) && aligned16(gx->data) && (!w || aligned16(w->data));
            nb_status e = with_layout<T>(m, aligned, [&](auto vw, auto cached) {
                k_ln_bwd<T, decltype(vw)::value, decltype(cached)::value><<<row_grid(rows), 32 * LN_WARPS, 0, s>>>(
                    (T *)gx->data, (const T *)gy->data, (const T *)x->data, pw, (const T *)mean->data,
                    (const T *)rstd->data, rows, m);
                return launched(op);
            });
            if (e != NB_OK) return e;
        }
        if (!(gw || gb) || m == 0) return NB_OK;
        int64_t chunks = (rows + LN_ROW_CHUNK - 1) / LN_ROW_CHUNK;
        Scratch part; // pw, pb [chunks, m]
        if (chunks > 0 && !part.alloc(be, 2 * sizeof(double) * (size_t)(chunks * m))) return nb_last_status();
        double *ppw = chunks > 0 ? part.as<double>() : nullptr, *ppb = chunks > 0 ? ppw + chunks * m : nullptr;
        if (chunks > 0) {
            int64_t tiles = (m + 31) / 32;
            if (tiles > INT32_MAX) return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %lld columns", op, (long long)m);
            dim3 grid((unsigned)tiles, (unsigned)(chunks < 65535 ? chunks : 65535));
            k_ln_gwb_partial<T><<<grid, 32 * LN_COL_LANES, 0, s>>>(ppw, ppb, (const T *)gy->data, (const T *)x->data,
                                                                  (const T *)mean->data, (const T *)rstd->data, rows,
                                                                  m, chunks);
            nb_status e = launched(op);
            if (e != NB_OK) return e;
        }
        k_ln_gwb_final<T><<<(unsigned)((m + 31) / 32), 32 * LN_COL_LANES, 0, s>>>(
            gw ? (T *)gw->data : nullptr, gb ? (T *)gb->data : nullptr, ppw, ppb, m, chunks); // rows == 0: zeros
        return launched(op);
    });
}
