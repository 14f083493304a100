/* test_cuda_runtime.c - the CUDA runtime beyond one GPU, one host thread and
 * one stream (issue 28): a CPU-only program makes no CUDA context, and a
 * device gets one on its first use only; tensors on two GPUs in one thread
 * (the device guard); two host threads with their own streams running
 * cuBLAS, cuBLASLt and cuDNN at once (per-thread handles); streams freed and
 * made again past the per-device limit; a side stream that joins a capture
 * allocates from the graph's pool; a block recorded on a captured side
 * stream and freed during the capture; optimizers that cannot be captured
 * are refused; an optimizer's device state outlives nb_optimizer_add_param_group
 * for a graph captured before; a view copied to the host on the copy stream
 * and a copy from pinned host memory are ordered; nonzero's host count and
 * NB_SYNC_DEBUG inside a capture; an NCCL world whose second rank never
 * starts fails after NB_DIST_TIMEOUT instead of hanging. Every case skips without a GPU; the two-GPU cases skip with one. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

static int n_gpus(void) { return nb_device_count(NB_DEVICE_CUDA); }

/* Every element of a and b (any devices) equal. */
static bool same(nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *d = nb_ne(nb_to_device(a, NB_CPU), nb_to_device(b, NB_CPU));
    bool eq = d && nb_item(nb_sum(d, NULL, 0, false)) == 0;
    nb_scope_end(s);
    return eq;
}

/* ---- no context until a device is used (item 4) --------------------------------------- */

/* The driver's view of device d's primary context (libcuda, loaded here so
 * the test needs no CUDA at build time): 1 active, 0 not, -1 unknown. */
static int primary_ctx_active(int d) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    int (*init)(unsigned), (*get)(int *, int), (*state)(int, unsigned *, int *);
    /* POSIX's way from dlsym to a function pointer (ISO C has no cast for it) */
    *(void **)&init = dlsym(lib, "cuInit");
    *(void **)&get = dlsym(lib, "cuDeviceGet");
    *(void **)&state = dlsym(lib, "cuDevicePrimaryCtxGetState");
    int dev = 0, active = -1;
    unsigned flags = 0;
    if (!init || !get || !state || init(0) || get(&dev, d) || state(dev, &flags, &active)) active = -1;
    return active;
}

static bool forked(void) {
    const char *f = getenv("CK_FORK");
    return !f || strcmp(f, "no") != 0; /* without a fork, earlier cases made contexts */
}

START_TEST(test_cpu_program_makes_no_context) {
    if (!forked() || primary_ctx_active(0) < 0) return; /* no driver, or a process that used CUDA already */
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((float[]){1, 2, 3, 4}, NB_SHAPE(4), NB_F32);
    ck_assert(nb_item(nb_sum(x, NULL, 0, false)) == 10);
    int n = n_gpus(); /* counting devices makes no context either */
    for (int d = 0; d < n; d++) ck_assert_msg(primary_ctx_active(d) == 0, "cuda:%d has a context after CPU work", d);
    if (n > 0) { /* the first tensor on cuda:0 makes its context, and no other */
        ck_assert(nb_item(nb_sum(nb_to_device(x, NB_CUDA(0)), NULL, 0, false)) == 10);
        ck_assert_int_eq(primary_ctx_active(0), 1);
        for (int d = 1; d < n; d++) ck_assert_int_eq(primary_ctx_active(d), 0);
    }
    nb_scope_end(s);
}
END_TEST

/* ---- two GPUs in one thread (item 3) ---------------------------------------------------- */

START_TEST(test_two_devices_one_thread) {
    if (n_gpus() < 2) return;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *a = nb_randn(NB_SHAPE(256, 256), NB_F32, NULL), *b = nb_randn(NB_SHAPE(256, 256), NB_F32, NULL);
    nb_tensor *want = nb_relu(nb_matmul(a, b));
    for (int r = 0; r < 3; r++) /* interleaved: each op's device differs from the last one's */
        for (int d = 1; d >= 0; d--) {
            nb_tensor *y = nb_relu(nb_matmul(nb_to_device(a, NB_CUDA(d)), nb_to_device(b, NB_CUDA(d))));
            NB_CK_NOTNULL(y);
            ck_assert_int_eq(nb_device_of(y).index, d);
            nb_tensor *diff = nb_sub(nb_to_device(y, NB_CPU), want);
            ck_assert(nb_item(nb_max(nb_abs(diff), NULL, 0, false)) < 1e-3);
        }
    /* a copy between the GPUs, and a stream of the second GPU made on the first's turn */
    nb_tensor *x1 = nb_to_device(nb_to_device(a, NB_CUDA(0)), NB_CUDA(1));
    ck_assert(same(x1, a));
    nb_stream *st = nb_stream_new(NB_CUDA(1));
    NB_CK_NOTNULL(st);
    NB_CK_OK(nb_set_current_stream(st));
    ck_assert(same(nb_mul_scalar(x1, 2), nb_mul_scalar(a, 2)));
    NB_CK_OK(nb_stream_synchronize(st));
    NB_CK_OK(nb_set_current_stream(nb_stream_compute(NB_CUDA(1))));
    nb_stream_free(st);
    nb_scope_end(s);
}
END_TEST

/* ---- two host threads (items 3 and 11) -------------------------------------------------- */

typedef struct worker {
    nb_device dev;
    int id, bad, rounds;
    nb_status st;
    char why[256];
} worker;

/* Matmuls (cuBLAS), bias GEMMs (cuBLASLt) and convolutions (cuDNN) on the
 * thread's own stream, each checked at once against the thread's first
 * results. Rounds alternate between two sets of inputs, so an output block
 * reused from the round before holds the other set's result: a call that
 * ran on another thread's stream (a shared handle's stream set by the other
 * thread) is read before it has written, and differs. */
static nb_tensor *run_op(worker *w, int op, nb_tensor *const *in) {
    nb_tensor *r = op == 0   ? nb_matmul(in[0], in[1])
                   : op == 1 ? nb_conv2d(in[2], in[3], NULL, (nb_conv2d_options){.padding = {1, 1}})
                             : nb_linear(in[4], in[5], in[6]);
    if (!r && w->st == NB_OK) { /* the first failure, before a later call clears it */
        w->st = nb_last_status() ? nb_last_status() : NB_ERR_STATE;
        snprintf(w->why, sizeof w->why, "op %d: %s", op, nb_last_error());
    }
    return r;
}

static void make_inputs(nb_tensor **in, nb_generator *g, nb_device dev) {
    nb_tensor *a = nb_randn_on(NB_SHAPE(8, 512, 512), NB_F32, g, dev);
    in[0] = a;
    in[1] = nb_randn_on(NB_SHAPE(8, 512, 512), NB_F32, g, dev);
    in[2] = nb_randn_on(NB_SHAPE(16, 32, 32, 32), NB_F32, g, dev);
    in[3] = nb_randn_on(NB_SHAPE(32, 32, 3, 3), NB_F32, g, dev);
    in[4] = nb_to_dtype(a, NB_BF16);
    in[5] = nb_to_dtype(nb_randn_on(NB_SHAPE(256, 512), NB_F32, g, dev), NB_BF16);
    in[6] = nb_to_dtype(nb_randn_on(NB_SHAPE(256), NB_F32, g, dev), NB_BF16);
}

static void *work(void *arg) {
    worker *w = arg;
    nb_scope *s = nb_scope_begin();
    nb_stream *st = nb_stream_new(w->dev);
    if (!st || nb_set_current_stream(st)) {
        w->st = NB_ERR_DEVICE;
        snprintf(w->why, sizeof w->why, "stream: %s", nb_last_error());
        nb_scope_end(s);
        return NULL;
    }
    nb_generator g = nb_generator_new(100 + (uint64_t)w->id);
    nb_tensor *in[2][7], *ref[2][3];
    for (int k = 0; k < 2; k++) {
        make_inputs(in[k], &g, w->dev);
        for (int i = 0; i < 3; i++) ref[k][i] = run_op(w, i, in[k]);
    }
    if (w->st == NB_OK && nb_stream_synchronize(st)) w->st = nb_last_status();
    for (int r = 0; r < w->rounds && w->st == NB_OK; r++) {
        nb_scope *rs = nb_scope_begin();
        for (int i = 0; i < 3 && w->st == NB_OK; i++) {
            nb_tensor *got = run_op(w, i, in[r % 2]);
            nb_tensor *ne = got ? nb_sum(nb_ne(got, ref[r % 2][i]), NULL, 0, false) : NULL;
            if (ne) w->bad += nb_item(ne) != 0;
        }
        nb_scope_end(rs);
    }
    nb_set_current_stream(nb_stream_compute(w->dev));
    nb_scope_end(s);
    nb_stream_free(st);
    return NULL;
}

static void run_workers(nb_device d0, nb_device d1) {
    worker w[2] = {{.dev = d0, .id = 0, .rounds = 60}, {.dev = d1, .id = 1, .rounds = 60}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(w[i].st == NB_OK, "thread %d failed: %s", i, w[i].why);
        ck_assert_msg(w[i].bad == 0, "thread %d: %d results of %d differ", i, w[i].bad, 3 * w[i].rounds);
    }
}

START_TEST(test_two_threads_one_device) {
    if (n_gpus() < 1) return;
    run_workers(NB_CUDA(0), NB_CUDA(0));
}
END_TEST

START_TEST(test_two_threads_two_devices) {
    if (n_gpus() < 2) return;
    run_workers(NB_CUDA(0), NB_CUDA(1)); /* the second thread never names its device to CUDA */
}
END_TEST

/* ---- streams are freed (item 14) -------------------------------------------------------- */

START_TEST(test_stream_free_releases) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_full_on(NB_SHAPE(1024), 1, NB_F32, dev);
    for (int i = 0; i < 200; i++) { /* far past the streams alive at once */
        nb_stream *st = nb_stream_new(dev);
        ck_assert_msg(st != NULL, "stream %d: %s", i, nb_last_error());
        NB_CK_OK(nb_set_current_stream(st));
        NB_CK_OK(nb_add_(x, x));
        nb_stream_free(st); /* current: the compute stream is current again */
        ck_assert_ptr_eq(nb_current_stream(dev), nb_stream_compute(dev));
        NB_CK_OK(nb_mul_scalar_(x, 0.5));
    }
    ck_assert(nb_item(nb_sum(x, NULL, 0, false)) == 1024);
    nb_scope_end(s);
}
END_TEST

/* ---- allocations of a capture's side stream (items 5 and 6) ----------------------------- */

/* A side stream joins the capture (it waits on the captured stream); what
 * it allocates comes from the graph's pool, so an eager tensor made later on
 * that stream is not overwritten by replays. */
START_TEST(test_capture_side_stream_pool) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    enum { N = 1 << 16 };
    nb_scope *s = nb_scope_begin();
    nb_stream *side = nb_stream_new(dev);
    NB_CK_NOTNULL(side);
    nb_tensor *x = nb_full_on(NB_SHAPE(N), 3, NB_F32, dev), *y = nb_full_on(NB_SHAPE(N), 0, NB_F32, dev);
    NB_CK_OK(nb_device_synchronize(dev));
    nb_stream *main_s = nb_current_stream(dev);
    NB_CK_OK(nb_graph_capture_begin(dev));
    NB_CK_OK(nb_stream_wait_stream(side, main_s)); /* the side stream joins the capture */
    NB_CK_OK(nb_set_current_stream(side));
    nb_scope *cs = nb_scope_begin();
    nb_tensor *t = nb_mul_scalar(x, 2); /* allocated on the side stream, freed below */
    NB_CK_OK(nb_copy_(y, t));
    nb_scope_end(cs);
    NB_CK_OK(nb_set_current_stream(main_s));
    NB_CK_OK(nb_stream_wait_stream(main_s, side)); /* and rejoins */
    nb_graph *g = nb_graph_capture_end(dev);
    ck_assert_msg(g != NULL, "capture: %s", nb_last_error());
    /* an eager tensor of the same size on the side stream */
    NB_CK_OK(nb_set_current_stream(side));
    nb_tensor *e = nb_full_on(NB_SHAPE(N), 7, NB_F32, dev);
    NB_CK_OK(nb_stream_synchronize(side));
    NB_CK_OK(nb_set_current_stream(main_s));
    for (int r = 0; r < 3; r++) NB_CK_OK(nb_graph_replay(g));
    NB_CK_OK(nb_device_synchronize(dev));
    ck_assert(nb_item(nb_sum(e, NULL, 0, false)) == 7.0 * N);
    ck_assert(nb_item(nb_sum(y, NULL, 0, false)) == 6.0 * N);
    nb_graph_free(g);
    nb_scope_end(s);
    nb_stream_free(side);
}
END_TEST

/* A tensor of the captured stream used on a joined side stream
 * (nb_record_stream) and freed during the capture: no event is queried or
 * recorded mid-capture (which would invalidate it), the capture ends and
 * replays right, and the block is reused only after its uses. */
START_TEST(test_capture_recorded_free) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    enum { N = 1 << 14 };
    nb_scope *s = nb_scope_begin();
    nb_stream *side = nb_stream_new(dev);
    NB_CK_NOTNULL(side);
    nb_tensor *x = nb_full_on(NB_SHAPE(N), 1, NB_F32, dev), *y = nb_full_on(NB_SHAPE(N), 0, NB_F32, dev);
    /* a block pending on an eager event before the capture: its last
     * reference is ours, given up mid-capture */
    nb_scope *ps = nb_scope_begin();
    nb_tensor *p = nb_full_on(NB_SHAPE(N), 1, NB_F32, dev);
    nb_retain(p);
    nb_scope_end(ps);
    NB_CK_OK(nb_record_stream(p, side));
    NB_CK_OK(nb_device_synchronize(dev));
    nb_stream *main_s = nb_current_stream(dev);
    NB_CK_OK(nb_graph_capture_begin(dev));
    nb_scope *cs = nb_scope_begin();
    nb_tensor *t = nb_add_scalar(x, 1); /* 2, on the captured stream */
    NB_CK_OK(nb_stream_wait_stream(side, main_s));
    NB_CK_OK(nb_set_current_stream(side));
    NB_CK_OK(nb_copy_(y, nb_mul_scalar(t, 3))); /* 6, on the side stream */
    NB_CK_OK(nb_record_stream(t, side));
    NB_CK_OK(nb_set_current_stream(main_s));
    nb_scope_end(cs); /* t freed mid-capture, used by the side stream */
    nb_release(p);    /* an eager pending block: no event query while capturing */
    NB_CK_NOTNULL(nb_add_scalar(x, 5)); /* an allocation on the captured stream */
    NB_CK_OK(nb_stream_wait_stream(main_s, side));
    nb_graph *g = nb_graph_capture_end(dev);
    ck_assert_msg(g != NULL, "capture: %s", nb_last_error());
    NB_CK_OK(nb_graph_replay(g));
    NB_CK_OK(nb_device_synchronize(dev));
    ck_assert(nb_item(nb_sum(y, NULL, 0, false)) == 6.0 * N);
    nb_graph_free(g);
    nb_scope_end(s);
    nb_stream_free(side);
}
END_TEST

/* ---- optimizers in a capture (items 7 and 8) -------------------------------------------- */

/* One eager step of opt on p with gradient 1, then one inside a capture:
 * the status of the captured step. */
static nb_status capture_step(nb_device dev, nb_optimizer *opt, nb_tensor *p) {
    nb_scope *s = nb_scope_begin();
    NB_CK_OK(nb_tensor_set_grad(p, nb_full_on(NB_SHAPE(4, 4), 1, NB_F32, dev), false)); /* p's shape, any layout */
    NB_CK_OK(nb_optimizer_step(opt));
    NB_CK_OK(nb_graph_capture_begin(dev));
    nb_status st = nb_optimizer_step(opt);
    char why[256];
    snprintf(why, sizeof why, "%s", nb_last_error());
    nb_graph *g = nb_graph_capture_end(dev);
    if (st == NB_OK) ck_assert_msg(g != NULL, "capture: %s", nb_last_error());
    nb_graph_free(g);
    nb_set_error(st, "%s", why);
    nb_scope_end(s);
    return st;
}

START_TEST(test_uncapturable_optimizers_refused) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *p = nb_full_on(NB_SHAPE(4, 4), 1, NB_F32, dev);
    nb_set_requires_grad(p, true);
    nb_optimizer *opt = nb_rmsprop_params(&p, 1, (nb_rmsprop_options){.lr = 1e-2});
    NB_CK_NOTNULL(opt);
    ck_assert_int_eq(capture_step(dev, opt, p), NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cannot be captured"));
    nb_optimizer_free(opt);
    /* Adam captures, but not a non-contiguous parameter */
    opt = nb_adam_params(&p, 1, (nb_adam_options){.lr = 1e-2});
    ck_assert_int_eq(capture_step(dev, opt, p), NB_OK);
    nb_optimizer_free(opt);
    nb_tensor *leaf = nb_detach(nb_transpose(p, 0, 1)); /* a non-contiguous leaf */
    nb_set_requires_grad(leaf, true);
    opt = nb_adam_params(&leaf, 1, (nb_adam_options){.lr = 1e-2});
    ck_assert_int_eq(capture_step(dev, opt, leaf), NB_ERR_STATE);
    nb_optimizer_free(opt);
    nb_scope_end(s);
}
END_TEST

/* A graph of Adam's step keeps working after nb_optimizer_add_param_group
 * and eager steps in between: the same bits as a twin stepped eagerly. */
START_TEST(test_optimizer_grows_after_capture) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *init = nb_randn_on(NB_SHAPE(4, 4), NB_F32, NULL, dev);
    nb_tensor *p = nb_mul_scalar(init, 1), *twin = nb_mul_scalar(init, 1);
    nb_tensor *extra = nb_full_on(NB_SHAPE(8), 1, NB_F32, dev);
    nb_set_requires_grad(p, true), nb_set_requires_grad(twin, true), nb_set_requires_grad(extra, true);
    nb_optimizer *opt = nb_adam_params(&p, 1, (nb_adam_options){.lr = 1e-2});
    nb_optimizer *ref = nb_adam_params(&twin, 1, (nb_adam_options){.lr = 1e-2});
    nb_tensor *gp = nb_full_on(NB_SHAPE(4, 4), 0.5, NB_F32, dev), *ge = nb_full_on(NB_SHAPE(8), 0.25, NB_F32, dev);
    NB_CK_OK(nb_tensor_set_grad(p, gp, false));
    NB_CK_OK(nb_tensor_set_grad(twin, gp, false));
    NB_CK_OK(nb_optimizer_step(opt));
    NB_CK_OK(nb_optimizer_step(ref));
    NB_CK_OK(nb_graph_capture_begin(dev));
    NB_CK_OK(nb_optimizer_step(opt));
    nb_graph *g = nb_graph_capture_end(dev);
    ck_assert_msg(g != NULL, "capture: %s", nb_last_error());
    for (int r = 0; r < 2; r++) {
        NB_CK_OK(nb_graph_replay(g));
        NB_CK_OK(nb_optimizer_step(ref));
    }
    NB_CK_OK(nb_optimizer_add_param_group(opt, &(nb_param_group){&extra, 1, NULL}));
    NB_CK_OK(nb_tensor_set_grad(extra, ge, false));
    NB_CK_OK(nb_optimizer_step(opt));
    NB_CK_OK(nb_optimizer_step(ref)); /* eager, with the new group */
    nb_scope *fs = nb_scope_begin();
    for (int r = 0; r < 16; r++) nb_full_on(NB_SHAPE(64), 9, NB_F64, dev); /* reuse anything freed */
    nb_scope_end(fs);
    for (int r = 0; r < 3; r++) {
        NB_CK_OK(nb_graph_replay(g));
        NB_CK_OK(nb_optimizer_step(ref));
    }
    NB_CK_OK(nb_device_synchronize(dev));
    ck_assert_msg(same(p, twin), "the graph's parameter differs from its eagerly stepped twin");
    nb_graph_free(g);
    nb_optimizer_free(opt), nb_optimizer_free(ref);
    nb_scope_end(s);
}
END_TEST

/* ---- host copies and streams (item 9) ------------------------------------------------------ */

/* A few milliseconds of work on the current stream, so what follows on it
 * runs late. */
static void keep_busy(nb_device dev) {
    nb_tensor *busy = nb_full_on(NB_SHAPE(1 << 26), 1, NB_F32, dev);
    NB_CK_NOTNULL(busy);
    for (int r = 0; r < 32; r++) NB_CK_OK(nb_mul_scalar_(busy, 1.0));
}

/* A non-contiguous view copied to the host on the copy stream: the copy
 * waits for the contiguous copy made on the current stream. */
START_TEST(test_to_host_async_view_on_copy_stream) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    enum { R = 1024, C = 2048 };
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_full_on(NB_SHAPE(R, C), 0, NB_F32, dev);
    NB_CK_OK(nb_device_synchronize(dev));
    float *host = nb_host_alloc(dev, sizeof(float) * R * C);
    NB_CK_NOTNULL(host);
    keep_busy(dev);
    NB_CK_OK(nb_fill_(x, 3)); /* runs late, behind the busy work */
    nb_stream *cs = nb_stream_copy(dev);
    NB_CK_OK(nb_to_host_async(nb_transpose(x, 0, 1), host, sizeof(float) * R * C, cs));
    NB_CK_OK(nb_stream_synchronize(cs));
    int wrong = 0;
    for (int i = 0; i < R * C; i++) wrong += host[i] != 3;
    ck_assert_msg(wrong == 0, "%d of %d elements read before the copy was made", wrong, R * C);
    NB_CK_OK(nb_device_synchronize(dev));
    nb_host_free(dev, host);
    nb_scope_end(s);
}
END_TEST

/* nb_copy_from_host from pinned memory has read it when it returns (it is
 * the synchronous form): the buffer may be rewritten at once. */
START_TEST(test_copy_from_pinned_host_is_synchronous) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    enum { N = 1 << 22 };
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_full_on(NB_SHAPE(N), 0, NB_F32, dev);
    float *host = nb_host_alloc(dev, sizeof(float) * N);
    NB_CK_NOTNULL(host);
    for (int i = 0; i < N; i++) host[i] = 1;
    keep_busy(dev);
    NB_CK_OK(nb_copy_from_host(t, host, sizeof(float) * N));
    for (int i = 0; i < N; i++) host[i] = 2; /* the caller reuses its buffer */
    ck_assert(nb_item(nb_sum(t, NULL, 0, false)) == (double)N);
    nb_host_free(dev, host);
    nb_scope_end(s);
}
END_TEST

/* ---- NCCL failures (item 10) ------------------------------------------------------------ */

/* A world of 2 whose rank 1 never starts: rank 0's communicator start-up is
 * aborted after NB_DIST_TIMEOUT and nb_distributed_init fails instead of
 * waiting forever (without the watchdog this case hangs until Check's
 * timeout kills it). */
START_TEST(test_nccl_rank_never_joins) {
    if (n_gpus() < 1 || !nb_distributed_available(NB_DIST_NCCL) || !forked()) return;
    char path[64];
    snprintf(path, sizeof path, "/tmp/nb_nccl_id_%d", (int)getpid());
    setenv("WORLD_SIZE", "2", 1), setenv("RANK", "0", 1), setenv("NB_DIST_TIMEOUT", "3", 1);
    nb_process_group *pg = nb_distributed_init((nb_distributed_options){.device = NB_CUDA(0), .init_file = path});
    ck_assert_ptr_null(pg);
    ck_assert_int_eq(nb_last_status(), NB_ERR_DEVICE);
    ck_assert_msg(strstr(nb_last_error(), "NB_DIST_TIMEOUT") != NULL, "%s", nb_last_error());
    unsetenv("WORLD_SIZE"), unsetenv("RANK");
    remove(path);
    /* a one-rank group on the non-blocking communicator, with its watchdog */
    nb_scope *s = nb_scope_begin();
    pg = nb_distributed_init((nb_distributed_options){.device = NB_CUDA(0)});
    ck_assert_msg(pg != NULL, "%s", nb_last_error());
    nb_tensor *t = nb_full_on(NB_SHAPE(1000), 2, NB_F32, NB_CUDA(0));
    NB_CK_OK(nb_all_reduce(pg, t, NB_DIST_SUM));
    NB_CK_OK(nb_barrier(pg));
    ck_assert(nb_item(nb_sum(t, NULL, 0, false)) == 2000);
    nb_distributed_destroy(pg);
    nb_scope_end(s);
}
END_TEST

/* ---- errors in a capture (item 13) ------------------------------------------------------ */

START_TEST(test_nonzero_in_capture) {
    if (n_gpus() < 1) return;
    nb_device dev = NB_CUDA(0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_full_on(NB_SHAPE(8), 1, NB_F32, dev);
    NB_CK_OK(nb_graph_capture_begin(dev));
    ck_assert_ptr_null(nb_nonzero(x));
    ck_assert_int_eq(nb_last_status(), NB_ERR_STATE);
    ck_assert_ptr_null(nb_graph_capture_end(dev));
    ck_assert_int_eq(nb_numel(nb_nonzero(x)), 8); /* eager again */
    nb_scope_end(s);
}
END_TEST

/* With NB_SYNC_DEBUG=1 a capture still works (nothing waits on the
 * captured stream), and an eager kernel's error names the op. */
START_TEST(test_sync_debug_capture) {
    if (n_gpus() < 1 || !forked()) return; /* the switch is read once per process */
    setenv("NB_SYNC_DEBUG", "1", 1);
    nb_device dev = NB_CUDA(0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_full_on(NB_SHAPE(8), 2, NB_F32, dev), *y = nb_full_on(NB_SHAPE(8), 0, NB_F32, dev);
    NB_CK_OK(nb_graph_capture_begin(dev));
    NB_CK_OK(nb_copy_(y, nb_mul(x, x)));
    nb_graph *g = nb_graph_capture_end(dev);
    ck_assert_msg(g != NULL, "capture with NB_SYNC_DEBUG: %s", nb_last_error());
    NB_CK_OK(nb_graph_replay(g));
    ck_assert(nb_item(nb_sum(y, NULL, 0, false)) == 32);
    nb_graph_free(g);
    nb_tensor *idx = nb_from_data_on((int64_t[]){0, 99}, NB_SHAPE(2), NB_I64, dev);
    ck_assert_ptr_null(nb_index_select(x, 0, idx));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index_select"));
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_cuda_runtime(void) {
    Suite *s = suite_create("cuda_runtime");
    TCase *c = tcase_create("cuda_runtime");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, test_cpu_program_makes_no_context);
    tcase_add_test(c, test_two_devices_one_thread);
    tcase_add_test(c, test_two_threads_one_device);
    tcase_add_test(c, test_two_threads_two_devices);
    tcase_add_test(c, test_stream_free_releases);
    tcase_add_test(c, test_capture_side_stream_pool);
    tcase_add_test(c, test_capture_recorded_free);
    tcase_add_test(c, test_uncapturable_optimizers_refused);
    tcase_add_test(c, test_optimizer_grows_after_capture);
    tcase_add_test(c, test_to_host_async_view_on_copy_stream);
    tcase_add_test(c, test_copy_from_pinned_host_is_synchronous);
    tcase_add_test(c, test_nccl_rank_never_joins);
    tcase_add_test(c, test_nonzero_in_capture);
    tcase_add_test(c, test_sync_debug_capture);
    suite_add_tcase(s, c);
    return s;
}
