/* test_ops_group_norm.c - group_norm, instance_norm, local_response_norm
 * and normalize: values by hand, the running statistics instance_norm
 * keeps, errors; the GroupNorm, InstanceNorm1d/2d/3d, LocalResponseNorm and
 * BatchNorm3d modules: parameter and buffer names (PyTorch's), train and
 * eval, unbatched input. Gradients: the op harness and tests/torch_diff.
 */
#include <math.h>
#include <string.h>

#include "nb_test.h"

START_TEST(test_group_norm_values) {
    nb_scope *s = nb_scope_begin();
    /* one sample, 4 channels in 2 groups of 2 channels x 1: group {1, 3} and {2, 6} */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 4, 1), NB_F64, (double[]){1, 3, 2, 6});
    double e = 1e-5, r1 = 1 / sqrt(1 + e), r2 = 1 / sqrt(4 + e);
    nb_ck_close(nb_group_norm(x, 2, NULL, NULL, 0), (double[]){-r1, r1, -2 * r2, 2 * r2}, 4, 1e-12, 0);
    nb_tensor *w = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0, 1, 0, 1});
    nb_ck_close(nb_group_norm(x, 2, w, b, 0), (double[]){-r1, 2 * r1 + 1, -6 * r2, 8 * r2 + 1}, 4, 1e-12, 0);
    /* groups of one element: 0, then the bias */
    nb_ck_close(nb_group_norm(nb_reshape(x, NB_SHAPE(1, 4)), 4, w, b, 0), (double[]){0, 1, 0, 1}, 4, 0, 0);
    NB_CK_FAILS(nb_group_norm(x, 3, NULL, NULL, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_group_norm(x, 2, nb_reshape(w, NB_SHAPE(2, 2)), NULL, 0), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_group_norm(nb_reshape(x, NB_SHAPE(4)), 2, NULL, NULL, 0), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_instance_norm_running_stats) {
    nb_scope *s = nb_scope_begin();
    /* 2 samples, 1 channel, 2 elements: (0, 2) and (4, 8); means 1 and 6, unbiased variances 2 and 8 */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 1, 2), NB_F64, (double[]){0, 2, 4, 8});
    nb_tensor *rm = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){0});
    nb_tensor *rv = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){1});
    double e = 1e-5;
    nb_ck_close(nb_instance_norm(x, rm, rv, NULL, NULL, true, 0.5, 0),
                (double[]){-1 / sqrt(1 + e), 1 / sqrt(1 + e), -2 / sqrt(4 + e), 2 / sqrt(4 + e)}, 4, 1e-12, 0);
    /* (1 - m) r + m * mean over the batch of each instance's statistic */
    nb_ck_close(rm, (double[]){0.5 * 3.5}, 1, 1e-15, 0);
    nb_ck_close(rv, (double[]){0.5 + 0.5 * 5}, 1, 1e-15, 0);
    /* without input statistics: the running ones */
    nb_ck_close(nb_instance_norm(x, rm, rv, NULL, NULL, false, 0, 0),
                (double[]){-1.75 / sqrt(3 + e), 0.25 / sqrt(3 + e), 2.25 / sqrt(3 + e), 6.25 / sqrt(3 + e)}, 4, 1e-12, 0);
    NB_CK_FAILS(nb_instance_norm(x, NULL, NULL, NULL, NULL, false, 0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_instance_norm(nb_reshape(x, NB_SHAPE(2, 2, 1)), NULL, NULL, NULL, NULL, true, 0, 0),
                NB_ERR_INVALID_ARG); /* one spatial element */
    NB_CK_FAILS(nb_instance_norm(x, rm, NULL, NULL, NULL, true, 0, 0), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_lrn_and_normalize) {
    nb_scope *s = nb_scope_begin();
    /* 3 channels, size 2: window of channel c is {c - 1, c} (size / 2 = 1 before, 0 after) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 3, 1), NB_F64, (double[]){1, 2, 3});
    double a = 0.5, be = 0.75, k = 2;
    double want[3] = {1 / pow(k + a * (0 + 1) / 2, be), 2 / pow(k + a * (1 + 4) / 2, be), 3 / pow(k + a * (4 + 9) / 2, be)};
    nb_ck_close(nb_local_response_norm(x, 2, a, be, k), want, 3, 1e-14, 0);
    NB_CK_FAILS(nb_local_response_norm(x, 0, 0, 0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_local_response_norm(nb_reshape(x, NB_SHAPE(1, 3)), 2, 0, 0, 0), NB_ERR_SHAPE);
    nb_tensor *v = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){3, 4, 0, 0});
    nb_ck_close(nb_normalize(v, 0, 1, 0), (double[]){0.6, 0.8, 0, 0}, 4, 1e-15, 0);
    nb_ck_close(nb_normalize(v, 1, 1, 0), (double[]){3.0 / 7, 4.0 / 7, 0, 0}, 4, 1e-15, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_norm_modules) {
    nb_scope *s = nb_scope_begin();
    nb_module *gn = nb_nn_group_norm(2, 4, 0);
    NB_CK_NOTNULL(gn);
    nb_named_tensor p[8];
    ck_assert_int_eq(nb_module_parameters(gn, p, 8), 2);
    ck_assert_str_eq(p[0].name, "weight");
    ck_assert_str_eq(p[1].name, "bias");
    nb_tensor *x = nb_randn(NB_SHAPE(3, 4, 5), NB_F32, NULL);
    nb_tensor *y = nb_forward(gn, x);
    NB_CK_NOTNULL(y);
    nb_ck_shape(y, NB_SHAPE(3, 4, 5));
    ck_assert_ptr_null(nb_nn_group_norm(3, 4, 0));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    nb_module_free(gn);

    nb_module *in = nb_nn_instance_norm1d(4, 0, 0, true, true);
    NB_CK_NOTNULL(in);
    const char *names[] = {"running_mean", "running_var", "num_batches_tracked"};
    ck_assert_int_eq(nb_module_buffers(in, p, 8), 3);
    for (int i = 0; i < 3; i++) ck_assert_str_eq(p[i].name, names[i]);
    NB_CK_NOTNULL(nb_forward(in, x));
    ck_assert_double_eq(nb_item(nb_module_get(in, "num_batches_tracked")), 0); /* PyTorch's InstanceNorm never counts */
    ck_assert(nb_item(nb_sum(nb_module_get(in, "running_mean"), NULL, 0, false)) != 0);
    /* unbatched [C, L] gives [C, L]; eval uses the running statistics (no update) */
    nb_module_train(in, false);
    nb_tensor *u = nb_forward(in, nb_randn(NB_SHAPE(4, 5), NB_F32, NULL));
    NB_CK_NOTNULL(u);
    nb_ck_shape(u, NB_SHAPE(4, 5));
    NB_CK_FAILS(nb_forward(in, nb_randn(NB_SHAPE(2, 4, 5, 1), NB_F32, NULL)), NB_ERR_SHAPE);
    nb_module_free(in);
    /* momentum NB_ZERO (kept as given by the module): the running statistics never move */
    nb_module *frozen = nb_nn_instance_norm1d(4, 0, NB_ZERO, false, true);
    NB_CK_NOTNULL(nb_forward(frozen, x));
    ck_assert_double_eq(nb_item(nb_sum(nb_module_get(frozen, "running_mean"), NULL, 0, false)), 0);
    nb_module_free(frozen);
    /* without tracking: no buffers, and eval normalizes each instance by itself */
    nb_module *in2 = nb_nn_instance_norm2d(4, 0, 0, false, false);
    ck_assert_int_eq(nb_module_buffers(in2, p, 8), 0);
    ck_assert_int_eq(nb_module_parameters(in2, p, 8), 0);
    nb_module_train(in2, false);
    nb_tensor *z = nb_forward(in2, nb_randn(NB_SHAPE(2, 4, 3, 3), NB_F32, NULL));
    NB_CK_NOTNULL(z);
    ck_assert(fabs(nb_item(nb_mean(z, NULL, 0, false))) < 1e-5);
    nb_module_free(in2);
    nb_module *in3 = nb_nn_instance_norm3d(2, 0, 0, false, false);
    NB_CK_NOTNULL(nb_forward(in3, nb_randn(NB_SHAPE(2, 2, 2, 2), NB_F32, NULL))); /* unbatched [C, D, H, W] */
    nb_module_free(in3);
    nb_module *bn = nb_nn_batch_norm3d(2, 0, 0);
    NB_CK_NOTNULL(nb_forward(bn, nb_randn(NB_SHAPE(2, 2, 2, 2, 2), NB_F32, NULL)));
    NB_CK_FAILS(nb_forward(bn, nb_randn(NB_SHAPE(2, 2, 2, 2), NB_F32, NULL)), NB_ERR_SHAPE);
    nb_module_free(bn);
    nb_module *lrn = nb_nn_local_response_norm(2, 0, 0, 0);
    NB_CK_NOTNULL(nb_forward(lrn, x));
    nb_module_free(lrn);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_group_norm(void) {
    Suite *s = suite_create("ops_group_norm");
    TCase *t = tcase_create("values");
    tcase_add_test(t, test_group_norm_values);
    tcase_add_test(t, test_instance_norm_running_stats);
    tcase_add_test(t, test_lrn_and_normalize);
    tcase_add_test(t, test_norm_modules);
    suite_add_tcase(s, t);
    return s;
}
