/* loss.c - the CPU's fused cross-entropy forward and backward over rows of
 * logits [n, c] (llm.c and ggml fuse them the same way): each row's
 * log-sum-exp runs sequentially in a fixed order (float32 exp NB_VLEN lanes
 * at a time, accumulated in double: nb_vsum_exp, the same bits at every
 * instruction-set level) and threads split rows, so results do not
 * depend on the thread count. Formulas (PyTorch's):
 *   loss_i = lse_i - x[i, t_i], glogits = gloss_i * (softmax_i - onehot(t_i)) */
#include <string.h>
#include <tgmath.h>
#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"
#include "unary_loops.h"

#define MAXF(x, y) ((x) != (x) || (x) > (y) ? (x) : (y))

/* ---- cross entropy ----------------------------------------------------------- */

typedef struct ce_job {
    const nb_kview *loss, *lse, *valid, *logits, *target, *gloss, *glogits;
    int64_t ignore_index;
} ce_job;

static int64_t target_at(const ce_job *j, int64_t i) {
    return ((const int64_t *)j->target->data)[i * j->target->strides[0]];
}

/* sum_i exp(x[i] - mx) (accumulated in double) and gx[i] = g * exp(x[i] - lse):
 * the float32 forms use the vector vexp (unary_loops.h), since libm's expf does not
 * vectorise and these rows are [tokens, vocab] wide (BERT: 30522). */
static double sum_exp_f64(const double *x, int64_t c, double mx) {
    double sum = 0;
    for (int64_t i = 0; i < c; i++) sum += exp(x[i] - mx);
    return sum;
}
static void scaled_exp_f64(double *gx, const double *x, int64_t c, double lse, double g) {
    for (int64_t i = 0; i < c; i++) gx[i] = g * exp(x[i] - lse);
}
static double row_max_f64(const double *x, int64_t c) {
    double mx = x[0];
    for (int64_t i = 1; i < c; i++) mx = MAXF(x[i], mx);
    return mx;
}
static float row_max_f32(const float *x, int64_t c) { return nb_vmax(x, c); }
static double sum_exp_f32(const float *x, int64_t c, float mx) { return nb_vsum_exp(x, c, mx, NULL); }
static void scaled_exp_f32(float *gx, const float *x, int64_t c, float lse, float g) {
    nb_vscaled_exp(gx, x, c, lse, g);
}

#define NB_TEMPLATE "loss.t.h"
#include "template_floats.h"

/* Every target in [0, c) or ignore_index, read on the host serially before
 * any work (the views: backend/check/loss.c). */
static nb_status check_targets(const char *name, const ce_job *j) {
    int64_t n = j->logits->shape[0], c = j->logits->shape[1];
    for (int64_t i = 0; i < n; i++) {
        int64_t ti = target_at(j, i);
        if (ti != j->ignore_index && (ti < 0 || ti >= c))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: target %lld out of range [0, %lld) at row %lld",
                                name, (long long)ti, (long long)c, (long long)i);
    }
    return NB_OK;
}

nb_status nb_cpu_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *valid,
                               const nb_kview *logits, const nb_kview *target, int64_t ignore_index) {
    if (nb_dtype_is_16bit(logits->dtype))
        return nb_cpu_cross_entropy16(be, loss, lse, valid, logits, target, ignore_index);
    ce_job j = {.loss = loss, .lse = lse, .valid = valid, .logits = logits, .target = target, .ignore_index = ignore_index};
    nb_status st = check_targets("cross_entropy", &j);
    if (st) return st;
    if (logits->shape[1] == 0) { /* no classes: every target was ignored */
        nb_cpu_fill(be, lse, -INFINITY);
        if (valid) nb_cpu_fill(be, valid, 0.0);
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
    if (nb_dtype_is_16bit(logits->dtype))
        return nb_cpu_cross_entropy_backward16(be, glogits, gloss, logits, lse, target, ignore_index);
    ce_job j = {.lse = lse, .logits = logits, .target = target, .gloss = gloss, .glogits = glogits,
                .ignore_index = ignore_index};
    nb_status st = check_targets("cross_entropy_backward", &j);
    if (st) return st;
    int64_t grain = NB_CPU_GRAIN / (logits->shape[1] + 1) + 1;
    nb_cpu_parallel_for(logits->shape[0], grain, logits->dtype == NB_F32 ? ceb_rows_f32 : ceb_rows_f64, &j);
    return NB_OK;
}
