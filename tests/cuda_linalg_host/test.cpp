// test.cpp - drives the CUDA linalg slots (backend/cuda/linalg*.cu compiled for the
// host against mock/) and checks them by identities (A X = B, L L^T = A, Q R = A,
// A V = V diag(w), U S Vh = A, lstsq against the normal equations), edge cases
// (empty matrices, all-zero lstsq), the error word (singular, not PD, rank) and
// the shared view checks (backend/check/linalg.c), in float and double.
#include <vector>
#include <random>
#include <functional>
#include "cuda_common.cuh"
extern int g_word;
static int fails = 0, checks = 0;
#define CK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); printf(__VA_ARGS__); printf("\n"); } } while (0)

typedef std::vector<int64_t> Shape;
template <typename T> struct Arr {
    T *p; int64_t n; nb_kview v;
    Arr(Shape s, const std::vector<double> *vals = nullptr) {
        n = 1; for (auto x : s) n *= x;
        p = (T *)reg_alloc(sizeof(T) * (size_t)(n ? n : 0) + 0); // exact size: bounds checks bite
        if (n) memset(p, 0xff, sizeof(T) * n); // garbage (NaN) where nothing is written
        v.data = p; v.dtype = sizeof(T) == 4 ? NB_F32 : NB_F64; v.ndim = (int)s.size();
        int64_t st = 1;
        for (int i = v.ndim - 1; i >= 0; i--) { v.shape[i] = s[i]; v.strides[i] = st; st *= s[i]; }
        if (vals) for (int64_t i = 0; i < n; i++) p[i] = (T)(*vals)[i];
    }
    ~Arr() { reg_free(p); }
    double operator[](int64_t i) const { return (double)p[i]; }
};
static std::mt19937_64 rng(42);
static std::vector<double> randn(int64_t n) { std::normal_distribution<double> d; std::vector<double> v(n); for (auto &x : v) x = d(rng); return v; }
template <typename T> static double tolf() { return sizeof(T) == 4 ? 2e-4 : 1e-10; }
static int word_kind() { int w = g_word; g_word = 0; return w / 1024; }
// A slot called as its dispatcher calls it: the shared check (backend/check/linalg.c), then the kernel.
#define RUN(slot, ...) [&] { nb_status s_ = nb_check_##slot(nullptr, __VA_ARGS__); \
                             return s_ ? s_ : nb_cuda_##slot(nullptr, __VA_ARGS__); }()

// small dense helpers on row-major doubles (products summed in long double)
static std::vector<double> mm(const std::vector<double> &A, const std::vector<double> &B, int64_t m, int64_t k, int64_t n) {
    std::vector<double> C(m * n, 0); for (int64_t i = 0; i < m; i++) for (int64_t j = 0; j < n; j++) { long double s = 0; for (int64_t l = 0; l < k; l++) s += (long double)A[i*k+l]*B[l*n+j]; C[i*n+j] = (double)s; } return C;
}
static std::vector<double> tr(const std::vector<double> &A, int64_t m, int64_t n) { std::vector<double> B(m*n); for (int64_t i = 0; i < m; i++) for (int64_t j = 0; j < n; j++) B[j*m+i] = A[i*n+j]; return B; }
template <typename T> static std::vector<double> get(const Arr<T> &a, int64_t off, int64_t cnt) { std::vector<double> v(cnt); for (int64_t i = 0; i < cnt; i++) v[i] = a[off+i]; return v; }
static double maxdiff(const std::vector<double> &a, const std::vector<double> &b) { double d = 0; for (size_t i = 0; i < a.size(); i++) d = fmax(d, fabs(a[i]-b[i])); if (a.size() != b.size()) return 1e300; for (auto x : a) if (x != x) return 1e300; return d; }
static std::vector<double> eyev(int64_t n) { std::vector<double> e(n*n, 0); for (int64_t i = 0; i < n; i++) e[i*n+i] = 1; return e; }
// det by Gaussian elimination with partial pivoting in long double
static double refdet(std::vector<double> A, int64_t n) { std::vector<long double> a(A.begin(), A.end()); long double d = 1; for (int64_t c = 0; c < n; c++) { int64_t p = c; for (int64_t r = c+1; r < n; r++) if (fabsl(a[r*n+c]) > fabsl(a[p*n+c])) p = r; if (a[p*n+c] == 0) return 0; if (p != c) { for (int64_t j = 0; j < n; j++) std::swap(a[p*n+j], a[c*n+j]); d = -d; } d *= a[c*n+c]; for (int64_t r = c+1; r < n; r++) { long double f = a[r*n+c]/a[c*n+c]; for (int64_t j = c; j < n; j++) a[r*n+j] -= f*a[c*n+j]; } } return (double)d; }
// inverse via Gauss-Jordan (for the references of lstsq)
static std::vector<double> inv(std::vector<double> A, int64_t n) { std::vector<double> I = eyev(n); for (int64_t c = 0; c < n; c++) { int64_t p = c; for (int64_t r = c+1; r < n; r++) if (fabs(A[r*n+c]) > fabs(A[p*n+c])) p = r; for (int64_t j = 0; j < n; j++) { std::swap(A[p*n+j], A[c*n+j]); std::swap(I[p*n+j], I[c*n+j]); } double d = A[c*n+c]; for (int64_t j = 0; j < n; j++) { A[c*n+j] /= d; I[c*n+j] /= d; } for (int64_t r = 0; r < n; r++) if (r != c) { double f = A[r*n+c]; for (int64_t j = 0; j < n; j++) { A[r*n+j] -= f*A[c*n+j]; I[r*n+j] -= f*I[c*n+j]; } } } return I; }

template <typename T> static void t_solve() {
    double tol = tolf<T>() * 10;
    for (auto [B, n, k] : std::vector<std::tuple<int64_t,int64_t,int64_t>>{{3,4,2},{1,1,1},{2,5,1},{2,3,6},{0,3,2},{2,0,2},{2,3,0}}) {
        auto av = randn(B*n*n); for (int64_t b = 0; b < B; b++) for (int64_t i = 0; i < n; i++) av[b*n*n+i*n+i] += n;
        auto bv = randn(B*n*k);
        Arr<T> a({B,n,n}, &av), bb({B,n,k}, &bv), x({B,n,k});
        CK(RUN(linalg_solve, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "solve word");
        for (int64_t b = 0; b < B; b++) {
            auto ax = mm(get(a, b*n*n, n*n), get(x, b*n*k, n*k), n, n, k);
            CK(maxdiff(ax, get(bb, b*n*k, n*k)) < tol, "solve B=%ld n=%ld k=%ld b=%ld diff %g", B, n, k, b, maxdiff(ax, get(bb, b*n*k, n*k)));
        }
    }
    // singular second element
    std::vector<double> av = {1,0,0,1, 1,2,2,4}, bv = {1,1,1,1};
    Arr<T> a({2,2,2}, &av), bb({2,2,1}, &bv), x({2,2,1});
    CK(RUN(linalg_solve, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
    CK(word_kind() == nbc::ERR_SINGULAR, "singular not flagged");
    // a shape error is synchronous
    Arr<T> xb({2,3,1});
    CK(RUN(linalg_solve, &xb.v, &a.v, &bb.v) == NB_ERR_SHAPE, "bad X accepted");
}

// The shared checks' argument errors (each before any kernel runs).
template <typename T> static void t_check() {
    Arr<T> a({2,3,4}), sq({2,3,3}), x({2,3,1}), b({2,3,1}), s({2,3}), u({2,3,3}), vh({2,3,4}), q({2,3,2}),
        vbad({2,4,3});
    CK(nb_check_linalg_det(nullptr, nullptr, nullptr, nullptr, &a.v) == NB_ERR_SHAPE &&
       strstr(nb_last_error(), "linalg_det: A must be square, got 3 x 4"), "%s", nb_last_error());
    nb_kview ai = sq.v;
    ai.dtype = NB_I64;
    CK(nb_check_linalg_solve(nullptr, &x.v, &ai, &b.v) == NB_ERR_DTYPE &&
       strstr(nb_last_error(), "linalg_solve: float32 or float64 only"), "%s", nb_last_error());
    nb_kview at = sq.v; // a transposed batch: not contiguous
    at.strides[1] = 1, at.strides[2] = 3;
    CK(nb_check_linalg_cholesky(nullptr, &sq.v, &at, false) == NB_ERR_SHAPE &&
       strstr(nb_last_error(), "A must be a contiguous batch of matrices"), "%s", nb_last_error());
    CK(nb_check_linalg_svd(nullptr, &u.v, &s.v, nullptr, &a.v) == NB_ERR_INVALID_ARG &&
       strstr(nb_last_error(), "U and Vh must both be given"), "%s", nb_last_error());
    CK(nb_check_linalg_svd(nullptr, &u.v, &s.v, &vh.v, &a.v) == NB_OK, "%s", nb_last_error());
    CK(nb_check_linalg_svd(nullptr, &u.v, &s.v, &vbad.v, &a.v) == NB_ERR_SHAPE &&
       strstr(nb_last_error(), "linalg_svd: U or Vh does not have"), "%s", nb_last_error());
    CK(nb_check_linalg_qr(nullptr, &q.v, &vh.v, &a.v) == NB_ERR_SHAPE && strstr(nb_last_error(), "linalg_qr: Q"),
       "%s", nb_last_error());
    CK(nb_check_linalg_eigh(nullptr, &s.v, &vh.v, &sq.v, false) == NB_ERR_SHAPE &&
       strstr(nb_last_error(), "linalg_eigh: V"), "%s", nb_last_error());
    CK(nb_check_linalg_lstsq(nullptr, &b.v, &a.v, &b.v) == NB_ERR_SHAPE && strstr(nb_last_error(), "linalg_lstsq: X"),
       "%s", nb_last_error());
}

template <typename T> static void t_det() {
    std::vector<double> av = {1,2,0,3,4,0,0,0,1, 0,1,0,0,0,1,1,0,0, 0,1,0,1,0,0,0,0,1, 1,2,0,2,4,0,0,0,1};
    Arr<T> a({4,3,3}, &av), d({4}), s({4}), l({4});
    CK(RUN(linalg_det, &d.v, &s.v, &l.v, &a.v) == NB_OK, "%s", nb_last_error());
    double ed[4] = {-2, 1, -1, 0}, es[4] = {-1, 1, -1, 0};
    for (int i = 0; i < 4; i++) { CK(fabs(d[i] - ed[i]) < 1e-5, "det %d = %g", i, d[i]); CK(s[i] == es[i], "sign %d = %g", i, s[i]); }
    CK(fabs(l[0] - log(2.0)) < 1e-6 && fabs(l[1]) < 1e-6 && fabs(l[2]) < 1e-6 && std::isinf(l[3]) && l[3] < 0, "logabs %g %g %g %g", l[0], l[1], l[2], l[3]);
    CK(word_kind() == 0, "det word");
    for (int64_t n : {1, 2, 5, 8}) {
        auto rv = randn(3*n*n);
        Arr<T> r({3,n,n}, &rv), d2({3}), l2({3});
        CK(RUN(linalg_det, &d2.v, nullptr, &l2.v, &r.v) == NB_OK, "%s", nb_last_error());
        for (int b = 0; b < 3; b++) { double ref = refdet(get(r, b*n*n, n*n), n); CK(fabs(d2[b] - ref) < tolf<T>()*10*fmax(1, fabs(ref)), "det n=%ld %g vs %g", n, d2[b], ref); CK(fabs(l2[b] - log(fabs(ref))) < tolf<T>()*10, "logabs"); }
    }
    Arr<T> e({2,0,0}), d3({2}), s3({2}), l3({2});
    CK(RUN(linalg_det, &d3.v, &s3.v, &l3.v, &e.v) == NB_OK, "%s", nb_last_error());
    CK(d3[0] == 1 && d3[1] == 1 && s3[0] == 1 && l3[0] == 0, "empty det");
}

template <typename T> static void t_cholesky() {
    double tol = tolf<T>() * 20;
    for (int upper = 0; upper < 2; upper++) for (int64_t n : {1, 4, 7}) {
        int64_t B = 3; auto xv = randn(B*n*n); std::vector<double> av(B*n*n), sym(B*n*n);
        for (int64_t b = 0; b < B; b++) { std::vector<double> x(xv.begin()+b*n*n, xv.begin()+(b+1)*n*n); auto S = mm(x, tr(x, n, n), n, n, n); for (int64_t i = 0; i < n; i++) S[i*n+i] += n; for (int64_t i = 0; i < n*n; i++) sym[b*n*n+i] = S[i], av[b*n*n+i] = S[i]; for (int64_t r = 0; r < n; r++) for (int64_t c = 0; c < n; c++) if (upper ? r > c : r < c) av[b*n*n+r*n+c] = 99; }
        Arr<T> a({B,n,n}, &av), L({B,n,n});
        CK(RUN(linalg_cholesky, &L.v, &a.v, upper) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "chol word");
        for (int64_t b = 0; b < B; b++) {
            auto l = get(L, b*n*n, n*n);
            auto prod = upper ? mm(tr(l, n, n), l, n, n, n) : mm(l, tr(l, n, n), n, n, n);
            CK(maxdiff(prod, std::vector<double>(sym.begin()+b*n*n, sym.begin()+(b+1)*n*n)) < tol*n, "chol upper=%d n=%ld", upper, n);
            for (int64_t r = 0; r < n; r++) for (int64_t c = 0; c < n; c++) { if (upper ? r > c : r < c) CK(l[r*n+c] == 0, "triangle not zero"); if (r == c) CK(l[r*n+c] > 0, "diag"); }
        }
    }
    std::vector<double> nv = {2,0,0,2, 1,2,2,1};
    Arr<T> a({2,2,2}, &nv), L({2,2,2});
    CK(RUN(linalg_cholesky, &L.v, &a.v, false) == NB_OK, "%s", nb_last_error());
    CK(word_kind() == nbc::ERR_NOT_PD, "not PD not flagged");
}

template <typename T> static void t_qr() {
    double tol = tolf<T>() * 20;
    struct C { int64_t m, n; bool complete; };
    for (C c : std::vector<C>{{5,3,false},{5,3,true},{3,5,false},{3,5,true},{4,4,false},{4,4,true},{1,3,false},{3,1,true},{3,0,true},{3,0,false},{0,3,true}}) {
        int64_t m = c.m, n = c.n, k = m < n ? m : n, kq = c.complete ? m : k, B = 2;
        auto av = randn(B*m*n);
        Arr<T> a({B,m,n}, &av), q({B,m,kq}), r({B,kq,n});
        CK(RUN(linalg_qr, &q.v, &r.v, &a.v) == NB_OK, "%s", nb_last_error());
        for (int64_t b = 0; b < B; b++) {
            auto Q = get(q, b*m*kq, m*kq), R = get(r, b*kq*n, kq*n);
            CK(maxdiff(mm(tr(Q, m, kq), Q, kq, m, kq), eyev(kq)) < tol, "QtQ m=%ld n=%ld c=%d", m, n, c.complete);
            CK(maxdiff(mm(Q, R, m, kq, n), get(a, b*m*n, m*n)) < tol*4, "QR=A m=%ld n=%ld c=%d diff %g", m, n, c.complete, maxdiff(mm(Q, R, m, kq, n), get(a, b*m*n, m*n)));
            for (int64_t i = 0; i < kq; i++) for (int64_t j = 0; j < i && j < n; j++) CK(R[i*n+j] == 0, "R not upper");
        }
    }
}

template <typename T> static void t_eigh() {
    double tol = tolf<T>() * 50;
    for (int upper = 0; upper < 2; upper++) for (int64_t n : {1, 4, 9}) {
        int64_t B = 2; auto xv = randn(B*n*n); std::vector<double> av(B*n*n), sym(B*n*n);
        for (int64_t b = 0; b < B; b++) for (int64_t r = 0; r < n; r++) for (int64_t c = 0; c < n; c++) { double s = xv[b*n*n+r*n+c] + xv[b*n*n+c*n+r]; sym[b*n*n+r*n+c] = s; av[b*n*n+r*n+c] = (upper ? r > c : r < c) ? 1e3 : s; }
        Arr<T> a({B,n,n}, &av), w({B,n}), V({B,n,n}), w2({B,n});
        CK(RUN(linalg_eigh, &w.v, &V.v, &a.v, upper) == NB_OK, "%s", nb_last_error());
        CK(RUN(linalg_eigh, &w2.v, nullptr, &a.v, upper) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "eigh word");
        for (int64_t b = 0; b < B; b++) {
            auto Vb = get(V, b*n*n, n*n), wb = get(w, b*n, n), S = std::vector<double>(sym.begin()+b*n*n, sym.begin()+(b+1)*n*n);
            auto AV = mm(S, Vb, n, n, n); std::vector<double> VW(n*n); for (int64_t r = 0; r < n; r++) for (int64_t c = 0; c < n; c++) VW[r*n+c] = Vb[r*n+c]*wb[c];
            CK(maxdiff(AV, VW) < tol*n, "AV=VW upper=%d n=%ld diff %g", upper, n, maxdiff(AV, VW));
            CK(maxdiff(mm(tr(Vb, n, n), Vb, n, n, n), eyev(n)) < tol, "VtV");
            for (int64_t i = 0; i + 1 < n; i++) CK(wb[i] <= wb[i+1], "ascending");
            CK(maxdiff(wb, get(w2, b*n, n)) < tol, "values-only differs");
        }
    }
}

template <typename T> static void t_svd() {
    double tol = tolf<T>() * 50;
    for (auto [m, n] : std::vector<std::pair<int64_t,int64_t>>{{5,3},{3,5},{4,4},{1,4},{4,1},{1,1},{6,2}}) for (int full = 0; full < 2; full++) {
        int64_t k = m < n ? m : n, B = 2, uc = full ? m : k, vr = full ? n : k;
        auto av = randn(B*m*n);
        Arr<T> a({B,m,n}, &av), U({B,m,uc}), S({B,k}), Vh({B,vr,n}), S2({B,k});
        CK(RUN(linalg_svd, &U.v, &S.v, &Vh.v, &a.v) == NB_OK, "%s", nb_last_error());
        CK(RUN(linalg_svd, nullptr, &S2.v, nullptr, &a.v) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "svd word");
        for (int64_t b = 0; b < B; b++) {
            auto u = get(U, b*m*uc, m*uc), s = get(S, b*k, k), vh = get(Vh, b*vr*n, vr*n);
            std::vector<double> us(m*k), vk(vh.begin(), vh.begin()+k*n);
            for (int64_t i = 0; i < m; i++) for (int64_t j = 0; j < k; j++) us[i*k+j] = u[i*uc+j]*s[j];
            CK(maxdiff(mm(us, vk, m, k, n), get(a, b*m*n, m*n)) < tol, "USVh=A m=%ld n=%ld full=%d diff %g", m, n, full, maxdiff(mm(us, vk, m, k, n), get(a, b*m*n, m*n)));
            CK(maxdiff(mm(tr(u, m, uc), u, uc, m, uc), eyev(uc)) < tol, "UtU m=%ld n=%ld full=%d", m, n, full);
            CK(maxdiff(mm(vh, tr(vh, vr, n), vr, n, vr), eyev(vr)) < tol, "VhVht m=%ld n=%ld full=%d", m, n, full);
            for (int64_t i = 0; i + 1 < k; i++) CK(s[i] >= s[i+1], "descending");
            CK(maxdiff(s, get(S2, b*k, k)) < tol, "values-only differs");
        }
    }
    Arr<T> a({2,3,0}), U({2,3,3}), S({2,0}), Vh({2,0,0});
    CK(RUN(linalg_svd, &U.v, &S.v, &Vh.v, &a.v) == NB_OK, "%s", nb_last_error());
    CK(maxdiff(get(U, 0, 9), eyev(3)) == 0 && maxdiff(get(U, 9, 9), eyev(3)) == 0, "empty full U = I");
}

template <typename T> static void t_lstsq() {
    double tol = tolf<T>() * 100;
    for (auto [m, n, k] : std::vector<std::tuple<int64_t,int64_t,int64_t>>{{6,3,2},{3,5,2},{4,4,3},{5,1,1},{1,4,2},{3,3,1}}) {
        int64_t B = 2; auto av = randn(B*m*n), bv = randn(B*m*k);
        Arr<T> a({B,m,n}, &av), bb({B,m,k}, &bv), x({B,n,k});
        CK(RUN(linalg_lstsq, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "lstsq word");
        for (int64_t b = 0; b < B; b++) {
            auto A = get(a, b*m*n, m*n), Bm = get(bb, b*m*k, m*k), X = get(x, b*n*k, n*k);
            auto At = tr(A, m, n);
            auto ref = m >= n ? mm(inv(mm(At, A, n, m, n), n), mm(At, Bm, n, m, k), n, n, k)
                              : mm(At, mm(inv(mm(A, At, m, n, m), m), Bm, m, m, k), n, m, k);
            CK(maxdiff(X, ref) < tol, "lstsq m=%ld n=%ld k=%ld diff %g", m, n, k, maxdiff(X, ref));
        }
    }
    // batch of [all-zero, rank-deficient (zero column)]: x = 0 for the first, ERR_RANK from the second
    for (auto [m, n] : std::vector<std::pair<int64_t,int64_t>>{{4,3},{3,4}}) {
        auto av = randn(2*m*n); for (int64_t i = 0; i < m*n; i++) av[i] = 0;
        Arr<T> a({2,m,n}, &av), bb({2,m,1}, nullptr), x({2,n,1});
        { auto bv = randn(2*m); for (int64_t i = 0; i < 2*m; i++) bb.p[i] = (T)bv[i]; }
        CK(RUN(linalg_lstsq, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == 0, "all-zero A must not raise");
        for (int64_t i = 0; i < n; i++) CK(x[i] == 0, "x of zero A");
        for (int64_t r = 0; r < m; r++) a.p[m*n + r*n + 1] = 0; // column 1 of element 1: zero
        if (m < n) for (int64_t c = 0; c < n; c++) a.p[m*n + 1*n + c] = 0; // wide: row 1 zero
        CK(RUN(linalg_lstsq, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
        CK(word_kind() == nbc::ERR_RANK, "rank deficiency not flagged m=%ld n=%ld", m, n);
    }
    Arr<T> a({2,0,3}), bb({2,0,2}), x({2,3,2});
    CK(RUN(linalg_lstsq, &x.v, &a.v, &bb.v) == NB_OK, "%s", nb_last_error());
    for (int i = 0; i < 12; i++) CK(x[i] == 0, "empty lstsq");
}

template <typename T> static void all() { t_check<T>(); t_solve<T>(); t_det<T>(); t_cholesky<T>(); t_qr<T>(); t_eigh<T>(); t_svd<T>(); t_lstsq<T>(); }
int main() {
    all<double>(); all<float>();
    printf("%d checks, %d failed\n", checks, fails);
    return fails != 0;
}
