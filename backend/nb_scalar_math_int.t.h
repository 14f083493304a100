/* nb_scalar_math_int.t.h - one signed integer type's division, power and
 * shift helpers (PyTorch's BinaryOpsKernel.cpp and c10/util/generic_math.h),
 * included by nb_scalar_math.h with NB_SM_T (int8_t .. int64_t), NB_SM_UT
 * (an unsigned type at least as wide, never narrower than unsigned int) and
 * NB_SM_SFX (i8 .. i64); no include guard, by
 * design. Arithmetic that can overflow wraps through the unsigned type.
 * The divisions take b != 0 (the loops check for zero and report it);
 * b == -1 is special because INT_MIN / -1 and INT_MIN % -1 trap on x86. */

#define NB_SM(name) NB_SM_CAT(nb_sm_##name##_, NB_SM_SFX)

NB_SM_FN NB_SM_T NB_SM(div_trunc)(NB_SM_T a, NB_SM_T b) {
    return b == -1 ? (NB_SM_T)((NB_SM_UT)0 - (NB_SM_UT)a) : (NB_SM_T)(a / b);
}
NB_SM_FN NB_SM_T NB_SM(fmod)(NB_SM_T a, NB_SM_T b) { return b == -1 ? (NB_SM_T)0 : (NB_SM_T)(a % b); }
NB_SM_FN NB_SM_T NB_SM(div_floor)(NB_SM_T a, NB_SM_T b) {
    NB_SM_T q = NB_SM(div_trunc)(a, b), r = NB_SM(fmod)(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (NB_SM_T)((NB_SM_UT)q - 1) : q;
}
/* the divisor's sign (Python's %) */
NB_SM_FN NB_SM_T NB_SM(remainder)(NB_SM_T a, NB_SM_T b) {
    NB_SM_T r = NB_SM(fmod)(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (NB_SM_T)((NB_SM_UT)r + (NB_SM_UT)b) : r;
}
/* a ** b by squaring; a negative b gives 0 except for a = 1 and -1 */
NB_SM_FN NB_SM_T NB_SM(ipow)(NB_SM_T a, NB_SM_T b) {
    if (b < 0) return a == 1 ? (NB_SM_T)1 : a == -1 ? ((b & 1) ? (NB_SM_T)-1 : (NB_SM_T)1) : (NB_SM_T)0;
    NB_SM_UT r = 1, base = (NB_SM_UT)a;
    for (; b; b >>= 1, base *= base)
        if (b & 1) r *= base;
    return (NB_SM_T)r;
}
/* shifts out of range saturate: left to 0, right to the sign */
NB_SM_FN NB_SM_T NB_SM(lshift)(NB_SM_T a, NB_SM_T b) {
    return (b < 0 || b >= (NB_SM_T)(8 * sizeof(NB_SM_T))) ? (NB_SM_T)0 : (NB_SM_T)((NB_SM_UT)a << b);
}
NB_SM_FN NB_SM_T NB_SM(rshift)(NB_SM_T a, NB_SM_T b) {
    const int bits = 8 * (int)sizeof(NB_SM_T);
    return (b < 0 || b >= bits - 1) ? (NB_SM_T)(a >> (bits - 1)) : (NB_SM_T)(a >> b);
}

/* Every integer nb_binary_op but the comparisons and the divisions:
 * arithmetic wraps through the unsigned type; maximum/minimum; bitwise
 * ops; shifts that saturate. */
NB_SM_FN NB_SM_T NB_SM(binary)(int op, NB_SM_T x, NB_SM_T y) {
    switch (op) {
    case NB_BINARY_ADD: return (NB_SM_T)((NB_SM_UT)x + (NB_SM_UT)y);
    case NB_BINARY_SUB: return (NB_SM_T)((NB_SM_UT)x - (NB_SM_UT)y);
    case NB_BINARY_MUL: return (NB_SM_T)((NB_SM_UT)x * (NB_SM_UT)y);
    case NB_BINARY_POW: return NB_SM(ipow)(x, y);
    case NB_BINARY_MAXIMUM: return x > y ? x : y;
    case NB_BINARY_MINIMUM: return x < y ? x : y;
    case NB_BINARY_BITWISE_AND: return x & y;
    case NB_BINARY_BITWISE_OR: return x | y;
    case NB_BINARY_BITWISE_XOR: return x ^ y;
    case NB_BINARY_LSHIFT: return NB_SM(lshift)(x, y);
    case NB_BINARY_RSHIFT: return NB_SM(rshift)(x, y);
    default: return 0; /* not reached */
    }
}
/* The unary ops integers take: neg and the scalar forms wrap through the
 * unsigned type, abs wraps at the minimum (as PyTorch), the rounding ops
 * are the identity. */
NB_SM_FN NB_SM_T NB_SM(unary)(int op, NB_SM_T x, NB_SM_T a) {
    switch (op) {
    case NB_UNARY_NEG: return (NB_SM_T)((NB_SM_UT)0 - (NB_SM_UT)x);
    case NB_UNARY_ADD_SCALAR: return (NB_SM_T)((NB_SM_UT)x + (NB_SM_UT)a);
    case NB_UNARY_MUL_SCALAR: return (NB_SM_T)((NB_SM_UT)x * (NB_SM_UT)a);
    case NB_UNARY_ABS: return x < 0 ? (NB_SM_T)((NB_SM_UT)0 - (NB_SM_UT)x) : x;
    case NB_UNARY_SIGN: return (NB_SM_T)((0 < x) - (x < 0));
    default: return x; /* floor, ceil, round, trunc */
    }
}
/* The integer divisions (remainder, fmod, div_trunc, div_floor), y != 0. */
NB_SM_FN NB_SM_T NB_SM(binary_div)(int op, NB_SM_T x, NB_SM_T y) {
    switch (op) {
    case NB_BINARY_REMAINDER: return NB_SM(remainder)(x, y);
    case NB_BINARY_FMOD: return NB_SM(fmod)(x, y);
    case NB_BINARY_DIV_TRUNC: return NB_SM(div_trunc)(x, y);
    default: return NB_SM(div_floor)(x, y); /* NB_BINARY_DIV_FLOOR */
    }
}

#ifdef __cplusplus
template <> struct nb_sm_of<NB_SM_T> {
    NB_SM_FN NB_SM_T unary(int op, NB_SM_T x, NB_SM_T a) { return NB_SM(unary)(op, x, a); }
    NB_SM_FN NB_SM_T binary(int op, NB_SM_T x, NB_SM_T y) { return NB_SM(binary)(op, x, y); }
    NB_SM_FN NB_SM_T binary_div(int op, NB_SM_T x, NB_SM_T y) { return NB_SM(binary_div)(op, x, y); }
    NB_SM_FN NB_SM_T div_trunc(NB_SM_T a, NB_SM_T b) { return NB_SM(div_trunc)(a, b); }
    NB_SM_FN NB_SM_T fmod(NB_SM_T a, NB_SM_T b) { return NB_SM(fmod)(a, b); }
    NB_SM_FN NB_SM_T div_floor(NB_SM_T a, NB_SM_T b) { return NB_SM(div_floor)(a, b); }
    NB_SM_FN NB_SM_T remainder(NB_SM_T a, NB_SM_T b) { return NB_SM(remainder)(a, b); }
    NB_SM_FN NB_SM_T ipow(NB_SM_T a, NB_SM_T b) { return NB_SM(ipow)(a, b); }
    NB_SM_FN NB_SM_T lshift(NB_SM_T a, NB_SM_T b) { return NB_SM(lshift)(a, b); }
    NB_SM_FN NB_SM_T rshift(NB_SM_T a, NB_SM_T b) { return NB_SM(rshift)(a, b); }
};
#endif

#undef NB_SM
