/* test_ops_scan.c - cumsum, cumprod, cummax, cummin, logcumsumexp: forward
 * values by hand (each dim, negative dims, strided and 0-d inputs,
 * integer dtypes giving int64), tie and NaN index rules, the stable
 * logcumsumexp, cumprod's exact gradient with zeros, gradchecks of every
 * op, error paths, and the same bits for 1 and 2 threads. */
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

typedef struct {
    int op; /* 0 cumsum, 1 cumprod, 2 cummax, 3 cummin, 4 logcumsumexp */
    int dim;
} scan_ctx;

static nb_tensor *f_scan(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const scan_ctx *c = ctx;
    switch (c->op) {
    case 0: return nb_cumsum(in[0], c->dim);
    case 1: return nb_cumprod(in[0], c->dim);
    case 2: return nb_cummax(in[0], c->dim, NULL);
    case 3: return nb_cummin(in[0], c->dim, NULL);
    default: return nb_logcumsumexp(in[0], c->dim);
    }
}

static nb_tensor *grad_tensor(int ndim, const int64_t *shape, const double *v) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

/* 1 5 3 / 4 2 6 */
static nb_tensor *m23(void) { return nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 5, 3, 4, 2, 6}); }

START_TEST(test_cumsum_cumprod_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    nb_tensor *c1 = nb_cumsum(x, 1);
    nb_ck_shape(c1, 2, (int64_t[]){2, 3});
    ck_assert_int_eq(nb_dtype_of(c1), NB_F64);
    nb_ck_close(c1, (double[]){1, 6, 9, 4, 6, 12}, 6, 0, 0);
    nb_ck_close(nb_cumsum(x, 0), (double[]){1, 5, 3, 5, 7, 9}, 6, 0, 0);
    nb_ck_close(nb_cumsum(x, -1), (double[]){1, 6, 9, 4, 6, 12}, 6, 0, 0);
    nb_ck_close(nb_cumprod(x, 1), (double[]){1, 5, 15, 4, 8, 48}, 6, 0, 0);
    nb_ck_close(nb_cumprod(x, -2), (double[]){1, 5, 3, 4, 10, 18}, 6, 0, 0);
    /* strided input (the transpose), and float32 */
    nb_ck_close(nb_cumsum(nb_transpose(x, 0, 1), 0), (double[]){1, 4, 6, 6, 9, 12}, 6, 0, 0);
    nb_tensor *f = nb_cumsum(nb_to_dtype(x, NB_F32), 1);
    ck_assert_int_eq(nb_dtype_of(f), NB_F32);
    nb_ck_close(f, (double[]){1, 6, 9, 4, 6, 12}, 6, 0, 0);
    /* integers and bool accumulate in int64 and give int64, as PyTorch */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(4), NB_I32, (double[]){2000000000, 2000000000, -5, 1});
    nb_tensor *ci = nb_cumsum(i, 0);
    ck_assert_int_eq(nb_dtype_of(ci), NB_I64);
    int64_t iv[4];
    NB_CK_OK(nb_to_host(ci, iv, sizeof iv));
    ck_assert(iv[0] == 2000000000 && iv[1] == 4000000000LL && iv[2] == 3999999995LL && iv[3] == 3999999996LL);
    nb_tensor *cp = nb_cumprod(nb_test_tensor(NB_SHAPE(3), NB_U8, (double[]){200, 200, 2}), 0);
    ck_assert_int_eq(nb_dtype_of(cp), NB_I64);
    nb_ck_close(cp, (double[]){200, 40000, 80000}, 3, 0, 0);
    nb_tensor *cb = nb_cumsum(nb_test_tensor(NB_SHAPE(4), NB_BOOL, (double[]){1, 0, 1, 1}), 0);
    ck_assert_int_eq(nb_dtype_of(cb), NB_I64);
    nb_ck_close(cb, (double[]){1, 1, 2, 3}, 4, 0, 0);
    /* 0-d input (dim 0 or -1) and empty dims */
    ck_assert_double_eq(nb_item(nb_cumsum(nb_scalar(3, NB_F64), 0)), 3);
    ck_assert_double_eq(nb_item(nb_cumprod(nb_scalar(3, NB_F64), -1)), 3);
    ck_assert_int_eq(nb_numel(nb_cumsum(nb_zeros(NB_SHAPE(2, 0), NB_F64), 1)), 0);
    ck_assert_int_eq(nb_numel(nb_cumsum(nb_zeros(NB_SHAPE(0, 3), NB_F64), 1)), 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cummax_cummin_forward) {
    nb_scope *s = nb_scope_begin();
    /* ties: the LAST occurrence of the running extreme (PyTorch's CPU rule) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 5), NB_F64, (double[]){1, 3, 2, 3, 0, 5, 5, 4, 6, 1});
    nb_tensor *idx = NULL;
    nb_tensor *v = nb_cummax(x, 1, &idx);
    NB_CK_NOTNULL(idx);
    ck_assert_int_eq(nb_dtype_of(idx), NB_I64);
    nb_ck_shape(idx, 2, (int64_t[]){2, 5});
    nb_ck_close(v, (double[]){1, 3, 3, 3, 3, 5, 5, 5, 6, 6}, 10, 0, 0);
    nb_ck_close(idx, (double[]){0, 1, 1, 3, 3, 0, 1, 1, 3, 3}, 10, 0, 0);
    v = nb_cummin(x, -1, &idx);
    nb_ck_close(v, (double[]){1, 1, 1, 1, 0, 5, 5, 4, 4, 1}, 10, 0, 0);
    nb_ck_close(idx, (double[]){0, 0, 0, 0, 4, 0, 1, 2, 2, 4}, 10, 0, 0);
    v = nb_cummax(x, 0, &idx);
    nb_ck_close(v, (double[]){1, 3, 2, 3, 0, 5, 5, 4, 6, 1}, 10, 0, 0);
    nb_ck_close(idx, (double[]){0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 10, 0, 0);
    /* NaN becomes the extreme and stays; a later NaN takes the index */
    nb_tensor *n = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, NAN, 7, NAN, 9});
    double nv[5];
    v = nb_cummax(n, 0, &idx);
    nb_test_values(v, nv, 5);
    ck_assert(nv[0] == 1 && isnan(nv[1]) && isnan(nv[2]) && isnan(nv[3]) && isnan(nv[4]));
    nb_ck_close(idx, (double[]){0, 1, 1, 3, 3}, 5, 0, 0);
    /* integers keep their dtype; strided input */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(4), NB_I64, (double[]){3, -1, 3, -2});
    v = nb_cummin(i, 0, &idx);
    ck_assert_int_eq(nb_dtype_of(v), NB_I64);
    nb_ck_close(v, (double[]){3, -1, -1, -2}, 4, 0, 0);
    nb_ck_close(idx, (double[]){0, 1, 1, 3}, 4, 0, 0);
    nb_ck_close(nb_cummax(nb_transpose(m23(), 0, 1), 0, NULL), (double[]){1, 4, 5, 4, 5, 6}, 6, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_logcumsumexp_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    nb_ck_close(nb_logcumsumexp(x, 1),
                (double[]){1, log(exp(1) + exp(5)), log(exp(1) + exp(5) + exp(3)), 4, log(exp(4) + exp(2)),
                           log(exp(4) + exp(2) + exp(6))},
                6, 1e-14, 1e-14);
    /* stable for large values; -inf is the identity */
    nb_tensor *b = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){-INFINITY, 1000, 1000, -INFINITY});
    double v[4];
    nb_test_values(nb_logcumsumexp(b, 0), v, 4);
    ck_assert(isinf(v[0]) && v[0] < 0);
    ck_assert_double_eq_tol(v[1], 1000, 1e-12);
    ck_assert_double_eq_tol(v[2], 1000 + log(2), 1e-12);
    ck_assert_double_eq_tol(v[3], 1000 + log(2), 1e-12);
    nb_test_values(nb_logcumsumexp(nb_to_dtype(b, NB_F32), 0), v, 4);
    ck_assert_double_eq_tol(v[2], 1000 + log(2), 1e-3);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_scan_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    NB_CK_FAILS(nb_cumsum(x, 2), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cumsum"));
    NB_CK_FAILS(nb_cumprod(x, -3), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cummax(x, 5, NULL), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cummax"));
    NB_CK_FAILS(nb_cummin(nb_scalar(1, NB_F64), 1, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_logcumsumexp(nb_zeros(NB_SHAPE(3), NB_I64), 0), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "logcumsumexp"));
    nb_scope_end(s);
}
END_TEST

/* ---- gradients -------------------------------------------------------------------- */

START_TEST(test_scan_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* cumsum: reverse cumsum of g */
    nb_tensor *x = grad_tensor(NB_SHAPE(4), (double[]){1, 2, 3, 4});
    NB_CK_OK(nb_backward_with(nb_cumsum(x, 0), nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 10, 100, 1000})));
    nb_ck_close(nb_tensor_grad(x), (double[]){1111, 1110, 1100, 1000}, 4, 0, 0);
    /* cumprod with zeros: [2, 0, 3, 0], g = 1: out = [2, 0, 0, 0];
     * d/dx0 = 1 (only out0 survives); d/dx1 = x0 + x0 x2 + x0 x2 x3 = 2 + 6 + 0 = 8;
     * d/dx2 = x0 x1 + x0 x1 x3 = 0; d/dx3 = x0 x1 x2 = 0 */
    nb_tensor *z = grad_tensor(NB_SHAPE(4), (double[]){2, 0, 3, 0});
    NB_CK_OK(nb_backward(nb_sum(nb_cumprod(z, 0), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(z), (double[]){1, 8, 0, 0}, 4, 0, 1e-15);
    nb_tensor *z0 = grad_tensor(NB_SHAPE(3), (double[]){0, 2, 5});
    NB_CK_OK(nb_backward(nb_sum(nb_cumprod(z0, 0), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(z0), (double[]){13, 0, 0}, 3, 0, 1e-15); /* 1 + 2 + 10 */
    /* cummax with ties: gradient to the last occurrence, accumulated */
    nb_tensor *t = grad_tensor(NB_SHAPE(5), (double[]){1, 3, 2, 3, 0});
    NB_CK_OK(nb_backward_with(nb_cummax(t, 0, NULL), nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, 2, 4, 8, 16})));
    nb_ck_close(nb_tensor_grad(t), (double[]){1, 6, 0, 24, 0}, 5, 0, 0);
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward(nb_sum(nb_cummin(t, 0, NULL), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){4, 0, 0, 0, 1}, 5, 0, 0);
    /* float32 gradients, through a transposed (strided) input */
    nb_tensor *f = nb_to_dtype(nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4}), NB_F32);
    NB_CK_OK(nb_set_requires_grad(f, true));
    NB_CK_OK(nb_backward(nb_sum(nb_cumprod(nb_transpose(f, 0, 1), 1), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(f), (double[]){4, 5, 1, 2}, 4, 0, 1e-6); /* rows (1, 3) and (2, 4) */
    /* cummax indices carry no gradient */
    nb_tensor *idx = NULL;
    ck_assert(nb_requires_grad(nb_cummax(t, 0, &idx)) && !nb_requires_grad(idx));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_scan_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3, 4, 5), 11);
    for (int op = 0; op < 5; op++)
        for (int d = -1; d < 3; d++) {
            scan_ctx c = {op, d};
            NB_CK_OK(nb_gradcheck(f_scan, &x, 1, &c, NULL));
        }
    /* cumprod through zeros (the product is multilinear, so central
     * differences are exact there): one zero, two zeros, a zero first */
    nb_tensor *z = grad_tensor(NB_SHAPE(3, 4), (double[]){1.5, 0, -2, 0.7, 0, 0, 3, 1.1, 2, -1, 0.5, 0});
    for (int d = 0; d < 2; d++) {
        scan_ctx c = {1, d};
        NB_CK_OK(nb_gradcheck(f_scan, &z, 1, &c, NULL));
    }
    /* logcumsumexp with large and very negative values */
    nb_tensor *l = grad_tensor(NB_SHAPE(5), (double[]){-800, 700, 701, -3, 699});
    scan_ctx cl = {4, 0};
    NB_CK_OK(nb_gradcheck(f_scan, &l, 1, &cl, NULL));
    /* a 0-d input */
    nb_tensor *s0 = nb_test_randn_grad(0, NULL, 12);
    for (int op = 0; op < 5; op++) {
        scan_ctx c = {op, 0};
        NB_CK_OK(nb_gradcheck(f_scan, &s0, 1, &c, NULL));
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_scan_deterministic_across_threads) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *r[2][3];
    for (int k = 0; k < 2; k++) {
        nb_set_num_threads(k + 1);
        nb_generator g = nb_generator_new(5);
        nb_tensor *m = nb_randn(NB_SHAPE(300, 513), NB_F32, &g);
        r[k][0] = nb_cumsum(m, 1);
        r[k][1] = nb_cumsum(m, 0);
        r[k][2] = nb_logcumsumexp(m, 0);
    }
    for (int i = 0; i < 3; i++) {
        size_t bytes = (size_t)nb_numel(r[0][i]) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes);
        ck_assert(a && b);
        NB_CK_OK(nb_to_host(r[0][i], a, bytes));
        NB_CK_OK(nb_to_host(r[1][i], b, bytes));
        ck_assert_msg(memcmp(a, b, bytes) == 0, "scan %d differs between 1 and 2 threads", i);
        free(a);
        free(b);
    }
    nb_scope_end(s);
}
END_TEST

/* cumsum over a few long lines on an accelerator (chunks of 8192 over many blocks there, each scanned from the
 * sums of the chunks before it): the CPU's serial sums to rounding, on innermost and strided lines, at the
 * path's smallest length, over several chunks of several lines, and at a sampler's vocabulary; the same bits
 * twice. */
START_TEST(test_cumsum_long_lines_device) {
    nb_scope *s = nb_scope_begin();
    nb_device devs[8];
    int nd = nb_test_accelerators(devs, 8);
    const int64_t shapes[6][2] = {{3, 5000}, {1, 2048}, {1, 128256}, {3, 20000}, {4099, 2}, {20000, 2}};
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 6; k++)
            for (int wide = 0; wide < 2; wide++) {
                nb_generator g = nb_generator_new(9);
                nb_dtype dt = wide ? NB_F64 : NB_F32;
                nb_tensor *x = nb_rand(2, shapes[k], dt, &g); /* in [0, 1): sums grow to ~n / 2 */
                int dim = k >= 4 ? 0 : 1;
                nb_tensor *want = nb_cumsum(x, dim), *xd = nb_to_device(x, devs[d]);
                nb_tensor *a = nb_cumsum(xd, dim), *b = nb_cumsum(xd, dim);
                double n = (double)shapes[k][dim];
                nb_ck_close_to(nb_to_device(a, NB_CPU), want, wide ? n * n * 1e-16 : n * 1e-7);
                nb_ck_close_to(nb_to_device(a, NB_CPU), nb_to_device(b, NB_CPU), 0);
            }
    nb_scope_end(s);
}
END_TEST

/* A NaN stays in the running value, as PyTorch's _log_add_exp_helper. */
START_TEST(test_logcumsumexp_nan) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, NAN, 1});
    double v[3];
    nb_test_values(nb_logcumsumexp(x, 0), v, 3);
    ck_assert(fabs(v[0] - 1) < 1e-15 && isnan(v[1]) && isnan(v[2]));
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_scan(void) {
    Suite *s = suite_create("ops_scan");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_cumsum_cumprod_forward);
    tcase_add_test(f, test_cummax_cummin_forward);
    tcase_add_test(f, test_logcumsumexp_forward);
    tcase_add_test(f, test_scan_errors);
    tcase_add_test(f, test_scan_deterministic_across_threads);
    tcase_add_test(f, test_cumsum_long_lines_device);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_scan_grad_by_hand);
    tcase_add_test(g, test_scan_gradcheck);
    tcase_add_test(g, test_logcumsumexp_nan);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
