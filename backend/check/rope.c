/* rope.c - the shared contract checks of rope: x and out contiguous
 * float32/float64 (and float16/bfloat16 on a backend whose norms_16bit is
 * set) [N, T, D] of one shape and dtype with D even, and the cos
 * and sin tables contiguous [T, D/2] of x's dtype. */
#include "check.h"

nb_status nb_check_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                        const nb_kview *sin, bool inverse) {
    (void)inverse;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    unsigned ok = be->iface->norms_16bit ? NB_CHK_FH : NB_CHK_F;
    if (x->ndim != 3 || !nb_view_is_contiguous(x) || !nb_dtype_in(x->dtype, ok) ||
        x->shape[2] % 2 || !nb_view_same_shape(out, x) || !nb_view_is_contiguous(out) || out->dtype != x->dtype)
        return nb_set_error(NB_ERR_INVALID_ARG, "rope: x %s and out %s must be contiguous float [N, T, D], D even",
                            nb_view_str(x, b1, sizeof b1), nb_view_str(out, b2, sizeof b2));
    int64_t T = x->shape[1], h = x->shape[2] / 2;
    const nb_kview *tabs[2] = {cos, sin};
    for (int i = 0; i < 2; i++)
        if (tabs[i]->ndim != 2 || tabs[i]->shape[0] != T || tabs[i]->shape[1] != h ||
            !nb_view_is_contiguous(tabs[i]) || tabs[i]->dtype != x->dtype)
            return nb_set_error(NB_ERR_SHAPE, "rope: %s table %s must be contiguous [T, D/2] of x %s",
                                i ? "sin" : "cos", nb_view_str(tabs[i], b2, sizeof b2), nb_view_str(x, b1, sizeof b1));
    return NB_OK;
}
