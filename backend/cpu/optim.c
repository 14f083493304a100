/* optim.c - CPU in-place Adam/AdamW and SGD updates, following PyTorch's
 * single-tensor implementations (torch/optim/adam.py _single_tensor_adam,
 * torch/optim/sgd.py _single_tensor_sgd) operation by operation, so float32
 * results track PyTorch's closely: scalar coefficients are computed once in
 * double, per-element math runs in the tensor's dtype, and each step is
 * written in the order of the ATen kernel it mirrors (lerp_, addcmul_,
 * addcdiv_, add_ with alpha); the element updates are nb_scalar_math.h's,
 * which CUDA runs with the same bits. Threads split elements; each element's math is
 * independent, so results do not depend on the thread count. The
 * multi-tensor slots run the single-tensor kernel on each group (the same
 * bits by construction) once the shared check has seen every group. */
#include <math.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "threadpool.h"

#define NB_OPT_GRAIN 16384

typedef struct adam_job {
    char *p, *m, *v, *vmax;
    const char *g;
    union {
        nb_sm_adam_coef_f32 f32;
        nb_sm_adam_coef_f64 f64;
    } c;
} adam_job;

typedef struct sgd_job {
    char *p, *buf;
    const char *g;
    union {
        nb_sm_sgd_coef_f32 f32;
        nb_sm_sgd_coef_f64 f64;
    } c;
} sgd_job;

#define NB_TEMPLATE "optim.t.h"
#include "template_floats.h"

/* ---- the views and h are checked before the call: backend/check/optim.c ---- */

nb_status nb_cpu_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                           const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    (void)be;
    adam_job j = {.p = param->data, .m = exp_avg->data, .v = exp_avg_sq->data,
                  .vmax = h->amsgrad ? max_exp_avg_sq->data : NULL, .g = grad->data};
    if (param->dtype == NB_F32) j.c.f32 = nb_sm_adam_prep_f32(h, h->lr, (double)h->step);
    else j.c.f64 = nb_sm_adam_prep_f64(h, h->lr, (double)h->step);
    nb_cpu_parallel_for(nb_view_numel(param), NB_OPT_GRAIN, param->dtype == NB_F32 ? adam_f32 : adam_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                          const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    (void)be;
    sgd_job j = {.p = param->data, .buf = h->momentum != 0 ? momentum_buf->data : NULL, .g = grad->data};
    if (param->dtype == NB_F32) j.c.f32 = nb_sm_sgd_prep_f32(h, h->lr);
    else j.c.f64 = nb_sm_sgd_prep_f64(h, h->lr);
    nb_cpu_parallel_for(nb_view_numel(param), NB_OPT_GRAIN, param->dtype == NB_F32 ? sgd_f32 : sgd_f64, &j);
    return NB_OK;
}

/* ---- multi-tensor forms: every group checked first (backend/check/optim.c), then one step each ---- */

nb_status nb_cpu_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                 const nb_kview *max_exp_avg_sqs, const nb_kview *copies, const nb_adam_hyper *h) {
    for (int i = 0; i < n; i++) {
        nb_status st = nb_cpu_adam_step(be, &params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i],
                                        h->amsgrad ? &max_exp_avg_sqs[i] : NULL, h);
        /* the 16-bit copy by the copy slot's kernel: the bits of autocast's cast */
        if (!st && copies && copies[i].data) st = nb_cpu_copy(be, &copies[i], &params[i]);
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
