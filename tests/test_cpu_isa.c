/* test_cpu_isa.c - the CPU kernels compiled per instruction-set level
 * (backend/cpu/isa.h): every level this machine has runs the same cases as
 * the baseline level, slot by slot through each level's table (every unary
 * op forward and backward in float32 and float64, binary ops with
 * broadcasting, casts, reductions, softmax, cross-entropy, layer_norm,
 * rms_norm, random fills, Adam and SGD, attention with dropout, the int8
 * weight-only product), on inputs
 * that include zeros, infinities, NaN and denormals, contiguous and
 * strided; their results must be bitwise equal to the baseline's (isa.h:
 * contraction is off and every kernel's order of operations is fixed
 * independently of the vector width). Also: NB_CPU_ISA-style selection
 * through nb_cpu_isa_select switches the backend's slots, and
 * nb_backend_info(NB_CPU) names the level; and the bfloat16/float16
 * elementwise kernels give the float32 kernels' results rounded once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "nb_impl.h"
#include "nb_test.h"
#include "suites.h"

#define N_EL 1031 /* not a multiple of any vector width: every tail runs */

static const nb_cpu_isa_kernels *table(int level) {
#if defined(NB_CPU_ISA_X86)
    if (level == NB_CPU_ISA_AVX2) return &nb_cpu_isa_kernels_avx2;
    if (level == NB_CPU_ISA_AVX512) return &nb_cpu_isa_kernels_avx512;
#endif
    return level == NB_CPU_ISA_BASELINE ? &nb_cpu_isa_kernels_baseline : NULL;
}

static nb_kview vec(void *data, nb_dtype dt, int64_t n, int64_t stride) {
    return (nb_kview){.data = data, .dtype = dt, .ndim = 1, .shape = {n}, .strides = {stride}};
}
static nb_kview mat(void *data, nb_dtype dt, int64_t r, int64_t c) {
    return (nb_kview){.data = data, .dtype = dt, .ndim = 2, .shape = {r, c}, .strides = {c, 1}};
}

/* Deterministic inputs in [-lim, lim], with special values sprinkled in when asked. */
static void fill(void *p, nb_dtype dt, int64_t n, unsigned seed, double lim, bool specials) {
    static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-40, -1e-39, 88.0, -104.5, 3.0, -3.0, 20.5};
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double v = ((double)(s >> 11) * 0x1p-53 * 2 - 1) * lim;
        if (specials && i % 37 == 5) v = sp[(i / 37) % (int64_t)(sizeof sp / sizeof sp[0])];
        if (dt == NB_F32) ((float *)p)[i] = (float)v;
        else if (dt == NB_F64) ((double *)p)[i] = v;
        else if (dt == NB_I32) ((int32_t *)p)[i] = (int32_t)(v * 1000);
        else if (dt == NB_I64) ((int64_t *)p)[i] = (int64_t)(v * 1000);
    }
}

/* One case: fills `out` (bytes) with its results at `level`; returns the
 * baseline's status so a case the baseline rejects is skipped. */
typedef nb_status (*case_fn)(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap);

/* The dtype of the case's results (set by each case): NaN payloads and
 * signs are not compared (which NaN operand an x86 instruction passes on
 * depends on operand order, which the vectoriser may swap). */
static nb_dtype case_dt;

static bool same_elem(const char *a, const char *b, nb_dtype dt) {
    if (dt == NB_F32) {
        float x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        if (x != x && y != y) return true;
    } else if (dt == NB_F64) {
        double x, y;
        memcpy(&x, a, 8), memcpy(&y, b, 8);
        if (x != x && y != y) return true;
    }
    return !memcmp(a, b, nb_dtype_size(dt));
}

/* Compares a case's results at every level above the baseline with the baseline's. */
static void check_case(const char *name, case_fn fn, int arg, size_t cap) {
    char *ref = calloc(1, cap), *got = calloc(1, cap);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(got);
    nb_status st0 = fn(table(NB_CPU_ISA_BASELINE), arg, ref, cap);
    for (int l = NB_CPU_ISA_BASELINE + 1; st0 == NB_OK && l <= (int)nb_cpu_isa_max(); l++) {
        memset(got, 0, cap);
        nb_status st = fn(table(l), arg, got, cap);
        ck_assert_msg(st == NB_OK, "%s(%d) at %s: %s", name, arg, nb_cpu_isa_name(l), nb_last_error());
        size_t es = nb_dtype_size(case_dt), at = 0;
        while (at + es <= cap && same_elem(ref + at, got + at, case_dt)) at += es;
        ck_assert_msg(at + es > cap, "%s(%d): %s differs from baseline at byte %zu", name, arg, nb_cpu_isa_name(l), at);
    }
    free(ref);
    free(got);
}

/* ---- cases ---------------------------------------------------------------- */

/* Every unary op (arg: op * 2 + (float64 ? 1 : 0)) forward, then backward
 * from that output, contiguous and with a stride-2 input. */
static nb_status unary_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_unary_op op = (nb_unary_op)(arg / 2);
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt), n = N_EL;
    ck_assert(cap >= 4 * n * es);
    char *x = malloc(2 * n * es), *g = malloc(n * es);
    fill(x, dt, 2 * (int64_t)n, 7 + (unsigned)arg, 6, true);
    fill(g, dt, (int64_t)n, 11, 2, false);
    double alpha = op == NB_UNARY_POW_SCALAR ? 3.0 : 0.5;
    nb_kview xv = vec(x, dt, (int64_t)n, 1), xs = vec(x, dt, (int64_t)n, 2), gv = vec(g, dt, (int64_t)n, 1);
    nb_kview y = vec(out, dt, (int64_t)n, 1), y2 = vec(out + n * es, dt, (int64_t)n, 1);
    nb_kview gx = vec(out + 2 * n * es, dt, (int64_t)n, 1), gx2 = vec(out + 3 * n * es, dt, (int64_t)n, 1);
    nb_status st = k->unary(NULL, op, &y, &xv, alpha);
    if (!st) st = k->unary(NULL, op, &y2, &xs, alpha);
    if (!st) { /* ops without a backward are fine: the forward was compared */
        if (k->unary_backward(NULL, op, &gx, &gv, &xv, &y, alpha) == NB_OK)
            k->unary_backward(NULL, op, &gx2, &gv, &xs, &y2, alpha);
    }
    free(x);
    free(g);
    return st;
}

/* Every binary op (arg: op * 3 + dtype index of f32/f64/i32) with b broadcast along rows. */
static nb_status binary_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    static const nb_dtype dts[3] = {NB_F32, NB_F64, NB_I32};
    nb_binary_op op = (nb_binary_op)(arg / 3);
    nb_dtype dt = dts[arg % 3];
    bool cmp = op >= NB_BINARY_EQ && op <= NB_BINARY_LE;
    case_dt = cmp ? NB_BOOL : dt;
    size_t es = nb_dtype_size(dt);
    int64_t r = 33, c = 31;
    ck_assert(cap >= 2 * (size_t)(r * c) * es);
    char *a = malloc((size_t)(r * c) * es), *b = malloc((size_t)c * es);
    fill(a, dt, r * c, 3, 5, dt != NB_I32);
    fill(b, dt, c, 4, 5, dt != NB_I32);
    if (dt == NB_I32) /* no integer division by zero */
        for (int64_t i = 0; i < c; i++) ((int32_t *)b)[i] = ((int32_t *)b)[i] % 31 ? ((int32_t *)b)[i] % 31 : 1;
    nb_kview av = mat(a, dt, r, c), bv = {.data = b, .dtype = dt, .ndim = 2, .shape = {r, c}, .strides = {0, 1}};
    nb_kview o = mat(out, cmp ? NB_BOOL : dt, r, c);
    nb_kview at = {.data = a, .dtype = dt, .ndim = 2, .shape = {c, r}, .strides = {1, c}}; /* transposed */
    nb_kview o2 = mat(out + (size_t)(r * c) * es, cmp ? NB_BOOL : dt, c, r);
    nb_kview bt = {.data = b, .dtype = dt, .ndim = 2, .shape = {c, r}, .strides = {1, 0}};
    nb_status st = k->binary(NULL, op, &o, &av, &bv);
    if (!st) st = k->binary(NULL, op, &o2, &at, &bt);
    free(a);
    free(b);
    return st;
}

/* Casts between every pair of f32, f64, bf16, f16, i32, i64, u8, bool (arg: from * 8 + to). */
static nb_status cast_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    static const nb_dtype dts[8] = {NB_F32, NB_F64, NB_BF16, NB_F16, NB_I32, NB_I64, NB_U8, NB_BOOL};
    nb_dtype from = dts[arg / 8], to = dts[arg % 8];
    case_dt = to;
    int64_t n = N_EL;
    ck_assert(cap >= (size_t)n * 8);
    double *src64 = malloc((size_t)n * 8);
    fill(src64, NB_F64, n, 5, 300, true);
    char *src = malloc((size_t)n * 8);
    nb_kview s64 = vec(src64, NB_F64, n, 1), sv = vec(src, from, n, 1), ov = vec(out, to, n, 1);
    nb_status st = from == NB_F64 ? NB_OK : table(NB_CPU_ISA_BASELINE)->copy(NULL, &sv, &s64);
    if (!st) st = k->copy(NULL, &ov, from == NB_F64 ? &s64 : &sv);
    free(src64);
    free(src);
    return st;
}

/* sum/max/min/prod over dim 0, dim 1 and all of a [67, 45] float32/float64 (arg: op * 2 + f64). */
static nb_status reduce_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_reduce_op op = (nb_reduce_op)(arg / 2);
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t r = 67, c = 45;
    ck_assert(cap >= (size_t)(r + c + 1) * es);
    char *x = malloc((size_t)(r * c) * es);
    fill(x, dt, r * c, 9, op == NB_REDUCE_PROD ? 1.5 : 10, op != NB_REDUCE_PROD);
    nb_kview xv = mat(x, dt, r, c);
    nb_kview o0 = mat(out, dt, 1, c), o1 = mat(out + (size_t)c * es, dt, r, 1), oa = mat(out + (size_t)(r + c) * es, dt, 1, 1);
    nb_status st = k->reduce(NULL, op, &o0, &xv, 1);
    if (!st) st = k->reduce(NULL, op, &o1, &xv, 1);
    if (!st) st = k->reduce(NULL, op, &oa, &xv, 0.5);
    free(x);
    return st;
}

/* softmax / log_softmax forward and backward along dim 1 (rows) and dim 0 (columns) (arg: log * 2 + f64). */
static nb_status softmax_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    bool log = arg / 2;
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t r = 19, c = 203, n = r * c;
    ck_assert(cap >= 4 * (size_t)n * es);
    char *x = malloc((size_t)n * es), *g = malloc((size_t)n * es);
    fill(x, dt, n, 13, 30, false);
    fill(g, dt, n, 14, 1, false);
    nb_kview xv = mat(x, dt, r, c), gv = mat(g, dt, r, c);
    nb_kview y[4];
    for (int i = 0; i < 4; i++) y[i] = mat(out + (size_t)i * (size_t)n * es, dt, r, c);
    nb_status st = k->softmax(NULL, &y[0], &xv, 1, log);
    if (!st) st = k->softmax(NULL, &y[1], &xv, 0, log);
    if (!st) st = k->softmax_backward(NULL, &y[2], &gv, &y[0], 1, log);
    if (!st) st = k->softmax_backward(NULL, &y[3], &gv, &y[1], 0, log);
    free(x);
    free(g);
    return st;
}

/* cross-entropy forward and backward over [37, 3001] logits, one target ignored (arg: f64). */
static nb_status ce_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t r = 37, c = 3001;
    ck_assert(cap >= (size_t)(r * c + 3 * r) * es);
    char *x = malloc((size_t)(r * c) * es), *gl = malloc((size_t)r * es);
    int64_t t[37];
    fill(x, dt, r * c, 17, 20, false);
    fill(gl, dt, r, 18, 1, false);
    for (int64_t i = 0; i < r; i++) t[i] = i == 3 ? -100 : (i * 977) % c;
    nb_kview xv = mat(x, dt, r, c), tv = vec(t, NB_I64, r, 1), glv = vec(gl, dt, r, 1);
    nb_kview loss = vec(out, dt, r, 1), lse = vec(out + (size_t)r * es, dt, r, 1);
    nb_kview gx = mat(out + 2 * (size_t)r * es, dt, r, c), valid = vec(out + (size_t)(2 * r + r * c) * es, dt, r, 1);
    nb_status st = k->cross_entropy(NULL, &loss, &lse, &valid, &xv, &tv, -100);
    if (!st) st = k->cross_entropy_backward(NULL, &gx, &glv, &xv, &lse, &tv, -100);
    free(x);
    free(gl);
    return st;
}

/* layer_norm (arg 0, 1: f32, f64) and rms_norm (arg 2, 3) forward and backward over [29, 203]. */
static nb_status norm_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t r = 29, c = 203, n = r * c;
    ck_assert(cap >= (size_t)(2 * n + 4 * r + 3 * c) * es);
    char *x = malloc((size_t)n * es), *gy = malloc((size_t)n * es), *w = malloc((size_t)c * es), *b = malloc((size_t)c * es);
    fill(x, dt, n, 21, 3, false);
    fill(gy, dt, n, 22, 1, false);
    fill(w, dt, c, 23, 2, false);
    fill(b, dt, c, 24, 2, false);
    nb_kview xv = mat(x, dt, r, c), gyv = mat(gy, dt, r, c), wv = vec(w, dt, c, 1), bv = vec(b, dt, c, 1);
    char *p = out;
    nb_kview y = mat(p, dt, r, c), gx = mat(p + (size_t)n * es, dt, r, c);
    p += 2 * (size_t)n * es;
    nb_kview mean = vec(p, dt, r, 1), rstd = vec(p + (size_t)r * es, dt, r, 1);
    p += 2 * (size_t)r * es;
    nb_kview gw = vec(p, dt, c, 1), gb = vec(p + (size_t)c * es, dt, c, 1);
    nb_status st;
    if (arg < 2) {
        nb_layer_norm_args a = {&xv, &wv, &bv, 1e-5};
        st = k->layer_norm(NULL, &y, &mean, &rstd, &a);
        if (!st) st = k->layer_norm_backward(NULL, &gx, &gw, &gb, &gyv, &mean, &rstd, &a);
    } else {
        st = k->rms_norm(NULL, &y, &rstd, &xv, &wv, 1e-6);
        if (!st) st = k->rms_norm_backward(NULL, &gx, &gw, &gyv, &xv, &wv, &rstd);
    }
    free(x), free(gy), free(w), free(b);
    return st;
}

/* uniform, normal and bernoulli fills at an odd offset (arg: dist * 2 + f64). */
static nb_status random_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    int64_t n = N_EL;
    ck_assert(cap >= (size_t)n * 8);
    nb_kview o = vec(out, dt, n, 1);
    return k->random(NULL, &o, (nb_rng_dist)(arg / 2), 0.3, 2.0, (nb_philox_state){1234, 77, NULL});
}

/* Adam, AdamW (amsgrad, weight decay) and SGD with momentum, three steps (arg: kind * 2 + f64). */
static nb_status optim_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg % 2 ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t n = N_EL;
    ck_assert(cap >= 4 * (size_t)n * es);
    char *g = malloc((size_t)n * es);
    fill(out, dt, n, 31, 1, false);
    memset(out + (size_t)n * es, 0, 3 * (size_t)n * es);
    nb_kview p = vec(out, dt, n, 1), gv = vec(g, dt, n, 1), m = vec(out + (size_t)n * es, dt, n, 1);
    nb_kview v = vec(out + 2 * (size_t)n * es, dt, n, 1), vmax = vec(out + 3 * (size_t)n * es, dt, n, 1);
    nb_status st = NB_OK;
    for (int s = 1; s <= 3 && !st; s++) {
        fill(g, dt, n, 32 + (unsigned)s, 1, false);
        int kind = arg / 2;
        if (kind < 2) {
            nb_adam_hyper h = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                               .weight_decay = kind ? 0.01 : 0, .decoupled = kind == 1, .amsgrad = kind == 1, .step = s};
            st = k->adam_step(NULL, &p, &gv, &m, &v, &vmax, &h);
        } else {
            nb_sgd_hyper h = {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true, .first_step = s == 1};
            st = k->sgd_step(NULL, &p, &gv, &m, &h);
        }
    }
    free(g);
    return st;
}

/* Fused attention forward and backward, [2*3, 37, 16] with a causal mask and dropout (arg: f64). */
static nb_status attention_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg ? NB_F64 : NB_F32;
    case_dt = dt;
    size_t es = nb_dtype_size(dt);
    int64_t B = 6, L = 37, E = 16, n = B * L * E;
    ck_assert(cap >= (size_t)(5 * n + B * L) * es);
    char *q = malloc((size_t)n * es), *kk = malloc((size_t)n * es), *v = malloc((size_t)n * es), *go = malloc((size_t)n * es);
    fill(q, dt, n, 41, 2, false), fill(kk, dt, n, 42, 2, false), fill(v, dt, n, 43, 2, false), fill(go, dt, n, 44, 1, false);
    nb_kview qv = {.data = q, .dtype = dt, .ndim = 3, .shape = {B, L, E}, .strides = {L * E, E, 1}};
    nb_kview kv = qv, vv = qv, gov = qv, o = qv, gq = qv, gk = qv, gv = qv;
    kv.data = kk, vv.data = v, gov.data = go;
    o.data = out, gq.data = out + (size_t)n * es, gk.data = out + 2 * (size_t)n * es, gv.data = out + 3 * (size_t)n * es;
    nb_kview lse = {.data = out + 4 * (size_t)n * es, .dtype = dt, .ndim = 2, .shape = {B, L}, .strides = {L, 1}};
    nb_attention_args a = {&qv, &kv, &vv, NULL, true, 0.25, 0.1, {99, 5, NULL}, NULL, false};
    nb_status st = k->attention(nb_backend_get(NB_CPU), &o, &lse, &a);
    if (!st) st = k->attention_backward(nb_backend_get(NB_CPU), &gq, &gk, &gv, &gov, &o, &lse, &a);
    free(q), free(kk), free(v), free(go);
    return st;
}

/* The int8 weight-only product, x [3, N_EL] by int8 [5, N_EL] with scales
 * and a bias (arg: 0 float32, 1 float64, 2 bfloat16: the top halves of
 * float32 draws). */
static nb_status linear_int8_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    nb_dtype dt = arg == 1 ? NB_F64 : arg == 2 ? NB_BF16 : NB_F32;
    case_dt = dt;
    const int64_t M = 3, N = 5, K = N_EL;
    size_t es = nb_dtype_size(dt);
    ck_assert(cap >= (size_t)(M * N) * es);
    char *x = malloc((size_t)(M * K) * 8), *b = malloc((size_t)N * 8);
    int8_t *q = malloc((size_t)(N * K));
    float sc[5];
    fill(x, arg == 1 ? NB_F64 : NB_F32, M * K, 51, 2, false), fill(b, arg == 1 ? NB_F64 : NB_F32, N, 52, 1, false);
    fill(sc, NB_F32, N, 53, 0.02, false);
    for (int64_t i = 0; i < N * K; i++) q[i] = (int8_t)((i * 37 + 11) % 255 - 127);
    if (arg == 2) { /* bfloat16: the top half of each float32 */
        for (int64_t i = 0; i < M * K; i++) memmove(x + 2 * i, x + 4 * i + 2, 2);
        for (int64_t i = 0; i < N; i++) memmove(b + 2 * i, b + 4 * i + 2, 2);
    }
    nb_kview xv = mat(x, dt, M, K), qv = mat(q, NB_I8, N, K), sv = vec(sc, NB_F32, N, 1), bv = vec(b, dt, N, 1);
    nb_kview y = mat(out, dt, M, N);
    nb_status st = k->linear_int8(nb_backend_get(NB_CPU), &y, &xv, &qv, &sv, &bv); /* 16-bit: scratch from it */
    free(x), free(b), free(q);
    return st;
}

/* BitNet's packed product, x [9, K] (arg 0: K = 300, three 128-weight
 * groups, a padded and unpaired last one; arg 1: K = 512, four) by codes of
 * [7, K] with a bias, float32: the AVX-512 level takes vpdpbusd where the
 * CPU has VNNI (blocks of 4 rows and 2 columns, then the rest). */
static nb_status bitnet_case(const nb_cpu_isa_kernels *k, int arg, char *out, size_t cap) {
    case_dt = NB_F32;
    const int64_t M = 9, N = 7, K = arg ? 512 : 300, kp = (K + 127) / 128 * 128;
    ck_assert(cap >= (size_t)(M * N) * 4);
    float *x = malloc(sizeof(float) * (size_t)(M * K)), b[7], sw = 0.37f;
    uint8_t *p = malloc((size_t)(N * kp / 4));
    fill(x, NB_F32, M * K, 61 + (unsigned)arg, 3, false), fill(b, NB_F32, N, 62, 1, false);
    for (int64_t i = 0; i < N * kp / 4; i++) p[i] = (uint8_t)((i * 73 + 5) % 256); /* codes 0..3 (3: not made by packing, still summed) */
    nb_kview xv = mat(x, NB_F32, M, K), pv = mat(p, NB_U8, N, kp / 4), sv = vec(&sw, NB_F32, 1, 1), bv = vec(b, NB_F32, N, 1);
    nb_kview y = mat(out, NB_F32, M, N);
    nb_status st = k->bitnet_linear(nb_backend_get(NB_CPU), &y, &xv, &pv, &sv, &bv);
    free(x), free(p);
    return st;
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(test_isa_levels_match_baseline) {
    const size_t cap = 2 * 1024 * 1024;
    for (int t = 0; t < 2; t++) { /* one thread and the default: the same bits either way */
        nb_set_num_threads(t ? 0 : 1);
        for (int op = 0; op < NB_UNARY_OP_COUNT; op++)
            for (int f64 = 0; f64 < 2; f64++) check_case("unary", unary_case, op * 2 + f64, cap);
        for (int op = 0; op < NB_BINARY_OP_COUNT; op++)
            for (int d = 0; d < 3; d++) check_case("binary", binary_case, op * 3 + d, cap);
        for (int c = 0; c < 64; c++) check_case("cast", cast_case, c, cap);
        for (int op = 0; op <= NB_REDUCE_PROD; op++)
            for (int f64 = 0; f64 < 2; f64++) check_case("reduce", reduce_case, op * 2 + f64, cap);
        for (int a = 0; a < 4; a++) check_case("softmax", softmax_case, a, cap);
        for (int a = 0; a < 2; a++) check_case("cross_entropy", ce_case, a, cap);
        for (int a = 0; a < 4; a++) check_case("norm", norm_case, a, cap);
        for (int a = 0; a < 6; a++) check_case("random", random_case, a, cap);
        for (int a = 0; a < 6; a++) check_case("optim", optim_case, a, cap);
        for (int a = 0; a < 2; a++) check_case("attention", attention_case, a, cap);
        for (int a = 0; a < 3; a++) check_case("linear_int8", linear_int8_case, a, cap);
        for (int a = 0; a < 2; a++) check_case("bitnet_linear", bitnet_case, a, cap);
    }
}
END_TEST

/* nb_cpu_isa_select switches what the public ops run, and the info line says which. */
START_TEST(test_isa_select_and_info) {
    nb_cpu_isa top = nb_cpu_isa_max();
    ck_assert_int_eq(nb_cpu_isa_select(NB_CPU_ISA_COUNT), NB_ERR_INVALID_ARG);
    if (top < NB_CPU_ISA_AVX512) ck_assert_int_eq(nb_cpu_isa_select(NB_CPU_ISA_AVX512), NB_ERR_UNSUPPORTED);
    nb_generator g = nb_generator_new(5);
    nb_scope *outer = nb_scope_begin(); /* x belongs to it (results belong to the innermost scope) */
    nb_tensor *x = nb_randn(NB_SHAPE(64, 300), NB_F32, &g);
    float ref[64 * 300], got[64 * 300];
    for (int l = NB_CPU_ISA_BASELINE; l <= (int)top; l++) {
        NB_CK_OK(nb_cpu_isa_select((nb_cpu_isa)l));
        ck_assert_int_eq(nb_cpu_isa_get(), l);
        char want[32];
        snprintf(want, sizeof want, "isa=%s ", nb_cpu_isa_name((nb_cpu_isa)l));
        ck_assert_msg(strstr(nb_backend_info(NB_CPU), want), "%s", nb_backend_info(NB_CPU));
        nb_scope *s = nb_scope_begin();
        nb_tensor *y = nb_log_softmax(nb_gelu(x, NB_GELU_ERF), 1);
        NB_CK_OK(nb_to_host(y, l ? got : ref, sizeof ref));
        nb_scope_end(s);
        if (l) ck_assert_msg(!memcmp(ref, got, sizeof ref), "gelu + log_softmax at %s", nb_cpu_isa_name((nb_cpu_isa)l));
    }
    NB_CK_OK(nb_cpu_isa_select(top));
    nb_scope_end(outer);
}
END_TEST

/* ---- 16-bit elementwise kernels ------------------------------------------------ */

/* The bits of t and u (one dtype) are equal; NaNs match any NaN (as
 * same_elem: which NaN an operation passes on may depend on the code path). */
static void ck_same_bits(const char *what, const nb_tensor *t, const nb_tensor *u) {
    nb_dtype dt = nb_dtype_of(t);
    size_t es = nb_dtype_size(dt), b = (size_t)nb_numel(t) * es;
    char *x = malloc(b + 1), *y = malloc(b + 1);
    NB_CK_OK(nb_to_host(t, x, b));
    NB_CK_OK(nb_to_host(u, y, b));
    for (size_t at = 0; at < b; at += es) {
        if (nb_dtype_is_16bit(dt)) {
            uint16_t h, k, inf = dt == NB_BF16 ? 0x7f80 : 0x7c00;
            memcpy(&h, x + at, 2), memcpy(&k, y + at, 2);
            if ((h & 0x7fff) > inf && (k & 0x7fff) > inf) continue;
        } else if (same_elem(x + at, y + at, dt)) {
            continue;
        }
        ck_assert_msg(!memcmp(x + at, y + at, es), "%s: element %zu differs", what, at / es);
    }
    free(x), free(y);
}

/* A CPU tensor of n elements of dt (fill's values, specials included). */
static nb_tensor *filled(int64_t n, nb_dtype dt, unsigned seed, double lim) {
    double *v = malloc(sizeof(double) * (size_t)n);
    fill(v, NB_F64, n, seed, lim, true);
    nb_tensor *t = nb_to_dtype(nb_from_data_on(v, NB_SHAPE(n), NB_F64, NB_CPU), dt);
    free(v);
    NB_CK_NOTNULL(t);
    return t;
}

static nb_tensor *empty1(int64_t n, nb_dtype dt) { return nb_empty_on(1, (int64_t[]){n}, dt, NB_CPU); }

/* bfloat16/float16 unary, unary_backward and binary run the float32 loops
 * a chunk at a time (backend/cpu/iter16.c): each result must be the
 * float32 kernel's on the widened inputs, rounded once, for contiguous,
 * strided, broadcast and in-place operands longer than one chunk. */
START_TEST(test_half16_matches_float32) {
    nb_backend *be = nb_backend_get(NB_CPU);
    const int64_t n = N_EL;
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F16 : NB_BF16;
        for (int op = 0; op < NB_UNARY_OP_COUNT; op++)
            for (int strided = 0; strided < 2; strided++) {
                nb_scope *s = nb_scope_begin();
                char what[96];
                snprintf(what, sizeof what, "%s %s%s", nb_unary_name((nb_unary_op)op), nb_dtype_name(dt),
                         strided ? " strided" : "");
                double alpha = op == NB_UNARY_POW_SCALAR ? 3.0 : 0.5;
                nb_tensor *base = filled(2 * n, dt, 7 + (unsigned)op, 6), *base32 = nb_to_dtype(base, NB_F32);
                nb_kview x = nb_kview_of(base), x32 = nb_kview_of(base32);
                x.shape[0] = x32.shape[0] = n;
                x.strides[0] = x32.strides[0] = strided ? 2 : 1;
                nb_tensor *y = empty1(n, dt), *y32 = empty1(n, NB_F32);
                nb_kview vy = nb_kview_of(y), vy32 = nb_kview_of(y32);
                NB_CK_OK(nb_kernel_unary(be, (nb_unary_op)op, &vy, &x, alpha));
                NB_CK_OK(nb_kernel_unary(be, (nb_unary_op)op, &vy32, &x32, alpha));
                ck_same_bits(what, y, nb_to_dtype(y32, dt));
                /* backward from the 16-bit y (widened for the float32 reference) */
                nb_tensor *g = filled(n, dt, 11, 2), *g32 = nb_to_dtype(g, NB_F32), *yw = nb_to_dtype(y, NB_F32);
                nb_tensor *gx = empty1(n, dt), *gx32 = empty1(n, NB_F32);
                nb_kview vg = nb_kview_of(g), vg32 = nb_kview_of(g32), vyw = nb_kview_of(yw), vgx = nb_kview_of(gx),
                         vgx32 = nb_kview_of(gx32);
                NB_CK_OK(nb_kernel_unary_backward(be, (nb_unary_op)op, &vgx, &vg, &x, &vy, alpha));
                NB_CK_OK(nb_kernel_unary_backward(be, (nb_unary_op)op, &vgx32, &vg32, &x32, &vyw, alpha));
                char bw[112];
                snprintf(bw, sizeof bw, "%s backward", what);
                ck_same_bits(bw, gx, nb_to_dtype(gx32, dt));
                if (!strided) { /* in place: out is x */
                    nb_tensor *z = nb_contiguous(nb_narrow(base, 0, 0, n));
                    nb_kview vz = nb_kview_of(z);
                    NB_CK_OK(nb_kernel_unary(be, (nb_unary_op)op, &vz, &vz, alpha));
                    char ip[112];
                    snprintf(ip, sizeof ip, "%s in place", what);
                    ck_same_bits(ip, z, y);
                }
                nb_scope_end(s);
            }
        for (int op = 0; op < NB_BINARY_OP_COUNT; op++) {
            nb_scope *s = nb_scope_begin();
            bool cmp = op >= NB_BINARY_EQ && op <= NB_BINARY_LE;
            nb_tensor *a = filled(33 * 31, dt, 31, 4), *b = filled(31, dt, 32, 4);
            nb_tensor *a32 = nb_to_dtype(a, NB_F32), *b32 = nb_to_dtype(b, NB_F32);
            nb_tensor *o = nb_empty_on(2, (int64_t[]){33, 31}, cmp ? NB_BOOL : dt, NB_CPU);
            nb_tensor *o32 = nb_empty_on(2, (int64_t[]){33, 31}, cmp ? NB_BOOL : NB_F32, NB_CPU);
            nb_kview va = mat(nb_kview_of(a).data, dt, 33, 31), va32 = mat(nb_kview_of(a32).data, NB_F32, 33, 31);
            nb_kview vb = va, vb32 = va32; /* b along rows: stride 0 over the rows */
            vb.data = nb_kview_of(b).data, vb32.data = nb_kview_of(b32).data;
            vb.strides[0] = vb32.strides[0] = 0;
            nb_kview vo = nb_kview_of(o), vo32 = nb_kview_of(o32);
            nb_status st = nb_kernel_binary(be, (nb_binary_op)op, &vo, &va, &vb);
            nb_status st32 = nb_kernel_binary(be, (nb_binary_op)op, &vo32, &va32, &vb32);
            nb_clear_error();
            ck_assert_int_eq(st, st32);
            if (st == NB_OK) ck_same_bits(nb_binary_name((nb_binary_op)op), o, cmp ? o32 : nb_to_dtype(o32, dt));
            nb_scope_end(s);
        }
    }
}
END_TEST

Suite *nb_suite_cpu_isa(void) {
    Suite *s = suite_create("cpu_isa");
    TCase *tc = tcase_create("levels");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_isa_levels_match_baseline);
    tcase_add_test(tc, test_isa_select_and_info);
    tcase_add_test(tc, test_half16_matches_float32);
    suite_add_tcase(s, tc);
    return s;
}
