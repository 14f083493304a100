/* optim_impl.h - what the optimizer files share (not installed): the
 * optimizer struct with its parameter groups and per-parameter state, and
 * the descriptor each optimizer kind fills in (optim/<kind>.c): its
 * PyTorch name, its hyperparameters as a table of named fields (for groups,
 * checkpoints and schedulers that cycle momentum), its state names and the
 * update of one parameter (a backend kernel or a composition of ops).
 */
#ifndef NB_OPTIM_IMPL_H
#define NB_OPTIM_IMPL_H

#include <stddef.h>

#include "nb_extension.h"
#include "nb_foreach.h"
#include "nb_optim.h"

#define NB_OPT_MAX_TENSORS 6 /* state tensors per parameter */
#define NB_OPT_MAX_SCALARS 6 /* scalar state per parameter */

/* Every kind's options, so that a group can hold any of them. Each struct
 * starts with `double lr` (checked in optimizer.c), read through `head`. */
typedef union nb_optim_options {
    struct {
        double lr;
    } head;
    nb_sgd_options sgd;
    nb_adam_options adam;
    nb_adadelta_options adadelta;
    nb_adafactor_options adafactor;
    nb_adagrad_options adagrad;
    nb_adamax_options adamax;
    nb_asgd_options asgd;
    nb_lbfgs_options lbfgs;
    nb_nadam_options nadam;
    nb_radam_options radam;
    nb_rmsprop_options rmsprop;
    nb_rprop_options rprop;
    nb_lion_options lion;
    nb_muon_options muon;
} nb_optim_options;

/* One hyperparameter of an options struct, by its PyTorch param_group key
 * ("lr", "betas.0", "momentum", ...). */
typedef enum nb_field_type {
    NB_FIELD_F64,      /* double */
    NB_FIELD_F64_NONE, /* double, NAN meaning Python's None (Adafactor's eps.0) */
    NB_FIELD_BOOL,     /* bool */
    NB_FIELD_INT,      /* int64_t */
    NB_FIELD_ENUM,     /* an enum (int-sized), incl. nb_flag */
} nb_field_type;

typedef struct nb_field {
    const char *name;
    nb_field_type type;
    size_t offset;
} nb_field;

#define NB_FIELD(st, member, key, type) {key, type, offsetof(st, member)}

/* Per-parameter state, PyTorch's optimizer.state[p]. */
typedef struct nb_param_state {
    int64_t step;                      /* updates applied so far */
    bool started;                      /* state exists (PyTorch: len(state) != 0) */
    nb_tensor *t[NB_OPT_MAX_TENSORS];  /* owned, unscoped; by the kind's tensor_names; NULL if absent */
    double s[NB_OPT_MAX_SCALARS];      /* by the kind's scalar_names (mu_product, eta, ...) */
} nb_param_state;

typedef struct nb_optim_group {
    int first, n;      /* its parameters: params[first .. first + n) */
    double initial_lr; /* PyTorch's group["initial_lr"], set by the first scheduler; NAN until then */
    nb_optim_options o; /* resolved options; o.head.lr is the group's lr */
} nb_optim_group;

typedef struct nb_optim_desc nb_optim_desc;

struct nb_optimizer {
    const nb_optim_desc *d;
    int n;                 /* parameters, all groups */
    nb_tensor **params;    /* owned references, group by group */
    nb_param_state *state; /* [n] */
    int n_groups;
    nb_optim_group *groups;
    nb_optim_options defaults; /* the constructor's options, resolved (add_param_group inherits them) */
    void *extra;           /* the kind's own data (LBFGS), freed by d->free_extra */
    struct nb_optim_dev *devm; /* lr and step counts on the device (capturable.c), or NULL */
};

/* A kind of optimizer. */
struct nb_optim_desc {
    const char *name; /* PyTorch's class name: "Adam"; checkpoints' optimizer.kind */
    const char *op;   /* "adam": prefixes error messages */
    size_t options_size;
    const void *torch_defaults; /* PyTorch's defaults (bools false; NAN for None) */
    const nb_field *fields;
    int n_fields;
    const char *const *tensor_names; /* PyTorch's state keys */
    int n_tensors;
    const char *const *scalar_names;
    int n_scalars;
    bool contiguous; /* update wants p and grad contiguous (a backend kernel) */
    bool one_group;  /* LBFGS: exactly one parameter group */
    /* After defaults were filled in (e.g. LBFGS's max_eval from max_iter); may be NULL. */
    void (*finish)(void *options);
    /* Validates resolved options; the error names op. */
    nb_status (*check)(const char *op, const void *options);
    /* Validates a parameter for this kind (Muon: dims); may be NULL. */
    nb_status (*check_param)(const char *op, const nb_tensor *p, const void *options, int i);
    /* Whether parameter p keeps state tensor k under these options, and
     * its shape (the parameter's if shape is left untouched). */
    bool (*has_tensor)(const void *options, const nb_tensor *p, int k, int *ndim, int64_t *shape);
    /* Initial values on a parameter's first step (tensors start at zero);
     * may be NULL. */
    nb_status (*init)(nb_optimizer *opt, int g, int i);
    /* Updates parameter i of group g in place (p: the parameter, or its
     * contiguous copy when d->contiguous); grad of p's shape and dtype.
     * Called under no grad inside a scope; created: bit k set for state
     * tensor k made (zeros) for this step. */
    nb_status (*update)(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created);
    /* update over n parameters idx[0..n) of group g at once (a backend's
     * multi-tensor kernel: one launch instead of n), results bit-identical
     * to n updates; every p[j] and grad[j] contiguous, one dtype and
     * device, the same step count and the same `created`. May be NULL.
     * A desc that has it writes through nb_fused_* in update and
     * update_multi (they move the version counters): the step then adds
     * no bump of its own (autocast's kept copies stay current). */
    nb_status (*update_multi)(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                              nb_tensor *const *grad, unsigned created);
    /* Replaces the generic loop (LBFGS); may be NULL. closure may be NULL. */
    nb_status (*step)(nb_optimizer *opt, nb_closure_fn closure, void *user, double *loss);
    /* Checkpoint check of a state tensor read from a file for parameter i
     * (options: the file's); NULL = has_tensor's shape and p's dtype. */
    nb_status (*check_tensor)(const nb_optimizer *opt, const void *options, int i, int k, const nb_tensor *t);
    void (*free_extra)(void *extra);
};

/* ---- capturable.c: lr and step counts on the device (CUDA graphs) ---------- */

/* Whether p's device has graphs: its fused updates then read lr and step
 * counts from device memory (nb_optim_dev_prepare). */
bool nb_optim_capturable(const nb_tensor *p);
/* For a fused update of parameters idx[0..n) of group g (p their tensors):
 * the device's lr word for the group (*lr_dev) and step counters (step_dev[j],
 * incremented by the kernel), made and brought up to date here (outside a
 * capture; inside one they must already be, else NB_ERR_STATE: warm up with
 * an eager step); while capturing, registers the replay hooks. A host step
 * count that differs from what the device holds (a checkpoint load) is
 * uploaded before use. */
nb_status nb_optim_dev_prepare(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                               const double **lr_dev, double **step_dev);
void nb_optim_dev_free(nb_optimizer *opt);

/* ---- optimizer.c ------------------------------------------------------------ */

/* Builds an optimizer of kind d from groups and the constructor's options
 * (user values; PyTorch's defaults are filled in). */
nb_optimizer *nb_optim_build(const nb_optim_desc *d, const nb_param_group *groups, int n_groups, const void *options);
/* The same over a module's parameters or a plain list (one group). */
nb_optimizer *nb_optim_build_module(const nb_optim_desc *d, nb_module *m, const void *options);
nb_optimizer *nb_optim_build_params(const nb_optim_desc *d, nb_tensor *const *params, int n, const void *options);
/* The field named key of d (NULL if none). */
const nb_field *nb_optim_field(const nb_optim_desc *d, const char *key);
/* Reads / writes a field of an options struct as a double (bools 0/1). */
double nb_optim_field_get(const nb_field *f, const void *options);
void nb_optim_field_set(const nb_field *f, void *options, double v);
/* Sets group g's hyperparameter key to v if the kind's check accepts the
 * result (schedulers cycling momentum use it). */
nb_status nb_optim_set_field(nb_optimizer *opt, int g, const char *key, double v);
/* The kind's index of state tensor / scalar `name`, or -1. */
int nb_optim_tensor_index(const nb_optim_desc *d, const char *name);
int nb_optim_scalar_index(const nb_optim_desc *d, const char *name);
/* The group holding parameter i. */
int nb_optim_group_of(const nb_optimizer *opt, int i);

/* Checks shared by the kinds: x >= 0 and finite; 0 <= x < 1. */
nb_status nb_optim_check_nonneg(const char *op, const char *what, double x);
nb_status nb_optim_check_unit(const char *op, const char *what, double x);

/* ---- optim_ops.c: the in-place tensor methods the torch.optim update
 * rules are written with, as compositions of nabla ops, each in the same
 * order of floating-point operations as ATen's CPU kernel. They return a new
 * scoped tensor, or NULL with the error kept (a NULL input gives NULL, as
 * the ops), so a chain needs one check. ------------------------------------ */
nb_tensor *nb_optim_axpy(nb_tensor *y, double a, nb_tensor *x);                   /* y.add(x, alpha=a) */
nb_tensor *nb_optim_addcmul(nb_tensor *y, double v, nb_tensor *a, nb_tensor *b); /* y + v * a * b */
nb_tensor *nb_optim_addcdiv(nb_tensor *y, double v, nb_tensor *a, nb_tensor *b); /* y + v * a / b */
nb_tensor *nb_optim_div_scalar(nb_tensor *x, double s);                          /* x / s */
nb_tensor *nb_optim_scalar(const nb_tensor *like, double v);                     /* 0-d, like's dtype and device */
/* The gradient as the update rules start from it: -grad when maximize,
 * then + weight_decay * p when weight_decay != 0 (L2, the non-decoupled form). */
nb_tensor *nb_optim_grad(nb_tensor *grad, bool maximize, nb_tensor *p, double weight_decay);
/* Writes src into dst (same shape); NB_OK, or the error (src NULL: the
 * error that made it NULL). */
nb_status nb_optim_assign(nb_tensor *dst, nb_tensor *src);
/* The value of a one-element tensor on the host (PyTorch's .item()); NAN
 * with the error kept for NULL. */
double nb_optim_item(nb_tensor *t);

/* The descriptors (one per optim/<kind>.c). */
extern const nb_optim_desc nb_sgd_desc, nb_adam_desc, nb_adamw_desc, nb_adadelta_desc, nb_adafactor_desc,
    nb_adagrad_desc, nb_adamax_desc, nb_asgd_desc, nb_lbfgs_desc, nb_nadam_desc, nb_radam_desc, nb_rmsprop_desc,
    nb_rprop_desc, nb_lion_desc, nb_muon_desc;

/* The three public constructors of a kind: over a module, a list, groups. */
#define NB_OPTIM_CONSTRUCTORS(name, opts_t, desc)                                                       \
    nb_optimizer *nb_##name(nb_module *m, opts_t opts) { return nb_optim_build_module(&desc, m, &opts); } \
    nb_optimizer *nb_##name##_params(nb_tensor *const *params, int n, opts_t opts) {                     \
        return nb_optim_build_params(&desc, params, n, &opts);                                          \
    }                                                                                                   \
    nb_optimizer *nb_##name##_groups(const nb_param_group *groups, int n_groups, opts_t opts) {          \
        return nb_optim_build(&desc, groups, n_groups, &opts);                                          \
    }

#endif
