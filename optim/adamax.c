/* adamax.c - torch.optim.Adamax (Kingma & Ba 2015, section 7.1: Adam with
 * the infinity norm) as a composition of ops, in the order of PyTorch
 * 2.11's _single_tensor_adamax (formula in nb_optim.h).
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_adamax_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_adamax_options, betas[0], "betas.0", NB_FIELD_F64),
    NB_FIELD(nb_adamax_options, betas[1], "betas.1", NB_FIELD_F64),
    NB_FIELD(nb_adamax_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_adamax_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_adamax_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"exp_avg", "exp_inf"};
static const nb_adamax_options torch_defaults = {.lr = 2e-3, .betas = {0.9, 0.999}, .eps = 1e-8};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_adamax_options *o = &opt->groups[g].o.adamax;
    nb_tensor *m = opt->state[i].t[0], *u = opt->state[i].t[1];
    double step = (double)(opt->state[i].step + 1);
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, o->weight_decay);
    nb_tensor *m1 = nb_lerp_scalar(m, gr, 1 - o->betas[0]);
    nb_tensor *u1 = nb_maximum(nb_mul_scalar(u, o->betas[1]), nb_add_scalar(nb_abs(gr), o->eps));
    double clr = o->lr / (1 - pow(o->betas[0], step));
    nb_tensor *p1 = nb_optim_addcdiv(p, -clr, m1, u1);
    if (!p1) return nb_last_status();
    nb_status st = nb_optim_assign(m, m1);
    if (!st) st = nb_optim_assign(u, u1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_adamax_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_unit(op, "betas[0]", o->betas[0]);
    if (!st) st = nb_optim_check_unit(op, "betas[1]", o->betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_adamax_desc = {
    .name = "Adamax",
    .op = "adamax",
    .options_size = sizeof(nb_adamax_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 2,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(adamax, nb_adamax_options, nb_adamax_desc)
