/* nb_core.h - tensors, dtypes, devices, errors, scopes, memory statistics, RNG.
 *
 *   nb_scope *s = nb_scope_begin();
 *   nb_tensor *a = nb_randn(NB_SHAPE(2, 3), NB_F32, NULL);   // N(0,1), default generator
 *   nb_tensor *b = nb_ones(NB_SHAPE(3), NB_F32);
 *   nb_tensor *c = nb_add(a, b);                              // broadcasts [2,3] + [3]
 *   if (!c) fprintf(stderr, "%s\n", nb_last_error());
 *   nb_scope_end(s);                                          // a, b, c released
 *
 * Ownership: every function that returns a new nb_tensor* hands out one
 * reference. While a scope is open (nb_scope_begin), that reference belongs
 * to the innermost scope and is dropped by nb_scope_end; with no scope open
 * it belongs to the caller, who drops it with nb_release. nb_retain adds a
 * reference the caller owns (use it to keep a tensor past its scope).
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

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

typedef enum nb_status {
    NB_OK = 0,
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
} nb_status;

/* The message of the last failure on this thread ("" when none). */
const char *nb_last_error(void);
/* The status of the last failure on this thread (NB_OK when none). */
nb_status nb_last_status(void);
/* Forgets the last failure on this thread. */
void nb_clear_error(void);
/* Short name of a status, e.g. "shape error". */
const char *nb_status_str(nb_status s);

/* ---- dtypes and devices ---------------------------------------------- */

/* NB_F16 (IEEE 754 binary16) and NB_BF16 (bfloat16: the top half of a
 * float32) are storage dtypes: they are created, filled, copied, cast
 * (nb_to_dtype, nb_copy_; rounding to nearest, ties to even), moved by the
 * data-movement ops and read/written by safetensors, but ops that compute
 * (arithmetic, reductions, matmul, ...) reject them with NB_ERR_DTYPE: cast
 * to NB_F32 first. They are appended so the older values keep their numbers. */
typedef enum nb_dtype {
    NB_F32,
    NB_F64,
    NB_I32,
    NB_I64,
    NB_U8,
    NB_BOOL,
    NB_F16,
    NB_BF16,
    NB_DTYPE_COUNT
} nb_dtype;

/* Bytes of one element (bool is one byte, f16/bf16 two); 0 for a value
 * outside the enum. */
size_t nb_dtype_size(nb_dtype dt);
/* "float32", "float64", "int32", "int64", "uint8", "bool", "float16",
 * "bfloat16" (PyTorch's names); "invalid dtype" outside the enum. */
const char *nb_dtype_name(nb_dtype dt);
/* True for NB_F32, NB_F64, NB_F16 and NB_BF16 (torch.is_floating_point). */
bool nb_dtype_is_float(nb_dtype dt);

typedef enum nb_device_type { NB_DEVICE_CPU, NB_DEVICE_CUDA, NB_DEVICE_TYPE_COUNT } nb_device_type;
typedef struct nb_device {
    nb_device_type type;
    int index;
} nb_device;
#define NB_CPU ((nb_device){NB_DEVICE_CPU, 0})

/* Device that creation functions use (CPU unless changed). */
nb_device nb_default_device(void);
/* Fails with NB_ERR_DEVICE if no backend for that device was built in. */
nb_status nb_set_default_device(nb_device dev);

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
 * to zero (x86 MXCSR FTZ and DAZ), as torch.set_flush_denormal(True). */
/* Which BLAS nabla loaded and the kernels it uses, e.g.
 * "OpenBLAS 0.3.21 ... core=SkylakeX (OPENBLAS_CORETYPE=SkylakeX set by nabla)". */
const char *nb_blas_info(void);

/* ---- scopes ----------------------------------------------------------- */

typedef struct nb_scope nb_scope;
/* Opens a scope on this thread; tensors created until its end belong to it.
 * Scopes nest. Returns NULL only on allocation failure. */
nb_scope *nb_scope_begin(void);
/* Drops the references the scope holds; tensors still referenced elsewhere
 * (nb_retain, a module, a .grad) live on. Scopes must end in LIFO order. */
void nb_scope_end(nb_scope *s);

/* ---- tensors ------------------------------------------------------------ */

#define NB_MAX_DIMS 8
typedef struct nb_tensor nb_tensor;

/* NB_SHAPE(2, 3) expands to the (ndim, shape) argument pair `2, (int64_t[]){2, 3}`. */
#define NB_SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

void nb_retain(nb_tensor *t);
void nb_release(nb_tensor *t); /* NULL is ignored */

/* Creation on the default device. ndim in [0, NB_MAX_DIMS]; sizes >= 0.
 * Errors: NB_ERR_INVALID_ARG (bad ndim/size), NB_ERR_OOM. */
nb_tensor *nb_empty(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_zeros(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_ones(int ndim, const int64_t *shape, nb_dtype dt);
nb_tensor *nb_full(int ndim, const int64_t *shape, double value, nb_dtype dt);
nb_tensor *nb_empty_on(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev);
nb_tensor *nb_scalar(double value, nb_dtype dt); /* 0-dim */
/* Copies `numel * dtype_size` bytes of host data (C order) into a new tensor. */
nb_tensor *nb_from_data(const void *host, int ndim, const int64_t *shape, nb_dtype dt);
/* 1-D [start, start+step, ...) below end, as torch.arange. */
nb_tensor *nb_arange(double start, double end, double step, nb_dtype dt);
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
 * no autograd. */
nb_status nb_copy_(nb_tensor *dst, const nb_tensor *src);
/* Sets every element to value; no autograd. */
nb_status nb_fill_(nb_tensor *t, double value);

/* Moves (copies) to another device or dtype; returns a new tensor. */
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

nb_generator nb_generator_new(uint64_t seed);
/* Seeds the default generator (the one used when a generator argument is NULL). */
void nb_manual_seed(uint64_t seed);
nb_generator *nb_default_generator(void); /* borrowed, per process */

/* U[low, high), N(mean, std), Bernoulli(p) in {0,1}. Float dtypes only
 * for uniform/normal; bernoulli gives any dtype. gen NULL = default. */
nb_tensor *nb_rand(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);
nb_tensor *nb_randn(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);
nb_status nb_uniform_(nb_tensor *t, double low, double high, nb_generator *gen);
nb_status nb_normal_(nb_tensor *t, double mean, double std, nb_generator *gen);
nb_status nb_bernoulli_(nb_tensor *t, double p, nb_generator *gen);
/* A random permutation of 0..n-1 (int64), Fisher-Yates driven by Philox. */
nb_tensor *nb_randperm(int64_t n, nb_generator *gen);
/* torch.randint(low, high, size, generator, dtype): integers uniform in
 * [low, high) as dtype (int64 is PyTorch's default; floats hold integer
 * values; bool [0, 2)); exact while high - low <= 2^53. Errors:
 * NB_ERR_INVALID_ARG (low >= high, a range dtype cannot hold), shapes as
 * nb_empty. nb_multinomial (nb_ops.h) samples categories. */
nb_tensor *nb_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen);

/* ---- memory statistics (caching allocator) ---------------------------- */

typedef struct nb_memory_stats {
    size_t allocated;      /* bytes in live tensors' blocks */
    size_t reserved;       /* bytes held from the device (allocated + cached) */
    size_t peak_allocated; /* max of allocated since the last reset */
    uint64_t device_allocs; /* calls into the device's allocator so far */
} nb_memory_stats;

nb_memory_stats nb_memory_stats_get(nb_device dev);
void nb_memory_reset_peak(nb_device dev);
/* Returns cached, unused blocks to the device. */
void nb_memory_empty_cache(nb_device dev);

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
