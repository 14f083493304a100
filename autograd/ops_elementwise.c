/* ops_elementwise.c - binary elementwise ops (arithmetic with broadcasting,
 * comparisons) and casts: forward dispatch and backward rules. Unary ops
 * are in ops_math.c. Kernels: backend/cpu/binary.c, cast.c.
 * Tests: tests/test_ops_elementwise.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- binary -------------------------------------------------------------- */

static nb_tensor *binary_out_impl(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b, bool need_float,
                             nb_dtype out_dt) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs(op, 2, in) || !nb_check_dtypes(op, 2, in, need_float)) return NULL;
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &nd, shape)) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                       nb_fmt_shape(a->ndim, a->shape, x, sizeof x), nb_fmt_shape(b->ndim, b->shape, y, sizeof y));
    }
    nb_tensor *out = nb_tensor_new(nd, shape, out_dt, a->storage->device);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), va = nb_kview_expand(a, nd, shape), vb = nb_kview_expand(b, nd, shape);
    return NB_CALL(a, binary, kop, &o, &va, &vb) == NB_OK ? out : NULL;
}

static nb_tensor *binary_out(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b, bool need_float,
                             nb_dtype out_dt) {
    nb_scope *s = nb_scope_begin();
    return nb_scope_return(s, binary_out_impl(op, kop, a, b, need_float, out_dt));
}

static nb_tensor *binary_op(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b, bool need_float,
                            nb_backward_fn bw, bool save_in, bool save_out) {
    nb_tensor *out = binary_out(op, kop, a, b, need_float, a ? a->dtype : NB_F32);
    bool failed;
    nb_tensor *in[2] = {a, b};
    nb_node *n = out ? nb_record(op, bw, out, 2, in, &failed) : NULL;
    if (out && failed) return NULL;
    if (n && save_in) nb_save(n, 0, a), nb_save(n, 1, b);
    if (n && save_out) nb_save(n, 2, out);
    return out;
}

/* NB_OK unless a needed input gradient failed. */
#define GIN_STATUS(n, gin) (((n)->in[0] && !(gin)[0]) || ((n)->in[1] && !(gin)[1]) ? nb_last_status() : NB_OK)

/* Reduces a broadcast gradient to input i's shape. */
static nb_tensor *to_input(nb_node *n, int i, nb_tensor *g) {
    return n->in[i] ? nb_sum_to_shape(g, n->in[i]->ndim, n->in[i]->shape) : NULL;
}

static nb_status add_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = to_input(n, 0, g);
    gin[1] = to_input(n, 1, g);
    return GIN_STATUS(n, gin);
}

static nb_status sub_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = to_input(n, 0, g);
    gin[1] = n->in[1] ? to_input(n, 1, nb_neg(g)) : NULL;
    return GIN_STATUS(n, gin);
}

static nb_status mul_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    if (n->in[0]) gin[0] = to_input(n, 0, nb_mul(g, n->saved[1]));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_mul(g, n->saved[0]));
    return GIN_STATUS(n, gin);
}

/* out = a / b: da = g / b, db = -g * out / b */
static nb_status div_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *b = n->saved[1], *out = n->saved[2];
    if (n->in[0]) gin[0] = to_input(n, 0, nb_div(g, b));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_neg(nb_div(nb_mul(g, out), b)));
    return GIN_STATUS(n, gin);
}

/* out = a ** b: da = g * b * a ** (b - 1), db = g * out * log(a) */
static nb_status pow_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *a = n->saved[0], *b = n->saved[1], *out = n->saved[2];
    if (n->in[0]) gin[0] = to_input(n, 0, nb_mul(g, nb_mul(b, nb_pow(a, nb_add_scalar(b, -1)))));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_mul(g, nb_mul(out, nb_log(a))));
    return GIN_STATUS(n, gin);
}

nb_tensor *nb_add(nb_tensor *a, nb_tensor *b) {
    return binary_op("add", NB_BINARY_ADD, a, b, false, add_backward, false, false);
}
nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b) {
    return binary_op("sub", NB_BINARY_SUB, a, b, false, sub_backward, false, false);
}
nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b) {
    return binary_op("mul", NB_BINARY_MUL, a, b, false, mul_backward, true, false);
}
nb_tensor *nb_div(nb_tensor *a, nb_tensor *b) {
    return binary_op("div", NB_BINARY_DIV, a, b, true, div_backward, true, true);
}
nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b) {
    return binary_op("pow", NB_BINARY_POW, a, b, true, pow_backward, true, true);
}

nb_tensor *nb_eq(nb_tensor *a, nb_tensor *b) { return binary_out("eq", NB_BINARY_EQ, a, b, false, NB_BOOL); }
nb_tensor *nb_ne(nb_tensor *a, nb_tensor *b) { return binary_out("ne", NB_BINARY_NE, a, b, false, NB_BOOL); }
nb_tensor *nb_gt(nb_tensor *a, nb_tensor *b) { return binary_out("gt", NB_BINARY_GT, a, b, false, NB_BOOL); }

/* ---- casts ------------------------------------------------------------- */

static nb_status cast_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_to_dtype(g, n->in[0]->dtype);
    return gin[0] ? NB_OK : nb_last_status();
}

static nb_tensor *to_dtype_impl(nb_tensor *t, nb_dtype dt) {
    if (!nb_check_inputs("to_dtype", 1, &t)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "to_dtype: bad dtype %d", (int)dt);
    nb_tensor *out = nb_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), vt = nb_kview_of(t);
    if (NB_CALL(t, copy, &o, &vt) != NB_OK) return NULL;
    if (!nb_dtype_is_float(dt)) return out;
    bool failed;
    nb_record("to_dtype", cast_backward, out, 1, &t, &failed);
    return failed ? NULL : out;
}

nb_tensor *nb_to_dtype(nb_tensor *t, nb_dtype dt) {
    nb_scope *s = nb_scope_begin();
    return nb_scope_return(s, to_dtype_impl(t, dt));
}
