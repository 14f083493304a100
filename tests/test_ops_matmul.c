/* test_ops_matmul.c - matmul (torch.matmul's 1-D, 2-D, batched and
 * broadcast cases, strided operands) and linear_fn: forward values against
 * a host reference, gradients by hand, gradchecks of every case, error
 * paths, and float32 against float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

#define BINARY_FN(name, expr)                                                  \
    static nb_tensor *name(nb_tensor *const *in, int n, void *ctx) {           \
        (void)n, (void)ctx;                                                    \
        nb_tensor *a = in[0], *b = in[1];                                      \
        return expr;                                                           \
    }

BINARY_FN(f_matmul, nb_matmul(a, b))
BINARY_FN(f_matmul_tt, nb_matmul(nb_transpose(a, 0, 1), nb_transpose(b, 0, 1)))
BINARY_FN(f_matmul_bt, nb_matmul(a, nb_transpose(b, -1, -2)))
BINARY_FN(f_linear_nobias, nb_linear(a, b, NULL))
BINARY_FN(f_linear_xt, nb_linear(nb_transpose(a, 0, 1), b, NULL))

static nb_tensor *f_linear(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linear(in[0], in[1], in[2]);
}

static void gc2(nb_gradcheck_fn f, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    nb_ck_gradcheck(f, in, 2, NULL);
}

/* Host reference: c[n,m] = a[n,k] b[k,m]. */
static void ref_mm(const double *a, const double *b, int n, int k, int m, double *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += a[i * k + p] * b[p * m + j];
            c[i * m + j] = s;
        }
}

/* ---- forward ------------------------------------------------------------------- */

START_TEST(test_matmul_forward_small) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){5, 6, 7, 8});
    nb_tensor *c = nb_matmul(a, b);
    nb_ck_shape(c, 2, (int64_t[]){2, 2});
    nb_ck_close(c, (double[]){19, 22, 43, 50}, 4, 0, 0);
    /* 1-D . 1-D: a 0-d dot product */
    nb_tensor *u = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *v = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){4, 5, 6});
    nb_tensor *d = nb_matmul(u, v);
    ck_assert_int_eq(nb_dim(d), 0);
    ck_assert_double_eq(nb_item(d), 32);
    /* 2-D x 1-D and 1-D x 2-D */
    nb_tensor *m23 = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *mv = nb_matmul(m23, nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 0, -1}));
    nb_ck_shape(mv, 1, (int64_t[]){2});
    nb_ck_close(mv, (double[]){-2, -2}, 2, 0, 0);
    nb_tensor *vm = nb_matmul(u, nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6}));
    nb_ck_shape(vm, 1, (int64_t[]){2});
    nb_ck_close(vm, (double[]){22, 28}, 2, 0, 0);
    /* transposed operands: a^T b^T = (b a)^T = [[23, 31], [34, 46]] */
    nb_ck_close(nb_matmul(nb_transpose(a, 0, 1), nb_transpose(b, 0, 1)), (double[]){23, 31, 34, 46}, 4, 0, 0);
    /* a stride-0 (expanded) operand: every row of the result is the same */
    nb_tensor *row = nb_expand(nb_test_tensor(NB_SHAPE(1, 3), NB_F64, (double[]){1, 1, 2}), NB_SHAPE(4, 3));
    nb_tensor *e = nb_matmul(row, nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6}));
    nb_ck_close(e, (double[]){14, 18, 14, 18, 14, 18, 14, 18}, 8, 0, 0);
    /* a one-row slice of a transposed matrix (strides [1, 3]) */
    nb_tensor *x = nb_reshape(nb_arange(0, 12, 1, NB_F64), NB_SHAPE(4, 3));
    nb_tensor *xr = nb_narrow(nb_transpose(x, 0, 1), 0, 1, 1); /* [[1, 4, 7, 10]] */
    nb_tensor *w = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){1, 0, 0, 1, 1, 0, 0, 1});
    nb_ck_close(nb_matmul(xr, w), (double[]){8, 14}, 2, 0, 0);
    /* a column sliced with a step */
    nb_tensor *col = nb_slice(nb_narrow(x, 1, 2, 1), 0, 0, 4, 2); /* [[2], [8]] */
    nb_ck_close(nb_matmul(nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){1, 1}), col), (double[]){10}, 1, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_matmul_forward_batched) {
    nb_scope *s = nb_scope_begin();
    /* [2,1,3,4] x [5,4,2] -> [2,5,3,2]: out[i,j] = A[i,0] @ B[j] */
    nb_tensor *a = nb_mul_scalar(nb_reshape(nb_arange(0, 24, 1, NB_F64), NB_SHAPE(2, 1, 3, 4)), 0.5);
    nb_tensor *b = nb_add_scalar(nb_reshape(nb_arange(0, 40, 1, NB_F64), NB_SHAPE(5, 4, 2)), -20);
    nb_tensor *c = nb_matmul(a, b);
    nb_ck_shape(c, 4, (int64_t[]){2, 5, 3, 2});
    double *av = nb_test_values_of(a), *bv = nb_test_values_of(b), want[60];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) ref_mm(av + i * 12, bv + j * 8, 3, 4, 2, want + (i * 5 + j) * 6);
    nb_ck_close(c, want, 60, 1e-12, 1e-12);
    /* plain batched [2,3,4] x [2,4,2] */
    nb_tensor *a3 = nb_narrow(nb_reshape(a, NB_SHAPE(2, 3, 4)), 0, 0, 2);
    nb_tensor *b3 = nb_narrow(b, 0, 1, 2);
    nb_tensor *c3 = nb_matmul(a3, b3);
    nb_ck_shape(c3, 3, (int64_t[]){2, 3, 2});
    for (int i = 0; i < 2; i++) ref_mm(av + i * 12, bv + (i + 1) * 8, 3, 4, 2, want + i * 6);
    nb_ck_close(c3, want, 12, 1e-12, 1e-12);
    /* [2,3,4] x [4,2]: the 2-D operand broadcasts over the batch; so does [1,4,2] */
    nb_tensor *c2 = nb_matmul(a3, nb_squeeze(nb_narrow(b, 0, 0, 1), 0));
    nb_ck_shape(c2, 3, (int64_t[]){2, 3, 2});
    for (int i = 0; i < 2; i++) ref_mm(av + i * 12, bv, 3, 4, 2, want + i * 6);
    nb_ck_close(c2, want, 12, 1e-12, 1e-12);
    nb_tensor *c1 = nb_matmul(a3, nb_narrow(b, 0, 0, 1));
    nb_ck_shape(c1, 3, (int64_t[]){2, 3, 2});
    nb_ck_close(c1, want, 12, 1e-12, 1e-12);
    /* a transposed (non-contiguous) batched operand */
    nb_tensor *ct = nb_matmul(nb_transpose(nb_transpose(a3, 0, 1), 0, 1), b3);
    for (int i = 0; i < 2; i++) ref_mm(av + i * 12, bv + (i + 1) * 8, 3, 4, 2, want + i * 6);
    nb_ck_close(ct, want, 12, 1e-12, 1e-12);
    nb_tensor *perm = nb_contiguous(nb_transpose(a3, 0, 1)); /* [3,2,4] */
    nb_ck_close(nb_matmul(nb_transpose(perm, 0, 1), b3), want, 12, 1e-12, 1e-12); /* batch stride 4 */
    /* 1-D x 3-D and 3-D x 1-D */
    nb_tensor *v4 = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, -1, 2, 0});
    nb_tensor *mv = nb_matmul(a3, v4);
    nb_ck_shape(mv, 2, (int64_t[]){2, 3});
    double vv[4] = {1, -1, 2, 0};
    for (int i = 0; i < 2; i++) ref_mm(av + i * 12, vv, 3, 4, 1, want + i * 3);
    nb_ck_close(mv, want, 6, 1e-12, 1e-12);
    nb_tensor *vm = nb_matmul(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 0, 2}), a3);
    nb_ck_shape(vm, 2, (int64_t[]){2, 4});
    double v3[3] = {1, 0, 2};
    for (int i = 0; i < 2; i++) ref_mm(v3, av + i * 12, 1, 3, 4, want + i * 4);
    nb_ck_close(vm, want, 8, 1e-12, 1e-12);
    /* empty dims: k = 0 gives zeros, as torch.matmul */
    nb_tensor *z = nb_matmul(nb_zeros(NB_SHAPE(2, 0), NB_F64), nb_zeros(NB_SHAPE(0, 3), NB_F64));
    nb_ck_shape(z, 2, (int64_t[]){2, 3});
    nb_ck_close(z, (double[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    nb_ck_shape(nb_matmul(nb_zeros(NB_SHAPE(0, 3), NB_F64), nb_zeros(NB_SHAPE(3, 2), NB_F64)), 2,
                (int64_t[]){0, 2});
    free(av);
    free(bv);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_matmul_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_FAILS(nb_matmul(a, a), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "matmul"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[2, 3]"));
    NB_CK_FAILS(nb_matmul(nb_scalar(1, NB_F64), a), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_matmul(nb_zeros(NB_SHAPE(2, 2, 3), NB_F64), nb_zeros(NB_SHAPE(3, 3, 2), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_matmul(nb_zeros(NB_SHAPE(4), NB_F64), nb_zeros(NB_SHAPE(3), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_matmul(a, nb_zeros(NB_SHAPE(3, 2), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_matmul(nb_zeros(NB_SHAPE(2, 3), NB_I32), nb_zeros(NB_SHAPE(3, 2), NB_I32)), NB_ERR_DTYPE);
    /* linear */
    nb_tensor *w = nb_zeros(NB_SHAPE(4, 3), NB_F64);
    NB_CK_FAILS(nb_linear(nb_zeros(NB_SHAPE(2, 4), NB_F64), w, NULL), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "linear"));
    NB_CK_FAILS(nb_linear(a, w, nb_zeros(NB_SHAPE(3), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linear(a, nb_zeros(NB_SHAPE(3), NB_F64), NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linear(a, nb_zeros(NB_SHAPE(4, 3), NB_F32), NULL), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_linear_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 0, -1, 2, 1, 0});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0.5, -1});
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 0, 1, 0});
    nb_tensor *y = nb_linear(x, w, b);
    nb_ck_shape(y, 2, (int64_t[]){2, 2});
    nb_ck_close(y, (double[]){-1.5, 3, 0.5, 0}, 4, 0, 0);
    nb_ck_close(nb_linear(x, w, NULL), (double[]){-2, 4, 0, 1}, 4, 0, 0);
    /* 3-D and 1-D inputs keep their leading dims */
    nb_tensor *y3 = nb_linear(nb_reshape(x, NB_SHAPE(2, 1, 3)), w, b);
    nb_ck_shape(y3, 3, (int64_t[]){2, 1, 2});
    nb_ck_close(y3, (double[]){-1.5, 3, 0.5, 0}, 4, 0, 0);
    nb_tensor *y1 = nb_linear(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3}), w, b);
    nb_ck_shape(y1, 1, (int64_t[]){2});
    nb_ck_close(y1, (double[]){-1.5, 3}, 2, 0, 0);
    /* a transposed input and a transposed weight */
    nb_tensor *xt = nb_transpose(nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 0, 2, 1, 3, 0}), 0, 1);
    nb_ck_close(nb_linear(xt, w, b), (double[]){-1.5, 3, 0.5, 0}, 4, 0, 0);
    nb_tensor *wt = nb_transpose(nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 0, 1, -1, 0}), 0, 1);
    nb_ck_close(nb_linear(x, wt, b), (double[]){-1.5, 3, 0.5, 0}, 4, 0, 0);
    /* the same as matmul with the transposed weight plus the bias */
    nb_ck_close(nb_add(nb_matmul(x, nb_transpose(w, 0, 1)), b), (double[]){-1.5, 3, 0.5, 0}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients -------------------------------------------------------------------- */

START_TEST(test_matmul_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){5, 6, 7, 8});
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward(nb_sum(nb_matmul(a, b), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(a), (double[]){11, 15, 11, 15}, 4, 0, 0); /* ones @ b^T: row sums of b */
    nb_ck_close(nb_tensor_grad(b), (double[]){4, 4, 6, 6}, 4, 0, 0);     /* a^T @ ones: column sums of a */
    /* linear: dW = g^T x, db = sum of g's rows, dx = g W */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 0, 1, 0});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 0, -1, 2, 1, 0});
    nb_tensor *bias = nb_zeros(NB_SHAPE(2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_set_requires_grad(bias, true));
    NB_CK_OK(nb_backward(nb_sum(nb_linear(x, w, bias), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){3, 1, -1, 3, 1, -1}, 6, 0, 0);
    nb_ck_close(nb_tensor_grad(w), (double[]){1, 3, 3, 1, 3, 3}, 6, 0, 0);
    nb_ck_close(nb_tensor_grad(bias), (double[]){2, 2}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_matmul_gradcheck) {
    nb_scope *s = nb_scope_begin();
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(4), 1), nb_test_randn_grad(NB_SHAPE(4), 2));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(3, 4), 3), nb_test_randn_grad(NB_SHAPE(4, 2), 4));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(4), 5), nb_test_randn_grad(NB_SHAPE(4, 3), 6));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(3, 4), 7), nb_test_randn_grad(NB_SHAPE(4), 8));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(2, 3, 4), 9), nb_test_randn_grad(NB_SHAPE(2, 4, 2), 10));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(2, 1, 3, 4), 11), nb_test_randn_grad(NB_SHAPE(5, 4, 2), 12));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(2, 3, 4), 13), nb_test_randn_grad(NB_SHAPE(4, 2), 14));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(3, 4), 15), nb_test_randn_grad(NB_SHAPE(2, 4, 2), 16));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(3), 17), nb_test_randn_grad(NB_SHAPE(2, 3, 2), 18));
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(2, 3, 4), 19), nb_test_randn_grad(NB_SHAPE(4), 20));
    gc2(f_matmul_tt, nb_test_randn_grad(NB_SHAPE(4, 3), 21), nb_test_randn_grad(NB_SHAPE(2, 4), 22));
    gc2(f_matmul_bt, nb_test_randn_grad(NB_SHAPE(2, 3, 4), 23), nb_test_randn_grad(NB_SHAPE(2, 2, 4), 24));
    /* one operand constant */
    gc2(f_matmul, nb_test_randn_grad(NB_SHAPE(3, 4), 25), nb_randn(NB_SHAPE(4, 2), NB_F64, NULL));
    gc2(f_matmul, nb_randn(NB_SHAPE(3, 4), NB_F64, NULL), nb_test_randn_grad(NB_SHAPE(4, 2), 26));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_linear_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(2, 4), 30), *b = nb_test_randn_grad(NB_SHAPE(2), 31);
    nb_tensor *in[3] = {nb_test_randn_grad(NB_SHAPE(3, 4), 32), w, b};
    nb_ck_gradcheck(f_linear, in, 3, NULL);
    gc2(f_linear_nobias, in[0], w);
    in[0] = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 33); /* 3-D input */
    nb_ck_gradcheck(f_linear, in, 3, NULL);
    gc2(f_linear_nobias, in[0], w);
    in[0] = nb_test_randn_grad(NB_SHAPE(4), 34); /* 1-D input */
    nb_ck_gradcheck(f_linear, in, 3, NULL);
    gc2(f_linear_xt, nb_test_randn_grad(NB_SHAPE(4, 3), 35), w); /* strided input */
    /* constant input, only the parameters */
    in[0] = nb_randn(NB_SHAPE(3, 4), NB_F64, NULL);
    nb_ck_gradcheck(f_linear, in, 3, NULL);
    nb_scope_end(s);
}
END_TEST

/* ---- float32 -------------------------------------------------------------------------- */

START_TEST(test_matmul_float32) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *a32 = nb_randn(NB_SHAPE(3, 16, 32), NB_F32, &g), *b32 = nb_randn(NB_SHAPE(32, 8), NB_F32, &g);
    nb_tensor *bias32 = nb_randn(NB_SHAPE(8), NB_F32, &g);
    nb_tensor *a64 = nb_to_dtype(a32, NB_F64), *b64 = nb_to_dtype(b32, NB_F64), *bias64 = nb_to_dtype(bias32, NB_F64);
    nb_tensor *c32 = nb_matmul(a32, b32), *c64 = nb_matmul(a64, b64);
    ck_assert_int_eq(nb_dtype_of(c32), NB_F32);
    double *want = nb_test_values_of(c64);
    nb_ck_close(c32, want, nb_numel(c64), 1e-5, 1e-5);
    free(want);
    nb_tensor *l32 = nb_linear(a32, nb_transpose(b32, 0, 1), bias32);
    nb_tensor *l64 = nb_linear(a64, nb_transpose(b64, 0, 1), bias64);
    want = nb_test_values_of(l64);
    nb_ck_close(l32, want, nb_numel(l64), 1e-5, 1e-5);
    free(want);
    nb_tensor *bt32 = nb_matmul(nb_transpose(a32, 1, 2), a32), *bt64 = nb_matmul(nb_transpose(a64, 1, 2), a64);
    want = nb_test_values_of(bt64);
    nb_ck_close(bt32, want, nb_numel(bt64), 1e-5, 1e-5);
    free(want);
    nb_scope_end(s);
}
END_TEST

/* linear's bias gradient under the "high" (TF32) matmul precision on every
 * device: the column sums of the incoming gradient in full float32 (TF32
 * is for matrix products; CUDA computes the sums in the weight gradient's
 * GEMM epilogue), against float64 sums of the same values. */
START_TEST(test_linear_bias_grad_tf32) {
    NB_CK_OK(nb_set_float32_matmul_precision("high"));
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < nb_device_count((nb_device_type)t); i++) {
            nb_device dev = {(nb_device_type)t, i};
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(11);
            nb_tensor *x = nb_randn_on(NB_SHAPE(512, 64), NB_F32, &g, dev);
            nb_tensor *w = nb_detach(nb_randn_on(NB_SHAPE(96, 64), NB_F32, &g, dev));
            nb_tensor *b = nb_detach(nb_randn_on(NB_SHAPE(96), NB_F32, &g, dev));
            nb_tensor *r = nb_randn_on(NB_SHAPE(512, 96), NB_F32, &g, dev);
            NB_CK_OK(nb_set_requires_grad(w, true));
            NB_CK_OK(nb_set_requires_grad(b, true));
            NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_linear(x, w, b), r), NULL, 0, false)));
            double *rv = nb_test_values_of(r), want[96] = {0};
            for (int row = 0; row < 512; row++)
                for (int c = 0; c < 96; c++) want[c] += rv[row * 96 + c];
            free(rv);
            nb_ck_close(nb_tensor_grad(b), want, 96, 1e-5, 1e-5);
            nb_scope_end(s);
        }
    NB_CK_OK(nb_set_float32_matmul_precision("highest"));
}
END_TEST

/* linear with a transposed weight (F.linear(x, W.t()), W [in, out] as
 * GPT-2's Conv1D) on every device in float64, float32 and bfloat16: W's
 * gradient comes back contiguous in W's layout (x^T g, written by one GEMM
 * with the bias gradient in its epilogue where the backend has
 * matmul_bgrad_b), W's and the bias's gradients against float64 sums on
 * the host of the same values. Sizes off multiples of 8 as well. */
START_TEST(test_linear_transposed_weight_grad) {
    const nb_dtype dts[3] = {NB_F64, NB_F32, NB_BF16};
    const int64_t sizes[2][3] = {{64, 48, 96}, {37, 13, 29}}; /* rows, in, out */
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < nb_device_count((nb_device_type)t); i++)
            for (int di = 0; di < 3; di++)
                for (int z = 0; z < 2; z++) {
                    nb_device dev = {(nb_device_type)t, i};
                    nb_dtype dt = dts[di];
                    int64_t R = sizes[z][0], I = sizes[z][1], O = sizes[z][2];
                    nb_scope *s = nb_scope_begin();
                    nb_generator g = nb_generator_new(17);
                    /* values on the host, rounded to bf16 so every dtype holds them exactly */
                    nb_tensor *hv[4];
                    const int64_t shp[4][2] = {{R, I}, {I, O}, {O, 1}, {R, O}};
                    for (int k = 0; k < 4; k++)
                        hv[k] = nb_to_dtype(nb_to_dtype(nb_randn(NB_SHAPE(shp[k][0], shp[k][1]), NB_F64, &g), NB_BF16),
                                            NB_F64);
                    nb_tensor *x = nb_to_device(nb_to_dtype(hv[0], dt), dev), *r = nb_to_device(nb_to_dtype(hv[3], dt), dev);
                    nb_tensor *w = nb_detach(nb_to_device(nb_to_dtype(hv[1], dt), dev));
                    nb_tensor *b = nb_detach(nb_to_device(nb_to_dtype(nb_reshape(hv[2], NB_SHAPE(O)), dt), dev));
                    NB_CK_OK(nb_set_requires_grad(w, true));
                    NB_CK_OK(nb_set_requires_grad(b, true));
                    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_linear(x, nb_transpose(w, 0, 1), b), r), NULL, 0, false)));
                    nb_tensor *gw = nb_tensor_grad(w), *gb = nb_tensor_grad(b);
                    ck_assert(nb_is_contiguous(gw));
                    nb_ck_shape(gw, 2, (int64_t[]){I, O});
                    double *xv = nb_test_values_of(hv[0]), *rv = nb_test_values_of(hv[3]);
                    double *ww = calloc((size_t)(I * O), sizeof *ww), *wb = calloc((size_t)O, sizeof *wb);
                    ck_assert(ww && wb);
                    for (int64_t row = 0; row < R; row++)
                        for (int64_t o = 0; o < O; o++) {
                            wb[o] += rv[row * O + o];
                            for (int64_t in = 0; in < I; in++) ww[in * O + o] += xv[row * I + in] * rv[row * O + o];
                        }
                    /* bf16 rounds each gradient once (2^-8 of ~|sum| <= 3 sqrt(R) * 3) */
                    double tol = dt == NB_BF16 ? 0.6 : dt == NB_F32 ? 1e-4 : 1e-10;
                    nb_ck_close(gw, ww, I * O, tol, dt == NB_BF16 ? 1e-2 : 0);
                    nb_ck_close(gb, wb, O, tol, dt == NB_BF16 ? 1e-2 : 0);
                    free(xv), free(rv), free(ww), free(wb);
                    nb_scope_end(s);
                }
}
END_TEST

/* One linear forward and backward on dev in dtype dt under a matmul
 * precision, from inputs drawn on the CPU and rounded to bf16 (so every
 * dtype sees the same values): y, dx, dw and the gradient of the [2601, 2]
 * tensor whose column 0 is the bias (a strided bias: the GEMM then
 * accumulates onto its broadcast copy, beta 1). The device's cache is first
 * given a NaN-filled block, so buffers it reuses start dirty. */
static void padded_linear_run(nb_device dev, nb_dtype dt, const char *precision, double *got[4], int64_t n[4]) {
    NB_CK_OK(nb_set_float32_matmul_precision(precision));
    nb_scope *s = nb_scope_begin();
    nb_tensor *junk = nb_full_on(NB_SHAPE(16, 1 << 20), NAN, NB_F32, dev);
    ck_assert_msg(junk != NULL, "%s", nb_last_error());
    nb_scope_end(s);
    s = nb_scope_begin();
    nb_generator g = nb_generator_new(13);
    const int64_t shapes[4][2] = {{1024, 768}, {2601, 768}, {2601, 2}, {1024, 2601}};
    nb_tensor *in[4];
    for (int k = 0; k < 4; k++) {
        nb_tensor *v = nb_randn(NB_SHAPE(shapes[k][0], shapes[k][1]), NB_F32, &g);
        in[k] = nb_detach(nb_to_device(nb_to_dtype(nb_to_dtype(v, NB_BF16), dt), dev));
        ck_assert_msg(in[k] != NULL, "%s", nb_last_error());
    }
    for (int k = 0; k < 3; k++) NB_CK_OK(nb_set_requires_grad(in[k], true));
    nb_tensor *y = nb_linear(in[0], in[1], nb_squeeze(nb_narrow(in[2], 1, 0, 1), 1)); /* stride 2 */
    NB_CK_OK(nb_backward(nb_sum(nb_mul(y, in[3]), NULL, 0, false)));
    nb_tensor *outs[4] = {y, nb_tensor_grad(in[0]), nb_tensor_grad(in[1]), nb_tensor_grad(in[2])};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(nb_dtype_of(outs[k]), dt);
        got[k] = nb_test_values_of(outs[k]), n[k] = nb_numel(outs[k]);
    }
    nb_scope_end(s);
    NB_CK_OK(nb_set_float32_matmul_precision("highest"));
}

/* linear forward and backward with out_features 2601 (off a multiple of 8,
 * as a vocabulary of 30522) on each accelerator against float32 on the CPU:
 *  - bf16: 2*1024*768*2601 = 4.1 GFLOP a product, over the CUDA backend's
 *    2 GFLOP threshold for zero-padded copies (matmul.cu), dirty buffers
 *    and a beta-1 product (the strided bias) included;
 *  - float32 in full precision and in TF32: unpadded (TF32 pads from 100
 *    GFLOP), so the weight gradient's GEMM and bias sum run in cuBLASLt's
 *    BGRADB epilogue at an unaligned m.
 * Tolerances: bf16 rounds y and the gradients (sums with standard
 * deviations of 23 to 51) by at most 2^-8 of their value, TF32 rounds the
 * products' inputs to 11 bits; float32 differs from the CPU only in the
 * order of its sums. A layout slip is off by tens. */
START_TEST(test_linear_padded_gemm) {
    const struct {
        nb_dtype dt;
        const char *precision;
        double atol, rtol;
    } runs[3] = {{NB_BF16, "highest", 0.5, 1e-2}, {NB_F32, "highest", 2e-3, 1e-4}, {NB_F32, "high", 0.5, 1e-2}};
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    if (!na) return; /* nothing but the CPU: no padded path to compare */
    double *want[4];
    int64_t n[4];
    padded_linear_run(NB_CPU, NB_F32, "highest", want, n);
    for (int a = 0; a < na; a++)
        for (int r = 0; r < 3; r++) {
            double *got[4];
            int64_t m[4];
            padded_linear_run(accs[a], runs[r].dt, runs[r].precision, got, m);
            for (int k = 0; k < 4; k++) {
                ck_assert_int_eq(m[k], n[k]);
                nb_scope *s = nb_scope_begin();
                nb_ck_close(nb_from_data(got[k], NB_SHAPE(m[k]), NB_F64), want[k], n[k], runs[r].atol, runs[r].rtol);
                nb_scope_end(s);
                free(got[k]);
            }
        }
    for (int k = 0; k < 4; k++) free(want[k]);
}
END_TEST

/* linear in bfloat16 and float16 with 1 to 5 rows (decoding's products:
 * on CUDA up to 4 rows run the GEMV kernel, 5 go to cuBLAS) on each
 * accelerator against float32 on the CPU on the same rounded values, with
 * and without a bias, over inner sizes that leave the kernel's unrolled
 * loop whole, partial or unused and split k over 1, 2, 4 or 8 warps
 * (k = 8, 264, 1032, 2056, 4104, 8200; uneven slices), output counts off a
 * multiple of its rows per block, and x as a row-strided view; the same
 * bits on a second run. Tolerance: y (sums with standard deviations up to
 * 91) rounded to 16 bits, 2^-8 of its value (float16's 2^-11 within it). */
START_TEST(test_linear_16bit_few_rows) {
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    const int64_t ks[6] = {8, 264, 1032, 2056, 4104, 8200}, ns[3] = {1, 13, 1000};
    const nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int a = 0; a < na; a++) {
        const nb_device dev = accs[a];
        for (int di = 0; di < 2; di++)
            for (int ki = 0; ki < 6; ki++)
                for (int ni = 0; ni < 3; ni++)
                    for (int64_t m = 1; m <= 5; m++) {
                        nb_scope *s = nb_scope_begin();
                        const int64_t k = ks[ki], n = ns[ni];
                        const bool strided = (ki + ni + m) % 2 == 0, bias = (ki + m) % 2 == 1;
                        nb_generator g = nb_generator_new((uint64_t)(100 * ki + 10 * ni + m));
                        /* x [m, k] as the first k columns of [m, k + 8] when strided */
                        nb_tensor *xw = nb_to_dtype(nb_randn(NB_SHAPE(m, strided ? k + 8 : k), NB_F32, &g), dts[di]);
                        nb_tensor *w = nb_to_dtype(nb_randn(NB_SHAPE(n, k), NB_F32, &g), dts[di]);
                        nb_tensor *b = bias ? nb_to_dtype(nb_randn(NB_SHAPE(n), NB_F32, &g), dts[di]) : NULL;
                        nb_tensor *x = nb_narrow(xw, 1, 0, k);
                        nb_tensor *want = nb_linear(nb_to_dtype(x, NB_F32), nb_to_dtype(w, NB_F32),
                                                    b ? nb_to_dtype(b, NB_F32) : NULL);
                        nb_tensor *xd = nb_narrow(nb_to_device(xw, dev), 1, 0, k), *wd = nb_to_device(w, dev);
                        nb_tensor *bd = b ? nb_to_device(b, dev) : NULL;
                        nb_tensor *got = nb_linear(xd, wd, bd);
                        NB_CK_NOTNULL(got);
                        ck_assert_int_eq(nb_dtype_of(got), dts[di]);
                        double *e = nb_test_values_of(want);
                        nb_ck_close(nb_to_device(got, NB_CPU), e, m * n, 0.05, 1e-2);
                        free(e);
                        double *again = nb_test_values_of(nb_linear(xd, wd, bd)), *first = nb_test_values_of(got);
                        ck_assert_msg(memcmp(again, first, sizeof(double) * (size_t)(m * n)) == 0,
                                      "a second run differs (m %lld, k %lld, n %lld)", (long long)m, (long long)k,
                                      (long long)n);
                        free(again);
                        free(first);
                        nb_scope_end(s);
                    }
    }
}
END_TEST

static nb_tensor *f_bmm(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_bmm(in[0], in[1]);
}

START_TEST(test_bmm) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    nb_tensor *a = nb_randn(NB_SHAPE(3, 2, 4), NB_F64, &g), *b = nb_randn(NB_SHAPE(3, 4, 5), NB_F64, &g);
    nb_tensor *c = nb_bmm(a, b);
    nb_ck_shape(c, 3, (int64_t[]){3, 2, 5});
    double *av = nb_test_values_of(a), *bv = nb_test_values_of(b), want[30];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++) {
                double acc = 0;
                for (int k = 0; k < 4; k++) acc += av[(p * 2 + i) * 4 + k] * bv[(p * 4 + k) * 5 + j];
                want[(p * 2 + i) * 5 + j] = acc;
            }
    nb_ck_close(c, want, 30, 1e-12, 1e-12);
    free(av), free(bv);
    nb_tensor *in[2] = {nb_test_randn_grad(NB_SHAPE(2, 3, 4), 1), nb_test_randn_grad(NB_SHAPE(2, 4, 2), 2)};
    nb_ck_gradcheck(f_bmm, in, 2, NULL);
    NB_CK_FAILS(nb_bmm(nb_zeros(NB_SHAPE(2, 3, 4), NB_F64), nb_zeros(NB_SHAPE(4, 2), NB_F64)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "bmm"));
    NB_CK_FAILS(nb_bmm(nb_zeros(NB_SHAPE(2, 3, 4), NB_F64), nb_zeros(NB_SHAPE(1, 4, 2), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_bmm(nb_zeros(NB_SHAPE(2, 3, 4), NB_F64), nb_zeros(NB_SHAPE(2, 3, 2), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_bmm(nb_zeros(NB_SHAPE(2, 3, 4), NB_F64), nb_zeros(NB_SHAPE(2, 4, 2), NB_F32)), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* Regression (issue 13): under an address-space limit too small for
 * OpenBLAS's per-thread buffers, OpenBLAS 0.3.21 retries mmap forever
 * (mnist_mlp hung under ulimit -v 600000); nabla checks first and fails the
 * GEMM with a message. Run in a child with RLIMIT_AS set to its current size
 * + 100 MiB and an alarm; skipped under AddressSanitizer, whose shadow
 * memory does not live with RLIMIT_AS. */
START_TEST(test_address_space_limit) {
#if defined(__SANITIZE_ADDRESS__)
    return;
#else
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        nb_set_num_threads(1); /* OpenBLAS loaded (and warmed for 1 thread) while nothing limits it */
        nb_tensor *tiny = nb_ones(NB_SHAPE(4, 4), NB_F32);
        if (!nb_matmul(tiny, tiny)) _exit(5);
        nb_set_num_threads(7); /* more threads than it was warmed for */
        /* the two 1 MiB tensors below come from segments cached now: the
         * limit is then spent only by threads starting up and by OpenBLAS
         * (a worker's first malloc may reserve a 64 MiB arena after statm
         * is read, which left nb_ones without room on a loaded machine) */
        nb_scope *warm = nb_scope_begin();
        bool cached = nb_ones(NB_SHAPE(512, 512), NB_F32) && nb_ones(NB_SHAPE(512, 512), NB_F32);
        nb_scope_end(warm);
        if (!cached) _exit(6);
        int lim = nb_test_limit_address_space((size_t)100 << 20); /* 100 MiB above its size now */
        if (lim) _exit(lim == 1 ? 3 : 4);
        alarm(30);
        nb_tensor *a = nb_ones(NB_SHAPE(512, 512), NB_F32);
        nb_tensor *c = a ? nb_matmul(a, a) : NULL;
        bool named = !c && strstr(nb_last_error(), "address-space limit") && nb_last_status() == NB_ERR_OOM;
        if (!c && !named) fprintf(stderr, "child: %s\n", nb_last_error());
        _exit(c ? 1 : named ? 0 : 2);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "the child did not exit (signal %d: a hang stopped by the alarm?)",
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    ck_assert_msg(WEXITSTATUS(st) == 0, "child exit %d (1: the GEMM ran, 2: another error)", WEXITSTATUS(st));
#endif
}
END_TEST

/* grouped_mm by hand: rows of each group times its matrix, zeros past the
 * last end; K ranges; the errors. */
START_TEST(test_grouped_mm) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_from_data((double[]){1, 2, 3, 4, 5, 6, 7, 8}, NB_SHAPE(4, 2), NB_F64);
    nb_tensor *b = nb_from_data((double[]){1, 0, 0, 1, 2, 0, 0, 2}, NB_SHAPE(2, 2, 2), NB_F64); /* I, 2 I */
    nb_tensor *offs = nb_from_data((int32_t[]){1, 3}, NB_SHAPE(2), NB_I32);
    nb_ck_close(nb_grouped_mm(a, b, offs), (double[]){1, 2, 6, 8, 10, 12, 0, 0}, 8, 0, 0);
    /* [M 2, K 4] x [K 4, N 1]: K ranges 0..1 and 1..3 */
    nb_tensor *c = nb_reshape(a, NB_SHAPE(2, 4)), *d = nb_from_data((double[]){1, 1, 1, 1}, NB_SHAPE(4, 1), NB_F64);
    nb_ck_close(nb_grouped_mm(c, d, offs), (double[]){1, 5, 5, 13}, 4, 0, 0);
    NB_CK_FAILS(nb_grouped_mm(a, b, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_grouped_mm(a, b, nb_from_data((int32_t[]){3, 1}, NB_SHAPE(2), NB_I32)), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_grouped_mm(a, b, nb_from_data((int32_t[]){1, 2, 3}, NB_SHAPE(3), NB_I32)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_matmul(void) {
    Suite *s = suite_create("ops_matmul");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_matmul_forward_small);
    tcase_add_test(f, test_address_space_limit);
    tcase_add_test(f, test_matmul_forward_batched);
    tcase_add_test(f, test_matmul_errors);
    tcase_add_test(f, test_linear_forward);
    tcase_add_test(f, test_matmul_float32);
    tcase_add_test(f, test_linear_bias_grad_tf32);
    tcase_add_test(f, test_linear_transposed_weight_grad);
    suite_add_tcase(s, f);
    TCase *pad = tcase_create("padded"); /* a CPU reference of 4-GFLOP products, three device runs */
    tcase_add_test(pad, test_linear_padded_gemm);
    tcase_add_test(pad, test_linear_16bit_few_rows);
    tcase_set_timeout(pad, 300);
    suite_add_tcase(s, pad);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_matmul_grad_by_hand);
    tcase_add_test(g, test_matmul_gradcheck);
    tcase_add_test(g, test_linear_gradcheck);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    TCase *tc_bmm = tcase_create("bmm");
    tcase_add_test(tc_bmm, test_bmm);
    tcase_add_test(tc_bmm, test_grouped_mm);
    tcase_set_timeout(tc_bmm, 300);
    suite_add_tcase(s, tc_bmm);
    return s;
}
