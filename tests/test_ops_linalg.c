/* test_ops_linalg.c - torch.linalg ops (nb_linalg.h) and nn.init.orthogonal_:
 * reference identities (A X = B, A A^-1 = I, L L^T = A, Q^T Q = I and
 * Q R = A, A V = V diag(w), U diag(S) Vh = A, lstsq against the normal
 * equations, W W^T = I), known determinants (a permutation's sign, a
 * singular matrix's 0), batched and f32/f64 cases, a gradcheck of every
 * differentiable op (symmetric / positive-definite inputs built inside the
 * checked function; sign-invariant losses for eigh and svd) and error paths. */
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

#define MT(x) nb_transpose((x), -1, -2)


static nb_tensor *eye(int64_t n, nb_dtype dt) {
    double *v = calloc((size_t)(n * n), sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i * n + i] = 1;
    nb_tensor *t = nb_test_tensor(NB_SHAPE(n, n), dt, v);
    free(v);
    return t;
}

/* A well-conditioned random [..., n, n]: N(0,1) + n I. */
static nb_tensor *well_cond(int ndim, const int64_t *shape, nb_dtype dt, uint64_t seed) {
    nb_generator g = nb_generator_new(seed);
    int64_t n = shape[ndim - 1];
    return nb_add(nb_randn(ndim, shape, dt, &g), nb_mul_scalar(eye(n, dt), (double)n));
}

/* X X^T + n I: symmetric positive-definite. */
static nb_tensor *spd(nb_tensor *x) {
    int64_t n = nb_size(x, -1);
    return nb_add(nb_matmul(x, MT(x)), nb_mul_scalar(eye(n, nb_dtype_of(x)), (double)n));
}

static const nb_dtype dtypes[2] = {NB_F32, NB_F64};
static double tol(nb_dtype dt) { return dt == NB_F32 ? 1e-4 : 1e-10; }

/* ---- reference checks --------------------------------------------------------- */

START_TEST(test_solve_inv) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        nb_tensor *A = well_cond(NB_SHAPE(2, 4, 4), dt, 1);
        nb_generator g = nb_generator_new(2);
        nb_tensor *B = nb_randn(NB_SHAPE(2, 4, 3), dt, &g);
        nb_tensor *X = nb_linalg_solve(A, B);
        nb_ck_shape(X, 3, (int64_t[]){2, 4, 3});
        nb_ck_close_to(nb_matmul(A, X), B, tol(dt));
        /* B's batch dims broadcast; a vector right-hand side */
        nb_tensor *B2 = nb_randn(NB_SHAPE(4, 2), dt, &g);
        nb_ck_close_to(nb_matmul(A, nb_linalg_solve(A, B2)), nb_expand(B2, NB_SHAPE(2, 4, 2)), tol(dt));
        nb_tensor *b = nb_randn(NB_SHAPE(2, 4), dt, &g);
        nb_tensor *x = nb_linalg_solve(A, b);
        nb_ck_shape(x, 2, (int64_t[]){2, 4});
        nb_ck_close_to(nb_squeeze(nb_matmul(A, nb_unsqueeze(x, -1)), -1), b, tol(dt));
        /* inverse, and a transposed (non-contiguous) input */
        nb_ck_close_to(nb_matmul(A, nb_linalg_inv(A)), nb_expand(eye(4, dt), NB_SHAPE(2, 4, 4)), tol(dt));
        nb_ck_close_to(nb_matmul(MT(A), nb_linalg_inv(MT(A))), nb_expand(eye(4, dt), NB_SHAPE(2, 4, 4)), tol(dt));
    }
    /* by hand: [[2, 1], [1, 3]] x = [3, 5] -> x = [0.8, 1.4] */
    nb_tensor *A = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){2, 1, 1, 3});
    nb_ck_close(nb_linalg_solve(A, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 5})), (double[]){0.8, 1.4}, 2,
                1e-12, 0);
    nb_ck_close(nb_linalg_inv(A), (double[]){0.6, -0.2, -0.2, 0.4}, 4, 1e-12, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_det_slogdet) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        /* [[1,2],[3,4]] -> -2; a 3-cycle permutation -> +1; a swap -> -1; singular -> 0 */
        nb_tensor *A = nb_test_tensor(NB_SHAPE(4, 3, 3), dt,
                                      (double[]){1, 2, 0, 3, 4, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0,
                                                 0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 2, 0, 2, 4, 0, 0, 0, 1});
        nb_ck_close(nb_linalg_det(A), (double[]){-2, 1, -1, 0}, 4, tol(dt), 0);
        nb_tensor *sign, *la;
        NB_CK_OK(nb_linalg_slogdet(A, &sign, &la));
        nb_ck_close(sign, (double[]){-1, 1, -1, 0}, 4, 0, 0);
        double v[4];
        nb_test_values(la, v, 4);
        ck_assert(fabs(v[0] - log(2)) < tol(dt) && fabs(v[1]) < tol(dt) && fabs(v[2]) < tol(dt));
        ck_assert(isinf(v[3]) && v[3] < 0);
        /* det of a random well-conditioned matrix = sign * exp(logabsdet) */
        nb_tensor *R = well_cond(NB_SHAPE(3, 5, 5), dt, 3);
        NB_CK_OK(nb_linalg_slogdet(R, &sign, &la));
        nb_ck_close_to(nb_linalg_det(R), nb_mul(sign, nb_exp(la)), dt == NB_F32 ? 1e-1 : 1e-8);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cholesky) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        nb_generator g = nb_generator_new(4);
        nb_tensor *A = spd(nb_randn(NB_SHAPE(3, 4, 4), dt, &g));
        nb_tensor *L = nb_linalg_cholesky(A, false), *U = nb_linalg_cholesky(A, true);
        nb_ck_close_to(nb_matmul(L, MT(L)), A, tol(dt) * 10);
        nb_ck_close_to(nb_matmul(MT(U), U), A, tol(dt) * 10);
        nb_ck_close_to(U, MT(L), tol(dt));
        double *v = nb_test_values_of(L);
        for (int b = 0; b < 3; b++)
            for (int r = 0; r < 4; r++) {
                ck_assert(v[b * 16 + r * 5] > 0);
                for (int c = r + 1; c < 4; c++) ck_assert(v[b * 16 + r * 4 + c] == 0);
            }
        free(v);
    }
    nb_tensor *A = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){4, 2, 2, 5});
    nb_ck_close(nb_linalg_cholesky(A, false), (double[]){2, 0, 1, 2}, 4, 1e-12, 0);
    nb_scope_end(s);
}
END_TEST

static void check_qr(nb_tensor *A, nb_linalg_qr_mode mode, int64_t kq) {
    nb_dtype dt = nb_dtype_of(A);
    int64_t m = nb_size(A, -2), n = nb_size(A, -1), batch = nb_numel(A) / (m * n);
    nb_tensor *Q, *R;
    NB_CK_OK(nb_linalg_qr(A, mode, &Q, &R));
    nb_ck_shape(Q, 3, (int64_t[]){batch, m, kq});
    nb_ck_shape(R, 3, (int64_t[]){batch, kq, n});
    nb_ck_close_to(nb_matmul(MT(Q), Q), nb_expand(eye(kq, dt), NB_SHAPE(batch, kq, kq)), tol(dt));
    nb_ck_close_to(nb_matmul(Q, R), A, tol(dt) * 10);
    double *v = nb_test_values_of(R);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < kq; r++)
            for (int64_t c = 0; c < r && c < n; c++) ck_assert(v[(b * kq + r) * n + c] == 0);
    free(v);
}

START_TEST(test_qr) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_generator g = nb_generator_new(5);
        nb_tensor *tall = nb_randn(NB_SHAPE(2, 5, 3), dtypes[i], &g), *wide = nb_randn(NB_SHAPE(2, 3, 5), dtypes[i], &g);
        check_qr(tall, NB_QR_REDUCED, 3);
        check_qr(tall, NB_QR_COMPLETE, 5);
        check_qr(wide, NB_QR_REDUCED, 3);
        check_qr(wide, NB_QR_COMPLETE, 3);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_eigh) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        nb_generator g = nb_generator_new(6);
        nb_tensor *X = nb_randn(NB_SHAPE(3, 4, 4), dt, &g), *A = nb_add(X, MT(X));
        nb_tensor *w, *V, *wu, *Vu;
        NB_CK_OK(nb_linalg_eigh(A, 'L', &w, &V));
        NB_CK_OK(nb_linalg_eigh(A, 'U', &wu, &Vu));
        nb_ck_shape(w, 2, (int64_t[]){3, 4});
        nb_ck_close_to(nb_matmul(A, V), nb_mul(V, nb_unsqueeze(w, -2)), tol(dt) * 10);
        nb_ck_close_to(nb_matmul(MT(V), V), nb_expand(eye(4, dt), NB_SHAPE(3, 4, 4)), tol(dt));
        nb_ck_close_to(wu, w, tol(dt) * 10);
        double *v = nb_test_values_of(w);
        for (int b = 0; b < 3; b++)
            for (int j = 0; j < 3; j++) ck_assert(v[b * 4 + j] <= v[b * 4 + j + 1]);
        free(v);
    }
    /* [[2, 1], [1, 2]]: eigenvalues 1, 3; only the lower triangle is read */
    nb_tensor *w;
    NB_CK_OK(nb_linalg_eigh(nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){2, 99, 1, 2}), 'L', &w, NULL));
    nb_ck_close(w, (double[]){1, 3}, 2, 1e-12, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_svd) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        nb_generator g = nb_generator_new(7);
        nb_tensor *shapes[2] = {nb_randn(NB_SHAPE(2, 5, 3), dt, &g), nb_randn(NB_SHAPE(2, 3, 5), dt, &g)};
        for (int j = 0; j < 2; j++) {
            nb_tensor *A = shapes[j], *U, *S, *Vh, *Uf, *Sf, *Vhf;
            int64_t m = nb_size(A, -2), n = nb_size(A, -1);
            NB_CK_OK(nb_linalg_svd(A, false, &U, &S, &Vh));
            nb_ck_shape(U, 3, (int64_t[]){2, m, 3});
            nb_ck_shape(Vh, 3, (int64_t[]){2, 3, n});
            nb_ck_close_to(nb_matmul(nb_mul(U, nb_unsqueeze(S, -2)), Vh), A, tol(dt) * 10);
            NB_CK_OK(nb_linalg_svd(A, true, &Uf, &Sf, &Vhf));
            nb_ck_shape(Uf, 3, (int64_t[]){2, m, m});
            nb_ck_shape(Vhf, 3, (int64_t[]){2, n, n});
            nb_ck_close_to(nb_matmul(MT(Uf), Uf), nb_expand(eye(m, dt), NB_SHAPE(2, m, m)), tol(dt));
            nb_ck_close_to(nb_matmul(Vhf, MT(Vhf)), nb_expand(eye(n, dt), NB_SHAPE(2, n, n)), tol(dt));
            nb_ck_close_to(Sf, S, tol(dt));
            nb_ck_close_to(nb_linalg_svdvals(A), S, tol(dt));
            double *v = nb_test_values_of(S);
            for (int b = 0; b < 2; b++) ck_assert(v[b * 3] >= v[b * 3 + 1] && v[b * 3 + 1] >= v[b * 3 + 2]);
            free(v);
        }
    }
    nb_tensor *S = nb_linalg_svdvals(nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){3, 0, 0, -4}));
    nb_ck_close(S, (double[]){4, 3}, 2, 1e-12, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_lstsq) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 2; i++) {
        nb_dtype dt = dtypes[i];
        nb_generator g = nb_generator_new(8);
        nb_tensor *A = nb_randn(NB_SHAPE(2, 6, 3), dt, &g), *B = nb_randn(NB_SHAPE(2, 6, 2), dt, &g), *res;
        nb_tensor *X = nb_linalg_lstsq(A, B, &res);
        nb_ck_shape(X, 3, (int64_t[]){2, 3, 2});
        nb_ck_close_to(X, nb_linalg_solve(nb_matmul(MT(A), A), nb_matmul(MT(A), B)), tol(dt) * 10);
        nb_ck_shape(res, 2, (int64_t[]){2, 2});
        int dim = -2;
        nb_ck_close_to(res, nb_sum(nb_pow_scalar(nb_sub(nb_matmul(A, X), B), 2), &dim, 1, false), tol(dt) * 10);
        /* underdetermined: the minimum-norm solution A^T (A A^T)^-1 B; no residuals */
        nb_tensor *W = nb_randn(NB_SHAPE(3, 5), dt, &g), *b = nb_randn(NB_SHAPE(3), dt, &g);
        nb_tensor *x = nb_linalg_lstsq(W, b, &res);
        nb_ck_shape(x, 1, (int64_t[]){5});
        nb_ck_shape(res, 1, (int64_t[]){0});
        nb_ck_close_to(x, nb_matmul(MT(W), nb_linalg_solve(nb_matmul(W, MT(W)), b)), tol(dt) * 10);
    }
    nb_scope_end(s);
}
END_TEST

static void check_orthogonal(int ndim, const int64_t *shape, double gain) {
    nb_tensor *t = nb_zeros(ndim, shape, NB_F64);
    nb_generator g = nb_generator_new(9);
    NB_CK_OK(nb_init_orthogonal_(t, gain, &g));
    int64_t rows = shape[0], cols = nb_numel(t) / rows, k = rows < cols ? rows : cols;
    nb_tensor *W = nb_reshape(t, NB_SHAPE(rows, cols));
    nb_tensor *gram = rows <= cols ? nb_matmul(W, MT(W)) : nb_matmul(MT(W), W);
    nb_ck_close_to(gram, nb_mul_scalar(eye(k, NB_F64), gain * gain), 1e-10);
}

START_TEST(test_orthogonal_init) {
    nb_scope *s = nb_scope_begin();
    check_orthogonal(NB_SHAPE(3, 5), 1.0);
    check_orthogonal(NB_SHAPE(5, 3), 2.0);
    check_orthogonal(NB_SHAPE(4, 4), 1.0);
    check_orthogonal(NB_SHAPE(2, 3, 2), 0.5); /* conv-like: 2 rows of 6 */
    /* float32, and a fixed generator gives the same matrix */
    nb_tensor *a = nb_zeros(NB_SHAPE(4, 6), NB_F32), *b = nb_zeros(NB_SHAPE(4, 6), NB_F32);
    nb_generator g1 = nb_generator_new(3), g2 = nb_generator_new(3);
    NB_CK_OK(nb_init_orthogonal_(a, 1, &g1));
    NB_CK_OK(nb_init_orthogonal_(b, 1, &g2));
    nb_ck_close_to(a, b, 0);
    nb_ck_close_to(nb_matmul(a, MT(a)), eye(4, NB_F32), 1e-5);
    NB_CK_FAILS(nb_init_orthogonal_(nb_zeros(NB_SHAPE(4), NB_F32), 1, NULL) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_init_orthogonal_(nb_zeros(NB_SHAPE(4, 4), NB_I64), 1, NULL) == NB_OK, NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* ---- gradchecks ---------------------------------------------------------------- */

/* Flattens and joins outputs so one gradcheck covers all of them. */
static nb_tensor *join(nb_tensor *a, nb_tensor *b) {
    nb_tensor *parts[2] = {nb_reshape(a, NB_SHAPE(-1)), nb_reshape(b, NB_SHAPE(-1))};
    return b ? nb_cat(parts, 2, 0) : parts[0];
}

/* in[0] + 4 I: well-conditioned for the 3x3 / 4x4 inputs used here. */
static nb_tensor *shifted(nb_tensor *x) { return nb_add(x, nb_mul_scalar(eye(nb_size(x, -1), NB_F64), 4.0)); }

static nb_tensor *f_solve(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linalg_solve(shifted(in[0]), in[1]);
}
static nb_tensor *f_solve_vec(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linalg_solve(shifted(in[0]), in[1]);
}
static nb_tensor *f_inv(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linalg_inv(shifted(in[0]));
}
static nb_tensor *f_det(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linalg_det(in[0]);
}
static nb_tensor *f_slogdet(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_tensor *sign, *la;
    return nb_linalg_slogdet(in[0], &sign, &la) == NB_OK ? la : NULL;
}
static nb_tensor *f_cholesky(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_linalg_cholesky(spd(in[0]), *(bool *)ctx);
}
static nb_tensor *f_qr(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *Q, *R;
    return nb_linalg_qr(in[0], *(nb_linalg_qr_mode *)ctx, &Q, &R) == NB_OK ? join(Q, R) : NULL;
}
/* eigenvalues and V squared elementwise (each column's sign cancels) */
static nb_tensor *f_eigh(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_tensor *w, *V, *A = nb_add(in[0], MT(in[0]));
    return nb_linalg_eigh(A, 'L', &w, &V) == NB_OK ? join(w, nb_mul(V, V)) : NULL;
}
/* S, |U|^2 and |Vh|^2, or U diag(S) Vh: invariant to the singular vectors' signs */
static nb_tensor *f_svd(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    int mode = *(int *)ctx;
    nb_tensor *U, *S, *Vh;
    if (nb_linalg_svd(in[0], mode == 1, &U, &S, &Vh) != NB_OK) return NULL;
    if (mode == 2) return nb_matmul(nb_mul(U, nb_unsqueeze(S, -2)), Vh);
    if (mode == 1) { /* full_matrices: the first k columns/rows are sign-ambiguous only */
        int64_t k = nb_size(S, -1);
        U = nb_narrow(U, -1, 0, k), Vh = nb_narrow(Vh, -2, 0, k);
    }
    return join(join(S, nb_mul(U, U)), nb_mul(Vh, Vh));
}
static nb_tensor *f_svdvals(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_linalg_svdvals(in[0]);
}
static nb_tensor *f_lstsq(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_tensor *res, *x = nb_linalg_lstsq(in[0], in[1], &res);
    return nb_dim(res) && nb_numel(res) ? join(x, res) : x;
}

START_TEST(test_gradcheck_solve_inv_det) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[2] = {nb_test_randn_grad(NB_SHAPE(2, 3, 3), 11), nb_test_randn_grad(NB_SHAPE(2, 3, 2), 12)};
    nb_ck_gradcheck(f_solve, in, 2, NULL);
    nb_tensor *vin[2] = {in[0], nb_test_randn_grad(NB_SHAPE(3), 13)}; /* vector B, broadcast batch */
    nb_ck_gradcheck(f_solve_vec, vin, 2, NULL);
    nb_ck_gradcheck(f_inv, in, 1, NULL);
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(2, 3, 3), 14);
    nb_ck_gradcheck(f_det, &a, 1, NULL);
    nb_ck_gradcheck(f_slogdet, &a, 1, NULL);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_cholesky_qr) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 3, 3), 15);
    bool upper = false;
    nb_ck_gradcheck(f_cholesky, &x, 1, &upper);
    upper = true;
    nb_ck_gradcheck(f_cholesky, &x, 1, &upper);
    nb_linalg_qr_mode mode = NB_QR_REDUCED;
    nb_tensor *tall = nb_test_randn_grad(NB_SHAPE(2, 4, 3), 16), *sq = nb_test_randn_grad(NB_SHAPE(3, 3), 17);
    nb_ck_gradcheck(f_qr, &tall, 1, &mode);
    nb_ck_gradcheck(f_qr, &sq, 1, &mode);
    mode = NB_QR_COMPLETE;
    nb_ck_gradcheck(f_qr, &sq, 1, &mode);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_eigh_svd) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 4, 4), 18);
    nb_ck_gradcheck(f_eigh, &x, 1, NULL);
    nb_tensor *shapes[3] = {nb_test_randn_grad(NB_SHAPE(2, 4, 3), 19), nb_test_randn_grad(NB_SHAPE(3, 5), 20),
                            nb_test_randn_grad(NB_SHAPE(3, 3), 21)};
    for (int i = 0; i < 3; i++)
        for (int mode = 0; mode < 3; mode++) nb_ck_gradcheck(f_svd, &shapes[i], 1, &mode);
    nb_ck_gradcheck(f_svdvals, &shapes[0], 1, NULL);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_lstsq) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *tall[2] = {nb_test_randn_grad(NB_SHAPE(2, 5, 3), 22), nb_test_randn_grad(NB_SHAPE(2, 5, 2), 23)};
    nb_ck_gradcheck(f_lstsq, tall, 2, NULL);
    nb_tensor *wide[2] = {nb_test_randn_grad(NB_SHAPE(3, 5), 24), nb_test_randn_grad(NB_SHAPE(3), 25)};
    nb_ck_gradcheck(f_lstsq, wide, 2, NULL);
    nb_scope_end(s);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------ */

START_TEST(test_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *sing = nb_test_tensor(NB_SHAPE(2, 2, 2), NB_F64, (double[]){1, 0, 0, 1, 1, 2, 2, 4});
    nb_tensor *b = nb_ones(NB_SHAPE(2, 2, 1), NB_F64), *rect = nb_ones(NB_SHAPE(2, 3), NB_F64);
    NB_CK_FAILS(nb_linalg_solve(sing, b), NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linalg.solve: the matrix is singular (batch element 1"), "%s", nb_last_error());
    NB_CK_FAILS(nb_linalg_inv(sing), NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linalg.inv: the matrix is singular"), "%s", nb_last_error());
    nb_ck_close(nb_linalg_det(sing), (double[]){1, 0}, 2, 0, 0); /* no error, as PyTorch */
    NB_CK_FAILS(nb_linalg_inv(rect), NB_ERR_SHAPE);
    ck_assert_msg(strstr(nb_last_error(), "linalg.inv") && strstr(nb_last_error(), "[2, 3]"), "%s", nb_last_error());
    NB_CK_FAILS(nb_linalg_det(rect), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linalg_cholesky(rect, false), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linalg_solve(nb_ones(NB_SHAPE(3, 3), NB_F64), nb_ones(NB_SHAPE(2, 1), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linalg_solve(nb_ones(NB_SHAPE(3, 3), NB_F64), nb_ones(NB_SHAPE(3), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_linalg_det(nb_ones(NB_SHAPE(3), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linalg_inv(nb_ones(NB_SHAPE(2, 2), NB_I64)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_linalg_svdvals(nb_ones(NB_SHAPE(2, 2), NB_I32)), NB_ERR_DTYPE);
    nb_tensor *npd = nb_test_tensor(NB_SHAPE(2, 2, 2), NB_F64, (double[]){2, 0, 0, 2, 1, 2, 2, 1});
    NB_CK_FAILS(nb_linalg_cholesky(npd, false), NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linalg.cholesky") && strstr(nb_last_error(), "not positive-definite") &&
                      strstr(nb_last_error(), "batch element 1") && strstr(nb_last_error(), "order 2"),
                  "%s", nb_last_error());
    nb_tensor *w, *V, *Q, *R;
    NB_CK_FAILS(nb_linalg_eigh(npd, 'X', &w, &V) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_linalg_qr(nb_ones(NB_SHAPE(3), NB_F64), NB_QR_REDUCED, &Q, &R) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linalg_lstsq(nb_ones(NB_SHAPE(4, 2), NB_F64), nb_ones(NB_SHAPE(3, 1), NB_F64), NULL), NB_ERR_SHAPE);
    nb_tensor *rank1 = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){1, 0, 1, 0, 1, 0, 1, 0});
    NB_CK_FAILS(nb_linalg_lstsq(rank1, nb_ones(NB_SHAPE(4, 1), NB_F64), NULL), NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linalg.lstsq") && strstr(nb_last_error(), "full rank"), "%s", nb_last_error());
    /* complete QR with m > n has no backward (as PyTorch) */
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(4, 2), 26);
    NB_CK_OK(nb_linalg_qr(a, NB_QR_COMPLETE, &Q, &R));
    NB_CK_FAILS(nb_backward(nb_sum(Q, NULL, 0, false)) == NB_OK, NB_ERR_UNSUPPORTED);
    /* det's backward at a singular matrix is not supported */
    nb_tensor *z = nb_zeros(NB_SHAPE(2, 2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(z, true));
    NB_CK_FAILS(nb_backward(nb_linalg_det(z)) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linalg.det backward"), "%s", nb_last_error());
    nb_scope_end(s);
}
END_TEST

/* Regression (issue 13): a matrix holding NaN gives NaN results (LAPACKE
 * used to refuse it: "rejected argument 4"), per batch element. */
START_TEST(test_nan_input) {
    nb_scope *s = nb_scope_begin();
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F32 : NB_F64;
        /* batch element 0 holds NaN, element 1 is [[2, 1], [1, 3]] */
        nb_tensor *A = nb_test_tensor(3, (int64_t[]){2, 2, 2}, dt, (double[]){NAN, 1, 2, 3, 2, 1, 1, 3});
        double v[8];
        nb_test_values(nb_linalg_inv(A), v, 8);
        ck_assert(isnan(v[0]) && isnan(v[3]));
        ck_assert_double_eq_tol(v[4], 0.6, 1e-6);
        nb_test_values(nb_linalg_det(A), v, 2);
        ck_assert(isnan(v[0]) && fabs(v[1] - 5) < 1e-5);
        nb_tensor *sign, *logabs;
        NB_CK_OK(nb_linalg_slogdet(A, &sign, &logabs));
        nb_test_values(sign, v, 2);
        ck_assert(isnan(v[0]) && v[1] == 1);
        nb_test_values(nb_linalg_solve(A, nb_ones(NB_SHAPE(2, 2, 1), dt)), v, 4);
        ck_assert(isnan(v[0]) && isnan(v[1]) && fabs(v[2] - 0.4) < 1e-6);
        nb_test_values(nb_linalg_cholesky(A, false), v, 8); /* reads the lower triangle: NaN at [0][0] */
        ck_assert(isnan(v[0]) && v[1] == 0 && isnan(v[2]) && isnan(v[3]));
        nb_tensor *Q, *R, *w, *V;
        NB_CK_OK(nb_linalg_qr(A, NB_QR_REDUCED, &Q, &R));
        nb_test_values(R, v, 8);
        ck_assert(isnan(v[0]) && v[2] == 0 && !isnan(v[4]));
        NB_CK_OK(nb_linalg_eigh(A, 'L', &w, &V));
        nb_test_values(w, v, 4);
        ck_assert(isnan(v[0]) && isnan(v[1]) && !isnan(v[2]));
        /* eigh reads one triangle: a NaN in the other is never seen */
        nb_tensor *U = nb_test_tensor(2, (int64_t[]){2, 2}, dt, (double[]){2, NAN, 1, 3});
        NB_CK_OK(nb_linalg_eigh(U, 'L', &w, NULL));
        nb_test_values(w, v, 2);
        ck_assert(!isnan(v[0]) && !isnan(v[1]));
        nb_test_values(nb_linalg_lstsq(A, nb_ones(NB_SHAPE(2, 2, 1), dt), NULL), v, 4);
        ck_assert(isnan(v[0]) && !isnan(v[2]));
        NB_CK_FAILS(nb_linalg_svdvals(A), NB_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "NaN"));
    }
    nb_scope_end(s);
}
END_TEST

/* complete QR of a tall matrix: LAPACK's orgqr reads Q's columns past n,
 * which must not hold garbage from a reused scratch block (NaN there made
 * LAPACKE reject argument 5; found by tests/torch_diff) */
START_TEST(test_qr_complete_tall_reused_scratch) {
    for (int rep = 0; rep < 3; rep++) {
        nb_scope *s = nb_scope_begin();
        nb_scope *junk = nb_scope_begin(); /* NaN blocks of the scratch's size, freed for reuse */
        for (int64_t k = 1; k < 80; k++) ck_assert_ptr_nonnull(nb_full(NB_SHAPE(k), NAN, NB_F64));
        nb_scope_end(junk);
        nb_tensor *A = nb_test_tensor(NB_SHAPE(1, 5, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 1});
        nb_tensor *Q = NULL, *R = NULL;
        NB_CK_OK(nb_linalg_qr(A, NB_QR_COMPLETE, &Q, &R));
        check_qr(A, NB_QR_COMPLETE, 5);
        nb_scope_end(s);
    }
}
END_TEST

Suite *nb_suite_ops_linalg(void) {
    Suite *s = suite_create("ops_linalg");
    TCase *tc = tcase_create("ops_linalg");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_solve_inv);
    tcase_add_test(tc, test_qr_complete_tall_reused_scratch);
    tcase_add_test(tc, test_nan_input);
    tcase_add_test(tc, test_det_slogdet);
    tcase_add_test(tc, test_cholesky);
    tcase_add_test(tc, test_qr);
    tcase_add_test(tc, test_eigh);
    tcase_add_test(tc, test_svd);
    tcase_add_test(tc, test_lstsq);
    tcase_add_test(tc, test_orthogonal_init);
    tcase_add_test(tc, test_gradcheck_solve_inv_det);
    tcase_add_test(tc, test_gradcheck_cholesky_qr);
    tcase_add_test(tc, test_gradcheck_eigh_svd);
    tcase_add_test(tc, test_gradcheck_lstsq);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
