/* test_ops_rnn.c - nb_rnn and nb_rnn_cell: one LSTM and one GRU step by
 * hand, a sequence against the cell stepped by hand, the shapes of every
 * output form (batch_first, unbatched, bidirectional, proj_size), dropout
 * between layers only in training, the errors; the RNN / LSTM / GRU
 * modules' parameter names and shapes (PyTorch's), their init bound and
 * their forward forms. Values and gradients against PyTorch: tests/torch_diff
 * and tests/interop/module_interop.py; float64 gradchecks: the op harness.
 * On CUDA: cuDNN's RNN against the layers run as ops and the CPU, a second
 * backward through it, and the double backward it refuses.
 */
#include <math.h>
#include <string.h>

#include "nb_backend_impl.h"
#include "nb_test.h"

static double sig(double v) { return 1 / (1 + exp(-v)); }

START_TEST(test_cell_steps_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* H = 1, I = 1: LSTM gates i, f, g, o = w_ih x + w_hh h + b_ih + b_hh */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1), NB_F64, (double[]){0.5});
    nb_tensor *h = nb_test_tensor(NB_SHAPE(1, 1), NB_F64, (double[]){-0.3});
    nb_tensor *c = nb_test_tensor(NB_SHAPE(1, 1), NB_F64, (double[]){0.2});
    double wi[4] = {0.1, -0.2, 0.3, 0.4}, wh[4] = {0.5, 0.6, -0.7, 0.8}, bi[4] = {0.01, 0.02, 0.03, 0.04};
    nb_tensor *w_ih = nb_test_tensor(NB_SHAPE(4, 1), NB_F64, wi), *w_hh = nb_test_tensor(NB_SHAPE(4, 1), NB_F64, wh);
    nb_tensor *b_ih = nb_test_tensor(NB_SHAPE(4), NB_F64, bi), *b_hh = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0, 0, 0, 0});
    double g[4];
    for (int k = 0; k < 4; k++) g[k] = wi[k] * 0.5 + wh[k] * -0.3 + bi[k];
    double c1 = sig(g[1]) * 0.2 + sig(g[0]) * tanh(g[2]), h1 = sig(g[3]) * tanh(c1);
    nb_tensor *out[2];
    ck_assert_int_eq(nb_rnn_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, NB_RNN_LSTM, out), 2);
    nb_ck_close(out[0], &h1, 1, 1e-15, 0);
    nb_ck_close(out[1], &c1, 1, 1e-15, 0);
    /* GRU: r, z, n with b_hn inside r (W_hn h + b_hn) */
    nb_tensor *gw_ih = nb_test_tensor(NB_SHAPE(3, 1), NB_F64, wi), *gw_hh = nb_test_tensor(NB_SHAPE(3, 1), NB_F64, wh);
    nb_tensor *gb = nb_test_tensor(NB_SHAPE(3), NB_F64, bi);
    double r = sig(wi[0] * 0.5 + bi[0] + wh[0] * -0.3 + bi[0]), z = sig(wi[1] * 0.5 + bi[1] + wh[1] * -0.3 + bi[1]);
    double n = tanh(wi[2] * 0.5 + bi[2] + r * (wh[2] * -0.3 + bi[2])), hg = (1 - z) * n + z * -0.3;
    ck_assert_int_eq(nb_rnn_cell(x, h, NULL, gw_ih, gw_hh, gb, gb, NB_RNN_GRU, out), 1);
    nb_ck_close(out[0], &hg, 1, 1e-15, 0);
    /* RNN relu without bias, no hx (zeros) */
    double hr = fmax(0, wi[0] * 0.5);
    ck_assert_int_eq(nb_rnn_cell(x, NULL, NULL, nb_narrow(w_ih, 0, 0, 1), nb_narrow(w_hh, 0, 0, 1), NULL, NULL,
                                 NB_RNN_RELU, out), 1);
    nb_ck_close(out[0], &hr, 1, 0, 0);
    /* errors */
    ck_assert_int_eq(nb_rnn_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, NB_RNN_GRU, out), -1); /* cx without LSTM */
    ck_assert_int_eq(nb_rnn_cell(x, h, NULL, w_ih, w_hh, b_ih, NULL, NB_RNN_LSTM, out), -1);
    ck_assert_int_eq(nb_rnn_cell(nb_reshape(x, NB_SHAPE(1, 1, 1)), NULL, NULL, w_ih, w_hh, NULL, NULL, NB_RNN_LSTM, out), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* A 2-step GRU sequence equals the cell applied twice; h_n is the last output. */
START_TEST(test_sequence_is_steps) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 2), NB_F64, NULL);
    nb_tensor *p[4] = {nb_randn(NB_SHAPE(9, 2), NB_F64, NULL), nb_randn(NB_SHAPE(9, 3), NB_F64, NULL),
                       nb_randn(NB_SHAPE(9), NB_F64, NULL), nb_randn(NB_SHAPE(9), NB_F64, NULL)};
    nb_tensor *out[3], *h[1];
    ck_assert_int_eq(nb_rnn(x, NULL, NULL, p, 4, (nb_rnn_options){.mode = NB_RNN_GRU}, out), 2);
    nb_ck_shape(out[0], NB_SHAPE(2, 3, 3));
    nb_ck_shape(out[1], NB_SHAPE(1, 3, 3));
    nb_tensor *hh = NULL;
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(nb_rnn_cell(nb_squeeze(nb_narrow(x, 0, t, 1), 0), hh, NULL, p[0], p[1], p[2], p[3], NB_RNN_GRU, h), 1);
        hh = h[0];
        double *want = nb_test_values_of(hh);
        nb_ck_close(nb_squeeze(nb_narrow(out[0], 0, t, 1), 0), want, 9, 1e-14, 0);
        free(want);
    }
    double *last = nb_test_values_of(hh);
    nb_ck_close(out[1], last, 9, 1e-14, 0);
    free(last);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_rnn_shapes_and_dropout) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(8);
    nb_module *lstm = nb_nn_lstm(3, 4, (nb_rnn_options){.num_layers = 2, .bidirectional = true, .proj_size = 2,
                                                       .batch_first = true, .dropout = 0.5});
    NB_CK_NOTNULL(lstm);
    const char *names[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0",
                           "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                           "bias_hh_l0_reverse", "weight_hr_l0_reverse", "weight_ih_l1"};
    const int64_t shapes[][2] = {{16, 3}, {16, 2}, {16, 0}, {16, 0}, {2, 4}, {16, 3}, {16, 2}, {16, 0}, {16, 0}, {2, 4},
                                 {16, 4}};
    nb_named_tensor p[32];
    ck_assert_int_eq(nb_module_parameters(lstm, p, 32), 20);
    for (int i = 0; i < 11; i++) {
        ck_assert_str_eq(p[i].name, names[i]);
        nb_ck_shape(p[i].tensor, shapes[i][1] ? 2 : 1, shapes[i]);
    }
    /* every parameter within PyTorch's bound 1 / sqrt(H) */
    for (int i = 0; i < 20; i++) ck_assert(nb_item(nb_amax(nb_abs(p[i].tensor), NULL, 0, false)) <= 0.5);
    nb_tensor *x = nb_randn(NB_SHAPE(5, 7, 3), NB_F32, NULL), *out[3];
    ck_assert_int_eq(nb_forward_n(lstm, 1, &x, out, 3), 3);
    nb_ck_shape(out[0], NB_SHAPE(5, 7, 4)); /* batch_first, 2 directions x proj 2 */
    nb_ck_shape(out[1], NB_SHAPE(4, 5, 2));
    nb_ck_shape(out[2], NB_SHAPE(4, 5, 4));
    /* training: dropout between the layers draws, so two runs differ; eval: the same */
    nb_tensor *a = nb_forward(lstm, x), *b = nb_forward(lstm, x);
    ck_assert(nb_item(nb_amax(nb_abs(nb_sub(a, b)), NULL, 0, false)) > 0);
    nb_module_train(lstm, false);
    a = nb_forward(lstm, x), b = nb_forward(lstm, x);
    ck_assert_double_eq(nb_item(nb_amax(nb_abs(nb_sub(a, b)), NULL, 0, false)), 0);
    /* unbatched [T, I] (batch_first applies to batched input only) */
    ck_assert_int_eq(nb_forward_n(lstm, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(7, 3), NB_F32, NULL)}, out, 3), 3);
    nb_ck_shape(out[0], NB_SHAPE(7, 4));
    nb_ck_shape(out[1], NB_SHAPE(4, 2));
    /* errors: wrong input size, wrong state shape, too many inputs */
    ck_assert_int_eq(nb_forward_n(lstm, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(5, 7, 2), NB_F32, NULL)}, out, 3), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_int_eq(nb_forward_n(lstm, 2, (nb_tensor *[]){x, nb_zeros(NB_SHAPE(2, 5, 2), NB_F32)}, out, 3), -1);
    ck_assert_int_eq(nb_forward_n(lstm, 4, (nb_tensor *[]){x, x, x, x}, out, 3), -1);
    nb_module_free(lstm);
    /* the other kinds and their errors */
    nb_module *gru = nb_nn_gru(3, 4, (nb_rnn_options){0});
    ck_assert_str_eq(nb_module_kind(gru), "GRU");
    ck_assert_int_eq(nb_module_parameters(gru, p, 32), 4);
    nb_ck_shape(p[0].tensor, NB_SHAPE(12, 3));
    nb_module_free(gru);
    nb_module *cell = nb_nn_lstm_cell(3, 4, (nb_rnn_options){.bias = NB_FLAG_FALSE});
    ck_assert_int_eq(nb_module_parameters(cell, p, 32), 2);
    ck_assert_str_eq(p[0].name, "weight_ih");
    ck_assert_int_eq(nb_forward_n(cell, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 3), NB_F32, NULL)}, out, 2), 2);
    nb_ck_shape(out[1], NB_SHAPE(2, 4));
    nb_module_free(cell);
    ck_assert_ptr_null(nb_nn_rnn(3, 4, (nb_rnn_options){.mode = NB_RNN_LSTM}));
    ck_assert_ptr_null(nb_nn_gru(3, 4, (nb_rnn_options){.proj_size = 2}));
    ck_assert_ptr_null(nb_nn_lstm(3, 4, (nb_rnn_options){.proj_size = 4}));
    ck_assert_ptr_null(nb_nn_lstm_cell(3, 4, (nb_rnn_options){.num_layers = 2}));
    ck_assert_ptr_null(nb_nn_lstm(0, 4, (nb_rnn_options){0}));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* A few steps of training reduce the loss (gradients reach every parameter). */
/* A packed batch runs each sequence over its own length: a 2-layer
 * bidirectional GRU module on sequences of lengths 2, 5, 3 (unsorted)
 * gives, per sequence, the output and h_n of that sequence alone; the
 * packing round trip and the errors. */
START_TEST(test_packed_is_each_sequence) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_module *gru = nb_nn_gru(3, 4, (nb_rnn_options){.num_layers = 2, .bidirectional = true, .dtype = NB_F64});
    NB_CK_NOTNULL(gru);
    int64_t len[3] = {2, 5, 3};
    nb_tensor *seq[3];
    for (int b = 0; b < 3; b++) seq[b] = nb_randn(NB_SHAPE(len[b], 3), NB_F64, NULL);
    nb_tensor *h0 = nb_randn(NB_SHAPE(4, 3, 4), NB_F64, NULL);
    nb_packed_sequence x, y;
    NB_CK_OK(nb_pack_sequence(seq, 3, false, &x));
    ck_assert_int_eq(nb_numel(x.batch_sizes), 5);
    nb_ck_close(x.batch_sizes, (double[]){3, 3, 2, 1, 1}, 5, 0, 0);
    nb_ck_close(x.sorted_indices, (double[]){1, 2, 0}, 3, 0, 0);
    nb_tensor *st[2];
    ck_assert_int_eq(nb_nn_rnn_forward_packed(gru, &x, h0, NULL, &y, st), 1);
    nb_tensor *padded = NULL, *lengths = NULL;
    NB_CK_OK(nb_pad_packed_sequence(&y, true, -7, 6, &padded, &lengths));
    nb_ck_shape(padded, 3, (int64_t[]){3, 6, 8});
    nb_ck_close(lengths, (double[]){2, 5, 3}, 3, 0, 0);
    for (int b = 0; b < 3; b++) {
        nb_tensor *out[2];
        nb_tensor *h0b = nb_narrow(h0, 1, b, 1);
        ck_assert_int_eq(nb_forward_n(gru, 2, (nb_tensor *[]){nb_unsqueeze(seq[b], 1), h0b}, out, 2), 2);
        nb_tensor *got = nb_narrow(nb_narrow(padded, 0, b, 1), 1, 0, len[b]);
        double *want = nb_test_values_of(out[0]);
        nb_ck_close(got, want, len[b] * 8, 1e-12, 0);
        free(want);
        want = nb_test_values_of(out[1]);
        nb_ck_close(nb_narrow(st[0], 1, b, 1), want, 16, 1e-12, 0);
        free(want);
        /* past its length: the padding value */
        if (len[b] < 6) ck_assert_double_eq(nb_item(nb_select(nb_select(nb_select(padded, 0, b), 0, len[b]), 0, 3)), -7);
    }
    /* gradients reach every sequence */
    NB_CK_OK(nb_backward(nb_sum(padded, NULL, 0, false)));
    /* errors */
    nb_tensor *xp = nb_zeros(NB_SHAPE(4, 3, 2), NB_F32);
    nb_packed_sequence p;
    ck_assert_int_eq(nb_pack_padded_sequence(xp, nb_from_data((int64_t[]){4, 5, 1}, NB_SHAPE(3), NB_I64), false, false, &p),
                     NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_pack_padded_sequence(xp, nb_from_data((int64_t[]){2, 3, 1}, NB_SHAPE(3), NB_I64), false, true, &p),
                     NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "decreasing"));
    ck_assert_int_eq(nb_pack_padded_sequence(xp, nb_from_data((int64_t[]){2, 0, 1}, NB_SHAPE(3), NB_I64), false, false, &p),
                     NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_pack_padded_sequence(xp, nb_from_data((int64_t[]){2, 1}, NB_SHAPE(2), NB_I64), false, false, &p),
                     NB_ERR_SHAPE);
    NB_CK_OK(nb_pack_padded_sequence(xp, nb_from_data((int64_t[]){4, 2, 1}, NB_SHAPE(3), NB_I64), false, true, &p));
    ck_assert_ptr_null(p.sorted_indices);
    ck_assert_int_eq(nb_pad_packed_sequence(&p, false, 0, 3, &padded, NULL), NB_ERR_INVALID_ARG);
    nb_packed_sequence bad = p;
    bad.batch_sizes = nb_from_data((int64_t[]){3, 2, 2, 2}, NB_SHAPE(4), NB_I64); /* sums to 9, data has 7 rows */
    ck_assert_int_eq(nb_pad_packed_sequence(&bad, false, 0, 0, &padded, NULL), NB_ERR_SHAPE);
    nb_module *relu = nb_nn_relu();
    ck_assert_int_eq(nb_nn_rnn_forward_packed(relu, &x, NULL, NULL, &y, st), -1);
    nb_module_free(relu);
    nb_module_free(gru);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_lstm_trains) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(2);
    nb_module *lstm = nb_nn_lstm(2, 8, (nb_rnn_options){.dtype = NB_F64});
    nb_tensor *x = nb_randn(NB_SHAPE(6, 4, 2), NB_F64, NULL);
    nb_tensor *y = nb_cumsum(x, 0); /* the running sum of the inputs: needs memory */
    nb_module *head = nb_nn_linear_ex(8, 2, true, NB_F64);
    nb_module *both = nb_nn_module_list_array((nb_module *[]){lstm, head}, 2);
    nb_optimizer *opt = nb_adam(both, (nb_adam_options){.lr = 0.02});
    double first = 0, last = 0;
    for (int it = 0; it < 60; it++) {
        nb_scope *t = nb_scope_begin();
        nb_optimizer_zero_grad(opt);
        nb_tensor *loss = nb_mse_loss(nb_forward(head, nb_forward(lstm, x)), y, NB_REDUCTION_MEAN);
        NB_CK_OK(nb_backward(loss));
        NB_CK_OK(nb_optimizer_step(opt));
        if (it == 0) first = nb_item(loss);
        last = nb_item(loss);
        nb_scope_end(t);
    }
    ck_assert_msg(last < 0.5 * first, "loss %g -> %g", first, last);
    nb_optimizer_free(opt);
    nb_module_free(both);
    nb_scope_end(s);
}
END_TEST

/* ---- cuDNN's RNN (CUDA; skipped without a GPU) -------------------------------------------------- */

/* One RNN configuration run on dev: outputs and gradients of a weighted sum of y, h_n (and c_n) with
 * respect to x, h0 and every parameter, as float64 CPU tensors in res (y, h_n, [c_n], grads...). */
typedef struct rnn_cfg {
    nb_rnn_mode mode;
    int layers, proj;
    bool bidir, bias, packed;
    double dropout;
} rnn_cfg;

static int run_cfg(const rnn_cfg *c, nb_device dev, nb_dtype dt, bool *used, nb_tensor **res) {
    enum { T = 5, B = 3, I = 4, H = 6 };
    int64_t G = c->mode == NB_RNN_LSTM ? 4 : c->mode == NB_RNN_GRU ? 3 : 1, D = c->bidir ? 2 : 1;
    int64_t Ho = c->proj ? c->proj : H, per = 2 + (c->bias ? 2 : 0) + (c->proj ? 1 : 0);
    nb_manual_seed(11); /* the same values on every device */
    nb_tensor *leaf[64];
    int n = 0;
    leaf[n++] = nb_randn(NB_SHAPE(T, B, I), NB_F64, NULL);
    leaf[n++] = nb_randn(NB_SHAPE(c->layers * D, B, Ho), NB_F64, NULL);
    bool lstm = c->mode == NB_RNN_LSTM;
    if (lstm) leaf[n++] = nb_randn(NB_SHAPE(c->layers * D, B, H), NB_F64, NULL);
    int first = n;
    for (int l = 0; l < c->layers; l++)
        for (int d = 0; d < D; d++) {
            leaf[n++] = nb_mul_scalar(nb_randn(NB_SHAPE(G * H, l ? D * Ho : I), NB_F64, NULL), 0.4);
            leaf[n++] = nb_mul_scalar(nb_randn(NB_SHAPE(G * H, Ho), NB_F64, NULL), 0.4);
            if (c->bias) leaf[n++] = nb_randn(NB_SHAPE(G * H), NB_F64, NULL), leaf[n++] = nb_randn(NB_SHAPE(G * H), NB_F64, NULL);
            if (c->proj) leaf[n++] = nb_mul_scalar(nb_randn(NB_SHAPE(Ho, H), NB_F64, NULL), 0.4);
        }
    ck_assert_int_eq(n - first, c->layers * D * per);
    for (int i = 0; i < n; i++) {
        leaf[i] = nb_contiguous(nb_to_dtype(nb_to_device(leaf[i], dev), dt));
        NB_CK_OK(nb_set_requires_grad(leaf[i], true));
    }
    nb_generator g = nb_generator_new(5);
    nb_rnn_options o = {.mode = c->mode, .num_layers = c->layers, .bidirectional = c->bidir, .proj_size = c->proj,
                        .bias = c->bias ? NB_FLAG_TRUE : NB_FLAG_FALSE, .dropout = c->dropout,
                        .training = c->dropout > 0, .generator = &g};
    nb_tensor *out[3] = {0}, *y;
    bool trace[NB_SLOT_COUNT] = {0};
    nb_slot_trace_begin(trace);
    if (c->packed) {
        nb_packed_sequence in, po;
        nb_tensor *lengths = nb_from_data((int64_t[]){3, 5, 2}, NB_SHAPE(3), NB_I64);
        NB_CK_OK(nb_pack_padded_sequence(leaf[0], lengths, false, false, &in));
        ck_assert_int_eq(nb_rnn_packed(&in, leaf[1], lstm ? leaf[2] : NULL, leaf + first, n - first, o, &po, out + 1),
                         lstm ? 2 : 1);
        NB_CK_OK(nb_pad_packed_sequence(&po, false, 0, 0, &y, NULL));
    } else {
        ck_assert_int_eq(nb_rnn(leaf[0], leaf[1], lstm ? leaf[2] : NULL, leaf + first, n - first, o, out), lstm ? 3 : 2);
        y = out[0];
    }
    out[0] = y;
    nb_tensor *loss = nb_sum(nb_mul(y, nb_sin(y)), NULL, 0, false);
    for (int k = 1; k < (lstm ? 3 : 2); k++) loss = nb_add(loss, nb_sum(nb_mul(out[k], out[k]), NULL, 0, false));
    NB_CK_OK(nb_backward(loss));
    nb_slot_trace_end();
    *used = trace[NB_SLOT_rnn_forward] && trace[NB_SLOT_rnn_backward];
    int m = 0;
    for (int k = 0; k < (lstm ? 3 : 2); k++) res[m++] = nb_to_dtype(nb_to_device(out[k], NB_CPU), NB_F64);
    for (int i = 0; i < n; i++) res[m++] = nb_to_dtype(nb_to_device(nb_tensor_grad(leaf[i]), NB_CPU), NB_F64);
    return m;
}

static void ck_all_close(nb_tensor *const *a, nb_tensor *const *b, int n, double tol, const char *what) {
    for (int i = 0; i < n; i++) {
        NB_CK_NOTNULL(a[i]), NB_CK_NOTNULL(b[i]);
        double err = nb_item(nb_amax(nb_abs(nb_sub(a[i], b[i])), NULL, 0, false));
        double mag = nb_item(nb_amax(nb_abs(b[i]), NULL, 0, false));
        ck_assert_msg(err <= tol * (1 + mag), "%s: result %d differs by %g (magnitude %g)", what, i, err, mag);
    }
}

/* On CUDA nb_rnn runs cuDNN's RNN (the rnn slots): outputs and every gradient equal the layers run as ops
 * (nb_set_cudnn_enabled(false)) and the CPU's, for LSTM (projection, packed input), GRU, ReLU and tanh RNNs,
 * bidirectional stacks, no bias, and dropout between layers (nabla's generator: the same masks). */
START_TEST(test_cudnn_matches_ops) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    const rnn_cfg cfgs[] = {
        {NB_RNN_LSTM, 2, 0, true, true, false, 0}, {NB_RNN_GRU, 2, 0, true, true, false, 0},
        {NB_RNN_RELU, 1, 0, false, false, false, 0}, {NB_RNN_TANH, 3, 0, false, true, false, 0},
        {NB_RNN_LSTM, 2, 2, true, true, false, 0}, {NB_RNN_LSTM, 1, 3, false, false, false, 0},
        {NB_RNN_LSTM, 2, 0, true, true, true, 0}, {NB_RNN_GRU, 1, 0, false, true, true, 0},
        {NB_RNN_LSTM, 3, 0, false, true, false, 0.5}};
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++)
        for (int f = 0; f < 2; f++) {
            nb_scope *s = nb_scope_begin();
            nb_dtype dt = f ? NB_F32 : NB_F64;
            nb_tensor *ref[64], *ops[64], *fused[64];
            bool used;
            char what[64];
            snprintf(what, sizeof what, "config %zu %s", k, nb_dtype_name(dt));
            int n = run_cfg(&cfgs[k], NB_CPU, NB_F64, &used, ref);
            ck_assert(!used);
            bool prev = nb_set_cudnn_enabled(false);
            ck_assert_int_eq(run_cfg(&cfgs[k], NB_CUDA(0), dt, &used, ops), n);
            ck_assert_msg(!used, "%s: cuDNN ran while disabled", what);
            nb_set_cudnn_enabled(prev);
            ck_assert_int_eq(run_cfg(&cfgs[k], NB_CUDA(0), dt, &used, fused), n);
            ck_assert_msg(used, "%s: the rnn slots did not run", what);
            ck_all_close(fused, ref, n, f ? 2e-4 : 1e-11, what);
            ck_all_close(ops, ref, n, f ? 2e-4 : 1e-11, what);
            nb_scope_end(s);
        }
}
END_TEST

/* cuDNN's backward rewrites its reserve space: a second backward through the graph (retain_graph) rebuilds
 * it and gives the same gradients; a double backward fails naming rnn (as PyTorch's), and runs with
 * cuDNN disabled. */
START_TEST(test_cudnn_backward_twice_and_double) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(1);
    nb_device prev_dev = nb_default_device();
    NB_CK_OK(nb_set_default_device(NB_CUDA(0)));
    nb_module *lstm = nb_nn_lstm(3, 5, (nb_rnn_options){.num_layers = 2, .dtype = NB_F64});
    NB_CK_OK(nb_set_default_device(prev_dev));
    NB_CK_NOTNULL(lstm);
    nb_tensor *x = nb_to_device(nb_randn(NB_SHAPE(4, 2, 3), NB_F64, NULL), NB_CUDA(0));
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_tensor *loss = nb_sum(nb_pow_scalar(nb_forward(lstm, x), 2), NULL, 0, false);
    nb_tensor *g1, *g2;
    nb_grad_options keep = {.retain_graph = true};
    NB_CK_OK(nb_grad(&loss, NULL, 1, &x, 1, &g1, &keep));
    NB_CK_OK(nb_grad(&loss, NULL, 1, &x, 1, &g2, NULL));
    ck_all_close(&g1, &g2, 1, 0, "second backward");
    for (int off = 0; off < 2; off++) {
        bool prev = nb_set_cudnn_enabled(off == 0);
        loss = nb_sum(nb_pow_scalar(nb_forward(lstm, x), 2), NULL, 0, false);
        nb_grad_options cg = {.create_graph = true};
        NB_CK_OK(nb_grad(&loss, NULL, 1, &x, 1, &g1, &cg));
        nb_status st = nb_backward(nb_sum(nb_pow_scalar(g1, 2), NULL, 0, false));
        if (off == 0) {
            ck_assert_int_eq(st, NB_ERR_UNSUPPORTED);
            ck_assert_msg(strstr(nb_last_error(), "rnn") != NULL, "%s", nb_last_error());
        } else {
            NB_CK_OK(st);
        }
        nb_set_cudnn_enabled(prev);
    }
    nb_module_free(lstm);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_rnn(void) {
    Suite *s = suite_create("ops_rnn");
    TCase *t = tcase_create("rnn");
    tcase_add_test(t, test_cell_steps_by_hand);
    tcase_add_test(t, test_sequence_is_steps);
    tcase_add_test(t, test_rnn_shapes_and_dropout);
    tcase_add_test(t, test_packed_is_each_sequence);
    tcase_add_test(t, test_lstm_trains);
    tcase_add_test(t, test_cudnn_matches_ops);
    tcase_add_test(t, test_cudnn_backward_twice_and_double);
    suite_add_tcase(s, t);
    return s;
}
