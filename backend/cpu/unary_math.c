/* unary_math.c - CPU loops of the unary math functions and activations
 * (NB_UNARY_ABS .. NB_UNARY_LOGSIGMOID) and of their backward rules; the
 * unary/unary_backward entry points in unary.c dispatch here. Forward
 * formulas are those of PyTorch's CPU kernels (aten/src/ATen/native/cpu/
 * UnaryOpsKernel.cpp, Activation.cpp), evaluated in the tensor's dtype;
 * backward rules follow tools/autograd/derivatives.yaml and the *_backward
 * kernels there, including their values at kinks and for NaN (e.g. abs: grad
 * * sgn(x), 0 at 0; elu: the negative branch at x <= 0; hardtanh: 0 at both
 * ends). Rounding ops have zero gradient. The exp-based float32
 * activations (elu, selu, silu, mish, softplus, logsigmoid, forward and
 * backward) run 4 lanes at a time on vexp (unary_loops.h) and the vexpm1 /
 * vlog below, within a few ulp of libm (PyTorch vectorises them likewise);
 * the math functions call libm per element (float64, which gradcheck uses,
 * is libm throughout). */
#include <math.h>
#include <stdbool.h>
#include <tgmath.h>

#include "cpu_common.h"
#include "nb_impl.h"
#include "unary_loops.h"

/* SELU's constants (Klambauer et al. 2017; torch.nn.SELU). */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* sign as PyTorch's (0 < x) - (x < 0): sign(-0) = +0, sign(NaN) = 0. */
#define SGN(x) ((0 < (x)) - ((x) < 0))
/* min(max(x + 3, 0), 6) with std::max/std::min's NaN behaviour (NaN stays). */
#define R63(x) ((x) + 3 < 0 ? 0 : (x) + 3 > 6 ? 6 : (x) + 3)

/* float64 helpers that need a temporary (float32 has vector forms below). */
#define HELPERS(T, S)                                                                           \
    static inline T silu_grad_##S(T x) {                                                        \
        T s = 1 / (1 + exp(-x));                                                                \
        return s * (1 + x * (1 - s));                                                           \
    }                                                                                           \
    static inline T mish_grad_##S(T x) {                                                        \
        T t = tanh(log1p(exp(x))), s = 1 / (1 + exp(-x));                                     \
        return t + x * s * (1 - t * t);                                                         \
    }                                                                                           \
    static inline T softplus_grad_##S(T x, T th) {                                              \
        T z = exp(x);                                                                           \
        return x > th ? 1 : z / (z + 1);                                                        \
    }                                                                                           \
    static inline T logsigmoid_grad_##S(T x) {                                                  \
        T z = exp(-fabs(x)), q = z / (1 + z);                                                   \
        return x < 0 ? 1 - q : q;                                                               \
    }
HELPERS(double, f64)

/* ---- float32 vector forms ------------------------------------------------ */

static inline vf vsilu(vf x) { return x / (vexp(-x) + 1.0f); }
static inline vf vsilu_grad(vf x) {
    vf s = 1.0f / (vexp(-x) + 1.0f);
    return s * (1.0f + x * (1.0f - s));
}
/* tanh(log(1 + e)) = n / (n + 2) with n = e (e + 2), e = e^x (exact algebra,
 * no cancellation for x < 0); 1 above x = 20, where n would overflow. */
static inline vf vtanh_softplus(vf e, vf x) {
    vf n = e * (e + 2.0f);
    return vsel(x > 20.0f, (vf){0} + 1.0f, n / (n + 2.0f));
}
static inline vf vmish(vf x) { return x * vtanh_softplus(vexp(x), x); }
static inline vf vmish_grad(vf x) {
    vf e = vexp(x), t = vtanh_softplus(e, x), s = 1.0f / (vexp(-x) + 1.0f); /* not e / (e + 1): inf / inf above x = 88.7 */
    return t + x * s * (1.0f - t * t);
}
static inline vf vbcast(float c) { return (vf){0} + c; }
/* e^x - 1: Taylor to x^7 for |x| < 0.35 (truncation < 2e-8 relative, and
 * x + x (x q) keeps -0), else vexp(x) - 1 (cancellation costs < 2 ulp). */
static inline vf vexpm1(vf x) {
    vf q = x * (1.0f / 5040) + (1.0f / 720);
    q = q * x + (1.0f / 120);
    q = q * x + (1.0f / 24);
    q = q * x + (1.0f / 6);
    q = q * x + 0.5f;
    vf ax = (vf)((vi)x & 0x7fffffff);
    return vsel(ax < 0.35f, x + x * (x * q), vexp(x) - 1.0f);
}
/* log(w) for positive normal w (NaN passes), by Cephes' logf: w = m 2^e
 * with m in [sqrt(1/2), sqrt 2), degree-8 polynomial in m - 1. */
static inline vf vlog(vf w) {
    vi bits = (vi)w;
    vf e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, vf);
    vf m = (vf)((bits & 0x807fffff) | 0x3f000000); /* [0.5, 1) */
    vi small = m < 0.70710678118654752f;
    e = vsel(small, e - 1.0f, e);
    m = vsel(small, m + m, m) - 1.0f;
    vf z = m * m;
    vf y = m * 7.0376836292e-2f - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z + e * -2.12194440e-4f - 0.5f * z;
    return m + y + e * 0.693359375f;
}
/* log(1 + u) for u in [0, 1] (NaN passes): log(w) u / (w - 1) with w = 1 + u
 * corrects w's rounding (Goldberg 1991), so tiny u keep their relative accuracy. */
static inline vf vlog1p01(vf u) {
    vf w = u + 1.0f;
    return vsel(w == 1.0f, u, vlog(w) * (u / (w - 1.0f)));
}
static inline vf vabs(vf x) { return (vf)((vi)x & 0x7fffffff); }
static inline vf vmax0(vf x) { return vsel(x > 0.0f, x, vbcast(0)); }
static inline vf vmin0(vf x) { return vsel(x > 0.0f, vbcast(0), x); } /* NaN stays */

VF_LOOP(silu_f32, vsilu, 0)
VF_LOOP(silu_bw_f32, vsilu_grad, 1)
VF_LOOP(mish_f32, vmish, 0)
VF_LOOP(mish_bw_f32, vmish_grad, 1)
VF_LOOP_EXPR(elu_f32, 0, vsel(x <= 0.0f, vexpm1(x) * a, x))
VF_LOOP_EXPR(elu_bw_f32, 1, vsel(x > 0.0f, vbcast(1), vexp(x) * a)) /* NaN gives NaN, as PyTorch */
#define SELU_NEG_F ((float)SELU_ALPHA * (float)SELU_SCALE)
VF_LOOP_EXPR(selu_f32, 0, vsel(x <= 0.0f, vexpm1(x) * SELU_NEG_F, x * (float)SELU_SCALE))
VF_LOOP_EXPR(selu_bw_f32, 1, vsel(x > 0.0f, vbcast((float)SELU_SCALE), vexp(x) * SELU_NEG_F))
/* softplus = max(x, 0) + log1p(e^-|x|) (the same value as log1p(e^x), no overflow) */
VF_LOOP_EXPR(softplus_f32, 0, vsel(x > a, x, vmax0(x) + vlog1p01(vexp(-vabs(x)))))
VF_LOOP_EXPR(softplus_bw_f32, 1, vsel(x > a, vbcast(1), 1.0f / (vexp(-x) + 1.0f)))
VF_LOOP_EXPR(logsigmoid_f32, 0, vmin0(x) - vlog1p01(vexp(-vabs(x))))
static inline vf vlogsigmoid_grad(vf x) {
    vf z = vexp(-vabs(x)), q = z / (z + 1.0f);
    return vsel(x < 0.0f, 1.0f - q, q);
}
VF_LOOP(logsigmoid_bw_f32, vlogsigmoid_grad, 1)
/* piecewise-linear ones: selects are exact, and masked gradients are a true 0 */
VF_LOOP_EXPR(leaky_relu_f32, 0, vsel(x > 0.0f, x, x * a))
VF_LOOP_EXPR(leaky_relu_bw_f32, 1, vsel(x > 0.0f, vbcast(1), vbcast(a)))
static inline vf vr63(vf x) {
    vf t = x + 3.0f;
    t = vsel(t < 0.0f, vbcast(0), t);
    return vsel(t > 6.0f, vbcast(6), t);
}
VF_LOOP_EXPR(hardsigmoid_f32, 0, vr63(x) / 6.0f)
VF_LOOP_EXPR(hardswish_f32, 0, x * vr63(x) / 6.0f)
VF_LOOP_OUT(hardsigmoid_bw_f32, 1, vsel((x > -3.0f) & (x < 3.0f), g * (float)(1.0 / 6), vbcast(0)))
/* at x = 3 the gradient is 1.5 g, aten's hardswish_backward formula (PyTorch 1.13's vectorized
 * kernel says g there); NaN gives NaN */
VF_LOOP_OUT(hardswish_bw_f32, 1, vsel(x < -3.0f, vbcast(0), vsel(x > 3.0f, g, g * (x / 3.0f + 0.5f))))
/* NaN gives 0, as PyTorch's hardtanh_backward (g where min < x < max) */
VF_LOOP_OUT(hardtanh_min_bw_f32, 1, vsel(x > a, g, vbcast(0)))
VF_LOOP_OUT(hardtanh_max_bw_f32, 1, vsel(x < a, g, vbcast(0)))

/* ---- forward ------------------------------------------------------------- */

/* round(x, decimals = a) as PyTorch's round_decimals_kernel (10^|d| in T). */
#define ROUND_PRE(T)                                                                            \
    const bool neg_ = a < 0;                                                                    \
    const T p_ = (T)pow(10.0, neg_ ? -(double)a : (double)a)
#define ROUND_EXPR (a == 0 ? rint(x) : neg_ ? rint(x / p_) * p_ : rint(x * p_) / p_)

#define FLOAT_MATH(T, S)                                                                        \
    UN_LOOP(abs_##S, T, fabs(x))                                                                \
    UN_LOOP(sign_##S, T, SGN(x))                                                                \
    UN_LOOP(floor_##S, T, floor(x))                                                             \
    UN_LOOP(ceil_##S, T, ceil(x))                                                               \
    UN_LOOP_PRE(round_##S, T, ROUND_PRE(T), ROUND_EXPR)                                         \
    UN_LOOP(trunc_##S, T, trunc(x))                                                             \
    UN_LOOP(reciprocal_##S, T, 1 / x)                                                           \
    UN_LOOP(rsqrt_##S, T, 1 / sqrt(x))                                                          \
    UN_LOOP(log1p_##S, T, log1p(x))                                                             \
    UN_LOOP(expm1_##S, T, expm1(x))                                                             \
    UN_LOOP(log2_##S, T, log2(x))                                                               \
    UN_LOOP(log10_##S, T, log10(x))                                                             \
    UN_LOOP(sin_##S, T, sin(x))                                                                 \
    UN_LOOP(cos_##S, T, cos(x))                                                                 \
    UN_LOOP(tan_##S, T, tan(x))                                                                 \
    UN_LOOP(asin_##S, T, asin(x))                                                               \
    UN_LOOP(acos_##S, T, acos(x))                                                               \
    UN_LOOP(atan_##S, T, atan(x))                                                               \
    UN_LOOP(sinh_##S, T, sinh(x))                                                               \
    UN_LOOP(cosh_##S, T, cosh(x))                                                               \
    UN_LOOP(asinh_##S, T, asinh(x))                                                             \
    UN_LOOP(acosh_##S, T, acosh(x))                                                             \
    UN_LOOP(atanh_##S, T, atanh(x))                                                             \
    UN_LOOP(erf_##S, T, erf(x))                                                                 \
    UN_LOOP(erfc_##S, T, erfc(x))                                                               \
    UN_LOOP(hardtanh_min_##S, T, x < a ? a : x)                                                 \
    UN_LOOP(hardtanh_max_##S, T, x > a ? a : x)
FLOAT_MATH(float, f32)
FLOAT_MATH(double, f64)
/* float64 forms of the activations whose float32 loops are the vector code above */
UN_LOOP(elu_f64, double, x <= 0 ? expm1(x) * a : x)
UN_LOOP(selu_f64, double, x <= 0 ? expm1(x) * (SELU_ALPHA * SELU_SCALE) : x * SELU_SCALE)
UN_LOOP(silu_f64, double, x / (1 + exp(-x)))
UN_LOOP(mish_f64, double, x * tanh(log1p(exp(x))))
UN_LOOP(softplus_f64, double, x > a ? x : log1p(exp(x)))
UN_LOOP(logsigmoid_f64, double, (0 < x ? 0 : x) - log1p(exp(-fabs(x))))
UN_LOOP(leaky_relu_f64, double, x > 0 ? x : x * a)
UN_LOOP(hardsigmoid_f64, double, R63(x) / 6)
UN_LOOP(hardswish_f64, double, x * R63(x) / 6)

/* Integers: abs wraps at the minimum (as PyTorch); the rounding ops are the identity. */
#define INT_MATH(T, UT, S)                                                                      \
    UN_LOOP(abs_##S, T, x < 0 ? (T)(0 - (UT)x) : x)                                             \
    UN_LOOP(sign_##S, T, SGN(x))                                                                \
    UN_LOOP(ident_##S, T, x)
INT_MATH(int32_t, uint32_t, i32)
INT_MATH(int64_t, uint64_t, i64)
UN_LOOP(abs_u8, uint8_t, x)
UN_LOOP(sign_u8, uint8_t, x > 0)
UN_LOOP(ident_u8, uint8_t, x)
#define ROUNDING(OP)                                                                            \
    {[NB_F32] = OP##_f32, [NB_F64] = OP##_f64, [NB_I32] = ident_i32, [NB_I64] = ident_i64,     \
     [NB_U8] = ident_u8}

/* ---- backward: gx = EXPR(g, v; a) ------------------------------------------ */

#define FLOAT_MATH_BW(T, S)                                                                     \
    UB_LOOP(zero_bw_##S, T, 0)                                                                  \
    UB_LOOP(abs_bw_##S, T, g * SGN(v))                                                          \
    UB_LOOP(reciprocal_bw_##S, T, -g * (v * v))                                                 \
    UB_LOOP(rsqrt_bw_##S, T, (T)-0.5 * g * (v * v * v))                                         \
    UB_LOOP(log1p_bw_##S, T, g / (v + 1))                                                       \
    UB_LOOP(expm1_bw_##S, T, g * (v + 1))                                                       \
    UB_LOOP(log2_bw_##S, T, g / v * (T)M_LOG2E) /* not g / (v ln 2): v ln 2 flushes near FLT_MIN */ \
    UB_LOOP(log10_bw_##S, T, g / (v * (T)M_LN10))                                               \
    UB_LOOP(sin_bw_##S, T, g * cos(v))                                                          \
    UB_LOOP(cos_bw_##S, T, g * -sin(v))                                                         \
    UB_LOOP(tan_bw_##S, T, g * (1 + v * v))                                                     \
    UB_LOOP(asin_bw_##S, T, g * (1 / sqrt(1 - v * v)))                                          \
    UB_LOOP(acos_bw_##S, T, g * -(1 / sqrt(1 - v * v)))                                         \
    UB_LOOP(atan_bw_##S, T, g / (v * v + 1))                                                    \
    UB_LOOP(sinh_bw_##S, T, g * cosh(v))                                                        \
    UB_LOOP(cosh_bw_##S, T, g * sinh(v))                                                        \
    UB_LOOP(asinh_bw_##S, T, g * (1 / sqrt(v * v + 1)))                                         \
    UB_LOOP(acosh_bw_##S, T, g * (1 / sqrt(v * v - 1)))                                         \
    UB_LOOP(atanh_bw_##S, T, g / (1 - v * v))                                                   \
    UB_LOOP(erf_bw_##S, T, (T)M_2_SQRTPI * exp(-(v * v)) * g)                                   \
    UB_LOOP(erfc_bw_##S, T, (T)-M_2_SQRTPI * exp(-(v * v)) * g)
FLOAT_MATH_BW(float, f32)
FLOAT_MATH_BW(double, f64)
UB_LOOP(elu_bw_f64, double, v > 0 ? g : g * a * exp(v))
UB_LOOP(selu_bw_f64, double, v > 0 ? g * SELU_SCALE : g * (SELU_ALPHA * SELU_SCALE) * exp(v))
UB_LOOP(softplus_bw_f64, double, g * softplus_grad_f64(v, a))
UB_LOOP(logsigmoid_bw_f64, double, g * logsigmoid_grad_f64(v))
UB_LOOP(leaky_relu_bw_f64, double, v > 0 ? g : g * a)
UB_LOOP(hardtanh_min_bw_f64, double, v > a ? g : 0)
UB_LOOP(hardtanh_max_bw_f64, double, v < a ? g : 0)
UB_LOOP(hardsigmoid_bw_f64, double, v > -3 && v < 3 ? g * (1.0 / 6) : 0)
UB_LOOP(hardswish_bw_f64, double, v < -3 ? 0 : v > 3 ? g : g * (v / 3 + 0.5))
UB_LOOP(silu_bw_f64, double, g * silu_grad_f64(v))
UB_LOOP(mish_bw_f64, double, g * mish_grad_f64(v))

/* ---- tables ---------------------------------------------------------------- */

#define RULE(OP) {OP##_bw_f32, OP##_bw_f64}
#define ZERO_RULE {zero_bw_f32, zero_bw_f64}
#define FIRST NB_UNARY_ABS
#define N_MATH (NB_UNARY_OP_COUNT - FIRST)

static const struct {
    nb_cpu_loop_fn fwd[NB_DTYPE_COUNT];
    nb_cpu_unary_rule bw;
} math_ops[N_MATH] = {
    [NB_UNARY_ABS - FIRST] = {{[NB_F32] = abs_f32, [NB_F64] = abs_f64, [NB_I32] = abs_i32, [NB_I64] = abs_i64, [NB_U8] = abs_u8}, RULE(abs)},
    [NB_UNARY_SIGN - FIRST] = {{[NB_F32] = sign_f32, [NB_F64] = sign_f64, [NB_I32] = sign_i32, [NB_I64] = sign_i64, [NB_U8] = sign_u8}, ZERO_RULE},
    [NB_UNARY_FLOOR - FIRST] = {ROUNDING(floor), ZERO_RULE},
    [NB_UNARY_CEIL - FIRST] = {ROUNDING(ceil), ZERO_RULE},
    [NB_UNARY_ROUND - FIRST] = {ROUNDING(round), ZERO_RULE},
    [NB_UNARY_TRUNC - FIRST] = {ROUNDING(trunc), ZERO_RULE},
    [NB_UNARY_RECIPROCAL - FIRST] = {FLOATS(reciprocal), RULE(reciprocal)},
    [NB_UNARY_RSQRT - FIRST] = {FLOATS(rsqrt), RULE(rsqrt)},
    [NB_UNARY_LOG1P - FIRST] = {FLOATS(log1p), RULE(log1p)},
    [NB_UNARY_EXPM1 - FIRST] = {FLOATS(expm1), RULE(expm1)},
    [NB_UNARY_LOG2 - FIRST] = {FLOATS(log2), RULE(log2)},
    [NB_UNARY_LOG10 - FIRST] = {FLOATS(log10), RULE(log10)},
    [NB_UNARY_SIN - FIRST] = {FLOATS(sin), RULE(sin)},
    [NB_UNARY_COS - FIRST] = {FLOATS(cos), RULE(cos)},
    [NB_UNARY_TAN - FIRST] = {FLOATS(tan), RULE(tan)},
    [NB_UNARY_ASIN - FIRST] = {FLOATS(asin), RULE(asin)},
    [NB_UNARY_ACOS - FIRST] = {FLOATS(acos), RULE(acos)},
    [NB_UNARY_ATAN - FIRST] = {FLOATS(atan), RULE(atan)},
    [NB_UNARY_SINH - FIRST] = {FLOATS(sinh), RULE(sinh)},
    [NB_UNARY_COSH - FIRST] = {FLOATS(cosh), RULE(cosh)},
    [NB_UNARY_ASINH - FIRST] = {FLOATS(asinh), RULE(asinh)},
    [NB_UNARY_ACOSH - FIRST] = {FLOATS(acosh), RULE(acosh)},
    [NB_UNARY_ATANH - FIRST] = {FLOATS(atanh), RULE(atanh)},
    [NB_UNARY_ERF - FIRST] = {FLOATS(erf), RULE(erf)},
    [NB_UNARY_ERFC - FIRST] = {FLOATS(erfc), RULE(erfc)},
    [NB_UNARY_LEAKY_RELU - FIRST] = {FLOATS(leaky_relu), RULE(leaky_relu)},
    [NB_UNARY_ELU - FIRST] = {FLOATS(elu), RULE(elu)},
    [NB_UNARY_SELU - FIRST] = {FLOATS(selu), RULE(selu)},
    [NB_UNARY_SILU - FIRST] = {FLOATS(silu), RULE(silu)},
    [NB_UNARY_MISH - FIRST] = {FLOATS(mish), RULE(mish)},
    [NB_UNARY_SOFTPLUS - FIRST] = {FLOATS(softplus), RULE(softplus)},
    [NB_UNARY_HARDTANH_MIN - FIRST] = {FLOATS(hardtanh_min), RULE(hardtanh_min)},
    [NB_UNARY_HARDTANH_MAX - FIRST] = {FLOATS(hardtanh_max), RULE(hardtanh_max)},
    [NB_UNARY_HARDSIGMOID - FIRST] = {FLOATS(hardsigmoid), RULE(hardsigmoid)},
    [NB_UNARY_HARDSWISH - FIRST] = {FLOATS(hardswish), RULE(hardswish)},
    [NB_UNARY_LOGSIGMOID - FIRST] = {FLOATS(logsigmoid), RULE(logsigmoid)},
};

static bool is_math(nb_unary_op op) { return op >= FIRST && op < NB_UNARY_OP_COUNT; }

nb_cpu_loop_fn nb_cpu_unary_math_loop(nb_unary_op op, nb_dtype dt) {
    return is_math(op) && (unsigned)dt < NB_DTYPE_COUNT ? math_ops[op - FIRST].fwd[dt] : NULL;
}

nb_cpu_unary_rule nb_cpu_unary_math_rule(nb_unary_op op) {
    return is_math(op) ? math_ops[op - FIRST].bw : (nb_cpu_unary_rule){NULL, NULL};
}
