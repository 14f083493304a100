/* test_optim_ref.c - every optimizer and scheduler against PyTorch's
 * float64 trajectories (tests/optim_ref/optim_ref.h, printed by
 * tests/optim_ref/gen_ref.py; the header names the torch that made it):
 *   - each optimizer configuration: 100 steps on a 4-8-3 tanh MLP with an
 *     MSE loss on fixed data (LBFGS also on the Rosenbrock function), the
 *     loss before every step and the final parameters within 1e-6
 *     relative (plus 1e-12 absolute) of PyTorch's (LBFGS on the Rosenbrock
 *     function and a linear regression: gen_ref.py says why not the MLP);
 *   - AdamW with BERT's decay / no-decay split (nb_decay_split_module) and
 *     a head group added later, against PyTorch's three param groups;
 *   - each scheduler configuration: the lrs (and cycled momenta) of two
 *     param groups over 200 steps, to the same tolerance;
 *   - saving a checkpoint mid-run and resuming in fresh objects continues
 *     bit for bit, for every optimizer and every scheduler.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"
#include "optim_ref/optim_ref.h"

#define RTOL 1e-6
#define ATOL 1e-12
#define RESUME_AT 37

static char dir[64];

static void tmp_setup(void) {
    strcpy(dir, "/tmp/nb_oref_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void tmp_teardown(void) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.') unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static const char *ckpt_path(void) {
    static char p[256];
    snprintf(p, sizeof p, "%s/run.safetensors", dir);
    return p;
}

static void ck_near(double got, double want, const char *what, const char *name, int i) {
    ck_assert_msg(fabs(got - want) <= RTOL * fabs(want) + ATOL, "%s %s[%d]: nabla %.17g, PyTorch %.17g", name, what, i,
                  got, want);
}

/* ---- the problems ------------------------------------------------------------------ */

static nb_tensor *passthrough(nb_module *m, nb_tensor *x) {
    (void)m;
    return x;
}
static const nb_module_ops holder_ops = {"ParamHolder", passthrough, NULL, NULL};

/* A module holding float64 parameters named names[i] of the given sizes (1-D). */
static nb_module *holder(const char *const *names, const int64_t *sizes, const double *const *values, int n) {
    nb_module *m = nb_module_new(&holder_ops, NULL);
    NB_CK_NOTNULL(m);
    for (int i = 0; i < n; i++) {
        nb_tensor *t = values ? nb_from_data(values[i], 1, &sizes[i], NB_F64) : nb_zeros(1, &sizes[i], NB_F64);
        NB_CK_NOTNULL(t);
        NB_CK_OK(nb_module_register_parameter(m, names[i], t));
    }
    return m;
}

/* Copies values (C order, parameter after parameter) into m's parameters. */
static void load_params(nb_module *m, const double *values, int n_expected) {
    nb_named_tensor ps[8];
    int n = nb_module_parameters(m, ps, 8), off = 0;
    for (int i = 0; i < n; i++) {
        NB_CK_OK(nb_copy_from_host(ps[i].tensor, values + off, sizeof(double) * (size_t)nb_numel(ps[i].tensor)));
        off += (int)nb_numel(ps[i].tensor);
    }
    ck_assert_int_eq(off, n_expected);
}

enum { MLP, ROSENBROCK, LINEAR, GROUPED };

typedef struct problem {
    int kind;
    bool negate; /* a maximize configuration: the objective is -loss */
    nb_module *m;
    nb_tensor *x, *y;
    nb_optimizer *opt;
} problem;

static void problem_init(problem *pb, int kind, bool negate) {
    *pb = (problem){.kind = kind, .negate = negate};
    if (kind == ROSENBROCK) {
        pb->m = holder((const char *[]){"x"}, (int64_t[]){2}, (const double *[]){REF_ROSEN0}, 1);
        return;
    }
    if (kind == MLP) {
        pb->m = nb_nn_sequential(nb_nn_linear_ex(4, 8, true, NB_F64), nb_nn_tanh(),
                                 nb_nn_linear_ex(8, 3, true, NB_F64));
        NB_CK_NOTNULL(pb->m);
        load_params(pb->m, REF_INIT, 67);
    } else if (kind == LINEAR) {
        pb->m = nb_nn_linear_ex(4, 3, true, NB_F64);
        NB_CK_NOTNULL(pb->m);
        load_params(pb->m, REF_LINEAR_INIT, 15);
    } else {
        pb->m = nb_nn_sequential(nb_nn_linear_ex(4, 8, true, NB_F64),
                                 nb_nn_layer_norm_ex(1, (int64_t[]){8}, 0, true, NB_F64),
                                 nb_nn_tanh(), nb_nn_linear_ex(8, 3, true, NB_F64));
        NB_CK_NOTNULL(pb->m);
        load_params(pb->m, REF_GROUPED_INIT, 83);
    }
    pb->x = nb_from_data(REF_X, NB_SHAPE(16, 4), NB_F64);
    pb->y = nb_from_data(REF_Y, NB_SHAPE(16, 3), NB_F64);
}

static void problem_free(problem *pb) {
    nb_optimizer_free(pb->opt);
    nb_module_free(pb->m);
}

/* The loss (scoped): MSE of the network, or Rosenbrock's (1 - x0)^2 + 100 (x1 - x0^2)^2. */
static nb_tensor *objective(problem *pb) {
    if (pb->kind != ROSENBROCK) return nb_mse_loss(nb_forward(pb->m, pb->x), pb->y, NB_REDUCTION_MEAN);
    nb_tensor *x = nb_module_get(pb->m, "x"), *x0 = nb_narrow(x, 0, 0, 1), *x1 = nb_narrow(x, 0, 1, 1);
    nb_tensor *a = nb_sum(nb_pow_scalar(nb_add_scalar(nb_neg(x0), 1.0), 2.0), NULL, 0, false);
    nb_tensor *b = nb_sum(nb_pow_scalar(nb_sub(x1, nb_pow_scalar(x0, 2.0)), 2.0), NULL, 0, false);
    return nb_add(a, nb_mul_scalar(b, 100.0));
}

static nb_status closure(void *user, double *loss) {
    problem *pb = user;
    nb_optimizer_zero_grad(pb->opt);
    nb_scope *s = nb_scope_begin();
    nb_tensor *l = objective(pb);
    nb_status st = l ? nb_backward(pb->negate ? nb_neg(l) : l) : nb_last_status();
    if (!st) *loss = nb_item(l);
    nb_scope_end(s);
    return st;
}

/* Steps from..to-1, writing the loss before each step to losses[t]. */
static void run_steps(problem *pb, int from, int to, double *losses) {
    for (int t = from; t < to; t++) {
        if (!strcmp(nb_optimizer_kind(pb->opt), "LBFGS")) {
            NB_CK_OK(nb_optimizer_step_closure(pb->opt, closure, pb, &losses[t]));
        } else {
            NB_CK_OK(closure(pb, &losses[t]));
            NB_CK_OK(nb_optimizer_step(pb->opt));
        }
    }
}

static double final_loss(problem *pb) {
    nb_scope *s = nb_scope_begin();
    double l = nb_item(objective(pb));
    nb_scope_end(s);
    return l;
}

static void params_of(nb_module *m, double *out, int n) {
    nb_named_tensor ps[8];
    int k = nb_module_parameters(m, ps, 8), off = 0;
    for (int i = 0; i < k; i++) off += (int)nb_test_values(ps[i].tensor, out + off, n - off);
    ck_assert_int_eq(off, n);
}

/* ---- optimizer configurations (the same as gen_ref.py's) ------------------------------ */

typedef nb_optimizer *(*make_fn)(problem *pb);

static nb_optimizer *sgd_nesterov(problem *pb) {
    return nb_sgd(pb->m, (nb_sgd_options){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-3});
}
static nb_optimizer *sgd_dampening_maximize(problem *pb) {
    return nb_sgd(pb->m, (nb_sgd_options){.lr = 0.05, .momentum = 0.5, .dampening = 0.3, .maximize = true});
}
static nb_optimizer *adam_amsgrad(problem *pb) {
    return nb_adam(pb->m, (nb_adam_options){.lr = 1e-2, .amsgrad = true, .weight_decay = 1e-2});
}
static nb_optimizer *adam_decoupled(problem *pb) {
    return nb_adam(pb->m, (nb_adam_options){.lr = 1e-2, .weight_decay = 0.05, .decoupled_weight_decay = true});
}
static nb_optimizer *adamw(problem *pb) { return nb_adamw(pb->m, (nb_adam_options){.lr = 1e-2, .weight_decay = 0.1}); }
static nb_optimizer *adadelta(problem *pb) {
    return nb_adadelta(pb->m, (nb_adadelta_options){.lr = 1.0, .rho = 0.9, .weight_decay = 1e-3});
}
static nb_optimizer *adadelta_maximize(problem *pb) {
    return nb_adadelta(pb->m, (nb_adadelta_options){.lr = 0.5, .maximize = true});
}
static nb_optimizer *adafactor(problem *pb) { return nb_adafactor(pb->m, (nb_adafactor_options){0}); }
static nb_optimizer *adafactor_wd_eps(problem *pb) {
    return nb_adafactor(pb->m, (nb_adafactor_options){
                                   .lr = 0.02, .eps = {1e-30, 1e-3}, .d = 1.5, .weight_decay = 0.05, .maximize = true});
}
static nb_optimizer *adagrad(problem *pb) {
    return nb_adagrad(pb->m, (nb_adagrad_options){
                                 .lr = 0.1, .lr_decay = 0.01, .weight_decay = 1e-3, .initial_accumulator_value = 0.1});
}
static nb_optimizer *adamax(problem *pb) {
    return nb_adamax(pb->m, (nb_adamax_options){.lr = 0.02, .weight_decay = 1e-3});
}
static nb_optimizer *asgd(problem *pb) {
    return nb_asgd(pb->m, (nb_asgd_options){.lr = 0.05, .lambd = 1e-3, .alpha = 0.75, .t0 = 20, .weight_decay = 1e-3});
}
static nb_optimizer *nadam(problem *pb) { return nb_nadam(pb->m, (nb_nadam_options){.lr = 8e-3}); }
static nb_optimizer *nadam_decoupled_maximize(problem *pb) {
    return nb_nadam(pb->m, (nb_nadam_options){.lr = 5e-3, .weight_decay = 0.05, .momentum_decay = 5e-3,
                                              .decoupled_weight_decay = true, .maximize = true});
}
static nb_optimizer *radam(problem *pb) {
    return nb_radam(pb->m, (nb_radam_options){.lr = 1e-2, .weight_decay = 1e-3});
}
static nb_optimizer *radam_decoupled_maximize(problem *pb) {
    return nb_radam(pb->m, (nb_radam_options){
                               .lr = 1e-2, .weight_decay = 0.05, .decoupled_weight_decay = true, .maximize = true});
}
static nb_optimizer *rmsprop(problem *pb) { return nb_rmsprop(pb->m, (nb_rmsprop_options){.lr = 1e-2}); }
static nb_optimizer *rmsprop_centered_momentum(problem *pb) {
    return nb_rmsprop(pb->m, (nb_rmsprop_options){
                                 .lr = 2e-3, .alpha = 0.9, .momentum = 0.5, .centered = true, .weight_decay = 1e-3});
}
static nb_optimizer *rprop(problem *pb) { return nb_rprop(pb->m, (nb_rprop_options){.lr = 1e-2}); }
static nb_optimizer *rprop_maximize(problem *pb) {
    return nb_rprop(pb->m, (nb_rprop_options){
                               .lr = 2e-2, .etas = {0.4, 1.3}, .step_sizes = {1e-5, 0.5}, .maximize = true});
}
static nb_optimizer *lion(problem *pb) {
    return nb_lion(pb->m, (nb_lion_options){.lr = 1e-3, .betas = {0.9, 0.99}, .weight_decay = 0.1});
}
/* 2-D weights through Muon, the biases through AdamW with the same lr and weight_decay */
static nb_optimizer *muon(problem *pb) { return nb_muon(pb->m, (nb_muon_options){.lr = 0.02, .weight_decay = 0.01}); }
static nb_optimizer *lbfgs_rosenbrock(problem *pb) {
    return nb_lbfgs(pb->m, (nb_lbfgs_options){.lr = 0.05, .max_iter = 2, .history_size = 10});
}
static nb_optimizer *lbfgs_rosenbrock_wolfe(problem *pb) {
    return nb_lbfgs(pb->m, (nb_lbfgs_options){
                               .max_iter = 5, .history_size = 10, .line_search_fn = NB_LINE_SEARCH_STRONG_WOLFE});
}
static nb_optimizer *lbfgs_linear(problem *pb) {
    return nb_lbfgs(pb->m, (nb_lbfgs_options){.lr = 0.5, .max_iter = 3, .history_size = 4});
}
static nb_optimizer *lbfgs_linear_wolfe(problem *pb) {
    return nb_lbfgs(pb->m, (nb_lbfgs_options){
                               .max_iter = 4, .history_size = 5, .line_search_fn = NB_LINE_SEARCH_STRONG_WOLFE});
}

/* BERT's recipe: AdamW(lr 1e-2, weight_decay 0.1) with no decay on biases and
 * the LayerNorm, the split of nb_decay_split_module over the body; then a
 * head group (the last Linear) with its own lr and betas, added later. */
static nb_optimizer *adamw_groups(problem *pb) {
    nb_decay_split sp;
    NB_CK_OK(nb_decay_split_module(pb->m, &sp));
    ck_assert_int_eq(sp.n_decay, 2);    /* 0.weight, 3.weight */
    ck_assert_int_eq(sp.n_no_decay, 4); /* 0.bias, 1.weight, 1.bias, 3.bias */
    nb_module *head = nb_module_child(pb->m, "3");
    nb_tensor *hw = nb_module_get(head, "weight"), *hb = nb_module_get(head, "bias");
    nb_tensor *decay[4], *nodecay[4];
    int nd = 0, nn = 0;
    for (int i = 0; i < sp.n_decay; i++)
        if (sp.decay[i] != hw) decay[nd++] = sp.decay[i];
    for (int i = 0; i < sp.n_no_decay; i++)
        if (sp.no_decay[i] != hb) nodecay[nn++] = sp.no_decay[i];
    nb_decay_split_free(&sp);
    nb_optimizer *opt = nb_adamw_groups((nb_param_group[]){{decay, nd, NULL},
                                                           {nodecay, nn, &(nb_adam_options){.weight_decay = NB_ZERO}}},
                                        2, (nb_adam_options){.lr = 1e-2, .weight_decay = 0.1});
    NB_CK_NOTNULL(opt);
    NB_CK_OK(nb_optimizer_add_param_group(
        opt, &(nb_param_group){(nb_tensor *[]){hw, hb}, 2, &(nb_adam_options){.lr = 3e-2, .betas = {0.8, 0.99}}}));
    return opt;
}

typedef struct opt_case {
    const char *name;
    make_fn make;
    int problem;
    bool negate;
} opt_case;

static const opt_case OPT_CASES[] = {
    {"sgd_nesterov", sgd_nesterov, MLP, false},
    {"sgd_dampening_maximize", sgd_dampening_maximize, MLP, true},
    {"adam_amsgrad", adam_amsgrad, MLP, false},
    {"adam_decoupled", adam_decoupled, MLP, false},
    {"adamw", adamw, MLP, false},
    {"adadelta", adadelta, MLP, false},
    {"adadelta_maximize", adadelta_maximize, MLP, true},
    {"adafactor", adafactor, MLP, false},
    {"adafactor_wd_eps", adafactor_wd_eps, MLP, true},
    {"adagrad", adagrad, MLP, false},
    {"adamax", adamax, MLP, false},
    {"asgd", asgd, MLP, false},
    {"nadam", nadam, MLP, false},
    {"nadam_decoupled_maximize", nadam_decoupled_maximize, MLP, true},
    {"radam", radam, MLP, false},
    {"radam_decoupled_maximize", radam_decoupled_maximize, MLP, true},
    {"rmsprop", rmsprop, MLP, false},
    {"rmsprop_centered_momentum", rmsprop_centered_momentum, MLP, false},
    {"rprop", rprop, MLP, false},
    {"rprop_maximize", rprop_maximize, MLP, true},
    {"lion", lion, MLP, false},
    {"muon", muon, MLP, false},
    {"lbfgs_rosenbrock", lbfgs_rosenbrock, ROSENBROCK, false},
    {"lbfgs_rosenbrock_wolfe", lbfgs_rosenbrock_wolfe, ROSENBROCK, false},
    {"lbfgs_linear", lbfgs_linear, LINEAR, false},
    {"lbfgs_linear_wolfe", lbfgs_linear_wolfe, LINEAR, false},
    {"adamw_groups", adamw_groups, GROUPED, false},
};
#define N_OPT_CASES ((int)(sizeof OPT_CASES / sizeof *OPT_CASES))

static const optim_ref_case *opt_ref(const char *name) {
    for (size_t i = 0; i < sizeof OPTIM_REF / sizeof *OPTIM_REF; i++)
        if (!strcmp(OPTIM_REF[i].name, name)) return &OPTIM_REF[i];
    ck_abort_msg("optim_ref.h has no case '%s' (regenerate it with tests/optim_ref/gen_ref.py)", name);
    return NULL;
}

static void problem_start(problem *pb, const opt_case *c) {
    problem_init(pb, c->problem, c->negate);
    pb->opt = c->make(pb);
    NB_CK_NOTNULL(pb->opt);
}

/* The trajectory of case i against PyTorch's. */
START_TEST(test_optimizer_trajectory) {
    const opt_case *c = &OPT_CASES[_i];
    const optim_ref_case *ref = opt_ref(c->name);
    problem pb;
    problem_start(&pb, c);
    double losses[OPTIM_REF_STEPS + 1], final[83];
    run_steps(&pb, 0, OPTIM_REF_STEPS, losses);
    losses[OPTIM_REF_STEPS] = final_loss(&pb);
    params_of(pb.m, final, ref->n_final);
    double worst_loss = 0, worst = 0; /* worst: the largest share of the tolerance used */
    for (int t = 0; t <= OPTIM_REF_STEPS; t++) {
        ck_near(losses[t], ref->loss[t], "loss", c->name, t);
        worst_loss = fmax(worst_loss, fabs(losses[t] - ref->loss[t]) / fabs(ref->loss[t]));
        worst = fmax(worst, fabs(losses[t] - ref->loss[t]) / (RTOL * fabs(ref->loss[t]) + ATOL));
    }
    for (int i = 0; i < ref->n_final; i++) {
        ck_near(final[i], ref->final[i], "final parameter", c->name, i);
        worst = fmax(worst, fabs(final[i] - ref->final[i]) / (RTOL * fabs(ref->final[i]) + ATOL));
    }
    ck_assert_msg(losses[OPTIM_REF_STEPS] < losses[0], "%s did not descend", c->name);
    if (getenv("NB_OPTIM_REF_VERBOSE"))
        fprintf(stderr, "optim_ref: %-28s losses within %.1e relative, %.1e of the tolerance used (%s)\n", c->name,
                worst_loss, worst, ref->source);
    problem_free(&pb);
}
END_TEST

/* Saved at step RESUME_AT and resumed in fresh objects, case i continues bit
 * for bit: the same losses and final parameters as the run never stopped. */
START_TEST(test_optimizer_resume) {
    const opt_case *c = &OPT_CASES[_i];
    problem a, b, r;
    double la[OPTIM_REF_STEPS], lr[OPTIM_REF_STEPS], fa[83], fr[83];
    problem_start(&a, c);
    run_steps(&a, 0, OPTIM_REF_STEPS, la);
    problem_start(&b, c);
    run_steps(&b, 0, RESUME_AT, lr);
    nb_checkpoint ck = {.module = b.m, .optimizer = b.opt, .global_step = RESUME_AT};
    NB_CK_OK(nb_save_checkpoint(ckpt_path(), &ck));
    problem_free(&b);
    problem_start(&r, c);
    run_steps(&r, 0, 3, fr); /* move the fresh run away from the start: the load must overwrite it */
    ck = (nb_checkpoint){.module = r.m, .optimizer = r.opt};
    NB_CK_OK(nb_load_checkpoint(ckpt_path(), &ck, NULL));
    ck_assert_int_eq(ck.global_step, RESUME_AT);
    run_steps(&r, RESUME_AT, OPTIM_REF_STEPS, lr);
    for (int t = 0; t < OPTIM_REF_STEPS; t++)
        ck_assert_msg(la[t] == lr[t], "%s step %d: loss %.17g straight, %.17g resumed", c->name, t, la[t], lr[t]);
    int n = (int)nb_module_num_params(a.m);
    params_of(a.m, fa, n), params_of(r.m, fr, n);
    ck_assert_msg(!memcmp(fa, fr, sizeof(double) * (size_t)n), "%s: final parameters differ after resuming", c->name);
    for (int i = 0; i < nb_optimizer_num_params(a.opt); i++)
        ck_assert_int_eq(nb_optimizer_step_count(a.opt, i), nb_optimizer_step_count(r.opt, i));
    problem_free(&a), problem_free(&r);
}
END_TEST

/* ---- schedulers --------------------------------------------------------------------- */

/* Two param groups: lr 0.1 over a [2] and 0.05 over b [3], SGD with momentum
 * 0.9 or Adam (betas (0.9, 0.999)). */
static nb_optimizer *sched_opt(nb_module *m, bool adam) {
    nb_tensor *a = nb_module_get(m, "a"), *b = nb_module_get(m, "b");
    if (adam)
        return nb_adam_groups((nb_param_group[]){{&a, 1, NULL}, {&b, 1, &(nb_adam_options){.lr = 0.05}}}, 2,
                              (nb_adam_options){.lr = 0.1});
    return nb_sgd_groups((nb_param_group[]){{&a, 1, NULL}, {&b, 1, &(nb_sgd_options){.lr = 0.05}}}, 2,
                         (nb_sgd_options){.lr = 0.1, .momentum = 0.9});
}

static double lam(int64_t e, int g, void *user) {
    (void)user;
    return g == 0 ? pow(0.95, (double)e) : 1.0 / (1.0 + 0.1 * (double)e);
}
static double mul(int64_t e, int g, void *user) {
    (void)user;
    return g == 0 ? 0.99 : 1.0 - 0.002 * (double)(e % 5);
}
static double metric(int t) {
    return t < 60 ? 1.0 / (1.0 + 0.2 * t) + 0.05 * (double)((t * 37) % 11) / 11.0 : 0.3 + 0.01 * (double)((t * 13) % 7);
}

typedef nb_scheduler *(*sched_fn)(nb_optimizer *o);
static nb_scheduler *s_step(nb_optimizer *o) { return nb_step_lr(o, 30, 0.5); }
static nb_scheduler *s_multi_step(nb_optimizer *o) { return nb_multi_step_lr(o, (int64_t[]){80, 30, 150, 80}, 4, 0.3); }
static nb_scheduler *s_exponential(nb_optimizer *o) { return nb_exponential_lr(o, 0.98); }
static nb_scheduler *s_cosine(nb_optimizer *o) { return nb_cosine_annealing_lr(o, 50, 1e-3); }
static nb_scheduler *s_linear(nb_optimizer *o) { return nb_linear_lr(o, 0.25, 1.0, 40); }
static nb_scheduler *s_constant(nb_optimizer *o) { return nb_constant_lr(o, 0.5, 60); }
static nb_scheduler *s_polynomial(nb_optimizer *o) { return nb_polynomial_lr(o, 150, 2.0); }
static nb_scheduler *s_lambda(nb_optimizer *o) { return nb_lambda_lr(o, lam, NULL); }
static nb_scheduler *s_multiplicative(nb_optimizer *o) { return nb_multiplicative_lr(o, mul, NULL); }
static nb_scheduler *s_warm_restarts(nb_optimizer *o) { return nb_cosine_annealing_warm_restarts(o, 20, 2, 1e-3); }
static nb_scheduler *s_cyclic_triangular(nb_optimizer *o) {
    return nb_cyclic_lr(o, 0.01, 0, (nb_cyclic_lr_options){.step_size_up = 25, .step_size_down = 15,
                                                          .max_lrs = (double[]){0.1, 0.2}});
}
static nb_scheduler *s_cyclic_triangular2(nb_optimizer *o) {
    return nb_cyclic_lr(o, 0, 0.1, (nb_cyclic_lr_options){.step_size_up = 20, .mode = NB_CYCLIC_TRIANGULAR2,
                                                         .base_lrs = (double[]){0.01, 0.02}, .base_momentum = 0.7,
                                                         .max_momentum = 0.95});
}
static nb_scheduler *s_cyclic_exp_range(nb_optimizer *o) {
    return nb_cyclic_lr(o, 0.001, 0.01, (nb_cyclic_lr_options){.step_size_up = 30, .mode = NB_CYCLIC_EXP_RANGE,
                                                               .gamma = 0.99});
}
static nb_scheduler *s_cyclic_no_momentum(nb_optimizer *o) {
    return nb_cyclic_lr(o, 0.01, 0.1, (nb_cyclic_lr_options){.step_size_up = 10, .cycle_momentum = NB_FLAG_FALSE});
}
static nb_scheduler *s_one_cycle(nb_optimizer *o) {
    return nb_one_cycle_lr(o, 0, SCHED_REF_STEPS, (nb_one_cycle_options){.max_lrs = (double[]){0.5, 0.25}});
}
static nb_scheduler *s_one_cycle_3phase(nb_optimizer *o) {
    return nb_one_cycle_lr(o, 0.3, SCHED_REF_STEPS + 10,
                           (nb_one_cycle_options){.pct_start = 0.25, .anneal_strategy = NB_ANNEAL_LINEAR,
                                                  .three_phase = true, .div_factor = 10, .final_div_factor = 100,
                                                  .base_momentum = 0.8, .max_momentum = 0.9});
}
static nb_scheduler *s_plateau_min_rel(nb_optimizer *o) {
    return nb_reduce_lr_on_plateau(o, (nb_reduce_lr_on_plateau_options){
                                          .factor = 0.5, .patience = 5, .threshold = 1e-3, .cooldown = 3,
                                          .min_lrs = (double[]){1e-3, 1e-4}});
}
static nb_scheduler *s_plateau_max_abs(nb_optimizer *o) {
    return nb_reduce_lr_on_plateau(o, (nb_reduce_lr_on_plateau_options){
                                          .mode = NB_PLATEAU_MAX, .factor = 0.7, .patience = 2, .threshold = 0.01,
                                          .threshold_mode = NB_THRESHOLD_ABS, .eps = 1e-3});
}
static nb_scheduler *s_sequential(nb_optimizer *o) {
    return nb_sequential_lr(o, (nb_scheduler *[]){nb_linear_lr(o, 0.1, 1.0, 10), nb_cosine_annealing_lr(o, 190, 1e-4)},
                            2, (int64_t[]){10});
}
static nb_scheduler *s_sequential_closed(nb_optimizer *o) {
    return nb_sequential_lr(o, (nb_scheduler *[]){nb_exponential_lr(o, 0.9), nb_polynomial_lr(o, 100, 1.0),
                                                  nb_constant_lr(o, 0.5, 10)},
                            3, (int64_t[]){50, 120});
}
static nb_scheduler *s_chained(nb_optimizer *o) {
    return nb_chained_scheduler(o, (nb_scheduler *[]){nb_constant_lr(o, 0.1, 20), nb_exponential_lr(o, 0.98)}, 2);
}
static nb_scheduler *s_chained_cosine_warmup(nb_optimizer *o) {
    return nb_chained_scheduler(o, (nb_scheduler *[]){nb_linear_lr(o, 0.2, 1.0, 15), nb_cosine_annealing_lr(o, 60, 0)},
                                2);
}

typedef struct sched_case {
    const char *name;
    sched_fn make;
    bool adam;
} sched_case;

static const sched_case SCHED_CASES[] = {
    {"step", s_step, false},
    {"multi_step", s_multi_step, false},
    {"exponential", s_exponential, false},
    {"cosine", s_cosine, false},
    {"linear", s_linear, false},
    {"constant", s_constant, false},
    {"polynomial", s_polynomial, false},
    {"lambda", s_lambda, false},
    {"multiplicative", s_multiplicative, false},
    {"warm_restarts", s_warm_restarts, false},
    {"cyclic_triangular", s_cyclic_triangular, false},
    {"cyclic_triangular2", s_cyclic_triangular2, false},
    {"cyclic_exp_range_adam", s_cyclic_exp_range, true},
    {"cyclic_no_momentum", s_cyclic_no_momentum, false},
    {"one_cycle", s_one_cycle, false},
    {"one_cycle_linear_3phase_adam", s_one_cycle_3phase, true},
    {"plateau_min_rel", s_plateau_min_rel, false},
    {"plateau_max_abs", s_plateau_max_abs, false},
    {"sequential", s_sequential, false},
    {"sequential_closed_forms", s_sequential_closed, false},
    {"chained", s_chained, false},
    {"chained_cosine_warmup", s_chained_cosine_warmup, false},
};
#define N_SCHED_CASES ((int)(sizeof SCHED_CASES / sizeof *SCHED_CASES))

static const sched_ref_case *sched_ref(const char *name) {
    for (size_t i = 0; i < sizeof SCHED_REF / sizeof *SCHED_REF; i++)
        if (!strcmp(SCHED_REF[i].name, name)) return &SCHED_REF[i];
    ck_abort_msg("optim_ref.h has no scheduler case '%s' (regenerate it with tests/optim_ref/gen_ref.py)", name);
    return NULL;
}

typedef struct sched_run {
    nb_module *m;
    nb_optimizer *opt;
    nb_scheduler *s;
    bool adam;
} sched_run;

static void sched_start(sched_run *r, const sched_case *c) {
    r->m = holder((const char *[]){"a", "b"}, (int64_t[]){2, 3}, NULL, 2);
    r->adam = c->adam;
    r->opt = sched_opt(r->m, c->adam);
    NB_CK_NOTNULL(r->opt);
    r->s = c->make(r->opt);
    NB_CK_NOTNULL(r->s);
}

static void sched_free(sched_run *r) {
    nb_scheduler_free(r->s);
    nb_optimizer_free(r->opt);
    nb_module_free(r->m);
}

/* lrs[t][g] and moms[t][g] after construction (t = 0) and each step. */
static void record(sched_run *r, int t, double (*lrs)[2], double (*moms)[2]) {
    for (int g = 0; g < 2; g++) {
        lrs[t][g] = nb_optimizer_get_group_lr(r->opt, g);
        ck_assert(nb_scheduler_get_group_last_lr(r->s, g) == lrs[t][g]);
        NB_CK_OK(nb_optimizer_get_group_option(r->opt, g, r->adam ? "betas.0" : "momentum", &moms[t][g]));
    }
}

static void sched_steps(sched_run *r, int from, int to, double (*lrs)[2], double (*moms)[2]) {
    for (int t = from; t < to; t++) {
        NB_CK_OK(nb_optimizer_step(r->opt)); /* no gradients: nothing to update, as the script's */
        if (!strcmp(nb_scheduler_kind(r->s), "ReduceLROnPlateau")) NB_CK_OK(nb_scheduler_step_metric(r->s, metric(t)));
        else NB_CK_OK(nb_scheduler_step(r->s));
        record(r, t + 1, lrs, moms);
    }
}

START_TEST(test_scheduler_sequence) {
    const sched_case *c = &SCHED_CASES[_i];
    const sched_ref_case *ref = sched_ref(c->name);
    sched_run r;
    sched_start(&r, c);
    static double lrs[SCHED_REF_STEPS + 1][2], moms[SCHED_REF_STEPS + 1][2];
    record(&r, 0, lrs, moms);
    sched_steps(&r, 0, SCHED_REF_STEPS, lrs, moms);
    for (int t = 0; t <= SCHED_REF_STEPS; t++)
        for (int g = 0; g < 2; g++) {
            ck_near(lrs[t][g], ref->lr[2 * t + g], "lr", c->name, 2 * t + g);
            double want_mom = ref->momentum ? ref->momentum[2 * t + g] : moms[0][g]; /* not cycled: constant */
            ck_near(moms[t][g], want_mom, "momentum", c->name, 2 * t + g);
        }
    if (!ref->momentum)
        for (int g = 0; g < 2; g++) ck_assert(moms[0][g] == 0.9);
    sched_free(&r);
}
END_TEST

/* Saved at step 77 with its optimizer and resumed in fresh objects, case i
 * continues bit for bit (lrs and momenta). */
START_TEST(test_scheduler_resume) {
    const sched_case *c = &SCHED_CASES[_i];
    enum { AT = 77 };
    static double la[SCHED_REF_STEPS + 1][2], ma[SCHED_REF_STEPS + 1][2], lb[SCHED_REF_STEPS + 1][2],
        mb[SCHED_REF_STEPS + 1][2];
    sched_run a, b, r;
    sched_start(&a, c);
    record(&a, 0, la, ma);
    sched_steps(&a, 0, SCHED_REF_STEPS, la, ma);
    sched_start(&b, c);
    record(&b, 0, lb, mb);
    sched_steps(&b, 0, AT, lb, mb);
    nb_checkpoint ck = {.module = b.m, .optimizer = b.opt, .scheduler = b.s, .global_step = AT};
    NB_CK_OK(nb_save_checkpoint(ckpt_path(), &ck));
    sched_free(&b);
    sched_start(&r, c);
    sched_steps(&r, 0, 5, lb, mb); /* elsewhere; the load must overwrite it */
    ck = (nb_checkpoint){.module = r.m, .optimizer = r.opt, .scheduler = r.s};
    NB_CK_OK(nb_load_checkpoint(ckpt_path(), &ck, NULL));
    sched_steps(&r, AT, SCHED_REF_STEPS, lb, mb);
    for (int t = AT; t <= SCHED_REF_STEPS; t++)
        for (int g = 0; g < 2; g++)
            ck_assert_msg(la[t][g] == lb[t][g] && ma[t][g] == mb[t][g],
                          "%s step %d group %d: lr %.17g / momentum %.17g straight, %.17g / %.17g resumed", c->name, t,
                          g, la[t][g], ma[t][g], lb[t][g], mb[t][g]);
    sched_free(&a), sched_free(&r);
}
END_TEST

START_TEST(test_reference_tables_complete) {
    ck_assert_int_eq((int)(sizeof OPTIM_REF / sizeof *OPTIM_REF), N_OPT_CASES);
    ck_assert_int_eq((int)(sizeof SCHED_REF / sizeof *SCHED_REF), N_SCHED_CASES);
    if (getenv("NB_OPTIM_REF_VERBOSE"))
        fprintf(stderr, "optim_ref: reference from torch %s\n", OPTIM_REF_TORCH_VERSION);
}
END_TEST

Suite *nb_suite_optim_ref(void) {
    Suite *s = suite_create("optim_ref");
    TCase *tc = tcase_create("optimizers");
    tcase_add_test(tc, test_reference_tables_complete);
    tcase_add_loop_test(tc, test_optimizer_trajectory, 0, N_OPT_CASES);
    tcase_add_loop_test(tc, test_scheduler_sequence, 0, N_SCHED_CASES);
    suite_add_tcase(s, tc);
    TCase *res = tcase_create("resume");
    tcase_add_checked_fixture(res, tmp_setup, tmp_teardown);
    tcase_add_loop_test(res, test_optimizer_resume, 0, N_OPT_CASES);
    tcase_add_loop_test(res, test_scheduler_resume, 0, N_SCHED_CASES);
    suite_add_tcase(s, res);
    return s;
}
