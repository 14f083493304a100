/* op_cases_linalg.c - op harness cases of the linalg family. Matrices are
 * built inside each case from unconstrained inputs (X + 3 I, X X^T + 3 I,
 * X + X^T), so finite differences keep them well conditioned; outputs
 * defined up to sign (Q/R, eigenvectors, singular vectors) are compared
 * through sign-invariant forms. */
#include "op_harness.h"

static nb_tensor *eye3(const nb_tensor *like, double s) {
    nb_tensor *e = nb_full_on(NB_SHAPE(3, 3), 0, nb_dtype_of(like), nb_device_of(like));
    nb_tensor *d = nb_full_on(NB_SHAPE(3), s, nb_dtype_of(like), nb_device_of(like));
    return nb_add(e, nb_diag_embed(d, 0, -2, -1));
}
static nb_tensor *shifted(nb_tensor *x) { return nb_add(x, eye3(x, 3)); }
static nb_tensor *spd(nb_tensor *x) { return nb_add(nb_matmul(x, nb_transpose(x, -1, -2)), eye3(x, 3)); }

static nb_tensor *solve(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_linalg_solve(shifted(x[0]), x[1]); }
static nb_tensor *inv(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_linalg_inv(shifted(x[0])); }
static nb_tensor *det(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_linalg_det(shifted(x[0])); }
static nb_tensor *slogdet(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *sign, *la;
    return nb_linalg_slogdet(shifted(x[0]), &sign, &la) == NB_OK ? nb_mul(la, sign) : NULL;
}
static nb_tensor *cholesky(nb_tensor *const *x, const nb_op_case *c) { return nb_linalg_cholesky(spd(x[0]), c->p[0] != 0); }
/* Q and R with the signs of diag(R) made positive: unique */
static nb_tensor *qr(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *Q, *R;
    if (nb_linalg_qr(x[0], NB_QR_REDUCED, &Q, &R) != NB_OK) return NULL;
    nb_tensor *d = nb_diagonal(R, 0, -2, -1);
    nb_tensor *s = nb_sub(nb_to_dtype(nb_gt_scalar(d, 0), nb_dtype_of(d)), nb_to_dtype(nb_lt_scalar(d, 0), nb_dtype_of(d)));
    nb_tensor *qs = nb_mul(Q, nb_unsqueeze(s, -2)), *rs = nb_mul(R, nb_unsqueeze(s, -1));
    nb_tensor *parts[2] = {nb_flatten(qs, -2, -1), nb_flatten(rs, -2, -1)};
    return nb_cat(parts, 2, -1);
}
static nb_tensor *eigh(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *w, *V, *a = nb_add(x[0], nb_transpose(x[0], -1, -2));
    if (nb_linalg_eigh(a, 'L', &w, &V) != NB_OK) return NULL;
    nb_tensor *parts[2] = {w, nb_flatten(nb_mul(V, V), -2, -1)};
    return nb_cat(parts, 2, -1);
}
static nb_tensor *svd(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *U, *S, *Vh;
    if (nb_linalg_svd(x[0], false, &U, &S, &Vh) != NB_OK) return NULL;
    nb_tensor *parts[3] = {S, nb_flatten(nb_mul(U, U), -2, -1), nb_flatten(nb_mul(Vh, Vh), -2, -1)};
    return nb_cat(parts, 3, -1);
}
static nb_tensor *svdvals(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_linalg_svdvals(x[0]); }
static nb_tensor *lstsq(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_linalg_lstsq(x[0], x[1], NULL); }

static const nb_op_case cases[] = {
    {.op = NB_OP_LINALG_SOLVE, .label = "solve batched", .fn = solve, .n_in = 2, .in = {IN(K_REAL, 2, 3, 3), IN(K_REAL, 2, 3, 2)},
     .tol = 1e-4},
    {.op = NB_OP_LINALG_INV, .label = "inv", .fn = inv, .n_in = 1, .in = {IN(K_REAL, 3, 3)}, .tol = 1e-4},
    {.op = NB_OP_LINALG_DET, .label = "det batched", .fn = det, .n_in = 1, .in = {IN(K_REAL, 2, 3, 3)}, .tol = 1e-4},
    {.op = NB_OP_LINALG_SLOGDET, .label = "slogdet (sign * logabsdet)", .fn = slogdet, .n_in = 1, .in = {IN(K_REAL, 3, 3)},
     .tol = 1e-4},
    {.op = NB_OP_LINALG_CHOLESKY, .label = "cholesky lower", .fn = cholesky, .n_in = 1, .in = {IN(K_REAL, 3, 3)}, .tol = 1e-4},
    {.op = NB_OP_LINALG_CHOLESKY, .label = "cholesky upper", .fn = cholesky, .n_in = 1, .in = {IN(K_REAL, 2, 3, 3)},
     .tol = 1e-4, .p = {1}},
    {.op = NB_OP_LINALG_QR, .label = "qr reduced, 4x3", .fn = qr, .n_in = 1, .in = {IN(K_REAL, 4, 3)}, .tol = 1e-4},
    {.op = NB_OP_LINALG_EIGH, .label = "eigh (values, squared vectors)", .fn = eigh, .n_in = 1, .in = {IN(K_REAL, 3, 3)},
     .tol = 1e-4},
    {.op = NB_OP_LINALG_SVD, .label = "svd 4x3 (values, squared vectors)", .fn = svd, .n_in = 1, .in = {IN(K_REAL, 4, 3)},
     .tol = 1e-4},
    {.op = NB_OP_LINALG_SVDVALS, .label = "svdvals 3x4", .fn = svdvals, .n_in = 1, .in = {IN(K_REAL, 3, 4)}, .tol = 1e-4},
    {.op = NB_OP_LINALG_LSTSQ, .label = "lstsq 4x3", .fn = lstsq, .n_in = 2, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 2)},
     .tol = 1e-4},
};

const nb_case_table nb_cases_linalg = {cases, (int)(sizeof cases / sizeof cases[0])};
