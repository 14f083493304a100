/* ops_batch_norm.c - batch_norm (F.batch_norm: batch statistics and running-stat
 * updates in training, running statistics in eval): argument checks, forward
 * dispatch and backward rule. Kernel: backend/cpu/batch_norm.c. Tests:
 * tests/test_ops_batch_norm.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- batch_norm ------------------------------------------------------------- */

/* create_graph: the gradients as recorded ops over the dims other than the
 * channels (1). Training: the batch statistics recomputed from x,
 *   xhat = (x - mean) rstd, gxhat = g w,
 *   dx = rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat));
 * eval: the saved running statistics are constants, dx = g w rstd.
 * dw = sum(g xhat), db = sum(g) in both. */
static nb_status bn_grad_ops(nb_node *n, nb_tensor *g, nb_tensor *x, nb_tensor *w, nb_tensor **gin) {
    int nd = x->ndim, dims[NB_MAX_DIMS], k = 0;
    int64_t cshape[NB_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        cshape[d] = d == 1 ? x->shape[1] : 1;
        if (d != 1) dims[k++] = d;
    }
    double eps = n->p.batch_norm.eps;
    nb_tensor *mean, *rstd;
    if (n->p.batch_norm.training) {
        mean = nb_mean(x, dims, k, true);
        nb_tensor *xc = nb_sub(x, mean);
        rstd = nb_rsqrt(nb_add_scalar(nb_mean(nb_mul(xc, xc), dims, k, true), eps));
    } else {
        mean = nb_reshape(n->saved[2], nd, cshape);
        rstd = nb_rsqrt(nb_add_scalar(nb_reshape(n->saved[3], nd, cshape), eps));
    }
    nb_tensor *xhat = nb_mul(nb_sub(x, mean), rstd);
    nb_tensor *gxhat = w ? nb_mul(g, nb_reshape(w, nd, cshape)) : g;
    if (n->in[0]) {
        nb_tensor *inner = gxhat;
        if (n->p.batch_norm.training)
            inner = nb_sub(nb_sub(gxhat, nb_mean(gxhat, dims, k, true)),
                           nb_mul(xhat, nb_mean(nb_mul(gxhat, xhat), dims, k, true)));
        if (!(gin[0] = nb_mul(rstd, inner))) return nb_last_status();
    }
    if (n->in[1] && !(gin[1] = nb_sum(nb_mul(g, xhat), dims, k, false))) return nb_last_status();
    if (n->in[2] && !(gin[2] = nb_sum(g, dims, k, false))) return nb_last_status();
    return NB_OK;
}

/* in: x, weight, bias. saved: x (contiguous), weight (or NULL), then the
 * statistics the forward normalised with: training save_mean/save_invstd;
 * eval copies of running_mean/running_var (a later training step updates
 * the buffers in place). p.batch_norm: training, eps. */
nb_status nb_bw_bn(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *w = n->saved[1], *s0 = n->saved[2], *s1 = n->saved[3];
    nb_tensor *xg = n->in[0] ? n->in[0] : x, *wg = n->in[1] ? n->in[1] : w; /* connected under create_graph */
    if (nb_needs_grad(3, (nb_tensor *[]){g, xg, wg})) return bn_grad_ops(n, g, xg, wg, gin);
    bool training = n->p.batch_norm.training;
    int64_t C = x->shape[1];
    nb_device dev = x->storage->device;
    nb_tensor *gc = nb_contiguous(g);
    nb_tensor *gx = n->in[0] ? nb_empty_like(x) : NULL;
    nb_tensor *gw = n->in[1] ? nb_tensor_new(1, &C, x->dtype, dev) : NULL;
    nb_tensor *gb = n->in[2] ? nb_tensor_new(1, &C, x->dtype, dev) : NULL;
    if (!gc || (n->in[0] && !gx) || (n->in[1] && !gw) || (n->in[2] && !gb)) return nb_last_status();
    nb_kview vgx = gx ? nb_kview_of(gx) : (nb_kview){0}, vgw = gw ? nb_kview_of(gw) : (nb_kview){0};
    nb_kview vgb = gb ? nb_kview_of(gb) : (nb_kview){0}, vw = w ? nb_kview_of(w) : (nb_kview){0};
    nb_kview vg = nb_kview_of(gc), vx = nb_kview_of(x), v0 = nb_kview_of(s0), v1 = nb_kview_of(s1);
    nb_batch_norm_args a = {&vx, w ? &vw : NULL, NULL, training ? NULL : &v0, training ? NULL : &v1,
                            training, 0, n->p.batch_norm.eps};
    nb_status st = nb_kernel_batch_norm_backward(NB_BE(x), gx ? &vgx : NULL, gw ? &vgw : NULL, gb ? &vgb : NULL, &vg,
                                                 training ? &v0 : NULL, training ? &v1 : NULL, &a);
    gin[0] = gx, gin[1] = gw, gin[2] = gb;
    return st;
}

/* A per-channel argument (may be NULL) must be a [C] tensor like x. */
static bool bn_check_chan(const char *what, nb_tensor *t, const nb_tensor *x) {
    if (!t) return true;
    nb_tensor *pair[2] = {(nb_tensor *)x, t};
    if (!nb_check_inputs("batch_norm", 2, pair)) return false;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (t->dtype != x->dtype) {
        nb_set_error(NB_ERR_DTYPE, "batch_norm: %s is %s but input is %s", what, nb_dtype_name(t->dtype),
                     nb_dtype_name(x->dtype));
        return false;
    }
    if (t->ndim != 1 || t->shape[0] != x->shape[1]) {
        nb_set_error(NB_ERR_SHAPE, "batch_norm: %s %s must be [C] = [%lld] for input %s", what,
                     nb_fmt_shape(t->ndim, t->shape, a, sizeof a), (long long)x->shape[1],
                     nb_fmt_shape(x->ndim, x->shape, b, sizeof b));
        return false;
    }
    return true;
}

static bool bn_check(nb_tensor *x, nb_tensor *rm, nb_tensor *rv, nb_tensor *w, nb_tensor *b, bool training) {
    if (!nb_check_inputs("batch_norm", 1, &x) || !nb_check_dtypes(NB_OP_BATCH_NORM, 1, &x)) return false;
    char a[NB_SHAPE_BUF];
    if (x->ndim < 2) {
        nb_set_error(NB_ERR_SHAPE, "batch_norm: input %s must be [N, C] or [N, C, *]",
                     nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
        return false;
    }
    if (!bn_check_chan("weight", w, x) || !bn_check_chan("bias", b, x) || !bn_check_chan("running_mean", rm, x) ||
        !bn_check_chan("running_var", rv, x))
        return false;
    if ((rm == NULL) != (rv == NULL)) {
        nb_set_error(NB_ERR_INVALID_ARG, "batch_norm: running_mean and running_var must both be given or both NULL");
        return false;
    }
    if (!training && !rm) {
        nb_set_error(NB_ERR_INVALID_ARG, "batch_norm: running_mean and running_var are required in eval mode");
        return false;
    }
    if (training && rm && (!nb_is_contiguous(rm) || !nb_is_contiguous(rv))) {
        nb_set_error(NB_ERR_INVALID_ARG, "batch_norm: running_mean and running_var are updated in place and must "
                                         "be contiguous");
        return false;
    }
    int64_t C = x->shape[1], per_channel = C ? nb_numel(x) / C : 0;
    if (training && per_channel == 1) { /* PyTorch's message */
        nb_set_error(NB_ERR_INVALID_ARG, "batch_norm: expected more than 1 value per channel when training, got "
                     "input size %s", nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
        return false;
    }
    return true;
}

/* A copy of a running statistic as it is now (for eval's backward). */
static nb_tensor *snapshot(nb_tensor *t) {
    nb_tensor *c = nb_empty_like(t);
    return c && nb_copy_(c, t) == NB_OK ? c : NULL;
}

static nb_tensor *bn_impl(nb_tensor *x, nb_tensor *rm, nb_tensor *rv, nb_tensor *w, nb_tensor *b, bool training,
                          double momentum, double eps) {
    if (!bn_check(x, rm, rv, w, b, training)) return NULL;
    int64_t C = x->shape[1];
    nb_device dev = x->storage->device;
    nb_tensor *xc = nb_contiguous(x), *out = nb_empty_like(x);
    nb_tensor *wc = w ? nb_contiguous(w) : NULL, *bc = b ? nb_contiguous(b) : NULL;
    /* eval reads the running stats through (possibly copied) contiguous views */
    nb_tensor *rmc = rm && !training ? nb_contiguous(rm) : rm, *rvc = rv && !training ? nb_contiguous(rv) : rv;
    nb_tensor *smean = nb_tensor_new(1, &C, x->dtype, dev), *sinv = nb_tensor_new(1, &C, x->dtype, dev);
    if (!xc || !out || (w && !wc) || (b && !bc) || (rm && (!rmc || !rvc)) || !smean || !sinv) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc), vsm = nb_kview_of(smean), vsi = nb_kview_of(sinv);
    nb_kview vw = wc ? nb_kview_of(wc) : (nb_kview){0}, vb = bc ? nb_kview_of(bc) : (nb_kview){0};
    nb_kview vrm = rmc ? nb_kview_of(rmc) : (nb_kview){0}, vrv = rvc ? nb_kview_of(rvc) : (nb_kview){0};
    nb_batch_norm_args a = {&vx, wc ? &vw : NULL, bc ? &vb : NULL, rmc ? &vrm : NULL, rvc ? &vrv : NULL,
                            training, momentum, eps};
    if (nb_kernel_batch_norm(NB_BE(x), &vo, &vsm, &vsi, &a) != NB_OK) return NULL;
    if (training) nb_bump_version(rm), nb_bump_version(rv); /* the running stats were updated in place */
    nb_tensor *in[3] = {x, w, b};
    bool failed;
    nb_node *n = nb_record(NB_OP_BATCH_NORM, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) {
        nb_tensor *s0 = training ? smean : snapshot(rmc), *s1 = training ? sinv : snapshot(rvc);
        if (!s0 || !s1) return NULL; /* out (and its node) die with the op's scope */
        n->p.batch_norm.training = training;
        n->p.batch_norm.eps = eps;
        nb_save(n, 0, xc);
        if (wc) nb_save(n, 1, wc);
        nb_save(n, 2, s0);
        nb_save(n, 3, s1);
    }
    return out;
}

nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *weight,
                         nb_tensor *bias, bool training, double momentum, double eps) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, bn_impl(x, running_mean, running_var, weight, bias, training, momentum, eps));
}
