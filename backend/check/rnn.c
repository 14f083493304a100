/* rnn.c - the shared contract checks of the recurrent slots (check.h): the
 * geometry of nb_rnn_params, and every view contiguous, of p->dtype
 * (float32 or float64) and of the shape p gives it (nb_slots.def). */
#include <string.h>

#include "check.h"

/* Elements of w: every layer's and direction's parameters, flattened. */
static int64_t weight_numel(const nb_rnn_params *p) {
    int64_t G = p->mode == 2 ? 4 : p->mode == 3 ? 3 : 1, D = p->bidirectional ? 2 : 1, H = p->hidden_size;
    int64_t Ho = p->proj_size ? p->proj_size : H, n = 0;
    for (int64_t l = 0; l < p->num_layers; l++) {
        int64_t in = l ? D * Ho : p->input_size;
        n += D * (G * H * in + G * H * Ho + (p->bias ? 2 * G * H : 0) + (p->proj_size ? Ho * H : 0));
    }
    return n;
}

static nb_status check_params(const char *slot, const nb_rnn_params *p) {
    bool ok = p && (unsigned)p->mode <= 3 && nb_dtype_in(p->dtype, NB_CHK_F) && p->seq_len >= 1 && p->batch >= 1 &&
              p->input_size >= 1 && p->hidden_size >= 1 && p->num_layers >= 1 && p->proj_size >= 0 &&
              (p->proj_size == 0 || (p->mode == 2 && p->proj_size < p->hidden_size));
    if (!ok)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: bad parameters (mode 0-3, float32/float64, sizes >= 1, "
                            "proj_size < hidden_size for LSTM only)", slot);
    for (int64_t b = 0; p->lengths && b < p->batch; b++)
        if (p->lengths[b] < 1 || p->lengths[b] > p->seq_len)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: length %d of sequence %lld outside [1, %lld]", slot,
                                (int)p->lengths[b], (long long)b, (long long)p->seq_len);
    return NB_OK;
}

/* v NULL where it may be (opt), else contiguous, of dt, of shape dims[0..nd). */
static nb_status check_view(const char *slot, const char *what, const nb_kview *v, bool opt, nb_dtype dt, int nd,
                            const int64_t *dims) {
    if (!v) return opt ? NB_OK : nb_set_error(NB_ERR_INVALID_ARG, "%s: %s is NULL", slot, what);
    bool ok = v->dtype == dt && v->ndim == nd && nb_view_is_contiguous(v);
    for (int i = 0; ok && i < nd; i++) ok = v->shape[i] == dims[i];
    if (ok) return NB_OK;
    char b[NB_VIEW_STR];
    return nb_set_error(NB_ERR_SHAPE, "%s: %s is %s; the parameters want a contiguous %s of %d dims", slot, what,
                        nb_view_str(v, b, sizeof b), nb_dtype_name(dt), nd);
}

/* The views both slots share: x, hx, cx, w; y (or dy) and the state views h (hy / dhx), c (cy / dcx). */
static nb_status check_common(const char *slot, const nb_rnn_params *p, const nb_kview *x, const nb_kview *hx,
                              const nb_kview *cx, const nb_kview *w, const nb_kview *const *ys,
                              int ny, const nb_kview *const *hs, const nb_kview *const *cs, int nhc, bool hs_opt) {
    nb_status st = check_params(slot, p);
    if (st) return st;
    bool lstm = p->mode == 2;
    int64_t D = p->bidirectional ? 2 : 1, H = p->hidden_size, Ho = p->proj_size ? p->proj_size : H;
    int64_t xd[3] = {p->seq_len, p->batch, p->input_size}, yd[3] = {p->seq_len, p->batch, D * Ho};
    int64_t hd[3] = {p->num_layers * D, p->batch, Ho}, cd[3] = {p->num_layers * D, p->batch, H};
    int64_t wd[1] = {weight_numel(p)};
    if ((st = check_view(slot, "x", x, false, p->dtype, 3, xd)) || (st = check_view(slot, "hx", hx, false, p->dtype, 3, hd)) ||
        (st = check_view(slot, "w", w, false, p->dtype, 1, wd)))
        return st;
    if (!lstm && cx) return nb_set_error(NB_ERR_INVALID_ARG, "%s: a cell state is for LSTM only", slot);
    if (lstm && (st = check_view(slot, "cx", cx, false, p->dtype, 3, cd))) return st;
    for (int i = 0; i < ny; i++)
        if ((st = check_view(slot, "y", ys[i], false, p->dtype, 3, yd))) return st;
    for (int i = 0; i < nhc; i++) {
        if ((st = check_view(slot, "a hidden state", hs[i], hs_opt, p->dtype, 3, hd))) return st;
        if (!lstm && cs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "%s: a cell state is for LSTM only", slot);
        if (lstm && (st = check_view(slot, "a cell state", cs[i], true, p->dtype, 3, cd))) return st;
    }
    return NB_OK;
}

static nb_status check_reserve(const char *slot, const nb_kview *reserve, bool want) {
    if (!want) return reserve ? nb_set_error(NB_ERR_INVALID_ARG, "%s: a reserve space without training", slot) : NB_OK;
    if (!reserve || reserve->dtype != NB_U8 || reserve->ndim != 1 || !nb_view_is_contiguous(reserve))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: reserve must be a contiguous 1-d uint8 view", slot);
    return NB_OK;
}

nb_status nb_check_rnn_forward(nb_backend *be, const nb_kview *y, const nb_kview *hy, const nb_kview *cy,
                               const nb_kview *reserve, const nb_kview *x, const nb_kview *hx, const nb_kview *cx,
                               const nb_kview *w, const nb_rnn_params *p) {
    (void)be;
    const char *slot = "rnn_forward";
    nb_status st = check_common(slot, p, x, hx, cx, w, &y, 1, &hy, &cy, 1, false);
    if (st == NB_OK && p->mode == 2 && !cy) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: LSTM needs cy", slot);
    return st ? st : check_reserve(slot, reserve, p->training);
}

nb_status nb_check_rnn_backward(nb_backend *be, const nb_kview *dx, const nb_kview *dhx, const nb_kview *dcx,
                                const nb_kview *dw, const nb_kview *x, const nb_kview *hx, const nb_kview *cx,
                                const nb_kview *w, const nb_kview *y, const nb_kview *dy, const nb_kview *dhy,
                                const nb_kview *dcy, const nb_kview *reserve, const nb_rnn_params *p) {
    (void)be;
    const char *slot = "rnn_backward";
    const nb_kview *ys[2] = {y, dy}, *hs[2] = {dhx, dhy}, *cs[2] = {dcx, dcy};
    nb_status st = check_common(slot, p, x, hx, cx, w, ys, 2, hs, cs, 2, true);
    if (st) return st;
    if (!p->training) return nb_set_error(NB_ERR_INVALID_ARG, "%s: needs the training forward's reserve space", slot);
    int64_t xd[3] = {p->seq_len, p->batch, p->input_size};
    if ((st = check_view(slot, "dx", dx, false, p->dtype, 3, xd))) return st;
    if ((st = check_view(slot, "dw", dw, true, p->dtype, 1, w->shape))) return st;
    return check_reserve(slot, reserve, true);
}

nb_status nb_check_rnn_reserve_size(nb_backend *be, const nb_rnn_params *p, int64_t *bytes) {
    (void)be;
    if (!bytes) return nb_set_error(NB_ERR_INVALID_ARG, "rnn_reserve_size: bytes is NULL");
    return check_params("rnn_reserve_size", p);
}
