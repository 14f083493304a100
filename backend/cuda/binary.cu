// binary.cu - the binary slot on CUDA: out = a OP b for every nb_binary_op,
// with the CPU backend's dtypes and messages (backend/cpu/binary.c) and
// its formulas (nb_scalar_math.h, after PyTorch's BinaryOpsKernel.cpp): maximum/
// minimum propagate NaN, float floor division goes through fmod, remainder
// takes the divisor's sign, integer arithmetic wraps through the unsigned
// type, INT_MIN / -1 wraps, shifts out of range saturate, bool add/max are
// "or" and mul/min "and". An integer division by zero writes 0 and raises
// ERR_ZERO_DIV on the stream's error word (reported at the next sync point
// as "<op>: integer division by zero"). add/sub/mul/div in float32/float64
// have kernels of their own (the hot path: a bias or row broadcast runs
// vectorised without index division, elementwise.cuh); the other ops share
// one kernel per dtype that switches on the op. One thread per element:
// deterministic.
#include <math.h>
#include <type_traits>

#include "cuda_common.cuh"
#include "elementwise.cuh"
#include "nb_scalar_math.h"

namespace nbc {

// ---- the formulas: nb_scalar_math.h's; here only the division-by-zero rule --------

// The integer divisions write 0 for a zero divisor and raise ERR_ZERO_DIV.
template <typename T> __device__ __forceinline__ T bin_int(int op, T x, T y, int *err, int tag) {
    if (op < NB_BINARY_REMAINDER || op > NB_BINARY_DIV_FLOOR || op == NB_BINARY_ATAN2) {
        if constexpr (std::is_same<T, uint8_t>::value) return nb_sm_binary_u8(op, x, y);
        else return nb_sm_of<T>::binary(op, x, y);
    }
    if (y == 0) {
        raise(err, ERR_ZERO_DIV, tag);
        return 0;
    }
    if constexpr (std::is_same<T, uint8_t>::value) return nb_sm_binary_div_u8(op, x, y);
    else return nb_sm_of<T>::binary_div(op, x, y);
}

// OP >= 0: one op fixed at compile time; -1: op at run time. CMP: a
// comparison (bool out). err/tag: the error word and the op's tag (integer
// division ops only).
template <typename T, bool CMP, int OP> struct BinF {
    using In = T;
    using Out = typename std::conditional<CMP, bool, T>::type;
    static constexpr int NIN = 2;
    int op;
    int *err;
    int tag;
    __device__ __forceinline__ Out operator()(T x, T y) const {
        const int o = OP >= 0 ? OP : op;
        if constexpr (CMP) return NB_SM_COMPARE(o, x, y);
        else if constexpr (std::is_floating_point<T>::value) return nb_sm_of<T>::binary(o, x, y);
        else if constexpr (std::is_same<T, bool>::value) return nb_sm_binary_b8(o, x, y);
        else return bin_int<T>(o, x, y, err, tag);
    }
};

// ---- host ------------------------------------------------------------------------------


static bool is_compare(nb_binary_op op) { return op >= NB_BINARY_EQ && op <= NB_BINARY_LE; }
static bool is_int_division(nb_binary_op op, nb_dtype dt) {
    return !nb_dtype_is_float(dt) && op >= NB_BINARY_REMAINDER && op <= NB_BINARY_DIV_FLOOR &&
           op != NB_BINARY_ATAN2;
}

template <typename T> static nb_status bin_run(nb_backend *be, nb_binary_op op, const nb_kview *out,
                                              const nb_kview *a, const nb_kview *b) {
    const char *name = nb_binary_name(op);
    if (is_compare(op)) return ew_launch(be, name, BinF<T, true, -1>{op, nullptr, 0}, out, a, b);
    if constexpr (std::is_floating_point<T>::value) {
        switch (op) {
        case NB_BINARY_ADD: return ew_launch(be, name, BinF<T, false, NB_BINARY_ADD>{op, nullptr, 0}, out, a, b);
        case NB_BINARY_SUB: return ew_launch(be, name, BinF<T, false, NB_BINARY_SUB>{op, nullptr, 0}, out, a, b);
        case NB_BINARY_MUL: return ew_launch(be, name, BinF<T, false, NB_BINARY_MUL>{op, nullptr, 0}, out, a, b);
        case NB_BINARY_DIV: return ew_launch(be, name, BinF<T, false, NB_BINARY_DIV>{op, nullptr, 0}, out, a, b);
        default: break;
        }
    }
    int *err = nullptr, tag = 0;
    if (is_int_division(op, a->dtype)) err = err_word(be), tag = slot_tag(name);
    return ew_launch(be, name, BinF<T, false, -1>{op, err, tag}, out, a, b);
}

// bfloat16/float16: the float32 functors through Half16.
template <typename H> static nb_status bin_run16(nb_backend *be, nb_binary_op op, const nb_kview *out,
                                                const nb_kview *a, const nb_kview *b) {
    const char *name = nb_binary_name(op);
    if (is_compare(op)) return ew_launch(be, name, Half16<BinF<float, true, -1>, H>{{op, nullptr, 0}}, out, a, b);
    switch (op) {
    case NB_BINARY_ADD:
        return ew_launch(be, name, Half16<BinF<float, false, NB_BINARY_ADD>, H>{{op, nullptr, 0}}, out, a, b);
    case NB_BINARY_MUL:
        return ew_launch(be, name, Half16<BinF<float, false, NB_BINARY_MUL>, H>{{op, nullptr, 0}}, out, a, b);
    default: return ew_launch(be, name, Half16<BinF<float, false, -1>, H>{{op, nullptr, 0}}, out, a, b);
    }
}

} // namespace nbc

using namespace nbc;

// op, shapes and dtypes (the op's) checked: backend/check/binary.c.
extern "C" nb_status nb_cuda_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                                    const nb_kview *b) {
    switch (a->dtype) {
    case NB_BF16: return bin_run16<__nv_bfloat16>(be, op, out, a, b);
    case NB_F16: return bin_run16<__half>(be, op, out, a, b);
    case NB_F32: return bin_run<float>(be, op, out, a, b);
    case NB_F64: return bin_run<double>(be, op, out, a, b);
    case NB_I32: return bin_run<int32_t>(be, op, out, a, b);
    case NB_I64: return bin_run<int64_t>(be, op, out, a, b);
    case NB_U8: return bin_run<uint8_t>(be, op, out, a, b);
    case NB_I8: return bin_run<int8_t>(be, op, out, a, b);
    case NB_I16: return bin_run<int16_t>(be, op, out, a, b);
    default: return bin_run<bool>(be, op, out, a, b); // NB_BOOL
    }
}
