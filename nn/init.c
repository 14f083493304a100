/* init.c - torch.nn.init: calculate_gain, the fans, xavier_ and kaiming_
 * (uniform and normal), trunc_normal_, constant_/zeros_/ones_, by
 * torch/nn/init.py's formulas, and orthogonal_ (Saxe et al. 2013, "Exact
 * solutions to the nonlinear dynamics of learning in deep linear neural
 * networks"), by PyTorch's algorithm: a normal matrix, its QR, Q's columns
 * multiplied by sign(diag(R)) so that Q is uniform over the orthogonal
 * group (Mezzadri 2006, math-ph/0609050). Fills run without autograd, on the
 * tensor's device, with draws from the generator (NULL: the default one).
 * Tests: tests/test_nn.c (init_*). */
#include <math.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_backend.h"
#include "nb_extension.h"
#include "nb_linalg.h"
#include "nb_nn.h"
#include "nb_op_table.h"
#include "nb_ops.h"

/* sign(diag(R)) for R [k, n], k <= n, as a [k] tensor of R's dtype. */
static nb_tensor *diag_sign(nb_tensor *R) {
    int64_t k = nb_shape(R)[0], st = nb_strides(R)[0] + nb_strides(R)[1];
    nb_tensor *d = nb_tensor_view_of(R, 1, &k, &st, nb_storage_offset(R));
    nb_tensor *zero = nb_full_on(0, NULL, 0, nb_dtype_of(R), nb_device_of(R));
    return nb_sub(nb_to_dtype(nb_gt(d, zero), nb_dtype_of(R)), nb_to_dtype(nb_gt(zero, d), nb_dtype_of(R)));
}

static nb_status orthogonal_fill(nb_tensor *t, double gain, nb_generator *gen) {
    int64_t rows = nb_shape(t)[0], cols = nb_numel(t) / rows;
    nb_tensor *flat = nb_empty_on(NB_SHAPE(rows, cols), nb_dtype_of(t), nb_device_of(t)), *Q, *R;
    if (!flat) return nb_last_status();
    nb_status st = nb_normal_(flat, 0, 1, gen);
    if (st != NB_OK) return st;
    if (rows < cols) flat = nb_transpose(flat, 0, 1);
    if ((st = nb_linalg_qr(flat, NB_QR_REDUCED, &Q, &R)) != NB_OK) return st;
    nb_tensor *q = nb_mul(Q, diag_sign(R));
    if (rows < cols) q = nb_transpose(q, 0, 1);
    q = nb_reshape(nb_mul_scalar(q, gain), nb_dim(t), nb_shape(t));
    return q ? nb_copy_(t, q) : nb_last_status();
}

nb_status nb_init_orthogonal_(nb_tensor *t, double gain, nb_generator *gen) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.orthogonal_: NULL tensor");
    char b[NB_SHAPE_BUF];
    if (nb_dim(t) < 2)
        return nb_set_error(NB_ERR_SHAPE,
                            "init.orthogonal_: only tensors with 2 or more dimensions are supported, got %s",
                            nb_fmt_shape(nb_dim(t), nb_shape(t), b, sizeof b));
    if (!nb_backend_supports(nb_device_of(t), NB_OP_LINALG_QR, nb_dtype_of(t)))
        return nb_set_error(NB_ERR_DTYPE,
                            "init.orthogonal_: %s is not supported (it needs linalg_qr in that dtype "
                            "on the tensor's device)",
                            nb_dtype_name(nb_dtype_of(t)));
    if (nb_numel(t) == 0) return NB_OK;
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    nb_status st = orthogonal_fill(t, gain, gen);
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return st;
}

/* ---- gains, fans and the simple fills ------------------------------------ */

double nb_init_calculate_gain(const char *nonlinearity, double param) {
    if (!nonlinearity) return nb_set_error(NB_ERR_INVALID_ARG, "init.calculate_gain: NULL nonlinearity"), NAN;
    static const char *const one[] = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                      "conv_transpose2d", "conv_transpose3d", "sigmoid"};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        if (!strcmp(nonlinearity, one[i])) return 1;
    if (!strcmp(nonlinearity, "tanh")) return 5.0 / 3;
    if (!strcmp(nonlinearity, "relu")) return sqrt(2.0);
    if (!strcmp(nonlinearity, "selu")) return 3.0 / 4; /* PyTorch's choice, for self-normalizing nets */
    if (!strcmp(nonlinearity, "leaky_relu")) {
        double slope = isnan(param) ? 0.01 : param; /* NAN: PyTorch's None */
        if (!isfinite(slope))
            return nb_set_error(NB_ERR_INVALID_ARG, "init.calculate_gain: negative_slope %g is not finite", slope), NAN;
        return sqrt(2.0 / (1 + slope * slope));
    }
    return nb_set_error(NB_ERR_INVALID_ARG, "init.calculate_gain: unsupported nonlinearity \"%s\"", nonlinearity), NAN;
}

nb_status nb_init_calculate_fan_in_and_fan_out(const nb_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t || !fan_in || !fan_out)
        return nb_set_error(NB_ERR_INVALID_ARG, "init.calculate_fan_in_and_fan_out: NULL %s",
                            !t ? "tensor" : "output");
    char b[NB_SHAPE_BUF];
    if (nb_dim(t) < 2)
        return nb_set_error(NB_ERR_SHAPE,
                            "init: fan in and fan out can not be computed for a tensor with fewer than "
                            "2 dimensions (%s)",
                            nb_fmt_shape(nb_dim(t), nb_shape(t), b, sizeof b));
    int64_t rf = 1; /* the receptive field: the product of the dims past the first two (no overflow: numel fits) */
    for (int i = 2; i < nb_dim(t); i++) rf *= nb_shape(t)[i];
    *fan_in = nb_shape(t)[1] * rf, *fan_out = nb_shape(t)[0] * rf;
    return NB_OK;
}

/* A random fill's checks: a float tensor (the fills draw reals). */
static nb_status random_target(const char *op, const nb_tensor *t) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.%s: NULL tensor", op);
    if (!nb_dtype_is_float(nb_dtype_of(t)))
        return nb_set_error(NB_ERR_DTYPE, "init.%s: %s is not supported (a float tensor is needed)", op,
                            nb_dtype_name(nb_dtype_of(t)));
    return NB_OK;
}

/* U(-bound, bound) (mode 'u') or N(0, std = bound) (mode 'n') */
static nb_status fill(nb_tensor *t, char mode, double bound, nb_generator *gen) {
    return mode == 'u' ? nb_uniform_(t, -bound, bound, gen) : nb_normal_(t, 0, bound, gen);
}

/* xavier: std = gain sqrt(2 / (fan_in + fan_out)); uniform bound sqrt(3) std */
static nb_status xavier(const char *op, nb_tensor *t, char mode, double gain, nb_generator *gen) {
    int64_t fi, fo;
    nb_status st = random_target(op, t);
    if (!st) st = nb_init_calculate_fan_in_and_fan_out(t, &fi, &fo);
    if (st) return st;
    if (!isfinite(gain)) return nb_set_error(NB_ERR_INVALID_ARG, "init.%s: gain %g is not finite", op, gain);
    if (nb_numel(t) == 0) return NB_OK; /* nothing to fill (and fan_in + fan_out may be 0) */
    double std = fabs(gain) * sqrt(2.0 / (double)(fi + fo));
    return fill(t, mode, mode == 'u' ? sqrt(3.0) * std : std, gen);
}

nb_status nb_init_xavier_uniform_(nb_tensor *t, double gain, nb_generator *gen) {
    return xavier("xavier_uniform_", t, 'u', gain, gen);
}
nb_status nb_init_xavier_normal_(nb_tensor *t, double gain, nb_generator *gen) {
    return xavier("xavier_normal_", t, 'n', gain, gen);
}

/* kaiming: std = calculate_gain(nonlinearity, a) / sqrt(fan); uniform bound sqrt(3) std */
static nb_status kaiming(const char *op, nb_tensor *t, char mode, double a, nb_init_fan_mode fan_mode,
                         const char *nonlinearity, nb_generator *gen) {
    int64_t fi, fo;
    nb_status st = random_target(op, t);
    if (!st) st = nb_init_calculate_fan_in_and_fan_out(t, &fi, &fo);
    if (st) return st;
    if (fan_mode != NB_FAN_IN && fan_mode != NB_FAN_OUT)
        return nb_set_error(NB_ERR_INVALID_ARG, "init.%s: mode %d is neither NB_FAN_IN nor NB_FAN_OUT", op,
                            (int)fan_mode);
    double gain = nb_init_calculate_gain(nonlinearity ? nonlinearity : "leaky_relu", a);
    if (isnan(gain)) return nb_last_status();
    if (nb_numel(t) == 0) return NB_OK; /* PyTorch: a no-op (with a warning) */
    double std = gain / sqrt((double)(fan_mode == NB_FAN_IN ? fi : fo));
    return fill(t, mode, mode == 'u' ? sqrt(3.0) * std : std, gen);
}

nb_status nb_init_kaiming_uniform_(nb_tensor *t, double a, nb_init_fan_mode mode, const char *nonlinearity,
                                   nb_generator *gen) {
    return kaiming("kaiming_uniform_", t, 'u', a, mode, nonlinearity, gen);
}
nb_status nb_init_kaiming_normal_(nb_tensor *t, double a, nb_init_fan_mode mode, const char *nonlinearity,
                                  nb_generator *gen) {
    return kaiming("kaiming_normal_", t, 'n', a, mode, nonlinearity, gen);
}

nb_status nb_init_constant_(nb_tensor *t, double value) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.constant_: NULL tensor");
    return nb_fill_(t, value);
}
nb_status nb_init_zeros_(nb_tensor *t) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.zeros_: NULL tensor");
    return nb_fill_(t, 0);
}
nb_status nb_init_ones_(nb_tensor *t) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.ones_: NULL tensor");
    return nb_fill_(t, 1);
}

/* ---- trunc_normal_ --------------------------------------------------------- */

/* erfinv of a float64 tensor, from ops (so on any device): Giles's
 * single-precision approximation ("Approximating the erfinv function", GPU
 * Computing Gems, 2011) refined to float64 accuracy by Halley steps on
 * erf(y) - x where |x| <= 1/2, and Newton steps on log erfc(|y|) - log(1 -
 * |x|) in the tails (nearly quadratic there, so they converge where steps
 * on erf itself crawl); +-1 gives +-inf, |x| > 1 and NaN give NaN. */
static nb_tensor *erfinv_f64(nb_tensor *x) {
    static const double central[] = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                     -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                     -0.00417768164,  0.246640727,    1.50140941};
    static const double tail[] = {-0.000200214257, 0.000100950558, 0.00134934322,
                                  -0.00367342844,  0.00573950773,  -0.0076224613,
                                  0.00943887047,   1.00167406,     2.83297682};
    enum { NC = sizeof central / sizeof central[0] };
    nb_tensor *ax = nb_abs(x);
    nb_tensor *w = nb_neg(nb_log(nb_mul(nb_add_scalar(nb_neg(x), 1), nb_add_scalar(x, 1))));
    nb_tensor *wc = nb_add_scalar(w, -2.5), *wt = nb_add_scalar(nb_sqrt(w), -3);
    nb_tensor *pc = nb_add_scalar(nb_mul_scalar(wc, central[0]), central[1]); /* Horner */
    nb_tensor *pt = nb_add_scalar(nb_mul_scalar(wt, tail[0]), tail[1]);
    for (int i = 2; i < NC; i++)
        pc = nb_add_scalar(nb_mul(pc, wc), central[i]), pt = nb_add_scalar(nb_mul(pt, wt), tail[i]);
    nb_tensor *y = nb_mul(nb_where(nb_lt_scalar(w, 5), pc, pt), x);
    nb_tensor *mid = nb_le_scalar(ax, 0.5), *sgn = nb_sign(x);
    nb_tensor *log_q = nb_log1p(nb_neg(ax)); /* log(1 - |x|), exact in 1 - |x| for |x| >= 1/2 */
    /* five steps: the far tail (1 - |x| near 1e-16) starts 10% off and needs them all */
    for (int it = 0; it < 5 && y; it++) {
        nb_tensor *d = nb_mul_scalar(nb_exp(nb_neg(nb_mul(y, y))), 2 / sqrt(M_PI)); /* erf'(y) */
        nb_tensor *f = nb_sub(nb_erf(y), x);
        nb_tensor *halley = nb_sub(y, nb_div(f, nb_add(d, nb_mul(y, f))));
        nb_tensor *ay = nb_abs(y), *e = nb_erfc(ay);
        nb_tensor *newton = nb_mul(sgn, nb_add(ay, nb_div(nb_mul(nb_sub(nb_log(e), log_q), e), d)));
        nb_tensor *next = nb_where(mid, halley, newton);
        y = nb_where(nb_isfinite(next), next, y); /* +-1 (y = +-inf) and |x| > 1 (NaN) stay as they are */
    }
    /* the approximation's sign at +-1 is not x's: set +-inf there */
    return nb_where(nb_eq_scalar(ax, 1), nb_mul_scalar(x, INFINITY), y);
}

nb_status nb_init_trunc_normal_(nb_tensor *t, double mean, double std, double a, double b, nb_generator *gen) {
    nb_status st = random_target("trunc_normal_", t);
    if (st) return st;
    if (!isfinite(mean) || !(std > 0 && std < INFINITY) || !(a <= b))
        return nb_set_error(NB_ERR_INVALID_ARG, "init.trunc_normal_: need a finite mean, a finite std > 0 and a <= b "
                            "(got mean %g, std %g, a %g, b %g)", mean, std, a, b);
    if (nb_numel(t) == 0) return NB_OK;
    /* PyTorch's method: u ~ U(2 cdf(alpha) - 1, 2 cdf(beta) - 1), erfinv(u)
     * sqrt(2) std + mean, clamped to [a, b]; here 2 cdf(z) - 1 = erf(z / sqrt 2)
     * and the whole computation is float64, rounded once into t */
    double lo = erf((a - mean) / std / sqrt(2.0)), hi = erf((b - mean) / std / sqrt(2.0));
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *u = nb_empty_on(nb_dim(t), nb_shape(t), NB_F64, nb_device_of(t));
    st = u ? nb_uniform_(u, lo, hi, gen) : nb_last_status();
    if (!st) {
        nb_tensor *v = nb_add_scalar(nb_mul_scalar(erfinv_f64(u), std * sqrt(2.0)), mean);
        v = nb_clamp_scalar(v, a, b);
        st = v ? nb_copy_(t, v) : nb_last_status();
    }
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return st;
}
