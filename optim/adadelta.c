/* adadelta.c - torch.optim.Adadelta (Zeiler 2012, "ADADELTA: an adaptive
 * learning rate method") as a composition of ops, in the order of PyTorch
 * 2.11's _single_tensor_adadelta (formula in nb_optim.h).
 */
#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_adadelta_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_adadelta_options, rho, "rho", NB_FIELD_F64),
    NB_FIELD(nb_adadelta_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_adadelta_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_adadelta_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"square_avg", "acc_delta"};
static const nb_adadelta_options torch_defaults = {.lr = 1.0, .rho = 0.9, .eps = 1e-6};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_adadelta_options *o = &opt->groups[g].o.adadelta;
    nb_tensor *v = opt->state[i].t[0], *u = opt->state[i].t[1];
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, o->weight_decay);
    nb_tensor *v1 = nb_optim_addcmul(nb_mul_scalar(v, o->rho), 1 - o->rho, gr, gr);
    nb_tensor *std = nb_sqrt(nb_add_scalar(v1, o->eps));
    nb_tensor *delta = nb_mul(nb_div(nb_sqrt(nb_add_scalar(u, o->eps)), std), gr);
    nb_tensor *u1 = nb_optim_addcmul(nb_mul_scalar(u, o->rho), 1 - o->rho, delta, delta);
    nb_tensor *p1 = nb_optim_axpy(p, -o->lr, delta);
    if (!p1 || !u1) return nb_last_status();
    nb_status st = nb_optim_assign(v, v1);
    if (!st) st = nb_optim_assign(u, u1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_adadelta_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st && !(o->rho >= 0.0 && o->rho <= 1.0))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: rho must be in [0, 1] (got %g)", op, o->rho);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_adadelta_desc = {
    .name = "Adadelta",
    .op = "adadelta",
    .options_size = sizeof(nb_adadelta_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 2,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(adadelta, nb_adadelta_options, nb_adadelta_desc)
