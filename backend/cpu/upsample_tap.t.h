/* upsample_tap.t.h - the linear interpolation taps for one type, included by
 * upsample.c with T, S, FLOOR defined; no include guard, by design. TS(name_)
 * pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static up_tap TS(linear_tap_)(int64_t dst, int64_t in, int64_t out, bool align) {
    up_tap t = {dst, dst, 1, 0};
    if (out == in) return t;
    T ratio = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0) : (T)in / (T)out;
    T real = align ? ratio * (T)dst : ratio * ((T)dst + (T)0.5) - (T)0.5;
    if (real < 0) real = 0;
    int64_t i0 = (int64_t)FLOOR(real);
    if (i0 > in - 1) i0 = in - 1;
    T l1 = real - (T)i0;
    l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
    t.i0 = i0;
    t.i1 = i0 + (i0 < in - 1 ? 1 : 0);
    t.l1 = l1;
    t.l0 = (T)1 - l1;
    return t;
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
#undef FLOOR
