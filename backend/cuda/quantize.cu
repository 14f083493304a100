// quantize.cu - fake quantization on the GPU (torch.fake_quantize_per_tensor_
// affine / per_channel_affine and the learnable variants' gradients). Every
// element is the shared scalar formula (nb_sm_of<T>::fake_quant and
// fake_quant_grad, nb_scalar_math_float.t.h), the CPU's bits; x is
// [outer, C, inner] contiguous and the channel of element i is
// (i / inner) % C. Checked by backend/check/quantize.c.
#include <cuda_runtime.h>

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

} // namespace

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
