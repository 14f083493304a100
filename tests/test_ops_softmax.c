/* test_ops_softmax.c - softmax and log_softmax: a 1x3 softmax by hand,
 * numerical stability, gradients by hand, gradchecks along every dim. */
/* test_ops_loss.c - softmax, log_softmax, cross_entropy and mse_loss:
 * values computed by hand (a 1x3 softmax, a 2x3 cross entropy with every
 * reduction, ignore_index and the all-ignored NaN), numerical stability,
 * gradients by hand (softmax - onehot), gradchecks along every dim and
 * reduction, error paths, and float32 against float64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nb_test.h"
#include "suites.h"

/* softmax([1, 2, 3]) and the two rows of the cross-entropy example */
#define SM0 0.09003057317038046

#define SM1 0.24472847105479764

#define SM2 0.6652409557748218

#define LSE123 3.4076059644443806 /* log(e + e^2 + e^3) */

typedef struct {
    int dim;
    bool log;
} sm_ctx;

static nb_tensor *f_softmax(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const sm_ctx *c = ctx;
    return c->log ? nb_log_softmax(in[0], c->dim) : nb_softmax(in[0], c->dim);
}

START_TEST(test_softmax_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *y = nb_softmax(x, 1);
    nb_ck_shape(y, 2, (int64_t[]){1, 3});
    nb_ck_close(y, (double[]){SM0, SM1, SM2}, 3, 0, 1e-14);
    nb_ck_close(nb_log_softmax(x, -1), (double[]){1 - LSE123, 2 - LSE123, 3 - LSE123}, 3, 0, 1e-14);
    /* along dim 0 of a [1, 3] every element is alone: all ones, log 0 */
    nb_ck_close(nb_softmax(x, 0), (double[]){1, 1, 1}, 3, 0, 1e-15);
    nb_ck_close(nb_log_softmax(x, 0), (double[]){0, 0, 0}, 3, 1e-15, 0);
    /* shift invariance and stability with large logits */
    nb_tensor *big = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1000, 1001, 1002});
    nb_ck_close(nb_softmax(big, 0), (double[]){SM0, SM1, SM2}, 3, 0, 1e-12);
    nb_ck_close(nb_log_softmax(big, 0), (double[]){1 - LSE123, 2 - LSE123, 3 - LSE123}, 3, 0, 1e-12);
    nb_tensor *neg = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){-INFINITY, 0});
    nb_ck_close(nb_softmax(neg, 0), (double[]){0, 1}, 2, 0, 0);
    /* rows of a 3-D tensor sum to 1 along each dim, and match a host softmax */
    nb_generator g = nb_generator_new(3);
    nb_tensor *t = nb_randn(NB_SHAPE(2, 3, 4), NB_F64, &g);
    double tv[24];
    nb_test_values(t, tv, 24);
    const int64_t sizes[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
    for (int d = 0; d < 3; d++) {
        nb_tensor *sm = nb_softmax(t, d);
        nb_tensor *ls = nb_log_softmax(t, d - 3);
        nb_tensor *sums = nb_sum(sm, (int[]){d}, 1, false);
        double ones[12];
        for (int i = 0; i < 12; i++) ones[i] = 1;
        nb_ck_close(sums, ones, 24 / sizes[d], 0, 1e-14);
        double want[24], want_log[24];
        for (int i = 0; i < 24; i++) {
            int64_t pos = (i / strides[d]) % sizes[d], base = i - pos * strides[d];
            double m = -INFINITY, z = 0;
            for (int64_t k = 0; k < sizes[d]; k++) m = fmax(m, tv[base + k * strides[d]]);
            for (int64_t k = 0; k < sizes[d]; k++) z += exp(tv[base + k * strides[d]] - m);
            want[i] = exp(tv[i] - m) / z;
            want_log[i] = tv[i] - m - log(z);
        }
        nb_ck_close(sm, want, 24, 0, 1e-13);
        nb_ck_close(ls, want_log, 24, 1e-14, 1e-13);
    }
    /* a strided input */
    nb_ck_close(nb_softmax(nb_transpose(nb_reshape(x, NB_SHAPE(3, 1)), 0, 1), 1), (double[]){SM0, SM1, SM2}, 3, 0,
                1e-14);
    NB_CK_FAILS(nb_softmax(x, 2), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "softmax"));
    NB_CK_FAILS(nb_log_softmax(x, -3), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "log_softmax"));
    NB_CK_FAILS(nb_softmax(nb_zeros(NB_SHAPE(3), NB_I64), 0), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_softmax_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* d softmax_i / d x_j = s_i (delta_ij - s_j): with g = e_2, grad = s_2 (e_2 - s) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward_with(nb_softmax(x, 0), nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0, 0, 1})));
    nb_ck_close(nb_tensor_grad(x), (double[]){-SM2 * SM0, -SM2 * SM1, SM2 * (1 - SM2)}, 3, 1e-15, 1e-13);
    /* log_softmax with g = ones: grad = 1 - 3 s */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(nb_sum(nb_log_softmax(x, 0), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){1 - 3 * SM0, 1 - 3 * SM1, 1 - 3 * SM2}, 3, 1e-15, 1e-13);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_softmax_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 5);
    for (int lg = 0; lg < 2; lg++)
        for (int d = -1; d < 3; d++) {
            sm_ctx c = {d, lg};
            NB_CK_OK(nb_gradcheck(f_softmax, &x, 1, &c, NULL));
        }
    nb_tensor *v = nb_test_randn_grad(NB_SHAPE(5), 6);
    sm_ctx c0 = {0, false}, c1 = {-1, true};
    NB_CK_OK(nb_gradcheck(f_softmax, &v, 1, &c0, NULL));
    NB_CK_OK(nb_gradcheck(f_softmax, &v, 1, &c1, NULL));
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_softmax(void) {
    Suite *s = suite_create("ops_softmax");
    TCase *tc_softmax = tcase_create("softmax");
    tcase_add_test(tc_softmax, test_softmax_forward);
    tcase_add_test(tc_softmax, test_softmax_grad_by_hand);
    tcase_add_test(tc_softmax, test_softmax_gradcheck);
    tcase_set_timeout(tc_softmax, 300);
    suite_add_tcase(s, tc_softmax);
    return s;
}