/* test_ops_activation.c - the in-place activations (relu_ ... rrelu_):
 * the write, the rebased history (gradients equal the out-of-place op's,
 * through two in-place ops in a row; a node that saved the old value keeps
 * it; an op that used the tensor before keeps its old node), and the
 * errors (a leaf, a node that saved a tensor written without autograd). Values and gradients against PyTorch: tests/torch_diff;
 * float64 gradchecks: the op harness. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"

/* d sum(3 * f(f(2 x))) / dx for f relu_ applied in place (inplace true) or
 * relu out of place, then hardtanh_ / hardtanh. */
static nb_tensor *grad_through(nb_tensor *x0, bool inplace) {
    nb_tensor *x = nb_detach(x0);
    ck_assert_int_eq(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = nb_mul_scalar(x, 2);
    if (inplace) {
        ck_assert_msg(nb_relu_(y) == NB_OK, "%s", nb_last_error());
        ck_assert_int_eq(nb_hardtanh_(y, -1, 1.5), NB_OK);
    } else {
        y = nb_hardtanh(nb_relu(y), -1, 1.5);
    }
    ck_assert_int_eq(nb_backward(nb_sum(nb_mul_scalar(y, 3), NULL, 0, false)), NB_OK);
    return nb_tensor_grad(x);
}

START_TEST(test_inplace_rebases_history) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((double[]){-1, -0.25, 0.1, 0.5, 0.7, 2}, NB_SHAPE(6), NB_F64);
    nb_tensor *ga = grad_through(x, true), *gb = grad_through(x, false);
    double *want = nb_test_values_of(gb);
    nb_ck_close(ga, want, 6, 0, 0);
    nb_ck_close(ga, (double[]){0, 0, 6, 6, 6, 0}, 6, 0, 0); /* 2x in (0, 1.5): slope 2 * 3 */
    free(want);
    /* the value written in place */
    nb_tensor *y = nb_clone(x);
    ck_assert_int_eq(nb_leaky_relu_(y, 0.5), NB_OK);
    nb_ck_close(y, (double[]){-0.5, -0.125, 0.1, 0.5, 0.7, 2}, 6, 0, 0);
    ck_assert_int_eq(nb_threshold_(y, 0.6, -9), NB_OK);
    nb_ck_close(y, (double[]){-9, -9, -9, -9, 0.7, 2}, 6, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_inplace_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *leaf = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_set_requires_grad(leaf, true);
    ck_assert_int_eq(nb_relu_(leaf), NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "leaf"));
    /* under no_grad the leaf is written, as PyTorch's */
    NB_NO_GRAD { ck_assert_int_eq(nb_elu_(leaf, 1.0), NB_OK); }
    /* an op that took y as input before keeps y's old node: d/dleaf of sum(y_before + 1) + sum(relu(y)) */
    nb_tensor *lf = nb_from_data((double[]){-1, 2}, NB_SHAPE(2), NB_F64);
    nb_set_requires_grad(lf, true);
    nb_tensor *y = nb_mul_scalar(lf, 2);
    nb_tensor *s1 = nb_add_scalar(y, 1);
    ck_assert_int_eq(nb_relu_(y), NB_OK);
    ck_assert_int_eq(nb_backward(nb_add(nb_sum(s1, NULL, 0, false), nb_sum(y, NULL, 0, false))), NB_OK);
    nb_ck_close(nb_tensor_grad(lf), (double[]){2, 4}, 2, 0, 0);
    nb_ck_close(s1, (double[]){-1, 5}, 2, 0, 0);
    /* exp saved its output u: after relu_(u) exp's node still has the old values, and the gradient is
       exp(z) * 1[exp(z) > 0] = exp(z) through both */
    nb_tensor *z = nb_from_data((double[]){-1, 0.5}, NB_SHAPE(2), NB_F64);
    nb_set_requires_grad(z, true);
    nb_tensor *u = nb_exp(nb_mul_scalar(z, 1));
    ck_assert_msg(nb_relu_(u) == NB_OK, "%s", nb_last_error());
    ck_assert_int_eq(nb_backward(nb_sum(u, NULL, 0, false)), NB_OK);
    nb_ck_close(nb_tensor_grad(z), (double[]){exp(-1), exp(0.5)}, 2, 1e-15, 0);
    /* under autograd, a view of part of a tensor is refused (PyTorch would rebase the base too) */
    nb_tensor *yy = nb_mul_scalar(leaf, 2);
    ck_assert_int_eq(nb_relu_(nb_select(yy, 0, 1)), NB_ERR_UNSUPPORTED);
    /* without grad the write goes through views into the base */
    nb_tensor *plain = nb_from_data((float[]){-1, 2, -3, 4}, NB_SHAPE(2, 2), NB_F32);
    ck_assert_int_eq(nb_relu_(nb_select(plain, 0, 0)), NB_OK);
    nb_ck_close(plain, (double[]){0, 2, -3, 4}, 4, 0, 0);
    /* and bumps the version: a node that saved the tensor fails its backward */
    nb_tensor *w = nb_from_data((float[]){1, 2}, NB_SHAPE(2), NB_F32), *v = nb_from_data((float[]){-1, 3}, NB_SHAPE(2), NB_F32);
    nb_set_requires_grad(w, true);
    nb_tensor *p = nb_sum(nb_mul(w, v), NULL, 0, false); /* mul saves v */
    ck_assert_int_eq(nb_relu_(v), NB_OK);
    ck_assert_int_eq(nb_backward(p), NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "modified by an inplace operation"));
    nb_clear_error();
    ck_assert_int_eq(nb_relu_(NULL), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_relu_(nb_ones(NB_SHAPE(2), NB_I64)), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_activation(void) {
    Suite *s = suite_create("ops_activation");
    TCase *t = tcase_create("inplace");
    tcase_add_test(t, test_inplace_rebases_history);
    tcase_add_test(t, test_inplace_errors);
    suite_add_tcase(s, t);
    return s;
}
