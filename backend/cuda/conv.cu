// conv.cu - 2-d convolution on CUDA (torch.nn.functional.conv2d) and its two
// backward kernels, through cuDNN's legacy convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter, all in cuDNN
// 9.14), NCHW, float32, float64, bfloat16 and float16 (16-bit tensors,
// float32 accumulation: cuDNN's compute type), with our own kernels for the
// bias, the bias gradient, explicit padding, and a direct fallback. 16-bit
// forward and backward-data calls run cuDNN in NHWC on transposed copies
// (Plan). The ungrouped 16-bit weight gradient, the float32/float64 ones
// with few weight elements per output channel and those cuDNN has no
// algorithm for run as im2col and batched cuBLAS GEMMs, the bias gradient
// with them (gemm_bwd_filter); grouped 16-bit ones as a float32 TF32 one on
// widened copies (backward_filter16).
//
// Geometry: as backend/cpu/conv.c, output sizes come from the views (out,
// gy) and input positions outside [0, H) x [0, W) read as zeros, which also
// gives PyTorch's asymmetric 'same' padding (left padding passed, a larger
// output) and conv_transpose2d's output_padding. cuDNN pads symmetrically
// and derives its output size as floor((H + 2p - d(k-1) - 1)/s) + 1; when
// that equals the view's size it runs on the views directly, otherwise the
// input side goes through a buffer padded explicitly to
// Hp = (Ho-1)*s + d(k-1) + 1 rows (p zero rows on top, zeros or a crop at
// the bottom) and cuDNN runs with padding 0 (backward data writes that
// buffer and a crop copies it back).
//
// Algorithms: chosen once per (op, device, dtype, shapes, parameters) by
// cuDNN's heuristics (cudnnGet*Algorithm_v7), keeping only results with
// status success, CUDNN_DETERMINISTIC (backward data and filter have
// atomics-based algorithms that are not) and a workspace under
// NB_CONV_MAX_WORKSPACE; the candidates and the descriptors are cached (a
// plan). The heuristics, unlike cudnnFind*, are not timing-based, so a
// process picks the same algorithm every run (the same bits) and never
// synchronizes. float32 runs with CUDNN_FMA_MATH (plain fp32) under
// nb_set_float32_matmul_precision("highest"), the default, and with
// CUDNN_DEFAULT_MATH (TF32 tensor cores on Ampere and later) under "high"
// or "medium": the one precision knob also stands for PyTorch's
// torch.backends.cudnn.allow_tf32 (whose default, unlike nabla's, is TF32).
// bfloat16 and float16 run with CUDNN_TENSOR_OP_MATH.
// A candidate whose call returns NOT_SUPPORTED or BAD_PARAM is dropped for
// good and the next one runs; with none left (or no cuDNN, or shapes past
// cuDNN's int32 limits) the direct kernels below run: one thread per output
// (or input-gradient) element, and for the weight gradient the GEMMs of
// gemm_bwd_filter where they apply, else blocks of (weight element, image
// range) with fixed trees and then the ranges summed in order, all
// accumulating in double. The bias gradient is a two-pass deterministic
// sum (partial sums per channel and image range, then the partials in
// order), or, for 16-bit weight gradients on the GEMM path, one more GEMM
// column.
//
// Tensors beyond cuDNN's 2^31-element limit run in chunks of images; the
// weight gradient accumulates the chunks in order (beta = 1).
#include <cudnn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_common.cuh"

extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be); // cuda_backend.cu

#define NB_CONV_MAX_WORKSPACE ((size_t)256 << 20)
#define NB_CONV_MAX_PLANS 4096

namespace nbc {
namespace {

// x [n, c, h, w] conv w [co, cg, kh, kw] -> y [n, co, ho, wo].
struct ConvGeom {
    int64_t n, c, h, w, co, ho, wo, kh, kw, groups;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t cg, cog; // c/groups, co/groups
    nb_dtype dt;
    bool tf32; // float32 with TF32 whatever the matmul precision (16-bit data widened: exact in TF32)
};

// The geometry of one call (checked: backend/check/conv.c): x is the
// convolution's input side and y its output side (out, gy), whatever the
// call computes.
ConvGeom geom_of(const nb_kview *x, const nb_kview *w, const nb_kview *y, const nb_conv_params *p) {
    ConvGeom g{x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[1], y->shape[2], y->shape[3],
               w->shape[2], w->shape[3], p->groups, p->stride[0], p->stride[1], p->padding[0],
               p->padding[1], p->dilation[0], p->dilation[1], 0, 0, x->dtype};
    g.cg = g.c / g.groups, g.cog = g.co / g.groups;
    return g;
}

// ---- own kernels ------------------------------------------------------------------------

// y [planes, plane] += bias[plane index % co], V elements per thread (plane
// % V == 0 and y aligned to V elements), index math in I (32-bit when it fits).
template <typename T, int V, typename I>
__global__ void k_add_bias(T *y, const T *bias, I nvec, I co, I plane_v) {
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < nvec; j += (I)gridDim.x * blockDim.x) {
        const auto b = Traits<T>::load(bias[(j / plane_v) % co]);
        Vec<T, V> u = ((Vec<T, V> *)y)[j];
#pragma unroll
        for (int e = 0; e < V; e++) u.v[e] = Traits<T>::store(Traits<T>::load(u.v[e]) + b);
        ((Vec<T, V> *)y)[j] = u;
    }
}

template <typename T, int V>
nb_status add_bias_v(nb_backend *be, T *y, const T *bias, int64_t planes, int64_t co, int64_t plane) {
    int64_t nvec = planes * plane / V;
    if (nvec < INT32_MAX)
        k_add_bias<T, V, uint32_t><<<blocks_for(nvec), THREADS, 0, stream_of(be)>>>(y, bias, (uint32_t)nvec,
                                                                                 (uint32_t)co, (uint32_t)(plane / V));
    else
        k_add_bias<T, V, int64_t><<<blocks_for(nvec), THREADS, 0, stream_of(be)>>>(y, bias, nvec, co, plane / V);
    return launched("conv2d");
}

// y [planes, plane] (planes = images x co) += bias over the channel dim.
template <typename T> nb_status add_bias(nb_backend *be, T *y, const T *bias, int64_t planes, int64_t co, int64_t plane) {
    constexpr int V = 16 / sizeof(T);
    if (plane % V == 0 && (uintptr_t)y % 16 == 0) return add_bias_v<T, V>(be, y, bias, planes, co, plane);
    return add_bias_v<T, 1>(be, y, bias, planes, co, plane);
}

// The bias gradient's first pass: part[c * S + s] = the sum of gy[i, c, :, :]
// over images i in [s n / S, (s + 1) n / S), images in order, a fixed tree
// across the block. Grid (co, S).
template <typename T> __global__ void k_bias_part(double *part, const T *gy, int64_t n, int64_t co, int64_t plane) {
    __shared__ double red[32];
    const int64_t c = blockIdx.x, S = gridDim.y, s = blockIdx.y;
    const int64_t i0 = s * n / S, i1 = (s + 1) * n / S;
    double acc = 0;
    for (int64_t i = i0; i < i1; i++) {
        const T *row = gy + (i * co + c) * plane;
        for (int64_t q = threadIdx.x; q < plane; q += blockDim.x) acc += load_d(row[q]);
    }
    double r = block_sum(acc, red);
    if (threadIdx.x == 0) part[c * S + s] = r;
}

// The second pass: gb[c] = the S partials of c summed in order.
template <typename T> __global__ void k_bias_final(T *gb, const double *part, int64_t co, int64_t S) {
    NBC_GRID_STRIDE(c, co) {
        double acc = 0;
        for (int64_t s = 0; s < S; s++) acc += part[c * S + s];
        gb[c] = store_d<T>(acc);
    }
}

// gbias[c] = the sum of gy[:, c, :, :] (deterministic: the split depends
// only on the shapes).
template <typename T> nb_status bias_grad(nb_backend *be, const char *slot, T *gb, const T *gy, int64_t n, int64_t co,
                                          int64_t plane) {
    int64_t S = (512 + co - 1) / co; // about 512 blocks in all
    if (S > n) S = n;
    if (S < 1) S = 1;
    if (S > 65535) S = 65535;
    if (co > INT32_MAX) return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %lld channels", slot, (long long)co);
    Scratch part;
    if (!part.alloc(be, sizeof(double) * (size_t)(co * S))) return nb_last_status();
    k_bias_part<T><<<dim3((unsigned)co, (unsigned)S), THREADS, 0, stream_of(be)>>>(part.as<double>(), gy, n, co,
                                                                                 plane);
    nb_status r = launched(slot);
    if (r != NB_OK) return r;
    k_bias_final<T><<<blocks_for(co), THREADS, 0, stream_of(be)>>>(gb, part.as<double>(), co, S);
    return launched(slot);
}

// xp [planes, hp, wp] = x [planes, h, w] shifted down/right by (ph, pw), zeros elsewhere.
template <typename T>
__global__ void k_pad(T *xp, const T *x, int64_t planes, int64_t h, int64_t w, int64_t hp, int64_t wp, int64_t ph,
                      int64_t pw) {
    NBC_GRID_STRIDE(i, planes * hp * wp) {
        int64_t q = i % wp, t = i / wp, r = t % hp, pl = t / hp, ih = r - ph, iw = q - pw;
        xp[i] = ih >= 0 && ih < h && iw >= 0 && iw < w ? x[(pl * h + ih) * w + iw] : store_d<T>(0);
    }
}

// gx [planes, h, w] = gxp [planes, hp, wp] at (ph, pw) offset; rows past it 0.
template <typename T>
__global__ void k_crop(T *gx, const T *gxp, int64_t planes, int64_t h, int64_t w, int64_t hp, int64_t wp, int64_t ph,
                       int64_t pw) {
    NBC_GRID_STRIDE(i, planes * h * w) {
        int64_t iw = i % w, t = i / w, ih = t % h, pl = t / h, r = ih + ph, q = iw + pw;
        gx[i] = r < hp && q < wp ? gxp[(pl * hp + r) * wp + q] : store_d<T>(0);
    }
}

// Direct forward: one thread per output element (bias included).
template <typename T> __global__ void k_fwd_direct(T *y, const T *x, const T *wt, const T *bias, ConvGeom g) {
    NBC_GRID_STRIDE(i, g.n * g.co * g.ho * g.wo) {
        int64_t ow = i % g.wo, t = i / g.wo, oh = t % g.ho;
        t /= g.ho;
        int64_t co = t % g.co, n = t / g.co, gr = co / g.cog;
        const T *xb = x + (n * g.c + gr * g.cg) * g.h * g.w;
        const T *wb = wt + co * g.cg * g.kh * g.kw;
        double acc = 0;
        for (int64_t ci = 0; ci < g.cg; ci++)
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t ih = oh * g.sh - g.ph + a * g.dh;
                if (ih < 0 || ih >= g.h) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t iw = ow * g.sw - g.pw + b * g.dw;
                    if (iw < 0 || iw >= g.w) continue;
                    acc += load_d(xb[(ci * g.h + ih) * g.w + iw]) * load_d(wb[(ci * g.kh + a) * g.kw + b]);
                }
            }
        if (bias) acc += load_d(bias[co]);
        y[i] = store_d<T>(acc);
    }
}

// Direct backward data: one thread per input-gradient element, gathering the
// outputs whose windows read it.
template <typename T> __global__ void k_bwd_data_direct(T *gx, const T *gy, const T *wt, ConvGeom g) {
    NBC_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
        int64_t iw = i % g.w, t = i / g.w, ih = t % g.h;
        t /= g.h;
        int64_t c = t % g.c, n = t / g.c, gr = c / g.cg, cl = c % g.cg;
        double acc = 0;
        for (int64_t co = gr * g.cog; co < (gr + 1) * g.cog; co++) {
            const T *gyc = gy + (n * g.co + co) * g.ho * g.wo;
            const T *wc = wt + (co * g.cg + cl) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t th = ih + g.ph - a * g.dh;
                if (th < 0 || th % g.sh) continue;
                int64_t oh = th / g.sh;
                if (oh >= g.ho) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t tw = iw + g.pw - b * g.dw;
                    if (tw < 0 || tw % g.sw) continue;
                    int64_t ow = tw / g.sw;
                    if (ow >= g.wo) continue;
                    acc += load_d(gyc[oh * g.wo + ow]) * load_d(wc[a * g.kw + b]);
                }
            }
        }
        gx[i] = store_d<T>(acc);
    }
}

// Direct backward filter, first pass: part[e * S + s] = the sum of the
// (n, oh, ow) terms of weight element e over images [s n / S, (s + 1) n / S)
// (grid y = S), the plane strided over the threads, a fixed tree.
template <typename T> __global__ void k_bwd_filter_part(double *part, const T *gy, const T *x, ConvGeom g) {
    __shared__ double red[32];
    const int64_t nw = g.co * g.cg * g.kh * g.kw, plane = g.ho * g.wo, S = gridDim.y, sp = blockIdx.y;
    const int64_t i0 = sp * g.n / S, i1 = (sp + 1) * g.n / S;
    for (int64_t e = blockIdx.x; e < nw; e += gridDim.x) { // uniform across the block
        int64_t b = e % g.kw, t = e / g.kw, a = t % g.kh;
        t /= g.kh;
        int64_t ci = t % g.cg, co = t / g.cg, gr = co / g.cog;
        double acc = 0;
        for (int64_t n = i0; n < i1; n++) {
            const T *gyc = gy + (n * g.co + co) * plane;
            const T *xc = x + (n * g.c + gr * g.cg + ci) * g.h * g.w;
            for (int64_t q = threadIdx.x; q < plane; q += blockDim.x) {
                int64_t oh = q / g.wo, ow = q % g.wo;
                int64_t ih = oh * g.sh - g.ph + a * g.dh, iw = ow * g.sw - g.pw + b * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                acc += load_d(gyc[q]) * load_d(xc[ih * g.w + iw]);
            }
        }
        double r = block_sum(acc, red);
        if (threadIdx.x == 0) part[e * S + sp] = r;
    }
}

// Second pass: gw[e] (+)= the S partials of e in order.
template <typename T>
__global__ void k_bwd_filter_final(T *gw, const double *part, int64_t nw, int64_t S, bool accumulate) {
    NBC_GRID_STRIDE(e, nw) {
        double acc = 0;
        for (int64_t s = 0; s < S; s++) acc += part[e * S + s];
        gw[e] = store_d<T>(accumulate ? load_d(gw[e]) + acc : acc);
    }
}

// The weight gradient as GEMMs (gemm_bwd_filter). Rows of col, ld per
// image i: col[(i ld + k) P + p] = x[i, ci, oh sh - ph + a dh, ow sw - pw +
// b dw] (zero outside the image) for k = (ci kh + a) kw + b < nk = c kh kw
// and p = oh wo + ow; with the bias gradient, a row of ones at k = nk,
// whose GEMM column is the sum of gy over the positions; zero rows up to
// ld (a multiple of 8: cuBLAS's aligned kernels). Block (position range,
// plane (i, ci)): each thread decodes its position once and writes the
// plane's kh kw rows at it (plane 0's threads also the rows past nk).
template <typename T> __global__ void k_im2col(T *col, const T *x, ConvGeom g, bool bias, int ld, int P) {
    const int c = (int)g.c, i = blockIdx.y / c, ci = blockIdx.y % c, wo = (int)g.wo, kh = (int)g.kh, kw = (int)g.kw;
    const int h = (int)g.h, w = (int)g.w, nk = c * kh * kw;
    const T *xc = x + ((int64_t)i * c + ci) * h * w;
    T *rows = col + ((int64_t)i * ld + (int64_t)ci * kh * kw) * P;
    const T zero = store_d<T>(0.0), one = store_d<T>(1.0);
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < P; p += gridDim.x * blockDim.x) {
        const int oh = p / wo, ow = p - oh * wo, ih0 = oh * (int)g.sh - (int)g.ph, iw0 = ow * (int)g.sw - (int)g.pw;
        for (int a = 0; a < kh; a++) {
            const int ih = ih0 + a * (int)g.dh;
            const bool rok = ih >= 0 && ih < h;
            for (int b = 0; b < kw; b++) {
                const int iw = iw0 + b * (int)g.dw;
                rows[(int64_t)(a * kw + b) * P + p] = rok && iw >= 0 && iw < w ? xc[ih * w + iw] : zero;
            }
        }
        if (ci == 0)
            for (int k = nk; k < ld; k++) col[((int64_t)i * ld + k) * P + p] = bias && k == nk ? one : zero;
    }
}

// The images' partials of every (co, k < nk1) summed in double (part[i
// co_count ld + co ld + k], rows of ld >= nk1) into gw[co nk + k] and, for
// k = nk (nk1 = nk + 1), gb[co]. Four lanes per element, for enough loads
// in flight: lane q adds images q, q + 4, ... in order, then the lanes'
// sums combine as (s0 + s1) + (s2 + s3): a fixed order.
template <typename T, typename A>
__global__ void k_wgrad_sum(T *gw, T *gb, const A *part, int64_t co, int64_t nk, int64_t nk1, int64_t ld, int64_t n) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, e = t >> 2, stride = co * ld;
    const int q = threadIdx.x & 3;
    const bool valid = e < co * nk1;
    const int64_t c = valid ? e / nk1 : 0, k = valid ? e - c * nk1 : 0;
    double acc = 0;
    if (valid) {
        const A *pe = part + c * ld + k;
#pragma unroll 4
        for (int64_t i = q; i < n; i += 4) acc += (double)pe[i * stride];
    }
    acc += __shfl_down_sync(0xffffffffu, acc, 1); // lanes 0 and 2: s0 + s1, s2 + s3
    acc += __shfl_down_sync(0xffffffffu, acc, 2); // lane 0: (s0 + s1) + (s2 + s3)
    if (valid && q == 0) {
        if (k < nk) gw[c * nk + k] = store_d<T>(acc);
        else gb[c] = store_d<T>(acc);
    }
}

// ---- cuDNN plans ------------------------------------------------------------------------

enum ConvOp { OP_FWD, OP_BWD_DATA, OP_BWD_FILTER };

// What a plan depends on: the op, the cuDNN-side geometry (x side after
// explicit padding, the padding cuDNN applies) and the pointers' alignment
// (cuDNN may refuse an algorithm for a misaligned view: that must not drop
// it for aligned calls). All ints: no struct padding.
struct Key {
    int op, dev, dt, prec, align; // prec: float32's matmul precision (0 for the other dtypes)
    int n, c, h, w, co, cg, kh, kw, ho, wo;
    int ph, pw, sh, sw, dh, dw, groups;
};

// 16-bit plans (forward and backward data) run cuDNN in NHWC (its
// tensor-core kernels' layout; in NCHW its heuristics offered bf16 no
// deterministic backward-data algorithm and a slow forward): the operands
// are transposed into NHWC scratch with cudnnTransformTensor and the result
// back (PyTorch's NCHW bf16 convolutions make the same copies). The 16-bit
// weight gradient is gemm_bwd_filter's (grouped: backward_filter16's).
// t[0..2]: x, w, y as NCHW tensors; t[3..5]: the same in NHWC.
struct Plan {
    Key key;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    bool nhwc;
    cudnnTensorDescriptor_t t[6];
    int algo[8];
    size_t ws[8];
    int nalgo, cur; // cur == nalgo: no cuDNN algorithm (the direct kernels)
    bool cached;
};

pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
Plan *plans[NB_CONV_MAX_PLANS];
int n_plans;

void plan_free(Plan *pl) {
    for (int i = 0; i < 6; i++)
        if (pl->t[i]) cudnnDestroyTensorDescriptor(pl->t[i]);
    if (pl->cd) cudnnDestroyConvolutionDescriptor(pl->cd);
    if (pl->wd) cudnnDestroyFilterDescriptor(pl->wd);
    if (pl->yd) cudnnDestroyTensorDescriptor(pl->yd);
    if (pl->xd) cudnnDestroyTensorDescriptor(pl->xd);
    free(pl);
}

// exact: float32 without TF32, where tensor-op results are refused.
bool accept(cudnnStatus_t st, cudnnDeterminism_t det, cudnnMathType_t mt, bool exact) {
    if (st != CUDNN_STATUS_SUCCESS || det != CUDNN_DETERMINISTIC) return false;
    return !exact || mt == CUDNN_DEFAULT_MATH || mt == CUDNN_FMA_MATH;
}

// Keeps a heuristics result if its workspace query succeeds under the cap.
void add_candidate(Plan *pl, int algo, cudnnStatus_t ws_status, size_t ws) {
    if (ws_status != CUDNN_STATUS_SUCCESS || ws > NB_CONV_MAX_WORKSPACE || pl->nalgo >= 8) return;
    for (int i = 0; i < pl->nalgo; i++)
        if (pl->algo[i] == algo) return;
    pl->algo[pl->nalgo] = algo, pl->ws[pl->nalgo] = ws, pl->nalgo++;
}

// Descriptors and deterministic candidates of k; any failure leaves no
// candidate (the direct kernels then run). NULL only when out of host memory.
Plan *plan_build(cudnnHandle_t h, const Key &k) {
    Plan *pl = (Plan *)calloc(1, sizeof(Plan));
    if (!pl) return nullptr;
    pl->key = k;
    const bool f32 = k.dt == NB_F32, f64 = k.dt == NB_F64, exact = f32 && k.prec == 0;
    const cudnnDataType_t dt = f32 ? CUDNN_DATA_FLOAT : f64 ? CUDNN_DATA_DOUBLE : k.dt == NB_BF16 ? CUDNN_DATA_BFLOAT16
                                                                                                 : CUDNN_DATA_HALF;
    const cudnnDataType_t ct = f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; // 16-bit: float32 accumulation
    const cudnnMathType_t math = exact ? CUDNN_FMA_MATH : f32 || f64 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    pl->nhwc = !f32 && !f64;
    const cudnnTensorFormat_t fmt = pl->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    if (pl->nhwc) { // the transposes' descriptors
        const int dims[3][4] = {{k.n, k.c, k.h, k.w}, {k.co, k.cg, k.kh, k.kw}, {k.n, k.co, k.ho, k.wo}};
        for (int i = 0; i < 6; i++) {
            const int *d = dims[i % 3];
            if (cudnnCreateTensorDescriptor(&pl->t[i]) != CUDNN_STATUS_SUCCESS) {
                pl->t[i] = nullptr;
                return pl;
            }
            if (cudnnSetTensor4dDescriptor(pl->t[i], i < 3 ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC, dt, d[0], d[1],
                                           d[2], d[3]) != CUDNN_STATUS_SUCCESS)
                return pl;
        }
    }
    if (cudnnCreateTensorDescriptor(&pl->xd) != CUDNN_STATUS_SUCCESS) pl->xd = nullptr;
    if (cudnnCreateTensorDescriptor(&pl->yd) != CUDNN_STATUS_SUCCESS) pl->yd = nullptr;
    if (cudnnCreateFilterDescriptor(&pl->wd) != CUDNN_STATUS_SUCCESS) pl->wd = nullptr;
    if (cudnnCreateConvolutionDescriptor(&pl->cd) != CUDNN_STATUS_SUCCESS) pl->cd = nullptr;
    if (!pl->xd || !pl->yd || !pl->wd || !pl->cd) return pl;
    if (cudnnSetTensor4dDescriptor(pl->xd, fmt, dt, k.n, k.c, k.h, k.w) != CUDNN_STATUS_SUCCESS ||
        cudnnSetTensor4dDescriptor(pl->yd, fmt, dt, k.n, k.co, k.ho, k.wo) != CUDNN_STATUS_SUCCESS ||
        cudnnSetFilter4dDescriptor(pl->wd, dt, fmt, k.co, k.cg, k.kh, k.kw) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolution2dDescriptor(pl->cd, k.ph, k.pw, k.sh, k.sw, k.dh, k.dw, CUDNN_CROSS_CORRELATION, ct) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(pl->cd, k.groups) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(pl->cd, math) != CUDNN_STATUS_SUCCESS)
        return pl;
    int on, oc, oh, ow; // cuDNN must see the output size we do
    if (cudnnGetConvolution2dForwardOutputDim(pl->cd, pl->xd, pl->wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        on != k.n || oc != k.co || oh != k.ho || ow != k.wo)
        return pl;
    int got = 0;
    size_t ws = 0;
    if (k.op == OP_FWD) {
        cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (cudnnGetConvolutionForwardAlgorithm_v7(h, pl->xd, pl->wd, pl->cd, pl->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                   &got, r) != CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int i = 0; i < got && i < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; i++)
            if (accept(r[i].status, r[i].determinism, r[i].mathType, exact))
                add_candidate(pl, (int)r[i].algo,
                              cudnnGetConvolutionForwardWorkspaceSize(h, pl->xd, pl->wd, pl->cd, pl->yd, r[i].algo, &ws),
                              ws);
    } else if (k.op == OP_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (cudnnGetConvolutionBackwardDataAlgorithm_v7(h, pl->wd, pl->yd, pl->cd, pl->xd,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                        r) != CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int i = 0; i < got && i < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; i++)
            if (accept(r[i].status, r[i].determinism, r[i].mathType, exact))
                add_candidate(pl, (int)r[i].algo,
                              cudnnGetConvolutionBackwardDataWorkspaceSize(h, pl->wd, pl->yd, pl->cd, pl->xd,
                                                                           r[i].algo, &ws),
                              ws);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, pl->xd, pl->yd, pl->cd, pl->wd,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                          r) != CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int i = 0; i < got && i < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; i++)
            if (accept(r[i].status, r[i].determinism, r[i].mathType, exact))
                add_candidate(pl, (int)r[i].algo,
                              cudnnGetConvolutionBackwardFilterWorkspaceSize(h, pl->xd, pl->yd, pl->cd, pl->wd,
                                                                             r[i].algo, &ws),
                              ws);
    }
    return pl;
}

// The cached plan of k (built on a miss, under the lock: the heuristics are
// host-only and run once per shape). A full cache gives an uncached plan
// that the caller frees. NULL with NB_ERR_OOM set.
Plan *plan_get(cudnnHandle_t h, const Key &k) {
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < n_plans; i++)
        if (!memcmp(&plans[i]->key, &k, sizeof k)) {
            Plan *p = plans[i];
            pthread_mutex_unlock(&plans_lock);
            return p;
        }
    Plan *p = plan_build(h, k);
    if (p && n_plans < NB_CONV_MAX_PLANS) p->cached = true, plans[n_plans++] = p;
    pthread_mutex_unlock(&plans_lock);
    if (!p) nb_set_error(NB_ERR_OOM, "conv2d: out of host memory for a cuDNN plan");
    return p;
}

void plan_release(Plan *pl) {
    if (pl && !pl->cached) plan_free(pl);
}

// The candidate to try; nalgo when none is left. cur only grows (plan_drop),
// from any thread: host atomics, not a lock.
int plan_cur(Plan *pl) { return __atomic_load_n(&pl->cur, __ATOMIC_ACQUIRE); }
bool plan_usable(Plan *pl) { return plan_cur(pl) < pl->nalgo; }
void plan_drop(Plan *pl, int cur) {
    __atomic_compare_exchange_n(&pl->cur, &cur, cur + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

bool cudnn_unsupported(cudnnStatus_t s) {
    int cat = CUDNN_STATUS_CATEGORY((int)s);
    return cat == CUDNN_STATUS_NOT_SUPPORTED || cat == CUDNN_STATUS_BAD_PARAM;
}

// Runs the plan's op: fwd y = conv(a = x, b = w); bwd data x-side = (a = w,
// b = gy); bwd filter w-side = (a = x, b = gy). *ran is false when no cuDNN
// algorithm remains (the caller runs the direct kernel instead).
nb_status plan_run(nb_backend *be, cudnnHandle_t h, Plan *pl, const void *a, const void *b, void *out,
                   bool accumulate, const char *slot, bool *ran) {
    static const float f_one = 1, f_zero = 0;
    static const double d_one = 1, d_zero = 0;
    const bool f64 = pl->key.dt == NB_F64; // the others scale in float
    const void *alpha = f64 ? (const void *)&d_one : (const void *)&f_one;
    const void *beta = accumulate ? alpha : f64 ? (const void *)&d_zero : (const void *)&f_zero;
    // NHWC plans: a, b and out swapped for NHWC scratch (roles: 0 x, 1 w, 2 y)
    Scratch na, nbuf, nout;
    void *const out_nchw = out;
    if (pl->nhwc && plan_usable(pl)) {
        const Key &k = pl->key;
        const int64_t numel[3] = {(int64_t)k.n * k.c * k.h * k.w, (int64_t)k.co * k.cg * k.kh * k.kw,
                                  (int64_t)k.n * k.co * k.ho * k.wo};
        static const int roles[3][3] = {{0, 1, 2}, {1, 2, 0}, {0, 2, 1}}; // a, b, out per op
        const int *r = roles[k.op];
        const size_t es = nb_dtype_size((nb_dtype)k.dt);
        // an operand with one channel (a first layer's image and weights) or
        // one position per channel is the same in both layouts: read as is
        const int chans[3] = {k.c, k.cg, k.co}, plane[3] = {k.h * k.w, k.kh * k.kw, k.ho * k.wo};
        const bool same_a = chans[r[0]] == 1 || plane[r[0]] == 1, same_b = chans[r[1]] == 1 || plane[r[1]] == 1;
        if ((!same_a && !na.alloc(be, es * (size_t)numel[r[0]])) ||
            (!same_b && !nbuf.alloc(be, es * (size_t)numel[r[1]])) || !nout.alloc(be, es * (size_t)numel[r[2]]))
            return nb_last_status();
        cudnnStatus_t ts = same_a ? CUDNN_STATUS_SUCCESS
                                  : cudnnTransformTensor(h, &f_one, pl->t[r[0]], a, &f_zero, pl->t[3 + r[0]], na.ptr);
        if (ts == CUDNN_STATUS_SUCCESS && !same_b)
            ts = cudnnTransformTensor(h, &f_one, pl->t[r[1]], b, &f_zero, pl->t[3 + r[1]], nbuf.ptr);
        if (ts != CUDNN_STATUS_SUCCESS)
            return nb_set_error(NB_ERR_DEVICE, "%s: cudnnTransformTensor (NCHW to NHWC) failed on cuda: %s", slot,
                                cudnnGetErrorString(ts));
        if (!same_a) a = na.ptr;
        if (!same_b) b = nbuf.ptr;
        out = nout.ptr;
        beta = &f_zero; // accumulation happens in the transform back
    }
    for (;;) {
        int cur = plan_cur(pl);
        if (cur >= pl->nalgo) {
            *ran = false;
            return NB_OK;
        }
        Scratch ws;
        size_t wsz = pl->ws[cur];
        if (wsz && !ws.alloc(be, wsz)) return nb_last_status();
        cudnnStatus_t s;
        const char *call;
        if (pl->key.op == OP_FWD) {
            call = "cudnnConvolutionForward";
            s = cudnnConvolutionForward(h, alpha, pl->xd, a, pl->wd, b, pl->cd, (cudnnConvolutionFwdAlgo_t)pl->algo[cur],
                                        ws.ptr, wsz, beta, pl->yd, out);
        } else if (pl->key.op == OP_BWD_DATA) {
            call = "cudnnConvolutionBackwardData";
            s = cudnnConvolutionBackwardData(h, alpha, pl->wd, a, pl->yd, b, pl->cd,
                                             (cudnnConvolutionBwdDataAlgo_t)pl->algo[cur], ws.ptr, wsz, beta, pl->xd,
                                             out);
        } else {
            call = "cudnnConvolutionBackwardFilter";
            s = cudnnConvolutionBackwardFilter(h, alpha, pl->xd, a, pl->yd, b, pl->cd,
                                               (cudnnConvolutionBwdFilterAlgo_t)pl->algo[cur], ws.ptr, wsz, beta,
                                               pl->wd, out);
        }
        if (s == CUDNN_STATUS_SUCCESS) {
            *ran = true;
            if (!pl->nhwc) return NB_OK;
            const int o = pl->key.op == OP_FWD ? 2 : pl->key.op == OP_BWD_DATA ? 0 : 1;
            cudnnStatus_t ts = cudnnTransformTensor(h, &f_one, pl->t[3 + o], out, accumulate ? &f_one : &f_zero,
                                                    pl->t[o], out_nchw);
            return ts == CUDNN_STATUS_SUCCESS
                       ? NB_OK
                       : nb_set_error(NB_ERR_DEVICE, "%s: cudnnTransformTensor (NHWC to NCHW) failed on cuda: %s",
                                      slot, cudnnGetErrorString(ts));
        }
        if (!cudnn_unsupported(s))
            return nb_set_error(NB_ERR_DEVICE, "%s: %s (algorithm %d) failed on cuda: %s", slot, call, pl->algo[cur],
                                cudnnGetErrorString(s));
        plan_drop(pl, cur); // this algorithm cannot run these shapes: drop it for good
    }
}

// ---- the three operations ---------------------------------------------------------------

// cuDNN's output size for symmetric padding p, or -1 when the kernel does not fit.
int64_t cudnn_out(int64_t in, int64_t pad, int64_t k, int64_t d, int64_t s) {
    int64_t span = d * (k - 1) + 1;
    return in + 2 * pad < span ? -1 : (in + 2 * pad - span) / s + 1;
}

// How one call maps onto cuDNN: the x side cuDNN sees ([hx, wx] with
// padding [pch, pcw]), whether that is an explicitly padded buffer, and
// the images per chunk (0: cuDNN cannot take it).
struct Lowering {
    bool padded;
    int64_t hx, wx, pch, pcw, chunk;
};

Lowering lower(const ConvGeom &g) {
    Lowering L = {};
    L.padded = cudnn_out(g.h, g.ph, g.kh, g.dh, g.sh) != g.ho || cudnn_out(g.w, g.pw, g.kw, g.dw, g.sw) != g.wo;
    if (L.padded) {
        L.hx = (g.ho - 1) * g.sh + g.dh * (g.kh - 1) + 1, L.wx = (g.wo - 1) * g.sw + g.dw * (g.kw - 1) + 1;
        L.pch = L.pcw = 0;
    } else {
        L.hx = g.h, L.wx = g.w, L.pch = g.ph, L.pcw = g.pw;
    }
    const int64_t lim = INT_MAX;
    int64_t per_x = g.c * L.hx * L.wx, per_y = g.co * g.ho * g.wo, per = per_x > per_y ? per_x : per_y;
    bool fits = g.co * g.cg * g.kh * g.kw <= lim && L.pch <= lim && L.pcw <= lim && g.sh <= lim && g.sw <= lim &&
                g.dh <= lim && g.dw <= lim && g.groups <= lim && per >= 1 && per <= lim;
    L.chunk = fits ? (lim / per < g.n ? lim / per : g.n) : 0;
    return L;
}

// log2 of the largest power of two (<= 256) dividing every pointer.
int align_class(const void *a, const void *b, const void *c) {
    uintptr_t u = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | 256;
    int k = 0;
    while (!(u & 1)) u >>= 1, k++;
    return k;
}

Key make_key(nb_backend *be, int op, const ConvGeom &g, const Lowering &L, int64_t n, int align) {
    Key k;
    memset(&k, 0, sizeof k);
    k.op = op, k.dev = device_of(be), k.dt = (int)g.dt, k.align = align;
    k.prec = g.dt != NB_F32 ? 0 : g.tf32 ? 1 : nb_float32_matmul_precision();
    k.n = (int)n, k.c = (int)g.c, k.h = (int)L.hx, k.w = (int)L.wx, k.co = (int)g.co, k.cg = (int)g.cg;
    k.kh = (int)g.kh, k.kw = (int)g.kw, k.ho = (int)g.ho, k.wo = (int)g.wo;
    k.ph = (int)L.pch, k.pw = (int)L.pcw, k.sh = (int)g.sh, k.sw = (int)g.sw, k.dh = (int)g.dh, k.dw = (int)g.dw;
    k.groups = (int)g.groups;
    return k;
}

template <typename T> nb_status direct_fwd(nb_backend *be, const ConvGeom &g, const T *x, const T *w, const T *bias, T *y) {
    k_fwd_direct<T><<<blocks_for(g.n * g.co * g.ho * g.wo), THREADS, 0, stream_of(be)>>>(y, x, w, bias, g);
    return launched("conv2d");
}
template <typename T> nb_status direct_bwd_data(nb_backend *be, const ConvGeom &g, const T *gy, const T *w, T *gx) {
    k_bwd_data_direct<T><<<blocks_for(g.n * g.c * g.h * g.w), THREADS, 0, stream_of(be)>>>(gx, gy, w, g);
    return launched("conv2d_backward_input");
}
// The images split S ways so that about 1024 blocks run (deterministic: S
// depends only on the shapes).
template <typename T>
nb_status direct_bwd_filter(nb_backend *be, const ConvGeom &g, const T *gy, const T *x, T *gw, bool accumulate) {
    const char *slot = "conv2d_backward_weight";
    int64_t nw = g.co * g.cg * g.kh * g.kw, S = (1024 + nw - 1) / nw;
    if (S > g.n) S = g.n;
    if (S < 1) S = 1;
    if (S > 65535) S = 65535;
    Scratch part;
    if (!part.alloc(be, sizeof(double) * (size_t)(nw * S))) return nb_last_status();
    unsigned grid = (unsigned)(nw < 65535LL * 16 ? nw : 65535LL * 16);
    k_bwd_filter_part<T><<<dim3(grid, (unsigned)S), THREADS, 0, stream_of(be)>>>(part.as<double>(), gy, x, g);
    nb_status st = launched(slot);
    if (st != NB_OK) return st;
    k_bwd_filter_final<T><<<blocks_for(nw), THREADS, 0, stream_of(be)>>>(gw, part.as<double>(), nw, S, accumulate);
    return launched(slot);
}

// The geometry of images [i0, i0 + n) (pointers are offset by the caller).
ConvGeom sub(const ConvGeom &g, int64_t n) {
    ConvGeom s = g;
    s.n = n;
    return s;
}

template <typename T>
nb_status forward(nb_backend *be, const ConvGeom &g, const T *x, const T *w, const T *bias, T *y) {
    const char *slot = "conv2d";
    cudnnHandle_t h = g.cg * g.kh * g.kw > 0 ? nb_cuda_cudnn(be) : nullptr;
    Lowering L = lower(g);
    if (!h || L.chunk == 0) return direct_fwd(be, g, x, w, bias, y);
    const int64_t xs = g.c * g.h * g.w, ys = g.co * g.ho * g.wo;
    Scratch xp;
    if (L.padded && !xp.alloc(be, sizeof(T) * (size_t)(L.chunk * g.c * L.hx * L.wx))) return nb_last_status();
    for (int64_t i0 = 0; i0 < g.n; i0 += L.chunk) {
        int64_t n = g.n - i0 < L.chunk ? g.n - i0 : L.chunk;
        ConvGeom s = sub(g, n);
        const T *xi = x + i0 * xs;
        T *yi = y + i0 * ys;
        const T *xin = L.padded ? xp.as<T>() : xi;
        Plan *pl = plan_get(h, make_key(be, OP_FWD, g, L, n, align_class(xin, w, yi)));
        if (!pl) return nb_last_status();
        nb_status st = NB_OK;
        bool ran = false;
        if (L.padded && plan_usable(pl)) {
            int64_t planes = n * g.c;
            k_pad<T><<<blocks_for(planes * L.hx * L.wx), THREADS, 0, stream_of(be)>>>(
                xp.as<T>(), xi, planes, g.h, g.w, L.hx, L.wx, g.ph, g.pw);
            st = launched(slot);
        }
        if (st == NB_OK) st = plan_run(be, h, pl, xin, w, yi, false, slot, &ran);
        plan_release(pl);
        if (st == NB_OK && !ran) st = direct_fwd(be, s, xi, w, bias, yi);
        else if (st == NB_OK && bias)
            st = add_bias<T>(be, yi, bias, n * g.co, g.co, g.ho * g.wo);
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

template <typename T> nb_status backward_data(nb_backend *be, const ConvGeom &g, const T *gy, const T *w, T *gx) {
    const char *slot = "conv2d_backward_input";
    cudnnHandle_t h = nb_cuda_cudnn(be);
    Lowering L = lower(g);
    if (!h || L.chunk == 0) return direct_bwd_data(be, g, gy, w, gx);
    const int64_t xs = g.c * g.h * g.w, ys = g.co * g.ho * g.wo;
    Scratch gxp;
    if (L.padded && !gxp.alloc(be, sizeof(T) * (size_t)(L.chunk * g.c * L.hx * L.wx))) return nb_last_status();
    for (int64_t i0 = 0; i0 < g.n; i0 += L.chunk) {
        int64_t n = g.n - i0 < L.chunk ? g.n - i0 : L.chunk;
        ConvGeom s = sub(g, n);
        const T *gyi = gy + i0 * ys;
        T *gxi = gx + i0 * xs;
        T *gxout = L.padded ? gxp.as<T>() : gxi;
        Plan *pl = plan_get(h, make_key(be, OP_BWD_DATA, g, L, n, align_class(w, gyi, gxout)));
        if (!pl) return nb_last_status();
        bool ran = false;
        nb_status st = plan_run(be, h, pl, w, gyi, gxout, false, slot, &ran);
        plan_release(pl);
        if (st == NB_OK && !ran) st = direct_bwd_data(be, s, gyi, w, gxi);
        else if (st == NB_OK && L.padded) {
            int64_t planes = n * g.c;
            k_crop<T><<<blocks_for(planes * g.h * g.w), THREADS, 0, stream_of(be)>>>(gxi, gxp.as<T>(), planes, g.h,
                                                                                     g.w, L.hx, L.wx, g.ph, g.pw);
            st = launched(slot);
        }
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

// Where the weight gradient runs (NB_CUDA_CONV_WGRAD, read once): "gemm"
// tries gemm_bwd_filter first for every dtype, "cudnn" never uses it (the
// 16-bit gradient then runs backward_filter16); unset, it runs the 16-bit
// gradients, the float32/float64 ones with few weight elements per output
// channel (c kh kw <= WGRAD_GEMM_NK: cuDNN's FMA kernels took 164 us for
// the MNIST net's conv1, [32, 1, 3, 3] over 64 images, against 31 us for
// the GEMMs, while its conv2, [64, 32, 3, 3], took 125 us against 158 for
// a first version of the GEMMs, on the H100, tests/bench/cuda_cnn_slots),
// and those cuDNN has no algorithm for. Where it runs first on 16-bit
// tensors it computes the bias gradient too (a row of ones in col).
enum WgradPath { WGRAD_AUTO, WGRAD_GEMM, WGRAD_CUDNN };
constexpr int64_t WGRAD_GEMM_NK = 32;
WgradPath wgrad_path() {
    static const WgradPath v = [] {
        const char *e = getenv("NB_CUDA_CONV_WGRAD");
        return e && !strcmp(e, "gemm") ? WGRAD_GEMM : e && !strcmp(e, "cudnn") ? WGRAD_CUDNN : WGRAD_AUTO;
    }();
    return v;
}
bool wgrad_gemm_first(const ConvGeom &g) {
    WgradPath p = wgrad_path();
    return p == WGRAD_GEMM || (p == WGRAD_AUTO && (nb_dtype_is_16bit(g.dt) || g.cg * g.kh * g.kw <= WGRAD_GEMM_NK));
}

constexpr size_t WGRAD_COL_MAX = (size_t)256 << 20, WGRAD_PART_MAX = (size_t)64 << 20; // scratch caps, bytes

// The weight gradient of an ungrouped convolution, and with gb (callers
// pass it for 16-bit gy, exact in any GEMM) its bias gradient too, as
// im2col and one strided-batched cuBLAS GEMM per chunk of images, dW_i
// [co, ld] = gy_i [co, P] col_i [ld, P]^T (col: nk = c kh kw rows, the
// bias row, zero rows up to ld; P = ho wo; 16-bit operands give float32
// products on the tensor cores, float32 follows the matmul precision as
// every GEMM, "medium" declined), then the images' dW_i added
// in order in double (k_wgrad_sum): deterministic. cuDNN's legacy
// heuristics offer bf16 no deterministic weight-gradient algorithm, and
// FFMA kernels for float32. *ran is false, with nothing done, for groups,
// shapes past the scratch caps or the kernels' int range.
template <typename T>
nb_status gemm_bwd_filter(nb_backend *be, const ConvGeom &g, const T *gy, const T *x, T *gw, T *gb, bool *ran) {
    using A = typename std::conditional<std::is_same<T, double>::value, double, float>::type;
    const char *slot = "conv2d_backward_weight";
    // ld: the GEMM's columns, nk1 padded to a multiple of 8 (an odd count
    // took a 65 us sm75 kernel for the MNIST conv2 in bf16 against 14 us)
    const int64_t nk = g.cg * g.kh * g.kw, nk1 = nk + (gb ? 1 : 0), P = g.ho * g.wo;
    const int64_t ld = (nk1 + 7) / 8 * 8, nw1 = g.co * ld;
    *ran = false;
    // k_im2col's int index math: every position it forms stays within int
    const int64_t span_h = g.ho * g.sh + g.kh * g.dh + g.ph, span_w = g.wo * g.sw + g.kw * g.dw + g.pw;
    if (g.groups != 1 || ld > 65535 || P > INT_MAX / 2 || g.c * g.h * g.w > INT_MAX || g.c > 65535 ||
        span_h > INT_MAX / 2 || span_w > INT_MAX / 2)
        return NB_OK;
    // float32 under "medium" would take bfloat16 GEMMs: the convolutions allow TF32 at most (cuDNN's)
    if (std::is_same<T, float>::value && nb_float32_matmul_precision() > 1) return NB_OK;
    if ((size_t)(g.n * nw1) > WGRAD_PART_MAX / sizeof(A)) return NB_OK;
    int64_t chunk = g.n < 65535 / g.c ? g.n : 65535 / g.c;
    const size_t col_image = sizeof(T) * (size_t)(ld * P);
    if ((size_t)chunk * col_image > WGRAD_COL_MAX) chunk = (int64_t)(WGRAD_COL_MAX / col_image);
    if (chunk < 1) return NB_OK;
    Scratch col, part;
    if (!col.alloc(be, col_image * (size_t)chunk) || !part.alloc(be, sizeof(A) * (size_t)(g.n * nw1)))
        return nb_last_status();
    const nb_dtype part_dt = std::is_same<T, double>::value ? NB_F64 : NB_F32;
    const int64_t ys = g.co * P, xs = g.c * g.h * g.w;
    for (int64_t i0 = 0; i0 < g.n; i0 += chunk) {
        const int64_t n = g.n - i0 < chunk ? g.n - i0 : chunk;
        // the positions split evenly over as few blocks as THREADS allows
        // (576 positions: 3 x 192 threads rather than 2 x 256 and a quarter)
        const int64_t nb = (P + THREADS - 1) / THREADS, per = ((P + nb - 1) / nb + 31) / 32 * 32;
        unsigned gx = (unsigned)(nb < 65535 ? nb : 65535);
        k_im2col<T><<<dim3(gx, (unsigned)(n * g.c)), (unsigned)per, 0, stream_of(be)>>>(
            col.as<T>(), x + i0 * xs, g, gb != nullptr, (int)ld, (int)P);
        nb_status st = launched(slot);
        if (st == NB_OK)
            st = gemm_rm_ex(be, slot, g.dt, part_dt, false, true, g.co, ld, P, 1.0, gy + i0 * ys, P, ys,
                            col.as<T>(), P, ld * P, 0.0, part.as<A>() + i0 * nw1, ld, nw1, n);
        if (st != NB_OK) return st;
    }
    const int64_t lanes = 4 * g.co * nk1;
    k_wgrad_sum<T, A><<<(unsigned)((lanes + THREADS - 1) / THREADS), THREADS, 0, stream_of(be)>>>(
        gw, gb, part.as<A>(), g.co, nk, nk1, ld, g.n);
    *ran = true;
    return launched(slot);
}

// Without a cuDNN algorithm: the GEMMs (unless NB_CUDA_CONV_WGRAD=cudnn,
// or already tried), else the direct kernels.
template <typename T>
nb_status fallback_bwd_filter(nb_backend *be, const ConvGeom &g, const T *gy, const T *x, T *gw) {
    bool ran = false;
    if (wgrad_path() == WGRAD_AUTO && !wgrad_gemm_first(g)) {
        nb_status st = gemm_bwd_filter<T>(be, g, gy, x, gw, nullptr, &ran);
        if (st != NB_OK || ran) return st;
    }
    return direct_bwd_filter(be, g, gy, x, gw, false);
}

// The float32/float64 weight gradient (and backward_filter16's) where
// gemm_bwd_filter did not run first (wgrad_gemm_first): cuDNN, then
// gemm_bwd_filter where cuDNN has no algorithm, the direct kernels where
// neither runs.
template <typename T> nb_status backward_filter(nb_backend *be, const ConvGeom &g, const T *gy, const T *x, T *gw) {
    const char *slot = "conv2d_backward_weight";
    cudnnHandle_t h = nb_cuda_cudnn(be);
    Lowering L = lower(g);
    if (!h || L.chunk == 0) return fallback_bwd_filter(be, g, gy, x, gw);
    const int64_t xs = g.c * g.h * g.w, ys = g.co * g.ho * g.wo;
    Scratch xp;
    if (L.padded && !xp.alloc(be, sizeof(T) * (size_t)(L.chunk * g.c * L.hx * L.wx))) return nb_last_status();
    for (int64_t i0 = 0; i0 < g.n; i0 += L.chunk) {
        int64_t n = g.n - i0 < L.chunk ? g.n - i0 : L.chunk;
        ConvGeom s = sub(g, n);
        const T *xi = x + i0 * xs, *gyi = gy + i0 * ys;
        const T *xin = L.padded ? xp.as<T>() : xi;
        Plan *pl = plan_get(h, make_key(be, OP_BWD_FILTER, g, L, n, align_class(xin, gyi, gw)));
        if (!pl) return nb_last_status();
        nb_status st = NB_OK;
        bool ran = false;
        if (L.padded && plan_usable(pl)) {
            int64_t planes = n * g.c;
            k_pad<T><<<blocks_for(planes * L.hx * L.wx), THREADS, 0, stream_of(be)>>>(
                xp.as<T>(), xi, planes, g.h, g.w, L.hx, L.wx, g.ph, g.pw);
            st = launched(slot);
        }
        if (st == NB_OK)
            st = plan_run(be, h, pl, xin, gyi, gw, i0 > 0, slot, &ran);
        plan_release(pl);
        if (st == NB_OK && !ran) {
            if (g.n <= L.chunk) return fallback_bwd_filter(be, g, gy, x, gw); // one chunk: the whole gradient
            st = direct_bwd_filter(be, s, gyi, xi, gw, i0 > 0);
        }
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

// The 16-bit weight gradient where gemm_bwd_filter does not run (groups,
// NB_CUDA_CONV_WGRAD=cudnn): cuDNN's heuristics give it no deterministic
// algorithm (NCHW or NHWC), so it runs as a float32 TF32 backward filter on
// float32 copies of x and gy (16-bit values are exact in TF32, so the
// products are the tensor cores' bf16/f16 products, accumulated in float32),
// in NCHW (the NHWC float32 heuristics picked a direct kernel of cuDNN's:
// bf16 cnn step 0.625 against 0.474 ms on the H100), rounded into gw.
nb_status backward_filter16(nb_backend *be, const ConvGeom &g, const nb_kview *gw, const nb_kview *gy,
                            const nb_kview *x) {
    Scratch xs, gys, gws;
    const nb_kview *src[3] = {x, gy, gw};
    Scratch *buf[3] = {&xs, &gys, &gws};
    nb_kview w32[3];
    for (int i = 0; i < 3; i++) {
        w32[i] = *src[i];
        w32[i].dtype = NB_F32;
        if (!buf[i]->alloc(be, sizeof(float) * (size_t)numel(src[i]))) return nb_last_status();
        w32[i].data = buf[i]->ptr;
    }
    nb_status st = nb_cuda_copy_into(be, &w32[0], x);
    if (st == NB_OK) st = nb_cuda_copy_into(be, &w32[1], gy);
    ConvGeom g32 = g;
    g32.dt = NB_F32, g32.tf32 = true;
    if (st == NB_OK)
        st = backward_filter<float>(be, g32, (const float *)w32[1].data, (const float *)w32[0].data,
                                    (float *)w32[2].data);
    return st == NB_OK ? nb_cuda_copy_into(be, gw, &w32[2]) : st;
}

nb_status zero(nb_backend *be, const char *slot, const nb_kview *v) {
    int64_t n = numel(v);
    if (n == 0) return NB_OK;
    NBC_TRY(slot, cudaMemsetAsync(v->data, 0, (size_t)n * nb_dtype_size(v->dtype), stream_of(be)));
    return NB_OK;
}

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                                    const nb_kview *bias, const nb_conv_params *p) {
    ConvGeom g = geom_of(x, w, out, p);
    if (numel(out) == 0) return NB_OK;
    return dispatch_floating("conv2d", g.dt, [&](auto tag) {
        using T = decltype(tag);
        return forward<T>(be, g, (const T *)x->data, (const T *)w->data, bias ? (const T *)bias->data : nullptr,
                          (T *)out->data);
    });
}

extern "C" nb_status nb_cuda_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                                   const nb_kview *w, const nb_conv_params *p) {
    const char *slot = "conv2d_backward_input";
    ConvGeom g = geom_of(gx, w, gy, p);
    if (numel(gx) == 0) return NB_OK;
    if (numel(gy) == 0 || g.kh * g.kw == 0) return zero(be, slot, gx); // nothing flows back
    return dispatch_floating(slot, g.dt, [&](auto tag) {
        using T = decltype(tag);
        return backward_data<T>(be, g, (const T *)gy->data, (const T *)w->data, (T *)gx->data);
    });
}

extern "C" nb_status nb_cuda_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                                    const nb_kview *gy, const nb_kview *x, const nb_conv_params *p) {
    const char *slot = "conv2d_backward_weight";
    ConvGeom g = geom_of(x, gw, gy, p);
    if (g.n == 0 || g.ho * g.wo == 0) { // an empty sum
        nb_status st = zero(be, slot, gw);
        return st == NB_OK && gbias ? zero(be, slot, gbias) : st;
    }
    return dispatch_floating(slot, g.dt, [&](auto tag) {
        using T = decltype(tag);
        T *gb = gbias && g.co > 0 ? (T *)gbias->data : nullptr;
        // 16-bit: the bias gradient as a GEMM column (gy is exact in the
        // tensor cores); float32/float64 keep its exact two-pass sum (a TF32
        // GEMM would round gy)
        T *gb_gemm = nb_dtype_is_16bit(g.dt) ? gb : nullptr;
        bool ran = false;
        if (numel(gw) > 0 && wgrad_gemm_first(g)) {
            nb_status s =
                gemm_bwd_filter<T>(be, g, (const T *)gy->data, (const T *)x->data, (T *)gw->data, gb_gemm, &ran);
            if (s != NB_OK || (ran && (!gb || gb_gemm))) return s;
        }
        if (gb) {
            nb_status s = bias_grad<T>(be, slot, gb, (const T *)gy->data, g.n, g.co, g.ho * g.wo);
            if (s != NB_OK) return s;
        }
        if (numel(gw) == 0 || ran) return NB_OK;
        if (nb_dtype_is_16bit(g.dt)) return backward_filter16(be, g, gw, gy, x);
        return backward_filter<T>(be, g, (const T *)gy->data, (const T *)x->data, (T *)gw->data);
    });
}
