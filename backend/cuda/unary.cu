// unary.cu - the unary family on CUDA: slots unary (out = f(x; alpha)) and
// unary_backward (gx = gy * f'(x or y; alpha)) for every nb_unary_op, and
// silu_mul (the SwiGLU product, silu(a) * b, in one pass), with
// the CPU backend's dtypes. Float formulas are nb_scalar_math.h's, the
// ones the CPU runs: float64 gives the CPU's values on CUDA's libm, float32
// the same formulas with CUDA's float functions (a few ulp from the CPU's
// vector loops; the harness's float32 tolerance is 2e-5); 16-bit tensors
// compute in float32. Integers take neg/add/mul_scalar (wrapping), abs,
// sign and the rounding ops (identity). alpha is cast to the dtype on the
// host, exactly as the CPU casts it. The hot ops of a training step (relu,
// gelu, gelu_tanh, tanh, exp, sigmoid, silu, neg, add/mul_scalar, and their
// backward rules) get kernels of their own; the others share one kernel
// per dtype that switches on the op (uniform across the grid). One thread
// per element or float4 vector (elementwise.cuh): deterministic.
#include <math.h>
#include <type_traits>

#include "cuda_common.cuh"
#include "elementwise.cuh"
#include "nb_scalar_math.h"

namespace nbc {

// ---- forward ----------------------------------------------------------------------

// A call's parameters: floats take nb_scalar_math.h's (alpha and round's
// 10^|d|, prepared on the host), integers alpha cast to T.
template <typename T, bool F = std::is_floating_point<T>::value> struct UnParams {
    using type = T;
    static T prep(int, double alpha) { return (T)alpha; }
};
template <typename T> struct UnParams<T, true> {
    using type = typename nb_sm_of<T>::unary_args;
    static type prep(int op, double alpha) { return nb_sm_of<T>::unary_prep(op, alpha); }
};
template <typename T> using UnP = typename UnParams<T>::type;

// Integers: nb_scalar_math.h's (wrapping arithmetic; abs, sign; the rounding ops the identity).
template <typename T> __device__ __forceinline__ T un_int(int op, T x, T a) {
    if constexpr (std::is_same<T, uint8_t>::value) return nb_sm_unary_u8(op, x, a);
    else return nb_sm_of<T>::unary(op, x, a);
}

// OP >= 0: one op fixed at compile time (the switch folds away); -1: op at run time.
template <typename T, int OP> struct UnF {
    using In = T;
    using Out = T;
    static constexpr int NIN = 1;
    int op;
    UnP<T> p;
    __device__ __forceinline__ T operator()(T x) const {
        if constexpr (std::is_floating_point<T>::value) return nb_sm_of<T>::unary(OP >= 0 ? OP : op, x, &p);
        else return un_int<T>(OP >= 0 ? OP : op, x, p);
    }
};

// ---- backward: gx = rule(g, v; a), v = x or y as nb_unary_saved_of(op) says ---------

template <typename T, int OP> struct UbF {
    using In = T;
    using Out = T;
    static constexpr int NIN = 2;
    int op;
    T a;
    __device__ __forceinline__ T operator()(T g, T v) const { return nb_sm_of<T>::unary_backward(OP >= 0 ? OP : op, g, v, a); }
};

// ---- host: dtypes, dispatch -----------------------------------------------

// The hot ops, each with a kernel of its own (X is a `case` per op), for
// every float dtype: a 16-bit SiLU through the run-time switch's kernel
// took 16 us over 8192 values (a decode step's MLP, ncu).
#define UN_HOT_BACKWARD(X) \
    X(NB_UNARY_RELU) X(NB_UNARY_GELU) X(NB_UNARY_GELU_TANH) X(NB_UNARY_TANH) X(NB_UNARY_EXP) X(NB_UNARY_SIGMOID) \
    X(NB_UNARY_SILU)
#define UN_HOT_FORWARD(X) UN_HOT_BACKWARD(X) X(NB_UNARY_NEG) X(NB_UNARY_ADD_SCALAR) X(NB_UNARY_MUL_SCALAR)

template <typename T> static nb_status un_run(nb_backend *be, nb_unary_op op, const nb_kview *out,
                                             const nb_kview *x, double alpha) {
    const char *name = nb_unary_name(op);
    const UnP<T> p = UnParams<T>::prep(op, alpha);
    if constexpr (std::is_floating_point<T>::value) {
#define HOT(OP) \
    case OP: return ew_launch(be, name, UnF<T, OP>{op, p}, out, x);
        switch (op) {
            UN_HOT_FORWARD(HOT)
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
        UN_HOT_BACKWARD(HOT)
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
    const UnP<float> p = UnParams<float>::prep(op, alpha);
#define HOT(OP) \
    case OP: return ew_launch(be, name, Half16<UnF<float, OP>, H>{{op, p}}, out, x);
    switch (op) {
        UN_HOT_FORWARD(HOT)
    default: break;
    }
#undef HOT
    return ew_launch(be, name, Half16<UnF<float, -1>, H>{{op, p}}, out, x);
}

template <typename H> static nb_status ub_run16(nb_backend *be, nb_unary_op op, const nb_kview *gx,
                                               const nb_kview *gy, const nb_kview *v, double alpha) {
    const char *name = nb_unary_name(op);
    const float a = (float)alpha;
#define HOT(OP) \
    case OP: return ew_launch(be, name, Half16<UbF<float, OP>, H>{{op, a}}, gx, gy, v);
    switch (op) {
        UN_HOT_BACKWARD(HOT)
    default: break;
    }
#undef HOT
    return ew_launch(be, name, Half16<UbF<float, -1>, H>{{op, a}}, gx, gy, v);
}

// ---- silu_mul: silu(a) * b, silu(a) rounded to the dtype first (the unary and binary slots' bits) ----------

// T's arithmetic type A: float for the 16-bit floats (each result rounded to T, as the two slots store it).
template <typename T> struct SiluMulF {
    using In = T;
    using Out = T;
    using A = typename Traits<T>::acc;
    static constexpr int NIN = 2;
    UnP<A> p;
    __device__ __forceinline__ T operator()(T a, T b) const {
        const T s = Traits<T>::store(nb_sm_of<A>::unary(NB_UNARY_SILU, Traits<T>::load(a), &p));
        return Traits<T>::store(Traits<T>::load(s) * Traits<T>::load(b));
    }
};

} // namespace nbc

using namespace nbc;

// shapes and dtypes checked: backend/check/unary.c.
extern "C" nb_status nb_cuda_silu_mul(nb_backend *be, const nb_kview *out, const nb_kview *a, const nb_kview *b) {
    return dispatch_floating("silu_mul", a->dtype, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        using A = typename Traits<T>::acc;
        return ew_launch(be, "silu_mul", SiluMulF<T>{UnParams<A>::prep(NB_UNARY_SILU, 0)}, out, a, b);
    });
}

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
    case NB_I8: return un_run<int8_t>(be, op, out, x, alpha);
    case NB_I16: return un_run<int16_t>(be, op, out, x, alpha);
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
