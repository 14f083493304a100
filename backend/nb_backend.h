/* nb_backend.h - the device backends: their model, the views and enums of
 * their kernels, and their registry (version 4). The vtable a backend fills
 * and the dispatch of its kernels are internal (backend/nb_backend_impl.h,
 * the slot list backend/nb_slots.def).
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
 * Ops in autograd/ validate shapes and dtypes, ask nb_backend_supports (the
 * op table row, the slots it lists, the backend's dtypes), allocate outputs
 * and then call kernel slots through the tensor's backend; nothing outside
 * backend/ dereferences tensor data. A kernel sees plain views (nb_kview,
 * below). The slots, their parameters and their contracts are listed once,
 * in backend/nb_slots.def.
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

 */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include "nb_core.h"
#include "nb_kernel_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the op-coverage slots; 3: per-device instances, streams, events,
 * stream-ordered memory, the capability query; 4: the kernel slots
 * generated from nb_slots.def, capability derived from them; 5: the device
 * guard, alloc's status, event_query's failure, stream_capture_id, init
 * per device type; 6: the slot matmul_bgrad_b, and a float32 c with
 * 16-bit a and b in matmul, matmul_bgrad and matmul_bgrad_b; 7: attention's
 * own_rng_out and own_rng (dropout from the backend's own generator); 8:
 * index_add's accumulate, cross_entropy's valid; 9: adam_step_multi's
 * copies (16-bit weights written with the update). */
#define NB_BACKEND_INTERFACE_VERSION 9

/* bfloat16 or float16: storage dtypes whose arithmetic runs in float32. */
static inline bool nb_dtype_is_16bit(nb_dtype dt) { return dt == NB_BF16 || dt == NB_F16; }

/* What a kernel sees of a tensor: a data pointer already offset to the
 * first element, dtype, shape and strides in elements. Strides may be 0 (a
 * broadcast input) or arbitrary (a transposed view) unless a slot says
 * "contiguous". */
typedef struct nb_kview {
    void *data; /* first element */
    nb_dtype dtype;               /* the element type of data */
    int ndim;                     /* 0 (a scalar) to NB_MAX_DIMS */
    int64_t shape[NB_MAX_DIMS];   /* the sizes of dims 0..ndim-1 (each >= 0); entries past ndim unused */
    int64_t strides[NB_MAX_DIMS]; /* elements; 0 = broadcast */
} nb_kview;

/* ---- fused elementwise programs (the pointwise slot) ---------------------------- */

/* What a node of a pointwise program computes at one element. Each node
 * stands for one call of an elementwise slot and yields that slot's value
 * in the node's dtype, rounded as the slot stores it, so a program gives
 * the same bits as its nodes run one slot call at a time. */
typedef enum nb_pw_kind {
    NB_PW_INPUT,          /* input view `a` (views[n_out + a]); dtype is that view's */
    NB_PW_CONST,          /* `value` in dtype (a float dtype or bool) */
    NB_PW_CAST,           /* node a converted to dtype: the copy slot's conversion */
    NB_PW_UNARY,          /* the unary slot: op (nb_unary_op) of node a, alpha `value`; dtype is a's */
    NB_PW_UNARY_BACKWARD, /* unary_backward: op's rule for gy = node a and x or y = node b, alpha `value` */
    NB_PW_BINARY,         /* the binary slot: node a op (nb_binary_op) node b, both of one dtype; dtype
                           * is theirs, or bool for a comparison */
    NB_PW_WHERE,          /* the where slot: node a (bool) ? node b : node c, b and c of dtype */
    NB_PW_DROPOUT,        /* the dropout slot's mask: 1/(1-p) (p: `value`, 0 <= p < 1) rounded to dtype as the
                           * slot rounds it where random's bernoulli with probability 1-p under the
                           * program's rng[a] gives 1 for element e, else 0; e is the element's index in C
                           * order of the views' shape (so a contiguous mask view draws the slot's bits);
                           * dtype a float dtype */
    NB_PW_KIND_COUNT
} nb_pw_kind;

/* One node of a pointwise program: what it computes (kind, op, value),
 * its dtype and its operands. */
typedef struct nb_pw_node {
    nb_pw_kind kind; /* what the node computes */
    int op;         /* nb_unary_op or nb_binary_op (UNARY, UNARY_BACKWARD, BINARY) */
    nb_dtype dtype; /* the value's dtype: float32, float64, bfloat16, float16 or bool */
    int a, b, c;    /* operands: indices of earlier nodes (INPUT: the input's index) */
    double value;   /* CONST's value; the unary ops' alpha */
} nb_pw_node;

/* The most views (outputs and inputs) and nodes of one program: the CUDA
 * kernel takes every view's pointer and strides as one parameter. */
#define NB_PW_MAX_VIEWS 32
#define NB_PW_MAX_NODES 256
#define NB_PW_MAX_RNG 8

/* A DAG of nodes in topological order (operands before their users) and
 * the nodes its outputs store: output k (views[k]) receives node
 * outputs[k], which must have views[k]'s dtype. n_in inputs follow the
 * outputs in the slot's view list. */
typedef struct nb_pw_program {
    int n_nodes;             /* 1 to NB_PW_MAX_NODES */
    const nb_pw_node *nodes; /* n_nodes, operands before their users */
    int n_out;               /* outputs, >= 1 */
    const int *outputs;      /* n_out node indices: output k stores node outputs[k] */
    int n_in;                /* input views after the outputs */
    int n_rng;                   /* random streams of the DROPOUT nodes, 0 to NB_PW_MAX_RNG */
    const struct nb_philox_state *rng; /* n_rng states (offset_base read when the kernel runs), or NULL */
} nb_pw_program;

/* The op of the reduce, scan and scan_backward slots (backend/nb_slots.def): torch.sum, amax, amin,
 * prod and cumsum, cummax, cummin, cumprod, logcumsumexp. */
typedef enum nb_reduce_op {
    NB_REDUCE_SUM,       /* reduce and scan (empty sum = 0) */
    NB_REDUCE_MAX,       /* reduce (amax) and scan (cummax, with its indices) */
    NB_REDUCE_MIN,       /* reduce (amin) and scan (cummin, with its indices) */
    NB_REDUCE_PROD,      /* reduce and scan (empty product = 1) */
    NB_REDUCE_LOGSUMEXP, /* scan only (logcumsumexp) */
    NB_REDUCE_OP_COUNT } nb_reduce_op;

/* How scatter combines a source with its destination (torch.scatter and
 * scatter_reduce's reduce names). */
typedef enum nb_scatter_mode {
    NB_SCATTER_ASSIGN, NB_SCATTER_SUM, NB_SCATTER_PROD, NB_SCATTER_MEAN, NB_SCATTER_AMAX, NB_SCATTER_AMIN,
    NB_SCATTER_MODE_COUNT
} nb_scatter_mode;

/* The distribution of the random slot, with its arguments a and b (torch.Tensor.uniform_, normal_,
 * bernoulli_). */
typedef enum nb_rng_dist {
    NB_RNG_UNIFORM,  /* U[a, b); b itself never drawn */
    NB_RNG_NORMAL,   /* N(mean a, std b) */
    NB_RNG_BERNOULLI /* 1 with probability a, else 0 (b unused) */
} nb_rng_dist;

/* One call of the recurrent slots (rnn_reserve_size, rnn_forward,
 * rnn_backward): a stack of num_layers RNN / LSTM / GRU layers over
 * seq_len steps of batch sequences, as torch.nn.RNN / LSTM / GRU
 * (cuDNN's RNN API where a backend runs it). mode: 0 tanh, 1 ReLU, 2
 * LSTM, 3 GRU (nb_rnn_mode). proj_size 0: no projection (LSTM only
 * otherwise). lengths: NULL, every sequence seq_len steps; else a host
 * array [batch] of lengths in [1, seq_len]: each sequence runs over its
 * own steps (the reverse direction starts at its last one), its outputs
 * past them are 0 and h_n / c_n are its states at its last step.
 * training: the forward keeps a reserve space for rnn_backward. tf32:
 * float32 products may use TF32 (the float32 matmul precision when the
 * forward ran; its backward must see the same). */
typedef struct nb_rnn_params {
    int mode;       /* 0 tanh, 1 ReLU, 2 LSTM, 3 GRU */
    nb_dtype dtype; /* of every view: float32 or float64 */
    int64_t seq_len, /* T >= 1 */
        batch,       /* B >= 1 */
        input_size,  /* I >= 1 */
        hidden_size, /* H >= 1 */
        proj_size,   /* 0, or (LSTM only) H_out < H */
        num_layers;  /* L >= 1 */
    bool bidirectional, /* D = 2 directions, else 1 */
        bias,           /* w holds b_ih and b_hh per layer and direction */
        training,       /* the forward keeps a reserve space for rnn_backward */
        tf32;           /* float32 products may use TF32 (see above) */
    const int32_t *lengths; /* NULL, or a host array [batch] of lengths in [1, seq_len] (see above) */
} nb_rnn_params;

/* Geometry of a 2-d convolution (conv1d runs as conv2d with H = 1), as
 * torch.nn.functional.conv2d / conv_transpose2d. */
typedef struct nb_conv_params {
    int64_t stride[2],  /* (h, w), each >= 1 */
        padding[2],     /* (h, w), each >= 0: zeros on both sides */
        dilation[2];    /* (h, w), each >= 1 */
    int64_t output_padding[2]; /* conv_transpose2d only */
    int64_t groups;            /* >= 1, dividing Cin and Cout */
} nb_conv_params;

/* Geometry of a 2-d pooling window (pool1d runs as pool2d with H = 1), as
 * torch.nn.functional.max_pool2d / avg_pool2d. The output size per dim is
 * floor or ceil((in + 2*pad - dilation*(k-1) - 1) / stride) + 1, with
 * PyTorch's rule that the last window must start inside the padded input. */
typedef struct nb_pool_params {
    int64_t kernel[2], /* (h, w), each >= 1 */
        stride[2],     /* (h, w), each >= 1 */
        padding[2],    /* (h, w), each >= 0 */
        dilation[2];   /* (h, w), each >= 1 */
    bool ceil_mode;   /* ceil instead of floor in the output size */
    bool count_include_pad; /* avg_pool2d */
    int64_t divisor_override; /* avg_pool2d; 0 = none */
} nb_pool_params;

/* The Philox arguments of a kernel that draws random numbers (the layout
 * of core/philox.h): key `seed`, first counter block `offset`.
 * offset_base: NULL, or (while a CUDA graph is captured) a device uint64
 * the kernel adds to offset when it runs, so each replay draws fresh
 * numbers (core/graph.c); backends without graphs get NULL. */
typedef struct nb_philox_state {
    uint64_t seed,  /* the Philox key (the generator's seed) */
        offset;     /* the first counter block */
    const uint64_t *offset_base; /* NULL, or a device uint64 added to offset at launch (see above) */
} nb_philox_state;

/* The inputs of fused attention and its backward over B = batch*heads
 * (torch.nn.functional.scaled_dot_product_attention). */
typedef struct nb_attention_args {
    const nb_kview *q, *k, *v; /* [B, L, E], [B, S, E], [B, S, Ev] */
    /* NULL, or a view [..., L, S] whose leading dims multiply to B (any
     * strides, 0 where broadcast, so a [N, 1, 1, S] padding mask needs no
     * copy), bool (true = attend) or of q's dtype (additive) */
    const nb_kview *mask;
    bool is_causal;   /* also mask key j > query i (top-left aligned, as PyTorch's) */
    double scale;     /* the scores are scale * q k^T */
    double dropout_p; /* dropout on the attention weights, 0 <= p < 1 */
    nb_philox_state rng; /* element (b, i, j) keeps by the bits of index (b*L + i)*S + j */
    /* Dropout from the backend's own generator (cuDNN's Philox in 16-bit
     * CUDA attention): other bits than rng's index above, which only that
     * backend's backward draws again. Forward: where own_rng_out is not
     * NULL the backend may use it, and sets *own_rng_out true where it did
     * (the caller starts it false); NULL asks for rng's bits. Backward:
     * own_rng is what the forward set; where true, the backend runs the
     * backward that draws the same bits, or fails. */
    bool *own_rng_out; /* forward only: NULL, or where the backend says it drew with its own generator */
    bool own_rng;      /* backward only: the forward's *own_rng_out */
} nb_attention_args;

/* The inputs of batch norm and its backward (torch.nn.functional.batch_norm). */
typedef struct nb_batch_norm_args {
    const nb_kview *x;                          /* [N, C, *] */
    const nb_kview *weight, *bias;              /* [C], each NULL for affine=False */
    const nb_kview *running_mean, *running_var; /* [C], both or neither */
    bool training;                              /* batch statistics (else the running ones) */
    double momentum,                            /* training: r = (1 - momentum)*r + momentum*stat (var unbiased) */
        eps;                                    /* added to the variance: 1/sqrt(var + eps) */
} nb_batch_norm_args;

/* The inputs of layer norm over rows and its backward
 * (torch.nn.functional.layer_norm over the last dims, flattened). */
typedef struct nb_layer_norm_args {
    const nb_kview *x;    /* [R, M] */
    const nb_kview *w, *b; /* [M], each may be NULL */
    double eps;            /* added to the variance: rstd = 1/sqrt(var + eps) */
} nb_layer_norm_args;

/* A device's backend instance (opaque here; backend/nb_backend_impl.h). */
typedef struct nb_backend nb_backend;

/* Which of a device's streams. */
typedef enum nb_stream_kind { NB_STREAM_COMPUTE, NB_STREAM_COPY, NB_STREAM_KIND_COUNT } nb_stream_kind;

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
