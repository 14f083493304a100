// linalg.cu - the linear-algebra slots of the CUDA backend built on LU,
// Cholesky and least squares: linalg_solve (getrf + getrs), linalg_det
// (getrf), linalg_cholesky (potrf) and linalg_lstsq (geqrf + ormqr + trsm,
// LAPACK's gels). QR, eigh and SVD are in linalg_decomp.cu. Contracts are
// nb_slots.def's ("linear algebra") and every edge case is the
// CPU backend's (backend/cpu/linalg.c, LAPACKE row-major).
//
// nabla's matrices are row-major, cuSOLVER's column-major. Where the CPU's
// LAPACKE transposes into Fortran order, a copy kernel does the same into
// scratch (so the same factorization runs: LU of A, not of A^T); det
// factors the row-major buffer as A^T (det A^T = det A), as the CPU does.
// The views are checked before the call (backend/check/linalg.c); only
// cuSOLVER's int sizes are checked here. A batch loops on the host, one
// cuSOLVER call per matrix, all on the current stream; data-dependent
// failures (a zero pivot, a non-positive minor, a rank-deficient A) reach
// the stream's error word from a kernel that reads devInfo on the device.
// Nothing synchronizes.
#include "linalg_util.cuh"

namespace nbc {
namespace {

// det, sign, logabsdet of each matrix from its LU factors (cuSOLVER's
// 1-based pivots), in double as the CPU's det_from_lu: the sign counts
// negative pivots, so it stays right when the product under- or overflows.
// A singular matrix (getrf's info > 0) gives 0, 0, -inf and no error.
template <typename T>
__global__ void k_det(const T *lu, const int *piv, const int *info, int64_t batch, int64_t n, T *det, T *sign,
                      T *logabs) {
    NBC_GRID_STRIDE(b, batch) {
        double d = 1, s = 1, l = 0;
        const T *m = lu + b * n * n;
        for (int64_t j = 0; j < n; j++) {
            double u = (double)m[j * n + j];
            if (piv[b * n + j] != j + 1) s = -s, d = -d;
            d *= u;
            if (u < 0) s = -s;
            l += log(fabs(u));
        }
        bool singular = info[b] > 0;
        if (det) det[b] = (T)(singular ? 0.0 : d);
        if (sign) sign[b] = (T)(singular ? 0.0 : s);
        if (logabs) logabs[b] = (T)(singular ? -(double)INFINITY : l);
    }
}

// zero[b] = whether matrix b of a (per elements each) is all zeros (-0.0
// counts, NaN does not): LAPACK's gels returns x = 0 for it, with no error.
// One block per matrix; __syncthreads_or is an order-free OR.
template <typename T> __global__ void k_all_zero(const T *a, int64_t batch, int64_t per, int *zero) {
    for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
        bool nz = false;
        for (int64_t e = threadIdx.x; e < per; e += blockDim.x) nz |= a[b * per + e] != (T)0;
        int any = __syncthreads_or(nz);
        if (threadIdx.x == 0) zero[b] = !any;
    }
}

// ERR_RANK where the triangular factor R (kd x kd, column-major with leading
// dimension ld, batch stride bs) has an exact zero on its diagonal, as
// LAPACK's trtrs inside gels (NaN is no zero); all-zero matrices excepted.
template <typename T>
__global__ void k_rank(const T *r, int64_t batch, int64_t kd, int64_t ld, int64_t bs, const int *zero, int *word,
                       int tag) {
    NBC_GRID_STRIDE(i, batch * kd) {
        int64_t b = i / kd, j = i - b * kd;
        if (!zero[b] && r[b * bs + j * ld + j] == (T)0) raise(word, ERR_RANK, tag);
    }
}

// x of the all-zero matrices = 0.
template <typename T> __global__ void k_zero_where(T *x, const int *zero, int64_t batch, int64_t per) {
    NBC_GRID_STRIDE(i, batch * per) {
        if (zero[i / per]) x[i] = (T)0;
    }
}

} // namespace
} // namespace nbc

using namespace nbc;

// ---- solve ---------------------------------------------------------------------------

// LU with partial pivoting of A (a transposed into column-major scratch),
// then getrs on B (b likewise); x = the solution transposed back.
extern "C" nb_status nb_cuda_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    const char *slot = "linalg_solve";
    int nd = a->ndim;
    int64_t n = a->shape[nd - 1], k = b->shape[nd - 1], batch = batch_of(a, 2);
    NBL_OK(check_int(slot, n, n));
    NBL_OK(check_int(slot, n, k));
    if (batch == 0 || n == 0 || k == 0) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        cudaStream_t st = stream_of(be);
        Scratch s_lu, s_b, s_piv, s_info, s_work;
        T *lu = take<T>(s_lu, be, batch * n * n), *bb = take<T>(s_b, be, batch * n * k);
        int *piv = take<int>(s_piv, be, n), *info = take<int>(s_info, be, batch + 1);
        if (!lu || !bb || !piv || !info) return nb_last_status();
        // info[0, batch): getrf's, one per matrix (read by the check below);
        // info[batch]: getrs's, which only reports argument errors
        NBC_TRY(slot, cudaMemsetAsync(info, 0, sizeof(int) * (size_t)(batch + 1), st));
        NBL_OK(copy_mat(be, slot, lu, col_major(n, n * n), (const T *)a->data, row_major(n, n * n), batch, n, n));
        NBL_OK(copy_mat(be, slot, bb, col_major(n, n * k), (const T *)b->data, row_major(k, n * k), batch, n, k));
        int N = (int)n, K = (int)k, lwork = 0;
        NBL_SOLVER(slot, "cusolverDn<t>getrf_bufferSize", Sol<T>::getrf_bs(h, N, N, lu, N, &lwork));
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        for (int64_t i = 0; i < batch; i++) { // piv and work are reused: stream order keeps them apart
            NBL_SOLVER(slot, "cusolverDn<t>getrf", Sol<T>::getrf(h, N, N, lu + i * n * n, N, work, piv, info + i));
            NBL_SOLVER(slot, "cusolverDn<t>getrs",
                       Sol<T>::getrs(h, CUBLAS_OP_N, N, K, lu + i * n * n, N, piv, bb + i * n * k, N, info + batch));
        }
        NBL_OK(check_info(be, slot, info, batch, ERR_SINGULAR));
        return copy_mat(be, slot, (T *)x->data, row_major(k, n * k), (const T *)bb, col_major(n, n * k), batch, n, k);
    });
}

// ---- det -------------------------------------------------------------------------------

// getrf of the row-major buffer read as column-major, i.e. of A^T (the CPU's
// choice: det A^T = det A, no transpose), then k_det.
extern "C" nb_status nb_cuda_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign,
                                        const nb_kview *logabsdet, const nb_kview *a) {
    const char *slot = "linalg_det";
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    NBL_OK(check_int(slot, n, n));
    if (batch == 0 || (!det && !sign && !logabsdet)) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        cudaStream_t st = stream_of(be);
        Scratch s_lu, s_piv, s_info, s_work;
        T *lu = take<T>(s_lu, be, batch * n * n);
        int *piv = take<int>(s_piv, be, batch * n), *info = take<int>(s_info, be, batch);
        if (!lu || !piv || !info) return nb_last_status();
        NBC_TRY(slot, cudaMemsetAsync(info, 0, sizeof(int) * (size_t)batch, st));
        if (n > 0) { // n == 0: det 1, sign 1, logabsdet 0 from k_det's empty loop
            cusolverDnHandle_t h = solver_of(be, slot);
            if (!h) return nb_last_status();
            NBC_TRY(slot, cudaMemcpyAsync(lu, a->data, sizeof(T) * (size_t)(batch * n * n), cudaMemcpyDeviceToDevice, st));
            int N = (int)n, lwork = 0;
            NBL_SOLVER(slot, "cusolverDn<t>getrf_bufferSize", Sol<T>::getrf_bs(h, N, N, lu, N, &lwork));
            T *work = take<T>(s_work, be, lwork);
            if (!work) return nb_last_status();
            for (int64_t i = 0; i < batch; i++)
                NBL_SOLVER(slot, "cusolverDn<t>getrf",
                           Sol<T>::getrf(h, N, N, lu + i * n * n, N, work, piv + i * n, info + i));
        }
        k_det<T><<<blocks_for(batch), THREADS, 0, st>>>(lu, piv, info, batch, n, det ? (T *)det->data : nullptr,
                                                         sign ? (T *)sign->data : nullptr,
                                                         logabsdet ? (T *)logabsdet->data : nullptr);
        return launched(slot);
    });
}

// ---- cholesky ---------------------------------------------------------------------------

// potrf on A in column-major scratch with the CPU's uplo (LAPACKE's
// transpose), then l = the factor transposed back with the other triangle
// zeroed (potrf leaves it as it was).
extern "C" nb_status nb_cuda_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper) {
    const char *slot = "linalg_cholesky";
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    NBL_OK(check_int(slot, n, n));
    if (batch == 0 || n == 0) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        Scratch s_c, s_info, s_work;
        T *c = take<T>(s_c, be, batch * n * n);
        int *info = take<int>(s_info, be, batch);
        if (!c || !info) return nb_last_status();
        NBC_TRY(slot, cudaMemsetAsync(info, 0, sizeof(int) * (size_t)batch, stream_of(be)));
        NBL_OK(copy_mat(be, slot, c, col_major(n, n * n), (const T *)a->data, row_major(n, n * n), batch, n, n));
        cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
        int N = (int)n, lwork = 0;
        NBL_SOLVER(slot, "cusolverDn<t>potrf_bufferSize", Sol<T>::potrf_bs(h, fill, N, c, N, &lwork));
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        for (int64_t i = 0; i < batch; i++)
            NBL_SOLVER(slot, "cusolverDn<t>potrf", Sol<T>::potrf(h, fill, N, c + i * n * n, N, work, lwork, info + i));
        NBL_OK(check_info(be, slot, info, batch, ERR_NOT_PD));
        return copy_mat(be, slot, (T *)l->data, row_major(n, n * n), (const T *)c, col_major(n, n * n), batch, n, n,
                        upper ? 1 : -1);
    });
}

// ---- lstsq ---------------------------------------------------------------------------------

// LAPACK's gels without its rescaling of extreme magnitudes. m >= n: A = Q R
// (geqrf on A transposed into column-major scratch), C = Q^T B (ormqr), R X =
// C[:n] (trsm). m < n, the minimum-norm solution: the row-major buffer read
// as column-major is A^T (n x m), A^T = Q R, R^T Y = B (trsm), X = Q [Y; 0]
// (ormqr; gels's LQ of A). Both keep A in [mx, min] column-major with
// leading dimension mx = max(m, n) and C in [mx, k] likewise.
extern "C" nb_status nb_cuda_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    const char *slot = "linalg_lstsq";
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = b->shape[nd - 1];
    int64_t batch = batch_of(a, 2), mx = m > n ? m : n, kd = m < n ? m : n;
    NBL_OK(check_int(slot, m, n));
    NBL_OK(check_int(slot, mx, k));
    size_t es = nb_dtype_size(a->dtype);
    if (batch == 0) return NB_OK;
    if (m == 0 || n == 0 || k == 0) {
        NBC_TRY(slot, cudaMemsetAsync(x->data, 0, (size_t)(batch * n * k) * es, stream_of(be)));
        return NB_OK;
    }
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        cublasHandle_t bh = nb_cuda_cublas(be);
        if (!bh) return nb_last_status();
        NBL_BLAS(slot, "cublasSetPointerMode", cublasSetPointerMode(bh, CUBLAS_POINTER_MODE_HOST));
        cudaStream_t st = stream_of(be);
        Scratch s_a, s_c, s_tau, s_info, s_zero, s_work;
        T *A = take<T>(s_a, be, batch * m * n), *C = take<T>(s_c, be, batch * mx * k), *tau = take<T>(s_tau, be, kd);
        int *info = take<int>(s_info, be, 1), *zero = take<int>(s_zero, be, batch);
        if (!A || !C || !tau || !info || !zero) return nb_last_status();
        bool tall = m >= n;
        const T *pa = (const T *)a->data, *pb = (const T *)b->data;
        if (tall) {
            NBL_OK(copy_mat(be, slot, A, col_major(m, m * n), pa, row_major(n, m * n), batch, m, n));
            NBL_OK(copy_mat(be, slot, C, col_major(m, m * k), pb, row_major(k, m * k), batch, m, k));
        } else { // C's rows m..n-1 stay 0: the [Y; 0] of the minimum-norm solution
            NBC_TRY(slot, cudaMemcpyAsync(A, pa, sizeof(T) * (size_t)(batch * m * n), cudaMemcpyDeviceToDevice, st));
            NBC_TRY(slot, cudaMemsetAsync(C, 0, sizeof(T) * (size_t)(batch * n * k), st));
            NBL_OK(copy_mat(be, slot, C, col_major(n, n * k), pb, row_major(k, m * k), batch, m, k));
        }
        // the factored matrix is M x KD, column-major, leading dimension M = mx
        int M = (int)mx, KD = (int)kd, K = (int)k, l1 = 0, l2 = 0;
        cublasOperation_t qop = tall ? CUBLAS_OP_T : CUBLAS_OP_N;
        NBL_SOLVER(slot, "cusolverDn<t>geqrf_bufferSize", Sol<T>::geqrf_bs(h, M, KD, A, M, &l1));
        NBL_SOLVER(slot, "cusolverDn<t>ormqr_bufferSize",
                   Sol<T>::ormqr_bs(h, CUBLAS_SIDE_LEFT, qop, M, K, KD, A, M, tau, C, M, &l2));
        int lwork = l1 > l2 ? l1 : l2;
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        const T one = 1;
        for (int64_t i = 0; i < batch; i++) { // tau, work and info are reused in stream order
            T *Ai = A + i * m * n, *Ci = C + i * mx * k;
            NBL_SOLVER(slot, "cusolverDn<t>geqrf", Sol<T>::geqrf(h, M, KD, Ai, M, tau, work, lwork, info));
            if (tall) {
                NBL_SOLVER(slot, "cusolverDn<t>ormqr",
                           Sol<T>::ormqr(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, M, K, KD, Ai, M, tau, Ci, M, work, lwork, info));
                NBL_BLAS(slot, "cublas<t>trsm",
                         Sol<T>::trsm(bh, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, KD,
                                      K, &one, Ai, M, Ci, M));
            } else {
                NBL_BLAS(slot, "cublas<t>trsm",
                         Sol<T>::trsm(bh, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, KD,
                                      K, &one, Ai, M, Ci, M));
                NBL_SOLVER(slot, "cusolverDn<t>ormqr",
                           Sol<T>::ormqr(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_N, M, K, KD, Ai, M, tau, Ci, M, work, lwork, info));
            }
        }
        unsigned zb = (unsigned)(batch < 65535 * 16 ? batch : 65535 * 16);
        k_all_zero<T><<<zb, THREADS, 0, st>>>(pa, batch, m * n, zero);
        NBL_OK(launched(slot));
        k_rank<T><<<blocks_for(batch * kd), THREADS, 0, st>>>(A, batch, kd, mx, m * n, zero, err_word(be), slot_tag(slot));
        NBL_OK(launched(slot));
        NBL_OK(copy_mat(be, slot, (T *)x->data, row_major(k, n * k), (const T *)C, col_major(mx, mx * k), batch, n, k));
        k_zero_where<T><<<blocks_for(batch * n * k), THREADS, 0, st>>>((T *)x->data, zero, batch, n * k);
        return launched(slot);
    });
}
