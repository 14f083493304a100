/* nb_quantize.h - quantization (PyTorch's torch.fake_quantize_* ops and
 * torch.ao.quantization's learnable fake quantization): fake quantization
 * per tensor and per channel, with PyTorch's straight-through gradients,
 * and the learnable variants whose scale and zero point are trained (LSQ,
 * Esser et al. 2020, "Learned Step Size Quantization"; LSQ+, Bhalgat et
 * al. 2020); quantize/dequantize to integer tensors; int8 weight-only
 * linear layers; BitNet b1.58's quantizers and packed ternary inference.
 * Implemented in autograd/ops_quantize.c over the
 * fake_quantize and fake_quantize_backward slots (backend/cpu/quantize.c,
 * backend/cuda/quantize.cu); the element formulas are the backends' shared
 * ones (backend/nb_scalar_math_float.t.h), after PyTorch's
 * aten/src/ATen/native/quantized kernels.
 *
 * Fake quantization's common rules. x is float32 or float64 (float16 and bfloat16 are computed
 * in float32 and rounded once), any shape and strides; the output has x's
 * shape and dtype. scale is used as float32 and inv_scale = 1.0f / scale
 * (as PyTorch, in float). The level of an element is
 *   q = zero_point + nearbyint(x * inv_scale)   (an integer zero point)
 *   q = nearbyint(zero_point + x * inv_scale)   (a float zero point)
 * rounding ties to even, and the output is
 *   (clamp(q, quant_min, quant_max) - zero_point) * scale.
 * NaN gives (quant_min - zero_point) * scale, as PyTorch's kernels. The
 * gradient of x is the straight-through estimator masked to the range:
 * gx = g where quant_min <= q <= quant_max, else 0 (g * 0: an infinite g
 * gives NaN there, as PyTorch's dY * mask). No host reads: the ops record
 * into CUDA graphs. Errors: NB_ERR_INVALID_ARG (quant_min > quant_max, a
 * zero point outside the range, a bad axis), NB_ERR_SHAPE (scale or
 * zero_point of the wrong size), NB_ERR_DTYPE, NB_ERR_DEVICE (qparams on
 * another device). Double backward is not supported. */
#ifndef NB_QUANTIZE_H
#define NB_QUANTIZE_H
#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min,
 * quant_max): one scale and integer zero point for the whole tensor, e.g.
 * quant_min 0, quant_max 255 for quint8 or -128, 127 for qint8. Needs
 * quant_min <= zero_point <= quant_max (NB_ERR_INVALID_ARG). */
nb_tensor *nb_fake_quantize_per_tensor_affine(nb_tensor *x, double scale, int64_t zero_point, int64_t quant_min,
                                              int64_t quant_max);

/* torch.fake_quantize_per_channel_affine(x, scale, zero_point, axis,
 * quant_min, quant_max): scale and zero_point are 1-D of x.size(axis)
 * (0 <= axis < x.ndim, as PyTorch: no negative axis) on x's device; scale
 * float (used as float32); zero_point int32 or int64 (an integer zero
 * point) or float (a float zero point, PyTorch's Float/Half zero points).
 * Integer zero points outside [quant_min, quant_max] are not rejected (it
 * would take a host read; PyTorch raises): the formula applies as written.
 * No gradient reaches scale or zero_point (PyTorch has none either). */
nb_tensor *nb_fake_quantize_per_channel_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point, int axis,
                                               int64_t quant_min, int64_t quant_max);

/* torch._fake_quantize_learnable_per_tensor_affine(x, scale, zero_point,
 * quant_min, quant_max, grad_factor) (what torch.ao.quantization's
 * _LearnableFakeQuantize calls): scale and zero_point are float tensors of
 * one element on x's device, both differentiable. The forward uses
 * zero_point rounded to the nearest integer (ties to even) and clamped to
 * the range. Gradients, summed over the elements and multiplied by
 * grad_factor (1.0 is PyTorch's default; LSQ uses 1/sqrt(numel *
 * quant_max)):
 *   in range:  gscale = g * (xfq - x) / scale,  gzero_point = 0
 *   below:     gscale = g * (quant_min - z),     gzero_point = -g * scale
 *   above:     gscale = g * (quant_max - z),     gzero_point = -g * scale
 * with z the zero point that PyTorch's backward uses, trunc(clamp(
 * zero_point + 0.5, quant_min, quant_max)) (so -1 becomes 0 there while
 * the forward uses -1: PyTorch's rounding, kept), q the level of the
 * float-zero-point formula with that z, and xfq = (clamp(q) - z) * scale
 * (the output but where the two roundings of z differ). The backward
 * needs quant_min <= 0 <= quant_max (NB_ERR_INVALID_ARG from nb_backward,
 * as PyTorch). */
nb_tensor *nb_fake_quantize_learnable_per_tensor_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point,
                                                        int64_t quant_min, int64_t quant_max, double grad_factor);

/* torch._fake_quantize_learnable_per_channel_affine(x, scale, zero_point,
 * axis, quant_min, quant_max, grad_factor): as the per-tensor variant with
 * scale and zero_point float 1-D of x.size(axis) (0 <= axis < x.ndim); the
 * zero point is rounded (ties to even) and clamped in the forward and the
 * backward alike, and the gradients are summed over every dim but axis. */
nb_tensor *nb_fake_quantize_learnable_per_channel_affine(nb_tensor *x, nb_tensor *scale, nb_tensor *zero_point,
                                                         int axis, int64_t quant_min, int64_t quant_max,
                                                         double grad_factor);

/* ---- quantize and dequantize: integer tensors ----------------------------
 * torch.quantize_per_tensor / quantize_per_channel followed by
 * .int_repr(), and Tensor.dequantize(): nabla has no quantized tensor
 * type, so a quantized tensor is its integer values (dtype uint8 for
 * torch.quint8, int8 for qint8, int32 for qint32, and int16) kept beside
 * its scale and zero point. The levels are the fake-quantize formula's
 * (nearbyint(x * (1.0f / scale)), ties to even, plus an integer zero point;
 * a float zero point per channel rounds nearbyint(z + x / s)), clamped to
 * the dtype's range: [0, 255], [-128, 127], [-32768, 32767], [-2^31,
 * 2^31 - 1]; NaN gives the range's minimum. x is float32 or float64
 * (float16/bfloat16 are read as float32); not differentiable (the output
 * holds integers). No host reads. Errors: NB_ERR_DTYPE (x not float, dtype
 * not one of the four), NB_ERR_INVALID_ARG (scale not positive and finite
 * in float32, a zero point outside the dtype's range, a bad axis),
 * NB_ERR_SHAPE, NB_ERR_DEVICE. */

/* torch.quantize_per_tensor(x, scale, zero_point, dtype).int_repr(): the
 * levels clamp(zero_point + nearbyint(x * (1.0f / scale)), dtype's range)
 * as a dtype tensor of x's shape. The zero point is held as float32 (exact
 * up to 2^24 in magnitude) and the sum is formed in double; PyTorch rounds
 * zero_point + nearbyint(x * inv) to float32, which differs for int32
 * levels beyond 2^24. Like the fake-quantize ops, +inf clamps to
 * the maximum (PyTorch 1.13 gives the minimum there). */
nb_tensor *nb_quantize_per_tensor(nb_tensor *x, double scale, int64_t zero_point, nb_dtype dtype);

/* torch.quantize_per_channel(x, scales, zero_points, axis, dtype).int_repr():
 * scales (float, used as float32) and zero_points (int32/int64, or float
 * for PyTorch's float zero points) 1-D of x.size(axis), on x's device,
 * 0 <= axis < x.ndim. Zero points are not range-checked (a host read). */
nb_tensor *nb_quantize_per_channel(nb_tensor *x, nb_tensor *scales, nb_tensor *zero_points, int axis, nb_dtype dtype);

/* Tensor.dequantize() of a per-tensor quantized q (uint8, int8, int16 or
 * int32): float32 (q - zero_point) * scale, with scale rounded to float32
 * and one rounding (q - zero_point is exact but for int32 values beyond
 * 2^24, which float32 rounds, as PyTorch's static_cast<float>). scale and
 * zero_point are checked as nb_quantize_per_tensor's. */
nb_tensor *nb_dequantize_per_tensor(nb_tensor *q, double scale, int64_t zero_point);

/* Tensor.dequantize() per channel: float32 (q - zero_points[c]) *
 * scales[c] along axis, scales and zero_points as nb_quantize_per_channel's. */
nb_tensor *nb_dequantize_per_channel(nb_tensor *q, nb_tensor *scales, nb_tensor *zero_points, int axis);

/* ---- int8 weight-only (torchao's int8_weight_only) -------------------------
 * A Linear's weight kept as int8 with a float32 scale per output channel,
 * activations in float: half a bfloat16 weight's memory and, for the few
 * rows of decoding, about half its reading time. */

/* Quantizes w [N, K] (float; 16-bit read as float32) per output channel,
 * symmetric, as torchao's int8_weight_only: scales[n] = max(max_k |w[n,
 * k]|, ...) / 127.5 (at least 2^-23, float32's eps), float32 [N], and
 * qweight = nb_quantize_per_channel(w, scales, 0, axis 0, NB_I8), int8
 * [N, K] (the weights are qweight * scales[:, None]). Both on w's device,
 * owned by the caller's scope; save them as they are (nb_safetensors).
 * Errors: NB_ERR_SHAPE (w not 2-D), NB_ERR_DTYPE, NB_ERR_INVALID_ARG (a
 * NULL output). */
nb_status nb_int8_weight_quantize(nb_tensor *w, nb_tensor **qweight, nb_tensor **scales);

/* y = x (qweight * scales[:, None])^T + bias for x [..., K] (float32,
 * float64, bfloat16, float16), qweight int8 [N, K], scales float [N] (used
 * as float32), bias [N] or NULL: [..., N] in x's dtype. Up to 16 rows (x's
 * numel / K) without a gradient run the linear_int8 kernel, which reads
 * the int8 weight as it is (sums in float32, float64 for float64, rounded
 * once); more rows, or an x or bias that requires grad, run linear on
 * qweight cast to x's dtype (exact) and multiply the result by the scales
 * in float32 (float64 for float64 x), so x and bias get gradients
 * (qweight and scales get none); float16 x, whose unscaled sums could
 * overflow, runs linear on the weight dequantized in float32 and rounded
 * once. The two paths differ by roundings. Under autocast, x is first
 * cast as a Linear's input (to the region's 16-bit dtype) and y has that
 * dtype. Errors: NB_ERR_SHAPE,
 * NB_ERR_DTYPE (qweight not int8, scales or bias not float),
 * NB_ERR_DEVICE. */
nb_tensor *nb_linear_int8(nb_tensor *x, nb_tensor *qweight, nb_tensor *scales, nb_tensor *bias);

/* ---- BitNet b1.58 (Ma et al. 2024, "The Era of 1-bit LLMs"; its
 * "Training Tips, Code and FAQ") -------------------------------------------
 * The fake quantizers of BitLinear (nb_nn_bitlinear), as the reference
 * training code writes them. Both take float32/float64 (float16/bfloat16
 * computed in float32 and rounded once) and return x's shape and dtype;
 * their gradient is the straight-through estimator, g unchanged (the
 * reference's x + (q - x).detach()), while the forward value is q exactly.
 * Composites of abs, mean/amax, round, clamp and division. Errors:
 * NB_ERR_DTYPE; NB_ERR_SHAPE for a 0-d x in the activation quantizer. */

/* Ternary weights by absmean: s = 1 / max(mean(|w|), 1e-5) over all of w,
 * q = clamp(round(w * s), -1, 1) / s: each weight is -1/s, 0 or +1/s. */
nb_tensor *nb_bitnet_weight_quant(nb_tensor *w);

/* 8-bit activations by per-token absmax: for each row of the last dim,
 * s = 127 / max(max(|x|), 1e-5), q = clamp(round(x * s), -128, 127) / s. */
nb_tensor *nb_bitnet_activation_quant(nb_tensor *x);

/* ---- BitNet b1.58 inference: packed ternary weights ----------------------------
 * A BitLinear's weight packed 2 bits per value, and the product that reads
 * it with int8 activations (integer dot products, one rescale): 16x less
 * weight memory than float32, 8x less than bfloat16. Kernels: the CPU's
 * (AVX-512 VNNI's vpdpbusd from 4 rows where the CPU has it, AVX2's
 * maddubs, a portable loop elsewhere) and CUDA's (dp4a, a warp per output
 * column), with the same bits. Not differentiable: inference only. */

/* Packs w [N, K] (float; 16-bit computed in float32) for nb_bitnet_linear:
 * the ternary codes of nb_bitnet_weight_quant (q = clamp(round(w s), -1,
 * 1), s = 1 / max(mean |w|, 1e-5)) into *packed, uint8 [N, Kp / 4] with Kp
 * = K rounded up to a multiple of 128: each group of 128 weights of a row
 * in 32 bytes, byte j holding q + 1 of the group's weights j, j + 32, j +
 * 64, j + 96 in bits 0-1, 2-3, 4-5, 6-7 (padding: q = 0); and s as float32
 * [1] into *w_scale (the weights are q / s). Both on w's device, owned by
 * the caller's scope. The layout is the packed checkpoint's: save the two
 * tensors (nb_safetensors) as they are. Errors: NB_ERR_SHAPE (w not 2-D),
 * NB_ERR_DTYPE, NB_ERR_INVALID_ARG (a NULL output). */
nb_status nb_bitnet_pack(nb_tensor *w, nb_tensor **packed, nb_tensor **w_scale);

/* BitLinear's product on packed weights: for x [..., K] (after the
 * BitLinear's RMSNorm; float32/float64, 16-bit computed in float32) and
 * nb_bitnet_pack's packed [N, roundup(K, 128) / 4] and w_scale, per row
 * s_x = 127 / max(max|x|, 1e-5), qx = clamp(rint(x s_x), -128, 127)
 * (nb_bitnet_activation_quant's int8 levels), acc = sum_k qx q_w exactly
 * in int32, y = acc / s_x / s_w (+ bias [N]) [..., N] in x's dtype. Equal
 * to linear(activation_quant(x), weight_quant(w), bias) up to the float
 * rounding of that GEMM (the integer sum here is exact) and, for float64,
 * of s_w (kept in float32). Inference only: with grad mode on and an x
 * that requires grad it fails (NB_ERR_UNSUPPORTED) rather than cut the
 * graph, and no gradient reaches bias. Errors: NB_ERR_SHAPE, NB_ERR_DTYPE,
 * NB_ERR_DEVICE, NB_ERR_UNSUPPORTED; on CUDA, NB_ERR_INVALID_ARG for a
 * packed tensor not 4-byte aligned (a view at an odd offset). */
nb_tensor *nb_bitnet_linear(nb_tensor *x, nb_tensor *packed, nb_tensor *w_scale, nb_tensor *bias);

#ifdef __cplusplus
}
#endif
#endif
