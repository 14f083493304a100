// quantize.cu - fake quantization on the GPU (torch.fake_quantize_per_tensor_
// affine / per_channel_affine and the learnable variants' gradients). Every
// element is the shared scalar formula (nb_sm_of<T>::fake_quant and
// fake_quant_grad, nb_scalar_math_float.t.h), the CPU's bits; x is
// [outer, C, inner] contiguous and the channel of element i is
// (i / inner) % C. And BitNet b1.58's packed product (bitnet_linear): a
// block per row quantizes the activations to int8, then a warp per output
// column sums codes x activations four at a time with dp4a, each lane
// over its own words and the warp's partials by a fixed butterfly: exact
// integer sums, so the CPU's bits up to the final float division. And the
// int8 weight-only product (linear_int8), matmul.cu's small-m GEMV with
// int8 weights: a 16-byte load is 16 weights, half a bfloat16 row's bytes.
// Checked by backend/check/quantize.c.
#include <cuda_runtime.h>

#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_common.cuh"
#include "nb_scalar_math.h"

using namespace nbc;

namespace {

// O = T: the fake-quantized values; O = int32_t: the clamped levels (quantize_per_tensor).
template <typename T, typename O>
__global__ void k_fake_quant(O *out, const T *x, const float *scale, const float *zp, int64_t n, int64_t C,
                             int64_t inner, nb_fake_quant_params p) {
    NBC_GRID_STRIDE(i, n) {
        int64_t c = (i / inner) % C;
        float s = scale[c];
        if constexpr (std::is_same<O, int32_t>::value) out[i] = (int32_t)nb_sm_of<T>::fq_clamped(x[i], 1.0f / s, zp[c], &p);
        else out[i] = nb_sm_of<T>::fake_quant(x[i], s, 1.0f / s, zp[c], &p);
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

// ---- linear_int8: y = scales * (x qweight^T) (+ bias) for few rows ----------------------
//
// `split` warps of a block take one weight row, each a contiguous slice of
// k; a lane reads 16 int8 weights (16-byte loads streamed past L1,
// LI8_UNROLL in flight) and the matching 16 activations of each of the
// LI8_M rows of x (cached: every warp reads them); sums in A (float, double
// for float64) reduced by a fixed butterfly, then across slices in slice
// order: one order for a shape. On the H200 it moves a [8192, 2048] weight
// at 1.3 TB/s (ncu), latency-bound at 44% occupancy: two rows a warp, or
// fewer registers for more blocks, measured slower.
// VEC: k a multiple of 16 and 16-byte aligned rows; else one element per
// lane at a time.
constexpr int LI8_M = 4, LI8_WARPS = 8, LI8_UNROLL = 4;

// 16 int8 values as floats, exactly, without I2F (a quarter-rate
// instruction, which bounded the kernel): byte b of w ^ 0x80808080 is
// b + 128 as an unsigned byte; placed under the exponent of 2^23 it is the
// float 2^23 + b + 128, and subtracting 2^23 + 128 leaves b. One PRMT and
// one FADD a value.
__device__ inline void i8x16_to_f(const uint4 &w, float f[16]) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint32_t u = words[q] ^ 0x80808080u;
#pragma unroll
        for (int b = 0; b < 4; b++) f[4 * q + b] = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7440u | b)) - 8388736.0f;
    }
}

template <typename T> __device__ inline void load16f(const T *p, float f[16]) {
    if constexpr (std::is_same<T, float>::value) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float4 v = __ldg((const float4 *)p + u);
            f[4 * u] = v.x, f[4 * u + 1] = v.y, f[4 * u + 2] = v.z, f[4 * u + 3] = v.w;
        }
    } else {
        f8_of<T>(__ldg((const uint4 *)p), f);
        f8_of<T>(__ldg((const uint4 *)p + 1), f + 8);
    }
}

template <typename T, typename A, bool VEC>
__global__ void __launch_bounds__(LI8_WARPS * 32)
    k_linear_i8(const T *x, const int8_t *q, const float *scales, const T *bias, T *y, int rows, int64_t n, int64_t k,
                int split) {
    __shared__ A part[LI8_WARPS][LI8_M];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, slice = warp % split;
    const int64_t col = (int64_t)blockIdx.x * (LI8_WARPS / split) + warp / split;
    A acc[LI8_M] = {};
    if (col < n) {
        const int8_t *qr = q + col * k;
        if constexpr (VEC) {
            const int64_t per = (k / 16 + split - 1) / split * 16, e1 = min(k, (slice + 1) * per);
            // the 16 weights at e into the rows' sums
            auto dot16 = [&](const uint4 &wv, int64_t e) {
                if constexpr (std::is_same<A, double>::value) {
                    const int8_t *wb = (const int8_t *)&wv;
                    for (int r = 0; r < rows; r++)
                        for (int j = 0; j < 16; j++) acc[r] += x[r * k + e + j] * (double)wb[j];
                } else {
                    float wf[16];
                    i8x16_to_f(wv, wf);
#pragma unroll
                    for (int r = 0; r < LI8_M; r++) {
                        if (r >= rows) break;
                        float xf[16];
                        load16f<T>(x + r * k + e, xf);
#pragma unroll
                        for (int j = 0; j < 16; j++) acc[r] += xf[j] * wf[j];
                    }
                }
            };
            int64_t e = slice * per + lane * 16;
            for (; e + (LI8_UNROLL - 1) * 512 < e1; e += LI8_UNROLL * 512) { // LI8_UNROLL loads in flight, then their sums
                uint4 wv[LI8_UNROLL];
#pragma unroll
                for (int u = 0; u < LI8_UNROLL; u++) wv[u] = __ldcs((const uint4 *)(qr + e + u * 512));
#pragma unroll
                for (int u = 0; u < LI8_UNROLL; u++) dot16(wv[u], e + u * 512);
            }
            for (; e < e1; e += 512) dot16(__ldcs((const uint4 *)(qr + e)), e);
        } else {
            const int64_t per = (k + split - 1) / split, e1 = min(k, (slice + 1) * per);
            for (int64_t e = slice * per + lane; e < e1; e += 32)
                for (int r = 0; r < rows; r++) acc[r] += (A)Traits<T>::load(x[r * k + e]) * (A)qr[e];
        }
    }
#pragma unroll
    for (int r = 0; r < LI8_M; r++) {
        A v = acc[r];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
    if (lane == 0 && slice == 0 && col < n)
        for (int r = 0; r < rows; r++) {
            A v = part[warp][r];
            for (int s = 1; s < split; s++) v += part[warp + s][r];
            v = (A)scales[col] * v;
            if (bias) v += (A)Traits<T>::load(bias[col]);
            y[r * n + col] = Traits<T>::store((typename Traits<T>::acc)v);
        }
}

nb_status nb_cuda_linear_int8(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *qweight,
                              const nb_kview *scales, const nb_kview *bias) {
    const char *op = "linear_int8";
    const int64_t M = x->shape[0], K = x->shape[1], N = qweight->shape[0];
    if (!M || !N) return NB_OK;
    if (N / LI8_WARPS >= INT32_MAX) return nb_set_error(NB_ERR_INVALID_ARG, "%s: N %lld too large", op, (long long)N);
    int split = 1; // as matmul.cu's GEMV: about 8192 warps in the grid, slices of >= 1024 elements
    while (split < LI8_WARPS && N * split < 8192 && K / (2 * split) >= 1024) split *= 2;
    const unsigned blocks = (unsigned)((N + LI8_WARPS / split - 1) / (LI8_WARPS / split));
    const bool vec = K % 16 == 0 && ((uintptr_t)x->data & 15) == 0 && ((uintptr_t)qweight->data & 15) == 0;
    return dispatch_all(x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value ||
                      std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) {
            using A = typename std::conditional<std::is_same<T, double>::value, double, float>::type;
            for (int64_t r0 = 0; r0 < M; r0 += LI8_M) { // LI8_M rows a launch
                const int rows = (int)(M - r0 < LI8_M ? M - r0 : LI8_M);
                const T *xr = (const T *)x->data + r0 * K;
                T *yr = (T *)y->data + r0 * N;
                const T *b = bias ? (const T *)bias->data : nullptr;
                if (vec)
                    k_linear_i8<T, A, true><<<blocks, LI8_WARPS * 32, 0, stream_of(be)>>>(
                        xr, (const int8_t *)qweight->data, (const float *)scales->data, b, yr, rows, N, K, split);
                else
                    k_linear_i8<T, A, false><<<blocks, LI8_WARPS * 32, 0, stream_of(be)>>>(
                        xr, (const int8_t *)qweight->data, (const float *)scales->data, b, yr, rows, N, K, split);
                nb_status st = launched(op);
                if (st) return st;
            }
            return NB_OK;
        } else {
            return nb_set_error(NB_ERR_DTYPE, "%s: %s x", op, nb_dtype_name(x->dtype));
        }
    });
}

nb_status nb_cuda_fake_quantize(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *scale,
                                const nb_kview *zero_point, const nb_fake_quant_params *p) {
    const char *op = "fake_quantize";
    const int64_t n = x->shape[0] * x->shape[1] * x->shape[2], C = x->shape[1], inner = x->shape[2];
    if (!n) return NB_OK;
    return dispatch_float(op, x->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        const float *s = (const float *)scale->data, *z = (const float *)zero_point->data;
        if (out->dtype == NB_I32)
            k_fake_quant<T, int32_t><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((int32_t *)out->data,
                                                                                 (const T *)x->data, s, z, n, C, inner, *p);
        else
            k_fake_quant<T, T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((T *)out->data, (const T *)x->data, s, z, n,
                                                                           C, inner, *p);
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
