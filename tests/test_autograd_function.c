/* test_autograd_function.c - custom functions (torch.autograd.Function):
 * save_for_backward (inputs and outputs, version-checked), values and the
 * user pointer, needs_input_grad, several outputs with materialized
 * gradients, non-differentiable outputs, a function inside a module,
 * gradcheck and gradgradcheck through them (and gradgradcheck catching a
 * backward whose own gradient is wrong), errors from the callbacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *sum_all(nb_tensor *t) { return nb_sum(t, NULL, 0, false); }

/* ---- exp, saving its output ---------------------------------------------------------------- */

static nb_status exp_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)n;
    out[0] = nb_exp(in[0]);
    ck_assert(!nb_requires_grad(out[0])); /* the forward records nothing */
    return out[0] ? nb_ctx_save_for_backward(ctx, out, 1) : nb_last_status();
}
static nb_status exp_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    gin[0] = nb_mul(gout[0], nb_ctx_saved_tensor(ctx, 0));
    return gin[0] ? NB_OK : nb_last_status();
}
static const nb_function MY_EXP = {"MyExp", 1, exp_fwd, exp_bwd};

static nb_tensor *my_exp(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_tensor *y;
    return nb_function_apply(&MY_EXP, in, 1, &y, NULL) == NB_OK ? y : NULL;
}

START_TEST(test_function_exp) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 3), 1);
    nb_tensor *y = my_exp(&x, 1, NULL);
    NB_CK_NOTNULL(y);
    ck_assert(nb_requires_grad(y) && !nb_is_leaf(y));
    NB_CK_OK(nb_backward(sum_all(y)));
    double *e = nb_test_values_of(nb_exp(nb_detach(x)));
    nb_ck_close(nb_tensor_grad(x), e, 6, 0, 1e-15);
    free(e);
    nb_ck_gradcheck(my_exp, &x, 1, NULL);
    /* its backward is made of ops on a saved output: differentiable again */
    NB_CK_OK(nb_gradgradcheck(my_exp, &x, 1, NULL, NULL));
    /* under no_grad nothing is recorded */
    nb_tensor *z = NULL;
    NB_NO_GRAD { z = my_exp(&x, 1, NULL); }
    ck_assert(!nb_requires_grad(z) && nb_is_leaf(z));
    nb_scope_end(s);
}
END_TEST

/* ---- a wrong double backward: x^2 with the saved x detached ---------------------------------- */

static nb_status sq_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)n;
    out[0] = nb_mul(in[0], in[0]);
    nb_tensor *d = nb_detach(in[0]); /* a constant copy of x: the first derivative is right, its gradient is lost */
    return out[0] && d ? nb_ctx_save_for_backward(ctx, &d, 1) : nb_last_status();
}
static nb_status sq_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    gin[0] = nb_mul(gout[0], nb_mul_scalar(nb_ctx_saved_tensor(ctx, 0), 2));
    return gin[0] ? NB_OK : nb_last_status();
}
static const nb_function BAD_SQ = {"BadSquare", 1, sq_fwd, sq_bwd};
static nb_tensor *bad_sq(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_tensor *y;
    return nb_function_apply(&BAD_SQ, in, 1, &y, NULL) == NB_OK ? y : NULL;
}

START_TEST(test_gradgradcheck_catches_a_wrong_second_derivative) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(4), 2);
    nb_ck_gradcheck(bad_sq, &x, 1, NULL); /* first order: right */
    NB_CK_FAILS(nb_gradgradcheck(bad_sq, &x, 1, NULL, NULL) == NB_OK, NB_ERR_MISMATCH);
    nb_scope_end(s);
}
END_TEST

/* ---- two inputs, values, needs_input_grad ----------------------------------------------------- */

typedef struct {
    int forwards, backwards;
    bool needs[2];
} probe;

/* out = a * k + b^2, k a value kept in the context */
static nb_status axb_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    ck_assert_int_eq(n, 2);
    probe *p = nb_ctx_user(ctx);
    p->forwards++;
    NB_CK_OK(nb_ctx_set_value(ctx, "k", 2.5));
    NB_CK_OK(nb_ctx_set_value(ctx, "k", 3.0)); /* a key set again is overwritten */
    out[0] = nb_add(nb_mul_scalar(in[0], 3.0), nb_mul(in[1], in[1]));
    ck_assert_int_eq(nb_ctx_num_saved(ctx), 0);
    NB_CK_OK(nb_ctx_save_for_backward(ctx, &in[1], 1));
    ck_assert_int_eq(nb_ctx_num_saved(ctx), 1);
    return out[0] ? NB_OK : nb_last_status();
}
static nb_status axb_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    probe *p = nb_ctx_user(ctx);
    p->backwards++;
    p->needs[0] = nb_ctx_needs_input_grad(ctx, 0), p->needs[1] = nb_ctx_needs_input_grad(ctx, 1);
    ck_assert(!nb_ctx_needs_input_grad(ctx, 2) && !nb_ctx_needs_input_grad(ctx, -1));
    double k = nb_ctx_value(ctx, "k");
    ck_assert(isnan(nb_ctx_value(ctx, "missing")));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_ctx_saved_tensor(ctx, 1));
    gin[0] = nb_mul_scalar(gout[0], k);
    gin[1] = nb_mul(gout[0], nb_mul_scalar(nb_ctx_saved_tensor(ctx, 0), 2));
    return NB_OK;
}
static const nb_function AXB = {"AxB", 1, axb_fwd, axb_bwd};

START_TEST(test_function_values_and_needs_input_grad) {
    nb_scope *s = nb_scope_begin();
    probe p = {0};
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(3), 3);
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3}); /* no grad */
    nb_tensor *y;
    NB_CK_OK(nb_function_apply(&AXB, (nb_tensor *[]){a, b}, 2, &y, &p));
    NB_CK_OK(nb_backward(sum_all(y)));
    ck_assert(p.forwards == 1 && p.backwards == 1 && p.needs[0] && !p.needs[1]);
    nb_ck_close(nb_tensor_grad(a), (double[]){3, 3, 3}, 3, 0, 0);
    /* both require grad */
    nb_tensor *b2 = nb_test_randn_grad(NB_SHAPE(3), 4);
    NB_CK_OK(nb_function_apply(&AXB, (nb_tensor *[]){a, b2}, 2, &y, &p));
    NB_CK_OK(nb_backward(sum_all(y)));
    ck_assert(p.needs[0] && p.needs[1]);
    double *bv = nb_test_values_of(b2);
    nb_ck_close(nb_tensor_grad(b2), (double[]){2 * bv[0], 2 * bv[1], 2 * bv[2]}, 3, 0, 1e-15);
    free(bv);
    /* the saved b2 modified in place: backward fails with PyTorch's message */
    NB_CK_OK(nb_function_apply(&AXB, (nb_tensor *[]){a, b2}, 2, &y, &p));
    NB_CK_OK(nb_fill_(b2, 0.5));
    NB_CK_FAILS(nb_backward(sum_all(y)) == NB_OK, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "modified by an inplace operation"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "AxB"));
    nb_scope_end(s);
}
END_TEST

/* ---- several outputs, one non-differentiable ---------------------------------------------------- */

/* (2x, x^2, argmax-like int64 indices, a float marked non-differentiable) */
static nb_status multi_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)n;
    out[0] = nb_mul_scalar(in[0], 2);
    out[1] = nb_mul(in[0], in[0]);
    out[2] = nb_argmax(in[0], 0, false);
    out[3] = nb_sign(in[0]);
    NB_CK_OK(nb_ctx_mark_non_differentiable(ctx, out[3]));
    return nb_ctx_save_for_backward(ctx, in, 1);
}
static int materialized;
static nb_status multi_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    ck_assert(gout[0] && gout[1] && gout[3]); /* zeros where no gradient came (materialize_grads) */
    if (nb_item(sum_all(nb_abs(gout[0]))) == 0) materialized++;
    gin[0] = nb_add(nb_mul_scalar(gout[0], 2), nb_mul(gout[1], nb_mul_scalar(nb_ctx_saved_tensor(ctx, 0), 2)));
    return gin[0] ? NB_OK : nb_last_status();
}
static const nb_function MULTI = {"Multi", 4, multi_fwd, multi_bwd};

START_TEST(test_function_outputs) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, -2, 0.5});
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_tensor *o[4];
    NB_CK_OK(nb_function_apply(&MULTI, &x, 1, o, NULL));
    ck_assert(nb_requires_grad(o[0]) && nb_requires_grad(o[1]));
    ck_assert(!nb_requires_grad(o[2]) && !nb_requires_grad(o[3])); /* int64, marked */
    ck_assert_int_eq(nb_dtype_of(o[2]), NB_I64);
    /* both differentiable outputs feed the loss: 3 * sum(2x) + sum(x^2) */
    NB_CK_OK(nb_backward(nb_add(nb_mul_scalar(sum_all(o[0]), 3), sum_all(o[1]))));
    nb_ck_close(nb_tensor_grad(x), (double[]){8, 2, 7}, 3, 0, 1e-15);
    /* only output 1 feeds the loss: output 0's gradient is materialized as zeros */
    nb_tensor_zero_grad(x);
    materialized = 0;
    NB_CK_OK(nb_function_apply(&MULTI, &x, 1, o, NULL));
    NB_CK_OK(nb_backward(sum_all(o[1])));
    ck_assert_int_eq(materialized, 1);
    nb_ck_close(nb_tensor_grad(x), (double[]){2, -4, 1}, 3, 0, 1e-15);
    /* a gradient of output 1 with respect to x through nb_grad, and gradcheck of each output */
    nb_tensor *g;
    NB_CK_OK(nb_function_apply(&MULTI, &x, 1, o, NULL));
    NB_CK_OK(nb_grad(&o[1], (nb_tensor *[]){nb_ones_like(o[1])}, 1, &x, 1, &g, NULL));
    nb_ck_close(g, (double[]){2, -4, 1}, 3, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

/* ---- inside a module -------------------------------------------------------------------------- */

/* ScaledTanh: y = a tanh(x), a a value; backward a (1 - tanh(x)^2) g. It
 * saves its input and recomputes tanh in backward: a tensor made inside
 * forward would be a constant there (as in PyTorch), and the double
 * backward would miss its dependence on x. */
static nb_status st_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)n;
    double a = *(double *)nb_ctx_user(ctx);
    NB_CK_OK(nb_ctx_set_value(ctx, "a", a));
    out[0] = nb_mul_scalar(nb_tanh(in[0]), a);
    return nb_ctx_save_for_backward(ctx, in, 1);
}
static nb_status st_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    nb_tensor *t = nb_tanh(nb_ctx_saved_tensor(ctx, 0));
    gin[0] = nb_mul(gout[0], nb_mul_scalar(nb_add_scalar(nb_neg(nb_mul(t, t)), 1), nb_ctx_value(ctx, "a")));
    return gin[0] ? NB_OK : nb_last_status();
}
static const nb_function SCALED_TANH = {"ScaledTanh", 1, st_fwd, st_bwd};

static double module_scale = 1.5;
static nb_tensor *st_module_forward(nb_module *m, nb_tensor *x) {
    nb_tensor *h = nb_linear(x, nb_module_get(m, "weight"), NULL), *y;
    return nb_function_apply(&SCALED_TANH, &h, 1, &y, &module_scale) == NB_OK ? y : NULL;
}
static const nb_module_ops ST_OPS = {"ScaledTanhLinear", st_module_forward, NULL, NULL};

static nb_module *gc_module;
static nb_tensor *through_module(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_forward(gc_module, in[0]);
}

START_TEST(test_function_in_module) {
    nb_scope *s = nb_scope_begin();
    nb_module *m = nb_module_new(&ST_OPS, NULL);
    NB_CK_NOTNULL(m);
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(2, 3), 5);
    NB_CK_OK(nb_module_register_parameter(m, "weight", w));
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(4, 3), 6);
    gc_module = m;
    nb_ck_gradcheck(through_module, &x, 1, NULL);
    NB_CK_OK(nb_gradgradcheck(through_module, &x, 1, NULL, NULL));
    /* the parameter's gradient through the function */
    nb_module_zero_grad(m);
    NB_CK_OK(nb_backward(sum_all(nb_forward(m, x))));
    NB_CK_NOTNULL(nb_tensor_grad(nb_module_get(m, "weight")));
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

static nb_status null_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return NB_OK; /* writes no output */
}
static nb_status failing_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)ctx, (void)n, (void)out;
    return nb_reshape(in[0], NB_SHAPE(7)) ? NB_OK : nb_last_status(); /* an op of its own fails */
}
static nb_status ident_fwd(nb_function_ctx *ctx, nb_tensor *const *in, int n, nb_tensor **out) {
    (void)ctx, (void)n;
    out[0] = in[0]; /* an input returned as is: a new view of it */
    return NB_OK;
}
static nb_status wrong_shape_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    (void)ctx, (void)gout;
    gin[0] = nb_ones(NB_SHAPE(5), NB_F64);
    return NB_OK;
}
static nb_status failing_bwd(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    (void)ctx, (void)gout, (void)gin;
    return NB_ERR_STATE; /* no message of its own: apply gives one */
}

START_TEST(test_function_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3), 7), *y;
    NB_CK_FAILS(nb_function_apply(&(nb_function){"NoOut", 1, null_fwd, exp_bwd}, &x, 1, &y, NULL) == NB_OK,
                NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "NoOut"));
    NB_CK_FAILS(nb_function_apply(&(nb_function){"Refuses", 1, failing_fwd, exp_bwd}, &x, 1, &y, NULL) == NB_OK,
                NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "reshape")); /* the failing op's message is kept */
    NB_CK_FAILS(nb_function_apply(&(nb_function){"Zero", 0, exp_fwd, exp_bwd}, &x, 1, &y, NULL) == NB_OK,
                NB_ERR_INVALID_ARG);
    /* an input returned as is becomes a new tensor with the function's node */
    NB_CK_OK(nb_function_apply(&(nb_function){"Ident", 1, ident_fwd, wrong_shape_bwd}, &x, 1, &y, NULL));
    ck_assert(y != x && !nb_is_leaf(y));
    NB_CK_FAILS(nb_backward(sum_all(y)) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "Ident"));
    NB_CK_OK(nb_function_apply(&(nb_function){"FailsBack", 1, exp_fwd, failing_bwd}, &x, 1, &y, NULL));
    NB_CK_FAILS(nb_backward(sum_all(y)) == NB_OK, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "FailsBack"));
    /* the context outside its callbacks */
    ck_assert_int_eq(nb_ctx_save_for_backward(NULL, &x, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_autograd_function(void) {
    Suite *s = suite_create("autograd_function");
    TCase *tc = tcase_create("function");
    tcase_add_test(tc, test_function_exp);
    tcase_add_test(tc, test_gradgradcheck_catches_a_wrong_second_derivative);
    tcase_add_test(tc, test_function_values_and_needs_input_grad);
    tcase_add_test(tc, test_function_outputs);
    tcase_add_test(tc, test_function_in_module);
    tcase_add_test(tc, test_function_errors);
    suite_add_tcase(s, tc);
    return s;
}
