/* nb_impl.h - internals shared by core/, backend/ and autograd/ (not
 * installed). The tensor struct is private so that the public ABI does not
 * freeze it; the layers above the ops (nn/, optim/, data/, distributed/)
 * build with NB_ABOVE_OPS and use nb_extension.h instead. */
#ifndef NB_IMPL_H
#define NB_IMPL_H

#ifdef NB_ABOVE_OPS
#error "nb_impl.h is private to core/, backend/ and autograd/: include nb_extension.h"
#endif

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "nb_backend.h"
#include "nb_core.h"
#include "nb_extension.h"
#include "nb_backend_util.h"

/* ---- storage and tensors ------------------------------------------------ */

typedef struct nb_storage {
    atomic_int refcount;
    void *data;
    size_t bytes;
    nb_device device;
    nb_backend *backend;
    void *block; /* the caching allocator's block (core/alloc.c); NULL for outside memory */
    /* outside host memory (nb_tensor_from_host_memory): called with
     * release_ctx instead of freeing a block when the last reference goes */
    void (*release)(void *ctx);
    void *release_ctx;
    /* Bumped by every in-place write (nb_copy_, nb_fill_, the random _
     * fills, copies from the host, optimizer steps, gradient accumulation):
     * a tensor saved for backward remembers it, and backward fails when it
     * changed (PyTorch's version counter, shared by a tensor and its views). */
    atomic_uint version;
} nb_storage;


struct nb_node; /* autograd/nb_autograd_impl.h */

struct nb_tensor {
    atomic_int refcount;
    uint32_t magic;  /* NB_TENSOR_LIVE; NB_TENSOR_FREED once freed under NB_DEBUG_OWNERSHIP */
    char *freed_by;  /* under NB_DEBUG_OWNERSHIP: what freed it */
    nb_storage *storage;
    int64_t offset; /* elements */
    int ndim;
    nb_dtype dtype;
    int64_t shape[NB_MAX_DIMS];
    int64_t strides[NB_MAX_DIMS];
    bool requires_grad;
    bool keep_grad;          /* .grad is a view of a flat gradient buffer: zero_grad zeroes it in place */
    nb_tensor *grad;         /* owned; leaves only */
    struct nb_node *grad_fn; /* owned reference; NULL for leaves */
    int output_nr;           /* which output of grad_fn (custom functions have several) */
    struct nb_tensor_hooks *hooks; /* owned; gradient hooks of a leaf (autograd/hooks.c), else NULL */
    /* A float32 parameter's 16-bit copy kept between autocast regions
     * (autograd/autocast.c): the weights the next autocast forward reads,
     * written with each update by nb_fused_adam_ (#31's master weights). */
    struct nb_tensor *cast_copy; /* owned, no autograd state; NULL: none */
    unsigned cast_version;       /* the storage version whose values cast_copy holds */
    bool keep_cast;              /* a fused optimizer updates t: autocast keeps t's cast as cast_copy */
};

#define NB_TENSOR_LIVE 0x4c54424eu  /* "NBTL" */
#define NB_TENSOR_FREED 0x4654424eu /* "NBTF" */

/* Ownership debugging (NB_DEBUG_OWNERSHIP=1, nb_set_ownership_debug): freed
 * tensors are kept, poisoned, so a later use or release is reported
 * instead of touching freed memory. */
extern bool nb_own_debug;
/* True when t was freed (debugging on): sets NB_ERR_STATE naming op, t's
 * shape and what freed it. */
bool nb_tensor_freed(const nb_tensor *t, const char *op);
/* What the releases of the calling thread are part of (scope.c), for the
 * record of a freed tensor; NULL: an explicit nb_release. */
void nb_own_set_releaser(const char *what);
/* Releases of freed tensors seen on this thread (scope.c reports them). */
unsigned nb_own_bad_releases(void);

/* t's storage's version counter (see nb_storage.version). */
static inline unsigned nb_version_of(const nb_tensor *t) {
    return atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}

/* Records an in-place write to t's storage (see nb_storage.version). */
static inline void nb_bump_version(nb_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}

/* A new reference-counted tensor of t's view (storage, offset, shape,
 * strides) with no autograd state, owned by the caller (no scope): the
 * tape's saved tensors. NULL with NB_ERR_OOM. */
nb_tensor *nb_tensor_alias_unscoped(const nb_tensor *t);
/* t becomes a view of src's storage at src's offset and strides (same
 * shape and dtype: the caller's invariant), dropping its own storage
 * reference; t's other fields (autograd included) are untouched. The
 * in-place ops under autograd (autograd/ops_activation.c). */
void nb_tensor_take_storage(nb_tensor *t, const nb_tensor *src);

/* As nb_tensor_view_of in another dtype: offset counts elements of dt.
 * The caller keeps the view inside the storage and aligned for dt (the
 * attention's float32 log-sum-exp after a 16-bit output). */
nb_tensor *nb_tensor_view_as(const nb_tensor *t, nb_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                             int64_t offset);

nb_kview nb_kview_of(const nb_tensor *t);
/* t's view expanded (stride 0) to ndim/shape, which must be broadcast-compatible. */
nb_kview nb_kview_expand(const nb_tensor *t, int ndim, const int64_t *shape);
static inline nb_backend *nb_backend_of(const nb_tensor *t) { return t->storage->backend; }
/* What the CPU backend's kernels compute in (its own check of its
 * contract; ops ask nb_check_supported, the capability query, instead):
 * float16/bfloat16 are storage dtypes there. */
static inline bool nb_dtype_is_compute(nb_dtype dt) {
    return (unsigned)dt < NB_DTYPE_COUNT && dt != NB_F16 && dt != NB_BF16;
}
static inline bool nb_dtype_is_compute_float(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64; }
static inline bool nb_same_device(nb_device a, nb_device b) { return a.type == b.type && a.index == b.index; }
#define NB_BE(t) (nb_backend_of(t))
/* ---- graph capture (core/graph.c) ----
 * While be's current stream is captured: gen's (NULL: the default
 * generator's) device offset base for random kernels, with *offset (as
 * nb_generator_advance returned it) made relative to it; NULL (offset
 * untouched) when not capturing or on error (then *failed is set). */
const uint64_t *nb_graph_rng_base(nb_backend *be, nb_generator *gen, uint64_t *offset, bool *failed);
/* The Philox arguments of a random fill of t's elements (the random slot's
 * nb_philox_state), advancing gen (NULL: the default
 * generator) past them: what nb_uniform_ and its kin pass to the slot. gen
 * has advanced even when this fails (during a graph capture). */
nb_status nb_rng_philox(const nb_tensor *t, nb_generator *gen, nb_philox_state *rng);
/* Sets gen's offset (NULL: the default generator's, under its lock, as
 * nb_generator_advance) and returns the one before: how a graph's capture
 * end winds generators back (replays take nb_generator_advance). */
uint64_t nb_generator_exchange(nb_generator *gen, uint64_t offset);
/* While be's current stream is captured, registers on_replay: (ctx, 0) runs
 * just before each replay launches (refresh device values the replay
 * reads), (ctx, +1) after each launch, and (ctx, -1) when the capture ends
 * (undoing the host state the captured call advanced, since the capture
 * ran nothing); false with an error if no more can be registered. ctx must
 * outlive the graph. Not capturing: nothing, true. */
bool nb_graph_on_replay(nb_backend *be, void (*on_replay)(void *ctx, int delta), void *ctx);
/* Whether be's current stream is being captured. */
bool nb_graph_capturing_be(nb_backend *be);
/* Whether stream (a backend handle) of be is the one being captured. */
bool nb_graph_capturing_stream(nb_backend *be, void *stream);
/* Marks the capture under way on be (if any) failed with the current error:
 * nb_graph_capture_end then fails with it, whatever later calls did to the
 * error (a step that could not be captured must not give a graph). */
void nb_graph_fail(nb_backend *be);

/* While profiling (nb_profiler_start), the timing mark after a slot call
 * (nb_kernel_before, nb_backend_impl.h, makes the one before). */
void nb_prof_mark_after(nb_backend *be, const char *slot);
bool nb_sync_debug(void);

/* ---- random numbers ------------------------------------------------------ */

int64_t nb_shape_numel(int ndim, const int64_t *shape);
void nb_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Broadcast shapes a and b (NumPy rules) into out/out_ndim; false if incompatible. */
bool nb_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *out_ndim, int64_t *out);
/* Normalises a possibly negative dim against ndim; -1 if out of range. */
int nb_wrap_dim(int dim, int ndim);

/* ---- the op table (core/op_table.c) ------------------------------------------ */

/* The capability check for op in dtype dt on t's backend (nb_backend_supports
 * with the error set: NB_ERR_DTYPE for a dtype outside the row,
 * NB_ERR_UNSUPPORTED naming the backend and the missing kernel). */
bool nb_check_supported(nb_op_id op, nb_dtype dt, const nb_tensor *t);
/* The op table row's slots column: [NB_SLOT_COUNT] flags (NULL for an id
 * outside the table). */
const bool *nb_op_slots(nb_op_id op);

/* ---- the tape, as core sees it ------------------------------------------------
 * Core frees tensors and prints them without knowing the tape: the tape
 * (autograd/engine.c) fills these when it records its first node, before
 * any tensor can have a grad_fn. */
typedef struct nb_tape_hooks {
    void (*release)(struct nb_node *n);              /* drops a reference to a node */
    int (*op)(const struct nb_node *n);              /* the nb_op_id it recorded */
    void (*free_hooks)(struct nb_tensor_hooks *h);   /* a tensor's hook list */
} nb_tape_hooks;
extern nb_tape_hooks nb_tape; /* core/tensor.c; zero until the tape registers */
/* Core's own reads and moves of t's values: a contiguous tensor of dtype dt
 * (t itself when it is one already, else a scoped copy through the copy
 * kernel), recording nothing. NULL with the error set. */
nb_tensor *nb_dense_as(const nb_tensor *t, nb_dtype dt);

/* ---- backends (backend/registry.c, written by meson) ----------------------- */

/* A backend's init: registers one instance per device it finds, and the
 * device type it serves (run on the first use of a device of that type). */
typedef struct nb_backend_entry {
    nb_device_type type;
    nb_status (*init)(void);
} nb_backend_entry;
/* The built-in backends, ended by an entry whose init is NULL. */
extern const nb_backend_entry nb_builtin_backends[];

#endif
