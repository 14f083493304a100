/* copy.c - the shared contract checks of copy, fill and arange: valid dtypes, src expanded to dst, arange's
 * dst 1-d and dense. */
#include "check.h"

static bool valid_dtype(nb_dtype dt) { return (unsigned)dt < NB_DTYPE_COUNT; }

nb_status nb_check_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!valid_dtype(dst->dtype) || !valid_dtype(src->dtype)) return nb_set_error(NB_ERR_DTYPE, "copy: invalid dtype");
    if (!nb_view_same_shape(dst, src))
        return nb_set_error(NB_ERR_SHAPE, "copy: src %s is not expanded to dst %s", nb_view_str(src, b1, sizeof b1),
                            nb_view_str(dst, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_fill(nb_backend *be, const nb_kview *dst, double value) {
    (void)be, (void)value; /* any value: it is cast as copy casts float64 */
    return valid_dtype(dst->dtype) ? NB_OK : nb_set_error(NB_ERR_DTYPE, "fill: invalid dtype");
}

nb_status nb_check_arange(nb_backend *be, const nb_kview *dst, double start, double step) {
    (void)be, (void)start, (void)step; /* any values, as fill's */
    if (dst->ndim != 1 || (dst->shape[0] > 1 && dst->strides[0] != 1))
        return nb_set_error(NB_ERR_SHAPE, "arange: the output must be contiguous and 1-d");
    return valid_dtype(dst->dtype) ? NB_OK : nb_set_error(NB_ERR_DTYPE, "arange: invalid dtype");
}
