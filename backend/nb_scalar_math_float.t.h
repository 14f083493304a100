/* nb_scalar_math_float.t.h - one float type's scalar formulas, included by
 * nb_scalar_math.h with NB_SM_T (float or double), NB_SM_SFX (f32 or f64)
 * and NB_SM_IS_F32 defined; no include guard, by design. Read it as a
 * template over T: NB_M(exp) is expf for float and exp for double, NB_SM(x)
 * is nb_sm_x_f32 or nb_sm_x_f64. */

#ifdef T /* a template of the includer's own (*.t.h) must come after this header */
#error "nb_scalar_math.h must be included before T is defined"
#endif
#define T NB_SM_T
#define NB_SM(name) NB_SM_CAT(nb_sm_##name##_, NB_SM_SFX)
#if NB_SM_IS_F32
#define NB_M(fn) fn##f
#else
#define NB_M(fn) fn
#endif

/* ---- helpers ----------------------------------------------------------------- */

/* sign as PyTorch's (0 < x) - (x < 0): sign(-0) = +0, sign(NaN) = 0 */
NB_SM_FN T NB_SM(sgn)(T x) { return (T)((0 < x) - (x < 0)); }
/* min(max(x + 3, 0), 6) with std::max/std::min's NaN behaviour (NaN stays) */
NB_SM_FN T NB_SM(relu6_shift3)(T x) { return x + 3 < 0 ? (T)0 : x + 3 > 6 ? (T)6 : x + 3; }
/* x ** a; a = 0.5 and -0.5 run as sqrt and 1 / sqrt, as PyTorch's
 * pow_tensor_scalar does (so (-inf) ** 0.5 is NaN and (-0) ** -0.5 is -inf,
 * where C's pow gives inf and inf) */
NB_SM_FN T NB_SM(pow_scalar)(T x, T a) {
    return a == (T)0.5 ? NB_M(sqrt)(x) : a == (T)-0.5 ? 1 / NB_M(sqrt)(x) : NB_M(pow)(x, a);
}
/* Phi(x), the standard normal CDF. float32: erfc(-x / sqrt 2) / 2 keeps the
 * negative tail's relative accuracy (1 + erf would cancel). */
NB_SM_FN T NB_SM(phi)(T x) {
#if NB_SM_IS_F32
    return 0.5f * erfcf(-x * (float)NB_SM_SQRT1_2);
#else
    return 0.5 * (1 + erf(x * NB_SM_SQRT1_2));
#endif
}
/* tanh(log(1 + e^x)) (mish). float32: n / (n + 2) with n = e (e + 2),
 * e = e^x (exact algebra, no cancellation for x < 0); 1 above x = 20, where
 * n would overflow. */
NB_SM_FN T NB_SM(tanh_softplus)(T x) {
#if NB_SM_IS_F32
    if (x > 20.0f) return 1.0f;
    float e = expf(x), n = e * (e + 2.0f);
    return n / (n + 2.0f);
#else
    return tanh(log1p(exp(x)));
#endif
}
/* 1 / (1 + e^-x) */
NB_SM_FN T NB_SM(logistic)(T x) { return 1 / (1 + NB_M(exp)(-x)); }

/* GELU (Hendrycks & Gimpel 2016) as PyTorch's GeluKernel: exact
 * x Phi(x), derivative Phi(x) + x phi(x); tanh form 0.5 x (1 + tanh(u)),
 * u = k (x + 0.044715 x^3), k = sqrt(2/pi), derivative
 * 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2). float32 writes
 * 0.5 (1 + tanh(u)) as 1 / (1 + e^(-2u)) and 1 - tanh(u)^2 as 4 s (1 - s). */
NB_SM_FN T NB_SM(gelu)(T x) {
#if NB_SM_IS_F32
    return x * nb_sm_phi_f32(x);
#else
    return 0.5 * x * (1 + erf(x * NB_SM_SQRT1_2));
#endif
}
NB_SM_FN T NB_SM(gelu_grad)(T x) {
    return NB_SM(phi)(x) + x * (NB_M(exp)((T)-0.5 * x * x) * (T)NB_SM_INV_SQRT_2PI);
}
NB_SM_FN T NB_SM(gelu_tanh)(T x) {
#if NB_SM_IS_F32
    float u = (x + x * x * x * 0.044715f) * (float)NB_SM_SQRT_2_PI;
    return x / (expf(u * -2.0f) + 1.0f);
#else
    return 0.5 * x * (1 + tanh(NB_SM_SQRT_2_PI * (x + 0.044715 * x * x * x)));
#endif
}
NB_SM_FN T NB_SM(gelu_tanh_grad)(T x) {
#if NB_SM_IS_F32
    const float k = (float)NB_SM_SQRT_2_PI, c = 0.044715f;
    float x2 = x * x, s = 1.0f / (expf((x + x2 * x * c) * (-2.0f * k)) + 1.0f);
    return s + x * s * (1.0f - s) * ((x2 * (3.0f * c) + 1.0f) * (2.0f * k));
#else
    const double k = NB_SM_SQRT_2_PI, c = 0.044715;
    double x2 = x * x, t = tanh(k * (x + c * x2 * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (k * (1 + 3 * c * x2));
#endif
}
/* SELU's factor for x <= 0; float32 multiplies the two float-rounded
 * constants, as the CPU's vector loop does */
NB_SM_FN T NB_SM(selu_neg)(void) {
#if NB_SM_IS_F32
    return (float)NB_SM_SELU_ALPHA * (float)NB_SM_SELU_SCALE;
#else
    return NB_SM_SELU_ALPHA * NB_SM_SELU_SCALE;
#endif
}

/* ---- unary: out = f(x; alpha) ------------------------------------------------ */

/* alpha in T, and round's 10^|decimals| (PyTorch's round_decimals_kernel),
 * prepared once per call by NB_SM(unary_prep). */
typedef struct NB_SM(unary_args) {
    T a, p10;
    bool round_neg;
} NB_SM(unary_args);

NB_SM_FN NB_SM(unary_args) NB_SM(unary_prep)(int op, double alpha) {
    NB_SM(unary_args) u;
    u.a = (T)alpha;
    u.round_neg = u.a < 0;
    u.p10 = op == NB_UNARY_ROUND ? (T)pow(10.0, u.round_neg ? -(double)u.a : (double)u.a) : (T)0;
    return u;
}

/* f(x) of every nb_unary_op, as PyTorch's kernels (NaN kept where they keep
 * it; relu maps -0 to 0; sigmoid and logsigmoid never overflow). */
NB_SM_FN T NB_SM(unary)(int op, T x, const NB_SM(unary_args) *u) {
    const T a = u->a;
    switch (op) {
    case NB_UNARY_NEG: return -x;
    case NB_UNARY_EXP: return NB_M(exp)(x);
    case NB_UNARY_LOG: return NB_M(log)(x);
    case NB_UNARY_SQRT: return NB_M(sqrt)(x);
    case NB_UNARY_RELU: return x > 0 || x != x ? x : (T)0;
    case NB_UNARY_SIGMOID: return x >= 0 ? 1 / (1 + NB_M(exp)(-x)) : NB_M(exp)(x) / (1 + NB_M(exp)(x));
    case NB_UNARY_TANH: return NB_M(tanh)(x);
    case NB_UNARY_ADD_SCALAR: return x + a;
    case NB_UNARY_MUL_SCALAR: return x * a;
    case NB_UNARY_POW_SCALAR: return a == 2 ? x * x : NB_SM(pow_scalar)(x, a); /* x * x: exact */
    case NB_UNARY_GELU: return NB_SM(gelu)(x);
    case NB_UNARY_GELU_TANH: return NB_SM(gelu_tanh)(x);
    case NB_UNARY_ABS: return NB_M(fabs)(x);
    case NB_UNARY_SIGN: return NB_SM(sgn)(x);
    case NB_UNARY_FLOOR: return NB_M(floor)(x);
    case NB_UNARY_CEIL: return NB_M(ceil)(x);
    case NB_UNARY_ROUND:
        return a == 0 ? NB_M(rint)(x) : u->round_neg ? NB_M(rint)(x / u->p10) * u->p10 : NB_M(rint)(x * u->p10) / u->p10;
    case NB_UNARY_TRUNC: return NB_M(trunc)(x);
    case NB_UNARY_RECIPROCAL: return 1 / x;
    case NB_UNARY_RSQRT: return 1 / NB_M(sqrt)(x);
    case NB_UNARY_LOG1P: return NB_M(log1p)(x);
    case NB_UNARY_EXPM1: return NB_M(expm1)(x);
    case NB_UNARY_LOG2: return NB_M(log2)(x);
    case NB_UNARY_LOG10: return NB_M(log10)(x);
    case NB_UNARY_SIN: return NB_M(sin)(x);
    case NB_UNARY_COS: return NB_M(cos)(x);
    case NB_UNARY_TAN: return NB_M(tan)(x);
    case NB_UNARY_ASIN: return NB_M(asin)(x);
    case NB_UNARY_ACOS: return NB_M(acos)(x);
    case NB_UNARY_ATAN: return NB_M(atan)(x);
    case NB_UNARY_SINH: return NB_M(sinh)(x);
    case NB_UNARY_COSH: return NB_M(cosh)(x);
    case NB_UNARY_ASINH: return NB_M(asinh)(x);
    case NB_UNARY_ACOSH: return NB_M(acosh)(x);
    case NB_UNARY_ATANH: return NB_M(atanh)(x);
    case NB_UNARY_ERF: return NB_M(erf)(x);
    case NB_UNARY_ERFC: return NB_M(erfc)(x);
    case NB_UNARY_LEAKY_RELU: return x > 0 ? x : x * a;
    case NB_UNARY_ELU: return x <= 0 ? NB_M(expm1)(x) * a : x;
    case NB_UNARY_SELU: return x <= 0 ? NB_M(expm1)(x) * NB_SM(selu_neg)() : x * (T)NB_SM_SELU_SCALE;
    case NB_UNARY_SILU: return x / (1 + NB_M(exp)(-x));
    case NB_UNARY_MISH: return x * NB_SM(tanh_softplus)(x);
    case NB_UNARY_SOFTPLUS: /* alpha is the threshold */
#if NB_SM_IS_F32 /* max(x, 0) + log1p(e^-|x|): the same value as log1p(e^x), no overflow */
        return x > a ? x : (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
#else
        return x > a ? x : log1p(exp(x));
#endif
    case NB_UNARY_HARDTANH_MIN: return x < a ? a : x;
    case NB_UNARY_HARDTANH_MAX: return x > a ? a : x;
    case NB_UNARY_HARDSIGMOID: return NB_SM(relu6_shift3)(x) / 6;
    case NB_UNARY_HARDSWISH: return x * NB_SM(relu6_shift3)(x) / 6;
    case NB_UNARY_LOGSIGMOID: return (0 < x ? (T)0 : x) - NB_M(log1p)(NB_M(exp)(-NB_M(fabs)(x)));
    default: return x; /* not reached: the shared check takes only the ops above */
    }
}

/* ---- unary backward: gx = rule(g, v; alpha) ------------------------------------
 * v is the saved tensor the rule reads: x, or y = f(x) where
 * nb_unary_saved_of(op) says so (NB_UNARY_OPS, nb_kernel_ops.h). Rules follow
 * derivatives.yaml and PyTorch's *_backward kernels, their values at kinks
 * and for NaN included: relu passes g at NaN (threshold_backward);
 * hardtanh's halves give 0 at their bound and at NaN; elu and selu give
 * NaN at NaN; the rounding ops give a true 0, even for an inf or NaN g. */
NB_SM_FN T NB_SM(unary_backward)(int op, T g, T v, T a) {
    switch (op) {
    case NB_UNARY_NEG: return -g;
    case NB_UNARY_EXP: return g * v;
    case NB_UNARY_LOG: return g / v;
    case NB_UNARY_SQRT: return g / (2 * v);
    case NB_UNARY_RELU: return v <= 0 ? (T)0 : g;
    case NB_UNARY_SIGMOID: return g * (1 - v) * v;
    case NB_UNARY_TANH: return g * (1 - v * v);
    case NB_UNARY_ADD_SCALAR: return g;
    case NB_UNARY_MUL_SCALAR: return g * a;
    case NB_UNARY_POW_SCALAR: return a == 0 ? (T)0 : g * (a * NB_SM(pow_scalar)(v, a - 1));
    case NB_UNARY_GELU: return g * NB_SM(gelu_grad)(v);
    case NB_UNARY_GELU_TANH: return g * NB_SM(gelu_tanh_grad)(v);
    case NB_UNARY_ABS: return g * NB_SM(sgn)(v);
    case NB_UNARY_SIGN:
    case NB_UNARY_FLOOR:
    case NB_UNARY_CEIL:
    case NB_UNARY_ROUND:
    case NB_UNARY_TRUNC: return 0;
    case NB_UNARY_RECIPROCAL: return -g * (v * v);
    case NB_UNARY_RSQRT: return (T)-0.5 * g * (v * v * v);
    case NB_UNARY_LOG1P: return g / (v + 1);
    case NB_UNARY_EXPM1: return g * (v + 1);
    case NB_UNARY_LOG2: return g / v * (T)NB_SM_LOG2E; /* not g / (v ln 2): v ln 2 flushes near FLT_MIN */
    case NB_UNARY_LOG10: return g / (v * (T)NB_SM_LN10);
    case NB_UNARY_SIN: return g * NB_M(cos)(v);
    case NB_UNARY_COS: return g * -NB_M(sin)(v);
    case NB_UNARY_TAN: return g * (1 + v * v);
    case NB_UNARY_ASIN: return g * (1 / NB_M(sqrt)(1 - v * v));
    case NB_UNARY_ACOS: return g * -(1 / NB_M(sqrt)(1 - v * v));
    case NB_UNARY_ATAN: return g / (v * v + 1);
    case NB_UNARY_SINH: return g * NB_M(cosh)(v);
    case NB_UNARY_COSH: return g * NB_M(sinh)(v);
    case NB_UNARY_ASINH: return g * (1 / NB_M(sqrt)(v * v + 1));
    case NB_UNARY_ACOSH: return g * (1 / NB_M(sqrt)(v * v - 1));
    case NB_UNARY_ATANH: return g / (1 - v * v);
    case NB_UNARY_ERF: return (T)NB_SM_2_SQRTPI * NB_M(exp)(-(v * v)) * g;
    case NB_UNARY_ERFC: return (T)-NB_SM_2_SQRTPI * NB_M(exp)(-(v * v)) * g;
    case NB_UNARY_LEAKY_RELU: return v > 0 ? g : g * a;
#if NB_SM_IS_F32 /* the vector loops' grouping: g times the derivative */
    case NB_UNARY_ELU: return g * (v > 0 ? 1.0f : expf(v) * a);
    case NB_UNARY_SELU: return g * (v > 0 ? (float)NB_SM_SELU_SCALE : expf(v) * nb_sm_selu_neg_f32());
    case NB_UNARY_SOFTPLUS: return g * (v > a ? 1.0f : 1.0f / (expf(-v) + 1.0f));
#else
    case NB_UNARY_ELU: return v > 0 ? g : g * a * exp(v);
    case NB_UNARY_SELU: return v > 0 ? g * NB_SM_SELU_SCALE : g * nb_sm_selu_neg_f64() * exp(v);
    case NB_UNARY_SOFTPLUS: {
        double z = exp(v);
        return g * (v > a ? 1 : z / (z + 1));
    }
#endif
    case NB_UNARY_SILU: {
        T s = NB_SM(logistic)(v);
        return g * (s * (1 + v * (1 - s)));
    }
    case NB_UNARY_MISH: {
        T t = NB_SM(tanh_softplus)(v), s = NB_SM(logistic)(v);
        return g * (t + v * s * (1 - t * t));
    }
    case NB_UNARY_LOGSIGMOID: {
        T z = NB_M(exp)(-NB_M(fabs)(v)), q = z / (1 + z);
        return g * (v < 0 ? 1 - q : q);
    }
    case NB_UNARY_HARDTANH_MIN: return v > a ? g : (T)0;
    case NB_UNARY_HARDTANH_MAX: return v < a ? g : (T)0;
    case NB_UNARY_HARDSIGMOID: return v > -3 && v < 3 ? g * (T)(1.0 / 6) : (T)0;
    /* 1.5 g at x = 3, aten's hardswish_backward formula; NaN gives NaN */
    case NB_UNARY_HARDSWISH: return v < -3 ? (T)0 : v > 3 ? g : g * (v / 3 + (T)0.5);
    default: return 0; /* not reached */
    }
}

/* ---- binary: out = x OP y -------------------------------------------------------- */

/* PyTorch's remainder: fmod moved to the divisor's sign */
NB_SM_FN T NB_SM(remainder)(T a, T b) {
    T m = NB_M(fmod)(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
/* PyTorch's div_floor_floating: (a - fmod(a, b)) / b rounded, so that floor
 * division and remainder agree */
NB_SM_FN T NB_SM(div_floor)(T a, T b) {
    if (b == 0) return a / b;
    T m = NB_M(fmod)(a, b), d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return NB_M(copysign)((T)0, a / b);
    T f = NB_M(floor)(d);
    return d - f > (T)0.5 ? f + 1 : f;
}

/* Every float nb_binary_op but the comparisons (bool results) and the
 * bitwise ops and shifts (integers only). maximum/minimum propagate NaN. */
NB_SM_FN T NB_SM(binary)(int op, T x, T y) {
    switch (op) {
    case NB_BINARY_ADD: return x + y;
    case NB_BINARY_SUB: return x - y;
    case NB_BINARY_MUL: return x * y;
    case NB_BINARY_DIV: return x / y;
    case NB_BINARY_POW: return NB_M(pow)(x, y);
    case NB_BINARY_MAXIMUM: return x != x || x > y ? x : y;
    case NB_BINARY_MINIMUM: return x != x || x < y ? x : y;
    case NB_BINARY_REMAINDER: return NB_SM(remainder)(x, y);
    case NB_BINARY_FMOD: return NB_M(fmod)(x, y);
    case NB_BINARY_ATAN2: return NB_M(atan2)(x, y);
    case NB_BINARY_DIV_TRUNC: return NB_M(trunc)(x / y);
    case NB_BINARY_DIV_FLOOR: return NB_SM(div_floor)(x, y);
    default: return 0; /* not reached */
    }
}

/* ---- optimizer element updates ------------------------------------------------------
 * PyTorch's single-tensor Adam/AdamW and SGD (torch/optim/adam.py
 * _single_tensor_adam, sgd.py _single_tensor_sgd), operation by operation
 * in the order of the ATen kernels they call (lerp_, mul_/addcmul_,
 * addcdiv_, add_ with alpha). Coefficients come from the host in double
 * (NB_SM(adam_coef)), per-element math in T, every operation rounded (RN_*:
 * CUDA's _rn intrinsics on the device, plain C arithmetic on the host). */
#ifdef __CUDA_ARCH__
#if NB_SM_IS_F32
#define NB_SM_RN_ADD __fadd_rn
#define NB_SM_RN_SUB __fsub_rn
#define NB_SM_RN_MUL __fmul_rn
#define NB_SM_RN_DIV __fdiv_rn
#define NB_SM_RN_SQRT __fsqrt_rn
#else
#define NB_SM_RN_ADD __dadd_rn
#define NB_SM_RN_SUB __dsub_rn
#define NB_SM_RN_MUL __dmul_rn
#define NB_SM_RN_DIV __ddiv_rn
#define NB_SM_RN_SQRT __dsqrt_rn
#endif
NB_SM_FN T NB_SM(rn_add)(T a, T b) { return NB_SM_RN_ADD(a, b); }
NB_SM_FN T NB_SM(rn_sub)(T a, T b) { return NB_SM_RN_SUB(a, b); }
NB_SM_FN T NB_SM(rn_mul)(T a, T b) { return NB_SM_RN_MUL(a, b); }
NB_SM_FN T NB_SM(rn_div)(T a, T b) { return NB_SM_RN_DIV(a, b); }
NB_SM_FN T NB_SM(rn_sqrt)(T a) { return NB_SM_RN_SQRT(a); }
#undef NB_SM_RN_ADD
#undef NB_SM_RN_SUB
#undef NB_SM_RN_MUL
#undef NB_SM_RN_DIV
#undef NB_SM_RN_SQRT
#else
NB_SM_FN T NB_SM(rn_add)(T a, T b) { return a + b; }
NB_SM_FN T NB_SM(rn_sub)(T a, T b) { return a - b; }
NB_SM_FN T NB_SM(rn_mul)(T a, T b) { return a * b; }
NB_SM_FN T NB_SM(rn_div)(T a, T b) { return a / b; }
NB_SM_FN T NB_SM(rn_sqrt)(T a) { return NB_M(sqrt)(a); }
#endif

/* Adam's per-call coefficients, from nb_adam_hyper with lr and step given
 * (the capturable CUDA form reads both on the device). omw1 = 1 - w1 in T
 * (torch's lerp for weights >= 0.5). */
typedef struct NB_SM(adam_coef) {
    T wd, decay, w1, omw1, b2, w2, neg_step, bc2_sqrt, eps;
    bool maximize, amsgrad, l2, decoupled, small;
} NB_SM(adam_coef);

NB_SM_FN NB_SM(adam_coef) NB_SM(adam_prep)(const nb_adam_hyper *h, double lr, double step) {
    const double bc1 = 1 - pow(h->beta1, step), bc2 = 1 - pow(h->beta2, step), w1 = 1 - h->beta1;
    NB_SM(adam_coef) c;
    c.wd = (T)h->weight_decay;
    c.decay = (T)(1 - lr * h->weight_decay);
    c.w1 = (T)w1;
    c.omw1 = (T)1 - c.w1;
    c.b2 = (T)h->beta2;
    c.w2 = (T)(1 - h->beta2);
    c.neg_step = (T)-(lr / bc1);
    c.bc2_sqrt = (T)sqrt(bc2);
    c.eps = (T)h->eps;
    c.maximize = h->maximize, c.amsgrad = h->amsgrad;
    c.l2 = !h->decoupled && h->weight_decay != 0;
    c.decoupled = h->decoupled && h->weight_decay != 0;
    c.small = fabs(w1) < 0.5; /* torch's lerp picks its formula by the weight */
    return c;
}

/* One element of an Adam/AdamW step: p, m, v (and vmax with amsgrad)
 * updated in place from the gradient gr (each read once and written once). */
NB_SM_FN void NB_SM(adam)(T *p, T gr, T *m, T *v, T *vmax, const NB_SM(adam_coef) *c) {
    T pi = *p, mi = *m, vi = *v;
    T g = c->maximize ? -gr : gr;
    if (c->l2) g = NB_SM(rn_add)(g, NB_SM(rn_mul)(c->wd, pi));
    if (c->decoupled) pi = NB_SM(rn_mul)(pi, c->decay);
    mi = c->small ? NB_SM(rn_add)(mi, NB_SM(rn_mul)(c->w1, NB_SM(rn_sub)(g, mi)))
                  : NB_SM(rn_sub)(g, NB_SM(rn_mul)(NB_SM(rn_sub)(g, mi), c->omw1));
    vi = NB_SM(rn_add)(NB_SM(rn_mul)(vi, c->b2), NB_SM(rn_mul)(NB_SM(rn_mul)(c->w2, g), g));
    T vv = vi;
    if (c->amsgrad) {
        const T mx = *vmax;
        vv = *vmax = (mx > vv || mx != mx) ? mx : vv;
    }
    const T denom = NB_SM(rn_add)(NB_SM(rn_div)(NB_SM(rn_sqrt)(vv), c->bc2_sqrt), c->eps);
    *p = NB_SM(rn_add)(pi, NB_SM(rn_div)(NB_SM(rn_mul)(c->neg_step, mi), denom));
    *m = mi, *v = vi;
}

/* SGD's per-call coefficients; damp = 1 - dampening. */
typedef struct NB_SM(sgd_coef) {
    T wd, mom, damp, neg_lr;
    bool maximize, has_wd, has_mom, first, nesterov;
} NB_SM(sgd_coef);

NB_SM_FN NB_SM(sgd_coef) NB_SM(sgd_prep)(const nb_sgd_hyper *h, double lr) {
    NB_SM(sgd_coef) c;
    c.wd = (T)h->weight_decay, c.mom = (T)h->momentum, c.damp = (T)(1 - h->dampening), c.neg_lr = (T)-lr;
    c.maximize = h->maximize, c.has_wd = h->weight_decay != 0, c.has_mom = h->momentum != 0;
    c.first = h->first_step, c.nesterov = h->nesterov;
    return c;
}

/* One element of an SGD step: p (and the momentum buffer buf) in place. */
NB_SM_FN void NB_SM(sgd)(T *p, T gr, T *buf, const NB_SM(sgd_coef) *c) {
    const T pi = *p;
    T g = c->maximize ? -gr : gr;
    if (c->has_wd) g = NB_SM(rn_add)(g, NB_SM(rn_mul)(c->wd, pi));
    if (c->has_mom) {
        const T b = c->first ? g : NB_SM(rn_add)(NB_SM(rn_mul)(*buf, c->mom), NB_SM(rn_mul)(c->damp, g));
        *buf = b;
        g = c->nesterov ? NB_SM(rn_add)(g, NB_SM(rn_mul)(c->mom, b)) : b;
    }
    *p = NB_SM(rn_add)(pi, NB_SM(rn_mul)(c->neg_lr, g));
}

/* ---- fake quantization (PyTorch's fake_quantize kernels,
 * aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp) ------
 * The level of x for inv = 1.0f / scale (float, as PyTorch's) and zero
 * point z: z + rint(x inv) for an integer zero point; rint(z + x inv),
 * rounded through float as lrintf does, for a float one (zp_float). rint
 * rounds ties to even (nearbyint). NaN stays NaN: clamps to quant_min and
 * is out of range, as PyTorch's integer cast of it. */
NB_SM_FN double NB_SM(fq_level)(T x, float inv, float zp, bool zp_float) {
    /* rn_: z + x inv rounded twice, as the CPU computes it (nvcc would fuse an FMA and move ties) */
    return zp_float ? (double)rintf((float)NB_SM(rn_add)((T)zp, NB_SM(rn_mul)(x, (T)inv)))
                    : (double)zp + (double)NB_M(rint)(x * (T)inv);
}

/* clamp(q, qmin, qmax), NaN to qmin: quantize_per_tensor's integer value */
NB_SM_FN double NB_SM(fq_clamped)(T x, float inv, float zp, const nb_fake_quant_params *p) {
    double q = NB_SM(fq_level)(x, inv, zp, p->zp_float);
    return q >= (double)p->quant_min ? (q <= (double)p->quant_max ? q : (double)p->quant_max) : (double)p->quant_min;
}

/* out = (clamp(q, qmin, qmax) - z) * scale, in double and rounded once */
NB_SM_FN T NB_SM(fake_quant)(T x, float scale, float inv, float zp, const nb_fake_quant_params *p) {
    return (T)((NB_SM(fq_clamped)(x, inv, zp, p) - (double)zp) * (double)scale);
}

/* The gradients of one element (g the incoming gradient, gf grad_factor):
 * gx = g * in_range; outside the range gzp = -g scale gf and gscale = g
 * (qmin - z or qmax - z) gf, inside gzp = 0 and gscale = g (xfq - x) inv gf
 * with xfq the fake-quantized x (LSQ's gradient, Esser et al. 2020), in
 * PyTorch's order of operations. */
NB_SM_FN void NB_SM(fake_quant_grad)(T g, T x, float scale, float inv, float zp, const nb_fake_quant_params *p,
                                     T gf, T *gx, T *gscale, T *gzp) {
    double q = NB_SM(fq_level)(x, inv, zp, p->zp_float);
    bool below = !(q >= (double)p->quant_min), above = q > (double)p->quant_max;
    *gx = g * (T)(!below && !above);
    if (below || above) {
        *gzp = g * (T)-1 * (T)scale * gf;
        *gscale = g * (T)((below ? (double)p->quant_min : (double)p->quant_max) - (double)zp) * gf;
    } else {
        *gzp = 0;
        T xfq = (T)((q - (double)zp) * (double)scale);
        *gscale = g * (xfq - x) * (T)inv * gf;
    }
}

/* ---- BitNet b1.58's int8 activations (nb_bitnet_linear's kernels) ---------
 * The per-token absmax: a max that keeps NaN; the scale s = 127 /
 * max(absmax, 1e-5); a level clamp(rint(x s), -128, 127), NaN to 0; and
 * the output acc / s / s_w of the exact integer sum acc. */
NB_SM_FN T NB_SM(nan_max)(T a, T b) { return b > a || b != b ? b : a; }
NB_SM_FN T NB_SM(bitnet_act_scale)(T absmax) {
    const T lo = (T)1e-5;
    return (T)127 / (absmax < lo ? lo : absmax);
}
NB_SM_FN int8_t NB_SM(bitnet_act_level)(T x, T s) {
    T q = NB_M(rint)(x * s);
    return (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q == q ? q : 0);
}
NB_SM_FN T NB_SM(bitnet_out)(int32_t acc, T s, float sw) { return (T)acc / s / (T)sw; }

#ifdef __cplusplus
template <> struct nb_sm_of<T> {
    typedef NB_SM(unary_args) unary_args;
    typedef NB_SM(adam_coef) adam_coef;
    typedef NB_SM(sgd_coef) sgd_coef;
    NB_SM_FN unary_args unary_prep(int op, double alpha) { return NB_SM(unary_prep)(op, alpha); }
    NB_SM_FN T unary(int op, T x, const unary_args *u) { return NB_SM(unary)(op, x, u); }
    NB_SM_FN T unary_backward(int op, T g, T v, T a) { return NB_SM(unary_backward)(op, g, v, a); }
    NB_SM_FN T binary(int op, T x, T y) { return NB_SM(binary)(op, x, y); }
    NB_SM_FN adam_coef adam_prep(const nb_adam_hyper *h, double lr, double step) { return NB_SM(adam_prep)(h, lr, step); }
    NB_SM_FN void adam(T *p, T g, T *m, T *v, T *vmax, const adam_coef *c) { NB_SM(adam)(p, g, m, v, vmax, c); }
    NB_SM_FN sgd_coef sgd_prep(const nb_sgd_hyper *h, double lr) { return NB_SM(sgd_prep)(h, lr); }
    NB_SM_FN void sgd(T *p, T g, T *buf, const sgd_coef *c) { NB_SM(sgd)(p, g, buf, c); }
    NB_SM_FN T nan_max(T a, T b) { return NB_SM(nan_max)(a, b); }
    NB_SM_FN T bitnet_act_scale(T absmax) { return NB_SM(bitnet_act_scale)(absmax); }
    NB_SM_FN int8_t bitnet_act_level(T x, T s) { return NB_SM(bitnet_act_level)(x, s); }
    NB_SM_FN T bitnet_out(int32_t acc, T s, float sw) { return NB_SM(bitnet_out)(acc, s, sw); }
    NB_SM_FN T fake_quant(T x, float s, float inv, float z, const nb_fake_quant_params *p) {
        return NB_SM(fake_quant)(x, s, inv, z, p);
    }
    NB_SM_FN double fq_clamped(T x, float inv, float z, const nb_fake_quant_params *p) {
        return NB_SM(fq_clamped)(x, inv, z, p);
    }
    NB_SM_FN void fake_quant_grad(T g, T x, float s, float inv, float z, const nb_fake_quant_params *p, T gf, T *gx,
                                  T *gs, T *gz) {
        NB_SM(fake_quant_grad)(g, x, s, inv, z, p, gf, gx, gs, gz);
    }
};
#endif

#undef T
#undef NB_SM
#undef NB_M
