/* test_ops_layer_norm.c - layer_norm: forward values against a naive host
 * reference and PyTorch's values (computed with torch 1.13 and pasted
 * here), gradients by gradcheck (one and two normalised dims, with and
 * without weight/bias), error paths, float32 against float64, the
 * parameter gradients giving the same bits for 1 and 2 threads, and the
 * backward on every device against float64. */
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* Naive layer norm of rows [r, m] (two-pass, biased variance); w, b may be NULL. */
static void ref_layer_norm(const double *x, int64_t r, int64_t m, const double *w, const double *b, double eps,
                           double *y) {
    for (int64_t i = 0; i < r; i++) {
        double mu = 0, var = 0;
        for (int64_t j = 0; j < m; j++) mu += x[i * m + j];
        mu /= (double)m;
        for (int64_t j = 0; j < m; j++) var += (x[i * m + j] - mu) * (x[i * m + j] - mu);
        var /= (double)m;
        for (int64_t j = 0; j < m; j++) {
            double v = (x[i * m + j] - mu) / sqrt(var + eps);
            y[i * m + j] = v * (w ? w[j] : 1) + (b ? b[j] : 0);
        }
    }
}

/* ---- layer_norm ------------------------------------------------------------------------ */

typedef struct {
    int n_norm;
    int64_t shape[4];
    bool weight, bias; /* which of in[1], in[2] are passed */
    bool transpose;    /* normalise a transposed (non-contiguous) view of in[0] */
} ln_ctx;

static nb_tensor *f_layer_norm(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    ln_ctx *c = ctx;
    nb_tensor *x = c->transpose ? nb_transpose(in[0], 0, 1) : in[0];
    return nb_layer_norm(x, c->n_norm, c->shape, c->weight ? in[1] : NULL, c->bias ? in[2] : NULL, 1e-5);
}

START_TEST(test_layer_norm_torch_values) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 4, -1, 0.5, 3});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.5, -1, 2});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.1, 0.2, -0.3});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    nb_tensor *y = nb_layer_norm(x, 1, (int64_t[]){3}, w, b, 1e-5);
    nb_ck_shape(y, 2, (int64_t[]){2, 3});
    /* torch.nn.functional.layer_norm(x, (3,), w, b, 1e-5) */
    nb_ck_close(y,
                (double[]){-0.43452076572514897, 0.4672603828625746, 2.372603828625744, -0.4555828790463038,
                           0.40203013783501956, 2.3263917918552544},
                6, 1e-14, 1e-13);
    NB_CK_OK(nb_backward_with(y, nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, -2, 0.5, 0.3, 0.7, -1.1})));
    nb_ck_close(nb_tensor_grad(x),
                (double[]){-0.4581611472191036, 0.6872408617829473, -0.22907971456384335, -0.007728341795505023,
                           0.012369629071386834, -0.004641287275881867},
                6, 1e-13, 1e-12);
    nb_ck_close(nb_tensor_grad(w), (double[]){-1.4023912588780802, 0.3930996692406355, -0.776364528363954}, 3, 1e-13, 1e-12);
    nb_ck_close(nb_tensor_grad(b), (double[]){1.3, -1.3, -0.6}, 3, 1e-14, 1e-13);
    /* over both dims, no affine; and a large eps */
    nb_ck_close(nb_layer_norm(x, 2, (int64_t[]){2, 3}, NULL, NULL, 1e-5),
                (double[]){-0.35491343168580414, 0.2535095940612886, 1.470355645555474, -1.5717594831799895,
                           -0.6591249445593506, 0.8619326198083813},
                6, 1e-14, 1e-13);
    nb_ck_close(nb_layer_norm(x, 1, (int64_t[]){3}, NULL, NULL, 0.5),
                (double[]){-0.9299811099505545, -0.23249527748763876, 1.1624763874381927, -1.0213243599737851,
                           -0.1856953381770518, 1.2070196981508372},
                6, 1e-14, 1e-13);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_layer_norm_reference) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(11);
    /* [2, 3, 4, 5]: normalise the last 1, 2 and 3 dims, every affine combination */
    nb_tensor *x = nb_add_scalar(nb_mul_scalar(nb_randn(NB_SHAPE(2, 3, 4, 5), NB_F64, &g), 3), 7);
    double *xv = nb_test_values_of(x), y[120];
    const int64_t full[3] = {3, 4, 5};
    for (int nn = 1; nn <= 3; nn++) {
        const int64_t *ns = full + 3 - nn;
        int64_t m = 1;
        for (int i = 0; i < nn; i++) m *= ns[i];
        nb_tensor *w = nb_randn(nn, ns, NB_F64, &g), *b = nb_randn(nn, ns, NB_F64, &g);
        double *wv = nb_test_values_of(w), *bv = nb_test_values_of(b);
        for (int mode = 0; mode < 4; mode++) {
            bool hw = mode & 1, hb = mode & 2;
            ref_layer_norm(xv, 120 / m, m, hw ? wv : NULL, hb ? bv : NULL, 1e-5, y);
            nb_tensor *out = nb_layer_norm(x, nn, ns, hw ? w : NULL, hb ? b : NULL, 1e-5);
            nb_ck_shape(out, 4, (int64_t[]){2, 3, 4, 5});
            nb_ck_close(out, y, 120, 1e-12, 1e-12);
        }
        /* float32 against the float64 reference */
        ref_layer_norm(xv, 120 / m, m, wv, bv, 1e-5, y);
        nb_tensor *o32 = nb_layer_norm(nb_to_dtype(x, NB_F32), nn, ns, nb_to_dtype(w, NB_F32), nb_to_dtype(b, NB_F32), 1e-5);
        ck_assert_int_eq(nb_dtype_of(o32), NB_F32);
        nb_ck_close(o32, y, 120, 1e-5, 1e-5);
        free(wv), free(bv);
    }
    /* a transposed input: same as normalising its contiguous copy */
    nb_tensor *xt = nb_transpose(nb_reshape(x, NB_SHAPE(8, 15)), 0, 1);
    nb_tensor *yc = nb_layer_norm(nb_contiguous(xt), 1, (int64_t[]){8}, NULL, NULL, 1e-5);
    double *want = nb_test_values_of(yc);
    nb_ck_close(nb_layer_norm(xt, 1, (int64_t[]){8}, NULL, NULL, 1e-5), want, 120, 0, 0);
    free(want);
    /* a constant row normalises to 0 (var 0 + eps) */
    nb_ck_close(nb_layer_norm(nb_full(NB_SHAPE(2, 4), 3, NB_F64), 1, (int64_t[]){4}, NULL, NULL, 1e-5),
                (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 8, 0, 0);
    free(xv);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_layer_norm_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_FAILS(nb_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, 1e-5), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "layer_norm"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[2, 3]"));
    NB_CK_FAILS(nb_layer_norm(x, 3, (int64_t[]){1, 2, 3}, NULL, NULL, 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_layer_norm(x, 0, (int64_t[]){3}, NULL, NULL, 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_layer_norm(x, 1, (int64_t[]){3}, nb_zeros(NB_SHAPE(2), NB_F64), NULL, 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_layer_norm(x, 1, (int64_t[]){3}, NULL, nb_zeros(NB_SHAPE(1, 3), NB_F64), 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_layer_norm(x, 1, (int64_t[]){3}, nb_zeros(NB_SHAPE(3), NB_F32), NULL, 1e-5), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_layer_norm(nb_zeros(NB_SHAPE(2, 3), NB_I64), 1, (int64_t[]){3}, NULL, NULL, 1e-5), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_layer_norm(NULL, 1, (int64_t[]){3}, NULL, NULL, 1e-5), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_layer_norm_gradcheck) {
    nb_scope *s = nb_scope_begin();
    uint64_t seed = 1;
    /* one trailing dim [3, 5] and two [2, 3, 4], each with all affine options */
    ln_ctx one = {1, {5}, false, false, false}, two = {2, {3, 4}, false, false, false};
    ln_ctx *cs[2] = {&one, &two};
    const int64_t xs[2][3] = {{3, 5, 0}, {2, 3, 4}};
    for (int k = 0; k < 2; k++) {
        ln_ctx *c = cs[k];
        nb_tensor *in[3] = {nb_test_randn_grad(k == 0 ? 2 : 3, xs[k], seed++),
                            nb_test_randn_grad(c->n_norm, c->shape, seed++),
                            nb_test_randn_grad(c->n_norm, c->shape, seed++)};
        for (int mode = 0; mode < 4; mode++) {
            c->weight = mode & 1, c->bias = mode & 2;
            nb_ck_gradcheck(f_layer_norm, in, 3, c);
        }
    }
    /* a transposed input, and x constant (only weight and bias checked) */
    ln_ctx t = {1, {3}, true, true, true};
    nb_tensor *in[3] = {nb_test_randn_grad(NB_SHAPE(3, 4), seed++), nb_test_randn_grad(NB_SHAPE(3), seed++),
                        nb_test_randn_grad(NB_SHAPE(3), seed++)};
    nb_ck_gradcheck(f_layer_norm, in, 3, &t);
    t.transpose = false;
    in[0] = nb_randn(NB_SHAPE(2, 3), NB_F64, NULL);
    nb_ck_gradcheck(f_layer_norm, in, 3, &t);
    /* rows wider than the kernel's lanes and column blocks: m = 70 */
    ln_ctx wide = {1, {70}, true, true, false};
    nb_tensor *win[3] = {nb_test_randn_grad(NB_SHAPE(2, 70), seed++), nb_test_randn_grad(NB_SHAPE(70), seed++),
                         nb_test_randn_grad(NB_SHAPE(70), seed++)};
    nb_ck_gradcheck(f_layer_norm, win, 3, &wide);
    nb_scope_end(s);
}
END_TEST

/* layer_norm fwd+bwd on f32 [rows, m] at a thread count: y, gx, gw, gb bits */
static void layer_norm_bits(int threads, int64_t rows, int64_t m, float *out) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(77);
    nb_tensor *x = nb_randn(NB_SHAPE(rows, m), NB_F32, &g), *w = nb_randn(NB_SHAPE(m), NB_F32, &g);
    nb_tensor *b = nb_randn(NB_SHAPE(m), NB_F32, &g), *gy = nb_randn(NB_SHAPE(rows, m), NB_F32, &g);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    nb_tensor *y = nb_layer_norm(x, 1, &m, w, b, 1e-5);
    NB_CK_OK(nb_to_host(y, out, sizeof(float) * (size_t)(rows * m)));
    NB_CK_OK(nb_backward_with(y, gy));
    out += rows * m;
    NB_CK_OK(nb_to_host(nb_tensor_grad(x), out, sizeof(float) * (size_t)(rows * m)));
    NB_CK_OK(nb_to_host(nb_tensor_grad(w), out + rows * m, sizeof(float) * (size_t)m));
    NB_CK_OK(nb_to_host(nb_tensor_grad(b), out + rows * m + m, sizeof(float) * (size_t)m));
    nb_scope_end(s);
}

START_TEST(test_layer_norm_deterministic) {
    int prev = nb_get_num_threads();
    int64_t rows = 512, m = 768, n = 2 * rows * m + 2 * m;
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    ck_assert(a && b);
    layer_norm_bits(1, rows, m, a);
    layer_norm_bits(2, rows, m, b);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * (size_t)n), 0);
    free(a), free(b);
    nb_set_num_threads(prev);
}
END_TEST

START_TEST(test_layer_norm_float32_grads) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_randn(NB_SHAPE(6, 40), NB_F64, &g), *w = nb_randn(NB_SHAPE(40), NB_F64, &g);
    nb_tensor *b = nb_randn(NB_SHAPE(40), NB_F64, &g), *gy = nb_randn(NB_SHAPE(6, 40), NB_F64, &g);
    nb_tensor *x32 = nb_to_dtype(x, NB_F32), *w32 = nb_to_dtype(w, NB_F32), *b32 = nb_to_dtype(b, NB_F32);
    nb_tensor *ts[6] = {x, w, b, x32, w32, b32};
    for (int i = 0; i < 6; i++) NB_CK_OK(nb_set_requires_grad(ts[i], true));
    int64_t m = 40;
    NB_CK_OK(nb_backward_with(nb_layer_norm(x, 1, &m, w, b, 1e-5), gy));
    NB_CK_OK(nb_backward_with(nb_layer_norm(x32, 1, &m, w32, b32, 1e-5), nb_to_dtype(gy, NB_F32)));
    for (int i = 0; i < 3; i++) {
        double *want = nb_test_values_of(nb_tensor_grad(ts[i]));
        nb_ck_close(nb_tensor_grad(ts[i + 3]), want, nb_numel(ts[i]), 1e-4, 1e-4);
        free(want);
    }
    nb_scope_end(s);
}
END_TEST

/* layer_norm's backward on every device in float32 against float64 on the
 * CPU: rows that fit CUDA's register cache (768 and 1024 columns, row
 * counts off its 64-row gw/gb chunks), a longer row, a short one, without
 * the affine, and only the parameters needing grad; a second run gives
 * the same bits. */
START_TEST(test_layer_norm_backward_devices) {
    const int64_t shapes[5][2] = {{1000, 768}, {37, 1024}, {33, 1028}, {5, 40}, {64, 768}};
    nb_device devs[9] = {{NB_DEVICE_CPU, 0}};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int z = 0; z < 5; z++)
            for (int mode = 0; mode < 3; mode++) { /* all grads; no weight or bias; x without grad */
                if (mode && z != 4) continue;
                int64_t R = shapes[z][0], M = shapes[z][1];
                nb_scope *s = nb_scope_begin();
                nb_generator g = nb_generator_new(91 + z);
                nb_tensor *h[4] = {nb_add_scalar(nb_randn(NB_SHAPE(R, M), NB_F64, &g), 0.5),
                                   nb_randn(NB_SHAPE(M), NB_F64, &g), nb_randn(NB_SHAPE(M), NB_F64, &g),
                                   nb_randn(NB_SHAPE(R, M), NB_F64, &g)};
                for (int k = 0; k < 4; k++) h[k] = nb_to_dtype(nb_to_dtype(h[k], NB_F32), NB_F64);
                bool affine = mode != 1;
                nb_tensor *gs[3][3]; /* run (the device twice, then float64 on the CPU), then x, w, b */
                for (int run = 0; run < 3; run++) {
                    nb_dtype dt = run < 2 ? NB_F32 : NB_F64;
                    nb_device dv = run < 2 ? devs[d] : (nb_device){NB_DEVICE_CPU, 0};
                    nb_tensor *v[4];
                    for (int k = 0; k < 4; k++) v[k] = nb_detach(nb_to_device(nb_to_dtype(h[k], dt), dv));
                    if (mode != 2) NB_CK_OK(nb_set_requires_grad(v[0], true));
                    if (affine) NB_CK_OK(nb_set_requires_grad(v[1], true));
                    if (affine) NB_CK_OK(nb_set_requires_grad(v[2], true));
                    nb_tensor *y = nb_layer_norm(v[0], 1, &M, affine ? v[1] : NULL, affine ? v[2] : NULL, 1e-5);
                    NB_CK_OK(nb_backward_with(y, v[3]));
                    for (int k = 0; k < 3; k++) gs[run][k] = (k ? affine : mode != 2) ? nb_tensor_grad(v[k]) : NULL;
                }
                for (int k = 0; k < 3; k++) {
                    if (!gs[0][k]) continue;
                    nb_ck_close_to(gs[1][k], gs[0][k], 0); /* the same bits twice */
                    double *want = nb_test_values_of(gs[2][k]);
                    double e = nb_test_rel_err(gs[0][k], want, nb_numel(gs[2][k]));
                    ck_assert_msg(e <= 1e-4, "[%lld, %lld] mode %d: gradient %d off by %g of its largest",
                                  (long long)R, (long long)M, mode, k, e);
                    free(want);
                }
                nb_scope_end(s);
            }
}
END_TEST

/* ---- gelu ---------------------------------------------------------------------------------- */

Suite *nb_suite_ops_layer_norm(void) {
    Suite *s = suite_create("ops_layer_norm");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_layer_norm_torch_values);
    tcase_add_test(f, test_layer_norm_reference);
    tcase_add_test(f, test_layer_norm_errors);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_layer_norm_gradcheck);
    tcase_add_test(g, test_layer_norm_float32_grads);
    tcase_add_test(g, test_layer_norm_deterministic);
    tcase_add_test(g, test_layer_norm_backward_devices);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
