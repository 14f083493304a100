/* decoder_impl.h - internals shared by the decoder files of nn/ (not
 * installed): the small modules the GPT-2 and Llama trees are made of, and
 * the model context that the forward, the KV cache, generation and the
 * checkpoint code read. */
#ifndef NB_DECODER_IMPL_H
#define NB_DECODER_IMPL_H

#include "nb_decoder.h"
#include "nb_extension.h"
#include "nb_transformer.h"

/* ---- small modules (decoder_layers.c) ------------------------------------------- */

/* Transformers' Conv1D(nf, nx) of GPT-2: "weight" [nx, nf] N(0, 0.02^2),
 * "bias" [nf] zeros; y = x W + b. Kind "Conv1D". */
nb_module *nb_hf_conv1d(int64_t nx, int64_t nf, nb_dtype dt);
/* A bias-free Linear whose "weight" is `weight` itself (a tied head): kind
 * "Linear", y = x weight^T. The module takes its own reference. */
nb_module *nb_tied_linear(nb_tensor *weight);
/* For nb_module_int8_weight_only: a tied head (m of nb_tied_linear's kind;
 * any other module is left alone) gets an int8 copy of the weight as the
 * buffers "weight_int8" and "weight_scale" and drops its reference to the
 * float weight, which the embedding keeps using. */
nb_status nb_tied_linear_int8(nb_module *m);
/* Adds child under name and stores it in *slot; false on failure (the
 * child is freed by nb_module_add). */
bool nb_decoder_add(nb_module *m, const char *name, nb_module *child, nb_module **slot);
/* Fused projections. Inference reads a layer's q, k, v projections (and
 * the SwiGLU's gate and up) as one product: their weights (and biases) are
 * packed back to back into one storage at construction (nb_tensor_rebase:
 * the parameters keep their identity and names), and
 * nb_decoder_fused_linear runs x through all of them at once, [..., sum of
 * out_features], where nothing needs a gradient, the children are plain
 * hook-free Linears and their parameters still lie packed (a loader copies
 * into them; a parametrization or re-flattening that moves them turns the
 * fusion off), and under autocast only where the weights are not float32.
 * It returns whether it applied, with the product (NULL on a failure, its
 * error set) in *y; false: the caller runs them one by one. */
nb_status nb_decoder_pack(nb_module *const *linears, int n);
bool nb_decoder_fused_linear(nb_module *const *linears, int n, nb_tensor *x, nb_tensor **y);
/* Whether m is an RMSNorm module (nb_nn_rms_norm) without hooks, whose
 * forward nb_decoder_add_norm may then run with a residual add fused in:
 * nb_add_rms_norm(x, residual, m's normalized shape, weight and eps, sum). */
bool nb_decoder_is_plain_rms_norm(const nb_module *m);
nb_tensor *nb_decoder_add_norm(nb_module *m, nb_tensor *x, nb_tensor *residual, nb_tensor **sum);

/* ---- the shared decoder (decoder.c) ----------------------------------------------- */

typedef enum nb_decoder_family { NB_FAMILY_GPT2, NB_FAMILY_LLAMA } nb_decoder_family;

/* What the forward needs, in one form for both families. */
typedef struct nb_decoder_shape {
    nb_decoder_family family;
    int64_t vocab, hidden, heads, kv_heads, head_dim, inner;
    int layers;
    int64_t max_positions;    /* GPT-2's n_positions, Llama's max_position_embeddings */
    double norm_eps;
    double attn_dropout;      /* on the attention weights */
    double resid_dropout;     /* GPT-2: after the output projections */
    double embd_dropout;      /* GPT-2: after the embedding sum */
    bool attn_bias, mlp_bias; /* Llama's attention_bias, mlp_bias (GPT-2: always) */
    bool tied;                /* the head is the token embedding */
    bool bitlinear;           /* Llama's q/k/v/o and gate/up/down are BitLinear (nb_llama_config.bitlinear) */
    double init_range;        /* initializer_range */
    nb_dtype dtype;
} nb_decoder_shape;

/* The root module's context (GPT2LMHeadModel, LlamaForCausalLM). */
typedef struct nb_decoder_ctx {
    nb_decoder_shape s;
    nb_gpt2_config gpt2;   /* the family's own config */
    nb_llama_config llama;
    /* borrowed modules of the tree */
    nb_module *base;       /* transformer / model */
    nb_module *embed;      /* wte / embed_tokens */
    nb_module *pos;        /* wpe (GPT-2), else NULL */
    nb_module *drop;       /* GPT-2's embedding dropout, else NULL */
    nb_module *layers;     /* h / layers (ModuleList) */
    nb_module *norm;       /* ln_f / norm */
    nb_module *rotary;     /* rotary_emb (Llama), else NULL */
    nb_module *lm_head;
} nb_decoder_ctx;

/* The context of a GPT-2 or Llama root module, or NULL (no error set). */
const nb_decoder_ctx *nb_decoder_ctx_of(const nb_module *m);

/* The rotary tables [N, head_dim/2] at the positions held by the int64
 * device tensor pos [N] (the same values as nb_nn_rotary_embedding_forward
 * gives for those offsets): a decode step whose position lives on the
 * device, and sequences at positions of their own (decoder_layers.c). */
/* nb_nn_swiglu with its three projections BitLinear when bitlinear is set
 * (decoder_layers.c). */
nb_module *nb_swiglu_new(int64_t hidden_size, int64_t intermediate_size, bool bias, nb_dtype dt, bool bitlinear);
nb_status nb_rotary_tables_at(nb_module *rotary, nb_tensor *pos, nb_tensor **cos, nb_tensor **sin);
/* One decode step of ids [B, 1] at the position held by the int64 device
 * tensor pos [1] (decoder.c): its keys and values are written into the
 * cache at pos (nb_index_copy_) and attention reads the whole cache under
 * the mask keys <= pos (keys: int64 arange over the cache's length, on the
 * device); in a left-padded cache sequence b is at position pos - pad[b]
 * and reads keys pad[b] <= j <= pos. Every shape is fixed, nothing is read to the host, and
 * cache->len is not used or moved: the step can be captured in a CUDA
 * graph and replayed as pos advances on the device (generate.c). Returns
 * the final hidden states [B, 1, H]. */
nb_tensor *nb_decoder_step_at(nb_module *m, nb_tensor *ids, nb_kv_cache *cache, nb_tensor *pos, nb_tensor *keys);

/* generate.c's checks, shared with generate_batch.c: the options' ranges
 * (NB_ERR_INVALID_ARG set when false), and whether tok is a stop token. */
bool nb_generate_options_ok(const nb_generate_options *o);
bool nb_generate_is_stop(const nb_generate_options *o, int64_t tok);
/* The decoding loop of nb_generate and nb_generate_batch (generate.c): the
 * prefill of ids [B, P] into cache, then one [B, 1] step per token; every
 * token is picked on dev by nb_sample_tokens and only the B tokens are read
 * back, into tok[0..B), for emit(ctx, tok), which returns false once every
 * sequence has stopped (a stopped one keeps feeding its tokens, whose
 * outputs emit drops). graphs: the static step (the cache written at a
 * position held on the device, total positions) is captured once it has
 * run eagerly and replayed per token; a capture that fails leaves the steps
 * eager, with the same results. false on an error (set). */
bool nb_decode_tokens(nb_module *m, nb_kv_cache *cache, const int64_t *ids, int64_t B, int64_t P, int64_t total,
                      const nb_generate_options *o, nb_device dev, bool graphs, int64_t *tok,
                      bool (*emit)(void *ctx, const int64_t *tok), void *ctx);

#endif
