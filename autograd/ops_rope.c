/* ops_rope.c - apply_rotary_pos_emb: the rotary position embedding of
 * RoFormer (Su et al. 2021) in Llama's rotate-half layout, as Hugging Face's
 * apply_rotary_pos_emb applies it to one tensor: x * cos + rotate_half(x) *
 * sin, with cos/sin tables [T, D/2] (the first half of Hugging Face's
 * duplicated [T, D] tables). One fused kernel (backend/cpu/rope.c); the
 * backward of x is the inverse rotation, and the tables, when they require
 * grad, get theirs by composition (g1 x1 + g2 x2 and g2 x1 - g1 x2 summed
 * over the leading dims). Tests: tests/test_ops_rope.c. */
#include "nb_autograd_impl.h"

/* t (contiguous) as [N, T, D]. */
static nb_kview as_ntd(const nb_tensor *t, int64_t N, int64_t T, int64_t D) {
    nb_kview v = nb_kview_of(t);
    v.ndim = 3;
    v.shape[0] = N, v.shape[1] = T, v.shape[2] = D;
    v.strides[0] = T * D, v.strides[1] = D, v.strides[2] = 1;
    return v;
}

/* The gradients of the tables for x3, g3 [N, T, D]: gcos = sum_n (g1 x1 +
 * g2 x2), gsin = sum_n (g2 x1 - g1 x2), halves split along D. */
static nb_status table_grads(nb_tensor *x3, nb_tensor *g3, int64_t h, nb_tensor **gcos, nb_tensor **gsin) {
    nb_tensor *x1 = nb_narrow(x3, 2, 0, h), *x2 = nb_narrow(x3, 2, h, h);
    nb_tensor *g1 = nb_narrow(g3, 2, 0, h), *g2 = nb_narrow(g3, 2, h, h);
    int d0 = 0;
    if (gcos) *gcos = nb_sum(nb_add(nb_mul(g1, x1), nb_mul(g2, x2)), &d0, 1, false);
    if (gsin) *gsin = nb_sum(nb_sub(nb_mul(g2, x1), nb_mul(g1, x2)), &d0, 1, false);
    return (gcos && !*gcos) || (gsin && !*gsin) ? nb_last_status() : NB_OK;
}

/* create_graph: out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin (halves of
 * the last dim), so gx1 = g1 cos + g2 sin, gx2 = g2 cos - g1 sin and the
 * tables' gradients as table_grads, all as recorded ops on the connected
 * inputs (the saved copies where an input needs no gradient). */
static nb_status rope_grad_ops(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *cos = n->in[1] ? n->in[1] : n->saved[1], *sin = n->in[2] ? n->in[2] : n->saved[2];
    int64_t h = cos->shape[1];
    nb_tensor *g1 = nb_narrow(g, -1, 0, h), *g2 = nb_narrow(g, -1, h, h);
    if (n->in[0]) {
        nb_tensor *parts[2] = {nb_add(nb_mul(g1, cos), nb_mul(g2, sin)), nb_sub(nb_mul(g2, cos), nb_mul(g1, sin))};
        if (!parts[0] || !parts[1] || !(gin[0] = nb_cat(parts, 2, -1))) return nb_last_status();
    }
    if (n->in[1] || n->in[2]) {
        nb_tensor *x = n->in[0] ? n->in[0] : nb_reshape(n->saved[0], g->ndim, g->shape);
        nb_tensor *x1 = nb_narrow(x, -1, 0, h), *x2 = nb_narrow(x, -1, h, h);
        if (n->in[1] && !(gin[1] = nb_sum_to_shape(nb_add(nb_mul(g1, x1), nb_mul(g2, x2)), 2, cos->shape)))
            return nb_last_status();
        if (n->in[2] && !(gin[2] = nb_sum_to_shape(nb_sub(nb_mul(g2, x1), nb_mul(g1, x2)), 2, sin->shape)))
            return nb_last_status();
    }
    return NB_OK;
}

/* saved: [0] x (contiguous; kept only when a table requires grad), [1] cos,
 * [2] sin (contiguous) */
nb_status nb_bw_rope(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    if (nb_needs_grad(4, (nb_tensor *[]){g, n->in[0], n->in[1], n->in[2]})) return rope_grad_ops(n, g, gin);
    nb_tensor *cos = n->saved[1], *sin = n->saved[2];
    int64_t T = cos->shape[0], h = cos->shape[1], D = 2 * h;
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    int64_t N = T > 0 && D > 0 ? nb_numel(gc) / (T * D) : 0;
    if (n->in[0]) {
        if (!(gin[0] = nb_empty_like(gc))) return nb_last_status();
        nb_kview vgx = as_ntd(gin[0], N, T, D), vg = as_ntd(gc, N, T, D), vc = nb_kview_of(cos),
                 vs = nb_kview_of(sin);
        nb_status st = nb_kernel_rope(NB_BE(gc), &vgx, &vg, &vc, &vs, true);
        if (st) return st;
    }
    if (n->in[1] || n->in[2]) {
        int64_t ntd[3] = {N, T, D};
        nb_tensor *x3 = nb_reshape(n->saved[0], 3, ntd), *g3 = nb_reshape(gc, 3, ntd);
        if (!x3 || !g3) return nb_last_status();
        return table_grads(x3, g3, h, n->in[1] ? &gin[1] : NULL, n->in[2] ? &gin[2] : NULL);
    }
    return NB_OK;
}

static nb_tensor *rope_impl(nb_tensor *x, nb_tensor *cos, nb_tensor *sin) {
    nb_tensor *in[3] = {x, cos, sin};
    if (!nb_check_inputs("apply_rotary_pos_emb", 3, in) || !nb_check_dtypes(NB_OP_APPLY_ROTARY_POS_EMB, 3, in))
        return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    int nd = x->ndim;
    int64_t T = nd >= 2 ? x->shape[nd - 2] : -1, D = nd >= 2 ? x->shape[nd - 1] : -1;
    if (nd < 2 || D % 2 || cos->ndim != 2 || sin->ndim != 2 || cos->shape[0] != T || cos->shape[1] != D / 2 ||
        sin->shape[0] != T || sin->shape[1] != D / 2)
        return NB_FAIL(NB_ERR_SHAPE,
                       "apply_rotary_pos_emb: x %s must be [..., T, D] with D even and cos %s, sin %s [T, D/2]",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a), nb_fmt_shape(cos->ndim, cos->shape, b, sizeof b),
                       nb_fmt_shape(sin->ndim, sin->shape, c, sizeof c));
    int64_t N = nb_shape_numel(nd - 2, x->shape);
    nb_tensor *xc = nb_contiguous_nograd(x), *cc = nb_contiguous_nograd(cos), *sc = nb_contiguous_nograd(sin);
    nb_tensor *out = nb_empty_like(x);
    if (!xc || !cc || !sc || !out) return NULL;
    nb_kview vo = as_ntd(out, N, T, D), vx = as_ntd(xc, N, T, D), vc = nb_kview_of(cc), vs = nb_kview_of(sc);
    if (nb_kernel_rope(NB_BE(x), &vo, &vx, &vc, &vs, false) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_APPLY_ROTARY_POS_EMB, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) {
        if (cos->requires_grad || sin->requires_grad) nb_save(n, 0, xc);
        nb_save(n, 1, cc);
        nb_save(n, 2, sc);
    }
    return out;
}

nb_tensor *nb_apply_rotary_pos_emb(nb_tensor *x, nb_tensor *cos, nb_tensor *sin) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *in[3] = {x, cos, sin};
    nb_dtype back; /* 16-bit x: rotated in float32, rounded once */
    nb_tensor *r = nb_norms_16bit_native(3, in) ? (back = NB_DTYPE_COUNT, rope_impl(in[0], in[1], in[2]))
                   : nb_widen_16bit(3, in, &back) ? rope_impl(in[0], in[1], in[2])
                                                  : NULL;
    return nb_scope_return(s, nb_unwiden_16bit(r, back));
}
