/* test_ops_pool.c - max/avg/adaptive pooling: hand-computed values and
 * indices (PyTorch's ceil_mode, count_include_pad and divisor_override
 * divisor rules, the 7 -> 3 adaptive windows), forwards against a naive
 * direct reference on random shapes and windows (f64 and f32), gradchecks
 * of every op on several configurations (odd sizes, stride != kernel,
 * padding, dilation, ceil_mode, unbatched and non-contiguous inputs),
 * backward bits independent of the thread count, errors, and the modules;
 * max/avg/adaptive_avg_pool3d against a direct 3-d reference (values,
 * indices and tie order, every divisor rule), gradchecks and errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

enum { OP_MAX2D, OP_MAX1D, OP_AVG2D, OP_AVG1D, OP_AAVG2D, OP_AAVG1D, OP_AMAX2D };

typedef struct pool_case {
    int op;
    nb_pool2d_options o2;
    nb_pool1d_options o1;
    int64_t oh, ow; /* adaptive output (ow only for 1-d) */
    bool transpose; /* pool a transposed (non-contiguous) view of the input */
} pool_case;

static nb_tensor *run_case(const pool_case *c, nb_tensor *x, nb_tensor **idx) {
    if (c->transpose) x = nb_transpose(x, -1, -2);
    switch (c->op) {
    case OP_MAX2D: return nb_max_pool2d(x, c->o2, idx);
    case OP_MAX1D: return nb_max_pool1d(x, c->o1, idx);
    case OP_AVG2D: return nb_avg_pool2d(x, c->o2);
    case OP_AVG1D: return nb_avg_pool1d(x, c->o1);
    case OP_AAVG2D: return nb_adaptive_avg_pool2d(x, c->oh, c->ow);
    case OP_AAVG1D: return nb_adaptive_avg_pool1d(x, c->ow);
    default: return nb_adaptive_max_pool2d(x, c->oh, c->ow, idx);
    }
}

static nb_tensor *f_pool(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return run_case(ctx, in[0], NULL);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n) { /* xorshift64, uniform enough for picking configs */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state % n;
}

/* A float64 leaf requiring grad whose values are a shuffled 0.1*(0..n-1)
 * minus an offset: all distinct, so max pooling's argmax is unique and its
 * gradient well defined under finite differences. */
static nb_tensor *distinct(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)n);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++) v[i] = 0.1 * (double)i - 0.05 * (double)n;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rnd((uint64_t)i + 1);
        double t = v[i];
        v[i] = v[j], v[j] = t;
    }
    nb_tensor *t = nb_from_data(v, ndim, shape, NB_F64);
    free(v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

/* ---- naive direct reference ------------------------------------------------- */

static int64_t ref_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
    double v = (double)(in + 2 * p - d * (k - 1) - 1) / (double)s;
    int64_t o = (int64_t)(ceil_mode ? ceil(v) : floor(v)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

typedef struct ref_cfg {
    bool max, adaptive, ceil_mode, cip;
    int64_t k[2], s[2], p[2], d[2], div;
} ref_cfg;

/* One output cell, visiting every kernel tap (window arithmetic of its own). */
static double ref_cell(const ref_cfg *c, const double *x, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                       int64_t oh, int64_t ow, int64_t *arg) {
    double best = -INFINITY, sum = 0;
    int64_t n_in = 0, n_pad = 0, bi = -1;
    if (c->adaptive) {
        int64_t h0 = (int64_t)floor((double)(oh * H) / (double)Ho), h1 = (int64_t)ceil((double)((oh + 1) * H) / (double)Ho);
        int64_t w0 = (int64_t)floor((double)(ow * W) / (double)Wo), w1 = (int64_t)ceil((double)((ow + 1) * W) / (double)Wo);
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) {
                double v = x[h * W + w];
                if (v > best || isnan(v)) best = v, bi = h * W + w;
                sum += v, n_in++;
            }
        *arg = bi;
        return c->max ? best : sum / (double)n_in;
    }
    for (int64_t i = 0; i < c->k[0]; i++)
        for (int64_t j = 0; j < c->k[1]; j++) {
            int64_t h = oh * c->s[0] - c->p[0] + i * c->d[0], w = ow * c->s[1] - c->p[1] + j * c->d[1];
            if (h < H + c->p[0] && w < W + c->p[1]) n_pad++;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double v = x[h * W + w];
            if (v > best || isnan(v)) best = v, bi = h * W + w;
            sum += v, n_in++;
        }
    *arg = bi;
    if (c->max) return best;
    if (!n_in) return 0;
    return sum / (double)(c->div ? c->div : c->cip ? n_pad : n_in);
}

/* Random shape and window for op, the matching case, and the reference
 * output. hard (max ops): wide planes (several 64-wide chunks of the
 * vectorised rows), column stride 1 or 2, and values drawn from {0, 1, 2, 3,
 * NaN, -inf}, so ties, NaNs and all -inf windows check the first-max rule. */
static void random_check(int op, nb_dtype dt, bool hard) {
    bool one_d = op == OP_MAX1D || op == OP_AVG1D || op == OP_AAVG1D;
    bool max = op == OP_MAX2D || op == OP_MAX1D || op == OP_AMAX2D;
    ref_cfg c = {.max = max, .adaptive = op >= OP_AAVG2D, .ceil_mode = rnd(2), .cip = rnd(2)};
    pool_case pc = {.op = op};
    int64_t N = 1 + (int64_t)rnd(3), C = 1 + (int64_t)rnd(3), H, W, Ho, Wo;
    for (int d = 0; d < 2; d++) {
        bool unit = one_d && d == 0;
        c.k[d] = unit ? 1 : 1 + (int64_t)rnd(4);
        c.s[d] = unit ? 1 : 1 + (int64_t)rnd(d == 1 && hard ? 2 : 3);
        c.p[d] = unit ? 0 : (int64_t)rnd((uint64_t)c.k[d] / 2 + 1);
        c.d[d] = unit || !max ? 1 : 1 + (int64_t)rnd(2);
    }
    c.div = op == OP_AVG2D && rnd(3) == 0 ? 1 + (int64_t)rnd(5) : 0;
    H = one_d ? 1 : c.d[0] * (c.k[0] - 1) + 1 + (int64_t)rnd(8);
    W = c.d[1] * (c.k[1] - 1) + 1 + (int64_t)rnd(hard ? 160 : 8);
    if (c.adaptive) {
        Ho = one_d ? 1 : 1 + (int64_t)rnd((uint64_t)H + 2);
        Wo = 1 + (int64_t)rnd((uint64_t)W + 2);
    } else {
        Ho = ref_out(H, c.k[0], c.p[0], c.s[0], c.d[0], c.ceil_mode);
        Wo = ref_out(W, c.k[1], c.p[1], c.s[1], c.d[1], c.ceil_mode);
    }
    pc.oh = Ho, pc.ow = Wo;
    pc.o2 = (nb_pool2d_options){.kernel = {c.k[0], c.k[1]}, .stride = {c.s[0], c.s[1]},
                                .padding = {c.p[0], c.p[1]}, .dilation = {max ? c.d[0] : 0, max ? c.d[1] : 0},
                                .ceil_mode = c.ceil_mode, .count_include_pad_false = !c.cip,
                                .divisor_override = c.div};
    pc.o1 = (nb_pool1d_options){.kernel = c.k[1], .stride = c.s[1], .padding = c.p[1], .dilation = c.d[1],
                                .ceil_mode = c.ceil_mode, .count_include_pad_false = !c.cip};
    int64_t nx = N * C * H * W, ny = N * C * Ho * Wo;
    double *x = malloc(sizeof(double) * (size_t)nx), *y = malloc(sizeof(double) * (size_t)ny);
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)ny), *got_ix = malloc(sizeof(int64_t) * (size_t)ny);
    ck_assert(x && y && ix && got_ix);
    for (int64_t i = 0; i < nx; i++) {
        uint64_t r = rnd(100);
        x[i] = !hard ? (double)(int64_t)rnd(1000000) / 1000.0 - 500.0
               : r < 3 ? NAN : r < 6 ? -INFINITY : (double)(r % 4);
    }
    for (int64_t pl = 0; pl < N * C; pl++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t o = (pl * Ho + oh) * Wo + ow;
                y[o] = ref_cell(&c, x + pl * H * W, H, W, Ho, Wo, oh, ow, &ix[o]);
            }
    nb_scope *s = nb_scope_begin();
    nb_tensor *xt = one_d ? nb_test_tensor(NB_SHAPE(N, C, W), dt, x) : nb_test_tensor(NB_SHAPE(N, C, H, W), dt, x);
    nb_tensor *idx = NULL;
    nb_tensor *out = run_case(&pc, xt, max ? &idx : NULL);
    ck_assert_msg(out != NULL, "op %d [%lld, %lld, %lld, %lld]: %s", op, (long long)N, (long long)C, (long long)H,
                  (long long)W, nb_last_error());
    if (one_d) nb_ck_shape(out, 3, (int64_t[]){N, C, Wo});
    else nb_ck_shape(out, 4, (int64_t[]){N, C, Ho, Wo});
    /* float32 inputs near 500 are rounded by ~3e-5, so an absolute term */
    double *got = malloc(sizeof(double) * (size_t)ny), atol = dt == NB_F64 ? 1e-10 : 1e-4;
    ck_assert_ptr_nonnull(got);
    nb_test_values(out, got, ny);
    for (int64_t i = 0; i < ny; i++) /* == for infinities, isnan for NaNs */
        ck_assert_msg(got[i] == y[i] || (isnan(got[i]) && isnan(y[i])) ||
                          fabs(got[i] - y[i]) <= atol + 1e-6 * fabs(y[i]),
                      "op %d element %lld: got %.10g, expected %.10g", op, (long long)i, got[i], y[i]);
    free(got);
    if (max) {
        NB_CK_NOTNULL(idx);
        ck_assert_int_eq(nb_dtype_of(idx), NB_I64);
        NB_CK_OK(nb_to_host(idx, got_ix, sizeof(int64_t) * (size_t)ny));
        for (int64_t i = 0; i < ny; i++)
            if (ix[i] >= 0) ck_assert_int_eq(got_ix[i], ix[i]); /* -1: a window off the input */
    }
    nb_scope_end(s);
    free(x), free(y), free(ix), free(got_ix);
}

START_TEST(test_pool_vs_reference) {
    int ops[] = {OP_MAX2D, OP_MAX1D, OP_AVG2D, OP_AVG1D, OP_AAVG2D, OP_AAVG1D, OP_AMAX2D};
    for (int r = 0; r < 40; r++)
        for (int i = 0; i < 7; i++) random_check(ops[i], r % 2 ? NB_F32 : NB_F64, false);
    for (int r = 0; r < 60; r++) {
        random_check(r % 3 ? OP_MAX2D : OP_MAX1D, r % 2 ? NB_F32 : NB_F64, true);
        random_check(OP_AMAX2D, r % 2 ? NB_F32 : NB_F64, true);
    }
}
END_TEST

/* The 2x2 stride-2 pool (its own kernel row) and 3x3 stride 1 and 2 with
 * padding, against the reference on ties/NaN/-inf data. */
START_TEST(test_max_pool_fast_paths) {
    int64_t k[] = {2, 3, 3, 3}, st[] = {2, 1, 2, 2}, pd[] = {0, 1, 1, 0};
    double vals[] = {0, 1, 2, 3, 1, 0, NAN, -INFINITY};
    for (int cfg = 0; cfg < 4; cfg++)
        for (int dti = 0; dti < 2; dti++) {
            nb_scope *s = nb_scope_begin();
            int64_t N = 2, C = 3, H = 9 + cfg, W = 150 + cfg, n = N * C * H * W;
            double *x = malloc(sizeof(double) * (size_t)n);
            ck_assert_ptr_nonnull(x);
            for (int64_t i = 0; i < n; i++) x[i] = vals[rnd(8)] + (cfg == 0 && rnd(2) ? 0.5 : 0);
            nb_pool2d_options o = {.kernel = {k[cfg], k[cfg]}, .stride = {st[cfg], st[cfg]},
                                   .padding = {pd[cfg], pd[cfg]}};
            nb_tensor *idx = NULL, *y = nb_max_pool2d(nb_test_tensor(4, (int64_t[]){N, C, H, W}, dti ? NB_F32 : NB_F64, x),
                                                      o, &idx);
            NB_CK_NOTNULL(y);
            ref_cfg c = {.max = true, .k = {k[cfg], k[cfg]}, .s = {st[cfg], st[cfg]}, .p = {pd[cfg], pd[cfg]}, .d = {1, 1}};
            int64_t Ho = nb_size(y, 2), Wo = nb_size(y, 3), ny = N * C * Ho * Wo;
            ck_assert_int_eq(Ho, ref_out(H, k[cfg], pd[cfg], st[cfg], 1, false));
            ck_assert_int_eq(Wo, ref_out(W, k[cfg], pd[cfg], st[cfg], 1, false));
            double *got = malloc(sizeof(double) * (size_t)ny);
            int64_t *gi = malloc(sizeof(int64_t) * (size_t)ny);
            ck_assert(got && gi);
            nb_test_values(y, got, ny);
            NB_CK_OK(nb_to_host(idx, gi, sizeof(int64_t) * (size_t)ny));
            for (int64_t pl = 0; pl < N * C; pl++)
                for (int64_t oh = 0; oh < Ho; oh++)
                    for (int64_t ow = 0; ow < Wo; ow++) {
                        int64_t o_ = (pl * Ho + oh) * Wo + ow, arg;
                        double e = ref_cell(&c, x + pl * H * W, H, W, Ho, Wo, oh, ow, &arg);
                        ck_assert_msg(got[o_] == e || (isnan(got[o_]) && isnan(e)), "cfg %d: %g vs %g", cfg, got[o_], e);
                        if (arg >= 0) ck_assert_int_eq(gi[o_], arg);
                    }
            free(x), free(got), free(gi);
            nb_scope_end(s);
        }
}
END_TEST

/* ---- hand-computed values ---------------------------------------------------------- */

START_TEST(test_max_pool_indices_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* 4x4 plane, 2x2 windows: maxima 9@1, 8@7, 7@8, 6@15 (PyTorch: flat h*W + w) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 4, 4), NB_F64,
                                  (double[]){0, 9, 1, 2, 3, 4, 5, 8, 7, 1, 2, 0, 3, 2, 5, 6});
    nb_tensor *idx = NULL;
    nb_tensor *y = nb_max_pool2d(x, (nb_pool2d_options){.kernel = {2, 2}}, &idx);
    nb_ck_shape(y, 4, (int64_t[]){1, 1, 2, 2});
    nb_ck_close(y, (double[]){9, 8, 7, 6}, 4, 0, 0);
    nb_ck_close(idx, (double[]){1, 7, 8, 15}, 4, 0, 0);
    /* kernel 3, stride 2, padding 1 on the unbatched [1, 4, 4]: windows rows/cols {-1..1}, {1..3} */
    nb_tensor *xu = nb_reshape(x, NB_SHAPE(1, 4, 4));
    y = nb_max_pool2d(xu, (nb_pool2d_options){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, &idx);
    nb_ck_shape(y, 3, (int64_t[]){1, 2, 2});
    nb_ck_close(y, (double[]){9, 9, 7, 8}, 4, 0, 0);
    nb_ck_close(idx, (double[]){1, 1, 8, 7}, 4, 0, 0);
    /* 1-d, dilation 2, kernel 2: pairs (0,2), (1,3), ...; indices are positions along L */
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(1, 6), NB_F64, (double[]){3, 1, 2, 5, 0, 4});
    y = nb_max_pool1d(x1, (nb_pool1d_options){.kernel = 2, .stride = 1, .dilation = 2}, &idx);
    nb_ck_shape(y, 2, (int64_t[]){1, 4});
    nb_ck_close(y, (double[]){3, 5, 2, 5}, 4, 0, 0);
    nb_ck_close(idx, (double[]){0, 3, 2, 3}, 4, 0, 0);
    /* NaN wins, as PyTorch */
    nb_tensor *xn = nb_test_tensor(NB_SHAPE(1, 1, 4), NB_F64, (double[]){1, NAN, 3, 2});
    y = nb_max_pool1d(xn, (nb_pool1d_options){.kernel = 2}, &idx);
    nb_ck_close(y, (double[]){NAN, 3}, 2, 0, 0);
    nb_ck_close(idx, (double[]){1, 2}, 2, 0, 0);
    /* gradient goes to the argmax; overlapping windows add up (index 1 twice) */
    NB_CK_OK(nb_set_requires_grad(x, true));
    y = nb_max_pool2d(x, (nb_pool2d_options){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, NULL);
    NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0}, 16, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_avg_pool_divisors_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 3, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    nb_pool2d_options o = {.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 1}};
    /* count_include_pad: every window divides by 4 */
    nb_ck_close(nb_avg_pool2d(x, o),
                (double[]){0.25, 0.75, 1.25, 0.75, 1.25, 3, 4, 2.25, 2.75, 6, 7, 3.75, 1.75, 3.75, 4.25, 2.25}, 16, 0,
                1e-15);
    o.count_include_pad_false = true; /* divide by the real elements */
    nb_ck_close(nb_avg_pool2d(x, o), (double[]){1, 1.5, 2.5, 3, 2.5, 3, 4, 4.5, 5.5, 6, 7, 7.5, 7, 7.5, 8.5, 9},
                16, 0, 1e-15);
    o.divisor_override = 3;
    nb_ck_close(nb_avg_pool2d(x, o),
                (double[]){1. / 3, 1, 5. / 3, 1, 5. / 3, 4, 16. / 3, 3, 11. / 3, 8, 28. / 3, 5, 7. / 3, 5, 17. / 3, 3},
                16, 0, 1e-15);
    /* ceil_mode: the last window [4, 6) is clipped to the input before the
     * padded size is taken, so it divides by 1 even with count_include_pad */
    nb_tensor *l5 = nb_test_tensor(NB_SHAPE(1, 1, 5), NB_F64, (double[]){1, 2, 3, 4, 5});
    nb_tensor *y = nb_avg_pool1d(l5, (nb_pool1d_options){.kernel = 2, .ceil_mode = true});
    nb_ck_shape(y, 3, (int64_t[]){1, 1, 3});
    nb_ck_close(y, (double[]){1.5, 3.5, 5}, 3, 0, 1e-15);
    /* kernel 3, stride 2, padding 1, ceil: windows [-1,2) [1,4) [3,6) [5,8)->[5,7) */
    nb_tensor *l6 = nb_test_tensor(NB_SHAPE(1, 6), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_pool1d_options o1 = {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true};
    nb_ck_close(nb_avg_pool1d(l6, o1), (double[]){1, 3, 5, 3}, 4, 0, 1e-15);
    o1.count_include_pad_false = true;
    nb_ck_close(nb_avg_pool1d(l6, o1), (double[]){1.5, 3, 5, 6}, 4, 0, 1e-15);
    /* without ceil_mode the last window is dropped */
    o1.ceil_mode = false;
    nb_ck_shape(nb_avg_pool1d(l6, o1), 2, (int64_t[]){1, 3});
    /* ceil_mode drops a last window that would start in the right padding:
     * L 3, kernel 2, stride 2, padding 1: ceil(3/2)+1 = 3, but (3-1)*2 = 4 >= 3+1 -> 2 */
    nb_tensor *l3 = nb_test_tensor(NB_SHAPE(1, 3), NB_F64, (double[]){1, 2, 3});
    y = nb_avg_pool1d(l3, (nb_pool1d_options){.kernel = 2, .stride = 2, .padding = 1, .ceil_mode = true});
    nb_ck_shape(y, 2, (int64_t[]){1, 2});
    nb_ck_close(y, (double[]){0.5, 2.5}, 2, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_adaptive_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* 7 -> 3: windows [0,3) [2,5) [4,7) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 7), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7});
    nb_tensor *y = nb_adaptive_avg_pool1d(x, 3);
    nb_ck_shape(y, 2, (int64_t[]){1, 3});
    nb_ck_close(y, (double[]){2, 4, 6}, 3, 0, 1e-15);
    /* 3 -> 5 (output larger than input): windows [0,1) [0,2) [1,2) [1,3) [2,3) */
    nb_tensor *x3 = nb_test_tensor(NB_SHAPE(1, 1, 3), NB_F64, (double[]){2, 4, 8});
    nb_ck_close(nb_adaptive_avg_pool1d(x3, 5), (double[]){2, 3, 4, 6, 8}, 5, 0, 1e-15);
    /* 2-d 3x4 -> 2x2: rows [0,2) [1,3), cols [0,2) [2,4) */
    nb_tensor *x2 = nb_test_tensor(NB_SHAPE(1, 1, 3, 4), NB_F64, (double[]){0, 1, 2, 3, 4, 9, 6, 7, 8, 5, 10, 11});
    nb_ck_close(nb_adaptive_avg_pool2d(x2, 2, 2), (double[]){3.5, 4.5, 6.5, 8.5}, 4, 0, 1e-15);
    nb_tensor *idx = NULL;
    y = nb_adaptive_max_pool2d(x2, 2, 2, &idx);
    nb_ck_close(y, (double[]){9, 7, 9, 11}, 4, 0, 0);
    nb_ck_close(idx, (double[]){5, 7, 5, 11}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients ------------------------------------------------------------------- */

static void gc(pool_case c, int ndim, const int64_t *shape) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = distinct(ndim, shape);
    nb_ck_gradcheck(f_pool, &x, 1, &c);
    nb_scope_end(s);
}

START_TEST(test_max_pool_gradcheck) {
    gc((pool_case){OP_MAX2D, .o2 = {.kernel = {2, 2}}}, NB_SHAPE(2, 3, 5, 7));
    gc((pool_case){OP_MAX2D, .o2 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
       NB_SHAPE(1, 2, 6, 5));
    gc((pool_case){OP_MAX2D, .o2 = {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}}},
       NB_SHAPE(2, 1, 7, 6));
    gc((pool_case){OP_MAX2D, .o2 = {.kernel = {3, 2}, .stride = {1, 1}}, .transpose = true}, NB_SHAPE(1, 2, 5, 6));
    gc((pool_case){OP_MAX2D, .o2 = {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}}, NB_SHAPE(3, 5, 4));
    gc((pool_case){OP_MAX1D, .o1 = {.kernel = 3, .stride = 2, .padding = 1, .dilation = 2, .ceil_mode = true}},
       NB_SHAPE(2, 3, 9));
    gc((pool_case){OP_MAX1D, .o1 = {.kernel = 2}}, NB_SHAPE(3, 7));
    gc((pool_case){OP_AMAX2D, .oh = 3, .ow = 2}, NB_SHAPE(2, 2, 7, 5));
    gc((pool_case){OP_AMAX2D, .oh = 4, .ow = 5}, NB_SHAPE(1, 3, 3));
}
END_TEST

START_TEST(test_avg_pool_gradcheck) {
    gc((pool_case){OP_AVG2D, .o2 = {.kernel = {2, 2}}}, NB_SHAPE(2, 3, 5, 7));
    gc((pool_case){OP_AVG2D, .o2 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
       NB_SHAPE(1, 2, 6, 5));
    gc((pool_case){OP_AVG2D, .o2 = {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true,
                                    .count_include_pad_false = true}},
       NB_SHAPE(2, 1, 6, 5));
    gc((pool_case){OP_AVG2D, .o2 = {.kernel = {3, 3}, .stride = {1, 2}, .padding = {1, 0}, .divisor_override = 5}},
       NB_SHAPE(1, 2, 5, 7));
    gc((pool_case){OP_AVG2D, .o2 = {.kernel = {2, 3}, .stride = {1, 1}}, .transpose = true}, NB_SHAPE(3, 6, 5));
    gc((pool_case){OP_AVG1D, .o1 = {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true}}, NB_SHAPE(2, 3, 8));
    gc((pool_case){OP_AVG1D, .o1 = {.kernel = 4, .stride = 1, .padding = 2, .count_include_pad_false = true}},
       NB_SHAPE(2, 5));
    gc((pool_case){OP_AAVG2D, .oh = 3, .ow = 2}, NB_SHAPE(2, 2, 7, 5));
    gc((pool_case){OP_AAVG2D, .oh = 4, .ow = 6}, NB_SHAPE(1, 3, 4));
    gc((pool_case){OP_AAVG1D, .ow = 3}, NB_SHAPE(2, 3, 7));
    gc((pool_case){OP_AAVG1D, .ow = 5}, NB_SHAPE(2, 3));
}
END_TEST

/* Backward scatters (overlapping windows) give the same bits on 1 and 2 threads. */
static void grads_at(int threads, const pool_case *c, nb_tensor *x, nb_tensor *gy, double *out, int64_t n) {
    nb_set_num_threads(threads);
    nb_tensor_zero_grad(x);
    nb_scope *s = nb_scope_begin();
    NB_CK_OK(nb_backward_with(run_case(c, x, NULL), gy));
    NB_CK_OK(nb_to_host(nb_tensor_grad(x), out, sizeof(double) * (size_t)n));
    nb_scope_end(s);
}

START_TEST(test_backward_thread_independent) {
    int prev = nb_get_num_threads();
    pool_case cases[] = {
        {OP_MAX2D, .o2 = {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
        {OP_AVG2D, .o2 = {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
        {OP_AAVG2D, .oh = 13, .ow = 40},
    };
    int64_t n = 8 * 16 * 33 * 31;
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    ck_assert(a && b);
    for (int i = 0; i < 3; i++) {
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(7 + (uint64_t)i);
        nb_tensor *x = nb_randn(NB_SHAPE(8, 16, 33, 31), NB_F64, &g);
        NB_CK_OK(nb_set_requires_grad(x, true));
        nb_tensor *y;
        NB_NO_GRAD { y = run_case(&cases[i], x, NULL); }
        nb_tensor *gy = nb_randn(nb_dim(y), nb_shape(y), NB_F64, &g);
        grads_at(1, &cases[i], x, gy, a, n);
        grads_at(2, &cases[i], x, gy, b, n);
        ck_assert_msg(memcmp(a, b, sizeof(double) * (size_t)n) == 0, "case %d differs across thread counts", i);
        nb_scope_end(s);
    }
    nb_set_num_threads(prev);
    free(a), free(b);
}
END_TEST

/* ---- errors and modules ------------------------------------------------------------ */

START_TEST(test_pool_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(1, 2, 5, 5), NB_F32);
    nb_tensor *x1 = nb_zeros(NB_SHAPE(1, 2, 5), NB_F32);
    nb_pool2d_options k3 = {.kernel = {3, 3}};
    NB_CK_FAILS(nb_max_pool2d(x, (nb_pool2d_options){.kernel = {3, 3}, .padding = {2, 0}}, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_max_pool2d(x, (nb_pool2d_options){.kernel = {0, 3}}, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_avg_pool2d(x, (nb_pool2d_options){.kernel = {2, 2}, .stride = {-1, 1}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_max_pool2d(x, (nb_pool2d_options){.kernel = {2, 2}, .dilation = {-2, 1}}, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_avg_pool2d(x, (nb_pool2d_options){.kernel = {2, 2}, .dilation = {2, 2}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_max_pool1d(x1, (nb_pool1d_options){.kernel = 3, .padding = -1}, NULL), NB_ERR_INVALID_ARG);
    /* output size < 1: kernel 6 on 5 */
    NB_CK_FAILS(nb_max_pool2d(x, (nb_pool2d_options){.kernel = {6, 6}}, NULL), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "too small"));
    NB_CK_FAILS(nb_max_pool1d(x1, (nb_pool1d_options){.kernel = 3, .dilation = 3}, NULL), NB_ERR_SHAPE);
    /* wrong rank, empty plane, dtype */
    NB_CK_FAILS(nb_max_pool2d(nb_zeros(NB_SHAPE(5, 5), NB_F32), k3, NULL), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "max_pool2d"));
    NB_CK_FAILS(nb_avg_pool2d(nb_zeros(NB_SHAPE(1, 1, 1, 5, 5), NB_F32), k3), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_max_pool1d(x, (nb_pool1d_options){.kernel = 2}, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_adaptive_avg_pool2d(nb_zeros(NB_SHAPE(1, 0, 5, 5), NB_F32), 2, 2), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_max_pool2d(nb_zeros(NB_SHAPE(1, 1, 5, 5), NB_I64), k3, NULL), NB_ERR_DTYPE);
    /* adaptive output sizes */
    NB_CK_FAILS(nb_adaptive_avg_pool2d(x, 0, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adaptive_max_pool2d(x, 2, -1, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adaptive_avg_pool1d(x1, 0), NB_ERR_INVALID_ARG);
    /* a NULL input keeps the first error */
    nb_clear_error();
    nb_tensor *idx = (nb_tensor *)1;
    ck_assert_ptr_null(nb_max_pool2d(NULL, k3, &idx));
    ck_assert_ptr_null(idx);
    /* an empty batch is fine */
    nb_ck_shape(nb_max_pool2d(nb_zeros(NB_SHAPE(0, 2, 5, 5), NB_F32), k3, NULL), 4, (int64_t[]){0, 2, 1, 1});
    nb_scope_end(s);
}
END_TEST

START_TEST(test_pool_modules) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 4, 4), NB_F32,
                                  (double[]){0, 9, 1, 2, 3, 4, 5, 8, 7, 1, 2, 0, 3, 2, 5, 6});
    nb_module *m = nb_nn_max_pool2d((nb_pool2d_options){.kernel = {2, 2}});
    NB_CK_NOTNULL(m);
    ck_assert_str_eq(nb_module_kind(m), "MaxPool2d");
    ck_assert_int_eq(nb_module_parameters(m, NULL, 0), 0);
    nb_ck_close(nb_forward(m, x), (double[]){9, 8, 7, 6}, 4, 0, 0);
    nb_module_free(m);
    m = nb_nn_avg_pool2d((nb_pool2d_options){.kernel = {2, 2}});
    nb_ck_close(nb_forward(m, x), (double[]){4, 4, 3.25, 3.25}, 4, 0, 1e-6);
    nb_module_free(m);
    m = nb_nn_adaptive_avg_pool2d(1, 1);
    ck_assert_str_eq(nb_module_kind(m), "AdaptiveAvgPool2d");
    nb_ck_close(nb_forward(m, x), (double[]){3.625}, 1, 0, 1e-6);
    nb_module_free(m);
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(1, 1, 6), NB_F32, (double[]){1, 2, 3, 4, 5, 6});
    m = nb_nn_max_pool1d((nb_pool1d_options){.kernel = 3});
    nb_ck_close(nb_forward(m, x1), (double[]){3, 6}, 2, 0, 0);
    nb_module_free(m);
    m = nb_nn_avg_pool1d((nb_pool1d_options){.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true});
    nb_ck_close(nb_forward(m, x1), (double[]){1, 3, 5, 3}, 4, 0, 1e-6);
    nb_module_free(m);
    m = nb_nn_adaptive_avg_pool1d(2);
    ck_assert_str_eq(nb_module_kind(m), "AdaptiveAvgPool1d");
    nb_ck_close(nb_forward(m, x1), (double[]){2, 5}, 2, 0, 1e-6);
    nb_module_free(m);
    NB_CK_FAILS(nb_nn_max_pool2d((nb_pool2d_options){.kernel = {2, 2}, .padding = {2, 0}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_avg_pool1d((nb_pool1d_options){.kernel = 0}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_adaptive_avg_pool2d(0, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_adaptive_avg_pool1d(-3), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* Results, returned indices and the tape's saved tensors are all released
 * with the scope (also after a backward, and on an error path). */
START_TEST(test_pool_releases_memory) {
    size_t before = nb_memory_stats_get(NB_CPU).allocated;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = distinct(4, (int64_t[]){2, 3, 7, 6}), *idx = NULL;
    nb_tensor *y = nb_max_pool2d(x, (nb_pool2d_options){.kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 1}}, &idx);
    nb_tensor *z = nb_adaptive_max_pool2d(nb_reshape(x, NB_SHAPE(6, 7, 6)), 3, 4, &idx);
    nb_tensor *a = nb_avg_pool1d(nb_reshape(x, NB_SHAPE(6, 42)), (nb_pool1d_options){.kernel = 3, .padding = 1});
    nb_tensor *loss = nb_add(nb_add(nb_sum(y, NULL, 0, false), nb_sum(z, NULL, 0, false)), nb_sum(a, NULL, 0, false));
    NB_CK_OK(nb_backward(loss));
    NB_CK_NOTNULL(nb_tensor_grad(x));
    ck_assert_ptr_null(nb_max_pool2d(x, (nb_pool2d_options){.kernel = {9, 9}}, &idx));
    ck_assert_ptr_null(idx);
    nb_scope_end(s);
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).allocated, before);
}
END_TEST

/* ---- 3-d pooling ------------------------------------------------------------------ */

/* PyTorch's pooling_output_shape, one dim */
static int64_t pool_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int64_t o = num / s + 1;
    if (ceil && (o - 1) * s >= in + p) o--;
    return o;
}

/* A direct 3-d reference (PyTorch's CPU loops): max with the first maximum
 * (NaN wins) in (d, h, w) order and its flat index; avg with PyTorch's
 * divisor (the window clipped to in + pad, or to the input, or the
 * override). One plane [D, H, W] of x into out [Do, Ho, Wo]. */
static void ref_pool3d(bool avg, const int64_t *in, const nb_pool3d_options *o, const int64_t *out, const double *x,
                       double *y, int64_t *idx) {
    for (int64_t a = 0; a < out[0]; a++)
        for (int64_t b = 0; b < out[1]; b++)
            for (int64_t c = 0; c < out[2]; c++) {
                int64_t st[3] = {a * o->stride[0] - o->padding[0], b * o->stride[1] - o->padding[1],
                                 c * o->stride[2] - o->padding[2]};
                double best = -INFINITY, sum = 0;
                int64_t bi = -1, count = 0, clipped = 1;
                for (int k = 0; k < 3; k++) {
                    int64_t end = st[k] + (o->kernel[k] - 1) * o->dilation[k] + 1;
                    clipped *= (end < in[k] + o->padding[k] ? end : in[k] + o->padding[k]) - st[k];
                }
                for (int64_t i = 0; i < o->kernel[0]; i++)
                    for (int64_t j = 0; j < o->kernel[1]; j++)
                        for (int64_t l = 0; l < o->kernel[2]; l++) {
                            int64_t z = st[0] + i * o->dilation[0], h = st[1] + j * o->dilation[1];
                            int64_t w = st[2] + l * o->dilation[2];
                            if (z < 0 || z >= in[0] || h < 0 || h >= in[1] || w < 0 || w >= in[2]) continue;
                            int64_t f = (z * in[1] + h) * in[2] + w;
                            sum += x[f], count++;
                            if (bi < 0 || x[f] > best || (isnan(x[f]) && !isnan(best))) best = x[f], bi = f;
                        }
                int64_t at = (a * out[1] + b) * out[2] + c;
                if (!avg) y[at] = best, idx[at] = bi;
                else y[at] = sum / (double)(o->divisor_override ? o->divisor_override
                                            : o->count_include_pad_false ? count : clipped);
            }
}

START_TEST(test_pool3d_vs_reference) {
    const nb_pool3d_options cfg[] = {
        {.kernel = {2, 2, 2}},
        {.kernel = {3, 2, 3}, .stride = {2, 1, 2}, .padding = {1, 1, 1}},
        {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .ceil_mode = true},
        {.kernel = {2, 3, 2}, .stride = {1, 2, 1}, .padding = {1, 1, 0}, .ceil_mode = true,
         .count_include_pad_false = true},
        {.kernel = {2, 2, 3}, .divisor_override = 7},
        {.kernel = {2, 2, 2}, .dilation = {2, 1, 3}, .stride = {1, 1, 1}}, /* max only */
    };
    const int64_t in[3] = {5, 6, 7}, N = 2, C = 3;
    for (size_t t = 0; t < sizeof cfg / sizeof cfg[0]; t++)
        for (int avg = 0; avg < 2; avg++) {
            nb_pool3d_options o = cfg[t];
            if (avg && o.dilation[0]) continue;
            for (int k = 0; k < 3; k++) {
                if (!o.stride[k]) o.stride[k] = o.kernel[k];
                if (!o.dilation[k]) o.dilation[k] = 1;
            }
            int64_t out[3];
            for (int k = 0; k < 3; k++) out[k] = pool_out(in[k], o.kernel[k], o.padding[k], o.stride[k], o.dilation[k], o.ceil_mode);
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(50 + t);
            nb_tensor *x = nb_round(nb_mul_scalar(nb_randn(NB_SHAPE(N, C, in[0], in[1], in[2]), NB_F64, &g), 2)); /* ties */
            double *xv = nb_test_values_of(x);
            int64_t plane = in[0] * in[1] * in[2], oplane = out[0] * out[1] * out[2];
            double *want = malloc(sizeof(double) * (size_t)(N * C * oplane));
            int64_t *wi = malloc(sizeof(int64_t) * (size_t)(N * C * oplane));
            for (int64_t p = 0; p < N * C; p++)
                ref_pool3d(avg, in, &o, out, xv + p * plane, want + p * oplane, wi + p * oplane);
            nb_tensor *idx = NULL;
            nb_tensor *y = avg ? nb_avg_pool3d(x, cfg[t]) : nb_max_pool3d(x, cfg[t], &idx);
            NB_CK_NOTNULL(y);
            nb_ck_shape(y, 5, (int64_t[]){N, C, out[0], out[1], out[2]});
            nb_ck_close(y, want, N * C * oplane, 1e-12, 1e-12);
            if (!avg) {
                double *iv = nb_test_values_of(idx);
                for (int64_t i = 0; i < N * C * oplane; i++)
                    ck_assert_msg(iv[i] == (double)wi[i], "config %zu: index %lld: %g, want %lld", t, (long long)i,
                                  iv[i], (long long)wi[i]);
                free(iv);
            }
            free(xv), free(want), free(wi);
            nb_scope_end(s);
        }
    /* adaptive: each output cell averages [floor(i*in/out), ceil((i+1)*in/out)) per dim */
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(60);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 5, 4, 7), NB_F64, &g); /* unbatched [C, D, H, W] */
    const int64_t ain[3] = {5, 4, 7}, aout[3] = {3, 4, 2};
    double *xv = nb_test_values_of(x), want[2 * 3 * 4 * 2];
    for (int64_t c = 0; c < 2; c++)
        for (int64_t a = 0; a < aout[0]; a++)
            for (int64_t b = 0; b < aout[1]; b++)
                for (int64_t e = 0; e < aout[2]; e++) {
                    int64_t lo[3], hi[3], ij[3] = {a, b, e};
                    for (int k = 0; k < 3; k++)
                        lo[k] = ij[k] * ain[k] / aout[k], hi[k] = ((ij[k] + 1) * ain[k] + aout[k] - 1) / aout[k];
                    double sum = 0;
                    for (int64_t z = lo[0]; z < hi[0]; z++)
                        for (int64_t h = lo[1]; h < hi[1]; h++)
                            for (int64_t w = lo[2]; w < hi[2]; w++) sum += xv[((c * 5 + z) * 4 + h) * 7 + w];
                    want[((c * 3 + a) * 4 + b) * 2 + e] = sum / (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
                }
    nb_tensor *y = nb_adaptive_avg_pool3d(x, 3, 4, 2);
    nb_ck_shape(y, 4, (int64_t[]){2, 3, 4, 2});
    nb_ck_close(y, want, 48, 1e-12, 1e-12);
    free(xv);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_pool3(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    int kind = *(const int *)ctx;
    nb_pool3d_options o = {.kernel = {2, 3, 2}, .stride = {1, 2, 2}, .padding = {1, 1, 0}, .ceil_mode = true,
                           .count_include_pad_false = kind == 1};
    if (kind == 0) return nb_max_pool3d(in[0], o, NULL);
    if (kind == 1) return nb_avg_pool3d(in[0], o);
    return nb_adaptive_avg_pool3d(in[0], 2, 3, 2);
}

START_TEST(test_pool3d_gradcheck) {
    for (int kind = 0; kind < 3; kind++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_test_randn_grad(5, (int64_t[]){2, 2, 4, 5, 3}, 70 + kind);
        nb_ck_gradcheck(f_pool3, &x, 1, &kind);
        nb_scope_end(s);
    }
}
END_TEST

START_TEST(test_pool3d_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(1, 2, 3, 3, 3), NB_F32);
    NB_CK_FAILS(nb_max_pool3d(nb_zeros(NB_SHAPE(3, 3, 3), NB_F32), (nb_pool3d_options){.kernel = {2, 2, 2}}, NULL),
                NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "max_pool3d"));
    NB_CK_FAILS(nb_max_pool3d(x, (nb_pool3d_options){.kernel = {2, 0, 2}}, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_avg_pool3d(x, (nb_pool3d_options){.kernel = {2, 2, 2}, .padding = {2, 0, 0}}), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "half"));
    NB_CK_FAILS(nb_avg_pool3d(x, (nb_pool3d_options){.kernel = {2, 2, 2}, .dilation = {2, 1, 1}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_avg_pool3d(x, (nb_pool3d_options){.kernel = {4, 2, 2}}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_avg_pool3d(x, (nb_pool3d_options){.kernel = {2, 2, 2}, .divisor_override = -1}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_adaptive_avg_pool3d(x, 0, 1, 1), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_adaptive_avg_pool3d(nb_zeros(NB_SHAPE(2, 3), NB_F32), 1, 1, 1), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_max_pool3d(nb_zeros(NB_SHAPE(1, 2, 3, 3, 3), NB_I64), (nb_pool3d_options){.kernel = {2, 2, 2}}, NULL),
                NB_ERR_DTYPE);
    nb_tensor *idx = NULL;
    nb_ck_shape(nb_max_pool3d(nb_zeros(NB_SHAPE(2, 4, 4, 4), NB_F32), (nb_pool3d_options){.kernel = {2, 2, 2}}, &idx), 4,
                (int64_t[]){2, 2, 2, 2}); /* unbatched, with indices */
    nb_ck_shape(idx, 4, (int64_t[]){2, 2, 2, 2});
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_pool(void) {
    Suite *s = suite_create("ops_pool");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_max_pool_indices_by_hand);
    tcase_add_test(f, test_avg_pool_divisors_by_hand);
    tcase_add_test(f, test_adaptive_by_hand);
    tcase_add_test(f, test_pool_vs_reference);
    tcase_add_test(f, test_max_pool_fast_paths);
    tcase_add_test(f, test_pool_errors);
    tcase_add_test(f, test_pool_modules);
    tcase_add_test(f, test_pool_releases_memory);
    tcase_add_test(f, test_pool3d_vs_reference);
    tcase_add_test(f, test_pool3d_errors);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_max_pool_gradcheck);
    tcase_add_test(g, test_avg_pool_gradcheck);
    tcase_add_test(g, test_backward_thread_independent);
    tcase_add_test(g, test_pool3d_gradcheck);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
