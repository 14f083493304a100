/* adagrad.c - torch.optim.Adagrad (Duchi, Hazan & Singer 2011) as a
 * composition of ops, in the order of PyTorch 2.11's _single_tensor_adagrad
 * (formula in nb_optim.h). The accumulator starts at
 * initial_accumulator_value on the parameter's first step.
 */
#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_adagrad_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_adagrad_options, lr_decay, "lr_decay", NB_FIELD_F64),
    NB_FIELD(nb_adagrad_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_adagrad_options, initial_accumulator_value, "initial_accumulator_value", NB_FIELD_F64),
    NB_FIELD(nb_adagrad_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_adagrad_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"sum"};
static const nb_adagrad_options torch_defaults = {.lr = 1e-2, .eps = 1e-10};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status init(nb_optimizer *opt, int g, int i) {
    return nb_fill_(opt->state[i].t[0], opt->groups[g].o.adagrad.initial_accumulator_value);
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_adagrad_options *o = &opt->groups[g].o.adagrad;
    nb_tensor *sum = opt->state[i].t[0];
    double step = (double)(opt->state[i].step + 1);
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, o->weight_decay);
    double clr = o->lr / (1 + (step - 1) * o->lr_decay);
    nb_tensor *sum1 = nb_optim_addcmul(sum, 1.0, gr, gr);
    nb_tensor *std = nb_add_scalar(nb_sqrt(sum1), o->eps);
    nb_tensor *p1 = nb_optim_addcdiv(p, -clr, gr, std);
    if (!p1) return nb_last_status();
    nb_status st = nb_optim_assign(sum, sum1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_adagrad_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "lr_decay", o->lr_decay);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    if (!st) st = nb_optim_check_nonneg(op, "initial_accumulator_value", o->initial_accumulator_value);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    return st;
}

const nb_optim_desc nb_adagrad_desc = {
    .name = "Adagrad",
    .op = "adagrad",
    .options_size = sizeof(nb_adagrad_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 1,
    .check = check,
    .has_tensor = has_tensor,
    .init = init,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(adagrad, nb_adagrad_options, nb_adagrad_desc)
