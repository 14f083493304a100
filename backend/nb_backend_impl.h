/* nb_backend_impl.h - what a backend implements and how core calls it
 * (internal, not installed; ggml-backend-impl.h's role). nb_backend.h has
 * the public half: views, enums, registration.
 *
 * ---- The vtable ------------------------------------------------------------------
 * struct nb_backend_i has the backend's runtime (streams, events, memory,
 * graphs, the profiler's clock), written out below, and one field per
 * kernel slot, generated from the slot list backend/nb_slots.def, where
 * each slot's parameters and contract are. Nothing calls a kernel field
 * directly: ops call the slot's dispatcher nb_kernel_<slot>(be, ...)
 * (below), which fails with NB_ERR_UNSUPPORTED where the backend has no
 * kernel, checks the contract shared by every backend (a NULL required
 * view; nb_check_<slot> where the slot list names one), then calls the
 * kernel with its device current (the device guard: device_enter and
 * device_exit, c10::cuda::CUDAGuard's role) and counts, profiles and
 * (NB_SYNC_DEBUG=1) synchronizes it.
 * Backends keep only the checks of their own limits (cuDNN's int32 sizes,
 * a missing algorithm).
 *
 * ---- Capability -----------------------------------------------------------------
 * Whether a backend runs an op on a dtype is derived, not declared
 * (nb_backend_supports, core/op_table.c): the op table row takes the
 * dtype, every REQ slot the row lists is non-NULL, and the dtype is in the
 * backend's `dtypes` mask.
 *
 * ---- Adding a backend ---------------------------------------------------------
 * 1. A folder backend/<name>/ with one file per op family, as backend/cpu/.
 * 2. An nb_backend_i with the runtime slots and the kernel slots it
 *    implements (the rest NULL: ops that need them report
 *    NB_ERR_UNSUPPORTED naming the slot and the backend, and the op
 *    harness skips them); a column of its own in nb_slots.def generates
 *    its kernel declarations and setters, as the CPU's and CUDA's.
 * 3. An init function `nb_status nb_<name>_backend_init(void)` that creates
 *    one nb_backend per device it finds (device index set, version
 *    NB_BACKEND_INTERFACE_VERSION) and calls nb_backend_register for each;
 *    listed in backend/meson.build with its device type, so registry.c
 *    calls it on the first use of a device of that type (a CPU-only
 *    program never starts the CUDA backend). Init only counts devices: a
 *    device's context and library handles are made on its first real use.
 * 4. The op harness (tests/test_op_harness.c) runs on it unchanged: every
 *    registered device, every dtype it supports.
 */
#ifndef NB_BACKEND_IMPL_H
#define NB_BACKEND_IMPL_H

#ifdef NB_ABOVE_OPS
#error "nb_backend_impl.h is private to core/, backend/ and autograd/"
#endif

#include "nb_backend.h"
#include "nb_op_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the slot list's expansions (nb_slots.def) ------------------------------------ */

/* A slot's parameter list, (nb_backend *be, ...): NB_SLOT_PARAMS(copy). */
#define NB_SLOT_PARAMS(slot) (nb_backend *be NB_ARGS_##slot(NB_SLOT_PARAM))
#define NB_SLOT_PARAM(kind, ...) NB_SLOT_PARAM_##kind(__VA_ARGS__)
#define NB_SLOT_PARAM_OUT(v) , const nb_kview *v
#define NB_SLOT_PARAM_INOUT(v) , const nb_kview *v
#define NB_SLOT_PARAM_IN(v) , const nb_kview *v
#define NB_SLOT_PARAM_OUT_OPT(v) , const nb_kview *v
#define NB_SLOT_PARAM_INOUT_OPT(v) , const nb_kview *v
#define NB_SLOT_PARAM_IN_OPT(v) , const nb_kview *v
#define NB_SLOT_PARAM_LIST(v) , const nb_kview *v
#define NB_SLOT_PARAM_LIST_OPT(v) , const nb_kview *v
#define NB_SLOT_PARAM_ARG(name, ...) , __VA_ARGS__ name
/* The arguments that forward a slot's parameters: (be, dst, src). */
#define NB_SLOT_ARGS(slot) (be NB_ARGS_##slot(NB_SLOT_ARG))
#define NB_SLOT_ARG(kind, ...) NB_SLOT_ARG_##kind(__VA_ARGS__)
#define NB_SLOT_ARG_OUT(v) , v
#define NB_SLOT_ARG_INOUT(v) , v
#define NB_SLOT_ARG_IN(v) , v
#define NB_SLOT_ARG_OUT_OPT(v) , v
#define NB_SLOT_ARG_INOUT_OPT(v) , v
#define NB_SLOT_ARG_IN_OPT(v) , v
#define NB_SLOT_ARG_LIST(v) , v
#define NB_SLOT_ARG_LIST_OPT(v) , v
#define NB_SLOT_ARG_ARG(name, ...) , name
/* The dispatcher's checks of required views (st, slot_ in scope). */
#define NB_SLOT_REQ(kind, ...) NB_SLOT_REQ_##kind(__VA_ARGS__)
#define NB_SLOT_REQ_VIEW(v) \
    if (st == NB_OK && !(v)) st = nb_kernel_null(slot_, #v);
#define NB_SLOT_REQ_OUT(v) NB_SLOT_REQ_VIEW(v)
#define NB_SLOT_REQ_INOUT(v) NB_SLOT_REQ_VIEW(v)
#define NB_SLOT_REQ_IN(v) NB_SLOT_REQ_VIEW(v)
#define NB_SLOT_REQ_OUT_OPT(v)
#define NB_SLOT_REQ_INOUT_OPT(v)
#define NB_SLOT_REQ_IN_OPT(v)
#define NB_SLOT_REQ_LIST(v) \
    if (st == NB_OK && n > 0 && !(v)) st = nb_kernel_null(slot_, #v);
#define NB_SLOT_REQ_LIST_OPT(v)
#define NB_SLOT_REQ_ARG(name, ...)
/* The shared contract check, where the slot list names one. */
#define NB_SLOT_CHECK_1(slot) \
    if (st == NB_OK) st = nb_check_##slot NB_SLOT_ARGS(slot);
#define NB_SLOT_CHECK_0(slot)

/* Slot ids, in the list's order: NB_SLOT_copy, ... */
typedef enum nb_slot_id {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_SLOT_##slot,
#include "nb_slots.def"
#undef NB_SLOT
    NB_SLOT_COUNT
} nb_slot_id;

/* "copy" for NB_SLOT_copy; "invalid slot" out of range. */
const char *nb_slot_name(nb_slot_id slot);
/* Whether the slot is REQ (an op needs it) rather than OPT. */
bool nb_slot_required(nb_slot_id slot);
/* Whether be has a kernel for slot (its vtable field is not NULL). */
bool nb_backend_has_slot(const nb_backend *be, nb_slot_id slot);

struct nb_backend_i {
    /* The dtypes the backend's kernels take (NB_DTM_* masks; 0: every
     * dtype of every row): nb_backend_supports asks it beside the op
     * table row and the row's slots. */
    unsigned dtypes;
    /* Whether the rms_norm and rope forward kernels take float16/bfloat16
     * views (float32 math inside, one rounding): the ops then run 16-bit
     * inputs natively when no gradient is recorded, and through float32
     * copies otherwise (false: always through the copies). */
    bool norms_16bit;
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
    /* 1: completed; 0: not yet; -1: the device failed (error set). */
    int (*event_query)(nb_backend *be, void *event);
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
    /* The id of the capture stream takes part in (0: none), for a stream
     * that joined another stream's capture through an event wait. */
    unsigned long long (*stream_capture_id)(nb_backend *be, void *stream);
    /* The profiler's clock (nb_profiler_start): a timing mark at the
     * current end of the current stream's queue (a timed event on a GPU, the
     * host clock on the CPU, which is synchronous), the milliseconds between
     * two marks once both have passed (waiting for b), and a mark's release.
     * Optional: without them the profiler counts calls only. */
    void *(*timer_mark)(nb_backend *be);
    double (*timer_elapsed_ms)(nb_backend *be, void *a, void *b);
    void (*timer_free)(nb_backend *be, void *mark);

    /* ---- device guard (optional) ------------------------------------------
     * device_enter makes be's device the calling thread's current one and
     * stores in *prev what device_exit(be, *prev) restores; it fails when
     * the device is unusable (NB_ERR_DEVICE, naming the first fault). The
     * dispatchers wrap every kernel call in the pair. NULL: no current
     * device (the CPU). */
    nb_status (*device_enter)(nb_backend *be, int *prev);
    void (*device_exit)(nb_backend *be, int prev);

    /* ---- memory ------------------------------------------------------------ */
    /* Raw device memory (the caching allocator in core/ sits above):
     * NB_ERR_OOM when the device has not enough free memory (no error set:
     * the allocator frees its cache, retries and reports it); any other
     * failure with its error set. */
    nb_status (*alloc)(nb_backend *be, size_t bytes, void **ptr);
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


    /* ---- kernel slots (nb_slots.def): NULL where the backend has none ---- */
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) nb_status(*slot) NB_SLOT_PARAMS(slot);
#include "nb_slots.def"
#undef NB_SLOT
};

struct nb_backend {
    const struct nb_backend_i *iface;
    nb_device device; /* the instance's device: type and index */
    const char *name; /* "cpu", "cuda" */
    int version;      /* NB_BACKEND_INTERFACE_VERSION it was built against */
    void *context;    /* the backend's own state for this device */
};

/* Takes be out of the registry (tests that register a backend of their
 * own; no tensor, stream or cached block of its device may be in use). */
void nb_backend_unregister(nb_backend *be);

/* ---- dispatch ----------------------------------------------------------------------- */

/* NB_ERR_UNSUPPORTED: be has no kernel for slot ("<slot>: not supported on
 * backend cuda:0"). */
nb_status nb_kernel_missing(nb_backend *be, nb_slot_id slot);
/* NB_ERR_INVALID_ARG: the required view `param` of slot is NULL. */
nb_status nb_kernel_null(nb_slot_id slot, const char *param);
/* Before a kernel call: while slots are traced (nb_slot_trace_begin), marks
 * the slot as used; while profiling, a timing mark. */
extern bool nb_prof_on, nb_slot_trace_on;
void nb_prof_mark_before(nb_backend *be);
void nb_slot_trace_mark(nb_slot_id slot);
/* Slot tracing (tests): from begin to end, the calling thread's kernel
 * calls set used[slot] (an array of NB_SLOT_COUNT). */
void nb_slot_trace_begin(bool *used);
void nb_slot_trace_end(void);
static inline void nb_kernel_before(nb_backend *be, nb_slot_id slot) {
    if (nb_slot_trace_on) nb_slot_trace_mark(slot);
    if (nb_prof_on) nb_prof_mark_before(be);
}
/* After a kernel call: st, or with NB_SYNC_DEBUG the device's pending
 * error; counts the call and, while profiling, times it as `slot`. */
nb_status nb_after_kernel(nb_backend *be, nb_status st, const char *slot);

/* The shared contract checks (backend/check/): nb_check_<slot>, with the
 * slot's parameters; NB_OK or the error, set. */
#define NB_SLOT_CHECK_DECL_1(slot) nb_status nb_check_##slot NB_SLOT_PARAMS(slot);
#define NB_SLOT_CHECK_DECL_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_SLOT_CHECK_DECL_##check(slot)
#include "nb_slots.def"
#undef NB_SLOT

/* ---- fusion of elementwise calls under graph capture (backend/fuse.c) ----------
 * While a CUDA graph is captured with nb_graph_options.fuse, nb_fuse_on is
 * set, and the slots marked fuse in the slot list record their calls made
 * on the captured stream (not from inside another slot) instead of running
 * them; any other slot call on that backend, a stream event and the
 * capture's end first run what was recorded, as fused programs. */
extern bool nb_fuse_on;
/* Whether a fusable call on be now is recorded: a fusing capture of be on
 * the current stream, and no slot call under way on this thread. */
bool nb_fuse_wants(nb_backend *be);
/* Runs the calls recorded for be (NB_OK when none, or not from inside a
 * slot call); the first failure is returned and the rest dropped. */
nb_status nb_fuse_flush(nb_backend *be);
/* A slot call starts / ends on this thread (while nb_fuse_on). */
void nb_fuse_enter(void);
void nb_fuse_exit(void);
#define NB_FUSE_DECL_1(slot) nb_status nb_fuse_record_##slot NB_SLOT_PARAMS(slot);
#define NB_FUSE_DECL_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_FUSE_DECL_##fuse(slot)
#include "nb_slots.def"
#undef NB_SLOT
#define NB_FUSE_HOOK_1(slot) \
    if (nb_fuse_wants(be)) return nb_fuse_record_##slot NB_SLOT_ARGS(slot);
#define NB_FUSE_HOOK_0(slot) \
    if ((st = nb_fuse_flush(be)) != NB_OK) return st;

/* nb_kernel_<slot>(be, ...): runs be's kernel for slot after the shared
 * checks (above); the slot list has the parameters. */
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse)                                            \
    static inline nb_status nb_kernel_##slot NB_SLOT_PARAMS(slot) {                      \
        const nb_slot_id slot_ = NB_SLOT_##slot;                                          \
        nb_status st = be->iface->slot ? NB_OK : nb_kernel_missing(be, slot_);            \
        NB_ARGS_##slot(NB_SLOT_REQ) NB_SLOT_CHECK_##check(slot) if (st != NB_OK) return st; \
        const bool fz_ = nb_fuse_on;                                                      \
        if (fz_) { NB_FUSE_HOOK_##fuse(slot) }                                            \
        int dev_ = 0;                                                                     \
        if (be->iface->device_enter && (st = be->iface->device_enter(be, &dev_))) return st; \
        nb_kernel_before(be, slot_);                                                      \
        if (fz_) nb_fuse_enter();                                                         \
        st = be->iface->slot NB_SLOT_ARGS(slot);                                          \
        if (fz_) nb_fuse_exit();                                                          \
        if (be->iface->device_exit) be->iface->device_exit(be, dev_);                     \
        return nb_after_kernel(be, st, #slot);                                            \
    }
#include "nb_slots.def"
#undef NB_SLOT

/* Whether be has a kernel for an OPT slot: nb_kernel_has(be, addmm). */
#define nb_kernel_has(be, slot) ((be)->iface->slot != NULL)

#ifdef __cplusplus
}
#endif
#endif
