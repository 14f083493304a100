// quantize.cu - fake quantization on the GPU (torch.fake_quantize_per_tensor_
// affine / per_channel_affine and the learnable variants' gradients). Every
// element is the shared scalar formula (nb_sm_of<T>::fake_quant and
// fake_quant_grad, nb_scalar_math_float.t.h), the CPU's bits; x is
// [outer, C, inner] contiguous and the channel of element i is
// (i / inner) % C. And BitNet b1.58's packed product (bitnet_linear): a
// block per row quantizes the activations to int8, then a warp per output
// column sums codes x activations four at a time with dp4a, each lane
// over its own words and the warp's partials by a fixed butterfly: exact
// integer sums, so the CPU's bits up to the final float division.
// Checked by backend/check/quantize.c.
#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "cuda_common.cuh"
#include "nb_scalar_math.h"

using namespace nbc;

namespace {

template <typename T>
__global__ void k_fake_quant(T *out, const T *x, const float *scale, const float *zp, int64_t n, int64_t C,
                             int64_t inner, nb_fake_quant_params p) {
    NBC_GRID_STRIDE(i, n) {
        int64_t c = (i / inner) % C;
        float s = scale[c];
        out[i] = nb_sm_of<T>::fake_quant(x[i], s, 1.0f / s, zp[c], &p);
    }
}

template <typename T>
__global__ void k_fake_quant_grad(T *gx, T *gs, T *gz, const T *g, const T *x, const float *scale, const float *zp,
                                  int64_t n, int64_t C, int64_t inner, nb_fake_quant_params p) {
    const T gf = (T)p.grad_factor;
    NBC_GRID_STRIDE(i, n) {
        int64_t c = (i / inner) % C;
        float s = scale[c];
        T a, b, d;
        nb_sm_of<T>::fake_quant_grad(g[i], x[i], s, 1.0f / s, zp[c], &p, gf, &a, &b, &d);
        if (gx) gx[i] = a;
        if (gs) gs[i] = b;
        if (gz) gz[i] = d;
    }
}

// Row m of x [M, K] to int8 qx [M, kp] (padding 0), with s_x and sum qx:
// the shared formulas (nb_sm_of<T>::bitnet_act_*), the CPU kernel's.
template <typename T>
__global__ void k_bitnet_quant(int8_t *qx, double *sx, int *sum, const T *x, int64_t K, int64_t kp) {
    __shared__ T redm[32];
    __shared__ int reds[32];
    const int64_t m = blockIdx.x;
    const T *xr = x + m * K;
    using SM = nb_sm_of<T>;
    T a = 0;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) a = SM::nan_max(a, fabs(xr[k]));
    // max over the block (a fixed tree; NaN kept)
    for (int o = 16; o > 0; o >>= 1) a = SM::nan_max(a, __shfl_xor_sync(0xffffffffu, a, o));
    if ((threadIdx.x & 31) == 0) redm[threadIdx.x >> 5] = a;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    a = lane < (int)(blockDim.x >> 5) ? redm[lane] : (T)0; // every warp reduces the same partials
    for (int o = 16; o > 0; o >>= 1) a = SM::nan_max(a, __shfl_xor_sync(0xffffffffu, a, o));
    const T s = SM::bitnet_act_scale(a);
    int acc = 0;
    for (int64_t k = threadIdx.x; k < kp; k += blockDim.x) {
        int8_t v = k < K ? SM::bitnet_act_level(xr[k], s) : (int8_t)0;
        qx[m * kp + k] = v;
        acc += v;
    }
    acc = block_sum(acc, reds);
    if (threadIdx.x == 0) sx[m] = (double)s, sum[m] = acc;
}

// y [M, N]: a warp per output column n, every row m; packed rows as
// 32-bit words (4 bytes of a group: plane i holds the codes of 4
// consecutive weights, matched by one int32 of activations).
template <typename T>
__global__ void k_bitnet_dot(T *y, const int8_t *qx, const double *sx, const int *sum, const uint8_t *packed,
                             const float *w_scale, const T *bias, int64_t M, int64_t N, int64_t kp) {
    const int64_t n = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (n >= N) return;
    const int64_t words = kp / 16; // 32-bit words of a packed row
    const unsigned *p = (const unsigned *)(packed + n * (kp / 4));
    const float sw = *w_scale;
    for (int64_t m = 0; m < M; m++) {
        const int *xq = (const int *)(qx + m * kp);
        int acc = 0;
        for (int64_t t = lane; t < words; t += 32) {
            unsigned w = p[t];
            int64_t g = t / 8, j4 = t % 8; // group, and its 4-byte slot (weights 4 j4 .. 4 j4 + 3 of each plane)
            const int *xg = xq + g * 32 + j4;
            acc = __dp4a((int)(w & 0x03030303u), xg[0], acc);
            acc = __dp4a((int)((w >> 2) & 0x03030303u), xg[8], acc);
            acc = __dp4a((int)((w >> 4) & 0x03030303u), xg[16], acc);
            acc = __dp4a((int)((w >> 6) & 0x03030303u), xg[24], acc);
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            T v = nb_sm_of<T>::bitnet_out(acc - sum[m], (T)sx[m], sw);
            y[m * N + n] = bias ? v + bias[n] : v;
        }
    }
}

} // namespace

nb_status nb_cuda_bitnet_linear(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *packed,
                                const nb_kview *w_scale, const nb_kview *bias) {
    const char *op = "bitnet_linear"; // checked: backend/check/quantize.c
    const int64_t M = x->shape[0], K = x->shape[1], N = packed->shape[0], kp = packed->shape[1] * 4;
    if (!M || !N) return NB_OK;
    if ((uintptr_t)packed->data % 4)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: packed weights must be 4-byte aligned on cuda (a copy is)", op);
    Scratch ws;
    size_t qbytes = ((size_t)(M * kp) + 15) / 16 * 16;
    if (!ws.alloc(be, qbytes + (size_t)M * (sizeof(double) + sizeof(int)))) return nb_last_status();
    int8_t *qx = ws.as<int8_t>();
    double *sx = (double *)(ws.as<char>() + qbytes);
    int *sum = (int *)(sx + M);
    return dispatch_float(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        k_bitnet_quant<T><<<(unsigned)M, 256, 0, stream_of(be)>>>(qx, sx, sum, (const T *)x->data, K, kp);
        nb_status st = launched(op);
        if (st) return st;
        const int warps = 8;
        k_bitnet_dot<T><<<(unsigned)((N + warps - 1) / warps), 32 * warps, 0, stream_of(be)>>>(
            (T *)y->data, qx, sx, sum, (const uint8_t *)packed->data, (const float *)w_scale->data,
            bias ? (const T *)bias->data : nullptr, M, N, kp);
        return launched(op);
    });
}

nb_status nb_cuda_fake_quantize(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *scale,
                                const nb_kview *zero_point, const nb_fake_quant_params *p) {
    const char *op = "fake_quantize";
    const int64_t n = x->shape[0] * x->shape[1] * x->shape[2], C = x->shape[1], inner = x->shape[2];
    if (!n) return NB_OK;
    return dispatch_float(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        k_fake_quant<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>(
            (T *)out->data, (const T *)x->data, (const float *)scale->data, (const float *)zero_point->data, n, C,
            inner, *p);
        return launched(op);
    });
}

nb_status nb_cuda_fake_quantize_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gscale,
                                         const nb_kview *gzp, const nb_kview *g, const nb_kview *x,
                                         const nb_kview *scale, const nb_kview *zero_point,
                                         const nb_fake_quant_params *p) {
    const char *op = "fake_quantize_backward";
    const int64_t n = x->shape[0] * x->shape[1] * x->shape[2], C = x->shape[1], inner = x->shape[2];
    if (!n || (!gx && !gscale && !gzp)) return NB_OK;
    return dispatch_float(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        k_fake_quant_grad<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>(
            gx ? (T *)gx->data : nullptr, gscale ? (T *)gscale->data : nullptr, gzp ? (T *)gzp->data : nullptr,
            (const T *)g->data, (const T *)x->data, (const float *)scale->data, (const float *)zero_point->data, n, C,
            inner, *p);
        return launched(op);
    });
}
