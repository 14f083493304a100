/* binary.c - CPU binary kernels: out = a OP b for arithmetic, maximum/
 * minimum, comparisons, rounding divisions, remainder/fmod, atan2, bitwise
 * ops and shifts. Each (op, dtype) pair is one inner loop (binary.t.h,
 * included once per dtype), with all-contiguous, scalar-broadcast and
 * generic byte-strided branches; the strided iterator (iter.h) drives it
 * across threads. Formulas are nb_scalar_math.h's, the ones CUDA runs
 * (PyTorch's BinaryOpsKernel.cpp and c10/util/generic_math.h):
 * maximum/minimum propagate NaN, floor division of floats goes through
 * fmod, shifts out of range saturate.
 * Signed integer arithmetic wraps (through the unsigned type); integer
 * division by zero sets a flag instead of trapping (SIGFPE), and the kernel
 * then returns an error. */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "cpu_common.h"
#include "half16.h"
#include "iter.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "threadpool.h"

/* ---- the loops: binary.t.h once per dtype (NB_BIN_INT: 0 floats, 1
 * integers, -1 bool) ---- */

#define T float
#define S f32
#define NB_BIN_INT 0
#include "binary.t.h"
#define T double
#define S f64
#define NB_BIN_INT 0
#include "binary.t.h"
#define T int32_t
#define S i32
#define NB_BIN_INT 1
#include "binary.t.h"
#define T int64_t
#define S i64
#define NB_BIN_INT 1
#include "binary.t.h"
#define T uint8_t
#define S u8
#define NB_BIN_INT 1
#include "binary.t.h"
#define T int8_t
#define S i8
#define NB_BIN_INT 1
#include "binary.t.h"
#define T int16_t
#define S i16
#define NB_BIN_INT 1
#include "binary.t.h"
#define T bool
#define S b8
#define NB_BIN_INT -1
#include "binary.t.h"

#define FL(OP) [NB_F32] = OP##_f32, [NB_F64] = OP##_f64
#define IN(OP) [NB_I32] = OP##_i32, [NB_I64] = OP##_i64, [NB_U8] = OP##_u8, [NB_I8] = OP##_i8, [NB_I16] = OP##_i16
static const nb_cpu_loop_fn bin_loops[NB_BINARY_OP_COUNT][NB_DTYPE_COUNT] = {
    [NB_BINARY_ADD] = {FL(add), IN(add), [NB_BOOL] = add_b8},
    [NB_BINARY_SUB] = {FL(sub), IN(sub)},
    [NB_BINARY_MUL] = {FL(mul), IN(mul), [NB_BOOL] = mul_b8},
    [NB_BINARY_DIV] = {FL(div)},
    [NB_BINARY_POW] = {FL(pow), IN(pow)},
    [NB_BINARY_MAXIMUM] = {FL(max), IN(max), [NB_BOOL] = add_b8},
    [NB_BINARY_MINIMUM] = {FL(min), IN(min), [NB_BOOL] = mul_b8},
    [NB_BINARY_EQ] = {FL(eq), IN(eq), [NB_BOOL] = eq_b8},
    [NB_BINARY_NE] = {FL(ne), IN(ne), [NB_BOOL] = ne_b8},
    [NB_BINARY_GT] = {FL(gt), IN(gt), [NB_BOOL] = gt_b8},
    [NB_BINARY_GE] = {FL(ge), IN(ge), [NB_BOOL] = ge_b8},
    [NB_BINARY_LT] = {FL(lt), IN(lt), [NB_BOOL] = lt_b8},
    [NB_BINARY_LE] = {FL(le), IN(le), [NB_BOOL] = le_b8},
    [NB_BINARY_REMAINDER] = {FL(rem), IN(rem)},
    [NB_BINARY_FMOD] = {FL(fmod), IN(fmod)},
    [NB_BINARY_ATAN2] = {FL(atan2)},
    [NB_BINARY_DIV_TRUNC] = {FL(dtr), IN(dtr)},
    [NB_BINARY_DIV_FLOOR] = {FL(dfl), IN(dfl)},
    [NB_BINARY_BITWISE_AND] = {IN(and), [NB_BOOL] = and_b8},
    [NB_BINARY_BITWISE_OR] = {IN(or), [NB_BOOL] = or_b8},
    [NB_BINARY_BITWISE_XOR] = {IN(xor), [NB_BOOL] = xor_b8},
    [NB_BINARY_LSHIFT] = {IN(shl)},
    [NB_BINARY_RSHIFT] = {IN(shr)},
};

/* Integer ops whose loops check for a zero divisor. */
static bool is_int_division(nb_binary_op op, nb_dtype dt) {
    return !nb_dtype_is_float(dt) && op >= NB_BINARY_REMAINDER && op <= NB_BINARY_DIV_FLOOR &&
           op != NB_BINARY_ATAN2;
}

/* op, shapes and dtypes checked: backend/check/binary.c. */
nb_status nb_cpu_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                        const nb_kview *b) {
    (void)be;
    char b1[NB_SHAPE_BUF];
    const char *name = nb_binary_name(op);
    const bool h16 = nb_dtype_is_16bit(a->dtype); /* float32 loops over 16-bit chunks (iter16.c) */
    nb_cpu_loop_fn fn = bin_loops[op][h16 ? NB_F32 : a->dtype];
    if (!fn) /* dtypes the op does not take: for callers of the ISA tables (tests), which bypass the check */
        return nb_set_error(NB_ERR_DTYPE, "%s: not supported for %s on the CPU", name,
                            nb_dtype_name(a->dtype));
    nb_cpu_iter it;
    const nb_kview *ops[3] = {out, a, b};
    nb_cpu_iter_init(&it, 3, ops);
    atomic_int zero = 0;
    /* pow, atan2 and the float remainders call libm per element: smaller tasks */
    bool heavy = op == NB_BINARY_POW || op == NB_BINARY_ATAN2 || op == NB_BINARY_FMOD || op == NB_BINARY_REMAINDER;
    const int64_t grain = heavy ? NB_CPU_GRAIN : NB_CPU_GRAIN_LIGHT;
    if (h16) nb_cpu_iter_run16(&it, grain, fn, &zero, (const nb_dtype[]){out->dtype, a->dtype, b->dtype});
    else nb_cpu_iter_run(&it, grain, fn, &zero);
    if (is_int_division(op, a->dtype) && atomic_load(&zero))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: integer division by zero (divisor %s)", name,
                            nb_view_str(b, b1, sizeof b1));
    return NB_OK;
}
