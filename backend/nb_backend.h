/* nb_backend.h - the interface every device backend implements (version 3).
 *
 * ---- Backends and devices ----------------------------------------------------
 * A backend is an instance per device: `struct nb_backend { iface, context,
 * device }` (ggml's layout), one for cpu:0, one for each cuda:N. The context
 * owns what the device needs (streams, library handles, workspaces). Core
 * finds instances through a registry keyed by (device type, index)
 * (nb_backend_get); core names no backend: each backend's init function is
 * listed in backend/registry.c (written by meson from the enabled backends)
 * and registers the devices it finds with nb_backend_register. No #ifdef for
 * a device outside its folder.
 *
 * ---- Kernels ------------------------------------------------------------------
 * Ops in autograd/ validate shapes and dtypes, ask `supports` (the op table
 * row and the backend's own answer), allocate outputs and then call one of
 * these kernels through the tensor's backend; nothing outside backend/
 * dereferences tensor data. A kernel sees plain views (nb_kview): a data
 * pointer already offset to the first element, dtype, shape and strides in
 * elements. Strides may be 0 (a broadcast input) or arbitrary (a transposed
 * view) unless a slot says "contiguous". Output views never overlap inputs,
 * except that copy, binary, unary and unary_backward allow an output that is
 * exactly the same view as an input (in-place updates such as grad += g):
 * elementwise kernels read an element before writing it.
 *
 * ---- Execution model ------------------------------------------------------------
 * Kernels and copies ENQUEUE work on the calling thread's current stream of
 * the backend's device (nb_current_stream; the device's compute stream unless
 * nb_set_current_stream chose another): they may return before the work is
 * done, and results are host-visible only after a sync point:
 * `synchronize`, `stream_synchronize`, `event_synchronize`, or the core calls
 * built on them (nb_device_synchronize, nb_to_host, nb_item). Work on one
 * stream runs in enqueue order; streams order against each other only through
 * events (event_record on one, event_wait on another). Every device has at
 * least a compute and a copy stream. The CPU backend runs every kernel
 * before returning, so its streams and events are the synchronous no-ops
 * they are there, and nothing changes for CPU users.
 *
 * ---- Errors ----------------------------------------------------------------------
 * A kernel returns NB_OK or an error status with nb_last_error() set
 * (nb_set_error in nb_impl.h). Argument, shape, dtype and device errors are
 * synchronous: ops check them before any launch. Data-dependent errors (an
 * index out of range, a cross-entropy target outside [0, C), integer
 * division by zero, a singular or non-positive-definite matrix) may be
 * reported late by an asynchronous backend: its kernels set a per-stream
 * device error word (the code and the op that raised it), and the next sync
 * point on that stream returns the error with a message naming the op; the
 * outputs of a failed kernel are unspecified. With NB_SYNC_DEBUG=1 in the
 * environment, core synchronizes after every kernel, so a failure names its
 * op at once (the CPU backend always reports at the call). Failed CUDA calls
 * become nabla errors naming the call, the op and the reason.
 *
 * ---- Memory --------------------------------------------------------------------
 * `alloc`/`free` are the raw device allocator (cudaMalloc, aligned_alloc);
 * core's caching allocator (core/alloc.c) sits above them: blocks remember the
 * stream they were allocated on and are reused only on that stream, and a
 * tensor used on another stream is marked with nb_record_stream, which defers
 * the reuse of its block until an event recorded on that stream has
 * completed (PyTorch's CUDACachingAllocator design). `host_alloc` gives pinned
 * host memory (cudaMallocHost) for asynchronous copies; `memcpy_*` copy on a
 * stream (asynchronous when the host side is pinned); `memcpy_peer` copies
 * between two devices (of any backends) without a bounce through pageable
 * host memory where the hardware allows.
 *
 * ---- Determinism ----------------------------------------------------------------
 * Every backend is deterministic run to run: the same inputs, build, device,
 * thread count and launch configuration give the same bits (no atomics in
 * reductions, scatters, embedding or attention backward; fixed reduction
 * trees). Results are NOT bitwise equal across backends (different
 * reduction trees, FMA contraction, TF32/bf16): the op harness compares
 * backends with per-op tolerances. The CPU backend is moreover bitwise equal
 * at any thread count (fixed 4096-element reduction blocks).
 *
 * ---- Adding a backend ---------------------------------------------------------
 * 1. A folder backend/<name>/ with one file per op family, as backend/cpu/.
 * 2. An nb_backend_i with the slots it implements (optional slots NULL:
 *    callers get NB_ERR_UNSUPPORTED naming the slot and the backend), a
 *    `supports` answer for the op table's (op, dtype) cells it runs, and the
 *    execution/memory slots.
 * 3. An init function `nb_status nb_<name>_backend_init(void)` that creates
 *    one nb_backend per device it finds (device index set, version
 *    NB_BACKEND_INTERFACE_VERSION) and calls nb_backend_register for each;
 *    listed in backend/meson.build so registry.c calls it.
 * 4. Its cases in the op harness (tests/test_op_harness.c) run on it
 *    unchanged: every registered device, every dtype it supports.
 */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include "nb_core.h"
#include "nb_op_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the op-coverage slots; 3: per-device instances, streams, events,
 * stream-ordered memory, the capability query. */
#define NB_BACKEND_INTERFACE_VERSION 3

/* bfloat16 or float16: storage dtypes whose arithmetic runs in float32. */
static inline bool nb_dtype_is_16bit(nb_dtype dt) { return dt == NB_BF16 || dt == NB_F16; }

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

/* Elementwise unary ops: out = f(x; alpha). */
typedef enum nb_unary_op {
    NB_UNARY_NEG, NB_UNARY_EXP, NB_UNARY_LOG, NB_UNARY_SQRT, NB_UNARY_RELU,
    NB_UNARY_SIGMOID, NB_UNARY_TANH,
    NB_UNARY_ADD_SCALAR, /* x + alpha */
    NB_UNARY_MUL_SCALAR, /* x * alpha */
    NB_UNARY_POW_SCALAR, /* x ** alpha */
    NB_UNARY_GELU,       /* x * Phi(x), exact (erf) */
    NB_UNARY_GELU_TANH,  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    /* op coverage: unary math and activations (backend/cpu/unary_math.c).
     * Formulas and backward rules are PyTorch's (ATen CPU kernels,
     * tools/autograd/derivatives.yaml). abs, sign, floor, ceil, trunc and
     * round (alpha 0) also take int32/int64/uint8 (the last four as
     * identity); the rest are float32/float64 only. */
    NB_UNARY_ABS, NB_UNARY_SIGN, /* sign(0) = sign(NaN) = 0 */
    NB_UNARY_FLOOR, NB_UNARY_CEIL,
    NB_UNARY_ROUND,       /* half to even; alpha = decimals: rint(x 10^d) / 10^d (d < 0: rint(x / 10^-d) 10^-d) */
    NB_UNARY_TRUNC, NB_UNARY_RECIPROCAL, NB_UNARY_RSQRT, NB_UNARY_LOG1P, NB_UNARY_EXPM1,
    NB_UNARY_LOG2, NB_UNARY_LOG10, NB_UNARY_SIN, NB_UNARY_COS, NB_UNARY_TAN, NB_UNARY_ASIN,
    NB_UNARY_ACOS, NB_UNARY_ATAN, NB_UNARY_SINH, NB_UNARY_COSH, NB_UNARY_ASINH, NB_UNARY_ACOSH,
    NB_UNARY_ATANH, NB_UNARY_ERF, NB_UNARY_ERFC,
    NB_UNARY_LEAKY_RELU,  /* x > 0 ? x : alpha x */
    NB_UNARY_ELU,         /* x > 0 ? x : alpha (e^x - 1) */
    NB_UNARY_SELU,        /* scale (x > 0 ? x : a (e^x - 1)), Klambauer et al. 2017 constants */
    NB_UNARY_SILU,        /* x sigmoid(x) */
    NB_UNARY_MISH,        /* x tanh(log(1 + e^x)) */
    NB_UNARY_SOFTPLUS,    /* beta 1, threshold alpha: x > alpha ? x : log(1 + e^x) */
    NB_UNARY_HARDTANH_MIN, /* max(x, alpha); gradient 0 where x <= alpha (hardtanh's lower side) */
    NB_UNARY_HARDTANH_MAX, /* min(x, alpha); gradient 0 where x >= alpha (hardtanh's upper side) */
    NB_UNARY_HARDSIGMOID, /* min(max(x + 3, 0), 6) / 6 */
    NB_UNARY_HARDSWISH,   /* x min(max(x + 3, 0), 6) / 6 */
    NB_UNARY_LOGSIGMOID,  /* min(x, 0) - log1p(e^-|x|) */
    NB_UNARY_OP_COUNT
} nb_unary_op;

typedef enum nb_reduce_op { NB_REDUCE_SUM, NB_REDUCE_MAX, NB_REDUCE_MIN,
    NB_REDUCE_PROD,      /* reduce and scan (empty product = 1) */
    NB_REDUCE_LOGSUMEXP, /* scan only (logcumsumexp) */
    NB_REDUCE_OP_COUNT } nb_reduce_op;

/* How scatter combines a source with its destination (torch.scatter and
 * scatter_reduce's reduce names). */
typedef enum nb_scatter_mode {
    NB_SCATTER_ASSIGN, NB_SCATTER_SUM, NB_SCATTER_PROD, NB_SCATTER_MEAN, NB_SCATTER_AMAX, NB_SCATTER_AMIN,
    NB_SCATTER_MODE_COUNT
} nb_scatter_mode;

typedef enum nb_rng_dist { NB_RNG_UNIFORM, NB_RNG_NORMAL, NB_RNG_BERNOULLI } nb_rng_dist;

/* Hyperparameters of one Adam/AdamW update (torch.optim.Adam / AdamW docs). */
typedef struct nb_adam_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: p -= lr*wd*p before the Adam step; Adam: g += wd*p */
    bool amsgrad;
    bool maximize;
    int64_t step;   /* this update's step count, from 1 */
    /* Capturable form (PyTorch's capturable=True), for steps replayed in a
     * CUDA graph: NULL, or device memory read when the kernel runs instead
     * of lr and step. lr_dev: one float64. step_dev: n pointers (one per
     * tensor of the call, host array) to float64 step counters in device
     * memory, which the call increments before using them (all n hold the
     * same count). Only the multi-tensor slot takes them. */
    const double *lr_dev;
    double *const *step_dev;
} nb_adam_hyper;

/* Hyperparameters of one SGD update (torch.optim.SGD docs). */
typedef struct nb_sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool maximize;
    bool first_step; /* momentum buffer is initialised to g (no dampening) */
    const double *lr_dev; /* NULL, or a device float64 read instead of lr (capturable) */
} nb_sgd_hyper;

/* Geometry of a 2-d convolution (conv1d runs as conv2d with H = 1), as
 * torch.nn.functional.conv2d / conv_transpose2d. */
typedef struct nb_conv_params {
    int64_t stride[2], padding[2], dilation[2];
    int64_t output_padding[2]; /* conv_transpose2d only */
    int64_t groups;
} nb_conv_params;

/* Geometry of a 2-d pooling window (pool1d runs as pool2d with H = 1), as
 * torch.nn.functional.max_pool2d / avg_pool2d. The output size per dim is
 * floor or ceil((in + 2*pad - dilation*(k-1) - 1) / stride) + 1, with
 * PyTorch's rule that the last window must start inside the padded input. */
typedef struct nb_pool_params {
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode;
    bool count_include_pad; /* avg_pool2d */
    int64_t divisor_override; /* avg_pool2d; 0 = none */
} nb_pool_params;

typedef struct nb_backend nb_backend;

/* Optimizer-step kernels for the `supports` query (they are slots, not ops
 * of the op table): ids after the table's. */
typedef enum nb_kernel_id {
    NB_KERNEL_ADAM_STEP = NB_OP_COUNT,
    NB_KERNEL_SGD_STEP,
    NB_KERNEL_ID_END
} nb_kernel_id;

/* Which of a device's streams. */
typedef enum nb_stream_kind { NB_STREAM_COMPUTE, NB_STREAM_COPY, NB_STREAM_KIND_COUNT } nb_stream_kind;

struct nb_backend_i {
    /* Capability query (ggml's supports_op): whether the backend runs op (an
     * nb_op_id of nb_op_table.h, or an nb_kernel_id below) on inputs of dtype
     * dt. Called only for dtypes the op's table row accepts. NULL: every
     * row's dtypes. Ops consult it before launching, so a backend without a
     * kernel yields NB_ERR_UNSUPPORTED naming op, dtype and backend. */
    bool (*supports)(nb_backend *be, int op, nb_dtype dt);
    /* A line describing the device and its libraries (nb_backend_info). */
    const char *(*info)(nb_backend *be);
    /* Threads of the backend's own host loops (the CPU's pool and
     * OpenBLAS); NULL where there are none. n <= 0: all online cores. */
    void (*set_num_threads)(nb_backend *be, int n);
    int (*get_num_threads)(nb_backend *be);
    /* Fills kernel_launches, host_syncs, h2d_bytes and d2h_bytes of *c
     * (nb_device_counters_get; core counts kernel_calls). NULL: zeros. */
    void (*counters)(nb_backend *be, nb_device_counters *c);

    /* ---- execution model (all required; the CPU's are no-ops) ----------- */
    /* A new stream handle of the device (NULL with an error on failure), and
     * its release. Core keeps the device's compute and copy streams. */
    void *(*stream_create)(nb_backend *be, nb_stream_kind kind);
    void (*stream_destroy)(nb_backend *be, void *stream);
    /* Waits until everything enqueued on stream is done; returns the first
     * pending asynchronous error of that stream (and clears it). */
    nb_status (*stream_synchronize)(nb_backend *be, void *stream);
    /* Waits for every stream of the device; returns the first pending error. */
    nb_status (*synchronize)(nb_backend *be);
    /* Events: record marks the current end of stream's queue; wait makes
     * stream wait (on the device, not the host) for the event; query tells
     * whether it has completed; synchronize waits on the host. */
    void *(*event_create)(nb_backend *be);
    void (*event_destroy)(nb_backend *be, void *event);
    nb_status (*event_record)(nb_backend *be, void *event, void *stream);
    nb_status (*event_wait)(nb_backend *be, void *stream, void *event);
    bool (*event_query)(nb_backend *be, void *event);
    nb_status (*event_synchronize)(nb_backend *be, void *event);
    /* ---- CUDA graphs (optional; core/graph.c) -----------------------------
     * Capture of the work enqueued on a stream into a graph replayed with
     * one launch. Between begin and end, work enqueued on that stream is
     * recorded, not run, and host synchronisation on it fails
     * (NB_ERR_STATE). NULL: the backend has no graphs (NB_ERR_UNSUPPORTED). */
    nb_status (*graph_capture_begin)(nb_backend *be, void *stream);
    /* Ends the capture on stream and instantiates it into *exec. */
    nb_status (*graph_capture_end)(nb_backend *be, void *stream, void **exec);
    nb_status (*graph_launch)(nb_backend *be, void *exec, void *stream);
    void (*graph_destroy)(nb_backend *be, void *exec);
    /* The profiler's clock (nb_profiler_start): a timing mark at the
     * current end of the current stream's queue (a timed event on a GPU, the
     * host clock on the CPU, which is synchronous), the milliseconds between
     * two marks once both have passed (waiting for b), and a mark's release.
     * Optional: without them the profiler counts calls only. */
    void *(*timer_mark)(nb_backend *be);
    double (*timer_elapsed_ms)(nb_backend *be, void *a, void *b);
    void (*timer_free)(nb_backend *be, void *mark);

    /* ---- memory ------------------------------------------------------------ */
    /* Raw device memory (the caching allocator in core/ sits above). NULL on
     * failure, with no error set (the allocator reports it). */
    void *(*alloc)(nb_backend *be, size_t bytes);
    void (*free)(nb_backend *be, void *ptr, size_t bytes);
    /* Pinned (page-locked) host memory for asynchronous copies; NULL slots:
     * core falls back to malloc. */
    void *(*host_alloc)(nb_backend *be, size_t bytes);
    void (*host_free)(nb_backend *be, void *ptr);
    /* Copies of `bytes` on stream (NULL: the current one). d2h/h2d are
     * asynchronous when the host buffer is pinned, else they return when
     * the host buffer may be reused (d2h: when the data has arrived). */
    nb_status (*memcpy_h2d)(nb_backend *be, void *dst, const void *src, size_t bytes, void *stream);
    nb_status (*memcpy_d2h)(nb_backend *be, void *dst, const void *src, size_t bytes, void *stream);
    nb_status (*memcpy_d2d)(nb_backend *be, void *dst, const void *src, size_t bytes, void *stream);
    /* dst on this backend's device, src on src_be's (another device, maybe
     * another backend): ordered after src_be's current stream and before
     * this backend's current stream. NULL: core copies through host memory. */
    nb_status (*memcpy_peer)(nb_backend *be, void *dst, nb_backend *src_be, const void *src, size_t bytes);

    /* dst = cast(src); src expanded to dst's shape; any strides. */
    nb_status (*copy)(nb_backend *be, const nb_kview *dst, const nb_kview *src);
    nb_status (*fill)(nb_backend *be, const nb_kview *dst, double value);
    /* dst[i] = start + i * step (computed in double, cast as copy casts
     * float64) into contiguous 1-d dst of any dtype: torch.arange and the
     * position ids of a transformer without a host upload. */
    nb_status (*arange)(nb_backend *be, const nb_kview *dst, double start, double step);
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
    /* c = a @ b + bias, the bias [n] (contiguous) added to every row
     * (torch.addmm(bias, a, b)): a [m, k], b [k, n], c [m, n] 2-d as in
     * matmul, one float dtype. A GEMM with the bias in its epilogue.
     * Optional: without it, linear broadcasts the bias into c and runs
     * matmul with beta 1. */
    nb_status (*addmm)(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                       const nb_kview *bias);
    /* c = a @ b and asum[i] = sum over k of a[i, k]: linear's weight and
     * bias gradients in one call (a = g^T, b = x). 2-d as in addmm, one
     * float dtype, asum [m] contiguous. A GEMM with the bias gradient in
     * its epilogue (cuBLASLt's BGRADB). Optional: without it, linear runs
     * matmul and a sum over g's rows. */
    nb_status (*matmul_bgrad)(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                              const nb_kview *asum);
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
     * `offset`, by the layout in core/philox.h (nb_philox_blocks).
     * offset_base: NULL, or (while a CUDA graph is captured) a device
     * uint64 the kernel adds to offset when it runs, so each replay draws
     * fresh numbers (core/graph.c); backends without graphs get NULL. */
    nb_status (*random)(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                        uint64_t seed, uint64_t offset, const uint64_t *offset_base);
    /* In-place optimizer updates of contiguous tensors of one shape.
     * max_exp_avg_sq is NULL unless amsgrad; momentum_buf NULL if momentum 0. */
    nb_status (*adam_step)(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                           const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h);
    nb_status (*sgd_step)(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                          const nb_kview *momentum_buf, const nb_sgd_hyper *h);

    /* ---- CNN (all views contiguous, NCHW; f32/f64, and bf16/f16 for the
     * convolution and pooling slots: float32 accumulation inside) ---------- */
    /* out [N, Cout, Ho, Wo] = x [N, Cin, H, W] conv w [Cout, Cin/groups, kh, kw]
     * (+ bias [Cout], NULL for none). Ho/Wo are out's sizes. */
    nb_status (*conv2d)(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                        const nb_kview *bias, const nb_conv_params *p);
    /* gx [N, Cin, H, W] (overwritten) = the input gradient of conv2d for gy
     * [N, Cout, Ho, Wo]; also conv_transpose2d's forward. Sizes come from
     * gx and gy (so 'same' padding and output_padding need no extra field). */
    nb_status (*conv2d_backward_input)(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                       const nb_kview *w, const nb_conv_params *p);
    /* gw [Cout, Cin/groups, kh, kw] and gbias [Cout] (NULL: skip), overwritten. */
    nb_status (*conv2d_backward_weight)(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                        const nb_kview *gy, const nb_kview *x, const nb_conv_params *p);
    /* out/indices [N, C, Ho, Wo]; indices (int64, may be NULL) are flat
     * h*W + w positions in the input plane, as PyTorch's return_indices. */
    nb_status (*max_pool2d)(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                            const nb_kview *x, const nb_pool_params *p);
    /* gx [N, C, H, W] (overwritten: zeros plus gy scattered by indices, in a
     * fixed order). Also the backward of adaptive_max_pool2d. */
    nb_status (*max_pool2d_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                     const nb_kview *indices);
    nb_status (*avg_pool2d)(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p);
    nb_status (*avg_pool2d_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                     const nb_pool_params *p);
    /* Adaptive pooling: output cell (i, j) covers rows floor(i*H/Ho) ..
     * ceil((i+1)*H/Ho) - 1, likewise columns (PyTorch's start/end index). */
    nb_status (*adaptive_avg_pool2d)(nb_backend *be, const nb_kview *out, const nb_kview *x);
    nb_status (*adaptive_avg_pool2d_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gy);
    nb_status (*adaptive_max_pool2d)(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                     const nb_kview *x);
    /* Batch norm over x [N, C, *] per channel C (torch.nn.functional.batch_norm).
     * training: normalise with the batch mean and biased variance, write
     * save_mean/save_invstd [C] (1/sqrt(var + eps)), and if running_mean/var
     * are non-NULL update them in place with momentum and the unbiased
     * variance. eval: normalise with running_mean/var (save_* untouched).
     * weight/bias [C] may be NULL (affine=False). */
    nb_status (*batch_norm)(nb_backend *be, const nb_kview *out, const nb_kview *save_mean,
                            const nb_kview *save_invstd, const nb_kview *running_mean,
                            const nb_kview *running_var, const nb_kview *x, const nb_kview *weight,
                            const nb_kview *bias, bool training, double momentum, double eps);
    /* gx, gweight, gbias (each may be NULL: skip). training uses save_mean/
     * save_invstd (the batch statistics); eval uses running_mean/var with eps. */
    nb_status (*batch_norm_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gweight,
                                     const nb_kview *gbias, const nb_kview *gy, const nb_kview *x,
                                     const nb_kview *weight, const nb_kview *save_mean,
                                     const nb_kview *save_invstd, const nb_kview *running_mean,
                                     const nb_kview *running_var, bool training, double eps);
    /* F.interpolate on [N, C, H, W] -> [N, C, Ho, Wo] (out's sizes), mode
     * nearest (src = floor(dst * in/out)) or bilinear (align_corners as
     * PyTorch); backward accumulates in a fixed order (no atomics). */
    nb_status (*upsample2d)(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear,
                            bool align_corners);
    nb_status (*upsample2d_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear,
                                     bool align_corners);

    /* ---- transformer (contiguous unless noted; f32/f64) ------------------ */
    /* out [..., k, ...] = x's slices along dim at int64 index [k]
     * (out has x's ndim). NB_ERR_INVALID_ARG for an index outside [0, size). */
    nb_status (*index_select)(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                              const nb_kview *index);
    /* gx (overwritten) = zeros with g's slices added along dim at index, in
     * index order (deterministic); rows equal to skip_index (or none if
     * INT64_MIN) are left zero. */
    nb_status (*index_add)(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index,
                           const nb_kview *g, int64_t skip_index);
    /* out = cond ? a : b; all expanded to out's shape (any strides); cond bool. */
    nb_status (*where)(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                       const nb_kview *b);
    /* Rows of x [R, M]: out = (x - mean) * rstd * w + b; mean, rstd [R]
     * saved. w, b [M] may be NULL. */
    nb_status (*layer_norm)(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd,
                            const nb_kview *x, const nb_kview *w, const nb_kview *b, double eps);
    /* gx [R, M], gw [M], gb [M] (each may be NULL: skip; gw/gb overwritten,
     * summed over rows in a fixed order). */
    nb_status (*layer_norm_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gw,
                                     const nb_kview *gb, const nb_kview *gy, const nb_kview *x,
                                     const nb_kview *w, const nb_kview *mean, const nb_kview *rstd);
    /* Fused attention over B = batch*heads: q [B, L, E], k [B, S, E],
     * v [B, S, Ev] -> out [B, L, Ev], lse [B, L] (log-sum-exp of the scaled,
     * masked scores, saved for backward). mask: NULL, or a view [..., L, S]
     * whose leading dims multiply to B (any strides, 0 where broadcast, so a
     * [N, 1, 1, S] padding mask needs no copy), bool (true = attend) or of
     * q's dtype (additive). Dropout on the weights with Philox(seed, offset): element
     * (b, i, j) keeps with probability 1 - dropout_p by the bits of index
     * (b*L + i)*S + j (core/philox.h layout). */
    nb_status (*attention)(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                           const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal,
                           double scale, double dropout_p, uint64_t seed, uint64_t offset,
                           const uint64_t *offset_base);
    /* gq, gk, gv (overwritten; each may be NULL: skip) from gout,
     * recomputing the scores from lse (and the dropout mask from the same
     * seed, offset and offset_base, as `random`'s). */
    nb_status (*attention_backward)(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                    const nb_kview *gout, const nb_kview *q, const nb_kview *k,
                                    const nb_kview *v, const nb_kview *out, const nb_kview *lse,
                                    const nb_kview *mask, bool is_causal, double scale, double dropout_p,
                                    uint64_t seed, uint64_t offset, const uint64_t *offset_base);

    /* ---- op coverage: binary, logic (backend/cpu/binary.c) --------------- */
    /* ---- op coverage: reductions, scans (reduce.c, scan.c) ---------------- */
    /* reduce (above) also takes NB_REDUCE_PROD: integers multiply in int64
     * and out may then be int64 (PyTorch's dtype for integer prod). */
    /* argmin: argmax's contract for the first minimum (NaN counts as the
     * minimum, so the first NaN wins, as torch.argmin). */
    nb_status (*argmin)(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim);
    /* Cumulative op along dim (0 <= dim < x.ndim): out[.., i, ..] = op over
     * x[.., 0..i, ..]. out has x's shape, any strides. SUM/PROD: float x
     * accumulates in double into out of x's dtype; integer/bool x in int64
     * into an int64 out. MAX/MIN: out of x's dtype, and indices (int64, x's
     * shape) of the last element equal to the running extreme (PyTorch's CPU
     * rule: >= / <=), a NaN wins and stays. LOGSUMEXP: float only, stable
     * (log1p(exp(min - max)) + max). indices NULL unless MAX/MIN. Parallel
     * over the lines along dim, sequential along it: deterministic. */
    nb_status (*scan)(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                      const nb_kview *x, int dim);
    /* gx (overwritten, x's shape) from g, the forward's x and out (and
     * indices for MAX/MIN), along dim; float32/float64. SUM: reverse cumsum
     * of g. PROD: exact with zeros (PyTorch's cumprod_backward: before the
     * first zero, revcumsum(g*out)/x; at it, sum_j g_j prod_{m<=j, m!=k} x_m;
     * after it 0). MAX/MIN: g scattered to indices in increasing position
     * order. LOGSUMEXP: sum_{j>=i} g_j exp(x_i - out_j), as the recurrence
     * T_i = g_i + exp(out_i - out_{i+1}) T_{i+1} (no overflow: out is
     * nondecreasing). x/out/indices may be NULL where unused. */
    nb_status (*scan_backward)(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                               const nb_kview *x, const nb_kview *out, const nb_kview *indices,
                               int dim);
    /* ---- op coverage: sorting, gather/scatter (sort.c, gather.c) ---------- */
    /* Stable sort of every line of x along dim (any strides; all six dtypes,
     * bool as 0/1): indices (int64) and values (x's dtype; may be NULL) get
     * the first k of the sorted order, k = indices' size at dim (<= x's;
     * sort uses k = size, topk/kthvalue less); other dims equal x's. Equal
     * keys keep their original order (ascending and descending); NaN sorts
     * as larger than any number (PyTorch). Deterministic. */
    nb_status (*sort)(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                      bool descending);
    /* torch.gather: out[..i..] = x[.., index[..i..], ..] along dim. out has
     * index's shape; index int64 with x's ndim and index.size(d) <= x.size(d)
     * for d != dim; any strides; all six dtypes. NB_ERR_INVALID_ARG (naming
     * the index and the dim size) for an index outside [0, x.size(dim)),
     * found before anything is written. */
    nb_status (*gather)(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index);
    /* torch.scatter / scatter_reduce in place on out (which holds self):
     * for every position i of index, out[.., index[i], ..] (along dim) is
     * combined with src[i] by mode: ASSIGN (duplicates: the last in index
     * order wins), SUM, PROD, MEAN, AMAX, AMIN. include_self false: a destination that receives
     * sources forgets self's value first (for "none" it is ignored). mean
     * divides by the number of sources (+1 with self; integers round down).
     * amax/amin propagate NaN. src has index.size(d) <= src.size(d) (stride 0
     * allowed: a scalar value); index.size(d) <= out.size(d) for d != dim;
     * any strides. Each destination is updated by one thread in index order
     * (deterministic, no atomics). Dtypes: all six for ASSIGN; f32, f64,
     * i32, i64, u8 for reductions. Index errors as gather, before any write. */
    nb_status (*scatter)(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                         nb_scatter_mode mode, bool include_self);
    /* ---- op coverage: shape, indexing (shape.c, index.c) ------------------ */
    /* The nonzero elements of x (any dtype, any strides; != 0, so NaN counts
     * and -0.0 does not), in C order. out NULL: writes their number to the
     * host int64 *count (a device backend synchronises, as torch.nonzero).
     * Else out is contiguous int64, [n, x.ndim] of coordinates or [n] of
     * flat C-order positions (told apart by out's ndim), with n that number
     * (NB_ERR_INVALID_ARG if not).
     * The output is fully determined (C order), whatever the thread count. */
    nb_status (*nonzero)(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x);
    /* out (updated in place) gets src's slices along dim at int64 index
     * [k] (src has out's shape but k at dim), written in index order so the
     * last of repeated indices wins (deterministic; PyTorch leaves repeats
     * unspecified). Contiguous views of one dtype, any of the six.
     * NB_ERR_INVALID_ARG for an index outside [0, size). */
    nb_status (*index_copy)(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                            const nb_kview *src);
    /* ---- op coverage: linear algebra (linalg.c; LAPACKE) ------------------ */
    /* Batches of matrices [..., rows, cols]: every view contiguous and
     * row-major (C order), f32/f64, the batch dims of all operands equal (the
     * op broadcasts and copies first). Inputs are read-only (the kernel keeps
     * its own scratch). The batch runs in a fixed order (deterministic). A
     * matrix the factorization rejects fails with NB_ERR_INVALID_ARG and a
     * message "linalg_<slot>: ... (batch element b ...)". A CUDA backend maps
     * these onto cuSOLVER (getrf/getrs, potrf, geqrf/orgqr, syevd, gesvd, gels). */
    /* x [..., n, k] = a^-1 b for a [..., n, n], b [..., n, k]: LU with partial
     * pivoting (gesv). Singular a: the error names U[i,i] = 0. */
    nb_status (*linalg_solve)(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
    /* det, sign, logabsdet [...] (each may be NULL: skip) of a [..., n, n]
     * from its LU factors. Singular a (an exact zero pivot) is no error: det
     * 0, sign 0, logabsdet -inf. */
    nb_status (*linalg_det)(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet,
                            const nb_kview *a);
    /* l [..., n, n]: the Cholesky factor of a [..., n, n] read from its lower
     * triangle, a = l l^T (upper: from its upper triangle, a = l^T l, l upper);
     * the other triangle of l is zero. Not positive-definite: error naming
     * the leading minor. */
    nb_status (*linalg_cholesky)(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper);
    /* a [..., m, n] = q r by Householder QR (geqrf + orgqr): q [..., m, kq]
     * with orthonormal columns, r [..., kq, n] upper triangular, where kq is
     * q's last size: min(m, n) (reduced) or m (complete). */
    nb_status (*linalg_qr)(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a);
    /* Symmetric a [..., n, n] read from its lower (upper) triangle: w [..., n]
     * eigenvalues ascending, v [..., n, n] orthonormal eigenvectors in its
     * columns (signs as the solver leaves them), a v = v diag(w). */
    nb_status (*linalg_eigh)(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper);
    /* a [..., m, n] = u diag(s) vh, s [..., k] descending, k = min(m, n);
     * u [..., m, m] and vh [..., n, n] (full_matrices) or u [..., m, k],
     * vh [..., k, n], told apart by their shapes; u and vh both NULL:
     * singular values only. */
    nb_status (*linalg_svd)(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh,
                            const nb_kview *a);
    /* x [..., n, k] minimising ||a x - b||_F for a [..., m, n] of full rank,
     * b [..., m, k] (QR, gels): least squares for m >= n, the minimum-norm
     * solution for m < n. Rank-deficient a: error. */
    nb_status (*linalg_lstsq)(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);

    /* ---- multi-tensor optimizer steps (optional) -------------------------- */
    /* adam_step/sgd_step over n parameters in one call (PyTorch's fused and
     * foreach optimizers, llm.c's one AdamW kernel per step). params, grads,
     * ... are arrays of n views; group i (params[i], grads[i], exp_avgs[i],
     * exp_avg_sqs[i] and max_exp_avg_sqs[i] / momentum_bufs[i]) meets the
     * single-tensor slot's contract: contiguous, of params[i]'s shape.
     * Sizes differ between groups; every tensor of a call has one dtype,
     * float32 or float64 (`supports` answers for NB_KERNEL_ADAM_STEP /
     * NB_KERNEL_SGD_STEP). max_exp_avg_sqs is NULL unless h->amsgrad;
     * momentum_bufs NULL if h->momentum is 0. No two tensors of a call
     * overlap. Every group is checked before anything is updated (errors
     * as the single-tensor slot's); n == 0 does nothing. The results are
     * bit-identical to calling adam_step/sgd_step on each group with the
     * same h. A device backend passes the tensors' addresses and sizes as
     * kernel parameters (no host-to-device copy of the list), so a training
     * step that calls it can be captured in a CUDA graph (h's scalars are
     * still kernel arguments: a replay repeats them). NULL: callers loop
     * over the single-tensor slot. */
    nb_status (*adam_step_multi)(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                 const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h);
    nb_status (*sgd_step_multi)(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                const nb_kview *momentum_bufs, const nb_sgd_hyper *h);

    /* ---- multi-tensor clipping (optional) --------------------------------- */
    /* out[i] = the p-norm of xs[i]'s elements (torch._foreach_norm): n
     * contiguous tensors of one float dtype, out a contiguous [n] of it;
     * p > 0 (INFINITY: max |x|; NaN propagates); an empty tensor's norm is
     * 0. Deterministic. NULL: core computes each norm with ops. */
    nb_status (*norm_multi)(nb_backend *be, int n, const nb_kview *xs, double p, const nb_kview *out);
    /* xs[i] *= s in place (torch._foreach_mul_), s one element of xs' dtype
     * read on the device (so a captured graph reads its current value).
     * NULL: core multiplies tensor by tensor. */
    nb_status (*mul_multi)(nb_backend *be, int n, const nb_kview *xs, const nb_kview *s);
    /* ---- multi-tensor cast (optional) -------------------------------------- */
    /* dst[i] = src[i] rounded to dst's dtype (to nearest even, as copy
     * rounds): n pairs of contiguous views of equal sizes, every src float32
     * and every dst bfloat16 or float16 (one dtype for all), no dst
     * overlapping a src. autocast's parameter casts in one launch
     * (nb_autocast_cache_params); bit-identical to copy on each pair; the
     * list travels as kernel parameters (capturable in a CUDA graph). NULL:
     * callers loop over copy. */
    nb_status (*cast_multi)(nb_backend *be, int n, const nb_kview *dst, const nb_kview *src);
    /* Dropout's forward in one pass (optional): mask[i] = 1/(1-p) as unary
     * mul_scalar rounds it to x's dtype where random's bernoulli with
     * probability 1-p under (seed, offset, offset_base) gives 1, else 0;
     * out = x * mask as binary mul computes it. x, out and mask contiguous,
     * one shape, one float dtype (16-bit included), 0 <= p < 1. The same
     * bits as random, unary and binary in turn (what callers run where it
     * is NULL or x is not contiguous), in one launch instead of three and
     * without the mask's round trips through memory. */
    nb_status (*dropout)(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x, double p,
                         uint64_t seed, uint64_t offset, const uint64_t *offset_base);
    /* ---- decoders: RMSNorm, rotary embedding (rms_norm.c, rope.c) ---------- */
    /* Rows of x [R, M] (contiguous, f32/f64): rstd = 1/sqrt(mean(x^2) + eps),
     * out = x * rstd * w; rstd [R] saved. w [M] may be NULL. The mean of
     * squares accumulates in double in a fixed order (thread-count independent). */
    nb_status (*rms_norm)(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                          const nb_kview *w, double eps);
    /* gx [R, M] and gw [M] (each may be NULL: skip; overwritten; gw summed
     * over rows in a fixed order): xhat = x * rstd, a = gy * w,
     * gx = rstd * (a - xhat * mean(a * xhat)), gw = sum_rows(gy * xhat). */
    nb_status (*rms_norm_backward)(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                   const nb_kview *x, const nb_kview *w, const nb_kview *rstd);
    /* Rotary embedding, rotate-half layout (Llama / Hugging Face's
     * apply_rotary_pos_emb): x [N, T, D] contiguous, D even, h = D/2; cos and
     * sin [T, h] contiguous, x's dtype (f32/f64). For each row (n, t) and
     * i < h: out[i] = x[i] cos[t,i] - x[i+h] sin[t,i], out[i+h] = x[i+h]
     * cos[t,i] + x[i] sin[t,i]. inverse rotates by the opposite angle (the
     * backward: the transpose of a rotation is its inverse). out may not
     * alias x. */
    nb_status (*rope)(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                      const nb_kview *sin, bool inverse);
};

struct nb_backend {
    const struct nb_backend_i *iface;
    nb_device device; /* the instance's device: type and index */
    const char *name; /* "cpu", "cuda" */
    int version;      /* NB_BACKEND_INTERFACE_VERSION it was built against */
    void *context;    /* the backend's own state for this device */
};

/* Registers the backend instance of be->device (called by a backend's init
 * function; the registry keeps the pointer, which must live for the
 * process). Errors: NB_ERR_INVALID_ARG on a version mismatch, a device
 * index outside [0, NB_MAX_DEVICES) or a device already registered. */
nb_status nb_backend_register(nb_backend *be);
/* The backend instance of a device (type and index), or NULL with
 * NB_ERR_DEVICE ("no such device cuda:3", "built without its backend"). */
nb_backend *nb_backend_get(nb_device dev);
/* The raw stream handle of the calling thread's current stream on be's
 * device, for kernels to enqueue on (the backend's own type). */
void *nb_backend_current_stream(nb_backend *be);
/* While profiling (nb_profiler_start), names the current slot call's row in
 * the report more finely than the slot ("copy (cast)"); row must be a
 * string literal. Not profiling: nothing. */
void nb_prof_detail(const char *row);

#ifdef __cplusplus
}
#endif
#endif
