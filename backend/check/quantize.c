/* quantize.c - the shared contract checks of fake_quantize and
 * fake_quantize_backward: x (and out, g and the gradients) contiguous
 * float32/float64 [outer, C, inner] of one shape and dtype; scale and
 * zero_point contiguous float32 [C]; quant_min <= quant_max. And
 * bitnet_linear's: x [M, K], packed uint8 [N, roundup(K, 128) / 4],
 * w_scale float32 [1], bias [N], y [M, N], contiguous. And linear_int8's:
 * x [M, K], qweight int8 [N, K], scales float32 [N], bias [N], y [M, N]. */
#include "check.h"

static nb_status check_params(const char *slot, const nb_kview *x, const nb_kview *scale,
                              const nb_kview *zero_point, const nb_fake_quant_params *p) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!p || p->quant_min > p->quant_max)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: needs quant_min <= quant_max", slot);
    if (x->ndim != 3)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: x %s must be [outer, C, inner]", slot,
                            nb_view_str(x, b1, sizeof b1));
    const nb_kview *qp[2] = {scale, zero_point};
    for (int i = 0; i < 2; i++)
        if (qp[i]->ndim != 1 || qp[i]->shape[0] != x->shape[1] || !nb_view_is_contiguous(qp[i]) ||
            qp[i]->dtype != NB_F32)
            return nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be contiguous float32 [C] for x %s", slot,
                                i ? "zero_point" : "scale", nb_view_str(qp[i], b2, sizeof b2),
                                nb_view_str(x, b1, sizeof b1));
    return NB_OK;
}

nb_status nb_check_fake_quantize(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *scale,
                                 const nb_kview *zero_point, const nb_fake_quant_params *p) {
    (void)be;
    /* an int32 out takes the clamped levels (quantize_per_tensor): x's shape, contiguous */
    bool levels = out->dtype == NB_I32;
    nb_status st = levels ? nb_check_alike("fake_quantize", 1, (const nb_kview *[]){x}, NB_CHK_F, "float", true)
                          : nb_check_alike("fake_quantize", 2, (const nb_kview *[]){x, out}, NB_CHK_F, "float", true);
    if (!st && levels && (!nb_view_same_shape(out, x) || !nb_view_is_contiguous(out)))
        st = nb_set_error(NB_ERR_SHAPE, "fake_quantize: int32 levels must be contiguous of x's shape");
    return st ? st : check_params("fake_quantize", x, scale, zero_point, p);
}

nb_status nb_check_fake_quantize_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gscale,
                                          const nb_kview *gzp, const nb_kview *g, const nb_kview *x,
                                          const nb_kview *scale, const nb_kview *zero_point,
                                          const nb_fake_quant_params *p) {
    (void)be;
    nb_status st = nb_check_alike("fake_quantize_backward", 5, (const nb_kview *[]){x, g, gx, gscale, gzp},
                                  NB_CHK_F, "float", true);
    return st ? st : check_params("fake_quantize_backward", x, scale, zero_point, p);
}

nb_status nb_check_linear_int8(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *qweight,
                               const nb_kview *scales, const nb_kview *bias) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    if (!nb_dtype_in(x->dtype, NB_CHK_F | NB_DTM(NB_BF16) | NB_DTM(NB_F16)) || qweight->dtype != NB_I8 ||
        y->dtype != x->dtype || scales->dtype != NB_F32 || (bias && bias->dtype != x->dtype))
        return nb_set_error(NB_ERR_DTYPE, "linear_int8: x %s, qweight %s, scales %s, y %s and bias %s: needs float x, "
                            "int8 qweight, float32 scales, y and bias of x's dtype", nb_dtype_name(x->dtype),
                            nb_dtype_name(qweight->dtype), nb_dtype_name(scales->dtype), nb_dtype_name(y->dtype),
                            bias ? nb_dtype_name(bias->dtype) : "none");
    if (x->ndim != 2 || !nb_view_is_contiguous(x) || qweight->ndim != 2 ||
        !nb_view_is_contiguous(qweight) || qweight->shape[1] != x->shape[1] || y->ndim != 2 ||
        y->shape[0] != x->shape[0] || y->shape[1] != qweight->shape[0] || !nb_view_is_contiguous(y))
        return nb_set_error(NB_ERR_SHAPE,
                            "linear_int8: x %s, qweight %s and y %s must be contiguous float [M, K], int8 [N, K] "
                            "and [M, N] of x's dtype",
                            nb_view_str(x, b1, sizeof b1), nb_view_str(qweight, b2, sizeof b2),
                            nb_view_str(y, b3, sizeof b3));
    if (scales->ndim != 1 || scales->shape[0] != qweight->shape[0] || !nb_view_is_contiguous(scales))
        return nb_set_error(NB_ERR_SHAPE, "linear_int8: scales %s must be contiguous float32 [N]",
                            nb_view_str(scales, b1, sizeof b1));
    if (bias && (bias->ndim != 1 || bias->shape[0] != qweight->shape[0] || !nb_view_is_contiguous(bias)))
        return nb_set_error(NB_ERR_SHAPE, "linear_int8: bias %s must be [N] of x's dtype",
                            nb_view_str(bias, b1, sizeof b1));
    return NB_OK;
}

nb_status nb_check_bitnet_linear(nb_backend *be, const nb_kview *y, const nb_kview *x, const nb_kview *packed,
                                 const nb_kview *w_scale, const nb_kview *bias) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    if (x->ndim != 2 || !nb_dtype_in(x->dtype, NB_CHK_F) || !nb_view_is_contiguous(x) || packed->ndim != 2 ||
        packed->dtype != NB_U8 || !nb_view_is_contiguous(packed) ||
        packed->shape[1] != (x->shape[1] + 127) / 128 * 32 || y->ndim != 2 || y->dtype != x->dtype ||
        y->shape[0] != x->shape[0] || y->shape[1] != packed->shape[0] || !nb_view_is_contiguous(y))
        return nb_set_error(NB_ERR_SHAPE,
                            "bitnet_linear: x %s, packed %s and y %s must be contiguous float [M, K], uint8 "
                            "[N, roundup(K, 128) / 4] and [M, N] of x's dtype",
                            nb_view_str(x, b1, sizeof b1), nb_view_str(packed, b2, sizeof b2),
                            nb_view_str(y, b3, sizeof b3));
    if (w_scale->ndim != 1 || w_scale->shape[0] != 1 || w_scale->dtype != NB_F32)
        return nb_set_error(NB_ERR_SHAPE, "bitnet_linear: w_scale %s must be float32 [1]",
                            nb_view_str(w_scale, b1, sizeof b1));
    if (bias && (bias->ndim != 1 || bias->shape[0] != packed->shape[0] || bias->dtype != x->dtype ||
                 !nb_view_is_contiguous(bias)))
        return nb_set_error(NB_ERR_SHAPE, "bitnet_linear: bias %s must be [N] of x's dtype",
                            nb_view_str(bias, b1, sizeof b1));
    return NB_OK;
}
