/* unary.c - CPU unary and unary-backward kernels (binary ones are in
 * binary.c): the slot entry points and the integer loops. The float32 and
 * float64 loops are unary_math.c's, from the formulas of nb_scalar_math.h;
 * bfloat16/float16 run the float32 loops chunk by chunk (iter16.c). A loop has branches for the
 * all-contiguous case (a plain indexed loop the compiler vectorises) and a
 * generic byte-strided one; the strided iterator (iter.h) drives it across
 * threads. */
#include <stdbool.h>

#include "cpu_common.h"
#include "half16.h"
#include "iter.h"
#include "nb_impl.h"
#include "nb_scalar_math.h"
#include "threadpool.h"
#include "unary_loops.h"

/* ---- integers: arithmetic wraps through the unsigned type; abs wraps at
 * the minimum (as PyTorch); the rounding ops are the identity ---- */

/* neg_, adds_, muls_, abs_, sign_ and ident_ for each integer dtype */
#define NB_UN_INT 1
#define T int32_t
#define S i32
#include "unary.t.h"
#define T int64_t
#define S i64
#include "unary.t.h"
#define T uint8_t
#define S u8
#include "unary.t.h"
#define T int8_t
#define S i8
#include "unary.t.h"
#define T int16_t
#define S i16
#include "unary.t.h"
#undef NB_UN_INT

#define INTS(OP) {[NB_I32] = OP##_i32, [NB_I64] = OP##_i64, [NB_U8] = OP##_u8, [NB_I8] = OP##_i8, [NB_I16] = OP##_i16}
static const nb_cpu_loop_fn int_loops[NB_UNARY_OP_COUNT][NB_DTYPE_COUNT] = {
    [NB_UNARY_NEG] = INTS(neg),         [NB_UNARY_ADD_SCALAR] = INTS(adds),
    [NB_UNARY_MUL_SCALAR] = INTS(muls), [NB_UNARY_ABS] = INTS(abs),
    [NB_UNARY_SIGN] = INTS(sign),       [NB_UNARY_FLOOR] = INTS(ident),
    [NB_UNARY_CEIL] = INTS(ident),      [NB_UNARY_ROUND] = INTS(ident),
    [NB_UNARY_TRUNC] = INTS(ident),
};

/* Memory-bound ops (a compare or one arithmetic op per element): larger tasks. */
static int64_t un_grain(nb_unary_op op, double alpha) {
    switch (op) {
    case NB_UNARY_NEG: case NB_UNARY_RELU: case NB_UNARY_ADD_SCALAR: case NB_UNARY_MUL_SCALAR:
    case NB_UNARY_ABS: case NB_UNARY_SIGN: case NB_UNARY_FLOOR: case NB_UNARY_CEIL: case NB_UNARY_TRUNC:
    case NB_UNARY_LEAKY_RELU: case NB_UNARY_HARDTANH_MIN: case NB_UNARY_HARDTANH_MAX:
    case NB_UNARY_HARDSIGMOID: case NB_UNARY_HARDSWISH:
        return NB_CPU_GRAIN_LIGHT;
    case NB_UNARY_POW_SCALAR:
        return alpha == 2.0 ? NB_CPU_GRAIN_LIGHT : NB_CPU_GRAIN;
    default:
        return NB_CPU_GRAIN;
    }
}

/* op, shapes and dtypes checked: backend/check/unary.c. */
nb_status nb_cpu_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x,
                       double alpha) {
    (void)be;
    const bool h16 = nb_dtype_is_16bit(x->dtype); /* float32 loops over 16-bit chunks (iter16.c) */
    const nb_dtype cdt = h16 ? NB_F32 : x->dtype;
    nb_cpu_loop_fn fn = NULL;
    if (nb_dtype_is_float(cdt)) fn = nb_cpu_unary_float_loop(op, cdt, alpha);
    else if ((unsigned)op < NB_UNARY_OP_COUNT && (unsigned)cdt < NB_DTYPE_COUNT) fn = int_loops[op][cdt];
    if (!fn) /* dtypes the op does not take: for callers of the ISA tables (tests), which bypass the check */
        return nb_set_error(NB_ERR_DTYPE, "%s: not supported for %s on the CPU", nb_unary_name(op),
                            nb_dtype_name(x->dtype));
    nb_cpu_iter it;
    const nb_kview *ops[2] = {out, x};
    nb_cpu_iter_init(&it, 2, ops);
    if (h16) nb_cpu_iter_run16(&it, un_grain(op, alpha), fn, &alpha, (const nb_dtype[]){out->dtype, x->dtype});
    else nb_cpu_iter_run(&it, un_grain(op, alpha), fn, &alpha);
    return NB_OK;
}

/* ---- unary backward: gx = rule(g, v; a), v = x or y as the rule needs ---- */

/* op, shapes, dtypes and the saved tensor the rule reads checked: backend/check/unary.c. */
nb_status nb_cpu_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx,
                                const nb_kview *gy, const nb_kview *x, const nb_kview *y,
                                double alpha) {
    (void)be;
    nb_cpu_unary_rule rule = nb_cpu_unary_float_rule(op);
    const nb_kview *v = nb_unary_saved_view(op, gy, x, y); /* the saved tensor the rule reads */
    nb_cpu_loop_fn fn = gx->dtype == NB_F64 ? rule.f64 : rule.f32; /* every op has both; 16-bit runs f32 */
    nb_cpu_iter it;
    const nb_kview *ops[3] = {gx, gy, v};
    nb_cpu_iter_init(&it, 3, ops);
    if (nb_dtype_is_16bit(gx->dtype))
        nb_cpu_iter_run16(&it, un_grain(op, alpha), fn, &alpha, (const nb_dtype[]){gx->dtype, gy->dtype, v->dtype});
    else nb_cpu_iter_run(&it, un_grain(op, alpha), fn, &alpha);
    return NB_OK;
}
