/* test_ops_unary.c - the unary ops of nb_ops.h (neg .. tanh, the math
 * functions, activations, gelu) and their nn modules: forwards by hand and
 * against libm, float32 forwards against float64 references, PyTorch's gelu
 * values, special values (half-to-even rounding, signed zeros, NaN,
 * infinities), integer abs/sign/rounding, gradients by hand at the kinks
 * (PyTorch's conventions), a float64 gradcheck of every differentiable op,
 * the float32 vector paths (long, odd-length and strided inputs) and error
 * paths. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

typedef nb_tensor *(*op1_fn)(nb_tensor *);

/* Element-by-element identity of doubles: equal (with the sign of zero), or both NaN. */
static void ck_exact(const nb_tensor *t, const double *expected, int64_t n) {
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_numel(t), n);
    double got[64];
    ck_assert_int_le(n, 64);
    nb_test_values(t, got, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg((isnan(got[i]) && isnan(expected[i])) ||
                          (got[i] == expected[i] && signbit(got[i]) == signbit(expected[i])),
                      "element %lld: got %.17g, expected %.17g", (long long)i, got[i], expected[i]);
}

static nb_tensor *vec(nb_dtype dt, int64_t n, const double *v) {
    nb_tensor *t = nb_test_tensor(1, (int64_t[]){n}, dt, v);
    NB_CK_NOTNULL(t);
    return t;
}

/* ---- rounding, abs, sign ------------------------------------------------------------------ */

START_TEST(test_rounding) {
    nb_scope *s = nb_scope_begin();
    const double x[10] = {2.5, -0.5, 0.5, 1.5, -2.5, -1.7, 1.2, -0.0, NAN, INFINITY};
    for (int d = 0; d < 2; d++) {
        nb_tensor *t = vec(d ? NB_F32 : NB_F64, 10, x);
        ck_exact(nb_round(t), (double[]){2, -0.0, 0, 2, -2, -2, 1, -0.0, NAN, INFINITY}, 10);
        ck_exact(nb_floor(t), (double[]){2, -1, 0, 1, -3, -2, 1, -0.0, NAN, INFINITY}, 10);
        ck_exact(nb_ceil(t), (double[]){3, -0.0, 1, 2, -2, -1, 2, -0.0, NAN, INFINITY}, 10);
        ck_exact(nb_trunc(t), (double[]){2, -0.0, 0, 1, -2, -1, 1, -0.0, NAN, INFINITY}, 10);
        ck_assert_int_eq(nb_dtype_of(nb_round(t)), d ? NB_F32 : NB_F64);
    }
    /* decimals, as torch.round(x, decimals=d): half to even on the scaled value */
    nb_tensor *t = vec(NB_F64, 5, (double[]){1.2345, 0.125, -1250, 1234.5, -0.375});
    nb_ck_close(nb_round_decimals(t, 2), (double[]){1.23, 0.12, -1250, 1234.5, -0.38}, 5, 0, 1e-15);
    nb_ck_close(nb_round_decimals(t, -2), (double[]){0, 0, -1200, 1200, -0.0}, 5, 0, 0);
    ck_exact(nb_round_decimals(t, 0), (double[]){1, 0, -1250, 1234, -0.0}, 5);
    nb_ck_close(nb_round_decimals(nb_to_dtype(t, NB_F32), 1), (double[]){1.2, 0.1, -1250, 1234.5, -0.4}, 5, 0, 1e-7);
    /* integer dtypes: the rounding ops are the identity */
    nb_tensor *i = vec(NB_I64, 3, (double[]){-7, 0, 12});
    ck_assert_int_eq(nb_dtype_of(nb_floor(i)), NB_I64);
    nb_ck_close(nb_floor(i), (double[]){-7, 0, 12}, 3, 0, 0);
    nb_ck_close(nb_round(vec(NB_I32, 2, (double[]){-3, 5})), (double[]){-3, 5}, 2, 0, 0);
    nb_ck_close(nb_ceil(vec(NB_U8, 2, (double[]){0, 255})), (double[]){0, 255}, 2, 0, 0);
    nb_ck_close(nb_trunc(i), (double[]){-7, 0, 12}, 3, 0, 0);
    nb_ck_close(nb_round_decimals(i, 0), (double[]){-7, 0, 12}, 3, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_abs_sign) {
    nb_scope *s = nb_scope_begin();
    const double x[7] = {-3.5, 0, -0.0, 2, NAN, -INFINITY, 1e-30};
    for (int d = 0; d < 2; d++) {
        nb_tensor *t = vec(d ? NB_F32 : NB_F64, 7, x);
        ck_exact(nb_abs(t), (double[]){3.5, 0, 0, 2, NAN, INFINITY, d ? (double)1e-30f : 1e-30}, 7);
        /* sign(0) = sign(-0) = sign(NaN) = 0, as PyTorch's (0 < x) - (x < 0) */
        ck_exact(nb_sign(t), (double[]){-1, 0, 0, 1, 0, -1, 1}, 7);
    }
    /* integers: abs of the minimum wraps, as PyTorch */
    int32_t v32[4] = {-5, 0, 7, INT32_MIN}, o32[4];
    nb_tensor *a32 = nb_from_data(v32, NB_SHAPE(4), NB_I32);
    NB_CK_OK(nb_to_host(nb_abs(a32), o32, sizeof o32));
    ck_assert(o32[0] == 5 && o32[1] == 0 && o32[2] == 7 && o32[3] == INT32_MIN);
    NB_CK_OK(nb_to_host(nb_sign(a32), o32, sizeof o32));
    ck_assert(o32[0] == -1 && o32[1] == 0 && o32[2] == 1 && o32[3] == -1);
    int64_t v64[3] = {-9007199254740993LL, 0, 4}, o64[3];
    nb_tensor *a64 = nb_from_data(v64, NB_SHAPE(3), NB_I64);
    ck_assert_int_eq(nb_dtype_of(nb_abs(a64)), NB_I64);
    NB_CK_OK(nb_to_host(nb_abs(a64), o64, sizeof o64));
    ck_assert(o64[0] == 9007199254740993LL && o64[1] == 0 && o64[2] == 4);
    NB_CK_OK(nb_to_host(nb_sign(a64), o64, sizeof o64));
    ck_assert(o64[0] == -1 && o64[1] == 0 && o64[2] == 1);
    nb_tensor *u = vec(NB_U8, 3, (double[]){0, 3, 255});
    nb_ck_close(nb_abs(u), (double[]){0, 3, 255}, 3, 0, 0);
    nb_ck_close(nb_sign(u), (double[]){0, 1, 1}, 3, 0, 0);
    /* neg keeps working on integers */
    nb_ck_close(nb_neg(vec(NB_I64, 2, (double[]){4, -2})), (double[]){-4, 2}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- math functions against libm ------------------------------------------------------------- */

static double ref_reciprocal(double x) { return 1 / x; }
static double ref_rsqrt(double x) { return 1 / sqrt(x); }

static const struct {
    const char *name;
    op1_fn op;
    double (*ref)(double);
    double lo, hi; /* inputs spread over [lo, hi] */
} math_cases[] = {
    {"reciprocal", nb_reciprocal, ref_reciprocal, 0.1, 7}, {"rsqrt", nb_rsqrt, ref_rsqrt, 0.01, 50},
    {"log1p", nb_log1p, log1p, -0.9, 5},  {"expm1", nb_expm1, expm1, -3, 3},
    {"log2", nb_log2, log2, 0.01, 100},   {"log10", nb_log10, log10, 0.01, 1000},
    {"sin", nb_sin, sin, -6, 6},          {"cos", nb_cos, cos, -6, 6},
    {"tan", nb_tan, tan, -1.4, 1.4},      {"asin", nb_asin, asin, -1, 1},
    {"acos", nb_acos, acos, -1, 1},       {"atan", nb_atan, atan, -20, 20},
    {"sinh", nb_sinh, sinh, -5, 5},       {"cosh", nb_cosh, cosh, -5, 5},
    {"asinh", nb_asinh, asinh, -30, 30},  {"acosh", nb_acosh, acosh, 1, 40},
    {"atanh", nb_atanh, atanh, -0.99, 0.99}, {"erf", nb_erf, erf, -3, 3},
    {"erfc", nb_erfc, erfc, -3, 5},
};
#define N_MATH (int)(sizeof math_cases / sizeof math_cases[0])

START_TEST(test_math_vs_libm) {
    nb_scope *s = nb_scope_begin();
    enum { N = 11 };
    for (int c = 0; c < N_MATH; c++) {
        double x[N], x32[N], want[N], want32[N];
        for (int i = 0; i < N; i++) {
            x[i] = math_cases[c].lo + (math_cases[c].hi - math_cases[c].lo) * i / (N - 1);
            x32[i] = (float)x[i];
            want[i] = math_cases[c].ref(x[i]);
            want32[i] = math_cases[c].ref(x32[i]);
        }
        nb_tensor *y = math_cases[c].op(vec(NB_F64, N, x));
        ck_assert_msg(y != NULL, "%s: %s", math_cases[c].name, nb_last_error());
        nb_ck_close(y, want, N, 1e-300, 1e-15); /* libm itself */
        nb_tensor *y32 = math_cases[c].op(vec(NB_F32, N, x32));
        ck_assert_int_eq(nb_dtype_of(y32), NB_F32);
        nb_ck_close(y32, want32, N, 1e-7, 1e-6);
        /* NaN in, NaN out */
        ck_assert_msg(isnan(nb_item(math_cases[c].op(nb_full(0, NULL, NAN, NB_F64)))), "%s(NaN)", math_cases[c].name);
    }
    /* special values */
    nb_tensor *z = vec(NB_F64, 3, (double[]){0, -0.0, -1});
    ck_exact(nb_reciprocal(z), (double[]){INFINITY, -INFINITY, -1}, 3);
    ck_exact(nb_log1p(z), (double[]){0, -0.0, -INFINITY}, 3);
    ck_exact(nb_expm1(vec(NB_F64, 2, (double[]){-0.0, -INFINITY})), (double[]){-0.0, -1}, 2);
    ck_assert(isnan(nb_item(nb_acosh(nb_full(0, NULL, 0.5, NB_F64)))));
    ck_assert(isnan(nb_item(nb_asin(nb_full(0, NULL, 1.5, NB_F32)))));
    ck_exact(nb_atanh(vec(NB_F64, 2, (double[]){1, -1})), (double[]){INFINITY, -INFINITY}, 2);
    nb_ck_close(nb_log1p(nb_full(0, NULL, 1e-10, NB_F32)), (double[]){1e-10 - 5e-21}, 1, 0, 1e-6);
    nb_ck_close(nb_expm1(nb_full(0, NULL, 1e-10, NB_F64)), (double[]){1.00000000005e-10}, 1, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

/* ---- activations -------------------------------------------------------------------------------- */

#define SELU_A 1.6732632423543772848170429916717
#define SELU_S 1.0507009873554804934193349852946
static double r_leaky(double x) { return x > 0 ? x : 0.2 * x; }
static double r_elu(double x) { return x > 0 ? x : 1.5 * expm1(x); }
static double r_selu(double x) { return SELU_S * (x > 0 ? x : SELU_A * expm1(x)); }
static double r_silu(double x) { return x / (1 + exp(-x)); }
static double r_mish(double x) { return x * tanh(log1p(exp(x))); }
static double r_softplus(double x) { return x > 20 ? x : log1p(exp(x)); }
static double r_softplus2(double x) { return 2 * x > 3 ? x : log1p(exp(2 * x)) / 2; } /* beta 2, threshold 3 */
static double r_hardtanh(double x) { return x < -0.5 ? -0.5 : x > 2 ? 2 : x; }
static double r_hardsigmoid(double x) { return fmin(fmax(x + 3, 0), 6) / 6; }
static double r_hardswish(double x) { return x * fmin(fmax(x + 3, 0), 6) / 6; }
static double r_logsigmoid(double x) { return fmin(x, 0) - log1p(exp(-fabs(x))); }

static nb_tensor *a_leaky(nb_tensor *x) { return nb_leaky_relu(x, 0.2); }
static nb_tensor *a_elu(nb_tensor *x) { return nb_elu(x, 1.5); }
static nb_tensor *a_softplus(nb_tensor *x) { return nb_softplus(x, 1, 20); }
static nb_tensor *a_softplus2(nb_tensor *x) { return nb_softplus(x, 2, 3); }
static nb_tensor *a_hardtanh(nb_tensor *x) { return nb_hardtanh(x, -0.5, 2); }

static const struct {
    const char *name;
    op1_fn op;
    double (*ref)(double);
} act_cases[] = {
    {"leaky_relu", a_leaky, r_leaky},       {"elu", a_elu, r_elu},
    {"selu", nb_selu, r_selu},              {"silu", nb_silu, r_silu},
    {"mish", nb_mish, r_mish},              {"softplus", a_softplus, r_softplus},
    {"softplus(2, 3)", a_softplus2, r_softplus2}, {"hardtanh", a_hardtanh, r_hardtanh},
    {"hardsigmoid", nb_hardsigmoid, r_hardsigmoid}, {"hardswish", nb_hardswish, r_hardswish},
    {"logsigmoid", nb_logsigmoid, r_logsigmoid},
};
#define N_ACT (int)(sizeof act_cases / sizeof act_cases[0])

START_TEST(test_activations_forward) {
    nb_scope *s = nb_scope_begin();
    /* kinks, thresholds, tails; 19 values, so the float32 vector loops have a tail */
    const double x[19] = {-100, -30, -5, -3, -2.5, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 1.5, 2, 3, 4.5, 19.5, 25, 90};
    for (int c = 0; c < N_ACT; c++) {
        double want[19], x32[19], want32[19];
        for (int i = 0; i < 19; i++) {
            want[i] = act_cases[c].ref(x[i]);
            x32[i] = (float)x[i];
            want32[i] = act_cases[c].ref(x32[i]);
        }
        nb_tensor *y = act_cases[c].op(vec(NB_F64, 19, x));
        ck_assert_msg(y != NULL, "%s: %s", act_cases[c].name, nb_last_error());
        nb_ck_close(y, want, 19, 1e-300, 1e-15);
        nb_tensor *y32 = act_cases[c].op(vec(NB_F32, 19, x32));
        ck_assert_int_eq(nb_dtype_of(y32), NB_F32);
        nb_ck_close(y32, want32, 19, 1e-30, 1e-6);
        ck_assert_msg(isnan(nb_item(act_cases[c].op(nb_full(0, NULL, NAN, NB_F64)))), "%s(NaN)", act_cases[c].name);
        ck_assert_msg(isnan(nb_item(act_cases[c].op(nb_full(0, NULL, NAN, NB_F32)))), "%s(NaN) f32", act_cases[c].name);
    }
    /* hand values */
    nb_tensor *h = vec(NB_F64, 5, (double[]){-4, -3, 0, 3, 7});
    nb_ck_close(nb_hardsigmoid(h), (double[]){0, 0, 0.5, 1, 1}, 5, 0, 1e-16);
    nb_ck_close(nb_hardswish(h), (double[]){-0.0, -0.0, 0, 3, 7}, 5, 0, 0);
    nb_ck_close(nb_relu6(h), (double[]){0, 0, 0, 3, 6}, 5, 0, 0);
    nb_ck_close(nb_silu(h), (double[]){-4 / (1 + exp(4.0)), -3 / (1 + exp(3.0)), 0, 3 / (1 + exp(-3.0)), 7 / (1 + exp(-7.0))},
                5, 0, 1e-15);
    /* softplus returns x itself above the threshold, logsigmoid does not overflow */
    ck_exact(nb_softplus(vec(NB_F64, 2, (double[]){20.5, 1e300}), 1, 20), (double[]){20.5, 1e300}, 2);
    nb_ck_close(nb_logsigmoid(vec(NB_F64, 2, (double[]){-800, 800})), (double[]){-800, 0}, 2, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

/* The float32 vector paths (silu, mish, selu, logsigmoid, elu, softplus)
 * over a long tensor, a strided view and their backward, against float64. */
START_TEST(test_activations_f32_paths) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(7);
    nb_tensor *x64 = nb_mul_scalar(nb_randn(NB_SHAPE(37, 29), NB_F64, &g), 4);
    nb_tensor *x32 = nb_to_dtype(x64, NB_F32);
    x64 = nb_to_dtype(x32, NB_F64); /* the same values */
    op1_fn ops[7] = {nb_silu, nb_mish, nb_selu, nb_logsigmoid, a_elu, a_softplus, a_leaky};
    for (int k = 0; k < 7; k++) {
        int64_t n = 37 * 29;
        double *want = malloc(sizeof(double) * (size_t)n);
        ck_assert_ptr_nonnull(want);
        nb_test_values(ops[k](x64), want, n);
        nb_ck_close(ops[k](x32), want, n, 1e-6, 2e-6);
        nb_test_values(ops[k](nb_transpose(x64, 0, 1)), want, n);
        nb_ck_close(ops[k](nb_transpose(x32, 0, 1)), want, n, 1e-6, 2e-6);
        /* backward: gradient of sum(op(x) * w) */
        nb_tensor *w = nb_randn(NB_SHAPE(37, 29), NB_F64, &g);
        nb_tensor *l64 = nb_add_scalar(x64, 0), *l32 = nb_add_scalar(x32, 0); /* fresh leaves */
        NB_CK_OK(nb_set_requires_grad(l64, true));
        NB_CK_OK(nb_set_requires_grad(l32, true));
        NB_CK_OK(nb_backward(nb_sum(nb_mul(ops[k](l64), w), NULL, 0, false)));
        NB_CK_OK(nb_backward(nb_sum(nb_mul(ops[k](l32), nb_to_dtype(w, NB_F32)), NULL, 0, false)));
        nb_test_values(nb_tensor_grad(l64), want, n);
        nb_ck_close(nb_tensor_grad(l32), want, n, 1e-5, 1e-5);
        free(want);
    }
    nb_scope_end(s);
}
END_TEST

/* ---- gradients -------------------------------------------------------------------------------- */

/* d sum(op(x)) / dx for x (float64 or float32) */
static void ck_grad(op1_fn op, nb_dtype dt, int64_t n, const double *x, const double *want) {
    nb_tensor *t = vec(dt, n, x);
    NB_CK_OK(nb_set_requires_grad(t, true));
    NB_CK_OK(nb_backward(nb_sum(op(t), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), want, n, 1e-15, 1e-6);
}

START_TEST(test_grad_at_kinks) {
    nb_scope *s = nb_scope_begin();
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F32 : NB_F64;
        ck_grad(nb_abs, dt, 3, (double[]){0, -2, 3}, (double[]){0, -1, 1});
        ck_grad(a_leaky, dt, 3, (double[]){0, -2, 3}, (double[]){0.2, 0.2, 1});
        ck_grad(a_elu, dt, 3, (double[]){0, -1, 3}, (double[]){1.5, 1.5 * exp(-1.0), 1});
        ck_grad(nb_selu, dt, 2, (double[]){0, 1}, (double[]){SELU_S * SELU_A, SELU_S});
        /* hardtanh: 0 at both ends (PyTorch's hardtanh_backward) */
        ck_grad(a_hardtanh, dt, 5, (double[]){-0.5, 2, 0, -1, 3}, (double[]){0, 0, 1, 0, 0});
        ck_grad(nb_relu6, dt, 4, (double[]){0, 6, 3, -1}, (double[]){0, 0, 1, 0});
        ck_grad(nb_hardsigmoid, dt, 4, (double[]){-3, 3, 0, 5}, (double[]){0, 0, 1.0 / 6, 0});
        ck_grad(nb_hardswish, dt, 5, (double[]){-3, 3, -4, 0, 5}, (double[]){-0.5, 1.5, 0, 0.5, 1});
        ck_grad(a_softplus2, dt, 2, (double[]){0, 2}, (double[]){0.5, 1});
        ck_grad(nb_logsigmoid, dt, 2, (double[]){0, -800}, (double[]){0.5, 1});
        ck_grad(nb_silu, dt, 1, (double[]){0}, (double[]){0.5});
        ck_grad(nb_mish, dt, 1, (double[]){0}, (double[]){tanh(log(2.0))});
        /* the rounding ops and sign have zero gradient */
        op1_fn zero[5] = {nb_sign, nb_floor, nb_ceil, nb_round, nb_trunc};
        for (int k = 0; k < 5; k++) ck_grad(zero[k], dt, 3, (double[]){-1.5, 0.3, 2}, (double[]){0, 0, 0});
    }
    nb_scope_end(s);
}
END_TEST

static nb_tensor *gc_apply(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return (*(const op1_fn *)ctx)(in[0]);
}
static nb_tensor *f_round2(nb_tensor *x) { return nb_round_decimals(x, 2); }

/* A float64 leaf of 3x5 N(0,1) values mapped by fn (to keep inputs inside a
 * domain and away from kinks), or exactly `fixed` (15 values) when given. */
static nb_tensor *leaf(uint64_t seed, double (*fn)(double), const double *fixed) {
    nb_generator g = nb_generator_new(seed);
    double v[15];
    nb_test_values(nb_randn(NB_SHAPE(3, 5), NB_F64, &g), v, 15);
    for (int i = 0; i < 15; i++) v[i] = fixed ? fixed[i] : fn ? fn(v[i]) : v[i];
    nb_tensor *t = nb_test_tensor(NB_SHAPE(3, 5), NB_F64, v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}
static double away0(double x) { return x + copysign(0.3, x); }
static double positive(double x) { return exp(x) + 0.05; }
static double above_m1(double x) { return exp(x) - 0.8; }
static double above1(double x) { return exp(x) + 1.1; }
static double unit(double x) { return 0.9 * tanh(x); }
static double tan_dom(double x) { return 1.2 * tanh(x); }

/* kinks at -0.5 and 2 (hardtanh), +-3 (hardsigmoid, hardswish), 3 (relu6 ends at 0, 6) */
static const double kinked[15] = {-4.2, -3.4, -2.7, -1.3, -0.8, -0.3, 0.2, 0.7, 1.2, 1.7, 2.4, 2.9, 3.3, 5.1, 6.6};

START_TEST(test_gradcheck_all) {
    nb_scope *s = nb_scope_begin();
    const struct {
        op1_fn op;
        double (*map)(double);
        const double *fixed;
    } cases[] = {
        {nb_abs, away0, NULL},        {nb_sign, NULL, NULL},         {nb_floor, NULL, NULL},
        {nb_ceil, NULL, NULL},        {nb_round, NULL, NULL},        {nb_trunc, NULL, NULL},
        {f_round2, NULL, NULL},       {nb_reciprocal, away0, NULL},  {nb_rsqrt, positive, NULL},
        {nb_log1p, above_m1, NULL},   {nb_expm1, NULL, NULL},        {nb_log2, positive, NULL},
        {nb_log10, positive, NULL},   {nb_sin, NULL, NULL},          {nb_cos, NULL, NULL},
        {nb_tan, tan_dom, NULL},      {nb_asin, unit, NULL},         {nb_acos, unit, NULL},
        {nb_atan, NULL, NULL},        {nb_sinh, NULL, NULL},         {nb_cosh, NULL, NULL},
        {nb_asinh, NULL, NULL},       {nb_acosh, above1, NULL},      {nb_atanh, unit, NULL},
        {nb_erf, NULL, NULL},         {nb_erfc, NULL, NULL},         {a_leaky, away0, NULL},
        {a_elu, away0, NULL},         {nb_selu, away0, NULL},        {nb_silu, NULL, NULL},
        {nb_mish, NULL, NULL},        {a_softplus, NULL, NULL},      {a_softplus2, NULL, kinked},
        {a_hardtanh, NULL, kinked},   {nb_relu6, NULL, kinked},      {nb_hardsigmoid, NULL, kinked},
        {nb_hardswish, NULL, kinked}, {nb_logsigmoid, NULL, NULL},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        nb_tensor *x = leaf(100 + (uint64_t)c, cases[c].map, cases[c].fixed);
        nb_ck_gradcheck(gc_apply, &x, 1, (void *)&cases[c].op);
    }
    nb_scope_end(s);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------------------------- */

START_TEST(test_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *i = vec(NB_I32, 2, (double[]){1, 2});
    /* the activations do not promote integers (PyTorch does not either) */
    op1_fn float_only[] = {nb_silu, nb_selu, nb_logsigmoid, nb_hardswish, nb_mish, nb_hardsigmoid};
    for (int k = 0; k < (int)(sizeof float_only / sizeof float_only[0]); k++) NB_CK_FAILS(float_only[k](i), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_silu(i), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "silu"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "int32"));
    /* the math functions promote integers and bool to float32, as torch.sin */
    nb_tensor *si = nb_sin(i), *eb = nb_exp(nb_gt_scalar(i, 1.5));
    ck_assert_int_eq(nb_dtype_of(si), NB_F32);
    nb_ck_close(si, (double[]){sin(1.0), sin(2.0)}, 2, 1e-7, 0);
    ck_assert_int_eq(nb_dtype_of(eb), NB_F32);
    nb_ck_close(eb, (double[]){1, exp(1.0)}, 2, 1e-6, 0);
    NB_CK_FAILS(nb_sin(nb_zeros(NB_SHAPE(2), NB_F16)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_leaky_relu(i, 0.1), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_hardtanh(i, -1, 1), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_softplus(i, 2, 20), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_round_decimals(i, 1), NB_ERR_DTYPE);
    /* bool is not a number for abs/sign */
    bool bv[2] = {true, false};
    NB_CK_FAILS(nb_abs(nb_from_data(bv, NB_SHAPE(2), NB_BOOL)), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "abs"));
    /* NULL input */
    op1_fn all[] = {nb_abs, nb_sign, nb_floor, nb_round, nb_tan, nb_acosh, nb_mish, nb_relu6, nb_hardsigmoid};
    for (int k = 0; k < (int)(sizeof all / sizeof all[0]); k++) NB_CK_FAILS(all[k](NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_round_decimals(NULL, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_elu(NULL, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_softplus(NULL, 1, 20), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_hardtanh(NULL, -1, 1), NB_ERR_INVALID_ARG);
    /* bad hyperparameters */
    nb_tensor *x = vec(NB_F64, 2, (double[]){1, 2});
    NB_CK_FAILS(nb_hardtanh(x, 1, -1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "hardtanh"));
    NB_CK_FAILS(nb_hardtanh(x, NAN, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_softplus(x, 0, 20), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_softplus(x, INFINITY, 20), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_softplus(x, 1, NAN), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- modules ------------------------------------------------------------------------------------- */

START_TEST(test_activation_modules) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_test_tensor(NB_SHAPE(8), NB_F64, (double[]){-4, -2.5, -1, -0.2, 0.3, 1, 2.5, 30}),
                              NB_SHAPE(2, 4));
    struct {
        nb_module *m;
        const char *kind;
        nb_tensor *want;
    } cases[] = {
        {nb_nn_leaky_relu(0.01), "LeakyReLU", nb_leaky_relu(x, 0.01)},
        {nb_nn_elu(1.0), "ELU", nb_elu(x, 1.0)},
        {nb_nn_selu(), "SELU", nb_selu(x)},
        {nb_nn_silu(), "SiLU", nb_silu(x)},
        {nb_nn_mish(), "Mish", nb_mish(x)},
        {nb_nn_softplus(2, 10), "Softplus", nb_softplus(x, 2, 10)},
        {nb_nn_hardtanh(-2, 2), "Hardtanh", nb_hardtanh(x, -2, 2)},
        {nb_nn_hardsigmoid(), "Hardsigmoid", nb_hardsigmoid(x)},
        {nb_nn_hardswish(), "Hardswish", nb_hardswish(x)},
        {nb_nn_logsigmoid(), "LogSigmoid", nb_logsigmoid(x)},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        NB_CK_NOTNULL(cases[k].m);
        ck_assert_str_eq(nb_module_kind(cases[k].m), cases[k].kind);
        ck_assert_int_eq(nb_module_parameters(cases[k].m, NULL, 0), 0);
        double want[8];
        nb_test_values(cases[k].want, want, 8);
        nb_tensor *y = nb_forward(cases[k].m, x);
        nb_ck_shape(y, 2, (int64_t[]){2, 4});
        nb_ck_close(y, want, 8, 0, 0);
        ck_assert_ptr_null(nb_forward(cases[k].m, NULL));
        nb_module_free(cases[k].m);
    }
    /* spot values: LeakyReLU(0.01)(-4) = -0.04, Hardtanh(-2, 2)(-4) = -2 */
    nb_module *lr = nb_nn_leaky_relu(0.01), *ht = nb_nn_hardtanh(-2, 2);
    nb_ck_close(nb_forward(lr, x), (double[]){-0.04, -0.025, -0.01, -0.002, 0.3, 1, 2.5, 30}, 8, 0, 1e-15);
    nb_ck_close(nb_forward(ht, x), (double[]){-2, -2, -1, -0.2, 0.3, 1, 2, 2}, 8, 0, 0);
    nb_module_free(lr);
    nb_module_free(ht);
    /* in a Sequential, gradients flow through the activation */
    nb_manual_seed(3);
    nb_module *net = nb_nn_sequential(nb_nn_linear_ex(4, 3, true, NB_F64), nb_nn_silu(), nb_nn_linear_ex(3, 1, true, NB_F64));
    NB_CK_NOTNULL(net);
    NB_CK_OK(nb_backward(nb_sum(nb_forward(net, x), NULL, 0, false)));
    nb_tensor *w0 = nb_module_get(nb_module_child(net, "0"), "weight");
    double gw[12];
    nb_test_values(nb_tensor_grad(w0), gw, 12);
    double norm = 0;
    for (int i = 0; i < 12; i++) norm += fabs(gw[i]);
    ck_assert(norm > 0 && isfinite(norm));
    nb_module_free(net);
    /* bad hyperparameters */
    NB_CK_FAILS(nb_nn_hardtanh(1, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_softplus(0, 20), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_gelu(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_gelu(in[0], *(nb_gelu_approximate *)ctx);
}

static const double gelu_x[8] = {-3.0, -1.5, -0.5, 0.0, 0.25, 1.0, 2.0, 4.0};

START_TEST(test_gelu_torch_values) {
    nb_scope *s = nb_scope_begin();
    /* torch.nn.functional.gelu(x) and gelu(x, approximate='tanh'), float64, and their gradients */
    const double exact[8] = {-0.00404969409489031, -0.10021080190328704, -0.15426876936299344, 0.0,
                             0.14967658142073093,  0.841344746068543,    1.9544997361036416,   3.9998733150326675};
    const double tanh_[8] = {-0.0036373920817729943, -0.10042842301976707, -0.15428599017485606, 0.0,
                             0.149675350701685,      0.8411919906082768,   1.954597694087775,    3.9999297540518075};
    const double dexact[8] = {-0.01194564720418392, -0.1274691922299796, 0.13250487534383712, 0.5,
                              0.695373354883636,    1.0833154705876864,  1.085231801078197,   1.0005036496612265};
    const double dtanh[8] = {-0.011584166630969648, -0.12771079315143308, 0.13263009646535764, 0.5,
                             0.6953540951510604,    1.0829640838457826,   1.0860992566236183,  1.000335123197122};
    /* torch's float32 results */
    const double exact32[8] = {-0.004049867391586304, -0.10021086037158966, -0.1542687863111496, 0.0,
                               0.14967656135559082,   0.8413447141647339,   1.9544999599456787,  3.999873161315918};
    const double tanh32[8] = {-0.0036374330520629883, -0.10042843222618103, -0.1542859971523285, 0.0,
                              0.14967535436153412,    0.8411920070648193,   1.9545977115631104,  3.999929904937744};
    for (int form = 0; form < 2; form++) {
        nb_gelu_approximate ap = form ? NB_GELU_TANH : NB_GELU_ERF;
        nb_tensor *x = nb_test_tensor(NB_SHAPE(8), NB_F64, gelu_x);
        NB_CK_OK(nb_set_requires_grad(x, true));
        nb_tensor *y = nb_gelu(x, ap);
        nb_ck_close(y, form ? tanh_ : exact, 8, 1e-15, 1e-14);
        NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
        nb_ck_close(nb_tensor_grad(x), form ? dtanh : dexact, 8, 1e-15, 1e-14);
        nb_tensor *y32 = nb_gelu(nb_test_tensor(NB_SHAPE(8), NB_F32, gelu_x), ap);
        ck_assert_int_eq(nb_dtype_of(y32), NB_F32);
        /* torch's float32 erf is a vectorised approximation, ~2e-7 off near -3 */
        nb_ck_close(y32, form ? tanh32 : exact32, 8, 5e-7, 1e-6);
        /* a strided input: the same values in reverse */
        nb_tensor *rev = nb_transpose(nb_reshape(nb_test_tensor(NB_SHAPE(8), NB_F64, gelu_x), NB_SHAPE(2, 4)), 0, 1);
        double want[8];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++) want[i * 2 + j] = (form ? tanh_ : exact)[j * 4 + i];
        nb_ck_close(nb_gelu(rev, ap), want, 8, 1e-15, 1e-14);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gelu_gradcheck_and_errors) {
    nb_scope *s = nb_scope_begin();
    nb_gelu_approximate forms[2] = {NB_GELU_ERF, NB_GELU_TANH};
    for (int f = 0; f < 2; f++) {
        nb_tensor *leaf = nb_test_randn_grad(NB_SHAPE(3, 7), (uint64_t)(40 + f));
        nb_ck_gradcheck(f_gelu, &leaf, 1, &forms[f]);
        nb_tensor *pts = nb_test_tensor(NB_SHAPE(8), NB_F64, gelu_x);
        NB_CK_OK(nb_set_requires_grad(pts, true));
        nb_ck_gradcheck(f_gelu, &pts, 1, &forms[f]);
    }
    NB_CK_FAILS(nb_gelu(nb_zeros(NB_SHAPE(2), NB_I32), NB_GELU_ERF), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "gelu"));
    NB_CK_FAILS(nb_gelu(nb_zeros(NB_SHAPE(2), NB_F64), (nb_gelu_approximate)7), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_gelu(NULL, NB_GELU_ERF), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gelu_float32_large) {
    /* a float32 tensor big enough for the threaded path, against float64 */
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(8);
    nb_tensor *x = nb_mul_scalar(nb_randn(NB_SHAPE(256, 300), NB_F64, &g), 3);
    nb_tensor *x32 = nb_to_dtype(x, NB_F32);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(x32, true));
    for (int f = 0; f < 2; f++) {
        nb_gelu_approximate ap = f ? NB_GELU_TANH : NB_GELU_ERF;
        nb_tensor *y = nb_gelu(x, ap), *y32 = nb_gelu(x32, ap);
        double *want = nb_test_values_of(y);
        nb_ck_close(y32, want, nb_numel(y), 1e-6, 1e-5);
        free(want);
        NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
        NB_CK_OK(nb_backward(nb_sum(y32, NULL, 0, false)));
        want = nb_test_values_of(nb_tensor_grad(x));
        nb_ck_close(nb_tensor_grad(x32), want, nb_numel(x), 1e-6, 1e-5);
        free(want);
        nb_tensor_zero_grad(x);
        nb_tensor_zero_grad(x32);
    }
    nb_scope_end(s);
}
END_TEST

#define UNARY_FN(name, expr)                                                   \
    static nb_tensor *name(nb_tensor *const *in, int n, void *ctx) {           \
        (void)n, (void)ctx;                                                    \
        nb_tensor *a = in[0];                                                  \
        return expr;                                                           \
    }

/* A float64 leaf that requires grad: N(0,1) values mapped by fn on the host
 * (to keep inputs away from a kink or a pole). */
static nb_tensor *leaf_map(int ndim, const int64_t *shape, uint64_t seed, double (*fn)(double)) {
    nb_generator g = nb_generator_new(seed);
    nb_tensor *r = nb_randn(ndim, shape, NB_F64, &g);
    double v[128];
    int64_t n = nb_numel(r);
    ck_assert_int_le(n, 128);
    nb_test_values(r, v, n);
    for (int64_t i = 0; i < n; i++) v[i] = fn ? fn(v[i]) : v[i];
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

UNARY_FN(f_add_scalar, nb_add_scalar(a, 1.7))

UNARY_FN(f_mul_scalar, nb_mul_scalar(a, -2.5))

UNARY_FN(f_pow_scalar, nb_pow_scalar(a, 2.5))

UNARY_FN(f_pow_scalar3, nb_pow_scalar(a, 3))

UNARY_FN(f_pow_scalar_neg, nb_pow_scalar(a, -1.5))

UNARY_FN(f_neg, nb_neg(a))

UNARY_FN(f_exp, nb_exp(a))

UNARY_FN(f_log, nb_log(a))

UNARY_FN(f_sqrt, nb_sqrt(a))

UNARY_FN(f_relu, nb_relu(a))

UNARY_FN(f_sigmoid, nb_sigmoid(a))

UNARY_FN(f_tanh, nb_tanh(a))

UNARY_FN(f_to_f64, nb_to_dtype(a, NB_F64))

UNARY_FN(f_transposed_exp, nb_exp(nb_transpose(a, 0, 1))) /* strided input */

static void gc1(nb_gradcheck_fn f, nb_tensor *a) { nb_ck_gradcheck(f, &a, 1, NULL); }

START_TEST(test_unary_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_ck_close(nb_add_scalar(x, 1.5), (double[]){2.5, 3.5, 4.5}, 3, 0, 0);
    nb_ck_close(nb_mul_scalar(x, -2), (double[]){-2, -4, -6}, 3, 0, 0);
    nb_ck_close(nb_pow_scalar(x, 2), (double[]){1, 4, 9}, 3, 0, 1e-15);
    nb_ck_close(nb_pow_scalar(x, 0.5), (double[]){1, 1.4142135623730951, 1.7320508075688772}, 3, 0, 1e-15);
    nb_ck_close(nb_pow_scalar(x, -1), (double[]){1, 0.5, 1.0 / 3}, 3, 0, 1e-15);
    nb_ck_close(nb_neg(x), (double[]){-1, -2, -3}, 3, 0, 0);
    nb_ck_close(nb_exp(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0, 1, -1})),
                (double[]){1, 2.718281828459045, 0.36787944117144233}, 3, 0, 1e-15);
    nb_ck_close(nb_log(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2.718281828459045, 0.5})),
                (double[]){0, 1, -0.6931471805599453}, 3, 1e-15, 1e-15);
    nb_ck_close(nb_sqrt(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){4, 2, 0})),
                (double[]){2, 1.4142135623730951, 0}, 3, 0, 1e-15);
    nb_ck_close(nb_relu(nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){-1, 0, 2, -0.5})), (double[]){0, 0, 2, 0}, 4,
                0, 0);
    nb_ck_close(nb_sigmoid(nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){0, 2, -2, 800, -800})),
                (double[]){0.5, 0.8807970779778823, 0.11920292202211755, 1, 0}, 5, 1e-300, 1e-15);
    nb_ck_close(nb_tanh(nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0, 1, -0.5, 50})),
                (double[]){0, 0.7615941559557649, -0.46211715726000974, 1}, 4, 0, 1e-15);
    /* NaN passes through relu, exp and tanh */
    double nv[3];
    nb_tensor *nan1 = nb_full(NB_SHAPE(1), NAN, NB_F64);
    nv[0] = nb_item(nb_relu(nan1)), nv[1] = nb_item(nb_exp(nan1)), nv[2] = nb_item(nb_tanh(nan1));
    ck_assert(isnan(nv[0]) && isnan(nv[1]) && isnan(nv[2]));
    /* results keep the input's shape and dtype */
    nb_tensor *m = nb_exp(nb_zeros(NB_SHAPE(2, 3), NB_F32));
    nb_ck_shape(m, 2, (int64_t[]){2, 3});
    ck_assert_int_eq(nb_dtype_of(m), NB_F32);
    /* strided inputs: exp of a transposed view, C order of the view */
    nb_tensor *t = nb_transpose(nb_reshape(nb_arange(0, 4, 1, NB_F64), NB_SHAPE(2, 2)), 0, 1);
    nb_ck_close(nb_exp(t), (double[]){1, exp(2.0), exp(1.0), exp(3.0)}, 4, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_unary) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3, 4), 20);
    nb_tensor *pos = leaf_map(NB_SHAPE(3, 4), 21, positive);
    gc1(f_add_scalar, x);
    gc1(f_mul_scalar, x);
    gc1(f_pow_scalar, pos);
    gc1(f_pow_scalar3, x);
    gc1(f_pow_scalar_neg, pos);
    gc1(f_neg, x);
    gc1(f_exp, x);
    gc1(f_log, pos);
    gc1(f_sqrt, pos);
    gc1(f_relu, leaf_map(NB_SHAPE(3, 4), 22, away0));
    gc1(f_sigmoid, x);
    gc1(f_tanh, x);
    gc1(f_to_f64, x);
    gc1(f_transposed_exp, x);
    nb_scope_end(s);
}
END_TEST


/* ---- regressions found against PyTorch (issue 13) ------------------------------------------ */

/* An integer tensor meets a non-integral or out-of-range scalar as a Python
 * float: float32, never a truncated scalar or INT_MIN. */
START_TEST(test_scalar_arith_promotes) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *i = vec(NB_I32, 3, (double[]){-7, 0, 3});
    nb_tensor *r = nb_add_scalar(i, -1.5);
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    ck_exact(r, (double[]){-8.5, -1.5, 1.5}, 3);
    r = nb_mul_scalar(i, 0.5);
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    ck_exact(r, (double[]){-3.5, 0, 1.5}, 3);
    r = nb_add_scalar(i, 1e10); /* outside int32: float32, not INT_MIN */
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    nb_ck_close(r, (double[]){1e10, 1e10, 1e10}, 3, 0, 1e-7);
    r = nb_add_scalar(i, 2); /* an int32 value keeps int32 */
    ck_assert_int_eq(nb_dtype_of(r), NB_I32);
    ck_exact(r, (double[]){-5, 2, 5}, 3);
    r = nb_mul_scalar(vec(NB_U8, 2, (double[]){3, 200}), -1); /* -1 does not fit uint8 */
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    ck_exact(r, (double[]){-3, -200}, 2);
    r = nb_add_scalar(vec(NB_BOOL, 2, (double[]){1, 0}), 1); /* bool + int is int64, as PyTorch */
    ck_assert_int_eq(nb_dtype_of(r), NB_I64);
    ck_exact(r, (double[]){2, 1}, 2);
    nb_scope_end(s);
}
END_TEST

/* float32 silu, mish and tanh-gelu below -88 (where e^-x overflows): -0
 * for finite x and NaN at -inf, as PyTorch (the vector exp used to clamp
 * its argument, giving silu(-3e38) = -1.8). Gradients likewise. */
START_TEST(test_activations_f32_extremes) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = vec(NB_F32, 3, (double[]){-3e38, -INFINITY, 89});
    ck_exact(nb_silu(t), (double[]){-0.0, NAN, 89}, 3);
    ck_exact(nb_mish(t), (double[]){-0.0, NAN, 89}, 3);
    ck_exact(nb_gelu(t, NB_GELU_TANH), (double[]){-0.0, NAN, 89}, 3);
    /* e^88.5 is finite in float32: silu(-88.5) = -88.5 / (1 + e^88.5), not
     * the clamped e^88's value */
    nb_ck_close(nb_silu(vec(NB_F32, 1, (double[]){-88.5})), (double[]){-88.5 / (1 + exp(88.5))}, 1, 0, 1e-5);
    for (int d = 0; d < 2; d++) {
        nb_tensor *xg = vec(d ? NB_F32 : NB_F64, 4, (double[]){-3e38, -INFINITY, -100, 89});
        NB_CK_OK(nb_set_requires_grad(xg, true));
        NB_CK_OK(nb_backward(nb_sum(nb_add(nb_silu(xg), nb_mish(xg)), NULL, 0, false)));
        double g[4];
        nb_test_values(nb_tensor_grad(xg), g, 4);
        ck_assert_msg(g[0] == 0 && isnan(g[1]) && fabs(g[2]) < 1e-30 && fabs(g[3] - 2) < 1e-6,
                      "%s silu+mish grads %g %g %g %g", d ? "float32" : "float64", g[0], g[1], g[2], g[3]);
    }
    nb_scope_end(s);
}
END_TEST

/* softplus with beta != 1 returns x above the threshold even where beta x
 * overflows; log2's float32 gradient just above FLT_MIN stays finite. */
START_TEST(test_softplus_beta_and_log2_grad) {
    nb_scope *s = nb_scope_begin();
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = vec(d ? NB_F32 : NB_F64, 3, (double[]){3e38, 50, 1});
        NB_CK_OK(nb_set_requires_grad(x, true));
        nb_tensor *y = nb_softplus(x, 2, 20);
        nb_ck_close(y, (double[]){3e38, 50, log1p(exp(2.0)) / 2}, 3, 0, 1e-6);
        NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
        nb_ck_close(nb_tensor_grad(x), (double[]){1, 1, 1 / (1 + exp(-2.0))}, 3, 0, 1e-6);
    }
    nb_tensor *l = vec(NB_F32, 2, (double[]){0x1p-126, 0x1.2p-126});
    NB_CK_OK(nb_set_requires_grad(l, true));
    NB_CK_OK(nb_backward(nb_sum(nb_log2(l), NULL, 0, false)));
    double g[2];
    nb_test_values(nb_tensor_grad(l), g, 2);
    ck_assert_msg(isfinite(g[0]) && fabs(g[0] / (0x1p126 / M_LN2) - 1) < 1e-6, "log2'(FLT_MIN) = %g", g[0]);
    ck_assert_msg(isfinite(g[1]) && fabs(g[1] / (1 / (0x1.2p-126 * M_LN2)) - 1) < 1e-6, "log2' = %g", g[1]);
    nb_scope_end(s);
}
END_TEST

/* nb_silu_mul where nothing records a gradient: on a device with the fused kernel (CUDA) one launch gives the
 * bits of nb_mul(nb_silu(a), b), in every float dtype, for contiguous inputs and for the two halves of one
 * [.., 2 I] product (strided views, as a decoder's gate | up); elsewhere the two ops. A broadcast b takes the
 * two ops. Under a gradient, the two ops' values and gradients. */
START_TEST(test_silu_mul) {
    nb_device devs[9] = {NB_CPU};
    const int nd = 1 + nb_test_accelerators(devs + 1, 8);
    const nb_dtype dts[4] = {NB_F32, NB_F64, NB_BF16, NB_F16};
    bool prev = nb_set_grad_enabled(false);
    for (int d = 0; d < nd; d++)
        for (int di = 0; di < 4; di++)
            for (int halves = 0; halves < 2; halves++) {
                nb_scope *s = nb_scope_begin();
                nb_generator g = nb_generator_new((uint64_t)(10 * di + halves));
                nb_tensor *a, *b;
                if (halves) {
                    nb_tensor *gu = nb_mul_scalar(nb_randn(NB_SHAPE(3, 2 * 1030), NB_F32, &g), 4);
                    gu = nb_to_device(nb_to_dtype(gu, dts[di]), devs[d]);
                    a = nb_narrow(gu, -1, 0, 1030), b = nb_narrow(gu, -1, 1030, 1030);
                } else {
                    a = nb_to_device(nb_to_dtype(nb_mul_scalar(nb_randn(NB_SHAPE(5, 77), NB_F32, &g), 4), dts[di]), devs[d]);
                    b = nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(5, 77), NB_F32, &g), dts[di]), devs[d]);
                }
                uint64_t l0 = nb_device_counters_get(devs[d]).kernel_launches;
                nb_tensor *y = nb_silu_mul(a, b);
                uint64_t l1 = nb_device_counters_get(devs[d]).kernel_launches;
                NB_CK_NOTNULL(y);
                if (devs[d].type == NB_DEVICE_CUDA) ck_assert_int_eq(l1 - l0, 1);
                ck_assert_int_eq(nb_dtype_of(y), dts[di]);
                nb_ck_close_to(nb_to_device(y, NB_CPU), nb_to_device(nb_mul(nb_silu(a), b), NB_CPU), 0);
                nb_scope_end(s);
            }
    nb_set_grad_enabled(prev);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(4);
    nb_tensor *a = nb_randn(NB_SHAPE(2, 3), NB_F64, &g), *b = nb_randn(NB_SHAPE(3), NB_F64, &g);
    nb_tensor *a2 = nb_clone(a), *b2 = nb_clone(b);
    nb_tensor *leaves[4] = {a, b, a2, b2};
    for (int i = 0; i < 4; i++) NB_CK_OK(nb_set_requires_grad(leaves[i], true));
    nb_tensor *y = nb_silu_mul(a, b), *want = nb_mul(nb_silu(a2), b2); /* b broadcast */
    NB_CK_OK(nb_backward(nb_sum(nb_mul(y, y), NULL, 0, false)));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(want, want), NULL, 0, false)));
    nb_ck_close_to(y, want, 0);
    nb_ck_close_to(nb_tensor_grad(a), nb_tensor_grad(a2), 0);
    nb_ck_close_to(nb_tensor_grad(b), nb_tensor_grad(b2), 0);
    NB_CK_FAILS(nb_silu_mul(a, NULL) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_silu_mul(a, nb_randn(NB_SHAPE(4), NB_F64, &g)) != NULL, NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_unary(void) {
    Suite *s = suite_create("ops_unary");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_rounding);
    tcase_add_test(f, test_abs_sign);
    tcase_add_test(f, test_math_vs_libm);
    tcase_add_test(f, test_activations_forward);
    tcase_add_test(f, test_activations_f32_paths);
    tcase_add_test(f, test_errors);
    tcase_add_test(f, test_activation_modules);
    tcase_add_test(f, test_scalar_arith_promotes);
    tcase_add_test(f, test_activations_f32_extremes);
    tcase_add_test(f, test_softplus_beta_and_log2_grad);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_add_test(g, test_grad_at_kinks);
    tcase_add_test(g, test_gradcheck_all);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    TCase *tc_gelu = tcase_create("gelu");
    tcase_add_test(tc_gelu, test_gelu_torch_values);
    tcase_add_test(tc_gelu, test_gelu_float32_large);
    tcase_add_test(tc_gelu, test_gelu_gradcheck_and_errors);
    tcase_set_timeout(tc_gelu, 300);
    suite_add_tcase(s, tc_gelu);
    TCase *tc_basic = tcase_create("basic");
    tcase_add_test(tc_basic, test_unary_forward);
    tcase_add_test(tc_basic, test_gradcheck_unary);
    tcase_add_test(tc_basic, test_silu_mul);
    tcase_set_timeout(tc_basic, 300);
    suite_add_tcase(s, tc_basic);
    return s;
}
