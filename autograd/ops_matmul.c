/* ops_matmul.c - matmul (torch.matmul semantics, batched with broadcasting)
 * bmm, and linear (F.linear, fused bias), forward and backward, through the
 * backend's GEMM. Kernel: backend/cpu/matmul.c. Tests: tests/test_ops_matmul.c. */
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* The kernel needs unit stride in one of the two matrix dims. */
static nb_tensor *gemm_ready(nb_tensor *t) {
    int d = t->ndim;
    bool ok = t->strides[d - 1] == 1 || t->strides[d - 2] == 1 || t->shape[d - 1] == 1 || t->shape[d - 2] == 1;
    if (ok) {
        nb_retain(t);
        return nb_scope_adopt(t);
    }
    return nb_contiguous(t);
}

/* c = a @ b for a [..., n, k], b [..., k, m] (ndim >= 2), no autograd;
 * c in dtype dt: a's, or float32 for 16-bit a and b (the matmul slot's
 * float32 sums, not rounded to 16 bits). */
static nb_tensor *gemm_nd_as(nb_tensor *a, nb_tensor *b, nb_dtype dt) {
    if (!a || !b) return NULL; /* a failed transpose or copy upstream (its error kept) */
    char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
    int na = a->ndim, nbd = b->ndim;
    if (a->shape[na - 1] != b->shape[nbd - 2])
        return NB_FAIL(NB_ERR_SHAPE, "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                       nb_fmt_shape(na, a->shape, x, sizeof x), nb_fmt_shape(nbd, b->shape, y, sizeof y),
                       (long long)a->shape[na - 1], (long long)b->shape[nbd - 2]);
    int nd;
    int64_t batch[NB_MAX_DIMS], shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(na - 2, a->shape, nbd - 2, b->shape, &nd, batch))
        return NB_FAIL(NB_ERR_SHAPE, "matmul: batch dims of %s and %s do not broadcast",
                       nb_fmt_shape(na, a->shape, x, sizeof x), nb_fmt_shape(nbd, b->shape, y, sizeof y));
    memcpy(shape, batch, sizeof(int64_t) * (size_t)nd);
    nb_tensor *ar = gemm_ready(a), *br = gemm_ready(b);
    if (!ar || !br) return NULL;
    int64_t sa[NB_MAX_DIMS], sb[NB_MAX_DIMS];
    memcpy(sa, batch, sizeof(int64_t) * (size_t)nd);
    memcpy(sb, batch, sizeof(int64_t) * (size_t)nd);
    sa[nd] = a->shape[na - 2], sa[nd + 1] = a->shape[na - 1];
    sb[nd] = b->shape[nbd - 2], sb[nd + 1] = b->shape[nbd - 1];
    shape[nd] = sa[nd], shape[nd + 1] = sb[nd + 1];
    nb_tensor *c = nb_tensor_new(nd + 2, shape, dt, a->storage->device);
    if (!c) return NULL;
    nb_kview vc = nb_kview_of(c), va = nb_kview_expand(ar, nd + 2, sa), vb = nb_kview_expand(br, nd + 2, sb);
    return nb_kernel_matmul(NB_BE(a), &vc, &va, &vb, 1.0, 0.0) == NB_OK ? c : NULL;
}

static nb_tensor *gemm_nd(nb_tensor *a, nb_tensor *b) { return gemm_nd_as(a, b, a ? a->dtype : NB_F32); }

nb_status nb_bw_matmul(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *a = n->saved[0], *b = n->saved[1];
    if (nb_needs_grad(3, (nb_tensor *[]){g, a, b})) { /* create_graph: recorded matmuls */
        if (n->in[0]) gin[0] = nb_sum_to_shape(nb_matmul(g, nb_transpose(b, -1, -2)), a->ndim, a->shape);
        if (n->in[1]) gin[1] = nb_sum_to_shape(nb_matmul(nb_transpose(a, -1, -2), g), b->ndim, b->shape);
        return (n->in[0] && !gin[0]) || (n->in[1] && !gin[1]) ? nb_last_status() : NB_OK;
    }
    if (n->in[0]) gin[0] = nb_sum_to_shape(gemm_nd(g, nb_transpose(b, -1, -2)), a->ndim, a->shape);
    if (n->in[1]) gin[1] = nb_sum_to_shape(gemm_nd(nb_transpose(a, -1, -2), g), b->ndim, b->shape);
    return (n->in[0] && !gin[0]) || (n->in[1] && !gin[1]) ? nb_last_status() : NB_OK;
}

static nb_tensor *matmul_nd(nb_tensor *a, nb_tensor *b) {
    if (!a || !b) return NULL;
    /* [..., n, k] @ [k, m]: one GEMM over the folded rows, as PyTorch does */
    if (a->ndim > 2 && b->ndim == 2) {
        /* the row count, not -1: -1 cannot be inferred when k == 0 */
        int64_t rows[2] = {nb_shape_numel(a->ndim - 1, a->shape), a->shape[a->ndim - 1]};
        nb_tensor *a2 = nb_reshape(a, 2, rows);
        nb_tensor *c = a2 ? matmul_nd(a2, b) : NULL;
        if (!c) return NULL;
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
        shape[a->ndim - 1] = b->shape[1];
        return nb_reshape(c, a->ndim, shape);
    }
    nb_tensor *c = gemm_nd(a, b);
    nb_tensor *in[2] = {a, b};
    bool failed;
    nb_node *n = c ? nb_record(NB_OP_MATMUL, c, 2, in, &failed) : NULL;
    if (c && !n && failed) return NULL;
    if (n) nb_save(n, 0, a), nb_save(n, 1, b);
    return c;
}

static nb_tensor *matmul_impl(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("matmul", 2, in) || !nb_check_dtypes(NB_OP_MATMUL, 2, in)) return NULL;
    if (a->ndim == 0 || b->ndim == 0) return NB_FAIL(NB_ERR_SHAPE, "matmul: both arguments need at least 1 dim");
    if (a->ndim == 1 && b->ndim == 1) {
        nb_tensor *r = matmul_nd(nb_unsqueeze(a, 0), nb_unsqueeze(b, 1));
        return r ? nb_reshape(r, 0, NULL) : NULL;
    }
    if (a->ndim == 1) return nb_squeeze(matmul_impl(nb_unsqueeze(a, 0), b), -2);
    if (b->ndim == 1) return nb_squeeze(matmul_impl(a, nb_unsqueeze(b, 1)), -1);
    return matmul_nd(a, b);
}

/* ---- linear ------------------------------------------------------------------ */

/* w the transpose of a contiguous [in, out] weight (GPT-2's Conv1D,
 * F.linear(x, W.t())): its gradient is computed as dw^T = x^T g, written
 * as [in, out] and handed back transposed, so it arrives in the weight's
 * own layout rather than through a transposing copy. */
static bool col_major(const nb_tensor *w) {
    return w->ndim == 2 && w->shape[0] > 1 && w->shape[1] > 1 && w->strides[0] == 1 && w->strides[1] == w->shape[0];
}

/* dw and db = g's column sums in one backend call (the bias gradient in
 * the GEMM's epilogue), both in dtype dt (g's, or float32): dw = g^T x
 * (matmul_bgrad), or for a col_major w dw^T = x^T g (matmul_bgrad_b);
 * false where the backend has no such slot (nothing done). */
static bool linear_wgrad_fused(nb_tensor *g, nb_tensor *x, nb_tensor *w, nb_dtype dt, nb_tensor **gw,
                               nb_tensor **gb) {
    const bool cm = col_major(w);
    if (cm ? !nb_kernel_has(NB_BE(g), matmul_bgrad_b) : !nb_kernel_has(NB_BE(g), matmul_bgrad)) return false;
    nb_tensor *t = nb_transpose(cm ? x : g, 0, 1), *ar = t ? gemm_ready(t) : NULL, *br = gemm_ready(cm ? g : x);
    nb_tensor *c = nb_tensor_new(2, (int64_t[]){w->shape[cm], w->shape[!cm]}, dt, g->storage->device);
    *gb = nb_tensor_new(1, w->shape, dt, g->storage->device);
    if (!ar || !br || !c || !*gb) return *gw = *gb = NULL, true;
    nb_kview vc = nb_kview_of(c), vs = nb_kview_of(*gb), va = nb_kview_of(ar), vb = nb_kview_of(br);
    nb_status st = cm ? nb_kernel_matmul_bgrad_b(NB_BE(g), &vc, &va, &vb, &vs)
                      : nb_kernel_matmul_bgrad(NB_BE(g), &vc, &va, &vb, &vs);
    *gw = st ? NULL : cm ? nb_transpose(c, 0, 1) : c;
    if (!*gw) *gb = NULL;
    return true;
}

/* The dtype of the gradient written for input i: float32 for a
 * 16-bit input that autocast cast from float32 (its float32 sums kept
 * rather than rounded to 16 bits and cast back: PyTorch's autocast
 * rounds them), the input's own otherwise. */
static nb_dtype grad_dtype(const nb_node *n, int i, bool graph) {
    return !graph && nb_grad_f32_ok(n, i) ? NB_F32 : n->in[i]->dtype;
}

/* x2 [n, in], w [out, in], bias [out]: dx = g w, dw = g^T x2, db = sum_rows(g) */
nb_status nb_bw_linear(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = n->saved[0], *w = n->saved[1];
    bool graph = nb_needs_grad(3, (nb_tensor *[]){g, x, w}); /* create_graph: recorded matmuls */
    if (n->in[0] && !(gin[0] = graph ? nb_matmul(g, w) : gemm_nd_as(g, w, grad_dtype(n, 0, false))))
        return nb_last_status();
    nb_dtype dt_w = n->in[1] ? grad_dtype(n, 1, graph) : g->dtype, dt_b = n->in[2] ? grad_dtype(n, 2, graph) : g->dtype;
    /* one GEMM for both: in float32 if either wants it, the other then narrowed (a 16-bit leaf beside a cast) */
    nb_dtype dt_f = dt_w == NB_F32 || dt_b == NB_F32 ? NB_F32 : g->dtype;
    if (!graph && n->in[1] && n->in[2] && linear_wgrad_fused(g, x, w, dt_f, &gin[1], &gin[2])) {
        if (gin[1] && gin[1]->dtype != dt_w) gin[1] = nb_to_dtype(gin[1], dt_w);
        if (gin[1] && gin[2]->dtype != dt_b) gin[2] = nb_to_dtype(gin[2], dt_b);
        return gin[1] && gin[2] ? NB_OK : nb_last_status();
    }
    if (n->in[1] && graph) gin[1] = nb_matmul(nb_transpose(g, 0, 1), x);
    else if (n->in[1] && col_major(w)) {
        nb_tensor *gwt = gemm_nd_as(nb_transpose(x, 0, 1), g, dt_w);
        gin[1] = gwt ? nb_transpose(gwt, 0, 1) : NULL;
    } else if (n->in[1]) gin[1] = gemm_nd_as(nb_transpose(g, 0, 1), x, dt_w);
    if (n->in[2]) gin[2] = nb_sum_to_shape_as(g, 1, &w->shape[0], dt_b);
    for (int i = 0; i < 3; i++)
        if (n->in[i] && !gin[i]) return nb_last_status();
    return NB_OK;
}

static nb_tensor *linear_2d(nb_tensor *x, nb_tensor *w, nb_tensor *bias) {
    int64_t shape[2] = {x->shape[0], w->shape[0]};
    nb_tensor *out = nb_tensor_new(2, shape, x->dtype, x->storage->device);
    nb_tensor *xr = gemm_ready(x), *wr = gemm_ready(w);
    if (!out || !xr || !wr) return NULL;
    int64_t wt_shape[2] = {w->shape[1], w->shape[0]}, wt_strides[2] = {wr->strides[1], wr->strides[0]};
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xr), vw = nb_kview_of(wr);
    vw.shape[0] = wt_shape[0], vw.shape[1] = wt_shape[1], vw.strides[0] = wt_strides[0], vw.strides[1] = wt_strides[1];
    double beta = 0;
    if (bias && nb_kernel_has(NB_BE(x), addmm) && nb_is_contiguous(bias)) { /* the bias in the GEMM's epilogue */
        nb_kview vb = nb_kview_of(bias);
        if (nb_kernel_addmm(NB_BE(x), &vo, &vx, &vw, &vb) != NB_OK) return NULL;
    } else {
        if (bias) { /* the GEMM accumulates onto the broadcast bias */
            nb_kview o = nb_kview_of(out), vb = nb_kview_expand(bias, 2, shape);
            if (nb_kernel_copy(NB_BE(x), &o, &vb) != NB_OK) return NULL;
            beta = 1;
        }
        if (nb_kernel_matmul(NB_BE(x), &vo, &vx, &vw, 1.0, beta) != NB_OK) return NULL;
    }
    nb_tensor *in[3] = {x, w, bias};
    bool failed;
    nb_node *n = nb_record(NB_OP_LINEAR, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, x), nb_save(n, 1, w);
    return out;
}

static nb_tensor *linear_impl(nb_tensor *x, nb_tensor *weight, nb_tensor *bias) {
    nb_tensor *in[3] = {x, weight, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_check_inputs("linear", n_in, in) || !nb_check_dtypes(NB_OP_LINEAR, n_in, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (weight->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != weight->shape[1] ||
        (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])))
        return NB_FAIL(NB_ERR_SHAPE, "linear: input %s does not fit weight %s (and bias [out])",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                       nb_fmt_shape(weight->ndim, weight->shape, b, sizeof b));
    if (x->ndim == 2) return linear_2d(x, weight, bias);
    int64_t rows[2] = {nb_shape_numel(x->ndim - 1, x->shape), weight->shape[1]}, shape[NB_MAX_DIMS];
    nb_tensor *x2 = nb_reshape(x, 2, rows);
    nb_tensor *y = x2 ? linear_2d(x2, weight, bias) : NULL;
    if (!y) return NULL;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = weight->shape[0];
    return nb_reshape(y, x->ndim, shape);
}

nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_autocast_inputs(NB_OP_MATMUL, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, matmul_impl(in[0], in[1]));
}

nb_tensor *nb_linear(nb_tensor *x, nb_tensor *weight, nb_tensor *bias) {
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_LINEAR, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, linear_impl(in[0], in[1], in[2]));
}

/* ---- bmm ------------------------------------------------------------------------------------ */

nb_tensor *nb_bmm(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("bmm", 2, in) || !nb_check_dtypes(NB_OP_BMM, 2, in)) return NULL;
    if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1]) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "bmm: shapes %s and %s; expected [B, n, k] and [B, k, m]",
                       nb_fmt_shape(a->ndim, a->shape, x, sizeof x), nb_fmt_shape(b->ndim, b->shape, y, sizeof y));
    }
    return nb_matmul(a, b);
}

/* ---- bilinear ----------------------------------------------------------------------- */

nb_tensor *nb_bilinear(nb_tensor *x1, nb_tensor *x2, nb_tensor *weight, nb_tensor *bias) {
    nb_tensor *in[4] = {x1, x2, weight, bias};
    int n = bias ? 4 : 3;
    if (!nb_autocast_inputs(NB_OP_BILINEAR, n, in) || !nb_check_inputs("bilinear", n, in) ||
        !nb_check_dtypes(NB_OP_BILINEAR, n, in))
        return NULL;
    x1 = in[0], x2 = in[1], weight = in[2], bias = bias ? in[3] : NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    int64_t I1 = x1->ndim ? x1->shape[x1->ndim - 1] : -1, I2 = x2->ndim ? x2->shape[x2->ndim - 1] : -1;
    bool lead_ok = x1->ndim == x2->ndim && x1->ndim >= 1 &&
                   !memcmp(x1->shape, x2->shape, sizeof(int64_t) * (size_t)(x1->ndim - 1));
    if (!lead_ok || weight->ndim != 3 || weight->shape[1] != I1 || weight->shape[2] != I2 ||
        (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])))
        return NB_FAIL(NB_ERR_SHAPE, "bilinear: input1 %s, input2 %s (the same but the last dim) and weight %s "
                       "(out, in1, in2) do not fit%s", nb_fmt_shape(x1->ndim, x1->shape, a, sizeof a),
                       nb_fmt_shape(x2->ndim, x2->shape, b, sizeof b), nb_fmt_shape(weight->ndim, weight->shape, c, sizeof c),
                       bias ? " (or bias is not [out])" : "");
    int64_t O = weight->shape[0], N = I1 ? nb_numel(x1) / I1 : 0;
    nb_scope *s = nb_op_scope_begin();
    /* y[n, o] = sum_ij x1[n, i] W[o, i, j] x2[n, j]: (x1 @ W as [I1, O I2]) then a product with x2 summed over j */
    nb_tensor *w = nb_reshape(nb_contiguous(nb_permute(weight, (int[]){1, 0, 2})), NB_SHAPE(I1, O * I2));
    nb_tensor *t = nb_reshape(nb_matmul(nb_reshape(x1, NB_SHAPE(N, I1)), w), NB_SHAPE(N, O, I2));
    int last = 2;
    nb_tensor *y = nb_sum(nb_mul(t, nb_reshape(x2, NB_SHAPE(N, 1, I2))), &last, 1, false);
    if (y && bias) y = nb_add(y, bias);
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < x1->ndim - 1; i++) shape[i] = x1->shape[i];
    shape[x1->ndim - 1] = O;
    return nb_scope_return(s, y ? nb_reshape(y, x1->ndim, shape) : NULL);
}

/* ---- addmm / addmv / baddbmm / addbmm ------------------------------------------------------- */

typedef enum { ADD_MM, ADD_MV, ADD_BMM_BATCHED, ADD_BMM_SUM } add_product_kind;

/* beta * input + alpha * product(a, b); the product's shapes as the kind's
 * (checked here, so the errors name the op, not matmul). */
static nb_tensor *add_product(const char *op, nb_op_id id, add_product_kind kind, nb_tensor *input, nb_tensor *a,
                              nb_tensor *b, double beta, double alpha) {
    nb_tensor *in[3] = {input, a, b};
    if (!nb_check_inputs(op, 3, in) || !nb_autocast_inputs(id, 3, in) || !nb_check_dtypes(id, 3, in)) return NULL;
    input = in[0], a = in[1], b = in[2];
    char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF], z[NB_SHAPE_BUF];
    bool ok;
    switch (kind) {
    case ADD_MM: ok = a->ndim == 2 && b->ndim == 2 && a->shape[1] == b->shape[0]; break;
    case ADD_MV: ok = a->ndim == 2 && b->ndim == 1 && a->shape[1] == b->shape[0]; break;
    default:
        ok = a->ndim == 3 && b->ndim == 3 && a->shape[0] == b->shape[0] && a->shape[2] == b->shape[1];
        break;
    }
    if (!ok)
        return NB_FAIL(NB_ERR_SHAPE, "%s: shapes %s and %s do not multiply (expected %s)", op,
                       nb_fmt_shape(a->ndim, a->shape, x, sizeof x), nb_fmt_shape(b->ndim, b->shape, y, sizeof y),
                       kind == ADD_MM ? "[n, k] and [k, m]" : kind == ADD_MV ? "[n, k] and [k]" : "[B, n, k] and [B, k, m]");
    if (input->dtype != a->dtype || a->dtype != b->dtype)
        return NB_FAIL(NB_ERR_DTYPE, "%s: input, %s and %s must share one dtype (%s, %s, %s)", op,
                       kind == ADD_MV ? "mat" : "the first", kind == ADD_MV ? "vec" : "the second",
                       nb_dtype_name(input->dtype), nb_dtype_name(a->dtype), nb_dtype_name(b->dtype));
    int64_t shape[3];
    int nd = kind == ADD_MV ? 1 : kind == ADD_BMM_BATCHED ? 3 : 2;
    if (kind == ADD_MV) shape[0] = a->shape[0];
    else if (kind == ADD_BMM_BATCHED) shape[0] = a->shape[0], shape[1] = a->shape[1], shape[2] = b->shape[2];
    else shape[0] = a->shape[a->ndim - 2], shape[1] = b->shape[b->ndim - 1];
    int bnd;
    int64_t bshape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(input->ndim, input->shape, nd, shape, &bnd, bshape) || bnd != nd ||
        memcmp(bshape, shape, sizeof(int64_t) * (size_t)nd))
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s does not broadcast to the product's shape %s", op,
                       nb_fmt_shape(input->ndim, input->shape, x, sizeof x), nb_fmt_shape(nd, shape, z, sizeof z));
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *p = nb_matmul(a, b);
    if (kind == ADD_BMM_SUM) p = nb_sum(p, (int[]){0}, 1, false);
    if (alpha != 1) p = nb_mul_scalar(p, alpha);
    if (beta != 0) p = nb_add(p, beta == 1 ? input : nb_mul_scalar(input, beta));
    return nb_scope_return(s, p);
}

nb_tensor *nb_addmm(nb_tensor *input, nb_tensor *mat1, nb_tensor *mat2, double beta, double alpha) {
    return add_product("addmm", NB_OP_ADDMM, ADD_MM, input, mat1, mat2, beta, alpha);
}

nb_tensor *nb_addmv(nb_tensor *input, nb_tensor *mat, nb_tensor *vec, double beta, double alpha) {
    return add_product("addmv", NB_OP_ADDMV, ADD_MV, input, mat, vec, beta, alpha);
}

nb_tensor *nb_baddbmm(nb_tensor *input, nb_tensor *batch1, nb_tensor *batch2, double beta, double alpha) {
    return add_product("baddbmm", NB_OP_BADDBMM, ADD_BMM_BATCHED, input, batch1, batch2, beta, alpha);
}

nb_tensor *nb_addbmm(nb_tensor *input, nb_tensor *batch1, nb_tensor *batch2, double beta, double alpha) {
    return add_product("addbmm", NB_OP_ADDBMM, ADD_BMM_SUM, input, batch1, batch2, beta, alpha);
}

/* ---- grouped_mm ---------------------------------------------------------------------------- */

/* The group ends offs (int32/int64 [G], non-decreasing, the last <= len)
 * read to the host; NULL with the error set. */
static int64_t *group_ends(nb_tensor *offs, int64_t len) {
    if (offs->ndim != 1 || offs->shape[0] < 1 || (offs->dtype != NB_I32 && offs->dtype != NB_I64))
        return NB_FAIL(NB_ERR_INVALID_ARG, "grouped_mm: offs must be a non-empty 1-D int32 tensor");
    int64_t G = offs->shape[0];
    int64_t *e = nb_host_int64("grouped_mm", offs);
    if (!e) return NULL;
    for (int64_t g = 0; g < G; g++)
        if (e[g] < (g ? e[g - 1] : 0) || e[g] > len) {
            free(e);
            return NB_FAIL(NB_ERR_INVALID_ARG, "grouped_mm: offs must be non-decreasing within [0, %lld]", (long long)len);
        }
    return e;
}

/* Every case is a matmul per group on narrowed views, the pieces joined. */
static nb_tensor *grouped_impl(nb_tensor *a, nb_tensor *b, nb_tensor *offs) {
    char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
    int da = a->ndim, db = b->ndim;
    bool ok = (da == 2 || da == 3) && (db == 2 || db == 3) && (offs != NULL) == !(da == 3 && db == 3);
    if (ok && da == 3 && db == 3) ok = a->shape[0] == b->shape[0] && a->shape[2] == b->shape[1];
    else if (ok && da == 2 && db == 3) ok = a->shape[1] == b->shape[1];
    else if (ok) ok = a->shape[da - 1] == b->shape[db - 2];
    if (!ok)
        return NB_FAIL(NB_ERR_SHAPE, "grouped_mm: mat_a %s and mat_b %s (offs %s) are not [G, M, K] x [G, K, N], "
                       "[M, K] x [G, K, N], [M, K] x [K, N] or [G, M, K] x [K, N] (offs with a 2-d operand only)",
                       nb_fmt_shape(a->ndim, a->shape, x, sizeof x), nb_fmt_shape(b->ndim, b->shape, y, sizeof y),
                       offs ? "given" : "NULL");
    if (da == 3 && db == 3) return nb_matmul(a, b);
    /* the jagged dim: a's rows (2-d x 3-d), the shared K (2-d x 2-d), b's columns (3-d x 2-d) */
    int64_t len = da == 2 && db == 3 ? a->shape[0] : da == 2 ? a->shape[1] : b->shape[1];
    int64_t *e = group_ends(offs, len);
    if (!e) return NULL;
    int64_t G = offs->shape[0];
    if ((db == 3 && b->shape[0] != G) || (da == 3 && a->shape[0] != G)) {
        free(e);
        return NB_FAIL(NB_ERR_SHAPE, "grouped_mm: %lld groups in offs, but the 3-d operand has %lld", (long long)G,
                       (long long)(db == 3 ? b->shape[0] : a->shape[0]));
    }
    nb_tensor **parts = malloc(sizeof *parts * (size_t)(G + 1));
    if (!parts) {
        free(e);
        return NB_FAIL(NB_ERR_OOM, "grouped_mm: out of host memory");
    }
    int n = 0;
    nb_tensor *r = NULL;
    nb_device dev = a->storage->device;
    for (int64_t g = 0, start = 0; g < G; start = e[g++]) {
        int64_t sz = e[g] - start;
        if (da == 2 && db == 3) { /* rows start..e[g] of a times b[g] */
            if (sz) parts[n++] = nb_matmul(nb_narrow(a, 0, start, sz), nb_select(b, 0, g));
        } else if (da == 2) { /* a[:, K range] @ b[K range, :] -> [1, M, N] (zeros for an empty range) */
            nb_tensor *p = sz ? nb_matmul(nb_narrow(a, 1, start, sz), nb_narrow(b, 0, start, sz))
                              : nb_full_on(NB_SHAPE(a->shape[0], b->shape[1]), 0, a->dtype, dev);
            parts[n++] = nb_unsqueeze(p, 0);
        } else if (sz) { /* a[g] @ b[:, N range] */
            parts[n++] = nb_matmul(nb_select(a, 0, g), nb_narrow(b, 1, start, sz));
        }
    }
    int64_t rest = len - e[G - 1]; /* past the last group: zeros, as no group covers it */
    if (rest && da == 2 && db == 3) parts[n++] = nb_full_on(NB_SHAPE(rest, b->shape[2]), 0, a->dtype, dev);
    if (rest && da == 3) parts[n++] = nb_full_on(NB_SHAPE(a->shape[1], rest), 0, a->dtype, dev);
    int cat_dim = da == 2 && db == 3 ? 0 : da == 2 ? 0 : 1;
    bool all = true;
    for (int i = 0; i < n; i++) all = all && parts[i];
    if (all) r = n ? nb_cat(parts, n, cat_dim) : NULL;
    if (all && !n) /* every group empty and nothing left over: the output is empty */
        r = da == 2 && db == 3 ? nb_full_on(NB_SHAPE(0, b->shape[2]), 0, a->dtype, dev)
                               : nb_full_on(NB_SHAPE(a->shape[1], 0), 0, a->dtype, dev);
    free(e), free(parts);
    return r;
}

nb_tensor *nb_grouped_mm(nb_tensor *mat_a, nb_tensor *mat_b, nb_tensor *offs) {
    nb_tensor *in[2] = {mat_a, mat_b};
    if (!nb_check_inputs("grouped_mm", 2, in) || (offs && !nb_check_inputs("grouped_mm", 1, &offs)) ||
        !nb_autocast_inputs(NB_OP_GROUPED_MM, 2, in) || !nb_check_dtypes(NB_OP_GROUPED_MM, 2, in))
        return NULL;
    if (in[0]->dtype != in[1]->dtype)
        return NB_FAIL(NB_ERR_DTYPE, "grouped_mm: mat_a (%s) and mat_b (%s) must share a dtype",
                       nb_dtype_name(in[0]->dtype), nb_dtype_name(in[1]->dtype));
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, grouped_impl(in[0], in[1], offs));
}
