/* check.c - the helpers of the shared contract checks (check.h). */
#include "check.h"

nb_status nb_check_dim(const char *slot, const nb_kview *v, int dim) {
    char b[NB_VIEW_STR];
    if (dim < 0 || dim >= v->ndim)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %s", slot, dim, nb_view_str(v, b, sizeof b));
    return NB_OK;
}

nb_status nb_check_alike(const char *slot, int n, const nb_kview *const *vs, unsigned dtypes, const char *what,
                         bool contiguous) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    const nb_kview *a = vs[0];
    for (int i = 0; i < n; i++) {
        const nb_kview *v = vs[i];
        if (!v) continue;
        if (!nb_view_same_shape(a, v))
            return nb_set_error(NB_ERR_SHAPE, "%s: shapes %s and %s differ", slot, nb_view_str(a, b1, sizeof b1),
                                nb_view_str(v, b2, sizeof b2));
        if (!nb_dtype_in(v->dtype, dtypes) || v->dtype != a->dtype)
            return nb_set_error(NB_ERR_DTYPE, "%s: needs %s tensors of one dtype (%s, %s)", slot, what,
                                nb_dtype_name(a->dtype), nb_dtype_name(v->dtype));
        if (contiguous && !nb_view_is_contiguous(v))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be contiguous", slot, nb_view_str(v, b1, sizeof b1));
    }
    return NB_OK;
}
