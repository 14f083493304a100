/* test_ops_attention_cuda.c - scaled_dot_product_attention on a CUDA
 * device against the CPU (test_ops_attention.c holds the rest): the long-
 * sequence tiled kernels on the same bits; bfloat16/float16 through cuDNN's
 * fused flash attention, without dropout, with cuDNN's own generator (the
 * default) and with nabla's keep mask (NB_CUDA_ATTENTION_DROPOUT=philox,
 * or an additive mask that requires grad); the few-rows decode path. tests/cuda/run.sh runs the suite once
 * more with NB_CUDA_ATTENTION=cudnn, where a decline by cuDNN is an error.
 * Every test returns at once without a CUDA device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* The CUDA long-sequence path (B*L*S above the score-matrix path's 2^26:
 * the tiled kernels, k_flash_fwd64 at head size 64 in float32) against the
 * CPU on the same bits: causal with dropout (the same Philox masks), a bool
 * mask, and neither with S != L (partial key tiles and query blocks).
 * Skipped without a CUDA device. */
START_TEST(test_cuda_long_sequence_matches_cpu) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, L = 5800, S = 5801, E = 64;
    nb_tensor *q = nb_test_randn(NB_SHAPE(B, 1, L, E), NB_F32, 11), *k = nb_test_randn(NB_SHAPE(B, 1, S, E), NB_F32, 12);
    nb_tensor *v = nb_test_randn(NB_SHAPE(B, 1, S, E), NB_F32, 13);
    nb_tensor *qc = nb_to_device(q, NB_CUDA(0)), *kc = nb_to_device(k, NB_CUDA(0)), *vc = nb_to_device(v, NB_CUDA(0));
    nb_tensor *mask = nb_test_bool_mask(L, S, 5, NULL), *maskc = nb_to_device(mask, NB_CUDA(0));
    for (int c = 0; c < 3; c++) {
        nb_generator g1 = nb_generator_new(7), g2 = g1;
        nb_sdpa_options o = {.is_causal = c == 0, .dropout_p = c == 0 ? 0.1 : 0, .attn_mask = c == 1 ? mask : NULL};
        nb_tensor *kk = c == 0 ? nb_narrow(k, 2, 0, L) : k, *vv = c == 0 ? nb_narrow(v, 2, 0, L) : v;
        nb_tensor *kkc = c == 0 ? nb_narrow(kc, 2, 0, L) : kc, *vvc = c == 0 ? nb_narrow(vc, 2, 0, L) : vc;
        o.gen = &g1;
        nb_tensor *want = nb_scaled_dot_product_attention(q, kk, vv, o);
        o.gen = &g2, o.attn_mask = c == 1 ? maskc : NULL;
        nb_tensor *got = nb_to_device(nb_scaled_dot_product_attention(qc, nb_contiguous(kkc), nb_contiguous(vvc), o), NB_CPU);
        nb_ck_close_to(got, want, 2e-4);
    }
    /* bfloat16 beyond the score path: the float32 tiled kernel on float32 copies */
    nb_tensor *qb = nb_to_dtype(q, NB_BF16), *kb = nb_to_dtype(k, NB_BF16), *vb = nb_to_dtype(v, NB_BF16);
    nb_tensor *want = nb_scaled_dot_product_attention(nb_to_dtype(qb, NB_F32), nb_to_dtype(kb, NB_F32),
                                                      nb_to_dtype(vb, NB_F32), (nb_sdpa_options){.attn_mask = mask});
    nb_tensor *got = nb_scaled_dot_product_attention(nb_to_device(qb, NB_CUDA(0)), nb_to_device(kb, NB_CUDA(0)),
                                                     nb_to_device(vb, NB_CUDA(0)), (nb_sdpa_options){.attn_mask = maskc});
    nb_ck_close_to(nb_to_device(nb_to_dtype(got, NB_F32), NB_CPU), want, 1e-2);
    nb_scope_end(s);
}
END_TEST

/* bfloat16 and float16 attention beyond the decode path's rows (on CUDA,
 * cuDNN's fused flash attention; tests/cuda/run.sh runs this suite once
 * more with NB_CUDA_ATTENTION=cudnn, where a decline is an error) against
 * float32 on the CPU on the same rounded values: q, k, v as head views of
 * [B, L, H, E] projections, causal with S == L and plain with S != L, and
 * grouped-query heads under causality; forward, the backward that reads its
 * lse, and the same bits on a second run. Skipped without a CUDA device. */
START_TEST(test_cuda_16bit_fused_matches_float32) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, H = 4, L = 200, E = 64;
    nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int di = 0; di < 2; di++)
        for (int mode = 0; mode < 3; mode++) {
            const int64_t S = mode == 1 ? 231 : L, Hk = mode == 2 ? 2 : H;
            const int64_t lens[3] = {L, S, S}, heads[3] = {H, Hk, Hk};
            nb_tensor *x16[3], *x32[3];
            for (int i = 0; i < 3; i++) { /* [B, len, h, E] rounded, then [B, h, len, E] views */
                nb_tensor *r = nb_to_dtype(nb_test_randn(NB_SHAPE(B, lens[i], heads[i], E), NB_F32, 60 + (uint64_t)i), dts[di]);
                x16[i] = nb_detach(nb_to_device(r, NB_CUDA(0)));
                x32[i] = nb_detach(nb_to_dtype(r, NB_F32));
                NB_CK_OK(nb_set_requires_grad(x16[i], true));
                NB_CK_OK(nb_set_requires_grad(x32[i], true));
            }
            nb_sdpa_options o = {.is_causal = mode != 1, .enable_gqa = mode == 2};
            nb_tensor *w = nb_test_randn(NB_SHAPE(B, H, L, E), NB_F32, 9), *out[2];
            for (int t = 0; t < 2; t++) {
                nb_tensor **x = t ? x32 : x16;
                out[t] = nb_scaled_dot_product_attention(nb_transpose(x[0], 1, 2), nb_transpose(x[1], 1, 2),
                                                         nb_transpose(x[2], 1, 2), o);
                NB_CK_NOTNULL(out[t]);
                nb_tensor *wt = t ? w : nb_to_device(w, NB_CUDA(0));
                NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(out[t], NB_F32), wt), NULL, 0, false)));
            }
            nb_ck_close_to(nb_to_device(nb_to_dtype(out[0], NB_F32), NB_CPU), out[1], 2e-2);
            for (int i = 0; i < 3; i++)
                nb_ck_close_to(nb_to_device(nb_to_dtype(nb_tensor_grad(x16[i]), NB_F32), NB_CPU),
                               nb_tensor_grad(x32[i]), 6e-2);
            nb_tensor *again = nb_scaled_dot_product_attention(nb_transpose(nb_detach(x16[0]), 1, 2),
                                                               nb_transpose(nb_detach(x16[1]), 1, 2),
                                                               nb_transpose(nb_detach(x16[2]), 1, 2), o);
            nb_ck_bitwise(again, out[0]); /* the same bits on a second run */
        }
    nb_scope_end(s);
}
END_TEST

/* bfloat16 and float16 attention with dropout beyond the decode path's
 * rows, by default (on CUDA, cuDNN's fused flash attention forward and
 * backward with nabla's own keep mask as a tensor (NB_CUDA_ATTENTION_DROPOUT=philox); NB_CUDA_ATTENTION=cudnn
 * makes a decline an error) against
 * float32 from the same generator state, so the same Philox mask: on the CPU, causal with S == L and plain with S != L
 * and an odd S; on the GPU (the float32 tiled kernels), 68 causal
 * 1024 x 1021 matrices, whose masks pass 2^26 weights (cuDNN runs the
 * batch in two chunks); forward and every gradient (to rounding: the
 * backward's D with dropout is where cuDNN's engine departs from its
 * graph), the same bits, forward and gradients, on a second run from
 * the same state, and q's gradient alone (the score path's backward after
 * cuDNN's forward). Skipped without a CUDA device. */
START_TEST(test_cuda_16bit_fused_dropout_matches_float32) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    ck_assert_int_eq(setenv("NB_CUDA_ATTENTION_DROPOUT", "philox", 1), 0); /* nabla's mask, as the CPU's */
    nb_scope *s = nb_scope_begin();
    const int64_t E = 64;
    nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int di = 0; di < 2; di++)
        for (int mode = 0; mode < 3; mode++) {
            if (mode == 2 && di == 1) continue; /* the chunked case once */
            nb_scope *it = nb_scope_begin();
            const int64_t B = mode == 2 ? 4 : 2, H = mode == 2 ? 17 : 3, L = mode == 2 ? 1024 : 160;
            const int64_t S = mode == 1 ? 203 : mode == 2 ? 1021 : L, lens[3] = {L, S, S};
            const nb_device ref = mode == 2 ? NB_CUDA(0) : NB_CPU;
            nb_tensor *x16[3], *x32[3];
            for (int i = 0; i < 3; i++) { /* [B, len, H, E] rounded, then [B, H, len, E] views */
                nb_tensor *r = nb_to_dtype(nb_test_randn(NB_SHAPE(B, lens[i], H, E), NB_F32, 80 + (uint64_t)i), dts[di]);
                x16[i] = nb_detach(nb_to_device(r, NB_CUDA(0)));
                x32[i] = nb_detach(nb_to_device(nb_to_dtype(r, NB_F32), ref));
                NB_CK_OK(nb_set_requires_grad(x16[i], true));
                NB_CK_OK(nb_set_requires_grad(x32[i], true));
            }
            nb_generator g0 = nb_generator_new(23 + (uint64_t)mode), g[3] = {g0, g0, g0};
            nb_sdpa_options o = {.is_causal = mode != 1, .dropout_p = mode == 1 ? 0.25 : 0.1};
            nb_tensor *w = nb_test_randn(NB_SHAPE(B, H, L, E), NB_F32, 19), *out[2];
            for (int t = 0; t < 2; t++) {
                nb_tensor **x = t ? x32 : x16;
                o.gen = &g[t];
                out[t] = nb_scaled_dot_product_attention(nb_transpose(x[0], 1, 2), nb_transpose(x[1], 1, 2),
                                                         nb_transpose(x[2], 1, 2), o);
                NB_CK_NOTNULL(out[t]);
                nb_tensor *wt = nb_to_device(w, t ? ref : NB_CUDA(0));
                NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(out[t], NB_F32), wt), NULL, 0, false)));
            }
            nb_ck_close_to(nb_to_device(nb_to_dtype(out[0], NB_F32), NB_CPU), nb_to_device(out[1], NB_CPU), 2e-2);
            for (int i = 0; i < 3; i++)
                nb_ck_close_to(nb_to_device(nb_to_dtype(nb_tensor_grad(x16[i]), NB_F32), NB_CPU),
                               nb_to_device(nb_tensor_grad(x32[i]), NB_CPU), 6e-2);
            o.gen = &g[2]; /* the same bits from the same generator state, gradients too */
            nb_tensor *y[3];
            for (int i = 0; i < 3; i++) {
                y[i] = nb_detach(x16[i]);
                NB_CK_OK(nb_set_requires_grad(y[i], true));
            }
            nb_tensor *again = nb_scaled_dot_product_attention(nb_transpose(y[0], 1, 2), nb_transpose(y[1], 1, 2),
                                                               nb_transpose(y[2], 1, 2), o);
            nb_ck_bitwise(again, out[0]);
            NB_CK_OK(nb_backward(
                nb_sum(nb_mul(nb_to_dtype(again, NB_F32), nb_to_device(w, NB_CUDA(0))), NULL, 0, false)));
            for (int i = 0; i < 3; i++) nb_ck_bitwise(nb_tensor_grad(y[i]), nb_tensor_grad(x16[i]));
            if (mode < 2) { /* q's gradient alone: cuDNN's forward, the score path's backward, the same mask */
                nb_tensor *q1 = nb_detach(x16[0]);
                NB_CK_OK(nb_set_requires_grad(q1, true));
                o.gen = &g0;
                nb_tensor *k1 = nb_transpose(nb_detach(x16[1]), 1, 2), *v1 = nb_transpose(nb_detach(x16[2]), 1, 2);
                nb_tensor *o1 = nb_scaled_dot_product_attention(nb_transpose(q1, 1, 2), k1, v1, o);
                NB_CK_OK(nb_backward(
                    nb_sum(nb_mul(nb_to_dtype(o1, NB_F32), nb_to_device(w, NB_CUDA(0))), NULL, 0, false)));
                nb_ck_close_to(nb_to_device(nb_to_dtype(nb_tensor_grad(q1), NB_F32), NB_CPU),
                               nb_to_device(nb_tensor_grad(x32[0]), NB_CPU), 6e-2);
            }
            nb_scope_end(it);
        }
    nb_scope_end(s);
    ck_assert_int_eq(unsetenv("NB_CUDA_ATTENTION_DROPOUT"), 0);
}
END_TEST

/* The dropped weights P * Z / (1 - p) of a [B, H, L, S] attention: its
 * output with v the identity (Ev == S), in float32 on the CPU. */
static nb_tensor *dropped_weights(nb_tensor *q, nb_tensor *k, nb_tensor *eye, nb_sdpa_options o) {
    nb_tensor *w = nb_scaled_dot_product_attention(nb_detach(q), nb_detach(k), eye, o);
    NB_CK_NOTNULL(w);
    return nb_to_device(nb_to_dtype(w, NB_F32), NB_CPU);
}

/* Asserts got (any device and dtype) is within atol of want element by
 * element, naming what differs and where. */
static void ck_near(nb_tensor *got, nb_tensor *want, double atol, const char *what, const char *where) {
    NB_CK_NOTNULL(got);
    NB_CK_NOTNULL(want);
    ck_assert_int_eq(nb_numel(got), nb_numel(want));
    double *g = nb_test_values_of(got), *w = nb_test_values_of(want);
    int64_t worst = 0;
    for (int64_t i = 1; i < nb_numel(got); i++)
        if (fabs(g[i] - w[i]) > fabs(g[worst] - w[worst]) || isnan(g[i])) worst = i;
    const double gw = g[worst], ww = w[worst];
    free(g);
    free(w);
    ck_assert_msg(fabs(gw - ww) <= atol, "%s, %s: element %lld: %g, want %g", what, where, (long long)worst, gw, ww);
}

/* bfloat16 and float16 attention with dropout from cuDNN's generator
 * (the default): with v the identity the output is the dropped
 * weights P' themselves, so the keep mask Z is read off it; the share kept
 * near 1 - p; the kept weights equal float32 softmax on the CPU over 1 - p;
 * Z is not nabla's keep mask (NB_CUDA_ATTENTION_DROPOUT=philox, from the
 * same generator state, draws another one), so cuDNN's generator ran. Then, from
 * the same state, a random v and an upstream gradient that is 1 where row
 * i meets column i: v's gradient P'^T dO is the backward's own P'
 * transposed, equal to the forward's; the output and every gradient
 * against float32 on the CPU through that Z; the same bits on a second
 * run; and q's gradient alone (k's and v's go to scratch: no other path
 * has the mask). Causal with S == L, plain with S != L. */
START_TEST(test_cuda_16bit_cudnn_dropout) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    ck_assert_int_eq(unsetenv("NB_CUDA_ATTENTION_DROPOUT"), 0); /* the default */
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, H = 3, E = 128, S = 128;
    const double p = 0.2;
    double *id = calloc((size_t)(B * S * H * S), sizeof(double));
    ck_assert_ptr_nonnull(id);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < S; j++)
            for (int64_t h = 0; h < H; h++) id[((b * S + j) * H + h) * S + j] = 1;
    nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int di = 0; di < 2; di++)
        for (int mode = 0; mode < 2; mode++) {
            nb_scope *it = nb_scope_begin();
            const char *where = mode ? (di ? "float16, plain" : "bfloat16, plain")
                                     : (di ? "float16, causal" : "bfloat16, causal");
            const int64_t L = mode ? 96 : S, lens[3] = {L, S, S};
            nb_tensor *x16[3], *x32[3], *h16[3], *h32[3];
            for (int i = 0; i < 3; i++) { /* [B, len, H, E] rounded, then [B, H, len, E] views */
                nb_tensor *r = nb_to_dtype(nb_test_randn(NB_SHAPE(B, lens[i], H, E), NB_F32, 120 + (uint64_t)i), dts[di]);
                x16[i] = nb_detach(nb_to_device(r, NB_CUDA(0)));
                x32[i] = nb_detach(nb_to_dtype(r, NB_F32));
                NB_CK_OK(nb_set_requires_grad(x16[i], true));
                NB_CK_OK(nb_set_requires_grad(x32[i], true));
                h16[i] = nb_transpose(x16[i], 1, 2), h32[i] = nb_transpose(x32[i], 1, 2);
            }
            /* the identity [B, S, H, S] as v's heads view, laid out as h16[2] (one plan for every call) */
            nb_tensor *id32 = nb_test_tensor(NB_SHAPE(B, S, H, S), NB_F32, id), *eye32 = nb_transpose(id32, 1, 2);
            nb_tensor *eye = nb_transpose(nb_to_device(nb_to_dtype(id32, dts[di]), NB_CUDA(0)), 1, 2);
            nb_generator g0 = nb_generator_new(31 + (uint64_t)mode), g[5] = {g0, g0, g0, g0, g0};
            nb_sdpa_options o = {.is_causal = mode == 0, .dropout_p = p, .gen = &g[0]};
            nb_tensor *w = dropped_weights(h16[0], h16[1], eye, o);
            nb_tensor *keep = nb_to_dtype(nb_ne_scalar(w, 0), NB_F32);
            nb_tensor *sc = nb_mul_scalar(nb_matmul(h32[0], nb_transpose(h32[1], -1, -2)), 1 / sqrt((double)E));
            if (mode == 0) sc = nb_masked_fill(sc, nb_ne_scalar(nb_tril(nb_full(NB_SHAPE(L, S), 1, NB_F32), 0), 1),
                                               -INFINITY);
            nb_tensor *wref = nb_mul_scalar(nb_mul(nb_softmax(sc, -1), keep), 1 / (1 - p));
            const double open = mode == 0 ? (double)(B * H * S * (S + 1) / 2) : (double)(B * H * L * S);
            const double kept = nb_item(nb_sum(keep, NULL, 0, false)) / open;
            ck_assert_msg(fabs(kept - (1 - p)) < 0.02, "%s: %g of the weights kept, want about %g", where, kept, 1 - p);
            ck_near(w, nb_detach(wref), 2e-2, "the forward's dropped weights", where);
            ck_assert_int_eq(setenv("NB_CUDA_ATTENTION_DROPOUT", "philox", 1), 0); /* nabla's mask */
            o.gen = &g[1];
            nb_tensor *wp = dropped_weights(h16[0], h16[1], eye, o);
            ck_assert_int_eq(unsetenv("NB_CUDA_ATTENTION_DROPOUT"), 0);
            const double differ = nb_item(nb_sum(nb_ne(nb_ne_scalar(wp, 0), nb_ne_scalar(w, 0)), NULL, 0, false));
            ck_assert_msg(differ > 0.05 * open, "%s: cuDNN's keep mask is nabla's (%g of %g weights differ)", where,
                          differ, open);
            /* a random v from the same state, dO 1 where row i meets column i */
            nb_tensor *dO = nb_narrow(eye32, 2, 0, L);
            o.gen = &g[2];
            nb_tensor *out = nb_scaled_dot_product_attention(h16[0], h16[1], h16[2], o);
            NB_CK_NOTNULL(out);
            NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(out, NB_F32), nb_to_device(dO, NB_CUDA(0))), NULL, 0,
                                        false)));
            nb_tensor *want = nb_matmul(wref, h32[2]);
            NB_CK_OK(nb_backward(nb_sum(nb_mul(want, dO), NULL, 0, false)));
            ck_near(out, want, 2e-2, "the output from the same state", where);
            nb_tensor *dv_t = nb_narrow(nb_transpose(nb_tensor_grad(x16[2]), 1, 2), 3, 0, L); /* [B, H, S, L] */
            ck_near(nb_transpose(dv_t, 2, 3), w, 2e-2, "the backward's dropped weights (v's gradient)", where);
            const char *names[3] = {"q's gradient", "k's gradient", "v's gradient"};
            for (int i = 0; i < 3; i++) ck_near(nb_tensor_grad(x16[i]), nb_tensor_grad(x32[i]), 6e-2, names[i], where);
            nb_tensor *y[3]; /* the same bits from the same state, gradients too */
            for (int i = 0; i < 3; i++) {
                y[i] = nb_detach(x16[i]);
                NB_CK_OK(nb_set_requires_grad(y[i], true));
            }
            o.gen = &g[3];
            nb_tensor *again = nb_scaled_dot_product_attention(nb_transpose(y[0], 1, 2), nb_transpose(y[1], 1, 2),
                                                               nb_transpose(y[2], 1, 2), o);
            nb_ck_bitwise(again, out);
            NB_CK_OK(nb_backward(
                nb_sum(nb_mul(nb_to_dtype(again, NB_F32), nb_to_device(dO, NB_CUDA(0))), NULL, 0, false)));
            for (int i = 0; i < 3; i++) nb_ck_bitwise(nb_tensor_grad(y[i]), nb_tensor_grad(x16[i]));
            nb_tensor *q1 = nb_detach(x16[0]); /* q's gradient alone */
            NB_CK_OK(nb_set_requires_grad(q1, true));
            o.gen = &g[4];
            nb_tensor *o1 = nb_scaled_dot_product_attention(nb_transpose(q1, 1, 2), nb_detach(h16[1]),
                                                            nb_detach(h16[2]), o);
            NB_CK_OK(nb_backward(
                nb_sum(nb_mul(nb_to_dtype(o1, NB_F32), nb_to_device(dO, NB_CUDA(0))), NULL, 0, false)));
            ck_near(nb_tensor_grad(q1), nb_tensor_grad(x32[0]), 6e-2, "q's gradient alone", where);
            nb_scope_end(it);
        }
    free(id);
    nb_scope_end(s);
    ck_assert_int_eq(unsetenv("NB_CUDA_ATTENTION_DROPOUT"), 0);
}
END_TEST

/* bfloat16 and float16 attention of decode's shape (at most 16 query rows:
 * on CUDA the key-split kernel, with 16-byte vector loads at head sizes 64,
 * 128 and 256) against float32 on the CPU on the same rounded values, K and
 * V as head views of [B, S, H, E] caches: no mask; a static cache's mask
 * (keys past a position closed in every row, with grouped-query heads,
 * whose rows are regrouped over the kv heads); a bool mask per row;
 * top-left causality; an additive mask; a row with every key masked (NaN);
 * the same bits on a second run; and a long cache (chunks of several
 * passes, shared memory past 48 KiB). Skipped without a CUDA device. */
START_TEST(test_cuda_16bit_decode_matches_float32) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, H = 4, S = 1001, Es[3] = {64, 128, 256}, Ls[4] = {1, 4, 5, 16};
    nb_dtype dts[2] = {NB_BF16, NB_F16};
    for (int di = 0; di < 2; di++)
        for (int ei = 0; ei < 3; ei++)
            for (int li = 0; li < 4; li++)
                for (int mode = 0; mode < 6; mode++) {
                    nb_scope *it = nb_scope_begin();
                    const int64_t E = Es[ei], L = Ls[li], Hk = mode == 1 ? H / 2 : H;
                    const int64_t lens[3] = {L, S, S}, heads[3] = {H, Hk, Hk};
                    nb_tensor *x16[3], *x32[3];
                    for (int i = 0; i < 3; i++) {
                        nb_tensor *r = nb_to_dtype(nb_test_randn(NB_SHAPE(B, lens[i], heads[i], E), NB_F32,
                                                         70 + (uint64_t)(i + 3 * mode)), dts[di]);
                        x16[i] = nb_transpose(nb_to_device(r, NB_CUDA(0)), 1, 2);
                        x32[i] = nb_transpose(nb_to_dtype(r, NB_F32), 1, 2);
                    }
                    double *add = malloc(sizeof(double) * (size_t)(L * S));
                    ck_assert_ptr_nonnull(add);
                    nb_tensor *m32 = NULL, *m16 = NULL;
                    if (mode == 1) { /* keys 0 .. 599 of a static cache: one row for every head and query */
                        bool *open = malloc((size_t)S);
                        ck_assert_ptr_nonnull(open);
                        for (int64_t j = 0; j < S; j++) open[j] = j < 600;
                        m32 = nb_from_data(open, NB_SHAPE(1, S), NB_BOOL);
                        free(open);
                    } else if (mode == 2 || mode == 5) {
                        m32 = nb_test_bool_mask(L, S, 13, NULL);
                        if (mode == 5) NB_CK_OK(nb_fill_(nb_select(m32, 0, L - 1), 0)); /* the last row: NaN */
                    } else if (mode == 4) {
                        nb_test_bool_mask(L, S, 17, add);
                        m32 = nb_test_tensor(NB_SHAPE(L, S), NB_F32, add);
                        m16 = nb_to_device(nb_to_dtype(m32, dts[di]), NB_CUDA(0));
                        m32 = nb_to_dtype(nb_to_dtype(m32, dts[di]), NB_F32);
                    }
                    free(add);
                    if (m32 && !m16) m16 = nb_to_device(m32, NB_CUDA(0));
                    nb_sdpa_options o16 = {.is_causal = mode == 3, .attn_mask = m16, .enable_gqa = Hk != H};
                    nb_sdpa_options o32 = o16;
                    o32.attn_mask = m32;
                    nb_tensor *got = nb_scaled_dot_product_attention(x16[0], x16[1], x16[2], o16);
                    nb_tensor *want = nb_scaled_dot_product_attention(x32[0], x32[1], x32[2], o32);
                    nb_ck_close_to(nb_to_device(nb_to_dtype(got, NB_F32), NB_CPU), want, 2e-2);
                    nb_ck_bitwise(nb_scaled_dot_product_attention(x16[0], x16[1], x16[2], o16), got);
                    nb_scope_end(it);
                }
    /* 16 heads of a long cache (34000 keys, 16 rows): chunks of 9 passes, shared memory past 48 KiB */
    nb_tensor *q = nb_to_dtype(nb_test_randn(NB_SHAPE(1, 16, 16, 64), NB_F32, 91), NB_BF16);
    nb_tensor *k = nb_to_dtype(nb_test_randn(NB_SHAPE(1, 16, 34000, 64), NB_F32, 92), NB_BF16);
    nb_tensor *v = nb_to_dtype(nb_test_randn(NB_SHAPE(1, 16, 34000, 64), NB_F32, 93), NB_BF16);
    nb_tensor *want = nb_scaled_dot_product_attention(nb_to_dtype(q, NB_F32), nb_to_dtype(k, NB_F32),
                                                      nb_to_dtype(v, NB_F32), (nb_sdpa_options){0});
    nb_tensor *got = nb_scaled_dot_product_attention(nb_to_device(q, NB_CUDA(0)), nb_to_device(k, NB_CUDA(0)),
                                                     nb_to_device(v, NB_CUDA(0)), (nb_sdpa_options){0});
    nb_ck_close_to(nb_to_device(nb_to_dtype(got, NB_F32), NB_CPU), want, 1e-2);
    nb_scope_end(s);
}
END_TEST


/* Where the default (cuDNN's generator) cannot serve the backward: an
 * additive mask that requires grad takes nabla's keep mask in the
 * forward, so its backward runs and every gradient, the mask's too,
 * matches float32 on the CPU from the same generator state (the same
 * mask); a create_graph backward through a forward that drew with cuDNN's
 * generator fails with NB_ERR_UNSUPPORTED naming it (PyTorch's fused
 * attention kernels have no double backward either). */
START_TEST(test_cuda_16bit_dropout_mask_grad) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    ck_assert_int_eq(unsetenv("NB_CUDA_ATTENTION_DROPOUT"), 0); /* the default */
    nb_scope *s = nb_scope_begin();
    const int64_t B = 2, H = 2, L = 64, S = 80, E = 64;
    const int64_t lens[3] = {L, S, S};
    nb_tensor *x16[3], *x32[3];
    for (int i = 0; i < 3; i++) {
        nb_tensor *r = nb_to_dtype(nb_test_randn(NB_SHAPE(B, H, lens[i], E), NB_F32, 140 + (uint64_t)i), NB_BF16);
        x16[i] = nb_detach(nb_to_device(r, NB_CUDA(0)));
        x32[i] = nb_detach(nb_to_dtype(r, NB_F32));
        NB_CK_OK(nb_set_requires_grad(x16[i], true));
        NB_CK_OK(nb_set_requires_grad(x32[i], true));
    }
    nb_tensor *mr = nb_to_dtype(nb_mul_scalar(nb_test_randn(NB_SHAPE(L, S), NB_F32, 150), 0.5), NB_BF16);
    nb_tensor *m32 = nb_detach(nb_to_dtype(mr, NB_F32)), *m16 = nb_detach(nb_to_device(mr, NB_CUDA(0)));
    NB_CK_OK(nb_set_requires_grad(m32, true));
    NB_CK_OK(nb_set_requires_grad(m16, true));
    nb_tensor *w = nb_test_randn(NB_SHAPE(B, H, L, E), NB_F32, 151);
    nb_generator g0 = nb_generator_new(41), g[3] = {g0, g0, g0};
    nb_sdpa_options o = {.dropout_p = 0.2, .attn_mask = m16, .gen = &g[0]};
    nb_tensor *out = nb_scaled_dot_product_attention(x16[0], x16[1], x16[2], o);
    NB_CK_NOTNULL(out);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(out, NB_F32), nb_to_device(w, NB_CUDA(0))), NULL, 0, false)));
    o.attn_mask = m32, o.gen = &g[1];
    nb_tensor *want = nb_scaled_dot_product_attention(x32[0], x32[1], x32[2], o);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(want, w), NULL, 0, false)));
    ck_near(out, want, 2e-2, "the output", "an additive mask that requires grad");
    const char *names[3] = {"q's gradient", "k's gradient", "v's gradient"};
    for (int i = 0; i < 3; i++)
        ck_near(nb_tensor_grad(x16[i]), nb_tensor_grad(x32[i]), 6e-2, names[i], "an additive mask that requires grad");
    ck_near(nb_tensor_grad(m16), nb_tensor_grad(m32), 6e-2, "the mask's gradient", "an additive mask that requires grad");
    /* create_graph through cuDNN's generator: a clear refusal */
    o.attn_mask = NULL, o.gen = &g[2];
    nb_tensor *o2 = nb_scaled_dot_product_attention(x16[0], x16[1], x16[2], o);
    NB_CK_NOTNULL(o2);
    nb_status st = nb_backward_ex(nb_sum(nb_to_dtype(o2, NB_F32), NULL, 0, false), NULL,
                                  &(nb_backward_options){.create_graph = true});
    ck_assert_int_eq(st, NB_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(nb_last_error(), "cuDNN's generator") != NULL, "%s", nb_last_error());
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_attention_cuda(void) {
    Suite *s = suite_create("ops_attention_cuda");
    TCase *t = tcase_create("cuda");
    tcase_add_test(t, test_cuda_long_sequence_matches_cpu);
    tcase_add_test(t, test_cuda_16bit_fused_matches_float32);
    tcase_add_test(t, test_cuda_16bit_fused_dropout_matches_float32);
    tcase_add_test(t, test_cuda_16bit_cudnn_dropout);
    tcase_add_test(t, test_cuda_16bit_dropout_mask_grad);
    tcase_add_test(t, test_cuda_16bit_decode_matches_float32);
    tcase_set_timeout(t, 300);
    suite_add_tcase(s, t);
    return s;
}
