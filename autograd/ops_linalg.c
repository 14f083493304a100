/* ops_linalg.c - torch.linalg ops (nb_linalg.h): validation, broadcasting,
 * dispatch to the backend's linalg_* slots (CPU: backend/cpu/linalg.c,
 * LAPACKE) and the backward rules of PyTorch's FunctionsManual.cpp, written
 * with differentiable ops. An op with several differentiable outputs (qr,
 * eigh, svd) writes them back to back into one flat tensor P that carries
 * the node; the outputs are views of P, so the node receives the gradients
 * of all of them at once (zeros for an unused one). Tests: tests/test_ops_linalg.c. */
#include <string.h>

#include "nb_autograd_impl.h"
#include "nb_linalg.h"

#define MT(x) nb_transpose((x), -1, -2)

/* ---- helpers ------------------------------------------------------------------ */

/* The op table's id of "linalg.<name>" (a lookup by name: these ops run a
 * factorization, so the search costs nothing that matters). */
static nb_op_id op_id(const char *op) {
    char name[64];
    snprintf(name, sizeof name, "%s", op);
    for (char *c = name; *c; c++)
        if (*c == '.') *c = '_';
    char *space = strchr(name, ' ');
    if (space) *space = 0; /* "linalg.lstsq backward" */
    nb_op_id id = nb_op_find(name);
    NB_ASSERT(id != NB_OP_COUNT);
    return id;
}

/* Checks a float batch of matrices (square if asked); false with the error set. */
static bool check_mat(const char *op, nb_tensor *A, bool square) {
    if (!nb_check_inputs(op, 1, &A)) return false;
    char b[NB_SHAPE_BUF];
    if (!nb_check_supported(op_id(op), A->dtype, A))
        return false;
    else if (A->ndim < 2)
        nb_set_error(NB_ERR_SHAPE, "%s: A must have at least 2 dimensions, got shape %s", op,
                     nb_fmt_shape(A->ndim, A->shape, b, sizeof b));
    else if (square && A->shape[A->ndim - 1] != A->shape[A->ndim - 2])
        nb_set_error(NB_ERR_SHAPE, "%s: A must be batches of square matrices, but they are %lld by %lld matrices (shape %s)",
                     op, (long long)A->shape[A->ndim - 2], (long long)A->shape[A->ndim - 1],
                     nb_fmt_shape(A->ndim, A->shape, b, sizeof b));
    else
        return true;
    return false;
}

/* Rewrites a kernel's "linalg_<slot>: why" as "op: why"; returns NULL. */
static void *relabel(const char *op) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nb_last_error());
    const char *colon = strstr(msg, ": ");
    const char *why = !strncmp(msg, "linalg_", 7) && colon ? colon + 2 : msg;
    nb_set_error(nb_last_status(), "%s: %s", op, why);
    return NULL;
}

static nb_tensor *new_like(int ndim, const int64_t *shape, const nb_tensor *like) {
    return nb_tensor_new(ndim, shape, like->dtype, like->storage->device);
}

/* An n x n matrix of like's dtype: lower below the diagonal, diag on it,
 * upper above (eye is (0, 1, 0)). */
static nb_tensor *tri_mask(int64_t n, const nb_tensor *like, double lower, double diag, double upper) {
    nb_tensor *r = nb_arange_on(0, (double)n, 1, NB_I64, like->storage->device);
    nb_tensor *rows = nb_reshape(r, NB_SHAPE(n, 1)), *cols = nb_reshape(r, NB_SHAPE(1, n));
    nb_tensor *lo = nb_to_dtype(nb_gt(rows, cols), like->dtype), *up = nb_to_dtype(nb_gt(cols, rows), like->dtype);
    nb_tensor *eq = nb_to_dtype(nb_eq(rows, cols), like->dtype);
    nb_tensor *m = nb_add(nb_add(nb_mul_scalar(lo, lower), nb_mul_scalar(eq, diag)), nb_mul_scalar(up, upper));
    return nb_to_device(m, like->storage->device);
}
static nb_tensor *eye_like(int64_t n, const nb_tensor *like) { return tri_mask(n, like, 0, 1, 0); }

static nb_status gin_status(nb_node *n, nb_tensor **gin) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && !gin[i]) return nb_last_status();
    return NB_OK;
}

/* Records the node of a one-input op; false only on failure. */
static bool record1(nb_op_id op, nb_tensor *out, nb_tensor *a, nb_node **node) {
    bool failed;
    *node = nb_record(op, out, 1, &a, &failed);
    return !failed;
}

/* PyTorch's vector rule: B is a vector if 1-D, or A's shape without its last dim. */
static bool is_vector_rhs(const nb_tensor *A, const nb_tensor *B) {
    return B->ndim == 1 ||
           (B->ndim == A->ndim - 1 && !memcmp(B->shape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 1)));
}

/* Expands the batch dims of A [..., r, c] and B [..., r2, k] to their broadcast. */
static bool broadcast_batch(const char *op, nb_tensor **A, nb_tensor **B) {
    nb_tensor *a = *A, *b = *B;
    int nd;
    int64_t sa[NB_MAX_DIMS + 2], sb[NB_MAX_DIMS + 2];
    char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
    if (!nb_broadcast_shapes(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nd, sa)) {
        nb_set_error(NB_ERR_SHAPE, "%s: the batch dims of A %s and B %s do not broadcast", op,
                     nb_fmt_shape(a->ndim, a->shape, x, sizeof x), nb_fmt_shape(b->ndim, b->shape, y, sizeof y));
        return false;
    }
    memcpy(sb, sa, sizeof(int64_t) * (size_t)nd);
    sa[nd] = a->shape[a->ndim - 2], sa[nd + 1] = a->shape[a->ndim - 1];
    sb[nd] = b->shape[b->ndim - 2], sb[nd + 1] = b->shape[b->ndim - 1];
    *A = nb_expand(a, nd + 2, sa), *B = nb_expand(b, nd + 2, sb);
    return *A && *B;
}

/* ---- packed outputs --------------------------------------------------------- */

/* One output inside the flat P: batch dims of A plus 1 or 2 trailing sizes. */
typedef struct {
    int ndim;
    int64_t shape[NB_MAX_DIMS], off, numel;
} part;

static part mk_part(const nb_tensor *A, int ntail, int64_t t0, int64_t t1, int64_t *off) {
    part p = {.ndim = A->ndim - 2 + ntail, .off = *off};
    memcpy(p.shape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 2));
    p.shape[A->ndim - 2] = t0;
    if (ntail == 2) p.shape[A->ndim - 1] = t1;
    p.numel = nb_shape_numel(p.ndim, p.shape);
    *off += p.numel;
    return p;
}

static nb_kview part_kview(nb_tensor *P, const part *p) {
    nb_kview v = nb_kview_of(P);
    v.data = (char *)v.data + p->off * (int64_t)nb_dtype_size(P->dtype);
    v.ndim = p->ndim;
    memcpy(v.shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    nb_contiguous_strides(p->ndim, p->shape, v.strides);
    return v;
}

/* A view of P's part with no autograd link (for nb_save). */
static nb_tensor *part_alias(nb_tensor *P, const part *p) {
    int64_t st[NB_MAX_DIMS];
    nb_contiguous_strides(p->ndim, p->shape, st);
    return nb_tensor_view_of(P, p->ndim, p->shape, st, P->offset + p->off);
}

/* The part as a differentiable view of the flat t (P, or P's gradient). */
static nb_tensor *part_of(nb_tensor *t, const part *p) {
    return nb_reshape(nb_narrow(t, 0, p->off, p->numel), p->ndim, p->shape);
}

/* The parts of P's gradient g, in the shapes of the saved outputs. */
static void split_grad(nb_tensor *g, nb_tensor *const *saved, int n, nb_tensor **out) {
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        part p = {.ndim = saved[i]->ndim, .off = off, .numel = nb_numel(saved[i])};
        memcpy(p.shape, saved[i]->shape, sizeof(int64_t) * (size_t)p.ndim);
        out[i] = part_of(g, &p);
        off += p.numel;
    }
}

/* ---- solve, inv ---------------------------------------------------------------- */

static nb_tensor *solve_core(const char *op, nb_tensor *A, nb_tensor *B);

/* X = A^-1 B: gB = A^-T gX, gA = -gB X^T (derivatives.yaml, linalg_solve). */
nb_status nb_bw_solve(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gb = solve_core("linalg.solve backward", MT(n->saved[0]), g);
    if (n->in[1]) gin[1] = gb;
    if (n->in[0]) gin[0] = nb_neg(nb_matmul(gb, MT(n->saved[1])));
    return gin_status(n, gin);
}

/* A [..., n, n], B [..., n, k] with equal batch dims. */
static nb_tensor *solve_core(const char *op, nb_tensor *A, nb_tensor *B) {
    nb_tensor *a = nb_contiguous(A), *b = nb_contiguous(B);
    nb_tensor *x = a && b ? new_like(b->ndim, b->shape, b) : NULL;
    if (!x) return NULL;
    nb_kview vx = nb_kview_of(x), va = nb_kview_of(a), vb = nb_kview_of(b);
    if (nb_kernel_linalg_solve(NB_BE(a), &vx, &va, &vb) != NB_OK) return relabel(op);
    nb_tensor *in[2] = {a, b};
    bool failed;
    nb_node *n = nb_record(NB_OP_LINALG_SOLVE, x, 2, in, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, a), nb_save(n, 1, x);
    return x;
}

static nb_tensor *solve_impl(nb_tensor *A, nb_tensor *B) {
    const char *op = "linalg.solve";
    nb_tensor *in[2] = {A, B};
    if (!nb_check_inputs(op, 2, in) || !check_mat(op, A, true) || !nb_check_dtypes(op_id(op), 2, in)) return NULL;
    bool vec = B->ndim >= 1 && is_vector_rhs(A, B);
    nb_tensor *b = vec ? nb_unsqueeze(B, -1) : B;
    if (!b) return NULL;
    if (b->ndim < 2 || b->shape[b->ndim - 2] != A->shape[A->ndim - 1]) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "linalg.solve: incompatible shapes of A %s and B %s",
                       nb_fmt_shape(A->ndim, A->shape, x, sizeof x), nb_fmt_shape(B->ndim, B->shape, y, sizeof y));
    }
    if (!broadcast_batch(op, &A, &b)) return NULL;
    nb_tensor *x = solve_core(op, A, b);
    return vec ? nb_squeeze(x, -1) : x;
}

/* inv(A) = solve(A, I): its backward is -A^-T g A^-T (derivatives.yaml, linalg_inv_ex). */
static nb_tensor *inv_core(const char *op, nb_tensor *A) {
    nb_tensor *eye = eye_like(A->shape[A->ndim - 1], A);
    return solve_core(op, A, nb_expand(eye, A->ndim, A->shape));
}

nb_tensor *nb_linalg_solve(nb_tensor *A, nb_tensor *B) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, solve_impl(A, B));
}

nb_tensor *nb_linalg_inv(nb_tensor *A) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, check_mat("linalg.inv", A, true) ? inv_core("linalg.inv", A) : NULL);
}

/* ---- det, slogdet ----------------------------------------------------------------- */

/* gA = g det A^-T (derivatives.yaml, linalg_det; not at a singular A). */
nb_status nb_bw_det(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gd = nb_unsqueeze(nb_unsqueeze(nb_mul(g, n->saved[1]), -1), -1);
    gin[0] = nb_mul(gd, MT(inv_core("linalg.det backward", n->saved[0])));
    return gin_status(n, gin);
}

/* d log|det A| = A^-T (derivatives.yaml, linalg_slogdet). */
nb_status nb_bw_slogdet(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gd = nb_unsqueeze(nb_unsqueeze(g, -1), -1);
    gin[0] = nb_mul(gd, MT(inv_core("linalg.slogdet backward", n->saved[0])));
    return gin_status(n, gin);
}

/* Fills whichever of det/sign/logabs are non-NULL (shape: A's batch dims). */
static bool lu_det(const char *op, nb_tensor *a, nb_tensor **det, nb_tensor **sign, nb_tensor **logabs) {
    nb_tensor **outs[3] = {det, sign, logabs};
    nb_kview v[3];
    for (int i = 0; i < 3; i++) {
        if (!outs[i]) continue;
        if (!(*outs[i] = new_like(a->ndim - 2, a->shape, a))) return false;
        v[i] = nb_kview_of(*outs[i]);
    }
    nb_kview va = nb_kview_of(a);
    if (nb_kernel_linalg_det(NB_BE(a), det ? &v[0] : NULL, sign ? &v[1] : NULL, logabs ? &v[2] : NULL, &va) != NB_OK)
        return relabel(op);
    return true;
}

static nb_tensor *det_impl(nb_tensor *A) {
    nb_tensor *a = check_mat("linalg.det", A, true) ? nb_contiguous(A) : NULL, *det;
    nb_node *n;
    if (!a || !lu_det("linalg.det", a, &det, NULL, NULL) || !record1(NB_OP_LINALG_DET, det, a, &n))
        return NULL;
    if (n) nb_save(n, 0, a), nb_save(n, 1, det);
    return det;
}

nb_tensor *nb_linalg_det(nb_tensor *A) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, det_impl(A));
}

static nb_tensor *slogdet_impl(nb_tensor *A, nb_tensor **sign) {
    nb_tensor *a = check_mat("linalg.slogdet", A, true) ? nb_contiguous(A) : NULL, *la;
    nb_node *n;
    if (!a || !lu_det("linalg.slogdet", a, NULL, sign, &la) || !record1(NB_OP_LINALG_SLOGDET, la, a, &n))
        return NULL;
    if (n) nb_save(n, 0, a);
    return la;
}

nb_status nb_linalg_slogdet(nb_tensor *A, nb_tensor **sign, nb_tensor **logabsdet) {
    nb_tensor *sg = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *la = slogdet_impl(A, &sg);
    if (la) nb_retain(sg); /* outlives the op's scope */
    la = nb_scope_return(s, la);
    if (!la) return nb_last_status();
    if (sign) *sign = nb_scope_adopt(sg);
    else nb_release(sg);
    if (logabsdet) *logabsdet = la;
    return NB_OK;
}

/* ---- cholesky ------------------------------------------------------------------- */

/* PyTorch's cholesky_backward (Murray 2016, arXiv:1602.07527):
 * phi = tril(L^T gL) with its diagonal halved, gA = sym(L^-T phi L^-1). */
nb_status nb_bw_cholesky(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *L = n->saved[0], *gL = g;
    if (n->p.linalg.flag) L = MT(L), gL = MT(gL);
    int64_t sz = L->shape[L->ndim - 1];
    nb_tensor *Linv = inv_core("linalg.cholesky backward", L);
    nb_tensor *phi = nb_mul(nb_matmul(MT(L), gL), tri_mask(sz, L, 1, 0.5, 0));
    nb_tensor *ga = nb_matmul(nb_matmul(MT(Linv), phi), Linv);
    gin[0] = nb_mul_scalar(nb_add(ga, MT(ga)), 0.5);
    return gin_status(n, gin);
}

static nb_tensor *cholesky_impl(nb_tensor *A, bool upper) {
    nb_tensor *a = check_mat("linalg.cholesky", A, true) ? nb_contiguous(A) : NULL;
    nb_tensor *l = a ? new_like(a->ndim, a->shape, a) : NULL;
    if (!l) return NULL;
    nb_kview vl = nb_kview_of(l), va = nb_kview_of(a);
    if (nb_kernel_linalg_cholesky(NB_BE(a), &vl, &va, upper) != NB_OK) return relabel("linalg.cholesky");
    nb_node *n;
    if (!record1(NB_OP_LINALG_CHOLESKY, l, a, &n)) return NULL;
    if (n) nb_save(n, 0, l), n->p.linalg.flag = upper;
    return l;
}

nb_tensor *nb_linalg_cholesky(nb_tensor *A, bool upper) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, cholesky_impl(A, upper));
}

/* ---- multi-output ops: results through out-params ---------------------------- */

/* Ends the op's scope keeping outs[0..n) (NULL when failed), then hands
 * them to the caller's scope and to the non-NULL dst[i]. */
static nb_status finish_outs(nb_scope *s, bool ok, nb_tensor **outs, nb_tensor ***dst, int n) {
    for (int i = 0; i < n; i++)
        if (ok) nb_retain(outs[i]);
    nb_scope_end(s);
    if (!ok) return nb_last_status();
    for (int i = 0; i < n; i++) {
        if (dst[i]) *dst[i] = nb_scope_adopt(outs[i]);
        else nb_release(outs[i]);
    }
    return NB_OK;
}

/* ---- qr ------------------------------------------------------------------------------ */

/* PyTorch's linalg_qr_backward, case m >= n (k = n): M = gR R^T - Q^T gQ,
 * S = triu(M) + triu(M)^T with the diagonal once, gA = (Q S + gQ) R^-T. */
nb_status nb_bw_qr(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *Q = n->saved[0], *R = n->saved[1], *gr[2];
    int64_t m = Q->shape[Q->ndim - 2], cols = R->shape[R->ndim - 1];
    if (m < cols || (n->p.linalg.flag && m > cols))
        return nb_set_error(NB_ERR_UNSUPPORTED, "linalg.qr backward: supported for m >= n in mode 'reduced' (or m == n), "
                                                "got %lld x %lld in mode '%s'",
                            (long long)m, (long long)cols, n->p.linalg.flag ? "complete" : "reduced");
    split_grad(g, n->saved, 2, gr);
    nb_tensor *M = nb_sub(nb_matmul(gr[1], MT(R)), nb_matmul(MT(Q), gr[0]));
    nb_tensor *B = nb_mul(M, tri_mask(cols, R, 0, 1, 1));
    nb_tensor *S = nb_mul(nb_add(B, MT(B)), tri_mask(cols, R, 1, 0.5, 1));
    nb_tensor *y = nb_add(nb_matmul(Q, S), gr[0]);
    gin[0] = MT(solve_core("linalg.qr backward", R, MT(y)));
    return gin_status(n, gin);
}

static bool qr_impl(nb_tensor *A, nb_linalg_qr_mode mode, nb_tensor **outs) {
    nb_tensor *a = check_mat("linalg.qr", A, false) ? nb_contiguous(A) : NULL;
    if (!a) return false;
    if (mode != NB_QR_REDUCED && mode != NB_QR_COMPLETE)
        return nb_set_error(NB_ERR_INVALID_ARG, "linalg.qr: bad mode %d", (int)mode), false;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], kq = mode == NB_QR_COMPLETE || m < n ? m : n, off = 0;
    part pq = mk_part(a, 2, m, kq, &off), pr = mk_part(a, 2, kq, n, &off);
    nb_tensor *P = new_like(1, &off, a);
    if (!P) return false;
    nb_kview vq = part_kview(P, &pq), vr = part_kview(P, &pr), va = nb_kview_of(a);
    if (nb_kernel_linalg_qr(NB_BE(a), &vq, &vr, &va) != NB_OK) return relabel("linalg.qr");
    nb_node *nd;
    if (!record1(NB_OP_LINALG_QR, P, a, &nd)) return false;
    if (nd) nb_save(nd, 0, part_alias(P, &pq)), nb_save(nd, 1, part_alias(P, &pr)), nd->p.linalg.flag = mode;
    outs[0] = part_of(P, &pq), outs[1] = part_of(P, &pr);
    return outs[0] && outs[1];
}

nb_status nb_linalg_qr(nb_tensor *A, nb_linalg_qr_mode mode, nb_tensor **Q, nb_tensor **R) {
    nb_tensor *outs[2] = {0}, **dst[2] = {Q, R};
    nb_scope *s = nb_op_scope_begin();
    return finish_outs(s, qr_impl(A, mode, outs), outs, dst, 2);
}

/* ---- eigh ----------------------------------------------------------------------------- */

/* PyTorch's linalg_eig_backward, Hermitian case: K = skew(V^T gV) / 2,
 * E_ij = w_j - w_i (1 on the diagonal), gA = V (K / E + diag(gw)) V^T. */
nb_status nb_bw_eigh(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *w = n->saved[0], *V = n->saved[1], *gr[2];
    split_grad(g, n->saved, 2, gr);
    nb_tensor *eye = eye_like(w->shape[w->ndim - 1], w);
    nb_tensor *vg = nb_matmul(MT(V), gr[1]);
    nb_tensor *K = nb_mul_scalar(nb_sub(vg, MT(vg)), 0.5);
    nb_tensor *E = nb_add(nb_sub(nb_unsqueeze(w, -2), nb_unsqueeze(w, -1)), eye);
    nb_tensor *inner = nb_add(nb_div(K, E), nb_mul(eye, nb_unsqueeze(gr[0], -2)));
    gin[0] = nb_matmul(V, nb_matmul(inner, MT(V)));
    return gin_status(n, gin);
}

static bool eigh_impl(nb_tensor *A, char uplo, nb_tensor **outs) {
    nb_tensor *a = check_mat("linalg.eigh", A, true) ? nb_contiguous(A) : NULL;
    if (!a) return false;
    if (uplo != 'L' && uplo != 'U')
        return nb_set_error(NB_ERR_INVALID_ARG, "linalg.eigh: UPLO must be 'L' or 'U', got '%c'", uplo), false;
    int64_t n = a->shape[a->ndim - 1], off = 0;
    part pw = mk_part(a, 1, n, 0, &off), pv = mk_part(a, 2, n, n, &off);
    nb_tensor *P = new_like(1, &off, a);
    if (!P) return false;
    nb_kview vw = part_kview(P, &pw), vv = part_kview(P, &pv), va = nb_kview_of(a);
    if (nb_kernel_linalg_eigh(NB_BE(a), &vw, &vv, &va, uplo == 'U') != NB_OK) return relabel("linalg.eigh");
    nb_node *nd;
    if (!record1(NB_OP_LINALG_EIGH, P, a, &nd)) return false;
    if (nd) nb_save(nd, 0, part_alias(P, &pw)), nb_save(nd, 1, part_alias(P, &pv));
    outs[0] = part_of(P, &pw), outs[1] = part_of(P, &pv);
    return outs[0] && outs[1];
}

nb_status nb_linalg_eigh(nb_tensor *A, char uplo, nb_tensor **eigenvalues, nb_tensor **eigenvectors) {
    nb_tensor *outs[2] = {0}, **dst[2] = {eigenvalues, eigenvectors};
    nb_scope *s = nb_op_scope_begin();
    return finish_outs(s, eigh_impl(A, uplo, outs), outs, dst, 2);
}

/* ---- svd ---------------------------------------------------------------------------------- */

/* PyTorch's svd_backward (real case) on the reduced factors U [m, k],
 * S [k], Vh [k, n]: J = (skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)
 * with E_ij = s_j^2 - s_i^2 (1 on the diagonal); plus the projections of
 * gU (m > n) or gVh (m < n) off the spans of U or V. */
static nb_tensor *svd_grad(nb_tensor *U, nb_tensor *S, nb_tensor *Vh, nb_tensor *gU, nb_tensor *gS, nb_tensor *gVh) {
    int64_t m = U->shape[U->ndim - 2], n = Vh->shape[Vh->ndim - 1], k = S->shape[S->ndim - 1];
    nb_tensor *eye = eye_like(k, S), *Sr = nb_unsqueeze(S, -2), *Sc = nb_unsqueeze(S, -1);
    nb_tensor *ug = nb_matmul(MT(U), gU), *vg = nb_matmul(Vh, MT(gVh));
    nb_tensor *S2 = nb_mul(S, S);
    nb_tensor *E = nb_add(nb_sub(nb_unsqueeze(S2, -2), nb_unsqueeze(S2, -1)), eye);
    nb_tensor *num = nb_add(nb_mul(nb_sub(ug, MT(ug)), Sr), nb_mul(Sc, nb_sub(vg, MT(vg))));
    nb_tensor *J = nb_add(nb_div(num, E), nb_mul(eye, nb_unsqueeze(gS, -2)));
    if (m > n) {
        nb_tensor *gus = nb_div(gU, Sr);
        nb_tensor *y = nb_sub(nb_add(nb_matmul(U, J), gus), nb_matmul(U, nb_matmul(MT(U), gus)));
        return nb_matmul(y, Vh);
    }
    if (m < n) {
        nb_tensor *sgv = nb_div(gVh, Sc);
        nb_tensor *y = nb_sub(nb_add(nb_matmul(J, Vh), sgv), nb_matmul(nb_matmul(sgv, MT(Vh)), Vh));
        return nb_matmul(U, y);
    }
    return nb_matmul(U, nb_matmul(J, Vh));
}

nb_status nb_bw_svd(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *gr[3];
    split_grad(g, n->saved, 3, gr);
    nb_tensor *U = n->saved[0], *S = n->saved[1], *Vh = n->saved[2], *gU = gr[0], *gVh = gr[2];
    int64_t k = S->shape[S->ndim - 1];
    if (n->p.linalg.flag) { /* full_matrices: only the first k columns of U and rows of Vh enter */
        U = nb_narrow(U, -1, 0, k), gU = nb_narrow(gU, -1, 0, k);
        Vh = nb_narrow(Vh, -2, 0, k), gVh = nb_narrow(gVh, -2, 0, k);
    }
    gin[0] = svd_grad(U, S, Vh, gU, gr[1], gVh);
    return gin_status(n, gin);
}

/* want_uv false: S only (outs[1]), no node (callers needing grad ask for U, Vh). */
static bool svd_impl(nb_tensor *A, bool full, bool want_uv, nb_tensor **outs) {
    const char *op = want_uv ? "linalg.svd" : "linalg.svdvals";
    nb_tensor *a = check_mat(op, A, false) ? nb_contiguous(A) : NULL;
    if (!a) return false;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n, off = 0;
    part pu = mk_part(a, 2, m, want_uv ? (full ? m : k) : 0, &off), ps = mk_part(a, 1, k, 0, &off);
    part pv = mk_part(a, 2, want_uv ? (full ? n : k) : 0, n, &off);
    nb_tensor *P = new_like(1, &off, a);
    if (!P) return false;
    nb_kview vu = part_kview(P, &pu), vs = part_kview(P, &ps), vv = part_kview(P, &pv), va = nb_kview_of(a);
    if (nb_kernel_linalg_svd(NB_BE(a), want_uv ? &vu : NULL, &vs, want_uv ? &vv : NULL, &va) != NB_OK) return relabel(op);
    nb_node *nd = NULL;
    if (want_uv && !record1(NB_OP_LINALG_SVD, P, a, &nd)) return false;
    if (nd) {
        nb_save(nd, 0, part_alias(P, &pu)), nb_save(nd, 1, part_alias(P, &ps)), nb_save(nd, 2, part_alias(P, &pv));
        nd->p.linalg.flag = full;
    }
    outs[0] = part_of(P, &pu), outs[1] = part_of(P, &ps), outs[2] = part_of(P, &pv);
    return outs[0] && outs[1] && outs[2];
}

nb_status nb_linalg_svd(nb_tensor *A, bool full_matrices, nb_tensor **U, nb_tensor **S, nb_tensor **Vh) {
    nb_tensor *outs[3] = {0}, **dst[3] = {U, S, Vh};
    nb_scope *s = nb_op_scope_begin();
    return finish_outs(s, svd_impl(A, full_matrices, true, outs), outs, dst, 3);
}

nb_tensor *nb_linalg_svdvals(nb_tensor *A) {
    nb_tensor *outs[3] = {0};
    nb_scope *s = nb_op_scope_begin();
    bool grad = A && nb_needs_grad(1, &A); /* the backward needs U and Vh */
    bool ok = svd_impl(A, false, grad, outs);
    return nb_scope_return(s, ok ? outs[1] : NULL);
}

/* ---- lstsq ---------------------------------------------------------------------------------- */

/* Full rank. m >= n, Z = (A^T A)^-1 gX: gB = A Z, gA = (B - A X) Z^T - A Z X^T.
 * m < n (X = A^T W, W = H^-1 B, H = A A^T), Y = H^-1 A gX: gB = Y,
 * gA = W gX^T - (Y W^T + W Y^T) A. Both are PyTorch's pinv-based rule at full rank. */
nb_status nb_bw_lstsq(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *A = n->saved[0], *B = n->saved[1], *X = n->saved[2];
    const char *op = "linalg.lstsq backward";
    if (A->shape[A->ndim - 2] >= A->shape[A->ndim - 1]) {
        nb_tensor *Z = solve_core(op, nb_matmul(MT(A), A), g), *AZ = nb_matmul(A, Z);
        if (n->in[1]) gin[1] = AZ;
        if (n->in[0]) gin[0] = nb_sub(nb_matmul(nb_sub(B, nb_matmul(A, X)), MT(Z)), nb_matmul(AZ, MT(X)));
    } else {
        nb_tensor *H = nb_matmul(A, MT(A)), *W = solve_core(op, H, B), *Y = solve_core(op, H, nb_matmul(A, g));
        if (n->in[1]) gin[1] = Y;
        if (n->in[0])
            gin[0] = nb_sub(nb_matmul(W, MT(g)), nb_matmul(nb_add(nb_matmul(Y, MT(W)), nb_matmul(W, MT(Y))), A));
    }
    return gin_status(n, gin);
}

static nb_tensor *lstsq_core(nb_tensor *A, nb_tensor *B) {
    nb_tensor *a = nb_contiguous(A), *b = nb_contiguous(B);
    if (!a || !b) return NULL;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, b->shape, sizeof(int64_t) * (size_t)b->ndim);
    shape[b->ndim - 2] = a->shape[a->ndim - 1];
    nb_tensor *x = new_like(b->ndim, shape, b);
    if (!x) return NULL;
    nb_kview vx = nb_kview_of(x), va = nb_kview_of(a), vb = nb_kview_of(b);
    if (nb_kernel_linalg_lstsq(NB_BE(a), &vx, &va, &vb) != NB_OK) return relabel("linalg.lstsq");
    nb_tensor *in[2] = {a, b};
    bool failed;
    nb_node *n = nb_record(NB_OP_LINALG_LSTSQ, x, 2, in, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, a), nb_save(n, 1, b), nb_save(n, 2, x);
    return x;
}

static nb_tensor *lstsq_impl(nb_tensor *A, nb_tensor *B, nb_tensor **residuals) {
    const char *op = "linalg.lstsq";
    nb_tensor *in[2] = {A, B};
    if (!nb_check_inputs(op, 2, in) || !check_mat(op, A, false) || !nb_check_dtypes(op_id(op), 2, in)) return NULL;
    bool vec = B->ndim >= 1 && is_vector_rhs(A, B);
    nb_tensor *b = vec ? nb_unsqueeze(B, -1) : B;
    if (!b) return NULL;
    if (b->ndim < 2 || b->shape[b->ndim - 2] != A->shape[A->ndim - 2]) {
        char x[NB_SHAPE_BUF], y[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "linalg.lstsq: incompatible shapes of A %s and B %s (A's rows must match B's)",
                       nb_fmt_shape(A->ndim, A->shape, x, sizeof x), nb_fmt_shape(B->ndim, B->shape, y, sizeof y));
    }
    if (!broadcast_batch(op, &A, &b)) return NULL;
    nb_tensor *x = lstsq_core(A, b);
    if (x && residuals) {
        int64_t zero = 0;
        int dim = -2;
        *residuals = A->shape[A->ndim - 2] > A->shape[A->ndim - 1]
                         ? nb_sum(nb_pow_scalar(nb_sub(nb_matmul(A, x), b), 2), &dim, 1, false)
                         : new_like(1, &zero, A);
        if (*residuals && vec && nb_dim(*residuals) > 0 && nb_numel(*residuals)) *residuals = nb_squeeze(*residuals, -1);
        if (!*residuals) return NULL;
    }
    return vec && x ? nb_squeeze(x, -1) : x;
}

nb_tensor *nb_linalg_lstsq(nb_tensor *A, nb_tensor *B, nb_tensor **residuals) {
    nb_tensor *res = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = lstsq_impl(A, B, residuals ? &res : NULL);
    if (x && res) nb_retain(res);
    x = nb_scope_return(s, x);
    if (x && residuals) *residuals = nb_scope_adopt(res);
    return x;
}
