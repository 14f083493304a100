/* philox.h - Philox 4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11), header-only so every backend (CPU,
 * CUDA) draws the same numbers.
 *
 * Layout shared by all backends: element i of a random fill takes 64 bits,
 * the words (2*(i%2), 2*(i%2)+1) of counter block (offset + i/2) under key =
 * seed. A fill of n elements therefore consumes nb_philox_blocks(n) blocks,
 * and element i depends only on (seed, offset, i), not on how work is split.
 * The CUDA backend's run-time compiler embeds this header too (fused dropout).
 */
#ifndef NB_PHILOX_H
#define NB_PHILOX_H

#ifndef __CUDACC_RTC__ /* NVRTC (generated pointwise kernels, backend/cuda/pointwise.cu) has its own */
#include <math.h>
#include <stdint.h>
#endif

#ifdef __CUDACC__
#define NB_HD __host__ __device__ static inline /* callable from host and device code (nvcc) */
#else
#define NB_HD static inline /* the qualifiers of these functions: static inline (host code) */
#endif

/* One Philox block's output: four 32-bit words. */
typedef struct nb_philox_u4 {
    uint32_t v[4]; /* the words in Philox's order (c0, c1, c2, c3) */
} nb_philox_u4;

/* The 64-bit product a * b: returns the low 32 bits, stores the high 32 in *hi. */
NB_HD uint32_t nb_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* One Philox4x32-10 block: counter (ctr_lo, ctr_hi) -> four 32-bit words. */
NB_HD nb_philox_u4 nb_philox4x32_10(uint64_t ctr_lo, uint64_t ctr_hi, uint64_t key) {
    uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
    uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = nb_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = nb_mulhilo32(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    nb_philox_u4 r = {{c0, c1, c2, c3}};
    return r;
}

/* The counter blocks a fill of n elements consumes: ceil(n / 2) (two 64-bit
 * elements per 128-bit block); a generator's offset advances by this. */
NB_HD uint64_t nb_philox_blocks(uint64_t n) { return (n + 1) / 2; }

/* The 64 random bits of element i. */
NB_HD uint64_t nb_philox_bits(uint64_t seed, uint64_t offset, uint64_t i) {
    nb_philox_u4 r = nb_philox4x32_10(offset + i / 2, 0, seed);
    int w = (int)(i % 2) * 2;
    return ((uint64_t)r.v[w] << 32) | r.v[w + 1];
}

/* Uniform in [0, 1) with 53 random bits. */
NB_HD double nb_bits_to_unit(uint64_t bits) { return (double)(bits >> 11) * 0x1.0p-53; }

/* A bernoulli draw's test in integers: (bits >> 11) < nb_bits_threshold(prob)
 * exactly when nb_bits_to_unit(bits) < prob, for prob in [0, 1]. */
NB_HD uint64_t nb_bits_threshold(double prob) { return (uint64_t)ceil(prob * 0x1p53); }

/* Standard normal by Box-Muller from the two 32-bit halves (u1 in (0, 1]). */
NB_HD double nb_bits_to_normal(uint64_t bits) {
    double u1 = ((double)(uint32_t)(bits >> 32) + 1.0) * 0x1.0p-32;
    double u2 = (double)(uint32_t)bits * 0x1.0p-32;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

#endif
