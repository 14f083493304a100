// Host mock of cuSOLVER for tests/cuda_linalg_host: the legacy dense routines the linalg slots call,
// implemented in mock.cpp on reference LAPACK.
#pragma once
#include "cublas_v2.h"
typedef struct MockSolver *cusolverDnHandle_t;
typedef enum {
    CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_NOT_INITIALIZED = 1, CUSOLVER_STATUS_ALLOC_FAILED = 2,
    CUSOLVER_STATUS_INVALID_VALUE = 3, CUSOLVER_STATUS_ARCH_MISMATCH = 4, CUSOLVER_STATUS_EXECUTION_FAILED = 6,
    CUSOLVER_STATUS_INTERNAL_ERROR = 7, CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8, CUSOLVER_STATUS_NOT_SUPPORTED = 9,
    CUSOLVER_STATUS_INVALID_WORKSPACE = 31
} cusolverStatus_t;
typedef enum { CUSOLVER_EIG_MODE_NOVECTOR = 0, CUSOLVER_EIG_MODE_VECTOR = 1 } cusolverEigMode_t;
typedef enum { CUSOLVER_DETERMINISTIC_RESULTS = 1, CUSOLVER_ALLOW_NON_DETERMINISTIC_RESULTS = 2 } cusolverDeterministicMode_t;
cusolverStatus_t cusolverDnSetDeterministicMode(cusolverDnHandle_t, cusolverDeterministicMode_t);
#define DECL(T, P)                                                                                                     \
    cusolverStatus_t cusolverDn##P##getrf_bufferSize(cusolverDnHandle_t, int m, int n, T *A, int lda, int *lw);         \
    cusolverStatus_t cusolverDn##P##getrf(cusolverDnHandle_t, int m, int n, T *A, int lda, T *work, int *ipiv, int *info); \
    cusolverStatus_t cusolverDn##P##getrs(cusolverDnHandle_t, cublasOperation_t, int n, int nrhs, const T *A, int lda,   \
                                          const int *ipiv, T *B, int ldb, int *info);                                   \
    cusolverStatus_t cusolverDn##P##potrf_bufferSize(cusolverDnHandle_t, cublasFillMode_t, int n, T *A, int lda, int *lw); \
    cusolverStatus_t cusolverDn##P##potrf(cusolverDnHandle_t, cublasFillMode_t, int n, T *A, int lda, T *work, int lwork, \
                                          int *info);                                                                   \
    cusolverStatus_t cusolverDn##P##geqrf_bufferSize(cusolverDnHandle_t, int m, int n, T *A, int lda, int *lw);         \
    cusolverStatus_t cusolverDn##P##geqrf(cusolverDnHandle_t, int m, int n, T *A, int lda, T *tau, T *work, int lwork,   \
                                          int *info);                                                                   \
    cusolverStatus_t cusolverDn##P##orgqr_bufferSize(cusolverDnHandle_t, int m, int n, int k, const T *A, int lda,      \
                                                     const T *tau, int *lw);                                            \
    cusolverStatus_t cusolverDn##P##orgqr(cusolverDnHandle_t, int m, int n, int k, T *A, int lda, const T *tau, T *work, \
                                          int lwork, int *info);                                                        \
    cusolverStatus_t cusolverDn##P##ormqr_bufferSize(cusolverDnHandle_t, cublasSideMode_t, cublasOperation_t, int m,     \
                                                     int n, int k, const T *A, int lda, const T *tau, const T *C,        \
                                                     int ldc, int *lw);                                                 \
    cusolverStatus_t cusolverDn##P##ormqr(cusolverDnHandle_t, cublasSideMode_t, cublasOperation_t, int m, int n, int k,  \
                                          const T *A, int lda, const T *tau, T *C, int ldc, T *work, int lwork,         \
                                          int *info);                                                                   \
    cusolverStatus_t cusolverDn##P##syevd_bufferSize(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int n,     \
                                                     const T *A, int lda, const T *W, int *lw);                         \
    cusolverStatus_t cusolverDn##P##syevd(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int n, T *A, int lda, \
                                          T *W, T *work, int lwork, int *info);                                         \
    cusolverStatus_t cusolverDn##P##gesvd_bufferSize(cusolverDnHandle_t, int m, int n, int *lw);                        \
    cusolverStatus_t cusolverDn##P##gesvd(cusolverDnHandle_t, signed char jobu, signed char jobvt, int m, int n, T *A,   \
                                          int lda, T *S, T *U, int ldu, T *VT, int ldvt, T *work, int lwork, T *rwork,  \
                                          int *info);
DECL(float, S)
DECL(double, D)
#undef DECL
