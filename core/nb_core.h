/* nb_core.h - tensors, dtypes, devices, errors, scopes, memory statistics, RNG.
 *
 *   nb_scope *s = nb_scope_begin();
 *   nb_tensor *a = nb_randn(NB_SHAPE(2, 3), NB_F32, NULL);   // N(0,1), default generator
 *   nb_tensor *b = nb_ones(NB_SHAPE(3), NB_F32);
 *   nb_tensor *c = nb_add(a, b);                              // broadcasts [2,3] + [3]
 *   if (!c) fprintf(stderr, "%s\n", nb_last_error());
 *   nb_scope_end(s);                                          // a, b, c released
 *
 * Ownership, the one rule: every tensor a function returns belongs to the
 * innermost open scope (nb_scope_begin), or to this thread's root scope when
 * none is open, and is released when that scope ends; to keep one longer,
 * take a reference of your own with nb_retain and give it up with
 * nb_release. You never nb_release a tensor you did not nb_retain. Modules,
 * optimizers and a tensor's .grad hold references of their own (a registered
 * parameter outlives the scope it was made in). The root scope is emptied by
 * nb_scope_release_root() and when the thread exits, so a program that opens
 * no scope frees nothing before then: open a scope per training step.
 * Pointers documented as "borrowed" are valid as long as their owner lives.
 *
 * Errors: a function returning a pointer returns NULL on failure, one
 * returning nb_status returns non-zero; both leave a message naming the op,
 * the shapes and the reason in nb_last_error() (per thread). Every op
 * returns NULL at once when given a NULL input, keeping the first error, so
 * chained calls need one check at the end.
 */
#ifndef NB_CORE_H
#define NB_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

/* What a function returning nb_status reports: NB_OK (0) on success, else
 * the kind of failure (the message: nb_last_error()). */
typedef enum nb_status {
    NB_OK = 0,          /* success */
    NB_ERR_INVALID_ARG, /* a bad argument (negative size, bad dim, NULL) */
    NB_ERR_SHAPE,       /* shapes that do not fit together */
    NB_ERR_DTYPE,       /* a dtype the op does not take */
    NB_ERR_DEVICE,      /* tensors on different devices, or no such device */
    NB_ERR_OOM,         /* an allocation failed */
    NB_ERR_IO,          /* a file could not be opened, read or written */
    NB_ERR_FORMAT,      /* a file's contents are corrupt or not the format */
    NB_ERR_UNSUPPORTED, /* valid, but not implemented on this backend */
    NB_ERR_STATE,       /* call out of order (e.g. backward twice) */
    NB_ERR_MISMATCH,    /* a check found values that disagree (nb_gradcheck) */
    NB_ERR_ANOMALY,     /* anomaly detection found NaN or inf (nb_set_detect_anomaly) */
} nb_status;

/* The message of the last failure on this thread ("" when none). */
const char *nb_last_error(void);
/* The status of the last failure on this thread (NB_OK when none). */
nb_status nb_last_status(void);
/* Forgets the last failure on this thread. */
void nb_clear_error(void);
/* Short name of a status, e.g. "shape error". */
const char *nb_status_str(nb_status s);

/* ---- options -----------------------------------------------------------
 * A zero-initialised options struct means PyTorch's defaults. Where
 * PyTorch's default for a float field (or argument documented so) is not 0,
 * leaving it 0 takes that default, and an actual 0 is asked for with
 * NB_ZERO: -0.0, which compares equal to 0 and differs only in its sign bit:
 * `(nb_adam_options){.weight_decay = NB_ZERO}` is AdamW without weight
 * decay. */
#define NB_ZERO (-0.0) /* an explicit 0 for a float option whose default is not 0 */
/* Such an option's value: dflt for +0.0, 0 for NB_ZERO, v otherwise. */
double nb_option(double v, double dflt);
/* A yes/no option whose PyTorch default is true: left 0, it takes the
 * default (nb_flag_on: NB_FLAG_FALSE is the only "no"). */
typedef enum nb_flag { NB_FLAG_DEFAULT = 0, NB_FLAG_TRUE, NB_FLAG_FALSE } nb_flag;
#define nb_flag_on(f) ((f) != NB_FLAG_FALSE) /* whether an nb_flag is on: true unless NB_FLAG_FALSE */

/* ---- dtypes and devices ---------------------------------------------- */

/* NB_F16 (IEEE 754 binary16) and NB_BF16 (bfloat16: the top half of a
 * float32) are created, filled, copied, cast (nb_to_dtype, nb_copy_;
 * rounding to nearest, ties to even), moved by the data-movement ops and
 * read/written by safetensors; the ops that autocast runs in lower
 * precision and their neighbours compute on them with float32 arithmetic
 * inside, and the other computing ops reject them with NB_ERR_DTYPE (cast to
 * NB_F32 first; each op's dtypes: autograd/OPS.md). NB_I8 and NB_I16
 * (torch.int8, torch.int16) are integers like NB_I32: the integer ops take
 * them, they wrap on overflow, and they hold quantized values
 * (nb_quantize_per_tensor). New dtypes are appended so the older values keep
 * their numbers. */
typedef enum nb_dtype {
    NB_F32,
    NB_F64,
    NB_I32,
    NB_I64,
    NB_U8,
    NB_BOOL,
    NB_F16,
    NB_BF16,
    NB_I8,
    NB_I16,
    NB_DTYPE_COUNT
} nb_dtype;

/* Bytes of one element (bool is one byte, f16/bf16 two); 0 for a value
 * outside the enum. */
size_t nb_dtype_size(nb_dtype dt);
/* "float32", "float64", "int32", "int64", "uint8", "bool", "float16",
 * "bfloat16", "int8", "int16" (PyTorch's names); "invalid dtype" outside
 * the enum. */
const char *nb_dtype_name(nb_dtype dt);
/* True for NB_F32, NB_F64, NB_F16 and NB_BF16 (torch.is_floating_point). */
bool nb_dtype_is_float(nb_dtype dt);

/* Kinds of device, torch.device's type ("cpu", "cuda"); NB_DEVICE_TYPE_COUNT
 * counts them (and marks "no device" in nb_device_of(NULL)). */
typedef enum nb_device_type { NB_DEVICE_CPU, NB_DEVICE_CUDA, NB_DEVICE_TYPE_COUNT } nb_device_type;
/* A device (torch.device): its type and index, e.g. NB_CUDA(1) for cuda:1.
 * Passed by value; build it with NB_CPU, NB_CUDA(i) or nb_device_parse. */
typedef struct nb_device {
    nb_device_type type; /* CPU or CUDA */
    int index;           /* which device of the type, in [0, NB_MAX_DEVICES); 0 for the CPU */
} nb_device;
#define NB_CPU ((nb_device){NB_DEVICE_CPU, 0})          /* the CPU, torch.device('cpu') */
#define NB_CUDA(i) ((nb_device){NB_DEVICE_CUDA, (i)})   /* CUDA device i, torch.device('cuda', i) */
#define NB_MAX_DEVICES 16 /* per device type */

/* Device that creation functions use (CPU unless changed). */
nb_device nb_default_device(void);
/* Fails with NB_ERR_DEVICE if no backend for that device was built in or
 * the device does not exist (cuda:1 on a one-GPU machine). */
nb_status nb_set_default_device(nb_device dev);
/* Parses "cpu", "cuda", "cuda:N" (torch.device's syntax) into *dev.
 * Errors: NB_ERR_INVALID_ARG for anything else (the device need not exist). */
nb_status nb_device_parse(const char *s, nb_device *dev);
/* "cpu", "cuda:0" into buf; returns buf (NULL with NB_ERR_INVALID_ARG for
 * a NULL or empty buf). */
char *nb_device_str(nb_device dev, char *buf, size_t len);
/* Number of devices of a type that this build can use (0 when its backend
 * was not built or finds no device). */
int nb_device_count(nb_device_type type);
/* A line describing the device and its libraries, e.g. for the CPU the BLAS
 * and the kernels it uses: "OpenBLAS 0.3.21 ... core=SkylakeX (...)".
 * Borrowed; "" (with NB_ERR_DEVICE) for a device that does not exist. */
const char *nb_backend_info(nb_device dev);

/* ---- streams and events (the execution model) ------------------------------
 * Work on a device is enqueued on streams (CUDA's term) and runs in order
 * on each; host-visible only after a sync point: nb_device_synchronize,
 * nb_stream_synchronize, nb_event_synchronize, nb_to_host, nb_item. Each
 * device has a compute stream (the default current stream) and a copy
 * stream. On the CPU every call finishes before it returns, so all of this
 * is synchronous and free. Data-dependent errors of an asynchronous device
 * (an index out of range found by a kernel) surface at the next sync point,
 * naming the op; NB_SYNC_DEBUG=1 synchronizes after every kernel. */
typedef struct nb_stream nb_stream; /* a device's work queue (torch.cuda.Stream); opaque */
typedef struct nb_event nb_event;   /* a marker in a stream's queue (torch.cuda.Event); opaque */

/* Waits for all work on the device; returns the first pending error.
 * torch.cuda.synchronize. */
nb_status nb_device_synchronize(nb_device dev);
/* The device's compute or copy stream (borrowed, lives for the process),
 * or NULL with NB_ERR_DEVICE. */
nb_stream *nb_stream_compute(nb_device dev);
nb_stream *nb_stream_copy(nb_device dev);
/* A new stream of dev (torch.cuda.Stream()), NULL with NB_ERR_DEVICE when
 * the backend cannot make one (at most 64 are alive per CUDA device).
 * nb_stream_free waits for the work enqueued on it, releases it (NULL and
 * the device's own streams are ignored) and sets the error of a kernel that
 * failed on it as the thread's last error; if it was the calling thread's
 * current stream, the compute stream is current again. It must not be
 * current on another thread, nor be captured (then NB_ERR_STATE is set and
 * nothing is freed). */
nb_stream *nb_stream_new(nb_device dev);
void nb_stream_free(nb_stream *s);
/* The calling thread's current stream on dev (the compute stream unless
 * set), on which ops enqueue their kernels. */
nb_stream *nb_current_stream(nb_device dev);
/* Makes s the calling thread's current stream on its device
 * (torch.cuda.set_stream). NULL restores the compute stream of the
 * default device. */
nb_status nb_set_current_stream(nb_stream *s);
/* The stream's device (NB_CPU with NB_ERR_INVALID_ARG for NULL). */
nb_device nb_stream_device(const nb_stream *s);
/* Waits until everything enqueued on s so far has run
 * (torch.cuda.Stream.synchronize): a sync point, where a failed kernel's
 * error surfaces. NB_ERR_INVALID_ARG for NULL. */
nb_status nb_stream_synchronize(nb_stream *s);
/* s waits (on the device) for everything enqueued on `on` so far. */
nb_status nb_stream_wait_stream(nb_stream *s, nb_stream *on);

/* An event of dev, or NULL with an error. nb_event_free(NULL) is ignored. */
nb_event *nb_event_new(nb_device dev);
void nb_event_free(nb_event *e);
/* Marks the current end of s's queue (NULL: the current stream of e's device). */
nb_status nb_event_record(nb_event *e, nb_stream *s);
/* s waits (on the device) until e has completed. */
nb_status nb_stream_wait_event(nb_stream *s, nb_event *e);
/* Whether everything before the last record of e has completed (a never
 * recorded event has); false with NB_ERR_INVALID_ARG for NULL; true with
 * NB_ERR_DEVICE when the device failed (nothing will complete). */
bool nb_event_query(nb_event *e);
/* Waits until everything before the last record of e has completed
 * (torch.cuda.Event.synchronize); NB_ERR_INVALID_ARG for NULL. */
nb_status nb_event_synchronize(nb_event *e);

/* ---- threads and floating-point environment ------------------------- */

/* Sets the threads of nabla's own loops and of OpenBLAS together (the one
 * owner of both, so the cores are never oversubscribed). n <= 0 means the
 * number of online cores. Default: NB_NUM_THREADS from the environment, else
 * the number of online cores. */
void nb_set_num_threads(int n);
int nb_get_num_threads(void);
/* Floating-point environment: denormal floats make backward GEMMs several
 * times slower, so nabla's worker threads and the thread that first runs a
 * CPU kernel (and with it OpenBLAS's threads, created then) flush denormals
 * to zero (x86 MXCSR FTZ and DAZ), as torch.set_flush_denormal(True).
 * The CPU's BLAS: nb_backend_info(NB_CPU). */

/* torch.set_float32_matmul_precision: "highest" (the default: float32
 * matrix products in full float32), "high" (a GPU may use TF32 tensor
 * cores, ~10 bits of mantissa per product, float32 accumulation) or
 * "medium" (may use bfloat16 products). The setting also covers float32
 * convolutions and recurrent layers on CUDA (cuDNN's TF32 tensor-core
 * algorithms under "high" and "medium"): it stands for
 * torch.backends.cudnn.allow_tf32 too, whose
 * PyTorch default is TF32; nabla's default stays full float32 for both.
 * The CPU always computes in full float32. Errors: NB_ERR_INVALID_ARG for
 * another string. */
nb_status nb_set_float32_matmul_precision(const char *precision);
const char *nb_get_float32_matmul_precision(void);

/* torch.backends.cudnn.enabled: whether RNN / LSTM / GRU layers (nb_rnn,
 * nb_rnn_packed and the nn modules) run through a backend's fused
 * recurrent kernels where it has them (cuDNN's RNN API on CUDA; true, the
 * default) or as nabla ops on every device (false). cuDNN's backward is
 * not differentiable again (as in PyTorch): a double backward
 * (create_graph) through an RNN on CUDA needs false while the forward
 * runs. The convolutions keep cuDNN either way. Process-wide; returns the
 * previous setting. */
bool nb_set_cudnn_enabled(bool enabled);
bool nb_cudnn_enabled(void);

/* ---- scopes ----------------------------------------------------------- */

typedef struct nb_scope nb_scope; /* an ownership scope of this thread (see the top of this file); opaque */
/* Opens a scope on this thread; tensors returned until its end belong to
 * it. Scopes nest. Returns NULL only on allocation failure (then tensors go
 * to the enclosing scope, and nb_scope_end(NULL) does nothing). */
nb_scope *nb_scope_begin(void);
/* Drops the references the scope holds; tensors still referenced elsewhere
 * (nb_retain, a module, a .grad) live on. Scopes end in reverse order of
 * their beginning: ending one while a scope begun after it is still open, or
 * ending one twice, fails with NB_ERR_STATE and changes nothing. */
nb_status nb_scope_end(nb_scope *s);
/* Releases what this thread's root scope holds: the tensors returned while
 * no scope was open (also done when the thread exits). */
void nb_scope_release_root(void);
/* How many references the root scope holds (to find code that runs with no
 * scope open). */
size_t nb_scope_root_size(void);

/* ---- tensors ------------------------------------------------------------ */

#define NB_MAX_DIMS 8 /* the most dimensions a tensor may have */
/* A tensor: shape, strides, dtype, device, a view of a reference-counted
 * storage, and its autograd state (torch.Tensor). Opaque: read it through
 * the accessors below. */
typedef struct nb_tensor nb_tensor;

/* NB_SHAPE(2, 3) expands to the (ndim, shape) argument pair `2, (int64_t[]){2, 3}`. */
#define NB_SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

/* Takes a reference of the caller's own to t, so that it outlives its
 * scope; give it up with nb_release. NULL is ignored. */
void nb_retain(nb_tensor *t);
void nb_release(nb_tensor *t); /* NULL is ignored */
/* Ownership debugging, for a tensor used after its scope ended or released
 * more often than retained (which otherwise touch freed memory): with
 * NB_DEBUG_OWNERSHIP=1 in the environment at start-up, or after
 * nb_set_ownership_debug(true), a freed tensor is kept poisoned (the last
 * 65536 of them), and using it in an op, nb_item, nb_to_host,
 * nb_copy_from_host, nb_backward or nb_retain fails with NB_ERR_STATE
 * naming its shape, dtype and what freed it ("the end of the nb_scope_begin
 * scope #12 of its thread (nesting depth 1)", "nb_release ..."); releasing
 * it again prints that error to stderr and changes nothing, and the
 * nb_scope_end doing so returns NB_ERR_STATE. Costs host memory and time:
 * for debugging only. */
void nb_set_ownership_debug(bool on);

/* Creation on the default device. ndim in [0, NB_MAX_DIMS]; sizes >= 0.
 * Errors: NB_ERR_INVALID_ARG (bad ndim/size), NB_ERR_OOM. */
nb_tensor *nb_empty(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_zeros(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_ones(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_full(int ndim, const int64_t *shape, double value, nb_dtype dt);
/* The _on forms create on dev instead of the default device. */
nb_tensor *nb_empty_on(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev);
nb_tensor *nb_full_on(int ndim, const int64_t *shape, double value, nb_dtype dt, nb_device dev);
nb_tensor *nb_from_data_on(const void *host, int ndim, const int64_t *shape, nb_dtype dt, nb_device dev);
nb_tensor *nb_arange_on(double start, double end, double step, nb_dtype dt, nb_device dev);
nb_tensor *nb_scalar(double value, nb_dtype dt); /* 0-dim */
/* A 0-dim tensor holding value in dtype dt on t's device. */
nb_tensor *nb_scalar_like(const nb_tensor *t, double value, nb_dtype dt);
/* Copies `numel * dtype_size` bytes of host data (C order) into a new tensor. */
nb_tensor *nb_from_data(const void *host, int ndim, const int64_t *shape, nb_dtype dt);
/* 1-D [start, start+step, ...) below end, as torch.arange (computed on the
 * device: element i is start + i * step in double, cast to dt). */
nb_tensor *nb_arange(double start, double end, double step, nb_dtype dt);
/* The _like forms: t's shape, dtype and device (torch.empty_like ...);
 * nb_empty_like leaves the values uninitialised. */
nb_tensor *nb_empty_like(const nb_tensor *t);
nb_tensor *nb_zeros_like(const nb_tensor *t);
nb_tensor *nb_ones_like(const nb_tensor *t);

/* Metadata (never fails on a valid tensor, except nb_size below). Given
 * NULL (a failed op upstream) they return -1 (nb_dim, nb_numel), NULL
 * (nb_shape, nb_strides), NB_DTYPE_COUNT (nb_dtype_of), false, or "(null)"
 * in nb_shape_str's buf, and set NB_ERR_INVALID_ARG unless an error is
 * already pending; nb_item(NULL) is NaN, likewise. */
int nb_dim(const nb_tensor *t);
/* The size of dimension dim, as torch.Tensor.size(dim); a negative dim
 * counts from the end. Returns -1 with NB_ERR_INVALID_ARG for a dim outside
 * [-ndim, ndim) (every dim of a 0-dim tensor), and -1 for a NULL tensor
 * (keeping an earlier error, as ops do). */
int64_t nb_size(const nb_tensor *t, int dim);
const int64_t *nb_shape(const nb_tensor *t);  /* borrowed, nb_dim(t) entries */
const int64_t *nb_strides(const nb_tensor *t); /* in elements */
/* The number of elements (torch.numel; 1 for a 0-dim tensor), the dtype,
 * the device, and whether the layout is C-contiguous (Tensor.is_contiguous:
 * sizes of 1 and tensors of no element count as contiguous). */
int64_t nb_numel(const nb_tensor *t);
nb_dtype nb_dtype_of(const nb_tensor *t);
nb_device nb_device_of(const nb_tensor *t);
bool nb_is_contiguous(const nb_tensor *t);
/* Writes "[2, 3] float32" into buf; returns buf. */
char *nb_shape_str(const nb_tensor *t, char *buf, size_t len);

/* Host access: the only way tensor data reaches the host.
 * nb_to_host copies the tensor (any strides) in C order into dst, which
 * must hold `bytes` >= numel * dtype_size. nb_item returns the single
 * element of a one-element tensor as a double (NaN and an error otherwise). */
nb_status nb_to_host(const nb_tensor *t, void *dst, size_t bytes);
double nb_item(const nb_tensor *t);
/* Overwrites the tensor's elements (C order) from host data; no autograd. */
nb_status nb_copy_from_host(nb_tensor *t, const void *src, size_t bytes);
/* Copies src into dst (same shape, or broadcastable to it; casts dtypes);
 * no autograd. Across devices (same shape and dtype after broadcasting)
 * through the backends' peer copy, with no bounce through the host where
 * the hardware allows. */
nb_status nb_copy_(nb_tensor *dst, const nb_tensor *src);
/* Sets every element to value; no autograd. */
nb_status nb_fill_(nb_tensor *t, double value);

/* Copies to another device (a new contiguous tensor; t itself, with a new
 * reference, when it is already there): device-to-device and cross-device
 * copies go through the backends' copy slots, not through the host.
 * Not differentiable. */
nb_tensor *nb_to_device(nb_tensor *t, nb_device dev);
/* Casts as C (float -> int truncates toward zero, -> bool is != 0); into
 * float16/bfloat16 rounds to nearest even (float64 rounded once), overflows
 * to inf and keeps NaN. Differentiable for float->float (the gradient is
 * cast back to t's dtype). */
nb_tensor *nb_to_dtype(nb_tensor *t, nb_dtype dt);

/* ---- random numbers ------------------------------------------------- */

/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11): a counter-based generator, so element i of a random
 * tensor depends only on (seed, offset, i), never on the thread count. */
typedef struct nb_generator {
    uint64_t seed;   /* the Philox key */
    uint64_t offset; /* the counter of 128-bit blocks used so far */
} nb_generator;

/* A generator at the start of seed's stream: {seed, offset 0}
 * (torch.Generator().manual_seed(seed)). */
nb_generator nb_generator_new(uint64_t seed);
/* Seeds the default generator (the one used when a generator argument is NULL). */
void nb_manual_seed(uint64_t seed);
nb_generator *nb_default_generator(void); /* borrowed, per process */

/* U[low, high), N(mean, std), Bernoulli(p) in {0,1}. Float dtypes only
 * for uniform/normal; bernoulli gives any dtype. gen NULL = default. */
nb_tensor *nb_rand(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);
nb_tensor *nb_randn(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);
/* The same on a device (the numbers do not depend on it). */
nb_tensor *nb_rand_on(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen, nb_device dev);
nb_tensor *nb_randn_on(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen, nb_device dev);
/* The in-place fills (Tensor.uniform_, normal_, bernoulli_): t's elements
 * drawn from U[low, high), N(mean, std) (float dtypes only: NB_ERR_DTYPE
 * otherwise; float16/bfloat16 get the float32 draws of the same stream,
 * rounded, so a 16-bit uniform_ can round a draw up to high, which
 * PyTorch's kernel maps to low) or Bernoulli(p) (any dtype); no autograd. gen
 * NULL = default. Errors: NB_ERR_INVALID_ARG (NULL t, low > high, std < 0,
 * p outside [0, 1]). */
nb_status nb_uniform_(nb_tensor *t, double low, double high, nb_generator *gen);
nb_status nb_normal_(nb_tensor *t, double mean, double std, nb_generator *gen);
nb_status nb_bernoulli_(nb_tensor *t, double p, nb_generator *gen);
/* A random permutation of 0..n-1 (int64), Fisher-Yates driven by Philox. */
nb_tensor *nb_randperm(int64_t n, nb_generator *gen);
/* torch.randint(low, high, size, generator, dtype): integers uniform in
 * [low, high) as dtype (int64 is PyTorch's default; floats hold integer
 * values; bool [0, 2)); exact while high - low <= 2^53. Errors:
 * NB_ERR_INVALID_ARG (low >= high, a range dtype cannot hold), shapes as
 * nb_empty. Written from ops (autograd/ops_random.c); nb_multinomial
 * (nb_functional.h) samples categories. */
nb_tensor *nb_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);

/* ---- memory: the caching allocator ------------------------------------------
 * Per device, freed blocks are cached and reused, so a training step calls
 * the device allocator (malloc, cudaMalloc) only while the cache warms up.
 * Requests of at most 1 MiB are carved from 2 MiB segments, larger ones
 * from segments of their own (rounded to 2 MiB; 1-10 MiB requests get a
 * 20 MiB segment); a request takes the smallest cached block that fits
 * (best fit), which is split when the rest is worth keeping, and freed
 * neighbours coalesce (PyTorch's CUDACachingAllocator policy). A block
 * remembers the stream it was allocated on and is reused only there; a
 * tensor also used on another stream must be marked with nb_record_stream,
 * so that its block waits for that stream's work before reuse. When the
 * device is out of memory the cache is returned to the device and the
 * request retried once (num_alloc_retries) before NB_ERR_OOM (num_ooms).
 * The CPU's cache is split in 16 arenas so that threads allocating at once
 * (a DataLoader's workers) do not queue on one lock: a thread takes its
 * blocks from one arena (free blocks another arena caches wait for that
 * arena's threads, nb_memory_empty_cache or an out-of-memory retry, which
 * empties every arena). */

/* Statistics under PyTorch's names (torch.cuda.memory_stats): *_bytes and
 * counts are current values; peak_* since the last nb_memory_reset_peak.
 * On the CPU they add up the arenas, peak_* too: exact while one thread
 * allocates, an upper bound when several do. */
typedef struct nb_memory_stats {
    size_t allocated;          /* allocated_bytes: in live tensors' blocks */
    size_t reserved;           /* reserved_bytes: held from the device (segments) */
    size_t active;             /* active_bytes: allocated + freed blocks waiting on other streams */
    size_t peak_allocated;     /* allocated_bytes.peak */
    size_t peak_reserved;      /* reserved_bytes.peak */
    size_t peak_active;        /* active_bytes.peak */
    uint64_t segments;         /* segment.current: device allocations held */
    uint64_t device_allocs;    /* num_device_alloc: calls into the device allocator so far */
    uint64_t device_frees;     /* num_device_free */
    uint64_t num_alloc_retries; /* a failed device allocation retried after freeing the cache */
    uint64_t num_ooms;         /* requests that failed with NB_ERR_OOM */
} nb_memory_stats;

/* The allocator statistics of dev (torch.cuda.memory_stats); zeros for a
 * device without a backend. */
nb_memory_stats nb_memory_stats_get(nb_device dev);

/* Work counters of a device since the process started, for profiling a
 * step (the difference of two readings): how much host dispatch a step
 * costs and how often the host waits for the device. */
typedef struct nb_device_counters {
    uint64_t kernel_calls;    /* backend kernel slots called by ops (one op may call several) */
    uint64_t kernel_launches; /* device kernels launched, a library call (cuBLAS, cuDNN) counted
                                 once; 0 on the CPU, which launches nothing */
    uint64_t host_syncs;      /* times the host waited for the device (stream, event or device
                                 synchronize, a blocking copy); 0 on the CPU */
    uint64_t h2d_bytes, d2h_bytes; /* bytes copied between host and device memory */
    uint64_t kernels_compiled;   /* kernels generated and compiled at run time (NVRTC on CUDA) */
    uint64_t kernel_cache_loads; /* generated kernels loaded from the on-disk cache instead */
} nb_device_counters;
/* Zeros with NB_ERR_DEVICE for a device that does not exist. */
nb_device_counters nb_device_counters_get(nb_device dev);

/* ---- CUDA graphs -------------------------------------------------------------------
 * A training step captured once and replayed with one launch
 * (torch.cuda.graphs): the host's per-op work disappears from replays.
 *
 *   step(); step();                            // warm up eagerly (caches, state)
 *   nb_graph_capture_begin(dev);
 *   step();                                    // recorded, not run
 *   nb_graph *g = nb_graph_capture_end(dev);
 *   for (...) { nb_copy_(x, batch_x); nb_graph_replay(g); }
 *
 * The captured work reads and writes the same memory on every replay: feed
 * it by copying into the tensors it read (x above). Tensors made during the
 * capture come from the graph's private memory pool and stay valid while the
 * graph lives. What changes per step must live on the device: random ops
 * (dropout) draw from the generator's offset at replay time, so each replay
 * draws what the eager step at that point would; optimizers on a device
 * with graphs read lr and the step count from device memory, so
 * nb_optimizer_set_lr and schedulers between replays take effect, and
 * each replay advances the step counts (host and device). A replay
 * gives the same bits as the eager step it recorded. While capturing, a
 * host synchronisation (nb_item, nb_to_host, nb_device_synchronize) fails
 * with NB_ERR_STATE and no tensor made before the capture may be freed.
 * Graphs are CUDA's: on the CPU capture fails with NB_ERR_UNSUPPORTED. */
typedef struct nb_graph nb_graph; /* a captured CUDA graph (torch.cuda.CUDAGraph); opaque */
/* Starts capturing what the calling thread enqueues on dev's current stream.
 * Errors: NB_ERR_UNSUPPORTED (a device without graphs), NB_ERR_STATE (a
 * capture under way), NB_ERR_DEVICE. */
nb_status nb_graph_capture_begin(nb_device dev);
/* How a capture records the step (zero: as nb_graph_capture_begin). */
typedef struct nb_graph_options {
    /* Fuse the captured step's elementwise ops (copy and casts, fill,
     * unary ops and their backward rules, binary ops, where) into kernels
     * generated and compiled at run time (NVRTC), as torch.compile's
     * pointwise fusion: consecutive such calls of one shape become one
     * kernel, values read again in the group stay in registers, and values
     * freed before the next other op are never stored. The replay gives the
     * same bits as without fusion, with fewer kernels. false: each op its
     * own kernel. */
    bool fuse;
} nb_graph_options;
/* nb_graph_capture_begin with options (NULL: the zero options). Errors as
 * nb_graph_capture_begin's. */
nb_status nb_graph_capture_begin_with(nb_device dev, const nb_graph_options *opts);
/* Ends the capture and returns the graph, ready to replay, or NULL with an
 * error (an op that failed during the capture fails it). */
nb_graph *nb_graph_capture_end(nb_device dev);
/* Launches the captured work on the device's current stream (asynchronous),
 * after the per-replay values (generator offsets) are written. */
nb_status nb_graph_replay(nb_graph *g);
/* Releases the graph and its memory pool (tensors made during the capture
 * keep their memory until they are freed). NULL is ignored. */
void nb_graph_free(nb_graph *g);
/* Whether dev's current stream is being captured. */
bool nb_graph_is_capturing(nb_device dev);

/* ---- profiling ----------------------------------------------------------------
 * A per-kernel-slot profile of the work ops enqueue, on every device: from
 * nb_profiler_start, each backend kernel slot call is timed on its stream (GPU
 * events; the host clock on the CPU) and counted by slot name ("matmul",
 * "layer_norm_backward"), with the host's time inside each call (its
 * launch work). The marks add a little host time per call, so read it for
 * where time goes, not for the step's wall time. NB_PROFILE=1
 * in the environment starts it when the library loads. */

/* Starts profiling: from now on each kernel slot call is timed and counted;
 * the report's wall time runs from this call. */
void nb_profiler_start(void);
/* Prints one line per slot, most device time first: calls, total ms, us per
 * call and the share of the profiled device time, then the totals and the
 * wall time since nb_profiler_start; synchronizes the devices, stops
 * profiling and frees the marks. f NULL: stderr. */
void nb_profiler_report(FILE *f);
/* Writes what the profiler recorded so far as a Chrome trace-event JSON
 * file (torch.profiler's export_chrome_trace; chrome://tracing and
 * ui.perfetto.dev open it): one complete ("X") event per slot call on the
 * calling host thread (pid 0 "host", tid numbered as threads first called
 * a slot; on a GPU its span is the launch work, on the CPU the call), and
 * for a GPU one on that device's timeline (pid 1, 2... named "cuda:0"...)
 * with the kernel time the events measured, placed by the device clock
 * from where the host began its first call. Times in microseconds since
 * nb_profiler_start. Waits for the devices; profiling goes on (the marks
 * are freed by nb_profiler_report). Written atomically. Errors:
 * NB_ERR_INVALID_ARG (NULL path), NB_ERR_STATE (nb_profiler_start not
 * called, or the profile already reported), NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_profiler_export_chrome_trace(const char *path);
/* Sets dev's peak_* statistics to their current values
 * (torch.cuda.reset_peak_memory_stats). */
void nb_memory_reset_peak(nb_device dev);
/* Returns cached, unused segments to the device (torch.cuda.empty_cache). */
void nb_memory_empty_cache(nb_device dev);
/* Marks t's memory as used by work enqueued on stream s (PyTorch's
 * Tensor.record_stream): when t's storage is freed, its block is reused only
 * after the work enqueued on s so far has completed. Needed when a tensor
 * made on one stream is read or written on another (a copy stream, a
 * communication stream). Errors: NULL, or s on another device. */
nb_status nb_record_stream(nb_tensor *t, nb_stream *s);

/* Pinned (page-locked) host memory on dev's behalf (cudaMallocHost; plain
 * aligned memory for the CPU), for asynchronous copies: PyTorch's
 * pin_memory. NULL with NB_ERR_OOM. Free with nb_host_free on the same dev. */
void *nb_host_alloc(nb_device dev, size_t bytes);
void nb_host_free(nb_device dev, void *ptr);
/* Copies `bytes` of host data into t's (contiguous) memory on stream s
 * (NULL: the current stream): asynchronous when host came from
 * nb_host_alloc, so the caller must not reuse host before a sync point of
 * s. nb_copy_from_host is the synchronous form. */
nb_status nb_copy_from_host_async(nb_tensor *t, const void *host, size_t bytes, nb_stream *s);
/* The reverse, into host memory; the data is there after a sync of s. */
nb_status nb_to_host_async(const nb_tensor *t, void *host, size_t bytes, nb_stream *s);

/* ---- printing (core/print.c) ------------------------------------------- */

/* PyTorch's repr of t (print options at their defaults: precision 4,
 * summarized past 1000 elements with 3 edge items, 80 columns), e.g.
 *   tensor([[1.5000, 2.0000],
 *           [   nan,    inf]], dtype=torch.float64, requires_grad=True)
 * with the dtype shown unless float32, int64 or bool, grad_fn=<...> named
 * after nabla's op (AddBackward0), and the device unless the default.
 * nb_repr writes it NUL-terminated into buf (truncated to len - 1 bytes;
 * buf may be NULL when len is 0) and returns its full length, or -1 on
 * error (NULL t: NB_ERR_INVALID_ARG; NB_ERR_OOM). nb_print writes it and a
 * newline to stdout (NB_ERR_IO if that fails). Both read t to the host. */
int64_t nb_repr(const nb_tensor *t, char *buf, size_t len);
nb_status nb_print(const nb_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
