/* fuse.c - elementwise fusion while a CUDA graph is captured with
 * nb_graph_options.fuse (nb_backend_impl.h): the calls of the slots marked
 * fuse in the slot list (copy, fill, unary, unary_backward, binary, where,
 * dropout: its mask as a DROPOUT node drawing the slot's Philox numbers, and
 * out = x * mask as a binary mul) made on the captured stream are recorded instead of run; the next other
 * slot call on that backend, a stream event and the capture's end run them,
 * in order, as fused programs (the pointwise slot). A capture runs nothing,
 * so recording changes no value a host could see; the addresses are
 * stable (the graph's private pool).
 *
 * Grouping, in the calls' order: a call joins the current group when it has
 * the group's shape, fusable dtypes (the float dtypes and bool), and views
 * that either are exactly a group node's output view (read in a register:
 * the latest such node) or touch no group output at all; its output view
 * must be exactly an input view of the group, or touch none (an in-place
 * update reads each element before the same thread writes it). A group of
 * one call runs its own slot. Dead stores: a call whose output block is
 * freed (nb_fuse_note_free) before the group runs, or whose output view a
 * later call of the group writes again, is not stored, unless a recorded
 * call after the group reads it; an output read later (saved for the
 * backward) is stored. The bits are those of the
 * calls run one by one (the pointwise slot's contract). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nb_backend_util.h"
#include "nb_impl.h"

bool nb_fuse_on;

typedef struct call {
    nb_slot_id slot;
    int op;
    double value;
    nb_kview out, in[3];
    int n_in;
    bool dead;           /* its output's block was freed before the call ran */
    nb_philox_state rng; /* NB_SLOT_dropout (its mask alone): the draw's stream */
} call;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nb_backend *fuse_be;
static void *fuse_stream;
static call *pend;
static int n_pend, cap_pend;
static _Thread_local int depth; /* slot calls under way on this thread */

void nb_fuse_enter(void) { depth++; }
void nb_fuse_exit(void) { depth--; }

bool nb_fuse_wants(nb_backend *be) {
    return depth == 0 && be == fuse_be && nb_backend_current_stream(be) == fuse_stream;
}

static nb_status record(nb_backend *be, call c) {
    (void)be;
    pthread_mutex_lock(&lock);
    if (n_pend == cap_pend) {
        int cap = cap_pend ? 2 * cap_pend : 256;
        call *p = realloc(pend, sizeof *p * (size_t)cap);
        if (!p) {
            pthread_mutex_unlock(&lock);
            return nb_set_error(NB_ERR_OOM, "%s: no memory to record the call for fusion", nb_slot_name(c.slot));
        }
        pend = p, cap_pend = cap;
    }
    pend[n_pend++] = c;
    pthread_mutex_unlock(&lock);
    return NB_OK;
}

nb_status nb_fuse_record_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src) {
    return record(be, (call){NB_SLOT_copy, 0, 0, *dst, {*src}, 1, false, {0}});
}
nb_status nb_fuse_record_fill(nb_backend *be, const nb_kview *dst, double value) {
    return record(be, (call){NB_SLOT_fill, 0, value, *dst, {{0}}, 0, false, {0}});
}
nb_status nb_fuse_record_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha) {
    return record(be, (call){NB_SLOT_unary, op, alpha, *out, {*x}, 1, false, {0}});
}
nb_status nb_fuse_record_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                        const nb_kview *x, const nb_kview *y, double alpha) {
    const nb_kview *v = nb_unary_saved_view(op, gy, x, y); /* the one the rule reads (checked: present) */
    call c = {NB_SLOT_unary_backward, op, alpha, *gx, {*gy}, 1, false, {0}};
    if (nb_unary_saved_of(op) != NB_UNARY_SAVED_NONE && v) c.in[1] = *v, c.n_in = 2;
    return record(be, c);
}
nb_status nb_fuse_record_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                                const nb_kview *b) {
    return record(be, (call){NB_SLOT_binary, op, 0, *out, {*a, *b}, 2, false, {0}});
}
nb_status nb_fuse_record_dropout(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x,
                                 double p, nb_philox_state rng) {
    call m = {NB_SLOT_dropout, 0, p, *mask, {{0}}, 0, false, rng};
    nb_status st = record(be, m);
    return st ? st : record(be, (call){NB_SLOT_binary, NB_BINARY_MUL, 0, *out, {*x, *mask}, 2, false, {0}});
}
nb_status nb_fuse_record_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                               const nb_kview *b) {
    return record(be, (call){NB_SLOT_where, 0, 0, *out, {*cond, *a, *b}, 3, false, {0}});
}

void nb_fuse_note_free(void *ptr, size_t bytes) {
    if (!nb_fuse_on) return;
    pthread_mutex_lock(&lock);
    const char *lo = ptr, *hi = lo + bytes;
    for (int i = 0; i < n_pend; i++) {
        const char *p = pend[i].out.data;
        if (p >= lo && p < hi) pend[i].dead = true;
    }
    pthread_mutex_unlock(&lock);
}

/* ---- views ------------------------------------------------------------------------------ */

static bool meet(const nb_kview *x, const nb_kview *y) { return nb_view_ranges_meet(x, y); }
static bool same_view(const nb_kview *a, const nb_kview *b) { return nb_view_same_elements(a, b); }
static bool fusable_dtype(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64 || nb_dtype_is_16bit(dt) || dt == NB_BOOL; }
static bool is_float(nb_dtype dt) { return dt != NB_BOOL && fusable_dtype(dt); }

/* Whether the call can be a node at all (dtypes, ops, no broadcast output, not empty). */
static bool fusable(const call *c) {
    if (nb_view_numel(&c->out) == 0 || !fusable_dtype(c->out.dtype)) return false;
    for (int d = 0; d < c->out.ndim; d++)
        if (c->out.shape[d] > 1 && c->out.strides[d] == 0) return false;
    for (int k = 0; k < c->n_in; k++)
        if (!fusable_dtype(c->in[k].dtype) || !nb_view_same_shape(&c->in[k], &c->out)) return false;
    switch (c->slot) {
    case NB_SLOT_copy:
    case NB_SLOT_fill:
    case NB_SLOT_where: return true;
    case NB_SLOT_unary:
    case NB_SLOT_unary_backward:
    case NB_SLOT_dropout: return is_float(c->out.dtype);
    case NB_SLOT_binary: return nb_pw_binary_takes(c->op, c->in[0].dtype);
    default: return false;
    }
}

/* ---- groups ------------------------------------------------------------------------------ */

typedef struct group {
    nb_pw_node nodes[NB_PW_MAX_NODES];
    int n_nodes;
    nb_kview ins[NB_PW_MAX_VIEWS];
    int in_node[NB_PW_MAX_VIEWS]; /* the INPUT node of ins[k] */
    int n_in;
    const call *calls[NB_PW_MAX_NODES]; /* the calls in the group, in order */
    int call_node[NB_PW_MAX_NODES];     /* the node holding each call's value */
    int n_calls;
    nb_philox_state rng[NB_PW_MAX_RNG]; /* the DROPOUT nodes' streams */
    int n_rng;
} group;

/* The node that reads v in the group: the latest call writing exactly v,
 * an input already read, or a new input (-1: v overlaps a group output in
 * another way, or there is no room). */
static int operand(group *g, const nb_kview *v) {
    for (int i = g->n_calls - 1; i >= 0; i--) {
        const nb_kview *o = &g->calls[i]->out;
        if (same_view(o, v)) return g->call_node[i];
        if (meet(o, v)) return -1;
    }
    for (int k = 0; k < g->n_in; k++)
        if (same_view(&g->ins[k], v)) return g->in_node[k];
    if (g->n_in == NB_PW_MAX_VIEWS || g->n_nodes == NB_PW_MAX_NODES) return -1;
    g->ins[g->n_in] = *v;
    g->nodes[g->n_nodes] = (nb_pw_node){NB_PW_INPUT, 0, v->dtype, g->n_in, -1, -1, 0};
    g->in_node[g->n_in++] = g->n_nodes;
    return g->n_nodes++;
}

/* Adds c to g (true), or leaves g as it was (false). */
static bool try_add(group *g, const call *c) {
    if (g->n_calls && !nb_view_same_shape(&c->out, &g->calls[0]->out)) return false;
    if (g->n_calls == NB_PW_MAX_NODES || g->n_nodes + 4 > NB_PW_MAX_NODES) return false;
    if (c->slot == NB_SLOT_dropout && g->n_rng == NB_PW_MAX_RNG) return false;
    /* the output: exactly an input's view, or touching none (outputs: checked by operand) */
    for (int k = 0; k < g->n_in; k++)
        if (meet(&g->ins[k], &c->out) && !same_view(&g->ins[k], &c->out)) return false;
    for (int i = 0; i < g->n_calls; i++)
        if (meet(&g->calls[i]->out, &c->out) && !same_view(&g->calls[i]->out, &c->out)) return false;
    const int n_nodes = g->n_nodes, n_in = g->n_in; /* to undo the inputs operand() adds */
    int ops[3] = {-1, -1, -1};
    for (int k = 0; k < c->n_in; k++)
        if ((ops[k] = operand(g, &c->in[k])) < 0) {
            g->n_nodes = n_nodes, g->n_in = n_in;
            return false;
        }
    nb_pw_node nd = {0, c->op, c->out.dtype, ops[0], ops[1], ops[2], c->value};
    switch (c->slot) {
    case NB_SLOT_copy: nd.kind = NB_PW_CAST, nd.op = 0; break;
    case NB_SLOT_fill: nd.kind = NB_PW_CONST, nd.op = 0; break;
    case NB_SLOT_unary: nd.kind = NB_PW_UNARY; break;
    case NB_SLOT_unary_backward: nd.kind = NB_PW_UNARY_BACKWARD; break;
    case NB_SLOT_binary: nd.kind = NB_PW_BINARY; break;
    case NB_SLOT_dropout: nd.kind = NB_PW_DROPOUT, nd.a = g->n_rng, g->rng[g->n_rng++] = c->rng; break;
    default: nd.kind = NB_PW_WHERE, nd.op = 0; break;
    }
    g->nodes[g->n_nodes] = nd;
    g->calls[g->n_calls] = c;
    g->call_node[g->n_calls++] = g->n_nodes++;
    return true;
}

static nb_status run_one(nb_backend *be, const call *c) {
    switch (c->slot) {
    case NB_SLOT_copy: return nb_kernel_copy(be, &c->out, &c->in[0]);
    case NB_SLOT_fill: return nb_kernel_fill(be, &c->out, c->value);
    case NB_SLOT_unary: return nb_kernel_unary(be, (nb_unary_op)c->op, &c->out, &c->in[0], c->value);
    case NB_SLOT_unary_backward: {
        const nb_kview *v = c->n_in > 1 ? &c->in[1] : &c->in[0];
        return nb_kernel_unary_backward(be, (nb_unary_op)c->op, &c->out, &c->in[0], v, v, c->value);
    }
    case NB_SLOT_binary: return nb_kernel_binary(be, (nb_binary_op)c->op, &c->out, &c->in[0], &c->in[1]);
    case NB_SLOT_dropout: { /* the mask alone: a program of its one node */
        const nb_pw_node nd = {NB_PW_DROPOUT, 0, c->out.dtype, 0, -1, -1, c->value};
        const int out = 0;
        const nb_pw_program p = {1, &nd, 1, &out, 0, 1, &c->rng};
        return nb_kernel_pointwise(be, 1, &c->out, &p);
    }
    default: return nb_kernel_where(be, &c->out, &c->in[0], &c->in[1], &c->in[2]);
    }
}

/* Runs g: its one call, or the program storing every live output. */
static nb_status run_group(nb_backend *be, group *g) {
    if (g->n_calls == 1) return g->calls[0]->dead ? NB_OK : run_one(be, g->calls[0]); /* dead: nobody reads it */
    nb_kview views[NB_PW_MAX_VIEWS];
    int outputs[NB_PW_MAX_VIEWS], n_out = 0;
    for (int i = 0; i < g->n_calls; i++) {
        const call *c = g->calls[i];
        bool rewritten = false; /* a later call of the group writes the same view */
        for (int j = i + 1; j < g->n_calls && !rewritten; j++) rewritten = same_view(&g->calls[j]->out, &c->out);
        if (c->dead || rewritten) continue;
        if (n_out + g->n_in == NB_PW_MAX_VIEWS) { /* no room: run the calls one by one */
            for (int k = 0; k < g->n_calls; k++) {
                nb_status st = run_one(be, g->calls[k]);
                if (st) return st;
            }
            return NB_OK;
        }
        views[n_out] = c->out, outputs[n_out++] = g->call_node[i];
    }
    if (n_out == 0) return NB_OK; /* every value died unread */
    for (int k = 0; k < g->n_in; k++) views[n_out + k] = g->ins[k];
    nb_pw_program p = {g->n_nodes, g->nodes, n_out, outputs, g->n_in, g->n_rng, g->rng};
    return nb_kernel_pointwise(be, n_out + g->n_in, views, &p);
}

nb_status nb_fuse_flush(nb_backend *be) {
    if (depth || be != fuse_be || nb_backend_current_stream(be) != fuse_stream) return NB_OK;
    pthread_mutex_lock(&lock);
    call *calls = pend;
    int n = n_pend;
    pend = NULL, n_pend = cap_pend = 0;
    pthread_mutex_unlock(&lock);
    if (!n) {
        free(calls);
        return NB_OK;
    }
    nb_status st = NB_OK;
    group *g = malloc(sizeof *g);
    if (!g) st = nb_set_error(NB_ERR_OOM, "graph capture: no memory to fuse the recorded calls");
    depth++; /* the calls below run, not record */
    for (int i = 0; i < n && !st;) {
        g->n_nodes = g->n_in = g->n_calls = g->n_rng = 0;
        if (!fusable(&calls[i])) {
            st = run_one(be, &calls[i++]);
            continue;
        }
        const int first = i;
        while (i < n && fusable(&calls[i]) && try_add(g, &calls[i])) i++;
        /* a freed output that a call after the group reads from memory (a
         * cast to int, another shape, a permuted copy) is stored after all */
        for (int k = first; k < i; k++)
            for (int j = i; j < n && calls[k].dead; j++)
                for (int m = 0; m < calls[j].n_in; m++)
                    if (meet(&calls[j].in[m], &calls[k].out)) calls[k].dead = false;
        st = run_group(be, g);
    }
    depth--;
    free(g);
    free(calls);
    if (st) nb_graph_fail(be); /* the capture fails even if the caller clears the error */
    return st;
}

nb_status nb_fuse_begin(nb_backend *be, void *stream) {
    if (!be->iface->pointwise) return NB_OK; /* nothing to fuse with: the capture runs as it is */
    pthread_mutex_lock(&lock);
    fuse_be = be, fuse_stream = stream;
    n_pend = 0;
    nb_fuse_on = true;
    pthread_mutex_unlock(&lock);
    return NB_OK;
}

nb_status nb_fuse_end(nb_backend *be) {
    if (!nb_fuse_on || be != fuse_be) return NB_OK;
    nb_status st = nb_fuse_flush(be);
    if (!st && n_pend) /* another stream is current: nothing may be dropped silently */
        st = nb_set_error(NB_ERR_STATE, "graph_capture_end: %d recorded elementwise calls need the captured stream "
                          "current (make it current before ending the capture)", n_pend);
    pthread_mutex_lock(&lock);
    nb_fuse_on = false;
    fuse_be = NULL, fuse_stream = NULL;
    free(pend);
    pend = NULL, n_pend = cap_pend = 0;
    pthread_mutex_unlock(&lock);
    return st;
}
