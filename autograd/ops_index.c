/* ops_index.c - indexing and joining ops with PyTorch's semantics:
 * embedding, index_select, cat, stack, split, chunk, where, masked_fill,
 * index_add, index_copy, one_hot, nonzero and masked_select, forward
 * dispatch and backward rules. nonzero and masked_select compact through
 * the backend's nonzero slot (the count is read to the host first). Gathers run on the backend's
 * index_select; their gradients on index_add, which sums rows in index order
 * (deterministic, no atomics). cat writes each input once into its slice of
 * one output; its backward hands out narrow views of the gradient.
 * Kernels: backend/cpu/index.c. Tests: tests/test_ops_index.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"
#include "nb_foreach.h"

/* A contiguous tensor's view flattened to 1-D. */
static nb_kview flat_view(const nb_tensor *t) {
    nb_kview v = nb_kview_of(t);
    v.ndim = 1;
    v.shape[0] = nb_numel(t);
    v.strides[0] = 1;
    return v;
}

/* A contiguous copy of an index tensor: the node keeps it for backward, so
 * a caller refilling its batch buffer in place cannot change the gradient. */
static nb_tensor *index_copy(nb_tensor *t) {
    nb_tensor *c = nb_empty_like(t);
    if (!c) return NULL;
    nb_kview d = nb_kview_of(c), s = nb_kview_of(t);
    return nb_kernel_copy(NB_BE(t), &d, &s) == NB_OK ? c : NULL;
}

/* An int32 or int64 index as a contiguous int64 copy (embedding and
 * index_select take int32 ids, as PyTorch's IntTensor indices). */
static nb_tensor *index_i64(nb_tensor *t) {
    nb_tensor *c = nb_tensor_new(t->ndim, t->shape, NB_I64, t->storage->device);
    if (!c) return NULL;
    nb_kview d = nb_kview_of(c), s = nb_kview_of(t);
    return nb_kernel_copy(NB_BE(t), &d, &s) == NB_OK ? c : NULL;
}

/* gx = zeros of shape like `like`, plus g's slices added at index along dim. */
static nb_tensor *index_add_new(const nb_tensor *like, int dim, nb_tensor *index, nb_tensor *g, nb_kview vg,
                                int64_t skip) {
    nb_tensor *gx = nb_empty_like(like);
    if (!gx) return NULL;
    nb_kview vgx = nb_kview_of(gx), vi = flat_view(index);
    return nb_kernel_index_add(NB_BE(g), &vgx, dim, &vi, &vg, skip, false) == NB_OK ? gx : NULL;
}

/* What the index_add of an embedding's or index_select's input gradient
 * takes: gc (the output's gradient, contiguous) as the slot's g view (an
 * embedding's [..., dim] as [rows, dim]), the dim and the row to skip
 * (padding_idx). One place for the rules and nb_index_grad_into. */
typedef struct index_grad {
    nb_kview g;
    int dim;
    int64_t skip;
} index_grad;

static index_grad index_grad_of(const nb_node *n, const nb_tensor *gc) {
    index_grad r = {nb_kview_of(gc), 0, NB_NO_PADDING_IDX};
    if (n->op == NB_OP_EMBEDDING) {
        int64_t d = n->in[0]->shape[1];
        r.g.ndim = 2, r.g.shape[0] = nb_numel(n->saved[0]), r.g.shape[1] = d, r.g.strides[0] = d, r.g.strides[1] = 1;
        r.skip = n->p.embedding.padding_idx;
    } else {
        r.dim = n->p.axis.dim;
    }
    return r;
}

/* ---- embedding ------------------------------------------------------------------ */

/* The weight gradient's own rule (create_graph): it sums rows of g into
 * rows of the weight, so its gradient is the lookup of gg at the indices,
 * 0 at padding_idx. saved[0]: the flat indices; in[0]: g. */
static nb_status embedding_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    nb_tensor *idx = n->saved[0], *g = n->in[0];
    nb_tensor *r = nb_embedding(idx, gg, NB_NO_PADDING_IDX);
    if (r && n->p.embedding.padding_idx != NB_NO_PADDING_IDX)
        r = nb_masked_fill(r, nb_unsqueeze(nb_eq_scalar(idx, (double)n->p.embedding.padding_idx), 1), 0);
    gin[0] = r ? nb_reshape(r, g->ndim, g->shape) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}

/* saved: flat int64 indices; p.embedding.padding_idx (INT64_MIN: none) */
nb_status nb_bw_embedding(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *idx = n->saved[0], *w = n->in[0];
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    index_grad ig = index_grad_of(n, gc);
    gin[0] = index_add_new(w, ig.dim, idx, gc, ig.g, ig.skip);
    if (!gin[0]) return nb_last_status();
    bool failed;
    nb_node *gn = nb_record_grad(n, embedding_grad_backward, gin[0], 1, &g, &failed);
    if (failed) return nb_last_status();
    if (gn) nb_save(gn, 0, idx);
    return NB_OK;
}

static nb_tensor *embedding_impl(nb_tensor *indices, nb_tensor *weight, int64_t padding_idx) {
    nb_tensor *in[2] = {indices, weight};
    if (!nb_check_inputs("embedding", 2, in) || !nb_check_dtypes(NB_OP_EMBEDDING, 1, &weight)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (weight->ndim != 2 || indices->ndim + 1 > NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_SHAPE, "embedding: weight %s must be [num_embeddings, dim] and indices %s have < %d dims",
                       nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a),
                       nb_fmt_shape(indices->ndim, indices->shape, b, sizeof b), NB_MAX_DIMS);
    if (indices->dtype != NB_I64 && indices->dtype != NB_I32)
        return NB_FAIL(NB_ERR_DTYPE, "embedding: indices must be int64 or int32, got %s", nb_dtype_name(indices->dtype));
    int64_t v = weight->shape[0], d = weight->shape[1];
    if (padding_idx != NB_NO_PADDING_IDX) {
        if (padding_idx < -v || padding_idx >= v)
            return NB_FAIL(NB_ERR_INVALID_ARG, "embedding: padding_idx %lld outside [-%lld, %lld) for weight %s",
                           (long long)padding_idx, (long long)v, (long long)v,
                           nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a));
        if (padding_idx < 0) padding_idx += v;
    }
    nb_tensor *idx = index_i64(indices), *wc = nb_contiguous_nograd(weight);
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)indices->ndim);
    shape[indices->ndim] = d;
    nb_tensor *out = nb_tensor_new(indices->ndim + 1, shape, weight->dtype, weight->storage->device);
    if (!idx || !wc || !out) return NULL;
    int64_t rows = nb_numel(idx);
    nb_kview vo = nb_kview_of(out), vw = nb_kview_of(wc), vi = flat_view(idx);
    vo.ndim = 2, vo.shape[0] = rows, vo.shape[1] = d, vo.strides[0] = d, vo.strides[1] = 1;
    if (nb_kernel_index_select(NB_BE(weight), &vo, &vw, 0, &vi) != NB_OK) {
        char msg[512]; /* the kernel's message, renamed for the user's op */
        const char *e = nb_last_error();
        snprintf(msg, sizeof msg, "%s", strncmp(e, "index_select: ", 14) ? e : e + 14);
        return NB_FAIL(nb_last_status(), "embedding: %s (weight %s, indices %s)", msg,
                       nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a),
                       nb_fmt_shape(indices->ndim, indices->shape, b, sizeof b));
    }
    bool failed;
    nb_node *n = nb_record(NB_OP_EMBEDDING, out, 1, &weight, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.embedding.padding_idx = padding_idx;
        nb_save(n, 0, idx);
    }
    return out;
}

nb_tensor *nb_embedding(nb_tensor *indices, nb_tensor *weight, int64_t padding_idx) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, embedding_impl(indices, weight, padding_idx));
}

/* The accumulating form of nb_bw_embedding's and nb_bw_index_select's
 * gradient: the index_add runs straight into dst, the leaf's .grad. */
nb_status nb_index_grad_into(nb_node *n, nb_tensor *g, nb_tensor *dst) {
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    index_grad ig = index_grad_of(n, gc);
    nb_kview vd = nb_kview_of(dst), vi = flat_view(n->saved[0]);
    return nb_kernel_index_add(NB_BE(dst), &vd, ig.dim, &vi, &ig.g, ig.skip, true);
}

/* ---- index_select ------------------------------------------------------------------ */

/* The input gradient's own rule (create_graph): index_select of gg. */
static nb_status index_select_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = nb_index_select(gg, n->p.axis.dim, n->saved[0]);
    return gin[0] ? NB_OK : nb_last_status();
}

/* saved: flat int64 index; p.axis.dim */
nb_status nb_bw_index_select(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    index_grad ig = index_grad_of(n, gc);
    gin[0] = index_add_new(n->in[0], ig.dim, n->saved[0], gc, ig.g, ig.skip);
    if (!gin[0]) return nb_last_status();
    bool failed;
    nb_node *gn = nb_record_grad(n, index_select_grad_backward, gin[0], 1, &g, &failed);
    if (failed) return nb_last_status();
    if (gn) nb_save(gn, 0, n->saved[0]);
    return NB_OK;
}

static nb_tensor *index_select_impl(nb_tensor *t, int dim, nb_tensor *index) {
    nb_tensor *in[2] = {t, index};
    if (!nb_check_inputs("index_select", 2, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "index_select: dim %d out of range for input %s", dim,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    if ((index->dtype != NB_I64 && index->dtype != NB_I32) || index->ndim > 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "index_select: index must be a 1-D int64 or int32 tensor, got %s %s",
                       nb_fmt_shape(index->ndim, index->shape, b, sizeof b), nb_dtype_name(index->dtype));
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[d] = nb_numel(index);
    nb_tensor *idx = index_i64(index), *tc = nb_contiguous_nograd(t);
    nb_tensor *out = nb_tensor_new(t->ndim, shape, t->dtype, t->storage->device);
    if (!idx || !tc || !out) return NULL;
    nb_kview vo = nb_kview_of(out), vt = nb_kview_of(tc), vi = flat_view(idx);
    if (nb_kernel_index_select(NB_BE(t), &vo, &vt, d, &vi) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_INDEX_SELECT, out, 1, &t, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.axis.dim = d;
        nb_save(n, 0, idx);
    }
    return out;
}

nb_tensor *nb_index_select(nb_tensor *t, int dim, nb_tensor *index) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, index_select_impl(t, dim, index));
}

/* ---- cat / stack ------------------------------------------------------------------------ */

/* p.cat: the dim and each input's size along it */
nb_status nb_bw_cat(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    int d = n->p.cat.dim;
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t len = n->p.cat.sizes[i];
        if (n->in[i] && !(gin[i] = nb_narrow(g, d, off, len))) return nb_last_status();
        off += len;
    }
    return NB_OK;
}

/* Records the nodes of part = cat(ts[0..n)) along d. A node holds at most
 * NB_NODE_MAX_IN inputs, so past 4 inputs the last one is `rest`, a view of
 * part's tail whose own node covers ts[3..n): the data is written once and
 * backward walks the chain. */
static bool record_cat(nb_tensor *part, nb_tensor *const *ts, int n, int d) {
    nb_tensor *in[NB_NODE_MAX_IN];
    int m = n <= NB_NODE_MAX_IN ? n : NB_NODE_MAX_IN - 1;
    for (int i = 0; i < m; i++) in[i] = ts[i];
    if (n > NB_NODE_MAX_IN) {
        int64_t off = 0, shape[NB_MAX_DIMS];
        for (int i = 0; i < m; i++) off += ts[i]->shape[d];
        memcpy(shape, part->shape, sizeof shape);
        shape[d] -= off;
        nb_tensor *rest = nb_tensor_view_of(part, part->ndim, shape, part->strides, part->offset + off * part->strides[d]);
        if (!rest || !record_cat(rest, ts + m, n - m, d)) return false;
        in[m++] = rest;
    }
    bool failed;
    nb_node *node = nb_record(NB_OP_CAT, part, m, in, &failed);
    if (failed) return false;
    if (node) {
        node->p.cat.dim = d;
        for (int i = 0; i < m; i++) node->p.cat.sizes[i] = in[i]->shape[d];
    }
    return true;
}

static nb_tensor *cat_impl(nb_tensor *const *ts, int n, int dim) {
    if (!ts || n < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "cat: needs at least one tensor (got %d)", n);
    if (!nb_check_inputs("cat", n, ts)) return NULL;
    nb_dtype dt = ts[0]->dtype;
    for (int i = 1; i < n; i++) dt = nb_promote_types(dt, ts[i]->dtype);
    for (int i = 0; i < n; i++)
        if (ts[i]->dtype != dt) { /* torch.cat promotes to the inputs' common dtype */
            nb_tensor **cast = malloc(sizeof *cast * (size_t)n);
            if (!cast) return NB_FAIL(NB_ERR_OOM, "cat: out of host memory");
            int k = 0;
            for (; k < n && (cast[k] = ts[k]->dtype == dt ? ts[k] : nb_to_dtype(ts[k], dt)); k++) {}
            nb_tensor *r = k == n ? cat_impl(cast, n, dim) : NULL;
            free(cast);
            return r;
        }
    if (!nb_check_dtypes(NB_OP_CAT, n, ts)) return NULL;
    const nb_tensor *t0 = ts[0];
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, t0->ndim);
    if (d < 0 || t0->ndim == 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "cat: dim %d out of range for input %s", dim,
                       nb_fmt_shape(t0->ndim, t0->shape, a, sizeof a));
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        bool ok = ts[i]->ndim == t0->ndim;
        for (int k = 0; ok && k < t0->ndim; k++) ok = k == d || ts[i]->shape[k] == t0->shape[k];
        if (!ok)
            return NB_FAIL(NB_ERR_SHAPE, "cat: tensor %d has shape %s, tensor 0 has %s; they must match except in dim %d",
                           i, nb_fmt_shape(ts[i]->ndim, ts[i]->shape, a, sizeof a),
                           nb_fmt_shape(t0->ndim, t0->shape, b, sizeof b), d);
        shape[d] += ts[i]->shape[d];
    }
    nb_tensor *out = nb_tensor_new(t0->ndim, shape, t0->dtype, t0->storage->device);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        nb_kview dst = vo, src = nb_kview_of(ts[i]);
        dst.shape[d] = ts[i]->shape[d];
        dst.data = (char *)vo.data + (size_t)(off * vo.strides[d]) * nb_dtype_size(out->dtype);
        if (nb_numel(ts[i]) > 0 && nb_kernel_copy(NB_BE(out), &dst, &src) != NB_OK) return NULL;
        off += ts[i]->shape[d];
    }
    if (nb_needs_grad(n, ts) && !record_cat(out, ts, n, d)) return NULL;
    return out;
}

nb_tensor *nb_cat(nb_tensor *const *ts, int n, int dim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, cat_impl(ts, n, dim));
}

static nb_tensor *stack_impl(nb_tensor *const *ts, int n, int dim) {
    if (!ts || n < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "stack: needs at least one tensor (got %d)", n);
    if (!nb_check_inputs("stack", n, ts)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    const nb_tensor *t0 = ts[0];
    int d = dim < 0 ? dim + t0->ndim + 1 : dim;
    if (d < 0 || d > t0->ndim || t0->ndim == NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_INVALID_ARG, "stack: dim %d out of range for inputs %s", dim,
                       nb_fmt_shape(t0->ndim, t0->shape, a, sizeof a));
    for (int i = 1; i < n; i++)
        if (ts[i]->ndim != t0->ndim || memcmp(ts[i]->shape, t0->shape, sizeof(int64_t) * (size_t)t0->ndim))
            return NB_FAIL(NB_ERR_SHAPE, "stack: tensor %d has shape %s, tensor 0 has %s; all must be equal", i,
                           nb_fmt_shape(ts[i]->ndim, ts[i]->shape, a, sizeof a),
                           nb_fmt_shape(t0->ndim, t0->shape, b, sizeof b));
    nb_tensor **us = malloc(sizeof *us * (size_t)n);
    if (!us) return NB_FAIL(NB_ERR_OOM, "stack: out of host memory");
    nb_tensor *r = NULL;
    int i = 0;
    for (; i < n && (us[i] = nb_unsqueeze(ts[i], d)); i++) {}
    if (i == n) r = cat_impl(us, n, d);
    free(us);
    return r;
}

nb_tensor *nb_stack(nb_tensor *const *ts, int n, int dim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, stack_impl(ts, n, dim));
}

/* ---- split / chunk ------------------------------------------------------------------------ */

/* The first min(count, cap) pieces along dim: split_size each (the last
 * one shorter), or sizes[i] each where sizes is given; squeezed along dim
 * for unbind. Handed to the caller's scope (or the caller) as op results. */
static int split_pieces(const char *op, nb_tensor *t, int d, int64_t split_size, const int64_t *sizes, int64_t count,
                        bool squeeze, nb_tensor **out, int cap) {
    if (count > INT_MAX) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld pieces are too many", op, (long long)count);
        return -1;
    }
    int64_t size = t->shape[d];
    int k = count < cap ? (int)count : cap;
    nb_scope *s = nb_op_scope_begin();
    int64_t start = 0;
    for (int i = 0; i < k; i++) {
        int64_t len = sizes ? sizes[i] : size - start < split_size ? size - start : split_size;
        nb_tensor *p = nb_narrow(t, d, start, len);
        if (p && squeeze) p = nb_squeeze(p, d);
        if (!p) {
            for (int j = 0; j < i; j++) nb_release(out[j]), out[j] = NULL;
            nb_scope_end(s);
            return -1;
        }
        nb_retain(p);
        out[i] = p;
        start += len;
    }
    nb_scope_end(s);
    for (int i = 0; i < k; i++) nb_scope_adopt(out[i]);
    return (int)count;
}

/* Checks shared by split and chunk; returns the wrapped dim or -1. */
static int split_check(const char *op, nb_tensor *t, int dim, nb_tensor **out, int cap) {
    if (!nb_check_inputs(op, 1, &t)) return -1;
    if (cap < 0 || (cap > 0 && !out)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: bad output array (cap %d, out %s)", op, cap, out ? "set" : "NULL");
        return -1;
    }
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) {
        char a[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for input %s", op, dim,
                     nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
        return -1;
    }
    return d;
}

int nb_split(nb_tensor *t, int64_t split_size, int dim, nb_tensor **out, int cap) {
    int d = split_check("split", t, dim, out, cap);
    if (d < 0) return -1;
    int64_t size = t->shape[d];
    if (split_size < 0 || (split_size == 0 && size > 0)) {
        char a[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_INVALID_ARG, "split: split_size %lld must be positive (0 only for an empty dim); input %s",
                     (long long)split_size, nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
        return -1;
    }
    int64_t count = size == 0 ? 1 : (size + split_size - 1) / split_size;
    return split_pieces("split", t, d, split_size, NULL, count, false, out, cap);
}

int nb_chunk(nb_tensor *t, int chunks, int dim, nb_tensor **out, int cap) {
    int d = split_check("chunk", t, dim, out, cap);
    if (d < 0) return -1;
    if (chunks <= 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "chunk: chunks %d must be positive", chunks);
        return -1;
    }
    int64_t size = t->shape[d];
    int64_t split_size = (size + chunks - 1) / chunks;
    /* as PyTorch: an empty dim gives `chunks` empty pieces */
    int64_t count = size == 0 ? chunks : (size + split_size - 1) / split_size;
    return split_pieces("chunk", t, d, split_size, NULL, count, false, out, cap);
}

int nb_split_with_sizes(nb_tensor *t, const int64_t *sizes, int n, int dim, nb_tensor **out, int cap) {
    int d = split_check("split_with_sizes", t, dim, out, cap);
    if (d < 0) return -1;
    if (n < 1 || !sizes) {
        nb_set_error(NB_ERR_INVALID_ARG, "split_with_sizes: %d sizes (%s); need at least one", n, sizes ? "set" : "NULL");
        return -1;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > t->shape[d] - total) { /* not total + sizes[i]: it may overflow */
            nb_set_error(NB_ERR_INVALID_ARG, "split_with_sizes: size %lld at %d is negative or passes dim %d's size %lld",
                         (long long)sizes[i], i, d, (long long)t->shape[d]);
            return -1;
        }
        total += sizes[i];
    }
    if (total != t->shape[d]) {
        nb_set_error(NB_ERR_INVALID_ARG, "split_with_sizes: the sizes sum to %lld, not dim %d's size %lld",
                     (long long)total, d, (long long)t->shape[d]);
        return -1;
    }
    return split_pieces("split_with_sizes", t, d, 0, sizes, n, false, out, cap);
}

int nb_unbind(nb_tensor *t, int dim, nb_tensor **out, int cap) {
    int d = split_check("unbind", t, dim, out, cap);
    if (d < 0) return -1;
    return split_pieces("unbind", t, d, 1, NULL, t->shape[d], true, out, cap);
}

/* ---- where / masked_fill ------------------------------------------------------------------ */

/* g where cond (keep_true) or where !cond, zeros elsewhere. */
static nb_tensor *masked_grad(nb_tensor *g, nb_tensor *cond, bool keep_true) {
    nb_tensor *zero = nb_scalar_like(g, 0, g->dtype);
    if (zero && nb_needs_grad(1, &g)) /* create_graph: a recorded where */
        return keep_true ? nb_where(cond, g, zero) : nb_where(cond, zero, g);
    nb_tensor *r = nb_empty_like(g);
    if (!r || !zero) return NULL;
    nb_kview vr = nb_kview_of(r), vg = nb_kview_of(g), vc = nb_kview_expand(cond, g->ndim, g->shape),
             vz = nb_kview_expand(zero, g->ndim, g->shape);
    nb_status st = keep_true ? nb_kernel_where(NB_BE(g), &vr, &vc, &vg, &vz) : nb_kernel_where(NB_BE(g), &vr, &vc, &vz, &vg);
    return st == NB_OK ? r : NULL;
}

/* saved: cond */
nb_status nb_bw_where(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *cond = n->saved[0];
    for (int i = 0; i < 2; i++)
        if (n->in[i] && !(gin[i] = nb_sum_to_shape(masked_grad(g, cond, i == 0), n->in[i]->ndim, n->in[i]->shape)))
            return nb_last_status();
    return NB_OK;
}

static nb_tensor *where_impl(nb_tensor *cond, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[3] = {cond, a, b};
    if (!nb_check_inputs("where", 3, in)) return NULL;
    if (a->dtype != b->dtype) { /* torch.where promotes a and b (torch.result_type) */
        if (!nb_promote_inputs(2, in + 1, nb_result_type(a, b))) return NULL;
        a = in[1], b = in[2];
    }
    if (!nb_check_dtypes(NB_OP_WHERE, 2, in + 1)) return NULL;
    if (cond->dtype != NB_BOOL)
        return NB_FAIL(NB_ERR_DTYPE, "where: condition must be bool, got %s", nb_dtype_name(cond->dtype));
    int nd1, nd;
    int64_t s1[NB_MAX_DIMS], shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(cond->ndim, cond->shape, a->ndim, a->shape, &nd1, s1) ||
        !nb_broadcast_shapes(nd1, s1, b->ndim, b->shape, &nd, shape)) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF], z[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "where: condition %s, a %s and b %s do not broadcast",
                       nb_fmt_shape(cond->ndim, cond->shape, x, sizeof x), nb_fmt_shape(a->ndim, a->shape, y, sizeof y),
                       nb_fmt_shape(b->ndim, b->shape, z, sizeof z));
    }
    nb_tensor *out = nb_tensor_new(nd, shape, a->dtype, a->storage->device);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vc = nb_kview_expand(cond, nd, shape), va = nb_kview_expand(a, nd, shape),
             vb = nb_kview_expand(b, nd, shape);
    if (nb_kernel_where(NB_BE(a), &vo, &vc, &va, &vb) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_WHERE, out, 2, in + 1, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, cond);
    return out;
}

nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, where_impl(cond, a, b));
}

static nb_tensor *masked_fill_impl(nb_tensor *t, nb_tensor *mask, double value) {
    nb_tensor *in[2] = {t, mask};
    if (!nb_check_inputs("masked_fill", 2, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (mask->dtype != NB_BOOL)
        return NB_FAIL(NB_ERR_DTYPE, "masked_fill: mask must be bool, got %s", nb_dtype_name(mask->dtype));
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(t->ndim, t->shape, mask->ndim, mask->shape, &nd, shape) || nd != t->ndim ||
        memcmp(shape, t->shape, sizeof(int64_t) * (size_t)nd))
        return NB_FAIL(NB_ERR_SHAPE, "masked_fill: mask %s does not broadcast to input %s",
                       nb_fmt_shape(mask->ndim, mask->shape, a, sizeof a), nb_fmt_shape(t->ndim, t->shape, b, sizeof b));
    nb_tensor *v = nb_scalar_like(t, value, t->dtype);
    return v ? where_impl(mask, v, t) : NULL;
}

nb_tensor *nb_masked_fill(nb_tensor *t, nb_tensor *mask, double value) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, masked_fill_impl(t, mask, value));
}

/* ---- index_add / index_copy ------------------------------------------------------------------- */

/* Checks shared by index_add and index_copy; returns the wrapped dim or -1. */
static int index_put_check(nb_op_id id, nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source) {
    const char *op = nb_op_name(id);
    nb_tensor *in[3] = {input, index, source}, *ds[2] = {input, source};
    if (!nb_check_inputs(op, 3, in) || !nb_check_dtypes(id, 2, ds)) return -1;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, input->ndim);
    if (d < 0 || input->ndim == 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for input %s", op, dim,
                     nb_fmt_shape(input->ndim, input->shape, a, sizeof a));
        return -1;
    }
    if (index->dtype != NB_I64 || index->ndim > 1) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: index must be a 1-D int64 tensor, got %s %s", op,
                     nb_fmt_shape(index->ndim, index->shape, a, sizeof a), nb_dtype_name(index->dtype));
        return -1;
    }
    bool ok = source->ndim == input->ndim && source->shape[d] == nb_numel(index);
    for (int k = 0; ok && k < input->ndim; k++) ok = k == d || source->shape[k] == input->shape[k];
    if (!ok) {
        nb_set_error(NB_ERR_SHAPE, "%s: source %s does not fit input %s with index %s along dim %d", op,
                     nb_fmt_shape(source->ndim, source->shape, a, sizeof a),
                     nb_fmt_shape(input->ndim, input->shape, b, sizeof b),
                     nb_fmt_shape(index->ndim, index->shape, c, sizeof c), d);
        return -1;
    }
    return d;
}

/* saved[0]: flat index; p.index_add: dim, alpha (index_add) */
static nb_status index_put_backward(nb_node *n, nb_tensor *g, nb_tensor **gin, bool copy) {
    nb_tensor *idx = n->saved[0];
    int d = n->p.index_add.dim;
    if (n->in[1]) {
        nb_tensor *gs = nb_index_select(g, d, idx);
        gin[1] = copy || n->p.index_add.alpha == 1 ? gs : nb_mul_scalar(gs, n->p.index_add.alpha);
        if (!gin[1]) return nb_last_status();
    }
    if (n->in[0] && !copy) gin[0] = (nb_retain(g), nb_scope_adopt(g));
    if (n->in[0] && copy) { /* g with the overwritten slices zeroed */
        int64_t zs[NB_MAX_DIMS];
        memcpy(zs, g->shape, sizeof zs);
        zs[d] = nb_numel(idx);
        nb_tensor *gx = nb_empty_like(g), *z = nb_tensor_new(g->ndim, zs, g->dtype, g->storage->device);
        if (!gx || !z) return nb_last_status();
        if (nb_needs_grad(1, &g)) /* create_graph: a recorded index_copy of zeros */
            return (gin[0] = nb_index_copy(g, d, idx, nb_zeros_like(z))) ? NB_OK : nb_last_status();
        nb_kview vx = nb_kview_of(gx), vg = nb_kview_of(g), vz = nb_kview_of(z), vi = flat_view(idx);
        nb_status st = nb_kernel_copy(NB_BE(g), &vx, &vg);
        if (st == NB_OK) st = nb_kernel_fill(NB_BE(g), &vz, 0.0);
        if (st == NB_OK) st = nb_kernel_index_copy(NB_BE(g), &vx, d, &vi, &vz);
        if (st != NB_OK) return st;
        gin[0] = gx;
    }
    return NB_OK;
}

nb_status nb_bw_index_add(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    return index_put_backward(n, g, gin, false);
}

nb_status nb_bw_index_copy(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    return index_put_backward(n, g, gin, true);
}

static nb_tensor *index_put_record(nb_op_id id, nb_tensor *out, nb_tensor *input,
                                   nb_tensor *source, nb_tensor *idx, int d, double alpha) {
    nb_tensor *in[2] = {input, source};
    bool failed;
    nb_node *n = nb_record(id, out, 2, in, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.index_add.dim = d;
        n->p.index_add.alpha = alpha;
        nb_save(n, 0, idx);
    }
    return out;
}

/* out = input + alpha * (zeros with source's slices added at index). */
static nb_tensor *index_add_impl(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source, double alpha) {
    int d = index_put_check(NB_OP_INDEX_ADD, input, dim, index, source);
    if (d < 0) return NULL;
    if (input->dtype == NB_BOOL || !nb_dtype_is_compute(input->dtype) || source->dtype != input->dtype)
        return NB_FAIL(NB_ERR_DTYPE, "index_add: needs float32, float64 or integer input and source of one dtype, got %s and %s",
                       nb_dtype_name(input->dtype), nb_dtype_name(source->dtype));
    nb_tensor *idx = index_copy(index), *src = nb_contiguous_nograd(source);
    nb_tensor *out = nb_empty_like(input);
    if (!idx || !src || !out) return NULL;
    nb_tensor *sc = index_add_new(input, d, idx, src, nb_kview_of(src), NB_NO_PADDING_IDX);
    if (!sc) return NULL;
    nb_kview vs = nb_kview_of(sc), vi = nb_kview_of(input), vo = nb_kview_of(out);
    if (alpha != 1 && nb_kernel_unary(NB_BE(input), NB_UNARY_MUL_SCALAR, &vs, &vs, alpha) != NB_OK) return NULL;
    if (nb_kernel_binary(NB_BE(input), NB_BINARY_ADD, &vo, &vi, &vs) != NB_OK) return NULL;
    return index_put_record(NB_OP_INDEX_ADD, out, input, source, idx, d, alpha);
}

nb_tensor *nb_index_add(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source, double alpha) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, index_add_impl(input, dim, index, source, alpha));
}

static nb_tensor *index_copy_op_impl(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source) {
    int d = index_put_check(NB_OP_INDEX_COPY, input, dim, index, source);
    if (d < 0) return NULL;
    nb_tensor *idx = index_copy(index), *src = nb_contiguous_nograd(source), *out = nb_empty_like(input);
    if (!idx || !src || !out) return NULL;
    nb_kview vo = nb_kview_of(out), vin = nb_kview_of(input), vs = nb_kview_of(src), vi = flat_view(idx);
    if (nb_kernel_copy(NB_BE(input), &vo, &vin) != NB_OK || nb_kernel_index_copy(NB_BE(input), &vo, d, &vi, &vs) != NB_OK)
        return NULL;
    return index_put_record(NB_OP_INDEX_COPY, out, input, source, idx, d, 1);
}

nb_tensor *nb_index_copy(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, index_copy_op_impl(input, dim, index, source));
}

nb_status nb_index_copy_(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source) {
    nb_scope *s = nb_op_scope_begin();
    if (nb_op_take_fresh()) nb_clear_error();
    int d = index_put_check(NB_OP_INDEX_COPY, input, dim, index, source);
    nb_status st = d < 0 ? nb_last_status() : NB_OK;
    if (!st && nb_is_grad_enabled() && (input->requires_grad || source->requires_grad))
        st = nb_set_error(NB_ERR_STATE, "index_copy_: input and source may not require grad while grad mode is on "
                          "(nb_index_copy records a tape)");
    if (!st && !nb_is_contiguous(input)) st = nb_set_error(NB_ERR_INVALID_ARG, "index_copy_: input must be contiguous");
    nb_tensor *idx = st ? NULL : nb_contiguous_nograd(index), *src = st ? NULL : nb_contiguous_nograd(source);
    if (!st && (!idx || !src)) st = nb_last_status();
    if (!st) {
        nb_kview vo = nb_kview_of(input), vs = nb_kview_of(src), vi = flat_view(idx);
        nb_bump_version(input);
        st = nb_kernel_index_copy(NB_BE(input), &vo, d, &vi, &vs);
    }
    nb_scope_end(s);
    return st;
}

/* ---- one_hot / nonzero / masked_select --------------------------------------------------------- */

static nb_tensor *one_hot_impl(nb_tensor *t, int64_t num_classes) {
    if (!nb_check_inputs("one_hot", 1, &t)) return NULL;
    char a[NB_SHAPE_BUF];
    if (t->dtype != NB_I64)
        return NB_FAIL(NB_ERR_DTYPE, "one_hot: input must be int64 class indices, got %s", nb_dtype_name(t->dtype));
    if (t->ndim == NB_MAX_DIMS || num_classes < -1 || (num_classes == -1 && nb_numel(t) == 0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "one_hot: num_classes %lld invalid for input %s (-1 needs a non-empty "
                       "input)", (long long)num_classes, nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    if (nb_numel(t) > 0) { /* the range is read to the host, as PyTorch does */
        nb_tensor *f = nb_to_dtype(t, NB_F64); /* exact for class counts below 2^53 */
        nb_tensor *lo_t = nb_max(nb_neg(f), NULL, 0, false), *hi_t = nb_max(f, NULL, 0, false);
        if (!lo_t || !hi_t) return NULL;
        double lo = -nb_item(lo_t), hi = nb_item(hi_t);
        if (lo < 0 || (num_classes >= 0 && hi >= (double)num_classes))
            return NB_FAIL(NB_ERR_INVALID_ARG, "one_hot: class values in [%.0f, %.0f] of input %s are outside [0, %lld)",
                           lo, hi, nb_fmt_shape(t->ndim, t->shape, a, sizeof a), (long long)num_classes);
        if (num_classes < 0) num_classes = (int64_t)hi + 1;
    }
    nb_tensor *classes = nb_arange_on(0, (double)num_classes, 1, NB_I64, t->storage->device);
    return nb_to_dtype(nb_eq(nb_unsqueeze(t, -1), classes), NB_I64);
}

nb_tensor *nb_one_hot(nb_tensor *t, int64_t num_classes) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, one_hot_impl(t, num_classes));
}

/* The nonzero positions of view x: [n, x.ndim] coordinates or [n] flat. */
static nb_tensor *nonzero_of(const nb_tensor *like, const nb_kview *x, bool flat) {
    int64_t count = 0;
    if (nb_kernel_nonzero(NB_BE(like), NULL, &count, x) != NB_OK) return NULL;
    int64_t shape[2] = {count, x->ndim};
    nb_tensor *out = nb_tensor_new(flat ? 1 : 2, shape, NB_I64, like->storage->device);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out);
    return nb_kernel_nonzero(NB_BE(like), &vo, &count, x) == NB_OK ? out : NULL;
}

nb_tensor *nb_nonzero(nb_tensor *t) {
    if (!nb_check_inputs("nonzero", 1, &t)) return NULL;
    nb_kview v = nb_kview_of(t);
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nonzero_of(t, &v, false));
}

/* index_select of the broadcast, flattened input at the mask's flat
 * positions: the gradient scatters back through index_select's rule. */
static nb_tensor *masked_select_impl(nb_tensor *t, nb_tensor *mask) {
    nb_tensor *in[2] = {t, mask};
    if (!nb_check_inputs("masked_select", 2, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (mask->dtype != NB_BOOL)
        return NB_FAIL(NB_ERR_DTYPE, "masked_select: mask must be bool, got %s", nb_dtype_name(mask->dtype));
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(t->ndim, t->shape, mask->ndim, mask->shape, &nd, shape))
        return NB_FAIL(NB_ERR_SHAPE, "masked_select: mask %s and input %s do not broadcast",
                       nb_fmt_shape(mask->ndim, mask->shape, a, sizeof a), nb_fmt_shape(t->ndim, t->shape, b, sizeof b));
    nb_kview vm = nb_kview_expand(mask, nd, shape);
    nb_tensor *idx = nonzero_of(mask, &vm, true);
    nb_tensor *flat = nb_reshape(nb_expand(t, nd, shape), 1, (int64_t[]){-1});
    return idx && flat ? index_select_impl(flat, 0, idx) : NULL;
}

nb_tensor *nb_masked_select(nb_tensor *t, nb_tensor *mask) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, masked_select_impl(t, mask));
}
