/* unary_loops.h - the inner-loop generators shared by the CPU unary kernels
 * (internal): unary.c (neg..gelu, the slot entry points) and
 * unary_math.c (abs..logsigmoid). A loop has an all-contiguous branch
 * (a plain indexed loop the compiler vectorises) and a generic byte-strided
 * one; the float32 activations that call exp use 4-lane GCC vector code
 * (V4_LOOP with vexp) since libm's expf does not vectorise. */
#ifndef NB_CPU_UNARY_LOOPS_H
#define NB_CPU_UNARY_LOOPS_H

#include <stdint.h>
#include <string.h>

#include "iter.h"

#define ALL5(OP) {[NB_F32] = OP##_f32, [NB_F64] = OP##_f64, [NB_I32] = OP##_i32, [NB_I64] = OP##_i64, [NB_U8] = OP##_u8}
#define FLOATS(OP) {[NB_F32] = OP##_f32, [NB_F64] = OP##_f64}

/* ---- unary: out = EXPR(x; a), after PRE (statements run once per call) -- */

#define UN_LOOP_PRE(NAME, T, PRE, EXPR)                                                         \
    static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {                 \
        const T a = (T) * (const double *)ctx;                                                  \
        (void)a;                                                                                \
        PRE;                                                                                    \
        T *o = (T *)p[0];                                                                       \
        const T *X = (const T *)p[1];                                                           \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                         \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T x = X[i];                                                                     \
                o[i] = (T)(EXPR);                                                               \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T x = *(const T *)(p[1] + i * s[1]);                                            \
                *(T *)(p[0] + i * s[0]) = (T)(EXPR);                                            \
            }                                                                                   \
        }                                                                                       \
    }
#define UN_LOOP(NAME, T, EXPR) UN_LOOP_PRE(NAME, T, (void)0, EXPR)

/* ---- unary backward: gx = EXPR(g, v; a), v = x or y as the rule needs ---- */

#define UB_LOOP(NAME, T, EXPR)                                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {                 \
        const T a = (T) * (const double *)ctx;                                                  \
        (void)a;                                                                                \
        const int64_t st = (int64_t)sizeof(T);                                                  \
        if (s[0] == st && s[1] == st && s[2] == st) {                                           \
            T *o = (T *)p[0];                                                                   \
            const T *G = (const T *)p[1], *V = (const T *)p[2];                                 \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T g = G[i], v = V[i];                                                           \
                (void)g, (void)v;                                                               \
                o[i] = (T)(EXPR);                                                               \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T g = *(const T *)(p[1] + i * s[1]), v = *(const T *)(p[2] + i * s[2]);         \
                (void)g, (void)v;                                                               \
                *(T *)(p[0] + i * s[0]) = (T)(EXPR);                                            \
            }                                                                                   \
        }                                                                                       \
    }

/* Which saved tensor a backward rule reads (gy itself when none). */
enum { USES_NONE, USES_X, USES_Y, USES_EITHER };
typedef struct nb_cpu_unary_rule {
    nb_cpu_loop_fn f32, f64;
    int uses;
} nb_cpu_unary_rule;

/* ---- float32 4-lane vector code (GCC vector extensions) ------------------ */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* m ? a : b lane by lane (m from a comparison: all ones or zero). */
static inline v4f vsel(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }

/* e^x by Cephes' expf: Cody-Waite reduction, degree-6 polynomial, 2^n
 * through the exponent bits, as two factors 2^(n/2) 2^(n - n/2) so that n
 * spans the whole float range. Above ln(FLT_MAX) the result is +inf and
 * below -104 it is 0, as libm's expf (silu, mish and gelu at -3e38 or -inf
 * depend on it: x / (1 + e^-x) must see an infinite denominator); NaN
 * passes through. */
static inline v4f vexp(v4f x) {
    const float lo = -104.0f, hi = 88.72283172607421875f; /* the largest float with e^x <= FLT_MAX */
    v4f xc = vsel(x < lo, (v4f){0} + lo, x);
    xc = vsel(xc > hi, (v4f){0} + hi, xc);
    v4f n = xc * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
    n = n - 12582912.0f;
    v4f r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    v4f q = r * 1.9875691500e-4f + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    q = q * (r * r) + r + 1.0f;
    v4i ni = __builtin_convertvector(n, v4i), n1 = ni >> 1;
    v4f e = q * (v4f)((n1 + 127) << 23) * (v4f)((ni - n1 + 127) << 23);
    e = vsel(x > hi, (v4f){0} + __builtin_inff(), e);
    return vsel(x < lo, (v4f){0}, e);
}

/* out = OUT(x; a) (unary) or OUT(g, x; a) (backward, operands gx, gy, x) on
 * float32, x and g v4f and a the float alpha, 4 lanes (one SSE register) a
 * block; strided operands and the tail go through a buffer. Explicit vector
 * code because GCC will not if-convert float compares under -ftrapping-math. */
#define V4_LOOP_OUT(NAME, BW, OUT)                                                              \
    static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {                 \
        const float a = (float)*(const double *)ctx;                                            \
        (void)a;                                                                                \
        const int xo = (BW) ? 2 : 1; /* operand index of x */                                  \
        int64_t i = 0;                                                                          \
        if (s[0] == 4 && s[1] == 4 && (!(BW) || s[2] == 4))                                     \
            for (; i + 4 <= n; i += 4) {                                                        \
                v4f x, g = {0};                                                                 \
                memcpy(&x, p[xo] + 4 * i, sizeof x);                                            \
                if (BW) memcpy(&g, p[1] + 4 * i, sizeof g);                                     \
                x = (OUT);                                                                      \
                memcpy(p[0] + 4 * i, &x, sizeof x);                                             \
            }                                                                                   \
        for (; i < n; i += 4) {                                                                 \
            int64_t m = n - i < 4 ? n - i : 4;                                                  \
            float xb[4] = {0}, gb[4] = {0};                                                     \
            for (int64_t l = 0; l < m; l++) {                                                   \
                xb[l] = *(const float *)(p[xo] + (i + l) * s[xo]);                              \
                if (BW) gb[l] = *(const float *)(p[1] + (i + l) * s[1]);                        \
            }                                                                                   \
            v4f x, g;                                                                           \
            memcpy(&x, xb, sizeof x);                                                           \
            memcpy(&g, gb, sizeof g);                                                           \
            x = (OUT);                                                                          \
            memcpy(xb, &x, sizeof x);                                                           \
            for (int64_t l = 0; l < m; l++) *(float *)(p[0] + (i + l) * s[0]) = xb[l];          \
        }                                                                                       \
    }
/* out = EXPR (unary) or gy * EXPR (backward) */
#define V4_LOOP_EXPR(NAME, BW, EXPR) V4_LOOP_OUT(NAME, BW, (BW) ? g * (EXPR) : (EXPR))
#define V4_LOOP(NAME, F, BW) V4_LOOP_EXPR(NAME, BW, F(x))

/* ---- unary_math.c: the ops from NB_UNARY_ABS on ---------------------- */

/* The op's name ("abs"), or NULL if it is not one of unary_math.c's. */
const char *nb_cpu_unary_math_name(nb_unary_op op);
/* The forward loop for (op, dtype), or NULL where unsupported. */
nb_cpu_loop_fn nb_cpu_unary_math_loop(nb_unary_op op, nb_dtype dt);
/* The backward rule (f32/f64 NULL for an op it does not have). */
nb_cpu_unary_rule nb_cpu_unary_math_rule(nb_unary_op op);

#endif
