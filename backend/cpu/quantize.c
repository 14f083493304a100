/* quantize.c - the CPU's fake quantization (torch.fake_quantize_per_tensor_
 * affine / per_channel_affine and the learnable variants' gradients). Each
 * element is the shared scalar formula (nb_sm_fake_quant_*,
 * nb_scalar_math_float.t.h), so the CUDA kernels give the same bits; rows
 * [c, inner] are independent, so any split over threads gives the same
 * bits. */
#include "cpu_common.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "threadpool.h"

typedef struct fq_job {
    char *out, *gs, *gz;
    const char *x, *g;
    const float *scale, *zp;
    int64_t C, inner;
    const nb_fake_quant_params *p;
} fq_job;

#define T_ float
#define S f32
#include "quantize.t.h"
#define T_ double
#define S f64
#include "quantize.t.h"

nb_status nb_cpu_fake_quantize(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *scale,
                               const nb_kview *zero_point, const nb_fake_quant_params *p) {
    (void)be; /* checked: backend/check/quantize.c */
    int64_t rows = x->shape[0] * x->shape[1], inner = x->shape[2];
    if (rows == 0 || inner == 0) return NB_OK;
    fq_job j = {.out = out->data, .x = x->data, .scale = scale->data, .zp = zero_point->data,
                .C = x->shape[1], .inner = inner, .p = p};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / inner + 1, x->dtype == NB_F32 ? fq_rows_f32 : fq_rows_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_fake_quantize_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gscale,
                                        const nb_kview *gzp, const nb_kview *g, const nb_kview *x,
                                        const nb_kview *scale, const nb_kview *zero_point,
                                        const nb_fake_quant_params *p) {
    (void)be; /* checked: backend/check/quantize.c */
    int64_t rows = x->shape[0] * x->shape[1], inner = x->shape[2];
    if (rows == 0 || inner == 0 || (!gx && !gscale && !gzp)) return NB_OK;
    fq_job j = {.out = gx ? gx->data : NULL, .gs = gscale ? gscale->data : NULL, .gz = gzp ? gzp->data : NULL,
                .x = x->data, .g = g->data, .scale = scale->data, .zp = zero_point->data, .C = x->shape[1],
                .inner = inner, .p = p};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / inner + 1, x->dtype == NB_F32 ? fq_grad_rows_f32 : fq_grad_rows_f64,
                        &j);
    return NB_OK;
}
