/* nb_op_table.h - the one list of nabla's ops. Every public op of nb_ops.h,
 * nb_linalg.h and nb_to_dtype has one row:
 *
 *   X(ID, name, family, flags, dtypes)
 *
 *   ID      the op's id, NB_OP_<ID> in enum nb_op_id; the tape records it
 *   name    the C function is nb_<name>; also the op's name in messages
 *   family  the file family: autograd/ops_<family>.c (forward and backward
 *           rule), backend/cpu/<family>.c (kernel), tests/test_ops_<family>.c
 *   flags   NB_OPF_* below
 *   dtypes  the input dtypes the op accepts on some backend (NB_DTM_*
 *           masks; integer inputs of float math ops promote as PyTorch's);
 *           a backend answers for itself through nb_backend_supports()
 *
 * autograd/OPS.md's main table is generated from this list
 * (build/tests/nabla-ops-md) and tests/test_op_table.c fails when the two
 * differ or when a function declared in the headers has no row here. The
 * op test harness (tests/test_op_harness.c) fails for a row without cases.
 * The lists of which ops autocast runs in lower precision sit beside this
 * table in OPS.md. Adding an op: a row here, its function, its cases in the
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
#define NB_DTM(dt) (1u << (dt))
#define NB_DTM_F (NB_DTM(NB_F32) | NB_DTM(NB_F64))                      /* float math */
#define NB_DTM_INT (NB_DTM(NB_I32) | NB_DTM(NB_I64) | NB_DTM(NB_U8))   /* integers */
#define NB_DTM_INTB (NB_DTM_INT | NB_DTM(NB_BOOL))                     /* integers, bool */
#define NB_DTM_N (NB_DTM_F | NB_DTM_INT)                               /* numbers */
#define NB_DTM_A6 (NB_DTM_N | NB_DTM(NB_BOOL))                         /* the compute dtypes */
#define NB_DTM_A8 (NB_DTM_A6 | NB_DTM(NB_F16) | NB_DTM(NB_BF16))      /* every dtype */
#define NB_DTM_I64 NB_DTM(NB_I64)
#define NB_DTM_H (NB_DTM(NB_F16) | NB_DTM(NB_BF16))                   /* the 16-bit floats */

#define NB_D NB_OPF_DIFF
#define NB_C NB_OPF_COMPOSITE
#define NB_V NB_OPF_VIEW
#define NB_S NB_OPF_SYNC
#define NB_R NB_OPF_RANDOM
#define NB_LP NB_OPF_LP
#define NB_D2 (NB_OPF_DIFF | NB_OPF_DIFF2)

/* clang-format off */
#define NB_OP_TABLE(X) \
    /* unary math and activations */ \
    X(NEG, neg, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H) \
    X(EXP, exp, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(LOG, log, unary, NB_D2, NB_DTM_A6) \
    X(SQRT, sqrt, unary, NB_D2, NB_DTM_A6) \
    X(RELU, relu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(SIGMOID, sigmoid, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(TANH, tanh, unary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(ADD_SCALAR, add_scalar, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H) \
    X(MUL_SCALAR, mul_scalar, unary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H) \
    X(POW_SCALAR, pow_scalar, unary, NB_D2, NB_DTM_F) \
    X(ABS, abs, unary, NB_D2, NB_DTM_N) \
    X(SIGN, sign, unary, NB_D2, NB_DTM_N) \
    X(FLOOR, floor, unary, NB_D2, NB_DTM_N) \
    X(CEIL, ceil, unary, NB_D2, NB_DTM_N) \
    X(TRUNC, trunc, unary, NB_D2, NB_DTM_N) \
    X(ROUND, round, unary, NB_D2, NB_DTM_N) \
    X(ROUND_DECIMALS, round_decimals, unary, NB_D2, NB_DTM_N) \
    X(RECIPROCAL, reciprocal, unary, NB_D2, NB_DTM_A6) \
    X(RSQRT, rsqrt, unary, NB_D2, NB_DTM_A6) \
    X(LOG1P, log1p, unary, NB_D2, NB_DTM_A6) \
    X(EXPM1, expm1, unary, NB_D2, NB_DTM_A6) \
    X(LOG2, log2, unary, NB_D2, NB_DTM_A6) \
    X(LOG10, log10, unary, NB_D2, NB_DTM_A6) \
    X(SIN, sin, unary, NB_D2, NB_DTM_A6) \
    X(COS, cos, unary, NB_D2, NB_DTM_A6) \
    X(TAN, tan, unary, NB_D2, NB_DTM_A6) \
    X(ASIN, asin, unary, NB_D2, NB_DTM_A6) \
    X(ACOS, acos, unary, NB_D2, NB_DTM_A6) \
    X(ATAN, atan, unary, NB_D2, NB_DTM_A6) \
    X(SINH, sinh, unary, NB_D2, NB_DTM_A6) \
    X(COSH, cosh, unary, NB_D2, NB_DTM_A6) \
    X(ASINH, asinh, unary, NB_D2, NB_DTM_A6) \
    X(ACOSH, acosh, unary, NB_D2, NB_DTM_A6) \
    X(ATANH, atanh, unary, NB_D2, NB_DTM_A6) \
    X(ERF, erf, unary, NB_D2, NB_DTM_A6) \
    X(ERFC, erfc, unary, NB_D2, NB_DTM_A6) \
    X(LEAKY_RELU, leaky_relu, unary, NB_D2, NB_DTM_F) \
    X(ELU, elu, unary, NB_D2, NB_DTM_F) \
    X(SELU, selu, unary, NB_D2, NB_DTM_F) \
    X(SILU, silu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(MISH, mish, unary, NB_D2, NB_DTM_F) \
    X(SOFTPLUS, softplus, unary, NB_D2, NB_DTM_F) \
    X(HARDTANH, hardtanh, unary, NB_D2 | NB_C, NB_DTM_F) \
    X(RELU6, relu6, unary, NB_D2 | NB_C, NB_DTM_F) \
    X(HARDSIGMOID, hardsigmoid, unary, NB_D2, NB_DTM_F) \
    X(HARDSWISH, hardswish, unary, NB_D2, NB_DTM_F) \
    X(LOGSIGMOID, logsigmoid, unary, NB_D2, NB_DTM_F) \
    X(GELU, gelu, unary, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    /* arithmetic, comparisons, logic */ \
    X(ADD, add, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(SUB, sub, binary, NB_D2 | NB_LP, NB_DTM_N | NB_DTM_H) \
    X(MUL, mul, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(DIV, div, binary, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(POW, pow, binary, NB_D2, NB_DTM_N) \
    X(DIV_MODE, div_mode, binary, NB_D2, NB_DTM_N) \
    X(FLOOR_DIVIDE, floor_divide, binary, NB_D2, NB_DTM_N) \
    X(REMAINDER, remainder, binary, NB_D2, NB_DTM_N) \
    X(REMAINDER_SCALAR, remainder_scalar, binary, NB_D2, NB_DTM_N) \
    X(FMOD, fmod, binary, NB_D2, NB_DTM_N) \
    X(FMOD_SCALAR, fmod_scalar, binary, NB_D2, NB_DTM_N) \
    X(ATAN2, atan2, binary, NB_D2, NB_DTM_N) \
    X(MAXIMUM, maximum, binary, NB_D2, NB_DTM_A6) \
    X(MINIMUM, minimum, binary, NB_D2, NB_DTM_A6) \
    X(LERP, lerp, binary, NB_D2 | NB_C, NB_DTM_F) \
    X(LERP_SCALAR, lerp_scalar, binary, NB_D2 | NB_C, NB_DTM_F) \
    X(CLAMP, clamp, binary, NB_D2, NB_DTM_N) \
    X(CLAMP_SCALAR, clamp_scalar, binary, NB_D2 | NB_C, NB_DTM_N) \
    X(EQ, eq, binary, 0, NB_DTM_A6) \
    X(NE, ne, binary, 0, NB_DTM_A6) \
    X(GT, gt, binary, 0, NB_DTM_A6) \
    X(GE, ge, binary, 0, NB_DTM_A6) \
    X(LT, lt, binary, 0, NB_DTM_A6) \
    X(LE, le, binary, 0, NB_DTM_A6) \
    X(EQ_SCALAR, eq_scalar, binary, 0, NB_DTM_A6) \
    X(NE_SCALAR, ne_scalar, binary, 0, NB_DTM_A6) \
    X(GT_SCALAR, gt_scalar, binary, 0, NB_DTM_A6) \
    X(GE_SCALAR, ge_scalar, binary, 0, NB_DTM_A6) \
    X(LT_SCALAR, lt_scalar, binary, 0, NB_DTM_A6) \
    X(LE_SCALAR, le_scalar, binary, 0, NB_DTM_A6) \
    X(ISCLOSE, isclose, binary, NB_C, NB_DTM_A6) \
    X(ALLCLOSE, allclose, binary, NB_C | NB_S, NB_DTM_A6) \
    X(ISNAN, isnan, binary, NB_C, NB_DTM_A8) \
    X(ISINF, isinf, binary, NB_C, NB_DTM_A8) \
    X(ISFINITE, isfinite, binary, NB_C, NB_DTM_A8) \
    X(LOGICAL_AND, logical_and, binary, 0, NB_DTM_A6) \
    X(LOGICAL_OR, logical_or, binary, 0, NB_DTM_A6) \
    X(LOGICAL_XOR, logical_xor, binary, 0, NB_DTM_A6) \
    X(LOGICAL_NOT, logical_not, binary, NB_C, NB_DTM_A6) \
    X(BITWISE_AND, bitwise_and, binary, 0, NB_DTM_INTB) \
    X(BITWISE_OR, bitwise_or, binary, 0, NB_DTM_INTB) \
    X(BITWISE_XOR, bitwise_xor, binary, 0, NB_DTM_INTB) \
    X(BITWISE_NOT, bitwise_not, binary, 0, NB_DTM_INTB) \
    X(BITWISE_LEFT_SHIFT, bitwise_left_shift, binary, 0, NB_DTM_INT) \
    X(BITWISE_RIGHT_SHIFT, bitwise_right_shift, binary, 0, NB_DTM_INT) \
    X(BITWISE_AND_SCALAR, bitwise_and_scalar, binary, 0, NB_DTM_INTB) \
    X(BITWISE_OR_SCALAR, bitwise_or_scalar, binary, 0, NB_DTM_INTB) \
    X(BITWISE_XOR_SCALAR, bitwise_xor_scalar, binary, 0, NB_DTM_INTB) \
    X(BITWISE_LEFT_SHIFT_SCALAR, bitwise_left_shift_scalar, binary, 0, NB_DTM_INTB) \
    X(BITWISE_RIGHT_SHIFT_SCALAR, bitwise_right_shift_scalar, binary, 0, NB_DTM_INTB) \
    X(TO_DTYPE, to_dtype, cast, NB_D2, NB_DTM_A8) \
    /* reductions, cumulative ops, sorting */ \
    X(SUM, sum, reduce, NB_D2 | NB_LP, NB_DTM_A6 | NB_DTM_H) \
    X(MEAN, mean, reduce, NB_D2, NB_DTM_F) \
    X(MAX, max, reduce, NB_D2, NB_DTM_N) \
    X(MIN, min, reduce, NB_D2, NB_DTM_N) \
    X(AMAX, amax, reduce, NB_D2, NB_DTM_N) \
    X(AMIN, amin, reduce, NB_D2, NB_DTM_N) \
    X(MAX_DIM, max_dim, reduce, NB_D2, NB_DTM_N) \
    X(MIN_DIM, min_dim, reduce, NB_D2, NB_DTM_N) \
    X(ARGMAX, argmax, reduce, 0, NB_DTM_N) \
    X(ARGMIN, argmin, reduce, 0, NB_DTM_A6) \
    X(PROD, prod, reduce, NB_D2, NB_DTM_A6) \
    X(VAR, var, reduce, NB_D2 | NB_C, NB_DTM_F) \
    X(STD, std, reduce, NB_D2 | NB_C, NB_DTM_F) \
    X(NORM, norm, reduce, NB_D2, NB_DTM_F) \
    X(LOGSUMEXP, logsumexp, reduce, NB_D2 | NB_C, NB_DTM_F) \
    X(ALL, all, reduce, NB_C, NB_DTM_A6) \
    X(ANY, any, reduce, NB_C, NB_DTM_A6) \
    X(CUMSUM, cumsum, scan, NB_D2, NB_DTM_A6) \
    X(CUMPROD, cumprod, scan, NB_D2, NB_DTM_A6) \
    X(CUMMAX, cummax, scan, NB_D2, NB_DTM_A6) \
    X(CUMMIN, cummin, scan, NB_D2, NB_DTM_A6) \
    X(LOGCUMSUMEXP, logcumsumexp, scan, NB_D2, NB_DTM_F) \
    X(SORT, sort, sort, NB_D2, NB_DTM_A6) \
    X(ARGSORT, argsort, sort, 0, NB_DTM_A6) \
    X(TOPK, topk, sort, NB_D2, NB_DTM_A6) \
    X(KTHVALUE, kthvalue, sort, NB_D2, NB_DTM_A6) \
    /* views and shape ops */ \
    X(RESHAPE, reshape, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(VIEW, view, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(PERMUTE, permute, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(TRANSPOSE, transpose, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(NARROW, narrow, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(SLICE, slice, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(EXPAND, expand, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(UNSQUEEZE, unsqueeze, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(SQUEEZE, squeeze, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(FLATTEN, flatten, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(CONTIGUOUS, contiguous, view, NB_D2, NB_DTM_A8) \
    X(DIAGONAL, diagonal, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(UNFOLD, unfold, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(MOVEDIM, movedim, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(BROADCAST_TO, broadcast_to, view, NB_D2 | NB_V, NB_DTM_A8) \
    X(DIAG_EMBED, diag_embed, view, NB_D2, NB_DTM_A6) \
    X(FLIP, flip, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(ROLL, roll, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(REPEAT, repeat, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(TILE, tile, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(PAD, pad, shape, NB_D2, NB_DTM_A6) \
    X(TRIL, tril, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(TRIU, triu, shape, NB_D2 | NB_C, NB_DTM_A6) \
    X(MESHGRID, meshgrid, shape, NB_D2 | NB_C | NB_V, NB_DTM_A6) \
    /* indexing, joining, gather/scatter */ \
    X(EMBEDDING, embedding, index, NB_D2, NB_DTM_F) \
    X(INDEX_SELECT, index_select, index, NB_D2, NB_DTM_A8) \
    X(CAT, cat, index, NB_D2, NB_DTM_A8) \
    X(STACK, stack, index, NB_D2 | NB_C, NB_DTM_A8) \
    X(SPLIT, split, index, NB_D2 | NB_V, NB_DTM_A8) \
    X(CHUNK, chunk, index, NB_D2 | NB_V, NB_DTM_A8) \
    X(WHERE, where, index, NB_D2, NB_DTM_A8) \
    X(MASKED_FILL, masked_fill, index, NB_D2 | NB_C, NB_DTM_A6) \
    X(INDEX_ADD, index_add, index, NB_D2, NB_DTM_N) \
    X(INDEX_COPY, index_copy, index, NB_D2, NB_DTM_A6) \
    X(ONE_HOT, one_hot, index, NB_C | NB_S, NB_DTM_I64) \
    X(NONZERO, nonzero, index, NB_S, NB_DTM_A6) \
    X(MASKED_SELECT, masked_select, index, NB_D2 | NB_S, NB_DTM_A6) \
    X(GATHER, gather, gather, NB_D2, NB_DTM_A8) \
    X(SCATTER, scatter, gather, NB_D2, NB_DTM_A6) \
    X(SCATTER_VALUE, scatter_value, gather, NB_D2, NB_DTM_A6) \
    X(SCATTER_ADD, scatter_add, gather, NB_D2, NB_DTM_N) \
    X(SCATTER_REDUCE, scatter_reduce, gather, NB_D2, NB_DTM_N) \
    X(TAKE_ALONG_DIM, take_along_dim, gather, NB_D2 | NB_C, NB_DTM_A6) \
    /* matrix products, softmax, losses */ \
    X(MATMUL, matmul, matmul, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(LINEAR, linear, matmul, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(BMM, bmm, matmul, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(SOFTMAX, softmax, softmax, NB_D2, NB_DTM_F) \
    X(LOG_SOFTMAX, log_softmax, softmax, NB_D2, NB_DTM_F) \
    X(CROSS_ENTROPY, cross_entropy, loss, NB_D2, NB_DTM_F) \
    X(CROSS_ENTROPY_EX, cross_entropy_ex, loss, NB_D2, NB_DTM_F) \
    X(MSE_LOSS, mse_loss, loss, NB_D2 | NB_C, NB_DTM_F) \
    X(NLL_LOSS, nll_loss, loss, NB_D2 | NB_C, NB_DTM_F) \
    /* CNN */ \
    X(CONV2D, conv2d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(CONV1D, conv1d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(CONV_TRANSPOSE2D, conv_transpose2d, conv, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(CONV_TRANSPOSE1D, conv_transpose1d, conv, NB_D2 | NB_C | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(CONV3D, conv3d, conv, NB_D2 | NB_C, NB_DTM_F) \
    X(CONV_TRANSPOSE3D, conv_transpose3d, conv, NB_D2 | NB_C, NB_DTM_F) \
    X(DEFORM_CONV2D, deform_conv2d, conv, NB_D2 | NB_C, NB_DTM_F) \
    X(MAX_POOL2D, max_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(MAX_POOL1D, max_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(AVG_POOL2D, avg_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(AVG_POOL1D, avg_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(ADAPTIVE_AVG_POOL1D, adaptive_avg_pool1d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(ADAPTIVE_MAX_POOL2D, adaptive_max_pool2d, pool, NB_D2 | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(MAX_POOL3D, max_pool3d, pool, NB_D2 | NB_C, NB_DTM_F) \
    X(AVG_POOL3D, avg_pool3d, pool, NB_D2 | NB_C, NB_DTM_F) \
    X(ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d, pool, NB_D2 | NB_C, NB_DTM_F) \
    X(BATCH_NORM, batch_norm, batch_norm, NB_D2, NB_DTM_F) \
    X(DROPOUT, dropout, dropout, NB_D2 | NB_R | NB_LP, NB_DTM_F | NB_DTM_H) \
    X(MULTINOMIAL, multinomial, random, NB_C | NB_R | NB_S, NB_DTM_F) \
    X(INTERPOLATE, interpolate, upsample, NB_D2, NB_DTM_F) \
    /* transformer */ \
    X(LAYER_NORM, layer_norm, layer_norm, NB_D2, NB_DTM_F) \
    X(SCALED_DOT_PRODUCT_ATTENTION, scaled_dot_product_attention, attention, NB_D2 | NB_R | NB_LP, NB_DTM_F | NB_DTM_H) \
    /* linear algebra */ \
    X(LINALG_SOLVE, linalg_solve, linalg, NB_D, NB_DTM_F) \
    X(LINALG_INV, linalg_inv, linalg, NB_D, NB_DTM_F) \
    X(LINALG_DET, linalg_det, linalg, NB_D, NB_DTM_F) \
    X(LINALG_SLOGDET, linalg_slogdet, linalg, NB_D, NB_DTM_F) \
    X(LINALG_CHOLESKY, linalg_cholesky, linalg, NB_D, NB_DTM_F) \
    X(LINALG_QR, linalg_qr, linalg, NB_D, NB_DTM_F) \
    X(LINALG_EIGH, linalg_eigh, linalg, NB_D, NB_DTM_F) \
    X(LINALG_SVD, linalg_svd, linalg, NB_D, NB_DTM_F) \
    X(LINALG_SVDVALS, linalg_svdvals, linalg, NB_D, NB_DTM_F) \
    X(LINALG_LSTSQ, linalg_lstsq, linalg, NB_D, NB_DTM_F) \
    /* decoders */ \
    X(RMS_NORM, rms_norm, rms_norm, NB_D2, NB_DTM_F) \
    X(APPLY_ROTARY_POS_EMB, apply_rotary_pos_emb, rope, NB_D2, NB_DTM_F)
/* clang-format on */

typedef enum nb_op_id {
#define NB_OP_ENUM(id, name, family, flags, dtypes) NB_OP_##id,
    NB_OP_TABLE(NB_OP_ENUM)
#undef NB_OP_ENUM
    NB_OP_COUNT
} nb_op_id;

/* One row of the table. */
typedef struct nb_op_info {
    const char *name;   /* "add" (the function is nb_add) */
    const char *family; /* "binary" */
    unsigned flags;     /* NB_OPF_* */
    unsigned dtypes;    /* NB_DTM_* mask of accepted input dtypes */
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
