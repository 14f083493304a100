/* test_flat_params.c - nb_module_flatten_parameters: values, names and
 * identities kept; the flat buffers hold every parameter and gradient;
 * zero_grad zeroes in place; training with flat buffers gives the same bits
 * as without; errors. */
#include <math.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_module *mlp(void) {
    return nb_nn_sequential(nb_nn_linear(20, 33), nb_nn_relu(), nb_nn_linear(33, 5));
}

static double total(nb_tensor *t) { return nb_item(nb_sum(nb_to_dtype(t, NB_F64), NULL, 0, false)); }

START_TEST(test_flatten_keeps_values_and_names) {
    nb_manual_seed(1);
    nb_module *m = mlp();
    nb_named_tensor before[4], after[4];
    ck_assert_int_eq(nb_module_parameters(m, before, 4), 4);
    nb_scope *s = nb_scope_begin();
    double sums[4], all = 0;
    for (int i = 0; i < 4; i++) all += sums[i] = total(before[i].tensor);
    ck_assert_int_eq(nb_module_flat_buffers(m, NULL, NULL, 0), 0);
    NB_CK_OK(nb_module_flatten_parameters(m));
    NB_CK_OK(nb_module_flatten_parameters(m)); /* again: nothing */
    ck_assert_int_eq(nb_module_parameters(m, after, 4), 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(after[i].name, before[i].name);
        ck_assert_ptr_eq(after[i].tensor, before[i].tensor); /* the same tensors */
        ck_assert(total(after[i].tensor) == sums[i]);
        ck_assert(nb_is_contiguous(after[i].tensor));
        nb_tensor *g = nb_tensor_grad(after[i].tensor);
        ck_assert_ptr_nonnull(g); /* a view of the gradient buffer, zeros */
        ck_assert(total(g) == 0);
    }
    nb_tensor *flat = NULL, *gflat = NULL;
    ck_assert_int_eq(nb_module_flat_buffers(m, &flat, &gflat, 1), 1);
    ck_assert(fabs(total(flat) - all) <= 1e-9 * fabs(all) + 1e-12); /* padding is zero */
    /* writing through the flat buffer is writing the parameters */
    NB_CK_OK(nb_fill_(flat, 2));
    ck_assert(total(after[3].tensor) == 2 * 5);
    nb_scope_end(s);
    nb_module_free(m);
}
END_TEST

/* 20 Adam steps with and without flat buffers: the same bits. */
START_TEST(test_flat_training_bitwise) {
    float w[2][33 * 20];
    for (int flat = 0; flat < 2; flat++) {
        nb_manual_seed(7);
        nb_module *m = mlp();
        if (flat) NB_CK_OK(nb_module_flatten_parameters(m));
        nb_optimizer *opt = nb_adam(m, (nb_adam_options){.lr = 1e-2});
        nb_generator g = nb_generator_new(3);
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_randn(NB_SHAPE(16, 20), NB_F32, &g);
        nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(16), NB_F64, &g), 4.99), NB_I64);
        for (int step = 0; step < 20; step++) {
            nb_scope *st = nb_scope_begin();
            if (flat) nb_module_zero_grad(m);
            else nb_optimizer_zero_grad(opt);
            NB_CK_OK(nb_backward(nb_cross_entropy(nb_forward(m, x), y)));
            NB_CK_OK(nb_optimizer_step(opt));
            nb_scope_end(st);
        }
        nb_named_tensor p[4];
        nb_module_parameters(m, p, 4);
        NB_CK_OK(nb_to_host(p[0].tensor, w[flat], sizeof w[flat]));
        nb_scope_end(s);
        nb_optimizer_free(opt);
        nb_module_free(m);
    }
    ck_assert(!memcmp(w[0], w[1], sizeof w[0]));
}
END_TEST

START_TEST(test_flat_errors) {
    NB_CK_FAILS(nb_module_flatten_parameters(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_module_flat_buffers(NULL, NULL, NULL, 0), -1);
    nb_module *m = mlp();
    NB_CK_FAILS(nb_module_flatten_parameters(nb_module_child(m, "0")) == NB_OK, NB_ERR_INVALID_ARG);
    nb_module_free(m);
}
END_TEST

Suite *nb_suite_flat_params(void) {
    Suite *s = suite_create("flat_params");
    TCase *c = tcase_create("flat_params");
    tcase_add_test(c, test_flatten_keeps_values_and_names);
    tcase_add_test(c, test_flat_training_bitwise);
    tcase_add_test(c, test_flat_errors);
    suite_add_tcase(s, c);
    return s;
}
