/* ops_conv.c - conv2d, conv1d and conv_transpose2d (torch.nn.functional's
 * names, arguments and defaults): shape checks, output sizes, and the
 * backward rules, all on the backend's three convolution kernels
 * (backend/cpu/conv.c):
 *   conv2d:           out = conv(x, w) + b; gx = conv_backward_input(g, w),
 *                     gw, gb = conv_backward_weight(g, x)
 *   conv_transpose2d: out = conv_backward_input(x, w) + b (the adjoint of a
 *                     convolution); gx = conv(g, w), gw = conv_backward_weight
 *                     with the roles of input and output swapped
 *   conv1d:           conv2d on [N, C, 1, L] views.
 * padding='same' follows PyTorch: total padding dilation*(k-1) per dim, the
 * left/top side gets half rounded down and the odd one goes right/bottom;
 * the kernels take the left padding and the larger output size, and read
 * the missing right/bottom column as zeros. conv_transpose1d, conv3d,
 * conv_transpose3d and deform_conv2d are composites at the end (no kernels
 * of their own). Tests: tests/test_ops_conv.c. */
#include <string.h>

#include "nb_autograd_impl.h"

/* The resolved geometry of one call: kernel parameters and output size. */
typedef struct conv_setup {
    nb_conv_params p;
    int64_t out[2]; /* output H, W */
} conv_setup;

/* User options of either dimensionality, as 2-d arrays (1-d: H is trivial). */
typedef struct conv_opts {
    int64_t stride[2], padding[2], dilation[2], output_padding[2], groups;
    bool same;
} conv_opts;

static char *shape_of(const nb_tensor *t, char *buf) { return nb_fmt_shape(t->ndim, t->shape, buf, NB_SHAPE_BUF); }

static bool bad_opts(const char *op, conv_opts *o) {
    for (int d = 0; d < 2; d++) {
        if (o->stride[d] == 0) o->stride[d] = 1;
        if (o->dilation[d] == 0) o->dilation[d] = 1;
        if (o->stride[d] < 0 || o->dilation[d] < 0 || o->padding[d] < 0 || o->output_padding[d] < 0) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: stride (%lld), dilation (%lld), padding (%lld) and output_padding "
                         "(%lld) must not be negative", op, (long long)o->stride[d], (long long)o->dilation[d],
                         (long long)o->padding[d], (long long)o->output_padding[d]);
            return true;
        }
    }
    if (o->groups == 0) o->groups = 1;
    if (o->groups < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: groups must be positive, got %lld", op, (long long)o->groups);
        return true;
    }
    if (o->same && (o->stride[0] != 1 || o->stride[1] != 1)) {
        nb_set_error(NB_ERR_INVALID_ARG,
                     "%s: padding='same' is not supported for strided convolutions (stride %lld, %lld)", op,
                     (long long)o->stride[0], (long long)o->stride[1]);
        return true;
    }
    if (o->same && (o->padding[0] || o->padding[1])) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: padding='same' excludes explicit padding (%lld, %lld)", op,
                     (long long)o->padding[0], (long long)o->padding[1]);
        return true;
    }
    return false;
}

/* Checks x [N, Cx, *sp], w [w0, w1, *k] (sd spatial dims), bias [Cb].
 * transposed: Cx == w0, Cout = w1 * groups; else Cx == w1 * groups, Cout = w0. */
static bool check_shapes(const char *op, int sd, bool transposed, nb_tensor *x, nb_tensor *w, nb_tensor *bias,
                         const conv_opts *o) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (x->ndim != sd + 2 || w->ndim != sd + 2) {
        nb_set_error(NB_ERR_SHAPE,
                     "%s: expected %d-d input (or %d-d unbatched) and %d-d weight, got input %s, weight %s", op,
                     sd + 2, sd + 1, sd + 2, shape_of(x, a), shape_of(w, b));
        return false;
    }
    int64_t cin = x->shape[1], g = o->groups;
    int64_t cout = transposed ? w->shape[1] * g : w->shape[0];
    bool fit = transposed ? w->shape[0] == cin : w->shape[1] * g == cin;
    if (cin % g || cout % g) {
        nb_set_error(NB_ERR_SHAPE, "%s: channels must be divisible by groups %lld (input %s, weight %s)", op,
                     (long long)g, shape_of(x, a), shape_of(w, b));
        return false;
    }
    if (!fit) {
        nb_set_error(NB_ERR_SHAPE, "%s: input %s has %lld channels but weight %s with groups %lld expects %lld", op,
                     shape_of(x, a), (long long)cin, shape_of(w, b), (long long)g,
                     (long long)(transposed ? w->shape[0] : w->shape[1] * g));
        return false;
    }
    for (int d = 2; d < sd + 2; d++)
        if (w->shape[d] < 1) {
            nb_set_error(NB_ERR_SHAPE, "%s: weight %s has an empty kernel dim", op, shape_of(w, b));
            return false;
        }
    if (bias && (bias->ndim != 1 || bias->shape[0] != cout)) {
        nb_set_error(NB_ERR_SHAPE, "%s: bias %s must be [%lld] (the output channels)", op, shape_of(bias, a),
                     (long long)cout);
        return false;
    }
    return true;
}

/* Fills cs for a convolution of x by w (sd spatial dims); false with an error set. */
static bool conv_geometry(const char *op, int sd, nb_tensor *x, nb_tensor *w, const conv_opts *o, conv_setup *cs) {
    memset(cs, 0, sizeof *cs);
    cs->p.groups = o->groups;
    for (int d = 0; d < 2; d++) {
        int ax = d - (2 - sd); /* spatial axis of the tensors; < 0: the trivial H of a 1-d conv */
        int64_t in = ax < 0 ? 1 : x->shape[2 + ax], k = ax < 0 ? 1 : w->shape[2 + ax];
        int64_t s = o->stride[d], dil = o->dilation[d], pad = o->padding[d], span = dil * (k - 1) + 1;
        cs->p.stride[d] = s, cs->p.dilation[d] = dil;
        if (o->same) {
            cs->p.padding[d] = dil * (k - 1) / 2; /* the extra one of an odd total goes right */
            cs->out[d] = in;
            continue;
        }
        cs->p.padding[d] = pad;
        if (in + 2 * pad < span) {
            char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
            nb_set_error(NB_ERR_SHAPE, "%s: padded input size %lld (input %s, padding %lld) is smaller than the "
                         "dilated kernel size %lld (weight %s, dilation %lld)", op, (long long)(in + 2 * pad),
                         shape_of(x, a), (long long)pad, (long long)span, shape_of(w, b), (long long)dil);
            return false;
        }
        cs->out[d] = (in + 2 * pad - span) / s + 1;
    }
    return true;
}

static nb_tensor *new_like_shape(const nb_tensor *t, const nb_tensor *like) {
    return nb_tensor_new(t->ndim, t->shape, like->dtype, like->storage->device);
}

/* The bias gradient: g summed over N, H, W. */
static nb_tensor *bias_grad(nb_tensor *g) { return nb_sum(g, (const int[]){0, 2, 3}, 3, false); }

/* Records the node of a convolution-like op: saves x when w needs a
 * gradient and w when x does (each is needed only for the other's). */
static nb_tensor *record_conv(nb_op_id op, nb_tensor *out, nb_tensor *const *in,
                              nb_tensor *xc, nb_tensor *wc, const nb_conv_params *p) {
    bool failed;
    nb_node *n = nb_record(op, out, 3, in, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.conv = *p;
        if (n->in[1]) nb_save(n, 0, xc);
        if (n->in[0]) nb_save(n, 1, wc);
    }
    return out;
}

/* ---- the gradients as recorded ops (create_graph) ------------------------------------
 * A convolution F(x, w) is bilinear, so its gradients are too:
 *   A(g, w) = dF/dx^T g (conv2d_backward_input), B(x, g) = dF/dw^T g
 *   (conv2d_backward_weight), and <A(g, w), u> = <g, F(u, w)> = <B(u, g), w>.
 * Each of F, A, B is recorded as a node whose rule is the other two:
 *   F: dx = A(gg, w), dw = B(x, gg)   (conv2d's own rule)
 *   A: dg = F(gg, w), dw = B(gg, g)
 *   B: dx = A(g, gg), dg = F(x, gg)
 * so gradients of any order run on the three fused kernels. */

static nb_tensor *conv_a(nb_tensor *g, nb_tensor *w, const nb_conv_params *p, const int64_t *x_shape);
static nb_tensor *conv_b(nb_tensor *x, nb_tensor *g, const nb_conv_params *p, const int64_t *w_shape);

/* F(x, w) without bias into a [N, Cout, Ho, Wo] result of out_shape, recorded as conv2d. */
static nb_tensor *conv_f(nb_tensor *x, nb_tensor *w, const nb_conv_params *p, const int64_t *out_shape) {
    nb_tensor *xc = nb_contiguous(x), *wc = nb_contiguous(w);
    nb_tensor *out = xc && wc ? nb_tensor_new(4, out_shape, x->dtype, x->storage->device) : NULL;
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc), vw = nb_kview_of(wc);
    if (nb_kernel_conv2d(NB_BE(x), &vo, &vx, &vw, NULL, p) != NB_OK) return NULL;
    return record_conv(NB_OP_CONV2D, out, (nb_tensor *[]){x, w, NULL}, xc, wc, p);
}

/* saved: [0] g, [1] w; p.conv_grad: the convolution and g's shape */
static nb_status conv_a_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    const nb_conv_params *p = &n->p.conv_grad.conv;
    if (n->in[0] && !(gin[0] = conv_f(gg, n->saved[1], p, n->p.conv_grad.shape))) return nb_last_status();
    if (n->in[1] && !(gin[1] = conv_b(gg, n->saved[0], p, n->in[1]->shape))) return nb_last_status();
    return NB_OK;
}

/* saved: [0] x, [1] g */
static nb_status conv_b_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    const nb_conv_params *p = &n->p.conv_grad.conv;
    if (n->in[0] && !(gin[0] = conv_a(n->saved[1], gg, p, n->in[0]->shape))) return nb_last_status();
    if (n->in[1] && !(gin[1] = conv_f(n->saved[0], gg, p, n->p.conv_grad.shape))) return nb_last_status();
    return NB_OK;
}

/* Records a gradient node of a convolution on out = fn(a, b); g_shape is
 * the convolution's output shape. Each input is saved for the other's rule. */
static nb_tensor *record_conv_grad(nb_backward_fn fn, nb_tensor *out, nb_tensor *a, nb_tensor *b,
                                   const nb_conv_params *p, const int64_t *g_shape) {
    nb_node src = {.op = NB_OP_CONV2D};
    src.p.conv_grad.conv = *p;
    memcpy(src.p.conv_grad.shape, g_shape, sizeof src.p.conv_grad.shape);
    bool failed;
    nb_node *n = nb_record_grad(&src, fn, out, 2, (nb_tensor *[]){a, b}, &failed);
    if (failed) return NULL;
    if (n) {
        if (n->in[1]) nb_save(n, 0, a);
        if (n->in[0]) nb_save(n, 1, b);
    }
    return out;
}

/* A(g, w): the input gradient, of x_shape. */
static nb_tensor *conv_a(nb_tensor *g, nb_tensor *w, const nb_conv_params *p, const int64_t *x_shape) {
    nb_tensor *gc = nb_contiguous(g), *wc = nb_contiguous(w);
    nb_tensor *gx = gc && wc ? nb_tensor_new(4, x_shape, g->dtype, g->storage->device) : NULL;
    if (!gx) return NULL;
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc), vw = nb_kview_of(wc);
    if (nb_kernel_conv2d_backward_input(NB_BE(g), &vgx, &vg, &vw, p) != NB_OK) return NULL;
    return record_conv_grad(conv_a_backward, gx, g, w, p, g->shape);
}

/* B(x, g): the weight gradient, of w_shape. */
static nb_tensor *conv_b(nb_tensor *x, nb_tensor *g, const nb_conv_params *p, const int64_t *w_shape) {
    nb_tensor *xc = nb_contiguous(x), *gc = nb_contiguous(g);
    nb_tensor *gw = xc && gc ? nb_tensor_new(4, w_shape, g->dtype, g->storage->device) : NULL;
    if (!gw) return NULL;
    nb_kview vgw = nb_kview_of(gw), vg = nb_kview_of(gc), vx = nb_kview_of(xc);
    if (nb_kernel_conv2d_backward_weight(NB_BE(g), &vgw, NULL, &vg, &vx, p) != NB_OK) return NULL;
    return record_conv_grad(conv_b_backward, gw, x, g, p, g->shape);
}

/* ---- conv2d -------------------------------------------------------------------- */

nb_status nb_bw_conv2d(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_conv_params p = n->p.conv;
    if (nb_needs_grad(3, (nb_tensor *[]){g, n->saved[0], n->saved[1]})) { /* create_graph */
        if (n->in[0] && !(gin[0] = conv_a(g, n->saved[1], &p, n->in[0]->shape))) return nb_last_status();
        if (n->in[1] && !(gin[1] = conv_b(n->saved[0], g, &p, n->in[1]->shape))) return nb_last_status();
        if (n->in[2] && !(gin[2] = bias_grad(g))) return nb_last_status();
        return NB_OK;
    }
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    nb_kview vg = nb_kview_of(gc);
    if (n->in[0]) {
        nb_tensor *gx = new_like_shape(n->in[0], gc);
        if (!gx) return nb_last_status();
        nb_kview vgx = nb_kview_of(gx), vw = nb_kview_of(n->saved[1]);
        nb_status st = nb_kernel_conv2d_backward_input(NB_BE(gc), &vgx, &vg, &vw, &p);
        if (st) return st;
        gin[0] = gx;
    }
    if (n->in[1]) {
        nb_tensor *gw = new_like_shape(n->in[1], gc), *gb = n->in[2] ? new_like_shape(n->in[2], gc) : NULL;
        if (!gw || (n->in[2] && !gb)) return nb_last_status();
        nb_kview vgw = nb_kview_of(gw), vgb = gb ? nb_kview_of(gb) : (nb_kview){0}, vx = nb_kview_of(n->saved[0]);
        nb_status st = nb_kernel_conv2d_backward_weight(NB_BE(gc), &vgw, gb ? &vgb : NULL, &vg, &vx, &p);
        if (st) return st;
        gin[1] = gw, gin[2] = gb;
    } else if (n->in[2]) {
        if (!(gin[2] = bias_grad(gc))) return nb_last_status();
    }
    return NB_OK;
}

/* x [N, C, H, W], w [Cout, C/groups, kh, kw] already checked. */
static nb_tensor *conv2d_run(nb_tensor *x, nb_tensor *w, nb_tensor *bias, const conv_setup *cs) {
    nb_tensor *xc = nb_contiguous(x), *wc = nb_contiguous(w), *bc = bias ? nb_contiguous(bias) : NULL;
    if (!xc || !wc || (bias && !bc)) return NULL;
    nb_tensor *out = nb_tensor_new(NB_SHAPE(x->shape[0], w->shape[0], cs->out[0], cs->out[1]), x->dtype,
                                   x->storage->device);
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc), vw = nb_kview_of(wc);
    nb_kview vb = bc ? nb_kview_of(bc) : (nb_kview){0};
    if (nb_kernel_conv2d(NB_BE(x), &vo, &vx, &vw, bc ? &vb : NULL, &cs->p) != NB_OK) return NULL;
    nb_tensor *in[3] = {x, w, bias};
    return record_conv(NB_OP_CONV2D, out, in, xc, wc, &cs->p);
}

/* sd = 2 (conv2d) or 1 (conv1d, run on [N, C, 1, L] views). */
static nb_tensor *conv_impl(const char *op, int sd, nb_tensor *x, nb_tensor *w, nb_tensor *bias, conv_opts o) {
    nb_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_check_inputs(op, n_in, in) || !nb_check_dtypes(sd == 1 ? NB_OP_CONV1D : NB_OP_CONV2D, n_in, in) ||
        bad_opts(op, &o))
        return NULL;
    if (x->ndim == sd + 1) /* unbatched input, as PyTorch */
        return nb_squeeze(conv_impl(op, sd, nb_unsqueeze(x, 0), w, bias, o), 0);
    conv_setup cs;
    if (!check_shapes(op, sd, false, x, w, bias, &o) || !conv_geometry(op, sd, x, w, &o, &cs)) return NULL;
    if (sd == 2) return conv2d_run(x, w, bias, &cs);
    return nb_squeeze(conv2d_run(nb_unsqueeze(x, 2), nb_unsqueeze(w, 2), bias, &cs), 2);
}

nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_options opts) {
    conv_opts o = {.groups = opts.groups, .same = opts.padding_same};
    for (int d = 0; d < 2; d++)
        o.stride[d] = opts.stride[d], o.padding[d] = opts.padding[d], o.dilation[d] = opts.dilation[d];
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_CONV2D, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, conv_impl("conv2d", 2, in[0], in[1], in[2], o));
}

nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv1d_options opts) {
    conv_opts o = {.stride = {1, opts.stride}, .padding = {0, opts.padding}, .dilation = {1, opts.dilation},
                   .groups = opts.groups, .same = opts.padding_same};
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_CONV1D, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, conv_impl("conv1d", 1, in[0], in[1], in[2], o));
}

/* ---- conv_transpose2d ----------------------------------------------------------- */

/* The adjoint of conv2d with weight w: x [N, Cin, H, W] plays the
 * convolution's output and out [N, Cout, Ho, Wo] its input. */
nb_status nb_bw_conv_t2d(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_conv_params p = n->p.conv;
    if (nb_needs_grad(3, (nb_tensor *[]){g, n->saved[0], n->saved[1]})) { /* create_graph: y = A(x, w) */
        if (n->in[0] && !(gin[0] = conv_f(g, n->saved[1], &p, n->in[0]->shape))) return nb_last_status();
        if (n->in[1] && !(gin[1] = conv_b(g, n->saved[0], &p, n->in[1]->shape))) return nb_last_status();
        if (n->in[2] && !(gin[2] = bias_grad(g))) return nb_last_status();
        return NB_OK;
    }
    nb_tensor *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    nb_kview vg = nb_kview_of(gc);
    if (n->in[0]) {
        nb_tensor *gx = new_like_shape(n->in[0], gc);
        if (!gx) return nb_last_status();
        nb_kview vgx = nb_kview_of(gx), vw = nb_kview_of(n->saved[1]);
        nb_status st = nb_kernel_conv2d(NB_BE(gc), &vgx, &vg, &vw, NULL, &p);
        if (st) return st;
        gin[0] = gx;
    }
    if (n->in[1]) {
        nb_tensor *gw = new_like_shape(n->in[1], gc);
        if (!gw) return nb_last_status();
        nb_kview vgw = nb_kview_of(gw), vx = nb_kview_of(n->saved[0]);
        nb_status st = nb_kernel_conv2d_backward_weight(NB_BE(gc), &vgw, NULL, &vx, &vg, &p);
        if (st) return st;
        gin[1] = gw;
    }
    if (n->in[2] && !(gin[2] = bias_grad(gc))) return nb_last_status();
    return NB_OK;
}

static nb_tensor *conv_t2d_impl(nb_tensor *x, nb_tensor *w, nb_tensor *bias, conv_opts o) {
    const char *op = "conv_transpose2d";
    nb_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_check_inputs(op, n_in, in) || !nb_check_dtypes(NB_OP_CONV_TRANSPOSE2D, n_in, in) || bad_opts(op, &o))
        return NULL;
    if (x->ndim == 3) return nb_squeeze(conv_t2d_impl(nb_unsqueeze(x, 0), w, bias, o), 0);
    if (!check_shapes(op, 2, true, x, w, bias, &o)) return NULL;
    nb_conv_params p = {.groups = o.groups};
    int64_t out[2];
    for (int d = 0; d < 2; d++) {
        int64_t s = o.stride[d], dil = o.dilation[d], k = w->shape[2 + d], op_ = o.output_padding[d];
        if (op_ >= s && op_ >= dil)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: output_padding %lld must be smaller than either stride %lld or "
                           "dilation %lld", op, (long long)op_, (long long)s, (long long)dil);
        out[d] = (x->shape[2 + d] - 1) * s - 2 * o.padding[d] + dil * (k - 1) + op_ + 1;
        if (out[d] < 1) {
            char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
            return NB_FAIL(NB_ERR_SHAPE, "%s: input %s, weight %s, padding (%lld, %lld) give a non-positive output "
                           "size %lld", op, shape_of(x, a), shape_of(w, b), (long long)o.padding[0],
                           (long long)o.padding[1], (long long)out[d]);
        }
        p.stride[d] = s, p.padding[d] = o.padding[d], p.dilation[d] = dil, p.output_padding[d] = op_;
    }
    nb_tensor *xc = nb_contiguous(x), *wc = nb_contiguous(w);
    nb_tensor *y = nb_tensor_new(NB_SHAPE(x->shape[0], w->shape[1] * o.groups, out[0], out[1]), x->dtype,
                                 x->storage->device);
    if (!xc || !wc || !y) return NULL;
    nb_kview vy = nb_kview_of(y), vx = nb_kview_of(xc), vw = nb_kview_of(wc);
    if (nb_kernel_conv2d_backward_input(NB_BE(x), &vy, &vx, &vw, &p) != NB_OK) return NULL;
    if (bias) { /* y += bias[c], bias seen as [1, Cout, 1, 1] expanded */
        nb_kview vb = nb_kview_of(bias);
        int64_t bs = vb.strides[0];
        vb.ndim = 4;
        memcpy(vb.shape, vy.shape, sizeof vb.shape);
        memset(vb.strides, 0, sizeof vb.strides);
        vb.strides[1] = bs;
        if (nb_kernel_binary(NB_BE(x), NB_BINARY_ADD, &vy, &vy, &vb) != NB_OK) return NULL;
    }
    return record_conv(NB_OP_CONV_TRANSPOSE2D, y, in, xc, wc, &p);
}

nb_tensor *nb_conv_transpose2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv_transpose2d_options opts) {
    conv_opts o = {.groups = opts.groups};
    for (int d = 0; d < 2; d++)
        o.stride[d] = opts.stride[d], o.padding[d] = opts.padding[d], o.dilation[d] = opts.dilation[d],
        o.output_padding[d] = opts.output_padding[d];
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_CONV_TRANSPOSE2D, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, conv_t2d_impl(in[0], in[1], in[2], o));
}

/* ---- conv_transpose1d: conv_transpose2d on [N, C, 1, L] views ----------------- */

nb_tensor *nb_conv_transpose1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv_transpose1d_options opts) {
    const char *op = "conv_transpose1d";
    nb_tensor *in[3] = {x, weight, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_autocast_inputs(NB_OP_CONV_TRANSPOSE1D, 3, in)) return NULL;
    x = in[0], weight = in[1], bias = in[2];
    nb_scope *s = nb_op_scope_begin();
    if (!nb_check_inputs(op, n_in, in) || !nb_check_dtypes(NB_OP_CONV_TRANSPOSE1D, n_in, in))
        return nb_scope_return(s, NULL);
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if ((x->ndim != 3 && x->ndim != 2) || weight->ndim != 3)
        return nb_scope_return(s, NB_FAIL(NB_ERR_SHAPE, "%s: expected 3-d input (or 2-d unbatched) and 3-d weight, "
                                          "got input %s, weight %s", op, shape_of(x, a), shape_of(weight, b)));
    nb_conv_transpose2d_options o = {.stride = {1, opts.stride}, .padding = {0, opts.padding},
                                     .output_padding = {0, opts.output_padding}, .dilation = {1, opts.dilation},
                                     .groups = opts.groups};
    int h = x->ndim - 1; /* where the trivial H goes: before L */
    nb_tensor *y = nb_conv_transpose2d(nb_unsqueeze(x, h), nb_unsqueeze(weight, 2), bias, o);
    return nb_scope_return(s, y ? nb_squeeze(y, h) : NULL);
}

/* ---- conv3d and conv_transpose3d: sums of 2-d convolutions over the depth taps -- */

/* A 3-d convolution is, for each kernel depth tap kz, a 2-d convolution of
 * the input depth slices kz*dd, kz*dd + sd, ... (one per output depth,
 * batched as [N*Do, C, H, W]) with w[:, :, kz], summed over kz: the same
 * multiplications as a direct 3-d kernel, on the 2-d kernels (and their
 * backward rules, through autograd). */

static bool bad_opts3(const char *op, int64_t *stride, int64_t *dilation, const int64_t *padding,
                      const int64_t *output_padding, int64_t *groups) {
    for (int d = 0; d < 3; d++) {
        if (stride[d] == 0) stride[d] = 1;
        if (dilation[d] == 0) dilation[d] = 1;
        if (stride[d] < 0 || dilation[d] < 0 || padding[d] < 0 || (output_padding && output_padding[d] < 0)) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: stride (%lld), dilation (%lld), padding (%lld)%s must not be "
                         "negative", op, (long long)stride[d], (long long)dilation[d], (long long)padding[d],
                         output_padding ? " and output_padding" : "");
            return true;
        }
    }
    if (*groups == 0) *groups = 1;
    if (*groups < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: groups must be positive, got %lld", op, (long long)*groups);
        return true;
    }
    return false;
}

/* w[:, :, kz] as [w0, w1, kh, kw] */
static nb_tensor *depth_tap(nb_tensor *w, int64_t kz) { return nb_squeeze(nb_narrow(w, 2, kz, 1), 2); }

static nb_tensor *conv3d_impl(nb_tensor *x, nb_tensor *w, nb_tensor *bias, nb_conv3d_options o) {
    const char *op = "conv3d";
    nb_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_check_inputs(op, n_in, in) || !nb_check_dtypes(NB_OP_CONV3D, n_in, in) ||
        bad_opts3(op, o.stride, o.dilation, o.padding, NULL, &o.groups))
        return NULL;
    if (x->ndim == 4) return nb_squeeze(conv3d_impl(nb_unsqueeze(x, 0), w, bias, o), 0);
    conv_opts co = {.groups = o.groups, .same = o.padding_same};
    if (o.padding_same && (o.stride[0] != 1 || o.stride[1] != 1 || o.stride[2] != 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: padding='same' is not supported for strided convolutions", op);
    if (o.padding_same && (o.padding[0] || o.padding[1] || o.padding[2]))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: padding='same' excludes explicit padding", op);
    if (!check_shapes(op, 3, false, x, w, bias, &co)) return NULL;
    int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2], kd = w->shape[2], Co = w->shape[0];
    int64_t sd = o.stride[0], dd = o.dilation[0], span = dd * (kd - 1) + 1;
    int64_t pl = o.padding_same ? dd * (kd - 1) / 2 : o.padding[0], pr = o.padding_same ? dd * (kd - 1) - pl : pl;
    if (D + pl + pr < span) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: padded input depth %lld (input %s, padding %lld) is smaller than the dilated "
                       "kernel depth %lld (weight %s, dilation %lld)", op, (long long)(D + pl + pr), shape_of(x, a),
                       (long long)pl, (long long)span, shape_of(w, b), (long long)dd);
    }
    int64_t Do = (D + pl + pr - span) / sd + 1;
    nb_tensor *xp = pl || pr ? nb_pad(x, (const int64_t[]){0, 0, 0, 0, pl, pr}, 6, NB_PAD_CONSTANT, 0) : x;
    nb_conv2d_options o2 = {.stride = {o.stride[1], o.stride[2]}, .padding = {o.padding[1], o.padding[2]},
                            .dilation = {o.dilation[1], o.dilation[2]}, .groups = o.groups,
                            .padding_same = o.padding_same};
    nb_tensor *acc = NULL;
    for (int64_t kz = 0; kz < kd && xp; kz++) {
        nb_tensor *slab = nb_slice(xp, 2, kz * dd, kz * dd + sd * (Do - 1) + 1, sd); /* [N, C, Do, H, W] */
        slab = nb_reshape(nb_permute(slab, (const int[]){0, 2, 1, 3, 4}), NB_SHAPE(N * Do, C, x->shape[3], x->shape[4]));
        nb_tensor *y = nb_conv2d(slab, depth_tap(w, kz), kz == 0 ? bias : NULL, o2); /* [N*Do, Co, Ho, Wo] */
        acc = kz == 0 ? y : nb_add(acc, y);
        if (!acc) return NULL;
    }
    if (!acc) return NULL;
    acc = nb_reshape(acc, NB_SHAPE(N, Do, Co, acc->shape[2], acc->shape[3]));
    return nb_contiguous(nb_permute(acc, (const int[]){0, 2, 1, 3, 4}));
}

/* conv3d and conv_transpose3d are on no autocast list: they run in their
 * inputs' dtype, so their 2-d taps (on the lower-precision list
 * themselves) run with autocast paused and the taps sum in that dtype. */
nb_tensor *nb_conv3d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv3d_options opts) {
    nb_scope *s = nb_op_scope_begin();
    nb_autocast_pause(true);
    nb_tensor *y = conv3d_impl(x, weight, bias, opts);
    nb_autocast_pause(false);
    return nb_scope_return(s, y);
}

/* The adjoint: each input depth slice iz, transposed-convolved with
 * w[:, :, kz], lands at output depth iz*sd + kz*dd - pd (the slices of
 * one tap interleaved with sd - 1 zero slices), summed over kz. */
static nb_tensor *conv_t3d_impl(nb_tensor *x, nb_tensor *w, nb_tensor *bias, nb_conv_transpose3d_options o) {
    const char *op = "conv_transpose3d";
    nb_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!nb_check_inputs(op, n_in, in) || !nb_check_dtypes(NB_OP_CONV_TRANSPOSE3D, n_in, in) ||
        bad_opts3(op, o.stride, o.dilation, o.padding, o.output_padding, &o.groups))
        return NULL;
    if (x->ndim == 4) return nb_squeeze(conv_t3d_impl(nb_unsqueeze(x, 0), w, bias, o), 0);
    conv_opts co = {.groups = o.groups};
    if (!check_shapes(op, 3, true, x, w, bias, &co)) return NULL;
    for (int d = 0; d < 3; d++)
        if (o.output_padding[d] >= o.stride[d] && o.output_padding[d] >= o.dilation[d])
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: output_padding %lld must be smaller than either stride %lld or "
                           "dilation %lld", op, (long long)o.output_padding[d], (long long)o.stride[d],
                           (long long)o.dilation[d]);
    int64_t N = x->shape[0], Ci = x->shape[1], Di = x->shape[2], kd = w->shape[2];
    int64_t sd = o.stride[0], dd = o.dilation[0], pd = o.padding[0];
    int64_t full = (Di - 1) * sd + dd * (kd - 1) + 1 + o.output_padding[0], Do = full - 2 * pd;
    if (Do < 1) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s, weight %s, depth padding %lld give a non-positive output depth "
                       "%lld", op, shape_of(x, a), shape_of(w, b), (long long)pd, (long long)Do);
    }
    nb_conv_transpose2d_options o2 = {.stride = {o.stride[1], o.stride[2]}, .padding = {o.padding[1], o.padding[2]},
                                      .output_padding = {o.output_padding[1], o.output_padding[2]},
                                      .dilation = {o.dilation[1], o.dilation[2]}, .groups = o.groups};
    nb_tensor *xr = nb_reshape(nb_permute(x, (const int[]){0, 2, 1, 3, 4}), NB_SHAPE(N * Di, Ci, x->shape[3], x->shape[4]));
    nb_tensor *acc = NULL;
    int64_t used = (Di - 1) * sd + 1; /* depth rows one tap covers */
    for (int64_t kz = 0; kz < kd && xr; kz++) {
        nb_tensor *y = nb_conv_transpose2d(xr, depth_tap(w, kz), NULL, o2); /* [N*Di, Co, Ho, Wo] */
        if (!y) return NULL;
        int64_t Co = y->shape[1], Ho = y->shape[2], Wo = y->shape[3];
        y = nb_reshape(y, NB_SHAPE(N, Di, 1, Co, Ho, Wo));
        if (sd > 1) /* interleave sd - 1 zero slices after each */
            y = nb_narrow(nb_reshape(nb_pad(y, (const int64_t[]){0, 0, 0, 0, 0, 0, 0, sd - 1}, 8, NB_PAD_CONSTANT, 0),
                                     NB_SHAPE(N, Di * sd, Co, Ho, Wo)),
                          1, 0, used);
        else
            y = nb_reshape(y, NB_SHAPE(N, Di, Co, Ho, Wo));
        y = nb_pad(y, (const int64_t[]){0, 0, 0, 0, 0, 0, kz * dd, full - kz * dd - used}, 8, NB_PAD_CONSTANT, 0);
        acc = kz == 0 ? y : nb_add(acc, y);
        if (!acc) return NULL;
    }
    if (!acc) return NULL;
    nb_tensor *out = nb_permute(nb_narrow(acc, 1, pd, Do), (const int[]){0, 2, 1, 3, 4}); /* [N, Co, Do, Ho, Wo] */
    if (bias) out = nb_add(out, nb_reshape(bias, NB_SHAPE(bias->shape[0], 1, 1, 1)));
    return nb_contiguous(out);
}

nb_tensor *nb_conv_transpose3d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv_transpose3d_options opts) {
    nb_scope *s = nb_op_scope_begin();
    nb_autocast_pause(true);
    nb_tensor *y = conv_t3d_impl(x, weight, bias, opts);
    nb_autocast_pause(false);
    return nb_scope_return(s, y);
}

/* ---- deform_conv2d (torchvision.ops.deform_conv2d) ---------------------------------- */

/* Deformable convolution v1/v2 (Dai et al. 2017, arXiv:1703.06211; Zhu et
 * al. 2019, arXiv:1811.11168), torchvision's semantics: kernel tap k of
 * output (oh, ow) reads x at (oh*sh - ph + i*dh + dy, ow*sw - pw + j*dw +
 * dx), (dy, dx) = offset[b, 2*(g*K + k) + {0, 1}, oh, ow], bilinearly
 * (corners outside the input are 0, and so is a point at or past -1 / the
 * size), times mask[b, g*K + k, oh, ow]; the samples, as im2col columns,
 * meet the weight in a batched GEMM. Written from ops (floor, gather,
 * matmul), so autograd gives the gradients of x, offset, mask, weight and
 * bias: the offsets' through the bilinear weights (y - floor(y)). */
static nb_tensor *deform_impl(nb_tensor *x, nb_tensor *off, nb_tensor *w, nb_tensor *bias, nb_tensor *mask,
                              nb_deform_conv2d_options o) {
    const char *op = "deform_conv2d";
    nb_tensor *in[5] = {x, off, w, bias, mask};
    nb_tensor *req[5];
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (in[i] || i < 3) req[n++] = in[i];
    if (!nb_check_inputs(op, n, req) || !nb_check_dtypes(NB_OP_DEFORM_CONV2D, n, req)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    for (int d = 0; d < 2; d++) {
        if (o.stride[d] == 0) o.stride[d] = 1;
        if (o.dilation[d] == 0) o.dilation[d] = 1;
        if (o.stride[d] < 0 || o.dilation[d] < 0 || o.padding[d] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: stride, dilation and padding must not be negative", op);
    }
    if (x->ndim != 4 || w->ndim != 4 || off->ndim != 4 || (mask && mask->ndim != 4))
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected 4-d input, offset, weight (and mask), got input %s, offset %s, "
                       "weight %s", op, shape_of(x, a), shape_of(off, b), shape_of(w, c));
    int64_t B = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], Co = w->shape[0];
    int64_t kh = w->shape[2], kw = w->shape[3], K = kh * kw;
    int64_t gw = w->shape[1] > 0 && C % w->shape[1] == 0 ? C / w->shape[1] : 0;
    int64_t go = K > 0 && off->shape[1] % (2 * K) == 0 ? off->shape[1] / (2 * K) : 0;
    int64_t Ho = (H + 2 * o.padding[0] - (o.dilation[0] * (kh - 1) + 1)) / o.stride[0] + 1;
    int64_t Wo = (W + 2 * o.padding[1] - (o.dilation[1] * (kw - 1) + 1)) / o.stride[1] + 1;
    if (K == 0 || gw == 0 || Co % gw || go == 0 || C % go)
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s, offset %s and weight %s do not fit: weight [Cout, Cin/groups, kh, "
                       "kw] with Cin and Cout divisible by groups, offset [B, 2 * offset_groups * kh * kw, Ho, Wo] "
                       "with Cin divisible by offset_groups", op, shape_of(x, a), shape_of(off, b), shape_of(w, c));
    if (Ho < 1 || Wo < 1 || H + 2 * o.padding[0] < o.dilation[0] * (kh - 1) + 1 ||
        W + 2 * o.padding[1] < o.dilation[1] * (kw - 1) + 1)
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s is smaller than the dilated kernel of weight %s", op,
                       shape_of(x, a), shape_of(w, c));
    if (off->shape[0] != B || off->shape[2] != Ho || off->shape[3] != Wo)
        return NB_FAIL(NB_ERR_SHAPE, "%s: offset %s must be [%lld, %lld, %lld, %lld]", op, shape_of(off, b),
                       (long long)B, (long long)(2 * go * K), (long long)Ho, (long long)Wo);
    if (mask && (mask->shape[0] != B || mask->shape[1] != go * K || mask->shape[2] != Ho || mask->shape[3] != Wo))
        return NB_FAIL(NB_ERR_SHAPE, "%s: mask %s must be [%lld, %lld, %lld, %lld]", op, shape_of(mask, a),
                       (long long)B, (long long)(go * K), (long long)Ho, (long long)Wo);
    if (bias && (bias->ndim != 1 || bias->shape[0] != Co))
        return NB_FAIL(NB_ERR_SHAPE, "%s: bias %s must be [%lld]", op, shape_of(bias, a), (long long)Co);
    /* the taps' undeformed positions [K, Ho, Wo]: row oh*sh - ph + i*dh, column ow*sw - pw + j*dw */
    int64_t KL = K * Ho * Wo, Cg = C / go;
    nb_device dev = nb_device_of(x);
    nb_tensor *ti = nb_reshape(nb_arange_on(0, (double)(kh * o.dilation[0]), (double)o.dilation[0], x->dtype, dev),
                               NB_SHAPE(kh, 1, 1, 1));
    nb_tensor *tj = nb_reshape(nb_arange_on(0, (double)(kw * o.dilation[1]), (double)o.dilation[1], x->dtype, dev),
                               NB_SHAPE(1, kw, 1, 1));
    nb_tensor *rows = nb_reshape(nb_arange_on((double)-o.padding[0], (double)(Ho * o.stride[0] - o.padding[0]),
                                              (double)o.stride[0], x->dtype, dev), NB_SHAPE(1, 1, Ho, 1));
    nb_tensor *cols0 = nb_reshape(nb_arange_on((double)-o.padding[1], (double)(Wo * o.stride[1] - o.padding[1]),
                                               (double)o.stride[1], x->dtype, dev), NB_SHAPE(1, 1, 1, Wo));
    nb_tensor *py = nb_reshape(nb_expand(nb_add(ti, rows), NB_SHAPE(kh, kw, Ho, Wo)), NB_SHAPE(K, Ho, Wo));
    nb_tensor *px = nb_reshape(nb_expand(nb_add(tj, cols0), NB_SHAPE(kh, kw, Ho, Wo)), NB_SHAPE(K, Ho, Wo));
    nb_tensor *d = nb_reshape(off, NB_SHAPE(B, go, K, 2, Ho, Wo));
    nb_tensor *y = nb_add(py, nb_squeeze(nb_narrow(d, 3, 0, 1), 3));
    nb_tensor *xs = nb_add(px, nb_squeeze(nb_narrow(d, 3, 1, 1), 3));
    if (!y || !xs) return NULL;
    /* [B, go, K, Ho, Wo] each */
    nb_tensor *y0 = nb_floor(y), *x0 = nb_floor(xs);
    nb_tensor *ly = nb_sub(y, y0), *lx = nb_sub(xs, x0), *hy = nb_add_scalar(nb_neg(ly), 1), *hx = nb_add_scalar(nb_neg(lx), 1);
    nb_tensor *inside = nb_logical_and(nb_logical_and(nb_gt_scalar(y, -1), nb_lt_scalar(y, (double)H)),
                                       nb_logical_and(nb_gt_scalar(xs, -1), nb_lt_scalar(xs, (double)W)));
    nb_tensor *scale = nb_to_dtype(inside, x->dtype);
    if (mask) scale = nb_mul(scale, nb_reshape(mask, NB_SHAPE(B, go, K, Ho, Wo)));
    nb_tensor *planes = nb_reshape(x, NB_SHAPE(B, go, Cg, H * W)), *cols = NULL;
    for (int cy = 0; cy < 2; cy++)
        for (int cx = 0; cx < 2; cx++) {
            nb_tensor *yc = cy ? nb_add_scalar(y0, 1) : y0, *xc = cx ? nb_add_scalar(x0, 1) : x0;
            nb_tensor *ok = nb_logical_and(nb_logical_and(nb_ge_scalar(yc, 0), nb_le_scalar(yc, (double)(H - 1))),
                                           nb_logical_and(nb_ge_scalar(xc, 0), nb_le_scalar(xc, (double)(W - 1))));
            nb_tensor *flat = nb_add(nb_mul_scalar(nb_clamp_scalar(yc, 0, (double)(H - 1)), (double)W),
                                     nb_clamp_scalar(xc, 0, (double)(W - 1)));
            nb_tensor *idx = nb_expand(nb_reshape(nb_to_dtype(flat, NB_I64), NB_SHAPE(B, go, 1, KL)),
                                       NB_SHAPE(B, go, Cg, KL));
            nb_tensor *wt = nb_mul(nb_mul(cy ? ly : hy, cx ? lx : hx), nb_mul(scale, nb_to_dtype(ok, x->dtype)));
            nb_tensor *v = nb_mul(nb_gather(planes, 3, idx), nb_reshape(wt, NB_SHAPE(B, go, 1, KL)));
            cols = cols ? nb_add(cols, v) : v;
            if (!cols) return NULL;
        }
    /* [B, go, Cg, K*L] is [B, C, K, L]: the weight groups' im2col columns */
    nb_tensor *cg = nb_reshape(cols, NB_SHAPE(B, gw, C / gw * K, Ho * Wo));
    nb_tensor *wg = nb_reshape(w, NB_SHAPE(1, gw, Co / gw, C / gw * K));
    nb_tensor *out = nb_reshape(nb_matmul(wg, cg), NB_SHAPE(B, Co, Ho, Wo));
    return bias ? nb_add(out, nb_reshape(bias, NB_SHAPE(Co, 1, 1))) : out;
}

nb_tensor *nb_deform_conv2d(nb_tensor *x, nb_tensor *offset, nb_tensor *weight, nb_tensor *bias, nb_tensor *mask,
                            nb_deform_conv2d_options opts) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, deform_impl(x, offset, weight, bias, mask, opts));
}
