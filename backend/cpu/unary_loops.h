/* unary_loops.h - the float32 vector code shared by the CPU unary, softmax
 * and cross-entropy kernels (internal): vexp, the row max and sum of
 * exponentials, and nb_vf_loop, the loop of the float32 activations that
 * call exp (GCC vector code, 4 to 16 lanes, NB_VLEN, since libm's expf does
 * not vectorise). The scalar loops are unary.t.h's. */
#ifndef NB_CPU_UNARY_LOOPS_H
#define NB_CPU_UNARY_LOOPS_H

#include <stdint.h>
#include <string.h>

#include "iter.h"

/* A backward rule's loops; the saved tensor it reads (its third operand) is
 * nb_unary_saved_of(op)'s (NB_UNARY_OPS, nb_backend.h). */
typedef struct nb_cpu_unary_rule {
    nb_cpu_loop_fn f32, f64;
} nb_cpu_unary_rule;

/* ---- float32 vector code (GCC vector extensions) ------------------------- */

/* float lanes of one register of the level's widest vectors */
#if defined(__AVX512F__)
#define NB_VLEN 16
#elif defined(__AVX__)
#define NB_VLEN 8
#else
#define NB_VLEN 4
#endif
typedef float vf __attribute__((vector_size(4 * NB_VLEN)));
typedef int32_t vi __attribute__((vector_size(4 * NB_VLEN)));

/* m ? a : b lane by lane (m from a comparison: all ones or zero). */
static inline vf vsel(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }

/* e^x by Cephes' expf: Cody-Waite reduction, degree-6 polynomial, 2^n
 * through the exponent bits, as two factors 2^(n/2) 2^(n - n/2) so that n
 * spans the whole float range. Above ln(FLT_MAX) the result is +inf and
 * below -104 it is 0, as libm's expf (silu, mish and gelu at -3e38 or -inf
 * depend on it: x / (1 + e^-x) must see an infinite denominator); NaN
 * passes through. */
static inline vf vexp(vf x) {
    const float lo = -104.0f, hi = 88.72283172607421875f; /* the largest float with e^x <= FLT_MAX */
    vf xc = vsel(x < lo, (vf){0} + lo, x);
    xc = vsel(xc > hi, (vf){0} + hi, xc);
    vf n = xc * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
    n = n - 12582912.0f;
    vf r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vf q = r * 1.9875691500e-4f + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    q = q * (r * r) + r + 1.0f;
    vi ni = __builtin_convertvector(n, vi), n1 = ni >> 1;
    vf e = q * (vf)((n1 + 127) << 23) * (vf)((ni - n1 + 127) << 23);
    e = vsel(x > hi, (vf){0} + __builtin_inff(), e);
    return vsel(x < lo, (vf){0}, e);
}

/* The maximum of a float32 row (n >= 1), NaN if any element is NaN (as a
 * sequential x != x || x > m scan): 16 fixed lanes (element i in lane
 * i % 16, held in 16 / NB_VLEN registers) combined in order, so every
 * NB_VLEN gives the same bits (signed zeros included). Native-width
 * vectors only: GCC expands wider ones piecewise. */
#define NB_VMAX_REGS (16 / NB_VLEN)
static inline float nb_vmax(const float *x, int64_t n) {
    float r = x[0];
    int64_t i = 0;
    if (n >= 16) {
        vf m[NB_VMAX_REGS];
        memcpy(m, x, sizeof m);
        for (i = 16; i + 16 <= n; i += 16)
            for (int k = 0; k < NB_VMAX_REGS; k++) {
                vf v;
                memcpy(&v, x + i + k * NB_VLEN, sizeof v);
                m[k] = vsel((v != v) | (v > m[k]), v, m[k]);
            }
        float lane[16];
        memcpy(lane, m, sizeof lane);
        r = lane[0];
        for (int l = 1; l < 16; l++) r = lane[l] != lane[l] || lane[l] > r ? lane[l] : r;
    }
    for (; i < n; i++) r = x[i] != x[i] || x[i] > r ? x[i] : r;
    return r;
}

/* sum_i e^(x[i] - mx) over a float32 row, e^ by vexp, accumulated in
 * double: element i goes to double lane i % 8, in order (the lanes live in
 * 16 / NB_VLEN registers of NB_VLEN / 2 doubles), and the 8 lanes are
 * combined in a fixed tree, so the bits are the same at every NB_VLEN (the
 * tail is padded with -inf, whose e^ is an exact 0). With y, also stores
 * y[i] = e^(x[i] - mx). Rows of cross-entropy (BERT: 30522 wide) and
 * softmax. */
#define NB_SE_STEP (NB_VLEN > 8 ? NB_VLEN : 8) /* elements per iteration */
#define NB_SE_REGS (16 / NB_VLEN)              /* double registers holding the 8 lanes */
typedef double nb_vd __attribute__((vector_size(4 * NB_VLEN)));   /* NB_VLEN / 2 doubles */
typedef float nb_vfh __attribute__((vector_size(2 * NB_VLEN)));   /* NB_VLEN / 2 floats */
/* One step of nb_vsum_exp: NB_SE_STEP elements from x (loaded straight:
 * a copy through a stack buffer stalls store forwarding), e^ stored to y. */
static inline void nb_se_step(const float *x, float mx, float *y, nb_vd *acc) {
    for (int v = 0; v < NB_SE_STEP / NB_VLEN; v++) {
        vf xv;
        memcpy(&xv, x + v * NB_VLEN, sizeof xv);
        xv = vexp(xv - mx);
        if (y) memcpy(y + v * NB_VLEN, &xv, sizeof xv);
        nb_vfh lo, hi;
        memcpy(&lo, &xv, sizeof lo);
        memcpy(&hi, (char *)&xv + sizeof lo, sizeof hi);
        acc[(2 * v) % NB_SE_REGS] += __builtin_convertvector(lo, nb_vd);
        acc[(2 * v + 1) % NB_SE_REGS] += __builtin_convertvector(hi, nb_vd);
    }
}
static inline double nb_vsum_exp(const float *x, int64_t n, float mx, float *y) {
    nb_vd acc[NB_SE_REGS];
    memset(acc, 0, sizeof acc);
    int64_t i = 0;
    for (; i + NB_SE_STEP <= n; i += NB_SE_STEP) nb_se_step(x + i, mx, y ? y + i : NULL, acc);
    if (i < n) {
        float e[NB_SE_STEP];
        for (int l = 0; l < NB_SE_STEP; l++) e[l] = i + l < n ? x[i + l] : -__builtin_inff();
        nb_se_step(e, mx, e, acc);
        if (y) memcpy(y + i, e, sizeof(float) * (size_t)(n - i));
    }
    double lane[8];
    memcpy(lane, acc, sizeof lane);
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* y[i] = g * e^(x[i] - c) (vexp, any NB_VLEN gives the same bits). */
static inline void nb_vscaled_exp(float *y, const float *x, int64_t n, float c, float g) {
    for (int64_t i = 0; i < n; i += NB_VLEN) {
        int64_t m = n - i < NB_VLEN ? n - i : NB_VLEN;
        float b[NB_VLEN] = {0};
        vf v;
        if (m == NB_VLEN) memcpy(&v, x + i, sizeof v);
        else {
            memcpy(b, x + i, sizeof(float) * (size_t)m);
            memcpy(&v, b, sizeof v);
        }
        v = g * vexp(v - c);
        if (m == NB_VLEN) memcpy(y + i, &v, sizeof v);
        else {
            memcpy(b, &v, sizeof v);
            memcpy(y + i, b, sizeof(float) * (size_t)m);
        }
    }
}

/* out = f(x, g; a) on float32 for a unary loop (operands out, x; g is 0)
 * or a backward one (bw: operands gx, gy, x), x and g vf and a the float
 * alpha, NB_VLEN lanes (one register) a block; strided operands and the
 * tail go through a buffer. Explicit vector code because GCC will not
 * if-convert float compares under -ftrapping-math. f is a static inline
 * function given by name, so the call is inlined into each loop. */
typedef vf (*nb_vf_fn)(vf x, vf g, float a);
static inline __attribute__((always_inline)) void nb_vf_loop(char **p, const int64_t *s, int64_t n, const void *ctx,
                                                             const int bw, nb_vf_fn f) {
    const float a = (float)*(const double *)ctx;
    const int xo = bw ? 2 : 1; /* operand index of x */
    int64_t i = 0;
    if (s[0] == 4 && s[1] == 4 && (!bw || s[2] == 4))
        for (; i + NB_VLEN <= n; i += NB_VLEN) {
            vf x, g = {0};
            memcpy(&x, p[xo] + 4 * i, sizeof x);
            if (bw) memcpy(&g, p[1] + 4 * i, sizeof g);
            x = f(x, g, a);
            memcpy(p[0] + 4 * i, &x, sizeof x);
        }
    for (; i < n; i += NB_VLEN) {
        int64_t m = n - i < NB_VLEN ? n - i : NB_VLEN;
        float xb[NB_VLEN] = {0}, gb[NB_VLEN] = {0};
        for (int64_t l = 0; l < m; l++) {
            xb[l] = *(const float *)(p[xo] + (i + l) * s[xo]);
            if (bw) gb[l] = *(const float *)(p[1] + (i + l) * s[1]);
        }
        vf x, g;
        memcpy(&x, xb, sizeof x);
        memcpy(&g, gb, sizeof g);
        x = f(x, g, a);
        memcpy(xb, &x, sizeof x);
        for (int64_t l = 0; l < m; l++) *(float *)(p[0] + (i + l) * s[0]) = xb[l];
    }
}

/* ---- unary_math.c: every op's float32 and float64 loops ---------------- */

/* The forward loop for (op, dtype) (float32 or float64; NULL otherwise);
 * alpha picks pow_scalar's loop for 2. */
nb_cpu_loop_fn nb_cpu_unary_float_loop(nb_unary_op op, nb_dtype dt, double alpha) NB_ISA_SYMBOL(nb_cpu_unary_float_loop);
/* The backward rule's loops (NULL for an op out of range). */
nb_cpu_unary_rule nb_cpu_unary_float_rule(nb_unary_op op) NB_ISA_SYMBOL(nb_cpu_unary_float_rule);

#endif
