/* test_autograd_hooks.c - tensor gradient hooks (leaf and op result,
 * replacing the gradient, removal, in nb_grad), post-accumulate-grad
 * hooks (per-parameter clipping), module forward pre/post hooks, anomaly
 * detection in forward and backward, and the in-place check (version
 * counters) that turns a silently wrong gradient into PyTorch's error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *leaf(int ndim, const int64_t *shape, const double *v) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

static nb_tensor *sum_all(nb_tensor *t) { return nb_sum(t, NULL, 0, false); }

/* ---- tensor hooks ------------------------------------------------------------------------ */

typedef struct {
    int calls;
    double seen; /* the sum of the gradient the hook saw */
    double scale; /* 0: keep the gradient; else replace it by scale * grad */
} hook_probe;

static nb_status probe_hook(nb_tensor *grad, nb_tensor **replace, void *user) {
    hook_probe *p = user;
    p->calls++;
    p->seen = nb_item(sum_all(grad));
    if (p->scale != 0) *replace = nb_mul_scalar(grad, p->scale);
    return NB_OK;
}

START_TEST(test_leaf_hook) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    hook_probe p = {.scale = 2};
    int64_t h = nb_register_hook(x, probe_hook, &p);
    ck_assert_int_gt(h, 0);
    /* x used twice: the hook sees the complete gradient once, 2x + 3 */
    NB_CK_OK(nb_backward(sum_all(nb_add(nb_mul(x, x), nb_mul_scalar(x, 3)))));
    ck_assert_int_eq(p.calls, 1);
    ck_assert_double_eq_tol(p.seen, 5 + 7, 1e-15);
    nb_ck_close(nb_tensor_grad(x), (double[]){10, 14}, 2, 0, 1e-15); /* replaced: doubled */
    /* in nb_grad the hook applies to the returned gradient */
    nb_tensor *g;
    NB_CK_OK(nb_grad((nb_tensor *[]){sum_all(nb_mul_scalar(x, 3))}, NULL, 1, &x, 1, &g, NULL));
    nb_ck_close(g, (double[]){6, 6}, 2, 0, 0);
    ck_assert_int_eq(p.calls, 2);
    /* removed: no more calls */
    NB_CK_OK(nb_remove_hook(x, h));
    NB_CK_FAILS(nb_remove_hook(x, h) == NB_OK, NB_ERR_INVALID_ARG);
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(sum_all(nb_mul_scalar(x, 3))));
    ck_assert_int_eq(p.calls, 2);
    nb_ck_close(nb_tensor_grad(x), (double[]){3, 3}, 2, 0, 0);
    /* a tensor that does not require grad takes no hook */
    nb_tensor *c = nb_ones(NB_SHAPE(2), NB_F64);
    nb_clear_error();
    ck_assert_int_eq(nb_register_hook(c, probe_hook, &p), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_non_leaf_hook) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    nb_tensor *y = nb_mul_scalar(x, 3);
    hook_probe p = {.scale = 0.5};
    ck_assert_int_gt(nb_register_hook(y, probe_hook, &p), 0);
    nb_tensor *l = sum_all(nb_add(nb_mul(y, y), y)); /* dl/dy = 2y + 1 = 7, 13 */
    NB_CK_OK(nb_backward(l));
    ck_assert_int_eq(p.calls, 1);
    ck_assert_double_eq_tol(p.seen, 20, 1e-15);
    nb_ck_close(nb_tensor_grad(x), (double[]){3 * 3.5, 3 * 6.5}, 2, 0, 1e-15); /* halved before y's node ran */
    nb_scope_end(s);
}
END_TEST

static nb_status bad_shape_hook(nb_tensor *grad, nb_tensor **replace, void *user) {
    (void)grad, (void)user;
    *replace = nb_ones(NB_SHAPE(5), NB_F64);
    return NB_OK;
}
static nb_status failing_hook(nb_tensor *grad, nb_tensor **replace, void *user) {
    (void)replace, (void)user;
    return nb_reshape(grad, NB_SHAPE(7)) ? NB_OK : nb_last_status(); /* an op of its own fails */
}
static nb_status silent_hook(nb_tensor *grad, nb_tensor **replace, void *user) {
    (void)grad, (void)replace, (void)user;
    return NB_ERR_INVALID_ARG; /* no message: backward gives one */
}

START_TEST(test_hook_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    int64_t h = nb_register_hook(x, bad_shape_hook, NULL);
    NB_CK_FAILS(nb_backward(sum_all(nb_exp(x))) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "hook"));
    NB_CK_OK(nb_remove_hook(x, h));
    h = nb_register_hook(x, failing_hook, NULL);
    NB_CK_FAILS(nb_backward(sum_all(nb_exp(x))) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "reshape"));
    NB_CK_OK(nb_remove_hook(x, h));
    nb_register_hook(x, silent_hook, NULL);
    NB_CK_FAILS(nb_backward(sum_all(nb_exp(x))) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "hook"));
    nb_scope_end(s);
}
END_TEST

/* ---- post-accumulate-grad hooks --------------------------------------------------------------------- */

/* Per-parameter clipping as the hook would do it: clip .grad to norm 1 in place. */
static nb_status clip_hook(nb_tensor *param, void *user) {
    int *calls = user;
    (*calls)++;
    return nb_clip_grad_norm_(&param, 1, 1.0, 2.0, NULL);
}

START_TEST(test_post_accumulate_grad_hook) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = leaf(NB_SHAPE(2), (double[]){3, 4});
    int calls = 0;
    ck_assert_int_gt(nb_register_post_accumulate_grad_hook(w, clip_hook, &calls), 0);
    NB_CK_OK(nb_backward(sum_all(nb_mul(w, w)))); /* grad 2w = (6, 8), norm 10, clipped to 1 */
    ck_assert_int_eq(calls, 1);
    nb_ck_close(nb_tensor_grad(w), (double[]){0.6, 0.8}, 2, 1e-6, 0);
    /* accumulation: the hook sees the sum */
    NB_CK_OK(nb_backward(sum_all(nb_mul(w, w))));
    ck_assert_int_eq(calls, 2);
    nb_ck_close(nb_tensor_grad(w), (double[]){0.6, 0.8}, 2, 1e-6, 0);
    /* nb_grad does not accumulate, so it calls no post-accumulate hook */
    nb_tensor *g;
    NB_CK_OK(nb_grad((nb_tensor *[]){sum_all(w)}, NULL, 1, &w, 1, &g, NULL));
    ck_assert_int_eq(calls, 2);
    /* only leaves accumulate a .grad */
    nb_clear_error();
    ck_assert_int_eq(nb_register_post_accumulate_grad_hook(nb_exp(w), clip_hook, &calls), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    nb_scope_end(s);
}
END_TEST

/* ---- module hooks ------------------------------------------------------------------------------------ */

static nb_status double_input(nb_module *m, nb_tensor *input, nb_tensor **replace, void *user) {
    (void)m;
    (*(int *)user)++;
    *replace = nb_mul_scalar(input, 2);
    return NB_OK;
}
static nb_status add_one(nb_module *m, nb_tensor *input, nb_tensor *output, nb_tensor **replace, void *user) {
    (void)input;
    ck_assert_str_eq(nb_module_kind(m), "Tanh");
    (*(int *)user)++;
    *replace = nb_add_scalar(output, 1);
    return NB_OK;
}
static nb_status refuse(nb_module *m, nb_tensor *input, nb_tensor **replace, void *user) {
    (void)m, (void)input, (void)replace, (void)user;
    return NB_ERR_STATE;
}

START_TEST(test_module_hooks) {
    nb_scope *s = nb_scope_begin();
    nb_module *net = nb_nn_sequential(nb_nn_tanh(), nb_nn_sigmoid());
    NB_CK_NOTNULL(net);
    nb_module *t = nb_module_child_at(net, 0);
    int pre = 0, post = 0;
    int64_t h1 = nb_module_register_forward_pre_hook(t, double_input, &pre);
    int64_t h2 = nb_module_register_forward_hook(t, add_one, &post);
    ck_assert(h1 > 0 && h2 > 0 && h1 != h2);
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){0.25, -0.5});
    nb_tensor *y = nb_forward(net, x);
    ck_assert(pre == 1 && post == 1);
    double e0 = 1 / (1 + exp(-(tanh(0.5) + 1))), e1 = 1 / (1 + exp(-(tanh(-1.0) + 1)));
    nb_ck_close(y, (double[]){e0, e1}, 2, 0, 1e-15);
    /* the hooks' ops are on the graph: dy/dx = s'(.) * tanh'(2x) * 2 */
    NB_CK_OK(nb_backward(sum_all(y)));
    double d0 = e0 * (1 - e0) * (1 - tanh(0.5) * tanh(0.5)) * 2, d1 = e1 * (1 - e1) * (1 - tanh(-1.0) * tanh(-1.0)) * 2;
    nb_ck_close(nb_tensor_grad(x), (double[]){d0, d1}, 2, 0, 1e-14);
    NB_CK_OK(nb_module_remove_hook(t, h1));
    NB_CK_OK(nb_module_remove_hook(t, h2));
    NB_CK_FAILS(nb_module_remove_hook(t, h2) == NB_OK, NB_ERR_INVALID_ARG);
    y = nb_forward(net, x);
    ck_assert(pre == 1 && post == 1);
    nb_ck_close(y, (double[]){1 / (1 + exp(-tanh(0.25))), 1 / (1 + exp(-tanh(-0.5)))}, 2, 0, 1e-15);
    /* a failing hook fails the forward, naming the module */
    nb_module_register_forward_pre_hook(net, refuse, NULL);
    NB_CK_FAILS(nb_forward(net, x) != NULL, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "Sequential"));
    nb_module_free(net);
    nb_scope_end(s);
}
END_TEST

/* ---- anomaly detection ------------------------------------------------------------------------------- */

START_TEST(test_anomaly_detection) {
    nb_scope *s = nb_scope_begin();
    ck_assert(!nb_is_anomaly_enabled());
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, 0, 4});
    /* without anomaly mode: sqrt's gradient at 0 is inf, silently */
    NB_CK_OK(nb_backward(sum_all(nb_sqrt(x))));
    double *gv = nb_test_values_of(nb_tensor_grad(x));
    ck_assert(isinf(gv[1]));
    free(gv);
    nb_tensor_zero_grad(x);
    nb_set_detect_anomaly(true);
    ck_assert(nb_is_anomaly_enabled());
    /* backward: the first rule that makes inf names itself, its shapes and the forward that recorded it */
    nb_tensor *l = sum_all(nb_mul_scalar(nb_sqrt(x), 2));
    NB_CK_FAILS(nb_backward(l) == NB_OK, NB_ERR_ANOMALY);
    const char *e = nb_last_error();
    ck_assert_ptr_nonnull(strstr(e, "backward of sqrt"));
    ck_assert_ptr_nonnull(strstr(e, "sqrt([3] float64) -> [3] float64"));
    /* forward: an op that turns finite inputs into inf or NaN */
    NB_CK_FAILS(nb_log(x) != NULL, NB_ERR_ANOMALY);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "forward of log"));
    /* NaN from a backward: d/dx (x * 0 * inf) */
    nb_tensor *inf = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){INFINITY, 1, 1});
    nb_set_detect_anomaly(false);
    nb_tensor *m = nb_mul(nb_mul_scalar(x, 0), inf); /* made with anomaly mode off */
    nb_set_detect_anomaly(true);
    NB_CK_FAILS(nb_backward(sum_all(m)) == NB_OK, NB_ERR_ANOMALY);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "recorded before anomaly mode was on"));
    /* ops on finite values pass; an inf already in the input is no new anomaly */
    nb_tensor *big = leaf(NB_SHAPE(2), (double[]){INFINITY, 1});
    NB_CK_NOTNULL(nb_mul_scalar(big, 2));
    NB_CK_NOTNULL(nb_exp(x));
    nb_set_detect_anomaly(false);
    NB_CK_NOTNULL(nb_log(x));
    nb_scope_end(s);
}
END_TEST

/* ---- in-place safety --------------------------------------------------------------------------------- */

/* The example: y = x * w with w saved; w overwritten before
 * backward gave 100 instead of 2. Now backward fails as PyTorch does. */
START_TEST(test_inplace_modification_detected) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(1), (double[]){1});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){2});
    nb_tensor *y = nb_mul(x, w);
    NB_CK_OK(nb_fill_(w, 100));
    NB_CK_FAILS(nb_backward(sum_all(y)) == NB_OK, NB_ERR_STATE);
    const char *e = nb_last_error();
    ck_assert_ptr_nonnull(strstr(e, "one of the variables needed for gradient computation has been modified by an "
                                    "inplace operation"));
    ck_assert_ptr_nonnull(strstr(e, "is at version"));
    ck_assert_ptr_nonnull(strstr(e, "mul"));
    ck_assert_ptr_null(nb_tensor_grad(x));
    /* through a view (shared storage) and by nb_copy_ */
    nb_tensor *x2 = leaf(NB_SHAPE(2), (double[]){1, 2});
    nb_tensor *y2 = nb_sum(nb_exp(nb_mul(x2, x2)), NULL, 0, false); /* exp saves its output */
    NB_CK_OK(nb_copy_(nb_detach(x2), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){5, 6})));
    NB_CK_FAILS(nb_backward(y2) == NB_OK, NB_ERR_STATE); /* mul saved x2, which changed */
    /* a write to a tensor no pending node saved is no hazard */
    nb_tensor *a = leaf(NB_SHAPE(2), (double[]){1, 2}), *b = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 4});
    nb_tensor *l = sum_all(nb_add(a, b)); /* add saves nothing */
    NB_CK_OK(nb_fill_(b, 0));
    NB_CK_OK(nb_backward(l));
    nb_ck_close(nb_tensor_grad(a), (double[]){1, 1}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* An optimizer step writes parameters in place: a retained graph that
 * saved one must not backpropagate through the old values. */
START_TEST(test_inplace_optimizer_step) {
    nb_scope *s = nb_scope_begin();
    nb_module *lin = nb_nn_linear_ex(3, 2, true, NB_F64);
    NB_CK_NOTNULL(lin);
    nb_optimizer *opt = nb_sgd(lin, (nb_sgd_options){.lr = 0.1});
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(4, 3), 9);
    nb_tensor *loss = sum_all(nb_forward(lin, x)); /* linear saved the weight */
    NB_CK_OK(nb_backward_ex(loss, NULL, &(nb_backward_options){.retain_graph = true}));
    NB_CK_OK(nb_optimizer_step(opt));
    NB_CK_FAILS(nb_backward(loss) == NB_OK, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "modified by an inplace operation"));
    /* a fresh forward after the step is fine */
    nb_optimizer_zero_grad(opt);
    NB_CK_OK(nb_backward(sum_all(nb_forward(lin, x))));
    nb_optimizer_free(opt);
    nb_module_free(lin);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_autograd_hooks(void) {
    Suite *s = suite_create("autograd_hooks");
    TCase *tc = tcase_create("hooks");
    tcase_add_test(tc, test_leaf_hook);
    tcase_add_test(tc, test_non_leaf_hook);
    tcase_add_test(tc, test_hook_errors);
    tcase_add_test(tc, test_post_accumulate_grad_hook);
    tcase_add_test(tc, test_module_hooks);
    tcase_add_test(tc, test_anomaly_detection);
    tcase_add_test(tc, test_inplace_modification_detected);
    tcase_add_test(tc, test_inplace_optimizer_step);
    suite_add_tcase(s, tc);
    return s;
}
