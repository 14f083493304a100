/* blas.h - OpenBLAS, loaded at run time (internal to the CPU backend).
 *
 * nabla does not link OpenBLAS: it dlopens it on first use so that it can
 * choose OpenBLAS's kernels first. OpenBLAS 0.3.21 (Debian 12) detects
 * AVX-512 Xeons it does not know as Prescott: on our 2-core dev machines
 * sgemm 1024^3 ran at 64 GFLOP/s instead of 317 with
 * OPENBLAS_CORETYPE=SkylakeX, and OpenBLAS reads that variable only once,
 * while it initialises at load. So before loading, if OPENBLAS_CORETYPE is
 * unset, nabla sets it from the CPU's flags (avx512f -> SkylakeX,
 * avx2 -> Haswell). A user's own OPENBLAS_CORETYPE is kept. Likewise
 * OPENBLAS_THREAD_TIMEOUT, if unset, becomes 16 (idle OpenBLAS threads
 * busy-wait ~25 us instead of ~0.1 s, leaving the cores to nabla's loops).
 *
 * Libraries tried, in order: libopenblas.so.0, libopenblas.so,
 * libblas.so.3 (any CBLAS). setenv is not thread-safe against concurrent
 * getenv: the first GEMM should not race with other threads reading the
 * environment.
 *
 * LAPACKE (torch.linalg's kernels, backend/cpu/linalg.c) is loaded the same
 * way, only after the BLAS above, so OPENBLAS_CORETYPE and the thread count
 * already hold when LAPACK first runs: liblapacke.so.3, liblapacke.so, and
 * last the BLAS library itself (OpenBLAS builds outside Debian export the
 * LAPACKE_* symbols). On Debian 12, liblapacke.so.3 needs liblapack.so.3,
 * an alternative (update-alternatives --display liblapack.so.3-x86_64-linux-gnu)
 * that resolves to openblas-pthread/liblapack.so.3, which itself needs
 * libopenblas.so.0: the one OpenBLAS instance (and thread pool) already
 * loaded. With reference LAPACK selected instead, LAPACK's BLAS calls still
 * go to OpenBLAS through libblas.so.3.
 */
#ifndef NB_CPU_BLAS_H
#define NB_CPU_BLAS_H

#include <lapacke.h>

#include "nb_core.h"

/* CBLAS constants (cblas.h's values; we do not link cblas). */
enum { NB_CBLAS_ROW_MAJOR = 101, NB_CBLAS_NO_TRANS = 111, NB_CBLAS_TRANS = 112 };

typedef void (*nb_cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                                  const float *a, int lda, const float *b, int ldb, float beta,
                                  float *c, int ldc);
typedef void (*nb_cblas_dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
                                  const double *a, int lda, const double *b, int ldb, double beta,
                                  double *c, int ldc);

typedef struct nb_cpu_blas {
    nb_cblas_sgemm_fn sgemm;
    nb_cblas_dgemm_fn dgemm;
} nb_cpu_blas;

/* LAPACKE entry points (the high-level forms: they query and allocate the
 * workspace themselves), single and double precision. */
typedef struct nb_cpu_lapack {
    __typeof__(LAPACKE_sgesv) *sgesv;
    __typeof__(LAPACKE_dgesv) *dgesv;
    __typeof__(LAPACKE_sgetrf) *sgetrf;
    __typeof__(LAPACKE_dgetrf) *dgetrf;
    __typeof__(LAPACKE_spotrf) *spotrf;
    __typeof__(LAPACKE_dpotrf) *dpotrf;
    __typeof__(LAPACKE_sgeqrf) *sgeqrf;
    __typeof__(LAPACKE_dgeqrf) *dgeqrf;
    __typeof__(LAPACKE_sorgqr) *sorgqr;
    __typeof__(LAPACKE_dorgqr) *dorgqr;
    __typeof__(LAPACKE_ssyevd) *ssyevd;
    __typeof__(LAPACKE_dsyevd) *dsyevd;
    __typeof__(LAPACKE_sgesdd) *sgesdd;
    __typeof__(LAPACKE_dgesdd) *dgesdd;
    __typeof__(LAPACKE_sgels) *sgels;
    __typeof__(LAPACKE_dgels) *dgels;
} nb_cpu_lapack;

/* Loads LAPACKE on the first call (after the BLAS). Returns NULL with
 * NB_ERR_UNSUPPORTED set, naming the libraries tried and what is missing,
 * if no library has all the functions above. */
const nb_cpu_lapack *nb_cpu_lapack_get(void);

/* Loads the library on the first call (once per process; later calls are a
 * load-acquire). Returns NULL with NB_ERR_UNSUPPORTED set, naming the
 * libraries tried and dlerror(), if no CBLAS could be loaded. */
const nb_cpu_blas *nb_cpu_blas_get(void);

/* One line describing the loaded BLAS, e.g.
 * "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64 core=SkylakeX
 *  (OPENBLAS_CORETYPE=SkylakeX set by nabla)". Loads the library if needed;
 * "not loaded: ..." when it cannot be. Static storage; do not free. */
const char *nb_cpu_blas_info(void);

/* Sets OpenBLAS's thread count if it is loaded (else it is applied at load,
 * from nb_cpu_get_num_threads()). Called by nb_cpu_set_num_threads. */
void nb_cpu_blas_set_num_threads(int n);

/* oneDNN (dnnl.c): its row-major sgemm, C = alpha op(A) op(B) + beta C,
 * transa/transb 'N' or 'T'; returns dnnl_status_t (0: success). */
typedef int (*nb_dnnl_sgemm_fn)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                int64_t ldc);
/* oneDNN's sgemm, loading libdnnl.so.2 on the first call, with the calling
 * thread's OpenMP team set to nabla's thread count; NULL unless
 * NB_CPU_GEMM=onednn, or when it is not built (-Donednn=disabled) or the
 * library does not load. Call it only outside nabla's pool (it runs its own threads). */
nb_dnnl_sgemm_fn nb_cpu_dnnl_sgemm(void);
/* oneDNN's row-major bfloat16 GEMM, C (float32) = alpha op(A) op(B) + beta C
 * with A and B bfloat16 (their bits as uint16_t); dnnl_status_t (0: success). */
typedef int (*nb_dnnl_gemm_bf16_fn)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                                    const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta,
                                    float *c, int64_t ldc);
/* That GEMM, loading libdnnl.so.2 on the first call, with the calling
 * thread's OpenMP team set to nabla's thread count; NULL with
 * NB_CPU_BF16_GEMM=0, without -Donednn, or when the library does not load.
 * Call it only outside nabla's pool. */
nb_dnnl_gemm_bf16_fn nb_cpu_dnnl_gemm_bf16(void);
/* One line: "oneDNN 2.6.3 bf16 gemm" (and " sgemm (NB_CPU_GEMM=onednn)") or why it is not used. */
const char *nb_cpu_dnnl_info(void);

#endif
