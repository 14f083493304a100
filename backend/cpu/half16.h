/* half16.h - the CPU's bfloat16/float16 conversions (internal): widening
 * to float32 is exact; narrowing rounds to nearest, ties to even, on the
 * float32 bit patterns (so flush-to-zero cannot flush results), and makes
 * NaNs quiet. cast.c's casts and iter16.c's 16-bit loops use them. Also
 * here: nb_cpu_iter_run16, float32 inner loops run over 16-bit operands. */
#ifndef NB_CPU_HALF16_H
#define NB_CPU_HALF16_H

#include <stdint.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"

/* The two 16-bit float formats, held as their bit patterns. Distinct names
 * so that cast.c's macros can paste them; the same C type. */
typedef uint16_t f16;
typedef uint16_t bf16;

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float f16_to_f32(f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return f32_from_bits(f32_bits(v) | sign);
    }
    if (exp == 31) return f32_from_bits(sign | 0x7F800000u | (mant << 13)); /* inf, NaN (payload kept) */
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Rounds the integer m / 2^shift (shift in [1, 31]) to nearest, ties to even. */
static inline uint32_t rne_shift(uint32_t m, int shift) {
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

/* The narrowing works on float32 bit patterns, never on float arithmetic,
 * so the flush-to-zero mode of nabla's threads cannot flush results. */
static inline f16 f32b_to_f16(uint32_t x) {
    uint32_t ax = x & 0x7FFFFFFF;
    f16 sign = (f16)((x >> 16) & 0x8000);
    if (ax > 0x7F800000) return (f16)(sign | 0x7E00 | ((ax >> 13) & 0x3FF)); /* NaN, made quiet */
    if (ax >= 0x47800000) return (f16)(sign | 0x7C00); /* >= 65536 (and inf): inf */
    if (ax < 0x38800000) {                             /* below 2^-14: f16 subnormal or zero */
        int shift = 126 - (int)(ax >> 23);              /* |f| * 2^24 = m / 2^shift */
        if (shift > 24) return sign;                    /* below 2^-25: rounds to zero */
        uint32_t m = (ax & 0x7FFFFF) | 0x800000;
        return (f16)(sign | rne_shift(m, shift)); /* may round up to the smallest normal */
    }
    /* normal: rebias the exponent, round 23 mantissa bits to 10; a carry
     * moves into the exponent, and 65520 and above become inf (0x7C00) */
    return (f16)(sign | rne_shift(ax - (112u << 23), 13));
}

static inline bf16 f32b_to_bf16(uint32_t x) {
    if ((x & 0x7FFFFFFF) > 0x7F800000) return (bf16)((x >> 16) | 0x0040); /* NaN, made quiet */
    return (bf16)((x + 0x7FFF + ((x >> 16) & 1)) >> 16); /* carries to inf past the largest finite */
}

static inline f16 f32_to_f16(float f) { return f32b_to_f16(f32_bits(f)); }
static inline bf16 f32_to_bf16(float f) { return f32b_to_bf16(f32_bits(f)); }
static inline float bf16_to_f32(bf16 h) { return f32_from_bits((uint32_t)h << 16); }

/* Runs the float32 loop fn over the iterator's operands, any of which may
 * be bfloat16/float16 (dt[i] gives each operand's dtype; operand 0 is the
 * output): chunks of 16-bit inputs are widened into float32 buffers on the
 * stack, fn runs on them, and a 16-bit output is rounded back. Each element
 * gets the bits the float32 kernel gives its widened value (as PyTorch's
 * CPU bf16 ops, which compute in float32), with no tensor-sized copies. */
void nb_cpu_iter_run16(const nb_cpu_iter *it, int64_t grain, nb_cpu_loop_fn fn, const void *ctx,
                       const nb_dtype *dt) NB_ISA_SYMBOL(nb_cpu_iter_run16);

#endif
