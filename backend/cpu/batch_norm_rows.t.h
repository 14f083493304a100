/* batch_norm_rows.t.h - the batch_norm loops over [rows, C] for one type,
 * included by batch_norm.c with T, S defined; no include guard, by design.
 * TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(rows_fwd_)(const bn_job *j, int64_t c0, int64_t w) {
    const T *x = (const T *)j->x + c0;
    T *y = (T *)j->out + c0;
    double mean[BN_COLS] = {0}, var[BN_COLS] = {0}, M = (double)j->N;
    T scale[BN_COLS], shift[BN_COLS];
    if (j->training && j->N > 0) {
        for (int64_t n = 0; n < j->N; n++)
            for (int64_t c = 0; c < w; c++) mean[c] += (double)x[n * j->C + c];
        for (int64_t c = 0; c < w; c++) mean[c] /= M;
        for (int64_t n = 0; n < j->N; n++)
            for (int64_t c = 0; c < w; c++) {
                double d = (double)x[n * j->C + c] - mean[c];
                var[c] += d * d;
            }
    }
    for (int64_t c = 0; c < w; c++) {
        double sc, sh;
        fwd_coeffs(j, c0 + c, mean[c], M > 0 ? var[c] / M : 0, &sc, &sh);
        scale[c] = (T)sc, shift[c] = (T)sh;
    }
    for (int64_t n = 0; n < j->N; n++)
        for (int64_t c = 0; c < w; c++) y[n * j->C + c] = x[n * j->C + c] * scale[c] + shift[c];
}
static void TS(rows_bwd_)(const bn_job *j, int64_t c0, int64_t w) {
    const T *x = (const T *)j->x + c0, *gy = (const T *)j->gy + c0;
    double mean[BN_COLS], invstd[BN_COLS], sg[BN_COLS] = {0}, sgx[BN_COLS] = {0};
    T m[BN_COLS], gm[BN_COLS], k[BN_COLS], wi[BN_COLS];
    for (int64_t c = 0; c < w; c++) bwd_stats(j, c0 + c, &mean[c], &invstd[c]);
    if (bwd_needs_sums(j))
        for (int64_t n = 0; n < j->N; n++)
            for (int64_t c = 0; c < w; c++) {
                double g = (double)gy[n * j->C + c];
                sg[c] += g;
                sgx[c] += g * ((double)x[n * j->C + c] - mean[c]);
            }
    for (int64_t c = 0; c < w; c++) {
        double a, b, d;
        bwd_coeffs(j, c0 + c, invstd[c], sg[c], sgx[c], &a, &b, &d);
        m[c] = (T)mean[c], gm[c] = (T)a, k[c] = (T)b, wi[c] = (T)d;
    }
    if (!j->out) return;
    T *gx = (T *)j->out + c0;
    for (int64_t n = 0; n < j->N; n++)
        for (int64_t c = 0; c < w; c++) {
            int64_t e = n * j->C + c;
            gx[e] = j->training ? (gy[e] - gm[c] - (x[e] - m[c]) * k[c]) * wi[c] : gy[e] * wi[c];
        }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
