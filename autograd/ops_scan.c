/* ops_scan.c - cumulative ops along one dim: cumsum, cumprod, cummax,
 * cummin, logcumsumexp; forward through the backend's scan slot and one
 * backward rule through its scan_backward slot (reverse cumsum, PyTorch's
 * cumprod_backward exact with zeros, an ordered scatter to the cummax/cummin
 * indices, the stable logcumsumexp gradient). Kernels: backend/cpu/scan.c.
 * Tests: tests/test_ops_scan.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* A kernel view with at least one dim (a 0-d tensor scans as [1]). */
static nb_kview kv1(const nb_tensor *t) {
    nb_kview v = nb_kview_of(t);
    if (v.ndim == 0) v.ndim = 1, v.shape[0] = 1, v.strides[0] = 1;
    return v;
}

/* cumprod's gradient as recorded ops, exact with zeros (create_graph):
 * gx_i = prod_{j<i} x_j * sum_{k>=i} g_k prod_{i<j<=k} x_j, the inner
 * products from a cumprod over an [.., R, R] matrix (x_j where j > i,
 * else 1), with x's dim d moved last. Quadratic in the scanned length. */
static nb_tensor *cumprod_grad_ops(nb_tensor *g, nb_tensor *x, int d) {
    int last = -1;
    nb_tensor *xp = nb_movedim(x, &d, &last, 1), *gp = nb_movedim(g, &d, &last, 1);
    if (!xp || !gp) return NULL;
    int nd = xp->ndim;
    int64_t r = xp->shape[nd - 1], sq[NB_MAX_DIMS];
    memcpy(sq, xp->shape, sizeof(int64_t) * (size_t)nd);
    sq[nd] = r; /* [.., R (i), R (j or k)] */
    nb_device dev = x->storage->device;
    nb_tensor *i = nb_reshape(nb_arange_on(0, (double)r, 1, NB_I64, dev), NB_SHAPE(r, 1));
    nb_tensor *j = nb_reshape(nb_arange_on(0, (double)r, 1, NB_I64, dev), NB_SHAPE(1, r));
    nb_tensor *one = nb_scalar_like(x, 1, x->dtype), *zero = nb_scalar_like(x, 0, x->dtype);
    nb_tensor *xm = nb_where(nb_gt(j, i), nb_expand(nb_unsqueeze(xp, -2), nd + 1, sq), one);
    nb_tensor *inner = nb_cumprod(xm, -1);
    nb_tensor *terms = nb_where(nb_ge(j, i), nb_mul(nb_unsqueeze(gp, -2), inner), zero);
    nb_tensor *before = nb_pad(nb_cumprod(xp, -1), (const int64_t[]){1, -1}, 2, NB_PAD_CONSTANT, 1.0);
    nb_tensor *gxp = nb_mul(before, nb_sum(terms, &last, 1, false));
    return nb_movedim(gxp, &last, &d, 1);
}

/* logcumsumexp's gradient as recorded ops (create_graph):
 * gx_i = sum_{k>=i} g_k exp(x_i - out_k), each exponent <= 0 (stable);
 * the other terms are exp(-inf) = 0, so no 0 * inf reaches a double
 * backward. Quadratic in the scanned length. */
static nb_tensor *logcumsumexp_grad_ops(nb_tensor *g, nb_tensor *x, nb_tensor *out, int d) {
    int last = -1;
    nb_tensor *xp = nb_movedim(x, &d, &last, 1), *gp = nb_movedim(g, &d, &last, 1), *op = nb_movedim(out, &d, &last, 1);
    if (!xp || !gp || !op) return NULL;
    int64_t r = xp->shape[xp->ndim - 1];
    nb_device dev = x->storage->device;
    nb_tensor *i = nb_reshape(nb_arange_on(0, (double)r, 1, NB_I64, dev), NB_SHAPE(r, 1));
    nb_tensor *k = nb_reshape(nb_arange_on(0, (double)r, 1, NB_I64, dev), NB_SHAPE(1, r));
    nb_tensor *diff = nb_sub(nb_unsqueeze(xp, -1), nb_unsqueeze(op, -2)); /* [.., i, k] = x_i - out_k */
    nb_tensor *e = nb_exp(nb_where(nb_ge(k, i), diff, nb_scalar_like(x, -INFINITY, x->dtype)));
    nb_tensor *gxp = nb_sum(nb_mul(nb_unsqueeze(gp, -2), e), &last, 1, false);
    return nb_movedim(gxp, &last, &d, 1);
}

/* The gradient as recorded ops (create_graph): cumsum's is the reversed
 * cumsum; cummax/cummin's is g summed into the recorded indices. */
static nb_tensor *scan_grad_ops(nb_node *n, nb_tensor *g, nb_tensor *x, nb_tensor *idx) {
    int d = n->p.scan.dim;
    if (x->ndim == 0) return nb_mul_scalar(g, 1); /* a one-element scan is the identity */
    switch (n->p.scan.kop) {
    case NB_REDUCE_SUM: return nb_flip(nb_cumsum(nb_flip(g, &d, 1), d), &d, 1);
    case NB_REDUCE_PROD: return cumprod_grad_ops(g, x, d);
    case NB_REDUCE_MAX: case NB_REDUCE_MIN: return nb_scatter_add(nb_zeros_like(x), d, idx, g);
    case NB_REDUCE_LOGSUMEXP: return logcumsumexp_grad_ops(g, x, n->saved[1], d);
    default: return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: no differentiable backward", nb_op_name(n->op));
    }
}

/* Saved: 0 x, 1 out, 2 indices (cummax/cummin); p.scan: the op and dim. */
nb_status nb_bw_scan(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *out = n->saved[1], *idx = n->saved[2];
    if (nb_needs_grad(3, (nb_tensor *[]){g, x, out})) {
        gin[0] = scan_grad_ops(n, g, x, idx);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gx = nb_empty_like(x), *gc = nb_contiguous(g);
    if (!gx || !gc) return nb_last_status();
    nb_kview vgx = kv1(gx), vg = kv1(gc), vx = kv1(x), vo = kv1(out), vi = idx ? kv1(idx) : vgx;
    nb_status st = nb_kernel_scan_backward(NB_BE(x), n->p.scan.kop, &vgx, &vg, &vx, &vo, idx ? &vi : NULL,
                           n->p.scan.dim);
    gin[0] = gx;
    return st;
}

static nb_tensor *scan_impl(nb_op_id id, nb_reduce_op kop, nb_tensor *t, int dim, nb_tensor **indices) {
    const char *op = nb_op_name(id);
    if (!nb_check_inputs(op, 1, &t)) return NULL;
    bool ext = kop == NB_REDUCE_MAX || kop == NB_REDUCE_MIN, fl = nb_dtype_is_float(t->dtype);
    int d = nb_wrap_dim(dim, t->ndim > 0 ? t->ndim : 1);
    if (d < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %d-d input", op, dim, t->ndim);
    if (kop == NB_REDUCE_LOGSUMEXP && !fl)
        return NB_FAIL(NB_ERR_DTYPE, "%s: needs float32 or float64, got %s", op, nb_dtype_name(t->dtype));
    /* integer/bool cumsum and cumprod give int64, as PyTorch */
    nb_dtype odt = fl || ext ? t->dtype : NB_I64;
    nb_tensor *out = nb_tensor_new(t->ndim, t->shape, odt, t->storage->device);
    nb_tensor *idx = ext ? nb_tensor_new(t->ndim, t->shape, NB_I64, t->storage->device) : NULL;
    if (!out || (ext && !idx)) return NULL;
    nb_kview vo = kv1(out), vx = kv1(t), vi = idx ? kv1(idx) : vo;
    if (nb_kernel_scan(NB_BE(t), kop, &vo, idx ? &vi : NULL, &vx, d) != NB_OK) return NULL;
    bool failed;
    nb_node *n = fl ? nb_record(id, out, 1, &t, &failed) : NULL;
    if (fl && !n && failed) return NULL;
    if (n) {
        n->p.scan.kop = kop, n->p.scan.dim = d;
        nb_save(n, 0, t), nb_save(n, 1, out);
        if (idx) nb_save(n, 2, idx);
    }
    if (indices) *indices = idx;
    return out;
}

static nb_tensor *scan_op(nb_op_id id, nb_reduce_op kop, nb_tensor *t, int dim) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, scan_impl(id, kop, t, dim, NULL));
}

/* Values out, and the indices kept past the op's scope like nb_max_dim's. */
static nb_tensor *scan_ext(nb_op_id id, nb_reduce_op kop, nb_tensor *t, int dim, nb_tensor **indices) {
    nb_tensor *idx = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *out = scan_impl(id, kop, t, dim, &idx);
    if (!out) idx = NULL;
    nb_retain(idx);
    out = nb_scope_return(s, out);
    if (indices) *indices = nb_scope_adopt(idx);
    else nb_release(idx);
    return out;
}

nb_tensor *nb_cumsum(nb_tensor *t, int dim) { return scan_op(NB_OP_CUMSUM, NB_REDUCE_SUM, t, dim); }
nb_tensor *nb_cumprod(nb_tensor *t, int dim) { return scan_op(NB_OP_CUMPROD, NB_REDUCE_PROD, t, dim); }
nb_tensor *nb_logcumsumexp(nb_tensor *t, int dim) { return scan_op(NB_OP_LOGCUMSUMEXP, NB_REDUCE_LOGSUMEXP, t, dim); }
nb_tensor *nb_cummax(nb_tensor *t, int dim, nb_tensor **indices) {
    return scan_ext(NB_OP_CUMMAX, NB_REDUCE_MAX, t, dim, indices);
}
nb_tensor *nb_cummin(nb_tensor *t, int dim, nb_tensor **indices) {
    return scan_ext(NB_OP_CUMMIN, NB_REDUCE_MIN, t, dim, indices);
}
