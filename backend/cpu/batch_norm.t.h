/* batch_norm.t.h - the batch_norm loops over [N, C, HW] for one type, included
 * by batch_norm.c with T, S defined; no include guard, by design. TS(name_)
 * pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static double TS(sum_)(const T *x, int64_t n) {
    double a[BN_LANES] = {0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) a[l] += (double)x[i + l];
    for (int l = 0; i < n; i++, l++) a[l] += (double)x[i];
    return lanes_total(a);
}
static double TS(sqdev_)(const T *x, int64_t n, double mean) {
    double a[BN_LANES] = {0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) {
            double d = (double)x[i + l] - mean;
            a[l] += d * d;
        }
    for (int l = 0; i < n; i++, l++) {
        double d = (double)x[i] - mean;
        a[l] += d * d;
    }
    return lanes_total(a);
}
static void TS(gsums_)(const T *g, const T *x, int64_t n, double mean, double *sg, double *sgx) {
    double a[BN_LANES] = {0}, b[BN_LANES] = {0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) {
            a[l] += (double)g[i + l];
            b[l] += (double)g[i + l] * ((double)x[i + l] - mean);
        }
    for (int l = 0; i < n; i++, l++) {
        a[l] += (double)g[i];
        b[l] += (double)g[i] * ((double)x[i] - mean);
    }
    *sg += lanes_total(a);
    *sgx += lanes_total(b);
}
static void TS(apply_)(T *y, const T *x, int64_t n, T scale, T shift) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
}
static void TS(gx_)(T *gx, const T *gy, const T *x, int64_t n, T mean, T gmean, T k, T wi,
                   bool training) {
    if (!training) {
        for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * wi;
        return;
    }
    for (int64_t i = 0; i < n; i++) gx[i] = (gy[i] - gmean - (x[i] - mean) * k) * wi;
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
