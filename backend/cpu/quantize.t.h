/* quantize.t.h - the fake-quantization loops, the int8 weight-only
 * product's columns and BitNet's activation quantization for one type, included by quantize.c with T_, S defined; no
 * include guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)
#define SM(name) NB_CPU_CAT(nb_sm_##name##_, S)

static void TS(fq_rows_)(void *arg, int64_t r0, int64_t r1) {
    const fq_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % j->C;
        float s = j->scale[c], inv = 1.0f / s, z = j->zp[c];
        const T_ *x = (const T_ *)j->x + r * j->inner;
        if (j->levels) { /* quantize_per_tensor: the clamped levels as int32 */
            int32_t *q = (int32_t *)j->out + r * j->inner;
            for (int64_t i = 0; i < j->inner; i++) q[i] = (int32_t)SM(fq_clamped)(x[i], inv, z, j->p);
            continue;
        }
        T_ *y = (T_ *)j->out + r * j->inner;
        for (int64_t i = 0; i < j->inner; i++) y[i] = SM(fake_quant)(x[i], s, inv, z, j->p);
    }
}

static void TS(fq_grad_rows_)(void *arg, int64_t r0, int64_t r1) {
    const fq_job *j = arg;
    const T_ gf = (T_)j->p->grad_factor;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % j->C, o = r * j->inner;
        float s = j->scale[c], inv = 1.0f / s, z = j->zp[c];
        const T_ *x = (const T_ *)j->x + o, *g = (const T_ *)j->g + o;
        T_ *gx = j->out ? (T_ *)j->out + o : NULL, *gs = j->gs ? (T_ *)j->gs + o : NULL,
           *gz = j->gz ? (T_ *)j->gz + o : NULL;
        for (int64_t i = 0; i < j->inner; i++) {
            T_ a, b, d;
            SM(fake_quant_grad)(g[i], x[i], s, inv, z, j->p, gf, &a, &b, &d);
            if (gx) gx[i] = a;
            if (gs) gs[i] = b;
            if (gz) gz[i] = d;
        }
    }
}

/* Row m of x [M, K] as int8 levels (padding 0), with s_x and the sum of
 * the levels: the shared formulas of nb_scalar_math_float.t.h. */
static void TS(bitnet_quant_row_)(const T_ *xr, int64_t K, int64_t kp, int8_t *q, double *sx, int32_t *sum) {
    T_ a = 0;
    for (int64_t k = 0; k < K; k++) a = SM(nan_max)(a, xr[k] < 0 ? -xr[k] : xr[k]);
    const T_ s = SM(bitnet_act_scale)(a);
    int32_t t = 0;
    for (int64_t k = 0; k < K; k++) t += q[k] = SM(bitnet_act_level)(xr[k], s);
    for (int64_t k = K; k < kp; k++) q[k] = 0;
    *sx = (double)s, *sum = t;
}

/* sum_k x[k] q[k] in T_: 16 lane sums, added pairwise in a fixed tree,
 * then the tail: one order for every K and ISA level (float32 on AVX2:
 * the same lanes and tree in two 8-lane registers, multiply then add, no
 * FMA; GCC had vectorised the plain loop 4 lanes wide). */
static T_ TS(i8_dot_)(const T_ *x, const int8_t *q, int64_t K) {
    int64_t k = 0;
    T_ t;
#if defined(__AVX2__) && NB_Q_F32
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; k + 16 <= K; k += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(q + k));
        const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(x + k), w0));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(x + k + 8), w1));
    }
    const __m256 s8 = _mm256_add_ps(a0, a1);                                              /* lanes l += l + 8 */
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)); /* l += l + 4 */
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                /* l += l + 2 */
    t = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));                           /* 0 += 1 */
#else
    T_ acc[16] = {0};
    for (; k + 16 <= K; k += 16)
        for (int l = 0; l < 16; l++) acc[l] += x[k + l] * (T_)q[k + l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    t = acc[0];
#endif
    for (; k < K; k++) t += x[k] * (T_)q[k];
    return t;
}

/* Output columns [n0, n1) of every row of linear_int8: each weight row is
 * read once per column and reused by the M rows (cached). */
static void TS(linear_i8_cols_)(void *arg, int64_t n0, int64_t n1) {
    const i8_job *j = arg;
    const T_ *x = (const T_ *)j->x, *bias = (const T_ *)j->bias;
    T_ *y = (T_ *)j->y;
    for (int64_t n = n0; n < n1; n++) {
        const int8_t *q = j->q + n * j->K;
        for (int64_t m = 0; m < j->M; m++) {
            T_ v = (T_)j->scales[n] * TS(i8_dot_)(x + m * j->K, q, j->K);
            y[m * j->N + n] = bias ? v + bias[n] : v;
        }
    }
}

#undef SM
#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T_
#undef S
