/* ops_activation.c - the activations written from other ops (PyTorch's
 * torch.nn.functional of the same names and formulas): celu, softsign,
 * softshrink, hardshrink, tanhshrink, threshold, glu, prelu, rrelu and
 * softmin, and the in-place forms of the activations (relu_ ... rrelu_).
 * Their gradients, first and second order, follow from those ops.
 * Tests: tests/test_ops_activation.c, the op harness, tests/torch_diff. */
#include <math.h>

#include "nb_autograd_impl.h"

/* x non-NULL, of a float dtype op takes; a library scope begun in *s. */
static bool begin(const char *op, nb_op_id id, nb_tensor **x, nb_scope **s) {
    if (!nb_autocast_inputs(id, 1, x) || !nb_check_inputs(op, 1, x) || !nb_check_dtypes(id, 1, x)) return false;
    *s = nb_op_scope_begin();
    return true;
}

static nb_tensor *zero_like(nb_tensor *x) { return nb_scalar_like(x, 0.0, x->dtype); }

nb_tensor *nb_celu(nb_tensor *x, double alpha) {
    nb_scope *s;
    alpha = nb_option(alpha, 1.0);
    if (alpha == 0) return NB_FAIL(NB_ERR_INVALID_ARG, "celu: alpha must be nonzero (ZeroDivisionError in PyTorch)");
    if (!begin("celu", NB_OP_CELU, &x, &s)) return NULL;
    /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) = alpha elu(x / alpha, 1) */
    return nb_scope_return(s, nb_mul_scalar(nb_elu(nb_mul_scalar(x, 1 / alpha), 1.0), alpha));
}

nb_tensor *nb_softsign(nb_tensor *x) {
    nb_scope *s;
    if (!begin("softsign", NB_OP_SOFTSIGN, &x, &s)) return NULL;
    return nb_scope_return(s, nb_div(x, nb_add_scalar(nb_abs(x), 1.0)));
}

nb_tensor *nb_softshrink(nb_tensor *x, double lambd) {
    nb_scope *s;
    lambd = nb_option(lambd, 0.5);
    if (!(lambd >= 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "softshrink: lambda must be >= 0 (got %g)", lambd);
    if (!begin("softshrink", NB_OP_SOFTSHRINK, &x, &s)) return NULL;
    nb_tensor *y = nb_where(nb_gt_scalar(x, lambd), nb_add_scalar(x, -lambd),
                            nb_where(nb_lt_scalar(x, -lambd), nb_add_scalar(x, lambd), zero_like(x)));
    return nb_scope_return(s, y);
}

nb_tensor *nb_hardshrink(nb_tensor *x, double lambd) {
    nb_scope *s;
    lambd = nb_option(lambd, 0.5);
    if (!begin("hardshrink", NB_OP_HARDSHRINK, &x, &s)) return NULL;
    nb_tensor *keep = nb_logical_or(nb_gt_scalar(x, lambd), nb_lt_scalar(x, -lambd));
    return nb_scope_return(s, nb_where(keep, x, zero_like(x)));
}

nb_tensor *nb_tanhshrink(nb_tensor *x) {
    nb_scope *s;
    if (!begin("tanhshrink", NB_OP_TANHSHRINK, &x, &s)) return NULL;
    return nb_scope_return(s, nb_sub(x, nb_tanh(x)));
}

nb_tensor *nb_threshold(nb_tensor *x, double threshold, double value) {
    nb_scope *s;
    if (!begin("threshold", NB_OP_THRESHOLD, &x, &s)) return NULL;
    nb_tensor *y = nb_where(nb_gt_scalar(x, threshold), x, nb_scalar_like(x, value, x->dtype));
    return nb_scope_return(s, y);
}

nb_tensor *nb_glu(nb_tensor *x, int dim) {
    nb_scope *s;
    if (!begin("glu", NB_OP_GLU, &x, &s)) return NULL;
    if (x->ndim == 0) return nb_scope_return(s, NB_FAIL(NB_ERR_SHAPE, "glu: does not take a 0-d input"));
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim)
        return nb_scope_return(s, NB_FAIL(NB_ERR_INVALID_ARG, "glu: dim %d out of range for %d dims", dim, x->ndim));
    if (x->shape[d] % 2)
        return nb_scope_return(s, NB_FAIL(NB_ERR_SHAPE, "glu: halving dimension must be even, but dimension %d is "
                                          "size %lld", d, (long long)x->shape[d]));
    nb_tensor *h[2];
    if (nb_chunk(x, 2, d, h, 2) != 2) return nb_scope_return(s, NULL);
    return nb_scope_return(s, nb_mul(h[0], nb_sigmoid(h[1])));
}

nb_tensor *nb_prelu(nb_tensor *x, nb_tensor *weight) {
    nb_tensor *in[2] = {x, weight};
    if (!nb_autocast_inputs(NB_OP_PRELU, 2, in) || !nb_check_inputs("prelu", 2, in) ||
        !nb_check_dtypes(NB_OP_PRELU, 2, in))
        return NULL;
    x = in[0], weight = in[1];
    int64_t C = x->ndim >= 2 ? x->shape[1] : 1, n = nb_numel(weight);
    if (weight->ndim > 1 || (n != 1 && n != C)) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "prelu: weight %s must have 1 element or one per channel (%lld)",
                       nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a), (long long)C);
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *w = weight;
    if (n == C && x->ndim >= 2) { /* [C] along dim 1 */
        int64_t shape[NB_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) shape[i] = 1;
        shape[1] = C;
        w = nb_reshape(weight, x->ndim, shape);
    } else if (weight->ndim == 1) {
        w = nb_reshape(weight, 0, NULL);
    }
    return nb_scope_return(s, nb_where(nb_gt_scalar(x, 0.0), x, nb_mul(w, x)));
}

nb_tensor *nb_rrelu(nb_tensor *x, double lower, double upper, bool training, nb_generator *gen) {
    nb_scope *s;
    lower = nb_option(lower, 1.0 / 8), upper = nb_option(upper, 1.0 / 3);
    if (!(lower <= upper) || !isfinite(lower) || !isfinite(upper))
        return NB_FAIL(NB_ERR_INVALID_ARG, "rrelu: lower bound %g must be <= upper bound %g (both finite)", lower, upper);
    if (!begin("rrelu", NB_OP_RRELU, &x, &s)) return NULL;
    nb_tensor *slope;
    if (training) { /* a slope U(lower, upper) per element (Xu et al. 2015) */
        slope = nb_rand_on(x->ndim, x->shape, x->dtype, gen, x->storage->device);
        slope = nb_add_scalar(nb_mul_scalar(slope, upper - lower), lower);
    } else {
        slope = nb_scalar_like(x, (lower + upper) / 2, x->dtype);
    }
    return nb_scope_return(s, nb_where(nb_ge_scalar(x, 0.0), x, nb_mul(slope, x)));
}

nb_tensor *nb_softmin(nb_tensor *x, int dim) {
    nb_scope *s;
    if (!begin("softmin", NB_OP_SOFTMIN, &x, &s)) return NULL;
    return nb_scope_return(s, nb_softmax(nb_neg(x), dim));
}

nb_tensor *nb_gumbel_softmax(nb_tensor *logits, double tau, bool hard, int dim, nb_generator *gen) {
    nb_scope *s;
    tau = nb_option(tau, 1.0);
    if (!(tau > 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "gumbel_softmax: tau %g must be > 0", tau);
    if (!begin("gumbel_softmax", NB_OP_GUMBEL_SOFTMAX, &logits, &s)) return NULL;
    /* g = -log(E), E ~ Exp(1) as -log(U) with U in (0, 1]: 1 - rand keeps log finite */
    nb_tensor *u = nb_rand_on(logits->ndim, logits->shape, logits->dtype, gen, logits->storage->device);
    nb_tensor *g = nb_neg(nb_log(nb_neg(nb_log(nb_add_scalar(nb_neg(u), 1.0)))));
    nb_tensor *y = nb_softmax(nb_mul_scalar(nb_add(logits, g), 1 / tau), dim);
    if (y && hard) { /* straight-through: one_hot(argmax) in value, y's gradient */
        int d = dim < 0 ? dim + logits->ndim : dim;
        nb_tensor *idx = nb_argmax(y, d, true);
        nb_tensor *onehot = nb_scatter_value(nb_mul_scalar(nb_detach(y), 0.0), d, idx, 1.0);
        y = nb_add(nb_sub(onehot, nb_detach(y)), y);
    }
    return nb_scope_return(s, y);
}

/* ---- in-place forms: relu_, leaky_relu_, elu_, selu_, celu_, hardtanh_, threshold_, rrelu_ ----
 * Without a history to record, the op runs on x and its result is copied
 * into x's storage (through views, bumping the version counter, as
 * PyTorch's). Under autograd PyTorch rebases x's history: x's grad_fn
 * becomes the op's node, which differentiates through x's old value. Here
 * the op runs out of place on an alias of x that carries x's old history,
 * and x then takes the result's storage and node: the old storage keeps
 * the old values for every node that saved them (no version error where
 * PyTorch's saved output would give one), and the ops that took x as input
 * before keep their edges to its old node (nodes record their edges). */

typedef struct inplace_args {
    double a, b;
    bool training;
    nb_generator *gen;
} inplace_args;

static nb_status inplace(const char *op, nb_op_id id, nb_tensor *x, nb_tensor *(*fn)(nb_tensor *, const inplace_args *),
                         inplace_args args) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return nb_last_status();
    bool record = nb_needs_grad(1, &x);
    if (record && !x->grad_fn)
        return nb_set_error(NB_ERR_STATE, "%s: a leaf tensor that requires grad is used in an in-place operation "
                                          "(PyTorch's error too): use the out-of-place op, or write under NB_NO_GRAD", op);
    if (record && (x->offset != 0 || (size_t)nb_numel(x) * nb_dtype_size(x->dtype) != x->storage->bytes))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: x requires grad and is a view of part of another tensor, which "
                            "PyTorch would update and rebase too: use the out-of-place op", op);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y = record ? fn(nb_history_view(x, x->grad_fn, x->output_nr), &args) : fn(x, &args);
    nb_status st = y ? NB_OK : nb_last_status();
    if (st == NB_OK && !record) {
        st = nb_copy_(x, y);
    } else if (st == NB_OK) { /* x takes y's storage (contiguous, x's shape) and node */
        nb_tensor_become(x, y);
    }
    nb_scope_end(s);
    return st;
}

static nb_tensor *ip_relu(nb_tensor *x, const inplace_args *a) { (void)a; return nb_relu(x); }
static nb_tensor *ip_leaky_relu(nb_tensor *x, const inplace_args *a) { return nb_leaky_relu(x, a->a); }
static nb_tensor *ip_elu(nb_tensor *x, const inplace_args *a) { return nb_elu(x, a->a); }
static nb_tensor *ip_selu(nb_tensor *x, const inplace_args *a) { (void)a; return nb_selu(x); }
static nb_tensor *ip_celu(nb_tensor *x, const inplace_args *a) { return nb_celu(x, a->a); }
static nb_tensor *ip_hardtanh(nb_tensor *x, const inplace_args *a) { return nb_hardtanh(x, a->a, a->b); }
static nb_tensor *ip_threshold(nb_tensor *x, const inplace_args *a) { return nb_threshold(x, a->a, a->b); }
static nb_tensor *ip_rrelu(nb_tensor *x, const inplace_args *a) { return nb_rrelu(x, a->a, a->b, a->training, a->gen); }

nb_status nb_relu_(nb_tensor *x) { return inplace("relu_", NB_OP_RELU_, x, ip_relu, (inplace_args){0}); }
nb_status nb_leaky_relu_(nb_tensor *x, double negative_slope) {
    return inplace("leaky_relu_", NB_OP_LEAKY_RELU_, x, ip_leaky_relu, (inplace_args){.a = negative_slope});
}
nb_status nb_elu_(nb_tensor *x, double alpha) { return inplace("elu_", NB_OP_ELU_, x, ip_elu, (inplace_args){.a = alpha}); }
nb_status nb_selu_(nb_tensor *x) { return inplace("selu_", NB_OP_SELU_, x, ip_selu, (inplace_args){0}); }
nb_status nb_celu_(nb_tensor *x, double alpha) { return inplace("celu_", NB_OP_CELU_, x, ip_celu, (inplace_args){.a = alpha}); }
nb_status nb_hardtanh_(nb_tensor *x, double min_val, double max_val) {
    return inplace("hardtanh_", NB_OP_HARDTANH_, x, ip_hardtanh, (inplace_args){.a = min_val, .b = max_val});
}
nb_status nb_threshold_(nb_tensor *x, double threshold, double value) {
    return inplace("threshold_", NB_OP_THRESHOLD_, x, ip_threshold, (inplace_args){.a = threshold, .b = value});
}
nb_status nb_rrelu_(nb_tensor *x, double lower, double upper, bool training, nb_generator *gen) {
    return inplace("rrelu_", NB_OP_RRELU_, x, ip_rrelu,
                   (inplace_args){.a = lower, .b = upper, .training = training, .gen = gen});
}
