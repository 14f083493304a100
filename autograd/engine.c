/* engine.c - the tape: recording nodes as ops run, saving tensors for
 * backward (with their storage versions), and the backward pass shared by
 * nb_backward_ex and nb_grad: nodes reachable from the outputs run in
 * decreasing recording order, gradients accumulate into nodes, into the
 * .grad of leaves or into nb_grad's results, hooks and anomaly checks run
 * on the way, and the tape is freed afterwards unless retained. Under
 * create_graph grad mode stays on, saved tensors are unpacked connected to
 * their graphs, and what the rules compute is recorded in turn. */
#include <pthread.h>
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
uint64_t nb_next_seq(void) { return next_seq++; }

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
    /* an accessor: it keeps an earlier error (library code reads grads
     * between its steps), and sets one only for a NULL with none pending */
    if (!t && nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "tensor_grad: input 0 is NULL");
    return t ? t->grad : NULL;
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

nb_status nb_tensor_set_grad(nb_tensor *t, nb_tensor *grad, bool keep_storage) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "tensor_set_grad: NULL tensor");
    if (t->grad_fn) return nb_set_error(NB_ERR_INVALID_ARG, "tensor_set_grad: t is not a leaf");
    if (grad) {
        char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
        if (grad->ndim != t->ndim || memcmp(grad->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))
            return nb_set_error(NB_ERR_SHAPE, "tensor_set_grad: grad %s for a tensor of %s",
                                nb_fmt_shape(grad->ndim, grad->shape, b1, sizeof b1),
                                nb_fmt_shape(t->ndim, t->shape, b2, sizeof b2));
        if (grad->dtype != t->dtype)
            return nb_set_error(NB_ERR_DTYPE, "tensor_set_grad: grad %s for a %s tensor", nb_dtype_name(grad->dtype),
                                nb_dtype_name(t->dtype));
        if (grad->storage->device.type != t->storage->device.type ||
            grad->storage->device.index != t->storage->device.index)
            return nb_set_error(NB_ERR_DEVICE, "tensor_set_grad: grad on another device");
    }
    nb_retain(grad);
    nb_release(t->grad);
    t->grad = grad;
    t->keep_grad = grad && keep_storage;
    return NB_OK;
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

void nb_tensor_become(nb_tensor *t, nb_tensor *src) {
    nb_tensor_take_storage(t, src);
    nb_node *old = t->grad_fn;
    t->grad_fn = src->grad_fn;
    if (t->grad_fn) t->grad_fn->refcount++;
    t->output_nr = src->output_nr;
    t->requires_grad = src->requires_grad;
    if (old) nb_node_release(old);
}

nb_status nb_tensor_rebind(nb_tensor *t, nb_tensor *src) {
    nb_tensor *in[2] = {t, src};
    if (!nb_check_inputs("tensor_rebind", 2, in)) return nb_last_status();
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (t->ndim != src->ndim || t->dtype != src->dtype || memcmp(t->shape, src->shape, sizeof(int64_t) * (size_t)t->ndim))
        return nb_set_error(NB_ERR_SHAPE, "tensor_rebind: %s %s and %s %s differ", nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                            nb_dtype_name(t->dtype), nb_fmt_shape(src->ndim, src->shape, b, sizeof b),
                            nb_dtype_name(src->dtype));
    nb_tensor_become(t, src);
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

nb_node_ext *nb_node_ext_get(nb_node *n) {
    if (!n->ext && !(n->ext = nb_host_calloc(1, sizeof *n->ext)))
        nb_set_error(NB_ERR_OOM, "%s: out of host memory", nb_op_name(n->op));
    return n->ext;
}

const char *nb_node_name(const nb_node *n, char *buf, size_t len) {
    if (n->kind == NB_NODE_FUNCTION) return nb_function_node_name(n);
    if (n->kind == NB_NODE_OP) return nb_op_name(n->op);
    snprintf(buf, len, "the backward of %s", nb_op_name(n->op));
    return buf;
}

/* Anomaly mode, at record time: the op's forward must not turn finite
 * inputs into NaN or inf, and the node remembers what recorded it. */
static bool anomaly_forward(nb_node *node, nb_tensor *out, int n, nb_tensor *const *inputs) {
    char desc[512], a[NB_SHAPE_BUF], nm[96];
    size_t pos = (size_t)snprintf(desc, sizeof desc, "%s(", nb_node_name(node, nm, sizeof nm));
    for (int i = 0; i < n && pos < sizeof desc; i++)
        pos += (size_t)snprintf(desc + pos, sizeof desc - pos, "%s%s %s", i ? ", " : "",
                                inputs[i] ? nb_fmt_shape(inputs[i]->ndim, inputs[i]->shape, a, sizeof a) : "None",
                                inputs[i] ? nb_dtype_name(inputs[i]->dtype) : "");
    if (pos < sizeof desc)
        snprintf(desc + pos, sizeof desc - pos, ") -> %s %s", nb_fmt_shape(out->ndim, out->shape, a, sizeof a),
                 nb_dtype_name(out->dtype));
    nb_node_ext *e = nb_node_ext_get(node);
    if (!e || !(e->trace = strdup(desc))) {
        nb_set_error(NB_ERR_OOM, "%s: out of host memory recording the anomaly trace", nb_op_name(node->op));
        return false;
    }
    if (node->kind == NB_NODE_OP && nb_anomaly_nonfinite(1, &out) && !nb_anomaly_nonfinite(n, inputs)) {
        nb_set_error(NB_ERR_ANOMALY, "anomaly: the forward of %s produced NaN or inf from finite inputs", desc);
        return false;
    }
    return true;
}

static int node_op(const nb_node *n) { return (int)n->op; }
static void tape_hooks(void) { nb_tape = (nb_tape_hooks){nb_node_release, node_op, nb_tensor_hooks_free}; }
static pthread_once_t tape_once = PTHREAD_ONCE_INIT;
void nb_tape_register(void) { pthread_once(&tape_once, tape_hooks); }

static nb_node *record(nb_op_id op, uint8_t kind, nb_backward_fn fn, nb_tensor *out, int n, nb_tensor *const *inputs,
                       bool *failed) {
    *failed = false;
    if (!out || !nb_needs_grad(n, inputs)) return NULL;
    nb_tape_register();
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
    node->kind = kind;
    node->backward = fn;
    node->n_in = n;
    node->in = node->in_buf;
    node->edge = node->edge_buf;
    node->edge_nr = node->edge_nr_buf;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) {
            nb_retain(inputs[i]);
            node->in[i] = inputs[i];
            nb_node_set_edge(node, i, inputs[i]);
        }
    node->out_ndim = out->ndim;
    memcpy(node->out_shape, out->shape, sizeof out->shape);
    node->out_dtype = out->dtype;
    out->grad_fn = node;
    out->output_nr = 0;
    out->requires_grad = true;
    if (nb_anomaly_enabled() && !anomaly_forward(node, out, n, inputs)) {
        *failed = true; /* the op's result (and its node) die with its scope */
        return NULL;
    }
    return node;
}

/* Each row's backward rule, from its bw column. */
static const nb_backward_fn op_backward[NB_OP_COUNT] = {
#define BW(f) nb_bw_##f
#define BW_CALLS NULL
#define BW_NONE NULL
#define NB_OP_BW_ROW(id, name, family, flags, dtypes, slots, bw, ac) [NB_OP_##id] = bw,
    NB_OP_TABLE(NB_OP_BW_ROW)
#undef NB_OP_BW_ROW
#undef BW
#undef BW_CALLS
#undef BW_NONE
};

nb_backward_fn nb_op_backward(nb_op_id op) { return (unsigned)op < NB_OP_COUNT ? op_backward[op] : NULL; }

nb_node *nb_record(nb_op_id op, nb_tensor *out, int n, nb_tensor *const *inputs, bool *failed) {
    nb_backward_fn fn = nb_op_backward(op);
    NB_ASSERT(fn); /* only a BW(f) row records a node of its own */
    return record(op, NB_NODE_OP, fn, out, n, inputs, failed);
}

nb_node *nb_record_grad(const nb_node *src, nb_backward_fn fn, nb_tensor *out, int n, nb_tensor *const *inputs,
                        bool *failed) {
    nb_node *node = record(src->op, NB_NODE_GRAD, fn, out, n, inputs, failed);
    if (node) node->p = src->p;
    return node;
}

void nb_save(nb_node *n, int slot, const nb_tensor *t) {
    NB_ASSERT(n && slot < NB_NODE_MAX_SAVED && !n->saved[slot]);
    nb_tensor *alias = nb_tensor_alias_unscoped(t);
    if (!alias) { /* the op's nb_scope_return turns this into its NULL result */
        n->save_failed = true;
        nb_fail_pending(NB_ERR_OOM, "%s: out of host memory saving a tensor for backward", nb_op_name(n->op));
        return;
    }
    n->saved[slot] = alias;
    n->saved_version[slot] = nb_version_of(t);
    if (t->grad_fn == n) n->saved_out |= (uint8_t)(1u << slot); /* no reference: that would be a cycle */
    else if (t->requires_grad) {
        nb_retain((nb_tensor *)t);
        n->saved_var[slot] = (nb_tensor *)t;
    }
}

nb_status nb_saved_check(const nb_node *n, const nb_tensor *alias, unsigned version, int index) {
    unsigned now = nb_version_of(alias);
    if (now == version) return NB_OK;
    char a[NB_SHAPE_BUF], nm[96];
    return nb_set_error(NB_ERR_STATE, "backward: one of the variables needed for gradient computation has been "
                                      "modified by an inplace operation: [%s %s], saved by %s (saved tensor %d), "
                                      "is at version %u; expected version %u instead",
                        nb_dtype_name(alias->dtype), nb_fmt_shape(alias->ndim, alias->shape, a, sizeof a),
                        nb_node_name(n, nm, sizeof nm), index, now, version);
}

nb_tensor *nb_history_view(nb_tensor *t, nb_node *n, int out_nr) {
    nb_tensor *v = nb_tensor_view_of(t, t->ndim, t->shape, t->strides, t->offset);
    if (!v) return NULL;
    v->grad_fn = n;
    n->refcount++;
    v->output_nr = out_nr;
    v->requires_grad = true;
    return v;
}

nb_tensor *nb_saved_unpack(nb_node *n, nb_tensor *alias, nb_tensor *var, bool is_out, int out_nr, bool connected) {
    if (!connected || (!var && !is_out)) return alias;
    if (var) return var;
    return nb_history_view(alias, n, out_nr); /* PyTorch's SavedVariable of an output: the node itself */
}

void nb_node_set_edge(nb_node *n, int i, const nb_tensor *t) {
    n->edge[i] = t->grad_fn;
    n->edge_nr[i] = t->output_nr;
    if (t->grad_fn) t->grad_fn->refcount++;
}

static void node_free_tape(nb_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        nb_release(n->in[i]);
        n->in[i] = NULL;
        if (n->edge && n->edge[i]) nb_node_release(n->edge[i]);
        if (n->edge) n->edge[i] = NULL;
    }
    for (int i = 0; i < NB_NODE_MAX_SAVED; i++) {
        nb_release(n->saved[i]);
        nb_release(n->saved_var[i]);
        n->saved[i] = n->saved_var[i] = NULL;
    }
    if (n->kind == NB_NODE_FUNCTION) nb_function_free_tape(n);
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
        if (m->ext) {
            nb_tensor_hooks_free(m->ext->hooks);
            free(m->ext->trace);
            if (m->ext->fn) nb_function_free(m);
            free(m->ext);
        }
        free(m);
    }
    releasing = false;
}

/* ---- the backward pass ------------------------------------------------------ */

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

/* n->bw flags during a pass */
enum { BW_RUN = 1, BW_TARGET = 2 };

/* A leaf whose gradient this pass collects before it is used: one with
 * hooks, or one of nb_grad's inputs. pending counts the edges into it not
 * yet processed; at 0 its gradient is complete. */
typedef struct {
    nb_tensor *leaf, *acc, *result;
    long pending;
} leaf_slot;

typedef struct {
    bool create_graph, retain_graph;
    bool accumulate; /* into .grad (backward); else only into results (grad) */
    nb_tensor *const *inputs; /* nb_grad's */
    int n_inputs;
    nb_tensor **captured; /* per input: a non-leaf input's gradient */
    leaf_slot *slots;
    int n_slots, cap_slots;
    node_list nodes;
    struct deferred { nb_node *n; nb_tensor *g; } *defer; /* index_into_grad's, for the pass's end */
    int n_defer, cap_defer;
} pass;

static bool is_input(const pass *p, const nb_tensor *t) {
    for (int i = 0; i < p->n_inputs; i++)
        if (p->inputs[i] == t) return true;
    return false;
}

static leaf_slot *find_slot(pass *p, const nb_tensor *leaf) {
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].leaf == leaf) return &p->slots[i];
    return NULL;
}

/* Whether a leaf's gradient goes through a slot this pass. */
static bool slotted(const pass *p, const nb_tensor *leaf) {
    return p->accumulate ? leaf->hooks != NULL : is_input(p, leaf);
}

/* Counts one more edge into leaf (adding its slot if needed). */
static nb_status slot_edge(pass *p, nb_tensor *leaf) {
    leaf_slot *s = find_slot(p, leaf);
    if (!s) {
        if (p->n_slots == p->cap_slots) {
            int cap = p->cap_slots ? 2 * p->cap_slots : 8;
            leaf_slot *v = realloc(p->slots, sizeof *v * (size_t)cap);
            if (!v) return nb_set_error(NB_ERR_OOM, "backward: out of host memory");
            p->slots = v, p->cap_slots = cap;
        }
        s = &p->slots[p->n_slots++];
        *s = (leaf_slot){leaf, NULL, NULL, 0};
    }
    s->pending++;
    return NB_OK;
}

/* Every node reachable from the roots, once each (iterative DFS). */
static nb_status collect(nb_node *const *roots, int n_roots, node_list *out) {
    uint64_t stamp = next_visit++;
    node_list stack = {0};
    nb_status st = NB_OK;
    for (int r = 0; r < n_roots && st == NB_OK; r++)
        if (roots[r] && roots[r]->visit != stamp) {
            roots[r]->visit = stamp;
            if (!list_push(&stack, roots[r])) st = NB_ERR_OOM;
        }
    while (st == NB_OK && stack.len) {
        nb_node *n = stack.v[--stack.len];
        if (!list_push(out, n)) st = NB_ERR_OOM;
        else n->refcount++; /* freeing one node's tape may drop another's last owner */
        n->bw = 0;
        for (int i = 0; st == NB_OK && i < n->n_in; i++) {
            nb_node *c = n->in[i] ? n->edge[i] : NULL;
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

/* leaf.grad += g. Under create_graph (or when .grad has a graph) out of
 * place and recorded, so .grad can be differentiated; else in place. */
static nb_status accumulate_leaf(nb_tensor *leaf, nb_tensor *g, bool may_steal, bool create_graph) {
    if (!leaf->grad) {
        if (create_graph && g->requires_grad) { /* keep the graph; never share g with another owner */
            nb_tensor *r = atomic_load(&g->refcount) == 1 && g->grad_fn ? g : nb_mul_scalar(g, 1.0);
            if (!r) return nb_last_status();
            nb_retain(r);
            leaf->grad = r;
            return NB_OK;
        }
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
    if (leaf->keep_grad && g->requires_grad) /* .grad must stay a view of the flat buffer */
        return nb_set_error(NB_ERR_UNSUPPORTED, "backward: create_graph cannot accumulate a differentiable gradient "
                                                "into a parameter whose .grad is a view of a flat gradient buffer "
                                                "(nb_module_flatten_parameters); use nb_grad");
    if (!leaf->keep_grad && (create_graph || leaf->grad->requires_grad)) {
        nb_tensor *sum = nb_add(leaf->grad, g);
        if (!sum) return nb_last_status();
        nb_retain(sum);
        nb_release(leaf->grad);
        leaf->grad = sum;
        return NB_OK;
    }
    nb_bump_version(leaf->grad);
    nb_kview a = nb_kview_of(leaf->grad), b = nb_kview_of(g);
    return nb_kernel_binary(NB_BE(leaf), NB_BINARY_ADD, &a, &a, &b);
}

static nb_tensor **acc_slot(nb_node *n, int out_nr) {
    return out_nr ? nb_function_acc(n, out_nr) : &n->grad_acc;
}

/* The part of acc outside [lo, hi) of dim d set to zero. */
static nb_status zero_outside(nb_tensor *acc, int d, int64_t lo, int64_t hi) {
    int64_t span[2][2] = {{0, lo}, {hi, acc->shape[d]}};
    for (int k = 0; k < 2; k++) {
        if (span[k][1] <= span[k][0]) continue;
        nb_kview v = nb_kview_of(acc);
        v.data = (char *)v.data + span[k][0] * v.strides[d] * (int64_t)nb_dtype_size(acc->dtype);
        v.shape[d] = span[k][1] - span[k][0];
        nb_status st = nb_kernel_fill(NB_BE(acc), &v, 0.0);
        if (st) return st;
    }
    return NB_OK;
}

/* n's accumulator made whole (its unwritten part zeroed) before anything
 * reads it or adds into it. */
static nb_status acc_settle(nb_node *n) {
    if (!n->acc_lazy) return NB_OK;
    n->acc_lazy = false;
    return zero_outside(n->grad_acc, n->acc_dim, n->acc_lo, n->acc_hi);
}

/* g and the accumulator t of one shape, dtype and device (what an in-place add needs). */
static bool same_layout(const nb_tensor *t, const nb_tensor *g) {
    return t->dtype == g->dtype && t->ndim == g->ndim && nb_same_device(t->storage->device, g->storage->device) &&
           !memcmp(t->shape, g->shape, sizeof(int64_t) * (size_t)t->ndim) && nb_is_contiguous(t);
}

static nb_status accumulate_node(nb_node *n, int out_nr, nb_tensor *g, bool create_graph) {
    nb_tensor **acc = acc_slot(n, out_nr);
    if (!out_nr && acc_settle(n)) return nb_last_status();
    if (!*acc) {
        nb_retain(g);
        *acc = g;
        if (!out_nr) n->acc_owned = false; /* the caller's or a rule's tensor: never written */
        return NB_OK;
    }
    if (!out_nr && n->acc_owned && !create_graph && same_layout(*acc, g)) { /* a buffer of the engine's own */
        nb_kview a = nb_kview_of(*acc), b = nb_kview_of(g);
        return nb_kernel_binary(NB_BE(*acc), NB_BINARY_ADD, &a, &a, &b);
    }
    nb_tensor *sum = nb_add(*acc, g);
    if (!sum) return nb_last_status();
    nb_retain(sum);
    nb_release(*acc);
    *acc = sum;
    if (!out_nr) n->acc_owned = !create_graph; /* fresh, and only the engine holds it past the op's scope */
    return NB_OK;
}

/* A slice's gradient added into the region of its input's accumulator,
 * one buffer for the whole input however many slices feed it, instead of
 * a zero-padded copy per slice added whole: split, chunk and per-step
 * narrows (nb_rnn's) cost the input's size once rather than once per
 * piece. The buffer is zeroed lazily: adjacent unit-step slices of one dim
 * (chunk's and split's pieces, in whatever order) are copied in, and only
 * what no slice wrote is zeroed (acc_settle), so a chunk's gradient is
 * its pieces' copies. Not under create_graph (the padded copy is then a
 * recorded op), nor into leaves, a function's outputs or an accumulator
 * the engine did not make. 1: done; 0: use the rule; -1: an error. */
static int slice_into_acc(nb_node *n) {
    nb_tensor *in = n->in[0], *g = n->grad_acc;
    nb_node *dst = in ? n->edge[0] : NULL;
    if (!in || !g || !dst || n->edge_nr[0] != 0 || dst->kind == NB_NODE_FUNCTION) return 0;
    if (g->dtype != in->dtype || !nb_same_device(g->storage->device, in->storage->device)) return 0;
    int d = n->p.slice.dim;
    int64_t start = n->p.slice.start, step = n->p.slice.step, end = start + g->shape[d];
    if (!dst->grad_acc) {
        nb_tensor *z = nb_tensor_new(in->ndim, in->shape, in->dtype, in->storage->device);
        if (!z) return -1;
        nb_retain(z); /* the engine's reference, past the pass's scope */
        dst->grad_acc = z;
        dst->acc_owned = true;
        dst->acc_lazy = true, dst->acc_dim = d, dst->acc_lo = dst->acc_hi = start;
    } else if (!dst->acc_owned || !same_layout(dst->grad_acc, in)) {
        return 0;
    }
    nb_tensor *acc = dst->grad_acc;
    int64_t strides[NB_MAX_DIMS];
    memcpy(strides, acc->strides, sizeof(int64_t) * (size_t)acc->ndim);
    int64_t offset = acc->offset + start * strides[d];
    strides[d] *= step;
    nb_tensor *region = nb_tensor_view_of(acc, g->ndim, g->shape, strides, offset);
    if (!region) return -1;
    nb_kview a = nb_kview_of(region), b = nb_kview_of(g);
    bool fresh = dst->acc_lazy && step == 1 && d == dst->acc_dim &&
                 (dst->acc_lo == dst->acc_hi || end == dst->acc_lo || start == dst->acc_hi);
    if (fresh) { /* nothing written there yet: a copy */
        if (dst->acc_lo == dst->acc_hi) dst->acc_lo = start, dst->acc_hi = end;
        else dst->acc_lo = start < dst->acc_lo ? start : dst->acc_lo, dst->acc_hi = end > dst->acc_hi ? end : dst->acc_hi;
        return nb_kernel_copy(NB_BE(acc), &a, &b) == NB_OK ? 1 : -1;
    }
    if (acc_settle(dst)) return -1;
    return nb_kernel_binary(NB_BE(acc), NB_BINARY_ADD, &a, &a, &b) == NB_OK ? 1 : -1;
}

/* A leaf's .grad that an index gradient can be added into in place. */
static bool grad_takes_index(const nb_tensor *w) {
    return w->grad && !w->grad->requires_grad && same_layout(w->grad, w);
}

/* An embedding's (or index_select's) gradient added straight into its
 * leaf input's .grad (a tied decoder's dense gradient, a flat gradient
 * buffer) instead of into a zeroed table that is then added whole: the
 * same bits where it meets one other gradient (each row's sum is formed
 * from zero, then added; the add commutes), without zeroing and re-adding
 * the whole table. Where the leaf has no .grad yet it is deferred to the
 * pass's end (finish_deferred): a dense gradient may still come, as a
 * tied decoder's does through autocast's cast of the parameters, which is
 * recorded before the lookup and so runs after it. Not into a leaf with
 * hooks (they see this gradient alone) nor a .grad with a graph.
 * 1: done (or deferred); 0: use the rule; -1: an error. */
static int index_into_grad(pass *p, nb_node *n) {
    nb_tensor *w = n->in[0];
    if (!w || n->edge[0] || !n->grad_acc || !w->requires_grad || slotted(p, w) || n->grad_acc->dtype != w->dtype ||
        (w->dtype != NB_F32 && w->dtype != NB_F64) || (w->grad && !grad_takes_index(w)))
        return 0;
    if (nb_saved_check(n, n->saved[0], n->saved_version[0], 0)) return -1; /* the index, as the rule checks it */
    if (w->grad) {
        nb_bump_version(w->grad);
        return nb_index_grad_into(n, n->grad_acc, w->grad) == NB_OK ? 1 : -1;
    }
    if (p->n_defer == p->cap_defer) {
        int cap = p->cap_defer ? 2 * p->cap_defer : 4;
        struct deferred *v = realloc(p->defer, sizeof *v * (size_t)cap);
        if (!v) return nb_set_error(NB_ERR_OOM, "backward: out of host memory"), -1;
        p->defer = v, p->cap_defer = cap;
    }
    nb_retain(n->grad_acc);
    p->defer[p->n_defer++] = (struct deferred){n, n->grad_acc};
    return 1;
}

/* The deferred index gradients, in the order they came: added into the
 * .grad that is there now, or through the rule (a zeroed table) where
 * none is. */
static nb_status finish_deferred(pass *p) {
    nb_status st = NB_OK;
    for (int i = 0; i < p->n_defer && st == NB_OK; i++) {
        nb_node *n = p->defer[i].n;
        nb_tensor *w = n->in[0], *gin[NB_FUNCTION_MAX_IO] = {0};
        if (grad_takes_index(w)) {
            nb_bump_version(w->grad);
            st = nb_index_grad_into(n, p->defer[i].g, w->grad);
        } else if ((st = n->backward(n, p->defer[i].g, gin)) == NB_OK && gin[0]) {
            st = accumulate_leaf(w, gin[0], true, false);
        }
    }
    return st;
}

static bool has_grad(nb_node *n) {
    if (n->grad_acc) return true;
    return n->kind == NB_NODE_FUNCTION && nb_function_has_grad(n);
}

/* The slot's gradient is complete: hooks, then .grad or nb_grad's result. */
static nb_status finish_slot(pass *p, leaf_slot *s) {
    nb_tensor *g = s->acc;
    if (!g) return NB_OK;
    nb_status st = s->leaf->hooks ? nb_hooks_run_grad(s->leaf->hooks, 0, &g, "a leaf's gradient hook") : NB_OK;
    if (st == NB_OK && !p->accumulate) {
        nb_retain(g);
        s->result = g;
    }
    if (st == NB_OK && p->accumulate) st = accumulate_leaf(s->leaf, g, false, p->create_graph);
    if (st == NB_OK && p->accumulate && s->leaf->hooks) st = nb_hooks_run_post(s->leaf);
    return st;
}

/* One edge of the graph into a leaf has been processed, g its gradient
 * (NULL: none came). may_steal: g is a rule's result, not the caller's. */
static nb_status leaf_edge(pass *p, nb_tensor *leaf, nb_tensor *g, bool may_steal) {
    if (!slotted(p, leaf)) {
        if (!g || !p->accumulate) return NB_OK;
        return accumulate_leaf(leaf, g, may_steal, p->create_graph);
    }
    leaf_slot *s = find_slot(p, leaf);
    nb_status st = NB_OK;
    if (g && !s->acc) {
        nb_retain(g);
        s->acc = g;
    } else if (g) {
        nb_tensor *sum = nb_add(s->acc, g);
        if (!sum) return nb_last_status();
        nb_retain(sum);
        nb_release(s->acc);
        s->acc = sum;
    }
    if (--s->pending == 0) st = finish_slot(p, s);
    return st;
}

/* Under create_graph, an op whose rule is not differentiable: its
 * gradients are recorded as NB_NODE_NODIFF nodes that fail when reached
 * (PyTorch: "the derivative for ... is not implemented"). */
static nb_status nodiff_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    (void)g, (void)gin;
    return nb_set_error(NB_ERR_UNSUPPORTED,
                        "backward: double backward through %s is not supported: its backward rule is not "
                        "differentiable (create_graph recorded its gradient as a constant)", nb_op_name(n->op));
}

static nb_status mark_nodiff(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *deps[NB_NODE_MAX_IN] = {g};
    int k = 1;
    for (int i = 0; i < n->n_in && k < NB_NODE_MAX_IN; i++)
        if (n->in[i]) deps[k++] = n->in[i];
    for (int i = 0; i < n->n_in; i++) {
        if (!gin[i] || !nb_needs_grad(k, deps)) continue;
        nb_tensor *v = nb_tensor_view_of(gin[i], gin[i]->ndim, gin[i]->shape, gin[i]->strides, gin[i]->offset);
        bool failed;
        if (!v || (record(n->op, NB_NODE_NODIFF, nodiff_backward, v, k, deps, &failed), failed)) return nb_last_status();
        gin[i] = v;
    }
    return NB_OK;
}

static bool diff2(const nb_node *n) {
    if (n->kind == NB_NODE_FUNCTION) return n->op == NB_OP_COUNT; /* else once-differentiable (nb_function_apply_as) */
    if (n->kind != NB_NODE_OP) return n->kind != NB_NODE_NODIFF;
    return (nb_op_get(n->op)->flags & NB_OPF_DIFF2) != 0;
}

static nb_status anomaly_backward(nb_node *n, nb_tensor **gin) {
    char nm[96], what[768], a[NB_SHAPE_BUF];
    for (int i = 0; i < n->n_in; i++) {
        if (!gin[i] || !nb_anomaly_nonfinite(1, &gin[i])) continue;
        snprintf(what, sizeof what, "the backward of %s returned NaN or inf in the gradient of its input %d (%s %s); "
                 "the forward that recorded it: %s", nb_node_name(n, nm, sizeof nm), i,
                 nb_fmt_shape(gin[i]->ndim, gin[i]->shape, a, sizeof a), nb_dtype_name(gin[i]->dtype),
                 n->ext && n->ext->trace ? n->ext->trace : "(recorded before anomaly mode was on)");
        return nb_set_error(NB_ERR_ANOMALY, "anomaly: %s", what);
    }
    return NB_OK;
}

/* Runs n's rule and passes each input its gradient. */
static nb_status run_node(pass *p, nb_node *n) {
    nb_tensor *gin[NB_FUNCTION_MAX_IO] = {0};
    char nm[96];
    if (n->save_failed)
        return nb_set_error(NB_ERR_OOM, "backward: %s could not save its tensors for backward (out of host memory)",
                            nb_node_name(n, nm, sizeof nm));
    if (!p->create_graph && n->kind == NB_NODE_OP && n->op == NB_OP_SLICE && !nb_anomaly_enabled()) {
        int done = slice_into_acc(n);
        if (done) return done > 0 ? NB_OK : nb_last_status();
    }
    if (p->accumulate && !p->create_graph && n->kind == NB_NODE_OP &&
        (n->op == NB_OP_EMBEDDING || n->op == NB_OP_INDEX_SELECT) && !nb_anomaly_enabled()) {
        int done = index_into_grad(p, n);
        if (done) return done > 0 ? NB_OK : nb_last_status();
    }
    nb_tensor *keep[NB_NODE_MAX_SAVED];
    for (int i = 0; i < NB_NODE_MAX_SAVED; i++) {
        keep[i] = n->saved[i];
        if (keep[i]) {
            nb_status st = nb_saved_check(n, keep[i], n->saved_version[i], i);
            if (st) return st;
        }
    }
    nb_status st = NB_OK;
    if (p->create_graph) /* the rule computes with tensors connected to their graphs */
        for (int i = 0; i < NB_NODE_MAX_SAVED && st == NB_OK; i++)
            if (keep[i] && !(n->saved[i] = nb_saved_unpack(n, keep[i], n->saved_var[i], n->saved_out >> i & 1, 0, true)))
                st = nb_last_status();
    if (st == NB_OK) st = n->backward(n, n->grad_acc, gin);
    memcpy(n->saved, keep, sizeof keep);
    if (st == NB_OK && p->create_graph && !diff2(n)) st = mark_nodiff(n, n->grad_acc, gin);
    if (st == NB_OK && nb_anomaly_enabled()) st = anomaly_backward(n, gin);
    for (int i = 0; i < n->n_in && st == NB_OK; i++) {
        nb_tensor *in = n->in[i];
        if (!in) continue;
        if (gin[i] && n->kind != NB_NODE_FUNCTION) /* a rule returning another shape is a bug in nabla */
            NB_ASSERT(gin[i]->ndim == in->ndim &&
                      !memcmp(gin[i]->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim));
        if (n->edge[i]) st = gin[i] ? accumulate_node(n->edge[i], n->edge_nr[i], gin[i], p->create_graph) : NB_OK;
        else if (!p->accumulate && !is_input(p, in)) continue;
        else st = leaf_edge(p, in, gin[i], true);
    }
    return st;
}

/* A node that will not run: the edges into leaves it would have fed are done. */
static nb_status skip_node(pass *p, nb_node *n) {
    nb_status st = NB_OK;
    for (int i = 0; i < n->n_in && st == NB_OK; i++)
        if (n->in[i] && !n->edge[i] && (p->accumulate || is_input(p, n->in[i]))) st = leaf_edge(p, n->in[i], NULL, true);
    return st;
}

static void drop_grads(nb_node *n) {
    nb_release(n->grad_acc);
    n->grad_acc = NULL;
    n->acc_owned = n->acc_lazy = false;
    if (n->kind == NB_NODE_FUNCTION) nb_function_drop_grads(n);
}

/* Marks the nodes nb_grad must run: those on a path to one of its inputs
 * (ascending seq: a node's inputs were recorded before it). */
static void mark_needed(pass *p) {
    for (int i = 0; i < p->n_inputs; i++)
        if (p->inputs[i]->grad_fn) p->inputs[i]->grad_fn->bw |= BW_TARGET;
    for (size_t k = p->nodes.len; k-- > 0;) {
        nb_node *n = p->nodes.v[k];
        if (!p->accumulate) {
            for (int i = 0; i < n->n_in && !(n->bw & BW_RUN); i++) {
                nb_tensor *in = n->in[i];
                if (in && (n->edge[i] ? (n->edge[i]->bw & (BW_RUN | BW_TARGET)) : is_input(p, in))) n->bw |= BW_RUN;
            }
        } else
            n->bw |= BW_RUN;
    }
}

/* Counts the edges into slotted leaves from nodes that will run. */
static nb_status count_edges(pass *p, nb_tensor *const *outputs, int n_out) {
    for (int o = 0; o < n_out; o++)
        if (!outputs[o]->grad_fn && slotted(p, outputs[o]) && slot_edge(p, outputs[o]) != NB_OK)
            return nb_last_status();
    for (size_t k = 0; k < p->nodes.len; k++) {
        nb_node *n = p->nodes.v[k];
        if (!(n->bw & BW_RUN)) continue;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] && !n->edge[i] && slotted(p, n->in[i]) && slot_edge(p, n->in[i]) != NB_OK)
                return nb_last_status();
    }
    return NB_OK;
}

/* Captures the gradients of nb_grad's non-leaf inputs made by node n. */
static nb_status capture(pass *p, nb_node *n) {
    for (int i = 0; i < p->n_inputs; i++) {
        nb_tensor *t = p->inputs[i];
        if (t->grad_fn != n || p->captured[i]) continue;
        nb_tensor *g = *acc_slot(n, t->output_nr);
        if (!g) continue;
        nb_retain(g);
        p->captured[i] = g;
    }
    return NB_OK;
}

/* The pass over the graph of outputs seeded with seeds (same shapes). */
static nb_status run_pass(pass *p, nb_tensor *const *outputs, nb_tensor *const *seeds, int n_out) {
    nb_node *roots[NB_FUNCTION_MAX_IO * 4];
    int n_roots = 0;
    for (int o = 0; o < n_out && n_roots < (int)(sizeof roots / sizeof roots[0]); o++) roots[n_roots++] = outputs[o]->grad_fn;
    nb_status st = collect(roots, n_roots, &p->nodes);
    if (st == NB_OK) {
        if (p->nodes.len > 1) qsort(p->nodes.v, p->nodes.len, sizeof *p->nodes.v, by_seq_desc);
        mark_needed(p);
        st = count_edges(p, outputs, n_out);
    }
    for (int o = 0; o < n_out && st == NB_OK; o++)
        st = outputs[o]->grad_fn ? accumulate_node(outputs[o]->grad_fn, outputs[o]->output_nr, seeds[o], p->create_graph)
                                 : leaf_edge(p, outputs[o], seeds[o], false);
    for (size_t i = 0; st == NB_OK && i < p->nodes.len; i++) {
        nb_node *n = p->nodes.v[i];
        char nm[96];
        if (!has_grad(n) || !(n->bw & (BW_RUN | BW_TARGET))) {
            if (n->bw & BW_RUN) st = skip_node(p, n);
            continue;
        }
        if (n->freed) {
            st = nb_set_error(NB_ERR_STATE, "backward: the graph through %s was already freed by an earlier backward "
                              "(pass retain_graph to backward twice)", nb_node_name(n, nm, sizeof nm));
            break;
        }
        if ((st = acc_settle(n))) break; /* the last slice's gradient came in: the rest zeroed */
        if (n->ext && n->ext->hooks) { /* hooks of the non-leaf tensors n made */
            int n_out_node = n->kind == NB_NODE_FUNCTION ? nb_function_n_outputs(n) : 1;
            for (int o = 0; o < n_out_node && st == NB_OK; o++) {
                nb_tensor **acc = acc_slot(n, o), *g = *acc;
                if (g) st = nb_hooks_run_grad(n->ext->hooks, o, &g, "a tensor's gradient hook");
                if (g != *acc) { /* replaced: the node holds the hook's tensor, never written */
                    nb_retain(g), nb_release(*acc), *acc = g;
                    if (!o) n->acc_owned = false;
                }
            }
        }
        if (st == NB_OK && (n->bw & BW_TARGET)) st = capture(p, n);
        if (st == NB_OK && (n->bw & BW_RUN)) st = run_node(p, n);
        drop_grads(n); /* its inputs have their shares: free the memory now */
    }
    for (int s = 0; s < p->n_slots && st == NB_OK; s++) /* a slot short of edges (a node that failed) */
        if (p->slots[s].pending > 0) {
            p->slots[s].pending = 0;
            st = finish_slot(p, &p->slots[s]);
        }
    if (st == NB_OK) st = finish_deferred(p);
    return st;
}

static void end_pass(pass *p) {
    for (size_t i = 0; i < p->nodes.len; i++) {
        drop_grads(p->nodes.v[i]);
        if (!p->retain_graph) node_free_tape(p->nodes.v[i]); /* the tape dies with the backward */
    }
    for (size_t i = 0; i < p->nodes.len; i++) nb_node_release(p->nodes.v[i]);
    free(p->nodes.v);
    for (int s = 0; s < p->n_slots; s++) nb_release(p->slots[s].acc), nb_release(p->slots[s].result);
    free(p->slots);
    for (int i = 0; i < p->n_defer; i++) nb_release(p->defer[i].g);
    free(p->defer);
}

/* ---- nb_backward ---------------------------------------------------------------- */

/* grad_out fits out (shape and dtype). */
static nb_status check_seed(const char *op, const nb_tensor *out, const nb_tensor *grad_out) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    bool same_shape = grad_out->ndim == out->ndim &&
                      !memcmp(grad_out->shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
    if (same_shape && grad_out->dtype != out->dtype) /* a dtype error, not a shape one */
        return nb_set_error(NB_ERR_DTYPE, "%s: gradient dtype %s does not match output dtype %s (shape %s)", op,
                            nb_dtype_name(grad_out->dtype), nb_dtype_name(out->dtype),
                            nb_fmt_shape(out->ndim, out->shape, b, sizeof b));
    if (!same_shape)
        return nb_set_error(NB_ERR_SHAPE, "%s: gradient %s %s does not match output %s %s", op,
                            nb_fmt_shape(grad_out->ndim, grad_out->shape, a, sizeof a), nb_dtype_name(grad_out->dtype),
                            nb_fmt_shape(out->ndim, out->shape, b, sizeof b), nb_dtype_name(out->dtype));
    return NB_OK;
}

/* The implicit seed of a one-element output: ones (scoped). */
static nb_tensor *ones_seed(const char *op, const nb_tensor *out) {
    if (nb_numel(out) != 1) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: output of shape %s is not a scalar; give its gradient (grad can be "
                       "implicitly created only for one-element outputs)", op,
                       nb_fmt_shape(out->ndim, out->shape, a, sizeof a));
    }
    nb_tensor *one = nb_tensor_new(out->ndim, out->shape, out->dtype, out->storage->device);
    return one && nb_fill_(one, 1) == NB_OK ? one : NULL;
}

nb_status nb_backward_ex(nb_tensor *out, nb_tensor *grad_out, const nb_backward_options *opts) {
    nb_backward_options o = opts ? *opts : (nb_backward_options){0};
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "backward: NULL tensor");
    if (!out->requires_grad)
        return nb_set_error(NB_ERR_STATE, "backward: the tensor does not require grad (no input requires grad, "
                                          "or it was computed under no_grad)");
    nb_scope *s = nb_op_scope_begin();
    nb_status st = NB_OK;
    if (!grad_out && !(grad_out = ones_seed("backward", out))) st = nb_last_status();
    if (st == NB_OK) st = check_seed("backward", out, grad_out);
    if (st == NB_OK) {
        bool prev = nb_set_grad_enabled(o.create_graph);
        pass p = {.create_graph = o.create_graph, .retain_graph = o.retain_graph || o.create_graph, .accumulate = true};
        nb_autocast_pause(true); /* each op's backward runs in its forward's dtypes */
        st = run_pass(&p, &out, &grad_out, 1);
        nb_autocast_pause(false);
        end_pass(&p);
        nb_set_grad_enabled(prev);
    }
    nb_scope_end(s);
    return st;
}

nb_status nb_backward_with(nb_tensor *out, nb_tensor *grad_out) {
    if (!out || !grad_out) return nb_set_error(NB_ERR_INVALID_ARG, "backward: NULL tensor");
    return nb_backward_ex(out, grad_out, NULL);
}

nb_status nb_backward(nb_tensor *out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "backward: NULL tensor");
    if (nb_tensor_freed(out, "backward")) return NB_ERR_STATE;
    if (nb_numel(out) != 1) {
        char a[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_SHAPE, "backward: output of shape %s is not a scalar; use nb_backward_with",
                            nb_fmt_shape(out->ndim, out->shape, a, sizeof a));
    }
    return nb_backward_ex(out, NULL, NULL);
}

/* ---- nb_grad ------------------------------------------------------------------ */

static nb_status grad_check_args(nb_tensor *const *outputs, int n_out, nb_tensor *const *inputs, int n_in,
                                 nb_tensor **grads) {
    if (!outputs || !inputs || !grads || n_out < 1 || n_in < 1 || n_out > NB_FUNCTION_MAX_IO * 4)
        return nb_set_error(NB_ERR_INVALID_ARG, "grad: needs 1 to %d outputs, at least one input and a result "
                                                "array (got %d outputs, %d inputs)", NB_FUNCTION_MAX_IO * 4, n_out, n_in);
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "grad: output %d is NULL", i);
        if (!outputs[i]->requires_grad)
            return nb_set_error(NB_ERR_STATE, "grad: output %d does not require grad (no input requires grad, or it "
                                              "was computed under no_grad)", i);
    }
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "grad: input %d is NULL", i);
        if (!inputs[i]->requires_grad)
            return nb_set_error(NB_ERR_STATE, "grad: input %d does not require grad (one of the differentiated "
                                              "tensors does not require grad)", i);
    }
    return NB_OK;
}

nb_status nb_grad(nb_tensor *const *outputs, nb_tensor *const *grad_outputs, int n_outputs, nb_tensor *const *inputs,
                  int n_inputs, nb_tensor **grads, const nb_grad_options *opts) {
    nb_grad_options o = opts ? *opts : (nb_grad_options){0};
    for (int i = 0; grads && i < n_inputs; i++) grads[i] = NULL;
    nb_status st = grad_check_args(outputs, n_outputs, inputs, n_inputs, grads);
    if (st) return st;
    nb_tensor **captured = calloc((size_t)n_inputs, sizeof *captured);
    nb_tensor **seeds = calloc((size_t)n_outputs, sizeof *seeds);
    if (!captured || !seeds) {
        free(captured), free(seeds);
        return nb_set_error(NB_ERR_OOM, "grad: out of host memory");
    }
    nb_scope *s = nb_op_scope_begin();
    for (int i = 0; i < n_outputs && st == NB_OK; i++) {
        seeds[i] = grad_outputs ? grad_outputs[i] : NULL;
        if (!seeds[i] && !(seeds[i] = ones_seed("grad", outputs[i]))) st = nb_last_status();
        else st = check_seed("grad", outputs[i], seeds[i]);
    }
    pass p = {.create_graph = o.create_graph, .retain_graph = o.retain_graph || o.create_graph, .accumulate = false,
              .inputs = inputs, .n_inputs = n_inputs, .captured = captured};
    if (st == NB_OK) {
        bool prev = nb_set_grad_enabled(o.create_graph);
        nb_autocast_pause(true);
        st = run_pass(&p, outputs, seeds, n_outputs);
        nb_autocast_pause(false);
        nb_set_grad_enabled(prev);
    }
    for (int i = 0; i < n_inputs && st == NB_OK; i++) {
        nb_tensor *g = captured[i];
        if (!inputs[i]->grad_fn) {
            leaf_slot *sl = find_slot(&p, inputs[i]);
            g = sl ? sl->result : NULL;
        }
        if (g) {
            nb_retain(g);
            grads[i] = g;
        } else if (o.materialize_grads) {
            nb_tensor *z = nb_zeros_like(inputs[i]);
            if (!z) st = nb_last_status();
            else nb_retain(z), grads[i] = z;
        } else if (!o.allow_unused) {
            /* a freed graph no longer leads to its inputs: say so, not "unused" (PyTorch's message) */
            bool freed = false;
            for (size_t k = 0; k < p.nodes.len && !freed; k++) freed = p.nodes.v[k]->freed;
            char a[NB_SHAPE_BUF];
            st = freed ? nb_set_error(NB_ERR_STATE, "grad: the graph of the outputs was already freed by an earlier "
                                                    "backward or grad; pass retain_graph to the first one to "
                                                    "differentiate it again")
                       : nb_set_error(NB_ERR_STATE, "grad: input %d (%s) was not used in the graph of the outputs; "
                                                    "pass allow_unused (or materialize_grads) if that is intended",
                                      i, nb_fmt_shape(inputs[i]->ndim, inputs[i]->shape, a, sizeof a));
        }
    }
    end_pass(&p);
    for (int i = 0; i < n_inputs; i++) nb_release(captured[i]);
    free(captured), free(seeds);
    nb_scope_end(s);
    for (int i = 0; i < n_inputs; i++) { /* the results belong to the caller's scope */
        if (st != NB_OK) nb_release(grads[i]), grads[i] = NULL;
        else if (grads[i]) nb_scope_adopt(grads[i]);
    }
    return st;
}
