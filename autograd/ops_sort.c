/* ops_sort.c - sort, argsort, topk and kthvalue with PyTorch's semantics,
 * all on the backend's one stable sort slot, which writes the first k
 * entries of each line's sorted order (k = size for sort). Every sort is
 * stable, which satisfies both of PyTorch's stable=True and stable=False;
 * NaN sorts as larger than any number. The values' gradient goes back to
 * the source positions: a scatter of g by the indices into zeros (a
 * permutation of distinct positions per line, so the result is exact and
 * deterministic; nb_scatter is itself differentiable, so double backward
 * works). Kernels: backend/cpu/sort.c. Tests: tests/test_ops_sort.c. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* saved[0]: indices; p.axis.dim. gx = zeros(x).scatter(dim, indices, g). */
nb_status nb_bw_sort(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_scatter(nb_zeros_like(n->in[0]), n->p.axis.dim, n->saved[0], g);
    return gin[0] ? NB_OK : nb_last_status();
}

/* The first k of x's stable sorted order along dim into *values (may be
 * NULL: not computed, no node) and *indices; x has >= 1 dim. */
static nb_status sort_raw(nb_op_id id, nb_tensor *x, int d, bool descending, int64_t k, nb_tensor **values,
                          nb_tensor **indices) {
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = k;
    nb_device dev = x->storage->device;
    nb_tensor *idx = nb_tensor_new(x->ndim, shape, NB_I64, dev);
    nb_tensor *val = values ? nb_tensor_new(x->ndim, shape, x->dtype, dev) : NULL;
    if (!idx || (values && !val)) return nb_last_status();
    nb_kview vi = nb_kview_of(idx), vv = val ? nb_kview_of(val) : vi, vx = nb_kview_of(x);
    if (nb_kernel_sort(NB_BE(x), val ? &vv : NULL, &vi, &vx, d, descending) != NB_OK) return nb_last_status();
    *indices = idx;
    if (!values) return NB_OK;
    *values = val;
    bool failed;
    nb_node *n = nb_record(id, val, 1, &x, &failed);
    if (failed) return nb_last_status();
    if (n) {
        n->p.axis.dim = d;
        nb_save(n, 0, idx);
    }
    return NB_OK;
}

/* Validates x and dim; a 0-d x becomes a [1] view (reshape carries the
 * gradient). Returns the wrapped dim, or -1 with the error set. */
static int prepare(const char *op, nb_tensor **x, int dim) {
    if (!nb_check_inputs(op, 1, x)) return -1;
    char b[NB_SHAPE_BUF];
    int d = nb_wrap_dim(dim, (*x)->ndim);
    if (d < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for input %s", op, dim,
                     nb_fmt_shape((*x)->ndim, (*x)->shape, b, sizeof b));
        return -1;
    }
    if ((*x)->ndim == 0 && !(*x = nb_reshape(*x, NB_SHAPE(1)))) return -1;
    return d;
}

/* Ends the op's scope keeping the requested outputs (either may be NULL). */
static nb_status finish(nb_scope *s, nb_status st, nb_tensor *val, nb_tensor *idx, nb_tensor **values,
                        nb_tensor **indices) {
    if (st != NB_OK) val = idx = NULL;
    if (values) nb_retain(val);
    if (indices) nb_retain(idx);
    nb_scope_end(s);
    if (values) *values = nb_scope_adopt(val);
    if (indices) *indices = nb_scope_adopt(idx);
    return st;
}

/* Output shape of a 0-d input: back to 0-d. */
static nb_tensor *unpromote(nb_tensor *t, int orig_ndim) {
    return t && orig_ndim == 0 ? nb_reshape(t, 0, NULL) : t;
}

static nb_status sort_impl(nb_tensor *x, int dim, bool descending, nb_tensor **val, nb_tensor **idx) {
    int nd = x ? x->ndim : 0;
    int d = prepare("sort", &x, dim);
    if (d < 0) return nb_last_status();
    nb_status st = sort_raw(NB_OP_SORT, x, d, descending, x->shape[d], val, idx);
    if (st != NB_OK) return st;
    if (val && !(*val = unpromote(*val, nd))) return nb_last_status();
    return (*idx = unpromote(*idx, nd)) ? NB_OK : nb_last_status();
}

nb_status nb_sort(nb_tensor *x, int dim, bool descending, bool stable, nb_tensor **values, nb_tensor **indices) {
    (void)stable; /* always stable */
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *val = NULL, *idx = NULL;
    nb_status st = sort_impl(x, dim, descending, values ? &val : NULL, &idx);
    return finish(s, st, val, idx, values, indices);
}

nb_tensor *nb_argsort(nb_tensor *x, int dim, bool descending) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *idx = NULL;
    return nb_scope_return(s, sort_impl(x, dim, descending, NULL, &idx) == NB_OK ? idx : NULL);
}

static nb_status topk_impl(nb_tensor *x, int64_t k, int dim, bool largest, nb_tensor **val, nb_tensor **idx) {
    int nd = x ? x->ndim : 0;
    int d = prepare("topk", &x, dim);
    if (d < 0) return nb_last_status();
    if (k < 0 || k > x->shape[d])
        return nb_set_error(NB_ERR_INVALID_ARG, "topk: k (%lld) out of range [0, %lld] for dim %d", (long long)k,
                            (long long)x->shape[d], dim);
    nb_status st = sort_raw(NB_OP_TOPK, x, d, largest, k, val, idx);
    if (st != NB_OK) return st;
    if (val && !(*val = unpromote(*val, nd))) return nb_last_status();
    return (*idx = unpromote(*idx, nd)) ? NB_OK : nb_last_status();
}

nb_status nb_topk(nb_tensor *x, int64_t k, int dim, bool largest, bool sorted, nb_tensor **values,
                  nb_tensor **indices) {
    (void)sorted; /* always sorted (PyTorch leaves the order unspecified otherwise) */
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *val = NULL, *idx = NULL;
    nb_status st = topk_impl(x, k, dim, largest, values ? &val : NULL, &idx);
    return finish(s, st, val, idx, values, indices);
}

/* The k smallest in order, then the last of them: its gradient flows
 * through narrow into sort's. */
static nb_status kthvalue_impl(nb_tensor *x, int64_t k, int dim, bool keepdim, nb_tensor **val, nb_tensor **idx) {
    int nd = x ? x->ndim : 0;
    int d = prepare("kthvalue", &x, dim);
    if (d < 0) return nb_last_status();
    if (k < 1 || k > x->shape[d])
        return nb_set_error(NB_ERR_INVALID_ARG, "kthvalue: k (%lld) out of range [1, %lld] for dim %d",
                            (long long)k, (long long)x->shape[d], dim);
    nb_status st = sort_raw(NB_OP_KTHVALUE, x, d, false, k, val, idx);
    if (st != NB_OK) return st;
    bool squeeze = !keepdim || nd == 0;
    nb_tensor **outs[2] = {val, idx};
    for (int i = 0; i < 2; i++) {
        if (!outs[i]) continue;
        nb_tensor *t = nb_narrow(*outs[i], d, k - 1, 1);
        if (!(*outs[i] = squeeze ? nb_squeeze(t, d) : t)) return nb_last_status();
    }
    return NB_OK;
}

nb_status nb_kthvalue(nb_tensor *x, int64_t k, int dim, bool keepdim, nb_tensor **values, nb_tensor **indices) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *val = NULL, *idx = NULL;
    nb_status st = kthvalue_impl(x, k, dim, keepdim, values ? &val : NULL, &idx);
    return finish(s, st, val, idx, values, indices);
}

/* ---- searchsorted / bucketize / histc ------------------------------------------------------ */

/* For each value, how many boundaries lie below it (< for the left side,
 * <= for the right): PyTorch's insertion index. A comparison of every
 * value with every boundary of its row, summed: O(values x boundaries)
 * work, on any backend, exact in any dtype. */
static nb_tensor *insertion_index(const char *op, nb_op_id id, nb_tensor *seq, nb_tensor *values, bool out_int32,
                                  bool right, nb_tensor *sorter) {
    nb_tensor *in[3] = {seq, values, sorter};
    if (!nb_check_inputs(op, sorter ? 3 : 2, in) || !nb_check_dtypes(id, 1, &in[0]) || !nb_check_dtypes(id, 1, &in[1]))
        return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    bool rows = seq->ndim > 1; /* N-D boundaries: one sorted row per leading index of values */
    if (seq->ndim == 0 || (rows && (values->ndim != seq->ndim ||
                                    memcmp(seq->shape, values->shape, sizeof(int64_t) * (size_t)(seq->ndim - 1)))))
        return NB_FAIL(NB_ERR_SHAPE, "%s: boundaries %s must be 1-D, or share all but the last dim with values %s", op,
                       nb_fmt_shape(seq->ndim, seq->shape, a, sizeof a), nb_fmt_shape(values->ndim, values->shape, b, sizeof b));
    if (sorter && (sorter->dtype != NB_I64 || sorter->ndim != seq->ndim ||
                   memcmp(sorter->shape, seq->shape, sizeof(int64_t) * (size_t)seq->ndim)))
        return NB_FAIL(NB_ERR_SHAPE, "%s: sorter must be int64 of the boundaries' shape %s", op,
                       nb_fmt_shape(seq->ndim, seq->shape, a, sizeof a));
    nb_scope *s = nb_op_scope_begin();
    in[0] = nb_detach(seq), in[1] = nb_detach(values);
    if (!nb_promote_inputs(2, in, nb_result_type(seq, values))) return nb_scope_return(s, NULL);
    seq = in[0], values = in[1];
    nb_tensor *sorted = sorter ? nb_gather(seq, seq->ndim - 1, sorter) : seq;
    nb_tensor *v = nb_unsqueeze(values, -1);                   /* [..., M, 1] */
    nb_tensor *bnd = rows ? nb_unsqueeze(sorted, -2) : sorted; /* [..., 1, B] or [B] */
    nb_tensor *below = right ? nb_le(bnd, v) : nb_lt(bnd, v);
    nb_tensor *r = nb_sum(below, (int[]){-1}, 1, false); /* int64 */
    if (r && out_int32) r = nb_to_dtype(r, NB_I32);
    return nb_scope_return(s, r);
}

nb_tensor *nb_searchsorted(nb_tensor *sorted_sequence, nb_tensor *values, bool out_int32, bool right,
                           nb_tensor *sorter) {
    return insertion_index("searchsorted", NB_OP_SEARCHSORTED, sorted_sequence, values, out_int32, right, sorter);
}

nb_tensor *nb_bucketize(nb_tensor *input, nb_tensor *boundaries, bool out_int32, bool right) {
    if (boundaries && boundaries->ndim != 1) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "bucketize: boundaries must be 1-D, got %s",
                       nb_fmt_shape(boundaries->ndim, boundaries->shape, a, sizeof a));
    }
    return insertion_index("bucketize", NB_OP_BUCKETIZE, boundaries, input, out_int32, right, NULL);
}

/* As PyTorch's histc (linear bins, no local search): an element in
 * [min, max] goes to bin trunc((x - min) * bins / (max - min)), computed in
 * x's dtype, max itself to the last bin; the counts are one deterministic
 * index_add of ones (elements outside, and NaN, into a dropped extra bin). */
nb_tensor *nb_histc(nb_tensor *input, int64_t bins, double min, double max) {
    if (!nb_check_inputs("histc", 1, &input) || !nb_check_dtypes(NB_OP_HISTC, 1, &input)) return NULL;
    if (bins < 1 || bins >= INT64_MAX / 2) return NB_FAIL(NB_ERR_INVALID_ARG, "histc: bins %lld must be positive", (long long)bins);
    if (!isfinite(min) || !isfinite(max))
        return NB_FAIL(NB_ERR_INVALID_ARG, "histc: range [%g, %g] is not finite", min, max);
    if (min > max) return NB_FAIL(NB_ERR_INVALID_ARG, "histc: max %g must be larger than min %g", max, min);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = nb_reshape(nb_detach(input), NB_SHAPE(-1));
    if (x && min == 0 && max == 0 && nb_numel(x) > 0) { /* the data's range (reads it back) */
        min = nb_item(nb_amin(x, NULL, 0, false));
        max = nb_item(nb_amax(x, NULL, 0, false));
        if (!isfinite(min) || !isfinite(max)) {
            nb_scope_end(s);
            return NB_FAIL(NB_ERR_INVALID_ARG, "histc: range of values [%g, %g] is not finite", min, max);
        }
    }
    if (min == max) min -= 1, max += 1;
    nb_tensor *lo = x ? nb_scalar_like(x, min, x->dtype) : NULL, *hi = x ? nb_scalar_like(x, max, x->dtype) : NULL;
    nb_tensor *width = lo && hi ? nb_sub(hi, lo) : NULL;
    nb_tensor *pos = nb_to_dtype(nb_div(nb_mul_scalar(nb_sub(x, lo), (double)bins), width), NB_I64);
    nb_tensor *last = x ? nb_scalar_like(x, (double)(bins - 1), NB_I64) : NULL;
    nb_tensor *outside = x ? nb_scalar_like(x, (double)bins, NB_I64) : NULL;
    pos = nb_minimum(pos, last);
    nb_tensor *in_range = nb_logical_and(nb_ge(x, lo), nb_le(x, hi));
    pos = nb_where(in_range, pos, outside);
    nb_tensor *counts = x ? nb_full_on(NB_SHAPE(bins + 1), 0, x->dtype, x->storage->device) : NULL;
    counts = nb_index_add(counts, 0, pos, x ? nb_ones_like(x) : NULL, 1.0);
    return nb_scope_return(s, counts ? nb_narrow(counts, 0, 0, bins) : NULL);
}
