/* ops_rnn.c - RNN (tanh, ReLU), LSTM (with proj_size) and GRU layers and
 * cells, written from differentiable ops: one GEMM for the input
 * projections of all steps of a layer and direction, then per step a GEMM
 * with W_hh and the gates' pointwise ops. Formulas and layouts: PyTorch's
 * nn.RNN / LSTM / GRU docs (nb_functional.h). Tests: tests/test_ops_rnn.c,
 * the op harness and tests/torch_diff (against torch's _VF.lstm etc.). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

static const char *const mode_names[] = {"rnn_tanh", "rnn_relu", "lstm", "gru"};
static int gates_of(nb_rnn_mode m) { return m == NB_RNN_LSTM ? 4 : m == NB_RNN_GRU ? 3 : 1; }

/* One step: xp [B, G H] is the input's projection (b_ih included), h [B,
 * H_out] the hidden state, *c [B, H] the cell state (LSTM: replaced by the
 * new one). Returns the new hidden state. */
static nb_tensor *step(nb_rnn_mode mode, nb_tensor *xp, nb_tensor *h, nb_tensor **c, nb_tensor *w_hh, nb_tensor *b_hh,
                       nb_tensor *w_hr) {
    nb_tensor *gh = nb_linear(h, w_hh, b_hh);
    switch (mode) {
    case NB_RNN_TANH: return nb_tanh(nb_add(xp, gh));
    case NB_RNN_RELU: return nb_relu(nb_add(xp, gh));
    case NB_RNN_LSTM: {
        nb_tensor *g[4];
        if (nb_chunk(nb_add(xp, gh), 4, -1, g, 4) != 4) return NULL;
        *c = nb_add(nb_mul(nb_sigmoid(g[1]), *c), nb_mul(nb_sigmoid(g[0]), nb_tanh(g[2])));
        nb_tensor *hn = nb_mul(nb_sigmoid(g[3]), nb_tanh(*c));
        return w_hr ? nb_linear(hn, w_hr, NULL) : hn;
    }
    case NB_RNN_GRU: {
        nb_tensor *a[3], *b[3];
        if (nb_chunk(xp, 3, -1, a, 3) != 3 || nb_chunk(gh, 3, -1, b, 3) != 3) return NULL;
        nb_tensor *r = nb_sigmoid(nb_add(a[0], b[0])), *z = nb_sigmoid(nb_add(a[1], b[1]));
        nb_tensor *n = nb_tanh(nb_add(a[2], nb_mul(r, b[2])));
        return nb_add(n, nb_mul(z, nb_sub(h, n)));
    }
    }
    return NB_FAIL(NB_ERR_INVALID_ARG, "rnn: bad mode %d", (int)mode);
}

/* t of exactly this shape (ndim, dims), else NB_ERR_SHAPE naming what. */
static bool has_shape(const char *op, const char *what, const nb_tensor *t, int ndim, const int64_t *dims) {
    if (t->ndim == ndim && !memcmp(t->shape, dims, sizeof(int64_t) * (size_t)ndim)) return true;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    nb_set_error(NB_ERR_SHAPE, "%s: %s is %s, expected %s", op, what, nb_fmt_shape(t->ndim, t->shape, a, sizeof a),
                 nb_fmt_shape(ndim, dims, b, sizeof b));
    return false;
}

/* params non-NULL, of x's dtype and device. */
static bool same_kind(const char *op, nb_tensor *x, int n, nb_tensor *const *ts) {
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d is NULL", op, i);
            return false;
        }
    }
    nb_tensor *in[2] = {x, NULL};
    for (int i = 0; i < n; i++) {
        in[1] = ts[i];
        if (!nb_check_inputs(op, 2, in)) return false;
        if (ts[i]->dtype != x->dtype) {
            nb_set_error(NB_ERR_DTYPE, "%s: parameter %d is %s, the input %s", op, i, nb_dtype_name(ts[i]->dtype),
                         nb_dtype_name(x->dtype));
            return false;
        }
    }
    return true;
}

/* The k-th [B, *] slice of a state [L * D, B, *]. */
static nb_tensor *state_at(nb_tensor *s, int64_t k) { return nb_squeeze(nb_narrow(s, 0, k, 1), 0); }

/* Hands out[0..n) past the op's scope s (which ends) to the caller's scope. */
static int hand_over(nb_scope *s, nb_tensor **out, int n) {
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && out[i];
    for (int i = 0; ok && i < n; i++) nb_retain(out[i]);
    nb_scope_end(s);
    if (!ok) { /* nothing handed over: no pointer into the ended scope is left */
        for (int i = 0; i < n; i++) out[i] = NULL;
        return -1;
    }
    for (int i = 0; i < n; i++) out[i] = nb_scope_adopt(out[i]);
    return n;
}

/* A given initial state (unbatched: [L * D, size] made [L * D, 1, size]),
 * checked, or zeros. */
static nb_tensor *initial_state(const char *op, const char *what, nb_tensor *s, nb_tensor *x, bool unbatched,
                                int64_t LD, int64_t B, int64_t size) {
    if (!s) return nb_full_on(NB_SHAPE(LD, B, size), 0.0, x->dtype, x->storage->device);
    if (!same_kind(op, x, 1, &s)) return NULL;
    if (unbatched ? !has_shape(op, what, s, 2, (int64_t[]){LD, size}) : !has_shape(op, what, s, 3, (int64_t[]){LD, B, size}))
        return NULL;
    return unbatched ? nb_unsqueeze(s, 1) : s;
}

/* One layer in one direction over x [T, B, I_l]: the outputs [T, B, H_out]; *h and *c become the last states. */
static nb_tensor *run_direction(nb_rnn_mode mode, nb_tensor *x, bool reverse, nb_tensor *const *p, bool bias,
                                bool proj, nb_tensor **h, nb_tensor **c, nb_tensor **steps) {
    int64_t T = x->shape[0];
    nb_tensor *w_ih = p[0], *w_hh = p[1], *b_ih = bias ? p[2] : NULL, *b_hh = bias ? p[3] : NULL;
    nb_tensor *w_hr = proj ? p[bias ? 4 : 2] : NULL;
    nb_tensor *xp = nb_linear(x, w_ih, b_ih); /* every step's input projection in one GEMM */
    if (!xp || nb_split(xp, 1, 0, steps, (int)T) != T) return NULL;
    for (int64_t s = 0; s < T && *h; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        *h = step(mode, nb_squeeze(steps[t], 0), *h, c, w_hh, b_hh, w_hr);
        steps[t] = *h; /* the slice is no longer needed: its output takes the place */
    }
    return *h ? nb_stack(steps, (int)T, 0) : NULL;
}

static int rnn_impl(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params, int n_params,
                    nb_rnn_options o, nb_tensor **out, nb_tensor **steps) {
    const char *op = (unsigned)o.mode <= NB_RNN_GRU ? mode_names[o.mode] : "rnn";
    if ((unsigned)o.mode > NB_RNN_GRU) return nb_set_error(NB_ERR_INVALID_ARG, "rnn: bad mode %d", (int)o.mode), -1;
    int64_t L = o.num_layers ? o.num_layers : 1, D = o.bidirectional ? 2 : 1;
    bool bias = nb_flag_on(o.bias), lstm = o.mode == NB_RNN_LSTM, proj = o.proj_size > 0;
    if (L < 1 || !(o.dropout >= 0 && o.dropout <= 1) || o.proj_size < 0 || (proj && !lstm))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: num_layers %lld must be >= 1, dropout %g in [0, 1], proj_size "
                            "%lld >= 0 (LSTM only)", op, (long long)L, o.dropout, (long long)o.proj_size), -1;
    if (cx && !lstm) return nb_set_error(NB_ERR_INVALID_ARG, "%s: a cell state is for LSTM only", op), -1;
    if (!nb_check_inputs(op, 1, &input) || !nb_check_dtypes(NB_OP_RNN, 1, &input)) return -1;
    int per = 2 + (bias ? 2 : 0) + (proj ? 1 : 0);
    if (n_params != L * D * per || (n_params && !params))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d parameters given, %lld expected (%lld layers x %lld "
                            "directions x %d)", op, n_params, (long long)(L * D * per), (long long)L, (long long)D,
                            per), -1;
    if (!same_kind(op, input, n_params, params)) return -1;
    if (input->ndim != 2 && input->ndim != 3) {
        char a[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_SHAPE, "%s: input %s must be [T, B, I] ([B, T, I] batch_first) or [T, I]", op,
                            nb_fmt_shape(input->ndim, input->shape, a, sizeof a)), -1;
    }
    bool unbatched = input->ndim == 2;
    nb_tensor *x = unbatched ? nb_unsqueeze(input, 1) : o.batch_first ? nb_transpose(input, 0, 1) : input;
    if (!x) return -1;
    int64_t T = x->shape[0], B = x->shape[1], G = gates_of(o.mode);
    if (T < 1) return nb_set_error(NB_ERR_SHAPE, "%s: the input has no time steps", op), -1;
    int64_t H = params[0]->ndim == 2 ? params[0]->shape[0] / G : 0, Hout = proj ? o.proj_size : H;
    if (H < 1 || (proj && o.proj_size >= H))
        return nb_set_error(NB_ERR_SHAPE, "%s: weight_ih_l0 must be [%lld * hidden_size, input_size] with "
                            "hidden_size >= 1 (and > proj_size %lld)", op, (long long)G, (long long)o.proj_size), -1;
    for (int64_t l = 0; l < L; l++)
        for (int64_t d = 0; d < D; d++) {
            nb_tensor *const *p = params + (l * D + d) * per;
            int64_t in_l = l ? D * Hout : x->shape[2];
            if (!has_shape(op, "weight_ih", p[0], 2, (int64_t[]){G * H, in_l}) ||
                !has_shape(op, "weight_hh", p[1], 2, (int64_t[]){G * H, Hout}) ||
                (bias && (!has_shape(op, "bias_ih", p[2], 1, (int64_t[]){G * H}) ||
                          !has_shape(op, "bias_hh", p[3], 1, (int64_t[]){G * H}))) ||
                (proj && !has_shape(op, "weight_hr", p[per - 1], 2, (int64_t[]){Hout, H})))
                return -1;
        }
    nb_tensor *h0 = initial_state(op, "hx", hx, x, unbatched, L * D, B, Hout);
    nb_tensor *c0 = lstm ? initial_state(op, "cx", cx, x, unbatched, L * D, B, H) : NULL;
    if (!h0 || (lstm && !c0)) return -1;
    nb_tensor *hn[2 * 64], *cn[2 * 64]; /* per layer and direction */
    if (L > 64) return nb_set_error(NB_ERR_INVALID_ARG, "%s: at most 64 layers (got %lld)", op, (long long)L), -1;
    for (int64_t l = 0; l < L && x; l++) {
        nb_tensor *dir_out[2];
        for (int64_t d = 0; d < D; d++) {
            int64_t k = l * D + d;
            nb_tensor *h = state_at(h0, k), *c = lstm ? state_at(c0, k) : NULL;
            dir_out[d] = run_direction(o.mode, x, d == 1, params + k * per, bias, proj, &h, &c, steps);
            if (!dir_out[d]) return -1;
            hn[k] = h, cn[k] = c;
        }
        x = D == 2 ? nb_cat(dir_out, 2, 2) : dir_out[0];
        if (x && l < L - 1 && o.dropout > 0 && o.training) x = nb_dropout(x, o.dropout, true, o.generator);
    }
    if (!x) return -1;
    out[0] = unbatched ? nb_squeeze(x, 1) : o.batch_first ? nb_transpose(x, 0, 1) : x;
    out[1] = nb_stack(hn, (int)(L * D), 0);
    if (unbatched && out[1]) out[1] = nb_squeeze(out[1], 1);
    if (!lstm) return 2;
    out[2] = nb_stack(cn, (int)(L * D), 0);
    if (unbatched && out[2]) out[2] = nb_squeeze(out[2], 1);
    return 3;
}

int nb_rnn(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params, int n_params,
           nb_rnn_options opts, nb_tensor **out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "rnn: out is NULL"), -1;
    int64_t T = input && input->ndim >= 2 ? input->shape[input->ndim == 3 && opts.batch_first ? 1 : 0] : 0;
    nb_tensor **steps = T > 0 ? malloc(sizeof *steps * (size_t)T) : NULL; /* the per-step tensors of one direction */
    if (T > 0 && !steps) return nb_set_error(NB_ERR_OOM, "rnn: out of host memory"), -1;
    nb_scope *s = nb_op_scope_begin();
    int n = rnn_impl(input, hx, cx, params, n_params, opts, out, steps);
    free(steps);
    if (n < 0) {
        nb_scope_end(s);
        return -1;
    }
    return hand_over(s, out, n);
}

/* A cell's given state ([B, H], or [H] unbatched, made [1, H]), checked, or zeros. */
static nb_tensor *cell_state(const char *op, const char *what, nb_tensor *st, nb_tensor *x, bool unbatched, int64_t B,
                             int64_t H) {
    if (!st) return nb_full_on(NB_SHAPE(B, H), 0.0, x->dtype, x->storage->device);
    if (!same_kind(op, x, 1, &st)) return NULL;
    if (unbatched ? !has_shape(op, what, st, 1, (int64_t[]){H}) : !has_shape(op, what, st, 2, (int64_t[]){B, H}))
        return NULL;
    return unbatched ? nb_unsqueeze(st, 0) : st;
}

int nb_rnn_cell(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *w_ih, nb_tensor *w_hh, nb_tensor *b_ih,
                nb_tensor *b_hh, nb_rnn_mode mode, nb_tensor **out) {
    if ((unsigned)mode > NB_RNN_GRU) return nb_set_error(NB_ERR_INVALID_ARG, "rnn_cell: bad mode %d", (int)mode), -1;
    char op[24];
    snprintf(op, sizeof op, "%s_cell", mode_names[mode]);
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "%s: out is NULL", op), -1;
    bool lstm = mode == NB_RNN_LSTM;
    if (cx && !lstm) return nb_set_error(NB_ERR_INVALID_ARG, "%s: a cell state is for LSTM only", op), -1;
    if ((b_ih == NULL) != (b_hh == NULL))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: b_ih and b_hh must both be given or both NULL", op), -1;
    if (!nb_check_inputs(op, 1, &input) || !nb_check_dtypes(NB_OP_RNN_CELL, 1, &input) ||
        !same_kind(op, input, 2, (nb_tensor *[]){w_ih, w_hh}) || (b_ih && !same_kind(op, input, 2, (nb_tensor *[]){b_ih, b_hh})))
        return -1;
    if (input->ndim != 1 && input->ndim != 2) {
        char a[NB_SHAPE_BUF];
        return nb_set_error(NB_ERR_SHAPE, "%s: input %s must be [B, I] or [I]", op,
                            nb_fmt_shape(input->ndim, input->shape, a, sizeof a)), -1;
    }
    bool unbatched = input->ndim == 1;
    int64_t G = gates_of(mode), H = w_hh->ndim == 2 ? w_hh->shape[1] : 0, B = unbatched ? 1 : input->shape[0];
    int64_t I = input->shape[input->ndim - 1];
    if (!has_shape(op, "weight_ih", w_ih, 2, (int64_t[]){G * H, I}) ||
        !has_shape(op, "weight_hh", w_hh, 2, (int64_t[]){G * H, H}) ||
        (b_ih && (!has_shape(op, "bias_ih", b_ih, 1, (int64_t[]){G * H}) ||
                  !has_shape(op, "bias_hh", b_hh, 1, (int64_t[]){G * H}))))
        return -1;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = unbatched ? nb_unsqueeze(input, 0) : input;
    nb_tensor *h = cell_state(op, "hx", hx, x, unbatched, B, H), *c = lstm ? cell_state(op, "cx", cx, x, unbatched, B, H) : NULL;
    int n = lstm ? 2 : 1;
    if (!h || (lstm && !c)) {
        nb_scope_end(s);
        return -1;
    }
    h = step(mode, nb_linear(x, w_ih, b_ih), h, &c, w_hh, b_hh, NULL);
    out[0] = h && unbatched ? nb_squeeze(h, 0) : h;
    if (lstm) out[1] = c && unbatched ? nb_squeeze(c, 0) : c;
    return hand_over(s, out, n);
}
