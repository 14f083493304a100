/* test_ops_attention.c - scaled_dot_product_attention: a value computed by
 * hand, the fused kernel against the naive composition softmax(q k^T *
 * scale + mask) v built here from nb_matmul / nb_softmax (float64 to 1e-10,
 * float32 to 1e-5; sizes that are not multiples of the 64-wide tiles), bool
 * masks broadcast over the batch, additive masks, is_causal with L != S,
 * custom scale, dropout (reproducible per generator state, matching the
 * Philox keep mask of nb_bernoulli_, unbiased on average), gradchecks of q,
 * k, v (and of an additive mask) in every mode, bitwise equality for 1 and
 * 2 threads, fully masked rows (NaN, as PyTorch), error paths, a memory
 * bound showing the [L, S] score matrix is never allocated, and grouped-query
 * attention (enable_gqa) against k/v repeated by hand, with its gradcheck;
 * bfloat16/float16 against float32, and q, k, v taken as strided head
 * views of one projection against contiguous copies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

typedef struct {
    nb_tensor *mask; /* fixed mask (or NULL) */
    bool mask_is_input; /* gradcheck the mask too: it is in[3] */
    bool causal;
    double scale, p;
    nb_generator gen; /* copied on every call so the dropout mask repeats */
} sdpa_ctx;

static nb_tensor *f_sdpa(nb_tensor *const *in, int n, void *ctx) {
    const sdpa_ctx *c = ctx;
    nb_generator g = c->gen;
    nb_sdpa_options o = {.attn_mask = c->mask_is_input && n > 3 ? in[3] : c->mask, .dropout_p = c->p,
                         .is_causal = c->causal, .scale = c->scale, .gen = &g};
    return nb_scaled_dot_product_attention(in[0], in[1], in[2], o);
}

/* The additive form of is_causal for [L, S]: -inf where j > i. */
static nb_tensor *causal_additive(int64_t L, int64_t S, nb_dtype dt) {
    double *m = malloc(sizeof(double) * (size_t)(L * S));
    ck_assert_ptr_nonnull(m);
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++) m[i * S + j] = j > i ? -INFINITY : 0;
    nb_tensor *t = nb_test_tensor(NB_SHAPE(L, S), dt, m);
    free(m);
    NB_CK_NOTNULL(t);
    return t;
}

/* softmax(q k^T * scale + add_mask) * keep v, composed from plain ops. */
static nb_tensor *naive(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *add_mask, double scale, nb_tensor *keep) {
    nb_tensor *s = nb_mul_scalar(nb_matmul(q, nb_transpose(k, -1, -2)), scale);
    if (add_mask) s = nb_add(s, add_mask);
    nb_tensor *w = nb_softmax(s, -1);
    if (keep) w = nb_mul(w, keep);
    nb_tensor *r = nb_matmul(w, v);
    NB_CK_NOTNULL(r);
    return r;
}

/* The dropout factor the kernel uses: (u >= p) / (1 - p) from the generator state. */
static nb_tensor *keep_factor(int ndim, const int64_t *shape, nb_dtype dt, nb_generator gen, double p) {
    nb_tensor *drop = nb_empty(ndim, shape, dt);
    NB_CK_NOTNULL(drop);
    NB_CK_OK(nb_bernoulli_(drop, p, &gen));
    return nb_mul_scalar(nb_add_scalar(nb_neg(drop), 1), 1 / (1 - p));
}


/* ---- forward ----------------------------------------------------------------- */

START_TEST(test_hand_value) {
    nb_scope *s = nb_scope_begin();
    /* q = [1], k = [0, 1], v = [1, 3], scale 1: weights softmax([0, 1]) */
    nb_tensor *q = nb_test_tensor(NB_SHAPE(1, 1), NB_F64, (double[]){1});
    nb_tensor *k = nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){0, 1});
    nb_tensor *v = nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){1, 3});
    double e = exp(1.0);
    nb_tensor *o = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.scale = 1});
    nb_ck_shape(o, 2, (int64_t[]){1, 1});
    nb_ck_close(o, (double[]){(1 + 3 * e) / (1 + e)}, 1, 0, 1e-15);
    /* default scale 1/sqrt(E) with E = 4: q.k = 4 and 0 -> scores 2 and 0 */
    nb_tensor *q4 = nb_test_tensor(NB_SHAPE(1, 4), NB_F64, (double[]){1, 1, 1, 1});
    nb_tensor *k4 = nb_test_tensor(NB_SHAPE(2, 4), NB_F64, (double[]){1, 1, 1, 1, 0, 0, 0, 0});
    o = nb_scaled_dot_product_attention(q4, k4, v, (nb_sdpa_options){0});
    double e2 = exp(2.0);
    nb_ck_close(o, (double[]){(e2 + 3) / (e2 + 1)}, 1, 0, 1e-15);
    /* bool mask hiding key 1 leaves v[0] */
    nb_tensor *m = nb_from_data((bool[]){true, false}, NB_SHAPE(1, 2), NB_BOOL);
    nb_ck_close(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = m}), (double[]){1}, 1, 0, 0);
    nb_scope_end(s);
}
END_TEST

typedef struct {
    int64_t B, H, L, S, E, Ev;
} dims;

/* One forward comparison in each mode for dtype dt. */
static void check_modes(dims d, nb_dtype dt, double atol) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *q64 = nb_test_randn(NB_SHAPE(d.B, d.H, d.L, d.E), NB_F64, 1);
    nb_tensor *k64 = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.E), NB_F64, 2);
    nb_tensor *v64 = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.Ev), NB_F64, 3);
    nb_tensor *q = nb_to_dtype(q64, dt), *k = nb_to_dtype(k64, dt), *v = nb_to_dtype(v64, dt);
    double sc = 1 / sqrt((double)d.E);
    /* no mask */
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){0}), naive(q64, k64, v64, NULL, sc, NULL),
                   atol);
    /* custom scale */
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.scale = 0.37}),
                   naive(q64, k64, v64, NULL, 0.37, NULL), atol);
    /* bool [L, S] broadcast over batch and heads */
    double *add = malloc(sizeof(double) * (size_t)(d.L * d.S));
    ck_assert_ptr_nonnull(add);
    nb_tensor *bm = nb_test_bool_mask(d.L, d.S, 5, add);
    nb_tensor *am = nb_test_tensor(NB_SHAPE(d.L, d.S), NB_F64, add);
    free(add);
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = bm}),
                   naive(q64, k64, v64, am, sc, NULL), atol);
    /* a padding-style mask [B, 1, 1, S] (broadcast over heads and rows) */
    nb_tensor *pad = nb_narrow(nb_reshape(bm, NB_SHAPE(d.L, 1, 1, d.S)), 0, 1, d.B); /* offset view */
    nb_tensor *pad_add = nb_narrow(nb_reshape(am, NB_SHAPE(d.L, 1, 1, d.S)), 0, 1, d.B);
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = pad}),
                   naive(q64, k64, v64, pad_add, sc, NULL), atol);
    /* additive float mask [H, L, S], finite values */
    nb_tensor *fm64 = nb_test_randn(NB_SHAPE(d.H, d.L, d.S), NB_F64, 7);
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = nb_to_dtype(fm64, dt)}),
                   naive(q64, k64, v64, fm64, sc, NULL), atol);
    /* causal (top-left aligned for L != S) */
    nb_ck_close_to(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.is_causal = true, .scale = 0.5}),
                   naive(q64, k64, v64, causal_additive(d.L, d.S, NB_F64), 0.5, NULL), atol);
    nb_scope_end(s);
}

START_TEST(test_forward_f64_small) {
    check_modes((dims){2, 2, 5, 7, 4, 3}, NB_F64, 1e-10);
    check_modes((dims){1, 3, 7, 5, 6, 2}, NB_F64, 1e-10); /* L > S, causal rows past S see all keys */
}
END_TEST

START_TEST(test_forward_f64_ragged) {
    check_modes((dims){2, 1, 130, 67, 16, 8}, NB_F64, 1e-10);
    check_modes((dims){1, 2, 67, 200, 70, 9}, NB_F64, 1e-10); /* E = 70: narrower key tiles */
}
END_TEST

START_TEST(test_forward_f32) {
    check_modes((dims){2, 2, 5, 7, 4, 3}, NB_F32, 1e-5);
    check_modes((dims){2, 1, 130, 67, 16, 8}, NB_F32, 1e-5);
}
END_TEST

START_TEST(test_no_batch_dims_and_shapes) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *q = nb_test_randn(NB_SHAPE(9, 5), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(11, 5), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(11, 6), NB_F64, 3);
    nb_tensor *o = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.is_causal = true});
    nb_ck_shape(o, 2, (int64_t[]){9, 6});
    nb_ck_close_to(o, naive(q, k, v, causal_additive(9, 11, NB_F64), 1 / sqrt(5.0), NULL), 1e-12);
    /* non-contiguous inputs (transposed heads) */
    nb_tensor *qt = nb_transpose(nb_test_randn(NB_SHAPE(2, 6, 3, 4), NB_F64, 4), 1, 2);
    nb_tensor *kt = nb_transpose(nb_test_randn(NB_SHAPE(2, 8, 3, 4), NB_F64, 5), 1, 2);
    nb_tensor *vt = nb_transpose(nb_test_randn(NB_SHAPE(2, 8, 3, 4), NB_F64, 6), 1, 2);
    o = nb_scaled_dot_product_attention(qt, kt, vt, (nb_sdpa_options){0});
    nb_ck_shape(o, 4, (int64_t[]){2, 3, 6, 4});
    nb_ck_close_to(o, naive(qt, kt, vt, NULL, 0.5, NULL), 1e-12);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_fully_masked_row_nan) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *q = nb_test_randn(NB_SHAPE(2, 3), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(2, 3), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(2, 2), NB_F64, 3);
    nb_tensor *m = nb_from_data((bool[]){true, true, false, false}, NB_SHAPE(2, 2), NB_BOOL);
    double got[4];
    nb_test_values(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = m}), got, 4);
    ck_assert(isfinite(got[0]) && isfinite(got[1]));
    ck_assert(isnan(got[2]) && isnan(got[3])); /* softmax of an all -inf row, as PyTorch */
    nb_scope_end(s);
}
END_TEST

/* ---- dropout ------------------------------------------------------------------- */

START_TEST(test_dropout_reproducible_and_exact) {
    nb_scope *s = nb_scope_begin();
    dims d = {2, 2, 70, 67, 8, 5};
    nb_tensor *q = nb_test_randn(NB_SHAPE(d.B, d.H, d.L, d.E), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.E), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.Ev), NB_F64, 3);
    nb_generator g0 = nb_generator_new(42), g1 = g0, g2 = g0;
    nb_tensor *a = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = 0.3, .gen = &g1});
    nb_tensor *b = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = 0.3, .gen = &g2});
    nb_ck_bitwise(a, b);
    /* the generator advanced by one Philox block per two weights */
    ck_assert_uint_eq(g1.offset, g0.offset + (uint64_t)(d.B * d.H * d.L * d.S + 1) / 2);
    nb_tensor *c = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = 0.3, .gen = &g1});
    double x[2], y[2];
    nb_test_values(a, x, 2), nb_test_values(c, y, 2);
    ck_assert(x[0] != y[0] || x[1] != y[1]); /* a new mask on the next call */
    /* equal to the composition with the keep mask u >= p of the same Philox bits */
    nb_tensor *keep = keep_factor(NB_SHAPE(d.B, d.H, d.L, d.S), NB_F64, g0, 0.3);
    nb_ck_close_to(a, naive(q, k, v, NULL, 1 / sqrt(8.0), keep), 1e-10);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_dropout_unbiased) {
    nb_scope *s = nb_scope_begin();
    /* q = 0: every weight is 1/S; v = 1: out = (kept / S) / (1 - p), mean 1 */
    int64_t L = 256, S = 256;
    nb_tensor *q = nb_zeros(NB_SHAPE(1, L, 4), NB_F32), *k = nb_test_randn(NB_SHAPE(1, S, 4), NB_F32, 2);
    nb_tensor *v = nb_ones(NB_SHAPE(1, S, 1), NB_F32);
    nb_generator g = nb_generator_new(7);
    double p = 0.3;
    nb_tensor *o = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = p, .gen = &g});
    double *x = malloc(sizeof(double) * (size_t)L), mean = 0, lo = 1e9, hi = -1e9;
    ck_assert_ptr_nonnull(x);
    nb_test_values(o, x, L);
    for (int64_t i = 0; i < L; i++) mean += x[i] / (double)L, lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
    free(x);
    ck_assert_msg(fabs(mean - 1) < 0.015, "mean %g", mean); /* std of the mean ~0.0026 */
    ck_assert_msg(hi - lo > 0.05, "rows should differ (%g..%g)", lo, hi);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients ----------------------------------------------------------------- */

static void gradcheck_qkv(dims d, sdpa_ctx c, uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[4] = {nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.L, d.E), seed),
                        nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.S, d.E), seed + 1),
                        nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.S, d.Ev), seed + 2), c.mask};
    nb_ck_gradcheck(f_sdpa, in, c.mask_is_input ? 4 : 3, &c);
    nb_scope_end(s);
}

START_TEST(test_gradcheck_modes) {
    dims d = {2, 2, 5, 7, 4, 3};
    gradcheck_qkv(d, (sdpa_ctx){0}, 10);
    gradcheck_qkv(d, (sdpa_ctx){.scale = 0.8}, 20);
    gradcheck_qkv(d, (sdpa_ctx){.causal = true}, 30);
    gradcheck_qkv((dims){1, 2, 7, 5, 3, 4}, (sdpa_ctx){.causal = true}, 35); /* L > S */
    nb_scope *s = nb_scope_begin();
    gradcheck_qkv(d, (sdpa_ctx){.mask = nb_test_bool_mask(d.L, d.S, 3, NULL)}, 40);
    gradcheck_qkv(d, (sdpa_ctx){.mask = nb_test_randn(NB_SHAPE(d.B, 1, d.L, d.S), NB_F64, 9)}, 50);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_partial) {
    /* only some inputs require grad: the kernel skips the other passes */
    nb_scope *s = nb_scope_begin();
    dims d = {2, 2, 70, 9, 4, 3};
    nb_tensor *q = nb_test_randn(NB_SHAPE(d.B, d.H, d.L, d.E), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.E), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.Ev), NB_F64, 3);
    sdpa_ctx c = {.causal = true, .p = 0.1, .gen = nb_generator_new(4)};
    nb_tensor *only_q[3] = {nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.L, d.E), 5), k, v};
    nb_tensor *only_v[3] = {q, k, nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.S, d.Ev), 6)};
    nb_tensor *only_k[3] = {q, nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.S, d.E), 7), v};
    nb_ck_gradcheck(f_sdpa, only_q, 3, &c);
    nb_ck_gradcheck(f_sdpa, only_v, 3, &c);
    nb_ck_gradcheck(f_sdpa, only_k, 3, &c);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_additive_mask_grad) {
    dims d = {2, 2, 5, 7, 4, 3};
    nb_scope *s = nb_scope_begin();
    /* the mask is an input: its gradient is dS summed over the broadcast dims */
    gradcheck_qkv(d, (sdpa_ctx){.mask = nb_test_randn_grad(NB_SHAPE(d.L, d.S), 60), .mask_is_input = true}, 61);
    gradcheck_qkv(d, (sdpa_ctx){.mask = nb_test_randn_grad(NB_SHAPE(d.B, d.H, d.L, d.S), 62), .mask_is_input = true,
                                .p = 0.25, .gen = nb_generator_new(3)},
                  63);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gradcheck_ragged_and_dropout) {
    /* several tiles in both directions, with dropout (the same mask on every call) */
    dims d = {1, 1, 70, 67, 3, 2};
    nb_scope *s = nb_scope_begin();
    gradcheck_qkv(d, (sdpa_ctx){.p = 0.2, .gen = nb_generator_new(5)}, 70);
    gradcheck_qkv((dims){2, 2, 5, 7, 4, 3}, (sdpa_ctx){.p = 0.4, .gen = nb_generator_new(6), .causal = true}, 80);
    gradcheck_qkv((dims){1, 1, 66, 70, 2, 2}, (sdpa_ctx){.causal = true, .mask = NULL}, 90);
    nb_scope_end(s);
}
END_TEST

/* Gradients of sum(out * w) w.r.t. q, k, v in dtype dt, as float64 host values. */
static void grads_in(nb_dtype dt, dims d, sdpa_ctx c, double *out[3]) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[3] = {nb_to_dtype(nb_test_randn(NB_SHAPE(d.B, d.H, d.L, d.E), NB_F64, 1), dt),
                        nb_to_dtype(nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.E), NB_F64, 2), dt),
                        nb_to_dtype(nb_test_randn(NB_SHAPE(d.B, d.H, d.S, d.Ev), NB_F64, 3), dt)};
    for (int i = 0; i < 3; i++) NB_CK_OK(nb_set_requires_grad(in[i], true));
    if (c.mask && nb_dtype_of(c.mask) != NB_BOOL) c.mask = nb_to_dtype(c.mask, dt);
    nb_tensor *o = f_sdpa(in, 3, &c);
    nb_tensor *w = nb_to_dtype(nb_test_randn(4, nb_shape(o), NB_F64, 4), dt);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(o, w), NULL, 0, false)));
    for (int i = 0; i < 3; i++) {
        int64_t n = nb_numel(in[i]);
        out[i] = malloc(sizeof(double) * (size_t)n);
        ck_assert_ptr_nonnull(out[i]);
        nb_test_values(nb_tensor_grad(in[i]), out[i], n);
    }
    nb_scope_end(s);
}

START_TEST(test_backward_f32_matches_f64) {
    /* the float32 kernels (own exp, transposed tiles) against float64 */
    dims d = {2, 1, 130, 150, 16, 8};
    nb_scope *s = nb_scope_begin();
    sdpa_ctx cases[3] = {{.causal = true}, {.mask = nb_test_randn(NB_SHAPE(d.L, d.S), NB_F64, 5)},
                         {.p = 0.2, .gen = nb_generator_new(9), .mask = nb_test_bool_mask(d.L, d.S, 6, NULL)}};
    for (int k = 0; k < 3; k++) {
        double *g32[3], *g64[3];
        grads_in(NB_F32, d, cases[k], g32);
        grads_in(NB_F64, d, cases[k], g64);
        int64_t n[3] = {d.B * d.H * d.L * d.E, d.B * d.H * d.S * d.E, d.B * d.H * d.S * d.Ev};
        for (int i = 0; i < 3; i++) {
            for (int64_t e = 0; e < n[i]; e++)
                ck_assert_msg(fabs(g32[i][e] - g64[i][e]) <= 2e-5 + 2e-4 * fabs(g64[i][e]),
                              "case %d input %d element %lld: f32 %.8g f64 %.8g", k, i, (long long)e, g32[i][e],
                              g64[i][e]);
            free(g32[i]), free(g64[i]);
        }
    }
    nb_scope_end(s);
}
END_TEST

/* ---- determinism, memory, errors -------------------------------------------------- */

/* Bytes of t (host copy, malloc'd). */
static char *host_bytes(const nb_tensor *t, size_t *bytes) {
    NB_CK_NOTNULL(t);
    *bytes = (size_t)nb_numel(t) * nb_dtype_size(nb_dtype_of(t));
    char *x = malloc(*bytes + 1);
    ck_assert_ptr_nonnull(x);
    NB_CK_OK(nb_to_host(t, x, *bytes));
    return x;
}

/* out and the three gradients of sum(out * w) with n threads, as host bytes */
static void run_threads(int n, nb_tensor *const *qkv, nb_tensor *mask, char **res, size_t *bytes) {
    nb_set_num_threads(n);
    for (int i = 0; i < 3; i++) nb_tensor_zero_grad(qkv[i]);
    nb_generator g = nb_generator_new(11);
    nb_tensor *o = nb_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2],
                                                   (nb_sdpa_options){.attn_mask = mask, .dropout_p = 0.1, .gen = &g});
    NB_CK_NOTNULL(o);
    nb_tensor *w = nb_test_randn(4, nb_shape(o), NB_F32, 12);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(o, w), NULL, 0, false)));
    res[0] = host_bytes(o, &bytes[0]);
    for (int i = 0; i < 3; i++) res[i + 1] = host_bytes(nb_tensor_grad(qkv[i]), &bytes[i + 1]);
}

/* 1 and 2 threads give the same bits; here the backward's task groups
 * differ too: with 1 thread one group holds a batch item's 4 key blocks
 * and dQ comes from the first pass, with 2 threads from the second. */
START_TEST(test_threads_bitwise) {
    nb_scope *s = nb_scope_begin();
    int before = nb_get_num_threads();
    nb_tensor *qkv[3] = {nb_test_randn(NB_SHAPE(2, 3, 130, 16), NB_F32, 1), nb_test_randn(NB_SHAPE(2, 3, 200, 16), NB_F32, 2),
                         nb_test_randn(NB_SHAPE(2, 3, 200, 8), NB_F32, 3)};
    for (int i = 0; i < 3; i++) NB_CK_OK(nb_set_requires_grad(qkv[i], true));
    nb_tensor *mask = nb_test_randn(NB_SHAPE(2, 1, 130, 200), NB_F32, 4);
    char *a[4], *b[4];
    size_t na[4], nbytes[4];
    run_threads(1, qkv, mask, a, na);
    run_threads(2, qkv, mask, b, nbytes);
    nb_set_num_threads(before);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(na[i], nbytes[i]);
        ck_assert_msg(memcmp(a[i], b[i], na[i]) == 0, "result %d differs between 1 and 2 threads", i);
        free(a[i]), free(b[i]);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_memory_no_score_matrix) {
    /* L = S = 2048: one [L, S] f32 score matrix is 16 MiB; forward and
     * backward together must stay far below it beyond q, k, v, out, grads */
    nb_scope *s = nb_scope_begin();
    int64_t L = 2048, E = 16;
    nb_tensor *q = nb_test_randn(NB_SHAPE(1, L, E), NB_F32, 1), *k = nb_test_randn(NB_SHAPE(1, L, E), NB_F32, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(1, L, E), NB_F32, 3);
    nb_tensor *pad = nb_ones(NB_SHAPE(1, 1, L), NB_BOOL); /* broadcast over rows: not copied */
    for (int i = 0; i < 3; i++) NB_CK_OK(nb_set_requires_grad((nb_tensor *[]){q, k, v}[i], true));
    nb_memory_reset_peak(NB_CPU);
    size_t base = nb_memory_stats_get(NB_CPU).allocated;
    nb_tensor *o = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = pad});
    NB_CK_OK(nb_backward(nb_sum(o, NULL, 0, false)));
    size_t peak = nb_memory_stats_get(NB_CPU).peak_allocated - base;
    /* 128 KiB per tensor here, plus each thread's own block buffers (the
     * H100 machine's 16 threads peaked at 3.4 MB) */
    size_t bound = ((size_t)2 << 20) + (size_t)nb_get_num_threads() * (128 << 10);
    ck_assert_msg(peak < bound, "peak %zu bytes above the inputs (bound %zu, %d threads)", peak, bound,
                  nb_get_num_threads());
    nb_scope_end(s);
}
END_TEST

/* bfloat16 and float16 q, k, v (float32 scores and lse inside) against
 * float32 on the same rounded values, forward and backward, in each mode,
 * on the CPU and on a GPU when there is one; under autocast a float32
 * attention (and its additive mask) runs in the autocast dtype. */
START_TEST(test_16bit_matches_float32) {
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, H = 2, L = 7, S = 9, E = 8;
    nb_device devs[2] = {NB_CPU, NB_CUDA(0)};
    int ndev = nb_device_count(NB_DEVICE_CUDA) > 0 ? 2 : 1;
    nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int dv = 0; dv < ndev; dv++)
        for (int di = 0; di < 2; di++)
            for (int mode = 0; mode < 5; mode++) {
                nb_dtype dt = dts[di];
                nb_tensor *x16[4], *x32[4];
                int64_t shapes[4][4] = {{B, H, L, E}, {B, H, S, E}, {B, H, S, E}, {1, H, L, S}};
                int n = mode == 3 ? 4 : 3;
                for (int i = 0; i < n; i++) {
                    nb_tensor *r = nb_to_dtype(nb_test_randn(4, shapes[i], NB_F32, 40 + (uint64_t)i), dt);
                    x16[i] = nb_detach(nb_to_device(r, devs[dv]));
                    x32[i] = nb_detach(nb_to_device(nb_to_dtype(r, NB_F32), devs[dv]));
                    NB_CK_OK(nb_set_requires_grad(x16[i], true));
                    NB_CK_OK(nb_set_requires_grad(x32[i], true));
                }
                nb_tensor *bm = nb_to_device(nb_test_bool_mask(L, S, 3, NULL), devs[dv]);
                nb_generator g16 = nb_generator_new(5), g32 = g16;
                nb_sdpa_options o = {.is_causal = mode == 1, .attn_mask = mode == 2 ? bm : NULL,
                                     .dropout_p = mode == 4 ? 0.2 : 0};
                nb_tensor *out[2], *w = nb_to_device(nb_test_randn(NB_SHAPE(B, H, L, E), NB_F32, 9), devs[dv]);
                for (int t = 0; t < 2; t++) {
                    nb_tensor **x = t ? x32 : x16;
                    if (mode == 3) o.attn_mask = x[3];
                    o.gen = t ? &g32 : &g16;
                    out[t] = nb_scaled_dot_product_attention(x[0], x[1], x[2], o);
                    NB_CK_NOTNULL(out[t]);
                    ck_assert_int_eq(nb_dtype_of(out[t]), t ? NB_F32 : dt);
                    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(out[t], NB_F32), w), NULL, 0, false)));
                }
                nb_ck_close_to(nb_to_device(nb_to_dtype(out[0], NB_F32), NB_CPU), nb_to_device(out[1], NB_CPU), 3e-2);
                for (int i = 0; i < n; i++) {
                    nb_tensor *g = nb_tensor_grad(x16[i]);
                    NB_CK_NOTNULL(g);
                    ck_assert_int_eq(nb_dtype_of(g), dt);
                    nb_ck_close_to(nb_to_device(nb_to_dtype(g, NB_F32), NB_CPU),
                                   nb_to_device(nb_tensor_grad(x32[i]), NB_CPU), 6e-2);
                }
            }
    for (int dv = 0; dv < ndev; dv++) { /* autocast: float32 in, bfloat16 out; a float32 additive mask follows q */
        nb_tensor *q = nb_to_device(nb_test_randn(NB_SHAPE(2, 3, 4), NB_F32, 1), devs[dv]);
        nb_tensor *m = nb_to_device(nb_zeros(NB_SHAPE(3, 3), NB_F32), devs[dv]);
        NB_CK_OK(nb_autocast_begin(devs[dv], NB_BF16));
        nb_tensor *o = nb_scaled_dot_product_attention(q, q, q, (nb_sdpa_options){.attn_mask = m});
        NB_CK_OK(nb_autocast_end(devs[dv]));
        NB_CK_NOTNULL(o);
        ck_assert_int_eq(nb_dtype_of(o), NB_BF16);
        nb_ck_close_to(nb_to_device(nb_to_dtype(o, NB_F32), NB_CPU),
                       nb_to_device(nb_scaled_dot_product_attention(q, q, q, (nb_sdpa_options){0}), NB_CPU), 3e-2);
    }
    nb_scope_end(s);
}
END_TEST

/* q, k, v as the heads of one packed [B, N, 3, h, d] projection seen as
 * [B, h, N, d] views (nn's multi-head attention): the kernels take the
 * strided views as they are (on CUDA through the pointer-array GEMM, the
 * batch being two strides), the output lands in [B, N, h, d] order and
 * the gradients in their inputs' layout; all equal to the same attention
 * on contiguous copies, forward and backward, with dropout and causal. */
START_TEST(test_heads_views_match_contiguous) {
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, N = 6, H = 3, D = 4;
    nb_device devs[2] = {NB_CPU, NB_CUDA(0)};
    int ndev = nb_device_count(NB_DEVICE_CUDA) > 0 ? 2 : 1;
    nb_dtype dts[3] = {NB_F64, NB_F32, NB_BF16};
    for (int dv = 0; dv < ndev; dv++)
        for (int di = 0; di < 3; di++)
            for (int mode = 0; mode < 2; mode++) {
                nb_tensor *x[2], *o[2];
                nb_tensor *r = nb_to_device(nb_to_dtype(nb_test_randn(NB_SHAPE(B, N, 3 * H * D), NB_F32, 21), dts[di]), devs[dv]);
                nb_tensor *w = nb_to_device(nb_to_dtype(nb_test_randn(NB_SHAPE(B, H, N, D), NB_F32, 22), dts[di]), devs[dv]);
                for (int t = 0; t < 2; t++) {
                    x[t] = nb_detach(nb_contiguous(r));
                    NB_CK_OK(nb_set_requires_grad(x[t], true));
                    nb_tensor *p[3];
                    ck_assert_int_eq(nb_chunk(x[t], 3, -1, p, 3), 3);
                    for (int i = 0; i < 3; i++) {
                        p[i] = nb_transpose(nb_reshape(p[i], NB_SHAPE(B, N, H, D)), 1, 2);
                        if (t) p[i] = nb_contiguous(p[i]);
                    }
                    nb_generator g = nb_generator_new(3);
                    o[t] = nb_scaled_dot_product_attention(
                        p[0], p[1], p[2], (nb_sdpa_options){.is_causal = mode == 1, .dropout_p = 0.3, .gen = &g});
                    NB_CK_NOTNULL(o[t]);
                    NB_CK_OK(nb_backward(nb_sum(nb_mul(o[t], w), NULL, 0, false)));
                }
                double tol = dts[di] == NB_F64 ? 1e-12 : dts[di] == NB_F32 ? 1e-5 : 2e-2;
                nb_ck_close_to(nb_to_device(nb_to_dtype(o[0], NB_F64), NB_CPU),
                               nb_to_device(nb_to_dtype(o[1], NB_F64), NB_CPU), tol);
                nb_ck_close_to(nb_to_device(nb_to_dtype(nb_tensor_grad(x[0]), NB_F64), NB_CPU),
                               nb_to_device(nb_to_dtype(nb_tensor_grad(x[1]), NB_F64), NB_CPU), 4 * tol);
                /* the output's heads merge back into [B, N, h d] without a copy */
                nb_tensor *m = nb_transpose(o[0], 1, 2);
                ck_assert(nb_is_contiguous(m));
            }
    /* k, v broadcast over the batch (stride 0 after broadcast_batch) and a
     * gradient with a broadcast dim: copied, not taken as head views */
    for (int dv = 0; dv < ndev; dv++) {
        nb_tensor *q = nb_to_device(nb_test_randn(NB_SHAPE(B, H, N, D), NB_F32, 31), devs[dv]);
        nb_tensor *kv = nb_detach(nb_to_device(nb_test_randn(NB_SHAPE(1, H, N, D), NB_F32, 32), devs[dv])), *kv2;
        NB_CK_OK(nb_set_requires_grad(kv, true));
        nb_tensor *o = nb_scaled_dot_product_attention(q, kv, kv, (nb_sdpa_options){.is_causal = true});
        NB_CK_OK(nb_backward(nb_sum(nb_mean(o, (int[]){2}, 1, false), NULL, 0, false))); /* g broadcast over N */
        nb_tensor *g1 = nb_tensor_grad(kv);
        kv2 = nb_detach(kv);
        NB_CK_OK(nb_set_requires_grad(kv2, true));
        nb_tensor *rep = nb_contiguous(nb_expand(kv2, 4, (int64_t[]){B, H, N, D}));
        nb_tensor *o2 = nb_scaled_dot_product_attention(q, rep, rep, (nb_sdpa_options){.is_causal = true});
        NB_CK_OK(nb_backward(nb_sum(nb_mean(o2, (int[]){2}, 1, false), NULL, 0, false)));
        nb_ck_close_to(nb_to_device(o, NB_CPU), nb_to_device(o2, NB_CPU), 1e-5);
        nb_ck_close_to(nb_to_device(g1, NB_CPU), nb_to_device(nb_tensor_grad(kv2), NB_CPU), 1e-5);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *q = nb_test_randn(NB_SHAPE(2, 5, 4), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(2, 7, 4), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(2, 7, 3), NB_F64, 3);
    nb_tensor *k3 = nb_test_randn(NB_SHAPE(2, 7, 3), NB_F64, 4), *kb = nb_test_randn(NB_SHAPE(3, 7, 4), NB_F64, 5);
    nb_sdpa_options none = {0};
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k3, v, none), NB_ERR_SHAPE);   /* E differs */
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, kb, v, none), NB_ERR_SHAPE);   /* batch differs */
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, q, none), NB_ERR_SHAPE);    /* v has L rows, not S */
    NB_CK_FAILS(nb_scaled_dot_product_attention(nb_to_dtype(q, NB_F32), k, v, none), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(nb_zeros(NB_SHAPE(4), NB_F64), k, v, none), NB_ERR_SHAPE);
    nb_tensor *im = nb_zeros(NB_SHAPE(5, 7), NB_I64), *bad = nb_ones(NB_SHAPE(5, 6), NB_BOOL);
    nb_tensor *ok = nb_ones(NB_SHAPE(5, 7), NB_BOOL), *f32m = nb_zeros(NB_SHAPE(5, 7), NB_F32);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = im}), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = f32m}), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = bad}), NB_ERR_SHAPE);
    nb_tensor *wide = nb_ones(NB_SHAPE(3, 5, 7), NB_BOOL); /* a mask may not add batch entries */
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = wide}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = ok, .is_causal = true}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = 1}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.dropout_p = -0.1}), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_scaled_dot_product_attention(NULL, k, v, none));
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_sdpa_bcast(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_scaled_dot_product_attention(in[0], in[1], in[2], (nb_sdpa_options){.is_causal = true});
}

/* issue 13: the batch dims of q, k, v broadcast (k, v [1, H, S, E] serve
 * every batch element; fewer leading dims too), equal to expanding them
 * first; gradients sum over the broadcast dims (float64 gradcheck). */
START_TEST(test_sdpa_batch_broadcast) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *q = nb_test_randn_grad(NB_SHAPE(2, 2, 3, 4), 61), *k = nb_test_randn_grad(NB_SHAPE(1, 2, 3, 4), 62);
    nb_tensor *v = nb_test_randn_grad(NB_SHAPE(2, 3, 5), 63);
    nb_tensor *y = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){0});
    nb_ck_shape(y, 4, (int64_t[]){2, 2, 3, 5});
    nb_tensor *ye = nb_scaled_dot_product_attention(q, nb_contiguous(nb_expand(k, NB_SHAPE(2, 2, 3, 4))),
                                                    nb_contiguous(nb_expand(v, NB_SHAPE(2, 2, 3, 5))),
                                                    (nb_sdpa_options){0});
    double a[60], b[60];
    nb_test_values(y, a, 60), nb_test_values(ye, b, 60);
    for (int i = 0; i < 60; i++) ck_assert_double_eq_tol(a[i], b[i], 1e-14);
    nb_tensor *in[3] = {q, k, v};
    nb_ck_gradcheck(f_sdpa_bcast, in, 3, NULL);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, nb_test_randn_grad(NB_SHAPE(3, 2, 3, 4), 64), v,
                                                (nb_sdpa_options){0}), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_gqa(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_scaled_dot_product_attention(in[0], in[1], in[2], *(const nb_sdpa_options *)ctx);
}

/* ---- grouped-query attention (enable_gqa) ------------------------------------------ */

/* k [B, Hk, S, E] with each head repeated g times in place (repeat_interleave
 * on dim 1), built with index_select. */
static nb_tensor *repeat_interleave_heads(nb_tensor *k, int64_t g) {
    int64_t hk = nb_size(k, 1), idx[64];
    ck_assert_int_le(hk * g, 64);
    for (int64_t i = 0; i < hk * g; i++) idx[i] = i / g;
    return nb_index_select(k, 1, nb_from_data(idx, 1, (int64_t[]){hk * g}, NB_I64));
}

START_TEST(test_gqa_forward) {
    nb_scope *s = nb_scope_begin();
    /* Hq = 6 query heads over Hk = 2 kv heads; L = 5 queries, S = 7 keys */
    nb_tensor *q = nb_test_randn(NB_SHAPE(2, 6, 5, 4), NB_F64, 1), *k = nb_test_randn(NB_SHAPE(2, 2, 7, 4), NB_F64, 2);
    nb_tensor *v = nb_test_randn(NB_SHAPE(2, 2, 7, 3), NB_F64, 3);
    nb_tensor *kr = repeat_interleave_heads(k, 3), *vr = repeat_interleave_heads(v, 3);
    nb_tensor *mask = nb_test_bool_mask(5, 7, 9, NULL);
    nb_sdpa_options modes[3] = {{.enable_gqa = true}, {.enable_gqa = true, .is_causal = true},
                                {.enable_gqa = true, .attn_mask = mask}};
    for (int i = 0; i < 3; i++) {
        nb_sdpa_options plain = modes[i];
        plain.enable_gqa = false;
        nb_tensor *got = nb_scaled_dot_product_attention(q, k, v, modes[i]);
        nb_ck_shape(got, 4, (int64_t[]){2, 6, 5, 3});
        nb_ck_close_to(got, nb_scaled_dot_product_attention(q, kr, vr, plain), 1e-12);
    }
    /* equal head counts: the plain op; a decode step (L = 1) of float32 */
    nb_ck_close_to(nb_scaled_dot_product_attention(q, kr, vr, (nb_sdpa_options){.enable_gqa = true}),
                   nb_scaled_dot_product_attention(q, kr, vr, (nb_sdpa_options){0}), 0);
    nb_tensor *q1 = nb_to_dtype(nb_narrow(q, 2, 4, 1), NB_F32);
    nb_ck_close_to(nb_scaled_dot_product_attention(q1, nb_to_dtype(k, NB_F32), nb_to_dtype(v, NB_F32),
                                                   (nb_sdpa_options){.enable_gqa = true}),
                   nb_scaled_dot_product_attention(q1, nb_to_dtype(kr, NB_F32), nb_to_dtype(vr, NB_F32),
                                                   (nb_sdpa_options){0}),
                   1e-6);
    /* errors: heads that do not divide, too few dims, without enable_gqa */
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, nb_test_randn(NB_SHAPE(2, 4, 7, 4), NB_F64, 4),
                                                nb_test_randn(NB_SHAPE(2, 4, 7, 3), NB_F64, 5), (nb_sdpa_options){.enable_gqa = true}),
                NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "enable_gqa"));
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, nb_test_randn(NB_SHAPE(2, 3, 7, 3), NB_F64, 5),
                                                (nb_sdpa_options){.enable_gqa = true}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(nb_test_randn(NB_SHAPE(5, 4), NB_F64, 6), nb_test_randn(NB_SHAPE(7, 4), NB_F64, 7),
                                                nb_test_randn(NB_SHAPE(7, 4), NB_F64, 8), (nb_sdpa_options){.enable_gqa = true}),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){0}), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gqa_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[3] = {nb_test_randn_grad(NB_SHAPE(1, 4, 3, 2), 11), nb_test_randn_grad(NB_SHAPE(1, 2, 5, 2), 12),
                        nb_test_randn_grad(NB_SHAPE(1, 2, 5, 3), 13)};
    nb_tensor *mask = nb_test_bool_mask(3, 5, 4, NULL);
    nb_sdpa_options modes[3] = {{.enable_gqa = true}, {.enable_gqa = true, .is_causal = true},
                                {.enable_gqa = true, .attn_mask = mask}};
    for (int i = 0; i < 3; i++) {
        NB_CK_OK(nb_gradcheck(f_gqa, in, 3, &modes[i], NULL));
    }
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_attention(void) {
    Suite *s = suite_create("ops_attention");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_hand_value);
    tcase_add_test(f, test_sdpa_batch_broadcast);
    tcase_add_test(f, test_forward_f64_small);
    tcase_add_test(f, test_forward_f64_ragged);
    tcase_add_test(f, test_forward_f32);
    tcase_add_test(f, test_no_batch_dims_and_shapes);
    tcase_add_test(f, test_fully_masked_row_nan);
    tcase_add_test(f, test_errors);
    tcase_add_test(f, test_gqa_forward);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *d = tcase_create("dropout");
    tcase_add_test(d, test_dropout_reproducible_and_exact);
    tcase_add_test(d, test_dropout_unbiased);
    suite_add_tcase(s, d);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_gradcheck_modes);
    tcase_add_test(g, test_gradcheck_partial);
    tcase_add_test(g, test_gradcheck_additive_mask_grad);
    tcase_add_test(g, test_gradcheck_ragged_and_dropout);
    tcase_add_test(g, test_backward_f32_matches_f64);
    tcase_add_test(g, test_gqa_gradcheck);
    tcase_add_test(g, test_16bit_matches_float32);
    tcase_add_test(g, test_heads_views_match_contiguous);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    TCase *t = tcase_create("threads_memory");
    tcase_add_test(t, test_threads_bitwise);
    tcase_add_test(t, test_memory_no_score_matrix);
    tcase_set_timeout(t, 300);
    suite_add_tcase(s, t);
    return s;
}
