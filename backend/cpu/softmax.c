/* softmax.c - CPU softmax / log_softmax along a dim and their backward, and
 * the fused cross-entropy forward and backward (llm.c and ggml fuse them
 * the same way). A contiguous tensor is seen as [outer, size, inner] around
 * dim: with inner == 1 each row is contiguous; otherwise blocks of up to
 * NB_SM_COLS neighbouring columns are processed together so memory is read
 * in rows. Every reduction over `size` runs sequentially in a fixed order
 * (float32 accumulates in double) and threads split rows or column blocks,
 * so results do not depend on the thread count. Formulas (PyTorch's):
 *   softmax y = exp(x - max) / sum exp(x - max)
 *   log_softmax y = (x - max) - log(sum exp(x - max))
 *   softmax backward gx = y * (gy - sum(gy * y))
 *   log_softmax backward gx = gy - exp(y) * sum(gy)
 *   cross entropy loss_i = lse_i - x[i, t_i], glogits = gloss_i * (softmax_i - onehot(t_i)) */
#include <string.h>
#include <tgmath.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "nb_impl.h"
#include "pool.h"
#include "unary_loops.h"

#define NB_SM_COLS 64

typedef struct sm_job {
    char *out;             /* y (forward) or gx (backward) */
    const char *x, *y, *g; /* x (forward); y and gy (backward) */
    int64_t outer, size, inner, ncb;
    bool log;
} sm_job;

#define MAXF(x, y) ((x) != (x) || (x) > (y) ? (x) : (y))

#define SOFTMAX_FUNCS(T, S)                                                                     \
    /* forward, inner == 1: rows r0..r1 */                                                      \
    static void sm_rows_##S(void *arg, int64_t r0, int64_t r1) {                                \
        const sm_job *j = arg;                                                                  \
        int64_t n = j->size;                                                                    \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->x + r * n;                                               \
            T *y = (T *)j->out + r * n, mx = x[0];                                              \
            for (int64_t i = 1; i < n; i++) mx = MAXF(x[i], mx);                                \
            double sum = 0;                                                                     \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T e = exp(x[i] - mx);                                                           \
                if (!j->log) y[i] = e;                                                          \
                sum += e;                                                                       \
            }                                                                                   \
            if (j->log) {                                                                       \
                T ls = (T)log(sum);                                                             \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mx) - ls;                        \
            } else {                                                                            \
                T inv = (T)(1 / sum);                                                           \
                for (int64_t i = 0; i < n; i++) y[i] *= inv;                                    \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    /* forward, inner > 1: units (outer row, column block) */                                  \
    static void sm_cols_##S(void *arg, int64_t u0, int64_t u1) {                                \
        const sm_job *j = arg;                                                                  \
        int64_t n = j->size, in = j->inner;                                                     \
        for (int64_t u = u0; u < u1; u++) {                                                     \
            int64_t o = u / j->ncb, c0 = (u % j->ncb) * NB_SM_COLS;                             \
            int64_t w = in - c0 < NB_SM_COLS ? in - c0 : NB_SM_COLS;                            \
            const T *x = (const T *)j->x + o * n * in + c0;                                     \
            T *y = (T *)j->out + o * n * in + c0, mx[NB_SM_COLS], ls[NB_SM_COLS];               \
            double sum[NB_SM_COLS];                                                             \
            for (int64_t c = 0; c < w; c++) mx[c] = x[c], sum[c] = 0;                           \
            for (int64_t i = 1; i < n; i++)                                                     \
                for (int64_t c = 0; c < w; c++) mx[c] = MAXF(x[i * in + c], mx[c]);             \
            for (int64_t i = 0; i < n; i++)                                                     \
                for (int64_t c = 0; c < w; c++) {                                               \
                    T e = exp(x[i * in + c] - mx[c]);                                           \
                    if (!j->log) y[i * in + c] = e;                                             \
                    sum[c] += e;                                                                \
                }                                                                               \
            for (int64_t c = 0; c < w; c++) ls[c] = j->log ? (T)log(sum[c]) : (T)(1 / sum[c]);  \
            for (int64_t i = 0; i < n; i++)                                                     \
                for (int64_t c = 0; c < w; c++) {                                               \
                    if (j->log) y[i * in + c] = (x[i * in + c] - mx[c]) - ls[c];                \
                    else y[i * in + c] *= ls[c];                                                \
                }                                                                               \
        }                                                                                       \
    }                                                                                           \
    static void smb_rows_##S(void *arg, int64_t r0, int64_t r1) {                               \
        const sm_job *j = arg;                                                                  \
        int64_t n = j->size;                                                                    \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *y = (const T *)j->y + r * n, *g = (const T *)j->g + r * n;                 \
            T *gx = (T *)j->out + r * n;                                                        \
            double acc = 0;                                                                     \
            for (int64_t i = 0; i < n; i++) acc += j->log ? g[i] : g[i] * y[i];                 \
            T s = (T)acc;                                                                       \
            for (int64_t i = 0; i < n; i++) gx[i] = j->log ? g[i] - exp(y[i]) * s : y[i] * (g[i] - s); \
        }                                                                                       \
    }                                                                                           \
    static void smb_cols_##S(void *arg, int64_t u0, int64_t u1) {                               \
        const sm_job *j = arg;                                                                  \
        int64_t n = j->size, in = j->inner;                                                     \
        for (int64_t u = u0; u < u1; u++) {                                                     \
            int64_t o = u / j->ncb, c0 = (u % j->ncb) * NB_SM_COLS, off = o * n * in + c0;      \
            int64_t w = in - c0 < NB_SM_COLS ? in - c0 : NB_SM_COLS;                            \
            const T *y = (const T *)j->y + off, *g = (const T *)j->g + off;                     \
            T *gx = (T *)j->out + off, s[NB_SM_COLS];                                           \
            double acc[NB_SM_COLS] = {0};                                                       \
            for (int64_t i = 0; i < n; i++)                                                     \
                for (int64_t c = 0; c < w; c++)                                                 \
                    acc[c] += j->log ? g[i * in + c] : g[i * in + c] * y[i * in + c];           \
            for (int64_t c = 0; c < w; c++) s[c] = (T)acc[c];                                   \
            for (int64_t i = 0; i < n; i++)                                                     \
                for (int64_t c = 0; c < w; c++) {                                               \
                    int64_t e = i * in + c;                                                     \
                    gx[e] = j->log ? g[e] - exp(y[e]) * s[c] : y[e] * (g[e] - s[c]);            \
                }                                                                               \
        }                                                                                       \
    }
SOFTMAX_FUNCS(float, f32)
SOFTMAX_FUNCS(double, f64)

/* Fills the [outer, size, inner] geometry; checks views, dtypes and dim. */
static nb_status sm_setup(const char *name, sm_job *j, const nb_kview *const *v, int nv, int dim) {
    char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
    const nb_kview *a = v[0];
    if (dim < 0 || dim >= a->ndim)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %s", name, dim,
                            nb_cpu_view_str(a, b1, sizeof b1));
    for (int i = 0; i < nv; i++) {
        if (!nb_cpu_same_shape(a, v[i]))
            return nb_set_error(NB_ERR_SHAPE, "%s: shapes %s and %s differ", name,
                                nb_cpu_view_str(a, b1, sizeof b1), nb_cpu_view_str(v[i], b2, sizeof b2));
        if (!nb_dtype_is_compute_float(v[i]->dtype) || v[i]->dtype != a->dtype)
            return nb_set_error(NB_ERR_DTYPE, "%s: needs float32 or float64 tensors of one dtype (%s, %s)",
                                name, nb_dtype_name(a->dtype), nb_dtype_name(v[i]->dtype));
        if (!nb_cpu_is_contiguous(v[i]))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be contiguous", name,
                                nb_cpu_view_str(v[i], b1, sizeof b1));
    }
    j->outer = j->inner = 1;
    for (int d = 0; d < dim; d++) j->outer *= a->shape[d];
    for (int d = dim + 1; d < a->ndim; d++) j->inner *= a->shape[d];
    j->size = a->shape[dim];
    j->ncb = (j->inner + NB_SM_COLS - 1) / NB_SM_COLS;
    return NB_OK;
}

static void sm_launch(sm_job *j, bool f32, nb_cpu_range_fn rows32, nb_cpu_range_fn rows64,
                      nb_cpu_range_fn cols32, nb_cpu_range_fn cols64) {
    if (j->outer * j->size * j->inner == 0) return;
    if (j->inner == 1)
        nb_cpu_parallel_for(j->outer, NB_CPU_GRAIN / j->size + 1, f32 ? rows32 : rows64, j);
    else
        nb_cpu_parallel_for(j->outer * j->ncb, NB_CPU_GRAIN / (j->size * NB_SM_COLS) + 1,
                            f32 ? cols32 : cols64, j);
}

nb_status nb_cpu_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log) {
    (void)be;
    sm_job j = {.out = out->data, .x = x->data, .log = log};
    const nb_kview *v[2] = {x, out};
    nb_status st = sm_setup(log ? "log_softmax" : "softmax", &j, v, 2, dim);
    if (st) return st;
    sm_launch(&j, x->dtype == NB_F32, sm_rows_f32, sm_rows_f64, sm_cols_f32, sm_cols_f64);
    return NB_OK;
}

nb_status nb_cpu_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *y, int dim, bool log) {
    (void)be;
    sm_job j = {.out = gx->data, .y = y->data, .g = gy->data, .log = log};
    const nb_kview *v[3] = {y, gy, gx};
    nb_status st = sm_setup(log ? "log_softmax_backward" : "softmax_backward", &j, v, 3, dim);
    if (st) return st;
    sm_launch(&j, y->dtype == NB_F32, smb_rows_f32, smb_rows_f64, smb_cols_f32, smb_cols_f64);
    return NB_OK;
}

/* ---- cross entropy ----------------------------------------------------------- */

typedef struct ce_job {
    const nb_kview *loss, *lse, *logits, *target, *gloss, *glogits;
    int64_t ignore_index;
} ce_job;

static int64_t target_at(const ce_job *j, int64_t i) {
    return ((const int64_t *)j->target->data)[i * j->target->strides[0]];
}

/* sum_i exp(x[i] - mx) (accumulated in double) and gx[i] = g * exp(x[i] - lse):
 * the float32 forms use the 4-lane vexp, since libm's expf does not
 * vectorise and these rows are [tokens, vocab] wide (BERT: 30522). */
static double sum_exp_f64(const double *x, int64_t c, double mx) {
    double sum = 0;
    for (int64_t i = 0; i < c; i++) sum += exp(x[i] - mx);
    return sum;
}
static void scaled_exp_f64(double *gx, const double *x, int64_t c, double lse, double g) {
    for (int64_t i = 0; i < c; i++) gx[i] = g * exp(x[i] - lse);
}
static double sum_exp_f32(const float *x, int64_t c, float mx) {
    double s[4] = {0, 0, 0, 0}, sum = 0;
    int64_t i = 0;
    for (; i + 4 <= c; i += 4) {
        v4f v;
        memcpy(&v, x + i, sizeof v);
        v4f e = vexp(v - mx);
        for (int k = 0; k < 4; k++) s[k] += e[k];
    }
    for (; i < c; i++) sum += expf(x[i] - mx);
    return sum + ((s[0] + s[1]) + (s[2] + s[3]));
}
static void scaled_exp_f32(float *gx, const float *x, int64_t c, float lse, float g) {
    int64_t i = 0;
    for (; i + 4 <= c; i += 4) {
        v4f v;
        memcpy(&v, x + i, sizeof v);
        v = g * vexp(v - lse);
        memcpy(gx + i, &v, sizeof v);
    }
    for (; i < c; i++) gx[i] = g * expf(x[i] - lse);
}

#define CE_FUNCS(T, S)                                                                          \
    static void ce_rows_##S(void *arg, int64_t r0, int64_t r1) {                                \
        const ce_job *j = arg;                                                                  \
        int64_t c = j->logits->shape[1];                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->logits->data + r * c;                                    \
            T mx = x[0];                                                                        \
            for (int64_t i = 1; i < c; i++) mx = MAXF(x[i], mx);                                \
            T lse = mx + (T)log(sum_exp_##S(x, c, mx));                                         \
            int64_t t = target_at(j, r);                                                        \
            ((T *)j->lse->data)[r * j->lse->strides[0]] = lse;                                  \
            ((T *)j->loss->data)[r * j->loss->strides[0]] = t == j->ignore_index ? 0 : lse - x[t]; \
        }                                                                                       \
    }                                                                                           \
    static void ceb_rows_##S(void *arg, int64_t r0, int64_t r1) {                               \
        const ce_job *j = arg;                                                                  \
        int64_t c = j->logits->shape[1];                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const T *x = (const T *)j->logits->data + r * c;                                    \
            T *gx = (T *)j->glogits->data + r * c;                                              \
            int64_t t = target_at(j, r);                                                        \
            if (t == j->ignore_index) {                                                         \
                for (int64_t i = 0; i < c; i++) gx[i] = 0;                                      \
                continue;                                                                       \
            }                                                                                   \
            T g = ((const T *)j->gloss->data)[r * j->gloss->strides[0]];                        \
            T lse = ((const T *)j->lse->data)[r * j->lse->strides[0]];                          \
            scaled_exp_##S(gx, x, c, lse, g);                                                   \
            gx[t] -= g;                                                                         \
        }                                                                                       \
    }
CE_FUNCS(float, f32)
CE_FUNCS(double, f64)

/* Checks geometry and dtypes, then every target (serially, before any work). */
static nb_status ce_check(const char *name, const ce_job *j, const nb_kview *const *rows, int nrows,
                          const nb_kview *mat2) {
    char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
    const nb_kview *x = j->logits, *t = j->target;
    if (x->ndim != 2 || !nb_dtype_is_compute_float(x->dtype) || !nb_cpu_is_contiguous(x) ||
        (mat2 && (!nb_cpu_same_shape(x, mat2) || mat2->dtype != x->dtype || !nb_cpu_is_contiguous(mat2))))
        return nb_set_error(NB_ERR_SHAPE, "%s: logits %s must be a contiguous float [n, c] matrix",
                            name, nb_cpu_view_str(x, b1, sizeof b1));
    int64_t n = x->shape[0], c = x->shape[1];
    if (t->ndim != 1 || t->shape[0] != n || t->dtype != NB_I64)
        return nb_set_error(NB_ERR_SHAPE, "%s: target %s must be int64 [%lld] for logits %s", name,
                            nb_cpu_view_str(t, b1, sizeof b1), (long long)n, nb_cpu_view_str(x, b2, sizeof b2));
    for (int i = 0; i < nrows; i++)
        if (rows[i]->ndim != 1 || rows[i]->shape[0] != n || rows[i]->dtype != x->dtype)
            return nb_set_error(NB_ERR_SHAPE, "%s: per-row tensor %s must be %s [%lld]", name,
                                nb_cpu_view_str(rows[i], b1, sizeof b1), nb_dtype_name(x->dtype),
                                (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t ti = target_at(j, i);
        if (ti != j->ignore_index && (ti < 0 || ti >= c))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: target %lld out of range [0, %lld) at row %lld",
                                name, (long long)ti, (long long)c, (long long)i);
    }
    return NB_OK;
}

nb_status nb_cpu_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse,
                               const nb_kview *logits, const nb_kview *target, int64_t ignore_index) {
    (void)be;
    ce_job j = {.loss = loss, .lse = lse, .logits = logits, .target = target, .ignore_index = ignore_index};
    const nb_kview *rows[2] = {loss, lse};
    nb_status st = ce_check("cross_entropy", &j, rows, 2, NULL);
    if (st) return st;
    if (logits->shape[1] == 0) { /* no classes: every target was ignored */
        nb_cpu_fill(be, lse, -INFINITY);
        return nb_cpu_fill(be, loss, 0.0);
    }
    int64_t grain = NB_CPU_GRAIN / logits->shape[1] + 1;
    nb_cpu_parallel_for(logits->shape[0], grain, logits->dtype == NB_F32 ? ce_rows_f32 : ce_rows_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_cross_entropy_backward(nb_backend *be, const nb_kview *glogits,
                                        const nb_kview *gloss, const nb_kview *logits,
                                        const nb_kview *lse, const nb_kview *target,
                                        int64_t ignore_index) {
    (void)be;
    ce_job j = {.lse = lse, .logits = logits, .target = target, .gloss = gloss, .glogits = glogits,
                .ignore_index = ignore_index};
    const nb_kview *rows[2] = {gloss, lse};
    nb_status st = ce_check("cross_entropy_backward", &j, rows, 2, glogits);
    if (st) return st;
    int64_t grain = NB_CPU_GRAIN / (logits->shape[1] + 1) + 1;
    nb_cpu_parallel_for(logits->shape[0], grain, logits->dtype == NB_F32 ? ceb_rows_f32 : ceb_rows_f64, &j);
    return NB_OK;
}
