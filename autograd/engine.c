/* engine.c - the tape: recording nodes as ops run, nb_backward walking them
 * in reverse recording order, gradient accumulation into leaves, freeing
 * the tape after backward, grad mode and detach. */
#include <string.h>

#include "nb_autograd_impl.h"

static _Thread_local bool grad_enabled = true;
static _Thread_local uint64_t next_seq = 1;
static _Thread_local uint64_t next_visit = 1;

bool nb_set_grad_enabled(bool enabled) {
    bool prev = grad_enabled;
    grad_enabled = enabled;
    return prev;
}
bool nb_is_grad_enabled(void) { return grad_enabled; }

nb_status nb_no_grad_call(nb_status (*fn)(void *ctx), void *ctx) {
    if (!fn) return nb_set_error(NB_ERR_INVALID_ARG, "no_grad_call: NULL function");
    bool prev = nb_set_grad_enabled(false);
    nb_status st = fn(ctx);
    nb_set_grad_enabled(prev);
    return st;
}

bool nb_requires_grad(const nb_tensor *t) { return t && t->requires_grad; }
bool nb_is_leaf(const nb_tensor *t) { return t && !t->grad_fn; }
nb_tensor *nb_tensor_grad(const nb_tensor *t) {
    nb_tensor *in = (nb_tensor *)t;
    return nb_check_inputs("tensor_grad", 1, &in) ? t->grad : NULL;
}

void nb_tensor_zero_grad(nb_tensor *t) {
    if (!t) return;
    if (t->keep_grad && t->grad) { /* a view of a flat gradient buffer: zeroed in place */
        nb_fill_(t->grad, 0);
        return;
    }
    nb_release(t->grad);
    t->grad = NULL;
}

nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "set_requires_grad: NULL tensor");
    if (t->grad_fn)
        return nb_set_error(NB_ERR_INVALID_ARG, "set_requires_grad: only leaf tensors (not op results) can be changed");
    if (requires_grad && !nb_dtype_is_float(t->dtype))
        return nb_set_error(NB_ERR_DTYPE, "set_requires_grad: only float tensors can require grad, got %s",
                            nb_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return NB_OK;
}

nb_tensor *nb_detach(nb_tensor *t) {
    if (!nb_check_inputs("detach", 1, &t)) return NULL;
    return nb_tensor_view_of(t, t->ndim, t->shape, t->strides, t->offset);
}

/* ---- recording ---------------------------------------------------------- */

bool nb_needs_grad(int n, nb_tensor *const *inputs) {
    if (!grad_enabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

nb_node *nb_record(nb_op_id op, nb_backward_fn fn, nb_tensor *out, int n, nb_tensor *const *inputs,
                   bool *failed) {
    *failed = false;
    if (!out || !nb_needs_grad(n, inputs)) return NULL;
    NB_ASSERT(n <= NB_NODE_MAX_IN && !out->grad_fn);
    nb_node *node = nb_host_calloc(1, sizeof *node);
    if (!node) {
        *failed = true;
        nb_set_error(NB_ERR_OOM, "%s: out of host memory recording the tape", nb_op_name(op));
        return NULL;
    }
    node->refcount = 1;
    node->seq = next_seq++;
    node->op = op;
    node->backward = fn;
    node->n_in = n;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) {
            nb_retain(inputs[i]);
            node->in[i] = inputs[i];
        }
    node->out_ndim = out->ndim;
    memcpy(node->out_shape, out->shape, sizeof out->shape);
    node->out_dtype = out->dtype;
    out->grad_fn = node;
    out->requires_grad = true;
    return node;
}

void nb_save(nb_node *n, int slot, const nb_tensor *t) {
    NB_ASSERT(n && slot < NB_NODE_MAX_SAVED && !n->saved[slot]);
    nb_tensor *alias = nb_host_calloc(1, sizeof *alias);
    if (!alias) { /* the op's nb_scope_return turns this into its NULL result */
        n->save_failed = true;
        nb_fail_pending(NB_ERR_OOM, "%s: out of host memory saving a tensor for backward", nb_op_name(n->op));
        return;
    }
    atomic_init(&alias->refcount, 1);
    atomic_fetch_add(&t->storage->refcount, 1);
    alias->storage = t->storage;
    alias->offset = t->offset;
    alias->ndim = t->ndim;
    alias->dtype = t->dtype;
    memcpy(alias->shape, t->shape, sizeof t->shape);
    memcpy(alias->strides, t->strides, sizeof t->strides);
    n->saved[slot] = alias;
}

static void node_free_tape(nb_node *n) {
    for (int i = 0; i < NB_NODE_MAX_IN; i++) {
        nb_release(n->in[i]);
        n->in[i] = NULL;
    }
    for (int i = 0; i < NB_NODE_MAX_SAVED; i++) {
        nb_release(n->saved[i]);
        n->saved[i] = NULL;
    }
    n->freed = true;
}

/* Freeing a node releases its inputs, which may free their nodes, and so on
 * down a graph as deep as the training loop made it: done with a pending
 * list instead of recursion, so a chain of a million ops cannot overflow the
 * stack. */
static _Thread_local nb_node *release_pending;
static _Thread_local bool releasing;

void nb_node_release(nb_node *n) {
    if (--n->refcount) return;
    n->release_next = release_pending;
    release_pending = n;
    if (releasing) return; /* the loop below, further up this thread's stack, frees it */
    releasing = true;
    while (release_pending) {
        nb_node *m = release_pending;
        release_pending = m->release_next;
        node_free_tape(m);
        nb_release(m->grad_acc);
        free(m);
    }
    releasing = false;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct {
    nb_node **v;
    size_t len, cap;
} node_list;

static bool list_push(node_list *l, nb_node *n) {
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        nb_node **v = realloc(l->v, sizeof *v * cap);
        if (!v) return false;
        l->v = v, l->cap = cap;
    }
    l->v[l->len++] = n;
    return true;
}

/* Every node reachable from root, once each (iterative DFS). */
static nb_status collect(nb_node *root, node_list *out) {
    uint64_t stamp = next_visit++;
    node_list stack = {0};
    nb_status st = NB_OK;
    root->visit = stamp;
    if (!list_push(&stack, root)) st = NB_ERR_OOM;
    while (st == NB_OK && stack.len) {
        nb_node *n = stack.v[--stack.len];
        if (!list_push(out, n)) st = NB_ERR_OOM;
        else n->refcount++; /* freeing one node's tape may drop another's last owner */
        for (int i = 0; st == NB_OK && i < n->n_in; i++) {
            nb_node *c = n->in[i] ? n->in[i]->grad_fn : NULL;
            if (c && c->visit != stamp) {
                c->visit = stamp;
                if (!list_push(&stack, c)) st = NB_ERR_OOM;
            }
        }
    }
    free(stack.v);
    return st == NB_OK ? NB_OK : nb_set_error(NB_ERR_OOM, "backward: out of host memory");
}

static int by_seq_desc(const void *a, const void *b) {
    uint64_t x = (*(nb_node *const *)a)->seq, y = (*(nb_node *const *)b)->seq;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* True if g is referenced only by the current scope and owns its storage,
 * so a leaf can keep it as its .grad without a copy. */
static bool exclusively_owned(const nb_tensor *g) {
    return atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 && nb_is_contiguous(g) &&
           g->offset == 0 && !g->grad_fn;
}

static nb_status accumulate_leaf(nb_tensor *leaf, nb_tensor *g, bool may_steal) {
    if (!leaf->grad) {
        if (may_steal && exclusively_owned(g)) {
            nb_retain(g);
            leaf->grad = g;
            return NB_OK;
        }
        nb_tensor *c = nb_tensor_new_unscoped(leaf->ndim, leaf->shape, leaf->dtype, leaf->storage->device);
        if (!c) return nb_last_status();
        nb_status st = nb_copy_(c, g);
        if (st != NB_OK) {
            nb_release(c);
            return st;
        }
        leaf->grad = c;
        return NB_OK;
    }
    nb_kview a = nb_kview_of(leaf->grad), b = nb_kview_of(g);
    return NB_CALL(leaf, binary, NB_BINARY_ADD, &a, &a, &b);
}

static nb_status accumulate_node(nb_node *n, nb_tensor *g) {
    if (!n->grad_acc) {
        nb_retain(g);
        n->grad_acc = g;
        return NB_OK;
    }
    nb_tensor *sum = nb_add(n->grad_acc, g);
    if (!sum) return nb_last_status();
    nb_retain(sum);
    nb_release(n->grad_acc);
    n->grad_acc = sum;
    return NB_OK;
}

static nb_status run_node(nb_node *n) {
    nb_tensor *gin[NB_NODE_MAX_IN] = {0};
    if (n->save_failed)
        return nb_set_error(NB_ERR_OOM, "backward: %s could not save its tensors for backward (out of host memory)",
                            nb_op_name(n->op));
    nb_status st = n->backward(n, n->grad_acc, gin);
    if (st != NB_OK) return st;
    for (int i = 0; i < n->n_in && st == NB_OK; i++) {
        nb_tensor *in = n->in[i];
        if (!in || !gin[i]) continue;
        /* a backward rule returning another shape is a bug in nabla, not user input */
        NB_ASSERT(gin[i]->ndim == in->ndim && !memcmp(gin[i]->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim));
        st = in->grad_fn ? accumulate_node(in->grad_fn, gin[i]) : accumulate_leaf(in, gin[i], true);
    }
    return st;
}

static nb_status run_backward(nb_node *root, nb_tensor *seed) {
    node_list nodes = {0};
    nb_status st = collect(root, &nodes);
    if (st == NB_OK) {
        qsort(nodes.v, nodes.len, sizeof *nodes.v, by_seq_desc);
        nb_retain(seed);
        root->grad_acc = seed;
    }
    for (size_t i = 0; st == NB_OK && i < nodes.len; i++) {
        nb_node *n = nodes.v[i];
        if (n->freed) st = nb_set_error(NB_ERR_STATE, "backward: the graph through %s was already freed by an "
                                                      "earlier backward", nb_op_name(n->op));
        else if (n->grad_acc) st = run_node(n);
    }
    for (size_t i = 0; i < nodes.len; i++) { /* the tape dies with the backward */
        nb_release(nodes.v[i]->grad_acc);
        nodes.v[i]->grad_acc = NULL;
        node_free_tape(nodes.v[i]);
    }
    for (size_t i = 0; i < nodes.len; i++) nb_node_release(nodes.v[i]);
    free(nodes.v);
    return st;
}

nb_status nb_backward_with(nb_tensor *out, nb_tensor *grad_out) {
    if (!out || !grad_out) return nb_set_error(NB_ERR_INVALID_ARG, "backward: NULL tensor");
    if (!out->requires_grad)
        return nb_set_error(NB_ERR_STATE, "backward: the tensor does not require grad (no input requires grad, "
                                          "or it was computed under no_grad)");
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    bool same_shape = grad_out->ndim == out->ndim &&
                      !memcmp(grad_out->shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
    if (same_shape && grad_out->dtype != out->dtype) /* a dtype error, not a shape one */
        return nb_set_error(NB_ERR_DTYPE, "backward: gradient dtype %s does not match output dtype %s (shape %s)",
                            nb_dtype_name(grad_out->dtype), nb_dtype_name(out->dtype),
                            nb_fmt_shape(out->ndim, out->shape, b, sizeof b));
    if (!same_shape)
        return nb_set_error(NB_ERR_SHAPE, "backward: gradient %s %s does not match output %s %s",
                            nb_fmt_shape(grad_out->ndim, grad_out->shape, a, sizeof a), nb_dtype_name(grad_out->dtype),
                            nb_fmt_shape(out->ndim, out->shape, b, sizeof b), nb_dtype_name(out->dtype));
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    nb_autocast_pause(true); /* each op's backward runs in its forward's dtypes */
    nb_status st = out->grad_fn ? run_backward(out->grad_fn, grad_out) : accumulate_leaf(out, grad_out, false);
    nb_autocast_pause(false);
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return st;
}

nb_status nb_backward(nb_tensor *out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "backward: NULL tensor");
    if (nb_numel(out) != 1) {
        char a[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_SHAPE, "backward: output of shape %s is not a scalar; use nb_backward_with",
                            nb_fmt_shape(out->ndim, out->shape, a, sizeof a));
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *one = nb_tensor_new(out->ndim, out->shape, out->dtype, out->storage->device);
    nb_status st = one ? nb_fill_(one, 1) : nb_last_status();
    if (st == NB_OK) st = nb_backward_with(out, one);
    nb_scope_end(s);
    return st;
}
