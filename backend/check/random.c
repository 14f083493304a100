/* random.c - the shared contract checks of random (the distribution, a
 * contiguous dst of a dtype it can fill) and dropout (0 <= p < 1; x, out and
 * mask contiguous, of one shape and one float dtype). */
#include "check.h"

/* dt is one of the dtypes in mask m (NB_DTM bits). */
nb_status nb_check_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                          nb_philox_state rng) {
    (void)be, (void)a, (void)b, (void)rng;
    static const char *const names[] = {"uniform", "normal", "bernoulli"};
    char buf[NB_VIEW_STR];
    if ((unsigned)dist > NB_RNG_BERNOULLI)
        return nb_set_error(NB_ERR_INVALID_ARG, "random: bad distribution %d", (int)dist);
    /* bernoulli fills every dtype (0 and 1 are exact: dropout's 16-bit
     * masks); uniform and normal float32/float64 */
    if (!nb_dtype_in(dst->dtype, dist == NB_RNG_BERNOULLI ? NB_DTM_A8 : NB_CHK_F))
        return nb_set_error(NB_ERR_DTYPE, "%s: needs a float32 or float64 tensor, got %s", names[dist],
                            nb_dtype_name(dst->dtype));
    if (!nb_view_is_contiguous(dst))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s must be contiguous", names[dist],
                            nb_view_str(dst, buf, sizeof buf));
    return NB_OK;
}

nb_status nb_check_dropout(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x, double p,
                           nb_philox_state rng) {
    (void)be, (void)rng;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    const nb_dtype dt = x->dtype;
    if (!(p >= 0 && p < 1)) return nb_set_error(NB_ERR_INVALID_ARG, "dropout: p %g outside [0, 1)", p);
    if (out->dtype != dt || mask->dtype != dt || !nb_dtype_in(dt, NB_CHK_FH))
        return nb_set_error(NB_ERR_DTYPE, "dropout: x (%s), out (%s) and mask (%s) must share one float dtype",
                            nb_dtype_name(dt), nb_dtype_name(out->dtype), nb_dtype_name(mask->dtype));
    if (!nb_view_same_shape(out, x) || !nb_view_same_shape(mask, x) || !nb_view_is_contiguous(x) ||
        !nb_view_is_contiguous(out) || !nb_view_is_contiguous(mask))
        return nb_set_error(NB_ERR_INVALID_ARG, "dropout: x %s, out %s and mask %s must be contiguous and of one shape",
                            nb_view_str(x, b1, sizeof b1), nb_view_str(out, b2, sizeof b2),
                            nb_view_str(mask, b3, sizeof b3));
    return NB_OK;
}
