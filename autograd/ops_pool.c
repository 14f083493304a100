/* ops_pool.c - max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d and
 * adaptive_max_pool2d: argument checks, output sizes, dispatch and backward
 * rules. Every op runs as a 2-d pool on a 4-d [N, C, H, W] view: an
 * unbatched [C, H, W] input gets N = 1, a 1-d [N, C, L] input runs with
 * H = 1 and a kernel of 1 in that dim, and the result is reshaped back (so
 * 1-d indices are positions along L, as PyTorch's). Output size per dim is
 * PyTorch's pooling_output_shape:
 *   out = floor((in + 2*pad - dil*(k-1) - 1 + (ceil ? stride-1 : 0)) / stride) + 1,
 *   minus one in ceil mode if the last window would start at or past in + pad.
 * max_pool3d, avg_pool3d and adaptive_avg_pool3d are two of those pools
 * (see the 3-d section). Kernels: backend/cpu/pool.c. Tests:
 * tests/test_ops_pool.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* Sets the error and yields false, for the bool checks below. */
#define POOL_BAD(...) (nb_set_error(NB_ERR_INVALID_ARG, __VA_ARGS__) == NB_OK)
#define POOL_BAD_SHAPE(...) (nb_set_error(NB_ERR_SHAPE, __VA_ARGS__) == NB_OK)

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_ADAPTIVE_AVG, POOL_ADAPTIVE_MAX } pool_kind;

/* One request: the op's name, kind and, for 1-d ops, that the user sees only dim 1. */
typedef struct pool_req {
    const char *op;
    nb_op_id id;
    pool_kind kind;
    bool one_d;
    nb_pool_params p;  /* window ops */
    int64_t out[2];    /* adaptive ops */
} pool_req;

/* "[a, b]" for 2-d ops, "b" for 1-d ones (the user never gave dim 0). */
static const char *fmt2(const pool_req *r, const int64_t *v, char *buf, size_t len) {
    if (r->one_d) snprintf(buf, len, "%lld", (long long)v[1]);
    else snprintf(buf, len, "[%lld, %lld]", (long long)v[0], (long long)v[1]);
    return buf;
}

static bool check_window(const pool_req *r) {
    const nb_pool_params *p = &r->p;
    char a[48], b[48];
    for (int d = 0; d < 2; d++) {
        if (p->kernel[d] < 1)
            return POOL_BAD("%s: kernel_size must be positive, got %s", r->op,
                            fmt2(r, p->kernel, a, sizeof a));
        if (p->stride[d] < 1)
            return POOL_BAD("%s: stride must be positive (0 = kernel_size), got %s", r->op,
                            fmt2(r, p->stride, a, sizeof a));
        if (p->dilation[d] < 1)
            return POOL_BAD("%s: dilation must be positive (0 = 1), got %s", r->op,
                            fmt2(r, p->dilation, a, sizeof a));
        if (p->padding[d] < 0 || p->padding[d] > p->kernel[d] / 2)
            return POOL_BAD("%s: padding must be in [0, kernel_size/2], got padding %s for "
                            "kernel_size %s", r->op, fmt2(r, p->padding, a, sizeof a),
                            fmt2(r, p->kernel, b, sizeof b));
    }
    return true;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

static int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil, bool ceil_mode) {
    int64_t o = floor_div(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) o--; /* the last window must start inside */
    return o;
}

/* The [N, C, H, W] geometry of x, or false with an error (wrong rank, empty dims). */
static bool shape4(const pool_req *r, const nb_tensor *x, int64_t *s4) {
    char a[NB_SHAPE_BUF];
    int want = r->one_d ? 3 : 4; /* batched rank */
    if (x->ndim != want && x->ndim != want - 1)
        return POOL_BAD_SHAPE("%s: expected a %d-d [C, %s] or %d-d [N, C, %s] input, got %s", r->op,
                              want - 1, r->one_d ? "L" : "H, W", want, r->one_d ? "L" : "H, W",
                              nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    int lead = x->ndim - want + 1; /* 1 if batched */
    for (int d = lead ? 1 : 0; d < x->ndim; d++)
        if (x->shape[d] < 1)
            return POOL_BAD_SHAPE("%s: input %s has an empty non-batch dim", r->op,
                                  nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    s4[0] = lead ? x->shape[0] : 1;
    s4[1] = x->shape[lead];
    s4[2] = r->one_d ? 1 : x->shape[lead + 1];
    s4[3] = x->shape[x->ndim - 1];
    return true;
}

/* ---- backward rules ----------------------------------------------------------- */


/* gx of the 4-d input, plus contiguous gy views; NULL on failure. */
static nb_tensor *grad_setup(nb_node *n, nb_tensor *g, nb_kview *vgx, nb_kview *vgy) {
    nb_tensor *in = n->in[0];
    nb_tensor *gc = nb_contiguous(g);
    nb_tensor *gx = nb_tensor_new(in->ndim, in->shape, in->dtype, in->storage->device);
    if (!gc || !gx) return NULL;
    *vgx = nb_kview_of(gx), *vgy = nb_kview_of(gc);
    return gx;
}

/* Under create_graph the gradient, made by a raw kernel, is recorded with
 * a rule of its own: the gradient of a pool's gradient is the pool again
 * (the max pools: a gather at the saved argmax positions; the average
 * pools, linear maps: the forward, whose adjoint the backward is). */

/* The average pool (or adaptive, p NULL) of the 4-d x into `shape`, recorded. */
static nb_tensor *avg_forward(const nb_node *src, nb_tensor *x, const int64_t *shape, bool adaptive) {
    nb_tensor *xc = nb_contiguous(x), *out = xc ? nb_tensor_new(4, shape, x->dtype, x->storage->device) : NULL;
    if (!out) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc);
    nb_pool_params p = src->p.pool;
    if ((adaptive ? nb_kernel_adaptive_avg_pool2d(NB_BE(x), &vo, &vx) : nb_kernel_avg_pool2d(NB_BE(x), &vo, &vx, &p)) != NB_OK)
        return NULL;
    bool failed;
    nb_node *n = nb_record(src->op, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) n->p.pool = p;
    return out;
}

/* rules of the gradients' own nodes: in[0] is g, saved[0] the argmax indices */
static nb_status max_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    const nb_tensor *g = n->in[0];
    int64_t N = g->shape[0], C = g->shape[1], hw = gg->shape[2] * gg->shape[3], o = g->shape[2] * g->shape[3];
    nb_tensor *r = nb_gather(nb_reshape(gg, NB_SHAPE(N, C, hw)), 2, nb_reshape(n->saved[0], NB_SHAPE(N, C, o)));
    gin[0] = r ? nb_reshape(r, g->ndim, g->shape) : NULL;
    return gin[0] ? NB_OK : nb_last_status();
}
static nb_status avg_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = avg_forward(n, gg, n->in[0]->shape, false);
    return gin[0] ? NB_OK : nb_last_status();
}
static nb_status adaptive_avg_grad_backward(nb_node *n, nb_tensor *gg, nb_tensor **gin) {
    gin[0] = avg_forward(n, gg, n->in[0]->shape, true);
    return gin[0] ? NB_OK : nb_last_status();
}

/* Records gx's node under create_graph (nothing otherwise). */
static nb_status grad_node(nb_node *n, nb_backward_fn fn, nb_tensor *gx, nb_tensor *g) {
    bool failed;
    nb_node *gn = nb_record_grad(n, fn, gx, 1, &g, &failed);
    if (failed) return nb_last_status();
    if (gn && fn == max_grad_backward) nb_save(gn, 0, n->saved[0]);
    return NB_OK;
}

/* max and adaptive max: gy scattered to the saved argmax positions */
nb_status nb_bw_max(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_kview vgx, vgy, vi = nb_kview_of(n->saved[0]);
    nb_tensor *gx = grad_setup(n, g, &vgx, &vgy);
    if (!gx) return nb_last_status();
    gin[0] = gx;
    nb_status st = nb_kernel_max_pool2d_backward(NB_BE(gx), &vgx, &vgy, &vi);
    return st ? st : grad_node(n, max_grad_backward, gx, g);
}

nb_status nb_bw_avg(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_kview vgx, vgy;
    nb_tensor *gx = grad_setup(n, g, &vgx, &vgy);
    if (!gx) return nb_last_status();
    nb_pool_params p = n->p.pool;
    gin[0] = gx;
    nb_status st = nb_kernel_avg_pool2d_backward(NB_BE(gx), &vgx, &vgy, &p);
    return st ? st : grad_node(n, avg_grad_backward, gx, g);
}

nb_status nb_bw_adaptive_avg(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_kview vgx, vgy;
    nb_tensor *gx = grad_setup(n, g, &vgx, &vgy);
    if (!gx) return nb_last_status();
    gin[0] = gx;
    nb_status st = nb_kernel_adaptive_avg_pool2d_backward(NB_BE(gx), &vgx, &vgy);
    return st ? st : grad_node(n, adaptive_avg_grad_backward, gx, g);
}

/* ---- forward ------------------------------------------------------------------ */

/* Runs the kernel on the 4-d x into [N, C, oh, ow] and records the node. *idx
 * gets the int64 indices of max kinds (made only when asked for or needed). */
static nb_tensor *pool_core(const pool_req *r, nb_tensor *x, int64_t oh, int64_t ow, nb_tensor **idx) {
    bool is_max = r->kind == POOL_MAX || r->kind == POOL_ADAPTIVE_MAX;
    bool grad = nb_needs_grad(1, &x);
    int64_t os[4] = {x->shape[0], x->shape[1], oh, ow};
    nb_device dev = x->storage->device;
    nb_tensor *xc = nb_contiguous(x), *out = nb_tensor_new(4, os, x->dtype, dev);
    nb_tensor *ind = is_max && (idx || grad) ? nb_tensor_new(4, os, NB_I64, dev) : NULL;
    if (!xc || !out || (is_max && (idx || grad) && !ind)) return NULL;
    nb_kview vo = nb_kview_of(out), vx = nb_kview_of(xc), vi = ind ? nb_kview_of(ind) : vo;
    nb_status st;
    switch (r->kind) {
    case POOL_MAX: st = nb_kernel_max_pool2d(NB_BE(x), &vo, ind ? &vi : NULL, &vx, &r->p); break;
    case POOL_AVG: st = nb_kernel_avg_pool2d(NB_BE(x), &vo, &vx, &r->p); break;
    case POOL_ADAPTIVE_AVG: st = nb_kernel_adaptive_avg_pool2d(NB_BE(x), &vo, &vx); break;
    default: st = nb_kernel_adaptive_max_pool2d(NB_BE(x), &vo, ind ? &vi : NULL, &vx); break;
    }
    if (st != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(r->id, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) {
        n->p.pool = r->p;
        if (is_max) nb_save(n, 0, ind);
    }
    if (idx) *idx = ind;
    return out;
}

/* Output size of a window op, checked >= 1; false with an error. */
static bool window_out(const pool_req *r, const nb_tensor *x, const int64_t *s4, int64_t *o) {
    const nb_pool_params *p = &r->p;
    for (int d = 0; d < 2; d++)
        o[d] = out_size(s4[2 + d], p->kernel[d], p->padding[d], p->stride[d], p->dilation[d], p->ceil_mode);
    if (o[0] >= 1 && o[1] >= 1) return true;
    char a[NB_SHAPE_BUF], k[48], s[48], pd[48], dl[48], os[48];
    return POOL_BAD_SHAPE("%s: output size %s is too small for input %s (kernel_size %s, stride %s, "
                          "padding %s, dilation %s)", r->op, fmt2(r, o, os, sizeof os),
                          nb_fmt_shape(x->ndim, x->shape, a, sizeof a), fmt2(r, p->kernel, k, sizeof k),
                          fmt2(r, p->stride, s, sizeof s), fmt2(r, p->padding, pd, sizeof pd),
                          fmt2(r, p->dilation, dl, sizeof dl));
}

static nb_tensor *pool_impl(pool_req *r, nb_tensor *x, nb_tensor **idx) {
    if (!nb_check_inputs(r->op, 1, &x) || !nb_check_dtypes(r->id, 1, &x)) return NULL;
    int64_t s4[4], o[2];
    if (!shape4(r, x, s4)) return NULL;
    bool adaptive = r->kind == POOL_ADAPTIVE_AVG || r->kind == POOL_ADAPTIVE_MAX;
    if (adaptive) {
        char a[48];
        if (r->out[0] < 1 || r->out[1] < 1)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: output_size must be positive, got %s", r->op,
                           fmt2(r, r->out, a, sizeof a));
        o[0] = r->out[0], o[1] = r->out[1];
    } else if (!check_window(r) || !window_out(r, x, s4, o)) {
        return NULL;
    }
    nb_tensor *x4 = x->ndim == 4 ? x : nb_reshape(x, 4, s4);
    nb_tensor *out = x4 ? pool_core(r, x4, o[0], o[1], idx) : NULL;
    if (!out || x->ndim == 4) return out;
    /* back to the caller's rank: drop N if unbatched, H if 1-d */
    int64_t fs[4];
    int nd = 0;
    if (x->ndim == (r->one_d ? 3 : 4)) fs[nd++] = s4[0];
    fs[nd++] = s4[1];
    if (!r->one_d) fs[nd++] = o[0];
    fs[nd++] = o[1];
    if (idx && *idx && !(*idx = nb_reshape(*idx, nd, fs))) return NULL;
    return nb_reshape(out, nd, fs);
}

/* Ends the op's scope s returning out, and hands idx (the indices made
 * in s, or NULL) to *indices in the caller's scope like the result; both
 * NULL when out is. */
static nb_tensor *return_with_indices(nb_scope *s, nb_tensor *out, nb_tensor *idx, nb_tensor **indices) {
    if (!out) idx = NULL;
    nb_retain(idx);
    out = nb_scope_return(s, out);
    if (!out || !indices) {
        nb_release(idx);
        return out;
    }
    *indices = nb_scope_adopt(idx);
    return out;
}

/* Scoped call; *indices (if asked) outlives the op's scope like the result. */
static nb_tensor *pool_run(pool_req r, nb_tensor *x, nb_tensor **indices) {
    nb_tensor *idx = NULL;
    if (indices) *indices = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *out = pool_impl(&r, x, indices ? &idx : NULL);
    return return_with_indices(s, out, idx, indices);
}

/* ---- options -> params -------------------------------------------------------------- */

static pool_req req2d(nb_op_id id, pool_kind kind, nb_pool2d_options o) {
    pool_req r = {.op = nb_op_name(id), .id = id, .kind = kind};
    for (int d = 0; d < 2; d++) {
        r.p.kernel[d] = o.kernel[d];
        r.p.stride[d] = o.stride[d] ? o.stride[d] : o.kernel[d];
        r.p.padding[d] = o.padding[d];
        r.p.dilation[d] = o.dilation[d] ? o.dilation[d] : 1;
    }
    r.p.ceil_mode = o.ceil_mode;
    r.p.count_include_pad = !o.count_include_pad_false;
    r.p.divisor_override = o.divisor_override;
    return r;
}

static pool_req req1d(nb_op_id id, pool_kind kind, nb_pool1d_options o) {
    nb_pool2d_options o2 = {.kernel = {1, o.kernel}, .stride = {1, o.stride ? o.stride : o.kernel},
                            .padding = {0, o.padding}, .dilation = {1, o.dilation}, .ceil_mode = o.ceil_mode,
                            .count_include_pad_false = o.count_include_pad_false};
    pool_req r = req2d(id, kind, o2);
    r.one_d = true;
    return r;
}

/* avg pools take no dilation (PyTorch's avg_pool2d has none): refuse one rather than ignore it. */
static bool avg_no_dilation(const pool_req *r) {
    char a[48];
    if (r->p.dilation[0] == 1 && r->p.dilation[1] == 1) return true;
    return POOL_BAD("%s: dilation is not supported by average pooling (max pool only), got %s", r->op,
                    fmt2(r, r->p.dilation, a, sizeof a));
}

nb_tensor *nb_max_pool2d(nb_tensor *x, nb_pool2d_options opts, nb_tensor **indices) {
    pool_req r = req2d(NB_OP_MAX_POOL2D, POOL_MAX, opts);
    r.p.count_include_pad = false, r.p.divisor_override = 0; /* avg-only fields */
    return pool_run(r, x, indices);
}

nb_tensor *nb_max_pool1d(nb_tensor *x, nb_pool1d_options opts, nb_tensor **indices) {
    pool_req r = req1d(NB_OP_MAX_POOL1D, POOL_MAX, opts);
    r.p.count_include_pad = false;
    return pool_run(r, x, indices);
}

nb_tensor *nb_avg_pool2d(nb_tensor *x, nb_pool2d_options opts) {
    pool_req r = req2d(NB_OP_AVG_POOL2D, POOL_AVG, opts);
    if (!nb_check_inputs("avg_pool2d", 1, &x)) return NULL;
    return avg_no_dilation(&r) ? pool_run(r, x, NULL) : NULL;
}

nb_tensor *nb_avg_pool1d(nb_tensor *x, nb_pool1d_options opts) {
    pool_req r = req1d(NB_OP_AVG_POOL1D, POOL_AVG, opts);
    if (!nb_check_inputs("avg_pool1d", 1, &x)) return NULL;
    return avg_no_dilation(&r) ? pool_run(r, x, NULL) : NULL;
}

nb_tensor *nb_adaptive_avg_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w) {
    pool_req r = {.op = "adaptive_avg_pool2d", .id = NB_OP_ADAPTIVE_AVG_POOL2D, .kind = POOL_ADAPTIVE_AVG, .out = {out_h, out_w}};
    return pool_run(r, x, NULL);
}

nb_tensor *nb_adaptive_avg_pool1d(nb_tensor *x, int64_t out_l) {
    pool_req r = {.op = "adaptive_avg_pool1d", .id = NB_OP_ADAPTIVE_AVG_POOL1D, .kind = POOL_ADAPTIVE_AVG, .one_d = true, .out = {1, out_l}};
    return pool_run(r, x, NULL);
}

nb_tensor *nb_adaptive_max_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w, nb_tensor **indices) {
    pool_req r = {.op = "adaptive_max_pool2d", .id = NB_OP_ADAPTIVE_MAX_POOL2D, .kind = POOL_ADAPTIVE_MAX, .out = {out_h, out_w}};
    return pool_run(r, x, indices);
}

/* ---- 3-d pooling: separable into an (h, w) pool and a depth pool ------------------ */

/* A 3-d window is a box, so its max is the max over depth of the (h, w)
 * maxima, and its average (every divisor PyTorch uses is a product of
 * per-dim counts: the clipped window, or its part inside the input) is
 * the depth average of the (h, w) averages. Stage 1 pools [N, C*D, H, W];
 * stage 2 pools [N, C, D, Ho*Wo] with a (kd, 1) window. Stage 1 first
 * keeps PyTorch's tie order for max: the first maximum in (d, h, w) order. */

/* Checks the options (0 stride = kernel, 0 dilation = 1) and x [N, C, D, H, W]
 * or [C, D, H, W]; the output depth, height and width into o. */
static bool check3d(const char *op, bool avg, nb_pool3d_options *p, const nb_tensor *x, int64_t *o) {
    char a[NB_SHAPE_BUF];
    if (x->ndim != 4 && x->ndim != 5)
        return POOL_BAD_SHAPE("%s: expected a 4-d or 5-d input, got %s", op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    for (int d = 0; d < 3; d++) {
        int64_t *k = &p->kernel[d], *s = &p->stride[d], *pad = &p->padding[d], *dil = &p->dilation[d];
        if (*s == 0) *s = *k;
        if (*dil == 0) *dil = 1;
        if (*k < 1 || *s < 1 || *dil < 1 || *pad < 0)
            return POOL_BAD("%s: kernel %lld, stride %lld and dilation %lld must be positive, padding %lld not negative",
                            op, (long long)*k, (long long)*s, (long long)*dil, (long long)*pad);
        if (*pad > *k / 2)
            return POOL_BAD("%s: padding %lld should be at most half of the kernel size %lld", op, (long long)*pad,
                            (long long)*k);
        if (avg && *dil != 1) return POOL_BAD("%s: dilation %lld is not supported (avg pooling has none)", op, (long long)*dil);
        int64_t in = x->shape[x->ndim - 3 + d];
        o[d] = out_size(in, *k, *pad, *s, *dil, p->ceil_mode);
        if (in < 1 || o[d] < 1)
            return POOL_BAD_SHAPE("%s: input %s is too small for kernel %lld (padding %lld, dilation %lld): output "
                                  "size %lld", op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a), (long long)*k,
                                  (long long)*pad, (long long)*dil, (long long)o[d]);
    }
    if (avg && p->divisor_override < 0)
        return POOL_BAD("%s: divisor_override %lld must be positive (0: none)", op, (long long)p->divisor_override);
    return true;
}

static nb_tensor *pool3d_impl(const char *op, nb_op_id id, bool avg, nb_tensor *x, nb_pool3d_options p,
                              nb_tensor **indices) {
    int64_t o[3];
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x) || !check3d(op, avg, &p, x, o)) return NULL;
    if (x->ndim == 4) {
        nb_tensor *y = pool3d_impl(op, id, avg, nb_unsqueeze(x, 0), p, indices);
        if (y && indices) *indices = nb_squeeze(*indices, 0);
        return y ? nb_squeeze(y, 0) : NULL;
    }
    int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2], H = x->shape[3], W = x->shape[4];
    nb_pool2d_options hw = {.kernel = {p.kernel[1], p.kernel[2]}, .stride = {p.stride[1], p.stride[2]},
                            .padding = {p.padding[1], p.padding[2]}, .dilation = {p.dilation[1], p.dilation[2]},
                            .ceil_mode = p.ceil_mode, .count_include_pad_false = p.count_include_pad_false,
                            .divisor_override = p.divisor_override ? 1 : 0};
    nb_pool2d_options dp = {.kernel = {p.kernel[0], 1}, .stride = {p.stride[0], 1}, .padding = {p.padding[0], 0},
                            .dilation = {p.dilation[0], 1}, .ceil_mode = p.ceil_mode,
                            .count_include_pad_false = p.count_include_pad_false,
                            .divisor_override = p.divisor_override};
    nb_tensor *x4 = nb_reshape(x, NB_SHAPE(N, C * D, H, W)), *i1 = NULL, *i2 = NULL;
    nb_tensor *y1 = avg ? nb_avg_pool2d(x4, hw) : nb_max_pool2d(x4, hw, indices ? &i1 : NULL); /* [N, C*D, Ho, Wo] */
    nb_tensor *y1d = nb_reshape(y1, NB_SHAPE(N, C, D, o[1] * o[2]));
    nb_tensor *y = avg ? nb_avg_pool2d(y1d, dp) : nb_max_pool2d(y1d, dp, indices ? &i2 : NULL); /* [N, C, Do, Ho*Wo] */
    if (indices && y) {
        /* i2: d * Ho*Wo + cell in the [D, Ho*Wo] plane; i1 at that spot: h * W + w */
        int64_t cells = o[1] * o[2];
        nb_tensor *flat2 = nb_reshape(i2, NB_SHAPE(N, C, o[0] * cells));
        nb_tensor *hwi = nb_gather(nb_reshape(i1, NB_SHAPE(N, C, D * cells)), 2, flat2);
        nb_tensor *d = nb_div_mode(flat2, nb_scalar_like(flat2, (double)cells, NB_I64), NB_ROUNDING_FLOOR);
        nb_tensor *idx = nb_add(nb_mul_scalar(d, (double)(H * W)), hwi);
        *indices = nb_reshape(idx, NB_SHAPE(N, C, o[0], o[1], o[2]));
        if (!*indices) return NULL;
    }
    return nb_reshape(y, NB_SHAPE(N, C, o[0], o[1], o[2]));
}

nb_tensor *nb_max_pool3d(nb_tensor *x, nb_pool3d_options opts, nb_tensor **indices) {
    nb_tensor *idx = NULL;
    if (indices) *indices = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *out = pool3d_impl("max_pool3d", NB_OP_MAX_POOL3D, false, x, opts, indices ? &idx : NULL);
    return return_with_indices(s, out, idx, indices);
}

nb_tensor *nb_avg_pool3d(nb_tensor *x, nb_pool3d_options opts) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, pool3d_impl("avg_pool3d", NB_OP_AVG_POOL3D, true, x, opts, NULL));
}

/* Adaptive average over a box of cells is the depth average of the (h, w)
 * averages, each stage by PyTorch's index rule. */
static nb_tensor *aap3d_impl(nb_tensor *x, const int64_t *out) {
    const char *op = "adaptive_avg_pool3d";
    char a[NB_SHAPE_BUF];
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(NB_OP_ADAPTIVE_AVG_POOL3D, 1, &x)) return NULL;
    if (x->ndim != 4 && x->ndim != 5)
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected a 4-d or 5-d input, got %s", op,
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    if (x->ndim == 4) return nb_squeeze(aap3d_impl(nb_unsqueeze(x, 0), out), 0);
    for (int d = 0; d < 3; d++)
        if (out[d] < 1 || x->shape[2 + d] < 1)
            return NB_FAIL(NB_ERR_SHAPE, "%s: output size (%lld, %lld, %lld) and the input's spatial dims %s must be "
                           "positive", op, (long long)out[0], (long long)out[1], (long long)out[2],
                           nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2];
    nb_tensor *y1 = nb_adaptive_avg_pool2d(nb_reshape(x, NB_SHAPE(N, C * D, x->shape[3], x->shape[4])), out[1], out[2]);
    nb_tensor *y = nb_adaptive_avg_pool2d(nb_reshape(y1, NB_SHAPE(N, C, D, out[1] * out[2])), out[0], out[1] * out[2]);
    return nb_reshape(y, NB_SHAPE(N, C, out[0], out[1], out[2]));
}

nb_tensor *nb_adaptive_avg_pool3d(nb_tensor *x, int64_t out_d, int64_t out_h, int64_t out_w) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, aap3d_impl(x, (const int64_t[]){out_d, out_h, out_w}));
}

/* ---- lp_pool1d / lp_pool2d: PyTorch's formula over avg_pool ------------------------- */

/* (sign(a) relu(|a|) * window)^(1 / p) with a = avg_pool(x^p): the p-norm
 * of each window (F.lp_pool2d's code, so NaN where PyTorch has NaN). */
static nb_tensor *lp_finish(nb_tensor *avg, double p, double window) {
    nb_tensor *a = nb_mul(nb_sign(avg), nb_relu(nb_abs(avg)));
    return nb_pow_scalar(nb_mul_scalar(a, window), 1.0 / p);
}

static bool lp_check(const char *op, nb_op_id id, nb_tensor *x, double p) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return false;
    if (p > 0 && isfinite(p)) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: norm_type %g must be positive and finite", op, p);
    return false;
}

nb_tensor *nb_lp_pool2d(nb_tensor *x, double norm_type, nb_pool2d_options opts) {
    if (!lp_check("lp_pool2d", NB_OP_LP_POOL2D, x, norm_type)) return NULL;
    nb_pool2d_options o = {.kernel = {opts.kernel[0], opts.kernel[1]}, .stride = {opts.stride[0], opts.stride[1]},
                           .ceil_mode = opts.ceil_mode};
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *avg = nb_avg_pool2d(nb_pow_scalar(x, norm_type), o);
    return nb_scope_return(s, avg ? lp_finish(avg, norm_type, (double)(o.kernel[0] * o.kernel[1])) : NULL);
}

nb_tensor *nb_lp_pool1d(nb_tensor *x, double norm_type, nb_pool1d_options opts) {
    if (!lp_check("lp_pool1d", NB_OP_LP_POOL1D, x, norm_type)) return NULL;
    nb_pool1d_options o = {.kernel = opts.kernel, .stride = opts.stride, .ceil_mode = opts.ceil_mode};
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *avg = nb_avg_pool1d(nb_pow_scalar(x, norm_type), o);
    return nb_scope_return(s, avg ? lp_finish(avg, norm_type, (double)o.kernel) : NULL);
}

nb_tensor *nb_lp_pool3d(nb_tensor *x, double norm_type, nb_pool3d_options opts) {
    if (!lp_check("lp_pool3d", NB_OP_LP_POOL3D, x, norm_type)) return NULL;
    nb_pool3d_options o = {.ceil_mode = opts.ceil_mode};
    for (int i = 0; i < 3; i++) o.kernel[i] = opts.kernel[i], o.stride[i] = opts.stride[i];
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *avg = nb_avg_pool3d(nb_pow_scalar(x, norm_type), o);
    return nb_scope_return(s, avg ? lp_finish(avg, norm_type, (double)(o.kernel[0] * o.kernel[1] * o.kernel[2])) : NULL);
}

/* ---- adaptive_max_pool1d / 3d over adaptive_max_pool2d ------------------------------ */

nb_tensor *nb_adaptive_max_pool1d(nb_tensor *x, int64_t out_l, nb_tensor **indices) {
    if (!nb_check_inputs("adaptive_max_pool1d", 1, &x) || !nb_check_dtypes(NB_OP_ADAPTIVE_MAX_POOL1D, 1, &x))
        return NULL;
    if (x->ndim != 2 && x->ndim != 3) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "adaptive_max_pool1d: input %s must be [N, C, L] or [C, L]",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *idx = NULL;
    nb_tensor *y = nb_adaptive_max_pool2d(nb_unsqueeze(x, -2), 1, out_l, indices ? &idx : NULL); /* [*, 1, L] */
    if (y) y = nb_squeeze(y, -2);
    if (y && indices) idx = nb_squeeze(idx, -2); /* positions along L (h is 0) */
    if (!y || (indices && !idx)) y = idx = NULL;
    if (y) nb_retain(y);
    if (idx) nb_retain(idx);
    nb_scope_end(s); /* both outputs handed to the caller's scope */
    if (indices) *indices = idx ? nb_scope_adopt(idx) : NULL;
    return y ? nb_scope_adopt(y) : NULL;
}

/* Over (h, w) per depth slice, then over depth: exact for max (each
 * output's window is a box, and the adaptive windows of the dims are
 * independent). No indices. */
nb_tensor *nb_adaptive_max_pool3d(nb_tensor *x, int64_t out_d, int64_t out_h, int64_t out_w) {
    if (!nb_check_inputs("adaptive_max_pool3d", 1, &x) || !nb_check_dtypes(NB_OP_ADAPTIVE_MAX_POOL3D, 1, &x))
        return NULL;
    if (x->ndim != 4 && x->ndim != 5) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "adaptive_max_pool3d: input %s must be [N, C, D, H, W] or [C, D, H, W]",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    }
    if (out_d < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "adaptive_max_pool3d: output size %lld must be >= 1", (long long)out_d);
    nb_scope *s = nb_op_scope_begin();
    bool unbatched = x->ndim == 4;
    nb_tensor *v = unbatched ? nb_unsqueeze(x, 0) : x;
    int64_t N = v->shape[0], C = v->shape[1], D = v->shape[2], H = v->shape[3], W = v->shape[4];
    nb_tensor *hw = nb_adaptive_max_pool2d(nb_reshape(v, NB_SHAPE(N * C, D, H, W)), out_h, out_w, NULL);
    nb_tensor *y = NULL;
    if (hw) { /* [N C, D, oh, ow] -> [N C, oh ow, D, 1] -> pool over D -> [N, C, od, oh, ow] */
        nb_tensor *t = nb_reshape(nb_permute(nb_reshape(hw, NB_SHAPE(N * C, D, out_h * out_w)), (int[]){0, 2, 1}),
                                  NB_SHAPE(N * C, out_h * out_w, D, 1));
        nb_tensor *d = nb_adaptive_max_pool2d(t, out_d, 1, NULL);
        if (d) y = nb_reshape(nb_permute(nb_reshape(d, NB_SHAPE(N * C, out_h * out_w, out_d)), (int[]){0, 2, 1}),
                              NB_SHAPE(N, C, out_d, out_h, out_w));
    }
    if (y && unbatched) y = nb_squeeze(y, 0);
    return nb_scope_return(s, y);
}

/* ---- max_unpool1d / 2d / 3d ---------------------------------------------------------- */

/* x and indices [N, C, *in] (or unbatched) into zeros [N, C, *out] at the
 * flat positions indices gives within each plane (max_pool's
 * return_indices); out = (in - 1) stride - 2 pad + kernel per dim, or
 * output_size. */
static nb_tensor *unpool(const char *op, nb_op_id id, int dims, nb_tensor *x, nb_tensor *indices,
                         const int64_t *kernel, const int64_t *stride, const int64_t *padding, const int64_t *output_size) {
    nb_tensor *in[2] = {x, indices};
    if (!nb_check_inputs(op, 2, in) || !nb_check_dtypes(id, 1, &x)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (indices->dtype != NB_I64) return NB_FAIL(NB_ERR_DTYPE, "%s: indices must be int64", op);
    if ((x->ndim != dims + 1 && x->ndim != dims + 2) || indices->ndim != x->ndim ||
        memcmp(indices->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s must be %dD or %dD and indices %s of its shape", op,
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a), dims + 1, dims + 2,
                       nb_fmt_shape(indices->ndim, indices->shape, b, sizeof b));
    int lead = x->ndim - dims;
    int64_t out[3], plane = 1, rows = 1;
    for (int i = 0; i < dims; i++) {
        int64_t k = kernel[i], st = stride[i] ? stride[i] : k;
        if (k < 1 || st < 1 || padding[i] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: kernel_size must be >= 1, stride >= 0, padding >= 0", op);
        out[i] = output_size && output_size[i] ? output_size[i] : (x->shape[lead + i] - 1) * st - 2 * padding[i] + k;
        if (out[i] < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: the output size %lld is not positive", op, (long long)out[i]);
        plane *= out[i];
    }
    for (int i = 0; i < lead; i++) rows *= x->shape[i];
    nb_scope *s = nb_op_scope_begin();
    int64_t per = rows ? nb_numel(x) / rows : 0;
    nb_tensor *z = nb_full_on(NB_SHAPE(rows, plane), 0.0, x->dtype, x->storage->device);
    nb_tensor *y = nb_scatter(z, 1, nb_reshape(indices, NB_SHAPE(rows, per)), nb_reshape(x, NB_SHAPE(rows, per)));
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < lead; i++) shape[i] = x->shape[i];
    for (int i = 0; i < dims; i++) shape[lead + i] = out[i];
    return nb_scope_return(s, y ? nb_reshape(y, x->ndim, shape) : NULL);
}

nb_tensor *nb_max_unpool1d(nb_tensor *x, nb_tensor *indices, int64_t kernel, int64_t stride, int64_t padding,
                           int64_t output_size) {
    return unpool("max_unpool1d", NB_OP_MAX_UNPOOL1D, 1, x, indices, &kernel, &stride, &padding,
                  output_size ? &output_size : NULL);
}
nb_tensor *nb_max_unpool2d(nb_tensor *x, nb_tensor *indices, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], const int64_t output_size[2]) {
    if (!kernel || !stride || !padding) return NB_FAIL(NB_ERR_INVALID_ARG, "max_unpool2d: kernel, stride and padding are required");
    return unpool("max_unpool2d", NB_OP_MAX_UNPOOL2D, 2, x, indices, kernel, stride, padding, output_size);
}
nb_tensor *nb_max_unpool3d(nb_tensor *x, nb_tensor *indices, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], const int64_t output_size[3]) {
    if (!kernel || !stride || !padding) return NB_FAIL(NB_ERR_INVALID_ARG, "max_unpool3d: kernel, stride and padding are required");
    return unpool("max_unpool3d", NB_OP_MAX_UNPOOL3D, 3, x, indices, kernel, stride, padding, output_size);
}

/* ---- fractional max pooling (Graham 2014) ------------------------------------------------ */

/* PyTorch's generate_intervals (FractionalMaxPool2d.cpp), in the input's
 * float type T: the start of each of `out` windows of `pool` over `in`. */
#define FRACTIONAL_INTERVALS(T)                                                                                       \
    static void intervals_##T(T sample, int64_t in, int64_t out, int64_t pool, int64_t *seq) {                         \
        if (out > 1) {                                                                                                 \
            T alpha = (T)(in - pool) / (T)(out - 1);                                                                   \
            for (int64_t i = 0; i < out - 1; i++) seq[i] = (int64_t)(int)(((T)i + sample) * alpha) - (int)(sample * alpha); \
        }                                                                                                              \
        if (out > 0) seq[out - 1] = in - pool;                                                                         \
    }
FRACTIONAL_INTERVALS(float)
FRACTIONAL_INTERVALS(double)

/* d = 2 or 3 spatial dims. The windows of each (n, c) plane come from its
 * samples (PyTorch's order: 2-d (w, h), 3-d (t, h, w)); the values are one
 * gather of every window's elements and a max over each window (the first
 * maximum carries the gradient, as PyTorch's). */
static nb_tensor *fractional_impl(int d, nb_tensor *x, nb_fractional_max_pool_options o, nb_tensor **indices) {
    const char *op = d == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
    nb_op_id id = d == 2 ? NB_OP_FRACTIONAL_MAX_POOL2D : NB_OP_FRACTIONAL_MAX_POOL3D;
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return NULL;
    char a[NB_SHAPE_BUF];
    bool batched = x->ndim == d + 2;
    if (x->ndim != d + 1 && !batched)
        return NB_FAIL(NB_ERR_SHAPE, "%s: input %s must be %d-d or %d-d", op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                       d + 1, d + 2);
    if (!batched) x = nb_unsqueeze(x, 0);
    int64_t N = x->shape[0], C = x->shape[1], in[3] = {0}, k[3] = {0}, out[3] = {1, 1, 1}, K = 1, P = 1, S = 1;
    for (int i = 0; i < d; i++) {
        in[i] = x->shape[2 + i], k[i] = o.kernel_size[i];
        out[i] = o.output_size[i] ? o.output_size[i] : (int64_t)((double)in[i] * o.output_ratio[i]);
        if (k[i] < 1 || out[i] < 1 || (o.output_size[i] == 0 && !(o.output_ratio[i] > 0 && o.output_ratio[i] < 1)) ||
            out[i] + k[i] - 1 > in[i])
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dim %d: kernel %lld and output %lld (ratio %g, in (0, 1)) do not "
                           "fit the input's %lld (output + kernel - 1 <= input)", op, i, (long long)k[i],
                           (long long)out[i], o.output_ratio[i], (long long)in[i]);
        K *= k[i], P *= out[i], S *= in[i];
    }
    nb_tensor *samples = o.random_samples;
    if (samples && (samples->ndim != 3 || samples->shape[0] != N || samples->shape[1] != C || samples->shape[2] != d ||
                    !nb_dtype_is_float(samples->dtype)))
        return NB_FAIL(NB_ERR_SHAPE, "%s: random samples must be float [N, C, %d] = [%lld, %lld, %d]", op, d,
                       (long long)N, (long long)C, d);
    if (!samples) samples = nb_rand_on(NB_SHAPE(N, C, d), x->dtype, o.generator, x->storage->device);
    int64_t planes = N * C, n_s = planes * d;
    double *sv = malloc(sizeof *sv * (size_t)n_s);
    int64_t *idx = malloc(sizeof *idx * (size_t)(planes * P * K)), *seq = malloc(sizeof *seq * (size_t)(in[0] + in[1] + (d == 3 ? in[2] : 0)));
    nb_tensor *sd = samples ? nb_to_dtype(samples, NB_F64) : NULL;
    if (!sv || !idx || !seq || !sd || nb_to_host(sd, sv, sizeof *sv * (size_t)n_s) != NB_OK) {
        free(sv), free(idx), free(seq);
        return sv && idx && seq ? NULL : NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    for (int64_t pl = 0; pl < planes; pl++) {
        int64_t *st[3] = {seq, seq + in[0], seq + in[0] + in[1]};
        for (int i = 0; i < d; i++) { /* the sample of spatial dim i: 2-d samples are (w, h), 3-d (t, h, w) */
            double s = sv[pl * d + (d == 2 ? 1 - i : i)];
            if (x->dtype == NB_F32) intervals_float((float)s, in[i], out[i], k[i], st[i]);
            else intervals_double(s, in[i], out[i], k[i], st[i]);
        }
        int64_t *q = idx + pl * P * K;
        for (int64_t p = 0; p < P; p++) { /* output position p and window offset w, row-major over the dims */
            int64_t pi[3] = {0, 0, 0}, r = p;
            for (int i = d - 1; i >= 0; i--) pi[i] = r % out[i], r /= out[i];
            for (int64_t w = 0; w < K; w++) {
                int64_t wi[3] = {0, 0, 0}, rr = w, flat = 0;
                for (int i = d - 1; i >= 0; i--) wi[i] = rr % k[i], rr /= k[i];
                for (int i = 0; i < d; i++) flat = flat * in[i] + st[i][pi[i]] + wi[i];
                q[p * K + w] = flat;
            }
        }
    }
    free(sv), free(seq);
    nb_tensor *ix = nb_from_data_on(idx, NB_SHAPE(N, C, P * K), NB_I64, x->storage->device);
    free(idx);
    nb_tensor *win = nb_reshape(nb_gather(nb_reshape(x, NB_SHAPE(N, C, S)), 2, ix), NB_SHAPE(N, C, P, K));
    nb_tensor *arg = NULL;
    nb_tensor *val = nb_max_dim(win, 3, false, indices ? &arg : NULL);
    int64_t oshape[5] = {N, C, out[0], out[1], out[2]};
    nb_tensor *r = val ? nb_reshape(val, d + 2, oshape) : NULL;
    if (r && !batched) r = nb_squeeze(r, 0);
    if (r && indices) { /* the flat input position (within its plane) of each maximum */
        nb_tensor *pos = arg ? nb_squeeze(nb_gather(nb_reshape(ix, NB_SHAPE(N, C, P, K)), 3, nb_unsqueeze(arg, 3)), 3) : NULL;
        *indices = pos ? nb_reshape(pos, d + 2, oshape) : NULL;
        if (*indices && !batched) *indices = nb_squeeze(*indices, 0);
        if (!*indices) r = NULL;
    }
    return r;
}

static nb_tensor *fractional(int d, nb_tensor *x, nb_fractional_max_pool_options o, nb_tensor **indices) {
    if (indices) *indices = NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *idx = NULL;
    nb_tensor *r = fractional_impl(d, x, o, indices ? &idx : NULL);
    return return_with_indices(s, r, idx, indices);
}

nb_tensor *nb_fractional_max_pool2d(nb_tensor *x, nb_fractional_max_pool_options opts, nb_tensor **indices) {
    return fractional(2, x, opts, indices);
}

nb_tensor *nb_fractional_max_pool3d(nb_tensor *x, nb_fractional_max_pool_options opts, nb_tensor **indices) {
    return fractional(3, x, opts, indices);
}
