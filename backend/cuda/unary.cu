// unary.cu - the unary family on CUDA: slots unary (out = f(x; alpha)) and
// unary_backward (gx = gy * f'(x or y; alpha)) for every nb_unary_op, with
// the CPU backend's formulas and dtypes (backend/cpu/unary.c,
// unary_math.c): float64 mirrors the CPU's float64 expressions on CUDA's
// libm; float32 uses the same formulas with CUDA's float functions (a few
// ulp, the harness's float32 tolerance is 2e-5), keeping the CPU's
// overflow-free forms (sigmoid, softplus, mish, logsigmoid); integers take
// neg/add/mul_scalar (wrapping), abs, sign and the rounding ops (identity).
// alpha is cast to the dtype on the host, exactly as the CPU casts it.
// The hot ops of a training step (relu, gelu, gelu_tanh, tanh, exp,
// sigmoid, silu, neg, add/mul_scalar, and their backward rules) get
// kernels of their own; the others share one kernel per dtype that
// switches on the op (uniform across the grid). One thread per element or
// float4 vector (elementwise.cuh): deterministic.
#include <math.h>
#include <type_traits>

#include "cuda_common.cuh"
#include "elementwise.cuh"

namespace nbc {

template <typename T> constexpr bool is_f32() { return std::is_same<T, float>::value; }

// SELU's constants (Klambauer et al. 2017); float32 multiplies the two
// float-rounded constants, as the CPU's float32 loop does.
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946
template <typename T> __device__ __forceinline__ T selu_neg() {
    if constexpr (is_f32<T>()) return (float)SELU_ALPHA * (float)SELU_SCALE;
    else return SELU_ALPHA * SELU_SCALE;
}
template <typename T> __device__ __forceinline__ T selu_scale() { return (T)SELU_SCALE; }

// ---- GELU and the exp-based activations ------------------------------------------

// Phi(x), the standard normal CDF. float32: erfc(-x / sqrt 2) / 2 keeps the
// negative tail's relative accuracy (1 + erf would cancel).
template <typename T> __device__ __forceinline__ T phi_cdf(T x) {
    if constexpr (is_f32<T>()) return 0.5f * erfcf(-x * 0.70710678118654752440f);
    else return 0.5 * (1 + erf(x * 0.70710678118654752440));
}
template <typename T> __device__ __forceinline__ T gelu_val(T x) {
    if constexpr (is_f32<T>()) return x * phi_cdf(x);
    else return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
}
template <typename T> __device__ __forceinline__ T gelu_grad(T x) {
    return phi_cdf(x) + x * (m_exp((T)-0.5 * x * x) * (T)0.39894228040143267794);
}
// tanh form; float32 as the CPU's: 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)).
template <typename T> __device__ __forceinline__ T gelu_tanh_val(T x) {
    if constexpr (is_f32<T>()) {
        float u = (x + x * x * x * 0.044715f) * 0.79788456080286535588f;
        return x / (expf(u * -2.0f) + 1.0f);
    } else {
        return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    }
}
template <typename T> __device__ __forceinline__ T gelu_tanh_grad(T x) {
    if constexpr (is_f32<T>()) {
        const float k = 0.79788456080286535588f, c = 0.044715f;
        float x2 = x * x, s = 1.0f / (expf((x + x2 * x * c) * (-2.0f * k)) + 1.0f);
        return s + x * s * (1.0f - s) * ((x2 * (3.0f * c) + 1.0f) * (2.0f * k));
    } else {
        const double k = 0.79788456080286535588, c = 0.044715;
        double x2 = x * x, t = tanh(k * (x + c * x2 * x));
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (k * (1 + 3 * c * x2));
    }
}
// tanh(log(1 + e^x)). float32 as the CPU's: n / (n + 2) with n = e (e + 2),
// e = e^x (no cancellation for x < 0), and 1 above x = 20 (n would overflow).
template <typename T> __device__ __forceinline__ T tanh_softplus(T x) {
    if constexpr (is_f32<T>()) {
        if (x > 20.0f) return 1.0f;
        float e = expf(x), n = e * (e + 2.0f);
        return n / (n + 2.0f);
    } else {
        return tanh(log1p(exp(x)));
    }
}
template <typename T> __device__ __forceinline__ T mish_grad(T x) {
    T t = tanh_softplus(x), s = 1 / (1 + m_exp(-x));
    return t + x * s * (1 - t * t);
}
// min(max(x + 3, 0), 6) with NaN kept
template <typename T> __device__ __forceinline__ T r63(T x) {
    T t = x + 3;
    return t < 0 ? (T)0 : t > 6 ? (T)6 : t;
}
template <typename T> __device__ __forceinline__ T sgn(T x) { return (T)((0 < x) - (x < 0)); }

// ---- forward ----------------------------------------------------------------------

// alpha cast to T on the host; round's 10^|decimals| too (the CPU's ROUND_PRE).
template <typename T> struct UnP {
    T a, p10;
    bool neg, square;
};

template <typename T> __device__ __forceinline__ T un_float(int op, T x, const UnP<T> &p) {
    const T a = p.a;
    switch (op) {
    case NB_UNARY_NEG: return -x;
    case NB_UNARY_EXP: return m_exp(x);
    case NB_UNARY_LOG: return m_log(x);
    case NB_UNARY_SQRT: return m_sqrt(x);
    case NB_UNARY_RELU: return x > 0 || x != x ? x : (T)0; // NaN stays, -0 -> 0
    case NB_UNARY_SIGMOID: return x >= 0 ? 1 / (1 + m_exp(-x)) : m_exp(x) / (1 + m_exp(x));
    case NB_UNARY_TANH: return m_tanh(x);
    case NB_UNARY_ADD_SCALAR: return x + a;
    case NB_UNARY_MUL_SCALAR: return x * a;
    case NB_UNARY_POW_SCALAR: return p.square ? x * x : m_pow(x, a);
    case NB_UNARY_GELU: return gelu_val(x);
    case NB_UNARY_GELU_TANH: return gelu_tanh_val(x);
    case NB_UNARY_ABS: return m_fabs(x);
    case NB_UNARY_SIGN: return sgn(x);
    case NB_UNARY_FLOOR: return m_floor(x);
    case NB_UNARY_CEIL: return m_ceil(x);
    case NB_UNARY_ROUND: return a == 0 ? m_rint(x) : p.neg ? m_rint(x / p.p10) * p.p10 : m_rint(x * p.p10) / p.p10;
    case NB_UNARY_TRUNC: return m_trunc(x);
    case NB_UNARY_RECIPROCAL: return 1 / x;
    case NB_UNARY_RSQRT: return 1 / m_sqrt(x);
    case NB_UNARY_LOG1P: return m_log1p(x);
    case NB_UNARY_EXPM1: return m_expm1(x);
    case NB_UNARY_LOG2: return m_log2(x);
    case NB_UNARY_LOG10: return m_log10(x);
    case NB_UNARY_SIN: return m_sin(x);
    case NB_UNARY_COS: return m_cos(x);
    case NB_UNARY_TAN: return m_tan(x);
    case NB_UNARY_ASIN: return m_asin(x);
    case NB_UNARY_ACOS: return m_acos(x);
    case NB_UNARY_ATAN: return m_atan(x);
    case NB_UNARY_SINH: return m_sinh(x);
    case NB_UNARY_COSH: return m_cosh(x);
    case NB_UNARY_ASINH: return m_asinh(x);
    case NB_UNARY_ACOSH: return m_acosh(x);
    case NB_UNARY_ATANH: return m_atanh(x);
    case NB_UNARY_ERF: return m_erf(x);
    case NB_UNARY_ERFC: return m_erfc(x);
    case NB_UNARY_LEAKY_RELU: return x > 0 ? x : x * a;
    case NB_UNARY_ELU: return x <= 0 ? m_expm1(x) * a : x;
    case NB_UNARY_SELU: return x <= 0 ? m_expm1(x) * selu_neg<T>() : x * selu_scale<T>();
    case NB_UNARY_SILU: return x / (1 + m_exp(-x));
    case NB_UNARY_MISH: return x * tanh_softplus(x);
    case NB_UNARY_SOFTPLUS: // alpha is the threshold
        if constexpr (is_f32<T>()) return x > a ? x : (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
        else return x > a ? x : log1p(exp(x));
    case NB_UNARY_HARDTANH_MIN: return x < a ? a : x;
    case NB_UNARY_HARDTANH_MAX: return x > a ? a : x;
    case NB_UNARY_HARDSIGMOID: return r63(x) / 6;
    case NB_UNARY_HARDSWISH: return x * r63(x) / 6;
    case NB_UNARY_LOGSIGMOID: return (0 < x ? (T)0 : x) - m_log1p(m_exp(-m_fabs(x)));
    default: return x; // not reached: the host checks the (op, dtype) pair
    }
}

// Integers: arithmetic wraps through the unsigned type; abs wraps at the
// minimum; the rounding ops are the identity.
template <typename T> __device__ __forceinline__ T un_int(int op, T x, T a) {
    using UT = typename std::make_unsigned<T>::type;
    switch (op) {
    case NB_UNARY_NEG: return (T)(UT(0) - (UT)x);
    case NB_UNARY_ADD_SCALAR: return (T)((UT)x + (UT)a);
    case NB_UNARY_MUL_SCALAR: return (T)((UT)x * (UT)a);
    case NB_UNARY_ABS:
        if constexpr (std::is_unsigned<T>::value) return x;
        else return x < 0 ? (T)(UT(0) - (UT)x) : x;
    case NB_UNARY_SIGN:
        if constexpr (std::is_unsigned<T>::value) return (T)(x > 0);
        else return (T)((0 < x) - (x < 0));
    default: return x; // floor, ceil, round, trunc
    }
}

// OP >= 0: one op fixed at compile time (the switch folds away); -1: op at run time.
template <typename T, int OP> struct UnF {
    using In = T;
    using Out = T;
    static constexpr int NIN = 1;
    int op;
    UnP<T> p;
    __device__ __forceinline__ T operator()(T x) const {
        if constexpr (std::is_floating_point<T>::value) return un_float<T>(OP >= 0 ? OP : op, x, p);
        else return un_int<T>(OP >= 0 ? OP : op, x, p.a);
    }
};

// ---- backward: gx = rule(g, v; a), v = x or y as the CPU's rule reads ---------

template <typename T> __device__ __forceinline__ T ub_float(int op, T g, T v, T a) {
    switch (op) {
    case NB_UNARY_NEG: return -g;
    case NB_UNARY_EXP: return g * v;
    case NB_UNARY_LOG: return g / v;
    case NB_UNARY_SQRT: return g / (2 * v);
    case NB_UNARY_RELU: return v > 0 ? g : (T)0;
    case NB_UNARY_SIGMOID: return g * (1 - v) * v;
    case NB_UNARY_TANH: return g * (1 - v * v);
    case NB_UNARY_ADD_SCALAR: return g;
    case NB_UNARY_MUL_SCALAR: return g * a;
    case NB_UNARY_POW_SCALAR: return a == 0 ? (T)0 : g * (a * m_pow(v, a - 1));
    case NB_UNARY_GELU: return g * gelu_grad(v);
    case NB_UNARY_GELU_TANH: return g * gelu_tanh_grad(v);
    case NB_UNARY_ABS: return g * sgn(v);
    case NB_UNARY_SIGN:
    case NB_UNARY_FLOOR:
    case NB_UNARY_CEIL:
    case NB_UNARY_ROUND:
    case NB_UNARY_TRUNC: return 0; // a true 0, even for an inf or NaN g
    case NB_UNARY_RECIPROCAL: return -g * (v * v);
    case NB_UNARY_RSQRT: return (T)-0.5 * g * (v * v * v);
    case NB_UNARY_LOG1P: return g / (v + 1);
    case NB_UNARY_EXPM1: return g * (v + 1);
    case NB_UNARY_LOG2: return g / (v * (T)M_LN2);
    case NB_UNARY_LOG10: return g / (v * (T)M_LN10);
    case NB_UNARY_SIN: return g * m_cos(v);
    case NB_UNARY_COS: return g * -m_sin(v);
    case NB_UNARY_TAN: return g * (1 + v * v);
    case NB_UNARY_ASIN: return g * (1 / m_sqrt(1 - v * v));
    case NB_UNARY_ACOS: return g * -(1 / m_sqrt(1 - v * v));
    case NB_UNARY_ATAN: return g / (v * v + 1);
    case NB_UNARY_SINH: return g * m_cosh(v);
    case NB_UNARY_COSH: return g * m_sinh(v);
    case NB_UNARY_ASINH: return g * (1 / m_sqrt(v * v + 1));
    case NB_UNARY_ACOSH: return g * (1 / m_sqrt(v * v - 1));
    case NB_UNARY_ATANH: return g / (1 - v * v);
    case NB_UNARY_ERF: return (T)M_2_SQRTPI * m_exp(-(v * v)) * g;
    case NB_UNARY_ERFC: return (T)-M_2_SQRTPI * m_exp(-(v * v)) * g;
    case NB_UNARY_LEAKY_RELU: return v > 0 ? g : g * a;
    case NB_UNARY_ELU:
        if constexpr (is_f32<T>()) return g * (v <= 0 ? expf(v) * a : 1.0f);
        else return v <= 0 ? g * a * exp(v) : g;
    case NB_UNARY_SELU:
        if constexpr (is_f32<T>()) return g * (v <= 0 ? expf(v) * selu_neg<T>() : selu_scale<T>());
        else return v <= 0 ? g * selu_neg<T>() * exp(v) : g * selu_scale<T>();
    case NB_UNARY_SILU: {
        T s = 1 / (1 + m_exp(-v));
        return g * (s * (1 + v * (1 - s)));
    }
    case NB_UNARY_MISH: return g * mish_grad(v);
    case NB_UNARY_SOFTPLUS:
        if constexpr (is_f32<T>()) return g * (v > a ? 1.0f : 1.0f / (expf(-v) + 1.0f));
        else {
            double z = exp(v);
            return g * (v > a ? 1 : z / (z + 1));
        }
    case NB_UNARY_LOGSIGMOID: {
        T z = m_exp(-m_fabs(v)), q = z / (1 + z);
        return g * (v < 0 ? 1 - q : q);
    }
    case NB_UNARY_HARDTANH_MIN: return v <= a ? (T)0 : g;
    case NB_UNARY_HARDTANH_MAX: return v >= a ? (T)0 : g;
    case NB_UNARY_HARDSIGMOID: return v > -3 && v < 3 ? g * (T)(1.0 / 6) : (T)0;
    case NB_UNARY_HARDSWISH: return v < -3 ? (T)0 : v <= 3 ? g * (v / 3 + (T)0.5) : g;
    default: return 0; // not reached
    }
}

template <typename T, int OP> struct UbF {
    using In = T;
    using Out = T;
    static constexpr int NIN = 2;
    int op;
    T a;
    __device__ __forceinline__ T operator()(T g, T v) const { return ub_float<T>(OP >= 0 ? OP : op, g, v, a); }
};

// ---- host: dtypes, dispatch -----------------------------------------------

template <typename T> static nb_status un_run(nb_backend *be, nb_unary_op op, const nb_kview *out,
                                             const nb_kview *x, double alpha) {
    const char *name = nb_unary_name(op);
    UnP<T> p{};
    p.a = (T)alpha;
    if constexpr (std::is_floating_point<T>::value) {
        p.neg = p.a < 0;
        p.p10 = (T)pow(10.0, p.neg ? -(double)p.a : (double)p.a);
        p.square = op == NB_UNARY_POW_SCALAR && alpha == 2.0; // the CPU's exact x * x
#define HOT(OP) \
    case OP: return ew_launch(be, name, UnF<T, OP>{op, p}, out, x);
        switch (op) {
            HOT(NB_UNARY_RELU)
            HOT(NB_UNARY_GELU)
            HOT(NB_UNARY_GELU_TANH)
            HOT(NB_UNARY_TANH)
            HOT(NB_UNARY_EXP)
            HOT(NB_UNARY_SIGMOID)
            HOT(NB_UNARY_SILU)
            HOT(NB_UNARY_NEG)
            HOT(NB_UNARY_ADD_SCALAR)
            HOT(NB_UNARY_MUL_SCALAR)
        default: break;
        }
#undef HOT
    }
    return ew_launch(be, name, UnF<T, -1>{op, p}, out, x);
}

template <typename T> static nb_status ub_run(nb_backend *be, nb_unary_op op, const nb_kview *gx,
                                             const nb_kview *gy, const nb_kview *v, double alpha) {
    const char *name = nb_unary_name(op);
    const T a = (T)alpha;
#define HOT(OP) \
    case OP: return ew_launch(be, name, UbF<T, OP>{op, a}, gx, gy, v);
    switch (op) {
        HOT(NB_UNARY_RELU)
        HOT(NB_UNARY_GELU)
        HOT(NB_UNARY_GELU_TANH)
        HOT(NB_UNARY_TANH)
        HOT(NB_UNARY_EXP)
        HOT(NB_UNARY_SIGMOID)
        HOT(NB_UNARY_SILU)
    default: break;
    }
#undef HOT
    return ew_launch(be, name, UbF<T, -1>{op, a}, gx, gy, v);
}

// bfloat16/float16 tensors: the float32 functors through Half16 (float math
// per element, rounded back to 16 bits).
template <typename H> static nb_status un_run16(nb_backend *be, nb_unary_op op, const nb_kview *out,
                                               const nb_kview *x, double alpha) {
    const char *name = nb_unary_name(op);
    UnP<float> p{};
    p.a = (float)alpha;
    p.neg = p.a < 0;
    p.p10 = (float)pow(10.0, p.neg ? -(double)p.a : (double)p.a);
    p.square = op == NB_UNARY_POW_SCALAR && alpha == 2.0;
    switch (op) {
    case NB_UNARY_RELU: return ew_launch(be, name, Half16<UnF<float, NB_UNARY_RELU>, H>{{op, p}}, out, x);
    case NB_UNARY_GELU: return ew_launch(be, name, Half16<UnF<float, NB_UNARY_GELU>, H>{{op, p}}, out, x);
    case NB_UNARY_GELU_TANH:
        return ew_launch(be, name, Half16<UnF<float, NB_UNARY_GELU_TANH>, H>{{op, p}}, out, x);
    case NB_UNARY_MUL_SCALAR:
        return ew_launch(be, name, Half16<UnF<float, NB_UNARY_MUL_SCALAR>, H>{{op, p}}, out, x);
    default: return ew_launch(be, name, Half16<UnF<float, -1>, H>{{op, p}}, out, x);
    }
}

template <typename H> static nb_status ub_run16(nb_backend *be, nb_unary_op op, const nb_kview *gx,
                                               const nb_kview *gy, const nb_kview *v, double alpha) {
    const char *name = nb_unary_name(op);
    const float a = (float)alpha;
    switch (op) {
    case NB_UNARY_RELU: return ew_launch(be, name, Half16<UbF<float, NB_UNARY_RELU>, H>{{op, a}}, gx, gy, v);
    case NB_UNARY_GELU: return ew_launch(be, name, Half16<UbF<float, NB_UNARY_GELU>, H>{{op, a}}, gx, gy, v);
    default: return ew_launch(be, name, Half16<UbF<float, -1>, H>{{op, a}}, gx, gy, v);
    }
}

} // namespace nbc

using namespace nbc;

// op, shapes and dtypes (the op's) checked: backend/check/unary.c.
extern "C" nb_status nb_cuda_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x,
                                   double alpha) {
    switch (x->dtype) {
    case NB_BF16: return un_run16<__nv_bfloat16>(be, op, out, x, alpha);
    case NB_F16: return un_run16<__half>(be, op, out, x, alpha);
    case NB_F32: return un_run<float>(be, op, out, x, alpha);
    case NB_F64: return un_run<double>(be, op, out, x, alpha);
    case NB_I32: return un_run<int32_t>(be, op, out, x, alpha);
    case NB_I64: return un_run<int64_t>(be, op, out, x, alpha);
    default: return un_run<uint8_t>(be, op, out, x, alpha); // NB_U8
    }
}

// op, shapes, dtypes and the saved tensor the rule reads (v, never NULL)
// checked: backend/check/unary.c.
extern "C" nb_status nb_cuda_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                            const nb_kview *x, const nb_kview *y, double alpha) {
    const nb_kview *v = nb_unary_saved_view(op, gy, x, y);
    switch (gx->dtype) {
    case NB_BF16: return ub_run16<__nv_bfloat16>(be, op, gx, gy, v, alpha);
    case NB_F16: return ub_run16<__half>(be, op, gx, gy, v, alpha);
    case NB_F32: return ub_run<float>(be, op, gx, gy, v, alpha);
    default: return ub_run<double>(be, op, gx, gy, v, alpha);
    }
}
