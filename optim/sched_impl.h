/* sched_impl.h - what the scheduler files share (not installed): the
 * scheduler struct and the per-kind hooks. scheduler.c holds construction,
 * stepping, state and the composite schedulers (SequentialLR,
 * ChainedScheduler); sched_decay.c the schedules of one curve (StepLR ...
 * LambdaLR); sched_cyclic.c OneCycleLR, CyclicLR and
 * CosineAnnealingWarmRestarts; sched_plateau.c ReduceLROnPlateau.
 */
#ifndef NB_SCHED_IMPL_H
#define NB_SCHED_IMPL_H

#include "optim_impl.h"

typedef enum nb_sched_kind {
    NB_SCHED_STEP,
    NB_SCHED_MULTI_STEP,
    NB_SCHED_EXPONENTIAL,
    NB_SCHED_COSINE,
    NB_SCHED_LINEAR,
    NB_SCHED_ONE_CYCLE,
    NB_SCHED_SEQUENTIAL,
    NB_SCHED_LAMBDA,
    NB_SCHED_MULTIPLICATIVE,
    NB_SCHED_CONSTANT,
    NB_SCHED_POLYNOMIAL,
    NB_SCHED_WARM_RESTARTS,
    NB_SCHED_CYCLIC,
    NB_SCHED_PLATEAU,
    NB_SCHED_CHAINED,
    NB_SCHED_KIND_COUNT
} nb_sched_kind;

/* Per-group values a kind keeps besides base_lrs and _last_lr (indices
 * into nb_scheduler.pg). */
enum {
    NB_PG_BASE_LR,   /* base_lrs[g] */
    NB_PG_LAST_LR,   /* _last_lr[g] */
    NB_PG_INITIAL,   /* OneCycleLR: initial_lr */
    NB_PG_MAX_LR,    /* OneCycleLR, CyclicLR: max_lr */
    NB_PG_MIN_LR,    /* OneCycleLR: min_lr; ReduceLROnPlateau: min_lrs */
    NB_PG_MAX_MOM,   /* max_momentum */
    NB_PG_BASE_MOM,  /* base_momentum */
    NB_PG_CYCLIC_BASE, /* CyclicLR: its base_lr (base_lrs is the groups' initial_lr until its initial step) */
    NB_PG_COUNT
};

struct nb_scheduler {
    nb_sched_kind kind;
    nb_optimizer *opt;
    int n_groups;        /* the optimizer's groups when built */
    int64_t last_epoch;
    bool initial;        /* PyTorch's _is_initial: inside the constructor's step */
    double *pg;          /* [n_groups][NB_PG_COUNT]; owned */
    /* the kinds' parameters (each uses a few) */
    double gamma;        /* Step, MultiStep, Exponential; Cyclic exp_range */
    int64_t period;      /* StepLR step_size, T_max, total_iters, total_steps */
    double eta_min;      /* Cosine, WarmRestarts */
    double start_factor, end_factor; /* Linear */
    double factor;       /* Constant; Plateau */
    double power;        /* Polynomial */
    int64_t *milestones; /* MultiStep (sorted), Sequential; owned */
    int n_milestones;
    nb_lr_lambda lambda; /* Lambda, Multiplicative */
    void *user;
    /* OneCycleLR */
    nb_anneal_strategy anneal;
    double phase_end[3];
    int n_phases;
    bool three_phase;
    /* OneCycleLR, CyclicLR: momentum cycling */
    bool cycle_momentum, use_beta1;
    /* CyclicLR */
    double total_size, step_ratio;
    nb_cyclic_mode mode;
    nb_scale_fn scale_fn;
    void *scale_user;
    nb_scale_mode scale_mode;
    /* CosineAnnealingWarmRestarts */
    int64_t T_0, T_i, T_mult, T_cur;
    /* ReduceLROnPlateau */
    nb_plateau_mode pmode;
    nb_threshold_mode threshold_mode;
    double threshold, patience, eps, best;
    int64_t cooldown, cooldown_counter, num_bad_epochs;
    /* SequentialLR, ChainedScheduler */
    nb_scheduler **children;
    int n_children;
};

static inline double *nb_sched_pg(const nb_scheduler *s, int g, int k) { return &s->pg[g * NB_PG_COUNT + k]; }

/* ---- scheduler.c --------------------------------------------------------------- */

/* A leaf scheduler of kind over opt: base_lrs from the groups' initial_lr,
 * set from their lr where unset (PyTorch's group.setdefault). op names
 * the constructor in errors. */
nb_scheduler *nb_sched_new(nb_sched_kind kind, nb_optimizer *opt, const char *op);
/* The constructor's step (last_epoch -1 -> 0, _is_initial); frees s on failure. */
nb_scheduler *nb_sched_initial_step(nb_scheduler *s);
/* Moves a leaf scheduler to epoch e (closed: the closed form, PyTorch's
 * step(epoch) / _update_lr(epoch)) and sets the groups' lrs and momenta;
 * all or nothing. */
nb_status nb_sched_advance(nb_scheduler *s, int64_t e, bool closed);
/* Copies n per-group values into column k (from one value or a list). */
nb_status nb_sched_fill_pg(nb_scheduler *s, int k, double value, const double *list, const char *op, const char *what);
/* Sets momentum (or beta1) of every group to m[g] if the optimizer
 * accepts each; all or nothing. */
nb_status nb_sched_set_momenta(nb_scheduler *s, const double *m);
/* Checks that opt has momentum or betas (PyTorch's check for
 * cycle_momentum) and records which. */
nb_status nb_sched_momentum_kind(nb_scheduler *s, const char *op);
const char *nb_sched_op(const nb_scheduler *s);

/* ---- the kinds' get_lr: lr (and momentum, when cycled; may be NULL) of
 * group g at epoch e, from its current lr (the recursive forms) ---- */
nb_status nb_sched_decay_lr(const nb_scheduler *s, int g, int64_t e, bool closed, double lr, double *out);
nb_status nb_sched_cyclic_lr(const nb_scheduler *s, int g, int64_t e, double *out, double *momentum);
/* WarmRestarts' T_cur / T_i update for a step without an epoch. */
void nb_sched_warm_restarts_advance(nb_scheduler *s);
/* ReduceLROnPlateau's step. */
nb_status nb_sched_plateau_step(nb_scheduler *s, double metric);

#endif
