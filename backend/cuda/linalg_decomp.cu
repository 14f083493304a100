// linalg_decomp.cu - the decompositions of the CUDA backend's linear
// algebra: linalg_qr (geqrf + orgqr), linalg_eigh (syevd) and linalg_svd
// (gesvd). Conventions as linalg.cu (row-major batches moved to and from
// column-major scratch by copy kernels, a host loop of cuSOLVER calls on the
// current stream, devInfo checked on the device, the views checked before
// the call by backend/check/linalg.c) and the CPU backend's edge cases
// (backend/cpu/linalg.c). Signs of Q's columns, eigenvectors and
// singular vectors are whatever cuSOLVER leaves, deterministically.
#include "linalg_util.cuh"

using namespace nbc;

// ---- QR ----------------------------------------------------------------------------------

// a [m, n] transposed into column-major scratch of max(n, kq) columns (the
// room orgqr needs for a complete Q), geqrf for every matrix, r = the upper
// triangle of its first kq rows, then orgqr for every matrix and q = its
// first kq columns transposed back. kq (q's last size) tells reduced
// (min(m, n)) from complete (m).
extern "C" nb_status nb_cuda_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a) {
    const char *slot = "linalg_qr";
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n, batch = batch_of(a, 2);
    int64_t kq = q->shape[nd - 1];
    int64_t ncol = n > kq ? n : kq;
    NBL_OK(check_int(slot, m, ncol));
    if (batch == 0 || m == 0 || kq == 0) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        if (n == 0) return eye<T>(be, slot, (T *)q->data, batch, m, kq); // no reflectors: Q = I, R is empty
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        Scratch s_a, s_tau, s_info, s_work;
        T *A = take<T>(s_a, be, batch * m * ncol), *tau = take<T>(s_tau, be, batch * k);
        int *info = take<int>(s_info, be, 1);
        if (!A || !tau || !info) return nb_last_status();
        if (ncol > n) // orgqr sets the extra columns itself; zeros keep them defined regardless
            NBC_TRY(slot, cudaMemsetAsync(A, 0, sizeof(T) * (size_t)(batch * m * ncol), stream_of(be)));
        Lay cm = col_major(m, m * ncol);
        NBL_OK(copy_mat(be, slot, A, cm, (const T *)a->data, row_major(n, m * n), batch, m, n));
        int M = (int)m, N = (int)n, K = (int)k, KQ = (int)kq, l1 = 0, l2 = 0;
        NBL_SOLVER(slot, "cusolverDn<t>geqrf_bufferSize", Sol<T>::geqrf_bs(h, M, N, A, M, &l1));
        NBL_SOLVER(slot, "cusolverDn<t>orgqr_bufferSize", Sol<T>::orgqr_bs(h, M, KQ, K, A, M, tau, &l2));
        int lwork = l1 > l2 ? l1 : l2;
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        for (int64_t i = 0; i < batch; i++)
            NBL_SOLVER(slot, "cusolverDn<t>geqrf",
                       Sol<T>::geqrf(h, M, N, A + i * m * ncol, M, tau + i * k, work, lwork, info));
        // R before orgqr overwrites the factors (rows >= min(m, n) are zero)
        NBL_OK(copy_mat(be, slot, (T *)r->data, row_major(n, kq * n), (const T *)A, cm, batch, kq, n, 1));
        for (int64_t i = 0; i < batch; i++)
            NBL_SOLVER(slot, "cusolverDn<t>orgqr",
                       Sol<T>::orgqr(h, M, KQ, K, A + i * m * ncol, M, tau + i * k, work, lwork, info));
        return copy_mat(be, slot, (T *)q->data, row_major(kq, m * kq), (const T *)A, cm, batch, m, kq);
    });
}

// ---- eigh -------------------------------------------------------------------------------

// syevd with the CPU's uplo on A transposed into column-major (into v
// itself: LAPACKE's transpose), eigenvalues ascending into w; the
// eigenvectors, column-major columns, become v's columns by an in-place
// transpose. v NULL (not something ops ask for): eigenvalues only.
extern "C" nb_status nb_cuda_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a,
                                         bool upper) {
    const char *slot = "linalg_eigh";
    int64_t n = a->shape[a->ndim - 1], batch = batch_of(a, 2);
    NBL_OK(check_int(slot, n, n));
    if (batch == 0 || n == 0) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        Scratch s_v, s_info, s_work;
        T *V = v ? (T *)v->data : take<T>(s_v, be, batch * n * n), *W = (T *)w->data;
        int *info = take<int>(s_info, be, batch);
        if (!V || !info) return nb_last_status();
        NBC_TRY(slot, cudaMemsetAsync(info, 0, sizeof(int) * (size_t)batch, stream_of(be)));
        NBL_OK(copy_mat(be, slot, V, col_major(n, n * n), (const T *)a->data, row_major(n, n * n), batch, n, n));
        cusolverEigMode_t jobz = v ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
        cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
        int N = (int)n, lwork = 0;
        NBL_SOLVER(slot, "cusolverDn<t>syevd_bufferSize", Sol<T>::syevd_bs(h, jobz, fill, N, V, N, W, &lwork));
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        for (int64_t i = 0; i < batch; i++)
            NBL_SOLVER(slot, "cusolverDn<t>syevd",
                       Sol<T>::syevd(h, jobz, fill, N, V + i * n * n, N, W + i * n, work, lwork, info + i));
        NBL_OK(check_info(be, slot, info, batch, ERR_CONVERGE));
        if (!v) return NB_OK;
        k_transpose_sq<T><<<blocks_for(batch * n * n), THREADS, 0, stream_of(be)>>>(V, batch, n);
        return launched(slot);
    });
}

// ---- SVD ---------------------------------------------------------------------------------

// gesvd needs rows >= columns. m <= n: the row-major buffer read as
// column-major is A^T (n x m) = U' S V'^T, so A = V' S U'^T: gesvd writes
// U' (column-major, leading dimension n) straight into vh (row-major it
// reads as U'^T) and V'^T (leading dimension m) straight into u (row-major
// it reads as V'), with no transposes. m > n: gesvd of A transposed into
// column-major scratch, and U, V^T transposed back into u, vh.
// full_matrices is the CPU's rule: u [m, m] and vh [n, n]; else [m, k],
// [k, n]; u and vh both NULL: singular values only.
extern "C" nb_status nb_cuda_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh,
                                        const nb_kview *a) {
    const char *slot = "linalg_svd";
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n, batch = batch_of(a, 2);
    // u and vh: both NULL, or u [m, m] and vh [n, n] (full_matrices) or u [m, k] and vh [k, n]
    int64_t ucols = u ? u->shape[nd - 1] : k, vrows = vh ? vh->shape[nd - 2] : k;
    bool full = u && ucols == m && vrows == n;
    NBL_OK(check_int(slot, m, n));
    if (full) { // U [m, m] and Vh [n, n]; the reduced factors are no larger than A
        NBL_OK(check_int(slot, m, m));
        NBL_OK(check_int(slot, n, n));
    }
    if (batch == 0) return NB_OK;
    return dispatch_float(slot, a->dtype, [&](auto tag) {
        using T = decltype(tag);
        if (k == 0) { // an empty matrix: full_matrices gives identities, as the CPU's eye_fill
            if (full) {
                NBL_OK(eye<T>(be, slot, (T *)u->data, batch, m, m));
                NBL_OK(eye<T>(be, slot, (T *)vh->data, batch, n, n));
            }
            return NB_OK;
        }
        cusolverDnHandle_t h = solver_of(be, slot);
        if (!h) return nb_last_status();
        cudaStream_t st = stream_of(be);
        bool wide = m <= n;
        int64_t M = wide ? n : m, N = wide ? m : n; // gesvd's problem, M >= N
        Scratch s_a, s_u, s_vt, s_rwork, s_info, s_work;
        T *A = take<T>(s_a, be, batch * m * n), *rwork = take<T>(s_rwork, be, k);
        int *info = take<int>(s_info, be, batch);
        if (!A || !rwork || !info) return nb_last_status();
        NBC_TRY(slot, cudaMemsetAsync(info, 0, sizeof(int) * (size_t)batch, st));
        // gesvd's U has gu columns (M: 'A', k: 'S'); its V^T is N x N
        int64_t gu = wide ? vrows : ucols;
        T *U = nullptr, *VT = nullptr;
        if (wide) {
            NBC_TRY(slot, cudaMemcpyAsync(A, a->data, sizeof(T) * (size_t)(batch * m * n), cudaMemcpyDeviceToDevice, st));
            if (u) U = (T *)vh->data, VT = (T *)u->data;
        } else {
            NBL_OK(copy_mat(be, slot, A, col_major(m, m * n), (const T *)a->data, row_major(n, m * n), batch, m, n));
            if (u) {
                U = take<T>(s_u, be, batch * m * ucols), VT = take<T>(s_vt, be, batch * n * n);
                if (!U || !VT) return nb_last_status();
            }
        }
        // V^T is N x N for 'A' and 'S' alike (N <= M): one job char for both,
        // the pairs cuSOLVER's users (PyTorch) run
        signed char jobu = !u ? 'N' : gu == M ? 'A' : 'S', jobvt = jobu;
        int iM = (int)M, iN = (int)N, lwork = 0;
        NBL_SOLVER(slot, "cusolverDn<t>gesvd_bufferSize", Sol<T>::gesvd_bs(h, iM, iN, &lwork));
        T *work = take<T>(s_work, be, lwork);
        if (!work) return nb_last_status();
        T *S = (T *)s->data;
        for (int64_t i = 0; i < batch; i++)
            NBL_SOLVER(slot, "cusolverDn<t>gesvd",
                       Sol<T>::gesvd(h, jobu, jobvt, iM, iN, A + i * m * n, iM, S + i * k, U ? U + i * M * gu : nullptr, iM,
                                     VT ? VT + i * N * N : nullptr, iN, work, lwork, rwork, info + i));
        NBL_OK(check_info(be, slot, info, batch, ERR_CONVERGE));
        if (wide || !u) return NB_OK;
        NBL_OK(copy_mat(be, slot, (T *)u->data, row_major(ucols, m * ucols), (const T *)U, col_major(m, m * ucols), batch,
                        m, ucols));
        return copy_mat(be, slot, (T *)vh->data, row_major(n, n * n), (const T *)VT, col_major(n, n * n), batch, n, n);
    });
}
