/* test_module_summary.c - nb_module_summary (utils/module_summary.c): the
 * parameter and mult-add counts of the examples' nets (mnist_mlp,
 * mnist_cnn, a small GPT-2 and BERT) against counts by hand, an LSTM and
 * MultiheadAttention's formulas, frozen parameters, modules the forward
 * never called, the printed table, and that hooks on composite models'
 * inner modules (attention, blocks) fire as PyTorch's __call__ would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_module_summary.h"
#include "nb_test.h"
#include "nb_transformer.h"
#include "nb_decoder.h"

static const nb_summary_row *row(const nb_summary *s, const char *name) {
    for (int i = 0; i < s->n_rows; i++)
        if (!strcmp(s->rows[i].name, name)) return &s->rows[i];
    ck_abort_msg("no row %s", name);
    return NULL;
}

START_TEST(test_summary_mlp_and_cnn) {
    nb_scope *sc = nb_scope_begin();
    /* mnist_mlp: 784-512-512-10, batch 128 */
    nb_module *mlp = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                      nb_nn_linear(512, 10));
    nb_tensor *x = nb_zeros(NB_SHAPE(128, 784), NB_F32);
    nb_summary s;
    NB_CK_OK(nb_module_summary(mlp, 1, &x, &(nb_summary_options){.quiet = true}, &s));
    ck_assert_int_eq(s.total_params, 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10); /* 669,706 */
    ck_assert_int_eq(s.trainable_params, s.total_params);
    ck_assert_int_eq(s.mult_adds, 128LL * (784 * 512 + 512 * 512 + 512 * 10));
    ck_assert_int_eq(s.n_rows, 6);
    ck_assert_int_eq(row(&s, "2")->mult_adds, 128LL * 512 * 512);
    ck_assert_int_eq(row(&s, "4")->ndim, 2);
    ck_assert_int_eq(row(&s, "4")->shape[1], 10);
    ck_assert_int_eq(s.param_bytes, 4 * s.total_params);
    ck_assert_int_eq(s.input_bytes, 128 * 784 * 4);
    ck_assert_int_eq(s.forward_bytes, 4LL * 128 * (512 + 512 + 512 + 512 + 10)); /* the five leaves' outputs */
    nb_summary_free(&s);
    ck_assert_int_eq(s.n_rows, 0);
    nb_module_free(mlp);

    /* mnist_cnn's net at batch 1 */
    nb_module *cnn = nb_nn_sequential(
        nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){0}, true), nb_nn_relu(),
        nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){0}, true), nb_nn_relu(),
        nb_nn_max_pool2d((nb_pool2d_options){.kernel = {2, 2}}), nb_nn_dropout(0.25), nb_nn_flatten(1, -1),
        nb_nn_linear(9216, 128), nb_nn_relu(), nb_nn_dropout(0.5), nb_nn_linear(128, 10));
    nb_module_train(cnn, true);
    x = nb_zeros(NB_SHAPE(1, 1, 28, 28), NB_F32);
    FILE *f = tmpfile();
    NB_CK_OK(nb_module_summary(cnn, 1, &x, &(nb_summary_options){.file = f}, &s));
    ck_assert(nb_module_is_training(cnn)); /* the mode is put back */
    ck_assert_int_eq(s.total_params, (9 * 32 + 32) + (32 * 9 * 64 + 64) + (9216 * 128 + 128) + (128 * 10 + 10));
    int64_t conv1 = 32LL * 26 * 26 * 9, conv2 = 64LL * 24 * 24 * 32 * 9;
    ck_assert_int_eq(row(&s, "0")->mult_adds, conv1);
    ck_assert_int_eq(row(&s, "2")->mult_adds, conv2);
    ck_assert_int_eq(s.mult_adds, conv1 + conv2 + 9216 * 128 + 128 * 10); /* 11,992,448 */
    ck_assert_int_eq(row(&s, "4")->shape[2], 12);
    rewind(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    ck_assert_msg(strstr(text, "Total params: 1,199,882") && strstr(text, "Total mult-adds: 11,992,448") &&
                      strstr(text, "Conv2d: 1-3") && strstr(text, "[1, 64, 24, 24]") && strstr(text, "10,616,832"),
                  "%s", text);
    nb_summary_free(&s);
    nb_module_free(cnn);
    nb_scope_end(sc);
}
END_TEST

/* LSTM: (B * T) * numel(weight_ih, weight_hh) per layer; MultiheadAttention:
 * in_proj B (L + 2S) E^2 + products 2 B L S E + out_proj's Linear; a
 * frozen parameter. */
START_TEST(test_summary_formulas) {
    nb_scope *sc = nb_scope_begin();
    nb_module *lstm = nb_nn_lstm(10, 20, (nb_rnn_options){.num_layers = 2, .batch_first = true});
    nb_tensor *x = nb_zeros(NB_SHAPE(3, 5, 10), NB_F32);
    nb_summary s;
    NB_CK_OK(nb_module_summary(lstm, 1, &x, &(nb_summary_options){.quiet = true}, &s));
    ck_assert_int_eq(s.mult_adds, 15LL * (4 * 20 * 10 + 4 * 20 * 20 + 4 * 20 * 20 + 4 * 20 * 20));
    ck_assert_int_eq(s.total_params, 4 * 20 * (10 + 20 + 2) + 4 * 20 * (20 + 20 + 2));
    nb_summary_free(&s);
    nb_module_free(lstm);

    nb_module *mha = nb_nn_multihead_attention(16, 4, 0, true);
    nb_tensor *q = nb_zeros(NB_SHAPE(2, 5, 16), NB_F32), *kv = nb_zeros(NB_SHAPE(2, 7, 16), NB_F32);
    NB_CK_OK(nb_set_requires_grad(nb_module_get(mha, "in_proj_bias"), false));
    NB_CK_OK(nb_module_summary(mha, 3, (nb_tensor *[]){q, kv, kv}, &(nb_summary_options){.quiet = true}, &s));
    ck_assert_int_eq(s.mult_adds, 2LL * (5 + 14) * 256 + 2LL * 2 * 5 * 7 * 16 + 2LL * 5 * 16 * 16);
    ck_assert_int_eq(row(&s, "out_proj")->mult_adds, 2LL * 5 * 16 * 16);
    ck_assert_int_eq(s.total_params, 3 * 16 * 16 + 3 * 16 + 16 * 16 + 16);
    ck_assert_int_eq(s.trainable_params, s.total_params - 3 * 16);
    nb_summary_free(&s);
    nb_module_free(mha);

    nb_scope_end(sc);
}
END_TEST

/* GPT-2 (1 layer, E 16, 2 heads, vocab 50) and BERT (1 layer, E 16,
 * intermediate 64, vocab 60) on [2, 8] ids: every matrix product by hand;
 * the attention modules and blocks are called with their hooks. */
START_TEST(test_summary_transformers) {
    nb_scope *sc = nb_scope_begin();
    int64_t B = 2, T = 8, E = 16, ids_v[16] = {0};
    nb_tensor *ids = nb_from_data(ids_v, NB_SHAPE(2, 8), NB_I64);
    nb_gpt2_config c = nb_gpt2_config_default();
    c.vocab_size = 50, c.n_positions = 8, c.n_embd = E, c.n_layer = 1, c.n_head = 2;
    nb_module *g = nb_gpt2(c);
    NB_CK_NOTNULL(g);
    nb_summary s;
    NB_CK_OK(nb_module_summary(g, 1, &ids, &(nb_summary_options){.quiet = true}, &s));
    int64_t block = B * T * (3 * E) * E + 2 * B * T * T * E + B * T * E * E + B * T * (4 * E) * E + B * T * E * (4 * E);
    ck_assert_int_eq(s.mult_adds, block + B * T * 50 * E); /* the tied head: a product, its weight counted once */
    ck_assert_int_eq(s.total_params, 50 * E + 8 * E + (2 * E) + (E * 3 * E + 3 * E) + (E * E + E) + (2 * E) +
                                         (E * 4 * E + 4 * E) + (4 * E * E + E) + 2 * E);
    ck_assert_int_eq(row(&s, "transformer.h.0.attn")->calls, 1);
    ck_assert_int_eq(row(&s, "transformer.h.0.attn")->mult_adds, B * T * 3 * E * E + 2 * B * T * T * E + B * T * E * E);
    ck_assert_int_eq(row(&s, "transformer.h.0")->shape[2], E);
    nb_summary_free(&s);
    nb_module_free(g);

    nb_bert_config b = nb_bert_config_base(60);
    b.hidden_size = E, b.num_layers = 1, b.num_heads = 2, b.intermediate_size = 64, b.max_position = 8;
    nb_module *bert = nb_bert(b);
    NB_CK_NOTNULL(bert);
    NB_CK_OK(nb_module_summary(bert, 1, &ids, &(nb_summary_options){.quiet = true}, &s));
    int64_t layer = B * 3 * T * E * E + 2 * B * T * T * E + B * T * E * E + B * T * 64 * E + B * T * E * 64;
    ck_assert_int_eq(s.mult_adds, layer + B * T * E * E + B * T * 60 * E); /* + the MLM head's transform and decoder */
    int uncalled = 0; /* the segment embedding: no segment ids given, so "--" */
    for (int i = 0; i < s.n_rows; i++)
        if (!strcmp(s.rows[i].kind, "Embedding") && s.rows[i].calls == 0) {
            uncalled++;
            ck_assert_int_eq(s.rows[i].ndim, -1);
        }
    ck_assert_int_eq(uncalled, 1);
    ck_assert_int_eq(row(&s, "")->calls, 1);
    nb_summary_free(&s);
    nb_module_free(bert);

    /* nn.Transformer: the encoder's and decoder's layers and their attention run with their hooks */
    nb_module *tr = nb_nn_transformer((nb_transformer_options){.d_model = 16, .nhead = 2, .num_encoder_layers = 1,
                                                                .num_decoder_layers = 2, .dim_feedforward = 32});
    nb_tensor *src = nb_zeros(NB_SHAPE(2, 5, 16), NB_F32), *tgt = nb_zeros(NB_SHAPE(2, 3, 16), NB_F32);
    NB_CK_OK(nb_module_summary(tr, 2, (nb_tensor *[]){src, tgt}, &(nb_summary_options){.quiet = true}, &s));
    ck_assert_int_eq(row(&s, "decoder.layers.1")->calls, 1);
    ck_assert_int_eq(row(&s, "decoder.layers.1")->shape[1], 3);
    ck_assert_int_eq(row(&s, "decoder.layers.0.multihead_attn")->calls, 1);
    ck_assert_int_eq(row(&s, "encoder.layers.0.self_attn")->calls, 1);
    /* cross-attention: L 3 queries over S 5 keys */
    ck_assert_int_eq(row(&s, "decoder.layers.0.multihead_attn")->mult_adds,
                     2LL * (3 + 2 * 5) * 16 * 16 + 2LL * 2 * 3 * 5 * 16 + 2LL * 3 * 16 * 16);
    nb_summary_free(&s);
    nb_module_free(tr);
    nb_scope_end(sc);
}
END_TEST

START_TEST(test_summary_errors) {
    nb_scope *sc = nb_scope_begin();
    nb_module *lin = nb_nn_linear(4, 3);
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 5), NB_F32);
    NB_CK_FAILS(nb_module_summary(lin, 1, &x, &(nb_summary_options){.quiet = true}, NULL) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_module_summary(lin, 0, &x, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_summary(lin, 1, &x, &(nb_summary_options){.depth = -1}, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    /* no hook is left behind: a later forward runs as before */
    NB_CK_NOTNULL(nb_forward(lin, nb_zeros(NB_SHAPE(2, 4), NB_F32)));
    nb_module_free(lin);
    nb_scope_end(sc);
}
END_TEST

Suite *nb_suite_module_summary(void) {
    Suite *s = suite_create("module_summary");
    TCase *t = tcase_create("module_summary");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, test_summary_mlp_and_cnn);
    tcase_add_test(t, test_summary_formulas);
    tcase_add_test(t, test_summary_transformers);
    tcase_add_test(t, test_summary_errors);
    suite_add_tcase(s, t);
    return s;
}
