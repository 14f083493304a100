/* optimizer.c - what every optimizer shares: parameter groups (options
 * resolved against PyTorch's defaults and the constructor's, field by field
 * through each kind's table), the parameter list (retained references),
 * lazily created per-parameter state, zero_grad, and the step loop that
 * hands each parameter with a gradient to its kind's update. Optimizers
 * never touch tensor data themselves.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_ops.h"
#include "optim_impl.h"

_Static_assert(offsetof(nb_sgd_options, lr) == 0 && offsetof(nb_adam_options, lr) == 0 &&
                   offsetof(nb_adadelta_options, lr) == 0 && offsetof(nb_adafactor_options, lr) == 0 &&
                   offsetof(nb_adagrad_options, lr) == 0 && offsetof(nb_adamax_options, lr) == 0 &&
                   offsetof(nb_asgd_options, lr) == 0 && offsetof(nb_lbfgs_options, lr) == 0 &&
                   offsetof(nb_nadam_options, lr) == 0 && offsetof(nb_radam_options, lr) == 0 &&
                   offsetof(nb_rmsprop_options, lr) == 0 && offsetof(nb_rprop_options, lr) == 0 &&
                   offsetof(nb_lion_options, lr) == 0 && offsetof(nb_muon_options, lr) == 0,
               "every options struct starts with its lr");
_Static_assert(sizeof(nb_flag) == sizeof(int) && sizeof(nb_line_search) == sizeof(int) &&
                   sizeof(nb_muon_adjust_lr) == sizeof(int),
               "option enums are int-sized (NB_FIELD_ENUM)");

nb_status nb_optim_check_nonneg(const char *op, const char *what, double x) {
    if (x >= 0.0 && isfinite(x)) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be >= 0 (got %g)", op, what, x);
}

nb_status nb_optim_check_unit(const char *op, const char *what, double x) {
    if (x >= 0.0 && x < 1.0) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be in [0, 1) (got %g)", op, what, x);
}

/* ---- fields ------------------------------------------------------------------ */

const nb_field *nb_optim_field(const nb_optim_desc *d, const char *key) {
    for (int i = 0; key && i < d->n_fields; i++)
        if (!strcmp(d->fields[i].name, key)) return &d->fields[i];
    return NULL;
}

double nb_optim_field_get(const nb_field *f, const void *options) {
    const char *p = (const char *)options + f->offset;
    switch (f->type) {
    case NB_FIELD_F64:
    case NB_FIELD_F64_NONE: return *(const double *)p;
    case NB_FIELD_BOOL: return *(const bool *)p ? 1.0 : 0.0;
    case NB_FIELD_INT: return (double)*(const int64_t *)p;
    case NB_FIELD_ENUM: return (double)*(const int *)p;
    }
    return NAN;
}

void nb_optim_field_set(const nb_field *f, void *options, double v) {
    char *p = (char *)options + f->offset;
    switch (f->type) {
    case NB_FIELD_F64:
    case NB_FIELD_F64_NONE: *(double *)p = v; break;
    case NB_FIELD_BOOL: *(bool *)p = v != 0.0; break;
    case NB_FIELD_INT: *(int64_t *)p = (int64_t)v; break;
    case NB_FIELD_ENUM: *(int *)p = (int)v; break;
    }
}

/* out = user's fields over base's, as a group dict over the defaults: a
 * double left +0.0 takes base's (NB_ZERO gives 0), a bool is user || base,
 * an int or enum left 0 takes base's. */
static void inherit(const nb_optim_desc *d, const void *user, const void *base, void *out) {
    memcpy(out, base, d->options_size);
    if (!user) return;
    for (int i = 0; i < d->n_fields; i++) {
        const nb_field *f = &d->fields[i];
        const char *u = (const char *)user + f->offset;
        switch (f->type) {
        case NB_FIELD_F64:
        case NB_FIELD_F64_NONE: {
            double v = *(const double *)u;
            if (v != 0.0 || signbit(v)) nb_optim_field_set(f, out, v == 0.0 ? 0.0 : v);
            break;
        }
        case NB_FIELD_BOOL:
            if (*(const bool *)u) nb_optim_field_set(f, out, 1.0);
            break;
        case NB_FIELD_INT:
            if (*(const int64_t *)u) nb_optim_field_set(f, out, (double)*(const int64_t *)u);
            break;
        case NB_FIELD_ENUM:
            if (*(const int *)u) nb_optim_field_set(f, out, *(const int *)u);
            break;
        }
    }
}

int nb_optim_tensor_index(const nb_optim_desc *d, const char *name) {
    for (int k = 0; name && k < d->n_tensors; k++)
        if (!strcmp(name, d->tensor_names[k])) return k;
    return -1;
}

int nb_optim_scalar_index(const nb_optim_desc *d, const char *name) {
    for (int k = 0; name && k < d->n_scalars; k++)
        if (!strcmp(name, d->scalar_names[k])) return k;
    return -1;
}

int nb_optim_group_of(const nb_optimizer *opt, int i) {
    for (int g = 0; g < opt->n_groups; g++)
        if (i < opt->groups[g].first + opt->groups[g].n) return g;
    return -1;
}

/* ---- construction ---------------------------------------------------------- */

/* Checks n new parameters (numbered from base in messages) against each
 * other and the optimizer's existing ones. */
static nb_status check_params(const nb_optim_desc *d, const nb_optimizer *opt, nb_tensor *const *params, int n,
                              int base, const void *options) {
    const char *op = d->op;
    if (n < 0 || (n > 0 && !params)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL parameter list", op);
    for (int i = 0; i < n; i++) {
        nb_tensor *p = params[i];
        if (!p) return nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d is NULL", op, base + i);
        char buf[NB_SHAPE_BUF];
        /* which float dtypes a step runs in is the step kernel's check
         * (backend/check/optim.c) or the ops', asked at the step */
        if (!nb_dtype_is_float(nb_dtype_of(p)))
            return nb_set_error(NB_ERR_DTYPE, "%s: parameter %d is %s; parameters must be floating point", op,
                                base + i, nb_shape_str(p, buf, sizeof buf));
        if (!nb_is_leaf(p))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: can't optimize a non-leaf tensor (parameter %d)", op,
                                base + i);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d repeats parameter %d", op, base + i,
                                    base + j);
        for (int j = 0; opt && j < opt->n; j++)
            if (opt->params[j] == p)
                return nb_set_error(NB_ERR_INVALID_ARG,
                                    "%s: parameter %d is already in the optimizer (parameter %d); "
                                    "a parameter may be in one group only",
                                    op, base + i, j);
        if (d->check_param) {
            nb_status st = d->check_param(op, p, options, base + i);
            if (st) return st;
        }
    }
    return NB_OK;
}

/* Resolves a group's options against the defaults and checks them. */
static nb_status group_options(const nb_optim_desc *d, const void *user, const nb_optim_options *defaults,
                               nb_optim_options *out) {
    memset(out, 0, sizeof *out);
    inherit(d, user, defaults, out);
    return d->check(d->op, out);
}

/* Appends a group whose parameters and options were checked (cannot fail
 * once the arrays have room). */
static void append_group(nb_optimizer *opt, nb_tensor *const *params, int n, const nb_optim_options *o) {
    nb_optim_group *g = &opt->groups[opt->n_groups++];
    g->first = opt->n;
    g->n = n;
    g->initial_lr = NAN;
    g->o = *o;
    for (int i = 0; i < n; i++) {
        nb_retain(params[i]);
        opt->params[opt->n] = params[i];
        memset(&opt->state[opt->n], 0, sizeof opt->state[opt->n]);
        opt->n++;
    }
}

/* Grows the arrays for one more group of n parameters. */
static nb_status reserve(nb_optimizer *opt, int n) {
    nb_tensor **p = realloc(opt->params, sizeof *p * (size_t)(opt->n + n + 1));
    if (p) opt->params = p;
    nb_param_state *s = p ? realloc(opt->state, sizeof *s * (size_t)(opt->n + n + 1)) : NULL;
    if (s) opt->state = s;
    nb_optim_group *g = s ? realloc(opt->groups, sizeof *g * (size_t)(opt->n_groups + 1)) : NULL;
    if (g) opt->groups = g;
    return g ? NB_OK : nb_set_error(NB_ERR_OOM, "%s: out of host memory", opt->d->op);
}

nb_optimizer *nb_optim_build(const nb_optim_desc *d, const nb_param_group *groups, int n_groups, const void *options) {
    const char *op = d->op;
    if (!groups || n_groups < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer got an empty list of parameter groups", op);
    if (d->one_group && n_groups != 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %s doesn't support per-parameter options (parameter groups); got %d",
                       op, d->name, n_groups);
    nb_optim_options defaults;
    memset(&defaults, 0, sizeof defaults);
    inherit(d, options, d->torch_defaults, &defaults);
    if (d->finish) d->finish(&defaults);
    if (d->check(op, &defaults)) return NULL;
    nb_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    opt->d = d;
    opt->defaults = defaults;
    int total = 0;
    for (int gi = 0; gi < n_groups; gi++) {
        nb_optim_options o;
        nb_status st = group_options(d, groups[gi].options, &defaults, &o);
        if (!st) st = check_params(d, opt, groups[gi].params, groups[gi].n, total, &o);
        if (!st) st = reserve(opt, groups[gi].n);
        if (st) {
            nb_optimizer_free(opt);
            return NULL;
        }
        append_group(opt, groups[gi].params, groups[gi].n, &o);
        total += groups[gi].n;
    }
    if (total == 0) {
        nb_optimizer_free(opt);
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list", op);
    }
    return opt;
}

nb_optimizer *nb_optim_build_params(const nb_optim_desc *d, nb_tensor *const *params, int n, const void *options) {
    if (!params || n < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL parameter list", d->op);
    nb_param_group g = {params, n, NULL};
    return nb_optim_build(d, &g, 1, options);
}

nb_optimizer *nb_optim_build_module(const nb_optim_desc *d, nb_module *m, const void *options) {
    if (!m) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: module is NULL", d->op);
    int count = 0;
    nb_tensor **params = nb_module_parameter_list(m, &count);
    if (!params) return NULL;
    if (count == 0) {
        free(params);
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list", d->op);
    }
    nb_optimizer *opt = nb_optim_build_params(d, params, count, options);
    free(params);
    return opt;
}

nb_status nb_optimizer_add_param_group(nb_optimizer *opt, const nb_param_group *group) {
    if (!opt || !group) return nb_set_error(NB_ERR_INVALID_ARG, "add_param_group: NULL optimizer or group");
    const nb_optim_desc *d = opt->d;
    if (d->one_group)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s doesn't support per-parameter options (parameter groups)",
                            d->op, d->name);
    nb_optim_options o;
    nb_status st = group_options(d, group->options, &opt->defaults, &o);
    if (!st) st = check_params(d, opt, group->params, group->n, opt->n, &o);
    if (!st) st = reserve(opt, group->n);
    if (!st) append_group(opt, group->params, group->n, &o);
    return st;
}

static void drop_state(nb_optimizer *opt, int i) {
    for (int k = 0; k < NB_OPT_MAX_TENSORS; k++) {
        nb_release(opt->state[i].t[k]);
        opt->state[i].t[k] = NULL;
    }
}

void nb_optimizer_free(nb_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) {
        drop_state(opt, i);
        nb_release(opt->params[i]);
    }
    if (opt->extra && opt->d->free_extra) opt->d->free_extra(opt->extra);
    nb_optim_dev_free(opt);
    free(opt->state);
    free(opt->params);
    free(opt->groups);
    free(opt);
}

/* ---- stepping ---------------------------------------------------------------- */

void nb_optimizer_zero_grad(nb_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) nb_tensor_zero_grad(opt->params[i]);
}

/* Creates param i's missing state tensors (zeros, unscoped, on the
 * parameter's device); *created gets a bit per new tensor. */
static nb_status ensure_state(nb_optimizer *opt, int g, int i, unsigned *created) {
    nb_tensor *p = opt->params[i];
    *created = 0;
    for (int k = 0; k < opt->d->n_tensors; k++) {
        nb_tensor **slot = &opt->state[i].t[k];
        int ndim = nb_dim(p);
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, nb_shape(p), sizeof(int64_t) * (size_t)ndim);
        if (*slot || !opt->d->has_tensor(&opt->groups[g].o, p, k, &ndim, shape)) continue;
        nb_tensor *t = nb_tensor_new_unscoped(ndim, shape, nb_dtype_of(p), nb_device_of(p));
        if (!t) return nb_last_status();
        nb_status st = nb_fill_(t, 0.0);
        if (st) {
            nb_release(t);
            return st;
        }
        *slot = t;
        *created |= 1u << k;
    }
    return NB_OK;
}

/* One parameter's update; runs inside nb_optimizer_step's scope, so the
 * temporaries made here die with it. */
static nb_status step_one(nb_optimizer *opt, int g, int i) {
    nb_tensor *p = opt->params[i], *grad = nb_tensor_grad(p);
    if (!grad) return NB_OK; /* no gradient: skipped, as PyTorch */
    if (nb_dtype_of(grad) != nb_dtype_of(p) || nb_numel(grad) != nb_numel(p) || nb_dim(grad) != nb_dim(p)) {
        char bp[NB_SHAPE_BUF], bg[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_STATE, "%s: parameter %d is %s but its grad is %s", opt->d->op, i,
                            nb_shape_str(p, bp, sizeof bp), nb_shape_str(grad, bg, sizeof bg));
    }
    if (nb_graph_is_capturing(nb_device_of(p))) /* the per-parameter update fixes lr and step in the graph */
        return nb_set_error(NB_ERR_STATE, "%s: parameter %d (non-contiguous, or a gradient of another layout) "
                                          "cannot be updated in a captured CUDA graph; make it contiguous",
                            opt->d->op, i);
    nb_tensor *pc = p;
    if (opt->d->contiguous) { /* kernels need contiguous views */
        if (!nb_is_contiguous(grad) && !(grad = nb_contiguous(grad))) return nb_last_status();
        if (!nb_is_contiguous(p) && !(pc = nb_contiguous(p))) return nb_last_status();
    }
    nb_param_state *s = &opt->state[i];
    bool fresh = !s->started;
    unsigned created = 0;
    nb_status st = ensure_state(opt, g, i, &created);
    if (!st && fresh && opt->d->init) st = opt->d->init(opt, g, i);
    if (!st) st = opt->d->update(opt, g, i, pc, grad, created);
    if (!st && pc != p) st = nb_copy_(p, pc);
    if (st) {
        for (int k = 0; k < opt->d->n_tensors; k++) /* a failed step leaves no new history */
            if (created & (1u << k)) nb_release(s->t[k]), s->t[k] = NULL;
        return st;
    }
    s->started = true;
    s->step++;
    return NB_OK;
}

/* A batch of parameters for update_multi: alike in dtype, device, step
 * count and freshly made state. */
enum { BATCH_MAX = 64 };
typedef struct batch {
    int n, idx[BATCH_MAX];
    nb_tensor *p[BATCH_MAX], *g[BATCH_MAX];
    unsigned created;
} batch;

static nb_status flush(nb_optimizer *opt, int g, batch *b) {
    if (!b->n) return NB_OK;
    nb_status st = opt->d->update_multi(opt, g, b->n, b->idx, b->p, b->g, b->created);
    for (int j = 0; j < b->n; j++) {
        nb_param_state *s = &opt->state[b->idx[j]];
        if (st) { /* a failed step leaves no new history */
            for (int k = 0; k < opt->d->n_tensors; k++)
                if (b->created & (1u << k)) nb_release(s->t[k]), s->t[k] = NULL;
        } else {
            s->started = true;
            s->step++;
        }
    }
    b->n = 0;
    return st;
}

/* Group g through update_multi: parameters that qualify (contiguous,
 * gradient alike) go in batches; the rest through step_one. */
static nb_status step_group_multi(nb_optimizer *opt, int g) {
    batch b = {0};
    nb_status st = NB_OK;
    for (int i = opt->groups[g].first; i < opt->groups[g].first + opt->groups[g].n && !st; i++) {
        nb_tensor *p = opt->params[i], *grad = nb_tensor_grad(p);
        if (!grad) continue;
        if (!nb_is_contiguous(p) || !nb_is_contiguous(grad) || nb_dtype_of(grad) != nb_dtype_of(p) ||
            nb_dim(grad) != nb_dim(p) || nb_numel(grad) != nb_numel(p)) {
            st = step_one(opt, g, i); /* copies, or reports the mismatch */
            continue;
        }
        nb_param_state *s = &opt->state[i];
        bool fresh = !s->started;
        unsigned created = 0;
        st = ensure_state(opt, g, i, &created);
        if (!st && fresh && opt->d->init) st = opt->d->init(opt, g, i);
        if (!st && created && nb_graph_is_capturing(nb_device_of(p))) /* a zero fill would run every replay */
            st = nb_set_error(NB_ERR_STATE, "%s: parameter %d has no optimizer state yet; take one eager step "
                                            "before capturing a graph", opt->d->op, i);
        if (st) {
            for (int k = 0; k < opt->d->n_tensors; k++)
                if (created & (1u << k)) nb_release(s->t[k]), s->t[k] = NULL;
            break;
        }
        if (b.n) {
            nb_tensor *q = b.p[0];
            nb_device dq = nb_device_of(q), dp = nb_device_of(p);
            if (b.n == BATCH_MAX || nb_dtype_of(q) != nb_dtype_of(p) || dq.type != dp.type || dq.index != dp.index ||
                opt->state[b.idx[0]].step != s->step || b.created != created)
                st = flush(opt, g, &b);
        }
        if (st) break;
        b.created = created;
        b.idx[b.n] = i, b.p[b.n] = p, b.g[b.n] = grad, b.n++;
    }
    nb_status fs = flush(opt, g, &b);
    return st ? st : fs;
}

static nb_status generic_step(nb_optimizer *opt) {
    nb_scope *sc = nb_op_scope_begin();
    if (!sc) return nb_last_status();
    /* an earlier call's error goes; the ops below keep the step's own (nb_extension.h) */
    if (nb_op_take_fresh()) nb_clear_error();
    bool prev = nb_set_grad_enabled(false);
    nb_status st = NB_OK;
    for (int g = 0; g < opt->n_groups && !st; g++)
        if (opt->d->update_multi) st = step_group_multi(opt, g);
        else
            for (int i = opt->groups[g].first; i < opt->groups[g].first + opt->groups[g].n && !st; i++)
                st = step_one(opt, g, i);
    nb_set_grad_enabled(prev);
    nb_scope_end(sc);
    return st;
}

/* The step wrote parameters in place through kernels: their storages'
 * version counters move on, so a pending graph that saved one fails its
 * backward instead of using the new values (PyTorch's in-place check).
 * The generic step updates the parameters that have a gradient; a step of
 * its own (LBFGS) may write them all. */
static nb_status bump_params(nb_optimizer *opt, bool all, nb_status st) {
    /* the fused updates (Adam's and SGD's, the descs with update_multi)
     * record their own writes, and a second bump here would make the 16-bit
     * copies that nb_fused_adam_ writes for autocast look stale */
    if (!all && opt->d->update_multi) return st;
    for (int i = 0; i < opt->n; i++)
        if (all || nb_tensor_grad(opt->params[i])) nb_increment_version(opt->params[i]);
    return st;
}

/* Whether a parameter's device is capturing a CUDA graph on its current stream. */
static bool in_capture(const nb_optimizer *opt) {
    for (int i = 0; i < opt->n; i++)
        if (nb_graph_is_capturing(nb_device_of(opt->params[i]))) return true;
    return false;
}

/* Only the fused multi-tensor updates read lr and step from device memory
 * (capturable.c); any other update would bake this step's lr and step
 * count into the graph, and every replay would repeat them. */
static nb_status refuse_capture(const nb_optimizer *opt) {
    if (!opt->d->step && opt->d->update_multi) return NB_OK;
    return nb_set_error(NB_ERR_STATE, "%s: this optimizer cannot be captured in a CUDA graph (its lr and step count "
                                      "would be fixed in the graph); Adam, AdamW and SGD can, with contiguous "
                                      "parameters", opt->d->op);
}

nb_status nb_optimizer_step(nb_optimizer *opt) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "step: optimizer is NULL");
    if (in_capture(opt) && refuse_capture(opt)) return nb_last_status();
    if (opt->d->step) return bump_params(opt, true, opt->d->step(opt, NULL, NULL, NULL));
    return bump_params(opt, false, generic_step(opt));
}

nb_status nb_optimizer_step_closure(nb_optimizer *opt, nb_closure_fn closure, void *user, double *loss) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "step: optimizer is NULL");
    if (!closure) return nb_set_error(NB_ERR_INVALID_ARG, "%s: step_closure needs a closure", opt->d->op);
    if (in_capture(opt) && refuse_capture(opt)) return nb_last_status();
    if (opt->d->step) return bump_params(opt, true, opt->d->step(opt, closure, user, loss));
    double l = NAN;
    bool prev = nb_set_grad_enabled(true); /* PyTorch: with torch.enable_grad(): loss = closure() */
    nb_status st = closure(user, &l);
    nb_set_grad_enabled(prev);
    if (st) return st;
    st = bump_params(opt, false, generic_step(opt));
    if (!st && loss) *loss = l;
    return st;
}

/* ---- groups and options ---------------------------------------------------------- */

/* A NULL optimizer (a failed constructor upstream): keeps that error, else records one. */
static bool no_opt(const char *op, const nb_optimizer *opt) {
    if (opt) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: optimizer is NULL", op);
    return true;
}

static nb_status bad_group(const nb_optimizer *opt, const char *what, int g) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "%s: optimizer is NULL", what);
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: param group %d out of range (the optimizer has %d)", what, g,
                        opt->n_groups);
}

int nb_optimizer_num_param_groups(const nb_optimizer *opt) {
    return no_opt("num_param_groups", opt) ? -1 : opt->n_groups;
}

int nb_optimizer_group_params(const nb_optimizer *opt, int group, int *first) {
    if (no_opt("group_params", opt) || group < 0 || group >= opt->n_groups) return -1;
    if (first) *first = opt->groups[group].first;
    return opt->groups[group].n;
}

double nb_optimizer_get_lr(const nb_optimizer *opt) { return no_opt("get_lr", opt) ? NAN : opt->groups[0].o.head.lr; }

double nb_optimizer_get_group_lr(const nb_optimizer *opt, int group) {
    return !no_opt("get_group_lr", opt) && group >= 0 && group < opt->n_groups ? opt->groups[group].o.head.lr : NAN;
}

static nb_status check_lr(const nb_optimizer *opt, double lr) {
    if (lr >= 0.0 && isfinite(lr)) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: lr must be >= 0 and finite (got %g)", opt->d->op, lr);
}

nb_status nb_optimizer_set_group_lr(nb_optimizer *opt, int group, double lr) {
    if (!opt || group < 0 || group >= opt->n_groups) return bad_group(opt, "set_group_lr", group);
    nb_status st = check_lr(opt, lr);
    if (!st) opt->groups[group].o.head.lr = lr;
    return st;
}

nb_status nb_optimizer_set_lr(nb_optimizer *opt, double lr) {
    if (!opt) return nb_set_error(NB_ERR_INVALID_ARG, "set_lr: optimizer is NULL");
    nb_status st = check_lr(opt, lr);
    for (int g = 0; g < opt->n_groups && !st; g++) opt->groups[g].o.head.lr = lr;
    return st;
}

nb_status nb_optimizer_get_group_option(const nb_optimizer *opt, int group, const char *key, double *value) {
    if (!opt || group < 0 || group >= opt->n_groups) return bad_group(opt, "get_group_option", group);
    const nb_field *f = nb_optim_field(opt->d, key);
    if (!f || !value)
        return nb_set_error(NB_ERR_INVALID_ARG, "get_group_option: %s has no option '%s'", opt->d->name,
                            key ? key : "(null)");
    *value = nb_optim_field_get(f, &opt->groups[group].o);
    return NB_OK;
}

nb_status nb_optim_set_field(nb_optimizer *opt, int g, const char *key, double v) {
    const nb_field *f = nb_optim_field(opt->d, key);
    if (!f)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s has no option '%s'", opt->d->op, opt->d->name,
                            key ? key : "(null)");
    if (isnan(v) && f->type != NB_FIELD_F64_NONE)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: option '%s' can't be NaN", opt->d->op, key);
    nb_optim_options o = opt->groups[g].o;
    nb_optim_field_set(f, &o, v);
    nb_status st = opt->d->check(opt->d->op, &o);
    if (!st && !strcmp(key, "lr")) st = check_lr(opt, v);
    for (int i = opt->groups[g].first; !st && opt->d->check_param && i < opt->groups[g].first + opt->groups[g].n; i++)
        st = opt->d->check_param(opt->d->op, opt->params[i], &o, i);
    if (!st) opt->groups[g].o = o;
    return st;
}

nb_status nb_optimizer_set_group_option(nb_optimizer *opt, int group, const char *key, double value) {
    if (!opt || group < 0 || group >= opt->n_groups) return bad_group(opt, "set_group_option", group);
    return nb_optim_set_field(opt, group, key, value);
}

nb_status nb_optimizer_group_options(const nb_optimizer *opt, int group, void *out, size_t size) {
    if (!opt || group < 0 || group >= opt->n_groups) return bad_group(opt, "group_options", group);
    if (!out || size != opt->d->options_size)
        return nb_set_error(NB_ERR_INVALID_ARG, "group_options: out must be %s's options struct (%zu bytes, got %zu)",
                            opt->d->name, opt->d->options_size, size);
    memcpy(out, &opt->groups[group].o, size);
    return NB_OK;
}

const char *nb_optimizer_kind(const nb_optimizer *opt) { return no_opt("optimizer_kind", opt) ? NULL : opt->d->name; }

nb_sgd_options nb_optimizer_sgd_options(const nb_optimizer *opt) {
    if (!opt || opt->d != &nb_sgd_desc) {
        nb_set_error(NB_ERR_INVALID_ARG, "sgd_options: not an SGD optimizer");
        return (nb_sgd_options){0};
    }
    return opt->groups[0].o.sgd;
}

nb_adam_options nb_optimizer_adam_options(const nb_optimizer *opt) {
    if (!opt || (opt->d != &nb_adam_desc && opt->d != &nb_adamw_desc)) {
        nb_set_error(NB_ERR_INVALID_ARG, "adam_options: not an Adam or AdamW optimizer");
        return (nb_adam_options){0};
    }
    return opt->groups[0].o.adam;
}

/* ---- state ------------------------------------------------------------------------ */

int nb_optimizer_num_params(const nb_optimizer *opt) { return no_opt("num_params", opt) ? -1 : opt->n; }

nb_tensor *nb_optimizer_param(const nb_optimizer *opt, int i) {
    return !no_opt("optimizer_param", opt) && i >= 0 && i < opt->n ? opt->params[i] : NULL;
}

nb_tensor *nb_optimizer_state(const nb_optimizer *opt, int i, const char *name) {
    if (no_opt("optimizer_state", opt) || i < 0 || i >= opt->n) return NULL;
    if (!name) return NB_FAIL(NB_ERR_INVALID_ARG, "optimizer_state: NULL name");
    int k = nb_optim_tensor_index(opt->d, name);
    return k < 0 ? NULL : opt->state[i].t[k];
}

nb_status nb_optimizer_state_scalar(const nb_optimizer *opt, int i, const char *name, double *value) {
    if (!opt || i < 0 || i >= opt->n || !value)
        return nb_set_error(NB_ERR_INVALID_ARG, "state_scalar: bad optimizer, parameter index %d or output", i);
    int k = nb_optim_scalar_index(opt->d, name);
    if (k < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "state_scalar: %s has no scalar state '%s'", opt->d->name,
                            name ? name : "(null)");
    if (!opt->state[i].started)
        return nb_set_error(NB_ERR_INVALID_ARG, "state_scalar: parameter %d has no state yet", i);
    *value = opt->state[i].s[k];
    return NB_OK;
}

int64_t nb_optimizer_step_count(const nb_optimizer *opt, int i) {
    return !no_opt("step_count", opt) && i >= 0 && i < opt->n ? opt->state[i].step : -1;
}

nb_status nb_optimizer_init_state(nb_optimizer *opt, int i, int64_t step) {
    if (!opt || i < 0 || i >= opt->n || step < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "init_state: bad optimizer, parameter index %d or step %lld", i,
                            (long long)step);
    unsigned created;
    int g = nb_optim_group_of(opt, i);
    nb_status st = ensure_state(opt, g, i, &created);
    if (!st && !opt->state[i].started && opt->d->init) st = opt->d->init(opt, g, i);
    if (!st) opt->state[i].step = step, opt->state[i].started = true;
    return st;
}
