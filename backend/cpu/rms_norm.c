/* rms_norm.c - the CPU's fused RMSNorm over the rows of x [R, M] (Zhang &
 * Sennrich 2019, "Root mean square layer normalization"; PyTorch's
 * F.rms_norm, Hugging Face's LlamaRMSNorm):
 *   forward   rstd = 1/sqrt(sum(x^2)/M + eps), y = x * rstd * w
 *   backward  xhat = x * rstd, a = gy * w,
 *             gx = rstd * (a - xhat * mean(a * xhat)), gw = sum_rows(gy * xhat).
 * The sums of squares run in double over NB_RMS_LANES interleaved lanes
 * combined in a fixed order (vectorisable, thread-count independent).
 * Threads split rows for y and gx; gw is split by fixed column blocks, each
 * summing every row in order, as layer_norm.c does. */
#include <tgmath.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define NB_RMS_LANES 8
#define NB_RMS_COLS 64

typedef struct rms_job {
    char *out, *gx, *gw;
    const char *x, *gy, *w;
    char *rstd; /* written by the forward, read by the backward */
    int64_t rows, m;
    double eps;
} rms_job;

#define RMS_FUNCS(T, S)                                                                         \
    static double row_sumsq_##S(const T *x, int64_t m) {                                        \
        double acc[NB_RMS_LANES] = {0}, s = 0;                                                  \
        int64_t i = 0;                                                                          \
        for (; i + NB_RMS_LANES <= m; i += NB_RMS_LANES)                                        \
            for (int l = 0; l < NB_RMS_LANES; l++) acc[l] += (double)x[i + l] * (double)x[i + l]; \
        for (int l = 0; l < NB_RMS_LANES; l++) s += acc[l];                                     \
        for (; i < m; i++) s += (double)x[i] * (double)x[i];                                    \
        return s;                                                                               \
    }                                                                                           \
    static void rms_fwd_##S(void *arg, int64_t r0, int64_t r1) {                                \
        const rms_job *j = arg;                                                                 \
        int64_t m = j->m;                                                                       \
        const T *w = (const T *)j->w;                                                           \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->x + r * m;                                               \
            T *y = (T *)j->out + r * m;                                                         \
            double rs = 1 / sqrt(row_sumsq_##S(x, m) / (double)m + j->eps);                     \
            ((T *)j->rstd)[r] = (T)rs;                                                          \
            const T rt = (T)rs;                                                                 \
            if (w)                                                                              \
                for (int64_t i = 0; i < m; i++) y[i] = w[i] * (x[i] * rt);                      \
            else                                                                                \
                for (int64_t i = 0; i < m; i++) y[i] = x[i] * rt;                               \
        }                                                                                       \
    }                                                                                           \
    static void rms_bwd_rows_##S(void *arg, int64_t r0, int64_t r1) {                           \
        const rms_job *j = arg;                                                                 \
        int64_t m = j->m;                                                                       \
        const T *w = (const T *)j->w;                                                           \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->x + r * m, *gy = (const T *)j->gy + r * m;               \
            T *gx = (T *)j->gx + r * m;                                                         \
            const T rt = ((const T *)j->rstd)[r];                                               \
            double acc[NB_RMS_LANES] = {0}, s = 0;                                              \
            int64_t i = 0;                                                                      \
            for (; i + NB_RMS_LANES <= m; i += NB_RMS_LANES)                                    \
                for (int l = 0; l < NB_RMS_LANES; l++) {                                        \
                    T a = w ? gy[i + l] * w[i + l] : gy[i + l];                                 \
                    acc[l] += (double)(a * (x[i + l] * rt));                                    \
                }                                                                               \
            for (int l = 0; l < NB_RMS_LANES; l++) s += acc[l];                                 \
            for (; i < m; i++) {                                                                \
                T a = w ? gy[i] * w[i] : gy[i];                                                 \
                s += (double)(a * (x[i] * rt));                                                 \
            }                                                                                   \
            const T mx = (T)(s / (double)m);                                                    \
            for (i = 0; i < m; i++) {                                                           \
                T a = w ? gy[i] * w[i] : gy[i];                                                 \
                gx[i] = rt * (a - (x[i] * rt) * mx);                                            \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    static void rms_bwd_cols_##S(void *arg, int64_t u0, int64_t u1) {                           \
        const rms_job *j = arg;                                                                 \
        int64_t m = j->m;                                                                       \
        for (int64_t u = u0; u < u1; u++) {                                                     \
            int64_t c0 = u * NB_RMS_COLS, wd = m - c0 < NB_RMS_COLS ? m - c0 : NB_RMS_COLS;     \
            double acc[NB_RMS_COLS] = {0};                                                      \
            for (int64_t r = 0; r < j->rows; r++) {                                             \
                const T *x = (const T *)j->x + r * m + c0, *gy = (const T *)j->gy + r * m + c0; \
                const T rt = ((const T *)j->rstd)[r];                                           \
                for (int64_t c = 0; c < wd; c++) acc[c] += (double)(gy[c] * (x[c] * rt));       \
            }                                                                                   \
            for (int64_t c = 0; c < wd; c++) ((T *)j->gw)[c0 + c] = (T)acc[c];                  \
        }                                                                                       \
    }
RMS_FUNCS(float, f32)
RMS_FUNCS(double, f64)

nb_status nb_cpu_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                          const nb_kview *w, double eps) {
    (void)be; /* checked: backend/check/rms_norm.c */
    int64_t rows = x->shape[0], m = x->shape[1];
    if (rows == 0) return NB_OK;
    rms_job j = {.out = out->data, .x = x->data, .w = w ? w->data : NULL, .rstd = rstd->data, .rows = rows,
                 .m = m, .eps = eps};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / (m + 1) + 1, x->dtype == NB_F32 ? rms_fwd_f32 : rms_fwd_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                   const nb_kview *x, const nb_kview *w, const nb_kview *rstd) {
    (void)be; /* checked: backend/check/rms_norm.c */
    int64_t rows = x->shape[0], m = x->shape[1];
    bool f32 = x->dtype == NB_F32;
    rms_job j = {.gx = gx ? gx->data : NULL, .gw = gw ? gw->data : NULL, .x = x->data, .gy = gy->data,
                 .w = w ? w->data : NULL, .rstd = rstd->data, .rows = rows, .m = m};
    if (gx && rows > 0 && m > 0)
        nb_cpu_parallel_for(rows, NB_CPU_GRAIN / (2 * m + 1) + 1, f32 ? rms_bwd_rows_f32 : rms_bwd_rows_f64, &j);
    if (gw && m > 0) {
        int64_t units = (m + NB_RMS_COLS - 1) / NB_RMS_COLS;
        nb_cpu_parallel_for(units, NB_CPU_GRAIN / (NB_RMS_COLS * rows + 1) + 1,
                            f32 ? rms_bwd_cols_f32 : rms_bwd_cols_f64, &j);
    }
    return NB_OK;
}
