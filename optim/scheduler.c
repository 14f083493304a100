/* scheduler.c - learning-rate schedulers (torch.optim.lr_scheduler): StepLR,
 * MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR and
 * SequentialLR over one parameter group. Each step computes the new lr the
 * way PyTorch 1.13/2.x's get_lr does - the recursive ("chainable") forms that
 * multiply the optimizer's current lr, with the same floating-point
 * operations in the same order - so the sequences match PyTorch's float64
 * values; SequentialLR's hand-over uses the closed forms
 * (_get_closed_form_lr), as PyTorch's scheduler.step(0) does. State
 * (last_epoch, base lr, last lr) can be read and restored for checkpoints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

typedef enum nb_sched_kind {
    NB_SCHED_STEP,
    NB_SCHED_MULTI_STEP,
    NB_SCHED_EXPONENTIAL,
    NB_SCHED_COSINE,
    NB_SCHED_LINEAR,
    NB_SCHED_ONE_CYCLE,
    NB_SCHED_SEQUENTIAL,
} nb_sched_kind;

static const char *const kind_names[] = {"StepLR",   "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                         "LinearLR", "OneCycleLR",  "SequentialLR"};
static const char *const op_names[] = {"step_lr",   "multi_step_lr", "exponential_lr", "cosine_annealing_lr",
                                       "linear_lr", "one_cycle_lr",  "sequential_lr"};

/* One OneCycleLR phase: anneals start_lr -> end_lr until step end_step. */
typedef struct nb_cycle_phase {
    double end_step;
    double start_lr, end_lr;
} nb_cycle_phase;

struct nb_scheduler {
    nb_sched_kind kind;
    nb_optimizer *opt;
    int64_t last_epoch;
    double base_lr, last_lr;
    double gamma;        /* Step, MultiStep, Exponential */
    int64_t period;      /* StepLR step_size, CosineAnnealingLR T_max, LinearLR total_iters, OneCycleLR total_steps */
    double eta_min;      /* Cosine */
    double start_factor; /* Linear */
    double end_factor;   /* Linear */
    int64_t *milestones; /* MultiStep (sorted) and Sequential; owned */
    int n_milestones;
    nb_anneal_strategy anneal; /* OneCycle */
    nb_cycle_phase phases[3];
    int n_phases;
    nb_scheduler **children; /* Sequential; owned */
    int n_children;
};

/* Python's a % b for b > 0 (floor modulo: never negative). */
static int64_t floor_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* bisect.bisect_right over sorted a[0..n): how many entries are <= x. */
static int bisect_right(const int64_t *a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (x < a[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* OneCycleLR.get_lr: the phase holding step e, annealed by the fraction of it done. */
static nb_status one_cycle_lr(const nb_scheduler *s, int64_t e, double *out) {
    if (e > s->period)
        return nb_set_error(NB_ERR_STATE,
                            "one_cycle_lr: Tried to step %lld times. The specified number of total steps is %lld",
                            (long long)e + 1, (long long)s->period);
    double start_step = 0.0;
    for (int i = 0; i < s->n_phases; i++) {
        const nb_cycle_phase *ph = &s->phases[i];
        if ((double)e <= ph->end_step || i == s->n_phases - 1) {
            if (ph->end_step - start_step == 0.0)
                return nb_set_error(NB_ERR_INVALID_ARG,
                                    "one_cycle_lr: phase %d has zero length at step %lld "
                                    "(pct_start * total_steps too small or too large)",
                                    i, (long long)e);
            double pct = ((double)e - start_step) / (ph->end_step - start_step);
            if (s->anneal == NB_ANNEAL_COS) {
                double cos_out = cos(M_PI * pct) + 1;
                *out = ph->end_lr + (ph->start_lr - ph->end_lr) / 2.0 * cos_out;
            } else {
                *out = (ph->end_lr - ph->start_lr) * pct + ph->start_lr;
            }
            /* The linear anneal extrapolates past min_lr at step total_steps
             * (the lr after the last update, never used) and can go below
             * 0 there, which PyTorch stores but nb_optimizer_set_lr rejects. */
            if (*out < 0.0) *out = 0.0;
            return NB_OK;
        }
        start_step = ph->end_step;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

/* get_lr for new epoch e from the optimizer's current lr (PyTorch's recursive forms). */
static nb_status recursive_lr(const nb_scheduler *s, int64_t e, double *out) {
    double lr = nb_optimizer_get_lr(s->opt);
    switch (s->kind) {
    case NB_SCHED_STEP: *out = (e == 0 || e % s->period != 0) ? lr : lr * s->gamma; return NB_OK;
    case NB_SCHED_MULTI_STEP: {
        int count = bisect_right(s->milestones, s->n_milestones, e) -
                    bisect_right(s->milestones, s->n_milestones, e - 1); /* how often e is a milestone */
        *out = count == 0 ? lr : lr * pow(s->gamma, (double)count);
        return NB_OK;
    }
    case NB_SCHED_EXPONENTIAL: *out = e == 0 ? lr : lr * s->gamma; return NB_OK;
    case NB_SCHED_COSINE: {
        double T = (double)s->period, eta = s->eta_min;
        if (e == 0)
            *out = lr;
        else if (floor_mod(e - 1 - s->period, 2 * s->period) == 0)
            *out = lr + (s->base_lr - eta) * (1 - cos(M_PI / T)) / 2;
        else
            *out = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) * (lr - eta) + eta;
        return NB_OK;
    }
    case NB_SCHED_LINEAR: {
        double sf = s->start_factor, ef = s->end_factor;
        if (e == 0)
            *out = lr * sf;
        else if (e > s->period)
            *out = lr;
        else
            *out = lr * (1. + (ef - sf) / ((double)s->period * sf + (double)(e - 1) * (ef - sf)));
        return NB_OK;
    }
    case NB_SCHED_ONE_CYCLE: return one_cycle_lr(s, e, out);
    case NB_SCHED_SEQUENTIAL: break;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

/* _get_closed_form_lr for epoch e (OneCycleLR has none: get_lr, as PyTorch). */
static nb_status closed_form_lr(const nb_scheduler *s, int64_t e, double *out) {
    double base = s->base_lr;
    switch (s->kind) {
    case NB_SCHED_STEP: *out = base * pow(s->gamma, (double)(e / s->period - (e % s->period < 0))); return NB_OK;
    case NB_SCHED_MULTI_STEP:
        *out = base * pow(s->gamma, (double)bisect_right(s->milestones, s->n_milestones, e));
        return NB_OK;
    case NB_SCHED_EXPONENTIAL: *out = base * pow(s->gamma, (double)e); return NB_OK;
    case NB_SCHED_COSINE:
        *out = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)e / (double)s->period)) / 2;
        return NB_OK;
    case NB_SCHED_LINEAR: {
        int64_t m = e < s->period ? e : s->period;
        *out = base * (s->start_factor + (s->end_factor - s->start_factor) * (double)m / (double)s->period);
        return NB_OK;
    }
    case NB_SCHED_ONE_CYCLE: return one_cycle_lr(s, e, out);
    case NB_SCHED_SEQUENTIAL: break;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

/* Moves a leaf scheduler to epoch e and writes the lr; all or nothing. */
static nb_status advance(nb_scheduler *s, int64_t e, bool closed) {
    double lr = 0.0;
    nb_status st = closed ? closed_form_lr(s, e, &lr) : recursive_lr(s, e, &lr);
    if (st != NB_OK) return st;
    if ((st = nb_optimizer_set_lr(s->opt, lr)) != NB_OK) return st;
    s->last_epoch = e;
    s->last_lr = lr;
    return NB_OK;
}

/* A scheduler of the given kind reading its base lr from opt (before the initial step). */
static nb_scheduler *sched_new(nb_sched_kind kind, nb_optimizer *opt) {
    if (!opt) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: optimizer is NULL", op_names[kind]);
    nb_scheduler *s = calloc(1, sizeof *s);
    if (!s) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op_names[kind]);
    s->kind = kind;
    s->opt = opt;
    s->last_epoch = -1;
    s->base_lr = nb_optimizer_get_lr(opt);
    s->last_lr = s->base_lr;
    return s;
}

/* PyTorch's _initial_step: epoch -1 -> 0. Frees s on failure. */
static nb_scheduler *initial_step(nb_scheduler *s) {
    if (advance(s, 0, false) != NB_OK) {
        nb_scheduler_free(s);
        return NULL;
    }
    return s;
}

static bool bad_gamma(const char *op, double gamma) {
    if (gamma >= 0.0 && isfinite(gamma)) return false;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: gamma must be >= 0 and finite (got %g)", op, gamma);
    return true;
}

nb_scheduler *nb_step_lr(nb_optimizer *opt, int64_t step_size, double gamma) {
    if (step_size < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "step_lr: step_size must be >= 1 (got %lld)", (long long)step_size);
    if (bad_gamma("step_lr", gamma)) return NULL;
    nb_scheduler *s = sched_new(NB_SCHED_STEP, opt);
    if (!s) return NULL;
    s->period = step_size;
    s->gamma = gamma;
    return initial_step(s);
}

nb_scheduler *nb_multi_step_lr(nb_optimizer *opt, const int64_t *milestones, int n, double gamma) {
    if (n < 0 || (n > 0 && !milestones))
        return NB_FAIL(NB_ERR_INVALID_ARG, "multi_step_lr: bad milestones (n %d, list %s)", n,
                       milestones ? "given" : "NULL");
    if (bad_gamma("multi_step_lr", gamma)) return NULL;
    nb_scheduler *s = sched_new(NB_SCHED_MULTI_STEP, opt);
    if (!s) return NULL;
    s->gamma = gamma;
    if (n > 0) {
        s->milestones = malloc(sizeof *s->milestones * (size_t)n);
        if (!s->milestones) {
            nb_scheduler_free(s);
            return NB_FAIL(NB_ERR_OOM, "multi_step_lr: out of host memory");
        }
        memcpy(s->milestones, milestones, sizeof *s->milestones * (size_t)n);
        qsort(s->milestones, (size_t)n, sizeof *s->milestones, cmp_i64);
    }
    s->n_milestones = n;
    return initial_step(s);
}

nb_scheduler *nb_exponential_lr(nb_optimizer *opt, double gamma) {
    if (bad_gamma("exponential_lr", gamma)) return NULL;
    nb_scheduler *s = sched_new(NB_SCHED_EXPONENTIAL, opt);
    if (!s) return NULL;
    s->gamma = gamma;
    return initial_step(s);
}

nb_scheduler *nb_cosine_annealing_lr(nb_optimizer *opt, int64_t T_max, double eta_min) {
    if (T_max < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "cosine_annealing_lr: T_max must be >= 1 (got %lld)", (long long)T_max);
    if (!(eta_min >= 0.0) || !isfinite(eta_min))
        return NB_FAIL(NB_ERR_INVALID_ARG, "cosine_annealing_lr: eta_min must be >= 0 and finite (got %g)", eta_min);
    nb_scheduler *s = sched_new(NB_SCHED_COSINE, opt);
    if (!s) return NULL;
    s->period = T_max;
    s->eta_min = eta_min;
    return initial_step(s);
}

nb_scheduler *nb_linear_lr(nb_optimizer *opt, double start_factor, double end_factor, int64_t total_iters) {
    /* start_factor > 0: the recursive form divides by total_iters * start_factor at step 1. */
    if (!(start_factor > 0.0 && start_factor <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "linear_lr: start_factor must be in (0, 1] (got %g)", start_factor);
    if (!(end_factor >= 0.0 && end_factor <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "linear_lr: end_factor must be in [0, 1] (got %g)", end_factor);
    if (total_iters < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "linear_lr: total_iters must be >= 1 (got %lld)", (long long)total_iters);
    nb_scheduler *s = sched_new(NB_SCHED_LINEAR, opt);
    if (!s) return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->period = total_iters;
    return initial_step(s);
}

nb_scheduler *nb_one_cycle_lr(nb_optimizer *opt, double max_lr, int64_t total_steps, nb_one_cycle_options o) {
    const char *op = "one_cycle_lr";
    double pct = nb_optim_default(o.pct_start, 0.3);
    double div = nb_optim_default(o.div_factor, 25.0), final_div = nb_optim_default(o.final_div_factor, 1e4);
    if (!(max_lr >= 0.0) || !isfinite(max_lr))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: max_lr must be >= 0 and finite (got %g)", op, max_lr);
    if (total_steps < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Expected positive integer total_steps, but got %lld", op,
                       (long long)total_steps);
    if (!(pct >= 0.0 && pct <= 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Expected float between 0 and 1 pct_start, but got %g", op, pct);
    if (o.anneal_strategy != NB_ANNEAL_COS && o.anneal_strategy != NB_ANNEAL_LINEAR)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: anneal_strategy must be NB_ANNEAL_COS or NB_ANNEAL_LINEAR (got %d)", op,
                       (int)o.anneal_strategy);
    if (!(div > 0.0) || !isfinite(div) || !(final_div > 0.0) || !isfinite(final_div))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: div_factor and final_div_factor must be > 0 and finite (got %g, %g)",
                       op, div, final_div);
    nb_scheduler *s = sched_new(NB_SCHED_ONE_CYCLE, opt);
    if (!s) return NULL;
    double initial = max_lr / div, min_lr = initial / final_div, total = (double)total_steps;
    s->base_lr = s->last_lr = initial; /* PyTorch sets the group's initial_lr to max_lr / div_factor */
    s->period = total_steps;
    s->anneal = o.anneal_strategy;
    s->phases[0] = (nb_cycle_phase){pct * total - 1, initial, max_lr};
    if (o.three_phase) {
        s->phases[1] = (nb_cycle_phase){2 * pct * total - 2, max_lr, initial};
        s->phases[2] = (nb_cycle_phase){total - 1, initial, min_lr};
        s->n_phases = 3;
    } else {
        s->phases[1] = (nb_cycle_phase){total - 1, max_lr, min_lr};
        s->n_phases = 2;
    }
    return initial_step(s);
}

/* Frees the n children of a failed SequentialLR and returns NULL. */
static nb_scheduler *free_children(nb_scheduler *const *children, int n) {
    for (int i = 0; children && i < n; i++) nb_scheduler_free(children[i]);
    return NULL;
}

/* The checks of nb_sequential_lr: NB_OK, or the error (set). */
static nb_status sequential_args(nb_optimizer *opt, nb_scheduler *const *ch, int n, const int64_t *milestones) {
    const char *op = "sequential_lr";
    nb_status bad = NB_ERR_INVALID_ARG;
    if (!opt) return nb_set_error(bad, "%s: optimizer is NULL", op);
    if (!ch || n < 1) return nb_set_error(bad, "%s: needs at least one scheduler (got %d)", op, n);
    if (n > 1 && !milestones) return nb_set_error(bad, "%s: milestones is NULL with %d schedulers", op, n);
    for (int i = 0; i < n; i++) {
        if (!ch[i]) return nb_set_error(bad, "%s: scheduler %d is NULL", op, i);
        if (ch[i]->kind == NB_SCHED_SEQUENTIAL) return nb_set_error(bad, "%s: scheduler %d is a SequentialLR", op, i);
        if (ch[i]->opt != opt)
            return nb_set_error(bad,
                                "%s: Sequential Schedulers expects all schedulers to belong to the same optimizer "
                                "(scheduler %d differs)",
                                op, i);
        for (int j = 0; j < i; j++)
            if (ch[j] == ch[i]) return nb_set_error(bad, "%s: scheduler %d repeats scheduler %d", op, i, j);
    }
    for (int i = 1; i < n - 1; i++)
        if (milestones[i] < milestones[i - 1])
            return nb_set_error(bad, "%s: milestones must be non-decreasing (milestones[%d] = %lld < %lld)", op, i,
                                (long long)milestones[i], (long long)milestones[i - 1]);
    return NB_OK;
}

nb_scheduler *nb_sequential_lr(nb_optimizer *opt, nb_scheduler *const *schedulers, int n, const int64_t *milestones) {
    if (sequential_args(opt, schedulers, n, milestones) != NB_OK) return free_children(schedulers, n);
    nb_scheduler *s = calloc(1, sizeof *s);
    nb_scheduler **ch = malloc(sizeof *ch * (size_t)n);
    int64_t *ms = n > 1 ? malloc(sizeof *ms * (size_t)(n - 1)) : NULL;
    if (!s || !ch || (n > 1 && !ms)) {
        free(s), free(ch), free(ms);
        nb_set_error(NB_ERR_OOM, "sequential_lr: out of host memory");
        return free_children(schedulers, n);
    }
    memcpy(ch, schedulers, sizeof *ch * (size_t)n);
    if (ms) memcpy(ms, milestones, sizeof *ms * (size_t)(n - 1));
    *s = (nb_scheduler){.kind = NB_SCHED_SEQUENTIAL,
                        .opt = opt,
                        .children = ch,
                        .n_children = n,
                        .milestones = ms,
                        .n_milestones = n - 1};
    /* The group's shared "initial_lr": set by the first scheduler created
     * (children[0]) and overwritten by each OneCycleLR; every other child
     * created after it read it as its base lr. */
    double initial = ch[0]->base_lr;
    for (int i = 0; i < n; i++) {
        if (ch[i]->kind == NB_SCHED_ONE_CYCLE)
            initial = ch[i]->base_lr;
        else
            ch[i]->base_lr = initial;
    }
    nb_status st = nb_optimizer_set_lr(opt, initial);   /* "Reset learning rates back to initial values" */
    for (int i = 0; i < n; i++) ch[i]->last_epoch -= 1; /* undo the children's initial steps */
    if (st == NB_OK) st = advance(ch[0], ch[0]->last_epoch + 1, false);
    if (st != NB_OK) {
        nb_scheduler_free(s);
        return NULL;
    }
    s->base_lr = initial;
    s->last_epoch = 0;
    s->last_lr = ch[0]->last_lr;
    return s;
}

nb_status nb_scheduler_step(nb_scheduler *s) {
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_step: scheduler is NULL");
    if (s->kind != NB_SCHED_SEQUENTIAL) return advance(s, s->last_epoch + 1, false);
    int64_t e = s->last_epoch + 1;
    int idx = bisect_right(s->milestones, s->n_milestones, e);
    nb_scheduler *c = s->children[idx];
    /* At a milestone the next scheduler starts from its epoch 0 (step(0): closed form). */
    bool start = idx > 0 && s->milestones[idx - 1] == e;
    nb_status st = start ? advance(c, 0, true) : advance(c, c->last_epoch + 1, false);
    if (st != NB_OK) return st;
    s->last_epoch = e;
    s->last_lr = c->last_lr;
    return NB_OK;
}

/* A NULL scheduler (a failed constructor upstream): keeps that error, else records one. */
static bool no_sched(const char *op, const nb_scheduler *s) {
    if (s) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: scheduler is NULL", op);
    return true;
}

double nb_scheduler_get_last_lr(const nb_scheduler *s) { return no_sched("get_last_lr", s) ? NAN : s->last_lr; }
int64_t nb_scheduler_last_epoch(const nb_scheduler *s) { return no_sched("last_epoch", s) ? -1 : s->last_epoch; }
const char *nb_scheduler_kind(const nb_scheduler *s) { return no_sched("scheduler_kind", s) ? NULL : kind_names[s->kind]; }

void nb_scheduler_free(nb_scheduler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_children; i++) nb_scheduler_free(s->children[i]);
    free(s->children);
    free(s->milestones);
    free(s);
}

int nb_scheduler_num_states(const nb_scheduler *s) { return no_sched("num_states", s) ? -1 : 1 + s->n_children; }

nb_status nb_scheduler_get_state(const nb_scheduler *s, nb_scheduler_state *out, int n) {
    if (!s || !out) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_get_state: NULL argument");
    if (n != nb_scheduler_num_states(s))
        return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_get_state: %s has %d state records (got n %d)",
                            kind_names[s->kind], nb_scheduler_num_states(s), n);
    out[0] = (nb_scheduler_state){s->last_epoch, s->base_lr, s->last_lr};
    for (int i = 0; i < s->n_children; i++) {
        const nb_scheduler *c = s->children[i];
        out[1 + i] = (nb_scheduler_state){c->last_epoch, c->base_lr, c->last_lr};
    }
    return NB_OK;
}

/* Checks one state record for scheduler c (top: index 0). */
static nb_status state_ok(const nb_scheduler *c, const nb_scheduler_state *r, int i) {
    const char *op = "scheduler_set_state";
    if (r->last_epoch < (i == 0 ? 0 : -1))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: record %d: last_epoch %lld out of range", op, i,
                            (long long)r->last_epoch);
    if (!(r->base_lr >= 0.0) || !isfinite(r->base_lr) || !(r->last_lr >= 0.0) || !isfinite(r->last_lr))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: record %d: lrs must be >= 0 and finite (base_lr %g, last_lr %g)",
                            op, i, r->base_lr, r->last_lr);
    if (c->kind == NB_SCHED_ONE_CYCLE && r->last_epoch > c->period)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: record %d: last_epoch %lld past OneCycleLR's total_steps %lld", op,
                            i, (long long)r->last_epoch, (long long)c->period);
    return NB_OK;
}

nb_status nb_scheduler_set_state(nb_scheduler *s, const nb_scheduler_state *in, int n) {
    if (!s || !in) return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_set_state: NULL argument");
    if (n != nb_scheduler_num_states(s))
        return nb_set_error(NB_ERR_INVALID_ARG, "scheduler_set_state: %s has %d state records (got n %d)",
                            kind_names[s->kind], nb_scheduler_num_states(s), n);
    nb_status st = state_ok(s, &in[0], 0);
    for (int i = 0; st == NB_OK && i < s->n_children; i++) st = state_ok(s->children[i], &in[1 + i], 1 + i);
    if (st != NB_OK) return st;
    if ((st = nb_optimizer_set_lr(s->opt, in[0].last_lr)) != NB_OK) return st;
    s->last_epoch = in[0].last_epoch, s->base_lr = in[0].base_lr, s->last_lr = in[0].last_lr;
    for (int i = 0; i < s->n_children; i++) {
        nb_scheduler *c = s->children[i];
        c->last_epoch = in[1 + i].last_epoch, c->base_lr = in[1 + i].base_lr, c->last_lr = in[1 + i].last_lr;
    }
    return NB_OK;
}
