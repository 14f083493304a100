/* binary.t.h - binary.c's loops for one dtype, included with T (the
 * element type), S (its suffix: f32, f64, i32, i64, u8, i8, i16, b8) and
 * NB_BIN_INT (1 for the integer dtypes, which have the division loops and
 * lack the float ops; bool has neither) defined; no include guard, by
 * design. Every formula is nb_scalar_math.h's nb_sm_binary_<S>, called
 * with a constant op so that each loop is the one expression. */
#define TS(name) NB_CPU_CAT(name, S)

/* out = x op y (bool out for the comparisons): the all-contiguous and
 * scalar-broadcast branches are plain indexed loops the compiler
 * vectorises; the last one takes any byte strides. */
static inline __attribute__((always_inline)) void TS(bin_loop_)(char **p, const int64_t *s, int64_t n, const int op) {
    T *o = (T *)p[0];
    const T *A = (const T *)p[1], *B = (const T *)p[2];
    const int64_t st = (int64_t)sizeof(T);
    if (s[0] == st && s[1] == st && s[2] == st) {
        for (int64_t i = 0; i < n; i++) o[i] = TS(nb_sm_binary_)(op, A[i], B[i]);
    } else if (s[0] == st && s[1] == st && s[2] == 0) {
        const T y = B[0];
        for (int64_t i = 0; i < n; i++) o[i] = TS(nb_sm_binary_)(op, A[i], y);
    } else if (s[0] == st && s[1] == 0 && s[2] == st) {
        const T x = A[0];
        for (int64_t i = 0; i < n; i++) o[i] = TS(nb_sm_binary_)(op, x, B[i]);
    } else {
        for (int64_t i = 0; i < n; i++) {
            T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);
            *(T *)(p[0] + i * s[0]) = TS(nb_sm_binary_)(op, x, y);
        }
    }
}

static inline __attribute__((always_inline)) void TS(cmp_loop_)(char **p, const int64_t *s, int64_t n, const int op) {
    bool *o = (bool *)p[0];
    const T *A = (const T *)p[1], *B = (const T *)p[2];
    const int64_t so = (int64_t)sizeof(bool), st = (int64_t)sizeof(T);
    if (s[0] == so && s[1] == st && s[2] == st) {
        for (int64_t i = 0; i < n; i++) o[i] = NB_SM_COMPARE(op, A[i], B[i]);
    } else if (s[0] == so && s[1] == st && s[2] == 0) {
        const T y = B[0];
        for (int64_t i = 0; i < n; i++) o[i] = NB_SM_COMPARE(op, A[i], y);
    } else if (s[0] == so && s[1] == 0 && s[2] == st) {
        const T x = A[0];
        for (int64_t i = 0; i < n; i++) o[i] = NB_SM_COMPARE(op, x, B[i]);
    } else {
        for (int64_t i = 0; i < n; i++) {
            T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);
            *(bool *)(p[0] + i * s[0]) = NB_SM_COMPARE(op, x, y);
        }
    }
}

/* one loop function per (op, dtype), named as binary.c's table reads them */
#define LOOP(name) static void TS(name)(char **p, const int64_t *s, int64_t n, const void *ctx)
LOOP(eq_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_EQ); }
LOOP(ne_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_NE); }
LOOP(gt_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_GT); }
LOOP(ge_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_GE); }
LOOP(lt_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_LT); }
LOOP(le_) { (void)ctx, TS(cmp_loop_)(p, s, n, NB_BINARY_LE); }
LOOP(add_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_ADD); }
LOOP(mul_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_MUL); }
#if NB_BIN_INT >= 0 /* numbers: not bool */
LOOP(sub_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_SUB); }
LOOP(pow_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_POW); }
LOOP(max_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_MAXIMUM); }
LOOP(min_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_MINIMUM); }
#endif
#if NB_BIN_INT != 0 /* integers and bool */
LOOP(and_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_BITWISE_AND); }
LOOP(or_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_BITWISE_OR); }
LOOP(xor_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_BITWISE_XOR); }
#endif
#if NB_BIN_INT == 0 /* floats */
LOOP(div_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_DIV); }
LOOP(rem_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_REMAINDER); }
LOOP(fmod_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_FMOD); }
LOOP(atan2_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_ATAN2); }
LOOP(dtr_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_DIV_TRUNC); }
LOOP(dfl_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_DIV_FLOOR); }
#elif NB_BIN_INT == 1 /* integers */
LOOP(shl_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_LSHIFT); }
LOOP(shr_) { (void)ctx, TS(bin_loop_)(p, s, n, NB_BINARY_RSHIFT); }

/* the divisions: a zero divisor writes 0 and sets *ctx (the kernel then
 * fails) instead of trapping (SIGFPE) */
static inline __attribute__((always_inline)) void TS(div_loop_)(char **p, const int64_t *s, int64_t n, const void *ctx,
                                                                const int op) {
    bool zero = false;
    for (int64_t i = 0; i < n; i++) {
        T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);
        if (y == 0) zero = true;
        *(T *)(p[0] + i * s[0]) = y == 0 ? (T)0 : TS(nb_sm_binary_div_)(op, x, y);
    }
    if (zero) atomic_store_explicit((atomic_int *)ctx, 1, memory_order_relaxed);
}
LOOP(rem_) { TS(div_loop_)(p, s, n, ctx, NB_BINARY_REMAINDER); }
LOOP(fmod_) { TS(div_loop_)(p, s, n, ctx, NB_BINARY_FMOD); }
LOOP(dtr_) { TS(div_loop_)(p, s, n, ctx, NB_BINARY_DIV_TRUNC); }
LOOP(dfl_) { TS(div_loop_)(p, s, n, ctx, NB_BINARY_DIV_FLOOR); }
#endif
#undef LOOP

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
#undef NB_BIN_INT
