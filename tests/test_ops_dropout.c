/* test_ops_dropout.c - dropout and the Dropout module: the Philox mask and
 * the inverted 1/(1-p) scaling, identity in eval and at p = 0, the extremes
 * p = 1, and the gradient (the same mask times the scale). */
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

/* On every device and float dtype: dropout gives the bits of its three
 * steps run by hand (bernoulli_ with probability 1-p, mul_scalar by
 * 1/(1-p), mul), whether the backend runs them as they are (the CPU) or as
 * its one-kernel dropout slot (CUDA); the generator advances alike, and the
 * gradient is the same mask times the incoming one. 517 x 33 elements: an
 * odd count (the last Philox block half used). */
START_TEST(test_dropout_fused_matches_steps) {
    const nb_dtype dts[4] = {NB_F32, NB_F64, NB_BF16, NB_F16};
    /* 0.37, and two p whose scale 1/(1-p) = 1 + 2^-8 + 2^-30 and 1 + 2^-11 +
     * 2^-30 rounds to float32 exactly halfway between two bfloat16 and two
     * float16 values: rounding it to 16 bits through float32 (as mul_scalar
     * does) and straight from double give different masks */
    const double ps[3] = {0.37, 0.0038910515077466012, 0.0004880438781931229};
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < nb_device_count((nb_device_type)t); i++)
            for (int d = 0; d < 12; d++) {
                nb_device dev = {(nb_device_type)t, i};
                const double p = ps[d / 4];
                nb_scope *s = nb_scope_begin();
                nb_generator gx = nb_generator_new(5), g1 = nb_generator_new(9), g2 = nb_generator_new(9);
                nb_tensor *x = nb_detach(nb_to_dtype(nb_randn_on(NB_SHAPE(517, 33), NB_F32, &gx, dev), dts[d % 4]));
                nb_tensor *w = nb_to_dtype(nb_randn_on(NB_SHAPE(517, 33), NB_F32, &gx, dev), dts[d % 4]);
                NB_CK_NOTNULL(x);
                NB_CK_NOTNULL(w);
                NB_CK_OK(nb_set_requires_grad(x, true));
                nb_device_counters c0 = nb_device_counters_get(dev);
                nb_tensor *y = nb_dropout(x, p, true, &g1);
                NB_CK_NOTNULL(y);
                /* CUDA runs the forward as its one dropout kernel */
                if (t == NB_DEVICE_CUDA)
                    ck_assert_int_eq(nb_device_counters_get(dev).kernel_launches - c0.kernel_launches, 1);
                NB_CK_OK(nb_backward(nb_sum(nb_mul(y, w), NULL, 0, false)));
                nb_tensor *mask = nb_empty_on(NB_SHAPE(517, 33), dts[d % 4], dev);
                NB_CK_NOTNULL(mask);
                NB_CK_OK(nb_bernoulli_(mask, 1 - p, &g2));
                nb_tensor *m = nb_mul_scalar(mask, 1 / (1 - p));
                ck_same_bits(y, nb_mul(nb_detach(x), m));
                ck_same_bits(nb_tensor_grad(x), nb_mul(w, m));
                /* both generators moved past the same blocks */
                ck_same_bits(nb_rand_on(NB_SHAPE(3), NB_F32, &g1, dev), nb_rand_on(NB_SHAPE(3), NB_F32, &g2, dev));
                nb_scope_end(s);
            }
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

Suite *nb_suite_ops_dropout(void) {
    Suite *s = suite_create("ops_dropout");
    TCase *tc_dropout = tcase_create("dropout");
    tcase_add_test(tc_dropout, test_dropout_mask_and_scaling);
    tcase_add_test(tc_dropout, test_dropout_identity_and_extremes);
    tcase_add_test(tc_dropout, test_dropout_gradient);
    tcase_add_test(tc_dropout, test_dropout_fused_matches_steps);
    tcase_add_test(tc_dropout, test_dropout_module);
    tcase_set_timeout(tc_dropout, 300);
    suite_add_tcase(s, tc_dropout);
    return s;
}