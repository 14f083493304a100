/* test_ops_quantize.c - fake quantization (nb_quantize.h): values by hand
 * (ties to even, clamping at both ends, NaN and inf, integer and float zero
 * points), the straight-through mask and the learnable variants' LSQ
 * gradients by hand, PyTorch's two zero-point roundings of the learnable
 * per-tensor op, per channel against per tensor on each channel, 16-bit
 * inputs, the same bits on every device and twice, and the error paths;
 * BitNet b1.58's weight and activation quantizers by hand, the packed
 * layout, and the packed product against the integer formula and the
 * fake-quantized product.
 * PyTorch's values: tests/torch_diff (cases_tensor.py's quantize()). */
#include <math.h>
#include <stdlib.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *vec(int64_t n, nb_dtype dt, const double *v, bool grad) {
    nb_tensor *t = nb_test_tensor(1, (int64_t[]){n}, dt, v);
    NB_CK_NOTNULL(t);
    if (grad) ck_assert_int_eq(nb_set_requires_grad(t, true), NB_OK);
    return t;
}

/* scale 0.5, zero point 1, range [-4, 3]: x / 0.5 holds ties (-4.5 ... 3.5)
 * that round to even; 100 and inf clamp to 3, -inf and NaN to -4. */
START_TEST(test_fake_quantize_per_tensor_by_hand) {
    static const double x[12] = {-2.25, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1.75, 100, NAN, INFINITY, -INFINITY};
    static const double want[12] = {-2, -1, -1, 0, 0, 1, 1, 1, 1, -2.5, 1, -2.5};
    static const double mask[12] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 2; k++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *xt = nb_to_device(vec(12, k ? NB_F64 : NB_F32, x, false), devs[d]);
            ck_assert_int_eq(nb_set_requires_grad(xt, true), NB_OK);
            nb_tensor *y = nb_fake_quantize_per_tensor_affine(xt, 0.5, 1, -4, 3);
            nb_ck_close(y, want, 12, 0, 0);
            ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_OK);
            nb_ck_close(nb_tensor_grad(xt), mask, 12, 0, 0);
            nb_scope_end(s);
        }
}
END_TEST

/* x [2, 2], axis 1: scale [0.5, 0.25], range [-8, 7]; zero points int32
 * [0, 1] (z + rint(x / s)) and float [0.5, 1.25] (rint(z + x / s)). */
START_TEST(test_fake_quantize_per_channel_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(2, (int64_t[]){2, 2}, NB_F32, (double[]){0.75, 0.3, -0.4, 10});
    nb_tensor *sc = vec(2, NB_F32, (double[]){0.5, 0.25}, false);
    nb_tensor *zi = vec(2, NB_I32, (double[]){0, 1}, false), *zf = vec(2, NB_F32, (double[]){0.5, 1.25}, false);
    nb_ck_close(nb_fake_quantize_per_channel_affine(x, sc, zi, 1, -8, 7), (double[]){1.0, 0.25, -0.5, 1.5}, 4, 0, 0);
    nb_ck_close(nb_fake_quantize_per_channel_affine(x, sc, zf, 1, -8, 7), (double[]){0.75, 0.1875, -0.25, 1.4375}, 4,
                0, 0);
    /* int64 zero points take the integer formula too; axis 0 reads the rows' qparams */
    nb_tensor *zl = vec(2, NB_I64, (double[]){0, 1}, false);
    nb_ck_close(nb_fake_quantize_per_channel_affine(x, sc, zl, 1, -8, 7), (double[]){1.0, 0.25, -0.5, 1.5}, 4, 0, 0);
    nb_ck_close(nb_fake_quantize_per_channel_affine(x, sc, zi, 0, -8, 7), (double[]){1.0, 0.5, -0.5, 1.5}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* scale 0.5, zero point 0.6 (rounded to 1), range [-4, 3], grad_factor 2:
 * x = 0.3 is in range (gscale (0.5 - 0.3) / 0.5 * 2 = 0.8), -3 below
 * (gscale (-4 - 1) * 2, gzp -0.5 * 2) and 5 above (gscale (3 - 1) * 2). */
START_TEST(test_fake_quantize_learnable_gradients_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = vec(3, NB_F64, (double[]){0.3, -3.0, 5.0}, true);
    nb_tensor *sc = vec(1, NB_F64, (double[]){0.5}, true), *zp = vec(1, NB_F64, (double[]){0.6}, true);
    nb_tensor *y = nb_fake_quantize_learnable_per_tensor_affine(x, sc, zp, -4, 3, 2.0);
    nb_ck_close(y, (double[]){0.5, -2.5, 1.0}, 3, 0, 0);
    ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_OK);
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 0, 0}, 3, 0, 0);
    nb_ck_close(nb_tensor_grad(sc), (double[]){0.8 - 10 + 4}, 1, 1e-12, 0);
    nb_ck_close(nb_tensor_grad(zp), (double[]){-2}, 1, 1e-12, 0);
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(sc)), NB_F64);
    ck_assert_int_eq(nb_dim(nb_tensor_grad(sc)), 1);
    nb_scope_end(s);
}
END_TEST

/* PyTorch's per-tensor learnable op rounds a zero point of 2.5 to 2 in
 * its forward (nearbyint) and to 3 in its backward (trunc(z + 0.5)); the
 * per-channel one rounds both to 2. x = 10 with scale 1 clamps to 7:
 * out (7 - 2) * 1 and gscale 7 - 3 per tensor, 7 - 2 per channel. A zero
 * point of -1 is -1 in the forward and trunc(-0.5) = 0 in the backward
 * (PyTorch 1.13 gives the same: x = 3.1405, scale 0.25, range [-4, 3]:
 * out 1, gscale 3, gzero_point -0.25). */
START_TEST(test_fake_quantize_learnable_zero_point_rounding) {
    nb_scope *s = nb_scope_begin();
    for (int per_channel = 0; per_channel < 2; per_channel++) {
        nb_tensor *x = vec(1, NB_F32, (double[]){10}, true);
        nb_tensor *sc = vec(1, NB_F32, (double[]){1}, true), *zp = vec(1, NB_F32, (double[]){2.5}, true);
        nb_tensor *y = per_channel ? nb_fake_quantize_learnable_per_channel_affine(x, sc, zp, 0, -4, 7, 1.0)
                                   : nb_fake_quantize_learnable_per_tensor_affine(x, sc, zp, -4, 7, 1.0);
        nb_ck_close(y, (double[]){5}, 1, 0, 0);
        ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_OK);
        nb_ck_close(nb_tensor_grad(sc), (double[]){per_channel ? 5 : 4}, 1, 0, 0);
        nb_ck_close(nb_tensor_grad(zp), (double[]){-1}, 1, 0, 0);
        nb_ck_close(nb_tensor_grad(x), (double[]){0}, 1, 0, 0);
    }
    nb_tensor *x = vec(1, NB_F32, (double[]){3.1405}, false);
    nb_tensor *sc = vec(1, NB_F32, (double[]){0.25}, true), *zp = vec(1, NB_F32, (double[]){-1}, true);
    nb_tensor *y = nb_fake_quantize_learnable_per_tensor_affine(x, sc, zp, -4, 3, 1.0);
    nb_ck_close(y, (double[]){1}, 1, 0, 0);
    ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_OK);
    nb_ck_close(nb_tensor_grad(sc), (double[]){3}, 1, 0, 0);
    nb_ck_close(nb_tensor_grad(zp), (double[]){-0.25}, 1, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* The learnable per-channel op on x [5, 3] (axis 1, zero points integers
 * >= 0, where PyTorch's two roundings agree) equals the per-tensor op on
 * each column: outputs and all gradients. */
START_TEST(test_fake_quantize_learnable_per_channel_is_per_tensor_per_column) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(7);
    nb_tensor *x = nb_mul_scalar(nb_randn(2, (int64_t[]){5, 3}, NB_F64, &g), 2);
    ck_assert_int_eq(nb_set_requires_grad(x, true), NB_OK);
    const double scv[3] = {0.3, 0.5, 0.25}, zpv[3] = {0, 2, 1};
    nb_tensor *sc = vec(3, NB_F64, scv, true), *zp = vec(3, NB_F64, zpv, true);
    nb_tensor *y = nb_fake_quantize_learnable_per_channel_affine(x, sc, zp, 1, -4, 3, 0.5);
    ck_assert_int_eq(nb_backward(nb_sum(nb_mul(y, y), NULL, 0, false)), NB_OK);
    for (int c = 0; c < 3; c++) {
        nb_tensor *xc = nb_contiguous(nb_detach(nb_select(x, 1, c)));
        ck_assert_int_eq(nb_set_requires_grad(xc, true), NB_OK);
        nb_tensor *s1 = vec(1, NB_F64, &scv[c], true), *z1 = vec(1, NB_F64, &zpv[c], true);
        nb_tensor *y1 = nb_fake_quantize_learnable_per_tensor_affine(xc, s1, z1, -4, 3, 0.5);
        nb_ck_close_to(nb_select(y, 1, c), y1, 0);
        ck_assert_int_eq(nb_backward(nb_sum(nb_mul(y1, y1), NULL, 0, false)), NB_OK);
        nb_ck_close_to(nb_select(nb_tensor_grad(x), 1, c), nb_tensor_grad(xc), 0);
        nb_ck_close_to(nb_select(nb_tensor_grad(sc), 0, c), nb_tensor_grad(s1), 1e-12);
        nb_ck_close_to(nb_select(nb_tensor_grad(zp), 0, c), nb_tensor_grad(z1), 1e-12);
    }
    nb_scope_end(s);
}
END_TEST

/* bfloat16 and float16 x: the float32 result rounded once. */
START_TEST(test_fake_quantize_16bit) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    nb_tensor *x = nb_randn(2, (int64_t[]){4, 6}, NB_F32, &g);
    const nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int i = 0; i < 2; i++) {
        nb_tensor *xh = nb_to_dtype(x, dts[i]);
        nb_tensor *y = nb_fake_quantize_per_tensor_affine(xh, 0.125, 3, -16, 15);
        NB_CK_NOTNULL(y);
        ck_assert_int_eq(nb_dtype_of(y), dts[i]);
        nb_tensor *want = nb_to_dtype(nb_fake_quantize_per_tensor_affine(nb_to_dtype(xh, NB_F32), 0.125, 3, -16, 15),
                                      dts[i]);
        nb_ck_close_to(y, want, 0);
    }
    nb_scope_end(s);
}
END_TEST

/* Every accelerator gives the CPU's bits for the forward and gx, the CPU's
 * scale and zero-point gradients up to the order of their sums (nb_sum's
 * per device), and the same bits twice, on a tensor large enough for many
 * blocks: x [257, 37, 3] per channel on axis 1, learnable. */
START_TEST(test_fake_quantize_devices_match_cpu) {
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    for (int a = 0; a < na; a++)
        for (int k = 0; k < 2; k++) {
            nb_scope *s = nb_scope_begin();
            const nb_dtype dt = k ? NB_F64 : NB_F32;
            nb_generator g = nb_generator_new(11);
            nb_tensor *x0 = nb_mul_scalar(nb_randn(3, (int64_t[]){257, 37, 3}, dt, &g), 3);
            nb_tensor *s0 = nb_add_scalar(nb_rand(1, (int64_t[]){37}, dt, &g), 0.1);
            nb_tensor *z0 = nb_mul_scalar(nb_randn(1, (int64_t[]){37}, dt, &g), 4);
            nb_tensor *got[3][4];
            for (int run = 0; run < 3; run++) {
                nb_device dev = run ? accs[a] : NB_CPU;
                nb_tensor *x = nb_to_device(x0, dev), *sc = nb_to_device(s0, dev), *zp = nb_to_device(z0, dev);
                nb_tensor *in[3] = {x, sc, zp};
                for (int i = 0; i < 3; i++) ck_assert_int_eq(nb_set_requires_grad(in[i], true), NB_OK);
                nb_tensor *y = nb_fake_quantize_learnable_per_channel_affine(x, sc, zp, 1, -8, 7, 1.0);
                NB_CK_NOTNULL(y);
                ck_assert_int_eq(nb_backward(nb_sum(nb_mul(y, y), NULL, 0, false)), NB_OK);
                got[run][0] = y;
                for (int i = 0; i < 3; i++) got[run][i + 1] = nb_tensor_grad(in[i]);
            }
            for (int i = 0; i < 4; i++) {
                nb_ck_close_to(got[1][i], got[0][i], i < 2 ? 0 : k ? 1e-9 : 1e-2);
                nb_ck_close_to(got[2][i], got[1][i], 0);
            }
            nb_scope_end(s);
        }
}
END_TEST

/* BitNet b1.58's quantizers. w: mean |w| = 0.525, so w * (1 / 0.525)
 * rounds to 1, -3 -> -1, 0, 0 and q = (0.525, -0.525, 0, 0). x: the first
 * row's absmax 2 gives s = 63.5 and x * s = 63.5 (a tie, to 64), -127,
 * 31.75; a row of zeros stays 0. The gradients pass unchanged. */
START_TEST(test_bitnet_quant_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_tensor(2, (int64_t[]){2, 2}, NB_F64, (double[]){0.5, -1.5, 0.1, 0.0});
    nb_tensor *x = nb_test_tensor(2, (int64_t[]){2, 3}, NB_F64, (double[]){1.0, -2.0, 0.5, 0, 0, 0});
    ck_assert_int_eq(nb_set_requires_grad(w, true), NB_OK);
    ck_assert_int_eq(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *qw = nb_bitnet_weight_quant(w), *qx = nb_bitnet_activation_quant(x);
    nb_ck_close(qw, (double[]){0.525, -0.525, 0, 0}, 4, 1e-15, 0);
    nb_ck_close(qx, (double[]){64 / 63.5, -2, 32 / 63.5, 0, 0, 0}, 6, 1e-15, 0);
    nb_tensor *cw = nb_test_tensor(2, (int64_t[]){2, 2}, NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *cx = nb_test_tensor(2, (int64_t[]){2, 3}, NB_F64, (double[]){-1, 0, 1, 2, 3, 4});
    nb_tensor *loss = nb_add(nb_sum(nb_mul(qw, cw), NULL, 0, false), nb_sum(nb_mul(qx, cx), NULL, 0, false));
    ck_assert_int_eq(nb_backward(loss), NB_OK);
    nb_ck_close(nb_tensor_grad(w), (double[]){1, 2, 3, 4}, 4, 0, 0);
    nb_ck_close(nb_tensor_grad(x), (double[]){-1, 0, 1, 2, 3, 4}, 6, 0, 0);
    /* bfloat16: computed in float32, rounded once */
    nb_tensor *wb = nb_bitnet_weight_quant(nb_to_dtype(w, NB_BF16));
    ck_assert_int_eq(nb_dtype_of(wb), NB_BF16);
    nb_ck_close_to(wb, nb_to_dtype(nb_bitnet_weight_quant(nb_to_dtype(nb_to_dtype(w, NB_BF16), NB_F32)), NB_BF16), 0);
    ck_assert_ptr_null(nb_bitnet_activation_quant(nb_scalar(1.0, NB_F32)));
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_ptr_null(nb_bitnet_weight_quant(nb_zeros(1, (int64_t[]){3}, NB_I32)));
    ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* nb_bitnet_pack's layout: w [2, 130] with w[n][k] = (k + n) % 3 - 1
 * (mean |w| about 2/3, so w * s = +-1.5 rounds to +-2 and clamps to +-1:
 * q = w), codes q + 1 four to a byte (weights j, j + 32, j + 64, j + 96 of
 * each group of 128), the second group padded with code 1. */
START_TEST(test_bitnet_pack_layout) {
    nb_scope *s = nb_scope_begin();
    double wv[260];
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 130; k++) wv[130 * n + k] = (k + n) % 3 - 1;
    nb_tensor *w = nb_test_tensor(2, (int64_t[]){2, 130}, NB_F32, wv), *p, *sc;
    NB_CK_OK(nb_bitnet_pack(w, &p, &sc));
    nb_ck_shape(p, 2, (int64_t[]){2, 64});
    ck_assert_int_eq(nb_dtype_of(p), NB_U8);
    double *got = nb_test_values_of(p);
    for (int n = 0; n < 2; n++)
        for (int g = 0; g < 2; g++)
            for (int j = 0; j < 32; j++) {
                unsigned want = 0;
                for (int i = 0; i < 4; i++) {
                    int k = 128 * g + 32 * i + j;
                    want |= (unsigned)(k < 130 ? (int)wv[130 * n + k] + 1 : 1) << (2 * i);
                }
                ck_assert_msg(got[64 * n + 32 * g + j] == want, "row %d group %d byte %d: %g, want %u", n, g, j,
                              got[64 * n + 32 * g + j], want);
            }
    free(got);
    int nz = 0;
    for (int i = 0; i < 260; i++) nz += wv[i] != 0;
    nb_ck_close(sc, (double[]){(float)(1.0f / (float)((double)nz / 260))}, 1, 1e-6, 0);
    ck_assert_int_eq(nb_bitnet_pack(nb_zeros(1, (int64_t[]){4}, NB_F32), &p, &sc), NB_ERR_SHAPE);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(nb_bitnet_pack(w, NULL, &sc), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* nb_bitnet_linear against the integer formula computed here (the same
 * bits), and against the fake-quantized BitLinear product
 * linear(activation_quant(x), weight_quant(w), b) (equal up to the GEMM's
 * rounding, and in float64 up to s_w's, which is kept in float32); K = 300
 * (a padded last group), rows from 1 to 9, any leading dims. */
START_TEST(test_bitnet_linear_matches_fake_quant) {
    for (int k = 0; k < 2; k++) {
        nb_scope *s = nb_scope_begin();
        const nb_dtype dt = k ? NB_F64 : NB_F32;
        nb_generator g = nb_generator_new(21);
        const int64_t K = 300, N = 7;
        nb_tensor *w = nb_randn(2, (int64_t[]){N, K}, dt, &g), *b = nb_randn(1, (int64_t[]){N}, dt, &g), *p, *sc;
        NB_CK_OK(nb_bitnet_pack(w, &p, &sc));
        for (int64_t M = 1; M <= 9; M += 4) {
            nb_tensor *x = nb_randn(3, (int64_t[]){M, 1, K}, dt, &g);
            nb_tensor *y = nb_bitnet_linear(x, p, sc, b);
            NB_CK_NOTNULL(y);
            nb_ck_shape(y, 3, (int64_t[]){M, 1, N});
            nb_tensor *want = nb_linear(nb_bitnet_activation_quant(x), nb_bitnet_weight_quant(w), b);
            nb_ck_close_to(y, want, k ? 1e-6 : 2e-4); /* float64: s_w is kept in float32 */
            /* the integer formula */
            double *xv = nb_test_values_of(x), *wv = nb_test_values_of(nb_bitnet_weight_quant(w));
            double *bv = nb_test_values_of(b), *yv = nb_test_values_of(y), sw = nb_item(sc);
            for (int64_t m = 0; m < M; m++) {
                double a = 0;
                for (int64_t i = 0; i < K; i++) a = fmax(a, fabs(xv[m * K + i]));
                double sx = k ? 127 / fmax(a, 1e-5) : (double)(127.0f / fmaxf((float)a, 1e-5f));
                for (int64_t n = 0; n < N; n++) {
                    double acc = 0;
                    for (int64_t i = 0; i < K; i++) {
                        double q = k ? rint(xv[m * K + i] * sx) : (double)rintf((float)xv[m * K + i] * (float)sx);
                        acc += fmin(fmax(q, -128), 127) * (double)lrint(wv[n * K + i] * sw);
                    }
                    double want1 = k ? acc / sx / sw + bv[n]
                                     : (double)((float)acc / (float)sx / (float)sw + (float)bv[n]);
                    ck_assert_msg(yv[m * N + n] == want1, "M %lld row %lld col %lld: %.17g, want %.17g", (long long)M,
                                  (long long)m, (long long)n, yv[m * N + n], want1);
                }
            }
            free(xv), free(wv), free(bv), free(yv);
        }
        /* errors: an x that requires grad (inference only), K that does not fit the packing, a bad scale */
        nb_tensor *xg = nb_randn(2, (int64_t[]){2, K}, dt, &g);
        NB_CK_OK(nb_set_requires_grad(xg, true));
        ck_assert_ptr_null(nb_bitnet_linear(xg, p, sc, NULL));
        ck_assert_int_eq(nb_last_status(), NB_ERR_UNSUPPORTED);
        bool prev = nb_set_grad_enabled(false);
        NB_CK_NOTNULL(nb_bitnet_linear(xg, p, sc, NULL));
        nb_set_grad_enabled(prev);
        ck_assert_ptr_null(nb_bitnet_linear(nb_zeros(1, (int64_t[]){100}, dt), p, sc, NULL));
        ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
        ck_assert_ptr_null(nb_bitnet_linear(nb_zeros(1, (int64_t[]){K}, dt), p, p, NULL));
        ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
        nb_scope_end(s);
    }
}
END_TEST

/* Every accelerator's packed product gives the CPU's bits (exact integer
 * sums, the same float division), for 1 and 6 rows, K = 300, with a bias,
 * from weights packed on the device. */
START_TEST(test_bitnet_linear_devices_match_cpu) {
    nb_device accs[8];
    const int na = nb_test_accelerators(accs, 8);
    for (int a = 0; a < na; a++)
        for (int k = 0; k < 2; k++)
            for (int64_t M = 1; M <= 6; M += 5) {
                nb_scope *s = nb_scope_begin();
                const nb_dtype dt = k ? NB_F64 : NB_F32;
                nb_generator g = nb_generator_new(31);
                nb_tensor *w = nb_randn(2, (int64_t[]){9, 300}, dt, &g), *b = nb_randn(1, (int64_t[]){9}, dt, &g);
                nb_tensor *x = nb_randn(2, (int64_t[]){M, 300}, dt, &g), *p, *sc, *pd, *scd;
                NB_CK_OK(nb_bitnet_pack(w, &p, &sc));
                NB_CK_OK(nb_bitnet_pack(nb_to_device(w, accs[a]), &pd, &scd));
                nb_ck_close_to(pd, p, 0);
                nb_ck_close_to(scd, sc, 0);
                nb_tensor *want = nb_bitnet_linear(x, p, sc, b);
                nb_tensor *got = nb_bitnet_linear(nb_to_device(x, accs[a]), pd, scd, nb_to_device(b, accs[a]));
                nb_ck_close_to(got, want, 0);
                nb_scope_end(s);
            }
}
END_TEST

START_TEST(test_fake_quantize_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(2, (int64_t[]){2, 3}, NB_F32);
    nb_tensor *s3 = nb_ones(1, (int64_t[]){3}, NB_F32), *z3 = nb_zeros(1, (int64_t[]){3}, NB_I32);
    ck_assert_ptr_null(nb_fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 4));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_fake_quantize_per_tensor_affine(x, 0.1, 9, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_fake_quantize_per_tensor_affine(nb_zeros(1, (int64_t[]){3}, NB_I32), 0.1, 0, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
    ck_assert_ptr_null(nb_fake_quantize_per_channel_affine(x, s3, z3, 2, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_fake_quantize_per_channel_affine(x, s3, z3, -1, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_fake_quantize_per_channel_affine(x, s3, z3, 0, 0, 8)); /* size 2 along axis 0 */
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_ptr_null(nb_fake_quantize_per_channel_affine(x, nb_ones(1, (int64_t[]){3}, NB_I32), z3, 1, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
    ck_assert_ptr_null(nb_fake_quantize_per_channel_affine(x, s3, nb_zeros(1, (int64_t[]){3}, NB_BOOL), 1, 0, 8));
    ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
    /* the learnable ops take float zero points, of one element per tensor */
    ck_assert_ptr_null(nb_fake_quantize_learnable_per_tensor_affine(x, s3, z3, 0, 8, 1.0));
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    nb_tensor *s1 = nb_ones(1, (int64_t[]){1}, NB_F32);
    ck_assert_ptr_null(nb_fake_quantize_learnable_per_tensor_affine(x, s1, nb_zeros(1, (int64_t[]){1}, NB_I32), 0, 8,
                                                                    1.0));
    ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
    ck_assert_ptr_null(nb_fake_quantize_learnable_per_channel_affine(x, s3, s3, -1, 0, 8, 1.0));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    /* PyTorch's learnable backward needs 0 in the range: the forward runs, the backward fails */
    nb_tensor *xg = nb_ones(1, (int64_t[]){3}, NB_F32), *sg = nb_ones(1, (int64_t[]){1}, NB_F32),
              *zg = nb_full(1, (int64_t[]){1}, 2, NB_F32);
    ck_assert_int_eq(nb_set_requires_grad(sg, true), NB_OK);
    nb_tensor *y = nb_fake_quantize_learnable_per_tensor_affine(xg, sg, zg, 1, 8, 1.0);
    NB_CK_NOTNULL(y);
    ck_assert_int_eq(nb_backward(nb_sum(y, NULL, 0, false)), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* quantize_per_tensor by hand: x / 0.5 holds ties (to even), values past
 * both ends of each dtype's range, NaN (the minimum), +-inf; int32 keeps
 * levels float32 could not; dequantize returns (q - z) * s. Every device. */
START_TEST(test_quantize_per_tensor_by_hand) {
    static const double x[10] = {-2.25, -1.25, 0.25, 0.75, 1.25, 100, -100, NAN, INFINITY, -INFINITY};
    static const double want8[10] = {-3, -1, 1, 3, 3, 127, -128, -128, 127, -128};   /* zp 1 */
    static const double wantu8[10] = {6, 8, 10, 12, 12, 210, 0, 0, 255, 0};         /* zp 10 */
    static const double want16[10] = {-4, -2, 0, 2, 2, 200, -200, -32768, 32767, -32768};
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 2; k++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *xt = nb_to_device(vec(10, k ? NB_F64 : NB_F32, x, true), devs[d]);
            nb_tensor *q = nb_quantize_per_tensor(xt, 0.5, 1, NB_I8);
            NB_CK_NOTNULL(q);
            ck_assert_int_eq(nb_dtype_of(q), NB_I8);
            ck_assert(!nb_requires_grad(q));
            nb_ck_close(q, want8, 10, 0, 0);
            nb_ck_close(nb_quantize_per_tensor(xt, 0.5, 10, NB_U8), wantu8, 10, 0, 0);
            nb_ck_close(nb_quantize_per_tensor(xt, 0.5, 0, NB_I16), want16, 10, 0, 0);
            nb_tensor *dq = nb_dequantize_per_tensor(q, 0.5, 1);
            ck_assert_int_eq(nb_dtype_of(dq), NB_F32);
            double back[10];
            for (int i = 0; i < 10; i++) back[i] = (want8[i] - 1) * 0.5;
            nb_ck_close(dq, back, 10, 0, 0);
            /* int32: 2^24 + 1 levels are exact (float32 would round them) */
            nb_tensor *big = nb_to_device(vec(2, NB_F64, (double[]){16777217, -16777217}, false), devs[d]);
            nb_ck_close(nb_quantize_per_tensor(big, 1, 0, NB_I32), (double[]){16777217, -16777217}, 2, 0, 0);
            /* bfloat16 x is read as float32 */
            nb_tensor *xb = nb_to_dtype(nb_to_device(vec(3, NB_F32, (double[]){0.25, -0.75, 3}, false), devs[d]),
                                        NB_BF16);
            nb_ck_close(nb_quantize_per_tensor(xb, 0.5, 0, NB_I8), (double[]){0, -2, 6}, 3, 0, 0);
            nb_scope_end(s);
        }
}
END_TEST

/* per channel: x [2, 3] along axis 1 with scales [0.5, 0.25, 1] and zero
 * points int64 [0, 2, -1] (and float ones: z + x / s rounded together);
 * along axis 0; dequantize per channel inverts it on the levels. */
START_TEST(test_quantize_per_channel_by_hand) {
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_to_device(nb_test_tensor(2, (int64_t[]){2, 3}, NB_F32, (double[]){0.75, 0.3, -2.6, -40, 1, 300}),
                                    devs[d]);
        nb_tensor *sc = nb_to_device(vec(3, NB_F32, (double[]){0.5, 0.25, 1}, false), devs[d]);
        nb_tensor *zi = nb_to_device(vec(3, NB_I64, (double[]){0, 2, -1}, false), devs[d]);
        nb_tensor *q = nb_quantize_per_channel(x, sc, zi, 1, NB_I8);
        /* 1.5 -> 2; 1.2 -> 1, + 2; -2.6 -> -3, - 1; -80 clamps; 4 + 2; 300 - 1 clamps */
        nb_ck_close(q, (double[]){2, 3, -4, -80, 6, 127}, 6, 0, 0);
        nb_ck_close(nb_dequantize_per_channel(q, sc, zi, 1), (double[]){1, 0.25, -3, -40, 1, 128}, 6, 0, 0);
        nb_tensor *zf = nb_to_device(vec(3, NB_F32, (double[]){0.5, 0.5, 0}, false), devs[d]);
        /* rint(0.5 + 1.5) = 2; rint(0.5 + 1.2) = 2; rint(0.5 - 80) = -80 (tie to even); rint(0.5 + 4) = 4 */
        nb_ck_close(nb_quantize_per_channel(x, sc, zf, 1, NB_I8), (double[]){2, 2, -3, -80, 4, 127}, 6, 0, 0);
        nb_tensor *s0 = nb_to_device(vec(2, NB_F32, (double[]){0.5, 2}, false), devs[d]);
        nb_tensor *z0 = nb_to_device(vec(2, NB_I32, (double[]){0, 0}, false), devs[d]);
        nb_ck_close(nb_quantize_per_channel(x, s0, z0, 0, NB_U8), (double[]){2, 1, 0, 0, 0, 150}, 6, 0, 0);
        nb_scope_end(s);
    }
}
END_TEST

START_TEST(test_quantize_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = vec(3, NB_F32, (double[]){0, 1, 2}, false);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 0.1, 0, NB_F32), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 0.1, 0, NB_I64), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 0, 0, NB_I8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_tensor(x, NAN, 0, NB_I8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 1e300, 0, NB_I8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 1e-50, 0, NB_I8), NB_ERR_INVALID_ARG); /* 0 in float32 */
    NB_CK_FAILS(nb_quantize_per_tensor(x, 1e-40, 0, NB_I8), NB_ERR_INVALID_ARG); /* 1 / s is inf */
    NB_CK_FAILS(nb_quantize_per_tensor(x, 0.1, 128, NB_I8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_tensor(x, 0.1, -1, NB_U8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_tensor(vec(3, NB_I32, (double[]){0, 1, 2}, false), 0.1, 0, NB_I8), NB_ERR_DTYPE);
    nb_tensor *sc = vec(3, NB_F32, (double[]){1, 1, 1}, false), *z = vec(3, NB_I64, (double[]){0, 0, 0}, false);
    NB_CK_FAILS(nb_quantize_per_channel(x, sc, z, 1, NB_I8), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_quantize_per_channel(x, vec(2, NB_F32, (double[]){1, 1}, false), z, 0, NB_I8), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_dequantize_per_tensor(x, 0.1, 0), NB_ERR_DTYPE);
    nb_tensor *q8 = nb_quantize_per_tensor(x, 0.1, 0, NB_I8);
    NB_CK_FAILS(nb_dequantize_per_tensor(q8, 0.1, 200), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dequantize_per_tensor(q8, -1, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dequantize_per_channel(nb_quantize_per_channel(x, sc, z, 0, NB_I8), sc, z, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* int8_weight_quantize by hand: row scales amax / 127.5, levels rounded
 * to even; a zero row gets the eps scale and zero levels. */
START_TEST(test_int8_weight_quantize_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_tensor(2, (int64_t[]){3, 4}, NB_F32,
                                  (double[]){1.275, -2.55, 0.01, 2.55, 0, 0, 0, 0, -1, 0.5, 0.25, 1.0 / 255});
    nb_tensor *q, *sc;
    NB_CK_OK(nb_int8_weight_quantize(w, &q, &sc));
    ck_assert_int_eq(nb_dtype_of(q), NB_I8);
    ck_assert_int_eq(nb_dtype_of(sc), NB_F32);
    nb_ck_close(sc, (double[]){0.02, 0x1p-23, 1 / 127.5}, 3, 1e-9, 1e-6);
    /* row 0: 63.75 -> 64, -127.5 -> -128 (ties to even), 0.5 -> 0, 127.5 -> 128 clamped to 127; row 2:
     * 1.0f / (1 / 127.5f) is 127.49999 in float32, so -1 -> -127 (torchao's 1.0 / scale too) */
    nb_ck_close(q, (double[]){64, -128, 0, 127, 0, 0, 0, 0, -127, 64, 32, 0}, 12, 0, 0);
    NB_CK_FAILS(nb_int8_weight_quantize(vec(3, NB_F32, (double[]){0, 1, 2}, false), &q, &sc) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_null(q);
    nb_scope_end(s);
}
END_TEST

/* linear_int8 against the float64 formula x (q s)^T + b: the kernel (few
 * rows, no grad) and the matmul path (many rows, or a gradient), in
 * float32, float64 and bfloat16, on every device; twice the same bits; x
 * and bias get linear's gradients. K = 40 (not a multiple of 16: CUDA's
 * scalar path) and 64 (its vector path); then K = 4096 (slices across
 * warps, unrolled loads) and 4100, with 5 and 16 rows (several launches of
 * 4 rows). */
START_TEST(test_linear_int8_matches_formula) {
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int kk = 0; kk < 2; kk++) {
            const int64_t K = kk ? 64 : 40, N = 7;
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(31 + (uint64_t)kk);
            nb_tensor *w = nb_to_device(nb_randn(2, (int64_t[]){N, K}, NB_F32, &g), devs[d]);
            nb_tensor *b = nb_to_device(nb_randn(1, (int64_t[]){N}, NB_F32, &g), devs[d]);
            nb_tensor *q, *sc;
            NB_CK_OK(nb_int8_weight_quantize(w, &q, &sc));
            nb_tensor *wd = nb_mul(nb_to_dtype(q, NB_F64), nb_reshape(nb_to_dtype(sc, NB_F64), 2, (int64_t[]){N, 1}));
            for (int rows = 1; rows <= 20; rows += 19) { /* 1 row: the kernel; 20: the matmul */
                nb_tensor *x = nb_to_device(nb_randn(2, (int64_t[]){rows, K}, NB_F32, &g), devs[d]);
                nb_tensor *want = nb_linear(nb_to_dtype(x, NB_F64), wd, nb_to_dtype(b, NB_F64));
                nb_tensor *y = nb_linear_int8(x, q, sc, b);
                NB_CK_NOTNULL(y);
                ck_assert_int_eq(nb_dtype_of(y), NB_F32);
                nb_ck_close_to(y, want, 1e-4);
                nb_ck_close_to(nb_linear_int8(x, q, sc, b), y, 0); /* deterministic */
                nb_ck_close_to(nb_linear_int8(nb_to_dtype(x, NB_F64), q, sc, nb_to_dtype(b, NB_F64)), want, 1e-12);
                nb_tensor *yb = nb_linear_int8(nb_to_dtype(x, NB_BF16), q, sc, nb_to_dtype(b, NB_BF16));
                ck_assert_int_eq(nb_dtype_of(yb), NB_BF16);
                nb_ck_close_to(yb, want, 0.15);
                /* 3-d x keeps its leading dims */
                nb_ck_shape(nb_linear_int8(nb_reshape(x, 3, (int64_t[]){1, rows, K}), q, sc, NULL), 3,
                            (int64_t[]){1, rows, N});
            }
            /* gradients: x and bias as linear's with the dequantized weight */
            nb_tensor *x = nb_to_device(nb_randn(2, (int64_t[]){2, K}, NB_F64, &g), devs[d]);
            nb_tensor *bd = nb_to_dtype(b, NB_F64);
            NB_CK_OK(nb_set_requires_grad(x, true));
            NB_CK_OK(nb_set_requires_grad(bd, true));
            NB_CK_OK(nb_backward(nb_sum(nb_linear_int8(x, q, sc, bd), NULL, 0, false)));
            nb_tensor *gx = nb_tensor_grad(x), *gb = nb_tensor_grad(bd);
            nb_tensor *x2 = nb_detach(x), *b2 = nb_detach(bd);
            NB_CK_OK(nb_set_requires_grad(x2, true));
            NB_CK_OK(nb_set_requires_grad(b2, true));
            NB_CK_OK(nb_backward(nb_sum(nb_linear(x2, wd, b2), NULL, 0, false)));
            nb_ck_close_to(gx, nb_tensor_grad(x2), 1e-12);
            nb_ck_close_to(gb, nb_tensor_grad(b2), 0);
            nb_scope_end(s);
        }
    for (int d = 0; d < nd; d++)
        for (int kk = 0; kk < 2; kk++) {
            const int64_t K = kk ? 4100 : 4096, N = 64;
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(41 + (uint64_t)kk);
            nb_tensor *w = nb_to_device(nb_randn(2, (int64_t[]){N, K}, NB_F32, &g), devs[d]), *q, *sc;
            NB_CK_OK(nb_int8_weight_quantize(w, &q, &sc));
            nb_tensor *wd = nb_mul(nb_to_dtype(q, NB_F64), nb_reshape(nb_to_dtype(sc, NB_F64), 2, (int64_t[]){N, 1}));
            for (int rows = 5; rows <= 16; rows += 11) {
                nb_tensor *x = nb_to_device(nb_randn(2, (int64_t[]){rows, K}, NB_F32, &g), devs[d]);
                nb_tensor *want = nb_linear(nb_to_dtype(x, NB_F64), wd, NULL);
                nb_ck_close_to(nb_linear_int8(x, q, sc, NULL), want, 2e-3);
                nb_ck_close_to(nb_linear_int8(nb_to_dtype(x, NB_F64), q, sc, NULL), want, 1e-10);
            }
            nb_scope_end(s);
        }
}
END_TEST

/* Under autocast x is cast as a Linear's: the result has the region's
 * dtype on both paths, and float16 with outputs far above 65504 / 127
 * times the weights' amax stays finite (the unscaled int8 sums would
 * overflow float16). */
START_TEST(test_linear_int8_autocast) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(61);
    nb_tensor *w = nb_mul_scalar(nb_randn(2, (int64_t[]){8, 256}, NB_F32, &g), 1e-3), *q, *sc;
    NB_CK_OK(nb_int8_weight_quantize(w, &q, &sc));
    for (int k = 0; k < 2; k++) {
        nb_dtype ac = k ? NB_F16 : NB_BF16;
        for (int rows = 1; rows <= 20; rows += 19) {
            nb_tensor *x = nb_mul_scalar(nb_randn(2, (int64_t[]){rows, 256}, NB_F32, &g), k ? 3000 : 1);
            nb_tensor *want = nb_linear_int8(x, q, sc, NULL); /* float32, outside the region */
            NB_CK_OK(nb_autocast_begin(NB_CPU, ac));
            nb_tensor *y = nb_linear_int8(x, q, sc, NULL);
            NB_CK_OK(nb_autocast_end(NB_CPU));
            NB_CK_NOTNULL(y);
            ck_assert_int_eq(nb_dtype_of(y), ac);
            double *v = nb_test_values_of(y), *u = nb_test_values_of(want);
            for (int64_t i = 0; i < nb_numel(y); i++) {
                ck_assert_msg(isfinite(v[i]), "autocast %s, %d rows: element %lld is %g", nb_dtype_name(ac), rows,
                              (long long)i, v[i]);
                ck_assert_msg(fabs(v[i] - u[i]) <= 0.02 * (fabs(u[i]) + 1) + (k ? 2.0 : 0.05), "%g vs %g", v[i], u[i]);
            }
            free(v), free(u);
        }
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_linear_int8_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(2, (int64_t[]){2, 4}, NB_F32), *w = nb_ones(2, (int64_t[]){3, 4}, NB_F32), *q, *sc;
    NB_CK_OK(nb_int8_weight_quantize(w, &q, &sc));
    NB_CK_FAILS(nb_linear_int8(x, w, sc, NULL), NB_ERR_DTYPE);                            /* float weight */
    NB_CK_FAILS(nb_linear_int8(nb_zeros(2, (int64_t[]){2, 5}, NB_F32), q, sc, NULL), NB_ERR_SHAPE); /* K */
    NB_CK_FAILS(nb_linear_int8(x, q, nb_ones(1, (int64_t[]){2}, NB_F32), NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linear_int8(x, q, sc, nb_ones(1, (int64_t[]){4}, NB_F32)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_linear_int8(nb_zeros(2, (int64_t[]){2, 4}, NB_I32), q, sc, NULL), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_linear_int8(x, q, nb_ones(1, (int64_t[]){3}, NB_I32), NULL), NB_ERR_DTYPE); /* int scales */
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_quantize(void) {
    Suite *s = suite_create("ops_quantize");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_fake_quantize_per_tensor_by_hand);
    tcase_add_test(tc, test_fake_quantize_per_channel_by_hand);
    tcase_add_test(tc, test_fake_quantize_learnable_gradients_by_hand);
    tcase_add_test(tc, test_fake_quantize_learnable_zero_point_rounding);
    tcase_add_test(tc, test_fake_quantize_learnable_per_channel_is_per_tensor_per_column);
    tcase_add_test(tc, test_fake_quantize_16bit);
    tcase_add_test(tc, test_fake_quantize_devices_match_cpu);
    tcase_add_test(tc, test_fake_quantize_errors);
    tcase_add_test(tc, test_bitnet_quant_by_hand);
    tcase_add_test(tc, test_bitnet_pack_layout);
    tcase_add_test(tc, test_bitnet_linear_matches_fake_quant);
    tcase_add_test(tc, test_bitnet_linear_devices_match_cpu);
    tcase_add_test(tc, test_quantize_per_tensor_by_hand);
    tcase_add_test(tc, test_quantize_per_channel_by_hand);
    tcase_add_test(tc, test_quantize_errors);
    tcase_add_test(tc, test_int8_weight_quantize_by_hand);
    tcase_add_test(tc, test_linear_int8_matches_formula);
    tcase_add_test(tc, test_linear_int8_errors);
    tcase_add_test(tc, test_linear_int8_autocast);
    suite_add_tcase(s, tc);
    return s;
}
