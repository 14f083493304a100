/* decoder.c - GPT-2 and Llama as one pre-norm decoder (transformers'
 * modeling_gpt2.py and modeling_llama.py, with their module names): the
 * module trees, their initialisation, the KV cache and the forward, causal
 * self-attention through the fused nb_scaled_dot_product_attention (grouped
 * query heads by its enable_gqa). Shapes: B batch, T new tokens, P = tokens
 * already cached, H hidden, nh heads, nkv kv heads, hd head_dim. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_foreach.h"
#include "nb_autograd.h"
#include "nn_impl.h"

/* ---- the KV cache ------------------------------------------------------------------------ */

struct nb_kv_cache {
    const nb_module *model; /* the model it was made for */
    int64_t batch, max_len, len;
    int layers;
    nb_tensor **k, **v; /* per layer [batch, nkv, max_len, hd], owned */
    int64_t *pad;       /* or per sequence, the left padding (nb_kv_cache_set_left_padding) */
    nb_tensor *pad_dev; /* with pad: the same as int64 [batch, 1] on the cache's device, owned */
};

/* What one forward shares across layers. */
typedef struct fwd_state {
    nb_kv_cache *cache; /* or NULL */
    int64_t offset;     /* P: cached tokens before these */
    nb_tensor *dpos;    /* or the position on the device (int64 [1]): a static-shape decode step */
    nb_tensor *cos, *sin; /* Llama: rotary tables [T, hd/2], or [B * T, hd/2] per sequence (per_seq) */
    bool per_seq;       /* positions differ per sequence (a left-padded cache) */
    nb_tensor *mask;    /* bool [T, P + T] when P > 0 and T > 1 (the causal mask aligned to the end) */
} fwd_state;

/* ---- attention ---------------------------------------------------------------------------------- */

typedef struct attn_ctx {
    nb_decoder_shape s;
    int layer;
    nb_module *c_attn, *c_proj, *resid_dropout; /* GPT-2 */
    nb_module *q, *k, *v, *o;                   /* Llama */
    nb_module *rotary;                          /* Llama: the model's rotary_emb (borrowed) */
} attn_ctx;

/* x [B, n, T, hd] rotated at per-sequence positions, tables [B * T, hd/2]:
 * as [n, B * T, hd] (the one copy the rotation makes anyway), seen back as
 * [B, n, T, hd]. */
static nb_tensor *rope_per_seq(nb_tensor *x, nb_tensor *cos, nb_tensor *sin) {
    if (!x) return NULL;
    int64_t B = nb_size(x, 0), n = nb_size(x, 1), T = nb_size(x, 2), hd = nb_size(x, 3);
    const int swap[4] = {1, 0, 2, 3};
    nb_tensor *r = nb_reshape(nb_contiguous(nb_permute(x, swap)), 3, (int64_t[]){n, B * T, hd});
    r = nb_apply_rotary_pos_emb(r, cos, sin);
    return nb_permute(nb_reshape(r, 4, (int64_t[]){n, B, T, hd}), swap);
}

static nb_tensor *rope(nb_tensor *x, const fwd_state *st) {
    return st->per_seq ? rope_per_seq(x, st->cos, st->sin) : nb_apply_rotary_pos_emb(x, st->cos, st->sin);
}

/* [B, T, n*hd] -> [B, n, T, hd] */
static nb_tensor *split_heads(nb_tensor *x, int64_t n, int64_t hd) {
    int64_t B = nb_size(x, 0), T = nb_size(x, 1);
    return nb_transpose(nb_reshape(x, 4, (int64_t[]){B, T, n, hd}), 1, 2);
}

/* Writes k, v [B, nkv, T, hd] at positions P.. of the layer's cache and
 * returns views of positions 0 .. P+T-1 in *k, *v. */
static bool cache_update(nb_kv_cache *c, int layer, int64_t P, nb_tensor **k, nb_tensor **v, nb_tensor *dpos) {
    if (dpos) { /* at the device's position, and attention over the whole cache under the mask keys <= pos */
        if (nb_index_copy_(c->k[layer], 2, dpos, *k) || nb_index_copy_(c->v[layer], 2, dpos, *v)) return false;
        *k = c->k[layer], *v = c->v[layer];
        return true;
    }
    int64_t T = nb_size(*k, 2);
    if (nb_copy_(nb_narrow(c->k[layer], 2, P, T), *k) || nb_copy_(nb_narrow(c->v[layer], 2, P, T), *v)) return false;
    *k = nb_narrow(c->k[layer], 2, 0, P + T), *v = nb_narrow(c->v[layer], 2, 0, P + T);
    return *k && *v;
}

static nb_tensor *attention(const attn_ctx *a, nb_module *self, nb_tensor *x, const fwd_state *st) {
    const nb_decoder_shape *s = &a->s;
    int64_t B = nb_size(x, 0), T = nb_size(x, 1), hd = s->head_dim;
    nb_tensor *q, *k, *v;
    if (s->family == NB_FAMILY_GPT2) {
        nb_tensor *qkv = nb_forward(a->c_attn, x); /* [B, T, 3H]: q | k | v */
        q = split_heads(nb_narrow(qkv, 2, 0, s->hidden), s->heads, hd);
        k = split_heads(nb_narrow(qkv, 2, s->hidden, s->hidden), s->heads, hd);
        v = split_heads(nb_narrow(qkv, 2, 2 * s->hidden, s->hidden), s->heads, hd);
    } else {
        nb_module *qkv[3] = {a->q, a->k, a->v};
        nb_tensor *f = NULL; /* [B, T, qd + 2 kvd]: q | k | v, one product */
        int64_t qd = s->heads * hd, kvd = s->kv_heads * hd;
        if (nb_decoder_fused_linear(qkv, 3, x, &f)) { /* q and k rotated in one call, as the heads of q | k */
            if (!f) return NULL;
            nb_tensor *qk = rope(split_heads(nb_narrow(f, 2, 0, qd + kvd), s->heads + s->kv_heads, hd), st);
            q = nb_narrow(qk, 1, 0, s->heads), k = nb_narrow(qk, 1, s->heads, s->kv_heads);
            v = split_heads(nb_narrow(f, 2, qd + kvd, kvd), s->kv_heads, hd);
        } else {
            q = rope(split_heads(nb_forward(a->q, x), s->heads, hd), st);
            k = rope(split_heads(nb_forward(a->k, x), s->kv_heads, hd), st);
            v = split_heads(nb_forward(a->v, x), s->kv_heads, hd);
        }
    }
    if (!q || !k || !v) return NULL;
    if (st->cache && !cache_update(st->cache, a->layer, st->offset, &k, &v, st->dpos)) return NULL;
    nb_sdpa_options o = {.enable_gqa = s->kv_heads != s->heads, .attn_mask = st->mask,
                         .is_causal = !st->mask && T > 1,
                         .dropout_p = nb_module_is_training(self) ? s->attn_dropout : 0};
    nb_tensor *y = nb_scaled_dot_product_attention(q, k, v, o); /* [B, nh, T, hd] */
    y = nb_reshape(nb_transpose(y, 1, 2), 3, (int64_t[]){B, T, s->heads * hd});
    if (s->family == NB_FAMILY_GPT2) return nb_forward(a->resid_dropout, nb_forward(a->c_proj, y));
    return nb_forward(a->o, y);
}

/* The tables of positions 0 .. T-1 for a module run on its own. */
static bool standalone_state(nb_module *rotary, int64_t T, fwd_state *st) {
    memset(st, 0, sizeof *st);
    return !rotary || nb_nn_rotary_embedding_forward(rotary, T, 0, &st->cos, &st->sin) == NB_OK;
}

static nb_tensor *attn_forward1(nb_module *m, nb_tensor *x) {
    const attn_ctx *a = nb_module_ctx(m);
    if (nb_dim(x) != 3) return NB_FAIL(NB_ERR_SHAPE, "attention: input must be [B, T, H]");
    nb_scope *s = nb_op_scope_begin();
    fwd_state st;
    nb_tensor *y = standalone_state(a->rotary, nb_size(x, 1), &st) ? attention(a, m, x, &st) : NULL;
    return nb_scope_return(s, y);
}

static const nb_module_ops gpt2_attn_ops = {"GPT2Attention", attn_forward1, free, NULL};
static const nb_module_ops llama_attn_ops = {"LlamaAttention", attn_forward1, free, NULL};

static nb_module *attention_new(const nb_decoder_shape *s, int layer, nb_module *rotary) {
    bool gpt2 = s->family == NB_FAMILY_GPT2;
    attn_ctx *a = calloc(1, sizeof *a);
    nb_module *m = a ? nb_module_new(gpt2 ? &gpt2_attn_ops : &llama_attn_ops, a)
                     : NB_FAIL(NB_ERR_OOM, "decoder: out of host memory");
    if (!m) return NULL;
    a->s = *s, a->layer = layer, a->rotary = rotary;
    int64_t H = s->hidden, qd = s->heads * s->head_dim, kvd = s->kv_heads * s->head_dim;
    bool ok, b = s->attn_bias;
    nb_module *(*lin)(int64_t, int64_t, bool, nb_dtype) = s->bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex;
    if (gpt2)
        ok = nb_decoder_add(m, "c_attn", nb_hf_conv1d(H, 3 * H, s->dtype), &a->c_attn) &&
             nb_decoder_add(m, "c_proj", nb_hf_conv1d(H, H, s->dtype), &a->c_proj) &&
             nb_decoder_add(m, "resid_dropout", nb_nn_dropout(s->resid_dropout), &a->resid_dropout);
    else
        ok = nb_decoder_add(m, "q_proj", lin(H, qd, b, s->dtype), &a->q) &&
             nb_decoder_add(m, "k_proj", lin(H, kvd, b, s->dtype), &a->k) &&
             nb_decoder_add(m, "v_proj", lin(H, kvd, b, s->dtype), &a->v) &&
             nb_decoder_add(m, "o_proj", lin(qd, H, b, s->dtype), &a->o) &&
             nb_decoder_pack((nb_module *[]){a->q, a->k, a->v}, 3) == NB_OK;
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- GPT-2's MLP ------------------------------------------------------------------------------- */

typedef struct gpt2_mlp_ctx {
    nb_module *c_fc, *c_proj, *dropout;
} gpt2_mlp_ctx;

/* dropout(c_proj(gelu_tanh(c_fc(x)))): transformers' "gelu_new" */
static nb_tensor *gpt2_mlp_forward(nb_module *m, nb_tensor *x) {
    const gpt2_mlp_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = nb_gelu(nb_forward(c->c_fc, x), NB_GELU_TANH);
    return nb_scope_return(s, nb_forward(c->dropout, nb_forward(c->c_proj, h)));
}

static const nb_module_ops gpt2_mlp_ops = {"GPT2MLP", gpt2_mlp_forward, free, NULL};

static nb_module *gpt2_mlp_new(const nb_decoder_shape *s) {
    gpt2_mlp_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&gpt2_mlp_ops, c) : NB_FAIL(NB_ERR_OOM, "GPT-2: out of host memory");
    if (!m) return NULL;
    bool ok = nb_decoder_add(m, "c_fc", nb_hf_conv1d(s->hidden, s->inner, s->dtype), &c->c_fc) &&
              nb_decoder_add(m, "c_proj", nb_hf_conv1d(s->inner, s->hidden, s->dtype), &c->c_proj) &&
              nb_decoder_add(m, "dropout", nb_nn_dropout(s->resid_dropout), &c->dropout);
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- the pre-norm block ------------------------------------------------------------------------- */

typedef struct block_ctx {
    nb_module *norm1, *attn, *norm2, *mlp; /* borrowed children */
    nb_module *rotary;                     /* Llama: borrowed from the model */
} block_ctx;

/* The attention module's work with its hooks around it, on (x) -> (y), as
 * a call through nb_forward would run them (the state is no tensor). */
static nb_tensor *attention_hooked(nb_module *m, nb_tensor *x, const fwd_state *st) {
    if (!x || nb_module_run_pre_hooks(m, 1, &x)) return NULL;
    nb_tensor *y = attention(nb_module_ctx(m), m, x, st);
    return y && !nb_module_run_post_hooks(m, 1, &x, 1, &y) ? y : NULL;
}

/* x = x + attn(norm1(x)); x = x + mlp(norm2(x)), each half in its own
 * scope: the attention's intermediates are gone before the MLP's exist */
static nb_tensor *block(const block_ctx *b, nb_tensor *x, const fwd_state *st) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = nb_scope_return(s, nb_add(x, attention_hooked(b->attn, nb_forward(b->norm1, x), st)));
    s = nb_op_scope_begin();
    return nb_scope_return(s, nb_add(h, nb_forward(b->mlp, nb_forward(b->norm2, h))));
}

static nb_tensor *block_forward1(nb_module *m, nb_tensor *x) {
    const block_ctx *b = nb_module_ctx(m);
    if (nb_dim(x) != 3) return NB_FAIL(NB_ERR_SHAPE, "%s: input must be [B, T, H]", nb_module_kind(m));
    nb_scope *s = nb_op_scope_begin();
    fwd_state st;
    nb_tensor *y = standalone_state(b->rotary, nb_size(x, 1), &st) ? block(b, x, &st) : NULL;
    return nb_scope_return(s, y);
}

static const nb_module_ops gpt2_block_ops = {"GPT2Block", block_forward1, free, NULL};
static const nb_module_ops llama_block_ops = {"LlamaDecoderLayer", block_forward1, free, NULL};

static nb_module *norm_new(const nb_decoder_shape *s) {
    if (s->family == NB_FAMILY_GPT2) return nb_nn_layer_norm_ex(1, &s->hidden, s->norm_eps, true, s->dtype);
    return nb_nn_rms_norm(s->hidden, s->norm_eps, s->dtype);
}

/* Children in transformers' order: GPT2Block ln_1, attn, ln_2, mlp;
 * LlamaDecoderLayer self_attn, mlp, input_layernorm, post_attention_layernorm. */
static nb_module *block_new(const nb_decoder_shape *s, int layer, nb_module *rotary) {
    bool gpt2 = s->family == NB_FAMILY_GPT2;
    block_ctx *b = calloc(1, sizeof *b);
    nb_module *m = b ? nb_module_new(gpt2 ? &gpt2_block_ops : &llama_block_ops, b)
                     : NB_FAIL(NB_ERR_OOM, "decoder: out of host memory");
    if (!m) return NULL;
    b->rotary = rotary;
    bool ok;
    if (gpt2)
        ok = nb_decoder_add(m, "ln_1", norm_new(s), &b->norm1) &&
             nb_decoder_add(m, "attn", attention_new(s, layer, NULL), &b->attn) &&
             nb_decoder_add(m, "ln_2", norm_new(s), &b->norm2) && nb_decoder_add(m, "mlp", gpt2_mlp_new(s), &b->mlp);
    else
        ok = nb_decoder_add(m, "self_attn", attention_new(s, layer, rotary), &b->attn) &&
             nb_decoder_add(m, "mlp", nb_swiglu_new(s->hidden, s->inner, s->mlp_bias, s->dtype, s->bitlinear), &b->mlp) &&
             nb_decoder_add(m, "input_layernorm", norm_new(s), &b->norm1) &&
             nb_decoder_add(m, "post_attention_layernorm", norm_new(s), &b->norm2);
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- the model -------------------------------------------------------------------------------------- */

static nb_tensor *causal_lm_forward1(nb_module *m, nb_tensor *ids) { return nb_causal_lm_forward(m, ids, NULL); }

static nb_tensor *base_forward1(nb_module *m, nb_tensor *x) {
    (void)m, (void)x;
    return NB_FAIL(NB_ERR_INVALID_ARG, "decoder: run the whole model (nb_causal_lm_hidden gives this module's output)");
}

static const nb_module_ops gpt2_ops = {"GPT2LMHeadModel", causal_lm_forward1, free, NULL};
static const nb_module_ops llama_ops = {"LlamaForCausalLM", causal_lm_forward1, free, NULL};
static const nb_module_ops gpt2_base_ops = {"GPT2Model", base_forward1, NULL, NULL};
static const nb_module_ops llama_base_ops = {"LlamaModel", base_forward1, NULL, NULL};

const nb_decoder_ctx *nb_decoder_ctx_of(const nb_module *m) {
    const char *k = m ? nb_module_kind(m) : NULL;
    return k == gpt2_ops.kind || k == llama_ops.kind ? nb_module_ctx((nb_module *)m) : NULL;
}

bool nb_is_causal_lm(const nb_module *m) { return nb_decoder_ctx_of(m) != NULL; }

/* transformers' _init_weights: matrices (linear, Conv1D, embeddings)
 * N(0, r^2), biases 0, norm weights 1; GPT-2's c_proj weights N(0, r^2 / (2
 * n_layer)) (the scaled residual init of the GPT-2 paper). */
static nb_status init_weights(nb_module *m, const nb_decoder_shape *s) {
    int n = nb_module_parameters(m, NULL, 0);
    nb_named_tensor *p = n > 0 ? malloc(sizeof *p * (size_t)n) : NULL;
    if (!p) return n < 0 ? nb_last_status() : nb_set_error(NB_ERR_OOM, "decoder: out of host memory");
    nb_module_parameters(m, p, n);
    nb_status st = NB_OK;
    double scaled = s->init_range / sqrt(2.0 * s->layers);
    for (int i = 0; !st && i < n; i++) {
        size_t len = strlen(p[i].name);
        bool c_proj = len >= 13 && !strcmp(p[i].name + len - 13, "c_proj.weight");
        if (len >= 4 && !strcmp(p[i].name + len - 4, "bias")) st = nb_fill_(p[i].tensor, 0.0);
        else if (nb_dim(p[i].tensor) == 1) st = nb_fill_(p[i].tensor, 1.0);
        else st = nb_normal_(p[i].tensor, 0.0, s->family == NB_FAMILY_GPT2 && c_proj ? scaled : s->init_range, NULL);
    }
    free(p);
    return st;
}

static bool shape_ok(const nb_decoder_shape *s, const char *who) {
    const char *bad = NULL;
    if (s->vocab < 1 || s->hidden < 1 || s->layers < 1 || s->heads < 1 || s->kv_heads < 1 || s->inner < 1 ||
        s->max_positions < 1 || s->head_dim < 1)
        bad = "sizes must be >= 1";
    else if (s->heads % s->kv_heads)
        bad = "the attention heads must be a multiple of the key/value heads";
    else if (s->family == NB_FAMILY_GPT2 && s->hidden % s->heads)
        bad = "n_embd must be divisible by n_head";
    else if (s->family == NB_FAMILY_LLAMA && s->head_dim % 2)
        bad = "head_dim must be even (rotary embedding)";
    else if (!(s->attn_dropout >= 0 && s->attn_dropout < 1) || !(s->resid_dropout >= 0 && s->resid_dropout < 1) ||
             !(s->embd_dropout >= 0 && s->embd_dropout < 1))
        bad = "dropout probabilities must be in [0, 1)";
    else if (!(s->norm_eps > 0) || !(s->init_range >= 0))
        bad = "the norm eps must be > 0 and initializer_range >= 0";
    else if (!nb_dtype_is_float(s->dtype)) {
        nb_set_error(NB_ERR_DTYPE, "%s: dtype must be float32, float64, bfloat16 or float16", who);
        return false;
    }
    if (!bad) return true;
    nb_set_error(NB_ERR_INVALID_ARG,
                 "%s: %s (vocab %lld, hidden %lld, layers %d, heads %lld, kv heads %lld, head_dim %lld, inner %lld, "
                 "positions %lld, dropout %g/%g/%g, eps %g, init %g)",
                 who, bad, (long long)s->vocab, (long long)s->hidden, s->layers, (long long)s->heads,
                 (long long)s->kv_heads, (long long)s->head_dim, (long long)s->inner, (long long)s->max_positions,
                 s->attn_dropout, s->resid_dropout, s->embd_dropout, s->norm_eps, s->init_range);
    return false;
}

static nb_module *decoder_new(nb_decoder_ctx *c) {
    const nb_decoder_shape *s = &c->s;
    bool gpt2 = s->family == NB_FAMILY_GPT2;
    const char *who = gpt2 ? "GPT-2" : "Llama";
    if (!shape_ok(s, who)) {
        free(c);
        return NULL;
    }
    nb_module *m = nb_module_new(gpt2 ? &gpt2_ops : &llama_ops, c); /* frees c on failure */
    if (!m) return NULL;
    nb_module *base = nb_module_new(gpt2 ? &gpt2_base_ops : &llama_base_ops, NULL), *layers = NULL;
    if (nb_decoder_add(m, gpt2 ? "transformer" : "model", base, &c->base)) layers = nb_nn_module_list();
    if (!layers) {
        nb_module_free(m);
        return NULL;
    }
    nb_dtype dt = s->dtype;
    bool ok;
    if (gpt2)
        ok = nb_decoder_add(base, "wte", nb_nn_embedding_ex(s->vocab, s->hidden, NB_NO_PADDING_IDX, dt), &c->embed) &&
             nb_decoder_add(base, "wpe", nb_nn_embedding_ex(s->max_positions, s->hidden, NB_NO_PADDING_IDX, dt),
                            &c->pos) &&
             nb_decoder_add(base, "drop", nb_nn_dropout(s->embd_dropout), &c->drop) &&
             nb_decoder_add(base, "h", layers, &c->layers);
    else
        ok = nb_decoder_add(base, "embed_tokens", nb_nn_embedding_ex(s->vocab, s->hidden, NB_NO_PADDING_IDX, dt),
                            &c->embed) &&
             nb_decoder_add(base, "layers", layers, &c->layers);
    if (!ok && !c->layers) nb_module_free(layers); /* not yet in the tree */
    if (ok && !gpt2) ok = (c->rotary = nb_nn_rotary_embedding(s->head_dim, c->llama.rope, dt)) != NULL;
    for (int i = 0; ok && i < s->layers; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        ok = nb_decoder_add(layers, name, block_new(s, i, c->rotary), NULL);
    }
    if (ok) ok = nb_decoder_add(base, gpt2 ? "ln_f" : "norm", norm_new(s), &c->norm);
    if (!gpt2 && c->rotary) { /* added last so that a failure above still frees it */
        nb_module *r = c->rotary;
        c->rotary = NULL;
        if (ok) ok = nb_decoder_add(base, "rotary_emb", r, &c->rotary);
        else nb_module_free(r);
    }
    nb_tensor *w = ok ? nb_module_get(c->embed, "weight") : NULL;
    if (ok) ok = nb_decoder_add(m, "lm_head", s->tied ? nb_tied_linear(w) : nb_nn_linear_ex(s->hidden, s->vocab, false, dt),
                                &c->lm_head);
    if (!ok || (s->init_range > 0 && init_weights(m, s))) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_gpt2_config nb_gpt2_config_default(void) {
    return (nb_gpt2_config){.vocab_size = 50257, .n_positions = 1024, .n_embd = 768, .n_layer = 12, .n_head = 12,
                            .n_inner = 0, .layer_norm_epsilon = 1e-5, .resid_pdrop = 0.1, .embd_pdrop = 0.1,
                            .attn_pdrop = 0.1, .initializer_range = 0.02, .bos_token_id = 50256,
                            .eos_token_id = 50256, .dtype = NB_F32};
}

nb_llama_config nb_llama_config_default(void) {
    return (nb_llama_config){.vocab_size = 32000, .hidden_size = 4096, .intermediate_size = 11008,
                             .num_hidden_layers = 32, .num_attention_heads = 32, .num_key_value_heads = 0,
                             .head_dim = 0, .max_position_embeddings = 2048, .rms_norm_eps = 1e-6,
                             .rope = {.theta = 10000}, .initializer_range = 0.02, .bos_token_id = 1,
                             .eos_token_id = 2, .dtype = NB_F32};
}

nb_llama_config nb_llama_config_3_2_1b(void) {
    nb_llama_config c = nb_llama_config_default();
    c.vocab_size = 128256, c.hidden_size = 2048, c.intermediate_size = 8192, c.num_hidden_layers = 16;
    c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = 64, c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5, c.tie_word_embeddings = true, c.bos_token_id = 128000, c.eos_token_id = 128001;
    c.rope = (nb_rope_config){.theta = 500000, .factor = 32, .low_freq_factor = 1, .high_freq_factor = 4,
                              .original_max_position_embeddings = 8192};
    return c;
}

nb_module *nb_gpt2(nb_gpt2_config g) {
    nb_decoder_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "GPT-2: out of host memory");
    c->gpt2 = g;
    int64_t hd = g.n_head > 0 ? g.n_embd / g.n_head : 0;
    c->s = (nb_decoder_shape){.family = NB_FAMILY_GPT2, .vocab = g.vocab_size, .hidden = g.n_embd,
                              .heads = g.n_head, .kv_heads = g.n_head, .head_dim = hd,
                              .inner = g.n_inner ? g.n_inner : 4 * g.n_embd, .layers = g.n_layer,
                              .max_positions = g.n_positions, .norm_eps = g.layer_norm_epsilon,
                              .attn_dropout = g.attn_pdrop, .resid_dropout = g.resid_pdrop,
                              .embd_dropout = g.embd_pdrop, .attn_bias = true, .mlp_bias = true, .tied = true,
                              .init_range = g.initializer_range, .dtype = g.dtype};
    return decoder_new(c);
}

nb_module *nb_llama(nb_llama_config l) {
    nb_decoder_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "Llama: out of host memory");
    if (l.num_key_value_heads == 0) l.num_key_value_heads = l.num_attention_heads;
    if (l.head_dim == 0 && l.num_attention_heads > 0) l.head_dim = l.hidden_size / l.num_attention_heads;
    c->llama = l;
    c->s = (nb_decoder_shape){.family = NB_FAMILY_LLAMA, .vocab = l.vocab_size, .hidden = l.hidden_size,
                              .heads = l.num_attention_heads, .kv_heads = l.num_key_value_heads,
                              .head_dim = l.head_dim, .inner = l.intermediate_size, .layers = l.num_hidden_layers,
                              .max_positions = l.max_position_embeddings, .norm_eps = l.rms_norm_eps,
                              .attn_dropout = l.attention_dropout, .attn_bias = l.attention_bias,
                              .mlp_bias = l.mlp_bias, .tied = l.tie_word_embeddings,
                              .init_range = l.initializer_range, .dtype = l.dtype, .bitlinear = l.bitlinear};
    return decoder_new(c);
}

/* A NULL module: keeps an earlier error (a failed constructor), else records one. */
static bool no_module(const char *op, const nb_module *m) {
    if (m) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    return true;
}

nb_gpt2_config nb_gpt2_get_config(const nb_module *m) {
    if (no_module("gpt2_get_config", m)) return (nb_gpt2_config){0};
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    return c && c->s.family == NB_FAMILY_GPT2 ? c->gpt2 : (nb_gpt2_config){0};
}

nb_llama_config nb_llama_get_config(const nb_module *m) {
    if (no_module("llama_get_config", m)) return (nb_llama_config){0};
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    return c && c->s.family == NB_FAMILY_LLAMA ? c->llama : (nb_llama_config){0};
}

/* ---- the KV cache --------------------------------------------------------------------------------- */

nb_kv_cache *nb_kv_cache_new(nb_module *m, int64_t batch_size, int64_t max_length) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c) return NB_FAIL(NB_ERR_INVALID_ARG, "kv_cache_new: module is %s, not a GPT-2 or Llama model",
                           m ? nb_module_kind(m) : "NULL");
    if (batch_size < 1 || max_length < 1 || max_length > c->s.max_positions)
        return NB_FAIL(NB_ERR_INVALID_ARG, "kv_cache_new: batch_size %lld and max_length %lld must be >= 1, "
                                           "max_length at most the model's %lld positions",
                       (long long)batch_size, (long long)max_length, (long long)c->s.max_positions);
    nb_kv_cache *k = calloc(1, sizeof *k);
    if (k) k->k = calloc((size_t)c->s.layers, sizeof *k->k), k->v = calloc((size_t)c->s.layers, sizeof *k->v);
    if (!k || !k->k || !k->v) {
        nb_kv_cache_free(k);
        return NB_FAIL(NB_ERR_OOM, "kv_cache_new: out of host memory");
    }
    k->model = m, k->batch = batch_size, k->max_len = max_length, k->layers = c->s.layers;
    nb_device dev = nb_device_of(nb_module_get(c->embed, "weight"));
    int64_t shape[4] = {batch_size, c->s.kv_heads, max_length, c->s.head_dim};
    for (int i = 0; i < k->layers; i++) {
        k->k[i] = nb_tensor_new_unscoped(4, shape, c->s.dtype, dev);
        k->v[i] = k->k[i] ? nb_tensor_new_unscoped(4, shape, c->s.dtype, dev) : NULL;
        /* zeros: a static decode step attends over every position under a mask, and a masked weight of 0 times
           a stale NaN or inf of recycled memory would still poison the sum */
        if (k->v[i] && (nb_fill_(k->k[i], 0) || nb_fill_(k->v[i], 0))) nb_release(k->v[i]), k->v[i] = NULL;
        if (!k->v[i]) {
            nb_kv_cache_free(k);
            return NULL;
        }
    }
    return k;
}

void nb_kv_cache_free(nb_kv_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->layers && c->k; i++) nb_release(c->k[i]);
    for (int i = 0; i < c->layers && c->v; i++) nb_release(c->v[i]);
    nb_release(c->pad_dev);
    free(c->k), free(c->v), free(c->pad), free(c);
}

nb_status nb_kv_cache_set_left_padding(nb_kv_cache *c, const int64_t *pad) {
    if (!c) return nb_set_error(NB_ERR_INVALID_ARG, "kv_cache_set_left_padding: cache is NULL");
    if (c->len)
        return nb_set_error(NB_ERR_STATE, "kv_cache_set_left_padding: the cache holds %lld tokens (crop it to 0 first)",
                            (long long)c->len);
    for (int64_t b = 0; pad && b < c->batch; b++)
        if (pad[b] < 0 || pad[b] >= c->max_len)
            return nb_set_error(NB_ERR_INVALID_ARG, "kv_cache_set_left_padding: pad[%lld] = %lld outside [0, %lld)",
                                (long long)b, (long long)pad[b], (long long)c->max_len);
    nb_release(c->pad_dev), c->pad_dev = NULL;
    if (!pad) {
        free(c->pad), c->pad = NULL;
        return NB_OK;
    }
    int64_t *p = c->pad ? c->pad : malloc(sizeof(int64_t) * (size_t)c->batch);
    if (!p) return nb_set_error(NB_ERR_OOM, "kv_cache_set_left_padding: out of host memory");
    memcpy(p, pad, sizeof(int64_t) * (size_t)c->batch);
    c->pad = p;
    c->pad_dev = nb_tensor_new_unscoped(2, (int64_t[]){c->batch, 1}, NB_I64, nb_device_of(c->k[0]));
    if (!c->pad_dev || nb_copy_from_host(c->pad_dev, p, sizeof(int64_t) * (size_t)c->batch)) {
        nb_release(c->pad_dev), c->pad_dev = NULL;
        free(c->pad), c->pad = NULL;
        return nb_last_status();
    }
    return NB_OK;
}

int64_t nb_kv_cache_length(const nb_kv_cache *c) {
    if (!c) return nb_set_error(NB_ERR_INVALID_ARG, "kv_cache_length: cache is NULL"), -1;
    return c->len;
}

nb_status nb_kv_cache_crop(nb_kv_cache *c, int64_t length) {
    if (!c || length < 0 || length > c->len)
        return nb_set_error(NB_ERR_INVALID_ARG, "kv_cache_crop: length %lld outside [0, %lld]", (long long)length,
                            (long long)(c ? c->len : 0));
    c->len = length;
    return NB_OK;
}

/* ---- forward ------------------------------------------------------------------------------------------ */

/* bool [T, P + T]: query i (at position P + i) attends to keys j <= P + i. */
static nb_tensor *end_aligned_causal_mask(int64_t T, int64_t P, nb_device dev) {
    int64_t S = P + T;
    uint8_t *b = malloc((size_t)(T * S));
    if (!b) return NB_FAIL(NB_ERR_OOM, "decoder: out of host memory");
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++) b[i * S + j] = j <= P + i;
    nb_tensor *m = nb_from_data(b, 2, (int64_t[]){T, S}, NB_BOOL);
    free(b);
    nb_device md = m ? nb_device_of(m) : dev;
    return m && (md.type != dev.type || md.index != dev.index) ? nb_to_device(m, dev) : m;
}

/* A left-padded cache's forward state for T new tokens at cache index P..,
 * built on the device from the padding (pad_dev [B, 1]): the positions
 * pos[b T + t] = P + t - pad[b] (0 on padding), int64 [B * T], and the mask
 * bool [B, 1, T, P + T]: key j for the query at index i = P + t iff pad[b]
 * <= j <= i, or j == i (a padding query sees itself alone: no row without
 * keys, whose NaN would reach the values). */
static nb_tensor *padded_state(const nb_kv_cache *c, int64_t T, int64_t P, nb_device dev, nb_tensor **mask) {
    int64_t B = c->batch, S = P + T;
    nb_tensor *idx = nb_arange((double)P, (double)S, 1, NB_I64), *keys = nb_arange(0, (double)S, 1, NB_I64);
    if (idx && (nb_device_of(idx).type != dev.type || nb_device_of(idx).index != dev.index))
        idx = nb_to_device(idx, dev), keys = nb_to_device(keys, dev);
    nb_tensor *rows = nb_reshape(idx, 4, (int64_t[]){1, 1, T, 1}), *cols = nb_reshape(keys, 4, (int64_t[]){1, 1, 1, S});
    nb_tensor *pad = nb_reshape(c->pad_dev, 4, (int64_t[]){B, 1, 1, 1});
    *mask = nb_logical_or(nb_logical_and(nb_ge(cols, pad), nb_le(cols, rows)), nb_eq(cols, rows));
    nb_tensor *pos = nb_sub(nb_reshape(idx, 2, (int64_t[]){1, T}), c->pad_dev); /* [B, T] */
    pos = nb_maximum(pos, nb_zeros_like(pos));
    return *mask ? nb_reshape(pos, 1, (int64_t[]){B * T}) : NULL;
}

/* The decoder layers over h, each in its own scope, with the layers' hooks
 * as nb_forward runs them. A layer's intermediates die with it, and so does
 * its input once the next layer has its output (the tape keeps what
 * backward needs): a long prefill holds two hidden states, not one per layer. */
static nb_tensor *layers_forward(const nb_decoder_ctx *c, nb_tensor *h, const fwd_state *st) {
    nb_tensor *owned = NULL; /* h when a previous layer made it: our reference */
    for (int i = 0; h && i < c->s.layers; i++) {
        nb_module *layer = nb_module_child_at(c->layers, i);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *y = !nb_module_run_pre_hooks(layer, 1, &h) ? block(nb_module_ctx(layer), h, st) : NULL;
        if (y && nb_module_run_post_hooks(layer, 1, &h, 1, &y)) y = NULL; /* the layer's hooks, as nb_forward's */
        nb_retain(y);
        nb_scope_return(s, NULL);
        nb_release(owned);
        h = owned = y;
    }
    return owned ? nb_scope_adopt(owned) : h;
}

/* Whether Llama's layers and final norm can run with each residual add fused into the RMSNorm after it: every
 * norm a hook-free RMSNorm, no layer with hooks (they would see the layers' outputs, which the fused loop only
 * makes inside the next layer). */
static bool adds_fuse(const nb_decoder_ctx *c) {
    if (c->s.family != NB_FAMILY_LLAMA || !nb_decoder_is_plain_rms_norm(c->norm)) return false;
    for (int i = 0; i < c->s.layers; i++) {
        nb_module *layer = nb_module_child_at(c->layers, i);
        const block_ctx *b = nb_module_ctx(layer);
        if (nb_module_has_hooks(layer) || !nb_decoder_is_plain_rms_norm(b->norm1) ||
            !nb_decoder_is_plain_rms_norm(b->norm2))
            return false;
    }
    return true;
}

/* layers_forward then the final norm, with each residual add fused into the norm after it (nb_add_rms_norm: one
 * kernel for both in inference): the residual stream x and the last MLP output d travel unsummed to the next
 * layer's norm1 (or the final norm), which makes their sum, the layer's output. The same values as the blocks. */
static nb_tensor *layers_fused(const nb_decoder_ctx *c, nb_tensor *x, const fwd_state *st) {
    nb_tensor *xo = NULL, *d = NULL; /* our references: x when made here, the MLP's output */
    bool ok = x != NULL;
    for (int i = 0; ok && i < c->s.layers; i++) {
        const block_ctx *b = nb_module_ctx(nb_module_child_at(c->layers, i));
        /* the attention half, in its own scope as block()'s */
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *h = x, *n1 = d ? nb_decoder_add_norm(b->norm1, d, x, &h) : nb_forward(b->norm1, x);
        nb_release(xo), nb_release(d); /* summed into h */
        xo = d = NULL;
        nb_tensor *h2 = NULL, *a = attention_hooked(b->attn, n1, st);
        nb_tensor *n2 = a ? nb_decoder_add_norm(b->norm2, a, h, &h2) : NULL;
        ok = n2 != NULL;
        nb_retain(h2), nb_retain(n2);
        nb_scope_return(s, NULL);
        x = xo = h2;
        /* the MLP half */
        s = nb_op_scope_begin();
        if (ok) ok = (d = nb_forward(b->mlp, n2)) != NULL;
        nb_retain(d);
        nb_scope_return(s, NULL);
        nb_release(n2);
    }
    nb_tensor *sum = NULL, *y = ok ? nb_decoder_add_norm(c->norm, d, x, &sum) : NULL;
    nb_release(xo), nb_release(d);
    return y;
}

/* The layers, then the final norm. */
static nb_tensor *layers_and_norm(const nb_decoder_ctx *c, nb_tensor *h, const fwd_state *st) {
    return adds_fuse(c) ? layers_fused(c, h, st) : nb_forward(c->norm, layers_forward(c, h, st));
}

/* The forward of ids on dev, the model's device. */
static nb_tensor *hidden_impl(const nb_decoder_ctx *c, nb_tensor *ids, nb_kv_cache *cache, nb_device dev) {
    int64_t T = nb_size(ids, 1), P = cache ? cache->len : 0;
    fwd_state st = {.cache = cache, .offset = P};
    nb_tensor *h = nb_forward(c->embed, ids);
    if (cache && cache->pad) { /* positions and mask per sequence */
        nb_tensor *pos = padded_state(cache, T, P, dev, &st.mask);
        if (!pos) return NULL;
        st.per_seq = true;
        if (c->s.family == NB_FAMILY_GPT2)
            h = nb_forward(c->drop, nb_add(h, nb_forward(c->pos, nb_reshape(pos, 2, (int64_t[]){nb_size(ids, 0), T}))));
        else if (nb_rotary_tables_at(c->rotary, pos, &st.cos, &st.sin))
            return NULL;
    } else if (c->s.family == NB_FAMILY_GPT2) {
        nb_tensor *pos = nb_arange((double)P, (double)(P + T), 1, NB_I64);
        nb_device pd = pos ? nb_device_of(pos) : dev;
        if (pos && (pd.type != dev.type || pd.index != dev.index)) pos = nb_to_device(pos, dev);
        h = nb_forward(c->drop, nb_add(h, nb_forward(c->pos, pos)));
    } else if (nb_nn_rotary_embedding_forward(c->rotary, T, P, &st.cos, &st.sin)) {
        return NULL;
    }
    if (!st.per_seq && P > 0 && T > 1 && !(st.mask = end_aligned_causal_mask(T, P, dev))) return NULL;
    h = layers_and_norm(c, h, &st);
    if (h && cache) cache->len += T;
    return h;
}

nb_tensor *nb_causal_lm_hidden(nb_module *m, nb_tensor *ids, nb_kv_cache *cache) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c) return NB_FAIL(NB_ERR_INVALID_ARG, "causal_lm: module is %s, not a GPT-2 or Llama model",
                           m ? nb_module_kind(m) : "NULL");
    if (!ids) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "causal_lm: input_ids is NULL");
        return NULL;
    }
    char a[NB_SHAPE_BUF];
    if (nb_dtype_of(ids) != NB_I64)
        return NB_FAIL(NB_ERR_DTYPE, "causal_lm: input_ids %s must be int64", nb_shape_str(ids, a, sizeof a));
    if (nb_dim(ids) != 2 || nb_size(ids, 1) < 1)
        return NB_FAIL(NB_ERR_SHAPE, "causal_lm: input_ids %s must be [B, T] with T >= 1", nb_shape_str(ids, a, sizeof a));
    if (cache && cache->model != m)
        return NB_FAIL(NB_ERR_INVALID_ARG, "causal_lm: the KV cache was made for another model");
    int64_t B = nb_size(ids, 0), T = nb_size(ids, 1), P = cache ? cache->len : 0;
    int64_t limit = cache ? cache->max_len : c->s.family == NB_FAMILY_GPT2 ? c->s.max_positions : INT64_MAX;
    if (cache && B != cache->batch)
        return NB_FAIL(NB_ERR_SHAPE, "causal_lm: input_ids %s has batch %lld, the KV cache %lld",
                       nb_shape_str(ids, a, sizeof a), (long long)B, (long long)cache->batch);
    if (T > limit - P)
        return NB_FAIL(NB_ERR_SHAPE, "causal_lm: %lld tokens after %lld exceed the %s of %lld positions", (long long)T,
                       (long long)P, cache ? "KV cache" : "model (n_positions)", (long long)limit);
    bool prev = nb_set_grad_enabled(cache ? false : nb_is_grad_enabled());
    nb_scope *s = nb_op_scope_begin();
    nb_device dev = nb_device_of(nb_module_get(c->embed, "weight")), idev = nb_device_of(ids);
    if (idev.type != dev.type || idev.index != dev.index) ids = nb_to_device(ids, dev); /* host-made ids */
    nb_tensor *h = nb_scope_return(s, ids ? hidden_impl(c, ids, cache, dev) : NULL);
    nb_set_grad_enabled(prev);
    return h;
}

nb_tensor *nb_causal_lm_head(nb_module *m, nb_tensor *hidden) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c) return NB_FAIL(NB_ERR_INVALID_ARG, "causal_lm_head: module is %s, not a GPT-2 or Llama model",
                           m ? nb_module_kind(m) : "NULL");
    return nb_forward(c->lm_head, hidden);
}

nb_tensor *nb_causal_lm_forward(nb_module *m, nb_tensor *ids, nb_kv_cache *cache) {
    bool prev = nb_set_grad_enabled(cache ? false : nb_is_grad_enabled());
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y = nb_scope_return(s, nb_causal_lm_head(m, nb_causal_lm_hidden(m, ids, cache)));
    nb_set_grad_enabled(prev);
    return y;
}

/* ---- the static decode step (generate.c's CUDA graph) ------------------------------------------ */

nb_tensor *nb_decoder_step_at(nb_module *m, nb_tensor *ids, nb_kv_cache *cache, nb_tensor *pos, nb_tensor *keys) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c || !ids || !cache || !pos || !keys || cache->model != m || nb_dim(ids) != 2 || nb_size(ids, 1) != 1 ||
        nb_size(ids, 0) != cache->batch || nb_numel(keys) != cache->max_len)
        return NB_FAIL(NB_ERR_INVALID_ARG, "decoder_step_at: needs a decoder, ids [batch, 1], its cache, a position "
                                           "and the cache's keys");
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    fwd_state st = {.cache = cache, .dpos = pos};
    int64_t B = cache->batch, S = cache->max_len;
    nb_tensor *h = nb_forward(c->embed, ids), *p = pos, *kr = nb_reshape(keys, 2, (int64_t[]){1, S});
    if (cache->pad_dev) { /* a left-padded batch: sequence b at position pos - pad[b], keys pad[b] <= j <= pos */
        p = nb_reshape(nb_sub(pos, cache->pad_dev), 1, (int64_t[]){B});
        st.per_seq = true;
        st.mask = nb_reshape(nb_logical_and(nb_le(kr, pos), nb_ge(kr, cache->pad_dev)), 4, (int64_t[]){B, 1, 1, S});
    } else {
        st.mask = nb_le(kr, pos); /* [T = 1, S]: keys <= pos */
    }
    if (c->s.family == NB_FAMILY_GPT2)
        h = nb_forward(c->drop, nb_add(h, nb_forward(c->pos, nb_reshape(p, 2, (int64_t[]){cache->pad_dev ? B : 1, 1}))));
    else if (nb_rotary_tables_at(c->rotary, p, &st.cos, &st.sin)) h = NULL;
    h = h && st.mask ? layers_and_norm(c, h, &st) : NULL;
    h = nb_scope_return(s, h);
    nb_set_grad_enabled(prev);
    return h;
}
