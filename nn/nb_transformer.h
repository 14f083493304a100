/* nb_transformer.h - transformer modules with torch.nn's names, defaults and
 * state_dict keys: Embedding, LayerNorm, GELU, MultiheadAttention
 * (batch_first), TransformerEncoderLayer, TransformerEncoder, and a BERT
 * masked-language model (embeddings, encoder, MLM head with a decoder tied
 * to the token embedding).
 *
 *   nb_bert_config c = nb_bert_config_base(8192);
 *   c.hidden_size = 256, c.num_layers = 4, c.num_heads = 4, c.intermediate_size = 1024;
 *   nb_module *bert = nb_bert(c);
 *   nb_tensor *logits = nb_bert_forward(bert, ids, NULL, mask);  // [B, T] int64, [B, T] bool -> [B, T, V]
 *
 * nb_forward(m, x) takes one tensor; the modules whose forward takes more
 * (masks, segment ids) have their own forward functions, and nb_forward runs
 * them with the extra arguments NULL: MultiheadAttention self-attention
 * without masks, an encoder (layer) without masks, BERT on input_ids alone.
 * Sources: PyTorch's torch.nn docs (Embedding, LayerNorm, MultiheadAttention,
 * TransformerEncoderLayer, TransformerEncoder); Vaswani et al., "Attention
 * is all you need" (2017); Devlin et al., "BERT" (2019).
 */
#ifndef NB_TRANSFORMER_H
#define NB_TRANSFORMER_H

#include "nb_core.h"
#include "nb_nn.h"
#include "nb_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Embedding, LayerNorm, GELU (nn/embedding.c, nn/layer_norm.c) -------- */

/* nn.Embedding(num_embeddings, embedding_dim, padding_idx): parameter
 * "weight" [num, dim], initialised N(0, 1) from the default generator, the
 * padding_idx row (negative counts from num; NB_NO_PADDING_IDX for none)
 * zeroed; that row gets no gradient. nb_forward takes int64 indices of any
 * shape and gives [*indices.shape, dim] (nb_embedding). dtype f32; the _ex
 * form takes f32 or f64. Errors: NB_ERR_INVALID_ARG (num or dim < 0,
 * padding_idx outside [-num, num)), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx);
nb_module *nb_nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, nb_dtype dt);
/* The padding row index of an Embedding (wrapped to [0, num)), or
 * NB_NO_PADDING_IDX (also for a module of another kind, and for NULL, with
 * NB_ERR_INVALID_ARG). */
int64_t nb_nn_embedding_padding_idx(const nb_module *m);

/* nn.LayerNorm(normalized_shape, eps): normalises over the last dim (the _ex
 * form: the last n_norm dims, 1 <= n_norm <= NB_MAX_DIMS) with the biased
 * variance, y = (x - mean) / sqrt(var + eps) * weight + bias (Ba et al.
 * 2016). Parameters "weight" (ones) and "bias" (zeros) of normalized_shape
 * when elementwise_affine. eps 0 means PyTorch's 1e-5. dtype f32 (the _ex
 * form: f32/f64). Errors: NB_ERR_INVALID_ARG (sizes < 1, eps < 0),
 * NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_nn_layer_norm(int64_t normalized_shape, double eps);
/* The _ex form: normalized_shape[0..n_norm) are the last n_norm dims of the input; no "weight"/"bias" when
 * elementwise_affine is false; dt NB_F32 or NB_F64. */
nb_module *nb_nn_layer_norm_ex(int n_norm, const int64_t *normalized_shape, double eps, bool elementwise_affine,
                                   nb_dtype dt);

/* nn.GELU(approximate): x * Phi(x), or its tanh approximation (nb_gelu). */
nb_module *nb_nn_gelu(nb_gelu_approximate approximate);

/* ---- MultiheadAttention (nn/attention.c) ---------------------------------- */

/* nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=True)
 * with kdim = vdim = embed_dim. Parameters, as PyTorch's:
 *   in_proj_weight [3E, E]  xavier_uniform_ (U(-a, a), a = sqrt(6 / (E + 3E)))
 *   in_proj_bias   [3E]     zeros            (when bias)
 *   out_proj       a Linear child: out_proj.weight [E, E] (Linear's
 *                  kaiming_uniform_ init), out_proj.bias [E] zeroed (when bias)
 * dropout is the probability of dropping attention weights in train mode.
 * The _ex form takes the dtype (f32/f64). Errors: NB_ERR_INVALID_ARG
 * (embed_dim or num_heads < 1, embed_dim not divisible by num_heads, dropout
 * outside [0, 1)), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias);
nb_module *nb_nn_multihead_attention_ex(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, nb_dtype dt);

/* MultiheadAttention.forward with batch_first=True:
 *   query [B, L, E], key [B, S, E], value [B, S, E] -> [B, L, E]
 * (unbatched [L, E], [S, E], [S, E] -> [L, E] also, as PyTorch). With h
 * heads of d = E / h: q, k, v = the in-projections of query, key, value
 * (one GEMM with in_proj_weight when query, key and value are the same
 * tensor), split into heads [B, h, L, d]; per head softmax(q k^T / sqrt(d)
 * + mask) v through the fused nb_scaled_dot_product_attention (dropout on
 * the weights in train mode only); heads concatenated back to [B, L, E];
 * then out_proj. Masks, PyTorch's conventions (note: the opposite of
 * nb_scaled_dot_product_attention's bool mask):
 *   key_padding_mask  NULL, or [B, S] ([S] unbatched): bool, true = padding
 *                     (that key is ignored), or float (added to the scores);
 *   attn_mask         NULL, or [L, S] or [B * h, L, S]: bool, true = may NOT
 *                     attend, or float (added to the scores).
 * Bool masks are combined on the host into one "may attend" mask; a float
 * mask is added and keeps its gradient. A query row with every key masked
 * gives NaN, as PyTorch.
 * attn_weights: NULL is PyTorch's need_weights=False (the fused path);
 * otherwise the attention is computed explicitly and *attn_weights gets the
 * weights averaged over heads, [B, L, S] (after dropout, as PyTorch's
 * average_attn_weights=True), owned like any op result.
 * Errors: NB_ERR_INVALID_ARG (m not a MultiheadAttention), NB_ERR_SHAPE
 * (sizes that do not fit, naming them), NB_ERR_DTYPE, and the ops' errors. */
nb_tensor *nb_nn_multihead_attention_forward(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value,
                          nb_tensor *key_padding_mask, nb_tensor *attn_mask, nb_tensor **attn_weights);
/* Through nb_forward_n (nb_nn.h) a MultiheadAttention takes (query, key,
 * value[, key_padding_mask[, attn_mask]]) (NULL entries allowed for the
 * masks), or (x) alone for self-attention, and gives (attn_output,
 * attn_weights): the weights, and so the explicit path, only when max_out
 * asks for 2 outputs (PyTorch's need_weights); nb_forward(m, x) is
 * self-attention without weights. */

/* ---- TransformerEncoderLayer, TransformerEncoder (nn/transformer.c) -------- */

/* The feed-forward activation of the transformer layers: TransformerEncoderLayer's activation argument
 * ("relu", "gelu"), plus GELU's tanh approximation. */
typedef enum nb_activation {
    NB_ACTIVATION_RELU = 0, /* PyTorch's default */
    NB_ACTIVATION_GELU,     /* exact (erf) */
    NB_ACTIVATION_GELU_TANH, /* tanh approximation, nn.GELU(approximate="tanh") */
} nb_activation;

/* nn.TransformerEncoderLayer's arguments. A field left 0 takes PyTorch's
 * default (dropout and layer_norm_eps: NB_ZERO asks for an actual 0), so
 * {.d_model = 512, .nhead = 8} is TransformerEncoderLayer(512, 8);
 * NB_ENCODER_LAYER_OPTIONS(d_model, nhead) spells the defaults out. */
typedef struct nb_encoder_layer_options {
    int64_t d_model, nhead;  /* model width E and attention heads h (required, >= 1, d_model % nhead == 0) */
    int64_t dim_feedforward; /* 2048 */
    double dropout;          /* 0.1: attention weights, feed-forward, both residual branches */
    nb_activation activation; /* ReLU */
    double layer_norm_eps;   /* 1e-5 */
    bool norm_first;         /* false: post-LN, x = norm(x + block(x)); true: x = x + block(norm(x)) */
    nb_dtype dtype;          /* NB_F32 */
    bool bitlinear;          /* nabla's: the attention projections, linear1 and linear2 are BitNet b1.58's
                                BitLinear (nb_nn_bitlinear; the same parameters) (false) */
} nb_encoder_layer_options;
/* nb_encoder_layer_options with every PyTorch default written out: TransformerEncoderLayer(d_model, nhead). */
#define NB_ENCODER_LAYER_OPTIONS(d_model_, nhead_)                                                            \
    ((nb_encoder_layer_options){.d_model = (d_model_), .nhead = (nhead_), .dim_feedforward = 2048, .dropout = 0.1, \
                                .activation = NB_ACTIVATION_RELU, .layer_norm_eps = 1e-5, .norm_first = false,     \
                                .dtype = NB_F32})

/* nn.TransformerEncoderLayer(batch_first=True), children in PyTorch's order
 * and names: self_attn (MultiheadAttention), linear1 (d_model ->
 * dim_feedforward), dropout, linear2 (-> d_model), norm1, norm2, dropout1,
 * dropout2. Forward (PyTorch's, norm_first false):
 *   x = norm1(x + dropout1(self_attn(x, x, x)))
 *   x = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))
 * norm_first true: x = x + dropout1(self_attn(norm1(x))); x = x + ff(norm2(x)).
 * Errors: as nb_nn_multihead_attention and nb_nn_linear_ex, plus
 * NB_ERR_INVALID_ARG for a bad activation, dropout or dim_feedforward. */
nb_module *nb_nn_transformer_encoder_layer(nb_encoder_layer_options o);
/* TransformerEncoderLayer.forward(src, src_mask, src_key_padding_mask):
 * src [B, T, d_model] -> [B, T, d_model]; the masks as nb_nn_multihead_attention_forward's
 * attn_mask and key_padding_mask (may be NULL). */
nb_tensor *nb_nn_transformer_encoder_layer_forward(nb_module *m, nb_tensor *src, nb_tensor *src_mask,
                                                nb_tensor *src_key_padding_mask);
/* nb_forward_n on an encoder layer or encoder takes (src[, mask[,
 * src_key_padding_mask]]) and gives the output. */

/* The forwards' masks and PyTorch's is_causal, for the _ex forms:
 * is_causal with mask NULL applies the causal mask (position i attends to
 * j <= i only; built once per call); with a mask given it is PyTorch's hint
 * that the mask is causal, and the mask is used as given. */
typedef struct nb_encoder_forward_options {
    nb_tensor *mask;                 /* attn_mask as nb_nn_multihead_attention_forward's, or NULL */
    nb_tensor *src_key_padding_mask; /* key_padding_mask, or NULL */
    bool is_causal;                  /* causal self-attention; builds the mask when mask is NULL (false) */
} nb_encoder_forward_options;
/* TransformerEncoderLayer.forward(src, src_mask, src_key_padding_mask, is_causal). */
nb_tensor *nb_nn_transformer_encoder_layer_forward_ex(nb_module *m, nb_tensor *src, nb_encoder_forward_options o);

/* nn.TransformerEncoder(layer, num_layers, norm): a child "layers" (a
 * ModuleList: children "0", "1", ...) of num_layers encoder layers built
 * from o, so parameters read "layers.0.self_attn.in_proj_weight"; every
 * layer starts as a copy of the first, as PyTorch's (it deep-copies the
 * layer it is given). norm (may be NULL; ownership taken, also on failure)
 * becomes the child "norm", applied after the last layer. Errors: as
 * nb_nn_transformer_encoder_layer, NB_ERR_INVALID_ARG for num_layers < 1. */
nb_module *nb_nn_transformer_encoder(nb_encoder_layer_options o, int num_layers, nb_module *norm);
/* TransformerEncoder.forward(src, mask, src_key_padding_mask): the layers in
 * order with the same masks, then norm. */
nb_tensor *nb_nn_transformer_encoder_forward(nb_module *m, nb_tensor *src, nb_tensor *mask,
                                          nb_tensor *src_key_padding_mask);
/* TransformerEncoder.forward(src, mask, src_key_padding_mask, is_causal). */
nb_tensor *nb_nn_transformer_encoder_forward_ex(nb_module *m, nb_tensor *src, nb_encoder_forward_options o);

/* ---- TransformerDecoderLayer, TransformerDecoder, Transformer (nn/transformer_decoder.c) ---- */

/* nn.TransformerDecoderLayer's arguments: the encoder layer's (the same
 * fields, defaults and checks). */
typedef nb_encoder_layer_options nb_decoder_layer_options;

/* The decoder forwards' masks, as nb_nn_multihead_attention_forward's
 * attn_mask / key_padding_mask (NULL: none): tgt_mask [T, T], memory_mask
 * [T, S], tgt_key_padding_mask [B, T], memory_key_padding_mask [B, S];
 * tgt_is_causal with tgt_mask NULL applies the causal mask to the
 * self-attention (built once per call). */
typedef struct nb_decoder_forward_options {
    nb_tensor *tgt_mask, *memory_mask, *tgt_key_padding_mask, *memory_key_padding_mask; /* PyTorch's, or NULL */
    bool tgt_is_causal; /* causal self-attention mask built when tgt_mask is NULL (false) */
} nb_decoder_forward_options;

/* nn.TransformerDecoderLayer(batch_first=True), children in PyTorch's
 * order and names: self_attn, multihead_attn (MultiheadAttention), linear1,
 * dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3.
 * Forward (PyTorch's; norm_first false):
 *   x = norm1(x + dropout1(self_attn(x, x, x, tgt_mask, tgt_key_padding_mask)))
 *   x = norm2(x + dropout2(multihead_attn(x, memory, memory, memory_mask, memory_key_padding_mask)))
 *   x = norm3(x + dropout3(linear2(dropout(activation(linear1(x))))))
 * norm_first: x = x + block(norm(x)) for each of the three. tgt [B, T, d],
 * memory [B, S, d] -> [B, T, d]. nb_forward_n takes (tgt, memory[,
 * tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]).
 * Errors: as nb_nn_transformer_encoder_layer's. */
nb_module *nb_nn_transformer_decoder_layer(nb_decoder_layer_options o);
/* TransformerDecoderLayer.forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
 * memory_key_padding_mask, tgt_is_causal): tgt [B, T, d], memory [B, S, d] -> [B, T, d]. Errors:
 * NB_ERR_INVALID_ARG (m not a TransformerDecoderLayer, tgt or memory NULL), the attention's and ops' errors. */
nb_tensor *nb_nn_transformer_decoder_layer_forward(nb_module *m, nb_tensor *tgt, nb_tensor *memory,
                                                   nb_decoder_forward_options o);
/* nn.TransformerDecoder(layer, num_layers, norm): "layers" (ModuleList) of
 * num_layers copies of the first layer (PyTorch deep-copies the layer it is
 * given), then "norm" (may be NULL; ownership taken, also on failure). */
nb_module *nb_nn_transformer_decoder(nb_decoder_layer_options o, int num_layers, nb_module *norm);
/* TransformerDecoder.forward(tgt, memory, ...): the layers in order with the same masks (a causal tgt_mask built
 * once for all), then norm; tgt [B, T, d], memory [B, S, d] -> [B, T, d]. Errors: NB_ERR_INVALID_ARG (m not a
 * TransformerDecoder, tgt or memory NULL), the layers' errors. */
nb_tensor *nb_nn_transformer_decoder_forward(nb_module *m, nb_tensor *tgt, nb_tensor *memory,
                                             nb_decoder_forward_options o);

/* nn.Transformer's arguments; a field left 0 is PyTorch's default
 * (d_model 512, nhead 8, 6 encoder and 6 decoder layers, and the layer
 * defaults of nb_encoder_layer_options). batch_first always. */
typedef struct nb_transformer_options {
    int64_t d_model, nhead;                     /* 512 and 8; d_model % nhead == 0 */
    int num_encoder_layers, num_decoder_layers; /* 6 each */
    int64_t dim_feedforward;                    /* 2048 */
    double dropout;                             /* 0.1 (NB_ZERO for none) */
    nb_activation activation;                   /* ReLU */
    double layer_norm_eps;                      /* 1e-5, every LayerNorm (NB_ZERO for 0) */
    bool norm_first;                            /* false: post-LN */
    nb_dtype dtype;                             /* NB_F32 */
} nb_transformer_options;
/* The forward's masks (each may be NULL) and causal flags. */
typedef struct nb_transformer_forward_options {
    nb_tensor *src_mask, *tgt_mask, *memory_mask; /* attn_mask: [S, S], [T, T], [T, S] (or [B * h, ...]) */
    nb_tensor *src_key_padding_mask, *tgt_key_padding_mask, *memory_key_padding_mask; /* [B, S], [B, T], [B, S] */
    bool src_is_causal, tgt_is_causal; /* causal mask built for src / tgt when its mask is NULL (false) */
} nb_transformer_forward_options;
/* nn.Transformer: children "encoder" (a TransformerEncoder with its final
 * LayerNorm "encoder.norm") and "decoder" (a TransformerDecoder with
 * "decoder.norm"); every parameter of two or more dims re-initialised by
 * xavier_uniform_ (PyTorch's _reset_parameters). Forward: memory =
 * encoder(src, src_mask, src_key_padding_mask), then decoder(tgt, memory,
 * tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask):
 * src [B, S, d], tgt [B, T, d] -> [B, T, d]. nb_forward_n takes (src, tgt[,
 * src_mask, tgt_mask, memory_mask, src_key_padding_mask,
 * tgt_key_padding_mask, memory_key_padding_mask]). Errors: as the layers',
 * NB_ERR_SHAPE for src and tgt of different batch sizes. */
nb_module *nb_nn_transformer(nb_transformer_options o);
nb_tensor *nb_nn_transformer_forward(nb_module *m, nb_tensor *src, nb_tensor *tgt, nb_transformer_forward_options o);

/* ---- BERT masked-language model (nn/bert.c) ---------------------------------- */

/* Sizes and options of nb_bert; nb_bert_config_base gives BERT-base's. */
typedef struct nb_bert_config {
    int64_t vocab_size;        /* V */
    int64_t hidden_size;       /* H (768) */
    int num_layers;            /* 12 */
    int64_t num_heads;         /* 12 */
    int64_t intermediate_size; /* feed-forward width (3072 = 4 H) */
    int64_t max_position;      /* learned positions: the longest sequence (512) */
    int64_t type_vocab_size;   /* segments (2); 0: no segment embedding */
    int64_t pad_token_id;      /* the token embedding's padding_idx (0); NB_NO_PADDING_IDX for none */
    double dropout;            /* encoder layers: attention weights, feed-forward, residuals (0.1) */
    double embedding_dropout;  /* after the embedding LayerNorm (0.1) */
    double layer_norm_eps;     /* every LayerNorm (1e-12, BERT's; PyTorch's modules use 1e-5) */
    nb_activation activation;  /* encoder feed-forward (GELU); the MLM head always uses exact GELU */
    bool norm_first;           /* false: post-LN, as BERT */
    /* > 0: BERT's init: every matrix (linear weights, in_proj_weight,
     * embeddings) N(0, range^2), biases 0, LayerNorm weight 1, bias 0,
     * padding row 0 (0.02). 0: the modules' own PyTorch defaults. */
    double initializer_range;
    nb_dtype dtype; /* NB_F32 */
    bool bitlinear; /* nabla's: the encoder layers' projections are BitLinear (nb_encoder_layer_options);
                       the embeddings and the MLM head stay (false) */
} nb_bert_config;

/* BERT-base (Devlin et al. 2019, Table/Appendix; Hugging Face's BertConfig
 * defaults) with the given vocabulary size. */
nb_bert_config nb_bert_config_base(int64_t vocab_size);

/* A BERT masked-LM. Children and parameter names (torch_ref.py's Bert, plus
 * segments):
 *   tok  Embedding(V, H, pad_token_id)        tok.weight
 *   pos  Embedding(max_position, H)           pos.weight
 *   seg  Embedding(type_vocab_size, H)        seg.weight (if type_vocab_size > 0)
 *   ln   LayerNorm(H)                         ln.weight, ln.bias
 *   drop Dropout(embedding_dropout)
 *   enc  TransformerEncoder                   enc.layers.0.self_attn.in_proj_weight, ...
 *   head Sequential(Linear(H, H), GELU, LayerNorm(H))   head.0.weight, head.2.bias, ...
 *   dec  Linear(H, V) whose weight IS tok.weight (tied: one tensor, listed
 *        once, as tok.weight, so one optimizer update moves both), and its
 *        own bias dec.bias (zeros).
 * Errors: NB_ERR_INVALID_ARG (a size < 1, hidden_size not divisible by
 * num_heads, a probability outside [0, 1)), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_module *nb_bert(nb_bert_config c);
/* The configuration m was built with (zeroed for another kind). */
nb_bert_config nb_bert_get_config(const nb_module *m);

/* The encoder's output, [B, T, H]:
 *   h = drop(ln(tok(input_ids) + pos(0..T-1) + seg(segment_ids)))
 *   h = enc(h, src_key_padding_mask = !attention_mask)
 * input_ids [B, T] int64 in [0, V); segment_ids [B, T] int64 in
 * [0, type_vocab_size) or NULL (all 0, as BERT; no segment term without a
 * segment embedding); attention_mask [B, T] bool, true = real token, or
 * NULL (no padding). Padded positions never influence real ones.
 * Errors: NB_ERR_SHAPE (T > max_position, shapes that differ),
 * NB_ERR_DTYPE, NB_ERR_INVALID_ARG (an id out of range), ops' errors. */
nb_tensor *nb_bert_encode(nb_module *m, nb_tensor *input_ids, nb_tensor *segment_ids, nb_tensor *attention_mask);
/* The MLM head on hidden states [..., H] -> logits [..., V]:
 * dec(head(hidden)). Apply it to the masked positions only (gathered with
 * nb_index_select) to save the decoder's cost on the others. */
nb_tensor *nb_bert_mlm_head(nb_module *m, nb_tensor *hidden);
/* nb_bert_mlm_head(nb_bert_encode(...)): logits [B, T, V]. nb_forward(m, ids)
 * is nb_bert_forward(m, ids, NULL, NULL). */
nb_tensor *nb_bert_forward(nb_module *m, nb_tensor *input_ids, nb_tensor *segment_ids, nb_tensor *attention_mask);

#ifdef __cplusplus
}
#endif
#endif
