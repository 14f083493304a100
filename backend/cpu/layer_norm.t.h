/* layer_norm.t.h - the layer_norm loops (forward; backward by rows and by
 * columns) for one float type, included by layer_norm.c with T and S defined;
 * no include guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

/* sum of f(x[i]) over a row in NB_LN_LANES fixed lanes */
static double TS(row_sum_)(const T *x, int64_t m) {
    double acc[NB_LN_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)
        for (int l = 0; l < NB_LN_LANES; l++) acc[l] += (double)x[i + l];
    for (int l = 0; l < NB_LN_LANES; l++) s += acc[l];
    for (; i < m; i++) s += (double)x[i];
    return s;
}
static double TS(row_sqdev_)(const T *x, int64_t m, double mu) {
    double acc[NB_LN_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)
        for (int l = 0; l < NB_LN_LANES; l++) {
            double d = (double)x[i + l] - mu;
            acc[l] += d * d;
        }
    for (int l = 0; l < NB_LN_LANES; l++) s += acc[l];
    for (; i < m; i++) s += ((double)x[i] - mu) * ((double)x[i] - mu);
    return s;
}
static void TS(ln_fwd_)(void *arg, int64_t r0, int64_t r1) {
    const ln_job *j = arg;
    int64_t m = j->m;
    const T *w = (const T *)j->w, *b = (const T *)j->b;
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->x + r * m;
        T *y = (T *)j->out + r * m;
        double mu = TS(row_sum_)(x, m) / (double)m;
        double rs = 1 / sqrt(TS(row_sqdev_)(x, m, mu) / (double)m + j->eps);
        ((T *)j->mean)[r] = (T)mu;
        ((T *)j->rstd)[r] = (T)rs;
        const T mt = (T)mu, rt = (T)rs;
        if (w && b)
            for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt * w[i] + b[i];
        else if (w)
            for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt * w[i];
        else if (b)
            for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt + b[i];
        else
            for (int64_t i = 0; i < m; i++) y[i] = (x[i] - mt) * rt;
    }
}
/* gx rows: the two row means in double lanes, then one fused pass */
static void TS(ln_bwd_rows_)(void *arg, int64_t r0, int64_t r1) {
    const ln_job *j = arg;
    int64_t m = j->m;
    const T *w = (const T *)j->w;
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->x + r * m, *gy = (const T *)j->gy + r * m;
        T *gx = (T *)j->gx + r * m;
        const T mt = ((const T *)j->mean)[r], rt = ((const T *)j->rstd)[r];
        double sa[NB_LN_LANES] = {0}, sax[NB_LN_LANES] = {0}, s1 = 0, s2 = 0;
        int64_t i = 0;
        for (; i + NB_LN_LANES <= m; i += NB_LN_LANES)
            for (int l = 0; l < NB_LN_LANES; l++) {
                T a = w ? gy[i + l] * w[i + l] : gy[i + l];
                T xh = (x[i + l] - mt) * rt;
                sa[l] += (double)a;
                sax[l] += (double)(a * xh);
            }
        for (int l = 0; l < NB_LN_LANES; l++) s1 += sa[l], s2 += sax[l];
        for (; i < m; i++) {
            T a = w ? gy[i] * w[i] : gy[i];
            s1 += (double)a;
            s2 += (double)(a * ((x[i] - mt) * rt));
        }
        const T ma = (T)(s1 / (double)m), mx = (T)(s2 / (double)m);
        for (i = 0; i < m; i++) {
            T a = w ? gy[i] * w[i] : gy[i];
            T xh = (x[i] - mt) * rt;
            gx[i] = rt * (a - ma - xh * mx);
        }
    }
}
/* gw, gb: column blocks c0..; every row summed in order */
static void TS(ln_bwd_cols_)(void *arg, int64_t u0, int64_t u1) {
    const ln_job *j = arg;
    int64_t m = j->m;
    for (int64_t u = u0; u < u1; u++) {
        int64_t c0 = u * NB_LN_COLS, wd = m - c0 < NB_LN_COLS ? m - c0 : NB_LN_COLS;
        double accw[NB_LN_COLS] = {0}, accb[NB_LN_COLS] = {0};
        for (int64_t r = 0; r < j->rows; r++) {
            const T *x = (const T *)j->x + r * m + c0, *gy = (const T *)j->gy + r * m + c0;
            const T mt = ((const T *)j->mean)[r], rt = ((const T *)j->rstd)[r];
            for (int64_t c = 0; c < wd; c++) {
                accw[c] += (double)(gy[c] * ((x[c] - mt) * rt));
                accb[c] += (double)gy[c];
            }
        }
        if (j->gw)
            for (int64_t c = 0; c < wd; c++) ((T *)j->gw)[c0 + c] = (T)accw[c];
        if (j->gb)
            for (int64_t c = 0; c < wd; c++) ((T *)j->gb)[c0 + c] = (T)accb[c];
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
