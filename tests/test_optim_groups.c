/* test_optim_groups.c - parameter groups (inheritance of options field by
 * field, add_param_group, per-group lr and options by PyTorch key), the
 * decay / no-decay split, and the new optimizers' API around their
 * numerics (which test_optim_ref.c checks against PyTorch): Muon's routing
 * to AdamW, Adafactor's factored state shapes, scalar state, float32
 * runs, skipped parameters, closures, and the argument checks; and that
 * optim/OPTIM.md names every optimizer, option key and scheduler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "optim_impl.h" /* the kinds' descriptors, for the OPTIM.md check */

/* A leaf that requires grad, filled with fill (in the root scope: these tests open none). */
static nb_tensor *leaf(int ndim, const int64_t *shape, nb_dtype dt, double fill) {
    nb_tensor *p = nb_full(ndim, shape, fill, dt);
    NB_CK_NOTNULL(p);
    NB_CK_OK(nb_set_requires_grad(p, true));
    return p;
}

/* Sets every parameter's gradient from sum(sin(p) * p) + sum(p^2):
 * d/dp = sin p + p cos p + 2p, a smooth nonlinear gradient. */
static void backprop(nb_tensor *const *ps, int n) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *total = NULL;
    for (int i = 0; i < n; i++) {
        nb_tensor *p = ps[i];
        nb_tensor *term = nb_add(nb_sum(nb_mul(nb_sin(p), p), NULL, 0, false), nb_sum(nb_mul(p, p), NULL, 0, false));
        total = total ? nb_add(total, term) : term;
    }
    NB_CK_OK(nb_backward(total));
    nb_scope_end(s);
}

static void ck_same(nb_tensor *a, nb_tensor *b) {
    double *x = nb_test_values_of(a), *y = nb_test_values_of(b);
    ck_assert_msg(!memcmp(x, y, sizeof(double) * (size_t)nb_numel(a)), "tensors differ");
    free(x), free(y);
}

static nb_tensor *ramp(int ndim, const int64_t *shape, double scale) {
    nb_tensor *t = leaf(ndim, shape, NB_F64, 0.0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *r = nb_reshape(nb_mul_scalar(nb_arange(1, (double)nb_numel(t) + 1, 1, NB_F64), scale), ndim, shape);
    NB_CK_OK(nb_copy_(t, nb_sin(r)));
    nb_scope_end(s);
    return t;
}

/* ---- groups ------------------------------------------------------------------------ */

START_TEST(test_group_inheritance) {
    nb_tensor *a = ramp(NB_SHAPE(3), 0.3), *b = ramp(NB_SHAPE(2, 2), 0.7), *c = ramp(NB_SHAPE(4), 1.1);
    nb_optimizer *opt = nb_adamw_groups(
        (nb_param_group[]){{&a, 1, NULL},
                           {&b, 1, &(nb_adam_options){.weight_decay = NB_ZERO, .amsgrad = true, .betas = {0.8}}}},
        2, (nb_adam_options){.lr = 0.01, .eps = 1e-6});
    NB_CK_NOTNULL(opt);
    ck_assert_int_eq(nb_optimizer_num_param_groups(opt), 2);
    nb_adam_options o0, o1;
    NB_CK_OK(nb_optimizer_group_options(opt, 0, &o0, sizeof o0));
    NB_CK_OK(nb_optimizer_group_options(opt, 1, &o1, sizeof o1));
    ck_assert(o0.lr == 0.01 && o0.eps == 1e-6 && o0.weight_decay == 1e-2 && !o0.amsgrad); /* AdamW's default wd */
    ck_assert(o0.betas[0] == 0.9 && o0.betas[1] == 0.999);
    ck_assert(o1.lr == 0.01 && o1.eps == 1e-6 && o1.weight_decay == 0.0 && !signbit(o1.weight_decay) && o1.amsgrad);
    ck_assert(o1.betas[0] == 0.8 && o1.betas[1] == 0.999); /* betas[1] left 0: inherited */
    /* add_param_group inherits the constructor's options, not group 0's */
    NB_CK_OK(nb_optimizer_add_param_group(opt, &(nb_param_group){&c, 1, &(nb_adam_options){.lr = 0.5}}));
    ck_assert_int_eq(nb_optimizer_num_param_groups(opt), 3);
    int first = -1;
    ck_assert_int_eq(nb_optimizer_group_params(opt, 2, &first), 1);
    ck_assert_int_eq(first, 2);
    ck_assert_ptr_eq(nb_optimizer_param(opt, 2), c);
    double v;
    NB_CK_OK(nb_optimizer_get_group_option(opt, 2, "lr", &v));
    ck_assert(v == 0.5);
    NB_CK_OK(nb_optimizer_get_group_option(opt, 2, "eps", &v));
    ck_assert(v == 1e-6);
    NB_CK_OK(nb_optimizer_get_group_option(opt, 2, "amsgrad", &v));
    ck_assert(v == 0.0);
    /* lrs: per group, or all at once */
    ck_assert(nb_optimizer_get_group_lr(opt, 2) == 0.5 && nb_optimizer_get_lr(opt) == 0.01);
    NB_CK_OK(nb_optimizer_set_group_lr(opt, 1, 0.02));
    ck_assert(nb_optimizer_get_group_lr(opt, 1) == 0.02 && nb_optimizer_get_group_lr(opt, 0) == 0.01);
    NB_CK_OK(nb_optimizer_set_lr(opt, 0.03));
    for (int g = 0; g < 3; g++) ck_assert(nb_optimizer_get_group_lr(opt, g) == 0.03);
    NB_CK_OK(nb_optimizer_set_group_option(opt, 0, "betas.0", 0.5));
    NB_CK_OK(nb_optimizer_get_group_option(opt, 0, "betas.0", &v));
    ck_assert(v == 0.5);
    /* errors leave everything as it was */
    NB_CK_FAILS(nb_optimizer_set_group_option(opt, 0, "betas.0", 1.5) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_set_group_option(opt, 0, "lr", -1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_set_group_option(opt, 0, "momentum", 0.9) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_get_group_option(opt, 3, "lr", &v) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_set_group_lr(opt, -1, 0.1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_set_lr(opt, INFINITY) == NB_OK, NB_ERR_INVALID_ARG);
    nb_sgd_options wrong;
    NB_CK_FAILS(nb_optimizer_group_options(opt, 0, &wrong, sizeof wrong) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_optimizer_get_group_option(opt, 0, "betas.0", &v));
    ck_assert(v == 0.5 && nb_optimizer_get_lr(opt) == 0.03);
    NB_CK_FAILS(nb_optimizer_add_param_group(opt, &(nb_param_group){&a, 1, NULL}) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "already in the optimizer"));
    NB_CK_FAILS(nb_optimizer_add_param_group(opt, &(nb_param_group){&a, 1, &(nb_adam_options){.eps = -1}}) == NB_OK,
                NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_optimizer_num_param_groups(opt), 3);
    ck_assert_int_eq(nb_optimizer_num_params(opt), 3);
    nb_optimizer_free(opt);
}
END_TEST

/* Groups are independent: AdamW over two groups updates each exactly as an
 * AdamW over that group alone (bit for bit). */
START_TEST(test_groups_equal_separate_optimizers) {
    nb_tensor *a = ramp(NB_SHAPE(3, 2), 0.3), *b = ramp(NB_SHAPE(5), 0.9);
    nb_tensor *a2 = ramp(NB_SHAPE(3, 2), 0.3), *b2 = ramp(NB_SHAPE(5), 0.9);
    nb_adam_options head = {.lr = 0.05, .betas = {0.8, 0.95}, .weight_decay = NB_ZERO};
    nb_optimizer *both = nb_adamw_groups((nb_param_group[]){{&a, 1, NULL}, {&b, 1, &head}}, 2,
                                         (nb_adam_options){.lr = 0.01, .weight_decay = 0.1});
    nb_optimizer *one = nb_adamw_params(&a2, 1, (nb_adam_options){.lr = 0.01, .weight_decay = 0.1});
    nb_optimizer *two = nb_adamw_params(&b2, 1, head);
    NB_CK_NOTNULL(both), NB_CK_NOTNULL(one), NB_CK_NOTNULL(two);
    for (int t = 0; t < 5; t++) {
        nb_optimizer_zero_grad(both), nb_optimizer_zero_grad(one), nb_optimizer_zero_grad(two);
        backprop((nb_tensor *[]){a, b}, 2);
        backprop((nb_tensor *[]){a2, b2}, 2);
        NB_CK_OK(nb_optimizer_step(both));
        NB_CK_OK(nb_optimizer_step(one));
        NB_CK_OK(nb_optimizer_step(two));
    }
    ck_same(a, a2), ck_same(b, b2);
    nb_optimizer_free(both), nb_optimizer_free(one), nb_optimizer_free(two);
}
END_TEST

START_TEST(test_decay_split) {
    nb_module *m = nb_nn_sequential(nb_nn_linear_ex(4, 8, true, NB_F64), nb_nn_layer_norm(8, 0),
                                    nb_nn_linear_ex(8, 8, false, NB_F32), nb_nn_batch_norm1d(8, 0, 0),
                                    nb_nn_sequential(nb_nn_linear(8, 2)));
    NB_CK_NOTNULL(m);
    nb_decay_split sp;
    NB_CK_OK(nb_decay_split_module(m, &sp));
    /* decay: 0.weight, 2.weight, 4.0.weight; no decay: 0.bias, 1.weight, 1.bias, 3.weight, 3.bias, 4.0.bias */
    ck_assert_int_eq(sp.n_decay, 3);
    ck_assert_int_eq(sp.n_no_decay, 6);
    ck_assert_ptr_eq(sp.decay[0], nb_module_get(nb_module_child(m, "0"), "weight"));
    ck_assert_ptr_eq(sp.decay[2], nb_module_get(nb_module_child(nb_module_child(m, "4"), "0"), "weight"));
    ck_assert_ptr_eq(sp.no_decay[1], nb_module_get(nb_module_child(m, "1"), "weight"));
    ck_assert_ptr_eq(sp.no_decay[3], nb_module_get(nb_module_child(m, "3"), "weight"));
    ck_assert_ptr_eq(sp.no_decay[5], nb_module_get(nb_module_child(nb_module_child(m, "4"), "0"), "bias"));
    nb_decay_split_free(&sp);
    ck_assert_ptr_null(sp.decay);
    nb_decay_split_free(&sp); /* twice is fine */
    NB_CK_FAILS(nb_decay_split_module(NULL, &sp) == NB_OK, NB_ERR_INVALID_ARG);
    nb_module_free(m);
}
END_TEST

/* ---- Muon ------------------------------------------------------------------------- */

/* 2-D weights get Muon's momentum buffer; vectors, and the 2-D weights of an
 * adamw group, get AdamW, the same update as nb_adamw's (bit for bit). */
START_TEST(test_muon_routing) {
    nb_tensor *w = ramp(NB_SHAPE(4, 3), 0.4), *bias = ramp(NB_SHAPE(4), 0.8), *emb = ramp(NB_SHAPE(5, 2), 0.6);
    nb_tensor *bias2 = ramp(NB_SHAPE(4), 0.8), *emb2 = ramp(NB_SHAPE(5, 2), 0.6);
    nb_muon_options mo = {.lr = 0.02, .weight_decay = 0.01, .adamw_betas = {0.9, 0.95}};
    nb_optimizer *opt = nb_muon_groups(
        (nb_param_group[]){{(nb_tensor *[]){w, bias}, 2, NULL}, {&emb, 1, &(nb_muon_options){.adamw = true}}}, 2, mo);
    nb_optimizer *ref = nb_adamw_params((nb_tensor *[]){bias2, emb2}, 2,
                                        (nb_adam_options){.lr = 0.02, .weight_decay = 0.01, .betas = {0.9, 0.95}});
    NB_CK_NOTNULL(opt), NB_CK_NOTNULL(ref);
    double before[12], after[12];
    nb_test_values(w, before, 12);
    for (int t = 0; t < 3; t++) {
        nb_optimizer_zero_grad(opt), nb_optimizer_zero_grad(ref);
        backprop((nb_tensor *[]){w, bias, emb}, 3);
        backprop((nb_tensor *[]){bias2, emb2}, 2);
        NB_CK_OK(nb_optimizer_step(opt));
        NB_CK_OK(nb_optimizer_step(ref));
    }
    ck_assert_ptr_nonnull(nb_optimizer_state(opt, 0, "momentum_buffer"));
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "exp_avg"));
    ck_assert_ptr_null(nb_optimizer_state(opt, 1, "momentum_buffer"));
    ck_assert_ptr_nonnull(nb_optimizer_state(opt, 1, "exp_avg_sq"));
    ck_assert_ptr_nonnull(nb_optimizer_state(opt, 2, "exp_avg"));
    ck_same(bias, bias2), ck_same(emb, emb2);
    nb_test_values(w, after, 12);
    ck_assert(memcmp(before, after, sizeof before) != 0);
    for (int i = 0; i < 12; i++) ck_assert(isfinite(after[i]));
    nb_optimizer_free(opt), nb_optimizer_free(ref);
}
END_TEST

/* One Newton-Schulz-orthogonalised step of a square weight with momentum 0,
 * no weight decay: the update O has singular values near 1 (Keller
 * Jordan's iteration leaves them in about [0.7, 1.2]), so the weight moves
 * by lr times a near-orthogonal matrix: ||p1 - p0||_F^2 / 6 = lr^2 s^2, s^2
 * the mean squared singular value, in [0.5, 1.5]. */
START_TEST(test_muon_orthogonalises) {
    nb_generator gen = nb_generator_new(5);
    nb_tensor *w = nb_randn(NB_SHAPE(6, 6), NB_F64, &gen);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_optimizer *opt = nb_muon_params(&w, 1, (nb_muon_options){.lr = 0.1, .momentum = NB_ZERO,
                                                                 .weight_decay = NB_ZERO, .nesterov = NB_FLAG_FALSE});
    NB_CK_NOTNULL(opt);
    double before[36], after[36];
    nb_test_values(w, before, 36);
    backprop(&w, 1);
    NB_CK_OK(nb_optimizer_step(opt));
    nb_test_values(w, after, 36);
    double ss = 0;
    for (int i = 0; i < 36; i++) ss += (after[i] - before[i]) * (after[i] - before[i]);
    double s2 = ss / 6 / (0.1 * 0.1);
    ck_assert_msg(s2 > 0.5 && s2 < 1.5, "mean squared singular value %g", s2);
    nb_optimizer_free(opt);
}
END_TEST

/* ---- state --------------------------------------------------------------------------- */

START_TEST(test_adafactor_state_shapes) {
    nb_tensor *p3 = ramp(NB_SHAPE(2, 3, 4), 0.2), *p0 = ramp(0, NULL, 0.5), *v = ramp(NB_SHAPE(5), 0.3);
    nb_optimizer *opt = nb_adafactor_params((nb_tensor *[]){p3, p0, v}, 3, (nb_adafactor_options){0});
    NB_CK_NOTNULL(opt);
    backprop((nb_tensor *[]){p3, p0, v}, 3);
    NB_CK_OK(nb_optimizer_step(opt));
    nb_ck_shape(nb_optimizer_state(opt, 0, "row_var"), NB_SHAPE(2, 3, 1));
    nb_ck_shape(nb_optimizer_state(opt, 0, "col_var"), NB_SHAPE(2, 1, 4));
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "variance"));
    nb_ck_shape(nb_optimizer_state(opt, 1, "variance"), 0, NULL);
    nb_ck_shape(nb_optimizer_state(opt, 2, "variance"), NB_SHAPE(5));
    ck_assert_ptr_null(nb_optimizer_state(opt, 2, "row_var"));
    double eps;
    NB_CK_OK(nb_optimizer_get_group_option(opt, 0, "eps.0", &eps));
    ck_assert(isnan(eps)); /* None: the dtype's epsilon */
    nb_optimizer_free(opt);
}
END_TEST

START_TEST(test_scalar_state) {
    nb_tensor *p = ramp(NB_SHAPE(3), 0.5), *q = ramp(NB_SHAPE(3), 0.5);
    nb_optimizer *nadam = nb_nadam_params(&p, 1, (nb_nadam_options){0});
    nb_optimizer *asgd = nb_asgd_params(&q, 1, (nb_asgd_options){.lr = 0.1, .t0 = 1});
    double v;
    NB_CK_FAILS(nb_optimizer_state_scalar(nadam, 0, "mu_product", &v) == NB_OK, NB_ERR_INVALID_ARG); /* not yet */
    for (int t = 1; t <= 3; t++) {
        nb_optimizer_zero_grad(nadam), nb_optimizer_zero_grad(asgd);
        backprop(&p, 1), backprop(&q, 1);
        NB_CK_OK(nb_optimizer_step(nadam));
        NB_CK_OK(nb_optimizer_step(asgd));
    }
    double want = 1;
    for (int t = 1; t <= 3; t++) want *= 0.9 * (1. - 0.5 * pow(0.96, t * 4e-3));
    NB_CK_OK(nb_optimizer_state_scalar(nadam, 0, "mu_product", &v));
    ck_assert_msg(fabs(v - want) <= 1e-15, "mu_product %.17g, want %.17g", v, want);
    NB_CK_OK(nb_optimizer_state_scalar(asgd, 0, "eta", &v));
    ck_assert(fabs(v - 0.1 / pow(1 + 1e-4 * 0.1 * 3, 0.75)) <= 1e-15);
    NB_CK_OK(nb_optimizer_state_scalar(asgd, 0, "mu", &v));
    ck_assert(v == 0.5); /* 1 / max(1, 3 - t0) */
    ck_assert_ptr_nonnull(nb_optimizer_state(asgd, 0, "ax"));
    NB_CK_FAILS(nb_optimizer_state_scalar(nadam, 0, "eta", &v) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_state_scalar(nadam, 1, "mu_product", &v) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_optimizer_step_count(nadam, 0), 3);
    nb_optimizer_free(nadam), nb_optimizer_free(asgd);
}
END_TEST

typedef nb_optimizer *(*ctor)(nb_tensor *const *p, int n);
static nb_optimizer *c_adadelta(nb_tensor *const *p, int n) {
    return nb_adadelta_params(p, n, (nb_adadelta_options){0});
}
static nb_optimizer *c_adafactor(nb_tensor *const *p, int n) {
    return nb_adafactor_params(p, n, (nb_adafactor_options){.weight_decay = 0.1});
}
static nb_optimizer *c_adagrad(nb_tensor *const *p, int n) { return nb_adagrad_params(p, n, (nb_adagrad_options){0}); }
static nb_optimizer *c_adamax(nb_tensor *const *p, int n) { return nb_adamax_params(p, n, (nb_adamax_options){0}); }
static nb_optimizer *c_asgd(nb_tensor *const *p, int n) { return nb_asgd_params(p, n, (nb_asgd_options){.t0 = 1}); }
static nb_optimizer *c_nadam(nb_tensor *const *p, int n) {
    return nb_nadam_params(p, n, (nb_nadam_options){.weight_decay = 0.1, .decoupled_weight_decay = true});
}
static nb_optimizer *c_radam(nb_tensor *const *p, int n) { return nb_radam_params(p, n, (nb_radam_options){0}); }
static nb_optimizer *c_rmsprop(nb_tensor *const *p, int n) {
    return nb_rmsprop_params(p, n, (nb_rmsprop_options){.centered = true, .momentum = 0.9});
}
static nb_optimizer *c_rprop(nb_tensor *const *p, int n) { return nb_rprop_params(p, n, (nb_rprop_options){0}); }
static nb_optimizer *c_lion(nb_tensor *const *p, int n) { return nb_lion_params(p, n, (nb_lion_options){0}); }
static nb_optimizer *c_muon(nb_tensor *const *p, int n) { return nb_muon_params(p, n, (nb_muon_options){0}); }
static const ctor CTORS[] = {c_adadelta, c_adafactor, c_adagrad, c_adamax, c_asgd, c_nadam,
                             c_radam,    c_rmsprop,   c_rprop,   c_lion,   c_muon};

/* Each composed optimizer on float32 parameters (one 2-D, one without a
 * gradient, skipped: no state, no step), a few steps, finite and moving. */
START_TEST(test_float32_and_skipped) {
    for (size_t k = 0; k < sizeof CTORS / sizeof *CTORS; k++) {
        nb_tensor *w = leaf(NB_SHAPE(3, 4), NB_F32, 0.25), *idle = leaf(NB_SHAPE(2), NB_F32, 1.0);
        nb_optimizer *opt = CTORS[k]((nb_tensor *[]){w, idle}, 2);
        NB_CK_NOTNULL(opt);
        for (int t = 0; t < 3; t++) {
            nb_optimizer_zero_grad(opt);
            backprop(&w, 1);
            NB_CK_OK(nb_optimizer_step(opt));
        }
        double v[12], i2[2];
        nb_test_values(w, v, 12);
        for (int i = 0; i < 12; i++)
            ck_assert_msg(isfinite(v[i]) && v[i] != 0.25, "%s: w[%d] = %g", nb_optimizer_kind(opt), i, v[i]);
        nb_test_values(idle, i2, 2);
        ck_assert(i2[0] == 1.0 && i2[1] == 1.0);
        ck_assert_int_eq(nb_optimizer_step_count(opt, 1), 0);
        ck_assert_int_eq(nb_optimizer_step_count(opt, 0), 3);
        ck_assert_ptr_eq(nb_optimizer_state(opt, 1, "exp_avg"), NULL);
        nb_optimizer_free(opt);
    }
}
END_TEST

/* ---- closures and LBFGS -------------------------------------------------------------- */

typedef struct quad {
    nb_optimizer *opt;
    nb_tensor *p;
    int calls;
} quad;

/* f(p) = sum((p - 3)^2 * w), w = 1, 2, 3, ...: minimum at p = 3. */
static nb_status quad_closure(void *user, double *loss) {
    quad *q = user;
    q->calls++;
    ck_assert(nb_is_grad_enabled());
    nb_optimizer_zero_grad(q->opt);
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_arange(1, (double)nb_numel(q->p) + 1, 1, nb_dtype_of(q->p));
    nb_tensor *d = nb_add_scalar(q->p, -3.0);
    nb_tensor *l = nb_sum(nb_mul(nb_mul(d, d), w), NULL, 0, false);
    nb_status st = nb_backward(l);
    *loss = nb_item(l);
    nb_scope_end(s);
    return st;
}

START_TEST(test_lbfgs_and_closures) {
    for (int dt = 0; dt < 2; dt++) {
        quad q = {.p = leaf(NB_SHAPE(4), dt ? NB_F32 : NB_F64, 0.0)};
        q.opt = nb_lbfgs_params(&q.p, 1, (nb_lbfgs_options){.line_search_fn = NB_LINE_SEARCH_STRONG_WOLFE});
        NB_CK_NOTNULL(q.opt);
        NB_CK_FAILS(nb_optimizer_step(q.opt) == NB_OK, NB_ERR_INVALID_ARG); /* LBFGS needs a closure */
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "nb_optimizer_step_closure"));
        double loss = -1;
        NB_CK_OK(nb_optimizer_step_closure(q.opt, quad_closure, &q, &loss));
        ck_assert(loss == 9.0 * (1 + 2 + 3 + 4)); /* the loss before the step */
        NB_CK_OK(nb_optimizer_step_closure(q.opt, quad_closure, &q, &loss));
        double p[4], v;
        nb_test_values(q.p, p, 4);
        for (int i = 0; i < 4; i++) ck_assert_msg(fabs(p[i] - 3) < 1e-4, "p[%d] = %g", i, p[i]);
        NB_CK_OK(nb_optimizer_state_scalar(q.opt, 0, "func_evals", &v));
        ck_assert(v == q.calls);
        ck_assert_ptr_nonnull(nb_optimizer_state(q.opt, 0, "old_dirs"));
        nb_optimizer_free(q.opt);
    }
    /* any optimizer steps with a closure: evaluate, then step */
    quad q = {.p = leaf(NB_SHAPE(2), NB_F64, 0.0)};
    q.opt = nb_sgd_params(&q.p, 1, (nb_sgd_options){.lr = 0.1});
    double loss;
    NB_CK_OK(nb_optimizer_step_closure(q.opt, quad_closure, &q, &loss));
    ck_assert(loss == 27.0 && q.calls == 1);
    double p[2];
    nb_test_values(q.p, p, 2);
    ck_assert(fabs(p[0] - 0.6) < 1e-15 && fabs(p[1] - 1.2) < 1e-15); /* p -= 0.1 * 2 (p - 3) w */
    NB_CK_FAILS(nb_optimizer_step_closure(q.opt, NULL, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_optimizer_free(q.opt);
    /* LBFGS has one group */
    nb_tensor *a = q.p, *b = leaf(NB_SHAPE(2), NB_F64, 0.0);
    NB_CK_FAILS(nb_lbfgs_groups((nb_param_group[]){{&a, 1, NULL}, {&b, 1, NULL}}, 2, (nb_lbfgs_options){0}),
                NB_ERR_INVALID_ARG);
    nb_optimizer *l = nb_lbfgs_params(&a, 1, (nb_lbfgs_options){0});
    NB_CK_FAILS(nb_optimizer_add_param_group(l, &(nb_param_group){&b, 1, NULL}) == NB_OK, NB_ERR_INVALID_ARG);
    double max_eval;
    NB_CK_OK(nb_optimizer_get_group_option(l, 0, "max_eval", &max_eval));
    ck_assert(max_eval == 25); /* max_iter 20 * 5 / 4 */
    nb_optimizer_free(l);
}
END_TEST

/* ---- argument checks ------------------------------------------------------------------- */

static void ck_message(const char *part) {
    ck_assert_msg(strstr(nb_last_error(), part) != NULL, "\"%s\" not in \"%s\"", part, nb_last_error());
}

START_TEST(test_option_errors) {
    nb_tensor *p = leaf(NB_SHAPE(2), NB_F64, 1.0);
    const nb_status E = NB_ERR_INVALID_ARG;
    NB_CK_FAILS(nb_adadelta_params(&p, 1, (nb_adadelta_options){.rho = 1.5}), E);
    ck_message("adadelta: rho");
    NB_CK_FAILS(nb_adafactor_params(&p, 1, (nb_adafactor_options){.beta2_decay = 0.5}), E);
    ck_message("beta2_decay must be <= 0");
    NB_CK_FAILS(nb_adafactor_params(&p, 1, (nb_adafactor_options){.d = 0.5}), E);
    NB_CK_FAILS(nb_adafactor_params(&p, 1, (nb_adafactor_options){.eps = {-1, 0}}), E);
    NB_CK_FAILS(nb_adagrad_params(&p, 1, (nb_adagrad_options){.lr_decay = -1}), E);
    ck_message("lr_decay");
    NB_CK_FAILS(nb_adagrad_params(&p, 1, (nb_adagrad_options){.initial_accumulator_value = -1}), E);
    NB_CK_FAILS(nb_adamax_params(&p, 1, (nb_adamax_options){.betas = {1.0}}), E);
    NB_CK_FAILS(nb_asgd_params(&p, 1, (nb_asgd_options){.lambd = -1}), E);
    NB_CK_FAILS(nb_asgd_params(&p, 1, (nb_asgd_options){.alpha = NAN}), E);
    NB_CK_FAILS(nb_lbfgs_params(&p, 1, (nb_lbfgs_options){.max_iter = -1}), E);
    NB_CK_FAILS(nb_lbfgs_params(&p, 1, (nb_lbfgs_options){.history_size = -2}), E);
    NB_CK_FAILS(nb_lbfgs_params(&p, 1, (nb_lbfgs_options){.line_search_fn = 7}), E);
    ck_message("strong_wolfe");
    NB_CK_FAILS(nb_nadam_params(&p, 1, (nb_nadam_options){.momentum_decay = -1}), E);
    NB_CK_FAILS(nb_radam_params(&p, 1, (nb_radam_options){.betas = {0.9, 1.0}}), E);
    NB_CK_FAILS(nb_rmsprop_params(&p, 1, (nb_rmsprop_options){.alpha = -0.5}), E);
    NB_CK_FAILS(nb_rmsprop_params(&p, 1, (nb_rmsprop_options){.momentum = -0.5}), E);
    NB_CK_FAILS(nb_rprop_params(&p, 1, (nb_rprop_options){.etas = {1.5, 1.2}}), E);
    ck_message("etaminus");
    NB_CK_FAILS(nb_rprop_params(&p, 1, (nb_rprop_options){.step_sizes = {1.0, 0.5}}), E);
    NB_CK_FAILS(nb_lion_params(&p, 1, (nb_lion_options){.betas = {1.5}}), E);
    NB_CK_FAILS(nb_muon_params(&p, 1, (nb_muon_options){.ns_steps = 100}), E);
    ck_message("ns_steps");
    NB_CK_FAILS(nb_muon_params(&p, 1, (nb_muon_options){.adjust_lr_fn = 9}), E);
    NB_CK_FAILS(nb_muon_params(&p, 1, (nb_muon_options){.nesterov = 5}), E);
    NB_CK_FAILS(nb_muon_params(&p, 1, (nb_muon_options){.adamw_betas = {1.0}}), E);
    NB_CK_FAILS(nb_sgd_groups(NULL, 1, (nb_sgd_options){.lr = 0.1}), E);
    NB_CK_FAILS(nb_sgd_groups((nb_param_group[]){{&p, 0, NULL}}, 1, (nb_sgd_options){.lr = 0.1}), E);
    ck_message("empty parameter list");
    NB_CK_FAILS(nb_sgd_groups((nb_param_group[]){{&p, 1, NULL}, {&p, 1, NULL}}, 2, (nb_sgd_options){.lr = 0.1}), E);
    NB_CK_FAILS(nb_sgd_groups((nb_param_group[]){{&p, 1, &(nb_sgd_options){.momentum = -1}}}, 1,
                              (nb_sgd_options){.lr = 0.1}),
                E);
    /* SGD's lr left 0 is PyTorch's 1e-3; NB_ZERO asks for 0, which PyTorch allows */
    nb_optimizer *zero = nb_sgd_params(&p, 1, (nb_sgd_options){.lr = NB_ZERO});
    NB_CK_NOTNULL(zero);
    ck_assert(nb_optimizer_get_lr(zero) == 0.0);
    nb_optimizer_free(zero);
}
END_TEST

/* ---- optim/OPTIM.md is complete ------------------------------------------------------- */

START_TEST(test_optim_md_complete) {
    char *md = nb_test_slurp(NB_SOURCE_ROOT "/optim/OPTIM.md", NULL);
    const nb_optim_desc *kinds[] = {&nb_sgd_desc,     &nb_adam_desc,    &nb_adamw_desc,  &nb_adadelta_desc,
                                    &nb_adafactor_desc, &nb_adagrad_desc, &nb_adamax_desc, &nb_asgd_desc,
                                    &nb_lbfgs_desc,   &nb_nadam_desc,   &nb_radam_desc,  &nb_rmsprop_desc,
                                    &nb_rprop_desc,   &nb_lion_desc,    &nb_muon_desc};
    char want[128];
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        const nb_optim_desc *d = kinds[k];
        snprintf(want, sizeof want, "`nb_%s`", d->op);
        char *row = strstr(md, want); /* the kind's row */
        ck_assert_msg(row != NULL, "OPTIM.md lacks %s", want);
        char *end = strchr(row, '\n');
        *end = 0;
        for (int f = 0; f < d->n_fields; f++) {
            snprintf(want, sizeof want, "`%s`", d->fields[f].name);
            ck_assert_msg(strstr(row, want) != NULL, "OPTIM.md's %s row lacks the option %s", d->name, want);
        }
        for (int t = 0; t < d->n_tensors; t++) {
            snprintf(want, sizeof want, "`%s`", d->tensor_names[t]);
            ck_assert_msg(strstr(row, want) != NULL, "OPTIM.md's %s row lacks the state %s", d->name, want);
        }
        for (int t = 0; t < d->n_scalars; t++) {
            snprintf(want, sizeof want, "`%s`", d->scalar_names[t]);
            ck_assert_msg(strstr(row, want) != NULL, "OPTIM.md's %s row lacks the state %s", d->name, want);
        }
        *end = '\n';
    }
    static const char *const scheds[] = {"LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
                                         "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
                                         "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR",
                                         "ReduceLROnPlateau", "SequentialLR", "ChainedScheduler"};
    for (size_t k = 0; k < sizeof scheds / sizeof *scheds; k++) {
        snprintf(want, sizeof want, "| `%s` |", scheds[k]);
        ck_assert_msg(strstr(md, want) != NULL, "OPTIM.md lacks the scheduler %s", scheds[k]);
    }
    free(md);
}
END_TEST

Suite *nb_suite_optim_groups(void) {
    Suite *s = suite_create("optim_groups");
    TCase *tc = tcase_create("groups");
    tcase_add_test(tc, test_group_inheritance);
    tcase_add_test(tc, test_groups_equal_separate_optimizers);
    tcase_add_test(tc, test_decay_split);
    tcase_add_test(tc, test_muon_routing);
    tcase_add_test(tc, test_muon_orthogonalises);
    tcase_add_test(tc, test_adafactor_state_shapes);
    tcase_add_test(tc, test_scalar_state);
    tcase_add_test(tc, test_float32_and_skipped);
    tcase_add_test(tc, test_lbfgs_and_closures);
    tcase_add_test(tc, test_option_errors);
    tcase_add_test(tc, test_optim_md_complete);
    suite_add_tcase(s, tc);
    return s;
}
