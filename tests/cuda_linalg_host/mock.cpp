// mock.cpp - host implementations behind tests/cuda_linalg_host/mock: an allocation
// registry that bounds-checks every library call's footprint (as compute-sanitizer
// would), the runtime calls the slots use, nb_set_error, and cuSOLVER/cuBLAS's
// legacy routines on reference LAPACK/BLAS with cuSOLVER's argument rules
// (gesvd needs m >= n, leading dimensions, workspace sizes) checked.
#include <map>
#include <stdarg.h>
#include <vector>
#include "cuda_common.cuh"
#include <cusolverDn.h>

static std::map<const char *, size_t> live;
void *reg_alloc(size_t bytes) { char *p = (char *)malloc(bytes); live[p] = bytes; return p; }
void reg_free(void *p) { live.erase((const char *)p); free(p); }
void check_region(const void *p, size_t bytes, const char *what) {
    if (bytes == 0) return;
    const char *c = (const char *)p;
    auto it = live.upper_bound(c);
    if (it != live.begin()) {
        --it;
        if (c >= it->first && c + bytes <= it->first + it->second) return;
    }
    fprintf(stderr, "OUT OF BOUNDS: %s: %p + %zu bytes is outside every live allocation\n", what, p, bytes);
    abort();
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { check_region(p, n, "cudaMemsetAsync"); memset(p, v, n); return 0; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    check_region(d, n, "cudaMemcpyAsync dst"); check_region(s, n, "cudaMemcpyAsync src"); memcpy(d, s, n); return 0;
}

static char errbuf[1024];
static nb_status errst;
extern "C" nb_status nb_set_error(nb_status s, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt); vsnprintf(errbuf, sizeof errbuf, fmt, ap); va_end(ap);
    errst = s; return s;
}
extern "C" const char *nb_last_error(void) { return errbuf; }
extern "C" nb_status nb_last_status(void) { return errst; }
extern "C" size_t nb_dtype_size(nb_dtype dt) { return dt == NB_F32 ? 4 : 8; }
extern "C" const char *nb_dtype_name(nb_dtype dt) { return dt == NB_F32 ? "float32" : dt == NB_F64 ? "float64" : "other"; }

int g_word;
namespace nbc {
int device_of(nb_backend *) { return 0; }
int *err_word(nb_backend *) { return &g_word; }
int slot_tag(const char *slot) {
    static const char *names[] = {"linalg_solve", "linalg_det", "linalg_cholesky", "linalg_lstsq", "linalg_qr", "linalg_eigh", "linalg_svd"};
    for (int i = 0; i < 7; i++) if (!strcmp(names[i], slot)) return i + 1;
    fprintf(stderr, "unknown slot %s\n", slot); abort();
}
nb_status cuda_fail(const char *slot, const char *call, cudaError_t) { return nb_set_error(NB_ERR_DEVICE, "%s: %s failed", slot, call); }
}
extern "C" cusolverDnHandle_t nb_cuda_cusolver(nb_backend *) { return (cusolverDnHandle_t)1; }
extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *) { return (cublasHandle_t)1; }
cusolverStatus_t cusolverDnSetDeterministicMode(cusolverDnHandle_t, cusolverDeterministicMode_t m) {
    return m == CUSOLVER_DETERMINISTIC_RESULTS ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_INVALID_VALUE;
}
const char *cublasGetStatusString(cublasStatus_t) { return "mock"; }
cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t m) { return m == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE; }

// ---- reference LAPACK / BLAS (Fortran, hidden string lengths last) -------------
extern "C" {
#define F(T, P)                                                                                                  \
    void P##getrf_(int *, int *, T *, int *, int *, int *);                                                      \
    void P##getrs_(const char *, int *, int *, const T *, int *, const int *, T *, int *, int *, size_t);        \
    void P##potrf_(const char *, int *, T *, int *, int *, size_t);                                              \
    void P##geqrf_(int *, int *, T *, int *, T *, T *, int *, int *);                                            \
    void P##orgqr_(int *, int *, int *, T *, int *, const T *, T *, int *, int *);                               \
    void P##ormqr_(const char *, const char *, int *, int *, int *, const T *, int *, const T *, T *, int *, T *, int *, \
                   int *, size_t, size_t);                                                                       \
    void P##syevd_(const char *, const char *, int *, T *, int *, T *, T *, int *, int *, int *, int *, size_t, size_t); \
    void P##gesvd_(const char *, const char *, int *, int *, T *, int *, T *, T *, int *, T *, int *, T *, int *, int *, \
                   size_t, size_t);                                                                              \
    void P##trsm_(const char *, const char *, const char *, const char *, int *, int *, const T *, const T *, int *, T *, \
                  int *, size_t, size_t, size_t, size_t);
F(float, s)
F(double, d)
#undef F
}

static const int LW = 5; // the workspace size the mock's bufferSize answers
static int64_t fp(int64_t m, int64_t n, int64_t ld) { return m > 0 && n > 0 ? (n - 1) * ld + m : 0; }
#define REQ(c) do { if (!(c)) { fprintf(stderr, "INVALID ARG in %s: %s\n", __func__, #c); return CUSOLVER_STATUS_INVALID_VALUE; } } while (0)
#define REGION(p, elems, T, what) check_region(p, sizeof(T) * (size_t)(elems), what)
static int mx1(int a) { return a > 1 ? a : 1; }

#define IMPL(T, P, p)                                                                                              \
cusolverStatus_t cusolverDn##P##getrf_bufferSize(cusolverDnHandle_t, int m, int n, T *, int lda, int *lw) {         \
    REQ(m >= 0 && n >= 0 && lda >= mx1(m)); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                            \
cusolverStatus_t cusolverDn##P##getrf(cusolverDnHandle_t, int m, int n, T *A, int lda, T *work, int *ipiv, int *info) { \
    REQ(m >= 0 && n >= 0 && lda >= mx1(m));                                                                        \
    REGION(A, fp(m, n, lda), T, "getrf A"); REGION(work, LW, T, "getrf work");                                     \
    REGION(ipiv, m < n ? m : n, int, "getrf ipiv"); REGION(info, 1, int, "getrf info");                            \
    p##getrf_(&m, &n, A, &lda, ipiv, info); return CUSOLVER_STATUS_SUCCESS; }                                      \
cusolverStatus_t cusolverDn##P##getrs(cusolverDnHandle_t, cublasOperation_t tr, int n, int nrhs, const T *A, int lda, \
                                      const int *ipiv, T *B, int ldb, int *info) {                                 \
    REQ(n >= 0 && nrhs >= 0 && lda >= mx1(n) && ldb >= mx1(n));                                                    \
    REGION(A, fp(n, n, lda), T, "getrs A"); REGION(ipiv, n, int, "getrs ipiv"); REGION(B, fp(n, nrhs, ldb), T, "getrs B"); \
    REGION(info, 1, int, "getrs info");                                                                            \
    p##getrs_(tr == CUBLAS_OP_N ? "N" : "T", &n, &nrhs, A, &lda, ipiv, B, &ldb, info, 1); return CUSOLVER_STATUS_SUCCESS; } \
cusolverStatus_t cusolverDn##P##potrf_bufferSize(cusolverDnHandle_t, cublasFillMode_t, int n, T *, int lda, int *lw) { \
    REQ(n >= 0 && lda >= mx1(n)); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                                      \
cusolverStatus_t cusolverDn##P##potrf(cusolverDnHandle_t, cublasFillMode_t u, int n, T *A, int lda, T *work, int lwork, \
                                      int *info) {                                                                 \
    REQ(n >= 0 && lda >= mx1(n) && lwork >= LW);                                                                   \
    REGION(A, fp(n, n, lda), T, "potrf A"); REGION(work, lwork, T, "potrf work"); REGION(info, 1, int, "potrf info"); \
    p##potrf_(u == CUBLAS_FILL_MODE_UPPER ? "U" : "L", &n, A, &lda, info, 1); return CUSOLVER_STATUS_SUCCESS; }     \
cusolverStatus_t cusolverDn##P##geqrf_bufferSize(cusolverDnHandle_t, int m, int n, T *, int lda, int *lw) {         \
    REQ(m >= 0 && n >= 0 && lda >= mx1(m)); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                            \
cusolverStatus_t cusolverDn##P##geqrf(cusolverDnHandle_t, int m, int n, T *A, int lda, T *tau, T *work, int lwork,    \
                                      int *info) {                                                                 \
    REQ(m >= 0 && n >= 0 && lda >= mx1(m) && lwork >= LW);                                                         \
    REGION(A, fp(m, n, lda), T, "geqrf A"); REGION(tau, m < n ? m : n, T, "geqrf tau");                            \
    REGION(work, lwork, T, "geqrf work"); REGION(info, 1, int, "geqrf info");                                      \
    int q = -1; T wq; p##geqrf_(&m, &n, A, &lda, tau, &wq, &q, info); q = mx1((int)wq);                            \
    std::vector<T> w(q); p##geqrf_(&m, &n, A, &lda, tau, w.data(), &q, info); return CUSOLVER_STATUS_SUCCESS; }      \
cusolverStatus_t cusolverDn##P##orgqr_bufferSize(cusolverDnHandle_t, int m, int n, int k, const T *, int lda,         \
                                                 const T *, int *lw) {                                             \
    REQ(m >= n && n >= k && k >= 0 && lda >= mx1(m)); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                  \
cusolverStatus_t cusolverDn##P##orgqr(cusolverDnHandle_t, int m, int n, int k, T *A, int lda, const T *tau, T *work,  \
                                      int lwork, int *info) {                                                      \
    REQ(m >= n && n >= k && k >= 0 && lda >= mx1(m) && lwork >= LW);                                               \
    REGION(A, fp(m, n, lda), T, "orgqr A"); REGION(tau, k, T, "orgqr tau"); REGION(work, lwork, T, "orgqr work");  \
    REGION(info, 1, int, "orgqr info");                                                                            \
    int q = -1; T wq; p##orgqr_(&m, &n, &k, A, &lda, tau, &wq, &q, info); q = mx1((int)wq);                        \
    std::vector<T> w(q); p##orgqr_(&m, &n, &k, A, &lda, tau, w.data(), &q, info); return CUSOLVER_STATUS_SUCCESS; }  \
cusolverStatus_t cusolverDn##P##ormqr_bufferSize(cusolverDnHandle_t, cublasSideMode_t s, cublasOperation_t, int m,     \
                                                 int n, int k, const T *, int lda, const T *, const T *, int ldc,   \
                                                 int *lw) {                                                        \
    REQ(s == CUBLAS_SIDE_LEFT && m >= k && k >= 0 && n >= 0 && lda >= mx1(m) && ldc >= mx1(m)); *lw = LW;         \
    return CUSOLVER_STATUS_SUCCESS; }                                                                              \
cusolverStatus_t cusolverDn##P##ormqr(cusolverDnHandle_t, cublasSideMode_t s, cublasOperation_t tr, int m, int n,     \
                                      int k, const T *A, int lda, const T *tau, T *C, int ldc, T *work, int lwork,  \
                                      int *info) {                                                                 \
    REQ(s == CUBLAS_SIDE_LEFT && m >= k && k >= 0 && n >= 0 && lda >= mx1(m) && ldc >= mx1(m) && lwork >= LW);    \
    REGION(A, fp(m, k, lda), T, "ormqr A"); REGION(tau, k, T, "ormqr tau"); REGION(C, fp(m, n, ldc), T, "ormqr C"); \
    REGION(work, lwork, T, "ormqr work"); REGION(info, 1, int, "ormqr info");                                      \
    const char *t = tr == CUBLAS_OP_N ? "N" : "T";                                                                 \
    int q = -1; T wq; p##ormqr_("L", t, &m, &n, &k, A, &lda, tau, C, &ldc, &wq, &q, info, 1, 1); q = mx1((int)wq); \
    std::vector<T> w(q); p##ormqr_("L", t, &m, &n, &k, A, &lda, tau, C, &ldc, w.data(), &q, info, 1, 1);           \
    return CUSOLVER_STATUS_SUCCESS; }                                                                              \
cusolverStatus_t cusolverDn##P##syevd_bufferSize(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int n,       \
                                                 const T *, int lda, const T *, int *lw) {                         \
    REQ(n >= 0 && lda >= mx1(n)); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                                      \
cusolverStatus_t cusolverDn##P##syevd(cusolverDnHandle_t, cusolverEigMode_t j, cublasFillMode_t u, int n, T *A, int lda, \
                                      T *W, T *work, int lwork, int *info) {                                       \
    REQ(n >= 0 && lda >= mx1(n) && lwork >= LW);                                                                   \
    REGION(A, fp(n, n, lda), T, "syevd A"); REGION(W, n, T, "syevd W"); REGION(work, lwork, T, "syevd work");      \
    REGION(info, 1, int, "syevd info");                                                                            \
    const char *jz = j == CUSOLVER_EIG_MODE_VECTOR ? "V" : "N", *ul = u == CUBLAS_FILL_MODE_UPPER ? "U" : "L";     \
    int q = -1, iq = -1, iwq; T wq; p##syevd_(jz, ul, &n, A, &lda, W, &wq, &q, &iwq, &iq, info, 1, 1);             \
    q = mx1((int)wq); iq = mx1(iwq); std::vector<T> w(q); std::vector<int> iw(iq);                                 \
    p##syevd_(jz, ul, &n, A, &lda, W, w.data(), &q, iw.data(), &iq, info, 1, 1); return CUSOLVER_STATUS_SUCCESS; }  \
cusolverStatus_t cusolverDn##P##gesvd_bufferSize(cusolverDnHandle_t, int m, int n, int *lw) {                       \
    REQ(m >= n && n >= 0); *lw = LW; return CUSOLVER_STATUS_SUCCESS; }                                             \
cusolverStatus_t cusolverDn##P##gesvd(cusolverDnHandle_t, signed char ju, signed char jv, int m, int n, T *A, int lda, \
                                      T *S, T *U, int ldu, T *VT, int ldvt, T *work, int lwork, T *rwork, int *info) { \
    REQ(m >= n && n >= 0 && lda >= mx1(m) && lwork >= LW);                                                         \
    REQ(ju == 'A' || ju == 'S' || ju == 'N'); REQ(jv == 'A' || jv == 'S' || jv == 'N');                            \
    int k = n;                                                                                                     \
    REGION(A, fp(m, n, lda), T, "gesvd A"); REGION(S, k, T, "gesvd S"); REGION(work, lwork, T, "gesvd work");      \
    REGION(rwork, k - 1, T, "gesvd rwork"); REGION(info, 1, int, "gesvd info");                                    \
    if (ju != 'N') { REQ(ldu >= mx1(m)); REGION(U, fp(m, ju == 'A' ? m : k, ldu), T, "gesvd U"); } else REQ(ldu >= 1); \
    if (jv != 'N') { REQ(ldvt >= mx1(jv == 'A' ? n : k)); REGION(VT, fp(jv == 'A' ? n : k, n, ldvt), T, "gesvd VT"); } \
    else REQ(ldvt >= 1);                                                                                           \
    char a[2] = {(char)ju, 0}, b[2] = {(char)jv, 0};                                                               \
    int q = -1; T wq; p##gesvd_(a, b, &m, &n, A, &lda, S, U, &ldu, VT, &ldvt, &wq, &q, info, 1, 1); q = mx1((int)wq); \
    std::vector<T> w(q); p##gesvd_(a, b, &m, &n, A, &lda, S, U, &ldu, VT, &ldvt, w.data(), &q, info, 1, 1);        \
    return CUSOLVER_STATUS_SUCCESS; }                                                                              \
cublasStatus_t cublas##P##trsm_v2(cublasHandle_t, cublasSideMode_t s, cublasFillMode_t u, cublasOperation_t tr,      \
                                  cublasDiagType_t d, int m, int n, const T *alpha, const T *A, int lda, T *B, int ldb) { \
    if (!(s == CUBLAS_SIDE_LEFT && m >= 0 && n >= 0 && lda >= mx1(m) && ldb >= mx1(m))) {                          \
        fprintf(stderr, "INVALID ARG in trsm\n"); return CUBLAS_STATUS_INVALID_VALUE; }                             \
    REGION(A, fp(m, m, lda), T, "trsm A"); REGION(B, fp(m, n, ldb), T, "trsm B");                                  \
    p##trsm_("L", u == CUBLAS_FILL_MODE_UPPER ? "U" : "L", tr == CUBLAS_OP_N ? "N" : "T",                          \
             d == CUBLAS_DIAG_UNIT ? "U" : "N", &m, &n, alpha, A, &lda, B, &ldb, 1, 1, 1, 1);                      \
    return CUBLAS_STATUS_SUCCESS; }
IMPL(float, S, s)
IMPL(double, D, d)
