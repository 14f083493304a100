/* muon.c - Muon (Keller Jordan 2024, "Muon: an optimizer for hidden layers
 * in neural networks"), as torch.optim.Muon of PyTorch 2.9+ (its
 * _single_tensor_muon and _zeropower_via_newtonschulz, op for op; formula in
 * nb_optim.h), as a composition of ops: momentum, then the Newton-Schulz
 * quintic iteration that orthogonalises the update, then a step scaled by
 * the weight's shape. As in the modded-nanogpt record runs (Keller Jordan's
 * MuonWithAuxAdam), parameters that are not 2-D and the groups flagged
 * adamw get AdamW instead, through the backend's fused adam_step kernel.
 * One difference: the iteration runs in the parameter's dtype, where
 * PyTorch casts to bfloat16 (nabla's bfloat16 is a storage dtype).
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_muon_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, weight_decay, "weight_decay", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, momentum, "momentum", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, nesterov, "nesterov", NB_FIELD_ENUM),
    NB_FIELD(nb_muon_options, ns_coefficients[0], "ns_coefficients.0", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, ns_coefficients[1], "ns_coefficients.1", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, ns_coefficients[2], "ns_coefficients.2", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, eps, "eps", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, ns_steps, "ns_steps", NB_FIELD_INT),
    NB_FIELD(nb_muon_options, adjust_lr_fn, "adjust_lr_fn", NB_FIELD_ENUM),
    NB_FIELD(nb_muon_options, adamw, "adamw", NB_FIELD_BOOL),
    NB_FIELD(nb_muon_options, adamw_betas[0], "adamw_betas.0", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, adamw_betas[1], "adamw_betas.1", NB_FIELD_F64),
    NB_FIELD(nb_muon_options, adamw_eps, "adamw_eps", NB_FIELD_F64),
};
enum { MOMENTUM_BUFFER, EXP_AVG, EXP_AVG_SQ };
static const char *const tensors[] = {"momentum_buffer", "exp_avg", "exp_avg_sq"};
/* Keller Jordan's coefficients, maximising the slope at zero. */
static const nb_muon_options torch_defaults = {
    .lr = 1e-3,
    .weight_decay = 0.1,
    .momentum = 0.95,
    .nesterov = NB_FLAG_TRUE,
    .ns_coefficients = {3.4445, -4.7750, 2.0315},
    .eps = 1e-7,
    .ns_steps = 5,
    .adjust_lr_fn = NB_MUON_ADJUST_ORIGINAL,
    .adamw_betas = {0.9, 0.999},
    .adamw_eps = 1e-8,
};

static bool uses_muon(const nb_muon_options *o, const nb_tensor *p) { return !o->adamw && nb_dim(p) == 2; }

static bool has_tensor(const void *options, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)ndim, (void)shape;
    return uses_muon(options, p) ? k == MOMENTUM_BUFFER : k != MOMENTUM_BUFFER;
}

/* _zeropower_via_newtonschulz: X ~ U V^T for u = U S V^T. */
static nb_tensor *newton_schulz(nb_tensor *u, const nb_muon_options *o) {
    double a = o->ns_coefficients[0], b = o->ns_coefficients[1], c = o->ns_coefficients[2];
    bool tall = nb_size(u, 0) > nb_size(u, 1);
    nb_tensor *x = tall ? nb_transpose(u, 0, 1) : u;
    x = nb_div(x, nb_clamp_scalar(nb_norm(x, 2.0, NULL, 0, false), o->eps, NAN)); /* spectral norm <= 1 */
    for (int64_t s = 0; s < o->ns_steps && x; s++) {
        nb_tensor *gram = nb_matmul(x, nb_transpose(x, 0, 1));
        nb_tensor *upd = nb_add(nb_mul_scalar(gram, b), nb_matmul(nb_mul_scalar(gram, c), gram));
        x = nb_add(nb_mul_scalar(x, a), nb_matmul(upd, x));
    }
    return tall ? nb_transpose(x, 0, 1) : x;
}

static nb_status muon_update(const nb_muon_options *o, nb_tensor *p, nb_tensor *grad, nb_tensor *buf) {
    nb_tensor *buf1 = nb_lerp_scalar(buf, grad, 1 - o->momentum);
    nb_tensor *u = o->nesterov == NB_FLAG_FALSE ? buf1 : nb_lerp_scalar(grad, buf1, o->momentum);
    nb_tensor *ortho = newton_schulz(u, o);
    double rows = (double)nb_size(p, 0), cols = (double)nb_size(p, 1);
    double ratio = o->adjust_lr_fn == NB_MUON_ADJUST_MATCH_RMS_ADAMW ? 0.2 * sqrt(fmax(rows, cols))
                                                                      : sqrt(fmax(1.0, rows / cols));
    nb_tensor *p1 = nb_optim_axpy(nb_mul_scalar(p, 1 - o->lr * o->weight_decay), -(o->lr * ratio), ortho);
    if (!p1) return nb_last_status();
    nb_status st = nb_optim_assign(buf, buf1);
    return st ? st : nb_optim_assign(p, p1);
}

static nb_status update(nb_optimizer *opt, int g, int i, nb_tensor *p, nb_tensor *grad, unsigned created) {
    (void)created;
    const nb_muon_options *o = &opt->groups[g].o.muon;
    nb_tensor *const *t = opt->state[i].t;
    if (uses_muon(o, p)) return muon_update(o, p, grad, t[MOMENTUM_BUFFER]);
    nb_adam_hyper h = {
        .lr = o->lr,
        .beta1 = o->adamw_betas[0],
        .beta2 = o->adamw_betas[1],
        .eps = o->adamw_eps,
        .weight_decay = o->weight_decay,
        .decoupled = true,
        .step = opt->state[i].step + 1,
    };
    return nb_fused_adam_(1, &p, &grad, &t[EXP_AVG], &t[EXP_AVG_SQ], NULL, &h);
}

static nb_status check(const char *op, const void *options) {
    const nb_muon_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st) st = nb_optim_check_nonneg(op, "momentum", o->momentum);
    if (!st) st = nb_optim_check_nonneg(op, "weight_decay", o->weight_decay);
    if (!st) st = nb_optim_check_nonneg(op, "eps", o->eps);
    for (int k = 0; k < 3 && !st; k++)
        if (!isfinite(o->ns_coefficients[k]))
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: ns_coefficients[%d] must be finite (got %g)", op, k,
                              o->ns_coefficients[k]);
    if (!st && !(o->ns_steps >= 0 && o->ns_steps < 100))
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: ns_steps must be in [0, 100) (got %lld)", op,
                          (long long)o->ns_steps);
    if (!st && o->nesterov != NB_FLAG_TRUE && o->nesterov != NB_FLAG_FALSE)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: nesterov must be an nb_flag (got %d)", op, (int)o->nesterov);
    if (!st && o->adjust_lr_fn != NB_MUON_ADJUST_ORIGINAL && o->adjust_lr_fn != NB_MUON_ADJUST_MATCH_RMS_ADAMW)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: Adjust learning rate function %d is not supported", op,
                          (int)o->adjust_lr_fn);
    if (!st) st = nb_optim_check_unit(op, "adamw_betas[0]", o->adamw_betas[0]);
    if (!st) st = nb_optim_check_unit(op, "adamw_betas[1]", o->adamw_betas[1]);
    if (!st) st = nb_optim_check_nonneg(op, "adamw_eps", o->adamw_eps);
    return st;
}

const nb_optim_desc nb_muon_desc = {
    .name = "Muon",
    .op = "muon",
    .options_size = sizeof(nb_muon_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = 3,
    .contiguous = true, /* the AdamW part is the adam_step kernel */
    .check = check,
    .has_tensor = has_tensor,
    .update = update,
};

NB_OPTIM_CONSTRUCTORS(muon, nb_muon_options, nb_muon_desc)
