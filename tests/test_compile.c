/* test_compile.c - compiled training steps (nb_compile.h). On every device:
 * 100 compiled steps of an MLP with dropout and Adam under a cosine lr give
 * the bits of 100 eager steps (on a GPU: 2 eager warm-up calls, a fused
 * capture and 98 replays); a run compiled for 50 steps and checkpointed
 * resumes eagerly, and an eager run's checkpoint resumes compiled, both
 * ending with the bits of the eager run; guards: a new batch size, grad
 * mode, autocast and its dtype, a parameter frozen or added to the module
 * each make a trace, and a trace past cache_limit fails with NB_ERR_STATE;
 * a step that reads the host cannot be captured: it runs eagerly
 * (stats.reason) or, with fullgraph, fails naming the read; a call inside a
 * capture fails; outputs fed back as the next call's inputs (a recurrent
 * state) through warm-up, capture and replays, and on the CPU with
 * fullgraph; argument errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nabla.h"
#include "nb_test.h"
#include "suites.h"

enum { BATCH = 32, IN = 64, CLASSES = 10, STEPS = 100 };

typedef struct run {
    nb_module *m;
    nb_optimizer *opt;
    nb_tensor *loss_sum; /* float64 0-d on the device: the losses added in place */
    bool read_host;      /* the step reads its loss on the host (cannot be captured) */
} run;

static void run_init(run *r, nb_device dev) {
    memset(r, 0, sizeof *r);
    nb_manual_seed(11);
    NB_CK_OK(nb_set_default_device(dev));
    r->m = nb_nn_sequential(nb_nn_linear(IN, 48), nb_nn_tanh(), nb_nn_dropout(0.25), nb_nn_linear(48, CLASSES));
    r->opt = nb_adam(r->m, (nb_adam_options){.lr = 1e-3});
    r->loss_sum = nb_zeros(0, NULL, NB_F64);
    nb_retain(r->loss_sum);
    NB_CK_OK(nb_set_default_device(NB_CPU));
    ck_assert_ptr_nonnull(r->opt);
}

static void run_free(run *r) {
    nb_optimizer_free(r->opt);
    nb_module_free(r->m);
    nb_release(r->loss_sum);
}

/* Batch k (a function of k and the batch size alone) on dev; in the current scope. */
static void batch(int k, int64_t b, nb_device dev, nb_tensor **x, nb_tensor **y) {
    nb_generator g = nb_generator_new(500 + (uint64_t)k);
    *x = nb_randn_on(NB_SHAPE(b, IN), NB_F32, &g, dev);
    *y = nb_to_dtype(nb_mul_scalar(nb_rand_on(NB_SHAPE(b), NB_F64, &g, dev), CLASSES - 0.001), NB_I64);
}

/* The step: zero_grad, cross-entropy, backward, Adam, loss_sum += loss; out[0] the loss. */
static nb_status train_step(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    run *r = ctx;
    nb_scope *s = nb_scope_begin();
    nb_optimizer_zero_grad(r->opt);
    nb_tensor *loss = nb_cross_entropy(nb_forward(r->m, in[0]), in[1]);
    nb_status st = loss ? nb_backward(loss) : nb_last_status();
    if (!st && r->read_host && isnan(nb_item(loss))) st = nb_last_status();
    if (!st) st = nb_optimizer_step(r->opt);
    nb_tensor *sum = st ? NULL : nb_add(r->loss_sum, nb_to_dtype(nb_detach(loss), NB_F64));
    if (!st) st = sum ? nb_copy_(r->loss_sum, sum) : nb_last_status();
    if (!st) out[0] = nb_detach(loss), nb_retain(out[0]);
    nb_scope_end(s);
    return st;
}

static double cosine_lr(int k) { return 0.5e-3 * (1 + cos(3.14159265358979323846 * k / STEPS)); }

/* Steps [from, to) of r: eager, or through c. */
static void steps(run *r, nb_compiled *c, int from, int to, nb_device dev) {
    for (int k = from; k < to; k++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x, *y, *loss = NULL;
        batch(k, BATCH, dev, &x, &y);
        NB_CK_OK(nb_optimizer_set_lr(r->opt, cosine_lr(k)));
        if (c) {
            NB_CK_OK(nb_compiled_step(c, (nb_tensor *[]){x, y}, &loss));
            ck_assert_ptr_nonnull(loss);
        } else {
            NB_CK_OK(train_step(r, (nb_tensor *[]){x, y}, &loss));
            nb_release(loss);
        }
        nb_scope_end(s);
    }
}

/* Every parameter and loss_sum of a and b: bitwise equal. */
static void ck_same(run *a, run *b) {
    int k = nb_module_parameters(a->m, NULL, 0);
    nb_named_tensor pa[8], pb[8];
    ck_assert_int_le(k, 8);
    nb_module_parameters(a->m, pa, k), nb_module_parameters(b->m, pb, k);
    for (int i = 0; i < k; i++) {
        int64_t n = nb_numel(pa[i].tensor);
        float *ha = malloc(sizeof(float) * (size_t)n), *hb = malloc(sizeof(float) * (size_t)n);
        NB_CK_OK(nb_to_host(pa[i].tensor, ha, sizeof(float) * (size_t)n));
        NB_CK_OK(nb_to_host(pb[i].tensor, hb, sizeof(float) * (size_t)n));
        ck_assert_msg(!memcmp(ha, hb, sizeof(float) * (size_t)n), "parameter %s differs", pa[i].name);
        free(ha), free(hb);
    }
    ck_assert(nb_item(a->loss_sum) == nb_item(b->loss_sum));
}

static nb_device *devices(int *n) {
    static nb_device d[8];
    *n = 0;
    d[(*n)++] = NB_CPU;
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA) && *n < 8; i++) d[(*n)++] = NB_CUDA(i);
    return d;
}

START_TEST(test_compile_bitwise) {
    int nd;
    nb_device *ds = devices(&nd);
    for (int i = 0; i < nd; i++) {
        run e, g;
        run_init(&e, ds[i]);
        steps(&e, NULL, 0, STEPS, ds[i]);
        run_init(&g, ds[i]);
        nb_compiled *c = nb_compile(train_step, &g, 2, 1, &(nb_compile_options){.module = g.m});
        ck_assert_ptr_nonnull(c);
        steps(&g, c, 0, STEPS, ds[i]);
        NB_CK_OK(nb_device_synchronize(ds[i]));
        ck_same(&e, &g);
        nb_compiled_stats st = nb_compiled_get_stats(c);
        ck_assert_int_eq(st.traces, 1);
        ck_assert_int_eq(st.calls, STEPS);
        if (ds[i].type == NB_DEVICE_CUDA) {
            ck_assert_int_eq(st.graphs, 1);
            ck_assert_int_eq(st.eager_calls, 2);
            ck_assert_int_eq(st.replays, STEPS - 2);
            ck_assert_msg(st.graph_kernels > 0, "no kernels captured");
            ck_assert_str_eq(st.reason, "");
        } else {
            ck_assert_int_eq(st.graphs, 0);
            ck_assert_int_eq(st.eager_calls, STEPS);
            ck_assert_ptr_nonnull(strstr(st.reason, "graphs"));
        }
        nb_compiled_free(c);
        run_free(&e), run_free(&g);
    }
}
END_TEST

/* Checkpoints: compiled then eager, and eager then compiled, against eager throughout. */
START_TEST(test_compile_checkpoint_resume) {
    int nd;
    nb_device *ds = devices(&nd);
    char path[64];
    snprintf(path, sizeof path, "/tmp/nb_compile_ck_%d.safetensors", (int)getpid());
    for (int i = 0; i < nd; i++) {
        run e;
        run_init(&e, ds[i]);
        steps(&e, NULL, 0, STEPS, ds[i]);
        for (int order = 0; order < 2; order++) { /* 0: compiled first half; 1: compiled second half */
            run a, b;
            run_init(&a, ds[i]);
            nb_compiled *ca = order == 0 ? nb_compile(train_step, &a, 2, 1, &(nb_compile_options){.module = a.m}) : NULL;
            steps(&a, ca, 0, STEPS / 2, ds[i]);
            NB_CK_OK(nb_device_synchronize(ds[i]));
            NB_CK_OK(nb_save_checkpoint(path, &(nb_checkpoint){.module = a.m, .optimizer = a.opt}));
            run_init(&b, ds[i]);
            nb_manual_seed(999); /* the checkpoint restores the generator */
            NB_CK_OK(nb_load_checkpoint(path, &(nb_checkpoint){.module = b.m, .optimizer = b.opt}, NULL));
            NB_CK_OK(nb_copy_(b.loss_sum, a.loss_sum));
            nb_compiled *cb = order == 1 ? nb_compile(train_step, &b, 2, 1, &(nb_compile_options){.module = b.m}) : NULL;
            steps(&b, cb, STEPS / 2, STEPS, ds[i]);
            NB_CK_OK(nb_device_synchronize(ds[i]));
            ck_same(&e, &b);
            nb_compiled_free(ca), nb_compiled_free(cb);
            run_free(&a), run_free(&b);
        }
        run_free(&e);
    }
    unlink(path);
}
END_TEST

/* One call of c on a batch of size b (data of step 0). */
static nb_status call(nb_compiled *c, int64_t b, nb_device dev) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x, *y, *loss;
    batch(0, b, dev, &x, &y);
    nb_status st = nb_compiled_step(c, (nb_tensor *[]){x, y}, &loss);
    nb_scope_end(s);
    return st;
}

START_TEST(test_compile_guards) {
    int nd;
    nb_device *ds = devices(&nd);
    for (int i = 0; i < nd; i++) {
        nb_device dev = ds[i];
        run r;
        run_init(&r, dev);
        nb_compiled *c = nb_compile(train_step, &r, 2, 1, &(nb_compile_options){.module = r.m, .cache_limit = 7, .warmup = 1});
        for (int k = 0; k < 3; k++) NB_CK_OK(call(c, BATCH, dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 1);
        NB_CK_OK(call(c, 7, dev)); /* a last, short batch */
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 2);
        NB_CK_OK(call(c, BATCH, dev)); /* the first trace again */
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 2);
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        NB_CK_OK(call(c, BATCH, dev));
        NB_CK_OK(nb_autocast_end(dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 3);
        NB_CK_OK(nb_autocast_begin(dev, NB_F16)); /* another autocast dtype */
        NB_CK_OK(call(c, BATCH, dev));
        NB_CK_OK(nb_autocast_end(dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 4);
        /* a parameter frozen, then unfrozen */
        nb_named_tensor p0;
        ck_assert_int_ge(nb_module_parameters(r.m, &p0, 1), 1);
        NB_CK_OK(nb_set_requires_grad(p0.tensor, false));
        NB_CK_OK(call(c, BATCH, dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 5);
        NB_CK_OK(nb_set_requires_grad(p0.tensor, true));
        NB_CK_OK(call(c, BATCH, dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 5);
        /* a parameter added after compiling */
        nb_scope *s = nb_scope_begin();
        NB_CK_OK(nb_module_register_parameter(r.m, "extra", nb_full_on(NB_SHAPE(3), 0, NB_F32, dev)));
        nb_scope_end(s);
        NB_CK_OK(call(c, BATCH, dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 6);
        NB_CK_OK(call(c, 5, dev));
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 7);
        /* an eighth guard set: past cache_limit */
        nb_clear_error();
        ck_assert_int_eq(call(c, 6, dev), NB_ERR_STATE);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "cache_limit 7"));
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "input 0's shape"));
        NB_CK_OK(call(c, BATCH, dev)); /* the traces still run */
        if (dev.type == NB_DEVICE_CUDA) ck_assert_int_ge(nb_compiled_get_stats(c).graphs, 2);
        nb_compiled_free(c);
        /* grad mode */
        c = nb_compile(train_step, &r, 2, 1, NULL);
        NB_CK_OK(call(c, BATCH, dev));
        bool prev = nb_set_grad_enabled(false);
        ck_assert_int_ne(call(c, BATCH, dev), NB_OK); /* backward without grad: the step's own error */
        nb_set_grad_enabled(prev);
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 2);
        nb_compiled_free(c);
        run_free(&r);
    }
}
END_TEST

/* A step reading the host: eager with the reason kept, or an error with fullgraph. */
START_TEST(test_compile_graph_break) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        run e, r;
        run_init(&e, dev);
        steps(&e, NULL, 0, 6, dev);
        run_init(&r, dev); /* after e's steps: the same seed, so the same weights and masks */
        r.read_host = true;
        nb_compiled *c = nb_compile(train_step, &r, 2, 1, &(nb_compile_options){.module = r.m});
        steps(&r, c, 0, 6, dev);
        nb_compiled_stats st = nb_compiled_get_stats(c);
        ck_assert_int_eq(st.graphs, 0);
        ck_assert_int_eq(st.eager_calls, 6);
        ck_assert_msg(strstr(st.reason, "item") || strstr(st.reason, "host"), "reason: %s", st.reason);
        ck_same(&e, &r); /* the failed capture ran nothing and left no trace in the state */
        nb_compiled_free(c);
        c = nb_compile(train_step, &r, 2, 1, &(nb_compile_options){.fullgraph = true, .warmup = 1});
        NB_CK_OK(call(c, BATCH, dev));
        nb_clear_error();
        ck_assert_int_ne(call(c, BATCH, dev), NB_OK);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "fullgraph"));
        nb_compiled_free(c);
        /* a call inside the caller's own capture */
        r.read_host = false;
        c = nb_compile(train_step, &r, 2, 1, NULL);
        nb_scope *s = nb_scope_begin();
        nb_tensor *x, *y, *loss = NULL;
        batch(0, BATCH, dev, &x, &y); /* before the capture: its generator is a local */
        NB_CK_OK(nb_graph_capture_begin(dev));
        nb_clear_error();
        ck_assert_int_eq(nb_compiled_step(c, (nb_tensor *[]){x, y}, &loss), NB_ERR_STATE);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "inside a graph capture"));
        nb_graph_free(nb_graph_capture_end(dev));
        nb_clear_error();
        nb_scope_end(s);
        ck_assert_ptr_null(loss);
        ck_assert_int_eq(nb_compiled_get_stats(c).traces, 0);
        nb_compiled_free(c);
        run_free(&e), run_free(&r);
    }
}
END_TEST

/* h -> h / 2 + 1: a recurrent state handed back as the next call's input. */
static nb_status half_step(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    (void)ctx;
    nb_scope *s = nb_scope_begin();
    nb_tensor *h = nb_add_scalar(nb_mul_scalar(in[0], 0.5), 1.0);
    if (h) nb_retain(h);
    out[0] = h;
    nb_scope_end(s);
    return h ? NB_OK : nb_last_status();
}

START_TEST(test_compile_recurrent) {
    int nd;
    nb_device *ds = devices(&nd);
    nb_set_ownership_debug(true); /* a state freed before the call reads it fails with NB_ERR_STATE */
    for (int i = 0; i < nd; i++) {
        /* fullgraph: the CPU runs eagerly all the same; a GPU captures */
        nb_compiled *c = nb_compile(half_step, NULL, 1, 1, &(nb_compile_options){.fullgraph = true});
        ck_assert_ptr_nonnull(c);
        nb_scope *s = nb_scope_begin();
        nb_tensor *state[1] = {nb_full_on(NB_SHAPE(4), 0, NB_F32, ds[i])};
        float want = 0;
        for (int k = 0; k < 8; k++) {
            /* the same array in and out: the output (borrowed) is the next call's input */
            NB_CK_OK(nb_compiled_step(c, state, state));
            ck_assert_ptr_nonnull(state[0]);
            want = want * 0.5f + 1.0f;
            float got[4];
            NB_CK_OK(nb_to_host(state[0], got, sizeof got));
            for (int j = 0; j < 4; j++) ck_assert_msg(got[j] == want, "call %d: %g, want %g", k, got[j], want);
        }
        nb_scope_end(s);
        nb_compiled_stats st = nb_compiled_get_stats(c);
        ck_assert_int_eq(st.calls, 8);
        if (ds[i].type == NB_DEVICE_CUDA) {
            ck_assert_int_eq(st.eager_calls, 2);
            ck_assert_int_eq(st.graphs, 1);
            ck_assert_int_eq(st.replays, 6);
        } else {
            ck_assert_int_eq(st.eager_calls, 8);
            ck_assert_str_eq(st.reason, "cpu has no graphs (its steps run eagerly)");
        }
        nb_compiled_free(c);
    }
    nb_set_ownership_debug(false);
}
END_TEST

static nb_status no_step(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    (void)ctx, (void)in, (void)out;
    return NB_OK;
}

START_TEST(test_compile_errors) {
    NB_CK_FAILS(nb_compile(NULL, NULL, 1, 1, NULL) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compile(no_step, NULL, 17, 1, NULL) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compile(no_step, NULL, 1, -1, NULL) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compile(no_step, NULL, 1, 1, &(nb_compile_options){.warmup = -1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compile(no_step, NULL, 1, 1, &(nb_compile_options){.cache_limit = 65}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compiled_step(NULL, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_compiled *c = nb_compile(no_step, NULL, 1, 1, NULL);
    ck_assert_ptr_nonnull(c);
    nb_tensor *out = NULL;
    NB_CK_FAILS(nb_compiled_step(c, NULL, &out) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_compiled_step(c, (nb_tensor *[]){NULL}, &out) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope *s0 = nb_scope_begin();
    NB_CK_FAILS(nb_compiled_step(c, (nb_tensor *[]){nb_zeros(NB_SHAPE(2), NB_F32)}, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_zeros(NB_SHAPE(2), NB_F32);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_FAILS(nb_compiled_step(c, (nb_tensor *[]){w}, &out) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_compiled_step(c, (nb_tensor *[]){nb_detach(w)}, &out));
    ck_assert_ptr_null(out); /* the step handed over nothing */
    nb_scope_end(s);
    nb_compiled_stats st = nb_compiled_get_stats(NULL);
    ck_assert_int_eq(st.calls, 0);
    ck_assert_str_eq(st.reason, "");
    ck_assert_int_eq(nb_compiled_get_stats(c).calls, 1);
    nb_compiled_free(c);
    /* no outputs: outputs may be NULL */
    c = nb_compile(no_step, NULL, 1, 0, NULL);
    s = nb_scope_begin();
    for (int k = 0; k < 4; k++) NB_CK_OK(nb_compiled_step(c, (nb_tensor *[]){nb_zeros(NB_SHAPE(2), NB_F32)}, NULL));
    nb_scope_end(s);
    nb_compiled_free(c);
    nb_compiled_free(NULL);
}
END_TEST

Suite *nb_suite_compile(void) {
    Suite *s = suite_create("compile");
    TCase *c = tcase_create("core");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, test_compile_errors);
    tcase_add_test(c, test_compile_bitwise);
    tcase_add_test(c, test_compile_checkpoint_resume);
    tcase_add_test(c, test_compile_guards);
    tcase_add_test(c, test_compile_graph_break);
    tcase_add_test(c, test_compile_recurrent);
    suite_add_tcase(s, c);
    return s;
}
