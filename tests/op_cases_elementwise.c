/* op_cases_elementwise.c - op harness cases of the unary, binary, cast and
 * quantize families: each op on [2, 3] inputs (binary ops broadcast [2, 3]
 * with [3]) drawn from its domain, away from kinks and poles. */
#include <math.h>

#include "op_harness.h"

#define U1(ID, F, K) {.op = NB_OP_##ID, .label = #F, .f1 = nb_##F, .n_in = 1, .in = {IN(K, 2, 3)}}
#define B2(ID, F, K1, K2) {.op = NB_OP_##ID, .label = #F, .f2 = nb_##F, .n_in = 2, .in = {IN(K1, 2, 3), IN(K2, 3)}}
#define FN1(ID, LABEL, FN, K) {.op = NB_OP_##ID, .label = LABEL, .fn = FN, .n_in = 1, .in = {IN(K, 2, 3)}}
#define FN2(ID, LABEL, FN, K1, K2) {.op = NB_OP_##ID, .label = LABEL, .fn = FN, .n_in = 2, .in = {IN(K1, 2, 3), IN(K2, 3)}}

/* the ops that take more than tensors */
static nb_tensor *add_scalar(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_add_scalar(x[0], 1.75); }
static nb_tensor *mul_scalar(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_mul_scalar(x[0], -2.5); }
static nb_tensor *pow_scalar(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_pow_scalar(x[0], 2.5); }
static nb_tensor *round_dec(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_round_decimals(x[0], 1); }
static nb_tensor *leaky(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_leaky_relu(x[0], 0.1); }
static nb_tensor *elu(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_elu(x[0], 1.3); }
static nb_tensor *softplus(nb_tensor *const *x, const nb_op_case *c) { return nb_softplus(x[0], c->p[0], 20); }
static nb_tensor *hardtanh(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_hardtanh(x[0], -1, 1); }
static nb_tensor *gelu(nb_tensor *const *x, const nb_op_case *c) { return nb_gelu(x[0], (nb_gelu_approximate)c->p[0]); }
/* strided input: the transpose of a [3, 2] input */
static nb_tensor *exp_strided(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_exp(nb_transpose(x[0], 0, 1)); }

static nb_tensor *div_trunc(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_div_mode(x[0], x[1], NB_ROUNDING_TRUNC);
}
static nb_tensor *div_floor(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_div_mode(x[0], x[1], NB_ROUNDING_FLOOR);
}
static nb_tensor *rem_s(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_remainder_scalar(x[0], -1.3); }
static nb_tensor *fmod_s(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_fmod_scalar(x[0], 1.3); }
static nb_tensor *lerp(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_lerp(x[0], x[1], x[2]); }
static nb_tensor *lerp_s(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_lerp_scalar(x[0], x[1], 0.3); }
static nb_tensor *clamp(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_clamp(x[0], x[1], nb_add_scalar(x[1], 1.0));
}
static nb_tensor *clamp_s(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_clamp_scalar(x[0], -0.5, 0.5); }
#define CMP_S(NAME)                                                                        \
    static nb_tensor *NAME##_s(nb_tensor *const *x, const nb_op_case *c) {                 \
        (void)c;                                                                           \
        return nb_##NAME##_scalar(x[0], 0.0);                                              \
    }
CMP_S(eq)
CMP_S(ne)
CMP_S(gt)
CMP_S(ge)
CMP_S(lt)
CMP_S(le)
#define BIT_S(NAME, V)                                                                     \
    static nb_tensor *NAME##_s(nb_tensor *const *x, const nb_op_case *c) {                 \
        (void)c;                                                                           \
        return nb_bitwise_##NAME##_scalar(x[0], V);                                        \
    }
BIT_S(and, 6)
BIT_S(or, 6)
BIT_S(xor, 5)
BIT_S(left_shift, 2)
BIT_S(right_shift, 1)
/* NaN and infinities mixed in: x / y with y's zeros (integers: no NaN) */
static nb_tensor *isnan_(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_isnan(nb_log(x[0])); }
static nb_tensor *isinf_(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_isinf(nb_div(x[0], nb_to_dtype(x[1], nb_dtype_of(x[0])))); /* x / 0 where the mask is false */
}
static nb_tensor *isfinite_(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_isfinite(nb_log(x[0])); }
/* tolerances wide enough that N(0, 1) pairs (and integers in [-5, 5]) give both answers */
static nb_tensor *isclose_(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_isclose(x[0], x[1], 0.5, 0.5, false);
}
static nb_tensor *allclose_(nb_tensor *const *x, const nb_op_case *c) {
    bool r = false;
    if (nb_allclose(x[0], x[1], 0.5, c->p[0], false, &r)) return NULL;
    return nb_full_on(0, NULL, r, NB_BOOL, nb_device_of(x[0]));
}
static nb_tensor *to_f64(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_to_dtype(x[0], NB_F64); }
static nb_tensor *to_f32(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_to_dtype(x[0], NB_F32); }

/* logit's input mapped from U(-0.9, 0.9) into (0.05, 0.95) */
static nb_tensor *logit(nb_tensor *const *x, const nb_op_case *c) {
    return nb_logit(nb_mul_scalar(nb_add_scalar(x[0], 1), 0.5), c->p[0]);
}

/* fake quantization: levels of x / scale over [-8, 7] (some clamp); the
 * gradients are straight-through estimators, not derivatives, so
 * C_NOGC: they are compared with the CPU's float64 ones only. */
static nb_tensor *fq_tensor(nb_tensor *const *x, const nb_op_case *c) {
    return nb_fake_quantize_per_tensor_affine(x[0], c->p[0], (int64_t)c->p[1], -8, 7);
}
/* x [2, 3, 2], axis 1: scale x[1] (positive), zero point x[2] rounded to
 * int32 (p[0] = 0) or as a float zero point */
static nb_tensor *fq_channel(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *z = c->p[0] == 0 ? nb_to_dtype(nb_round(nb_to_dtype(nb_detach(x[2]), NB_F32)), NB_I32) : x[2];
    return nb_fake_quantize_per_channel_affine(x[0], x[1], z, 1, -8, 7);
}
static nb_tensor *fq_learn_tensor(nb_tensor *const *x, const nb_op_case *c) {
    return nb_fake_quantize_learnable_per_tensor_affine(x[0], x[1], x[2], -8, 7, c->p[0]);
}
static nb_tensor *fq_learn_channel(nb_tensor *const *x, const nb_op_case *c) {
    return nb_fake_quantize_learnable_per_channel_affine(x[0], x[1], x[2], 1, -8, 7, c->p[0]);
}
#define FQ_IN(C) {IN(K_REAL, 2, 3, 2), IN(K_POS, C), IN(K_REAL, C)}
/* BitNet inference: w [5, 130] packed (two groups of 128, the second
 * padded), x [2, 3, 130] through the packed product with a bias */
static nb_tensor *bn_pack(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *p, *s;
    return nb_bitnet_pack(x[0], &p, &s) == NB_OK ? p : NULL;
}
static nb_tensor *bn_linear(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *p, *s;
    return nb_bitnet_pack(x[1], &p, &s) == NB_OK ? nb_bitnet_linear(x[0], p, s, x[2]) : NULL;
}

/* quantize to int8 (scale 0.25, zero point 2: some levels clamp), per
 * channel with x[1]'s scales and x[2] rounded to int32 zero points; the
 * integer runs of dequantize read x[0] as the levels, with fixed qparams */
static nb_tensor *q_tensor(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_quantize_per_tensor(x[0], 0.25, 2, NB_I8);
}
static nb_tensor *q_channel(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *z = nb_to_dtype(nb_round(nb_to_dtype(nb_detach(x[2]), NB_F32)), NB_I32);
    return nb_quantize_per_channel(x[0], x[1], z, 1, NB_U8);
}
static nb_tensor *dq_tensor(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_dequantize_per_tensor(x[0], 0.25, 1);
}
static nb_tensor *dq_channel(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_device dev = nb_device_of(x[0]);
    return nb_dequantize_per_channel(x[0], nb_mul_scalar(nb_arange_on(1, 4, 1, NB_F32, dev), 0.25),
                                     nb_arange_on(-1, 2, 1, NB_I64, dev), 1);
}
/* int8 weight-only: w [5, 32] quantized, x [2, 3, 32] (6 rows: the kernel
 * without grad, the matmul path with it) with a bias */
static nb_tensor *i8_quant(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *q, *s;
    return nb_int8_weight_quantize(x[0], &q, &s) == NB_OK ? q : NULL;
}
static nb_tensor *i8_linear(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *q, *s;
    return nb_int8_weight_quantize(x[1], &q, &s) == NB_OK ? nb_linear_int8(x[0], q, s, x[2]) : NULL;
}

static const nb_op_case cases[] = {
    /* unary */
    U1(NEG, neg, K_REAL),
    U1(EXP, exp, K_REAL),
    {.op = NB_OP_EXP, .label = "exp of a transposed view", .fn = exp_strided, .n_in = 1, .in = {IN(K_REAL, 3, 2)}},
    U1(LOG, log, K_POS),
    U1(SQRT, sqrt, K_POS),
    U1(RELU, relu, K_AWAY0),
    U1(SIGMOID, sigmoid, K_REAL),
    U1(TANH, tanh, K_REAL),
    FN1(ADD_SCALAR, "add_scalar 1.75", add_scalar, K_REAL),
    FN1(MUL_SCALAR, "mul_scalar -2.5", mul_scalar, K_REAL),
    FN1(POW_SCALAR, "pow_scalar 2.5", pow_scalar, K_POS),
    U1(ABS, abs, K_AWAY0),
    U1(SIGN, sign, K_AWAY0),
    U1(FLOOR, floor, K_REAL),
    U1(CEIL, ceil, K_REAL),
    U1(TRUNC, trunc, K_REAL),
    U1(ROUND, round, K_REAL),
    {.op = NB_OP_ROUND_DECIMALS, .label = "round 1 decimal", .fn = round_dec, .n_in = 1, .in = {IN(K_REAL, 2, 3)},
     .flags = C_NOINT},
    U1(RECIPROCAL, reciprocal, K_AWAY0),
    U1(RSQRT, rsqrt, K_POS),
    U1(LOG1P, log1p, K_POS),
    U1(EXPM1, expm1, K_REAL),
    U1(LOG2, log2, K_POS),
    U1(LOG10, log10, K_POS),
    U1(SIN, sin, K_REAL),
    U1(COS, cos, K_REAL),
    U1(TAN, tan, K_UNIT),
    U1(ASIN, asin, K_UNIT),
    U1(ACOS, acos, K_UNIT),
    U1(ATAN, atan, K_REAL),
    U1(SINH, sinh, K_REAL),
    U1(COSH, cosh, K_REAL),
    U1(ASINH, asinh, K_REAL),
    U1(ACOSH, acosh, K_GT1),
    U1(ATANH, atanh, K_UNIT),
    U1(ERF, erf, K_REAL),
    U1(ERFC, erfc, K_REAL),
    {.op = NB_OP_LOGIT, .label = "logit eps None", .fn = logit, .n_in = 1, .in = {IN(K_UNIT, 2, 3)}, .p = {-1},
     .flags = C_NOINT},
    {.op = NB_OP_LOGIT, .label = "logit eps 0.01", .fn = logit, .n_in = 1, .in = {IN(K_UNIT, 2, 3)}, .p = {0.01},
     .flags = C_NOINT},
    U1(SINC, sinc, K_REAL),
    FN1(LEAKY_RELU, "leaky_relu 0.1", leaky, K_AWAY0),
    FN1(ELU, "elu 1.3", elu, K_AWAY0),
    U1(SELU, selu, K_AWAY0),
    U1(SILU, silu, K_REAL),
    B2(SILU_MUL, silu_mul, K_REAL, K_REAL),
    {.op = NB_OP_SILU_MUL, .label = "silu_mul same shape", .f2 = nb_silu_mul, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}},
    U1(MISH, mish, K_REAL),
    {.op = NB_OP_SOFTPLUS, .label = "softplus beta 1", .fn = softplus, .n_in = 1, .in = {IN(K_REAL, 2, 3)}, .p = {1}},
    {.op = NB_OP_SOFTPLUS, .label = "softplus beta 2", .fn = softplus, .n_in = 1, .in = {IN(K_REAL, 2, 3)}, .p = {2}},
    FN1(HARDTANH, "hardtanh -1 1", hardtanh, K_AWAY0),
    U1(RELU6, relu6, K_AWAY0),
    U1(HARDSIGMOID, hardsigmoid, K_REAL),
    U1(HARDSWISH, hardswish, K_REAL),
    U1(LOGSIGMOID, logsigmoid, K_REAL),
    {.op = NB_OP_GELU, .label = "gelu erf", .fn = gelu, .n_in = 1, .in = {IN(K_REAL, 2, 3)}, .p = {NB_GELU_ERF}},
    {.op = NB_OP_GELU, .label = "gelu tanh", .fn = gelu, .n_in = 1, .in = {IN(K_REAL, 2, 3)}, .p = {NB_GELU_TANH}},
    /* binary, broadcasting [2, 3] with [3] */
    B2(ADD, add, K_REAL, K_REAL),
    B2(SUB, sub, K_REAL, K_REAL),
    B2(MUL, mul, K_REAL, K_REAL),
    B2(DIV, div, K_REAL, K_AWAY0),
    {.op = NB_OP_POW, .label = "pow", .f2 = nb_pow, .n_in = 2, .in = {IN(K_POS, 2, 3), IN(K_REAL, 3)}, .flags = C_NOINT},
    {.op = NB_OP_POW, .label = "pow of integers", .f2 = nb_pow, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_POS, 3)},
     .dtypes = NB_DTM_INT},
    FN2(DIV_MODE, "div trunc", div_trunc, K_REAL, K_AWAY0),
    FN2(DIV_MODE, "div floor", div_floor, K_REAL, K_AWAY0),
    B2(FLOOR_DIVIDE, floor_divide, K_REAL, K_AWAY0),
    B2(REMAINDER, remainder, K_REAL, K_AWAY0),
    FN1(REMAINDER_SCALAR, "remainder -1.3", rem_s, K_REAL),
    B2(FMOD, fmod, K_REAL, K_AWAY0),
    FN1(FMOD_SCALAR, "fmod 1.3", fmod_s, K_REAL),
    B2(ATAN2, atan2, K_REAL, K_REAL),
    B2(XLOGY, xlogy, K_REAL, K_POS),
    B2(HYPOT, hypot, K_AWAY0, K_AWAY0),
    B2(MAXIMUM, maximum, K_REAL, K_REAL),
    B2(MINIMUM, minimum, K_REAL, K_REAL),
    {.op = NB_OP_LERP, .label = "lerp", .fn = lerp, .n_in = 3, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 3), IN(K_UNIT, 2, 3)}},
    FN2(LERP_SCALAR, "lerp 0.3", lerp_s, K_REAL, K_REAL),
    FN2(CLAMP, "clamp to [lo, lo + 1]", clamp, K_REAL, K_UNIT),
    FN1(CLAMP_SCALAR, "clamp -0.5 0.5", clamp_s, K_AWAY0),
    B2(EQ, eq, K_REAL, K_REAL),
    B2(NE, ne, K_REAL, K_REAL),
    B2(GT, gt, K_REAL, K_REAL),
    B2(GE, ge, K_REAL, K_REAL),
    B2(LT, lt, K_REAL, K_REAL),
    B2(LE, le, K_REAL, K_REAL),
    FN1(EQ_SCALAR, "eq 0", eq_s, K_REAL),
    FN1(NE_SCALAR, "ne 0", ne_s, K_REAL),
    FN1(GT_SCALAR, "gt 0", gt_s, K_REAL),
    FN1(GE_SCALAR, "ge 0", ge_s, K_REAL),
    FN1(LT_SCALAR, "lt 0", lt_s, K_REAL),
    FN1(LE_SCALAR, "le 0", le_s, K_REAL),
    {.op = NB_OP_ISNAN, .label = "isnan of log", .fn = isnan_, .n_in = 1, .in = {IN(K_REAL, 2, 3)},
     .flags = C_NOINT | C_NO16},
    {.op = NB_OP_ISINF, .label = "isinf of x / 0", .fn = isinf_, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_BOOL, 3)},
     .flags = C_NOINT | C_NO16},
    {.op = NB_OP_ISFINITE, .label = "isfinite of log", .fn = isfinite_, .n_in = 1, .in = {IN(K_REAL, 2, 3)},
     .flags = C_NOINT | C_NO16},
    U1(ISNAN, isnan, K_REAL),
    U1(ISINF, isinf, K_REAL),
    U1(ISFINITE, isfinite, K_REAL),
    B2(LOGICAL_AND, logical_and, K_REAL, K_REAL),
    B2(LOGICAL_OR, logical_or, K_REAL, K_REAL),
    B2(LOGICAL_XOR, logical_xor, K_REAL, K_REAL),
    U1(LOGICAL_NOT, logical_not, K_REAL),
    B2(BITWISE_AND, bitwise_and, K_REAL, K_REAL),
    B2(BITWISE_OR, bitwise_or, K_REAL, K_REAL),
    B2(BITWISE_XOR, bitwise_xor, K_REAL, K_REAL),
    U1(BITWISE_NOT, bitwise_not, K_REAL),
    B2(BITWISE_LEFT_SHIFT, bitwise_left_shift, K_REAL, K_REAL),
    B2(BITWISE_RIGHT_SHIFT, bitwise_right_shift, K_REAL, K_REAL),
    FN1(BITWISE_AND_SCALAR, "x & 6", and_s, K_REAL),
    FN1(BITWISE_OR_SCALAR, "x | 6", or_s, K_REAL),
    FN1(BITWISE_XOR_SCALAR, "x ^ 5", xor_s, K_REAL),
    FN1(BITWISE_LEFT_SHIFT_SCALAR, "x << 2", left_shift_s, K_REAL),
    FN1(BITWISE_RIGHT_SHIFT_SCALAR, "x >> 1", right_shift_s, K_REAL),
    FN2(ISCLOSE, "isclose rtol 0.5 atol 0.5", isclose_, K_REAL, K_REAL),
    {.op = NB_OP_ALLCLOSE, .label = "allclose atol 10 (true)", .fn = allclose_, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {10}},
    {.op = NB_OP_ALLCLOSE, .label = "allclose atol 0.5 (false)", .fn = allclose_, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}, .p = {0.5}},
    /* casts */
    FN1(TO_DTYPE, "to float64", to_f64, K_REAL),
    {.op = NB_OP_TO_DTYPE, .label = "to float32", .fn = to_f32, .n_in = 1, .in = {IN(K_REAL, 2, 3)},
     .flags = C_NOGC}, /* rounds: finite differences of a float32 output are noise */
    /* quantize */
    {.op = NB_OP_FAKE_QUANTIZE_PER_TENSOR_AFFINE, .label = "fake_quantize_per_tensor_affine scale 0.25 zp 2",
     .fn = fq_tensor, .n_in = 1, .in = {IN(K_REAL, 2, 3)}, .flags = C_NOGC, .p = {0.25, 2}},
    {.op = NB_OP_FAKE_QUANTIZE_PER_CHANNEL_AFFINE, .label = "fake_quantize_per_channel_affine int32 zero point",
     .fn = fq_channel, .n_in = 3, .in = FQ_IN(3), .flags = C_NOGC},
    {.op = NB_OP_FAKE_QUANTIZE_PER_CHANNEL_AFFINE, .label = "fake_quantize_per_channel_affine float zero point",
     .fn = fq_channel, .n_in = 3, .in = FQ_IN(3), .flags = C_NOGC, .p = {1}},
    {.op = NB_OP_FAKE_QUANTIZE_LEARNABLE_PER_TENSOR_AFFINE, .label = "fake_quantize_learnable_per_tensor_affine",
     .fn = fq_learn_tensor, .n_in = 3, .in = FQ_IN(1), .flags = C_NOGC, .p = {0.5}},
    {.op = NB_OP_FAKE_QUANTIZE_LEARNABLE_PER_CHANNEL_AFFINE, .label = "fake_quantize_learnable_per_channel_affine",
     .fn = fq_learn_channel, .n_in = 3, .in = FQ_IN(3), .flags = C_NOGC, .p = {1}},
    {.op = NB_OP_BITNET_WEIGHT_QUANT, .label = "bitnet_weight_quant", .f1 = nb_bitnet_weight_quant, .n_in = 1,
     .in = {IN(K_REAL, 3, 4)}, .flags = C_NOGC},
    {.op = NB_OP_BITNET_ACTIVATION_QUANT, .label = "bitnet_activation_quant", .f1 = nb_bitnet_activation_quant,
     .n_in = 1, .in = {IN(K_REAL, 2, 3, 5)}, .flags = C_NOGC},
    {.op = NB_OP_BITNET_PACK, .label = "bitnet_pack [5, 130]", .fn = bn_pack, .n_in = 1,
     .in = {IN(K_REAL, 5, 130)}, .flags = C_NOGRAD},
    {.op = NB_OP_BITNET_LINEAR, .label = "bitnet_linear [2, 3, 130] x [5, 130] + bias", .fn = bn_linear, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 130), IN(K_REAL, 5, 130), IN(K_REAL, 5)}, .flags = C_NOGRAD, .tol = 1e-4},
    {.op = NB_OP_QUANTIZE_PER_TENSOR, .label = "quantize_per_tensor int8 scale 0.25 zp 2", .fn = q_tensor, .n_in = 1,
     .in = {IN(K_REAL, 2, 3)}, .flags = C_NOGRAD},
    {.op = NB_OP_QUANTIZE_PER_CHANNEL, .label = "quantize_per_channel uint8 axis 1", .fn = q_channel, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 2), IN(K_POS, 3), IN(K_POS, 3)}, .flags = C_NOGRAD},
    {.op = NB_OP_DEQUANTIZE_PER_TENSOR, .label = "dequantize_per_tensor scale 0.25 zp 1", .fn = dq_tensor, .n_in = 1,
     .in = {IN(K_REAL, 2, 3)}, .flags = C_NOGRAD},
    {.op = NB_OP_DEQUANTIZE_PER_CHANNEL, .label = "dequantize_per_channel axis 1", .fn = dq_channel, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 2)}, .flags = C_NOGRAD},
    {.op = NB_OP_INT8_WEIGHT_QUANTIZE, .label = "int8_weight_quantize [5, 32]", .fn = i8_quant, .n_in = 1,
     .in = {IN(K_REAL, 5, 32)}, .flags = C_NOGRAD},
    {.op = NB_OP_LINEAR_INT8, .label = "linear_int8 [2, 3, 32] x [5, 32] + bias", .fn = i8_linear, .n_in = 3,
     .in = {IN(K_REAL, 2, 3, 32), IN(K_REAL, 5, 32), IN(K_REAL, 5)}, .flags = C_NOGC, .tol = 1e-4},
};

const nb_case_table nb_cases_elementwise = {cases, (int)(sizeof cases / sizeof cases[0])};
