// pool.cu - max, average and adaptive pooling over NCHW planes on CUDA, with
// their backward passes; the formulas, window rules and NaN handling are
// backend/cpu/pool.c's (PyTorch's):
//   max: h0 = oh*sH - padH, h1 = min(h0 + dH*(kH-1) + 1, H), h0 stepped up
//        by dH until >= 0; taps in row-major order, `v > m || isnan(v)`
//        from m = -inf, so the first maximum wins and a later NaN replaces
//        an earlier one; the index starts at h0*W + w0 (an all -inf window
//        keeps it, a window that misses the input gives an index outside
//        the plane, which backward ignores).
//   avg: window [oh*sH - padH, min(+kH, H + padH)), divisor from it
//        (count_include_pad) or from its clip to the plane; divisor_override
//        replaces both; sums in double.
//   adaptive: rows floor(oh*H/Ho) .. ceil((oh+1)*H/Ho) - 1.
// float32, float64, and bfloat16/float16 (16-bit tensors; sums in double
// for the forward averages and in float for the backward passes, each
// result rounded once, as the CPU's float32 copies). One thread owns each
// output element. Backward passes never use atomics:
// avg and adaptive avg gather, per input element, from the output windows
// that cover it, in the CPU's (oh, ow) order (so they give the CPU's bits);
// max backward has no window parameters (only the saved indices), so one
// warp owns a plane and walks its outputs in order, 32 at a time: lanes
// that hit the same input position are grouped with __match_any_sync and
// the lowest lane adds their values in lane order, i.e. exactly the CPU's
// sequential `gx[idx[i]] += gy[i]`.
#include "cuda_common.cuh"

#include <math.h>

namespace nbc {
namespace {

struct PoolGeom {
    int64_t planes, H, W, Ho, Wo;
    int64_t kH, kW, sH, sW, pH, pW, dH, dW;
    bool count_include_pad;
    int64_t divisor_override;
};

__host__ __device__ inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
// floor(a / b) for b > 0
__device__ inline int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
// The first of start, start + step, ... that is >= 0 (the CPU's `while (h0 < 0) h0 += d`).
__device__ inline int64_t step_up(int64_t start, int64_t step) {
    return start >= 0 ? start : start + ((-start + step - 1) / step) * step;
}
// PyTorch's adaptive start / end index without float rounding.
__device__ inline int64_t ad_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
__device__ inline int64_t ad_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

// The avg window of output (oh, ow) clipped to the plane; returns the divisor (0: empty window).
__device__ inline int64_t avg_window(const PoolGeom &g, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                                     int64_t *w0, int64_t *w1) {
    int64_t a0 = oh * g.sH - g.pH, b0 = ow * g.sW - g.pW;
    int64_t a1 = imin(a0 + g.kH, g.H + g.pH), b1 = imin(b0 + g.kW, g.W + g.pW);
    int64_t padded = (a1 - a0) * (b1 - b0);
    *h0 = imax(a0, 0), *w0 = imax(b0, 0), *h1 = imin(a1, g.H), *w1 = imin(b1, g.W);
    if (*h0 >= *h1 || *w0 >= *w1) return 0;
    if (g.divisor_override) return g.divisor_override;
    return g.count_include_pad ? padded : (*h1 - *h0) * (*w1 - *w0);
}

// The NaN-aware first-max update of the CPU (`v > m || isnan(v)`).
template <typename T> __device__ inline void max_upd(T v, int64_t k, T &m, int64_t &mi) {
    if (v > m || v != v) m = v, mi = k;
}

// ---- max pooling forward ------------------------------------------------------------

// K > 0: a KxK window with dilation 1 known at compile time (the CNN's 2x2
// pool unrolls); K == 0: the window from g. Same tap order either way. I:
// the type of the output index's decomposition (32-bit division where the
// output allows it).
template <typename T, int K, typename I>
__global__ void k_max_fwd(T *__restrict__ y, int64_t *__restrict__ ix, const T *__restrict__ x, PoolGeom g) {
    const I n = (I)(g.planes * g.Ho * g.Wo), Wo = (I)g.Wo, Ho = (I)g.Ho;
    const int64_t kH = K ? K : g.kH, kW = K ? K : g.kW, dH = K ? 1 : g.dH, dW = K ? 1 : g.dW;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const I q = i / Wo;
        const int64_t ow = (int64_t)(i - q * Wo), oh = (int64_t)(q % Ho), pl = (int64_t)(q / Ho); // signed from here
        const T *xp = x + pl * g.H * g.W;
        int64_t h0 = oh * g.sH - g.pH, w0 = ow * g.sW - g.pW;
        int64_t h1 = imin(h0 + dH * (kH - 1) + 1, g.H), w1 = imin(w0 + dW * (kW - 1) + 1, g.W);
        h0 = step_up(h0, dH), w0 = step_up(w0, dW);
        T m = (T)-INFINITY;
        int64_t mi = h0 * g.W + w0;
        for (int64_t h = h0; h < h1; h += dH)
            for (int64_t w = w0; w < w1; w += dW) max_upd(xp[h * g.W + w], h * g.W + w, m, mi);
        y[i] = m;
        if (ix) ix[i] = mi;
    }
}

// ---- max pooling backward (also adaptive max) ------------------------------------------

constexpr int MAXB_WARPS = THREADS / 32;

// gx (already zeroed) += gy at the saved indices, one warp per plane, in
// output order. Lanes of a 32-output chunk that target one position form a
// group (__match_any_sync); its lowest lane adds the group's values in lane
// order after what earlier chunks left there. __syncwarp orders the chunks'
// global reads and writes and the staging buffer.
// A: gx's type (T, or float for 16-bit gy: the caller rounds once after).
template <typename T, typename A>
__global__ void k_max_bwd(A *__restrict__ gx, const T *__restrict__ gy, const int64_t *__restrict__ idx,
                          int64_t planes, int64_t HW, int64_t HoWo) {
    __shared__ A stage[MAXB_WARPS][32];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const int64_t warp0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t pl = warp0; pl < planes; pl += nwarps) { // uniform across the warp
        A *g = gx + pl * HW;
        const T *y = gy + pl * HoWo;
        const int64_t *ip = idx + pl * HoWo;
        for (int64_t base = 0; base < HoWo; base += 32) {
            const int64_t i = base + lane;
            const bool valid = i < HoWo;
            const int64_t k = valid ? ip[i] : -1;
            const bool hit = valid && (uint64_t)k < (uint64_t)HW; // outside the plane: nothing (as the CPU)
            stage[wib][lane] = valid ? (A)Traits<T>::load(y[i]) : (A)0;
            const unsigned peers = __match_any_sync(0xffffffffu, (long long)(hit ? k : -1));
            __syncwarp();
            if (hit && lane == __ffs(peers) - 1) {
                A acc = g[k];
                for (unsigned m = peers; m; m &= m - 1) acc += stage[wib][__ffs(m) - 1];
                g[k] = acc;
            }
            __syncwarp();
        }
    }
}

// ---- average pooling ----------------------------------------------------------------------

template <typename T> __global__ void k_avg_fwd(T *__restrict__ y, const T *__restrict__ x, PoolGeom g) {
    const int64_t n = g.planes * g.Ho * g.Wo;
    NBC_GRID_STRIDE(i, n) {
        int64_t ow = i % g.Wo, t = i / g.Wo, oh = t % g.Ho, pl = t / g.Ho;
        const T *xp = x + pl * g.H * g.W;
        int64_t h0, h1, w0, w1;
        int64_t div = avg_window(g, oh, ow, &h0, &h1, &w0, &w1);
        double sum = 0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += load_d(xp[h * g.W + w]);
        y[i] = store_d<T>(div ? sum / (double)div : 0.0);
    }
}

// gx[h, w] = sum over the windows covering it, in (oh, ow) order, of
// gy / divisor (in T, as the CPU). Output oh covers row h iff
// oh*sH - pH <= h < oh*sH - pH + kH (its clip to [0, H) keeps h).
template <typename T> __global__ void k_avg_bwd(T *__restrict__ gx, const T *__restrict__ gy, PoolGeom g) {
    const int64_t n = g.planes * g.H * g.W;
    NBC_GRID_STRIDE(i, n) {
        int64_t w = i % g.W, t = i / g.W, h = t % g.H, pl = t / g.H;
        const T *yp = gy + pl * g.Ho * g.Wo;
        int64_t oh0 = imax(floordiv(h + g.pH - g.kH, g.sH) + 1, 0), oh1 = imin(floordiv(h + g.pH, g.sH), g.Ho - 1);
        int64_t ow0 = imax(floordiv(w + g.pW - g.kW, g.sW) + 1, 0), ow1 = imin(floordiv(w + g.pW, g.sW), g.Wo - 1);
        using A = typename Traits<T>::acc; // T, or float for 16-bit (the CPU's float32 copies)
        A acc = 0;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t h0, h1, w0, w1;
                int64_t div = avg_window(g, oh, ow, &h0, &h1, &w0, &w1);
                if (!div || h < h0 || h >= h1 || w < w0 || w >= w1) continue;
                acc += Traits<T>::load(yp[oh * g.Wo + ow]) / (A)div;
            }
        gx[i] = Traits<T>::store(acc);
    }
}

// ---- adaptive pooling -----------------------------------------------------------------------

template <typename T> __global__ void k_adavg_fwd(T *__restrict__ y, const T *__restrict__ x, PoolGeom g) {
    const int64_t n = g.planes * g.Ho * g.Wo;
    NBC_GRID_STRIDE(i, n) {
        int64_t ow = i % g.Wo, t = i / g.Wo, oh = t % g.Ho, pl = t / g.Ho;
        const T *xp = x + pl * g.H * g.W;
        int64_t h0 = ad_start(oh, g.Ho, g.H), h1 = ad_end(oh, g.Ho, g.H);
        int64_t w0 = ad_start(ow, g.Wo, g.W), w1 = ad_end(ow, g.Wo, g.W);
        double sum = 0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += load_d(xp[h * g.W + w]);
        y[i] = store_d<T>(sum / (double)((h1 - h0) * (w1 - w0)));
    }
}

// Outputs whose adaptive window along one axis contains position p: a
// contiguous range around [floor(p*out/in), ceil((p+1)*out/in)), widened by
// one each side and filtered exactly by the caller.
__device__ inline void ad_cover(int64_t p, int64_t in, int64_t out, int64_t *o0, int64_t *o1) {
    *o0 = imax((p * out) / in - 1, 0);
    *o1 = imin(((p + 1) * out + in - 1) / in + 1, out); // exclusive
}

template <typename T> __global__ void k_adavg_bwd(T *__restrict__ gx, const T *__restrict__ gy, PoolGeom g) {
    const int64_t n = g.planes * g.H * g.W;
    NBC_GRID_STRIDE(i, n) {
        int64_t w = i % g.W, t = i / g.W, h = t % g.H, pl = t / g.H;
        const T *yp = gy + pl * g.Ho * g.Wo;
        int64_t oh0, oh1, ow0, ow1;
        ad_cover(h, g.H, g.Ho, &oh0, &oh1);
        ad_cover(w, g.W, g.Wo, &ow0, &ow1);
        using A = typename Traits<T>::acc;
        A acc = 0;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            int64_t h0 = ad_start(oh, g.Ho, g.H), h1 = ad_end(oh, g.Ho, g.H);
            if (h < h0 || h >= h1) continue;
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t w0 = ad_start(ow, g.Wo, g.W), w1 = ad_end(ow, g.Wo, g.W);
                if (w < w0 || w >= w1) continue;
                acc += Traits<T>::load(yp[oh * g.Wo + ow]) / (A)((h1 - h0) * (w1 - w0));
            }
        }
        gx[i] = Traits<T>::store(acc);
    }
}

template <typename T>
__global__ void k_admax_fwd(T *__restrict__ y, int64_t *__restrict__ ix, const T *__restrict__ x, PoolGeom g) {
    const int64_t n = g.planes * g.Ho * g.Wo;
    NBC_GRID_STRIDE(i, n) {
        int64_t ow = i % g.Wo, t = i / g.Wo, oh = t % g.Ho, pl = t / g.Ho;
        const T *xp = x + pl * g.H * g.W;
        int64_t h0 = ad_start(oh, g.Ho, g.H), h1 = ad_end(oh, g.Ho, g.H);
        int64_t w0 = ad_start(ow, g.Wo, g.W), w1 = ad_end(ow, g.Wo, g.W);
        T m = (T)-INFINITY;
        int64_t mi = h0 * g.W + w0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) max_upd(xp[h * g.W + w], h * g.W + w, m, mi);
        y[i] = m;
        if (ix) ix[i] = mi;
    }
}

// ---- geometry (views and windows checked: backend/check/pool.c) ------------------------

// o: the [N, C, Ho, Wo] side, i: the [N, C, H, W] side.
PoolGeom geom(const nb_kview *o, const nb_kview *i, const nb_pool_params *p) {
    PoolGeom g = {};
    g.planes = o->shape[0] * o->shape[1];
    g.H = i->shape[2], g.W = i->shape[3], g.Ho = o->shape[2], g.Wo = o->shape[3];
    if (p) {
        g.kH = p->kernel[0], g.kW = p->kernel[1], g.sH = p->stride[0], g.sW = p->stride[1];
        g.pH = p->padding[0], g.pW = p->padding[1], g.dH = p->dilation[0], g.dW = p->dilation[1];
        g.count_include_pad = p->count_include_pad;
        g.divisor_override = p->divisor_override;
    }
    return g;
}

// gx = 0 (all bits zero is +0.0): backward of an empty output side, and
// max backward's starting point.
nb_status zero(nb_backend *be, const char *slot, const nb_kview *v) {
    int64_t n = numel(v);
    if (n == 0) return NB_OK;
    NBC_TRY(slot, cudaMemsetAsync(v->data, 0, (size_t)n * nb_dtype_size(v->dtype), stream_of(be)));
    return NB_OK;
}

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                        const nb_kview *x, const nb_pool_params *p) {
    const char *slot = "max_pool2d";
    int64_t n = numel(out);
    if (n == 0) return NB_OK;
    PoolGeom g = geom(out, x, p);
    bool k2 = p->kernel[0] == 2 && p->kernel[1] == 2 && p->dilation[0] == 1 && p->dilation[1] == 1;
    bool narrow = n <= INT32_MAX; // i + the grid stride stays below 2^32
    int64_t *ix = indices ? (int64_t *)indices->data : nullptr;
    return dispatch_floating(slot, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        const T *xp = (const T *)x->data;
        T *yp = (T *)out->data;
        cudaStream_t s = stream_of(be);
        if (k2 && narrow) k_max_fwd<T, 2, uint32_t><<<blocks_for(n), THREADS, 0, s>>>(yp, ix, xp, g);
        else if (narrow) k_max_fwd<T, 0, uint32_t><<<blocks_for(n), THREADS, 0, s>>>(yp, ix, xp, g);
        else k_max_fwd<T, 0, uint64_t><<<blocks_for(n), THREADS, 0, s>>>(yp, ix, xp, g);
        return launched(slot);
    });
}

extern "C" nb_status nb_cuda_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                                 const nb_kview *indices) {
    const char *slot = "max_pool2d_backward";
    if (numel(gx) == 0) return NB_OK;
    if (numel(gy) == 0) return zero(be, slot, gx);
    PoolGeom g = geom(gy, gx, nullptr);
    int64_t warps_per_block = THREADS / 32, blocks = (g.planes + warps_per_block - 1) / warps_per_block;
    unsigned grid = (unsigned)imin(blocks, 65535LL * 16); // the plane loop covers the rest
    // 16-bit: sums into a float32 copy of gx, rounded once (the CPU's float32 copies)
    Scratch wide;
    nb_kview gxw = *gx;
    if (nb_dtype_is_16bit(gx->dtype)) {
        if (!wide.alloc(be, sizeof(float) * (size_t)numel(gx))) return nb_last_status();
        gxw.data = wide.ptr, gxw.dtype = NB_F32;
    }
    nb_status st = zero(be, slot, &gxw);
    if (st != NB_OK) return st;
    st = dispatch_floating(slot, gx->dtype, [&](auto tag) {
        using T = decltype(tag);
        using A = typename Traits<T>::acc;
        k_max_bwd<T, A><<<grid, THREADS, 0, stream_of(be)>>>((A *)gxw.data, (const T *)gy->data,
                                                             (const int64_t *)indices->data, g.planes, g.H * g.W,
                                                             g.Ho * g.Wo);
        return launched(slot);
    });
    return st == NB_OK && gxw.data != gx->data ? nb_cuda_copy_into(be, gx, &gxw) : st;
}

extern "C" nb_status nb_cuda_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x,
                                        const nb_pool_params *p) {
    const char *slot = "avg_pool2d";
    int64_t n = numel(out);
    if (n == 0) return NB_OK;
    PoolGeom g = geom(out, x, p);
    return dispatch_floating(slot, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        k_avg_fwd<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)out->data, (const T *)x->data, g);
        return launched(slot);
    });
}

extern "C" nb_status nb_cuda_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                                 const nb_pool_params *p) {
    const char *slot = "avg_pool2d_backward";
    int64_t n = numel(gx);
    if (n == 0) return NB_OK;
    if (numel(gy) == 0) return zero(be, slot, gx);
    PoolGeom g = geom(gy, gx, p);
    return dispatch_floating(slot, gx->dtype, [&](auto tag) {
        using T = decltype(tag);
        k_avg_bwd<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)gx->data, (const T *)gy->data, g);
        return launched(slot);
    });
}

extern "C" nb_status nb_cuda_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x) {
    const char *slot = "adaptive_avg_pool2d";
    int64_t n = numel(out);
    if (n == 0) return NB_OK;
    PoolGeom g = geom(out, x, nullptr);
    return dispatch_floating(slot, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        k_adavg_fwd<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)out->data, (const T *)x->data, g);
        return launched(slot);
    });
}

extern "C" nb_status nb_cuda_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy) {
    const char *slot = "adaptive_avg_pool2d_backward";
    int64_t n = numel(gx);
    if (n == 0) return NB_OK;
    PoolGeom g = geom(gy, gx, nullptr);
    return dispatch_floating(slot, gx->dtype, [&](auto tag) {
        using T = decltype(tag);
        k_adavg_bwd<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)gx->data, (const T *)gy->data, g);
        return launched(slot);
    });
}

extern "C" nb_status nb_cuda_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                                 const nb_kview *x) {
    const char *slot = "adaptive_max_pool2d";
    int64_t n = numel(out);
    if (n == 0) return NB_OK;
    PoolGeom g = geom(out, x, nullptr);
    int64_t *ix = indices ? (int64_t *)indices->data : nullptr;
    return dispatch_floating(slot, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        k_admax_fwd<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)out->data, ix, (const T *)x->data, g);
        return launched(slot);
    });
}
