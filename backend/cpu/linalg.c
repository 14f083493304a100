/* linalg.c - the CPU backend's linear-algebra kernels (torch.linalg) through
 * LAPACKE, loaded at run time after OpenBLAS (blas.c). Contracts are in
 * nb_slots.def (checked by backend/check/linalg.c): contiguous row-major batches
 * [..., rows, cols]; LAPACKE's LAPACK_ROW_MAJOR interface transposes to and
 * from Fortran order itself, except for the LU determinant, which factors
 * the row-major buffer as its transpose (det A^T = det A) with no copy.
 *
 * Threads: OpenBLAS's LAPACK (getrf, potrf, the blocked QR and the BLAS-3
 * updates of syevd/gesdd) runs on OpenBLAS's own threads, so the batch runs
 * sequentially here; running it on nb_cpu_parallel_for as well would
 * oversubscribe the cores. Small matrices in large batches are therefore
 * slow (one LAPACK call each); a batched path can come later.
 * Scratch: one copy of the input matrix per call (taken from the caching
 * allocator); LAPACKE allocates its workspace and transpose buffers itself. */
#include <math.h>
#include <string.h>

#include "blas.h"
#include "cpu_common.h"
#include "nb_impl.h"

#define ROW LAPACK_ROW_MAJOR
#define MAX1(x) ((x) > 1 ? (x) : 1)

static double get(const void *p, nb_dtype dt, int64_t i) {
    return dt == NB_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static void set(void *p, nb_dtype dt, int64_t i, double v) {
    if (dt == NB_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}
static char *at(const nb_kview *v, int64_t elem) { return (char *)v->data + elem * (int64_t)nb_dtype_size(v->dtype); }

/* Product of the batch dims (all but the last `mat` dims). */
static int64_t batch_of(const nb_kview *v, int mat) {
    int64_t b = 1;
    for (int d = 0; d < v->ndim - mat; d++) b *= v->shape[d];
    return b;
}

/* The LAPACKE table, after checking that sizes fit lapack_int (the views are checked: backend/check/linalg.c). */
static const nb_cpu_lapack *prologue(const char *op, int64_t m, int64_t n) {
    if (m > INT32_MAX || n > INT32_MAX || m * n > INT32_MAX)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: a %lld x %lld matrix is too large for LAPACK", op, (long long)m,
                       (long long)n);
    return nb_cpu_lapack_get();
}

/* Host scratch of `bytes` from the caching allocator; *keep owns it. */
static void *scratch(nb_tensor **keep, int64_t bytes) {
    int64_t n = MAX1(bytes);
    *keep = nb_tensor_new_unscoped(1, &n, NB_U8, NB_CPU);
    return *keep ? (*keep)->storage->data : NULL;
}

/* A negative info is a bug in the arguments (or LAPACKE's own allocation). */
static nb_status bad_info(const char *op, const char *fn, lapack_int info) {
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        return nb_set_error(NB_ERR_OOM, "%s: LAPACKE_%s ran out of memory", op, fn);
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: LAPACKE_%s rejected argument %d", op, fn, (int)-info);
}

/* NaN inputs. LAPACKE refuses a matrix holding NaN ("rejected argument
 * 4"); PyTorch calls LAPACK directly and gets NaNs. So each batch element is
 * scanned first (its read triangle only where the routine reads one: 'L',
 * 'U', or 0 for all), and one holding NaN gets NaN outputs without a LAPACK
 * call (structural zeros stay zero); svd fails instead, as PyTorch's. */
static bool has_nan(const char *p, nb_dtype dt, int64_t rows, int64_t cols, char tri) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            if ((!tri || (tri == 'L' ? c <= r : c >= r)) && isnan(get(p, dt, r * cols + c))) return true;
    return false;
}
/* Sets the rows x cols matrix at p to NaN (tri 'L'/'U': that triangle, the other zero). */
static void nan_fill(char *p, nb_dtype dt, int64_t rows, int64_t cols, char tri) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            set(p, dt, r * cols + c, !tri || (tri == 'L' ? c <= r : c >= r) ? NAN : 0.0);
}

/* ---- LU: solve, det ------------------------------------------------------ */

nb_status nb_cpu_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    (void)be;
    int64_t n = a->shape[a->ndim - 1], k = x->shape[x->ndim - 1], batch = batch_of(a, 2);
    const nb_cpu_lapack *L = prologue("linalg_solve", n, MAX1(k));
    if (!L) return nb_last_status();
    size_t es = nb_dtype_size(a->dtype);
    memcpy(x->data, b->data, (size_t)(batch * n * k) * es);
    if (n == 0 || k == 0) return NB_OK;
    nb_tensor *keep;
    char *lu = scratch(&keep, n * n * (int64_t)es + n * (int64_t)sizeof(lapack_int));
    if (!lu) return nb_last_status();
    lapack_int *ipiv = (lapack_int *)(lu + n * n * (int64_t)es), N = (lapack_int)n, K = (lapack_int)k, info = 0;
    int64_t i = 0;
    for (; i < batch && info == 0; i++) {
        if (has_nan(at(a, i * n * n), a->dtype, n, n, 0) || has_nan(at(x, i * n * k), a->dtype, n, k, 0)) {
            nan_fill(at(x, i * n * k), a->dtype, n, k, 0);
            continue;
        }
        memcpy(lu, at(a, i * n * n), (size_t)(n * n) * es);
        info = a->dtype == NB_F32 ? L->sgesv(ROW, N, K, (float *)lu, N, ipiv, (float *)at(x, i * n * k), K)
                                  : L->dgesv(ROW, N, K, (double *)lu, N, ipiv, (double *)at(x, i * n * k), K);
    }
    nb_release(keep);
    if (info > 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "linalg_solve: the matrix is singular (batch element %lld: U[%d,%d] = 0)",
                            (long long)(i - 1), (int)info - 1, (int)info - 1);
    return info < 0 ? bad_info("linalg_solve", "gesv", info) : NB_OK;
}

/* det, sign, logabsdet of one matrix from its LU factors lu (n x n, either
 * order): det = (-1)^swaps prod u_jj; the sign counts negative pivots, so it
 * stays right when the product under- or overflows. */
static void det_from_lu(const char *lu, nb_dtype dt, int64_t n, const lapack_int *ipiv, bool singular, double *det,
                        double *sign, double *logabs) {
    double d = 1, s = 1, l = 0;
    for (int64_t j = 0; j < n; j++) {
        double u = get(lu, dt, j * n + j);
        if (ipiv[j] != j + 1) s = -s, d = -d;
        d *= u;
        if (u < 0) s = -s;
        l += log(fabs(u));
    }
    *det = singular ? 0.0 : d;
    *sign = singular ? 0.0 : s;
    *logabs = singular ? -INFINITY : l;
}

nb_status nb_cpu_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet,
                            const nb_kview *a) {
    (void)be;
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    const nb_cpu_lapack *L = prologue("linalg_det", n, n);
    if (!L) return nb_last_status();
    size_t es = nb_dtype_size(a->dtype);
    nb_tensor *keep;
    char *lu = scratch(&keep, n * n * (int64_t)es + n * (int64_t)sizeof(lapack_int));
    if (!lu) return nb_last_status();
    lapack_int *ipiv = (lapack_int *)(lu + n * n * (int64_t)es), N = (lapack_int)MAX1(n), info = 0;
    for (int64_t i = 0; i < batch && info >= 0; i++) {
        if (has_nan(at(a, i * n * n), a->dtype, n, n, 0)) { /* det, sign and log|det| all unknown */
            if (det) set(det->data, det->dtype, i, NAN);
            if (sign) set(sign->data, sign->dtype, i, NAN);
            if (logabsdet) set(logabsdet->data, logabsdet->dtype, i, NAN);
            continue;
        }
        memcpy(lu, at(a, i * n * n), (size_t)(n * n) * es);
        info = n == 0 ? 0
               : a->dtype == NB_F32 ? L->sgetrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, (float *)lu, N, ipiv)
                                    : L->dgetrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, (double *)lu, N, ipiv);
        double d, s, l;
        det_from_lu(lu, a->dtype, n, ipiv, info > 0, &d, &s, &l);
        if (det) set(det->data, det->dtype, i, d);
        if (sign) set(sign->data, sign->dtype, i, s);
        if (logabsdet) set(logabsdet->data, logabsdet->dtype, i, l);
    }
    nb_release(keep);
    return info < 0 ? bad_info("linalg_det", "getrf", info) : NB_OK;
}

/* ---- Cholesky ------------------------------------------------------------- */

nb_status nb_cpu_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper) {
    (void)be;
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    const nb_cpu_lapack *L = prologue("linalg_cholesky", n, n);
    if (!L) return nb_last_status();
    size_t es = nb_dtype_size(a->dtype);
    memcpy(l->data, a->data, (size_t)(batch * n * n) * es);
    lapack_int info = 0, N = (lapack_int)MAX1(n);
    int64_t i = 0;
    for (; i < batch && info == 0 && n > 0; i++) {
        char *p = at(l, i * n * n);
        if (has_nan(p, a->dtype, n, n, upper ? 'U' : 'L')) {
            nan_fill(p, a->dtype, n, n, upper ? 'U' : 'L');
            continue;
        }
        info = a->dtype == NB_F32 ? L->spotrf(ROW, upper ? 'U' : 'L', (lapack_int)n, (float *)p, N)
                                  : L->dpotrf(ROW, upper ? 'U' : 'L', (lapack_int)n, (double *)p, N);
        for (int64_t r = 0; r < n; r++) /* LAPACK leaves the other triangle as it was */
            for (int64_t c = 0; c < n; c++)
                if (upper ? r > c : r < c) set(p, a->dtype, r * n + c, 0);
    }
    if (info > 0)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "linalg_cholesky: the input is not positive-definite (batch element %lld: the leading "
                            "minor of order %d is not positive-definite)",
                            (long long)(i - 1), (int)info);
    return info < 0 ? bad_info("linalg_cholesky", "potrf", info) : NB_OK;
}

/* ---- QR ---------------------------------------------------------------------- */

/* One matrix: buf (m x ld, row-major) holds a; on return q and r are written. */
static lapack_int qr_one(const nb_cpu_lapack *L, nb_dtype dt, char *buf, char *tau, int64_t m, int64_t n,
                         int64_t kq, int64_t ld, char *q, char *r) {
    int64_t k = m < n ? m : n;
    lapack_int M = (lapack_int)m, N = (lapack_int)n, KQ = (lapack_int)kq, K = (lapack_int)k, LD = (lapack_int)ld;
    lapack_int info = dt == NB_F32 ? L->sgeqrf(ROW, M, N, (float *)buf, LD, (float *)tau)
                                   : L->dgeqrf(ROW, M, N, (double *)buf, LD, (double *)tau);
    if (info) return info;
    for (int64_t i = 0; i < kq; i++) /* R: the upper triangle of the first rows */
        for (int64_t j = 0; j < n; j++) set(r, dt, i * n + j, i <= j ? get(buf, dt, i * ld + j) : 0.0);
    /* complete mode of a tall matrix: orgqr reads columns n..kq-1 too (LAPACKE
     * checks them for NaN), which the copy of a never wrote */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < kq; j++) set(buf, dt, i * ld + j, 0.0);
    info = dt == NB_F32 ? L->sorgqr(ROW, M, KQ, K, (float *)buf, LD, (const float *)tau)
                        : L->dorgqr(ROW, M, KQ, K, (double *)buf, LD, (const double *)tau);
    int64_t es = (int64_t)nb_dtype_size(dt);
    for (int64_t i = 0; i < m; i++) memcpy(q + i * kq * es, buf + i * ld * es, (size_t)(kq * es));
    return info;
}

nb_status nb_cpu_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a) {
    (void)be;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], kq = q->shape[q->ndim - 1];
    int64_t batch = batch_of(a, 2), ld = MAX1(n > kq ? n : kq);
    const nb_cpu_lapack *L = prologue("linalg_qr", m, ld);
    if (!L) return nb_last_status();
    if (m == 0 || kq == 0) {
        memset(r->data, 0, (size_t)(batch * kq * n) * nb_dtype_size(a->dtype));
        return NB_OK;
    }
    size_t es = nb_dtype_size(a->dtype);
    nb_tensor *keep;
    char *buf = scratch(&keep, (m * ld + MAX1(kq)) * (int64_t)es);
    if (!buf) return nb_last_status();
    lapack_int info = 0;
    for (int64_t i = 0; i < batch && info == 0; i++) {
        if (has_nan(at(a, i * m * n), a->dtype, m, n, 0)) {
            nan_fill(at(q, i * m * kq), a->dtype, m, kq, 0);
            nan_fill(at(r, i * kq * n), a->dtype, kq, n, 'U');
            continue;
        }
        for (int64_t row = 0; row < m; row++) memcpy(buf + row * ld * (int64_t)es, at(a, (i * m + row) * n), (size_t)n * es);
        info = qr_one(L, a->dtype, buf, buf + m * ld * (int64_t)es, m, n, kq, ld, at(q, i * m * kq), at(r, i * kq * n));
    }
    nb_release(keep);
    return info ? bad_info("linalg_qr", "geqrf/orgqr", info) : NB_OK;
}

/* ---- symmetric eigendecomposition ------------------------------------------ */

nb_status nb_cpu_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper) {
    (void)be;
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    const nb_cpu_lapack *L = prologue("linalg_eigh", n, n);
    if (!L) return nb_last_status();
    if (!v) /* the contract lets v be NULL; syevd here works in v */
        return nb_set_error(NB_ERR_UNSUPPORTED, "linalg_eigh: eigenvalues alone (V NULL) are not done on the CPU");
    memcpy(v->data, a->data, (size_t)(batch * n * n) * nb_dtype_size(a->dtype));
    lapack_int info = 0, N = (lapack_int)n;
    int64_t i = 0;
    char uplo = upper ? 'U' : 'L';
    for (; i < batch && info == 0 && n > 0; i++) {
        char *pv = at(v, i * n * n), *pw = at(w, i * n);
        if (has_nan(pv, a->dtype, n, n, uplo)) { /* PyTorch returns LAPACK's arbitrary eigenvalues here */
            nan_fill(pv, a->dtype, n, n, 0);
            nan_fill(pw, a->dtype, 1, n, 0);
            continue;
        }
        info = a->dtype == NB_F32 ? L->ssyevd(ROW, 'V', uplo, N, (float *)pv, N, (float *)pw)
                                  : L->dsyevd(ROW, 'V', uplo, N, (double *)pv, N, (double *)pw);
    }
    if (info > 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "linalg_eigh: the algorithm failed to converge (batch element %lld)",
                            (long long)(i - 1));
    return info < 0 ? bad_info("linalg_eigh", "syevd", info) : NB_OK;
}

/* ---- SVD --------------------------------------------------------------------- */

/* U = I_m, Vh = I_n for an empty matrix with full_matrices. */
static void eye_fill(const nb_kview *v, int64_t batch, int64_t n) {
    for (int64_t i = 0; i < batch * n * n; i++) set(v->data, v->dtype, i, (i % (n * n)) % (n + 1) == 0 ? 1 : 0);
}

nb_status nb_cpu_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh, const nb_kview *a) {
    (void)be;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n, batch = batch_of(a, 2);
    const nb_cpu_lapack *L = prologue("linalg_svd", m, MAX1(n));
    if (!L) return nb_last_status();
    int64_t ucols = u ? u->shape[u->ndim - 1] : 1, vrows = vh ? vh->shape[vh->ndim - 2] : 1;
    char jobz = !u ? 'N' : ucols == m && vrows == n ? 'A' : 'S';
    if (k == 0) {
        if (jobz == 'A') eye_fill(u, batch, m), eye_fill(vh, batch, n);
        return NB_OK;
    }
    size_t es = nb_dtype_size(a->dtype);
    nb_tensor *keep;
    char *buf = scratch(&keep, (m * n + 2) * (int64_t)es), *dummy = buf + m * n * (int64_t)es;
    if (!buf) return nb_last_status();
    lapack_int info = 0, M = (lapack_int)m, N = (lapack_int)n, LDU = (lapack_int)ucols;
    int64_t i = 0;
    for (; i < batch && info == 0; i++) {
        if (has_nan(at(a, i * m * n), a->dtype, m, n, 0)) {
            nb_release(keep);
            return nb_set_error(NB_ERR_INVALID_ARG, "linalg_svd: the input holds NaN (batch element %lld), "
                                "so the SVD is undefined", (long long)i);
        }
        memcpy(buf, at(a, i * m * n), (size_t)(m * n) * es);
        char *pu = u ? at(u, i * m * ucols) : dummy, *pv = vh ? at(vh, i * vrows * n) : dummy;
        info = a->dtype == NB_F32
                   ? L->sgesdd(ROW, jobz, M, N, (float *)buf, N, (float *)at(s, i * k), (float *)pu, LDU, (float *)pv, N)
                   : L->dgesdd(ROW, jobz, M, N, (double *)buf, N, (double *)at(s, i * k), (double *)pu, LDU, (double *)pv, N);
    }
    nb_release(keep);
    if (info > 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "linalg_svd: the algorithm failed to converge (batch element %lld)",
                            (long long)(i - 1));
    return info < 0 ? bad_info("linalg_svd", "gesdd", info) : NB_OK;
}

/* ---- least squares ------------------------------------------------------------ */

nb_status nb_cpu_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    (void)be;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = b->shape[b->ndim - 1], batch = batch_of(a, 2);
    int64_t mx = m > n ? m : n;
    const nb_cpu_lapack *L = prologue("linalg_lstsq", mx, MAX1(k));
    if (!L) return nb_last_status();
    size_t es = nb_dtype_size(a->dtype);
    if (m == 0 || n == 0 || k == 0) {
        memset(x->data, 0, (size_t)(batch * n * k) * es);
        return NB_OK;
    }
    nb_tensor *keep;
    char *abuf = scratch(&keep, (m * n + mx * k) * (int64_t)es), *bbuf = abuf + m * n * (int64_t)es;
    if (!abuf) return nb_last_status();
    lapack_int info = 0;
    int64_t i = 0;
    for (; i < batch && info == 0; i++) {
        if (has_nan(at(a, i * m * n), a->dtype, m, n, 0) || has_nan(at(b, i * m * k), a->dtype, m, k, 0)) {
            nan_fill(at(x, i * n * k), a->dtype, n, k, 0);
            continue;
        }
        memcpy(abuf, at(a, i * m * n), (size_t)(m * n) * es);
        memcpy(bbuf, at(b, i * m * k), (size_t)(m * k) * es);
        info = a->dtype == NB_F32 ? L->sgels(ROW, 'N', (lapack_int)m, (lapack_int)n, (lapack_int)k, (float *)abuf,
                                             (lapack_int)n, (float *)bbuf, (lapack_int)k)
                                  : L->dgels(ROW, 'N', (lapack_int)m, (lapack_int)n, (lapack_int)k, (double *)abuf,
                                             (lapack_int)n, (double *)bbuf, (lapack_int)k);
        memcpy(at(x, i * n * k), bbuf, (size_t)(n * k) * es);
    }
    nb_release(keep);
    if (info > 0)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "linalg_lstsq: the input does not have full rank (batch element %lld: diagonal element "
                            "%d of its triangular factor is zero)",
                            (long long)(i - 1), (int)info);
    return info < 0 ? bad_info("linalg_lstsq", "gels", info) : NB_OK;
}
