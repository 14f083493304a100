/* test_ops_batch_norm.c - batch_norm and the BatchNorm1d/2d modules:
 * forwards against values computed by hand from PyTorch's formulas (batch
 * statistics with the biased variance, running stats with momentum 0.1 and
 * the unbiased variance), gradchecks in float64 (training and eval), error
 * paths, float32 against float64, and the same bits for 1 and 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

#define EPS 1e-5

/* Asserts a and b have the same bytes (same dtype and shape). */
static void ck_same_bits(const nb_tensor *a, const nb_tensor *b) {
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    size_t bytes = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    NB_CK_OK(nb_to_host(a, x, bytes));
    NB_CK_OK(nb_to_host(b, y, bytes));
    ck_assert_msg(!memcmp(x, y, bytes), "results differ bitwise");
    free(x);
    free(y);
}

/* ---- batch norm: host reference ---------------------------------------------- */

/* Mean and biased variance of channel c of x [N, C, S] (host, two passes). */
static void ref_stats(const double *x, int64_t N, int64_t C, int64_t S, int64_t c, double *mean, double *var) {
    double s = 0, v = 0, M = (double)(N * S);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++) s += x[(n * C + c) * S + i];
    *mean = s / M;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++) {
            double d = x[(n * C + c) * S + i] - *mean;
            v += d * d;
        }
    *var = v / M;
}

/* y = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] (w, b NULL: 1, 0). */
static void ref_bn(const double *x, int64_t N, int64_t C, int64_t S, const double *mean, const double *var,
                   const double *w, const double *b, double *y) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + c) * S + i;
                y[e] = (x[e] - mean[c]) / sqrt(var[c] + EPS) * (w ? w[c] : 1) + (b ? b[c] : 0);
            }
}

/* ---- batch norm: forward ------------------------------------------------------------ */

START_TEST(test_bn_training_forward_and_running_stats) {
    nb_scope *s = nb_scope_begin();
    /* x1 [4, 2]: channel 0 = 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3);
     * channel 1 = 0, 0, 2, 6 (mean 2, biased var 6, unbiased 8) */
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){1, 0, 2, 0, 3, 2, 4, 6});
    nb_tensor *rm = nb_zeros(NB_SHAPE(2), NB_F64), *rv = nb_ones(NB_SHAPE(2), NB_F64);
    nb_tensor *y = nb_batch_norm(x1, rm, rv, NULL, NULL, true, 0.1, EPS);
    double a = 1 / sqrt(1.25 + EPS), b = 1 / sqrt(6 + EPS);
    nb_ck_close(y, (double[]){-1.5 * a, -2 * b, -0.5 * a, -2 * b, 0.5 * a, 0, 1.5 * a, 4 * b}, 8, 1e-14, 1e-12);
    double rm1[2] = {0.9 * 0 + 0.1 * 2.5, 0.9 * 0 + 0.1 * 2}, rv1[2] = {0.9 * 1 + 0.1 * 5.0 / 3, 0.9 * 1 + 0.1 * 8};
    nb_ck_close(rm, rm1, 2, 1e-15, 1e-14);
    nb_ck_close(rv, rv1, 2, 1e-15, 1e-14);
    /* step 2, x2: channel 0 = 2, 2, 2, 6 (mean 3, unbiased var 4); channel 1 = -1, 1, -1, 1 (mean 0, 4/3) */
    nb_tensor *x2 = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){2, -1, 2, 1, 2, -1, 6, 1});
    NB_CK_NOTNULL(nb_batch_norm(x2, rm, rv, NULL, NULL, true, 0.1, EPS));
    double rm2[2] = {0.9 * rm1[0] + 0.1 * 3, 0.9 * rm1[1] + 0.1 * 0};
    double rv2[2] = {0.9 * rv1[0] + 0.1 * 4, 0.9 * rv1[1] + 0.1 * 4.0 / 3};
    nb_ck_close(rm, rm2, 2, 1e-15, 1e-14);
    nb_ck_close(rv, rv2, 2, 1e-15, 1e-14);
    /* eval uses the running statistics (and leaves them alone) */
    double w[2] = {2, 0.5}, bias[2] = {1, -1}, want[8];
    nb_tensor *wt = nb_test_tensor(NB_SHAPE(2), NB_F64, w), *bt = nb_test_tensor(NB_SHAPE(2), NB_F64, bias);
    double x3[8] = {0.5, 3, -1, 2, 4, 0, 1, 1};
    ref_bn(x3, 4, 2, 1, rm2, rv2, w, bias, want);
    nb_ck_close(nb_batch_norm(nb_test_tensor(NB_SHAPE(4, 2), NB_F64, x3), rm, rv, wt, bt, false, 0.1, EPS), want, 8,
                1e-14, 1e-12);
    nb_ck_close(rm, rm2, 2, 0, 0);
    nb_ck_close(rv, rv2, 2, 0, 0);
    /* training without running stats: batch statistics only */
    nb_ck_close(nb_batch_norm(x1, NULL, NULL, NULL, NULL, true, 0.1, EPS),
                (double[]){-1.5 * a, -2 * b, -0.5 * a, -2 * b, 0.5 * a, 0, 1.5 * a, 4 * b}, 8, 1e-14, 1e-12);
    nb_scope_end(s);
}
END_TEST

/* [N, C, H, W] with weight and bias against the host reference, float64 and float32. */
START_TEST(test_bn_4d_forward) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    int64_t N = 3, C = 4, H = 5, W = 7, S = H * W, n = N * C * S;
    nb_tensor *x = nb_add_scalar(nb_mul_scalar(nb_randn(NB_SHAPE(N, C, H, W), NB_F64, &g), 2), 0.7);
    nb_tensor *w = nb_randn(NB_SHAPE(C), NB_F64, &g), *b = nb_randn(NB_SHAPE(C), NB_F64, &g);
    nb_tensor *rm = nb_zeros(NB_SHAPE(C), NB_F64), *rv = nb_ones(NB_SHAPE(C), NB_F64);
    double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = nb_test_values_of(b), mean[4], var[4], rmw[4], rvw[4];
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int c = 0; c < C; c++) {
        ref_stats(xv, N, C, S, c, &mean[c], &var[c]);
        rmw[c] = 0.1 * mean[c];
        rvw[c] = 0.9 + 0.1 * var[c] * (double)(N * S) / (double)(N * S - 1);
    }
    ref_bn(xv, N, C, S, mean, var, wv, bv, want);
    nb_tensor *y = nb_batch_norm(x, rm, rv, w, b, true, 0.1, EPS);
    nb_ck_shape(y, 4, (int64_t[]){N, C, H, W});
    nb_ck_close(y, want, n, 1e-12, 1e-12);
    nb_ck_close(rm, rmw, C, 1e-14, 1e-12);
    nb_ck_close(rv, rvw, C, 1e-14, 1e-12);
    /* float32 agrees; its running stats are float32 too */
    nb_tensor *rm32 = nb_zeros(NB_SHAPE(C), NB_F32), *rv32 = nb_ones(NB_SHAPE(C), NB_F32);
    nb_tensor *y32 = nb_batch_norm(nb_to_dtype(x, NB_F32), rm32, rv32, nb_to_dtype(w, NB_F32),
                                   nb_to_dtype(b, NB_F32), true, 0.1, EPS);
    ck_assert_int_eq(nb_dtype_of(y32), NB_F32);
    nb_ck_close(y32, want, n, 1e-5, 1e-5);
    nb_ck_close(rv32, rvw, C, 1e-6, 1e-6);
    /* a non-contiguous input (a transposed view) gives the same values */
    nb_tensor *xt = nb_contiguous(nb_transpose(x, 2, 3));
    nb_tensor *yt = nb_batch_norm(nb_transpose(xt, 2, 3), NULL, NULL, w, b, true, 0.1, EPS);
    nb_ck_close(yt, want, n, 1e-12, 1e-12);
    free(xv), free(wv), free(bv), free(want);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_bn_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *rm = nb_zeros(NB_SHAPE(3), NB_F64), *rv = nb_ones(NB_SHAPE(3), NB_F64);
    /* one value per channel in training, as PyTorch's "Expected more than 1 value per channel" */
    NB_CK_FAILS(nb_batch_norm(nb_ones(NB_SHAPE(1, 3), NB_F64), rm, rv, NULL, NULL, true, 0.1, EPS),
                NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "more than 1 value per channel"), "%s", nb_last_error());
    NB_CK_FAILS(nb_batch_norm(nb_ones(NB_SHAPE(1, 3, 1, 1), NB_F64), NULL, NULL, NULL, NULL, true, 0.1, EPS),
                NB_ERR_INVALID_ARG);
    /* ... which eval allows */
    nb_ck_close(nb_batch_norm(nb_ones(NB_SHAPE(1, 3), NB_F64), rm, rv, NULL, NULL, false, 0.1, EPS),
                (double[]){1 / sqrt(1 + EPS), 1 / sqrt(1 + EPS), 1 / sqrt(1 + EPS)}, 3, 1e-15, 1e-14);
    /* an empty batch gives an empty output and leaves the running stats alone */
    nb_ck_shape(nb_batch_norm(nb_ones(NB_SHAPE(0, 3), NB_F64), rm, rv, NULL, NULL, true, 0.1, EPS), 2,
                (int64_t[]){0, 3});
    nb_ck_shape(nb_batch_norm(nb_ones(NB_SHAPE(0, 3, 2, 2), NB_F64), rm, rv, NULL, NULL, true, 0.1, EPS), 4,
                (int64_t[]){0, 3, 2, 2});
    nb_ck_close(rm, (double[]){0, 0, 0}, 3, 0, 0);
    nb_ck_close(rv, (double[]){1, 1, 1}, 3, 0, 0);
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3, 4), NB_F64);
    NB_CK_FAILS(nb_batch_norm(x, NULL, NULL, nb_ones(NB_SHAPE(4), NB_F64), NULL, true, 0.1, EPS), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_batch_norm(x, NULL, NULL, NULL, nb_ones(NB_SHAPE(1, 3), NB_F64), true, 0.1, EPS), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_batch_norm(x, nb_zeros(NB_SHAPE(2), NB_F64), rv, NULL, NULL, true, 0.1, EPS), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_batch_norm(x, NULL, NULL, nb_ones(NB_SHAPE(3), NB_F32), NULL, true, 0.1, EPS), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_batch_norm(x, rm, NULL, NULL, NULL, true, 0.1, EPS), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, EPS), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_batch_norm(nb_ones(NB_SHAPE(3), NB_F64), NULL, NULL, NULL, NULL, true, 0.1, EPS), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_batch_norm(nb_ones(NB_SHAPE(2, 3), NB_I64), NULL, NULL, NULL, NULL, true, 0.1, EPS),
                NB_ERR_DTYPE);
    NB_CK_FAILS(nb_batch_norm(NULL, rm, rv, NULL, NULL, true, 0.1, EPS), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- batch norm: gradients ----------------------------------------------------------- */

typedef struct {
    bool training;
    nb_tensor *rm, *rv;
    bool transpose; /* feed a transposed view of in[0] */
} bn_ctx;

static nb_tensor *f_bn(nb_tensor *const *in, int n, void *ctx) {
    const bn_ctx *c = ctx;
    nb_tensor *x = c->transpose ? nb_transpose(in[0], 2, 3) : in[0];
    return nb_batch_norm(x, c->rm, c->rv, n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, c->training, 0.1, EPS);
}

static void bn_gradcheck(int ndim, const int64_t *shape, bool training, int n_in, bool transpose, uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    int64_t C = shape[1];
    nb_generator g = nb_generator_new(seed + 100);
    bn_ctx ctx = {training, NULL, NULL, transpose};
    if (!training || seed % 2) {
        ctx.rm = nb_randn(NB_SHAPE(C), NB_F64, &g);
        ctx.rv = nb_add_scalar(nb_rand(NB_SHAPE(C), NB_F64, &g), 0.5);
    }
    nb_tensor *in[3] = {nb_test_randn_grad(ndim, shape, seed), nb_test_randn_grad(NB_SHAPE(C), seed + 1),
                        nb_test_randn_grad(NB_SHAPE(C), seed + 2)};
    nb_ck_gradcheck(f_bn, in, n_in, &ctx);
    nb_scope_end(s);
}

START_TEST(test_bn_gradcheck_training) {
    bn_gradcheck(NB_SHAPE(4, 3), true, 3, false, 1);
    bn_gradcheck(NB_SHAPE(2, 3), true, 3, false, 2);
    bn_gradcheck(NB_SHAPE(2, 3, 3, 5), true, 3, false, 3);
    bn_gradcheck(NB_SHAPE(3, 2, 5), true, 3, false, 4);
    bn_gradcheck(NB_SHAPE(1, 2, 3, 1), true, 3, false, 5);
    bn_gradcheck(NB_SHAPE(2, 3, 3, 5), true, 1, false, 6); /* no weight, bias */
    bn_gradcheck(NB_SHAPE(2, 2, 3, 4), true, 3, true, 7);  /* strided input */
}
END_TEST

START_TEST(test_bn_gradcheck_eval) {
    bn_gradcheck(NB_SHAPE(4, 3), false, 3, false, 11);
    bn_gradcheck(NB_SHAPE(2, 3, 3, 5), false, 3, false, 12);
    bn_gradcheck(NB_SHAPE(1, 3), false, 3, false, 13);
    bn_gradcheck(NB_SHAPE(2, 3, 4, 3), false, 1, true, 14);
}
END_TEST

/* The training gradient by its formula, and eval's backward uses the running
 * stats as they were at the forward, not after a later update. */
START_TEST(test_bn_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* sum(y) over a channel is M*b, so d/dx of sum(y) is 0, d/dw 0, d/db M */
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(5, 2, 3), 21);
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(2), 22), *b = nb_test_randn_grad(NB_SHAPE(2), 23);
    NB_CK_OK(nb_backward(nb_sum(nb_batch_norm(x, NULL, NULL, w, b, true, 0.1, EPS), NULL, 0, false)));
    double zeros[30] = {0};
    nb_ck_close(nb_tensor_grad(x), zeros, 30, 1e-12, 0);
    nb_ck_close(nb_tensor_grad(w), zeros, 2, 1e-12, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){15, 15}, 2, 0, 0);
    /* eval: gx = w / sqrt(rv + eps), gw = sum((x - rm) / sqrt(rv + eps)) */
    nb_tensor *x2 = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    NB_CK_OK(nb_set_requires_grad(x2, true));
    nb_tensor *w2 = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){2, 3});
    NB_CK_OK(nb_set_requires_grad(w2, true));
    nb_tensor *rm = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, -1});
    nb_tensor *rv = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 0.5});
    nb_tensor *y = nb_batch_norm(x2, rm, rv, w2, NULL, false, 0.1, EPS);
    /* a training step in between changes the buffers */
    NB_CK_NOTNULL(nb_batch_norm(nb_randn(NB_SHAPE(4, 2), NB_F64, NULL), rm, rv, NULL, NULL, true, 0.5, EPS));
    NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
    double i0 = 1 / sqrt(3 + EPS), i1 = 1 / sqrt(0.5 + EPS);
    nb_ck_close(nb_tensor_grad(x2), (double[]){2 * i0, 3 * i1, 2 * i0, 3 * i1}, 4, 1e-14, 1e-12);
    nb_ck_close(nb_tensor_grad(w2), (double[]){(0 + 2) * i0, (3 + 5) * i1}, 2, 1e-14, 1e-12);
    nb_scope_end(s);
}
END_TEST

/* float32 forward and backward against float64, and the same bits for 1 and
 * 2 threads, on planes ([N, C, H, W]) and on rows ([N, C], with a partial
 * block of channels). */
static void bn_float32_and_threads(int ndim, const int64_t *shape, uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(seed);
    int64_t C = shape[1];
    nb_tensor *x64 = nb_add_scalar(nb_randn(ndim, shape, NB_F64, &g), 3);
    nb_tensor *gy64 = nb_randn(ndim, shape, NB_F64, &g);
    nb_tensor *w64 = nb_randn(NB_SHAPE(C), NB_F64, &g), *b64 = nb_randn(NB_SHAPE(C), NB_F64, &g);
    nb_tensor *res[3][6]; /* f64, f32 1 thread, f32 2 threads: y, gx, gw, gb, running mean, var */
    for (int r = 0; r < 3; r++) {
        nb_dtype dt = r ? NB_F32 : NB_F64;
        nb_set_num_threads(r == 1 ? 1 : 2);
        nb_tensor *x = nb_to_dtype(x64, dt), *w = nb_to_dtype(w64, dt), *b = nb_to_dtype(b64, dt);
        nb_tensor *rm = nb_zeros(NB_SHAPE(C), dt), *rv = nb_ones(NB_SHAPE(C), dt);
        NB_CK_OK(nb_set_requires_grad(x, true));
        NB_CK_OK(nb_set_requires_grad(w, true));
        NB_CK_OK(nb_set_requires_grad(b, true));
        res[r][0] = nb_batch_norm(x, rm, rv, w, b, true, 0.1, EPS);
        NB_CK_OK(nb_backward_with(res[r][0], nb_to_dtype(gy64, dt)));
        res[r][1] = nb_tensor_grad(x), res[r][2] = nb_tensor_grad(w), res[r][3] = nb_tensor_grad(b), res[r][4] = rm, res[r][5] = rv;
    }
    nb_set_num_threads(0);
    double atol[6] = {1e-5, 1e-5, 1e-2, 1e-2, 1e-6, 1e-6}; /* gw, gb sum up to ~200k terms */
    for (int k = 0; k < 6; k++) {
        int64_t n = nb_numel(res[0][k]);
        double *want = nb_test_values_of(res[0][k]);
        nb_ck_close(res[1][k], want, n, atol[k], 1e-4);
        ck_same_bits(res[1][k], res[2][k]);
        free(want);
    }
    nb_scope_end(s);
}

START_TEST(test_bn_float32_and_threads) {
    bn_float32_and_threads(NB_SHAPE(16, 6, 45, 47), 31);
    bn_float32_and_threads(NB_SHAPE(600, 200), 32);
}
END_TEST

/* ---- dropout -------------------------------------------------------------------------- */

/* ---- interpolate ------------------------------------------------------------------------ */

/* ---- modules ------------------------------------------------------------------------------ */

START_TEST(test_batchnorm_module) {
    nb_scope *s = nb_scope_begin();
    nb_module *bn = nb_nn_batch_norm2d(3, 0, 0);
    NB_CK_NOTNULL(bn);
    ck_assert_str_eq(nb_module_kind(bn), "BatchNorm2d");
    nb_named_tensor p[4], b[4];
    ck_assert_int_eq(nb_module_parameters(bn, p, 4), 2);
    ck_assert_str_eq(p[0].name, "weight");
    ck_assert_str_eq(p[1].name, "bias");
    ck_assert_int_eq(nb_module_buffers(bn, b, 4), 3);
    ck_assert_str_eq(b[0].name, "running_mean");
    ck_assert_str_eq(b[1].name, "running_var");
    ck_assert_str_eq(b[2].name, "num_batches_tracked");
    nb_ck_close(p[0].tensor, (double[]){1, 1, 1}, 3, 0, 0);
    nb_ck_close(p[1].tensor, (double[]){0, 0, 0}, 3, 0, 0);
    nb_ck_close(b[0].tensor, (double[]){0, 0, 0}, 3, 0, 0);
    nb_ck_close(b[1].tensor, (double[]){1, 1, 1}, 3, 0, 0);
    ck_assert_int_eq(nb_dtype_of(b[2].tensor), NB_I64);
    ck_assert_int_eq(nb_dim(b[2].tensor), 0);
    ck_assert_double_eq(nb_item(b[2].tensor), 0);
    /* two training steps: running stats with momentum 0.1 and the unbiased variance */
    nb_generator g = nb_generator_new(12);
    int64_t N = 2, C = 3, S = 4 * 5;
    double rm[3] = {0, 0, 0}, rv[3] = {1, 1, 1};
    for (int step = 1; step <= 2; step++) {
        nb_tensor *x = nb_add_scalar(nb_randn(NB_SHAPE(N, C, 4, 5), NB_F32, &g), step);
        double *xv = nb_test_values_of(x), mean[3], var[3];
        for (int c = 0; c < C; c++) {
            ref_stats(xv, N, C, S, c, &mean[c], &var[c]);
            rm[c] = 0.9 * rm[c] + 0.1 * mean[c];
            rv[c] = 0.9 * rv[c] + 0.1 * var[c] * (double)(N * S) / (double)(N * S - 1);
        }
        nb_tensor *y = nb_forward(bn, x);
        NB_CK_NOTNULL(y);
        ck_assert(nb_requires_grad(y));
        nb_ck_close(b[0].tensor, rm, 3, 1e-6, 1e-6);
        nb_ck_close(b[1].tensor, rv, 3, 1e-6, 1e-6);
        ck_assert_double_eq(nb_item(b[2].tensor), step);
        free(xv);
    }
    /* eval: running stats, no update, no count */
    nb_module_train(bn, false);
    nb_tensor *x = nb_randn(NB_SHAPE(1, C, 2, 2), NB_F32, &g);
    double *xv = nb_test_values_of(x), want[12];
    ref_bn(xv, 1, C, 4, rm, rv, NULL, NULL, want);
    nb_ck_close(nb_forward(bn, x), want, 12, 1e-5, 1e-5);
    nb_ck_close(b[0].tensor, rm, 3, 1e-6, 1e-6);
    ck_assert_double_eq(nb_item(b[2].tensor), 2);
    free(xv);
    /* a failing forward (one value per channel) does not count */
    nb_module_train(bn, true);
    NB_CK_FAILS(nb_forward(bn, nb_ones(NB_SHAPE(1, 3, 1, 1), NB_F32)), NB_ERR_INVALID_ARG);
    ck_assert_double_eq(nb_item(b[2].tensor), 2);
    NB_CK_FAILS(nb_forward(bn, nb_ones(NB_SHAPE(4, 3, 5), NB_F32)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_forward(bn, nb_ones(NB_SHAPE(4, 2, 5, 5), NB_F32)), NB_ERR_SHAPE);
    /* gradients reach weight and bias */
    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_forward(bn, nb_randn(NB_SHAPE(4, 3, 2, 2), NB_F32, &g)),
                                       nb_randn(NB_SHAPE(4, 3, 2, 2), NB_F32, &g)),
                                NULL, 0, false)));
    NB_CK_NOTNULL(nb_tensor_grad(p[0].tensor));
    nb_ck_shape(nb_tensor_grad(p[1].tensor), 1, (int64_t[]){3});
    nb_module_free(bn);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_batchnorm1d_module) {
    nb_scope *s = nb_scope_begin();
    nb_module *bn = nb_nn_batch_norm1d(2, 1e-3, 0.5);
    NB_CK_NOTNULL(bn);
    ck_assert_str_eq(nb_module_kind(bn), "BatchNorm1d");
    /* [N, C] with eps 1e-3 and momentum 0.5: channel 0 = 1, 3 (mean 2, var 1, unbiased 2) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 2), NB_F32, (double[]){1, 5, 3, 5});
    double a = 1 / sqrt(1 + 1e-3), b = 0 / sqrt(0 + 1e-3);
    nb_ck_close(nb_forward(bn, x), (double[]){-a, b, a, b}, 4, 1e-6, 1e-6);
    nb_ck_close(nb_module_get(bn, "running_mean"), (double[]){0.5 * 2, 0.5 * 5}, 2, 1e-6, 0);
    nb_ck_close(nb_module_get(bn, "running_var"), (double[]){0.5 + 0.5 * 2, 0.5 + 0}, 2, 1e-6, 0);
    /* [N, C, L] works too; 4-D does not */
    nb_ck_shape(nb_forward(bn, nb_ones(NB_SHAPE(2, 2, 7), NB_F32)), 3, (int64_t[]){2, 2, 7});
    ck_assert_double_eq(nb_item(nb_module_get(bn, "num_batches_tracked")), 2);
    NB_CK_FAILS(nb_forward(bn, nb_ones(NB_SHAPE(2, 2, 3, 3), NB_F32)), NB_ERR_SHAPE);
    nb_module_free(bn);
    NB_CK_FAILS(nb_nn_batch_norm1d(0, 0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_batch_norm2d(4, -1, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_batch_norm2d(4, 0, 1.5), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_batch_norm(void) {
    Suite *s = suite_create("ops_batch_norm");
    TCase *bn = tcase_create("batch_norm");
    tcase_add_test(bn, test_bn_training_forward_and_running_stats);
    tcase_add_test(bn, test_bn_4d_forward);
    tcase_add_test(bn, test_bn_errors);
    tcase_add_test(bn, test_bn_gradcheck_training);
    tcase_add_test(bn, test_bn_gradcheck_eval);
    tcase_add_test(bn, test_bn_grad_by_hand);
    tcase_add_test(bn, test_bn_float32_and_threads);
    tcase_set_timeout(bn, 300);
    suite_add_tcase(s, bn);
    TCase *dr = tcase_create("dropout");
    tcase_set_timeout(dr, 300);
    suite_add_tcase(s, dr);
    TCase *in = tcase_create("interpolate");
    tcase_set_timeout(in, 300);
    suite_add_tcase(s, in);
    TCase *m = tcase_create("modules");
    tcase_add_test(m, test_batchnorm_module);
    tcase_add_test(m, test_batchnorm1d_module);
    tcase_set_timeout(m, 300);
    suite_add_tcase(s, m);
    return s;
}
