/* nadam.c - torch.optim.NAdam (Dozat 2016, "Incorporating Nesterov
 * momentum into Adam") as a composition of ops, in the order of PyTorch
 * 2.11's _single_tensor_nadam (formula in nb_optim.h), with its
 * decoupled_weight_decay option. mu_product is a per-parameter scalar (a
 * 0-d tensor of the default dtype in PyTorch; a double here).
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_nadam_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, betas[0], "betas.0", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, betas[1], "betas.1", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, momentum_decay, "momentum_decay", NB_FIELD_F64),
    NB_FIELD(nb_nadam_options, decoupled_weight_decay, "decoupled_weight_decay", NB_FIELD_BOOL),
    NB_FIELD(nb_nadam_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"exp_avg", "exp_avg_sq"};
static const char *const scalars[] = {"mu_product"};
static const nb_nadam_options torch_defaults = {
    .lr = 2e-3, .betas = {0.9, 0.999}, .eps = 1e-8, .momentum_decay = 4e-3};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status init(nb_optimizer *opt, int g, int i) {
    (void)g;
    opt->state[i].s[0] = 1.0;
    return NB_OK;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_nadam_options *o = &opt->groups[g].o.nadam;
    nb_tensor *m = opt->state[i].t[0], *v = opt->state[i].t[1];
    double step = (double)(opt->state[i].step + 1), beta1 = o->betas[0], beta2 = o->betas[1];
    double bias_correction2 = 1 - pow(beta2, step);
    bool decoupled = o->weight_decay != 0.0 && o->decoupled_weight_decay;
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, decoupled ? 0.0 : o->weight_decay);
    nb_tensor *pd = decoupled ? nb_mul_scalar(p, 1 - o->lr * o->weight_decay) : p;
    double mu = beta1 * (1. - 0.5 * pow(0.96, step * o->momentum_decay));
    double mu_next = beta1 * (1. - 0.5 * pow(0.96, (step + 1) * o->momentum_decay));
    double mu_product = opt->state[i].s[0] * mu;
    nb_tensor *m1 = nb_lerp_scalar(m, gr, 1 - beta1);
    nb_tensor *v1 = nb_optim_addcmul(nb_mul_scalar(v, beta2), 1 - beta2, gr, gr);
    nb_tensor *denom = nb_add_scalar(nb_sqrt(nb_optim_div_scalar(v1, bias_correction2)), o->eps);
    double mu_product_next = mu_product * mu_next;
    nb_tensor *p1 = nb_optim_addcdiv(pd, -o->lr * (1. - mu) / (1. - mu_product), gr, denom);
    p1 = nb_optim_addcdiv(p1, (-o->lr * mu_next) / (1. - mu_product_next), m1, denom);
    if (!p1 || !v1) return nb_last_status();
    nb_status st = nb_optim_assign(m, m1);
    if (!st) st = nb_optim_assign(v, v1);
    if (!st) st = nb_optim_assign(p, p1);
    if (!st) opt->state[i].s[0] = mu_product;
    return st;
}

static nb_status check(const char *op, const void *options) {
    const nb_nadam_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_unit(op, "betas[0]", o->betas[0]);
    if (!st) st = nb_optim_check_unit(op, "betas[1]", o->betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    if (!st) st = nb_optim_check_nonneg(op, "momentum_decay", o->momentum_decay);
    return st;
}

const nb_optim_desc nb_nadam_desc = {
    .name = "NAdam",
    .op = "nadam",
    .options_size = sizeof(nb_nadam_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 2,
    .scalar_names = scalars,
    .n_scalars = 1,
    .check = check,
    .has_tensor = has_tensor,
    .init = init,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(nadam, nb_nadam_options, nb_nadam_desc)
