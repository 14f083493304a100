/* where.t.h - torch.where's loop for elements of one size (where only moves
 * bits), included by index.c with T (an unsigned integer of that size) and S
 * (its size) defined; no include guard, by design. */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(where_)(char **p, const int64_t *s, int64_t n, const void *ctx) {
    (void)ctx;
    const int64_t st = (int64_t)sizeof(T);
    const uint8_t *c = (const uint8_t *)p[1];
    if (s[0] == st && s[1] == 1 && s[2] == st && s[3] == st) {
        T *o = (T *)p[0];
        const T *a = (const T *)p[2], *b = (const T *)p[3];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a[i] : b[i];
    } else if (s[0] == st && s[1] == 1 && s[2] == 0 && s[3] == st) { /* masked_fill */
        T *o = (T *)p[0];
        const T a = *(const T *)p[2], *b = (const T *)p[3];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a : b[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            *(T *)(p[0] + i * s[0]) = p[1][i * s[1]] ? *(const T *)(p[2] + i * s[2]) : *(const T *)(p[3] + i * s[3]);
    }
}

#undef TS
#undef T
#undef S
