/* transformer.c - nn.TransformerEncoderLayer (batch_first, post-LN or
 * norm_first) and nn.TransformerEncoder, with PyTorch's child names and
 * order (self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
 * dropout2; layers.0, layers.1, ...; norm), so that parameter names are
 * those of PyTorch's state_dict. Forwards run in their own scope, so the
 * intermediates of a layer die with it (the tape keeps what backward needs).
 */
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_transformer.h"
#include "nn_impl.h"

/* ---- TransformerEncoderLayer --------------------------------------------------- */

typedef struct nb_enc_layer_ctx {
    nb_encoder_layer_options o;
    /* borrowed children */
    nb_module *self_attn, *linear1, *dropout, *linear2, *norm1, *norm2, *dropout1, *dropout2;
} nb_enc_layer_ctx;

nb_tensor *nb_nn_activation_apply(nb_activation a, nb_tensor *x) {
    switch (a) {
    case NB_ACTIVATION_GELU: return nb_gelu(x, NB_GELU_ERF);
    case NB_ACTIVATION_GELU_TANH: return nb_gelu(x, NB_GELU_TANH);
    default: return nb_relu(x);
    }
}

/* dropout1(self_attn(x, x, x)) */
static nb_tensor *sa_block(const nb_enc_layer_ctx *c, nb_tensor *x, nb_tensor *mask, nb_tensor *kpm) {
    return nb_forward(c->dropout1, nb_nn_multihead_attention_forward(c->self_attn, x, x, x, kpm, mask, NULL));
}

/* dropout2(linear2(dropout(activation(linear1(x))))) */
static nb_tensor *ff_block(const nb_enc_layer_ctx *c, nb_tensor *x) {
    nb_tensor *h = nb_nn_activation_apply(c->o.activation, nb_forward(c->linear1, x));
    return nb_forward(c->dropout2, nb_forward(c->linear2, nb_forward(c->dropout, h)));
}

static const nb_module_ops enc_layer_ops;

/* The causal attn_mask for T positions: bool [T, T], true (may NOT attend,
 * MultiheadAttention's convention) above the diagonal. */
nb_tensor *nb_nn_causal_mask(const nb_tensor *src) {
    int64_t T = nb_shape(src)[nb_dim(src) - 2];
    return nb_triu(nb_to_device(nb_ones(NB_SHAPE(T, T), NB_BOOL), nb_device_of(src)), 1);
}

nb_tensor *nb_nn_transformer_encoder_layer_forward_ex(nb_module *m, nb_tensor *src, nb_encoder_forward_options o) {
    if (o.is_causal && !o.mask && src && nb_dim(src) >= 2) { /* PyTorch requires the mask; nabla builds it */
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *mask = nb_nn_causal_mask(src);
        nb_tensor *y = mask ? nb_nn_transformer_encoder_layer_forward(m, src, mask, o.src_key_padding_mask) : NULL;
        return nb_scope_return(s, y);
    }
    return nb_nn_transformer_encoder_layer_forward(m, src, o.mask, o.src_key_padding_mask);
}

/* The layer's forward without hooks (nb_forward_n runs them around it). */
static nb_tensor *enc_layer_typed(nb_module *m, nb_tensor *src, nb_tensor *src_mask, nb_tensor *src_key_padding_mask) {
    if (!m || nb_module_kind(m) != enc_layer_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "transformer_encoder_layer_forward: module is %s, not a "
                                           "TransformerEncoderLayer", m ? nb_module_kind(m) : "NULL");
    if (!src) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "TransformerEncoderLayer: src is NULL");
        return NULL;
    }
    const nb_enc_layer_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = src;
    if (c->o.norm_first) {
        x = nb_add(x, sa_block(c, nb_forward(c->norm1, x), src_mask, src_key_padding_mask));
        x = nb_add(x, ff_block(c, nb_forward(c->norm2, x)));
    } else {
        x = nb_forward(c->norm1, nb_add(x, sa_block(c, x, src_mask, src_key_padding_mask)));
        x = nb_forward(c->norm2, nb_add(x, ff_block(c, x)));
    }
    return nb_scope_return(s, x);
}

/* Hooks around fn's call on (src, mask, src_key_padding_mask), as a call
 * through nb_forward_n would run them: what a parent's typed call gives. */
static nb_tensor *hooked3(nb_tensor *(*fn)(nb_module *, nb_tensor *, nb_tensor *, nb_tensor *), nb_module *m,
                          nb_tensor *src, nb_tensor *mask, nb_tensor *kpm) {
    nb_tensor *in[3] = {src, mask, kpm}, *y;
    if (m && nb_module_run_pre_hooks(m, 3, in)) return NULL;
    y = fn(m, in[0], in[1], in[2]);
    return y && m && nb_module_run_post_hooks(m, 3, in, 1, &y) ? NULL : y;
}

nb_tensor *nb_nn_transformer_encoder_layer_forward(nb_module *m, nb_tensor *src, nb_tensor *src_mask,
                                                   nb_tensor *src_key_padding_mask) {
    return hooked3(enc_layer_typed, m, src, src_mask, src_key_padding_mask);
}

static nb_tensor *enc_layer_forward1(nb_module *m, nb_tensor *x) { return enc_layer_typed(m, x, NULL, NULL); }

/* nb_forward_n of the layer and the encoder: (src[, mask[, src_key_padding_mask]]). */
static bool three_inputs(const char *kind, int n_in) {
    if (n_in >= 1 && n_in <= 3) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: takes (src[, mask[, src_key_padding_mask]]), got %d inputs", kind, n_in);
    return false;
}

static int enc_layer_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (!three_inputs("TransformerEncoderLayer", n_in)) return -1;
    out[0] = enc_layer_typed(m, in[0], n_in > 1 ? in[1] : NULL, n_in > 2 ? in[2] : NULL);
    return out[0] ? 1 : -1;
}

static const nb_module_ops enc_layer_ops = {"TransformerEncoderLayer", enc_layer_forward1, free, enc_layer_forward_n};

/* Fills PyTorch's defaults for the 0 fields and checks the rest. A
 * resolved 0 is kept as NB_ZERO, so that resolving again (nn.Transformer
 * resolves, then each layer and LayerNorm does) keeps the 0 asked for. */
bool nb_nn_layer_options(const char *kind, nb_encoder_layer_options *o) {
    if (o->dim_feedforward == 0) o->dim_feedforward = 2048;
    o->layer_norm_eps = nb_option(o->layer_norm_eps, 1e-5);
    o->dropout = nb_option(o->dropout, 0.1);
    if (o->layer_norm_eps == 0) o->layer_norm_eps = NB_ZERO;
    if (o->dropout == 0) o->dropout = NB_ZERO;
    if (o->dim_feedforward < 1 || !(o->layer_norm_eps >= 0)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dim_feedforward %lld must be >= 1 and layer_norm_eps %g >= 0", kind,
                     (long long)o->dim_feedforward, o->layer_norm_eps);
        return false;
    }
    if (!(o->dropout >= 0 && o->dropout < 1)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: dropout %g must be in [0, 1)", kind, o->dropout);
        return false;
    }
    if ((unsigned)o->activation > NB_ACTIVATION_GELU_TANH) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: activation %d is not relu, gelu or gelu_tanh", kind,
                     (int)o->activation);
        return false;
    }
    return true;
}

/* Adds child under name and stores it in *slot; false (m keeps nothing of
 * it, the child is freed) on failure. */
bool nb_nn_add_child(nb_module *m, const char *name, nb_module *child, nb_module **slot) {
    if (nb_module_add(m, name, child)) return false;
    *slot = child;
    return true;
}

nb_module *nb_nn_transformer_encoder_layer(nb_encoder_layer_options o) {
    if (!nb_nn_layer_options("TransformerEncoderLayer", &o)) return NULL;
    nb_enc_layer_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "TransformerEncoderLayer: out of host memory");
    c->o = o;
    nb_module *m = nb_module_new(&enc_layer_ops, c);
    if (!m) return NULL;
    int64_t d = o.d_model, ff = o.dim_feedforward;
    nb_module *(*lin)(int64_t, int64_t, bool, nb_dtype) = o.bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex;
    bool ok = nb_nn_add_child(m, "self_attn", nb_mha_new(d, o.nhead, o.dropout, true, o.dtype, o.bitlinear), &c->self_attn) &&
              nb_nn_add_child(m, "linear1", lin(d, ff, true, o.dtype), &c->linear1) &&
              nb_nn_add_child(m, "dropout", nb_nn_dropout(o.dropout), &c->dropout) &&
              nb_nn_add_child(m, "linear2", lin(ff, d, true, o.dtype), &c->linear2) &&
              nb_nn_add_child(m, "norm1", nb_nn_layer_norm_ex(1, &d, o.layer_norm_eps, true, o.dtype), &c->norm1) &&
              nb_nn_add_child(m, "norm2", nb_nn_layer_norm_ex(1, &d, o.layer_norm_eps, true, o.dtype), &c->norm2) &&
              nb_nn_add_child(m, "dropout1", nb_nn_dropout(o.dropout), &c->dropout1) &&
              nb_nn_add_child(m, "dropout2", nb_nn_dropout(o.dropout), &c->dropout2);
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- TransformerEncoder ------------------------------------------- */


static const nb_module_ops encoder_ops;

static nb_tensor *encoder_typed(nb_module *m, nb_tensor *src, nb_tensor *mask, nb_tensor *src_key_padding_mask) {
    if (!m || nb_module_kind(m) != encoder_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "transformer_encoder_forward: module is %s, not a TransformerEncoder",
                       m ? nb_module_kind(m) : "NULL");
    if (!src) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "TransformerEncoder: src is NULL");
        return NULL;
    }
    const nb_layer_stack_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = src;
    for (int i = 0; x && i < c->num_layers; i++)
        x = nb_nn_transformer_encoder_layer_forward(nb_module_child_at(c->layers, i), x, mask, src_key_padding_mask);
    if (c->norm) x = nb_forward(c->norm, x);
    return nb_scope_return(s, x);
}

nb_tensor *nb_nn_transformer_encoder_forward_ex(nb_module *m, nb_tensor *src, nb_encoder_forward_options o) {
    if (o.is_causal && !o.mask && src && nb_dim(src) >= 2) { /* one causal mask for every layer */
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *mask = nb_nn_causal_mask(src);
        nb_tensor *y = mask ? nb_nn_transformer_encoder_forward(m, src, mask, o.src_key_padding_mask) : NULL;
        return nb_scope_return(s, y);
    }
    return nb_nn_transformer_encoder_forward(m, src, o.mask, o.src_key_padding_mask);
}

nb_tensor *nb_nn_transformer_encoder_forward(nb_module *m, nb_tensor *src, nb_tensor *mask,
                                             nb_tensor *src_key_padding_mask) {
    return hooked3(encoder_typed, m, src, mask, src_key_padding_mask);
}

static nb_tensor *encoder_forward1(nb_module *m, nb_tensor *x) { return encoder_typed(m, x, NULL, NULL); }

static int encoder_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (!three_inputs("TransformerEncoder", n_in)) return -1;
    out[0] = encoder_typed(m, in[0], n_in > 1 ? in[1] : NULL, n_in > 2 ? in[2] : NULL);
    return out[0] ? 1 : -1;
}

static const nb_module_ops encoder_ops = {"TransformerEncoder", encoder_forward1, free, encoder_forward_n};

/* Copies the parameters of `from` into `to` (same kind and options): the
 * deepcopy of PyTorch's _get_clones. */
nb_status nb_nn_copy_params(nb_module *to, nb_module *from) {
    int n = nb_module_parameters(from, NULL, 0);
    if (n < 0) return nb_last_status();
    nb_named_tensor *a = malloc(sizeof *a * (size_t)(2 * n + 1));
    if (!a) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", nb_module_kind(to));
    nb_status st = nb_module_parameters(to, a + n, n) == n ? NB_OK : nb_last_status();
    nb_module_parameters(from, a, n);
    for (int i = 0; !st && i < n; i++) st = nb_copy_(a[n + i].tensor, a[i].tensor);
    free(a);
    return st;
}

nb_module *nb_nn_layer_stack(const nb_module_ops *ops, nb_module *(*make_layer)(nb_encoder_layer_options),
                             nb_encoder_layer_options o, int num_layers, nb_module *norm) {
    if (num_layers < 1) {
        nb_module_free(norm);
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: num_layers %d must be >= 1", ops->kind, num_layers);
    }
    nb_layer_stack_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(ops, c) : NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    nb_module *layers = m ? nb_nn_module_list() : NULL;
    if (!layers || nb_module_add(m, "layers", layers)) {
        nb_module_free(m);
        nb_module_free(norm);
        return NULL;
    }
    c->num_layers = num_layers, c->layers = layers;
    nb_status st = NB_OK;
    for (int i = 0; !st && i < num_layers; i++) {
        nb_module *layer = make_layer(o);
        st = layer ? nb_nn_module_list_append(layers, layer) : nb_last_status();
        if (!st && i > 0) st = nb_nn_copy_params(layer, nb_module_child_at(layers, 0));
    }
    if (!st && norm) {
        st = nb_module_add(m, "norm", norm);
        c->norm = st ? NULL : norm;
        norm = NULL; /* nb_module_add owns it now, also on failure */
    }
    if (st) {
        nb_module_free(norm);
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_transformer_encoder(nb_encoder_layer_options o, int num_layers, nb_module *norm) {
    return nb_nn_layer_stack(&encoder_ops, nb_nn_transformer_encoder_layer, o, num_layers, norm);
}
