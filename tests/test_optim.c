/* test_optim.c - SGD, Adam and AdamW against reference loops written here in
 * plain C doubles from torch.optim's documented update rules (the
 * _single_tensor_sgd/_single_tensor_adam implementations), run for a few
 * steps on float64 parameters whose gradients are set exactly (the gradient
 * of sum(p * c) is c); plus defaults, state accessors, skipped parameters
 * and the error paths.
 */
#include <string.h>

#include "nb_test.h"

#define N 4
#define STEPS 3
#define RTOL 1e-12
#define ATOL 1e-15

static const double P0[N] = {1.0, -2.0, 0.5, 3.0};
static const double GRADS[STEPS][N] = {{0.3, -1.2, 2.0, 0.05}, {-0.4, -0.9, 1.5, 0.6}, {0.2, 0.1, -0.7, 1.1}};
/* Gradients that shrink after the first step, so that with beta2 = 0.5
 * exp_avg_sq falls below its running max and amsgrad matters. */
static const double AMS_GRADS[STEPS][N] = {{3.0, -2.0, 1.0, 0.5}, {0.1, -0.2, 0.05, 0.4}, {0.2, 0.1, -0.3, 0.45}};

/* A caller-owned float64 leaf that requires grad (no scope is open in these tests). */
static nb_tensor *new_param(const double *v, int n) {
    nb_tensor *p = nb_from_data(v, NB_SHAPE(n), NB_F64);
    NB_CK_NOTNULL(p);
    NB_CK_OK(nb_set_requires_grad(p, true));
    return p;
}

/* Sets p's gradient to exactly c: d/dp sum(p * c) = c. */
static void set_grad(nb_optimizer *opt, nb_tensor *p, const double *c) {
    nb_optimizer_zero_grad(opt);
    nb_scope *s = nb_scope_begin();
    nb_tensor *ct = nb_from_data(c, nb_dim(p), nb_shape(p), NB_F64);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(p, ct), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(p), c, nb_numel(p), 0, 0);
    nb_scope_end(s);
}

/* ---- reference loops (torch.optim implementations, element by element) ---- */

/* One SGD step; t is the 1-based step (t == 1 starts the momentum buffer). */
static void ref_sgd(const nb_sgd_options *o, double *p, double *buf, int t, const double *grad) {
    for (int j = 0; j < N; j++) {
        double g = o->maximize ? -grad[j] : grad[j];
        if (o->weight_decay != 0) g = g + o->weight_decay * p[j];
        if (o->momentum != 0) {
            buf[j] = t == 1 ? g : o->momentum * buf[j] + (1 - o->dampening) * g;
            g = o->nesterov ? g + o->momentum * buf[j] : buf[j];
        }
        p[j] = p[j] - o->lr * g;
    }
}

typedef struct adam_ref {
    double lr, beta1, beta2, eps, wd;
    bool decoupled, amsgrad, maximize;
    double m[N], v[N], vmax[N];
} adam_ref;

static void ref_adam(adam_ref *r, double *p, int t, const double *grad) {
    double bc1 = 1 - pow(r->beta1, t), bc2 = 1 - pow(r->beta2, t);
    double step_size = r->lr / bc1, bc2_sqrt = sqrt(bc2);
    for (int j = 0; j < N; j++) {
        double g = r->maximize ? -grad[j] : grad[j];
        if (r->decoupled) p[j] = p[j] * (1 - r->lr * r->wd);
        else if (r->wd != 0) g = g + r->wd * p[j];
        r->m[j] = r->beta1 * r->m[j] + (1 - r->beta1) * g;
        r->v[j] = r->beta2 * r->v[j] + (1 - r->beta2) * g * g;
        double v = r->v[j];
        if (r->amsgrad) v = r->vmax[j] = fmax(r->vmax[j], r->v[j]);
        double denom = sqrt(v) / bc2_sqrt + r->eps;
        p[j] = p[j] - step_size * r->m[j] / denom;
    }
}

/* ---- SGD -------------------------------------------------------------------------- */

static void run_sgd(nb_sgd_options o) {
    nb_tensor *p = new_param(P0, N);
    nb_optimizer *opt = nb_sgd_params(&p, 1, o);
    NB_CK_NOTNULL(opt);
    ck_assert_str_eq(nb_optimizer_kind(opt), "SGD");
    double ref[N], buf[N] = {0};
    memcpy(ref, P0, sizeof ref);
    for (int t = 1; t <= STEPS; t++) {
        set_grad(opt, p, GRADS[t - 1]);
        NB_CK_OK(nb_optimizer_step(opt));
        ref_sgd(&o, ref, buf, t, GRADS[t - 1]);
        nb_ck_close(p, ref, N, ATOL, RTOL);
        ck_assert_int_eq(nb_optimizer_step_count(opt, 0), t);
        nb_tensor *b = nb_optimizer_state(opt, 0, "momentum_buffer");
        if (o.momentum != 0) nb_ck_close(b, buf, N, ATOL, RTOL);
        else ck_assert_ptr_null(b);
    }
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "exp_avg"));
    nb_optimizer_free(opt);
}

START_TEST(test_sgd_plain) { run_sgd((nb_sgd_options){.lr = 0.1}); }
END_TEST

START_TEST(test_sgd_momentum_dampening) { run_sgd((nb_sgd_options){.lr = 0.05, .momentum = 0.9, .dampening = 0.1}); }
END_TEST

START_TEST(test_sgd_nesterov) { run_sgd((nb_sgd_options){.lr = 0.05, .momentum = 0.9, .nesterov = true}); }
END_TEST

START_TEST(test_sgd_weight_decay) { run_sgd((nb_sgd_options){.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01}); }
END_TEST

START_TEST(test_sgd_maximize) {
    run_sgd((nb_sgd_options){.lr = 0.1, .momentum = 0.3, .weight_decay = 0.1, .maximize = true});
    run_sgd((nb_sgd_options){.lr = 0.2, .maximize = true});
}
END_TEST

/* set_lr takes effect at the next step; a loaded momentum buffer is history. */
START_TEST(test_sgd_set_lr_and_init_state) {
    nb_sgd_options o = {.lr = 0.1, .momentum = 0.9, .dampening = 0.5};
    nb_tensor *p = new_param(P0, N);
    nb_optimizer *opt = nb_sgd_params(&p, 1, o);
    NB_CK_NOTNULL(opt);
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "momentum_buffer"));
    NB_CK_OK(nb_optimizer_init_state(opt, 0, 5));
    nb_tensor *b = nb_optimizer_state(opt, 0, "momentum_buffer");
    NB_CK_NOTNULL(b);
    const double loaded[N] = {0.5, -0.25, 1.0, 0.0};
    NB_CK_OK(nb_copy_from_host(b, loaded, sizeof loaded));
    ck_assert_int_eq(nb_optimizer_step_count(opt, 0), 5);
    ck_assert_double_eq(nb_optimizer_get_lr(opt), 0.1);
    NB_CK_OK(nb_optimizer_set_lr(opt, 0.02));
    ck_assert_double_eq(nb_optimizer_get_lr(opt), 0.02);
    ck_assert_double_eq(nb_optimizer_sgd_options(opt).lr, 0.02);
    NB_CK_FAILS(nb_optimizer_set_lr(opt, -1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_optimizer_set_lr(opt, NAN) == NB_OK, NB_ERR_INVALID_ARG);
    set_grad(opt, p, GRADS[0]);
    NB_CK_OK(nb_optimizer_step(opt));
    double ref[N], buf[N];
    memcpy(ref, P0, sizeof ref);
    memcpy(buf, loaded, sizeof buf);
    o.lr = 0.02;
    ref_sgd(&o, ref, buf, 6, GRADS[0]); /* t > 1: b = 0.9 b + 0.5 g */
    nb_ck_close(p, ref, N, ATOL, RTOL);
    nb_ck_close(b, buf, N, ATOL, RTOL);
    ck_assert_int_eq(nb_optimizer_step_count(opt, 0), 6);
    nb_optimizer_free(opt);
}
END_TEST

/* A transposed (non-contiguous) leaf is updated through its strides. */
START_TEST(test_sgd_noncontiguous_param) {
    const double xv[6] = {1, 2, 3, 4, 5, 6}; /* x [2, 3] */
    nb_tensor *x = nb_from_data(xv, NB_SHAPE(2, 3), NB_F64);
    nb_tensor *t = nb_transpose(x, 0, 1); /* [3, 2]: 1 4 / 2 5 / 3 6 */
    NB_CK_NOTNULL(t);
    ck_assert(!nb_is_contiguous(t));
    NB_CK_OK(nb_set_requires_grad(t, true));
    nb_optimizer *opt = nb_sgd_params(&t, 1, (nb_sgd_options){.lr = 0.5});
    NB_CK_NOTNULL(opt);
    const double c[6] = {1, -2, 0.5, 4, -1, 2};
    set_grad(opt, t, c);
    NB_CK_OK(nb_optimizer_step(opt));
    nb_ck_close(t, (const double[]){1 - 0.5, 4 + 1, 2 - 0.25, 5 - 2, 3 + 0.5, 6 - 1}, 6, 0, 0);
    nb_ck_close(x, (const double[]){0.5, 1.75, 3.5, 5, 3, 5}, 6, 0, 0);
    nb_optimizer_free(opt);
}
END_TEST

/* ---- Adam / AdamW ----------------------------------------------------------------- */

static void run_adam(bool adamw, nb_adam_options o, adam_ref r, const double (*grads)[N]) {
    nb_tensor *p = new_param(P0, N);
    nb_optimizer *opt = adamw ? nb_adamw_params(&p, 1, o) : nb_adam_params(&p, 1, o);
    NB_CK_NOTNULL(opt);
    ck_assert_str_eq(nb_optimizer_kind(opt), adamw ? "AdamW" : "Adam");
    r.decoupled = adamw;
    double ref[N];
    memcpy(ref, P0, sizeof ref);
    for (int t = 1; t <= STEPS; t++) {
        set_grad(opt, p, grads[t - 1]);
        NB_CK_OK(nb_optimizer_step(opt));
        ref_adam(&r, ref, t, grads[t - 1]);
        nb_ck_close(p, ref, N, ATOL, RTOL);
        nb_ck_close(nb_optimizer_state(opt, 0, "exp_avg"), r.m, N, ATOL, RTOL);
        nb_ck_close(nb_optimizer_state(opt, 0, "exp_avg_sq"), r.v, N, ATOL, RTOL);
        if (r.amsgrad) nb_ck_close(nb_optimizer_state(opt, 0, "max_exp_avg_sq"), r.vmax, N, ATOL, RTOL);
        else ck_assert_ptr_null(nb_optimizer_state(opt, 0, "max_exp_avg_sq"));
        ck_assert_int_eq(nb_optimizer_step_count(opt, 0), t);
    }
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "momentum_buffer"));
    ck_assert_ptr_null(nb_optimizer_state(opt, 0, "no_such_state"));
    nb_optimizer_free(opt);
}

/* The reference's hyperparameters, every one spelled out (PyTorch's defaults
 * are betas (0.9, 0.999), eps 1e-8). */
static adam_ref ref_of(double lr, double beta1, double beta2, double eps, double wd, bool amsgrad,
                       bool maximize) {
    return (adam_ref){.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .wd = wd,
                      .amsgrad = amsgrad, .maximize = maximize};
}

START_TEST(test_adam_defaults) {
    run_adam(false, (nb_adam_options){.lr = 0.1}, ref_of(0.1, 0.9, 0.999, 1e-8, 0, false, false), GRADS);
    run_adam(false, (nb_adam_options){0}, ref_of(1e-3, 0.9, 0.999, 1e-8, 0, false, false), GRADS); /* lr default 1e-3 */
}
END_TEST

START_TEST(test_adam_weight_decay) {
    run_adam(false, (nb_adam_options){.lr = 0.1, .weight_decay = 0.1}, ref_of(0.1, 0.9, 0.999, 1e-8, 0.1, false, false), GRADS);
}
END_TEST

START_TEST(test_adamw) {
    /* weight_decay left 0 is AdamW's default 1e-2; NB_ZERO asks for none */
    run_adam(true, (nb_adam_options){.lr = 0.1}, ref_of(0.1, 0.9, 0.999, 1e-8, 1e-2, false, false), GRADS);
    run_adam(true, (nb_adam_options){.lr = 0.1, .weight_decay = NB_ZERO}, ref_of(0.1, 0.9, 0.999, 1e-8, 0, false, false), GRADS);
    run_adam(true, (nb_adam_options){.lr = 0.05, .weight_decay = 0.3}, ref_of(0.05, 0.9, 0.999, 1e-8, 0.3, false, false), GRADS);
}
END_TEST

START_TEST(test_adam_amsgrad) {
    run_adam(false, (nb_adam_options){.lr = 0.1, .betas = {0.9, 0.5}, .amsgrad = true},
             ref_of(0.1, 0.9, 0.5, 1e-8, 0, true, false), AMS_GRADS);
    run_adam(true, (nb_adam_options){.lr = 0.1, .betas = {0.8, 0.5}, .weight_decay = 0.05, .amsgrad = true,
                                     .maximize = true},
             ref_of(0.1, 0.8, 0.5, 1e-8, 0.05, true, true),
             AMS_GRADS);
}
END_TEST

START_TEST(test_adam_maximize_and_explicit_zero) {
    run_adam(false, (nb_adam_options){.lr = 0.1, .maximize = true, .eps = 1e-6},
             ref_of(0.1, 0.9, 0.999, 1e-6, 0, false, true), GRADS);
    /* beta1 = 0 (no first-moment averaging) through NB_ZERO */
    run_adam(false, (nb_adam_options){.lr = 0.1, .betas = {NB_ZERO, 0.99}},
             ref_of(0.1, 0, 0.99, 1e-8, 0, false, false), GRADS);
}
END_TEST

START_TEST(test_adam_options_resolved) {
    nb_tensor *p = new_param(P0, N);
    nb_optimizer *a = nb_adam_params(&p, 1, (nb_adam_options){0});
    nb_adam_options o = nb_optimizer_adam_options(a);
    ck_assert_double_eq(o.lr, 1e-3);
    ck_assert_double_eq(o.betas[0], 0.9);
    ck_assert_double_eq(o.betas[1], 0.999);
    ck_assert_double_eq(o.eps, 1e-8);
    ck_assert_double_eq(o.weight_decay, 0);
    nb_optimizer *w = nb_adamw_params(&p, 1, (nb_adam_options){.eps = NB_ZERO});
    o = nb_optimizer_adam_options(w);
    ck_assert_double_eq(o.weight_decay, 1e-2);
    ck_assert(o.eps == 0 && !signbit(o.eps));
    nb_clear_error();
    nb_optimizer_sgd_options(w);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    nb_optimizer_free(a);
    nb_optimizer_free(w);
}
END_TEST

/* Parameters without a gradient are skipped, their state left uncreated. */
START_TEST(test_skip_params_without_grad) {
    nb_tensor *p1 = new_param(P0, N), *p2 = new_param(P0, N);
    nb_optimizer *opt = nb_adam_params((nb_tensor *[]){p1, p2}, 2, (nb_adam_options){.lr = 0.1});
    NB_CK_NOTNULL(opt);
    ck_assert_int_eq(nb_optimizer_num_params(opt), 2);
    ck_assert_ptr_eq(nb_optimizer_param(opt, 1), p2);
    set_grad(opt, p1, GRADS[0]);
    ck_assert_ptr_null(nb_tensor_grad(p2));
    NB_CK_OK(nb_optimizer_step(opt));
    adam_ref r = ref_of(0.1, 0.9, 0.999, 1e-8, 0, false, false);
    double ref[N];
    memcpy(ref, P0, sizeof ref);
    ref_adam(&r, ref, 1, GRADS[0]);
    nb_ck_close(p1, ref, N, ATOL, RTOL);
    nb_ck_close(p2, P0, N, 0, 0);
    ck_assert_int_eq(nb_optimizer_step_count(opt, 0), 1);
    ck_assert_int_eq(nb_optimizer_step_count(opt, 1), 0);
    ck_assert_ptr_null(nb_optimizer_state(opt, 1, "exp_avg"));
    ck_assert_int_eq(nb_optimizer_step_count(opt, 2), -1);
    nb_optimizer_zero_grad(opt);
    ck_assert_ptr_null(nb_tensor_grad(p1));
    nb_optimizer_free(opt);
}
END_TEST

/* The brief's shape: nb_adam over a module, which the optimizer outlives. */
START_TEST(test_adam_on_module) {
    nb_module *net = nb_nn_linear_ex(3, 2, true, NB_F64);
    NB_CK_NOTNULL(net);
    nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
    NB_CK_NOTNULL(opt);
    ck_assert_int_eq(nb_optimizer_num_params(opt), 2);
    nb_tensor *w = nb_module_get(net, "weight");
    ck_assert_ptr_eq(nb_optimizer_param(opt, 0), w);
    double w0[6], w1[6];
    nb_test_values(w, w0, 6);
    nb_optimizer_zero_grad(opt);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((const double[]){1, -2, 0.5, 0, 1, 3}, NB_SHAPE(2, 3), NB_F64);
    NB_CK_OK(nb_backward(nb_sum(nb_forward(net, x), NULL, 0, false)));
    nb_scope_end(s);
    NB_CK_OK(nb_optimizer_step(opt));
    /* dW[j, :] = column sums of x = [1, -1, 3.5] for both rows */
    const double g[6] = {1, -1, 3.5, 1, -1, 3.5};
    nb_test_values(w, w1, 6);
    for (int j = 0; j < 6; j++) {
        double m = (1 - 0.9) * g[j], v = (1 - 0.999) * g[j] * g[j];
        double want = w0[j] - (1e-3 / (1 - 0.9)) * m / (sqrt(v) / sqrt(1 - 0.999) + 1e-8);
        ck_assert_msg(fabs(w1[j] - want) <= RTOL * fabs(want) + ATOL, "w[%d]: %.17g vs %.17g", j, w1[j], want);
    }
    nb_module_free(net); /* the optimizer keeps its own references */
    ck_assert_int_eq(nb_dim(nb_optimizer_param(opt, 0)), 2);
    nb_optimizer_free(opt);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------- */

static void ck_message(const char *part) {
    ck_assert_msg(strstr(nb_last_error(), part) != NULL, "\"%s\" not in \"%s\"", part, nb_last_error());
}

START_TEST(test_errors) {
    nb_tensor *p = new_param(P0, N);
    NB_CK_FAILS(nb_adam_params(&p, 1, (nb_adam_options){.lr = -1}), NB_ERR_INVALID_ARG);
    ck_message("adam: lr must be >= 0 (got -1)");
    NB_CK_FAILS(nb_adamw_params(&p, 1, (nb_adam_options){.lr = -1}), NB_ERR_INVALID_ARG);
    ck_message("adamw: lr");
    NB_CK_FAILS(nb_adam_params(&p, 1, (nb_adam_options){.lr = NAN}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adam_params(&p, 1, (nb_adam_options){.betas = {1.0, 0.999}}), NB_ERR_INVALID_ARG);
    ck_message("betas[0]");
    NB_CK_FAILS(nb_adam_params(&p, 1, (nb_adam_options){.betas = {0.9, -0.5}}), NB_ERR_INVALID_ARG);
    ck_message("betas[1]");
    NB_CK_FAILS(nb_adam_params(&p, 1, (nb_adam_options){.eps = -1e-8}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adamw_params(&p, 1, (nb_adam_options){.weight_decay = -0.1}), NB_ERR_INVALID_ARG);
    ck_message("weight_decay");

    nb_optimizer *dflt = nb_sgd_params(&p, 1, (nb_sgd_options){.momentum = 0.9}); /* lr left 0: PyTorch's 1e-3 */
    NB_CK_NOTNULL(dflt);
    ck_assert(nb_optimizer_get_lr(dflt) == 1e-3);
    nb_optimizer_free(dflt);
    NB_CK_FAILS(nb_sgd_params(&p, 1, (nb_sgd_options){.lr = -0.1}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sgd_params(&p, 1, (nb_sgd_options){.lr = 0.1, .nesterov = true}), NB_ERR_INVALID_ARG);
    ck_message("nesterov");
    NB_CK_FAILS(nb_sgd_params(&p, 1, (nb_sgd_options){.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sgd_params(&p, 1, (nb_sgd_options){.lr = 0.1, .momentum = -0.9}), NB_ERR_INVALID_ARG);
    ck_message("momentum");
    NB_CK_FAILS(nb_sgd_params(&p, 1, (nb_sgd_options){.lr = 0.1, .weight_decay = -1}), NB_ERR_INVALID_ARG);

    /* parameter lists */
    NB_CK_FAILS(nb_adam_params(&p, 0, (nb_adam_options){0}), NB_ERR_INVALID_ARG);
    ck_message("empty parameter list");
    NB_CK_FAILS(nb_adam_params(NULL, 1, (nb_adam_options){0}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adam_params((nb_tensor *[]){p, p}, 2, (nb_adam_options){0}), NB_ERR_INVALID_ARG);
    nb_tensor *ints = nb_zeros(NB_SHAPE(2), NB_I32);
    NB_CK_FAILS(nb_sgd_params(&ints, 1, (nb_sgd_options){.lr = 1}), NB_ERR_DTYPE);
    nb_scope *s = nb_scope_begin();
    nb_tensor *nonleaf = nb_mul_scalar(p, 2.0);
    NB_CK_NOTNULL(nonleaf);
    NB_CK_FAILS(nb_adam_params(&nonleaf, 1, (nb_adam_options){0}), NB_ERR_INVALID_ARG);
    ck_message("non-leaf");
    nb_scope_end(s);
    NB_CK_FAILS(nb_adam(NULL, (nb_adam_options){0}), NB_ERR_INVALID_ARG);
    nb_module *relu = nb_nn_relu();
    NB_CK_FAILS(nb_sgd(relu, (nb_sgd_options){.lr = 1}), NB_ERR_INVALID_ARG);
    ck_message("empty parameter list");
    nb_module_free(relu);

    NB_CK_FAILS(nb_optimizer_step(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_optimizer_zero_grad(NULL);
    nb_optimizer_free(NULL);
    ck_assert_ptr_null(nb_optimizer_state(NULL, 0, "exp_avg"));
}
END_TEST

Suite *nb_suite_optim(void) {
    Suite *s = suite_create("optim");
    TCase *sgd = tcase_create("sgd");
    tcase_add_test(sgd, test_sgd_plain);
    tcase_add_test(sgd, test_sgd_momentum_dampening);
    tcase_add_test(sgd, test_sgd_nesterov);
    tcase_add_test(sgd, test_sgd_weight_decay);
    tcase_add_test(sgd, test_sgd_maximize);
    tcase_add_test(sgd, test_sgd_set_lr_and_init_state);
    tcase_add_test(sgd, test_sgd_noncontiguous_param);
    suite_add_tcase(s, sgd);
    TCase *adam = tcase_create("adam");
    tcase_add_test(adam, test_adam_defaults);
    tcase_add_test(adam, test_adam_weight_decay);
    tcase_add_test(adam, test_adamw);
    tcase_add_test(adam, test_adam_amsgrad);
    tcase_add_test(adam, test_adam_maximize_and_explicit_zero);
    tcase_add_test(adam, test_adam_options_resolved);
    tcase_add_test(adam, test_skip_params_without_grad);
    tcase_add_test(adam, test_adam_on_module);
    suite_add_tcase(s, adam);
    TCase *err = tcase_create("errors");
    tcase_add_test(err, test_errors);
    suite_add_tcase(s, err);
    return s;
}
