/* runner_ops_nn.c - the differential runner's handlers for matrix
 * products, softmax, losses, convolution, pooling, normalization, dropout,
 * resizing, attention and linear algebra (the rest: runner_ops.c). */
#include <string.h>

#include "runner.h"

#define I0 c->in[0]
#define I1 c->in[1]
#define I2 c->in[2]

/* Two values of a list argument, or d for both when absent (a scalar
 * argument gives both). */
static void pair(const dcase *c, const char *k, int64_t d, int64_t out[2]) {
    int64_t v[2];
    int n = al(c, k, v, 2);
    if (n == 2) out[0] = v[0], out[1] = v[1];
    else if (n == 1) out[0] = out[1] = v[0];
    else out[0] = out[1] = ai(c, k, d);
}

/* an int or a list of 3 */
static void triple(const dcase *c, const char *k, int64_t d, int64_t out[3]) {
    int64_t v[3];
    int n = al(c, k, v, 3);
    for (int i = 0; i < 3; i++) out[i] = n == 3 ? v[i] : n == 1 ? v[0] : ai(c, k, d);
}

static nb_reduction reduction(const dcase *c) {
    const char *r = as(c, "reduction", "mean");
    return !strcmp(r, "sum") ? NB_REDUCTION_SUM : !strcmp(r, "none") ? NB_REDUCTION_NONE : NB_REDUCTION_MEAN;
}

nb_status h_linear(dcase *c) { OUT1(nb_linear(I0, I1, c->n_in > 2 ? I2 : NULL)); }
nb_status h_softmax(dcase *c) { OUT1(nb_softmax(I0, (int)ai(c, "dim", -1))); }
nb_status h_log_softmax(dcase *c) { OUT1(nb_log_softmax(I0, (int)ai(c, "dim", -1))); }
nb_status h_cross_entropy(dcase *c) { OUT1(nb_cross_entropy(I0, I1)); }
nb_status h_cross_entropy_ex(dcase *c) {
    nb_cross_entropy_options o = NB_CROSS_ENTROPY_DEFAULTS;
    o.ignore_index = ai(c, "ignore_index", -100);
    if (o.ignore_index == 0) o.ignore_index = NB_IGNORE_CLASS_0; /* 0 in the struct means -100 */
    o.reduction = reduction(c);
    o.weight = c->n_in > 2 ? I2 : NULL;
    o.label_smoothing = ad(c, "label_smoothing", 0);
    OUT1(nb_cross_entropy_ex(I0, I1, o));
}
nb_status h_ctc_loss(dcase *c) {
    nb_ctc_loss_options o = {.blank = ai(c, "blank", 0), .reduction = reduction(c),
                             .zero_infinity = ab(c, "zero_infinity", false)};
    OUT1(nb_ctc_loss(I0, I1, I2, c->in[3], o));
}
nb_status h_mse_loss(dcase *c) { OUT1(nb_mse_loss(I0, I1, reduction(c))); }

/* The options of the losses written from ops: extra inputs weight, then
 * pos_weight, where the case's flags name them; beta 0 and delta 0 given
 * as such (NB_ZERO). */
static nb_loss_options loss_opts(dcase *c) {
    double beta = ad(c, "beta", 1.0), delta = ad(c, "delta", 1.0);
    nb_loss_options o = {.reduction = reduction(c), .beta = beta == 0 ? NB_ZERO : beta,
                         .delta = delta == 0 ? NB_ZERO : delta, .log_target = ab(c, "log_target", false),
                         .batchmean = !strcmp(as(c, "reduction", "mean"), "batchmean")};
    int k = 2;
    if (ab(c, "weight", false)) o.weight = c->in[k++];
    if (ab(c, "pos_weight", false)) o.pos_weight = c->in[k++];
    return o;
}
nb_status h_l1_loss(dcase *c) { OUT1(nb_l1_loss(I0, I1, reduction(c))); }
nb_status h_smooth_l1_loss(dcase *c) { OUT1(nb_smooth_l1_loss(I0, I1, loss_opts(c))); }
nb_status h_huber_loss(dcase *c) { OUT1(nb_huber_loss(I0, I1, loss_opts(c))); }
nb_status h_binary_cross_entropy(dcase *c) { OUT1(nb_binary_cross_entropy(I0, I1, loss_opts(c))); }
nb_status h_binary_cross_entropy_with_logits(dcase *c) {
    OUT1(nb_binary_cross_entropy_with_logits(I0, I1, loss_opts(c)));
}
nb_status h_kl_div(dcase *c) { OUT1(nb_kl_div(I0, I1, loss_opts(c))); }
nb_status h_soft_margin_loss(dcase *c) { OUT1(nb_soft_margin_loss(I0, I1, reduction(c))); }
nb_status h_hinge_embedding_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c)};
    double m = ad(c, "margin", 1.0);
    o.margin = m == 0 ? NB_ZERO : m;
    OUT1(nb_hinge_embedding_loss(I0, I1, o));
}
nb_status h_margin_ranking_loss(dcase *c) {
    OUT1(nb_margin_ranking_loss(I0, I1, I2, (nb_loss_options){.reduction = reduction(c), .margin = ad(c, "margin", 0)}));
}

/* ---- convolution, pooling ----------------------------------------------------------------------- */

nb_status h_conv2d(dcase *c) {
    nb_conv2d_options o = {.groups = ai(c, "groups", 1), .padding_same = !strcmp(as(c, "padding_mode", ""), "same")};
    pair(c, "stride", 1, o.stride), pair(c, "padding", 0, o.padding), pair(c, "dilation", 1, o.dilation);
    OUT1(nb_conv2d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_conv1d(dcase *c) {
    nb_conv1d_options o = {.stride = ai(c, "stride", 1), .padding = ai(c, "padding", 0),
                           .dilation = ai(c, "dilation", 1), .groups = ai(c, "groups", 1),
                           .padding_same = !strcmp(as(c, "padding_mode", ""), "same")};
    OUT1(nb_conv1d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_conv_transpose2d(dcase *c) {
    nb_conv_transpose2d_options o = {.groups = ai(c, "groups", 1)};
    pair(c, "stride", 1, o.stride), pair(c, "padding", 0, o.padding), pair(c, "dilation", 1, o.dilation);
    pair(c, "output_padding", 0, o.output_padding);
    OUT1(nb_conv_transpose2d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_conv_transpose1d(dcase *c) {
    nb_conv_transpose1d_options o = {.stride = ai(c, "stride", 1), .padding = ai(c, "padding", 0),
                                     .output_padding = ai(c, "output_padding", 0), .dilation = ai(c, "dilation", 1),
                                     .groups = ai(c, "groups", 1)};
    OUT1(nb_conv_transpose1d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_conv3d(dcase *c) {
    nb_conv3d_options o = {.groups = ai(c, "groups", 1), .padding_same = !strcmp(as(c, "padding_mode", ""), "same")};
    triple(c, "stride", 1, o.stride), triple(c, "padding", 0, o.padding), triple(c, "dilation", 1, o.dilation);
    OUT1(nb_conv3d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_conv_transpose3d(dcase *c) {
    nb_conv_transpose3d_options o = {.groups = ai(c, "groups", 1)};
    triple(c, "stride", 1, o.stride), triple(c, "padding", 0, o.padding), triple(c, "dilation", 1, o.dilation);
    triple(c, "output_padding", 0, o.output_padding);
    OUT1(nb_conv_transpose3d(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
/* in: x, offset, weight, bias, mask (bias and mask may be null) */
nb_status h_deform_conv2d(dcase *c) {
    nb_deform_conv2d_options o;
    pair(c, "stride", 1, o.stride), pair(c, "padding", 0, o.padding), pair(c, "dilation", 1, o.dilation);
    OUT1(nb_deform_conv2d(I0, I1, I2, c->n_in > 3 ? c->in[3] : NULL, c->n_in > 4 ? c->in[4] : NULL, o));
}

static nb_pool2d_options pool2d(const dcase *c) {
    nb_pool2d_options o = {.ceil_mode = ab(c, "ceil_mode", false),
                           .count_include_pad_false = !ab(c, "count_include_pad", true),
                           .divisor_override = ai(c, "divisor_override", 0)};
    pair(c, "kernel_size", 1, o.kernel), pair(c, "stride", 0, o.stride), pair(c, "padding", 0, o.padding);
    pair(c, "dilation", 1, o.dilation);
    return o;
}
static nb_pool1d_options pool1d(const dcase *c) {
    return (nb_pool1d_options){.kernel = ai(c, "kernel_size", 1), .stride = ai(c, "stride", 0),
                               .padding = ai(c, "padding", 0), .dilation = ai(c, "dilation", 1),
                               .ceil_mode = ab(c, "ceil_mode", false),
                               .count_include_pad_false = !ab(c, "count_include_pad", true)};
}
nb_status h_max_pool2d(dcase *c) {
    c->out[0] = nb_max_pool2d(I0, pool2d(c), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_max_pool1d(dcase *c) {
    c->out[0] = nb_max_pool1d(I0, pool1d(c), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
static nb_pool3d_options pool3d(const dcase *c) {
    nb_pool3d_options o = {.ceil_mode = ab(c, "ceil_mode", false),
                           .count_include_pad_false = !ab(c, "count_include_pad", true),
                           .divisor_override = ai(c, "divisor_override", 0)};
    triple(c, "kernel_size", 1, o.kernel), triple(c, "stride", 0, o.stride), triple(c, "padding", 0, o.padding);
    triple(c, "dilation", 1, o.dilation);
    return o;
}
nb_status h_max_pool3d(dcase *c) {
    c->out[0] = nb_max_pool3d(I0, pool3d(c), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_avg_pool3d(dcase *c) { OUT1(nb_avg_pool3d(I0, pool3d(c))); }
nb_status h_adaptive_avg_pool3d(dcase *c) {
    int64_t s[3];
    triple(c, "output_size", 1, s);
    OUT1(nb_adaptive_avg_pool3d(I0, s[0], s[1], s[2]));
}
nb_status h_avg_pool2d(dcase *c) { OUT1(nb_avg_pool2d(I0, pool2d(c))); }
nb_status h_avg_pool1d(dcase *c) { OUT1(nb_avg_pool1d(I0, pool1d(c))); }
nb_status h_adaptive_avg_pool2d(dcase *c) {
    int64_t s[2];
    pair(c, "output_size", 1, s);
    OUT1(nb_adaptive_avg_pool2d(I0, s[0], s[1]));
}
nb_status h_adaptive_avg_pool1d(dcase *c) { OUT1(nb_adaptive_avg_pool1d(I0, ai(c, "output_size", 1))); }
nb_status h_adaptive_max_pool2d(dcase *c) {
    int64_t s[2];
    pair(c, "output_size", 1, s);
    c->out[0] = nb_adaptive_max_pool2d(I0, s[0], s[1], &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
/* fractional max pooling with the case's samples (input 1): values and indices */
static nb_status fractional(dcase *c, int d) {
    nb_fractional_max_pool_options o = {.random_samples = I1};
    int64_t k[3], n[3];
    double r[3] = {0};
    int nk = al(c, "kernel_size", k, 3), no = al(c, "output_size", n, 3);
    json_t *ratio = json_object_get(c->args, "output_ratio");
    for (int i = 0; i < d; i++) {
        o.kernel_size[i] = nk > i ? k[i] : 0;
        o.output_size[i] = no > i ? n[i] : 0;
        r[i] = json_is_array(ratio) ? json_number_value(json_array_get(ratio, (size_t)i)) : 0;
        o.output_ratio[i] = r[i];
    }
    c->out[0] = d == 2 ? nb_fractional_max_pool2d(I0, o, &c->out[1]) : nb_fractional_max_pool3d(I0, o, &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_fractional_max_pool2d(dcase *c) { return fractional(c, 2); }
nb_status h_fractional_max_pool3d(dcase *c) { return fractional(c, 3); }

/* ---- normalization, dropout, resizing, attention --------------------------------------------------- */

/* in: x, running_mean, running_var, weight, bias (each but x may be null);
 * outputs: y, then the running statistics after the update (training). */
nb_status h_batch_norm(dcase *c) {
    nb_tensor *rm = c->n_in > 1 ? I1 : NULL, *rv = c->n_in > 2 ? I2 : NULL;
    c->out[0] = nb_batch_norm(I0, rm, rv, c->n_in > 3 ? c->in[3] : NULL, c->n_in > 4 ? c->in[4] : NULL,
                              ab(c, "training", true), ad(c, "momentum", 0.1), ad(c, "eps", 1e-5));
    c->out[1] = c->out[0] ? rm : NULL;
    c->out[2] = c->out[0] ? rv : NULL;
    OUTS(3, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_dropout(dcase *c) { OUT1(nb_dropout(I0, ad(c, "p", 0.5), ab(c, "training", true), NULL)); }
nb_status h_interpolate(dcase *c) {
    int64_t s[2];
    pair(c, "size", 1, s);
    bool bil = !strcmp(as(c, "mode", "nearest"), "bilinear");
    OUT1(nb_interpolate(I0, s[0], s[1], bil ? NB_INTERPOLATE_BILINEAR : NB_INTERPOLATE_NEAREST,
                        ab(c, "align_corners", false)));
}
nb_status h_layer_norm(dcase *c) {
    int64_t ns[NB_MAX_DIMS];
    int n = al(c, "normalized_shape", ns, NB_MAX_DIMS);
    OUT1(nb_layer_norm(I0, n < 0 ? 0 : n, ns, c->n_in > 1 ? I1 : NULL, c->n_in > 2 ? I2 : NULL, ad(c, "eps", 1e-5)));
}
nb_status h_rms_norm(dcase *c) {
    int64_t ns[NB_MAX_DIMS];
    int n = al(c, "normalized_shape", ns, NB_MAX_DIMS);
    OUT1(nb_rms_norm(I0, n < 0 ? 0 : n, ns, c->n_in > 1 ? I1 : NULL, ad(c, "eps", 0)));
}
nb_status h_add_rms_norm(dcase *c) {
    int64_t ns[NB_MAX_DIMS];
    int n = al(c, "normalized_shape", ns, NB_MAX_DIMS);
    c->out[0] = nb_add_rms_norm(I0, I1, n < 0 ? 0 : n, ns, c->n_in > 2 ? I2 : NULL, ad(c, "eps", 0), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_apply_rotary_pos_emb(dcase *c) { OUT1(nb_apply_rotary_pos_emb(I0, I1, I2)); }
nb_status h_scaled_dot_product_attention(dcase *c) {
    nb_sdpa_options o = {.attn_mask = c->n_in > 3 ? c->in[3] : NULL, .is_causal = ab(c, "is_causal", false),
                         .scale = ad(c, "scale", 0)};
    OUT1(nb_scaled_dot_product_attention(I0, I1, I2, o));
}

/* ---- linear algebra ------------------------------------------------------------------------------------ */

nb_status h_linalg_solve(dcase *c) { OUT1(nb_linalg_solve(I0, I1)); }
nb_status h_linalg_inv(dcase *c) { OUT1(nb_linalg_inv(I0)); }
nb_status h_linalg_det(dcase *c) { OUT1(nb_linalg_det(I0)); }
nb_status h_linalg_slogdet(dcase *c) { OUTS(2, nb_linalg_slogdet(I0, &c->out[0], &c->out[1])); }
nb_status h_linalg_cholesky(dcase *c) { OUT1(nb_linalg_cholesky(I0, ab(c, "upper", false))); }
nb_status h_linalg_qr(dcase *c) {
    nb_linalg_qr_mode m = !strcmp(as(c, "mode", "reduced"), "complete") ? NB_QR_COMPLETE : NB_QR_REDUCED;
    OUTS(2, nb_linalg_qr(I0, m, &c->out[0], &c->out[1]));
}
nb_status h_linalg_eigh(dcase *c) { OUTS(2, nb_linalg_eigh(I0, as(c, "UPLO", "L")[0], &c->out[0], &c->out[1])); }
nb_status h_linalg_svd(dcase *c) {
    OUTS(3, nb_linalg_svd(I0, ab(c, "full_matrices", true), &c->out[0], &c->out[1], &c->out[2]));
}
nb_status h_linalg_svdvals(dcase *c) { OUT1(nb_linalg_svdvals(I0)); }
nb_status h_linalg_lstsq(dcase *c) {
    c->out[0] = nb_linalg_lstsq(I0, I1, &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}

nb_status h_nll_loss(dcase *c) {
    nb_cross_entropy_options o = NB_CROSS_ENTROPY_DEFAULTS;
    o.ignore_index = ai(c, "ignore_index", -100);
    if (o.ignore_index == 0) o.ignore_index = NB_IGNORE_CLASS_0; /* 0 in the struct means -100 */
    o.reduction = reduction(c);
    o.weight = c->n_in > 2 ? I2 : NULL;
    OUT1(nb_nll_loss(I0, I1, o));
}

/* The losses over classes and embeddings (ops_loss_margin.c) and the two
 * regression NLLs: weight (when the case's flag names it) is the input
 * after the required ones; defaults 0 are asked for with NB_ZERO. */
static double opt0(dcase *c, const char *k, double d) {
    double v = ad(c, k, d);
    return v == 0 ? NB_ZERO : v;
}
nb_status h_poisson_nll_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .full = ab(c, "full", false), .eps = opt0(c, "eps", 1e-8),
                         .log_input = ab(c, "log_input", true) ? NB_FLAG_TRUE : NB_FLAG_FALSE};
    OUT1(nb_poisson_nll_loss(I0, I1, o));
}
nb_status h_gaussian_nll_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .full = ab(c, "full", false), .eps = opt0(c, "eps", 1e-6)};
    OUT1(nb_gaussian_nll_loss(I0, I1, I2, o));
}
nb_status h_multilabel_soft_margin_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .weight = ab(c, "weight", false) ? I2 : NULL};
    OUT1(nb_multilabel_soft_margin_loss(I0, I1, o));
}
nb_status h_multi_margin_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .weight = ab(c, "weight", false) ? I2 : NULL,
                         .p = ad(c, "p", 1), .margin = opt0(c, "margin", 1)};
    OUT1(nb_multi_margin_loss(I0, I1, o));
}
nb_status h_multilabel_margin_loss(dcase *c) { OUT1(nb_multilabel_margin_loss(I0, I1, reduction(c))); }
nb_status h_cosine_embedding_loss(dcase *c) {
    OUT1(nb_cosine_embedding_loss(I0, I1, I2, (nb_loss_options){.reduction = reduction(c), .margin = ad(c, "margin", 0)}));
}
nb_status h_triplet_margin_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .margin = opt0(c, "margin", 1), .p = ad(c, "p", 2),
                         .eps = opt0(c, "eps", 1e-6), .swap = ab(c, "swap", false)};
    OUT1(nb_triplet_margin_loss(I0, I1, I2, o));
}
/* The case's distance: 1 - cosine_similarity over the last dim (PyTorch's
 * documented example), or the default (pairwise_distance). */
static nb_tensor *cosine_distance(nb_tensor *a, nb_tensor *b, void *user) {
    (void)user;
    return nb_add_scalar(nb_neg(nb_cosine_similarity(a, b, -1, 0)), 1.0);
}
nb_status h_triplet_margin_with_distance_loss(dcase *c) {
    nb_loss_options o = {.reduction = reduction(c), .margin = opt0(c, "margin", 1), .swap = ab(c, "swap", false)};
    bool cos = !strcmp(as(c, "distance", "pairwise"), "cosine");
    OUT1(nb_triplet_margin_with_distance_loss(I0, I1, I2, cos ? cosine_distance : NULL, NULL, o));
}
nb_status h_pairwise_distance(dcase *c) {
    OUT1(nb_pairwise_distance(I0, I1, ad(c, "p", 2), opt0(c, "eps", 1e-6), ab(c, "keepdim", false)));
}
nb_status h_cosine_similarity(dcase *c) { OUT1(nb_cosine_similarity(I0, I1, (int)ai(c, "dim", 1), opt0(c, "eps", 1e-8))); }

/* ops_group_norm.c: inputs x, then weight and bias (None allowed), and for
 * instance_norm running_mean and running_var (returned as outputs 1, 2). */
static nb_tensor *opt_in(dcase *c, int i) { return c->n_in > i ? c->in[i] : NULL; }
nb_status h_group_norm(dcase *c) {
    OUT1(nb_group_norm(I0, ai(c, "num_groups", 1), opt_in(c, 1), opt_in(c, 2), opt0(c, "eps", 1e-5)));
}
nb_status h_instance_norm(dcase *c) {
    nb_tensor *rm = opt_in(c, 3), *rv = opt_in(c, 4);
    c->out[0] = nb_instance_norm(I0, rm, rv, opt_in(c, 1), opt_in(c, 2), ab(c, "use_input_stats", true),
                                 opt0(c, "momentum", 0.1), opt0(c, "eps", 1e-5));
    c->out[1] = c->out[0] ? rm : NULL;
    c->out[2] = c->out[0] ? rv : NULL;
    OUTS(3, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_local_response_norm(dcase *c) {
    OUT1(nb_local_response_norm(I0, ai(c, "size", 2), opt0(c, "alpha", 1e-4), opt0(c, "beta", 0.75), opt0(c, "k", 1)));
}
nb_status h_normalize(dcase *c) { OUT1(nb_normalize(I0, ad(c, "p", 2), (int)ai(c, "dim", 1), opt0(c, "eps", 1e-12))); }

/* ops_rnn.c: inputs x, hx, cx (None allowed), then the flat parameters in
 * PyTorch's order; outputs (output, h_n[, c_n]) or (h'[, c']). */
static nb_rnn_mode rnn_mode(dcase *c) {
    const char *m = as(c, "mode", "RNN_TANH");
    return !strcmp(m, "LSTM") ? NB_RNN_LSTM : !strcmp(m, "GRU") ? NB_RNN_GRU : !strcmp(m, "RNN_RELU") ? NB_RNN_RELU
                                                                                                          : NB_RNN_TANH;
}
nb_status h_rnn(dcase *c) {
    nb_rnn_options o = {.mode = rnn_mode(c), .num_layers = ai(c, "num_layers", 1),
                        .bias = ab(c, "bias", true) ? NB_FLAG_TRUE : NB_FLAG_FALSE,
                        .batch_first = ab(c, "batch_first", false), .bidirectional = ab(c, "bidirectional", false),
                        .proj_size = ai(c, "proj_size", 0)};
    int n = nb_rnn(I0, c->in[1], c->in[2], c->in + 3, c->n_in - 3, o, c->out);
    OUTS(o.mode == NB_RNN_LSTM ? 3 : 2, n < 0 ? nb_last_status() : NB_OK);
}
nb_status h_rnn_cell(dcase *c) {
    nb_rnn_mode mode = rnn_mode(c);
    bool bias = c->n_in > 5;
    int n = nb_rnn_cell(I0, c->in[1], c->in[2], c->in[3], c->in[4], bias ? c->in[5] : NULL, bias ? c->in[6] : NULL,
                        mode, c->out);
    OUTS(mode == NB_RNN_LSTM ? 2 : 1, n < 0 ? nb_last_status() : NB_OK);
}

/* packed sequences: the parts of a PackedSequence as outputs (the indices only when kept) */
static nb_status packed_outputs(dcase *c, nb_status st, const nb_packed_sequence *p) {
    c->out[0] = p->data, c->out[1] = p->batch_sizes, c->out[2] = p->sorted_indices, c->out[3] = p->unsorted_indices;
    OUTS(p->sorted_indices ? 4 : 2, st);
}
nb_status h_pack_padded_sequence(dcase *c) {
    nb_packed_sequence p;
    nb_status st = nb_pack_padded_sequence(I0, I1, ab(c, "batch_first", false), ab(c, "enforce_sorted", true), &p);
    return packed_outputs(c, st, &p);
}
nb_status h_pack_sequence(dcase *c) {
    nb_packed_sequence p;
    return packed_outputs(c, nb_pack_sequence(c->in, c->n_in, ab(c, "enforce_sorted", true), &p), &p);
}
nb_status h_pad_sequence(dcase *c) {
    OUT1(nb_pad_sequence(c->in, c->n_in, ab(c, "batch_first", false), ad(c, "padding_value", 0),
                         !strcmp(as(c, "padding_side", "right"), "left")));
}
/* pack (unsorted) then pad back: (padded, lengths) */
nb_status h_pad_packed_sequence(dcase *c) {
    nb_packed_sequence p;
    bool bf = ab(c, "batch_first", false);
    nb_status st = nb_pack_padded_sequence(I0, I1, bf, false, &p);
    if (st == NB_OK)
        st = nb_pad_packed_sequence(&p, bf, ad(c, "padding_value", 0), ai(c, "total_length", 0), &c->out[0], &c->out[1]);
    OUTS(2, st);
}
/* x [T, B, I] and lengths packed (unsorted), the RNN over it, its output padded back: (output, h_n[, c_n]) */
nb_status h_rnn_packed(dcase *c) {
    nb_rnn_options o = {.mode = rnn_mode(c), .num_layers = ai(c, "num_layers", 1),
                        .bias = ab(c, "bias", true) ? NB_FLAG_TRUE : NB_FLAG_FALSE,
                        .bidirectional = ab(c, "bidirectional", false), .proj_size = ai(c, "proj_size", 0)};
    nb_packed_sequence p, y;
    nb_status st = nb_pack_padded_sequence(I0, I1, false, false, &p);
    int n = st == NB_OK ? nb_rnn_packed(&p, c->in[2], c->in[3], c->in + 4, c->n_in - 4, o, &y, c->out + 1) : -1;
    if (n > 0) st = nb_pad_packed_sequence(&y, false, 0, 0, &c->out[0], NULL);
    OUTS(o.mode == NB_RNN_LSTM ? 3 : 2, n < 0 ? nb_last_status() : st);
}

/* ops_activation.c: lambd / alpha / bounds as given (0 as NB_ZERO). */
nb_status h_celu(dcase *c) { OUT1(nb_celu(I0, opt0(c, "alpha", 1.0))); }
nb_status h_softsign(dcase *c) { OUT1(nb_softsign(I0)); }
nb_status h_softshrink(dcase *c) { OUT1(nb_softshrink(I0, opt0(c, "lambd", 0.5))); }
nb_status h_hardshrink(dcase *c) { OUT1(nb_hardshrink(I0, opt0(c, "lambd", 0.5))); }
nb_status h_tanhshrink(dcase *c) { OUT1(nb_tanhshrink(I0)); }
nb_status h_threshold(dcase *c) { OUT1(nb_threshold(I0, ad(c, "threshold", 0), ad(c, "value", 0))); }
nb_status h_glu(dcase *c) { OUT1(nb_glu(I0, (int)ai(c, "dim", -1))); }
nb_status h_prelu(dcase *c) { OUT1(nb_prelu(I0, I1)); }
nb_status h_rrelu(dcase *c) {
    OUT1(nb_rrelu(I0, opt0(c, "lower", 1.0 / 8), opt0(c, "upper", 1.0 / 3), ab(c, "training", false), NULL));
}
nb_status h_softmin(dcase *c) { OUT1(nb_softmin(I0, (int)ai(c, "dim", -1))); }
/* the in-place forms, on a clone of the input (the input is a leaf that requires grad) */
#define INPLACE(name, args) \
    nb_status h_##name(dcase *c) { \
        nb_tensor *y = nb_clone(I0); \
        nb_status st = y ? nb_##name args : nb_last_status(); \
        c->out[0] = y, c->n_out = 1; \
        return st; \
    }
INPLACE(relu_, (y))
INPLACE(selu_, (y))
INPLACE(leaky_relu_, (y, ad(c, "negative_slope", 0.01)))
INPLACE(elu_, (y, ad(c, "alpha", 1)))
INPLACE(celu_, (y, opt0(c, "alpha", 1.0)))
INPLACE(hardtanh_, (y, ad(c, "min_val", -1), ad(c, "max_val", 1)))
INPLACE(threshold_, (y, ad(c, "threshold", 0), ad(c, "value", 0)))
INPLACE(rrelu_, (y, opt0(c, "lower", 1.0 / 8), opt0(c, "upper", 1.0 / 3), ab(c, "training", false), NULL))

/* channel and alpha dropout (deterministic cases: eval, p 0, p 1), pixel shuffles, lp pools, bilinear */
static nb_status dropout_variant(dcase *c, nb_tensor *(*fn)(nb_tensor *, double, bool, nb_generator *)) {
    OUT1(fn(I0, ad(c, "p", 0.5), ab(c, "training", true), NULL));
}
nb_status h_dropout1d(dcase *c) { return dropout_variant(c, nb_dropout1d); }
nb_status h_dropout2d(dcase *c) { return dropout_variant(c, nb_dropout2d); }
nb_status h_dropout3d(dcase *c) { return dropout_variant(c, nb_dropout3d); }
nb_status h_alpha_dropout(dcase *c) { return dropout_variant(c, nb_alpha_dropout); }
nb_status h_feature_alpha_dropout(dcase *c) { return dropout_variant(c, nb_feature_alpha_dropout); }
nb_status h_pixel_shuffle(dcase *c) { OUT1(nb_pixel_shuffle(I0, ai(c, "r", 2))); }
nb_status h_pixel_unshuffle(dcase *c) { OUT1(nb_pixel_unshuffle(I0, ai(c, "r", 2))); }
nb_status h_lp_pool2d(dcase *c) {
    int64_t k[2], st[2];
    pair(c, "kernel_size", 2, k);
    pair(c, "stride", 0, st); /* absent: 0, the kernel */
    OUT1(nb_lp_pool2d(I0, ad(c, "norm_type", 2), (nb_pool2d_options){.kernel = {k[0], k[1]}, .stride = {st[0], st[1]},
                                                                     .ceil_mode = ab(c, "ceil_mode", false)}));
}
nb_status h_lp_pool1d(dcase *c) {
    OUT1(nb_lp_pool1d(I0, ad(c, "norm_type", 2), (nb_pool1d_options){.kernel = ai(c, "kernel_size", 2),
                                                                     .stride = ai(c, "stride", 0),
                                                                     .ceil_mode = ab(c, "ceil_mode", false)}));
}
nb_status h_bilinear(dcase *c) { OUT1(nb_bilinear(I0, I1, I2, c->n_in > 3 ? c->in[3] : NULL)); }

/* lp_pool3d, adaptive max pools, max_unpool (after max_pool with indices), channel_shuffle, pdist, gumbel_softmax */
nb_status h_lp_pool3d(dcase *c) {
    int64_t k[3], st[3];
    triple(c, "kernel_size", 2, k);
    triple(c, "stride", 0, st);
    OUT1(nb_lp_pool3d(I0, ad(c, "norm_type", 2), (nb_pool3d_options){.kernel = {k[0], k[1], k[2]},
                                                                     .stride = {st[0], st[1], st[2]}}));
}
nb_status h_adaptive_max_pool1d(dcase *c) {
    c->out[0] = nb_adaptive_max_pool1d(I0, ai(c, "output_size", 1), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_adaptive_max_pool3d(dcase *c) {
    int64_t o[3];
    triple(c, "output_size", 1, o);
    OUT1(nb_adaptive_max_pool3d(I0, o[0], o[1], o[2]));
}
nb_status h_max_unpool1d(dcase *c) {
    int64_t k = ai(c, "kernel_size", 2);
    nb_tensor *idx = NULL, *y = nb_max_pool1d(I0, (nb_pool1d_options){.kernel = k}, &idx);
    OUT1(y ? nb_max_unpool1d(y, idx, k, 0, 0, 0) : NULL);
}
nb_status h_max_unpool2d(dcase *c) {
    int64_t k = ai(c, "kernel_size", 2), kk[2] = {k, k}, st[2] = {0, 0}, pad[2] = {0, 0};
    nb_tensor *idx = NULL, *y = nb_max_pool2d(I0, (nb_pool2d_options){.kernel = {k, k}}, &idx);
    OUT1(y ? nb_max_unpool2d(y, idx, kk, st, pad, NULL) : NULL);
}
nb_status h_max_unpool3d(dcase *c) {
    int64_t k = ai(c, "kernel_size", 2), kk[3] = {k, k, k}, st[3] = {0, 0, 0}, pad[3] = {0, 0, 0};
    nb_tensor *idx = NULL, *y = nb_max_pool3d(I0, (nb_pool3d_options){.kernel = {k, k, k}}, &idx);
    OUT1(y ? nb_max_unpool3d(y, idx, kk, st, pad, NULL) : NULL);
}
nb_status h_channel_shuffle(dcase *c) { OUT1(nb_channel_shuffle(I0, ai(c, "groups", 1))); }
nb_status h_pdist(dcase *c) { OUT1(nb_pdist(I0, ad(c, "p", 2))); }
nb_status h_gumbel_softmax(dcase *c) {
    OUT1(nb_gumbel_softmax(I0, ad(c, "tau", 1), ab(c, "hard", false), (int)ai(c, "dim", -1), NULL));
}

/* ops_einsum.c and cdist */
nb_status h_einsum(dcase *c) { OUT1(nb_einsum(as(c, "equation", ""), c->in, c->n_in)); }
nb_status h_tensordot(dcase *c) {
    int64_t da[NB_MAX_DIMS], db[NB_MAX_DIMS];
    int na = al(c, "dims_a", da, NB_MAX_DIMS), nbd = al(c, "dims_b", db, NB_MAX_DIMS);
    if (na <= 0) OUT1(nb_tensordot(I0, I1, (int)ai(c, "dims", 2), NULL, NULL));
    int a[NB_MAX_DIMS], b[NB_MAX_DIMS];
    for (int i = 0; i < na; i++) a[i] = (int)da[i], b[i] = (int)db[i];
    OUT1(nb_tensordot(I0, I1, na == nbd ? na : -1, a, b));
}
nb_status h_outer(dcase *c) { OUT1(nb_outer(I0, I1)); }
nb_status h_kron(dcase *c) { OUT1(nb_kron(I0, I1)); }
#define ADD_PRODUCT(name) \
    nb_status h_##name(dcase *c) { OUT1(nb_##name(I0, I1, I2, ad(c, "beta", 1), ad(c, "alpha", 1))); }
ADD_PRODUCT(addmm) ADD_PRODUCT(addmv) ADD_PRODUCT(baddbmm) ADD_PRODUCT(addbmm)
nb_status h_grouped_mm(dcase *c) { OUT1(nb_grouped_mm(I0, I1, c->n_in > 2 ? I2 : NULL)); }
nb_status h_trace(dcase *c) { OUT1(nb_trace(I0)); }
nb_status h_cross(dcase *c) { OUT1(nb_cross(I0, I1, (int)ai(c, "dim", -1))); }
nb_status h_cdist(dcase *c) { OUT1(nb_cdist(I0, I1, ad(c, "p", 2))); }

/* ops_fold.c */
static nb_fold_options fold_opts(dcase *c) {
    int64_t k[2], d[2], p[2], s[2];
    pair(c, "kernel_size", 1, k), pair(c, "dilation", 1, d), pair(c, "padding", 0, p), pair(c, "stride", 1, s);
    return (nb_fold_options){.kernel = {k[0], k[1]}, .dilation = {d[0], d[1]}, .padding = {p[0], p[1]}, .stride = {s[0], s[1]}};
}
nb_status h_im2col(dcase *c) { OUT1(nb_im2col(I0, fold_opts(c))); }
nb_status h_col2im(dcase *c) {
    int64_t o[2];
    pair(c, "output_size", 1, o);
    OUT1(nb_col2im(I0, o[0], o[1], fold_opts(c)));
}
nb_status h_embedding_bag(dcase *c) {
    const char *m = as(c, "mode", "mean");
    nb_embedding_bag_options o = {.mode = !strcmp(m, "sum") ? NB_BAG_SUM : !strcmp(m, "max") ? NB_BAG_MAX : NB_BAG_MEAN,
                                  .include_last_offset = ab(c, "include_last_offset", false),
                                  .per_sample_weights = c->n_in > 3 ? c->in[3] : NULL};
    int64_t pidx = ai(c, "padding_idx", INT64_MIN);
    if (pidx != INT64_MIN) o.has_padding_idx = true, o.padding_idx = pidx;
    OUT1(nb_embedding_bag(I0, I1, c->n_in > 2 ? I2 : NULL, o));
}
nb_status h_grid_sample(dcase *c) {
    const char *m = as(c, "mode", "bilinear"), *p = as(c, "padding_mode", "zeros");
    nb_grid_sample_options o = {.mode = !strcmp(m, "bilinear")  ? NB_GRID_SAMPLE_BILINEAR
                                        : !strcmp(m, "nearest") ? NB_GRID_SAMPLE_NEAREST
                                                                : NB_GRID_SAMPLE_BICUBIC,
                                .padding_mode = !strcmp(p, "border") ? NB_GRID_SAMPLE_BORDER
                                                : !strcmp(p, "reflection") ? NB_GRID_SAMPLE_REFLECTION : NB_GRID_SAMPLE_ZEROS,
                                .align_corners = ab(c, "align_corners", false)};
    OUT1(nb_grid_sample(I0, I1, o));
}
nb_status h_affine_grid(dcase *c) {
    int64_t sz[4];
    al(c, "size", sz, 4);
    OUT1(nb_affine_grid(I0, sz[0], sz[2], sz[3], ab(c, "align_corners", false)));
}
