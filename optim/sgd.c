/* sgd.c - torch.optim.SGD: options with PyTorch's checks, and the update of
 * one parameter through nb_fused_sgd_ (nb_foreach.h) (the formula is in
 * nb_optim.h, from torch.optim.SGD's documentation and implementation).
 */
#include <math.h>

#include "optim_impl.h"

static const nb_field sgd_fields[] = {
    NB_FIELD(nb_sgd_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_sgd_options, momentum, "momentum", NB_FIELD_F64),
    NB_FIELD(nb_sgd_options, dampening, "dampening", NB_FIELD_F64),
    NB_FIELD(nb_sgd_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_sgd_options, nesterov, "nesterov", NB_FIELD_BOOL),
    NB_FIELD(nb_sgd_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const sgd_tensors[] = {"momentum_buffer"};
/* PyTorch's defaults (lr 1e-3 since PyTorch 2.2, pytorch/pytorch#114467;
 * NB_ZERO asks for 0). */
static const nb_sgd_options sgd_torch = {.lr = 1e-3};

static bool sgd_has_tensor(const void *options, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)p, (void)k, (void)ndim, (void)shape;
    return ((const nb_sgd_options *)options)->momentum != 0.0;
}

static nb_status sgd_update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    const nb_sgd_options *o = &opt->groups[g].o.sgd;
    nb_sgd_hyper h = {
        .lr = o->lr,
        .momentum = o->momentum,
        .dampening = o->dampening,
        .weight_decay = o->weight_decay,
        .nesterov = o->nesterov,
        .maximize = o->maximize,
        .first_step = created & 1u, /* a new buffer starts as g (PyTorch: clone(grad)) */
    };
    nb_tensor *buf = o->momentum != 0.0 ? opt->state[i].t[0] : NULL;
    return nb_fused_sgd_(1, &p, &grad, buf ? &buf : NULL, &h);
}

/* The same over n parameters with one sgd_step_multi call (one launch on a
 * GPU); the caller batches parameters with the same `created`. */
static nb_status sgd_update_multi(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                                  nb_tensor *const *grad, unsigned created) {
    const nb_sgd_options *o = &opt->groups[g].o.sgd;
    nb_sgd_hyper h = {
        .lr = o->lr,
        .momentum = o->momentum,
        .dampening = o->dampening,
        .weight_decay = o->weight_decay,
        .nesterov = o->nesterov,
        .maximize = o->maximize,
        .first_step = created & 1u,
    };
    enum { M = 64 };
    nb_tensor *bufs[M];
    if (n > M) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d parameters in one batch (at most %d)", opt->d->op, n, M);
    if (nb_optim_capturable(p[0])) { /* lr read on the device (CUDA graphs); SGD keeps no step count there */
        double *steps[M];
        nb_status st = nb_optim_dev_prepare(opt, g, n, idx, p, &h.lr_dev, steps);
        if (st) return st;
    }
    bool mom = o->momentum != 0.0;
    for (int j = 0; j < n && mom; j++) bufs[j] = opt->state[idx[j]].t[0];
    return nb_fused_sgd_(n, p, grad, mom ? bufs : NULL, &h);
}

/* PyTorch's argument checks. */
static nb_status sgd_check(const char *op, const void *options) {
    const nb_sgd_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "momentum", o->momentum);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    if (!st && !isfinite(o->dampening))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: dampening must be finite (got %g)", op, o->dampening);
    if (!st && o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "%s: nesterov momentum requires a momentum > 0 and zero dampening "
                          "(got momentum %g, dampening %g)",
                          op, o->momentum, o->dampening);
    return st;
}

const nb_optim_desc nb_sgd_desc = {
    .name = "SGD",
    .op = "sgd",
    .options_size = sizeof(nb_sgd_options),
    .torch_defaults = &sgd_torch,
    .fields = sgd_fields,
    .n_fields = sizeof sgd_fields / sizeof *sgd_fields,
    .tensor_names = sgd_tensors,
    .n_tensors = 1,
    .contiguous = true,
    .check = sgd_check,
    .has_tensor = sgd_has_tensor,
    .update = sgd_update,
    .update_multi = sgd_update_multi,
};

NB_OPTIM_CONSTRUCTORS(sgd, nb_sgd_options, nb_sgd_desc)
