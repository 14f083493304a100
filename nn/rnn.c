/* rnn.c - nn.RNN, nn.LSTM, nn.GRU and their cells over nb_rnn / nb_rnn_cell
 * (autograd/ops_rnn.c), with PyTorch's parameter names, shapes and order
 * (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_hr_l0, then
 * the _reverse direction, then layer 1, ...), so state_dicts load both
 * ways, and PyTorch's initialisation: every parameter U(-1/sqrt(H),
 * 1/sqrt(H)), drawn in that order from the default generator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "nn_impl.h"

typedef struct rnn_ctx {
    const char *kind;
    nb_rnn_options o;
    bool cell;
    int n_params;
    nb_tensor **params; /* borrowed from the module, in PyTorch's _flat_weights order */
} rnn_ctx;

static void rnn_ctx_free(void *p) {
    rnn_ctx *c = p;
    if (c) free(c->params);
    free(c);
}

static int rnn_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    const rnn_ctx *c = nb_module_ctx(m);
    bool lstm = c->o.mode == NB_RNN_LSTM;
    int most = lstm ? 3 : 2;
    if (n_in < 1 || n_in > most)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: forward takes (input%s), got %d inputs", c->kind,
                            lstm ? "[, h_0[, c_0]]" : "[, h_0]", n_in), -1;
    if (!in[0]) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: input is NULL", c->kind);
        return -1;
    }
    nb_tensor *hx = n_in > 1 ? in[1] : NULL, *cx = n_in > 2 ? in[2] : NULL;
    if (c->cell) return nb_rnn_cell(in[0], hx, cx, c->params[0], c->params[1], c->n_params > 2 ? c->params[2] : NULL,
                                    c->n_params > 2 ? c->params[3] : NULL, c->o.mode, out);
    nb_rnn_options o = c->o;
    o.training = nb_module_is_training(m);
    return nb_rnn(in[0], hx, cx, c->params, c->n_params, o, out);
}

int nb_nn_rnn_forward_packed(nb_module *m, const nb_packed_sequence *input, nb_tensor *hx, nb_tensor *cx,
                             nb_packed_sequence *output, nb_tensor **states) {
    const rnn_ctx *c = m ? nb_module_ctx(m) : NULL;
    const char *kind = m ? nb_module_kind(m) : NULL;
    if (!c || !kind || (strcmp(kind, "RNN") && strcmp(kind, "LSTM") && strcmp(kind, "GRU")))
        return nb_set_error(NB_ERR_INVALID_ARG, "rnn_forward_packed: %s is not an RNN, LSTM or GRU module",
                            kind ? kind : "NULL"), -1;
    if (!input || !input->data) {
        if (nb_last_status() == NB_OK || !input) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL packed sequence", kind);
        return -1;
    }
    /* the pre-hooks (a parametrized weight's among them) see (data, h_0, c_0), as nb_forward_n's would */
    nb_tensor *in[3] = {input->data, hx, cx};
    if (nb_module_run_pre_hooks(m, 3, in) != NB_OK) return -1;
    nb_packed_sequence x = *input;
    x.data = in[0];
    nb_rnn_options o = c->o;
    o.training = nb_module_is_training(m);
    return nb_rnn_packed(&x, in[1], in[2], c->params, c->n_params, o, output, states);
}

/* nb_forward: the output alone (RNN: output; cells: h'). */
static nb_tensor *rnn_forward1(nb_module *m, nb_tensor *x) {
    nb_tensor *out[NB_FORWARD_MAX];
    return rnn_forward_n(m, 1, &x, 1, out) < 0 ? NULL : out[0];
}

static const nb_module_ops rnn_ops = {"RNN", rnn_forward1, rnn_ctx_free, rnn_forward_n};
static const nb_module_ops lstm_ops = {"LSTM", rnn_forward1, rnn_ctx_free, rnn_forward_n};
static const nb_module_ops gru_ops = {"GRU", rnn_forward1, rnn_ctx_free, rnn_forward_n};
static const nb_module_ops rnn_cell_ops = {"RNNCell", rnn_forward1, rnn_ctx_free, rnn_forward_n};
static const nb_module_ops lstm_cell_ops = {"LSTMCell", rnn_forward1, rnn_ctx_free, rnn_forward_n};
static const nb_module_ops gru_cell_ops = {"GRUCell", rnn_forward1, rnn_ctx_free, rnn_forward_n};

/* A [rows, cols] (or [rows] for cols 0) parameter U(-bound, bound), registered as name and kept in c. */
static bool add_param(nb_module *m, rnn_ctx *c, const char *name, int64_t rows, int64_t cols, double bound) {
    int64_t shape[2] = {rows, cols};
    nb_tensor *t = nb_tensor_new_unscoped(cols ? 2 : 1, shape, c->o.dtype, nb_default_device());
    if (!t) return false;
    if (nb_uniform_(t, -bound, bound, NULL) != NB_OK) {
        nb_release(t);
        return false;
    }
    if (nb_module_adopt_parameter(m, name, t) != NB_OK) return false;
    c->params[c->n_params++] = t;
    return true;
}

static nb_module *rnn_new(const nb_module_ops *ops, bool cell, int64_t input_size, int64_t hidden_size,
                          nb_rnn_options o) {
    const char *kind = ops->kind;
    int64_t L = cell ? 1 : (o.num_layers ? o.num_layers : 1), D = !cell && o.bidirectional ? 2 : 1;
    bool bias = nb_flag_on(o.bias), proj = o.proj_size > 0;
    if (input_size < 1 || hidden_size < 1 || L < 1 || L > 64)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: input_size %lld and hidden_size %lld must be >= 1, num_layers %lld in "
                       "[1, 64]", kind, (long long)input_size, (long long)hidden_size, (long long)L);
    if (!(o.dropout >= 0 && o.dropout <= 1) || o.proj_size < 0 || (proj && (o.mode != NB_RNN_LSTM || cell)) ||
        o.proj_size >= hidden_size)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dropout %g must be in [0, 1], proj_size %lld in [0, hidden_size) "
                       "(LSTM only)", kind, o.dropout, (long long)o.proj_size);
    if (!nb_nn_check_dtype(kind, cell ? NB_OP_RNN_CELL : NB_OP_RNN, o.dtype)) return NULL;
    rnn_ctx *c = calloc(1, sizeof *c);
    int per = 2 + (bias ? 2 : 0) + (proj ? 1 : 0);
    if (c) c->params = malloc(sizeof *c->params * (size_t)(L * D * per));
    if (!c || !c->params) {
        rnn_ctx_free(c);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", kind);
    }
    c->kind = kind, c->o = o, c->cell = cell;
    c->o.num_layers = L;
    nb_module *m = nb_module_new(ops, c);
    if (!m) return NULL;
    int64_t G = o.mode == NB_RNN_LSTM ? 4 : o.mode == NB_RNN_GRU ? 3 : 1, Hout = proj ? o.proj_size : hidden_size;
    double bound = 1 / sqrt((double)hidden_size);
    bool ok = true;
    for (int64_t l = 0; ok && l < L; l++)
        for (int64_t d = 0; ok && d < D; d++) {
            char n[64], sfx[32];
            if (cell) sfx[0] = 0;
            else snprintf(sfx, sizeof sfx, "_l%lld%s", (long long)l, d ? "_reverse" : "");
            int64_t in_l = l ? D * Hout : input_size;
            snprintf(n, sizeof n, "weight_ih%s", sfx);
            ok = add_param(m, c, n, G * hidden_size, in_l, bound);
            snprintf(n, sizeof n, "weight_hh%s", sfx);
            ok = ok && add_param(m, c, n, G * hidden_size, Hout, bound);
            if (ok && bias) {
                snprintf(n, sizeof n, "bias_ih%s", sfx);
                ok = add_param(m, c, n, G * hidden_size, 0, bound);
                snprintf(n, sizeof n, "bias_hh%s", sfx);
                ok = ok && add_param(m, c, n, G * hidden_size, 0, bound);
            }
            if (ok && proj) {
                snprintf(n, sizeof n, "weight_hr%s", sfx);
                ok = add_param(m, c, n, o.proj_size, hidden_size, bound);
            }
        }
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_rnn(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    if (o.mode != NB_RNN_TANH && o.mode != NB_RNN_RELU)
        return NB_FAIL(NB_ERR_INVALID_ARG, "RNN: mode must be NB_RNN_TANH or NB_RNN_RELU (use nb_nn_lstm / nb_nn_gru)");
    return rnn_new(&rnn_ops, false, input_size, hidden_size, o);
}

nb_module *nb_nn_lstm(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    o.mode = NB_RNN_LSTM;
    return rnn_new(&lstm_ops, false, input_size, hidden_size, o);
}

nb_module *nb_nn_gru(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    o.mode = NB_RNN_GRU;
    return rnn_new(&gru_ops, false, input_size, hidden_size, o);
}

/* The cells take bias, mode (RNNCell) and dtype from the options; the rest must be left 0. */
static bool cell_options(const char *kind, nb_rnn_options o) {
    if (!o.num_layers && !o.batch_first && !o.bidirectional && !o.proj_size && !o.dropout) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: takes only bias, dtype (and RNNCell's mode) from the options", kind);
    return false;
}

nb_module *nb_nn_rnn_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    if (o.mode != NB_RNN_TANH && o.mode != NB_RNN_RELU)
        return NB_FAIL(NB_ERR_INVALID_ARG, "RNNCell: mode must be NB_RNN_TANH or NB_RNN_RELU");
    return cell_options("RNNCell", o) ? rnn_new(&rnn_cell_ops, true, input_size, hidden_size, o) : NULL;
}

nb_module *nb_nn_lstm_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    o.mode = NB_RNN_LSTM;
    return cell_options("LSTMCell", o) ? rnn_new(&lstm_cell_ops, true, input_size, hidden_size, o) : NULL;
}

nb_module *nb_nn_gru_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options o) {
    o.mode = NB_RNN_GRU;
    return cell_options("GRUCell", o) ? rnn_new(&gru_cell_ops, true, input_size, hidden_size, o) : NULL;
}
