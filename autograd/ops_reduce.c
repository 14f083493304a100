/* ops_reduce.c - reductions: sum, mean, amax over dims with keepdim, max
 * along a dim with indices, argmax; forward dispatch and backward rules.
 * Kernels: backend/cpu/reduce.c. Tests: tests/test_ops_reduce.c. */
#include <string.h>

#include "nb_autograd_impl.h"

/* Reduced-dims mask from a dims list (NULL/empty = all). */
static bool dims_mask(const char *op, const nb_tensor *t, const int *dims, int n_dims, bool *mask) {
    memset(mask, 0, sizeof(bool) * NB_MAX_DIMS);
    if (!dims || n_dims == 0) {
        for (int i = 0; i < t->ndim; i++) mask[i] = true;
        return true;
    }
    for (int i = 0; i < n_dims; i++) {
        int d = nb_wrap_dim(dims[i], t->ndim);
        if (d < 0 || t->ndim == 0 || mask[d]) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range or repeated for %d-d input", op, dims[i], t->ndim);
            return false;
        }
        mask[d] = true;
    }
    return true;
}

static void keep_shape(const nb_tensor *t, const bool *mask, int64_t *kshape) {
    for (int i = 0; i < t->ndim; i++) kshape[i] = mask[i] ? 1 : t->shape[i];
}

/* The result as returned: keepdim shape, or with the reduced dims dropped (a view). */
static nb_tensor *final_shape(nb_tensor *k, const bool *mask, bool keepdim) {
    if (keepdim) return k;
    int64_t shape[NB_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < k->ndim; i++)
        if (!mask[i]) shape[nd++] = k->shape[i];
    int64_t strides[NB_MAX_DIMS];
    nb_contiguous_strides(nd, shape, strides);
    return nb_tensor_view_of(k, nd, shape, strides, k->offset);
}

static nb_tensor *reduce_raw(const char *op, nb_reduce_op kop, nb_tensor *t, const bool *mask, double scale) {
    int64_t kshape[NB_MAX_DIMS];
    keep_shape(t, mask, kshape);
    nb_tensor *k = nb_tensor_new(t->ndim, kshape, t->dtype, t->storage->device);
    if (!k) return NULL;
    nb_kview o = nb_kview_of(k), x = nb_kview_of(t);
    (void)op;
    return NB_CALL(t, reduce, kop, &o, &x, scale) == NB_OK ? k : NULL;
}

/* g (output shape) back to the keepdim shape, expanded over the input. */
static nb_tensor *grad_expand(nb_node *n, nb_tensor *g) {
    nb_tensor *in = n->in[0];
    int64_t kshape[NB_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) kshape[i] = n->iarg[i] ? 1 : in->shape[i];
    return nb_expand(nb_reshape(g, in->ndim, kshape), in->ndim, in->shape);
}

static nb_status sum_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *ge = grad_expand(n, n->darg[0] == 1 ? g : nb_mul_scalar(g, n->darg[0]));
    gin[0] = ge ? nb_contiguous(ge) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}

/* amax: the gradient is shared among the elements equal to the maximum. */
static nb_status amax_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *k = n->saved[1];
    bool mask[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) mask[i] = n->iarg[i] != 0;
    nb_tensor *hit = nb_to_dtype(nb_eq(x, k), x->dtype);
    nb_tensor *count = hit ? reduce_raw("max", NB_REDUCE_SUM, hit, mask, 1.0) : NULL;
    gin[0] = nb_div(nb_mul(grad_expand(n, g), hit), count);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *reduce_op(const char *op, nb_reduce_op kop, nb_tensor *t, const int *dims, int n_dims,
                            bool keepdim, bool mean) {
    bool mask[NB_MAX_DIMS];
    if (!nb_check_inputs(op, 1, &t) || !dims_mask(op, t, dims, n_dims, mask)) return NULL;
    if ((mean || kop != NB_REDUCE_SUM) && !nb_check_dtypes(op, 1, &t, true)) return NULL;
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= mask[i] ? t->shape[i] : 1;
    if (kop != NB_REDUCE_SUM && count == 0 && nb_numel(t) == 0)
        return NB_FAIL(NB_ERR_SHAPE, "%s: reducing an empty dimension has no identity", op);
    double scale = mean ? 1.0 / (double)count : 1.0;
    nb_tensor *k = reduce_raw(op, kop, t, mask, scale);
    nb_tensor *out = k ? final_shape(k, mask, keepdim) : NULL;
    bool failed;
    nb_node *n = out ? nb_record(op, kop == NB_REDUCE_SUM ? sum_backward : amax_backward, out, 1, &t, &failed) : NULL;
    if (out && !n && failed) return NULL;
    if (n) {
        for (int i = 0; i < t->ndim; i++) n->iarg[i] = mask[i];
        n->darg[0] = scale;
        if (kop != NB_REDUCE_SUM) nb_save(n, 0, t), nb_save(n, 1, k);
    }
    return out;
}

static nb_tensor *scoped_reduce(const char *op, nb_reduce_op kop, nb_tensor *t, const int *dims, int n_dims,
                                bool keepdim, bool mean) {
    nb_scope *s = nb_scope_begin();
    return nb_scope_return(s, reduce_op(op, kop, t, dims, n_dims, keepdim, mean));
}

nb_tensor *nb_sum(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce("sum", NB_REDUCE_SUM, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_mean(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce("mean", NB_REDUCE_SUM, t, dims, n_dims, keepdim, true);
}
nb_tensor *nb_max(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce("max", NB_REDUCE_MAX, t, dims, n_dims, keepdim, false);
}

/* ---- max along one dim, with indices ------------------------------------- */

/* The gradient goes to the argmax: g * (arange(size) == index) along dim. */
static nb_status max_dim_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *in = n->in[0], *idx = n->saved[0];
    int d = (int)n->iarg[NB_MAX_DIMS];
    int64_t ashape[NB_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) ashape[i] = i == d ? in->shape[d] : 1;
    nb_tensor *ar = nb_reshape(nb_arange(0, (double)in->shape[d], 1, NB_I64), in->ndim, ashape);
    nb_tensor *onehot = nb_to_dtype(nb_eq(ar, idx), in->dtype);
    gin[0] = nb_mul(grad_expand(n, g), onehot);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *argmax_raw(const char *op, nb_tensor *t, int dim, nb_tensor **values) {
    if (!nb_check_inputs(op, 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %d-d input", op, dim, t->ndim);
    if (t->shape[d] == 0) return NB_FAIL(NB_ERR_SHAPE, "%s: dim %d is empty", op, dim);
    int64_t kshape[NB_MAX_DIMS];
    memcpy(kshape, t->shape, sizeof kshape);
    kshape[d] = 1;
    nb_tensor *idx = nb_tensor_new(t->ndim, kshape, NB_I64, t->storage->device);
    nb_tensor *val = values ? nb_tensor_new(t->ndim, kshape, t->dtype, t->storage->device) : NULL;
    if (!idx || (values && !val)) return NULL;
    nb_kview vi = nb_kview_of(idx), vv = val ? nb_kview_of(val) : vi, vx = nb_kview_of(t);
    if (NB_CALL(t, argmax, val ? &vv : NULL, &vi, &vx, d) != NB_OK) return NULL;
    if (values) *values = val;
    return idx;
}

nb_tensor *nb_argmax(nb_tensor *t, int dim, bool keepdim) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *idx = argmax_raw("argmax", t, dim, NULL);
    bool mask[NB_MAX_DIMS] = {0};
    if (idx) mask[nb_wrap_dim(dim, t->ndim)] = true;
    return nb_scope_return(s, idx ? final_shape(idx, mask, keepdim) : NULL);
}

static nb_tensor *max_dim_impl(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices) {
    nb_tensor *val = NULL;
    nb_tensor *idx = argmax_raw("max_dim", t, dim, &val);
    if (!idx) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    bool mask[NB_MAX_DIMS] = {0};
    mask[d] = true;
    nb_tensor *out = final_shape(val, mask, keepdim);
    bool failed;
    nb_node *n = out ? nb_record("max_dim", max_dim_backward, out, 1, &t, &failed) : NULL;
    if (out && !n && failed) return NULL;
    if (n) {
        for (int i = 0; i < t->ndim; i++) n->iarg[i] = mask[i];
        n->iarg[NB_MAX_DIMS] = d;
        nb_save(n, 0, idx);
    }
    if (out && indices) *indices = final_shape(idx, mask, keepdim);
    return out;
}

nb_tensor *nb_max_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices) {
    nb_tensor *idx = NULL;
    nb_scope *s = nb_scope_begin();
    nb_tensor *out = max_dim_impl(t, dim, keepdim, &idx);
    if (!out) idx = NULL;
    nb_retain(idx); /* outlives the op's scope */
    out = nb_scope_return(s, out);
    if (indices) *indices = nb_scope_adopt(idx);
    else nb_release(idx);
    return out;
}
