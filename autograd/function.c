/* function.c - custom autograd functions (torch.autograd.Function): a user
 * forward runs without recording, then one node stands for it; its
 * backward calls the user's with a context holding the saved tensors
 * (version-checked, connected to their graphs under create_graph), values,
 * needs_input_grad and the non-differentiable outputs. A node with several
 * outputs accumulates each output's gradient separately (output 0 in the
 * node's grad_acc, the others here). Tests: tests/test_autograd_function.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

#define MAX_IO NB_FUNCTION_MAX_IO
#define MAX_VALUES 16

struct nb_function_ctx {
    const nb_function *fn; /* &fn_copy: the caller's struct may be gone by backward */
    nb_function fn_copy;
    char name[64];
    void *user;
    int n_in, n_out;
    bool in_forward, in_backward, materialize;
    bool needs[MAX_IO];
    nb_tensor *in_ref[MAX_IO]; /* the node's inputs (node->in points here) */
    nb_node *edge_ref[MAX_IO]; /* their recorded edges (node->edge, node->edge_nr point here) */
    int edge_nr_ref[MAX_IO];
    /* forward: what save_for_backward was given (own references) */
    nb_tensor **to_save;
    int n_to_save, cap_to_save;
    /* after recording: the saved tensors as an op saves them */
    int n_saved;
    nb_tensor **saved, **saved_var, **unpacked;
    unsigned *saved_version;
    int *saved_out; /* the output index of a saved output, else -1 */
    nb_tensor *nondiff[MAX_IO];
    int n_nondiff;
    struct { char key[32]; double v; } values[MAX_VALUES];
    int n_values;
    /* outputs */
    bool out_diff[MAX_IO];
    int out_ndim[MAX_IO];
    int64_t out_shape[MAX_IO][NB_MAX_DIMS];
    nb_dtype out_dtype[MAX_IO];
    nb_device dev;
    nb_tensor *acc[MAX_IO]; /* gradients of outputs 1.. during backward */
    nb_op_id op;            /* NB_OP_COUNT, or the op a once-differentiable function stands for */
};

static nb_function_ctx *ctx_of(const nb_node *n) { return n->ext->fn; }

const char *nb_function_node_name(const nb_node *n) {
    const char *name = n->ext && n->ext->fn ? n->ext->fn->fn->name : NULL;
    return name ? name : "a custom function";
}
int nb_function_n_outputs(const nb_node *n) { return ctx_of(n)->n_out; }
nb_tensor **nb_function_acc(nb_node *n, int out_nr) { return &ctx_of(n)->acc[out_nr]; }
bool nb_function_has_grad(const nb_node *n) {
    for (int j = 1; j < ctx_of(n)->n_out; j++)
        if (ctx_of(n)->acc[j]) return true;
    return false;
}
void nb_function_drop_grads(nb_node *n) {
    for (int j = 1; j < ctx_of(n)->n_out; j++) nb_release(ctx_of(n)->acc[j]), ctx_of(n)->acc[j] = NULL;
}

static void release_saved(nb_function_ctx *c) {
    for (int k = 0; k < c->n_saved; k++) {
        nb_release(c->saved[k]), nb_release(c->saved_var[k]);
        c->saved[k] = c->saved_var[k] = NULL;
    }
}

void nb_function_free_tape(nb_node *n) {
    if (n->ext && n->ext->fn) release_saved(n->ext->fn);
}

static void ctx_free(nb_function_ctx *c) {
    if (!c) return;
    for (int k = 0; k < c->n_to_save; k++) nb_release(c->to_save[k]);
    release_saved(c);
    for (int j = 0; j < MAX_IO; j++) nb_release(c->acc[j]);
    free(c->to_save), free(c->saved), free(c->saved_var), free(c->unpacked), free(c->saved_version),
        free(c->saved_out);
    free(c);
}

void nb_function_free(nb_node *n) {
    ctx_free(n->ext->fn);
    n->ext->fn = NULL;
}

/* ---- the context ------------------------------------------------------------------ */

static const char *fname(const nb_function_ctx *c) { return c && c->fn->name ? c->fn->name : "function"; }

nb_status nb_ctx_save_for_backward(nb_function_ctx *ctx, nb_tensor *const *tensors, int n) {
    if (!ctx || (n > 0 && !tensors) || n < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "save_for_backward: NULL context or tensors");
    if (!ctx->in_forward)
        return nb_set_error(NB_ERR_STATE, "%s: save_for_backward is called in forward", fname(ctx));
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) return nb_set_error(NB_ERR_INVALID_ARG, "%s: save_for_backward: tensor %d is NULL", fname(ctx), i);
        if (ctx->n_to_save == ctx->cap_to_save) {
            int cap = ctx->cap_to_save ? 2 * ctx->cap_to_save : 4;
            nb_tensor **v = realloc(ctx->to_save, sizeof *v * (size_t)cap);
            if (!v) return nb_set_error(NB_ERR_OOM, "%s: save_for_backward: out of host memory", fname(ctx));
            ctx->to_save = v, ctx->cap_to_save = cap;
        }
        nb_retain(tensors[i]);
        ctx->to_save[ctx->n_to_save++] = tensors[i];
    }
    return NB_OK;
}

nb_tensor *nb_ctx_saved_tensor(nb_function_ctx *ctx, int i) {
    if (!ctx) return NB_FAIL(NB_ERR_INVALID_ARG, "saved_tensor: NULL context");
    if (!ctx->in_backward) return NB_FAIL(NB_ERR_STATE, "%s: saved tensors are read in backward", fname(ctx));
    if (i < 0 || i >= ctx->n_saved)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: saved tensor %d of %d", fname(ctx), i, ctx->n_saved);
    return ctx->unpacked[i];
}

int nb_ctx_num_saved(const nb_function_ctx *ctx) {
    if (!ctx) return nb_set_error(NB_ERR_INVALID_ARG, "num_saved: NULL context"), -1;
    return ctx->in_forward ? ctx->n_to_save : ctx->n_saved;
}

bool nb_ctx_needs_input_grad(const nb_function_ctx *ctx, int i) {
    if (!ctx) return nb_set_error(NB_ERR_INVALID_ARG, "needs_input_grad: NULL context"), false;
    return i >= 0 && i < ctx->n_in && ctx->needs[i];
}

nb_status nb_ctx_mark_non_differentiable(nb_function_ctx *ctx, nb_tensor *t) {
    if (!ctx || !t) return nb_set_error(NB_ERR_INVALID_ARG, "mark_non_differentiable: NULL argument");
    if (!ctx->in_forward)
        return nb_set_error(NB_ERR_STATE, "%s: mark_non_differentiable is called in forward", fname(ctx));
    if (ctx->n_nondiff == MAX_IO)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: more non-differentiable outputs than outputs", fname(ctx));
    ctx->nondiff[ctx->n_nondiff++] = t;
    return NB_OK;
}

void nb_ctx_set_materialize_grads(nb_function_ctx *ctx, bool materialize) {
    if (!ctx) {
        nb_set_error(NB_ERR_INVALID_ARG, "set_materialize_grads: NULL context");
        return;
    }
    ctx->materialize = materialize;
}

nb_status nb_ctx_set_value(nb_function_ctx *ctx, const char *key, double value) {
    if (!ctx || !key) return nb_set_error(NB_ERR_INVALID_ARG, "set_value: NULL argument");
    if (!key[0] || strlen(key) >= sizeof ctx->values[0].key)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: value key \"%s\" must have 1 to 31 characters", fname(ctx), key);
    for (int i = 0; i < ctx->n_values; i++)
        if (!strcmp(ctx->values[i].key, key)) return ctx->values[i].v = value, NB_OK;
    if (ctx->n_values == MAX_VALUES)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: more than %d values", fname(ctx), MAX_VALUES);
    snprintf(ctx->values[ctx->n_values].key, sizeof ctx->values[0].key, "%s", key);
    ctx->values[ctx->n_values++].v = value;
    return NB_OK;
}

double nb_ctx_value(const nb_function_ctx *ctx, const char *key) {
    if (!ctx || !key) return nb_set_error(NB_ERR_INVALID_ARG, "value: NULL argument"), NAN;
    for (int i = 0; i < ctx->n_values; i++)
        if (!strcmp(ctx->values[i].key, key)) return ctx->values[i].v;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: no value \"%s\" was set", fname(ctx), key);
    return NAN;
}

void *nb_ctx_user(const nb_function_ctx *ctx) {
    if (!ctx) return NB_FAIL(NB_ERR_INVALID_ARG, "ctx_user: NULL context");
    return ctx->user;
}

/* ---- backward ------------------------------------------------------------------- */

static nb_status function_backward(nb_node *n, nb_tensor *g0, nb_tensor **gin) {
    nb_function_ctx *c = ctx_of(n);
    nb_tensor *gout[MAX_IO] = {0}, *gi[MAX_IO] = {0};
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    for (int j = 0; j < c->n_out; j++) {
        gout[j] = j ? c->acc[j] : g0;
        if (!gout[j] && c->materialize) {
            gout[j] = nb_tensor_new(c->out_ndim[j], c->out_shape[j], c->out_dtype[j], c->dev);
            if (!gout[j] || nb_fill_(gout[j], 0) != NB_OK) return nb_last_status();
        }
    }
    bool connected = nb_is_grad_enabled(); /* create_graph */
    for (int k = 0; k < c->n_saved; k++) {
        nb_status st = nb_saved_check(n, c->saved[k], c->saved_version[k], k);
        if (st) return st;
        c->unpacked[k] = nb_saved_unpack(n, c->saved[k], c->saved_var[k], c->saved_out[k] >= 0,
                                         c->saved_out[k] >= 0 ? c->saved_out[k] : 0, connected);
        if (!c->unpacked[k]) return nb_last_status();
    }
    c->in_backward = true;
    nb_clear_error();
    nb_status st = c->fn->backward(c, gout, gi);
    c->in_backward = false;
    if (st != NB_OK)
        return nb_last_error()[0] ? st : nb_set_error(st, "backward of %s failed (status %s)", fname(c), nb_status_str(st));
    for (int i = 0; i < c->n_in; i++) {
        nb_tensor *in = n->in[i];
        if (!in || !gi[i]) continue;
        if (gi[i]->ndim != in->ndim || memcmp(gi[i]->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) ||
            gi[i]->dtype != in->dtype)
            return nb_set_error(NB_ERR_SHAPE, "backward of %s returned an invalid gradient for input %d: got %s %s, "
                                "expected %s %s", fname(c), i, nb_fmt_shape(gi[i]->ndim, gi[i]->shape, a, sizeof a),
                                nb_dtype_name(gi[i]->dtype), nb_fmt_shape(in->ndim, in->shape, b, sizeof b),
                                nb_dtype_name(in->dtype));
        gin[i] = gi[i];
    }
    return NB_OK;
}

/* ---- apply ------------------------------------------------------------------------- */

static nb_tensor *alias_of(const nb_tensor *t) {
    nb_tensor *a = nb_tensor_alias_unscoped(t);
    return a ? a : NB_FAIL(NB_ERR_OOM, "save_for_backward: out of host memory");
}

/* Turns save_for_backward's list into saved tensors, now that the outputs
 * belong to node n. */
static nb_status keep_saved(nb_node *n, nb_function_ctx *c, nb_tensor *const *outputs) {
    int k = c->n_to_save;
    c->saved = calloc((size_t)(k ? k : 1), sizeof *c->saved);
    c->saved_var = calloc((size_t)(k ? k : 1), sizeof *c->saved_var);
    c->unpacked = calloc((size_t)(k ? k : 1), sizeof *c->unpacked);
    c->saved_version = calloc((size_t)(k ? k : 1), sizeof *c->saved_version);
    c->saved_out = calloc((size_t)(k ? k : 1), sizeof *c->saved_out);
    if (!c->saved || !c->saved_var || !c->unpacked || !c->saved_version || !c->saved_out)
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", fname(c));
    for (int i = 0; i < k; i++) {
        nb_tensor *t = c->to_save[i];
        if (!(c->saved[i] = alias_of(t))) return nb_last_status();
        c->n_saved = i + 1;
        c->saved_version[i] = atomic_load(&t->storage->version);
        c->saved_out[i] = -1;
        for (int j = 0; j < c->n_out; j++)
            if (outputs[j] == t && t->grad_fn == n) c->saved_out[i] = j;
        if (c->saved_out[i] < 0 && t->requires_grad) {
            nb_retain(t);
            c->saved_var[i] = t;
        }
    }
    return NB_OK;
}

static bool is_nondiff(const nb_function_ctx *c, const nb_tensor *t) {
    for (int i = 0; i < c->n_nondiff; i++)
        if (c->nondiff[i] == t) return true;
    return false;
}

/* Records the node for the outputs. */
static nb_status record_function(nb_function_ctx *c, nb_tensor *const *inputs, nb_tensor **outputs,
                                 nb_tensor *const *raw) {
    nb_tape_register();
    nb_node *n = nb_host_calloc(1, sizeof *n);
    nb_node_ext *e = n ? nb_host_calloc(1, sizeof *e) : NULL;
    if (!e) {
        free(n);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory recording the tape", fname(c));
    }
    n->ext = e;
    e->fn = c;
    n->refcount = 0;
    n->seq = 0;
    n->op = c->op;
    n->kind = NB_NODE_FUNCTION;
    n->backward = function_backward;
    n->n_in = c->n_in;
    n->in = c->in_ref;
    n->edge = c->edge_ref;
    n->edge_nr = c->edge_nr_ref;
    for (int i = 0; i < c->n_in; i++)
        if (c->needs[i]) nb_retain(inputs[i]), c->in_ref[i] = inputs[i], nb_node_set_edge(n, i, inputs[i]);
    for (int j = 0; j < c->n_out; j++) {
        nb_tensor *o = outputs[j];
        c->out_diff[j] = nb_dtype_is_float(o->dtype) && !is_nondiff(c, raw[j]);
        c->out_ndim[j] = o->ndim;
        memcpy(c->out_shape[j], o->shape, sizeof o->shape);
        c->out_dtype[j] = o->dtype;
        if (!c->out_diff[j]) continue;
        o->grad_fn = n, o->output_nr = j, o->requires_grad = true;
        n->refcount++;
    }
    c->dev = outputs[0]->storage->device;
    n->out_ndim = c->out_ndim[0];
    memcpy(n->out_shape, c->out_shape[0], sizeof n->out_shape);
    n->out_dtype = c->out_dtype[0];
    if (!n->refcount) { /* no differentiable output: nothing to record */
        e->fn = NULL;
        for (int i = 0; i < c->n_in; i++) {
            nb_release(c->in_ref[i]), c->in_ref[i] = NULL;
            if (c->edge_ref[i]) nb_node_release(c->edge_ref[i]), c->edge_ref[i] = NULL;
        }
        free(e), free(n);
        ctx_free(c);
        return NB_OK;
    }
    n->seq = nb_next_seq();
    nb_status st = keep_saved(n, c, outputs);
    if (st == NB_OK && nb_anomaly_enabled()) {
        char trace[160];
        snprintf(trace, sizeof trace, "%s(%d inputs) -> %d outputs", fname(c), c->n_in, c->n_out);
        if (!(e->trace = strdup(trace))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", fname(c));
        else if (nb_anomaly_nonfinite(c->n_out, outputs) && !nb_anomaly_nonfinite(c->n_in, inputs))
            st = nb_set_error(NB_ERR_ANOMALY, "anomaly: the forward of %s produced NaN or inf from finite inputs",
                              trace);
    }
    for (int k = 0; k < c->n_to_save; k++) nb_release(c->to_save[k]);
    c->n_to_save = 0;
    return st; /* on failure the outputs (and the node) die with the op's scope */
}

static nb_status check_fn(const nb_function *fn, nb_tensor *const *inputs, int n_inputs, nb_tensor **outputs) {
    if (!fn || !fn->forward || !fn->backward || !inputs || !outputs)
        return nb_set_error(NB_ERR_INVALID_ARG, "function_apply: NULL function, callback, inputs or outputs");
    if (n_inputs < 1 || n_inputs > MAX_IO || fn->n_outputs < 1 || fn->n_outputs > MAX_IO)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d inputs and %d outputs (1 to %d each)",
                            fn->name ? fn->name : "function", n_inputs, fn->n_outputs, MAX_IO);
    return NB_OK;
}

nb_status nb_function_apply(const nb_function *fn, nb_tensor *const *inputs, int n_inputs, nb_tensor **outputs,
                            void *user) {
    return nb_function_apply_as(NB_OP_COUNT, fn, inputs, n_inputs, outputs, user);
}

nb_status nb_function_apply_as(nb_op_id op, const nb_function *fn, nb_tensor *const *inputs, int n_inputs,
                               nb_tensor **outputs, void *user) {
    nb_status st = check_fn(fn, inputs, n_inputs, outputs);
    if (st) return st;
    int n_out = fn->n_outputs;
    for (int j = 0; j < n_out; j++) outputs[j] = NULL;
    nb_function_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", fname(NULL));
    c->fn_copy = *fn;
    snprintf(c->name, sizeof c->name, "%s", fn->name ? fn->name : "function");
    c->fn_copy.name = c->name;
    c->fn = &c->fn_copy, c->user = user, c->n_in = n_inputs, c->n_out = n_out, c->materialize = true;
    c->op = op;
    bool record = nb_is_grad_enabled();
    bool any = false;
    for (int i = 0; i < n_inputs; i++) any |= c->needs[i] = record && inputs[i] && inputs[i]->requires_grad;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *res[MAX_IO] = {0}, *raw[MAX_IO] = {0};
    bool prev = nb_set_grad_enabled(false);
    c->in_forward = true;
    nb_clear_error();
    st = fn->forward(c, inputs, n_inputs, res);
    c->in_forward = false;
    nb_set_grad_enabled(prev);
    if (st != NB_OK && !nb_last_error()[0]) nb_set_error(st, "forward of %s failed (status %s)", fname(c), nb_status_str(st));
    for (int j = 0; j < n_out && st == NB_OK; j++) {
        raw[j] = res[j];
        if (!res[j]) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "forward of %s wrote no output %d", fname(c), j);
            break;
        }
        bool seen = res[j]->grad_fn || res[j]->requires_grad; /* an input (or another graph's tensor) */
        for (int k = 0; k < j; k++) seen |= raw[k] == res[j];
        if (seen && !(res[j] = nb_detach(res[j]))) st = nb_last_status(); /* a new view of it */
    }
    if (st == NB_OK && any) {
        st = record_function(c, inputs, res, raw);
        c = NULL; /* the node owns it now (or it was freed) */
    }
    ctx_free(c);
    for (int j = 0; j < n_out; j++) nb_retain(st == NB_OK ? res[j] : NULL);
    nb_scope_end(s);
    for (int j = 0; j < n_out && st == NB_OK; j++) outputs[j] = nb_scope_adopt(res[j]);
    return st;
}
