/* adam.c - torch.optim.Adam and AdamW: options with PyTorch's defaults and
 * checks, and the update of one parameter through nb_fused_adam_
 * (nb_foreach.h; formula in nb_optim.h; Kingma & Ba, "Adam", ICLR 2015; Loshchilov
 * & Hutter, "Decoupled weight decay regularization", ICLR 2019).
 */
#include "optim_impl.h"

static const nb_field adam_fields[] = {
    NB_FIELD(nb_adam_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_adam_options, betas[0], "betas.0", NB_FIELD_F64),
    NB_FIELD(nb_adam_options, betas[1], "betas.1", NB_FIELD_F64),
    NB_FIELD(nb_adam_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_adam_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_adam_options, amsgrad, "amsgrad", NB_FIELD_BOOL),
    NB_FIELD(nb_adam_options, maximize, "maximize", NB_FIELD_BOOL),
    NB_FIELD(nb_adam_options, decoupled_weight_decay, "decoupled_weight_decay", NB_FIELD_BOOL),
};
static const char *const adam_tensors[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
static const nb_adam_options adam_torch = {.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8};
static const nb_adam_options adamw_torch = {.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 1e-2};

static bool adam_has_tensor(const void *options, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)p, (void)ndim, (void)shape;
    return k < 2 || ((const nb_adam_options *)options)->amsgrad;
}

static nb_status adam_update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created; /* the step count carries Adam's history */
    const nb_adam_options *o = &opt->groups[g].o.adam;
    nb_tensor *const *st = opt->state[i].t;
    nb_adam_hyper h = {
        .lr = o->lr,
        .beta1 = o->betas[0],
        .beta2 = o->betas[1],
        .eps = o->eps,
        .weight_decay = o->weight_decay,
        .decoupled = opt->d == &nb_adamw_desc || o->decoupled_weight_decay,
        .amsgrad = o->amsgrad,
        .maximize = o->maximize,
        .step = opt->state[i].step + 1,
    };
    return nb_fused_adam_(1, &p, &grad, &st[0], &st[1], o->amsgrad ? &st[2] : NULL, &h);
}

/* The same over n parameters with one nb_fused_adam_ call (one launch on
 * a GPU); h is shared, so the caller batches equal step counts. */
static nb_status adam_update_multi(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                                   nb_tensor *const *grad, unsigned created) {
    (void)created;
    const nb_adam_options *o = &opt->groups[g].o.adam;
    nb_adam_hyper h = {
        .lr = o->lr,
        .beta1 = o->betas[0],
        .beta2 = o->betas[1],
        .eps = o->eps,
        .weight_decay = o->weight_decay,
        .decoupled = opt->d == &nb_adamw_desc || o->decoupled_weight_decay,
        .amsgrad = o->amsgrad,
        .maximize = o->maximize,
        .step = opt->state[idx[0]].step + 1,
    };
    enum { M = 64 };
    nb_tensor *m[M], *v[M], *vmax[M];
    double *steps[M];
    if (n > M) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d parameters in one batch (at most %d)", opt->d->op, n, M);
    if (nb_optim_capturable(p[0])) { /* lr and step read on the device (CUDA graphs) */
        nb_status st = nb_optim_dev_prepare(opt, g, n, idx, p, &h.lr_dev, steps);
        if (st) return st;
        h.step_dev = steps;
    }
    for (int j = 0; j < n; j++) {
        nb_tensor *const *st = opt->state[idx[j]].t;
        m[j] = st[0], v[j] = st[1], vmax[j] = o->amsgrad ? st[2] : NULL;
    }
    return nb_fused_adam_(n, p, grad, m, v, o->amsgrad ? vmax : NULL, &h);
}

static nb_status adam_check(const char *op, const void *options) {
    const nb_adam_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_unit(op, "betas[0]", o->betas[0]);
    if (!st) st = nb_optim_check_unit(op, "betas[1]", o->betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

#define ADAM_DESC(var, pyname, opname, dflt)                                                                  \
    const nb_optim_desc var = {                                                                                \
        .name = pyname,                                                                                        \
        .op = opname,                                                                                          \
        .options_size = sizeof(nb_adam_options),                                                               \
        .torch_defaults = &dflt,                                                                               \
        .fields = adam_fields,                                                                                 \
        .n_fields = sizeof adam_fields / sizeof *adam_fields,                                                  \
        .tensor_names = adam_tensors,                                                                          \
        .n_tensors = 3,                                                                                        \
        .contiguous = true,                                                                                    \
        .check = adam_check,                                                                                   \
        .has_tensor = adam_has_tensor,                                                                         \
        .update = adam_update,                                                                                 \
        .update_multi = adam_update_multi,                                                                     \
    };
ADAM_DESC(nb_adam_desc, "Adam", "adam", adam_torch)
ADAM_DESC(nb_adamw_desc, "AdamW", "adamw", adamw_torch)

NB_OPTIM_CONSTRUCTORS(adam, nb_adam_options, nb_adam_desc)
NB_OPTIM_CONSTRUCTORS(adamw, nb_adam_options, nb_adamw_desc)
