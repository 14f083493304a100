/* ops_upsample.c - interpolate (F.interpolate to a given size, modes
 * 'nearest' (PyTorch's legacy nearest) and 'bilinear' with align_corners
 * either way): argument checks, forward dispatch and the backward rule.
 * Kernels: backend/cpu/upsample.c. Tests: tests/test_ops_upsample.c. */
#include "nb_autograd_impl.h"


/* x [N, C, H, W] resized to shape's H, W, recorded as interpolate. */
static nb_tensor *resize(const nb_node *src, nb_tensor *x, const int64_t *shape) {
    nb_tensor *xc = nb_contiguous(x), *out = xc ? nb_tensor_new(4, shape, x->dtype, x->storage->device) : NULL;
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc);
    if (nb_kernel_upsample2d(NB_BE(x), &vo, &vx, src->p.upsample.bilinear, src->p.upsample.align_corners) != NB_OK)
        return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_INTERPOLATE, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) n->p.upsample = src->p.upsample;
    return out;
}

/* The rule of the gradient's own node (create_graph): interpolate is linear,
 * its backward the adjoint, so the gradient of the gradient is the resize
 * again, to the shape of g (in[0]). */
static nb_status interpolate_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = resize(n, gg, n->in[0]->shape);
    return gin[0] ? NB_OK : nb_last_status();
}

/* p.upsample: bilinear, align_corners; the input's shape is n->in[0]'s. */
nb_status nb_bw_interpolate(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->in[0];
    nb_tensor *gc = nb_contiguous(g);
    nb_tensor *gx = nb_tensor_new(x->ndim, x->shape, x->dtype, x->storage->device);
    if (!gc || !gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc);
    gin[0] = gx;
    nb_status st = nb_kernel_upsample2d_backward(NB_BE(gx), &vgx, &vg, n->p.upsample.bilinear, n->p.upsample.align_corners);
    bool failed;
    if (st == NB_OK) nb_record_grad(n, interpolate_grad_backward, gx, 1, &g, &failed);
    return st == NB_OK && failed ? nb_last_status() : st;
}

static nb_tensor *interpolate_impl(nb_tensor *x, int64_t out_h, int64_t out_w, nb_interpolate_mode mode,
                                   bool align_corners) {
    if (!nb_check_inputs("interpolate", 1, &x) || !nb_check_dtypes(NB_OP_INTERPOLATE, 1, &x)) return NULL;
    char a[NB_SHAPE_BUF];
    if (mode != NB_INTERPOLATE_NEAREST && mode != NB_INTERPOLATE_BILINEAR)
        return NB_FAIL(NB_ERR_INVALID_ARG, "interpolate: unknown mode %d", (int)mode);
    if (mode == NB_INTERPOLATE_NEAREST && align_corners) /* PyTorch's ValueError */
        return NB_FAIL(NB_ERR_INVALID_ARG, "interpolate: align_corners can only be set with the interpolating "
                                           "modes (bilinear), not nearest");
    if (x->ndim != 4)
        return NB_FAIL(NB_ERR_SHAPE, "interpolate: input %s must be [N, C, H, W]",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    if (out_h <= 0 || out_w <= 0 || x->shape[2] <= 0 || x->shape[3] <= 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "interpolate: input and output sizes should be greater than 0, but got "
                       "input %s and output (%lld, %lld)", nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                       (long long)out_h, (long long)out_w);
    int64_t shape[4] = {x->shape[0], x->shape[1], out_h, out_w};
    nb_tensor *xc = nb_contiguous(x), *out = nb_tensor_new(4, shape, x->dtype, x->storage->device);
    if (!xc || !out) return NULL;
    bool bilinear = mode == NB_INTERPOLATE_BILINEAR;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc);
    if (nb_kernel_upsample2d(NB_BE(x), &vo, &vx, bilinear, align_corners) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_INTERPOLATE, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) n->p.upsample.bilinear = bilinear, n->p.upsample.align_corners = align_corners;
    return out;
}

nb_tensor *nb_interpolate(nb_tensor *x, int64_t out_h, int64_t out_w, nb_interpolate_mode mode,
                          bool align_corners) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, interpolate_impl(x, out_h, out_w, mode, align_corners));
}
