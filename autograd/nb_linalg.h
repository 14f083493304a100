/* nb_linalg.h - linear algebra (torch.linalg): solve, inv, det, slogdet,
 * cholesky, qr, eigh, svd/svdvals, lstsq, with PyTorch's names, argument
 * order and backward formulas (tools/autograd/derivatives.yaml and
 * FunctionsManual.cpp). Implemented in autograd/ops_linalg.c over the
 * backend's linalg_* slots (CPU: LAPACKE, backend/cpu/linalg.c).
 *
 * Common rules: A is a batch of matrices [..., m, n] (ndim >= 2), float32
 * or float64 (NB_ERR_DTYPE otherwise); any strides (the ops copy to
 * contiguous). Square-matrix ops fail with NB_ERR_SHAPE naming the op and
 * the shape. A matrix the factorization rejects (singular, not positive-
 * definite, rank-deficient, no convergence) fails with NB_ERR_INVALID_ARG
 * and a message naming the op and the batch element, e.g.
 * "linalg.solve: the matrix is singular (batch element 1: U[2,2] = 0)".
 * A matrix holding NaN (in the triangle the op reads) gives NaN results
 * for that batch element, as PyTorch (triangular factors keep their zeros;
 * det, sign and logabsdet are all NaN, where PyTorch says sign 0; eigh's
 * eigenvalues too, where PyTorch returns LAPACK's arbitrary ones); svd and
 * svdvals fail with NB_ERR_INVALID_ARG ("the input holds NaN"), as PyTorch.
 * The backward rules are written with differentiable ops (matmul, solve,
 * ...). Multi-output ops return nb_status and write owned results to their
 * out-params (NULL out-params are skipped); they return NULL/non-zero at
 * once on a NULL input. Determinism: the batch runs in order; LAPACK calls
 * use OpenBLAS's threads (nb_set_num_threads), so results are bitwise equal
 * for the same thread count.
 */
#ifndef NB_LINALG_H
#define NB_LINALG_H
#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.linalg.solve(A, B) (left=True): X with A X = B. A [..., n, n];
 * B [..., n, k], or a vector [..., n] when B is 1-D or B's shape is A's
 * without the last dim (PyTorch's rule; X then has B's shape). Batch dims
 * broadcast. LU with partial pivoting. Backward: gB = solve(A^T, gX),
 * gA = -gB X^T. Errors: singular A (NB_ERR_INVALID_ARG), shapes. */
nb_tensor *nb_linalg_solve(nb_tensor *A, nb_tensor *B);
/* torch.linalg.inv: A^-1 for A [..., n, n] (solve(A, I)); backward
 * -A^-T g A^-T. Singular A: NB_ERR_INVALID_ARG ("linalg.inv: ..."). */
nb_tensor *nb_linalg_inv(nb_tensor *A);
/* torch.linalg.det: [...] for A [..., n, n], from LU. A singular matrix
 * gives 0 (no error), as PyTorch. Backward g det(A) A^-T; at a singular A
 * the backward fails (NB_ERR_INVALID_ARG; PyTorch switches to an SVD
 * formula there, not implemented). */
nb_tensor *nb_linalg_det(nb_tensor *A);
/* torch.linalg.slogdet: sign [...] (-1, 0 or 1, A's dtype; not
 * differentiable) and logabsdet [...] = log|det A| (-inf when singular).
 * Backward of logabsdet: g A^-T (fails at a singular A). */
nb_status nb_linalg_slogdet(nb_tensor *A, nb_tensor **sign, nb_tensor **logabsdet);
/* torch.linalg.cholesky: L [..., n, n] lower with A = L L^T, read from A's
 * lower triangle; upper: U = L^T with A = U^T U, read from the upper
 * triangle. Backward: Murray 2016 (arXiv:1602.07527) as PyTorch's
 * cholesky_backward, symmetrised. Not positive-definite: NB_ERR_INVALID_ARG
 * naming the batch element and the leading minor. */
nb_tensor *nb_linalg_cholesky(nb_tensor *A, bool upper);

/* torch.linalg.qr's mode: NB_QR_REDUCED 'reduced' (the default), NB_QR_COMPLETE
 * 'complete'. */
typedef enum nb_linalg_qr_mode { NB_QR_REDUCED = 0, NB_QR_COMPLETE } nb_linalg_qr_mode;
/* torch.linalg.qr: A [..., m, n] = Q R by Householder reflections (geqrf +
 * orgqr), k = min(m, n). 'reduced': Q [..., m, k], R [..., k, n];
 * 'complete': Q [..., m, m], R [..., m, n]. R's diagonal may be negative
 * (LAPACK's signs, as PyTorch). Backward (PyTorch's linalg_qr_backward) for
 * m >= n with mode reduced (or complete with m == n); otherwise the backward
 * fails with NB_ERR_UNSUPPORTED (PyTorch: not differentiable for complete,
 * m > n; the m < n case is not implemented here). */
nb_status nb_linalg_qr(nb_tensor *A, nb_linalg_qr_mode mode, nb_tensor **Q, nb_tensor **R);
/* torch.linalg.eigh: symmetric A [..., n, n] read from its lower triangle
 * (uplo 'L') or upper ('U'): eigenvalues [..., n] ascending and eigenvectors
 * [..., n, n] (columns; each column's sign is LAPACK's, as PyTorch).
 * Divide and conquer (syevd). Backward (PyTorch's linalg_eig_backward,
 * Hermitian case) gA = V (diag(gw) + sym-skew(V^T gV) / (w_j - w_i)) V^T:
 * valid for distinct eigenvalues and losses invariant to the eigenvectors'
 * signs; degenerate eigenvalues give inf/NaN gradients (not supported).
 * Errors: uplo not 'L'/'U' (NB_ERR_INVALID_ARG), shapes, no convergence. */
nb_status nb_linalg_eigh(nb_tensor *A, char uplo, nb_tensor **eigenvalues, nb_tensor **eigenvectors);
/* torch.linalg.svd: A [..., m, n] = U diag(S) Vh, k = min(m, n), S [..., k]
 * descending; full_matrices: U [..., m, m], Vh [..., n, n]; else U
 * [..., m, k], Vh [..., k, n]. Divide and conquer (gesdd, PyTorch's CPU
 * driver). Backward: PyTorch's svd_backward (full_matrices uses the first
 * k columns/rows, as PyTorch): valid for distinct non-zero singular values
 * and losses invariant to the singular vectors' signs (documented limits,
 * as PyTorch); repeated singular values give inf/NaN. */
nb_status nb_linalg_svd(nb_tensor *A, bool full_matrices, nb_tensor **U, nb_tensor **S, nb_tensor **Vh);
/* torch.linalg.svdvals: S [..., k] only (gesdd without vectors); backward
 * U diag(gS) Vh (computes the vectors when A requires grad). */
nb_tensor *nb_linalg_svdvals(nb_tensor *A);
/* torch.linalg.lstsq(A, B).solution for A [..., m, n] of full rank,
 * B [..., m, k] (or [m] / [..., m] as solve's vector rule); batch dims
 * broadcast. QR (gels, PyTorch's driver='gels'): the least-squares solution
 * for m >= n, the minimum-norm one for m < n. Returns X [..., n, k].
 * residuals (may be NULL): the squared residual norms per column [..., k]
 * when m > n, else an empty [0] tensor (PyTorch's rule); computed as
 * sum((A X - B)^2) over rows, so differentiable. rank and singular_values
 * of PyTorch's tuple are not returned (gels assumes full rank; use
 * nb_linalg_svdvals). Backward at full rank, equal there to PyTorch's
 * pinv-based linalg_lstsq_backward: m >= n, Z = (A^T A)^-1 gX: gB = A Z,
 * gA = (B - A X) Z^T - A Z X^T; m < n, H = A A^T, W = H^-1 B,
 * Y = H^-1 A gX: gB = Y, gA = W gX^T - (Y W^T + W Y^T) A.
 * Rank-deficient A (an exact zero in R): NB_ERR_INVALID_ARG; a nearly
 * rank-deficient A is not detected (gels, as PyTorch's driver='gels'). */
nb_tensor *nb_linalg_lstsq(nb_tensor *A, nb_tensor *B, nb_tensor **residuals);

#ifdef __cplusplus
}
#endif
#endif
