// linalg_util.cuh - what the linear-algebra files of the CUDA backend share
// (linalg.cu, linalg_decomp.cu; internal): typed cuSOLVER/cuBLAS entry
// points, their status reporting, the checks of cuSOLVER's int sizes (the
// views are checked before the call: backend/check/linalg.c), and the small
// kernels that move matrices between nabla's row-major batches and
// cuSOLVER's column-major scratch and that turn cuSOLVER's devInfo into the
// stream's error word (read on the device: no host synchronization).
//
// Layouts: a batch of matrices is addressed through Lay, element (b, r, c)
// at b*bs + r*rs + c*cs, so one copy kernel does row-major <-> column-major
// moves (and keeps or zeroes a triangle on the way).
#pragma once

#include <cublas_v2.h>
#include <cusolverDn.h>

#include "cuda_common.cuh"

extern "C" cusolverDnHandle_t nb_cuda_cusolver(nb_backend *be);
extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be);

namespace nbc {
namespace { // internal linkage: each including file has its own copies

// ---- typed entry points (the legacy 32-bit API: device workspace only) ------

template <typename T> struct Sol;
template <> struct Sol<float> {
    static constexpr auto getrf_bs = cusolverDnSgetrf_bufferSize;
    static constexpr auto getrf = cusolverDnSgetrf;
    static constexpr auto getrs = cusolverDnSgetrs;
    static constexpr auto potrf_bs = cusolverDnSpotrf_bufferSize;
    static constexpr auto potrf = cusolverDnSpotrf;
    static constexpr auto geqrf_bs = cusolverDnSgeqrf_bufferSize;
    static constexpr auto geqrf = cusolverDnSgeqrf;
    static constexpr auto orgqr_bs = cusolverDnSorgqr_bufferSize;
    static constexpr auto orgqr = cusolverDnSorgqr;
    static constexpr auto ormqr_bs = cusolverDnSormqr_bufferSize;
    static constexpr auto ormqr = cusolverDnSormqr;
    static constexpr auto syevd_bs = cusolverDnSsyevd_bufferSize;
    static constexpr auto syevd = cusolverDnSsyevd;
    static constexpr auto gesvd_bs = cusolverDnSgesvd_bufferSize;
    static constexpr auto gesvd = cusolverDnSgesvd;
    static constexpr auto trsm = cublasStrsm_v2;
};
template <> struct Sol<double> {
    static constexpr auto getrf_bs = cusolverDnDgetrf_bufferSize;
    static constexpr auto getrf = cusolverDnDgetrf;
    static constexpr auto getrs = cusolverDnDgetrs;
    static constexpr auto potrf_bs = cusolverDnDpotrf_bufferSize;
    static constexpr auto potrf = cusolverDnDpotrf;
    static constexpr auto geqrf_bs = cusolverDnDgeqrf_bufferSize;
    static constexpr auto geqrf = cusolverDnDgeqrf;
    static constexpr auto orgqr_bs = cusolverDnDorgqr_bufferSize;
    static constexpr auto orgqr = cusolverDnDorgqr;
    static constexpr auto ormqr_bs = cusolverDnDormqr_bufferSize;
    static constexpr auto ormqr = cusolverDnDormqr;
    static constexpr auto syevd_bs = cusolverDnDsyevd_bufferSize;
    static constexpr auto syevd = cusolverDnDsyevd;
    static constexpr auto gesvd_bs = cusolverDnDgesvd_bufferSize;
    static constexpr auto gesvd = cusolverDnDgesvd;
    static constexpr auto trsm = cublasDtrsm_v2;
};

// ---- status reporting ------------------------------------------------------------

inline const char *solver_text(cusolverStatus_t s) {
    switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUSOLVER_STATUS_INVALID_VALUE: return "invalid value";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "internal error";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "matrix type not supported";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "not supported";
    case CUSOLVER_STATUS_INVALID_WORKSPACE: return "invalid workspace";
    default: return "error";
    }
}

inline nb_status solver_fail(const char *slot, const char *call, cusolverStatus_t s) {
    (void)cudaGetLastError(); // a failed launch inside the library may leave a non-sticky error
    return nb_set_error(s == CUSOLVER_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                        "%s: %s failed on cuda: %s (cusolverStatus %d)", slot, call, solver_text(s), (int)s);
}

inline nb_status blas_fail(const char *slot, const char *call, cublasStatus_t s) {
    (void)cudaGetLastError();
    return nb_set_error(s == CUBLAS_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                        "%s: %s failed on cuda: %s (cublasStatus %d)", slot, call, cublasGetStatusString(s), (int)s);
}

// `name` is the routine as the message should name it ("cusolverDn<t>getrf").
#define NBL_SOLVER(slot, name, call)                                                  \
    do {                                                                              \
        cusolverStatus_t nbl_s_ = (call);                                             \
        if (nbl_s_ != CUSOLVER_STATUS_SUCCESS) return nbc::solver_fail(slot, name, nbl_s_); \
    } while (0)
#define NBL_BLAS(slot, name, call)                                                \
    do {                                                                          \
        cublasStatus_t nbl_s_ = (call);                                           \
        if (nbl_s_ != CUBLAS_STATUS_SUCCESS) return nbc::blas_fail(slot, name, nbl_s_); \
    } while (0)
#define NBL_OK(expr)                       \
    do {                                   \
        nb_status nbl_st_ = (expr);        \
        if (nbl_st_ != NB_OK) return nbl_st_; \
    } while (0)

// The device's cuSOLVER handle on the current stream, in deterministic mode
// (the default, set again because the handle is shared); NULL with the error set.
inline cusolverDnHandle_t solver_of(nb_backend *be, const char *slot) {
    cusolverDnHandle_t h = nb_cuda_cusolver(be);
    if (!h) {
        nb_set_error(NB_ERR_DEVICE, "%s: cusolverDnCreate failed on cuda:%d", slot, device_of(be));
        return nullptr;
    }
    cusolverStatus_t s = cusolverDnSetDeterministicMode(h, CUSOLVER_DETERMINISTIC_RESULTS);
    if (s != CUSOLVER_STATUS_SUCCESS) {
        solver_fail(slot, "cusolverDnSetDeterministicMode", s);
        return nullptr;
    }
    return h;
}

// ---- views -------------------------------------------------------------------------

// Product of the batch dims (all but the last `mat` dims).
inline int64_t batch_of(const nb_kview *v, int mat) {
    int64_t b = 1;
    for (int d = 0; d < v->ndim - mat; d++) b *= v->shape[d];
    return b;
}

// cuSOLVER's legacy API takes int sizes: as the CPU's LAPACK, an m x n
// matrix needs m, n and m * n within int.
inline nb_status check_int(const char *slot, int64_t m, int64_t n) {
    if (m > INT32_MAX || n > INT32_MAX || m * n > INT32_MAX)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: a %lld x %lld matrix is too large for cuSOLVER", slot, (long long)m,
                            (long long)n);
    return NB_OK;
}

// n elements of T in s (at least one); NULL with NB_ERR_OOM set.
template <typename T> T *take(Scratch &s, nb_backend *be, int64_t n) {
    return s.alloc(be, sizeof(T) * (size_t)(n > 0 ? n : 1)) ? s.as<T>() : nullptr;
}

// ---- kernels -----------------------------------------------------------------------

struct Lay {
    int64_t rs, cs, bs; // element strides of a row, a column, a batch element
};
inline Lay row_major(int64_t ld, int64_t bs) { return {ld, 1, bs}; }
inline Lay col_major(int64_t ld, int64_t bs) { return {1, ld, bs}; }

// dst(b, r, c) = src(b, r, c) for r < R, c < C; tri > 0 keeps r <= c (upper)
// and writes 0 below, tri < 0 keeps r >= c (lower) and writes 0 above.
// Walks dst in memory order (coalesced writes). dst and src never overlap.
template <typename T>
__global__ void k_copy_mat(T *dst, Lay d, const T *src, Lay s, int64_t batch, int64_t R, int64_t C, int tri) {
    int64_t per = R * C;
    NBC_GRID_STRIDE(i, batch * per) {
        int64_t b = i / per, e = i - b * per, r, c;
        if (d.cs == 1) r = e / C, c = e - r * C;
        else c = e / R, r = e - c * R;
        bool keep = tri == 0 || (tri > 0 ? r <= c : r >= c);
        dst[b * d.bs + r * d.rs + c * d.cs] = keep ? src[b * s.bs + r * s.rs + c * s.cs] : (T)0;
    }
}

template <typename T>
nb_status copy_mat(nb_backend *be, const char *slot, T *dst, Lay d, const T *src, Lay s, int64_t batch, int64_t R,
                   int64_t C, int tri = 0) {
    int64_t n = batch * R * C;
    if (n == 0) return NB_OK;
    k_copy_mat<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>(dst, d, src, s, batch, R, C, tri);
    return launched(slot);
}

// Contiguous row-major [batch, R, C] = the identity's first R rows and C columns.
template <typename T> __global__ void k_eye(T *dst, int64_t batch, int64_t R, int64_t C) {
    int64_t per = R * C;
    NBC_GRID_STRIDE(i, batch * per) {
        int64_t e = i % per, r = e / C, c = e - r * C;
        dst[i] = r == c ? (T)1 : (T)0;
    }
}

template <typename T> nb_status eye(nb_backend *be, const char *slot, T *dst, int64_t batch, int64_t R, int64_t C) {
    int64_t n = batch * R * C;
    if (n == 0) return NB_OK;
    k_eye<T><<<blocks_for(n), THREADS, 0, stream_of(be)>>>(dst, batch, R, C);
    return launched(slot);
}

// Transposes each n x n matrix in place: the thread of (r, c) with r < c
// swaps it with (c, r), so every element has one writer.
template <typename T> __global__ void k_transpose_sq(T *v, int64_t batch, int64_t n) {
    int64_t per = n * n;
    NBC_GRID_STRIDE(i, batch * per) {
        int64_t b = i / per, e = i - b * per, r = e / n, c = e - r * n;
        if (r < c) {
            T *p = v + b * per;
            T x = p[r * n + c];
            p[r * n + c] = p[c * n + r];
            p[c * n + r] = x;
        }
    }
}

// cuSOLVER's devInfo of every batch element: info > 0 (a zero pivot, a
// non-positive leading minor, no convergence) raises `kind` on the stream's
// error word; info < 0 (an argument error) was already returned as a status.
__global__ void k_check_info(const int *info, int64_t n, int *word, int kind, int tag) {
    NBC_GRID_STRIDE(i, n) {
        if (info[i] > 0) raise(word, kind, tag);
    }
}

inline nb_status check_info(nb_backend *be, const char *slot, const int *info, int64_t n, int kind) {
    if (n == 0) return NB_OK;
    k_check_info<<<blocks_for(n), THREADS, 0, stream_of(be)>>>(info, n, err_word(be), kind, slot_tag(slot));
    return launched(slot);
}

} // namespace
} // namespace nbc
