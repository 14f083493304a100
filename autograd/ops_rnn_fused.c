/* ops_rnn_fused.c - RNN / LSTM / GRU layers in one backend call: the
 * recurrent slots rnn_forward and rnn_backward (cuDNN's RNN API on CUDA, as
 * PyTorch's _cudnn_rnn), where the backend has them and nb_cudnn_enabled().
 * ops_rnn.c hands each run of layers with no dropout between them to
 * nb_rnn_fused and runs the layers as ops where it declines.
 *
 * The node is a once-differentiable custom function (nb_function_apply_as,
 * named after NB_OP_RNN) over x, h0, c0 and the parameters concatenated
 * into one tensor, whose cat carries the weight gradient back to each
 * parameter. cuDNN's backward rewrites the reserve space the forward
 * leaves; a second backward through the same graph (retain_graph) runs the
 * forward again to rebuild it. */
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* What the forward callback needs besides its inputs. */
typedef struct fused_call {
    nb_rnn_params p;
    int64_t reserve_bytes;
} fused_call;

/* The data of a host int32 tensor. */
static int32_t *host_i32(const nb_tensor *t) { return (int32_t *)nb_kview_of(t).data; }

/* The parameters as the backward rebuilds them: from the saved values and tensors. */
static nb_rnn_params params_of(nb_function_ctx *ctx, nb_tensor *x, nb_tensor *h0, nb_tensor *c0, const int32_t *len) {
    nb_rnn_params p = {0};
    p.mode = (int)nb_ctx_value(ctx, "mode");
    p.dtype = x->dtype;
    p.seq_len = x->shape[0], p.batch = x->shape[1], p.input_size = x->shape[2];
    p.hidden_size = c0 ? c0->shape[2] : (int64_t)nb_ctx_value(ctx, "hidden_size");
    p.proj_size = (int64_t)nb_ctx_value(ctx, "proj_size");
    p.bidirectional = nb_ctx_value(ctx, "bidirectional") != 0;
    p.num_layers = h0->shape[0] / (p.bidirectional ? 2 : 1);
    p.bias = nb_ctx_value(ctx, "bias") != 0;
    p.training = true;
    p.tf32 = nb_ctx_value(ctx, "tf32") != 0;
    p.lengths = len;
    return p;
}

/* y, hy, cy (LSTM) and, in training, the reserve space, from one rnn_forward. */
static nb_status run_forward(const nb_rnn_params *p, int64_t reserve_bytes, nb_tensor *x, nb_tensor *h0, nb_tensor *c0,
                             nb_tensor *w, nb_tensor **y, nb_tensor **hy, nb_tensor **cy, nb_tensor **reserve) {
    nb_device dev = x->storage->device;
    int64_t D = p->bidirectional ? 2 : 1, Ho = p->proj_size ? p->proj_size : p->hidden_size;
    *y = nb_empty_on(NB_SHAPE(p->seq_len, p->batch, D * Ho), x->dtype, dev);
    *hy = nb_empty_on(3, h0->shape, x->dtype, dev);
    *cy = c0 ? nb_empty_on(3, c0->shape, x->dtype, dev) : NULL;
    *reserve = p->training ? nb_empty_on(NB_SHAPE(reserve_bytes), NB_U8, dev) : NULL;
    if (!*y || !*hy || (c0 && !*cy) || (p->training && !*reserve)) return nb_last_status();
    nb_kview vy = nb_kview_of(*y), vhy = nb_kview_of(*hy), vx = nb_kview_of(x), vh = nb_kview_of(h0), vw = nb_kview_of(w);
    nb_kview vcy = c0 ? nb_kview_of(*cy) : (nb_kview){0}, vc = c0 ? nb_kview_of(c0) : (nb_kview){0};
    nb_kview vr = *reserve ? nb_kview_of(*reserve) : (nb_kview){0};
    return nb_kernel_rnn_forward(NB_BE(x), &vy, &vhy, c0 ? &vcy : NULL, *reserve ? &vr : NULL, &vx, &vh, c0 ? &vc : NULL,
                                 &vw, p);
}

/* inputs: x, h0, c0 (LSTM, else NULL), w, lengths (a host int32 [B], or NULL) */
static nb_status fused_forward(nb_function_ctx *ctx, nb_tensor *const *in, int n_in, nb_tensor **out) {
    (void)n_in;
    const fused_call *fc = nb_ctx_user(ctx);
    nb_tensor *reserve = NULL, *cy = NULL;
    nb_status st = run_forward(&fc->p, fc->reserve_bytes, in[0], in[1], in[2], in[3], &out[0], &out[1], &cy, &reserve);
    if (st != NB_OK) return st;
    if (in[2]) out[2] = cy;
    if (!fc->p.training) return NB_OK;
    /* saved: x, h0, w, y, reserve, then c0 (LSTM) and the lengths (if given) */
    nb_tensor *keep[7] = {in[0], in[1], in[3], out[0], reserve};
    int n = 5;
    if (in[2]) keep[n++] = in[2];
    if (in[4]) keep[n++] = in[4];
    st = nb_ctx_save_for_backward(ctx, keep, n);
    const struct { const char *k; double v; } vals[] = {
        {"mode", fc->p.mode}, {"hidden_size", (double)fc->p.hidden_size}, {"proj_size", (double)fc->p.proj_size},
        {"bidirectional", fc->p.bidirectional}, {"bias", fc->p.bias}, {"reserve_bytes", (double)fc->reserve_bytes},
        {"lstm", in[2] != NULL}, {"lengths", in[4] != NULL}, {"backwards", 0}, {"tf32", fc->p.tf32}};
    for (size_t i = 0; st == NB_OK && i < sizeof vals / sizeof vals[0]; i++) st = nb_ctx_set_value(ctx, vals[i].k, vals[i].v);
    return st;
}

static nb_status fused_backward(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    nb_tensor *x = nb_ctx_saved_tensor(ctx, 0), *h0 = nb_ctx_saved_tensor(ctx, 1), *w = nb_ctx_saved_tensor(ctx, 2);
    nb_tensor *y = nb_ctx_saved_tensor(ctx, 3), *reserve = nb_ctx_saved_tensor(ctx, 4);
    bool lstm = nb_ctx_value(ctx, "lstm") != 0, has_len = nb_ctx_value(ctx, "lengths") != 0;
    nb_tensor *c0 = lstm ? nb_ctx_saved_tensor(ctx, 5) : NULL, *len = has_len ? nb_ctx_saved_tensor(ctx, lstm ? 6 : 5) : NULL;
    if (!x || !h0 || !w || !y || !reserve || (lstm && !c0) || (has_len && !len)) return nb_last_status();
    nb_rnn_params p = params_of(ctx, x, h0, c0, len ? host_i32(len) : NULL);
    double runs = nb_ctx_value(ctx, "backwards");
    if (runs > 0) { /* cuDNN rewrote the reserve space: a forward makes it again (and y, the same bits) */
        nb_tensor *hy, *cy;
        nb_status st = run_forward(&p, (int64_t)nb_ctx_value(ctx, "reserve_bytes"), x, h0, c0, w, &y, &hy, &cy, &reserve);
        if (st != NB_OK) return st;
    }
    nb_status st = nb_ctx_set_value(ctx, "backwards", runs + 1);
    if (st != NB_OK) return st;
    nb_device dev = x->storage->device;
    nb_tensor *dy = nb_contiguous(gout[0]), *dhy = nb_contiguous(gout[1]), *dcy = lstm ? nb_contiguous(gout[2]) : NULL;
    /* with lengths, zeros where cuDNN leaves the padding of dx unwritten */
    nb_tensor *dx = len ? nb_full_on(3, x->shape, 0, x->dtype, dev) : nb_empty_on(3, x->shape, x->dtype, dev);
    bool want_h = nb_ctx_needs_input_grad(ctx, 1), want_c = lstm && nb_ctx_needs_input_grad(ctx, 2);
    bool want_w = nb_ctx_needs_input_grad(ctx, 3);
    nb_tensor *dhx = want_h ? nb_empty_on(3, h0->shape, x->dtype, dev) : NULL;
    nb_tensor *dcx = want_c ? nb_empty_on(3, c0->shape, x->dtype, dev) : NULL;
    nb_tensor *dw = want_w ? nb_empty_on(1, w->shape, x->dtype, dev) : NULL;
    if (!dy || !dhy || (lstm && !dcy) || !dx || (want_h && !dhx) || (want_c && !dcx) || (want_w && !dw))
        return nb_last_status();
    nb_kview v[14];
    const nb_tensor *t[14] = {dx, dhx, dcx, dw, x, h0, c0, w, y, dy, dhy, dcy, reserve, NULL};
    for (int i = 0; i < 13; i++)
        if (t[i]) v[i] = nb_kview_of(t[i]);
#define V(i) (t[i] ? &v[i] : NULL)
    st = nb_kernel_rnn_backward(NB_BE(x), V(0), V(1), V(2), V(3), V(4), V(5), V(6), V(7), V(8), V(9), V(10), V(11),
                                V(12), &p);
#undef V
    if (st != NB_OK) return st;
    gin[0] = nb_ctx_needs_input_grad(ctx, 0) ? dx : NULL, gin[1] = dhx, gin[2] = dcx, gin[3] = dw;
    return NB_OK;
}

int nb_rnn_fused(nb_rnn_mode mode, nb_tensor *x, nb_tensor *h0, nb_tensor *c0, nb_tensor *const *params, int n_params,
                 int64_t num_layers, bool bidirectional, bool bias, int64_t proj_size, const int64_t *lengths,
                 nb_tensor **out) {
    if (!x || !h0 || (mode == NB_RNN_LSTM && !c0)) return -1; /* a failed narrow: its error is set */
    nb_backend *be = NB_BE(x);
    if (!nb_cudnn_enabled() || !nb_kernel_has(be, rnn_forward) || !nb_kernel_has(be, rnn_backward) ||
        !nb_kernel_has(be, rnn_reserve_size) || (x->dtype != NB_F32 && x->dtype != NB_F64))
        return 0;
    int64_t B = x->shape[1];
    if (B < 1) return 0;
    bool training = nb_is_grad_enabled() && (x->requires_grad || h0->requires_grad || (c0 && c0->requires_grad));
    for (int i = 0; i < n_params && !training; i++) training = nb_is_grad_enabled() && params[i]->requires_grad;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *len = NULL;
    if (lengths) { /* a host tensor: the slots read the lengths on the host */
        len = nb_empty_on(NB_SHAPE(B), NB_I32, NB_CPU);
        int32_t *l = len ? host_i32(len) : NULL;
        for (int64_t b = 0; l && b < B; b++) l[b] = (int32_t)lengths[b];
        if (!len) return nb_scope_end(s), -1;
    }
    fused_call fc = {.p = {.mode = (int)mode, .dtype = x->dtype, .seq_len = x->shape[0], .batch = B,
                           .input_size = x->shape[2], .hidden_size = params[1]->shape[0] / (mode == NB_RNN_LSTM ? 4 : mode == NB_RNN_GRU ? 3 : 1),
                           .proj_size = proj_size, .num_layers = num_layers, .bidirectional = bidirectional,
                           .bias = bias, .training = training,
                           .tf32 = strcmp(nb_get_float32_matmul_precision(), "highest") != 0,
                           .lengths = len ? host_i32(len) : NULL}};
    fused_call query = fc;
    query.p.training = true;
    nb_status st = nb_kernel_rnn_reserve_size(be, &query.p, &fc.reserve_bytes);
    if (st == NB_ERR_UNSUPPORTED) { /* this geometry or dtype: the layers run as ops */
        nb_clear_error();
        nb_scope_end(s);
        return 0;
    }
    nb_tensor **flat = st == NB_OK ? malloc(sizeof *flat * (size_t)n_params) : NULL;
    if (st == NB_OK && !flat) nb_set_error(NB_ERR_OOM, "rnn: out of host memory");
    for (int i = 0; flat && i < n_params; i++) flat[i] = nb_reshape(params[i], NB_SHAPE(nb_numel(params[i])));
    nb_tensor *w = flat ? nb_cat(flat, n_params, 0) : NULL;
    free(flat);
    nb_tensor *in[5] = {nb_contiguous(x), nb_contiguous(h0), c0 ? nb_contiguous(c0) : NULL, w, len};
    int n_out = c0 ? 3 : 2;
    nb_function fn = {.name = "rnn (cuDNN)", .n_outputs = n_out, .forward = fused_forward, .backward = fused_backward};
    bool ok = w && in[0] && in[1] && (!c0 || in[2]) &&
              nb_function_apply_as(NB_OP_RNN, &fn, in, 5, out, &fc) == NB_OK;
    for (int i = 0; ok && i < n_out; i++) nb_retain(out[i]);
    nb_scope_end(s);
    if (!ok) return -1;
    for (int i = 0; i < n_out; i++) ok = (out[i] = nb_scope_adopt(out[i])) && ok;
    return ok ? 1 : -1;
}
