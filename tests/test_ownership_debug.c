/* test_ownership_debug.c - NB_DEBUG_OWNERSHIP (issue 28 item 16): a tensor
 * used after its scope ended, or released more often than retained, fails
 * with an error naming its shape and what freed it, instead of touching
 * freed memory; with the switch off nothing changes. */
#include <math.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static bool error_has(const char *what) { return strstr(nb_last_error(), what) != NULL; }

START_TEST(test_use_after_scope_end) {
    nb_set_ownership_debug(true);
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_ones(NB_SHAPE(2, 3), NB_F32);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_scope_end(s));
    ck_assert_ptr_null(nb_add(t, t));
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    ck_assert_msg(error_has("add: a freed tensor (shape [2, 3], float32)"), "%s", nb_last_error());
    ck_assert_msg(error_has("the end of the nb_scope_begin scope #"), "%s", nb_last_error());
    ck_assert(isnan(nb_item(t)));
    ck_assert(error_has("item: a freed tensor"));
    float buf[6];
    ck_assert_int_eq(nb_to_host(t, buf, sizeof buf), NB_ERR_STATE);
    ck_assert_int_eq(nb_backward(t), NB_ERR_STATE);
    nb_retain(t); /* refused: no reference is taken on a freed tensor */
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    nb_set_ownership_debug(false);
}
END_TEST

START_TEST(test_release_without_retain) {
    nb_set_ownership_debug(true);
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_zeros(NB_SHAPE(4), NB_F64);
    NB_CK_NOTNULL(nb_mul_scalar(t, 2));
    nb_release(t); /* not retained: this frees it, the scope still lists it */
    ck_assert_int_eq(nb_scope_end(s), NB_ERR_STATE);
    ck_assert_msg(error_has("1 tensor of this scope had been freed already"), "%s", nb_last_error());
    /* the freed tensor's record names the explicit release */
    ck_assert_ptr_null(nb_neg(t));
    ck_assert_msg(error_has("shape [4], float64") && error_has("freed by nb_release"), "%s", nb_last_error());
    nb_set_ownership_debug(false);
}
END_TEST

/* A library call's own temporaries and a retained tensor are not affected. */
START_TEST(test_debug_keeps_valid_programs) {
    nb_set_ownership_debug(true);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(8, 4), NB_F32, NULL), *w = nb_randn(NB_SHAPE(3, 4), NB_F32, NULL);
    nb_set_requires_grad(w, true);
    nb_tensor *keep = NULL;
    for (int i = 0; i < 3; i++) {
        nb_scope *step = nb_scope_begin();
        nb_tensor *loss = nb_sum(nb_relu(nb_linear(x, w, NULL)), NULL, 0, false);
        NB_CK_OK(nb_backward(loss));
        nb_release(keep);
        keep = nb_detach(loss);
        nb_retain(keep);
        NB_CK_OK(nb_scope_end(step));
    }
    ck_assert(isfinite(nb_item(keep)));
    nb_release(keep);
    NB_CK_OK(nb_scope_end(s));
    nb_set_ownership_debug(false);
}
END_TEST

Suite *nb_suite_ownership_debug(void) {
    Suite *s = suite_create("ownership_debug");
    TCase *c = tcase_create("ownership_debug");
    tcase_add_test(c, test_use_after_scope_end);
    tcase_add_test(c, test_release_without_retain);
    tcase_add_test(c, test_debug_keeps_valid_programs);
    suite_add_tcase(s, c);
    return s;
}
