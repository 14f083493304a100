/* nb_op_table.h - the one list of nabla's ops. Every public op of nb_ops.h,
 * nb_linalg.h and nb_to_dtype has one row:
 *
 *   X(ID, name, family, flags, dtypes, slots, bw, ac)
 *
 *   ID      the op's id, NB_OP_<ID> in enum nb_op_id; the tape records it
 *   name    the C function is nb_<name>; also the op's name in messages
 *   family  the file family: autograd/ops_<family>.c (forward and backward
 *           rule), backend/cpu/<family>.c (kernel), tests/test_ops_<family>.c
 *   flags   NB_OPF_* below
 *   dtypes  the input dtypes the op accepts on some backend (NB_DTM_*
 *           masks; integer inputs of float math ops promote as PyTorch's);
 *           a backend answers for itself through nb_backend_supports()
 *   slots   the kernel slots its forward and backward call, K(slot) each,
 *           with those of the ops it calls (the REQ slots of
 *           backend/nb_slots.def; OPT ones are not needed): a backend runs
 *           the op where it has every one of them (nb_backend_supports).
 *           tests/test_op_harness.c traces the slots each case calls, on
 *           every device, and fails for one its row does not list
 *           (NB_OP_SLOTS_PRINT=1 prints them).
 *   bw      its backward rule, as derivatives.yaml is PyTorch's one place
 *           for them: BW(f) names nb_bw_f (autograd/ops_<family>.c), which
 *           nb_record gives the op's node; BW_CALLS, differentiable through
 *           the ops it calls (their nodes carry the gradient); BW_NONE, no
 *           gradient. A row whose flags and bw disagree (NB_OPF_DIFF with
 *           BW_NONE, or no NB_OPF_DIFF with a rule) fails to build
 *           (core/op_table.c).
 *   ac      its autocast policy (nb_autocast_policy below, as torch.autocast's
 *           op lists): AC(LOWER), AC(LOWER_EXCEPT_CPU), AC(FP32) or
 *           AC(NONE); the op's function applies it (nb_autocast_inputs) or
 *           calls the op that does (bmm and deform_conv2d through matmul).
 *           OPS.md's autocast column is generated from it.
 *
 * autograd/OPS.md's main table is generated from this list
 * (build/tests/nabla-ops-md) and tests/test_op_table.c fails when the two
 * differ or when a function declared in the headers has no row here. The
 * op test harness (tests/test_op_harness.c) fails for a row without cases.
 * Adding an op: a row here, its function, its cases in the
 * harness, then regenerate OPS.md.
 */
#ifndef NB_OP_TABLE_H
#define NB_OP_TABLE_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- flags ----------------------------------------------------------------- */
#define NB_OPF_DIFF 1u      /* has a backward rule (for float inputs) */
#define NB_OPF_COMPOSITE 2u /* written from other ops: no slot of its own */
#define NB_OPF_VIEW 4u      /* returns a view sharing the input's storage */
#define NB_OPF_SYNC 8u      /* reads data to the host (output size depends on it) */
#define NB_OPF_RANDOM 16u   /* draws from a generator (deterministic given it) */
#define NB_OPF_LP 32u       /* computes on bfloat16/float16 (float32 arithmetic inside, 16-bit tensors):
                               what autocast's lower-precision ops and their neighbours run on */
#define NB_OPF_DIFF2 64u    /* its backward rule is differentiable: double backward (create_graph) works */

/* ---- dtype masks --------------------------------------------------------------- */
/* The bit of dtype dt in a dtype mask (a row's dtypes, nb_op_info.dtypes). */
#define NB_DTM(dt) (1u << (dt))
#define NB_DTM_F (NB_DTM(NB_F32) | NB_DTM(NB_F64))                      /* float math */
#define NB_DTM_INT (NB_DTM(NB_I32) | NB_DTM(NB_I64) | NB_DTM(NB_U8) | NB_DTM(NB_I8) | NB_DTM(NB_I16)) /* integers */
#define NB_DTM_INTB (NB_DTM_INT | NB_DTM(NB_BOOL))                     /* integers, bool */
#define NB_DTM_N (NB_DTM_F | NB_DTM_INT)                               /* numbers */
#define NB_DTM_A6 (NB_DTM_N | NB_DTM(NB_BOOL))                         /* the compute dtypes */
#define NB_DTM_A8 (NB_DTM_A6 | NB_DTM(NB_F16) | NB_DTM(NB_BF16))      /* every dtype */
#define NB_DTM_I64 NB_DTM(NB_I64)                                     /* int64 only (indices) */
#define NB_DTM_H (NB_DTM(NB_F16) | NB_DTM(NB_BF16))                   /* the 16-bit floats */
#define NB_DTM_Q (NB_DTM(NB_U8) | NB_DTM(NB_I8) | NB_DTM(NB_I16) | NB_DTM(NB_I32)) /* quantized values */

/* Short names of the flags for the table's rows: NB_D differentiable, NB_C
 * composite, NB_V view, NB_S sync, NB_R random, NB_LP lower precision, NB_D2
 * differentiable twice (NB_OPF_DIFF | NB_OPF_DIFF2). */
#define NB_D NB_OPF_DIFF
#define NB_C NB_OPF_COMPOSITE
#define NB_V NB_OPF_VIEW
#define NB_S NB_OPF_SYNC
#define NB_R NB_OPF_RANDOM
#define NB_LP NB_OPF_LP
#define NB_D2 (NB_OPF_DIFF | NB_OPF_DIFF2)

/* clang-format off */
/* The table: X(ID, name, family, flags, dtypes, slots, bw, ac) once per op,
 * the columns as at the top of this file. Expand it with your own X. */
#define NB_OP_TABLE(X) \
    /* unary math and activations */ \
    X(NEG, neg, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(EXP, exp, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOG, log, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SQRT, sqrt, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(RELU, relu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SIGMOID, sigmoid, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(TANH, tanh, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ADD_SCALAR, add_scalar, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(MUL_SCALAR, mul_scalar, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(POW_SCALAR, pow_scalar, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ABS, abs, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SIGN, sign, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(FLOOR, floor, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(CEIL, ceil, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(TRUNC, trunc, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ROUND, round, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ROUND_DECIMALS, round_decimals, unary, NB_D2, NB_DTM_N, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(RECIPROCAL, reciprocal, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(RSQRT, rsqrt, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOG1P, log1p, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(EXPM1, expm1, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOG2, log2, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOG10, log10, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SIN, sin, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(COS, cos, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(TAN, tan, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ASIN, asin, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ACOS, acos, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ATAN, atan, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SINH, sinh, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(COSH, cosh, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ASINH, asinh, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ACOSH, acosh, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ATANH, atanh, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ERF, erf, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ERFC, erfc, unary, NB_D2, NB_DTM_A6, K(copy) K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOGIT, logit, unary, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(SINC, sinc, unary, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(LEAKY_RELU, leaky_relu, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(ELU, elu, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SELU, selu, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SILU, silu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SILU_MUL, silu_mul, unary, NB_D | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(reduce) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(MISH, mish, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(SOFTPLUS, softplus, unary, NB_D2, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(unary), AC(NONE)) \
    X(HARDTANH, hardtanh, unary, NB_D2 | NB_C, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(RELU6, relu6, unary, NB_D2 | NB_C, NB_DTM_F, K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(HARDSIGMOID, hardsigmoid, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(HARDSWISH, hardswish, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(LOGSIGMOID, logsigmoid, unary, NB_D2, NB_DTM_F, K(unary) K(unary_backward), BW(unary), AC(NONE)) \
    X(GELU, gelu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(unary) K(unary_backward), BW(gelu), AC(NONE)) \
    /* arithmetic, comparisons, logic */ \
    X(ADD, add, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(binary) K(reduce), BW(add), AC(NONE)) \
    X(SUB, sub, binary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW(sub), AC(NONE)) \
    X(MUL, mul, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(binary) K(reduce), BW(mul), AC(NONE)) \
    X(DIV, div, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW(div), AC(NONE)) \
    X(POW, pow, binary, NB_D2, NB_DTM_N, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(pow), AC(NONE)) \
    X(DIV_MODE, div_mode, binary, NB_D2, NB_DTM_N, K(fill) K(binary), BW(zero), AC(NONE)) \
    X(FLOOR_DIVIDE, floor_divide, binary, NB_D2, NB_DTM_N, K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(REMAINDER, remainder, binary, NB_D2, NB_DTM_N, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW(mod), AC(NONE)) \
    X(REMAINDER_SCALAR, remainder_scalar, binary, NB_D2, NB_DTM_N, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(FMOD, fmod, binary, NB_D2, NB_DTM_N, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW(mod), AC(NONE)) \
    X(FMOD_SCALAR, fmod_scalar, binary, NB_D2, NB_DTM_N, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(ATAN2, atan2, binary, NB_D2, NB_DTM_N, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW(atan2), AC(NONE)) \
    X(XLOGY, xlogy, binary, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(HYPOT, hypot, binary, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(NONE)) \
    X(MAXIMUM, maximum, binary, NB_D2, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(maxmin), AC(NONE)) \
    X(MINIMUM, minimum, binary, NB_D2, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(maxmin), AC(NONE)) \
    X(LERP, lerp, binary, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(lerp), AC(NONE)) \
    X(LERP_SCALAR, lerp_scalar, binary, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(CLAMP, clamp, binary, NB_D2, NB_DTM_N, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(clamp), AC(NONE)) \
    X(CLAMP_SCALAR, clamp_scalar, binary, NB_D2 | NB_C, NB_DTM_N, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(EQ, eq, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(NE, ne, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(GT, gt, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(GE, ge, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(LT, lt, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(LE, le, binary, 0, NB_DTM_A6, K(binary), BW_NONE, AC(NONE)) \
    X(EQ_SCALAR, eq_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(NE_SCALAR, ne_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(GT_SCALAR, gt_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(GE_SCALAR, ge_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(LT_SCALAR, lt_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(LE_SCALAR, le_scalar, binary, 0, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(ISCLOSE, isclose, binary, NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward), BW_NONE, AC(NONE)) \
    X(ALLCLOSE, allclose, binary, NB_C | NB_S, NB_DTM_A6, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce), BW_NONE, AC(NONE)) \
    X(ISNAN, isnan, binary, NB_C, NB_DTM_A8, K(copy) K(fill) K(binary) K(unary) K(unary_backward), BW_NONE, AC(NONE)) \
    X(ISINF, isinf, binary, NB_C, NB_DTM_A8, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(ISFINITE, isfinite, binary, NB_C, NB_DTM_A8, K(copy) K(fill) K(binary) K(unary) K(unary_backward), BW_NONE, AC(NONE)) \
    X(LOGICAL_AND, logical_and, binary, 0, NB_DTM_A6, K(copy) K(binary), BW_NONE, AC(NONE)) \
    X(LOGICAL_OR, logical_or, binary, 0, NB_DTM_A6, K(copy) K(binary), BW_NONE, AC(NONE)) \
    X(LOGICAL_XOR, logical_xor, binary, 0, NB_DTM_A6, K(copy) K(binary), BW_NONE, AC(NONE)) \
    X(LOGICAL_NOT, logical_not, binary, NB_C, NB_DTM_A6, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_AND, bitwise_and, binary, 0, NB_DTM_INTB, K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_OR, bitwise_or, binary, 0, NB_DTM_INTB, K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_XOR, bitwise_xor, binary, 0, NB_DTM_INTB, K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_NOT, bitwise_not, binary, 0, NB_DTM_INTB, K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_LEFT_SHIFT, bitwise_left_shift, binary, 0, NB_DTM_INT, K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_RIGHT_SHIFT, bitwise_right_shift, binary, 0, NB_DTM_INT, K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_AND_SCALAR, bitwise_and_scalar, binary, 0, NB_DTM_INTB, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_OR_SCALAR, bitwise_or_scalar, binary, 0, NB_DTM_INTB, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_XOR_SCALAR, bitwise_xor_scalar, binary, 0, NB_DTM_INTB, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_LEFT_SHIFT_SCALAR, bitwise_left_shift_scalar, binary, 0, NB_DTM_INTB, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(BITWISE_RIGHT_SHIFT_SCALAR, bitwise_right_shift_scalar, binary, 0, NB_DTM_INTB, K(copy) K(fill) K(binary), BW_NONE, AC(NONE)) \
    X(TO_DTYPE, to_dtype, cast, NB_D2, NB_DTM_A8, K(copy), BW(cast), AC(NONE)) \
    /* reductions, cumulative ops, sorting */ \
    X(SUM, sum, reduce, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H, K(copy) K(reduce), BW(sum), AC(FP32)) \
    X(MEAN, mean, reduce, NB_D2, NB_DTM_F, K(copy) K(unary) K(unary_backward) K(reduce), BW(sum), AC(NONE)) \
    X(MAX, max, reduce, NB_D2, NB_DTM_N, K(copy) K(binary) K(reduce), BW(amax), AC(NONE)) \
    X(MIN, min, reduce, NB_D2, NB_DTM_N, K(copy) K(binary) K(reduce), BW(amax), AC(NONE)) \
    X(AMAX, amax, reduce, NB_D2, NB_DTM_N, K(copy) K(binary) K(reduce), BW(amax), AC(NONE)) \
    X(AMIN, amin, reduce, NB_D2, NB_DTM_N, K(copy) K(binary) K(reduce), BW(amax), AC(NONE)) \
    X(MAX_DIM, max_dim, reduce, NB_D2, NB_DTM_N, K(copy) K(arange) K(binary) K(argmax), BW(max_dim), AC(NONE)) \
    X(MIN_DIM, min_dim, reduce, NB_D2, NB_DTM_N, K(copy) K(arange) K(binary) K(argmin), BW(max_dim), AC(NONE)) \
    X(ARGMAX, argmax, reduce, 0, NB_DTM_N, K(argmax), BW_NONE, AC(NONE)) \
    X(ARGMIN, argmin, reduce, 0, NB_DTM_A6, K(argmin), BW_NONE, AC(NONE)) \
    X(PROD, prod, reduce, NB_D2, NB_DTM_A6, K(copy) K(fill) K(arange) K(binary) K(reduce) K(index_select) K(where) K(scan), BW(prod), AC(NONE)) \
    X(VAR, var, reduce, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(NONE)) \
    X(STD, std, reduce, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(std), AC(NONE)) \
    X(NORM, norm, reduce, NB_D2, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW(norm), AC(NONE)) \
    X(LOGSUMEXP, logsumexp, reduce, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(ALL, all, reduce, NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(reduce), BW_NONE, AC(NONE)) \
    X(ANY, any, reduce, NB_C, NB_DTM_A6, K(copy) K(fill) K(binary) K(reduce), BW_NONE, AC(NONE)) \
    X(CUMSUM, cumsum, scan, NB_D2, NB_DTM_A6, K(scan) K(scan_backward), BW(scan), AC(NONE)) \
    X(CUMPROD, cumprod, scan, NB_D2, NB_DTM_A6, K(scan) K(scan_backward), BW(scan), AC(NONE)) \
    X(CUMMAX, cummax, scan, NB_D2, NB_DTM_A6, K(scan) K(scan_backward), BW(scan), AC(NONE)) \
    X(CUMMIN, cummin, scan, NB_D2, NB_DTM_A6, K(scan) K(scan_backward), BW(scan), AC(NONE)) \
    X(LOGCUMSUMEXP, logcumsumexp, scan, NB_D2, NB_DTM_F, K(scan) K(scan_backward), BW(scan), AC(NONE)) \
    X(SORT, sort, sort, NB_D2, NB_DTM_A6, K(copy) K(fill) K(sort) K(gather) K(scatter), BW(sort), AC(NONE)) \
    X(ARGSORT, argsort, sort, 0, NB_DTM_A6, K(sort), BW_NONE, AC(NONE)) \
    X(SEARCHSORTED, searchsorted, sort, NB_C, NB_DTM_N, K(copy) K(binary) K(reduce) K(gather), BW_NONE, AC(NONE)) \
    X(BUCKETIZE, bucketize, sort, NB_C, NB_DTM_N, K(copy) K(binary) K(reduce), BW_NONE, AC(NONE)) \
    X(HISTC, histc, sort, NB_C | NB_S, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(index_select) K(index_add) K(where), BW_NONE, AC(NONE)) \
    X(TOPK, topk, sort, NB_D2, NB_DTM_A6, K(copy) K(fill) K(sort) K(gather) K(scatter), BW(sort), AC(NONE)) \
    X(KTHVALUE, kthvalue, sort, NB_D2, NB_DTM_A6, K(copy) K(fill) K(binary) K(sort) K(gather) K(scatter), BW(sort), AC(NONE)) \
    /* views and shape ops */ \
    X(RESHAPE, reshape, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW(reshape), AC(NONE)) \
    X(VIEW, view, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW(reshape), AC(NONE)) \
    X(PERMUTE, permute, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW(permute), AC(NONE)) \
    X(TRANSPOSE, transpose, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW_CALLS, AC(NONE)) \
    X(NARROW, narrow, view, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill), BW_CALLS, AC(NONE)) \
    X(SELECT, select, view, NB_D2 | NB_V | NB_C, NB_DTM_A8, K(copy) K(fill), BW_CALLS, AC(NONE)) \
    X(SLICE, slice, view, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill), BW(slice), AC(NONE)) \
    X(EXPAND, expand, view, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(reduce), BW(expand), AC(NONE)) \
    X(UNSQUEEZE, unsqueeze, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW_CALLS, AC(NONE)) \
    X(SQUEEZE, squeeze, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW_CALLS, AC(NONE)) \
    X(FLATTEN, flatten, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW_CALLS, AC(NONE)) \
    X(CONTIGUOUS, contiguous, view, NB_D2, NB_DTM_A8, K(copy), BW(identity), AC(NONE)) \
    X(CLONE, clone, view, NB_D2, NB_DTM_A8, K(copy), BW(identity), AC(NONE)) \
    X(DIAGONAL, diagonal, view, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill), BW(diagonal), AC(NONE)) \
    X(UNFOLD, unfold, view, NB_D2 | NB_V, NB_DTM_A8, K(fill) K(binary), BW(unfold), AC(NONE)) \
    X(MOVEDIM, movedim, view, NB_D2 | NB_V, NB_DTM_A8, K(copy), BW_CALLS, AC(NONE)) \
    X(BROADCAST_TO, broadcast_to, view, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(reduce), BW_CALLS, AC(NONE)) \
    X(DIAG_EMBED, diag_embed, view, NB_D2, NB_DTM_A6, K(copy) K(fill), BW(diag_embed), AC(NONE)) \
    X(FLIP, flip, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(arange) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(ROT90, rot90, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(arange) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(ROLL, roll, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(REPEAT, repeat, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(reduce) K(arange) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(TILE, tile, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(reduce) K(arange) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(PAD, pad, shape, NB_D2, NB_DTM_A6, K(copy) K(fill) K(arange) K(unary) K(unary_backward) K(binary) K(index_select) K(index_add), BW(constant_pad), AC(NONE)) \
    X(TRIL, tril, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(arange) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(TRIU, triu, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(arange) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(MESHGRID, meshgrid, shape, NB_D2 | NB_C | NB_V, NB_DTM_A6, K(copy) K(binary) K(reduce), BW_CALLS, AC(NONE)) \
    /* indexing, joining, gather/scatter */ \
    X(EMBEDDING, embedding, index, NB_D2, NB_DTM_F | NB_DTM_H, K(copy) K(index_select) K(index_add), BW(embedding), AC(NONE)) \
    X(INDEX_SELECT, index_select, index, NB_D2, NB_DTM_A8, K(copy) K(index_select) K(index_add), BW(index_select), AC(NONE)) \
    X(CAT, cat, index, NB_D2, NB_DTM_A8, K(copy) K(binary), BW(cat), AC(NONE)) \
    X(STACK, stack, index, NB_D2 | NB_C, NB_DTM_A8, K(copy) K(binary), BW_CALLS, AC(NONE)) \
    X(SPLIT, split, index, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(CHUNK, chunk, index, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(SPLIT_WITH_SIZES, split_with_sizes, index, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(UNBIND, unbind, index, NB_D2 | NB_V, NB_DTM_A8, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(WHERE, where, index, NB_D2, NB_DTM_A8, K(copy) K(fill) K(reduce) K(where), BW(where), AC(NONE)) \
    X(MASKED_FILL, masked_fill, index, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(INDEX_ADD, index_add, index, NB_D2, NB_DTM_N, K(copy) K(binary) K(unary) K(unary_backward) K(index_select) K(index_add), BW(index_add), AC(NONE)) \
    X(INDEX_COPY, index_copy, index, NB_D2, NB_DTM_A8, K(copy) K(fill) K(index_select) K(index_copy), BW(index_copy), AC(NONE)) \
    X(ONE_HOT, one_hot, index, NB_C | NB_S, NB_DTM_I64, K(copy) K(arange) K(binary) K(unary) K(unary_backward) K(reduce), BW_NONE, AC(NONE)) \
    X(NONZERO, nonzero, index, NB_S, NB_DTM_A6, K(copy) K(binary) K(nonzero), BW_NONE, AC(NONE)) \
    X(MASKED_SELECT, masked_select, index, NB_D2 | NB_S, NB_DTM_A6, K(copy) K(index_select) K(index_add) K(nonzero), BW_CALLS, AC(NONE)) \
    X(GATHER, gather, gather, NB_D2, NB_DTM_A8, K(copy) K(fill) K(gather) K(scatter), BW(gather), AC(NONE)) \
    X(SCATTER, scatter, gather, NB_D2, NB_DTM_A6, K(copy) K(fill) K(gather) K(scatter), BW(scatter), AC(NONE)) \
    X(SCATTER_VALUE, scatter_value, gather, NB_D2, NB_DTM_A6, K(copy) K(fill) K(scatter), BW(scatter), AC(NONE)) \
    X(SCATTER_ADD, scatter_add, gather, NB_D2, NB_DTM_N, K(copy) K(gather) K(scatter), BW(scatter), AC(NONE)) \
    X(SCATTER_REDUCE, scatter_reduce, gather, NB_D2, NB_DTM_N, K(copy) K(fill) K(binary) K(reduce) K(where) K(gather) K(scatter), BW(scatter), AC(NONE)) \
    X(TAKE_ALONG_DIM, take_along_dim, gather, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(gather) K(scatter), BW(gather), AC(NONE)) \
    /* matrix products, softmax, losses */ \
    X(MATMUL, matmul, matmul, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(reduce) K(matmul), BW(matmul), AC(LOWER)) \
    X(LINEAR, linear, matmul, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(reduce) K(matmul), BW(linear), AC(LOWER)) \
    X(BMM, bmm, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(ADDMM, addmm, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(ADDMV, addmv, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(BADDBMM, baddbmm, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(ADDBMM, addbmm, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(GROUPED_MM, grouped_mm, matmul, NB_D2 | NB_C | NB_S | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(reduce) K(matmul), BW_CALLS, AC(LOWER)) \
    X(SOFTMAX, softmax, softmax, NB_D2, NB_DTM_F, K(softmax) K(softmax_backward), BW(softmax), AC(FP32)) \
    X(LOG_SOFTMAX, log_softmax, softmax, NB_D2, NB_DTM_F, K(softmax) K(softmax_backward), BW(softmax), AC(FP32)) \
    X(CROSS_ENTROPY, cross_entropy, loss, NB_D2, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(cross_entropy) K(cross_entropy_backward), BW(ce), AC(FP32)) \
    X(CROSS_ENTROPY_EX, cross_entropy_ex, loss, NB_D2, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(cross_entropy) K(cross_entropy_backward), BW_CALLS, AC(FP32)) \
    X(MSE_LOSS, mse_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(FP32)) \
    X(L1_LOSS, l1_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(FP32)) \
    X(SMOOTH_L1_LOSS, smooth_l1_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(HUBER_LOSS, huber_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(BINARY_CROSS_ENTROPY, binary_cross_entropy, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(BINARY_CROSS_ENTROPY_WITH_LOGITS, binary_cross_entropy_with_logits, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(KL_DIV, kl_div, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(SOFT_MARGIN_LOSS, soft_margin_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(HINGE_EMBEDDING_LOSS, hinge_embedding_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(MARGIN_RANKING_LOSS, margin_ranking_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(POISSON_NLL_LOSS, poisson_nll_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(GAUSSIAN_NLL_LOSS, gaussian_nll_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(MULTILABEL_SOFT_MARGIN_LOSS, multilabel_soft_margin_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(FP32)) \
    X(MULTI_MARGIN_LOSS, multi_margin_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(index_select) K(index_add) K(where) K(gather) K(scatter), BW_CALLS, AC(FP32)) \
    X(MULTILABEL_MARGIN_LOSS, multilabel_margin_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(where) K(scan) K(gather) K(scatter), BW_CALLS, AC(FP32)) \
    X(COSINE_EMBEDDING_LOSS, cosine_embedding_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(TRIPLET_MARGIN_LOSS, triplet_margin_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(TRIPLET_MARGIN_WITH_DISTANCE_LOSS, triplet_margin_with_distance_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(PAIRWISE_DISTANCE, pairwise_distance, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(COSINE_SIMILARITY, cosine_similarity, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(NLL_LOSS, nll_loss, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(index_select) K(where) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    /* CNN */ \
    X(CONV2D, conv2d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW(conv2d), AC(LOWER_EXCEPT_CPU)) \
    X(CONV1D, conv1d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW_CALLS, AC(LOWER_EXCEPT_CPU)) \
    X(CONV_TRANSPOSE2D, conv_transpose2d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(reduce) K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW(conv_t2d), AC(LOWER_EXCEPT_CPU)) \
    X(CONV_TRANSPOSE1D, conv_transpose1d, conv, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(reduce) K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW_CALLS, AC(LOWER_EXCEPT_CPU)) \
    X(CONV3D, conv3d, conv, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW_CALLS, AC(NONE)) \
    X(CONV_TRANSPOSE3D, conv_transpose3d, conv, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(conv2d) K(conv2d_backward_input) K(conv2d_backward_weight), BW_CALLS, AC(NONE)) \
    X(DEFORM_CONV2D, deform_conv2d, conv, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(gather) K(scatter), BW_CALLS, AC(LOWER)) \
    X(MAX_POOL2D, max_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(max_pool2d) K(max_pool2d_backward), BW(max), AC(NONE)) \
    X(MAX_POOL1D, max_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(max_pool2d) K(max_pool2d_backward), BW(max), AC(NONE)) \
    X(AVG_POOL2D, avg_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(avg_pool2d) K(avg_pool2d_backward), BW(avg), AC(NONE)) \
    X(AVG_POOL1D, avg_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(avg_pool2d) K(avg_pool2d_backward), BW(avg), AC(NONE)) \
    X(ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(adaptive_avg_pool2d) K(adaptive_avg_pool2d_backward), BW(adaptive_avg), AC(NONE)) \
    X(ADAPTIVE_AVG_POOL1D, adaptive_avg_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(adaptive_avg_pool2d) K(adaptive_avg_pool2d_backward), BW(adaptive_avg), AC(NONE)) \
    X(ADAPTIVE_MAX_POOL2D, adaptive_max_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H, K(max_pool2d_backward) K(adaptive_max_pool2d), BW(max), AC(NONE)) \
    X(MAX_POOL3D, max_pool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(max_pool2d) K(max_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(AVG_POOL3D, avg_pool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(avg_pool2d) K(avg_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(adaptive_avg_pool2d) K(adaptive_avg_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(BATCH_NORM, batch_norm, batch_norm, NB_D2, NB_DTM_F, K(copy) K(fill) K(batch_norm) K(batch_norm_backward), BW(bn), AC(NONE)) \
    X(DROPOUT, dropout, dropout, NB_D2 | NB_R | NB_LP, NB_DTM_F | NB_DTM_H, K(binary) K(unary) K(random), BW(dropout), AC(NONE)) \
    X(MULTINOMIAL, multinomial, random, NB_C | NB_R | NB_S, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(random) K(scan) K(sort), BW_NONE, AC(NONE)) \
    X(INTERPOLATE, interpolate, upsample, NB_D2, NB_DTM_F, K(upsample2d) K(upsample2d_backward), BW(interpolate), AC(NONE)) \
    /* transformer */ \
    X(GROUP_NORM, group_norm, group_norm, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(batch_norm) K(batch_norm_backward), BW_CALLS, AC(FP32)) \
    X(INSTANCE_NORM, instance_norm, group_norm, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(batch_norm) K(batch_norm_backward), BW_CALLS, AC(NONE)) \
    X(LOCAL_RESPONSE_NORM, local_response_norm, group_norm, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce), BW_CALLS, AC(NONE)) \
    X(NORMALIZE, normalize, group_norm, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(RNN, rnn, rnn, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(NONE)) \
    X(RNN_CELL, rnn_cell, rnn, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul), BW_CALLS, AC(NONE)) \
    X(PACK_PADDED_SEQUENCE, pack_padded_sequence, rnn, NB_D2 | NB_C | NB_S, NB_DTM_A6, K(copy) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(PAD_PACKED_SEQUENCE, pad_packed_sequence, rnn, NB_D2 | NB_C | NB_S, NB_DTM_A6, K(copy) K(fill) K(index_select) K(index_add) K(index_copy), BW_CALLS, AC(NONE)) \
    X(PAD_SEQUENCE, pad_sequence, rnn, NB_D2 | NB_C, NB_DTM_A6, K(copy) K(fill) K(binary), BW_CALLS, AC(NONE)) \
    X(PACK_SEQUENCE, pack_sequence, rnn, NB_D2 | NB_C | NB_S, NB_DTM_A6, K(copy) K(fill) K(binary) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(RNN_PACKED, rnn_packed, rnn, NB_D2 | NB_C | NB_S, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(index_select) K(index_add) K(where) K(index_copy), BW_CALLS, AC(NONE)) \
    X(CELU, celu, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(SOFTSIGN, softsign, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(SOFTSHRINK, softshrink, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(HARDSHRINK, hardshrink, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(TANHSHRINK, tanhshrink, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(THRESHOLD, threshold, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(GLU, glu, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(PRELU, prelu, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(RRELU, rrelu, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(RELU_, relu_, activation, NB_D2 | NB_C, NB_DTM_F | NB_DTM_H, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(LEAKY_RELU_, leaky_relu_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(ELU_, elu_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(SELU_, selu_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(CELU_, celu_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(HARDTANH_, hardtanh_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(THRESHOLD_, threshold_, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(RRELU_, rrelu_, activation, NB_D2 | NB_C | NB_R, NB_DTM_F, K(copy) K(fill) K(binary) K(reduce) K(where), BW_CALLS, AC(NONE)) \
    X(SOFTMIN, softmin, activation, NB_D2 | NB_C, NB_DTM_F, K(copy) K(unary) K(unary_backward) K(softmax) K(softmax_backward), BW_CALLS, AC(NONE)) \
    X(DROPOUT1D, dropout1d, dropout, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(random), BW_CALLS, AC(NONE)) \
    X(DROPOUT2D, dropout2d, dropout, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(random), BW_CALLS, AC(NONE)) \
    X(DROPOUT3D, dropout3d, dropout, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(random), BW_CALLS, AC(NONE)) \
    X(ALPHA_DROPOUT, alpha_dropout, dropout, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(random), BW_CALLS, AC(NONE)) \
    X(FEATURE_ALPHA_DROPOUT, feature_alpha_dropout, dropout, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(random), BW_CALLS, AC(NONE)) \
    X(PIXEL_SHUFFLE, pixel_shuffle, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy), BW_CALLS, AC(NONE)) \
    X(PIXEL_UNSHUFFLE, pixel_unshuffle, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy), BW_CALLS, AC(NONE)) \
    X(LP_POOL1D, lp_pool1d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(avg_pool2d) K(avg_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(LP_POOL2D, lp_pool2d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(avg_pool2d) K(avg_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(BILINEAR, bilinear, matmul, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(reduce) K(matmul), BW_CALLS, AC(FP32)) \
    X(LP_POOL3D, lp_pool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(unary) K(unary_backward) K(avg_pool2d) K(avg_pool2d_backward), BW_CALLS, AC(NONE)) \
    X(ADAPTIVE_MAX_POOL1D, adaptive_max_pool1d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(max_pool2d_backward) K(adaptive_max_pool2d), BW_CALLS, AC(NONE)) \
    X(ADAPTIVE_MAX_POOL3D, adaptive_max_pool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(max_pool2d_backward) K(adaptive_max_pool2d), BW_CALLS, AC(NONE)) \
    X(MAX_UNPOOL1D, max_unpool1d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(MAX_UNPOOL2D, max_unpool2d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(MAX_UNPOOL3D, max_unpool3d, pool, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(FRACTIONAL_MAX_POOL2D, fractional_max_pool2d, pool, NB_D2 | NB_C | NB_S | NB_R, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(argmax) K(random) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(FRACTIONAL_MAX_POOL3D, fractional_max_pool3d, pool, NB_D2 | NB_C | NB_S | NB_R, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(argmax) K(random) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(CHANNEL_SHUFFLE, channel_shuffle, shape, NB_D2 | NB_C, NB_DTM_A6, K(copy), BW_CALLS, AC(NONE)) \
    X(PDIST, pdist, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(index_select) K(index_add) K(where), BW_CALLS, AC(FP32)) \
    X(GUMBEL_SOFTMAX, gumbel_softmax, activation, NB_D2 | NB_R | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(argmax) K(softmax) K(softmax_backward) K(random) K(scatter), BW_CALLS, AC(NONE)) \
    X(EINSUM, einsum, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(reduce) K(matmul), BW_CALLS, AC(NONE)) \
    X(TENSORDOT, tensordot, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(reduce) K(matmul), BW_CALLS, AC(NONE)) \
    X(OUTER, outer, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(reduce), BW_CALLS, AC(NONE)) \
    X(KRON, kron, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(binary) K(reduce), BW_CALLS, AC(NONE)) \
    X(TRACE, trace, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(reduce), BW_CALLS, AC(NONE)) \
    X(CROSS, cross, einsum, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward), BW_CALLS, AC(NONE)) \
    X(CDIST, cdist, loss, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where), BW_CALLS, AC(FP32)) \
    X(IM2COL, im2col, fold, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(COL2IM, col2im, fold, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(index_select) K(index_add), BW_CALLS, AC(NONE)) \
    X(EMBEDDING_BAG, embedding_bag, fold, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(index_select) K(index_add) K(where) K(scan) K(gather) K(scatter), BW_CALLS, AC(NONE)) \
    X(AFFINE_GRID, affine_grid, fold, NB_D2 | NB_C, NB_DTM_F, K(copy) K(reduce) K(matmul), BW_CALLS, AC(NONE)) \
    X(GRID_SAMPLE, grid_sample, fold, NB_D2 | NB_C, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(where) K(gather) K(scatter), BW_CALLS, AC(FP32)) \
    X(CTC_LOSS, ctc_loss, loss, NB_D | NB_C | NB_S, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(where) K(gather) K(scatter), BW_CALLS, AC(FP32)) \
    X(LAYER_NORM, layer_norm, layer_norm, NB_D2, NB_DTM_F | NB_DTM_H, K(copy) K(layer_norm) K(layer_norm_backward), BW(layer_norm), AC(FP32)) \
    X(SCALED_DOT_PRODUCT_ATTENTION, scaled_dot_product_attention, attention, NB_D2 | NB_R | NB_LP, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(where) K(attention) K(attention_backward), BW(sdpa), AC(LOWER)) \
    /* linear algebra */ \
    X(LINALG_SOLVE, linalg_solve, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_solve), BW(solve), AC(NONE)) \
    X(LINALG_INV, linalg_inv, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_solve), BW_CALLS, AC(NONE)) \
    X(LINALG_DET, linalg_det, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(linalg_solve) K(linalg_det), BW(det), AC(NONE)) \
    X(LINALG_SLOGDET, linalg_slogdet, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(linalg_solve) K(linalg_det), BW(slogdet), AC(NONE)) \
    X(LINALG_CHOLESKY, linalg_cholesky, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_solve) K(linalg_cholesky), BW(cholesky), AC(NONE)) \
    X(LINALG_QR, linalg_qr, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_solve) K(linalg_qr), BW(qr), AC(NONE)) \
    X(LINALG_EIGH, linalg_eigh, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_eigh), BW(eigh), AC(NONE)) \
    X(LINALG_SVD, linalg_svd, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_svd), BW(svd), AC(NONE)) \
    X(LINALG_SVDVALS, linalg_svdvals, linalg, NB_D, NB_DTM_F, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(linalg_svd), BW_CALLS, AC(NONE)) \
    X(LINALG_LSTSQ, linalg_lstsq, linalg, NB_D, NB_DTM_F, K(copy) K(binary) K(reduce) K(matmul) K(linalg_solve) K(linalg_lstsq), BW(lstsq), AC(NONE)) \
    /* decoders */ \
    X(RMS_NORM, rms_norm, rms_norm, NB_D2, NB_DTM_F | NB_DTM_H, K(copy) K(rms_norm) K(rms_norm_backward), BW(rms_norm), AC(FP32)) \
    X(ADD_RMS_NORM, add_rms_norm, rms_norm, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(reduce) K(rms_norm) K(rms_norm_backward), BW_CALLS, AC(FP32)) \
    X(APPLY_ROTARY_POS_EMB, apply_rotary_pos_emb, rope, NB_D2, NB_DTM_F | NB_DTM_H, K(copy) K(binary) K(reduce) K(rope), BW(rope), AC(NONE)) \
    /* quantization */ \
    X(FAKE_QUANTIZE_PER_TENSOR_AFFINE, fake_quantize_per_tensor_affine, quantize, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(unary) K(reduce) K(fake_quantize) K(fake_quantize_backward), BW(fake_quantize), AC(NONE)) \
    X(FAKE_QUANTIZE_PER_CHANNEL_AFFINE, fake_quantize_per_channel_affine, quantize, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(unary) K(unary_backward) K(reduce) K(fake_quantize) K(fake_quantize_backward), BW(fake_quantize), AC(NONE)) \
    X(FAKE_QUANTIZE_LEARNABLE_PER_TENSOR_AFFINE, fake_quantize_learnable_per_tensor_affine, quantize, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(fake_quantize) K(fake_quantize_backward), BW(fake_quantize), AC(NONE)) \
    X(FAKE_QUANTIZE_LEARNABLE_PER_CHANNEL_AFFINE, fake_quantize_learnable_per_channel_affine, quantize, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(fake_quantize) K(fake_quantize_backward), BW(fake_quantize), AC(NONE)) \
    X(BITNET_WEIGHT_QUANT, bitnet_weight_quant, quantize, NB_D | NB_C, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce), BW(straight_through), AC(NONE)) \
    X(BITNET_ACTIVATION_QUANT, bitnet_activation_quant, quantize, NB_D | NB_C, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce), BW(straight_through), AC(NONE)) \
    X(BITNET_PACK, bitnet_pack, quantize, NB_C, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce), BW_NONE, AC(NONE)) \
    X(BITNET_LINEAR, bitnet_linear, quantize, 0, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(bitnet_linear), BW_NONE, AC(NONE)) \
    X(QUANTIZE_PER_TENSOR, quantize_per_tensor, quantize, 0, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(fake_quantize), BW_NONE, AC(NONE)) \
    X(QUANTIZE_PER_CHANNEL, quantize_per_channel, quantize, 0, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(unary) K(unary_backward) K(fake_quantize), BW_NONE, AC(NONE)) \
    X(DEQUANTIZE_PER_TENSOR, dequantize_per_tensor, quantize, NB_C, NB_DTM_Q, K(copy) K(fill) K(unary) K(unary_backward), BW_NONE, AC(NONE)) \
    X(DEQUANTIZE_PER_CHANNEL, dequantize_per_channel, quantize, NB_C, NB_DTM_Q, K(copy) K(fill) K(arange) K(binary) K(unary) K(unary_backward), BW_NONE, AC(NONE)) \
    X(INT8_WEIGHT_QUANTIZE, int8_weight_quantize, quantize, NB_C, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(fake_quantize), BW_NONE, AC(NONE)) \
    X(LINEAR_INT8, linear_int8, quantize, NB_D, NB_DTM_F | NB_DTM_H, K(copy) K(fill) K(binary) K(unary) K(unary_backward) K(reduce) K(matmul) K(fake_quantize), BW_CALLS, AC(NONE))
/* clang-format on */

/* The ops' ids, NB_OP_<ID> in table order (the tape records them), and
 * NB_OP_COUNT, the number of ops. */
typedef enum nb_op_id {
/* NB_OP_TABLE's X for this enum: the enumerator NB_OP_<id> of each row. */
#define NB_OP_ENUM(id, name, family, flags, dtypes, slots, bw, ac) NB_OP_##id,
    NB_OP_TABLE(NB_OP_ENUM)
#undef NB_OP_ENUM
    NB_OP_COUNT
} nb_op_id;

/* What autocast does to an op's inputs inside a region for their device
 * type (torch.autocast's lists; float64 inputs are never cast). */
typedef enum nb_autocast_policy {
    NB_AUTOCAST_NONE,  /* nothing: the op runs in its inputs' dtypes */
    NB_AUTOCAST_LOWER, /* float32 inputs cast to the region's dtype */
    NB_AUTOCAST_FP32,  /* bfloat16/float16 inputs cast to float32 */
    /* LOWER, but FP32 for CPU inputs: the CPU's 16-bit convolutions run on
     * float32 copies, so casting down would only add work */
    NB_AUTOCAST_LOWER_EXCEPT_CPU
} nb_autocast_policy;

/* One row of the table. */
typedef struct nb_op_info {
    const char *name;   /* "add" (the function is nb_add) */
    const char *family; /* "binary" */
    unsigned flags;     /* NB_OPF_* */
    unsigned dtypes;    /* NB_DTM_* mask of accepted input dtypes */
    nb_autocast_policy autocast; /* NB_AUTOCAST_*: what autocast does to its inputs (the ac column) */
} nb_op_info;

/* The row of op, or NULL for an id outside the table. */
const nb_op_info *nb_op_get(nb_op_id op);
/* The op's name ("add"), or "invalid op". */
const char *nb_op_name(nb_op_id op);
/* The id of the op named name ("add"), or NB_OP_COUNT. */
nb_op_id nb_op_find(const char *name);

/* Whether the backend of dev runs op on inputs of dtype dt (ggml's
 * supports_op). False for an op or dtype outside the table's row, a device
 * without a backend, or a backend without the kernel. */
bool nb_backend_supports(nb_device dev, nb_op_id op, nb_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
