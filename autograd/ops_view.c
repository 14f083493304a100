/* ops_view.c - view and shape ops (reshape/view, permute, transpose,
 * narrow/slice, expand, unsqueeze/squeeze, flatten, contiguous, diagonal,
 * unfold, movedim, broadcast_to; and diag_embed, which writes a diagonal
 * view) and their backward rules. Views share storage; only contiguous,
 * diag_embed and a reshape that the strides cannot express copy.
 * Tests: tests/test_ops_view.c; diagonal..broadcast_to in test_ops_shape.c. */
#include <string.h>

#include "nb_autograd_impl.h"

static nb_tensor *record_view(nb_op_id id, nb_tensor *in, nb_tensor *out) {
    bool failed;
    nb_node *n = out ? nb_record(id, out, 1, &in, &failed) : NULL;
    if (out && !n && failed) return NULL;
    return out;
}

/* ---- reshape / view ----------------------------------------------------- */

/* Resolves a single -1 and checks the element count. */
static bool infer_shape(const char *op, const nb_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
    int infer = -1;
    int64_t known = 1; /* the product of the nonzero known sizes (zero says whether one is 0) */
    bool zero = false;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: ndim %d outside [0, %d]", op, ndim, NB_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) { /* e.g. nb_shape() of a failed result */
        nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL shape for %d dims", op, ndim);
        return false;
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1 && infer < 0) infer = i;
        else if (shape[i] < 0) {
            nb_set_error(NB_ERR_SHAPE, "%s: bad size %lld at dim %d", op, (long long)shape[i], i);
            return false;
        }
        else if (__builtin_mul_overflow(known, shape[i] ? shape[i] : 1, &known)) {
            nb_set_error(NB_ERR_SHAPE, "%s: shape %s has too many elements for int64", op,
                         nb_fmt_shape(ndim, shape, a, sizeof a));
            return false;
        } else if (!shape[i]) zero = true;
        out[i] = shape[i];
    }
    int64_t numel = nb_numel(t);
    if (zero) known = 0;
    if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
    if ((infer >= 0 && (known == 0 || numel % known)) || (infer < 0 && known != numel)) {
        nb_set_error(NB_ERR_SHAPE, "%s: shape %s is invalid for input of shape %s (%lld elements)", op,
                     nb_fmt_shape(ndim, shape, a, sizeof a), nb_fmt_shape(t->ndim, t->shape, b, sizeof b),
                     (long long)numel);
        return false;
    }
    return true;
}

/* Strides for viewing t as shape without a copy (PyTorch's computeStride); false if impossible. */
static bool view_strides(const nb_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
    if (nb_numel(t) == 0 || t->ndim == 0) {
        nb_contiguous_strides(ndim, shape, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t base = t->strides[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        if (d == 0 || (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) base = t->strides[d - 1], tensor_numel = 1, view_numel = 1;
        }
    }
    return view_d == -1;
}

nb_status nb_bw_reshape(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_reshape(g, n->in[0]->ndim, n->in[0]->shape);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *reshape_impl(nb_op_id id, nb_tensor *t, int ndim, const int64_t *shape, bool allow_copy) {
    const char *op = nb_op_name(id);
    if (!nb_check_inputs(op, 1, &t)) return NULL;
    int64_t s[NB_MAX_DIMS], st[NB_MAX_DIMS];
    if (!infer_shape(op, t, ndim, shape, s)) return NULL;
    if (view_strides(t, ndim, s, st))
        return record_view(id, t, nb_tensor_view_of(t, ndim, s, st, t->offset));
    if (!allow_copy) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "view: the strides of input %s cannot express shape %s; use nb_reshape",
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a), nb_fmt_shape(ndim, s, b, sizeof b));
    }
    nb_tensor *c = nb_contiguous(t);
    return c ? reshape_impl(id, c, ndim, s, false) : NULL;
}

nb_tensor *nb_reshape(nb_tensor *t, int ndim, const int64_t *shape) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, reshape_impl(NB_OP_RESHAPE, t, ndim, shape, true));
}

nb_tensor *nb_view(nb_tensor *t, int ndim, const int64_t *shape) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, reshape_impl(NB_OP_VIEW, t, ndim, shape, false));
}

nb_tensor *nb_flatten(nb_tensor *t, int start_dim, int end_dim) {
    if (!nb_check_inputs("flatten", 1, &t)) return NULL;
    if (t->ndim == 0) return nb_reshape(t, 1, (int64_t[]){1});
    int s = nb_wrap_dim(start_dim, t->ndim), e = nb_wrap_dim(end_dim, t->ndim);
    if (s < 0 || e < 0 || s > e)
        return NB_FAIL(NB_ERR_INVALID_ARG, "flatten: dims %d..%d invalid for %d-d input", start_dim, end_dim, t->ndim);
    int64_t shape[NB_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < s; i++) shape[nd++] = t->shape[i];
    shape[nd] = 1;
    for (int i = s; i <= e; i++) shape[nd] *= t->shape[i];
    nd++;
    for (int i = e + 1; i < t->ndim; i++) shape[nd++] = t->shape[i];
    return nb_reshape(t, nd, shape);
}

nb_tensor *nb_unsqueeze(nb_tensor *t, int dim) {
    if (!nb_check_inputs("unsqueeze", 1, &t)) return NULL;
    int d = dim < 0 ? dim + t->ndim + 1 : dim;
    if (d < 0 || d > t->ndim || t->ndim == NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_INVALID_ARG, "unsqueeze: dim %d out of range for %d-d input", dim, t->ndim);
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) shape[i] = i == d ? 1 : t->shape[j++];
    return nb_reshape(t, t->ndim + 1, shape);
}

nb_tensor *nb_squeeze(nb_tensor *t, int dim) {
    if (!nb_check_inputs("squeeze", 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 && t->ndim) return NB_FAIL(NB_ERR_INVALID_ARG, "squeeze: dim %d out of range for %d-d input", dim, t->ndim);
    if (t->ndim == 0 || t->shape[d] != 1) return nb_reshape(t, t->ndim, t->shape);
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != d) shape[j++] = t->shape[i];
    return nb_reshape(t, t->ndim - 1, shape);
}

/* ---- permute / transpose -------------------------------------------------- */

nb_status nb_bw_permute(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    int inv[NB_MAX_DIMS];
    for (int i = 0; i < n->out_ndim; i++) inv[n->p.permute.dims[i]] = i;
    gin[0] = nb_permute(g, inv);
    return gin[0] ? NB_OK : nb_last_status();
}

nb_tensor *nb_permute(nb_tensor *t, const int *dims) {
    if (!nb_check_inputs("permute", 1, &t)) return NULL;
    if (!dims && t->ndim) return NB_FAIL(NB_ERR_INVALID_ARG, "permute: NULL dims");
    int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS];
    bool seen[NB_MAX_DIMS] = {0};
    int d[NB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        d[i] = nb_wrap_dim(dims[i], t->ndim);
        if (d[i] < 0 || seen[d[i]])
            return NB_FAIL(NB_ERR_INVALID_ARG, "permute: dims are not a permutation of 0..%d (entry %d = %d)",
                           t->ndim - 1, i, dims[i]);
        seen[d[i]] = true;
        shape[i] = t->shape[d[i]];
        strides[i] = t->strides[d[i]];
    }
    nb_tensor *out = nb_tensor_view_of(t, t->ndim, shape, strides, t->offset);
    out = record_view(NB_OP_PERMUTE, t, out);
    if (out && out->grad_fn)
        for (int i = 0; i < t->ndim; i++) out->grad_fn->p.permute.dims[i] = d[i];
    return out;
}

nb_tensor *nb_transpose(nb_tensor *t, int dim0, int dim1) {
    if (!nb_check_inputs("transpose", 1, &t)) return NULL;
    int a = nb_wrap_dim(dim0, t->ndim), b = nb_wrap_dim(dim1, t->ndim);
    if (a < 0 || b < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "transpose: dims %d, %d out of range for %d-d input", dim0, dim1, t->ndim);
    int p[NB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) p[i] = i;
    p[a] = b, p[b] = a;
    return nb_permute(t, p);
}

/* ---- slicing -------------------------------------------------------------- */

/* Under create_graph a rule that writes g into zeros with raw kernels
 * records its result with a rule of its own: the forward view again. */
static nb_status grad_node(nb_node *n, nb_backward_fn fn, nb_tensor *gx, nb_tensor *g) {
    bool failed;
    nb_record_grad(n, fn, gx, 1, &g, &failed);
    return failed ? nb_last_status() : NB_OK;
}

/* The rule of slice's gradient: slice gg as the forward did (in[0] is g). */
static nb_status slice_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    int d = n->p.slice.dim;
    int64_t start = n->p.slice.start, len = n->in[0]->shape[d];
    gin[0] = nb_slice(gg, d, start, start + (len - 1) * n->p.slice.step + 1, n->p.slice.step);
    return gin[0] ? NB_OK : nb_last_status();
}

/* p.slice: dim, start, step. The gradient is g scattered into zeros. */
nb_status nb_bw_slice(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *in = n->in[0];
    nb_tensor *z = nb_zeros_like(in);
    if (!z) return nb_last_status();
    int d = n->p.slice.dim;
    int64_t strides[NB_MAX_DIMS];
    nb_contiguous_strides(in->ndim, in->shape, strides);
    int64_t offset = n->p.slice.start * strides[d];
    strides[d] *= n->p.slice.step;
    nb_tensor *zv = nb_tensor_view_of(z, g->ndim, g->shape, strides, offset);
    nb_status st = zv ? nb_copy_(zv, g) : nb_last_status();
    gin[0] = z;
    return st ? st : grad_node(n, slice_grad_backward, z, g);
}

nb_tensor *nb_slice(nb_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    if (!nb_check_inputs("slice", 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) return NB_FAIL(NB_ERR_INVALID_ARG, "slice: dim %d out of range for %d-d input", dim, t->ndim);
    if (step < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "slice: step %lld must be >= 1", (long long)step);
    int64_t n = t->shape[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[d] = (end - start + step - 1) / step;
    strides[d] *= step;
    nb_tensor *out = nb_tensor_view_of(t, t->ndim, shape, strides, t->offset + start * t->strides[d]);
    out = record_view(NB_OP_SLICE, t, out);
    if (out && out->grad_fn) {
        out->grad_fn->p.slice.dim = d;
        out->grad_fn->p.slice.start = start;
        out->grad_fn->p.slice.step = step;
    }
    return out;
}

nb_tensor *nb_narrow(nb_tensor *t, int dim, int64_t start, int64_t length) {
    if (!nb_check_inputs("narrow", 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) return NB_FAIL(NB_ERR_INVALID_ARG, "narrow: dim %d out of range for %d-d input", dim, t->ndim);
    if (start < 0) start += t->shape[d];
    if (start < 0 || length < 0 || length > t->shape[d] - start) /* not start + length: it may overflow */
        return NB_FAIL(NB_ERR_INVALID_ARG, "narrow: start %lld length %lld exceed dim %d of size %lld", (long long)start,
                       (long long)length, d, (long long)t->shape[d]);
    return nb_slice(t, d, start, start + length, 1);
}

/* ---- expand / contiguous ---------------------------------------------------- */

nb_status nb_bw_expand(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_sum_to_shape(g, n->in[0]->ndim, n->in[0]->shape);
    return gin[0] ? NB_OK : nb_last_status();
}

nb_tensor *nb_expand(nb_tensor *t, int ndim, const int64_t *shape) {
    if (!nb_check_inputs("expand", 1, &t)) return NULL;
    if (ndim > 0 && !shape) return NB_FAIL(NB_ERR_INVALID_ARG, "expand: NULL shape for %d dims", ndim);
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (ndim < t->ndim || ndim > NB_MAX_DIMS) goto bad;
    int64_t s[NB_MAX_DIMS], st[NB_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t have = i < lead ? 1 : t->shape[i - lead];
        s[i] = shape[i] == -1 && i >= lead ? have : shape[i];
        if (s[i] < 0 || (have != s[i] && have != 1)) goto bad;
        st[i] = i < lead || have != s[i] ? 0 : t->strides[i - lead];
    }
    int64_t numel = 1; /* [2^40, 2^40] has more elements than int64 counts */
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(numel, s[i] ? s[i] : 1, &numel) || numel > INT64_MAX / 8)
            return NB_FAIL(NB_ERR_SHAPE, "expand: %s to %s has too many elements for int64",
                           nb_fmt_shape(t->ndim, t->shape, a, sizeof a), nb_fmt_shape(ndim, s, b, sizeof b));
    return record_view(NB_OP_EXPAND, t, nb_tensor_view_of(t, ndim, s, st, t->offset));
bad:
    return NB_FAIL(NB_ERR_SHAPE, "expand: cannot expand %s to %s", nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                   nb_fmt_shape(ndim, shape, b, sizeof b));
}

nb_status nb_bw_identity(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    (void)n;
    nb_retain(g);
    gin[0] = nb_scope_adopt(g);
    return NB_OK;
}

static nb_tensor *contiguous_impl(nb_tensor *t) {
    if (!nb_check_inputs("contiguous", 1, &t)) return NULL;
    if (nb_is_contiguous(t)) {
        nb_retain(t);
        return nb_scope_adopt(t);
    }
    nb_tensor *out = nb_empty_like(t);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), v = nb_kview_of(t);
    if (nb_kernel_copy(NB_BE(t), &o, &v) != NB_OK) return NULL;
    return record_view(NB_OP_CONTIGUOUS, t, out);
}

nb_tensor *nb_contiguous(nb_tensor *t) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, contiguous_impl(t));
}

/* clone: contiguous_impl without its shortcut, so the result never shares
 * t's storage (a later in-place write to one leaves the other). */
nb_tensor *nb_clone(nb_tensor *t) {
    if (!nb_check_inputs("clone", 1, &t)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *out = nb_empty_like(t);
    nb_kview o = out ? nb_kview_of(out) : (nb_kview){0}, v = nb_kview_of(t);
    if (!out || nb_kernel_copy(NB_BE(t), &o, &v) != NB_OK) return nb_scope_return(s, NULL);
    return nb_scope_return(s, record_view(NB_OP_CLONE, t, out));
}

/* ---- select -------------------------------------------------------------------------------- */

nb_tensor *nb_select(nb_tensor *t, int dim, int64_t index) {
    if (!nb_check_inputs("select", 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    char a[NB_SHAPE_BUF];
    if (d < 0 || t->ndim == 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "select: dim %d out of range for input %s", dim,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    int64_t i = index < 0 ? index + t->shape[d] : index;
    if (i < 0 || i >= t->shape[d])
        return NB_FAIL(NB_ERR_INVALID_ARG, "select: index %lld out of range for dim %d of input %s", (long long)index, d,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_squeeze(nb_narrow(t, d, i, 1), d));
}

/* ---- diagonal / diag_embed ---------------------------------------------------------------- */

/* The geometry of t's diagonal view (torch.diagonal): dims other than
 * d1, d2 in order, then the diagonal; false (error set) on bad dims. */
static bool diagonal_geometry(const char *op, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset,
                              int dim1, int dim2, int64_t *oshape, int64_t *ostrides, int64_t *ooffset) {
    int a = nb_wrap_dim(dim1, ndim), b = nb_wrap_dim(dim2, ndim);
    if (a < 0 || b < 0 || a == b || ndim < 2) {
        char s[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dims %d and %d must be two different dims of shape %s", op, dim1, dim2,
                     nb_fmt_shape(ndim, shape, s, sizeof s));
        return false;
    }
    int m = 0;
    for (int d = 0; d < ndim; d++)
        if (d != a && d != b) oshape[m] = shape[d], ostrides[m++] = strides[d];
    int64_t len = offset >= 0 ? (shape[a] < shape[b] - offset ? shape[a] : shape[b] - offset)
                              : (shape[a] + offset < shape[b] ? shape[a] + offset : shape[b]);
    oshape[m] = len > 0 ? len : 0;
    ostrides[m] = strides[a] + strides[b];
    *ooffset = oshape[m] == 0 ? 0 : offset >= 0 ? offset * strides[b] : -offset * strides[a];
    return true;
}

/* The rule of diagonal's gradient: the diagonal of gg. */
static nb_status diagonal_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = nb_diagonal(gg, n->p.diagonal.offset, n->p.diagonal.dim1, n->p.diagonal.dim2);
    return gin[0] ? NB_OK : nb_last_status();
}

/* p.diagonal: offset, dim1, dim2. The gradient is g written into the
 * same diagonal of zeros. */
nb_status nb_bw_diagonal(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *z = nb_zeros_like(n->in[0]);
    if (!z) return nb_last_status();
    int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS], off;
    diagonal_geometry("diagonal", z->ndim, z->shape, z->strides, n->p.diagonal.offset, n->p.diagonal.dim1, n->p.diagonal.dim2, shape,
                      strides, &off);
    nb_tensor *zv = nb_tensor_view_of(z, g->ndim, shape, strides, off);
    nb_status st = zv ? nb_copy_(zv, g) : nb_last_status();
    gin[0] = z;
    return st ? st : grad_node(n, diagonal_grad_backward, z, g);
}

nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int dim1, int dim2) {
    if (!nb_check_inputs("diagonal", 1, &t)) return NULL;
    int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS], off;
    if (!diagonal_geometry("diagonal", t->ndim, t->shape, t->strides, offset, dim1, dim2, shape, strides, &off))
        return NULL;
    nb_tensor *out = nb_tensor_view_of(t, t->ndim - 1, shape, strides, t->offset + off);
    out = record_view(NB_OP_DIAGONAL, t, out);
    if (out && out->grad_fn) {
        out->grad_fn->p.diagonal.offset = offset;
        out->grad_fn->p.diagonal.dim1 = dim1;
        out->grad_fn->p.diagonal.dim2 = dim2;
    }
    return out;
}

/* p.diagonal as diagonal's: the gradient is g's diagonal. */
nb_status nb_bw_diag_embed(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_diagonal(g, n->p.diagonal.offset, n->p.diagonal.dim1, n->p.diagonal.dim2);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *diag_embed_impl(nb_tensor *t, int64_t offset, int dim1, int dim2) {
    if (!nb_check_inputs("diag_embed", 1, &t)) return NULL;
    char s[NB_SHAPE_BUF];
    int nd = t->ndim + 1, a = nb_wrap_dim(dim1, nd), b = nb_wrap_dim(dim2, nd);
    if (t->ndim < 1 || nd > NB_MAX_DIMS || a < 0 || b < 0 || a == b)
        return NB_FAIL(NB_ERR_INVALID_ARG, "diag_embed: dims %d and %d must be two different dims of the %d-d output "
                       "for input %s (at least 1-d)", dim1, dim2, nd, nb_fmt_shape(t->ndim, t->shape, s, sizeof s));
    int64_t len = t->shape[t->ndim - 1], side = len + (offset < 0 ? -offset : offset), shape[NB_MAX_DIMS];
    for (int d = 0, j = 0; d < nd; d++) shape[d] = d == a || d == b ? side : t->shape[j++];
    nb_tensor *out = nb_tensor_new(nd, shape, t->dtype, t->storage->device);
    if (!out) return NULL;
    int64_t vshape[NB_MAX_DIMS], vstrides[NB_MAX_DIMS], off;
    diagonal_geometry("diag_embed", nd, out->shape, out->strides, offset, a, b, vshape, vstrides, &off);
    nb_kview vo = nb_kview_of(out), vt = nb_kview_of(t), diag = vo;
    diag.ndim = t->ndim;
    memcpy(diag.shape, vshape, sizeof diag.shape);
    memcpy(diag.strides, vstrides, sizeof diag.strides);
    diag.data = (char *)vo.data + (size_t)off * nb_dtype_size(t->dtype);
    if (nb_kernel_fill(NB_BE(t), &vo, 0.0) != NB_OK || (nb_numel(t) && nb_kernel_copy(NB_BE(t), &diag, &vt) != NB_OK)) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_DIAG_EMBED, out, 1, &t, &failed);
    if (failed) return NULL;
    if (n) n->p.diagonal.offset = offset, n->p.diagonal.dim1 = a, n->p.diagonal.dim2 = b;
    return out;
}

nb_tensor *nb_diag_embed(nb_tensor *t, int64_t offset, int dim1, int dim2) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, diag_embed_impl(t, offset, dim1, dim2));
}

/* ---- unfold ----------------------------------------------------------------------------------- */

/* The rule of unfold's gradient: unfold gg as the forward did. */
static nb_status unfold_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = nb_unfold(gg, n->p.slice.dim, n->p.slice.start, n->p.slice.step);
    return gin[0] ? NB_OK : nb_last_status();
}

/* p.slice: dim, size (in start), step. Windows may overlap, so the gradient
 * adds, for each window offset k, g[..., k] into gx's positions w*step + k
 * (a strided view), k in order: deterministic. */
nb_status nb_bw_unfold(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gx = nb_zeros_like(n->in[0]);
    if (!gx) return nb_last_status();
    int d = n->p.slice.dim;
    int64_t size = n->p.slice.start, step = n->p.slice.step;
    nb_kview vx = nb_kview_of(gx), vg = nb_kview_of(g), dst = vx, src = vg;
    dst.shape[d] = g->shape[d];
    dst.strides[d] = vx.strides[d] * step;
    src.ndim = g->ndim - 1;
    size_t es = nb_dtype_size(g->dtype);
    for (int64_t k = 0; k < size && nb_numel(g); k++) {
        dst.data = (char *)vx.data + (size_t)(k * vx.strides[d]) * es;
        src.data = (char *)vg.data + (size_t)(k * vg.strides[g->ndim - 1]) * es;
        nb_status st = nb_kernel_binary(NB_BE(g), NB_BINARY_ADD, &dst, &dst, &src);
        if (st != NB_OK) return st;
    }
    gin[0] = gx;
    return grad_node(n, unfold_grad_backward, gx, g);
}

nb_tensor *nb_unfold(nb_tensor *t, int dim, int64_t size, int64_t step) {
    if (!nb_check_inputs("unfold", 1, &t)) return NULL;
    char s[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, t->ndim);
    if (t->ndim == 0 && d == 0 && size >= 0 && size <= 1 && step >= 1) { /* PyTorch: a 0-d t gives [size] */
        nb_scope *sc = nb_op_scope_begin();
        return nb_scope_return(sc, nb_narrow(nb_reshape(t, NB_SHAPE(1)), 0, 0, size));
    }
    if (d < 0 || t->ndim == 0 || t->ndim == NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_INVALID_ARG, "unfold: dim %d out of range for input %s (1 to %d dims)", dim,
                       nb_fmt_shape(t->ndim, t->shape, s, sizeof s), NB_MAX_DIMS - 1);
    if (size < 0 || step < 1 || size > t->shape[d])
        return NB_FAIL(NB_ERR_INVALID_ARG, "unfold: size %lld and step %lld invalid for dim %d of input %s "
                       "(need 0 <= size <= %lld, step >= 1)", (long long)size, (long long)step, d,
                       nb_fmt_shape(t->ndim, t->shape, s, sizeof s), (long long)t->shape[d]);
    int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[d] = (t->shape[d] - size) / step + 1;
    strides[d] = t->strides[d] * step;
    shape[t->ndim] = size;
    strides[t->ndim] = t->strides[d];
    nb_tensor *out = record_view(NB_OP_UNFOLD, t, nb_tensor_view_of(t, t->ndim + 1, shape, strides, t->offset));
    if (out && out->grad_fn) {
        out->grad_fn->p.slice.dim = d;
        out->grad_fn->p.slice.start = size;
        out->grad_fn->p.slice.step = step;
    }
    return out;
}

/* ---- movedim / broadcast_to ----------------------------------------------------------------- */

nb_tensor *nb_movedim(nb_tensor *t, const int *source, const int *destination, int n) {
    if (!nb_check_inputs("movedim", 1, &t)) return NULL;
    char s[NB_SHAPE_BUF];
    if (n < 0 || n > t->ndim || (n > 0 && (!source || !destination)))
        return NB_FAIL(NB_ERR_INVALID_ARG, "movedim: %d dims to move for input %s", n,
                       nb_fmt_shape(t->ndim, t->shape, s, sizeof s));
    int perm[NB_MAX_DIMS];
    bool src_used[NB_MAX_DIMS] = {0}, dst_used[NB_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int a = nb_wrap_dim(source[i], t->ndim), b = nb_wrap_dim(destination[i], t->ndim);
        if (a < 0 || b < 0 || src_used[a] || dst_used[b])
            return NB_FAIL(NB_ERR_INVALID_ARG, "movedim: source %d / destination %d out of range or repeated for "
                           "input %s", source[i], destination[i], nb_fmt_shape(t->ndim, t->shape, s, sizeof s));
        src_used[a] = dst_used[b] = true;
        perm[b] = a;
    }
    /* the other dims keep their order in the free positions (PyTorch's rule) */
    for (int a = 0, b = 0; a < t->ndim; a++) {
        if (src_used[a]) continue;
        while (dst_used[b]) b++;
        perm[b++] = a;
    }
    return nb_permute(t, perm);
}

nb_tensor *nb_broadcast_to(nb_tensor *t, int ndim, const int64_t *shape) {
    if (!nb_check_inputs("broadcast_to", 1, &t)) return NULL;
    bool ok = ndim >= t->ndim && ndim <= NB_MAX_DIMS && (ndim == 0 || shape);
    for (int i = 0; ok && i < ndim; i++) {
        int64_t have = i < ndim - t->ndim ? 1 : t->shape[i - (ndim - t->ndim)];
        ok = (shape[i] == -1 && i >= ndim - t->ndim) || (shape[i] >= 0 && (have == 1 || have == shape[i]));
    }
    if (!ok) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "broadcast_to: cannot broadcast %s to %s",
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                       shape ? nb_fmt_shape(ndim, shape, b, sizeof b) : "NULL");
    }
    return nb_expand(t, ndim, shape);
}
