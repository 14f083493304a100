/* test_ops_reduce.c - sum, mean, amax, max along a dim with indices and
 * argmax: forward values by hand (one dim, several, all, keepdim both
 * ways, strided inputs, integers), tie handling in the gradients,
 * gradchecks, errors, determinism across thread counts, and float32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* ctx of the reduction gradchecks: which op, dims and keepdim */
typedef struct {
    int op; /* 0 sum, 1 mean, 2 max, 3 max_dim */
    int dims[3];
    int n_dims;
    bool keepdim;
} red_ctx;

static nb_tensor *f_reduce(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const red_ctx *c = ctx;
    const int *dims = c->n_dims ? c->dims : NULL;
    switch (c->op) {
    case 0: return nb_sum(in[0], dims, c->n_dims, c->keepdim);
    case 1: return nb_mean(in[0], dims, c->n_dims, c->keepdim);
    case 2: return nb_max(in[0], dims, c->n_dims, c->keepdim);
    default: return nb_max_dim(in[0], c->dims[0], c->keepdim, NULL);
    }
}

static nb_tensor *m23(void) { return nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 5, 3, 4, 2, 6}); }

START_TEST(test_sum_mean_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    nb_tensor *all = nb_sum(x, NULL, 0, false);
    ck_assert_int_eq(nb_dim(all), 0);
    ck_assert_double_eq(nb_item(all), 21);
    nb_tensor *all_k = nb_sum(x, NULL, 0, true);
    nb_ck_shape(all_k, 2, (int64_t[]){1, 1});
    ck_assert_double_eq(nb_item(all_k), 21);
    nb_ck_close(nb_sum(x, (int[]){0, 1}, 2, false), (double[]){21}, 1, 0, 0);
    nb_tensor *s0 = nb_sum(x, (int[]){0}, 1, false);
    nb_ck_shape(s0, 1, (int64_t[]){3});
    nb_ck_close(s0, (double[]){5, 7, 9}, 3, 0, 0);
    nb_tensor *s1 = nb_sum(x, (int[]){-1}, 1, true);
    nb_ck_shape(s1, 2, (int64_t[]){2, 1});
    nb_ck_close(s1, (double[]){9, 12}, 2, 0, 0);
    nb_ck_close(nb_mean(x, (int[]){0}, 1, false), (double[]){2.5, 3.5, 4.5}, 3, 0, 0);
    nb_ck_close(nb_mean(x, (int[]){1}, 1, false), (double[]){3, 4}, 2, 0, 0);
    ck_assert_double_eq(nb_item(nb_mean(x, NULL, 0, false)), 3.5);
    /* several dims of a 3-D tensor: sum_{i,k} (12i + 4j + k) = 60 + 32j */
    nb_tensor *y = nb_reshape(nb_arange(0, 24, 1, NB_F64), NB_SHAPE(2, 3, 4));
    nb_ck_close(nb_sum(y, (int[]){0, 2}, 2, false), (double[]){60, 92, 124}, 3, 0, 0);
    nb_tensor *yk = nb_sum(y, (int[]){2, 0}, 2, true);
    nb_ck_shape(yk, 3, (int64_t[]){1, 3, 1});
    nb_ck_close(yk, (double[]){60, 92, 124}, 3, 0, 0);
    nb_ck_close(nb_mean(y, (int[]){0, 2}, 2, false), (double[]){7.5, 11.5, 15.5}, 3, 0, 0);
    /* strided input: sums of the transposed matrix */
    nb_ck_close(nb_sum(nb_transpose(x, 0, 1), (int[]){1}, 1, false), (double[]){5, 7, 9}, 3, 0, 0);
    nb_ck_close(nb_sum(nb_expand(nb_scalar(2, NB_F64), NB_SHAPE(3, 5)), (int[]){1}, 1, false),
                (double[]){10, 10, 10}, 3, 0, 0);
    /* integers sum (no promotion) and the empty sum is 0 */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(2, 2), NB_I32, (double[]){1, 2, 3, -10});
    nb_ck_close(nb_sum(i, NULL, 0, false), (double[]){-4}, 1, 0, 0);
    nb_ck_close(nb_sum(i, (int[]){0}, 1, false), (double[]){4, -8}, 2, 0, 0);
    ck_assert_double_eq(nb_item(nb_sum(nb_zeros(NB_SHAPE(0, 3), NB_F64), NULL, 0, false)), 0);
    nb_ck_close(nb_sum(nb_zeros(NB_SHAPE(0, 3), NB_F64), (int[]){0}, 1, false), (double[]){0, 0, 0}, 3, 0, 0);
    /* 0-d input */
    ck_assert_double_eq(nb_item(nb_sum(nb_scalar(4, NB_F64), NULL, 0, false)), 4);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_max_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    nb_ck_close(nb_max(x, (int[]){0}, 1, false), (double[]){4, 5, 6}, 3, 0, 0);
    nb_tensor *mk = nb_max(x, (int[]){1}, 1, true);
    nb_ck_shape(mk, 2, (int64_t[]){2, 1});
    nb_ck_close(mk, (double[]){5, 6}, 2, 0, 0);
    ck_assert_double_eq(nb_item(nb_max(x, NULL, 0, false)), 6);
    nb_ck_close(nb_max(nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){-5, -1, -3}), NULL, 0, false), (double[]){-1},
                1, 0, 0);

    nb_tensor *idx = NULL;
    nb_tensor *v = nb_max_dim(x, 1, false, &idx);
    nb_ck_shape(v, 1, (int64_t[]){2});
    nb_ck_close(v, (double[]){5, 6}, 2, 0, 0);
    NB_CK_NOTNULL(idx);
    ck_assert_int_eq(nb_dtype_of(idx), NB_I64);
    nb_ck_shape(idx, 1, (int64_t[]){2});
    nb_ck_close(idx, (double[]){1, 2}, 2, 0, 0);
    v = nb_max_dim(x, 0, true, &idx);
    nb_ck_shape(v, 2, (int64_t[]){1, 3});
    nb_ck_shape(idx, 2, (int64_t[]){1, 3});
    nb_ck_close(v, (double[]){4, 5, 6}, 3, 0, 0);
    nb_ck_close(idx, (double[]){1, 0, 1}, 3, 0, 0);
    nb_ck_close(nb_max_dim(x, -1, false, NULL), (double[]){5, 6}, 2, 0, 0);

    /* argmax: the first maximum on ties */
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 3, 3, 2, 2, 0});
    nb_tensor *am = nb_argmax(t, 1, false);
    ck_assert_int_eq(nb_dtype_of(am), NB_I64);
    nb_ck_close(am, (double[]){1, 0}, 2, 0, 0);
    nb_ck_close(nb_argmax(t, 0, false), (double[]){1, 0, 0}, 3, 0, 0);
    nb_ck_shape(nb_argmax(t, 0, true), 2, (int64_t[]){1, 3});
    nb_max_dim(t, 1, false, &idx);
    nb_ck_close(idx, (double[]){1, 0}, 2, 0, 0);
    /* strided input */
    nb_ck_close(nb_argmax(nb_transpose(x, 0, 1), 1, false), (double[]){1, 0, 1}, 3, 0, 0);
    nb_ck_close(nb_max(nb_transpose(x, 0, 1), (int[]){0}, 1, false), (double[]){5, 6}, 2, 0, 0);
    /* float32 and integer argmax */
    nb_ck_close(nb_argmax(nb_to_dtype(t, NB_F32), 1, false), (double[]){1, 0}, 2, 0, 0);
    nb_ck_close(nb_argmax(nb_to_dtype(t, NB_I64), 1, false), (double[]){1, 0}, 2, 0, 0);
    /* NaN propagates through max and counts as the maximum in argmax (PyTorch) */
    nb_tensor *n = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, NAN, 2, 5, 4, NAN});
    double mv[2];
    nb_test_values(nb_max(n, (int[]){1}, 1, false), mv, 2);
    ck_assert(isnan(mv[0]) && isnan(mv[1]));
    ck_assert(isnan(nb_item(nb_max(n, NULL, 0, false))));
    nb_ck_close(nb_argmax(n, 1, false), (double[]){1, 2}, 2, 0, 0);
    nb_max_dim(n, 1, false, &idx);
    nb_ck_close(idx, (double[]){1, 2}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_reduce_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    NB_CK_FAILS(nb_sum(x, (int[]){0, 0}, 2, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "sum"));
    NB_CK_FAILS(nb_sum(x, (int[]){1, -1}, 2, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mean(x, (int[]){2}, 1, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "mean"));
    NB_CK_FAILS(nb_max(x, (int[]){-3}, 1, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "max"));
    NB_CK_FAILS(nb_mean(nb_zeros(NB_SHAPE(2), NB_I32), NULL, 0, false), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_max(nb_zeros(NB_SHAPE(0, 2), NB_F64), (int[]){0}, 1, false), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_argmax(x, 2, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "argmax"));
    NB_CK_FAILS(nb_max_dim(x, -3, false, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_max_dim(nb_zeros(NB_SHAPE(2, 0), NB_F64), 1, false, NULL), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients ------------------------------------------------------------------ */

START_TEST(test_reduce_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* amax shares the gradient among tied maxima */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 3, 3});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_max(x, NULL, 0, false)));
    nb_ck_close(nb_grad(x), (double[]){0, 0.5, 0.5}, 3, 0, 0);
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 3, 3, 2, 2, 0});
    NB_CK_OK(nb_set_requires_grad(t, true));
    NB_CK_OK(nb_backward_with(nb_max(t, (int[]){1}, 1, false), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 4})));
    nb_ck_close(nb_grad(t), (double[]){0, 0.5, 0.5, 2, 2, 0}, 6, 0, 0);
    /* max_dim sends it to the first index only */
    nb_zero_grad_tensor(t);
    NB_CK_OK(nb_backward(nb_sum(nb_max_dim(t, 1, false, NULL), NULL, 0, false)));
    nb_ck_close(nb_grad(t), (double[]){0, 1, 0, 1, 0, 0}, 6, 0, 0);
    /* mean: 1/n to each element; sum over a dim with keepdim */
    nb_zero_grad_tensor(t);
    NB_CK_OK(nb_backward(nb_mean(t, NULL, 0, false)));
    nb_ck_close(nb_grad(t), (double[]){1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6}, 6, 0, 1e-15);
    nb_zero_grad_tensor(t);
    NB_CK_OK(nb_backward_with(nb_sum(t, (int[]){0}, 1, true), nb_test_tensor(NB_SHAPE(1, 3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(nb_grad(t), (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    nb_zero_grad_tensor(t);
    NB_CK_OK(nb_backward_with(nb_mean(t, (int[]){1}, 1, false), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 6})));
    nb_ck_close(nb_grad(t), (double[]){1, 1, 1, 2, 2, 2}, 6, 0, 1e-15);
    /* argmax is not differentiable */
    ck_assert(!nb_requires_grad(nb_argmax(t, 1, false)));
    nb_tensor *idx = NULL;
    nb_tensor *v = nb_max_dim(t, 0, false, &idx);
    ck_assert(nb_requires_grad(v) && !nb_requires_grad(idx));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_reduce_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 1);
    for (int op = 0; op < 3; op++)
        for (int kd = 0; kd < 2; kd++) {
            const red_ctx cases[] = {
                {op, {1}, 1, kd}, {op, {-1}, 1, kd}, {op, {0, 2}, 2, kd}, {op, {2, 1, 0}, 3, kd}, {op, {0}, 0, kd},
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                red_ctx ctx = cases[c];
                NB_CK_OK(nb_gradcheck(f_reduce, &x, 1, &ctx, NULL));
            }
        }
    for (int d = -1; d < 3; d++)
        for (int kd = 0; kd < 2; kd++) {
            red_ctx ctx = {3, {d}, 1, kd};
            NB_CK_OK(nb_gradcheck(f_reduce, &x, 1, &ctx, NULL));
        }
    /* 2-D and 1-D inputs */
    nb_tensor *m = nb_test_randn_grad(NB_SHAPE(3, 4), 2), *v = nb_test_randn_grad(NB_SHAPE(5), 3);
    for (int op = 0; op < 4; op++) {
        red_ctx c0 = {op, {0}, 1, false}, c1 = {op, {1}, 1, true};
        NB_CK_OK(nb_gradcheck(f_reduce, &m, 1, &c0, NULL));
        NB_CK_OK(nb_gradcheck(f_reduce, &m, 1, &c1, NULL));
        NB_CK_OK(nb_gradcheck(f_reduce, &v, 1, &c0, NULL));
    }
    nb_scope_end(s);
}
END_TEST

/* ---- determinism and float32 -------------------------------------------------------- */

START_TEST(test_sum_deterministic_across_threads) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *r[2][4];
    for (int k = 0; k < 2; k++) {
        nb_set_num_threads(k + 1);
        nb_generator g = nb_generator_new(8);
        nb_tensor *x = nb_randn(NB_SHAPE(300000), NB_F32, &g);
        nb_tensor *m = nb_randn(NB_SHAPE(1000, 257), NB_F32, &g);
        r[k][0] = nb_sum(x, NULL, 0, false);
        r[k][1] = nb_sum(m, (int[]){0}, 1, false);
        r[k][2] = nb_mean(m, (int[]){1}, 1, false);
        r[k][3] = nb_sum(nb_transpose(m, 0, 1), (int[]){1}, 1, false);
    }
    for (int i = 0; i < 4; i++) {
        size_t bytes = (size_t)nb_numel(r[0][i]) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes);
        ck_assert(a && b);
        NB_CK_OK(nb_to_host(r[0][i], a, bytes));
        NB_CK_OK(nb_to_host(r[1][i], b, bytes));
        ck_assert_msg(memcmp(a, b, bytes) == 0, "reduction %d differs between 1 and 2 threads", i);
        free(a);
        free(b);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_reduce_float32) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(21);
    nb_tensor *x32 = nb_randn(NB_SHAPE(6, 40, 5), NB_F32, &g);
    nb_tensor *x64 = nb_to_dtype(x32, NB_F64);
    const int dims[][2] = {{0, 0}, {1, 1}, {2, 0}};
    const int nd[] = {1, 1, 2};
    for (int c = 0; c < 3; c++) {
        nb_tensor *pairs[3][2] = {
            {nb_sum(x32, dims[c], nd[c], false), nb_sum(x64, dims[c], nd[c], false)},
            {nb_mean(x32, dims[c], nd[c], false), nb_mean(x64, dims[c], nd[c], false)},
            {nb_max(x32, dims[c], nd[c], false), nb_max(x64, dims[c], nd[c], false)},
        };
        for (int p = 0; p < 3; p++) {
            int64_t n = nb_numel(pairs[p][1]);
            double *want = malloc(sizeof(double) * (size_t)n);
            nb_test_values(pairs[p][1], want, n);
            ck_assert_int_eq(nb_dtype_of(pairs[p][0]), NB_F32);
            nb_ck_close(pairs[p][0], want, n, 1e-5, 1e-5);
            free(want);
        }
    }
    nb_ck_close(nb_sum(x32, NULL, 0, false), (double[]){nb_item(nb_sum(x64, NULL, 0, false))}, 1, 1e-4, 1e-5);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_reduce(void) {
    Suite *s = suite_create("ops_reduce");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_sum_mean_forward);
    tcase_add_test(f, test_max_forward);
    tcase_add_test(f, test_reduce_errors);
    tcase_add_test(f, test_reduce_float32);
    tcase_add_test(f, test_sum_deterministic_across_threads);
    tcase_set_timeout(f, 30);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_reduce_grad_by_hand);
    tcase_add_test(g, test_reduce_gradcheck);
    tcase_set_timeout(g, 60);
    suite_add_tcase(s, g);
    return s;
}
