/* attention.c - nn.MultiheadAttention (batch_first=True): packed input
 * projection (in_proj_weight [3E, E], one GEMM for self-attention), heads
 * split as views, the fused nb_scaled_dot_product_attention (or, when the
 * caller asks for the attention weights, the explicit softmax(q k^T/sqrt(d))
 * composition, as PyTorch's need_weights path), heads merged, out_proj.
 * Masks follow PyTorch's MultiheadAttention conventions (bool true = masked
 * out, float = added); bool masks are combined on the host into SDPA's
 * "may attend" mask, which is small ([B, 1, 1, S] for key padding).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nn_impl.h"
#include "nb_quantize.h"
#include "nb_transformer.h"

#define MHA "MultiheadAttention"

typedef struct nb_mha_ctx {
    int64_t E, h;
    double dropout;
    nb_tensor *in_w, *in_b; /* borrowed parameters; in_b NULL without bias; in_w NULL once converted */
    nb_tensor *in_packed, *in_int8, *in_scale; /* borrowed buffers of nb_mha_convert, or NULL */
    nb_module *out_proj;    /* borrowed child */
    bool bitlinear;         /* BitNet b1.58: the projections quantize (nb_mha_new) */
} nb_mha_ctx;

static nb_tensor *mha_typed(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value, nb_tensor *key_padding_mask,
                            nb_tensor *attn_mask, nb_tensor **attn_weights);
static nb_tensor *mha_self_forward(nb_module *m, nb_tensor *x) { return mha_typed(m, x, x, x, NULL, NULL, NULL); }

/* nb_forward_n: (query, key, value, key_padding_mask, attn_mask), the masks
 * optional, or (x) alone for self-attention; outputs (attn_output,
 * attn_weights), the weights only when asked for (max_out 2: PyTorch's
 * need_weights=True), else the fused path. */
static int mha_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    if (n_in != 1 && (n_in < 3 || n_in > 5))
        return nb_set_error(NB_ERR_INVALID_ARG, MHA ": takes (query, key, value[, key_padding_mask[, attn_mask]]) "
                            "or (x), got %d inputs", n_in), -1;
    nb_tensor *q = in[0], *k = n_in > 1 ? in[1] : in[0], *v = n_in > 1 ? in[2] : in[0];
    nb_tensor *kpm = n_in > 3 ? in[3] : NULL, *mask = n_in > 4 ? in[4] : NULL;
    out[0] = mha_typed(m, q, k, v, kpm, mask, max_out > 1 ? &out[1] : NULL);
    return out[0] ? 2 : -1;
}

static const nb_module_ops mha_ops = {MHA, mha_self_forward, free, mha_forward_n};

/* ---- construction ------------------------------------------------------------ */

/* A new [n] or [r, c] parameter registered as name: xavier_uniform_ (bound
 * > 0) or zeros (bound 0). */
static nb_tensor *new_param(nb_module *m, const char *name, int ndim, const int64_t *shape, nb_dtype dt,
                            double bound) {
    nb_tensor *t = nb_tensor_new_unscoped(ndim, shape, dt, nb_default_device());
    if (!t) return NULL;
    nb_status st = bound > 0 ? nb_uniform_(t, -bound, bound, NULL) : nb_fill_(t, 0.0);
    if (st) {
        nb_release(t);
        return NULL;
    }
    return nb_module_adopt_parameter(m, name, t) ? NULL : t;
}

nb_module *nb_mha_new(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, nb_dtype dt, bool bitlinear) {
    if (embed_dim < 1 || num_heads < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, MHA ": embed_dim %lld and num_heads %lld must be >= 1",
                       (long long)embed_dim, (long long)num_heads);
    if (embed_dim % num_heads)
        return NB_FAIL(NB_ERR_INVALID_ARG, MHA ": embed_dim %lld must be divisible by num_heads %lld",
                       (long long)embed_dim, (long long)num_heads);
    if (!(dropout >= 0 && dropout < 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, MHA ": dropout %g must be in [0, 1)", dropout);
    if (!nb_nn_check_dtype(MHA, NB_OP_SCALED_DOT_PRODUCT_ATTENTION, dt)) return NULL;
    nb_mha_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, MHA ": out of host memory");
    c->E = embed_dim, c->h = num_heads, c->dropout = dropout, c->bitlinear = bitlinear;
    nb_module *m = nb_module_new(&mha_ops, c);
    if (!m) return NULL;
    /* PyTorch's order of draws: out_proj's Linear init, then _reset_parameters
     * (xavier_uniform_ of in_proj_weight, fan_in E, fan_out 3E; biases zeroed) */
    nb_module *out = (bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex)(embed_dim, embed_dim, bias, dt);
    nb_tensor *ob = out ? nb_module_get(out, "bias") : NULL;
    if (!out || (ob && nb_fill_(ob, 0.0))) {
        nb_module_free(out);
        nb_module_free(m);
        return NULL;
    }
    double a = sqrt(6.0 / (double)(embed_dim + 3 * embed_dim));
    c->in_w = new_param(m, "in_proj_weight", NB_SHAPE(3 * embed_dim, embed_dim), dt, a);
    if (c->in_w && bias) c->in_b = new_param(m, "in_proj_bias", NB_SHAPE(3 * embed_dim), dt, 0.0);
    if (!c->in_w || (bias && !c->in_b)) {
        nb_module_free(out);
        nb_module_free(m);
        return NULL;
    }
    if (nb_module_add(m, "out_proj", out)) { /* out freed by the call */
        nb_module_free(m);
        return NULL;
    }
    c->out_proj = out;
    return m;
}

nb_module *nb_nn_multihead_attention_ex(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, nb_dtype dt) {
    return nb_mha_new(embed_dim, num_heads, dropout, bias, dt, false);
}

nb_module *nb_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias) {
    return nb_nn_multihead_attention_ex(embed_dim, num_heads, dropout, bias, NB_F32);
}

/* ---- masks ------------------------------------------------------------------------ */

/* Checks a mask's dtype (bool or dt) and shape (one of the two given). */
static bool mask_ok(const char *what, const nb_tensor *t, nb_dtype dt, int nd1, const int64_t *s1, int nd2,
                    const int64_t *s2) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    if (nb_dtype_of(t) != NB_BOOL && nb_dtype_of(t) != dt) {
        nb_set_error(NB_ERR_DTYPE, MHA ": %s must be bool or %s (the query's dtype), got %s", what, nb_dtype_name(dt),
                     nb_dtype_name(nb_dtype_of(t)));
        return false;
    }
    bool fits = (nb_dim(t) == nd1 && !memcmp(nb_shape(t), s1, sizeof(int64_t) * (size_t)nd1)) ||
                (nd2 > 0 && nb_dim(t) == nd2 && !memcmp(nb_shape(t), s2, sizeof(int64_t) * (size_t)nd2));
    if (!fits) {
        nb_set_error(NB_ERR_SHAPE, MHA ": %s %s should be %s%s%s", what,
                     nb_fmt_shape(nb_dim(t), nb_shape(t), a, sizeof a), nb_fmt_shape(nd1, s1, b, sizeof b),
                     nd2 > 0 ? " or " : "", nd2 > 0 ? nb_fmt_shape(nd2, s2, c, sizeof c) : "");
        return false;
    }
    return true;
}

/* SDPA's bool "may attend" mask [B, H, L', S] (H = h when attn_mask is 3-d,
 * else 1; L' = L when there is an attn_mask, else 1) from bool masks, true =
 * masked out: kpm [B, S] and/or am [L, S] or [B*h, L, S] (either may be
 * NULL). Built with ops on the masks' device: nothing goes to the host. */
static nb_tensor *combine_bool(nb_tensor *kpm, nb_tensor *am, int64_t B, int64_t h, int64_t L, int64_t S) {
    nb_tensor *k4 = kpm ? nb_reshape(kpm, 4, (int64_t[]){B, 1, 1, S}) : NULL;
    nb_tensor *a4 = !am               ? NULL
                    : nb_dim(am) == 3 ? nb_reshape(am, 4, (int64_t[]){B, h, L, S})
                                      : nb_reshape(am, 4, (int64_t[]){1, 1, L, S});
    nb_tensor *masked = k4 && a4 ? nb_logical_or(k4, a4) : k4 ? k4 : a4;
    return nb_logical_not(masked);
}

/* A bool mask (true = masked out) as an additive float mask of dtype dt:
 * -inf where masked, 0 elsewhere (on the mask's device). */
static nb_tensor *bool_to_additive(nb_tensor *t, nb_dtype dt) {
    nb_tensor *zero = nb_full_on(nb_dim(t), nb_shape(t), 0, dt, nb_device_of(t));
    return zero ? nb_masked_fill(zero, t, -INFINITY) : NULL;
}

/* The mask SDPA gets, or NULL in *out for none: bool when every given mask
 * is bool, else the float sum of the additive forms (which keeps the
 * gradient of a float mask). Returns false on error. */
static bool build_mask(const nb_mha_ctx *c, nb_tensor *kpm, nb_tensor *am, int64_t B, int64_t L, int64_t S,
                       nb_dtype dt, nb_tensor **out) {
    *out = NULL;
    int64_t ks[2] = {B, S}, a2[2] = {L, S}, a3[3] = {B * c->h, L, S};
    if (kpm && !mask_ok("key_padding_mask", kpm, dt, 2, ks, 0, NULL)) return false;
    if (am && !mask_ok("attn_mask", am, dt, 2, a2, 3, a3)) return false;
    if (!kpm && !am) return true;
    if ((!kpm || nb_dtype_of(kpm) == NB_BOOL) && (!am || nb_dtype_of(am) == NB_BOOL))
        return (*out = combine_bool(kpm, am, B, c->h, L, S)) != NULL;
    nb_tensor *ka = NULL, *aa = NULL;
    if (kpm) {
        ka = nb_dtype_of(kpm) == NB_BOOL ? bool_to_additive(kpm, dt) : kpm;
        ka = nb_reshape(ka, 4, (int64_t[]){B, 1, 1, S});
        if (!ka) return false;
    }
    if (am) {
        aa = nb_dtype_of(am) == NB_BOOL ? bool_to_additive(am, dt) : am;
        if (aa && nb_dim(am) == 3) aa = nb_reshape(aa, 4, (int64_t[]){B, c->h, L, S});
        if (!aa) return false;
    }
    *out = ka && aa ? nb_add(aa, ka) : ka ? ka : aa;
    return *out != NULL;
}

/* ---- forward -------------------------------------------------------------------------- */

/* [B, N, E] -> [B, h, N, d] (a view). */
static nb_tensor *split_heads(nb_tensor *x, int64_t h) {
    int64_t B = nb_size(x, 0), N = nb_size(x, 1), d = nb_size(x, 2) / h;
    return nb_transpose(nb_reshape(x, 4, (int64_t[]){B, N, h, d}), 1, 2);
}

/* BitNet b1.58 (bitlinear): an input as BitLinear reads it, int8 after a
 * parameter-free RMSNorm (nb_nn_bitlinear's forward, nb_nn.h). */
static nb_tensor *bit_input(const nb_mha_ctx *c, nb_tensor *x) {
    return c->bitlinear ? nb_bitnet_activation_quant(nb_rms_norm(x, 1, &c->E, NULL, NB_BITLINEAR_EPS)) : x;
}

/* Rows [r0, r0 + n) of an input-projection tensor: t itself for all 3E
 * (self-attention: no narrow node, whose backward would copy the whole
 * gradient into a zeroed one), else a narrow view. */
static nb_tensor *rows_of(const nb_mha_ctx *c, nb_tensor *t, int64_t r0, int64_t n) {
    return r0 == 0 && n == 3 * c->E ? t : nb_narrow(t, 0, r0, n);
}

/* x times rows [r0, r0 + n) of the input projection (+ in_proj_bias's):
 * in_proj_weight (W: made ternary as a whole with bitlinear), or the
 * buffers of nb_mha_convert (packed: BitLinear's inference product on the
 * RMS-normalized x; int8: nb_linear_int8). */
static nb_tensor *in_rows(const nb_mha_ctx *c, nb_tensor *W, nb_tensor *x, int64_t r0, int64_t n) {
    nb_tensor *b = c->in_b ? rows_of(c, c->in_b, r0, n) : NULL;
    if (c->in_packed)
        return nb_bitnet_linear(nb_rms_norm(x, 1, &c->E, NULL, NB_BITLINEAR_EPS), rows_of(c, c->in_packed, r0, n),
                                c->in_scale, b);
    if (c->in_int8) return nb_linear_int8(x, rows_of(c, c->in_int8, r0, n), rows_of(c, c->in_scale, r0, n), b);
    return nb_linear(bit_input(c, x), rows_of(c, W, r0, n), b);
}

/* q, k, v projections, each [B, N, E]: one GEMM on in_proj_weight for
 * self-attention, two when key is value, three otherwise (row blocks of the
 * packed weight, as PyTorch's _in_projection_packed). With bitlinear the
 * inputs are bit_input's and the weight is in_proj_weight made ternary as
 * a whole. */
static bool project(const nb_mha_ctx *c, nb_tensor *query, nb_tensor *key, nb_tensor *value, nb_tensor **p) {
    int64_t E = c->E;
    nb_tensor *W = c->in_w && c->bitlinear ? nb_bitnet_weight_quant(c->in_w) : c->in_w;
    if (query == key && key == value) return nb_chunk(in_rows(c, W, query, 0, 3 * E), 3, -1, p, 3) == 3;
    nb_tensor *x[3] = {query, key, value};
    for (int i = 0; i < 3; i++) {
        if (i == 1 && key == value) return nb_chunk(in_rows(c, W, key, E, 2 * E), 2, -1, p + 1, 2) == 2;
        if (!(p[i] = in_rows(c, W, x[i], i * E, E))) return false;
    }
    return true;
}

nb_status nb_mha_convert(nb_module *m, bool bitnet) {
    const char *kind = nb_module_kind(m); /* records a NULL m */
    if (!kind) return nb_last_status();
    nb_mha_ctx *c = kind == mha_ops.kind ? nb_module_ctx(m) : NULL;
    if (!c || c->bitlinear != bitnet || !c->in_w) return NB_OK;
    const char *const names[2] = {bitnet ? "in_proj_weight_packed" : "in_proj_weight_int8", "in_proj_weight_scale"};
    nb_status st = nb_module_weight_to_buffers(m, "in_proj_weight", c->in_w,
                                               bitnet ? nb_bitnet_pack : nb_int8_weight_quantize, names);
    if (st) return st;
    c->in_w = NULL;
    *(bitnet ? &c->in_packed : &c->in_int8) = nb_module_get(m, names[0]);
    c->in_scale = nb_module_get(m, names[1]);
    return NB_OK;
}

/* softmax(q k^T * scale + mask) with dropout, then @ v; the weights averaged
 * over heads into *weights (PyTorch's need_weights path). */
static nb_tensor *explicit_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *mask, double p,
                                     bool training, nb_tensor **weights) {
    int64_t d = nb_size(q, -1);
    nb_tensor *s = nb_mul_scalar(nb_matmul(q, nb_transpose(k, -2, -1)), 1.0 / sqrt((double)d));
    if (mask && nb_dtype_of(mask) == NB_BOOL)
        s = nb_masked_fill(s, nb_logical_not(mask), -INFINITY);
    else if (mask)
        s = nb_add(s, mask);
    nb_tensor *P = nb_dropout(nb_softmax(s, -1), p, training, NULL);
    int head_dim = 1;
    *weights = nb_mean(P, &head_dim, 1, false);
    return nb_matmul(P, v);
}

/* Shapes of the batched inputs: q [B, L, E], k [B, S, E], v [B, S, E]. */
static bool check_shapes(const nb_mha_ctx *c, const nb_tensor *q, const nb_tensor *k, const nb_tensor *v) {
    bool ok = nb_dim(q) == 3 && nb_dim(k) == 3 && nb_dim(v) == 3 && nb_shape(q)[2] == c->E && nb_shape(k)[2] == c->E &&
              nb_shape(v)[2] == c->E && nb_shape(k)[0] == nb_shape(q)[0] && nb_shape(v)[0] == nb_shape(q)[0] &&
              nb_shape(v)[1] == nb_shape(k)[1];
    if (!ok) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], d[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_SHAPE,
                     MHA ": query %s, key %s, value %s do not fit [B, L, E], [B, S, E], [B, S, E] with E = %lld "
                         "(batch_first)",
                     nb_fmt_shape(nb_dim(q), nb_shape(q), a, sizeof a),
                     nb_fmt_shape(nb_dim(k), nb_shape(k), b, sizeof b),
                     nb_fmt_shape(nb_dim(v), nb_shape(v), d, sizeof d), (long long)c->E);
    }
    return ok;
}

static nb_tensor *mha_impl(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value, nb_tensor *kpm,
                           nb_tensor *am, nb_tensor **weights) {
    const nb_mha_ctx *c = nb_module_ctx(m);
    bool unbatched = nb_dim(query) == 2;
    if (unbatched) { /* PyTorch's unbatched form: a batch of one */
        bool self = query == key && key == value, kv = key == value;
        query = nb_unsqueeze(query, 0);
        key = self ? query : nb_unsqueeze(key, 0);
        value = kv ? key : nb_unsqueeze(value, 0);
        if (!query || !key || !value || (kpm && !(kpm = nb_unsqueeze(kpm, 0)))) return NULL;
    }
    if (!check_shapes(c, query, key, value)) return NULL;
    int64_t B = nb_shape(query)[0], L = nb_shape(query)[1], S = nb_shape(key)[1];
    nb_tensor *mask, *p[3];
    if (!build_mask(c, kpm, am, B, L, S, nb_dtype_of(query), &mask) || !project(c, query, key, value, p)) return NULL;
    nb_tensor *q = split_heads(p[0], c->h), *k = split_heads(p[1], c->h), *v = split_heads(p[2], c->h);
    bool training = nb_module_is_training(m);
    double drop = training ? c->dropout : 0.0;
    nb_tensor *o = weights ? explicit_attention(q, k, v, mask, c->dropout, training, weights)
                           : nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.attn_mask = mask,
                                                                                         .dropout_p = drop});
    o = nb_reshape(nb_transpose(o, 1, 2), 3, (int64_t[]){B, L, c->E});
    nb_tensor *y = nb_forward(c->out_proj, o);
    if (unbatched) {
        y = nb_squeeze(y, 0);
        if (weights) *weights = nb_squeeze(*weights, 0);
    }
    return weights && !*weights ? NULL : y;
}

/* The forward without hooks: nb_forward_n's (which runs them) and the typed call's body. */
static nb_tensor *mha_typed(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value, nb_tensor *key_padding_mask,
                            nb_tensor *attn_mask, nb_tensor **attn_weights) {
    if (attn_weights) *attn_weights = NULL;
    if (!m || nb_module_kind(m) != mha_ops.kind)
        return NB_FAIL(NB_ERR_INVALID_ARG, "mha_forward: module is %s, not a " MHA, m ? nb_module_kind(m) : "NULL");
    if (!query || !key || !value) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "mha_forward: query, key or value is NULL");
        return NULL;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *w = NULL;
    nb_tensor *y = mha_impl(m, query, key, value, key_padding_mask, attn_mask, attn_weights ? &w : NULL);
    if (!y) w = NULL;
    nb_retain(w); /* the weights outlive the scope as y does */
    y = nb_scope_return(s, y);
    if (attn_weights) *attn_weights = nb_scope_adopt(w);
    return y;
}

/* The typed call (what TransformerEncoderLayer and users call) runs the
 * module's hooks around it, as a call through nb_forward_n would, on
 * (query, key, value, key_padding_mask, attn_mask). */
nb_tensor *nb_nn_multihead_attention_forward(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value,
                                             nb_tensor *key_padding_mask, nb_tensor *attn_mask, nb_tensor **attn_weights) {
    if (attn_weights) *attn_weights = NULL;
    if (!m) return mha_typed(m, query, key, value, key_padding_mask, attn_mask, attn_weights); /* its message */
    nb_tensor *in[5] = {query, key, value, key_padding_mask, attn_mask}, *out[2] = {NULL, NULL};
    if (nb_module_run_pre_hooks(m, 5, in)) return NULL;
    out[0] = mha_typed(m, in[0], in[1], in[2], in[3], in[4], attn_weights ? &out[1] : NULL);
    if (!out[0] || nb_module_run_post_hooks(m, 5, in, attn_weights ? 2 : 1, out)) return NULL;
    if (attn_weights) *attn_weights = out[1];
    return out[0];
}
