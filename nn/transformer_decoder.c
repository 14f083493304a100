/* transformer_decoder.c - nn.TransformerDecoderLayer, nn.TransformerDecoder
 * and nn.Transformer (batch_first, post-LN or norm_first), with PyTorch's
 * child names and order (self_attn, multihead_attn, linear1, dropout,
 * linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3; layers.N;
 * norm; encoder / decoder), so parameter names are PyTorch's state_dict
 * keys. nn.Transformer re-initialises every parameter of two or more dims
 * with xavier_uniform_, as its _reset_parameters.
 */
#include <stdlib.h>

#include "nb_extension.h"
#include "nn_impl.h"

/* ---- TransformerDecoderLayer ------------------------------------------------------ */

typedef struct dec_layer_ctx {
    nb_encoder_layer_options o;
    nb_module *self_attn, *mha, *linear1, *dropout, *linear2, *norm1, *norm2, *norm3, *dropout1, *dropout2, *dropout3;
} dec_layer_ctx;

static const nb_module_ops dec_layer_ops;

/* dropout1(self_attn(x, x, x)) */
static nb_tensor *sa_block(const dec_layer_ctx *c, nb_tensor *x, nb_tensor *mask, nb_tensor *kpm) {
    return nb_forward(c->dropout1, nb_nn_multihead_attention_forward(c->self_attn, x, x, x, kpm, mask, NULL));
}
/* dropout2(multihead_attn(x, mem, mem)) */
static nb_tensor *mha_block(const dec_layer_ctx *c, nb_tensor *x, nb_tensor *mem, nb_tensor *mask, nb_tensor *kpm) {
    return nb_forward(c->dropout2, nb_nn_multihead_attention_forward(c->mha, x, mem, mem, kpm, mask, NULL));
}
/* dropout3(linear2(dropout(activation(linear1(x))))) */
static nb_tensor *ff_block(const dec_layer_ctx *c, nb_tensor *x) {
    nb_tensor *h = nb_nn_activation_apply(c->o.activation, nb_forward(c->linear1, x));
    return nb_forward(c->dropout3, nb_forward(c->linear2, nb_forward(c->dropout, h)));
}

/* The masks with is_causal applied: a causal tgt mask built when none is given. */
static nb_decoder_forward_options causal(nb_tensor *tgt, nb_decoder_forward_options o) {
    if (o.tgt_is_causal && !o.tgt_mask && tgt && nb_dim(tgt) >= 2) o.tgt_mask = nb_nn_causal_mask(tgt);
    return o;
}

/* The layer without hooks (nb_forward_n runs them around it). */
static nb_tensor *dec_layer_typed(nb_module *m, nb_tensor *tgt, nb_tensor *memory, nb_decoder_forward_options o) {
    if (!m || nb_module_kind(m) != dec_layer_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "transformer_decoder_layer_forward: module is %s, not a "
                       "TransformerDecoderLayer", m ? nb_module_kind(m) : "NULL");
    if (!tgt || !memory) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "TransformerDecoderLayer: tgt or memory is NULL");
        return NULL;
    }
    const dec_layer_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    o = causal(tgt, o);
    nb_tensor *x = tgt;
    if (c->o.norm_first) {
        x = nb_add(x, sa_block(c, nb_forward(c->norm1, x), o.tgt_mask, o.tgt_key_padding_mask));
        x = nb_add(x, mha_block(c, nb_forward(c->norm2, x), memory, o.memory_mask, o.memory_key_padding_mask));
        x = nb_add(x, ff_block(c, nb_forward(c->norm3, x)));
    } else {
        x = nb_forward(c->norm1, nb_add(x, sa_block(c, x, o.tgt_mask, o.tgt_key_padding_mask)));
        x = nb_forward(c->norm2, nb_add(x, mha_block(c, x, memory, o.memory_mask, o.memory_key_padding_mask)));
        x = nb_forward(c->norm3, nb_add(x, ff_block(c, x)));
    }
    return nb_scope_return(s, x);
}

/* Hooks around fn's call on (tgt, memory, tgt_mask, memory_mask,
 * tgt_key_padding_mask, memory_key_padding_mask), as a call through
 * nb_forward_n would run them: what a parent's typed call gives. */
static nb_tensor *hooked_dec(nb_tensor *(*fn)(nb_module *, nb_tensor *, nb_tensor *, nb_decoder_forward_options),
                             nb_module *m, nb_tensor *tgt, nb_tensor *memory, nb_decoder_forward_options o) {
    nb_tensor *in[6] = {tgt, memory, o.tgt_mask, o.memory_mask, o.tgt_key_padding_mask, o.memory_key_padding_mask};
    if (m && nb_module_run_pre_hooks(m, 6, in)) return NULL;
    o.tgt_mask = in[2], o.memory_mask = in[3], o.tgt_key_padding_mask = in[4], o.memory_key_padding_mask = in[5];
    nb_tensor *y = fn(m, in[0], in[1], o);
    return y && m && nb_module_run_post_hooks(m, 6, in, 1, &y) ? NULL : y;
}

nb_tensor *nb_nn_transformer_decoder_layer_forward(nb_module *m, nb_tensor *tgt, nb_tensor *memory,
                                                   nb_decoder_forward_options o) {
    return hooked_dec(dec_layer_typed, m, tgt, memory, o);
}

/* nb_forward_n: (tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]) */
static bool decoder_inputs(const char *kind, int n_in, nb_tensor *const *in, nb_decoder_forward_options *o) {
    if (n_in < 2 || n_in > 6) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: takes (tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, "
                     "memory_key_padding_mask]]]]), got %d inputs", kind, n_in);
        return false;
    }
    *o = (nb_decoder_forward_options){.tgt_mask = n_in > 2 ? in[2] : NULL, .memory_mask = n_in > 3 ? in[3] : NULL,
                                      .tgt_key_padding_mask = n_in > 4 ? in[4] : NULL,
                                      .memory_key_padding_mask = n_in > 5 ? in[5] : NULL};
    return true;
}

static int dec_layer_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    nb_decoder_forward_options o;
    if (!decoder_inputs("TransformerDecoderLayer", n_in, in, &o)) return -1;
    out[0] = dec_layer_typed(m, in[0], in[1], o);
    return out[0] ? 1 : -1;
}

static const nb_module_ops dec_layer_ops = {"TransformerDecoderLayer", NULL, free, dec_layer_forward_n};

nb_module *nb_nn_transformer_decoder_layer(nb_decoder_layer_options o) {
    if (!nb_nn_layer_options("TransformerDecoderLayer", &o)) return NULL;
    dec_layer_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "TransformerDecoderLayer: out of host memory");
    c->o = o;
    nb_module *m = nb_module_new(&dec_layer_ops, c);
    if (!m) return NULL;
    int64_t d = o.d_model, ff = o.dim_feedforward;
    double eps = o.layer_norm_eps;
    nb_module *(*lin)(int64_t, int64_t, bool, nb_dtype) = o.bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex;
    bool ok = nb_nn_add_child(m, "self_attn", nb_mha_new(d, o.nhead, o.dropout, true, o.dtype, o.bitlinear),
                              &c->self_attn) &&
              nb_nn_add_child(m, "multihead_attn", nb_mha_new(d, o.nhead, o.dropout, true, o.dtype, o.bitlinear),
                              &c->mha) &&
              nb_nn_add_child(m, "linear1", lin(d, ff, true, o.dtype), &c->linear1) &&
              nb_nn_add_child(m, "dropout", nb_nn_dropout(o.dropout), &c->dropout) &&
              nb_nn_add_child(m, "linear2", lin(ff, d, true, o.dtype), &c->linear2) &&
              nb_nn_add_child(m, "norm1", nb_nn_layer_norm_ex(1, &d, eps, true, o.dtype), &c->norm1) &&
              nb_nn_add_child(m, "norm2", nb_nn_layer_norm_ex(1, &d, eps, true, o.dtype), &c->norm2) &&
              nb_nn_add_child(m, "norm3", nb_nn_layer_norm_ex(1, &d, eps, true, o.dtype), &c->norm3) &&
              nb_nn_add_child(m, "dropout1", nb_nn_dropout(o.dropout), &c->dropout1) &&
              nb_nn_add_child(m, "dropout2", nb_nn_dropout(o.dropout), &c->dropout2) &&
              nb_nn_add_child(m, "dropout3", nb_nn_dropout(o.dropout), &c->dropout3);
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- TransformerDecoder ------------------------------------------------------------- */

static const nb_module_ops decoder_ops;

static nb_tensor *decoder_typed(nb_module *m, nb_tensor *tgt, nb_tensor *memory, nb_decoder_forward_options o) {
    if (!m || nb_module_kind(m) != decoder_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "transformer_decoder_forward: module is %s, not a TransformerDecoder",
                       m ? nb_module_kind(m) : "NULL");
    if (!tgt || !memory) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "TransformerDecoder: tgt or memory is NULL");
        return NULL;
    }
    const nb_layer_stack_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    o = causal(tgt, o); /* one causal mask for every layer */
    o.tgt_is_causal = false;
    nb_tensor *x = tgt;
    for (int i = 0; x && i < c->num_layers; i++)
        x = nb_nn_transformer_decoder_layer_forward(nb_module_child_at(c->layers, i), x, memory, o);
    if (c->norm) x = nb_forward(c->norm, x);
    return nb_scope_return(s, x);
}

nb_tensor *nb_nn_transformer_decoder_forward(nb_module *m, nb_tensor *tgt, nb_tensor *memory,
                                             nb_decoder_forward_options o) {
    return hooked_dec(decoder_typed, m, tgt, memory, o);
}

static int decoder_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    nb_decoder_forward_options o;
    if (!decoder_inputs("TransformerDecoder", n_in, in, &o)) return -1;
    out[0] = decoder_typed(m, in[0], in[1], o);
    return out[0] ? 1 : -1;
}

static const nb_module_ops decoder_ops = {"TransformerDecoder", NULL, free, decoder_forward_n};

nb_module *nb_nn_transformer_decoder(nb_decoder_layer_options o, int num_layers, nb_module *norm) {
    return nb_nn_layer_stack(&decoder_ops, nb_nn_transformer_decoder_layer, o, num_layers, norm);
}

/* ---- Transformer ---------------------------------------------------------------------- */

typedef struct transformer_ctx {
    nb_module *encoder, *decoder; /* borrowed children */
} transformer_ctx;

static const nb_module_ops transformer_ops;

nb_tensor *nb_nn_transformer_forward(nb_module *m, nb_tensor *src, nb_tensor *tgt, nb_transformer_forward_options o) {
    if (!m || nb_module_kind(m) != transformer_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "transformer_forward: module is %s, not a Transformer",
                       m ? nb_module_kind(m) : "NULL");
    if (!src || !tgt) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "Transformer: src or tgt is NULL");
        return NULL;
    }
    if (nb_dim(src) != nb_dim(tgt) || (nb_dim(src) == 3 && nb_shape(src)[0] != nb_shape(tgt)[0]))
        return NB_FAIL(NB_ERR_SHAPE, "Transformer: the batch number of src and tgt must be equal");
    const transformer_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *memory = nb_nn_transformer_encoder_forward_ex(
        c->encoder, src, (nb_encoder_forward_options){.mask = o.src_mask, .src_key_padding_mask = o.src_key_padding_mask,
                                                      .is_causal = o.src_is_causal});
    nb_tensor *y = memory ? nb_nn_transformer_decoder_forward(
                                c->decoder, tgt, memory,
                                (nb_decoder_forward_options){.tgt_mask = o.tgt_mask, .memory_mask = o.memory_mask,
                                                             .tgt_key_padding_mask = o.tgt_key_padding_mask,
                                                             .memory_key_padding_mask = o.memory_key_padding_mask,
                                                             .tgt_is_causal = o.tgt_is_causal})
                          : NULL;
    return nb_scope_return(s, y);
}

/* nb_forward_n: (src, tgt[, src_mask[, tgt_mask[, memory_mask[, src_key_padding_mask[, tgt_key_padding_mask[,
 * memory_key_padding_mask]]]]]]) */
static int transformer_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (n_in < 2 || n_in > 8)
        return nb_set_error(NB_ERR_INVALID_ARG, "Transformer: takes (src, tgt[, src_mask, tgt_mask, memory_mask, "
                            "src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask]), got %d inputs",
                            n_in), -1;
    nb_tensor *a[8] = {0};
    for (int i = 0; i < n_in; i++) a[i] = in[i];
    out[0] = nb_nn_transformer_forward(m, a[0], a[1],
                                       (nb_transformer_forward_options){.src_mask = a[2], .tgt_mask = a[3],
                                                                        .memory_mask = a[4], .src_key_padding_mask = a[5],
                                                                        .tgt_key_padding_mask = a[6],
                                                                        .memory_key_padding_mask = a[7]});
    return out[0] ? 1 : -1;
}

static const nb_module_ops transformer_ops = {"Transformer", NULL, free, transformer_forward_n};

nb_module *nb_nn_transformer(nb_transformer_options o) {
    if (!o.d_model) o.d_model = 512;
    if (!o.nhead) o.nhead = 8;
    int ne = o.num_encoder_layers ? o.num_encoder_layers : 6, nd = o.num_decoder_layers ? o.num_decoder_layers : 6;
    nb_encoder_layer_options lo = {.d_model = o.d_model, .nhead = o.nhead, .dim_feedforward = o.dim_feedforward,
                                   .dropout = o.dropout, .activation = o.activation,
                                   .layer_norm_eps = o.layer_norm_eps, .norm_first = o.norm_first, .dtype = o.dtype};
    if (!nb_nn_layer_options("Transformer", &lo)) return NULL;
    transformer_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&transformer_ops, c) : NB_FAIL(NB_ERR_OOM, "Transformer: out of host memory");
    if (!m) return NULL;
    int64_t d = o.d_model;
    bool ok = nb_nn_add_child(m, "encoder",
                              nb_nn_transformer_encoder(lo, ne, nb_nn_layer_norm_ex(1, &d, lo.layer_norm_eps, true, o.dtype)),
                              &c->encoder) &&
              nb_nn_add_child(m, "decoder",
                              nb_nn_transformer_decoder(lo, nd, nb_nn_layer_norm_ex(1, &d, lo.layer_norm_eps, true, o.dtype)),
                              &c->decoder);
    /* _reset_parameters: xavier_uniform_ on every parameter of two or more dims, in order */
    int n = ok ? nb_module_parameters(m, NULL, 0) : 0;
    nb_named_tensor *p = ok ? malloc(sizeof *p * (size_t)(n ? n : 1)) : NULL;
    ok = ok && p;
    if (ok) nb_module_parameters(m, p, n);
    for (int i = 0; ok && i < n; i++)
        if (nb_dim(p[i].tensor) > 1) ok = nb_init_xavier_uniform_(p[i].tensor, 1.0, NULL) == NB_OK;
    free(p);
    if (!ok) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_OOM, "Transformer: out of host memory");
        nb_module_free(m);
        return NULL;
    }
    return m;
}
