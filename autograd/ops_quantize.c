/* ops_quantize.c - fake quantization (nb_quantize.h): torch.fake_quantize_
 * per_tensor_affine / per_channel_affine and the learnable variants of
 * torch.ao.quantization (LSQ, Esser et al. 2020). One kernel each way
 * (backend/cpu/quantize.c, backend/cuda/quantize.cu): the forward, and a
 * backward that writes gx and, for the learnable variants, the per-element
 * terms of the scale and zero-point gradients, which are then summed over
 * every dim but the channel's (as PyTorch's dScale_vec.sum()). The zero
 * points and scales are prepared on the device (rounded, clamped, cast to
 * float32) without host reads. Tests: tests/test_ops_quantize.c. */
#include <math.h>

#include "nb_autograd_impl.h"
#include "nb_quantize.h"

/* x as [outer, C, inner] around axis; axis < 0: the whole tensor, C = 1. */
static void fq_geometry(const nb_tensor *x, int axis, int64_t geo[3]) {
    if (axis < 0) {
        geo[0] = 1, geo[1] = 1, geo[2] = nb_numel(x);
        return;
    }
    geo[0] = nb_shape_numel(axis, x->shape);
    geo[1] = x->shape[axis];
    geo[2] = nb_shape_numel(x->ndim - axis - 1, x->shape + axis + 1);
}

/* The kernel view of contiguous t as [outer, C, inner]. */
static nb_kview as3(const nb_tensor *t, const int64_t geo[3]) {
    nb_kview v = nb_kview_of(t);
    v.ndim = 3;
    for (int i = 0; i < 3; i++) v.shape[i] = geo[i];
    v.strides[0] = geo[1] * geo[2], v.strides[1] = geo[2], v.strides[2] = 1;
    return v;
}

/* A qparam as the kernels take it: detached, float32, contiguous [C]. */
static nb_tensor *qparam_f32(nb_tensor *t, int64_t C) {
    nb_tensor *f = nb_to_dtype(nb_detach(t), NB_F32);
    return f ? nb_reshape(nb_contiguous_nograd(f), 1, (int64_t[]){C}) : NULL;
}

/* The shared forward: x float32/float64; s and z float32 [C] on x's
 * device. The forward uses z and q, the backward zb and qb. Records op's
 * node on in[0..n_in) (in[0] = x). */
static nb_tensor *fq_run(nb_op_id op, nb_tensor *x, nb_tensor *s, nb_tensor *z, nb_tensor *zb, int axis,
                         nb_fake_quant_params q, nb_fake_quant_params qb, int n_in, nb_tensor *const *in) {
    int64_t geo[3];
    fq_geometry(x, axis, geo);
    nb_tensor *xc = nb_contiguous_nograd(x), *out = xc ? nb_empty_like(xc) : NULL;
    if (!out || !s || !z || !zb) return NULL;
    nb_kview vo = as3(out, geo), vx = as3(xc, geo), vs = nb_kview_of(s), vz = nb_kview_of(z);
    if (nb_kernel_fake_quantize(NB_BE(x), &vo, &vx, &vs, &vz, &q) != NB_OK) return NULL;
    bool failed;
    nb_node *n = nb_record(op, out, n_in, in, &failed);
    if (failed) return NULL;
    if (n) {
        nb_save(n, 0, xc);
        nb_save(n, 1, s);
        nb_save(n, 2, zb);
        n->p.fake_quant.q = qb;
        for (int i = 0; i < 3; i++) n->p.fake_quant.geo[i] = geo[i];
    }
    return out;
}

/* The sum of the per-element terms t [outer, C, inner] over all but C,
 * shaped and typed as the qparam p. */
static nb_tensor *channel_sum(nb_tensor *t, const int64_t geo[3], const nb_tensor *p) {
    nb_tensor *r = nb_sum(nb_view(t, 3, geo), (int[]){0, 2}, 2, false);
    r = r ? nb_reshape(r, p->ndim, p->shape) : NULL;
    return r && r->dtype != p->dtype ? nb_to_dtype(r, p->dtype) : r;
}

/* saved: [0] x (contiguous), [1] scale, [2] the backward's zero point
 * (float32 [C]); inputs: x, and scale and zero_point for the learnable
 * variants. */
nb_status nb_bw_fake_quantize(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    const nb_fake_quant_params *q = &n->p.fake_quant.q;
    const int64_t *geo = n->p.fake_quant.geo;
    bool learnable = n->n_in == 3, want_s = learnable && n->in[1], want_z = learnable && n->in[2];
    if (learnable && (q->quant_min > 0 || q->quant_max < 0))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s: the backward needs quant_min <= 0 <= quant_max (got [%lld, %lld]), as PyTorch's",
                            nb_op_name(n->op), (long long)q->quant_min, (long long)q->quant_max);
    nb_tensor *xc = n->saved[0], *gc = nb_contiguous(g);
    if (!gc) return nb_last_status();
    nb_tensor *gx = n->in[0] ? nb_empty_like(xc) : NULL, *gs = want_s ? nb_empty_like(xc) : NULL,
              *gz = want_z ? nb_empty_like(xc) : NULL;
    if ((n->in[0] && !gx) || (want_s && !gs) || (want_z && !gz)) return nb_last_status();
    nb_kview vgx, vgs, vgz, vg = as3(gc, geo), vx = as3(xc, geo), vs = nb_kview_of(n->saved[1]),
                            vz = nb_kview_of(n->saved[2]);
    if (gx) vgx = as3(gx, geo);
    if (gs) vgs = as3(gs, geo);
    if (gz) vgz = as3(gz, geo);
    nb_status st = nb_kernel_fake_quantize_backward(NB_BE(xc), gx ? &vgx : NULL, gs ? &vgs : NULL,
                                                    gz ? &vgz : NULL, &vg, &vx, &vs, &vz, q);
    if (st) return st;
    gin[0] = gx;
    if (gs && !(gin[1] = channel_sum(gs, geo, n->in[1]))) return nb_last_status();
    if (gz && !(gin[2] = channel_sum(gz, geo, n->in[2]))) return nb_last_status();
    return NB_OK;
}

static bool check_range(const char *op, int64_t quant_min, int64_t quant_max) {
    if (quant_min <= quant_max) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: quant_min (%lld) must be <= quant_max (%lld)", op, (long long)quant_min,
                 (long long)quant_max);
    return false;
}

/* scale and zero_point 1-D of x.size(axis) for axis in [0, x.ndim); or,
 * per tensor (axis < 0), of one element. */
static bool check_qparams(const char *op, nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point, int axis,
                          bool per_channel, bool float_zp) {
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF];
    if (per_channel && (axis < 0 || axis >= x->ndim)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: axis %d must be in [0, %d) for x %s", op, axis, x->ndim,
                     nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
        return false;
    }
    int64_t C = per_channel ? x->shape[axis] : 1;
    nb_tensor *qp[2] = {scale, zero_point};
    for (int i = 0; i < 2; i++) {
        bool shape_ok = per_channel ? qp[i]->ndim == 1 && qp[i]->shape[0] == C
                                    : qp[i]->ndim <= 1 && nb_numel(qp[i]) == 1;
        if (!shape_ok) {
            nb_set_error(NB_ERR_SHAPE, "%s: scale %s and zero_point %s must be %s for x %s", op,
                         nb_fmt_shape(scale->ndim, scale->shape, a, sizeof a),
                         nb_fmt_shape(zero_point->ndim, zero_point->shape, b, sizeof b),
                         per_channel ? "1-D of x.size(axis)" : "of one element",
                         nb_fmt_shape(x->ndim, x->shape, c, sizeof c));
            return false;
        }
    }
    bool zp_ok = nb_dtype_is_float(zero_point->dtype) ||
                 (!float_zp && (zero_point->dtype == NB_I32 || zero_point->dtype == NB_I64));
    if (!nb_dtype_is_float(scale->dtype) || !zp_ok) {
        nb_set_error(NB_ERR_DTYPE, "%s: scale (%s) must be float and zero_point (%s) %s", op,
                     nb_dtype_name(scale->dtype), nb_dtype_name(zero_point->dtype),
                     float_zp ? "float" : "int32, int64 or float");
        return false;
    }
    return true;
}

nb_tensor *nb_fake_quantize_per_tensor_affine(nb_tensor *x, double scale, int64_t zero_point, int64_t quant_min,
                                              int64_t quant_max) {
    const char *op = "fake_quantize_per_tensor_affine";
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(NB_OP_FAKE_QUANTIZE_PER_TENSOR_AFFINE, 1, &x) ||
        !check_range(op, quant_min, quant_max))
        return NULL;
    if (zero_point < quant_min || zero_point > quant_max)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: zero_point (%lld) must be in [quant_min, quant_max] = [%lld, %lld]",
                       op, (long long)zero_point, (long long)quant_min, (long long)quant_max);
    nb_scope *s_ = nb_op_scope_begin();
    nb_device dev = nb_device_of(x);
    nb_tensor *s = nb_full_on(1, (int64_t[]){1}, (float)scale, NB_F32, dev),
              *z = nb_full_on(1, (int64_t[]){1}, (double)zero_point, NB_F32, dev);
    nb_fake_quant_params q = {.quant_min = quant_min, .quant_max = quant_max};
    nb_dtype back; /* 16-bit x: computed in float32, rounded once */
    nb_tensor *r = nb_widen_16bit(1, &x, &back)
                       ? fq_run(NB_OP_FAKE_QUANTIZE_PER_TENSOR_AFFINE, x, s, z, z, -1, q, q, 1, &x)
                       : NULL;
    return nb_scope_return(s_, nb_unwiden_16bit(r, back));
}

nb_tensor *nb_fake_quantize_per_channel_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point, int axis,
                                               int64_t quant_min, int64_t quant_max) {
    const char *op = "fake_quantize_per_channel_affine";
    if (!nb_check_inputs(op, 3, (nb_tensor *[]){x, scale, zero_point}) ||
        !nb_check_dtypes(NB_OP_FAKE_QUANTIZE_PER_CHANNEL_AFFINE, 1, &x) || !check_range(op, quant_min, quant_max) ||
        !check_qparams(op, x, scale, zero_point, axis, true, false))
        return NULL;
    nb_scope *s_ = nb_op_scope_begin();
    int64_t C = x->shape[axis];
    nb_tensor *s = qparam_f32(scale, C), *z = qparam_f32(zero_point, C);
    nb_fake_quant_params q = {.quant_min = quant_min, .quant_max = quant_max,
                              .zp_float = nb_dtype_is_float(zero_point->dtype)};
    nb_dtype back;
    nb_tensor *r = nb_widen_16bit(1, &x, &back)
                       ? fq_run(NB_OP_FAKE_QUANTIZE_PER_CHANNEL_AFFINE, x, s, z, z, axis, q, q, 1, &x)
                       : NULL;
    return nb_scope_return(s_, nb_unwiden_16bit(r, back));
}

/* The learnable variants' zero points: round (ties to even) and clamp, or
 * (PyTorch's per-tensor backward) trunc(clamp(zero_point + 0.5)). */
static nb_tensor *zp_rounded(nb_tensor *zp, int64_t C, int64_t quant_min, int64_t quant_max, bool half_up) {
    nb_tensor *d = nb_to_dtype(nb_detach(zp), NB_F32); /* as PyTorch's zero_point.item<float>() */
    nb_tensor *r = half_up ? nb_trunc(nb_clamp_scalar(nb_add_scalar(d, 0.5), (double)quant_min, (double)quant_max))
                           : nb_clamp_scalar(nb_round(d), (double)quant_min, (double)quant_max);
    return r ? qparam_f32(r, C) : NULL;
}

static nb_tensor *fq_learnable(nb_op_id op, const char *name, nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point,
                               int axis, int64_t quant_min, int64_t quant_max, double grad_factor) {
    nb_tensor *in[3] = {x, scale, zero_point};
    if (!nb_check_inputs(name, 3, in) || !nb_check_dtypes(op, 1, &x) || !check_range(name, quant_min, quant_max) ||
        !check_qparams(name, x, scale, zero_point, axis, axis >= 0, true))
        return NULL;
    nb_scope *s_ = nb_op_scope_begin();
    int64_t C = axis >= 0 ? x->shape[axis] : 1;
    nb_tensor *s = qparam_f32(scale, C), *z = zp_rounded(zero_point, C, quant_min, quant_max, false);
    nb_tensor *zb = axis >= 0 ? z : zp_rounded(zero_point, C, quant_min, quant_max, true);
    nb_fake_quant_params q = {.quant_min = quant_min, .quant_max = quant_max, .grad_factor = grad_factor};
    /* the forward's level is PyTorch's integer formula; the backward's
     * (fake_quantize_learnable_*_grad) the float one */
    nb_fake_quant_params qb = q;
    qb.zp_float = true;
    nb_dtype back;
    nb_tensor *r = nb_widen_16bit(1, &in[0], &back) ? fq_run(op, in[0], s, z, zb, axis, q, qb, 3, in) : NULL;
    return nb_scope_return(s_, nb_unwiden_16bit(r, back));
}

nb_tensor *nb_fake_quantize_learnable_per_tensor_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point,
                                                        int64_t quant_min, int64_t quant_max, double grad_factor) {
    return fq_learnable(NB_OP_FAKE_QUANTIZE_LEARNABLE_PER_TENSOR_AFFINE, "fake_quantize_learnable_per_tensor_affine",
                        x, scale, zero_point, -1, quant_min, quant_max, grad_factor);
}

nb_tensor *nb_fake_quantize_learnable_per_channel_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point,
                                                         int axis, int64_t quant_min, int64_t quant_max,
                                                         double grad_factor) {
    if (axis < 0 && x)
        return NB_FAIL(NB_ERR_INVALID_ARG, "fake_quantize_learnable_per_channel_affine: axis %d must be in [0, %d)",
                       axis, x->ndim);
    return fq_learnable(NB_OP_FAKE_QUANTIZE_LEARNABLE_PER_CHANNEL_AFFINE, "fake_quantize_learnable_per_channel_affine",
                        x, scale, zero_point, axis, quant_min, quant_max, grad_factor);
}

/* ---- quantize and dequantize (integer tensors) --------------------------- */

/* The range of a quantized dtype (torch's quint8, qint8, qint32; int16 as
 * their kin), or false with NB_ERR_DTYPE. */
static bool qrange(const char *op, nb_dtype dt, int64_t *lo, int64_t *hi) {
    switch (dt) {
    case NB_U8: *lo = 0, *hi = 255; return true;
    case NB_I8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case NB_I16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case NB_I32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default:
        nb_set_error(NB_ERR_DTYPE, "%s: dtype %s is not a quantized dtype (uint8, int8, int16 or int32)", op,
                     nb_dtype_name(dt));
        return false;
    }
}

/* scale as the kernels use it: a positive float32 whose reciprocal is finite */
static bool scale_ok(const char *op, double scale) {
    float f = (float)scale;
    if (f > 0 && isfinite(f) && isfinite(1.0f / f)) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: scale (%g) must be positive and finite in float32, with a finite reciprocal",
                 op, scale);
    return false;
}

/* The fake_quantize kernel with an int32 out (the clamped levels), cast to
 * dtype: exact, the levels are in dtype's range. No graph: the levels are
 * integers. */
static nb_tensor *quantize_run(nb_tensor *x, nb_tensor *s, nb_tensor *z, int axis, nb_fake_quant_params q,
                               nb_dtype dtype) {
    int64_t geo[3];
    fq_geometry(x, axis, geo);
    nb_tensor *xc = nb_contiguous_nograd(x->dtype == NB_F32 || x->dtype == NB_F64 ? x : nb_to_dtype(x, NB_F32));
    nb_tensor *out = xc ? nb_empty_on(x->ndim, x->shape, NB_I32, nb_device_of(x)) : NULL;
    if (!out || !s || !z) return NULL;
    nb_kview vo = as3(out, geo), vx = as3(xc, geo), vs = nb_kview_of(s), vz = nb_kview_of(z);
    if (nb_kernel_fake_quantize(NB_BE(x), &vo, &vx, &vs, &vz, &q) != NB_OK) return NULL;
    return dtype == NB_I32 ? out : nb_to_dtype(out, dtype);
}

nb_tensor *nb_quantize_per_tensor(nb_tensor *x, double scale, int64_t zero_point, nb_dtype dtype) {
    const char *op = "quantize_per_tensor";
    int64_t lo, hi;
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(NB_OP_QUANTIZE_PER_TENSOR, 1, &x) || !qrange(op, dtype, &lo, &hi))
        return NULL;
    if (!scale_ok(op, scale)) return NULL;
    if (zero_point < lo || zero_point > hi)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: zero_point (%lld) must be in %s's range [%lld, %lld]", op,
                       (long long)zero_point, nb_dtype_name(dtype), (long long)lo, (long long)hi);
    nb_scope *s_ = nb_op_scope_begin();
    nb_device dev = nb_device_of(x);
    nb_tensor *s = nb_full_on(1, (int64_t[]){1}, (float)scale, NB_F32, dev),
              *z = nb_full_on(1, (int64_t[]){1}, (double)zero_point, NB_F32, dev);
    nb_fake_quant_params q = {.quant_min = lo, .quant_max = hi};
    return nb_scope_return(s_, quantize_run(x, s, z, -1, q, dtype));
}

nb_tensor *nb_quantize_per_channel(nb_tensor *x, nb_tensor *scales, nb_tensor *zero_points, int axis, nb_dtype dtype) {
    const char *op = "quantize_per_channel";
    int64_t lo, hi;
    if (!nb_check_inputs(op, 3, (nb_tensor *[]){x, scales, zero_points}) ||
        !nb_check_dtypes(NB_OP_QUANTIZE_PER_CHANNEL, 1, &x) || !qrange(op, dtype, &lo, &hi) ||
        !check_qparams(op, x, scales, zero_points, axis, true, false))
        return NULL;
    nb_scope *s_ = nb_op_scope_begin();
    int64_t C = x->shape[axis];
    nb_tensor *s = qparam_f32(scales, C), *z = qparam_f32(zero_points, C);
    nb_fake_quant_params q = {.quant_min = lo, .quant_max = hi, .zp_float = nb_dtype_is_float(zero_points->dtype)};
    return nb_scope_return(s_, quantize_run(x, s, z, axis, q, dtype));
}

/* (float32(q) - zero_point) * scale: q - zero_point is exact in float32
 * for the quantized ranges (|q - z| < 2^24 but for int32), one rounding. */
nb_tensor *nb_dequantize_per_tensor(nb_tensor *q, double scale, int64_t zero_point) {
    const char *op = "dequantize_per_tensor";
    int64_t lo, hi;
    if (!nb_check_inputs(op, 1, &q) || !nb_check_dtypes(NB_OP_DEQUANTIZE_PER_TENSOR, 1, &q) ||
        !qrange(op, q->dtype, &lo, &hi) || !scale_ok(op, scale))
        return NULL;
    if (zero_point < lo || zero_point > hi)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: zero_point (%lld) must be in %s's range [%lld, %lld]", op,
                       (long long)zero_point, nb_dtype_name(q->dtype), (long long)lo, (long long)hi);
    nb_scope *s_ = nb_op_scope_begin();
    nb_tensor *d = nb_to_dtype(q, NB_F32);
    if (d && zero_point) d = nb_add_scalar(d, -(double)zero_point);
    return nb_scope_return(s_, d ? nb_mul_scalar(d, (float)scale) : NULL);
}

nb_tensor *nb_dequantize_per_channel(nb_tensor *q, nb_tensor *scales, nb_tensor *zero_points, int axis) {
    const char *op = "dequantize_per_channel";
    int64_t lo, hi;
    if (!nb_check_inputs(op, 3, (nb_tensor *[]){q, scales, zero_points}) ||
        !nb_check_dtypes(NB_OP_DEQUANTIZE_PER_CHANNEL, 1, &q) || !qrange(op, q->dtype, &lo, &hi) ||
        !check_qparams(op, q, scales, zero_points, axis, true, false))
        return NULL;
    nb_scope *s_ = nb_op_scope_begin();
    int64_t C = q->shape[axis], shape[NB_MAX_DIMS];
    for (int d = 0; d < q->ndim; d++) shape[d] = d == axis ? C : 1;
    nb_tensor *s = nb_reshape(qparam_f32(scales, C), q->ndim, shape),
              *z = nb_reshape(qparam_f32(zero_points, C), q->ndim, shape);
    nb_tensor *d = s && z ? nb_mul(nb_sub(nb_to_dtype(q, NB_F32), z), s) : NULL;
    return nb_scope_return(s_, d);
}

/* ---- BitNet b1.58's fake quantizers (ternary weights, int8 activations) ---- */

/* The straight-through estimator: the gradient passes unchanged. */
nb_status nb_bw_straight_through(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    (void)n;
    gin[0] = g;
    return NB_OK;
}

/* q computed from x (float32/float64, detached) by fn; recorded on x with
 * the straight-through rule. */
static nb_tensor *ste_run(nb_op_id op, nb_tensor *x, nb_tensor *(*fn)(nb_tensor *)) {
    nb_tensor *q = fn(nb_detach(x));
    if (!q) return NULL;
    bool failed;
    nb_record(op, q, 1, &x, &failed);
    return failed ? NULL : q;
}

/* absmean (Ma et al. 2024): s = 1 / max(mean |w|, 1e-5),
 * q = clamp(round(w s), -1, 1) / s, the reference code's order. */
static nb_tensor *ternary_of(nb_tensor *w) {
    nb_tensor *s = nb_reciprocal(nb_clamp_scalar(nb_mean(nb_abs(w), NULL, 0, false), 1e-5, NAN));
    return nb_div(nb_clamp_scalar(nb_round(nb_mul(w, s)), -1, 1), s);
}

/* per-token absmax: s = 127 / max(max |x| over the last dim, 1e-5),
 * q = clamp(round(x s), -128, 127) / s. */
static nb_tensor *int8_of(nb_tensor *x) {
    int last = -1;
    nb_tensor *m = nb_clamp_scalar(nb_amax(nb_abs(x), &last, 1, true), 1e-5, NAN);
    nb_tensor *s = m ? nb_div(nb_full_on(m->ndim, m->shape, 127, m->dtype, nb_device_of(m)), m) : NULL; /* 127 / m */
    return nb_div(nb_clamp_scalar(nb_round(nb_mul(x, s)), -128, 127), s);
}

static nb_tensor *bitnet_quant(nb_op_id op, const char *name, nb_tensor *x, nb_tensor *(*fn)(nb_tensor *)) {
    if (!nb_check_inputs(name, 1, &x) || !nb_check_dtypes(op, 1, &x)) return NULL;
    if (x->ndim == 0 && op == NB_OP_BITNET_ACTIVATION_QUANT)
        return NB_FAIL(NB_ERR_SHAPE, "%s: x must have at least one dim (the tokens' features)", name);
    nb_scope *s_ = nb_op_scope_begin();
    nb_dtype back;
    nb_tensor *in = x;
    nb_tensor *r = nb_widen_16bit(1, &in, &back) ? ste_run(op, in, fn) : NULL;
    return nb_scope_return(s_, nb_unwiden_16bit(r, back));
}

nb_tensor *nb_bitnet_weight_quant(nb_tensor *w) {
    return bitnet_quant(NB_OP_BITNET_WEIGHT_QUANT, "bitnet_weight_quant", w, ternary_of);
}

nb_tensor *nb_bitnet_activation_quant(nb_tensor *x) {
    return bitnet_quant(NB_OP_BITNET_ACTIVATION_QUANT, "bitnet_activation_quant", x, int8_of);
}

/* ---- BitNet b1.58 inference: packed ternary weights --------------------------------- */

nb_status nb_bitnet_pack(nb_tensor *w, nb_tensor **packed, nb_tensor **w_scale) {
    const char *op = "bitnet_pack";
    if (packed) *packed = NULL;
    if (w_scale) *w_scale = NULL;
    if (!packed || !w_scale) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL output", op);
    if (!nb_check_inputs(op, 1, &w) || !nb_check_dtypes(NB_OP_BITNET_PACK, 1, &w)) return nb_last_status();
    char a[NB_SHAPE_BUF];
    if (w->ndim != 2)
        return nb_set_error(NB_ERR_SHAPE, "%s: weight %s must be [out_features, in_features]", op,
                            nb_fmt_shape(w->ndim, w->shape, a, sizeof a));
    nb_scope *s_ = nb_op_scope_begin();
    int64_t N = w->shape[0], K = w->shape[1], G = (K + 127) / 128;
    nb_tensor *d = nb_detach(w);
    if (d && !nb_dtype_is_float(d->dtype)) d = NULL;
    if (d && d->dtype != NB_F64) d = nb_to_dtype(d, NB_F32); /* as the quantizer computes 16-bit weights */
    nb_tensor *s = d ? nb_reciprocal(nb_clamp_scalar(nb_mean(nb_abs(d), NULL, 0, false), 1e-5, NAN)) : NULL;
    /* codes w + 1 in {0, 1, 2}, padded with 1 (a zero weight) to G * 128 */
    nb_tensor *c = s ? nb_to_dtype(nb_add_scalar(nb_clamp_scalar(nb_round(nb_mul(d, s)), -1, 1), 1), NB_U8) : NULL;
    if (c && G * 128 > K) c = nb_pad(c, (int64_t[]){0, G * 128 - K}, 2, NB_PAD_CONSTANT, 1);
    nb_tensor *planes = c ? nb_reshape(c, 4, (int64_t[]){N, G, 4, 32}) : NULL, *byte = NULL;
    for (int i = 0; planes && i < 4; i++) {
        nb_tensor *pl = nb_bitwise_left_shift_scalar(nb_select(planes, 2, i), 2 * i);
        byte = i ? nb_bitwise_or(byte, pl) : pl;
    }
    nb_tensor *p = byte ? nb_reshape(nb_contiguous(byte), 2, (int64_t[]){N, G * 32}) : NULL;
    nb_tensor *sc = p ? nb_reshape(nb_to_dtype(s, NB_F32), 1, (int64_t[]){1}) : NULL;
    if (sc) nb_retain(sc); /* outlives the op's scope */
    p = nb_scope_return(s_, sc ? p : NULL);
    if (!p) {
        if (sc) nb_release(sc);
        return nb_last_status();
    }
    *packed = p, *w_scale = nb_scope_adopt(sc);
    return NB_OK;
}

nb_tensor *nb_bitnet_linear(nb_tensor *x, nb_tensor *packed, nb_tensor *w_scale, nb_tensor *bias) {
    const char *op = "bitnet_linear";
    nb_tensor *in[4] = {x, packed, w_scale, bias};
    if (!nb_check_inputs(op, bias ? 4 : 3, in) || !nb_check_dtypes(NB_OP_BITNET_LINEAR, 1, &x)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    int64_t K = x->ndim ? x->shape[x->ndim - 1] : 0;
    if (x->ndim < 1 || packed->ndim != 2 || packed->dtype != NB_U8 || packed->shape[1] != (K + 127) / 128 * 32)
        return NB_FAIL(packed->dtype != NB_U8 ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                       "%s: x %s and packed %s must be [..., K] and uint8 [N, roundup(K, 128) / 4] (nb_bitnet_pack's)",
                       op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                       nb_fmt_shape(packed->ndim, packed->shape, b, sizeof b));
    if (nb_numel(w_scale) != 1 || w_scale->dtype != NB_F32)
        return NB_FAIL(w_scale->dtype != NB_F32 ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                       "%s: w_scale must be float32 of one element (nb_bitnet_pack's)", op);
    if (nb_needs_grad(1, &x))
        return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: inference only, no gradient reaches x: run it without grad "
                       "(nb_set_grad_enabled(false), NB_NO_GRAD) or on a detached x", op);
    int64_t N = packed->shape[0];
    if (bias && (bias->ndim != 1 || bias->shape[0] != N))
        return NB_FAIL(NB_ERR_SHAPE, "%s: bias %s must be [%lld]", op,
                       nb_fmt_shape(bias->ndim, bias->shape, a, sizeof a), (long long)N);
    nb_scope *s_ = nb_op_scope_begin();
    nb_dtype back = NB_DTYPE_COUNT; /* 16-bit x: computed in float32 */
    nb_tensor *xd = nb_detach(x);
    if (xd && !nb_widen_16bit(1, &xd, &back)) xd = NULL;
    int64_t M = nb_shape_numel(x->ndim - 1, x->shape);
    nb_tensor *x2 = xd ? nb_reshape(nb_contiguous(xd), 2, (int64_t[]){M, K}) : NULL;
    nb_tensor *bc = bias && x2 ? nb_contiguous(nb_to_dtype(nb_detach(bias), x2->dtype)) : NULL;
    nb_tensor *y = x2 && (!bias || bc) ? nb_empty_on(2, (int64_t[]){M, N}, x2->dtype, nb_device_of(x2)) : NULL;
    nb_tensor *ws = y ? nb_reshape(nb_contiguous(w_scale), 1, (int64_t[]){1}) : NULL;
    nb_tensor *pc = ws ? nb_contiguous(packed) : NULL;
    if (!pc) return nb_scope_return(s_, NULL);
    nb_kview vy = nb_kview_of(y), vx = nb_kview_of(x2), vp = nb_kview_of(pc), vs = nb_kview_of(ws), vb;
    if (bc) vb = nb_kview_of(bc);
    if (nb_kernel_bitnet_linear(NB_BE(x2), &vy, &vx, &vp, &vs, bc ? &vb : NULL) != NB_OK)
        return nb_scope_return(s_, NULL);
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i + 1 < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = N;
    nb_tensor *r = nb_reshape(y, x->ndim, shape);
    return nb_scope_return(s_, nb_unwiden_16bit(r, back));
}

/* ---- int8 weight-only: per-channel symmetric int8 weights, float activations ---- */

nb_status nb_int8_weight_quantize(nb_tensor *w, nb_tensor **qweight, nb_tensor **scales) {
    const char *op = "int8_weight_quantize";
    if (qweight) *qweight = NULL;
    if (scales) *scales = NULL;
    if (!qweight || !scales) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL output", op);
    if (!nb_check_inputs(op, 1, &w) || !nb_check_dtypes(NB_OP_INT8_WEIGHT_QUANTIZE, 1, &w)) return nb_last_status();
    char a[NB_SHAPE_BUF];
    if (w->ndim != 2)
        return nb_set_error(NB_ERR_SHAPE, "%s: weight %s must be [out_features, in_features]", op,
                            nb_fmt_shape(w->ndim, w->shape, a, sizeof a));
    nb_scope *s_ = nb_op_scope_begin();
    int last = 1;
    nb_tensor *d = nb_to_dtype(nb_detach(w), NB_F32);
    /* torchao's symmetric choose_qparams: amax / ((127 - -128) / 2), at least float32's eps */
    nb_tensor *m = d ? nb_amax(nb_abs(d), &last, 1, false) : NULL;
    nb_tensor *s = m ? nb_clamp_scalar(nb_div(m, nb_scalar_like(m, 127.5, NB_F32)), 0x1p-23, NAN) : NULL;
    nb_tensor *z = s ? nb_zeros_like(s) : NULL;
    nb_tensor *q = z ? nb_quantize_per_channel(d, s, z, 0, NB_I8) : NULL;
    if (q) nb_retain(s); /* outlives the op's scope */
    q = nb_scope_return(s_, q);
    if (!q) return nb_last_status();
    *qweight = q, *scales = nb_scope_adopt(s);
    return NB_OK;
}

nb_tensor *nb_linear_int8(nb_tensor *x, nb_tensor *qweight, nb_tensor *scales, nb_tensor *bias) {
    const char *op = "linear_int8";
    nb_tensor *in[4] = {x, qweight, scales, bias};
    if (!nb_check_inputs(op, bias ? 4 : 3, in) || !nb_check_dtypes(NB_OP_LINEAR_INT8, 1, &x)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (x->ndim < 1 || qweight->ndim != 2 || qweight->dtype != NB_I8 || qweight->shape[1] != x->shape[x->ndim - 1])
        return NB_FAIL(qweight->dtype != NB_I8 ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                       "%s: x %s and qweight %s (%s) must be [..., K] and int8 [N, K]", op,
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                       nb_fmt_shape(qweight->ndim, qweight->shape, b, sizeof b), nb_dtype_name(qweight->dtype));
    const int64_t N = qweight->shape[0], K = qweight->shape[1];
    if (!nb_dtype_is_float(scales->dtype) || (bias && !nb_dtype_is_float(bias->dtype)))
        return NB_FAIL(NB_ERR_DTYPE, "%s: scales (%s) and bias must be float", op, nb_dtype_name(scales->dtype));
    if (scales->ndim != 1 || scales->shape[0] != N || (bias && (bias->ndim != 1 || bias->shape[0] != N)))
        return NB_FAIL(NB_ERR_SHAPE, "%s: scales %s (float) and bias must be [N] for qweight %s", op,
                       nb_fmt_shape(scales->ndim, scales->shape, a, sizeof a),
                       nb_fmt_shape(qweight->ndim, qweight->shape, b, sizeof b));
    nb_scope *s_ = nb_op_scope_begin();
    /* under autocast, x as a Linear's (the region's 16-bit dtype): then the float16 branch below guards
     * against overflow, and the result has a float Linear's dtype */
    if (!nb_autocast_inputs(NB_OP_LINEAR, 1, &x)) return nb_scope_return(s_, NULL);
    const nb_dtype dt = x->dtype;
    nb_tensor *sc = nb_reshape(nb_contiguous_nograd(nb_to_dtype(nb_detach(scales), NB_F32)), 1, &N);
    nb_tensor *bi = bias && bias->dtype != dt ? nb_to_dtype(bias, dt) : bias;
    const int64_t M = K ? nb_numel(x) / K : 0;
    bool grad = nb_is_grad_enabled() && (nb_requires_grad(x) || (bi && nb_requires_grad(bi)));
    nb_tensor *y = NULL;
    if (!sc || (bias && !bi)) return nb_scope_return(s_, NULL);
    if (!grad && M <= 16 && K > 0 && nb_kernel_has(NB_BE(x), linear_int8)) {
        /* few rows (decoding): the kernel reads the int8 weight as it is */
        nb_tensor *x2 = nb_contiguous_nograd(nb_reshape(x, 2, (int64_t[]){M, K})), *qc = nb_contiguous_nograd(qweight);
        nb_tensor *bc = bi ? nb_contiguous_nograd(bi) : NULL;
        nb_tensor *out = x2 && qc && (!bi || bc) ? nb_empty_on(2, (int64_t[]){M, N}, dt, nb_device_of(x)) : NULL;
        if (out) {
            nb_kview vy = nb_kview_of(out), vx = nb_kview_of(x2), vq = nb_kview_of(qc), vs = nb_kview_of(sc), vb;
            if (bc) vb = nb_kview_of(bc);
            if (nb_kernel_linear_int8(NB_BE(x), &vy, &vx, &vq, &vs, bc ? &vb : NULL) == NB_OK) {
                int64_t shape[NB_MAX_DIMS];
                for (int d = 0; d < x->ndim - 1; d++) shape[d] = x->shape[d];
                shape[x->ndim - 1] = N;
                y = nb_reshape(out, x->ndim, shape);
            }
        }
    } else {
        /* many rows, or a gradient: one matmul on the integer weights cast to x's dtype (exact), then the scales
         * in float32 (float64 for float64) over the [.., N] result: elementwise work on the activations, not
         * on the weights (dequantizing them tripled a bfloat16 prefill). float16 dequantizes the weight
         * instead (q * scale in float32, rounded once): its unscaled sums, ~127 / amax times y, overflow. */
        const nb_dtype wdt = dt == NB_F64 ? NB_F64 : NB_F32;
        nb_tensor *s2 = nb_to_dtype(sc, wdt);
        if (dt == NB_F16) {
            nb_tensor *w = nb_mul(nb_to_dtype(qweight, wdt), nb_reshape(s2, 2, (int64_t[]){N, 1}));
            y = w ? nb_linear(x, nb_to_dtype(w, dt), bi) : NULL;
        } else {
            y = nb_linear(x, nb_to_dtype(qweight, dt), NULL);
            y = y ? nb_mul(dt == wdt ? y : nb_to_dtype(y, wdt), s2) : NULL;
            if (y && dt != wdt) y = nb_to_dtype(y, dt);
            if (y && bi) y = nb_add(y, bi);
        }
    }
    return nb_scope_return(s_, y);
}
