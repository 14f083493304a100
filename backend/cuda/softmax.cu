// softmax.cu - softmax / log_softmax along a dim of a contiguous tensor and
// their backward on CUDA, with backend/cpu/softmax.c's formulas (PyTorch's):
//   softmax y = exp(x - max) / sum exp(x - max)   (the sum in double for float32)
//   log_softmax y = (x - max) - log(sum exp(x - max))
//   softmax backward gx = y * (gy - sum(gy * y))
//   log_softmax backward gx = gy - exp(y) * sum(gy)
// The tensor is seen as [outer, size, inner] around dim.
// inner == 1 (the last dim: attention scores, logits):
// - size <= 1024: a warp per row, the row held in registers (VPT values per
//   lane), max and sum by warp shuffles: one read and one write per element;
// - longer rows: a block per row, three passes (max, sum, write), the
//   re-reads served by L2.
// inner > 1: a thread per (outer, column), walking size in order (neighbouring
// threads take neighbouring columns: coalesced).
// Each lane sums its own elements in order, then a fixed shuffle / shared
// memory tree: deterministic, no atomics.
#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// ---- forward ----------------------------------------------------------------------------

template <typename T, int VPT>
__global__ void __launch_bounds__(THREADS) k_sm_warp(const T *x, T *y, int64_t rows, int n, bool lg) {
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * wpb) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        T v[VPT], mx = (T)-INFINITY;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int i = lane + k * 32;
            v[k] = i < n ? xr[i] : (T)0;
            if (i < n) mx = MaxNan<T>()(mx, v[k]);
        }
        mx = warp_all(mx, MaxNan<T>());
        double s = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            if (lane + k * 32 < n) {
                T e = ex(v[k] - mx);
                s += (double)e;
                if (!lg) v[k] = e;
            }
        }
        s = warp_all(s, Plus<double>());
        if (lg) {
            T ls = (T)log(s);
#pragma unroll
            for (int k = 0; k < VPT; k++)
                if (lane + k * 32 < n) yr[lane + k * 32] = (v[k] - mx) - ls;
        } else {
            T inv = (T)(1.0 / s);
#pragma unroll
            for (int k = 0; k < VPT; k++)
                if (lane + k * 32 < n) yr[lane + k * 32] = v[k] * inv;
        }
    }
}

constexpr int SM_BLOCK = 512, SM_UNROLL = 8; // threads per row for long rows; loads in flight per thread

template <typename T>
__global__ void __launch_bounds__(SM_BLOCK) k_sm_block(const T *x, T *y, int64_t rows, int64_t n, bool lg) {
    __shared__ T st[SM_BLOCK / 32];
    __shared__ double sd[SM_BLOCK / 32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        // each thread's elements in order, SM_UNROLL loads issued together (one row alone would otherwise
        // wait out a memory latency per element)
        const int64_t B = blockDim.x;
        T mx = (T)-INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += SM_UNROLL * B) {
            T v[SM_UNROLL];
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++) v[j] = i + j * B < n ? xr[i + j * B] : (T)-INFINITY;
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++) mx = MaxNan<T>()(mx, v[j]);
        }
        mx = block_all(mx, MaxNan<T>(), st);
        double s = 0;
        for (int64_t i = threadIdx.x; i < n; i += SM_UNROLL * B) {
            T v[SM_UNROLL];
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++) v[j] = i + j * B < n ? xr[i + j * B] : (T)0;
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++)
                if (i + j * B < n) {
                    T e = ex(v[j] - mx);
                    if (!lg) yr[i + j * B] = e; // rescaled below by the thread that wrote it
                    s += (double)e;
                }
        }
        s = block_all(s, Plus<double>(), sd);
        T ls = lg ? (T)log(s) : (T)0, inv = (T)(1.0 / s);
        for (int64_t i = threadIdx.x; i < n; i += SM_UNROLL * B) {
            T v[SM_UNROLL];
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++) v[j] = i + j * B < n ? (lg ? xr : yr)[i + j * B] : (T)0;
#pragma unroll
            for (int j = 0; j < SM_UNROLL; j++)
                if (i + j * B < n) yr[i + j * B] = lg ? (v[j] - mx) - ls : v[j] * inv;
        }
    }
}

// inner > 1: thread per (o, c), the CPU's sm_cols order for one column.
template <typename T> __global__ void k_sm_cols(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool lg) {
    NBC_GRID_STRIDE(u, outer * inner) {
        int64_t o = u / inner, c = u - o * inner, base = o * n * inner + c;
        const T *xc = x + base;
        T *yc = y + base;
        T mx = xc[0];
        for (int64_t i = 1; i < n; i++) mx = MaxNan<T>()(mx, xc[i * inner]);
        double s = 0;
        for (int64_t i = 0; i < n; i++) {
            T e = ex(xc[i * inner] - mx);
            if (!lg) yc[i * inner] = e;
            s += (double)e;
        }
        T ls = lg ? (T)log(s) : (T)(1.0 / s);
        for (int64_t i = 0; i < n; i++) {
            if (lg) yc[i * inner] = (xc[i * inner] - mx) - ls;
            else yc[i * inner] *= ls;
        }
    }
}

// ---- backward ---------------------------------------------------------------------------

template <typename T, int VPT>
__global__ void __launch_bounds__(THREADS) k_smb_warp(const T *gy, const T *y, T *gx, int64_t rows, int n, bool lg) {
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * wpb) {
        const T *gr = gy + r * n, *yr = y + r * n;
        T *gxr = gx + r * n;
        T gv[VPT], yv[VPT];
        double acc = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int i = lane + k * 32;
            gv[k] = i < n ? gr[i] : (T)0;
            yv[k] = i < n ? yr[i] : (T)0;
            if (i < n) acc += lg ? (double)gv[k] : (double)(gv[k] * yv[k]);
        }
        T s = (T)warp_all(acc, Plus<double>());
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int i = lane + k * 32;
            if (i < n) gxr[i] = lg ? gv[k] - ex(yv[k]) * s : yv[k] * (gv[k] - s);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(SM_BLOCK) k_smb_block(const T *gy, const T *y, T *gx, int64_t rows, int64_t n,
                                                        bool lg) {
    __shared__ double sd[SM_BLOCK / 32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *gr = gy + r * n, *yr = y + r * n;
        T *gxr = gx + r * n;
        double acc = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += lg ? (double)gr[i] : (double)(gr[i] * yr[i]);
        T s = (T)block_all(acc, Plus<double>(), sd);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            gxr[i] = lg ? gr[i] - ex(yr[i]) * s : yr[i] * (gr[i] - s);
    }
}

template <typename T>
__global__ void k_smb_cols(const T *gy, const T *y, T *gx, int64_t outer, int64_t n, int64_t inner, bool lg) {
    NBC_GRID_STRIDE(u, outer * inner) {
        int64_t o = u / inner, c = u - o * inner, base = o * n * inner + c;
        const T *gc = gy + base, *yc = y + base;
        T *gxc = gx + base;
        double acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += lg ? (double)gc[i * inner] : (double)(gc[i * inner] * yc[i * inner]);
        T s = (T)acc;
        for (int64_t i = 0; i < n; i++) {
            int64_t e = i * inner;
            gxc[e] = lg ? gc[e] - ex(yc[e]) * s : yc[e] * (gc[e] - s);
        }
    }
}

// ---- launch -------------------------------------------------------------------------------

struct SmGeo {
    int64_t outer, size, inner;
};

// The [outer, size, inner] geometry of a (checked: backend/check/softmax.c).
static SmGeo sm_geo(const nb_kview *a, int dim) {
    SmGeo g = {1, a->shape[dim], 1};
    for (int d = 0; d < dim; d++) g.outer *= a->shape[d];
    for (int d = dim + 1; d < a->ndim; d++) g.inner *= a->shape[d];
    return g;
}

// Registers per lane for a row of n <= 1024 in a warp.
static int vpt_for(int64_t n) { return n <= 32 ? 1 : n <= 64 ? 2 : n <= 128 ? 4 : n <= 256 ? 8 : n <= 512 ? 16 : 32; }

template <typename T>
static nb_status softmax_t(nb_backend *be, const SmGeo &g, const T *x, T *y, bool lg, const char *name) {
    cudaStream_t st = stream_of(be);
    if (g.inner > 1) {
        k_sm_cols<T><<<blocks_for(g.outer * g.inner), THREADS, 0, st>>>(x, y, g.outer, g.size, g.inner, lg);
    } else if (g.size <= 1024) {
        unsigned grid = grid_for(g.outer, THREADS / 32, 1 << 20);
        int n = (int)g.size;
        switch (vpt_for(n)) {
        case 1: k_sm_warp<T, 1><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        case 2: k_sm_warp<T, 2><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        case 4: k_sm_warp<T, 4><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        case 8: k_sm_warp<T, 8><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        case 16: k_sm_warp<T, 16><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        default: k_sm_warp<T, 32><<<grid, THREADS, 0, st>>>(x, y, g.outer, n, lg); break;
        }
    } else {
        k_sm_block<T><<<grid_for(g.outer, 1, 1 << 20), SM_BLOCK, 0, st>>>(x, y, g.outer, g.size, lg);
    }
    return launched(name);
}

template <typename T>
static nb_status softmax_back_t(nb_backend *be, const SmGeo &g, const T *gy, const T *y, T *gx, bool lg,
                                const char *name) {
    cudaStream_t st = stream_of(be);
    if (g.inner > 1) {
        k_smb_cols<T><<<blocks_for(g.outer * g.inner), THREADS, 0, st>>>(gy, y, gx, g.outer, g.size, g.inner, lg);
    } else if (g.size <= 1024) {
        unsigned grid = grid_for(g.outer, THREADS / 32, 1 << 20);
        int n = (int)g.size;
        switch (vpt_for(n)) {
        case 1: k_smb_warp<T, 1><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        case 2: k_smb_warp<T, 2><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        case 4: k_smb_warp<T, 4><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        case 8: k_smb_warp<T, 8><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        case 16: k_smb_warp<T, 16><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        default: k_smb_warp<T, 32><<<grid, THREADS, 0, st>>>(gy, y, gx, g.outer, n, lg); break;
        }
    } else {
        k_smb_block<T><<<grid_for(g.outer, 1, 1 << 20), SM_BLOCK, 0, st>>>(gy, y, gx, g.outer, g.size, lg);
    }
    return launched(name);
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log) {
    const char *name = log ? "log_softmax" : "softmax";
    SmGeo g = sm_geo(x, dim);
    if (g.outer * g.size * g.inner == 0) return NB_OK;
    if (x->dtype == NB_F32) return softmax_t<float>(be, g, (const float *)x->data, (float *)out->data, log, name);
    return softmax_t<double>(be, g, (const double *)x->data, (double *)out->data, log, name);
}

extern "C" nb_status nb_cuda_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                              const nb_kview *y, int dim, bool log) {
    const char *name = log ? "log_softmax_backward" : "softmax_backward";
    SmGeo g = sm_geo(y, dim);
    if (g.outer * g.size * g.inner == 0) return NB_OK;
    if (y->dtype == NB_F32)
        return softmax_back_t<float>(be, g, (const float *)gy->data, (const float *)y->data, (float *)gx->data, log,
                                     name);
    return softmax_back_t<double>(be, g, (const double *)gy->data, (const double *)y->data, (double *)gx->data, log,
                                  name);
}
