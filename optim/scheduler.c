/* scheduler.c - what every learning-rate scheduler shares (PyTorch 2.11's
 * LRScheduler): the base lrs from the groups' initial_lr, the constructor's
 * initial step, stepping every parameter group all or nothing (lrs and
 * cycled momenta), the composite schedulers SequentialLR and
 * ChainedScheduler, and the state as PyTorch-named (key, value) pairs. The
 * curves themselves are in sched_decay.c, sched_cyclic.c and
 * sched_plateau.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_impl.h"

static const char *const kind_names[NB_SCHED_KIND_COUNT] = {
    "StepLR",       "MultiStepLR", "ExponentialLR",    "CosineAnnealingLR", "LinearLR",
    "OneCycleLR",   "SequentialLR", "LambdaLR",        "MultiplicativeLR",  "ConstantLR",
    "PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR", "ReduceLROnPlateau", "ChainedScheduler"};
static const char *const op_names[NB_SCHED_KIND_COUNT] = {
    "step_lr",       "multi_step_lr",   "exponential_lr",  "cosine_annealing_lr", "linear_lr",
    "one_cycle_lr",  "sequential_lr",   "lambda_lr",       "multiplicative_lr",   "constant_lr",
    "polynomial_lr", "cosine_annealing_warm_restarts", "cyclic_lr", "reduce_lr_on_plateau", "chained_scheduler"};

const char *nb_sched_op(const nb_scheduler *s) { return op_names[s->kind]; }

static bool is_composite(const nb_scheduler *s) {
    return s->kind == NB_SCHED_SEQUENTIAL || s->kind == NB_SCHED_CHAINED;
}

/* ---- construction ------------------------------------------------------------ */

nb_scheduler *nb_sched_new(nb_sched_kind kind, nb_optimizer *opt, const char *op) {
    if (!opt) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer is NULL", op);
    nb_scheduler *s = calloc(1, sizeof *s);
    double *pg = s ? calloc((size_t)opt->n_groups * NB_PG_COUNT, sizeof *pg) : NULL;
    if (!pg) {
        free(s);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    s->kind = kind;
    s->opt = opt;
    s->n_groups = opt->n_groups;
    s->pg = pg;
    s->last_epoch = -1;
    for (int g = 0; g < s->n_groups; g++) *nb_sched_pg(s, g, NB_PG_LAST_LR) = opt->groups[g].o.head.lr;
    return s;
}

nb_scheduler *nb_sched_initial_step(nb_scheduler *s) {
    for (int g = 0; g < s->n_groups; g++) { /* group.setdefault("initial_lr", group["lr"]) */
        nb_optim_group *grp = &s->opt->groups[g];
        if (isnan(grp->initial_lr)) grp->initial_lr = grp->o.head.lr;
        *nb_sched_pg(s, g, NB_PG_BASE_LR) = grp->initial_lr;
    }
    s->initial = true;
    nb_status st = nb_sched_advance(s, 0, false);
    s->initial = false;
    if (st) {
        nb_scheduler_free(s);
        return NULL;
    }
    return s;
}

nb_status nb_sched_fill_pg(nb_scheduler *s, int k, double value, const double *list, const char *op,
                           const char *what) {
    for (int g = 0; g < s->n_groups; g++) {
        double v = list ? list[g] : value;
        if (!(v >= 0.0) || !isfinite(v))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s%s must be >= 0 and finite (got %g for group %d)", op, what,
                                list ? "s" : "", v, g);
        *nb_sched_pg(s, g, k) = v;
    }
    return NB_OK;
}

nb_status nb_sched_momentum_kind(nb_scheduler *s, const char *op) {
    const nb_optim_desc *d = s->opt->d;
    s->use_beta1 = nb_optim_field(d, "betas.0") != NULL;
    if (s->use_beta1 || nb_optim_field(d, "momentum")) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG,
                        "%s: optimizer must support momentum or beta1 with `cycle_momentum` option enabled "
                        "(%s has neither; set cycle_momentum to NB_FLAG_FALSE)",
                        op, d->name);
}

nb_status nb_sched_set_momenta(nb_scheduler *s, const double *m) {
    const char *key = s->use_beta1 ? "betas.0" : "momentum";
    double *old = malloc(sizeof *old * (size_t)s->n_groups);
    if (!old) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", nb_sched_op(s));
    nb_status st = NB_OK;
    int g = 0;
    for (; g < s->n_groups && !st; g++) {
        nb_optimizer_get_group_option(s->opt, g, key, &old[g]);
        st = nb_optim_set_field(s->opt, g, key, m[g]);
    }
    if (st) /* roll back the groups already set */
        for (int j = 0; j < g - 1; j++) nb_optim_set_field(s->opt, j, key, old[j]);
    free(old);
    return st;
}

/* ---- stepping ---------------------------------------------------------------- */

static nb_status check_groups(const nb_scheduler *s) {
    if (s->opt->n_groups == s->n_groups) return NB_OK;
    return nb_set_error(NB_ERR_STATE, "%s: the optimizer has %d param groups, the scheduler was built for %d",
                        nb_sched_op(s), s->opt->n_groups, s->n_groups);
}

/* The lr (and momentum) of group g at epoch e by the kind's get_lr. */
static nb_status kind_lr(const nb_scheduler *s, int g, int64_t e, bool closed, double *lr, double *mom) {
    switch (s->kind) {
    case NB_SCHED_ONE_CYCLE:
    case NB_SCHED_CYCLIC:
    case NB_SCHED_WARM_RESTARTS: return nb_sched_cyclic_lr(s, g, e, lr, mom);
    default: return nb_sched_decay_lr(s, g, e, closed, s->opt->groups[g].o.head.lr, lr);
    }
}

nb_status nb_sched_advance(nb_scheduler *s, int64_t e, bool closed) {
    nb_status st = check_groups(s);
    if (st) return st;
    int n = s->n_groups;
    double *lrs = malloc(sizeof *lrs * (size_t)n * 2), *moms = lrs ? lrs + n : NULL;
    if (!lrs) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", nb_sched_op(s));
    int64_t t_i = s->T_i, t_cur = s->T_cur; /* WarmRestarts' counters, restored on failure */
    if (s->kind == NB_SCHED_WARM_RESTARTS && !closed) {
        if (s->last_epoch < 0) s->T_i = s->T_0, s->T_cur = 0; /* step(epoch=0) */
        else nb_sched_warm_restarts_advance(s);
    }
    for (int g = 0; g < n && !st; g++) {
        moms[g] = NAN;
        st = kind_lr(s, g, e, closed, &lrs[g], &moms[g]);
        if (!st && (!(lrs[g] >= 0.0) || !isfinite(lrs[g])))
            st = nb_set_error(NB_ERR_INVALID_ARG,
                              "%s: step %lld gives group %d the lr %g; an lr must be >= 0 and finite",
                              nb_sched_op(s), (long long)e, g, lrs[g]);
    }
    if (!st && s->cycle_momentum) st = nb_sched_set_momenta(s, moms);
    if (st) {
        s->T_i = t_i, s->T_cur = t_cur;
        free(lrs);
        return st;
    }
    for (int g = 0; g < n; g++) {
        s->opt->groups[g].o.head.lr = lrs[g];
        *nb_sched_pg(s, g, NB_PG_LAST_LR) = lrs[g];
    }
    s->last_epoch = e;
    free(lrs);
    return NB_OK;
}

static void copy_last_lrs(nb_scheduler *s) {
    for (int g = 0; g < s->n_groups; g++) *nb_sched_pg(s, g, NB_PG_LAST_LR) = s->opt->groups[g].o.head.lr;
}

/* bisect.bisect_right over sorted a[0..n): how many entries are <= x. */
static int bisect_right(const int64_t *a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (x < a[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

nb_status nb_scheduler_step(nb_scheduler *s) {
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_step: scheduler is NULL");
    nb_status st = check_groups(s);
    if (st) return st;
    switch (s->kind) {
    case NB_SCHED_PLATEAU:
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "reduce_lr_on_plateau: step needs the metric (nb_scheduler_step_metric)");
    case NB_SCHED_SEQUENTIAL: {
        int64_t e = s->last_epoch + 1;
        int idx = bisect_right(s->milestones, s->n_milestones, e);
        nb_scheduler *c = s->children[idx];
        /* At a milestone the next scheduler starts from its epoch 0 (_update_lr(0): closed form) */
        bool start = idx > 0 && s->milestones[idx - 1] == e;
        st = start ? nb_sched_advance(c, 0, true) : nb_scheduler_step(c);
        if (st) return st;
        s->last_epoch = e;
        copy_last_lrs(s);
        return NB_OK;
    }
    case NB_SCHED_CHAINED:
        for (int i = 0; i < s->n_children && !st; i++) st = nb_scheduler_step(s->children[i]);
        if (!st) copy_last_lrs(s);
        return st;
    default: return nb_sched_advance(s, s->last_epoch + 1, false);
    }
}

nb_status nb_scheduler_step_metric(nb_scheduler *s, double metric) {
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_step_metric: scheduler is NULL");
    if (s->kind != NB_SCHED_PLATEAU)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: step takes no metric (only ReduceLROnPlateau does)",
                            nb_sched_op(s));
    nb_status st = check_groups(s);
    return st ? st : nb_sched_plateau_step(s, metric);
}

/* A NULL scheduler (a failed constructor upstream): keeps that error, else records one. */
static bool no_sched(const char *op, const nb_scheduler *s) {
    if (s) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: scheduler is NULL", op);
    return true;
}

double nb_scheduler_get_last_lr(const nb_scheduler *s) {
    return no_sched("get_last_lr", s) ? NAN : *nb_sched_pg(s, 0, NB_PG_LAST_LR);
}

double nb_scheduler_get_group_last_lr(const nb_scheduler *s, int group) {
    if (no_sched("get_group_last_lr", s)) return NAN;
    if (group < 0 || group >= s->n_groups) {
        nb_set_error(NB_ERR_INVALID_ARG, "get_group_last_lr: param group %d out of range (%d groups)", group,
                     s->n_groups);
        return NAN;
    }
    return *nb_sched_pg(s, group, NB_PG_LAST_LR);
}

int64_t nb_scheduler_last_epoch(const nb_scheduler *s) {
    if (no_sched("last_epoch", s)) return -1;
    if (s->kind == NB_SCHED_CHAINED) return nb_scheduler_last_epoch(s->children[s->n_children - 1]);
    return s->last_epoch;
}

const char *nb_scheduler_kind(const nb_scheduler *s) {
    return no_sched("scheduler_kind", s) ? NULL : kind_names[s->kind];
}

void nb_scheduler_free(nb_scheduler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_children; i++) nb_scheduler_free(s->children[i]);
    free(s->children);
    free(s->milestones);
    free(s->pg);
    free(s);
}

/* ---- SequentialLR and ChainedScheduler ------------------------------------------ */

static nb_scheduler *free_children(nb_scheduler *const *children, int n) {
    for (int i = 0; children && i < n; i++) nb_scheduler_free(children[i]);
    return NULL;
}

/* The checks of both composites: NB_OK, or the error (set). */
static nb_status composite_args(const char *op, nb_optimizer *opt, nb_scheduler *const *ch, int n, bool sequential,
                                const int64_t *milestones) {
    nb_status bad = NB_ERR_INVALID_ARG;
    if (!opt) return nb_set_error(bad, "%s: optimizer is NULL", op);
    if (!ch || n < 1) return nb_set_error(bad, "%s: needs at least one scheduler (got %d)", op, n);
    if (sequential && n > 1 && !milestones)
        return nb_set_error(bad, "%s: milestones is NULL with %d schedulers", op, n);
    for (int i = 0; i < n; i++) {
        if (!ch[i]) return nb_set_error(bad, "%s: scheduler %d is NULL", op, i);
        if (ch[i]->kind == NB_SCHED_PLATEAU)
            return nb_set_error(bad,
                                "%s does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs "
                                "to be specified when calling `step` (scheduler %d)",
                                op, i);
        if (sequential && is_composite(ch[i]))
            return nb_set_error(bad, "%s: scheduler %d is a %s; SequentialLR's children step at their own epoch 0",
                                op, i, kind_names[ch[i]->kind]);
        if (ch[i]->opt != opt)
            return nb_set_error(bad, "%s expects all schedulers to belong to the same optimizer (scheduler %d differs)",
                                op, i);
        for (int j = 0; j < i; j++)
            if (ch[j] == ch[i]) return nb_set_error(bad, "%s: scheduler %d repeats scheduler %d", op, i, j);
    }
    for (int i = 1; sequential && i < n - 1; i++)
        if (milestones[i] < milestones[i - 1])
            return nb_set_error(bad, "%s: milestones must be non-decreasing (milestones[%d] = %lld < %lld)", op, i,
                                (long long)milestones[i], (long long)milestones[i - 1]);
    return NB_OK;
}

/* A composite over copies of the child list (and milestones); children
 * freed on failure. */
static nb_scheduler *composite_new(nb_sched_kind kind, nb_optimizer *opt, nb_scheduler *const *ch, int n,
                                   const int64_t *milestones) {
    const char *op = op_names[kind];
    bool sequential = kind == NB_SCHED_SEQUENTIAL;
    if (composite_args(op, opt, ch, n, sequential, milestones)) return free_children(ch, n);
    nb_scheduler *s = nb_sched_new(kind, opt, op);
    nb_scheduler **copy = s ? malloc(sizeof *copy * (size_t)n) : NULL;
    int64_t *ms = copy && sequential && n > 1 ? malloc(sizeof *ms * (size_t)(n - 1)) : NULL;
    if (!copy || (sequential && n > 1 && !ms)) {
        free(copy), nb_scheduler_free(s);
        if (s) nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        return free_children(ch, n);
    }
    memcpy(copy, ch, sizeof *copy * (size_t)n);
    if (ms) memcpy(ms, milestones, sizeof *ms * (size_t)(n - 1));
    s->children = copy, s->n_children = n;
    s->milestones = ms, s->n_milestones = sequential ? n - 1 : 0;
    return s;
}

nb_scheduler *nb_sequential_lr(nb_optimizer *opt, nb_scheduler *const *schedulers, int n, const int64_t *milestones) {
    nb_scheduler *s = composite_new(NB_SCHED_SEQUENTIAL, opt, schedulers, n, milestones);
    if (!s) return NULL;
    nb_status st = check_groups(s);
    for (int g = 0; g < s->n_groups && !st; g++) { /* "Reset learning rates back to initial values" */
        double initial = opt->groups[g].initial_lr;
        st = nb_optimizer_set_group_lr(opt, g, isnan(initial) ? opt->groups[g].o.head.lr : initial);
    }
    for (int i = 0; i < n; i++) s->children[i]->last_epoch -= 1; /* undo the children's initial steps */
    nb_scheduler *c0 = s->children[0];
    if (!st) { /* the first child's _initial_step */
        c0->initial = true;
        st = nb_sched_advance(c0, c0->last_epoch + 1, false);
        c0->initial = false;
    }
    if (st) {
        nb_scheduler_free(s);
        return NULL;
    }
    s->last_epoch = 0;
    copy_last_lrs(s);
    return s;
}

nb_scheduler *nb_chained_scheduler(nb_optimizer *opt, nb_scheduler *const *schedulers, int n) {
    nb_scheduler *s = composite_new(NB_SCHED_CHAINED, opt, schedulers, n, NULL);
    if (s) s->last_epoch = 0;
    return s;
}

/* ---- state ---------------------------------------------------------------------- */

/* One state value: where it lives and what a loaded value may be. */
typedef struct slot {
    char key[64];
    void *ptr;
    bool integer;  /* int64_t at ptr, else double */
    double lo, hi; /* allowed range */
    bool inf_ok;   /* +-inf allowed (ReduceLROnPlateau's best) */
} slot;

typedef struct slots {
    slot *v;
    int n, cap;
} slots;

static void add(slots *sl, const char *prefix, const char *key, int g, void *ptr, bool integer, double lo, double hi) {
    if (sl->v && sl->n < sl->cap) {
        slot *x = &sl->v[sl->n];
        if (g >= 0) snprintf(x->key, sizeof x->key, "%s%s.%d", prefix, key, g);
        else snprintf(x->key, sizeof x->key, "%s%s", prefix, key);
        x->ptr = ptr, x->integer = integer, x->lo = lo, x->hi = hi, x->inf_ok = false;
    }
    sl->n++;
}

/* The state values of s, in a fixed order (PyTorch's keys under prefix). */
static void collect(nb_scheduler *s, const char *prefix, bool child_of_sequential, slots *sl) {
    const double big = 9007199254740992.0; /* 2^53: exact as a double */
    if (s->kind != NB_SCHED_CHAINED) {
        double hi = s->kind == NB_SCHED_ONE_CYCLE ? (double)s->period : big;
        add(sl, prefix, "last_epoch", -1, &s->last_epoch, true, child_of_sequential ? -1 : 0, hi);
    }
    if (!is_composite(s) && s->kind != NB_SCHED_PLATEAU)
        for (int g = 0; g < s->n_groups; g++)
            add(sl, prefix, "base_lrs", g, nb_sched_pg(s, g, NB_PG_BASE_LR), false, 0, INFINITY);
    for (int g = 0; g < s->n_groups; g++)
        add(sl, prefix, "_last_lr", g, nb_sched_pg(s, g, NB_PG_LAST_LR), false, 0, INFINITY);
    if (s->kind == NB_SCHED_WARM_RESTARTS) {
        add(sl, prefix, "T_i", -1, &s->T_i, true, 1, big);
        add(sl, prefix, "T_cur", -1, &s->T_cur, true, 0, big);
    }
    if (s->kind == NB_SCHED_PLATEAU) {
        add(sl, prefix, "best", -1, &s->best, false, -INFINITY, INFINITY);
        if (sl->v && sl->n <= sl->cap) sl->v[sl->n - 1].inf_ok = true;
        add(sl, prefix, "num_bad_epochs", -1, &s->num_bad_epochs, true, 0, big);
        add(sl, prefix, "cooldown_counter", -1, &s->cooldown_counter, true, 0, big);
    }
    for (int i = 0; i < s->n_children; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s_schedulers.%d.", prefix, i);
        collect(s->children[i], p, s->kind == NB_SCHED_SEQUENTIAL, sl);
    }
}

/* The slots of s (malloc'd, *n entries), or NULL with the error set. */
static slot *slots_of(const nb_scheduler *s, int *n) {
    slots sl = {0};
    collect((nb_scheduler *)s, "", false, &sl);
    sl.cap = sl.n;
    sl.v = calloc((size_t)sl.cap + 1, sizeof *sl.v);
    if (!sl.v) return NB_FAIL(NB_ERR_OOM, "scheduler_state_dict: out of host memory");
    sl.n = 0;
    collect((nb_scheduler *)s, "", false, &sl);
    *n = sl.n;
    return sl.v;
}

static double slot_get(const slot *x) { return x->integer ? (double)*(int64_t *)x->ptr : *(double *)x->ptr; }

int nb_scheduler_state_size(const nb_scheduler *s) {
    if (no_sched("scheduler_state_size", s)) return -1;
    slots sl = {0};
    collect((nb_scheduler *)s, "", false, &sl);
    return sl.n;
}

nb_status nb_scheduler_state_dict(const nb_scheduler *s, nb_scheduler_value *out, int n) {
    if (!s || !out) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_state_dict: NULL argument");
    int have = 0;
    slot *v = slots_of(s, &have);
    if (!v) return nb_last_status();
    nb_status st = NB_OK;
    if (n != have)
        st = nb_set_error(NB_ERR_INVALID_ARG, "scheduler_state_dict: %s has %d state values (got n %d)",
                          kind_names[s->kind], have, n);
    for (int i = 0; i < have && !st; i++) {
        memcpy(out[i].key, v[i].key, sizeof out[i].key);
        out[i].value = slot_get(&v[i]);
    }
    free(v);
    return st;
}

nb_status nb_scheduler_load_state_dict(nb_scheduler *s, const nb_scheduler_value *in, int n) {
    const char *op = "scheduler_load_state_dict";
    if (!s || !in) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op);
    int have = 0;
    slot *v = slots_of(s, &have);
    if (!v) return nb_last_status();
    double *vals = malloc(sizeof *vals * ((size_t)have + 1));
    nb_status st = vals ? NB_OK : nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if (!st && n != have)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %s has %d state values (got n %d)", op, kind_names[s->kind], have,
                          n);
    for (int i = 0; i < have && !st; i++) { /* find and check every value first */
        int found = -1;
        for (int j = 0; j < n; j++)
            if (!strncmp(in[j].key, v[i].key, sizeof in[j].key)) {
                if (found >= 0) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: key '%s' given twice", op, v[i].key);
                found = j;
            }
        if (st) break;
        if (found < 0) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %s's state needs '%s'", op, kind_names[s->kind], v[i].key);
            break;
        }
        double x = in[found].value;
        bool ok = !isnan(x) && x >= v[i].lo && x <= v[i].hi && (isfinite(x) || v[i].inf_ok);
        if (ok && v[i].integer) ok = x == floor(x);
        if (!ok)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: '%s' is %g, out of range [%g, %g]%s", op, v[i].key, x, v[i].lo,
                              v[i].hi, v[i].integer ? " or not an integer" : "");
        vals[i] = x;
    }
    if (!st) st = check_groups(s);
    if (!st) {
        for (int i = 0; i < have; i++) {
            if (v[i].integer) *(int64_t *)v[i].ptr = (int64_t)vals[i];
            else *(double *)v[i].ptr = vals[i];
        }
        for (int g = 0; g < s->n_groups; g++) s->opt->groups[g].o.head.lr = *nb_sched_pg(s, g, NB_PG_LAST_LR);
    }
    free(vals);
    free(v);
    return st;
}
