/* optim.c - the shared contract checks of the optimizer slots (check.h): each group's tensors contiguous float32
 * or float64 of its param's shape and of one dtype for the whole call, the state that h asks for (amsgrad's
 * max_exp_avg_sq, momentum's buffer) given, Adam's step >= 1, and a list size n >= 0. */
#include "check.h"

/* Every view of v[0..n) present must be contiguous, of v[0]'s shape and float dtype, and that dtype dt (the
 * call's: params[0]'s). */
static nb_status check_group(const char *name, const nb_kview *const *v, int n, nb_dtype dt) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    const nb_kview *ref = v[0];
    for (int i = 0; i < n; i++) {
        if (!v[i]) continue;
        if (!nb_view_same_shape(ref, v[i]) || !nb_view_is_contiguous(v[i]))
            return nb_set_error(NB_ERR_SHAPE, "%s: state %s must be contiguous and match param %s", name,
                                nb_view_str(v[i], b1, sizeof b1), nb_view_str(ref, b2, sizeof b2));
        if (!nb_dtype_in(v[i]->dtype, NB_CHK_F) || v[i]->dtype != ref->dtype)
            return nb_set_error(NB_ERR_DTYPE, "%s: needs float32 or float64 tensors of one dtype (%s, %s)", name,
                                nb_dtype_name(ref->dtype), nb_dtype_name(v[i]->dtype));
    }
    if (ref->dtype != dt)
        return nb_set_error(NB_ERR_DTYPE, "%s: needs float32 or float64 tensors of one dtype (%s, %s)", name,
                            nb_dtype_name(dt), nb_dtype_name(ref->dtype));
    return NB_OK;
}

/* What adam_step and adam_step_multi check before their groups. */
static nb_status check_adam_hyper(const char *name, const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    if (h->step < 1) return nb_set_error(NB_ERR_INVALID_ARG, "%s: step %lld must be >= 1", name, (long long)h->step);
    if (h->amsgrad && !max_exp_avg_sq)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: amsgrad needs max_exp_avg_sq", name);
    return NB_OK;
}

static nb_status check_sgd_hyper(const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    if (h->momentum != 0 && !momentum_buf)
        return nb_set_error(NB_ERR_INVALID_ARG, "sgd: momentum %g needs a momentum buffer", h->momentum);
    return NB_OK;
}

nb_status nb_check_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad, const nb_kview *exp_avg,
                             const nb_kview *exp_avg_sq, const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    (void)be;
    const char *name = h->decoupled ? "adamw" : "adam";
    if (h->lr_dev || h->step_dev) /* nb_adam_hyper: only the multi-tensor slot takes them */
        return nb_set_error(NB_ERR_INVALID_ARG, "adam_step: the capturable form is the multi-tensor slot's");
    nb_status st = check_adam_hyper(name, max_exp_avg_sq, h);
    if (st) return st;
    const nb_kview *v[5] = {param, grad, exp_avg, exp_avg_sq, h->amsgrad ? max_exp_avg_sq : NULL};
    return check_group(name, v, 5, param->dtype);
}

nb_status nb_check_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                            const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    (void)be;
    nb_status st = check_sgd_hyper(momentum_buf, h);
    if (st) return st;
    const nb_kview *v[3] = {param, grad, h->momentum != 0 ? momentum_buf : NULL};
    return check_group("sgd", v, 3, param->dtype);
}

/* The multi-tensor forms: every group checked before anything is updated (the slot's contract). */

/* Group i's 16-bit copy (adam_step_multi's copies[i]): contiguous bfloat16 or float16 of float32 param's shape. */
static nb_status check_copy(const char *name, int i, const nb_kview *copy, const nb_kview *param) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!nb_dtype_is_16bit(copy->dtype) || param->dtype != NB_F32)
        return nb_set_error(NB_ERR_DTYPE, "%s: copy %d must be bfloat16 or float16 of a float32 parameter (%s of %s)",
                            name, i, nb_dtype_name(copy->dtype), nb_dtype_name(param->dtype));
    if (!nb_view_same_shape(copy, param) || !nb_view_is_contiguous(copy))
        return nb_set_error(NB_ERR_SHAPE, "%s: copy %d %s must be contiguous and match param %s", name, i,
                            nb_view_str(copy, b1, sizeof b1), nb_view_str(param, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                   const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                   const nb_kview *max_exp_avg_sqs, const nb_kview *copies, const nb_adam_hyper *h) {
    (void)be;
    const char *name = h->decoupled ? "adamw" : "adam";
    if (n < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d tensors, or a NULL list", name, n);
    nb_status st = check_adam_hyper(name, max_exp_avg_sqs, h);
    for (int i = 0; i < n && !st; i++) {
        const nb_kview *v[5] = {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i],
                                h->amsgrad ? &max_exp_avg_sqs[i] : NULL};
        st = check_group(name, v, 5, params[0].dtype);
        if (!st && copies && copies[i].data) st = check_copy(name, i, &copies[i], &params[i]);
    }
    return st;
}

nb_status nb_check_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                  const nb_kview *momentum_bufs, const nb_sgd_hyper *h) {
    (void)be;
    if (n < 0) return nb_set_error(NB_ERR_INVALID_ARG, "sgd: %d tensors, or a NULL list", n);
    nb_status st = check_sgd_hyper(momentum_bufs, h);
    for (int i = 0; i < n && !st; i++) {
        const nb_kview *v[3] = {&params[i], &grads[i], h->momentum != 0 ? &momentum_bufs[i] : NULL};
        st = check_group("sgd", v, 3, params[0].dtype);
    }
    return st;
}
