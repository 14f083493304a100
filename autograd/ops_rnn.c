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

/* One layer in one direction over x [T, B, I_l]: the outputs [T, B, H_out]; *h and *c become the last states.
 * With len (int64 [B], packed input), a sequence past its length keeps its
 * state (so the reverse direction starts at its own last step, and h_n is
 * the state at its last step, as PyTorch's packed RNN). */
static nb_tensor *run_direction(nb_rnn_mode mode, nb_tensor *x, bool reverse, nb_tensor *const *p, bool bias,
                                bool proj, nb_tensor **h, nb_tensor **c, nb_tensor **steps, nb_tensor *len) {
    int64_t T = x->shape[0];
    nb_tensor *w_ih = p[0], *w_hh = p[1], *b_ih = bias ? p[2] : NULL, *b_hh = bias ? p[3] : NULL;
    nb_tensor *w_hr = proj ? p[bias ? 4 : 2] : NULL;
    nb_tensor *xp = nb_linear(x, w_ih, b_ih); /* every step's input projection in one GEMM */
    if (!xp || nb_split(xp, 1, 0, steps, (int)T) != T) return NULL;
    for (int64_t s = 0; s < T && *h; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        nb_tensor *h_prev = *h, *c_prev = c ? *c : NULL;
        *h = step(mode, nb_squeeze(steps[t], 0), *h, c, w_hh, b_hh, w_hr);
        if (len && *h) {
            nb_tensor *live = nb_unsqueeze(nb_gt_scalar(len, (double)t), 1); /* [B, 1] */
            *h = nb_where(live, *h, h_prev);
            if (c) *c = nb_where(live, *c, c_prev);
        }
        steps[t] = *h; /* the slice is no longer needed: its output takes the place */
    }
    return *h ? nb_stack(steps, (int)T, 0) : NULL;
}

static int rnn_impl(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params, int n_params,
                    nb_rnn_options o, nb_tensor **out, nb_tensor **steps, nb_tensor *len, const int64_t *len_host) {
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
    bool dropout = o.dropout > 0 && o.training;
    for (int64_t l = 0; l < L && x;) {
        /* the layers up to the next dropout in one backend call where it takes them */
        int64_t n = dropout ? 1 : L - l;
        nb_tensor *f[3] = {0};
        int r = nb_rnn_fused(o.mode, x, nb_narrow(h0, 0, l * D, n * D), lstm ? nb_narrow(c0, 0, l * D, n * D) : NULL,
                             params + l * D * per, (int)(n * D * per), n, D == 2, bias, o.proj_size, len_host, f);
        if (r < 0) return -1;
        if (r > 0) {
            for (int64_t k = 0; k < n * D; k++) hn[l * D + k] = state_at(f[1], k), cn[l * D + k] = lstm ? state_at(f[2], k) : NULL;
            x = f[0];
        } else {
            nb_tensor *dir_out[2];
            n = 1;
            for (int64_t d = 0; d < D; d++) {
                int64_t k = l * D + d;
                nb_tensor *h = state_at(h0, k), *c = lstm ? state_at(c0, k) : NULL;
                dir_out[d] = run_direction(o.mode, x, d == 1, params + k * per, bias, proj, &h, &c, steps, len);
                if (!dir_out[d]) return -1;
                hn[k] = h, cn[k] = c;
            }
            x = D == 2 ? nb_cat(dir_out, 2, 2) : dir_out[0];
        }
        l += n;
        if (x && l < L && dropout) x = nb_dropout(x, o.dropout, true, o.generator);
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
    int n = rnn_impl(input, hx, cx, params, n_params, opts, out, steps, NULL, NULL);
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

/* ---- packed sequences (torch.nn.utils.rnn) ---------------------------------------------------- */

/* The rows of a [T * B, *] time-major tensor that a packed sequence
 * holds, in its order: step t of the first batch_sizes[t] (sorted)
 * sequences, t = 0, 1, ... (as an int64 tensor on dev). */
static nb_tensor *packed_rows(const int64_t *bs, int64_t T, int64_t B, const int64_t *order, nb_device dev) {
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++) n += bs[t];
    int64_t *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
    if (!idx) return NB_FAIL(NB_ERR_OOM, "packed sequence: out of host memory");
    for (int64_t t = 0, k = 0; t < T; t++)
        for (int64_t j = 0; j < bs[t]; j++) idx[k++] = t * B + (order ? order[j] : j);
    nb_tensor *r = nb_from_data_on(idx, NB_SHAPE(n), NB_I64, dev);
    free(idx);
    return r;
}

/* Checks a packed sequence and reads its batch sizes (T of them). */
static int64_t *packed_check(const char *op, const nb_packed_sequence *p, int64_t *T) {
    if (!p || !p->data || !p->batch_sizes) {
        if (nb_last_status() == NB_OK || !p) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL packed sequence or part", op);
        return NULL;
    }
    if ((p->sorted_indices == NULL) != (p->unsorted_indices == NULL) || p->batch_sizes->ndim != 1 ||
        p->batch_sizes->shape[0] < 1 || (p->batch_sizes->dtype != NB_I64 && p->batch_sizes->dtype != NB_I32) ||
        p->data->ndim < 1) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: not a packed sequence (batch_sizes 1-d int64 of >= 1 step, data of "
                     ">= 1 dim, sorted and unsorted indices both given or both NULL)", op);
        return NULL;
    }
    *T = p->batch_sizes->shape[0];
    int64_t *bs = nb_host_int64(op, p->batch_sizes), n = 0;
    if (!bs) return NULL;
    int64_t B = bs[0];
    for (int64_t t = 0; t < *T; t++) {
        if (bs[t] < 1 || bs[t] > (t ? bs[t - 1] : B)) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: batch_sizes must be positive and non-increasing", op);
            free(bs);
            return NULL;
        }
        n += bs[t];
    }
    if (p->data->shape[0] != n || (p->sorted_indices && (p->sorted_indices->ndim != 1 || p->sorted_indices->shape[0] != B ||
                                                          p->unsorted_indices->ndim != 1 || p->unsorted_indices->shape[0] != B))) {
        nb_set_error(NB_ERR_SHAPE, "%s: data has %lld rows, the batch sizes sum to %lld (and the indices must be [%lld])",
                     op, (long long)p->data->shape[0], (long long)n, (long long)B);
        free(bs);
        return NULL;
    }
    return bs;
}

static void packed_clear(nb_packed_sequence *out) { *out = (nb_packed_sequence){0}; }

/* Hands a packed sequence built in scope s to the caller's scope. */
static nb_status packed_hand_over(nb_scope *s, nb_packed_sequence *p) {
    nb_tensor *t[4] = {p->data, p->batch_sizes, p->sorted_indices, p->unsorted_indices};
    bool ok = t[0] && t[1] && (t[2] != NULL) == (t[3] != NULL);
    for (int i = 0; ok && i < 4; i++)
        if (t[i]) nb_retain(t[i]);
    nb_scope_end(s);
    if (!ok) {
        packed_clear(p);
        return nb_last_status() ? nb_last_status() : NB_ERR_STATE;
    }
    for (int i = 0; i < 4; i++)
        if (t[i]) nb_scope_adopt(t[i]);
    return NB_OK;
}

nb_status nb_pack_padded_sequence(nb_tensor *input, nb_tensor *lengths, bool batch_first, bool enforce_sorted,
                                  nb_packed_sequence *out) {
    const char *op = "pack_padded_sequence";
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "%s: out is NULL", op);
    packed_clear(out);
    /* lengths may live on any device (PyTorch's are on the CPU): they are read to the host */
    if (!nb_check_inputs(op, 1, &input) || !nb_check_inputs(op, 1, &lengths) ||
        !nb_check_dtypes(NB_OP_PACK_PADDED_SEQUENCE, 1, &input))
        return nb_last_status();
    char a[NB_SHAPE_BUF];
    if (input->ndim < 2) return nb_set_error(NB_ERR_SHAPE, "%s: input %s needs a time and a batch dim", op,
                                             nb_fmt_shape(input->ndim, input->shape, a, sizeof a));
    int64_t T = input->shape[batch_first ? 1 : 0], B = input->shape[batch_first ? 0 : 1];
    if (lengths->ndim != 1 || lengths->shape[0] != B || (lengths->dtype != NB_I64 && lengths->dtype != NB_I32))
        return nb_set_error(NB_ERR_SHAPE, "%s: lengths must be int64 [%lld] (the batch), got %s %s", op, (long long)B,
                            nb_fmt_shape(lengths->ndim, lengths->shape, a, sizeof a), nb_dtype_name(lengths->dtype));
    int64_t *len = nb_host_int64(op, lengths), *order = len ? malloc(sizeof *order * (size_t)(B ? B : 1)) : NULL;
    int64_t *bs = order ? calloc((size_t)(T ? T : 1), sizeof *bs) : NULL;
    nb_status st = NB_OK;
    if (len && (!order || !bs)) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if (!len) st = nb_last_status();
    for (int64_t b = 0; st == NB_OK && b < B; b++) {
        if (len[b] < 1 || len[b] > T)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: length %lld of sequence %lld is outside [1, %lld]", op,
                              (long long)len[b], (long long)b, (long long)T);
        else if (enforce_sorted && b && len[b] > len[b - 1])
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: lengths must be sorted in decreasing order when enforce_sorted "
                              "is true (sequence %lld)", op, (long long)b);
        order[b] = b;
    }
    /* a stable sort by decreasing length (insertion: B is a batch) */
    for (int64_t i = 1; st == NB_OK && !enforce_sorted && i < B; i++)
        for (int64_t j = i; j > 0 && len[order[j]] > len[order[j - 1]]; j--) {
            int64_t k = order[j];
            order[j] = order[j - 1], order[j - 1] = k;
        }
    int64_t steps = st == NB_OK && B ? len[order[0]] : 0;
    for (int64_t t = 0; st == NB_OK && t < steps; t++)
        for (int64_t b = 0; b < B; b++) bs[t] += len[b] > t;
    if (st == NB_OK && B == 0) st = nb_set_error(NB_ERR_SHAPE, "%s: an empty batch", op);
    if (st != NB_OK) {
        free(len), free(order), free(bs);
        return st;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_device dev = input->storage->device;
    nb_tensor *x = batch_first ? nb_transpose(input, 0, 1) : input;
    int64_t rest[NB_MAX_DIMS];
    rest[0] = T * B;
    for (int i = 2; i < input->ndim; i++) rest[i - 1] = input->shape[i];
    nb_tensor *rows = packed_rows(bs, steps, B, enforce_sorted ? NULL : order, dev);
    out->data = nb_index_select(nb_reshape(x, input->ndim - 1, rest), 0, rows);
    out->batch_sizes = nb_from_data(bs, NB_SHAPE(steps), NB_I64);
    if (!enforce_sorted) {
        int64_t *inv = malloc(sizeof *inv * (size_t)B);
        if (!inv) nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        for (int64_t j = 0; inv && j < B; j++) inv[order[j]] = j;
        out->sorted_indices = nb_from_data_on(order, NB_SHAPE(B), NB_I64, dev);
        out->unsorted_indices = inv ? nb_from_data_on(inv, NB_SHAPE(B), NB_I64, dev) : NULL;
        free(inv);
    }
    free(len), free(order), free(bs);
    return packed_hand_over(s, out);
}

/* The packed data back to [total, B, *] in sorted order (padding_value
 * elsewhere) and the sorted lengths (host). */
static nb_tensor *unpack_sorted(const nb_packed_sequence *p, const int64_t *bs, int64_t T, int64_t total,
                                double padding_value, int64_t *len_sorted) {
    nb_tensor *d = p->data;
    int64_t B = bs[0], shape[NB_MAX_DIMS];
    shape[0] = total * B;
    for (int i = 1; i < d->ndim; i++) shape[i] = d->shape[i];
    for (int64_t j = 0; j < B; j++) {
        len_sorted[j] = 0;
        for (int64_t t = 0; t < T; t++) len_sorted[j] += bs[t] > j;
    }
    nb_tensor *flat = nb_full_on(d->ndim, shape, padding_value, d->dtype, d->storage->device);
    flat = nb_index_copy(flat, 0, packed_rows(bs, T, B, NULL, d->storage->device), d);
    int64_t full[NB_MAX_DIMS + 1] = {total, B};
    for (int i = 1; i < d->ndim; i++) full[i + 1] = d->shape[i];
    return nb_reshape(flat, d->ndim + 1, full);
}

nb_status nb_pad_packed_sequence(const nb_packed_sequence *seq, bool batch_first, double padding_value,
                                 int64_t total_length, nb_tensor **padded, nb_tensor **lengths) {
    const char *op = "pad_packed_sequence";
    if (!padded) return nb_set_error(NB_ERR_INVALID_ARG, "%s: padded is NULL", op);
    *padded = NULL;
    if (lengths) *lengths = NULL;
    int64_t T;
    int64_t *bs = packed_check(op, seq, &T);
    if (!bs) return nb_last_status();
    if (total_length && total_length < T) {
        free(bs);
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: total_length %lld is less than the longest sequence (%lld)", op,
                            (long long)total_length, (long long)T);
    }
    int64_t B = bs[0];
    int64_t *len = malloc(sizeof *len * (size_t)B), *perm = NULL;
    if (!len) {
        free(bs);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = unpack_sorted(seq, bs, T, total_length ? total_length : T, padding_value, len);
    if (x && seq->unsorted_indices) { /* back to the caller's batch order */
        x = nb_index_select(x, 1, seq->unsorted_indices);
        perm = nb_host_int64(op, seq->unsorted_indices);
        int64_t *orig = perm ? malloc(sizeof *orig * (size_t)B) : NULL;
        for (int64_t i = 0; orig && i < B; i++) orig[i] = perm[i] >= 0 && perm[i] < B ? len[perm[i]] : 0;
        if (orig) memcpy(len, orig, sizeof *len * (size_t)B);
        if (!orig) x = NULL;
        free(orig);
    }
    if (x && batch_first) x = nb_transpose(x, 0, 1);
    nb_tensor *l = x && lengths ? nb_from_data(len, NB_SHAPE(B), NB_I64) : NULL;
    free(bs), free(len), free(perm);
    if (!x || (lengths && !l)) {
        nb_scope_end(s);
        return nb_last_status() ? nb_last_status() : NB_ERR_OOM;
    }
    nb_retain(x);
    if (l) nb_retain(l);
    nb_scope_end(s);
    *padded = nb_scope_adopt(x);
    if (lengths) *lengths = nb_scope_adopt(l);
    return NB_OK;
}

nb_tensor *nb_pad_sequence(nb_tensor *const *seqs, int n, bool batch_first, double padding_value, bool padding_left) {
    const char *op = "pad_sequence";
    if (n < 1 || !seqs) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %d sequences; need at least one", op, n);
    if (!nb_check_inputs(op, n, (nb_tensor **)seqs) || !nb_check_dtypes(NB_OP_PAD_SEQUENCE, n, (nb_tensor **)seqs))
        return NULL;
    int64_t T = 0;
    for (int i = 0; i < n; i++) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        if (seqs[i]->ndim < 1 || seqs[i]->ndim != seqs[0]->ndim ||
            memcmp(seqs[i]->shape + 1, seqs[0]->shape + 1, sizeof(int64_t) * (size_t)(seqs[0]->ndim - 1)))
            return NB_FAIL(NB_ERR_SHAPE, "%s: sequence %d is %s; every one must be [L_i, *] with the first's trailing "
                           "dims (%s)", op, i, nb_fmt_shape(seqs[i]->ndim, seqs[i]->shape, a, sizeof a),
                           nb_fmt_shape(seqs[0]->ndim, seqs[0]->shape, b, sizeof b));
        T = seqs[i]->shape[0] > T ? seqs[i]->shape[0] : T;
    }
    nb_tensor **padded = malloc(sizeof *padded * (size_t)n);
    if (!padded) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    nb_scope *s = nb_op_scope_begin();
    int nd = seqs[0]->ndim;
    int64_t pads[2 * NB_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) { /* pad dim 0: nb_pad's pairs run from the last dim */
        int64_t extra = T - seqs[i]->shape[0];
        pads[2 * (nd - 1)] = padding_left ? extra : 0, pads[2 * (nd - 1) + 1] = padding_left ? 0 : extra;
        padded[i] = nb_pad(seqs[i], pads, 2 * nd, NB_PAD_CONSTANT, padding_value);
    }
    nb_tensor *r = nb_stack(padded, n, batch_first ? 0 : 1);
    free(padded);
    return nb_scope_return(s, r);
}

nb_status nb_pack_sequence(nb_tensor *const *seqs, int n, bool enforce_sorted, nb_packed_sequence *out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "pack_sequence: out is NULL");
    packed_clear(out);
    if (n < 1 || !seqs) return nb_set_error(NB_ERR_INVALID_ARG, "pack_sequence: %d sequences; need at least one", n);
    for (int i = 0; i < n; i++)
        if (!seqs[i]) return nb_check_inputs("pack_sequence", 1, (nb_tensor **)&seqs[i]), nb_last_status();
    int64_t *len = malloc(sizeof *len * (size_t)n);
    if (!len) return nb_set_error(NB_ERR_OOM, "pack_sequence: out of host memory");
    for (int i = 0; i < n; i++) len[i] = seqs[i]->ndim ? seqs[i]->shape[0] : 0;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *lengths = nb_from_data(len, NB_SHAPE(n), NB_I64);
    free(len);
    nb_tensor *padded = nb_pad_sequence(seqs, n, false, 0, false);
    nb_status st = padded && lengths ? nb_pack_padded_sequence(padded, lengths, false, enforce_sorted, out) : nb_last_status();
    if (st != NB_OK) {
        nb_scope_end(s);
        return st;
    }
    return packed_hand_over(s, out);
}

int nb_rnn_packed(const nb_packed_sequence *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params,
                  int n_params, nb_rnn_options opts, nb_packed_sequence *output, nb_tensor **states) {
    const char *op = "rnn_packed";
    if (!output || !states) return nb_set_error(NB_ERR_INVALID_ARG, "%s: output or states is NULL", op), -1;
    packed_clear(output);
    int64_t T;
    int64_t *bs = packed_check(op, input, &T);
    if (!bs) return -1;
    if (input->data->ndim != 2) {
        free(bs);
        return nb_set_error(NB_ERR_SHAPE, "%s: packed data must be [rows, input_size]", op), -1;
    }
    int64_t B = bs[0];
    int64_t *len = malloc(sizeof *len * (size_t)B);
    nb_tensor **steps = malloc(sizeof *steps * (size_t)T);
    if (!len || !steps) {
        free(bs), free(len), free(steps);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op), -1;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_device dev = input->data->storage->device;
    nb_tensor *x = unpack_sorted(input, bs, T, T, 0, len); /* [T, B, I], sorted */
    nb_tensor *len_t = x ? nb_from_data_on(len, NB_SHAPE(B), NB_I64, dev) : NULL;
    nb_tensor *si = input->sorted_indices, *ui = input->unsorted_indices;
    /* the given states are in the caller's order: into the sorted order (PyTorch's permute_hidden) */
    nb_tensor *h0 = hx && si ? nb_index_select(hx, 1, si) : hx, *c0 = cx && si ? nb_index_select(cx, 1, si) : cx;
    opts.batch_first = false;
    nb_tensor *res[3] = {0};
    int n = len_t && (!hx || h0) && (!cx || c0) ? rnn_impl(x, h0, c0, params, n_params, opts, res, steps, len_t, len) : -1;
    if (n > 0) {
        int64_t shape[2] = {T * B, res[0]->shape[2]};
        output->data = nb_index_select(nb_reshape(res[0], 2, shape), 0, packed_rows(bs, T, B, NULL, dev));
        output->batch_sizes = input->batch_sizes;
        output->sorted_indices = si, output->unsorted_indices = ui;
        for (int i = 1; i < n; i++) states[i - 1] = ui ? nb_index_select(res[i], 1, ui) : res[i];
    }
    free(bs), free(len), free(steps);
    bool ok = n > 0 && output->data;
    for (int i = 0; ok && i < n - 1; i++) ok = states[i] != NULL;
    if (!ok) {
        nb_scope_end(s);
        packed_clear(output);
        for (int i = 0; i < n - 1; i++) states[i] = NULL;
        return -1;
    }
    for (int i = 0; i < n - 1; i++) nb_retain(states[i]);
    if (packed_hand_over(s, output) != NB_OK) { /* it ended s */
        for (int i = 0; i < n - 1; i++) nb_release(states[i]), states[i] = NULL;
        return -1;
    }
    for (int i = 0; i < n - 1; i++) nb_scope_adopt(states[i]);
    return n - 1;
}
