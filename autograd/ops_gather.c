/* ops_gather.c - gather, scatter (tensor or scalar source), scatter_add,
 * scatter_reduce and take_along_dim with PyTorch's semantics, on the
 * backend's gather and scatter slots. Backward rules follow PyTorch's
 * derivatives.yaml / FunctionsManual.cpp (scatter_reduce_backward) and are
 * written with these same ops, so they are deterministic (the scatter kernel
 * sums in index order, no atomics) and differentiable again: gather ->
 * scatter_add of g; scatter -> g with the scattered positions zeroed and
 * gather(g); sum/mean/amax/amin/prod as PyTorch (ties of amax/amin share the
 * gradient evenly). Kernels: backend/cpu/gather.c. Tests:
 * tests/test_ops_gather.c. */
#include <stdio.h>
#include <string.h>

#include "nb_autograd_impl.h"

enum { R_NONE = NB_SCATTER_ASSIGN, R_SUM = NB_SCATTER_SUM, R_PROD = NB_SCATTER_PROD, R_MEAN = NB_SCATTER_MEAN,
       R_AMAX = NB_SCATTER_AMAX, R_AMIN = NB_SCATTER_AMIN, R_COUNT = NB_SCATTER_MODE_COUNT };
static const char *const red_names[R_COUNT] = {"none", "sum", "prod", "mean", "amax", "amin"};

/* A contiguous copy of the index: the node keeps it, so later writes to the
 * caller's buffer cannot change the gradient. */
static nb_tensor *index_copy(nb_tensor *t) {
    nb_tensor *c = nb_empty_like(t);
    if (!c) return NULL;
    nb_kview d = nb_kview_of(c), s = nb_kview_of(t);
    return nb_kernel_copy(NB_BE(t), &d, &s) == NB_OK ? c : NULL;
}

/* Replaces the kernel's "gather: " / "scatter: " prefix by the user's op. */
static void rename_error(const char *op, const char *kernel) {
    char msg[512];
    const char *e = nb_last_error();
    size_t k = strlen(kernel);
    if (strncmp(e, kernel, k) || strncmp(e + k, ": ", 2)) return;
    snprintf(msg, sizeof msg, "%s", e + k + 2);
    nb_set_error(nb_last_status(), "%s: %s", op, msg);
}

/* PyTorch's rules: index int64 (or int32, as PyTorch 2.x takes it: made
 * an int64 copy in *index, scoped) with self's ndim (>= 1), index.size(d)
 * <= self.size(d) for d != dim and index.size(d) <= src.size(d) for all d. */
static bool check_index(const char *op, nb_tensor *self, int d, nb_tensor **pindex, nb_tensor *src) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF] = "-";
    if ((*pindex)->dtype != NB_I64 && (*pindex)->dtype != NB_I32) {
        nb_set_error(NB_ERR_DTYPE, "%s: index must be int64 or int32, got %s", op, nb_dtype_name((*pindex)->dtype));
        return false;
    }
    if ((*pindex)->dtype == NB_I32 && !(*pindex = nb_to_dtype(*pindex, NB_I64))) return false;
    nb_tensor *index = *pindex;
    bool ok = self->ndim > 0 && index->ndim == self->ndim && (!src || src->ndim == self->ndim);
    for (int i = 0; ok && i < self->ndim; i++)
        ok = (i == d || index->shape[i] <= self->shape[i]) && (!src || index->shape[i] <= src->shape[i]);
    if (!ok) {
        if (src) nb_fmt_shape(src->ndim, src->shape, c, sizeof c);
        nb_set_error(NB_ERR_SHAPE,
                     "%s: index %s must have input %s's number of dims (>= 1) and be no larger than it outside "
                     "dim %d, and no larger than src %s",
                     op, nb_fmt_shape(index->ndim, index->shape, a, sizeof a),
                     nb_fmt_shape(self->ndim, self->shape, b, sizeof b), d, c);
    }
    return ok;
}

static int wrap(const char *op, const nb_tensor *t, int dim) {
    char a[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0)
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for input %s", op, dim,
                     nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    return d;
}

/* ---- gather ---------------------------------------------------------------------- */

/* saved[0]: index; p.axis.dim: dim */
nb_status nb_bw_gather(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_scatter_add(nb_zeros_like(n->in[0]), n->p.axis.dim, n->saved[0], g);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *gather_impl(nb_op_id id, nb_tensor *t, int dim, nb_tensor *index) {
    const char *op = nb_op_name(id);
    nb_tensor *in[2] = {t, index};
    if (!nb_check_inputs(op, 2, in)) return NULL;
    int d = wrap(op, t, dim);
    if (d < 0 || !check_index(op, t, d, &index, NULL)) return NULL;
    nb_tensor *out = nb_tensor_new(index->ndim, index->shape, t->dtype, t->storage->device);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vt = nb_kview_of(t), vi = nb_kview_of(index);
    if (nb_kernel_gather(NB_BE(t), &vo, &vt, d, &vi) != NB_OK) {
        rename_error(op, "gather");
        return NULL;
    }
    bool failed;
    nb_node *n = nb_record(id, out, 1, &t, &failed);
    if (failed) return NULL;
    if (n) {
        nb_tensor *idx = index_copy(index);
        if (!idx) return NULL;
        n->p.axis.dim = d;
        nb_save(n, 0, idx);
    }
    return out;
}

nb_tensor *nb_gather(nb_tensor *t, int dim, nb_tensor *index) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, gather_impl(NB_OP_GATHER, t, dim, index));
}

/* ---- scatter family ------------------------------------------------------------------ */

/* (a == b) as a 0/1 tensor of a's dtype. */
static nb_tensor *eq_mask(nb_tensor *a, nb_tensor *b) { return nb_to_dtype(nb_eq(a, b), a->dtype); }

/* PyTorch's mean rule: N = sources per destination (+1 with self), 0 -> 1;
 * grad_self = g / N, grad_src = gather(g / N). */
static void mean_backward(nb_tensor *g, int d, nb_tensor *idx, bool incl, nb_tensor **gself, nb_tensor **gsrc) {
    nb_tensor *ones = nb_to_dtype(nb_ones_like(idx), g->dtype);
    nb_tensor *cnt = nb_scatter_add(incl ? nb_ones_like(g) : nb_zeros_like(g), d, idx, ones);
    nb_tensor *zero = cnt ? nb_scalar_like(cnt, 0, cnt->dtype) : NULL;
    nb_tensor *nn = zero ? nb_masked_fill(cnt, nb_eq(cnt, zero), 1) : NULL;
    *gself = nb_div(g, nn);
    *gsrc = nb_gather(*gself, d, idx);
}

/* amax/amin: the gradient is shared evenly by self and the sources equal to
 * the result (self only where included). */
static void minmax_backward(nb_tensor *g, int d, nb_tensor *idx, bool incl, nb_tensor *self, nb_tensor *src,
                            nb_tensor *out, nb_tensor **gself, nb_tensor **gsrc) {
    nb_tensor *self_is = eq_mask(self, out);
    if (!incl) self_is = nb_scatter_value(self_is, d, idx, 0);
    nb_tensor *src_is = eq_mask(src, nb_gather(out, d, idx));
    nb_tensor *share = nb_div(g, nb_scatter_add(self_is, d, idx, src_is));
    *gself = nb_mul(self_is, share);
    *gsrc = nb_mul(src_is, nb_gather(share, d, idx));
}

/* prod (PyTorch's rule): grad_self = g * prod(others), with self's zeros
 * masked to 1; grad_src = g * result / src, except that a source that is
 * the only zero of its destination gets g * (the product without it). */
static void prod_backward(nb_tensor *g, int d, nb_tensor *idx, bool incl, nb_tensor *self, nb_tensor *src,
                          nb_tensor *out, nb_tensor **gself, nb_tensor **gsrc) {
    nb_tensor *zero = nb_scalar_like(self, 0, self->dtype), *one = nb_scalar_like(self, 1, self->dtype);
    nb_tensor *mself = nb_masked_fill(self, nb_eq(self, zero), 1);
    *gself = nb_div(nb_mul(g, nb_scatter_reduce(mself, d, idx, src, "prod", incl)), mself);
    nb_tensor *src_zero = nb_eq(src, zero);
    nb_tensor *zeros_per = nb_gather(nb_scatter_add(nb_zeros_like(self), d, idx, nb_to_dtype(src_zero, self->dtype)), d, idx);
    nb_tensor *single = nb_eq(nb_mul(nb_to_dtype(src_zero, self->dtype), zeros_per), one);
    nb_tensor *without = nb_scatter_reduce(self, d, idx, nb_masked_fill(src, single, 1), "prod", incl);
    nb_tensor *a = nb_gather(nb_mul(g, without), d, idx);
    nb_tensor *b = nb_div(nb_gather(nb_mul(g, out), d, idx), nb_masked_fill(src, src_zero, 1));
    *gsrc = nb_where(single, a, b);
}

/* saved: index, self, src, out; p.scatter: dim, mode, include_self */
nb_status nb_bw_scatter(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    int d = n->p.scatter.dim, mode = (int)n->p.scatter.mode;
    bool incl = n->p.scatter.include_self;
    nb_tensor *idx = n->saved[0], *gself = g, *gsrc = NULL;
    if (mode == R_MEAN) mean_backward(g, d, idx, incl, &gself, &gsrc);
    else if (mode == R_AMAX || mode == R_AMIN)
        minmax_backward(g, d, idx, incl, n->saved[1], n->saved[2], n->saved[3], &gself, &gsrc);
    else if (mode == R_PROD) prod_backward(g, d, idx, incl, n->saved[1], n->saved[2], n->saved[3], &gself, &gsrc);
    else gsrc = n->n_in > 1 && n->in[1] ? nb_gather(g, d, idx) : NULL;
    if (!incl) gself = nb_scatter_value(gself, d, idx, 0);
    if (n->in[0] && !(gin[0] = gself)) return nb_last_status();
    if (n->n_in > 1 && n->in[1] && !(gin[1] = gsrc)) return nb_last_status();
    return NB_OK;
}

/* out = self with src (or the scalar value, src NULL) scattered along dim by
 * index under reduce mode `mode`. */
static nb_tensor *scatter_impl(nb_op_id id, nb_tensor *self, int dim, nb_tensor *index, nb_tensor *src,
                               double value, int mode, bool incl) {
    const char *op = nb_op_name(id);
    nb_tensor *in[3] = {self, index, src};
    if (!nb_check_inputs(op, src ? 3 : 2, in)) return NULL;
    nb_tensor *ts[2] = {self, src};
    if (src && !nb_check_dtypes(id, 2, ts)) return NULL;
    int d = wrap(op, self, dim);
    if (d < 0 || !check_index(op, self, d, &index, src)) return NULL;
    if (mode != R_NONE && self->dtype == NB_BOOL)
        return NB_FAIL(NB_ERR_DTYPE, "%s: reduce '%s' does not take bool", op, red_names[mode]);
    if (mode == R_NONE) incl = false; /* the scattered positions forget self */
    for (int i = 0; src && i < src->ndim; i++) /* only src's leading index-shaped block is read */
        if (src->shape[i] > index->shape[i] && !(src = nb_narrow(src, i, 0, index->shape[i]))) return NULL;
    ts[1] = src;
    nb_tensor *out = nb_empty_like(self), *sv = src ? src : nb_scalar_like(self, value, self->dtype);
    if (!out || !sv) return NULL;
    nb_kview vo = nb_kview_of(out), vself = nb_kview_of(self), vi = nb_kview_of(index);
    nb_kview vs = src ? nb_kview_of(src) : nb_kview_expand(sv, index->ndim, index->shape);
    if (nb_kernel_copy(NB_BE(self), &vo, &vself) != NB_OK) return NULL;
    if (nb_kernel_scatter(NB_BE(self), &vo, d, &vi, &vs, (nb_scatter_mode)mode, incl) != NB_OK) {
        rename_error(op, "scatter");
        return NULL;
    }
    bool failed;
    nb_node *n = nb_record(id, out, src ? 2 : 1, ts, &failed);
    if (failed) return NULL;
    if (n) {
        nb_tensor *idx = index_copy(index);
        if (!idx) return NULL;
        n->p.scatter.dim = d, n->p.scatter.mode = (nb_scatter_mode)mode, n->p.scatter.include_self = incl;
        nb_save(n, 0, idx);
        if (mode == R_PROD || mode == R_AMAX || mode == R_AMIN) {
            nb_save(n, 1, self);
            nb_save(n, 2, src);
            nb_save(n, 3, out);
        }
    }
    return out;
}

nb_tensor *nb_scatter(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src) {
    nb_scope *s = nb_op_scope_begin();
    if (!src && nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "scatter: src is NULL");
    return nb_scope_return(s, src ? scatter_impl(NB_OP_SCATTER, t, dim, index, src, 0, R_NONE, false) : NULL);
}

nb_tensor *nb_scatter_value(nb_tensor *t, int dim, nb_tensor *index, double value) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, scatter_impl(NB_OP_SCATTER_VALUE, t, dim, index, NULL, value, R_NONE, false));
}

nb_tensor *nb_scatter_add(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src) {
    nb_scope *s = nb_op_scope_begin();
    if (!src && nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "scatter_add: src is NULL");
    return nb_scope_return(s, src ? scatter_impl(NB_OP_SCATTER_ADD, t, dim, index, src, 0, R_SUM, true) : NULL);
}

nb_tensor *nb_scatter_reduce(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src, const char *reduce,
                             bool include_self) {
    nb_scope *s = nb_op_scope_begin();
    int mode = -1;
    for (int m = R_SUM; reduce && m < R_COUNT; m++)
        if (!strcmp(reduce, red_names[m])) mode = m;
    if (mode < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "scatter_reduce: reduce must be sum, prod, mean, amax or amin; got '%s'",
                     reduce ? reduce : "(null)");
        return nb_scope_return(s, NULL);
    }
    if (!src && nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "scatter_reduce: src is NULL");
    return nb_scope_return(s, src ? scatter_impl(NB_OP_SCATTER_REDUCE, t, dim, index, src, 0, mode, include_self) : NULL);
}

/* ---- take_along_dim ----------------------------------------------------------------- */

/* dim NB_DIM_NONE: gather from the flattened input at the flattened indices.
 * Otherwise input and indices broadcast in every dim but dim, then gather. */
static nb_tensor *take_along_dim_impl(nb_tensor *t, nb_tensor *indices, int dim) {
    const char *op = "take_along_dim";
    nb_op_id id = NB_OP_TAKE_ALONG_DIM;
    nb_tensor *in[2] = {t, indices};
    if (!nb_check_inputs(op, 2, in)) return NULL;
    if (dim == NB_DIM_NONE)
        return gather_impl(id, nb_reshape(t, NB_SHAPE(-1)), 0, nb_reshape(indices, NB_SHAPE(-1)));
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    int d = wrap(op, t, dim);
    if (d < 0) return NULL;
    if (indices->ndim != t->ndim)
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s and indices %s must have the same number of dims", op,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                       nb_fmt_shape(indices->ndim, indices->shape, b, sizeof b));
    int64_t ts[NB_MAX_DIMS], is[NB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        int64_t x = t->shape[i], y = indices->shape[i];
        if (i != d && x != y && x != 1 && y != 1)
            return NB_FAIL(NB_ERR_SHAPE, "%s: input %s and indices %s do not broadcast outside dim %d", op,
                           nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                           nb_fmt_shape(indices->ndim, indices->shape, b, sizeof b), d);
        int64_t m = x == 1 ? y : x;
        ts[i] = i == d ? x : m;
        is[i] = i == d ? y : m;
    }
    return gather_impl(id, nb_expand(t, t->ndim, ts), d, nb_expand(indices, t->ndim, is));
}

nb_tensor *nb_take_along_dim(nb_tensor *t, nb_tensor *indices, int dim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, take_along_dim_impl(t, indices, dim));
}
