/* test_cuda_elementwise.c - the CUDA backend's elementwise, random and
 * optimizer slots (backend/cuda/unary.cu, binary.cu, random.cu, optim.cu)
 * against the CPU backend's on the same input bits, on shapes the op
 * harness's [2, 3] cases do not reach: the vectorised rows path (flat
 * tensors with a tail, bias and per-row broadcasts, 4-d inputs that merge
 * to two dims), its fallbacks (misaligned views, odd widths, transposed
 * views, scalars, 0-d and empty tensors), in-place updates, integer
 * division by zero through the device error word, the Philox fills
 * (uniform and bernoulli bit for bit, normal within 1e-12), and Adam/SGD
 * (multi-tensor launches over more than one launch's worth of tensors, bit
 * for bit against the CPU and against the single-tensor slot). The slots
 * are called directly, so no other family's kernels are needed. Without a
 * CUDA device only the CPU's multi-tensor optimizer checks run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"
#include "nb_test.h"
#include "suites.h"

/* ---- helpers ---------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double unit(void) { /* xorshift64*: [0, 1) */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* Values drawn in [lo, hi); integers are floored; nonzero: 0 becomes 3 (divisors). */
typedef struct {
    double lo, hi;
    bool nonzero;
} range;

/* A CPU tensor of n elements of dt with values in r. */
static nb_tensor *host_base(int64_t n, nb_dtype dt, range r) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = r.lo + (r.hi - r.lo) * unit();
        v[i] = nb_dtype_is_float(dt) ? x : floor(x);
        if (r.nonzero && v[i] == 0) v[i] = 3;
    }
    nb_tensor *t = nb_to_dtype(nb_from_data_on(v, NB_SHAPE(n), NB_F64, NB_CPU), dt);
    free(v);
    NB_CK_NOTNULL(t);
    return t;
}

/* A view geometry over a 1-d base of `base` elements. */
typedef struct {
    int ndim;
    int64_t shape[4], strides[4], offset, base;
} geom;

typedef struct {
    nb_tensor *c, *g; /* the same values on the CPU and on cuda:0 */
} pair;

static pair make_pair(const geom *gm, nb_dtype dt, range r, nb_device dev) {
    nb_tensor *bc = host_base(gm->base, dt, r), *bg = nb_to_device(bc, dev);
    NB_CK_NOTNULL(bg);
    pair p = {nb_tensor_view_of(bc, gm->ndim, gm->shape, gm->strides, gm->offset),
              nb_tensor_view_of(bg, gm->ndim, gm->shape, gm->strides, gm->offset)};
    NB_CK_NOTNULL(p.c);
    NB_CK_NOTNULL(p.g);
    return p;
}

static pair empty_pair(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev) {
    pair p = {nb_empty_on(ndim, shape, dt, NB_CPU), nb_empty_on(ndim, shape, dt, dev)};
    NB_CK_NOTNULL(p.c);
    NB_CK_NOTNULL(p.g);
    return p;
}

static nb_backend *cpu_be(void) { return nb_backend_get(NB_CPU); }

/* Both tensors' bytes in C order must be equal (first difference reported). */
static void ck_bits(const char *what, const nb_tensor *c, const nb_tensor *g) {
    int64_t n = nb_numel(c);
    size_t es = nb_dtype_size(nb_dtype_of(c)), bytes = (size_t)n * es;
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    NB_CK_OK(nb_to_host(c, x, bytes));
    NB_CK_OK(nb_to_host(g, y, bytes));
    for (int64_t i = 0; i < n; i++)
        if (memcmp(x + (size_t)i * es, y + (size_t)i * es, es)) {
            double *a = nb_test_values_of(c), *b = nb_test_values_of(g);
            ck_abort_msg("%s: element %lld differs: cpu %.17g, cuda %.17g", what, (long long)i, a[i], b[i]);
        }
    free(x), free(y);
}

/* |cuda - cpu| <= tol (1 + |cpu|), NaN where NaN, equal infinities. */
static void ck_near(const char *what, const nb_tensor *c, const nb_tensor *g, double tol) {
    double *a = nb_test_values_of(c), *b = nb_test_values_of(g);
    for (int64_t i = 0; i < nb_numel(c); i++) {
        bool ok = isnan(a[i]) ? isnan(b[i]) : isinf(a[i]) ? b[i] == a[i] : fabs(b[i] - a[i]) <= tol * (1 + fabs(a[i]));
        ck_assert_msg(ok, "%s: element %lld: cpu %.17g, cuda %.17g", what, (long long)i, a[i], b[i]);
    }
    free(a), free(b);
}

static double tol_of(nb_dtype dt) { return dt == NB_F64 ? 1e-12 : dt == NB_F32 ? 2e-5 : 0; }

#define FOR_CUDA(dev)                                                                             \
    for (int dev##_i = 0; dev##_i < nb_device_count(NB_DEVICE_CUDA); dev##_i++)                   \
        for (nb_device dev = NB_CUDA(dev##_i); dev.index == dev##_i; dev.index = -1)

/* ---- binary: paths and broadcasts ----------------------------------------------------- */

/* a, b geometries of one broadcast shape (out is fresh and dense) */
typedef struct {
    const char *name;
    geom a, b;
} bin_case;

#define R_ 37
#define C_ 64
static const bin_case bin_cases[] = {
    {"row bias [37, 64] + [64]", {2, {R_, C_}, {C_, 1}, 0, R_ * C_}, {2, {R_, C_}, {0, 1}, 0, C_}},
    {"per-row [37, 64] * [37, 1]", {2, {R_, C_}, {C_, 1}, 0, R_ * C_}, {2, {R_, C_}, {1, 0}, 0, R_}},
    {"odd width [5, 1027] + [1027]", {2, {5, 1027}, {1027, 1}, 0, 5 * 1027}, {2, {5, 1027}, {0, 1}, 0, 1027}},
    {"flat 100003", {1, {100003}, {1}, 0, 100003}, {1, {100003}, {1}, 0, 100003}},
    {"misaligned flat 100003", {1, {100003}, {1}, 1, 100004}, {1, {100003}, {1}, 0, 100003}},
    {"transposed [37, 64]", {2, {R_, C_}, {1, R_}, 0, R_ * C_}, {2, {R_, C_}, {0, 1}, 0, C_}},
    {"scalar [37, 64] op ()", {2, {R_, C_}, {C_, 1}, 0, R_ * C_}, {2, {R_, C_}, {0, 0}, 0, 1}},
    {"4-d [2, 3, 4, 5] + [4, 5]", {4, {2, 3, 4, 5}, {60, 20, 5, 1}, 0, 120}, {4, {2, 3, 4, 5}, {0, 0, 5, 1}, 0, 20}},
    {"row stride [37, 64] of [37, 68]", {2, {R_, C_}, {68, 1}, 4, R_ * 68 + 4}, {2, {R_, C_}, {0, 1}, 0, C_}},
    {"0-d", {0, {0}, {0}, 0, 1}, {0, {0}, {0}, 0, 1}},
    {"empty [0, 5]", {2, {0, 5}, {5, 1}, 0, 0}, {2, {0, 5}, {0, 1}, 0, 5}},
};
#define N_BIN_CASES ((int)(sizeof bin_cases / sizeof bin_cases[0]))

static bool bin_is_compare(nb_binary_op op) { return op >= NB_BINARY_EQ && op <= NB_BINARY_LE; }

/* The ops a dtype takes (the CPU's table). */
static bool bin_takes(nb_binary_op op, nb_dtype dt) {
    bool fl = dt == NB_F32 || dt == NB_F64, in = dt == NB_I32 || dt == NB_I64 || dt == NB_U8, b = dt == NB_BOOL;
    switch (op) {
    case NB_BINARY_ADD: case NB_BINARY_MUL: case NB_BINARY_MAXIMUM: case NB_BINARY_MINIMUM: return true;
    case NB_BINARY_DIV: case NB_BINARY_ATAN2: return fl;
    case NB_BINARY_BITWISE_AND: case NB_BINARY_BITWISE_OR: case NB_BINARY_BITWISE_XOR: return in || b;
    case NB_BINARY_LSHIFT: case NB_BINARY_RSHIFT: return in;
    default: return bin_is_compare(op) || fl || in;
    }
}

static range bin_range(nb_binary_op op, nb_dtype dt, int operand) {
    if (dt == NB_BOOL) return (range){0, 2, false};
    bool div = op == NB_BINARY_DIV || (op >= NB_BINARY_REMAINDER && op <= NB_BINARY_DIV_FLOOR && op != NB_BINARY_ATAN2);
    if (dt == NB_U8) {
        if (operand && div) return (range){1, 10, true};
        if (operand && op >= NB_BINARY_LSHIFT) return (range){0, 12, false};
        if (operand && op == NB_BINARY_POW) return (range){0, 9, false};
        return (range){0, 256, false};
    }
    if (!nb_dtype_is_float(dt)) {
        if (operand && op >= NB_BINARY_LSHIFT) return (range){-3, 70, false};
        if (operand && op == NB_BINARY_POW) return (range){-3, 12, false};
        if (operand && div) return (range){-8, 8, true};
        return (range){-1000, 1000, false};
    }
    if (op == NB_BINARY_POW) return operand ? (range){-3, 3, false} : (range){0.1, 3, false};
    return operand && div ? (range){0.25, 4, false} : (range){-4, 4, false};
}

static void bin_check(nb_device dev, const bin_case *bc, nb_binary_op op, nb_dtype dt, bool in_place) {
    char what[160];
    snprintf(what, sizeof what, "binary op %d %s %s%s", (int)op, nb_dtype_name(dt), bc->name, in_place ? " in place" : "");
    nb_scope *s = nb_scope_begin();
    pair a = make_pair(&bc->a, dt, bin_range(op, dt, 0), dev), b = make_pair(&bc->b, dt, bin_range(op, dt, 1), dev);
    nb_dtype odt = bin_is_compare(op) ? NB_BOOL : dt;
    pair o = in_place ? a : empty_pair(bc->a.ndim, bc->a.shape, odt, dev);
    nb_kview oc = nb_kview_of(o.c), og = nb_kview_of(o.g), ac = nb_kview_of(a.c), ag = nb_kview_of(a.g);
    nb_kview bcv = nb_kview_of(b.c), bgv = nb_kview_of(b.g);
    nb_backend *be = nb_backend_get(dev);
    NB_CK_OK(nb_kernel_binary(cpu_be(), op, &oc, &ac, &bcv));
    NB_CK_OK(nb_kernel_binary(be, op, &og, &ag, &bgv));
    NB_CK_OK(nb_device_synchronize(dev));
    if (nb_dtype_is_float(dt) && (op == NB_BINARY_POW || op == NB_BINARY_ATAN2)) ck_near(what, o.c, o.g, tol_of(dt));
    else ck_bits(what, o.c, o.g); /* correctly rounded or exact: the same bits */
    nb_scope_end(s);
}

static const nb_dtype all6[] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8, NB_BOOL};

START_TEST(test_cuda_binary_paths) {
    FOR_CUDA(dev) {
        for (int k = 0; k < N_BIN_CASES; k++)
            for (int d = 0; d < 6; d++)
                for (int op = 0; op < NB_BINARY_OP_COUNT; op++) {
                    if (!bin_takes((nb_binary_op)op, all6[d])) continue;
                    bin_check(dev, &bin_cases[k], (nb_binary_op)op, all6[d], false);
                    if (!bin_is_compare((nb_binary_op)op)) bin_check(dev, &bin_cases[k], (nb_binary_op)op, all6[d], true);
                }
    }
}
END_TEST

/* An integer division by zero writes 0 and is reported at the next sync
 * point as "<op>: integer division by zero", once. */
START_TEST(test_cuda_int_division_by_zero) {
    FOR_CUDA(dev) {
        static const nb_binary_op ops[] = {NB_BINARY_REMAINDER, NB_BINARY_FMOD, NB_BINARY_DIV_TRUNC, NB_BINARY_DIV_FLOOR};
        static const char *const names[] = {"remainder", "fmod", "div", "div"};
        for (int k = 0; k < 4; k++)
            for (int d = 2; d < 5; d++) {
                nb_scope *s = nb_scope_begin();
                nb_dtype dt = all6[d];
                double av[4] = {7, 5, 3, 1}, bv[4] = {2, 0, 1, 0};
                nb_tensor *a = nb_to_device(nb_to_dtype(nb_from_data_on(av, NB_SHAPE(4), NB_F64, NB_CPU), dt), dev);
                nb_tensor *b = nb_to_device(nb_to_dtype(nb_from_data_on(bv, NB_SHAPE(4), NB_F64, NB_CPU), dt), dev);
                nb_tensor *o = nb_empty_on(NB_SHAPE(4), dt, dev);
                NB_CK_NOTNULL(a), NB_CK_NOTNULL(b), NB_CK_NOTNULL(o);
                nb_kview vo = nb_kview_of(o), va = nb_kview_of(a), vb = nb_kview_of(b);
                nb_backend *be = nb_backend_get(dev);
                NB_CK_OK(nb_kernel_binary(be, ops[k], &vo, &va, &vb)); /* enqueued: no error yet */
                ck_assert_int_eq(nb_device_synchronize(dev), NB_ERR_INVALID_ARG);
                char want[64];
                snprintf(want, sizeof want, "%s: integer division by zero", names[k]);
                ck_assert_msg(strstr(nb_last_error(), want), "message \"%s\" lacks \"%s\"", nb_last_error(), want);
                NB_CK_OK(nb_device_synchronize(dev)); /* reported once */
                double *ov = nb_test_values_of(o);
                ck_assert_msg(ov[1] == 0 && ov[3] == 0, "a zero divisor writes 0 (%g, %g)", ov[1], ov[3]);
                free(ov);
                nb_scope_end(s);
            }
    }
}
END_TEST

/* ---- unary and unary_backward --------------------------------------------------------- */

static double un_alpha(nb_unary_op op) {
    switch (op) {
    case NB_UNARY_ADD_SCALAR: return 1.75;
    case NB_UNARY_MUL_SCALAR: return -2.5;
    case NB_UNARY_POW_SCALAR: return 2.5;
    case NB_UNARY_ROUND: return 1; /* decimals */
    case NB_UNARY_LEAKY_RELU: return 0.1;
    case NB_UNARY_ELU: return 1.3;
    case NB_UNARY_SOFTPLUS: return 20; /* threshold */
    case NB_UNARY_HARDTANH_MIN: return -1;
    case NB_UNARY_HARDTANH_MAX: return 1;
    default: return 0;
    }
}

static range un_range(nb_unary_op op, nb_dtype dt) {
    if (dt == NB_U8) return (range){0, 256, false};
    if (!nb_dtype_is_float(dt)) return (range){-1000, 1000, false};
    switch (op) {
    case NB_UNARY_LOG: case NB_UNARY_SQRT: case NB_UNARY_POW_SCALAR: case NB_UNARY_RSQRT: case NB_UNARY_LOG1P:
    case NB_UNARY_LOG2: case NB_UNARY_LOG10: return (range){0.1, 5, false};
    case NB_UNARY_ASIN: case NB_UNARY_ACOS: case NB_UNARY_ATANH: case NB_UNARY_TAN: return (range){-0.9, 0.9, false};
    case NB_UNARY_ACOSH: return (range){1.2, 4, false};
    case NB_UNARY_RECIPROCAL: return (range){0.3, 3, false};
    default: return (range){-6, 6, false};
    }
}

static bool un_takes(nb_unary_op op, nb_dtype dt) {
    if (dt == NB_F32 || dt == NB_F64) return true;
    if (dt == NB_BOOL) return false;
    return op == NB_UNARY_NEG || op == NB_UNARY_ADD_SCALAR || op == NB_UNARY_MUL_SCALAR || op == NB_UNARY_ABS ||
           op == NB_UNARY_SIGN || op == NB_UNARY_FLOOR || op == NB_UNARY_CEIL || op == NB_UNARY_ROUND ||
           op == NB_UNARY_TRUNC;
}

static const geom un_geoms[] = {
    {2, {3, 1000}, {1000, 1}, 0, 3000},    /* flat, vectorised */
    {1, {4099}, {1}, 1, 4100},             /* misaligned, with a tail */
    {2, {3, 1000}, {1, 3}, 0, 3000},       /* transposed */
    {0, {0}, {0}, 0, 1},                   /* 0-d */
    {2, {0, 7}, {7, 1}, 0, 0},             /* empty */
};
#define N_UN_GEOMS ((int)(sizeof un_geoms / sizeof un_geoms[0]))

/* unary_backward of op on the CPU and on dev from the same x and gy and
 * the CPU's forward output yc (the saved tensor either rule may read),
 * compared within 10 times the dtype's forward tolerance. */
static void ck_unary_backward(const char *what, nb_device dev, nb_unary_op op, pair x, pair gy, nb_tensor *yc,
                              double alpha) {
    nb_tensor *yg = nb_to_device(yc, dev);
    NB_CK_NOTNULL(yg);
    pair gx = empty_pair(x.c->ndim, x.c->shape, nb_dtype_of(x.c), dev);
    nb_kview gxc = nb_kview_of(gx.c), gxg = nb_kview_of(gx.g), gyc = nb_kview_of(gy.c), gyg = nb_kview_of(gy.g),
             xc = nb_kview_of(x.c), xg = nb_kview_of(x.g), yvc = nb_kview_of(yc), yvg = nb_kview_of(yg);
    NB_CK_OK(nb_kernel_unary_backward(cpu_be(), op, &gxc, &gyc, &xc, &yvc, alpha));
    NB_CK_OK(nb_kernel_unary_backward(nb_backend_get(dev), op, &gxg, &gyg, &xg, &yvg, alpha));
    NB_CK_OK(nb_device_synchronize(dev));
    ck_near(what, gx.c, gx.g, 10 * tol_of(nb_dtype_of(x.c)));
}

START_TEST(test_cuda_unary_paths) {
    FOR_CUDA(dev) {
        nb_backend *be = nb_backend_get(dev);
        for (int k = 0; k < N_UN_GEOMS; k++)
            for (int d = 0; d < 5; d++)
                for (int op = 0; op < NB_UNARY_OP_COUNT; op++) {
                    nb_dtype dt = all6[d];
                    if (!un_takes((nb_unary_op)op, dt)) continue;
                    char what[128];
                    snprintf(what, sizeof what, "unary op %d %s geometry %d", op, nb_dtype_name(dt), k);
                    nb_scope *s = nb_scope_begin();
                    const geom *gm = &un_geoms[k];
                    double alpha = un_alpha((nb_unary_op)op);
                    for (int in_place = 0; in_place < 2; in_place++) {
                        pair x = make_pair(gm, dt, un_range((nb_unary_op)op, dt), dev);
                        pair o = in_place ? x : empty_pair(gm->ndim, gm->shape, dt, dev);
                        nb_kview oc = nb_kview_of(o.c), og = nb_kview_of(o.g), xc = nb_kview_of(x.c), xg = nb_kview_of(x.g);
                        NB_CK_OK(nb_kernel_unary(cpu_be(), (nb_unary_op)op, &oc, &xc, alpha));
                        NB_CK_OK(nb_kernel_unary(be, (nb_unary_op)op, &og, &xg, alpha));
                        NB_CK_OK(nb_device_synchronize(dev));
                        if (nb_dtype_is_float(dt)) ck_near(what, o.c, o.g, tol_of(dt));
                        else ck_bits(what, o.c, o.g);
                    }
                    if (nb_dtype_is_float(dt)) { /* backward: the CPU's y on both devices */
                        pair x = make_pair(gm, dt, un_range((nb_unary_op)op, dt), dev);
                        pair gy = make_pair(gm, dt, (range){-2, 2, false}, dev);
                        nb_tensor *yc = nb_empty_on(gm->ndim, gm->shape, dt, NB_CPU);
                        nb_kview vy = nb_kview_of(yc), vx = nb_kview_of(x.c);
                        NB_CK_OK(nb_kernel_unary(cpu_be(), (nb_unary_op)op, &vy, &vx, alpha));
                        char bw[160];
                        snprintf(bw, sizeof bw, "%s backward", what);
                        ck_unary_backward(bw, dev, (nb_unary_op)op, x, gy, yc, alpha);
                    }
                    nb_scope_end(s);
                }
    }
}
END_TEST

/* Every float op, forward and backward, at the values where formulas part
 * ways: NaN, the infinities, signed zeros, each op's kink and bound
 * (alpha, +-3, 20), the tails of exp, and pow_scalar's sqrt forms. Both
 * backends run nb_scalar_math.h's formulas, so NaN goes where the CPU sends
 * it (relu's backward passes g at NaN, hardtanh's halves give 0, hardswish,
 * elu and selu give NaN, (-inf) ** 0.5 is NaN). */
static const double un_specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1, -1, 1.3,
                                     -1.3, 2.5, 3, -3, 6, 20, -20, 30, -30, 80, -80, 1e30, -1e30};
#define N_UN_SPECIALS ((int64_t)(sizeof un_specials / sizeof un_specials[0]))

START_TEST(test_cuda_unary_specials) {
    FOR_CUDA(dev) {
        nb_backend *be = nb_backend_get(dev);
        for (int d = 0; d < 2; d++)
            for (int op = 0; op < NB_UNARY_OP_COUNT; op++)
                for (int ai = 0; ai < 3; ai++) {
                    nb_dtype dt = d ? NB_F64 : NB_F32;
                    double alpha = un_alpha((nb_unary_op)op);
                    if (ai) { /* pow_scalar's sqrt forms; the others once */
                        if (op != NB_UNARY_POW_SCALAR) break;
                        alpha = ai == 1 ? 0.5 : -0.5;
                    }
                    char what[128];
                    snprintf(what, sizeof what, "unary %s (op %d, alpha %g) %s at special values",
                             nb_unary_name((nb_unary_op)op), op, alpha, nb_dtype_name(dt));
                    nb_scope *s = nb_scope_begin();
                    nb_tensor *xc = nb_to_dtype(nb_from_data_on(un_specials, NB_SHAPE(N_UN_SPECIALS), NB_F64, NB_CPU), dt);
                    NB_CK_NOTNULL(xc);
                    double gv[N_UN_SPECIALS];
                    for (int64_t i = 0; i < N_UN_SPECIALS; i++) gv[i] = i % 2 ? -1.5 : 0.75;
                    nb_tensor *gyc = nb_to_dtype(nb_from_data_on(gv, NB_SHAPE(N_UN_SPECIALS), NB_F64, NB_CPU), dt);
                    NB_CK_NOTNULL(gyc);
                    nb_tensor *xg = nb_to_device(xc, dev), *gyg = nb_to_device(gyc, dev);
                    pair y = empty_pair(1, (int64_t[]){N_UN_SPECIALS}, dt, dev);
                    nb_kview vxc = nb_kview_of(xc), vxg = nb_kview_of(xg), vyc = nb_kview_of(y.c), vyg = nb_kview_of(y.g);
                    NB_CK_OK(nb_kernel_unary(cpu_be(), (nb_unary_op)op, &vyc, &vxc, alpha));
                    NB_CK_OK(nb_kernel_unary(be, (nb_unary_op)op, &vyg, &vxg, alpha));
                    NB_CK_OK(nb_device_synchronize(dev));
                    ck_near(what, y.c, y.g, tol_of(dt));
                    char bw[160];
                    snprintf(bw, sizeof bw, "%s, backward", what);
                    ck_unary_backward(bw, dev, (nb_unary_op)op, (pair){xc, xg}, (pair){gyc, gyg}, y.c, alpha);
                    nb_scope_end(s);
                }
    }
}
END_TEST

/* ---- random ----------------------------------------------------------------------------- */

/* uniform and bernoulli: the CPU's bits; normal within 1e-12 (float64) or
 * one float32 rounding. Odd sizes (a last half block), an offset counter,
 * and a view starting at an odd element (no paired stores). */
START_TEST(test_cuda_random_bits) {
    FOR_CUDA(dev) {
        nb_backend *be = nb_backend_get(dev);
        const int64_t n = 10001;
        for (int dist = 0; dist < 3; dist++)
            for (int d = 0; d < 6; d++)
                for (int odd_start = 0; odd_start < 2; odd_start++) {
                    nb_dtype dt = all6[d];
                    if (dist != NB_RNG_BERNOULLI && !nb_dtype_is_float(dt)) continue;
                    nb_scope *s = nb_scope_begin();
                    geom gm = {1, {n}, {1}, odd_start, n + 1};
                    pair t = make_pair(&gm, dt, (range){0, 2, false}, dev);
                    nb_kview vc = nb_kview_of(t.c), vg = nb_kview_of(t.g);
                    double a = dist == NB_RNG_BERNOULLI ? 0.3 : -2, b = dist == NB_RNG_NORMAL ? 0.5 : 3;
                    nb_philox_state rng = {1234, 77, NULL};
                    NB_CK_OK(nb_kernel_random(cpu_be(), &vc, (nb_rng_dist)dist, a, b, rng));
                    NB_CK_OK(nb_kernel_random(be, &vg, (nb_rng_dist)dist, a, b, rng));
                    NB_CK_OK(nb_device_synchronize(dev));
                    char what[96];
                    snprintf(what, sizeof what, "random dist %d %s start %d", dist, nb_dtype_name(dt), odd_start);
                    if (dist == NB_RNG_NORMAL) ck_near(what, t.c, t.g, dt == NB_F64 ? 1e-12 : 1.2e-7);
                    else ck_bits(what, t.c, t.g);
                    nb_scope_end(s);
                }
    }
}
END_TEST

/* ---- optimizers --------------------------------------------------------------------------- */

/* Sizes across the chunking (8192) and vector widths, more than one launch's
 * 24 tensors, an empty one, and misaligned views (odd offsets). */
#define N_OPT 30
static int64_t opt_size(int i) {
    static const int64_t sz[] = {1, 3, 4, 5, 8191, 8192, 8193, 20000, 0, 7, 100, 16385};
    return sz[i % (int)(sizeof sz / sizeof sz[0])];
}

typedef struct {
    pair t[N_OPT][5]; /* p, g, m, v, vmax */
} opt_set;

static void opt_make(opt_set *o, nb_dtype dt, nb_device dev) {
    for (int i = 0; i < N_OPT; i++)
        for (int j = 0; j < 5; j++) {
            int64_t n = opt_size(i), off = (i % 5 == 2) ? 1 : 0; /* some misaligned */
            geom gm = {1, {n}, {1}, off, n + off};
            range r = j == 3 || j == 4 ? (range){0, 0.5, false} : (range){-1, 1, false}; /* v >= 0 */
            o->t[i][j] = make_pair(&gm, dt, r, dev);
        }
}

static void opt_views(const opt_set *o, bool gpu, nb_kview v[5][N_OPT]) {
    for (int i = 0; i < N_OPT; i++)
        for (int j = 0; j < 5; j++) v[j][i] = nb_kview_of(gpu ? o->t[i][j].g : o->t[i][j].c);
}

static void opt_ck(const char *what, const opt_set *o, int nj) {
    for (int i = 0; i < N_OPT; i++)
        for (int j = 0; j < nj; j++) ck_bits(what, o->t[i][j].c, o->t[i][j].g);
}

START_TEST(test_cuda_adam_multi) {
    FOR_CUDA(dev) {
        nb_backend *be = nb_backend_get(dev);
        const nb_adam_hyper hs[] = {
            {1e-3, 0.9, 0.999, 1e-8, 0, false, false, false, 1, NULL, NULL},
            {1e-3, 0.9, 0.999, 1e-8, 0.01, true, false, false, 1, NULL, NULL},  /* AdamW */
            {1e-2, 0.9, 0.99, 1e-6, 0.1, false, true, true, 1, NULL, NULL},     /* L2, amsgrad, maximize */
            {5e-3, 0.3, 0.5, 1e-8, 0, false, true, false, 1, NULL, NULL},       /* lerp's other formula */
        };
        for (int hi = 0; hi < 4; hi++)
            for (int d = 0; d < 2; d++) {
                nb_scope *s = nb_scope_begin();
                static opt_set o;
                opt_make(&o, all6[d], dev);
                nb_kview vc[5][N_OPT], vg[5][N_OPT];
                opt_views(&o, false, vc);
                opt_views(&o, true, vg);
                nb_adam_hyper h = hs[hi];
                /* float32: 16-bit copies (bfloat16, or float16 for odd hi) of every other tensor,
                 * one of them misaligned */
                const nb_dtype cdt = hi % 2 ? NB_F16 : NB_BF16;
                pair cp[N_OPT] = {0};
                nb_kview cc[N_OPT] = {0}, cg[N_OPT] = {0};
                const bool copies = all6[d] == NB_F32;
                for (int i = 0; copies && i < N_OPT; i += 2) {
                    int64_t n = opt_size(i), off = i == 4 ? 1 : 0;
                    cp[i] = make_pair(&(geom){1, {n}, {1}, off, n + off}, cdt, (range){-1, 1, false}, dev);
                    cc[i] = nb_kview_of(cp[i].c), cg[i] = nb_kview_of(cp[i].g);
                }
                for (int step = 1; step <= 3; step++) {
                    h.step = step;
                    NB_CK_OK(nb_kernel_adam_step_multi(cpu_be(), N_OPT, vc[0], vc[1], vc[2], vc[3],
                                                       h.amsgrad ? vc[4] : NULL, copies ? cc : NULL, &h));
                    NB_CK_OK(nb_kernel_adam_step_multi(be, N_OPT, vg[0], vg[1], vg[2], vg[3], h.amsgrad ? vg[4] : NULL,
                                                       copies ? cg : NULL, &h));
                }
                NB_CK_OK(nb_device_synchronize(dev));
                char what[64];
                snprintf(what, sizeof what, "adam_step_multi hyper %d %s", hi, nb_dtype_name(all6[d]));
                opt_ck(what, &o, h.amsgrad ? 5 : 4);
                for (int i = 0; copies && i < N_OPT; i += 2) { /* the copies: the cast's bits, on both devices */
                    ck_bits(what, cp[i].c, cp[i].g);
                    ck_bits(what, nb_to_dtype(o.t[i][0].c, cdt), cp[i].c);
                }
                /* the single-tensor slot gives the same bits as the multi one */
                h.step = 4;
                for (int i = 0; i < N_OPT; i++)
                    NB_CK_OK(nb_kernel_adam_step(be, &vg[0][i], &vg[1][i], &vg[2][i], &vg[3][i],
                                                  h.amsgrad ? &vg[4][i] : NULL, &h));
                NB_CK_OK(nb_kernel_adam_step_multi(cpu_be(), N_OPT, vc[0], vc[1], vc[2], vc[3],
                                                   h.amsgrad ? vc[4] : NULL, NULL, &h));
                NB_CK_OK(nb_device_synchronize(dev));
                opt_ck(what, &o, h.amsgrad ? 5 : 4);
                nb_scope_end(s);
            }
    }
}
END_TEST

START_TEST(test_cuda_sgd_multi) {
    FOR_CUDA(dev) {
        nb_backend *be = nb_backend_get(dev);
        const nb_sgd_hyper hs[] = {
            {0.1, 0, 0, 0, false, false, true, NULL},
            {0.1, 0.9, 0.1, 0.01, false, false, true, NULL},
            {0.05, 0.9, 0, 0.001, true, true, true, NULL}, /* nesterov, maximize */
        };
        for (int hi = 0; hi < 3; hi++)
            for (int d = 0; d < 2; d++) {
                nb_scope *s = nb_scope_begin();
                static opt_set o;
                opt_make(&o, all6[d], dev);
                nb_kview vc[5][N_OPT], vg[5][N_OPT];
                opt_views(&o, false, vc);
                opt_views(&o, true, vg);
                nb_sgd_hyper h = hs[hi];
                bool mom = h.momentum != 0;
                for (int step = 1; step <= 3; step++) {
                    h.first_step = step == 1;
                    NB_CK_OK(nb_kernel_sgd_step_multi(cpu_be(), N_OPT, vc[0], vc[1], mom ? vc[2] : NULL, &h));
                    NB_CK_OK(nb_kernel_sgd_step_multi(be, N_OPT, vg[0], vg[1], mom ? vg[2] : NULL, &h));
                }
                for (int i = 0; i < N_OPT; i++)
                    NB_CK_OK(nb_kernel_sgd_step(be, &vg[0][i], &vg[1][i], mom ? &vg[2][i] : NULL, &h));
                NB_CK_OK(nb_kernel_sgd_step_multi(cpu_be(), N_OPT, vc[0], vc[1], mom ? vc[2] : NULL, &h));
                NB_CK_OK(nb_device_synchronize(dev));
                char what[64];
                snprintf(what, sizeof what, "sgd_step_multi hyper %d %s", hi, nb_dtype_name(all6[d]));
                opt_ck(what, &o, mom ? 3 : 2);
                nb_scope_end(s);
            }
    }
}
END_TEST

/* ---- the CPU's multi-tensor slots (run without a GPU too) --------------------------------- */

START_TEST(test_cpu_optim_multi_matches_single) {
    nb_scope *s = nb_scope_begin();
    nb_backend *be = cpu_be();
    enum { N = 4 };
    const int64_t sizes[N] = {5, 0, 3000, 17};
    nb_tensor *t[2][N][5]; /* [multi, single][tensor][p, g, m, v, vmax] */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 5; j++) {
            geom gm = {1, {sizes[i]}, {1}, 0, sizes[i]};
            range r = j >= 3 ? (range){0, 0.5, false} : (range){-1, 1, false};
            uint64_t keep = rng_state;
            t[0][i][j] = host_base(gm.base, NB_F32, r);
            rng_state = keep;
            t[1][i][j] = host_base(gm.base, NB_F32, r);
        }
    nb_kview v[2][5][N];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < 5; j++) v[k][j][i] = nb_kview_of(t[k][i][j]);
    nb_adam_hyper h = {1e-2, 0.9, 0.99, 1e-6, 0.1, true, true, false, 1, NULL, NULL};
    for (int step = 1; step <= 3; step++) {
        h.step = step;
        NB_CK_OK(nb_kernel_adam_step_multi(be, N, v[0][0], v[0][1], v[0][2], v[0][3], v[0][4], NULL, &h));
        for (int i = 0; i < N; i++)
            NB_CK_OK(nb_kernel_adam_step(be, &v[1][0][i], &v[1][1][i], &v[1][2][i], &v[1][3][i], &v[1][4][i], &h));
    }
    nb_sgd_hyper sh = {0.1, 0.9, 0.1, 0.01, true, false, true, NULL};
    for (int step = 1; step <= 2; step++) {
        sh.first_step = step == 1;
        NB_CK_OK(nb_kernel_sgd_step_multi(be, N, v[0][0], v[0][1], v[0][2], &sh));
        for (int i = 0; i < N; i++) NB_CK_OK(nb_kernel_sgd_step(be, &v[1][0][i], &v[1][1][i], &v[1][2][i], &sh));
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 5; j++) ck_bits("cpu multi vs single", t[1][i][j], t[0][i][j]);
    /* a mismatch in a later group fails before anything is updated */
    double *before = nb_test_values_of(t[0][0][0]);
    nb_kview bad[N];
    memcpy(bad, v[0][1], sizeof bad);
    bad[3].shape[0] = 16;
    nb_clear_error();
    ck_assert_int_eq(nb_kernel_adam_step_multi(be, N, v[0][0], bad, v[0][2], v[0][3], v[0][4], NULL, &h), NB_ERR_SHAPE);
    double *after = nb_test_values_of(t[0][0][0]);
    ck_assert_msg(!memcmp(before, after, sizeof(double) * 5), "a failed multi step updated a parameter");
    nb_kview mixed[N];
    memcpy(mixed, v[0][0], sizeof mixed);
    nb_tensor *p64 = nb_to_dtype(t[0][2][0], NB_F64);
    mixed[2] = nb_kview_of(p64);
    ck_assert_int_eq(nb_kernel_sgd_step_multi(be, N, mixed, v[0][1], v[0][2], &sh), NB_ERR_DTYPE);
    nb_sgd_hyper plain = {0.1, 0, 0, 0, false, false, true, NULL};
    NB_CK_OK(nb_kernel_sgd_step_multi(be, 0, NULL, NULL, NULL, &plain)); /* nothing to do */
    free(before), free(after);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_cuda_elementwise(void) {
    Suite *s = suite_create("cuda_elementwise");
    TCase *tc = tcase_create("cuda_elementwise");
    tcase_add_test(tc, test_cpu_optim_multi_matches_single);
    tcase_add_test(tc, test_cuda_binary_paths);
    tcase_add_test(tc, test_cuda_int_division_by_zero);
    tcase_add_test(tc, test_cuda_unary_paths);
    tcase_add_test(tc, test_cuda_unary_specials);
    tcase_add_test(tc, test_cuda_random_bits);
    tcase_add_test(tc, test_cuda_adam_multi);
    tcase_add_test(tc, test_cuda_sgd_multi);
    tcase_set_timeout(tc, 600);
    suite_add_tcase(s, tc);
    return s;
}
