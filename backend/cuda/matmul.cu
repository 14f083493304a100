// matmul.cu - the matmul family on CUDA: the `matmul` slot (batched,
// broadcast batch dims, any operand with a unit stride in one of its matrix
// dims) and the row-major strided-batched GEMM helper other files use
// (attention), both through cuBLAS's cublasGemmStridedBatchedEx. float32
// computes in full float32 unless nb_set_float32_matmul_precision chose
// "high" (TF32 tensor cores) or "medium"; float64 in float64. cuBLAS gives
// the same bits run to run for a given problem and configuration.
#include <cublas_v2.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be);

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
nb_status gemm_rm(nb_backend *be, const char *slot, nb_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  double alpha, const void *A, int64_t lda, int64_t sA, const void *B, int64_t ldb, int64_t sB,
                  double beta, void *C, int64_t ldc, int64_t sC, int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return NB_OK;
    cublasHandle_t h = nb_cuda_cublas(be);
    // bfloat16/float16: 16-bit operands and result, float32 accumulation (PyTorch's bf16 matmul)
    cudaDataType_t t = dt == NB_F64 ? CUDA_R_64F : dt == NB_BF16 ? CUDA_R_16BF : dt == NB_F16 ? CUDA_R_16F : CUDA_R_32F;
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
        (int)(ldb ? ldb : 1), sB, A, t, (int)(lda ? lda : 1), sA, pb, C, t, (int)ldc, sC, (int)batch, ct,
        CUBLAS_GEMM_DEFAULT);
    count_launch();
    if (s != CUBLAS_STATUS_SUCCESS)
        return nb_set_error(NB_ERR_DEVICE, "%s: cublasGemmStridedBatchedEx failed: %s (m=%lld n=%lld k=%lld batch=%lld)",
                            slot, cublas_text(s), (long long)m, (long long)n, (long long)k, (long long)batch);
    return NB_OK;
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

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                                    double alpha, double beta) {
    const char *slot = "matmul";
    const nb_dtype dt = c->dtype;
    if ((dt != NB_F32 && dt != NB_F64 && dt != NB_BF16 && dt != NB_F16) || a->dtype != dt || b->dtype != dt)
        return nb_set_error(NB_ERR_DTYPE, "matmul: needs float operands of one dtype (a %s, b %s, c %s)",
                            nb_dtype_name(a->dtype), nb_dtype_name(b->dtype), nb_dtype_name(c->dtype));
    int nd = c->ndim;
    bool ok = nd >= 2 && a->ndim == nd && b->ndim == nd && a->shape[nd - 2] == c->shape[nd - 2] &&
              b->shape[nd - 1] == c->shape[nd - 1] && a->shape[nd - 1] == b->shape[nd - 2];
    for (int d = 0; d < nd - 2 && ok; d++) ok = a->shape[d] == c->shape[d] && b->shape[d] == c->shape[d];
    if (!ok) return nb_set_error(NB_ERR_SHAPE, "matmul: the operands' shapes do not fit c");
    if (!contiguous(c)) return nb_set_error(NB_ERR_INVALID_ARG, "matmul: c must be contiguous");
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
    size_t es = nb_dtype_size(c->dtype);
    for (int64_t o = 0; o < outer; o++) {
        int64_t offa = 0, offb = 0, rem = o;
        for (int d = nd - 4; d >= 0; d--) {
            int64_t i = rem % c->shape[d];
            rem /= c->shape[d];
            offa += i * a->strides[d];
            offb += i * b->strides[d];
        }
        nb_status st = gemm_rm(be, slot, c->dtype, ta, tb, m, n, k, alpha, (const char *)a->data + offa * es, lda, sa,
                               (const char *)b->data + offb * es, ldb, sb, beta, (char *)c->data + o * inner * m * n * es,
                               n, m * n, inner);
        if (st) return st;
    }
    return NB_OK;
}
