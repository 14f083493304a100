/* ops_binary.c - binary elementwise ops: arithmetic with broadcasting
 * and type promotion (torch.result_type's rules, nb_result_type in
 * ops_common.c), rounding divisions, remainder/fmod, atan2, maximum/minimum,
 * lerp, clamp, comparisons, NaN/inf tests, logical and bitwise ops:
 * forward dispatch and backward rules. Each binary op broadcasts,
 * casts its inputs to the promoted dtype through nb_to_dtype (whose backward
 * returns every gradient in its input's dtype), then calls the backend's
 * binary slot. Backward rules follow PyTorch's tools/autograd/derivatives.yaml.
 * Unary ops are in ops_unary.c, casts in ops_cast.c. Kernel:
 * backend/cpu/binary.c. Tests: tests/test_ops_binary.c,
 * tests/test_ops_binary_logic.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* ---- dispatch ------------------------------------------------------------ */

static bool broadcast2(const char *op, const nb_tensor *a, const nb_tensor *b, int *nd, int64_t *shape) {
    if (nb_broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, nd, shape)) return true;
    char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
    nb_set_error(NB_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op, nb_fmt_shape(a->ndim, a->shape, x, sizeof x),
                 nb_fmt_shape(b->ndim, b->shape, y, sizeof y));
    return false;
}

/* out = kop(a, b) for a and b of one dtype; no autograd. */
static nb_tensor *kernel2(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b, nb_dtype out_dt) {
    if (!a || !b) return NULL;
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!broadcast2(op, a, b, &nd, shape)) return NULL;
    nb_tensor *out = nb_tensor_new(nd, shape, out_dt, a->storage->device);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), va = nb_kview_expand(a, nd, shape), vb = nb_kview_expand(b, nd, shape);
    return nb_kernel_binary(NB_BE(a), kop, &o, &va, &vb) == NB_OK ? out : NULL;
}

/* How an op promotes: to the result type, or further to float32 for ints
 * and bool (true division, atan2: torch's "int to float" ops). */
typedef struct binop {
    nb_op_id op;
    nb_binary_op kop;
    bool to_float, compare; /* compare: bool out, no gradient (the row's bw is BW_NONE) */
    bool save_in, save_out;
} binop;

/* Checks, promotes (in[] is replaced by the cast inputs) and broadcasts. */
static bool prepare(const binop *d, nb_tensor **in) {
    int nd;
    int64_t shape[NB_MAX_DIMS];
    const char *name = nb_op_name(d->op);
    if (!nb_check_inputs(name, 2, in) || !broadcast2(name, in[0], in[1], &nd, shape)) return false;
    nb_dtype dt = nb_result_type(in[0], in[1]);
    if (d->to_float && !nb_dtype_is_float(dt)) dt = NB_F32;
    return nb_promote_inputs(2, in, dt);
}

static nb_tensor *binary_impl(const binop *d, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!prepare(d, in)) return NULL;
    nb_tensor *out = kernel2(nb_op_name(d->op), d->kop, in[0], in[1], d->compare ? NB_BOOL : in[0]->dtype);
    if (!out || d->compare) return out;
    bool failed;
    nb_node *n = nb_record(d->op, out, 2, in, &failed);
    if (failed) return NULL;
    if (n && d->save_in) nb_save(n, 0, in[0]), nb_save(n, 1, in[1]);
    if (n && d->save_out) nb_save(n, 2, out);
    return out;
}

static nb_tensor *binary(const binop *d, nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, binary_impl(d, a, b));
}

/* The scalar form: value as a Python float (torch's wrapped number). */
static nb_tensor *binary_scalar(const binop *d, nb_tensor *a, double value) {
    if (!nb_check_inputs(nb_op_name(d->op), 1, &a)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *b = nb_scalar_like(a, value, nb_scalar_result_type(a, value));
    return nb_scope_return(s, b ? binary_impl(d, a, b) : NULL);
}

/* ---- backward helpers ---------------------------------------------------- */

/* NB_OK unless a needed input gradient failed. */
#define GIN_STATUS(n, gin) (((n)->in[0] && !(gin)[0]) || ((n)->in[1] && !(gin)[1]) ? nb_last_status() : NB_OK)

/* Reduces a broadcast gradient to input i's shape. */
static nb_tensor *to_input(nb_node *n, int i, nb_tensor *g) {
    return n->in[i] ? nb_sum_to_shape(g, n->in[i]->ndim, n->in[i]->shape) : NULL;
}

/* g where mask, else 0 (a true 0 even where g is inf or NaN, as where()). */
static nb_tensor *keep(nb_tensor *mask, nb_tensor *g) {
    return g && mask ? nb_where(mask, g, nb_scalar_like(g, 0, g->dtype)) : NULL;
}
static nb_tensor *drop(nb_tensor *mask, nb_tensor *g) {
    return g && mask ? nb_where(mask, nb_scalar_like(g, 0, g->dtype), g) : NULL;
}

/* ---- arithmetic ------------------------------------------------------------ */

nb_status nb_bw_add(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = to_input(n, 0, g);
    gin[1] = to_input(n, 1, g);
    return GIN_STATUS(n, gin);
}

nb_status nb_bw_sub(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = to_input(n, 0, g);
    gin[1] = n->in[1] ? to_input(n, 1, nb_neg(g)) : NULL;
    return GIN_STATUS(n, gin);
}

nb_status nb_bw_mul(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    if (n->in[0]) gin[0] = to_input(n, 0, nb_mul(g, n->saved[1]));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_mul(g, n->saved[0]));
    return GIN_STATUS(n, gin);
}

/* out = a / b: da = g / b, db = -g * out / b */
nb_status nb_bw_div(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *b = n->saved[1], *out = n->saved[2];
    if (n->in[0]) gin[0] = to_input(n, 0, nb_div(g, b));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_neg(nb_div(nb_mul(g, out), b)));
    return GIN_STATUS(n, gin);
}

/* out = a ** b: da = g * b * a ** (b - 1), 0 where b == 0; db = g * out *
 * log(a), 0 where a == 0 and b >= 0 (PyTorch's pow_backward_self/_exponent,
 * so 0 ** 0 and 0 ** 2 give finite gradients instead of NaN). */
nb_status nb_bw_pow(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *a = n->saved[0], *b = n->saved[1], *out = n->saved[2];
    if (n->in[0])
        gin[0] = to_input(n, 0, drop(nb_eq_scalar(b, 0), nb_mul(g, nb_mul(b, nb_pow(a, nb_add_scalar(b, -1))))));
    if (n->in[1]) {
        nb_tensor *zero_base = nb_logical_and(nb_eq_scalar(a, 0), nb_ge_scalar(b, 0));
        gin[1] = to_input(n, 1, nb_mul(g, drop(zero_base, nb_mul(out, nb_log(a)))));
    }
    return GIN_STATUS(n, gin);
}

/* Rounding divisions are piecewise constant: zero gradients, as PyTorch's
 * div_tensor_self_backward / _other_backward with a rounding mode. */
nb_status nb_bw_zero(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    (void)g;
    for (int i = 0; i < 2; i++) {
        nb_tensor *z = n->in[i] ? nb_empty_like(n->in[i]) : NULL;
        nb_kview v;
        if (z && (v = nb_kview_of(z), nb_kernel_fill(NB_BE(z), &v, 0.0)) == NB_OK) gin[i] = z;
    }
    return GIN_STATUS(n, gin);
}

/* remainder: out = a - floor(a / b) * b; fmod: out = a - trunc(a / b) * b.
 * da = g, db = -g * floor (trunc) (a / b) (p.binary.rounding). */
nb_status nb_bw_mod(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = to_input(n, 0, g);
    if (n->in[1])
        gin[1] = to_input(n, 1, nb_neg(nb_mul(g, nb_div_mode(n->saved[0], n->saved[1], n->p.binary.rounding))));
    return GIN_STATUS(n, gin);
}

/* atan2(a, b): da = g * b / (a^2 + b^2), db = -g * a / (a^2 + b^2). */
nb_status nb_bw_atan2(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *a = n->saved[0], *b = n->saved[1];
    nb_tensor *r = nb_div(g, nb_add(nb_mul(a, a), nb_mul(b, b)));
    if (n->in[0]) gin[0] = to_input(n, 0, nb_mul(r, b));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_neg(nb_mul(r, a)));
    return GIN_STATUS(n, gin);
}

/* maximum: the larger input gets g; ties split it evenly; a NaN gives both
 * g (PyTorch: where(a == b, g / 2, g).masked_fill_(a < b, 0), and for b
 * masked where a > b). p.binary.maximum tells maximum from minimum. */
nb_status nb_bw_maxmin(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *a = n->saved[0], *b = n->saved[1];
    nb_tensor *half = nb_where(nb_eq(a, b), nb_mul_scalar(g, 0.5), g);
    nb_tensor *a_loses = n->p.binary.maximum ? nb_lt(a, b) : nb_gt(a, b), *b_loses = n->p.binary.maximum ? nb_gt(a, b) : nb_lt(a, b);
    if (n->in[0]) gin[0] = to_input(n, 0, drop(a_loses, half));
    if (n->in[1]) gin[1] = to_input(n, 1, drop(b_loses, half));
    return GIN_STATUS(n, gin);
}

static const binop ADD = {NB_OP_ADD, NB_BINARY_ADD, false, false, false, false};
static const binop SUB = {NB_OP_SUB, NB_BINARY_SUB, false, false, false, false};
static const binop MUL = {NB_OP_MUL, NB_BINARY_MUL, false, false, true, false};
static const binop DIV = {NB_OP_DIV, NB_BINARY_DIV, true, false, true, true};
static const binop POW = {NB_OP_POW, NB_BINARY_POW, false, false, true, true};
static const binop DIV_TRUNC = {NB_OP_DIV_MODE, NB_BINARY_DIV_TRUNC, false, false, false, false};
static const binop DIV_FLOOR = {NB_OP_DIV_MODE, NB_BINARY_DIV_FLOOR, false, false, false, false};
static const binop REMAINDER = {NB_OP_REMAINDER, NB_BINARY_REMAINDER, false, false, true, false};
static const binop FMOD = {NB_OP_FMOD, NB_BINARY_FMOD, false, false, true, false};
static const binop ATAN2 = {NB_OP_ATAN2, NB_BINARY_ATAN2, true, false, true, false};
static const binop MAXIMUM = {NB_OP_MAXIMUM, NB_BINARY_MAXIMUM, false, false, true, false};
static const binop MINIMUM = {NB_OP_MINIMUM, NB_BINARY_MINIMUM, false, false, true, false};

nb_tensor *nb_add(nb_tensor *a, nb_tensor *b) { return binary(&ADD, a, b); }
nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b) { return binary(&SUB, a, b); }
nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b) { return binary(&MUL, a, b); }
nb_tensor *nb_div(nb_tensor *a, nb_tensor *b) { return binary(&DIV, a, b); }
nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b) { return binary(&POW, a, b); }
nb_tensor *nb_atan2(nb_tensor *a, nb_tensor *b) { return binary(&ATAN2, a, b); }

nb_tensor *nb_div_mode(nb_tensor *a, nb_tensor *b, nb_rounding_mode mode) {
    switch (mode) {
    case NB_ROUNDING_NONE: return nb_div(a, b);
    case NB_ROUNDING_TRUNC: return binary(&DIV_TRUNC, a, b);
    case NB_ROUNDING_FLOOR: return binary(&DIV_FLOOR, a, b);
    }
    return NB_FAIL(NB_ERR_INVALID_ARG, "div: bad rounding mode %d", (int)mode);
}
nb_tensor *nb_floor_divide(nb_tensor *a, nb_tensor *b) { return nb_div_mode(a, b, NB_ROUNDING_FLOOR); }

/* Records the rounding of the mod, or max vs min, on the node. */
static nb_tensor *with_rounding(nb_tensor *out, nb_rounding_mode r) {
    if (out && out->grad_fn) out->grad_fn->p.binary.rounding = r;
    return out;
}
static nb_tensor *with_maximum(nb_tensor *out, bool maximum) {
    if (out && out->grad_fn) out->grad_fn->p.binary.maximum = maximum;
    return out;
}
nb_tensor *nb_remainder(nb_tensor *a, nb_tensor *b) { return with_rounding(binary(&REMAINDER, a, b), NB_ROUNDING_FLOOR); }
nb_tensor *nb_fmod(nb_tensor *a, nb_tensor *b) { return with_rounding(binary(&FMOD, a, b), NB_ROUNDING_TRUNC); }
nb_tensor *nb_remainder_scalar(nb_tensor *a, double b) {
    return with_rounding(binary_scalar(&REMAINDER, a, b), NB_ROUNDING_FLOOR);
}
nb_tensor *nb_fmod_scalar(nb_tensor *a, double b) { return with_rounding(binary_scalar(&FMOD, a, b), NB_ROUNDING_TRUNC); }
nb_tensor *nb_maximum(nb_tensor *a, nb_tensor *b) { return with_maximum(binary(&MAXIMUM, a, b), true); }
nb_tensor *nb_minimum(nb_tensor *a, nb_tensor *b) { return with_maximum(binary(&MINIMUM, a, b), false); }

/* ---- lerp (composite) --------------------------------------------------- */

/* Gradients as derivatives.yaml's lerp: start (1 - w) g, end w g, weight
 * (end - start) g. A rule of its own rather than the composite's: through
 * where(), the branch not taken contributes 0 * (end - start), NaN where
 * end - start is infinite (PyTorch gives +-inf there). */
nb_status nb_bw_lerp(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *start = n->saved[0], *end = n->saved[1], *w = n->saved[2];
    if (n->in[0]) gin[0] = to_input(n, 0, nb_mul(g, nb_add_scalar(nb_neg(w), 1)));
    if (n->in[1]) gin[1] = to_input(n, 1, nb_mul(g, w));
    if (n->in[2]) gin[2] = to_input(n, 2, nb_mul(g, nb_sub(end, start)));
    return (n->in[0] && !gin[0]) || (n->in[1] && !gin[1]) || (n->in[2] && !gin[2]) ? nb_last_status() : NB_OK;
}

/* PyTorch's formula, exact at both ends: start + w * (end - start) for
 * |w| < 0.5, else end - (end - start) * (1 - w); computed without the tape,
 * then recorded as one node. */
static nb_tensor *lerp_impl(nb_tensor *start, nb_tensor *end, nb_tensor *w) {
    nb_tensor *in[3] = {start, end, w};
    if (!nb_check_inputs("lerp", 3, in) || !nb_check_dtypes(NB_OP_LERP, 3, in)) return NULL;
    int nd1, nd;
    int64_t s1[NB_MAX_DIMS], shape[NB_MAX_DIMS];
    if (!broadcast2("lerp", start, end, &nd1, s1)) return NULL;
    if (!nb_broadcast_shapes(nd1, s1, w->ndim, w->shape, &nd, shape)) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "lerp: weight %s does not broadcast with start/end %s",
                       nb_fmt_shape(w->ndim, w->shape, x, sizeof x), nb_fmt_shape(nd1, s1, y, sizeof y));
    }
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *d = nb_sub(end, start);
    nb_tensor *small = nb_logical_and(nb_gt_scalar(w, -0.5), nb_lt_scalar(w, 0.5));
    nb_tensor *lo = nb_add(start, nb_mul(w, d));
    nb_tensor *hi = nb_sub(end, nb_mul(d, nb_add_scalar(nb_neg(w), 1)));
    nb_tensor *out = nb_where(small, lo, hi);
    nb_set_grad_enabled(prev);
    if (!out) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_LERP, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, start), nb_save(n, 1, end), nb_save(n, 2, w);
    return out;
}

nb_tensor *nb_lerp(nb_tensor *start, nb_tensor *end, nb_tensor *weight) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, lerp_impl(start, end, weight));
}

nb_tensor *nb_lerp_scalar(nb_tensor *start, nb_tensor *end, double w) {
    nb_tensor *in[2] = {start, end};
    if (!nb_check_inputs("lerp", 2, in) || !nb_check_dtypes(NB_OP_LERP, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *d = nb_sub(end, start);
    nb_tensor *r = fabs(w) < 0.5 ? nb_add(start, nb_mul_scalar(d, w)) : nb_sub(end, nb_mul_scalar(d, 1 - w));
    return nb_scope_return(s, r);
}

/* ---- clamp ----------------------------------------------------------------- */

/* PyTorch's clamp_backward and clamp_backward_min_max: x gets g where
 * lo <= x <= hi; lo where x < lo (and lo < hi when both); hi where x > hi
 * (or hi < lo). saved: x, lo, hi (lo/hi NULL when absent). */
nb_status nb_bw_clamp(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *lo = n->saved[1], *hi = n->saved[2];
    if (n->in[0]) {
        nb_tensor *m = lo && hi ? nb_logical_and(nb_ge(x, lo), nb_le(x, hi)) : lo ? nb_ge(x, lo) : nb_le(x, hi);
        if (!(gin[0] = nb_sum_to_shape(keep(m, g), x->ndim, x->shape))) return nb_last_status();
    }
    if (n->in[1]) {
        nb_tensor *m = hi ? nb_logical_and(nb_lt(x, lo), nb_lt(lo, hi)) : nb_lt(x, lo);
        if (!(gin[1] = nb_sum_to_shape(keep(m, g), lo->ndim, lo->shape))) return nb_last_status();
    }
    if (n->in[2]) {
        nb_tensor *m = lo ? nb_logical_or(nb_gt(x, hi), nb_lt(hi, lo)) : nb_gt(x, hi);
        if (!(gin[2] = nb_sum_to_shape(keep(m, g), hi->ndim, hi->shape))) return nb_last_status();
    }
    return NB_OK;
}

/* torch.result_type over n tensors: dimensioned ones joined, 0-dim ones
 * joined, then the two combined as nb_result_type does. */
static nb_dtype result_type_n(int n, nb_tensor *const *ts) {
    nb_dtype r[2] = {NB_DTYPE_COUNT, NB_DTYPE_COUNT}; /* [0] 0-dim, [1] dimensioned */
    for (int i = 0; i < n; i++) {
        nb_dtype *p = &r[ts[i]->ndim > 0];
        *p = *p == NB_DTYPE_COUNT ? ts[i]->dtype : nb_promote_types(*p, ts[i]->dtype);
    }
    if (r[0] == NB_DTYPE_COUNT || r[1] == NB_DTYPE_COUNT) return r[0] == NB_DTYPE_COUNT ? r[1] : r[0];
    nb_tensor zero = {.ndim = 0, .dtype = r[0]}, dim = {.ndim = 1, .dtype = r[1]};
    return nb_result_type(&zero, &dim);
}

static nb_tensor *clamp_impl(nb_tensor *x, nb_tensor *lo, nb_tensor *hi) {
    if (!nb_check_inputs("clamp", 1, &x)) return NULL;
    if (!lo && !hi) return NB_FAIL(NB_ERR_INVALID_ARG, "clamp: at least one of min and max must be given");
    nb_tensor *in[3] = {x, lo, hi}, *pin[3];
    int np = 0;
    for (int i = 0; i < 3; i++)
        if (in[i]) pin[np++] = in[i];
    if (!nb_check_inputs("clamp", np, pin)) return NULL;
    int nd = x->ndim;
    int64_t shape[NB_MAX_DIMS], next[NB_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
    for (int i = 1; i < np; i++, memcpy(shape, next, sizeof shape))
        if (!nb_broadcast_shapes(nd, shape, pin[i]->ndim, pin[i]->shape, &nd, next)) {
            char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
            return NB_FAIL(NB_ERR_SHAPE, "clamp: bound %s does not broadcast with input %s",
                           nb_fmt_shape(pin[i]->ndim, pin[i]->shape, a, sizeof a),
                           nb_fmt_shape(x->ndim, x->shape, b, sizeof b));
        }
    nb_dtype dt = result_type_n(np, pin);
    if (!nb_promote_inputs(np, pin, dt)) return NULL;
    for (int i = 0, j = 0; i < 3; i++)
        if (in[i]) in[i] = pin[j++];
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *out = in[1] ? nb_maximum(in[0], in[1]) : in[0];
    if (out && in[2]) out = nb_minimum(out, in[2]);
    nb_set_grad_enabled(prev);
    if (!out) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_CLAMP, out, 3, in, &failed);
    if (failed) return NULL;
    for (int i = 0; n && i < 3; i++)
        if (in[i]) nb_save(n, i, in[i]);
    return out;
}

nb_tensor *nb_clamp(nb_tensor *x, nb_tensor *min, nb_tensor *max) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, clamp_impl(x, min, max));
}

nb_tensor *nb_clamp_scalar(nb_tensor *x, double min, double max) {
    if (!nb_check_inputs("clamp", 1, &x)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_dtype dt = nb_promote_types(nb_scalar_result_type(x, isnan(min) ? 0 : min),
                                   nb_scalar_result_type(x, isnan(max) ? 0 : max));
    nb_tensor *lo = isnan(min) ? NULL : nb_scalar_like(x, min, dt), *hi = isnan(max) ? NULL : nb_scalar_like(x, max, dt);
    return nb_scope_return(s, clamp_impl(x, lo, hi));
}

/* ---- comparisons, NaN tests ----------------------------------------------------- */

#define CMP(NAME, KOP)                                                                                \
    static const binop CMP_##KOP = {NB_OP_##KOP, NB_BINARY_##KOP, false, true, false, false};         \
    nb_tensor *nb_##NAME(nb_tensor *a, nb_tensor *b) { return binary(&CMP_##KOP, a, b); }            \
    nb_tensor *nb_##NAME##_scalar(nb_tensor *a, double b) { return binary_scalar(&CMP_##KOP, a, b); }
CMP(eq, EQ)
CMP(ne, NE)
CMP(gt, GT)
CMP(ge, GE)
CMP(lt, LT)
CMP(le, LE)

/* A bool tensor of t's shape filled with v (the answer for integer dtypes). */
static nb_tensor *bool_full(nb_tensor *t, bool v) {
    nb_tensor *r = nb_tensor_new(t->ndim, t->shape, NB_BOOL, t->storage->device);
    if (!r) return NULL;
    nb_kview k = nb_kview_of(r);
    return nb_kernel_fill(NB_BE(r), &k, v) == NB_OK ? r : NULL;
}

typedef enum { IS_NAN, IS_INF, IS_FINITE } nan_kind;

static nb_tensor *nan_test_impl(const char *op, nb_tensor *x, nan_kind which) {
    if (!nb_check_inputs(op, 1, &x)) return NULL;
    if (!nb_dtype_is_float(x->dtype)) return bool_full(x, which == IS_FINITE);
    if (x->dtype != NB_F32 && x->dtype != NB_F64 && !(x = nb_to_dtype(x, NB_F32))) return NULL; /* exact */
    x = nb_detach(x);
    switch (which) {
    case IS_NAN: return nb_ne(x, x);
    case IS_INF: return nb_logical_or(nb_eq_scalar(x, INFINITY), nb_eq_scalar(x, -INFINITY));
    case IS_FINITE: return nb_eq_scalar(nb_sub(x, x), 0);      /* inf - inf and NaN give NaN */
    }
    return NULL;
}

static nb_tensor *nan_test(const char *op, nb_tensor *x, nan_kind which) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nan_test_impl(op, x, which));
}
nb_tensor *nb_isnan(nb_tensor *x) { return nan_test("isnan", x, IS_NAN); }
nb_tensor *nb_isinf(nb_tensor *x) { return nan_test("isinf", x, IS_INF); }
nb_tensor *nb_isfinite(nb_tensor *x) { return nan_test("isfinite", x, IS_FINITE); }

/* ---- logical and bitwise ops ---------------------------------------------------- */

/* x != 0 as bool (NaN is true), by the cast kernel. */
static nb_tensor *truth(nb_tensor *x) { return x->dtype == NB_BOOL ? x : nb_to_dtype(x, NB_BOOL); }

static nb_tensor *logical_impl(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs(op, 2, in)) return NULL;
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!broadcast2(op, a, b, &nd, shape) || !(a = truth(a)) || !(b = truth(b))) return NULL;
    return kernel2(op, kop, a, b, NB_BOOL);
}

#define LOGICAL(NAME, KOP)                                                                     \
    nb_tensor *nb_logical_##NAME(nb_tensor *a, nb_tensor *b) {                                \
        nb_scope *s = nb_op_scope_begin();                                                        \
        return nb_scope_return(s, logical_impl("logical_" #NAME, NB_BINARY_##KOP, a, b));     \
    }
LOGICAL(and, BITWISE_AND)
LOGICAL(or, BITWISE_OR)
LOGICAL(xor, BITWISE_XOR)

nb_tensor *nb_logical_not(nb_tensor *x) {
    if (!nb_check_inputs("logical_not", 1, &x)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *t = truth(x);
    return nb_scope_return(s, t ? kernel2("logical_not", NB_BINARY_BITWISE_XOR, t, nb_scalar_like(t, 1, NB_BOOL), NB_BOOL)
                                : NULL);
}

static nb_tensor *bitwise_impl(const char *op, nb_binary_op kop, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_check_inputs(op, 2, in) || !broadcast2(op, a, b, &nd, shape)) return NULL;
    nb_dtype dt = nb_result_type(a, b);
    bool shift = kop == NB_BINARY_LSHIFT || kop == NB_BINARY_RSHIFT;
    if (nb_dtype_is_float(dt) || (shift && dt == NB_BOOL))
        return NB_FAIL(NB_ERR_DTYPE, "%s: needs integer%s inputs, got %s and %s", op, shift ? "" : " or bool",
                       nb_dtype_name(a->dtype), nb_dtype_name(b->dtype));
    return nb_promote_inputs(2, in, dt) ? kernel2(op, kop, in[0], in[1], dt) : NULL;
}

#define BITWISE(NAME, KOP)                                                                     \
    nb_tensor *nb_bitwise_##NAME(nb_tensor *a, nb_tensor *b) {                                \
        nb_scope *s = nb_op_scope_begin();                                                        \
        return nb_scope_return(s, bitwise_impl("bitwise_" #NAME, NB_BINARY_##KOP, a, b));     \
    }
BITWISE(and, BITWISE_AND)
BITWISE(or, BITWISE_OR)
BITWISE(xor, BITWISE_XOR)
BITWISE(left_shift, LSHIFT)
BITWISE(right_shift, RSHIFT)

/* The scalar forms: b as a Python int (nb_scalar_result_type). */
#define BITWISE_SCALAR(NAME, KOP)                                                              \
    nb_tensor *nb_bitwise_##NAME##_scalar(nb_tensor *a, int64_t b) {                          \
        if (!nb_check_inputs("bitwise_" #NAME, 1, &a)) return NULL;                            \
        nb_scope *s = nb_op_scope_begin();                                                        \
        nb_tensor *bt = nb_scalar_like(a, (double)b, nb_scalar_result_type(a, (double)b));     \
        return nb_scope_return(s, bt ? bitwise_impl("bitwise_" #NAME, NB_BINARY_##KOP, a, bt) : NULL); \
    }
BITWISE_SCALAR(and, BITWISE_AND)
BITWISE_SCALAR(or, BITWISE_OR)
BITWISE_SCALAR(xor, BITWISE_XOR)
BITWISE_SCALAR(left_shift, LSHIFT)
BITWISE_SCALAR(right_shift, RSHIFT)

/* ~x = x ^ all-ones (-1 fills every bit of a signed or unsigned type, and
 * true for bool). */
nb_tensor *nb_bitwise_not(nb_tensor *x) {
    if (!nb_check_inputs("bitwise_not", 1, &x)) return NULL;
    if (nb_dtype_is_float(x->dtype))
        return NB_FAIL(NB_ERR_DTYPE, "bitwise_not: needs integer or bool input, got %s", nb_dtype_name(x->dtype));
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, kernel2("bitwise_not", NB_BINARY_BITWISE_XOR, x, nb_scalar_like(x, -1, x->dtype), x->dtype));
}

/* ---- isclose / allclose ------------------------------------------------------ */

/* PyTorch's isclose: a == b, or (equal_nan) both NaN, or |a - b| finite and
 * <= atol + |rtol b| (bool promoted to float32 first; integers subtract in
 * their dtype, as PyTorch). */
static nb_tensor *isclose_impl(nb_tensor *a, nb_tensor *b, double rtol, double atol, bool equal_nan) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("isclose", 2, in) || !nb_check_dtypes(NB_OP_ISCLOSE, 2, in)) return NULL;
    if (!(rtol >= 0) || !(atol >= 0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "isclose: rtol %g and atol %g must be non-negative", rtol, atol);
    nb_tensor *close = nb_eq(a, b);
    if (equal_nan && nb_dtype_is_float(a->dtype)) close = nb_logical_or(close, nb_logical_and(nb_isnan(a), nb_isnan(b)));
    if (rtol == 0 && atol == 0) return close;
    nb_tensor *ca = a->dtype == NB_BOOL ? nb_to_dtype(a, NB_F32) : a, *cb = b->dtype == NB_BOOL ? nb_to_dtype(b, NB_F32) : b;
    nb_tensor *allowed = nb_add_scalar(nb_abs(nb_mul_scalar(cb, rtol)), atol);
    nb_tensor *actual = nb_abs(nb_sub(ca, cb));
    return nb_logical_or(close, nb_logical_and(nb_isfinite(actual), nb_le(actual, allowed)));
}

nb_tensor *nb_isclose(nb_tensor *a, nb_tensor *b, double rtol, double atol, bool equal_nan) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, isclose_impl(a, b, rtol, atol, equal_nan));
}

nb_status nb_allclose(nb_tensor *a, nb_tensor *b, double rtol, double atol, bool equal_nan, bool *result) {
    if (result) *result = false;
    if (!result) return nb_set_error(NB_ERR_INVALID_ARG, "allclose: NULL result");
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *all = nb_all(nb_isclose(a, b, rtol, atol, equal_nan), NULL, 0, false);
    double v = all ? nb_item(all) : NAN;
    nb_scope_end(s);
    if (isnan(v)) return nb_last_status();
    *result = v != 0;
    return NB_OK;
}

/* ---- xlogy / hypot (composites) ------------------------------------------------------------ */

/* x * log(y) with y replaced by 1 where x == 0 and y <= 0: the value is
 * then 0 there (NaN with a NaN y, from 0 * NaN), and the gradients are
 * PyTorch's (derivatives.yaml: d/dx = log(y), 0 where x == 0 and y <= 0;
 * d/dy = x / y) with no 0 * inf in the graph; only at x = y = 0 is d/dy 0
 * where PyTorch's is NaN. */
nb_tensor *nb_xlogy(nb_tensor *x, nb_tensor *y) {
    nb_tensor *in[2] = {x, y};
    if (!nb_check_inputs("xlogy", 2, in) || !nb_check_dtypes(NB_OP_XLOGY, 2, in)) return NULL;
    nb_dtype dt = nb_result_type(x, y);
    if (!nb_dtype_is_float(dt)) dt = NB_F32;
    nb_scope *s = nb_op_scope_begin();
    if (!nb_promote_inputs(2, in, dt)) return nb_scope_return(s, NULL);
    x = in[0], y = in[1];
    nb_tensor *zero_x = nb_logical_and(nb_eq_scalar(x, 0), nb_le_scalar(y, 0));
    nb_tensor *ys = nb_where(zero_x, nb_scalar_like(y, 1, dt), y);
    return nb_scope_return(s, nb_mul(x, nb_log(ys)));
}

/* sqrt(a^2 + b^2) (std::hypot avoids overflowing a^2 for |a| > ~1e19 in
 * float32; this does not). Gradient a / hypot, b / hypot as PyTorch's (NaN
 * at a = b = 0 in both). */
nb_tensor *nb_hypot(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("hypot", 2, in) || !nb_check_dtypes(NB_OP_HYPOT, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_sqrt(nb_add(nb_mul(a, a), nb_mul(b, b))));
}
