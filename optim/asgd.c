/* asgd.c - torch.optim.ASGD (Polyak & Juditsky 1992, "Acceleration of
 * stochastic approximation by averaging") as a composition of ops, in the
 * order of PyTorch 2.11's _single_tensor_asgd (formula in nb_optim.h). eta
 * and mu are per-parameter scalars (PyTorch keeps them as 0-d tensors of
 * the default dtype; here they are doubles).
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_asgd_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_asgd_options, lambd, "lambd", NB_FIELD_F64),
    NB_FIELD(nb_asgd_options, alpha, "alpha", NB_FIELD_F64),
    NB_FIELD(nb_asgd_options, t0, "t0", NB_FIELD_F64),
    NB_FIELD(nb_asgd_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_asgd_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"ax"};
static const char *const scalars[] = {"eta", "mu"};
enum { ETA, MU };
static const nb_asgd_options torch_defaults = {.lr = 1e-2, .lambd = 1e-4, .alpha = 0.75, .t0 = 1e6};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status init(nb_optimizer *opt, int g, int i) {
    opt->state[i].s[ETA] = opt->groups[g].o.asgd.lr;
    opt->state[i].s[MU] = 1.0;
    return NB_OK;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_asgd_options *o = &opt->groups[g].o.asgd;
    double *s = opt->state[i].s, step = (double)(opt->state[i].step + 1);
    nb_tensor *ax = opt->state[i].t[0];
    nb_tensor *gr = nb_optim_grad(grad, o->maximize, p, o->weight_decay);
    nb_tensor *p1 = nb_optim_axpy(nb_mul_scalar(p, 1 - o->lambd * s[ETA]), -s[ETA], gr);
    nb_tensor *ax1 = s[MU] != 1.0 ? nb_add(ax, nb_mul_scalar(nb_sub(p1, ax), s[MU])) : p1;
    if (!ax1) return nb_last_status();
    nb_status st = nb_optim_assign(p, p1);
    if (!st) st = nb_optim_assign(ax, ax1);
    if (st) return st;
    s[ETA] = o->lr / pow(1 + o->lambd * o->lr * step, o->alpha);
    s[MU] = 1 / fmax(1.0, step - o->t0);
    return NB_OK;
}

static nb_status check(const char *op, const void *options) {
    const nb_asgd_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "lambd", o->lambd);
    if (!st && !isfinite(o->alpha))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: alpha must be finite (got %g)", op, o->alpha);
    if (!st && !isfinite(o->t0)) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: t0 must be finite (got %g)", op, o->t0);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_asgd_desc = {
    .name = "ASGD",
    .op = "asgd",
    .options_size = sizeof(nb_asgd_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 1,
    .scalar_names = scalars,
    .n_scalars = 2,
    .check = check,
    .has_tensor = has_tensor,
    .init = init,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(asgd, nb_asgd_options, nb_asgd_desc)
