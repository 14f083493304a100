/* test_ops_norm.c - batch_norm, dropout and interpolate, and the
 * BatchNorm1d/2d and Dropout modules: forwards against values computed by
 * hand from PyTorch's formulas (batch statistics with the biased variance,
 * running stats with momentum 0.1 and the unbiased variance, inverted
 * dropout scaling, the nearest and bilinear source-index rules), gradchecks
 * in float64 (training and eval batch norm, both interpolation modes with
 * align_corners both ways, up and down on odd sizes), the dropout gradient
 * checked directly, error paths, float32 against float64, and the same bits
 * for 1 and 2 threads. */
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

START_TEST(test_dropout_mask_and_scaling) {
    nb_scope *s = nb_scope_begin();
    double p = 0.3;
    nb_tensor *ones = nb_ones(NB_SHAPE(1000, 1000), NB_F32);
    nb_generator g1 = nb_generator_new(42), g2 = nb_generator_new(42);
    nb_tensor *a = nb_dropout(ones, p, true, &g1), *b = nb_dropout(ones, p, true, &g2);
    ck_same_bits(a, b); /* same seed, same mask */
    nb_tensor *c = nb_dropout(ones, p, true, &g1);
    double *av = nb_test_values_of(a), *cv = nb_test_values_of(c);
    int64_t zeros = 0, same = 0, n = 1000000;
    float kept = (float)(1 / (1 - p));
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(av[i] == 0 || av[i] == (double)kept, "element %lld = %g", (long long)i, av[i]);
        zeros += av[i] == 0;
        same += (av[i] == 0) == (cv[i] == 0);
    }
    /* the zero fraction is p within 10 standard deviations (sqrt(p(1-p)/n) = 4.6e-4) */
    ck_assert_msg(fabs((double)zeros / (double)n - p) < 5e-3, "zero fraction %g", (double)zeros / (double)n);
    /* the generator advanced: the next mask is another one (agreement p^2 + (1-p)^2 = 0.58) */
    ck_assert_msg(fabs((double)same / (double)n - 0.58) < 5e-3, "agreement %g", (double)same / (double)n);
    free(av), free(cv);
    /* kept values of a random input are x / (1 - p) */
    nb_tensor *x = nb_randn(NB_SHAPE(37, 41), NB_F64, &g1);
    nb_tensor *y = nb_dropout(x, 0.5, true, &g1);
    double *xv = nb_test_values_of(x), *yv = nb_test_values_of(y);
    int64_t kept_n = 0;
    for (int i = 0; i < 37 * 41; i++) {
        ck_assert(yv[i] == 0 || yv[i] == xv[i] * 2);
        kept_n += yv[i] != 0;
    }
    ck_assert(kept_n > 600 && kept_n < 917);
    free(xv), free(yv);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_dropout_identity_and_extremes) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(4, 5), 9);
    /* eval and p == 0 return x itself (a new reference) and draw nothing */
    ck_assert_ptr_eq(nb_dropout(x, 0.5, false, &g), x);
    ck_assert_ptr_eq(nb_dropout(x, 0.0, true, &g), x);
    ck_assert_uint_eq(g.offset, 0);
    /* p == 1: all zeros, gradient zero */
    nb_tensor *y = nb_dropout(x, 1.0, true, &g);
    double zeros[20] = {0};
    nb_ck_close(y, zeros, 20, 0, 0);
    NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), zeros, 20, 0, 0);
    NB_CK_FAILS(nb_dropout(x, -0.1, true, &g), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dropout(x, 1.5, true, &g), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dropout(x, NAN, false, &g), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dropout(nb_ones(NB_SHAPE(3), NB_I32), 0.5, true, &g), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_dropout(NULL, 0.5, true, &g), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* d dropout(x)/dx = mask / (1 - p), read off the output (x has no zeros). */
START_TEST(test_dropout_gradient) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(8);
    double p = 0.25;
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(50, 40), 10);
    nb_tensor *y = nb_dropout(x, p, true, &g);
    nb_tensor *v = nb_rand(NB_SHAPE(50, 40), NB_F64, &g);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(y, v), NULL, 0, false)));
    double *yv = nb_test_values_of(y), *vv = nb_test_values_of(v), *gv = nb_test_values_of(nb_tensor_grad(x));
    for (int i = 0; i < 2000; i++) {
        double want = yv[i] != 0 ? vv[i] / (1 - p) : 0;
        ck_assert_msg(fabs(gv[i] - want) <= 1e-15, "element %d: %g vs %g", i, gv[i], want);
    }
    free(yv), free(vv), free(gv);
    /* a strided input: the gradient lands on the right elements */
    nb_tensor *x2 = nb_test_randn_grad(NB_SHAPE(6, 7), 12);
    nb_tensor *y2 = nb_transpose(nb_dropout(nb_transpose(x2, 0, 1), 0.5, true, &g), 0, 1);
    NB_CK_OK(nb_backward(nb_sum(y2, NULL, 0, false)));
    double *y2v = nb_test_values_of(y2), *g2v = nb_test_values_of(nb_tensor_grad(x2));
    for (int i = 0; i < 42; i++) ck_assert(g2v[i] == (y2v[i] != 0 ? 2.0 : 0.0));
    free(y2v), free(g2v);
    nb_scope_end(s);
}
END_TEST

/* ---- interpolate ------------------------------------------------------------------------ */

/* PyTorch's source-index rules, written out independently of the kernel. */
static int64_t ref_nearest(int64_t d, int64_t in, int64_t out) {
    float scale = (float)in / (float)out;
    int64_t s = (int64_t)floorf((float)d * scale);
    return s < in - 1 ? s : in - 1;
}

static void ref_linear(int64_t d, int64_t in, int64_t out, bool align, int64_t *i0, int64_t *i1, double *l1) {
    double src;
    if (in == out) src = (double)d;
    else if (align) src = out > 1 ? (double)d * (double)(in - 1) / (double)(out - 1) : 0;
    else src = fmax(((double)d + 0.5) * (double)in / (double)out - 0.5, 0);
    *i0 = (int64_t)floor(src);
    if (*i0 > in - 1) *i0 = in - 1;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *l1 = fmin(fmax(src - (double)*i0, 0), 1);
}

static void ref_interp(const double *x, int64_t P, int64_t H, int64_t W, int64_t Ho, int64_t Wo, bool bilinear,
                       bool align, double *y) {
    for (int64_t p = 0; p < P; p++)
        for (int64_t i = 0; i < Ho; i++)
            for (int64_t j = 0; j < Wo; j++) {
                const double *xp = x + p * H * W;
                double *o = y + (p * Ho + i) * Wo + j;
                if (!bilinear) {
                    *o = xp[ref_nearest(i, H, Ho) * W + ref_nearest(j, W, Wo)];
                    continue;
                }
                int64_t h0, h1, w0, w1;
                double lh, lw;
                ref_linear(i, H, Ho, align, &h0, &h1, &lh);
                ref_linear(j, W, Wo, align, &w0, &w1, &lw);
                *o = (1 - lh) * ((1 - lw) * xp[h0 * W + w0] + lw * xp[h0 * W + w1]) +
                     lh * ((1 - lw) * xp[h1 * W + w0] + lw * xp[h1 * W + w1]);
            }
}

START_TEST(test_interpolate_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* x(h, w) = 1 + 2h + w is linear, so bilinear gives 1 + 2*src_h + src_w exactly */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 2, 2), NB_F64, (double[]){1, 2, 3, 4});
    double want[16];
    /* align_corners true: src = dst * (2-1)/(4-1) = 0, 1/3, 2/3, 1 */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = 1 + 2 * (i / 3.0) + j / 3.0;
    nb_ck_close(nb_interpolate(x, 4, 4, NB_INTERPOLATE_BILINEAR, true), want, 16, 1e-15, 0);
    /* align_corners false: src = (dst + 0.5) * 2/4 - 0.5 = -0.25 -> 0, 0.25, 0.75, 1.25 -> edge 1 */
    double pos[4] = {0, 0.25, 0.75, 1};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = 1 + 2 * pos[i] + pos[j];
    nb_ck_close(nb_interpolate(x, 4, 4, NB_INTERPOLATE_BILINEAR, false), want, 16, 1e-15, 0);
    /* nearest 2x2 -> 4x4 repeats each pixel twice along both axes */
    nb_tensor *n4 = nb_interpolate(x, 4, 4, NB_INTERPOLATE_NEAREST, false);
    nb_ck_close(n4, (double[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16, 0, 0);
    /* nearest 1x3 -> 1x5: scale 0.6, floor(0, 0.6, 1.2, 1.8, 2.4) = 0, 0, 1, 1, 2;
     * 1x5 -> 1x3: scale 5/3, floor(0, 1.67, 3.33) = 0, 1, 3 */
    nb_tensor *r3 = nb_test_tensor(NB_SHAPE(1, 1, 1, 3), NB_F64, (double[]){10, 20, 30});
    nb_ck_close(nb_interpolate(r3, 1, 5, NB_INTERPOLATE_NEAREST, false), (double[]){10, 10, 20, 20, 30}, 5, 0, 0);
    nb_tensor *r5 = nb_test_tensor(NB_SHAPE(1, 1, 1, 5), NB_F64, (double[]){1, 2, 3, 4, 5});
    nb_ck_close(nb_interpolate(r5, 1, 3, NB_INTERPOLATE_NEAREST, false), (double[]){1, 2, 4}, 3, 0, 0);
    /* bilinear 1x5 -> 1x2 without align: src = (d + 0.5) * 2.5 - 0.5 = 0.75, 3.25 */
    nb_ck_close(nb_interpolate(r5, 1, 2, NB_INTERPOLATE_BILINEAR, false), (double[]){1.75, 4.25}, 2, 1e-15, 0);
    /* align_corners with an output of 1 takes the first pixel */
    nb_ck_close(nb_interpolate(r5, 1, 1, NB_INTERPOLATE_BILINEAR, true), (double[]){1}, 1, 0, 0);
    /* backward of nearest 2x2 -> 4x4 with ones: each input pixel gets 4 */
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_sum(nb_interpolate(x, 4, 4, NB_INTERPOLATE_NEAREST, false), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){4, 4, 4, 4}, 4, 0, 0);
    /* bilinear align_corners true 2x2 -> 3x3: weights per axis (1, .5, 0) and (0, .5, 1): each gets 1.5^2 */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(nb_sum(nb_interpolate(x, 3, 3, NB_INTERPOLATE_BILINEAR, true), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){2.25, 2.25, 2.25, 2.25}, 4, 1e-15, 0);
    nb_scope_end(s);
}
END_TEST

/* Random shapes against the host reference, both modes, float64 and float32. */
START_TEST(test_interpolate_reference) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(77);
    int64_t sizes[][4] = {{3, 5, 7, 9}, {5, 7, 3, 4}, {4, 4, 4, 4}, {2, 3, 4, 6}, {7, 2, 1, 5}, {1, 1, 3, 2}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t H = sizes[k][0], W = sizes[k][1], Ho = sizes[k][2], Wo = sizes[k][3], P = 6;
        nb_tensor *x = nb_randn(NB_SHAPE(2, 3, H, W), NB_F64, &g);
        double *xv = nb_test_values_of(x), *want = malloc(sizeof(double) * (size_t)(P * Ho * Wo));
        for (int mode = 0; mode < 3; mode++) {
            bool bil = mode > 0, align = mode == 2;
            ref_interp(xv, P, H, W, Ho, Wo, bil, align, want);
            nb_interpolate_mode m = bil ? NB_INTERPOLATE_BILINEAR : NB_INTERPOLATE_NEAREST;
            nb_tensor *y = nb_interpolate(x, Ho, Wo, m, align);
            nb_ck_shape(y, 4, (int64_t[]){2, 3, Ho, Wo});
            nb_ck_close(y, want, P * Ho * Wo, 1e-14, 1e-13);
            nb_ck_close(nb_interpolate(nb_to_dtype(x, NB_F32), Ho, Wo, m, align), want, P * Ho * Wo, 1e-5, 1e-5);
        }
        free(xv), free(want);
    }
    nb_scope_end(s);
}
END_TEST

typedef struct {
    int64_t oh, ow;
    nb_interpolate_mode mode;
    bool align;
} interp_ctx;

static nb_tensor *f_interp(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const interp_ctx *c = ctx;
    return nb_interpolate(in[0], c->oh, c->ow, c->mode, c->align);
}

START_TEST(test_interpolate_gradcheck) {
    nb_scope *s = nb_scope_begin();
    int64_t cases[][4] = {{3, 5, 7, 9}, {5, 7, 3, 4}, {3, 3, 5, 2}, {4, 5, 1, 3}, {2, 2, 5, 5}};
    uint64_t seed = 50;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int mode = 0; mode < 3; mode++) {
            interp_ctx c = {cases[k][2], cases[k][3], mode ? NB_INTERPOLATE_BILINEAR : NB_INTERPOLATE_NEAREST,
                            mode == 2};
            nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 2, cases[k][0], cases[k][1]), seed++);
            nb_ck_gradcheck(f_interp, &x, 1, &c);
        }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_interpolate_errors_and_threads) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(1, 2, 3, 3), NB_F32);
    NB_CK_FAILS(nb_interpolate(nb_ones(NB_SHAPE(2, 3, 3), NB_F32), 4, 4, NB_INTERPOLATE_NEAREST, false),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_interpolate(x, 0, 4, NB_INTERPOLATE_BILINEAR, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_interpolate(x, 4, 4, NB_INTERPOLATE_NEAREST, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_interpolate(x, 4, 4, (nb_interpolate_mode)7, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_interpolate(nb_ones(NB_SHAPE(1, 1, 2, 2), NB_I64), 4, 4, NB_INTERPOLATE_NEAREST, false),
                NB_ERR_DTYPE);
    /* the backward scatter gives the same bits for 1 and 2 threads */
    nb_generator g = nb_generator_new(4);
    nb_tensor *gy = nb_randn(NB_SHAPE(4, 4, 61, 59), NB_F32, &g);
    nb_tensor *xin = nb_randn(NB_SHAPE(4, 4, 30, 31), NB_F32, &g);
    for (int mode = 0; mode < 3; mode++) {
        nb_tensor *r[2];
        for (int t = 0; t < 2; t++) {
            nb_set_num_threads(t + 1);
            nb_tensor *xi = nb_detach(xin);
            NB_CK_OK(nb_set_requires_grad(xi, true));
            nb_tensor *y = nb_interpolate(xi, 61, 59, mode ? NB_INTERPOLATE_BILINEAR : NB_INTERPOLATE_NEAREST,
                                          mode == 2);
            NB_CK_OK(nb_backward_with(y, gy));
            r[t] = nb_tensor_grad(xi); /* owned by xi, which the scope keeps */
        }
        ck_same_bits(r[0], r[1]);
    }
    nb_set_num_threads(0);
    nb_scope_end(s);
}
END_TEST

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

START_TEST(test_dropout_module) {
    nb_scope *s = nb_scope_begin();
    nb_module *d = nb_nn_dropout(0.5);
    NB_CK_NOTNULL(d);
    ck_assert_str_eq(nb_module_kind(d), "Dropout");
    ck_assert_int_eq(nb_module_parameters(d, NULL, 0), 0);
    nb_tensor *x = nb_ones(NB_SHAPE(100, 100), NB_F32);
    /* the default generator: the same seed gives the same mask */
    nb_manual_seed(3);
    nb_tensor *a = nb_forward(d, x);
    nb_manual_seed(3);
    ck_same_bits(a, nb_forward(d, x));
    double *av = nb_test_values_of(a);
    int zeros = 0;
    for (int i = 0; i < 10000; i++) {
        ck_assert(av[i] == 0 || av[i] == 2);
        zeros += av[i] == 0;
    }
    ck_assert_msg(zeros > 4700 && zeros < 5300, "zeros %d", zeros);
    free(av);
    nb_module_train(d, false);
    ck_assert_ptr_eq(nb_forward(d, x), x);
    nb_module_free(d);
    NB_CK_FAILS(nb_nn_dropout(1.01), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_dropout(-0.5), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_norm(void) {
    Suite *s = suite_create("ops_norm");
    TCase *bn = tcase_create("batch_norm");
    tcase_add_test(bn, test_bn_training_forward_and_running_stats);
    tcase_add_test(bn, test_bn_4d_forward);
    tcase_add_test(bn, test_bn_errors);
    tcase_add_test(bn, test_bn_gradcheck_training);
    tcase_add_test(bn, test_bn_gradcheck_eval);
    tcase_add_test(bn, test_bn_grad_by_hand);
    tcase_add_test(bn, test_bn_float32_and_threads);
    tcase_set_timeout(bn, 60);
    suite_add_tcase(s, bn);
    TCase *dr = tcase_create("dropout");
    tcase_add_test(dr, test_dropout_mask_and_scaling);
    tcase_add_test(dr, test_dropout_identity_and_extremes);
    tcase_add_test(dr, test_dropout_gradient);
    tcase_set_timeout(dr, 30);
    suite_add_tcase(s, dr);
    TCase *in = tcase_create("interpolate");
    tcase_add_test(in, test_interpolate_by_hand);
    tcase_add_test(in, test_interpolate_reference);
    tcase_add_test(in, test_interpolate_gradcheck);
    tcase_add_test(in, test_interpolate_errors_and_threads);
    tcase_set_timeout(in, 60);
    suite_add_tcase(s, in);
    TCase *m = tcase_create("modules");
    tcase_add_test(m, test_batchnorm_module);
    tcase_add_test(m, test_batchnorm1d_module);
    tcase_add_test(m, test_dropout_module);
    tcase_set_timeout(m, 30);
    suite_add_tcase(s, m);
    return s;
}
