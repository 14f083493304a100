/* checkpoint.c - nb_save_checkpoint / nb_load_checkpoint (the file's keys
 * are listed in nb_checkpoint.h). Saving gathers the parts into one list of
 * named tensors and one of metadata strings for nb_safetensors_save.
 * Loading runs in two phases so that a bad file changes nothing: first
 * every key is parsed and checked and the new optimizer state tensors are
 * built aside; then the scheduler, module, optimizer, RNG and loader are
 * updated, with the scheduler rolled back if the module refuses its keys.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_checkpoint.h"
#include "optim_impl.h"

#define OPT_PREFIX "optimizer."
#define GROUP "optimizer.param_groups.0."

/* ---- growing lists of metadata pairs and named tensors (owned strings) ---- */

typedef struct lists {
    nb_st_pair *meta;
    int n_meta, cap_meta;
    nb_named_tensor *ts;
    int n_ts, cap_ts;
} lists;

static void lists_free(lists *l) {
    for (int i = 0; i < l->n_meta; i++) free((char *)l->meta[i].key), free((char *)l->meta[i].value);
    for (int i = 0; i < l->n_ts; i++) free((char *)l->ts[i].name);
    free(l->meta), free(l->ts);
}

static bool grow(void **items, int *cap, int n, size_t size) {
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 32;
    void *p = realloc(*items, size * (size_t)c);
    if (!p) return false;
    *items = p, *cap = c;
    return true;
}

/* Adds key (printf-formatted from kfmt) = value. */
static nb_status put(lists *l, const char *value, const char *kfmt, ...) __attribute__((format(printf, 3, 4)));
static nb_status put(lists *l, const char *value, const char *kfmt, ...) {
    char key[512];
    va_list ap;
    va_start(ap, kfmt);
    vsnprintf(key, sizeof key, kfmt, ap);
    va_end(ap);
    if (!grow((void **)&l->meta, &l->cap_meta, l->n_meta, sizeof *l->meta))
        return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) return free(k), free(v), nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    l->meta[l->n_meta++] = (nb_st_pair){k, v};
    return NB_OK;
}

static nb_status put_i64(lists *l, const char *key, int64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)v);
    return put(l, s, "%s", key);
}

static nb_status put_u64(lists *l, const char *key, uint64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    return put(l, s, "%s", key);
}

/* %.17g round-trips every double exactly through strtod. */
static nb_status put_f64(lists *l, const char *key, double v) {
    char s[40];
    snprintf(s, sizeof s, "%.17g", v);
    return put(l, s, "%s", key);
}

static nb_status put_tensor(lists *l, const char *name, nb_tensor *t) {
    if (!grow((void **)&l->ts, &l->cap_ts, l->n_ts, sizeof *l->ts))
        return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    char *n = strdup(name);
    if (!n) return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    l->ts[l->n_ts++] = (nb_named_tensor){n, t};
    return NB_OK;
}

/* ---- saving ----------------------------------------------------------------- */

/* The module name of tensor t, or "". */
static const char *name_of(const nb_named_tensor *sd, int n, const nb_tensor *t) {
    for (int i = 0; i < n; i++)
        if (sd[i].tensor == t) return sd[i].name;
    return "";
}

static nb_status save_optimizer(lists *l, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd) {
    nb_status st = put(l, nb_optimizer_kind(opt), OPT_PREFIX "kind");
    if (!st) st = put_i64(l, OPT_PREFIX "num_params", opt->n);
    if (!st) st = put_f64(l, GROUP "lr", opt->lr);
    if (opt->kind == NB_OPTIM_SGD) {
        const nb_sgd_options *o = &opt->sgd;
        if (!st) st = put_f64(l, GROUP "momentum", o->momentum);
        if (!st) st = put_f64(l, GROUP "dampening", o->dampening);
        if (!st) st = put_f64(l, GROUP "weight_decay", o->weight_decay);
        if (!st) st = put(l, o->nesterov ? "true" : "false", GROUP "nesterov");
        if (!st) st = put(l, o->maximize ? "true" : "false", GROUP "maximize");
    } else {
        const nb_adam_options *o = &opt->adam;
        if (!st) st = put_f64(l, GROUP "betas.0", o->betas[0]);
        if (!st) st = put_f64(l, GROUP "betas.1", o->betas[1]);
        if (!st) st = put_f64(l, GROUP "eps", o->eps);
        if (!st) st = put_f64(l, GROUP "weight_decay", o->weight_decay);
        if (!st) st = put(l, o->amsgrad ? "true" : "false", GROUP "amsgrad");
        if (!st) st = put(l, o->maximize ? "true" : "false", GROUP "maximize");
    }
    char key[96];
    for (int i = 0; i < opt->n && !st; i++) {
        snprintf(key, sizeof key, OPT_PREFIX "state.%d.step", i);
        st = put_i64(l, key, opt->state[i].step);
        if (!st) st = put(l, name_of(sd, nsd, opt->params[i]), OPT_PREFIX "state.%d.param", i);
        for (int k = 0; k < NB_ST_COUNT && !st; k++) {
            if (!opt->state[i].state[k]) continue;
            snprintf(key, sizeof key, OPT_PREFIX "state.%d.%s", i, nb_optim_state_names[k]);
            st = put_tensor(l, key, opt->state[i].state[k]);
        }
    }
    return st;
}

static nb_status save_scheduler(lists *l, const nb_scheduler *s) {
    int n = nb_scheduler_num_states(s);
    nb_scheduler_state *rec = calloc(n > 0 ? (size_t)n : 1, sizeof *rec);
    if (!rec) return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    nb_status st = nb_scheduler_get_state(s, rec, n);
    if (!st) st = put(l, nb_scheduler_kind(s), "scheduler.kind");
    if (!st) st = put_i64(l, "scheduler.num_states", n);
    char key[64];
    for (int j = 0; j < n && !st; j++) {
        snprintf(key, sizeof key, "scheduler.%d.last_epoch", j);
        st = put_i64(l, key, rec[j].last_epoch);
        snprintf(key, sizeof key, "scheduler.%d.base_lr", j);
        if (!st) st = put_f64(l, key, rec[j].base_lr);
        snprintf(key, sizeof key, "scheduler.%d.last_lr", j);
        if (!st) st = put_f64(l, key, rec[j].last_lr);
    }
    free(rec);
    return st;
}

static nb_status save_parts(lists *l, const nb_checkpoint *ck, const nb_named_tensor *sd, int nsd) {
    nb_generator *g = ck->generator ? ck->generator : nb_default_generator();
    nb_status st = put(l, "pt", "format");
    if (!st) st = put(l, "1", "nabla.checkpoint");
    if (!st) st = put_i64(l, "global_step", ck->global_step);
    if (!st) st = put_u64(l, "rng.seed", g->seed);
    if (!st) st = put_u64(l, "rng.offset", g->offset);
    if (!st && ck->loader) {
        st = put_i64(l, "loader.epoch", nb_loader_epoch(ck->loader));
        if (!st) st = put_i64(l, "loader.position", nb_loader_position(ck->loader));
        if (!st) st = put_u64(l, "loader.seed", nb_loader_get_options(ck->loader).seed);
        if (!st) st = put_i64(l, "loader.num_batches", nb_loader_num_batches(ck->loader));
    }
    for (int i = 0; i < nsd && !st; i++) st = put_tensor(l, sd[i].name, sd[i].tensor);
    if (!st && ck->optimizer) st = save_optimizer(l, ck->optimizer, sd, nsd);
    if (!st && ck->scheduler) st = save_scheduler(l, ck->scheduler);
    for (int i = 0; i < ck->n_user && !st; i++) st = put(l, ck->user[i].value, "user.%s", ck->user[i].key);
    return st;
}

nb_status nb_save_checkpoint(const char *path, const nb_checkpoint *ck) {
    if (!path || !ck || !ck->module || ck->n_user < 0 || (ck->n_user && !ck->user))
        return nb_set_error(NB_ERR_INVALID_ARG, "save_checkpoint: NULL path, checkpoint or module, or a bad user list");
    for (int i = 0; i < ck->n_user; i++)
        if (!ck->user[i].key || !ck->user[i].value)
            return nb_set_error(NB_ERR_INVALID_ARG, "save_checkpoint: user pair %d has a NULL key or value", i);
    nb_named_tensor *sd = NULL;
    int nsd = nb_module_state_dict(ck->module, &sd);
    if (nsd < 0) return nb_last_status();
    for (int i = 0; i < nsd; i++)
        if (!strncmp(sd[i].name, OPT_PREFIX, strlen(OPT_PREFIX))) {
            nb_status st = nb_set_error(NB_ERR_INVALID_ARG, "save_checkpoint: module key '%s' uses the reserved prefix '"
                                        OPT_PREFIX "'", sd[i].name);
            return free(sd), st;
        }
    lists l = {0};
    nb_status st = save_parts(&l, ck, sd, nsd);
    if (!st) st = nb_safetensors_save(path, l.ts, l.n_ts, l.meta, l.n_meta);
    lists_free(&l);
    free(sd);
    return st;
}

/* ---- loading: typed metadata ---------------------------------------------- */

typedef struct reader {
    const nb_safetensors *f;
    const char *path;
} reader;

static const char *req(const reader *r, const char *key) {
    const char *v = nb_safetensors_meta(r->f, key);
    if (!v) nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s has no '%s' (saved without that part?)", r->path, key);
    return v;
}

static nb_status bad_value(const reader *r, const char *key, const char *v, const char *want) {
    return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' is '%.40s', not %s", r->path, key, v, want);
}

/* Strict decimal integers: digits only (a leading '-' where signed), and a
 * value that overflows is an error, not strtoll's saturated INT64_MAX. */
static bool all_digits(const char *v) {
    if (!*v) return false;
    for (const char *c = v; *c; c++)
        if (*c < '0' || *c > '9') return false;
    return true;
}

static nb_status get_i64(const reader *r, const char *key, int64_t min, int64_t *out) {
    const char *v = req(r, key);
    if (!v) return NB_ERR_FORMAT;
    const char *want = min >= 0 ? "an integer in [0, 2^63)" : "an integer in [-2^63, 2^63)";
    if (!all_digits(v[0] == '-' ? v + 1 : v)) return bad_value(r, key, v, want);
    errno = 0;
    long long x = strtoll(v, NULL, 10);
    if (errno == ERANGE || x < min) return bad_value(r, key, v, want);
    *out = x;
    return NB_OK;
}

static nb_status get_u64(const reader *r, const char *key, uint64_t *out) {
    const char *v = req(r, key);
    if (!v) return NB_ERR_FORMAT;
    if (!all_digits(v)) return bad_value(r, key, v, "an unsigned integer below 2^64");
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno == ERANGE) return bad_value(r, key, v, "an unsigned integer below 2^64");
    *out = x;
    return NB_OK;
}

/* A finite double >= min. */
static nb_status get_f64(const reader *r, const char *key, double min, double *out) {
    const char *v = req(r, key);
    if (!v) return NB_ERR_FORMAT;
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x) || !(x >= min)) return bad_value(r, key, v, "a finite number in range");
    *out = x;
    return NB_OK;
}

static nb_status get_bool(const reader *r, const char *key, bool *out) {
    const char *v = req(r, key);
    if (!v) return NB_ERR_FORMAT;
    if (strcmp(v, "true") && strcmp(v, "false")) return bad_value(r, key, v, "true or false");
    *out = !strcmp(v, "true");
    return NB_OK;
}

/* ---- loading: the optimizer -------------------------------------------------- */

typedef struct opt_plan {
    double lr;
    nb_sgd_options sgd;
    nb_adam_options adam;
    int64_t *steps;                         /* [n] */
    nb_tensor *(*state)[NB_ST_COUNT];       /* [n] new tensors, owned until committed */
    int n;
} opt_plan;

static void plan_free(opt_plan *p) {
    for (int i = 0; p->state && i < p->n; i++)
        for (int k = 0; k < NB_ST_COUNT; k++) nb_release(p->state[i][k]);
    free(p->steps), free(p->state);
    memset(p, 0, sizeof *p);
}

/* The largest value a hyperparameter may take: one that stays finite in
 * every parameter's dtype (an lr of 1e308 is inf in a float32 update, so
 * the first step would turn every parameter into inf or NaN). */
static double hyper_max(const nb_optimizer *opt) {
    for (int i = 0; i < opt->n; i++)
        if (nb_dtype_of(opt->params[i]) != NB_F64) return FLT_MAX;
    return DBL_MAX;
}

/* Checks the hyperparameters read so far against hyper_max. */
static nb_status check_hyper_range(const reader *r, const nb_optimizer *opt, const double *v, const char *const *names,
                                   int n) {
    double top = hyper_max(opt);
    for (int i = 0; i < n; i++)
        if (fabs(v[i]) > top)
            return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: %s%s is %g, which overflows the parameters' %s",
                                r->path, GROUP, names[i], v[i], top == FLT_MAX ? "float32" : "float64");
    return NB_OK;
}

static nb_status plan_hyper(const reader *r, const nb_optimizer *opt, opt_plan *p) {
    nb_status st = get_f64(r, GROUP "lr", 0.0, &p->lr);
    bool b = false;
    if (opt->kind == NB_OPTIM_SGD) {
        nb_sgd_options *o = &p->sgd;
        if (!st) st = get_f64(r, GROUP "momentum", 0.0, &o->momentum);
        if (!st) st = get_f64(r, GROUP "dampening", -INFINITY, &o->dampening);
        if (!st) st = get_f64(r, GROUP "weight_decay", 0.0, &o->weight_decay);
        if (!st) st = get_bool(r, GROUP "nesterov", &b), o->nesterov = b;
        if (!st) st = get_bool(r, GROUP "maximize", &b), o->maximize = b;
        if (!st && o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
            st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: nesterov SGD with momentum %g, dampening %g", r->path,
                              o->momentum, o->dampening);
        static const char *const names[] = {"lr", "momentum", "dampening", "weight_decay"};
        if (!st) st = check_hyper_range(r, opt, (double[]){p->lr, o->momentum, o->dampening, o->weight_decay}, names, 4);
        o->lr = p->lr;
        return st;
    }
    nb_adam_options *o = &p->adam;
    if (!st) st = get_f64(r, GROUP "betas.0", 0.0, &o->betas[0]);
    if (!st) st = get_f64(r, GROUP "betas.1", 0.0, &o->betas[1]);
    if (!st) st = get_f64(r, GROUP "eps", 0.0, &o->eps);
    if (!st) st = get_f64(r, GROUP "weight_decay", 0.0, &o->weight_decay);
    if (!st) st = get_bool(r, GROUP "amsgrad", &b), o->amsgrad = b;
    if (!st) st = get_bool(r, GROUP "maximize", &b), o->maximize = b;
    if (!st && (o->betas[0] >= 1.0 || o->betas[1] >= 1.0))
        st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: betas (%g, %g) not in [0, 1)", r->path, o->betas[0],
                          o->betas[1]);
    static const char *const names[] = {"lr", "eps", "weight_decay"};
    if (!st) st = check_hyper_range(r, opt, (double[]){p->lr, o->eps, o->weight_decay}, names, 3);
    o->lr = p->lr;
    return st;
}

/* Which state tensors the optimizer keeps under the planned options. */
static bool plan_has_state(const nb_optimizer *opt, const opt_plan *p, int k) {
    if (opt->kind == NB_OPTIM_SGD) return k == NB_ST_MOMENTUM && p->sgd.momentum != 0.0;
    return k == NB_ST_EXP_AVG || k == NB_ST_EXP_AVG_SQ || (k == NB_ST_MAX_EXP_AVG_SQ && p->adam.amsgrad);
}

/* The largest step count accepted: 2^53, where PyTorch's float step stops
 * counting exactly. */
#define NB_MAX_STEP ((int64_t)1 << 53)

/* A state tensor's values: finite, and for the second moments (exp_avg_sq,
 * max_exp_avg_sq) >= 0, as an optimizer could have written them; a NaN or
 * negative second moment would make every later step NaN. */
static nb_status check_state_values(const reader *r, const char *key, nb_tensor *t, int k) {
    nb_scope *s = nb_op_scope_begin();
    bool second = k == NB_ST_EXP_AVG_SQ || k == NB_ST_MAX_EXP_AVG_SQ;
    nb_tensor *bad = nb_logical_not(nb_isfinite(t));
    if (second && bad) bad = nb_logical_or(bad, nb_lt_scalar(t, 0));
    nb_tensor *any = nb_any(bad, NULL, 0, false);
    double found = any ? nb_item(any) : NAN;
    nb_scope_end(s);
    if (isnan(found)) return nb_last_status();
    if (found != 0)
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' holds %s", r->path, key,
                            second ? "a negative, infinite or NaN value" : "an infinite or NaN value");
    return NB_OK;
}

/* Checks parameter i's step, name and state tensors; builds its new state. */
static nb_status plan_param(const reader *r, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd, int i,
                            opt_plan *p) {
    char key[96];
    snprintf(key, sizeof key, OPT_PREFIX "state.%d.step", i);
    nb_status st = get_i64(r, key, 0, &p->steps[i]);
    if (st) return st;
    if (p->steps[i] > NB_MAX_STEP) /* PyTorch keeps step as a float tensor: exact up to 2^53 */
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' is %lld, above 2^53", r->path, key,
                            (long long)p->steps[i]);
    snprintf(key, sizeof key, OPT_PREFIX "state.%d.param", i);
    const char *pname = req(r, key);
    if (!pname) return NB_ERR_FORMAT;
    const char *here = name_of(sd, nsd, opt->params[i]);
    if (pname[0] && here[0] && strcmp(pname, here))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: optimizer parameter %d is '%s' in the file but '%s' here",
                            r->path, i, pname, here);
    nb_tensor *param = opt->params[i];
    bool any = false;
    for (int k = 0; k < NB_ST_COUNT; k++) {
        snprintf(key, sizeof key, OPT_PREFIX "state.%d.%s", i, nb_optim_state_names[k]);
        any |= nb_safetensors_get(r->f, key) != NULL;
    }
    for (int k = 0; k < NB_ST_COUNT && !st; k++) {
        snprintf(key, sizeof key, OPT_PREFIX "state.%d.%s", i, nb_optim_state_names[k]);
        nb_tensor *t = nb_safetensors_get(r->f, key);
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        if (!plan_has_state(opt, p, k)) {
            if (t) st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: unexpected tensor '%s' for %s", r->path, key,
                                     nb_optimizer_kind(opt));
        } else if (!t) {
            if (any || p->steps[i] > 0)
                st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: missing tensor '%s'", r->path, key);
        } else if (nb_dim(t) != nb_dim(param) ||
                   memcmp(nb_shape(t), nb_shape(param), sizeof(int64_t) * (size_t)nb_dim(t))) {
            st = nb_set_error(NB_ERR_SHAPE, "load_checkpoint: %s: '%s' is %s but parameter %d is %s", r->path, key,
                              nb_shape_str(t, a, sizeof a), i, nb_shape_str(param, b, sizeof b));
        } else if (nb_dtype_of(t) != nb_dtype_of(param)) {
            st = nb_set_error(NB_ERR_DTYPE, "load_checkpoint: %s: '%s' is %s but parameter %d is %s", r->path, key,
                              nb_shape_str(t, a, sizeof a), i, nb_shape_str(param, b, sizeof b));
        } else if ((st = check_state_values(r, key, t, k)) != NB_OK) {
            break;
        } else {
            nb_scope *s = nb_op_scope_begin();
            nb_tensor *c = nb_tensor_new_unscoped(nb_dim(t), nb_shape(t), nb_dtype_of(t), nb_device_of(param));
            nb_tensor *src = c ? nb_to_device(t, nb_device_of(param)) : NULL;
            st = src ? nb_copy_(c, src) : nb_last_status();
            nb_scope_end(s);
            p->state[i][k] = c;
            if (!c && !st) st = nb_last_status();
        }
    }
    return st;
}

/* Every "optimizer." tensor of the file must be one plan_param looked at. */
static nb_status check_no_stray(const reader *r, const nb_optimizer *opt) {
    for (int t = 0; t < r->f->n_tensors; t++) {
        const char *name = r->f->tensors[t].name;
        if (strncmp(name, OPT_PREFIX, strlen(OPT_PREFIX))) continue;
        bool known = false;
        char key[96];
        for (int i = 0; i < opt->n && !known; i++)
            for (int k = 0; k < NB_ST_COUNT && !known; k++) {
                snprintf(key, sizeof key, OPT_PREFIX "state.%d.%s", i, nb_optim_state_names[k]);
                known = !strcmp(key, name);
            }
        if (!known) return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: unexpected tensor '%s'", r->path, name);
    }
    return NB_OK;
}

static nb_status plan_optimizer(const reader *r, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd,
                                opt_plan *p) {
    const char *kind = req(r, OPT_PREFIX "kind");
    if (!kind) return NB_ERR_FORMAT;
    if (strcmp(kind, nb_optimizer_kind(opt)))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds %s state, the optimizer is %s", r->path, kind,
                            nb_optimizer_kind(opt));
    int64_t n;
    nb_status st = get_i64(r, OPT_PREFIX "num_params", 0, &n);
    if (st) return st;
    if (n != opt->n)
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds state for %lld parameters, the optimizer has %d",
                            r->path, (long long)n, opt->n);
    p->n = opt->n;
    p->steps = calloc((size_t)p->n, sizeof *p->steps);
    p->state = calloc((size_t)p->n, sizeof *p->state);
    if (!p->steps || !p->state) return nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    st = plan_hyper(r, opt, p);
    for (int i = 0; i < p->n && !st; i++) st = plan_param(r, opt, sd, nsd, i, p);
    return st ? st : check_no_stray(r, opt);
}

/* Swaps the planned state in (cannot fail). */
static void commit_optimizer(nb_optimizer *opt, opt_plan *p) {
    opt->lr = p->lr;
    if (opt->kind == NB_OPTIM_SGD) opt->sgd = p->sgd;
    else opt->adam = p->adam;
    for (int i = 0; i < opt->n; i++) {
        opt->state[i].step = p->steps[i];
        for (int k = 0; k < NB_ST_COUNT; k++) {
            nb_release(opt->state[i].state[k]);
            opt->state[i].state[k] = p->state[i][k];
            p->state[i][k] = NULL;
        }
    }
}

/* ---- loading: scheduler, loader, RNG ------------------------------------------ */

static nb_status plan_scheduler(const reader *r, const nb_scheduler *s, nb_scheduler_state **out, int *n_out) {
    const char *kind = req(r, "scheduler.kind");
    if (!kind) return NB_ERR_FORMAT;
    int n = nb_scheduler_num_states(s);
    int64_t saved;
    if (strcmp(kind, nb_scheduler_kind(s)))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds a %s, the scheduler is a %s", r->path, kind,
                            nb_scheduler_kind(s));
    nb_status st = get_i64(r, "scheduler.num_states", 0, &saved);
    if (!st && saved != n)
        st = nb_set_error(NB_ERR_STATE, "load_checkpoint: %s holds %lld scheduler records, the scheduler has %d",
                          r->path, (long long)saved, n);
    nb_scheduler_state *rec = st ? NULL : calloc(n > 0 ? (size_t)n : 1, sizeof *rec);
    if (!st && !rec) st = nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    char key[64];
    for (int j = 0; j < n && !st; j++) {
        snprintf(key, sizeof key, "scheduler.%d.last_epoch", j);
        st = get_i64(r, key, j ? -1 : 0, &rec[j].last_epoch);
        snprintf(key, sizeof key, "scheduler.%d.base_lr", j);
        if (!st) st = get_f64(r, key, 0.0, &rec[j].base_lr);
        snprintf(key, sizeof key, "scheduler.%d.last_lr", j);
        if (!st) st = get_f64(r, key, 0.0, &rec[j].last_lr);
    }
    if (st) free(rec);
    else *out = rec, *n_out = n;
    return st;
}

typedef struct loader_plan {
    int64_t epoch, position;
} loader_plan;

static nb_status plan_loader(const reader *r, const nb_checkpoint *ck, loader_plan *lp) {
    int64_t nb;
    uint64_t seed;
    nb_status st = get_i64(r, "loader.epoch", 0, &lp->epoch);
    if (!st) st = get_i64(r, "loader.position", 0, &lp->position);
    if (!st) st = get_u64(r, "loader.seed", &seed);
    if (!st) st = get_i64(r, "loader.num_batches", 0, &nb);
    if (st) return st;
    uint64_t have = nb_loader_get_options(ck->loader).seed; /* the order depends on it */
    if (seed != have)
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: loader seed %llu saved, the loader has %llu", r->path,
                            (unsigned long long)seed, (unsigned long long)have);
    if (nb != nb_loader_num_batches(ck->loader))
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: %lld batches per epoch saved, the loader has %lld",
                            r->path, (long long)nb, (long long)nb_loader_num_batches(ck->loader));
    if (lp->position > nb)
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: loader position %lld past %lld batches", r->path,
                            (long long)lp->position, (long long)nb);
    return NB_OK;
}

/* ---- loading ------------------------------------------------------------------ */

typedef struct load_state {
    reader r;
    nb_named_tensor *sd, *model_ts; /* module state_dict; the file's non-optimizer tensors */
    int nsd, n_model;
    opt_plan opt;
    nb_scheduler_state *sched, *sched_backup;
    int n_sched;
    loader_plan lp;
    int64_t step;
    uint64_t rng_seed, rng_offset;
} load_state;

/* Phase 1: parses and checks everything; changes nothing. */
static nb_status plan_all(const nb_checkpoint *ck, load_state *ls) {
    const reader *r = &ls->r;
    const char *ver = nb_safetensors_meta(r->f, "nabla.checkpoint");
    if (!ver || strcmp(ver, "1"))
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s is not a nabla checkpoint (nabla.checkpoint is %s%s%s)",
                            r->path, ver ? "'" : "", ver ? ver : "missing", ver ? "'" : "");
    nb_status st = get_i64(r, "global_step", 0, &ls->step);
    if (!st) st = get_u64(r, "rng.seed", &ls->rng_seed);
    if (!st) st = get_u64(r, "rng.offset", &ls->rng_offset);
    if (!st && ck->loader) st = plan_loader(r, ck, &ls->lp);
    if (!st && (ls->nsd = nb_module_state_dict(ck->module, &ls->sd)) < 0) st = nb_last_status();
    if (!st && ck->optimizer) st = plan_optimizer(r, ck->optimizer, ls->sd, ls->nsd, &ls->opt);
    if (!st && ck->scheduler) st = plan_scheduler(r, ck->scheduler, &ls->sched, &ls->n_sched);
    if (!st && ck->optimizer && ck->scheduler) {
        double top = hyper_max(ck->optimizer); /* the scheduler's lrs become the optimizer's */
        for (int j = 0; !st && j < ls->n_sched; j++)
            if (ls->sched[j].base_lr > top || ls->sched[j].last_lr > top)
                st = nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: scheduler record %d's lr (base %g, last %g) "
                                  "overflows the parameters' float32", r->path, j, ls->sched[j].base_lr,
                                  ls->sched[j].last_lr);
    }
    if (!st && ck->scheduler) {
        ls->sched_backup = calloc((size_t)ls->n_sched + 1, sizeof *ls->sched_backup);
        st = ls->sched_backup ? nb_scheduler_get_state(ck->scheduler, ls->sched_backup, ls->n_sched)
                              : nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    }
    if (!st && !(ls->model_ts = malloc(sizeof *ls->model_ts * ((size_t)r->f->n_tensors + 1))))
        st = nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    for (int i = 0; !st && i < r->f->n_tensors; i++)
        if (strncmp(r->f->tensors[i].name, OPT_PREFIX, strlen(OPT_PREFIX)))
            ls->model_ts[ls->n_model++] = r->f->tensors[i];
    return st;
}

/* Phase 2: the scheduler first (its set_state validates the last details
 * and changes nothing on failure), then the module (checked before copied),
 * then what cannot fail. */
static nb_status apply_all(nb_checkpoint *ck, load_state *ls) {
    double lr_backup = ck->optimizer ? nb_optimizer_get_lr(ck->optimizer) : 0.0;
    nb_status st = ck->scheduler ? nb_scheduler_set_state(ck->scheduler, ls->sched, ls->n_sched) : NB_OK;
    if (st) return st;
    st = nb_module_load_tensors(ck->module, ls->model_ts, ls->n_model, !ck->non_strict, ck->report);
    if (st) {
        if (ck->scheduler) nb_scheduler_set_state(ck->scheduler, ls->sched_backup, ls->n_sched);
        if (ck->optimizer) nb_optimizer_set_lr(ck->optimizer, lr_backup);
        return st;
    }
    if (ck->optimizer) commit_optimizer(ck->optimizer, &ls->opt);
    nb_generator *g = ck->generator ? ck->generator : nb_default_generator();
    g->seed = ls->rng_seed, g->offset = ls->rng_offset;
    ck->global_step = ls->step;
    /* checked against the loader in plan_loader, so this cannot fail */
    return ck->loader ? nb_loader_seek(ck->loader, ls->lp.epoch, ls->lp.position) : NB_OK;
}

nb_status nb_load_checkpoint(const char *path, nb_checkpoint *ck, nb_safetensors **file) {
    if (file) *file = NULL;
    if (ck && ck->report) memset(ck->report, 0, sizeof *ck->report);
    if (!path || !ck || !ck->module)
        return nb_set_error(NB_ERR_INVALID_ARG, "load_checkpoint: NULL path, checkpoint or module");
    nb_safetensors *f = nb_safetensors_load(path);
    if (!f) return nb_last_status();
    load_state ls = {.r = {f, path}};
    nb_status st = plan_all(ck, &ls);
    if (!st) st = apply_all(ck, &ls);
    plan_free(&ls.opt);
    free(ls.sd), free(ls.model_ts), free(ls.sched), free(ls.sched_backup);
    if (!st && file) *file = f;
    else nb_safetensors_free(f);
    return st;
}
