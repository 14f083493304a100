/* softmax.t.h - the softmax and log_softmax loops (forward, backward; rows and
 * columns) for one float type, included by softmax.c with T and S defined; no
 * include guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

/* forward, inner == 1: rows r0..r1 */
static void TS(sm_rows_)(void *arg, int64_t r0, int64_t r1) {
    const sm_job *j = arg;
    int64_t n = j->size;
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->x + r * n;
        T *y = (T *)j->out + r * n, mx = TS(row_max_)(x, n);
        double sum = TS(row_sum_exp_)(x, n, mx, j->log ? NULL : y);
        if (j->log) {
            T ls = (T)log(sum);
            for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mx) - ls;
        } else {
            T inv = (T)(1 / sum);
            for (int64_t i = 0; i < n; i++) y[i] *= inv;
        }
    }
}
/* forward, inner > 1: units (outer row, column block) */
static void TS(sm_cols_)(void *arg, int64_t u0, int64_t u1) {
    const sm_job *j = arg;
    int64_t n = j->size, in = j->inner;
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->ncb, c0 = (u % j->ncb) * SOFTMAX_COLS;
        int64_t w = in - c0 < SOFTMAX_COLS ? in - c0 : SOFTMAX_COLS;
        const T *x = (const T *)j->x + o * n * in + c0;
        T *y = (T *)j->out + o * n * in + c0, mx[SOFTMAX_COLS], ls[SOFTMAX_COLS];
        double sum[SOFTMAX_COLS];
        for (int64_t c = 0; c < w; c++) mx[c] = x[c], sum[c] = 0;
        for (int64_t i = 1; i < n; i++)
            for (int64_t c = 0; c < w; c++) mx[c] = MAXF(x[i * in + c], mx[c]);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < w; c++) {
                T e = exp(x[i * in + c] - mx[c]);
                if (!j->log) y[i * in + c] = e;
                sum[c] += e;
            }
        for (int64_t c = 0; c < w; c++) ls[c] = j->log ? (T)log(sum[c]) : (T)(1 / sum[c]);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < w; c++) {
                if (j->log) y[i * in + c] = (x[i * in + c] - mx[c]) - ls[c];
                else y[i * in + c] *= ls[c];
            }
    }
}
static void TS(smb_rows_)(void *arg, int64_t r0, int64_t r1) {
    const sm_job *j = arg;
    int64_t n = j->size;
    for (int64_t r = r0; r < r1; r++) {
        const T *y = (const T *)j->y + r * n, *g = (const T *)j->g + r * n;
        T *gx = (T *)j->out + r * n;
        double acc = 0;
        for (int64_t i = 0; i < n; i++) acc += j->log ? g[i] : g[i] * y[i];
        T s = (T)acc;
        for (int64_t i = 0; i < n; i++) gx[i] = j->log ? g[i] - exp(y[i]) * s : y[i] * (g[i] - s);
    }
}
static void TS(smb_cols_)(void *arg, int64_t u0, int64_t u1) {
    const sm_job *j = arg;
    int64_t n = j->size, in = j->inner;
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->ncb, c0 = (u % j->ncb) * SOFTMAX_COLS, off = o * n * in + c0;
        int64_t w = in - c0 < SOFTMAX_COLS ? in - c0 : SOFTMAX_COLS;
        const T *y = (const T *)j->y + off, *g = (const T *)j->g + off;
        T *gx = (T *)j->out + off, s[SOFTMAX_COLS];
        double acc[SOFTMAX_COLS] = {0};
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < w; c++)
                acc[c] += j->log ? g[i * in + c] : g[i * in + c] * y[i * in + c];
        for (int64_t c = 0; c < w; c++) s[c] = (T)acc[c];
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < w; c++) {
                int64_t e = i * in + c;
                gx[e] = j->log ? g[e] - exp(y[e]) * s[c] : y[e] * (g[e] - s[c]);
            }
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
