/* test_decoder_io.c - Hugging Face checkpoint directories of the decoders:
 * save_pretrained / from_pretrained round trips (same logits bit for bit,
 * config.json fields), strict loads naming missing, unexpected and
 * mis-shaped keys (and changing nothing), the key variants transformers
 * accepts (the hub's bare GPT2Model names with their attn.bias buffers, a
 * stored tied head, sharded files with model.safetensors.index.json,
 * bfloat16 weights), config.json errors, and the PyTorch interoperability
 * script (tests/interop/decoder_interop.py): nabla's GPT-2 and Llama
 * checkpoints give the same logits in plain-torch transformers formulas
 * (within 1e-4), and checkpoints written there load here with PyTorch's logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_data.h"
#include "nb_test.h"
#include "suites.h"

static char dir[64];
static nb_scope *scope;

static void tmp_setup(void) {
    strcpy(dir, "/tmp/nb_dec_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    scope = nb_scope_begin();
}

static void tmp_teardown(void) {
    nb_scope_end(scope);
    nb_test_rmtree(dir);
}

static const char *path_in(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static nb_module *gpt2_model(int layers, int64_t vocab) {
    nb_gpt2_config c = nb_gpt2_config_default();
    c.vocab_size = vocab, c.n_positions = 32, c.n_embd = 32, c.n_layer = layers, c.n_head = 4;
    c.initializer_range = 0.1;
    nb_module *m = nb_gpt2(c);
    NB_CK_NOTNULL(m);
    nb_module_train(m, false);
    return m;
}

static nb_module *llama_model_ex(int layers, bool tied, bool bitlinear) {
    nb_llama_config c = nb_llama_config_default();
    c.vocab_size = 96, c.hidden_size = 32, c.intermediate_size = 48, c.num_hidden_layers = layers;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64, c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = tied, c.initializer_range = 0.1, c.bitlinear = bitlinear;
    c.rope = (nb_rope_config){.theta = 10000, .factor = 4, .low_freq_factor = 1, .high_freq_factor = 4,
                              .original_max_position_embeddings = 16};
    nb_module *m = nb_llama(c);
    NB_CK_NOTNULL(m);
    return m;
}

static nb_module *llama_model(int layers, bool tied) { return llama_model_ex(layers, tied, false); }

static nb_tensor *ids_tensor(int64_t B, int64_t T, int64_t vocab) {
    int64_t v[64];
    for (int64_t i = 0; i < B * T; i++) v[i] = (i * 13 + 5) % vocab;
    return nb_from_data(v, 2, (int64_t[]){B, T}, NB_I64);
}

static double max_abs_diff(nb_tensor *a, nb_tensor *b) {
    NB_CK_NOTNULL(a), NB_CK_NOTNULL(b);
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    double *x = nb_test_values_of(a), *y = nb_test_values_of(b), d = 0;
    for (int64_t i = 0; i < nb_numel(a); i++) d = fmax(d, fabs(x[i] - y[i]));
    free(x), free(y);
    return d;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* ---- round trips ------------------------------------------------------------------------------ */

START_TEST(test_round_trip) {
    nb_module *ms[3] = {gpt2_model(2, 64), llama_model(2, false), llama_model(1, true)};
    const char *names[3] = {"g", "l", "lt"};
    for (int k = 0; k < 3; k++) {
        NB_CK_OK(nb_save_pretrained(ms[k], path_in(names[k])));
        nb_module *back = nb_from_pretrained(path_in(names[k]), NULL);
        NB_CK_NOTNULL(back);
        ck_assert(!nb_module_is_training(back));
        ck_assert_str_eq(nb_module_kind(back), nb_module_kind(ms[k]));
        nb_tensor *x = ids_tensor(2, 7, 64);
        ck_assert(max_abs_diff(nb_forward(back, x), nb_forward(ms[k], x)) == 0);
        nb_module_free(back);
    }
    char p[300];
    snprintf(p, sizeof p, "%s/config.json", path_in("g"));
    const char *cfg = slurp(p);
    ck_assert_ptr_nonnull(strstr(cfg, "\"model_type\": \"gpt2\""));
    ck_assert_ptr_nonnull(strstr(cfg, "\"GPT2LMHeadModel\""));
    ck_assert_ptr_nonnull(strstr(cfg, "\"n_inner\": null"));
    ck_assert_ptr_nonnull(strstr(cfg, "\"layer_norm_epsilon\": 1e-5"));
    snprintf(p, sizeof p, "%s/config.json", path_in("l"));
    cfg = slurp(p);
    ck_assert_ptr_nonnull(strstr(cfg, "\"rope_type\": \"llama3\""));
    ck_assert_ptr_nonnull(strstr(cfg, "\"num_key_value_heads\": 2"));
    /* the files hold transformers' keys: a tied head is not stored */
    snprintf(p, sizeof p, "%s/model.safetensors", path_in("lt"));
    nb_safetensors *f = nb_safetensors_load(p);
    NB_CK_NOTNULL(f);
    ck_assert_ptr_nonnull(nb_safetensors_get(f, "model.layers.0.self_attn.q_proj.weight"));
    ck_assert_ptr_null(nb_safetensors_get(f, "lm_head.weight"));
    nb_safetensors_free(f);
    nb_gpt2_config a = nb_gpt2_get_config(ms[0]);
    nb_module *g = nb_from_pretrained(path_in("g"), NULL);
    nb_gpt2_config b = nb_gpt2_get_config(g);
    ck_assert(a.n_embd == b.n_embd && a.n_layer == b.n_layer && a.n_positions == b.n_positions &&
              a.initializer_range == b.initializer_range && a.layer_norm_epsilon == b.layer_norm_epsilon);
    nb_module_free(g);
    for (int k = 0; k < 3; k++) nb_module_free(ms[k]);
}
END_TEST

/* A BitNet Llama (bitlinear): config.json gets transformers' BitNet
 * quantization_config (online, RMSNorm of eps 1e-6, lm_head left out), and
 * from_pretrained builds BitLinear projections again, with the same logits
 * bit for bit; once packed for inference it is refused (the packed
 * buffers are not transformers' keys) and nothing is written. */
START_TEST(test_round_trip_bitnet) {
    nb_module *m = llama_model_ex(2, true, true);
    NB_CK_OK(nb_save_pretrained(m, path_in("bit")));
    char p[300];
    snprintf(p, sizeof p, "%s/config.json", path_in("bit"));
    const char *cfg = slurp(p);
    const char *want[] = {"\"quantization_config\": {", "\"quant_method\": \"bitnet\"", "\"quantization_mode\": \"online\"",
                          "\"linear_class\": \"autobitlinear\"", "\"use_rms_norm\": true", "\"rms_norm_eps\": 1e-6",
                          "\"modules_to_not_convert\": [\n      \"lm_head\"\n    ]"};
    for (int i = 0; i < 7; i++) ck_assert_msg(strstr(cfg, want[i]) != NULL, "config.json lacks %s:\n%s", want[i], cfg);
    nb_module *back = nb_from_pretrained(path_in("bit"), NULL);
    NB_CK_NOTNULL(back);
    ck_assert(nb_llama_get_config(back).bitlinear);
    ck_assert_str_eq(nb_module_kind(nb_module_child(back, "model.layers.1.mlp.down_proj")), "BitLinear");
    nb_module_train(m, false);
    nb_tensor *x = ids_tensor(2, 7, 96);
    ck_assert(max_abs_diff(nb_forward(back, x), nb_forward(m, x)) == 0);
    NB_CK_OK(nb_module_bitnet_pack(back));
    ck_assert_int_eq(nb_save_pretrained(back, path_in("packed")), NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "BitLinear"));
    snprintf(p, sizeof p, "%s/config.json", path_in("packed"));
    ck_assert_int_ne(access(p, F_OK), 0);
    nb_module_free(back);
    nb_module_free(m);
}
END_TEST

/* ---- strict loads -------------------------------------------------------------------------------- */

static bool listed(char **items, int n, const char *needle) {
    for (int i = 0; i < n; i++)
        if (strstr(items[i], needle)) return true;
    return false;
}

START_TEST(test_strict_load_names_keys) {
    nb_module *two = llama_model(2, false), *one = llama_model(1, false);
    NB_CK_OK(nb_save_pretrained(two, path_in("two")));
    nb_tensor *x = ids_tensor(1, 5, 96);
    double *before = nb_test_values_of(nb_forward(one, x));
    nb_load_report r;
    nb_clear_error();
    ck_assert_int_eq(nb_causal_lm_load_weights(one, path_in("two"), true, &r), NB_ERR_FORMAT);
    ck_assert_int_eq(r.n_unexpected, 9); /* layer 1's 9 tensors */
    ck_assert(listed(r.unexpected, r.n_unexpected, "model.layers.1.self_attn.q_proj.weight"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "unexpected key"));
    nb_load_report_free(&r);
    nb_ck_close(nb_forward(one, x), before, 96 * 5, 0, 0); /* nothing changed */
    /* non-strict: layer 0 and the rest load */
    NB_CK_OK(nb_causal_lm_load_weights(one, path_in("two"), false, &r));
    ck_assert_int_eq(r.n_unexpected, 9);
    nb_load_report_free(&r);
    /* missing keys: loading the 1-layer file into the 2-layer model */
    NB_CK_OK(nb_save_pretrained(one, path_in("one")));
    ck_assert_int_eq(nb_causal_lm_load_weights(two, path_in("one"), true, &r), NB_ERR_FORMAT);
    ck_assert_int_eq(r.n_missing, 9);
    ck_assert(listed(r.missing, r.n_missing, "model.layers.1.mlp.down_proj.weight"));
    nb_load_report_free(&r);
    /* a shape mismatch always fails and names both shapes */
    nb_module *g64 = gpt2_model(1, 64), *g65 = gpt2_model(1, 65);
    NB_CK_OK(nb_save_pretrained(g64, path_in("g64")));
    ck_assert_int_eq(nb_causal_lm_load_weights(g65, path_in("g64"), false, &r), NB_ERR_SHAPE);
    ck_assert_int_eq(r.n_mismatched, 1);
    ck_assert_str_eq(r.mismatched[0], "transformer.wte.weight: file [64, 32] float32, model [65, 32] float32");
    nb_load_report_free(&r);
    /* a Llama file into a GPT-2: every key reported */
    ck_assert_int_eq(nb_causal_lm_load_weights(g64, path_in("one"), true, &r), NB_ERR_FORMAT);
    ck_assert(r.n_missing == 16 && r.n_unexpected == 12);
    ck_assert(listed(r.unexpected, r.n_unexpected, "model.embed_tokens.weight"));
    nb_load_report_free(&r);
    ck_assert_int_eq(nb_causal_lm_load_weights(g64, path_in("nothing"), true, NULL), NB_ERR_IO);
    ck_assert_int_eq(nb_causal_lm_load_weights(nb_module_child(g64, "transformer"), path_in("g64"), true, NULL),
                     NB_ERR_INVALID_ARG);
    free(before);
    nb_module_free(two), nb_module_free(one), nb_module_free(g64), nb_module_free(g65);
}
END_TEST

/* ---- key variants ------------------------------------------------------------------------------------ */

START_TEST(test_key_variants) {
    nb_module *g = gpt2_model(2, 64);
    nb_tensor *x = ids_tensor(2, 6, 64), *want = nb_forward(g, x);
    nb_named_tensor *sd;
    int n = nb_module_state_dict(g, &sd);
    ck_assert_int_eq(n, 28);
    /* the hub's gpt2 layout: bare names, attn.bias / attn.masked_bias buffers, and a stored lm_head */
    nb_named_tensor hub[40];
    char names[40][96];
    int k = 0;
    for (int i = 0; i < n; i++, k++) {
        snprintf(names[k], sizeof names[k], "%s", sd[i].name + strlen("transformer."));
        hub[k] = (nb_named_tensor){names[k], sd[i].tensor};
    }
    nb_tensor *mask = nb_ones(NB_SHAPE(1, 1, 32, 32), NB_F32);
    hub[k++] = (nb_named_tensor){"h.0.attn.bias", mask};
    hub[k++] = (nb_named_tensor){"h.1.attn.masked_bias", nb_scalar(-1e4, NB_F32)};
    hub[k++] = (nb_named_tensor){"lm_head.weight", sd[0].tensor};
    NB_CK_OK(nb_safetensors_save(path_in("hub.safetensors"), hub, k, NULL, 0));
    nb_module *back = gpt2_model(2, 64);
    NB_CK_OK(nb_causal_lm_load_weights(back, path_in("hub.safetensors"), true, NULL));
    ck_assert(max_abs_diff(nb_forward(back, x), want) == 0);
    nb_module_free(back);
    /* two shards and an index */
    ck_assert_int_eq(mkdir(path_in("sharded"), 0777), 0);
    char p[300], index[4096];
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", path_in("sharded"));
    NB_CK_OK(nb_safetensors_save(p, sd, 10, NULL, 0));
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", path_in("sharded"));
    NB_CK_OK(nb_safetensors_save(p, sd + 10, n - 10, NULL, 0));
    size_t len = (size_t)snprintf(index, sizeof index, "{\"metadata\": {}, \"weight_map\": {");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(index + len, sizeof index - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                                i ? ", " : "", sd[i].name, i < 10 ? 1 : 2);
    snprintf(index + len, sizeof index - len, "}}");
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path_in("sharded"));
    write_text(p, index);
    back = gpt2_model(2, 64);
    NB_CK_OK(nb_causal_lm_load_weights(back, path_in("sharded"), true, NULL));
    ck_assert(max_abs_diff(nb_forward(back, x), want) == 0);
    /* bfloat16 weights load into the float32 model (rounded once) */
    nb_named_tensor bf[32];
    for (int i = 0; i < n; i++) bf[i] = (nb_named_tensor){sd[i].name, nb_to_dtype(sd[i].tensor, NB_BF16)};
    NB_CK_OK(nb_safetensors_save(path_in("bf16.safetensors"), bf, n, NULL, 0));
    NB_CK_OK(nb_causal_lm_load_weights(back, path_in("bf16.safetensors"), true, NULL));
    nb_tensor *w = nb_module_get(nb_module_child(back, "transformer.h.1.mlp.c_fc"), "weight");
    ck_assert(max_abs_diff(w, nb_to_dtype(bf[22].tensor, NB_F32)) == 0);
    ck_assert_str_eq(bf[22].name, "transformer.h.1.mlp.c_fc.weight");
    double d = max_abs_diff(nb_forward(back, x), want);
    ck_assert_msg(d > 0 && d < 0.05, "bf16 logits differ by %g", d);
    nb_module_free(back);
    free(sd);
    nb_module_free(g);
}
END_TEST

/* ---- config.json ---------------------------------------------------------------------------------------- */

START_TEST(test_config_errors) {
    nb_gpt2_config g;
    nb_llama_config l;
    bool is_llama;
    ck_assert_int_eq(nb_hf_config_load(path_in("none.json"), &g, &l, &is_llama), NB_ERR_IO);
    write_text(path_in("c.json"), "{\"model_type\": ");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_FORMAT);
    write_text(path_in("c.json"), "{\"model_type\": \"bert\"}");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "bert"));
    write_text(path_in("c.json"), "[1, 2]");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_FORMAT);
    write_text(path_in("c.json"), "{\"model_type\": \"gpt2\", \"n_embd\": \"big\"}");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "n_embd"));
    write_text(path_in("c.json"), "{\"model_type\": \"gpt2\", \"activation_function\": \"relu\"}");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_UNSUPPORTED);
    write_text(path_in("c.json"), "{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "yarn"));
    /* quantization_config: BitNet online with its RMSNorm only */
#define BITNET_ONLINE "\"quant_method\": \"bitnet\", \"linear_class\": \"autobitlinear\", \"quantization_mode\": \"online\""
    const char *quant[] = {"{\"quant_method\": \"gptq\", \"bits\": 4}",
                           "{\"quant_method\": \"bitnet\"}",
                           "{" BITNET_ONLINE "}",
                           "{" BITNET_ONLINE ", \"use_rms_norm\": true, \"rms_norm_eps\": 1e-5}",
                           "[1]",
                           "{\"quant_method\": \"bitnet\", \"use_rms_norm\": \"yes\"}",
                           "{\"quant_method\": \"bitnet\", \"quantization_mode\": \"online\", \"use_rms_norm\": true}",
                           "{" BITNET_ONLINE ", \"use_rms_norm\": true, \"modules_to_not_convert\": [\"lm_head\", \"model.layers.0.mlp.up_proj\"]}"};
    const char *what[] = {"gptq", "offline", "use_rms_norm false", "1e-05", "object", "use_rms_norm",
                          "linear_class \"bitlinear\"", "other modules_to_not_convert"};
    const nb_status why[] = {NB_ERR_UNSUPPORTED, NB_ERR_UNSUPPORTED, NB_ERR_UNSUPPORTED, NB_ERR_UNSUPPORTED,
                             NB_ERR_FORMAT,      NB_ERR_FORMAT,      NB_ERR_UNSUPPORTED, NB_ERR_UNSUPPORTED};
    for (int i = 0; i < 8; i++) {
        char text[400];
        snprintf(text, sizeof text, "{\"model_type\": \"llama\", \"quantization_config\": %s}", quant[i]);
        write_text(path_in("c.json"), text);
        ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), why[i]);
        ck_assert_msg(strstr(nb_last_error(), what[i]) != NULL, "%s: %s", quant[i], nb_last_error());
    }
    write_text(path_in("c.json"), "{\"model_type\": \"llama\", \"quantization_config\": {" BITNET_ONLINE
                                  ", \"use_rms_norm\": true, \"modules_to_not_convert\": null}}");
    NB_CK_OK(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama));
    ck_assert(is_llama && l.bitlinear);
#undef BITNET_ONLINE
    write_text(path_in("c.json"), "{\"model_type\": \"gpt2\", \"quantization_config\": {\"quant_method\": \"bitnet\"}}");
    ck_assert_int_eq(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama), NB_ERR_UNSUPPORTED);
    write_text(path_in("c.json"), "{\"model_type\": \"llama\", \"quantization_config\": null}");
    NB_CK_OK(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama));
    ck_assert(!l.bitlinear);
    /* defaults for missing keys, eos lists, old "type" */
    write_text(path_in("c.json"), "{\"model_type\": \"llama\", \"hidden_size\": 64, \"eos_token_id\": [7, 8], "
                                  "\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8.0}, \"unknown\": 1}");
    NB_CK_OK(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama));
    ck_assert(is_llama && l.hidden_size == 64 && l.eos_token_id == 7 && l.vocab_size == 32000 && l.rope.factor == 8 &&
              l.rope.high_freq_factor == 4 && l.rope.original_max_position_embeddings == 8192);
    write_text(path_in("c.json"), "{\"model_type\": \"gpt2\", \"n_ctx\": 64, \"n_positions\": 64}");
    NB_CK_OK(nb_hf_config_load(path_in("c.json"), &g, &l, &is_llama));
    ck_assert(!is_llama && g.n_positions == 64 && g.n_embd == 768);
    ck_assert_ptr_null(nb_from_pretrained(path_in("missing"), NULL));
    ck_assert_int_eq(nb_last_status(), NB_ERR_IO);
    nb_module *relu = nb_nn_relu();
    ck_assert_int_eq(nb_save_pretrained(relu, path_in("x")), NB_ERR_INVALID_ARG);
    nb_module_free(relu);
}
END_TEST

/* ---- PyTorch interoperability ------------------------------------------------------------------------------ */


static void ck_torch_logits(const char *model_dir, nb_safetensors *io, const char *name) {
    nb_load_report r;
    /* float32 models, as the script's float32 reference (torch_llama is stored in bfloat16) */
    nb_module *m = nb_from_pretrained_as(model_dir, NB_F32, &r);
    ck_assert_msg(m != NULL, "%s: %s", model_dir, nb_last_error());
    nb_load_report_free(&r);
    char k[64];
    snprintf(k, sizeof k, "%s_ids", name);
    nb_tensor *ids = nb_safetensors_get(io, k);
    snprintf(k, sizeof k, "%s_logits", name);
    double d = max_abs_diff(nb_forward(m, ids), nb_safetensors_get(io, k));
    ck_assert_msg(d <= 1e-4, "PyTorch %s -> nabla: max |logits diff| = %g", name, d);
    printf("decoder_interop: PyTorch %s -> nabla: max |logits diff| = %.3g\n", name, d);
    nb_module_free(m);
}

START_TEST(test_torch_interop) {
    char script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("decoder_interop.py", script, sizeof script), "tests/interop/decoder_interop.py not found");
    nb_manual_seed(17);
    nb_module *g = gpt2_model(2, 64), *l = llama_model(2, false);
    NB_CK_OK(nb_save_pretrained(g, path_in("nabla_gpt2")));
    NB_CK_OK(nb_save_pretrained(l, path_in("nabla_llama")));
    nb_tensor *gi = ids_tensor(2, 9, 64), *li = ids_tensor(2, 12, 96);
    nb_named_tensor io[] = {{"gpt2_ids", gi}, {"gpt2_logits", nb_forward(g, gi)}, {"llama_ids", li},
                            {"llama_logits", nb_forward(l, li)}};
    NB_CK_OK(nb_safetensors_save(path_in("nabla_io.safetensors"), io, 4, NULL, 0));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, dir);
    int rc = system(cmd);
    nb_module_free(g), nb_module_free(l);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("decoder_interop: skipped: /usr/bin/python3 lacks torch or numpy\n");
        return;
    }
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed (status %d)", cmd, rc);
    nb_safetensors *tio = nb_safetensors_load(path_in("torch_io.safetensors"));
    NB_CK_NOTNULL(tio);
    ck_torch_logits(path_in("torch_gpt2"), tio, "gpt2");
    ck_torch_logits(path_in("torch_llama"), tio, "llama");
    nb_safetensors_free(tio);
}
END_TEST

/* transformers' bfloat16 models (tests/interop/transformers_16bit.py; it
 * needs transformers, so it runs on the GPU machine): nb_from_pretrained
 * builds them in bfloat16 as config.json says, their logits agree within
 * bfloat16's rounding and greedy generation gives transformers' 32 tokens.
 * On CUDA when there is a device. */
START_TEST(test_transformers_16bit) {
    char script[1400], cmd[3000], p[256];
    ck_assert_msg(nb_test_find_script("transformers_16bit.py", script, sizeof script), "transformers_16bit.py not found");
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", nb_test_python(), script, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("transformers_16bit: skipped: %s lacks transformers\n", nb_test_python());
        return;
    }
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed (status %d)", cmd, rc);
    if (nb_device_count(NB_DEVICE_CUDA) > 0) NB_CK_OK(nb_set_default_device(NB_CUDA(0)));
    const char *names[2] = {"llama", "gpt2"};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        nb_module *m = nb_from_pretrained(p, NULL);
        NB_CK_NOTNULL(m);
        snprintf(p, sizeof p, "%s/%s/ids.npy", dir, names[k]);
        nb_tensor *ids = nb_npy_load(p);
        snprintf(p, sizeof p, "%s/%s/logits.npy", dir, names[k]);
        nb_tensor *want = nb_to_device(nb_npy_load(p), nb_default_device());
        snprintf(p, sizeof p, "%s/%s/generated.npy", dir, names[k]);
        nb_tensor *gen = nb_npy_load(p);
        NB_CK_NOTNULL(ids), NB_CK_NOTNULL(want), NB_CK_NOTNULL(gen);
        int64_t T = nb_numel(ids), prompt[8], out[32], expect[32];
        ck_assert_int_eq(T, 8);
        NB_CK_OK(nb_to_host(ids, prompt, sizeof prompt));
        NB_CK_OK(nb_to_host(gen, expect, sizeof expect));
        nb_tensor *logits = nb_forward(m, nb_to_device(nb_reshape(ids, 2, (int64_t[]){1, T}), nb_default_device()));
        NB_CK_NOTNULL(logits);
        ck_assert_int_eq(nb_dtype_of(logits), NB_BF16);
        double d = max_abs_diff(nb_to_dtype(nb_reshape(logits, 2, nb_shape(want)), NB_F32), want);
        double big = nb_item(nb_max(nb_abs(want), NULL, 0, false));
        printf("transformers_16bit: %s bfloat16 on %s: max |logits diff| %.3g (largest logit %.3g)\n", names[k],
               nb_device_of(logits).type == NB_DEVICE_CUDA ? "cuda" : "cpu", d, big);
        fflush(stdout);
        ck_assert_msg(d <= 3e-2 * big, "%s: logits differ by %g", names[k], d);
        ck_assert_int_eq(nb_generate(m, prompt, 8, out, 32, (nb_generate_options){.max_new_tokens = 32}), 32);
        /* equal tokens; the two bfloat16 implementations, whose logits differ by up to d above, may part only
           where transformers' own two candidates are within 2 d of each other (a near-tie), after which the
           sequences differ */
        snprintf(p, sizeof p, "%s/%s/scores.npy", dir, names[k]);
        nb_tensor *scores = nb_npy_load(p);
        NB_CK_NOTNULL(scores);
        int same = 0;
        while (same < 32 && out[same] == expect[same]) same++;
        if (same < 32) {
            float sc[2];
            nb_tensor *row = nb_select(scores, 0, same);
            NB_CK_OK(nb_to_host(nb_select(row, 0, out[same]), &sc[0], sizeof(float)));
            NB_CK_OK(nb_to_host(nb_select(row, 0, expect[same]), &sc[1], sizeof(float)));
            ck_assert_msg(fabsf(sc[0] - sc[1]) <= 2 * d, "%s: token %d: %lld (score %g), transformers %lld (%g)",
                          names[k], same, (long long)out[same], sc[0], (long long)expect[same], sc[1]);
        }
        printf("transformers_16bit: %s: greedy tokens equal for %d of 32%s\n", names[k], same,
               same < 32 ? " (then a near-tie in transformers' own scores)" : "");
        fflush(stdout);
        nb_module_free(m);
    }
    NB_CK_OK(nb_set_default_device(NB_CPU));
}
END_TEST

Suite *nb_suite_decoder_io(void) {
    Suite *s = suite_create("decoder_io");
    TCase *tc = tcase_create("decoder_io");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_round_trip_bitnet);
    tcase_add_test(tc, test_strict_load_names_keys);
    tcase_add_test(tc, test_key_variants);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_torch_interop);
    tcase_add_test(tc, test_transformers_16bit);
    suite_add_tcase(s, tc);
    return s;
}
