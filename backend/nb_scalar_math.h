/* nb_scalar_math.h - the scalar formulas of the elementwise ops, written
 * once for every backend (internal): unary forward and backward rules, the
 * binary ops of every dtype (with the integer divisions, powers and
 * shifts), the comparisons, the Adam and SGD element updates, and fake
 * quantization. Plain C11 and CUDA C++ (host and device, the pattern of
 * core/philox.h); the CPU's loops (backend/cpu/unary.c, unary_math.c,
 * binary.t.h, optim.t.h, quantize.t.h) and the CUDA functors (unary.cu,
 * binary.cu, optim.cu, quantize.cu) call these, so a formula, its value at
 * a kink and its NaN behaviour cannot drift between backends.
 *
 * The float formulas are an included template, nb_scalar_math_float.t.h,
 * instantiated for float (suffix f32) and double (f64); the integer helpers
 * are nb_scalar_math_int.t.h for int8_t, int16_t, int32_t and int64_t, plus the uint8 and
 * bool ones below. Every function has its suffix in both languages (nb_sm_unary_f32,
 * nb_sm_div_floor_i64); CUDA templates reach them through nb_sm_of<T>.
 *
 * Formulas are PyTorch's (aten/src/ATen/native/cpu/UnaryOpsKernel.cpp,
 * Activation.cpp, BinaryOpsKernel.cpp, c10/util/generic_math.h; backward
 * rules tools/autograd/derivatives.yaml), each evaluated in the dtype. The
 * float32 forms of the exp-based activations are the overflow-free algebra
 * that the CPU's 4-to-16-lane vector loops (backend/cpu/unary_loops.h)
 * evaluate with their own exp and log; float64 and every other float32 op
 * run these functions on both backends (CUDA's libm may differ from glibc's
 * by an ulp; CPU bits are the reference). The optimizer updates round every
 * operation on the device (__fmul_rn and kin), so CUDA's float32/float64
 * steps equal the CPU's bits (which compiles as ISO C11: no contraction). */
#ifndef NB_SCALAR_MATH_H
#define NB_SCALAR_MATH_H

#ifndef __CUDACC_RTC__
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#endif

#include "nb_kernel_ops.h"

#ifdef __CUDACC__
#define NB_SM_FN __host__ __device__ static inline __attribute__((always_inline))
#else
/* always_inline: the CPU loops pass a constant op, and the switch must fold
 * into the one expression for the loop to vectorise */
#define NB_SM_FN static inline __attribute__((always_inline))
#endif

/* Constants in double; each formula casts them to its type. */
#define NB_SM_SELU_ALPHA 1.6732632423543772848170429916717 /* Klambauer et al. 2017; torch.nn.SELU */
#define NB_SM_SELU_SCALE 1.0507009873554804934193349852946
#define NB_SM_SQRT1_2 0.70710678118654752440   /* 1 / sqrt(2) */
#define NB_SM_INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi): the normal density's factor */
#define NB_SM_SQRT_2_PI 0.79788456080286535588  /* sqrt(2 / pi): GELU's tanh form */
#define NB_SM_2_SQRTPI 1.12837916709551257390   /* 2 / sqrt(pi): erf's derivative */
#define NB_SM_LOG2E 1.4426950408889634074
#define NB_SM_LN10 2.30258509299404568402

#define NB_SM_CAT2(a, b) a##b
#define NB_SM_CAT(a, b) NB_SM_CAT2(a, b)

#ifdef __cplusplus
/* nb_sm_of<T>: the T instantiation's functions, for CUDA's templates. */
template <typename T> struct nb_sm_of;
#endif

#define NB_SM_T float
#define NB_SM_SFX f32
#define NB_SM_IS_F32 1
#include "nb_scalar_math_float.t.h"
#undef NB_SM_T
#undef NB_SM_SFX
#undef NB_SM_IS_F32

#define NB_SM_T double
#define NB_SM_SFX f64
#define NB_SM_IS_F32 0
#include "nb_scalar_math_float.t.h"
#undef NB_SM_T
#undef NB_SM_SFX
#undef NB_SM_IS_F32

#define NB_SM_T int32_t
#define NB_SM_UT uint32_t
#define NB_SM_SFX i32
#include "nb_scalar_math_int.t.h"
#undef NB_SM_T
#undef NB_SM_UT
#undef NB_SM_SFX

#define NB_SM_T int64_t
#define NB_SM_UT uint64_t
#define NB_SM_SFX i64
#include "nb_scalar_math_int.t.h"
#undef NB_SM_T
#undef NB_SM_UT
#undef NB_SM_SFX

/* int8 and int16 wrap through uint32_t, not their own unsigned type: that
 * one would promote to int, and 65535 * 65535 overflows int. */
#define NB_SM_T int8_t
#define NB_SM_UT uint32_t
#define NB_SM_SFX i8
#include "nb_scalar_math_int.t.h"
#undef NB_SM_T
#undef NB_SM_UT
#undef NB_SM_SFX

#define NB_SM_T int16_t
#define NB_SM_UT uint32_t
#define NB_SM_SFX i16
#include "nb_scalar_math_int.t.h"
#undef NB_SM_T
#undef NB_SM_UT
#undef NB_SM_SFX

/* ---- uint8: floor division is truncation and remainder is fmod; a shift
 * count is read as int8 (PyTorch's make_signed), so 128..255 shift out. ---- */

NB_SM_FN uint8_t nb_sm_div_trunc_u8(uint8_t a, uint8_t b) { return (uint8_t)(a / b); }
NB_SM_FN uint8_t nb_sm_fmod_u8(uint8_t a, uint8_t b) { return (uint8_t)(a % b); }
NB_SM_FN uint8_t nb_sm_ipow_u8(uint8_t a, uint8_t b) {
    unsigned r = 1, base = a;
    for (; b; b >>= 1, base = (base * base) & 0xff)
        if (b & 1) r = (r * base) & 0xff;
    return (uint8_t)r;
}
NB_SM_FN uint8_t nb_sm_lshift_u8(uint8_t a, uint8_t b) { return b >= 8 ? 0 : (uint8_t)(a << b); }
NB_SM_FN uint8_t nb_sm_rshift_u8(uint8_t a, uint8_t b) { return b >= 8 ? 0 : (uint8_t)(a >> b); }
/* uint8's unary ops: neg and the scalar forms wrap, abs and the rounding
 * ops are the identity, sign is x > 0 */
NB_SM_FN uint8_t nb_sm_unary_u8(int op, uint8_t x, uint8_t a) {
    switch (op) {
    case NB_UNARY_NEG: return (uint8_t)(0 - x);
    case NB_UNARY_ADD_SCALAR: return (uint8_t)(x + a);
    case NB_UNARY_MUL_SCALAR: return (uint8_t)(x * a);
    case NB_UNARY_SIGN: return (uint8_t)(x > 0);
    default: return x; /* abs, floor, ceil, round, trunc */
    }
}
/* uint8 nb_binary_op but the comparisons and divisions (wrapping) */
NB_SM_FN uint8_t nb_sm_binary_u8(int op, uint8_t x, uint8_t y) {
    switch (op) {
    case NB_BINARY_ADD: return (uint8_t)(x + y);
    case NB_BINARY_SUB: return (uint8_t)(x - y);
    case NB_BINARY_MUL: return (uint8_t)(x * y);
    case NB_BINARY_POW: return nb_sm_ipow_u8(x, y);
    case NB_BINARY_MAXIMUM: return x > y ? x : y;
    case NB_BINARY_MINIMUM: return x < y ? x : y;
    case NB_BINARY_BITWISE_AND: return x & y;
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    case NB_BINARY_LSHIFT: return nb_sm_lshift_u8(x, y);
    case NB_BINARY_RSHIFT: return nb_sm_rshift_u8(x, y);
    default: return 0; /* not reached */
    }
}
/* uint8 divisions, y != 0: remainder and fmod are x % y, both floor and
 * trunc division x / y */
NB_SM_FN uint8_t nb_sm_binary_div_u8(int op, uint8_t x, uint8_t y) {
    return op == NB_BINARY_REMAINDER || op == NB_BINARY_FMOD ? nb_sm_fmod_u8(x, y) : nb_sm_div_trunc_u8(x, y);
}
/* bool arithmetic as PyTorch's: add, maximum and bitwise_or are "or",
 * mul, minimum and bitwise_and "and" */
NB_SM_FN bool nb_sm_binary_b8(int op, bool x, bool y) {
    switch (op) {
    case NB_BINARY_ADD:
    case NB_BINARY_MAXIMUM:
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    default: return x & y; /* mul, minimum, bitwise_and */
    }
}
/* The comparisons (NB_BINARY_EQ .. LE) of two values of one type: a macro,
 * the one formula every dtype's loop instantiates (NaN compares false but
 * for ne, as IEEE). */
#define NB_SM_COMPARE(op, x, y)                                                                   \
    ((op) == NB_BINARY_EQ ? (x) == (y) : (op) == NB_BINARY_NE ? (x) != (y) : (op) == NB_BINARY_GT ? (x) > (y)  \
     : (op) == NB_BINARY_GE ? (x) >= (y) : (op) == NB_BINARY_LT ? (x) < (y) : (x) <= (y))

#endif
