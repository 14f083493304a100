/* rmsprop.c - torch.optim.RMSprop (Hinton, Neural Networks for Machine
 * Learning, lecture 6e; the centered form from Graves 2013) as a
 * composition of ops, in the order of PyTorch 2.11's _single_tensor_rmsprop
 * (formula in nb_optim.h).
 */
#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_rmsprop_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_rmsprop_options, alpha, "alpha", NB_FIELD_F64),
    NB_FIELD(nb_rmsprop_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_rmsprop_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_rmsprop_options, momentum, "momentum", NB_FIELD_F64),
    NB_FIELD(nb_rmsprop_options, centered, "centered", NB_FIELD_BOOL),
    NB_FIELD(nb_rmsprop_options, maximize, "maximize", NB_FIELD_BOOL),
};
enum { SQUARE_AVG, MOMENTUM_BUFFER, GRAD_AVG };
static const char *const tensors[] = {"square_avg", "momentum_buffer", "grad_avg"};
static const nb_rmsprop_options torch_defaults = {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8};

static bool has_tensor(const void *options, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)p, (void)ndim, (void)shape;
    const nb_rmsprop_options *o = options;
    return k == SQUARE_AVG || (k == MOMENTUM_BUFFER && o->momentum > 0) || (k == GRAD_AVG && o->centered);
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_rmsprop_options *o = &opt->groups[g].o.rmsprop;
    nb_tensor *const *t = opt->state[i].t;
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, o->weight_decay);
    nb_tensor *v1 = nb_optim_addcmul(nb_mul_scalar(t[SQUARE_AVG], o->alpha), 1 - o->alpha, gr, gr);
    nb_tensor *ga1 = NULL, *avg;
    if (o->centered) {
        ga1 = nb_lerp_scalar(t[GRAD_AVG], gr, 1 - o->alpha);
        avg = nb_sqrt(nb_optim_addcmul(v1, -1.0, ga1, ga1));
    } else {
        avg = nb_sqrt(v1);
    }
    avg = nb_add_scalar(avg, o->eps);
    nb_tensor *b1 = NULL, *p1;
    if (o->momentum > 0) {
        b1 = nb_optim_addcdiv(nb_mul_scalar(t[MOMENTUM_BUFFER], o->momentum), 1.0, gr, avg);
        p1 = nb_optim_axpy(p, -o->lr, b1);
    } else {
        p1 = nb_optim_addcdiv(p, -o->lr, gr, avg);
    }
    if (!p1) return nb_last_status();
    nb_status st = nb_optim_assign(t[SQUARE_AVG], v1);
    if (!st && ga1) st = nb_optim_assign(t[GRAD_AVG], ga1);
    if (!st && b1) st = nb_optim_assign(t[MOMENTUM_BUFFER], b1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_rmsprop_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_nonneg(op, "momentum", o->momentum);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    if (!st) st = nb_optim_check_nonneg(op, "alpha", o->alpha);
    return st;
}

const nb_optim_desc nb_rmsprop_desc = {
    .name = "RMSprop",
    .op = "rmsprop",
    .options_size = sizeof(nb_rmsprop_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 3,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(rmsprop, nb_rmsprop_options, nb_rmsprop_desc)
