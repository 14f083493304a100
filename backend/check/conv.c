/* conv.c - the shared contract checks of the convolution slots (check.h): x, w and out (or gx, gy, gw) contiguous
 * 4-d of one float dtype that fit groups, stride, padding and dilation; bias (gbias) a contiguous [Cout] of it. */
#include "check.h"

/* x is the convolution's input side and y its output side (out, gy), whatever the call computes. */
static nb_status check_conv_views(const char *slot, const nb_kview *x, const nb_kview *w, const nb_kview *y,
                                  const nb_conv_params *p) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    const nb_kview *v[3] = {x, w, y};
    if (!nb_dtype_in(x->dtype, NB_CHK_FH) || w->dtype != x->dtype || y->dtype != x->dtype)
        return nb_set_error(NB_ERR_DTYPE, "%s: needs float views of one dtype (x %s, w %s, y %s)", slot,
                            nb_dtype_name(x->dtype), nb_dtype_name(w->dtype), nb_dtype_name(y->dtype));
    for (int i = 0; i < 3; i++)
        if (v[i]->ndim != 4 || !nb_view_is_contiguous(v[i]))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: views must be contiguous 4-d (x %s, w %s, y %s)", slot,
                                nb_view_str(x, b1, sizeof b1), nb_view_str(w, b2, sizeof b2),
                                nb_view_str(y, b3, sizeof b3));
    int64_t c = x->shape[1], co = y->shape[1], groups = p->groups;
    bool ok = groups >= 1 && c % groups == 0 && co % groups == 0 && y->shape[0] == x->shape[0] &&
              w->shape[0] == co && w->shape[1] * groups == c && p->stride[0] > 0 && p->stride[1] > 0 &&
              p->dilation[0] > 0 && p->dilation[1] > 0 && p->padding[0] >= 0 && p->padding[1] >= 0;
    if (!ok)
        return nb_set_error(NB_ERR_SHAPE, "%s: x %s, w %s, y %s do not fit groups %lld, stride (%lld, %lld), "
                            "padding (%lld, %lld), dilation (%lld, %lld)", slot,
                            nb_view_str(x, b1, sizeof b1), nb_view_str(w, b2, sizeof b2),
                            nb_view_str(y, b3, sizeof b3), (long long)groups, (long long)p->stride[0],
                            (long long)p->stride[1], (long long)p->padding[0], (long long)p->padding[1],
                            (long long)p->dilation[0], (long long)p->dilation[1]);
    return NB_OK;
}

/* The optional bias (or its gradient, `name`): NULL, or a contiguous [co] of x's dtype. */
static nb_status check_conv_bias(const char *slot, const char *name, const nb_kview *bias, const nb_kview *x,
                                 int64_t co) {
    if (bias && (bias->dtype != x->dtype || bias->ndim != 1 || bias->shape[0] != co || !nb_view_is_contiguous(bias)))
        return nb_set_error(NB_ERR_SHAPE, "%s: %s must be a contiguous [%lld] %s", slot, name, (long long)co,
                            nb_dtype_name(x->dtype));
    return NB_OK;
}

nb_status nb_check_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                          const nb_kview *bias, const nb_conv_params *p) {
    (void)be;
    nb_status st = check_conv_views("conv2d", x, w, out, p);
    return st ? st : check_conv_bias("conv2d", "bias", bias, x, out->shape[1]);
}

nb_status nb_check_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w,
                                         const nb_conv_params *p) {
    (void)be;
    return check_conv_views("conv2d_backward_input", gx, w, gy, p);
}

nb_status nb_check_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                          const nb_kview *gy, const nb_kview *x, const nb_conv_params *p) {
    (void)be;
    nb_status st = check_conv_views("conv2d_backward_weight", x, gw, gy, p);
    return st ? st : check_conv_bias("conv2d_backward_weight", "gbias", gbias, x, gy->shape[1]);
}
