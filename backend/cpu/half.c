/* half.c - bfloat16/float16 arithmetic on the CPU through float32 for the
 * families without a 16-bit path of their own (the elementwise ones run
 * their float32 loops chunk by chunk instead: iter16.c): each 16-bit
 * operand is widened into a dense float32 copy, the float32 kernel runs,
 * and a 16-bit result is rounded back (round to nearest even, as the copy
 * kernel's casts). PyTorch's CPU bf16 ops also compute in float32;
 * this is what autocast runs on a CPU. A bfloat16 matmul goes to oneDNN's
 * bf16 GEMM where libdnnl loads (dnnl.c; Debian's OpenBLAS has no sbgemm),
 * else to the float32 GEMM on widened copies. The copies come from the
 * caching allocator per call (malloc's fresh pages cost bert's step 12,000
 * page faults): a correct path for 16-bit tensors, not a fast one.
 * The attention's adapter here also makes dense copies of strided or 4-d
 * [B1, B2, R, C] operands (the heads of a projection) of any dtype. */
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu_common.h"
#include "isa.h"
#include "iter.h"
#include "nb_impl.h"

/* The float32 kernels of the instruction-set level in use (isa.h). */
#define K nb_cpu_isa_kernels_get()

typedef struct wide {
    nb_kview v; /* dense, of the source's shape (float32 for widened ones) */
    void *buf;
    nb_backend *be; /* buf's allocator (the caching one: a copy per call, no malloc per op) */
    void *block;
} wide;

/* A dense copy of src's shape in dtype dt; with `fill`, src's values
 * (converted; broadcast dims copied out). NULL src: an empty wide. */
static nb_status dense_copy(nb_backend *be, const nb_kview *src, wide *w, bool fill, nb_dtype dt) {
    memset(w, 0, sizeof *w);
    if (!src) return NB_OK;
    int64_t n = nb_view_numel(src);
    w->be = be;
    w->buf = nb_alloc_raw(be, nb_dtype_size(dt) * (size_t)(n ? n : 1), nb_backend_current_stream(be), &w->block);
    if (!w->buf) return nb_last_status(); /* the allocator's message: sizes and what is reserved */
    w->v = *src;
    w->v.data = w->buf;
    w->v.dtype = dt;
    nb_contiguous_strides(src->ndim, src->shape, w->v.strides);
    nb_status st = fill && n ? K->copy(be, &w->v, src) : NB_OK;
    if (st) { /* the caller may not free a copy that failed */
        nb_free_raw(be, w->block);
        memset(w, 0, sizeof *w);
    }
    return st;
}

/* A dense float32 view of src's shape (dense_copy). */
static nb_status widen(nb_backend *be, const nb_kview *src, wide *w, bool fill) {
    return dense_copy(be, src, w, fill, NB_F32);
}

static void wide_free(wide *w, int n) {
    for (int i = 0; i < n; i++)
        if (w[i].block) nb_free_raw(w[i].be, w[i].block);
}

/* Rounds a float32 result back into dst (16-bit). */
static nb_status narrow(nb_backend *be, const nb_kview *dst, const wide *w) {
    return nb_view_numel(dst) ? K->copy(be, dst, &w->v) : NB_OK;
}

/* c = alpha a b + beta c for bfloat16 a and b through oneDNN's bf16 GEMM
 * (float32 accumulation into c itself when c is float32, else into a
 * float32 copy of bfloat16 c, rounded once): true when taken, with its
 * status in *st; false when oneDNN is not there or a view does not fit (a
 * batch dim or both matrix dims strided), for the float32 path. */
static bool matmul_bf16_dnnl(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                             double beta, nb_status *st) {
    int nd = c->ndim;
    if (a->dtype != NB_BF16 || nd < 2 || a->ndim != nd || b->ndim != nd || !nb_view_is_contiguous(c)) return false;
    int64_t m = c->shape[nd - 2], n = c->shape[nd - 1], k = a->shape[nd - 1], batches = 1;
    if (a->shape[nd - 2] != m || b->shape[nd - 1] != n || b->shape[nd - 2] != k || m == 0 || n == 0 || k == 0)
        return false;
    for (int d = 0; d < nd - 2; d++) {
        if (a->shape[d] != c->shape[d] || b->shape[d] != c->shape[d]) return false;
        batches *= c->shape[d];
    }
    nb_cpu_mat_layout la = nb_cpu_layout_of(m, k, a->strides[nd - 2], a->strides[nd - 1]);
    nb_cpu_mat_layout lb = nb_cpu_layout_of(k, n, b->strides[nd - 2], b->strides[nd - 1]);
    if (la.copy || lb.copy) return false;
    nb_dnnl_gemm_bf16_fn gemm = nb_cpu_dnnl_gemm_bf16();
    if (!gemm) return false;
    wide w;
    if (c->dtype == NB_F32) memset(&w, 0, sizeof w), w.v = *c, w.buf = c->data; /* written in place */
    else if ((*st = widen(be, c, &w, beta != 0))) return true;                  /* beta C reads C */
    for (int64_t i = 0; i < batches; i++) {
        const uint16_t *ai = (const uint16_t *)a->data + nb_cpu_batch_offset(a, i);
        const uint16_t *bi = (const uint16_t *)b->data + nb_cpu_batch_offset(b, i);
        if (gemm(la.trans == NB_CBLAS_TRANS ? 'T' : 'N', lb.trans == NB_CBLAS_TRANS ? 'T' : 'N', m, n, k, (float)alpha,
                 ai, la.ld, bi, lb.ld, (float)beta, (float *)w.buf + i * m * n, n) != 0) {
            wide_free(&w, 1);
            if (c->dtype != NB_F32 || i == 0 || beta == 0) return false; /* c as it was: the float32 path instead */
            *st = nb_set_error(NB_ERR_UNSUPPORTED, "matmul: oneDNN's bf16 GEMM failed after %lld of %lld batches "
                               "of a float32 c updated in place", (long long)i, (long long)batches);
            return true;
        }
    }
    *st = c->dtype == NB_F32 ? NB_OK : narrow(be, c, &w);
    wide_free(&w, 1);
    return true;
}

nb_status nb_cpu_matmul16(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                          double beta) {
    nb_status bst;
    if (matmul_bf16_dnnl(be, c, a, b, alpha, beta, &bst)) return bst;
    wide w[3];
    memset(w, 0, sizeof w); /* wide_free may run before each is made */
    const bool c16 = nb_dtype_is_16bit(c->dtype); /* else float32: written directly */
    nb_status st = widen(be, a, &w[0], true);
    if (!st) st = widen(be, b, &w[1], true);
    if (!st && c16) st = widen(be, c, &w[2], beta != 0); /* beta C reads C */
    if (!st) st = nb_cpu_matmul(be, c16 ? &w[2].v : c, &w[0].v, &w[1].v, alpha, beta);
    if (!st && c16) st = narrow(be, c, &w[2]);
    wide_free(w, 3);
    return st;
}

nb_status nb_cpu_reduce16(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale) {
    wide w[2];
    memset(w, 0, sizeof w); /* wide_free may run before each is made */
    bool out16 = nb_dtype_is_16bit(out->dtype);
    nb_status st = widen(be, x, &w[0], true);
    if (!st && out16) st = widen(be, out, &w[1], false);
    else if (!st) memset(&w[1], 0, sizeof w[1]);
    if (!st) st = K->reduce(be, op, out16 ? &w[1].v : out, &w[0].v, scale);
    if (!st && out16) st = narrow(be, out, &w[1]);
    wide_free(w, 2);
    return st;
}

/* A dense [B, R, C] view of an attention operand ([B, R, C] or
 * [B1, B2, R, C], any strides) in float32 for 16-bit sources, else the
 * source's dtype: the view itself relabelled when it is dense already,
 * else a copy (with `fill`, of its values). NULL src: an empty wide. */
static nb_status dense3(nb_backend *be, const nb_kview *src, wide *w, bool fill) {
    memset(w, 0, sizeof *w);
    if (!src) return NB_OK;
    int nd = src->ndim;
    bool h = nb_dtype_is_16bit(src->dtype);
    if (h || !nb_view_is_contiguous(src)) {
        nb_status st = dense_copy(be, src, w, fill, h ? NB_F32 : src->dtype);
        if (st) return st;
    } else {
        w->v = *src;
    }
    if (nd == 4) { /* [B1, B2, R, C] dense as [B1 B2, R, C] */
        nb_kview t = w->v;
        t.ndim = 3;
        t.shape[0] = w->v.shape[0] * w->v.shape[1], t.shape[1] = w->v.shape[2], t.shape[2] = w->v.shape[3];
        t.strides[0] = t.shape[1] * t.shape[2], t.strides[1] = t.shape[2], t.strides[2] = 1;
        w->v = t;
    }
    return NB_OK;
}

/* Writes a dense3 result back into its source view (rounded for 16 bits). */
static nb_status undense3(nb_backend *be, const nb_kview *src, const wide *w) {
    if (!src || !w->buf || !nb_view_numel(src)) return NB_OK;
    nb_kview v = *src; /* the copy in src's shape */
    v.data = w->buf;
    v.dtype = w->v.dtype;
    nb_contiguous_strides(src->ndim, src->shape, v.strides);
    return K->copy(be, src, &v);
}

bool nb_cpu_attention_views_dense(const nb_kview *const *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] && (nb_dtype_is_16bit(v[i]->dtype) || v[i]->ndim != 3 || !nb_view_is_contiguous(v[i]))) return false;
    return true;
}

/* The fused attention on dense [B, R, C] copies of q, k, v and out (float32
 * for 16-bit ones, and for an additive 16-bit mask); lse is float32 already
 * for 16-bit q (checked: backend/check/attention.c). */
nb_status nb_cpu_attention_dense(nb_backend *be, const nb_kview *out, const nb_kview *lse,
                                 const nb_attention_args *a) {
    const nb_kview *q = a->q, *k = a->k, *v = a->v, *mask = a->mask;
    bool m16 = mask && nb_dtype_is_16bit(mask->dtype);
    wide w[5];
    memset(w, 0, sizeof w);
    nb_status st = dense3(be, q, &w[0], true);
    if (!st) st = dense3(be, k, &w[1], true);
    if (!st) st = dense3(be, v, &w[2], true);
    if (!st && m16) st = widen(be, mask, &w[3], true);
    if (!st) st = dense3(be, out, &w[4], false);
    nb_attention_args wa = *a;
    wa.q = &w[0].v, wa.k = &w[1].v, wa.v = &w[2].v, wa.mask = m16 ? &w[3].v : mask;
    if (!st) st = K->attention(be, &w[4].v, lse, &wa);
    if (!st) st = undense3(be, out, &w[4]);
    wide_free(w, 5);
    return st;
}

nb_status nb_cpu_attention_backward_dense(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                          const nb_kview *gout, const nb_kview *out, const nb_kview *lse,
                                          const nb_attention_args *a) {
    const nb_kview *q = a->q, *k = a->k, *v = a->v, *mask = a->mask;
    bool m16 = mask && nb_dtype_is_16bit(mask->dtype);
    const nb_kview *src[9] = {gout, q, k, v, out, m16 ? mask : NULL, gq, gk, gv};
    wide w[9];
    memset(w, 0, sizeof w);
    nb_status st = NB_OK;
    for (int i = 0; i < 9 && !st; i++) st = i == 5 ? widen(be, src[i], &w[i], true) : dense3(be, src[i], &w[i], i < 6);
    nb_attention_args wa = *a;
    wa.q = &w[1].v, wa.k = &w[2].v, wa.v = &w[3].v, wa.mask = m16 ? &w[5].v : mask;
    if (!st)
        st = K->attention_backward(be, gq ? &w[6].v : NULL, gk ? &w[7].v : NULL, gv ? &w[8].v : NULL, &w[0].v,
                                   &w[4].v, lse, &wa);
    for (int i = 6; i < 9 && !st; i++) st = undense3(be, src[i], &w[i]);
    wide_free(w, 9);
    return st;
}

/* Cross-entropy of 16-bit logits (autocast's): on a float32 copy, with
 * float32 per-row tensors; the gradient rounded back to 16 bits. */
nb_status nb_cpu_cross_entropy16(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *valid,
                                 const nb_kview *logits, const nb_kview *target, int64_t ignore_index) {
    wide w;
    nb_status st = widen(be, logits, &w, true);
    if (!st) st = K->cross_entropy(be, loss, lse, valid, &w.v, target, ignore_index);
    wide_free(&w, 1);
    return st;
}

nb_status nb_cpu_cross_entropy_backward16(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                          const nb_kview *logits, const nb_kview *lse, const nb_kview *target,
                                          int64_t ignore_index) {
    wide w[2];
    memset(w, 0, sizeof w); /* wide_free may run before each is made */
    nb_status st = widen(be, logits, &w[0], true);
    if (!st) st = widen(be, glogits, &w[1], false);
    if (!st) st = K->cross_entropy_backward(be, &w[1].v, gloss, &w[0].v, lse, target, ignore_index);
    if (!st) st = narrow(be, glogits, &w[1]);
    wide_free(w, 2);
    return st;
}

/* Bernoulli into a 16-bit tensor: the float32 draws (the same Philox
 * bits), rounded exactly (0 and 1). */
nb_status nb_cpu_bernoulli16(nb_backend *be, const nb_kview *dst, double p, uint64_t seed, uint64_t offset) {
    wide w;
    nb_status st = widen(be, dst, &w, false);
    if (!st) st = K->random(be, &w.v, NB_RNG_BERNOULLI, p, 0, (nb_philox_state){seed, offset, NULL});
    if (!st) st = narrow(be, dst, &w);
    wide_free(&w, 1);
    return st;
}

/* conv2d and its two backward slots on float32 copies (PyTorch's CPU bf16
 * convolution also accumulates in float32). */
nb_status nb_cpu_conv2d16(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                          const nb_kview *bias, const nb_conv_params *p) {
    wide c[4];
    memset(c, 0, sizeof c);
    nb_status st = widen(be, x, &c[0], true);
    if (!st) st = widen(be, w, &c[1], true);
    if (!st) st = widen(be, bias, &c[2], true);
    if (!st) st = widen(be, out, &c[3], false);
    if (!st) st = nb_cpu_conv2d(be, &c[3].v, &c[0].v, &c[1].v, bias ? &c[2].v : NULL, p);
    if (!st) st = narrow(be, out, &c[3]);
    wide_free(c, 4);
    return st;
}

nb_status nb_cpu_conv2d_backward_input16(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w,
                                         const nb_conv_params *p) {
    wide c[3];
    memset(c, 0, sizeof c);
    nb_status st = widen(be, gy, &c[0], true);
    if (!st) st = widen(be, w, &c[1], true);
    if (!st) st = widen(be, gx, &c[2], false);
    if (!st) st = nb_cpu_conv2d_backward_input(be, &c[2].v, &c[0].v, &c[1].v, p);
    if (!st) st = narrow(be, gx, &c[2]);
    wide_free(c, 3);
    return st;
}

nb_status nb_cpu_conv2d_backward_weight16(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                          const nb_kview *gy, const nb_kview *x, const nb_conv_params *p) {
    wide c[4];
    memset(c, 0, sizeof c);
    nb_status st = widen(be, gy, &c[0], true);
    if (!st) st = widen(be, x, &c[1], true);
    if (!st) st = widen(be, gw, &c[2], false);
    if (!st) st = widen(be, gbias, &c[3], false);
    if (!st) st = nb_cpu_conv2d_backward_weight(be, &c[2].v, gbias ? &c[3].v : NULL, &c[0].v, &c[1].v, p);
    if (!st) st = narrow(be, gw, &c[2]);
    if (!st && gbias) st = narrow(be, gbias, &c[3]);
    wide_free(c, 4);
    return st;
}

/* The pooling slots on float32 copies: dst (the output, or gx) from src
 * (x, or gy); a max pool's indices pass through. */
nb_status nb_cpu_pool16(nb_backend *be, nb_cpu_pool_kind kind, const nb_kview *dst, const nb_kview *src,
                        const nb_kview *indices, const nb_pool_params *p) {
    wide c[2];
    memset(c, 0, sizeof c);
    nb_status st = widen(be, src, &c[0], true);
    if (!st) st = widen(be, dst, &c[1], false);
    const nb_kview *s = &c[0].v, *d = &c[1].v;
    if (!st) switch (kind) {
        case NB_CPU_POOL_MAX: st = nb_cpu_max_pool2d(be, d, indices, s, p); break;
        case NB_CPU_POOL_MAX_BACKWARD: st = nb_cpu_max_pool2d_backward(be, d, s, indices); break;
        case NB_CPU_POOL_AVG: st = nb_cpu_avg_pool2d(be, d, s, p); break;
        case NB_CPU_POOL_AVG_BACKWARD: st = nb_cpu_avg_pool2d_backward(be, d, s, p); break;
        case NB_CPU_POOL_ADAPTIVE_AVG: st = nb_cpu_adaptive_avg_pool2d(be, d, s); break;
        case NB_CPU_POOL_ADAPTIVE_AVG_BACKWARD: st = nb_cpu_adaptive_avg_pool2d_backward(be, d, s); break;
        case NB_CPU_POOL_ADAPTIVE_MAX: st = nb_cpu_adaptive_max_pool2d(be, d, indices, s); break;
        }
    if (!st) st = narrow(be, dst, &c[1]);
    wide_free(c, 2);
    return st;
}
