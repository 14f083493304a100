/* test_ops_binary_logic.c - comparisons (tensor and scalar forms, NaN),
 * NaN/inf tests, logical and bitwise ops, shifts, and type promotion: the
 * promote_types table, torch.result_type's 0-dim and scalar rules, and
 * mixed-dtype ops with their gradients' dtypes. Reference values are
 * PyTorch's documented results or computed by hand. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *t1(nb_dtype dt, int n, const double *v) { return nb_test_tensor(1, (int64_t[]){n}, dt, v); }
#define T(dt, ...) t1(dt, (int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__})
#define CK(t, ...) \
    nb_ck_close(t, (double[]){__VA_ARGS__}, (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), 0, 0)

static void ck_bool(nb_tensor *t, const double *v, int n) {
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_dtype_of(t), NB_BOOL);
    nb_ck_close(t, v, n, 0, 0);
}
#define CKB(t, ...) ck_bool(t, (double[]){__VA_ARGS__}, (int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)))

/* ---- comparisons ------------------------------------------------------------ */

START_TEST(test_compare_all) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = T(NB_F64, 1, 2, 3, NAN), *b = T(NB_F64, 2, 2, 2, 2);
    CKB(nb_eq(a, b), 0, 1, 0, 0);
    CKB(nb_ne(a, b), 1, 0, 1, 1); /* NaN != x is true */
    CKB(nb_gt(a, b), 0, 0, 1, 0);
    CKB(nb_ge(a, b), 0, 1, 1, 0);
    CKB(nb_lt(a, b), 1, 0, 0, 0);
    CKB(nb_le(a, b), 1, 1, 0, 0);
    CKB(nb_eq(a, a), 1, 1, 1, 0); /* NaN != NaN */
    /* scalar forms */
    CKB(nb_eq_scalar(a, 2), 0, 1, 0, 0);
    CKB(nb_ne_scalar(a, 2), 1, 0, 1, 1);
    CKB(nb_gt_scalar(a, 2), 0, 0, 1, 0);
    CKB(nb_ge_scalar(a, 2), 0, 1, 1, 0);
    CKB(nb_lt_scalar(a, 2), 1, 0, 0, 0);
    CKB(nb_le_scalar(a, 2), 1, 1, 0, 0);
    CKB(nb_lt_scalar(a, NAN), 0, 0, 0, 0);
    /* an integer tensor against a fractional scalar compares as float32 */
    CKB(nb_gt_scalar(T(NB_I32, 1, 2, 3), 1.5), 0, 1, 1);
    CKB(nb_eq_scalar(T(NB_U8, 0, 255), 255.0), 0, 1);
    /* mixed dtypes compare in the promoted dtype */
    CKB(nb_lt(T(NB_I32, 1, 2, 3), T(NB_F32, 1.5, 1.5, 3.5)), 1, 0, 1);
    CKB(nb_eq(T(NB_U8, 200, 1), T(NB_I64, 200, -255)), 1, 0);
    CKB(nb_le(T(NB_BOOL, 0, 1, 1), T(NB_I32, 0, 0, 2)), 1, 0, 1);
    /* broadcasting and errors */
    nb_tensor *g = nb_ge(nb_reshape(T(NB_F32, 1, 2), NB_SHAPE(2, 1)), T(NB_F32, 0, 1, 2));
    nb_ck_shape(g, 2, (int64_t[]){2, 3});
    CKB(g, 1, 1, 0, 1, 1, 1);
    NB_CK_FAILS(nb_le(T(NB_F32, 1, 2), T(NB_F32, 1, 2, 3)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "le"));
    NB_CK_FAILS(nb_lt(NULL, T(NB_F32, 1)), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_nan_tests) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = T(NB_F64, 1, NAN, INFINITY, -INFINITY, -0.0, 1e308);
    CKB(nb_isnan(x), 0, 1, 0, 0, 0, 0);
    CKB(nb_isinf(x), 0, 0, 1, 1, 0, 0);
    CKB(nb_isfinite(x), 1, 0, 0, 0, 1, 1);
    nb_tensor *f = nb_to_dtype(x, NB_F32);
    CKB(nb_isinf(f), 0, 0, 1, 1, 0, 1); /* 1e308 overflows to inf in float32 */
    CKB(nb_isfinite(f), 1, 0, 0, 0, 1, 0);
    /* integers and bool: never NaN or inf */
    nb_tensor *i = T(NB_I64, 1, -5);
    CKB(nb_isnan(i), 0, 0);
    CKB(nb_isinf(i), 0, 0);
    CKB(nb_isfinite(T(NB_BOOL, 1, 0)), 1, 1);
    nb_ck_shape(nb_isnan(nb_zeros(NB_SHAPE(2, 3), NB_U8)), 2, (int64_t[]){2, 3});
    /* float16 inputs are tested through an exact float32 cast */
    nb_tensor *h = nb_to_dtype(T(NB_F32, 1, NAN, -INFINITY), NB_F16);
    CKB(nb_isnan(h), 0, 1, 0);
    CKB(nb_isinf(h), 0, 0, 1);
    CKB(nb_logical_not(h), 0, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- logical and bitwise ---------------------------------------------------- */

START_TEST(test_logical) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = T(NB_F32, 0, 0, 2.5, NAN), *b = T(NB_I32, 0, 7, 0, -1);
    CKB(nb_logical_and(a, b), 0, 0, 0, 1);
    CKB(nb_logical_or(a, b), 0, 1, 1, 1);
    CKB(nb_logical_xor(a, b), 0, 1, 1, 0);
    CKB(nb_logical_not(a), 1, 1, 0, 0); /* NaN is true */
    CKB(nb_logical_not(T(NB_BOOL, 1, 0)), 0, 1);
    CKB(nb_logical_not(T(NB_U8, 0, 3)), 1, 0);
    nb_tensor *g = nb_logical_and(nb_reshape(T(NB_BOOL, 1, 0), NB_SHAPE(2, 1)), T(NB_BOOL, 1, 0, 1));
    nb_ck_shape(g, 2, (int64_t[]){2, 3});
    CKB(g, 1, 0, 1, 0, 0, 0);
    NB_CK_FAILS(nb_logical_or(T(NB_BOOL, 1, 0), T(NB_BOOL, 1, 0, 1)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_bitwise) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = T(NB_I32, 12, -1, 5, -8), *b = T(NB_I32, 10, 6, -3, 3);
    CK(nb_bitwise_and(a, b), 8, 6, 5, 0);
    CK(nb_bitwise_or(a, b), 14, -1, -3, -5);
    CK(nb_bitwise_xor(a, b), 6, -7, -8, -5);
    CK(nb_bitwise_not(a), -13, 0, -6, 7);
    ck_assert_int_eq(nb_dtype_of(nb_bitwise_and(a, b)), NB_I32);
    nb_tensor *u = T(NB_U8, 0xF0, 0x0F, 0xFF), *v = T(NB_U8, 0x3C, 0x3C, 0x01);
    CK(nb_bitwise_and(u, v), 0x30, 0x0C, 0x01);
    CK(nb_bitwise_or(u, v), 0xFC, 0x3F, 0xFF);
    CK(nb_bitwise_xor(u, v), 0xCC, 0x33, 0xFE);
    CK(nb_bitwise_not(u), 0x0F, 0xF0, 0x00);
    nb_tensor *p = T(NB_BOOL, 1, 1, 0, 0), *q = T(NB_BOOL, 1, 0, 1, 0);
    CKB(nb_bitwise_and(p, q), 1, 0, 0, 0);
    CKB(nb_bitwise_or(p, q), 1, 1, 1, 0);
    CKB(nb_bitwise_xor(p, q), 0, 1, 1, 0);
    CKB(nb_bitwise_not(p), 0, 0, 1, 1);
    /* promotion: u8 with i32 is i32; bool with u8 is u8 */
    nb_tensor *m = nb_bitwise_or(T(NB_U8, 0x80), T(NB_I32, 0x100));
    ck_assert_int_eq(nb_dtype_of(m), NB_I32);
    CK(m, 0x180);
    ck_assert_int_eq(nb_dtype_of(nb_bitwise_and(T(NB_BOOL, 1), T(NB_U8, 3))), NB_U8);
    /* int64 beyond 2^53 stays exact */
    int64_t big[1] = {(int64_t)1 << 62 | 1}, one[1] = {1}, r[1];
    NB_CK_OK(nb_to_host(nb_bitwise_xor(nb_from_data(big, NB_SHAPE(1), NB_I64), nb_from_data(one, NB_SHAPE(1), NB_I64)),
                        r, sizeof r));
    ck_assert(r[0] == (int64_t)1 << 62);
    NB_CK_FAILS(nb_bitwise_and(T(NB_F32, 1), T(NB_I32, 1)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_bitwise_not(T(NB_F64, 1)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_bitwise_xor(T(NB_I32, 1, 2), T(NB_I32, 1, 2, 3)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_shifts) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = T(NB_I32, 1, -16, 3, -1, 5, -5, 7);
    nb_tensor *n = T(NB_I32, 4, 2, 31, 0, 32, 40, -1);
    /* 3 << 31 wraps to INT_MIN; shifts >= 32 or < 0 give 0 */
    CK(nb_bitwise_left_shift(a, n), 16, -64, -2147483648.0, -1, 0, 0, 0);
    /* arithmetic right shift; out of range gives the sign fill */
    CK(nb_bitwise_right_shift(a, n), 0, -4, 0, -1, 0, -1, 0);
    CK(nb_bitwise_right_shift(T(NB_I32, -17), T(NB_I32, 2)), -5); /* floor(-17 / 4) */
    nb_tensor *u = T(NB_U8, 0x81, 0x81, 0x81, 0x81);
    nb_tensor *un = T(NB_U8, 1, 7, 8, 200);
    CK(nb_bitwise_left_shift(u, un), 0x02, 0x80, 0, 0);
    CK(nb_bitwise_right_shift(u, un), 0x40, 0x01, 0, 0);
    int64_t x[2] = {-((int64_t)1 << 62), 3}, k[2] = {1, 62}, r[2];
    nb_tensor *xl = nb_from_data(x, NB_SHAPE(2), NB_I64), *kl = nb_from_data(k, NB_SHAPE(2), NB_I64);
    NB_CK_OK(nb_to_host(nb_bitwise_right_shift(xl, kl), r, sizeof r));
    ck_assert(r[0] == -((int64_t)1 << 61) && r[1] == 0);
    NB_CK_OK(nb_to_host(nb_bitwise_left_shift(xl, kl), r, sizeof r));
    ck_assert(r[0] == INT64_MIN && r[1] == (int64_t)((uint64_t)3 << 62));
    /* promotion: u8 << i32 is i32 */
    nb_tensor *p = nb_bitwise_left_shift(T(NB_U8, 255), T(NB_I32, 4));
    ck_assert_int_eq(nb_dtype_of(p), NB_I32);
    CK(p, 4080);
    NB_CK_FAILS(nb_bitwise_left_shift(T(NB_BOOL, 1), T(NB_BOOL, 1)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_bitwise_right_shift(T(NB_F32, 1), T(NB_I32, 1)), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* ---- type promotion --------------------------------------------------------- */

START_TEST(test_promote_types_table) {
    /* rows/cols in enum order F32 F64 I32 I64 U8 BOOL F16 BF16: torch.promote_types */
    const nb_dtype f = NB_F32, d = NB_F64, i = NB_I32, l = NB_I64, u = NB_U8, b = NB_BOOL, h = NB_F16, z = NB_BF16;
    const nb_dtype want[8][8] = {
        /*        f  d  i  l  u  b  h  z */
        /* f */ {f, d, f, f, f, f, f, f},
        /* d */ {d, d, d, d, d, d, d, d},
        /* i */ {f, d, i, l, i, i, h, z},
        /* l */ {f, d, l, l, l, l, h, z},
        /* u */ {f, d, i, l, u, u, h, z},
        /* b */ {f, d, i, l, u, b, h, z},
        /* h */ {f, d, h, h, h, h, h, f},
        /* z */ {f, d, z, z, z, z, f, z},
    };
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            ck_assert_msg(nb_promote_types((nb_dtype)r, (nb_dtype)c) == want[r][c], "promote(%s, %s) = %s",
                          nb_dtype_name((nb_dtype)r), nb_dtype_name((nb_dtype)c),
                          nb_dtype_name(nb_promote_types((nb_dtype)r, (nb_dtype)c)));
    ck_assert_int_eq(nb_promote_types(NB_DTYPE_COUNT, NB_F32), NB_DTYPE_COUNT);
}
END_TEST

START_TEST(test_result_type_zero_dim) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *f32v = nb_zeros(NB_SHAPE(3), NB_F32), *i32v = nb_zeros(NB_SHAPE(3), NB_I32);
    nb_tensor *u8v = nb_zeros(NB_SHAPE(3), NB_U8), *bv = nb_zeros(NB_SHAPE(3), NB_BOOL);
    nb_tensor *f64s = nb_scalar(1, NB_F64), *f32s = nb_scalar(1, NB_F32), *i64s = nb_scalar(1, NB_I64);
    /* dimensioned wins within a category */
    ck_assert_int_eq(nb_result_type(f32v, f64s), NB_F32);
    ck_assert_int_eq(nb_result_type(f64s, f32v), NB_F32);
    ck_assert_int_eq(nb_result_type(i32v, i64s), NB_I32);
    ck_assert_int_eq(nb_result_type(u8v, i64s), NB_U8); /* torch.result_type doc example */
    /* a 0-dim tensor of a higher category joins */
    ck_assert_int_eq(nb_result_type(i32v, f32s), NB_F32);
    ck_assert_int_eq(nb_result_type(i32v, f64s), NB_F64);
    ck_assert_int_eq(nb_result_type(bv, i64s), NB_I64);
    /* both 0-dim or both dimensioned: plain promotion */
    ck_assert_int_eq(nb_result_type(f32s, f64s), NB_F64);
    ck_assert_int_eq(nb_result_type(u8v, i32v), NB_I32);
    ck_assert_int_eq(nb_result_type(f32v, nb_zeros(NB_SHAPE(1), NB_F64)), NB_F64);
    /* ops follow it */
    nb_tensor *r = nb_mul(T(NB_F32, 1.5, 2), f64s);
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    CK(r, 1.5, 2);
    ck_assert_int_eq(nb_dtype_of(nb_add(T(NB_I32, 1), nb_scalar(0.5, NB_F64))), NB_F64);
    ck_assert_int_eq(nb_dtype_of(nb_add(T(NB_U8, 250), nb_scalar(10, NB_I64))), NB_U8);
    CK(nb_add(T(NB_U8, 250), nb_scalar(10, NB_I64)), 4); /* uint8 wraps, as PyTorch */
    nb_scope_end(s);
}
END_TEST

START_TEST(test_mixed_dtype_ops) {
    nb_scope *s = nb_scope_begin();
    /* scalar forms: a double with an int tensor gives float32 */
    nb_tensor *r = nb_remainder_scalar(T(NB_I32, 7, -7), 2.5);
    ck_assert_int_eq(nb_dtype_of(r), NB_F32);
    CK(r, 2, 0.5);
    ck_assert_int_eq(nb_dtype_of(nb_fmod_scalar(T(NB_F64, 1), 0.5)), NB_F64);
    /* tensor-tensor */
    nb_tensor *m = nb_mul(T(NB_I32, 2, 3), T(NB_F32, 0.5, 0.25));
    ck_assert_int_eq(nb_dtype_of(m), NB_F32);
    CK(m, 1, 0.75);
    nb_tensor *a = nb_add(T(NB_U8, 200, 1), T(NB_I32, 100, -2));
    ck_assert_int_eq(nb_dtype_of(a), NB_I32);
    CK(a, 300, -1);
    nb_tensor *bl = nb_add(T(NB_BOOL, 1, 0), T(NB_BOOL, 1, 1)); /* bool + bool = or */
    ck_assert_int_eq(nb_dtype_of(bl), NB_BOOL);
    CK(bl, 1, 1);
    CK(nb_sub(T(NB_BOOL, 1, 0), T(NB_I64, 5, 5)), -4, -5);
    nb_tensor *mx = nb_maximum(T(NB_I64, 1, 9), T(NB_F64, 2.5, 3));
    ck_assert_int_eq(nb_dtype_of(mx), NB_F64);
    CK(mx, 2.5, 9);
    ck_assert_int_eq(nb_dtype_of(nb_atan2(T(NB_I32, 1), T(NB_I32, 1))), NB_F32);
    ck_assert_int_eq(nb_dtype_of(nb_pow(T(NB_I32, 3), T(NB_I32, 4))), NB_I32);
    CK(nb_pow(T(NB_I32, 3, -2, 2, 1, -1, 5), T(NB_I32, 4, 3, -1, -3, -3, 0)), 81, -8, 0, 1, -1, 1);
    /* f16 joins with f32 (cast first); f16 with f16 stays f16 (float32 math inside) */
    nb_tensor *h = nb_to_dtype(T(NB_F32, 1.5, -2), NB_F16);
    nb_tensor *hs = nb_add(h, T(NB_F32, 1, 1));
    ck_assert_int_eq(nb_dtype_of(hs), NB_F32);
    CK(hs, 2.5, -1);
    nb_tensor *hh = nb_add(h, h);
    ck_assert_int_eq(nb_dtype_of(hh), NB_F16);
    CK(nb_to_dtype(hh, NB_F32), 3, -4);
    nb_scope_end(s);
}
END_TEST

/* gradients come back in each input's dtype */
START_TEST(test_mixed_dtype_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = T(NB_F32, 1, 2, 3), *b = T(NB_F64, 4, 5, 6);
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    nb_tensor *y = nb_mul(a, b);
    ck_assert_int_eq(nb_dtype_of(y), NB_F64);
    NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(a)), NB_F32);
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(b)), NB_F64);
    nb_ck_close(nb_tensor_grad(a), (double[]){4, 5, 6}, 3, 0, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){1, 2, 3}, 3, 0, 0);
    /* a 0-dim float64 scale on a float32 tensor: the result stays float32 */
    nb_tensor *w = T(NB_F32, 1, 2), *k = nb_scalar(3, NB_F64);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_set_requires_grad(k, true));
    nb_tensor *z = nb_mul(w, k);
    ck_assert_int_eq(nb_dtype_of(z), NB_F32);
    NB_CK_OK(nb_backward(nb_sum(z, NULL, 0, false)));
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(k)), NB_F64);
    ck_assert_double_eq(nb_item(nb_tensor_grad(k)), 3);
    nb_ck_close(nb_tensor_grad(w), (double[]){3, 3}, 2, 0, 0);
    /* an integer operand gets no gradient */
    nb_tensor *x = T(NB_F64, 1, 2);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(x, T(NB_I32, 3, 4)), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){3, 4}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* An integral scalar acts as a Python int: int64 compares stay exact past
 * 2^24 and the result of remainder keeps the integer dtype; 2.5 is a float. */
START_TEST(test_scalar_int_exact) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){16777217, 16777216});
    nb_ck_close(nb_eq_scalar(t, 16777216), (double[]){0, 1}, 2, 0, 0);
    nb_tensor *r = nb_remainder_scalar(t, 3);
    ck_assert_int_eq(nb_dtype_of(r), NB_I64);
    nb_ck_close(r, (double[]){16777217 % 3, 16777216 % 3}, 2, 0, 0);
    ck_assert_int_eq(nb_dtype_of(nb_lt_scalar(t, 2.5)), NB_BOOL);
    ck_assert_int_eq(nb_dtype_of(nb_remainder_scalar(t, 2.5)), NB_F32);
    ck_assert_int_eq(nb_dtype_of(nb_clamp_scalar(t, 0, 10)), NB_I64);
    nb_scope_end(s);
}
END_TEST

/* x & 6 etc.: the scalar acts as a Python int. */
START_TEST(test_bitwise_scalar) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2), NB_I32, (double[]){5, 12});
    nb_tensor *r = nb_bitwise_and_scalar(x, 6);
    ck_assert_int_eq(nb_dtype_of(r), NB_I32);
    nb_ck_close(r, (double[]){4, 4}, 2, 0, 0);
    nb_ck_close(nb_bitwise_or_scalar(x, 1), (double[]){5, 13}, 2, 0, 0);
    nb_ck_close(nb_bitwise_xor_scalar(x, 3), (double[]){6, 15}, 2, 0, 0);
    nb_ck_close(nb_bitwise_left_shift_scalar(x, 2), (double[]){20, 48}, 2, 0, 0);
    nb_ck_close(nb_bitwise_right_shift_scalar(nb_neg(x), 1), (double[]){-3, -6}, 2, 0, 0);
    nb_tensor *b = nb_bitwise_and_scalar(nb_gt_scalar(x, 6), 1);
    ck_assert_int_eq(nb_dtype_of(b), NB_I64);
    nb_ck_close(b, (double[]){0, 1}, 2, 0, 0);
    NB_CK_FAILS(nb_bitwise_and_scalar(nb_zeros(NB_SHAPE(2), NB_F32), 1), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_binary_logic(void) {
    Suite *s = suite_create("ops_binary_logic");
    TCase *c = tcase_create("compare_logic");
    tcase_add_test(c, test_compare_all);
    tcase_add_test(c, test_nan_tests);
    tcase_add_test(c, test_logical);
    tcase_add_test(c, test_bitwise);
    tcase_add_test(c, test_shifts);
    suite_add_tcase(s, c);
    TCase *p = tcase_create("promotion");
    tcase_add_test(p, test_promote_types_table);
    tcase_add_test(p, test_result_type_zero_dim);
    tcase_add_test(p, test_mixed_dtype_ops);
    tcase_add_test(p, test_mixed_dtype_grad);
    tcase_add_test(p, test_scalar_int_exact);
    tcase_add_test(p, test_bitwise_scalar);
    suite_add_tcase(s, p);
    return s;
}
