/* op_cases_nn.c - op harness cases of the matmul, softmax, loss, conv,
 * pool, batch_norm, layer_norm, dropout, upsample, attention, rms_norm and rope families:
 * small shapes that still reach each kernel's paths (strides, padding,
 * dilation, groups, a Winograd-sized 3x3 convolution, ceil_mode, causal
 * and additive masks, dropout and multinomial from a fixed generator). */
#include <math.h>

#include "op_harness.h"

/* ---- matmul ---- */
static nb_tensor *matmul(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_matmul(x[0], x[1]); }
static nb_tensor *matmul_t(nb_tensor *const *x, const nb_op_case *c) { /* a transposed operand */
    (void)c;
    return nb_matmul(nb_transpose(x[0], -1, -2), x[1]);
}
static nb_tensor *linear(nb_tensor *const *x, const nb_op_case *c) { return nb_linear(x[0], x[1], c->n_in > 2 ? x[2] : NULL); }
static nb_tensor *bmm(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_bmm(x[0], x[1]); }

/* ---- softmax, losses ---- */
static nb_tensor *softmax(nb_tensor *const *x, const nb_op_case *c) { return nb_softmax(x[0], (int)c->p[0]); }
static nb_tensor *log_softmax(nb_tensor *const *x, const nb_op_case *c) { return nb_log_softmax(x[0], (int)c->p[0]); }
static nb_tensor *cross_entropy(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cross_entropy(x[0], x[1]); }
static nb_tensor *cross_entropy_ex(nb_tensor *const *x, const nb_op_case *c) {
    nb_cross_entropy_options o = {.ignore_index = (int64_t)c->p[0], .reduction = (nb_reduction)c->p[1]};
    return nb_cross_entropy_ex(x[0], x[1], o);
}
/* nll_loss takes any values as log-probabilities; p[2] != 0: class weights
 * (constants: PyTorch has no gradient for them either) */
static nb_tensor *nll_loss(nb_tensor *const *x, const nb_op_case *c) {
    static const double w[4] = {0.5, 1, 2, 1.5};
    nb_cross_entropy_options o = {.ignore_index = (int64_t)c->p[0], .reduction = (nb_reduction)c->p[1]};
    if (c->p[2] != 0) {
        o.weight = nb_to_dtype(nb_from_data_on(w, NB_SHAPE(4), NB_F64, nb_device_of(x[0])), nb_dtype_of(x[0]));
        if (!o.weight) return NULL;
    }
    return nb_nll_loss(x[0], x[1], o);
}
static nb_tensor *mse(nb_tensor *const *x, const nb_op_case *c) { return nb_mse_loss(x[0], x[1], (nb_reduction)c->p[0]); }
static nb_tensor *l1(nb_tensor *const *x, const nb_op_case *c) { return nb_l1_loss(x[0], x[1], (nb_reduction)c->p[0]); }
static nb_tensor *smooth_l1(nb_tensor *const *x, const nb_op_case *c) {
    return nb_smooth_l1_loss(x[0], x[1], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .beta = c->p[1]});
}
static nb_tensor *huber(nb_tensor *const *x, const nb_op_case *c) {
    return nb_huber_loss(x[0], x[1], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .delta = c->p[1]});
}
/* probabilities from N(0, 1) draws: sigmoid */
static nb_tensor *bce(nb_tensor *const *x, const nb_op_case *c) {
    return nb_binary_cross_entropy(nb_sigmoid(x[0]), nb_sigmoid(x[1]),
                                   (nb_loss_options){.reduction = (nb_reduction)c->p[0], .weight = c->n_in > 2 ? x[2] : NULL});
}
static nb_tensor *bce_logits(nb_tensor *const *x, const nb_op_case *c) {
    return nb_binary_cross_entropy_with_logits(x[0], nb_sigmoid(x[1]),
                                               (nb_loss_options){.reduction = (nb_reduction)c->p[0],
                                                                 .weight = c->n_in > 2 ? x[2] : NULL,
                                                                 .pos_weight = c->n_in > 3 ? x[3] : NULL});
}
static nb_tensor *soft_margin(nb_tensor *const *x, const nb_op_case *c) {
    return nb_soft_margin_loss(x[0], x[1], (nb_reduction)c->p[0]);
}
static nb_tensor *hinge(nb_tensor *const *x, const nb_op_case *c) {
    return nb_hinge_embedding_loss(x[0], x[1], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .margin = c->p[1]});
}
static nb_tensor *margin_ranking(nb_tensor *const *x, const nb_op_case *c) {
    return nb_margin_ranking_loss(x[0], x[1], x[2], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .margin = c->p[1]});
}
/* the losses of ops_loss_margin.c and the regression NLLs; p[0] the reduction */
static nb_tensor *poisson_nll(nb_tensor *const *x, const nb_op_case *c) {
    nb_loss_options o = {.reduction = (nb_reduction)c->p[0], .log_input = c->p[1] ? NB_FLAG_FALSE : NB_FLAG_TRUE,
                         .full = c->p[2] != 0};
    return nb_poisson_nll_loss(x[0], c->p[2] ? nb_mul_scalar(x[1], 3.0) : x[1], o); /* targets past 1: Stirling */
}
static nb_tensor *gaussian_nll(nb_tensor *const *x, const nb_op_case *c) {
    return nb_gaussian_nll_loss(x[0], x[1], x[2], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .full = c->p[1] != 0});
}
static nb_tensor *mlsm(nb_tensor *const *x, const nb_op_case *c) {
    return nb_multilabel_soft_margin_loss(x[0], nb_sigmoid(x[1]), (nb_loss_options){.reduction = (nb_reduction)c->p[0],
                                                                                    .weight = c->n_in > 2 ? x[2] : NULL});
}
static nb_tensor *multi_margin(nb_tensor *const *x, const nb_op_case *c) {
    return nb_multi_margin_loss(x[0], x[1], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .p = c->p[1],
                                                              .margin = c->p[2], .weight = c->n_in > 2 ? x[2] : NULL});
}
/* rows of targets ended by -1: {3, 0}, all four, {2, 1, 0} (then a 3 past the end, ignored) */
static nb_tensor *multilabel_margin(nb_tensor *const *x, const nb_op_case *c) {
    static const int64_t t[12] = {3, 0, -1, 1, 0, 1, 2, 3, 2, 1, 0, -1};
    nb_tensor *target = nb_from_data_on(t, NB_SHAPE(3, 4), NB_I64, nb_device_of(x[0]));
    return nb_multilabel_margin_loss(x[0], target, (nb_reduction)c->p[0]);
}
static nb_tensor *cosine_embedding(nb_tensor *const *x, const nb_op_case *c) { /* labels: the signs of x[2] */
    return nb_cosine_embedding_loss(x[0], x[1], nb_sign(x[2]), (nb_loss_options){.reduction = (nb_reduction)c->p[0],
                                                                                 .margin = c->p[1]});
}
static nb_tensor *triplet(nb_tensor *const *x, const nb_op_case *c) {
    return nb_triplet_margin_loss(x[0], x[1], x[2], (nb_loss_options){.reduction = (nb_reduction)c->p[0], .p = c->p[1],
                                                                      .swap = c->p[2] != 0});
}
static nb_tensor *cosine_distance(nb_tensor *a, nb_tensor *b, void *user) {
    (void)user;
    return nb_add_scalar(nb_neg(nb_cosine_similarity(a, b, -1, 0)), 1.0);
}
static nb_tensor *triplet_distance(nb_tensor *const *x, const nb_op_case *c) {
    return nb_triplet_margin_with_distance_loss(x[0], x[1], x[2], cosine_distance, NULL,
                                                (nb_loss_options){.reduction = (nb_reduction)c->p[0], .swap = true});
}
static nb_tensor *pairwise_distance(nb_tensor *const *x, const nb_op_case *c) {
    return nb_pairwise_distance(x[0], x[1], c->p[0], 0, c->p[1] != 0);
}
/* grouped_mm: p[0] 0: [G 2, M, K] x [2, K, N]; 1: [5, K 3] x [2, 3, 2] with rows 0..1, 2..3 (row 4 past the last
   end); 2: [2, K 5] x [5, 2] with K ranges 0..1, 2..4; 3: [2, 3, 2] x [2, N 5] with columns 0..1, 2..3 */
static nb_tensor *grouped_mm(nb_tensor *const *x, const nb_op_case *c) {
    int v = (int)c->p[0];
    nb_tensor *offs = v ? nb_from_data_on((int32_t[]){2, v == 2 ? 5 : 4}, NB_SHAPE(2), NB_I32, nb_device_of(x[0])) : NULL;
    return nb_grouped_mm(x[0], x[1], offs);
}
#define ADD_PRODUCT(name) \
    static nb_tensor *name(nb_tensor *const *x, const nb_op_case *c) { \
        (void)c; \
        return nb_##name(x[0], x[1], x[2], 0.5, 2.0); \
    }
ADD_PRODUCT(addmm)
ADD_PRODUCT(addmv)
ADD_PRODUCT(baddbmm)
ADD_PRODUCT(addbmm)
static nb_tensor *cosine_similarity(nb_tensor *const *x, const nb_op_case *c) {
    return nb_cosine_similarity(x[0], x[1], (int)c->p[0], 0);
}
/* ops_group_norm.c: p[0] groups / size / dim; weight and bias when given */
static nb_tensor *group_norm(nb_tensor *const *x, const nb_op_case *c) {
    return nb_group_norm(x[0], (int64_t)c->p[0], c->n_in > 1 ? x[1] : NULL, c->n_in > 2 ? x[2] : NULL, 0);
}
/* running statistics (constants) for p[0] = 1, used (eval) for p[1] = 1 */
static nb_tensor *instance_norm(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *rm = NULL, *rv = NULL;
    if (c->p[0] != 0) {
        int64_t C = nb_shape(x[0])[1];
        rm = nb_tensor_new(1, &C, nb_dtype_of(x[0]), nb_device_of(x[0]));
        rv = nb_tensor_new(1, &C, nb_dtype_of(x[0]), nb_device_of(x[0]));
        if (!rm || !rv || nb_fill_(rm, 0.25) || nb_fill_(rv, 1.5)) return NULL;
    }
    return nb_instance_norm(x[0], rm, rv, c->n_in > 1 ? x[1] : NULL, c->n_in > 2 ? x[2] : NULL, c->p[1] == 0, 0, 0);
}
static nb_tensor *local_response_norm(nb_tensor *const *x, const nb_op_case *c) {
    return nb_local_response_norm(x[0], (int64_t)c->p[0], c->p[1], c->p[2], c->p[3]);
}
static nb_tensor *normalize(nb_tensor *const *x, const nb_op_case *c) { return nb_normalize(x[0], c->p[1], (int)c->p[0], 0); }
/* ops_rnn.c: the parameters not among the case's inputs are constants in
 * (-0.5, 0.5) made from sin (a seed per parameter), on the input's device */
static nb_tensor *cparam(nb_tensor *like, int64_t rows, int64_t cols, double seed) {
    double v[64];
    int64_t n = rows * (cols ? cols : 1);
    for (int64_t i = 0; i < n && i < 64; i++) v[i] = 0.5 * sin(0.37 * (double)i + seed);
    int64_t shape[2] = {rows, cols};
    return nb_to_dtype(nb_from_data_on(v, cols ? 2 : 1, shape, NB_F64, nb_device_of(like)), nb_dtype_of(like));
}
/* packed sequences: a batch of 3 of lengths 2, 4, 1 (unsorted) */
static nb_tensor *packed_lengths(nb_tensor *like, const int64_t *v) {
    return nb_from_data_on(v, NB_SHAPE(3), NB_I64, nb_device_of(like));
}
static nb_tensor *pack_padded_sequence(nb_tensor *const *x, const nb_op_case *c) {
    nb_packed_sequence p;
    if (nb_pack_padded_sequence(x[0], packed_lengths(x[0], (const int64_t[]){2, 4, 1}), c->p[0] != 0, false, &p)) return NULL;
    return p.data;
}
static nb_tensor *pad_packed_sequence(nb_tensor *const *x, const nb_op_case *c) {
    nb_packed_sequence p;
    nb_tensor *y = NULL;
    if (nb_pack_padded_sequence(x[0], packed_lengths(x[0], (const int64_t[]){2, 4, 1}), c->p[0] != 0, false, &p) ||
        nb_pad_packed_sequence(&p, c->p[0] != 0, 2.0, 5, &y, NULL))
        return NULL;
    return y;
}
static nb_tensor *pad_sequence(nb_tensor *const *x, const nb_op_case *c) {
    return nb_pad_sequence(x, 2, c->p[0] != 0, 2.0, c->p[1] != 0);
}
static nb_tensor *pack_sequence(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_packed_sequence p;
    return nb_pack_sequence(x, 2, false, &p) ? NULL : p.data;
}
/* a bidirectional LSTM (I 3, H 2) over x [T 4, B 3, I 3] packed with lengths 2, 4, 3, h0 given; the output padded
   back, summed, plus the sum of h_n^2 */
static nb_tensor *rnn_packed(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *p[8], *st[2], *y = NULL;
    for (int k = 0; k < 2; k++) {
        p[4 * k] = k == 0 ? x[2] : cparam(x[0], 8, 3, 1);
        p[4 * k + 1] = cparam(x[0], 8, 2, 10 + k);
        p[4 * k + 2] = cparam(x[0], 8, 0, 20 + k);
        p[4 * k + 3] = cparam(x[0], 8, 0, 30 + k);
    }
    nb_packed_sequence in, out;
    nb_rnn_options o = {.mode = NB_RNN_LSTM, .bidirectional = true};
    if (nb_pack_padded_sequence(x[0], packed_lengths(x[0], (const int64_t[]){2, 4, 3}), false, false, &in) ||
        nb_rnn_packed(&in, x[1], NULL, p, 8, o, &out, st) != 2 || nb_pad_packed_sequence(&out, false, 0, 0, &y, NULL))
        return NULL;
    return nb_add(nb_sum(y, NULL, 0, false), nb_sum(nb_mul(st[0], st[0]), NULL, 0, false));
}
/* p[0]: 0 LSTM 1 layer (x, w_ih, w_hh, b_ih; b_hh = b_ih / 2); 1 GRU 2 layers bidirectional batch_first
 * (x [B, T, I], h0, layer 0's forward w_ih); 2 RNN tanh unbatched without bias (x, w_ih, w_hh);
 * 3 LSTM proj_size 1 (x, h0, c0, layer 0's w_hr) */
static nb_tensor *rnn(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *out[3], *p[16];
    int v = (int)c->p[0];
    if (v == 0) {
        p[0] = x[1], p[1] = x[2], p[2] = x[3], p[3] = nb_mul_scalar(x[3], 0.5);
        return nb_rnn(x[0], NULL, NULL, p, 4, (nb_rnn_options){.mode = NB_RNN_LSTM}, out) < 0 ? NULL : out[0];
    }
    if (v == 1) { /* I 3, H 2, G 3: per layer and direction w_ih [6, I_l], w_hh [6, 2], b_ih, b_hh [6] */
        for (int k = 0; k < 4; k++) {
            int64_t in_l = k < 2 ? 3 : 4;
            p[4 * k] = k == 0 ? x[2] : cparam(x[0], 6, in_l, k);
            p[4 * k + 1] = cparam(x[0], 6, 2, 10 + k);
            p[4 * k + 2] = cparam(x[0], 6, 0, 20 + k);
            p[4 * k + 3] = cparam(x[0], 6, 0, 30 + k);
        }
        nb_rnn_options o = {.mode = NB_RNN_GRU, .num_layers = 2, .bidirectional = true, .batch_first = true};
        if (nb_rnn(x[0], x[1], NULL, p, 16, o, out) < 0) return NULL;
        return nb_add(nb_sum(out[0], NULL, 0, false), nb_sum(nb_mul(out[1], out[1]), NULL, 0, false));
    }
    if (v == 2) {
        p[0] = x[1], p[1] = x[2];
        return nb_rnn(x[0], NULL, NULL, p, 2, (nb_rnn_options){.bias = NB_FLAG_FALSE}, out) < 0 ? NULL : out[0];
    }
    /* I 3, H 2, proj 1: w_ih [8, 3], w_hh [8, 1], b_ih, b_hh [8], w_hr [1, 2] */
    p[0] = cparam(x[0], 8, 3, 1), p[1] = cparam(x[0], 8, 1, 2), p[2] = cparam(x[0], 8, 0, 3);
    p[3] = cparam(x[0], 8, 0, 4), p[4] = x[3];
    if (nb_rnn(x[0], x[1], x[2], p, 5, (nb_rnn_options){.mode = NB_RNN_LSTM, .proj_size = 1}, out) < 0) return NULL;
    return nb_add(nb_sum(out[0], NULL, 0, false), nb_sum(out[2], NULL, 0, false)); /* output and c_n */
}
/* p[0]: the mode; x, hx, w_ih, then w_hh (a constant for LSTM, whose fourth input is cx) */
static nb_tensor *rnn_cell(nb_tensor *const *x, const nb_op_case *c) {
    nb_rnn_mode mode = (nb_rnn_mode)c->p[0];
    nb_tensor *out[2];
    int64_t gh = nb_shape(x[2])[0], h = nb_shape(x[1])[nb_dim(x[1]) - 1];
    nb_tensor *w_hh = mode == NB_RNN_LSTM ? cparam(x[0], gh, h, 5) : x[3];
    nb_tensor *b = cparam(x[0], gh, 0, 6);
    int n = nb_rnn_cell(x[0], x[1], mode == NB_RNN_LSTM ? x[3] : NULL, x[2], w_hh, b, nb_mul_scalar(b, -1), mode, out);
    if (n < 0) return NULL;
    return n == 2 ? nb_add(out[0], out[1]) : out[0];
}
/* ops_activation.c; p[0], p[1] the scalars */
/* the in-place forms on a clone of the input (a non-leaf with fresh storage): the gradient goes through the rebased history */
#define INPLACE_CASE(name, args) \
    static nb_tensor *name(nb_tensor *const *x, const nb_op_case *c) { \
        (void)c; \
        nb_tensor *y = nb_clone(x[0]); \
        return y && nb_##name args == NB_OK ? y : NULL; \
    }
INPLACE_CASE(relu_, (y))
INPLACE_CASE(selu_, (y))
INPLACE_CASE(leaky_relu_, (y, 0.2))
INPLACE_CASE(elu_, (y, 1.5))
INPLACE_CASE(celu_, (y, 0.7))
INPLACE_CASE(hardtanh_, (y, -1, 1))
INPLACE_CASE(threshold_, (y, 0.3, -1.5))
INPLACE_CASE(rrelu_, (y, 0.1, 0.3, false, NULL))
static nb_tensor *celu(nb_tensor *const *x, const nb_op_case *c) { return nb_celu(x[0], c->p[0]); }
static nb_tensor *softshrink(nb_tensor *const *x, const nb_op_case *c) { return nb_softshrink(x[0], c->p[0]); }
static nb_tensor *hardshrink(nb_tensor *const *x, const nb_op_case *c) { return nb_hardshrink(x[0], c->p[0]); }
static nb_tensor *threshold(nb_tensor *const *x, const nb_op_case *c) { return nb_threshold(x[0], c->p[0], c->p[1]); }
static nb_tensor *glu(nb_tensor *const *x, const nb_op_case *c) { return nb_glu(x[0], (int)c->p[0]); }
static nb_tensor *rrelu(nb_tensor *const *x, const nb_op_case *c) { return nb_rrelu(x[0], c->p[0], c->p[1], false, NULL); }
static nb_tensor *softmin(nb_tensor *const *x, const nb_op_case *c) { return nb_softmin(x[0], (int)c->p[0]); }
/* channel and alpha dropout in training from a fixed generator; pixel shuffles; lp pools; bilinear */
static nb_tensor *dropout_variant(nb_tensor *const *x, const nb_op_case *c) {
    nb_generator g = nb_generator_new(7);
    switch ((int)c->p[0]) {
    case 1: return nb_dropout1d(x[0], 0.4, true, &g);
    case 2: return nb_dropout2d(x[0], 0.4, true, &g);
    case 3: return nb_dropout3d(x[0], 0.4, true, &g);
    case 4: return nb_alpha_dropout(x[0], 0.3, true, &g);
    default: return nb_feature_alpha_dropout(x[0], 0.3, true, &g);
    }
}
static nb_tensor *pixel_shuffle(nb_tensor *const *x, const nb_op_case *c) {
    return c->p[1] ? nb_pixel_unshuffle(x[0], (int64_t)c->p[0]) : nb_pixel_shuffle(x[0], (int64_t)c->p[0]);
}
static nb_tensor *lp_pool(nb_tensor *const *x, const nb_op_case *c) {
    if (c->p[1]) return nb_lp_pool1d(x[0], c->p[0], (nb_pool1d_options){.kernel = 3, .stride = 2});
    return nb_lp_pool2d(x[0], c->p[0], (nb_pool2d_options){.kernel = {2, 3}, .stride = {1, 2}, .ceil_mode = true});
}
static nb_tensor *bilinear(nb_tensor *const *x, const nb_op_case *c) { return nb_bilinear(x[0], x[1], x[2], c->n_in > 3 ? x[3] : NULL); }
/* lp_pool3d, adaptive max pools, max_unpool after max_pool, channel_shuffle, pdist, gumbel_softmax */
static nb_tensor *lp_pool3d(nb_tensor *const *x, const nb_op_case *c) {
    return nb_lp_pool3d(x[0], c->p[0], (nb_pool3d_options){.kernel = {2, 2, 1}, .stride = {1, 2, 1}});
}
static nb_tensor *adaptive_max_pool1d(nb_tensor *const *x, const nb_op_case *c) {
    return nb_adaptive_max_pool1d(x[0], (int64_t)c->p[0], NULL);
}
static nb_tensor *adaptive_max_pool3d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_adaptive_max_pool3d(x[0], 2, 3, 2);
}
/* indices as max_pool's with kernel 2 would give: in window i, position 2 i or 2 i + 1 per dim (chosen by i) */
static nb_tensor *max_unpool(nb_tensor *const *x, const nb_op_case *c) {
    int dims = (int)c->p[0];
    const int64_t *in = nb_shape(x[0]);
    int lead = nb_dim(x[0]) - dims;
    int64_t n = nb_numel(x[0]), idx[64], k2[2] = {2, 2}, k3[3] = {2, 2, 2}, z[3] = {0, 0, 0};
    for (int64_t e = 0; e < n && e < 64; e++) {
        int64_t rem = e, pos = 0, stride_out = 1, coord[3];
        for (int d = dims - 1; d >= 0; d--) coord[d] = rem % in[lead + d], rem /= in[lead + d];
        for (int d = dims - 1; d >= 0; d--) {
            pos += (2 * coord[d] + (coord[d] + d) % 2) * stride_out;
            stride_out *= 2 * in[lead + d];
        }
        idx[e] = pos;
    }
    nb_tensor *t = nb_from_data_on(idx, nb_dim(x[0]), in, NB_I64, nb_device_of(x[0]));
    if (dims == 1) return nb_max_unpool1d(x[0], t, 2, 0, 0, 0);
    if (dims == 2) return nb_max_unpool2d(x[0], t, k2, z, z, NULL);
    return nb_max_unpool3d(x[0], t, k3, z, z, NULL);
}
static nb_tensor *channel_shuffle(nb_tensor *const *x, const nb_op_case *c) { return nb_channel_shuffle(x[0], (int64_t)c->p[0]); }
static nb_tensor *pdist(nb_tensor *const *x, const nb_op_case *c) { return nb_pdist(x[0], c->p[0]); }
static nb_tensor *gumbel_softmax(nb_tensor *const *x, const nb_op_case *c) {
    nb_generator g = nb_generator_new(3);
    return nb_gumbel_softmax(x[0], 0.7, c->p[0] != 0, -1, &g);
}
/* ops_einsum.c, cdist */
static nb_tensor *einsum3(nb_tensor *const *x, const nb_op_case *c) {
    static const char *eqs[] = {"bij,bjk->bik", "ii->i", "...ij,...jk", "ijk,kl,lm->im", "bn,anm,bm->ba"};
    return nb_einsum(eqs[(int)c->p[0]], x, c->n_in);
}
static nb_tensor *tensordot(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_tensordot(x[0], x[1], 2, (int[]){0, 2}, (int[]){2, 0});
}
static nb_tensor *cross(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cross(x[0], x[1], -1); }
static nb_tensor *cdist(nb_tensor *const *x, const nb_op_case *c) { return nb_cdist(x[0], x[1], c->p[0]); }
/* ops_fold.c */
static nb_tensor *im2col(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_im2col(x[0], (nb_fold_options){.kernel = {2, 3}, .dilation = {2, 1}, .padding = {1, 0}, .stride = {1, 2}});
}
static nb_tensor *col2im(nb_tensor *const *x, const nb_op_case *c) {
    (void)c; /* [N, C 2 3, L] back onto 5 x 4 (kernel (2, 3), stride (1, 2), padding (0, 1): L = 4 x 2) */
    return nb_col2im(x[0], 5, 4, (nb_fold_options){.kernel = {2, 3}, .padding = {0, 1}, .stride = {1, 2}});
}
static nb_tensor *embedding_bag(nb_tensor *const *x, const nb_op_case *c) {
    static const int64_t idx[8] = {1, 2, 4, 5, 4, 3, 2, 0}, off[4] = {0, 2, 2, 5};
    nb_device dev = nb_device_of(x[0]);
    nb_embedding_bag_options o = {.mode = (nb_embedding_bag_mode)c->p[0], .has_padding_idx = c->p[1] != 0, .padding_idx = 4};
    return nb_embedding_bag(nb_from_data_on(idx, NB_SHAPE(8), NB_I64, dev), x[0], nb_from_data_on(off, NB_SHAPE(4), NB_I64, dev), o);
}
/* ctc_loss of log_softmax(x) [5, 2, 4] (written as x - logsumexp(x): the softmax slots are not ctc_loss's): targets (1, 1, 3) (a repeat, which needs a blank between) and (2), inputs
   of 5 and 4 steps; p[0] the reduction */
static nb_tensor *ctc_loss(nb_tensor *const *x, const nb_op_case *c) {
    nb_device dev = nb_device_of(x[0]);
    nb_tensor *tg = nb_from_data_on((int64_t[]){1, 1, 3, 2, 0, 0}, NB_SHAPE(2, 3), NB_I64, dev);
    nb_tensor *il = nb_from_data_on((int64_t[]){5, 4}, NB_SHAPE(2), NB_I64, dev);
    nb_tensor *tl = nb_from_data_on((int64_t[]){3, 1}, NB_SHAPE(2), NB_I64, dev);
    nb_tensor *lp = nb_sub(x[0], nb_logsumexp(x[0], (const int[]){2}, 1, true));
    return nb_ctc_loss(lp, tg, il, tl, (nb_ctc_loss_options){.reduction = (nb_reduction)c->p[0]});
}
/* fixed samples on x's device (the harness compares devices: a draw would differ) */
static nb_tensor *fractional_max_pool(nb_tensor *const *x, const nb_op_case *c) {
    int d = (int)c->p[0];
    double sv[12] = {0.1, 0.7, 0.45, 0.9, 0.33, 0.05, 0.6, 0.25, 0.8, 0.5, 0.15, 0.95};
    nb_tensor *smp = nb_to_dtype(nb_from_data_on(sv, NB_SHAPE(2, 2, d), NB_F64, nb_device_of(x[0])), nb_dtype_of(x[0]));
    nb_fractional_max_pool_options o = {.kernel_size = {2, 2, 2}, .output_size = {3, 2, 2}, .random_samples = smp};
    return d == 2 ? nb_fractional_max_pool2d(x[0], o, NULL) : nb_fractional_max_pool3d(x[0], o, NULL);
}
static nb_tensor *grid_sample(nb_tensor *const *x, const nb_op_case *c) {
    nb_grid_sample_options o = {.mode = (nb_grid_sample_mode)c->p[0], .padding_mode = (nb_grid_sample_padding)c->p[1],
                                .align_corners = c->p[2] != 0};
    return nb_grid_sample(x[0], nb_mul_scalar(x[1], 1.2), o); /* some samples outside [-1, 1] */
}
static nb_tensor *affine_grid(nb_tensor *const *x, const nb_op_case *c) { return nb_affine_grid(x[0], 2, 3, 4, c->p[0] != 0); }
/* any input (log-probabilities need not be normalized for the formula); a
 * positive target, or any with log_target */
static nb_tensor *kl_div(nb_tensor *const *x, const nb_op_case *c) {
    return nb_kl_div(x[0], x[1],
                     (nb_loss_options){.reduction = (nb_reduction)c->p[0], .log_target = c->p[1] != 0,
                                       .batchmean = c->p[2] != 0});
}

/* ---- convolution, pooling ---- */
static nb_tensor *conv2d(nb_tensor *const *x, const nb_op_case *c) {
    nb_conv2d_options o = {.stride = {(int64_t)c->p[0], (int64_t)c->p[0]}, .padding = {(int64_t)c->p[1], 0},
                           .dilation = {(int64_t)c->p[2], 1}, .groups = (int64_t)c->p[3]};
    return nb_conv2d(x[0], x[1], c->n_in > 2 ? x[2] : NULL, o);
}
static nb_tensor *conv1d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_conv1d(x[0], x[1], x[2], (nb_conv1d_options){.stride = 2, .padding = 1});
}
static nb_tensor *conv_t2d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_conv_transpose2d_options o = {.stride = {2, 1}, .padding = {1, 0}, .output_padding = {1, 0}, .groups = 1};
    return nb_conv_transpose2d(x[0], x[1], x[2], o);
}
static nb_tensor *conv_t1d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_conv_transpose1d_options o = {.stride = 2, .padding = 1, .output_padding = 1};
    return nb_conv_transpose1d(x[0], x[1], x[2], o);
}
static nb_tensor *conv3d(nb_tensor *const *x, const nb_op_case *c) {
    nb_conv3d_options o = {.stride = {(int64_t)c->p[0], 1, (int64_t)c->p[0]}, .padding = {(int64_t)c->p[1], 0, 1},
                           .dilation = {(int64_t)c->p[2], 1, 1}, .groups = (int64_t)c->p[3]};
    return nb_conv3d(x[0], x[1], c->n_in > 2 ? x[2] : NULL, o);
}
static nb_tensor *conv_t3d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_conv_transpose3d_options o = {.stride = {2, 1, 2}, .padding = {1, 0, 0}, .output_padding = {1, 0, 0},
                                     .dilation = {1, 1, 2}};
    return nb_conv_transpose3d(x[0], x[1], x[2], o);
}
/* offsets scaled to about +-1.5 pixels, mask through a sigmoid: inputs x, offset, weight, mask (the
 * harness takes 4; the bias is covered by tests/torch_diff and test_ops_conv.c) */
static nb_tensor *deform(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_deform_conv2d_options o = {.stride = {1, 2}, .padding = {1, 0}};
    return nb_deform_conv2d(x[0], nb_mul_scalar(x[1], 0.7), x[2], NULL, nb_sigmoid(x[3]), o);
}
static nb_pool3d_options pool3_opts(const nb_op_case *c) {
    return (nb_pool3d_options){.kernel = {(int64_t)c->p[0], 2, (int64_t)c->p[0]},
                               .stride = {(int64_t)c->p[1], 1, (int64_t)c->p[1]}, .padding = {(int64_t)c->p[2], 1, 0},
                               .ceil_mode = c->p[3] != 0};
}
static nb_tensor *max_pool3d(nb_tensor *const *x, const nb_op_case *c) { return nb_max_pool3d(x[0], pool3_opts(c), NULL); }
static nb_tensor *avg_pool3d(nb_tensor *const *x, const nb_op_case *c) { return nb_avg_pool3d(x[0], pool3_opts(c)); }
static nb_tensor *aap3d(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_adaptive_avg_pool3d(x[0], 2, 3, 2); }
static nb_pool2d_options pool_opts(const nb_op_case *c) {
    return (nb_pool2d_options){.kernel = {(int64_t)c->p[0], (int64_t)c->p[0]}, .stride = {(int64_t)c->p[1], (int64_t)c->p[1]},
                               .padding = {(int64_t)c->p[2], (int64_t)c->p[2]}, .ceil_mode = c->p[3] != 0};
}
static nb_tensor *max_pool2d(nb_tensor *const *x, const nb_op_case *c) { return nb_max_pool2d(x[0], pool_opts(c), NULL); }
static nb_tensor *avg_pool2d(nb_tensor *const *x, const nb_op_case *c) { return nb_avg_pool2d(x[0], pool_opts(c)); }
static nb_tensor *max_pool1d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_max_pool1d(x[0], (nb_pool1d_options){.kernel = 3, .stride = 2, .padding = 1}, NULL);
}
static nb_tensor *avg_pool1d(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_avg_pool1d(x[0], (nb_pool1d_options){.kernel = 2, .stride = 1, .count_include_pad_false = true, .padding = 1});
}
static nb_tensor *aap2d(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_adaptive_avg_pool2d(x[0], 2, 3); }
static nb_tensor *aap1d(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_adaptive_avg_pool1d(x[0], 3); }
static nb_tensor *amp2d(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_adaptive_max_pool2d(x[0], 2, 2, NULL); }

/* ---- normalization, dropout, resizing ---- */
static nb_tensor *batch_norm(nb_tensor *const *x, const nb_op_case *c) {
    bool training = c->p[0] != 0;
    nb_device d = nb_device_of(x[0]);
    nb_dtype dt = nb_dtype_of(x[0]);
    nb_tensor *rm = nb_full_on(NB_SHAPE(3), 0.1, dt, d), *rv = nb_full_on(NB_SHAPE(3), 1.3, dt, d);
    return nb_batch_norm(x[0], rm, rv, x[1], x[2], training, 0.1, 1e-5);
}
static nb_tensor *layer_norm(nb_tensor *const *x, const nb_op_case *c) {
    int n = (int)c->p[0];
    const int64_t *shape = nb_shape(x[0]) + nb_dim(x[0]) - n;
    return nb_layer_norm(x[0], n, shape, c->n_in > 1 ? x[1] : NULL, c->n_in > 2 ? x[2] : NULL, 1e-5);
}
static nb_tensor *dropout(nb_tensor *const *x, const nb_op_case *c) {
    nb_generator g = nb_generator_new(7);
    return nb_dropout(x[0], c->p[0], true, &g);
}
/* the draws are float64 whatever p's dtype, so every dtype gives the same samples */
static nb_tensor *multinomial(nb_tensor *const *x, const nb_op_case *c) {
    nb_generator g = nb_generator_new(5);
    return nb_multinomial(x[0], 3, c->p[0] != 0, &g);
}
static nb_tensor *interpolate(nb_tensor *const *x, const nb_op_case *c) {
    return nb_interpolate(x[0], 5, 3, (nb_interpolate_mode)c->p[0], c->p[1] != 0);
}

/* ---- attention: q [2, 3, 4], k [2, 5, 4], v [2, 5, 3] ---- */
static nb_tensor *sdpa(nb_tensor *const *x, const nb_op_case *c) {
    nb_generator g = nb_generator_new(11);
    nb_sdpa_options o = {.is_causal = c->p[0] != 0, .dropout_p = c->p[1], .gen = &g,
                         .attn_mask = c->n_in > 3 ? x[3] : NULL};
    return nb_scaled_dot_product_attention(x[0], x[1], x[2], o);
}

#define QKV IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 5, 4), IN(K_REAL, 2, 5, 3)
/* a bool mask (true = attend) that leaves every row a key: j <= i + 1 */
static nb_tensor *sdpa_bool_mask(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *mask = nb_gt_scalar(nb_tril(nb_full_on(NB_SHAPE(3, 5), 1.0, NB_F32, nb_device_of(x[0])), 1), 0.5);
    return nb_scaled_dot_product_attention(x[0], x[1], x[2], (nb_sdpa_options){.attn_mask = mask});
}
/* grouped-query heads: q [2, 4, 3, 4] over k [2, 2, 5, 4], v [2, 2, 5, 3] */
#define QKV_GQA IN(K_REAL, 2, 4, 3, 4), IN(K_REAL, 2, 2, 5, 4), IN(K_REAL, 2, 2, 5, 3)
static nb_tensor *sdpa_gqa(nb_tensor *const *x, const nb_op_case *c) {
    return nb_scaled_dot_product_attention(x[0], x[1], x[2], (nb_sdpa_options){.is_causal = c->p[0] != 0, .enable_gqa = true});
}

/* ---- decoders: rms_norm, apply_rotary_pos_emb ---- */
static nb_tensor *rms_norm(nb_tensor *const *x, const nb_op_case *c) {
    int n = (int)c->p[0];
    return nb_rms_norm(x[0], n, nb_shape(x[0]) + nb_dim(x[0]) - n, c->n_in > 1 ? x[1] : NULL, c->p[1]);
}
/* y + sum: both outputs' values and gradients */
static nb_tensor *add_rms_norm(nb_tensor *const *x, const nb_op_case *c) {
    int n = (int)c->p[0];
    nb_tensor *sum = NULL;
    nb_tensor *y = nb_add_rms_norm(x[0], x[1], n, nb_shape(x[0]) + nb_dim(x[0]) - n, c->n_in > 2 ? x[2] : NULL, c->p[1],
                                   &sum);
    return y ? nb_add(y, sum) : NULL;
}
static nb_tensor *rope(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *in = c->p[0] != 0 ? nb_transpose(x[0], 1, 2) : x[0]; /* [B, T, H, D] seen as [B, H, T, D] */
    return nb_apply_rotary_pos_emb(in, x[1], x[2]);
}

static const nb_op_case cases[] = {
    {.op = NB_OP_MATMUL, .label = "matmul [3, 4] @ [4, 2]", .fn = matmul, .n_in = 2, .in = {IN(K_REAL, 3, 4), IN(K_REAL, 4, 2)}},
    {.op = NB_OP_MATMUL, .label = "matmul batched, broadcast", .fn = matmul, .n_in = 2,
     .in = {IN(K_REAL, 2, 1, 3, 4), IN(K_REAL, 3, 4, 2)}},
    {.op = NB_OP_MATMUL, .label = "matmul of a transposed operand", .fn = matmul_t, .n_in = 2,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 2)}},
    {.op = NB_OP_MATMUL, .label = "matmul vector @ matrix", .fn = matmul, .n_in = 2, .in = {IN(K_REAL, 4), IN(K_REAL, 4, 3)}},
    {.op = NB_OP_LINEAR, .label = "linear with bias", .fn = linear, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 5, 4), IN(K_REAL, 5)}},
    {.op = NB_OP_LINEAR, .label = "linear without bias", .fn = linear, .n_in = 2, .in = {IN(K_REAL, 3, 4), IN(K_REAL, 2, 4)}},
    {.op = NB_OP_BMM, .label = "bmm", .fn = bmm, .n_in = 2, .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 4, 2)}},
    {.op = NB_OP_GROUPED_MM, .label = "grouped_mm 3-d x 3-d", .fn = grouped_mm, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 4, 2)}, .p = {0}},
    {.op = NB_OP_GROUPED_MM, .label = "grouped_mm 2-d x 3-d, rows by offs", .fn = grouped_mm, .n_in = 2,
     .in = {IN(K_REAL, 5, 3), IN(K_REAL, 2, 3, 2)}, .p = {1}},
    {.op = NB_OP_GROUPED_MM, .label = "grouped_mm 2-d x 2-d, K by offs", .fn = grouped_mm, .n_in = 2,
     .in = {IN(K_REAL, 2, 5), IN(K_REAL, 5, 2)}, .p = {2}},
    {.op = NB_OP_GROUPED_MM, .label = "grouped_mm 3-d x 2-d, columns by offs", .fn = grouped_mm, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 2), IN(K_REAL, 2, 5)}, .p = {3}},
    {.op = NB_OP_ADDMM, .label = "addmm beta 0.5 alpha 2, broadcast input", .fn = addmm, .n_in = 3,
     .in = {IN(K_REAL, 3), IN(K_REAL, 2, 4), IN(K_REAL, 4, 3)}},
    {.op = NB_OP_ADDMV, .label = "addmv beta 0.5 alpha 2", .fn = addmv, .n_in = 3,
     .in = {IN(K_REAL, 2), IN(K_REAL, 2, 4), IN(K_REAL, 4)}},
    {.op = NB_OP_BADDBMM, .label = "baddbmm beta 0.5 alpha 2", .fn = baddbmm, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 2), IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 4, 2)}},
    {.op = NB_OP_ADDBMM, .label = "addbmm beta 0.5 alpha 2", .fn = addbmm, .n_in = 3,
     .in = {IN(K_REAL, 3, 2), IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 4, 2)}},
    {.op = NB_OP_SOFTMAX, .label = "softmax dim -1", .fn = softmax, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {-1}},
    {.op = NB_OP_SOFTMAX, .label = "softmax dim 1", .fn = softmax, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {1}},
    {.op = NB_OP_LOG_SOFTMAX, .label = "log_softmax dim -1", .fn = log_softmax, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {-1}},
    {.op = NB_OP_LOG_SOFTMAX, .label = "log_softmax dim 0", .fn = log_softmax, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {0}},
    {.op = NB_OP_CROSS_ENTROPY, .label = "cross_entropy mean", .fn = cross_entropy, .n_in = 2, .in = {IN(K_REAL, 6, 5), IDX(0, 5, 6)}},
    {.op = NB_OP_CROSS_ENTROPY_EX, .label = "cross_entropy ignore_index 2, sum", .fn = cross_entropy_ex, .n_in = 2,
     .in = {IN(K_REAL, 6, 5), IDX(0, 5, 6)}, .p = {2, NB_REDUCTION_SUM}},
    {.op = NB_OP_CROSS_ENTROPY_EX, .label = "cross_entropy ignore_index 1, none", .fn = cross_entropy_ex, .n_in = 2,
     .in = {IN(K_REAL, 6, 5), IDX(0, 5, 6)}, .p = {1, NB_REDUCTION_NONE}},
    {.op = NB_OP_NLL_LOSS, .label = "nll_loss mean", .fn = nll_loss, .n_in = 2, .in = {IN(K_REAL, 6, 5), IDX(0, 5, 6)},
     .p = {-100, NB_REDUCTION_MEAN}},
    {.op = NB_OP_NLL_LOSS, .label = "nll_loss [N, C, d] class weights, ignore_index 1, none", .fn = nll_loss,
     .n_in = 2, .in = {IN(K_REAL, 3, 4, 2), IDX(0, 4, 3, 2)}, .p = {1, NB_REDUCTION_NONE, 1}},
    {.op = NB_OP_MSE_LOSS, .label = "mse_loss mean", .fn = mse, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)},
     .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_MSE_LOSS, .label = "mse_loss none, broadcast", .fn = mse, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 3)},
     .p = {NB_REDUCTION_NONE}},
    {.op = NB_OP_L1_LOSS, .label = "l1_loss mean", .fn = l1, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)},
     .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_L1_LOSS, .label = "l1_loss none, broadcast", .fn = l1, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 3)},
     .p = {NB_REDUCTION_NONE}},
    {.op = NB_OP_SMOOTH_L1_LOSS, .label = "smooth_l1_loss mean, beta 0.8", .fn = smooth_l1, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_MEAN, 0.8}},
    {.op = NB_OP_SMOOTH_L1_LOSS, .label = "smooth_l1_loss sum, beta 1 (default)", .fn = smooth_l1, .n_in = 2,
     .in = {IN(K_REAL, 3, 2), IN(K_REAL, 2)}, .p = {NB_REDUCTION_SUM, 0}},
    {.op = NB_OP_HUBER_LOSS, .label = "huber_loss none, delta 0.6", .fn = huber, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_NONE, 0.6}},
    {.op = NB_OP_BINARY_CROSS_ENTROPY, .label = "binary_cross_entropy mean", .fn = bce, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_BINARY_CROSS_ENTROPY, .label = "binary_cross_entropy none, weight", .fn = bce, .n_in = 3,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3), IN(K_POS, 3)}, .p = {NB_REDUCTION_NONE}},
    {.op = NB_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, .label = "binary_cross_entropy_with_logits mean", .fn = bce_logits,
     .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, .label = "binary_cross_entropy_with_logits sum, weight, pos_weight",
     .fn = bce_logits, .n_in = 4, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3), IN(K_POS, 2, 3), IN(K_POS, 3)},
     .p = {NB_REDUCTION_SUM}},
    {.op = NB_OP_KL_DIV, .label = "kl_div batchmean", .fn = kl_div, .n_in = 2, .in = {IN(K_REAL, 3, 4), IN(K_POS, 3, 4)},
     .p = {NB_REDUCTION_MEAN, 0, 1}},
    {.op = NB_OP_KL_DIV, .label = "kl_div none, log_target", .fn = kl_div, .n_in = 2,
     .in = {IN(K_REAL, 3, 4), IN(K_REAL, 3, 4)}, .p = {NB_REDUCTION_NONE, 1, 0}},
    {.op = NB_OP_SOFT_MARGIN_LOSS, .label = "soft_margin_loss mean", .fn = soft_margin, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_HINGE_EMBEDDING_LOSS, .label = "hinge_embedding_loss none, margin 1.5", .fn = hinge, .n_in = 2,
     .in = {IN(K_UNIT, 2, 3), IN(K_REAL, 2, 3)}, .p = {NB_REDUCTION_NONE, 1.5}},
    {.op = NB_OP_MARGIN_RANKING_LOSS, .label = "margin_ranking_loss sum, margin 0.2", .fn = margin_ranking, .n_in = 3,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3), IN(K_AWAY0, 2, 3)}, .p = {NB_REDUCTION_SUM, 0.2}},
    {.op = NB_OP_POISSON_NLL_LOSS, .label = "poisson_nll_loss mean", .fn = poisson_nll, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_POS, 2, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_POISSON_NLL_LOSS, .label = "poisson_nll_loss none, rate input, full", .fn = poisson_nll, .n_in = 2,
     .in = {IN(K_POS, 2, 3), IN(K_POS, 2, 3)}, .p = {NB_REDUCTION_NONE, 1, 1}},
    {.op = NB_OP_GAUSSIAN_NLL_LOSS, .label = "gaussian_nll_loss mean", .fn = gaussian_nll, .n_in = 3,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3), IN(K_POS, 2, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_GAUSSIAN_NLL_LOSS, .label = "gaussian_nll_loss sum, a var per row, full", .fn = gaussian_nll,
     .n_in = 3, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3), IN(K_POS, 2)}, .p = {NB_REDUCTION_SUM, 1}},
    {.op = NB_OP_MULTILABEL_SOFT_MARGIN_LOSS, .label = "multilabel_soft_margin_loss mean", .fn = mlsm, .n_in = 2,
     .in = {IN(K_REAL, 3, 4), IN(K_REAL, 3, 4)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_MULTILABEL_SOFT_MARGIN_LOSS, .label = "multilabel_soft_margin_loss none, weight", .fn = mlsm,
     .n_in = 3, .in = {IN(K_REAL, 3, 4), IN(K_REAL, 3, 4), IN(K_POS, 4)}, .p = {NB_REDUCTION_NONE}},
    {.op = NB_OP_MULTI_MARGIN_LOSS, .label = "multi_margin_loss mean", .fn = multi_margin, .n_in = 2,
     .in = {IN(K_REAL, 4, 5), IDX(0, 5, 4)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_MULTI_MARGIN_LOSS, .label = "multi_margin_loss none, p 2, margin 0.5, weight", .fn = multi_margin,
     .n_in = 3, .in = {IN(K_REAL, 4, 5), IDX(0, 5, 4), IN(K_POS, 5)}, .p = {NB_REDUCTION_NONE, 2, 0.5}},
    {.op = NB_OP_MULTILABEL_MARGIN_LOSS, .label = "multilabel_margin_loss sum", .fn = multilabel_margin, .n_in = 1,
     .in = {IN(K_REAL, 3, 4)}, .p = {NB_REDUCTION_SUM}},
    {.op = NB_OP_COSINE_EMBEDDING_LOSS, .label = "cosine_embedding_loss mean, margin 0.1", .fn = cosine_embedding,
     .n_in = 3, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3), IN(K_AWAY0, 4)}, .p = {NB_REDUCTION_MEAN, 0.1}},
    {.op = NB_OP_TRIPLET_MARGIN_LOSS, .label = "triplet_margin_loss mean", .fn = triplet, .n_in = 3,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_TRIPLET_MARGIN_LOSS, .label = "triplet_margin_loss none, p 1, swap", .fn = triplet, .n_in = 3,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)}, .p = {NB_REDUCTION_NONE, 1, 1}},
    {.op = NB_OP_TRIPLET_MARGIN_WITH_DISTANCE_LOSS, .label = "triplet_margin_with_distance_loss cosine, swap",
     .fn = triplet_distance, .n_in = 3, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)},
     .p = {NB_REDUCTION_SUM}},
    {.op = NB_OP_PAIRWISE_DISTANCE, .label = "pairwise_distance p 2", .fn = pairwise_distance, .n_in = 2,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)}, .p = {2}},
    {.op = NB_OP_PAIRWISE_DISTANCE, .label = "pairwise_distance p 3, broadcast, keepdim", .fn = pairwise_distance,
     .n_in = 2, .in = {IN(K_REAL, 2, 4, 3), IN(K_REAL, 3)}, .p = {3, 1}},
    {.op = NB_OP_COSINE_SIMILARITY, .label = "cosine_similarity dim 1", .fn = cosine_similarity, .n_in = 2,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)}, .p = {1}},
    {.op = NB_OP_COSINE_SIMILARITY, .label = "cosine_similarity dim 0, broadcast", .fn = cosine_similarity, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 3, 1)}, .p = {0}},
    {.op = NB_OP_GROUP_NORM, .label = "group_norm 2 groups, affine", .fn = group_norm, .n_in = 3,
     .in = {IN(K_REAL, 2, 4, 3), IN(K_REAL, 4), IN(K_REAL, 4)}, .tol = 1e-4, .p = {2}},
    {.op = NB_OP_GROUP_NORM, .label = "group_norm 1 group, 4-d", .fn = group_norm, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 2, 3)}, .tol = 1e-4, .p = {1}},
    {.op = NB_OP_INSTANCE_NORM, .label = "instance_norm affine, running stats updated", .fn = instance_norm,
     .n_in = 3, .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 3), IN(K_REAL, 3)}, .tol = 1e-4, .p = {1, 0}},
    {.op = NB_OP_INSTANCE_NORM, .label = "instance_norm eval (running stats)", .fn = instance_norm, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 2, 2)}, .p = {1, 1}},
    {.op = NB_OP_LOCAL_RESPONSE_NORM, .label = "local_response_norm size 3, alpha 0.5, beta 0.75, k 2",
     .fn = local_response_norm, .n_in = 1, .in = {IN(K_REAL, 2, 4, 3)}, .p = {3, 0.5, 0.75, 2}},
    {.op = NB_OP_NORMALIZE, .label = "normalize dim 1", .fn = normalize, .n_in = 1, .in = {IN(K_REAL, 3, 4)},
     .p = {1, 2}},
    {.op = NB_OP_NORMALIZE, .label = "normalize dim -1, p 3", .fn = normalize, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)},
     .p = {-1, 3}},
    {.op = NB_OP_PACK_PADDED_SEQUENCE, .label = "pack_padded_sequence unsorted", .fn = pack_padded_sequence, .n_in = 1,
     .in = {IN(K_REAL, 4, 3, 2)}, .p = {0}},
    {.op = NB_OP_PACK_PADDED_SEQUENCE, .label = "pack_padded_sequence batch_first", .fn = pack_padded_sequence,
     .n_in = 1, .in = {IN(K_REAL, 3, 4, 2)}, .p = {1}},
    {.op = NB_OP_PAD_PACKED_SEQUENCE, .label = "pad_packed_sequence total_length 5", .fn = pad_packed_sequence,
     .n_in = 1, .in = {IN(K_REAL, 4, 3, 2)}, .p = {0}},
    {.op = NB_OP_PAD_SEQUENCE, .label = "pad_sequence", .fn = pad_sequence, .n_in = 2,
     .in = {IN(K_REAL, 3, 2), IN(K_REAL, 1, 2)}, .p = {0, 0}},
    {.op = NB_OP_PAD_SEQUENCE, .label = "pad_sequence batch_first, left", .fn = pad_sequence, .n_in = 2,
     .in = {IN(K_REAL, 3, 2), IN(K_REAL, 4, 2)}, .p = {1, 1}},
    {.op = NB_OP_PACK_SEQUENCE, .label = "pack_sequence", .fn = pack_sequence, .n_in = 2,
     .in = {IN(K_REAL, 2, 2), IN(K_REAL, 3, 2)}},
    {.op = NB_OP_RNN_PACKED, .label = "rnn_packed LSTM bidirectional, h0", .fn = rnn_packed, .n_in = 3,
     .in = {IN(K_REAL, 4, 3, 3), IN(K_UNIT, 2, 3, 2), IN(K_UNIT, 8, 3)}, .tol = 1e-4},
    {.op = NB_OP_RNN, .label = "rnn LSTM", .fn = rnn, .n_in = 4,
     .in = {IN(K_REAL, 3, 2, 3), IN(K_UNIT, 8, 3), IN(K_UNIT, 8, 2), IN(K_UNIT, 8)}, .tol = 1e-4, .p = {0}},
    {.op = NB_OP_RNN, .label = "rnn GRU 2 layers, bidirectional, batch_first, h0", .fn = rnn, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 3), IN(K_UNIT, 4, 2, 2), IN(K_UNIT, 6, 3)}, .tol = 1e-4, .p = {1}},
    {.op = NB_OP_RNN, .label = "rnn tanh unbatched, no bias", .fn = rnn, .n_in = 3,
     .in = {IN(K_REAL, 3, 3), IN(K_UNIT, 2, 3), IN(K_UNIT, 2, 2)}, .tol = 1e-4, .p = {2}},
    {.op = NB_OP_RNN, .label = "rnn LSTM proj_size 1, h0, c0", .fn = rnn, .n_in = 4,
     .in = {IN(K_REAL, 3, 2, 3), IN(K_UNIT, 1, 2, 1), IN(K_UNIT, 1, 2, 2), IN(K_UNIT, 1, 2)}, .tol = 1e-4, .p = {3}},
    {.op = NB_OP_RNN_CELL, .label = "rnn_cell LSTM", .fn = rnn_cell, .n_in = 4,
     .in = {IN(K_REAL, 2, 3), IN(K_UNIT, 2, 2), IN(K_UNIT, 8, 3), IN(K_UNIT, 2, 2)}, .tol = 1e-4, .p = {NB_RNN_LSTM}},
    {.op = NB_OP_RNN_CELL, .label = "rnn_cell GRU", .fn = rnn_cell, .n_in = 4,
     .in = {IN(K_REAL, 2, 3), IN(K_UNIT, 2, 2), IN(K_UNIT, 6, 3), IN(K_UNIT, 6, 2)}, .tol = 1e-4, .p = {NB_RNN_GRU}},
    {.op = NB_OP_RNN_CELL, .label = "rnn_cell ReLU unbatched", .fn = rnn_cell, .n_in = 4,
     .in = {IN(K_REAL, 3), IN(K_UNIT, 2), IN(K_UNIT, 2, 3), IN(K_UNIT, 2, 2)}, .tol = 1e-4, .p = {NB_RNN_RELU}},
    /* away from the kinks at 0 and +-lambda, the threshold */
    {.op = NB_OP_RELU_, .label = "relu_ of a clone", .fn = relu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_SELU_, .label = "selu_ of a clone", .fn = selu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_LEAKY_RELU_, .label = "leaky_relu_ 0.2 of a clone", .fn = leaky_relu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_ELU_, .label = "elu_ 1.5 of a clone", .fn = elu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_CELU_, .label = "celu_ 0.7 of a clone", .fn = celu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_HARDTANH_, .label = "hardtanh_ [-1, 1] of a clone", .fn = hardtanh_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_THRESHOLD_, .label = "threshold_ 0.3 -1.5 of a clone", .fn = threshold_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_RRELU_, .label = "rrelu_ eval of a clone", .fn = rrelu_, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_CELU, .label = "celu alpha 0.7", .fn = celu, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}, .p = {0.7}},
    {.op = NB_OP_SOFTSIGN, .label = "softsign", .f1 = nb_softsign, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}},
    {.op = NB_OP_SOFTSHRINK, .label = "softshrink 0.25", .fn = softshrink, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)},
     .p = {0.25}},
    {.op = NB_OP_HARDSHRINK, .label = "hardshrink 0.25", .fn = hardshrink, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)},
     .p = {0.25}},
    {.op = NB_OP_TANHSHRINK, .label = "tanhshrink", .f1 = nb_tanhshrink, .n_in = 1, .in = {IN(K_REAL, 3, 4)}},
    {.op = NB_OP_THRESHOLD, .label = "threshold 0.1, value -2", .fn = threshold, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)},
     .p = {0.1, -2}},
    {.op = NB_OP_GLU, .label = "glu dim 1", .fn = glu, .n_in = 1, .in = {IN(K_REAL, 3, 4, 2)}, .p = {1}},
    {.op = NB_OP_PRELU, .label = "prelu per channel", .f2 = nb_prelu, .n_in = 2, .in = {IN(K_AWAY0, 2, 3, 4), IN(K_REAL, 3)}},
    {.op = NB_OP_RRELU, .label = "rrelu eval", .fn = rrelu, .n_in = 1, .in = {IN(K_AWAY0, 3, 4)}, .p = {0.1, 0.3}},
    {.op = NB_OP_SOFTMIN, .label = "softmin dim 0", .fn = softmin, .n_in = 1, .in = {IN(K_REAL, 3, 4)}, .p = {0}},
    {.op = NB_OP_DROPOUT1D, .label = "dropout1d p 0.4", .fn = dropout_variant, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {1}},
    {.op = NB_OP_DROPOUT2D, .label = "dropout2d p 0.4, unbatched", .fn = dropout_variant, .n_in = 1,
     .in = {IN(K_REAL, 3, 2, 2)}, .p = {2}},
    {.op = NB_OP_DROPOUT3D, .label = "dropout3d p 0.4", .fn = dropout_variant, .n_in = 1, .in = {IN(K_REAL, 2, 2, 2, 2, 2)},
     .p = {3}},
    {.op = NB_OP_ALPHA_DROPOUT, .label = "alpha_dropout p 0.3", .fn = dropout_variant, .n_in = 1, .in = {IN(K_REAL, 3, 4)},
     .p = {4}},
    {.op = NB_OP_FEATURE_ALPHA_DROPOUT, .label = "feature_alpha_dropout p 0.3", .fn = dropout_variant, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 4)}, .p = {5}},
    {.op = NB_OP_PIXEL_SHUFFLE, .label = "pixel_shuffle 2", .fn = pixel_shuffle, .n_in = 1, .in = {IN(K_REAL, 2, 8, 3, 2)},
     .p = {2, 0}},
    {.op = NB_OP_PIXEL_UNSHUFFLE, .label = "pixel_unshuffle 2", .fn = pixel_shuffle, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 4, 6)}, .p = {2, 1}},
    {.op = NB_OP_LP_POOL2D, .label = "lp_pool2d p 2, kernel (2, 3), stride (1, 2), ceil", .fn = lp_pool, .n_in = 1,
     .in = {IN(K_POS, 2, 2, 4, 5)}, .p = {2, 0}},
    {.op = NB_OP_LP_POOL1D, .label = "lp_pool1d p 3, kernel 3, stride 2", .fn = lp_pool, .n_in = 1,
     .in = {IN(K_POS, 2, 2, 7)}, .p = {3, 1}},
    {.op = NB_OP_BILINEAR, .label = "bilinear with bias", .fn = bilinear, .n_in = 4,
     .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 2), IN(K_REAL, 5, 3, 2), IN(K_REAL, 5)}, .tol = 1e-4},
    {.op = NB_OP_LP_POOL3D, .label = "lp_pool3d p 2, kernel (2, 2, 1), stride (1, 2, 1)", .fn = lp_pool3d, .n_in = 1,
     .in = {IN(K_POS, 1, 2, 3, 4, 2)}, .p = {2}},
    {.op = NB_OP_ADAPTIVE_MAX_POOL1D, .label = "adaptive_max_pool1d 3", .fn = adaptive_max_pool1d, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 7)}, .p = {3}},
    {.op = NB_OP_ADAPTIVE_MAX_POOL3D, .label = "adaptive_max_pool3d (2, 3, 2)", .fn = adaptive_max_pool3d, .n_in = 1,
     .in = {IN(K_REAL, 1, 2, 5, 4, 3)}},
    {.op = NB_OP_MAX_UNPOOL1D, .label = "max_unpool1d kernel 2", .fn = max_unpool, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 3)}, .p = {1}},
    {.op = NB_OP_MAX_UNPOOL2D, .label = "max_unpool2d kernel 2", .fn = max_unpool, .n_in = 1,
     .in = {IN(K_REAL, 1, 2, 2, 3)}, .p = {2}},
    {.op = NB_OP_MAX_UNPOOL3D, .label = "max_unpool3d kernel 2", .fn = max_unpool, .n_in = 1,
     .in = {IN(K_REAL, 1, 1, 2, 2, 3)}, .p = {3}},
    {.op = NB_OP_CHANNEL_SHUFFLE, .label = "channel_shuffle 3 groups", .fn = channel_shuffle, .n_in = 1,
     .in = {IN(K_REAL, 2, 6, 2)}, .p = {3}},
    {.op = NB_OP_PDIST, .label = "pdist p 2", .fn = pdist, .n_in = 1, .in = {IN(K_REAL, 4, 3)}, .p = {2}},
    {.op = NB_OP_PDIST, .label = "pdist p 1", .fn = pdist, .n_in = 1, .in = {IN(K_REAL, 4, 3)}, .p = {1}},
    {.op = NB_OP_GUMBEL_SOFTMAX, .label = "gumbel_softmax tau 0.7", .fn = gumbel_softmax, .n_in = 1,
     .in = {IN(K_REAL, 3, 4)}, .p = {0}},
    /* hard: the straight-through gradient is the soft sample's by design, not the one-hot value's (0) */
    {.op = NB_OP_GUMBEL_SOFTMAX, .label = "gumbel_softmax hard", .fn = gumbel_softmax, .n_in = 1,
     .in = {IN(K_REAL, 3, 4)}, .p = {1}, .flags = C_NOGC | C_NOGG},
    {.op = NB_OP_EINSUM, .label = "einsum bij,bjk->bik", .fn = einsum3, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 4, 2)}, .tol = 1e-4, .p = {0}},
    {.op = NB_OP_EINSUM, .label = "einsum ii->i", .fn = einsum3, .n_in = 1, .in = {IN(K_REAL, 4, 4)}, .p = {1}},
    {.op = NB_OP_EINSUM, .label = "einsum ...ij,...jk (broadcast)", .fn = einsum3, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 4, 2)}, .tol = 1e-4, .p = {2}},
    {.op = NB_OP_EINSUM, .label = "einsum ijk,kl,lm->im", .fn = einsum3, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 4, 3), IN(K_REAL, 3, 2)}, .tol = 1e-4, .p = {3}},
    {.op = NB_OP_EINSUM, .label = "einsum bn,anm,bm->ba", .fn = einsum3, .n_in = 3,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 4, 3, 5), IN(K_REAL, 2, 5)}, .tol = 1e-4, .p = {4}},
    {.op = NB_OP_TENSORDOT, .label = "tensordot dims ([0, 2], [2, 0])", .fn = tensordot, .n_in = 2,
     .in = {IN(K_REAL, 3, 4, 2), IN(K_REAL, 2, 5, 3)}, .tol = 1e-4},
    {.op = NB_OP_OUTER, .label = "outer", .f2 = nb_outer, .n_in = 2, .in = {IN(K_REAL, 3), IN(K_REAL, 4)}},
    {.op = NB_OP_KRON, .label = "kron 2-d with 1-d", .f2 = nb_kron, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2)}},
    {.op = NB_OP_TRACE, .label = "trace", .f1 = nb_trace, .n_in = 1, .in = {IN(K_REAL, 3, 4)}},
    {.op = NB_OP_CROSS, .label = "cross dim -1", .fn = cross, .n_in = 2, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 4, 3)}},
    {.op = NB_OP_CDIST, .label = "cdist p 2", .fn = cdist, .n_in = 2, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 5, 3)}, .p = {2}},
    {.op = NB_OP_CDIST, .label = "cdist p 1, batched", .fn = cdist, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 2), IN(K_REAL, 2, 4, 2)}, .p = {1}},
    {.op = NB_OP_IM2COL, .label = "unfold kernel (2, 3), dilation (2, 1), padding (1, 0), stride (1, 2)", .fn = im2col,
     .n_in = 1, .in = {IN(K_REAL, 2, 2, 5, 6)}},
    {.op = NB_OP_COL2IM, .label = "fold onto 5 x 4", .fn = col2im, .n_in = 1, .in = {IN(K_REAL, 2, 12, 8)}},
    {.op = NB_OP_EMBEDDING_BAG, .label = "embedding_bag sum, offsets with an empty bag", .fn = embedding_bag, .n_in = 1,
     .in = {IN(K_REAL, 6, 3)}, .p = {NB_BAG_SUM}},
    {.op = NB_OP_EMBEDDING_BAG, .label = "embedding_bag mean, padding_idx 4", .fn = embedding_bag, .n_in = 1,
     .in = {IN(K_REAL, 6, 3)}, .p = {NB_BAG_MEAN, 1}},
    {.op = NB_OP_EMBEDDING_BAG, .label = "embedding_bag max", .fn = embedding_bag, .n_in = 1, .in = {IN(K_REAL, 6, 3)},
     .p = {NB_BAG_MAX}},
    {.op = NB_OP_CTC_LOSS, .label = "ctc_loss of log_softmax, mean", .fn = ctc_loss, .n_in = 1,
     .in = {IN(K_REAL, 5, 2, 4)}, .p = {NB_REDUCTION_MEAN}},
    {.op = NB_OP_CTC_LOSS, .label = "ctc_loss of log_softmax, none", .fn = ctc_loss, .n_in = 1,
     .in = {IN(K_REAL, 5, 2, 4)}, .p = {NB_REDUCTION_NONE}},
    {.op = NB_OP_FRACTIONAL_MAX_POOL2D, .label = "fractional_max_pool2d 2 x 2 to 3 x 2", .fn = fractional_max_pool,
     .n_in = 1, .in = {IN(K_REAL, 2, 2, 5, 4)}, .p = {2}},
    {.op = NB_OP_FRACTIONAL_MAX_POOL3D, .label = "fractional_max_pool3d 2 x 2 x 2 to 3 x 2 x 2", .fn = fractional_max_pool,
     .n_in = 1, .in = {IN(K_REAL, 2, 2, 4, 3, 4)}, .p = {3}},
    {.op = NB_OP_GRID_SAMPLE, .label = "grid_sample bilinear zeros", .fn = grid_sample, .n_in = 2,
     .in = {IN(K_REAL, 2, 2, 3, 4), IN(K_UNIT, 2, 3, 2, 2)}, .p = {NB_GRID_SAMPLE_BILINEAR, NB_GRID_SAMPLE_ZEROS, 0}},
    {.op = NB_OP_GRID_SAMPLE, .label = "grid_sample nearest border", .fn = grid_sample, .n_in = 2,
     .in = {IN(K_REAL, 2, 2, 3, 4), IN(K_UNIT, 2, 3, 2, 2)}, .p = {NB_GRID_SAMPLE_NEAREST, NB_GRID_SAMPLE_BORDER, 0}},
    {.op = NB_OP_GRID_SAMPLE, .label = "grid_sample bicubic reflection align_corners", .fn = grid_sample, .n_in = 2,
     .in = {IN(K_REAL, 1, 2, 3, 4), IN(K_UNIT, 1, 2, 3, 2)}, .p = {NB_GRID_SAMPLE_BICUBIC, NB_GRID_SAMPLE_REFLECTION, 1}},
    {.op = NB_OP_GRID_SAMPLE, .label = "grid_sample 3-d bilinear border", .fn = grid_sample, .n_in = 2,
     .in = {IN(K_REAL, 1, 2, 2, 3, 4), IN(K_UNIT, 1, 2, 2, 1, 3)}, .p = {NB_GRID_SAMPLE_BILINEAR, NB_GRID_SAMPLE_BORDER, 0}},
    {.op = NB_OP_AFFINE_GRID, .label = "affine_grid 3 x 4", .fn = affine_grid, .n_in = 1, .in = {IN(K_REAL, 2, 2, 3)}},
    {.op = NB_OP_AFFINE_GRID, .label = "affine_grid 3 x 4, align_corners", .fn = affine_grid, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 3)}, .p = {1}},
    {.op = NB_OP_CONV2D, .label = "conv2d stride 2 padding 1 dilation 2 groups 2", .fn = conv2d, .n_in = 3,
     .in = {IN(K_REAL, 2, 4, 6, 5), IN(K_REAL, 6, 2, 3, 2), IN(K_REAL, 6)}, .tol = 1e-4, .p = {2, 1, 2, 2}},
    {.op = NB_OP_CONV2D, .label = "conv2d 3x3, 8 channels (Winograd on the CPU)", .fn = conv2d, .n_in = 2,
     .in = {IN(K_REAL, 1, 8, 6, 6), IN(K_REAL, 8, 8, 3, 3)}, .tol = 1e-4, .p = {1, 1, 1, 1}},
    {.op = NB_OP_CONV1D, .label = "conv1d stride 2 padding 1", .fn = conv1d, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 7), IN(K_REAL, 4, 3, 3), IN(K_REAL, 4)}, .tol = 1e-4},
    {.op = NB_OP_CONV_TRANSPOSE2D, .label = "conv_transpose2d stride 2 output_padding 1", .fn = conv_t2d, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 4, 3), IN(K_REAL, 3, 2, 3, 2), IN(K_REAL, 2)}, .tol = 1e-4},
    {.op = NB_OP_CONV_TRANSPOSE1D, .label = "conv_transpose1d stride 2 padding 1 output_padding 1", .fn = conv_t1d,
     .n_in = 3, .in = {IN(K_REAL, 2, 3, 5), IN(K_REAL, 3, 2, 3), IN(K_REAL, 2)}, .tol = 1e-4},
    {.op = NB_OP_CONV3D, .label = "conv3d stride (2, 1, 2) padding (1, 0, 1) groups 2", .fn = conv3d, .n_in = 3,
     .in = {IN(K_REAL, 2, 4, 5, 3, 4), IN(K_REAL, 4, 2, 3, 2, 2), IN(K_REAL, 4)}, .tol = 1e-4, .p = {2, 1, 1, 2}},
    {.op = NB_OP_CONV3D, .label = "conv3d depth dilation 2", .fn = conv3d, .n_in = 2,
     .in = {IN(K_REAL, 1, 2, 5, 3, 3), IN(K_REAL, 3, 2, 2, 2, 2)}, .tol = 1e-4, .p = {1, 0, 2, 1}},
    {.op = NB_OP_CONV_TRANSPOSE3D, .label = "conv_transpose3d stride (2, 1, 2) output_padding", .fn = conv_t3d,
     .n_in = 3, .in = {IN(K_REAL, 2, 3, 2, 3, 2), IN(K_REAL, 3, 2, 3, 2, 2), IN(K_REAL, 2)}, .tol = 1e-4},
    {.op = NB_OP_DEFORM_CONV2D, .label = "deform_conv2d stride (1, 2) padding (1, 0), 2 offset groups, mask",
     .fn = deform, .n_in = 4,
     .in = {IN(K_REAL, 2, 4, 4, 5), IN(K_REAL, 2, 16, 5, 2), IN(K_REAL, 3, 4, 2, 2), IN(K_REAL, 2, 8, 5, 2)},
     .tol = 1e-4},
    {.op = NB_OP_MAX_POOL3D, .label = "max_pool3d 2 stride 2 padding (1, 1, 0) ceil_mode", .fn = max_pool3d, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 5, 4, 5)}, .p = {2, 2, 1, 1}},
    {.op = NB_OP_AVG_POOL3D, .label = "avg_pool3d 3 stride 2 padding (1, 1, 0)", .fn = avg_pool3d, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 5, 4, 5)}, .p = {3, 2, 1, 0}},
    {.op = NB_OP_ADAPTIVE_AVG_POOL3D, .label = "adaptive_avg_pool3d 5x4x3 to 2x3x2", .fn = aap3d, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 5, 4, 3)}},
    {.op = NB_OP_MAX_POOL2D, .label = "max_pool2d 2 stride 2", .fn = max_pool2d, .n_in = 1, .in = {IN(K_REAL, 2, 2, 5, 4)},
     .p = {2, 2, 0, 0}},
    {.op = NB_OP_MAX_POOL2D, .label = "max_pool2d 3 stride 2 padding 1 ceil_mode", .fn = max_pool2d, .n_in = 1,
     .in = {IN(K_REAL, 1, 2, 6, 5)}, .p = {3, 2, 1, 1}},
    {.op = NB_OP_AVG_POOL2D, .label = "avg_pool2d 3 stride 2 padding 1", .fn = avg_pool2d, .n_in = 1,
     .in = {IN(K_REAL, 2, 2, 5, 4)}, .p = {3, 2, 1, 0}},
    {.op = NB_OP_MAX_POOL1D, .label = "max_pool1d 3 stride 2 padding 1", .fn = max_pool1d, .n_in = 1, .in = {IN(K_REAL, 2, 3, 7)}},
    {.op = NB_OP_AVG_POOL1D, .label = "avg_pool1d 2 padding 1 count_include_pad false", .fn = avg_pool1d, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 5)}},
    {.op = NB_OP_ADAPTIVE_AVG_POOL2D, .label = "adaptive_avg_pool2d 5x7 to 2x3", .fn = aap2d, .n_in = 1, .in = {IN(K_REAL, 2, 2, 5, 7)}},
    {.op = NB_OP_ADAPTIVE_AVG_POOL1D, .label = "adaptive_avg_pool1d 7 to 3", .fn = aap1d, .n_in = 1, .in = {IN(K_REAL, 2, 3, 7)}},
    {.op = NB_OP_ADAPTIVE_MAX_POOL2D, .label = "adaptive_max_pool2d 5x5 to 2x2", .fn = amp2d, .n_in = 1, .in = {IN(K_REAL, 1, 2, 5, 5)}},
    {.op = NB_OP_BATCH_NORM, .label = "batch_norm training", .fn = batch_norm, .n_in = 3,
     .in = {IN(K_REAL, 4, 3, 2, 2), IN(K_REAL, 3), IN(K_REAL, 3)}, .tol = 1e-4, .p = {1}},
    {.op = NB_OP_BATCH_NORM, .label = "batch_norm eval", .fn = batch_norm, .n_in = 3,
     .in = {IN(K_REAL, 4, 3, 2), IN(K_REAL, 3), IN(K_REAL, 3)}, .p = {0}},
    {.op = NB_OP_LAYER_NORM, .label = "layer_norm last dim, weight and bias", .fn = layer_norm, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 5), IN(K_REAL, 5), IN(K_REAL, 5)}, .tol = 1e-4, .p = {1}},
    {.op = NB_OP_LAYER_NORM, .label = "layer_norm last two dims, no affine", .fn = layer_norm, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 4)}, .tol = 1e-4, .p = {2}},
    {.op = NB_OP_DROPOUT, .label = "dropout 0.3", .fn = dropout, .n_in = 1, .in = {IN(K_REAL, 4, 8)}, .p = {0.3}},
    {.op = NB_OP_MULTINOMIAL, .label = "multinomial 3 of 5 without replacement", .fn = multinomial, .n_in = 1,
     .in = {IN(K_POS, 2, 5)}, .p = {0}},
    {.op = NB_OP_MULTINOMIAL, .label = "multinomial 3 of [5] with replacement", .fn = multinomial, .n_in = 1,
     .in = {IN(K_POS, 5)}, .p = {1}},
    {.op = NB_OP_INTERPOLATE, .label = "interpolate nearest to 5x3", .fn = interpolate, .n_in = 1, .in = {IN(K_REAL, 2, 2, 3, 4)},
     .p = {NB_INTERPOLATE_NEAREST, 0}},
    {.op = NB_OP_INTERPOLATE, .label = "interpolate bilinear to 5x3", .fn = interpolate, .n_in = 1, .in = {IN(K_REAL, 2, 2, 3, 4)},
     .p = {NB_INTERPOLATE_BILINEAR, 0}},
    {.op = NB_OP_INTERPOLATE, .label = "interpolate bilinear align_corners", .fn = interpolate, .n_in = 1,
     .in = {IN(K_REAL, 1, 2, 3, 4)}, .p = {NB_INTERPOLATE_BILINEAR, 1}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa", .fn = sdpa, .n_in = 3, .in = {QKV}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa causal", .fn = sdpa, .n_in = 3, .in = {QKV}, .p = {1, 0}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa bool mask", .fn = sdpa_bool_mask, .n_in = 3, .in = {QKV}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa additive mask", .fn = sdpa, .n_in = 4,
     .in = {QKV, IN(K_REAL, 3, 5)}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa dropout 0.25", .fn = sdpa, .n_in = 3, .in = {QKV}, .p = {0, 0.25}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa enable_gqa (q regrouped)", .fn = sdpa_gqa, .n_in = 3,
     .in = {QKV_GQA}},
    {.op = NB_OP_SCALED_DOT_PRODUCT_ATTENTION, .label = "sdpa enable_gqa causal (k, v repeated)", .fn = sdpa_gqa,
     .n_in = 3, .in = {QKV_GQA}, .p = {1}},
    {.op = NB_OP_RMS_NORM, .label = "rms_norm last dim, weight", .fn = rms_norm, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 5), IN(K_REAL, 5)}, .tol = 1e-4, .p = {1, 1e-5}},
    {.op = NB_OP_RMS_NORM, .label = "rms_norm last two dims, no weight, eps=None", .fn = rms_norm, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 4)}, .tol = 1e-4, .p = {2, 0}},
    {.op = NB_OP_ADD_RMS_NORM, .label = "add_rms_norm last dim, weight", .fn = add_rms_norm, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 5), IN(K_REAL, 2, 3, 5), IN(K_REAL, 5)}, .tol = 1e-4, .p = {1, 1e-5}},
    {.op = NB_OP_ADD_RMS_NORM, .label = "add_rms_norm last two dims, broadcast residual, no weight", .fn = add_rms_norm,
     .n_in = 2, .in = {IN(K_REAL, 2, 3, 4), IN(K_REAL, 3, 4)}, .tol = 1e-4, .p = {2, 0}},
    {.op = NB_OP_APPLY_ROTARY_POS_EMB, .label = "apply_rotary_pos_emb [2, 2, 3, 6] with table gradients",
     .fn = rope, .n_in = 3, .in = {IN(K_REAL, 2, 2, 3, 6), IN(K_UNIT, 3, 3), IN(K_UNIT, 3, 3)}},
    {.op = NB_OP_APPLY_ROTARY_POS_EMB, .label = "apply_rotary_pos_emb of a transposed view", .fn = rope, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 2, 4), IN(K_UNIT, 3, 2), IN(K_UNIT, 3, 2)}, .p = {1}},
};

const nb_case_table nb_cases_nn = {cases, (int)(sizeof cases / sizeof cases[0])};
