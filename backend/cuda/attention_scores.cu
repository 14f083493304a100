// attention_scores.cu - the attention's score-matrix path on CUDA (for
// B*L*S up to 2^26 scores; attention.cu has the entry points and the tiled
// path for longer sequences). The scores materialise in scratch and every
// product is a cuBLAS GEMM (tensor cores under TF32 or in 16 bits); row
// kernels apply mask, softmax and dropout. Backward recomputes the scores,
// then dV = P'^T dO, dP' = dO V^T, dS = P (dP' Z/(1-p) - D) with
// D = rowsum(dO o O), dQ = scale dS K, dK = scale dS^T Q (FlashAttention-2's
// formulas).
//
// bfloat16/float16: Q K^T and dO V^T are 16-bit GEMMs with float32 results
// (float32 scores, softmax and lse); P, P' and dS are
// rounded to 16 bits for the P V, P'^T dO, dS K and dS^T Q GEMMs (float32
// accumulation), as FlashAttention-2 rounds P before its P V product.
//
// q, k, v, out and the gradients are batched views (Mat): [B, R, C] dense,
// or the heads of a [B, N, h, d] projection as a [B, h, N, d] view, whose
// batch is not one stride apart; such products go through cuBLAS's
// pointer-array batched GEMM (pointers made on the device, so a CUDA graph
// captures them), which spares the head-layout copies.
#include <type_traits>

#include <cublas_v2.h>

#include "attention.cuh"

extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be);

namespace nbc {

// The score kernels run one warp per row (b, i): the row's indices and
// mask base are found once per row (64-bit division per score was their
// bound), and their arithmetic is in the scores' type A: float32 for
// float32 and 16-bit q (as PyTorch's softmax), double for float64 (double
// exp per score cost the float32 path 3x).
__device__ inline float a_exp(float x) { return expf(x); }
__device__ inline double a_exp(double x) { return exp(x); }
__device__ inline float a_log(float x) { return logf(x); }
__device__ inline double a_log(double x) { return log(x); }
// Blocks of 256 threads for the row kernels: 8 rows each, a warp per row.
static unsigned row_blocks(int64_t rows) { return (unsigned)((rows + 7) / 8); }

// The row (b, i) of the rows = B L rows that this warp owns, and its lane;
// false past the last row.
struct WarpRow {
    int64_t row, b, i;
    int lane;
};
__device__ inline bool warp_row(int64_t rows, int64_t L, WarpRow *w) {
    w->row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    w->lane = threadIdx.x % 32;
    if (w->row >= rows) return false;
    w->b = idiv(w->row, L), w->i = w->row - w->b * L;
    return true;
}

// s [B*L, S] (scale Q K^T, in A): masks each row, writes lse (in L), and P
// (dropped and rescaled when dropout) into p (in P; p may be s). M is the
// additive mask's dtype. float32/float64: all one type, p over s; 16-bit:
// float32 scores and lse, 16-bit P for the P V GEMM.
template <typename M, typename A, typename P, typename L> __global__ void k_softmax_rows(Att a, A *s, P *p, L *lse) {
    WarpRow w;
    if (!warp_row(a.B * a.L, a.L, &w)) return;
    const int64_t row = w.row, b = w.b, i = w.i, mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    const int lane = w.lane;
    A *sr = s + row * a.S;
    P *pr = p + row * a.S;
    A mx = -INFINITY;
    for (int64_t j = lane; j < a.S; j += 32) {
        A v = masked<A, M>(a, mb, i, j, sr[j]);
        sr[j] = v;
        mx = fmax(mx, v);
    }
    __syncwarp(); // the pair loop below reads scores other lanes masked
    mx = warp_max(mx);
    A sum = 0;
    for (int64_t j = lane; j < a.S; j += 32) sum += a_exp(sr[j] - mx);
    sum = warp_sum(sum);
    A l = mx == -INFINITY ? (A)-INFINITY : mx + a_log(sum); // all masked: -inf, then NaN weights
    if (lane == 0) lse[row] = (L)l;
    for (int64_t j = 2 * lane; j < a.S; j += 64) { // pairs: one Philox block each
        double z[2] = {1, 1};
        if (a.dropout) keep2(a, b, i, j, z);
        for (int u = 0; u < 2 && j + u < a.S; u++) pr[j + u] = cv<P>((double)(a_exp(sr[j + u] - l) * (A)z[u]));
    }
}

// From s (scale Q K^T in A, overwritten by P) and lse: P = exp(masked s -
// lse) into s, and P' = P Z/(1-p) into pd (in P) when dropout or when
// `all` (16-bit: P' is the dV GEMM's operand); else pd is s.
template <typename M, typename A, typename P, typename L>
__global__ void k_probs(Att a, A *s, P *pd, const L *lse, bool all) {
    WarpRow w;
    if (!warp_row(a.B * a.L, a.L, &w)) return;
    const int64_t row = w.row, b = w.b, i = w.i, mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    const int lane = w.lane;
    A *sr = s + row * a.S;
    P *pr = pd + row * a.S;
    A l = (A)lse[row];
    for (int64_t j = 2 * lane; j < a.S; j += 64) {
        double z[2] = {1, 1};
        if (a.dropout) keep2(a, b, i, j, z);
        for (int u = 0; u < 2 && j + u < a.S; u++) {
            A p = a_exp(masked<A, M>(a, mb, i, j + u, sr[j + u]) - l);
            sr[j + u] = p;
            if (a.dropout || all) pr[j + u] = cv<P>((double)(p * (A)z[u]));
        }
    }
}

// dS = P (dP' Z/(1-p) - D) into ds (in P; ds may be dp, or pd). With
// dropout the keep mask is read back from P' (pd, as k_probs left it: P'
// is 0 exactly where a weight was dropped or P' underflowed, and there P,
// no larger, is 0 too, or below 16-bit P's smallest step), so the Philox
// rounds run once per backward.
template <typename A, typename P>
__global__ void k_dscores(Att a, const A *p, const A *dp, const P *pd, P *ds, const double *D) {
    WarpRow w;
    if (!warp_row(a.B * a.L, a.L, &w)) return;
    const int64_t o = w.row * a.S, row = w.row;
    const int lane = w.lane;
    A d = (A)D[row], ks = (A)a.keep_scale;
    for (int64_t j = lane; j < a.S; j += 32) {
        A g = dp[o + j];
        if (a.dropout) g = dv(pd[o + j]) != 0 ? g * ks : (A)0;
        ds[o + j] = cv<P>((double)(p[o + j] * (g - d)));
    }
}

// D[row] = sum_e dO[row, e] O[row, e] (one warp per row; row = b L + i).
template <typename T> __global__ void k_rowdot(Mat go, Mat o, double *D, int64_t rows, int64_t L, int64_t ev) {
    WarpRow w;
    if (!warp_row(rows, L, &w)) return;
    const int64_t row = w.row, b = w.b, i = w.i;
    const int lane = w.lane;
    const T *g = (const T *)go.data + mat_off(go, b) + i * go.ld, *x = (const T *)o.data + mat_off(o, b) + i * o.ld;
    double s = 0;
    for (int64_t e = lane; e < ev; e += 32) s += dv(g[e]) * dv(x[e]);
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

nb_status rowdot(nb_backend *be, nb_dtype dt, const Att &a, const Mat &gout, const Mat &out, double *D) {
    int64_t rows = a.B * a.L;
    cudaStream_t s = stream_of(be);
    switch (dt) {
    case NB_F32: k_rowdot<float><<<row_blocks(rows), 256, 0, s>>>(gout, out, D, rows, a.L, a.Ev); break;
    case NB_F64: k_rowdot<double><<<row_blocks(rows), 256, 0, s>>>(gout, out, D, rows, a.L, a.Ev); break;
    case NB_BF16: k_rowdot<__nv_bfloat16><<<row_blocks(rows), 256, 0, s>>>(gout, out, D, rows, a.L, a.Ev); break;
    default: k_rowdot<__half><<<row_blocks(rows), 256, 0, s>>>(gout, out, D, rows, a.L, a.Ev); break;
    }
    return launched("attention_backward");
}

// ---- batched products -------------------------------------------------------------------

// One stride between consecutive matrices, if the batch has one.
static bool uniform(const Mat &m, int64_t B, int64_t *stride) {
    if (m.b2 >= B) return *stride = m.s2, true;                 // one level
    if (m.b2 == 1) return *stride = m.s1, true;
    if (m.s1 == m.b2 * m.s2) return *stride = m.s2, true;       // [B1, B2] dense over both
    return false;
}

static Mat dense(void *p, int64_t rows, int64_t cols, int64_t B) { return Mat{p, B, 0, rows * cols, cols}; }

__global__ void k_mat_ptrs(Mat a, Mat b, Mat c, size_t ea, size_t ec, int64_t B, const void **pa, const void **pb,
                           void **pc) {
    NBC_GRID_STRIDE(i, B) {
        pa[i] = (const char *)a.data + mat_off(a, i) * ea;
        pb[i] = (const char *)b.data + mat_off(b, i) * ea;
        pc[i] = (char *)c.data + mat_off(c, i) * ec;
    }
}

static cudaDataType_t cuda_type(nb_dtype dt) {
    return dt == NB_F64 ? CUDA_R_64F : dt == NB_BF16 ? CUDA_R_16BF : dt == NB_F16 ? CUDA_R_16F : CUDA_R_32F;
}

// C = alpha op(A) op(B) for B row-major problems (gemm_rm's conventions),
// operands in dt, C in dt_c; strided-batched when every operand has one
// batch stride, else the pointer-array form.
static nb_status gemm_mats(nb_backend *be, const char *op, nb_dtype dt, nb_dtype dt_c, bool ta, bool tb, int64_t m,
                           int64_t n, int64_t k, double alpha, const Mat &A, const Mat &Bm, const Mat &C, int64_t B) {
    int64_t sa, sb, sc;
    if (uniform(A, B, &sa) && uniform(Bm, B, &sb) && uniform(C, B, &sc))
        return gemm_rm_ex(be, op, dt, dt_c, ta, tb, m, n, k, alpha, A.data, A.ld, sa, Bm.data, Bm.ld, sb, 0.0, C.data,
                          C.ld, sc, B);
    if (m == 0 || n == 0 || B == 0) return NB_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || B > INT32_MAX || A.ld > INT32_MAX || Bm.ld > INT32_MAX ||
        C.ld > INT32_MAX)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: a GEMM dimension above cuBLAS's int range", op);
    Scratch ptrs;
    if (!ptrs.alloc(be, 3 * sizeof(void *) * (size_t)B)) return nb_last_status();
    const void **pa = (const void **)ptrs.ptr, **pb = pa + B;
    void **pc = (void **)(pb + B);
    size_t ea = nb_dtype_size(dt), ec = nb_dtype_size(dt_c);
    cudaStream_t s = stream_of(be);
    k_mat_ptrs<<<blocks_for(B), THREADS, 0, s>>>(A, Bm, C, ea, ec, B, pa, pb, pc);
    nb_status r = launched(op);
    if (r) return r;
    cudaDataType_t t = cuda_type(dt), tc = cuda_type(dt_c);
    cublasComputeType_t ct = dt == NB_F64 ? CUBLAS_COMPUTE_64F
                             : nb_dtype_is_16bit(dt) ? CUBLAS_COMPUTE_32F
                             : nb_float32_matmul_precision() == 0 ? CUBLAS_COMPUTE_32F
                             : nb_float32_matmul_precision() == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                  : CUBLAS_COMPUTE_32F_FAST_16BF;
    float af = (float)alpha, bf = 0.f;
    double bd = 0.0;
    const void *palpha = dt == NB_F64 ? (const void *)&alpha : (const void *)&af;
    const void *pbeta = dt == NB_F64 ? (const void *)&bd : (const void *)&bf;
    // column-major: C^T [n, m] = op(B)^T op(A)^T
    cublasHandle_t h = nb_cuda_cublas(be);
    if (!h) return nb_last_status();
    cublasStatus_t st = cublasGemmBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)(k ? k : 1), palpha,
                                            pb, t, (int)Bm.ld, pa, t, (int)A.ld, pbeta, pc, tc, (int)C.ld, (int)B, ct,
                                            CUBLAS_GEMM_DEFAULT);
    count_launch();
    if (st != CUBLAS_STATUS_SUCCESS)
        return nb_set_error(st == CUBLAS_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                            "%s: cublasGemmBatchedEx failed (status %d; m=%lld n=%lld k=%lld batch=%lld)",
                            op, (int)st, (long long)m, (long long)n, (long long)k, (long long)B);
    return NB_OK;
}

// ---- forward and backward ------------------------------------------------------------------

template <typename T> struct ScoreOf { using type = T; };      // scores and lse: float32, float64 as is
template <> struct ScoreOf<__nv_bfloat16> { using type = float; };
template <> struct ScoreOf<__half> { using type = float; };

template <typename T>
static nb_status fwd(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                     const Mat &v, const Mat &out, void *lse) {
    using A = typename ScoreOf<T>::type;
    constexpr bool h = !std::is_same<A, T>::value; // 16-bit: P in its own 16-bit buffer
    size_t n = (size_t)(a.B * a.L * a.S);
    Scratch sc, pp;
    if (!sc.alloc(be, sizeof(A) * n) || (h && !pp.alloc(be, sizeof(T) * n))) return nb_last_status();
    T *P = h ? pp.as<T>() : (T *)sc.ptr;
    nb_status r = gemm_mats(be, op, dt, h ? NB_F32 : dt, false, true, a.L, a.S, a.E, a.scale, q, k,
                            dense(sc.ptr, a.L, a.S, a.B), a.B);
    if (r) return r;
    int64_t rows = a.B * a.L;
    k_softmax_rows<T, A, T, A><<<row_blocks(rows), 256, 0, stream_of(be)>>>(a, sc.as<A>(), P, (A *)lse);
    if ((r = launched(op))) return r;
    return gemm_mats(be, op, dt, dt, false, false, a.L, a.Ev, a.S, 1.0, dense(P, a.L, a.S, a.B), v, out, a.B);
}

template <typename T>
static nb_status bwd(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                     const Mat &v, const Mat &out, const Mat &gout, const Mat *gq, const Mat *gk, const Mat *gv,
                     const void *lse) {
    using A = typename ScoreOf<T>::type;
    constexpr bool h = !std::is_same<A, T>::value;
    cudaStream_t s = stream_of(be);
    int64_t rows = a.B * a.L;
    size_t n = (size_t)(rows * a.S);
    Scratch dsum, p, dp, pd;
    if (!dsum.alloc(be, sizeof(double) * (size_t)rows) || !p.alloc(be, sizeof(A) * n) || !dp.alloc(be, sizeof(A) * n) ||
        ((h || a.dropout) && !pd.alloc(be, sizeof(T) * n)))
        return nb_last_status();
    nb_status r = rowdot(be, dt, a, gout, out, dsum.as<double>());
    if (r) return r;
    A *P = p.as<A>(), *DP = dp.as<A>();
    T *PD = h || a.dropout ? pd.as<T>() : (T *)P; // P' for dV; 16-bit: then dS
    nb_dtype dts = h ? NB_F32 : dt;
    if ((r = gemm_mats(be, op, dt, dts, false, true, a.L, a.S, a.E, a.scale, q, k, dense(P, a.L, a.S, a.B), a.B)))
        return r;
    k_probs<T, A, T, A><<<row_blocks(rows), 256, 0, s>>>(a, P, PD, (const A *)lse, h);
    if ((r = launched(op))) return r;
    if (gv && (r = gemm_mats(be, op, dt, dt, true, false, a.S, a.Ev, a.L, 1.0, dense(PD, a.L, a.S, a.B), gout, *gv,
                             a.B)))
        return r;
    if (!gq && !gk) return NB_OK;
    if ((r = gemm_mats(be, op, dt, dts, false, true, a.L, a.S, a.Ev, 1.0, gout, v, dense(DP, a.L, a.S, a.B), a.B)))
        return r;
    T *DS = h ? PD : (T *)DP; // over P' (16-bit) or dP (in place)
    k_dscores<A, T><<<row_blocks(rows), 256, 0, s>>>(a, P, DP, PD, DS, dsum.as<double>());
    if ((r = launched(op))) return r;
    Mat ds = dense(DS, a.L, a.S, a.B);
    if (gq && (r = gemm_mats(be, op, dt, dt, false, false, a.L, a.E, a.S, a.scale, ds, k, *gq, a.B))) return r;
    if (gk && (r = gemm_mats(be, op, dt, dt, true, false, a.S, a.E, a.L, a.scale, ds, q, *gk, a.B))) return r;
    return NB_OK;
}

nb_status score_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                        const Mat &v, const Mat &out, void *lse) {
    switch (dt) {
    case NB_F32: return fwd<float>(be, op, dt, a, q, k, v, out, lse);
    case NB_F64: return fwd<double>(be, op, dt, a, q, k, v, out, lse);
    case NB_BF16: return fwd<__nv_bfloat16>(be, op, dt, a, q, k, v, out, lse);
    default: return fwd<__half>(be, op, dt, a, q, k, v, out, lse);
    }
}

nb_status score_backward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, const Mat &gout, const Mat *gq, const Mat *gk, const Mat *gv,
                         const void *lse) {
    switch (dt) {
    case NB_F32: return bwd<float>(be, op, dt, a, q, k, v, out, gout, gq, gk, gv, lse);
    case NB_F64: return bwd<double>(be, op, dt, a, q, k, v, out, gout, gq, gk, gv, lse);
    case NB_BF16: return bwd<__nv_bfloat16>(be, op, dt, a, q, k, v, out, gout, gq, gk, gv, lse);
    default: return bwd<__half>(be, op, dt, a, q, k, v, out, gout, gq, gk, gv, lse);
    }
}

} // namespace nbc
