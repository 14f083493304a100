/* test_nn_layers.c - the layer modules of #29 whose values
 * tests/interop/module_interop.py checks against PyTorch: what only C can
 * check. Training-mode randomness (Dropout2d drops whole channels, RReLU's
 * slopes stay in [lower, upper], AlphaDropout keeps a standard normal's
 * mean and variance), kinds, parameter shapes and the constructors' errors;
 * the parametrizations (weight_norm, spectral_norm) by hand.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"

START_TEST(test_dropout_variants_in_training) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(9);
    nb_tensor *x = nb_add_scalar(nb_rand(NB_SHAPE(4, 6, 3, 3), NB_F64, NULL), 1.0); /* in [1, 2): never 0 */
    nb_module *d = nb_nn_dropout2d(0.5);
    nb_tensor *y = nb_forward(d, x);
    NB_CK_NOTNULL(y);
    double *xv = nb_test_values_of(x), *yv = nb_test_values_of(y);
    int zeros = 0;
    for (int ch = 0; ch < 24; ch++) { /* each (sample, channel): all dropped or all scaled by 2 */
        bool dropped = yv[ch * 9] == 0;
        zeros += dropped;
        for (int i = 0; i < 9; i++) {
            double want = dropped ? 0 : 2 * xv[ch * 9 + i];
            ck_assert_msg(fabs(yv[ch * 9 + i] - want) < 1e-15, "channel %d element %d", ch, i);
        }
    }
    ck_assert(zeros > 0 && zeros < 24);
    free(xv), free(yv);
    nb_module_train(d, false);
    ck_assert_ptr_eq(nb_forward(d, x), x);
    nb_module_free(d);
    /* AlphaDropout keeps N(0, 1)'s moments (Klambauer et al. 2017) */
    nb_tensor *z = nb_randn(NB_SHAPE(200000), NB_F64, NULL);
    nb_tensor *a = nb_alpha_dropout(z, 0.2, true, NULL);
    double mean = nb_item(nb_mean(a, NULL, 0, false)), sd = nb_item(nb_std(a, NULL, 0, 1, false));
    ck_assert_msg(fabs(mean) < 0.01 && fabs(sd - 1) < 0.01, "mean %g std %g", mean, sd);
    /* RReLU: negative inputs scaled by a slope in [lower, upper] in training, by the mean in eval */
    nb_module *r = nb_nn_rrelu(0.1, 0.3);
    nb_tensor *neg = nb_full_on(NB_SHAPE(1000), -1.0, NB_F64, NB_CPU);
    nb_tensor *ry = nb_forward(r, neg);
    ck_assert(nb_item(nb_amin(ry, NULL, 0, false)) >= -0.3 && nb_item(nb_amax(ry, NULL, 0, false)) <= -0.1);
    ck_assert(nb_item(nb_amin(ry, NULL, 0, false)) != nb_item(nb_amax(ry, NULL, 0, false)));
    nb_module_train(r, false);
    ck_assert_double_eq_tol(nb_item(nb_mean(nb_forward(r, neg), NULL, 0, false)), -0.2, 1e-15);
    nb_module_free(r);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_layer_constructors) {
    nb_scope *s = nb_scope_begin();
    struct {
        nb_module *m;
        const char *kind;
    } ok[] = {
        {nb_nn_prelu(3, 0), "PReLU"},
        {nb_nn_conv3d(2, 4, 3, (nb_conv3d_options){.groups = 1}, true), "Conv3d"},
        {nb_nn_conv_transpose1d(2, 4, 3, (nb_conv_transpose1d_options){0}, false), "ConvTranspose1d"},
        {nb_nn_conv_transpose3d(2, 4, 3, (nb_conv_transpose3d_options){.groups = 1}, true), "ConvTranspose3d"},
        {nb_nn_zero_pad(2, (int64_t[]){1, 1, 2, 0}), "ZeroPad2d"},
        {nb_nn_circular_pad(1, (int64_t[]){1, 2}), "CircularPad1d"},
        {nb_nn_reflection_pad(3, (int64_t[]){1, 1, 1, 1, 1, 1}), "ReflectionPad3d"},
        {nb_nn_lp_pool2d(2, (nb_pool2d_options){.kernel = {2, 2}}), "LPPool2d"},
        {nb_nn_upsampling_nearest2d(4, 4, 0, 0), "UpsamplingNearest2d"},
        {nb_nn_bilinear(3, 2, 4, false, NB_F64), "Bilinear"},
        {nb_nn_softmax(-1), "Softmax"},
        {nb_nn_feature_alpha_dropout(0.1), "FeatureAlphaDropout"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        NB_CK_NOTNULL(ok[i].m);
        ck_assert_str_eq(nb_module_kind(ok[i].m), ok[i].kind);
    }
    nb_named_tensor p[4];
    ck_assert_int_eq(nb_module_parameters(ok[1].m, p, 4), 2);
    nb_ck_shape(p[0].tensor, NB_SHAPE(4, 2, 3, 3, 3));
    ck_assert_int_eq(nb_module_parameters(ok[2].m, p, 4), 1);
    nb_ck_shape(p[0].tensor, NB_SHAPE(2, 4, 3));
    ck_assert_int_eq(nb_module_parameters(ok[9].m, p, 4), 1);
    nb_ck_shape(p[0].tensor, NB_SHAPE(4, 3, 2));
    /* PReLU's weight gets a gradient */
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 4), NB_F32, NULL);
    NB_CK_OK(nb_backward(nb_sum(nb_forward(ok[0].m, x), NULL, 0, false)));
    ck_assert_ptr_nonnull(nb_tensor_grad(nb_module_get(ok[0].m, "weight")));
    /* forward errors name the module */
    NB_CK_FAILS(nb_forward(ok[4].m, nb_randn(NB_SHAPE(4), NB_F32, NULL)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "ZeroPad2d"));
    NB_CK_FAILS(nb_forward(ok[8].m, nb_randn(NB_SHAPE(2, 3, 4), NB_F32, NULL)), NB_ERR_SHAPE);
    nb_tensor *out1[1];
    ck_assert_int_eq(nb_forward_n(ok[9].m, 1, (nb_tensor *[]){x}, out1, 1), -1); /* Bilinear takes two */
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) nb_module_free(ok[i].m);
    /* constructor errors */
    nb_module *bad[] = {
        nb_nn_prelu(0, 0),
        nb_nn_celu(NB_ZERO),
        nb_nn_softshrink(-1),
        nb_nn_rrelu(0.5, 0.1),
        nb_nn_reflection_pad(2, (int64_t[]){1, -1, 0, 0}),
        nb_nn_zero_pad(4, (int64_t[]){0, 0, 0, 0, 0, 0, 0, 0}),
        nb_nn_unflatten(1, 0, (int64_t[]){1}),
        nb_nn_upsample(4, 4, 2, 2, NB_INTERPOLATE_NEAREST, false),
        nb_nn_upsample(0, 0, 0, 0, NB_INTERPOLATE_NEAREST, false),
        nb_nn_pixel_shuffle(0),
        nb_nn_lp_pool1d(0, (nb_pool1d_options){.kernel = 2}),
        nb_nn_dropout3d(1.5),
        nb_nn_bilinear(0, 2, 3, true, NB_F32),
        nb_nn_group_norm(2, 5, 0),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) ck_assert_msg(bad[i] == NULL, "constructor %zu", i);
    nb_scope_end(s);
}
END_TEST

/* FractionalMaxPool2d: output size from the ratio, each output one of its
 * plane's inputs (the maximum of a window), a new draw per forward; the
 * constructor's errors. */
START_TEST(test_fractional_max_pool_module) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(12);
    nb_module *m = nb_nn_fractional_max_pool2d((nb_fractional_max_pool_options){.kernel_size = {2, 2},
                                                                                 .output_ratio = {0.5, 0.5}});
    NB_CK_NOTNULL(m);
    ck_assert_str_eq(nb_module_kind(m), "FractionalMaxPool2d");
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 10, 8), NB_F64, NULL), *y = nb_forward(m, x);
    nb_ck_shape(y, 4, (int64_t[]){2, 3, 5, 4});
    nb_tensor *idx = NULL;
    nb_tensor *y2 = nb_fractional_max_pool2d(x, (nb_fractional_max_pool_options){.kernel_size = {2, 2},
                                                                                .output_size = {5, 4}}, &idx);
    nb_tensor *back = nb_gather(nb_reshape(x, NB_SHAPE(2, 3, 80)), 2, nb_reshape(idx, NB_SHAPE(2, 3, 20)));
    double *want = nb_test_values_of(y2);
    nb_ck_close(back, want, 120, 0, 0);
    free(want);
    nb_module_free(m);
    ck_assert_ptr_null(nb_nn_fractional_max_pool2d((nb_fractional_max_pool_options){.kernel_size = {2, 2},
                                                                                    .output_ratio = {1.5, 0.5}}));
    ck_assert_ptr_null(nb_nn_fractional_max_pool3d((nb_fractional_max_pool_options){.output_size = {2, 2, 2}}));
    NB_CK_FAILS(nb_fractional_max_pool2d(x, (nb_fractional_max_pool_options){.kernel_size = {4, 4}, .output_size = {8, 2}},
                                         NULL), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* AdaptiveLogSoftmaxWithLoss: log_prob is a distribution over the
 * classes, predict its argmax, the forward's output its target column;
 * gradients reach the head and every tail; the constructor's errors. */
START_TEST(test_adaptive_log_softmax) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(2);
    /* in_features 6 // 4^2 is 0: a projection of size 0 (PyTorch builds it, nabla refuses) */
    ck_assert_ptr_null(nb_nn_adaptive_log_softmax_with_loss(6, 9, (int64_t[]){2, 5}, 2, 0, false, NB_F64));
    nb_module *m = nb_nn_adaptive_log_softmax_with_loss(16, 9, (int64_t[]){2, 5}, 2, 0, false, NB_F64);
    NB_CK_NOTNULL(m);
    nb_tensor *x = nb_randn(NB_SHAPE(4, 16), NB_F64, NULL), *t = nb_from_data((int64_t[]){1, 3, 8, 5}, NB_SHAPE(4), NB_I64);
    nb_tensor *lp = nb_nn_adaptive_log_softmax_log_prob(m, x);
    nb_ck_shape(lp, 2, (int64_t[]){4, 9});
    nb_ck_close(nb_logsumexp(lp, (int[]){1}, 1, false), (double[]){0, 0, 0, 0}, 4, 1e-14, 0);
    double *want = nb_test_values_of(nb_argmax(lp, 1, false));
    nb_ck_close(nb_nn_adaptive_log_softmax_predict(m, x), want, 4, 0, 0);
    free(want);
    nb_tensor *out[2];
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){x, t}, out, 2), 2);
    want = nb_test_values_of(nb_squeeze(nb_gather(lp, 1, nb_unsqueeze(t, 1)), 1));
    nb_ck_close(out[0], want, 4, 1e-15, 0);
    free(want);
    NB_CK_OK(nb_backward(out[1]));
    nb_named_tensor p[8];
    int n = nb_module_parameters(m, p, 8);
    ck_assert_int_eq(n, 5); /* head.weight, tail.0.0.weight, tail.0.1.weight, tail.1.0.weight, tail.1.1.weight */
    ck_assert_str_eq(p[3].name, "tail.1.0.weight");
    for (int i = 0; i < n; i++) ck_assert_msg(nb_tensor_grad(p[i].tensor) != NULL, "%s has no gradient", p[i].name);
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){x, nb_from_data((int64_t[]){1, 3, 9, 5}, NB_SHAPE(4), NB_I64)}, out,
                                  2), -1);
    nb_module_free(m);
    ck_assert_ptr_null(nb_nn_adaptive_log_softmax_with_loss(6, 9, (int64_t[]){5, 2}, 2, 0, false, NB_F64));
    ck_assert_ptr_null(nb_nn_adaptive_log_softmax_with_loss(6, 9, (int64_t[]){2, 9}, 2, 0, false, NB_F64));
    nb_scope_end(s);
}
END_TEST

/* weight_norm: the keys, w = g v / ||v|| per row, gradients to g and v
 * (by hand: d/dg of sum(w) is sum(v)/||v|| per row), two forwards before
 * one backward (each graph keeps its own weight), remove_parametrizations
 * and the errors. */
START_TEST(test_weight_norm) {
    nb_scope *s = nb_scope_begin();
    nb_module *lin = nb_nn_linear_ex(3, 2, false, NB_F64);
    NB_CK_OK(nb_nn_weight_norm(lin, NULL, 0));
    nb_named_tensor p[8];
    ck_assert_int_eq(nb_module_parameters(lin, p, 8), 2);
    ck_assert_str_eq(p[0].name, "parametrizations.weight.original0");
    ck_assert_str_eq(p[1].name, "parametrizations.weight.original1");
    nb_tensor *g = p[0].tensor, *v = p[1].tensor;
    nb_ck_shape(g, 2, (int64_t[]){2, 1});
    NB_CK_OK(nb_copy_from_host(g, (double[]){2, 3}, sizeof(double) * 2));
    NB_CK_OK(nb_copy_from_host(v, (double[]){3, 4, 0, 1, 2, 2}, sizeof(double) * 6));
    nb_tensor *x = nb_from_data((double[]){1, 1, 1}, NB_SHAPE(1, 3), NB_F64);
    nb_tensor *y1 = nb_forward(lin, x); /* rows: (2/5)(3, 4, 0), (3/3)(1, 2, 2) */
    nb_ck_close(y1, (double[]){2.8, 5}, 2, 1e-15, 0);
    /* a second forward before any backward (a GAN's discriminator on real and fake): both graphs count */
    nb_tensor *x2 = nb_from_data((double[]){2, 0, 1}, NB_SHAPE(1, 3), NB_F64);
    nb_tensor *y2 = nb_forward(lin, x2);
    nb_ck_close(y2, (double[]){2.4, 4}, 2, 1e-15, 0);
    NB_CK_OK(nb_backward(nb_add(nb_sum(y1, NULL, 0, false), nb_sum(y2, NULL, 0, false))));
    /* d/dg sum(w x) = (v . x) / ||v|| per row, from both forwards */
    nb_ck_close(nb_tensor_grad(g), (double[]){7.0 / 5 + 6.0 / 5, 5.0 / 3 + 4.0 / 3}, 2, 1e-14, 0);
    NB_NO_GRAD { NB_CK_OK(nb_copy_from_host(g, (double[]){4, 3}, sizeof(double) * 2)); }
    NB_CK_NOTNULL(nb_tensor_grad(v));
    /* removed: a leaf parameter "weight" holding g v / ||v|| */
    NB_CK_OK(nb_nn_remove_parametrizations(lin, "weight", true));
    ck_assert_int_eq(nb_module_parameters(lin, p, 8), 1);
    ck_assert_str_eq(p[0].name, "weight");
    nb_ck_close(p[0].tensor, (double[]){2.4, 3.2, 0, 1, 2, 2}, 6, 1e-15, 0);
    ck_assert_ptr_null(nb_module_child(lin, "parametrizations"));
    nb_ck_close(nb_forward(lin, x), (double[]){5.6, 5}, 2, 1e-15, 0);
    /* errors */
    ck_assert_int_eq(nb_nn_weight_norm(lin, "bias", 0), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_nn_weight_norm(lin, "weight", 2), NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_nn_weight_norm(lin, "weight", -1)); /* the whole tensor's norm: g is 0-d */
    ck_assert_int_eq(nb_nn_weight_norm(lin, "weight", 0), NB_ERR_INVALID_ARG); /* no parameter "weight" now */
    ck_assert_int_eq(nb_nn_spectral_norm(lin, "weight", (nb_spectral_norm_options){0}), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_nn_remove_parametrizations(lin, "bias", true), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_module_parameters(lin, p, 8), 2);
    ck_assert_int_eq(nb_dim(p[0].tensor), 0);
    nb_module_free(lin);
    /* a module that looks its weight up by name (PReLU) still finds it */
    nb_module *pr = nb_nn_prelu(2, 0.25);
    NB_CK_OK(nb_nn_weight_norm(pr, NULL, 0));
    NB_CK_NOTNULL(nb_module_get(pr, "weight"));
    nb_ck_close(nb_forward(pr, nb_from_data((float[]){-4, 2, -8, 1}, NB_SHAPE(2, 2), NB_F32)), (double[]){-1, 2, -2, 1}, 4,
                1e-6, 0);
    ck_assert_int_eq(nb_nn_remove_parametrizations(pr, NULL, false), NB_ERR_INVALID_ARG);
    nb_module_free(pr);
    nb_scope_end(s);
}
END_TEST

/* spectral_norm: the buffers, sigma from the power iteration (a diagonal
 * weight's largest entry), eval mode without iterations. */
START_TEST(test_spectral_norm) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    nb_module *lin = nb_nn_linear_ex(3, 3, false, NB_F64);
    NB_CK_OK(nb_copy_from_host(nb_module_get(lin, "weight"), (double[]){3, 0, 0, 0, -1, 0, 0, 0, 0.5}, sizeof(double) * 9));
    NB_CK_OK(nb_nn_spectral_norm(lin, NULL, (nb_spectral_norm_options){.n_power_iterations = 5}));
    nb_named_tensor b[4];
    ck_assert_int_eq(nb_module_buffers(lin, b, 4), 2);
    ck_assert_str_eq(b[0].name, "parametrizations.weight.0._u");
    ck_assert_str_eq(b[1].name, "parametrizations.weight.0._v");
    nb_tensor *x = nb_from_data((double[]){1, 1, 1}, NB_SHAPE(1, 3), NB_F64);
    for (int i = 0; i < 3; i++) NB_CK_NOTNULL(nb_forward(lin, x)); /* 15 + 15 iterations: converged */
    nb_ck_close(nb_forward(lin, x), (double[]){1, -1.0 / 3, 1.0 / 6}, 3, 1e-9, 0);
    nb_module_train(lin, false);
    nb_tensor *u = nb_clone(b[0].tensor);
    NB_CK_NOTNULL(nb_forward(lin, x));
    double *was = nb_test_values_of(u);
    nb_ck_close(b[0].tensor, was, 3, 0, 0); /* eval: u unchanged */
    free(was);
    nb_module_free(lin);
    nb_scope_end(s);
}
END_TEST

/* BitLinear (BitNet b1.58): Linear's parameters and init bounds; forward
 * = linear(activation_quant(rms_norm(x, eps 1e-6)), weight_quant(W), b),
 * ternary effective weights, and gradients straight through to W (for
 * sum(y): gW[o] = sum over rows of the quantized activations). */
START_TEST(test_bitlinear) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_module *m = nb_nn_bitlinear(6, 4, true, NB_F64);
    NB_CK_NOTNULL(m);
    ck_assert_str_eq(nb_module_kind(m), "BitLinear");
    nb_tensor *w = nb_module_get(m, "weight"), *b = nb_module_get(m, "bias");
    NB_CK_NOTNULL(w);
    NB_CK_NOTNULL(b);
    nb_ck_shape(w, 2, (int64_t[]){4, 6});
    nb_generator g = nb_generator_new(9);
    nb_tensor *x = nb_randn(3, (int64_t[]){2, 3, 6}, NB_F64, &g);
    ck_assert_int_eq(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = nb_forward(m, x);
    NB_CK_NOTNULL(y);
    nb_tensor *xq = nb_bitnet_activation_quant(nb_rms_norm(nb_detach(x), 1, (int64_t[]){6}, NULL, 1e-6));
    nb_tensor *wq = nb_bitnet_weight_quant(nb_detach(w));
    nb_ck_close_to(y, nb_linear(xq, wq, nb_detach(b)), 0);
    /* the effective weights are -a, 0 or +a for one a > 0 */
    double *v = nb_test_values_of(wq), a = 0;
    for (int i = 0; i < 24; i++) a = fmax(a, fabs(v[i]));
    ck_assert(a > 0);
    for (int i = 0; i < 24; i++) ck_assert(v[i] == 0 || fabs(v[i]) == a);
    free(v);
    ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_OK);
    int rows[2] = {0, 1};
    nb_tensor *col = nb_sum(xq, rows, 2, false); /* [6]: every output row of gW */
    nb_ck_close_to(nb_tensor_grad(w), nb_expand(nb_unsqueeze(col, 0), 2, (int64_t[]){4, 6}), 1e-12);
    nb_ck_close(nb_tensor_grad(b), (double[]){6, 6, 6, 6}, 4, 0, 0);
    NB_CK_NOTNULL(nb_tensor_grad(x));
    nb_module_free(m);
    nb_module *nobias = nb_nn_bitlinear(3, 2, false, NB_F32);
    ck_assert_ptr_null(nb_module_get(nobias, "bias"));
    nb_module_free(nobias);
    NB_CK_FAILS(nb_nn_bitlinear(-1, 2, true, NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_bitlinear(2, 3, true, NB_I32), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* nb_module_bitnet_pack: a Sequential of BitLinear, ReLU, BitLinear packs
 * both (weight -> weight_packed uint8 and weight_scale), runs the packed
 * product with the training forward's values (up to the GEMM's rounding
 * and s_w's float32), and its packed state_dict saved and loaded into a
 * second packed model gives the same bits. */
START_TEST(test_bitlinear_pack) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(8);
    nb_module *a = nb_nn_sequential(nb_nn_bitlinear(200, 16, true, NB_F64), nb_nn_relu(),
                                    nb_nn_bitlinear(16, 3, false, NB_F64));
    nb_manual_seed(9);
    nb_module *b = nb_nn_sequential(nb_nn_bitlinear(200, 16, true, NB_F64), nb_nn_relu(),
                                    nb_nn_bitlinear(16, 3, false, NB_F64));
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    nb_generator g = nb_generator_new(2);
    nb_tensor *x = nb_randn(2, (int64_t[]){4, 200}, NB_F64, &g);
    nb_tensor *before = nb_forward(a, x);
    NB_CK_OK(nb_module_bitnet_pack(a));
    NB_CK_OK(nb_module_bitnet_pack(a)); /* packed already: nothing to do */
    ck_assert_ptr_null(nb_module_get(nb_module_child(a, "0"), "weight"));
    nb_tensor *p0 = nb_module_get(nb_module_child(a, "0"), "weight_packed");
    NB_CK_NOTNULL(p0);
    ck_assert_int_eq(nb_dtype_of(p0), NB_U8);
    nb_ck_shape(p0, 2, (int64_t[]){16, 64});
    nb_named_tensor pr[8];
    ck_assert_int_eq(nb_module_parameters(a, pr, 8), 1); /* 0.bias */
    nb_tensor *after = nb_forward(a, x);
    nb_ck_close_to(after, before, 1e-5);
    char path[] = "/tmp/nb_bitnet_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    NB_CK_OK(nb_module_state_dict_save(a, path));
    NB_CK_OK(nb_module_bitnet_pack(b));
    nb_load_report r;
    NB_CK_OK(nb_module_load_state_dict(b, path, true, &r));
    nb_load_report_free(&r);
    unlink(path);
    nb_ck_close_to(nb_forward(b, x), after, 0);
    NB_CK_FAILS(nb_module_bitnet_pack(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_module_free(a);
    nb_module_free(b);
    nb_scope_end(s);
}
END_TEST

/* int8 weight-only: every Linear of a Sequential converts (twice is a
 * no-op), its weight becomes weight_int8 / weight_scale, the output stays
 * within the quantization error of the float model's, and the int8
 * state_dict loads into a model converted the same way. */
START_TEST(test_linear_int8_weight_only) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_module *a = nb_nn_sequential(nb_nn_linear(64, 32), nb_nn_relu(), nb_nn_linear(32, 5));
    nb_manual_seed(4);
    nb_module *b = nb_nn_sequential(nb_nn_linear(64, 32), nb_nn_relu(), nb_nn_linear(32, 5));
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_randn(2, (int64_t[]){3, 64}, NB_F32, &g);
    nb_tensor *before = nb_forward(a, x);
    NB_CK_OK(nb_module_int8_weight_only(a));
    NB_CK_OK(nb_module_int8_weight_only(a));
    nb_module *l0 = nb_module_child(a, "0");
    ck_assert_ptr_null(nb_module_get(l0, "weight"));
    nb_tensor *q = nb_module_get(l0, "weight_int8");
    NB_CK_NOTNULL(q);
    ck_assert_int_eq(nb_dtype_of(q), NB_I8);
    nb_ck_shape(q, 2, (int64_t[]){32, 64});
    nb_ck_shape(nb_module_get(l0, "weight_scale"), 1, (int64_t[]){32});
    nb_named_tensor pr[8];
    ck_assert_int_eq(nb_module_parameters(a, pr, 8), 2); /* the biases */
    nb_tensor *after = nb_forward(a, x);
    nb_ck_close_to(after, before, 0.02); /* weights within half a step (amax / 255) */
    char path[] = "/tmp/nb_int8_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    NB_CK_OK(nb_module_state_dict_save(a, path));
    NB_CK_OK(nb_module_int8_weight_only(b));
    nb_load_report r;
    NB_CK_OK(nb_module_load_state_dict(b, path, true, &r));
    nb_load_report_free(&r);
    unlink(path);
    nb_ck_close_to(nb_forward(b, x), after, 0);
    NB_CK_FAILS(nb_module_int8_weight_only(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_module_free(a);
    nb_module_free(b);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_nn_layers(void) {
    Suite *s = suite_create("nn_layers");
    TCase *t = tcase_create("layers");
    tcase_add_test(t, test_dropout_variants_in_training);
    tcase_add_test(t, test_layer_constructors);
    tcase_add_test(t, test_fractional_max_pool_module);
    tcase_add_test(t, test_adaptive_log_softmax);
    tcase_add_test(t, test_weight_norm);
    tcase_add_test(t, test_spectral_norm);
    tcase_add_test(t, test_bitlinear);
    tcase_add_test(t, test_bitlinear_pack);
    tcase_add_test(t, test_linear_int8_weight_only);
    suite_add_tcase(s, t);
    return s;
}
