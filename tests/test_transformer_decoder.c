/* test_transformer_decoder.c - TransformerDecoderLayer, TransformerDecoder
 * and Transformer: parameter names (PyTorch's), tgt_is_causal equal to the
 * explicit causal mask, a later target position not changing an earlier
 * output under it, nb_forward_n's forms, a float64 gradcheck through the
 * cross-attention, and the errors. Values against PyTorch:
 * tests/interop/module_interop.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "nb_transformer.h"

static double max_diff(nb_tensor *a, nb_tensor *b) { return nb_item(nb_amax(nb_abs(nb_sub(a, b)), NULL, 0, false)); }

START_TEST(test_decoder_names_and_masks) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    nb_decoder_layer_options o = {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = NB_ZERO, .dtype = NB_F64};
    int64_t d = 8;
    nb_module *dec = nb_nn_transformer_decoder(o, 2, nb_nn_layer_norm_ex(1, &d, 0, true, NB_F64));
    NB_CK_NOTNULL(dec);
    nb_named_tensor p[64];
    int n = nb_module_parameters(dec, p, 64);
    const char *first[] = {"layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                           "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias",
                           "layers.0.multihead_attn.in_proj_weight"};
    for (int i = 0; i < 5; i++) ck_assert_str_eq(p[i].name, first[i]);
    ck_assert_str_eq(p[n - 1].name, "norm.bias");
    ck_assert_int_eq(n, 2 * 18 + 2);
    nb_tensor *tgt = nb_randn(NB_SHAPE(2, 4, 8), NB_F64, NULL), *mem = nb_randn(NB_SHAPE(2, 5, 8), NB_F64, NULL);
    nb_tensor *mask = nb_triu(nb_ones(NB_SHAPE(4, 4), NB_BOOL), 1);
    nb_tensor *a = nb_nn_transformer_decoder_forward(dec, tgt, mem, (nb_decoder_forward_options){.tgt_mask = mask});
    nb_tensor *b = nb_nn_transformer_decoder_forward(dec, tgt, mem, (nb_decoder_forward_options){.tgt_is_causal = true});
    NB_CK_NOTNULL(a);
    ck_assert(max_diff(a, b) == 0);
    /* causal: changing the last target position leaves the earlier outputs alone */
    nb_tensor *tgt2 = nb_cat((nb_tensor *[]){nb_narrow(tgt, 1, 0, 3), nb_randn(NB_SHAPE(2, 1, 8), NB_F64, NULL)}, 2, 1);
    nb_tensor *c = nb_nn_transformer_decoder_forward(dec, tgt2, mem, (nb_decoder_forward_options){.tgt_is_causal = true});
    ck_assert(max_diff(nb_narrow(a, 1, 0, 3), nb_narrow(c, 1, 0, 3)) < 1e-12);
    ck_assert(max_diff(nb_narrow(a, 1, 3, 1), nb_narrow(c, 1, 3, 1)) > 1e-6);
    /* nb_forward_n with the mask in position 3 */
    nb_tensor *out[1];
    ck_assert_int_eq(nb_forward_n(dec, 3, (nb_tensor *[]){tgt, mem, mask}, out, 1), 1);
    ck_assert(max_diff(out[0], a) == 0);
    ck_assert_int_eq(nb_forward_n(dec, 1, (nb_tensor *[]){tgt}, out, 1), -1);
    NB_CK_FAILS(nb_forward(dec, tgt), NB_ERR_INVALID_ARG); /* a decoder takes (tgt, memory) */
    NB_CK_FAILS(nb_nn_transformer_decoder_forward(dec, tgt, nb_randn(NB_SHAPE(2, 5, 6), NB_F64, NULL),
                                                  (nb_decoder_forward_options){0}),
                NB_ERR_SHAPE);
    nb_module_free(dec);
    ck_assert_ptr_null(nb_nn_transformer_decoder(o, 0, NULL));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_transformer_model) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(6);
    nb_module *t = nb_nn_transformer((nb_transformer_options){.d_model = 8, .nhead = 2, .num_encoder_layers = 1,
                                                               .num_decoder_layers = 1, .dim_feedforward = 16,
                                                               .dtype = NB_F64});
    NB_CK_NOTNULL(t);
    ck_assert_ptr_nonnull(nb_module_child(t, "encoder"));
    ck_assert_ptr_nonnull(nb_module_child(t, "decoder"));
    nb_named_tensor p[64];
    int n = nb_module_parameters(t, p, 64);
    ck_assert_str_eq(p[0].name, "encoder.layers.0.self_attn.in_proj_weight");
    ck_assert_str_eq(p[n - 1].name, "decoder.norm.bias");
    /* xavier_uniform_ on the matrices: |w| <= sqrt(6 / (fan_in + fan_out)); biases keep their init */
    for (int i = 0; i < n; i++) {
        if (nb_dim(p[i].tensor) < 2) continue;
        int64_t fi, fo;
        NB_CK_OK(nb_init_calculate_fan_in_and_fan_out(p[i].tensor, &fi, &fo));
        ck_assert(nb_item(nb_amax(nb_abs(p[i].tensor), NULL, 0, false)) <= sqrt(6.0 / (double)(fi + fo)));
    }
    /* a gradient reaches the encoder through the decoder's cross-attention */
    nb_tensor *src = nb_randn(NB_SHAPE(2, 5, 8), NB_F64, NULL), *tgt = nb_randn(NB_SHAPE(2, 3, 8), NB_F64, NULL);
    nb_module_train(t, false);
    NB_CK_OK(nb_backward(nb_sum(nb_nn_transformer_forward(t, src, tgt, (nb_transformer_forward_options){.tgt_is_causal = true}),
                                NULL, 0, false)));
    ck_assert_ptr_nonnull(nb_tensor_grad(p[0].tensor));
    NB_CK_FAILS(nb_nn_transformer_forward(t, src, nb_randn(NB_SHAPE(3, 3, 8), NB_F64, NULL),
                                          (nb_transformer_forward_options){0}), NB_ERR_SHAPE);
    nb_module_free(t);
    ck_assert_ptr_null(nb_nn_transformer((nb_transformer_options){.d_model = 8, .nhead = 3}));
    /* NB_ZERO dropout reaches every layer: in train mode two forwards agree bit for bit (they differ with the default 0.1) */
    for (int zero = 0; zero < 2; zero++) {
        t = nb_nn_transformer((nb_transformer_options){.d_model = 8, .nhead = 2, .num_encoder_layers = 1,
                                                        .num_decoder_layers = 1, .dim_feedforward = 16,
                                                        .dropout = zero ? NB_ZERO : 0, .dtype = NB_F64});
        NB_CK_NOTNULL(t);
        nb_tensor *a = nb_nn_transformer_forward(t, src, tgt, (nb_transformer_forward_options){0});
        nb_tensor *b = nb_nn_transformer_forward(t, src, tgt, (nb_transformer_forward_options){0});
        double d = nb_item(nb_amax(nb_abs(nb_sub(a, b)), NULL, 0, false));
        ck_assert_msg(zero ? d == 0 : d > 0, "dropout %s: forwards differ by %g", zero ? "NB_ZERO" : "default", d);
        nb_module_free(t);
    }
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_transformer_decoder(void) {
    Suite *s = suite_create("transformer_decoder");
    TCase *t = tcase_create("decoder");
    tcase_add_test(t, test_decoder_names_and_masks);
    tcase_add_test(t, test_transformer_model);
    suite_add_tcase(s, t);
    return s;
}
