/* nb_backend.h - the interface every device backend implements.
 *
 * Ops in autograd/ validate shapes and dtypes, allocate outputs and then
 * call one of these kernels through the tensor's backend; nothing outside
 * backend/ dereferences tensor data. A kernel sees plain views (nb_kview):
 * a data pointer already offset to the first element, dtype, shape and
 * strides in elements. Strides may be 0 (a broadcast input) or arbitrary
 * (a transposed view) unless a slot says "contiguous". Output views never
 * overlap inputs, except that copy, binary, unary and unary_backward allow
 * an output that is exactly the same view as an input (in-place updates
 * such as grad += g): elementwise kernels read an element before writing it. A kernel returns NB_OK,
 * or an error status with nb_last_error() set (nb_set_error in nb_impl.h).
 *
 * A backend is `struct nb_backend { iface, context }` (ggml's layout): the
 * CPU backend is backend/cpu, a CUDA backend (later) is backend/cuda and
 * registers itself the same way; no #ifdef for a device outside its folder.
 * Optional slots may be NULL; callers then fail with NB_ERR_UNSUPPORTED.
 */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NB_BACKEND_INTERFACE_VERSION 1

typedef struct nb_kview {
    void *data; /* first element */
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    int64_t strides[NB_MAX_DIMS]; /* elements; 0 = broadcast */
} nb_kview;

/* Elementwise binary ops: out = a OP b; a and b are already expanded to
 * out's shape. Comparisons write bool (0/1 bytes) into a bool out. */
typedef enum nb_binary_op {
    NB_BINARY_ADD, NB_BINARY_SUB, NB_BINARY_MUL, NB_BINARY_DIV, NB_BINARY_POW,
    NB_BINARY_MAXIMUM, NB_BINARY_MINIMUM,
    NB_BINARY_EQ, NB_BINARY_NE, NB_BINARY_GT, NB_BINARY_GE, NB_BINARY_LT, NB_BINARY_LE,
    NB_BINARY_OP_COUNT
} nb_binary_op;

/* Elementwise unary ops: out = f(x; alpha). */
typedef enum nb_unary_op {
    NB_UNARY_NEG, NB_UNARY_EXP, NB_UNARY_LOG, NB_UNARY_SQRT, NB_UNARY_RELU,
    NB_UNARY_SIGMOID, NB_UNARY_TANH,
    NB_UNARY_ADD_SCALAR, /* x + alpha */
    NB_UNARY_MUL_SCALAR, /* x * alpha */
    NB_UNARY_POW_SCALAR, /* x ** alpha */
    NB_UNARY_OP_COUNT
} nb_unary_op;

typedef enum nb_reduce_op { NB_REDUCE_SUM, NB_REDUCE_MAX, NB_REDUCE_MIN, NB_REDUCE_OP_COUNT } nb_reduce_op;

typedef enum nb_rng_dist { NB_RNG_UNIFORM, NB_RNG_NORMAL, NB_RNG_BERNOULLI } nb_rng_dist;

/* Hyperparameters of one Adam/AdamW update (torch.optim.Adam / AdamW docs). */
typedef struct nb_adam_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: p -= lr*wd*p before the Adam step; Adam: g += wd*p */
    bool amsgrad;
    bool maximize;
    int64_t step;   /* this update's step count, from 1 */
} nb_adam_hyper;

/* Hyperparameters of one SGD update (torch.optim.SGD docs). */
typedef struct nb_sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool maximize;
    bool first_step; /* momentum buffer is initialised to g (no dampening) */
} nb_sgd_hyper;

typedef struct nb_backend nb_backend;

struct nb_backend_i {
    /* raw device memory; the caching allocator in core/ sits above these */
    void *(*alloc)(nb_backend *be, size_t bytes);
    void (*free)(nb_backend *be, void *ptr, size_t bytes);
    nb_status (*memcpy_to_host)(nb_backend *be, void *dst, const void *src, size_t bytes);
    nb_status (*memcpy_from_host)(nb_backend *be, void *dst, const void *src, size_t bytes);
    void (*set_num_threads)(nb_backend *be, int n);

    /* dst = cast(src); src expanded to dst's shape; any strides. */
    nb_status (*copy)(nb_backend *be, const nb_kview *dst, const nb_kview *src);
    nb_status (*fill)(nb_backend *be, const nb_kview *dst, double value);
    nb_status (*binary)(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                        const nb_kview *b);
    nb_status (*unary)(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x,
                       double alpha);
    /* gx = gy * d op(x; alpha)/dx for the differentiable unary ops; y is op's
     * output (the rule uses whichever of x, y it needs). All same shape. */
    nb_status (*unary_backward)(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                const nb_kview *x, const nb_kview *y, double alpha);
    /* out = scale * reduce(x) over the dims where out's size is 1 and x's is
     * not (out has x's ndim). Deterministic order for any thread count. */
    nb_status (*reduce)(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x,
                        double scale);
    /* values/indices (int64) of the first max along dim; out views have x's
     * ndim with size 1 at dim; values may be NULL. */
    nb_status (*argmax)(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim);
    /* c = alpha * a @ b + beta * c over the leading (batch) dims.
     * a [..., m, k], b [..., k, n], c [..., m, n] with equal ndim >= 2; batch
     * dims of a and b already expanded (stride 0 allowed); each matrix of a
     * and b has unit stride in one of its last two dims; c is contiguous. */
    nb_status (*matmul)(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                        double alpha, double beta);
    /* Contiguous out/x; along dim. log selects log_softmax. */
    nb_status (*softmax)(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log);
    /* gx from gy and the forward output y (all contiguous, same shape). */
    nb_status (*softmax_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *y, int dim, bool log);
    /* logits [n, c] contiguous; target [n] int64. loss[i] = lse_i - x[i, t_i]
     * (0 where t_i == ignore_index); lse [n] saved for backward.
     * NB_ERR_INVALID_ARG for a target outside [0, c). */
    nb_status (*cross_entropy)(nb_backend *be, const nb_kview *loss, const nb_kview *lse,
                               const nb_kview *logits, const nb_kview *target, int64_t ignore_index);
    /* glogits[i, j] = gloss[i] * (softmax(x_i)_j - [j == t_i]); 0 rows for ignored targets. */
    nb_status (*cross_entropy_backward)(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                        const nb_kview *logits, const nb_kview *lse,
                                        const nb_kview *target, int64_t ignore_index);
    /* Fills contiguous dst from Philox(seed) starting at counter block
     * `offset`, by the layout in core/philox.h (nb_philox_blocks). */
    nb_status (*random)(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                        uint64_t seed, uint64_t offset);
    /* In-place optimizer updates of contiguous tensors of one shape.
     * max_exp_avg_sq is NULL unless amsgrad; momentum_buf NULL if momentum 0. */
    nb_status (*adam_step)(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                           const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h);
    nb_status (*sgd_step)(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                          const nb_kview *momentum_buf, const nb_sgd_hyper *h);
};

struct nb_backend {
    const struct nb_backend_i *iface;
    nb_device_type type;
    const char *name;
    int version; /* NB_BACKEND_INTERFACE_VERSION it was built against */
    void *context;
};

/* Registers a backend for its device type (the CPU backend is built in).
 * Errors: NB_ERR_INVALID_ARG on a version mismatch. */
nb_status nb_backend_register(nb_backend *be);
/* The backend of a device, or NULL (with an error set) if none. */
nb_backend *nb_backend_get(nb_device dev);

#ifdef __cplusplus
}
#endif
#endif
