/* ops_reduce.c - reductions over dims with keepdim: sum, mean, prod,
 * amax/amin, max/min along a dim with indices, argmax/argmin, var/std,
 * vector norms, logsumexp, all/any; forward dispatch and backward rules.
 * Kernels: backend/cpu/reduce.c (reduce, argmax, argmin slots); var, std,
 * logsumexp, all and any are composites of those. Tests:
 * tests/test_ops_reduce.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* Reduced-dims mask from a dims list (NULL/empty = all). */
static bool dims_mask(const char *op, const nb_tensor *t, const int *dims, int n_dims, bool *mask) {
    memset(mask, 0, sizeof(bool) * NB_MAX_DIMS);
    if (!dims || n_dims == 0) {
        for (int i = 0; i < t->ndim; i++) mask[i] = true;
        return true;
    }
    if (t->ndim == 0) { /* PyTorch takes dim 0 or -1 (once) on a 0-d tensor */
        if (n_dims == 1 && (dims[0] == 0 || dims[0] == -1)) return true;
        nb_set_error(NB_ERR_INVALID_ARG, "%s: a 0-d input takes only dim 0 or -1, once", op);
        return false;
    }
    for (int i = 0; i < n_dims; i++) {
        int d = nb_wrap_dim(dims[i], t->ndim);
        if (d < 0 || mask[d]) {
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

/* The keepdim result of the reduce slot, of dtype dt (no autograd). */
static nb_tensor *reduce_raw_dt(nb_reduce_op kop, nb_tensor *t, const bool *mask, double scale, nb_dtype dt) {
    if (!t) return NULL;
    int64_t kshape[NB_MAX_DIMS];
    keep_shape(t, mask, kshape);
    nb_tensor *k = nb_tensor_new(t->ndim, kshape, dt, t->storage->device);
    if (!k) return NULL;
    nb_kview o = nb_kview_of(k), x = nb_kview_of(t);
    return nb_kernel_reduce(NB_BE(t), kop, &o, &x, scale) == NB_OK ? k : NULL;
}

static nb_tensor *reduce_raw(const char *op, nb_reduce_op kop, nb_tensor *t, const bool *mask, double scale) {
    (void)op;
    return t ? reduce_raw_dt(kop, t, mask, scale, t->dtype) : NULL;
}


/* g (output shape) back to the keepdim shape, expanded over the input. */
static nb_tensor *grad_expand(nb_node *n, nb_tensor *g) {
    nb_tensor *in = n->in[0];
    int64_t kshape[NB_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) kshape[i] = n->p.reduce.reduced[i] ? 1 : in->shape[i];
    return nb_expand(nb_reshape(g, in->ndim, kshape), in->ndim, in->shape);
}

nb_status nb_bw_sum(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *ge = grad_expand(n, n->p.reduce.scale == 1 ? g : nb_mul_scalar(g, n->p.reduce.scale));
    gin[0] = ge ? nb_contiguous(ge) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}

/* The saved result (slot 1; its own output, so connected under
 * create_graph) viewed in the keepdim shape of the input (slot 0). */
static nb_tensor *saved_keepdim(nb_node *n) {
    nb_tensor *x = n->saved[0];
    int64_t kshape[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) kshape[i] = n->p.reduce.reduced[i] ? 1 : x->shape[i];
    return nb_reshape(n->saved[1], x->ndim, kshape);
}

/* amax: the gradient is shared among the elements equal to the maximum. */
nb_status nb_bw_amax(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *k = saved_keepdim(n);
    bool mask[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) mask[i] = n->p.reduce.reduced[i];
    nb_tensor *hit = nb_to_dtype(nb_eq(x, k), x->dtype);
    nb_tensor *count = hit ? reduce_raw("max", NB_REDUCE_SUM, hit, mask, 1.0) : NULL;
    gin[0] = nb_div(nb_mul(grad_expand(n, g), hit), count);
    return gin[0] ? NB_OK : nb_last_status();
}

/* The product of the other elements of each reduced slice, exactly (no
 * division): the reduced dims are moved last and flattened to R, and the
 * exclusive prefix and suffix products (cumprod, shifted by a constant pad
 * of 1) multiply. */
static nb_tensor *prod_of_others(nb_tensor *x, const bool *mask) {
    int perm[NB_MAX_DIMS], inv[NB_MAX_DIMS], k = 0;
    int64_t shape[NB_MAX_DIMS], r = 1;
    for (int i = 0; i < x->ndim; i++)
        if (!mask[i]) perm[k] = i, shape[k++] = x->shape[i];
    int kept = k;
    for (int i = 0; i < x->ndim; i++)
        if (mask[i]) perm[k++] = i, r *= x->shape[i];
    for (int i = 0; i < x->ndim; i++) inv[perm[i]] = i;
    shape[kept] = r;
    nb_tensor *xp = nb_permute(x, perm);
    nb_tensor *flat = nb_reshape(xp, kept + 1, shape);
    const int64_t shift[2] = {1, -1}; /* [a, b, c] -> [1, a, b] */
    int last = -1;
    nb_tensor *left = nb_pad(nb_cumprod(flat, -1), shift, 2, NB_PAD_CONSTANT, 1.0);
    nb_tensor *right = nb_flip(nb_pad(nb_cumprod(nb_flip(flat, &last, 1), -1), shift, 2, NB_PAD_CONSTANT, 1.0), &last, 1);
    nb_tensor *others = nb_mul(left, right);
    return xp ? nb_permute(nb_reshape(others, xp->ndim, xp->shape), inv) : NULL;
}

/* prod: g * out / x (PyTorch's prod_backward) where the slice holds no 0,
 * inf or NaN and the product neither overflowed nor underflowed; elsewhere
 * g * (the product of the others), which is exact
 * with zeros (one zero: the others' product at it, 0 elsewhere) and stays
 * right beside inf or NaN, where out / x is NaN (PyTorch 1.13 gives NaN
 * for the gradient of the inf in prod([inf, 2, 3]); the answer is 6). */
nb_status nb_bw_prod(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *k = saved_keepdim(n);
    bool mask[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) mask[i] = n->p.reduce.reduced[i];
    if (nb_numel(x) == 0) return (gin[0] = nb_zeros_like(x)) ? NB_OK : nb_last_status();
    nb_tensor *special = nb_logical_or(nb_eq_scalar(x, 0), nb_logical_not(nb_isfinite(x)));
    nb_tensor *cnt = special ? reduce_raw("prod", NB_REDUCE_SUM, nb_to_dtype(special, x->dtype), mask, 1.0) : NULL;
    nb_tensor *ge = grad_expand(n, g);
    /* divided by 1 where x is special: those slices take `exact`, and a
     * double backward through where() must not meet 0 * inf there */
    nb_tensor *plain = nb_div(nb_mul(ge, k), nb_where(special, nb_scalar_like(x, 1, x->dtype), x));
    nb_tensor *exact = nb_mul(ge, prod_of_others(x, mask));
    /* out / x is also wrong where the product over- or underflowed while the others' product need not */
    nb_tensor *ok = cnt ? nb_logical_and(nb_eq_scalar(cnt, 0), nb_logical_and(nb_isfinite(k), nb_ne_scalar(k, 0)))
                        : NULL;
    gin[0] = ok ? nb_where(ok, plain, exact) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *reduce_op(nb_op_id id, nb_reduce_op kop, nb_tensor *t, const int *dims, int n_dims,
                            bool keepdim, bool mean) {
    const char *op = nb_op_name(id);
    bool mask[NB_MAX_DIMS];
    if (!nb_check_inputs(op, 1, &t) || !dims_mask(op, t, dims, n_dims, mask)) return NULL;
    if (!nb_check_dtypes(id, 1, &t)) return NULL; /* max/min/sum/prod take integers too */
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= mask[i] ? t->shape[i] : 1;
    if ((kop == NB_REDUCE_MAX || kop == NB_REDUCE_MIN) && count == 0 && nb_numel(t) == 0)
        return NB_FAIL(NB_ERR_SHAPE, "%s: reducing an empty dimension has no identity", op);
    double scale = mean ? 1.0 / (double)count : 1.0;
    /* integer and bool sum and prod are int64, as PyTorch */
    nb_dtype odt = (kop == NB_REDUCE_PROD || (kop == NB_REDUCE_SUM && !mean)) && !nb_dtype_is_float(t->dtype) ? NB_I64 : t->dtype;
    nb_tensor *k = reduce_raw_dt(kop, t, mask, scale, odt);
    nb_tensor *out = k ? final_shape(k, mask, keepdim) : NULL;
    bool failed;
    nb_node *n = out ? nb_record(id, out, 1, &t, &failed) : NULL;
    if (out && !n && failed) return NULL;
    if (n) {
        for (int i = 0; i < t->ndim; i++) n->p.reduce.reduced[i] = mask[i];
        n->p.reduce.scale = scale;
        if (kop != NB_REDUCE_SUM) nb_save(n, 0, t), nb_save(n, 1, out);
    }
    return out;
}

static nb_tensor *scoped_reduce(nb_op_id id, nb_reduce_op kop, nb_tensor *t, const int *dims, int n_dims,
                                bool keepdim, bool mean) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, reduce_op(id, kop, t, dims, n_dims, keepdim, mean));
}

nb_tensor *nb_sum(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    if (!nb_autocast_inputs(NB_OP_SUM, 1, &t)) return NULL; /* on PyTorch's float32 list */
    return scoped_reduce(NB_OP_SUM, NB_REDUCE_SUM, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_mean(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_MEAN, NB_REDUCE_SUM, t, dims, n_dims, keepdim, true);
}
nb_tensor *nb_max(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_MAX, NB_REDUCE_MAX, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_min(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_MIN, NB_REDUCE_MIN, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_amax(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_AMAX, NB_REDUCE_MAX, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_amin(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_AMIN, NB_REDUCE_MIN, t, dims, n_dims, keepdim, false);
}
nb_tensor *nb_prod(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    return scoped_reduce(NB_OP_PROD, NB_REDUCE_PROD, t, dims, n_dims, keepdim, false);
}

/* ---- max along one dim, with indices ------------------------------------- */

/* The gradient goes to the argmax: g * (arange(size) == index) along dim. */
nb_status nb_bw_max_dim(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *in = n->in[0], *idx = n->saved[0];
    int d = n->p.reduce.dim;
    int64_t ashape[NB_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) ashape[i] = i == d ? in->shape[d] : 1;
    nb_tensor *ar = nb_reshape(nb_arange_on(0, (double)in->shape[d], 1, NB_I64, in->storage->device), in->ndim, ashape);
    nb_tensor *onehot = nb_to_dtype(nb_eq(ar, idx), in->dtype);
    gin[0] = nb_mul(grad_expand(n, g), onehot);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *argmax_raw(const char *op, nb_tensor *t, int dim, nb_tensor **values, bool min) {
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
    nb_status st = min ? nb_kernel_argmin(NB_BE(t), val ? &vv : NULL, &vi, &vx, d)
                       : nb_kernel_argmax(NB_BE(t), val ? &vv : NULL, &vi, &vx, d);
    if (st != NB_OK) return NULL;
    if (values) *values = val;
    return idx;
}

/* A 0-d input with dim 0 or -1 (PyTorch accepts it) runs as a [1] view. */
static nb_tensor *as_1d(nb_tensor *t, int *dim, bool *keepdim) {
    if (!t || t->ndim != 0 || (*dim != 0 && *dim != -1)) return t;
    *dim = 0, *keepdim = false;
    return nb_reshape(t, 1, (int64_t[]){1});
}

static nb_tensor *arg_op(const char *op, nb_tensor *t, int dim, bool keepdim, bool min) {
    nb_scope *s = nb_op_scope_begin();
    t = as_1d(t, &dim, &keepdim);
    nb_tensor *idx = argmax_raw(op, t, dim, NULL, min);
    bool mask[NB_MAX_DIMS] = {0};
    if (idx) mask[nb_wrap_dim(dim, t->ndim)] = true;
    return nb_scope_return(s, idx ? final_shape(idx, mask, keepdim) : NULL);
}
nb_tensor *nb_argmax(nb_tensor *t, int dim, bool keepdim) { return arg_op("argmax", t, dim, keepdim, false); }
nb_tensor *nb_argmin(nb_tensor *t, int dim, bool keepdim) { return arg_op("argmin", t, dim, keepdim, true); }

static nb_tensor *max_dim_impl(nb_op_id id, nb_tensor *t, int dim, bool keepdim, nb_tensor **indices, bool min) {
    const char *op = nb_op_name(id);
    nb_tensor *val = NULL;
    nb_tensor *idx = argmax_raw(op, t, dim, &val, min);
    if (!idx) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    bool mask[NB_MAX_DIMS] = {0};
    mask[d] = true;
    nb_tensor *out = final_shape(val, mask, keepdim);
    bool failed;
    nb_node *n = out ? nb_record(id, out, 1, &t, &failed) : NULL;
    if (out && !n && failed) return NULL;
    if (n) {
        for (int i = 0; i < t->ndim; i++) n->p.reduce.reduced[i] = mask[i];
        n->p.reduce.dim = d;
        nb_save(n, 0, idx);
    }
    if (out && indices) *indices = final_shape(idx, mask, keepdim);
    return out;
}

static nb_tensor *extreme_dim(nb_op_id id, nb_tensor *t, int dim, bool keepdim, nb_tensor **indices, bool min) {
    nb_tensor *idx = NULL;
    nb_scope *s = nb_op_scope_begin();
    t = as_1d(t, &dim, &keepdim);
    nb_tensor *out = max_dim_impl(id, t, dim, keepdim, &idx, min);
    if (!out) idx = NULL;
    nb_retain(idx); /* outlives the op's scope */
    out = nb_scope_return(s, out);
    if (indices) *indices = nb_scope_adopt(idx);
    else nb_release(idx);
    return out;
}

nb_tensor *nb_max_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices) {
    return extreme_dim(NB_OP_MAX_DIM, t, dim, keepdim, indices, false);
}
nb_tensor *nb_min_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices) {
    return extreme_dim(NB_OP_MIN_DIM, t, dim, keepdim, indices, true);
}

/* ---- var, std, logsumexp, all, any (composites) --------------------------- */

/* Elements per output of the reduction (product of the reduced sizes). */
static int64_t reduced_count(const nb_tensor *t, const bool *mask) {
    int64_t c = 1;
    for (int i = 0; i < t->ndim; i++) c *= mask[i] ? t->shape[i] : 1;
    return c;
}

/* Checks a float input and its dims; fills mask. */
static bool float_dims(nb_op_id id, nb_tensor *t, const int *dims, int n_dims, bool *mask) {
    const char *op = nb_op_name(id);
    return nb_check_inputs(op, 1, &t) && nb_check_dtypes(id, 1, &t) && dims_mask(op, t, dims, n_dims, mask);
}

/* sum((x - mean)^2) / max(0, N - correction): torch.var's definition (two
 * passes, so no cancellation); N - correction <= 0 gives inf or NaN, as PyTorch. */
static nb_tensor *var_impl(nb_op_id id, nb_tensor *t, const int *dims, int n_dims, double correction,
                           bool keepdim) {
    bool mask[NB_MAX_DIMS];
    if (!float_dims(id, t, dims, n_dims, mask)) return NULL;
    double dof = (double)reduced_count(t, mask) - correction;
    nb_tensor *d = nb_sub(t, nb_mean(t, dims, n_dims, true));
    return nb_mul_scalar(nb_sum(nb_mul(d, d), dims, n_dims, keepdim), 1.0 / (dof > 0 ? dof : 0.0));
}

nb_tensor *nb_var(nb_tensor *t, const int *dims, int n_dims, double correction, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, var_impl(NB_OP_VAR, t, dims, n_dims, correction, keepdim));
}
/* std = sqrt(var) with PyTorch's std_backward: g / (2 std), masked to 0
 * where std == 0 (sqrt's own rule would give inf * 0 = NaN there). */
nb_status nb_bw_std(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *y = n->saved[0];
    nb_tensor *d = nb_div(g, nb_mul_scalar(y, 2.0));
    gin[0] = d ? nb_where(nb_eq_scalar(y, 0), nb_scalar_like(d, 0, d->dtype), d) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *std_impl(nb_tensor *t, const int *dims, int n_dims, double correction, bool keepdim) {
    nb_tensor *v = var_impl(NB_OP_STD, t, dims, n_dims, correction, keepdim), *y;
    if (!v) return NULL;
    bool prev = nb_set_grad_enabled(false);
    y = nb_sqrt(v);
    nb_set_grad_enabled(prev);
    if (!y) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_STD, y, 1, &v, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, y);
    return y;
}

nb_tensor *nb_std(nb_tensor *t, const int *dims, int n_dims, double correction, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, std_impl(t, dims, n_dims, correction, keepdim));
}

/* log(sum(exp(x - m))) + m with m the (constant) max, set to 0 where it is
 * infinite as PyTorch does; the gradient of this composite is softmax(x).
 * An empty reduction gives -inf (log 0), as torch.logsumexp. */
static nb_tensor *logsumexp_impl(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    bool mask[NB_MAX_DIMS];
    if (!float_dims(NB_OP_LOGSUMEXP, t, dims, n_dims, mask)) return NULL;
    nb_tensor *m;
    if (reduced_count(t, mask) == 0) {
        int64_t kshape[NB_MAX_DIMS];
        keep_shape(t, mask, kshape);
        m = nb_full_on(t->ndim, kshape, 0, t->dtype, t->storage->device);
    } else {
        m = reduce_raw("logsumexp", NB_REDUCE_MAX, t, mask, 1.0);
        m = nb_masked_fill(m, nb_eq(m, nb_scalar_like(t, INFINITY, t->dtype)), 0);
        m = nb_masked_fill(m, nb_eq(m, nb_scalar_like(t, -INFINITY, t->dtype)), 0);
    }
    if (!m) return NULL;
    nb_tensor *se = nb_sum(nb_exp(nb_sub(t, m)), dims, n_dims, keepdim);
    return nb_add(nb_log(se), final_shape(m, mask, keepdim));
}

nb_tensor *nb_logsumexp(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, logsumexp_impl(t, dims, n_dims, keepdim));
}

/* all = min and any = max of (x != 0) as uint8, then bool; an empty
 * reduction gives true (all) / false (any), as PyTorch. */
static nb_tensor *logic_impl(const char *op, nb_tensor *t, const int *dims, int n_dims, bool keepdim, bool all) {
    bool mask[NB_MAX_DIMS];
    if (!nb_check_inputs(op, 1, &t) || !dims_mask(op, t, dims, n_dims, mask)) return NULL;
    nb_tensor *k;
    if (reduced_count(t, mask) == 0) {
        int64_t kshape[NB_MAX_DIMS];
        keep_shape(t, mask, kshape);
        k = nb_full_on(t->ndim, kshape, all ? 1 : 0, NB_BOOL, t->storage->device);
    } else {
        nb_tensor *nz = nb_to_dtype(nb_ne(t, nb_scalar_like(t, 0, t->dtype)), NB_U8);
        k = nb_to_dtype(reduce_raw(op, all ? NB_REDUCE_MIN : NB_REDUCE_MAX, nz, mask, 1.0), NB_BOOL);
    }
    return k ? final_shape(k, mask, keepdim) : NULL;
}

nb_tensor *nb_all(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, logic_impl("all", t, dims, n_dims, keepdim, true));
}
nb_tensor *nb_any(nb_tensor *t, const int *dims, int n_dims, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, logic_impl("any", t, dims, n_dims, keepdim, false));
}

/* ---- vector norm ------------------------------------------------------------ */

/* sign(x) in x's dtype: 1, -1, or 0 at 0. */
static nb_tensor *sign_of(nb_tensor *x) {
    nb_tensor *z = nb_scalar_like(x, 0, x->dtype);
    return nb_sub(nb_to_dtype(nb_gt(x, z), x->dtype), nb_to_dtype(nb_gt(z, x), x->dtype));
}
static nb_tensor *abs_of(nb_tensor *x) { return nb_mul(x, sign_of(x)); }

/* torch.linalg.vector_norm's backward (PyTorch's norm_backward):
 * p finite: g sign(x) |x|^(p-1) / n^(p-1), 0 where n == 0 (masked, so the
 * 2-norm of zeros has gradient 0); p = +-inf: g sign(x) shared evenly
 * among the elements with |x| == n. */
nb_status nb_bw_norm(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *k = saved_keepdim(n);
    double p = n->p.reduce.p;
    bool mask[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) mask[i] = n->p.reduce.reduced[i];
    nb_tensor *ge = grad_expand(n, g), *sg = sign_of(x);
    if (isinf(p)) {
        nb_tensor *hit = nb_to_dtype(nb_eq(abs_of(x), k), x->dtype);
        nb_tensor *count = reduce_raw("norm", NB_REDUCE_SUM, hit, mask, 1.0);
        gin[0] = nb_div(nb_mul(nb_mul(ge, sg), hit), count);
    } else if (p == 1) {
        gin[0] = nb_mul(ge, sg);
    } else {
        nb_tensor *num = p == 2 ? x : nb_mul(sg, nb_pow_scalar(abs_of(x), p - 1));
        nb_tensor *den = p == 2 ? k : nb_pow_scalar(k, p - 1);
        nb_tensor *r = nb_masked_fill(nb_div(num, den), nb_eq(k, nb_scalar_like(k, 0, k->dtype)), 0);
        gin[0] = nb_mul(ge, r);
    }
    return gin[0] ? NB_OK : nb_last_status();
}

/* The keepdim norm, no autograd. */
static nb_tensor *norm_raw(nb_tensor *t, double p, const bool *mask) {
    if (isinf(p)) return reduce_raw("norm", p > 0 ? NB_REDUCE_MAX : NB_REDUCE_MIN, abs_of(t), mask, 1.0);
    if (p == 1) return reduce_raw("norm", NB_REDUCE_SUM, abs_of(t), mask, 1.0);
    if (p == 2) return nb_sqrt(reduce_raw("norm", NB_REDUCE_SUM, nb_mul(t, t), mask, 1.0));
    nb_tensor *s = reduce_raw("norm", NB_REDUCE_SUM, nb_pow_scalar(abs_of(t), p), mask, 1.0);
    return nb_pow_scalar(s, 1.0 / p);
}

static nb_tensor *norm_impl(nb_tensor *t, double p, const int *dims, int n_dims, bool keepdim) {
    bool mask[NB_MAX_DIMS];
    if (!float_dims(NB_OP_NORM, t, dims, n_dims, mask)) return NULL;
    if (!(p >= 1) && p != -INFINITY)
        return NB_FAIL(NB_ERR_INVALID_ARG, "norm: p = %g is not supported (p >= 1, inf or -inf)", p);
    if (isinf(p) && reduced_count(t, mask) == 0 && nb_numel(t) == 0)
        return NB_FAIL(NB_ERR_SHAPE, "norm: the inf norm of an empty dimension is undefined");
    nb_tensor *k;
    NB_NO_GRAD { k = norm_raw(t, p, mask); }
    nb_tensor *out = k ? final_shape(k, mask, keepdim) : NULL;
    bool failed;
    nb_node *n = out ? nb_record(NB_OP_NORM, out, 1, &t, &failed) : NULL;
    if (out && !n && failed) return NULL;
    if (n) {
        for (int i = 0; i < t->ndim; i++) n->p.reduce.reduced[i] = mask[i];
        n->p.reduce.p = p;
        nb_save(n, 0, t), nb_save(n, 1, out);
    }
    return out;
}

nb_tensor *nb_norm(nb_tensor *t, double p, const int *dims, int n_dims, bool keepdim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, norm_impl(t, p, dims, n_dims, keepdim));
}
