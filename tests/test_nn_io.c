/* test_nn_io.c - modules with several inputs and outputs (nb_forward_n):
 * the one-tensor and several-tensor forwards of one module, hooks of both
 * kinds seeing and replacing inputs and outputs, Sequential chaining
 * several tensors, MultiheadAttention's weights only when asked for; the
 * holders (ModuleList, ModuleDict, ParameterList, ParameterDict, Identity)
 * and their state_dict keys; the loss modules against their functionals,
 * their weight buffers in the state_dict, and input-count errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nb_test.h"
#include "nb_transformer.h"

/* got and want of one shape, equal within atol + rtol |want| (0, 0: exactly). */
static void nb_ck_allclose(const nb_tensor *got, const nb_tensor *want, double atol, double rtol) {
    NB_CK_NOTNULL(got);
    NB_CK_NOTNULL(want);
    nb_ck_shape(got, nb_dim(want), nb_shape(want));
    double *w = nb_test_values_of(want);
    nb_ck_close(got, w, nb_numel(want), atol, rtol);
    free(w);
}

/* A kind with only forward_n: (a, b) -> (a + b, a * b). */
static int sum_prod(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)m;
    if (n_in != 2) return nb_set_error(NB_ERR_INVALID_ARG, "SumProd: takes 2 inputs"), -1;
    out[0] = nb_add(in[0], in[1]);
    if (max_out > 1) out[1] = nb_mul(in[0], in[1]);
    return out[0] && (max_out < 2 || out[1]) ? 2 : -1;
}
static const nb_module_ops sum_prod_ops = {"SumProd", NULL, NULL, sum_prod};

START_TEST(test_forward_n_basics) {
    nb_scope *s = nb_scope_begin();
    nb_module *m = nb_module_new(&sum_prod_ops, NULL);
    NB_CK_NOTNULL(m);
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){3, 4});
    nb_tensor *out[NB_FORWARD_MAX] = {0};
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){a, b}, out, 2), 2);
    nb_ck_close(out[0], (double[]){4, 6}, 2, 0, 0);
    nb_ck_close(out[1], (double[]){3, 8}, 2, 0, 0);
    /* fewer outputs asked: the count is still 2, only the first written */
    out[1] = NULL;
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){a, b}, out, 1), 2);
    ck_assert_ptr_null(out[1]);
    /* nb_forward on a two-input kind: the kind's own error */
    NB_CK_FAILS(nb_forward(m, a), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "SumProd"));
    /* argument errors */
    ck_assert_int_eq(nb_forward_n(m, NB_FORWARD_MAX + 1, (nb_tensor *[]){a, b}, out, 1), -1);
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){a, b}, out, 0), -1);
    ck_assert_int_eq(nb_forward_n(m, 2, (nb_tensor *[]){a, b}, NULL, 1), -1);
    /* a one-tensor kind through nb_forward_n: exactly one input */
    nb_module *relu = nb_nn_relu();
    ck_assert_int_eq(nb_forward_n(relu, 1, (nb_tensor *[]){nb_neg(a)}, out, 4), 1);
    nb_ck_close(out[0], (double[]){0, 0}, 2, 0, 0);
    ck_assert_int_eq(nb_forward_n(relu, 2, (nb_tensor *[]){a, b}, out, 1), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    /* a kind with neither forward is refused */
    static const nb_module_ops none = {"None", NULL, NULL, NULL};
    ck_assert_ptr_null(nb_module_new(&none, NULL));
    nb_module_free(relu);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

static int calls;
/* pre-hook: swaps the two inputs */
static nb_status swap_inputs(nb_module *m, int n_in, nb_tensor **in, void *user) {
    (void)m, (void)user;
    ck_assert_int_eq(n_in, 2);
    nb_tensor *t = in[0];
    in[0] = in[1], in[1] = t;
    calls++;
    return NB_OK;
}
/* forward hook: sees both inputs and both outputs; doubles the second output */
static nb_status double_second(nb_module *m, int n_in, nb_tensor *const *in, int n_out, nb_tensor **out, void *user) {
    (void)m, (void)user;
    ck_assert_int_eq(n_in, 2);
    ck_assert_ptr_nonnull(in[1]);
    if (n_out > 1) out[1] = nb_mul_scalar(out[1], 2);
    calls += 10;
    return NB_OK;
}
/* a one-tensor forward hook on a two-output module: sees the first input and output */
static nb_status negate_first(nb_module *m, nb_tensor *input, nb_tensor *output, nb_tensor **replace, void *user) {
    (void)m, (void)input, (void)user;
    *replace = nb_neg(output);
    calls += 100;
    return NB_OK;
}

START_TEST(test_forward_n_hooks) {
    nb_scope *s = nb_scope_begin();
    nb_module *m = nb_module_new(&sum_prod_ops, NULL);
    nb_tensor *a = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){2});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){5});
    int64_t h1 = nb_module_register_forward_pre_hook_n(m, swap_inputs, NULL);
    int64_t h2 = nb_module_register_forward_hook_n(m, double_second, NULL);
    int64_t h3 = nb_module_register_forward_hook(m, negate_first, NULL);
    ck_assert(h1 > 0 && h2 > 0 && h3 > 0);
    calls = 0;
    nb_tensor *out[2];
    nb_tensor *in[2] = {a, b};
    ck_assert_int_eq(nb_forward_n(m, 2, in, out, 2), 2);
    ck_assert_int_eq(calls, 111);
    ck_assert_ptr_eq(in[0], a); /* the caller's array is not touched by the pre-hook */
    ck_assert_double_eq(nb_item(out[0]), -7);
    ck_assert_double_eq(nb_item(out[1]), 20);
    NB_CK_OK(nb_module_remove_hook(m, h1));
    NB_CK_OK(nb_module_remove_hook(m, h2));
    NB_CK_OK(nb_module_remove_hook(m, h3));
    ck_assert_int_eq(nb_forward_n(m, 2, in, out, 2), 2);
    ck_assert_double_eq(nb_item(out[1]), 10);
    ck_assert_int_eq((int)nb_module_register_forward_hook_n(m, NULL, NULL), -1);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_sequential_and_identity_n) {
    nb_scope *s = nb_scope_begin();
    /* Identity passes both tensors on; SumProd makes two; Identity returns them */
    nb_module *seq = nb_nn_sequential(nb_nn_identity(), nb_module_new(&sum_prod_ops, NULL), nb_nn_identity());
    NB_CK_NOTNULL(seq);
    nb_tensor *a = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){3});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){4});
    nb_tensor *out[2];
    ck_assert_int_eq(nb_forward_n(seq, 2, (nb_tensor *[]){a, b}, out, 2), 2);
    ck_assert_double_eq(nb_item(out[0]), 7);
    ck_assert_double_eq(nb_item(out[1]), 12);
    /* nb_forward on Sequential keeps its one-tensor path */
    nb_module *id = nb_nn_identity();
    ck_assert_ptr_eq(nb_forward(id, a), a);
    ck_assert_int_eq(nb_forward_n(id, 0, NULL, out, 1), -1);
    nb_module_free(id);
    nb_module_free(seq);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_mha_forward_n) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_module *mha = nb_nn_multihead_attention_ex(4, 2, 0, true, NB_F64);
    NB_CK_NOTNULL(mha);
    nb_tensor *q = nb_randn(NB_SHAPE(2, 3, 4), NB_F64, NULL), *kv = nb_randn(NB_SHAPE(2, 5, 4), NB_F64, NULL);
    nb_tensor *out[2] = {0};
    ck_assert_int_eq(nb_forward_n(mha, 3, (nb_tensor *[]){q, kv, kv}, out, 2), 2);
    nb_ck_shape(out[0], NB_SHAPE(2, 3, 4));
    nb_ck_shape(out[1], NB_SHAPE(2, 3, 5)); /* weights averaged over heads */
    nb_tensor *w = NULL;
    nb_tensor *ref = nb_nn_multihead_attention_forward(mha, q, kv, kv, NULL, NULL, &w);
    nb_ck_allclose(out[0], ref, 1e-12, 0);
    nb_ck_allclose(out[1], w, 1e-12, 0);
    /* one output asked: the fused path, the same values */
    nb_tensor *only[1];
    ck_assert_int_eq(nb_forward_n(mha, 3, (nb_tensor *[]){q, kv, kv}, only, 1), 2);
    nb_ck_allclose(only[0], ref, 1e-12, 0);
    /* a key_padding_mask in position 4; attn_mask NULL */
    nb_tensor *kpm = nb_from_data((bool[]){0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, NB_SHAPE(2, 5), NB_BOOL);
    ck_assert_int_eq(nb_forward_n(mha, 5, (nb_tensor *[]){q, kv, kv, kpm, NULL}, out, 1), 2);
    nb_ck_allclose(out[0], nb_nn_multihead_attention_forward(mha, q, kv, kv, kpm, NULL, NULL), 1e-12, 0);
    ck_assert_int_eq(nb_forward_n(mha, 2, (nb_tensor *[]){q, kv}, out, 1), -1);
    nb_module_free(mha);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_holders) {
    nb_module *root = nb_nn_module_dict();
    nb_module *blocks = nb_nn_module_list_array((nb_module *[]){nb_nn_linear(2, 3), nb_nn_linear(3, 1)}, 2);
    NB_CK_NOTNULL(blocks);
    NB_CK_OK(nb_nn_module_list_append(blocks, nb_nn_relu()));
    NB_CK_OK(nb_module_add(root, "blocks", blocks));
    nb_module *scales = nb_nn_parameter_list();
    NB_CK_OK(nb_nn_parameter_list_append(scales, nb_ones(NB_SHAPE(3), NB_F32)));
    NB_CK_OK(nb_nn_parameter_list_append(scales, nb_zeros(NB_SHAPE(1), NB_F32)));
    NB_CK_OK(nb_module_add(root, "scales", scales));
    nb_tensor *shared = nb_ones(NB_SHAPE(1), NB_F32);
    NB_CK_OK(nb_nn_parameter_list_append(scales, shared)); /* twice the same: two entries, as len() counts */
    NB_CK_OK(nb_nn_parameter_list_append(scales, shared));
    ck_assert_ptr_nonnull(nb_module_get(scales, "3"));
    nb_module *extra = nb_nn_parameter_dict();
    NB_CK_OK(nb_module_register_parameter(extra, "gain", nb_ones(NB_SHAPE(2), NB_F32)));
    NB_CK_OK(nb_module_add(root, "extra", extra));
    nb_named_tensor p[16];
    int n = nb_module_parameters(root, p, 16);
    const char *want[] = {"blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias", "scales.0",
                          "scales.1", "scales.2", "extra.gain"};
    ck_assert_int_eq(n, 8); /* the shared parameter once */
    for (int i = 0; i < n; i++) ck_assert_str_eq(p[i].name, want[i]);
    ck_assert_str_eq(nb_module_kind(nb_module_child(root, "blocks")), "ModuleList");
    ck_assert_int_eq(nb_module_num_children(blocks), 3);
    ck_assert_ptr_nonnull(nb_module_get(extra, "gain"));
    /* the holders have no forward */
    NB_CK_FAILS(nb_forward(blocks, nb_ones(NB_SHAPE(2), NB_F32)), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "ModuleList"));
    NB_CK_FAILS(nb_forward(scales, nb_ones(NB_SHAPE(2), NB_F32)), NB_ERR_INVALID_ARG);
    /* the wrong holder */
    ck_assert_int_eq(nb_nn_module_list_append(root, nb_nn_relu()), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_nn_parameter_list_append(blocks, nb_ones(NB_SHAPE(1), NB_F32)), NB_ERR_INVALID_ARG);
    /* a NULL child fails the list and frees the rest */
    ck_assert_ptr_null(nb_nn_module_list_array((nb_module *[]){nb_nn_relu(), NULL}, 2));
    nb_module_free(root);
}
END_TEST

/* Each loss module equals its functional, with the same options. */
START_TEST(test_loss_modules) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *x = nb_randn(NB_SHAPE(4, 3), NB_F64, NULL), *y = nb_randn(NB_SHAPE(4, 3), NB_F64, NULL);
    nb_tensor *z = nb_randn(NB_SHAPE(4, 3), NB_F64, NULL);
    nb_tensor *cls = nb_from_data((int64_t[]){0, 2, 1, 2}, NB_SHAPE(4), NB_I64);
    nb_tensor *w = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.5, 1, 2});
    nb_tensor *lab = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, -1, 1, -1});
    nb_tensor *pos = nb_add_scalar(nb_abs(z), 0.1);
    /* CTC: log_probs [T 4, N 2, C 3], targets (2, 0) and (2) */
    nb_tensor *lpc = nb_log_softmax(nb_randn(NB_SHAPE(4, 2, 3), NB_F64, NULL), 2);
    nb_tensor *tgc = nb_test_tensor(NB_SHAPE(2, 2), NB_I64, (double[]){2, 0, 2, 2});
    nb_tensor *ilc = nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){4, 3});
    nb_tensor *tlc = nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){2, 1});
    struct {
        nb_module *m;
        int n;
        nb_tensor *in[4];
        nb_tensor *want;
    } c[] = {
        {nb_nn_l1_loss(NB_REDUCTION_SUM), 2, {x, y}, nb_l1_loss(x, y, NB_REDUCTION_SUM)},
        {nb_nn_mse_loss(0), 2, {x, y}, nb_mse_loss(x, y, 0)},
        {nb_nn_cross_entropy_loss((nb_cross_entropy_options){.weight = w, .label_smoothing = 0.1}), 2, {x, cls},
         nb_cross_entropy_ex(x, cls, (nb_cross_entropy_options){.weight = w, .label_smoothing = 0.1})},
        {nb_nn_nll_loss((nb_cross_entropy_options){0}), 2, {x, cls}, nb_nll_loss(x, cls, (nb_cross_entropy_options){0})},
        {nb_nn_huber_loss((nb_loss_options){.delta = 0.5}), 2, {x, y}, nb_huber_loss(x, y, (nb_loss_options){.delta = 0.5})},
        {nb_nn_bce_with_logits_loss((nb_loss_options){.pos_weight = w}), 2, {x, nb_sigmoid(y)},
         nb_binary_cross_entropy_with_logits(x, nb_sigmoid(y), (nb_loss_options){.pos_weight = w})},
        {nb_nn_margin_ranking_loss((nb_loss_options){.margin = 0.2}), 3, {x, y, nb_sign(z)},
         nb_margin_ranking_loss(x, y, nb_sign(z), (nb_loss_options){.margin = 0.2})},
        {nb_nn_gaussian_nll_loss((nb_loss_options){.full = true}), 3, {x, y, pos},
         nb_gaussian_nll_loss(x, y, pos, (nb_loss_options){.full = true})},
        {nb_nn_multi_margin_loss((nb_loss_options){.weight = w, .p = 2}), 2, {x, cls},
         nb_multi_margin_loss(x, cls, (nb_loss_options){.weight = w, .p = 2})},
        {nb_nn_cosine_embedding_loss((nb_loss_options){0}), 3, {x, y, lab},
         nb_cosine_embedding_loss(x, y, lab, (nb_loss_options){0})},
        {nb_nn_triplet_margin_loss((nb_loss_options){.swap = true}), 3, {x, y, z},
         nb_triplet_margin_loss(x, y, z, (nb_loss_options){.swap = true})},
        {nb_nn_cosine_similarity(1, 0), 2, {x, y}, nb_cosine_similarity(x, y, 1, 0)},
        {nb_nn_pairwise_distance(0, 0, true), 2, {x, y}, nb_pairwise_distance(x, y, 0, 0, true)},
        {nb_nn_ctc_loss((nb_ctc_loss_options){.blank = 1, .reduction = NB_REDUCTION_SUM}), 4, {lpc, tgc, ilc, tlc},
         nb_ctc_loss(lpc, tgc, ilc, tlc, (nb_ctc_loss_options){.blank = 1, .reduction = NB_REDUCTION_SUM})},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        NB_CK_NOTNULL(c[i].m);
        nb_tensor *got = NULL;
        ck_assert_msg(nb_forward_n(c[i].m, c[i].n, c[i].in, &got, 1) == 1, "%s: %s", nb_module_kind(c[i].m),
                      nb_last_error());
        nb_ck_allclose(got, c[i].want, 0, 0);
        /* one input too few */
        ck_assert_int_eq(nb_forward_n(c[i].m, c[i].n - 1, c[i].in, &got, 1), -1);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), nb_module_kind(c[i].m)));
        nb_module_free(c[i].m);
    }
    /* weights are buffers: in the state_dict, and the forward reads the module's copy */
    nb_module *bce = nb_nn_bce_with_logits_loss((nb_loss_options){.weight = w, .pos_weight = nb_mul_scalar(w, 2)});
    nb_named_tensor *sd = NULL;
    ck_assert_int_eq(nb_module_state_dict(bce, &sd), 2);
    ck_assert_str_eq(sd[0].name, "weight");
    ck_assert_str_eq(sd[1].name, "pos_weight");
    free(sd);
    NB_CK_OK(nb_fill_(nb_module_get(bce, "weight"), 0));
    nb_tensor *got = NULL;
    ck_assert_int_eq(nb_forward_n(bce, 2, (nb_tensor *[]){x, nb_sigmoid(y)}, &got, 1), 1);
    ck_assert_double_eq(nb_item(got), 0);
    nb_module_free(bce);
    ck_assert_ptr_null(nb_nn_l1_loss((nb_reduction)7));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- the modules against PyTorch's (tests/interop/module_interop.py) ----------------- */

/* Saves m's state_dict as dir/name.safetensors, and its inputs and eval-mode
 * outputs (nb_forward_n) as dir/name_io.safetensors. */
static void save_case(const char *dir, const char *name, nb_module *m, int n_in, nb_tensor *const *in) {
    NB_CK_NOTNULL(m);
    char path[256], names[2 * NB_FORWARD_MAX][16];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    NB_CK_OK(nb_module_state_dict_save(m, path));
    nb_module_train(m, false);
    nb_tensor *out[NB_FORWARD_MAX];
    int n_out = nb_forward_n(m, n_in, in, out, NB_FORWARD_MAX);
    ck_assert_msg(n_out > 0, "%s: %s", name, nb_last_error());
    nb_named_tensor io[2 * NB_FORWARD_MAX];
    for (int i = 0; i < n_in; i++) snprintf(names[i], sizeof names[i], "in%d", i), io[i] = (nb_named_tensor){names[i], in[i]};
    for (int i = 0; i < n_out; i++)
        snprintf(names[n_in + i], sizeof names[0], "out%d", i), io[n_in + i] = (nb_named_tensor){names[n_in + i], out[i]};
    snprintf(path, sizeof path, "%s/%s_io.safetensors", dir, name);
    NB_CK_OK(nb_safetensors_save(path, io, n_in + n_out, NULL, 0));
    nb_module_free(m);
}

/* Every parameter N(0, 0.5) (so that layouts matter: no zeros or ones). */
static nb_module *scrambled(nb_module *m) {
    NB_CK_NOTNULL(m);
    nb_named_tensor p[64];
    int n = nb_module_parameters(m, p, 64);
    for (int i = 0; i < n; i++) NB_CK_OK(nb_normal_(p[i].tensor, 0, 0.5, NULL));
    return m;
}

START_TEST(test_modules_against_pytorch) {
    char script[1400], cmd[3000], dir[64] = "/tmp/nb_nnio_XXXXXX";
    ck_assert_msg(nb_test_find_script("module_interop.py", script, sizeof script), "module_interop.py not found");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(23);
    nb_rnn_options f64 = {.dtype = NB_F64};
    save_case(dir, "lstm",
              scrambled(nb_nn_lstm(5, 4, (nb_rnn_options){.num_layers = 2, .bidirectional = true, .proj_size = 3,
                                                          .batch_first = true, .dtype = NB_F64})),
              3, (nb_tensor *[]){nb_randn(NB_SHAPE(3, 6, 5), NB_F64, NULL), nb_randn(NB_SHAPE(4, 3, 3), NB_F64, NULL),
                                 nb_randn(NB_SHAPE(4, 3, 4), NB_F64, NULL)});
    save_case(dir, "gru", scrambled(nb_nn_gru(5, 4, (nb_rnn_options){.num_layers = 2, .dtype = NB_F64})), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(6, 3, 5), NB_F64, NULL)});
    save_case(dir, "rnn_relu",
              scrambled(nb_nn_rnn(5, 4, (nb_rnn_options){.mode = NB_RNN_RELU, .bias = NB_FLAG_FALSE,
                                                         .bidirectional = true, .dtype = NB_F64})),
              1, (nb_tensor *[]){nb_randn(NB_SHAPE(6, 5), NB_F64, NULL)});
    save_case(dir, "lstm_cell", scrambled(nb_nn_lstm_cell(5, 4, f64)), 3,
              (nb_tensor *[]){nb_randn(NB_SHAPE(3, 5), NB_F64, NULL), nb_randn(NB_SHAPE(3, 4), NB_F64, NULL),
                              nb_randn(NB_SHAPE(3, 4), NB_F64, NULL)});
    save_case(dir, "gru_cell", scrambled(nb_nn_gru_cell(5, 4, f64)), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(3, 5), NB_F64, NULL), nb_randn(NB_SHAPE(3, 4), NB_F64, NULL)});
    save_case(dir, "group_norm", scrambled(nb_nn_group_norm_ex(2, 6, 0, true, NB_F64)), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 6, 4), NB_F64, NULL)});
    /* the normalizations after a training step, so the running statistics are not the initial ones */
    nb_module *in = scrambled(nb_nn_instance_norm2d(3, 0, 0, true, true));
    NB_CK_NOTNULL(nb_forward(in, nb_randn(NB_SHAPE(2, 3, 4, 4), NB_F32, NULL)));
    save_case(dir, "instance_norm", in, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 3, 4, 4), NB_F32, NULL)});
    nb_module *bn = scrambled(nb_nn_batch_norm3d(3, 0, 0));
    NB_CK_NOTNULL(nb_forward(bn, nb_randn(NB_SHAPE(2, 3, 2, 3, 2), NB_F32, NULL)));
    save_case(dir, "batch_norm3d", bn, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 3, 2, 3, 2), NB_F32, NULL)});
    nb_tensor *w = nb_rand(NB_SHAPE(4), NB_F32, NULL), *pw = nb_add_scalar(nb_rand(NB_SHAPE(4), NB_F32, NULL), 0.5);
    save_case(dir, "bce_logits", nb_nn_bce_with_logits_loss((nb_loss_options){.weight = w, .pos_weight = pw}), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(3, 4), NB_F32, NULL), nb_rand(NB_SHAPE(3, 4), NB_F32, NULL)});
    save_case(dir, "cross_entropy",
              nb_nn_cross_entropy_loss((nb_cross_entropy_options){.weight = w, .label_smoothing = 0.1}), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(3, 4), NB_F32, NULL),
                              nb_from_data((int64_t[]){3, 0, 1}, NB_SHAPE(3), NB_I64)});
    save_case(dir, "multi_margin", nb_nn_multi_margin_loss((nb_loss_options){.p = 2, .margin = 0.7, .weight = w}), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(3, 4), NB_F32, NULL),
                              nb_from_data((int64_t[]){3, 0, 1}, NB_SHAPE(3), NB_I64)});
    nb_tensor *r34 = nb_randn(NB_SHAPE(3, 4), NB_F32, NULL), *q34 = nb_randn(NB_SHAPE(3, 4), NB_F32, NULL);
    save_case(dir, "triplet", nb_nn_triplet_margin_loss((nb_loss_options){.margin = 0.5, .p = 3, .swap = true}), 3,
              (nb_tensor *[]){r34, q34, nb_randn(NB_SHAPE(3, 4), NB_F32, NULL)});
    save_case(dir, "kl_div", nb_nn_kl_div_loss((nb_loss_options){.batchmean = true, .log_target = true}), 2,
              (nb_tensor *[]){r34, q34});
    save_case(dir, "gaussian_nll", nb_nn_gaussian_nll_loss((nb_loss_options){.full = true}), 3,
              (nb_tensor *[]){r34, q34, nb_add_scalar(nb_rand(NB_SHAPE(3, 4), NB_F32, NULL), 0.1)});
    save_case(dir, "pairwise_distance", nb_nn_pairwise_distance(3, 0, true), 2, (nb_tensor *[]){r34, q34});
    nb_tensor *x234 = nb_randn(NB_SHAPE(2, 3, 4), NB_F32, NULL);
    save_case(dir, "prelu", scrambled(nb_nn_prelu(3, 0)), 1, (nb_tensor *[]){x234});
    save_case(dir, "conv3d",
              scrambled(nb_nn_conv3d(2, 3, 2, (nb_conv3d_options){.stride = {1, 2, 1}, .padding = {1, 0, 0}}, true)), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 3, 4, 3), NB_F32, NULL)});
    save_case(dir, "conv_transpose1d",
              scrambled(nb_nn_conv_transpose1d(2, 3, 3, (nb_conv_transpose1d_options){.stride = 2, .output_padding = 1},
                                               true)),
              1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 5), NB_F32, NULL)});
    save_case(dir, "conv_transpose3d",
              scrambled(nb_nn_conv_transpose3d(2, 2, 2, (nb_conv_transpose3d_options){.stride = {2, 2, 2}}, true)), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(1, 2, 2, 3, 2), NB_F32, NULL)});
    nb_tensor *img = nb_randn(NB_SHAPE(1, 2, 3, 4), NB_F32, NULL), *vol = nb_randn(NB_SHAPE(1, 2, 4, 4, 4), NB_F32, NULL);
    save_case(dir, "reflection_pad2d", nb_nn_reflection_pad(2, (int64_t[]){1, 2, 0, 1}), 1, (nb_tensor *[]){img});
    save_case(dir, "replication_pad3d", nb_nn_replication_pad(3, (int64_t[]){1, 0, 0, 2, 1, 1}), 1, (nb_tensor *[]){vol});
    save_case(dir, "constant_pad1d", nb_nn_constant_pad(1, (int64_t[]){2, -1}, 3.5), 1, (nb_tensor *[]){x234});
    save_case(dir, "unflatten", nb_nn_unflatten(1, 2, (int64_t[]){2, 3}), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 6), NB_F32, NULL)});
    save_case(dir, "max_pool3d", nb_nn_max_pool3d((nb_pool3d_options){.kernel = {2, 2, 2}}), 1, (nb_tensor *[]){vol});
    save_case(dir, "avg_pool3d", nb_nn_avg_pool3d((nb_pool3d_options){.kernel = {2, 2, 2}, .stride = {1, 1, 1}}), 1,
              (nb_tensor *[]){vol});
    save_case(dir, "adaptive_max_pool2d", nb_nn_adaptive_max_pool2d(2, 3), 1, (nb_tensor *[]){img});
    save_case(dir, "adaptive_avg_pool3d", nb_nn_adaptive_avg_pool3d(1, 2, 2), 1, (nb_tensor *[]){vol});
    save_case(dir, "local_response_norm", nb_nn_local_response_norm(3, 0, 0, 0), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 5, 3), NB_F32, NULL)});
    save_case(dir, "glu", nb_nn_glu(1), 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 4, 3), NB_F32, NULL)});
    save_case(dir, "adaptive_log_softmax",
              scrambled(nb_nn_adaptive_log_softmax_with_loss(8, 10, (int64_t[]){3, 6}, 2, 2.0, true, NB_F64)), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(5, 8), NB_F64, NULL),
                              nb_from_data((int64_t[]){0, 4, 9, 2, 6}, NB_SHAPE(5), NB_I64)});
    /* parametrizations: PyTorch's keys (parametrizations.weight.original0, ...), the weight recomputed */
    nb_module *wn = nb_nn_linear_ex(4, 3, true, NB_F64);
    NB_CK_OK(nb_nn_weight_norm(wn, NULL, 0));
    save_case(dir, "weight_norm_linear", scrambled(wn), 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 4), NB_F64, NULL)});
    nb_module *wnc = nb_nn_conv1d(2, 3, 2, (nb_conv1d_options){0}, true);
    NB_CK_OK(nb_nn_weight_norm(wnc, "weight", -1));
    save_case(dir, "weight_norm_conv_whole", scrambled(wnc), 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 5), NB_F32, NULL)});
    nb_module *sn = nb_nn_conv2d(2, 3, 2, (nb_conv2d_options){0}, true);
    NB_CK_OK(nb_nn_spectral_norm(sn, NULL, (nb_spectral_norm_options){0}));
    NB_CK_NOTNULL(nb_forward(sn, nb_randn(NB_SHAPE(1, 2, 4, 4), NB_F32, NULL))); /* a training forward moves u and v */
    save_case(dir, "spectral_norm_conv", sn, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 4, 4), NB_F32, NULL)});
    nb_module *snt = nb_nn_conv_transpose2d(3, 2, 2, (nb_conv_transpose2d_options){0}, true); /* dim 1 by default */
    NB_CK_OK(nb_nn_spectral_norm(snt, NULL, (nb_spectral_norm_options){.n_power_iterations = 2}));
    NB_CK_NOTNULL(nb_forward(snt, nb_randn(NB_SHAPE(1, 3, 3, 3), NB_F32, NULL)));
    save_case(dir, "spectral_norm_conv_transpose", snt, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 3, 3, 3), NB_F32, NULL)});
    save_case(dir, "celu", nb_nn_celu(0.5), 1, (nb_tensor *[]){x234});
    save_case(dir, "rrelu", nb_nn_rrelu(0.1, 0.3), 1, (nb_tensor *[]){x234}); /* eval: the mean slope */
    save_case(dir, "softmax2d", nb_nn_softmax2d(), 1, (nb_tensor *[]){img});
    save_case(dir, "log_softmax", nb_nn_log_softmax(1), 1, (nb_tensor *[]){x234});
    save_case(dir, "softmin", nb_nn_softmin(0), 1, (nb_tensor *[]){x234});
    save_case(dir, "threshold", nb_nn_threshold(0.1, -2.0), 1, (nb_tensor *[]){x234});
    save_case(dir, "hardshrink", nb_nn_hardshrink(0), 1, (nb_tensor *[]){x234});
    save_case(dir, "softshrink", nb_nn_softshrink(0.3), 1, (nb_tensor *[]){x234});
    save_case(dir, "softsign", nb_nn_softsign(), 1, (nb_tensor *[]){x234});
    save_case(dir, "tanhshrink", nb_nn_tanhshrink(), 1, (nb_tensor *[]){x234});
    save_case(dir, "relu6", nb_nn_relu6(), 1, (nb_tensor *[]){nb_mul_scalar(x234, 5)});
    save_case(dir, "identity", nb_nn_identity(), 1, (nb_tensor *[]){x234});
    /* modules newer than PyTorch 1.13 (the script skips them there) */
    save_case(dir, "circular_pad2d", nb_nn_circular_pad(2, (int64_t[]){1, 2, 2, 0}), 1, (nb_tensor *[]){img});
    save_case(dir, "zero_pad1d", nb_nn_zero_pad(1, (int64_t[]){2, 1}), 1, (nb_tensor *[]){x234});
    save_case(dir, "lp_pool3d", nb_nn_lp_pool3d(2, (nb_pool3d_options){.kernel = {2, 2, 2}, .stride = {1, 2, 1}}), 1,
              (nb_tensor *[]){nb_add_scalar(nb_rand(NB_SHAPE(1, 2, 4, 4, 3), NB_F32, NULL), 0.1)});
    save_case(dir, "pixel_shuffle", nb_nn_pixel_shuffle(2), 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 8, 3, 2), NB_F32, NULL)});
    save_case(dir, "pixel_unshuffle", nb_nn_pixel_unshuffle(2), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 4, 6), NB_F32, NULL)});
    save_case(dir, "upsample_nearest", nb_nn_upsample(0, 0, 2, 2, NB_INTERPOLATE_NEAREST, false), 1, (nb_tensor *[]){img});
    save_case(dir, "upsample_bilinear", nb_nn_upsample(5, 7, 0, 0, NB_INTERPOLATE_BILINEAR, false), 1, (nb_tensor *[]){img});
    save_case(dir, "upsampling_bilinear2d", nb_nn_upsampling_bilinear2d(0, 0, 2, 2), 1, (nb_tensor *[]){img});
    nb_tensor *pos4 = nb_add_scalar(nb_rand(NB_SHAPE(2, 2, 4, 5), NB_F32, NULL), 0.1);
    save_case(dir, "lp_pool2d", nb_nn_lp_pool2d(2, (nb_pool2d_options){.kernel = {2, 3}, .stride = {1, 2}, .ceil_mode = true}),
              1, (nb_tensor *[]){pos4});
    save_case(dir, "lp_pool1d", nb_nn_lp_pool1d(3, (nb_pool1d_options){.kernel = 3, .stride = 2}), 1,
              (nb_tensor *[]){nb_add_scalar(nb_rand(NB_SHAPE(2, 2, 7), NB_F32, NULL), 0.1)});
    save_case(dir, "bilinear", scrambled(nb_nn_bilinear(3, 2, 5, true, NB_F32)), 2,
              (nb_tensor *[]){nb_randn(NB_SHAPE(4, 3), NB_F32, NULL), nb_randn(NB_SHAPE(4, 2), NB_F32, NULL)});
    save_case(dir, "adaptive_max_pool1d", nb_nn_adaptive_max_pool1d(3), 1, (nb_tensor *[]){x234});
    save_case(dir, "adaptive_max_pool3d", nb_nn_adaptive_max_pool3d(2, 3, 2), 1, (nb_tensor *[]){vol});
    save_case(dir, "channel_shuffle", nb_nn_channel_shuffle(3), 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 6, 3), NB_F32, NULL)});
    nb_tensor *pidx = NULL, *pooled = nb_max_pool2d(img, (nb_pool2d_options){.kernel = {2, 2}}, &pidx);
    save_case(dir, "max_unpool2d", nb_nn_max_unpool2d(2, 0, 0), 2, (nb_tensor *[]){pooled, pidx});
    nb_encoder_layer_options dlo = {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = NB_ZERO, .dtype = NB_F64};
    nb_tensor *tgt = nb_randn(NB_SHAPE(2, 3, 8), NB_F64, NULL), *mem = nb_randn(NB_SHAPE(2, 5, 8), NB_F64, NULL);
    nb_tensor *causal = nb_triu(nb_ones(NB_SHAPE(3, 3), NB_BOOL), 1);
    save_case(dir, "transformer_decoder_layer", scrambled(nb_nn_transformer_decoder_layer(dlo)), 3,
              (nb_tensor *[]){tgt, mem, causal});
    nb_encoder_layer_options nfo = dlo;
    nfo.norm_first = true, nfo.activation = NB_ACTIVATION_GELU;
    int64_t d8 = 8;
    save_case(dir, "transformer_decoder_norm_first",
              scrambled(nb_nn_transformer_decoder(nfo, 2, nb_nn_layer_norm_ex(1, &d8, 0, true, NB_F64))), 2,
              (nb_tensor *[]){tgt, mem});
    save_case(dir, "transformer",
              nb_nn_transformer((nb_transformer_options){.d_model = 8, .nhead = 2, .num_encoder_layers = 2,
                                                         .num_decoder_layers = 2, .dim_feedforward = 16,
                                                         .dropout = NB_ZERO, .dtype = NB_F64}),
              2, (nb_tensor *[]){mem, tgt});
    save_case(dir, "unfold", nb_nn_unfold((nb_fold_options){.kernel = {2, 3}, .dilation = {2, 1}, .padding = {1, 0},
                                                            .stride = {1, 2}}),
              1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 2, 5, 6), NB_F32, NULL)});
    save_case(dir, "fold", nb_nn_fold(5, 4, (nb_fold_options){.kernel = {2, 3}, .padding = {0, 1}, .stride = {1, 2}}), 1,
              (nb_tensor *[]){nb_randn(NB_SHAPE(2, 12, 8), NB_F32, NULL)});
    save_case(dir, "embedding_bag",
              scrambled(nb_nn_embedding_bag(6, 3, (nb_embedding_bag_options){.mode = NB_BAG_MAX, .has_padding_idx = true,
                                                                             .padding_idx = 2})),
              2, (nb_tensor *[]){nb_from_data((int64_t[]){1, 2, 4, 5, 4, 3, 2, 0}, NB_SHAPE(8), NB_I64),
                                 nb_from_data((int64_t[]){0, 2, 2, 5}, NB_SHAPE(4), NB_I64)});
    save_case(dir, "dropout2d_eval", nb_nn_dropout2d(0.5), 1, (nb_tensor *[]){img});
    save_case(dir, "alpha_dropout_eval", nb_nn_alpha_dropout(0.5), 1, (nb_tensor *[]){x234});
    nb_scope_end(s);
    /* NB_INTEROP_PYTHON: another interpreter (the GPU machine's PyTorch 2.11 is not /usr/bin/python3's) */
    const char *py = getenv("NB_INTEROP_PYTHON");
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", py && *py ? py : "/usr/bin/python3", script, dir);
    int rc = system(cmd);
    nb_test_rmtree(dir);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("module_interop: skipped: /usr/bin/python3 lacks torch or numpy\n");
        return;
    }
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "module_interop.py failed (status %d)", rc);
}
END_TEST

Suite *nb_suite_nn_io(void) {
    Suite *s = suite_create("nn_io");
    TCase *t = tcase_create("modules");
    tcase_add_test(t, test_forward_n_basics);
    tcase_add_test(t, test_forward_n_hooks);
    tcase_add_test(t, test_sequential_and_identity_n);
    tcase_add_test(t, test_mha_forward_n);
    tcase_add_test(t, test_holders);
    tcase_add_test(t, test_loss_modules);
    tcase_add_test(t, test_modules_against_pytorch);
    suite_add_tcase(s, t);
    return s;
}
