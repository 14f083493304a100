/* test_ops_upsample.c - interpolate (nearest and bilinear, align_corners
 * both ways): values by hand from PyTorch's source-index rules, a naive
 * reference, gradchecks up and down on odd sizes, errors, and the same bits
 * for 1 and 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nb_test.h"
#include "suites.h"

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

Suite *nb_suite_ops_upsample(void) {
    Suite *s = suite_create("ops_upsample");
    TCase *tc_interpolate = tcase_create("interpolate");
    tcase_add_test(tc_interpolate, test_interpolate_by_hand);
    tcase_add_test(tc_interpolate, test_interpolate_reference);
    tcase_add_test(tc_interpolate, test_interpolate_gradcheck);
    tcase_add_test(tc_interpolate, test_interpolate_errors_and_threads);
    tcase_set_timeout(tc_interpolate, 300);
    suite_add_tcase(s, tc_interpolate);
    return s;
}