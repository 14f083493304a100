/* layer_norm.c - the CPU's fused layer norm over the rows of x [R, M]
 * (Ba, Kiros, Hinton 2016; PyTorch's F.layer_norm with biased variance):
 *   forward   mean = sum(x)/M, rstd = 1/sqrt(sum((x-mean)^2)/M + eps),
 *             y = (x - mean) * rstd * w + b
 *   backward  xhat = (x - mean) * rstd, a = gy * w,
 *             gx = rstd * (a - mean(a) - xhat * mean(a * xhat)),
 *             gw = sum_rows(gy * xhat), gb = sum_rows(gy).
 * Row statistics are computed in double with NB_LN_LANES interleaved
 * partial sums combined in a fixed order (so the compiler can vectorise
 * them while the result stays the same for any thread count). Threads split
 * rows for y and gx; gw and gb are split by fixed column blocks, each
 * summing every row in order, so they never depend on the thread count. */
#include <tgmath.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define NB_LN_LANES 8
#define NB_LN_COLS 64

typedef struct ln_job {
    char *out, *gx, *gw, *gb;
    const char *x, *gy, *w, *b;
    char *mean, *rstd; /* written by the forward, read by the backward */
    int64_t rows, m;
    double eps;
} ln_job;

#define NB_TEMPLATE "layer_norm.t.h"
#include "template_floats.h"

nb_status nb_cpu_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd,
                            const nb_layer_norm_args *a) {
    (void)be; /* checked: backend/check/layer_norm.c */
    const nb_kview *x = a->x, *w = a->w, *b = a->b;
    double eps = a->eps;
    int64_t rows = x->shape[0], m = x->shape[1];
    if (rows == 0) return NB_OK;
    ln_job j = {.out = out->data, .x = x->data, .w = w ? w->data : NULL, .b = b ? b->data : NULL,
                .mean = mean->data, .rstd = rstd->data, .rows = rows, .m = m, .eps = eps};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / (m + 1) + 1, x->dtype == NB_F32 ? ln_fwd_f32 : ln_fwd_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gb,
                                     const nb_kview *gy, const nb_kview *mean, const nb_kview *rstd,
                                     const nb_layer_norm_args *a) {
    (void)be; /* checked: backend/check/layer_norm.c */
    const nb_kview *x = a->x, *w = a->w;
    int64_t rows = x->shape[0], m = x->shape[1];
    bool f32 = x->dtype == NB_F32;
    ln_job j = {.gx = gx ? gx->data : NULL, .gw = gw ? gw->data : NULL, .gb = gb ? gb->data : NULL,
                .x = x->data, .gy = gy->data, .w = w ? w->data : NULL, .mean = mean->data, .rstd = rstd->data,
                .rows = rows, .m = m};
    if (gx && rows > 0 && m > 0)
        nb_cpu_parallel_for(rows, NB_CPU_GRAIN / (2 * m + 1) + 1, f32 ? ln_bwd_rows_f32 : ln_bwd_rows_f64, &j);
    if ((gw || gb) && m > 0) {
        int64_t units = (m + NB_LN_COLS - 1) / NB_LN_COLS;
        nb_cpu_parallel_for(units, NB_CPU_GRAIN / (NB_LN_COLS * rows + 1) + 1, f32 ? ln_bwd_cols_f32 : ln_bwd_cols_f64,
                            &j);
    }
    return NB_OK;
}
