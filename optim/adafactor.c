/* adafactor.c - torch.optim.Adafactor (Shazeer & Stern 2018, "Adafactor:
 * adaptive learning rates with sublinear memory cost") as a composition of
 * ops, in the order of PyTorch 2.11's _single_tensor_adafactor (formula and
 * PyTorch's departures from the paper in nb_optim.h). Tensors of 2 or more
 * dims keep row and column statistics over their last two dims; the rest a
 * full second moment.
 */
#include <float.h>
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_adafactor_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_adafactor_options, beta2_decay, "beta2_decay", NB_FIELD_F64),
    NB_FIELD(nb_adafactor_options, eps[0], "eps.0", NB_FIELD_F64_NONE),
    NB_FIELD(nb_adafactor_options, eps[1], "eps.1", NB_FIELD_F64),
    NB_FIELD(nb_adafactor_options, d, "d", NB_FIELD_F64),
    NB_FIELD(nb_adafactor_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_adafactor_options, maximize, "maximize", NB_FIELD_BOOL),
};
enum { ROW_VAR, COL_VAR, VARIANCE };
static const char *const tensors[] = {"row_var", "col_var", "variance"};
/* eps[0] NAN: PyTorch's None, the dtype's machine epsilon */
static const nb_adafactor_options torch_defaults = {.lr = 1e-2, .beta2_decay = -0.8, .eps = {NAN, 1e-3}, .d = 1.0};

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)ndim;
    int nd = nb_dim(p);
    if (k == VARIANCE) return nd <= 1;
    if (nd <= 1) return false;
    shape[k == ROW_VAR ? nd - 1 : nd - 2] = 1; /* row_var [..., R, 1], col_var [..., 1, C] */
    return true;
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_adafactor_options *o = &opt->groups[g].o.adafactor;
    nb_tensor *const *t = opt->state[i].t;
    double step = (double)(opt->state[i].step + 1);
    double eps1 = isnan(o->eps[0]) ? (nb_dtype_of(p) == NB_F32 ? FLT_EPSILON : DBL_EPSILON) : o->eps[0];
    nb_tensor *gr = o->maximize ? nb_neg(grad) : grad;
    double one_minus_beta2_t = pow(step, o->beta2_decay);
    double rho_t = fmin(o->lr, 1 / pow(step, 0.5));
    double numel = (double)nb_numel(p);
    nb_tensor *pnorm = nb_norm(p, 2.0, NULL, 0, false);
    if (!pnorm) return nb_last_status();
    double alpha = fmax(o->eps[1], nb_item(pnorm) / pow(numel, 0.5)) * rho_t; /* Python's max(): NaN gives eps */
    nb_tensor *pd = o->weight_decay != 0.0 ? nb_mul_scalar(p, 1 - o->lr * o->weight_decay) : p;
    nb_tensor *row1 = NULL, *col1 = NULL, *var1 = NULL, *estimate;
    int nd = nb_dim(p);
    if (nd > 1) {
        /* (g * g).mean(dim) as vector_norm(g, dim)^2 / size, PyTorch's way */
        int last = nd - 1, second = nd - 2;
        nb_tensor *rn = nb_norm(gr, 2.0, &last, 1, true), *cn = nb_norm(gr, 2.0, &second, 1, true);
        nb_tensor *row_mean = nb_optim_div_scalar(nb_mul(rn, rn), (double)nb_size(gr, -1));
        nb_tensor *col_mean = nb_optim_div_scalar(nb_mul(cn, cn), (double)nb_size(gr, -2));
        row1 = nb_lerp_scalar(t[ROW_VAR], row_mean, one_minus_beta2_t);
        col1 = nb_lerp_scalar(t[COL_VAR], col_mean, one_minus_beta2_t);
        /* row_var @ col_var is an outer product: one term, the same as a broadcast multiply */
        nb_tensor *row_mean_all = nb_clamp_scalar(nb_mean(row1, &second, 1, true), eps1, NAN);
        estimate = nb_div(nb_mul(row1, col1), row_mean_all);
    } else {
        var1 = nb_lerp_scalar(t[VARIANCE], nb_mul(gr, gr), one_minus_beta2_t);
        estimate = var1;
    }
    nb_tensor *upd = nb_mul(nb_rsqrt(nb_clamp_scalar(estimate, eps1 * eps1, NAN)), gr);
    nb_tensor *unorm = nb_norm(upd, 2.0, NULL, 0, false);
    if (!unorm) return nb_last_status();
    double denom = fmax(1.0, nb_item(unorm) / (pow(numel, 0.5) * o->d));
    nb_tensor *p1 = nb_optim_axpy(pd, -alpha / denom, upd);
    if (!p1) return nb_last_status();
    nb_status st = NB_OK;
    if (row1) st = nb_optim_assign(t[ROW_VAR], row1);
    if (!st && col1) st = nb_optim_assign(t[COL_VAR], col1);
    if (!st && var1) st = nb_optim_assign(t[VARIANCE], var1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status check(const char *op, const void *options) {
    const nb_adafactor_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st && !(o->beta2_decay <= 0.0 && isfinite(o->beta2_decay)))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: beta2_decay must be <= 0 (got %g)", op, o->beta2_decay);
    if (!st && !isnan(o->eps[0])) st = nb_optim_check_nonneg(op, "eps[0]", o->eps[0]);
    if (!st) st = nb_optim_check_nonneg(op, "eps[1]", o->eps[1]);
    if (!st && !(o->d >= 1.0 && isfinite(o->d)))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: the clipping threshold d must be >= 1 (got %g)", op, o->d);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    return st;
}

const nb_optim_desc nb_adafactor_desc = {
    .name = "Adafactor",
    .op = "adafactor",
    .options_size = sizeof(nb_adafactor_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 3,
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(adafactor, nb_adafactor_options, nb_adafactor_desc)
