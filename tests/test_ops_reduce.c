/* test_ops_reduce.c - sum, mean, prod, amax/amin, max/min along a dim
 * with indices, argmax/argmin, var/std, norm, logsumexp, all/any: forward
 * values by hand (one dim, several, all, keepdim both ways, strided
 * inputs, integers, empty dims), tie handling in the gradients, prod's
 * gradient with zeros, gradchecks, errors, determinism across thread
 * counts, and float32. */
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
    /* integers and bool sum to int64 (torch.sum), without wrapping; the empty sum is 0 */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(2, 2), NB_I32, (double[]){1, 2, 3, -10});
    nb_ck_close(nb_sum(i, NULL, 0, false), (double[]){-4}, 1, 0, 0);
    ck_assert_int_eq(nb_dtype_of(nb_sum(i, NULL, 0, false)), NB_I64);
    nb_tensor *bs = nb_sum(nb_gt_scalar(nb_arange(0, 10, 1, NB_F32), 3.5), NULL, 0, false);
    ck_assert_int_eq(nb_dtype_of(bs), NB_I64);
    ck_assert_double_eq(nb_item(bs), 6);
    ck_assert_double_eq(nb_item(nb_sum(nb_full(NB_SHAPE(300), 1, NB_U8), NULL, 0, false)), 300);
    nb_ck_close(nb_sum(i, (int[]){0}, 1, false), (double[]){4, -8}, 2, 0, 0);
    ck_assert_double_eq(nb_item(nb_sum(nb_zeros(NB_SHAPE(0, 3), NB_F64), NULL, 0, false)), 0);
    nb_ck_close(nb_sum(nb_zeros(NB_SHAPE(0, 3), NB_F64), (int[]){0}, 1, false), (double[]){0, 0, 0}, 3, 0, 0);
    /* 0-d input */
    ck_assert_double_eq(nb_item(nb_sum(nb_scalar(4, NB_F64), NULL, 0, false)), 4);
    /* a 0-d input takes dim 0 or -1, as PyTorch (result 0-d) */
    nb_tensor *z = nb_scalar(4, NB_F64), *zi = NULL;
    nb_tensor *zs = nb_sum(z, (int[]){-1}, 1, true);
    ck_assert_int_eq(nb_dim(zs), 0);
    ck_assert_double_eq(nb_item(zs), 4);
    ck_assert_double_eq(nb_item(nb_amax(z, (int[]){0}, 1, false)), 4);
    ck_assert_double_eq(nb_item(nb_argmax(z, 0, true)), 0);
    nb_tensor *zm = nb_max_dim(z, -1, false, &zi);
    ck_assert_int_eq(nb_dim(zm), 0);
    ck_assert_double_eq(nb_item(zm), 4);
    ck_assert_double_eq(nb_item(zi), 0);
    NB_CK_FAILS(nb_sum(z, (int[]){1}, 1, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sum(z, (int[]){0, -1}, 2, false), NB_ERR_INVALID_ARG);
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
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 0.5, 0.5}, 3, 0, 0);
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 3, 3, 2, 2, 0});
    NB_CK_OK(nb_set_requires_grad(t, true));
    NB_CK_OK(nb_backward_with(nb_max(t, (int[]){1}, 1, false), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 4})));
    nb_ck_close(nb_tensor_grad(t), (double[]){0, 0.5, 0.5, 2, 2, 0}, 6, 0, 0);
    /* max_dim sends it to the first index only */
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward(nb_sum(nb_max_dim(t, 1, false, NULL), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){0, 1, 0, 1, 0, 0}, 6, 0, 0);
    /* mean: 1/n to each element; sum over a dim with keepdim */
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward(nb_mean(t, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6}, 6, 0, 1e-15);
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward_with(nb_sum(t, (int[]){0}, 1, true), nb_test_tensor(NB_SHAPE(1, 3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(nb_tensor_grad(t), (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward_with(nb_mean(t, (int[]){1}, 1, false), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 6})));
    nb_ck_close(nb_tensor_grad(t), (double[]){1, 1, 1, 2, 2, 2}, 6, 0, 1e-15);
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

/* ---- prod, amin/min, argmin, var/std, norm, logsumexp, all/any ------------------- */

typedef struct {
    int op; /* 0 prod, 1 amin, 2 min_dim, 3 var, 4 std, 5 norm, 6 logsumexp */
    int dims[3];
    int n_dims;
    bool keepdim;
    double arg; /* correction or p */
} red2_ctx;

static nb_tensor *f_reduce2(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const red2_ctx *c = ctx;
    const int *dims = c->n_dims ? c->dims : NULL;
    switch (c->op) {
    case 0: return nb_prod(in[0], dims, c->n_dims, c->keepdim);
    case 1: return nb_amin(in[0], dims, c->n_dims, c->keepdim);
    case 2: return nb_min_dim(in[0], c->dims[0], c->keepdim, NULL);
    case 3: return nb_var(in[0], dims, c->n_dims, c->arg, c->keepdim);
    case 4: return nb_std(in[0], dims, c->n_dims, c->arg, c->keepdim);
    case 5: return nb_norm(in[0], c->arg, dims, c->n_dims, c->keepdim);
    default: return nb_logsumexp(in[0], dims, c->n_dims, c->keepdim);
    }
}

static nb_tensor *grad_tensor(int ndim, const int64_t *shape, const double *v) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

START_TEST(test_prod_forward_and_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23(); /* 1 5 3 / 4 2 6 */
    nb_ck_close(nb_prod(x, NULL, 0, false), (double[]){720}, 1, 0, 0);
    nb_ck_close(nb_prod(x, (int[]){0}, 1, false), (double[]){4, 10, 18}, 3, 0, 0);
    nb_tensor *pk = nb_prod(x, (int[]){-1}, 1, true);
    nb_ck_shape(pk, 2, (int64_t[]){2, 1});
    nb_ck_close(pk, (double[]){15, 48}, 2, 0, 0);
    /* integers give int64, as PyTorch; the empty product is 1 */
    nb_tensor *pi = nb_prod(nb_test_tensor(NB_SHAPE(2, 2), NB_I32, (double[]){2, -3, 4, 5}), (int[]){1}, 1, false);
    ck_assert_int_eq(nb_dtype_of(pi), NB_I64);
    nb_ck_close(pi, (double[]){-6, 20}, 2, 0, 0);
    ck_assert_int_eq(nb_dtype_of(nb_prod(nb_ones(NB_SHAPE(2), NB_BOOL), NULL, 0, false)), NB_I64);
    ck_assert_double_eq(nb_item(nb_prod(nb_zeros(NB_SHAPE(0), NB_F64), NULL, 0, false)), 1);
    nb_ck_close(nb_prod(nb_zeros(NB_SHAPE(0, 2), NB_F64), (int[]){0}, 1, false), (double[]){1, 1}, 2, 0, 0);
    ck_assert_int_eq(nb_numel(nb_prod(nb_zeros(NB_SHAPE(0, 2), NB_F64), (int[]){1}, 1, false)), 0);
    /* gradient by hand: one zero -> product of the others there only; two zeros -> 0 */
    nb_tensor *z = grad_tensor(NB_SHAPE(3, 3), (double[]){2, 3, 4, 2, 0, 5, 0, 7, 0});
    NB_CK_OK(nb_backward(nb_sum(nb_prod(z, (int[]){1}, 1, false), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(z), (double[]){12, 8, 6, 0, 10, 0, 0, 0, 0}, 9, 0, 1e-15);
    /* gradchecks: random (no zeros), and inputs with one and two zeros */
    nb_tensor *r = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 5);
    const red2_ctx cs[] = {{0, {1}, 1, false, 0}, {0, {0, 2}, 2, true, 0}, {0, {0}, 0, false, 0}, {0, {-1}, 1, true, 0}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) NB_CK_OK(nb_gradcheck(f_reduce2, &r, 1, (void *)&cs[c], NULL));
    NB_CK_OK(nb_gradcheck(f_reduce2, &z, 1, (void *)&cs[0], NULL));
    red2_ctx c0 = {0, {0}, 1, false, 0}, call = {0, {0}, 0, false, 0};
    NB_CK_OK(nb_gradcheck(f_reduce2, &z, 1, &c0, NULL));
    nb_tensor *one0 = grad_tensor(NB_SHAPE(4), (double[]){1.5, 0, -2, 3});
    NB_CK_OK(nb_gradcheck(f_reduce2, &one0, 1, &call, NULL));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_min_forward_and_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23(); /* 1 5 3 / 4 2 6 */
    nb_ck_close(nb_min(x, (int[]){0}, 1, false), (double[]){1, 2, 3}, 3, 0, 0);
    nb_ck_close(nb_amin(x, (int[]){1}, 1, true), (double[]){1, 2}, 2, 0, 0);
    nb_ck_shape(nb_amin(x, (int[]){1}, 1, true), 2, (int64_t[]){2, 1});
    ck_assert_double_eq(nb_item(nb_amin(x, NULL, 0, false)), 1);
    ck_assert_double_eq(nb_item(nb_amax(x, NULL, 0, false)), 6);
    nb_ck_close(nb_amax(x, (int[]){0}, 1, false), (double[]){4, 5, 6}, 3, 0, 0);
    nb_tensor *idx = NULL;
    nb_tensor *v = nb_min_dim(x, 1, false, &idx);
    nb_ck_close(v, (double[]){1, 2}, 2, 0, 0);
    ck_assert_int_eq(nb_dtype_of(idx), NB_I64);
    nb_ck_close(idx, (double[]){0, 1}, 2, 0, 0);
    v = nb_min_dim(x, 0, true, &idx);
    nb_ck_shape(idx, 2, (int64_t[]){1, 3});
    nb_ck_close(v, (double[]){1, 2, 3}, 3, 0, 0);
    nb_ck_close(idx, (double[]){0, 1, 0}, 3, 0, 0);
    /* argmin: first minimum on ties; integers; NaN counts as the minimum */
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){3, 1, 1, 2, 2, 5});
    nb_tensor *am = nb_argmin(t, 1, false);
    ck_assert_int_eq(nb_dtype_of(am), NB_I64);
    nb_ck_close(am, (double[]){1, 0}, 2, 0, 0);
    nb_ck_close(nb_argmin(t, 0, true), (double[]){1, 0, 0}, 3, 0, 0);
    nb_ck_close(nb_argmin(nb_to_dtype(t, NB_I32), -1, false), (double[]){1, 0}, 2, 0, 0);
    nb_ck_close(nb_argmin(nb_transpose(t, 0, 1), 1, false), (double[]){1, 0, 0}, 3, 0, 0);
    nb_tensor *n = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, NAN, -2, NAN});
    nb_ck_close(nb_argmin(n, 0, false), (double[]){1}, 1, 0, 0);
    ck_assert(isnan(nb_item(nb_amin(n, NULL, 0, false))));
    /* tie gradients: amin shares, min_dim sends to the first index */
    nb_tensor *tg = grad_tensor(NB_SHAPE(2, 3), (double[]){3, 1, 1, 2, 2, 2});
    NB_CK_OK(nb_backward_with(nb_amin(tg, (int[]){1}, 1, false), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 3})));
    nb_ck_close(nb_tensor_grad(tg), (double[]){0, 0.5, 0.5, 1, 1, 1}, 6, 0, 1e-15);
    nb_tensor_zero_grad(tg);
    NB_CK_OK(nb_backward(nb_sum(nb_min_dim(tg, 1, false, NULL), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(tg), (double[]){0, 1, 0, 1, 0, 0}, 6, 0, 0);
    nb_tensor_zero_grad(tg);
    NB_CK_OK(nb_backward(nb_amax(tg, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(tg), (double[]){1, 0, 0, 0, 0, 0}, 6, 0, 0);
    ck_assert(!nb_requires_grad(nb_argmin(tg, 1, false)));
    /* gradchecks without ties */
    nb_tensor *r = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 6);
    const red2_ctx cs[] = {{1, {1}, 1, false, 0}, {1, {0, 2}, 2, true, 0}, {1, {0}, 0, false, 0},
                           {2, {1}, 1, false, 0}, {2, {-1}, 1, true, 0}, {2, {0}, 1, false, 0}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) NB_CK_OK(nb_gradcheck(f_reduce2, &r, 1, (void *)&cs[c], NULL));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_var_std) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23(); /* 1 5 3 / 4 2 6: rows have mean 3 and 4, sum sq dev 8 and 8 */
    nb_ck_close(nb_var(x, (int[]){1}, 1, 1, false), (double[]){4, 4}, 2, 1e-14, 0);
    nb_ck_close(nb_var(x, (int[]){1}, 1, 0, false), (double[]){8.0 / 3, 8.0 / 3}, 2, 1e-14, 0);
    nb_ck_close(nb_std(x, (int[]){1}, 1, 1, true), (double[]){2, 2}, 2, 1e-14, 0);
    nb_ck_shape(nb_std(x, (int[]){1}, 1, 1, true), 2, (int64_t[]){2, 1});
    /* all: mean 3.5, sum sq dev 17.5 */
    nb_ck_close(nb_var(x, NULL, 0, 1, false), (double[]){3.5}, 1, 1e-14, 0);
    nb_ck_close(nb_std(x, NULL, 0, 0, false), (double[]){sqrt(17.5 / 6)}, 1, 1e-14, 0);
    nb_ck_close(nb_var(x, (int[]){0}, 1, 1, false), (double[]){4.5, 4.5, 4.5}, 3, 1e-14, 0);
    /* N - correction <= 0: one element gives NaN (0/0), as PyTorch */
    ck_assert(isnan(nb_item(nb_var(nb_scalar(2, NB_F64), NULL, 0, 1, false))));
    ck_assert(isinf(nb_item(nb_var(nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2}), NULL, 0, 2, false))));
    nb_tensor *r = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 7);
    for (int op = 3; op <= 4; op++)
        for (int corr = 0; corr <= 1; corr++) {
            const red2_ctx cs[] = {{op, {1}, 1, false, corr}, {op, {0, 2}, 2, true, corr}, {op, {0}, 0, false, corr}};
            for (size_t c = 0; c < 3; c++) NB_CK_OK(nb_gradcheck(f_reduce2, &r, 1, (void *)&cs[c], NULL));
        }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_norm) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){3, -4, 0, -1, 2, -2});
    nb_ck_close(nb_norm(x, 2, (int[]){1}, 1, false), (double[]){5, 3}, 2, 1e-14, 0);
    nb_ck_close(nb_norm(x, 1, (int[]){1}, 1, false), (double[]){7, 5}, 2, 0, 0);
    nb_ck_close(nb_norm(x, INFINITY, (int[]){1}, 1, false), (double[]){4, 2}, 2, 0, 0);
    nb_ck_close(nb_norm(x, -INFINITY, (int[]){1}, 1, false), (double[]){0, 1}, 2, 0, 0);
    nb_ck_close(nb_norm(x, 3, (int[]){1}, 1, false), (double[]){cbrt(91), cbrt(17)}, 2, 1e-14, 0);
    nb_ck_close(nb_norm(x, 2, NULL, 0, false), (double[]){sqrt(34)}, 1, 1e-14, 0);
    nb_tensor *fro = nb_norm(x, 2, (int[]){0, 1}, 2, true); /* torch.norm(p='fro') */
    nb_ck_shape(fro, 2, (int64_t[]){1, 1});
    nb_ck_close(fro, (double[]){sqrt(34)}, 1, 1e-14, 0);
    /* the 2-norm of zeros has gradient 0 (masked); inf norm shares among ties with sign */
    nb_tensor *z = grad_tensor(NB_SHAPE(2, 2), (double[]){0, 0, 3, -4});
    NB_CK_OK(nb_backward(nb_sum(nb_norm(z, 2, (int[]){1}, 1, false), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(z), (double[]){0, 0, 0.6, -0.8}, 4, 1e-15, 0);
    nb_tensor *t = grad_tensor(NB_SHAPE(4), (double[]){2, -2, 1, 0});
    NB_CK_OK(nb_backward(nb_norm(t, INFINITY, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){0.5, -0.5, 0, 0}, 4, 0, 0);
    nb_tensor_zero_grad(t);
    NB_CK_OK(nb_backward(nb_norm(t, 1, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){1, -1, 1, 0}, 4, 0, 0);
    nb_tensor *r = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 8);
    const double ps[] = {1, 2, 3, INFINITY, -INFINITY};
    for (int i = 0; i < 5; i++) {
        const red2_ctx cs[] = {{5, {1}, 1, false, ps[i]}, {5, {0, 2}, 2, true, ps[i]}, {5, {0}, 0, false, ps[i]}};
        for (size_t c = 0; c < 3; c++) NB_CK_OK(nb_gradcheck(f_reduce2, &r, 1, (void *)&cs[c], NULL));
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_logsumexp) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    nb_ck_close(nb_logsumexp(x, (int[]){1}, 1, false),
                (double[]){log(exp(1) + exp(5) + exp(3)), log(exp(4) + exp(2) + exp(6))}, 2, 1e-14, 1e-14);
    /* stable for large values and exact for -inf */
    nb_tensor *big = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1000, 1000, -INFINITY, -INFINITY});
    nb_tensor *l = nb_logsumexp(big, (int[]){1}, 1, true);
    nb_ck_shape(l, 2, (int64_t[]){2, 1});
    double lv[2];
    nb_test_values(l, lv, 2);
    ck_assert_double_eq_tol(lv[0], 1000 + log(2), 1e-12);
    ck_assert(isinf(lv[1]) && lv[1] < 0);
    nb_tensor *b32 = nb_logsumexp(nb_to_dtype(big, NB_F32), (int[]){1}, 1, false);
    nb_test_values(b32, lv, 2);
    ck_assert_double_eq_tol(lv[0], 1000 + log(2), 1e-3);
    /* empty dim: -inf */
    nb_tensor *e = nb_logsumexp(nb_zeros(NB_SHAPE(2, 0), NB_F64), (int[]){1}, 1, false);
    nb_test_values(e, lv, 2);
    ck_assert(isinf(lv[0]) && lv[0] < 0 && isinf(lv[1]));
    /* the gradient is softmax */
    nb_tensor *g = grad_tensor(NB_SHAPE(3), (double[]){1, 2, 3});
    NB_CK_OK(nb_backward(nb_logsumexp(g, NULL, 0, false)));
    double z = exp(1) + exp(2) + exp(3);
    nb_ck_close(nb_tensor_grad(g), (double[]){exp(1) / z, exp(2) / z, exp(3) / z}, 3, 1e-15, 1e-14);
    nb_tensor *r = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 9);
    const red2_ctx cs[] = {{6, {1}, 1, false, 0}, {6, {0, 2}, 2, true, 0}, {6, {0}, 0, false, 0}, {6, {-1}, 1, true, 0}};
    for (size_t c = 0; c < 4; c++) NB_CK_OK(nb_gradcheck(f_reduce2, &r, 1, (void *)&cs[c], NULL));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_all_any) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 0, 2, 3, 4, -5});
    nb_tensor *a = nb_all(x, (int[]){1}, 1, false);
    ck_assert_int_eq(nb_dtype_of(a), NB_BOOL);
    nb_ck_close(a, (double[]){0, 1}, 2, 0, 0);
    nb_ck_close(nb_any(x, (int[]){0}, 1, false), (double[]){1, 1, 1}, 3, 0, 0);
    nb_ck_close(nb_all(x, (int[]){0}, 1, true), (double[]){1, 0, 1}, 3, 0, 0);
    nb_ck_shape(nb_all(x, (int[]){0}, 1, true), 2, (int64_t[]){1, 3});
    ck_assert_double_eq(nb_item(nb_all(x, NULL, 0, false)), 0);
    ck_assert_double_eq(nb_item(nb_any(x, NULL, 0, false)), 1);
    /* integers, bool, NaN (nonzero, so true) */
    nb_tensor *i = nb_test_tensor(NB_SHAPE(2, 2), NB_I32, (double[]){0, 0, 0, 7});
    nb_ck_close(nb_any(i, (int[]){1}, 1, false), (double[]){0, 1}, 2, 0, 0);
    nb_ck_close(nb_all(nb_to_dtype(i, NB_BOOL), (int[]){0}, 1, false), (double[]){0, 0}, 2, 0, 0);
    nb_ck_close(nb_all(nb_test_tensor(NB_SHAPE(2), NB_F32, (double[]){NAN, 1}), NULL, 0, false), (double[]){1}, 1, 0, 0);
    nb_ck_close(nb_any(nb_zeros(NB_SHAPE(3), NB_U8), NULL, 0, false), (double[]){0}, 1, 0, 0);
    /* empty: all is true, any false */
    nb_tensor *e = nb_zeros(NB_SHAPE(2, 0), NB_F64);
    nb_ck_close(nb_all(e, (int[]){1}, 1, false), (double[]){1, 1}, 2, 0, 0);
    nb_ck_close(nb_any(e, (int[]){1}, 1, false), (double[]){0, 0}, 2, 0, 0);
    ck_assert_double_eq(nb_item(nb_all(e, NULL, 0, false)), 1);
    ck_assert_int_eq(nb_numel(nb_any(e, (int[]){0}, 1, false)), 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_reduce2_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = m23();
    NB_CK_FAILS(nb_prod(x, (int[]){0, -2}, 2, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "prod"));
    NB_CK_FAILS(nb_amin(x, (int[]){2}, 1, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_amax(nb_zeros(NB_SHAPE(0, 2), NB_F64), (int[]){0}, 1, false), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_amin(nb_zeros(NB_SHAPE(0), NB_F64), NULL, 0, false), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_min_dim(x, 2, false, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_min_dim(nb_zeros(NB_SHAPE(2, 0), NB_F64), 1, false, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_argmin(x, -3, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "argmin"));
    NB_CK_FAILS(nb_var(x, (int[]){1, 1}, 2, 1, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "var"));
    NB_CK_FAILS(nb_std(nb_zeros(NB_SHAPE(3), NB_I64), NULL, 0, 1, false), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_norm(x, 0.5, NULL, 0, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_norm(x, 2, (int[]){5}, 1, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_norm(nb_zeros(NB_SHAPE(0), NB_F64), INFINITY, NULL, 0, false), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_logsumexp(x, (int[]){-3}, 1, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_logsumexp(nb_zeros(NB_SHAPE(3), NB_I32), NULL, 0, false), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_all(x, (int[]){0, 0}, 2, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_any(x, (int[]){2}, 1, false), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "any"));
    nb_scope_end(s);
}
END_TEST

/* std's gradient is 0 where std == 0 (PyTorch's std_backward masks it);
 * amax/amin/max take integer tensors. */
START_TEST(test_std_grad_zero_and_int_amax) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 1, 1});
    nb_set_requires_grad(x, true);
    NB_CK_OK(nb_backward(nb_std(x, NULL, 0, 1, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 0, 0}, 3, 0, 0);
    nb_tensor *i = nb_test_tensor(NB_SHAPE(2, 2), NB_I32, (double[]){3, -7, 5, 2});
    nb_tensor *m = nb_amax(i, (int[]){1}, 1, false);
    NB_CK_NOTNULL(m);
    ck_assert_int_eq(nb_dtype_of(m), NB_I32);
    nb_ck_close(m, (double[]){3, 5}, 2, 0, 0);
    nb_ck_close(nb_amin(i, NULL, 0, false), (double[]){-7}, 1, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* Regressions (issue 13): a mean or mse_loss over zero elements is NaN
 * (0/0, as PyTorch), not 0; prod's gradient beside inf or NaN is the
 * product of the other elements (PyTorch 1.13's g * out / x gives NaN). */
START_TEST(test_empty_mean_and_prod_grad_special) {
    nb_scope *s = nb_scope_begin();
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F32 : NB_F64;
        nb_tensor *e = nb_zeros(NB_SHAPE(0), dt);
        ck_assert(isnan(nb_item(nb_mean(e, NULL, 0, false))));
        ck_assert(isnan(nb_item(nb_mse_loss(e, e, NB_REDUCTION_MEAN))));
        ck_assert(nb_item(nb_mse_loss(e, e, NB_REDUCTION_SUM)) == 0);
        nb_tensor *m = nb_mean(nb_zeros(NB_SHAPE(2, 0), dt), (int[]){1}, 1, false);
        double v[2];
        nb_test_values(m, v, 2);
        ck_assert(isnan(v[0]) && isnan(v[1]));
        ck_assert(nb_numel(nb_mean(nb_zeros(NB_SHAPE(0, 3), dt), (int[]){1}, 1, false)) == 0);
    }
    const double cases[][3] = {{INFINITY, 2, 3}, {NAN, 2, 3}, {0, INFINITY, 3}, {-INFINITY, 0.5, 4}};
    const double want[][3] = {{6, INFINITY, INFINITY}, {6, NAN, NAN}, {INFINITY, 0, NAN}, {2, -INFINITY, -INFINITY}};
    for (int c = 0; c < 4; c++) {
        nb_tensor *x = nb_test_tensor(1, (int64_t[]){3}, NB_F64, cases[c]);
        NB_CK_OK(nb_set_requires_grad(x, true));
        NB_CK_OK(nb_backward(nb_prod(x, NULL, 0, false)));
        nb_ck_close(nb_tensor_grad(x), want[c], 3, 0, 1e-15);
    }
    /* over one dim of a 2-d input, slices with and without specials side by side */
    nb_tensor *x = nb_test_tensor(2, (int64_t[]){2, 3}, NB_F64, (double[]){1, 2, 3, INFINITY, 0.5, 4});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_sum(nb_prod(x, (int[]){1}, 1, false), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){6, 3, 2, 2, INFINITY, INFINITY}, 6, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

/* argmax, argmin and max(dim) with indices over long lines (a decoder's
 * logits: on CUDA, lines of at least 8192 split into chunks and combined)
 * on each accelerator against the CPU: 1 and 3 lines of 128256 (one chunk
 * partial), float32, float64 and int32, ties at the maximum (the first
 * wins, placed in different chunks), a NaN (the first NaN wins), and lines
 * along a strided dim. */
START_TEST(test_argmax_long_lines_device) {
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    const int64_t n = 128256;
    const nb_dtype dts[3] = {NB_F32, NB_F64, NB_I32};
    for (int a = 0; a < na; a++) {
        const nb_device dev = accs[a];
        for (int di = 0; di < 3; di++)
            for (int64_t lines = 1; lines <= 3; lines += 2)
                for (int mode = 0; mode < 3; mode++) { /* 0 ties, 1 a NaN, 2 along dim 0 of [n, lines] */
                    nb_scope *s = nb_scope_begin();
                    nb_generator g = nb_generator_new((uint64_t)(7 * di + lines + 100 * mode));
                    double *v = malloc(sizeof(double) * (size_t)(lines * n));
                    ck_assert_ptr_nonnull(v);
                    nb_tensor *r = nb_randn(NB_SHAPE(lines, n), NB_F64, &g);
                    nb_test_values(r, v, lines * n);
                    for (int64_t l = 0; l < lines; l++) {
                        double *row = v + l * n;
                        for (int64_t i = 0; i < n; i++) row[i] = nb_dtype_is_float(dts[di]) ? row[i] : floor(row[i] * 100);
                        int64_t a = (50000 + 7919 * l) % n, b = a + 9000 + l; /* equal extremes in other chunks */
                        row[a] = row[b] = 1000, row[(a + 20000) % n] = -1000, row[(b + 20000) % n] = -1000;
                        if (mode == 1 && nb_dtype_is_float(dts[di])) row[(a + 30001) % n] = NAN, row[(a + 40001) % n] = NAN;
                    }
                    nb_tensor *x = nb_to_dtype(nb_test_tensor(NB_SHAPE(lines, n), NB_F64, v), dts[di]);
                    free(v);
                    int dim = 1;
                    if (mode == 2) x = nb_transpose(nb_contiguous(nb_transpose(x, 0, 1)), 0, 1), dim = 1;
                    nb_tensor *xd = nb_to_device(x, dev);
                    NB_CK_NOTNULL(xd);
                    nb_tensor *outs[4] = {nb_argmax(x, dim, false), nb_argmin(x, dim, false), NULL, NULL};
                    nb_tensor *douts[4] = {nb_argmax(xd, dim, false), nb_argmin(xd, dim, false), NULL, NULL};
                    nb_tensor *mv = nb_max_dim(x, dim, false, &outs[2]), *dmv = nb_max_dim(xd, dim, false, &douts[2]);
                    outs[3] = mv, douts[3] = dmv;
                    for (int k = 0; k < 4; k++) {
                        double *want = nb_test_values_of(outs[k]);
                        nb_ck_close(nb_to_device(douts[k], NB_CPU), want, lines, 0, 0);
                        free(want);
                    }
                    nb_scope_end(s);
                }
    }
}
END_TEST

Suite *nb_suite_ops_reduce(void) {
    Suite *s = suite_create("ops_reduce");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_sum_mean_forward);
    tcase_add_test(f, test_empty_mean_and_prod_grad_special);
    tcase_add_test(f, test_max_forward);
    tcase_add_test(f, test_reduce_errors);
    tcase_add_test(f, test_all_any);
    tcase_add_test(f, test_reduce2_errors);
    tcase_add_test(f, test_reduce_float32);
    tcase_add_test(f, test_sum_deterministic_across_threads);
    tcase_add_test(f, test_argmax_long_lines_device);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_reduce_grad_by_hand);
    tcase_add_test(g, test_reduce_gradcheck);
    tcase_add_test(g, test_prod_forward_and_grad);
    tcase_add_test(g, test_min_forward_and_grad);
    tcase_add_test(g, test_var_std);
    tcase_add_test(g, test_norm);
    tcase_add_test(g, test_logsumexp);
    tcase_add_test(g, test_std_grad_zero_and_int_amax);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
