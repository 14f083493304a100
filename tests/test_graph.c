/* test_graph.c - CUDA graph capture and replay (nb_graph_*). On the CPU:
 * the errors. On each CUDA device (the cases skip without one): 100 steps
 * of mnist_mlp's network with Adam replayed from one captured step end with
 * the same bits as 100 eager steps (issue 12's test); the same for a network
 * with dropout (a fresh mask per replay, as the eager steps draw) under an
 * lr changed between replays; a host sync inside a capture is an error;
 * a host copy inside a capture is refused and fails the capture, even after
 * later ops succeed; flip, pad and repeat capture and replay; two streams
 * running GEMMs at once each get their own cuBLASLt workspace; replays
 * move the default generator under its lock while another thread draws. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

START_TEST(test_graph_errors_cpu) {
    NB_CK_FAILS(nb_graph_capture_begin(NB_CPU) == NB_OK, NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "graphs"));
    ck_assert(!nb_graph_is_capturing(NB_CPU));
    ck_assert_ptr_null(nb_graph_capture_end(NB_CPU));
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    NB_CK_FAILS(nb_graph_replay(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_graph_free(NULL);
}
END_TEST

/* ---- on a GPU ----------------------------------------------------------------------- */

typedef struct net {
    nb_module *m;
    nb_optimizer *opt;
    nb_tensor *x, *y, *loss_sum; /* static inputs; the summed loss (float64, on the device) */
} net;

static nb_module *make(bool dropout) {
    if (dropout)
        return nb_nn_sequential(nb_nn_linear(784, 256), nb_nn_relu(), nb_nn_dropout(0.3), nb_nn_linear(256, 10));
    return nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                            nb_nn_linear(512, 10));
}

static void net_init(net *n, nb_device dev, bool dropout) {
    nb_manual_seed(7);
    NB_CK_OK(nb_set_default_device(dev));
    n->m = make(dropout);
    n->opt = nb_adam(n->m, (nb_adam_options){.lr = 1e-3});
    n->x = nb_empty(NB_SHAPE(64, 784), NB_F32), n->y = nb_empty(NB_SHAPE(64), NB_I64);
    n->loss_sum = nb_zeros(0, NULL, NB_F64);
    NB_CK_OK(nb_set_default_device(NB_CPU));
    ck_assert_ptr_nonnull(n->opt);
    nb_retain(n->x), nb_retain(n->y), nb_retain(n->loss_sum);
}

static void net_free(net *n) {
    nb_optimizer_free(n->opt);
    nb_module_free(n->m);
    nb_release(n->x), nb_release(n->y), nb_release(n->loss_sum);
}

/* Batch k's data (a function of k alone), copied into the static inputs. */
static void feed(net *n, int k) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(1000 + (uint64_t)k);
    nb_device dev = nb_device_of(n->x);
    nb_tensor *x = nb_randn_on(NB_SHAPE(64, 784), NB_F32, &g, dev);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand_on(NB_SHAPE(64), NB_F64, &g, dev), 9.999), NB_I64);
    NB_CK_OK(nb_copy_(n->x, x));
    NB_CK_OK(nb_copy_(n->y, y));
    nb_scope_end(s);
}

/* One training step on the static inputs; the loss is added to loss_sum in place. */
static nb_status step(net *n) {
    nb_scope *s = nb_scope_begin();
    nb_optimizer_zero_grad(n->opt);
    nb_tensor *loss = nb_cross_entropy(nb_forward(n->m, n->x), n->y);
    nb_status st = loss ? nb_backward(loss) : nb_last_status();
    if (!st) st = nb_optimizer_step(n->opt);
    nb_tensor *sum = st ? NULL : nb_add(n->loss_sum, nb_to_dtype(nb_detach(loss), NB_F64));
    if (!st) st = sum ? nb_copy_(n->loss_sum, sum) : nb_last_status();
    nb_scope_end(s);
    return st;
}

/* Every parameter of a and b: bitwise equal. */
static void ck_same_params(nb_module *a, nb_module *b) {
    int k = nb_module_parameters(a, NULL, 0);
    nb_named_tensor pa[16], pb[16];
    ck_assert_int_le(k, 16);
    nb_module_parameters(a, pa, k), nb_module_parameters(b, pb, k);
    for (int i = 0; i < k; i++) {
        int64_t m = nb_numel(pa[i].tensor);
        float *ha = malloc(sizeof(float) * (size_t)m), *hb = malloc(sizeof(float) * (size_t)m);
        NB_CK_OK(nb_to_host(pa[i].tensor, ha, sizeof(float) * (size_t)m));
        NB_CK_OK(nb_to_host(pb[i].tensor, hb, sizeof(float) * (size_t)m));
        ck_assert_msg(!memcmp(ha, hb, sizeof(float) * (size_t)m), "parameter %s differs between eager and graph",
                      pa[i].name);
        free(ha), free(hb);
    }
}

/* The lr of step k of n: 1e-3 cosine-annealed. */
static double cosine_lr(int k, int n) {
    return 0.5e-3 * (1 + cos(3.14159265358979323846 * k / n));
}

/* 100 steps eagerly, and 3 eager warm-up steps + 97 replays of a captured
 * one, from the same seed and data: the same parameters and loss sum.
 * With `lr_change`, the lr follows a cosine schedule set before every step,
 * the captured one included (as the examples' --cuda-graph does). */
static uint64_t eager_vs_graph(nb_device dev, bool dropout, bool lr_change, bool fuse) {
    uint64_t launches = 0; /* kernels the capture launched (recorded into the graph) */
    enum { STEPS = 100, WARM = 3 };
    net e, g;
    net_init(&e, dev, dropout);
    for (int k = 0; k < STEPS; k++) {
        if (lr_change) NB_CK_OK(nb_optimizer_set_lr(e.opt, cosine_lr(k, STEPS)));
        feed(&e, k);
        NB_CK_OK(step(&e));
    }
    /* the graph run: the same seed (net_init), so the same weights and masks */
    net_init(&g, dev, dropout);
    nb_graph *gr = NULL;
    for (int k = 0; k < STEPS; k++) {
        if (lr_change) NB_CK_OK(nb_optimizer_set_lr(g.opt, cosine_lr(k, STEPS)));
        feed(&g, k);
        if (k < WARM) {
            NB_CK_OK(step(&g));
            continue;
        }
        if (!gr) {
            uint64_t l0 = nb_device_counters_get(dev).kernel_launches;
            NB_CK_OK(nb_graph_capture_begin_with(dev, &(nb_graph_options){.fuse = fuse}));
            ck_assert(nb_graph_is_capturing(dev));
            NB_CK_OK(step(&g));
            gr = nb_graph_capture_end(dev);
            launches = nb_device_counters_get(dev).kernel_launches - l0;
            ck_assert_msg(gr != NULL, "capture: %s", nb_last_error());
            ck_assert(!nb_graph_is_capturing(dev));
        }
        NB_CK_OK(nb_graph_replay(gr));
    }
    NB_CK_OK(nb_device_synchronize(dev));
    ck_same_params(e.m, g.m);
    ck_assert(nb_item(e.loss_sum) == nb_item(g.loss_sum));
    nb_graph_free(gr);
    net_free(&e), net_free(&g);
    return launches;
}

START_TEST(test_graph_mlp_bitwise) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) eager_vs_graph(NB_CUDA(i), false, false, false);
}
END_TEST

START_TEST(test_graph_dropout_lr_bitwise) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) eager_vs_graph(NB_CUDA(i), true, true, false);
}
END_TEST

/* nb_graph_options.fuse: the same bits as the eager steps, with fewer
 * kernels in the graph than the plain capture's. */
START_TEST(test_graph_fused_bitwise) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        uint64_t plain = eager_vs_graph(NB_CUDA(i), true, true, false);
        uint64_t fused = eager_vs_graph(NB_CUDA(i), true, true, true);
        ck_assert_msg(fused < plain, "fused capture: %llu kernels, plain %llu", (unsigned long long)fused,
                      (unsigned long long)plain);
        eager_vs_graph(NB_CUDA(i), false, false, true);
    }
}
END_TEST

START_TEST(test_graph_sync_in_capture) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        nb_scope *s = nb_scope_begin();
        nb_tensor *a = nb_full_on(NB_SHAPE(1), 1, NB_F32, dev);
        NB_CK_OK(nb_graph_capture_begin(dev));
        NB_CK_FAILS(nb_graph_capture_begin(dev) == NB_OK, NB_ERR_STATE);
        nb_tensor *b = nb_add(a, a);
        ck_assert_ptr_nonnull(b);
        ck_assert(isnan(nb_item(b))); /* a host read inside a capture */
        ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
        nb_graph *g = nb_graph_capture_end(dev);
        ck_assert_ptr_null(g); /* the failed read failed the capture */
        nb_graph_free(g);
        nb_scope_end(s);
    }
}
END_TEST

/* Host copies (nb_item, nb_from_data) inside a capture are refused before
 * anything is enqueued, and the capture fails at its end even when later
 * ops succeeded (they clear the error): no graph replays a host copy. */
START_TEST(test_graph_host_copy_refused) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        nb_scope *s = nb_scope_begin();
        nb_tensor *a = nb_full_on(NB_SHAPE(4), 1, NB_F32, dev);
        NB_CK_OK(nb_graph_capture_begin(dev));
        ck_assert(isnan(nb_item(nb_sum(a, NULL, 0, false))));
        ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
        NB_CK_NOTNULL(nb_add(a, a)); /* succeeds, and clears the error */
        ck_assert_int_eq(nb_last_status(), NB_OK);
        ck_assert_ptr_null(nb_graph_capture_end(dev));
        ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
        /* an upload inside a capture: refused too */
        NB_CK_OK(nb_graph_capture_begin(dev));
        ck_assert_ptr_null(nb_from_data_on((float[]){1, 2}, NB_SHAPE(2), NB_F32, dev));
        ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
        NB_CK_NOTNULL(nb_mul(a, a));
        ck_assert_ptr_null(nb_graph_capture_end(dev));
        /* eager copies work again after the capture */
        ck_assert(nb_item(nb_sum(a, NULL, 0, false)) == 4);
        nb_scope_end(s);
    }
}
END_TEST

/* flip, pad (reflect, replicate, circular) and repeat build their indices on
 * the device: captured once, a replay gives the eager result for new input. */
START_TEST(test_graph_index_ops_replay) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_full_on(NB_SHAPE(2, 5), 0, NB_F32, dev), *out = nb_full_on(NB_SHAPE(4, 2, 10), 0, NB_F32, dev);
        nb_tensor *fresh = nb_randn(NB_SHAPE(2, 5), NB_F32, NULL);
        NB_CK_NOTNULL(out);
        NB_CK_OK(nb_graph_capture_begin(dev));
        nb_scope *cs = nb_scope_begin();
        nb_tensor *parts[4] = {
            nb_pad(nb_flip(x, (int[]){1}, 1), (int64_t[]){3, 2}, 2, NB_PAD_REFLECT, 0),
            nb_pad(x, (int64_t[]){2, 3}, 2, NB_PAD_REPLICATE, 0),
            nb_pad(x, (int64_t[]){4, 1}, 2, NB_PAD_CIRCULAR, 0),
            nb_repeat(x, (int64_t[]){1, 2}, 2),
        };
        for (int k = 0; k < 4; k++) NB_CK_NOTNULL(parts[k]);
        NB_CK_OK(nb_copy_(out, nb_stack(parts, 4, 0)));
        nb_scope_end(cs);
        nb_graph *g = nb_graph_capture_end(dev);
        NB_CK_NOTNULL(g);
        NB_CK_OK(nb_copy_(x, fresh));
        NB_CK_OK(nb_graph_replay(g));
        nb_tensor *xc = nb_to_device(x, NB_CPU);
        nb_tensor *want[4] = {
            nb_pad(nb_flip(xc, (int[]){1}, 1), (int64_t[]){3, 2}, 2, NB_PAD_REFLECT, 0),
            nb_pad(xc, (int64_t[]){2, 3}, 2, NB_PAD_REPLICATE, 0),
            nb_pad(xc, (int64_t[]){4, 1}, 2, NB_PAD_CIRCULAR, 0),
            nb_repeat(xc, (int64_t[]){1, 2}, 2),
        };
        nb_tensor *diff = nb_sub(nb_to_device(out, NB_CPU), nb_stack(want, 4, 0));
        ck_assert(nb_item(nb_sum(nb_abs(diff), NULL, 0, false)) == 0);
        nb_graph_free(g);
        nb_scope_end(s);
    }
}
END_TEST

/* Draws from the default generator on the CPU, n times. */
enum { DRAWS = 3000, DRAW_N = 6 };
static void *draw_default(void *arg) {
    (void)arg;
    for (int k = 0; k < DRAWS; k++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *t = nb_rand(NB_SHAPE(DRAW_N), NB_F32, NULL);
        nb_scope_end(s);
        if (!t) return (void *)1;
    }
    return NULL;
}

/* A captured fill from the default generator replayed while another thread
 * draws from it: no move is lost (each replay takes its blocks under the
 * generator's lock, as nb_generator_advance does), so the offset ends at
 * the start plus every replay's and every draw's blocks. */
START_TEST(test_graph_replay_default_generator_threads) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(11);
        nb_tensor *t = nb_full_on(NB_SHAPE(1000), 0, NB_F32, dev);
        NB_CK_NOTNULL(t);
        NB_CK_OK(nb_graph_capture_begin(dev));
        nb_status fill = nb_uniform_(t, 0, 1, NULL);
        nb_graph *g = nb_graph_capture_end(dev);
        NB_CK_OK(fill);
        NB_CK_NOTNULL(g);
        const uint64_t start = nb_default_generator()->offset;
        enum { REPLAYS = 3000 };
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, draw_default, NULL), 0);
        for (int k = 0; k < REPLAYS; k++) NB_CK_OK(nb_graph_replay(g));
        void *r = NULL;
        ck_assert_int_eq(pthread_join(th, &r), 0);
        ck_assert_ptr_null(r);
        NB_CK_OK(nb_device_synchronize(dev));
        ck_assert_uint_eq(nb_default_generator()->offset, start + REPLAYS * 500 + DRAWS * (DRAW_N / 2));
        nb_graph_free(g);
        nb_scope_end(s);
    }
}
END_TEST

/* GEMMs with a bias (cuBLASLt, bfloat16; a long k over a small output, so
 * split-K with a workspace) queued on two streams behind one gate, so that
 * they run at the same time, give the bits of the same GEMMs run one after
 * another. */
START_TEST(test_two_streams_gemm) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        enum { ROUNDS = 16 };
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(17);
        nb_tensor *x[2], *w[2], *b[2], *want[2], *got[2][ROUNDS];
        for (int k = 0; k < 2; k++) {
            x[k] = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64, 65536), NB_F32, NULL), dev), NB_BF16);
            w[k] = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64, 65536), NB_F32, NULL), dev), NB_BF16);
            b[k] = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64), NB_F32, NULL), dev), NB_BF16);
            want[k] = nb_linear(x[k], w[k], b[k]); /* one after another, on the compute stream */
            NB_CK_NOTNULL(want[k]);
        }
        NB_CK_OK(nb_device_synchronize(dev));
        nb_stream *st[2] = {nb_stream_new(dev), nb_stream_new(dev)}, *gate = nb_stream_new(dev);
        nb_event *open = nb_event_new(dev);
        NB_CK_NOTNULL(st[0]);
        NB_CK_NOTNULL(st[1]);
        NB_CK_NOTNULL(gate);
        /* the gate: a few milliseconds of work, then an event both streams wait for */
        NB_CK_OK(nb_set_current_stream(gate));
        nb_tensor *busy = nb_full_on(NB_SHAPE(1 << 26), 1, NB_F32, dev);
        NB_CK_NOTNULL(busy);
        for (int r = 0; r < 32; r++) NB_CK_OK(nb_mul_scalar_(busy, 1.0));
        NB_CK_OK(nb_event_record(open, gate));
        for (int k = 0; k < 2; k++) NB_CK_OK(nb_stream_wait_event(st[k], open));
        for (int r = 0; r < ROUNDS; r++)
            for (int k = 0; k < 2; k++) { /* both streams busy at once */
                NB_CK_OK(nb_set_current_stream(st[k]));
                got[k][r] = nb_linear(x[k], w[k], b[k]);
                NB_CK_NOTNULL(got[k][r]);
            }
        NB_CK_OK(nb_set_current_stream(nb_stream_compute(dev)));
        for (int k = 0; k < 2; k++) NB_CK_OK(nb_stream_synchronize(st[k]));
        int bad = 0;
        for (int k = 0; k < 2; k++)
            for (int r = 0; r < ROUNDS; r++) bad += nb_item(nb_sum(nb_ne(got[k][r], want[k]), NULL, 0, false)) != 0;
        ck_assert_msg(bad == 0, "%d of %d GEMMs on two streams differ from the serial ones", bad, 2 * ROUNDS);
        NB_CK_OK(nb_device_synchronize(dev));
        nb_event_free(open);
        nb_scope_end(s);
        nb_stream_free(st[0]), nb_stream_free(st[1]), nb_stream_free(gate);
    }
}
END_TEST

/* A bias GEMM whose first run on a stream is inside a capture replays with
 * the bits of the eager one (cuBLASLt, with a workspace made then). */
START_TEST(test_graph_gemm_fresh_stream) {
    for (int i = 0; i < nb_device_count(NB_DEVICE_CUDA); i++) {
        nb_device dev = NB_CUDA(i);
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(23);
        nb_tensor *x = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64, 8192), NB_F32, NULL), dev), NB_BF16);
        nb_tensor *w = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64, 8192), NB_F32, NULL), dev), NB_BF16);
        nb_tensor *b = nb_to_dtype(nb_to_device(nb_randn(NB_SHAPE(64), NB_F32, NULL), dev), NB_BF16);
        nb_tensor *want = nb_linear(x, w, b), *y = nb_full_on(NB_SHAPE(64, 64), 0, NB_BF16, dev);
        NB_CK_NOTNULL(want);
        NB_CK_NOTNULL(y);
        nb_stream *st = nb_stream_new(dev);
        NB_CK_NOTNULL(st);
        NB_CK_OK(nb_stream_wait_stream(st, nb_stream_compute(dev)));
        NB_CK_OK(nb_set_current_stream(st));
        NB_CK_OK(nb_graph_capture_begin(dev));
        nb_scope *cs = nb_scope_begin();
        NB_CK_OK(nb_copy_(y, nb_linear(x, w, b)));
        nb_scope_end(cs);
        nb_graph *g = nb_graph_capture_end(dev);
        NB_CK_NOTNULL(g);
        NB_CK_OK(nb_graph_replay(g));
        NB_CK_OK(nb_stream_synchronize(st));
        NB_CK_OK(nb_set_current_stream(nb_stream_compute(dev)));
        ck_assert(nb_item(nb_sum(nb_ne(y, want), NULL, 0, false)) == 0);
        nb_graph_free(g);
        nb_scope_end(s);
        nb_stream_free(st);
    }
}
END_TEST

Suite *nb_suite_graph(void) {
    Suite *s = suite_create("graph");
    TCase *c = tcase_create("graph");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, test_graph_errors_cpu);
    tcase_add_test(c, test_graph_mlp_bitwise);
    tcase_add_test(c, test_graph_dropout_lr_bitwise);
    tcase_add_test(c, test_graph_fused_bitwise);
    tcase_add_test(c, test_graph_sync_in_capture);
    tcase_add_test(c, test_graph_host_copy_refused);
    tcase_add_test(c, test_graph_index_ops_replay);
    tcase_add_test(c, test_two_streams_gemm);
    tcase_add_test(c, test_graph_gemm_fresh_stream);
    tcase_add_test(c, test_graph_replay_default_generator_threads);
    suite_add_tcase(s, c);
    return s;
}
