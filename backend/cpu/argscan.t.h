/* argscan.t.h - argmax/argmin's scan of one row for one type, included by
 * reduce.c with T, S and ISNAN (a NaN test, 0 for integers) defined; no
 * include guard, by design. scan_S finds the first maximum, scanmin_S the
 * first minimum of n elements at stride s; NaN counts as the extreme (as
 * torch.argmax/argmin), so the first NaN wins. */
#define TS(name) NB_CPU_CAT(name, S)

static inline __attribute__((always_inline)) int64_t TS(argscan_)(const char *p, int64_t n, int64_t s, char *best,
                                                                  bool min) {
    const T *x = (const T *)p;
    T b = x[0];
    int64_t bi = 0;
    for (int64_t i = 1; i < n && !ISNAN(b); i++) {
        T v = x[i * s];
        if ((min ? v < b : v > b) || ISNAN(v)) b = v, bi = i;
    }
    if (best) *(T *)best = b;
    return bi;
}
static int64_t TS(scan_)(const char *p, int64_t n, int64_t s, char *best) { return TS(argscan_)(p, n, s, best, false); }
static int64_t TS(scanmin_)(const char *p, int64_t n, int64_t s, char *best) { return TS(argscan_)(p, n, s, best, true); }

#undef TS
#undef T
#undef S
#undef ISNAN
