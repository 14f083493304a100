/* optim_impl.h - what optimizer.c shares with sgd.c and adam.c (not
 * installed): the optimizer struct, per-parameter state and the per-kind
 * update hook that turns options into a backend kernel call.
 */
#ifndef NB_OPTIM_IMPL_H
#define NB_OPTIM_IMPL_H

#include "nb_impl.h"
#include "nb_optim.h"

/* Indices of the state tensors, in the order of nb_optim_state_names. */
enum { NB_ST_EXP_AVG, NB_ST_EXP_AVG_SQ, NB_ST_MAX_EXP_AVG_SQ, NB_ST_MOMENTUM, NB_ST_COUNT };
extern const char *const nb_optim_state_names[NB_ST_COUNT];

typedef struct nb_param_state {
    int64_t step;                   /* updates applied so far */
    nb_tensor *state[NB_ST_COUNT];  /* owned, unscoped; NULL until created */
} nb_param_state;

typedef enum nb_optim_kind { NB_OPTIM_SGD, NB_OPTIM_ADAM, NB_OPTIM_ADAMW } nb_optim_kind;

struct nb_optimizer {
    nb_optim_kind kind;
    const char *op; /* "sgd", "adam", "adamw": prefixes error messages */
    double lr;      /* the group's lr; overrides the lr in the options */
    nb_sgd_options sgd;
    nb_adam_options adam;
    int n;
    nb_tensor **params; /* owned references */
    nb_param_state *state;
    /* Which state tensors this optimizer keeps for a parameter. */
    bool (*has_state)(const nb_optimizer *opt, int which);
    /* Updates param i in place: p and g are contiguous, same shape and
     * dtype; p is the parameter or its contiguous copy. Called under no grad;
     * state tensors in has_state already exist. first: the state was
     * created for this step (no history yet). */
    nb_status (*update)(nb_optimizer *opt, int i, nb_tensor *p, nb_tensor *g, bool first);
};

/* Validates params and builds an optimizer with retained references and
 * empty state (the caller sets the options, has_state and update). */
nb_optimizer *nb_optim_new(nb_optim_kind kind, const char *op, nb_tensor *const *params, int n);
/* The parameters of a module as a malloc'd array (*n entries); NULL on error. */
nb_tensor **nb_optim_module_params(nb_module *m, const char *op, int *n);
/* An option field: v, or dflt when v is +0.0; NB_ZERO (-0.0) gives +0.0. */
double nb_optim_default(double v, double dflt);

#endif
