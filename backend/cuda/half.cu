// half.cu - float16/bfloat16 for the CUDA slots that have no 16-bit kernel
// of their own (reduce): the 16-bit operand is widened into a dense float32
// scratch copy by the copy kernel, the float32 kernel runs, and a 16-bit
// result is rounded back (as PyTorch, which reduces 16-bit tensors in
// float32). Elementwise ops and matmul have native 16-bit paths (unary.cu,
// binary.cu, matmul.cu).
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

namespace nbc {
namespace {

bool is16(nb_dtype dt) { return dt == NB_BF16 || dt == NB_F16; }

// A dense float32 view of src's shape in scratch; with fill, src's values.
nb_status widen(nb_backend *be, const nb_kview *src, nb_kview *w, Scratch &buf, bool fill) {
    *w = *src;
    w->dtype = NB_F32;
    int64_t s = 1;
    for (int d = src->ndim - 1; d >= 0; d--) w->strides[d] = s, s *= src->shape[d];
    if (!buf.alloc(be, sizeof(float) * (size_t)(s ? s : 1))) return nb_last_status();
    w->data = buf.ptr;
    return fill && s ? nb_cuda_copy_into(be, w, src) : NB_OK;
}

} // namespace
} // namespace nbc

using namespace nbc;

nb_status nb_cuda_reduce_any(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale) {
    if (!is16(x->dtype)) return nb_cuda_reduce(be, op, out, x, scale);
    Scratch bx, bo;
    nb_kview wx, wo;
    nb_status st = widen(be, x, &wx, bx, true);
    const bool out16 = is16(out->dtype);
    if (!st && out16) st = widen(be, out, &wo, bo, false);
    if (!st) st = nb_cuda_reduce(be, op, out16 ? &wo : out, &wx, scale);
    if (!st && out16 && numel(out)) st = nb_cuda_copy_into(be, out, &wo);
    return st;
}
