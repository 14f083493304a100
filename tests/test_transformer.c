/* test_transformer.c - the transformer modules: parameter names and shapes
 * against PyTorch's (TransformerEncoder, torch_ref.py's Bert), default
 * initialisation, MultiheadAttention against a naive composition written
 * here in plain C loops (packed projections, per-head softmax(q k^T/sqrt(d))
 * v with the masks, concat, out_proj) to 1e-10 in float64, a tiny BERT
 * against PyTorch 1.13 (values from /usr/bin/python3 with torch_ref.py's
 * Bert, parameters set to 0.8 sin(0.37 j + 0.011 j^2 + 1.3 k) for element j
 * of the k-th parameter), padding masks flowing through, gradcheck of
 * encoder layers, eval mode without dropout, and the tied decoder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"

/* ---- helpers ------------------------------------------------------------------------- */

/* A parameter's values as doubles (malloc'd). */
static double *host(const nb_tensor *t) {
    double *v = malloc(sizeof(double) * (size_t)(nb_numel(t) + 1));
    ck_assert_ptr_nonnull(v);
    nb_test_values(t, v, nb_numel(t));
    return v;
}

static void set_values(nb_tensor *t, const double *v) {
    nb_scope *s = nb_scope_begin();
    NB_CK_OK(nb_copy_(t, nb_test_tensor(nb_dim(t), nb_shape(t), nb_dtype_of(t), v)));
    nb_scope_end(s);
}

/* Sets element j of the k-th parameter to 0.8 sin(0.37 j + 0.011 j^2 + 1.3 k). */
static void set_sin_params(nb_module *m) {
    nb_named_tensor p[64];
    int n = nb_module_parameters(m, p, 64);
    ck_assert_int_le(n, 64);
    for (int k = 0; k < n; k++) {
        int64_t len = nb_numel(p[k].tensor);
        double *v = malloc(sizeof(double) * (size_t)len);
        for (int64_t j = 0; j < len; j++) v[j] = 0.8 * sin(0.37 * (double)j + 0.011 * (double)j * (double)j + 1.3 * k);
        set_values(p[k].tensor, v);
        free(v);
    }
}

static nb_tensor *ids_tensor(int64_t b, int64_t t, const int64_t *ids) {
    return nb_from_data(ids, 2, (int64_t[]){b, t}, NB_I64);
}

static nb_tensor *bool_tensor(int ndim, const int64_t *shape, const uint8_t *v) {
    return nb_from_data(v, ndim, shape, NB_BOOL);
}

/* ---- names, shapes, init --------------------------------------------------------------- */

START_TEST(test_encoder_names) {
    nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
    o.dim_feedforward = 16;
    nb_module *enc = nb_nn_transformer_encoder(o, 2, nb_nn_layer_norm(8, 0));
    NB_CK_NOTNULL(enc);
    ck_assert_str_eq(nb_module_kind(enc), "TransformerEncoder");
    ck_assert_str_eq(nb_module_kind(nb_module_child(enc, "layers")), "ModuleList");
    ck_assert_str_eq(nb_module_kind(nb_module_child(enc, "layers.1")), "TransformerEncoderLayer");
    const char *kids[] = {"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"};
    nb_module *l0 = nb_module_child(enc, "layers.0");
    ck_assert_int_eq(nb_module_num_children(l0), 8);
    for (int i = 0; i < 8; i++) ck_assert_str_eq(nb_module_child_name(l0, i), kids[i]);
    ck_assert_str_eq(nb_module_kind(nb_module_child(l0, "self_attn.out_proj")), "Linear");
    /* PyTorch: [n for n, _ in nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2,
     *           nn.LayerNorm(8)).named_parameters()] */
    static const char *names[] = {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                  "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                                  "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};
    static const int64_t shapes[][2] = {{24, 8}, {24, 0}, {8, 8}, {8, 0}, {16, 8}, {16, 0},
                                        {8, 16}, {8, 0}, {8, 0}, {8, 0}, {8, 0}, {8, 0}};
    nb_named_tensor p[32];
    ck_assert_int_eq(nb_module_parameters(enc, p, 32), 26);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 12; i++) {
            char want[64];
            snprintf(want, sizeof want, "layers.%d.%s", l, names[i]);
            ck_assert_str_eq(p[12 * l + i].name, want);
            nb_ck_shape(p[12 * l + i].tensor, shapes[i][1] ? 2 : 1, shapes[i]);
        }
    ck_assert_str_eq(p[24].name, "norm.weight");
    ck_assert_str_eq(p[25].name, "norm.bias");
    /* every layer starts as a copy of the first (PyTorch deep-copies the layer) */
    for (int i = 0; i < 12; i++) {
        double *a = host(p[i].tensor), *b = host(p[12 + i].tensor);
        for (int64_t j = 0; j < nb_numel(p[i].tensor); j++) ck_assert(a[j] == b[j]);
        free(a), free(b);
    }
    nb_module_free(enc);
}
END_TEST

/* bitlinear: the same children and parameter names with BitLinear
 * linear1/linear2/out_proj; the in-projection quantized as a whole, so
 * self-attention (one GEMM on in_proj_weight) equals the same values
 * passed as distinct query, key and value (row blocks of it); training
 * gradients reach every parameter. */
START_TEST(test_encoder_bitlinear) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
    o.dim_feedforward = 16, o.dropout = NB_ZERO, o.dtype = NB_F64, o.bitlinear = true;
    nb_module *l = nb_nn_transformer_encoder_layer(o);
    NB_CK_NOTNULL(l);
    ck_assert_str_eq(nb_module_kind(nb_module_child(l, "self_attn")), "MultiheadAttention");
    ck_assert_str_eq(nb_module_kind(nb_module_child(l, "self_attn.out_proj")), "BitLinear");
    ck_assert_str_eq(nb_module_kind(nb_module_child(l, "linear1")), "BitLinear");
    ck_assert_str_eq(nb_module_kind(nb_module_child(l, "linear2")), "BitLinear");
    nb_named_tensor p[16];
    ck_assert_int_eq(nb_module_parameters(l, p, 16), 12);
    ck_assert_str_eq(p[0].name, "self_attn.in_proj_weight");
    nb_module *mha = nb_module_child(l, "self_attn");
    nb_generator g = nb_generator_new(4);
    nb_tensor *x = nb_randn(3, (int64_t[]){2, 5, 8}, NB_F64, &g);
    nb_tensor *self = nb_nn_multihead_attention_forward(mha, x, x, x, NULL, NULL, NULL);
    nb_tensor *split = nb_nn_multihead_attention_forward(mha, x, nb_clone(x), nb_clone(x), NULL, NULL, NULL);
    nb_tensor *kv = nb_clone(x);
    nb_tensor *shared = nb_nn_multihead_attention_forward(mha, x, kv, kv, NULL, NULL, NULL);
    nb_ck_close_to(split, self, 1e-12);
    nb_ck_close_to(shared, self, 1e-12);
    NB_CK_OK(nb_backward(nb_sum(nb_forward(l, x), NULL, 0, false)));
    for (int i = 0; i < 12; i++) ck_assert_msg(nb_tensor_grad(p[i].tensor), "%s has no grad", p[i].name);
    nb_module_free(l);
    nb_scope_end(s);
}
END_TEST

/* The three MultiheadAttention forwards (self-attention, key == value,
 * all distinct) on x. */
static void mha_three(nb_module *mha, nb_tensor *x, nb_tensor *out[3]) {
    nb_tensor *kv = nb_clone(x);
    out[0] = nb_nn_multihead_attention_forward(mha, x, x, x, NULL, NULL, NULL);
    out[1] = nb_nn_multihead_attention_forward(mha, x, kv, kv, NULL, NULL, NULL);
    out[2] = nb_nn_multihead_attention_forward(mha, x, nb_clone(x), nb_clone(x), NULL, NULL, NULL);
    for (int i = 0; i < 3; i++) NB_CK_NOTNULL(out[i]);
}

/* Inference conversions of an encoder layer's MultiheadAttention:
 * nb_module_bitnet_pack packs a bitlinear layer's in_proj_weight (as a
 * whole, one scale) with its BitLinear children, and
 * nb_module_int8_weight_only converts a float layer's (per output row);
 * the parameter is gone, the buffers are there with their dtypes and
 * shapes, the three attention forwards and the layer's stay near the
 * float ones (packed: to rounding; without grad, as inference runs), a
 * second conversion does nothing, and the converted state_dict loads into a layer built and converted the same
 * way with the same outputs bit for bit. */
START_TEST(test_encoder_attention_converted) {
    nb_scope *s = nb_scope_begin();
    for (int bitnet = 0; bitnet < 2; bitnet++) {
        nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
        o.dim_feedforward = 16, o.dropout = NB_ZERO, o.bitlinear = bitnet;
        nb_module *l[2];
        for (int i = 0; i < 2; i++) {
            nb_manual_seed(3 + (uint64_t)i);
            NB_CK_NOTNULL(l[i] = nb_nn_transformer_encoder_layer(o));
            nb_module_train(l[i], false);
        }
        nb_module *mha = nb_module_child(l[0], "self_attn");
        nb_generator g = nb_generator_new(4);
        nb_tensor *x = nb_randn(3, (int64_t[]){2, 5, 8}, NB_F32, &g), *want[3], *got[3];
        mha_three(mha, x, want);
        nb_tensor *y = nb_forward(l[0], x);
        nb_set_grad_enabled(false); /* a packed model is for inference (nb_bitnet_linear) */
        nb_status (*convert)(nb_module *) = bitnet ? nb_module_bitnet_pack : nb_module_int8_weight_only;
        for (int i = 0; i < 2; i++) NB_CK_OK(convert(l[i]));
        NB_CK_OK(convert(l[0])); /* converted already: nothing to do */
        ck_assert_ptr_null(nb_module_get(mha, "in_proj_weight"));
        nb_tensor *q = nb_module_get(mha, bitnet ? "in_proj_weight_packed" : "in_proj_weight_int8");
        nb_tensor *sc = nb_module_get(mha, "in_proj_weight_scale");
        NB_CK_NOTNULL(q);
        NB_CK_NOTNULL(sc);
        ck_assert_int_eq(nb_dtype_of(q), bitnet ? NB_U8 : NB_I8);
        nb_ck_shape(q, 2, (int64_t[]){24, bitnet ? 32 : 8}); /* packed: 8 columns padded to 128, 4 a byte */
        nb_ck_shape(sc, 1, (int64_t[]){bitnet ? 1 : 24});
        mha_three(mha, x, got);
        const double tol = bitnet ? 1e-5 : 0.05;
        for (int i = 0; i < 3; i++) nb_ck_close_to(got[i], want[i], tol);
        nb_ck_close_to(nb_forward(l[0], x), y, tol);
        nb_named_tensor *sd = NULL;
        int n = nb_module_state_dict(l[0], &sd);
        ck_assert_int_gt(n, 0);
        NB_CK_OK(nb_module_load_tensors(l[1], sd, n, true, NULL));
        free(sd);
        nb_ck_bitwise(nb_forward(l[1], x), nb_forward(l[0], x));
        nb_set_grad_enabled(true);
        for (int i = 0; i < 2; i++) nb_module_free(l[i]);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_init) {
    nb_manual_seed(3);
    nb_module *mha = nb_nn_multihead_attention(64, 4, 0.1, true);
    NB_CK_NOTNULL(mha);
    double *w = host(nb_module_get(mha, "in_proj_weight")), bound = sqrt(6.0 / (64 + 192)), ss = 0;
    for (int i = 0; i < 192 * 64; i++) ck_assert(fabs(w[i]) <= bound), ss += w[i] * w[i];
    ck_assert_double_eq_tol(sqrt(ss / (192 * 64)), bound / sqrt(3.0), 0.01 * bound); /* xavier_uniform_ std */
    free(w);
    double *b = host(nb_module_get(mha, "in_proj_bias")), *ob = host(nb_module_get(nb_module_child(mha, "out_proj"), "bias"));
    for (int i = 0; i < 192; i++) ck_assert(b[i] == 0);
    for (int i = 0; i < 64; i++) ck_assert(ob[i] == 0);
    free(b), free(ob);
    nb_module_free(mha);
    nb_module *emb = nb_nn_embedding(1000, 16, -1); /* padding row 999 */
    NB_CK_NOTNULL(emb);
    ck_assert_int_eq(nb_nn_embedding_padding_idx(emb), 999);
    double *e = host(nb_module_get(emb, "weight")), s1 = 0, s2 = 0;
    for (int i = 0; i < 999 * 16; i++) s1 += e[i], s2 += e[i] * e[i];
    for (int i = 999 * 16; i < 1000 * 16; i++) ck_assert(e[i] == 0);
    ck_assert_double_eq_tol(s1 / (999 * 16), 0, 0.05);           /* N(0, 1) */
    ck_assert_double_eq_tol(sqrt(s2 / (999 * 16)), 1, 0.05);
    free(e);
    nb_module_free(emb);
    nb_module *ln = nb_nn_layer_norm(5, 0);
    double *lw = host(nb_module_get(ln, "weight")), *lb = host(nb_module_get(ln, "bias"));
    for (int i = 0; i < 5; i++) ck_assert(lw[i] == 1 && lb[i] == 0);
    free(lw), free(lb);
    nb_module_free(ln);
}
END_TEST

START_TEST(test_bert_names_tied) {
    nb_bert_config c = nb_bert_config_base(50);
    c.hidden_size = 8, c.num_layers = 2, c.num_heads = 2, c.intermediate_size = 32, c.max_position = 6;
    nb_module *bert = nb_bert(c);
    NB_CK_NOTNULL(bert);
    nb_named_tensor p[64];
    int n = nb_module_parameters(bert, p, 64);
    ck_assert_int_eq(n, 34); /* torch_ref.py's 33 + seg.weight; the tied weight listed once */
    const char *first[] = {"tok.weight", "pos.weight", "seg.weight", "ln.weight", "ln.bias",
                           "enc.layers.0.self_attn.in_proj_weight"};
    for (int i = 0; i < 6; i++) ck_assert_str_eq(p[i].name, first[i]);
    const char *last[] = {"head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias", "dec.bias"};
    for (int i = 0; i < 5; i++) ck_assert_str_eq(p[n - 5 + i].name, last[i]);
    nb_ck_shape(p[0].tensor, NB_SHAPE(50, 8));
    nb_ck_shape(p[n - 1].tensor, NB_SHAPE(50));
    nb_tensor *tok = nb_module_get(nb_module_child(bert, "tok"), "weight");
    ck_assert_ptr_eq(nb_module_get(nb_module_child(bert, "dec"), "weight"), tok);
    /* BERT's init: N(0, 0.02) matrices, the [PAD] row 0, zero biases */
    double *w = host(tok), ss = 0;
    for (int i = 0; i < 8; i++) ck_assert(w[i] == 0);
    for (int i = 8; i < 400; i++) ss += w[i] * w[i];
    ck_assert_double_eq_tol(sqrt(ss / 392), 0.02, 0.004);
    free(w);
    ck_assert_int_eq(nb_bert_get_config(bert).hidden_size, 8);
    nb_module_free(bert);
}
END_TEST

/* ---- MultiheadAttention against a naive composition ---------------------------------------- */

typedef struct naive_in {
    int64_t B, L, S, E, h;
    const double *xq, *xk, *xv, *win, *bin, *wo, *bo;
    const uint8_t *kpm;  /* [B, S], true = padding, or NULL */
    const double *am;    /* additive [L, S] (am3 false) or [B*h, L, S], or NULL */
    bool am3;
} naive_in;

/* y[r, :] = W x[r, :] + b for W [out, in] (rows of W from row0). */
static void proj(const double *x, int64_t rows, int64_t in, const double *w, const double *b, int64_t row0,
                 int64_t out, double *y) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b[row0 + o] : 0;
            for (int64_t i = 0; i < in; i++) acc += w[(row0 + o) * in + i] * x[r * in + i];
            y[r * out + o] = acc;
        }
}

/* out [B, L, E]; wavg [B, L, S] (head-averaged weights) */
static void naive_mha(const naive_in *a, double *out, double *wavg) {
    int64_t B = a->B, L = a->L, S = a->S, E = a->E, h = a->h, d = E / h;
    double *q = malloc(sizeof(double) * (size_t)(B * L * E)), *k = malloc(sizeof(double) * (size_t)(B * S * E));
    double *v = malloc(sizeof(double) * (size_t)(B * S * E)), *o = calloc((size_t)(B * L * E), sizeof(double));
    double *p = malloc(sizeof(double) * (size_t)S);
    proj(a->xq, B * L, E, a->win, a->bin, 0, E, q);
    proj(a->xk, B * S, E, a->win, a->bin, E, E, k);
    proj(a->xv, B * S, E, a->win, a->bin, 2 * E, E, v);
    memset(wavg, 0, sizeof(double) * (size_t)(B * L * S));
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < h; hh++)
            for (int64_t i = 0; i < L; i++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < S; j++) {
                    double s = 0;
                    for (int64_t t = 0; t < d; t++) s += q[(b * L + i) * E + hh * d + t] * k[(b * S + j) * E + hh * d + t];
                    s /= sqrt((double)d);
                    if (a->am) s += a->am[((a->am3 ? b * h + hh : 0) * L + i) * S + j];
                    if (a->kpm && a->kpm[b * S + j]) s = -INFINITY;
                    p[j] = s, mx = s > mx ? s : mx;
                }
                for (int64_t j = 0; j < S; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t j = 0; j < S; j++) {
                    p[j] /= sum;
                    wavg[(b * L + i) * S + j] += p[j] / (double)h;
                    for (int64_t t = 0; t < d; t++) o[(b * L + i) * E + hh * d + t] += p[j] * v[(b * S + j) * E + hh * d + t];
                }
            }
    proj(o, B * L, E, a->wo, a->bo, 0, E, out);
    free(q), free(k), free(v), free(o), free(p);
}

/* An f64 MHA with random non-zero biases; its parameters on the host in a. */
static nb_module *mha_f64(int64_t E, int64_t h, naive_in *a, double **keep) {
    nb_manual_seed(11);
    nb_module *m = nb_nn_multihead_attention_ex(E, h, 0.0, true, NB_F64);
    NB_CK_NOTNULL(m);
    nb_generator g = nb_generator_new(12);
    nb_tensor *bs[2] = {nb_module_get(m, "in_proj_bias"), nb_module_get(nb_module_child(m, "out_proj"), "bias")};
    for (int i = 0; i < 2; i++) NB_CK_OK(nb_normal_(bs[i], 0, 0.5, &g));
    keep[0] = host(nb_module_get(m, "in_proj_weight")), keep[1] = host(bs[0]);
    keep[2] = host(nb_module_get(nb_module_child(m, "out_proj"), "weight")), keep[3] = host(bs[1]);
    a->win = keep[0], a->bin = keep[1], a->wo = keep[2], a->bo = keep[3], a->E = E, a->h = h;
    return m;
}

static nb_tensor *randn64(int64_t a, int64_t b, int64_t c, uint64_t seed, double **hv) {
    nb_generator g = nb_generator_new(seed);
    nb_tensor *t = nb_randn(NB_SHAPE(a, b, c), NB_F64, &g);
    *hv = host(t);
    return t;
}

START_TEST(test_mha_self_naive) {
    nb_scope *s = nb_scope_begin();
    naive_in a = {.B = 2, .L = 5, .S = 5};
    double *keep[4], *hx;
    nb_module *m = mha_f64(8, 2, &a, keep);
    nb_tensor *x = randn64(2, 5, 8, 1, &hx);
    static const uint8_t pad[10] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    nb_tensor *kpm = bool_tensor(NB_SHAPE(2, 5), pad);
    a.xq = a.xk = a.xv = hx, a.kpm = pad;
    double want[80], wavg[50];
    naive_mha(&a, want, wavg);
    nb_ck_close(nb_nn_multihead_attention_forward(m, x, x, x, kpm, NULL, NULL), want, 80, 1e-10, 0);
    nb_tensor *w;
    nb_ck_close(nb_nn_multihead_attention_forward(m, x, x, x, kpm, NULL, &w), want, 80, 1e-10, 0); /* need_weights path */
    nb_ck_shape(w, NB_SHAPE(2, 5, 5));
    nb_ck_close(w, wavg, 50, 1e-12, 0);
    a.kpm = NULL; /* no mask: nb_forward is self-attention */
    naive_mha(&a, want, wavg);
    nb_ck_close(nb_forward(m, x), want, 80, 1e-10, 0);
    /* unbatched [L, E] with a [S] padding mask: batch element 0 alone */
    a.B = 1, a.kpm = pad;
    naive_mha(&a, want, wavg);
    nb_tensor *x0 = nb_squeeze(nb_narrow(x, 0, 0, 1), 0);
    nb_tensor *y0 = nb_nn_multihead_attention_forward(m, x0, x0, x0, bool_tensor(NB_SHAPE(5), pad), NULL, NULL);
    nb_ck_shape(y0, NB_SHAPE(5, 8));
    nb_ck_close(y0, want, 40, 1e-10, 0);
    nb_scope_end(s);
    nb_module_free(m);
    for (int i = 0; i < 4; i++) free(keep[i]);
    free(hx);
}
END_TEST

START_TEST(test_mha_cross_naive) {
    nb_scope *s = nb_scope_begin();
    naive_in a = {.B = 2, .L = 3, .S = 6};
    double *keep[4], *hq, *hk, *hv;
    nb_module *m = mha_f64(12, 3, &a, keep);
    nb_tensor *q = randn64(2, 3, 12, 2, &hq), *k = randn64(2, 6, 12, 3, &hk), *v = randn64(2, 6, 12, 4, &hv);
    static const uint8_t pad[12] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1};
    /* bool attn_mask [L, S], true = may not attend; and its additive form */
    static const uint8_t amb[18] = {0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0};
    double amf[18], am3[2 * 3 * 3 * 6];
    for (int i = 0; i < 18; i++) amf[i] = amb[i] ? -INFINITY : 0;
    for (int i = 0; i < 108; i++) am3[i] = 0.3 * sin(0.9 * i);
    double want[72], wavg[36];
    /* key is value: one GEMM for both */
    a.xq = hq, a.xk = a.xv = hk, a.kpm = pad, a.am = amf;
    naive_mha(&a, want, wavg);
    nb_ck_close(nb_nn_multihead_attention_forward(m, q, k, k, bool_tensor(NB_SHAPE(2, 6), pad), bool_tensor(NB_SHAPE(3, 6), amb), NULL),
                want, 72, 1e-10, 0);
    /* three distinct inputs, a float [B*h, L, S] mask and a bool padding mask */
    a.xv = hv, a.am = am3, a.am3 = true;
    naive_mha(&a, want, wavg);
    nb_tensor *fm = nb_test_tensor(NB_SHAPE(6, 3, 6), NB_F64, am3), *w;
    nb_ck_close(nb_nn_multihead_attention_forward(m, q, k, v, bool_tensor(NB_SHAPE(2, 6), pad), fm, NULL), want, 72, 1e-10, 0);
    nb_ck_close(nb_nn_multihead_attention_forward(m, q, k, v, bool_tensor(NB_SHAPE(2, 6), pad), fm, &w), want, 72, 1e-10, 0);
    nb_ck_close(w, wavg, 36, 1e-12, 0);
    /* errors name the op and the shapes */
    NB_CK_FAILS(nb_nn_multihead_attention_forward(m, q, k, v, bool_tensor(NB_SHAPE(2, 5), pad), NULL, NULL), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "key_padding_mask [2, 5]"));
    NB_CK_FAILS(nb_nn_multihead_attention_forward(m, q, nb_narrow(k, 2, 0, 8), v, NULL, NULL, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_nn_multihead_attention_forward(m, q, k, v, NULL, ids_tensor(3, 6, (int64_t[18]){0}), NULL), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_nn_multihead_attention(10, 3, 0, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_multihead_attention_forward(nb_module_child(m, "out_proj"), q, q, q, NULL, NULL, NULL), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
    nb_module_free(m);
    for (int i = 0; i < 4; i++) free(keep[i]);
    free(hq), free(hk), free(hv);
}
END_TEST

/* ---- BERT against PyTorch ------------------------------------------------------------------ */

/* torch_ref.py's Bert(11, 8, 2, 2, 5), eval, float64, parameters set by set_sin_params:
 * logits for ids [[1,4,7,2,9],[3,3,10,0,5]]; and for batch 0's first three
 * positions with the last two padded (src_key_padding_mask) */
static const double ref_nomask[] = {-2.0765095122351864, -0.60355992365254785, 0.85457846808261206, -0.52856312575449738, -1.509087541414353, -0.14393331697848355, -1.1322015112101738, -1.5913863661773429, -0.45561679190250093, 2.6555996847267043, 0.65274766457568079, -2.0972513983052599, -0.54713386837686973, 0.86739566698670534, -0.48049105962955196, -1.4820944222082204, -0.1553673416508998, -1.1738369185542468, -1.6187447364566385, -0.48706885220557017, 2.6864079541659414, 0.63075306257976171, -2.0311726859611854, -0.76094869969478496, 0.78450495779165985, -0.69508458934732342, -1.5370203709980061, -0.15258939499834956, -1.0009696798092227, -1.4873049692669904, -0.35346567767955483, 2.5328005352434158, 0.71637737594219686, -2.0602603541493307, -0.67404177540664001, 0.80008191971985987, -0.62147784825601238, -1.4950174936950149, -0.17196641352177683, -1.0543852747362277, -1.5211147600169543, -0.42006042931677845, 2.6030269936388475, 0.68815586593975475, -2.1082731924803673, -0.42828779149389878, 0.98194449429149522, -0.2688689839391481, -1.5590978210843223, -0.020052930704335697, -1.3157228447925091, -1.7282953608046283, -0.46657163192149897, 2.7040941595885424, 0.55829146552062736, -2.0652785186623599, -0.66342673033412713, 0.83541670436992588, -0.58496209084371575, -1.5379176285720386, -0.1270453101628124, -1.0697439443365881, -1.5424571513428449, -0.40943390307252114, 2.6103215312342343, 0.6984834343406725, -2.0318011092000492, -0.76725635329957831, 0.79118545567656962, -0.6902210737663268, -1.5625400757865273, -0.12457944432397333, -0.9809969054515264, -1.4709342726019143, -0.33631354334361663, 2.5246912143995499, 0.74164319365395448, -2.0801097850079624, -0.61590622571515052, 0.85398173930380583, -0.53704714929981956, -1.5216311198952885, -0.13202063757073795, -1.1161361451243372, -1.5785808433753445, -0.44280328811892034, 2.646872058508364, 0.66963986100494832, -2.0834637184162381, -0.61361345846500326, 0.84883531295993486, -0.54155662927144455, -1.5148819583103061, -0.13812836436516862, -1.10986633722359, -1.5713637483554723, -0.44286676115951784, 2.644544606116717, 0.67619996085015888, -1.9553870516276763, -0.9550688073767456, 0.79148066213036672, -0.82262395158694412, -1.6940603049100929, -0.039461682481422983, -0.90410747359853172, -1.4422166362243918, -0.13268390191673463, 2.321954187090165, 0.8129892055698158};
static const double ref_mask_b0[] = {-2.0425775182221759, -0.70544010497062581, 0.84766862953340016, -0.59970800496340004, -1.5842533023290828, -0.092312109791633859, -1.0590282876459367, -1.5452782831995793, -0.37533786083178633, 2.5848406984506709, 0.70454496361039931, -2.097839529861103, -0.56208123492954121, 0.87606541845147468, -0.4834765538465961, -1.5076873226908827, -0.13279705746753825, -1.1625703466155901, -1.6139866890998531, -0.47092254698716407, 2.6782576118136454, 0.64650198213212051, -2.0149368532407284, -0.81411390497629044, 0.78834071634535419, -0.72464891086220073, -1.5908886037269299, -0.10786321385744148, -0.95983403143689805, -1.4606793195776346, -0.29545081307053511, 2.4836737388906855, 0.75386077593044909};

static nb_module *tiny_bert(double dropout) {
    nb_bert_config c = nb_bert_config_base(11);
    c.hidden_size = 8, c.num_layers = 2, c.num_heads = 2, c.intermediate_size = 32, c.max_position = 5;
    c.type_vocab_size = 0, c.pad_token_id = NB_NO_PADDING_IDX, c.layer_norm_eps = 1e-5; /* torch_ref.py's */
    c.dropout = c.embedding_dropout = dropout, c.dtype = NB_F64;
    return nb_bert(c);
}

START_TEST(test_bert_matches_pytorch) {
    nb_module *bert = tiny_bert(0.1);
    NB_CK_NOTNULL(bert);
    ck_assert_int_eq(nb_module_parameters(bert, NULL, 0), 33);
    set_sin_params(bert);
    nb_module_train(bert, false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = ids_tensor(2, 5, (int64_t[]){1, 4, 7, 2, 9, 3, 3, 10, 0, 5});
    nb_tensor *logits = nb_forward(bert, ids);
    nb_ck_shape(logits, NB_SHAPE(2, 5, 11));
    nb_ck_close(logits, ref_nomask, 110, 1e-10, 1e-10);
    static const uint8_t real[10] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
    nb_tensor *mask = bool_tensor(NB_SHAPE(2, 5), real);
    nb_tensor *lm = nb_bert_forward(bert, ids, NULL, mask);
    nb_ck_close(nb_narrow(nb_narrow(lm, 0, 0, 1), 1, 0, 3), ref_mask_b0, 33, 1e-10, 1e-10);
    nb_ck_close(nb_narrow(lm, 0, 1, 1), ref_nomask + 55, 55, 1e-10, 1e-10); /* batch 1 has no padding */
    NB_CK_FAILS(nb_forward(bert, ids_tensor(1, 6, (int64_t[6]){0})), NB_ERR_SHAPE); /* T > max_position */
    NB_CK_FAILS(nb_forward(bert, nb_zeros(NB_SHAPE(2, 5), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_forward(bert, ids_tensor(1, 2, (int64_t[]){3, 11})), NB_ERR_INVALID_ARG); /* id >= V */
    nb_scope_end(s);
    nb_module_free(bert);
}
END_TEST

/* int8 weight-only BERT: the encoder's Linear layers and its
 * MultiheadAttention in_proj_weight convert (the tied decoder head, a
 * module also named "Linear", stays float) and the logits stay near the
 * float model's. */
START_TEST(test_bert_int8_weight_only) {
    nb_module *bert = tiny_bert(0);
    NB_CK_NOTNULL(bert);
    set_sin_params(bert);
    nb_module_train(bert, false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = ids_tensor(2, 5, (int64_t[]){1, 4, 7, 2, 9, 3, 3, 10, 0, 5});
    nb_tensor *before = nb_forward(bert, ids);
    NB_CK_OK(nb_module_int8_weight_only(bert));
    nb_named_tensor b[64];
    int nb = nb_module_buffers(bert, b, 64), n8 = 0;
    for (int i = 0; i < nb; i++) n8 += nb_dtype_of(b[i].tensor) == NB_I8;
    ck_assert_int_eq(n8, 9); /* linear1, linear2, in_proj and out_proj of both layers, the head's transform */
    for (int l = 0; l < 2; l++) {
        char name[64];
        snprintf(name, sizeof name, "enc.layers.%d.self_attn", l);
        NB_CK_NOTNULL(nb_module_get(nb_module_child(bert, name), "in_proj_weight_int8"));
    }
    nb_ck_close_to(nb_forward(bert, ids), before, 0.05);
    nb_scope_end(s);
    nb_module_free(bert);
}
END_TEST

/* Changing the ids at padded positions leaves the real positions' outputs
 * unchanged, in eval mode and in train mode with the same dropout draws. */
START_TEST(test_padding_flows) {
    nb_bert_config c = nb_bert_config_base(30);
    c.hidden_size = 16, c.num_layers = 2, c.num_heads = 4, c.intermediate_size = 32, c.max_position = 8;
    c.dtype = NB_F64;
    nb_manual_seed(1);
    nb_module *bert = nb_bert(c);
    NB_CK_NOTNULL(bert);
    int64_t a[16] = {2, 5, 9, 11, 3, 0, 0, 0, 2, 7, 7, 8, 12, 13, 3, 0};
    int64_t b[16] = {2, 5, 9, 11, 3, 17, 4, 29, 2, 7, 7, 8, 12, 13, 3, 21};
    static const uint8_t real[16] = {1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0};
    int64_t segs[16] = {0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1};
    for (int train = 0; train < 2; train++) {
        nb_module_train(bert, train);
        nb_scope *s = nb_scope_begin();
        nb_tensor *mask = bool_tensor(NB_SHAPE(2, 8), real), *seg = ids_tensor(2, 8, segs);
        nb_manual_seed(7);
        nb_tensor *ha = nb_bert_encode(bert, ids_tensor(2, 8, a), seg, mask);
        nb_manual_seed(7);
        nb_tensor *hb = nb_bert_encode(bert, ids_tensor(2, 8, b), seg, mask);
        nb_manual_seed(7);
        nb_tensor *hn = nb_bert_encode(bert, ids_tensor(2, 8, b), seg, NULL); /* no mask: pads are seen */
        double va[256], vb[256], vn[256];
        nb_test_values(ha, va, 256), nb_test_values(hb, vb, 256), nb_test_values(hn, vn, 256);
        double diff_unmasked = 0;
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                if (real[i]) ck_assert_msg(fabs(va[i * 16 + j] - vb[i * 16 + j]) < 1e-12, "position %d", i);
                if (real[i]) diff_unmasked += fabs(vn[i * 16 + j] - vb[i * 16 + j]);
            }
        ck_assert(diff_unmasked > 1e-3);
        nb_scope_end(s);
    }
    nb_module_free(bert);
}
END_TEST

/* ---- gradients ---------------------------------------------------------------------------- */

typedef struct layer_case {
    nb_module *layer;
    nb_tensor *kpm;
} layer_case;

static nb_tensor *layer_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    layer_case *c = ctx;
    return nb_nn_transformer_encoder_layer_forward(c->layer, in[0], NULL, c->kpm);
}

START_TEST(test_gradcheck_encoder_layer) {
    static const uint8_t pad[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    for (int norm_first = 0; norm_first < 2; norm_first++)
        for (int act = 0; act < 2; act++) {
            nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
            o.dim_feedforward = 12, o.dropout = NB_ZERO, o.norm_first = norm_first, o.dtype = NB_F64;
            o.activation = act ? NB_ACTIVATION_GELU : NB_ACTIVATION_RELU;
            nb_manual_seed(20 + 2 * norm_first + act);
            nb_module *layer = nb_nn_transformer_encoder_layer(o);
            NB_CK_NOTNULL(layer);
            nb_scope *s = nb_scope_begin();
            layer_case c = {layer, bool_tensor(NB_SHAPE(2, 4), pad)};
            nb_tensor *x = nb_test_randn_grad(NB_SHAPE(2, 4, 8), 30 + norm_first);
            nb_ck_gradcheck(layer_fn, &x, 1, &c);
            nb_scope_end(s);
            nb_module_free(layer);
        }
}
END_TEST

typedef struct mha_case {
    nb_module *m;
    nb_tensor *kpm;
} mha_case;

static nb_tensor *mha_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    mha_case *c = ctx;
    return nb_nn_multihead_attention_forward(c->m, in[0], in[1], in[2], c->kpm, in[3], NULL);
}

START_TEST(test_gradcheck_mha_cross) {
    nb_manual_seed(4);
    nb_module *m = nb_nn_multihead_attention_ex(6, 2, 0.0, true, NB_F64);
    NB_CK_NOTNULL(m);
    nb_scope *s = nb_scope_begin();
    static const uint8_t pad[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    mha_case c = {m, bool_tensor(NB_SHAPE(2, 4), pad)};
    nb_tensor *in[4] = {nb_test_randn_grad(NB_SHAPE(2, 3, 6), 1), nb_test_randn_grad(NB_SHAPE(2, 4, 6), 2),
                        nb_test_randn_grad(NB_SHAPE(2, 4, 6), 3), nb_test_randn_grad(NB_SHAPE(3, 4), 4)};
    nb_ck_gradcheck(mha_fn, in, 4, &c);
    nb_scope_end(s);
    nb_module_free(m);
}
END_TEST

START_TEST(test_eval_disables_dropout) {
    nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
    o.dim_feedforward = 16, o.dropout = 0.5, o.dtype = NB_F64;
    nb_module *drop = nb_nn_transformer_encoder(o, 2, NULL);
    o.dropout = NB_ZERO;
    nb_module *plain = nb_nn_transformer_encoder(o, 2, NULL);
    NB_CK_NOTNULL(drop);
    NB_CK_NOTNULL(plain);
    nb_named_tensor p[32], q[32];
    int n = nb_module_parameters(drop, p, 32);
    ck_assert_int_eq(nb_module_parameters(plain, q, 32), n);
    for (int i = 0; i < n; i++) NB_CK_OK(nb_copy_(q[i].tensor, p[i].tensor));
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(9);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 6, 8), NB_F64, &g);
    double ref[96], a[96], b[96];
    nb_test_values(nb_forward(plain, x), ref, 96);
    ck_assert(nb_module_is_training(nb_module_child(drop, "layers.1.dropout2")));
    nb_test_values(nb_forward(drop, x), a, 96);
    double diff = 0;
    for (int i = 0; i < 96; i++) diff += fabs(a[i] - ref[i]);
    ck_assert(diff > 1e-3); /* dropout active in train mode */
    nb_module_train(drop, false);
    ck_assert(!nb_module_is_training(nb_module_child(drop, "layers.1.self_attn")));
    nb_test_values(nb_forward(drop, x), a, 96);
    nb_test_values(nb_forward(drop, x), b, 96);
    for (int i = 0; i < 96; i++) ck_assert(a[i] == ref[i] && b[i] == ref[i]);
    nb_scope_end(s);
    nb_module_free(drop);
    nb_module_free(plain);
}
END_TEST

static double mlm_loss(nb_module *bert, nb_tensor *ids, nb_tensor *labels) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *l = nb_cross_entropy(nb_reshape(nb_forward(bert, ids), 2, (int64_t[]){-1, 11}), labels);
    double v = nb_item(l);
    nb_scope_end(s);
    return v;
}

/* The decoder uses tok.weight itself: its gradient holds both uses (checked
 * against central differences on a row only the decoder reads and on one
 * both read), and one optimizer step moves the one tensor. */
START_TEST(test_tied_decoder) {
    nb_module *bert = tiny_bert(0.0);
    NB_CK_NOTNULL(bert);
    set_sin_params(bert);
    nb_tensor *tok = nb_module_get(nb_module_child(bert, "tok"), "weight");
    ck_assert_ptr_eq(nb_module_get(nb_module_child(bert, "dec"), "weight"), tok);
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = ids_tensor(2, 5, (int64_t[]){1, 2, 3, 1, 2, 3, 3, 2, 1, 1});
    nb_tensor *labels = nb_from_data((int64_t[]){4, -100, 5, 1, -100, 6, 2, -100, 0, 9}, 1, (int64_t[]){10}, NB_I64);
    nb_tensor *l = nb_cross_entropy(nb_reshape(nb_forward(bert, ids), 2, (int64_t[]){-1, 11}), labels);
    NB_CK_OK(nb_backward(l));
    double *g = host(nb_tensor_grad(tok)), *w0 = host(tok);
    const int64_t probe[4] = {7 * 8 + 2, 7 * 8 + 5, 1 * 8 + 0, 1 * 8 + 6}; /* row 7: decoder only; row 1: both */
    for (int i = 0; i < 4; i++) {
        double eps = 1e-6, w[88];
        memcpy(w, w0, sizeof w);
        w[probe[i]] += eps, set_values(tok, w);
        double up = mlm_loss(bert, ids, labels);
        w[probe[i]] -= 2 * eps, set_values(tok, w);
        double down = mlm_loss(bert, ids, labels);
        set_values(tok, w0);
        ck_assert_msg(fabs(g[probe[i]]) > 1e-4, "element %lld has no gradient", (long long)probe[i]);
        ck_assert_double_eq_tol(g[probe[i]], (up - down) / (2 * eps), 1e-7);
    }
    nb_optimizer *opt = nb_sgd(bert, (nb_sgd_options){.lr = 0.5});
    NB_CK_NOTNULL(opt);
    NB_CK_OK(nb_optimizer_step(opt));
    double *w1 = host(nb_module_get(nb_module_child(bert, "dec"), "weight"));
    for (int i = 0; i < 88; i++) ck_assert_double_eq_tol(w1[i], w0[i] - 0.5 * g[i], 1e-15);
    nb_optimizer_free(opt);
    free(g), free(w0), free(w1);
    nb_scope_end(s);
    nb_module_free(bert);
}
END_TEST

/* A state_dict round trip keeps the tie: tok.weight is saved once (as
 * safetensors' save_model does for shared tensors) and loading it moves the
 * decoder too. */
START_TEST(test_bert_state_dict) {
    char path[] = "/tmp/nb_test_bert_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    nb_manual_seed(1);
    nb_module *a = tiny_bert(0.0), *b = NULL;
    nb_manual_seed(2);
    b = tiny_bert(0.0);
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    NB_CK_OK(nb_module_state_dict_save(a, path));
    nb_load_report r = {0};
    NB_CK_OK(nb_module_load_state_dict(b, path, true, &r));
    ck_assert_int_eq(r.n_missing + r.n_unexpected + r.n_mismatched, 0);
    nb_load_report_free(&r);
    unlink(path);
    nb_module_train(a, false), nb_module_train(b, false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = ids_tensor(1, 4, (int64_t[]){3, 1, 4, 1});
    double ya[44], yb[44];
    nb_test_values(nb_forward(a, ids), ya, 44);
    nb_test_values(nb_forward(b, ids), yb, 44);
    for (int i = 0; i < 44; i++) ck_assert(ya[i] == yb[i]);
    ck_assert_ptr_eq(nb_module_get(nb_module_child(b, "dec"), "weight"), nb_module_get(nb_module_child(b, "tok"), "weight"));
    nb_scope_end(s);
    nb_module_free(a);
    nb_module_free(b);
}
END_TEST

START_TEST(test_constructor_errors) {
    NB_CK_FAILS(nb_nn_embedding(10, 4, 10), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_embedding_ex(10, 4, 0, NB_I64), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_nn_layer_norm(0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_multihead_attention(8, 2, 1.0, true), NB_ERR_INVALID_ARG);
    nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 3);
    NB_CK_FAILS(nb_nn_transformer_encoder_layer(o), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "divisible"));
    NB_CK_FAILS(nb_nn_transformer_encoder(NB_ENCODER_LAYER_OPTIONS(8, 2), 0, nb_nn_layer_norm(8, 0)),
                NB_ERR_INVALID_ARG);
    nb_bert_config c = nb_bert_config_base(100);
    c.num_heads = 5;
    NB_CK_FAILS(nb_bert(c), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_bert_encode(nb_module_child(NULL, "x"), NULL, NULL, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_gelu((nb_gelu_approximate)7), NB_ERR_INVALID_ARG);
}
END_TEST

/* issue 13: is_causal on the encoder and its layers: position i never sees
 * j > i (changing the last position leaves the others' outputs alone), and
 * it equals passing the causal mask explicitly. */
START_TEST(test_encoder_is_causal) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_encoder_layer_options o = NB_ENCODER_LAYER_OPTIONS(8, 2);
    o.dim_feedforward = 16, o.dropout = NB_ZERO, o.dtype = NB_F64;
    nb_module *enc = nb_nn_transformer_encoder(o, 2, NULL), *layer = nb_nn_transformer_encoder_layer(o);
    NB_CK_NOTNULL(enc), NB_CK_NOTNULL(layer);
    nb_generator g = nb_generator_new(6);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 5, 8), NB_F64, &g);
    nb_tensor *x2 = nb_contiguous(nb_mul_scalar(x, 1));
    nb_tensor *last = nb_narrow(x2, 1, 4, 1);
    NB_CK_OK(nb_fill_(last, 3.0));
    nb_tensor *mask = nb_triu(nb_ones(NB_SHAPE(5, 5), NB_BOOL), 1);
    nb_encoder_forward_options causal = {.is_causal = true};
    for (int which = 0; which < 2; which++) {
        nb_tensor *y1, *y2, *ym;
        if (which) {
            y1 = nb_nn_transformer_encoder_forward_ex(enc, x, causal);
            y2 = nb_nn_transformer_encoder_forward_ex(enc, x2, causal);
            ym = nb_nn_transformer_encoder_forward(enc, x, mask, NULL);
        } else {
            y1 = nb_nn_transformer_encoder_layer_forward_ex(layer, x, causal);
            y2 = nb_nn_transformer_encoder_layer_forward_ex(layer, x2, causal);
            ym = nb_nn_transformer_encoder_layer_forward(layer, x, mask, NULL);
        }
        NB_CK_NOTNULL(y1), NB_CK_NOTNULL(y2), NB_CK_NOTNULL(ym);
        double a[80], b[80], m[80];
        nb_test_values(y1, a, 80), nb_test_values(y2, b, 80), nb_test_values(ym, m, 80);
        for (int i = 0; i < 80; i++) {
            int pos = (i / 8) % 5;
            if (pos < 4) ck_assert_msg(a[i] == b[i], "position %d saw a later position", pos);
            ck_assert_double_eq_tol(a[i], m[i], 1e-12);
        }
        ck_assert(a[79] != b[79]); /* the last position did change */
    }
    /* without is_causal the first position sees the last */
    nb_tensor *n1 = nb_nn_transformer_encoder_layer_forward(layer, x, NULL, NULL);
    nb_tensor *n2 = nb_nn_transformer_encoder_layer_forward(layer, x2, NULL, NULL);
    ck_assert(nb_item(nb_sum(nb_ne(nb_narrow(n1, 1, 0, 1), nb_narrow(n2, 1, 0, 1)), NULL, 0, false)) > 0);
    nb_module_free(enc), nb_module_free(layer);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_transformer(void) {
    Suite *s = suite_create("transformer");
    TCase *m = tcase_create("modules");
    tcase_add_test(m, test_encoder_names);
    tcase_add_test(m, test_encoder_is_causal);
    tcase_add_test(m, test_init);
    tcase_add_test(m, test_bert_names_tied);
    tcase_add_test(m, test_constructor_errors);
    suite_add_tcase(s, m);
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_mha_self_naive);
    tcase_add_test(f, test_mha_cross_naive);
    tcase_add_test(f, test_bert_matches_pytorch);
    tcase_add_test(f, test_padding_flows);
    tcase_add_test(f, test_eval_disables_dropout);
    tcase_set_timeout(f, 300);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_gradcheck_encoder_layer);
    tcase_add_test(g, test_gradcheck_mha_cross);
    tcase_add_test(g, test_tied_decoder);
    tcase_add_test(g, test_bert_state_dict);
    tcase_add_test(g, test_encoder_bitlinear);
    tcase_add_test(g, test_encoder_attention_converted);
    tcase_add_test(g, test_bert_int8_weight_only);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
