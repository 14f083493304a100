// upsample.cu - F.interpolate on CUDA: x [N, C, H, W] -> [N, C, Ho, Wo]
// (contiguous; float32/float64), nearest and bilinear (align_corners), and
// their backward; source indices and weights are backend/cpu/upsample.c's
// (PyTorch's UpSample.h):
//   nearest (legacy): src = min(floor(dst * (float)in/out), in - 1), with
//     in == out the identity and out == 2*in giving dst >> 1;
//   bilinear: align_corners: src = dst * (in-1)/(out-1) (0 when out == 1);
//     otherwise src = max((dst + 0.5) * in/out - 0.5, 0); i0 = floor(src)
//     clamped to in-1, i1 = i0 + (i0 < in-1), l1 = src - i0, l0 = 1 - l1,
//     in the tensor's dtype.
// A small kernel builds the per-axis tap tables (Ho + Wo entries) with
// explicitly rounded operations (no FMA contraction), so the indices and
// weights are the CPU's bit for bit. Forward: one thread per output element.
// Backward gathers, one thread per input-gradient element: the outputs
// whose taps touch input row h form a contiguous range (i0 and i1 never
// decrease with the output index), found once per input index by binary
// search; the element adds their weighted values in the CPU's (oh, ow, tap)
// order, so no atomics and the CPU's bits.
#include <math.h>

#include "cuda_common.cuh"

namespace nbc {
namespace {

// Rounded arithmetic in the dtype (the CPU's expressions, never fused).
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }

// The source taps of one output index along an axis: value = l0*x[i0] + l1*x[i1].
template <typename T> struct Tap {
    int64_t i0, i1;
    T l0, l1;
};
// Per input index: the outputs [lo, hi) whose taps touch it.
struct Range {
    int64_t lo, hi;
};

__device__ inline int64_t nearest_src(int64_t dst, int64_t in, int64_t out) {
    if (out == in) return dst;
    if (out == 2 * in) return dst >> 1;
    float scale = __fdiv_rn((float)in, (float)out);
    int64_t s = (int64_t)floorf(__fmul_rn((float)dst, scale));
    return s < in - 1 ? s : in - 1;
}

template <typename T> __device__ inline Tap<T> linear_tap(int64_t dst, int64_t in, int64_t out, bool align) {
    Tap<T> t = {dst, dst, (T)1, (T)0};
    if (out == in) return t;
    T ratio = align ? (out > 1 ? div_rn((T)(in - 1), (T)(out - 1)) : (T)0) : div_rn((T)in, (T)out);
    T real = align ? mul_rn(ratio, (T)dst) : sub_rn(mul_rn(ratio, add_rn((T)dst, (T)0.5)), (T)0.5);
    if (real < 0) real = 0;
    int64_t i0 = (int64_t)floor(real);
    if (i0 > in - 1) i0 = in - 1;
    T l1 = sub_rn(real, (T)i0);
    l1 = l1 < 0 ? (T)0 : l1 > 1 ? (T)1 : l1;
    t.i0 = i0;
    t.i1 = i0 + (i0 < in - 1 ? 1 : 0);
    t.l1 = l1;
    t.l0 = sub_rn((T)1, l1);
    return t;
}

// taps [Ho + Wo]: rows then columns.
template <typename T>
__global__ void k_taps(Tap<T> *taps, int64_t H, int64_t W, int64_t Ho, int64_t Wo, bool bilinear, bool align) {
    NBC_GRID_STRIDE(d, Ho + Wo) {
        bool row = d < Ho;
        int64_t o = row ? d : d - Ho, in = row ? H : W, out = row ? Ho : Wo;
        if (bilinear) {
            taps[d] = linear_tap<T>(o, in, out, align);
        } else {
            int64_t s = nearest_src(o, in, out);
            taps[d] = Tap<T>{s, s, (T)1, (T)0};
        }
    }
}

// ranges [H + W] from the taps: lo = the first output with i1 >= p, hi =
// the first with i0 > p (both monotone in the output index).
template <typename T>
__global__ void k_ranges(Range *rg, const Tap<T> *taps, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
    NBC_GRID_STRIDE(d, H + W) {
        bool row = d < H;
        int64_t p = row ? d : d - H, out = row ? Ho : Wo;
        const Tap<T> *t = row ? taps : taps + Ho;
        int64_t a = 0, b = out;
        while (a < b) { // first o with t[o].i1 >= p
            int64_t m = a + (b - a) / 2;
            if (t[m].i1 >= p) b = m;
            else a = m + 1;
        }
        int64_t lo = a;
        b = out;
        while (a < b) { // first o >= lo with t[o].i0 > p
            int64_t m = a + (b - a) / 2;
            if (t[m].i0 > p) b = m;
            else a = m + 1;
        }
        rg[d] = Range{lo, a};
    }
}

template <typename T>
__global__ void k_up_fwd(T *__restrict__ y, const T *__restrict__ x, const Tap<T> *__restrict__ taps, int64_t planes,
                         int64_t H, int64_t W, int64_t Ho, int64_t Wo, bool bilinear) {
    NBC_GRID_STRIDE(i, planes * Ho * Wo) {
        int64_t ow = i % Wo, t = i / Wo, oh = t % Ho, pl = t / Ho;
        const Tap<T> th = taps[oh], tw = taps[Ho + ow];
        const T *r0 = x + (pl * H + th.i0) * W, *r1 = x + (pl * H + th.i1) * W;
        if (!bilinear) {
            y[i] = r0[tw.i0];
            continue;
        }
        const T h0 = th.l0, h1 = th.l1, w0 = tw.l0, w1 = tw.l1;
        y[i] = h0 * (w0 * r0[tw.i0] + w1 * r0[tw.i1]) + h1 * (w0 * r1[tw.i0] + w1 * r1[tw.i1]);
    }
}

// gx[h, w] = the CPU's scattered terms that land on (h, w), in its order:
// outputs (oh, ow) ascending, then taps (i0, i0), (i0, i1), (i1, i0), (i1, i1).
template <typename T>
__global__ void k_up_bwd(T *__restrict__ gx, const T *__restrict__ gy, const Tap<T> *__restrict__ taps,
                         const Range *__restrict__ rg, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                         bool bilinear) {
    NBC_GRID_STRIDE(i, planes * H * W) {
        int64_t w = i % W, t = i / W, h = t % H, pl = t / H;
        const T *g = gy + pl * Ho * Wo;
        const Range rh = rg[h], rw = rg[H + w];
        T acc = 0;
        for (int64_t oh = rh.lo; oh < rh.hi; oh++) {
            const Tap<T> th = taps[oh];
            const bool a0 = th.i0 == h, a1 = th.i1 == h && bilinear;
            if (!a0 && !a1) continue;
            for (int64_t ow = rw.lo; ow < rw.hi; ow++) {
                const Tap<T> tw = taps[Ho + ow];
                const T v = g[oh * Wo + ow];
                if (!bilinear) {
                    if (tw.i0 == w) acc = add_rn(acc, v);
                    continue;
                }
                const bool b0 = tw.i0 == w, b1 = tw.i1 == w;
                if (a0 && b0) acc = add_rn(acc, mul_rn(mul_rn(th.l0, tw.l0), v));
                if (a0 && b1) acc = add_rn(acc, mul_rn(mul_rn(th.l0, tw.l1), v));
                if (a1 && b0) acc = add_rn(acc, mul_rn(mul_rn(th.l1, tw.l0), v));
                if (a1 && b1) acc = add_rn(acc, mul_rn(mul_rn(th.l1, tw.l1), v));
            }
        }
        gx[i] = acc;
    }
}

template <typename T>
nb_status up_run(nb_backend *be, const char *slot, const nb_kview *xs, const nb_kview *ys, bool bilinear, bool align,
                 bool backward) {
    const int64_t planes = xs->shape[0] * xs->shape[1], H = xs->shape[2], W = xs->shape[3];
    const int64_t Ho = ys->shape[2], Wo = ys->shape[3];
    cudaStream_t s = stream_of(be);
    if (planes == 0) return NB_OK;
    if (Ho * Wo == 0 || H * W == 0) { // nothing to read: gx is all zeros
        if (backward && H * W > 0)
            NBC_TRY(slot, cudaMemsetAsync(xs->data, 0, sizeof(T) * (size_t)(planes * H * W), s));
        return NB_OK;
    }
    Scratch sc; // taps [Ho + Wo], then ranges [H + W] (backward)
    size_t tap_bytes = sizeof(Tap<T>) * (size_t)(Ho + Wo);
    tap_bytes = (tap_bytes + 15) / 16 * 16;
    if (!sc.alloc(be, tap_bytes + (backward ? sizeof(Range) * (size_t)(H + W) : 0))) return nb_last_status();
    Tap<T> *taps = sc.as<Tap<T>>();
    k_taps<T><<<blocks_for(Ho + Wo), THREADS, 0, s>>>(taps, H, W, Ho, Wo, bilinear, align);
    nb_status st = launched(slot);
    if (st != NB_OK) return st;
    if (!backward) {
        k_up_fwd<T><<<blocks_for(planes * Ho * Wo), THREADS, 0, s>>>((T *)ys->data, (const T *)xs->data, taps, planes,
                                                                     H, W, Ho, Wo, bilinear);
        return launched(slot);
    }
    Range *rg = (Range *)((char *)sc.ptr + tap_bytes);
    k_ranges<T><<<blocks_for(H + W), THREADS, 0, s>>>(rg, taps, H, W, Ho, Wo);
    if ((st = launched(slot)) != NB_OK) return st;
    k_up_bwd<T><<<blocks_for(planes * H * W), THREADS, 0, s>>>((T *)xs->data, (const T *)ys->data, taps, rg, planes,
                                                               H, W, Ho, Wo, bilinear);
    return launched(slot);
}

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear,
                                        bool align_corners) {
    const char *slot = "upsample2d";
    return dispatch_float(slot, x->dtype, [&](auto tag) {
        return up_run<decltype(tag)>(be, slot, x, out, bilinear, align_corners, false);
    });
}

extern "C" nb_status nb_cuda_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear,
                                                 bool align_corners) {
    const char *slot = "upsample2d_backward";
    return dispatch_float(slot, gx->dtype, [&](auto tag) {
        return up_run<decltype(tag)>(be, slot, gx, gy, bilinear, align_corners, true);
    });
}
