/* sched_decay.c - the schedulers of one curve: StepLR, MultiStepLR,
 * ExponentialLR, CosineAnnealingLR, LinearLR, ConstantLR, PolynomialLR,
 * LambdaLR and MultiplicativeLR. get_lr is PyTorch 2.11's, with the same
 * floating-point operations in the same order: the recursive
 * ("chainable") forms multiply the group's current lr; the closed forms
 * (_get_closed_form_lr, used when SequentialLR starts a child at its epoch
 * 0) evaluate the curve from the base lr.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_impl.h"

/* Python's a % b for b > 0 (floor modulo: never negative). */
static int64_t floor_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* How many sorted milestones are <= x (bisect_right). */
static int count_le(const int64_t *a, int n, int64_t x) {
    int c = 0;
    while (c < n && a[c] <= x) c++;
    return c;
}

static double lambda_of(const nb_scheduler *s, int64_t e, int g) { return s->lambda(e, g, s->user); }

/* _get_closed_form_lr; false for the kinds without one. */
static bool closed_form(const nb_scheduler *s, int g, int64_t e, double *out) {
    double base = *nb_sched_pg(s, g, NB_PG_BASE_LR), T = (double)s->period;
    switch (s->kind) {
    case NB_SCHED_STEP: *out = base * pow(s->gamma, (double)(e / s->period - (e % s->period < 0))); return true;
    case NB_SCHED_MULTI_STEP:
        *out = base * pow(s->gamma, (double)count_le(s->milestones, s->n_milestones, e));
        return true;
    case NB_SCHED_EXPONENTIAL: *out = base * pow(s->gamma, (double)e); return true;
    case NB_SCHED_COSINE: *out = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)e / T)) / 2; return true;
    case NB_SCHED_LINEAR: {
        int64_t m = e < s->period ? e : s->period;
        *out = base * (s->start_factor + (s->end_factor - s->start_factor) * (double)m / T);
        return true;
    }
    case NB_SCHED_CONSTANT: *out = base * (s->factor + (double)(e >= s->period) * (1 - s->factor)); return true;
    case NB_SCHED_POLYNOMIAL: {
        int64_t m = e < s->period ? e : s->period;
        *out = base * pow(1.0 - (double)m / T, s->power);
        return true;
    }
    default: return false;
    }
}

nb_status nb_sched_decay_lr(const nb_scheduler *s, int g, int64_t e, bool closed, double lr, double *out) {
    if (closed && closed_form(s, g, e, out)) return NB_OK;
    double T = (double)s->period, base = *nb_sched_pg(s, g, NB_PG_BASE_LR);
    switch (s->kind) {
    case NB_SCHED_STEP: *out = (e == 0 || e % s->period != 0) ? lr : lr * s->gamma; return NB_OK;
    case NB_SCHED_MULTI_STEP: {
        int count = count_le(s->milestones, s->n_milestones, e) - count_le(s->milestones, s->n_milestones, e - 1);
        *out = count == 0 ? lr : lr * pow(s->gamma, (double)count); /* e repeated count times */
        return NB_OK;
    }
    case NB_SCHED_EXPONENTIAL: *out = s->initial ? lr : lr * s->gamma; return NB_OK;
    case NB_SCHED_COSINE:
        if (s->initial) *out = lr;
        else if (floor_mod(e - 1 - s->period, 2 * s->period) == 0)
            *out = lr + (base - s->eta_min) * (1 - cos(M_PI / T)) / 2;
        else
            *out = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) * (lr - s->eta_min) +
                   s->eta_min;
        return NB_OK;
    case NB_SCHED_LINEAR: {
        double sf = s->start_factor, ef = s->end_factor;
        if (e == 0) *out = lr * sf;
        else if (s->initial || e > s->period) *out = lr;
        else *out = lr * (1.0 + (ef - sf) / (T * sf + (double)(e - 1) * (ef - sf)));
        return NB_OK;
    }
    case NB_SCHED_CONSTANT:
        if (e == 0) *out = lr * s->factor;
        else if (e != s->period) *out = lr;
        else *out = lr * (1.0 / s->factor);
        return NB_OK;
    case NB_SCHED_POLYNOMIAL:
        if (s->initial || e > s->period) *out = lr;
        else *out = lr * pow((1.0 - (double)e / T) / (1.0 - (double)(e - 1) / T), s->power);
        return NB_OK;
    case NB_SCHED_LAMBDA: *out = base * lambda_of(s, e, g); return NB_OK;
    case NB_SCHED_MULTIPLICATIVE: *out = s->initial ? lr : lr * lambda_of(s, e, g); return NB_OK;
    default: break;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

/* ---- constructors ---------------------------------------------------------------- */

static bool bad_gamma(const char *op, double gamma) {
    if (gamma >= 0.0 && isfinite(gamma)) return false;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: gamma must be >= 0 and finite (got %g)", op, gamma);
    return true;
}

nb_scheduler *nb_step_lr(nb_optimizer *opt, int64_t step_size, double gamma) {
    if (step_size < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "step_lr: step_size must be >= 1 (got %lld)", (long long)step_size);
    if (bad_gamma("step_lr", gamma)) return NULL;
    nb_scheduler *s = nb_sched_new(NB_SCHED_STEP, opt, "step_lr");
    if (!s) return NULL;
    s->period = step_size;
    s->gamma = gamma;
    return nb_sched_initial_step(s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

nb_scheduler *nb_multi_step_lr(nb_optimizer *opt, const int64_t *milestones, int n, double gamma) {
    if (n < 0 || (n > 0 && !milestones))
        return NB_FAIL(NB_ERR_INVALID_ARG, "multi_step_lr: bad milestones (n %d, list %s)", n,
                       milestones ? "given" : "NULL");
    if (bad_gamma("multi_step_lr", gamma)) return NULL;
    nb_scheduler *s = nb_sched_new(NB_SCHED_MULTI_STEP, opt, "multi_step_lr");
    if (!s) return NULL;
    s->gamma = gamma;
    if (n > 0) {
        if (!(s->milestones = malloc(sizeof *s->milestones * (size_t)n))) {
            nb_scheduler_free(s);
            return NB_FAIL(NB_ERR_OOM, "multi_step_lr: out of host memory");
        }
        memcpy(s->milestones, milestones, sizeof *s->milestones * (size_t)n);
        qsort(s->milestones, (size_t)n, sizeof *s->milestones, cmp_i64); /* PyTorch keeps a Counter */
    }
    s->n_milestones = n;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_exponential_lr(nb_optimizer *opt, double gamma) {
    if (bad_gamma("exponential_lr", gamma)) return NULL;
    nb_scheduler *s = nb_sched_new(NB_SCHED_EXPONENTIAL, opt, "exponential_lr");
    if (!s) return NULL;
    s->gamma = gamma;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_cosine_annealing_lr(nb_optimizer *opt, int64_t T_max, double eta_min) {
    const char *op = "cosine_annealing_lr";
    if (T_max < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: T_max must be >= 1 (got %lld)", op, (long long)T_max);
    if (!(eta_min >= 0.0) || !isfinite(eta_min))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eta_min must be >= 0 and finite (got %g)", op, eta_min);
    nb_scheduler *s = nb_sched_new(NB_SCHED_COSINE, opt, op);
    if (!s) return NULL;
    s->period = T_max;
    s->eta_min = eta_min;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_linear_lr(nb_optimizer *opt, double start_factor, double end_factor, int64_t total_iters) {
    const char *op = "linear_lr";
    /* start_factor > 0: the recursive form divides by total_iters * start_factor at step 1. */
    if (!(start_factor > 0.0 && start_factor <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG,
                       "%s: Starting multiplicative factor expected to be greater than 0 and less or equal to 1 "
                       "(got %g)",
                       op, start_factor);
    if (!(end_factor >= 0.0 && end_factor <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Ending multiplicative factor expected to be between 0 and 1 (got %g)",
                       op, end_factor);
    if (total_iters < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: total_iters must be >= 1 (got %lld)", op, (long long)total_iters);
    nb_scheduler *s = nb_sched_new(NB_SCHED_LINEAR, opt, op);
    if (!s) return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->period = total_iters;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_constant_lr(nb_optimizer *opt, double factor, int64_t total_iters) {
    const char *op = "constant_lr";
    if (!(factor > 0.0 && factor <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Constant multiplicative factor expected to be in (0, 1] (got %g)", op,
                       factor);
    if (total_iters < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: total_iters must be >= 0 (got %lld)", op, (long long)total_iters);
    nb_scheduler *s = nb_sched_new(NB_SCHED_CONSTANT, opt, op);
    if (!s) return NULL;
    s->factor = factor;
    s->period = total_iters;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_polynomial_lr(nb_optimizer *opt, int64_t total_iters, double power) {
    const char *op = "polynomial_lr";
    if (total_iters < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: total_iters must be >= 1 (got %lld)", op, (long long)total_iters);
    if (!isfinite(power)) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: power must be finite (got %g)", op, power);
    nb_scheduler *s = nb_sched_new(NB_SCHED_POLYNOMIAL, opt, op);
    if (!s) return NULL;
    s->period = total_iters;
    s->power = power;
    return nb_sched_initial_step(s);
}

static nb_scheduler *lambda_new(nb_sched_kind kind, const char *op, nb_optimizer *opt, nb_lr_lambda fn, void *user) {
    if (!fn) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: lr_lambda is NULL", op);
    nb_scheduler *s = nb_sched_new(kind, opt, op);
    if (!s) return NULL;
    s->lambda = fn;
    s->user = user;
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_lambda_lr(nb_optimizer *opt, nb_lr_lambda lr_lambda, void *user) {
    return lambda_new(NB_SCHED_LAMBDA, "lambda_lr", opt, lr_lambda, user);
}

nb_scheduler *nb_multiplicative_lr(nb_optimizer *opt, nb_lr_lambda lr_lambda, void *user) {
    return lambda_new(NB_SCHED_MULTIPLICATIVE, "multiplicative_lr", opt, lr_lambda, user);
}
