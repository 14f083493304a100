// binary.cu - the binary slot on CUDA: out = a OP b for every nb_binary_op,
// with the CPU backend's dtypes, formulas and messages
// (backend/cpu/binary.c, after PyTorch's BinaryOpsKernel.cpp): maximum/
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

namespace nbc {

// ---- scalar helpers (the CPU's h_* functions) ----------------------------------------

// PyTorch's remainder (the divisor's sign) and div_floor_floating.
template <typename T> __device__ __forceinline__ T f_rem(T a, T b) {
    T m = m_fmod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
template <typename T> __device__ __forceinline__ T f_fdiv(T a, T b) {
    if (b == 0) return a / b;
    T m = m_fmod(a, b), d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return m_copysign((T)0, a / b);
    T f = m_floor(d);
    return d - f > (T)0.5 ? f + 1 : f;
}

// Signed integers, b != 0: b == -1 is special (INT_MIN / -1 wraps).
template <typename T> __device__ __forceinline__ T s_tdiv(T a, T b) {
    using UT = typename std::make_unsigned<T>::type;
    return b == -1 ? (T)(UT(0) - (UT)a) : (T)(a / b);
}
template <typename T> __device__ __forceinline__ T s_fmod(T a, T b) { return b == -1 ? (T)0 : (T)(a % b); }
template <typename T> __device__ __forceinline__ T s_fdiv(T a, T b) {
    using UT = typename std::make_unsigned<T>::type;
    T q = s_tdiv(a, b), r = s_fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)((UT)q - 1) : q;
}
template <typename T> __device__ __forceinline__ T s_rem(T a, T b) {
    using UT = typename std::make_unsigned<T>::type;
    T r = s_fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)((UT)r + (UT)b) : r;
}
template <typename T> __device__ __forceinline__ T s_ipow(T a, T b) {
    using UT = typename std::make_unsigned<T>::type;
    if (b < 0) return a == 1 ? (T)1 : a == -1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0;
    UT r = 1, base = (UT)a;
    for (; b; b >>= 1, base *= base)
        if (b & 1) r *= base;
    return (T)r;
}
template <typename T> __device__ __forceinline__ T s_shl(T a, T b) {
    using UT = typename std::make_unsigned<T>::type;
    constexpr int BITS = 8 * sizeof(T);
    return (b < 0 || b >= BITS) ? (T)0 : (T)((UT)a << b);
}
template <typename T> __device__ __forceinline__ T s_shr(T a, T b) {
    constexpr int BITS = 8 * sizeof(T);
    return (b < 0 || b >= BITS - 1) ? (T)(a >> (BITS - 1)) : (T)(a >> b);
}
// uint8: floor division = truncation, remainder = fmod; shifts of 8 or more give 0.
__device__ __forceinline__ uint8_t u_ipow(uint8_t a, uint8_t b) {
    unsigned r = 1, base = a;
    for (; b; b >>= 1, base = (base * base) & 0xff)
        if (b & 1) r = (r * base) & 0xff;
    return (uint8_t)r;
}

// ---- per-dtype formulas -------------------------------------------------------------

template <typename T> __device__ __forceinline__ bool bin_cmp(int op, T x, T y) {
    switch (op) {
    case NB_BINARY_EQ: return x == y;
    case NB_BINARY_NE: return x != y;
    case NB_BINARY_GT: return x > y;
    case NB_BINARY_GE: return x >= y;
    case NB_BINARY_LT: return x < y;
    default: return x <= y; // NB_BINARY_LE
    }
}

template <typename T> __device__ __forceinline__ T bin_float(int op, T x, T y) {
    switch (op) {
    case NB_BINARY_ADD: return x + y;
    case NB_BINARY_SUB: return x - y;
    case NB_BINARY_MUL: return x * y;
    case NB_BINARY_DIV: return x / y;
    case NB_BINARY_POW: return m_pow(x, y);
    case NB_BINARY_MAXIMUM: return x != x || x > y ? x : y; // NaN wins
    case NB_BINARY_MINIMUM: return x != x || x < y ? x : y;
    case NB_BINARY_REMAINDER: return f_rem(x, y);
    case NB_BINARY_FMOD: return m_fmod(x, y);
    case NB_BINARY_ATAN2: return m_atan2(x, y);
    case NB_BINARY_DIV_TRUNC: return m_trunc(x / y);
    default: return f_fdiv(x, y); // NB_BINARY_DIV_FLOOR
    }
}

template <typename T> __device__ __forceinline__ T bin_signed(int op, T x, T y, int *err, int tag) {
    using UT = typename std::make_unsigned<T>::type;
    switch (op) {
    case NB_BINARY_ADD: return (T)((UT)x + (UT)y);
    case NB_BINARY_SUB: return (T)((UT)x - (UT)y);
    case NB_BINARY_MUL: return (T)((UT)x * (UT)y);
    case NB_BINARY_POW: return s_ipow(x, y);
    case NB_BINARY_MAXIMUM: return x > y ? x : y;
    case NB_BINARY_MINIMUM: return x < y ? x : y;
    case NB_BINARY_BITWISE_AND: return x & y;
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    case NB_BINARY_LSHIFT: return s_shl(x, y);
    case NB_BINARY_RSHIFT: return s_shr(x, y);
    default: break;
    }
    if (y == 0) { // the division ops: 0 written, the error word raised
        raise(err, ERR_ZERO_DIV, tag);
        return 0;
    }
    switch (op) {
    case NB_BINARY_REMAINDER: return s_rem(x, y);
    case NB_BINARY_FMOD: return s_fmod(x, y);
    case NB_BINARY_DIV_TRUNC: return s_tdiv(x, y);
    default: return s_fdiv(x, y); // NB_BINARY_DIV_FLOOR
    }
}

__device__ __forceinline__ uint8_t bin_u8(int op, uint8_t x, uint8_t y, int *err, int tag) {
    switch (op) {
    case NB_BINARY_ADD: return (uint8_t)(x + y);
    case NB_BINARY_SUB: return (uint8_t)(x - y);
    case NB_BINARY_MUL: return (uint8_t)(x * y);
    case NB_BINARY_POW: return u_ipow(x, y);
    case NB_BINARY_MAXIMUM: return x > y ? x : y;
    case NB_BINARY_MINIMUM: return x < y ? x : y;
    case NB_BINARY_BITWISE_AND: return x & y;
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    case NB_BINARY_LSHIFT: return y >= 8 ? (uint8_t)0 : (uint8_t)(x << y);
    case NB_BINARY_RSHIFT: return y >= 8 ? (uint8_t)0 : (uint8_t)(x >> y);
    default: break;
    }
    if (y == 0) {
        raise(err, ERR_ZERO_DIV, tag);
        return 0;
    }
    // remainder and fmod are x % y; both floor and trunc division are x / y
    return op == NB_BINARY_REMAINDER || op == NB_BINARY_FMOD ? (uint8_t)(x % y) : (uint8_t)(x / y);
}

__device__ __forceinline__ bool bin_bool(int op, bool x, bool y) {
    switch (op) {
    case NB_BINARY_ADD:
    case NB_BINARY_MAXIMUM:
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    default: return x & y; // mul, minimum, bitwise_and
    }
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
        if constexpr (CMP) return bin_cmp<T>(o, x, y);
        else if constexpr (std::is_floating_point<T>::value) return bin_float<T>(o, x, y);
        else if constexpr (std::is_same<T, bool>::value) return bin_bool(o, x, y);
        else if constexpr (std::is_same<T, uint8_t>::value) return bin_u8(o, x, y, err, tag);
        else return bin_signed<T>(o, x, y, err, tag);
    }
};

// ---- host ------------------------------------------------------------------------------

static const char *const bin_names[NB_BINARY_OP_COUNT] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "gt", "ge", "lt", "le",
    "remainder", "fmod", "atan2", "div", "div", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift"};
static_assert(NB_BINARY_RSHIFT == NB_BINARY_OP_COUNT - 1 && NB_BINARY_OP_COUNT == 23,
              "bin_names must name every binary op");

static bool is_compare(nb_binary_op op) { return op >= NB_BINARY_EQ && op <= NB_BINARY_LE; }
static bool is_int_division(nb_binary_op op, nb_dtype dt) {
    return !nb_dtype_is_float(dt) && op >= NB_BINARY_REMAINDER && op <= NB_BINARY_DIV_FLOOR &&
           op != NB_BINARY_ATAN2;
}

template <typename T> static nb_status bin_run(nb_backend *be, nb_binary_op op, const nb_kview *out,
                                              const nb_kview *a, const nb_kview *b) {
    const char *name = bin_names[op];
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
    const char *name = bin_names[op];
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
    default: return bin_run<bool>(be, op, out, a, b); // NB_BOOL
    }
}
