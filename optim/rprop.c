/* rprop.c - torch.optim.Rprop (Riedmiller & Braun 1993, "A direct adaptive
 * method for faster backpropagation learning: the RPROP algorithm"; the
 * iRprop- variant PyTorch implements) as a composition of ops, in the order
 * of PyTorch 2.11's _single_tensor_rprop (formula in nb_optim.h). The step
 * sizes start at lr on the parameter's first step.
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_rprop_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_rprop_options, etas[0], "etas.0", NB_FIELD_F64),
    NB_FIELD(nb_rprop_options, etas[1], "etas.1", NB_FIELD_F64),
    NB_FIELD(nb_rprop_options, step_sizes[0], "step_sizes.0", NB_FIELD_F64),
    NB_FIELD(nb_rprop_options, step_sizes[1], "step_sizes.1", NB_FIELD_F64),
    NB_FIELD(nb_rprop_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"prev", "step_size"};
static const nb_rprop_options torch_defaults = {.lr = 1e-2, .etas = {0.5, 1.2}, .step_sizes = {1e-6, 50}};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status init(nb_optimizer *opt, int g, int i) {
    return nb_fill_(opt->state[i].t[1], opt->groups[g].o.rprop.lr);
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_rprop_options *o = &opt->groups[g].o.rprop;
    nb_tensor *prev = opt->state[i].t[0], *step_size = opt->state[i].t[1];
    nb_tensor *gr = o->maximize ? nb_neg(grad) : grad;
    nb_tensor *sign = nb_sign(nb_mul(gr, prev));
    nb_tensor *neg = nb_lt_scalar(sign, 0.0);
    /* PyTorch: sign[sign > 0] = etaplus; sign[sign < 0] = etaminus; sign[sign == 0] = 1 */
    nb_tensor *eta = nb_where(nb_gt_scalar(sign, 0.0), nb_optim_scalar(p, o->etas[1]),
                              nb_where(neg, nb_optim_scalar(p, o->etas[0]), nb_optim_scalar(p, 1.0)));
    nb_tensor *ss1 = nb_clamp_scalar(nb_mul(step_size, eta), o->step_sizes[0], o->step_sizes[1]);
    nb_tensor *g1 = nb_where(neg, nb_optim_scalar(p, 0.0), gr); /* grad[sign == etaminus] = 0 */
    nb_tensor *p1 = nb_optim_addcmul(p, -1.0, nb_sign(g1), ss1);
    if (!p1) return nb_last_status();
    nb_status st = nb_optim_assign(step_size, ss1);
    if (!st) st = nb_optim_assign(p, p1);
    return st ? st : nb_optim_assign(prev, g1);
}

static nb_status check(const char *op, const void *options) {
    const nb_rprop_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st && !(0.0 < o->etas[0] && o->etas[0] < 1.0 && 1.0 < o->etas[1] && isfinite(o->etas[1])))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: etas must satisfy 0 < etaminus < 1 < etaplus (got %g, %g)", op,
                          o->etas[0], o->etas[1]);
    if (!st && !(o->step_sizes[0] >= 0.0 && o->step_sizes[0] <= o->step_sizes[1] && isfinite(o->step_sizes[1])))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: step_sizes must satisfy 0 <= min <= max (got %g, %g)", op,
                          o->step_sizes[0], o->step_sizes[1]);
    return st;
}

const nb_optim_desc nb_rprop_desc = {
    .name = "Rprop",
    .op = "rprop",
    .options_size = sizeof(nb_rprop_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 2,
    .check = check,
    .has_tensor = has_tensor,
    .init = init,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(rprop, nb_rprop_options, nb_rprop_desc)
