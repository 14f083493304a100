/* ckpt_optim.c - the optimizer's and the scheduler's part of a checkpoint,
 * in PyTorch's state_dict layout flattened to safetensors keys (listed in
 * nb_checkpoint.h): param_groups with their params index lists and every
 * hyperparameter by its PyTorch key, per-parameter state (tensors as
 * tensors, scalars as metadata), and the scheduler's state_dict pairs.
 * Loading checks everything against the optimizer and scheduler built by
 * the caller before anything changes.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_impl.h"
#include "nb_ops.h"

#define GROUPS NB_CKPT_OPT "param_groups."
#define STATE NB_CKPT_OPT "state."

/* ---- saving -------------------------------------------------------------------- */

/* "[first, first + 1, ..., first + n - 1]", PyTorch's params list (malloc'd). */
static char *params_list(int first, int n) {
    size_t cap = 3 + (size_t)n * 13;
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    *p++ = '[';
    for (int i = 0; i < n; i++) p += snprintf(p, cap - (size_t)(p - s), i ? ", %d" : "%d", first + i);
    snprintf(p, cap - (size_t)(p - s), "]");
    return s;
}

static nb_status put_field(nb_ckpt_lists *l, int g, const nb_field *f, const void *options) {
    char key[128];
    snprintf(key, sizeof key, GROUPS "%d.%s", g, f->name);
    double v = nb_optim_field_get(f, options);
    switch (f->type) {
    case NB_FIELD_F64: return nb_ckpt_put_f64(l, key, v);
    case NB_FIELD_F64_NONE: return isnan(v) ? nb_ckpt_put(l, "None", "%s", key) : nb_ckpt_put_f64(l, key, v);
    case NB_FIELD_BOOL: return nb_ckpt_put(l, v != 0 ? "true" : "false", "%s", key);
    case NB_FIELD_INT:
    case NB_FIELD_ENUM: return nb_ckpt_put_i64(l, key, (int64_t)v);
    }
    return NB_OK;
}

nb_status nb_ckpt_save_optimizer(nb_ckpt_lists *l, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd) {
    const nb_optim_desc *d = opt->d;
    nb_status st = nb_ckpt_put(l, d->name, NB_CKPT_OPT "kind");
    if (!st) st = nb_ckpt_put_i64(l, NB_CKPT_OPT "num_params", opt->n);
    if (!st) st = nb_ckpt_put_i64(l, NB_CKPT_OPT "num_param_groups", opt->n_groups);
    char key[128];
    for (int g = 0; g < opt->n_groups && !st; g++) {
        const nb_optim_group *grp = &opt->groups[g];
        char *list = params_list(grp->first, grp->n);
        st = list ? nb_ckpt_put(l, list, GROUPS "%d.params", g)
                  : nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
        free(list);
        for (int k = 0; k < d->n_fields && !st; k++) st = put_field(l, g, &d->fields[k], &grp->o);
        snprintf(key, sizeof key, GROUPS "%d.initial_lr", g);
        if (!st && !isnan(grp->initial_lr)) st = nb_ckpt_put_f64(l, key, grp->initial_lr);
    }
    for (int i = 0; i < opt->n && !st; i++) {
        const nb_param_state *s = &opt->state[i];
        snprintf(key, sizeof key, STATE "%d.step", i);
        st = nb_ckpt_put_i64(l, key, s->step);
        if (!st) st = nb_ckpt_put(l, nb_ckpt_name_of(sd, nsd, opt->params[i]), STATE "%d.param", i);
        for (int k = 0; k < d->n_tensors && !st; k++) {
            if (!s->t[k]) continue;
            snprintf(key, sizeof key, STATE "%d.%s", i, d->tensor_names[k]);
            st = nb_ckpt_put_tensor(l, key, s->t[k]);
        }
        for (int k = 0; k < d->n_scalars && !st && s->started; k++) {
            snprintf(key, sizeof key, STATE "%d.%s", i, d->scalar_names[k]);
            st = nb_ckpt_put_f64(l, key, s->s[k]);
        }
    }
    return st;
}

nb_status nb_ckpt_save_scheduler(nb_ckpt_lists *l, const nb_scheduler *s) {
    int n = nb_scheduler_state_size(s);
    nb_scheduler_value *v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    nb_status st = nb_scheduler_state_dict(s, v, n);
    if (!st) st = nb_ckpt_put(l, nb_scheduler_kind(s), "scheduler.kind");
    if (!st) st = nb_ckpt_put_i64(l, "scheduler.num_values", n);
    char key[96];
    for (int j = 0; j < n && !st; j++) {
        snprintf(key, sizeof key, "scheduler.%s", v[j].key);
        st = nb_ckpt_put_f64(l, key, v[j].value);
    }
    free(v);
    return st;
}

/* ---- loading: the optimizer ------------------------------------------------------ */

void nb_ckpt_plan_free(nb_ckpt_opt_plan *p) {
    for (int i = 0; p->state && i < p->n; i++)
        for (int k = 0; k < NB_OPT_MAX_TENSORS; k++) nb_release(p->state[i].t[k]);
    free(p->options), free(p->initial_lr), free(p->state);
    memset(p, 0, sizeof *p);
}

/* Any double, inf and nan included (scalar state such as LBFGS's prev_loss). */
static nb_status get_any_f64(const nb_ckpt_reader *r, const char *key, double *out) {
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end) return nb_ckpt_bad_value(r, key, v, "a number");
    *out = x;
    return NB_OK;
}

static nb_status get_field(const nb_ckpt_reader *r, int g, const nb_field *f, void *options) {
    char key[128];
    snprintf(key, sizeof key, GROUPS "%d.%s", g, f->name);
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    char *end;
    double x = 0;
    switch (f->type) {
    case NB_FIELD_F64_NONE:
        if (!strcmp(v, "None")) {
            x = NAN;
            break;
        }
        /* fall through */
    case NB_FIELD_F64:
        x = strtod(v, &end);
        if (!*v || *end || !isfinite(x)) return nb_ckpt_bad_value(r, key, v, "a finite number");
        break;
    case NB_FIELD_BOOL: {
        bool b;
        nb_status st = nb_ckpt_get_bool(r, key, &b);
        if (st) return st;
        x = b;
        break;
    }
    case NB_FIELD_INT:
    case NB_FIELD_ENUM: {
        int64_t i;
        nb_status st = nb_ckpt_get_i64(r, key, f->type == NB_FIELD_ENUM ? 0 : INT64_MIN, &i);
        if (st) return st;
        if (f->type == NB_FIELD_ENUM && i > 1000) return nb_ckpt_bad_value(r, key, v, "an enum value");
        x = (double)i;
        break;
    }
    }
    nb_optim_field_set(f, options, x);
    return NB_OK;
}

/* The largest value a hyperparameter or lr may take: one that stays finite
 * in every parameter's dtype (an lr of 1e308 is inf in a float32 update, so
 * the first step would turn every parameter into inf or NaN). */
static double hyper_max(const nb_optimizer *opt) {
    for (int i = 0; i < opt->n; i++)
        if (nb_dtype_of(opt->params[i]) != NB_F64) return FLT_MAX;
    return DBL_MAX;
}

static nb_status overflows(const nb_ckpt_reader *r, const char *key, double v, double top) {
    return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: %s is %g, which overflows the parameters' %s", r->path,
                        key, v, top == FLT_MAX ? "float32" : "float64");
}

/* Group g's hyperparameters, checked as the constructor would. */
static nb_status plan_group(const nb_ckpt_reader *r, const nb_optimizer *opt, int g, bool legacy, nb_ckpt_opt_plan *p) {
    const nb_optim_desc *d = opt->d;
    const nb_optim_group *grp = &opt->groups[g];
    char key[128];
    nb_status st = NB_OK;
    snprintf(key, sizeof key, GROUPS "%d.params", g);
    const char *have = legacy ? NULL : nb_ckpt_req(r, key);
    if (!legacy && !have) return NB_ERR_FORMAT;
    char *want = params_list(grp->first, grp->n);
    if (!want) return nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    if (have && strcmp(have, want))
        st = nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: param group %d holds parameters %.60s, here %.60s",
                          r->path,
                          g, have, want);
    free(want);
    p->options[g] = grp->o;
    for (int k = 0; k < d->n_fields && !st; k++) {
        snprintf(key, sizeof key, GROUPS "%d.%s", g, d->fields[k].name);
        /* a key a later version added (Adam's decoupled_weight_decay) may be absent from an older file */
        if (legacy && !nb_safetensors_meta(r->f, key) && d->fields[k].type == NB_FIELD_BOOL) continue;
        st = get_field(r, g, &d->fields[k], &p->options[g]);
        double v = nb_optim_field_get(&d->fields[k], &p->options[g]), top = hyper_max(opt);
        if (!st && fabs(v) > top) st = overflows(r, key, v, top);
    }
    if (!st && !(p->options[g].head.lr >= 0.0))
        st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: param group %d: lr must be >= 0", r->path, g);
    if (!st && d->check(d->op, &p->options[g])) {
        char why[256];
        snprintf(why, sizeof why, "%s", nb_last_error());
        st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: param group %d: %s", r->path, g, why);
    }
    for (int i = grp->first; !st && d->check_param && i < grp->first + grp->n; i++)
        st = d->check_param(d->op, opt->params[i], &p->options[g], i);
    p->initial_lr[g] = NAN;
    snprintf(key, sizeof key, GROUPS "%d.initial_lr", g);
    if (!st && nb_safetensors_meta(r->f, key)) st = nb_ckpt_get_f64(r, key, 0.0, &p->initial_lr[g]);
    return st;
}

/* A copy of a file tensor on the parameter's device (unscoped), or NULL. */
static nb_tensor *state_copy(nb_tensor *t, const nb_tensor *param) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *c = nb_tensor_new_unscoped(nb_dim(t), nb_shape(t), nb_dtype_of(t), nb_device_of(param));
    nb_tensor *src = c ? nb_to_device(t, nb_device_of(param)) : NULL;
    nb_status st = src ? nb_copy_(c, src) : NB_ERR_OOM;
    nb_scope_end(s);
    if (st) nb_release(c);
    return st ? NULL : c;
}

/* The largest step count accepted: 2^53, where PyTorch's float step stops
 * counting exactly. */
#define NB_MAX_STEP ((int64_t)1 << 53)

/* State an optimizer can only have written >= 0 (second moments, sums of
 * squares, step sizes); a negative one would make every later step NaN. */
static bool nonnegative_state(const char *name) {
    static const char *const names[] = {"exp_avg_sq", "max_exp_avg_sq", "square_avg", "acc_delta", "sum",
                                        "exp_inf",    "row_var",        "col_var",    "variance",  "step_size"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

/* A state tensor's values: finite, and >= 0 where nonnegative_state. */
static nb_status check_state_values(const nb_ckpt_reader *r, const char *key, nb_tensor *t, const char *name) {
    nb_scope *s = nb_op_scope_begin();
    bool nonneg = nonnegative_state(name);
    nb_tensor *bad = nb_logical_not(nb_isfinite(t));
    if (nonneg && bad) bad = nb_logical_or(bad, nb_lt_scalar(t, 0));
    nb_tensor *any = nb_numel(t) ? nb_any(bad, NULL, 0, false) : NULL;
    double found = !nb_numel(t) ? 0 : any ? nb_item(any) : NAN;
    nb_scope_end(s);
    if (isnan(found)) return nb_last_status();
    if (found != 0)
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' holds %s", r->path, key,
                            nonneg ? "a negative, infinite or NaN value" : "an infinite or NaN value");
    return NB_OK;
}

/* A state tensor of the file against what the optimizer keeps (options: the file's). */
static nb_status check_state_tensor(const nb_ckpt_reader *r, const nb_optimizer *opt, const void *options, int i,
                                    int k, nb_tensor *t, const char *key) {
    const nb_optim_desc *d = opt->d;
    if (d->check_tensor) {
        nb_status st = d->check_tensor(opt, options, i, k, t);
        char why[256];
        if (st) snprintf(why, sizeof why, "%s", nb_last_error());
        return st ? nb_set_error(st, "load_checkpoint: %s: %s", r->path, why) : NB_OK;
    }
    nb_tensor *param = opt->params[i];
    int ndim = nb_dim(param);
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, nb_shape(param), sizeof(int64_t) * (size_t)ndim);
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (!d->has_tensor(options, param, k, &ndim, shape))
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: unexpected tensor '%s' for %s", r->path, key, d->name);
    if (nb_dim(t) != ndim || memcmp(nb_shape(t), shape, sizeof(int64_t) * (size_t)ndim))
        return nb_set_error(NB_ERR_SHAPE, "load_checkpoint: %s: '%s' is %s but parameter %d is %s", r->path, key,
                            nb_shape_str(t, a, sizeof a), i, nb_shape_str(param, b, sizeof b));
    if (nb_dtype_of(t) != nb_dtype_of(param))
        return nb_set_error(NB_ERR_DTYPE, "load_checkpoint: %s: '%s' is %s but parameter %d is %s", r->path, key,
                            nb_shape_str(t, a, sizeof a), i, nb_shape_str(param, b, sizeof b));
    return NB_OK;
}

/* Parameter i's step, name, state tensors and scalars; builds its new state. */
static nb_status plan_param(const nb_ckpt_reader *r, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd, int i,
                            nb_ckpt_opt_plan *p) {
    const nb_optim_desc *d = opt->d;
    nb_param_state *s = &p->state[i];
    const void *options = &p->options[nb_optim_group_of(opt, i)];
    char key[128];
    snprintf(key, sizeof key, STATE "%d.step", i);
    nb_status st = nb_ckpt_get_i64(r, key, 0, &s->step);
    if (st) return st;
    if (s->step > NB_MAX_STEP) /* PyTorch keeps step as a float tensor: exact up to 2^53 */
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' is %lld, above 2^53", r->path, key,
                            (long long)s->step);
    snprintf(key, sizeof key, STATE "%d.param", i);
    const char *pname = nb_ckpt_req(r, key);
    if (!pname) return NB_ERR_FORMAT;
    const char *here = nb_ckpt_name_of(sd, nsd, opt->params[i]);
    if (pname[0] && here[0] && strcmp(pname, here))
        return nb_set_error(NB_ERR_STATE,
                            "load_checkpoint: %s: optimizer parameter %d is '%s' in the file but '%s' here",
                            r->path, i, pname, here);
    int n_tensors = 0, n_scalars = 0;
    for (int k = 0; k < d->n_tensors && !st; k++) {
        snprintf(key, sizeof key, STATE "%d.%s", i, d->tensor_names[k]);
        nb_tensor *t = nb_safetensors_get(r->f, key);
        if (!t) continue;
        n_tensors++;
        st = check_state_tensor(r, opt, options, i, k, t, key);
        if (!st) st = check_state_values(r, key, t, d->tensor_names[k]);
        if (!st && !(s->t[k] = state_copy(t, opt->params[i]))) st = nb_last_status();
    }
    for (int k = 0; k < d->n_scalars && !st; k++) {
        snprintf(key, sizeof key, STATE "%d.%s", i, d->scalar_names[k]);
        n_scalars += nb_safetensors_meta(r->f, key) != NULL;
    }
    s->started = s->step > 0 || n_tensors > 0 || n_scalars > 0;
    if (st || !s->started) return st;
    /* a started state has all its scalars, and the tensors its options keep (LBFGS: on parameter 0 only) */
    bool need = d->check_tensor ? n_scalars > 0 : true;
    for (int k = 0; k < d->n_scalars && !st && need; k++) {
        snprintf(key, sizeof key, STATE "%d.%s", i, d->scalar_names[k]);
        st = get_any_f64(r, key, &s->s[k]);
    }
    for (int k = 0; k < d->n_tensors && !st && !d->check_tensor; k++) {
        int ndim = nb_dim(opt->params[i]);
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, nb_shape(opt->params[i]), sizeof(int64_t) * (size_t)ndim);
        snprintf(key, sizeof key, STATE "%d.%s", i, d->tensor_names[k]);
        if (!s->t[k] && d->has_tensor(options, opt->params[i], k, &ndim, shape))
            st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: missing tensor '%s'", r->path, key);
    }
    return st;
}

/* Every "optimizer." tensor of the file must be one plan_param looked at. */
static nb_status check_no_stray(const nb_ckpt_reader *r, const nb_optimizer *opt) {
    for (int t = 0; t < r->f->n_tensors; t++) {
        const char *name = r->f->tensors[t].name;
        if (strncmp(name, STATE, strlen(STATE))) {
            if (!strncmp(name, NB_CKPT_OPT, strlen(NB_CKPT_OPT)))
                return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: unexpected tensor '%s'", r->path, name);
            continue;
        }
        char *end;
        long i = strtol(name + strlen(STATE), &end, 10);
        bool known = end != name + strlen(STATE) && *end == '.' && i >= 0 && i < opt->n &&
                     nb_optim_tensor_index(opt->d, end + 1) >= 0;
        if (!known) return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: unexpected tensor '%s'", r->path, name);
    }
    return NB_OK;
}

nb_status nb_ckpt_plan_optimizer(const nb_ckpt_reader *r, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd,
                                 nb_ckpt_opt_plan *p) {
    const char *kind = nb_ckpt_req(r, NB_CKPT_OPT "kind");
    if (!kind) return NB_ERR_FORMAT;
    if (strcmp(kind, opt->d->name))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds %s state, the optimizer is %s", r->path, kind,
                            opt->d->name);
    int64_t n, n_groups = 1;
    nb_status st = nb_ckpt_get_i64(r, NB_CKPT_OPT "num_params", 0, &n);
    if (st) return st;
    if (n != opt->n)
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds state for %lld parameters, the optimizer has %d",
                            r->path, (long long)n, opt->n);
    /* files from before parameter groups have one group and no params lists */
    bool legacy = !nb_safetensors_meta(r->f, NB_CKPT_OPT "num_param_groups");
    if (!legacy && (st = nb_ckpt_get_i64(r, NB_CKPT_OPT "num_param_groups", 1, &n_groups))) return st;
    if (n_groups != opt->n_groups)
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds %lld param groups, the optimizer has %d", r->path,
                            (long long)n_groups, opt->n_groups);
    p->n = opt->n, p->n_groups = opt->n_groups;
    p->options = calloc((size_t)p->n_groups, sizeof *p->options);
    p->initial_lr = calloc((size_t)p->n_groups, sizeof *p->initial_lr);
    p->state = calloc((size_t)p->n + 1, sizeof *p->state);
    if (!p->options || !p->initial_lr || !p->state)
        return nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    for (int g = 0; g < p->n_groups && !st; g++) st = plan_group(r, opt, g, legacy, p);
    for (int i = 0; i < p->n && !st; i++) st = plan_param(r, opt, sd, nsd, i, p);
    return st ? st : check_no_stray(r, opt);
}

void nb_ckpt_commit_optimizer(nb_optimizer *opt, nb_ckpt_opt_plan *p) {
    for (int g = 0; g < opt->n_groups; g++) {
        opt->groups[g].o = p->options[g];
        opt->groups[g].initial_lr = p->initial_lr[g];
    }
    for (int i = 0; i < opt->n; i++) {
        for (int k = 0; k < NB_OPT_MAX_TENSORS; k++) nb_release(opt->state[i].t[k]);
        opt->state[i] = p->state[i];
        memset(p->state[i].t, 0, sizeof p->state[i].t);
    }
}

/* ---- loading: the scheduler ---------------------------------------------------------- */

/* The key of a file from before the scheduler's state_dict pairs
 * ("scheduler.<j>.last_epoch", .base_lr, .last_lr; j: the scheduler, then
 * its children), or NULL when there is none. */
static const char *legacy_key(const char *key, char *buf, size_t len) {
    int j = 0, used = 0;
    if (sscanf(key, "_schedulers.%d.%n", &j, &used) == 1 && used > 0) key += used, j += 1;
    if (!strcmp(key, "last_epoch")) snprintf(buf, len, "scheduler.%d.last_epoch", j);
    else if (!strcmp(key, "base_lrs.0")) snprintf(buf, len, "scheduler.%d.base_lr", j);
    else if (!strcmp(key, "_last_lr.0")) snprintf(buf, len, "scheduler.%d.last_lr", j);
    else return NULL;
    return buf;
}

nb_status nb_ckpt_plan_scheduler(const nb_ckpt_reader *r, const nb_scheduler *s, nb_scheduler_value **out, int *n_out) {
    const char *kind = nb_ckpt_req(r, "scheduler.kind");
    if (!kind) return NB_ERR_FORMAT;
    if (strcmp(kind, nb_scheduler_kind(s)))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds a %s, the scheduler is a %s", r->path, kind,
                            nb_scheduler_kind(s));
    int n = nb_scheduler_state_size(s);
    bool legacy =
        !nb_safetensors_meta(r->f, "scheduler.num_values") && nb_safetensors_meta(r->f, "scheduler.num_states");
    int64_t saved = 0;
    nb_status st = legacy ? NB_OK : nb_ckpt_get_i64(r, "scheduler.num_values", 0, &saved);
    if (!st && !legacy && saved != n)
        st = nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds %lld scheduler values, the scheduler has %d",
                          r->path,
                          (long long)saved, n);
    nb_scheduler_value *v = st ? NULL : calloc((size_t)n + 1, sizeof *v);
    if (!st && !v) st = nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    if (!st) st = nb_scheduler_state_dict(s, v, n); /* the keys */
    for (int j = 0; j < n && !st; j++) {
        char key[96], buf[96];
        snprintf(key, sizeof key, "scheduler.%s", v[j].key);
        const char *k = legacy ? legacy_key(v[j].key, buf, sizeof buf) : key;
        if (!k) st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: an old-format file has no '%s'", r->path, key);
        else st = get_any_f64(r, k, &v[j].value);
        if (!st && isnan(v[j].value)) st = nb_ckpt_bad_value(r, k, "nan", "a number");
        bool lr = strstr(v[j].key, "lr") != NULL; /* base_lrs, _last_lr: they become the optimizer's lrs */
        if (!st && lr && fabs(v[j].value) > hyper_max(s->opt)) st = overflows(r, k, v[j].value, hyper_max(s->opt));
    }
    if (st) free(v);
    else *out = v, *n_out = n;
    return st;
}
