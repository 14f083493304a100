/* quantize.c - the CPU's fake quantization (torch.fake_quantize_per_tensor_
 * affine / per_channel_affine and the learnable variants' gradients; with
 * int32 levels out, quantize_per_tensor), the int8 weight-only product
 * (linear_int8) and BitNet b1.58's packed ternary product. Each fake-quantized element is the
 * shared scalar formula (nb_sm_fake_quant_*, nb_scalar_math_float.t.h), so
 * the CUDA kernels give the same bits; rows [c, inner] are independent, so
 * any split over threads gives the same bits. Compiled once per
 * instruction-set level (isa.h): the packed product's inner loop is AVX2's
 * maddubs where the level has it, and at the AVX-512 level, on a CPU with
 * AVX-512 VNNI (cpuid at run time) and from 4 rows, vpdpbusd over blocks
 * of rows and columns. Its sums are exact integers, so every path gives
 * the same bits. */
#include <stdint.h>
#include <stdlib.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_common.h"
#include "half16.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "threadpool.h"

typedef struct fq_job {
    char *out, *gs, *gz;
    const char *x, *g;
    const float *scale, *zp;
    int64_t C, inner;
    const nb_fake_quant_params *p;
    bool levels; /* out is int32: the clamped levels, not dequantized */
} fq_job;

typedef struct i8_job {
    const char *x, *bias;
    const int8_t *q;
    const float *scales;
    char *y;
    int64_t M, N, K;
} i8_job;

#define T_ float
#define S f32
#define NB_Q_F32 1
#include "quantize.t.h"
#undef NB_Q_F32
#define T_ double
#define S f64
#define NB_Q_F32 0
#include "quantize.t.h"
#undef NB_Q_F32

nb_status nb_cpu_fake_quantize(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *scale,
                               const nb_kview *zero_point, const nb_fake_quant_params *p) {
    (void)be; /* checked: backend/check/quantize.c */
    int64_t rows = x->shape[0] * x->shape[1], inner = x->shape[2];
    if (rows == 0 || inner == 0) return NB_OK;
    fq_job j = {.out = out->data, .x = x->data, .scale = scale->data, .zp = zero_point->data,
                .C = x->shape[1], .inner = inner, .p = p, .levels = out->dtype == NB_I32};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / inner + 1, x->dtype == NB_F32 ? fq_rows_f32 : fq_rows_f64, &j);
    return NB_OK;
}

nb_status nb_cpu_linear_int8(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *qweight,
                             const nb_kview *scales, const nb_kview *bias) {
    /* checked: backend/check/quantize.c */
    const int64_t M = x->shape[0], K = x->shape[1], N = qweight->shape[0];
    if (M == 0 || N == 0) return NB_OK;
    i8_job j = {.x = x->data, .bias = bias ? bias->data : NULL, .q = qweight->data, .scales = scales->data,
                .y = y->data, .M = M, .N = N, .K = K};
    const nb_dtype dt = x->dtype;
    void *block = NULL;
    float *f = NULL;
    if (nb_dtype_is_16bit(dt)) { /* x and bias to float32, the float32 loop, y rounded once */
        size_t n = (size_t)(M * K + N + M * N);
        f = nb_alloc_raw(be, n * sizeof(float), nb_backend_current_stream(be), &block);
        if (!f) return nb_last_status();
        const uint16_t *xh = x->data, *bh = bias ? bias->data : NULL;
        for (int64_t i = 0; i < M * K; i++) f[i] = dt == NB_BF16 ? bf16_to_f32(xh[i]) : f16_to_f32(xh[i]);
        for (int64_t i = 0; bh && i < N; i++) f[M * K + i] = dt == NB_BF16 ? bf16_to_f32(bh[i]) : f16_to_f32(bh[i]);
        j.x = (const char *)f, j.bias = bh ? (const char *)(f + M * K) : NULL, j.y = (char *)(f + M * K + N);
    }
    nb_cpu_parallel_for(N, NB_CPU_GRAIN / (M * K + 1) + 1, dt == NB_F64 ? linear_i8_cols_f64 : linear_i8_cols_f32, &j);
    if (f) {
        const float *yf = f + M * K + N;
        uint16_t *yh = y->data;
        for (int64_t i = 0; i < M * N; i++) yh[i] = dt == NB_BF16 ? f32_to_bf16(yf[i]) : f32_to_f16(yf[i]);
        nb_free_raw(be, block);
    }
    return NB_OK;
}

nb_status nb_cpu_fake_quantize_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gscale,
                                        const nb_kview *gzp, const nb_kview *g, const nb_kview *x,
                                        const nb_kview *scale, const nb_kview *zero_point,
                                        const nb_fake_quant_params *p) {
    (void)be; /* checked: backend/check/quantize.c */
    int64_t rows = x->shape[0] * x->shape[1], inner = x->shape[2];
    if (rows == 0 || inner == 0 || (!gx && !gscale && !gzp)) return NB_OK;
    fq_job j = {.out = gx ? gx->data : NULL, .gs = gscale ? gscale->data : NULL, .gz = gzp ? gzp->data : NULL,
                .x = x->data, .g = g->data, .scale = scale->data, .zp = zero_point->data, .C = x->shape[1],
                .inner = inner, .p = p};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / inner + 1, x->dtype == NB_F32 ? fq_grad_rows_f32 : fq_grad_rows_f64,
                        &j);
    return NB_OK;
}

/* ---- BitNet b1.58: int8 activations x packed ternary weights ---------------------- */

/* sum_k qx[k] code[k] over kp weights (kp a multiple of 128) in the
 * packed layout (nb_slots.def's bitnet_linear); the caller subtracts
 * sum_k qx[k] (code = w + 1). Exact in int32 for kp < 2^22. */
static int32_t codes_dot(const int8_t *qx, const uint8_t *p, int64_t kp) {
#if defined(__AVX2__)
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    for (int64_t g = 0; g < kp / 128; g++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32 * g));
        const int8_t *x = qx + 128 * g;
        /* codes (0..2, unsigned) times int8 activations, pairs summed to int16 (|.| <= 512), 4 planes <= 2048 */
        __m256i s = _mm256_maddubs_epi16(_mm256_and_si256(b, m3), _mm256_loadu_si256((const __m256i *)x));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(b, 2), m3),
                                                     _mm256_loadu_si256((const __m256i *)(x + 32))));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(b, 4), m3),
                                                     _mm256_loadu_si256((const __m256i *)(x + 64))));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(b, 6), m3),
                                                     _mm256_loadu_si256((const __m256i *)(x + 96))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, ones));
    }
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
#else
    int32_t acc = 0;
    for (int64_t g = 0; g < kp / 128; g++) {
        const int8_t *x = qx + 128 * g;
        for (int j = 0; j < 32; j++) {
            unsigned b = p[32 * g + j];
            acc += x[j] * (int32_t)(b & 3) + x[j + 32] * (int32_t)((b >> 2) & 3) +
                   x[j + 64] * (int32_t)((b >> 4) & 3) + x[j + 96] * (int32_t)(b >> 6);
        }
    }
    return acc;
#endif
}

typedef struct bitnet_job {
    const int8_t *qx;   /* [M, kp] */
    const int8_t *qxv;  /* NULL, or qx in vnni_layout's order */
    const int32_t *sum; /* [M]: sum_k qx */
    const double *sx;   /* [M]: s_x */
    const uint8_t *p;   /* [N, kp / 4] */
    const char *bias;
    char *y;
    int64_t M, N, kp;
    float sw;
    bool f64;
} bitnet_job;

/* y[m, n] from the exact sum acc (codes_dot minus sum_k qx). */
static void bitnet_store(const bitnet_job *j, int64_t m, int64_t n, int32_t acc) {
    if (j->f64) {
        double v = nb_sm_bitnet_out_f64(acc, j->sx[m], j->sw);
        ((double *)j->y)[m * j->N + n] = j->bias ? v + ((const double *)j->bias)[n] : v;
    } else {
        float v = nb_sm_bitnet_out_f32(acc, (float)j->sx[m], j->sw);
        ((float *)j->y)[m * j->N + n] = j->bias ? v + ((const float *)j->bias)[n] : v;
    }
}

/* Output columns [n0, n1) of every row: each packed row is read once per
 * block and reused by all M rows. */
static void bitnet_cols(void *arg, int64_t n0, int64_t n1) {
    const bitnet_job *j = arg;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *p = j->p + n * (j->kp / 4);
        for (int64_t m = 0; m < j->M; m++) bitnet_store(j, m, n, codes_dot(j->qx + m * j->kp, p, j->kp) - j->sum[m]);
    }
}

#if defined(__AVX512BW__) && defined(__GNUC__)
#define NB_BITNET_VNNI 1
/* qx [M, kp] rearranged for 64-byte vectors: per row, per pair t of
 * 128-weight groups and plane k (0..3), the 32 activations of group 2t at
 * 32k.. then those of group 2t + 1 (zeros past the last group), so that
 * one load matches a plane of 64 packed bytes: pairs(kp) * 256 bytes a row. */
static int64_t vnni_pairs(int64_t kp) { return (kp / 128 + 1) / 2; }
static void vnni_layout(const int8_t *qx, int64_t M, int64_t kp, int8_t *qxv) {
    const int64_t G = kp / 128, P = vnni_pairs(kp);
    for (int64_t m = 0; m < M; m++)
        for (int64_t t = 0; t < P; t++)
            for (int k = 0; k < 4; k++)
                for (int h = 0; h < 2; h++) {
                    int8_t *d = qxv + (m * P + t) * 256 + 64 * k + 32 * h;
                    const int64_t g = 2 * t + h;
                    for (int j = 0; j < 32; j++) d[j] = g < G ? qx[m * kp + 128 * g + 32 * k + j] : 0;
                }
}

/* Rows [m0, m0 + R) against packed columns n0 .. n0 + C - 1: per pair of
 * groups each column's four code planes once, then a vpdpbusd per plane,
 * row and column (codes unsigned 0..2 times int8 activations, 4 products
 * to each int32 lane: exact); each activation load serves C columns. */
#define NB_VNNI_BLOCK(R, C)                                                                                \
    __attribute__((target("avx512vnni"))) static void vnni_block##R##x##C(const bitnet_job *j, int64_t m0, \
                                                                            int64_t n0) {                  \
        const int64_t G = j->kp / 128, P = vnni_pairs(j->kp);                                              \
        const __m512i m3 = _mm512_set1_epi8(3);                                                            \
        __m512i acc[R][C];                                                                                 \
        for (int r = 0; r < R; r++)                                                                        \
            for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_si512();                                \
        for (int64_t t = 0; t < P; t++) {                                                                  \
            __m512i pl[C][4];                                                                              \
            for (int c = 0; c < C; c++) {                                                                  \
                const uint8_t *p = j->p + (n0 + c) * (j->kp / 4) + 64 * t;                                 \
                const __m512i b = 2 * t + 1 < G ? _mm512_loadu_si512(p)                                    \
                                                : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)p)); \
                for (int k = 0; k < 4; k++) pl[c][k] = _mm512_and_si512(_mm512_srli_epi16(b, 2 * k), m3);  \
            }                                                                                              \
            for (int r = 0; r < R; r++) {                                                                  \
                const int8_t *x = j->qxv + ((m0 + r) * P + t) * 256;                                       \
                for (int k = 0; k < 4; k++) {                                                              \
                    const __m512i xv = _mm512_loadu_si512(x + 64 * k);                                     \
                    for (int c = 0; c < C; c++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], pl[c][k], xv);  \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int r = 0; r < R; r++)                                                                        \
            for (int c = 0; c < C; c++)                                                                    \
                bitnet_store(j, m0 + r, n0 + c, _mm512_reduce_add_epi32(acc[r][c]) - j->sum[m0 + r]);      \
    }
NB_VNNI_BLOCK(4, 2)
NB_VNNI_BLOCK(1, 2)
NB_VNNI_BLOCK(4, 1)
NB_VNNI_BLOCK(1, 1)
#undef NB_VNNI_BLOCK

/* bitnet_cols with the vnni blocks: pairs of columns, blocks of 4 rows. */
static void bitnet_cols_vnni(void *arg, int64_t n0, int64_t n1) {
    const bitnet_job *j = arg;
    int64_t n = n0;
    for (; n + 2 <= n1; n += 2) {
        int64_t m = 0;
        for (; m + 4 <= j->M; m += 4) vnni_block4x2(j, m, n);
        for (; m < j->M; m++) vnni_block1x2(j, m, n);
    }
    for (; n < n1; n++) {
        int64_t m = 0;
        for (; m + 4 <= j->M; m += 4) vnni_block4x1(j, m, n);
        for (; m < j->M; m++) vnni_block1x1(j, m, n);
    }
}

/* Whether this CPU runs AVX-512 VNNI (asked once; racing first calls store the same value). */
static bool vnni_cpu(void) {
    static int v = -1;
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) __atomic_store_n(&v, r = __builtin_cpu_supports("avx512vnni") ? 1 : 0, __ATOMIC_RELAXED);
    return r == 1;
}
#endif

nb_status nb_cpu_bitnet_linear(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *packed,
                               const nb_kview *w_scale, const nb_kview *bias) {
    /* checked: backend/check/quantize.c */
    const int64_t M = x->shape[0], K = x->shape[1], N = packed->shape[0], kp = packed->shape[1] * 4;
    if (M == 0 || N == 0) return NB_OK;
#if defined(NB_BITNET_VNNI)
    const bool vnni = M >= 4 && vnni_cpu(); /* fewer rows: memory-bound, and the AVX2 loop measured as fast */
    const size_t vbytes = vnni ? (size_t)(M * vnni_pairs(kp) * 256) : 0;
#else
    const size_t vbytes = 0;
#endif
    size_t bytes = (size_t)(M * kp) + (size_t)M * (sizeof(int32_t) + sizeof(double)) + 16 + vbytes;
    void *block;
    char *ws = nb_alloc_raw(be, bytes, nb_backend_current_stream(be), &block);
    if (!ws) return nb_last_status();
    int8_t *qx = (int8_t *)ws;
    double *sxs = (double *)(ws + ((size_t)(M * kp) + 7) / 8 * 8);
    int32_t *sums = (int32_t *)(sxs + M);
    for (int64_t m = 0; m < M; m++) {
        if (x->dtype == NB_F64)
            bitnet_quant_row_f64((const double *)x->data + m * K, K, kp, qx + m * kp, &sxs[m], &sums[m]);
        else
            bitnet_quant_row_f32((const float *)x->data + m * K, K, kp, qx + m * kp, &sxs[m], &sums[m]);
    }
    bitnet_job j = {.qx = qx, .sum = sums, .sx = sxs, .p = packed->data, .bias = bias ? bias->data : NULL,
                    .y = y->data, .M = M, .N = N, .kp = kp, .sw = *(const float *)w_scale->data,
                    .f64 = x->dtype == NB_F64};
#if defined(NB_BITNET_VNNI)
    if (vnni) {
        int8_t *qxv = (int8_t *)(sums + M);
        vnni_layout(qx, M, kp, qxv);
        j.qxv = qxv;
        nb_cpu_parallel_for(N, NB_CPU_GRAIN / (M * kp / 8 + 1) + 1, bitnet_cols_vnni, &j);
        nb_free_raw(be, block);
        return NB_OK;
    }
#endif
    nb_cpu_parallel_for(N, NB_CPU_GRAIN / (M * kp / 8 + 1) + 1, bitnet_cols, &j);
    nb_free_raw(be, block);
    return NB_OK;
}
