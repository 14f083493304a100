/* compile.c - compiled training steps (nb_compile.h): a trace per guard
 * set, each warmed up eagerly, captured as a fused CUDA graph over static
 * copies of its inputs and replayed; a step that cannot be captured runs
 * eagerly for its trace (a graph break), or fails with fullgraph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_compile.h"
#include "nb_extension.h"

#define MAX_IO 16
enum { DEFAULT_WARMUP = 2, DEFAULT_CACHE_LIMIT = 8, MAX_CACHE_LIMIT = 64 };

/* What a call is guarded on. Parameters are compared by tensor and data
 * pointer (a parameter replaced by another tensor, or re-allocated; the
 * pointers are only compared, never read) and by requires_grad (frozen or
 * unfrozen). */
typedef struct guard {
    nb_dtype dtype[MAX_IO];
    nb_device device[MAX_IO];
    int ndim[MAX_IO];
    int64_t shape[MAX_IO][NB_MAX_DIMS];
    bool grad;
    nb_dtype autocast; /* the innermost region's dtype on the inputs' device; NB_F32: none open */
    int n_params;
    const void **params; /* n_params tensors, n_params data pointers, then n_params requires_grad flags (NULL or not) */
} guard;

typedef struct trace {
    guard g;
    nb_tensor *in[MAX_IO];  /* static inputs (a captured trace) */
    nb_tensor *out[MAX_IO]; /* the captured step's outputs */
    nb_graph *graph;
    int64_t calls; /* calls of this trace so far */
    bool eager;  /* not captured: runs eagerly from now on */
} trace;

struct nb_compiled {
    nb_step_fn fn;
    void *ctx;
    int n_in, n_out, warmup, cache_limit;
    nb_compile_options o;
    trace *traces;
    int n_traces;
    nb_tensor *held[MAX_IO]; /* the last eager call's outputs (ours until the next call) */
    nb_named_tensor *scratch; /* the module's parameters at this call */
    int cap_scratch;
    nb_compiled_stats stats;
    char reason[384];
};

nb_compiled *nb_compile(nb_step_fn fn, void *ctx, int n_inputs, int n_outputs, const nb_compile_options *opts) {
    nb_compile_options o = opts ? *opts : (nb_compile_options){0};
    if (!fn) return NB_FAIL(NB_ERR_INVALID_ARG, "compile: NULL step function");
    if (n_inputs < 0 || n_inputs > MAX_IO || n_outputs < 0 || n_outputs > MAX_IO)
        return NB_FAIL(NB_ERR_INVALID_ARG, "compile: %d inputs and %d outputs (each 0 to %d)", n_inputs, n_outputs,
                       MAX_IO);
    if (o.warmup < 0 || o.cache_limit < 0 || o.cache_limit > MAX_CACHE_LIMIT)
        return NB_FAIL(NB_ERR_INVALID_ARG, "compile: warmup %d, cache_limit %d (warmup >= 0, cache_limit 0 to %d)",
                       o.warmup, o.cache_limit, MAX_CACHE_LIMIT);
    nb_compiled *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "compile: out of host memory");
    c->fn = fn, c->ctx = ctx, c->n_in = n_inputs, c->n_out = n_outputs, c->o = o;
    c->warmup = o.warmup ? o.warmup : DEFAULT_WARMUP;
    c->cache_limit = o.cache_limit ? o.cache_limit : DEFAULT_CACHE_LIMIT;
    c->traces = calloc((size_t)c->cache_limit, sizeof *c->traces);
    if (!c->traces) return free(c), NB_FAIL(NB_ERR_OOM, "compile: out of host memory");
    return c;
}

/* The module's parameters into c->scratch; their count, or -1 on error. */
static int list_params(nb_compiled *c) {
    int n = nb_module_parameters(c->o.module, NULL, 0);
    if (n < 0) return -1;
    if (n > c->cap_scratch) {
        nb_named_tensor *p = realloc(c->scratch, sizeof *p * (size_t)n);
        if (!p) return nb_set_error(NB_ERR_OOM, "compiled_step: out of host memory for %d parameters", n), -1;
        c->scratch = p, c->cap_scratch = n;
    }
    return nb_module_parameters(c->o.module, c->scratch, n);
}

/* This call's guards into g (g->params borrowed from nothing: filled in
 * c->scratch order, compared by same_guard, copied by keep_guard). */
static nb_status call_guard(nb_compiled *c, nb_tensor *const *in, guard *g, nb_device *dev) {
    memset(g, 0, sizeof *g);
    *dev = c->n_in ? nb_device_of(in[0]) : nb_default_device();
    for (int i = 0; i < c->n_in; i++) {
        nb_device d = nb_device_of(in[i]);
        if (d.type != dev->type || d.index != dev->index)
            return nb_set_error(NB_ERR_DEVICE, "compiled_step: inputs 0 and %d are on different devices", i);
        if (nb_requires_grad(in[i]))
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "compiled_step: input %d requires grad (a captured step reads a copy of it)", i);
        g->dtype[i] = nb_dtype_of(in[i]), g->device[i] = d, g->ndim[i] = nb_dim(in[i]);
        memcpy(g->shape[i], nb_shape(in[i]), sizeof(int64_t) * (size_t)g->ndim[i]);
    }
    g->grad = nb_is_grad_enabled();
    g->autocast = nb_autocast_get_dtype(*dev);
    if (c->o.module && (g->n_params = list_params(c)) < 0) return nb_last_status();
    return NB_OK;
}

/* Parameter i's guarded facts: field 0 the tensor, 1 its data pointer, 2
 * whether it requires grad (non-NULL or NULL). */
static const void *param_at(const nb_compiled *c, const guard *g, int i, int field) {
    if (g->params) return g->params[i + field * g->n_params];
    const nb_tensor *p = c->scratch[i].tensor;
    return field == 0 ? (const void *)p : field == 1 ? nb_data_ptr(p) : nb_requires_grad(p) ? p : NULL;
}

/* Whether the trace's guards hold for this call's (cur); names the first
 * that does not in why. */
static bool same_guard(const nb_compiled *c, const guard *t, const guard *cur, char *why, size_t n) {
    for (int i = 0; i < c->n_in; i++) {
        if (t->dtype[i] != cur->dtype[i]) return snprintf(why, n, "input %d's dtype", i), false;
        if (t->device[i].type != cur->device[i].type || t->device[i].index != cur->device[i].index)
            return snprintf(why, n, "input %d's device", i), false;
        if (t->ndim[i] != cur->ndim[i] || memcmp(t->shape[i], cur->shape[i], sizeof(int64_t) * (size_t)t->ndim[i]))
            return snprintf(why, n, "input %d's shape", i), false;
    }
    if (t->grad != cur->grad) return snprintf(why, n, "grad mode"), false;
    if (t->autocast != cur->autocast) return snprintf(why, n, "the autocast state"), false;
    if (t->n_params != cur->n_params) return snprintf(why, n, "the module's parameter count"), false;
    for (int i = 0; i < t->n_params; i++) {
        if (param_at(c, t, i, 0) != param_at(c, cur, i, 0) || param_at(c, t, i, 1) != param_at(c, cur, i, 1))
            return snprintf(why, n, "the module's parameter %d", i), false;
        if (!param_at(c, t, i, 2) != !param_at(c, cur, i, 2))
            return snprintf(why, n, "the module's parameter %d's requires_grad", i), false;
    }
    return true;
}

/* A trace's own copy of the call's guards. */
static nb_status keep_guard(const nb_compiled *c, const guard *cur, guard *t) {
    *t = *cur;
    t->params = NULL;
    if (!cur->n_params) return NB_OK;
    const void **p = malloc(sizeof *p * 3 * (size_t)cur->n_params);
    if (!p) return nb_set_error(NB_ERR_OOM, "compiled_step: out of host memory");
    for (int i = 0; i < cur->n_params; i++)
        for (int f = 0; f < 3; f++) p[i + f * cur->n_params] = param_at(c, cur, i, f);
    t->params = p;
    return NB_OK;
}

static void release_all(nb_tensor **t, int n) {
    for (int i = 0; i < n; i++) nb_release(t[i]), t[i] = NULL;
}

/* The trace for this call's guards: found, or made (past the limit, an error). */
static trace *find_trace(nb_compiled *c, nb_tensor *const *in, nb_device *dev) {
    guard cur;
    if (call_guard(c, in, &cur, dev)) return NULL;
    char why[96] = "", first[96] = "";
    for (int i = 0; i < c->n_traces; i++) {
        if (same_guard(c, &c->traces[i].g, &cur, why, sizeof why)) return &c->traces[i];
        if (!first[0]) snprintf(first, sizeof first, "%s", why);
    }
    if (c->n_traces == c->cache_limit)
        return NB_FAIL(NB_ERR_STATE,
                       "compiled_step: this call needs trace %d, past cache_limit %d (against the first trace, %s "
                       "changed): pass the same shapes and state, or raise nb_compile_options.cache_limit",
                       c->n_traces + 1, c->cache_limit, first);
    trace *t = &c->traces[c->n_traces];
    memset(t, 0, sizeof *t);
    if (keep_guard(c, &cur, &t->g)) return NULL;
    c->n_traces++, c->stats.traces++;
    return t;
}

/* An eager call: fn on the caller's inputs; its outputs are held until the next call. */
static nb_status run_eager(nb_compiled *c, trace *t, nb_tensor *const *in) {
    nb_tensor *out[MAX_IO] = {0};
    nb_status st = c->fn(c->ctx, in, out);
    if (st) {
        release_all(out, c->n_out);
        return st;
    }
    memcpy(c->held, out, sizeof out);
    t->calls++, c->stats.calls++, c->stats.eager_calls++;
    return NB_OK;
}

/* Copies the call's inputs into the trace's static ones (made on first use). */
static nb_status feed(nb_compiled *c, trace *t, nb_tensor *const *in) {
    for (int i = 0; i < c->n_in; i++) {
        if (!t->in[i]) {
            nb_scope *s = nb_scope_begin();
            t->in[i] = nb_empty_on(t->g.ndim[i], t->g.shape[i], t->g.dtype[i], t->g.device[i]);
            nb_retain(t->in[i]);
            nb_scope_end(s);
            if (!t->in[i]) return nb_last_status();
        }
        if (in[i] != t->in[i]) {
            nb_status st = nb_copy_(t->in[i], in[i]);
            if (st) return st;
        }
    }
    return NB_OK;
}

/* The trace runs eagerly from now on, for reason why. */
static void graph_break(nb_compiled *c, trace *t, const char *why) {
    t->eager = true;
    release_all(t->in, c->n_in); /* eager calls read the caller's inputs */
    snprintf(c->reason, sizeof c->reason, "%s", why);
    c->stats.reason = c->reason;
    nb_clear_error();
}

/* Captures the step on the trace's static inputs (fed). NB_OK with
 * t->graph set, NB_OK with t->eager set (a graph break: the step did
 * something a graph cannot hold, NB_ERR_STATE or NB_ERR_UNSUPPORTED), or an
 * error (with fullgraph, the capture's; any other failure, such as
 * NB_ERR_OOM, fails the call and the next call captures again). */
static nb_status capture(nb_compiled *c, trace *t, nb_device dev) {
    uint64_t k0 = nb_device_counters_get(dev).kernel_launches;
    /* a capture that cannot begin (another under way, too many graphs alive)
     * says nothing about the step: the call fails, the trace stays as it is */
    nb_status st = nb_graph_capture_begin_with(dev, &(nb_graph_options){.fuse = !c->o.no_fusion});
    if (st) return nb_set_error(st, "compiled_step: %s", nb_last_error());
    nb_tensor *out[MAX_IO] = {0};
    char why[sizeof c->reason] = "";
    st = c->fn(c->ctx, t->in, out);
    if (st) snprintf(why, sizeof why, "%s", nb_last_error()); /* the step's first error */
    nb_graph *g = nb_graph_capture_end(dev);
    if (!st && !g) st = nb_last_status(), snprintf(why, sizeof why, "%s", nb_last_error());
    if (st) {
        nb_graph_free(g);
        release_all(out, c->n_out);
        if (c->o.fullgraph) return nb_set_error(st, "compiled_step: fullgraph: the step cannot be captured: %s", why);
        if (st != NB_ERR_STATE && st != NB_ERR_UNSUPPORTED)
            return nb_set_error(st, "compiled_step: the capture failed: %s", why);
        graph_break(c, t, why);
        return NB_OK;
    }
    t->graph = g;
    memcpy(t->out, out, sizeof out);
    c->stats.graphs++;
    c->stats.graph_kernels += nb_device_counters_get(dev).kernel_launches - k0;
    return NB_OK;
}

/* The call on trace t: captured when its warm-up is over, then eagerly or
 * as a replay. */
static nb_status run_trace(nb_compiled *c, trace *t, nb_device dev, nb_tensor *const *in) {
    nb_status st;
    bool fed = false;
    if (!t->graph && !t->eager && t->calls >= c->warmup) {
        if (!nb_graph_supported(dev)) { /* not a break: such a device runs every step eagerly, fullgraph or not */
            char d[32], why[64];
            snprintf(why, sizeof why, "%s has no graphs (its steps run eagerly)", nb_device_str(dev, d, sizeof d));
            graph_break(c, t, why);
        } else if ((st = feed(c, t, in)) || (st = capture(c, t, dev))) {
            return st;
        } else {
            fed = true;
        }
    }
    if (!t->graph) return run_eager(c, t, in); /* warm-up, or a trace that runs eagerly */
    if (!fed && (st = feed(c, t, in))) return st;
    if ((st = nb_graph_replay(t->graph))) return st;
    t->calls++, c->stats.calls++, c->stats.replays++;
    return NB_OK;
}

nb_status nb_compiled_step(nb_compiled *c, nb_tensor *const *inputs, nb_tensor **outputs) {
    if (!c) return nb_set_error(NB_ERR_INVALID_ARG, "compiled_step: NULL compiled step");
    if ((c->n_in && !inputs) || (c->n_out && !outputs))
        return nb_set_error(NB_ERR_INVALID_ARG, "compiled_step: NULL %s", c->n_out && !outputs ? "outputs" : "inputs");
    nb_tensor *in[MAX_IO] = {0}; /* outputs may be the inputs' array (a recurrent state) */
    for (int i = 0; i < c->n_in; i++)
        if (!(in[i] = inputs[i])) return nb_set_error(NB_ERR_INVALID_ARG, "compiled_step: input %d is NULL", i);
    inputs = in; /* outputs are written on success only */
    /* before anything else: a call inside a capture would record the eager
     * step into the caller's graph, or free what the capture holds */
    if (nb_graph_is_capturing(c->n_in ? nb_device_of(inputs[0]) : nb_default_device()))
        return nb_set_error(NB_ERR_STATE, "compiled_step: called inside a graph capture");
    nb_device dev;
    trace *t = find_trace(c, inputs, &dev);
    if (!t) return nb_last_status();
    /* the last call's eager outputs stay alive until this call's step has
     * run (an input may be one of them; a capture must not free them), and
     * past a failed call (the caller may retry with them) */
    nb_tensor *prev[MAX_IO];
    memcpy(prev, c->held, sizeof prev), memset(c->held, 0, sizeof c->held);
    nb_status st = run_trace(c, t, dev, inputs);
    if (st) {
        memcpy(c->held, prev, sizeof prev);
        return st;
    }
    release_all(prev, c->n_out);
    if (c->n_out) memcpy(outputs, t->graph ? t->out : c->held, sizeof *outputs * (size_t)c->n_out); /* outputs may be NULL */
    return NB_OK;
}

nb_compiled_stats nb_compiled_get_stats(const nb_compiled *c) {
    nb_compiled_stats s = {.reason = ""};
    if (!c) return s;
    s = c->stats;
    if (!s.reason) s.reason = "";
    return s;
}

void nb_compiled_free(nb_compiled *c) {
    if (!c) return;
    release_all(c->held, c->n_out);
    for (int i = 0; i < c->n_traces; i++) {
        trace *t = &c->traces[i];
        release_all(t->out, c->n_out); /* before the graph: its pool's tensors */
        nb_graph_free(t->graph);
        release_all(t->in, c->n_in);
        free(t->g.params);
    }
    free(c->traces), free(c->scratch), free(c);
}
