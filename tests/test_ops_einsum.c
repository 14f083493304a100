/* test_ops_einsum.c - einsum, tensordot, outer, kron, trace and cross:
 * values by hand, einsum against the ops it stands for (matmul, diagonal,
 * sum, transpose), the implicit output's label order, and the equation
 * errors. Against PyTorch: tests/torch_diff; float64 gradchecks: the op
 * harness. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"

/* got equal to want (same shape, values within tol). */
static void ck_same(nb_tensor *got, nb_tensor *want, double tol) {
    NB_CK_NOTNULL(got);
    NB_CK_NOTNULL(want);
    nb_ck_shape(got, nb_dim(want), nb_shape(want));
    nb_ck_close_to(got, want, tol);
}

START_TEST(test_einsum_forms) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(1);
    nb_tensor *a = nb_randn(NB_SHAPE(3, 4), NB_F64, NULL), *b = nb_randn(NB_SHAPE(4, 5), NB_F64, NULL);
    nb_tensor *sq = nb_randn(NB_SHAPE(4, 4), NB_F64, NULL);
    ck_same(nb_einsum("ij,jk->ik", (nb_tensor *[]){a, b}, 2), nb_matmul(a, b), 1e-13);
    ck_same(nb_einsum("ij,jk", (nb_tensor *[]){a, b}, 2), nb_matmul(a, b), 1e-13); /* implicit: ik */
    ck_same(nb_einsum("ij->ji", &a, 1), nb_transpose(a, 0, 1), 0);
    ck_same(nb_einsum("ji", &a, 1), nb_transpose(a, 0, 1), 0); /* implicit output: i before j */
    ck_same(nb_einsum("ii->i", &sq, 1), nb_diagonal(sq, 0, 0, 1), 0);
    ck_same(nb_einsum("ii", &sq, 1), nb_trace(sq), 1e-14);
    ck_same(nb_einsum("ij->", &a, 1), nb_sum(a, NULL, 0, false), 1e-13);
    ck_same(nb_einsum("i j -> j", &a, 1), nb_sum(a, (int[]){0}, 1, false), 1e-13);
    /* three operands contracted in the greedy order give the chained product */
    nb_tensor *c = nb_randn(NB_SHAPE(5, 2), NB_F64, NULL);
    ck_same(nb_einsum("ij,jk,kl->il", (nb_tensor *[]){a, b, c}, 3), nb_matmul(nb_matmul(a, b), c), 1e-12);
    /* ellipsis broadcasting batch dims */
    nb_tensor *ba = nb_randn(NB_SHAPE(2, 3, 4), NB_F64, NULL);
    ck_same(nb_einsum("...ij,...jk->...ik", (nb_tensor *[]){ba, b}, 2), nb_matmul(ba, b), 1e-13);
    /* by hand: outer, kron, trace, cross */
    nb_tensor *u = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *v = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){4, 5, 6});
    nb_ck_close(nb_outer(nb_narrow(u, 0, 0, 2), nb_narrow(v, 0, 0, 2)), (double[]){4, 5, 8, 10}, 4, 0, 0);
    nb_ck_close(nb_kron(nb_narrow(u, 0, 0, 2), nb_narrow(v, 0, 0, 2)), (double[]){4, 5, 8, 10}, 4, 0, 0);
    nb_ck_close(nb_cross(u, v, 0), (double[]){2 * 6 - 3 * 5, 3 * 4 - 1 * 6, 1 * 5 - 2 * 4}, 3, 0, 0);
    nb_tensor *m = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_ck_close(nb_kron(m, m), (double[]){1, 2, 2, 4, 3, 4, 6, 8, 3, 6, 4, 8, 9, 12, 12, 16}, 16, 0, 0);
    ck_assert_double_eq(nb_item(nb_trace(m)), 5);
    nb_ck_shape(nb_tensordot(ba, b, 1, NULL, NULL), NB_SHAPE(2, 3, 5));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_einsum_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(3, 4), NB_F32), *b = nb_ones(NB_SHAPE(5, 2), NB_F32);
    const char *bad[] = {"ij,jk->ik", "ijk", "ij->k", "ij->ii", "i$", "i.j", "ij,jk,kl", "ij->i-"};
    nb_status want[] = {NB_ERR_SHAPE, NB_ERR_INVALID_ARG, NB_ERR_INVALID_ARG, NB_ERR_INVALID_ARG,
                        NB_ERR_INVALID_ARG, NB_ERR_INVALID_ARG, NB_ERR_INVALID_ARG, NB_ERR_INVALID_ARG};
    for (int i = 0; i < 8; i++) {
        nb_tensor *ops[2] = {a, b};
        int n = strchr(bad[i], ',') ? 2 : 1;
        NB_CK_FAILS(nb_einsum(bad[i], ops, n), want[i]);
        ck_assert_msg(strstr(nb_last_error(), "einsum"), "%s: %s", bad[i], nb_last_error());
    }
    NB_CK_FAILS(nb_einsum("ij", (nb_tensor *[]){a}, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_tensordot(a, b, 1, NULL, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_cross(a, a, -1), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_trace(nb_ones(NB_SHAPE(3), NB_F32)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_einsum(void) {
    Suite *s = suite_create("ops_einsum");
    TCase *t = tcase_create("einsum");
    tcase_add_test(t, test_einsum_forms);
    tcase_add_test(t, test_einsum_errors);
    suite_add_tcase(s, t);
    return s;
}
