/* test_ops_rms_norm.c - rms_norm: forward values and gradients against
 * PyTorch 1.13's composition x * rsqrt(x.pow(2).mean(-1, keepdim=True) +
 * eps) * w (pasted here; torch 1.13 predates F.rms_norm), eps=None as
 * finfo(dtype).eps, a naive host reference over 1-3 normalised dims,
 * float32 against float64, gradchecks (with and without weight, transposed
 * input, rows wider than the kernel's lanes), error paths, and the same bits
 * for 1 and 2 threads. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* Naive RMSNorm of rows [r, m]; w may be NULL. */
static void ref_rms_norm(const double *x, int64_t r, int64_t m, const double *w, double eps, double *y) {
    for (int64_t i = 0; i < r; i++) {
        double ms = 0;
        for (int64_t j = 0; j < m; j++) ms += x[i * m + j] * x[i * m + j];
        ms /= (double)m;
        for (int64_t j = 0; j < m; j++) y[i * m + j] = x[i * m + j] / sqrt(ms + eps) * (w ? w[j] : 1);
    }
}

typedef struct {
    int n_norm;
    int64_t shape[4];
    bool weight, transpose;
} rms_ctx;

static nb_tensor *f_rms_norm(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    rms_ctx *c = ctx;
    nb_tensor *x = c->transpose ? nb_transpose(in[0], 0, 1) : in[0];
    return nb_rms_norm(x, c->n_norm, c->shape, c->weight ? in[1] : NULL, 1e-5);
}

START_TEST(test_rms_norm_torch_values) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 4, -1, 0.5, 3});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.5, -1, 2});
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *y = nb_rms_norm(x, 1, (int64_t[]){3}, w, 1e-5);
    nb_ck_shape(y, 2, (int64_t[]){2, 3});
    nb_ck_close(y,
                (double[]){0.18898210151744646, -0.7559284060697858, 3.0237136242791434, -0.27050049454613706,
                           -0.27050049454613706, 3.2460059345536445},
                6, 1e-14, 1e-13);
    NB_CK_OK(nb_backward_with(y, nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, -2, 0.5, 0.3, 0.7, -1.1})));
    nb_ck_close(nb_tensor_grad(x),
                (double[]){0.035996809315645334, 0.4499578216661836, -0.23397696577231158, -0.2935909033750461,
                           -0.19133016649514825, -0.06597902078634155},
                6, 1e-13, 1e-12);
    nb_ck_close(nb_tensor_grad(w), (double[]){0.2156639063072107, -1.3225064659572758, -1.0293748579347186}, 3,
                1e-13, 1e-12);
    /* over both dims, no weight, eps=None: finfo(float64).eps */
    nb_ck_close(nb_rms_norm(x, 2, (int64_t[]){2, 3}, NULL, 0),
                (double[]){0.4381780460041329, 0.8763560920082658, 1.7527121840165316, -0.4381780460041329,
                           0.21908902300206645, 1.3145341380123987},
                6, 1e-14, 1e-13);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_rms_norm_reference) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(13);
    nb_tensor *x = nb_add_scalar(nb_mul_scalar(nb_randn(NB_SHAPE(2, 3, 4, 5), NB_F64, &g), 3), 1);
    double *xv = nb_test_values_of(x), y[120];
    const int64_t full[3] = {3, 4, 5};
    for (int nn = 1; nn <= 3; nn++) {
        const int64_t *ns = full + 3 - nn;
        int64_t m = 1;
        for (int i = 0; i < nn; i++) m *= ns[i];
        nb_tensor *w = nb_randn(nn, ns, NB_F64, &g);
        double *wv = nb_test_values_of(w);
        for (int hw = 0; hw < 2; hw++) {
            ref_rms_norm(xv, 120 / m, m, hw ? wv : NULL, 1e-6, y);
            nb_tensor *out = nb_rms_norm(x, nn, ns, hw ? w : NULL, 1e-6);
            nb_ck_shape(out, 4, (int64_t[]){2, 3, 4, 5});
            nb_ck_close(out, y, 120, 1e-12, 1e-12);
        }
        /* float32 against the float64 reference, and eps=None is float32's epsilon */
        ref_rms_norm(xv, 120 / m, m, wv, FLT_EPSILON, y);
        nb_tensor *o32 = nb_rms_norm(nb_to_dtype(x, NB_F32), nn, ns, nb_to_dtype(w, NB_F32), 0);
        ck_assert_int_eq(nb_dtype_of(o32), NB_F32);
        nb_ck_close(o32, y, 120, 1e-5, 1e-5);
        free(wv);
    }
    /* a transposed input: same as normalising its contiguous copy */
    nb_tensor *xt = nb_transpose(nb_reshape(x, NB_SHAPE(8, 15)), 0, 1);
    double *want = nb_test_values_of(nb_rms_norm(nb_contiguous(xt), 1, (int64_t[]){8}, NULL, 1e-5));
    nb_ck_close(nb_rms_norm(xt, 1, (int64_t[]){8}, NULL, 1e-5), want, 120, 0, 0);
    free(want);
    /* a zero row stays 0 (0 * 1/sqrt(eps)) */
    nb_ck_close(nb_rms_norm(nb_zeros(NB_SHAPE(2, 4), NB_F64), 1, (int64_t[]){4}, NULL, 1e-5),
                (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 8, 0, 0);
    free(xv);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_rms_norm_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_FAILS(nb_rms_norm(x, 1, (int64_t[]){4}, NULL, 1e-5), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "rms_norm"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[2, 3]"));
    NB_CK_FAILS(nb_rms_norm(x, 3, (int64_t[]){1, 2, 3}, NULL, 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_rms_norm(x, 0, (int64_t[]){3}, NULL, 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_rms_norm(x, 1, (int64_t[]){3}, nb_zeros(NB_SHAPE(2), NB_F64), 1e-5), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_rms_norm(x, 1, (int64_t[]){3}, nb_zeros(NB_SHAPE(3), NB_F32), 1e-5), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_rms_norm(nb_zeros(NB_SHAPE(2, 3), NB_I64), 1, (int64_t[]){3}, NULL, 1e-5), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_rms_norm(x, 1, (int64_t[]){3}, NULL, -1e-5), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_rms_norm(x, 1, (int64_t[]){3}, NULL, NAN), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_rms_norm(NULL, 1, (int64_t[]){3}, NULL, 1e-5), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_rms_norm_gradcheck) {
    nb_scope *s = nb_scope_begin();
    uint64_t seed = 1;
    rms_ctx one = {1, {5}, false, false}, two = {2, {3, 4}, false, false};
    rms_ctx *cs[2] = {&one, &two};
    const int64_t xs[2][3] = {{3, 5, 0}, {2, 3, 4}};
    for (int k = 0; k < 2; k++) {
        rms_ctx *c = cs[k];
        nb_tensor *in[2] = {nb_test_randn_grad(k == 0 ? 2 : 3, xs[k], seed++),
                            nb_test_randn_grad(c->n_norm, c->shape, seed++)};
        for (int hw = 0; hw < 2; hw++) {
            c->weight = hw;
            nb_ck_gradcheck(f_rms_norm, in, 2, c);
        }
    }
    rms_ctx t = {1, {3}, true, true};
    nb_tensor *in[2] = {nb_test_randn_grad(NB_SHAPE(3, 4), seed++), nb_test_randn_grad(NB_SHAPE(3), seed++)};
    nb_ck_gradcheck(f_rms_norm, in, 2, &t);
    /* x constant: only the weight is checked */
    t.transpose = false;
    in[0] = nb_randn(NB_SHAPE(2, 3), NB_F64, NULL);
    nb_ck_gradcheck(f_rms_norm, in, 2, &t);
    rms_ctx wide = {1, {70}, true, false};
    nb_tensor *win[2] = {nb_test_randn_grad(NB_SHAPE(2, 70), seed++), nb_test_randn_grad(NB_SHAPE(70), seed++)};
    nb_ck_gradcheck(f_rms_norm, win, 2, &wide);
    nb_scope_end(s);
}
END_TEST

/* rms_norm fwd+bwd on f32 [rows, m] at a thread count: y, gx, gw bits */
static void rms_norm_bits(int threads, int64_t rows, int64_t m, float *out) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(77);
    nb_tensor *x = nb_randn(NB_SHAPE(rows, m), NB_F32, &g), *w = nb_randn(NB_SHAPE(m), NB_F32, &g);
    nb_tensor *gy = nb_randn(NB_SHAPE(rows, m), NB_F32, &g);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *y = nb_rms_norm(x, 1, &m, w, 1e-5);
    NB_CK_OK(nb_to_host(y, out, sizeof(float) * (size_t)(rows * m)));
    NB_CK_OK(nb_backward_with(y, gy));
    out += rows * m;
    NB_CK_OK(nb_to_host(nb_tensor_grad(x), out, sizeof(float) * (size_t)(rows * m)));
    NB_CK_OK(nb_to_host(nb_tensor_grad(w), out + rows * m, sizeof(float) * (size_t)m));
    nb_scope_end(s);
}

START_TEST(test_rms_norm_deterministic) {
    int prev = nb_get_num_threads();
    int64_t rows = 512, m = 768, n = 2 * rows * m + m;
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    ck_assert(a && b);
    rms_norm_bits(1, rows, m, a);
    rms_norm_bits(2, rows, m, b);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * (size_t)n), 0);
    free(a), free(b);
    nb_set_num_threads(prev);
}
END_TEST

START_TEST(test_rms_norm_float32_grads) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_randn(NB_SHAPE(6, 40), NB_F64, &g), *w = nb_randn(NB_SHAPE(40), NB_F64, &g);
    nb_tensor *gy = nb_randn(NB_SHAPE(6, 40), NB_F64, &g);
    nb_tensor *x32 = nb_to_dtype(x, NB_F32), *w32 = nb_to_dtype(w, NB_F32);
    nb_tensor *ts[4] = {x, w, x32, w32};
    for (int i = 0; i < 4; i++) NB_CK_OK(nb_set_requires_grad(ts[i], true));
    int64_t m = 40;
    NB_CK_OK(nb_backward_with(nb_rms_norm(x, 1, &m, w, 1e-5), gy));
    NB_CK_OK(nb_backward_with(nb_rms_norm(x32, 1, &m, w32, 1e-5), nb_to_dtype(gy, NB_F32)));
    for (int i = 0; i < 2; i++) {
        double *want = nb_test_values_of(nb_tensor_grad(ts[i]));
        nb_ck_close(nb_tensor_grad(ts[i + 2]), want, nb_numel(ts[i]), 1e-4, 1e-4);
        free(want);
    }
    nb_scope_end(s);
}
END_TEST

/* bfloat16 and float16 rms_norm on each accelerator against float32 on the
 * CPU on the same rounded values, with and without a weight, over row
 * sizes that take CUDA's vector kernel with one, two and four vectors a
 * thread (8, 40, 2048, 2056, 4104, 8192) and the strided one (13, 8200). */
START_TEST(test_rms_norm_16bit_device) {
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    const int64_t ms[8] = {8, 40, 2048, 2056, 4104, 8192, 13, 8200}, rows = 3;
    const nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int a = 0; a < na; a++) {
        const nb_device dev = accs[a];
        for (int di = 0; di < 2; di++)
            for (int mi = 0; mi < 8; mi++)
                for (int wi = 0; wi < 2; wi++) {
                    nb_scope *s = nb_scope_begin();
                    int64_t m = ms[mi];
                    nb_generator g = nb_generator_new((uint64_t)(10 * mi + wi));
                    nb_tensor *x = nb_to_dtype(nb_randn(NB_SHAPE(rows, m), NB_F32, &g), dts[di]);
                    nb_tensor *w = wi ? nb_to_dtype(nb_randn(NB_SHAPE(m), NB_F32, &g), dts[di]) : NULL;
                    nb_tensor *want = nb_rms_norm(nb_to_dtype(x, NB_F32), 1, &m, w ? nb_to_dtype(w, NB_F32) : NULL, 1e-5);
                    nb_tensor *got = nb_rms_norm(nb_to_device(x, dev), 1, &m, w ? nb_to_device(w, dev) : NULL, 1e-5);
                    NB_CK_NOTNULL(got);
                    ck_assert_int_eq(nb_dtype_of(got), dts[di]);
                    double *e = nb_test_values_of(want);
                    nb_ck_close(nb_to_device(got, NB_CPU), e, rows * m, 1e-2, 1e-2);
                    free(e);
                    nb_scope_end(s);
                }
    }
}
END_TEST

/* nb_add_rms_norm where nothing records a gradient: on a device with the fused kernel (CUDA) one launch gives
 * the bits of nb_add then nb_rms_norm, both outputs, in every float dtype, over rows that take CUDA's vector
 * (40, 2048) and strided (13, 8200) kernels, with and without a weight, and for a misaligned 16-bit x;
 * elsewhere the two ops. Under a gradient, the two ops' values and gradients; errors. */
START_TEST(test_add_rms_norm) {
    nb_device devs[9] = {NB_CPU};
    const int nd = 1 + nb_test_accelerators(devs + 1, 8);
    const int64_t ms[4] = {40, 2048, 13, 8200};
    const nb_dtype dts[4] = {NB_F32, NB_F64, NB_BF16, NB_F16};
    bool prev = nb_set_grad_enabled(false);
    for (int d = 0; d < nd; d++)
        for (int di = 0; di < 4; di++)
            for (int mi = 0; mi < 4; mi++)
                for (int wi = 0; wi < 2; wi++) {
                    nb_scope *s = nb_scope_begin();
                    int64_t m = ms[mi];
                    nb_generator g = nb_generator_new((uint64_t)(100 * di + 10 * mi + wi));
                    nb_tensor *x = nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(3, m), NB_F32, &g), dts[di]), devs[d]);
                    nb_tensor *r = nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(3, m), NB_F32, &g), dts[di]), devs[d]);
                    nb_tensor *w =
                        wi ? nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(m), NB_F32, &g), dts[di]), devs[d]) : NULL;
                    nb_tensor *sum = NULL;
                    uint64_t l0 = nb_device_counters_get(devs[d]).kernel_launches;
                    nb_tensor *y = nb_add_rms_norm(x, r, 1, &m, w, 1e-5, &sum);
                    uint64_t l1 = nb_device_counters_get(devs[d]).kernel_launches;
                    NB_CK_NOTNULL(y);
                    NB_CK_NOTNULL(sum);
                    if (devs[d].type == NB_DEVICE_CUDA) ck_assert_int_eq(l1 - l0, 1);
                    nb_tensor *h = nb_add(x, r), *want = nb_rms_norm(h, 1, &m, w, 1e-5);
                    ck_assert_int_eq(nb_dtype_of(y), dts[di]);
                    nb_ck_close_to(nb_to_device(sum, NB_CPU), nb_to_device(h, NB_CPU), 0);
                    nb_ck_close_to(nb_to_device(y, NB_CPU), nb_to_device(want, NB_CPU), 0);
                    nb_scope_end(s);
                }
    /* a 16-bit x 2 bytes past 16-byte alignment: the same bits (the fused kernel would sum in another order) */
    for (int d = 0; d < nd; d++) {
        nb_scope *s = nb_scope_begin();
        int64_t m = 2048;
        nb_generator g = nb_generator_new(8);
        nb_tensor *flat = nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(3 * m + 1), NB_F32, &g), NB_BF16), devs[d]);
        nb_tensor *x = nb_reshape(nb_narrow(flat, 0, 1, 3 * m), 2, (int64_t[]){3, m});
        nb_tensor *r = nb_to_device(nb_to_dtype(nb_randn(NB_SHAPE(3, m), NB_F32, &g), NB_BF16), devs[d]), *sum = NULL;
        nb_tensor *y = nb_add_rms_norm(x, r, 1, &m, NULL, 1e-5, &sum);
        nb_tensor *h = nb_add(x, r);
        nb_ck_close_to(nb_to_device(sum, NB_CPU), nb_to_device(h, NB_CPU), 0);
        nb_ck_close_to(nb_to_device(y, NB_CPU), nb_to_device(nb_rms_norm(h, 1, &m, NULL, 1e-5), NB_CPU), 0);
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    nb_scope *s = nb_scope_begin();
    int64_t m = 5;
    nb_generator g = nb_generator_new(3);
    nb_tensor *xs[2][3];
    for (int k = 0; k < 2; k++) { /* the same leaves twice: through add_rms_norm, then through the two ops */
        nb_generator gk = g;
        for (int i = 0; i < 3; i++) {
            xs[k][i] = i < 2 ? nb_randn(NB_SHAPE(2, m), NB_F64, &gk) : nb_randn(NB_SHAPE(m), NB_F64, &gk);
            NB_CK_OK(nb_set_requires_grad(xs[k][i], true));
        }
    }
    nb_tensor *sum = NULL, *y = nb_add_rms_norm(xs[0][0], xs[0][1], 1, &m, xs[0][2], 1e-6, &sum);
    nb_tensor *h = nb_add(xs[1][0], xs[1][1]), *want = nb_rms_norm(h, 1, &m, xs[1][2], 1e-6);
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_mul(y, y), sum), NULL, 0, false)));
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_mul(want, want), h), NULL, 0, false)));
    nb_ck_close_to(y, want, 0);
    for (int i = 0; i < 3; i++) nb_ck_close_to(nb_tensor_grad(xs[0][i]), nb_tensor_grad(xs[1][i]), 0);
    /* errors: no sum pointer, a normalized_shape that does not fit (sum stays NULL) */
    NB_CK_FAILS(nb_add_rms_norm(xs[0][0], xs[0][1], 1, &m, NULL, 0, NULL) != NULL, NB_ERR_INVALID_ARG);
    int64_t bad = 4;
    sum = xs[0][0];
    NB_CK_FAILS(nb_add_rms_norm(xs[0][0], xs[0][1], 1, &bad, NULL, 0, &sum) != NULL, NB_ERR_SHAPE);
    ck_assert_ptr_null(sum);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_rms_norm(void) {
    Suite *s = suite_create("ops_rms_norm");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_rms_norm_torch_values);
    tcase_add_test(f, test_rms_norm_reference);
    tcase_add_test(f, test_rms_norm_errors);
    tcase_add_test(f, test_rms_norm_16bit_device);
    tcase_add_test(f, test_add_rms_norm);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_rms_norm_gradcheck);
    tcase_add_test(g, test_rms_norm_float32_grads);
    tcase_add_test(g, test_rms_norm_deterministic);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
