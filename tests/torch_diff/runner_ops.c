/* runner_ops.c - the differential runner's handlers for the elementwise,
 * reduction, scan, sort, view, shape and indexing ops (one per op-table
 * row; the nn and linalg ones are in runner_ops_nn.c). Argument names
 * follow PyTorch's keywords (dim, keepdim, correction, ...). */
#include <math.h>
#include <string.h>

#include "runner.h"

#define I0 c->in[0]
#define I1 c->in[1]
#define I2 c->in[2]

/* ---- unary -------------------------------------------------------------------------------------- */

#define UNARY(name) \
    nb_status h_##name(dcase *c) { OUT1(nb_##name(I0)); }
/* the one-argument ops of NB_UNARY_OPS (nb_backend.h) marked GEN, then the others */
#define UNARY_GEN(name) UNARY(name)
#define UNARY_HAND(name)
#define UNARY_ROW(id, name, saved, api) UNARY_##api(name)
NB_UNARY_OPS(UNARY_ROW)
UNARY(relu6) UNARY(isnan) UNARY(isinf) UNARY(isfinite) UNARY(logical_not) UNARY(bitwise_not) UNARY(contiguous)
UNARY(clone) UNARY(sinc)
nb_status h_silu_mul(dcase *c) { OUT1(nb_silu_mul(I0, I1)); }
nb_status h_logit(dcase *c) { OUT1(nb_logit(I0, ad(c, "eps", -1))); }

nb_status h_add_scalar(dcase *c) { OUT1(nb_add_scalar(I0, ad(c, "other", 0))); }
nb_status h_mul_scalar(dcase *c) { OUT1(nb_mul_scalar(I0, ad(c, "other", 1))); }
nb_status h_pow_scalar(dcase *c) { OUT1(nb_pow_scalar(I0, ad(c, "exponent", 2))); }
nb_status h_round_decimals(dcase *c) { OUT1(nb_round_decimals(I0, ai(c, "decimals", 0))); }
nb_status h_leaky_relu(dcase *c) { OUT1(nb_leaky_relu(I0, ad(c, "negative_slope", 0.01))); }
nb_status h_elu(dcase *c) { OUT1(nb_elu(I0, ad(c, "alpha", 1))); }
nb_status h_softplus(dcase *c) { OUT1(nb_softplus(I0, ad(c, "beta", 1), ad(c, "threshold", 20))); }
nb_status h_hardtanh(dcase *c) { OUT1(nb_hardtanh(I0, ad(c, "min_val", -1), ad(c, "max_val", 1))); }
nb_status h_gelu(dcase *c) {
    OUT1(nb_gelu(I0, strcmp(as(c, "approximate", "none"), "tanh") ? NB_GELU_ERF : NB_GELU_TANH));
}
nb_status h_to_dtype(dcase *c) { OUT1(nb_to_dtype(I0, dtype_named(as(c, "dtype", "float32")))); }

/* ---- binary ------------------------------------------------------------------------------------- */

#define BINARY(name) \
    nb_status h_##name(dcase *c) { OUT1(nb_##name(I0, I1)); }
BINARY(add) BINARY(sub) BINARY(mul) BINARY(div) BINARY(pow) BINARY(floor_divide) BINARY(remainder) BINARY(fmod)
BINARY(atan2) BINARY(maximum) BINARY(minimum) BINARY(eq) BINARY(ne) BINARY(gt) BINARY(ge) BINARY(lt) BINARY(le)
BINARY(logical_and) BINARY(logical_or) BINARY(logical_xor) BINARY(bitwise_and) BINARY(bitwise_or)
BINARY(bitwise_xor) BINARY(bitwise_left_shift) BINARY(bitwise_right_shift) BINARY(matmul) BINARY(bmm)
BINARY(xlogy) BINARY(hypot)

#define SCALAR_D(name, key) \
    nb_status h_##name(dcase *c) { OUT1(nb_##name(I0, ad(c, key, 0))); }
SCALAR_D(remainder_scalar, "other") SCALAR_D(fmod_scalar, "other") SCALAR_D(eq_scalar, "other")
SCALAR_D(ne_scalar, "other") SCALAR_D(gt_scalar, "other") SCALAR_D(ge_scalar, "other") SCALAR_D(lt_scalar, "other")
SCALAR_D(le_scalar, "other")
#define SCALAR_I(name) \
    nb_status h_##name(dcase *c) { OUT1(nb_##name(I0, ai(c, "other", 0))); }
SCALAR_I(bitwise_and_scalar) SCALAR_I(bitwise_or_scalar) SCALAR_I(bitwise_xor_scalar)
SCALAR_I(bitwise_left_shift_scalar) SCALAR_I(bitwise_right_shift_scalar)

nb_status h_div_mode(dcase *c) {
    const char *m = as(c, "rounding_mode", "none");
    nb_rounding_mode r = !strcmp(m, "trunc") ? NB_ROUNDING_TRUNC : !strcmp(m, "floor") ? NB_ROUNDING_FLOOR
                                                                                        : NB_ROUNDING_NONE;
    OUT1(nb_div_mode(I0, I1, r));
}
nb_status h_lerp(dcase *c) { OUT1(nb_lerp(I0, I1, I2)); }
nb_status h_lerp_scalar(dcase *c) { OUT1(nb_lerp_scalar(I0, I1, ad(c, "weight", 0.5))); }
/* min/max: the inputs present (the case passes null for an absent bound) */
nb_status h_clamp(dcase *c) { OUT1(nb_clamp(I0, I1, I2)); }
nb_status h_clamp_scalar(dcase *c) { OUT1(nb_clamp_scalar(I0, ad(c, "min", NAN), ad(c, "max", NAN))); }
nb_status h_where(dcase *c) { OUT1(nb_where(I0, I1, I2)); }
nb_status h_masked_fill(dcase *c) { OUT1(nb_masked_fill(I0, I1, ad(c, "value", 0))); }

/* ---- reductions ----------------------------------------------------------------------------------- */

/* dims: the "dim" list, absent = all (NULL, 0) */
#define DIMS int dims_[NB_MAX_DIMS]; int nd_ = ali(c, "dim", dims_, NB_MAX_DIMS); if (nd_ < 0) nd_ = 0
#define REDUCE(name) \
    nb_status h_##name(dcase *c) { DIMS; OUT1(nb_##name(I0, nd_ ? dims_ : NULL, nd_, ab(c, "keepdim", false))); }
REDUCE(sum) REDUCE(mean) REDUCE(max) REDUCE(min) REDUCE(amax) REDUCE(amin) REDUCE(prod) REDUCE(logsumexp)
REDUCE(all) REDUCE(any)

nb_status h_var(dcase *c) { DIMS; OUT1(nb_var(I0, nd_ ? dims_ : NULL, nd_, ad(c, "correction", 1), ab(c, "keepdim", false))); }
nb_status h_std(dcase *c) { DIMS; OUT1(nb_std(I0, nd_ ? dims_ : NULL, nd_, ad(c, "correction", 1), ab(c, "keepdim", false))); }
nb_status h_norm(dcase *c) { DIMS; OUT1(nb_norm(I0, ad(c, "ord", 2), nd_ ? dims_ : NULL, nd_, ab(c, "keepdim", false))); }
nb_status h_max_dim(dcase *c) {
    c->out[0] = nb_max_dim(I0, (int)ai(c, "dim", 0), ab(c, "keepdim", false), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_min_dim(dcase *c) {
    c->out[0] = nb_min_dim(I0, (int)ai(c, "dim", 0), ab(c, "keepdim", false), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_argmax(dcase *c) { OUT1(nb_argmax(I0, (int)ai(c, "dim", 0), ab(c, "keepdim", false))); }
nb_status h_argmin(dcase *c) { OUT1(nb_argmin(I0, (int)ai(c, "dim", 0), ab(c, "keepdim", false))); }

/* ---- scans and sorting ------------------------------------------------------------------------------ */

nb_status h_cumsum(dcase *c) { OUT1(nb_cumsum(I0, (int)ai(c, "dim", 0))); }
nb_status h_cumprod(dcase *c) { OUT1(nb_cumprod(I0, (int)ai(c, "dim", 0))); }
nb_status h_logcumsumexp(dcase *c) { OUT1(nb_logcumsumexp(I0, (int)ai(c, "dim", 0))); }
nb_status h_cummax(dcase *c) {
    c->out[0] = nb_cummax(I0, (int)ai(c, "dim", 0), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_cummin(dcase *c) {
    c->out[0] = nb_cummin(I0, (int)ai(c, "dim", 0), &c->out[1]);
    OUTS(2, c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_sort(dcase *c) {
    OUTS(2, nb_sort(I0, (int)ai(c, "dim", -1), ab(c, "descending", false), ab(c, "stable", true), &c->out[0],
                    &c->out[1]));
}
nb_status h_searchsorted(dcase *c) {
    OUT1(nb_searchsorted(I0, I1, ab(c, "out_int32", false), ab(c, "right", false), c->n_in > 2 ? I2 : NULL));
}
nb_status h_bucketize(dcase *c) { OUT1(nb_bucketize(I0, I1, ab(c, "out_int32", false), ab(c, "right", false))); }
nb_status h_histc(dcase *c) { OUT1(nb_histc(I0, ai(c, "bins", 100), ad(c, "min", 0), ad(c, "max", 0))); }
nb_status h_argsort(dcase *c) { OUT1(nb_argsort(I0, (int)ai(c, "dim", -1), ab(c, "descending", false))); }
nb_status h_topk(dcase *c) {
    OUTS(2, nb_topk(I0, ai(c, "k", 1), (int)ai(c, "dim", -1), ab(c, "largest", true), ab(c, "sorted", true),
                    &c->out[0], &c->out[1]));
}
nb_status h_kthvalue(dcase *c) {
    OUTS(2, nb_kthvalue(I0, ai(c, "k", 1), (int)ai(c, "dim", -1), ab(c, "keepdim", false), &c->out[0], &c->out[1]));
}

/* ---- views and shape ops ----------------------------------------------------------------------------- */

#define SHAPE_ARG int64_t shape_[NB_MAX_DIMS + 1]; int ns_ = al(c, "shape", shape_, NB_MAX_DIMS + 1); if (ns_ < 0) ns_ = 0
nb_status h_reshape(dcase *c) { SHAPE_ARG; OUT1(nb_reshape(I0, ns_, shape_)); }
nb_status h_view(dcase *c) { SHAPE_ARG; OUT1(nb_view(I0, ns_, shape_)); }
nb_status h_expand(dcase *c) { SHAPE_ARG; OUT1(nb_expand(I0, ns_, shape_)); }
nb_status h_broadcast_to(dcase *c) { SHAPE_ARG; OUT1(nb_broadcast_to(I0, ns_, shape_)); }
nb_status h_permute(dcase *c) {
    int d[NB_MAX_DIMS] = {0};
    ali(c, "dims", d, NB_MAX_DIMS);
    OUT1(nb_permute(I0, d));
}
nb_status h_transpose(dcase *c) { OUT1(nb_transpose(I0, (int)ai(c, "dim0", 0), (int)ai(c, "dim1", 1))); }
nb_status h_narrow(dcase *c) { OUT1(nb_narrow(I0, (int)ai(c, "dim", 0), ai(c, "start", 0), ai(c, "length", 1))); }
nb_status h_slice(dcase *c) {
    OUT1(nb_slice(I0, (int)ai(c, "dim", 0), ai(c, "start", 0), ai(c, "end", INT64_MAX), ai(c, "step", 1)));
}
nb_status h_unsqueeze(dcase *c) { OUT1(nb_unsqueeze(I0, (int)ai(c, "dim", 0))); }
nb_status h_squeeze(dcase *c) { OUT1(nb_squeeze(I0, (int)ai(c, "dim", 0))); }
nb_status h_flatten(dcase *c) { OUT1(nb_flatten(I0, (int)ai(c, "start_dim", 0), (int)ai(c, "end_dim", -1))); }
nb_status h_diagonal(dcase *c) {
    OUT1(nb_diagonal(I0, ai(c, "offset", 0), (int)ai(c, "dim1", 0), (int)ai(c, "dim2", 1)));
}
nb_status h_unfold(dcase *c) { OUT1(nb_unfold(I0, (int)ai(c, "dimension", 0), ai(c, "size", 1), ai(c, "step", 1))); }
nb_status h_movedim(dcase *c) {
    int s[NB_MAX_DIMS], d[NB_MAX_DIMS];
    int n = ali(c, "source", s, NB_MAX_DIMS);
    ali(c, "destination", d, NB_MAX_DIMS);
    OUT1(nb_movedim(I0, s, d, n < 0 ? 0 : n));
}
nb_status h_diag_embed(dcase *c) {
    OUT1(nb_diag_embed(I0, ai(c, "offset", 0), (int)ai(c, "dim1", -2), (int)ai(c, "dim2", -1)));
}
nb_status h_flip(dcase *c) {
    int d[NB_MAX_DIMS];
    int n = ali(c, "dims", d, NB_MAX_DIMS);
    OUT1(nb_flip(I0, d, n < 0 ? 0 : n));
}
nb_status h_roll(dcase *c) {
    int64_t sh[NB_MAX_DIMS];
    int d[NB_MAX_DIMS];
    int ns = al(c, "shifts", sh, NB_MAX_DIMS), nd = ali(c, "dims", d, NB_MAX_DIMS);
    OUT1(nb_roll(I0, sh, ns < 0 ? 0 : ns, nd > 0 ? d : NULL, nd < 0 ? 0 : nd));
}
nb_status h_repeat(dcase *c) {
    int64_t r[NB_MAX_DIMS + 1];
    int n = al(c, "repeats", r, NB_MAX_DIMS + 1);
    OUT1(nb_repeat(I0, r, n < 0 ? 0 : n));
}
nb_status h_tile(dcase *c) {
    int64_t r[NB_MAX_DIMS + 1];
    int n = al(c, "dims", r, NB_MAX_DIMS + 1);
    OUT1(nb_tile(I0, r, n < 0 ? 0 : n));
}
nb_status h_pad(dcase *c) {
    int64_t p[2 * NB_MAX_DIMS + 2];
    int n = al(c, "pad", p, 2 * NB_MAX_DIMS + 2);
    const char *m = as(c, "mode", "constant");
    nb_pad_mode mode = !strcmp(m, "reflect") ? NB_PAD_REFLECT : !strcmp(m, "replicate") ? NB_PAD_REPLICATE
                       : !strcmp(m, "circular") ? NB_PAD_CIRCULAR : NB_PAD_CONSTANT;
    OUT1(nb_pad(I0, p, n < 0 ? 0 : n, mode, ad(c, "value", 0)));
}
nb_status h_rot90(dcase *c) {
    int d[2] = {0, 1};
    ali(c, "dims", d, 2);
    OUT1(nb_rot90(I0, ai(c, "k", 1), d[0], d[1]));
}
nb_status h_tril(dcase *c) { OUT1(nb_tril(I0, ai(c, "diagonal", 0))); }
nb_status h_triu(dcase *c) { OUT1(nb_triu(I0, ai(c, "diagonal", 0))); }
nb_status h_meshgrid(dcase *c) {
    int n = c->n_in < RUNNER_MAX_OUT ? c->n_in : RUNNER_MAX_OUT;
    bool xy = !strcmp(as(c, "indexing", "ij"), "xy");
    OUTS(n, nb_meshgrid(c->in, n, xy ? NB_MESHGRID_XY : NB_MESHGRID_IJ, c->out));
}

/* ---- indexing, joining ------------------------------------------------------------------------------ */

nb_status h_embedding(dcase *c) {
    json_t *p = json_object_get(c->args, "padding_idx");
    OUT1(nb_embedding(I0, I1, json_is_integer(p) ? (int64_t)json_integer_value(p) : NB_NO_PADDING_IDX));
}
nb_status h_index_select(dcase *c) { OUT1(nb_index_select(I0, (int)ai(c, "dim", 0), I1)); }
nb_status h_cat(dcase *c) { OUT1(nb_cat(c->in, c->n_in, (int)ai(c, "dim", 0))); }
nb_status h_stack(dcase *c) { OUT1(nb_stack(c->in, c->n_in, (int)ai(c, "dim", 0))); }
nb_status h_split(dcase *c) {
    int n = nb_split(I0, ai(c, "split_size", 1), (int)ai(c, "dim", 0), c->out, RUNNER_MAX_OUT);
    OUTS(n < 0 ? 0 : n, n < 0 ? nb_last_status() : NB_OK);
}
nb_status h_chunk(dcase *c) {
    int n = nb_chunk(I0, (int)ai(c, "chunks", 1), (int)ai(c, "dim", 0), c->out, RUNNER_MAX_OUT);
    OUTS(n < 0 ? 0 : n, n < 0 ? nb_last_status() : NB_OK);
}
nb_status h_split_with_sizes(dcase *c) {
    int64_t sz[RUNNER_MAX_OUT];
    int k = al(c, "split_sizes", sz, RUNNER_MAX_OUT);
    int n = nb_split_with_sizes(I0, sz, k < 0 ? 0 : k, (int)ai(c, "dim", 0), c->out, RUNNER_MAX_OUT);
    OUTS(n < 0 ? 0 : n, n < 0 ? nb_last_status() : NB_OK);
}
nb_status h_unbind(dcase *c) {
    int n = nb_unbind(I0, (int)ai(c, "dim", 0), c->out, RUNNER_MAX_OUT);
    OUTS(n < 0 ? 0 : n, n < 0 ? nb_last_status() : NB_OK);
}
nb_status h_select(dcase *c) { OUT1(nb_select(I0, (int)ai(c, "dim", 0), ai(c, "index", 0))); }
nb_status h_index_add(dcase *c) { OUT1(nb_index_add(I0, (int)ai(c, "dim", 0), I1, I2, ad(c, "alpha", 1))); }
nb_status h_index_copy(dcase *c) { OUT1(nb_index_copy(I0, (int)ai(c, "dim", 0), I1, I2)); }
nb_status h_one_hot(dcase *c) { OUT1(nb_one_hot(I0, ai(c, "num_classes", -1))); }
nb_status h_nonzero(dcase *c) { OUT1(nb_nonzero(I0)); }
nb_status h_masked_select(dcase *c) { OUT1(nb_masked_select(I0, I1)); }
nb_status h_gather(dcase *c) { OUT1(nb_gather(I0, (int)ai(c, "dim", 0), I1)); }
nb_status h_scatter(dcase *c) { OUT1(nb_scatter(I0, (int)ai(c, "dim", 0), I1, I2)); }
nb_status h_scatter_value(dcase *c) { OUT1(nb_scatter_value(I0, (int)ai(c, "dim", 0), I1, ad(c, "value", 0))); }
nb_status h_scatter_add(dcase *c) { OUT1(nb_scatter_add(I0, (int)ai(c, "dim", 0), I1, I2)); }
nb_status h_scatter_reduce(dcase *c) {
    OUT1(nb_scatter_reduce(I0, (int)ai(c, "dim", 0), I1, I2, as(c, "reduce", "sum"), ab(c, "include_self", true)));
}
nb_status h_take_along_dim(dcase *c) {
    json_t *d = json_object_get(c->args, "dim");
    OUT1(nb_take_along_dim(I0, I1, json_is_integer(d) ? (int)json_integer_value(d) : NB_DIM_NONE));
}

nb_status h_isclose(dcase *c) {
    OUT1(nb_isclose(I0, I1, ad(c, "rtol", 1e-5), ad(c, "atol", 1e-8), ab(c, "equal_nan", false)));
}
nb_status h_allclose(dcase *c) {
    bool r = false;
    nb_status st = nb_allclose(I0, I1, ad(c, "rtol", 1e-5), ad(c, "atol", 1e-8), ab(c, "equal_nan", false), &r);
    c->out[0] = st ? NULL : nb_scalar(r, NB_BOOL);
    OUTS(1, st ? st : c->out[0] ? NB_OK : nb_last_status());
}
nb_status h_multinomial(dcase *c) {
    OUT1(nb_multinomial(I0, ai(c, "num_samples", 1), ab(c, "replacement", false), NULL));
}

/* ---- quantization ------------------------------------------------------------------------------------ */

nb_status h_fake_quantize_per_tensor_affine(dcase *c) {
    OUT1(nb_fake_quantize_per_tensor_affine(I0, ad(c, "scale", 1), ai(c, "zero_point", 0), ai(c, "quant_min", 0),
                                            ai(c, "quant_max", 255)));
}
nb_status h_fake_quantize_per_channel_affine(dcase *c) {
    OUT1(nb_fake_quantize_per_channel_affine(I0, I1, I2, (int)ai(c, "axis", 0), ai(c, "quant_min", 0),
                                             ai(c, "quant_max", 255)));
}
nb_status h_fake_quantize_learnable_per_tensor_affine(dcase *c) {
    OUT1(nb_fake_quantize_learnable_per_tensor_affine(I0, I1, I2, ai(c, "quant_min", 0), ai(c, "quant_max", 255),
                                                      ad(c, "grad_factor", 1)));
}
nb_status h_fake_quantize_learnable_per_channel_affine(dcase *c) {
    OUT1(nb_fake_quantize_learnable_per_channel_affine(I0, I1, I2, (int)ai(c, "axis", 0), ai(c, "quant_min", 0),
                                                       ai(c, "quant_max", 255), ad(c, "grad_factor", 1)));
}
nb_status h_bitnet_weight_quant(dcase *c) { OUT1(nb_bitnet_weight_quant(I0)); }
nb_status h_bitnet_activation_quant(dcase *c) { OUT1(nb_bitnet_activation_quant(I0)); }
nb_status h_bitnet_pack(dcase *c) { OUTS(2, nb_bitnet_pack(I0, &c->out[0], &c->out[1])); }
nb_status h_quantize_per_tensor(dcase *c) {
    OUT1(nb_quantize_per_tensor(I0, ad(c, "scale", 1), ai(c, "zero_point", 0), dtype_named(as(c, "dtype", "int8"))));
}
nb_status h_quantize_per_channel(dcase *c) {
    OUT1(nb_quantize_per_channel(I0, I1, I2, (int)ai(c, "axis", 0), dtype_named(as(c, "dtype", "int8"))));
}
nb_status h_dequantize_per_tensor(dcase *c) {
    OUT1(nb_dequantize_per_tensor(I0, ad(c, "scale", 1), ai(c, "zero_point", 0)));
}
nb_status h_dequantize_per_channel(dcase *c) { OUT1(nb_dequantize_per_channel(I0, I1, I2, (int)ai(c, "axis", 0))); }
nb_status h_int8_weight_quantize(dcase *c) { OUTS(2, nb_int8_weight_quantize(I0, &c->out[0], &c->out[1])); }
/* in: x, the float weights (quantized here by nb_int8_weight_quantize), and a bias */
nb_status h_linear_int8(dcase *c) {
    nb_tensor *q = NULL, *s = NULL;
    nb_status st = nb_int8_weight_quantize(I1, &q, &s);
    if (st) return st;
    OUT1(nb_linear_int8(I0, q, s, c->n_in > 2 ? c->in[2] : NULL));
}
/* in: x, the weights (packed here), and a bias */
nb_status h_bitnet_linear(dcase *c) {
    nb_tensor *p = NULL, *s = NULL;
    nb_status st = nb_bitnet_pack(I1, &p, &s);
    if (st) return st;
    OUT1(nb_bitnet_linear(I0, p, s, c->n_in > 2 ? c->in[2] : NULL));
}
