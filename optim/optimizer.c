/* optimizer.c - what every optimizer shares: the parameter list (retained
 * references), lazily created per-parameter state, zero_grad, and the step
 * loop that hands each parameter with a gradient to its kind's update (a
 * backend kernel). Optimizers never touch tensor data themselves.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_ops.h"
#include "optim_impl.h"

const char *const nb_optim_state_names[NB_ST_COUNT] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                                                       "momentum_buffer"};

double nb_optim_default(double v, double dflt) {
    if (v != 0.0) return v;
    return signbit(v) ? 0.0 : dflt;
}

/* ---- construction ---------------------------------------------------------- */

static nb_status check_params(const char *op, nb_tensor *const *params, int n) {
    if (!params || n < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL parameter list", op);
    if (n == 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list", op);
    for (int i = 0; i < n; i++) {
        nb_tensor *p = params[i];
        if (!p) return nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d is NULL", op, i);
        char buf[NB_SHAPE_BUF];
        /* which float dtypes a step runs in is the backend's answer (its
         * supports slot for the step kernel, asked at nb_optimizer_step) */
        if (!nb_dtype_is_float(nb_dtype_of(p)))
            return nb_set_error(NB_ERR_DTYPE, "%s: parameter %d is %s; parameters must be floating point", op, i,
                                nb_shape_str(p, buf, sizeof buf));
        if (!nb_is_leaf(p))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: can't optimize a non-leaf tensor (parameter %d)",
                                op, i);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d repeats parameter %d", op, i, j);
    }
    return NB_OK;
}

nb_optimizer *nb_optim_new(nb_optim_kind kind, const char *op, nb_tensor *const *params, int n) {
    if (check_params(op, params, n)) return NULL;
    nb_optimizer *opt = calloc(1, sizeof *opt);
    if (opt) {
        opt->params = malloc(sizeof *opt->params * (size_t)n);
        opt->state = calloc((size_t)n, sizeof *opt->state);
    }
    if (!opt || !opt->params || !opt->state) {
        if (opt) free(opt->params), free(opt->state);
        free(opt);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    opt->kind = kind;
    opt->op = op;
    opt->n = n;
    for (int i = 0; i < n; i++) {
        nb_retain(params[i]);
        opt->params[i] = params[i];
    }
    return opt;
}

nb_tensor **nb_optim_module_params(nb_module *m, const char *op, int *n) {
    if (!m) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    int count = nb_module_parameters(m, NULL, 0);
    if (count < 0) return NULL;
    if (count == 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list", op);
    nb_named_tensor *named = malloc(sizeof *named * (size_t)count);
    nb_tensor **params = malloc(sizeof *params * (size_t)count);
    if (!named || !params) {
        free(named), free(params);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    nb_module_parameters(m, named, count);
    for (int i = 0; i < count; i++) params[i] = named[i].tensor;
    free(named);
    *n = count;
    return params;
}

void nb_optimizer_free(nb_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) {
        for (int k = 0; k < NB_ST_COUNT; k++) nb_release(opt->state[i].state[k]);
        nb_release(opt->params[i]);
    }
    free(opt->state);
    free(opt->params);
    free(opt);
}

/* ---- stepping ---------------------------------------------------------------- */

void nb_optimizer_zero_grad(nb_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) nb_tensor_zero_grad(opt->params[i]);
}

/* Creates param i's missing state tensors (zeros, unscoped, the parameter's
 * shape/dtype/device); *created says whether any was new. */
static nb_status ensure_state(nb_optimizer *opt, int i, bool *created) {
    nb_tensor *p = opt->params[i];
    *created = false;
    for (int k = 0; k < NB_ST_COUNT; k++) {
        nb_tensor **slot = &opt->state[i].state[k];
        if (*slot || !opt->has_state(opt, k)) continue;
        nb_tensor *t = nb_tensor_new_unscoped(nb_dim(p), nb_shape(p), nb_dtype_of(p), nb_device_of(p));
        if (!t) return nb_last_status();
        nb_status st = nb_fill_(t, 0.0);
        if (st) {
            nb_release(t);
            return st;
        }
        *slot = t;
        *created = true;
    }
    return NB_OK;
}

static void drop_state(nb_optimizer *opt, int i) {
    for (int k = 0; k < NB_ST_COUNT; k++) {
        nb_release(opt->state[i].state[k]);
        opt->state[i].state[k] = NULL;
    }
}

/* One parameter's update; runs inside nb_optimizer_step's scope, so the contiguous
 * copies made here die with it. */
static nb_status step_one(nb_optimizer *opt, int i) {
    nb_tensor *p = opt->params[i], *g = nb_tensor_grad(p);
    if (!g) return NB_OK; /* no gradient: skipped, as PyTorch */
    if (nb_dtype_of(g) != nb_dtype_of(p) || nb_numel(g) != nb_numel(p)) {
        char bp[NB_SHAPE_BUF], bg[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_STATE, "%s: parameter %d is %s but its grad is %s", opt->op, i,
                            nb_shape_str(p, bp, sizeof bp), nb_shape_str(g, bg, sizeof bg));
    }
    if (!nb_is_contiguous(g) && !(g = nb_contiguous(g))) return nb_last_status();
    nb_tensor *pc = nb_is_contiguous(p) ? p : nb_contiguous(p); /* kernels need contiguous */
    if (!pc) return nb_last_status();
    bool first = false;
    nb_status st = ensure_state(opt, i, &first);
    if (!st) st = opt->update(opt, i, pc, g, first);
    if (!st && pc != p) st = nb_copy_(p, pc);
    if (st) {
        if (first) drop_state(opt, i); /* a failed first step leaves no history */
        return st;
    }
    opt->state[i].step++;
    return NB_OK;
}

nb_status nb_optimizer_step(nb_optimizer *opt) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "step: optimizer is NULL");
    nb_scope *s = nb_op_scope_begin();
    if (!s) return nb_last_status();
    bool prev = nb_set_grad_enabled(false);
    nb_status st = NB_OK;
    for (int i = 0; i < opt->n && !st; i++) st = step_one(opt, i);
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return st;
}

/* ---- accessors ----------------------------------------------------------------- */

/* A NULL optimizer (a failed constructor upstream): keeps that error, else records one. */
static bool no_opt(const char *op, const nb_optimizer *opt) {
    if (opt) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: optimizer is NULL", op);
    return true;
}

double nb_optimizer_get_lr(const nb_optimizer *opt) { return no_opt("get_lr", opt) ? NAN : opt->lr; }

nb_status nb_optimizer_set_lr(nb_optimizer *opt, double lr) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "set_lr: optimizer is NULL");
    if (!(lr >= 0.0) || !isfinite(lr))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: lr must be >= 0 and finite (got %g)", opt->op, lr);
    opt->lr = lr;
    return NB_OK;
}

const char *nb_optimizer_kind(const nb_optimizer *opt) {
    static const char *const kinds[] = {"SGD", "Adam", "AdamW"};
    return no_opt("optimizer_kind", opt) ? NULL : kinds[opt->kind];
}

nb_sgd_options nb_optimizer_sgd_options(const nb_optimizer *opt) {
    if (!opt || opt->kind != NB_OPTIM_SGD) {
        nb_set_error(NB_ERR_INVALID_ARG, "sgd_options: not an SGD optimizer");
        return (nb_sgd_options){0};
    }
    nb_sgd_options o = opt->sgd;
    o.lr = opt->lr;
    return o;
}

nb_adam_options nb_optimizer_adam_options(const nb_optimizer *opt) {
    if (!opt || opt->kind == NB_OPTIM_SGD) {
        nb_set_error(NB_ERR_INVALID_ARG, "adam_options: not an Adam or AdamW optimizer");
        return (nb_adam_options){0};
    }
    nb_adam_options o = opt->adam;
    o.lr = opt->lr;
    return o;
}

int nb_optimizer_num_params(const nb_optimizer *opt) { return no_opt("num_params", opt) ? -1 : opt->n; }

nb_tensor *nb_optimizer_param(const nb_optimizer *opt, int i) {
    return !no_opt("optimizer_param", opt) && i >= 0 && i < opt->n ? opt->params[i] : NULL;
}

nb_tensor *nb_optimizer_state(const nb_optimizer *opt, int i, const char *name) {
    if (no_opt("optimizer_state", opt) || i < 0 || i >= opt->n) return NULL;
    if (!name) return NB_FAIL(NB_ERR_INVALID_ARG, "optimizer_state: NULL name");
    for (int k = 0; k < NB_ST_COUNT; k++)
        if (!strcmp(name, nb_optim_state_names[k])) return opt->state[i].state[k];
    return NULL;
}

int64_t nb_optimizer_step_count(const nb_optimizer *opt, int i) {
    return !no_opt("step_count", opt) && i >= 0 && i < opt->n ? opt->state[i].step : -1;
}

nb_status nb_optimizer_init_state(nb_optimizer *opt, int i, int64_t step) {
    if (!opt || i < 0 || i >= opt->n || step < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "init_state: bad optimizer, parameter index %d or step %lld",
                            i, (long long)step);
    bool created;
    nb_status st = ensure_state(opt, i, &created);
    if (!st) opt->state[i].step = step;
    return st;
}
