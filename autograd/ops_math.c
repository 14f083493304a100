/* ops_math.c - unary elementwise ops (math functions, activations, scalar
 * forms): forward dispatch through the backend's unary slot and one
 * backward rule through its unary_backward slot.
 * Kernels: backend/cpu/elementwise.c. Tests: tests/test_ops_math.c and
 * tests/test_ops_elementwise.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- unary --------------------------------------------------------------- */

/* One rule for every unary op: the backend's unary_backward with the saved
 * input (slot 0), output (slot 1) and alpha (darg[0]). */
static nb_status unary_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *y = n->saved[1];
    nb_tensor *gx = nb_empty_like(x);
    if (!gx) return nb_last_status();
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc), vx = nb_kview_of(x), vy = nb_kview_of(y);
    nb_status st = NB_CALL(x, unary_backward, (nb_unary_op)n->iarg[0], &vgx, &vg, &vx, &vy, n->darg[0]);
    gin[0] = gx;
    return st;
}

static nb_tensor *unary_op_impl(const char *op, nb_unary_op kop, nb_tensor *x, double alpha, bool need_float) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(op, 1, &x, need_float)) return NULL;
    nb_tensor *out = nb_empty_like(x);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), vx = nb_kview_of(x);
    if (NB_CALL(x, unary, kop, &o, &vx, alpha) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(op, unary_backward, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) {
        n->iarg[0] = kop;
        n->darg[0] = alpha;
        nb_save(n, 0, x);
        nb_save(n, 1, out);
    }
    return out;
}

static nb_tensor *unary_op(const char *op, nb_unary_op kop, nb_tensor *x, double alpha, bool need_float) {
    nb_scope *s = nb_scope_begin();
    return nb_scope_return(s, unary_op_impl(op, kop, x, alpha, need_float));
}

nb_tensor *nb_neg(nb_tensor *a) { return unary_op("neg", NB_UNARY_NEG, a, 0, false); }
nb_tensor *nb_exp(nb_tensor *a) { return unary_op("exp", NB_UNARY_EXP, a, 0, true); }
nb_tensor *nb_log(nb_tensor *a) { return unary_op("log", NB_UNARY_LOG, a, 0, true); }
nb_tensor *nb_sqrt(nb_tensor *a) { return unary_op("sqrt", NB_UNARY_SQRT, a, 0, true); }
nb_tensor *nb_relu(nb_tensor *a) { return unary_op("relu", NB_UNARY_RELU, a, 0, true); }
nb_tensor *nb_sigmoid(nb_tensor *a) { return unary_op("sigmoid", NB_UNARY_SIGMOID, a, 0, true); }
nb_tensor *nb_tanh(nb_tensor *a) { return unary_op("tanh", NB_UNARY_TANH, a, 0, true); }
nb_tensor *nb_add_scalar(nb_tensor *a, double s) { return unary_op("add_scalar", NB_UNARY_ADD_SCALAR, a, s, false); }
nb_tensor *nb_mul_scalar(nb_tensor *a, double s) { return unary_op("mul_scalar", NB_UNARY_MUL_SCALAR, a, s, false); }
nb_tensor *nb_pow_scalar(nb_tensor *a, double e) { return unary_op("pow_scalar", NB_UNARY_POW_SCALAR, a, e, true); }

