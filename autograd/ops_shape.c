/* ops_shape.c - shape ops with PyTorch's semantics: flip, roll, repeat,
 * tile, pad (constant / reflect / replicate / circular), tril/triu and
 * meshgrid. All but constant pad are composites of existing ops
 * (index_select with computed indices, narrow + cat, expand + reshape,
 * where with a mask built from aranges), so every backend runs them and
 * autograd comes from the parts; constant pad fills the output once, copies
 * the input into its interior and records a node whose backward is a view.
 * Views (diagonal, unfold, movedim, ...) are in ops_view.c.
 * Tests: tests/test_ops_shape.c. */
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* The index tensors are computed on the tensor's device (an arange and
 * integer ops), never uploaded from the host, so that the ops can be
 * captured in a CUDA graph (a host upload cannot). */
static nb_tensor *arange_like(double start, double end, double step, const nb_tensor *like) {
    return nb_arange_on(start, end, step, NB_I64, like->storage->device);
}

/* r itself if it has its own storage, else a copy: these ops return new
 * tensors in PyTorch, never views of their input t. */
static nb_tensor *fresh(const nb_tensor *t, nb_tensor *r) {
    if (!r || r->storage != t->storage) return r;
    nb_tensor *out = nb_empty_like(r);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), v = nb_kview_of(r);
    if (nb_kernel_copy(NB_BE(r), &o, &v) != NB_OK) return NULL;
    bool failed;
    nb_record(NB_OP_CONTIGUOUS, out, 1, &r, &failed);
    return failed ? NULL : out;
}

/* Wraps dims[0..n) into seen[]; false (error set) on a bad or repeated dim. */
static bool dim_set(const char *op, const nb_tensor *t, const int *dims, int n, bool *seen) {
    char a[NB_SHAPE_BUF];
    memset(seen, 0, sizeof(bool) * NB_MAX_DIMS);
    if (n < 0 || (n > 0 && !dims)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: bad dims (n %d, dims %s)", op, n, dims ? "set" : "NULL");
        return false;
    }
    for (int i = 0; i < n; i++) {
        int d = nb_wrap_dim(dims[i], t->ndim);
        if (d < 0 || seen[d]) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d %s for input %s", op, dims[i],
                         d < 0 ? "out of range" : "appears twice", nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
            return false;
        }
        seen[d] = true;
    }
    return true;
}

/* ---- flip ------------------------------------------------------------------------------ */

static nb_tensor *flip_impl(nb_tensor *t, const int *dims, int n_dims) {
    bool seen[NB_MAX_DIMS];
    if (!nb_check_inputs("flip", 1, &t) || !dim_set("flip", t, dims, n_dims, seen)) return NULL;
    nb_tensor *r = t;
    for (int d = 0; d < t->ndim && r; d++) {
        int64_t n = t->shape[d];
        if (!seen[d] || n < 2) continue;
        nb_tensor *idx = arange_like((double)(n - 1), -1, -1, t); /* n - 1, ..., 0 */
        r = idx ? nb_index_select(r, d, idx) : NULL;
    }
    return fresh(t, r);
}

nb_tensor *nb_flip(nb_tensor *t, const int *dims, int n_dims) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, flip_impl(t, dims, n_dims));
}

/* ---- rot90 ----------------------------------------------------------------------------- */

/* As PyTorch: k = 1 flips dim1 then swaps, k = 2 flips both, k = 3 flips
 * dim0 then swaps, k = 0 copies. */
nb_tensor *nb_rot90(nb_tensor *t, int64_t k, int dim0, int dim1) {
    if (!nb_check_inputs("rot90", 1, &t)) return NULL;
    int a = nb_wrap_dim(dim0, t->ndim), b = nb_wrap_dim(dim1, t->ndim);
    char sh[NB_SHAPE_BUF];
    if (t->ndim < 2 || a < 0 || b < 0 || a == b)
        return NB_FAIL(NB_ERR_INVALID_ARG, "rot90: dims %d and %d must be two different dims of input %s", dim0, dim1,
                       nb_fmt_shape(t->ndim, t->shape, sh, sizeof sh));
    int r = (int)(((k % 4) + 4) % 4);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y;
    if (r == 0) y = nb_clone(t);
    else if (r == 2) y = nb_flip(t, (int[]){a, b}, 2);
    else y = nb_transpose(nb_flip(t, (int[]){r == 1 ? b : a}, 1), a, b);
    return nb_scope_return(s, y);
}

/* ---- roll ------------------------------------------------------------------------------ */

/* x rolled by shift along d: cat(x[n-s:], x[:n-s]). */
static nb_tensor *roll_dim(nb_tensor *x, int d, int64_t shift) {
    int64_t n = x->shape[d];
    int64_t s = n ? (shift % n + n) % n : 0;
    if (s == 0) return x;
    nb_tensor *parts[2] = {nb_narrow(x, d, n - s, s), nb_narrow(x, d, 0, n - s)};
    return nb_cat(parts, 2, d);
}

static nb_tensor *roll_impl(nb_tensor *t, const int64_t *shifts, int n_shifts, const int *dims, int n_dims) {
    if (!nb_check_inputs("roll", 1, &t)) return NULL;
    char a[NB_SHAPE_BUF];
    if (!shifts || n_shifts < 1 || (n_dims == 0 ? n_shifts != 1 : n_shifts != n_dims) || n_dims < 0 ||
        (n_dims > 0 && !dims))
        return NB_FAIL(NB_ERR_INVALID_ARG, "roll: %d shifts for %d dims; need one shift per dim (one without dims)",
                       n_shifts, n_dims);
    if (n_dims == 0) {
        nb_tensor *flat = nb_flatten(t, 0, -1);
        nb_tensor *r = flat ? roll_dim(flat, 0, shifts[0]) : NULL;
        return fresh(t, r ? nb_reshape(r, t->ndim, t->shape) : NULL);
    }
    nb_tensor *r = t;
    for (int i = 0; i < n_dims && r; i++) {
        int d = nb_wrap_dim(dims[i], t->ndim);
        if (d < 0 || t->ndim == 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "roll: dim %d out of range for input %s", dims[i],
                           nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
        r = roll_dim(r, d, shifts[i]);
    }
    return fresh(t, r);
}

nb_tensor *nb_roll(nb_tensor *t, const int64_t *shifts, int n_shifts, const int *dims, int n_dims) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, roll_impl(t, shifts, n_shifts, dims, n_dims));
}

/* ---- repeat / tile ------------------------------------------------------------------------- */

/* x [.., s_i, ..] repeated reps[i] times along each dim with index_select
 * (the path for more than NB_MAX_DIMS interleaved dims). */
static nb_tensor *repeat_by_index(nb_tensor *x, const int64_t *reps, int n) {
    for (int i = 0; i < n && x; i++) {
        int64_t s = x->shape[i], len = s * reps[i];
        if (reps[i] == 1) continue;
        /* j % s for j < len: arange(s) repeated reps[i] times */
        nb_tensor *idx = nb_reshape(nb_expand(nb_reshape(arange_like(0, (double)s, 1, x), NB_SHAPE(1, s)),
                                              NB_SHAPE(reps[i], s)),
                                    1, &len);
        x = idx ? nb_index_select(x, i, idx) : NULL;
    }
    return x;
}

static nb_tensor *repeat_impl(const char *op, nb_tensor *t, const int64_t *reps, int n) {
    if (!nb_check_inputs(op, 1, &t)) return NULL;
    char a[NB_SHAPE_BUF];
    if (n < t->ndim || n > NB_MAX_DIMS || (n > 0 && !reps))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %d repeats for input %s; need one per dim (at most %d)", op, n,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a), NB_MAX_DIMS);
    int64_t src[NB_MAX_DIMS], out[NB_MAX_DIMS], vs[2 * NB_MAX_DIMS], es[2 * NB_MAX_DIMS];
    int m = 0, lead = n - t->ndim;
    for (int i = 0; i < n; i++) {
        if (reps[i] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: repeat %lld at %d is negative", op, (long long)reps[i], i);
        src[i] = i < lead ? 1 : t->shape[i - lead];
        if (src[i] > 0 && reps[i] > INT64_MAX / src[i])
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: repeat %lld at %d overflows the size %lld", op,
                           (long long)reps[i], i, (long long)src[i]);
        out[i] = src[i] * reps[i];
        if (reps[i] != 1) vs[m] = 1, es[m++] = reps[i]; /* a broadcast dim before dim i */
        vs[m] = es[m] = src[i], m++;
    }
    nb_tensor *x = nb_reshape(t, n, src), *r;
    if (m <= NB_MAX_DIMS) /* one copy: [1, s0, 1, s1] -> expand [r0, s0, r1, s1] -> [r0*s0, r1*s1] */
        r = nb_reshape(nb_expand(nb_reshape(x, m, vs), m, es), n, out);
    else
        r = repeat_by_index(x, reps, n);
    return fresh(t, r);
}

nb_tensor *nb_repeat(nb_tensor *t, const int64_t *repeats, int n) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, repeat_impl("repeat", t, repeats, n));
}

static nb_tensor *tile_impl(nb_tensor *t, const int64_t *reps, int n) {
    if (!nb_check_inputs("tile", 1, &t)) return NULL;
    if (n < 0 || n > NB_MAX_DIMS || (n > 0 && !reps))
        return NB_FAIL(NB_ERR_INVALID_ARG, "tile: bad reps (n %d, reps %s)", n, reps ? "set" : "NULL");
    int64_t full[NB_MAX_DIMS];
    int m = n > t->ndim ? n : t->ndim, lead = m - n;
    for (int i = 0; i < m; i++) full[i] = i < lead ? 1 : reps[i - lead]; /* PyTorch prepends 1s */
    return repeat_impl("tile", t, full, m);
}

nb_tensor *nb_tile(nb_tensor *t, const int64_t *reps, int n) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, tile_impl(t, reps, n));
}

/* ---- pad ----------------------------------------------------------------------------------- */

/* p.pad.lo[d]: the left padding of dim d; the gradient is g's interior (a view). */
nb_status nb_bw_constant_pad(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->in[0], *r = g;
    for (int d = 0; d < x->ndim && r; d++)
        if (x->shape[d] != g->shape[d]) r = nb_narrow(r, d, n->p.pad.lo[d], x->shape[d]);
    gin[0] = r == g ? (nb_retain(g), nb_scope_adopt(g)) : r;
    return gin[0] ? NB_OK : nb_last_status();
}

/* x (already cropped) into the interior of a tensor filled with value. */
static nb_tensor *constant_pad(nb_tensor *x, const int64_t *lo, const int64_t *hi, double value) {
    int64_t shape[NB_MAX_DIMS], offset = 0;
    for (int d = 0; d < x->ndim; d++) shape[d] = lo[d] + x->shape[d] + hi[d];
    nb_tensor *out = nb_tensor_new(x->ndim, shape, x->dtype, x->storage->device);
    if (!out) return NULL;
    for (int d = 0; d < x->ndim; d++) offset += lo[d] * out->strides[d];
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(x), inner = vo;
    inner.data = (char *)vo.data + (size_t)offset * nb_dtype_size(x->dtype);
    memcpy(inner.shape, x->shape, sizeof inner.shape);
    if (nb_kernel_fill(NB_BE(x), &vo, value) != NB_OK || (nb_numel(x) && nb_kernel_copy(NB_BE(x), &inner, &vx) != NB_OK))
        return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_PAD, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) memcpy(n->p.pad.lo, lo, sizeof(int64_t) * (size_t)x->ndim);
    return out;
}

/* x padded by (l, r) along d in a non-constant mode, via index_select. */
static nb_tensor *pad_dim(nb_tensor *x, int d, int64_t l, int64_t r, nb_pad_mode mode) {
    int64_t n = x->shape[d], len = n + l + r;
    bool ok = mode == NB_PAD_REFLECT ? l < n && r < n : mode == NB_PAD_REPLICATE ? n > 0 : l <= n && r <= n;
    if (!ok || (n == 0 && len > 0)) {
        const char *why = mode == NB_PAD_REFLECT     ? "reflect padding must be less than the dim's size"
                          : mode == NB_PAD_REPLICATE ? "replicate padding needs a non-empty dim"
                                                     : "circular padding must not exceed the dim's size";
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_INVALID_ARG, "pad: padding (%lld, %lld) of dim %d of input %s: %s", (long long)l,
                       (long long)r, d, nb_fmt_shape(x->ndim, x->shape, a, sizeof a), why);
    }
    if (len == 0) return nb_narrow(x, d, 0, 0);
    nb_tensor *i = arange_like((double)-l, (double)(n + r), 1, x), *idx; /* the source of output j is i = j - l */
    if (mode == NB_PAD_REPLICATE) idx = nb_clamp_scalar(i, 0, (double)(n - 1));
    else if (mode == NB_PAD_CIRCULAR) idx = nb_remainder_scalar(i, (double)n); /* Python's %: in [0, n) */
    else /* reflect about 0 and n - 1: (n - 1) - |(n - 1) - |i|| */
        idx = nb_add_scalar(nb_neg(nb_abs(nb_add_scalar(nb_neg(nb_abs(i)), (double)(n - 1)))), (double)(n - 1));
    return idx ? nb_index_select(x, d, idx) : NULL;
}

static nb_tensor *pad_impl(nb_tensor *t, const int64_t *pads, int n_pads, nb_pad_mode mode, double value) {
    if (!nb_check_inputs("pad", 1, &t)) return NULL;
    char a[NB_SHAPE_BUF];
    if (n_pads < 0 || n_pads % 2 || n_pads / 2 > t->ndim || (n_pads && !pads))
        return NB_FAIL(NB_ERR_INVALID_ARG, "pad: %d pads for input %s; need pairs (last dim first), at most 2 per dim",
                       n_pads, nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    if ((unsigned)mode > NB_PAD_CIRCULAR) return NB_FAIL(NB_ERR_INVALID_ARG, "pad: bad mode %d", (int)mode);
    int64_t lo[NB_MAX_DIMS] = {0}, hi[NB_MAX_DIMS] = {0}, out_shape[NB_MAX_DIMS];
    memcpy(out_shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    for (int i = 0; i < n_pads / 2; i++) {
        int d = t->ndim - 1 - i;
        lo[d] = pads[2 * i], hi[d] = pads[2 * i + 1];
        int64_t n = t->shape[d];
        /* the sum is checked for int64 overflow: pads near INT64_MAX must not wrap to a small size */
        bool wraps = __builtin_add_overflow(n, lo[d], &out_shape[d]) ||
                     __builtin_add_overflow(out_shape[d], hi[d], &out_shape[d]);
        if (wraps || out_shape[d] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "pad: padding (%lld, %lld) of dim %d makes input %s %s in size",
                           (long long)lo[d], (long long)hi[d], d, nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                           wraps ? "too large (int64 overflow)" : "negative");
        /* constant and circular crop first: a crop larger than the dim is an error (PyTorch's, and
         * circular read past the input there); reflect and replicate map each output position */
        if ((mode == NB_PAD_CONSTANT || mode == NB_PAD_CIRCULAR) && (-lo[d] > n || -hi[d] > n))
            return NB_FAIL(NB_ERR_INVALID_ARG, "pad: padding (%lld, %lld) of dim %d crops more than its size %lld (input %s)",
                           (long long)lo[d], (long long)hi[d], d, (long long)n,
                           nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    }
    int64_t total = 1;
    for (int d = 0; d < t->ndim; d++)
        if (__builtin_mul_overflow(total, out_shape[d] ? out_shape[d] : 1, &total) || total > INT64_MAX / 16) {
            char b[NB_SHAPE_BUF];
            return NB_FAIL(NB_ERR_INVALID_ARG, "pad: the padded shape %s of input %s is too large",
                           nb_fmt_shape(t->ndim, out_shape, b, sizeof b), nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
        }
    nb_tensor *x = t;
    if (mode == NB_PAD_REFLECT || mode == NB_PAD_REPLICATE) { /* PyTorch maps from the uncropped input */
        for (int d = 0; d < t->ndim && x; d++)
            if (lo[d] || hi[d]) x = pad_dim(x, d, lo[d], hi[d], mode);
        return fresh(t, x);
    }
    for (int d = 0; d < t->ndim && x; d++) { /* constant and circular crop first (PyTorch) */
        int64_t start = lo[d] < 0 ? -lo[d] : 0, end = x->shape[d] - (hi[d] < 0 ? -hi[d] : 0);
        if (start || end < x->shape[d]) x = nb_narrow(x, d, start, end > start ? end - start : 0);
        lo[d] = lo[d] > 0 ? lo[d] : 0, hi[d] = hi[d] > 0 ? hi[d] : 0;
    }
    if (mode == NB_PAD_CONSTANT) return x ? constant_pad(x, lo, hi, value) : NULL;
    for (int d = 0; d < t->ndim && x; d++)
        if (lo[d] || hi[d]) x = pad_dim(x, d, lo[d], hi[d], mode);
    return fresh(t, x);
}

nb_tensor *nb_pad(nb_tensor *t, const int64_t *pads, int n_pads, nb_pad_mode mode, double value) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, pad_impl(t, pads, n_pads, mode, value));
}

/* ---- tril / triu ------------------------------------------------------------------------------ */

/* where(mask, 0, t) with mask (j - i > k) for tril, (j - i < k) for triu. */
static nb_tensor *tri_impl(const char *op, nb_tensor *t, int64_t k, bool lower) {
    if (!nb_check_inputs(op, 1, &t)) return NULL;
    char a[NB_SHAPE_BUF];
    if (t->ndim < 2)
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s must have at least 2 dims", op,
                       nb_fmt_shape(t->ndim, t->shape, a, sizeof a));
    int64_t m = t->shape[t->ndim - 2], n = t->shape[t->ndim - 1];
    nb_device dev = t->storage->device;
    nb_tensor *rows = nb_reshape(nb_arange_on(0, (double)m, 1, NB_I64, dev), NB_SHAPE(m, 1));
    nb_tensor *cols = nb_reshape(nb_arange_on(0, (double)n, 1, NB_I64, dev), NB_SHAPE(1, n));
    nb_tensor *kk = nb_scalar_like(t, (double)k, NB_I64), *zero = nb_scalar_like(t, 0, t->dtype);
    nb_tensor *diff = nb_sub(cols, rows);
    nb_tensor *mask = lower ? nb_gt(diff, kk) : nb_gt(kk, diff);
    return nb_where(mask, zero, t);
}

nb_tensor *nb_tril(nb_tensor *t, int64_t diagonal) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, tri_impl("tril", t, diagonal, true));
}

nb_tensor *nb_triu(nb_tensor *t, int64_t diagonal) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, tri_impl("triu", t, diagonal, false));
}

/* ---- meshgrid -------------------------------------------------------------------------------- */

static nb_status meshgrid_check(nb_tensor *const *ts, int n, nb_meshgrid_indexing indexing, nb_tensor **out) {
    if (!ts || !out || n < 1 || n > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_INVALID_ARG, "meshgrid: needs 1 to %d tensors and an output array (got %d)",
                            NB_MAX_DIMS, n);
    if (indexing != NB_MESHGRID_IJ && indexing != NB_MESHGRID_XY)
        return nb_set_error(NB_ERR_INVALID_ARG, "meshgrid: bad indexing %d", (int)indexing);
    if (!nb_check_inputs("meshgrid", n, ts) || !nb_check_dtypes(NB_OP_MESHGRID, n, ts)) return nb_last_status();
    for (int i = 0; i < n; i++)
        if (ts[i]->ndim > 1) {
            char a[NB_SHAPE_BUF];
            return nb_set_error(NB_ERR_SHAPE, "meshgrid: tensor %d has shape %s; each must be 0-d or 1-D", i,
                                nb_fmt_shape(ts[i]->ndim, ts[i]->shape, a, sizeof a));
        }
    return NB_OK;
}

nb_status nb_meshgrid(nb_tensor *const *ts, int n, nb_meshgrid_indexing indexing, nb_tensor **out) {
    nb_status st = meshgrid_check(ts, n, indexing, out);
    if (st != NB_OK) return st;
    int pos[NB_MAX_DIMS]; /* the output dim each input runs along */
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < n; i++) pos[i] = i;
    if (indexing == NB_MESHGRID_XY && n >= 2) pos[0] = 1, pos[1] = 0; /* Cartesian: x varies along columns */
    for (int i = 0; i < n; i++) shape[pos[i]] = nb_numel(ts[i]);
    nb_scope *s = nb_op_scope_begin();
    int i = 0;
    for (; i < n; i++) {
        int64_t vs[NB_MAX_DIMS];
        for (int d = 0; d < n; d++) vs[d] = d == pos[i] ? shape[d] : 1;
        nb_tensor *r = nb_expand(nb_reshape(ts[i], n, vs), n, shape);
        if (!r) break;
        nb_retain(r);
        out[i] = r;
    }
    nb_scope_end(s);
    if (i < n) {
        for (int j = 0; j < i; j++) nb_release(out[j]), out[j] = NULL;
        return nb_last_status();
    }
    for (int j = 0; j < n; j++) nb_scope_adopt(out[j]);
    return NB_OK;
}

/* ---- pixel_shuffle / pixel_unshuffle (Shi et al. 2016) -------------------------- */

/* x [*, C, H, W] as [B, C, H, W] (the leading dims flattened into B). */
static bool lead_batch(const char *op, nb_op_id id, nb_tensor *x, int64_t *B) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return false;
    if (x->ndim < 3) {
        nb_set_error(NB_ERR_SHAPE, "%s: expected at least a 3-d input [*, C, H, W], got %d-d", op, x->ndim);
        return false;
    }
    *B = 1;
    for (int i = 0; i < x->ndim - 3; i++) *B *= x->shape[i];
    return true;
}

/* The output's shape: x's leading dims, then c, h, w. */
static nb_tensor *with_lead(nb_tensor *y, const nb_tensor *x, int64_t c, int64_t h, int64_t w) {
    int64_t shape[NB_MAX_DIMS];
    int n = x->ndim - 3;
    for (int i = 0; i < n; i++) shape[i] = x->shape[i];
    shape[n] = c, shape[n + 1] = h, shape[n + 2] = w;
    return nb_reshape(y, n + 3, shape);
}

nb_tensor *nb_pixel_shuffle(nb_tensor *x, int64_t r) {
    int64_t B;
    if (!lead_batch("pixel_shuffle", NB_OP_PIXEL_SHUFFLE, x, &B)) return NULL;
    int64_t C = x->shape[x->ndim - 3], H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    if (r < 1 || C % (r * r))
        return NB_FAIL(NB_ERR_INVALID_ARG, "pixel_shuffle: %lld channels are not divisible by upscale_factor^2 "
                       "(upscale_factor %lld >= 1)", (long long)C, (long long)r);
    nb_scope *s = nb_op_scope_begin();
    int64_t c = C / (r * r);
    nb_tensor *v = nb_reshape(x, 6, (int64_t[]){B, c, r, r, H, W});
    v = nb_permute(v, (int[]){0, 1, 4, 2, 5, 3}); /* [B, c, H, r, W, r] */
    return nb_scope_return(s, with_lead(nb_reshape(nb_contiguous(v), NB_SHAPE(B, c, H * r, W * r)), x, c, H * r, W * r));
}

nb_tensor *nb_pixel_unshuffle(nb_tensor *x, int64_t r) {
    int64_t B;
    if (!lead_batch("pixel_unshuffle", NB_OP_PIXEL_UNSHUFFLE, x, &B)) return NULL;
    int64_t C = x->shape[x->ndim - 3], H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    if (r < 1 || H % r || W % r)
        return NB_FAIL(NB_ERR_INVALID_ARG, "pixel_unshuffle: height %lld and width %lld must be divisible by "
                       "downscale_factor %lld (>= 1)", (long long)H, (long long)W, (long long)r);
    nb_scope *s = nb_op_scope_begin();
    int64_t h = H / r, w = W / r;
    nb_tensor *v = nb_reshape(x, 6, (int64_t[]){B, C, h, r, w, r});
    v = nb_permute(v, (int[]){0, 1, 3, 5, 2, 4}); /* [B, C, r, r, h, w] */
    return nb_scope_return(s, with_lead(nb_reshape(nb_contiguous(v), NB_SHAPE(B, C * r * r, h, w)), x, C * r * r, h, w));
}

nb_tensor *nb_channel_shuffle(nb_tensor *x, int64_t groups) {
    if (!nb_check_inputs("channel_shuffle", 1, &x) || !nb_check_dtypes(NB_OP_CHANNEL_SHUFFLE, 1, &x)) return NULL;
    if (x->ndim < 3)
        return NB_FAIL(NB_ERR_SHAPE, "channel_shuffle: expected at least a 3-d input [N, C, *], got %d-d", x->ndim);
    int64_t N = x->shape[0], C = x->shape[1], rest = N * C != 0 ? nb_numel(x) / (N * C) : 0;
    if (groups < 1 || C % groups)
        return NB_FAIL(NB_ERR_INVALID_ARG, "channel_shuffle: %lld channels are not divisible into %lld groups (>= 1)",
                       (long long)C, (long long)groups);
    nb_scope *s = nb_op_scope_begin(); /* [N, g, C / g, *] -> [N, C / g, g, *] (Zhang et al. 2018, ShuffleNet) */
    nb_tensor *v = nb_transpose(nb_reshape(x, NB_SHAPE(N, groups, C / groups, rest)), 1, 2);
    return nb_scope_return(s, nb_reshape(nb_contiguous(v), x->ndim, x->shape));
}
