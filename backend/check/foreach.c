/* foreach.c - the shared contract checks of the multi-tensor slots (check.h): n >= 0 contiguous tensors of one
 * dtype; norm_multi's output a contiguous [n] of it and p > 0; mul_multi's factor one element of it; cast_multi's
 * pairs float32 to one of bfloat16/float16, of equal sizes. */
#include "check.h"

/* xs[0..n): one dtype, each contiguous. */
static nb_status check_list(const char *slot, int n, const nb_kview *xs) {
    if (n < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d tensors, or a NULL list", slot, n);
    for (int i = 0; i < n; i++) {
        if (xs[i].dtype != xs[0].dtype)
            return nb_set_error(NB_ERR_DTYPE, "%s: tensor %d is %s, tensor 0 %s", slot, i, nb_dtype_name(xs[i].dtype),
                                nb_dtype_name(xs[0].dtype));
        if (!nb_view_is_contiguous(&xs[i]))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor %d is not contiguous", slot, i);
    }
    return NB_OK;
}

nb_status nb_check_norm_multi(nb_backend *be, int n, const nb_kview *xs, double p, const nb_kview *out) {
    (void)be;
    const char *slot = "norm_multi";
    nb_status st = check_list(slot, n, xs);
    if (st || !n) return st;
    if (out->dtype != xs[0].dtype || nb_view_numel(out) != n || !nb_view_is_contiguous(out))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: the output must be a contiguous [%d] of %s", slot, n,
                            nb_dtype_name(xs[0].dtype));
    if (!(p > 0)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: p = %g must be > 0", slot, p);
    return NB_OK;
}

nb_status nb_check_mul_multi(nb_backend *be, int n, const nb_kview *xs, const nb_kview *s) {
    (void)be;
    nb_status st = check_list("mul_multi", n, xs);
    if (st || !n) return st;
    if (s->dtype != xs[0].dtype || nb_view_numel(s) != 1)
        return nb_set_error(NB_ERR_INVALID_ARG, "mul_multi: the factor must be one %s", nb_dtype_name(xs[0].dtype));
    return NB_OK;
}

nb_status nb_check_cast_multi(nb_backend *be, int n, const nb_kview *dst, const nb_kview *src) {
    (void)be;
    const char *slot = "cast_multi";
    nb_status st = check_list(slot, n, dst);
    if (!st) st = check_list(slot, n, src);
    if (st || !n) return st;
    if (src[0].dtype != NB_F32 || !nb_dtype_in(dst[0].dtype, NB_CHK_H))
        return nb_set_error(NB_ERR_DTYPE, "%s: casts float32 to bfloat16 or float16, not %s to %s", slot,
                            nb_dtype_name(src[0].dtype), nb_dtype_name(dst[0].dtype));
    for (int i = 0; i < n; i++)
        if (nb_view_numel(&dst[i]) != nb_view_numel(&src[i]))
            return nb_set_error(NB_ERR_SHAPE, "%s: pair %d has %lld and %lld elements", slot, i,
                                (long long)nb_view_numel(&dst[i]), (long long)nb_view_numel(&src[i]));
    return NB_OK;
}
