/* bert.c - a BERT masked-language model (Devlin et al. 2019) from the
 * transformer modules: token + learned position (+ segment) embeddings,
 * LayerNorm, dropout, a TransformerEncoder (post-LN, GELU), and the MLM head
 * Linear + GELU + LayerNorm followed by a decoder whose weight is the token
 * embedding's own tensor (tied, as BERT and torch_ref.py's Bert), so the
 * gradients of both uses accumulate into one .grad and one optimizer update
 * moves both. Child names follow torch_ref.py's Bert (tok, pos, ln, enc,
 * head, dec) so parameter names match its state_dict.
 */
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nn_impl.h"
#include "nb_transformer.h"

typedef struct nb_bert_ctx {
    nb_bert_config c;
    /* borrowed children; seg NULL without segments */
    nb_module *tok, *pos, *seg, *ln, *drop, *enc, *head, *dec;
} nb_bert_ctx;

nb_bert_config nb_bert_config_base(int64_t vocab_size) {
    return (nb_bert_config){.vocab_size = vocab_size, .hidden_size = 768, .num_layers = 12, .num_heads = 12,
                            .intermediate_size = 3072, .max_position = 512, .type_vocab_size = 2,
                            .pad_token_id = 0, .dropout = 0.1, .embedding_dropout = 0.1, .layer_norm_eps = 1e-12,
                            .activation = NB_ACTIVATION_GELU, .norm_first = false, .initializer_range = 0.02,
                            .dtype = NB_F32};
}

/* ---- the tied decoder: y = x tok.weight^T + bias ------------------------------------- */

typedef struct nb_decoder_ctx {
    nb_tensor *weight, *bias; /* borrowed parameters (weight is tok.weight) */
} nb_decoder_ctx;

static nb_tensor *decoder_forward(nb_module *m, nb_tensor *x) {
    const nb_decoder_ctx *c = nb_module_ctx(m);
    return nb_linear(x, c->weight, c->bias);
}

static const nb_module_ops decoder_ops = {"Linear", decoder_forward, free, NULL};

/* A Linear(H, V) module whose "weight" is `tied` itself and whose "bias" [V]
 * is new (zeros). */
static nb_module *tied_decoder(nb_tensor *tied) {
    nb_decoder_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&decoder_ops, c) : NB_FAIL(NB_ERR_OOM, "BERT: out of host memory");
    if (!m) return NULL;
    nb_retain(tied); /* the decoder's own reference, as PyTorch's dec.weight = tok.weight */
    nb_tensor *b = nb_tensor_new_unscoped(1, &nb_shape(tied)[0], nb_dtype_of(tied), nb_default_device());
    if (nb_module_adopt_parameter(m, "weight", tied) || !b || nb_fill_(b, 0.0) ||
        nb_module_adopt_parameter(m, "bias", b)) {
        nb_module_free(m);
        return NULL;
    }
    c->weight = tied, c->bias = b;
    return m;
}

/* ---- construction ------------------------------------------------------------------ */

static bool config_ok(const nb_bert_config *c) {
    const char *bad = NULL;
    if (c->vocab_size < 1 || c->hidden_size < 1 || c->num_layers < 1 || c->num_heads < 1 ||
        c->intermediate_size < 1 || c->max_position < 1 || c->type_vocab_size < 0)
        bad = "sizes must be >= 1 (type_vocab_size >= 0)";
    else if (c->hidden_size % c->num_heads)
        bad = "hidden_size must be divisible by num_heads";
    else if (!(c->dropout >= 0 && c->dropout < 1) || !(c->embedding_dropout >= 0 && c->embedding_dropout < 1))
        bad = "dropout probabilities must be in [0, 1)";
    else if (!(c->layer_norm_eps > 0) || !(c->initializer_range >= 0))
        bad = "layer_norm_eps must be > 0 and initializer_range >= 0";
    if (!bad) return true;
    nb_set_error(NB_ERR_INVALID_ARG,
                 "BERT: %s (vocab %lld, hidden %lld, layers %d, heads %lld, intermediate %lld, max_position %lld, "
                 "type_vocab %lld, dropout %g/%g, eps %g, init %g)",
                 bad, (long long)c->vocab_size, (long long)c->hidden_size, c->num_layers, (long long)c->num_heads,
                 (long long)c->intermediate_size, (long long)c->max_position, (long long)c->type_vocab_size,
                 c->dropout, c->embedding_dropout, c->layer_norm_eps, c->initializer_range);
    return false;
}

static bool add(nb_module *m, const char *name, nb_module *child, nb_module **slot) {
    if (nb_module_add(m, name, child)) return false;
    *slot = child;
    return true;
}

/* BERT's _init_weights: matrices N(0, r^2), biases 0 (LayerNorm weights
 * keep their ones), then the padding row of the token embedding 0. */
static nb_status bert_init(nb_module *m, const nb_bert_ctx *c) {
    int n = nb_module_parameters(m, NULL, 0);
    nb_named_tensor *p = n > 0 ? malloc(sizeof *p * (size_t)n) : NULL;
    if (!p) return nb_set_error(NB_ERR_OOM, "BERT: out of host memory");
    nb_module_parameters(m, p, n);
    nb_status st = NB_OK;
    for (int i = 0; !st && i < n; i++) {
        size_t len = strlen(p[i].name);
        if (len >= 4 && !strcmp(p[i].name + len - 4, "bias")) st = nb_fill_(p[i].tensor, 0.0);
        else if (nb_dim(p[i].tensor) == 2) st = nb_normal_(p[i].tensor, 0.0, c->c.initializer_range, NULL);
    }
    free(p);
    int64_t pad = nb_nn_embedding_padding_idx(c->tok);
    if (!st && pad != NB_NO_PADDING_IDX) {
        nb_scope *s = nb_op_scope_begin();
        NB_NO_GRAD st = nb_fill_(nb_narrow(nb_module_get(c->tok, "weight"), 0, pad, 1), 0.0);
        nb_scope_end(s);
    }
    return st;
}

static const nb_module_ops bert_ops;

nb_module *nb_bert(nb_bert_config cfg) {
    if (!config_ok(&cfg)) return NULL;
    nb_bert_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&bert_ops, c) : NB_FAIL(NB_ERR_OOM, "BERT: out of host memory");
    if (!m) return NULL;
    c->c = cfg;
    int64_t H = cfg.hidden_size;
    nb_dtype dt = cfg.dtype;
    nb_encoder_layer_options lo = {.d_model = H, .nhead = cfg.num_heads, .dim_feedforward = cfg.intermediate_size,
                                   .dropout = cfg.dropout == 0 ? NB_ZERO : cfg.dropout, /* none, not the default */
                                   .activation = cfg.activation,
                                   .layer_norm_eps = cfg.layer_norm_eps, .norm_first = cfg.norm_first, .dtype = dt,
                                   .bitlinear = cfg.bitlinear};
    bool ok = add(m, "tok", nb_nn_embedding_ex(cfg.vocab_size, H, cfg.pad_token_id, dt), &c->tok) &&
              add(m, "pos", nb_nn_embedding_ex(cfg.max_position, H, NB_NO_PADDING_IDX, dt), &c->pos) &&
              (cfg.type_vocab_size == 0 ||
               add(m, "seg", nb_nn_embedding_ex(cfg.type_vocab_size, H, NB_NO_PADDING_IDX, dt), &c->seg)) &&
              add(m, "ln", nb_nn_layer_norm_ex(1, &H, cfg.layer_norm_eps, true, dt), &c->ln) &&
              add(m, "drop", nb_nn_dropout(cfg.embedding_dropout), &c->drop) &&
              add(m, "enc", nb_nn_transformer_encoder(lo, cfg.num_layers, NULL), &c->enc) &&
              add(m, "head",
                  nb_nn_sequential(nb_nn_linear_ex(H, H, true, dt), nb_nn_gelu(NB_GELU_ERF),
                                nb_nn_layer_norm_ex(1, &H, cfg.layer_norm_eps, true, dt)),
                  &c->head) &&
              add(m, "dec", tied_decoder(nb_module_get(c->tok, "weight")), &c->dec);
    if (!ok || (cfg.initializer_range > 0 && bert_init(m, c))) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_bert_config nb_bert_get_config(const nb_module *m) {
    const char *kind = nb_module_kind(m); /* records a NULL m */
    if (kind != bert_ops.kind) {
        if (kind) nb_set_error(NB_ERR_INVALID_ARG, "bert_get_config: module is %s, not a BERT", kind);
        return (nb_bert_config){0};
    }
    return ((const nb_bert_ctx *)nb_module_ctx((nb_module *)m))->c;
}

/* ---- forward ------------------------------------------------------------------------- */

/* Checks the [B, T] inputs; false with the error set. */
static bool inputs_ok(const nb_bert_ctx *c, const nb_tensor *ids, const nb_tensor *seg, const nb_tensor *mask) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], d[NB_SHAPE_BUF];
    if (nb_dim(ids) != 2 || nb_dtype_of(ids) != NB_I64 || (seg && nb_dtype_of(seg) != NB_I64) ||
        (mask && nb_dtype_of(mask) != NB_BOOL) ||
        (seg && (nb_dim(seg) != 2 || memcmp(nb_shape(seg), nb_shape(ids), sizeof(int64_t) * 2))) ||
        (mask && (nb_dim(mask) != 2 || memcmp(nb_shape(mask), nb_shape(ids), sizeof(int64_t) * 2)))) {
        nb_set_error(seg && nb_dtype_of(seg) != NB_I64      ? NB_ERR_DTYPE
                     : nb_dtype_of(ids) != NB_I64           ? NB_ERR_DTYPE
                     : mask && nb_dtype_of(mask) != NB_BOOL ? NB_ERR_DTYPE
                                                            : NB_ERR_SHAPE,
                     "BERT: input_ids %s (int64 [B, T]), segment_ids %s (int64 [B, T] or none), attention_mask %s "
                     "(bool [B, T] or none)",
                     nb_shape_str(ids, a, sizeof a), seg ? nb_shape_str(seg, b, sizeof b) : "none",
                     mask ? nb_shape_str(mask, d, sizeof d) : "none");
        return false;
    }
    if (nb_shape(ids)[1] > c->c.max_position) {
        nb_set_error(NB_ERR_SHAPE, "BERT: sequence length %lld exceeds max_position %lld", (long long)nb_shape(ids)[1],
                     (long long)c->c.max_position);
        return false;
    }
    return true;
}

/* The key-padding mask (true = padding) from attention_mask (true or 1 =
 * attend), built on the mask's device: no host round trip. */
static bool padding_mask(nb_tensor *mask, nb_tensor **kpm) {
    *kpm = NULL;
    if (!mask) return true;
    *kpm = nb_logical_not(mask);
    return *kpm != NULL;
}

static nb_tensor *encode_impl(const nb_bert_ctx *c, nb_tensor *ids, nb_tensor *seg, nb_tensor *mask) {
    int64_t T = nb_shape(ids)[1];
    nb_tensor *kpm;
    if (!padding_mask(mask, &kpm)) return NULL;
    nb_tensor *e = nb_add(nb_forward(c->tok, ids), nb_forward(c->pos, nb_arange_on(0, (double)T, 1, NB_I64, nb_device_of(ids))));
    if (c->seg && seg) e = nb_add(e, nb_forward(c->seg, seg));
    else if (c->seg) e = nb_add(e, nb_narrow(nb_module_get(c->seg, "weight"), 0, 0, 1)); /* all segment 0 */
    e = nb_forward(c->drop, nb_forward(c->ln, e));
    return nb_nn_transformer_encoder_forward(c->enc, e, NULL, kpm);
}

nb_tensor *nb_bert_encode(nb_module *m, nb_tensor *input_ids, nb_tensor *segment_ids, nb_tensor *attention_mask) {
    if (!m || nb_module_kind(m) != bert_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "bert_encode: module is %s, not a BERT", m ? nb_module_kind(m) : "NULL");
    if (!input_ids) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "BERT: input_ids is NULL");
        return NULL;
    }
    const nb_bert_ctx *c = nb_module_ctx(m);
    if (!inputs_ok(c, input_ids, segment_ids, attention_mask)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, encode_impl(c, input_ids, segment_ids, attention_mask));
}

nb_tensor *nb_bert_mlm_head(nb_module *m, nb_tensor *hidden) {
    if (!m || nb_module_kind(m) != bert_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "bert_mlm_head: module is %s, not a BERT", m ? nb_module_kind(m) : "NULL");
    const nb_bert_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_forward(c->dec, nb_forward(c->head, hidden)));
}

nb_tensor *nb_bert_forward(nb_module *m, nb_tensor *input_ids, nb_tensor *segment_ids, nb_tensor *attention_mask) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_bert_mlm_head(m, nb_bert_encode(m, input_ids, segment_ids, attention_mask)));
}

static nb_tensor *bert_forward1(nb_module *m, nb_tensor *ids) { return nb_bert_forward(m, ids, NULL, NULL); }

static const nb_module_ops bert_ops = {"BERT", bert_forward1, free, NULL};
