/* test_decoder.c - the decoder models (nn/nb_decoder.h): parameter names and
 * shapes against transformers' GPT2LMHeadModel / LlamaForCausalLM, a GPT-2
 * block and a Llama layer against naive compositions of plain ops in
 * float64 (LayerNorm / RMSNorm by formula, explicit causal softmax
 * attention, rotate-half by cat/narrow, repeat_kv by index_select, GELU-tanh
 * and SiLU by formula), causal masking (no position sees the future), the KV
 * cache (prefill, chunked prefill and one-token decode give the full
 * forward's logits within 1e-5 in float32; crop), gradchecks of both blocks,
 * a few training steps, the rotary tables (theta, Llama 3 scaling values
 * from PyTorch), generation (greedy against a cache-free argmax loop,
 * seeded sampling, stop tokens, callback, length caps), the sampling warpers'
 * distributions, and error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_test.h"
#include "suites.h"

/* ---- models ------------------------------------------------------------------------------ */

static nb_module *tiny_gpt2(nb_dtype dt, int layers) {
    nb_gpt2_config c = nb_gpt2_config_default();
    c.vocab_size = 40, c.n_positions = 24, c.n_embd = 16, c.n_layer = layers, c.n_head = 4;
    c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0, c.initializer_range = 0.2, c.dtype = dt;
    nb_module *m = nb_gpt2(c);
    NB_CK_NOTNULL(m);
    return m;
}

static nb_module *tiny_llama_ex(nb_dtype dt, int layers, bool tied, bool bitlinear) {
    nb_llama_config c = nb_llama_config_default();
    c.vocab_size = 40, c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = layers;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64, c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = tied, c.initializer_range = 0.2, c.dtype = dt, c.bitlinear = bitlinear;
    nb_module *m = nb_llama(c);
    NB_CK_NOTNULL(m);
    return m;
}

static nb_module *tiny_llama(nb_dtype dt, int layers, bool tied) { return tiny_llama_ex(dt, layers, tied, false); }

static nb_tensor *ids_of(int64_t B, int64_t T, const int64_t *v) {
    nb_tensor *t = nb_from_data(v, 2, (int64_t[]){B, T}, NB_I64);
    NB_CK_NOTNULL(t);
    return t;
}

static nb_tensor *param(nb_module *m, const char *child, const char *name) {
    nb_tensor *t = nb_module_get(nb_module_child(m, child), name);
    ck_assert_msg(t != NULL, "no parameter %s.%s", child, name);
    return t;
}

/* ---- names ----------------------------------------------------------------------------------- */

START_TEST(test_names_gpt2) {
    nb_module *m = tiny_gpt2(NB_F32, 1);
    ck_assert_str_eq(nb_module_kind(m), "GPT2LMHeadModel");
    ck_assert_str_eq(nb_module_kind(nb_module_child(m, "transformer")), "GPT2Model");
    ck_assert_str_eq(nb_module_kind(nb_module_child(m, "transformer.h.0")), "GPT2Block");
    ck_assert_str_eq(nb_module_kind(nb_module_child(m, "transformer.h.0.attn.c_attn")), "Conv1D");
    /* [(n, tuple(p.shape)) for n, p in GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=24,
     *  n_embd=16, n_layer=1, n_head=4)).named_parameters()]: lm_head.weight is wte's, listed once */
    static const char *names[] = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
                                  "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight",
                                  "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight",
                                  "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight",
                                  "transformer.h.0.ln_2.bias", "transformer.h.0.mlp.c_fc.weight",
                                  "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.mlp.c_proj.weight",
                                  "transformer.h.0.mlp.c_proj.bias", "transformer.ln_f.weight", "transformer.ln_f.bias"};
    static const int64_t shapes[][2] = {{40, 16}, {24, 16}, {16, 0}, {16, 0}, {16, 48}, {48, 0}, {16, 16}, {16, 0},
                                        {16, 0},  {16, 0},  {16, 64}, {64, 0}, {64, 16}, {16, 0}, {16, 0}, {16, 0}};
    nb_named_tensor p[32];
    ck_assert_int_eq(nb_module_parameters(m, p, 32), 16);
    for (int i = 0; i < 16; i++) {
        ck_assert_str_eq(p[i].name, names[i]);
        nb_ck_shape(p[i].tensor, shapes[i][1] ? 2 : 1, shapes[i]);
    }
    /* the head is the embedding's tensor */
    ck_assert_ptr_eq(param(m, "lm_head", "weight"), param(m, "transformer.wte", "weight"));
    ck_assert_int_eq(nb_module_buffers(m, NULL, 0), 0);
    nb_module_free(m);
}
END_TEST

START_TEST(test_names_llama) {
    nb_module *m = tiny_llama(NB_F32, 1, false);
    ck_assert_str_eq(nb_module_kind(m), "LlamaForCausalLM");
    ck_assert_str_eq(nb_module_kind(nb_module_child(m, "model.layers.0")), "LlamaDecoderLayer");
    ck_assert_str_eq(nb_module_kind(nb_module_child(m, "model.rotary_emb")), "RotaryEmbedding");
    static const char *names[] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                  "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                                  "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                                  "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
                                  "model.layers.0.input_layernorm.weight",
                                  "model.layers.0.post_attention_layernorm.weight", "model.norm.weight",
                                  "lm_head.weight"};
    static const int64_t shapes[][2] = {{40, 16}, {16, 16}, {8, 16}, {8, 16}, {16, 16}, {24, 16},
                                        {24, 16}, {16, 24}, {16, 0}, {16, 0}, {16, 0}, {40, 16}};
    nb_named_tensor p[32];
    ck_assert_int_eq(nb_module_parameters(m, p, 32), 12);
    for (int i = 0; i < 12; i++) {
        ck_assert_str_eq(p[i].name, names[i]);
        nb_ck_shape(p[i].tensor, shapes[i][1] ? 2 : 1, shapes[i]);
    }
    nb_module_free(m);
    /* tied: lm_head.weight is not listed again */
    m = tiny_llama(NB_F32, 1, true);
    ck_assert_int_eq(nb_module_parameters(m, p, 32), 11);
    ck_assert_ptr_eq(param(m, "lm_head", "weight"), param(m, "model.embed_tokens", "weight"));
    ck_assert_int_eq(nb_llama_get_config(m).num_key_value_heads, 2);
    ck_assert_int_eq(nb_gpt2_get_config(m).n_layer, 0);
    nb_module_free(m);
}
END_TEST

/* ---- blocks against naive compositions ---------------------------------------------------------- */

/* softmax(q k^T / sqrt(d) + causal) v for [B, h, T, d] */
static nb_tensor *naive_causal_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v) {
    int64_t T = nb_size(q, 2);
    double *m = malloc(sizeof(double) * (size_t)(T * T));
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) m[i * T + j] = j > i ? -INFINITY : 0;
    nb_tensor *mask = nb_test_tensor(NB_SHAPE(T, T), nb_dtype_of(q), m);
    free(m);
    nb_tensor *s = nb_add(nb_mul_scalar(nb_matmul(q, nb_transpose(k, -1, -2)), 1 / sqrt((double)nb_size(q, 3))), mask);
    return nb_matmul(nb_softmax(s, -1), v);
}

static nb_tensor *heads(nb_tensor *x, int64_t n) { /* [B, T, n*d] -> [B, n, T, d] */
    int64_t B = nb_size(x, 0), T = nb_size(x, 1), d = nb_size(x, 2) / n;
    return nb_transpose(nb_reshape(x, 4, (int64_t[]){B, T, n, d}), 1, 2);
}

static nb_tensor *merge(nb_tensor *y) { /* [B, n, T, d] -> [B, T, n*d] */
    int64_t B = nb_size(y, 0), n = nb_size(y, 1), T = nb_size(y, 2), d = nb_size(y, 3);
    return nb_reshape(nb_transpose(y, 1, 2), 3, (int64_t[]){B, T, n * d});
}

static nb_tensor *gelu_tanh_formula(nb_tensor *x) {
    nb_tensor *inner = nb_mul_scalar(nb_add(x, nb_mul_scalar(nb_pow_scalar(x, 3), 0.044715)), sqrt(2 / M_PI));
    return nb_mul(nb_mul_scalar(x, 0.5), nb_add_scalar(nb_tanh(inner), 1));
}

START_TEST(test_gpt2_block_naive) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_module *m = tiny_gpt2(NB_F64, 1);
    nb_module *blk = nb_module_child(m, "transformer.h.0");
    nb_generator g = nb_generator_new(9);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 5, 16), NB_F64, &g);
    int64_t H = 16;
    nb_tensor *h = nb_layer_norm(x, 1, &H, param(blk, "ln_1", "weight"), param(blk, "ln_1", "bias"), 1e-5);
    nb_tensor *qkv = nb_add(nb_matmul(h, param(blk, "attn.c_attn", "weight")), param(blk, "attn.c_attn", "bias"));
    nb_tensor *y = naive_causal_attention(heads(nb_narrow(qkv, 2, 0, H), 4), heads(nb_narrow(qkv, 2, H, H), 4),
                                          heads(nb_narrow(qkv, 2, 2 * H, H), 4));
    nb_tensor *r = nb_add(x, nb_add(nb_matmul(merge(y), param(blk, "attn.c_proj", "weight")),
                                    param(blk, "attn.c_proj", "bias")));
    h = nb_layer_norm(r, 1, &H, param(blk, "ln_2", "weight"), param(blk, "ln_2", "bias"), 1e-5);
    h = gelu_tanh_formula(nb_add(nb_matmul(h, param(blk, "mlp.c_fc", "weight")), param(blk, "mlp.c_fc", "bias")));
    r = nb_add(r, nb_add(nb_matmul(h, param(blk, "mlp.c_proj", "weight")), param(blk, "mlp.c_proj", "bias")));
    nb_ck_close_to(nb_forward(blk, x), r, 1e-10);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *rms_formula(nb_tensor *x, nb_tensor *w, double eps) {
    int last = -1;
    return nb_mul(nb_mul(x, nb_rsqrt(nb_add_scalar(nb_mean(nb_mul(x, x), &last, 1, true), eps))), w);
}

static nb_tensor *rotate_formula(nb_tensor *x, nb_tensor *cos, nb_tensor *sin) {
    int64_t h = nb_size(x, -1) / 2;
    nb_tensor *cc[2] = {cos, cos}, *ss[2] = {sin, sin}, *rh[2] = {nb_neg(nb_narrow(x, -1, h, h)), nb_narrow(x, -1, 0, h)};
    return nb_add(nb_mul(x, nb_cat(cc, 2, -1)), nb_mul(nb_cat(rh, 2, -1), nb_cat(ss, 2, -1)));
}

static nb_tensor *repeat_kv(nb_tensor *k, int64_t g) {
    int64_t n = nb_size(k, 1), idx[16];
    for (int64_t i = 0; i < n * g; i++) idx[i] = i / g;
    return nb_index_select(k, 1, nb_from_data(idx, 1, (int64_t[]){n * g}, NB_I64));
}

static nb_tensor *lin(nb_tensor *x, nb_module *m, const char *child) {
    return nb_matmul(x, nb_transpose(param(m, child, "weight"), 0, 1));
}

START_TEST(test_llama_layer_naive) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    nb_module *m = tiny_llama(NB_F64, 1, false);
    nb_module *blk = nb_module_child(m, "model.layers.0");
    nb_generator g = nb_generator_new(10);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 6, 16), NB_F64, &g);
    /* theta 10000, head_dim 4: angles t * 10000^(-2i/4) */
    double cv[12], sv[12];
    for (int t = 0; t < 6; t++)
        for (int i = 0; i < 2; i++) cv[t * 2 + i] = cos(t * pow(1e4, -i / 2.0)), sv[t * 2 + i] = sin(t * pow(1e4, -i / 2.0));
    nb_tensor *cs = nb_test_tensor(NB_SHAPE(6, 2), NB_F64, cv), *sn = nb_test_tensor(NB_SHAPE(6, 2), NB_F64, sv);
    nb_tensor *h = rms_formula(x, param(blk, "input_layernorm", "weight"), 1e-5);
    nb_tensor *q = rotate_formula(heads(lin(h, blk, "self_attn.q_proj"), 4), cs, sn);
    nb_tensor *k = rotate_formula(heads(lin(h, blk, "self_attn.k_proj"), 2), cs, sn);
    nb_tensor *v = heads(lin(h, blk, "self_attn.v_proj"), 2);
    nb_tensor *y = naive_causal_attention(q, repeat_kv(k, 2), repeat_kv(v, 2));
    nb_tensor *r = nb_add(x, lin(merge(y), blk, "self_attn.o_proj"));
    h = rms_formula(r, param(blk, "post_attention_layernorm", "weight"), 1e-5);
    nb_tensor *gate = lin(h, blk, "mlp.gate_proj");
    r = nb_add(r, lin(nb_mul(nb_mul(gate, nb_sigmoid(gate)), lin(h, blk, "mlp.up_proj")), blk, "mlp.down_proj"));
    nb_ck_close_to(nb_forward(blk, x), r, 1e-10);
    /* the SwiGLU module alone */
    nb_module *mlp = nb_module_child(blk, "mlp");
    ck_assert_str_eq(nb_module_kind(mlp), "SwiGLU");
    nb_ck_close_to(nb_forward(mlp, h),
                   lin(nb_mul(nb_mul(gate, nb_sigmoid(gate)), lin(h, blk, "mlp.up_proj")), blk, "mlp.down_proj"), 1e-12);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

/* The matmul slot's calls in the profile report of f(x) (the profiler's text, as test_profile reads it). */
static int64_t matmul_calls(nb_module *blk, nb_tensor *x, nb_tensor **y) {
    nb_profiler_start();
    *y = nb_forward(blk, x);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(mem);
    nb_profiler_report(mem);
    fclose(mem);
    const char *line = strstr(text, "\nmatmul ");
    long long calls = 0;
    ck_assert_msg(line && sscanf(line + 8, " %*s %lld", &calls) == 1, "no matmul line in: %s", text);
    free(text);
    return calls;
}

static nb_status keep_output(nb_module *m, nb_tensor *in, nb_tensor *out, nb_tensor **replace, void *user) {
    (void)m, (void)in, (void)out, (void)replace;
    ++*(int *)user;
    return NB_OK;
}

/* A Llama's residual adds run inside the RMSNorm after them (nb_add_rms_norm; on CUDA one kernel each where
 * nothing records a gradient): its hidden states equal the block-by-block forward's bit for bit (a hook on a
 * layer or on the final norm turns the fusion off; the hook runs), with and without gradients, in float64 on the
 * CPU and in bfloat16 on each accelerator, where the fused run launches fewer kernels. */
static void check_fused_adds(nb_device dev, nb_dtype dt) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(9);
    NB_CK_OK(nb_set_default_device(dev));
    nb_module *m = tiny_llama(dt, 3, true);
    NB_CK_OK(nb_set_default_device(NB_CPU));
    nb_module_train(m, false);
    const int64_t v[10] = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7};
    nb_tensor *ids = nb_to_device(ids_of(2, 5, v), dev);
    for (int grad = 0; grad < 2; grad++) {
        bool prev = nb_set_grad_enabled(grad);
        const char *at[2] = {"model.layers.1", "model.norm"};
        for (int k = 0; k < 2; k++) {
            uint64_t l0 = nb_device_counters_get(dev).kernel_launches;
            nb_tensor *fused = nb_causal_lm_hidden(m, ids, NULL);
            uint64_t l1 = nb_device_counters_get(dev).kernel_launches;
            int seen = 0;
            nb_module *hooked = nb_module_child(m, at[k]);
            int64_t h = nb_module_register_forward_hook(hooked, keep_output, &seen);
            uint64_t l2 = nb_device_counters_get(dev).kernel_launches;
            nb_tensor *plain = nb_causal_lm_hidden(m, ids, NULL);
            uint64_t l3 = nb_device_counters_get(dev).kernel_launches;
            NB_CK_OK(nb_module_remove_hook(hooked, h));
            NB_CK_NOTNULL(fused);
            ck_assert_int_eq(seen, 1);
            nb_ck_close_to(nb_to_device(nb_to_dtype(fused, NB_F64), NB_CPU),
                           nb_to_device(nb_to_dtype(plain, NB_F64), NB_CPU), 0);
            if (dev.type == NB_DEVICE_CUDA && !grad) /* 4 adds and a norm fewer per layer pair, and so on */
                ck_assert_msg(l1 - l0 < l3 - l2, "fused %llu launches, plain %llu", (unsigned long long)(l1 - l0),
                              (unsigned long long)(l3 - l2));
        }
        nb_set_grad_enabled(prev);
    }
    nb_module_free(m);
    nb_scope_end(s);
}

START_TEST(test_fused_residual_adds) {
    check_fused_adds(NB_CPU, NB_F64);
    nb_device devs[8];
    int n = nb_test_accelerators(devs, 8);
    for (int i = 0; i < n; i++) check_fused_adds(devs[i], NB_BF16);
}
END_TEST

/* Inference runs q|k|v and gate|up as one product each (the weights packed
 * back to back at construction, state_dict loads copying into them): the
 * layer's output equals the unfused forward's (gradients on) and the
 * products drop from 7 to 4; a hook on q_proj, or a gradient wanted,
 * turns the q|k|v fusion off so the hook runs; more than 64 rows run the
 * MLP unfused (its packed output would outlive silu(gate) in a long prefill). */
START_TEST(test_fused_projections) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_module *m = tiny_llama(NB_F64, 1, false);
    nb_module *blk = nb_module_child(m, "model.layers.0");
    const char *qkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    for (int i = 0; i < 3; i++) { /* packed: one storage, back to back */
        ck_assert(nb_shares_storage(param(blk, qkv[0], "weight"), param(blk, qkv[i], "weight")));
        ck_assert_int_eq(nb_storage_offset(param(blk, qkv[i], "weight")), i == 0 ? 0 : i == 1 ? 16 * 16 : 16 * 16 + 8 * 16);
    }
    ck_assert(nb_shares_storage(param(blk, "mlp.gate_proj", "weight"), param(blk, "mlp.up_proj", "weight")));
    nb_generator g = nb_generator_new(11);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 16), NB_F64, &g), *want, *got;
    ck_assert_int_eq(matmul_calls(blk, x, &want), 7); /* parameters require grad: one by one */
    bool prev = nb_set_grad_enabled(false);
    ck_assert_int_eq(matmul_calls(blk, x, &got), 4);
    nb_ck_close_to(got, want, 1e-12);
    /* a state_dict load copies into the packed storage: still fused, new values */
    nb_tensor *wq = param(blk, qkv[1], "weight");
    NB_CK_OK(nb_fill_(wq, 0.01));
    ck_assert_int_eq(matmul_calls(blk, x, &got), 4);
    nb_set_grad_enabled(prev);
    ck_assert_int_eq(matmul_calls(blk, x, &want), 7);
    nb_set_grad_enabled(false);
    nb_ck_close_to(got, want, 1e-12);
    int seen = 0; /* a hook on q_proj: q, k, v one by one, the hook runs */
    nb_module *q = nb_module_child(blk, qkv[0]);
    int64_t h = nb_module_register_forward_hook(q, keep_output, &seen);
    ck_assert_int_gt(h, 0);
    ck_assert_int_eq(matmul_calls(blk, x, &got), 6);
    ck_assert_int_eq(seen, 1);
    nb_ck_close_to(got, want, 1e-12);
    NB_CK_OK(nb_module_remove_hook(q, h));
    nb_tensor *big = nb_randn(NB_SHAPE(1, 65, 16), NB_F64, &g); /* 65 rows: the MLP unfused */
    ck_assert_int_eq(matmul_calls(blk, big, &got), 5);
    nb_set_grad_enabled(prev);
    nb_ck_close_to(got, nb_forward(blk, big), 1e-12);
    nb_module_free(m);
    /* biases on every projection: packed too, the fused forward the same */
    nb_llama_config c = nb_llama_config_default();
    c.vocab_size = 40, c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 1;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.attention_bias = c.mlp_bias = true, c.dtype = NB_F64;
    nb_scope *built = nb_scope_begin(); /* whatever construction leaves in the caller's scope */
    size_t before = nb_memory_stats_get(NB_CPU).allocated;
    m = nb_llama(c);
    NB_CK_NOTNULL(m);
    blk = nb_module_child(m, "model.layers.0");
    ck_assert(nb_shares_storage(param(blk, qkv[0], "bias"), param(blk, qkv[2], "bias")));
    ck_assert(nb_shares_storage(param(blk, "mlp.gate_proj", "bias"), param(blk, "mlp.up_proj", "bias")));
    nb_scope *fw = nb_scope_begin();
    NB_CK_OK(nb_normal_(param(blk, qkv[1], "bias"), 0, 1, NULL)); /* biases are 0 at first */
    NB_CK_OK(nb_normal_(param(blk, "mlp.up_proj", "bias"), 0, 1, NULL));
    ck_assert_int_eq(matmul_calls(blk, x, &want), 7);
    nb_set_grad_enabled(false);
    ck_assert_int_eq(matmul_calls(blk, x, &got), 4);
    nb_set_grad_enabled(prev);
    nb_ck_close_to(got, want, 1e-12);
    nb_scope_end(fw);
    nb_module_free(m); /* its packed storage freed with it, though the scope it was built in lives on */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).allocated, before);
    nb_scope_end(built);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *f_block(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_forward(ctx, in[0]);
}

START_TEST(test_blocks_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_module *g = tiny_gpt2(NB_F64, 1), *l = tiny_llama(NB_F64, 1, false);
    nb_tensor *in[1] = {nb_test_randn_grad(NB_SHAPE(1, 3, 16), 21)};
    nb_ck_gradcheck(f_block, in, 1, nb_module_child(g, "transformer.h.0"));
    nb_ck_gradcheck(f_block, in, 1, nb_module_child(l, "model.layers.0"));
    nb_module_free(g), nb_module_free(l);
    nb_scope_end(s);
}
END_TEST

/* ---- causal masking, the KV cache ------------------------------------------------------------------ */

START_TEST(test_causal_masking) {
    nb_scope *s = nb_scope_begin();
    nb_module *ms[2] = {tiny_gpt2(NB_F64, 2), tiny_llama(NB_F64, 2, false)};
    int64_t a[8] = {1, 5, 9, 2, 7, 3, 3, 8}, b[8] = {1, 5, 9, 2, 30, 31, 0, 12};
    for (int k = 0; k < 2; k++) {
        nb_tensor *la = nb_forward(ms[k], ids_of(1, 8, a)), *lb = nb_forward(ms[k], ids_of(1, 8, b));
        nb_ck_shape(la, 3, (int64_t[]){1, 8, 40});
        /* positions 0..3 see the same tokens: equal logits; position 4 differs */
        nb_ck_close_to(nb_narrow(lb, 1, 0, 4), nb_narrow(la, 1, 0, 4), 0);
        double *va = nb_test_values_of(nb_narrow(la, 1, 4, 1)), *vb = nb_test_values_of(nb_narrow(lb, 1, 4, 1));
        double diff = 0;
        for (int i = 0; i < 40; i++) diff = fmax(diff, fabs(va[i] - vb[i]));
        ck_assert_msg(diff > 1e-6, "position 4 should depend on its own token");
        free(va), free(vb);
    }
    nb_module_free(ms[0]), nb_module_free(ms[1]);
    nb_scope_end(s);
}
END_TEST

/* Full-forward logits of ids [B, 10] against the cache fed 4, then 3 (a
 * chunk after a prefix), then 1, 1, 1 tokens. */
static void check_cache(nb_module *m) {
    int64_t v[20];
    for (int i = 0; i < 20; i++) v[i] = (i * 7 + 3) % 40;
    nb_tensor *ids = ids_of(2, 10, v);
    nb_tensor *full = nb_causal_lm_forward(m, ids, NULL);
    nb_kv_cache *c = nb_kv_cache_new(m, 2, 12);
    NB_CK_NOTNULL(c);
    const int64_t chunks[5][2] = {{0, 4}, {4, 3}, {7, 1}, {8, 1}, {9, 1}};
    for (int i = 0; i < 5; i++) {
        int64_t at = chunks[i][0], len = chunks[i][1];
        ck_assert_int_eq(nb_kv_cache_length(c), at);
        nb_tensor *step = nb_causal_lm_forward(m, nb_contiguous(nb_narrow(ids, 1, at, len)), c);
        nb_ck_close_to(step, nb_narrow(full, 1, at, len), 1e-5);
        ck_assert_int_eq(nb_requires_grad(step), false); /* the cached path records no tape */
    }
    /* crop back to 4 tokens and feed the rest at once */
    NB_CK_OK(nb_kv_cache_crop(c, 4));
    nb_ck_close_to(nb_causal_lm_forward(m, nb_contiguous(nb_narrow(ids, 1, 4, 6)), c), nb_narrow(full, 1, 4, 6), 1e-5);
    /* full: 10 + 3 > 12 */
    NB_CK_FAILS(nb_causal_lm_forward(m, nb_contiguous(nb_narrow(ids, 1, 0, 3)), c), NB_ERR_SHAPE);
    ck_assert_int_eq(nb_kv_cache_crop(c, 11), NB_ERR_INVALID_ARG);
    /* a batch of 1 into a cache of 2 */
    NB_CK_OK(nb_kv_cache_crop(c, 0));
    NB_CK_FAILS(nb_causal_lm_forward(m, nb_contiguous(nb_narrow(ids, 0, 0, 1)), c), NB_ERR_SHAPE);
    nb_kv_cache_free(c);
}

START_TEST(test_kv_cache_matches_full_forward) {
    nb_scope *s = nb_scope_begin();
    nb_module *g = tiny_gpt2(NB_F32, 2), *l = tiny_llama(NB_F32, 2, true);
    NB_CK_OK(nb_set_requires_grad(param(g, "transformer.wte", "weight"), true));
    check_cache(g);
    check_cache(l);
    /* a cache of another model, a cache past n_positions */
    nb_kv_cache *c = nb_kv_cache_new(l, 1, 8);
    NB_CK_FAILS(nb_causal_lm_forward(g, ids_of(1, 1, (int64_t[]){1}), c), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_kv_cache_new(g, 1, 25), NB_ERR_INVALID_ARG);
    nb_module *relu = nb_nn_relu();
    NB_CK_FAILS(nb_kv_cache_new(relu, 1, 8), NB_ERR_INVALID_ARG);
    nb_module_free(relu);
    nb_kv_cache_free(c);
    nb_module_free(g), nb_module_free(l);
    nb_scope_end(s);
}
END_TEST

/* ---- training ------------------------------------------------------------------------------------------ */

/* GPT-2, Llama and a BitNet b1.58 Llama (BitLinear projections, the same
 * parameter names) each halve their loss on a fixed batch in 30 steps. */
START_TEST(test_training_steps) {
    nb_scope *outer = nb_scope_begin();
    nb_manual_seed(5);
    nb_module *ms[3] = {tiny_gpt2(NB_F32, 2), tiny_llama(NB_F32, 2, false), tiny_llama_ex(NB_F32, 2, false, true)};
    ck_assert_str_eq(nb_module_kind(nb_module_child(ms[2], "model.layers.1.self_attn.q_proj")), "BitLinear");
    ck_assert_str_eq(nb_module_kind(nb_module_child(ms[2], "model.layers.0.mlp.down_proj")), "BitLinear");
    ck_assert_str_eq(nb_module_kind(nb_module_child(ms[2], "lm_head")), "Linear");
    nb_named_tensor pa[64], pb[64];
    int na = nb_module_parameters(ms[1], pa, 64), nbl = nb_module_parameters(ms[2], pb, 64);
    ck_assert_int_eq(na, nbl);
    for (int i = 0; i < na; i++) ck_assert_str_eq(pa[i].name, pb[i].name);
    int64_t v[32];
    for (int i = 0; i < 32; i++) v[i] = (i * i + 3 * i) % 40;
    nb_tensor *x = ids_of(2, 16, v);
    for (int k = 0; k < 3; k++) {
        nb_optimizer *opt = nb_adamw(ms[k], (nb_adam_options){.lr = 3e-3});
        double first = 0, last = 0;
        for (int step = 0; step < 30; step++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *logits = nb_forward(ms[k], nb_contiguous(nb_narrow(x, 1, 0, 15)));
            nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, 2, (int64_t[]){30, 40}),
                                               nb_reshape(nb_contiguous(nb_narrow(x, 1, 1, 15)), 1, (int64_t[]){30}));
            nb_optimizer_zero_grad(opt);
            NB_CK_OK(nb_backward(loss));
            if (step == 0) { /* every parameter got a gradient, the tied one from both uses */
                nb_named_tensor p[64];
                int n = nb_module_parameters(ms[k], p, 64);
                for (int i = 0; i < n; i++) ck_assert_msg(nb_tensor_grad(p[i].tensor), "%s has no grad", p[i].name);
            }
            NB_CK_OK(nb_optimizer_step(opt));
            if (step == 0) first = nb_item(loss);
            last = nb_item(loss);
            nb_scope_end(s);
        }
        ck_assert_msg(last < 0.5 * first, "loss %g -> %g", first, last);
        nb_optimizer_free(opt);
        nb_module_free(ms[k]);
    }
    nb_scope_end(outer);
}
END_TEST

/* A BitNet Llama packed for inference (nb_module_bitnet_pack) gives the
 * logits of its training forward up to float rounding (float64 model; the
 * packed scales are float32), with a tied head left as it is. */
START_TEST(test_bitnet_packed_llama) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(6);
    nb_module *m = tiny_llama_ex(NB_F64, 2, true, true);
    nb_module_train(m, false);
    int64_t v[24];
    for (int i = 0; i < 24; i++) v[i] = (5 * i + 1) % 40;
    nb_tensor *x = ids_of(2, 12, v);
    nb_tensor *before = nb_forward(m, x);
    NB_CK_OK(nb_module_bitnet_pack(m));
    ck_assert_ptr_null(nb_module_get(nb_module_child(m, "model.layers.0.mlp.up_proj"), "weight"));
    NB_CK_NOTNULL(nb_module_get(nb_module_child(m, "model.layers.1.self_attn.q_proj"), "weight_packed"));
    NB_CK_NOTNULL(nb_module_get(nb_module_child(m, "model.embed_tokens"), "weight"));
    /* inference only: with grad on, the embedding's output requires grad and the packed product refuses it */
    NB_CK_FAILS(nb_forward(m, x), NB_ERR_UNSUPPORTED);
    bool prev = nb_set_grad_enabled(false);
    nb_ck_close_to(nb_forward(m, x), before, 1e-4);
    nb_set_grad_enabled(prev);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

/* ---- rotary tables ---------------------------------------------------------------------------------------- */

START_TEST(test_rotary_tables) {
    nb_scope *s = nb_scope_begin();
    /* PyTorch, transformers' _compute_llama3_parameters in float64: head_dim 8, theta 1e4,
     * factor 4, low 1, high 4, original 16; positions 3, 4, 5 */
    nb_module *r = nb_nn_rotary_embedding(8, (nb_rope_config){.theta = 1e4, .factor = 4, .low_freq_factor = 1,
                                                              .high_freq_factor = 4, .original_max_position_embeddings = 16},
                                          NB_F64);
    NB_CK_NOTNULL(r);
    ck_assert_int_eq(nb_module_parameters(r, NULL, 0) + nb_module_buffers(r, NULL, 0), 0);
    nb_tensor *c, *sn;
    NB_CK_OK(nb_nn_rotary_embedding_forward(r, 3, 3, &c, &sn));
    nb_ck_close(c,
                (double[]){-0.3326035756124746, 0.9971888181122075, 0.9999718751318357, 0.9999997187500131,
                           -0.8280848398163316, 0.9950041652780257, 0.9999500004166653, 0.9999995000000417,
                           -0.9991387409946791, 0.992197667229329, 0.9999218760172472, 0.9999992187501017},
                12, 1e-14, 1e-13);
    nb_ck_close(sn,
                (double[]){0.9430667322569474, 0.07492970727274235, 0.007499929687697754, 0.000749999929687502,
                           0.560602798839214, 0.09983341664682815, 0.009999833334166664, 0.0009999998333333417,
                           -0.0414942916985869, 0.12467473338522769, 0.012499674481709789, 0.001249999674479192},
                12, 1e-14, 1e-13);
    nb_module_free(r);
    /* no scaling: angle t * theta^(-2i/d) */
    r = nb_nn_rotary_embedding(4, (nb_rope_config){.theta = 100}, NB_F32);
    NB_CK_OK(nb_nn_rotary_embedding_forward(r, 2, 7, &c, &sn));
    nb_ck_close(c, (double[]){cos(7), cos(0.7), cos(8), cos(0.8)}, 4, 1e-6, 0);
    nb_ck_close(sn, (double[]){sin(7), sin(0.7), sin(8), sin(0.8)}, 4, 1e-6, 0);
    ck_assert_int_eq(nb_nn_rotary_embedding_forward(r, -1, 0, &c, &sn), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_forward(r, c), NB_ERR_INVALID_ARG);
    nb_module_free(r);
    NB_CK_FAILS(nb_nn_rotary_embedding(5, (nb_rope_config){.theta = 100}, NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_rotary_embedding(4, (nb_rope_config){.theta = 0}, NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_rotary_embedding(4, (nb_rope_config){.theta = 10, .factor = 2}, NB_F32), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- generation ------------------------------------------------------------------------------------------------ */

typedef struct {
    int calls, stop_after;
    int64_t seen[64];
} cb_state;

static bool on_token(void *user, int64_t tok) {
    cb_state *c = user;
    c->seen[c->calls++] = tok;
    return c->calls != c->stop_after;
}

/* Greedy continuation by full forwards without a cache. */
static void naive_greedy(nb_module *m, const int64_t *prompt, int64_t n, int64_t steps, int64_t *out) {
    int64_t seq[64];
    memcpy(seq, prompt, sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < steps; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *l = nb_forward(m, ids_of(1, n + i, seq));
        nb_tensor *a = nb_argmax(nb_to_dtype(nb_narrow(l, 1, n + i - 1, 1), NB_F32), -1, false); /* 16-bit: exact */
        int64_t t;
        NB_CK_OK(nb_to_host(a, &t, sizeof t));
        seq[n + i] = out[i] = t;
        nb_scope_end(s);
    }
}

/* int8 weight-only Llama: q/k/v/o, the MLP and the tied head (an int8
 * copy) convert, the embedding keeps its float weight, the forward stays
 * near the float one, and
 * greedy generation (few rows a step: the int8 kernel) equals the naive
 * greedy loop over the converted model's full forward. */
START_TEST(test_int8_weight_only_llama) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(6);
    nb_module *m = tiny_llama_ex(NB_F32, 2, true, false);
    nb_module_train(m, false);
    int64_t v[24];
    for (int i = 0; i < 24; i++) v[i] = (5 * i + 1) % 40;
    nb_tensor *x = ids_of(2, 12, v);
    nb_tensor *before = nb_forward(m, x);
    NB_CK_OK(nb_module_int8_weight_only(m));
    ck_assert_ptr_null(nb_module_get(nb_module_child(m, "model.layers.0.mlp.up_proj"), "weight"));
    NB_CK_NOTNULL(nb_module_get(nb_module_child(m, "model.layers.1.self_attn.k_proj"), "weight_int8"));
    NB_CK_NOTNULL(nb_module_get(nb_module_child(m, "model.embed_tokens"), "weight"));
    NB_CK_NOTNULL(nb_module_get(nb_module_child(m, "lm_head"), "weight_int8"));
    ck_assert_ptr_null(nb_module_get(nb_module_child(m, "lm_head"), "weight"));
    nb_ck_close_to(nb_forward(m, x), before, 0.2); /* logits of a few units; weights within amax / 255 */
    const int64_t prompt[3] = {4, 17, 9};
    int64_t out[16], want[16];
    ck_assert_int_eq(nb_generate(m, prompt, 3, out, 16, (nb_generate_options){.max_new_tokens = 8}), 8);
    naive_greedy(m, prompt, 3, 8, want);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(out[i], want[i]);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_generate) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(7);
    nb_module *ms[2] = {tiny_gpt2(NB_F32, 2), tiny_llama(NB_F32, 2, false)};
    const int64_t prompt[3] = {4, 17, 9};
    for (int k = 0; k < 2; k++) {
        nb_module *m = ms[k];
        int64_t out[32], want[32], again[32];
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 32, (nb_generate_options){.max_new_tokens = 12}), 12);
        naive_greedy(m, prompt, 3, 12, want);
        for (int i = 0; i < 12; i++) ck_assert_int_eq(out[i], want[i]);
        ck_assert(nb_module_is_training(m)); /* the mode is restored */
        /* top_k 1 is greedy */
        nb_generator g1 = nb_generator_new(1);
        ck_assert_int_eq(nb_generate(m, prompt, 3, again, 32,
                                     (nb_generate_options){.max_new_tokens = 12, .temperature = 0.7, .top_k = 1, .gen = &g1}),
                         12);
        for (int i = 0; i < 12; i++) ck_assert_int_eq(again[i], want[i]);
        /* sampling: the same generator state gives the same tokens */
        nb_generator ga = nb_generator_new(99), gb = nb_generator_new(99);
        nb_generate_options o = {.max_new_tokens = 15, .temperature = 1.5, .top_p = 0.95, .gen = &ga};
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 32, o), 15);
        o.gen = &gb;
        ck_assert_int_eq(nb_generate(m, prompt, 3, again, 32, o), 15);
        for (int i = 0; i < 15; i++) ck_assert_int_eq(out[i], again[i]);
        ck_assert(ga.offset == gb.offset && ga.offset == 15); /* one Philox block per token */
        /* stop tokens: generation ends after the first one, which is kept */
        int64_t stop = want[4];
        int first = 0;
        while (want[first] != stop) first++;
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 32,
                                     (nb_generate_options){.max_new_tokens = 12, .stop_tokens = &stop, .n_stop_tokens = 1}),
                         first + 1);
        /* the callback sees each token and can stop; out may be NULL */
        cb_state cb = {.stop_after = 5};
        ck_assert_int_eq(nb_generate(m, prompt, 3, NULL, 0,
                                     (nb_generate_options){.max_new_tokens = 12, .callback = on_token, .user = &cb}),
                         5);
        for (int i = 0; i < 5; i++) ck_assert_int_eq(cb.seen[i], want[i]);
        /* a short output buffer still counts every token */
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 2, (nb_generate_options){.max_new_tokens = 6}), 6);
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 2, (nb_generate_options){.max_new_tokens = 0}), 0);
        /* errors */
        nb_clear_error();
        ck_assert_int_eq(nb_generate(m, (int64_t[]){40}, 1, out, 2, (nb_generate_options){.max_new_tokens = 2}), -1);
        ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
        ck_assert_int_eq(nb_generate(m, prompt, 0, out, 2, (nb_generate_options){.max_new_tokens = 2}), -1);
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 2, (nb_generate_options){.max_new_tokens = 2, .top_p = 2}), -1);
        ck_assert_int_eq(nb_generate(m, prompt, 3, out, 2, (nb_generate_options){.max_new_tokens = 2, .temperature = -1}), -1);
    }
    /* GPT-2 stops at n_positions (24): a prompt of 20 gets 4 tokens */
    int64_t long_prompt[24] = {0}, out[32];
    ck_assert_int_eq(nb_generate(ms[0], long_prompt, 20, out, 32, (nb_generate_options){.max_new_tokens = 10}), 4);
    ck_assert_int_eq(nb_generate(ms[0], long_prompt, 24, out, 32, (nb_generate_options){.max_new_tokens = 10}), 0);
    nb_module *relu = nb_nn_relu();
    ck_assert_int_eq(nb_generate(relu, prompt, 3, out, 32, (nb_generate_options){.max_new_tokens = 1}), -1);
    nb_module_free(relu);
    nb_module_free(ms[0]), nb_module_free(ms[1]);
    nb_scope_end(s);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------------------------------- */

/* 16-bit models (bfloat16, float16) on dev: the float32 model's weights
 * rounded give logits within the dtype's rounding; the KV cache and
 * generate agree with full forwards in the same dtype; save_pretrained /
 * from_pretrained keep the dtype and the bits. */
static void check_16bit(nb_device dev) {
    NB_CK_OK(nb_set_default_device(dev));
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_dec16_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int64_t v[20];
    for (int i = 0; i < 20; i++) v[i] = (i * 7 + 3) % 40;
    for (int k = 0; k < 4; k++) {
        nb_dtype dt = k % 2 ? NB_F16 : NB_BF16;
        double rel = dt == NB_BF16 ? 3e-2 : 5e-3; /* of the logits' largest magnitude */
        nb_manual_seed(3);
        nb_module *f = k < 2 ? tiny_gpt2(NB_F32, 2) : tiny_llama(NB_F32, 2, k == 3);
        nb_module *h = k < 2 ? tiny_gpt2(dt, 2) : tiny_llama(dt, 2, k == 3);
        nb_named_tensor *sd;
        int n = nb_module_state_dict(h, &sd);
        for (int i = 0; i < n; i++) ck_assert_msg(nb_dtype_of(sd[i].tensor) == dt, "%s", sd[i].name);
        free(sd);
        n = nb_module_state_dict(f, &sd);
        NB_CK_OK(nb_module_load_tensors(h, sd, n, true, NULL));
        free(sd);
        nb_module_train(f, false), nb_module_train(h, false);
        nb_tensor *ids = ids_of(2, 10, v), *lf = nb_forward(f, ids), *lh = nb_forward(h, ids);
        NB_CK_NOTNULL(lh);
        ck_assert_int_eq(nb_dtype_of(lh), dt);
        double big = nb_item(nb_max(nb_abs(lf), NULL, 0, false));
        double diff = nb_item(nb_max(nb_abs(nb_sub(nb_to_dtype(lh, NB_F32), lf)), NULL, 0, false));
        ck_assert_msg(diff <= rel * big, "model %d in %s: logits differ by %g (largest %g)", k, nb_dtype_name(dt), diff, big);
        /* the cache in the model's dtype: prefix 6, then 1, 1, 1, 1 */
        nb_kv_cache *c = nb_kv_cache_new(h, 2, 12);
        NB_CK_NOTNULL(c);
        for (int64_t at = 0; at < 10; at += at ? 1 : 6) {
            int64_t len = at ? 1 : 6;
            nb_tensor *step = nb_causal_lm_forward(h, nb_contiguous(nb_narrow(ids, 1, at, len)), c);
            NB_CK_NOTNULL(step);
            ck_assert_int_eq(nb_dtype_of(step), dt);
            nb_ck_close_to(nb_to_dtype(step, NB_F32), nb_to_dtype(nb_narrow(lh, 1, at, len), NB_F32), rel * big);
        }
        nb_kv_cache_free(c);
        const int64_t prompt[3] = {4, 17, 9};
        int64_t out[16], want[16];
        ck_assert_int_eq(nb_generate(h, prompt, 3, out, 16, (nb_generate_options){.max_new_tokens = 8}), 8);
        naive_greedy(h, prompt, 3, 8, want);
        for (int i = 0; i < 8; i++) ck_assert_int_eq(out[i], want[i]);
        /* on CUDA the default replays a captured step: op by op gives the same tokens, with many more launches
           (a capture that failed would fall back to eager steps silently) */
        int64_t eager[16];
        uint64_t l0 = nb_device_counters_get(dev).kernel_launches;
        ck_assert_int_eq(nb_generate(h, prompt, 3, eager, 16, (nb_generate_options){.max_new_tokens = 16, .eager_decode = true}), 16);
        uint64_t l1 = nb_device_counters_get(dev).kernel_launches;
        ck_assert_int_eq(nb_generate(h, prompt, 3, out, 16, (nb_generate_options){.max_new_tokens = 16}), 16);
        uint64_t l2 = nb_device_counters_get(dev).kernel_launches;
        for (int i = 0; i < 16; i++) ck_assert_int_eq(eager[i], out[i]);
        if (dev.type == NB_DEVICE_CUDA)
            ck_assert_msg(2 * (l2 - l1) < l1 - l0, "graph decode launched %llu kernels, eager %llu",
                          (unsigned long long)(l2 - l1), (unsigned long long)(l1 - l0));
        /* a 16-bit checkpoint comes back in its dtype, bit for bit */
        NB_CK_OK(nb_save_pretrained(h, dir));
        char cfg[128];
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        char *text = nb_test_slurp(cfg, NULL);
        ck_assert_ptr_nonnull(strstr(text, dt == NB_BF16 ? "\"bfloat16\"" : "\"float16\""));
        free(text);
        nb_module *back = nb_from_pretrained(dir, NULL);
        NB_CK_NOTNULL(back);
        nb_ck_close_to(nb_to_dtype(nb_forward(back, ids), NB_F32), nb_to_dtype(lh, NB_F32), 0);
        nb_module *wide = nb_from_pretrained_as(dir, NB_F32, NULL); /* torch_dtype=float32 */
        NB_CK_NOTNULL(wide);
        ck_assert_int_eq(nb_dtype_of(nb_forward(wide, ids)), NB_F32);
        NB_CK_FAILS(nb_from_pretrained_as(dir, NB_I64, NULL), NB_ERR_DTYPE);
        nb_module_free(back), nb_module_free(wide), nb_module_free(f), nb_module_free(h);
    }
    nb_test_rmtree(dir);
    nb_scope_end(s);
    NB_CK_OK(nb_set_default_device(NB_CPU));
}

START_TEST(test_decoder_16bit) {
    check_16bit(NB_CPU);
    if (nb_device_count(NB_DEVICE_CUDA) > 0) check_16bit(NB_CUDA(0)); /* the GPU machine */
}
END_TEST

/* The static decode step (nb_decoder_step_at, what generate captures in a
 * CUDA graph): the cache written at a position held in a tensor, attention
 * over the whole cache under keys <= pos. Its logits equal the cache
 * path's, step by step, on the CPU. */
START_TEST(test_static_decode_step) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_module *ms[2] = {tiny_gpt2(NB_F32, 2), tiny_llama(NB_F32, 2, false)};
    for (int k = 0; k < 2; k++) {
        nb_module *m = ms[k];
        nb_module_train(m, false);
        int64_t v[9] = {4, 17, 9, 30, 2, 11, 25, 7, 13};
        nb_kv_cache *a = nb_kv_cache_new(m, 1, 12), *b = nb_kv_cache_new(m, 1, 12);
        nb_tensor *prompt = ids_of(1, 4, v);
        NB_CK_NOTNULL(nb_causal_lm_hidden(m, prompt, a));
        NB_CK_NOTNULL(nb_causal_lm_hidden(m, prompt, b));
        nb_tensor *pos = nb_from_data((int64_t[]){4}, 1, (int64_t[]){1}, NB_I64);
        nb_tensor *keys = nb_arange(0, 12, 1, NB_I64);
        for (int t = 4; t < 9; t++) {
            nb_tensor *id = ids_of(1, 1, &v[t]);
            nb_tensor *want = nb_causal_lm_forward(m, id, a);
            nb_tensor *got = nb_causal_lm_head(m, nb_decoder_step_at(m, id, b, pos, keys));
            nb_ck_close_to(got, want, 1e-5);
            NB_CK_OK(nb_copy_(pos, nb_add_scalar(pos, 1)));
        }
        NB_CK_FAILS(nb_decoder_step_at(m, ids_of(1, 2, v), b, pos, keys), NB_ERR_INVALID_ARG);
        nb_kv_cache_free(a), nb_kv_cache_free(b);
        nb_module_free(m);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_config_and_input_errors) {
    nb_scope *s = nb_scope_begin();
    nb_gpt2_config g = nb_gpt2_config_default();
    g.n_embd = 10, g.n_head = 4;
    NB_CK_FAILS(nb_gpt2(g), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "GPT-2"));
    g = nb_gpt2_config_default();
    g.attn_pdrop = 1;
    NB_CK_FAILS(nb_gpt2(g), NB_ERR_INVALID_ARG);
    g = nb_gpt2_config_default();
    g.dtype = NB_I64;
    NB_CK_FAILS(nb_gpt2(g), NB_ERR_DTYPE);
    nb_llama_config l = nb_llama_config_default();
    l.num_key_value_heads = 5;
    NB_CK_FAILS(nb_llama(l), NB_ERR_INVALID_ARG);
    l = nb_llama_config_default();
    l.head_dim = 7;
    NB_CK_FAILS(nb_llama(l), NB_ERR_INVALID_ARG);
    l = nb_llama_config_default();
    l.num_hidden_layers = 0;
    NB_CK_FAILS(nb_llama(l), NB_ERR_INVALID_ARG);
    nb_module *m = tiny_gpt2(NB_F32, 1);
    NB_CK_FAILS(nb_forward(m, nb_zeros(NB_SHAPE(1, 3), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_forward(m, nb_zeros(NB_SHAPE(3), NB_I64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_forward(m, ids_of(1, 2, (int64_t[]){1, 40})), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_forward(m, nb_zeros(NB_SHAPE(1, 25), NB_I64)), NB_ERR_SHAPE); /* past n_positions */
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "n_positions"));
    nb_module *relu = nb_nn_relu();
    NB_CK_FAILS(nb_causal_lm_forward(relu, nb_zeros(NB_SHAPE(1, 3), NB_I64), NULL), NB_ERR_INVALID_ARG);
    nb_module_free(relu);
    ck_assert(!nb_is_causal_lm(nb_module_child(m, "transformer")));
    nb_module_free(m);
    NB_CK_FAILS(nb_nn_rms_norm(0, 1e-5, NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_swiglu(0, 4, false, NB_F32), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_decoder(void) {
    Suite *s = suite_create("decoder");
    TCase *tc = tcase_create("decoder");
    tcase_add_test(tc, test_names_gpt2);
    tcase_add_test(tc, test_names_llama);
    tcase_add_test(tc, test_gpt2_block_naive);
    tcase_add_test(tc, test_llama_layer_naive);
    tcase_add_test(tc, test_fused_projections);
    tcase_add_test(tc, test_fused_residual_adds);
    tcase_add_test(tc, test_blocks_gradcheck);
    tcase_add_test(tc, test_causal_masking);
    tcase_add_test(tc, test_kv_cache_matches_full_forward);
    tcase_add_test(tc, test_training_steps);
    tcase_add_test(tc, test_bitnet_packed_llama);
    tcase_add_test(tc, test_int8_weight_only_llama);
    tcase_add_test(tc, test_rotary_tables);
    tcase_add_test(tc, test_generate);
    tcase_add_test(tc, test_decoder_16bit);
    tcase_add_test(tc, test_static_decode_step);
    tcase_add_test(tc, test_config_and_input_errors);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}
