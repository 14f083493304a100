/* ops_unary.c - unary elementwise ops (math functions, activations, gelu,
 * scalar forms): forward dispatch through the backend's unary slot and one
 * backward rule through its unary_backward slot.
 * Kernels: backend/cpu/unary.c, unary_math.c. Two-parameter
 * activations compose one-parameter kernels (hardtanh = two one-sided
 * clamps; softplus with beta != 1 scales around the beta-1 kernel).
 * silu_mul (silu(a) * b, the SwiGLU product) runs the backend's fused
 * kernel for inference. Tests: tests/test_ops_unary.c. */
#include <math.h>

#include "nb_autograd_impl.h"
#include "nb_scalar_math.h" /* the kernels' constants */

/* ---- unary --------------------------------------------------------------- */

static nb_tensor *sc(const nb_tensor *like, double v) { return nb_scalar_like(like, v, like->dtype); }

/* g where mask, else 0 */
static nb_tensor *masked(nb_tensor *mask, nb_tensor *g) { return nb_where(mask, g, sc(g, 0)); }

/* gx = g * f'(x) of unary op kop as recorded ops, for create_graph: the
 * formulas of the backend's unary_backward slot (PyTorch's
 * derivatives.yaml), written so that they can be differentiated again.
 * x and y are the saved input and output, connected to the graph. */
static nb_tensor *unary_grad_ops(nb_unary_op kop, double a, nb_tensor *g, nb_tensor *x, nb_tensor *y) {
    switch (kop) {
    case NB_UNARY_NEG: return nb_neg(g);
    case NB_UNARY_EXP: return nb_mul(g, y);
    case NB_UNARY_LOG: return nb_div(g, x);
    case NB_UNARY_SQRT: return nb_div(g, nb_mul_scalar(y, 2));
    case NB_UNARY_RELU: return masked(nb_gt_scalar(x, 0), g);
    case NB_UNARY_SIGMOID: return nb_mul(g, nb_mul(nb_add_scalar(nb_neg(y), 1), y));
    case NB_UNARY_TANH: return nb_mul(g, nb_add_scalar(nb_neg(nb_mul(y, y)), 1));
    case NB_UNARY_ADD_SCALAR: return nb_mul_scalar(g, 1);
    case NB_UNARY_MUL_SCALAR: return nb_mul_scalar(g, a);
    case NB_UNARY_POW_SCALAR: return a == 0 ? nb_zeros_like(x) : nb_mul(g, nb_mul_scalar(nb_pow_scalar(x, a - 1), a));
    case NB_UNARY_ABS: return nb_mul(g, nb_sign(x));
    case NB_UNARY_SIGN: case NB_UNARY_FLOOR: case NB_UNARY_CEIL: case NB_UNARY_ROUND: case NB_UNARY_TRUNC:
        return nb_zeros_like(x);
    case NB_UNARY_RECIPROCAL: return nb_neg(nb_mul(g, nb_mul(y, y)));
    case NB_UNARY_RSQRT: return nb_mul_scalar(nb_mul(g, nb_mul(y, nb_mul(y, y))), -0.5);
    case NB_UNARY_LOG1P: return nb_div(g, nb_add_scalar(x, 1));
    case NB_UNARY_EXPM1: return nb_mul(g, nb_add_scalar(y, 1));
    case NB_UNARY_LOG2: return nb_mul_scalar(nb_div(g, x), M_LOG2E);
    case NB_UNARY_LOG10: return nb_div(g, nb_mul_scalar(x, M_LN10));
    case NB_UNARY_SIN: return nb_mul(g, nb_cos(x));
    case NB_UNARY_COS: return nb_neg(nb_mul(g, nb_sin(x)));
    case NB_UNARY_TAN: return nb_mul(g, nb_add_scalar(nb_mul(y, y), 1));
    case NB_UNARY_ASIN: return nb_mul(g, nb_rsqrt(nb_add_scalar(nb_neg(nb_mul(x, x)), 1)));
    case NB_UNARY_ACOS: return nb_neg(nb_mul(g, nb_rsqrt(nb_add_scalar(nb_neg(nb_mul(x, x)), 1))));
    case NB_UNARY_ATAN: return nb_div(g, nb_add_scalar(nb_mul(x, x), 1));
    case NB_UNARY_SINH: return nb_mul(g, nb_cosh(x));
    case NB_UNARY_COSH: return nb_mul(g, nb_sinh(x));
    case NB_UNARY_ASINH: return nb_mul(g, nb_rsqrt(nb_add_scalar(nb_mul(x, x), 1)));
    case NB_UNARY_ACOSH: return nb_mul(g, nb_rsqrt(nb_add_scalar(nb_mul(x, x), -1)));
    case NB_UNARY_ATANH: return nb_div(g, nb_add_scalar(nb_neg(nb_mul(x, x)), 1));
    case NB_UNARY_ERF: return nb_mul(g, nb_mul_scalar(nb_exp(nb_neg(nb_mul(x, x))), M_2_SQRTPI));
    case NB_UNARY_ERFC: return nb_mul(g, nb_mul_scalar(nb_exp(nb_neg(nb_mul(x, x))), -M_2_SQRTPI));
    case NB_UNARY_LEAKY_RELU: return nb_where(nb_gt_scalar(x, 0), g, nb_mul_scalar(g, a));
    case NB_UNARY_ELU: return nb_where(nb_le_scalar(x, 0), nb_mul(g, nb_mul_scalar(nb_exp(x), a)), g);
    case NB_UNARY_SELU:
        return nb_where(nb_le_scalar(x, 0), nb_mul(g, nb_mul_scalar(nb_exp(x), NB_SM_SELU_ALPHA * NB_SM_SELU_SCALE)),
                        nb_mul_scalar(g, NB_SM_SELU_SCALE));
    case NB_UNARY_SILU: { /* s (1 + x (1 - s)) */
        nb_tensor *s = nb_sigmoid(x);
        return nb_mul(g, nb_mul(s, nb_add_scalar(nb_mul(x, nb_add_scalar(nb_neg(s), 1)), 1)));
    }
    case NB_UNARY_MISH: { /* tanh(sp) + x s (1 - tanh(sp)^2), sp = softplus(x) */
        nb_tensor *t = nb_tanh(nb_softplus(x, 1, 20)), *s = nb_sigmoid(x);
        return nb_mul(g, nb_add(t, nb_mul(nb_mul(x, s), nb_add_scalar(nb_neg(nb_mul(t, t)), 1))));
    }
    case NB_UNARY_SOFTPLUS: return nb_where(nb_gt_scalar(x, a), g, nb_mul(g, nb_sigmoid(x)));
    case NB_UNARY_HARDTANH_MIN: return masked(nb_gt_scalar(x, a), g);
    case NB_UNARY_HARDTANH_MAX: return masked(nb_lt_scalar(x, a), g);
    case NB_UNARY_HARDSIGMOID:
        return masked(nb_logical_and(nb_gt_scalar(x, -3), nb_lt_scalar(x, 3)), nb_mul_scalar(g, 1.0 / 6));
    case NB_UNARY_HARDSWISH:
        return masked(nb_ge_scalar(x, -3),
                      nb_where(nb_le_scalar(x, 3), nb_mul(g, nb_add_scalar(nb_mul_scalar(x, 1.0 / 3), 0.5)), g));
    case NB_UNARY_LOGSIGMOID: return nb_mul(g, nb_sigmoid(nb_neg(x)));
    case NB_UNARY_GELU: { /* Phi(x) + x phi(x) */
        nb_tensor *cdf = nb_mul_scalar(nb_add_scalar(nb_erf(nb_mul_scalar(x, M_SQRT1_2)), 1), 0.5);
        nb_tensor *pdf = nb_mul_scalar(nb_exp(nb_mul_scalar(nb_mul(x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
        return nb_mul(g, nb_add(cdf, nb_mul(x, pdf)));
    }
    case NB_UNARY_GELU_TANH: { /* PyTorch's GeluBackward with approximate='tanh' */
        const double k = M_SQRT2 * M_2_SQRTPI * 0.5, c = 0.044715;
        nb_tensor *x2 = nb_mul(x, x);
        nb_tensor *t = nb_tanh(nb_mul_scalar(nb_add(x, nb_mul_scalar(nb_mul(x2, x), c)), k));
        nb_tensor *left = nb_mul_scalar(nb_add_scalar(t, 1), 0.5);
        nb_tensor *right = nb_mul(nb_mul(nb_mul_scalar(x, 0.5), nb_add_scalar(nb_neg(nb_mul(t, t)), 1)),
                                  nb_add_scalar(nb_mul_scalar(x2, 3 * c * k), k));
        return nb_mul(g, nb_add(left, right));
    }
    default: break;
    }
    return NB_FAIL(NB_ERR_UNSUPPORTED, "unary backward: op %d has no differentiable rule", (int)kop);
}

/* One rule for every unary op: the backend's unary_backward with the saved
 * input (slot 0), output (slot 1) and alpha (p.unary); under create_graph
 * the same formula as recorded ops. */
nb_status nb_bw_unary(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *y = n->saved[1];
    if (nb_needs_grad(3, (nb_tensor *[]){g, x, y})) {
        gin[0] = unary_grad_ops(n->p.unary.kop, n->p.unary.alpha, g, x, y);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gx = nb_empty_like(x);
    if (!gx) return nb_last_status();
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc), vx = nb_kview_of(x), vy = nb_kview_of(y);
    nb_status st = nb_kernel_unary_backward(NB_BE(x), n->p.unary.kop, &vgx, &vg, &vx, &vy, n->p.unary.alpha);
    gin[0] = gx;
    return st;
}

static nb_tensor *unary_op_impl(nb_op_id op, nb_unary_op kop, nb_tensor *x, double alpha) {
    if (!nb_check_inputs(nb_op_name(op), 1, &x) || !nb_check_dtypes(op, 1, &x)) return NULL;
    nb_tensor *out = nb_empty_like(x);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), vx = nb_kview_of(x);
    if (nb_kernel_unary(NB_BE(x), kop, &o, &vx, alpha) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(op, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.unary.kop = kop;
        n->p.unary.alpha = alpha;
        nb_save(n, 0, x);
        nb_save(n, 1, out);
    }
    return out;
}

static nb_tensor *unary_op(nb_op_id op, nb_unary_op kop, nb_tensor *x, double alpha) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, unary_op_impl(op, kop, x, alpha));
}

/* torch's float functions (exp, sin, ...) promote integer and bool inputs
 * to the default float dtype: torch.sin(int tensor) is float32. The
 * activations (silu, elu, ...) do not, as in PyTorch. */
static nb_tensor *float_fn(nb_op_id op, nb_unary_op kop, nb_tensor *x) {
    if (!x || nb_dtype_is_float(x->dtype) || (unsigned)x->dtype >= NB_DTYPE_COUNT) return unary_op(op, kop, x, 0);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *f = nb_to_dtype(x, NB_F32);
    return nb_scope_return(s, f ? unary_op_impl(op, kop, f, 0) : NULL);
}

/* The one-argument ops of NB_UNARY_OPS's GEN rows, generated: an integer or
 * bool input is promoted to float32 where the op's row takes bool (torch's
 * float functions: exp, sin, ...), and kept otherwise (neg, abs and floor
 * compute on integers; the activations reject them). */
static nb_tensor *unary_gen(nb_op_id op, nb_unary_op kop, nb_tensor *x) {
    return nb_op_get(op)->dtypes & NB_DTM(NB_BOOL) ? float_fn(op, kop, x) : unary_op(op, kop, x, 0);
}
#define NB_UNARY_PUBLIC_GEN(id, name) \
    nb_tensor *nb_##name(nb_tensor *x) { return unary_gen(NB_OP_##id, NB_UNARY_##id, x); }
#define NB_UNARY_PUBLIC_HAND(id, name)
#define NB_UNARY_PUBLIC(id, name, saved, api) NB_UNARY_PUBLIC_##api(id, name)
NB_UNARY_OPS(NB_UNARY_PUBLIC)
#undef NB_UNARY_PUBLIC
#undef NB_UNARY_PUBLIC_HAND
#undef NB_UNARY_PUBLIC_GEN

/* x + s, x * s in torch.result_type(x, s): an integer x meets a value it
 * cannot hold exactly (1.5, 1e10 for int32) as a Python float, so x is cast
 * to float32 first (the integer kernels then only see values of their own
 * dtype); a bool x gives int64. */
static nb_tensor *scalar_arith(nb_op_id op, nb_unary_op kop, nb_tensor *a, double s) {
    if (!a || (unsigned)a->dtype >= NB_DTYPE_COUNT) return unary_op(op, kop, a, s);
    nb_dtype dt = nb_scalar_result_type(a, s);
    if (dt == a->dtype) return unary_op(op, kop, a, s);
    nb_scope *sc = nb_op_scope_begin();
    nb_tensor *c = nb_to_dtype(a, dt);
    return nb_scope_return(sc, c ? unary_op_impl(op, kop, c, s) : NULL);
}
nb_tensor *nb_add_scalar(nb_tensor *a, double s) { return scalar_arith(NB_OP_ADD_SCALAR, NB_UNARY_ADD_SCALAR, a, s); }
nb_tensor *nb_mul_scalar(nb_tensor *a, double s) { return scalar_arith(NB_OP_MUL_SCALAR, NB_UNARY_MUL_SCALAR, a, s); }
nb_tensor *nb_pow_scalar(nb_tensor *a, double e) { return unary_op(NB_OP_POW_SCALAR, NB_UNARY_POW_SCALAR, a, e); }

/* ---- op coverage: unary math and activations ------------------------------ */

nb_tensor *nb_round_decimals(nb_tensor *x, int64_t decimals) {
    if (!nb_check_inputs("round", 1, &x)) return NULL;
    if (decimals != 0 && !nb_dtype_is_float(x->dtype))
        return NB_FAIL(NB_ERR_DTYPE, "round: decimals=%lld needs float32 or float64, got %s", (long long)decimals,
                       nb_dtype_name(x->dtype));
    return unary_op(NB_OP_ROUND_DECIMALS, NB_UNARY_ROUND, x, (double)decimals);
}

nb_tensor *nb_leaky_relu(nb_tensor *x, double negative_slope) {
    return unary_op(NB_OP_LEAKY_RELU, NB_UNARY_LEAKY_RELU, x, negative_slope);
}
nb_tensor *nb_elu(nb_tensor *x, double alpha) { return unary_op(NB_OP_ELU, NB_UNARY_ELU, x, alpha); }

/* beta 1 is one kernel pass; other betas run it on beta x (whose comparison
 * with threshold is PyTorch's), scale back by 1 / beta, and take x itself
 * where beta x > threshold. */
static nb_tensor *softplus_impl(nb_tensor *x, double beta, double threshold) {
    if (!nb_check_inputs("softplus", 1, &x)) return NULL;
    if (beta == 0 || !isfinite(beta) || isnan(threshold))
        return NB_FAIL(NB_ERR_INVALID_ARG, "softplus: beta must be finite and nonzero and threshold not NaN "
                       "(beta %g, threshold %g)", beta, threshold);
    if (beta == 1) return unary_op_impl(NB_OP_SOFTPLUS, NB_UNARY_SOFTPLUS, x, threshold);
    nb_tensor *bx = unary_op_impl(NB_OP_SOFTPLUS, NB_UNARY_MUL_SCALAR, x, beta);
    nb_tensor *sp = bx ? unary_op_impl(NB_OP_SOFTPLUS, NB_UNARY_SOFTPLUS, bx, threshold) : NULL;
    nb_tensor *r = sp ? unary_op_impl(NB_OP_SOFTPLUS, NB_UNARY_MUL_SCALAR, sp, 1 / beta) : NULL;
    /* above the threshold the answer is x itself, not (beta x) / beta,
     * which overflows when beta x does (softplus(3e38, beta=2) = 3e38) */
    nb_tensor *above = r ? nb_gt_scalar(bx, threshold) : NULL;
    return above ? nb_where(above, x, r) : NULL;
}

nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, softplus_impl(x, beta, threshold));
}

/* Two one-sided passes; their gradients multiply to PyTorch's
 * hardtanh_backward: gy where min_val < x < max_val, else 0. */
static nb_tensor *hardtanh_impl(nb_tensor *x, double min_val, double max_val) {
    if (!nb_check_inputs("hardtanh", 1, &x)) return NULL;
    if (!(min_val <= max_val))
        return NB_FAIL(NB_ERR_INVALID_ARG, "hardtanh: min_val %g must not exceed max_val %g", min_val, max_val);
    nb_tensor *lo = unary_op_impl(NB_OP_HARDTANH, NB_UNARY_HARDTANH_MIN, x, min_val);
    return lo ? unary_op_impl(NB_OP_HARDTANH, NB_UNARY_HARDTANH_MAX, lo, max_val) : NULL;
}

nb_tensor *nb_hardtanh(nb_tensor *x, double min_val, double max_val) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, hardtanh_impl(x, min_val, max_val));
}

nb_tensor *nb_relu6(nb_tensor *x) { return nb_hardtanh(x, 0, 6); }

/* ---- gelu ----------------------------------------------------------------------- */

/* saved: x; p.unary.kop: the unary op. The rule needs only x. */
nb_status nb_bw_gelu(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0];
    if (nb_needs_grad(2, (nb_tensor *[]){g, x})) {
        gin[0] = unary_grad_ops(n->p.unary.kop, 0, g, x, NULL);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gc = nb_contiguous(g), *gx = nb_empty_like(x);
    if (!gc || !gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc), vx = nb_kview_of(x);
    gin[0] = gx;
    return nb_kernel_unary_backward(NB_BE(x), n->p.unary.kop, &vgx, &vg, &vx, NULL, 0.0);
}

static nb_tensor *gelu_impl(nb_tensor *x, nb_gelu_approximate approximate) {
    if (!nb_check_inputs("gelu", 1, &x) || !nb_check_dtypes(NB_OP_GELU, 1, &x)) return NULL;
    if (approximate != NB_GELU_ERF && approximate != NB_GELU_TANH)
        return NB_FAIL(NB_ERR_INVALID_ARG, "gelu: approximate must be NB_GELU_ERF or NB_GELU_TANH, got %d",
                       (int)approximate);
    nb_unary_op kop = approximate == NB_GELU_TANH ? NB_UNARY_GELU_TANH : NB_UNARY_GELU;
    nb_tensor *out = nb_empty_like(x);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(x);
    if (nb_kernel_unary(NB_BE(x), kop, &vo, &vx, 0.0) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_GELU, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.unary.kop = kop;
        nb_save(n, 0, x);
    }
    return out;
}

nb_tensor *nb_gelu(nb_tensor *x, nb_gelu_approximate approximate) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, gelu_impl(x, approximate));
}

/* ---- logit / sinc (composites) ----------------------------------------------------------- */

/* An integer or bool x as float32 (torch's float functions), else x. */
static nb_tensor *as_float(nb_tensor *x) {
    return nb_dtype_is_float(x->dtype) ? x : nb_to_dtype(x, NB_F32);
}

nb_tensor *nb_logit(nb_tensor *x, double eps) {
    if (!nb_check_inputs("logit", 1, &x) || !nb_check_dtypes(NB_OP_LOGIT, 1, &x)) return NULL;
    if (isnan(eps)) return NB_FAIL(NB_ERR_INVALID_ARG, "logit: eps is NaN");
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *z = as_float(x);
    if (z && eps >= 0) z = nb_clamp_scalar(z, eps, 1 - eps); /* its gradient is 0 outside, as logit_backward's */
    return nb_scope_return(s, nb_log(nb_div(z, nb_add_scalar(nb_neg(z), 1))));
}

/* sin(pi x) / (pi x), 1 at 0. x = 0 is replaced by 1 before the division,
 * so the unused branch has no 0/0 whose NaN would reach the gradient
 * (PyTorch's gradient at 0 is 0). */
nb_tensor *nb_sinc(nb_tensor *x) {
    if (!nb_check_inputs("sinc", 1, &x) || !nb_check_dtypes(NB_OP_SINC, 1, &x)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *z = as_float(x);
    nb_tensor *zero = z ? nb_eq_scalar(z, 0) : NULL, *one = z ? nb_scalar_like(z, 1, z->dtype) : NULL;
    nb_tensor *px = nb_mul_scalar(nb_where(zero, one, z), 3.14159265358979323846);
    return nb_scope_return(s, nb_where(zero, one, nb_div(nb_sin(px), px)));
}

/* ---- silu_mul: the SwiGLU product ----------------------------------------------------------- */

/* One kernel (the backend's silu_mul slot) where it applies: no gradient, one device, shape and float dtype.
 * Else the two ops, each with its own rule; the kernel rounds as they do, so both give the same bits. */
nb_tensor *nb_silu_mul(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("silu_mul", 2, in)) return NULL;
    bool same = nb_same_shape(a, b) && a->dtype == b->dtype && nb_dtype_is_float(a->dtype);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y = NULL;
    if (same && nb_kernel_has(NB_BE(a), silu_mul) && !nb_needs_grad(2, in)) {
        y = nb_tensor_new(a->ndim, a->shape, a->dtype, a->storage->device);
        nb_kview vy, va = nb_kview_of(a), vb = nb_kview_of(b);
        if (y) vy = nb_kview_of(y);
        if (y && nb_kernel_silu_mul(NB_BE(a), &vy, &va, &vb) != NB_OK) y = NULL;
    } else
        y = nb_mul(nb_silu(a), b);
    return nb_scope_return(s, y);
}
