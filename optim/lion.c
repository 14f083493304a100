/* lion.c - Lion (Chen et al. 2023, "Symbolic discovery of optimization
 * algorithms", Algorithm 2 with decoupled weight decay; the authors'
 * lion_pytorch.py) as a composition of ops. Not in torch.optim; the
 * reference script carries the same algorithm in plain torch.
 */
#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_lion_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_lion_options, betas[0], "betas.0", NB_FIELD_F64),
    NB_FIELD(nb_lion_options, betas[1], "betas.1", NB_FIELD_F64),
    NB_FIELD(nb_lion_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_lion_options, maximize, "maximize", NB_FIELD_BOOL),
};
static const char *const tensors[] = {"exp_avg"};
static const nb_lion_options torch_defaults = {.lr = 1e-4, .betas = {0.9, 0.99}};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return true;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_lion_options *o = &opt->groups[g].o.lion;
    nb_tensor *m = opt->state[i].t[0];
    nb_tensor *gr = o->maximize ? nb_neg(grad) : grad;
    nb_tensor *pd = o->weight_decay != 0.0 ? nb_mul_scalar(p, 1 - o->lr * o->weight_decay) : p;
    nb_tensor *c = nb_add(nb_mul_scalar(m, o->betas[0]), nb_mul_scalar(gr, 1 - o->betas[0]));
    nb_tensor *p1 = nb_optim_axpy(pd, -o->lr, nb_sign(c));
    nb_tensor *m1 = nb_optim_axpy(nb_mul_scalar(m, o->betas[1]), 1 - o->betas[1], gr);
    if (!p1 || !m1) return nb_last_status();
    nb_status st = nb_optim_assign(m, m1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_lion_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st && !(o->betas[0] >= 0.0 && o->betas[0] <= 1.0))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: betas[0] must be in [0, 1] (got %g)", op, o->betas[0]);
    if (!st && !(o->betas[1] >= 0.0 && o->betas[1] <= 1.0))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: betas[1] must be in [0, 1] (got %g)", op, o->betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_lion_desc = {
    .name = "Lion",
    .op = "lion",
    .options_size = sizeof(nb_lion_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 1,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(lion, nb_lion_options, nb_lion_desc)
