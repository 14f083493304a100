/* hf_checkpoint.c - Hugging Face model directories for the decoders:
 * config.json (transformers' GPT2Config / LlamaConfig, read and written with
 * jansson) and model.safetensors (or sharded model-*.safetensors with
 * model.safetensors.index.json, or torch.save's pytorch_model.bin and its
 * shards, read by data/pt.c) holding transformers' state_dict keys. The
 * module trees of decoder.c already carry those names, so loading is
 * nn/state_dict.c's strict load after normalising the few key variants
 * transformers itself accepts (bare GPT2Model keys, old causal-mask and
 * inv_freq buffers, a stored copy of a tied head). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decoder_impl.h"
#include "nn_impl.h"
#include "text_impl.h"

/* ---- config.json ------------------------------------------------------------------------- */

/* Reads an integer field if present and not null; false with the error set
 * for another type. */
static bool get_int(const json_t *o, const char *key, int64_t *out, const char *path) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (json_is_array(v) && json_array_size(v) > 0) v = json_array_get(v, 0); /* eos_token_id lists */
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    nb_set_error(NB_ERR_FORMAT, "hf_config: %s: \"%s\" must be an integer", path, key);
    return false;
}

static bool get_real(const json_t *o, const char *key, double *out, const char *path) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    nb_set_error(NB_ERR_FORMAT, "hf_config: %s: \"%s\" must be a number", path, key);
    return false;
}

static bool get_bool(const json_t *o, const char *key, bool *out, const char *path) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return true;
    }
    nb_set_error(NB_ERR_FORMAT, "hf_config: %s: \"%s\" must be true or false", path, key);
    return false;
}

/* An object field into *out (NULL when absent or null); false with the
 * error set for another type. */
static bool get_object(const json_t *o, const char *key, json_t **out, const char *path) {
    json_t *v = json_object_get(o, key);
    *out = v && !json_is_null(v) ? v : NULL;
    if (!*out || json_is_object(v)) return true;
    nb_set_error(NB_ERR_FORMAT, "hf_config: %s: \"%s\" must be an object or null", path, key);
    return false;
}

/* A string field, or dflt when absent or null; NULL (error set) for another type. */
static const char *get_str(const json_t *o, const char *key, const char *dflt, const char *path) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return dflt;
    if (json_is_string(v)) return json_string_value(v);
    nb_set_error(NB_ERR_FORMAT, "hf_config: %s: \"%s\" must be a string", path, key);
    return NULL;
}

static bool dtype_from_json(const json_t *o, nb_dtype *dt, const char *path);

static bool gpt2_from_json(const json_t *o, nb_gpt2_config *c, const char *path) {
    *c = nb_gpt2_config_default();
    int64_t n_layer = c->n_layer, n_ctx = -1;
    bool tie = true, scale = true, by_layer = false, ok =
        get_int(o, "vocab_size", &c->vocab_size, path) && get_int(o, "n_ctx", &n_ctx, path) &&
        get_int(o, "n_positions", &c->n_positions, path) && get_int(o, "n_embd", &c->n_embd, path) &&
        get_int(o, "n_layer", &n_layer, path) && get_int(o, "n_head", &c->n_head, path) &&
        get_int(o, "n_inner", &c->n_inner, path) && get_real(o, "layer_norm_epsilon", &c->layer_norm_epsilon, path) &&
        get_real(o, "resid_pdrop", &c->resid_pdrop, path) && get_real(o, "embd_pdrop", &c->embd_pdrop, path) &&
        get_real(o, "attn_pdrop", &c->attn_pdrop, path) &&
        get_real(o, "initializer_range", &c->initializer_range, path) &&
        get_int(o, "bos_token_id", &c->bos_token_id, path) && get_int(o, "eos_token_id", &c->eos_token_id, path) &&
        get_bool(o, "tie_word_embeddings", &tie, path) && get_bool(o, "scale_attn_weights", &scale, path) &&
        get_bool(o, "scale_attn_by_inverse_layer_idx", &by_layer, path) && dtype_from_json(o, &c->dtype, path);
    const char *act = ok ? get_str(o, "activation_function", "gelu_new", path) : NULL;
    if (!act) return false;
    if (n_layer < 1 || n_layer > 100000) n_layer = -1; /* rejected by nb_gpt2 */
    c->n_layer = (int)n_layer;
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: GPT-2 activation_function \"%s\" is not supported (gelu_new "
                                         "or gelu_pytorch_tanh: GELU's tanh form)", path, act);
        return false;
    }
    if (!tie || !scale || by_layer) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: GPT-2 with tie_word_embeddings false, scale_attn_weights "
                                         "false or scale_attn_by_inverse_layer_idx true is not supported", path);
        return false;
    }
    json_t *q;
    if (!get_object(o, "quantization_config", &q, path)) return false;
    if (q) { /* not a float model: its weights would load wrong */
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: GPT-2 with a quantization_config is not supported", path);
        return false;
    }
    return true;
}

static bool rope_scaling_from_json(const json_t *o, nb_rope_config *r, const char *path) {
    json_t *s;
    if (!get_object(o, "rope_scaling", &s, path)) return false;
    if (!s) return true;
    const char *type = get_str(s, "rope_type", NULL, path);
    if (!type && nb_last_status() == NB_OK) type = get_str(s, "type", "default", path);
    if (!type) return false;
    if (!strcmp(type, "default")) return true;
    if (strcmp(type, "llama3")) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: rope_type \"%s\" is not supported (default or llama3)", path,
                     type);
        return false;
    }
    r->low_freq_factor = 1, r->high_freq_factor = 4, r->original_max_position_embeddings = 8192;
    return get_real(s, "factor", &r->factor, path) && get_real(s, "low_freq_factor", &r->low_freq_factor, path) &&
           get_real(s, "high_freq_factor", &r->high_freq_factor, path) &&
           get_int(s, "original_max_position_embeddings", &r->original_max_position_embeddings, path);
}

/* Whether modules_to_not_convert (absent, null or a list) leaves out
 * lm_head alone, or nothing. */
static bool only_head_kept(const json_t *q) {
    json_t *m = json_object_get(q, "modules_to_not_convert");
    if (!m || json_is_null(m)) return true;
    if (!json_is_array(m) || json_array_size(m) > 1) return false;
    return json_array_size(m) == 0 || (json_is_string(json_array_get(m, 0)) &&
                                       !strcmp(json_string_value(json_array_get(m, 0)), "lm_head"));
}

/* transformers' BitNetQuantConfig ("quantization_config" with quant_method
 * "bitnet") as nabla's BitLinear: latent float weights made ternary at each
 * forward (linear_class "autobitlinear", quantization_mode "online"), after
 * an RMSNorm of eps NB_BITLINEAR_EPS (use_rms_norm; nabla's has no weight),
 * over every Linear but lm_head (modules_to_not_convert). Anything else
 * (another quant_method, transformers' packed BitLinear or "offline" mode,
 * another norm, other modules left float): NB_ERR_UNSUPPORTED. */
static bool quantization_from_json(const json_t *o, bool *bitlinear, const char *path) {
    json_t *q;
    *bitlinear = false;
    if (!get_object(o, "quantization_config", &q, path)) return false;
    if (!q) return true;
    const char *method = get_str(q, "quant_method", "", path);
    const char *mode = method ? get_str(q, "quantization_mode", "offline", path) : NULL;
    const char *cls = mode ? get_str(q, "linear_class", "bitlinear", path) : NULL; /* transformers' defaults */
    double eps = 1e-6;
    bool rms = false;
    if (!cls || !get_bool(q, "use_rms_norm", &rms, path) || !get_real(q, "rms_norm_eps", &eps, path)) return false;
    if (strcmp(method, "bitnet")) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: quantization_config's quant_method \"%s\" is not supported "
                                         "(bitnet)", path, method);
        return false;
    }
    if (strcmp(mode, "online") || strcmp(cls, "autobitlinear") || !rms || eps != NB_BITLINEAR_EPS ||
        !only_head_kept(q)) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: BitNet with linear_class \"%s\", quantization_mode \"%s\", "
                                         "use_rms_norm %s, rms_norm_eps %g%s: nabla's BitLinear is \"autobitlinear\", "
                                         "\"online\" (latent float weights), with an RMSNorm of eps %g, in every "
                                         "Linear but lm_head", path, cls, mode, rms ? "true" : "false", eps,
                     only_head_kept(q) ? "" : ", other modules_to_not_convert", NB_BITLINEAR_EPS);
        return false;
    }
    *bitlinear = true;
    return true;
}

static bool llama_from_json(const json_t *o, nb_llama_config *c, const char *path) {
    *c = nb_llama_config_default();
    int64_t layers = c->num_hidden_layers;
    bool ok = get_int(o, "vocab_size", &c->vocab_size, path) && get_int(o, "hidden_size", &c->hidden_size, path) &&
              get_int(o, "intermediate_size", &c->intermediate_size, path) &&
              get_int(o, "num_hidden_layers", &layers, path) &&
              get_int(o, "num_attention_heads", &c->num_attention_heads, path) &&
              get_int(o, "num_key_value_heads", &c->num_key_value_heads, path) &&
              get_int(o, "head_dim", &c->head_dim, path) &&
              get_int(o, "max_position_embeddings", &c->max_position_embeddings, path) &&
              get_real(o, "rms_norm_eps", &c->rms_norm_eps, path) && get_real(o, "rope_theta", &c->rope.theta, path) &&
              get_bool(o, "attention_bias", &c->attention_bias, path) && get_bool(o, "mlp_bias", &c->mlp_bias, path) &&
              get_bool(o, "tie_word_embeddings", &c->tie_word_embeddings, path) &&
              get_real(o, "attention_dropout", &c->attention_dropout, path) &&
              get_real(o, "initializer_range", &c->initializer_range, path) &&
              get_int(o, "bos_token_id", &c->bos_token_id, path) && get_int(o, "eos_token_id", &c->eos_token_id, path) &&
              rope_scaling_from_json(o, &c->rope, path) && dtype_from_json(o, &c->dtype, path) &&
              quantization_from_json(o, &c->bitlinear, path);
    const char *act = ok ? get_str(o, "hidden_act", "silu", path) : NULL;
    if (!act) return false;
    if (layers < 1 || layers > 100000) layers = -1; /* rejected by nb_llama */
    c->num_hidden_layers = (int)layers;
    if (strcmp(act, "silu")) {
        nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: Llama hidden_act \"%s\" is not supported (silu)", path, act);
        return false;
    }
    return true;
}

nb_status nb_hf_config_load(const char *path, nb_gpt2_config *gpt2, nb_llama_config *llama, bool *is_llama) {
    if (!path || !gpt2 || !llama || !is_llama)
        return nb_set_error(NB_ERR_INVALID_ARG, "hf_config: NULL path or output");
    json_error_t err;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!o) {
        FILE *f = fopen(path, "rb");
        if (!f) return nb_set_error(NB_ERR_IO, "hf_config: cannot open %s: %s", path, strerror(errno));
        fclose(f);
        return nb_set_error(NB_ERR_FORMAT, "hf_config: %s: line %d: %s", path, err.line, err.text);
    }
    nb_clear_error();
    nb_status st = NB_OK;
    const char *type = json_is_object(o) ? get_str(o, "model_type", NULL, path) : NULL;
    if (!json_is_object(o) || !type)
        st = nb_last_status() ? nb_last_status()
                              : nb_set_error(NB_ERR_FORMAT, "hf_config: %s: not an object with a \"model_type\"", path);
    else if (!strcmp(type, "gpt2")) *is_llama = false, st = gpt2_from_json(o, gpt2, path) ? NB_OK : nb_last_status();
    else if (!strcmp(type, "llama")) *is_llama = true, st = llama_from_json(o, llama, path) ? NB_OK : nb_last_status();
    else st = nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: model_type \"%s\" is not supported (gpt2 or llama)", path, type);
    json_decref(o);
    return st;
}

static const char *torch_dtype(nb_dtype dt) {
    return dt == NB_F64 ? "float64" : dt == NB_BF16 ? "bfloat16" : dt == NB_F16 ? "float16" : "float32";
}

/* config.json's "torch_dtype" (transformers 4; "dtype" in 5): the dtype the weights were saved in. */
static bool dtype_from_json(const json_t *o, nb_dtype *dt, const char *path) {
    const char *name = get_str(o, "torch_dtype", NULL, path);
    if (!name && nb_last_status() == NB_OK) name = get_str(o, "dtype", "float32", path);
    if (!name) return false;
    static const struct {
        const char *name;
        nb_dtype dt;
    } names[] = {{"float32", NB_F32}, {"float64", NB_F64}, {"bfloat16", NB_BF16}, {"float16", NB_F16}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i].name)) return *dt = names[i].dt, true;
    nb_set_error(NB_ERR_UNSUPPORTED, "hf_config: %s: torch_dtype \"%s\" is not supported (float32, float64, bfloat16 "
                                     "or float16)", path, name);
    return false;
}

/* transformers' config.json for m. */
static json_t *config_json(const nb_decoder_ctx *c) {
    json_t *o = json_object();
    if (!o) return NULL;
    if (c->s.family == NB_FAMILY_GPT2) {
        const nb_gpt2_config *g = &c->gpt2;
        json_object_set_new(o, "architectures", json_pack("[s]", "GPT2LMHeadModel"));
        json_object_set_new(o, "model_type", json_string("gpt2"));
        json_object_set_new(o, "activation_function", json_string("gelu_new"));
        json_object_set_new(o, "vocab_size", json_integer(g->vocab_size));
        json_object_set_new(o, "n_positions", json_integer(g->n_positions));
        json_object_set_new(o, "n_ctx", json_integer(g->n_positions));
        json_object_set_new(o, "n_embd", json_integer(g->n_embd));
        json_object_set_new(o, "n_layer", json_integer(g->n_layer));
        json_object_set_new(o, "n_head", json_integer(g->n_head));
        json_object_set_new(o, "n_inner", g->n_inner ? json_integer(g->n_inner) : json_null());
        json_object_set_new(o, "layer_norm_epsilon", json_real(g->layer_norm_epsilon));
        json_object_set_new(o, "resid_pdrop", json_real(g->resid_pdrop));
        json_object_set_new(o, "embd_pdrop", json_real(g->embd_pdrop));
        json_object_set_new(o, "attn_pdrop", json_real(g->attn_pdrop));
        json_object_set_new(o, "initializer_range", json_real(g->initializer_range));
        json_object_set_new(o, "bos_token_id", json_integer(g->bos_token_id));
        json_object_set_new(o, "eos_token_id", json_integer(g->eos_token_id));
        json_object_set_new(o, "tie_word_embeddings", json_true());
        json_object_set_new(o, "torch_dtype", json_string(torch_dtype(g->dtype)));
    } else {
        const nb_llama_config *l = &c->llama;
        json_object_set_new(o, "architectures", json_pack("[s]", "LlamaForCausalLM"));
        json_object_set_new(o, "model_type", json_string("llama"));
        json_object_set_new(o, "hidden_act", json_string("silu"));
        json_object_set_new(o, "vocab_size", json_integer(l->vocab_size));
        json_object_set_new(o, "hidden_size", json_integer(l->hidden_size));
        json_object_set_new(o, "intermediate_size", json_integer(l->intermediate_size));
        json_object_set_new(o, "num_hidden_layers", json_integer(l->num_hidden_layers));
        json_object_set_new(o, "num_attention_heads", json_integer(l->num_attention_heads));
        json_object_set_new(o, "num_key_value_heads", json_integer(l->num_key_value_heads));
        json_object_set_new(o, "head_dim", json_integer(l->head_dim));
        json_object_set_new(o, "max_position_embeddings", json_integer(l->max_position_embeddings));
        json_object_set_new(o, "rms_norm_eps", json_real(l->rms_norm_eps));
        json_object_set_new(o, "rope_theta", json_real(l->rope.theta));
        json_object_set_new(o, "rope_scaling",
                            l->rope.factor == 0
                                ? json_null()
                                : json_pack("{s:s, s:f, s:f, s:f, s:I}", "rope_type", "llama3", "factor", l->rope.factor,
                                            "low_freq_factor", l->rope.low_freq_factor, "high_freq_factor",
                                            l->rope.high_freq_factor, "original_max_position_embeddings",
                                            (json_int_t)l->rope.original_max_position_embeddings));
        json_object_set_new(o, "attention_bias", json_boolean(l->attention_bias));
        json_object_set_new(o, "mlp_bias", json_boolean(l->mlp_bias));
        json_object_set_new(o, "tie_word_embeddings", json_boolean(l->tie_word_embeddings));
        json_object_set_new(o, "attention_dropout", json_real(l->attention_dropout));
        json_object_set_new(o, "initializer_range", json_real(l->initializer_range));
        json_object_set_new(o, "bos_token_id", json_integer(l->bos_token_id));
        json_object_set_new(o, "eos_token_id", json_integer(l->eos_token_id));
        json_object_set_new(o, "torch_dtype", json_string(torch_dtype(l->dtype)));
        json_t *q = !l->bitlinear ? NULL /* quantization_from_json's reading */
                    : json_pack("{s:s, s:s, s:s, s:b, s:f, s:[s]}", "quant_method", "bitnet", "linear_class",
                                "autobitlinear", "quantization_mode", "online", "use_rms_norm", 1, "rms_norm_eps",
                                NB_BITLINEAR_EPS, "modules_to_not_convert", "lm_head");
        if (l->bitlinear && json_object_set_new(o, "quantization_config", q)) { /* q NULL: out of memory */
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* The fewest significant digits (15 to 17) that print every real of o so
 * that it reads back exactly: 1e-5 stays "1e-5", not 1.0000000000000001e-5. */
static int real_precision(const json_t *o) {
    int p = 15;
    if (json_is_real(o)) {
        double v = json_real_value(o);
        char b[40];
        for (; p < 17; p++) {
            snprintf(b, sizeof b, "%.*g", p, v);
            if (strtod(b, NULL) == v) break;
        }
    } else if (json_is_object(o)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)o, k, v) {
            int q = real_precision(v);
            p = q > p ? q : p;
        }
    }
    return p;
}

/* ---- weights ----------------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* The canonical key of a file key ("" to drop it), into buf. */
static const char *canonical(const nb_decoder_ctx *c, const char *key, const nb_tensor *t, char *buf, size_t len) {
    bool gpt2 = c->s.family == NB_FAMILY_GPT2;
    const char *base = gpt2 ? "transformer." : "model.";
    if (ends_with(key, ".attn.bias") || ends_with(key, ".attn.masked_bias") || ends_with(key, "rotary_emb.inv_freq"))
        return ""; /* old non-persistent buffers that transformers ignores */
    if (!strcmp(key, "lm_head.weight")) {
        nb_tensor *w = nb_module_get(c->embed, "weight");
        bool same = nb_dim(t) == 2 && nb_size(t, 0) == nb_size(w, 0) && nb_size(t, 1) == nb_size(w, 1);
        return c->s.tied && same ? "" : key; /* a tied head stored anyway (as torch.save'd state_dicts have it) */
    }
    static const char *gpt2_bare[] = {"h.", "wte.", "wpe.", "ln_f."}, *llama_bare[] = {"layers.", "embed_tokens.", "norm."};
    const char *const *bare = gpt2 ? gpt2_bare : llama_bare;
    for (int i = 0; i < (gpt2 ? 4 : 3); i++)
        if (starts_with(key, bare[i])) { /* a bare GPT2Model / LlamaModel key */
            snprintf(buf, len, "%s%s", base, key);
            return buf;
        }
    return key;
}

/* The files of path: a weight file (safetensors or torch.save's), or in a
 * directory model.safetensors, the shards of model.safetensors.index.json,
 * pytorch_model.bin or the shards of pytorch_model.bin.index.json (the
 * first found; the index's weight_map names the shards). */
static nb_status weight_files(const char *path, char ***files, int *n) {
    *files = NULL, *n = 0;
    struct stat sb;
    if (stat(path, &sb)) return nb_set_error(NB_ERR_IO, "load_weights: cannot open %s: %s", path, strerror(errno));
    char *one = NULL;
    if (!S_ISDIR(sb.st_mode)) one = strdup(path);
    else {
        char p[4200];
        static const char *const single[] = {"model.safetensors", "pytorch_model.bin"};
        for (int k = 0; k < 2; k++) {
            snprintf(p, sizeof p, "%s/%s", path, single[k]);
            if (!stat(p, &sb)) {
                one = strdup(p);
                break;
            }
            snprintf(p, sizeof p, "%s/%s.index.json", path, single[k]);
            if (!stat(p, &sb)) break;
        }
        if (!one) {
            json_error_t err;
            json_t *idx = json_load_file(p, 0, &err);
            if (!idx)
                return nb_set_error(stat(p, &sb) ? NB_ERR_IO : NB_ERR_FORMAT,
                                    "load_weights: %s has no model.safetensors, pytorch_model.bin or readable index of "
                                    "their shards (*.index.json)", path);
            json_t *map = json_object_get(idx, "weight_map");
            size_t cap = map ? json_object_size(map) : 0;
            *files = calloc(cap + 1, sizeof **files);
            nb_status st = json_is_object(map) && *files ? NB_OK
                           : *files ? nb_set_error(NB_ERR_FORMAT, "load_weights: %s: no \"weight_map\" object", p)
                                    : nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
            const char *key;
            json_t *v;
            json_object_foreach(map, key, v) {
                if (st) break;
                const char *f = json_string_value(v);
                if (!f || strchr(f, '/')) {
                    st = nb_set_error(NB_ERR_FORMAT, "load_weights: %s: bad shard name for %s", p, key);
                    break;
                }
                bool seen = false;
                for (int i = 0; i < *n && !seen; i++) seen = ends_with((*files)[i], f);
                if (seen) continue;
                snprintf(p, sizeof p, "%s/%s", path, f);
                if (!((*files)[(*n)++] = strdup(p))) st = nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
            }
            json_decref(idx);
            return st;
        }
    }
    if (!one) return nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
    *files = malloc(sizeof **files);
    if (!*files) return free(one), nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
    (*files)[0] = one, *n = 1;
    return NB_OK;
}

nb_status nb_causal_lm_load_weights(nb_module *m, const char *path, bool strict, nb_load_report *report) {
    if (report) memset(report, 0, sizeof *report);
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c || !path)
        return nb_set_error(NB_ERR_INVALID_ARG, "load_weights: needs a GPT-2 or Llama model (got %s) and a path",
                            m ? nb_module_kind(m) : "NULL");
    char **files;
    int nf;
    nb_status st = weight_files(path, &files, &nf);
    nb_weights *wf = st ? NULL : calloc((size_t)nf + 1, sizeof *wf);
    if (!st && !wf) st = nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
    int total = 0;
    for (int i = 0; !st && i < nf; i++)
        if (!(st = nb_weights_open(files[i], &wf[i]))) total += wf[i].n;
    nb_named_tensor *ts = st ? NULL : calloc((size_t)total + 1, sizeof *ts);
    char **names = st ? NULL : calloc((size_t)total + 1, sizeof *names);
    if (!st && (!ts || !names)) st = nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
    int n = 0;
    for (int i = 0; !st && i < nf; i++)
        for (int j = 0; !st && j < wf[i].n; j++) {
            char buf[512];
            const nb_named_tensor *t = &wf[i].tensors[j];
            const char *k = canonical(c, t->name, t->tensor, buf, sizeof buf);
            if (!*k) continue;
            if (!(names[n] = strdup(k))) st = nb_set_error(NB_ERR_OOM, "load_weights: out of host memory");
            else ts[n] = (nb_named_tensor){names[n], t->tensor}, n++;
        }
    if (!st) st = nb_module_load_tensors(m, ts, n, strict, report);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names), free(ts);
    for (int i = 0; wf && i < nf; i++) nb_weights_close(&wf[i]);
    free(wf);
    for (int i = 0; i < nf; i++) free(files[i]);
    free(files);
    return st;
}

/* ---- directories ---------------------------------------------------------------------------------- */

/* The first module of m's tree whose weight was converted for inference
 * (nb_module_bitnet_pack, nb_module_int8_weight_only): its buffers are not
 * transformers' keys. NULL when there is none. */
static nb_module *converted(nb_module *m) {
    static const char *const bufs[] = {"weight_packed", "weight_int8", "in_proj_weight_packed", "in_proj_weight_int8"};
    for (int i = 0; i < 4; i++)
        if (nb_module_get(m, bufs[i])) return m;
    for (int i = 0; i < nb_module_num_children(m); i++) {
        nb_module *c = converted(nb_module_child_at(m, i));
        if (c) return c;
    }
    return NULL;
}

nb_status nb_save_pretrained(nb_module *m, const char *dir) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c || !dir || strlen(dir) > 4000)
        return nb_set_error(NB_ERR_INVALID_ARG, "save_pretrained: needs a GPT-2 or Llama model (got %s) and a directory",
                            m ? nb_module_kind(m) : "NULL");
    nb_module *conv = converted(m);
    if (conv)
        return nb_set_error(NB_ERR_UNSUPPORTED, "save_pretrained: the model holds a %s converted for inference "
                                                "(packed or int8 weights are not transformers' keys): save the float "
                                                "model, or the converted one with nb_module_state_dict_save",
                            nb_module_kind(conv));
    if (mkdir(dir, 0777) && errno != EEXIST)
        return nb_set_error(NB_ERR_IO, "save_pretrained: cannot create %s: %s", dir, strerror(errno));
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    nb_status st = nb_module_state_dict_save(m, p);
    if (st) return st;
    json_t *o = config_json(c);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(real_precision(o))) : NULL;
    json_decref(o);
    if (!text) return nb_set_error(NB_ERR_OOM, "save_pretrained: out of host memory");
    size_t len = strlen(text);
    char *full = malloc(len + 2);
    if (full) memcpy(full, text, len), full[len] = '\n', full[len + 1] = 0;
    free(text);
    if (!full) return nb_set_error(NB_ERR_OOM, "save_pretrained: out of host memory");
    snprintf(p, sizeof p, "%s/config.json", dir);
    st = nb_write_file_atomic("save_pretrained", p, full, len + 1);
    free(full);
    return st;
}

nb_module *nb_from_pretrained(const char *dir, nb_load_report *report) {
    return nb_from_pretrained_as(dir, NB_DTYPE_COUNT, report);
}

nb_module *nb_from_pretrained_as(const char *dir, nb_dtype dtype, nb_load_report *report) {
    if (report) memset(report, 0, sizeof *report);
    if (dtype != NB_DTYPE_COUNT && !nb_dtype_is_float(dtype))
        return NB_FAIL(NB_ERR_DTYPE, "from_pretrained: dtype %s is not a float dtype", nb_dtype_name(dtype));
    if (!dir || strlen(dir) > 4000) return NB_FAIL(NB_ERR_INVALID_ARG, "from_pretrained: bad directory");
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    nb_gpt2_config g;
    nb_llama_config l;
    bool is_llama = false;
    if (nb_hf_config_load(p, &g, &l, &is_llama)) return NULL;
    double range = is_llama ? l.initializer_range : g.initializer_range;
    if (is_llama) l.initializer_range = 0; /* the weights are loaded next: skip the random init */
    else g.initializer_range = 0;
    if (dtype != NB_DTYPE_COUNT) l.dtype = g.dtype = dtype;
    nb_module *m = is_llama ? nb_llama(l) : nb_gpt2(g);
    if (m && nb_causal_lm_load_weights(m, dir, true, report)) {
        nb_module_free(m);
        return NULL;
    }
    nb_decoder_ctx *c = (nb_decoder_ctx *)nb_decoder_ctx_of(m);
    if (c) c->s.init_range = c->gpt2.initializer_range = c->llama.initializer_range = range; /* the file's value */
    if (m) nb_module_train(m, false); /* eval mode, as transformers' from_pretrained */
    return m;
}
