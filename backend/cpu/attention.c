/* attention.c - the CPU's fused scaled-dot-product attention, forward and
 * backward, tiled as FlashAttention (Dao et al. 2022, "FlashAttention: Fast
 * and Memory-Efficient Exact Attention with IO-Awareness", Algorithms 1
 * and 2), so no [L, S] score matrix is ever held: only per-thread tiles of
 * NB_ATT_BQ x bk scores.
 *   forward: for each (batch b, block of query rows) and each key block,
 *     S = scale * Q K^T (+ mask), a running row max m and sum l
 *     (online softmax) rescale the output accumulator, O += P V;
 *     finally O /= l and lse = m + log(l).
 *   backward: D_i = rowsum(dO_i * O_i); per tile P = exp(S - lse),
 *     dV += P^T dO, dP = dO V^T, dS = P * (dP - D), dK += scale dS^T Q
 *     (pass 1: tasks own groups of key blocks, hence their dK/dV rows);
 *     dQ += scale dS K (pass 2: tasks own groups of query blocks), or in
 *     pass 1 where one group holds all of a batch item's key blocks (short
 *     sequences), on the same tiles in the same order: the same bits.
 * Every output row is written by one task, accumulating over the other
 * side's blocks in increasing order, so the results are bitwise the same
 * for any thread count and any grouping (no atomics). Grouping a few
 * blocks per task lets one transposed K/V tile serve several query blocks.
 * Tile GEMMs go to OpenBLAS (blas.c) and stay at or below its single-thread
 * threshold (64^3 multiply-adds), since they run inside nabla's pool.
 * Workspaces: per task slot, a few tiles (O(block^2 + group*block*dim)),
 * from the caching allocator; plus D, one value per query row.
 * Dropout (on the normalised weights, after lse, as FlashAttention): element
 * (b, i, j) is kept iff the Philox uniform of index (b*L + i)*S + j is
 * >= dropout_p (core/philox.h layout, the same bits as nb_bernoulli_), and
 * scaled by 1/(1 - dropout_p).
 * Masks: bool (false = -inf) or additive of q's dtype; the mask view may
 * have several leading dims (any strides, 0 where broadcast) whose sizes
 * multiply to B, so a [N, 1, 1, S] padding mask expanded to [N, H, L, S]
 * needs no copy. is_causal masks j > i (top-left aligned, as PyTorch).
 * A row whose every score is -inf gives NaN output (0/0) and lse -inf, and
 * NaN gradients, as PyTorch's math path (softmax of an all -inf row).
 * float32 tiles use att_expf, a vectorisable Cephes-style exp (relative
 * error < 1e-7 on [-87, 88]); float64 uses libm's exp. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "blas.h"
#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "philox_batch.h"
#include "threadpool.h"

#define NB_ATT_BQ 64
#define NB_ATT_BK 64
#define NB_ATT_GROUP 8
#define NB_ATT_GEMM_MAX 262144 /* OpenBLAS runs a GEMM single-threaded up to this m*n*k */
#define NB_ATT_MAX_MASK_DIMS NB_MAX_DIMS

typedef struct att_job {
    nb_dtype dt;
    int64_t B, L, S, E, Ev;
    int64_t bq, bk, nqb, nkb;
    int64_t qgrp, kgrp, nqg, nkg; /* blocks per task (any grouping gives the same bits) and task counts */
    const void *q, *k, *v, *gout, *D;
    void *out, *lse, *gq, *gk, *gv;
    /* mask: leading dims (sizes multiply to B) and row/column strides, in elements */
    const void *mask;
    bool mask_bool;
    int mask_lead;
    int64_t mshape[NB_ATT_MAX_MASK_DIMS], mstride[NB_ATT_MAX_MASK_DIMS], msi, msj;
    bool causal;
    double scale;
    bool dropout;
    uint64_t seed, offset, thresh; /* keep iff (bits >> 11) >= thresh, i.e. u >= dropout_p */
    double keep_scale;
    bool fused_dq; /* backward: pass 1 writes dQ too (one key group per batch item: nkg == 1) */
    size_t off_dp, off_pd, off_keep, off_m, off_kt, off_vt, ws_stride; /* workspace layout per task slot */
    const nb_cpu_blas *blas;
} att_job;

/* exp for float tiles: x = n ln2 + r, e^r by Cephes expf's polynomial,
 * 2^n built in the exponent bits. Branch-free so loops vectorise; x < -87
 * (including -inf) gives exactly 0, NaN stays NaN; valid up to x = 88.
 * Arguments here are <= 0 (scores minus their row max or log-sum-exp). */
static inline float att_expf(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float t = x * 1.44269504088896341f + magic;
    int32_t ti, yi;
    memcpy(&ti, &t, sizeof ti);
    float fn = t - magic;
    float r = x - fn * 0.693359375f;
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f, sc;
    uint32_t e = ((uint32_t)ti - 0x4B400000u + 127u) << 23; /* unsigned: no overflow for -inf/NaN */
    memcpy(&sc, &e, sizeof sc);
    y *= sc;
    int32_t keep = -(int32_t)(x >= -87.0f || x != x);
    memcpy(&yi, &y, sizeof yi);
    yi &= keep;
    memcpy(&y, &yi, sizeof y);
    return y;
}

/* C = alpha op(A) op(B) + beta C, row-major, through OpenBLAS. */
static void att_gemm(const att_job *j, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                     const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                     int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) { /* no products: C = beta C (zeros even over NaN when beta is 0) */
        for (int64_t i = 0; i < m; i++)
            for (int64_t x = 0; x < n; x++) {
                if (j->dt == NB_F32) {
                    float *p = (float *)c + i * ldc + x;
                    *p = beta == 0 ? 0.0f : (float)beta * *p;
                } else {
                    double *p = (double *)c + i * ldc + x;
                    *p = beta == 0 ? 0.0 : beta * *p;
                }
            }
        return;
    }
    if (j->dt == NB_F32)
        j->blas->sgemm(NB_CBLAS_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb,
                       (float)beta, c, (int)ldc);
    else
        j->blas->dgemm(NB_CBLAS_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta,
                       c, (int)ldc);
}

/* Element offset of batch b in the mask view (its leading dims). */
static int64_t mask_offset(const att_job *j, int64_t b) {
    int64_t off = 0;
    for (int d = j->mask_lead - 1; d >= 0; d--) {
        off += (b % j->mshape[d]) * j->mstride[d];
        b /= j->mshape[d];
    }
    return off;
}

#define ATT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ATT_LANES 8 /* fixed partial maxima/sums per row: vectorisable, same order for any thread count */

/* The typed tile routines; EXP is the exp used on tiles. A tile holds
 * element (r, c) (query row i0 + r, key column j0 + c) at r*nk + c. Every
 * tile GEMM is NN or TN in row-major terms (K and V tiles are transposed
 * into the workspace first): OpenBLAS's small-matrix kernels serve those
 * without packing, but not NT beyond 1200 outputs (sgemm_small_kernel_permit). */
#define T float
#define SFX f32
#define EXP att_expf
#include "attention.t.h"
#define T double
#define SFX f64
#define EXP exp
#include "attention.t.h"

/* ---- task scheduling ---------------------------------------------------------- */

typedef void (*att_item_fn)(const att_job *j, int64_t item, char *ws);

typedef struct att_run {
    const att_job *j;
    att_item_fn fn;
    int64_t nitems, nslots;
    char *ws;
} att_run;

/* Slot c runs items c, c + nslots, ... with workspace c (interleaved, which
 * balances the causal case); what an item writes does not depend on the slot. */
static void run_slots(void *arg, int64_t c0, int64_t c1) {
    const att_run *r = arg;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t it = c; it < r->nitems; it += r->nslots) r->fn(r->j, it, r->ws + (size_t)c * r->j->ws_stride);
}

static nb_status run_items(nb_backend *be, const att_job *j, att_item_fn fn, int64_t nitems, const char *op) {
    if (nitems == 0) return NB_OK;
    int64_t threads = nb_cpu_get_num_threads(), nslots = threads < nitems ? threads : nitems;
    if (nslots < 1) nslots = 1;
    void *ws_block;
    char *ws = nb_alloc_raw(be, (size_t)nslots * j->ws_stride, nb_backend_current_stream(be), &ws_block);
    if (!ws)
        return nb_set_error(NB_ERR_OOM, "%s: out of memory for %lld tile workspaces of %zu bytes", op,
                            (long long)nslots, j->ws_stride);
    att_run r = {j, fn, nitems, nslots, ws};
    nb_cpu_parallel_for(nslots, 1, run_slots, &r);
    nb_free_raw(be, ws_block);
    return NB_OK;
}

/* ---- job setup ------------------------------------------------------------------ */

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

/* Blocks per task: up to NB_ATT_GROUP (K/V tiles are transposed once per
 * group and stay in cache), fewer while that leaves under 4 tasks per thread. */
static int64_t group_size(int64_t B, int64_t nblocks) {
    int64_t g = NB_ATT_GROUP, want = 4 * (int64_t)nb_cpu_get_num_threads();
    while (g > 1 && B * ((nblocks + g - 1) / g) < want) g /= 2;
    return g;
}

/* The mask (checked: backend/check/attention.c; the dense kernels here take
 * none of another float dtype than q's, which only the adapter of
 * backend/cpu/half.c widens, and always a leading dim). */
static nb_status setup_mask(const char *op, att_job *j, const nb_kview *mask) {
    char a[NB_SHAPE_BUF];
    if (!mask) return NB_OK;
    if (mask->dtype != NB_BOOL && mask->dtype != j->dt)
        return nb_set_error(NB_ERR_DTYPE, "%s: mask must be bool or %s, got %s", op, nb_dtype_name(j->dt),
                            nb_dtype_name(mask->dtype));
    int nd = mask->ndim;
    if (nd < 3)
        return nb_set_error(NB_ERR_SHAPE, "%s: mask %s is not [..., L=%lld, S=%lld] with leading dims of %lld elements",
                            op, nb_view_str(mask, a, sizeof a), (long long)j->L, (long long)j->S, (long long)j->B);
    j->mask = mask->data;
    j->mask_bool = mask->dtype == NB_BOOL;
    j->mask_lead = nd - 2;
    for (int d = 0; d < nd - 2; d++) j->mshape[d] = mask->shape[d], j->mstride[d] = mask->strides[d];
    j->msi = mask->strides[nd - 2], j->msj = mask->strides[nd - 1];
    return NB_OK;
}

/* Fills the job for dense q [B, L, E], k [B, S, E], v [B, S, Ev], out
 * [B, L, Ev] of one float32/float64 dtype (checked with lse, dropout_p and
 * the mask: backend/check/attention.c); BLAS's int head dims are this
 * backend's own limit. */
static nb_status setup(const char *op, att_job *j, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                       const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale,
                       double dropout_p, uint64_t seed, uint64_t offset) {
    memset(j, 0, sizeof *j);
    j->dt = q->dtype;
    j->B = q->shape[0], j->L = q->shape[1], j->E = q->shape[2], j->S = k->shape[1], j->Ev = v->shape[2];
    if (j->E > INT_MAX || j->Ev > INT_MAX)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: head dim above BLAS's int range", op);
    nb_status st = setup_mask(op, j, mask);
    if (st) return st;
    j->q = q->data, j->k = k->data, j->v = v->data, j->out = out->data, j->lse = lse->data;
    j->causal = is_causal, j->scale = scale;
    j->dropout = dropout_p > 0;
    j->seed = seed, j->offset = offset;
    j->thresh = nb_bits_threshold(dropout_p);
    j->keep_scale = 1 / (1 - dropout_p);
    /* tiles: every GEMM is at most bq * bk * max(E, Ev) multiply-adds */
    int64_t dmax = j->E > j->Ev ? j->E : j->Ev, bk = NB_ATT_BK;
    if (dmax > 0 && NB_ATT_BQ * bk * dmax > NB_ATT_GEMM_MAX) bk = (NB_ATT_GEMM_MAX / (NB_ATT_BQ * dmax)) & ~(int64_t)7;
    j->bq = NB_ATT_BQ, j->bk = bk < 8 ? 8 : bk;
    j->nqb = (j->L + j->bq - 1) / j->bq, j->nkb = (j->S + j->bk - 1) / j->bk;
    j->qgrp = group_size(j->B, j->nqb), j->kgrp = group_size(j->B, j->nkb);
    j->nqg = (j->nqb + j->qgrp - 1) / j->qgrp, j->nkg = (j->nkb + j->kgrp - 1) / j->kgrp;
    size_t tile = align64(sizeof(double) * (size_t)(j->bq * j->bk)); /* room for either dtype */
    j->off_dp = tile, j->off_pd = 2 * tile, j->off_keep = 3 * tile, j->off_m = 4 * tile;
    j->off_kt = j->off_m + align64(2 * sizeof(double) * (size_t)(j->qgrp * j->bq));
    j->off_vt = j->off_kt + align64(sizeof(double) * (size_t)(j->kgrp * j->bk * j->E));
    j->ws_stride = j->off_vt + align64(sizeof(double) * (size_t)(j->kgrp * j->bk * j->Ev));
    if (j->B * j->L * j->S > 0) {
        j->blas = nb_cpu_blas_get();
        if (!j->blas) return nb_last_status();
    }
    return NB_OK;
}

/* S == 0: softmax over nothing, out = 0 (an empty sum) and lse = -inf. */
static void fill_empty_keys(const att_job *j) {
    int64_t no = j->B * j->L * j->Ev, nl = j->B * j->L;
    if (j->dt == NB_F32) {
        for (int64_t i = 0; i < no; i++) ((float *)j->out)[i] = 0;
        for (int64_t i = 0; i < nl; i++) ((float *)j->lse)[i] = -INFINITY;
    } else {
        for (int64_t i = 0; i < no; i++) ((double *)j->out)[i] = 0;
        for (int64_t i = 0; i < nl; i++) ((double *)j->lse)[i] = -INFINITY;
    }
}

nb_status nb_cpu_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a) {
    const nb_kview *q = a->q, *k = a->k, *v = a->v;
    if (!nb_cpu_attention_views_dense((const nb_kview *[]){q, k, v, out}, 4))
        return nb_cpu_attention_dense(be, out, lse, a);
    att_job j;
    uint64_t offset = a->rng.offset;
    if (a->rng.offset_base) offset += *a->rng.offset_base; /* host memory here: the CPU captures no graphs */
    nb_status st = setup("attention", &j, out, lse, q, k, v, a->mask, a->is_causal, a->scale, a->dropout_p,
                         a->rng.seed, offset);
    if (st) return st;
    if (j.S == 0) {
        fill_empty_keys(&j);
        return NB_OK;
    }
    return run_items(be, &j, j.dt == NB_F32 ? fwd_item_f32 : fwd_item_f64, j.B * j.nqg, "attention");
}

nb_status nb_cpu_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                    const nb_kview *gout, const nb_kview *out, const nb_kview *lse,
                                    const nb_attention_args *a) {
    const char *op = "attention_backward";
    const nb_kview *q = a->q, *k = a->k, *v = a->v;
    if (!nb_cpu_attention_views_dense((const nb_kview *[]){gout, q, k, v, out, gq, gk, gv}, 8))
        return nb_cpu_attention_backward_dense(be, gq, gk, gv, gout, out, lse, a);
    uint64_t offset = a->rng.offset;
    if (a->rng.offset_base) offset += *a->rng.offset_base;
    att_job j;
    nb_status st = setup(op, &j, out, lse, q, k, v, a->mask, a->is_causal, a->scale, a->dropout_p, a->rng.seed,
                         offset);
    if (st) return st;
    j.gout = gout->data;
    j.gq = gq ? gq->data : NULL, j.gk = gk ? gk->data : NULL, j.gv = gv ? gv->data : NULL;
    bool f32 = j.dt == NB_F32;
    void *ws_block;
    int64_t rows = j.B * j.L;
    void *D = nb_alloc_raw(be, nb_dtype_size(j.dt) * (size_t)(rows ? rows : 1), nb_backend_current_stream(be), &ws_block);
    if (!D) return nb_set_error(NB_ERR_OOM, "%s: out of memory for %lld row sums", op, (long long)rows);
    j.D = D;
    nb_cpu_parallel_for(rows, 4096 / (j.Ev + 1) + 1, f32 ? rowdot_f32 : rowdot_f64, &j);
    j.fused_dq = j.gq && j.nkg == 1; /* short keys: one pass, no tile computed twice */
    if (j.gk || j.gv || j.fused_dq) st = run_items(be, &j, f32 ? bwd_kv_item_f32 : bwd_kv_item_f64, j.B * j.nkg, op);
    if (!st && j.gq && !j.fused_dq) st = run_items(be, &j, f32 ? bwd_q_item_f32 : bwd_q_item_f64, j.B * j.nqg, op);
    nb_free_raw(be, ws_block);
    return st;
}
