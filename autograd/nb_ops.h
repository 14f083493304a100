/* nb_ops.h - differentiable tensor operations (PyTorch's names and semantics).
 *
 * Every op: returns a new tensor (or a view, where noted) owned as described
 * in nb_core.h; records its backward rule when grad mode is on and an input
 * requires grad; returns NULL with nb_last_error() set on bad input, naming
 * the op and the shapes; returns NULL at once if an input is NULL.
 * Binary ops broadcast as NumPy/PyTorch (align trailing dims; a dim of 1
 * stretches). Inputs must share a device; mixed dtypes promote as
 * torch.result_type (nb_result_type below), and each input's gradient comes
 * back in its own dtype. Float math takes f32 and f64; arithmetic and
 * comparisons also take integer dtypes; the ops autocast runs in lower
 * precision and their neighbours (add, mul, exp, gelu, matmul, conv,
 * pooling, attention, ...) also compute on bfloat16/float16 tensors (float32
 * arithmetic inside); an op given a dtype it does not take fails with
 * NB_ERR_DTYPE. Each op's dtypes are its row of the op table:
 * autograd/OPS.md (generated from core/nb_op_table.h). The ops of
 * torch.nn.functional (softmax, losses, convolution, pooling,
 * normalization, dropout, attention, ...) are in nb_functional.h, which
 * this header includes. Sections below are by topic; each names its
 * family: the forward and backward rule live in autograd/ops_<family>.c,
 * the CPU kernel in backend/cpu/<family>.c, the tests in
 * tests/test_ops_<family>.c.
 */
#ifndef NB_OPS_H
#define NB_OPS_H

#include "nb_core.h"
#include "nb_functional.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- unary math and activations (ops_unary.c; backend/cpu/unary.c, unary_math.c) --- */

/* Elementwise, output of x's shape and dtype; any strides. Forward formulas
 * and gradients are PyTorch's (torch.<name> / torch.nn.functional.<name>
 * docs, ATen's CPU kernels, tools/autograd/derivatives.yaml), including the
 * gradient at kinks. Dtypes: float32/float64, except where an op says
 * integers too. The math functions (exp, log, sqrt, sigmoid, tanh,
 * reciprocal .. erfc) promote integer and bool inputs to float32 as
 * PyTorch does; the activations (leaky_relu .. logsigmoid) reject them,
 * as PyTorch. neg, exp, relu, sigmoid, tanh, add_scalar, mul_scalar, silu
 * and gelu also take float16/bfloat16 (float32 arithmetic, one rounding);
 * the others give NB_ERR_DTYPE for them (autograd/OPS.md). A NULL input gives
 * NULL (NB_ERR_INVALID_ARG, or the earlier error kept). Outside an op's
 * domain the result is NaN/inf as in libm (e.g. log2(-1), acosh(0.5)). */

/* Scalar arithmetic, x + s, x * s, x ** exponent (PyTorch's scalar
 * promotion: see the binary ops below), and the basic functions. relu's
 * gradient at 0 is 0 and at NaN g, as PyTorch. x ** 0.5 and x ** -0.5 are
 * sqrt(x) and 1 / sqrt(x), as PyTorch's kernel ((-inf) ** 0.5 is NaN). */
nb_tensor *nb_add_scalar(nb_tensor *a, double s);
nb_tensor *nb_mul_scalar(nb_tensor *a, double s);
nb_tensor *nb_pow_scalar(nb_tensor *a, double exponent);
nb_tensor *nb_neg(nb_tensor *a);
nb_tensor *nb_exp(nb_tensor *a);
nb_tensor *nb_log(nb_tensor *a);
nb_tensor *nb_sqrt(nb_tensor *a);
nb_tensor *nb_relu(nb_tensor *a);
nb_tensor *nb_sigmoid(nb_tensor *a);
nb_tensor *nb_tanh(nb_tensor *a);

/* F.gelu's approximate argument: NB_GELU_ERF is 'none' (exact, the default),
 * NB_GELU_TANH 'tanh'. */
typedef enum nb_gelu_approximate { NB_GELU_ERF = 0, NB_GELU_TANH } nb_gelu_approximate;
/* F.gelu: x * Phi(x) (exact, erf) or the tanh approximation (Hendrycks &
 * Gimpel 2016), as PyTorch's approximate='none' / 'tanh'. */
nb_tensor *nb_gelu(nb_tensor *x, nb_gelu_approximate approximate);

/* |x|. Also int32/int64/uint8 (abs of the minimum wraps, as PyTorch).
 * Gradient gy * sign(x): 0 at x = 0. */
nb_tensor *nb_abs(nb_tensor *x);

/* -1, 0 or 1 as (0 < x) - (x < 0): sign(-0) = 0 and sign(NaN) = 0 as
 * PyTorch's CPU kernel. Also int32/int64/uint8. Gradient 0. */
nb_tensor *nb_sign(nb_tensor *x);

/* Rounding to an integer value (torch.floor/ceil/trunc/round): gradient 0.
 * round is half to even (round(2.5) = 2, round(-0.5) = -0), as torch.round.
 * On int32/int64/uint8 each returns a copy (as PyTorch). */
nb_tensor *nb_floor(nb_tensor *x);
nb_tensor *nb_ceil(nb_tensor *x);
nb_tensor *nb_trunc(nb_tensor *x);
nb_tensor *nb_round(nb_tensor *x);

/* torch.round(x, decimals=d): rint(x * 10^d) / 10^d, for d < 0
 * rint(x / 10^-d) * 10^-d, with 10^|d| in x's dtype (PyTorch's kernel, so
 * e.g. round(0.125, 2) = 0.12 but values like 1.005 round by their binary
 * value). decimals != 0 needs a float dtype (NB_ERR_DTYPE). Gradient 0. */
nb_tensor *nb_round_decimals(nb_tensor *x, int64_t decimals);

/* 1 / x; gradient -gy y^2. */
nb_tensor *nb_reciprocal(nb_tensor *x);

/* 1 / sqrt(x); gradient -gy y^3 / 2. */
nb_tensor *nb_rsqrt(nb_tensor *x);

/* log(1 + x), accurate near 0; gradient gy / (1 + x). */
nb_tensor *nb_log1p(nb_tensor *x);

/* e^x - 1, accurate near 0; gradient gy (y + 1). */
nb_tensor *nb_expm1(nb_tensor *x);

/* Base-2 and base-10 logarithms; gradient gy / (x ln 2), gy / (x ln 10). */
nb_tensor *nb_log2(nb_tensor *x);
nb_tensor *nb_log10(nb_tensor *x);

/* Trigonometric functions (radians). Gradients: sin gy cos x, cos -gy sin x,
 * tan gy (1 + y^2), asin gy / sqrt(1 - x^2), acos -gy / sqrt(1 - x^2),
 * atan gy / (1 + x^2) (asin/acos: domain [-1, 1], gradient inf at the ends). */
nb_tensor *nb_sin(nb_tensor *x);
nb_tensor *nb_cos(nb_tensor *x);
nb_tensor *nb_tan(nb_tensor *x);
nb_tensor *nb_asin(nb_tensor *x);
nb_tensor *nb_acos(nb_tensor *x);
nb_tensor *nb_atan(nb_tensor *x);

/* Hyperbolic functions. Gradients: sinh gy cosh x, cosh gy sinh x, asinh
 * gy / sqrt(x^2 + 1), acosh gy / sqrt(x^2 - 1) (domain x >= 1), atanh
 * gy / (1 - x^2) (domain [-1, 1]). */
nb_tensor *nb_sinh(nb_tensor *x);
nb_tensor *nb_cosh(nb_tensor *x);
nb_tensor *nb_asinh(nb_tensor *x);
nb_tensor *nb_acosh(nb_tensor *x);
nb_tensor *nb_atanh(nb_tensor *x);

/* Error function and its complement; gradients +-gy 2/sqrt(pi) e^(-x^2). */
nb_tensor *nb_erf(nb_tensor *x);
nb_tensor *nb_erfc(nb_tensor *x);

/* torch.logit: log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when
 * eps >= 0, z = x when eps < 0 (PyTorch's eps=None: pass -1). Integer and
 * bool x promote to float32. Gradient 1 / (z (1 - z)), 0 where the clamp
 * bites. Composite. */
nb_tensor *nb_logit(nb_tensor *x, double eps);
/* torch.sinc: sin(pi x) / (pi x), 1 at x = 0 (gradient 0 there); integer
 * and bool x promote to float32. Composite. */
nb_tensor *nb_sinc(nb_tensor *x);

/* F.leaky_relu: x > 0 ? x : negative_slope x (nn.LeakyReLU default 0.01).
 * Gradient at 0 is negative_slope, as PyTorch. */
nb_tensor *nb_leaky_relu(nb_tensor *x, double negative_slope);

/* ---- activations written from other ops (ops_activation.c) ------------------
 * PyTorch's torch.nn.functional of the same names and formulas; float32 /
 * float64; gradients (first and second order) from the ops they are made
 * of. A double left 0 takes PyTorch's default where the doc says so
 * (NB_ZERO for 0). */
/* F.celu (Barron 2017): max(0, x) + min(0, alpha (exp(x / alpha) - 1)),
 * alpha 1 (left 0); alpha NB_ZERO is NB_ERR_INVALID_ARG. */
nb_tensor *nb_celu(nb_tensor *x, double alpha);
/* F.softsign: x / (1 + |x|). */
nb_tensor *nb_softsign(nb_tensor *x);
/* F.softshrink: x - lambd above lambd, x + lambd below -lambd, else 0
 * (lambd 0.5 when left 0; must be >= 0). */
nb_tensor *nb_softshrink(nb_tensor *x, double lambd);
/* F.hardshrink: x where |x| > lambd, else 0 (lambd 0.5 when left 0). */
nb_tensor *nb_hardshrink(nb_tensor *x, double lambd);
/* F.tanhshrink: x - tanh(x). */
nb_tensor *nb_tanhshrink(nb_tensor *x);
/* F.threshold: x where x > threshold, else value (both as given). */
nb_tensor *nb_threshold(nb_tensor *x, double threshold, double value);
/* F.glu (Dauphin et al. 2017): a * sigmoid(b) with a, b the halves of x
 * along dim (PyTorch's default -1); an odd size is NB_ERR_SHAPE. */
nb_tensor *nb_glu(nb_tensor *x, int dim);
/* F.prelu (He et al. 2015): x where x > 0, else weight x; weight has one
 * element or one per channel (dim 1 of x, as PyTorch), of x's dtype. */
nb_tensor *nb_prelu(nb_tensor *x, nb_tensor *weight);
/* F.rrelu (Xu et al. 2015): x where x >= 0, else a x with a ~ U(lower,
 * upper) per element in training (from gen; NULL the default generator),
 * (lower + upper) / 2 otherwise; lower 1/8 and upper 1/3 when left 0. */
nb_tensor *nb_rrelu(nb_tensor *x, double lower, double upper, bool training, nb_generator *gen);
/* F.softmin: softmax(-x) over dim. */
nb_tensor *nb_softmin(nb_tensor *x, int dim);
/* F.gumbel_softmax (Jang et al. 2017; Maddison et al. 2017):
 * softmax((logits + g) / tau) over dim with g = -log(-log(1 - U)) Gumbel
 * noise (U from gen, NULL the default generator); hard gives the one-hot
 * of its argmax in value with the soft sample's gradient (straight-
 * through). tau 1 when left 0; must be > 0. */
nb_tensor *nb_gumbel_softmax(nb_tensor *logits, double tau, bool hard, int dim, nb_generator *gen);

/* The in-place forms (F.relu_, F.leaky_relu_, F.elu_, F.selu_, F.celu_,
 * F.hardtanh_, F.threshold_, F.rrelu_; nn.ReLU(inplace=True) ...): x is
 * overwritten with the op's result (arguments and defaults as the op's).
 * Under autograd, as PyTorch's, x's history is rebased: x's grad_fn
 * becomes the op's node, which differentiates through x's old value; ops
 * that used x before keep its old value and node. The result goes to new
 * storage then: views of x taken before keep the old values (PyTorch
 * writes through them and rebases their history too), and a node that
 * saved x computes with the old value where PyTorch's fails with the
 * version-counter error. Without grad recording they write in place,
 * through views, bumping the version counter. Errors: NB_ERR_STATE for a
 * leaf that requires grad (PyTorch's error too), NB_ERR_UNSUPPORTED for a
 * view of part of a tensor under autograd, NB_ERR_DTYPE.
 * ops_activation.c. */
nb_status nb_relu_(nb_tensor *x);
nb_status nb_leaky_relu_(nb_tensor *x, double negative_slope);
nb_status nb_elu_(nb_tensor *x, double alpha);
nb_status nb_selu_(nb_tensor *x);
nb_status nb_celu_(nb_tensor *x, double alpha);
nb_status nb_hardtanh_(nb_tensor *x, double min_val, double max_val);
nb_status nb_threshold_(nb_tensor *x, double threshold, double value);
nb_status nb_rrelu_(nb_tensor *x, double lower, double upper, bool training, nb_generator *gen);

/* F.elu (Clevert et al. 2015): x > 0 ? x : alpha (e^x - 1) (default alpha
 * 1). Gradient at 0 is alpha (the negative branch, as PyTorch), at NaN NaN. */
nb_tensor *nb_elu(nb_tensor *x, double alpha);

/* F.selu (Klambauer et al. 2017): scale * elu(x, alpha) with alpha =
 * 1.6732632423543772, scale = 1.0507009873554805. */
nb_tensor *nb_selu(nb_tensor *x);

/* F.silu (swish; Elfwing et al. 2017, Ramachandran et al. 2017): x sigmoid(x);
 * gradient gy s (1 + x (1 - s)), s = sigmoid(x). */
nb_tensor *nb_silu(nb_tensor *x);

/* silu(a) * b, the product of a SwiGLU feed-forward (Shazeer 2020; Llama's
 * act_fn(gate_proj(x)) * up_proj(x)), with nb_silu and nb_mul's broadcasting,
 * promotion and gradients. Where nothing records a gradient and a and b
 * share a shape and float dtype, the backend's fused kernel runs it in one
 * pass when it has one (CUDA): the same bits as the two ops (silu(a) is
 * rounded to the dtype before the product). Errors: those of nb_silu and
 * nb_mul. */
nb_tensor *nb_silu_mul(nb_tensor *a, nb_tensor *b);

/* F.mish (Misra 2019): x tanh(softplus(x)). */
nb_tensor *nb_mish(nb_tensor *x);

/* F.softplus: log(1 + e^(beta x)) / beta, and x itself where beta x >
 * threshold (PyTorch's defaults beta 1, threshold 20). Gradient
 * sigmoid(beta x), 1 above the threshold. beta != 1 runs as
 * softplus_1(beta x) * (1 / beta) (last-bit differences from PyTorch's
 * division). Errors: beta 0 or not finite, threshold NaN (NB_ERR_INVALID_ARG). */
nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold);

/* F.hardtanh: clamp(x, min_val, max_val) (defaults -1, 1); gradient gy
 * where min_val < x < max_val and 0 elsewhere, at both ends and at NaN
 * included (as PyTorch's hardtanh_backward). NaN stays NaN. Errors: min_val > max_val
 * (NB_ERR_INVALID_ARG). */
nb_tensor *nb_hardtanh(nb_tensor *x, double min_val, double max_val);

/* F.relu6: hardtanh(x, 0, 6). */
nb_tensor *nb_relu6(nb_tensor *x);

/* F.hardsigmoid (Howard et al. 2019): min(max(x + 3, 0), 6) / 6; gradient
 * gy / 6 on -3 < x < 3, else 0. */
nb_tensor *nb_hardsigmoid(nb_tensor *x);

/* F.hardswish (Howard et al. 2019): x min(max(x + 3, 0), 6) / 6; gradient 0
 * below -3, gy (x / 3 + 1/2) on [-3, 3), gy from 3 (PyTorch's vectorized
 * kernel; its scalar one gives 1.5 gy at 3). */
nb_tensor *nb_hardswish(nb_tensor *x);

/* F.logsigmoid: log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|) (no overflow
 * for either sign); gradient gy sigmoid(-x). */
nb_tensor *nb_logsigmoid(nb_tensor *x);

/* ---- arithmetic, comparisons, logic, promotion (ops_binary.c; backend/cpu/binary.c) --- */

/* torch.add / torch.sub / torch.mul / torch.div (a + b, a - b, a * b, a / b; no
 * alpha argument: scale with nb_mul_scalar): elementwise on a and b broadcast
 * together, in their promoted dtype (nb_result_type below; nb_div is true
 * division, float32 for integer and bool inputs). Dtypes: f32, f64, i32, i64,
 * u8, bool (add: logical or, mul: logical and; sub rejects bool, as torch.sub)
 * and f16/bf16 (float32 arithmetic inside). Gradients g and g (add), g and -g
 * (sub), g b and g a (mul), g / b and -g a / b^2 (div), each summed over the
 * broadcast dims back to its input's shape and cast to its dtype; twice
 * differentiable. Errors: NB_ERR_SHAPE (shapes that do not broadcast),
 * NB_ERR_DTYPE, NB_ERR_DEVICE (inputs on different devices). */
nb_tensor *nb_add(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_div(nb_tensor *a, nb_tensor *b);

/* a ** b elementwise; gradient w.r.t. b is a**b * log(a) (defined for a > 0). */
nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b);

/* Comparisons (not differentiable): bool tensors of the broadcast shape. */
nb_tensor *nb_eq(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_ne(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_gt(nb_tensor *a, nb_tensor *b);

/* Type promotion, as torch.promote_types / torch.result_type (PyTorch's
 * "Type promotion" doc): categories bool < integer < floating; the join of
 * two dtypes is the wider of the higher category (u8 with i32 -> i32, i32
 * with f32 -> f32, f16 with bf16 -> f32, f16/bf16 with any integer -> the
 * f16/bf16). nb_result_type: a dimensioned tensor's dtype wins over a 0-dim
 * tensor's unless the 0-dim one is of a higher category, then the two join
 * (f32 [3] with f64 [] -> f32; i32 [3] with f32 [] -> f32, with f64 [] ->
 * f64; u8 [3] with i64 [] -> u8); two tensors both 0-dim or both
 * dimensioned join. The scalar forms below (nb_*_scalar(t, double)): a
 * floating t keeps its dtype; for an integer t, an integral value it can
 * hold acts as a Python int (t keeps its dtype, so int64 compares stay
 * exact; a bool t gives int64), any other value as a Python float (float32,
 * the default float dtype).
 * Every binary op here (and nb_add, nb_sub, nb_mul, nb_div, nb_pow) casts
 * its inputs to that dtype first (nb_to_dtype), so each input's gradient
 * comes back in its own dtype. Out-of-enum dtypes give NB_DTYPE_COUNT. */
nb_dtype nb_promote_types(nb_dtype a, nb_dtype b);
nb_dtype nb_result_type(const nb_tensor *a, const nb_tensor *b);

/* Division: nb_div is true division (torch.div): integer and bool inputs
 * give float32. nb_div_mode with NB_ROUNDING_TRUNC / NB_ROUNDING_FLOOR is
 * torch.div(a, b, rounding_mode='trunc' / 'floor') in the promoted dtype
 * (integers stay integers: -7 / 2 -> -3 trunc, -4 floor; floats use
 * PyTorch's div_floor, consistent with nb_remainder); its gradient is zero
 * (piecewise constant, as PyTorch). nb_floor_divide = floor mode.
 * Integer division by zero fails with NB_ERR_INVALID_ARG ("div: integer
 * division by zero"); INT_MIN / -1 wraps to INT_MIN. Floats follow IEEE. */
typedef enum nb_rounding_mode { NB_ROUNDING_NONE = 0, NB_ROUNDING_TRUNC, NB_ROUNDING_FLOOR } nb_rounding_mode;
/* torch.div(a, b, rounding_mode) and torch.floor_divide(a, b), as described
 * above: broadcast, promoted dtype; f32, f64, i32, i64, u8. Errors:
 * NB_ERR_INVALID_ARG (a bad mode, integer division by zero), NB_ERR_SHAPE,
 * NB_ERR_DTYPE. */
nb_tensor *nb_div_mode(nb_tensor *a, nb_tensor *b, nb_rounding_mode mode);
nb_tensor *nb_floor_divide(nb_tensor *a, nb_tensor *b);

/* torch.remainder: a - floor(a / b) * b, the sign of b (Python's %:
 * remainder(-7, 2) = 1, remainder(7, -2) = -1). torch.fmod: C's fmod, the
 * sign of a (fmod(-7, 2) = -1). Integers and floats; integer b == 0 fails
 * as nb_div_mode. Gradients: d/da = 1, d/db = -floor(a / b) (remainder) or
 * -trunc(a / b) (fmod), as PyTorch. */
nb_tensor *nb_remainder(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_remainder_scalar(nb_tensor *a, double b);
nb_tensor *nb_fmod(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_fmod_scalar(nb_tensor *a, double b);

/* torch.atan2(a, b): the angle of (b, a) in [-pi, pi]; integers give
 * float32. da = b / (a^2 + b^2), db = -a / (a^2 + b^2). */
nb_tensor *nb_atan2(nb_tensor *a, nb_tensor *b);
/* torch.xlogy: x * log(y), 0 where x == 0 unless y is NaN; broadcasts,
 * promotes as torch.result_type (integers and bool to float32). Gradients
 * as PyTorch's: log(y) (0 where x == 0 and y <= 0) and x / y (but 0, not
 * NaN, at x = y = 0). Composite. */
nb_tensor *nb_xlogy(nb_tensor *x, nb_tensor *y);
/* torch.hypot: sqrt(a^2 + b^2) for float32/float64 (broadcast). Computed
 * as written: unlike C's hypot it overflows for |a| beyond ~1e19 in
 * float32. Gradients a / hypot, b / hypot (NaN at 0, 0 as PyTorch's). */
nb_tensor *nb_hypot(nb_tensor *a, nb_tensor *b);

/* torch.maximum / torch.minimum: elementwise, NaN-propagating, any dtype
 * but float16/bfloat16. Gradient: to the larger (smaller) input; at ties
 * each input gets half; a NaN in either passes g to both (PyTorch's rule). */
nb_tensor *nb_maximum(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_minimum(nb_tensor *a, nb_tensor *b);

/* torch.lerp: start + weight * (end - start), by PyTorch's formula (for
 * |weight| >= 0.5: end - (end - start) * (1 - weight)), broadcasting; all
 * three of one float dtype (f32/f64; NB_ERR_DTYPE otherwise, as PyTorch).
 * Gradients to all three: (1 - w) g, w g, (end - start) g. Composite. */
nb_tensor *nb_lerp(nb_tensor *start, nb_tensor *end, nb_tensor *weight);
nb_tensor *nb_lerp_scalar(nb_tensor *start, nb_tensor *end, double weight);

/* torch.clamp(x, min, max) = minimum(maximum(x, min), max) with tensor
 * bounds (either may be NULL, not both: NB_ERR_INVALID_ARG), broadcast
 * together, promoted as torch.result_type over all three. NaN in x or a
 * bound gives NaN; min > max gives max. Gradients (PyTorch's
 * clamp_backward): x gets g where min <= x <= max; min where x < min (and
 * min < max); max where x > max (or max < min). nb_clamp_scalar: NAN means
 * "no bound" (so clamping to NaN cannot be asked); the bounds follow the
 * scalar rule above (integral bounds keep an integer x's dtype, others give
 * float32). */
nb_tensor *nb_clamp(nb_tensor *x, nb_tensor *min, nb_tensor *max);
nb_tensor *nb_clamp_scalar(nb_tensor *x, double min, double max);

/* Comparisons (torch.eq ... torch.le; not differentiable): bool tensors of
 * the broadcast shape, compared in the promoted dtype (i32 vs f32 compares
 * as f32). NaN compares unequal to everything (ne is true). nb_eq, nb_ne,
 * nb_gt are declared with the elementwise ops above. */
nb_tensor *nb_ge(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_lt(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_le(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_eq_scalar(nb_tensor *a, double b);
nb_tensor *nb_ne_scalar(nb_tensor *a, double b);
nb_tensor *nb_gt_scalar(nb_tensor *a, double b);
nb_tensor *nb_ge_scalar(nb_tensor *a, double b);
nb_tensor *nb_lt_scalar(nb_tensor *a, double b);
nb_tensor *nb_le_scalar(nb_tensor *a, double b);

/* torch.isnan / isinf / isfinite: bool of x's shape, any dtype (integer and
 * bool inputs give false / false / true). */
nb_tensor *nb_isnan(nb_tensor *x);
nb_tensor *nb_isinf(nb_tensor *x);
nb_tensor *nb_isfinite(nb_tensor *x);

/* torch.logical_and / or / xor / not: any dtypes in (x != 0 is true, NaN
 * included), bool out of the broadcast shape. */
nb_tensor *nb_logical_and(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_logical_or(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_logical_xor(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_logical_not(nb_tensor *x);

/* torch.bitwise_and / or / xor / not on integer and bool dtypes (promoted;
 * floats give NB_ERR_DTYPE). bitwise_left_shift / right_shift on integer
 * dtypes: the right shift is arithmetic for signed types; shifting by a
 * negative count or >= the bit width gives 0 (left, and right for uint8)
 * or the sign fill (right, signed), as PyTorch's CPU kernels. */
nb_tensor *nb_bitwise_and(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_bitwise_or(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_bitwise_xor(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_bitwise_not(nb_tensor *x);
nb_tensor *nb_bitwise_left_shift(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_bitwise_right_shift(nb_tensor *a, nb_tensor *b);

/* Scalar forms (x & 6, x << 2): b acts as a Python int, so an integer a
 * keeps its dtype when b fits it and a bool a gives int64; b is exact for
 * |b| < 2^53. Errors as the tensor forms. */
nb_tensor *nb_bitwise_and_scalar(nb_tensor *a, int64_t b);
nb_tensor *nb_bitwise_or_scalar(nb_tensor *a, int64_t b);
nb_tensor *nb_bitwise_xor_scalar(nb_tensor *a, int64_t b);
nb_tensor *nb_bitwise_left_shift_scalar(nb_tensor *a, int64_t b);
nb_tensor *nb_bitwise_right_shift_scalar(nb_tensor *a, int64_t b);

/* torch.isclose(a, b, rtol, atol, equal_nan): bool of the broadcast shape,
 * true where a == b (infinities of one sign included), or both are NaN and
 * equal_nan, or |a - b| is finite and <= atol + |rtol * b| (PyTorch's
 * defaults: rtol 1e-5, atol 1e-8). a and b must share a dtype, as PyTorch
 * (NB_ERR_DTYPE otherwise; float16/bfloat16 too); integers subtract in their
 * dtype, bool compares as float32. Not differentiable. Errors: negative
 * rtol or atol (NB_ERR_INVALID_ARG), shapes (NB_ERR_SHAPE).
 * nb_allclose: whether every element is close (torch.allclose), into
 * *result; reads one value to the host. */
nb_tensor *nb_isclose(nb_tensor *a, nb_tensor *b, double rtol, double atol, bool equal_nan);
nb_status nb_allclose(nb_tensor *a, nb_tensor *b, double rtol, double atol, bool equal_nan, bool *result);

/* ---- reductions (ops_reduce.c; backend/cpu/reduce.c) ------------------------- */

/* dims: n_dims dims to reduce (negative counts from the end); dims NULL or
 * n_dims 0 reduces over all. keepdim keeps reduced dims as size 1.
 * Sums run in a fixed order (deterministic whatever the thread count); the
 * CPU backend accumulates float32 in double. nb_sum of an integer or bool
 * tensor is int64 (torch.sum's dtype: a bool mask sums to its count), of a
 * bfloat16/float16 tensor its own dtype (float32 accumulation); nb_mean
 * takes float32/float64 only. */
nb_tensor *nb_sum(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
nb_tensor *nb_mean(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* torch.amax: gradient shared evenly among tied maxima. */
nb_tensor *nb_max(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* torch.max(t, dim): values, and if indices != NULL the int64 argmax (first
 * maximum) into *indices (owned like any op result). Gradient flows to that index. */
nb_tensor *nb_max_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices);

/* int64 index of the first maximum along dim (not differentiable). */
nb_tensor *nb_argmax(nb_tensor *t, int dim, bool keepdim);

/* Same dims convention as nb_sum above: dims NULL or n_dims 0 = all dims,
 * negative dims count from the end; a dim out of range or repeated fails
 * with NB_ERR_INVALID_ARG naming the op. Ties: max_dim/min_dim/argmax/argmin
 * give the first extreme (lowest index) and send the gradient there;
 * amax/amin (and nb_max/nb_min, which are them) share it evenly among all
 * tied extremes (PyTorch's amax/amin backward). */

/* torch.prod over dims. f32/f64 keep their dtype; integer and bool inputs
 * give int64 (wrapping on overflow), as PyTorch. The empty product is 1.
 * Backward as PyTorch's prod_backward, exact with zeros: no zero in the
 * slice -> g * out / x; one zero -> g * (product of the others) at the zero,
 * 0 elsewhere; two or more -> 0. */
nb_tensor *nb_prod(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* torch.amax / torch.amin over dims (f32/f64). An empty reduced dim fails
 * (NB_ERR_SHAPE), as PyTorch. NaN propagates. */
nb_tensor *nb_amax(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
nb_tensor *nb_amin(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* nabla's nb_min over dims: torch.amin (the counterpart of nb_max). */
nb_tensor *nb_min(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* torch.min(t, dim): values, and if indices != NULL the int64 index of the
 * first minimum (owned like any op result); gradient flows to that index.
 * Errors: dim out of range (NB_ERR_INVALID_ARG), empty dim (NB_ERR_SHAPE). */
nb_tensor *nb_min_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices);

/* int64 index of the first minimum along dim (NaN counts as the minimum);
 * any dtype; not differentiable. */
nb_tensor *nb_argmin(nb_tensor *t, int dim, bool keepdim);

/* torch.var(t, dims, correction=, keepdim=): sum((x - mean)^2) / max(0, N -
 * correction) with N the number of reduced elements; correction 1 is
 * Bessel's (PyTorch's default), 0 the biased estimate. N - correction <= 0
 * gives inf/NaN as PyTorch. f32/f64; a composite (mean, sub, mul, sum), so
 * its gradient is 2 (x - mean) g / (N - correction). */
nb_tensor *nb_var(nb_tensor *t, const int *dims, int n_dims, double correction, bool keepdim);

/* sqrt(nb_var(...)); the gradient at std == 0 is 0, PyTorch's masked std_backward. */
nb_tensor *nb_std(nb_tensor *t, const int *dims, int n_dims, double correction, bool keepdim);

/* torch.linalg.vector_norm(t, ord=p, dim=dims, keepdim): (sum |x|^p)^(1/p)
 * over dims for finite p >= 1; max |x| for p = INFINITY, min |x| for
 * -INFINITY. torch.norm's p='fro' is p = 2 over the same dims. f32/f64.
 * Gradient: g sign(x) |x|^(p-1) / norm^(p-1), 0 where the norm is 0 (so the
 * 2-norm's gradient at 0 is 0, PyTorch's masked rule); for +-inf shared
 * evenly among the elements attaining it. Errors: other p (NB_ERR_INVALID_ARG),
 * an inf norm over an empty dim (NB_ERR_SHAPE). */
nb_tensor *nb_norm(nb_tensor *t, double p, const int *dims, int n_dims, bool keepdim);

/* torch.logsumexp over dims: log(sum(exp(x - m))) + m with m the max (0
 * where the max is infinite), so it never overflows; -inf over an empty dim.
 * f32/f64. Gradient: g * softmax(x) over the reduced dims. */
nb_tensor *nb_logsumexp(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* torch.all / torch.any over dims: any dtype in (true = nonzero; NaN is
 * true), bool out; over an empty dim all is true and any false. Not
 * differentiable. */
nb_tensor *nb_all(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
nb_tensor *nb_any(nb_tensor *t, const int *dims, int n_dims, bool keepdim);

/* ---- cumulative ops (ops_scan.c; backend/cpu/scan.c) ------------------------- */

/* Along one dim (negative counts from the end; a 0-d input scans as one
 * element with dim 0 or -1); the output has t's shape. Errors: dim out of
 * range (NB_ERR_INVALID_ARG). Sequential along dim, parallel over the other
 * positions: deterministic. Floats accumulate in double on the CPU.
 * Gradients for f32/f64 inputs. */

/* torch.cumsum(t, dim): f32/f64 keep their dtype; integer and bool inputs
 * accumulate in int64 and give int64, as PyTorch. Backward: reverse cumsum. */
nb_tensor *nb_cumsum(nb_tensor *t, int dim);

/* torch.cumprod(t, dim): dtypes as cumsum. Backward: PyTorch's
 * cumprod_backward, exact with zeros in O(n) per line: before the first
 * zero k, reverse-cumsum(g * out) / x; at k, sum_{j>=k} g_j prod_{m<=j, m!=k}
 * x_m; after k, 0. */
nb_tensor *nb_cumprod(nb_tensor *t, int dim);

/* torch.cummax / torch.cummin(t, dim): running extreme values (t's dtype)
 * and, if indices != NULL, *indices (int64, owned like an op result) = the
 * index of the LAST element equal to the running extreme (PyTorch's CPU
 * rule, `>=` / `<=`); a NaN becomes the extreme and stays (index of the last
 * NaN). Backward: g scattered to the indices, summed in increasing position
 * order (deterministic). */
nb_tensor *nb_cummax(nb_tensor *t, int dim, nb_tensor **indices);
nb_tensor *nb_cummin(nb_tensor *t, int dim, nb_tensor **indices);

/* torch.logcumsumexp(t, dim): log(sum_{j<=i} exp(x_j)), accumulated
 * stably (log1p(exp(min - max)) + max, exact for infinities). f32/f64 only
 * (NB_ERR_DTYPE). Gradient sum_{j>=i} g_j exp(x_i - out_j), computed by a
 * reverse recurrence that never overflows. */
nb_tensor *nb_logcumsumexp(nb_tensor *t, int dim);

/* ---- sorting (ops_sort.c; backend/cpu/sort.c) -------------------------------- */

/* Sorting along one dim (negative dims count from the end; a 0-d input is
 * one element). Every sort is stable: equal elements keep their order,
 * ascending and descending, which satisfies PyTorch's stable=True and its
 * unspecified order for stable=False. NaN sorts as larger than any number
 * (last ascending, first descending; topk largest takes NaNs first), as
 * PyTorch. All six dtypes (bool as 0/1); indices are int64. Multi-output
 * ops return a status and write *values / *indices (owned like any op
 * result); either pointer may be NULL to skip that output. The values'
 * gradient (f32/f64) is scattered back to the source positions by the
 * indices (deterministic). Errors: NULL input, dim out of range
 * (NB_ERR_INVALID_ARG), k out of range (NB_ERR_INVALID_ARG). Source:
 * PyTorch's torch.sort / argsort / topk / kthvalue docs. */

/* torch.sort: values and the int64 positions they came from, along dim. */
nb_status nb_sort(nb_tensor *x, int dim, bool descending, bool stable, nb_tensor **values, nb_tensor **indices);

/* torch.argsort: the indices of nb_sort (not differentiable). */
nb_tensor *nb_argsort(nb_tensor *x, int dim, bool descending);

/* torch.topk: the k largest (largest) or smallest elements along dim, of
 * size k there; 0 <= k <= size. Always sorted (best first), whatever
 * `sorted` says (PyTorch leaves the order unspecified when it is false);
 * ties keep the input order. */
nb_status nb_topk(nb_tensor *x, int64_t k, int dim, bool largest, bool sorted, nb_tensor **values,
                  nb_tensor **indices);

/* torch.kthvalue: the k-th smallest (1-based, 1 <= k <= size) along dim and
 * its index; keepdim keeps dim as size 1. Among equal values, the index is
 * the one a stable ascending sort puts at position k. */
nb_status nb_kthvalue(nb_tensor *x, int64_t k, int dim, bool keepdim, nb_tensor **values, nb_tensor **indices);

/* torch.searchsorted: for each of values, the index where it would be
 * inserted into the sorted last dim of sorted_sequence to keep it sorted:
 * the first such index (right false, side="left") or the last (right true,
 * side="right"). sorted_sequence is 1-D [B] (one sequence for all values),
 * or [..., B] with values [..., M] sharing its leading dims; sorter (int64
 * of sorted_sequence's shape, or NULL) sorts an unsorted sequence, as
 * argsort's output. Result: int64 (int32 with out_int32) of values' shape.
 * Any real dtypes (compared in their promoted type, as PyTorch); not
 * differentiable. Computed as a count of the boundaries below each value:
 * O(values x B) work and memory, exact, deterministic, on every backend.
 * Errors: NB_ERR_SHAPE, NB_ERR_DTYPE. */
nb_tensor *nb_searchsorted(nb_tensor *sorted_sequence, nb_tensor *values, bool out_int32, bool right,
                           nb_tensor *sorter);
/* torch.bucketize: the bucket of each input element given 1-D sorted
 * boundaries: i with boundaries[i-1] < x <= boundaries[i] (right false) or
 * boundaries[i-1] <= x < boundaries[i] (right true); nb_searchsorted's
 * result with the arguments swapped. */
nb_tensor *nb_bucketize(nb_tensor *input, nb_tensor *boundaries, bool out_int32, bool right);
/* torch.histc: a [bins] histogram of the elements of input (float32/float64,
 * result in its dtype) over [min, max] in equal bins; min = max = 0 takes
 * the data's range (read back to the host), and an empty range widens to
 * [min - 1, max + 1]. Elements outside the range and NaN are not counted (PyTorch 1.13 counted NaN in bin 0);
 * max falls in the last bin. Not differentiable. Errors: bins < 1, min > max
 * or not finite (NB_ERR_INVALID_ARG). */
nb_tensor *nb_histc(nb_tensor *input, int64_t bins, double min, double max);

/* ---- views (ops_view.c; no kernel: they share storage) ----------------------- */

/* Views share storage with their input; writes through one show in the other.
 * reshape returns a view when the strides allow and a copy otherwise; view
 * fails (NB_ERR_SHAPE) where a copy would be needed. One size may be -1. */
nb_tensor *nb_reshape(nb_tensor *t, int ndim, const int64_t *shape);
nb_tensor *nb_view(nb_tensor *t, int ndim, const int64_t *shape);
nb_tensor *nb_permute(nb_tensor *t, const int *dims); /* nb_dim(t) entries */
/* torch.transpose: the view with dims dim0 and dim1 swapped (negative dims
 * count from the end; a 0-dim t takes 0 and -1). Any dtype. Errors: a dim out
 * of range (NB_ERR_INVALID_ARG). */
nb_tensor *nb_transpose(nb_tensor *t, int dim0, int dim1);

/* Elements start..start+length-1 of dim (torch.narrow). */
nb_tensor *nb_narrow(nb_tensor *t, int dim, int64_t start, int64_t length);

/* torch.select / t[..., index, ...]: the view at index along dim, with dim
 * removed (negative index and dim count from the end). Gradient: g into
 * zeros at index. Errors: dim or index out of range (NB_ERR_INVALID_ARG). */
nb_tensor *nb_select(nb_tensor *t, int dim, int64_t index);

/* Python's t[..., start:end:step, ...] on one dim; step >= 1; start/end are
 * clamped like Python slices (negative counts from the end). */
nb_tensor *nb_slice(nb_tensor *t, int dim, int64_t start, int64_t end, int64_t step);

/* Broadcast view to shape (-1 keeps a size); new leading dims allowed. */
nb_tensor *nb_expand(nb_tensor *t, int ndim, const int64_t *shape);
/* torch.unsqueeze: a view with a dim of size 1 inserted at dim, in [-ndim - 1,
 * ndim] (negative counts from the end). Errors: dim out of range, or t already
 * NB_MAX_DIMS dims (NB_ERR_INVALID_ARG). */
nb_tensor *nb_unsqueeze(nb_tensor *t, int dim);

/* Removes dim if its size is 1 (else returns a view unchanged, as PyTorch). */
nb_tensor *nb_squeeze(nb_tensor *t, int dim);

/* A contiguous tensor with t's values (t itself, with a new reference, if
 * already contiguous). */
nb_tensor *nb_contiguous(nb_tensor *t);

/* torch.clone: a new contiguous tensor with t's values and dtype, never
 * sharing t's storage (PyTorch keeps a dense input's strides; nabla's copy
 * is always C-contiguous). Gradient: g. */
nb_tensor *nb_clone(nb_tensor *t);

/* Merges dims start..end (inclusive; negative counts from the end). */
nb_tensor *nb_flatten(nb_tensor *t, int start_dim, int end_dim);

/* torch.diagonal: a view of the diagonal (offset > 0 above, < 0 below)
 * of the planes spanned by dim1, dim2; those dims are removed and the
 * diagonal appended last (length 0 when offset is past the edge). A
 * strided view sharing t's storage, as PyTorch. Defaults: 0, 0, 1.
 * Errors: equal or out-of-range dims (NB_ERR_INVALID_ARG). */
nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int dim1, int dim2);

/* Tensor.unfold: a view of the windows of `size` elements every `step`
 * along dim: dim becomes (size_d - size) / step + 1, a new last dim of
 * `size`. Overlapping windows sum their gradients (in a fixed order).
 * Errors: size > size_d, size < 0, step < 1, a bad dim (NB_ERR_INVALID_ARG). */
nb_tensor *nb_unfold(nb_tensor *t, int dim, int64_t size, int64_t step);

/* torch.movedim: dims source[i] moved to destination[i]; the others keep
 * their order (a permute view). Errors: repeated or bad dims. */
nb_tensor *nb_movedim(nb_tensor *t, const int *source, const int *destination, int n);

/* torch.broadcast_to: nb_expand under PyTorch's name (a view; -1 keeps a
 * size). Errors: shapes that do not broadcast (NB_ERR_SHAPE). */
nb_tensor *nb_broadcast_to(nb_tensor *t, int ndim, const int64_t *shape);

/* ---- shape ops (ops_shape.c; composites) ------------------------------------- */

/* F.pixel_shuffle (Shi et al. 2016): [*, C r^2, H, W] -> [*, C, H r, W r]
 * (out[c, h r + i, w r + j] = in[c r^2 + i r + j, h, w]); F.pixel_unshuffle
 * its inverse, [*, C, H r, W r] -> [*, C r^2, H, W]. Any dtype; a reshape,
 * permute and copy. Errors: fewer than 3 dims (NB_ERR_SHAPE), sizes not
 * divisible by r or r < 1 (NB_ERR_INVALID_ARG). */
nb_tensor *nb_pixel_shuffle(nb_tensor *x, int64_t upscale_factor);
nb_tensor *nb_pixel_unshuffle(nb_tensor *x, int64_t downscale_factor);
/* F.channel_shuffle (Zhang et al. 2018): x [N, C, *] with C split into
 * groups, channel g * (C / groups) + k moved to k * groups + g. Errors:
 * fewer than 3 dims, C not divisible by groups (>= 1). */
nb_tensor *nb_channel_shuffle(nb_tensor *x, int64_t groups);

/* torch.flip: a copy with the order of the given dims reversed (each dim
 * at most once; negative counts from the end). Composite: index_select with
 * a reversed index per dim. Errors: a bad or repeated dim (NB_ERR_INVALID_ARG). */
nb_tensor *nb_flip(nb_tensor *t, const int *dims, int n_dims);

/* torch.rot90: t rotated k times by 90 degrees in the plane of dim0 and
 * dim1 (from dim0 towards dim1; negative k turns the other way; PyTorch's
 * defaults are k 1, dims 0 and 1). Composite: flip + transpose (a view of
 * the flipped copy). Errors: equal or bad dims, fewer than 2 dims. */
nb_tensor *nb_rot90(nb_tensor *t, int64_t k, int dim0, int dim1);

/* torch.roll: elements shifted by shifts[i] along dims[i] (wrapping round);
 * with n_dims 0, one shift on the flattened tensor, shape restored.
 * Composite: narrow + cat. Errors: shift/dim counts differ, a bad dim. */
nb_tensor *nb_roll(nb_tensor *t, const int64_t *shifts, int n_shifts, const int *dims, int n_dims);

/* Tensor.repeat: n >= nb_dim(t) repeats (t gets leading dims of 1 to n
 * dims); out size i = size_i * repeats[i]. Composite: expand + reshape.
 * Errors: fewer repeats than dims, a negative repeat (NB_ERR_INVALID_ARG). */
nb_tensor *nb_repeat(nb_tensor *t, const int64_t *repeats, int n);

/* torch.tile: as repeat, but fewer reps than dims get leading 1s prepended
 * (PyTorch's rule), so tile(t [2, 3], {2}) repeats the last dim. */
nb_tensor *nb_tile(nb_tensor *t, const int64_t *reps, int n);

/* F.pad's mode: 'constant' (the default), 'reflect', 'replicate' or 'circular' (see nb_pad). */
typedef enum nb_pad_mode { NB_PAD_CONSTANT, NB_PAD_REFLECT, NB_PAD_REPLICATE, NB_PAD_CIRCULAR } nb_pad_mode;

/* F.pad: pads = (left, right) pairs from the last dim backwards (n_pads
 * even, at most 2 * nb_dim(t)), as PyTorch: pad [1,2,3,4] by (2, 1) in
 * reflect mode gives [3,2,1,2,3,4,3]. constant fills with value and
 * negative pads crop; reflect mirrors without repeating the edge (pads <
 * size); replicate repeats the edge (size > 0); circular wraps (pads <=
 * size). value is used by constant only. Any number of dims in every mode
 * (PyTorch limits the non-constant modes to the last 3 dims); negative pads
 * crop in every mode, as PyTorch: constant and circular crop first, then
 * pad (circular (-1, 2) of [1,2,3,4] wraps [2,3,4] into [2,3,4,2,3]);
 * reflect and replicate map each output position onto the uncropped input.
 * Gradients: constant's is g's interior; the others sum the copies
 * (index_select's rule). Errors: NB_ERR_INVALID_ARG (odd count, too many
 * pads, a pad too large for the mode, a crop larger than the dim, a negative
 * size, a size or element count that overflows int64). */
nb_tensor *nb_pad(nb_tensor *t, const int64_t *pads, int n_pads, nb_pad_mode mode, double value);

/* torch.tril / torch.triu on the last two dims of t [..., m, n] (any dtype):
 * keeps j - i <= diagonal (tril) or j - i >= diagonal (triu), zeroes the
 * rest. Composite: where with a mask from aranges. Errors: ndim < 2 (NB_ERR_SHAPE). */
nb_tensor *nb_tril(nb_tensor *t, int64_t diagonal);
nb_tensor *nb_triu(nb_tensor *t, int64_t diagonal);

/* torch.diag_embed: t's last dim (length L) placed on the offset diagonal
 * of new dims dim1, dim2 (of size L + |offset|, wrapped against ndim + 1),
 * zeros elsewhere. Defaults: 0, -2, -1. Gradient: g's diagonal. */
nb_tensor *nb_diag_embed(nb_tensor *t, int64_t offset, int dim1, int dim2);

/* torch.meshgrid's indexing: NB_MESHGRID_IJ 'ij' (matrix indexing, the
 * default), NB_MESHGRID_XY 'xy' (Cartesian: the first two output dims swapped). */
typedef enum nb_meshgrid_indexing { NB_MESHGRID_IJ, NB_MESHGRID_XY } nb_meshgrid_indexing;

/* torch.meshgrid: n 0-d or 1-D tensors (one dtype) -> n expanded views of
 * shape [N0, N1, ...] ("ij"), or with the first two dims swapped ("xy",
 * Cartesian). Writes out[0..n) (owned like op results). Errors: n outside
 * [1, NB_MAX_DIMS], an input of 2+ dims, dtypes differ. */
nb_status nb_meshgrid(nb_tensor *const *ts, int n, nb_meshgrid_indexing indexing, nb_tensor **out);

/* ---- indexing and joining (ops_index.c; backend/cpu/index.c) ----------------- */

/* Marks "no padding_idx" for nb_embedding. */
#define NB_NO_PADDING_IDX INT64_MIN

/* F.embedding: rows of weight [V, D] picked by int64 (or int32) indices of any shape
 * -> [*indices.shape, D]. The gradient of weight accumulates the rows of g
 * per index in a fixed order (deterministic, no atomics); the padding_idx
 * row (negative counts from V) gets no gradient. weight float32/float64,
 * or float16/bfloat16 (the lookup only: the 16-bit gradient sum is not
 * offered). Errors: an index outside
 * [0, V) -> NB_ERR_INVALID_ARG naming it. */
nb_tensor *nb_embedding(nb_tensor *indices, nb_tensor *weight, int64_t padding_idx);

/* torch.index_select: t's slices along dim picked by a 1-D (or 0-d) int64
 * or int32 index. */
nb_tensor *nb_index_select(nb_tensor *t, int dim, nb_tensor *index);

/* torch.cat of n tensors (same shape but along dim) along dim; mixed dtypes
 * promote to their common dtype (nb_promote_types), as torch.cat. PyTorch's
 * legacy exception for 1-D empty tensors of another shape is not kept. */
nb_tensor *nb_cat(nb_tensor *const *ts, int n, int dim);

/* torch.stack: n tensors of one shape joined along a new dim. */
nb_tensor *nb_stack(nb_tensor *const *ts, int n, int dim);

/* torch.split / torch.chunk: views along dim (the last piece may be
 * smaller). Writes up to cap pieces to out (owned like op results) and
 * returns the number of pieces, or -1 on error. */
int nb_split(nb_tensor *t, int64_t split_size, int dim, nb_tensor **out, int cap);
int nb_chunk(nb_tensor *t, int chunks, int dim, nb_tensor **out, int cap);
/* torch.split with a list of sizes: n views of sizes[i] along dim (sizes
 * >= 0, summing to the dim's size; NB_ERR_INVALID_ARG otherwise). Writes up
 * to cap pieces; returns n, or -1 on error. */
int nb_split_with_sizes(nb_tensor *t, const int64_t *sizes, int n, int dim, nb_tensor **out, int cap);
/* torch.unbind: the size(dim) views t.select(dim, i). Writes up to cap;
 * returns size(dim), or -1 on error. */
int nb_unbind(nb_tensor *t, int dim, nb_tensor **out, int cap);

/* torch.where(cond, a, b): cond bool; the three broadcast together; a and
 * b promote to torch.result_type(a, b); gradients flow to a and b (each in
 * its own dtype). */
nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b);

/* Tensor.masked_fill: value where mask (bool, broadcastable to t) is true. */
nb_tensor *nb_masked_fill(nb_tensor *t, nb_tensor *mask, double value);

/* torch.index_add: input + alpha * (source's slices added along dim at the
 * 1-D int64 index, repeats summed in index order: deterministic). source
 * has input's shape but numel(index) at dim. float32, float64, int32,
 * int64, uint8 (integers wrap, as PyTorch); input and source of one dtype.
 * Gradients: input g, source alpha * g.index_select.
 * Errors: NB_ERR_INVALID_ARG (an index outside [0, size), a bad dim or
 * index), NB_ERR_SHAPE (source does not fit), NB_ERR_DTYPE. */
nb_tensor *nb_index_add(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source, double alpha);

/* torch.index_copy: input with its slices at index along dim replaced by
 * source's (any dtype; the last of repeated indices wins, where PyTorch
 * leaves it unspecified). Gradients: input g with those slices zeroed,
 * source g.index_select. Errors as nb_index_add. */
nb_tensor *nb_index_copy(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source);

/* F.one_hot: int64 class indices t -> int64 [*t.shape, num_classes];
 * num_classes -1 means max(t) + 1 (read from the data). Not
 * differentiable. Errors: NB_ERR_DTYPE (not int64), NB_ERR_INVALID_ARG (a
 * class outside [0, num_classes), num_classes < -1, -1 with an empty t). */
nb_tensor *nb_one_hot(nb_tensor *t, int64_t num_classes);

/* torch.nonzero: int64 [n, nb_dim(t)] coordinates of the nonzero elements
 * in C order. The count is read to the host (PyTorch's CPU nonzero
 * synchronises the same way). Not differentiable. */
nb_tensor *nb_nonzero(nb_tensor *t);

/* torch.masked_select: the 1-D tensor of t's elements where mask (bool) is
 * true, t and mask broadcast together (C order). Gradient: g scattered
 * into zeros of t's shape (summed over broadcast dims). Errors:
 * NB_ERR_DTYPE (mask not bool), NB_ERR_SHAPE (no broadcast). */
nb_tensor *nb_masked_select(nb_tensor *t, nb_tensor *mask);

/* ---- gather and scatter (ops_gather.c; backend/cpu/gather.c) ----------------- */

/* Gather/scatter along dim (PyTorch's torch.gather / Tensor.scatter /
 * scatter_add / scatter_reduce docs). index is int64 (or int32, as
 * PyTorch 2.x takes it, copied to int64 first) with the input's
 * number of dims (>= 1) and index.size(d) <= input.size(d) for d != dim;
 * for scatters also index.size(d) <= src.size(d) for every d (only src's
 * leading index-shaped block is used). Any strides. An index outside
 * [0, input.size(dim)) fails with NB_ERR_INVALID_ARG naming the op, the
 * index and the dim size, before anything is written. Other errors:
 * NB_ERR_DTYPE (index not int64 or int32, input/src dtypes differ, a reduction on
 * bool), NB_ERR_SHAPE (index does not fit), NB_ERR_INVALID_ARG (bad dim or
 * reduce). Scatters return a new tensor (out-of-place, like
 * torch.scatter); duplicates in index are deterministic: plain scatter
 * keeps the last source in index order, reductions combine in index order.
 * Dtypes: gather/scatter all six; scatter_add/scatter_reduce f32, f64,
 * i32, i64, u8 (integer mean rounds down); gradients for f32/f64. */

/* out[i][j][k] = t[index[i][j][k]][j][k] for dim 0 (likewise for other
 * dims); out has index's shape. Gradient: zeros(t).scatter_add(dim, index, g). */
nb_tensor *nb_gather(nb_tensor *t, int dim, nb_tensor *index);

/* t with out[index[i][j][k]][j][k] = src[i][j][k] (dim 0). Gradients:
 * t: g with the scattered positions zeroed; src: gather(g, dim, index). */
nb_tensor *nb_scatter(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src);

/* Tensor.scatter(dim, index, value): the scalar value written at index. */
nb_tensor *nb_scatter_value(nb_tensor *t, int dim, nb_tensor *index, double value);

/* t with src added at index (duplicates summed in index order).
 * Gradients: t: g; src: gather(g, dim, index). */
nb_tensor *nb_scatter_add(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src);

/* Tensor.scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin";
 * include_self false leaves t's values out of the destinations that get
 * sources (others keep t's value). mean divides by the number of values
 * reduced. amax/amin propagate NaN. Gradients as PyTorch's
 * scatter_reduce_backward: sum as scatter_add; mean divides g by that
 * count; amax/amin share g evenly among the values equal to the result;
 * prod is g * result / value, with zeros handled exactly (a single zero
 * gets the product of the others). */
nb_tensor *nb_scatter_reduce(nb_tensor *t, int dim, nb_tensor *index, nb_tensor *src, const char *reduce,
                             bool include_self);

/* torch.take_along_dim's dim=None. */
#define NB_DIM_NONE INT32_MIN

/* torch.take_along_dim: t and indices (int64 or int32, same number of dims)
 * broadcast in every dim but dim, then gather along dim; with dim
 * NB_DIM_NONE, gathers from the flattened t at the flattened indices. */
nb_tensor *nb_take_along_dim(nb_tensor *t, nb_tensor *indices, int dim);

/* ---- matrix products (ops_matmul.c; backend/cpu/matmul.c) -------------------- */

/* torch.matmul: 1-D x 1-D dot; 2-D x 2-D [n,k]x[k,m]; batched [..., n, k] x
 * [..., k, m] with the batch dims broadcast; a 1-D operand gets a dim of 1
 * prepended (left) or appended (right), removed from the result. f32/f64,
 * and bfloat16/float16 (float32 accumulation: cuBLASLt on CUDA, float32
 * copies on the CPU), through the backend's GEMM (OpenBLAS sgemm/dgemm on
 * the CPU). */
nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b);

/* x [..., in] @ weight[out, in]^T + bias[out] (bias may be NULL): F.linear. */
nb_tensor *nb_linear(nb_tensor *x, nb_tensor *weight, nb_tensor *bias);
/* F.bilinear: y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] +
 * bias[o]; x1 [*, I1] and x2 [*, I2] with the same leading dims, weight
 * [O, I1, I2], bias [O] or NULL. One GEMM (x1 against weight as [I1, O I2])
 * and a product summed over j; float32/float64 (float32 under autocast).
 * Errors: NB_ERR_SHAPE naming the shapes, NB_ERR_DTYPE. */
nb_tensor *nb_bilinear(nb_tensor *x1, nb_tensor *x2, nb_tensor *weight, nb_tensor *bias);

/* ---- einsum and contractions (ops_einsum.c) --------------------------------
 * Written from views, sums and bmm (so on every backend, float32/float64,
 * bmm autocast as its own), gradients first and second order from those. */

/* torch.einsum(equation, *operands) (1 to 16 operands): subscripts are
 * letters (case matters), one "..." per term for broadcast dims
 * (right-aligned), spaces ignored; "->" gives the output, else the labels
 * seen once, in PyTorch's order (A-Z then a-z) after the ellipsis dims. A
 * repeated label within a term takes the diagonal; labels the output lacks
 * are summed; label sizes must agree or be 1 (broadcast). Contraction
 * order: opt_einsum's greedy path (the pair with the smallest result
 * first), each pair one batched GEMM. Errors: NB_ERR_INVALID_ARG (a bad
 * equation, an operand count or rank that does not fit it), NB_ERR_SHAPE
 * (sizes that disagree), NB_ERR_DTYPE. */
nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n);
/* torch.tensordot: the n dims dims_a of a contracted with dims_b of b
 * (both NULL: PyTorch's integer form, a's last n with b's first n); the
 * result's dims are a's others then b's others. */
nb_tensor *nb_tensordot(nb_tensor *a, nb_tensor *b, int n, const int *dims_a, const int *dims_b);
/* torch.outer: 1-d a [n], b [m] -> [n, m]. torch.kron: the Kronecker
 * product (shapes left-padded with 1s; result dims a_i b_i). torch.trace:
 * the sum of a 2-d input's diagonal. torch.linalg.cross: the cross product
 * along dim (size 3) of two tensors that broadcast. */
nb_tensor *nb_outer(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_kron(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_trace(nb_tensor *a);
nb_tensor *nb_cross(nb_tensor *a, nb_tensor *b, int dim);

/* torch.addmm / addmv / baddbmm / addbmm: beta * input + alpha * (the
 * product), input broadcast to the product's shape (PyTorch's defaults:
 * beta 1, alpha 1; with beta 0 input is ignored, NaN and inf included):
 *   addmm    mat1 [n, k] @ mat2 [k, m]                  -> [n, m]
 *   addmv    mat [n, k] @ vec [k]                       -> [n]
 *   baddbmm  batch1 [B, n, k] @ batch2 [B, k, m]        -> [B, n, m]
 *   addbmm   sum over B of batch1[b] @ batch2[b]        -> [n, m]
 * float32/float64 (and bfloat16/float16 as matmul); under autocast all
 * three inputs go to the region's dtype (PyTorch's lower-precision list).
 * Composite: matmul, a sum, scaled adds. Errors: NB_ERR_SHAPE naming the
 * shapes, NB_ERR_DTYPE. */
nb_tensor *nb_addmm(nb_tensor *input, nb_tensor *mat1, nb_tensor *mat2, double beta, double alpha);
nb_tensor *nb_addmv(nb_tensor *input, nb_tensor *mat, nb_tensor *vec, double beta, double alpha);
nb_tensor *nb_baddbmm(nb_tensor *input, nb_tensor *batch1, nb_tensor *batch2, double beta, double alpha);
nb_tensor *nb_addbmm(nb_tensor *input, nb_tensor *batch1, nb_tensor *batch2, double beta, double alpha);

/* F.grouped_mm (PyTorch 2.8+; Mixture-of-Experts layers): a matrix
 * product per group, the groups delimited by offs (int32 or int64 [G],
 * non-decreasing ends of the groups along the jagged dim, read to the
 * host) where an operand is 2-d:
 *   [G, M, K] x [G, K, N] -> [G, M, N]     offs NULL (a batched matmul)
 *   [M, K] x [G, K, N]    -> [M, N]        rows of group g times mat_b[g]
 *   [M, K] x [K, N]       -> [G, M, N]     group g over its range of K
 *   [G, M, K] x [K, N]    -> [M, N]        columns of group g from mat_a[g]
 * Rows (columns) past offs' last end are zeros. One float dtype (PyTorch
 * takes bfloat16 on CUDA; nabla every matmul dtype, autocast as matmul's);
 * no bias (PyTorch rejects it too). Composite: a matmul per group, then a
 * cat. Errors: NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_INVALID_ARG (bad offs). */
nb_tensor *nb_grouped_mm(nb_tensor *mat_a, nb_tensor *mat_b, nb_tensor *offs);

/* torch.bmm: [B, n, k] x [B, k, m] -> [B, n, m] (no broadcasting). */
nb_tensor *nb_bmm(nb_tensor *a, nb_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
