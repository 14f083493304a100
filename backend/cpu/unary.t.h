/* unary.t.h - the unary loops for one dtype, included with T (the element
 * type), S (its suffix) and NB_UN_INT (1 for the integer dtypes, 0 for
 * float and double) defined; no include guard, by design. Every formula
 * is nb_scalar_math.h's, called with a constant op so that each loop is the
 * one expression: floats get a forward and a backward loop per
 * NB_UNARY_OPS row (fwd_<ID>_<S>, bw_<ID>_<S>) and square_<S>; integers
 * the loops of the ops they take (neg_, adds_, muls_, abs_, sign_, ident_). */
#define TS(name) NB_CPU_CAT(name, S)
#define LOOP_FN(name) static void TS(name)(char **p, const int64_t *s, int64_t n, const void *ctx)

/* out = f(x; alpha): an all-contiguous branch the compiler vectorises and
 * a byte-strided one */
static inline __attribute__((always_inline)) void TS(un_loop_)(char **p, const int64_t *s, int64_t n, const void *ctx,
                                                               const int op) {
#if NB_UN_INT
    const T a = (T) * (const double *)ctx;
#define UN_F(x) TS(nb_sm_unary_)(op, x, a)
#else
    const TS(nb_sm_unary_args_) u = TS(nb_sm_unary_prep_)(op, *(const double *)ctx);
#define UN_F(x) TS(nb_sm_unary_)(op, x, &u)
#endif
    T *o = (T *)p[0];
    const T *X = (const T *)p[1];
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {
        for (int64_t i = 0; i < n; i++) o[i] = UN_F(X[i]);
    } else {
        for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = UN_F(*(const T *)(p[1] + i * s[1]));
    }
#undef UN_F
}

#if NB_UN_INT
LOOP_FN(neg_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_NEG); }
LOOP_FN(adds_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_ADD_SCALAR); }
LOOP_FN(muls_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_MUL_SCALAR); }
LOOP_FN(abs_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_ABS); }
LOOP_FN(sign_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_SIGN); }
LOOP_FN(ident_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_TRUNC); }
#else
/* gx = rule(g, v; alpha), v the saved tensor the rule reads */
static inline __attribute__((always_inline)) void TS(ub_loop_)(char **p, const int64_t *s, int64_t n, const void *ctx,
                                                               const int op) {
    const T a = (T) * (const double *)ctx;
    const int64_t st = (int64_t)sizeof(T);
    if (s[0] == st && s[1] == st && s[2] == st) {
        T *o = (T *)p[0];
        const T *G = (const T *)p[1], *V = (const T *)p[2];
        for (int64_t i = 0; i < n; i++) o[i] = TS(nb_sm_unary_backward_)(op, G[i], V[i], a);
    } else {
        for (int64_t i = 0; i < n; i++) {
            T g = *(const T *)(p[1] + i * s[1]), v = *(const T *)(p[2] + i * s[2]);
            *(T *)(p[0] + i * s[0]) = TS(nb_sm_unary_backward_)(op, g, v, a);
        }
    }
}

#define NB_UN_LOOPS(id, name, saved, api)                                                             \
    LOOP_FN(fwd_##id##_) { TS(un_loop_)(p, s, n, ctx, NB_UNARY_##id); }                          \
    LOOP_FN(bw_##id##_) { TS(ub_loop_)(p, s, n, ctx, NB_UNARY_##id); }
NB_UNARY_OPS(NB_UN_LOOPS)
#undef NB_UN_LOOPS

/* pow_scalar with alpha 2: the formula's x * x, as a loop of its own (the
 * generic one tests alpha per element) */
LOOP_FN(square_) {
    (void)ctx;
    T *o = (T *)p[0];
    const T *X = (const T *)p[1];
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {
        for (int64_t i = 0; i < n; i++) o[i] = X[i] * X[i];
    } else {
        for (int64_t i = 0; i < n; i++) {
            T x = *(const T *)(p[1] + i * s[1]);
            *(T *)(p[0] + i * s[0]) = x * x;
        }
    }
}
#endif
#undef LOOP_FN

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
