/* ops_random.c - sampling ops written from other ops (no kernel of their
 * own): randint, and multinomial by PyTorch's CPU algorithms. Without
 * replacement (or one sample): argmax / topk of p / q with q ~ Exp(1) drawn from the
 * generator (the Gumbel-max trick, as aten's multinomial); with
 * replacement: each sample is the number of entries of the normalized CDF
 * below a U[0, 1) draw (inverse-CDF sampling). The draws come from the
 * Philox generator, so a seed gives the same samples on any thread count.
 * Tests: tests/test_ops_random.c. */
#include <math.h>

#include "nb_autograd_impl.h"

static nb_tensor *multinomial_impl(nb_tensor *p, int64_t n, bool replacement, nb_generator *gen) {
    if (!nb_check_inputs("multinomial", 1, &p) || !nb_check_dtypes(NB_OP_MULTINOMIAL, 1, &p)) return NULL;
    char a[NB_SHAPE_BUF];
    if (p->ndim < 1 || p->ndim > 2)
        return NB_FAIL(NB_ERR_SHAPE, "multinomial: probabilities %s must be [C] or [N, C]",
                       nb_fmt_shape(p->ndim, p->shape, a, sizeof a));
    int64_t C = p->shape[p->ndim - 1];
    if (n < 0 || C == 0 || (!replacement && n > C))
        return NB_FAIL(NB_ERR_INVALID_ARG, "multinomial: %lld samples from %lld categories%s", (long long)n,
                       (long long)C, !replacement && n > C ? " without replacement" : "");
    /* PyTorch's checks of the distribution: finite, >= 0, a positive sum per row */
    int last = -1;
    nb_tensor *bad = nb_any(nb_logical_or(nb_logical_not(nb_isfinite(p)), nb_lt_scalar(p, 0)), NULL, 0, false);
    nb_tensor *sums = nb_sum(p, &last, 1, true);
    nb_tensor *empty = nb_any(nb_le_scalar(sums, 0), NULL, 0, false);
    nb_tensor *nz = nb_sum(nb_ne_scalar(p, 0), &last, 1, false);
    nb_tensor *few = nz ? nb_any(nb_lt_scalar(nz, (double)n), NULL, 0, false) : NULL;
    if (!bad || !empty || !few) return NULL;
    if (nb_item(bad) != 0 || nb_item(empty) != 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "multinomial: probabilities must be finite, >= 0, with a positive sum "
                       "in every row");
    if (!replacement && nb_item(few) != 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "multinomial: not enough categories of nonzero probability for %lld "
                       "samples without replacement", (long long)n);
    int64_t shape[2] = {p->ndim == 2 ? p->shape[0] : 1, n};
    /* in float64 whatever p's dtype: the same draws and samples for float32
     * and float64 probabilities of the same values */
    nb_tensor *rows = nb_to_dtype(p->ndim == 2 ? p : nb_unsqueeze(p, 0), NB_F64), *idx = NULL;
    nb_device dev = nb_device_of(p);
    if (!replacement || n == 1) {
        nb_tensor *u = nb_rand_on(2, (int64_t[]){shape[0], C}, NB_F64, gen, dev);
        nb_tensor *q = nb_neg(nb_log1p(nb_neg(u))); /* Exp(1) from U[0, 1) */
        nb_tensor *r = nb_div(rows, q);
        if (!r) return NULL;
        nb_status st = nb_topk(r, n, -1, true, true, NULL, &idx);
        if (st) return NULL;
    } else {
        nb_tensor *cdf = nb_div(nb_cumsum(rows, -1), nb_sum(rows, &last, 1, true)); /* [N, C] */
        nb_tensor *u = nb_rand_on(2, shape, NB_F64, gen, dev);                     /* [N, n] */
        nb_tensor *below = nb_lt(nb_unsqueeze(cdf, 1), nb_unsqueeze(u, 2));        /* [N, n, C] */
        idx = nb_sum(below, (int[]){2}, 1, false);
        /* a draw past the last CDF entry (rounding): the last category */
        idx = idx ? nb_clamp_scalar(idx, NAN, (double)(C - 1)) : NULL;
    }
    return p->ndim == 1 ? nb_squeeze(idx, 0) : idx;
}

nb_tensor *nb_multinomial(nb_tensor *p, int64_t num_samples, bool replacement, nb_generator *gen) {
    nb_scope *s = nb_op_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *r = multinomial_impl(p, num_samples, replacement, gen);
    nb_set_grad_enabled(prev);
    return nb_scope_return(s, r);
}

/* floor(low + U[0, 1) (high - low)), from a float64 uniform fill (so the
 * draws are the backend's Philox layout), clamped below high against
 * rounding, then cast. */
nb_tensor *nb_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen) {
    if (low >= high)
        return NB_FAIL(NB_ERR_INVALID_ARG, "randint: low %lld must be below high %lld", (long long)low, (long long)high);
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "randint: bad dtype %d", (int)dt);
    double lo = (double)low, hi = (double)high;
    static const double top[NB_DTYPE_COUNT] = {[NB_F32] = 0x1p24, [NB_F64] = 0x1p53, [NB_I32] = 0x1p31,
                                               [NB_I64] = 0x1p63, [NB_U8] = 256, [NB_BOOL] = 2,
                                               [NB_F16] = 2048, [NB_BF16] = 256, [NB_I8] = 128,
                                               [NB_I16] = 0x1p15};
    double min = dt == NB_U8 || dt == NB_BOOL ? 0 : -top[dt];
    if (lo < min || hi > top[dt])
        return NB_FAIL(NB_ERR_INVALID_ARG, "randint: [%lld, %lld) does not fit %s", (long long)low, (long long)high,
                       nb_dtype_name(dt));
    /* high near 2^63 rounds to 2^63 in float64: cap at the double below it */
    double cap = hi - 1 < hi ? hi - 1 : nextafter(hi, lo);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *u = nb_rand(ndim, shape, NB_F64, gen);
    nb_tensor *v = nb_clamp_scalar(nb_floor(nb_add_scalar(nb_mul_scalar(u, hi - lo), lo)), NAN, cap);
    return nb_scope_return(s, v ? nb_to_dtype(v, dt) : NULL);
}
