/* test_ops_conv.c - conv2d, conv1d, conv_transpose2d and their modules;
 * conv3d against a naive 3-d convolution, conv_transpose3d/1d as the
 * adjoints of conv3d/conv1d, their gradchecks and errors; deform_conv2d
 * (zero offsets = conv2d, integer and half-pixel shifts by hand, gradcheck,
 * errors; against PyTorch's grid_sample in tests/torch_diff);
 * a hand-computed case, forwards against a naive direct convolution
 * written here (random shapes with odd sizes, stride, padding, dilation,
 * groups, 'same' with odd and even kernels; float64 and float32),
 * gradchecks of x, weight and bias on many configurations, bitwise equality
 * across thread counts, module shapes and PyTorch's init bounds, and the
 * error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* ---- naive references (double, C order) ---------------------------------------- */

typedef struct ref_geom {
    int64_t n, c, h, w, co, kh, kw, g, sh, sw, ph, pw, dh, dw, ho, wo;
} ref_geom;

/* out[n, oc, oh, ow] = b[oc] + sum x[n, c, oh*s - p + i*d, ...] w[oc, c', i, j]
 * over the group's channels; positions outside the input are zero (ho/wo
 * may exceed the symmetric-padding size: 'same' pads the right then). */
static void ref_conv(const ref_geom *r, const double *x, const double *w, const double *b, double *out) {
    int64_t cg = r->c / r->g, cog = r->co / r->g;
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t oc = 0; oc < r->co; oc++)
            for (int64_t oh = 0; oh < r->ho; oh++)
                for (int64_t ow = 0; ow < r->wo; ow++) {
                    double s = b ? b[oc] : 0;
                    int64_t gr = oc / cog;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < r->kh; i++)
                            for (int64_t j = 0; j < r->kw; j++) {
                                int64_t ih = oh * r->sh - r->ph + i * r->dh, iw = ow * r->sw - r->pw + j * r->dw;
                                if (ih < 0 || ih >= r->h || iw < 0 || iw >= r->w) continue;
                                s += x[((n * r->c + gr * cg + c) * r->h + ih) * r->w + iw] *
                                     w[((oc * cg + c) * r->kh + i) * r->kw + j];
                            }
                    out[((n * r->co + oc) * r->ho + oh) * r->wo + ow] = s;
                }
}

/* The gradients of ref_conv for an output gradient gy: gx (overwritten),
 * gw (overwritten) and gb (overwritten, may be NULL), by their definitions. */
static void ref_conv_grads(const ref_geom *r, const double *x, const double *w, const double *gy, double *gx,
                           double *gw, double *gb) {
    int64_t cg = r->c / r->g, cog = r->co / r->g;
    memset(gx, 0, sizeof(double) * (size_t)(r->n * r->c * r->h * r->w));
    memset(gw, 0, sizeof(double) * (size_t)(r->co * cg * r->kh * r->kw));
    if (gb) memset(gb, 0, sizeof(double) * (size_t)r->co);
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t oc = 0; oc < r->co; oc++)
            for (int64_t oh = 0; oh < r->ho; oh++)
                for (int64_t ow = 0; ow < r->wo; ow++) {
                    double g = gy[((n * r->co + oc) * r->ho + oh) * r->wo + ow];
                    if (gb) gb[oc] += g;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < r->kh; i++)
                            for (int64_t j = 0; j < r->kw; j++) {
                                int64_t ih = oh * r->sh - r->ph + i * r->dh, iw = ow * r->sw - r->pw + j * r->dw;
                                if (ih < 0 || ih >= r->h || iw < 0 || iw >= r->w) continue;
                                int64_t xi = ((n * r->c + oc / cog * cg + c) * r->h + ih) * r->w + iw;
                                int64_t wi = ((oc * cg + c) * r->kh + i) * r->kw + j;
                                gx[xi] += g * w[wi];
                                gw[wi] += g * x[xi];
                            }
                }
}

/* conv_transpose2d by its definition: each x[n, ic, ih, iw] scatters
 * x * w[ic, oc', i, j] to out[n, g*cog + oc', ih*s - p + i*d, ...].
 * Here r->c is Cin, r->co is Cout and (h, w) -> (ho, wo). */
static void ref_conv_t(const ref_geom *r, const double *x, const double *w, const double *b, double *out) {
    int64_t cg = r->c / r->g, cog = r->co / r->g;
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t oc = 0; oc < r->co; oc++)
            for (int64_t p = 0; p < r->ho * r->wo; p++) out[(n * r->co + oc) * r->ho * r->wo + p] = b ? b[oc] : 0;
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t ic = 0; ic < r->c; ic++)
            for (int64_t ih = 0; ih < r->h; ih++)
                for (int64_t iw = 0; iw < r->w; iw++)
                    for (int64_t oc = 0; oc < cog; oc++)
                        for (int64_t i = 0; i < r->kh; i++)
                            for (int64_t j = 0; j < r->kw; j++) {
                                int64_t oh = ih * r->sh - r->ph + i * r->dh, ow = iw * r->sw - r->pw + j * r->dw;
                                if (oh < 0 || oh >= r->ho || ow < 0 || ow >= r->wo) continue;
                                int64_t o = ic / cg * cog + oc;
                                out[((n * r->co + o) * r->ho + oh) * r->wo + ow] +=
                                    x[((n * r->c + ic) * r->h + ih) * r->w + iw] *
                                    w[((ic * cog + oc) * r->kh + i) * r->kw + j];
                            }
}


/* A small deterministic generator for picking shapes. */
static uint64_t rng_state;
static int64_t pick(int64_t lo, int64_t hi) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int64_t)((rng_state >> 33) % (uint64_t)(hi - lo + 1));
}

/* ---- forward -------------------------------------------------------------------- */

START_TEST(test_conv2d_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* x = 1..9 as [1,1,3,3]; w = [[1,0],[0,-1]]: out = x[i,j] - x[i+1,j+1] = -4 everywhere; bias 0.5 */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 3, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(1, 1, 2, 2), NB_F64, (double[]){1, 0, 0, -1});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){0.5});
    nb_tensor *y = nb_conv2d(x, w, b, (nb_conv2d_options){0});
    nb_ck_shape(y, 4, (int64_t[]){1, 1, 2, 2});
    nb_ck_close(y, (double[]){-3.5, -3.5, -3.5, -3.5}, 4, 0, 0);
    /* a ones 2x2 kernel with padding 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1) */
    nb_tensor *ones = nb_ones(NB_SHAPE(1, 1, 2, 2), NB_F64);
    nb_tensor *y2 = nb_conv2d(x, ones, NULL, (nb_conv2d_options){.stride = {2, 2}, .padding = {1, 1}});
    nb_ck_shape(y2, 4, (int64_t[]){1, 1, 2, 2});
    nb_ck_close(y2, (double[]){1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9}, 4, 0, 0);
    /* 'same' with an even kernel pads right/bottom: out[i,j] = x[i,j] + x[i,j+1] + x[i+1,j] + x[i+1,j+1] */
    nb_tensor *y3 = nb_conv2d(x, ones, NULL, (nb_conv2d_options){.padding_same = true});
    nb_ck_shape(y3, 4, (int64_t[]){1, 1, 3, 3});
    nb_ck_close(y3, (double[]){12, 16, 9, 24, 28, 15, 15, 17, 9}, 9, 0, 0);
    /* gradients: y = sum(conv(x, w)) gives dx[p] = number of windows covering p (times w's sum = 0 here) */
    nb_tensor *xg = nb_test_tensor(NB_SHAPE(1, 1, 3, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    NB_CK_OK(nb_set_requires_grad(xg, true));
    NB_CK_OK(nb_backward(nb_sum(nb_conv2d(xg, ones, NULL, (nb_conv2d_options){0}), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(xg), (double[]){1, 2, 1, 2, 4, 2, 1, 2, 1}, 9, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* conv2d against ref_conv on a random configuration (dt f32 or f64). */
static void check_conv2d_random(nb_dtype dt, uint64_t seed, bool same) {
    nb_scope *s = nb_scope_begin();
    rng_state = seed;
    ref_geom r = {.n = pick(1, 3), .g = pick(1, 2), .kh = pick(1, 4), .kw = pick(1, 4), .dh = pick(1, 2),
                  .dw = pick(1, 2)};
    r.c = r.g * pick(1, 3), r.co = r.g * pick(1, 3);
    r.sh = same ? 1 : pick(1, 3), r.sw = same ? 1 : pick(1, 3);
    r.ph = same ? 0 : pick(0, 2), r.pw = same ? 0 : pick(0, 2);
    r.h = pick(1, 9) + r.dh * (r.kh - 1), r.w = pick(1, 9) + r.dw * (r.kw - 1);
    if (same) {
        r.ph = r.dh * (r.kh - 1) / 2, r.pw = r.dw * (r.kw - 1) / 2, r.ho = r.h, r.wo = r.w;
    } else {
        r.ho = (r.h + 2 * r.ph - r.dh * (r.kh - 1) - 1) / r.sh + 1;
        r.wo = (r.w + 2 * r.pw - r.dw * (r.kw - 1) - 1) / r.sw + 1;
    }
    bool has_bias = pick(0, 1);
    nb_tensor *x = nb_test_randn(NB_SHAPE(r.n, r.c, r.h, r.w), dt, seed + 1);
    nb_tensor *w = nb_test_randn(NB_SHAPE(r.co, r.c / r.g, r.kh, r.kw), dt, seed + 2);
    nb_tensor *b = has_bias ? nb_test_randn(NB_SHAPE(r.co), dt, seed + 3) : NULL;
    nb_conv2d_options o = {.stride = {r.sh, r.sw}, .dilation = {r.dh, r.dw}, .groups = r.g, .padding_same = same};
    if (!same) o.padding[0] = r.ph, o.padding[1] = r.pw;
    nb_tensor *y = nb_conv2d(x, w, b, o);
    nb_ck_shape(y, 4, (int64_t[]){r.n, r.co, r.ho, r.wo});
    double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = b ? nb_test_values_of(b) : NULL;
    double *want = malloc(sizeof(double) * (size_t)(r.n * r.co * r.ho * r.wo));
    ref_conv(&r, xv, wv, bv, want);
    double tol = dt == NB_F64 ? 1e-12 : 1e-4;
    nb_ck_close(y, want, r.n * r.co * r.ho * r.wo, tol, tol);
    free(xv), free(wv), free(bv), free(want);
    nb_scope_end(s);
}

START_TEST(test_conv2d_vs_naive) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        check_conv2d_random(NB_F64, seed * 7919, false);
        check_conv2d_random(NB_F32, seed * 104729, false);
    }
    for (uint64_t seed = 1; seed <= 20; seed++) {
        check_conv2d_random(NB_F64, seed * 31337, true);
        check_conv2d_random(NB_F32, seed * 271828, true);
    }
}
END_TEST

START_TEST(test_conv2d_larger_vs_naive) {
    /* the MNIST CNN's layer shapes (reduced batch; the second is Winograd's), a 1x1 (no im2col)
     * case, a padded grouped Winograd case and a strided one */
    nb_scope *s = nb_scope_begin();
    ref_geom cases[] = {
        {.n = 4, .c = 1, .h = 28, .w = 28, .co = 32, .kh = 3, .kw = 3, .g = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.n = 3, .c = 32, .h = 26, .w = 26, .co = 64, .kh = 3, .kw = 3, .g = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.n = 5, .c = 12, .h = 7, .w = 9, .co = 6, .kh = 1, .kw = 1, .g = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.n = 3, .c = 16, .h = 7, .w = 9, .co = 24, .kh = 3, .kw = 3, .g = 2, .sh = 1, .sw = 1, .ph = 1, .pw = 2,
         .dh = 1, .dw = 1},
        {.n = 17, .c = 8, .h = 11, .w = 10, .co = 16, .kh = 5, .kw = 3, .g = 4, .sh = 2, .sw = 3, .ph = 2, .pw = 1,
         .dh = 2, .dw = 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ref_geom r = cases[k];
        r.ho = (r.h + 2 * r.ph - r.dh * (r.kh - 1) - 1) / r.sh + 1;
        r.wo = (r.w + 2 * r.pw - r.dw * (r.kw - 1) - 1) / r.sw + 1;
        for (int d = 0; d < 2; d++) {
            nb_dtype dt = d ? NB_F32 : NB_F64;
            nb_tensor *x = nb_test_randn(NB_SHAPE(r.n, r.c, r.h, r.w), dt, 10 + k);
            nb_tensor *w = nb_test_randn(NB_SHAPE(r.co, r.c / r.g, r.kh, r.kw), dt, 20 + k);
            nb_tensor *b = nb_test_randn(NB_SHAPE(r.co), dt, 30 + k);
            nb_tensor *y = nb_conv2d(x, w, b, (nb_conv2d_options){.stride = {r.sh, r.sw}, .padding = {r.ph, r.pw},
                                                                  .dilation = {r.dh, r.dw}, .groups = r.g});
            int64_t n = r.n * r.co * r.ho * r.wo;
            double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = nb_test_values_of(b);
            double *want = malloc(sizeof(double) * (size_t)n);
            ref_conv(&r, xv, wv, bv, want);
            nb_ck_close(y, want, n, d ? 1e-4 : 1e-11, d ? 1e-4 : 1e-11);
            free(xv), free(wv), free(bv), free(want);
        }
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_conv1d_vs_naive) {
    nb_scope *s = nb_scope_begin();
    for (uint64_t seed = 1; seed <= 30; seed++) {
        rng_state = seed * 6151;
        bool same = seed % 3 == 0;
        ref_geom r = {.n = pick(1, 3), .g = pick(1, 3), .h = 1, .kh = 1, .kw = pick(1, 5), .sh = 1, .dh = 1,
                      .dw = pick(1, 3), .ho = 1};
        r.c = r.g * pick(1, 2), r.co = r.g * pick(1, 3), r.sw = same ? 1 : pick(1, 3), r.pw = same ? 0 : pick(0, 2);
        r.w = pick(1, 12) + r.dw * (r.kw - 1);
        if (same) r.pw = r.dw * (r.kw - 1) / 2, r.wo = r.w;
        else r.wo = (r.w + 2 * r.pw - r.dw * (r.kw - 1) - 1) / r.sw + 1;
        nb_dtype dt = seed % 2 ? NB_F64 : NB_F32;
        nb_tensor *x = nb_test_randn(NB_SHAPE(r.n, r.c, r.w), dt, seed);
        nb_tensor *w = nb_test_randn(NB_SHAPE(r.co, r.c / r.g, r.kw), dt, seed + 100);
        nb_tensor *b = nb_test_randn(NB_SHAPE(r.co), dt, seed + 200);
        nb_conv1d_options o = {.stride = r.sw, .padding = same ? 0 : r.pw, .dilation = r.dw, .groups = r.g,
                               .padding_same = same};
        nb_tensor *y = nb_conv1d(x, w, b, o);
        nb_ck_shape(y, 3, (int64_t[]){r.n, r.co, r.wo});
        int64_t n = r.n * r.co * r.wo;
        double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = nb_test_values_of(b), *want = malloc(sizeof(double) * (size_t)n);
        ref_conv(&r, xv, wv, bv, want);
        nb_ck_close(y, want, n, dt == NB_F64 ? 1e-12 : 1e-4, dt == NB_F64 ? 1e-12 : 1e-4);
        free(xv), free(wv), free(bv), free(want);
        /* an unbatched [C, L] input gives the first image's result */
        nb_tensor *y0 = nb_conv1d(nb_squeeze(nb_narrow(x, 0, 0, 1), 0), w, b, o);
        nb_ck_shape(y0, 2, (int64_t[]){r.co, r.wo});
        double *v0 = nb_test_values_of(y0), *v = nb_test_values_of(y);
        for (int64_t i = 0; i < r.co * r.wo; i++) ck_assert_double_eq(v0[i], v[i]);
        free(v0), free(v);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_conv_transpose2d_vs_naive) {
    nb_scope *s = nb_scope_begin();
    /* by hand: x [1,1,2,2] = 1..4, w ones 2x2, stride 2: each input becomes a 2x2 block */
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(1, 1, 2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *y1 = nb_conv_transpose2d(x1, nb_ones(NB_SHAPE(1, 1, 2, 2), NB_F64), NULL,
                                        (nb_conv_transpose2d_options){.stride = {2, 2}});
    nb_ck_shape(y1, 4, (int64_t[]){1, 1, 4, 4});
    nb_ck_close(y1, (double[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16, 0, 0);
    for (uint64_t seed = 1; seed <= 30; seed++) {
        rng_state = seed * 92821;
        ref_geom r = {.n = pick(1, 3), .g = pick(1, 2), .kh = pick(1, 4), .kw = pick(1, 3), .sh = pick(1, 3),
                      .sw = pick(1, 2), .dh = pick(1, 2), .dw = pick(1, 2), .h = pick(1, 5), .w = pick(1, 6)};
        r.c = r.g * pick(1, 3), r.co = r.g * pick(1, 2);
        r.ph = pick(0, 1), r.pw = pick(0, 1);
        int64_t oph = pick(0, (r.sh > r.dh ? r.sh : r.dh) - 1), opw = pick(0, (r.sw > r.dw ? r.sw : r.dw) - 1);
        r.ho = (r.h - 1) * r.sh - 2 * r.ph + r.dh * (r.kh - 1) + oph + 1;
        r.wo = (r.w - 1) * r.sw - 2 * r.pw + r.dw * (r.kw - 1) + opw + 1;
        if (r.ho < 1 || r.wo < 1) continue;
        nb_dtype dt = seed % 2 ? NB_F64 : NB_F32;
        nb_tensor *x = nb_test_randn(NB_SHAPE(r.n, r.c, r.h, r.w), dt, seed);
        nb_tensor *w = nb_test_randn(NB_SHAPE(r.c, r.co / r.g, r.kh, r.kw), dt, seed + 50);
        nb_tensor *b = seed % 3 ? nb_test_randn(NB_SHAPE(r.co), dt, seed + 60) : NULL;
        nb_tensor *y = nb_conv_transpose2d(x, w, b, (nb_conv_transpose2d_options){
            .stride = {r.sh, r.sw}, .padding = {r.ph, r.pw}, .output_padding = {oph, opw},
            .dilation = {r.dh, r.dw}, .groups = r.g});
        nb_ck_shape(y, 4, (int64_t[]){r.n, r.co, r.ho, r.wo});
        int64_t n = r.n * r.co * r.ho * r.wo;
        double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = b ? nb_test_values_of(b) : NULL;
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_conv_t(&r, xv, wv, bv, want);
        nb_ck_close(y, want, n, dt == NB_F64 ? 1e-12 : 1e-4, dt == NB_F64 ? 1e-12 : 1e-4);
        free(xv), free(wv), free(bv), free(want);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_conv_strided_and_unbatched_inputs) {
    nb_scope *s = nb_scope_begin();
    /* a transposed (non-contiguous) x and weight give the same result as contiguous copies */
    nb_tensor *x = nb_test_randn(NB_SHAPE(2, 3, 6, 5), NB_F64, 1), *w = nb_test_randn(NB_SHAPE(4, 3, 2, 3), NB_F64, 2);
    nb_tensor *xt = nb_transpose(nb_contiguous(nb_transpose(x, 2, 3)), 2, 3);
    nb_tensor *wt = nb_transpose(nb_contiguous(nb_transpose(w, 0, 1)), 0, 1);
    ck_assert(!nb_is_contiguous(xt) && !nb_is_contiguous(wt));
    nb_conv2d_options o = {.padding = {1, 0}};
    double *a = nb_test_values_of(nb_conv2d(x, w, NULL, o)), *b = nb_test_values_of(nb_conv2d(xt, wt, NULL, o));
    int64_t n = 2 * 4 * 7 * 3;
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq_tol(a[i], b[i], 1e-12);
    /* an unbatched [C, H, W] input */
    nb_tensor *y0 = nb_conv2d(nb_squeeze(nb_narrow(x, 0, 1, 1), 0), w, NULL, o);
    nb_ck_shape(y0, 3, (int64_t[]){4, 7, 3});
    nb_ck_close(y0, a + n / 2, n / 2, 1e-12, 0);
    free(a), free(b);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients ---------------------------------------------------------------------- */

typedef struct conv_case {
    int kind; /* 0 conv2d, 1 conv1d, 2 conv_transpose2d */
    nb_conv2d_options o2;
    nb_conv1d_options o1;
    nb_conv_transpose2d_options ot;
} conv_case;

static nb_tensor *f_conv(nb_tensor *const *in, int n, void *ctx) {
    const conv_case *c = ctx;
    nb_tensor *b = n > 2 ? in[2] : NULL;
    if (c->kind == 0) return nb_conv2d(in[0], in[1], b, c->o2);
    if (c->kind == 1) return nb_conv1d(in[0], in[1], b, c->o1);
    return nb_conv_transpose2d(in[0], in[1], b, c->ot);
}

static void gc(const conv_case *c, int xd, const int64_t *xs, int wd, const int64_t *ws, int64_t nbias,
               uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[3] = {nb_test_randn_grad(xd, xs, seed), nb_test_randn_grad(wd, ws, seed + 1),
                        nbias ? nb_test_randn_grad(1, &nbias, seed + 2) : NULL};
    nb_ck_gradcheck(f_conv, in, nbias ? 3 : 2, (void *)c);
    nb_scope_end(s);
}

START_TEST(test_conv2d_gradcheck) {
    conv_case c = {0};
    /* plain, odd sizes */
    gc(&c, NB_SHAPE(2, 3, 5, 7), NB_SHAPE(4, 3, 3, 2), 4, 1);
    /* stride 2 with padding */
    c.o2 = (nb_conv2d_options){.stride = {2, 2}, .padding = {1, 2}};
    gc(&c, NB_SHAPE(2, 2, 7, 6), NB_SHAPE(3, 2, 3, 3), 3, 2);
    /* dilation 2, stride (1, 3) */
    c.o2 = (nb_conv2d_options){.stride = {1, 3}, .dilation = {2, 2}, .padding = {1, 0}};
    gc(&c, NB_SHAPE(1, 2, 7, 9), NB_SHAPE(2, 2, 2, 3), 2, 3);
    /* groups 2, no bias */
    c.o2 = (nb_conv2d_options){.groups = 2, .padding = {1, 1}};
    gc(&c, NB_SHAPE(2, 4, 5, 5), NB_SHAPE(6, 2, 3, 3), 0, 4);
    /* 'same', odd and even kernels (the even one pads right/bottom), with dilation */
    c.o2 = (nb_conv2d_options){.padding_same = true};
    gc(&c, NB_SHAPE(2, 2, 5, 6), NB_SHAPE(3, 2, 3, 3), 3, 5);
    gc(&c, NB_SHAPE(2, 2, 5, 6), NB_SHAPE(3, 2, 2, 4), 3, 6);
    c.o2 = (nb_conv2d_options){.padding_same = true, .dilation = {1, 3}, .groups = 2};
    gc(&c, NB_SHAPE(1, 4, 4, 7), NB_SHAPE(2, 2, 2, 2), 2, 7);
    /* 1x1 (no im2col) and a batch that spans several weight buckets and threads */
    c.o2 = (nb_conv2d_options){0};
    gc(&c, NB_SHAPE(3, 4, 3, 2), NB_SHAPE(5, 4, 1, 1), 5, 8);
    gc(&c, NB_SHAPE(19, 2, 4, 3), NB_SHAPE(2, 2, 2, 2), 2, 9);
}
END_TEST

/* 3x3, stride 1, >= 8 channels per group: the Winograd kernels. */
START_TEST(test_conv2d_winograd_gradcheck) {
    conv_case c = {.o2 = {.padding = {1, 1}}};
    gc(&c, NB_SHAPE(2, 8, 5, 6), NB_SHAPE(8, 8, 3, 3), 8, 31);
    /* odd sizes, no padding, 'same', and padding 3 (the input gradient's tiles start inside gy) */
    c.o2 = (nb_conv2d_options){0};
    gc(&c, NB_SHAPE(1, 8, 5, 7), NB_SHAPE(9, 8, 3, 3), 9, 32);
    c.o2 = (nb_conv2d_options){.padding_same = true};
    gc(&c, NB_SHAPE(1, 8, 4, 3), NB_SHAPE(8, 8, 3, 3), 0, 33);
    c.o2 = (nb_conv2d_options){.padding = {3, 0}, .groups = 2};
    gc(&c, NB_SHAPE(1, 16, 4, 5), NB_SHAPE(16, 8, 3, 3), 16, 34);
    /* conv_transpose2d runs the input-gradient kernel forward */
    c = (conv_case){.kind = 2, .ot = {.padding = {1, 1}}};
    gc(&c, NB_SHAPE(1, 8, 3, 4), NB_SHAPE(8, 8, 3, 3), 8, 35);
}
END_TEST

START_TEST(test_conv1d_gradcheck) {
    conv_case c = {.kind = 1};
    gc(&c, NB_SHAPE(2, 3, 9), NB_SHAPE(2, 3, 3), 2, 11);
    c.o1 = (nb_conv1d_options){.stride = 2, .padding = 2, .dilation = 2, .groups = 3};
    gc(&c, NB_SHAPE(2, 3, 10), NB_SHAPE(6, 1, 3), 6, 12);
    c.o1 = (nb_conv1d_options){.padding_same = true};
    gc(&c, NB_SHAPE(1, 2, 7), NB_SHAPE(3, 2, 4), 3, 13);
}
END_TEST

START_TEST(test_conv_transpose2d_gradcheck) {
    conv_case c = {.kind = 2};
    gc(&c, NB_SHAPE(2, 3, 3, 4), NB_SHAPE(3, 2, 3, 3), 2, 21);
    /* stride 2, output_padding 1, padding 1 */
    c.ot = (nb_conv_transpose2d_options){.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
    gc(&c, NB_SHAPE(2, 2, 3, 3), NB_SHAPE(2, 3, 3, 3), 3, 22);
    /* groups 2, dilation 2, output_padding < dilation, no bias */
    c.ot = (nb_conv_transpose2d_options){.stride = {1, 2}, .dilation = {2, 1}, .output_padding = {1, 1},
                                         .groups = 2};
    gc(&c, NB_SHAPE(2, 4, 3, 2), NB_SHAPE(4, 1, 2, 3), 0, 23);
}
END_TEST

START_TEST(test_conv_grad_only_bias_or_weight) {
    nb_scope *s = nb_scope_begin();
    /* only the bias requires grad: db = sum of g over N, H, W */
    nb_tensor *x = nb_test_randn(NB_SHAPE(2, 2, 4, 4), NB_F64, 3), *w = nb_test_randn(NB_SHAPE(3, 2, 3, 3), NB_F64, 4);
    nb_tensor *b = nb_test_randn_grad(NB_SHAPE(3), 5);
    NB_CK_OK(nb_backward(nb_sum(nb_conv2d(x, w, b, (nb_conv2d_options){0}), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(b), (double[]){8, 8, 8}, 3, 1e-12, 0);
    nb_tensor *bt = nb_test_randn_grad(NB_SHAPE(2), 6);
    nb_tensor *xt = nb_test_randn(NB_SHAPE(2, 2, 3, 3), NB_F64, 7), *wt = nb_test_randn(NB_SHAPE(2, 2, 2, 2), NB_F64, 9);
    nb_tensor *yt = nb_conv_transpose2d(xt, wt, bt, (nb_conv_transpose2d_options){0});
    nb_ck_shape(yt, 4, (int64_t[]){2, 2, 4, 4});
    NB_CK_OK(nb_backward(nb_sum(yt, NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(bt), (double[]){32, 32}, 2, 1e-12, 0);
    /* x does not require grad (the first layer): only w's gradient, = sum of x's windows */
    nb_tensor *wg = nb_test_randn_grad(NB_SHAPE(1, 1, 1, 1), 8);
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(1, 1, 2, 2), NB_F64, (double[]){1, 2, 3, 4});
    NB_CK_OK(nb_backward(nb_sum(nb_conv2d(x1, wg, NULL, (nb_conv2d_options){0}), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(wg), (double[]){10}, 1, 1e-12, 0);
    nb_scope_end(s);
}
END_TEST

/* Planes large enough that the Winograd kernels run in several bands of
 * tile rows, and the MNIST CNN's conv2 shape: forward and all gradients
 * against the naive definitions (float64). */
START_TEST(test_conv2d_large_grads_vs_naive) {
    nb_scope *s = nb_scope_begin();
    ref_geom cases[] = {
        {.n = 2, .c = 8, .h = 70, .w = 30, .co = 8, .kh = 3, .kw = 3, .g = 1, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
         .dh = 1, .dw = 1},
        {.n = 1, .c = 16, .h = 67, .w = 31, .co = 18, .kh = 3, .kw = 3, .g = 2, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.n = 2, .c = 32, .h = 26, .w = 26, .co = 64, .kh = 3, .kw = 3, .g = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ref_geom r = cases[k];
        r.ho = r.h + 2 * r.ph - 2, r.wo = r.w + 2 * r.pw - 2;
        nb_tensor *x = nb_test_randn_grad(NB_SHAPE(r.n, r.c, r.h, r.w), 50 + k);
        nb_tensor *w = nb_test_randn_grad(NB_SHAPE(r.co, r.c / r.g, 3, 3), 60 + k);
        nb_tensor *b = nb_test_randn_grad(NB_SHAPE(r.co), 70 + k);
        nb_tensor *gy = nb_test_randn(NB_SHAPE(r.n, r.co, r.ho, r.wo), NB_F64, 80 + k);
        nb_tensor *y = nb_conv2d(x, w, b, (nb_conv2d_options){.padding = {r.ph, r.pw}, .groups = r.g});
        NB_CK_OK(nb_backward_with(y, gy));
        int64_t ny = r.n * r.co * r.ho * r.wo, nx = r.n * r.c * r.h * r.w, nw = r.co * r.c / r.g * 9;
        double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = nb_test_values_of(b), *gv = nb_test_values_of(gy);
        double *want = malloc(sizeof(double) * (size_t)ny), *gx = malloc(sizeof(double) * (size_t)nx);
        double *gw = malloc(sizeof(double) * (size_t)nw), *gb = malloc(sizeof(double) * (size_t)r.co);
        ref_conv(&r, xv, wv, bv, want);
        ref_conv_grads(&r, xv, wv, gv, gx, gw, gb);
        nb_ck_close(y, want, ny, 1e-11, 1e-11);
        nb_ck_close(nb_tensor_grad(x), gx, nx, 1e-11, 1e-11);
        nb_ck_close(nb_tensor_grad(w), gw, nw, 1e-9, 1e-11);
        nb_ck_close(nb_tensor_grad(b), gb, r.co, 1e-9, 1e-11);
        free(xv), free(wv), free(bv), free(gv), free(want), free(gx), free(gw), free(gb);
    }
    nb_scope_end(s);
}
END_TEST

/* Forward, input and weight gradients of one conv at the current thread
 * count: c 6 runs im2col, c 16 (8 per group) Winograd. */
static void conv_run(int64_t n, int64_t c, double **y, double **gx, double **gw, double **gb) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn(NB_SHAPE(n, c, 9, 8), NB_F32, 40), *w = nb_test_randn(NB_SHAPE(c + 2, c / 2, 3, 3), NB_F32, 41);
    nb_tensor *b = nb_test_randn(NB_SHAPE(c + 2), NB_F32, 42);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    nb_tensor *out = nb_conv2d(x, w, b, (nb_conv2d_options){.padding = {1, 0}, .groups = 2});
    NB_CK_OK(nb_backward_with(out, nb_test_randn(4, nb_shape(out), NB_F32, 43)));
    *y = nb_test_values_of(out), *gx = nb_test_values_of(nb_tensor_grad(x)), *gw = nb_test_values_of(nb_tensor_grad(w)), *gb = nb_test_values_of(nb_tensor_grad(b));
    nb_scope_end(s);
}

START_TEST(test_conv_same_bits_any_thread_count) {
    int saved = nb_get_num_threads();
    int64_t sizes[4] = {0};
    for (int k = 0; k < 4; k++) {
        int64_t n = (int64_t[]){1, 13, 24, 37}[k], c = k % 2 ? 16 : 6;
        double *r[4], *t[4];
        nb_set_num_threads(1);
        conv_run(n, c, &r[0], &r[1], &r[2], &r[3]);
        sizes[0] = n * (c + 2) * 9 * 6, sizes[1] = n * c * 9 * 8, sizes[2] = (c + 2) * c / 2 * 9, sizes[3] = c + 2;
        for (int threads = 2; threads <= 3; threads++) {
            nb_set_num_threads(threads);
            conv_run(n, c, &t[0], &t[1], &t[2], &t[3]);
            for (int k = 0; k < 4; k++) {
                ck_assert_msg(!memcmp(r[k], t[k], sizeof(double) * (size_t)sizes[k]),
                              "n=%lld threads=%d: result %d differs from 1 thread", (long long)n, threads, k);
                free(t[k]);
            }
        }
        for (int k = 0; k < 4; k++) free(r[k]);
    }
    nb_set_num_threads(saved);
}
END_TEST

/* ---- modules ---------------------------------------------------------------------- */

static void check_param(nb_module *m, int idx, const char *name, int ndim, const int64_t *shape, double bound) {
    nb_named_tensor p[2];
    ck_assert_int_ge(nb_module_parameters(m, p, 2), idx + 1);
    ck_assert_str_eq(p[idx].name, name);
    nb_ck_shape(p[idx].tensor, ndim, shape);
    ck_assert_int_eq(nb_dtype_of(p[idx].tensor), NB_F32);
    int64_t n = nb_numel(p[idx].tensor);
    double *v = nb_test_values_of(p[idx].tensor), lo = 0, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(v[i]) <= bound, "%s[%lld] = %g outside +-%g", name, (long long)i, v[i], bound);
        lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    }
    if (n >= 50) ck_assert_msg(lo < -bound / 2 && hi > bound / 2, "%s does not look U(-b, b)", name);
    free(v);
}

START_TEST(test_conv_modules) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(0);
    nb_module *c2 = nb_nn_conv2d(6, 8, 3, (nb_conv2d_options){.groups = 2, .padding = {1, 1}}, true);
    NB_CK_NOTNULL(c2);
    ck_assert_str_eq(nb_module_kind(c2), "Conv2d");
    ck_assert_int_eq(nb_module_parameters(c2, NULL, 0), 2);
    check_param(c2, 0, "weight", 4, (int64_t[]){8, 3, 3, 3}, 1 / sqrt(27.0));
    check_param(c2, 1, "bias", 1, (int64_t[]){8}, 1 / sqrt(27.0));
    nb_tensor *y = nb_forward(c2, nb_randn(NB_SHAPE(2, 6, 5, 4), NB_F32, NULL));
    nb_ck_shape(y, 4, (int64_t[]){2, 8, 5, 4});
    nb_module_free(c2);

    nb_module *c1 = nb_nn_conv1d(4, 5, 3, (nb_conv1d_options){.stride = 2}, false);
    NB_CK_NOTNULL(c1);
    ck_assert_str_eq(nb_module_kind(c1), "Conv1d");
    ck_assert_int_eq(nb_module_parameters(c1, NULL, 0), 1);
    check_param(c1, 0, "weight", 3, (int64_t[]){5, 4, 3}, 1 / sqrt(12.0));
    nb_ck_shape(nb_forward(c1, nb_randn(NB_SHAPE(3, 4, 11), NB_F32, NULL)), 3, (int64_t[]){3, 5, 5});
    nb_module_free(c1);

    /* ConvTranspose2d: weight [in, out/groups, k, k], fan_in = out/groups * k*k */
    nb_module *ct = nb_nn_conv_transpose2d(4, 6, 3, (nb_conv_transpose2d_options){.stride = {2, 2},
                                               .output_padding = {1, 1}, .groups = 2}, true);
    NB_CK_NOTNULL(ct);
    ck_assert_str_eq(nb_module_kind(ct), "ConvTranspose2d");
    check_param(ct, 0, "weight", 4, (int64_t[]){4, 3, 3, 3}, 1 / sqrt(27.0));
    check_param(ct, 1, "bias", 1, (int64_t[]){6}, 1 / sqrt(27.0));
    nb_ck_shape(nb_forward(ct, nb_randn(NB_SHAPE(1, 4, 5, 5), NB_F32, NULL)), 4, (int64_t[]){1, 6, 12, 12});
    nb_module_free(ct);

    /* the same seed gives the same initial weights */
    nb_manual_seed(7);
    nb_module *a = nb_nn_conv2d(2, 3, 2, (nb_conv2d_options){0}, true);
    nb_manual_seed(7);
    nb_module *b = nb_nn_conv2d(2, 3, 2, (nb_conv2d_options){0}, true);
    double *va = nb_test_values_of(nb_module_get(a, "weight")), *vb = nb_test_values_of(nb_module_get(b, "weight"));
    ck_assert(!memcmp(va, vb, sizeof(double) * 24));
    free(va), free(vb);
    nb_module_free(a);
    nb_module_free(b);

    NB_CK_FAILS(nb_nn_conv2d(3, 4, 3, (nb_conv2d_options){.groups = 2}, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_conv2d(0, 4, 3, (nb_conv2d_options){0}, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_conv2d(2, 4, 3, (nb_conv2d_options){.stride = {2, 1}, .padding_same = true}, true),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_conv1d(2, 4, 0, (nb_conv1d_options){0}, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_conv_transpose2d(4, 3, 3, (nb_conv_transpose2d_options){.groups = 2}, true),
                NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------------- */

START_TEST(test_conv_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 4, 5, 5), NB_F32), *w = nb_zeros(NB_SHAPE(6, 2, 3, 3), NB_F32);
    nb_conv2d_options g2 = {.groups = 2};
    NB_CK_NOTNULL(nb_conv2d(x, w, NULL, g2));
    /* channels not divisible by groups; weight/input channel mismatch */
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = 3}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){0}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, nb_zeros(NB_SHAPE(5, 2, 3, 3), NB_F32), NULL, g2), NB_ERR_SHAPE);
    /* kernel larger than the padded input */
    NB_CK_FAILS(nb_conv2d(x, nb_zeros(NB_SHAPE(6, 2, 6, 3), NB_F32), NULL, g2), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = 2, .dilation = {3, 1}}), NB_ERR_SHAPE);
    NB_CK_NOTNULL(nb_conv2d(x, nb_zeros(NB_SHAPE(6, 2, 6, 3), NB_F32), NULL,
                            (nb_conv2d_options){.groups = 2, .padding = {1, 0}}));
    /* wrong ndim; bias shape; dtypes */
    NB_CK_FAILS(nb_conv2d(nb_zeros(NB_SHAPE(4, 5), NB_F32), w, NULL, g2), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, nb_zeros(NB_SHAPE(6, 2, 3), NB_F32), NULL, g2), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, w, nb_zeros(NB_SHAPE(5), NB_F32), g2), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv2d(x, nb_zeros(NB_SHAPE(6, 2, 3, 3), NB_F64), NULL, g2), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_conv2d(nb_zeros(NB_SHAPE(2, 4, 5, 5), NB_I32), nb_zeros(NB_SHAPE(6, 2, 3, 3), NB_I32), NULL, g2),
                NB_ERR_DTYPE);
    /* 'same' with stride > 1, or with explicit padding; negative values */
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = 2, .stride = {1, 2}, .padding_same = true}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = 2, .padding = {1, 1}, .padding_same = true}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = 2, .padding = {-1, 0}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv2d(x, w, NULL, (nb_conv2d_options){.groups = -2}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv1d(nb_zeros(NB_SHAPE(2, 4, 5), NB_F32), nb_zeros(NB_SHAPE(3, 4, 2), NB_F32), NULL,
                          (nb_conv1d_options){.stride = 2, .padding_same = true}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv1d(nb_zeros(NB_SHAPE(2, 4, 5), NB_F32), nb_zeros(NB_SHAPE(3, 4, 7), NB_F32), NULL,
                          (nb_conv1d_options){0}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv1d(x, w, NULL, (nb_conv1d_options){0}), NB_ERR_SHAPE);
    /* conv_transpose2d: output_padding must be below stride or dilation; channel fit */
    nb_tensor *wt = nb_zeros(NB_SHAPE(4, 3, 3, 3), NB_F32);
    NB_CK_NOTNULL(nb_conv_transpose2d(x, wt, NULL,
                                      (nb_conv_transpose2d_options){.stride = {2, 2}, .output_padding = {1, 1}}));
    NB_CK_FAILS(nb_conv_transpose2d(x, wt, NULL, (nb_conv_transpose2d_options){.output_padding = {1, 0}}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv_transpose2d(x, nb_zeros(NB_SHAPE(3, 3, 3, 3), NB_F32), NULL, (nb_conv_transpose2d_options){0}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv_transpose2d(x, wt, nb_zeros(NB_SHAPE(4), NB_F32), (nb_conv_transpose2d_options){0}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv_transpose2d(x, wt, NULL, (nb_conv_transpose2d_options){.padding = {4, 4}}), NB_ERR_SHAPE);
    /* NULL inputs keep the first error */
    NB_CK_FAILS(nb_conv2d(NULL, w, NULL, g2), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- conv3d, conv_transpose3d, conv_transpose1d ----------------------------------- */

typedef struct ref3 {
    int64_t n, c, co, g, in[3], k[3], s[3], p[3], d[3], out[3];
} ref3;

/* out[n, oc, o0, o1, o2] = b[oc] + sum x[n, c, o*s - p + k*d] w[oc, c', k] (zero outside) */
static void ref_conv3d(const ref3 *r, const double *x, const double *w, const double *b, double *out) {
    int64_t cg = r->c / r->g, cog = r->co / r->g, *I = (int64_t *)r->in, *O = (int64_t *)r->out;
    const int64_t *K = r->k;
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t oc = 0; oc < r->co; oc++)
            for (int64_t o0 = 0; o0 < O[0]; o0++)
                for (int64_t o1 = 0; o1 < O[1]; o1++)
                    for (int64_t o2 = 0; o2 < O[2]; o2++) {
                        double acc = b ? b[oc] : 0;
                        for (int64_t cc = 0; cc < cg; cc++)
                            for (int64_t a = 0; a < K[0]; a++)
                                for (int64_t i = 0; i < K[1]; i++)
                                    for (int64_t j = 0; j < K[2]; j++) {
                                        int64_t z = o0 * r->s[0] - r->p[0] + a * r->d[0];
                                        int64_t y = o1 * r->s[1] - r->p[1] + i * r->d[1];
                                        int64_t v = o2 * r->s[2] - r->p[2] + j * r->d[2];
                                        if (z < 0 || z >= I[0] || y < 0 || y >= I[1] || v < 0 || v >= I[2]) continue;
                                        int64_t c = oc / cog * cg + cc;
                                        acc += x[(((n * r->c + c) * I[0] + z) * I[1] + y) * I[2] + v] *
                                               w[(((oc * cg + cc) * K[0] + a) * K[1] + i) * K[2] + j];
                                    }
                        out[(((n * r->co + oc) * O[0] + o0) * O[1] + o1) * O[2] + o2] = acc;
                    }
}

START_TEST(test_conv3d_vs_naive) {
    /* {n, c, co, g, in, k, s, p, d, same} */
    const struct {
        int64_t n, c, co, g, in[3], k[3], s[3], p[3], d[3];
        bool same;
    } cfg[] = {
        {2, 3, 4, 1, {4, 5, 3}, {2, 3, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, false},
        {1, 4, 6, 2, {5, 4, 6}, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, false},
        {2, 2, 2, 2, {6, 3, 4}, {2, 2, 2}, {3, 1, 1}, {1, 1, 0}, {2, 1, 2}, false},
        {1, 2, 3, 1, {4, 5, 4}, {2, 3, 4}, {1, 1, 1}, {0, 0, 0}, {2, 1, 1}, true}, /* even kernels: the extra pad after */
    };
    for (size_t t = 0; t < sizeof cfg / sizeof cfg[0]; t++)
        for (int d = 0; d < 2; d++) {
            nb_scope *s = nb_scope_begin();
            nb_dtype dt = d ? NB_F32 : NB_F64;
            ref3 r = {.n = cfg[t].n, .c = cfg[t].c, .co = cfg[t].co, .g = cfg[t].g};
            nb_conv3d_options o = {.groups = r.g, .padding_same = cfg[t].same};
            for (int i = 0; i < 3; i++) {
                r.in[i] = cfg[t].in[i], r.k[i] = cfg[t].k[i], r.s[i] = cfg[t].s[i], r.d[i] = cfg[t].d[i];
                r.p[i] = cfg[t].same ? r.d[i] * (r.k[i] - 1) / 2 : cfg[t].p[i];
                r.out[i] = cfg[t].same ? r.in[i] : (r.in[i] + 2 * r.p[i] - r.d[i] * (r.k[i] - 1) - 1) / r.s[i] + 1;
                o.stride[i] = r.s[i], o.dilation[i] = r.d[i], o.padding[i] = cfg[t].same ? 0 : r.p[i];
            }
            nb_tensor *x = nb_to_dtype(nb_test_randn_grad(5, (int64_t[]){r.n, r.c, r.in[0], r.in[1], r.in[2]}, 3 + t), dt);
            nb_tensor *w = nb_to_dtype(nb_test_randn_grad(5, (int64_t[]){r.co, r.c / r.g, r.k[0], r.k[1], r.k[2]}, 5 + t),
                                       dt);
            nb_tensor *b = nb_to_dtype(nb_test_randn_grad(1, &r.co, 7 + t), dt);
            double *xv = nb_test_values_of(x), *wv = nb_test_values_of(w), *bv = nb_test_values_of(b);
            int64_t on = r.n * r.co * r.out[0] * r.out[1] * r.out[2];
            double *want = malloc(sizeof(double) * (size_t)on);
            ref_conv3d(&r, xv, wv, bv, want);
            nb_tensor *y = nb_conv3d(x, w, b, o);
            NB_CK_NOTNULL(y);
            nb_ck_shape(y, 5, (int64_t[]){r.n, r.co, r.out[0], r.out[1], r.out[2]});
            nb_ck_close(y, want, on, d ? 1e-4 : 1e-12, d ? 1e-5 : 1e-12);
            free(xv), free(wv), free(bv), free(want);
            nb_scope_end(s);
        }
}
END_TEST

/* sum(a * b) */
static double dot(nb_tensor *a, nb_tensor *b) { return nb_item(nb_sum(nb_mul(a, b), NULL, 0, false)); }

/* conv_transpose is the adjoint of conv: <conv(x, w), y> = <x, conv_transpose(y, w)>,
 * with output_padding giving back x's size; the bias is added per channel */
START_TEST(test_conv_transpose3d_1d_adjoint) {
    nb_scope *s = nb_scope_begin();
    /* x [2, 4, 7, 5, 7], w [6, 2, 3, 2, 3], groups 2, stride (2, 1, 3), padding (1, 1, 0), dilation (1, 2, 1):
     * y [2, 6, 4, 5, 2]; back: depth (4-1)*2 - 2 + 2 + 1 = 7, height 4 - 2 + 2 + 1 = 5, width 3 + 2 + 1 + 1 = 7
     * with output_padding 1 there (floor division dropped one column) */
    nb_tensor *x = nb_test_randn_grad(5, (int64_t[]){2, 4, 7, 5, 7}, 11), *w = nb_test_randn_grad(5, (int64_t[]){6, 2, 3, 2, 3}, 12);
    nb_conv3d_options o = {.stride = {2, 1, 3}, .padding = {1, 1, 0}, .dilation = {1, 2, 1}, .groups = 2};
    nb_tensor *y = nb_conv3d(x, w, NULL, o);
    nb_ck_shape(y, 5, (int64_t[]){2, 6, 4, 5, 2});
    nb_tensor *g = nb_test_randn_grad(5, nb_shape(y), 13);
    nb_conv_transpose3d_options ot = {.stride = {2, 1, 3}, .padding = {1, 1, 0}, .dilation = {1, 2, 1}, .groups = 2,
                                      .output_padding = {0, 0, 1}};
    nb_tensor *xt = nb_conv_transpose3d(g, w, NULL, ot);
    nb_ck_shape(xt, 5, nb_shape(x));
    ck_assert(fabs(dot(y, g) - dot(x, xt)) < 1e-9 * (1 + fabs(dot(y, g))));
    nb_tensor *bias = nb_test_randn_grad(1, (int64_t[]){4}, 14); /* Cout = w's dim 1 * groups */
    nb_tensor *diff = nb_sub(nb_conv_transpose3d(g, w, bias, ot), xt);
    nb_tensor *want_b = nb_expand(nb_reshape(bias, NB_SHAPE(1, 4, 1, 1, 1)), 5, nb_shape(diff));
    ck_assert(nb_item(nb_amax(nb_abs(nb_sub(diff, want_b)), NULL, 0, false)) < 1e-12);
    /* conv_transpose1d against conv1d */
    nb_tensor *x1 = nb_test_randn_grad(3, (int64_t[]){3, 4, 10}, 15), *w1 = nb_test_randn_grad(3, (int64_t[]){2, 2, 3}, 16);
    nb_conv1d_options o1 = {.stride = 2, .padding = 1, .dilation = 2, .groups = 2};
    nb_tensor *y1 = nb_conv1d(x1, w1, NULL, o1); /* [3, 2, 4]: back to 9 + output_padding 1 */
    nb_tensor *g1 = nb_test_randn_grad(3, nb_shape(y1), 17);
    nb_tensor *xt1 = nb_conv_transpose1d(g1, w1, NULL, (nb_conv_transpose1d_options){.stride = 2, .padding = 1,
                                         .dilation = 2, .groups = 2, .output_padding = 1});
    nb_ck_shape(xt1, 3, (int64_t[]){3, 4, 10});
    ck_assert(fabs(dot(y1, g1) - dot(x1, xt1)) < 1e-9 * (1 + fabs(dot(y1, g1))));
    nb_ck_shape(nb_conv_transpose1d(nb_squeeze(nb_narrow(g1, 0, 0, 1), 0), w1, NULL,
                                    (nb_conv_transpose1d_options){.groups = 2}),
                2, (int64_t[]){4, 6}); /* unbatched: [Cin, L] -> [Cout, L + k - 1] */
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_conv3(nb_tensor *const *in, int n, void *ctx) {
    int kind = *(const int *)ctx;
    nb_tensor *b = n > 2 ? in[2] : NULL;
    if (kind == 0)
        return nb_conv3d(in[0], in[1], b, (nb_conv3d_options){.stride = {2, 1, 1}, .padding = {1, 0, 1},
                                                               .dilation = {1, 1, 2}, .groups = 2});
    if (kind == 1)
        return nb_conv_transpose3d(in[0], in[1], b, (nb_conv_transpose3d_options){.stride = {2, 1, 2},
                                   .padding = {1, 0, 0}, .output_padding = {1, 0, 1}, .dilation = {1, 2, 1}});
    return nb_conv_transpose1d(in[0], in[1], b, (nb_conv_transpose1d_options){.stride = 3, .padding = 1,
                               .output_padding = 2, .groups = 2});
}

START_TEST(test_conv3d_gradcheck) {
    const int64_t shapes[3][3][5] = {{{2, 4, 4, 3, 3}, {2, 2, 2, 2, 2}, {2}},
                                     {{1, 2, 2, 3, 2}, {2, 3, 2, 2, 2}, {3}},
                                     {{2, 4, 3}, {4, 1, 2}, {2}}};
    const int nd[3] = {5, 5, 3};
    for (int kind = 0; kind < 3; kind++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *in[3] = {nb_test_randn_grad(nd[kind], shapes[kind][0], 20 + kind),
                            nb_test_randn_grad(nd[kind], shapes[kind][1], 30 + kind),
                            nb_test_randn_grad(1, shapes[kind][2], 40 + kind)};
        nb_ck_gradcheck(f_conv3, in, 3, &kind);
        nb_scope_end(s);
    }
}
END_TEST

START_TEST(test_conv3d_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(1, 4, 3, 3, 3), NB_F64), *w = nb_zeros(NB_SHAPE(2, 4, 2, 2, 2), NB_F64);
    NB_CK_FAILS(nb_conv3d(x, nb_zeros(NB_SHAPE(2, 3, 2, 2, 2), NB_F64), NULL, (nb_conv3d_options){0}), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "conv3d"));
    NB_CK_FAILS(nb_conv3d(x, nb_zeros(NB_SHAPE(2, 4, 2, 2), NB_F64), NULL, (nb_conv3d_options){0}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv3d(x, nb_zeros(NB_SHAPE(2, 4, 4, 2, 2), NB_F64), NULL, (nb_conv3d_options){0}), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "depth"));
    NB_CK_FAILS(nb_conv3d(x, w, NULL, (nb_conv3d_options){.stride = {-1, 1, 1}}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv3d(x, w, NULL, (nb_conv3d_options){.stride = {2, 1, 1}, .padding_same = true}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_conv3d(x, w, nb_zeros(NB_SHAPE(3), NB_F64), (nb_conv3d_options){0}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv3d(x, nb_zeros(NB_SHAPE(2, 4, 2, 2, 2), NB_F32), NULL, (nb_conv3d_options){0}), NB_ERR_DTYPE);
    nb_ck_shape(nb_conv3d(nb_zeros(NB_SHAPE(4, 3, 3, 3), NB_F64), w, NULL, (nb_conv3d_options){0}), 4,
                (int64_t[]){2, 2, 2, 2}); /* unbatched */
    nb_tensor *wt = nb_zeros(NB_SHAPE(4, 2, 2, 2, 2), NB_F64);
    NB_CK_FAILS(nb_conv_transpose3d(x, wt, NULL, (nb_conv_transpose3d_options){.output_padding = {1, 0, 0}}),
                NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "output_padding"));
    NB_CK_FAILS(nb_conv_transpose3d(x, wt, NULL, (nb_conv_transpose3d_options){.padding = {2, 0, 0}}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv_transpose3d(x, nb_zeros(NB_SHAPE(3, 2, 2, 2, 2), NB_F64), NULL, (nb_conv_transpose3d_options){0}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv_transpose1d(nb_zeros(NB_SHAPE(1, 4, 3), NB_F64), nb_zeros(NB_SHAPE(4, 2, 2, 2), NB_F64), NULL,
                                    (nb_conv_transpose1d_options){0}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_conv_transpose1d(nb_zeros(NB_SHAPE(1, 4, 3), NB_F64), nb_zeros(NB_SHAPE(4, 2, 2), NB_F64), NULL,
                                    (nb_conv_transpose1d_options){.output_padding = 1}),
                NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- deform_conv2d ---------------------------------------------------------------- */

/* zero offsets and a unit mask give conv2d; integer offsets read shifted pixels
 * (zeros past the edge); half-pixel offsets average neighbours */
START_TEST(test_deform_conv2d_values) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(4, (int64_t[]){2, 4, 5, 6}, 80), *w = nb_test_randn_grad(4, (int64_t[]){6, 2, 3, 2}, 81);
    nb_tensor *b = nb_test_randn_grad(1, (int64_t[]){6}, 82);
    nb_deform_conv2d_options o = {.stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}};
    nb_tensor *ref = nb_conv2d(x, w, b, (nb_conv2d_options){.stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2},
                                                            .groups = 2});
    nb_ck_shape(ref, 4, (int64_t[]){2, 6, 3, 6});
    nb_tensor *zero = nb_zeros(NB_SHAPE(2, 2 * 2 * 6, 3, 6), NB_F64), *ones = nb_ones(NB_SHAPE(2, 2 * 6, 3, 6), NB_F64);
    nb_tensor *y = nb_deform_conv2d(x, zero, w, b, NULL, o);
    ck_assert(nb_item(nb_amax(nb_abs(nb_sub(y, ref)), NULL, 0, false)) < 1e-12);
    y = nb_deform_conv2d(x, zero, w, b, ones, o);
    ck_assert(nb_item(nb_amax(nb_abs(nb_sub(y, ref)), NULL, 0, false)) < 1e-12);
    /* a 1x1 kernel with offset (+1, -2): out[h, w] = x[h + 1, w - 2], 0 outside */
    nb_tensor *x1 = nb_test_tensor(NB_SHAPE(1, 1, 3, 4), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    nb_tensor *w1 = nb_ones(NB_SHAPE(1, 1, 1, 1), NB_F64);
    nb_tensor *off = nb_cat((nb_tensor *[]){nb_full(NB_SHAPE(1, 1, 3, 4), 1, NB_F64), nb_full(NB_SHAPE(1, 1, 3, 4), -2, NB_F64)}, 2, 1);
    nb_ck_close(nb_deform_conv2d(x1, off, w1, NULL, NULL, (nb_deform_conv2d_options){0}),
                (double[]){0, 0, 5, 6, 0, 0, 9, 10, 0, 0, 0, 0}, 12, 0, 0);
    /* (+0.5, +0.5): the mean of a 2x2 block, half of it past the last row/column */
    off = nb_full(NB_SHAPE(1, 2, 3, 4), 0.5, NB_F64);
    nb_ck_close(nb_deform_conv2d(x1, off, w1, NULL, nb_full(NB_SHAPE(1, 1, 3, 4), 2, NB_F64), (nb_deform_conv2d_options){0}),
                (double[]){7, 9, 11, 6, 15, 17, 19, 10, 9.5, 10.5, 11.5, 6}, 12, 1e-12, 1e-12); /* mask 2 */
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_deform(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    nb_deform_conv2d_options o = {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}};
    return nb_deform_conv2d(in[0], nb_mul_scalar(in[1], 0.8), in[2], in[3], in[4], o);
}

START_TEST(test_deform_conv2d_gradcheck) {
    nb_scope *s = nb_scope_begin();
    /* x [2, 4, 5, 4], weight [4, 2, 2, 2] (groups 2), offset groups 2: offset [2, 16, 5, 3], mask [2, 8, 5, 3] */
    nb_tensor *in[5] = {nb_test_randn_grad(4, (int64_t[]){2, 4, 5, 4}, 90), nb_test_randn_grad(4, (int64_t[]){2, 16, 5, 3}, 91),
                        nb_test_randn_grad(4, (int64_t[]){4, 2, 2, 2}, 92), nb_test_randn_grad(1, (int64_t[]){4}, 93),
                        nb_test_randn_grad(4, (int64_t[]){2, 8, 5, 3}, 94)};
    nb_ck_gradcheck(f_deform, in, 5, NULL);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_deform_conv2d_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(1, 4, 5, 5), NB_F32), *w = nb_zeros(NB_SHAPE(2, 4, 3, 3), NB_F32);
    nb_tensor *off = nb_zeros(NB_SHAPE(1, 18, 3, 3), NB_F32);
    nb_deform_conv2d_options o = {0};
    NB_CK_NOTNULL(nb_deform_conv2d(x, off, w, NULL, NULL, o));
    NB_CK_FAILS(nb_deform_conv2d(x, nb_zeros(NB_SHAPE(1, 18, 3, 4), NB_F32), w, NULL, NULL, o), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "offset"));
    NB_CK_FAILS(nb_deform_conv2d(x, nb_zeros(NB_SHAPE(1, 17, 3, 3), NB_F32), w, NULL, NULL, o), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_deform_conv2d(x, off, nb_zeros(NB_SHAPE(2, 3, 3, 3), NB_F32), NULL, NULL, o), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_deform_conv2d(x, off, w, nb_zeros(NB_SHAPE(3), NB_F32), NULL, o), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_deform_conv2d(x, off, w, NULL, nb_zeros(NB_SHAPE(1, 8, 3, 3), NB_F32), o), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "mask"));
    NB_CK_FAILS(nb_deform_conv2d(x, nb_zeros(NB_SHAPE(1, 18, 1, 1), NB_F32), nb_zeros(NB_SHAPE(2, 4, 6, 6), NB_F32),
                                 NULL, NULL, o),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_deform_conv2d(x, off, w, NULL, NULL, (nb_deform_conv2d_options){.padding = {-1, 0}}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_deform_conv2d(x, nb_zeros(NB_SHAPE(1, 18, 3, 3), NB_F64), w, NULL, NULL, o), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_deform_conv2d(nb_zeros(NB_SHAPE(4, 5, 5), NB_F32), off, w, NULL, NULL, o), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_conv(void) {
    Suite *s = suite_create("ops_conv");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_conv2d_by_hand);
    tcase_add_test(f, test_conv2d_vs_naive);
    tcase_add_test(f, test_conv2d_larger_vs_naive);
    tcase_add_test(f, test_conv1d_vs_naive);
    tcase_add_test(f, test_conv_transpose2d_vs_naive);
    tcase_add_test(f, test_conv_strided_and_unbatched_inputs);
    tcase_add_test(f, test_conv_errors);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_conv2d_gradcheck);
    tcase_add_test(g, test_conv2d_winograd_gradcheck);
    tcase_add_test(g, test_conv2d_large_grads_vs_naive);
    tcase_add_test(g, test_conv1d_gradcheck);
    tcase_add_test(g, test_conv_transpose2d_gradcheck);
    tcase_add_test(g, test_conv_grad_only_bias_or_weight);
    tcase_add_test(g, test_conv_same_bits_any_thread_count);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    TCase *t3 = tcase_create("conv3d");
    tcase_add_test(t3, test_conv3d_vs_naive);
    tcase_add_test(t3, test_conv_transpose3d_1d_adjoint);
    tcase_add_test(t3, test_conv3d_gradcheck);
    tcase_add_test(t3, test_conv3d_errors);
    tcase_add_test(t3, test_deform_conv2d_values);
    tcase_add_test(t3, test_deform_conv2d_gradcheck);
    tcase_add_test(t3, test_deform_conv2d_errors);
    tcase_set_timeout(t3, 300);
    suite_add_tcase(s, t3);
    TCase *m = tcase_create("modules");
    tcase_add_test(m, test_conv_modules);
    suite_add_tcase(s, m);
    return s;
}
