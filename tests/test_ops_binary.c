/* test_ops_binary.c - binary elementwise ops: forward values computed by
 * hand, integer and comparison ops, integer division/modulo signs and
 * errors, atan2, maximum/minimum, lerp, clamp, broadcasting gradients
 * reduced back to the input shapes, a float64 gradcheck of every
 * differentiable binary op (plain and broadcast), and float32 forwards
 * against float64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

#define UNARY_FN(name, expr)                                                   \
    static nb_tensor *name(nb_tensor *const *in, int n, void *ctx) {           \
        (void)n, (void)ctx;                                                    \
        nb_tensor *a = in[0];                                                  \
        return expr;                                                           \
    }
#define BINARY_FN(name, expr)                                                  \
    static nb_tensor *name(nb_tensor *const *in, int n, void *ctx) {           \
        (void)n, (void)ctx;                                                    \
        nb_tensor *a = in[0], *b = in[1];                                      \
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
static double away0(double x) { return x + copysign(0.5, x); } /* |x| >= 0.5 */
static double positive(double x) { return exp(x); }

BINARY_FN(f_add, nb_add(a, b))
BINARY_FN(f_sub, nb_sub(a, b))
BINARY_FN(f_mul, nb_mul(a, b))
BINARY_FN(f_div, nb_div(a, b))
BINARY_FN(f_pow, nb_pow(a, b))
BINARY_FN(f_chain, nb_sigmoid(nb_add(nb_mul(a, b), nb_tanh(a))))
BINARY_FN(f_remainder, nb_remainder(a, b))
BINARY_FN(f_fmod, nb_fmod(a, b))
BINARY_FN(f_atan2, nb_atan2(a, b))
BINARY_FN(f_maximum, nb_maximum(a, b))
BINARY_FN(f_minimum, nb_minimum(a, b))
BINARY_FN(f_clamp_hi, nb_clamp(a, NULL, b))
BINARY_FN(f_lerp_lo, nb_lerp_scalar(a, b, 0.3))
BINARY_FN(f_lerp_hi, nb_lerp_scalar(a, b, 0.8))
UNARY_FN(f_remainder_scalar, nb_remainder_scalar(a, -1.3))
UNARY_FN(f_clamp_scalar, nb_clamp_scalar(a, -0.5, 0.5))
UNARY_FN(f_clamp_min, nb_clamp_scalar(a, -0.5, NAN))
UNARY_FN(f_clamp_max, nb_clamp_scalar(a, NAN, 0.5))
static nb_tensor *f_lerp(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_lerp(in[0], in[1], in[2]);
}
static nb_tensor *f_clamp(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_clamp(in[0], in[1], in[2]);
}

static void gc1(nb_gradcheck_fn f, nb_tensor *a) { nb_ck_gradcheck(f, &a, 1, NULL); }
static void gc2(nb_gradcheck_fn f, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    nb_ck_gradcheck(f, in, 2, NULL);
}

/* ---- forward values ----------------------------------------------------------- */

START_TEST(test_binary_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){4, 5, 6});
    nb_ck_close(nb_add(a, b), (double[]){5, 7, 9}, 3, 0, 0);
    nb_ck_close(nb_sub(a, b), (double[]){-3, -3, -3}, 3, 0, 0);
    nb_ck_close(nb_mul(a, b), (double[]){4, 10, 18}, 3, 0, 0);
    nb_ck_close(nb_div(a, b), (double[]){0.25, 0.4, 0.5}, 3, 0, 1e-15);
    nb_tensor *p = nb_pow(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){2, 3, 4}),
                          nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){3, 0.5, -1}));
    nb_ck_close(p, (double[]){8, 1.7320508075688772, 0.25}, 3, 0, 1e-15);
    /* float32 too */
    nb_tensor *a32 = nb_to_dtype(a, NB_F32), *b32 = nb_to_dtype(b, NB_F32);
    nb_tensor *d32 = nb_div(a32, b32);
    ck_assert_int_eq(nb_dtype_of(d32), NB_F32);
    nb_ck_close(d32, (double[]){0.25, 0.4, 0.5}, 3, 0, 1e-7);
    /* division by zero follows IEEE */
    double q[2];
    nb_test_values(nb_div(nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 0}), nb_zeros(NB_SHAPE(2), NB_F64)), q, 2);
    ck_assert(isinf(q[0]) && q[0] > 0 && isnan(q[1]));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_integer_and_comparison_ops) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(3), NB_I32, (double[]){1, 2, 3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_I32, (double[]){3, 2, 1});
    nb_tensor *c = nb_add(a, b);
    ck_assert_int_eq(nb_dtype_of(c), NB_I32);
    nb_ck_close(c, (double[]){4, 4, 4}, 3, 0, 0);
    nb_ck_close(nb_sub(a, b), (double[]){-2, 0, 2}, 3, 0, 0);
    nb_ck_close(nb_mul(a, b), (double[]){3, 4, 3}, 3, 0, 0);
    nb_ck_close(nb_neg(a), (double[]){-1, -2, -3}, 3, 0, 0);
    /* int64 arithmetic is exact beyond 2^53 (not done in double) */
    int64_t big[2] = {9007199254740993LL, -3}, small[2] = {1, 5}, out[2];
    nb_tensor *bt = nb_from_data(big, NB_SHAPE(2), NB_I64), *st = nb_from_data(small, NB_SHAPE(2), NB_I64);
    NB_CK_OK(nb_to_host(nb_mul(bt, st), out, sizeof out));
    ck_assert(out[0] == 9007199254740993LL && out[1] == -15);
    NB_CK_OK(nb_to_host(nb_add(bt, st), out, sizeof out));
    ck_assert(out[0] == 9007199254740994LL && out[1] == 2);
    nb_tensor *u = nb_test_tensor(NB_SHAPE(2), NB_U8, (double[]){200, 7});
    nb_tensor *us = nb_add(u, nb_test_tensor(NB_SHAPE(2), NB_U8, (double[]){50, 1}));
    ck_assert_int_eq(nb_dtype_of(us), NB_U8);
    nb_ck_close(us, (double[]){250, 8}, 2, 0, 0);
    nb_ck_close(nb_add_scalar(nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){1, -4}), 2), (double[]){3, -2}, 2, 0, 0);
    nb_ck_close(nb_mul_scalar(a, 3), (double[]){3, 6, 9}, 3, 0, 0);
    nb_tensor *sq = nb_sqrt(a); /* integers promote to float32, as torch.sqrt */
    ck_assert_int_eq(nb_dtype_of(sq), NB_F32);
    nb_ck_close(sq, (double[]){1, sqrt(2.0), sqrt(3.0)}, 3, 1e-7, 0);
    /* int32 with int64 promotes to int64 (torch.result_type) */
    nb_tensor *mixed = nb_add(a, nb_to_dtype(b, NB_I64));
    ck_assert_int_eq(nb_dtype_of(mixed), NB_I64);
    nb_ck_close(mixed, (double[]){4, 4, 4}, 3, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_comparisons) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){3, 2, 1});
    nb_tensor *eq = nb_eq(a, b);
    ck_assert_int_eq(nb_dtype_of(eq), NB_BOOL);
    nb_ck_close(eq, (double[]){0, 1, 0}, 3, 0, 0);
    nb_ck_close(nb_ne(a, b), (double[]){1, 0, 1}, 3, 0, 0);
    nb_ck_close(nb_gt(a, b), (double[]){0, 0, 1}, 3, 0, 0);
    /* broadcast [3, 1] vs [3] */
    nb_tensor *g = nb_gt(nb_reshape(a, NB_SHAPE(3, 1)), b);
    nb_ck_shape(g, 2, (int64_t[]){3, 3});
    nb_ck_close(g, (double[]){0, 0, 0, 0, 0, 1, 0, 1, 1}, 9, 0, 0);
    /* integers */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){5, -1});
    nb_ck_close(nb_eq(i, nb_full(0, NULL, -1, NB_I64)), (double[]){0, 1}, 2, 0, 0);
    /* not differentiable: no graph even from inputs that require grad */
    NB_CK_OK(nb_set_requires_grad(a, true));
    ck_assert(!nb_requires_grad(nb_eq(a, b)));
    nb_ck_close(nb_gt(a, nb_to_dtype(b, NB_F32)), (double[]){0, 0, 1}, 3, 0, 0); /* compared as float64 */
    NB_CK_FAILS(nb_gt(a, nb_zeros(NB_SHAPE(2), NB_F32)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "gt"));
    NB_CK_FAILS(nb_eq(a, nb_zeros(NB_SHAPE(2), NB_F64)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* ---- integer division, remainder, fmod -------------------------------------- */

#define V(...) (double[]){__VA_ARGS__}
#define T1(dt, ...) nb_test_tensor(1, (int64_t[]){(int64_t)(sizeof V(__VA_ARGS__) / sizeof(double))}, dt, V(__VA_ARGS__))

START_TEST(test_division_semantics) {
    nb_scope *s = nb_scope_begin();
    /* Python's and C's signs: -7 // 2 = -4, trunc -3, -7 % 2 = 1, fmod(-7, 2) = -1 */
    const nb_dtype dts[] = {NB_I32, NB_I64, NB_F32, NB_F64};
    for (int i = 0; i < 4; i++) {
        nb_tensor *a = T1(dts[i], -7, 7, -7, 7, 6, 0), *b = T1(dts[i], 2, 2, -2, -2, 3, -5);
        nb_tensor *fl = nb_div_mode(a, b, NB_ROUNDING_FLOOR), *tr = nb_div_mode(a, b, NB_ROUNDING_TRUNC);
        ck_assert_int_eq(nb_dtype_of(fl), dts[i]);
        nb_ck_close(fl, V(-4, 3, 3, -4, 2, 0), 6, 0, 0);
        nb_ck_close(nb_floor_divide(a, b), V(-4, 3, 3, -4, 2, 0), 6, 0, 0);
        nb_ck_close(tr, V(-3, 3, 3, -3, 2, 0), 6, 0, 0);
        nb_ck_close(nb_remainder(a, b), V(1, 1, -1, -1, 0, 0), 6, 0, 0);
        nb_ck_close(nb_fmod(a, b), V(-1, 1, -1, 1, 0, 0), 6, 0, 0);
    }
    /* true division of integers gives float32 */
    nb_tensor *q = nb_div(T1(NB_I64, -7, 1), T1(NB_I64, 2, 3));
    ck_assert_int_eq(nb_dtype_of(q), NB_F32);
    nb_ck_close(q, V(-3.5, 1.0 / 3), 2, 0, 1e-7);
    ck_assert_int_eq(nb_dtype_of(nb_div_mode(T1(NB_I32, 1), T1(NB_I32, 2), NB_ROUNDING_NONE)), NB_F32);
    /* uint8 and fractional floats */
    nb_ck_close(nb_floor_divide(T1(NB_U8, 7, 255), T1(NB_U8, 2, 16)), V(3, 15), 2, 0, 0);
    nb_ck_close(nb_remainder(T1(NB_U8, 7, 255), T1(NB_U8, 2, 16)), V(1, 15), 2, 0, 0);
    nb_tensor *x = T1(NB_F64, -1.5, 5.5, -0.25), *y = T1(NB_F64, 1, -2, 0.5);
    nb_ck_close(nb_remainder(x, y), V(0.5, -0.5, 0.25), 3, 0, 0);
    nb_ck_close(nb_fmod(x, y), V(-0.5, 1.5, -0.25), 3, 0, 0);
    nb_ck_close(nb_floor_divide(x, y), V(-2, -3, -1), 3, 0, 0);
    nb_ck_close(nb_div_mode(x, y, NB_ROUNDING_TRUNC), V(-1, -2, 0), 3, 0, 0);
    nb_ck_close(nb_remainder_scalar(T1(NB_F64, -7, 7), 2), V(1, 1), 2, 0, 0);
    nb_ck_close(nb_fmod_scalar(T1(NB_F64, -7, 7), 2), V(-1, 1), 2, 0, 0);
    /* floats divide by zero as IEEE */
    double r[3];
    nb_test_values(nb_floor_divide(T1(NB_F64, 1, -1, 0), nb_zeros(NB_SHAPE(3), NB_F64)), r, 3);
    ck_assert(isinf(r[0]) && r[0] > 0 && isinf(r[1]) && r[1] < 0 && isnan(r[2]));
    ck_assert(isnan(nb_item(nb_remainder(T1(NB_F64, 1), T1(NB_F64, 0)))));
    NB_CK_FAILS(nb_div_mode(T1(NB_F64, 1), T1(NB_F64, 1), (nb_rounding_mode)7), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_remainder(T1(NB_F64, 1, 2), T1(NB_F64, 1, 2, 3)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_remainder(T1(NB_BOOL, 1), T1(NB_BOOL, 1)), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* Integer division by zero is an error, never SIGFPE; INT_MIN / -1 wraps. */
START_TEST(test_integer_division_edge_cases) {
    nb_scope *s = nb_scope_begin();
    const nb_dtype dts[] = {NB_I32, NB_I64, NB_U8};
    for (int i = 0; i < 3; i++) {
        nb_tensor *a = T1(dts[i], 1, 2), *z = T1(dts[i], 1, 0);
        NB_CK_FAILS(nb_div_mode(a, z, NB_ROUNDING_TRUNC), NB_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "div: integer division by zero"));
        NB_CK_FAILS(nb_floor_divide(a, z), NB_ERR_INVALID_ARG);
        NB_CK_FAILS(nb_remainder(a, z), NB_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "integer division by zero"));
        NB_CK_FAILS(nb_fmod(a, nb_zeros(0, NULL, dts[i])), NB_ERR_INVALID_ARG);
    }
    int32_t mn32[2] = {INT32_MIN, INT32_MIN}, m1[2] = {-1, 1}, o32[2];
    nb_tensor *a32 = nb_from_data(mn32, NB_SHAPE(2), NB_I32), *b32 = nb_from_data(m1, NB_SHAPE(2), NB_I32);
    NB_CK_OK(nb_to_host(nb_div_mode(a32, b32, NB_ROUNDING_TRUNC), o32, sizeof o32));
    ck_assert(o32[0] == INT32_MIN && o32[1] == INT32_MIN);
    NB_CK_OK(nb_to_host(nb_floor_divide(a32, b32), o32, sizeof o32));
    ck_assert(o32[0] == INT32_MIN && o32[1] == INT32_MIN);
    NB_CK_OK(nb_to_host(nb_remainder(a32, b32), o32, sizeof o32));
    ck_assert(o32[0] == 0 && o32[1] == 0);
    NB_CK_OK(nb_to_host(nb_fmod(a32, b32), o32, sizeof o32));
    ck_assert(o32[0] == 0 && o32[1] == 0);
    int64_t mn64[1] = {INT64_MIN}, m164[1] = {-1}, o64[1];
    nb_tensor *a64 = nb_from_data(mn64, NB_SHAPE(1), NB_I64), *b64 = nb_from_data(m164, NB_SHAPE(1), NB_I64);
    NB_CK_OK(nb_to_host(nb_floor_divide(a64, b64), o64, sizeof o64));
    ck_assert(o64[0] == INT64_MIN);
    NB_CK_OK(nb_to_host(nb_remainder(a64, b64), o64, sizeof o64));
    ck_assert(o64[0] == 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_binary_new_forward) {
    nb_scope *s = nb_scope_begin();
    /* atan2 quadrants and signed zero */
    nb_ck_close(nb_atan2(T1(NB_F64, 1, 0, -0.0, -1), T1(NB_F64, -1, -1, -1, 0)),
                V(3 * M_PI / 4, M_PI, -M_PI, -M_PI / 2), 4, 0, 1e-15);
    /* maximum/minimum propagate NaN; integers too */
    double r[3];
    nb_test_values(nb_maximum(T1(NB_F64, 1, NAN, 3), T1(NB_F64, 2, 0, NAN)), r, 3);
    ck_assert(r[0] == 2 && isnan(r[1]) && isnan(r[2]));
    nb_test_values(nb_minimum(T1(NB_F64, 1, NAN, 3), T1(NB_F64, 2, 0, NAN)), r, 3);
    ck_assert(r[0] == 1 && isnan(r[1]) && isnan(r[2]));
    nb_ck_close(nb_maximum(T1(NB_I32, -5, 4), T1(NB_I32, 3, 2)), V(3, 4), 2, 0, 0);
    nb_ck_close(nb_minimum(T1(NB_U8, 200, 4), T1(NB_U8, 3, 250)), V(3, 4), 2, 0, 0);
    /* lerp: exact at both ends */
    nb_tensor *st = nb_full(NB_SHAPE(5), 1.1, NB_F64), *en = nb_full(NB_SHAPE(5), 3.3, NB_F64);
    nb_ck_close(nb_lerp(st, en, T1(NB_F64, 0, 0.25, 0.5, 1, 2)), V(1.1, 1.65, 2.2, 3.3, 5.5), 5, 0, 1e-15);
    nb_test_values(nb_lerp(st, en, nb_ones(NB_SHAPE(5), NB_F64)), r, 1);
    ck_assert(r[0] == 3.3);
    ck_assert(nb_item(nb_lerp_scalar(nb_scalar(1.1, NB_F64), nb_scalar(3.3, NB_F64), 1)) == 3.3);
    nb_ck_close(nb_lerp_scalar(nb_zeros(NB_SHAPE(2), NB_F32), T1(NB_F32, 4, -8), 0.25), V(1, -2), 2, 0, 0);
    NB_CK_FAILS(nb_lerp(st, en, nb_ones(NB_SHAPE(5), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_lerp(st, en, nb_ones(NB_SHAPE(4), NB_F64)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "lerp"));
    /* clamp: NaN stays, min > max gives max, tensor bounds broadcast */
    nb_test_values(nb_clamp_scalar(T1(NB_F64, -2, 0.5, NAN), -1, 1), r, 3);
    ck_assert(r[0] == -1 && r[1] == 0.5 && isnan(r[2]));
    nb_ck_close(nb_clamp_scalar(T1(NB_F64, -2, 0, 3), 2, 1), V(1, 1, 1), 3, 0, 0);
    nb_ck_close(nb_clamp_scalar(T1(NB_F64, -2, 0, 3), NAN, 1), V(-2, 0, 1), 3, 0, 0);
    nb_ck_close(nb_clamp_scalar(T1(NB_F64, -2, 0, 3), 0, NAN), V(0, 0, 3), 3, 0, 0);
    nb_tensor *ci = nb_clamp_scalar(T1(NB_I32, -2, 0, 3), 0, 2.5);
    ck_assert_int_eq(nb_dtype_of(ci), NB_F32);
    nb_ck_close(ci, V(0, 0, 2.5), 3, 0, 0);
    nb_tensor *cl = nb_clamp(nb_reshape(T1(NB_F64, -3, 0, 3), NB_SHAPE(3, 1)), T1(NB_F64, -1, 1), NULL);
    nb_ck_shape(cl, 2, (int64_t[]){3, 2});
    nb_ck_close(cl, V(-1, 1, 0, 1, 3, 3), 6, 0, 0);
    nb_ck_close(nb_clamp(T1(NB_I64, -3, 0, 3), NULL, T1(NB_I64, 1)), V(-3, 0, 1), 3, 0, 0);
    NB_CK_FAILS(nb_clamp(T1(NB_F64, 1), NULL, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_clamp_scalar(T1(NB_F64, 1), NAN, NAN), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_clamp(T1(NB_F64, 1, 2), T1(NB_F64, 1, 2, 3), NULL), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "clamp"));
    NB_CK_FAILS(nb_atan2(T1(NB_F64, 1, 2), T1(NB_F64, 1, 2, 3)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

static void ck_grads(nb_tensor *a, nb_tensor *b, const double *ga, const double *gb, int n) {
    nb_ck_close(nb_tensor_grad(a), ga, n, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(b), gb, n, 0, 1e-15);
    nb_tensor_zero_grad(a), nb_tensor_zero_grad(b);
}

static nb_tensor *leaf(int n, const double *v) {
    nb_tensor *t = nb_test_tensor(1, (int64_t[]){n}, NB_F64, v);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

/* Gradients at the points gradcheck cannot probe: ties, bounds, zeros. */
START_TEST(test_binary_new_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = leaf(4, V(1, 2, 3, NAN)), *b = leaf(4, V(2, 2, 1, 1));
    NB_CK_OK(nb_backward(nb_sum(nb_maximum(a, b), NULL, 0, false)));
    ck_grads(a, b, V(0, 0.5, 1, 1), V(1, 0.5, 0, 1), 4); /* ties split; NaN passes to both */
    NB_CK_OK(nb_backward(nb_sum(nb_minimum(a, b), NULL, 0, false)));
    ck_grads(a, b, V(1, 0.5, 0, 1), V(0, 0.5, 1, 1), 4);
    /* pow at a zero base: finite, as PyTorch (0 ** 0, 0 ** 2) */
    nb_tensor *pa = leaf(3, V(0, 0, 2)), *pb = leaf(3, V(0, 2, 3));
    NB_CK_OK(nb_backward(nb_sum(nb_pow(pa, pb), NULL, 0, false)));
    ck_grads(pa, pb, V(0, 0, 12), V(0, 0, 8 * log(2.0)), 3);
    /* clamp: bounds are inclusive for x; min > max sends g to max */
    nb_tensor *x = leaf(4, V(-1, 0, 1, 5)), *lo = leaf(4, V(-1, -1, -1, 3)), *hi = leaf(4, V(1, 1, 1, 2));
    NB_CK_OK(nb_backward(nb_sum(nb_clamp(x, lo, hi), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), V(1, 1, 1, 0), 4, 0, 0);
    nb_ck_close(nb_tensor_grad(lo), V(0, 0, 0, 0), 4, 0, 0);
    nb_ck_close(nb_tensor_grad(hi), V(0, 0, 0, 1), 4, 0, 0);
    /* rounding divisions have zero gradients; remainder's d/db = -floor(a/b) */
    nb_tensor *c = leaf(2, V(-7, 7)), *d = leaf(2, V(2, 2));
    NB_CK_OK(nb_backward(nb_sum(nb_floor_divide(c, d), NULL, 0, false)));
    ck_grads(c, d, V(0, 0), V(0, 0), 2);
    NB_CK_OK(nb_backward(nb_sum(nb_remainder(c, d), NULL, 0, false)));
    ck_grads(c, d, V(1, 1), V(4, -3), 2);
    NB_CK_OK(nb_backward(nb_sum(nb_fmod(c, d), NULL, 0, false)));
    ck_grads(c, d, V(1, 1), V(3, -3), 2);
    nb_scope_end(s);
}
END_TEST

static double frac_off(double x) { return 2 * x + 0.37; } /* keeps a/b off integers here */

START_TEST(test_gradcheck_binary_new) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(3, 4), 31), *b = nb_test_randn_grad(NB_SHAPE(3, 4), 32);
    nb_tensor *fa = leaf_map(NB_SHAPE(3, 4), 33, frac_off), *bz = leaf_map(NB_SHAPE(3, 4), 34, away0);
    gc2(f_remainder, fa, bz);
    gc2(f_fmod, fa, bz);
    gc1(f_remainder_scalar, fa);
    gc2(f_atan2, a, b);
    gc2(f_maximum, a, b);
    gc2(f_minimum, a, b);
    gc2(f_lerp_lo, a, b);
    gc2(f_lerp_hi, a, b);
    gc1(f_clamp_scalar, leaf_map(NB_SHAPE(3, 4), 35, frac_off));
    gc1(f_clamp_min, a);
    gc1(f_clamp_max, a);
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(3, 4), 36); /* both lerp branches */
    nb_tensor *in3[3] = {a, b, w};
    nb_ck_gradcheck(f_lerp, in3, 3, NULL);
    nb_tensor *lo = nb_test_randn_grad(NB_SHAPE(3, 4), 37), *hi = nb_test_randn_grad(NB_SHAPE(3, 4), 38);
    nb_tensor *cin[3] = {a, lo, hi};
    nb_ck_gradcheck(f_clamp, cin, 3, NULL);
    /* broadcast: [3, 4] with [4] and [3, 1] */
    nb_tensor *row = nb_test_randn_grad(NB_SHAPE(4), 39), *col = nb_test_randn_grad(NB_SHAPE(3, 1), 40);
    gc2(f_atan2, row, col);
    gc2(f_maximum, a, row);
    nb_tensor *cin2[3] = {a, row, col};
    nb_ck_gradcheck(f_clamp, cin2, 3, NULL);
    nb_tensor *lin[3] = {row, col, a};
    nb_ck_gradcheck(f_lerp, lin, 3, NULL);
    gc2(f_clamp_hi, a, col);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients by hand ------------------------------------------------------ */

START_TEST(test_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* relu'(0) = 0, as PyTorch */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0, 1, -1});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_sum(nb_relu(x), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 1, 0}, 3, 0, 0);
    /* sqrt'(4) = 1/4, log'(x) = 1/x, d(a/b)/db = -a/b^2 */
    nb_tensor *y = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){4, 0.5});
    NB_CK_OK(nb_set_requires_grad(y, true));
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_sqrt(y), nb_log(y)), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(y), (double[]){0.25 + 0.25, 0.5 / sqrt(0.5) + 2}, 2, 0, 1e-15);
    nb_tensor *a = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){2});
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward(nb_sum(nb_div(a, b), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(a), (double[]){0.5}, 1, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(b), (double[]){-0.75}, 1, 0, 1e-15);
    /* d(a^b)/da = b a^(b-1) = 2*3 = 6, d/db = a^b ln a = 9 ln 3 */
    nb_tensor_zero_grad(a), nb_tensor_zero_grad(b);
    NB_CK_OK(nb_backward(nb_sum(nb_pow(a, b), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(a), (double[]){6}, 1, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(b), (double[]){9 * log(3.0)}, 1, 0, 1e-15);
    /* gradient through a cast: float64 -> float32 -> float64 keeps float64 grads */
    nb_tensor *c = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    NB_CK_OK(nb_set_requires_grad(c, true));
    nb_tensor *c32 = nb_to_dtype(c, NB_F32);
    ck_assert(nb_requires_grad(c32));
    NB_CK_OK(nb_backward(nb_sum(nb_to_dtype(nb_mul_scalar(c32, 3), NB_F64), NULL, 0, false)));
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(c)), NB_F64);
    nb_ck_close(nb_tensor_grad(c), (double[]){3, 3}, 2, 0, 0);
    /* a cast to an integer type is not differentiable */
    ck_assert(!nb_requires_grad(nb_to_dtype(c, NB_I32)));
    nb_scope_end(s);
}
END_TEST

/* Broadcast gradients are summed back to each input's shape. */
START_TEST(test_broadcast_grad_shapes) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(3, 1), NB_F64, (double[]){1, 2, 3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(1, 4), NB_F64, (double[]){1, 10, 100, 1000});
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(a, b), NULL, 0, false)));
    nb_ck_shape(nb_tensor_grad(a), 2, (int64_t[]){3, 1});
    nb_ck_shape(nb_tensor_grad(b), 2, (int64_t[]){1, 4});
    nb_ck_close(nb_tensor_grad(a), (double[]){1111, 1111, 1111}, 3, 0, 0); /* sum of b */
    nb_ck_close(nb_tensor_grad(b), (double[]){6, 6, 6, 6}, 4, 0, 0);       /* sum of a */
    /* [4] + [2, 3, 4]: the [4] input gets the sum over 6 rows */
    nb_tensor *v = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0, 0, 0, 0});
    nb_tensor *m = nb_ones(NB_SHAPE(2, 3, 4), NB_F64);
    NB_CK_OK(nb_set_requires_grad(v, true));
    NB_CK_OK(nb_set_requires_grad(m, true));
    NB_CK_OK(nb_backward(nb_sum(nb_sub(v, m), NULL, 0, false)));
    nb_ck_shape(nb_tensor_grad(v), 1, (int64_t[]){4});
    nb_ck_close(nb_tensor_grad(v), (double[]){6, 6, 6, 6}, 4, 0, 0);
    nb_ck_shape(nb_tensor_grad(m), 3, (int64_t[]){2, 3, 4});
    double neg[24];
    for (int i = 0; i < 24; i++) neg[i] = -1;
    nb_ck_close(nb_tensor_grad(m), neg, 24, 0, 0);
    /* a 0-d operand */
    nb_tensor *sc = nb_scalar(2, NB_F64);
    NB_CK_OK(nb_set_requires_grad(sc, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(m, sc), NULL, 0, false)));
    ck_assert_int_eq(nb_dim(nb_tensor_grad(sc)), 0);
    ck_assert_double_eq(nb_item(nb_tensor_grad(sc)), 24);
    nb_scope_end(s);
}
END_TEST

/* ---- gradchecks ------------------------------------------------------------------ */

START_TEST(test_gradcheck_binary) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(3, 4), 1), *b = nb_test_randn_grad(NB_SHAPE(3, 4), 2);
    gc2(f_add, a, b);
    gc2(f_sub, a, b);
    gc2(f_mul, a, b);
    gc2(f_div, a, leaf_map(NB_SHAPE(3, 4), 3, away0));
    gc2(f_pow, leaf_map(NB_SHAPE(3, 4), 4, positive), b);
    gc2(f_chain, a, b);
    /* one input constant: only the other gets a gradient */
    nb_tensor *c = nb_randn(NB_SHAPE(3, 4), NB_F64, NULL);
    gc2(f_mul, a, c);
    gc2(f_sub, c, b);
    gc2(f_div, c, leaf_map(NB_SHAPE(3, 4), 5, away0));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_broadcast) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *col = nb_test_randn_grad(NB_SHAPE(3, 1), 10), *row = nb_test_randn_grad(NB_SHAPE(1, 4), 11);
    gc2(f_add, col, row);
    gc2(f_sub, col, row);
    gc2(f_mul, col, row);
    gc2(f_div, col, leaf_map(NB_SHAPE(1, 4), 12, away0));
    gc2(f_pow, leaf_map(NB_SHAPE(3, 1), 13, positive), row);
    nb_tensor *v = nb_test_randn_grad(NB_SHAPE(4), 14), *m = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 15);
    gc2(f_add, v, m);
    gc2(f_sub, v, m);
    gc2(f_mul, m, v);
    gc2(f_div, m, leaf_map(NB_SHAPE(4), 16, away0));
    gc2(f_div, v, leaf_map(NB_SHAPE(2, 3, 4), 17, away0));
    gc2(f_pow, leaf_map(NB_SHAPE(2, 3, 4), 18, positive), v);
    gc2(f_mul, m, nb_test_randn_grad(0, NULL, 19)); /* 0-d */
    nb_scope_end(s);
}
END_TEST

/* ---- float32 against float64 ----------------------------------------------- */

typedef nb_tensor *(*unary_op_fn)(nb_tensor *);
typedef nb_tensor *(*binary_op_fn)(nb_tensor *, nb_tensor *);

/* |f32 - f64| <= 1e-5 |f64| + 1e-6, with the f64 run on the f32-rounded inputs. */
static void ck_f32_matches(const nb_tensor *r32, const nb_tensor *r64) {
    int64_t n = nb_numel(r64);
    double *want = malloc(sizeof(double) * (size_t)n);
    ck_assert_ptr_nonnull(want);
    nb_test_values(r64, want, n);
    ck_assert_int_eq(nb_dtype_of(r32), NB_F32);
    nb_ck_close(r32, want, n, 1e-6, 1e-5);
    free(want);
}

START_TEST(test_float32_matches_float64) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(99);
    nb_tensor *x32 = nb_randn(NB_SHAPE(8, 16), NB_F32, &g), *y32 = nb_randn(NB_SHAPE(8, 16), NB_F32, &g);
    nb_tensor *x64 = nb_to_dtype(x32, NB_F64), *y64 = nb_to_dtype(y32, NB_F64);
    const unary_op_fn un[] = {nb_exp, nb_neg, nb_relu, nb_sigmoid, nb_tanh};
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) ck_f32_matches(un[i](x32), un[i](x64));
    nb_tensor *p32 = nb_exp(x32), *p64 = nb_to_dtype(p32, NB_F64);
    ck_f32_matches(nb_log(p32), nb_log(p64));
    ck_f32_matches(nb_sqrt(p32), nb_sqrt(p64));
    ck_f32_matches(nb_pow_scalar(p32, 1.5), nb_pow_scalar(p64, 1.5));
    ck_f32_matches(nb_pow(p32, y32), nb_pow(p64, y64));
    ck_f32_matches(nb_add_scalar(x32, 0.25), nb_add_scalar(x64, 0.25));
    ck_f32_matches(nb_mul_scalar(x32, 3), nb_mul_scalar(x64, 3));
    const binary_op_fn bin[] = {nb_add, nb_sub, nb_mul};
    for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) ck_f32_matches(bin[i](x32, y32), bin[i](x64, y64));
    ck_f32_matches(nb_div(x32, p32), nb_div(x64, p64));
    /* broadcast and a gradient in float32 */
    nb_tensor *r32 = nb_narrow(y32, 0, 0, 1), *r64 = nb_narrow(y64, 0, 0, 1);
    ck_f32_matches(nb_mul(x32, r32), nb_mul(x64, r64));
    NB_CK_OK(nb_set_requires_grad(x32, true));
    NB_CK_OK(nb_set_requires_grad(x64, true));
    NB_CK_OK(nb_backward(nb_sum(nb_tanh(nb_mul(x32, r32)), NULL, 0, false)));
    NB_CK_OK(nb_backward(nb_sum(nb_tanh(nb_mul(x64, r64)), NULL, 0, false)));
    ck_f32_matches(nb_tensor_grad(x32), nb_tensor_grad(x64));
    nb_scope_end(s);
}
END_TEST

/* Regression (issue 13): lerp's weight gradient is (end - start) g, +-inf
 * where end - start is infinite (the composite gave NaN). */
START_TEST(test_lerp_grad_infinite_range) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(1, (int64_t[]){3}, NB_F64, (double[]){0, 0, 1});
    nb_tensor *b = nb_test_tensor(1, (int64_t[]){3}, NB_F64, (double[]){INFINITY, -INFINITY, 3});
    nb_tensor *w = nb_test_tensor(1, (int64_t[]){3}, NB_F64, (double[]){0.3, 0.7, 0.25});
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_backward(nb_sum(nb_lerp(a, b, w), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(w), (double[]){INFINITY, -INFINITY, 2}, 3, 0, 0);
    nb_ck_close(nb_tensor_grad(a), (double[]){0.7, 0.3, 0.75}, 3, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(b), (double[]){0.3, 0.7, 0.25}, 3, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

/* torch.isclose / allclose: PyTorch's rule by hand (the differential suite
 * compares many more). */
START_TEST(test_isclose_allclose) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, INFINITY, NAN, 1e-9, 100});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1 + 1e-6, INFINITY, NAN, 0, 100.002});
    nb_ck_close(nb_to_dtype(nb_isclose(a, b, 1e-5, 1e-8, false), NB_F64), (double[]){1, 1, 0, 1, 0}, 5, 0, 0);
    nb_ck_close(nb_to_dtype(nb_isclose(a, b, 1e-5, 1e-8, true), NB_F64), (double[]){1, 1, 1, 1, 0}, 5, 0, 0);
    nb_ck_close(nb_to_dtype(nb_isclose(a, b, 1e-4, 0, true), NB_F64), (double[]){1, 1, 1, 0, 1}, 5, 0, 0);
    bool r = true;
    NB_CK_OK(nb_allclose(a, b, 1e-5, 1e-8, true, &r));
    ck_assert(!r);
    NB_CK_OK(nb_allclose(a, a, 0, 0, true, &r));
    ck_assert(r);
    NB_CK_FAILS(nb_isclose(a, nb_to_dtype(b, NB_F32), 1e-5, 1e-8, false), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_isclose(a, b, -1, 1e-8, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_allclose(a, nb_ones(NB_SHAPE(4), NB_F64), 1e-5, 1e-8, false, &r) == NB_OK, NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_binary(void) {
    Suite *s = suite_create("ops_binary");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_binary_forward);
    tcase_add_test(f, test_isclose_allclose);
    tcase_add_test(f, test_lerp_grad_infinite_range);
    tcase_add_test(f, test_integer_and_comparison_ops);
    tcase_add_test(f, test_comparisons);
    tcase_add_test(f, test_float32_matches_float64);
    tcase_add_test(f, test_division_semantics);
    tcase_add_test(f, test_integer_division_edge_cases);
    tcase_add_test(f, test_binary_new_forward);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_grad_by_hand);
    tcase_add_test(g, test_broadcast_grad_shapes);
    tcase_add_test(g, test_gradcheck_binary);
    tcase_add_test(g, test_gradcheck_broadcast);
    tcase_add_test(g, test_binary_new_grad_by_hand);
    tcase_add_test(g, test_gradcheck_binary_new);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
