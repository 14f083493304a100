/* ops_rms_norm.c - rms_norm (F.rms_norm; Zhang & Sennrich 2019): fused
 * forward and backward; the forward saves rstd per row; and add_rms_norm,
 * a pre-norm block's residual add and norm in one kernel where the backend
 * has it (inference), else the two ops. Kernels: backend/cpu/rms_norm.c,
 * backend/cuda/rms_norm.cu. Tests: tests/test_ops_rms_norm.c. */
#include <float.h>
#include <math.h>

#include "nb_autograd_impl.h"

/* create_graph: the gradients as recorded ops, rstd recomputed from x:
 *   xhat = x rstd, gxhat = g w, dx = rstd (gxhat - xhat mean(gxhat xhat)),
 *   dw = sum_rows(g xhat). */
static nb_status rms_norm_grad_ops(nb_node *n, nb_tensor *g, nb_tensor *x, nb_tensor *w, nb_tensor **gin) {
    int64_t rows = n->p.layer_norm.rows, m = n->p.layer_norm.m;
    int last = 1, first = 0;
    nb_tensor *x2 = nb_reshape(x, NB_SHAPE(rows, m)), *g2 = nb_reshape(g, NB_SHAPE(rows, m));
    nb_tensor *rstd = nb_rsqrt(nb_add_scalar(nb_mean(nb_mul(x2, x2), &last, 1, true), n->p.layer_norm.eps));
    nb_tensor *xhat = nb_mul(x2, rstd);
    nb_tensor *gxhat = w ? nb_mul(g2, nb_reshape(w, NB_SHAPE(1, m))) : g2;
    if (n->in[0] &&
        !(gin[0] = nb_reshape(nb_mul(rstd, nb_sub(gxhat, nb_mul(xhat, nb_mean(nb_mul(gxhat, xhat), &last, 1, true)))),
                              x->ndim, x->shape)))
        return nb_last_status();
    if (n->in[1] && !(gin[1] = nb_reshape(nb_sum(nb_mul(g2, xhat), &first, 1, false), n->in[1]->ndim, n->in[1]->shape)))
        return nb_last_status();
    return NB_OK;
}

/* saved: x (contiguous), weight (or NULL), rstd; p.layer_norm: rows, m, eps */
nb_status nb_bw_rms_norm(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *w = n->saved[1], *rstd = n->saved[2];
    int64_t rows = n->p.layer_norm.rows, m = n->p.layer_norm.m;
    nb_tensor *xg = n->in[0] ? n->in[0] : x, *wg = n->in[1] ? n->in[1] : w; /* connected under create_graph */
    if (nb_needs_grad(3, (nb_tensor *[]){g, xg, wg})) return rms_norm_grad_ops(n, g, xg, wg, gin);
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    if (n->in[0] && !(gin[0] = nb_empty_like(x))) return nb_last_status();
    if (n->in[1] && !(gin[1] = nb_empty_like(n->in[1]))) return nb_last_status();
    nb_kview vgx = {0}, vgw = {0}, vw = {0};
    if (gin[0]) vgx = nb_kview_rows(gin[0], rows, m);
    if (gin[1]) vgw = nb_kview_rows(gin[1], -1, m);
    if (w) vw = nb_kview_rows(w, -1, m);
    nb_kview vgy = nb_kview_rows(gc, rows, m), vx = nb_kview_rows(x, rows, m), vr = nb_kview_of(rstd);
    return nb_kernel_rms_norm_backward(NB_BE(x), gin[0] ? &vgx : NULL, gin[1] ? &vgw : NULL, &vgy, &vx, w ? &vw : NULL,
                   &vr);
}

/* The checks of rms_norm's arguments; *rows and *m: x as rows of the normalized size; eps 0 made PyTorch's
 * eps=None for x's (computing) dtype. */
static bool rms_norm_args(const char *op, nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                          double *eps, int64_t *rows, int64_t *m) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (!(*eps >= 0) || isinf(*eps))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0 (0 means finfo(dtype).eps)", op, *eps), false;
    if (*eps == 0) *eps = x->dtype == NB_F64 ? DBL_EPSILON : FLT_EPSILON; /* PyTorch's eps=None */
    if (n_norm < 1 || n_norm > x->ndim || !normalized_shape)
        return nb_set_error(NB_ERR_SHAPE, "%s: normalized_shape of %d dims does not fit input %s", op, n_norm,
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a)), false;
    int lead = x->ndim - n_norm;
    *m = 1;
    for (int i = 0; i < n_norm; i++) {
        if (x->shape[lead + i] != normalized_shape[i])
            return nb_set_error(NB_ERR_SHAPE, "%s: input %s does not end with normalized_shape %s", op,
                           nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                           nb_fmt_shape(n_norm, normalized_shape, b, sizeof b)), false;
        *m *= normalized_shape[i];
    }
    bool wok = !weight || weight->ndim == n_norm;
    for (int i = 0; wok && weight && i < n_norm; i++) wok = weight->shape[i] == normalized_shape[i];
    if (!wok)
        return nb_set_error(NB_ERR_SHAPE, "%s: weight %s must have normalized_shape %s", op,
                       nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a),
                       nb_fmt_shape(n_norm, normalized_shape, b, sizeof b)), false;
    *rows = nb_shape_numel(lead, x->shape);
    return true;
}

static nb_tensor *rms_norm_impl(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                                double eps) {
    nb_tensor *in[2] = {x, weight};
    int np = weight ? 2 : 1;
    if (!nb_check_inputs("rms_norm", np, in) || !nb_check_dtypes(NB_OP_RMS_NORM, np, in)) return NULL;
    int64_t rows, m;
    if (!rms_norm_args("rms_norm", x, n_norm, normalized_shape, weight, &eps, &rows, &m)) return NULL;
    nb_tensor *xc = nb_contiguous_nograd(x), *wc = weight ? nb_contiguous_nograd(weight) : NULL;
    nb_tensor *out = nb_empty_like(x), *rstd = nb_tensor_new(1, &rows, x->dtype, x->storage->device);
    if (!xc || (weight && !wc) || !out || !rstd) return NULL;
    nb_kview vo = nb_kview_rows(out, rows, m), vx = nb_kview_rows(xc, rows, m), vr = nb_kview_of(rstd), vw = {0};
    if (wc) vw = nb_kview_rows(wc, -1, m);
    if (nb_kernel_rms_norm(NB_BE(x), &vo, &vr, &vx, wc ? &vw : NULL, eps) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_RMS_NORM, out, 2, in, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.layer_norm.rows = rows, n->p.layer_norm.m = m, n->p.layer_norm.eps = eps;
        nb_save(n, 0, xc);
        if (wc) nb_save(n, 1, wc);
        nb_save(n, 2, rstd);
    }
    return out;
}

nb_tensor *nb_rms_norm(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight, double eps) {
    nb_tensor *in[2] = {x, weight};
    if (!nb_autocast_inputs(NB_OP_RMS_NORM, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_dtype back;
    if (eps == 0 && in[0] && (in[0]->dtype == NB_F16 || in[0]->dtype == NB_BF16))
        eps = FLT_EPSILON; /* PyTorch's kernel upcasts 16-bit inputs and takes float32's epsilon */
    nb_tensor *r = nb_norms_16bit_native(2, in) ? (back = NB_DTYPE_COUNT, rms_norm_impl(in[0], n_norm, normalized_shape, in[1], eps))
                   : nb_widen_16bit(2, in, &back) ? rms_norm_impl(in[0], n_norm, normalized_shape, in[1], eps)
                                                  : NULL;
    return nb_scope_return(s, nb_unwiden_16bit(r, back));
}

/* Whether the fused kernel applies (inference: no gradient, no autocast region, one device, shape and dtype,
 * the backend's add_rms_norm slot, 16-bit only where its norms take 16-bit rows); else the two ops run. */
static bool add_rms_norm_fuses(nb_tensor *x, nb_tensor *residual, nb_tensor *weight) {
    nb_tensor *in[3] = {x, residual, weight};
    int np = weight ? 3 : 2;
    bool same = nb_same_shape(x, residual) && x->dtype == residual->dtype && (!weight || weight->dtype == x->dtype);
    for (int i = 1; same && i < np; i++) same = nb_same_device(in[i]->storage->device, x->storage->device);
    bool half = x->dtype == NB_F16 || x->dtype == NB_BF16;
    /* 16-bit rows not 16-byte aligned would take another kernel (another order of the sum of squares) than
     * nb_rms_norm takes on the fresh sum: the two ops then, for the same bits */
    if (half) same = same && (uintptr_t)nb_kview_of(x).data % 16 == 0 && (uintptr_t)nb_kview_of(residual).data % 16 == 0;
    return same && nb_kernel_has(NB_BE(x), add_rms_norm) && !nb_autocast_active(x->storage->device) &&
           !nb_needs_grad(np, in) && (nb_dtype_is_compute_float(x->dtype) || (half && nb_norms_16bit_native(np, in)));
}

static nb_tensor *add_rms_norm_fused(nb_tensor *x, nb_tensor *residual, int n_norm, const int64_t *normalized_shape,
                                     nb_tensor *weight, double eps, nb_tensor **sum) {
    nb_backend *be = NB_BE(x);
    int64_t rows, m;
    if (!rms_norm_args("add_rms_norm", x, n_norm, normalized_shape, weight, &eps, &rows, &m)) return NULL;
    nb_tensor *xc = nb_contiguous_nograd(x), *rc = nb_contiguous_nograd(residual);
    nb_tensor *wc = weight ? nb_contiguous_nograd(weight) : NULL;
    nb_tensor *out = nb_empty_like(x), *h = nb_empty_like(x);
    if (!xc || !rc || (weight && !wc) || !out || !h) return NULL;
    nb_kview vo = nb_kview_rows(out, rows, m), vh = nb_kview_rows(h, rows, m), vx = nb_kview_rows(xc, rows, m);
    nb_kview vr = nb_kview_rows(rc, rows, m), vw = {0};
    if (wc) vw = nb_kview_rows(wc, -1, m);
    if (nb_kernel_add_rms_norm(be, &vo, &vh, &vx, &vr, wc ? &vw : NULL, eps) != NB_OK) return NULL;
    *sum = h;
    return out;
}

nb_tensor *nb_add_rms_norm(nb_tensor *x, nb_tensor *residual, int n_norm, const int64_t *normalized_shape,
                           nb_tensor *weight, double eps, nb_tensor **sum) {
    if (!sum) return NB_FAIL(NB_ERR_INVALID_ARG, "add_rms_norm: sum is NULL");
    *sum = NULL;
    if (!x || !residual) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "add_rms_norm: x or residual is NULL");
        return NULL;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = NULL, *y;
    if (add_rms_norm_fuses(x, residual, weight)) y = add_rms_norm_fused(x, residual, n_norm, normalized_shape, weight, eps, &h);
    else { /* the two ops, each with its own rule (and autocast policy) */
        h = nb_add(x, residual);
        y = h ? nb_rms_norm(h, n_norm, normalized_shape, weight, eps) : NULL;
    }
    nb_retain(h); /* ours, handed to the caller's scope below */
    y = nb_scope_return(s, y);
    if (!y) return nb_release(h), NULL;
    *sum = nb_scope_adopt(h);
    return *sum ? y : NULL;
}
