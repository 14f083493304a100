/* sched_cyclic.c - the cyclic schedulers: OneCycleLR (Smith & Topin 2017),
 * CyclicLR (Smith 2017) and CosineAnnealingWarmRestarts (Loshchilov &
 * Hutter 2017), with PyTorch 2.11's get_lr, step and momentum cycling (the
 * optimizer's momentum or beta1 goes against the lr).
 */
#include <math.h>
#include <stdlib.h>

#include "sched_impl.h"

/* OneCycleLR's phases: start and end columns of the lr, then of the momentum. */
static const int two_phase[2][4] = {
    {NB_PG_INITIAL, NB_PG_MAX_LR, NB_PG_MAX_MOM, NB_PG_BASE_MOM},
    {NB_PG_MAX_LR, NB_PG_MIN_LR, NB_PG_BASE_MOM, NB_PG_MAX_MOM},
};
static const int three_phase[3][4] = {
    {NB_PG_INITIAL, NB_PG_MAX_LR, NB_PG_MAX_MOM, NB_PG_BASE_MOM},
    {NB_PG_MAX_LR, NB_PG_INITIAL, NB_PG_BASE_MOM, NB_PG_MAX_MOM},
    {NB_PG_INITIAL, NB_PG_MIN_LR, NB_PG_MAX_MOM, NB_PG_MAX_MOM},
};

static double anneal(nb_anneal_strategy a, double start, double end, double pct) {
    if (a == NB_ANNEAL_COS) {
        double cos_out = cos(M_PI * pct) + 1;
        return end + (start - end) / 2.0 * cos_out;
    }
    return (end - start) * pct + start;
}

static nb_status one_cycle_lr(const nb_scheduler *s, int g, int64_t e, double *lr, double *mom) {
    if (e > s->period)
        return nb_set_error(NB_ERR_STATE,
                            "one_cycle_lr: Tried to step %lld times. The specified number of total steps is %lld",
                            (long long)e, (long long)s->period);
    double start_step = 0.0;
    for (int i = 0; i < s->n_phases; i++) {
        const int *ph = s->three_phase ? three_phase[i] : two_phase[i];
        double end_step = s->phase_end[i];
        if ((double)e <= end_step || i == s->n_phases - 1) {
            if (end_step - start_step == 0.0)
                return nb_set_error(NB_ERR_INVALID_ARG,
                                    "one_cycle_lr: phase %d has zero length at step %lld "
                                    "(pct_start * total_steps too small or too large)",
                                    i, (long long)e);
            double pct = ((double)e - start_step) / (end_step - start_step);
            *lr = anneal(s->anneal, *nb_sched_pg(s, g, ph[0]), *nb_sched_pg(s, g, ph[1]), pct);
            /* The linear anneal extrapolates past min_lr at step total_steps
             * (the lr after the last update, never used) and can go below 0
             * there, which PyTorch stores but an optimizer here rejects. */
            if (*lr < 0.0) *lr = 0.0;
            if (s->cycle_momentum) *mom = anneal(s->anneal, *nb_sched_pg(s, g, ph[2]), *nb_sched_pg(s, g, ph[3]), pct);
            return NB_OK;
        }
        start_step = end_step;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

static double scale(const nb_scheduler *s, double x) {
    if (s->scale_fn) return s->scale_fn(x, s->scale_user);
    switch (s->mode) {
    case NB_CYCLIC_TRIANGULAR: return 1.0;
    case NB_CYCLIC_TRIANGULAR2: return 1 / pow(2.0, x - 1);
    case NB_CYCLIC_EXP_RANGE: return pow(s->gamma, x);
    }
    return NAN;
}

static nb_status cyclic_lr(const nb_scheduler *s, int g, int64_t e, double *lr, double *mom) {
    double cycle = floor(1 + (double)e / s->total_size);
    double x = 1.0 + (double)e / s->total_size - cycle;
    double scale_factor = x <= s->step_ratio ? x / s->step_ratio : (x - 1) / (s->step_ratio - 1);
    double f = scale(s, s->scale_mode == NB_SCALE_CYCLE ? cycle : (double)e);
    double base_lr = *nb_sched_pg(s, g, NB_PG_BASE_LR), max_lr = *nb_sched_pg(s, g, NB_PG_MAX_LR);
    *lr = base_lr + (max_lr - base_lr) * scale_factor * f;
    if (s->cycle_momentum) {
        double base_m = *nb_sched_pg(s, g, NB_PG_BASE_MOM), max_m = *nb_sched_pg(s, g, NB_PG_MAX_MOM);
        *mom = max_m - (max_m - base_m) * scale_factor * f;
    }
    return NB_OK;
}

nb_status nb_sched_cyclic_lr(const nb_scheduler *s, int g, int64_t e, double *lr, double *mom) {
    switch (s->kind) {
    case NB_SCHED_ONE_CYCLE: return one_cycle_lr(s, g, e, lr, mom);
    case NB_SCHED_CYCLIC: return cyclic_lr(s, g, e, lr, mom);
    case NB_SCHED_WARM_RESTARTS: {
        double base = *nb_sched_pg(s, g, NB_PG_BASE_LR);
        *lr = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)s->T_cur / (double)s->T_i)) / 2;
        return NB_OK;
    }
    default: break;
    }
    NB_ASSERT(0);
    return NB_ERR_STATE;
}

void nb_sched_warm_restarts_advance(nb_scheduler *s) {
    s->T_cur = s->T_cur + 1;
    if (s->T_cur >= s->T_i) {
        s->T_cur = s->T_cur % s->T_i;
        s->T_i = s->T_i * s->T_mult;
    }
}

/* The momenta of the constructor (max_momentum), if cycled; the groups'
 * momentum range into pg. */
static nb_status start_momentum(nb_scheduler *s, nb_flag flag, double base_m, double max_m, const double *bases,
                                const double *maxes) {
    const char *op = nb_sched_op(s);
    s->cycle_momentum = flag != NB_FLAG_FALSE;
    if (!s->cycle_momentum) return NB_OK;
    nb_status st = nb_sched_momentum_kind(s, op);
    if (!st) st = nb_sched_fill_pg(s, NB_PG_BASE_MOM, base_m, bases, op, "base_momentum");
    if (!st) st = nb_sched_fill_pg(s, NB_PG_MAX_MOM, max_m, maxes, op, "max_momentum");
    double *m = st ? NULL : malloc(sizeof *m * (size_t)s->n_groups);
    if (!st && !m) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    for (int g = 0; !st && g < s->n_groups; g++) m[g] = *nb_sched_pg(s, g, NB_PG_MAX_MOM);
    if (!st) st = nb_sched_set_momenta(s, m);
    free(m);
    return st;
}

nb_scheduler *nb_one_cycle_lr(nb_optimizer *opt, double max_lr, int64_t total_steps, nb_one_cycle_options o) {
    const char *op = "one_cycle_lr";
    double pct = nb_option(o.pct_start, 0.3);
    double div = nb_option(o.div_factor, 25.0), final_div = nb_option(o.final_div_factor, 1e4);
    double base_m = nb_option(o.base_momentum, 0.85), max_m = nb_option(o.max_momentum, 0.95);
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
    nb_scheduler *s = nb_sched_new(NB_SCHED_ONE_CYCLE, opt, op);
    if (!s) return NULL;
    double total = (double)total_steps;
    s->period = total_steps;
    s->anneal = o.anneal_strategy;
    s->three_phase = o.three_phase;
    s->n_phases = o.three_phase ? 3 : 2;
    s->phase_end[0] = pct * total - 1;
    if (o.three_phase) s->phase_end[1] = 2 * pct * total - 2;
    s->phase_end[s->n_phases - 1] = total - 1;
    nb_status st = nb_sched_fill_pg(s, NB_PG_MAX_LR, max_lr, o.max_lrs, op, "max_lr");
    if (!st) st = start_momentum(s, o.cycle_momentum, base_m, max_m, o.base_momentums, o.max_momentums);
    if (st) {
        nb_scheduler_free(s);
        return NULL;
    }
    for (int g = 0; g < s->n_groups; g++) { /* PyTorch sets the group's initial_lr, max_lr, min_lr */
        double initial = *nb_sched_pg(s, g, NB_PG_MAX_LR) / div;
        opt->groups[g].initial_lr = *nb_sched_pg(s, g, NB_PG_INITIAL) = initial;
        *nb_sched_pg(s, g, NB_PG_MIN_LR) = initial / final_div;
    }
    return nb_sched_initial_step(s);
}

nb_scheduler *nb_cyclic_lr(nb_optimizer *opt, double base_lr, double max_lr, nb_cyclic_lr_options o) {
    const char *op = "cyclic_lr";
    int64_t up = o.step_size_up ? o.step_size_up : 2000, down = o.step_size_down ? o.step_size_down : up;
    if (up < 1 || down < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: step_size_up and step_size_down must be >= 1 (got %lld, %lld)", op,
                       (long long)up, (long long)down);
    if (!o.scale_fn && (o.mode < NB_CYCLIC_TRIANGULAR || o.mode > NB_CYCLIC_EXP_RANGE))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: mode is invalid and scale_fn is NULL (mode %d)", op, (int)o.mode);
    if (o.scale_mode != NB_SCALE_CYCLE && o.scale_mode != NB_SCALE_ITERATIONS)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: scale_mode must be NB_SCALE_CYCLE or NB_SCALE_ITERATIONS (got %d)", op,
                       (int)o.scale_mode);
    double gamma = nb_option(o.gamma, 1.0);
    if (!isfinite(gamma)) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: gamma must be finite (got %g)", op, gamma);
    nb_scheduler *s = nb_sched_new(NB_SCHED_CYCLIC, opt, op);
    if (!s) return NULL;
    s->total_size = (double)up + (double)down;
    s->step_ratio = (double)up / s->total_size;
    s->mode = o.mode;
    s->gamma = gamma;
    s->scale_fn = o.scale_fn;
    s->scale_user = o.scale_fn_user;
    /* the built-in modes fix the scale mode: per cycle, per iteration for exp_range */
    s->scale_mode = o.scale_fn ? o.scale_mode : o.mode == NB_CYCLIC_EXP_RANGE ? NB_SCALE_ITERATIONS : NB_SCALE_CYCLE;
    nb_status st = nb_sched_fill_pg(s, NB_PG_CYCLIC_BASE, base_lr, o.base_lrs, op, "base_lr");
    if (!st) st = nb_sched_fill_pg(s, NB_PG_MAX_LR, max_lr, o.max_lrs, op, "max_lr");
    if (!st)
        st = start_momentum(s, o.cycle_momentum, nb_option(o.base_momentum, 0.8),
                            nb_option(o.max_momentum, 0.9), o.base_momentums, o.max_momentums);
    if (st) {
        nb_scheduler_free(s);
        return NULL;
    }
    for (int g = 0; g < s->n_groups; g++) opt->groups[g].o.head.lr = *nb_sched_pg(s, g, NB_PG_CYCLIC_BASE);
    /* The initial step runs with base_lrs from the groups' initial_lr; PyTorch
     * assigns the scheduler's own base_lrs after it. */
    if (!(s = nb_sched_initial_step(s))) return NULL;
    for (int g = 0; g < s->n_groups; g++) *nb_sched_pg(s, g, NB_PG_BASE_LR) = *nb_sched_pg(s, g, NB_PG_CYCLIC_BASE);
    return s;
}

nb_scheduler *nb_cosine_annealing_warm_restarts(nb_optimizer *opt, int64_t T_0, int64_t T_mult, double eta_min) {
    const char *op = "cosine_annealing_warm_restarts";
    if (T_0 < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Expected positive integer T_0, but got %lld", op, (long long)T_0);
    if (T_mult < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Expected integer T_mult >= 1, but got %lld", op, (long long)T_mult);
    if (!(eta_min >= 0.0) || !isfinite(eta_min))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eta_min must be >= 0 and finite (got %g)", op, eta_min);
    nb_scheduler *s = nb_sched_new(NB_SCHED_WARM_RESTARTS, opt, op);
    if (!s) return NULL;
    s->T_0 = s->T_i = T_0;
    s->T_mult = T_mult;
    s->eta_min = eta_min;
    s->T_cur = -1; /* PyTorch: T_cur = last_epoch */
    return nb_sched_initial_step(s);
}
