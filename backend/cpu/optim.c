/* optim.c - CPU in-place Adam/AdamW and SGD updates, following PyTorch's
 * single-tensor implementations (torch/optim/adam.py _single_tensor_adam,
 * torch/optim/sgd.py _single_tensor_sgd) operation by operation, so float32
 * results track PyTorch's closely: scalar coefficients are computed once in
 * double, per-element math runs in the tensor's dtype, and each step is
 * written in the order of the ATen kernel it mirrors (lerp_, addcmul_,
 * addcdiv_, add_ with alpha). Threads split elements; each element's math is
 * independent, so results do not depend on the thread count. The
 * multi-tensor slots run the single-tensor kernel on each group (the same
 * bits by construction) once the shared check has seen every group. */
#include <math.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define NB_OPT_GRAIN 16384

typedef struct adam_job {
    char *p, *m, *v, *vmax;
    const char *g;
    const nb_adam_hyper *h;
    double lr_wd_decay, w1, b2, w2, step_size, bc2_sqrt;
} adam_job;

typedef struct sgd_job {
    char *p, *buf;
    const char *g;
    const nb_sgd_hyper *h;
} sgd_job;

#define OPTIM_FUNCS(T, S)                                                                       \
    static void adam_##S(void *arg, int64_t i0, int64_t i1) {                                   \
        const adam_job *j = arg;                                                                \
        const nb_adam_hyper *h = j->h;                                                          \
        /* restrict and hoisted flags: the loop must vectorise (memory-bound) */               \
        T *restrict p = (T *)j->p, *restrict m = (T *)j->m, *restrict v = (T *)j->v;            \
        T *restrict vmax = (T *)j->vmax;                                                        \
        const T *restrict grad = (const T *)j->g;                                               \
        const bool maximize = h->maximize, amsgrad = h->amsgrad;                                \
        const T wd = (T)h->weight_decay, decay = (T)j->lr_wd_decay, w1 = (T)j->w1;              \
        const T b2 = (T)j->b2, w2 = (T)j->w2, neg_step = (T)-j->step_size;                      \
        const T bc2_sqrt = (T)j->bc2_sqrt, eps = (T)h->eps;                                     \
        const bool l2 = !h->decoupled && h->weight_decay != 0;                                  \
        const bool decoupled = h->decoupled && h->weight_decay != 0;                            \
        const bool small = fabs(j->w1) < 0.5; /* torch's lerp picks its formula by weight */    \
        if (!maximize && !amsgrad && !l2 && small) { /* the common case, branch-free: vectorises */ \
            const T dec = decoupled ? decay : 1; /* p * 1 == p exactly: same bits as below */   \
            for (int64_t i = i0; i < i1; i++) {                                                 \
                T g = grad[i], pi = p[i] * dec;                                                 \
                T mi = m[i] + w1 * (g - m[i]), vi = v[i] * b2 + w2 * g * g;                     \
                m[i] = mi, v[i] = vi;                                                           \
                p[i] = pi + neg_step * mi / (sqrt##S(vi) / bc2_sqrt + eps);                     \
            }                                                                                   \
            return;                                                                             \
        }                                                                                       \
        for (int64_t i = i0; i < i1; i++) {                                                     \
            T g = maximize ? -grad[i] : grad[i];                                                \
            if (l2) g = g + wd * p[i];                                                          \
            if (decoupled) p[i] = p[i] * decay;                                                 \
            m[i] = small ? m[i] + w1 * (g - m[i]) : g - (g - m[i]) * (1 - w1);                  \
            v[i] = v[i] * b2 + w2 * g * g;                                                      \
            T vv = v[i];                                                                        \
            if (amsgrad) vv = vmax[i] = vmax[i] > vv || vmax[i] != vmax[i] ? vmax[i] : vv;   \
            T denom = sqrt##S(vv) / bc2_sqrt + eps;                                             \
            p[i] = p[i] + neg_step * m[i] / denom;                                              \
        }                                                                                       \
    }                                                                                           \
    static void sgd_##S(void *arg, int64_t i0, int64_t i1) {                                    \
        const sgd_job *j = arg;                                                                 \
        const nb_sgd_hyper *h = j->h;                                                           \
        T *p = (T *)j->p, *buf = (T *)j->buf;                                                   \
        const T *grad = (const T *)j->g;                                                        \
        const T wd = (T)h->weight_decay, mom = (T)h->momentum, damp = (T)(1 - h->dampening);    \
        const T neg_lr = (T)-h->lr;                                                             \
        for (int64_t i = i0; i < i1; i++) {                                                     \
            T g = h->maximize ? -grad[i] : grad[i];                                             \
            if (h->weight_decay != 0) g = g + wd * p[i];                                        \
            if (h->momentum != 0) {                                                             \
                buf[i] = h->first_step ? g : buf[i] * mom + damp * g;                           \
                g = h->nesterov ? g + mom * buf[i] : buf[i];                                    \
            }                                                                                   \
            p[i] = p[i] + neg_lr * g;                                                           \
        }                                                                                       \
    }
#define sqrtf32 sqrtf
#define sqrtf64 sqrt
OPTIM_FUNCS(float, f32)
OPTIM_FUNCS(double, f64)

/* ---- the views and h are checked before the call: backend/check/optim.c ---- */

nb_status nb_cpu_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                           const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    (void)be;
    double bc1 = 1 - pow(h->beta1, (double)h->step), bc2 = 1 - pow(h->beta2, (double)h->step);
    adam_job j = {
        .p = param->data, .m = exp_avg->data, .v = exp_avg_sq->data,
        .vmax = h->amsgrad ? max_exp_avg_sq->data : NULL, .g = grad->data, .h = h,
        .lr_wd_decay = 1 - h->lr * h->weight_decay, .w1 = 1 - h->beta1, .b2 = h->beta2,
        .w2 = 1 - h->beta2, .step_size = h->lr / bc1, .bc2_sqrt = sqrt(bc2),
    };
    nb_cpu_parallel_for(nb_view_numel(param), NB_OPT_GRAIN, param->dtype == NB_F32 ? adam_f32 : adam_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                          const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    (void)be;
    sgd_job j = {.p = param->data, .buf = h->momentum != 0 ? momentum_buf->data : NULL, .g = grad->data, .h = h};
    nb_cpu_parallel_for(nb_view_numel(param), NB_OPT_GRAIN, param->dtype == NB_F32 ? sgd_f32 : sgd_f64, &j);
    return NB_OK;
}

/* ---- multi-tensor forms: every group checked first (backend/check/optim.c), then one step each ---- */

nb_status nb_cpu_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                 const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h) {
    for (int i = 0; i < n; i++) {
        nb_status st = nb_cpu_adam_step(be, &params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i],
                                        h->amsgrad ? &max_exp_avg_sqs[i] : NULL, h);
        if (st) return st;
    }
    return NB_OK;
}

nb_status nb_cpu_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                const nb_kview *momentum_bufs, const nb_sgd_hyper *h) {
    for (int i = 0; i < n; i++) {
        nb_status st = nb_cpu_sgd_step(be, &params[i], &grads[i], h->momentum != 0 ? &momentum_bufs[i] : NULL, h);
        if (st) return st;
    }
    return NB_OK;
}
