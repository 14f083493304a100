/* unary_math.c - the CPU's float32 and float64 loops of every unary op,
 * forward and backward rule; unary.c's entry points dispatch here (and to
 * its integer loops). Every formula is nb_scalar_math.h's (the one the CUDA
 * backend runs): a loop per (op, dtype) is generated from the NB_UNARY_OPS
 * list with the op a constant, so the formula's switch folds to its one
 * expression and simple ops vectorise. float64 (which gradcheck uses) runs
 * those formulas throughout, on libm. The float32 activations built on exp
 * (gelu, gelu_tanh, elu, selu, silu, mish, softplus, logsigmoid, forward
 * and backward) and the piecewise-linear ones run the same algebra 4 to 16
 * lanes at a time in GCC vector code instead (vexp in unary_loops.h and
 * vexpm1 / vlog below, within a few ulp of libm; libm's expf does not
 * vectorise, and PyTorch vectorises them likewise). */
#include <math.h>
#include <stdbool.h>

#include "cpu_common.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "unary_loops.h"

/* SELU's factors in float, as nb_sm_selu_neg_f32 rounds them */
#define SELU_NEG_F ((float)NB_SM_SELU_ALPHA * (float)NB_SM_SELU_SCALE)
#define SELU_SCALE_F ((float)NB_SM_SELU_SCALE)

/* ---- the scalar formulas, one loop per (op, dtype) ---------------------------- */

/* fwd_<ID>_<S>, bw_<ID>_<S> and square_<S> for float and double */
#define NB_UN_INT 0
#define NB_TEMPLATE "unary.t.h"
#include "template_floats.h"
#undef NB_UN_INT

static const struct {
    nb_cpu_loop_fn fwd[2]; /* float32, float64 */
    nb_cpu_unary_rule bw;
} sm_loops[NB_UNARY_OP_COUNT] = {
#define SM_ROW(id, name, saved, api) [NB_UNARY_##id] = {{fwd_##id##_f32, fwd_##id##_f64}, {bw_##id##_f32, bw_##id##_f64}},
    NB_UNARY_OPS(SM_ROW)
#undef SM_ROW
};

/* ---- float32 vector forms (the exp-based activations) ------------------------------------------------ */

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

static inline vf silu_v(vf x, vf g, float a) { (void)g, (void)a; return vsilu(x); }
static void silu_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, silu_v);
}
static inline vf silu_bw_v(vf x, vf g, float a) { (void)a; return g * vsilu_grad(x); }
static void silu_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, silu_bw_v);
}
static inline vf mish_v(vf x, vf g, float a) { (void)g, (void)a; return vmish(x); }
static void mish_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, mish_v);
}
static inline vf mish_bw_v(vf x, vf g, float a) { (void)a; return g * vmish_grad(x); }
static void mish_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, mish_bw_v);
}
static inline vf elu_v(vf x, vf g, float a) { (void)g; return vsel(x <= 0.0f, vexpm1(x) * a, x); }
static void elu_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, elu_v);
}
/* NaN gives NaN, as PyTorch */
static inline vf elu_bw_v(vf x, vf g, float a) { return g * (vsel(x > 0.0f, vbcast(1), vexp(x) * a)); }
static void elu_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, elu_bw_v);
}
static inline vf selu_v(vf x, vf g, float a) {
    (void)g, (void)a;
    return vsel(x <= 0.0f, vexpm1(x) * SELU_NEG_F, x * SELU_SCALE_F);
}
static void selu_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, selu_v);
}
static inline vf selu_bw_v(vf x, vf g, float a) {
    (void)a;
    return g * (vsel(x > 0.0f, vbcast(SELU_SCALE_F), vexp(x) * SELU_NEG_F));
}
static void selu_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, selu_bw_v);
}
/* softplus = max(x, 0) + log1p(e^-|x|) (the same value as log1p(e^x), no overflow) */
static inline vf softplus_v(vf x, vf g, float a) {
    (void)g;
    return vsel(x > a, x, vmax0(x) + vlog1p01(vexp(-vabs(x))));
}
static void softplus_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, softplus_v);
}
static inline vf softplus_bw_v(vf x, vf g, float a) {
    return g * (vsel(x > a, vbcast(1), 1.0f / (vexp(-x) + 1.0f)));
}
static void softplus_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, softplus_bw_v);
}
static inline vf logsigmoid_v(vf x, vf g, float a) {
    (void)g, (void)a;
    return vmin0(x) - vlog1p01(vexp(-vabs(x)));
}
static void logsigmoid_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, logsigmoid_v);
}
static inline vf vlogsigmoid_grad(vf x) {
    vf z = vexp(-vabs(x)), q = z / (z + 1.0f);
    return vsel(x < 0.0f, 1.0f - q, q);
}
static inline vf logsigmoid_bw_v(vf x, vf g, float a) { (void)a; return g * vlogsigmoid_grad(x); }
static void logsigmoid_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, logsigmoid_bw_v);
}
/* piecewise-linear ones: selects are exact, and masked gradients are a true 0 */
static inline vf leaky_relu_v(vf x, vf g, float a) { (void)g; return vsel(x > 0.0f, x, x * a); }
static void leaky_relu_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, leaky_relu_v);
}
static inline vf leaky_relu_bw_v(vf x, vf g, float a) { return g * (vsel(x > 0.0f, vbcast(1), vbcast(a))); }
static void leaky_relu_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, leaky_relu_bw_v);
}
static inline vf vr63(vf x) {
    vf t = x + 3.0f;
    t = vsel(t < 0.0f, vbcast(0), t);
    return vsel(t > 6.0f, vbcast(6), t);
}
static inline vf hardsigmoid_v(vf x, vf g, float a) { (void)g, (void)a; return vr63(x) / 6.0f; }
static void hardsigmoid_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, hardsigmoid_v);
}
static inline vf hardswish_v(vf x, vf g, float a) { (void)g, (void)a; return x * vr63(x) / 6.0f; }
static void hardswish_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, hardswish_v);
}
static inline vf hardsigmoid_bw_v(vf x, vf g, float a) {
    (void)a;
    return vsel((x > -3.0f) & (x < 3.0f), g * (float)(1.0 / 6), vbcast(0));
}
static void hardsigmoid_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, hardsigmoid_bw_v);
}
/* at x = 3 the gradient is 1.5 g, aten's hardswish_backward formula (PyTorch 1.13's vectorized
 * kernel says g there); NaN gives NaN */
static inline vf hardswish_bw_v(vf x, vf g, float a) {
    (void)a;
    return vsel(x < -3.0f, vbcast(0), vsel(x > 3.0f, g, g * (x / 3.0f + 0.5f)));
}
static void hardswish_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, hardswish_bw_v);
}
/* NaN gives 0, as PyTorch's hardtanh_backward (g where min < x < max) */
static inline vf hardtanh_min_bw_v(vf x, vf g, float a) { return vsel(x > a, g, vbcast(0)); }
static void hardtanh_min_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, hardtanh_min_bw_v);
}
static inline vf hardtanh_max_bw_v(vf x, vf g, float a) { return vsel(x < a, g, vbcast(0)); }
static void hardtanh_max_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, hardtanh_max_bw_v);
}

/* GELU (nb_sm_gelu_f32 and kin give the formulas): libm's erff/tanhf made
 * GELU the slowest op of a BERT step. Phi comes from erfc by Numerical
 * Recipes' Chebyshev fit (erfcc, fractional error < 1.2e-7, so the negative
 * tail keeps its relative accuracy); 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)). */
/* Phi(x) = 1 - erfc(x / sqrt 2) / 2 (x >= 0), erfc(-x / sqrt 2) / 2 (x < 0). */
static inline vf vphi(vf x) {
    vf z = (vf)((vi)x & 0x7fffffff) * 0.70710678118654752440f, t = 1.0f / (z * 0.5f + 1.0f);
    vf q = t * 0.17087277f - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    vf half = t * vexp(q - z * z) * 0.5f;
    return vsel(x >= 0.0f, 1.0f - half, half);
}
static inline vf vgelu(vf x) { return x * vphi(x); }
static inline vf vgelu_grad(vf x) { return vphi(x) + x * (vexp(x * x * -0.5f) * 0.39894228040143267794f); }
/* s = 0.5 (1 + tanh(u)) = sigmoid(2u); 1 - tanh(u)^2 = 4 s (1 - s). */
static inline vf vgelu_tanh(vf x) {
    vf u = (x + x * x * x * 0.044715f) * 0.79788456080286535588f;
    return x / (vexp(u * -2.0f) + 1.0f);
}
static inline vf vgelu_tanh_grad(vf x) {
    const float k = 0.79788456080286535588f, c = 0.044715f;
    vf x2 = x * x, s = 1.0f / (vexp((x + x2 * x * c) * (-2.0f * k)) + 1.0f);
    return s + x * s * (1.0f - s) * ((x2 * (3.0f * c) + 1.0f) * (2.0f * k));
}

static inline vf gelu_v(vf x, vf g, float a) { (void)g, (void)a; return vgelu(x); }
static void gelu_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, gelu_v);
}
static inline vf gelu_tanh_v(vf x, vf g, float a) { (void)g, (void)a; return vgelu_tanh(x); }
static void gelu_tanh_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 0, gelu_tanh_v);
}
static inline vf gelu_bw_v(vf x, vf g, float a) { (void)a; return g * vgelu_grad(x); }
static void gelu_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, gelu_bw_v);
}
static inline vf gelu_tanh_bw_v(vf x, vf g, float a) { (void)a; return g * vgelu_tanh_grad(x); }
static void gelu_tanh_bw_f32(char **p, const int64_t *s, int64_t n, const void *ctx) {
    nb_vf_loop(p, s, n, ctx, 1, gelu_tanh_bw_v);
}

/* ---- float32 vector loops, in place of the scalar ones ------------------------ */

static const nb_cpu_loop_fn vec_fwd[NB_UNARY_OP_COUNT] = {
    [NB_UNARY_GELU] = gelu_f32, [NB_UNARY_GELU_TANH] = gelu_tanh_f32, [NB_UNARY_SILU] = silu_f32,
    [NB_UNARY_MISH] = mish_f32, [NB_UNARY_ELU] = elu_f32, [NB_UNARY_SELU] = selu_f32,
    [NB_UNARY_SOFTPLUS] = softplus_f32, [NB_UNARY_LOGSIGMOID] = logsigmoid_f32,
    [NB_UNARY_LEAKY_RELU] = leaky_relu_f32, [NB_UNARY_HARDSIGMOID] = hardsigmoid_f32,
    [NB_UNARY_HARDSWISH] = hardswish_f32,
};
static const nb_cpu_loop_fn vec_bw[NB_UNARY_OP_COUNT] = {
    [NB_UNARY_GELU] = gelu_bw_f32, [NB_UNARY_GELU_TANH] = gelu_tanh_bw_f32, [NB_UNARY_SILU] = silu_bw_f32,
    [NB_UNARY_MISH] = mish_bw_f32, [NB_UNARY_ELU] = elu_bw_f32, [NB_UNARY_SELU] = selu_bw_f32,
    [NB_UNARY_SOFTPLUS] = softplus_bw_f32, [NB_UNARY_LOGSIGMOID] = logsigmoid_bw_f32,
    [NB_UNARY_LEAKY_RELU] = leaky_relu_bw_f32, [NB_UNARY_HARDSIGMOID] = hardsigmoid_bw_f32,
    [NB_UNARY_HARDSWISH] = hardswish_bw_f32, [NB_UNARY_HARDTANH_MIN] = hardtanh_min_bw_f32,
    [NB_UNARY_HARDTANH_MAX] = hardtanh_max_bw_f32,
};

nb_cpu_loop_fn nb_cpu_unary_float_loop(nb_unary_op op, nb_dtype dt, double alpha) {
    if ((unsigned)op >= NB_UNARY_OP_COUNT || (dt != NB_F32 && dt != NB_F64)) return NULL;
    if (op == NB_UNARY_POW_SCALAR && alpha == 2.0) return dt == NB_F32 ? square_f32 : square_f64;
    if (dt == NB_F32 && vec_fwd[op]) return vec_fwd[op];
    return sm_loops[op].fwd[dt == NB_F64];
}

nb_cpu_unary_rule nb_cpu_unary_float_rule(nb_unary_op op) {
    if ((unsigned)op >= NB_UNARY_OP_COUNT) return (nb_cpu_unary_rule){NULL, NULL};
    nb_cpu_unary_rule r = sm_loops[op].bw;
    if (vec_bw[op]) r.f32 = vec_bw[op];
    return r;
}
