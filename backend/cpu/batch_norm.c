/* batch_norm.c - CPU batch norm forward and backward over x [N, C, *] (contiguous),
 * per channel C with M = N * prod(*) values each (torch.nn.functional.
 * batch_norm; formulas from PyTorch's BatchNorm doc and its CPU kernel):
 *   training: mean = sum(x)/M, var = sum((x - mean)^2)/M (biased, two passes),
 *             invstd = 1/sqrt(var + eps), saved for backward; running stats
 *             r = (1 - momentum) r + momentum stat, with var * M/(M-1)
 *   eval:     mean, var from the running statistics
 *   y = (x - mean) * invstd * w + b, computed as x * scale + shift
 *   backward, training: gx = w*invstd * (gy - sum(gy)/M - xhat * sum(gy*xhat)/M)
 *             eval:     gx = gy * w * invstd
 *             gweight = sum(gy * xhat), gbias = sum(gy)
 * Determinism: threads split channels (static partition), and every sum
 * accumulates in double in a fixed order: with spatial dims, plane by plane
 * and inside a plane over 8 interleaved lanes combined in a fixed tree (so
 * the loop vectorises); for x [N, C] (no spatial dims), down each column,
 * walking rows over blocks of 64 channels so reads stay contiguous. The bits
 * never depend on the thread count.
 */
#include <math.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define BN_LANES 8

typedef struct bn_job {
    char *out;               /* y (forward) or gx (backward; NULL: skip) */
    const char *x, *gy;      /* gy: backward only */
    nb_dtype dt;
    const nb_kview *weight, *bias, *save_mean, *save_invstd, *rmean, *rvar, *gweight, *gbias;
    int64_t N, C, S; /* x is [N, C, S] */
    bool training;
    double momentum, eps;
} bn_job;

/* One per-channel value as double (views are [C] and contiguous, checked). */
static double chan_get(const nb_kview *v, int64_t c) {
    return v->dtype == NB_F32 ? (double)((const float *)v->data)[c] : ((const double *)v->data)[c];
}
static void chan_set(const nb_kview *v, int64_t c, double val) {
    if (v->dtype == NB_F32) ((float *)v->data)[c] = (float)val;
    else ((double *)v->data)[c] = val;
}

static double lanes_total(const double *a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* Per-plane sums in a fixed lane order:
 *   sum_S:   sum(x)
 *   sqdev_S: sum((x - mean)^2)
 *   gsums_S: sum(g) and sum(g * (x - mean))
 * apply_S writes y = x * scale + shift; gx_S writes
 * gx = (gy - gmean - (x - mean) * k) * wi (k = gmean = 0 in eval). */
#define NB_TEMPLATE "batch_norm.t.h"
#include "template_floats.h"

/* ---- per-channel coefficients (shared by the plane and row paths) -------- */

/* Forward: from channel c's batch mean and biased variance (ignored in
 * eval) to y = x * scale + shift; in training also writes save_mean/invstd
 * and updates the running stats (an empty batch leaves them alone). */
static void fwd_coeffs(const bn_job *j, int64_t c, double mean, double var, double *scale, double *shift) {
    int64_t M = j->N * j->S;
    double invstd;
    if (j->training) {
        invstd = 1.0 / sqrt(var + j->eps);
        chan_set(j->save_mean, c, mean);
        chan_set(j->save_invstd, c, invstd);
        if (j->rmean && M > 0) {
            double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : NAN;
            chan_set(j->rmean, c, (1 - j->momentum) * chan_get(j->rmean, c) + j->momentum * mean);
            chan_set(j->rvar, c, (1 - j->momentum) * chan_get(j->rvar, c) + j->momentum * unbiased);
        }
    } else {
        mean = chan_get(j->rmean, c);
        invstd = 1.0 / sqrt(chan_get(j->rvar, c) + j->eps);
    }
    double w = j->weight ? chan_get(j->weight, c) : 1.0, b = j->bias ? chan_get(j->bias, c) : 0.0;
    *scale = w * invstd;
    *shift = b - mean * *scale;
}

/* Backward: the statistics the forward normalised channel c with. */
static void bwd_stats(const bn_job *j, int64_t c, double *mean, double *invstd) {
    if (j->training) *mean = chan_get(j->save_mean, c), *invstd = chan_get(j->save_invstd, c);
    else *mean = chan_get(j->rmean, c), *invstd = 1.0 / sqrt(chan_get(j->rvar, c) + j->eps);
}

static bool bwd_needs_sums(const bn_job *j) { return j->gweight || j->gbias || (j->out && j->training); }

/* Backward: from sg = sum(gy), sgx = sum(gy * (x - mean)) to gweight, gbias
 * and the gx coefficients gx = (gy - gmean - (x - mean) * k) * wi. */
static void bwd_coeffs(const bn_job *j, int64_t c, double invstd, double sg, double sgx, double *gmean, double *k,
                       double *wi) {
    int64_t M = j->N * j->S;
    if (j->gweight) chan_set(j->gweight, c, sgx * invstd);
    if (j->gbias) chan_set(j->gbias, c, sg);
    *wi = (j->weight ? chan_get(j->weight, c) : 1.0) * invstd;
    *gmean = j->training && M > 0 ? sg / (double)M : 0;
    *k = j->training && M > 0 ? sgx * invstd * invstd / (double)M : 0;
}

/* ---- planes: x [N, C, S] with S > 1, threads split channels --------------- */

/* Byte offset of channel c's plane n. */
static int64_t plane_off(const bn_job *j, int64_t n, int64_t c) {
    return (n * j->C + c) * j->S * (int64_t)nb_dtype_size(j->dt);
}

/* Batch mean and biased variance of channel c (M > 0). */
static void channel_stats(const bn_job *j, int64_t c, double *mean, double *var) {
    bool f32 = j->dt == NB_F32;
    double M = (double)(j->N * j->S), s = 0, v = 0;
    for (int64_t n = 0; n < j->N; n++) {
        const char *p = j->x + plane_off(j, n, c);
        s += f32 ? sum_f32((const float *)p, j->S) : sum_f64((const double *)p, j->S);
    }
    double m = s / M;
    for (int64_t n = 0; n < j->N; n++) {
        const char *p = j->x + plane_off(j, n, c);
        v += f32 ? sqdev_f32((const float *)p, j->S, m) : sqdev_f64((const double *)p, j->S, m);
    }
    *mean = m;
    *var = v / M;
}

static void bn_forward_planes(void *arg, int64_t c0, int64_t c1) {
    const bn_job *j = arg;
    for (int64_t c = c0; c < c1; c++) {
        double mean = 0, var = 0, scale, shift;
        if (j->training && j->N * j->S > 0) channel_stats(j, c, &mean, &var);
        fwd_coeffs(j, c, mean, var, &scale, &shift);
        for (int64_t n = 0; n < j->N; n++) {
            int64_t off = plane_off(j, n, c);
            if (j->dt == NB_F32)
                apply_f32((float *)(j->out + off), (const float *)(j->x + off), j->S, (float)scale, (float)shift);
            else
                apply_f64((double *)(j->out + off), (const double *)(j->x + off), j->S, scale, shift);
        }
    }
}

static void bn_backward_planes(void *arg, int64_t c0, int64_t c1) {
    const bn_job *j = arg;
    bool f32 = j->dt == NB_F32;
    for (int64_t c = c0; c < c1; c++) {
        double mean, invstd, sg = 0, sgx = 0, gmean, k, wi;
        bwd_stats(j, c, &mean, &invstd);
        if (bwd_needs_sums(j))
            for (int64_t n = 0; n < j->N; n++) {
                int64_t off = plane_off(j, n, c);
                if (f32) gsums_f32((const float *)(j->gy + off), (const float *)(j->x + off), j->S, mean, &sg, &sgx);
                else gsums_f64((const double *)(j->gy + off), (const double *)(j->x + off), j->S, mean, &sg, &sgx);
            }
        bwd_coeffs(j, c, invstd, sg, sgx, &gmean, &k, &wi);
        if (!j->out) continue;
        for (int64_t n = 0; n < j->N; n++) {
            int64_t off = plane_off(j, n, c);
            if (f32)
                gx_f32((float *)(j->out + off), (const float *)(j->gy + off), (const float *)(j->x + off), j->S,
                       (float)mean, (float)gmean, (float)k, (float)wi, j->training);
            else
                gx_f64((double *)(j->out + off), (const double *)(j->gy + off), (const double *)(j->x + off), j->S,
                       mean, gmean, k, wi, j->training);
        }
    }
}

/* ---- rows: x [N, C] (S == 1), threads split blocks of BN_COLS channels ----
 * Each channel is a strided column; walking rows keeps reads contiguous,
 * and each channel still sums its column top to bottom, in a fixed order. */
#define BN_COLS 64

#define NB_TEMPLATE "batch_norm_rows.t.h"
#include "template_floats.h"

static void bn_rows_chunk(const bn_job *j, int64_t b0, int64_t b1, bool backward) {
    for (int64_t b = b0; b < b1; b++) {
        int64_t c0 = b * BN_COLS, w = j->C - c0 < BN_COLS ? j->C - c0 : BN_COLS;
        if (j->dt == NB_F32) (backward ? rows_bwd_f32 : rows_fwd_f32)(j, c0, w);
        else (backward ? rows_bwd_f64 : rows_fwd_f64)(j, c0, w);
    }
}
static void bn_forward_rows(void *arg, int64_t b0, int64_t b1) { bn_rows_chunk(arg, b0, b1, false); }
static void bn_backward_rows(void *arg, int64_t b0, int64_t b1) { bn_rows_chunk(arg, b0, b1, true); }

static void job_geometry(bn_job *j, const nb_kview *x) {
    j->x = x->data;
    j->dt = x->dtype;
    j->N = x->shape[0];
    j->C = x->shape[1];
    j->S = 1;
    for (int d = 2; d < x->ndim; d++) j->S *= x->shape[d];
}

static void run_channels(const bn_job *j, bool backward) {
    int64_t M = j->N * j->S;
    if (j->C == 0) return;
    if (j->S == 1) {
        int64_t blocks = (j->C + BN_COLS - 1) / BN_COLS;
        nb_cpu_parallel_for(blocks, NB_CPU_GRAIN / (M * BN_COLS + 1) + 1, backward ? bn_backward_rows : bn_forward_rows,
                            (void *)j);
    } else {
        nb_cpu_parallel_for(j->C, NB_CPU_GRAIN / (M + 1) + 1, backward ? bn_backward_planes : bn_forward_planes,
                            (void *)j);
    }
}

nb_status nb_cpu_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean,
                            const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    (void)be; /* checked: backend/check/batch_norm.c */
    const nb_kview *x = a->x, *weight = a->weight, *bias = a->bias, *running_mean = a->running_mean,
                   *running_var = a->running_var;
    bool training = a->training;
    double momentum = a->momentum, eps = a->eps;
    bn_job j = {.out = out->data, .weight = weight, .bias = bias, .save_mean = save_mean,
                .save_invstd = save_invstd, .rmean = running_mean, .rvar = running_var,
                .training = training, .momentum = momentum, .eps = eps};
    job_geometry(&j, x);
    run_channels(&j, false);
    return NB_OK;
}

nb_status nb_cpu_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight,
                                     const nb_kview *gbias, const nb_kview *gy, const nb_kview *save_mean,
                                     const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    (void)be; /* checked: backend/check/batch_norm.c */
    const nb_kview *x = a->x, *weight = a->weight, *running_mean = a->running_mean, *running_var = a->running_var;
    bool training = a->training;
    double eps = a->eps;
    bn_job j = {.out = gx ? gx->data : NULL, .gy = gy->data, .weight = weight, .save_mean = save_mean,
                .save_invstd = save_invstd, .rmean = running_mean, .rvar = running_var, .gweight = gweight,
                .gbias = gbias, .training = training, .eps = eps};
    job_geometry(&j, x);
    run_channels(&j, true);
    return NB_OK;
}
