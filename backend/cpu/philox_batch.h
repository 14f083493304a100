/* philox_batch.h - the 64-bit Philox draws of a run of consecutive elements
 * (core/philox.h's layout: element i takes the words (2*(i%2), 2*(i%2)+1) of
 * block offset + i/2), computed NB_PHILOX_LANES blocks at a time in
 * vectors of the instruction-set level the file is compiled for (isa.h:
 * 16 lanes of AVX-512, 8 of AVX2 or 4 of SSE2; 32x32->64 multiplies by
 * mul_epu32; a plain lane loop elsewhere), faster than one nb_philox4x32_10 call per block. Same bits as
 * nb_philox_bits; internal to the CPU backend. */
#ifndef NB_PHILOX_BATCH_H
#define NB_PHILOX_BATCH_H

#include <stdint.h>

#include "philox.h"

#define NB_PHILOX_LANES 16

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
/* Sixteen 32x32 -> 64-bit products a[l] * m (AVX-512): low and high words. */
static inline void nb_mulhilo_x16(__m512i a, __m512i m, __m512i *lo, __m512i *hi) {
    __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
    *lo = _mm512_mask_blend_epi32((__mmask16)0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(even, 32), odd);
}
/* Blocks ctr .. ctr + NB_PHILOX_LANES - 1 under key: w[k][l] is word k of block ctr + l. */
static inline void nb_philox_lanes(uint64_t ctr, uint64_t key, uint32_t w[4][NB_PHILOX_LANES]) {
    const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
    uint32_t lo[16], hi[16];
    for (int l = 0; l < 16; l++) lo[l] = (uint32_t)(ctr + (uint64_t)l), hi[l] = (uint32_t)((ctr + (uint64_t)l) >> 32);
    __m512i c0 = _mm512_loadu_si512(lo), c1 = _mm512_loadu_si512(hi);
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        __m512i lo0, hi0, lo1, hi1;
        nb_mulhilo_x16(c0, m0, &lo0, &hi0);
        nb_mulhilo_x16(c2, m1, &lo1, &hi1);
        c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
        c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
        c1 = lo1, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    _mm512_storeu_si512(w[0], c0), _mm512_storeu_si512(w[1], c1);
    _mm512_storeu_si512(w[2], c2), _mm512_storeu_si512(w[3], c3);
}
#elif defined(__AVX2__)
/* Eight 32x32 -> 64-bit products a[l] * m (AVX2): low and high words. */
static inline void nb_mulhilo_x8(__m256i a, __m256i m, __m256i *lo, __m256i *hi) {
    __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
/* Blocks ctr .. ctr + NB_PHILOX_LANES - 1 under key: w[k][l] is word k of block ctr + l. */
static inline void nb_philox_lanes(uint64_t ctr, uint64_t key, uint32_t w[4][NB_PHILOX_LANES]) {
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    for (int g = 0; g < NB_PHILOX_LANES; g += 8) {
        uint32_t lo[8], hi[8];
        for (int l = 0; l < 8; l++) lo[l] = (uint32_t)(ctr + (uint64_t)(g + l)), hi[l] = (uint32_t)((ctr + (uint64_t)(g + l)) >> 32);
        __m256i c0 = _mm256_loadu_si256((const __m256i *)lo), c1 = _mm256_loadu_si256((const __m256i *)hi);
        __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            __m256i lo0, hi0, lo1, hi1;
            nb_mulhilo_x8(c0, m0, &lo0, &hi0);
            nb_mulhilo_x8(c2, m1, &lo1, &hi1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1, c3 = lo0;
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
        _mm256_storeu_si256((__m256i *)&w[0][g], c0), _mm256_storeu_si256((__m256i *)&w[1][g], c1);
        _mm256_storeu_si256((__m256i *)&w[2][g], c2), _mm256_storeu_si256((__m256i *)&w[3][g], c3);
    }
}
#elif defined(__SSE2__)
#include <emmintrin.h>

/* Four 32x32 -> 64-bit products a[l] * m: their low and high words. */
static inline void nb_mulhilo_x4(__m128i a, __m128i m, __m128i *lo, __m128i *hi) {
    const __m128i low32 = _mm_set1_epi64x(0xFFFFFFFF), high32 = _mm_slli_epi64(low32, 32);
    __m128i even = _mm_mul_epu32(a, m), odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);
    *lo = _mm_or_si128(_mm_and_si128(even, low32), _mm_slli_epi64(odd, 32));
    *hi = _mm_or_si128(_mm_srli_epi64(even, 32), _mm_and_si128(odd, high32));
}

/* Blocks ctr .. ctr + NB_PHILOX_LANES - 1 under key: w[k][l] is word k of block ctr + l. */
static inline void nb_philox_lanes(uint64_t ctr, uint64_t key, uint32_t w[4][NB_PHILOX_LANES]) {
    const __m128i m0 = _mm_set1_epi32((int)0xD2511F53u), m1 = _mm_set1_epi32((int)0xCD9E8D57u);
    for (int g = 0; g < NB_PHILOX_LANES; g += 4) {
        uint32_t lo[4], hi[4];
        for (int l = 0; l < 4; l++) lo[l] = (uint32_t)(ctr + (uint64_t)(g + l)), hi[l] = (uint32_t)((ctr + (uint64_t)(g + l)) >> 32);
        __m128i c0 = _mm_loadu_si128((const __m128i *)lo), c1 = _mm_loadu_si128((const __m128i *)hi);
        __m128i c2 = _mm_setzero_si128(), c3 = _mm_setzero_si128();
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            __m128i lo0, hi0, lo1, hi1;
            nb_mulhilo_x4(c0, m0, &lo0, &hi0);
            nb_mulhilo_x4(c2, m1, &lo1, &hi1);
            c0 = _mm_xor_si128(_mm_xor_si128(hi1, c1), _mm_set1_epi32((int)k0));
            c2 = _mm_xor_si128(_mm_xor_si128(hi0, c3), _mm_set1_epi32((int)k1));
            c1 = lo1, c3 = lo0;
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
        _mm_storeu_si128((__m128i *)&w[0][g], c0), _mm_storeu_si128((__m128i *)&w[1][g], c1);
        _mm_storeu_si128((__m128i *)&w[2][g], c2), _mm_storeu_si128((__m128i *)&w[3][g], c3);
    }
}
#else
/* Blocks ctr .. ctr + NB_PHILOX_LANES - 1 under key: w[k][l] is word k of block ctr + l. */
static inline void nb_philox_lanes(uint64_t ctr, uint64_t key, uint32_t w[4][NB_PHILOX_LANES]) {
    uint32_t c0[NB_PHILOX_LANES], c1[NB_PHILOX_LANES], c2[NB_PHILOX_LANES], c3[NB_PHILOX_LANES];
    for (int l = 0; l < NB_PHILOX_LANES; l++) {
        uint64_t c = ctr + (uint64_t)l;
        c0[l] = (uint32_t)c, c1[l] = (uint32_t)(c >> 32), c2[l] = 0, c3[l] = 0;
    }
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        for (int l = 0; l < NB_PHILOX_LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c0[l] = n0, c1[l] = (uint32_t)p1, c2[l] = n2, c3[l] = (uint32_t)p0;
        }
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < NB_PHILOX_LANES; l++) w[0][l] = c0[l], w[1][l] = c1[l], w[2][l] = c2[l], w[3][l] = c3[l];
}
#endif

/* bits[k] = nb_philox_bits(seed, offset, i0 + k) for k < n. */
static inline void nb_philox_bits_run(uint64_t seed, uint64_t offset, uint64_t i0, int64_t n, uint64_t *bits) {
    uint32_t w[4][NB_PHILOX_LANES];
    for (uint64_t q = i0 / 2, end = i0 + (uint64_t)n; 2 * q < end; q += NB_PHILOX_LANES) {
        nb_philox_lanes(offset + q, seed, w);
        if (2 * q >= i0 && 2 * (q + NB_PHILOX_LANES) <= end) { /* a whole run of blocks: no bounds */
            uint64_t *o = bits + (2 * q - i0);
            for (int l = 0; l < NB_PHILOX_LANES; l++) {
                o[2 * l] = ((uint64_t)w[0][l] << 32) | w[1][l];
                o[2 * l + 1] = ((uint64_t)w[2][l] << 32) | w[3][l];
            }
            continue;
        }
        for (int l = 0; l < NB_PHILOX_LANES; l++)
            for (int h = 0; h < 2; h++) {
                uint64_t i = 2 * (q + (uint64_t)l) + (uint64_t)h;
                if (i >= i0 && i < end) bits[i - i0] = ((uint64_t)w[2 * h][l] << 32) | w[2 * h + 1][l];
            }
    }
}

#endif
