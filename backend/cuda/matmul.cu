// matmul.cu - the matmul family on CUDA: the `matmul` slot (batched,
// broadcast batch dims, any operand with a unit stride in one of its matrix
// dims) and the row-major strided-batched GEMM helper other files use
// (attention), both through cuBLAS's cublasGemmStridedBatchedEx. float32
// computes in full float32 unless nb_set_float32_matmul_precision chose
// "high" (TF32 tensor cores) or "medium"; float64 in float64. cuBLAS gives
// the same bits run to run for a given problem and configuration.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <pthread.h>
#include <string.h>

#include <type_traits>

#include "cuda_common.cuh"

extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be);
extern "C" cublasLtHandle_t nb_cuda_cublaslt(nb_backend *be);

namespace nbc {

static const char *cublas_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

// C = alpha op(A) op(B) + beta C for `batch` row-major problems: op(A) is
// [m, k] (A stored [m, k] with row stride lda, or [k, m] when ta), op(B) is
// [k, n], C [m, n] with row stride ldc; batch strides in elements (0 =
// shared). Runs as column-major C^T = op(B)^T op(A)^T.
// gemm_rm_ex: the operands in dt, C in dt_c (dt itself, or float32 for
// 16-bit operands: the attention's float32 scores from bf16 q and k).
nb_status gemm_rm_ex(nb_backend *be, const char *slot, nb_dtype dt, nb_dtype dt_c, bool ta, bool tb, int64_t m,
                     int64_t n, int64_t k, double alpha, const void *A, int64_t lda, int64_t sA, const void *B,
                     int64_t ldb, int64_t sB, double beta, void *C, int64_t ldc, int64_t sC, int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return NB_OK;
    cublasHandle_t h = nb_cuda_cublas(be);
    if (!h) return nb_last_status();
    // bfloat16/float16: 16-bit operands, float32 accumulation (PyTorch's bf16 matmul)
    cudaDataType_t t = dt == NB_F64 ? CUDA_R_64F : dt == NB_BF16 ? CUDA_R_16BF : dt == NB_F16 ? CUDA_R_16F : CUDA_R_32F;
    cudaDataType_t tc = dt_c == dt ? t : CUDA_R_32F;
    cublasComputeType_t ct = dt == NB_F64 ? CUBLAS_COMPUTE_64F
                             : dt == NB_BF16 || dt == NB_F16 ? CUBLAS_COMPUTE_32F
                             : nb_float32_matmul_precision() == 0 ? CUBLAS_COMPUTE_32F
                             : nb_float32_matmul_precision() == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                  : CUBLAS_COMPUTE_32F_FAST_16BF;
    float af = (float)alpha, bf = (float)beta;
    const void *pa = dt == NB_F64 ? (const void *)&alpha : (const void *)&af;
    const void *pb = dt == NB_F64 ? (const void *)&beta : (const void *)&bf;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX ||
        batch > INT32_MAX)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: a GEMM dimension above cuBLAS's int range", slot);
    // column-major: C^T [n, m] = op(B)^T [n, k] op(A)^T [k, m]
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)(k ? k : 1), pa, B, t,
        (int)(ldb ? ldb : 1), sB, A, t, (int)(lda ? lda : 1), sA, pb, C, tc, (int)ldc, sC, (int)batch, ct,
        CUBLAS_GEMM_DEFAULT);
    count_launch();
    if (s != CUBLAS_STATUS_SUCCESS)
        return nb_set_error(s == CUBLAS_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                            "%s: cublasGemmStridedBatchedEx failed: %s (m=%lld n=%lld k=%lld batch=%lld)",
                            slot, cublas_text(s), (long long)m, (long long)n, (long long)k, (long long)batch);
    return NB_OK;
}

nb_status gemm_rm(nb_backend *be, const char *slot, nb_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  double alpha, const void *A, int64_t lda, int64_t sA, const void *B, int64_t ldb, int64_t sB,
                  double beta, void *C, int64_t ldc, int64_t sC, int64_t batch) {
    return gemm_rm_ex(be, slot, dt, dt, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}

// C = beta C when k == 0 (beta 0 writes zeros, even over NaN).
template <typename T> __global__ void k_scale(T *c, int64_t n, T beta) {
    NBC_GRID_STRIDE(i, n) c[i] = beta == (T)0 ? (T)0 : beta * c[i];
}
template <typename H> __global__ void k_scale16(H *c, int64_t n, float beta) {
    NBC_GRID_STRIDE(i, n) c[i] = Traits<H>::store(beta == 0.f ? 0.f : beta * Traits<H>::load(c[i]));
}

// A matrix operand [r, c] with element strides (sr, sc): as row-major with
// a leading dimension, plain or transposed; false when neither dim has a
// unit stride.
static bool layout(int64_t r, int64_t c, int64_t sr, int64_t sc, bool *trans, int64_t *ld) {
    if (sc == 1 || c == 1) { // rows of c contiguous elements
        *trans = false;
        *ld = r == 1 ? (c > 0 ? c : 1) : (sr >= c ? sr : -1);
        if (*ld >= 0) return true;
    }
    if (sr == 1 || r == 1) { // stored as [c, r]: the transpose
        *trans = true;
        *ld = c == 1 ? (r > 0 ? r : 1) : (sc >= r ? sc : -1);
        if (*ld >= 0) return true;
    }
    return false;
}

// ---- cuBLASLt GEMMs with an epilogue: the bias (addmm), the bias gradient (matmul_bgrad) --

// A plan per problem (device, dtype, precision, layouts, alignments): the
// descriptors and the algorithm cuBLASLt's heuristic picked, made once, so
// an eager call costs one cublasLtMatmul. With its own workspace a
// cublasLtMatmul gives the same bits run to run (cuBLAS's reproducibility
// rule), so one plan per problem keeps results deterministic.
struct LtKey {
    int dev, dt, dt_c, prec, ta, tb, epi; // dt: a's and b's dtype, dt_c: c's (and the bias's); epi: an epilogue
    int64_t m, n, k, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c; // bytes, at most 256: algorithms needing more are excluded
};
struct LtPlan {
    LtKey key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    bool none; // cuBLASLt has no algorithm for the key (kept so the heuristic runs once)
};
constexpr int LT_PLANS = 256;
constexpr size_t LT_WORKSPACE = (size_t)32 << 20;
static LtPlan lt_plans[LT_PLANS];
static int n_lt_plans;
// One workspace per (device, stream), as PyTorch keeps them: two streams
// running split-K GEMMs at once through one workspace overwrite each
// other's partial sums. Made on a stream's first eager use and kept for
// the process (so a graph that captured one can always replay it).
constexpr int LT_STREAMS = 64;
struct LtWorkspace {
    cudaStream_t stream;
    void *ws;
};
static LtWorkspace lt_ws[NB_MAX_DEVICES][LT_STREAMS];
static int n_lt_ws[NB_MAX_DEVICES];
static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;

// The workspace of stream s on device dev (lt_lock held), made on first use
// (also inside a capture: cudaMalloc is not a stream operation, and the
// capture is relaxed, as the caching allocator relies on), so a stream
// gives the same bits eager and replayed; NULL when none can be made (the
// caller takes the path without cuBLASLt).
static void *lt_workspace(int dev, cudaStream_t s) {
    for (int i = 0; i < n_lt_ws[dev]; i++)
        if (lt_ws[dev][i].stream == s) return lt_ws[dev][i].ws;
    if (n_lt_ws[dev] == LT_STREAMS) return nullptr; /* more streams than nabla makes (16 per device) */
    void *ws = nullptr;
    if (cudaMalloc(&ws, LT_WORKSPACE) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    lt_ws[dev][n_lt_ws[dev]++] = LtWorkspace{s, ws};
    return ws;
}

static void lt_plan_free(LtPlan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

// The plan for key (lt_lock held), or NULL when cuBLASLt has no algorithm
// for it (the caller falls back to cuBLAS).
static LtPlan *lt_plan(nb_backend *be, const LtKey &key) {
    for (int i = 0; i < n_lt_plans; i++)
        if (!memcmp(&lt_plans[i].key, &key, sizeof key)) return lt_plans[i].none ? nullptr : &lt_plans[i];
    if (n_lt_plans == LT_PLANS) return nullptr;
    LtPlan p;
    memset(&p, 0, sizeof p);
    p.key = key;
    nb_dtype dt = (nb_dtype)key.dt;
    cudaDataType_t t = dt == NB_BF16 ? CUDA_R_16BF : dt == NB_F16 ? CUDA_R_16F : CUDA_R_32F;
    cudaDataType_t tc = key.dt_c == key.dt ? t : CUDA_R_32F; // a float32 D (and bias) from 16-bit operands
    cublasComputeType_t ct = dt != NB_F32    ? CUBLAS_COMPUTE_32F
                             : key.prec == 0 ? CUBLAS_COMPUTE_32F
                             : key.prec == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                             : CUBLAS_COMPUTE_32F_FAST_16BF;
    // column-major: D^T [n, m] = op(B)^T op(A)^T, as gemm_rm
    cublasOperation_t opa = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)key.epi;
    size_t ws = LT_WORKSPACE;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t hs = CUBLAS_STATUS_NOT_INITIALIZED; // the heuristic's status (not reached: a setup failure)
    bool ok = cublasLtMatmulDescCreate(&p.op, ct, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) == CUBLAS_STATUS_SUCCESS &&
              // the bias (gradient) in D's type, stated rather than left to the default
              cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &tc, sizeof tc) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.la, t, key.tb ? key.k : key.n, key.tb ? key.n : key.k, key.ldb) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.lb, t, key.ta ? key.m : key.k, key.ta ? key.k : key.m, key.lda) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.lc, tc, key.n, key.m, key.ldc) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
                  CUBLAS_STATUS_SUCCESS &&
              // cuBLASLt's A is our b, its B our a (the column-major view)
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_b,
                                                   sizeof key.align_b) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_a,
                                                   sizeof key.align_a) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_c,
                                                   sizeof key.align_c) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_c,
                                                   sizeof key.align_c) == CUBLAS_STATUS_SUCCESS &&
              (hs = cublasLtMatmulAlgoGetHeuristic(nb_cuda_cublaslt(be), p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &res,
                                                   &found)) == CUBLAS_STATUS_SUCCESS &&
              found > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        lt_plan_free(&p);
        // remembered only when the heuristic itself had no algorithm, not
        // after a failed setup (an allocation failure may pass)
        if (hs == CUBLAS_STATUS_SUCCESS || hs == CUBLAS_STATUS_NOT_SUPPORTED) {
            p.key = key, p.none = true;
            lt_plans[n_lt_plans++] = p;
        }
        return nullptr;
    }
    p.algo = res.algo;
    lt_plans[n_lt_plans] = p;
    return &lt_plans[n_lt_plans++];
}

// The alignment of p in bytes, at most 256.
static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 1;
    while (al < 256 && a % (2 * al) == 0) al *= 2;
    return al;
}

// c = a b with epilogue epi through cuBLASLt: CUBLASLT_EPILOGUE_BIAS adds
// bias [n] to every row; CUBLASLT_EPILOGUE_BGRADB writes bias [m] = a's
// row sums (cuBLASLt's B is our a: its k-sums per column of D^T),
// CUBLASLT_EPILOGUE_BGRADA bias [n] = b's column sums (its A is our b:
// the k-sums per row of D^T), in c's dtype (dt_c: dt, or float32 for
// 16-bit dt). false (nothing enqueued, no
// error) where it is not taken:
// float64; float32 under the "medium" precision for the bias gradient
// (bfloat16 products: whether its sums see rounded inputs is not
// documented; under "high" they are float32 sums, tested); float32 in full
// precision for the bias, where cuBLAS's GEMM
// measured faster (mlp 0.23 against 0.37 ms a step on the H100, in a build
// whose plans also excluded split-K); a dimension past int range; a bias
// not 256-byte aligned; no workspace (more streams than the table holds,
// or out of memory); or no algorithm.
static bool lt_matmul(nb_backend *be, cublasLtEpilogue_t epi, nb_dtype dt, nb_dtype dt_c, bool ta, bool tb, int64_t m,
                      int64_t n, int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb, void *C,
                      int64_t ldc, const void *bias, nb_status *st) {
    const bool bgrad = epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
    if (dt == NB_F64 || (epi == CUBLASLT_EPILOGUE_BIAS && dt == NB_F32 && nb_float32_matmul_precision() == 0) ||
        (bgrad && dt == NB_F32 && nb_float32_matmul_precision() > 1) || k == 0 ||
        align_of(bias) < 256)
        return false;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
        return false;
    int dev = device_of(be);
    LtKey key;
    memset(&key, 0, sizeof key); // padding compared by memcmp
    key.dev = dev, key.dt = (int)dt, key.dt_c = (int)dt_c, key.prec = dt == NB_F32 ? nb_float32_matmul_precision() : 0;
    key.ta = ta, key.tb = tb, key.epi = (int)epi, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb;
    key.ldc = ldc;
    key.align_a = align_of(A), key.align_b = align_of(B), key.align_c = align_of(C);
    cudaStream_t stream = stream_of(be);
    pthread_mutex_lock(&lt_lock);
    void *ws = lt_workspace(dev, stream);
    LtPlan *p = ws ? lt_plan(be, key) : nullptr;
    if (!p) {
        pthread_mutex_unlock(&lt_lock);
        return false;
    }
    float one = 1.f, zero = 0.f;
    cublasStatus_t s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(nb_cuda_cublaslt(be), p->op, &one, B, p->la, A, p->lb, &zero, C, p->lc, C, p->lc, &p->algo,
                           ws, LT_WORKSPACE, stream);
    pthread_mutex_unlock(&lt_lock);
    count_launch();
    *st = s == CUBLAS_STATUS_SUCCESS
              ? NB_OK
              : nb_set_error(s == CUBLAS_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                             "%s: cublasLtMatmul failed: %s (m=%lld n=%lld k=%lld)",
                             epi == CUBLASLT_EPILOGUE_BIAS    ? "addmm"
                             : epi == CUBLASLT_EPILOGUE_BGRADB ? "matmul_bgrad"
                                                               : "matmul_bgrad_b",
                             cublas_text(s), (long long)m,
                             (long long)n, (long long)k);
    return true;
}

// ---- unaligned problems --------------------------------------------------------------------

// A large GEMM with a dimension that is not a multiple of 8 or rows that are
// not 16-byte aligned (a vocabulary of 30522) gets cuBLAS's narrow-load
// kernels: bert-base's MLM head ran at about 180 TFLOP/s in bf16 on an H200,
// near 1 ms per product. Such a problem runs on zero-padded copies instead
// (every dim rounded up to 8, rows 16-byte aligned: the zeros add nothing
// to any sum), C computed into padded scratch and its [m, n] part copied
// out. The copies are worth it where the tensor cores are (H100, bench_bert,
// ms a step with / without padding): 16-bit from 2 GFLOP a product (bert
// amp 4.27 / 4.72, bert-base amp 18.6 / 23.5); TF32 only for large products
// (bert-base 29.2 / 29.8 with 193 GFLOP ones, but bert 5.06 / 4.79 with 24
// GFLOP ones, where copying the [30522, 768] weight each time costs more
// than the faster kernel gains); never for float32 in full precision, whose
// FFMA kernels gain nothing from it (bert 9.24 / 8.72). The "medium"
// precision (bf16 products of float32 data) takes TF32's rule, unmeasured.
constexpr double PAD_MIN_FLOP = 2e9, PAD_MIN_FLOP_TF32 = 1e11;

struct Padded {
    Scratch buf;
    nb_kview v;
};

static int64_t up8(int64_t x) { return (x + 7) / 8 * 8; }

// x [R, C] (2-D, a unit stride in one dim) as a zero-padded dense copy
// [R8, C8] in the same orientation; with fill, x's values and zeros in the
// padding only (a memset of the whole buffer was half a gigabyte a GEMM for
// bert-base's logits). Without fill the buffer is left as allocated: for a
// GEMM result with beta 0, which writes every element of it.
static nb_status pad_mat(nb_backend *be, const nb_kview *x, int64_t R8, int64_t C8, Padded *p, bool fill) {
    size_t es = nb_dtype_size(x->dtype);
    int64_t R = x->shape[0], C = x->shape[1], ld;
    bool trans;
    if (!layout(R, C, x->strides[0], x->strides[1], &trans, &ld))
        return nb_set_error(NB_ERR_INVALID_ARG, "matmul: an operand has no unit stride in its matrix dims");
    bool rows = !trans; // row-major: rows of C contiguous elements
    if (!p->buf.alloc(be, es * (size_t)(R8 * C8))) return nb_last_status();
    cudaStream_t s = stream_of(be);
    p->v = *x;
    p->v.data = p->buf.ptr, p->v.shape[0] = R8, p->v.shape[1] = C8;
    if (rows) p->v.strides[0] = C8, p->v.strides[1] = 1;
    else p->v.strides[0] = 1, p->v.strides[1] = R8;
    if (!fill) return NB_OK;
    // stored as cnt8 lines of len8 elements, x's values in the first len of the first cnt
    int64_t len = rows ? C : R, cnt = rows ? R : C, len8 = rows ? C8 : R8, cnt8 = rows ? R8 : C8;
    char *buf = (char *)p->buf.ptr;
    if (len8 > len && cnt > 0)
        NBC_TRY("matmul", cudaMemset2DAsync(buf + (size_t)len * es, (size_t)len8 * es, 0, (size_t)(len8 - len) * es,
                                            (size_t)cnt, s));
    if (cnt8 > cnt)
        NBC_TRY("matmul", cudaMemsetAsync(buf + (size_t)(cnt * len8) * es, 0, (size_t)((cnt8 - cnt) * len8) * es, s));
    if (len > 0 && cnt > 0)
        NBC_TRY("matmul", cudaMemcpy2DAsync(buf, (size_t)len8 * es, x->data, (size_t)ld * es, (size_t)len * es,
                                            (size_t)cnt, cudaMemcpyDeviceToDevice, s));
    return NB_OK;
}

// c's [m, n] part of a padded result (row-major, rows of C8).
static nb_status unpad_mat(nb_backend *be, const nb_kview *c, const Padded &p) {
    size_t es = nb_dtype_size(c->dtype);
    int64_t m = c->shape[0], n = c->shape[1];
    if (m == 0 || n == 0) return NB_OK;
    NBC_TRY("matmul", cudaMemcpy2DAsync(c->data, (size_t)(m > 1 ? c->strides[0] : n) * es, p.v.data,
                                        (size_t)p.v.strides[0] * es, (size_t)n * es, (size_t)m,
                                        cudaMemcpyDeviceToDevice, stream_of(be)));
    return NB_OK;
}

static bool rows_unaligned(const nb_kview *x) {
    bool trans;
    int64_t ld;
    if (!layout(x->shape[0], x->shape[1], x->strides[0], x->strides[1], &trans, &ld)) return false;
    return (trans ? x->shape[1] : x->shape[0]) > 1 && ((size_t)ld * nb_dtype_size(x->dtype)) % 16 != 0;
}

// Whether c = a b (2-D, c [m, n] row-major) is worth padding: large (above),
// not float64, and a dim off a multiple of 8 or some operand's rows unaligned.
// NB_CUDA_GEMM_PAD=0 turns padding off (for comparisons).
static bool pad_worth(const nb_kview *c, const nb_kview *a, const nb_kview *b) {
    static const bool off = [] {
        const char *e = getenv("NB_CUDA_GEMM_PAD");
        return e && !strcmp(e, "0");
    }();
    if (off || c->ndim != 2 || a->ndim != 2 || b->ndim != 2 || a->dtype == NB_F64) return false;
    bool f32 = a->dtype == NB_F32;
    if (f32 && nb_float32_matmul_precision() == 0) return false;
    int64_t m = c->shape[0], n = c->shape[1], k = a->shape[1];
    if (2.0 * (double)m * (double)n * (double)k < (f32 ? PAD_MIN_FLOP_TF32 : PAD_MIN_FLOP)) return false;
    return m % 8 || n % 8 || k % 8 || rows_unaligned(a) || rows_unaligned(b) || rows_unaligned(c);
}

// ---- small-m products of 16-bit operands (decoding's GEMV) --------------------------------
//
// c [m, n] = alpha a [m, k] w^T (+ bias) with w stored [n, k] (a Linear's
// weight), for m <= GV_MAXM rows of bfloat16/float16: cuBLAS ran these at
// about a quarter of HBM bandwidth (bench_llama_infer's bf16 decode
// profile: 113 products a token at 1.1 TB/s). Here `split` warps of a block
// take one row of w, each a contiguous slice of k, its lanes 16-byte
// vectors of the slice (GV_UNROLL in flight), every row of a against it;
// float32 sums reduced across the warp, then across the slices in slice
// order in shared memory (deterministic for a shape), rounded once into c.
// Short weights (few rows, long k: a down projection) are split so the
// grid has enough warps to keep HBM busy. The weight is streamed past L1
// (__ldcs); a's rows, read by every warp, stay cached.
constexpr int GV_MAXM = 4, GV_WARPS = 8, GV_UNROLL = 4;

template <typename T, int M>
__global__ void __launch_bounds__(GV_WARPS * 32)
    k_gemv16(const T *a, int64_t lda, const T *w, int64_t ldw, T *c, int64_t ldc, const T *bias, int64_t n,
             int64_t k, int split, float alpha) {
    __shared__ float part[GV_WARPS][M];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, slice = warp % split;
    const int64_t col = (int64_t)blockIdx.x * (GV_WARPS / split) + warp / split;
    const int64_t per = (k / 8 + split - 1) / split * 8, e1 = min(k, (slice + 1) * per);
    float acc[M] = {};
    if (col < n) {
        const T *wr = w + col * ldw;
        int64_t e = slice * per + lane * 8;
        for (; e + (GV_UNROLL - 1) * 256 < e1; e += GV_UNROLL * 256) { // GV_UNROLL loads, then their sums
            uint4 wv[GV_UNROLL];
#pragma unroll
            for (int u = 0; u < GV_UNROLL; u++) wv[u] = __ldcs((const uint4 *)(wr + e + u * 256));
#pragma unroll
            for (int u = 0; u < GV_UNROLL; u++) {
                float wf[8];
                f8_of<T>(wv[u], wf);
#pragma unroll
                for (int r = 0; r < M; r++) {
                    float xf[8];
                    f8_of<T>(__ldg((const uint4 *)(a + r * lda + e + u * 256)), xf);
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[r] += wf[j] * xf[j];
                }
            }
        }
        for (; e < e1; e += 256) {
            float wf[8];
            f8_of<T>(__ldcs((const uint4 *)(wr + e)), wf);
#pragma unroll
            for (int r = 0; r < M; r++) {
                float xf[8];
                load8(a + r * lda + e, xf);
#pragma unroll
                for (int j = 0; j < 8; j++) acc[r] += wf[j] * xf[j];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < M; r++) {
        float v = acc[r];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
    if (lane == 0 && slice == 0 && col < n)
#pragma unroll
        for (int r = 0; r < M; r++) {
            float v = part[warp][r];
            for (int q = 1; q < split; q++) v += part[warp + q][r];
            c[r * ldc + col] = Traits<T>::store(alpha * v + (bias ? Traits<T>::load(bias[col]) : 0.f));
        }
}

static bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// c = alpha a b (+ bias) through k_gemv16 where it applies (2-D views: c
// row-major, a with rows of k contiguous elements, b = w^T for w [n, k]
// with contiguous rows; k a multiple of 8 and rows 16-byte aligned) and
// says whether it ran; *st the launch's status.
static bool gemv16(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, const void *bias,
                   double alpha, nb_status *st) {
    const nb_dtype dt = c->dtype;
    if ((dt != NB_BF16 && dt != NB_F16) || c->ndim != 2 || a->ndim != 2 || b->ndim != 2) return false;
    const int64_t m = c->shape[0], n = c->shape[1], k = a->shape[1];
    const int64_t lda = m > 1 ? a->strides[0] : k, ldw = n > 1 ? b->strides[1] : k, ldc = m > 1 ? c->strides[0] : n;
    if (m < 1 || m > GV_MAXM || n < 1 || k < 8 || k % 8 || (k > 1 && a->strides[1] != 1) ||
        (k > 1 && b->strides[0] != 1) || (n > 1 && c->strides[1] != 1) || lda % 8 || ldw % 8 || lda < k ||
        ldw < k || ldc < n || !al16(a->data) || !al16(b->data) || n / GV_WARPS >= INT32_MAX)
        return false;
    // warps per row: enough for about 8192 in the grid (64 per SM of an H100/H200), slices of >= 1024
    // elements (each lane one GV_UNROLL batch of loads at least)
    int split = 1;
    while (split < GV_WARPS && n * split < 8192 && k / (2 * split) >= 1024) split *= 2;
    const int64_t rows_per_block = GV_WARPS / split;
    const unsigned blocks = (unsigned)((n + rows_per_block - 1) / rows_per_block);
    cudaStream_t s = stream_of(be);
    auto go = [&](auto tag, auto mt) {
        using T = decltype(tag);
        k_gemv16<T, decltype(mt)::value><<<blocks, GV_WARPS * 32, 0, s>>>((const T *)a->data, lda,
                                                                           (const T *)b->data, ldw, (T *)c->data, ldc,
                                                                           (const T *)bias, n, k, split, (float)alpha);
        *st = launched("matmul");
        return true;
    };
    auto by_m = [&](auto tag) {
        switch (m) {
        case 1: return go(tag, std::integral_constant<int, 1>());
        case 2: return go(tag, std::integral_constant<int, 2>());
        case 3: return go(tag, std::integral_constant<int, 3>());
        default: return go(tag, std::integral_constant<int, 4>());
        }
    };
    return dt == NB_BF16 ? by_m(__nv_bfloat16()) : by_m(__half());
}

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                    double alpha, double beta) {
    const char *slot = "matmul";
    const nb_dtype dt = c->dtype; // a's and b's too, or float32 from 16-bit operands (checked)
    int nd = c->ndim;
    // c: contiguous, or 2-D with a row stride of its own (a padded result, below; checked: backend/check/matmul.c)
    if (!contiguous(c) && a->shape[nd - 1] == 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "matmul: k == 0 needs a contiguous c");
    nb_status gst; // a few rows of 16-bit data: the GEMV kernel (before padding, which m < 8 would ask for)
    if (beta == 0 && gemv16(be, c, a, b, nullptr, alpha, &gst)) return gst;
    bool ta0, tb0; // the operands' layouts checked before any padded copy is made of them
    int64_t lda0, ldb0;
    if (pad_worth(c, a, b) &&
        layout(c->shape[0], a->shape[1], a->strides[0], a->strides[1], &ta0, &lda0) &&
        layout(a->shape[1], c->shape[1], b->strides[0], b->strides[1], &tb0, &ldb0)) {
        int64_t m8 = up8(c->shape[0]), n8 = up8(c->shape[1]), k8 = up8(a->shape[1]);
        Padded pa, pb, pc;
        nb_status st = pad_mat(be, a, m8, k8, &pa, true);
        if (!st) st = pad_mat(be, b, k8, n8, &pb, true);
        if (!st) st = pad_mat(be, c, m8, n8, &pc, beta != 0);
        if (!st && !(pc.v.strides[1] == 1)) // C is row-major: a column-major c is copied in as rows
            st = nb_set_error(NB_ERR_INVALID_ARG, "matmul: c must have unit column stride");
        if (!st) st = nb_cuda_matmul(be, &pc.v, &pa.v, &pb.v, alpha, beta);
        return st ? st : unpad_mat(be, c, pc);
    }
    int64_t m = c->shape[nd - 2], n = c->shape[nd - 1], k = a->shape[nd - 1], total = numel(c);
    if (total == 0) return NB_OK;
    int64_t batches = total / (m * n);
    if (k == 0 && dt == NB_BF16) {
        k_scale16<__nv_bfloat16><<<blocks_for(total), THREADS, 0, stream_of(be)>>>((__nv_bfloat16 *)c->data, total,
                                                                                  (float)beta);
        return launched(slot);
    }
    if (k == 0 && dt == NB_F16) {
        k_scale16<__half><<<blocks_for(total), THREADS, 0, stream_of(be)>>>((__half *)c->data, total, (float)beta);
        return launched(slot);
    }
    if (k == 0)
        return dispatch_float(slot, c->dtype, [&](auto t) {
            using T = decltype(t);
            k_scale<T><<<blocks_for(total), THREADS, 0, stream_of(be)>>>((T *)c->data, total, (T)beta);
            return launched(slot);
        });
    bool ta, tb;
    int64_t lda, ldb;
    if (!layout(m, k, a->strides[nd - 2], a->strides[nd - 1], &ta, &lda) ||
        !layout(k, n, b->strides[nd - 2], b->strides[nd - 1], &tb, &ldb))
        return nb_set_error(NB_ERR_INVALID_ARG, "matmul: an operand has no unit stride in its matrix dims");
    // Batch dims: the last one runs as cuBLAS's strided batch; the others
    // (rarely more than one) loop on the host.
    int64_t inner = nd > 2 ? c->shape[nd - 3] : 1;
    int64_t sa = nd > 2 ? a->strides[nd - 3] : 0, sb = nd > 2 ? b->strides[nd - 3] : 0;
    int64_t outer = batches / (inner ? inner : 1);
    size_t es = nb_dtype_size(a->dtype), es_c = nb_dtype_size(c->dtype);
    for (int64_t o = 0; o < outer; o++) {
        int64_t offa = 0, offb = 0, rem = o;
        for (int d = nd - 4; d >= 0; d--) {
            int64_t i = rem % c->shape[d];
            rem /= c->shape[d];
            offa += i * a->strides[d];
            offb += i * b->strides[d];
        }
        int64_t ldc = nd == 2 && m > 1 ? c->strides[0] : n;
        nb_status st = gemm_rm_ex(be, slot, a->dtype, c->dtype, ta, tb, m, n, k, alpha,
                                  (const char *)a->data + offa * es, lda, sa, (const char *)b->data + offb * es, ldb,
                                  sb, beta, (char *)c->data + o * inner * m * n * es_c, ldc, m * n, inner);
        if (st) return st;
    }
    return NB_OK;
}

extern "C" nb_status nb_cuda_addmm(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                   const nb_kview *bias) {
    const nb_dtype dt = c->dtype; // the views checked: backend/check/matmul.c
    int64_t m = c->shape[0], n = c->shape[1], k = a->shape[1];
    bool ta, tb;
    int64_t lda, ldb;
    nb_status st = NB_OK;
    if ((n == 1 || bias->strides[0] == 1) && gemv16(be, c, a, b, bias->data, 1.0, &st)) return st;
    bool rows_c = (n <= 1 || c->strides[1] == 1) && (m <= 1 || c->strides[0] >= n);
    if (rows_c && layout(m, k, a->strides[0], a->strides[1], &ta, &lda) &&
        layout(k, n, b->strides[0], b->strides[1], &tb, &ldb) && pad_worth(c, a, b)) {
        int64_t m8 = up8(m), n8 = up8(n), k8 = up8(k);
        Padded pa, pb, pc, pbias;
        nb_kview b2 = *bias; // the bias as a [1, n] row, padded to [1, n8]
        b2.ndim = 2, b2.shape[0] = 1, b2.shape[1] = n, b2.strides[0] = n, b2.strides[1] = 1;
        st = pad_mat(be, a, m8, k8, &pa, true);
        if (!st) st = pad_mat(be, b, k8, n8, &pb, true);
        if (!st) st = pad_mat(be, c, m8, n8, &pc, false); // written whole: the BIAS GEMM or the bias copy
        if (!st) st = pad_mat(be, &b2, 1, n8, &pbias, true);
        if (!st) {
            nb_kview vb = pbias.v;
            vb.ndim = 1, vb.shape[0] = n8, vb.strides[0] = 1;
            st = nb_cuda_addmm(be, &pc.v, &pa.v, &pb.v, &vb);
        }
        return st ? st : unpad_mat(be, c, pc);
    }
    int64_t ldc = m > 1 ? c->strides[0] : n;
    if (m > 0 && n > 0 && rows_c &&
        layout(m, k, a->strides[0], a->strides[1], &ta, &lda) && layout(k, n, b->strides[0], b->strides[1], &tb, &ldb) &&
        lt_matmul(be, CUBLASLT_EPILOGUE_BIAS, dt, dt, ta, tb, m, n, k, a->data, lda, b->data, ldb, c->data, ldc,
                  bias->data, &st))
        return st;
    // elsewhere: the bias broadcast into c, then c = a b + c
    nb_kview vb = *bias;
    vb.ndim = 2, vb.shape[0] = m, vb.shape[1] = n, vb.strides[0] = 0, vb.strides[1] = bias->strides[0];
    if ((st = nb_cuda_copy_into(be, c, &vb))) return st;
    return nb_cuda_matmul(be, c, a, b, 1.0, 1.0);
}

// c = a b and a bias gradient in one call: epi BGRADB sums = a's row sums
// [m] (linear's weight and bias gradients, a = g^T), BGRADA sums = b's
// column sums [n] (linear with a transposed weight, b = g). One cuBLASLt
// GEMM with that epilogue where it is taken (lt_matmul; not for the padded
// large unaligned problems), else the GEMM and a reduction.
// NB_CUDA_LT_BGRAD=0 forces the latter (for comparisons).
static nb_status matmul_bias_grad(nb_backend *be, cublasLtEpilogue_t epi, const nb_kview *c, const nb_kview *a,
                                  const nb_kview *b, const nb_kview *sums) {
    const nb_dtype dt = a->dtype, dt_c = c->dtype; // the views checked: backend/check/matmul.c
    static const bool off = [] {
        const char *e = getenv("NB_CUDA_LT_BGRAD");
        return e && !strcmp(e, "0");
    }();
    int64_t m = c->shape[0], n = c->shape[1], k = a->shape[1];
    bool ta, tb;
    int64_t lda, ldb;
    nb_status st = NB_OK;
    bool rows_c = (n <= 1 || c->strides[1] == 1) && (m <= 1 || c->strides[0] >= n);
    int64_t ldc = m > 1 ? c->strides[0] : n;
    if (!off && m > 0 && n > 0 && rows_c && !pad_worth(c, a, b) &&
        layout(m, k, a->strides[0], a->strides[1], &ta, &lda) && layout(k, n, b->strides[0], b->strides[1], &tb, &ldb) &&
        lt_matmul(be, epi, dt, dt_c, ta, tb, m, n, k, a->data, lda, b->data, ldb, c->data, ldc, sums->data, &st))
        return st;
    if ((st = nb_cuda_matmul(be, c, a, b, 1.0, 0.0))) return st;
    nb_kview out = *sums; // [m, 1]: the sums over a's dim 1; [1, n]: over b's dim 0
    out.ndim = 2;
    if (epi == CUBLASLT_EPILOGUE_BGRADB) out.shape[1] = 1, out.strides[0] = 1, out.strides[1] = 1;
    else out.shape[0] = 1, out.shape[1] = n, out.strides[0] = n, out.strides[1] = 1;
    return nb_cuda_reduce(be, NB_REDUCE_SUM, &out, epi == CUBLASLT_EPILOGUE_BGRADB ? a : b, 1.0);
}

extern "C" nb_status nb_cuda_matmul_bgrad(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                          const nb_kview *asum) {
    return matmul_bias_grad(be, CUBLASLT_EPILOGUE_BGRADB, c, a, b, asum);
}

extern "C" nb_status nb_cuda_matmul_bgrad_b(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                            const nb_kview *bsum) {
    return matmul_bias_grad(be, CUBLASLT_EPILOGUE_BGRADA, c, a, b, bsum);
}
