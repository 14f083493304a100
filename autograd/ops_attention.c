/* ops_attention.c - F.scaled_dot_product_attention (PyTorch 2.x semantics):
 * softmax(q k^T * scale + mask) v, with a bool mask (true = attend), an
 * additive float mask, is_causal (top-left aligned, j > i masked), scale
 * (0 = 1/sqrt(E)) and dropout on the attention weights. The leading dims of
 * q, k, v (equal) are flattened to B and the fused, tiled backend kernel
 * (backend/cpu/attention.c: FlashAttention's online softmax, never the
 * [B, L, S] score matrix) computes out and the log-sum-exp per row; the
 * mask reaches the kernel as a broadcast view, never materialised.
 * Saved for backward: q, k, v (contiguous, or 4-d head views as they
 * came: see heads_view), the output buffer (out|lse in one storage; for
 * head views out is stored in [B, N, h, d] order, so its heads merge back
 * without a copy, as PyTorch's fused kernels return it) and the mask view.
 * A float mask that requires grad gets dS summed to its shape; that
 * gradient alone is built by composition and holds a [B, L, S] tensor.
 * Grouped-query attention (enable_gqa) is handled here, above the kernel:
 * see sdpa_gqa. bfloat16/float16 q, k, v compute with float32 scores and
 * a float32 lse (stored after the 16-bit out, 4-byte aligned); autocast
 * runs the attention in its lower precision, as PyTorch's.
 * Tests: tests/test_ops_attention.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"
#include "philox.h"

#define SDPA "scaled_dot_product_attention"


/* A view of base's storage: 3-d contiguous [d0, d1, d2] at element offset off. */
static nb_tensor *view3(const nb_tensor *base, int64_t d0, int64_t d1, int64_t d2, int64_t off) {
    int64_t shape[3] = {d0, d1, d2}, strides[3] = {d1 * d2, d2, 1};
    return nb_tensor_view_of(base, 3, shape, strides, off);
}

/* lse [B, L] in the out|lse buffer after out3 [B, L, Ev]: q's dtype, or
 * float32 for 16-bit q (at the next 4-byte boundary). */
static nb_tensor *lse_view(const nb_tensor *out3, int64_t B, int64_t L, int64_t Ev) {
    int64_t bl[2] = {B, L}, st[2] = {L, 1}, end = out3->offset + B * L * Ev;
    if (!nb_dtype_is_16bit(out3->dtype)) return nb_tensor_view_of(out3, 2, bl, st, end);
    return nb_tensor_view_as(out3, NB_F32, 2, bl, st, (end + 1) / 2);
}

/* A 4-d [B1, B2, R, C] view with unit column stride, rows at least C
 * apart and no broadcast (stride-0) dim: the heads of a [B, N, h, d]
 * projection seen as [B, h, N, d]. The kernels take it as it is (no
 * head-layout copy); other views are made contiguous first. */
static bool heads_view(const nb_tensor *t) {
    if (t->ndim != 4 || (t->shape[3] > 1 && t->strides[3] != 1) || (t->shape[2] > 1 && t->strides[2] < t->shape[3]))
        return false;
    for (int d = 0; d < 3; d++)
        if (t->shape[d] > 1 && t->strides[d] <= 0) return false;
    return true;
}

/* An uninitialised tensor of t's shape laid out in t's stride order (dims
 * by decreasing stride): the gradient of a [B, h, N, d] view of a
 * [B, N, h, d] projection is then a view of a dense [B, N, h, d] tensor,
 * and the backward of the transpose and reshape above it copies nothing. */
static nb_tensor *empty_in_order_of(const nb_tensor *t) {
    int nd = t->ndim, perm[NB_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    for (int i = 1; i < nd; i++) /* stable insertion sort by decreasing stride */
        for (int j = i; j > 0 && t->strides[perm[j - 1]] < t->strides[perm[j]]; j--) {
            int x = perm[j];
            perm[j] = perm[j - 1], perm[j - 1] = x;
        }
    int64_t n = nb_numel(t), strides[NB_MAX_DIMS], st = 1;
    for (int i = nd - 1; i >= 0; i--) strides[perm[i]] = st, st *= t->shape[perm[i]];
    nb_tensor *buf = nb_tensor_new(1, &n, t->dtype, t->storage->device);
    return buf ? nb_tensor_view_of(buf, nd, t->shape, strides, 0) : NULL;
}

/* t as [d0, d1, d2] (a view when t is dense, else a copy). */
static nb_tensor *as3(nb_tensor *t, int64_t d0, int64_t d1, int64_t d2) {
    return t && t->ndim == 3 ? t : nb_reshape(t, NB_SHAPE(d0, d1, d2));
}

/* A contiguous view of base's storage with t's shape at offset off. */
static nb_tensor *view_like(const nb_tensor *base, const nb_tensor *t, int64_t off) {
    int64_t strides[NB_MAX_DIMS];
    nb_contiguous_strides(t->ndim, t->shape, strides);
    return nb_tensor_view_of(base, t->ndim, t->shape, strides, off);
}

/* ---- backward ---------------------------------------------------------------- */

/* The forward's dropout draws (the Philox arguments it recorded). */
static nb_philox_state attention_rng(const nb_node *n) {
    return (nb_philox_state){n->p.attention.seed, n->p.attention.offset, n->p.attention.offset_base};
}

/* The forward's dropped weights, 1 where dropped ([B, L, S] of dt on dev:
 * the Philox bits of (b*L + i)*S + j, drop iff u < p); an error where the
 * backend's own generator drew them (only its fused backward has them). */
static nb_tensor *dropped_again(nb_node *n, nb_dtype dt, nb_device dev) {
    if (n->p.attention.own_rng) {
        nb_set_error(NB_ERR_UNSUPPORTED, SDPA ": this backward recomputes the attention (create_graph, or an additive "
                                              "mask's gradient), and the forward's dropout came from cuDNN's generator "
                                              "(the default for 16-bit CUDA attention; NB_CUDA_ATTENTION_DROPOUT=philox "
                                              "draws nabla's mask instead), which only its fused backward draws again");
        return NULL;
    }
    int64_t bls[3] = {n->p.attention.B, n->p.attention.L, n->p.attention.S};
    nb_tensor *drop = nb_tensor_new(3, bls, dt, dev);
    nb_kview vd = drop ? nb_kview_of(drop) : (nb_kview){0};
    if (!drop || nb_kernel_random(NB_BE(drop), &vd, NB_RNG_BERNOULLI, n->p.attention.dropout_p, 0,
                                  attention_rng(n)) != NB_OK)
        return NULL;
    return drop;
}

/* d loss / d mask for an additive mask that requires grad: dS = P * (dP - D)
 * by composition (grad mode is off in backward), summed to the mask's shape. */
static nb_tensor *mask_grad(nb_node *n, nb_tensor *q3, nb_tensor *k3, nb_tensor *v3, nb_tensor *out3,
                            nb_tensor *lse, nb_tensor *g3, nb_tensor *mask_view, const nb_tensor *mask) {
    int64_t B = n->p.attention.B, L = n->p.attention.L, S = n->p.attention.S, bls[3] = {B, L, S};
    double p = n->p.attention.dropout_p;
    int64_t E = n->p.attention.E, Ev = n->p.attention.Ev;
    q3 = as3(q3, B, L, E), k3 = as3(k3, B, S, E), v3 = as3(v3, B, S, Ev), out3 = as3(out3, B, L, Ev);
    g3 = as3(g3, B, L, Ev);
    if (!q3 || !k3 || !v3 || !out3 || !g3) return NULL;
    if (nb_dtype_is_16bit(q3->dtype)) { /* in float32, as the kernel's scores; the gradient rounded to the mask's dtype */
        nb_tensor *w[5] = {q3, k3, v3, out3, g3};
        for (int i = 0; i < 5; i++)
            if (!(w[i] = nb_to_dtype(w[i], NB_F32))) return NULL;
        nb_tensor *mv = nb_to_dtype(mask_view, NB_F32);
        nb_tensor *gm = mv ? mask_grad(n, w[0], w[1], w[2], w[3], lse, w[4], mv, mask) : NULL;
        return gm ? nb_to_dtype(gm, mask->dtype) : NULL;
    }
    nb_tensor *m3 = nb_reshape(nb_contiguous(mask_view), 3, bls);
    nb_tensor *sc = nb_add(nb_mul_scalar(nb_matmul(q3, nb_transpose(k3, 1, 2)), n->p.attention.scale), m3);
    nb_tensor *P = nb_exp(nb_sub(sc, nb_unsqueeze(lse, 2)));
    nb_tensor *dP = nb_matmul(g3, nb_transpose(v3, 1, 2));
    if (p > 0 && dP) { /* the forward's keep mask */
        nb_tensor *drop = dropped_again(n, q3->dtype, q3->storage->device);
        if (!drop) return NULL;
        dP = nb_mul(dP, nb_mul_scalar(nb_add_scalar(nb_neg(drop), 1), 1 / (1 - p)));
    }
    int last = -1;
    nb_tensor *D = nb_sum(nb_mul(g3, out3), &last, 1, true);
    nb_tensor *dS = nb_mul(P, nb_sub(dP, D));
    if (!dS) return NULL;
    return nb_sum_to_shape(nb_reshape(dS, mask_view->ndim, mask_view->shape), mask->ndim, mask->shape);
}

/* The forward's dropout keep mask scaled by 1 / (1 - p) ([B, L, S]), or
 * NULL without dropout (and with an error set, NULL where it fails). */
static nb_tensor *dropout_scale(nb_node *n, const nb_tensor *like) {
    double p = n->p.attention.dropout_p;
    if (!(p > 0)) return NULL;
    nb_tensor *drop = dropped_again(n, like->dtype, like->storage->device);
    if (!drop) return NULL;
    return nb_mul_scalar(nb_add_scalar(nb_neg(drop), 1), 1 / (1 - p));
}

/* create_graph: the attention recomputed as recorded ops (scores, softmax,
 * the forward's dropout mask) and its gradients written with them
 * (FlashAttention's backward, unfused), so that they can be differentiated
 * again; it holds [B, L, S] tensors. q, k, v and a float mask are the
 * connected inputs where they require grad, else the saved copies. */
static nb_status sdpa_grad_ops(nb_node *n, nb_tensor *g3, nb_tensor *q3, nb_tensor *k3, nb_tensor *v3,
                               nb_tensor *mask, nb_tensor **gin) {
    int64_t B = n->p.attention.B, L = n->p.attention.L, S = n->p.attention.S, E = n->p.attention.E,
            Ev = n->p.attention.Ev;
    int last = -1;
    nb_tensor *q = nb_reshape(n->in[0] ? n->in[0] : q3, NB_SHAPE(B, L, E));
    nb_tensor *k = nb_reshape(n->in[1] ? n->in[1] : k3, NB_SHAPE(B, S, E));
    nb_tensor *v = nb_reshape(n->in[2] ? n->in[2] : v3, NB_SHAPE(B, S, Ev));
    q3 = as3(q3, B, L, E);
    nb_dtype dt = q3->dtype;
    if (nb_dtype_is_16bit(dt)) { /* composed in float32 (softmax has no 16-bit form); gradients rounded back below */
        q = nb_to_dtype(q, NB_F32), k = nb_to_dtype(k, NB_F32), v = nb_to_dtype(v, NB_F32);
        g3 = nb_to_dtype(g3, NB_F32), q3 = nb_to_dtype(q3, NB_F32);
        nb_tensor *m32 = mask && mask->dtype != NB_BOOL ? nb_to_dtype(mask, NB_F32) : mask;
        if (!q || !k || !v || !g3 || !q3 || (mask && !m32)) return nb_last_status();
        mask = m32;
    }
    nb_tensor *sc = nb_mul_scalar(nb_matmul(q, nb_transpose(k, 1, 2)), n->p.attention.scale);
    if (mask) { /* the broadcast [..., L, S] view as [B, L, S] */
        nb_tensor *m = n->in[3] ? nb_expand(n->in[3], mask->ndim, mask->shape) : mask;
        m = nb_reshape(m, NB_SHAPE(B, L, S));
        sc = m && m->dtype == NB_BOOL ? nb_masked_fill(sc, nb_logical_not(m), -INFINITY) : nb_add(sc, m);
    } else if (n->p.attention.causal) {
        nb_tensor *i = nb_reshape(nb_arange_on(0, (double)L, 1, NB_I64, q3->storage->device), NB_SHAPE(L, 1));
        nb_tensor *j = nb_reshape(nb_arange_on(0, (double)S, 1, NB_I64, q3->storage->device), NB_SHAPE(1, S));
        sc = nb_masked_fill(sc, nb_gt(j, i), -INFINITY);
    }
    nb_tensor *P = nb_softmax(sc, -1), *keep = dropout_scale(n, q3);
    if (n->p.attention.dropout_p > 0 && !keep) return nb_last_status();
    nb_tensor *Pd = keep ? nb_mul(P, keep) : P;
    nb_tensor *dPd = nb_matmul(g3, nb_transpose(v, 1, 2));
    nb_tensor *dP = keep ? nb_mul(dPd, keep) : dPd;
    nb_tensor *dS = nb_mul(P, nb_sub(dP, nb_sum(nb_mul(dP, P), &last, 1, true)));
    if (!dS) return nb_last_status();
    nb_tensor *gx[3] = {nb_mul_scalar(nb_matmul(dS, k), n->p.attention.scale),
                        nb_mul_scalar(nb_matmul(nb_transpose(dS, 1, 2), q), n->p.attention.scale),
                        nb_matmul(nb_transpose(Pd, 1, 2), g3)};
    for (int i = 0; i < 3; i++)
        if (n->in[i] && !(gin[i] = nb_to_dtype(nb_reshape(gx[i], n->in[i]->ndim, n->in[i]->shape), dt)))
            return nb_last_status();
    if (n->in[3] && !(gin[3] = nb_to_dtype(nb_sum_to_shape(nb_reshape(dS, mask->ndim, mask->shape), n->in[3]->ndim,
                                                           n->in[3]->shape),
                                           n->in[3]->dtype)))
        return nb_last_status();
    return NB_OK;
}

/* saved: [0] q [B, L, E] or the 4-d heads view, [1] out (3-d or 4-d)
 * inside the out|lse buffer, [2] k and [3] v as q, [4] the mask expanded
 * to [..., L, S] (with a mask). */
nb_status nb_bw_sdpa(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    int64_t B = n->p.attention.B, L = n->p.attention.L, Ev = n->p.attention.Ev;
    nb_tensor *q3 = n->saved[0], *out3 = n->saved[1], *k3 = n->saved[2], *v3 = n->saved[3];
    nb_tensor *mask = n->p.attention.has_mask ? n->saved[4] : NULL;
    nb_tensor *lse = lse_view(out3, B, L, Ev);
    if (nb_needs_grad(5, (nb_tensor *[]){g, n->in[0], n->in[1], n->in[2], n->in[3]}))
        return sdpa_grad_ops(n, nb_reshape(g, NB_SHAPE(B, L, Ev)), q3, k3, v3, mask, gin);
    /* heads views pass as they are; gradients take their inputs' layout */
    nb_tensor *gc = heads_view(q3) && heads_view(g) ? g : nb_contiguous(g);
    nb_tensor *g3 = !gc ? NULL : heads_view(q3) ? gc : view3(gc, B, L, Ev, gc->offset);
    nb_tensor *gq = n->in[0] ? empty_in_order_of(q3) : NULL;
    nb_tensor *gk = n->in[1] && k3 ? empty_in_order_of(k3) : NULL;
    nb_tensor *gv = n->in[2] && v3 ? empty_in_order_of(v3) : NULL;
    if (!k3 || !v3 || !lse || !g3 || (n->in[0] && !gq) || (n->in[1] && !gk) || (n->in[2] && !gv))
        return nb_last_status();
    if (gq || gk || gv) {
        nb_kview vgq = gq ? nb_kview_of(gq) : (nb_kview){0}, vgk = gk ? nb_kview_of(gk) : (nb_kview){0};
        nb_kview vgv = gv ? nb_kview_of(gv) : (nb_kview){0}, vg = nb_kview_of(g3), vq = nb_kview_of(q3);
        nb_kview vk = nb_kview_of(k3), vv = nb_kview_of(v3), vo = nb_kview_of(out3), vl = nb_kview_of(lse);
        nb_kview vm = mask ? nb_kview_of(mask) : (nb_kview){0};
        nb_attention_args a = {&vq, &vk, &vv, mask ? &vm : NULL, n->p.attention.causal, n->p.attention.scale,
                               n->p.attention.dropout_p, attention_rng(n), NULL, n->p.attention.own_rng};
        nb_status st = nb_kernel_attention_backward(NB_BE(q3), gq ? &vgq : NULL, gk ? &vgk : NULL, gv ? &vgv : NULL,
                                                    &vg, &vo, &vl, &a);
        if (st) return st;
    }
    nb_tensor *gx[3] = {gq, gk, gv};
    for (int i = 0; i < 3; i++)
        if (n->in[i] && !(gin[i] = gx[i]->ndim == n->in[i]->ndim ? gx[i] : view_like(gx[i], n->in[i], 0)))
            return nb_last_status();
    if (n->in[3] && !(gin[3] = mask_grad(n, q3, k3, v3, out3, lse, g3, mask, n->in[3]))) return nb_last_status();
    return NB_OK;
}

/* ---- forward ------------------------------------------------------------------ */

/* Shapes, mask and options; fills lead (the leading dims) and the mask's
 * target shape [..., L, S] with at least 3 dims (mnd). */
static bool sdpa_check(nb_tensor *q, nb_tensor *k, nb_tensor *v, const nb_sdpa_options *o, int *mnd,
                       int64_t *mtarget) {
    nb_tensor *in[4] = {q, k, v, o->attn_mask};
    if (!nb_check_inputs(SDPA, o->attn_mask ? 4 : 3, in) || !nb_check_dtypes(NB_OP_SCALED_DOT_PRODUCT_ATTENTION, 3, in)) return false;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    int nd = q->ndim;
    bool ok = nd >= 2 && k->ndim == nd && v->ndim == nd && k->shape[nd - 1] == q->shape[nd - 1] &&
              v->shape[nd - 2] == k->shape[nd - 2];
    for (int d = 0; ok && d < nd - 2; d++) ok = k->shape[d] == q->shape[d] && v->shape[d] == q->shape[d];
    if (!ok) {
        nb_set_error(NB_ERR_SHAPE, SDPA ": q %s, k %s, v %s do not fit [..., L, E], [..., S, E], [..., S, Ev] "
                                        "with leading dims that broadcast",
                     nb_fmt_shape(q->ndim, q->shape, a, sizeof a), nb_fmt_shape(k->ndim, k->shape, b, sizeof b),
                     nb_fmt_shape(v->ndim, v->shape, c, sizeof c));
        return false;
    }
    if (!(o->dropout_p >= 0 && o->dropout_p < 1)) {
        nb_set_error(NB_ERR_INVALID_ARG, SDPA ": dropout_p %g outside [0, 1)", o->dropout_p);
        return false;
    }
    if (!isfinite(o->scale)) {
        nb_set_error(NB_ERR_INVALID_ARG, SDPA ": scale %g is not finite", o->scale);
        return false;
    }
    *mnd = nd > 2 ? nd : 3;
    for (int d = 0; d < *mnd; d++) mtarget[d] = 1;
    memcpy(mtarget + *mnd - nd, q->shape, sizeof(int64_t) * (size_t)(nd - 2));
    mtarget[*mnd - 2] = q->shape[nd - 2], mtarget[*mnd - 1] = k->shape[nd - 2];
    nb_tensor *m = o->attn_mask;
    if (!m) return true;
    if (o->is_causal) {
        nb_set_error(NB_ERR_INVALID_ARG, SDPA ": attn_mask and is_causal cannot both be set (as PyTorch)");
        return false;
    }
    if (m->dtype != NB_BOOL && m->dtype != q->dtype) {
        nb_set_error(NB_ERR_DTYPE, SDPA ": attn_mask must be bool or %s (q's dtype), got %s", nb_dtype_name(q->dtype),
                     nb_dtype_name(m->dtype));
        return false;
    }
    int bnd;
    int64_t bshape[NB_MAX_DIMS];
    if (m->ndim > *mnd || !nb_broadcast_shapes(m->ndim, m->shape, *mnd, mtarget, &bnd, bshape) ||
        memcmp(bshape, mtarget, sizeof(int64_t) * (size_t)*mnd)) {
        nb_set_error(NB_ERR_SHAPE, SDPA ": attn_mask %s does not broadcast to [..., L, S] = %s",
                     nb_fmt_shape(m->ndim, m->shape, a, sizeof a), nb_fmt_shape(*mnd, mtarget, b, sizeof b));
        return false;
    }
    return true;
}

/* q, k, v as [B, *, *]: 4-d heads views as they are, other views in their
 * contiguous forms. */
static bool sdpa_inputs(nb_tensor *q, nb_tensor *k, nb_tensor *v, const int64_t *dims, nb_tensor **q3,
                        nb_tensor **k3, nb_tensor **v3) {
    int64_t B = dims[0], L = dims[1], S = dims[2], E = dims[3], Ev = dims[4];
    int64_t rows[3] = {L, S, S}, cols[3] = {E, E, Ev};
    nb_tensor *src[3] = {q, k, v}, **dst[3] = {q3, k3, v3};
    for (int i = 0; i < 3; i++) {
        if (heads_view(q) && heads_view(k) && heads_view(v)) {
            *dst[i] = src[i];
        } else {
            nb_tensor *c = nb_contiguous(src[i]);
            *dst[i] = c ? view3(c, B, rows[i], cols[i], c->offset) : NULL;
        }
        if (!*dst[i]) return false;
    }
    return true;
}

static nb_tensor *sdpa_impl(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_sdpa_options o) {
    int mnd;
    int64_t mtarget[NB_MAX_DIMS];
    if (!sdpa_check(q, k, v, &o, &mnd, mtarget)) return NULL;
    int nd = q->ndim;
    int64_t B = 1, L = q->shape[nd - 2], E = q->shape[nd - 1], S = k->shape[nd - 2], Ev = v->shape[nd - 1];
    for (int d = 0; d < nd - 2; d++) B *= q->shape[d];
    int64_t dims[5] = {B, L, S, E, Ev};
    double scale = o.scale != 0 ? o.scale : 1 / sqrt((double)E);
    nb_tensor *in[4] = {q, k, v, o.attn_mask};
    int n_in = o.attn_mask ? 4 : 3;
    nb_tensor *q3, *k3, *v3;
    if (!sdpa_inputs(q, k, v, dims, &q3, &k3, &v3)) return NULL;
    /* out and lse share one storage, so that saving out keeps lse too; a
     * float32 lse after a 16-bit out takes two elements each, after padding */
    int64_t total = nb_dtype_is_16bit(q->dtype) ? (B * L * Ev + 1) / 2 * 2 + 2 * B * L : B * L * Ev + B * L,
            oshape[NB_MAX_DIMS];
    nb_tensor *buf = nb_tensor_new(1, &total, q->dtype, q->storage->device);
    if (!buf) return NULL;
    memcpy(oshape, q->shape, sizeof(int64_t) * (size_t)nd);
    oshape[nd - 1] = Ev;
    int64_t ostrides[NB_MAX_DIMS];
    nb_contiguous_strides(nd, oshape, ostrides);
    bool heads = q3->ndim == 4; /* out [B1, B2, L, Ev] stored as [B1, L, B2, Ev]: its heads merge back for free */
    if (heads) ostrides[1] = Ev, ostrides[2] = oshape[1] * Ev;
    nb_tensor *out = nb_tensor_view_of(buf, nd, oshape, ostrides, 0), *out3 = heads ? out : view3(buf, B, L, Ev, 0);
    nb_tensor *lse = out3 ? lse_view(out3, B, L, Ev) : NULL;
    nb_tensor *mask = NULL;
    if (o.attn_mask) { /* the broadcast view [..., L, S]: stride 0 where broadcast */
        nb_kview mv = nb_kview_expand(o.attn_mask, mnd, mtarget);
        mask = nb_tensor_view_of(o.attn_mask, mnd, mtarget, mv.strides, o.attn_mask->offset);
    }
    if (!out || !out3 || !lse || (o.attn_mask && !mask)) return NULL;
    uint64_t seed = 0, offset = 0;
    const uint64_t *base = NULL; /* set while a CUDA graph is captured */
    if (o.dropout_p > 0) {
        nb_generator *gen = o.gen ? o.gen : nb_default_generator();
        seed = gen->seed;
        offset = nb_generator_advance(gen, nb_philox_blocks((uint64_t)(B * L * S)));
        bool failed;
        base = nb_graph_rng_base(q->storage->backend, gen, &offset, &failed);
        if (failed) return NULL;
    }
    nb_kview vo = nb_kview_of(out3), vl = nb_kview_of(lse), vq = nb_kview_of(q3), vk = nb_kview_of(k3),
             vv = nb_kview_of(v3), vm = mask ? nb_kview_of(mask) : (nb_kview){0};
    /* the backend's own dropout generator (cuDNN's) only where the backward
     * will not need the mask: an additive mask's gradient recomputes the
     * weights (create_graph, which also would, fails instead, as PyTorch's
     * fused kernels' double backward). cuDNN's path takes no mask today, so
     * the mask test is for a backend that would. */
    bool own_rng = false, mask_needs_grad = o.attn_mask && nb_requires_grad(o.attn_mask) && nb_is_grad_enabled();
    nb_attention_args a = {&vq, &vk, &vv, mask ? &vm : NULL, o.is_causal, scale, o.dropout_p, {seed, offset, base},
                           o.dropout_p > 0 && !mask_needs_grad ? &own_rng : NULL, false};
    if (nb_kernel_attention(NB_BE(q), &vo, &vl, &a) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(NB_OP_SCALED_DOT_PRODUCT_ATTENTION, out, n_in, in, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.attention.B = dims[0], n->p.attention.L = dims[1], n->p.attention.S = dims[2];
        n->p.attention.E = dims[3], n->p.attention.Ev = dims[4];
        n->p.attention.causal = o.is_causal;
        n->p.attention.seed = seed, n->p.attention.offset = offset, n->p.attention.offset_base = base;
        n->p.attention.has_mask = mask != NULL, n->p.attention.own_rng = own_rng;
        n->p.attention.scale = scale, n->p.attention.dropout_p = o.dropout_p;
        nb_save(n, 0, q3), nb_save(n, 1, out3), nb_save(n, 2, k3), nb_save(n, 3, v3);
        if (mask) nb_save(n, 4, mask);
    }
    return out;
}

/* PyTorch broadcasts the batch dims of q, k and v: each is expanded (a view,
 * whose gradient sums back) to their common batch shape. Shapes that do not
 * broadcast are left for sdpa_check to report. */
static void broadcast_batch(nb_tensor **qkv) {
    int nd = 2, bnd = 0;
    int64_t batch[NB_MAX_DIMS];
    for (int i = 0; i < 3; i++) {
        if (!qkv[i] || qkv[i]->ndim < 2) return;
        nd = qkv[i]->ndim > nd ? qkv[i]->ndim : nd;
    }
    for (int i = 0; i < 3; i++) {
        int64_t b[NB_MAX_DIMS];
        int n;
        if (!nb_broadcast_shapes(bnd, batch, qkv[i]->ndim - 2, qkv[i]->shape, &n, b)) return;
        bnd = n;
        memcpy(batch, b, sizeof(int64_t) * (size_t)n);
    }
    for (int i = 0; i < 3; i++) {
        nb_tensor *t = qkv[i];
        if (t->ndim == nd && !memcmp(t->shape, batch, sizeof(int64_t) * (size_t)bnd)) continue;
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, batch, sizeof(int64_t) * (size_t)bnd);
        shape[bnd] = t->shape[t->ndim - 2], shape[bnd + 1] = t->shape[t->ndim - 1];
        nb_tensor *e = nb_expand(t, bnd + 2, shape);
        if (e) qkv[i] = e;
    }
}

/* ---- grouped-query attention (PyTorch's enable_gqa) ------------------------------- */

/* k/v [..., Hk, S, *] repeated over groups of g heads: [..., Hk * g, S, *]
 * with kv head j serving q heads j*g .. j*g + g - 1 (repeat_interleave on
 * dim -3, as PyTorch and Hugging Face's repeat_kv). A broadcast view then
 * one contiguous copy; expand's backward sums the gradient over the group. */
static nb_tensor *repeat_heads(nb_tensor *t, int64_t g) {
    int nd = t->ndim;
    int64_t shape[NB_MAX_DIMS], out[NB_MAX_DIMS];
    for (int d = 0; d < nd - 2; d++) shape[d] = t->shape[d];
    shape[nd - 2] = g, shape[nd - 1] = t->shape[nd - 2], shape[nd] = t->shape[nd - 1];
    for (int d = 0; d < nd; d++) out[d] = t->shape[d];
    out[nd - 3] *= g;
    return nb_reshape(nb_expand(nb_unsqueeze(t, nd - 2), nd + 1, shape), nd, out);
}

/* Whether the mask is one row of keys for every head and query: [..., 1, 1, S] (or fewer dims). */
static bool mask_rows_shared(const nb_tensor *m) {
    int nd = m->ndim;
    return (nd < 2 || m->shape[nd - 2] == 1) && (nd < 3 || m->shape[nd - 3] == 1);
}

/* q [..., Hq, L, E] with k, v [..., Hk, S, *], Hq a multiple of Hk. Without
 * causality and with no mask, or one that every head and query row shares
 * (a static KV cache's keys <= pos), every query row is independent, so q
 * is regrouped to [..., Hk, (Hq / Hk) * L, E] against the unrepeated k and
 * v (no copy of them: the KV-cache decode case); otherwise k and v are
 * repeated. */
static nb_tensor *sdpa_gqa(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_sdpa_options o) {
    nb_tensor *in[3] = {q, k, v};
    if (!nb_check_inputs(SDPA, 3, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    int nd = q->ndim;
    if (nd < 3 || k->ndim != nd || v->ndim != nd || k->shape[nd - 3] < 1 || v->shape[nd - 3] != k->shape[nd - 3] ||
        q->shape[nd - 3] % k->shape[nd - 3] || nd == NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_SHAPE, SDPA ": enable_gqa needs q %s, k %s, v %s as [..., Hq, L, E], [..., Hk, S, E], "
                                         "[..., Hk, S, Ev] with Hq a multiple of Hk (and at most %d dims)",
                       nb_fmt_shape(q->ndim, q->shape, a, sizeof a), nb_fmt_shape(k->ndim, k->shape, b, sizeof b),
                       nb_fmt_shape(v->ndim, v->shape, c, sizeof c), NB_MAX_DIMS - 1);
    int64_t g = q->shape[nd - 3] / k->shape[nd - 3];
    if (g == 1) return sdpa_impl(q, k, v, o);
    if (!o.is_causal && (!o.attn_mask || mask_rows_shared(o.attn_mask))) {
        int64_t qs[NB_MAX_DIMS], os[NB_MAX_DIMS];
        memcpy(qs, q->shape, sizeof(int64_t) * (size_t)nd);
        qs[nd - 3] = k->shape[nd - 3], qs[nd - 2] = g * q->shape[nd - 2];
        memcpy(os, q->shape, sizeof(int64_t) * (size_t)nd);
        os[nd - 1] = v->shape[nd - 1];
        nb_tensor *out = sdpa_impl(nb_reshape(q, nd, qs), k, v, o);
        return out ? nb_reshape(out, nd, os) : NULL;
    }
    nb_tensor *kr = repeat_heads(k, g), *vr = repeat_heads(v, g);
    return kr && vr ? sdpa_impl(q, kr, vr, o) : NULL;
}

nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_sdpa_options opts) {
    /* on autocast's lower-precision list, as PyTorch's: q, k, v and a float mask */
    nb_tensor *in[4] = {q, k, v, opts.attn_mask};
    if (!nb_autocast_inputs(NB_OP_SCALED_DOT_PRODUCT_ATTENTION, 4, in)) return NULL;
    q = in[0], k = in[1], v = in[2], opts.attn_mask = in[3];
    nb_scope *s = nb_op_scope_begin();
    if (opts.enable_gqa) return nb_scope_return(s, sdpa_gqa(q, k, v, opts));
    nb_tensor *qkv[3] = {q, k, v};
    broadcast_batch(qkv);
    return nb_scope_return(s, sdpa_impl(qkv[0], qkv[1], qkv[2], opts));
}
