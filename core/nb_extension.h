/* nb_extension.h - what code built on nabla's ops needs beyond nb_core.h:
 * library scopes, tensors that outlive every scope (parameters, buffers,
 * optimizer state), views of a tensor's storage, raw data pointers for
 * outside libraries (NCCL, MPI), version counters and graph-capture hooks.
 *
 * nabla's own nn/, optim/, data/ and distributed/ are written against this
 * header and the public ones only: the build keeps them out of the private
 * headers (nb_impl.h, nb_backend_impl.h, nb_autograd_impl.h), so a user's
 * modules, optimizers and datasets can do whatever nabla's can.
 *
 *   nb_tensor *my_block(nb_tensor *x) {      // a composite op of your own
 *       nb_scope *s = nb_op_scope_begin();
 *       nb_tensor *y = nb_relu(nb_add(x, x)); // intermediates die at the end
 *       return nb_scope_return(s, y);        // y goes to the caller's scope
 *   }
 */
#ifndef NB_EXTENSION_H
#define NB_EXTENSION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors (core/error.c) ---------------------------------------------- */

/* Records an error for nb_last_error() (printf-style message, naming the
 * call and the offending shapes or values); returns s, so that a function
 * can `return nb_set_error(NB_ERR_SHAPE, "...", ...)`. */
#if defined(__GNUC__) || defined(__clang__)
nb_status nb_set_error(nb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#else
nb_status nb_set_error(nb_status s, const char *fmt, ...); /* as above: records the error, returns s */
#endif
/* The same, for functions returning a pointer: sets the error, gives NULL. */
#define NB_FAIL(s, ...) (nb_set_error((s), __VA_ARGS__), (void *)0)
/* An always-on check for broken internal invariants (never for user input). */
#define NB_ASSERT(cond)                                                                                                \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "nabla: internal invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* ---- tensors over outside memory (core/tensor.c) ------------------------ */

/* Writes len bytes of data to path atomically: a temporary file in the
 * same directory, fsync'd, then renamed over path, so a failed write
 * leaves any previous file intact (what nabla's own writers use). op names
 * the caller in messages (NULL: "write_file_atomic"). Errors:
 * NB_ERR_INVALID_ARG (NULL or too long a path, NULL data with len > 0),
 * NB_ERR_IO. */
nb_status nb_write_file_atomic(const char *op, const char *path, const void *data, size_t len);

/* torch.from_numpy / torch.frombuffer: a CPU tensor of shape (C order)
 * over host memory the caller provides (data aligned to the dtype's size;
 * NULL only for zero elements), scoped as any new tensor. nabla never
 * frees data: release(ctx) is called (from whichever thread drops the last
 * reference to the tensor or a view of it) when no tensor uses it any
 * more; release may be NULL. In-place ops write into data. On failure
 * (NULL returned) release is not called and the memory stays the
 * caller's. Errors: NB_ERR_INVALID_ARG (NULL or misaligned data, a bad
 * shape), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_tensor *nb_tensor_from_host_memory(void *data, int ndim, const int64_t *shape, nb_dtype dt, void (*release)(void *),
                                      void *ctx);

/* ---- library scopes (core/scope.c) --------------------------------------
 * nb_core.h's error contract clears a stale error at the start of each call
 * from user code. Code that calls ops on the user's behalf (a module's
 * forward, an optimizer step) opens library scopes instead of nb_scope_begin,
 * so that the failure of an inner op keeps its message up to the user. */

/* A scope opened by library code: as nb_scope_begin, and while one is open
 * the calling thread is inside a library call. NULL only when out of host
 * memory (then tensors go to the enclosing scope). */
nb_scope *nb_op_scope_begin(void);
/* How many library scopes are open on this thread (0: user code). */
int nb_op_depth(void);
/* True once per call from user code: for a call made with no library scope
 * open, or for the first asker inside the outermost library scope. Ops ask
 * it on entry and then clear a stale error (one left by an earlier,
 * unrelated call); once it has answered false, errors are kept. A library
 * function that sets errors of its own asks it first, inside its scope:
 *   nb_scope *s = nb_op_scope_begin();
 *   if (nb_op_take_fresh()) nb_clear_error();
 * so that the ops it calls later keep the errors of its earlier steps. */
bool nb_op_take_fresh(void);
/* Ends the library scope s keeping r (s's other tensors are released) and
 * hands r to the enclosing scope (the root scope when none is open).
 * Returns r; NULL r ends s and returns NULL. */
nb_tensor *nb_scope_return(nb_scope *s, nb_tensor *r);
/* Hands a reference the caller owns to the current scope (the root scope
 * when none is open); returns t. */
nb_tensor *nb_scope_adopt(nb_tensor *t);

/* ---- tensors that outlive scopes, and views (core/tensor.c) ------------- */

/* A new contiguous, uninitialised tensor on dev, registered with the
 * current scope. ndim in [0, NB_MAX_DIMS], sizes >= 0. NULL with
 * NB_ERR_INVALID_ARG (bad shape), NB_ERR_DTYPE or NB_ERR_OOM. */
nb_tensor *nb_tensor_new(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev);
/* The parameter constructor: as nb_tensor_new, but no scope holds it: the
 * caller owns its one reference and gives it up with nb_release. For what
 * outlives every scope: module parameters and buffers (then
 * nb_requires_grad_), optimizer state, a loader's batch buffers. */
nb_tensor *nb_tensor_new_unscoped(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev);
/* Moves t into base's storage at element `offset` (t's values copied
 * there first): t keeps its identity (references to it stay valid) and
 * becomes a contiguous view of base: a module's flat parameter buffer.
 * Errors: NB_ERR_INVALID_ARG (another dtype or backend, or t does not fit
 * in base at offset), the copy's. */
nb_status nb_tensor_rebase(nb_tensor *t, nb_tensor *base, int64_t offset);
/* t keeps its identity (references to it stay valid) and becomes src: a
 * view of src's storage with src's autograd node (grad_fn, requires_grad),
 * as PyTorch's in-place ops rebase a tensor's history. What a module's
 * parametrization does to the weight its forward reads (nn/parametrize.c).
 * Graphs recorded before keep t's old node (nodes record their edges) and
 * values (a node's saved copy is its own view of the old storage); only a
 * double backward (create_graph) through such a graph would compute with
 * t's new value. Errors: NB_ERR_SHAPE (another shape or dtype). */
nb_status nb_tensor_rebind(nb_tensor *t, nb_tensor *src);
/* A view of t's storage with the given geometry (torch.as_strided; offset
 * and strides in elements), registered with the current scope; it records
 * nothing for autograd. The caller keeps it inside the storage. */
nb_tensor *nb_tensor_view_of(const nb_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                             int64_t offset);
/* The address of t's first element on its device (Tensor.data_ptr()): what
 * an outside library (NCCL, MPI, a file reader) reads or writes. NULL with
 * NB_ERR_INVALID_ARG for NULL. Valid while t lives; work queued on t's device must be ordered with
 * the reader (nb_stream_synchronize, or the same stream). */
void *nb_data_ptr(const nb_tensor *t);
/* t's first element's position in its storage, in elements
 * (Tensor.storage_offset()); nb_tensor_view_of takes it. -1 with
 * NB_ERR_INVALID_ARG for NULL. */
int64_t nb_storage_offset(const nb_tensor *t);
/* Whether a and b are views of one storage (false if either is NULL). */
bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b);
/* Records an in-place write to t's storage by code other than nabla's ops
 * (torch.autograd.graph.increment_version): a saved tensor that shares the
 * storage then fails backward instead of giving a wrong gradient. */
void nb_increment_version(nb_tensor *t);

/* ---- shapes ------------------------------------------------------------- */

/* "[2, 3]" into buf (len >= NB_SHAPE_BUF holds any shape); returns buf.
 * NULL with NB_ERR_INVALID_ARG for a NULL buf or len 0, or a NULL shape of
 * ndim > 0 (then buf holds "(null)"). */
char *nb_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t len);
#define NB_SHAPE_BUF 96

/* ---- streams, graphs, random numbers ------------------------------------ */

/* The backend's handle of a stream (a cudaStream_t on CUDA, NULL on the
 * CPU), for an outside library that enqueues work on it (NCCL). NULL s:
 * NULL with NB_ERR_INVALID_ARG. */
void *nb_stream_handle(const nb_stream *s);
/* While dev's current stream is being captured (nb_graph_capture_begin),
 * registers on_replay: (ctx, 0) runs just before each replay launches
 * (refresh the device values the replay reads), (ctx, +1) after each
 * launch, and (ctx, -1) when the capture ends (undoing the host state the
 * captured call advanced, since the capture ran nothing); false with
 * NB_ERR_STATE when no more can be registered, NB_ERR_INVALID_ARG for a
 * NULL on_replay. ctx must outlive the graph. Not capturing: does nothing
 * and returns true. */
bool nb_graph_add_replay_hook(nb_device dev, void (*on_replay)(void *ctx, int delta), void *ctx);
/* Whether dev's backend can capture and replay graphs (CUDA graphs):
 * where an optimizer keeps lr and step counts in device memory. A query:
 * false, with no error, for a device that is not there. */
bool nb_graph_supported(nb_device dev);
/* Takes `blocks` Philox counter blocks (4 values each) from gen (NULL: the
 * default generator); returns the first one. */
uint64_t nb_generator_advance(nb_generator *gen, uint64_t blocks);

#ifdef __cplusplus
}
#endif

#endif
