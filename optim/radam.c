/* radam.c - torch.optim.RAdam (Liu et al. 2020, "On the variance of the
 * adaptive learning rate and beyond") as a composition of ops, in the order
 * of PyTorch 2.11's _single_tensor_radam (formula in nb_optim.h), with its
 * decoupled_weight_decay option.
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_radam_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_radam_options, betas[0], "betas.0", NB_FIELD_F64),
    NB_FIELD(nb_radam_options, betas[1], "betas.1", NB_FIELD_F64),
    NB_FIELD(nb_radam_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_radam_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_radam_options, decoupled_weight_decay, "decoupled_weight_decay", NB_FIELD_BOOL),
    NB_FIELD(nb_radam_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"exp_avg", "exp_avg_sq"};
static const nb_radam_options torch_defaults = {.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_radam_options *o = &opt->groups[g].o.radam;
    nb_tensor *m = opt->state[i].t[0], *v = opt->state[i].t[1];
    double step = (double)(opt->state[i].step + 1), beta1 = o->betas[0], beta2 = o->betas[1];
    bool decoupled = o->weight_decay != 0.0 && o->decoupled_weight_decay;
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, decoupled ? 0.0 : o->weight_decay);
    nb_tensor *pd = decoupled ? nb_mul_scalar(p, 1 - o->lr * o->weight_decay) : p;
    nb_tensor *m1 = nb_lerp_scalar(m, gr, 1 - beta1);
    nb_tensor *v1 = nb_optim_addcmul(nb_mul_scalar(v, beta2), 1 - beta2, gr, gr);
    double bias_correction1 = 1 - pow(beta1, step), bias_correction2 = 1 - pow(beta2, step);
    nb_tensor *corrected = nb_optim_div_scalar(m1, bias_correction1);
    double rho_inf = 2 / (1 - beta2) - 1;
    double rho_t = rho_inf - 2 * step * pow(beta2, step) / bias_correction2;
    nb_tensor *upd;
    if (rho_t > 5.0) {
        double rect = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        /* float / tensor is tensor.reciprocal() * float in PyTorch */
        nb_tensor *adaptive = nb_mul_scalar(nb_reciprocal(nb_add_scalar(nb_sqrt(v1), o->eps)), sqrt(bias_correction2));
        upd = nb_mul_scalar(nb_mul(nb_mul_scalar(corrected, o->lr), adaptive), rect);
    } else {
        upd = nb_mul_scalar(corrected, o->lr);
    }
    nb_tensor *p1 = nb_optim_axpy(pd, -1.0, upd);
    if (!p1 || !v1) return nb_last_status();
    nb_status st = nb_optim_assign(m, m1);
    if (!st) st = nb_optim_assign(v, v1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_radam_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    if (!st) st = nb_optim_check_unit(op, "betas[0]", o->betas[0]);
    if (!st) st = nb_optim_check_unit(op, "betas[1]", o->betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_radam_desc = {
    .name = "RAdam",
    .op = "radam",
    .options_size = sizeof(nb_radam_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 2,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(radam, nb_radam_options, nb_radam_desc)
