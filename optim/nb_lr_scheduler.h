/* nb_lr_scheduler.h - learning-rate schedulers (torch.optim.lr_scheduler:
 * names, arguments, defaults and update rules of PyTorch 2.11), included by
 * nb_optim.h.
 *
 *   nb_scheduler *sch = nb_sequential_lr(opt, (nb_scheduler *[]){
 *           nb_linear_lr(opt, 0.1, 1.0, 5),
 *           nb_cosine_annealing_lr(opt, 95, 0.0)}, 2, (int64_t[]){5});
 *   for (epoch...) { ...train...; nb_scheduler_step(sch); }
 *   nb_scheduler_free(sch);
 *
 * A scheduler sets the lr of every parameter group of its optimizer, each
 * from its own base lr; the optimizer must outlive it. Constructing one
 * performs PyTorch's initial step (last_epoch -1 -> 0), which sets the lrs
 * of step 0. As PyTorch, the first scheduler built over an optimizer
 * records each group's lr as the group's "initial_lr", and every scheduler
 * takes the groups' initial_lr as its base_lrs (OneCycleLR sets it to
 * max_lr / div_factor; CyclicLR uses its base_lr).
 *
 * The lrs after each step are computed exactly as PyTorch 2.11's get_lr
 * does, including its recursive ("chainable") forms, which multiply the
 * group's current lr rather than evaluating a closed form in the step
 * count: StepLR/MultiStepLR/ExponentialLR multiply by gamma,
 * CosineAnnealingLR uses
 *   lr_t = (1 + cos(pi t / T)) / (1 + cos(pi (t-1) / T)) * (lr_{t-1} - eta_min) + eta_min
 * (with PyTorch's special case when (t - 1 - T) % 2T == 0), LinearLR
 *   lr_t = lr_{t-1} * (1 + (e - s) / (T s + (t - 1)(e - s)))   (t <= T),
 * ConstantLR multiplies by factor at step 0 and by 1 / factor at
 * total_iters, PolynomialLR by ((1 - t/T) / (1 - (t-1)/T))^power,
 * MultiplicativeLR by lr_lambda(t). So an lr set by hand between steps
 * carries into the next one, as in PyTorch, and ChainedScheduler composes
 * them. The float64 sequences match PyTorch's (tests/optim_ref).
 *
 * Differences: no last_epoch constructor argument (resume with
 * nb_scheduler_load_state_dict or a checkpoint); an lr must stay >= 0 and
 * finite, so OneCycleLR's linear anneal, which extrapolates below 0 at
 * step total_steps (the lr after the last update, never used), is clamped
 * to 0 there, and a step that would give NaN fails instead.
 *
 * Constructors return NULL with nb_last_error() set on a NULL optimizer, an
 * argument out of PyTorch's range (NB_ERR_INVALID_ARG), NB_ERR_OOM. A list
 * argument (per group) may be NULL, meaning the scalar for every group;
 * otherwise it has one entry per parameter group. */
#ifndef NB_LR_SCHEDULER_H
#define NB_LR_SCHEDULER_H

#include "nb_optim.h" /* nb_optimizer, nb_flag; it includes this header at its end */

#ifdef __cplusplus
extern "C" {
#endif

/* A learning-rate scheduler (torch.optim.lr_scheduler.LRScheduler and
 * ReduceLROnPlateau): its kind, hyperparameters and step state over one
 * optimizer. Opaque; made by the constructors below, freed with
 * nb_scheduler_free. */
typedef struct nb_scheduler nb_scheduler;

/* StepLR: lr *= gamma every step_size steps (step_size >= 1, gamma >= 0). */
nb_scheduler *nb_step_lr(nb_optimizer *opt, int64_t step_size, double gamma);
/* MultiStepLR: lr *= gamma^k at step m, k = how many times m is among the
 * n milestones (any order, repeats allowed, n >= 0; copied). gamma >= 0. */
nb_scheduler *nb_multi_step_lr(nb_optimizer *opt, const int64_t *milestones, int n, double gamma);
/* ExponentialLR: lr *= gamma every step (gamma >= 0). */
nb_scheduler *nb_exponential_lr(nb_optimizer *opt, double gamma);
/* CosineAnnealingLR (Loshchilov & Hutter 2017, SGDR without restarts), in
 * PyTorch's recursive form above; continues past T_max (the cosine rises
 * again). T_max >= 1, eta_min >= 0 and finite. */
nb_scheduler *nb_cosine_annealing_lr(nb_optimizer *opt, int64_t T_max, double eta_min);
/* LinearLR (warmup): the lr factor goes linearly from start_factor at step
 * 0 to end_factor at step total_iters, then stays. PyTorch's defaults are
 * (1/3, 1.0, 5). 0 < start_factor <= 1, 0 <= end_factor <= 1,
 * total_iters >= 1. */
nb_scheduler *nb_linear_lr(nb_optimizer *opt, double start_factor, double end_factor, int64_t total_iters);
/* ConstantLR: lr * factor for steps 0 .. total_iters - 1, then lr (PyTorch's
 * defaults (1/3, 5)). 0 < factor <= 1 (PyTorch also takes 0, which gives
 * NaN at total_iters), total_iters >= 0. */
nb_scheduler *nb_constant_lr(nb_optimizer *opt, double factor, int64_t total_iters);
/* PolynomialLR: lr = base_lr (1 - min(t, T) / T)^power (PyTorch's defaults
 * (5, 1.0)); total_iters >= 1, power finite. */
nb_scheduler *nb_polynomial_lr(nb_optimizer *opt, int64_t total_iters, double power);

/* A learning-rate factor for LambdaLR / MultiplicativeLR: the value at
 * step `epoch` for parameter group `group` (user: the pointer given to the
 * constructor). It must be deterministic: it is called again on resume. */
typedef double (*nb_lr_lambda)(int64_t epoch, int group, void *user);
/* LambdaLR: lr = base_lr * lr_lambda(t). MultiplicativeLR: lr *=
 * lr_lambda(t) for t >= 1. A factor that is NaN, infinite or gives a
 * negative lr makes that step fail (NB_ERR_INVALID_ARG). */
nb_scheduler *nb_lambda_lr(nb_optimizer *opt, nb_lr_lambda lr_lambda, void *user);
nb_scheduler *nb_multiplicative_lr(nb_optimizer *opt, nb_lr_lambda lr_lambda, void *user);

/* CosineAnnealingWarmRestarts (SGDR, Loshchilov & Hutter 2017):
 *   lr = eta_min + (base_lr - eta_min) (1 + cos(pi T_cur / T_i)) / 2
 * where T_cur counts steps since the last restart and the period T_i starts
 * at T_0 and is multiplied by T_mult at each restart. T_0 >= 1, T_mult >= 1
 * (PyTorch's default 1), eta_min >= 0 and finite (default 0). */
nb_scheduler *nb_cosine_annealing_warm_restarts(nb_optimizer *opt, int64_t T_0, int64_t T_mult, double eta_min);

/* OneCycleLR's anneal_strategy, from a phase's start value to its end value. */
typedef enum nb_anneal_strategy {
    NB_ANNEAL_COS = 0, /* "cos": end + (start - end) (1 + cos(pi pct)) / 2 */
    NB_ANNEAL_LINEAR   /* "linear": start + (end - start) pct */
} nb_anneal_strategy;

/* OneCycleLR's options (Smith & Topin 2017, "Super-Convergence"). A field
 * left 0 takes PyTorch's default: pct_start 0.3 (NB_ZERO for 0),
 * anneal_strategy cos, div_factor 25, final_div_factor 1e4, three_phase
 * false, cycle_momentum true, base_momentum 0.85, max_momentum 0.95.
 * 0 <= pct_start <= 1, div_factor > 0, final_div_factor > 0. max_lrs,
 * base_momentums, max_momentums: per-group lists or NULL. */
typedef struct nb_one_cycle_options {
    double pct_start;                   /* fraction of the steps spent raising the lr, in [0, 1];
                                           default 0.3 (NB_ZERO for 0) */
    nb_anneal_strategy anneal_strategy; /* default NB_ANNEAL_COS */
    double div_factor;                  /* initial_lr = max_lr / div_factor, > 0 and finite; default 25 */
    double final_div_factor;            /* min_lr = initial_lr / final_div_factor, > 0 and finite; default 1e4 */
    bool three_phase;                   /* a third phase down from initial_lr to min_lr; default false */
    nb_flag cycle_momentum;             /* NB_FLAG_FALSE leaves the momentum alone; default true */
    double base_momentum;               /* lowest momentum (at max_lr), >= 0 and finite; default 0.85
                                           (NB_ZERO for 0) */
    double max_momentum;                /* highest momentum (at the ends), >= 0 and finite; default 0.95
                                           (NB_ZERO for 0) */
    const double *max_lrs;              /* per-group max_lr (one per group, each >= 0 and finite) or NULL */
    const double *base_momentums;       /* per-group base_momentum or NULL */
    const double *max_momentums;        /* per-group max_momentum or NULL */
} nb_one_cycle_options;

/* OneCycleLR over total_steps (>= 1) steps: from initial_lr = max_lr /
 * div_factor up to max_lr at step pct_start * total_steps - 1, then down to
 * min_lr = initial_lr / final_div_factor at step total_steps - 1 (three
 * phase: up, back down to initial_lr at 2 pct_start total_steps - 2, then
 * to min_lr). Ignores the optimizer's lr, as PyTorch. With cycle_momentum,
 * the optimizer's momentum (SGD, RMSprop, Muon) or beta1 (Adam and the
 * other optimizers with betas) goes the other way, max_momentum -> 
 * base_momentum -> max_momentum; an optimizer with neither fails
 * (NB_ERR_INVALID_ARG, as PyTorch's ValueError). Stepping past step
 * total_steps fails (NB_ERR_STATE, "Tried to step ... times"), as
 * PyTorch; a phase of zero length reached fails with NB_ERR_INVALID_ARG
 * (PyTorch's ZeroDivisionError). max_lr >= 0 and finite. */
nb_scheduler *nb_one_cycle_lr(nb_optimizer *opt, double max_lr, int64_t total_steps, nb_one_cycle_options opts);

/* CyclicLR's mode: the amplitude scale f of the cycle. */
typedef enum nb_cyclic_mode {
    NB_CYCLIC_TRIANGULAR = 0, /* "triangular": f = 1 */
    NB_CYCLIC_TRIANGULAR2,    /* "triangular2": f = 1 / 2^(cycle - 1), halved each cycle */
    NB_CYCLIC_EXP_RANGE       /* "exp_range": f = gamma^iteration */
} nb_cyclic_mode;
/* CyclicLR's scale_mode: what a custom scale_fn is given. */
typedef enum nb_scale_mode {
    NB_SCALE_CYCLE = 0, /* "cycle": the cycle number, from 1 */
    NB_SCALE_ITERATIONS /* "iterations": the step count t */
} nb_scale_mode;
/* A custom CyclicLR amplitude scale in [0, 1] of the cycle number or the
 * iteration (per scale_mode). */
typedef double (*nb_scale_fn)(double x, void *user);

/* CyclicLR's options (Smith 2017, "Cyclical learning rates for training
 * neural networks"). A field left 0 takes PyTorch's default: step_size_up
 * 2000, step_size_down = step_size_up, mode triangular (amplitude 1),
 * triangular2 (halved each cycle: 1 / 2^(cycle - 1)) or exp_range
 * (gamma^iteration, gamma default 1); scale_fn (with scale_fn_user and
 * scale_mode, default per cycle) replaces mode's; cycle_momentum true,
 * base_momentum 0.8, max_momentum 0.9 (momentum goes max -> base -> max,
 * inversely to the lr; the optimizer must have momentum or betas, as for
 * OneCycleLR). base_lrs, max_lrs, base_momentums, max_momentums: per-group
 * lists or NULL. step sizes >= 1. */
typedef struct nb_cyclic_lr_options {
    int64_t step_size_up;          /* steps from base_lr up to max_lr, >= 1; default 2000 */
    int64_t step_size_down;        /* steps back down, >= 1; default step_size_up */
    nb_cyclic_mode mode;           /* default NB_CYCLIC_TRIANGULAR; ignored with scale_fn */
    double gamma;                  /* exp_range's base, finite; default 1.0 (NB_ZERO for 0) */
    nb_scale_fn scale_fn;          /* custom scale replacing mode's, or NULL (default) */
    void *scale_fn_user;           /* passed to scale_fn */
    nb_scale_mode scale_mode;      /* scale_fn's argument; default NB_SCALE_CYCLE (the built-in modes
                                      fix it: exp_range per iteration, the others per cycle) */
    nb_flag cycle_momentum;        /* NB_FLAG_FALSE leaves the momentum alone; default true */
    double base_momentum;          /* lowest momentum (at max_lr), >= 0 and finite; default 0.8
                                      (NB_ZERO for 0) */
    double max_momentum;           /* highest momentum (at base_lr), >= 0 and finite; default 0.9
                                      (NB_ZERO for 0) */
    const double *base_lrs;        /* per-group base_lr (one per group, each >= 0 and finite) or NULL */
    const double *max_lrs;         /* per-group max_lr or NULL */
    const double *base_momentums;  /* per-group base_momentum or NULL */
    const double *max_momentums;   /* per-group max_momentum or NULL */
} nb_cyclic_lr_options;

/* CyclicLR between base_lr and max_lr (both >= 0 and finite): with
 * cycle = floor(1 + t / (up + down)), x = 1 + t / (up + down) - cycle,
 *   scale = x <= r ? x / r : (x - 1) / (r - 1)     (r = up / (up + down))
 *   lr = base_lr + (max_lr - base_lr) scale f(cycle or t).
 * The constructor sets every group's lr to base_lr. */
nb_scheduler *nb_cyclic_lr(nb_optimizer *opt, double base_lr, double max_lr, nb_cyclic_lr_options opts);

/* ReduceLROnPlateau's mode: whether the metric should go down or up. */
typedef enum nb_plateau_mode {
    NB_PLATEAU_MIN = 0, /* "min": lower is better (a loss) */
    NB_PLATEAU_MAX      /* "max": higher is better (an accuracy) */
} nb_plateau_mode;
/* ReduceLROnPlateau's threshold_mode: how much better counts as better. */
typedef enum nb_threshold_mode {
    NB_THRESHOLD_REL = 0, /* "rel": by the fraction threshold of best */
    NB_THRESHOLD_ABS      /* "abs": by threshold itself */
} nb_threshold_mode;

/* ReduceLROnPlateau's options. A field left 0 takes PyTorch's default:
 * mode min, factor 0.1 (0 <= factor < 1), patience 10 (a count; NB_ZERO
 * for 0), threshold 1e-4 (NB_ZERO for 0), threshold_mode rel, cooldown 0,
 * min_lr 0 (or min_lrs per group), eps 1e-8 (NB_ZERO for 0). */
typedef struct nb_reduce_lr_on_plateau_options {
    nb_plateau_mode mode;             /* default NB_PLATEAU_MIN */
    double factor;                    /* lr *= factor on a plateau, 0 <= factor < 1; default 0.1 (NB_ZERO for 0) */
    double patience;                  /* bad steps tolerated, a whole number >= 0; default 10 (NB_ZERO for 0) */
    double threshold;                 /* least improvement that counts, finite; default 1e-4 (NB_ZERO for 0) */
    nb_threshold_mode threshold_mode; /* default NB_THRESHOLD_REL */
    int64_t cooldown;                 /* steps to wait after a reduction, >= 0; default 0 */
    double min_lr;                    /* lower bound of every group's lr, >= 0 and finite; default 0 */
    const double *min_lrs;            /* per-group min_lr (one per group) or NULL */
    double eps;                       /* a reduction of eps or less is skipped, >= 0 and finite; default 1e-8
                                         (NB_ZERO for 0) */
} nb_reduce_lr_on_plateau_options;

/* ReduceLROnPlateau: fed a metric each step (nb_scheduler_step_metric), it
 * counts the steps since the best value (better: below best (1 -
 * threshold) in rel/min mode, best - threshold in abs/min, above best (1 +
 * threshold) or best + threshold in max mode); past patience such steps it
 * sets lr = max(lr factor, min_lr) (when that lowers lr by more than eps),
 * then waits cooldown steps. It does not touch the lr at construction. */
nb_scheduler *nb_reduce_lr_on_plateau(nb_optimizer *opt, nb_reduce_lr_on_plateau_options opts);

/* SequentialLR: schedulers[0] runs until step milestones[0], where
 * schedulers[1] takes over (at its epoch 0, by its closed form where it has
 * one, as PyTorch's _update_lr(0)), and so on; n >= 1 schedulers and
 * n - 1 non-decreasing milestones (copied). ChainedScheduler: every step
 * steps each of the n >= 1 schedulers in order, so that their chainable
 * forms compose (ConstantLR warmup over ExponentialLR, ...); it does not
 * step at construction. Both take ownership of the n children ALWAYS,
 * also when they fail (so a NULL child from a failed nested constructor
 * neither leaks the others nor crashes: it is an error). The children must
 * be over opt, distinct, and not ReduceLROnPlateau (PyTorch's ValueError);
 * SequentialLR's children must not be composite themselves. SequentialLR,
 * as PyTorch, resets the lrs to the groups' initial_lr, undoes every
 * child's initial step and redoes children[0]'s. */
nb_scheduler *nb_sequential_lr(nb_optimizer *opt, nb_scheduler *const *schedulers, int n, const int64_t *milestones);
nb_scheduler *nb_chained_scheduler(nb_optimizer *opt, nb_scheduler *const *schedulers, int n);

/* scheduler.step(): advances one step and sets the optimizer's lrs (and
 * momenta, when cycled). On error the scheduler and the optimizer are
 * unchanged (a ChainedScheduler keeps the steps of the children before the
 * failing one). Errors: NB_ERR_INVALID_ARG (NULL; ReduceLROnPlateau, which
 * needs nb_scheduler_step_metric; an lr the optimizer rejects, e.g. NaN),
 * NB_ERR_STATE (OneCycleLR past total_steps; the optimizer gained a param
 * group after the scheduler was built). */
nb_status nb_scheduler_step(nb_scheduler *s);
/* ReduceLROnPlateau's step(metrics). Other kinds: NB_ERR_INVALID_ARG. */
nb_status nb_scheduler_step_metric(nb_scheduler *s, double metric);
/* get_last_lr(): the lr the scheduler last set for group 0 / group g (NAN
 * for NULL or a bad group). */
double nb_scheduler_get_last_lr(const nb_scheduler *s);
double nb_scheduler_get_group_last_lr(const nb_scheduler *s, int group);
/* last_epoch: steps taken since construction (0 right after it); -1 for
 * NULL; ChainedScheduler: its last child's. */
int64_t nb_scheduler_last_epoch(const nb_scheduler *s);
/* PyTorch's class name: "StepLR", "MultiStepLR", "ExponentialLR",
 * "CosineAnnealingLR", "LinearLR", "OneCycleLR", "SequentialLR",
 * "LambdaLR", "MultiplicativeLR", "ConstantLR", "PolynomialLR",
 * "CosineAnnealingWarmRestarts", "CyclicLR", "ReduceLROnPlateau",
 * "ChainedScheduler" (NULL for NULL). */
const char *nb_scheduler_kind(const nb_scheduler *s);
/* Frees the scheduler and, for SequentialLR / ChainedScheduler, its
 * children. NULL is ignored. */
void nb_scheduler_free(nb_scheduler *s);

/* ---- state, for checkpoints -------------------------------------------------- */

/* One (key, value) pair of a scheduler's state.
 * What changes as a scheduler steps, as (key, value) pairs named after
 * PyTorch's scheduler.state_dict(): "last_epoch", "base_lrs.<g>",
 * "_last_lr.<g>" for every kind; "T_i", "T_cur" (CosineAnnealingWarmRestarts);
 * "best", "num_bad_epochs", "cooldown_counter" (ReduceLROnPlateau, no
 * base_lrs); the children's under "_schedulers.<j>." (SequentialLR,
 * ChainedScheduler; a child that has not run yet has last_epoch -1, as
 * PyTorch after SequentialLR undid its initial step). The hyperparameters
 * and callbacks are not state: rebuild the scheduler with the same
 * constructor, then load. Values are exact doubles, so after a load the
 * next steps are bit-identical to those of the scheduler saved. */
typedef struct nb_scheduler_value {
    char key[64]; /* PyTorch's state_dict key, NUL-terminated ("last_epoch", "base_lrs.0", ...) */
    double value; /* its value, exact (integers as doubles) */
} nb_scheduler_value;

/* The number of pairs (-1 for NULL). */
int nb_scheduler_state_size(const nb_scheduler *s);
/* Writes the state_size pairs to out (n must equal state_size). */
nb_status nb_scheduler_state_dict(const nb_scheduler *s, nb_scheduler_value *out, int n);
/* Restores the pairs, found by key (any order; each key of the scheduler
 * exactly once), and sets each group's lr to its _last_lr (the lr the
 * scheduler last set: the recursive forms continue from the optimizer's
 * lr, so this alone resumes exactly; restore the optimizer's lr afterwards
 * only if it was changed by hand after the last step). Errors, leaving
 * everything unchanged: NB_ERR_INVALID_ARG (NULL, n not state_size, a key
 * missing, an lr negative or not finite, a last_epoch below 0 (-1 for a
 * child), a count below 0, OneCycleLR's last_epoch past total_steps,
 * T_i < 1 or T_cur < 0). */
nb_status nb_scheduler_load_state_dict(nb_scheduler *s, const nb_scheduler_value *in, int n);

#ifdef __cplusplus
}
#endif
#endif
