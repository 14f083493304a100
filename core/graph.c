/* graph.c - CUDA graph capture and replay (nb_graph_*; torch.cuda.CUDAGraph):
 * the backend records what the captured stream enqueues, the allocator
 * serves that stream from the graph's private pool (core/alloc.c), random
 * ops take their Philox offset relative to a device word written before
 * each replay (PyTorch's philox offset "extragraph" base), and host state the
 * captured calls advanced (optimizer step counts) is undone at the end of
 * the capture and redone by hooks at each replay. One capture at a time per
 * process, on the calling thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"

#define MAX_GENS 8
#define MAX_HOOKS 64

typedef struct rng_use {
    nb_generator *gen;
    uint64_t start;  /* the generator's offset when the capture first used it */
    uint64_t used;   /* blocks the captured work draws per replay */
    nb_tensor *base; /* int64 0-d on the device: start for the next replay */
} rng_use;

typedef struct hook {
    void (*fn)(void *ctx, int delta);
    void *ctx;
} hook;

struct nb_graph {
    nb_backend *be;
    void *stream; /* the captured stream */
    nb_stream *stream_obj; /* the same, as the nb_stream that was current at the capture's begin */
    void *exec;
    int pool;
    rng_use rng[MAX_GENS];
    int n_rng;
    hook hooks[MAX_HOOKS];
    int n_hooks;
    nb_status failed; /* the first failure recorded during the capture (sticky) */
    char why[256];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nb_graph *capturing; /* the graph being captured, if any */
static int next_pool = 1;

bool nb_graph_capturing_be(nb_backend *be) {
    nb_graph *g = capturing;
    return g && g->be == be && g->stream == nb_backend_current_stream(be);
}

bool nb_graph_capturing_stream(nb_backend *be, void *stream) {
    nb_graph *g = capturing;
    return g && g->be == be && g->stream == stream;
}

void nb_graph_fail(nb_backend *be) {
    nb_graph *g = capturing;
    if (!g || g->be != be || g->failed) return;
    g->failed = nb_last_status() ? nb_last_status() : NB_ERR_STATE;
    snprintf(g->why, sizeof g->why, "%s", nb_last_error());
}

bool nb_graph_is_capturing(nb_device dev) {
    nb_status prev = nb_last_status();
    nb_backend *be = nb_backend_get(dev);
    if (!be) {
        if (prev == NB_OK) nb_clear_error(); /* a query: no such device is not capturing */
        return false;
    }
    return nb_graph_capturing_be(be);
}

nb_status nb_graph_capture_begin(nb_device dev) { return nb_graph_capture_begin_with(dev, NULL); }

nb_status nb_graph_capture_begin_with(nb_device dev, const nb_graph_options *opts) {
    const nb_graph_options none = {0};
    if (!opts) opts = &none;
    nb_backend *be = nb_backend_get(dev);
    if (!be) return nb_last_status();
    if (!be->iface->graph_capture_begin) {
        char d[32];
        return nb_set_error(NB_ERR_UNSUPPORTED, "graph_capture_begin: %s has no graphs (CUDA graphs need a GPU)",
                            nb_device_str(dev, d, sizeof d));
    }
    nb_graph *g = nb_host_calloc(1, sizeof *g);
    if (!g) return nb_set_error(NB_ERR_OOM, "graph_capture_begin: out of host memory");
    g->be = be;
    g->stream = nb_backend_current_stream(be);
    g->stream_obj = nb_current_stream(dev);
    pthread_mutex_lock(&lock);
    bool busy = capturing != NULL;
    if (!busy) g->pool = next_pool++, capturing = g;
    pthread_mutex_unlock(&lock);
    if (busy) {
        free(g);
        return nb_set_error(NB_ERR_STATE, "graph_capture_begin: a capture is already under way");
    }
    /* the pool starts empty, so nothing the capture allocates is shared */
    nb_status st = nb_alloc_capture_begin(be, g->stream, g->pool);
    if (!st) {
        st = be->iface->graph_capture_begin(be, g->stream);
        if (!st && opts->fuse) st = nb_fuse_begin(be, g->stream);
        if (st) nb_alloc_capture_end(be), nb_alloc_pool_release(be, g->pool);
    }
    if (st) {
        capturing = NULL;
        free(g);
    }
    return st;
}

/* Undoes (delta -1) or redoes (+1) the host state of the captured calls;
 * delta 0: just before a replay launches (values to refresh on the device). */
static void run_hooks(nb_graph *g, int delta) {
    for (int i = 0; i < g->n_hooks; i++) g->hooks[i].fn(g->hooks[i].ctx, delta);
}

static void graph_release(nb_graph *g) {
    for (int i = 0; i < g->n_rng; i++) nb_release(g->rng[i].base);
    if (g->exec) g->be->iface->graph_destroy(g->be, g->exec);
    nb_alloc_pool_release(g->be, g->pool);
    free(g);
}

nb_graph *nb_graph_capture_end(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    nb_graph *g = capturing;
    if (!g || g->be != be) return NB_FAIL(NB_ERR_STATE, "graph_capture_end: no capture is under way on this device");
    /* the recorded elementwise calls, fused, on the captured stream */
    nb_stream *cur = nb_current_stream(dev);
    if (cur != g->stream_obj) nb_set_current_stream(g->stream_obj);
    nb_status failed = nb_fuse_end(be);
    if (cur != g->stream_obj) nb_set_current_stream(cur);
    if (!failed) failed = nb_last_status(); /* an op that failed inside the capture */
    nb_status st = be->iface->graph_capture_end(be, g->stream, &g->exec);
    nb_alloc_capture_end(be);
    capturing = NULL;
    /* the capture ran nothing: the generators and the host state go back to
     * where the first replay must start */
    /* (the move is made under the default generator's lock; blocks another
     * thread drew from it during the capture are still counted as the
     * capture's and drawn again: capture with a generator of its own) */
    for (int i = 0; i < g->n_rng; i++) {
        rng_use *u = &g->rng[i];
        u->used = nb_generator_exchange(u->gen, u->start) - u->start;
    }
    run_hooks(g, -1);
    if (st == NB_OK && g->failed) /* sticky: later calls cannot have cleared it */
        st = nb_set_error(g->failed, "graph_capture_end: the capture failed: %s", g->why);
    else if (st == NB_OK && failed != NB_OK && g->exec)
        st = nb_set_error(failed, "graph_capture_end: an op failed during the capture: %s", nb_last_error());
    if (st != NB_OK) {
        graph_release(g);
        return NULL;
    }
    return g;
}

nb_status nb_graph_replay(nb_graph *g) {
    if (!g) return nb_set_error(NB_ERR_INVALID_ARG, "graph_replay: NULL graph");
    if (capturing) return nb_set_error(NB_ERR_STATE, "graph_replay: a capture is under way");
    nb_backend *be = g->be;
    nb_status st = NB_OK;
    /* this replay's offsets: the generator moves on first, under the default
     * generator's lock (other threads draw from it); a replay that then
     * fails has still taken its blocks, as a random op does */
    for (int i = 0; i < g->n_rng && !st; i++) {
        rng_use *u = &g->rng[i];
        st = nb_fill_(u->base, (double)nb_generator_advance(u->gen, u->used));
    }
    if (!st) run_hooks(g, 0);
    if (!st) st = nb_after_kernel(be, be->iface->graph_launch(be, g->exec, nb_backend_current_stream(be)), "graph");
    if (!st) run_hooks(g, +1);
    return st;
}

void nb_graph_free(nb_graph *g) {
    if (!g) return;
    if (g == capturing) return; /* nb_graph_capture_end owns it */
    nb_device_synchronize(g->be->device); /* no replay may still run on the pool */
    graph_release(g);
}

const uint64_t *nb_graph_rng_base(nb_backend *be, nb_generator *gen, uint64_t *offset, bool *failed) {
    *failed = false;
    nb_graph *g = capturing;
    if (!g || !nb_graph_capturing_be(be)) return NULL;
    if (!gen) gen = nb_default_generator();
    int i = 0;
    while (i < g->n_rng && g->rng[i].gen != gen) i++;
    if (i == g->n_rng) {
        if (i == MAX_GENS) {
            *failed = true;
            nb_set_error(NB_ERR_STATE, "graph capture: more than %d generators used", MAX_GENS);
            return NULL;
        }
        /* the word lives outside the pool (made before it is needed) so it
         * survives as long as the graph */
        nb_alloc_capture_pause(be, true);
        nb_tensor *base = nb_tensor_new_unscoped(0, NULL, NB_I64, be->device);
        nb_alloc_capture_pause(be, false);
        if (!base) {
            nb_release(base);
            *failed = true;
            return NULL;
        }
        g->rng[i] = (rng_use){gen, *offset, 0, base};
        g->n_rng++;
    }
    *offset -= g->rng[i].start;
    return (const uint64_t *)g->rng[i].base->storage->data + 0;
}

bool nb_graph_on_replay(nb_backend *be, void (*fn)(void *ctx, int delta), void *ctx) {
    nb_graph *g = capturing;
    if (!g || !nb_graph_capturing_be(be)) return true;
    if (g->n_hooks == MAX_HOOKS) {
        nb_set_error(NB_ERR_STATE, "graph capture: more than %d optimizer steps captured", MAX_HOOKS);
        return false;
    }
    g->hooks[g->n_hooks++] = (hook){fn, ctx};
    return true;
}

bool nb_graph_supported(nb_device dev) {
    nb_status prev = nb_last_status();
    nb_backend *be = nb_backend_get(dev);
    if (!be && prev == NB_OK) nb_clear_error(); /* a query: no such device cannot capture */
    return be && be->iface->graph_capture_begin != NULL;
}

bool nb_graph_add_replay_hook(nb_device dev, void (*on_replay)(void *ctx, int delta), void *ctx) {
    if (!on_replay) return nb_set_error(NB_ERR_INVALID_ARG, "graph_add_replay_hook: NULL on_replay"), false;
    return !nb_graph_is_capturing(dev) || nb_graph_on_replay(nb_backend_get(dev), on_replay, ctx);
}
