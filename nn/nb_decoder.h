/* nb_decoder.h - decoder-only language models: GPT-2 and Llama with Hugging
 * Face's module names (so state_dict keys are transformers' own), a KV cache
 * for incremental decoding, greedy and sampled generation, and Hugging Face
 * checkpoint directories (config.json + model.safetensors).
 *
 *   nb_gpt2_config c = nb_gpt2_config_default();           // GPT-2 small
 *   c.vocab_size = 4096, c.n_layer = 4, c.n_embd = 256, c.n_head = 4, c.n_positions = 128;
 *   nb_module *gpt = nb_gpt2(c);
 *   nb_tensor *logits = nb_forward(gpt, ids);               // [B, T] int64 -> [B, T, V]
 *   nb_save_pretrained(gpt, "run/");                        // run/config.json, run/model.safetensors
 *   nb_module *m = nb_from_pretrained("run/", NULL);        // GPT-2 or Llama, by model_type
 *   int64_t out[50];
 *   int64_t n = nb_generate(m, prompt, n_prompt, out, 50,
 *                           (nb_generate_options){.max_new_tokens = 50, .temperature = 0.8, .top_k = 40});
 *
 * Both families are pre-norm decoders: x = x + attn(norm1(x)); x = x +
 * mlp(norm2(x)), causal self-attention through the fused
 * nb_scaled_dot_product_attention. GPT-2 (Radford et al. 2019): learned
 * positions, LayerNorm, GELU (tanh), fused q|k|v projection in Hugging
 * Face's Conv1D layout (weight [in, out]), head tied to the token embedding.
 * Llama (Touvron et al. 2023; Llama 3, Dubey et al. 2024): RMSNorm, rotary
 * positions (rotate-half), SwiGLU feed-forward (Shazeer 2020), grouped-query
 * attention (num_key_value_heads < num_attention_heads), head tied or not.
 * Formulas and names: transformers' modeling_gpt2.py and modeling_llama.py.
 *
 * Ownership as nb_nn.h: constructors return a module tree the caller frees
 * with nb_module_free; a KV cache is freed with nb_kv_cache_free (before or
 * after its model). Randomness of the initialisation comes from the default
 * generator (nb_manual_seed).
 */
#ifndef NB_DECODER_H
#define NB_DECODER_H

#include "nb_core.h"
#include "nb_nn.h"
#include "nb_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- building blocks (nn/decoder_layers.c) ---------------------------------- */

/* nn.RMSNorm(normalized_shape, eps) over the last dim: parameter "weight"
 * (ones); forward nb_rms_norm. eps 0 means PyTorch's eps=None
 * (torch.finfo(dtype).eps). dtype float32/float64, or float16/bfloat16
 * (computed in float32 and rounded once, nb_rms_norm). Errors: NB_ERR_INVALID_ARG (size
 * < 1, eps < 0), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_nn_rms_norm(int64_t normalized_shape, double eps, nb_dtype dt);

/* Rotary-embedding frequencies: inv_freq_i = theta^(-2i/head_dim), i <
 * head_dim/2 (RoFormer), optionally rescaled as Llama 3.1+ ("rope_type":
 * "llama3" in config.json; transformers' _compute_llama3_parameters): with
 * wavelength w = 2 pi / inv_freq, frequencies with w > original /
 * low_freq_factor are divided by factor, those with w < original /
 * high_freq_factor kept, those between interpolated smoothly. */
typedef struct nb_rope_config {
    double theta;    /* base (rope_theta): 10000 GPT-NeoX/Llama 2, 500000 Llama 3 */
    double factor;   /* llama3 scaling factor; 0 = no scaling ("default") */
    double low_freq_factor, high_freq_factor;  /* llama3: 1 and 4 */
    int64_t original_max_position_embeddings;  /* llama3: 8192 */
} nb_rope_config;

/* Transformers' LlamaRotaryEmbedding: no parameters or buffers (inv_freq is
 * not in the state_dict, as Hugging Face's non-persistent buffer). Kind
 * "RotaryEmbedding". Errors: NB_ERR_INVALID_ARG (head_dim odd or < 2,
 * theta <= 0, bad scaling), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_nn_rotary_embedding(int64_t head_dim, nb_rope_config c, nb_dtype dt);
/* The cos and sin tables [seq_len, head_dim/2] for positions offset ..
 * offset + seq_len - 1 (offset: tokens already in a KV cache), for
 * nb_apply_rotary_pos_emb. Angles pos * inv_freq are formed in the module's
 * dtype as transformers does in float32, then cos/sin (a float16/bfloat16
 * module forms them in float32 and rounds the tables to its dtype, as
 * transformers' 16-bit models do). New tensors, owned
 * like op results. Errors: NB_ERR_INVALID_ARG (not a RotaryEmbedding,
 * seq_len or offset < 0, NULL outputs). */
nb_status nb_nn_rotary_embedding_forward(nb_module *m, int64_t seq_len, int64_t offset, nb_tensor **cos,
                                         nb_tensor **sin);

/* The SwiGLU feed-forward (Shazeer 2020, "GLU variants improve
 * transformer"), transformers' LlamaMLP: down_proj(silu(gate_proj(x)) *
 * up_proj(x)), children gate_proj [intermediate, hidden], up_proj
 * [intermediate, hidden], down_proj [hidden, intermediate] (nn.Linear, with
 * bias when bias). Kind "SwiGLU". x [..., hidden] -> [..., hidden].
 * gate_proj's and up_proj's parameters lie back to back in one storage:
 * without gradients, inputs of up to 64 rows run both as one product (as
 * nb_llama's layers). Errors: as nb_nn_linear_ex. */
nb_module *nb_nn_swiglu(int64_t hidden_size, int64_t intermediate_size, bool bias, nb_dtype dt);

/* ---- GPT-2 (nn/decoder.c) ------------------------------------------------------ */

/* Transformers' GPT2Config fields (same names and meaning). */
typedef struct nb_gpt2_config {
    int64_t vocab_size;        /* 50257 */
    int64_t n_positions;       /* 1024: the longest sequence (learned positions) */
    int64_t n_embd;            /* 768 */
    int n_layer;               /* 12 */
    int64_t n_head;            /* 12 */
    int64_t n_inner;           /* feed-forward width; 0 = 4 * n_embd (config.json's null) */
    double layer_norm_epsilon; /* 1e-5 */
    double resid_pdrop;        /* 0.1: after each block's output projections */
    double embd_pdrop;         /* 0.1: after the embedding sum */
    double attn_pdrop;         /* 0.1: on the attention weights */
    double initializer_range;  /* 0.02: weights N(0, r^2), c_proj.weight N(0, r^2 / (2 n_layer)) */
    int64_t bos_token_id, eos_token_id; /* 50256 */
    nb_dtype dtype;            /* NB_F32 (or NB_F64, NB_BF16, NB_F16: parameters and KV cache in it, norms in float32) */
} nb_gpt2_config;

/* GPT-2 small (124M), transformers' GPT2Config() defaults. */
nb_gpt2_config nb_gpt2_config_default(void);

/* Transformers' GPT2LMHeadModel. Kinds and parameter names:
 *   transformer (GPT2Model)
 *     wte.weight [V, H], wpe.weight [n_positions, H]    Embedding
 *     drop                                              Dropout(embd_pdrop)
 *     h.<i> (GPT2Block): ln_1, attn (GPT2Attention: c_attn.weight [H, 3H],
 *       c_attn.bias [3H], c_proj.weight [H, H], c_proj.bias), ln_2,
 *       mlp (GPT2MLP: c_fc.weight [H, n_inner], c_fc.bias, c_proj.weight
 *       [n_inner, H], c_proj.bias)       (Conv1D: weight [in, out], y = x W + b)
 *     ln_f.weight, ln_f.bias [H]                        LayerNorm
 *   lm_head: y = x wte.weight^T, no bias (tied: one tensor, listed once as
 *     transformer.wte.weight, so the state_dict has no lm_head.weight, as
 *     save_pretrained writes it).
 * Block: x = x + resid_dropout(c_proj(attn(ln_1(x)))) with causal
 * attention over n_head heads; x = x + dropout(c_proj(gelu_tanh(c_fc(ln_2(x))))).
 * Initialisation: transformers' _init_weights (see initializer_range).
 * Errors: NB_ERR_INVALID_ARG (a size < 1, n_embd not divisible by n_head, a
 * probability outside [0, 1), eps <= 0), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_gpt2(nb_gpt2_config c);
/* The configuration m was built with (zeroed for another kind). */
nb_gpt2_config nb_gpt2_get_config(const nb_module *m);

/* ---- Llama (nn/decoder.c) ------------------------------------------------------ */

/* Transformers' LlamaConfig fields (same names and meaning). */
typedef struct nb_llama_config {
    int64_t vocab_size;              /* 32000 */
    int64_t hidden_size;             /* 4096 */
    int64_t intermediate_size;       /* 11008 */
    int num_hidden_layers;           /* 32 */
    int64_t num_attention_heads;     /* 32 */
    int64_t num_key_value_heads;     /* 0 = num_attention_heads; fewer: grouped-query attention */
    int64_t head_dim;                /* 0 = hidden_size / num_attention_heads */
    int64_t max_position_embeddings; /* 2048: the longest sequence generation allows */
    double rms_norm_eps;             /* 1e-6 */
    nb_rope_config rope;             /* rope_theta (10000) and rope_scaling (none) */
    bool attention_bias;             /* biases on q/k/v/o_proj (false) */
    bool mlp_bias;                   /* biases on gate/up/down_proj (false) */
    bool tie_word_embeddings;        /* lm_head.weight is embed_tokens.weight (false) */
    double attention_dropout;        /* on the attention weights (0) */
    double initializer_range;        /* 0.02: weights N(0, r^2), biases 0 */
    int64_t bos_token_id, eos_token_id; /* 1, 2 */
    nb_dtype dtype;                  /* NB_F32 (or NB_F64, NB_BF16, NB_F16: as nb_gpt2_config's) */
    bool bitlinear; /* nabla's: q/k/v/o_proj and gate/up/down_proj are BitLinear (BitNet b1.58,
                       nb_nn_bitlinear; the same parameters), the embeddings and lm_head stay (false) */
} nb_llama_config;

/* Transformers' LlamaConfig() defaults (Llama 2 7B's shape). */
nb_llama_config nb_llama_config_default(void);
/* Llama 3.2 1B's config.json: vocab 128256, hidden 2048, intermediate 8192,
 * 16 layers, 32 heads over 8 kv heads of 64, rope_theta 500000 with llama3
 * scaling (32, 1, 4, 8192), max positions 131072, rms eps 1e-5, tied head,
 * bos 128000, eos 128001. */
nb_llama_config nb_llama_config_3_2_1b(void);

/* Transformers' LlamaForCausalLM. Kinds and parameter names:
 *   model (LlamaModel)
 *     embed_tokens.weight [V, H]                               Embedding
 *     layers.<i> (LlamaDecoderLayer): self_attn (LlamaAttention:
 *       q_proj.weight [heads*hd, H], k_proj.weight [kv_heads*hd, H],
 *       v_proj.weight [kv_heads*hd, H], o_proj.weight [H, heads*hd], and
 *       .bias with attention_bias), mlp (SwiGLU: gate_proj, up_proj,
 *       down_proj), input_layernorm.weight [H], post_attention_layernorm.weight
 *     norm.weight [H]                                          RMSNorm
 *     rotary_emb                                               RotaryEmbedding
 *   lm_head.weight [V, H] (Linear, no bias); with tie_word_embeddings it is
 *     model.embed_tokens.weight itself and not listed again.
 * Layer: x = x + o_proj(attn(rope(q), rope(k), v)) on input_layernorm(x);
 * x = x + mlp(post_attention_layernorm(x)). Initialisation: weights
 * N(0, initializer_range^2), biases 0, norms 1. A layer's q_proj, k_proj,
 * v_proj weights (and biases) lie back to back in one storage, and so do
 * gate_proj's and up_proj's: each parameter is a contiguous view of it
 * (nb_shares_storage says so). Without gradients (inference, a KV cache)
 * each group then runs as one product, the MLP's up to 64 rows; a hook
 * on one of those Linears, or a parameter moved off that storage (a
 * parametrization), runs them one by one. With c.bitlinear the seven
 * projections are BitLinear (nb_nn_bitlinear: BitNet b1.58, with the same
 * names, shapes and init) and always run one by one; config.json does not
 * record it (a saved model loads back with Linear projections).
 * Errors: NB_ERR_INVALID_ARG (a size < 1, heads not a multiple of kv heads,
 * head_dim odd, bad rope), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_llama(nb_llama_config c);
nb_llama_config nb_llama_get_config(const nb_module *m);

/* ---- forward and the KV cache (nn/decoder.c) -------------------------------------- */

/* Keys and values of past tokens, per layer, preallocated (zeroed) on the
 * model's device and dtype: k and v [batch, kv_heads, max_length, head_dim] each.
 * Memory: 2 * layers * batch * kv_heads * max_length * head_dim elements. */
typedef struct nb_kv_cache nb_kv_cache;

/* A cache for model m (GPT-2 or Llama) of batch_size sequences of at most
 * max_length tokens (prompt and generated; for GPT-2 at most n_positions).
 * Errors: NB_ERR_INVALID_ARG (m not a decoder, sizes < 1, max_length past
 * the model's positions), NB_ERR_OOM. */
nb_kv_cache *nb_kv_cache_new(nb_module *m, int64_t batch_size, int64_t max_length);
void nb_kv_cache_free(nb_kv_cache *c); /* NULL is ignored */
/* Tokens stored so far (the position of the next one); -1 with
 * NB_ERR_INVALID_ARG for NULL. */
int64_t nb_kv_cache_length(const nb_kv_cache *c);
/* Forgets the tokens at positions >= length (transformers' DynamicCache.crop;
 * 0 empties it). Errors: NB_ERR_INVALID_ARG (length outside [0, current]). */
nb_status nb_kv_cache_crop(nb_kv_cache *c, int64_t length);
/* Marks the cache's sequences as left-padded (a batch of prompts of
 * different lengths, as transformers pads for generation): sequence b's
 * first pad[b] cache positions hold padding, its tokens take positions 0,
 * 1, .. from index pad[b] (rotary angles, GPT-2's position embeddings), and
 * attention never reads a padding key. pad has batch_size entries in [0,
 * max_length); NULL clears the padding. nb_causal_lm_hidden then feeds every
 * sequence the same number of tokens (the padding ids: any valid id).
 * Errors: NB_ERR_INVALID_ARG (c NULL, pad out of range), NB_ERR_STATE (the
 * cache holds tokens), NB_ERR_OOM. */
nb_status nb_kv_cache_set_left_padding(nb_kv_cache *c, const int64_t *pad);

/* Whether m is a GPT-2 or Llama model of this header. */
bool nb_is_causal_lm(const nb_module *m);

/* The final hidden states [B, T, H] (after the last norm) for input_ids
 * [B, T] int64 in [0, V) (on any device: copied to the model's). With cache NULL the tokens are at positions
 * 0 .. T-1 and attention is causal. With a cache (batch B) they follow the
 * cache's tokens: their keys and values are written into it, attention
 * covers every cached position (a causal mask, aligned to the end, inside
 * the new tokens), and the cache's length grows by T. The cached path is
 * for inference: it records no tape (grad mode is off inside it).
 * Errors: NB_ERR_INVALID_ARG (m not a decoder, an id out of range, a cache
 * of another model), NB_ERR_SHAPE (ids not [B, T], B not the cache's,
 * positions past n_positions or the cache's max_length), NB_ERR_DTYPE. */
nb_tensor *nb_causal_lm_hidden(nb_module *m, nb_tensor *input_ids, nb_kv_cache *cache);
/* lm_head on hidden states [..., H] -> logits [..., V]. */
nb_tensor *nb_causal_lm_head(nb_module *m, nb_tensor *hidden);
/* Logits [B, T, V]: nb_causal_lm_head(nb_causal_lm_hidden(...)). nb_forward(m,
 * ids) is nb_causal_lm_forward(m, ids, NULL). */
nb_tensor *nb_causal_lm_forward(nb_module *m, nb_tensor *input_ids, nb_kv_cache *cache);

/* ---- generation (nn/generate.c) --------------------------------------------------- */

/* Called with each new token as it is generated; return false to stop. */
typedef bool (*nb_token_callback)(void *user, int64_t token);

/* Decoding options; {0} with max_new_tokens set is greedy decoding. The
 * sampling order is transformers' (temperature, top-k, top-p warpers, then
 * softmax and a draw). */
typedef struct nb_generate_options {
    int64_t max_new_tokens;      /* at most this many new tokens (>= 0) */
    double temperature;          /* 0: greedy (argmax, first on ties); > 0: sample softmax(logits / t) */
    int64_t top_k;               /* > 0: keep the k largest logits (ties at the k-th kept); 0: all */
    double top_p;                /* in (0, 1): keep the smallest set of most likely tokens whose
                                    probability reaches top_p (at least one); 0 or 1: all */
    const int64_t *stop_tokens;  /* generation ends after one of these (it is kept in the output) */
    int n_stop_tokens;           /* the count of stop_tokens (>= 0; stop_tokens may be NULL when 0) */
    nb_generator *gen;           /* sampling draws (one Philox block per token; a batch step draws one
                                    [batch, 1] fill); NULL = default */
    nb_token_callback callback;  /* may be NULL */
    void *user;                  /* passed to callback as its first argument (not owned) */
    bool eager_decode;           /* true: each decode step runs op by op. false (default): on a device with
                                    CUDA graphs, one static-shape step is captured (gpt-fast's method: the KV
                                    cache written at a position held on the device, attention over the whole
                                    cache under a mask, the token picked on the device by nb_sample_tokens,
                                    draws at replay time from gen's offset) and replayed per token, reading
                                    only the token; the tokens are eager decoding's */
} nb_generate_options;

/* Continues the prompt ids[0..n_prompt) (n_prompt >= 1) of a GPT-2 or Llama
 * model with up to max_new_tokens tokens: one forward over the prompt
 * filling a KV cache (prefill), then one token at a time (decode), without
 * a tape and in eval mode (no dropout; the model's mode is restored after). The new tokens go to out[0..min(n, cap)) (out may be NULL with
 * cap 0 when the callback is enough) and to the callback. Stops at
 * max_new_tokens, a stop token, the callback's false, or the model's
 * longest sequence (GPT-2's n_positions, Llama's max_position_embeddings).
 * The same generator state gives the same tokens (nb_sample_tokens picks
 * them on the model's device; a step whose logits are all -inf or NaN
 * gives token 0, since the pick reads nothing back). Returns the number of
 * new tokens, or -1 (NB_ERR_INVALID_ARG: bad arguments, an id out of range;
 * the forward's errors). */
int64_t nb_generate(nb_module *m, const int64_t *ids, int64_t n_prompt, int64_t *out, int64_t cap,
                    nb_generate_options opts);

/* Called by nb_generate_batch with each sequence's new token; return false to stop that sequence. */
typedef bool (*nb_batch_token_callback)(void *user, int64_t seq, int64_t token);

/* nb_generate over a batch: prompts[b][0..n_prompt[b]) (each >= 1 ids) for
 * b < batch, left-padded in one KV cache (nb_kv_cache_set_left_padding) and
 * decoded together, one forward of [batch, 1] per step. Sequence b's new
 * tokens go to out[b * cap .. b * cap + min(n_new[b], cap)) and to
 * callback(user, b, token) (opts.callback must be NULL); each sequence stops
 * on its own (max_new_tokens, a stop token, the callback's false, the
 * model's longest sequence; the cache's length counts from the longest
 * prompt, so beside it a shorter one stops there too) while the others go on. Greedy decoding gives
 * each sequence the tokens nb_generate gives it alone (up to the rounding
 * of batched products); sampling draws one uniform per sequence per step
 * (stopped ones too) as one fill of [batch, 1] from opts.gen. On a device
 * with CUDA graphs the step is captured and replayed as nb_generate does
 * (opts.eager_decode: op by op). Returns the
 * largest n_new[b], or -1 (NB_ERR_INVALID_ARG: bad arguments, an id out of
 * range; the forward's errors). */
int64_t nb_generate_batch(nb_module *m, int64_t batch, const int64_t *const *prompts, const int64_t *n_prompt,
                          int64_t *out, int64_t cap, int64_t *n_new, nb_batch_token_callback callback, void *user,
                          nb_generate_options opts);

/* The next tokens from logits [..., V] (float32/float64/float16/bfloat16,
 * V >= 1) under opts' temperature, top_k, top_p and gen (opts is checked as
 * nb_generate checks it; its other fields are not used): int64 [..., 1] on
 * the logits' device, computed there with no
 * host reads (a CUDA graph can capture it). NaN logits count as -inf.
 * Greedy (temperature 0): the first maximum, as torch.argmax. Sampling:
 * transformers' logits warpers in their order (TemperatureLogitsWarper,
 * TopKLogitsWarper keeping ties at the k-th, TopPLogitsWarper keeping the
 * smallest prefix of the descending order whose mass reaches top_p), then
 * inverse-CDF sampling over that order (ties by ascending id) in float32,
 * one uniform per row drawn as one nb_rand fill of [..., 1] from gen (NULL:
 * the default generator). A row whose logits are all -inf or NaN gives its
 * first id; a row with +inf logits gives the first of them. Returns NULL with NB_ERR_INVALID_ARG (NULL arguments, bad
 * options, an integer dtype, a 0-d or empty last dim). */
nb_tensor *nb_sample_tokens(nb_tensor *logits, const nb_generate_options *opts);

/* nb_sample_tokens on host logits[0..n), computed on the CPU: the token generate
 * would pick with these options (one Philox block drawn unless greedy).
 * Returns the token, or -1 (NB_ERR_INVALID_ARG: n < 1, a bad option, logits
 * all -inf or NaN; NB_ERR_OOM). */
int64_t nb_sample_logits(const float *logits, int64_t n, const nb_generate_options *opts);

/* ---- Hugging Face checkpoints (nn/hf_checkpoint.c) --------------------------------- */

/* Reads a transformers config.json (jansson) into the configuration of
 * its model_type: "gpt2" or "llama". *is_llama says which was filled.
 * Unknown keys are ignored; missing ones keep transformers' defaults;
 * "torch_dtype" (or "dtype") sets the config's dtype. A Llama's
 * "quantization_config" of transformers' BitNetQuantConfig with
 * quant_method "bitnet", linear_class "autobitlinear", quantization_mode
 * "online" (latent float weights), use_rms_norm true, rms_norm_eps 1e-6
 * and modules_to_not_convert absent, null, [] or ["lm_head"] sets
 * bitlinear (what nb_save_pretrained writes for it). Errors: NB_ERR_IO,
 * NB_ERR_FORMAT (not JSON, a field of the wrong type), NB_ERR_UNSUPPORTED
 * (another model_type, activation, rope_type, torch_dtype or
 * quantization_config, such as transformers' packed BitLinear; any
 * quantization_config on GPT-2; GPT-2's scale_attn_by_inverse_layer_idx /
 * reorder_and_upcast_attn). */
nb_status nb_hf_config_load(const char *path, nb_gpt2_config *gpt2, nb_llama_config *llama, bool *is_llama);

/* Loads Hugging Face weights into m (GPT-2 or Llama): path is a weight
 * file (.safetensors, or torch.save's .bin / .pt format, told apart by
 * content) or a directory holding model.safetensors,
 * model.safetensors.index.json (shards), pytorch_model.bin or
 * pytorch_model.bin.index.json, looked for in that order (.bin files are
 * read by nb_pt_load's restricted unpickler, nb_data.h). Keys are transformers' state_dict
 * keys; GPT-2 files with the bare GPT2Model names ("h.0.attn.c_attn.weight",
 * as the hub's gpt2 checkpoint) load too, the old causal-mask buffers
 * (attn.bias, attn.masked_bias) are ignored as transformers does, and a
 * tied model accepts a file that also stores lm_head.weight (if it equals
 * the embedding's shape). Tensors are cast to the model's dtype (bf16 and
 * f16 files load into float32 models). As nb_module_load_tensors: checked
 * before anything is copied; strict names missing and unexpected keys,
 * shape mismatches always fail, and report (may be NULL) gets the lists.
 * Errors: NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_FORMAT, NB_ERR_SHAPE, NB_ERR_OOM. */
nb_status nb_causal_lm_load_weights(nb_module *m, const char *path, bool strict, nb_load_report *report);

/* config.json + model.safetensors in dir (created if missing) in
 * transformers' format for GPT2LMHeadModel / LlamaForCausalLM, so that
 * AutoModelForCausalLM.from_pretrained(dir) loads it; a Llama built with
 * bitlinear gets BitNet's "quantization_config" (nb_hf_config_load).
 * transformers' AutoBitLinear gives that RMSNorm a weight, which nabla's
 * BitLinear does not have: the file holds no such keys (not tried against
 * transformers).
 * Both files are written atomically. Errors: NB_ERR_INVALID_ARG (not a
 * decoder), NB_ERR_UNSUPPORTED (weights converted for inference by
 * nb_module_bitnet_pack or nb_module_int8_weight_only: not transformers'
 * keys; nb_module_state_dict_save writes them), NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_save_pretrained(nb_module *m, const char *dir);
/* A model built from dir/config.json on the default device, with the
 * weights of dir loaded strictly (nb_causal_lm_load_weights), in eval mode
 * as transformers' from_pretrained (nb_module_train(m, true) to fine-tune
 * with the config's dropout). The model's dtype is config.json's
 * "torch_dtype" (or "dtype"): a bfloat16 checkpoint gives a bfloat16
 * model, with no float32 copy, as transformers' torch_dtype="auto"; a
 * config without either gives float32 (where "auto" would look at the
 * weights). Errors: those of nb_hf_config_load, the
 * constructors and the load; report as there. */
nb_module *nb_from_pretrained(const char *dir, nb_load_report *report);
/* nb_from_pretrained with the model in dtype (a float dtype; the weights
 * are cast as they are copied in, as from_pretrained(torch_dtype=...)), or
 * in the config's dtype for NB_DTYPE_COUNT. Errors: as nb_from_pretrained,
 * NB_ERR_DTYPE. */
nb_module *nb_from_pretrained_as(const char *dir, nb_dtype dtype, nb_load_report *report);

#ifdef __cplusplus
}
#endif
#endif
