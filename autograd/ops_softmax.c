/* ops_softmax.c - softmax and log_softmax along any dim: forward dispatch and
 * backward rule. Kernel: backend/cpu/softmax.c. Tests: tests/test_ops_softmax.c. */
#include "nb_autograd_impl.h"

/* ---- softmax / log_softmax ------------------------------------------------ */

/* create_graph: softmax gx = y (g - sum(g y)); log_softmax gx = g - exp(y) sum(g)
 * (sums along dim, kept), as recorded ops. */
static nb_tensor *softmax_grad_ops(nb_tensor *g, nb_tensor *y, int dim, bool log) {
    if (log) return nb_sub(g, nb_mul(nb_exp(y), nb_sum(g, &dim, 1, true)));
    return nb_mul(y, nb_sub(g, nb_sum(nb_mul(g, y), &dim, 1, true)));
}

/* A 0-d tensor is softmaxed as the 1-element vector it holds (PyTorch takes dim 0 or -1 there). */
static nb_kview as_vector(const nb_tensor *t) {
    nb_kview v = nb_kview_of(t);
    if (v.ndim == 0) v.ndim = 1, v.shape[0] = 1, v.strides[0] = 1;
    return v;
}

nb_status nb_bw_softmax(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *y = n->saved[0];
    if (nb_needs_grad(2, (nb_tensor *[]){g, y})) {
        gin[0] = softmax_grad_ops(g, y, n->p.softmax.dim, n->p.softmax.log);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gc = nb_contiguous(g), *gx = nb_empty_like(y);
    if (!gc || !gx) return nb_last_status();
    nb_kview vgx = as_vector(gx), vg = as_vector(gc), vy = as_vector(y);
    gin[0] = gx;
    return nb_kernel_softmax_backward(NB_BE(y), &vgx, &vg, &vy, n->p.softmax.dim, n->p.softmax.log);
}

static nb_tensor *softmax_impl(nb_op_id id, nb_tensor *t, int dim, bool log) {
    const char *op = nb_op_name(id);
    if (!nb_check_inputs(op, 1, &t) || !nb_check_dtypes(id, 1, &t)) return NULL;
    int d = nb_wrap_dim(dim, t->ndim);
    if (d < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %d-d input", op, dim, t->ndim);
    nb_tensor *x = nb_contiguous(t), *out = nb_empty_like(t);
    if (!x || !out) return NULL;
    nb_kview vo = as_vector(out), vx = as_vector(x);
    if (nb_kernel_softmax(NB_BE(t), &vo, &vx, t->ndim ? d : 0, log) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(id, out, 1, &t, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.softmax.dim = t->ndim ? d : 0;
        n->p.softmax.log = log;
        nb_save(n, 0, out);
    }
    return out;
}

nb_tensor *nb_softmax(nb_tensor *t, int dim) {
    if (!nb_autocast_inputs(NB_OP_SOFTMAX, 1, &t)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, softmax_impl(NB_OP_SOFTMAX, t, dim, false));
}

nb_tensor *nb_log_softmax(nb_tensor *t, int dim) {
    if (!nb_autocast_inputs(NB_OP_LOG_SOFTMAX, 1, &t)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, softmax_impl(NB_OP_LOG_SOFTMAX, t, dim, true));
}
