/* ops_layer_norm.c - layer_norm (F.layer_norm; Ba, Kiros, Hinton 2016): fused
 * forward and backward; the forward saves mean and rstd per row. Kernel:
 * backend/cpu/layer_norm.c. Tests: tests/test_ops_layer_norm.c. */
#include "nb_autograd_impl.h"

/* ---- layer_norm ------------------------------------------------------------- */

/* create_graph: the gradients as recorded ops, mean and rstd recomputed
 * from x so that their dependence on it is differentiated too:
 *   xhat = (x - mean) rstd, gxhat = g w,
 *   dx = rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat)),
 *   dw = sum_rows(g xhat), db = sum_rows(g). */
static nb_status layer_norm_grad_ops(nb_node *n, nb_tensor *g, nb_tensor *x, nb_tensor *w, nb_tensor **gin) {
    int64_t rows = n->p.layer_norm.rows, m = n->p.layer_norm.m;
    int last = 1, first = 0;
    nb_tensor *x2 = nb_reshape(x, NB_SHAPE(rows, m)), *g2 = nb_reshape(g, NB_SHAPE(rows, m));
    nb_tensor *xc = nb_sub(x2, nb_mean(x2, &last, 1, true));
    nb_tensor *rstd = nb_rsqrt(nb_add_scalar(nb_mean(nb_mul(xc, xc), &last, 1, true), n->p.layer_norm.eps));
    nb_tensor *xhat = nb_mul(xc, rstd);
    nb_tensor *gxhat = w ? nb_mul(g2, nb_reshape(w, NB_SHAPE(1, m))) : g2;
    if (n->in[0]) {
        nb_tensor *inner = nb_sub(nb_sub(gxhat, nb_mean(gxhat, &last, 1, true)),
                                  nb_mul(xhat, nb_mean(nb_mul(gxhat, xhat), &last, 1, true)));
        if (!(gin[0] = nb_reshape(nb_mul(rstd, inner), x->ndim, x->shape))) return nb_last_status();
    }
    if (n->in[1] && !(gin[1] = nb_reshape(nb_sum(nb_mul(g2, xhat), &first, 1, false), n->in[1]->ndim, n->in[1]->shape)))
        return nb_last_status();
    if (n->in[2] && !(gin[2] = nb_reshape(nb_sum(g2, &first, 1, false), n->in[2]->ndim, n->in[2]->shape)))
        return nb_last_status();
    return NB_OK;
}

/* saved: x (contiguous), weight (or NULL), mean, rstd; p.layer_norm: rows, m, eps */
nb_status nb_bw_layer_norm(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *w = n->saved[1], *mean = n->saved[2], *rstd = n->saved[3];
    int64_t rows = n->p.layer_norm.rows, m = n->p.layer_norm.m;
    nb_tensor *xg = n->in[0] ? n->in[0] : x, *wg = n->in[1] ? n->in[1] : w; /* connected under create_graph */
    if (nb_needs_grad(3, (nb_tensor *[]){g, xg, wg})) return layer_norm_grad_ops(n, g, xg, wg, gin);
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    if (n->in[0] && !(gin[0] = nb_empty_like(x))) return nb_last_status();
    if (n->in[1] && !(gin[1] = nb_empty_like(n->in[1]))) return nb_last_status();
    if (n->in[2] && !(gin[2] = nb_empty_like(n->in[2]))) return nb_last_status();
    nb_kview vgx = {0}, vgw = {0}, vgb = {0}, vw = {0};
    if (gin[0]) vgx = nb_kview_rows(gin[0], rows, m);
    if (gin[1]) vgw = nb_kview_rows(gin[1], -1, m);
    if (gin[2]) vgb = nb_kview_rows(gin[2], -1, m);
    if (w) vw = nb_kview_rows(w, -1, m);
    nb_kview vgy = nb_kview_rows(gc, rows, m), vx = nb_kview_rows(x, rows, m), vm = nb_kview_of(mean), vr = nb_kview_of(rstd);
    nb_layer_norm_args a = {&vx, w ? &vw : NULL, NULL, 0};
    return nb_kernel_layer_norm_backward(NB_BE(x), gin[0] ? &vgx : NULL, gin[1] ? &vgw : NULL, gin[2] ? &vgb : NULL,
                                         &vgy, &vm, &vr, &a);
}

static bool ln_param_ok(const nb_tensor *p, int n_norm, const int64_t *shape) {
    if (!p) return true;
    if (p->ndim != n_norm) return false;
    for (int i = 0; i < n_norm; i++)
        if (p->shape[i] != shape[i]) return false;
    return true;
}

static nb_tensor *layer_norm_impl(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                                  nb_tensor *bias, double eps) {
    nb_tensor *in[3] = {x, weight, bias};
    nb_tensor *present[3];
    int np = 0;
    for (int i = 0; i < 3; i++)
        if (i == 0 || in[i]) present[np++] = in[i];
    if (!nb_check_inputs("layer_norm", np, present) || !nb_check_dtypes(NB_OP_LAYER_NORM, np, present)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    if (n_norm < 1 || n_norm > x->ndim || !normalized_shape)
        return NB_FAIL(NB_ERR_SHAPE, "layer_norm: normalized_shape of %d dims does not fit input %s", n_norm,
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    int lead = x->ndim - n_norm;
    int64_t m = 1;
    for (int i = 0; i < n_norm; i++) {
        if (x->shape[lead + i] != normalized_shape[i])
            return NB_FAIL(NB_ERR_SHAPE, "layer_norm: input %s does not end with normalized_shape %s",
                           nb_fmt_shape(x->ndim, x->shape, a, sizeof a), nb_fmt_shape(n_norm, normalized_shape, b, sizeof b));
        m *= normalized_shape[i];
    }
    if (!ln_param_ok(weight, n_norm, normalized_shape) || !ln_param_ok(bias, n_norm, normalized_shape))
        return NB_FAIL(NB_ERR_SHAPE, "layer_norm: weight %s and bias %s must have normalized_shape %s",
                       weight ? nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a) : "(none)",
                       bias ? nb_fmt_shape(bias->ndim, bias->shape, b, sizeof b) : "(none)",
                       nb_fmt_shape(n_norm, normalized_shape, c, sizeof c));
    int64_t rows = nb_shape_numel(lead, x->shape);
    nb_tensor *xc = nb_contiguous_nograd(x);
    nb_tensor *wc = weight ? nb_contiguous_nograd(weight) : NULL, *bc = bias ? nb_contiguous_nograd(bias) : NULL;
    nb_tensor *out = nb_empty_like(x);
    nb_tensor *mean = nb_tensor_new(1, &rows, x->dtype, x->storage->device);
    nb_tensor *rstd = nb_tensor_new(1, &rows, x->dtype, x->storage->device);
    if (!xc || (weight && !wc) || (bias && !bc) || !out || !mean || !rstd) return NULL;
    nb_kview vo = nb_kview_rows(out, rows, m), vx = nb_kview_rows(xc, rows, m), vm = nb_kview_of(mean), vr = nb_kview_of(rstd);
    nb_kview vw = {0}, vb = {0};
    if (wc) vw = nb_kview_rows(wc, -1, m);
    if (bc) vb = nb_kview_rows(bc, -1, m);
    nb_layer_norm_args la = {&vx, wc ? &vw : NULL, bc ? &vb : NULL, eps};
    if (nb_kernel_layer_norm(NB_BE(x), &vo, &vm, &vr, &la) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_LAYER_NORM, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.layer_norm.rows = rows, n->p.layer_norm.m = m, n->p.layer_norm.eps = eps;
        nb_save(n, 0, xc);
        if (wc) nb_save(n, 1, wc);
        nb_save(n, 2, mean);
        nb_save(n, 3, rstd);
    }
    return out;
}

nb_tensor *nb_layer_norm(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                         nb_tensor *bias, double eps) {
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_LAYER_NORM, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_dtype back;
    nb_tensor *r = nb_widen_16bit(3, in, &back) ? layer_norm_impl(in[0], n_norm, normalized_shape, in[1], in[2], eps)
                                                : NULL;
    return nb_scope_return(s, nb_unwiden_16bit(r, back));
}
