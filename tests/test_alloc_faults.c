/* test_alloc_faults.c - host allocation failure, one allocation at a time:
 * each scenario runs with its n-th allocation failing (tests/nb_fault.c),
 * for n = 0, 1, 2, ... until a run meets no failure, and must then either
 * succeed or fail with a message (never crash, and under ASan never leak or
 * touch freed memory); afterwards the same work must succeed unarmed. The
 * scenarios cover forward ops with grad off, backward passes (the graph is
 * built unarmed, so the tape's own nb_save is not armed), module and
 * optimizer construction, an optimizer step, and file saves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

typedef bool (*scenario_fn)(void *ctx);

/* Runs f with every allocation failing in turn; returns the number of runs. */
static int sweep(const char *name, scenario_fn setup, scenario_fn f, void *ctx) {
    nb_set_num_threads(1); /* the fault counter is process-wide */
    int n = 0;
    for (;; n++) {
        ck_assert_msg(n < 20000, "%s: more than 20000 allocations", name);
        nb_scope *s = nb_scope_begin();
        nb_clear_error();
        if (setup) ck_assert_msg(setup(ctx), "%s: setup failed: %s", name, nb_last_error());
        nb_fault_arm(n);
        bool ok = f(ctx);
        nb_fault_disarm();
        bool hit = nb_fault_hit();
        if (!ok) {
            ck_assert_msg(hit, "%s failed without an injected fault: %s", name, nb_last_error());
            ck_assert_msg(nb_last_status() != NB_OK && nb_last_error()[0], "%s: allocation %d failed silently", name, n);
        }
        nb_scope_end(s);
        if (!hit) {
            ck_assert_msg(ok, "%s: %s", name, nb_last_error());
            break;
        }
    }
    return n;
}

/* ---- ops with grad off -------------------------------------------------------- */

static nb_tensor *T(int ndim, const int64_t *shape, uint64_t seed) {
    nb_generator g = nb_generator_new(seed);
    return nb_randn(ndim, shape, NB_F32, &g);
}

/* Stops at the first failure: a later op that succeeds clears the status
 * (the error contract), so the failing op's message must be read at once. */
#define FWD(var, expr)                                                                                                \
    nb_tensor *var = (expr);                                                                                           \
    if (!var) return nb_set_grad_enabled(prev), false

static bool fwd_ops(void *ctx) {
    (void)ctx;
    bool prev = nb_set_grad_enabled(false);
    FWD(x, T(NB_SHAPE(4, 6), 1));
    FWD(w, T(NB_SHAPE(5, 6), 2));
    FWD(b, T(NB_SHAPE(5), 3));
    FWD(y0, nb_linear(x, w, b));
    FWD(wt, T(NB_SHAPE(3, 5), 4));
    FWD(wtt, nb_transpose(wt, 0, 1));
    FWD(mm, nb_matmul(y0, wtt));
    FWD(one, nb_scalar(1, NB_F32));
    FWD(y1, nb_add(mm, one));
    FWD(pd, nb_pad(y1, (int64_t[]){1, 2}, 2, NB_PAD_REFLECT, 0));
    FWD(y, nb_log_softmax(pd, -1));
    FWD(tgt, nb_arange(0, 4, 1, NB_I64));
    FWD(loss, nb_cross_entropy(y, tgt));
    nb_tensor *parts[2] = {y, y};
    FWD(c, nb_cat(parts, 2, 0));
    nb_tensor *v = NULL, *i = NULL;
    if (nb_sort(c, -1, true, true, &v, &i) != NB_OK) return nb_set_grad_enabled(prev), false;
    FWD(img, T(NB_SHAPE(1, 2, 5, 5), 5));
    FWD(k, T(NB_SHAPE(3, 2, 3, 3), 6));
    FWD(im, nb_conv2d(img, k, NULL, (nb_conv2d_options){0}));
    FWD(p, nb_max_pool2d(im, (nb_pool2d_options){.kernel = {2, 2}}, NULL));
    FWD(ln, nb_layer_norm(x, 1, (int64_t[]){6}, NULL, NULL, 1e-5));
    FWD(q, T(NB_SHAPE(2, 3, 4), 7));
    FWD(at, nb_scaled_dot_product_attention(q, q, q, (nb_sdpa_options){.is_causal = true}));
    FWD(r, T(NB_SHAPE(3, 3), 8));
    FWD(r1, nb_mul_scalar(r, 0.1));
    FWD(e, nb_ones(NB_SHAPE(3), NB_F32));
    FWD(r2, nb_add(r1, e));
    FWD(inv, nb_linalg_inv(r2));
    FWD(sum, nb_sum(c, NULL, 0, false));
    (void)loss, (void)p, (void)ln, (void)at, (void)inv, (void)sum;
    nb_set_grad_enabled(prev);
    return true;
}
#undef FWD

/* ---- backward ---------------------------------------------------------------------------- */

typedef struct {
    nb_tensor *w, *b, *x, *loss;
} graph;

static bool build_linear(void *ctx) {
    graph *g = ctx;
    g->w = T(NB_SHAPE(5, 6), 2), g->b = T(NB_SHAPE(5), 3), g->x = T(NB_SHAPE(4, 6), 1);
    nb_set_requires_grad(g->w, true), nb_set_requires_grad(g->b, true), nb_set_requires_grad(g->x, true);
    nb_tensor *h = nb_relu(nb_linear(g->x, g->w, g->b));
    nb_tensor *k = nb_reshape(nb_matmul(nb_unsqueeze(h, 0), nb_unsqueeze(T(NB_SHAPE(5, 2), 4), 0)), NB_SHAPE(8));
    g->loss = nb_add(nb_cross_entropy(nb_reshape(h, NB_SHAPE(4, 5)), nb_arange(0, 4, 1, NB_I64)),
                     nb_mean(nb_mul(k, k), NULL, 0, false));
    return g->loss != NULL;
}

static bool run_backward(void *ctx) {
    graph *g = ctx;
    bool ok = nb_backward(g->loss) == NB_OK;
    nb_tensor_zero_grad(g->w), nb_tensor_zero_grad(g->b), nb_tensor_zero_grad(g->x);
    return ok;
}

static bool build_conv(void *ctx) {
    graph *g = ctx;
    g->x = T(NB_SHAPE(2, 2, 6, 6), 1), g->w = T(NB_SHAPE(3, 2, 3, 3), 2), g->b = T(NB_SHAPE(3), 3);
    nb_set_requires_grad(g->w, true), nb_set_requires_grad(g->b, true), nb_set_requires_grad(g->x, true);
    nb_tensor *y = nb_conv2d(g->x, g->w, g->b, (nb_conv2d_options){.padding = {1, 1}});
    y = nb_avg_pool2d(nb_max_pool2d(y, (nb_pool2d_options){.kernel = {2, 2}}, NULL), (nb_pool2d_options){.kernel = {3, 3}});
    g->loss = nb_sum(nb_layer_norm(nb_flatten(y, 1, -1), 1, (int64_t[]){3}, NULL, NULL, 1e-5), NULL, 0, false);
    return g->loss != NULL;
}

/* ---- modules, optimizers, files ----------------------------------------------------------- */

static bool module_build(void *ctx) {
    (void)ctx;
    nb_module *net = nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_relu(), nb_nn_conv1d(1, 2, 3, (nb_conv1d_options){0}, true),
                                      nb_nn_layer_norm(4, 1e-5), nb_nn_embedding(10, 4, NB_NO_PADDING_IDX));
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_optimizer *sgd = opt ? nb_sgd(net, (nb_sgd_options){.lr = 1e-3, .momentum = 0.9}) : NULL;
    bool ok = sgd != NULL;
    nb_optimizer_free(sgd);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return ok;
}

typedef struct {
    nb_module *net;
    nb_optimizer *opt;
    nb_tensor *loss;
} step_ctx;

static bool step_build(void *ctx) {
    step_ctx *c = ctx;
    c->loss = nb_cross_entropy(nb_forward(c->net, T(NB_SHAPE(4, 6), 1)), nb_arange(0, 4, 1, NB_I64));
    return c->loss != NULL;
}

static bool step_run(void *ctx) {
    step_ctx *c = ctx;
    nb_optimizer_zero_grad(c->opt);
    return nb_backward(c->loss) == NB_OK && nb_optimizer_step(c->opt) == NB_OK;
}

typedef struct {
    nb_module *net;
    nb_optimizer *opt;
    char path[64];
} files_ctx;

static bool save_files(void *ctx) {
    files_ctx *f = ctx;
    nb_checkpoint ck = {.module = f->net, .optimizer = f->opt, .global_step = 3};
    bool ok = nb_save_checkpoint(f->path, &ck) == NB_OK;
    ok = nb_load_checkpoint(f->path, &ck, NULL) == NB_OK && ok;
    return nb_module_state_dict_save(f->net, f->path) == NB_OK && ok;
}

/* ---- tests ---------------------------------------------------------------------------------- */

START_TEST(test_faults_forward) {
    int n = sweep("forward ops", NULL, fwd_ops, NULL);
    ck_assert_int_gt(n, 20);
}
END_TEST

START_TEST(test_faults_backward) {
    graph g;
    ck_assert_int_gt(sweep("linear/matmul backward", build_linear, run_backward, &g), 10);
    ck_assert_int_gt(sweep("conv/pool backward", build_conv, run_backward, &g), 10);
}
END_TEST

START_TEST(test_faults_module_step) {
    ck_assert_int_gt(sweep("modules and optimizers", NULL, module_build, NULL), 20);
    step_ctx c = {.net = nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_relu(), nb_nn_linear(8, 4))};
    c.opt = nb_adam(c.net, (nb_adam_options){.lr = 1e-3});
    NB_CK_NOTNULL(c.opt);
    ck_assert_int_gt(sweep("backward + adam step", step_build, step_run, &c), 5);
    nb_optimizer_free(c.opt);
    nb_module_free(c.net);
}
END_TEST

START_TEST(test_faults_files) {
    files_ctx f;
    snprintf(f.path, sizeof f.path, "/tmp/nb_fault_%d.safetensors", (int)getpid());
    f.net = nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_relu(), nb_nn_linear(8, 3));
    f.opt = nb_adam(f.net, (nb_adam_options){.lr = 1e-3});
    NB_CK_NOTNULL(f.opt);
    ck_assert_int_gt(sweep("checkpoint save/load", NULL, save_files, &f), 10);
    nb_optimizer_free(f.opt);
    nb_module_free(f.net);
    unlink(f.path);
}
END_TEST

Suite *nb_suite_alloc_faults(void) {
    Suite *s = suite_create("alloc_faults");
    TCase *c = tcase_create("alloc_faults");
    tcase_add_test(c, test_faults_forward);
    tcase_add_test(c, test_faults_backward);
    tcase_add_test(c, test_faults_module_step);
    tcase_add_test(c, test_faults_files);
    tcase_set_timeout(c, 300);
    suite_add_tcase(s, c);
    return s;
}
