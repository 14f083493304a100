/* test_print.c - nb_repr / nb_print against PyTorch 1.13's repr (strings
 * copied from /usr/bin/python3; the differential suite compares 39 more
 * tensors at every run), truncation and errors. */
#include <math.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static void ck_repr(const nb_tensor *t, const char *want) {
    char buf[2048];
    int64_t n = nb_repr(t, buf, sizeof buf);
    ck_assert_msg(n == (int64_t)strlen(want) && !strcmp(buf, want), "nb_repr:\n%s\nPyTorch:\n%s", buf, want);
}

START_TEST(test_repr_matches_pytorch) {
    nb_scope *s = nb_scope_begin();
    double v[6] = {0.1, -2, 3.5, INFINITY, NAN, 0};
    nb_tensor *x = nb_from_data(v, NB_SHAPE(2, 3), NB_F64);
    NB_CK_OK(nb_set_requires_grad(x, true));
    ck_repr(x, "tensor([[ 0.1000, -2.0000,  3.5000],\n        [    inf,     nan,  0.0000]], dtype=torch.float64, "
               "requires_grad=True)");
    ck_repr(nb_add(x, x), "tensor([[ 0.2000, -4.0000,  7.0000],\n        [    inf,     nan,  0.0000]], "
                          "dtype=torch.float64,\n       grad_fn=<AddBackward0>)");
    ck_repr(nb_arange(0, 5, 1, NB_I64), "tensor([0, 1, 2, 3, 4])");
    ck_repr(nb_ones(NB_SHAPE(2, 2), NB_F32), "tensor([[1., 1.],\n        [1., 1.]])");
    ck_repr(nb_zeros(NB_SHAPE(0, 3), NB_F32), "tensor([], size=(0, 3))");
    ck_repr(nb_zeros(NB_SHAPE(0), NB_I64), "tensor([], dtype=torch.int64)");
    ck_repr(nb_scalar(3, NB_F32), "tensor(3.)");
    ck_repr(nb_test_tensor(NB_SHAPE(2), NB_F32, (double[]){1e-5, 0.5}), "tensor([1.0000e-05, 5.0000e-01])");
    ck_repr(nb_test_tensor(NB_SHAPE(3), NB_I32, (double[]){-5, 10, 0}), "tensor([-5, 10,  0], dtype=torch.int32)");
    ck_repr(nb_gt_scalar(nb_arange(0, 4, 1, NB_F32), 1.5), "tensor([False, False,  True,  True])");
    ck_repr(nb_arange(0, 2000, 1, NB_F32), "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, "
                                           "1.9980e+03,\n        1.9990e+03])");
    nb_scope_end(s);
}
END_TEST

START_TEST(test_repr_truncation_and_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(3), NB_F32);
    char small[8];
    ck_assert_int_eq(nb_repr(x, small, sizeof small), (int64_t)strlen("tensor([1., 1., 1.])"));
    ck_assert_str_eq(small, "tensor(");
    ck_assert_int_eq(nb_repr(x, NULL, 0), 20);
    NB_CK_FAILS(nb_repr(NULL, small, sizeof small) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_repr(x, NULL, 5) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_print(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_print(x));
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_print(void) {
    Suite *s = suite_create("print");
    TCase *c = tcase_create("print");
    tcase_add_test(c, test_repr_matches_pytorch);
    tcase_add_test(c, test_repr_truncation_and_errors);
    suite_add_tcase(s, c);
    return s;
}
