/* rms_norm.t.h - the rms_norm loops (forward; backward by rows and by columns)
 * for one float type, included by rms_norm.c with T and S defined; no include
 * guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static double TS(row_sumsq_)(const T *x, int64_t m) {
    double acc[NB_RMS_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + NB_RMS_LANES <= m; i += NB_RMS_LANES)
        for (int l = 0; l < NB_RMS_LANES; l++) acc[l] += (double)x[i + l] * (double)x[i + l];
    for (int l = 0; l < NB_RMS_LANES; l++) s += acc[l];
    for (; i < m; i++) s += (double)x[i] * (double)x[i];
    return s;
}
static void TS(rms_fwd_)(void *arg, int64_t r0, int64_t r1) {
    const rms_job *j = arg;
    int64_t m = j->m;
    const T *w = (const T *)j->w;
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->x + r * m;
        T *y = (T *)j->out + r * m;
        double rs = 1 / sqrt(TS(row_sumsq_)(x, m) / (double)m + j->eps);
        ((T *)j->rstd)[r] = (T)rs;
        const T rt = (T)rs;
        if (w)
            for (int64_t i = 0; i < m; i++) y[i] = w[i] * (x[i] * rt);
        else
            for (int64_t i = 0; i < m; i++) y[i] = x[i] * rt;
    }
}
static void TS(rms_bwd_rows_)(void *arg, int64_t r0, int64_t r1) {
    const rms_job *j = arg;
    int64_t m = j->m;
    const T *w = (const T *)j->w;
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->x + r * m, *gy = (const T *)j->gy + r * m;
        T *gx = (T *)j->gx + r * m;
        const T rt = ((const T *)j->rstd)[r];
        double acc[NB_RMS_LANES] = {0}, s = 0;
        int64_t i = 0;
        for (; i + NB_RMS_LANES <= m; i += NB_RMS_LANES)
            for (int l = 0; l < NB_RMS_LANES; l++) {
                T a = w ? gy[i + l] * w[i + l] : gy[i + l];
                acc[l] += (double)(a * (x[i + l] * rt));
            }
        for (int l = 0; l < NB_RMS_LANES; l++) s += acc[l];
        for (; i < m; i++) {
            T a = w ? gy[i] * w[i] : gy[i];
            s += (double)(a * (x[i] * rt));
        }
        const T mx = (T)(s / (double)m);
        for (i = 0; i < m; i++) {
            T a = w ? gy[i] * w[i] : gy[i];
            gx[i] = rt * (a - (x[i] * rt) * mx);
        }
    }
}
static void TS(rms_bwd_cols_)(void *arg, int64_t u0, int64_t u1) {
    const rms_job *j = arg;
    int64_t m = j->m;
    for (int64_t u = u0; u < u1; u++) {
        int64_t c0 = u * NB_RMS_COLS, wd = m - c0 < NB_RMS_COLS ? m - c0 : NB_RMS_COLS;
        double acc[NB_RMS_COLS] = {0};
        for (int64_t r = 0; r < j->rows; r++) {
            const T *x = (const T *)j->x + r * m + c0, *gy = (const T *)j->gy + r * m + c0;
            const T rt = ((const T *)j->rstd)[r];
            for (int64_t c = 0; c < wd; c++) acc[c] += (double)(gy[c] * (x[c] * rt));
        }
        for (int64_t c = 0; c < wd; c++) ((T *)j->gw)[c0 + c] = (T)acc[c];
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
