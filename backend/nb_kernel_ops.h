/* nb_kernel_ops.h - the ops and hyperparameters that the scalar formulas
 * (nb_scalar_math.h) take: the binary and unary op enums, Adam's and SGD's
 * hyperparameters, fake quantization's parameters. Split from nb_backend.h
 * (which includes it) because it includes no other nabla header: the
 * CUDA backend's run-time compiler (backend/cuda/jit.cu) hands it to NVRTC
 * with nb_scalar_math.h, so generated kernels evaluate the same formulas
 * as the compiled ones. Under NVRTC (__CUDACC_RTC__) the includer defines
 * the fixed-width integer types. */
#ifndef NB_KERNEL_OPS_H
#define NB_KERNEL_OPS_H

#ifndef __CUDACC_RTC__
#include <stdbool.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise binary ops: out = a OP b; a and b are already expanded to
 * out's shape. Comparisons write bool (0/1 bytes) into a bool out. */
typedef enum nb_binary_op {
    NB_BINARY_ADD, NB_BINARY_SUB, NB_BINARY_MUL, NB_BINARY_DIV, NB_BINARY_POW,
    NB_BINARY_MAXIMUM, NB_BINARY_MINIMUM,
    NB_BINARY_EQ, NB_BINARY_NE, NB_BINARY_GT, NB_BINARY_GE, NB_BINARY_LT, NB_BINARY_LE,
    /* op coverage: binary, logic (backend/cpu/binary.c). out has a's dtype.
     * The integer forms of div_trunc, div_floor, remainder and fmod fail with
     * NB_ERR_INVALID_ARG ("<op>: integer division by zero") if b holds a 0
     * (out is then unspecified; never a trap), and INT_MIN / -1 wraps. */
    NB_BINARY_REMAINDER, /* a - floor(a / b) * b: the sign of b (Python's %) */
    NB_BINARY_FMOD,      /* C's fmod / %: the sign of a */
    NB_BINARY_ATAN2,     /* atan2(a, b); floats only */
    NB_BINARY_DIV_TRUNC, /* a / b rounded toward zero */
    NB_BINARY_DIV_FLOOR, /* a / b rounded down (PyTorch's div_floor for floats) */
    NB_BINARY_BITWISE_AND, NB_BINARY_BITWISE_OR, NB_BINARY_BITWISE_XOR, /* integers, bool */
    /* integers: a shift by < 0 or >= the bit width gives 0 (left) or the sign
     * fill (right; arithmetic for signed types), as PyTorch's CPU kernels */
    NB_BINARY_LSHIFT, NB_BINARY_RSHIFT,
    NB_BINARY_OP_COUNT
} nb_binary_op;

/* clang-format off */
/* Elementwise unary ops: out = f(x; alpha), one row each (the one list of
 * them: the enum, their names and what their backward reads come from it):
 *   X(ID, name, saved, api)
 *   ID     NB_UNARY_<ID>
 *   name   the op's name in messages
 *   saved  which tensor of the forward unary_backward's rule reads: IN the
 *          input x, OUT the output y, EITHER of them, NONE (gy alone)
 *   api    GEN: the public op nb_<name>(x), op table row NB_OP_<ID>, is
 *          generated from this row (autograd/ops_unary.c), and so are its
 *          NULL-argument test and its differential-test handler; HAND: the
 *          public op takes more arguments, or serves another op, and is
 *          written by hand
 * Formulas and backward rules are PyTorch's (ATen CPU kernels,
 * tools/autograd/derivatives.yaml). abs, sign, floor, ceil, trunc and round
 * (alpha 0) also take int32/int64/uint8 (the last four as identity); neg
 * and the scalar forms take the integers too; each op's dtypes are checked
 * by backend/check/unary.c. */
#define NB_UNARY_OPS(X) \
    X(NEG, neg, NONE, GEN) \
    X(EXP, exp, OUT, GEN) \
    X(LOG, log, IN, GEN) \
    X(SQRT, sqrt, OUT, GEN) \
    X(RELU, relu, EITHER, GEN)              /* the rule reads either: x > 0 iff y > 0 */ \
    X(SIGMOID, sigmoid, OUT, GEN) \
    X(TANH, tanh, OUT, GEN) \
    X(ADD_SCALAR, add_scalar, NONE, HAND)   /* x + alpha */ \
    X(MUL_SCALAR, mul_scalar, NONE, HAND)   /* x * alpha */ \
    X(POW_SCALAR, pow_scalar, IN, HAND)     /* x ** alpha */ \
    X(GELU, gelu, IN, HAND)                 /* x * Phi(x), exact (erf) */ \
    X(GELU_TANH, gelu_tanh, IN, HAND)       /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */ \
    X(ABS, abs, IN, GEN) \
    X(SIGN, sign, NONE, GEN)                /* sign(0) = sign(NaN) = 0 */ \
    X(FLOOR, floor, NONE, GEN) \
    X(CEIL, ceil, NONE, GEN) \
    X(ROUND, round, NONE, GEN)              /* half to even; alpha = decimals: rint(x 10^d) / 10^d (d < 0: rint(x / 10^-d) 10^-d) */ \
    X(TRUNC, trunc, NONE, GEN) \
    X(RECIPROCAL, reciprocal, OUT, GEN) \
    X(RSQRT, rsqrt, OUT, GEN) \
    X(LOG1P, log1p, IN, GEN) \
    X(EXPM1, expm1, OUT, GEN) \
    X(LOG2, log2, IN, GEN) \
    X(LOG10, log10, IN, GEN) \
    X(SIN, sin, IN, GEN) \
    X(COS, cos, IN, GEN) \
    X(TAN, tan, OUT, GEN) \
    X(ASIN, asin, IN, GEN) \
    X(ACOS, acos, IN, GEN) \
    X(ATAN, atan, IN, GEN) \
    X(SINH, sinh, IN, GEN) \
    X(COSH, cosh, IN, GEN) \
    X(ASINH, asinh, IN, GEN) \
    X(ACOSH, acosh, IN, GEN) \
    X(ATANH, atanh, IN, GEN) \
    X(ERF, erf, IN, GEN) \
    X(ERFC, erfc, IN, GEN) \
    X(LEAKY_RELU, leaky_relu, IN, HAND)     /* x > 0 ? x : alpha x */ \
    X(ELU, elu, IN, HAND)                   /* x > 0 ? x : alpha (e^x - 1) */ \
    X(SELU, selu, IN, GEN)                  /* scale (x > 0 ? x : a (e^x - 1)), Klambauer et al. 2017 constants */ \
    X(SILU, silu, IN, GEN)                  /* x sigmoid(x) */ \
    X(MISH, mish, IN, GEN)                  /* x tanh(log(1 + e^x)) */ \
    X(SOFTPLUS, softplus, IN, HAND)         /* beta 1, threshold alpha: x > alpha ? x : log(1 + e^x) */ \
    X(HARDTANH_MIN, hardtanh, IN, HAND)     /* max(x, alpha); gradient 0 where x <= alpha (hardtanh's lower side) */ \
    X(HARDTANH_MAX, hardtanh, IN, HAND)     /* min(x, alpha); gradient 0 where x >= alpha (hardtanh's upper side) */ \
    X(HARDSIGMOID, hardsigmoid, IN, GEN)    /* min(max(x + 3, 0), 6) / 6 */ \
    X(HARDSWISH, hardswish, IN, GEN)        /* x min(max(x + 3, 0), 6) / 6 */ \
    X(LOGSIGMOID, logsigmoid, IN, GEN)      /* min(x, 0) - log1p(e^-|x|) */
/* clang-format on */
/* The elementwise unary ops: NB_UNARY_<ID> for each row of NB_UNARY_OPS, in its order, then
 * NB_UNARY_OP_COUNT; the op argument of the unary and unary_backward slots. */
typedef enum nb_unary_op {
/* The X of NB_UNARY_OPS that makes a row its enumerator NB_UNARY_<ID> (defined only inside this enum). */
#define NB_UNARY_ENUM(id, name, saved, api) NB_UNARY_##id,
    NB_UNARY_OPS(NB_UNARY_ENUM)
#undef NB_UNARY_ENUM
    NB_UNARY_OP_COUNT
} nb_unary_op;

/* Hyperparameters of one Adam/AdamW update (torch.optim.Adam / AdamW docs). */
typedef struct nb_adam_hyper {
    double lr,          /* the learning rate (unless lr_dev) */
        beta1,          /* exp_avg's decay: m = beta1*m + (1 - beta1)*g (PyTorch's betas[0]) */
        beta2,          /* exp_avg_sq's decay: v = beta2*v + (1 - beta2)*g*g (betas[1]) */
        eps,            /* added to sqrt(v / (1 - beta2^step)) in the denominator */
        weight_decay;   /* wd, 0 = none (see decoupled) */
    bool decoupled; /* AdamW: p -= lr*wd*p before the Adam step; Adam: g += wd*p */
    bool amsgrad;   /* the denominator uses max_exp_avg_sq = max(itself, v) (that view is then required) */
    bool maximize;  /* ascend: the gradient is negated first */
    int64_t step;   /* this update's step count, from 1 */
    /* Capturable form (PyTorch's capturable=True), for steps replayed in a
     * CUDA graph: NULL, or device memory read when the kernel runs instead
     * of lr and step. lr_dev: one float64. step_dev: n pointers (one per
     * tensor of the call, host array) to float64 step counters in device
     * memory, which the call increments before using them (all n hold the
     * same count). Only the multi-tensor slot takes them. */
    const double *lr_dev;
    double *const *step_dev; /* NULL, or the n device step counters above, read instead of step */
} nb_adam_hyper;

/* Hyperparameters of one SGD update (torch.optim.SGD docs). */
typedef struct nb_sgd_hyper {
    double lr,         /* the learning rate (unless lr_dev) */
        momentum,      /* buf = momentum*buf + (1 - dampening)*g; 0 = none (no buffer) */
        dampening,     /* see momentum; 0 = none */
        weight_decay;  /* g += weight_decay*p; 0 = none */
    bool nesterov;   /* the step uses g + momentum*buf instead of buf */
    bool maximize;   /* ascend: the gradient is negated first */
    bool first_step; /* momentum buffer is initialised to g (no dampening) */
    const double *lr_dev; /* NULL, or a device float64 read instead of lr (capturable) */
} nb_sgd_hyper;

/* Fake quantization (torch.fake_quantize_per_tensor_affine /
 * per_channel_affine and their learnable variants): the integer range, how
 * the zero point enters (see nb_sm_fq_level_f32, nb_scalar_math_float.t.h),
 * and the factor of the learnable variants' scale and zero-point gradients. */
typedef struct nb_fake_quant_params {
    int64_t quant_min, quant_max; /* quant_min <= quant_max */
    bool zp_float;      /* q = rint(z + x/s), rounded through float (a float zero point), not z + rint(x/s) */
    double grad_factor; /* fake_quantize_backward: gscale and gzp are multiplied by it */
} nb_fake_quant_params;

#ifdef __cplusplus
}
#endif
#endif
