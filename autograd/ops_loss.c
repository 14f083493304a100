/* ops_loss.c - cross_entropy (fused log-softmax + NLL), mse_loss and the
 * losses written from differentiable ops (l1, smooth_l1, huber,
 * binary_cross_entropy with and without logits, kl_div, soft_margin,
 * hinge_embedding, margin_ranking): forward dispatch
 * and backward rules. Kernels: backend/cpu/loss.c. Tests:
 * tests/test_ops_loss.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* ---- cross_entropy ------------------------------------------------------------ */

/* saved: logits, lse, target; p.cross_entropy.ignore_index */
/* create_graph: (softmax(logits) - onehot(target)) * g per row, rows whose
 * target is ignore_index zeroed, as recorded ops (the softmax recomputed
 * from the connected logits, not the saved log-sum-exp). */
static nb_tensor *ce_grad_ops(nb_tensor *g, nb_tensor *logits, nb_tensor *target, int64_t ignore_index) {
    if (nb_dtype_is_16bit(logits->dtype)) /* autocast's 16-bit logits: in float32, rounded back */
        return nb_to_dtype(ce_grad_ops(g, nb_to_dtype(logits, NB_F32), target, ignore_index), logits->dtype);
    int64_t c = logits->shape[1];
    nb_tensor *classes = nb_reshape(nb_arange_on(0, (double)c, 1, NB_I64, logits->storage->device), NB_SHAPE(1, c));
    nb_tensor *t = nb_unsqueeze(target, 1);
    nb_tensor *onehot = nb_to_dtype(nb_eq(classes, t), logits->dtype);
    nb_tensor *valid = nb_to_dtype(nb_ne_scalar(t, (double)ignore_index), logits->dtype);
    return nb_mul(nb_sub(nb_softmax(logits, 1), onehot), nb_mul(nb_unsqueeze(g, 1), valid));
}

nb_status nb_bw_ce(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *logits = n->saved[0], *lse = n->saved[1], *target = n->saved[2];
    if (nb_needs_grad(2, (nb_tensor *[]){g, logits})) {
        gin[0] = ce_grad_ops(g, logits, target, n->p.cross_entropy.ignore_index);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gx = nb_empty_like(logits); /* g at any stride (a mean's gradient is one value broadcast) */
    if (!gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(g), vx = nb_kview_of(logits), vl = nb_kview_of(lse),
             vt = nb_kview_of(target);
    gin[0] = gx;
    return nb_kernel_cross_entropy_backward(NB_BE(logits), &vgx, &vg, &vx, &vl, &vt, n->p.cross_entropy.ignore_index);
}

/* Per-row losses [N] of logits [N, C] (one node, fused backward); float32
 * rows (and loss) for 16-bit logits, whose gradient is 16-bit. valid (if
 * not NULL) gets the rows' 1/0 weights, target != ignore_index, from the
 * same kernel (the mean's divisor is their sum). */
static nb_tensor *ce_rows(nb_tensor *logits, nb_tensor *target, int64_t ignore_index, nb_tensor **valid) {
    nb_tensor *x = nb_contiguous(logits), *t = nb_contiguous(target);
    int64_t n = logits->shape[0];
    nb_dtype rdt = nb_dtype_is_16bit(logits->dtype) ? NB_F32 : logits->dtype;
    nb_tensor *loss = nb_tensor_new(1, &n, rdt, logits->storage->device);
    nb_tensor *lse = nb_tensor_new(1, &n, rdt, logits->storage->device);
    nb_tensor *w = valid ? nb_tensor_new(1, &n, rdt, logits->storage->device) : NULL;
    if (!x || !t || !loss || !lse || (valid && !w)) return NULL;
    nb_kview vl = nb_kview_of(loss), vs = nb_kview_of(lse), vx = nb_kview_of(x), vt = nb_kview_of(t);
    nb_kview vw = w ? nb_kview_of(w) : (nb_kview){0};
    if (nb_kernel_cross_entropy(NB_BE(x), &vl, &vs, w ? &vw : NULL, &vx, &vt, ignore_index) != NB_OK) return NULL;
    if (valid) *valid = w;
    bool failed;
    nb_node *node = nb_record(NB_OP_CROSS_ENTROPY, loss, 1, &logits, &failed);
    if (failed) return NULL;
    if (node) {
        node->p.cross_entropy.ignore_index = ignore_index;
        nb_save(node, 0, x), nb_save(node, 1, lse), nb_save(node, 2, t);
    }
    return loss;
}

/* The input and target as rows: x [M, C] and t [M] (class indices) or
 * [M, C] (probabilities), the class dim moved last; out_shape is the
 * target's shape without C, for reduction none. */
typedef struct ce_flat {
    nb_tensor *x, *t;
    bool probs;
    int64_t C, M;
    int out_ndim;
    int64_t out_shape[NB_MAX_DIMS];
} ce_flat;

static nb_tensor *rows_of(nb_tensor *t, int64_t M, int64_t C) {
    if (t->ndim <= 2) return nb_reshape(t, NB_SHAPE(M, C));
    int src = 1, dst = -1;
    return nb_reshape(nb_movedim(t, &src, &dst, 1), NB_SHAPE(M, C));
}

static bool ce_flatten(const char *op, nb_tensor *input, nb_tensor *target, bool allow_probs, ce_flat *f) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    nb_fmt_shape(input->ndim, input->shape, a, sizeof a);
    nb_fmt_shape(target->ndim, target->shape, b, sizeof b);
    if (input->ndim == 0) {
        nb_set_error(NB_ERR_SHAPE, "%s: input %s has no class dim ([C], [N, C] or [N, C, d1, ...])", op, a);
        return false;
    }
    int cdim = input->ndim == 1 ? 0 : 1;
    f->C = input->shape[cdim];
    f->out_ndim = 0;
    f->M = 1;
    for (int i = 0; i < input->ndim; i++)
        if (i != cdim) f->out_shape[f->out_ndim++] = input->shape[i], f->M *= input->shape[i];
    /* PyTorch's rule: a target of the input's shape holds probabilities, any other class indices */
    f->probs = allow_probs && target->ndim == input->ndim &&
               !memcmp(target->shape, input->shape, sizeof(int64_t) * (size_t)input->ndim);
    if (f->probs && target->dtype != input->dtype) {
        nb_set_error(NB_ERR_DTYPE, "%s: probabilities (a target of the input's shape %s) must be %s, got %s", op, a,
                     nb_dtype_name(input->dtype), nb_dtype_name(target->dtype));
        return false;
    }
    if (!f->probs && target->dtype != NB_I64) {
        nb_set_error(NB_ERR_DTYPE, "%s: class indices must be int64, got %s (target %s)", op,
                     nb_dtype_name(target->dtype), b);
        return false;
    }
    if (!f->probs && (target->ndim != f->out_ndim ||
                      memcmp(target->shape, f->out_shape, sizeof(int64_t) * (size_t)f->out_ndim))) {
        nb_set_error(NB_ERR_SHAPE, "%s: input %s and target %s do not fit (class indices need the input's shape "
                     "without the class dim%s)", op, a, b, allow_probs ? ", probabilities the input's shape" : "");
        return false;
    }
    f->x = rows_of(input, f->M, f->C);
    f->t = f->probs ? rows_of(target, f->M, f->C) : nb_reshape(target, 1, &f->M);
    return f->x && f->t;
}

/* The reduction of per-row losses [M]: none keeps them (in the target's
 * shape), sum adds them, mean divides the sum by `denom` (a 0-d tensor). */
static nb_tensor *ce_reduce(const ce_flat *f, nb_tensor *rows, nb_reduction r, nb_tensor *denom) {
    if (!rows) return NULL;
    if (r == NB_REDUCTION_NONE) return nb_reshape(rows, f->out_ndim, f->out_shape);
    nb_tensor *total = nb_sum(rows, NULL, 0, false);
    return r == NB_REDUCTION_SUM ? total : nb_div(total, denom);
}

/* Class indices, written from gather and sums (weights, smoothing, NLL). */
static nb_tensor *ce_indices(const char *op, const ce_flat *f, nb_tensor *logp, nb_cross_entropy_options o) {
    nb_tensor *t = f->t;
    nb_tensor *valid = nb_ne_scalar(t, (double)o.ignore_index);
    nb_tensor *bad = valid ? nb_logical_and(valid, nb_logical_or(nb_lt_scalar(t, 0), nb_ge_scalar(t, (double)f->C)))
                           : NULL;
    nb_tensor *any = bad ? nb_any(bad, NULL, 0, false) : NULL;
    if (!any) return NULL;
    if (nb_item(any) != 0) /* a host read, as PyTorch's CPU check of its targets */
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: a target is outside [0, %lld) and not ignore_index %lld", op,
                       (long long)f->C, (long long)o.ignore_index);
    nb_tensor *zero_i = nb_scalar_like(t, 0, NB_I64), *zero = nb_scalar_like(logp, 0, logp->dtype);
    nb_tensor *safe = nb_where(valid, t, zero_i);
    nb_tensor *picked = nb_squeeze(nb_gather(logp, 1, nb_unsqueeze(safe, 1)), 1);
    nb_tensor *wt = o.weight ? nb_index_select(o.weight, 0, safe) : nb_ones_like(picked);
    wt = nb_where(valid, wt, zero);
    nb_tensor *denom = nb_sum(wt, NULL, 0, false);
    nb_tensor *nll = ce_reduce(f, nb_where(valid, nb_neg(nb_mul(picked, wt)), zero), o.reduction, denom);
    if (o.label_smoothing == 0 || !nll) return nll;
    nb_tensor *wl = o.weight ? nb_mul(logp, nb_reshape(o.weight, NB_SHAPE(1, f->C))) : logp;
    nb_tensor *smooth = nb_where(valid, nb_neg(nb_sum(wl, (int[]){1}, 1, false)), zero);
    nb_tensor *sm = ce_reduce(f, smooth, o.reduction, denom);
    double e = o.label_smoothing;
    return nb_add(nb_mul_scalar(nll, 1 - e), nb_mul_scalar(sm, e / (double)f->C));
}

/* Class probabilities: -sum_c w_c t_c log p_c per row, t smoothed. */
static nb_tensor *ce_probs(const ce_flat *f, nb_tensor *logp, nb_cross_entropy_options o) {
    double e = o.label_smoothing;
    nb_tensor *t = e > 0 ? nb_add_scalar(nb_mul_scalar(f->t, 1 - e), e / (double)f->C) : f->t;
    nb_tensor *prod = nb_mul(logp, t);
    if (o.weight) prod = nb_mul(prod, nb_reshape(o.weight, NB_SHAPE(1, f->C)));
    nb_tensor *rows = nb_neg(nb_sum(prod, (int[]){1}, 1, false));
    nb_tensor *m = rows ? nb_scalar_like(rows, (double)f->M, rows->dtype) : NULL;
    return m ? ce_reduce(f, rows, o.reduction, m) : NULL;
}

/* fused16: autocast's 16-bit logits, for the fused kernel (no weight,
 * smoothing or probabilities), which reads them as float32. */
static nb_tensor *loss_impl(const char *op, nb_tensor *input, nb_tensor *target, nb_cross_entropy_options o,
                            bool logits, bool fused16) {
    /* a zeroed field is PyTorch's default (nb_functional.h) */
    o.ignore_index = o.ignore_index == 0 ? -100 : o.ignore_index == NB_IGNORE_CLASS_0 ? 0 : o.ignore_index;
    nb_tensor *in[3] = {input, target, o.weight};
    nb_op_id id = logits ? NB_OP_CROSS_ENTROPY_EX : NB_OP_NLL_LOSS;
    if (!nb_check_inputs(op, o.weight ? 3 : 2, in) || (!fused16 && !nb_check_dtypes(id, 1, in))) return NULL;
    if ((unsigned)o.reduction > NB_REDUCTION_NONE)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: bad reduction %d", op, (int)o.reduction);
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1) || (!logits && o.label_smoothing != 0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: label_smoothing %g %s", op, o.label_smoothing,
                       logits ? "is outside [0, 1]" : "is not supported (cross_entropy has it)");
    ce_flat f;
    if (!ce_flatten(op, input, target, logits, &f)) return NULL;
    if (o.weight) {
        char a[NB_SHAPE_BUF];
        if (o.weight->ndim != 1 || o.weight->shape[0] != f.C)
            return NB_FAIL(NB_ERR_SHAPE, "%s: weight %s must be [C] = [%lld]", op,
                           nb_fmt_shape(o.weight->ndim, o.weight->shape, a, sizeof a), (long long)f.C);
        if (o.weight->dtype != input->dtype)
            return NB_FAIL(NB_ERR_DTYPE, "%s: weight is %s, input %s", op, nb_dtype_name(o.weight->dtype),
                           nb_dtype_name(input->dtype));
    }
    if (f.probs && o.ignore_index != -100) /* PyTorch's rule: the default is the only value */
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: ignore_index %lld is not supported for probability targets", op,
                       (long long)o.ignore_index);
    if (logits && !f.probs && !o.weight && o.label_smoothing == 0) { /* the fused kernel */
        nb_tensor *valid = NULL;
        nb_tensor *rows = ce_rows(f.x, f.t, o.ignore_index, o.reduction == NB_REDUCTION_MEAN ? &valid : NULL);
        nb_tensor *count = valid ? nb_sum(valid, NULL, 0, false) : NULL;
        return rows && (count || o.reduction != NB_REDUCTION_MEAN) ? ce_reduce(&f, rows, o.reduction, count) : NULL;
    }
    nb_tensor *logp = logits ? nb_log_softmax(f.x, 1) : f.x;
    if (!logp) return NULL;
    return f.probs ? ce_probs(&f, logp, o) : ce_indices(op, &f, logp, o);
}

nb_tensor *nb_cross_entropy_ex(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_options opts) {
    /* On autocast's float32 list. 16-bit logits that the fused kernel takes
     * are read as float32 there instead of cast first: the same bits (the
     * cast is exact; the gradient is rounded to 16 bits either way), without
     * the cast's traffic (the MLM head's [4096, 30522] logits). */
    bool fused16 = logits && target && nb_dtype_is_16bit(logits->dtype) && nb_autocast_active(logits->storage->device) &&
                   !opts.weight && opts.label_smoothing == 0 && target->dtype == NB_I64 && logits->ndim != 1;
    if (!fused16 && !nb_autocast_inputs(NB_OP_CROSS_ENTROPY_EX, 1, &logits)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, loss_impl("cross_entropy", logits, target, opts, true, fused16));
}

nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target) {
    return nb_cross_entropy_ex(logits, target, NB_CROSS_ENTROPY_DEFAULTS);
}

nb_tensor *nb_nll_loss(nb_tensor *input, nb_tensor *target, nb_cross_entropy_options opts) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, loss_impl("nll_loss", input, target, opts, false, false));
}

/* ---- mse_loss and the losses written from ops --------------------------------- */

/* input and target (and extra, when not NULL) of one float dtype whose shapes
 * broadcast; reduction known. */
bool nb_loss_check(const char *op, nb_op_id id, nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    nb_tensor *in[2] = {input, target};
    if (!nb_check_inputs(op, 2, in) || !nb_check_dtypes(id, 2, in)) return false;
    if ((unsigned)reduction > NB_REDUCTION_NONE) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: bad reduction %d", op, (int)reduction);
        return false;
    }
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(input->ndim, input->shape, target->ndim, target->shape, &nd, shape)) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_SHAPE, "%s: input %s and target %s do not broadcast", op,
                     nb_fmt_shape(input->ndim, input->shape, a, sizeof a),
                     nb_fmt_shape(target->ndim, target->shape, b, sizeof b));
        return false;
    }
    return true;
}

/* A weight tensor (weight, pos_weight): NULL, or of the input's dtype and device. */
bool nb_loss_weight_check(const char *op, const char *what, nb_tensor *w, nb_tensor *input) {
    if (!w) return true;
    if (w->dtype != input->dtype) {
        nb_set_error(NB_ERR_DTYPE, "%s: %s is %s, the input %s", op, what, nb_dtype_name(w->dtype),
                     nb_dtype_name(input->dtype));
        return false;
    }
    if (!nb_same_device(w->storage->device, input->storage->device)) {
        nb_set_error(NB_ERR_DEVICE, "%s: %s is on another device than the input", op, what);
        return false;
    }
    return true;
}

nb_tensor *nb_loss_reduce(nb_tensor *l, nb_reduction reduction) {
    if (!l || reduction == NB_REDUCTION_NONE) return l;
    return reduction == NB_REDUCTION_SUM ? nb_sum(l, NULL, 0, false) : nb_mean(l, NULL, 0, false);
}

/* Runs a loss written from ops: autocast (float32), a library scope. */
typedef nb_tensor *(*loss_fn)(nb_tensor *input, nb_tensor *target, const nb_loss_options *o);
static nb_tensor *run_loss(nb_op_id id, loss_fn f, nb_tensor *input, nb_tensor *target, nb_loss_options o) {
    nb_tensor *in[2] = {input, target};
    if (!nb_autocast_inputs(id, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, f(in[0], in[1], &o));
}

static nb_tensor *mse_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("mse_loss", NB_OP_MSE_LOSS, input, target, o->reduction)) return NULL;
    nb_tensor *d = nb_sub(input, target);
    return nb_loss_reduce(nb_mul(d, d), o->reduction);
}

nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    return run_loss(NB_OP_MSE_LOSS, mse_impl, input, target, (nb_loss_options){.reduction = reduction});
}

static nb_tensor *l1_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("l1_loss", NB_OP_L1_LOSS, input, target, o->reduction)) return NULL;
    return nb_loss_reduce(nb_abs(nb_sub(input, target)), o->reduction);
}

nb_tensor *nb_l1_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    return run_loss(NB_OP_L1_LOSS, l1_impl, input, target, (nb_loss_options){.reduction = reduction});
}

/* d = |input - target|: where(d < k, a d^2, b (d - k / 2)) (smooth_l1: a =
 * 1 / (2 beta), b = 1; huber: a = 1/2, b = delta). */
static nb_tensor *quadratic_near_zero(nb_tensor *input, nb_tensor *target, double k, double a, double b) {
    nb_tensor *d = nb_abs(nb_sub(input, target));
    if (!d) return NULL;
    nb_tensor *near = nb_lt(d, nb_scalar_like(d, k, d->dtype));
    return nb_where(near, nb_mul_scalar(nb_mul(d, d), a), nb_mul_scalar(nb_add_scalar(d, -0.5 * k), b));
}

static nb_tensor *smooth_l1_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("smooth_l1_loss", NB_OP_SMOOTH_L1_LOSS, input, target, o->reduction)) return NULL;
    double beta = nb_option(o->beta, 1.0);
    if (!(beta >= 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "smooth_l1_loss: beta must be >= 0 (got %g)", beta);
    if (beta == 0) return nb_loss_reduce(nb_abs(nb_sub(input, target)), o->reduction);
    return nb_loss_reduce(quadratic_near_zero(input, target, beta, 0.5 / beta, 1.0), o->reduction);
}

nb_tensor *nb_smooth_l1_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_SMOOTH_L1_LOSS, smooth_l1_impl, input, target, opts);
}

static nb_tensor *huber_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("huber_loss", NB_OP_HUBER_LOSS, input, target, o->reduction)) return NULL;
    double delta = nb_option(o->delta, 1.0);
    if (!(delta > 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "huber_loss: delta must be > 0 (got %g)", delta);
    return nb_loss_reduce(quadratic_near_zero(input, target, delta, 0.5, delta), o->reduction);
}

nb_tensor *nb_huber_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_HUBER_LOSS, huber_impl, input, target, opts);
}

/* log(x) clamped to >= -100 (PyTorch's binary_cross_entropy). */
static nb_tensor *clamped_log(nb_tensor *x) {
    nb_tensor *l = nb_log(x);
    return l ? nb_maximum(l, nb_scalar_like(l, -100.0, l->dtype)) : NULL;
}

static nb_tensor *bce_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    const char *op = "binary_cross_entropy";
    if (!nb_loss_check(op, NB_OP_BINARY_CROSS_ENTROPY, input, target, o->reduction) ||
        !nb_loss_weight_check(op, "weight", o->weight, input))
        return NULL;
    /* -(t log x + (1 - t) log(1 - x)) = -(log(1 - x) + t (log x - log(1 - x))) */
    nb_tensor *lx = clamped_log(input), *l1x = clamped_log(nb_add_scalar(nb_neg(input), 1.0));
    nb_tensor *l = nb_neg(nb_add(l1x, nb_mul(target, nb_sub(lx, l1x))));
    if (o->weight) l = nb_mul(l, o->weight);
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_binary_cross_entropy(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_BINARY_CROSS_ENTROPY, bce_impl, input, target, opts);
}

static nb_tensor *bce_logits_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    const char *op = "binary_cross_entropy_with_logits";
    if (!nb_loss_check(op, NB_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, input, target, o->reduction) ||
        !nb_loss_weight_check(op, "weight", o->weight, input) || !nb_loss_weight_check(op, "pos_weight", o->pos_weight, input))
        return NULL;
    /* log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0), finite for any x */
    nb_tensor *zero = nb_scalar_like(input, 0.0, input->dtype);
    nb_tensor *soft = nb_add(nb_log1p(nb_exp(nb_neg(nb_abs(input)))), nb_maximum(nb_neg(input), zero));
    nb_tensor *one_minus_t = nb_add_scalar(nb_neg(target), 1.0);
    nb_tensor *coef = o->pos_weight ? nb_add_scalar(nb_mul(nb_add_scalar(o->pos_weight, -1.0), target), 1.0) : NULL;
    nb_tensor *l = nb_add(nb_mul(one_minus_t, input), coef ? nb_mul(coef, soft) : soft);
    if (o->weight) l = nb_mul(l, o->weight);
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_binary_cross_entropy_with_logits(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, bce_logits_impl, input, target, opts);
}

static nb_tensor *kl_div_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("kl_div", NB_OP_KL_DIV, input, target, o->reduction)) return NULL;
    nb_tensor *l;
    if (o->log_target) l = nb_mul(nb_exp(target), nb_sub(target, input));
    else { /* xlogy(t, t) - t x: log of 1 where t = 0, so t log t is 0 there and its gradient finite */
        nb_tensor *zero = nb_scalar_like(target, 0.0, target->dtype);
        nb_tensor *safe = nb_where(nb_gt(target, zero), target, nb_scalar_like(target, 1.0, target->dtype));
        l = nb_mul(target, nb_sub(nb_log(safe), input));
    }
    if (!o->batchmean) return nb_loss_reduce(l, o->reduction);
    nb_tensor *sum = nb_sum(l, NULL, 0, false);
    int64_t n = input->ndim ? input->shape[0] : 1;
    return sum ? nb_mul_scalar(sum, 1.0 / (double)n) : NULL;
}

nb_tensor *nb_kl_div(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_KL_DIV, kl_div_impl, input, target, opts);
}

static nb_tensor *soft_margin_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("soft_margin_loss", NB_OP_SOFT_MARGIN_LOSS, input, target, o->reduction)) return NULL;
    return nb_loss_reduce(nb_softplus(nb_neg(nb_mul(target, input)), 1.0, 20.0), o->reduction);
}

nb_tensor *nb_soft_margin_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    return run_loss(NB_OP_SOFT_MARGIN_LOSS, soft_margin_impl, input, target, (nb_loss_options){.reduction = reduction});
}

static nb_tensor *hinge_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("hinge_embedding_loss", NB_OP_HINGE_EMBEDDING_LOSS, input, target, o->reduction)) return NULL;
    double margin = nb_option(o->margin, 1.0);
    nb_tensor *zero = nb_scalar_like(input, 0.0, input->dtype);
    nb_tensor *clamp = nb_maximum(nb_add_scalar(nb_neg(input), margin), zero);
    nb_tensor *l = nb_add(nb_where(nb_ne_scalar(target, 1.0), clamp, zero), nb_where(nb_ne_scalar(target, -1.0), input, zero));
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_hinge_embedding_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_HINGE_EMBEDDING_LOSS, hinge_impl, input, target, opts);
}

static nb_tensor *margin_ranking_impl(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, const nb_loss_options *o) {
    const char *op = "margin_ranking_loss";
    if (x1 && x2 && y && (x1->ndim != x2->ndim || x1->ndim != y->ndim)) /* PyTorch's check, before broadcasting */
        return NB_FAIL(NB_ERR_SHAPE, "margin_ranking_loss: the inputs have %d, %d and %d dimensions; they must have "
                       "the same number", x1->ndim, x2->ndim, y->ndim);
    if (!nb_loss_check(op, NB_OP_MARGIN_RANKING_LOSS, x1, x2, o->reduction)) return NULL;
    nb_tensor *d = nb_sub(x1, x2); /* then y against d: its dtype is x1's, its shape the broadcast one */
    if (!d || !nb_loss_check(op, NB_OP_MARGIN_RANKING_LOSS, d, y, o->reduction)) return NULL;
    nb_tensor *l = nb_add_scalar(nb_neg(nb_mul(y, d)), o->margin);
    return nb_loss_reduce(l ? nb_maximum(l, nb_scalar_like(l, 0.0, l->dtype)) : NULL, o->reduction);
}

nb_tensor *nb_margin_ranking_loss(nb_tensor *input1, nb_tensor *input2, nb_tensor *target, nb_loss_options opts) {
    nb_tensor *in[3] = {input1, input2, target};
    if (!nb_autocast_inputs(NB_OP_MARGIN_RANKING_LOSS, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, margin_ranking_impl(in[0], in[1], in[2], &opts));
}

static nb_tensor *poisson_nll_impl(nb_tensor *input, nb_tensor *target, const nb_loss_options *o) {
    if (!nb_loss_check("poisson_nll_loss", NB_OP_POISSON_NLL_LOSS, input, target, o->reduction)) return NULL;
    nb_tensor *l = nb_flag_on(o->log_input) ? nb_sub(nb_exp(input), nb_mul(target, input))
                                            : nb_sub(input, nb_mul(target, nb_log(nb_add_scalar(input, nb_option(o->eps, 1e-8)))));
    if (l && o->full) { /* Stirling's t log t - t + log(2 pi t) / 2 where t > 1 (1 stands in elsewhere: finite gradients) */
        nb_tensor *big = nb_gt_scalar(target, 1.0);
        nb_tensor *t = nb_where(big, target, nb_scalar_like(target, 1.0, target->dtype));
        nb_tensor *st = nb_add(nb_sub(nb_mul(t, nb_log(t)), t), nb_mul_scalar(nb_log(nb_mul_scalar(t, 2 * M_PI)), 0.5));
        l = nb_add(l, nb_where(big, st, nb_scalar_like(target, 0.0, target->dtype)));
    }
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_poisson_nll_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run_loss(NB_OP_POISSON_NLL_LOSS, poisson_nll_impl, input, target, opts);
}

/* max(v, eps) whose gradient is v's wherever it clamps (PyTorch clamps under
 * no_grad): eps + (v - detach(v)) below eps, exactly eps in value. */
nb_tensor *nb_clamp_min_passthrough(nb_tensor *v, double eps) {
    nb_tensor *low = nb_add_scalar(nb_sub(v, nb_detach(v)), eps);
    return low ? nb_where(nb_ge_scalar(v, eps), v, low) : NULL;
}

static nb_tensor *gaussian_nll_impl(nb_tensor *input, nb_tensor *target, nb_tensor *var, const nb_loss_options *o) {
    const char *op = "gaussian_nll_loss";
    if (!nb_loss_check(op, NB_OP_GAUSSIAN_NLL_LOSS, input, target, o->reduction) ||
        !nb_check_dtypes(NB_OP_GAUSSIAN_NLL_LOSS, 3, (nb_tensor *[]){input, target, var}))
        return NULL;
    bool same = var->ndim == input->ndim && !memcmp(var->shape, input->shape, sizeof(int64_t) * (size_t)input->ndim);
    if (!same) { /* PyTorch's two homoscedastic forms: the input's shape without its last dim, or with it 1 */
        int k = input->ndim - 1;
        bool lead = k >= 0 && !memcmp(var->shape, input->shape, sizeof(int64_t) * (size_t)(k > 0 ? k : 0));
        if (lead && var->ndim == k) var = nb_unsqueeze(var, -1);
        else if (!(lead && var->ndim == input->ndim && var->shape[k] == 1)) {
            char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
            return NB_FAIL(NB_ERR_SHAPE, "%s: var %s must have the input's shape %s, that shape without its last dim, "
                           "or with the last dim 1", op, nb_fmt_shape(var->ndim, var->shape, a, sizeof a),
                           nb_fmt_shape(input->ndim, input->shape, b, sizeof b));
        }
    }
    nb_tensor *neg = nb_any(nb_lt_scalar(var, 0.0), NULL, 0, false);
    if (!neg) return NULL;
    if (nb_item(neg) != 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: var has a negative entry", op);
    nb_tensor *v = nb_clamp_min_passthrough(var, nb_option(o->eps, 1e-6));
    nb_tensor *d = nb_sub(input, target);
    nb_tensor *l = nb_mul_scalar(nb_add(nb_log(v), nb_div(nb_mul(d, d), v)), 0.5);
    if (o->full) l = nb_add_scalar(l, 0.5 * log(2 * M_PI));
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_gaussian_nll_loss(nb_tensor *input, nb_tensor *target, nb_tensor *var, nb_loss_options opts) {
    nb_tensor *in[3] = {input, target, var};
    if (!nb_autocast_inputs(NB_OP_GAUSSIAN_NLL_LOSS, 3, in)) return NULL;
    if (!nb_check_inputs("gaussian_nll_loss", 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, gaussian_nll_impl(in[0], in[1], in[2], &opts));
}
