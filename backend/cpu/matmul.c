/* matmul.c - CPU batched GEMM through OpenBLAS's cblas_sgemm/cblas_dgemm
 * (blas.c loads it). Each matrix of a and b is passed to BLAS in place: a
 * view with unit stride across columns is row-major (NoTrans, ld = row
 * stride); one with unit stride across rows is a transposed row-major
 * matrix (Trans, ld = column stride). Size-1 dims may have any stride. A
 * matrix that fits neither (e.g. a broadcast row, stride 0) is copied to a
 * contiguous buffer first. Batches of small products (below OpenBLAS's own
 * threading threshold, 64^3 multiply-adds) run in parallel on the pool;
 * larger ones run one after another, each threaded inside OpenBLAS, or,
 * with NB_CPU_GEMM=onednn, float32 ones whose every dim is at least
 * NB_DNNL_MIN_DIM inside oneDNN's sgemm (dnnl.c says when that pays). */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

/* OpenBLAS 0.3.21 runs a GEMM single-threaded below this many multiply-adds
 * (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD). */
#define NB_BLAS_SMALL_GEMM 262144

/* oneDNN lost to OpenBLAS on GEMMs with a dim below this (its OpenMP team
 * costs more than such a product: 128x10x512 ran at 66 vs 16 GF/s, but
 * 128x512x10 at 70 vs 97 and 64x10x128 at 32 vs 88). */
#define NB_DNNL_MIN_DIM 32

nb_cpu_mat_layout nb_cpu_layout_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
    int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    if (sc == 1 || cols == 1) { /* row-major: (i, j) at i*ld + j */
        int64_t ld = rows == 1 ? c1 : sr;
        if (ld >= c1 && ld <= INT_MAX) return (nb_cpu_mat_layout){NB_CBLAS_NO_TRANS, (int)ld, false};
    }
    if (sr == 1 || rows == 1) { /* column-major: (i, j) at j*ld + i */
        int64_t ld = cols == 1 ? r1 : sc;
        if (ld >= r1 && ld <= INT_MAX) return (nb_cpu_mat_layout){NB_CBLAS_TRANS, (int)ld, false};
    }
    return (nb_cpu_mat_layout){NB_CBLAS_NO_TRANS, (int)c1, true};
}

typedef struct mm_job {
    const nb_cpu_blas *blas;
    const nb_kview *c, *a, *b;
    int64_t m, n, k;
    nb_cpu_mat_layout la, lb;
    double alpha, beta;
    atomic_int oom; /* a copy buffer could not be allocated */
    nb_dnnl_sgemm_fn dnnl; /* oneDNN for this call's GEMMs (top level only), or NULL */
} mm_job;

int64_t nb_cpu_batch_offset(const nb_kview *v, int64_t i) {
    int64_t off = 0;
    for (int d = v->ndim - 3; d >= 0; d--) {
        off += (i % v->shape[d]) * v->strides[d];
        i /= v->shape[d];
    }
    return off;
}

/* A contiguous copy of one rows x cols matrix (the rare no-layout case). */
static void *pack(const nb_kview *v, const char *src, int64_t rows, int64_t cols) {
    size_t es = nb_dtype_size(v->dtype);
    char *dst = malloc((size_t)(rows * cols) * es + 1);
    if (!dst) return NULL;
    int64_t sr = v->strides[v->ndim - 2], sc = v->strides[v->ndim - 1];
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            memcpy(dst + (size_t)(i * cols + j) * es, src + (i * sr + j * sc) * (int64_t)es, es);
    return dst;
}

static void gemm_one(mm_job *j, int64_t bi) {
    size_t es = nb_dtype_size(j->c->dtype);
    const char *a = (const char *)j->a->data + nb_cpu_batch_offset(j->a, bi) * (int64_t)es;
    const char *b = (const char *)j->b->data + nb_cpu_batch_offset(j->b, bi) * (int64_t)es;
    char *c = (char *)j->c->data + bi * j->m * j->n * (int64_t)es;
    void *pa = j->la.copy ? pack(j->a, a, j->m, j->k) : NULL;
    void *pb = j->lb.copy ? pack(j->b, b, j->k, j->n) : NULL;
    if ((j->la.copy && !pa) || (j->lb.copy && !pb)) {
        atomic_store(&j->oom, 1);
    } else {
        if (pa) a = pa;
        if (pb) b = pb;
        int m = (int)j->m, n = (int)j->n, k = (int)j->k;
        if (j->dnnl && j->dnnl(j->la.trans == NB_CBLAS_TRANS ? 'T' : 'N', j->lb.trans == NB_CBLAS_TRANS ? 'T' : 'N',
                               m, n, k, (float)j->alpha, (const float *)a, j->la.ld, (const float *)b, j->lb.ld,
                               (float)j->beta, (float *)c, n) == 0) {
            /* done by oneDNN (a failure falls through to OpenBLAS) */
        } else if (j->c->dtype == NB_F32)
            j->blas->sgemm(NB_CBLAS_ROW_MAJOR, j->la.trans, j->lb.trans, m, n, k, (float)j->alpha,
                           (const float *)a, j->la.ld, (const float *)b, j->lb.ld, (float)j->beta,
                           (float *)c, n);
        else
            j->blas->dgemm(NB_CBLAS_ROW_MAJOR, j->la.trans, j->lb.trans, m, n, k, j->alpha,
                           (const double *)a, j->la.ld, (const double *)b, j->lb.ld, j->beta,
                           (double *)c, n);
    }
    free(pa);
    free(pb);
}

static void gemm_batches(void *arg, int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; i++) gemm_one(arg, i);
}

/* k == 0: c = beta * c (no products); beta == 0 writes zeros even over NaN. */
static void scale_c(const nb_kview *c, int64_t numel, double beta) {
    if (c->dtype == NB_F32) {
        float *p = c->data;
        for (int64_t i = 0; i < numel; i++) p[i] = beta == 0 ? 0.0f : (float)beta * p[i];
    } else {
        double *p = c->data;
        for (int64_t i = 0; i < numel; i++) p[i] = beta == 0 ? 0.0 : beta * p[i];
    }
}

/* A float32 GEMM run at top level goes to oneDNN (when nb_cpu_dnnl_sgemm
 * gives it: NB_CPU_GEMM=onednn) if no dim is tiny. */
static bool use_dnnl(int64_t m, int64_t n, int64_t k) {
    return m >= NB_DNNL_MIN_DIM && n >= NB_DNNL_MIN_DIM && k >= NB_DNNL_MIN_DIM;
}

/* The CPU's own limits past the shared check (backend/check/matmul.c): c contiguous (the CUDA backend also takes
 * a 2-d c with a row stride of its own) and sizes in BLAS's int range. */
static nb_status check_cpu_limits(const nb_kview *c, const nb_kview *a, const nb_kview *b) {
    char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
    if (!nb_view_is_contiguous(c))
        return nb_set_error(NB_ERR_INVALID_ARG, "matmul: c %s must be contiguous",
                            nb_view_str(c, b1, sizeof b1));
    int nd = c->ndim;
    int64_t m = c->shape[nd - 2], n = c->shape[nd - 1], k = a->shape[nd - 1];
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return nb_set_error(NB_ERR_UNSUPPORTED, "matmul: a %s @ b %s has a dim above BLAS's int range",
                            nb_view_str(a, b1, sizeof b1), nb_view_str(b, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_cpu_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                        double alpha, double beta) {
    if (nb_dtype_is_16bit(a->dtype)) /* c of a's dtype or float32 (checked: backend/check/matmul.c) */
        return nb_cpu_matmul16(be, c, a, b, alpha, beta);
    nb_status st = check_cpu_limits(c, a, b);
    if (st) return st;
    int nd = c->ndim;
    int64_t m = c->shape[nd - 2], n = c->shape[nd - 1], k = a->shape[nd - 1];
    int64_t numel = nb_view_numel(c), batches = m && n ? numel / (m * n) : 0;
    if (numel == 0) return NB_OK;
    if (k == 0) {
        scale_c(c, numel, beta);
        return NB_OK;
    }
    const nb_cpu_blas *blas = nb_cpu_blas_get();
    if (!blas) return nb_last_status();
    mm_job job = {blas, c, a, b, m, n, k,
                  nb_cpu_layout_of(m, k, a->strides[nd - 2], a->strides[nd - 1]),
                  nb_cpu_layout_of(k, n, b->strides[nd - 2], b->strides[nd - 1]),
                  alpha, beta, 0, NULL};
    int64_t work = m * n * k;
    if (batches > 1 && work < NB_BLAS_SMALL_GEMM && nb_cpu_get_num_threads() > 1) {
        nb_cpu_parallel_for(batches, NB_BLAS_SMALL_GEMM / 4 / work + 1, gemm_batches, &job);
    } else {
        if (c->dtype == NB_F32 && use_dnnl(m, n, k)) job.dnnl = nb_cpu_dnnl_sgemm();
        gemm_batches(&job, 0, batches);
    }
    if (atomic_load(&job.oom))
        return nb_set_error(NB_ERR_OOM, "matmul: out of memory copying a strided operand (m=%lld, n=%lld, k=%lld)",
                            (long long)m, (long long)n, (long long)k);
    return NB_OK;
}
