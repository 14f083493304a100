/* nb_scalar_math_int.t.h - one signed integer type's division, power and
 * shift helpers (PyTorch's BinaryOpsKernel.cpp and c10/util/generic_math.h),
 * included by nb_scalar_math.h with NB_SM_T (int32_t or int64_t), NB_SM_UT
 * (its unsigned type) and NB_SM_SFX (i32 or i64); no include guard, by
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

#ifdef __cplusplus
template <> struct nb_sm_of<NB_SM_T> {
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
