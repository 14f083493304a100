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

#define LN_FUNCS(T, S)                                                                          \
    /* sum of f(x[i]) over a row in NB_LN_LANES fixed lanes */                                  \
    static double row_sum_##S(const T *x, int64_t m) {                                          \
        double acc[NB_LN_LANES] = {0}, s = 0;                                                   \
        int64_t i = 0;                                                                          \
        for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)                                          \
            for (int l = 0; l < NB_LN_LANES; l++) acc[l] += (double)x[i + l];                   \
        for (int l = 0; l < NB_LN_LANES; l++) s += acc[l];                                      \
        for (; i < m; i++) s += (double)x[i];                                                   \
        return s;                                                                               \
    }                                                                                           \
    static double row_sqdev_##S(const T *x, int64_t m, double mu) {                             \
        double acc[NB_LN_LANES] = {0}, s = 0;                                                   \
        int64_t i = 0;                                                                          \
        for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)                                          \
            for (int l = 0; l < NB_LN_LANES; l++) {                                             \
                double d = (double)x[i + l] - mu;                                               \
                acc[l] += d * d;                                                                \
            }                                                                                   \
        for (int l = 0; l < NB_LN_LANES; l++) s += acc[l];                                      \
        for (; i < m; i++) s += ((double)x[i] - mu) * ((double)x[i] - mu);                      \
        return s;                                                                               \
    }                                                                                           \
    static void ln_fwd_##S(void *arg, int64_t r0, int64_t r1) {                                 \
        const ln_job *j = arg;                                                                  \
        int64_t m = j->m;                                                                       \
        const T *w = (const T *)j->w, *b = (const T *)j->b;                                     \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->x + r * m;                                               \
            T *y = (T *)j->out + r * m;                                                         \
            double mu = row_sum_##S(x, m) / (double)m;                                          \
            double rs = 1 / sqrt(row_sqdev_##S(x, m, mu) / (double)m + j->eps);                 \
            ((T *)j->mean)[r] = (T)mu;                                                          \
            ((T *)j->rstd)[r] = (T)rs;                                                          \
            const T mt = (T)mu, rt = (T)rs;                                                     \
            if (w && b)                                                                         \
                for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt * w[i] + b[i];          \
            else if (w)                                                                         \
                for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt * w[i];                 \
            else if (b)                                                                         \
                for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt + b[i];                 \
            else                                                                                \
                for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt;                        \
        }                                                                                       \
    }                                                                                           \
    /* gx rows: the two row means in double lanes, then one fused pass */                       \
    static void ln_bwd_rows_##S(void *arg, int64_t r0, int64_t r1) {                            \
        const ln_job *j = arg;                                                                  \
        int64_t m = j->m;                                                                       \
        const T *w = (const T *)j->w;                                                           \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->x + r * m, *gy = (const T *)j->gy + r * m;               \
            T *gx = (T *)j->gx + r * m;                                                         \
            const T mt = ((const T *)j->mean)[r], rt = ((const T *)j->rstd)[r];                 \
            double sa[NB_LN_LANES] = {0}, sax[NB_LN_LANES] = {0}, s1 = 0, s2 = 0;               \
            int64_t i = 0;                                                                      \
            for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)                                      \
                for (int l = 0; l < NB_LN_LANES; l++) {                                         \
                    T a = w ? gy[i + l] * w[i + l] : gy[i + l];                                 \
                    T xh = (x[i + l] - mt) * rt;                                                \
                    sa[l] += (double)a;                                                         \
                    sax[l] += (double)(a * xh);                                                 \
                }                                                                               \
            for (int l = 0; l < NB_LN_LANES; l++) s1 += sa[l], s2 += sax[l];                    \
            for (; i < m; i++) {                                                                \
                T a = w ? gy[i] * w[i] : gy[i];                                                 \
                s1 += (double)a;                                                                \
                s2 += (double)(a * ((x[i] - mt) * rt));                                         \
            }                                                                                   \
            const T ma = (T)(s1 / (double)m), mx = (T)(s2 / (double)m);                       \
            for (i = 0; i < m; i++) {                                                           \
                T a = w ? gy[i] * w[i] : gy[i];                                                 \
                T xh = (x[i] - mt) * rt;                                                        \
                gx[i] = rt * (a - ma - xh * mx);                                              \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    /* gw, gb: column blocks c0..; every row summed in order */                                 \
    static void ln_bwd_cols_##S(void *arg, int64_t u0, int64_t u1) {                            \
        const ln_job *j = arg;                                                                  \
        int64_t m = j->m;                                                                       \
        for (int64_t u = u0; u < u1; u++) {                                                     \
            int64_t c0 = u * NB_LN_COLS, wd = m - c0 < NB_LN_COLS ? m - c0 : NB_LN_COLS;        \
            double accw[NB_LN_COLS] = {0}, accb[NB_LN_COLS] = {0};                              \
            for (int64_t r = 0; r < j->rows; r++) {                                             \
                const T *x = (const T *)j->x + r * m + c0, *gy = (const T *)j->gy + r * m + c0; \
                const T mt = ((const T *)j->mean)[r], rt = ((const T *)j->rstd)[r];             \
                for (int64_t c = 0; c < wd; c++) {                                              \
                    accw[c] += (double)(gy[c] * ((x[c] - mt) * rt));                            \
                    accb[c] += (double)gy[c];                                                   \
                }                                                                               \
            }                                                                                   \
            if (j->gw)                                                                          \
                for (int64_t c = 0; c < wd; c++) ((T *)j->gw)[c0 + c] = (T)accw[c];             \
            if (j->gb)                                                                          \
                for (int64_t c = 0; c < wd; c++) ((T *)j->gb)[c0 + c] = (T)accb[c];             \
        }                                                                                       \
    }
LN_FUNCS(float, f32)
LN_FUNCS(double, f64)

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
