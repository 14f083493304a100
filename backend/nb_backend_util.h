/* nb_backend_util.h - the internals a backend's kernels use (not
 * installed), in a header that C++ (a CUDA backend's .cu files) can
 * include: error reporting, the caching allocator for scratch memory, the
 * host allocations of the core and the tape. */
#ifndef NB_BACKEND_UTIL_H
#define NB_BACKEND_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "nb_backend_impl.h"
#include "nb_extension.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NB_ASSERT, nb_set_error, NB_FAIL: nb_extension.h */

/* The binary op's name in messages (PyTorch's: "remainder", "bitwise_left_shift";
 * both rounding divisions are "div"); "invalid binary op" outside the enum. */
static inline const char *nb_binary_name(nb_binary_op op) {
    static const char *const names[] = {
        "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "gt", "ge", "lt", "le",
        "remainder", "fmod", "atan2", "div", "div", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_left_shift", "bitwise_right_shift"};
#ifdef __cplusplus
    static_assert(sizeof names / sizeof names[0] == NB_BINARY_OP_COUNT, "nb_binary_name must name every binary op");
#else
    _Static_assert(sizeof names / sizeof names[0] == NB_BINARY_OP_COUNT, "nb_binary_name must name every binary op");
#endif
    return (unsigned)op < NB_BINARY_OP_COUNT ? names[op] : "invalid binary op";
}

/* ---- the unary ops' list (NB_UNARY_OPS, nb_backend.h) ----------------------------------- */

typedef enum nb_unary_saved {
    NB_UNARY_SAVED_NONE,
    NB_UNARY_SAVED_IN,
    NB_UNARY_SAVED_OUT,
    NB_UNARY_SAVED_EITHER
} nb_unary_saved;
/* "expm1"; "invalid unary op" outside the list. */
static inline const char *nb_unary_name(nb_unary_op op) {
    switch (op) {
#define NB_UNARY_NAME(id, name, saved, api) \
    case NB_UNARY_##id: return #name;
        NB_UNARY_OPS(NB_UNARY_NAME)
#undef NB_UNARY_NAME
    default: return "invalid unary op";
    }
}
/* Which tensor of the forward unary_backward's rule for op reads. */
static inline nb_unary_saved nb_unary_saved_of(nb_unary_op op) {
    switch (op) {
#define NB_UNARY_SAVED(id, name, saved, api) \
    case NB_UNARY_##id: return NB_UNARY_SAVED_##saved;
        NB_UNARY_OPS(NB_UNARY_SAVED)
#undef NB_UNARY_SAVED
    default: return NB_UNARY_SAVED_NONE;
    }
}
/* The view that rule reads: x, y, either (x where given), or gy itself
 * when it reads neither; NULL when the one it needs was not given. */
static inline const nb_kview *nb_unary_saved_view(nb_unary_op op, const nb_kview *gy, const nb_kview *x,
                                                  const nb_kview *y) {
    switch (nb_unary_saved_of(op)) {
    case NB_UNARY_SAVED_IN: return x;
    case NB_UNARY_SAVED_OUT: return y;
    case NB_UNARY_SAVED_EITHER: return x ? x : y;
    default: return gy;
    }
}

/* ---- views (nb_kview) ----------------------------------------------------------------- */

static inline int64_t nb_view_numel(const nb_kview *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}
static inline bool nb_view_same_shape(const nb_kview *a, const nb_kview *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}
/* C-order dense (size-1 dims may have any stride; an empty view is). */
static inline bool nb_view_is_contiguous(const nb_kview *v) {
    if (nb_view_numel(v) == 0) return true;
    int64_t expect = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->shape[d];
    }
    return true;
}
/* The greatest common divisor of |a| and |b| (0 when both are 0). */
static inline int64_t nb_gcd64(int64_t a, int64_t b) {
    a = a < 0 ? -a : a, b = b < 0 ? -b : b;
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}
/* A view as a run of bytes repeated with a period: *run bytes from each
 * element of its innermost dim of size > 1 (stride 1) on, the outer dims
 * stepping by multiples of *period bytes (0: a single run). False when
 * the innermost dim is not dense. */
static inline bool nb_view_runs(const nb_kview *v, int64_t *run, int64_t *period) {
    int64_t es = (int64_t)nb_dtype_size(v->dtype), p = 0;
    int inner = v->ndim - 1;
    while (inner >= 0 && v->shape[inner] == 1) inner--;
    if (inner >= 0 && v->strides[inner] != 1) return false;
    *run = (inner >= 0 ? v->shape[inner] : 1) * es;
    for (int d = 0; d < inner; d++)
        if (v->shape[d] != 1) p = nb_gcd64(p, v->strides[d] * es);
    *period = p;
    return true;
}
/* Whether a and b may share a byte: their byte ranges [first element,
 * last element] meet, and they do not interleave as two column blocks of
 * one matrix do (each view's bytes lie at offsets in a window of width
 * run modulo a common period, and the windows are apart). */
static inline bool nb_view_ranges_meet(const nb_kview *a, const nb_kview *b) {
    const nb_kview *v[2] = {a, b};
    const char *lo[2], *hi[2];
    for (int k = 0; k < 2; k++) {
        int64_t l = 0, h = 0;
        for (int d = 0; d < v[k]->ndim; d++) {
            int64_t s = (v[k]->shape[d] - 1) * v[k]->strides[d];
            if (s < 0) l += s;
            else h += s;
        }
        int64_t es = (int64_t)nb_dtype_size(v[k]->dtype);
        lo[k] = (const char *)v[k]->data + l * es, hi[k] = (const char *)v[k]->data + (h + 1) * es;
    }
    if (!(lo[0] < hi[1] && lo[1] < hi[0])) return false;
    int64_t run[2], per[2];
    if (!nb_view_runs(a, &run[0], &per[0]) || !nb_view_runs(b, &run[1], &per[1]) || !per[0] || !per[1]) return true;
    int64_t p = nb_gcd64(per[0], per[1]); /* the common period */
    if (run[0] > p || run[1] > p) return true;
    int64_t r0 = (int64_t)((uintptr_t)a->data % (uint64_t)p), r1 = (int64_t)((uintptr_t)b->data % (uint64_t)p);
    int64_t d01 = ((r1 - r0) % p + p) % p, d10 = ((r0 - r1) % p + p) % p; /* b's window start past a's, and back */
    return d01 < run[0] || d10 < run[1];
}
/* Whether a and b are the same elements in the same order: data, dtype,
 * shape, and strides where the size is above 1. */
static inline bool nb_view_same_elements(const nb_kview *a, const nb_kview *b) {
    if (a->data != b->data || a->dtype != b->dtype || !nb_view_same_shape(a, b)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return false;
    return true;
}
/* nv views of one shape walked in C order with fewer dims: size-1 dims
 * dropped and a dim merged into the one before where every view steps
 * through both as one (the iterators' rule). Writes *ndim, shape and
 * st[k] (view k's element strides); returns *ndim. */
static inline int nb_view_merge_dims(int nv, const nb_kview *v, int *ndim, int64_t *shape,
                                     int64_t (*st)[NB_MAX_DIMS]) {
    int n = 0;
    for (int d = 0; d < v[0].ndim; d++) {
        if (v[0].shape[d] == 1) continue;
        shape[n] = v[0].shape[d];
        for (int k = 0; k < nv; k++) st[k][n] = v[k].strides[d];
        n++;
    }
    int m = 0;
    for (int d = 0; d < n; d++) {
        bool merge = m > 0;
        for (int k = 0; k < nv && merge; k++) merge = st[k][m - 1] == st[k][d] * shape[d];
        if (merge) {
            shape[m - 1] *= shape[d];
            for (int k = 0; k < nv; k++) st[k][m - 1] = st[k][d];
            continue;
        }
        shape[m] = shape[d];
        for (int k = 0; k < nv; k++) st[k][m] = st[k][d];
        m++;
    }
    return *ndim = m;
}
/* The binary ops a fused elementwise program takes (the pointwise slot):
 * every float op but the bitwise ones and shifts, and for bool operands
 * the comparisons and the logic ops (add/max as or, mul/min as and). */
static inline bool nb_pw_binary_takes(int op, nb_dtype in) {
    if (op >= NB_BINARY_EQ && op <= NB_BINARY_LE) return true;
    if (in == NB_BOOL)
        return op == NB_BINARY_ADD || op == NB_BINARY_MUL || op == NB_BINARY_MAXIMUM || op == NB_BINARY_MINIMUM ||
               op == NB_BINARY_BITWISE_AND || op == NB_BINARY_BITWISE_OR || op == NB_BINARY_BITWISE_XOR;
    return op < NB_BINARY_BITWISE_AND;
}
/* "[2, 3] float32" into buf (for error messages); NB_VIEW_STR bytes hold any. */
#define NB_VIEW_STR 160
const char *nb_view_str(const nb_kview *v, char *buf, size_t len);

/* nb_set_float32_matmul_precision's setting: 0 highest, 1 high, 2 medium. */
int nb_float32_matmul_precision(void);

/* ---- host allocations of the core and the tape (core/error.c) -------------- */

/* calloc for the small host structs of tensors, storages and tape nodes.
 * Tests can make the n-th next call (per thread) fail with
 * nb_fault_inject_host_alloc(n), to check that every caller turns it into
 * an error instead of a crash. */
void *nb_host_calloc(size_t n, size_t size);
void nb_fault_inject_host_alloc(int n);
/* For steps that cannot return a status (nb_save): records the failure;
 * the op's nb_scope_return then returns NULL with that error. */
void nb_fail_pending(nb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool nb_take_pending_failure(void);

/* ---- caching allocator (core/alloc.c) ----------------------------------- */

/* bytes on be's device for use on stream (a backend stream handle); *block
 * receives the block to give back to nb_free_raw. NULL with NB_ERR_OOM, or
 * with the backend's error when the device failed. */
void *nb_alloc_raw(nb_backend *be, size_t bytes, void *stream, void **block);
void nb_free_raw(nb_backend *be, void *block);
/* The block is also used on stream (nb_record_stream). */
nb_status nb_alloc_record_stream(nb_backend *be, void *block, void *stream);
/* Graph pools (core/graph.c): requests on `stream` (and on streams that
 * joined its capture) come from pool `pool` until nb_alloc_capture_end;
 * nb_alloc_pool_release when the graph dies. While paused, requests come
 * from the shared pool (memory that outlives the graph's pool). */
nb_status nb_alloc_capture_begin(nb_backend *be, void *stream, int pool);
void nb_alloc_capture_end(nb_backend *be);
void nb_alloc_capture_pause(nb_backend *be, bool paused);
void nb_alloc_pool_release(nb_backend *be, int pool);

/* ---- elementwise fusion under graph capture (backend/fuse.c) ------------------ */

/* Fusion starts for the capture of stream on be (a no-op where be has no
 * pointwise slot), and ends: what is recorded runs first. */
nb_status nb_fuse_begin(nb_backend *be, void *stream);
nb_status nb_fuse_end(nb_backend *be);
/* A device block [ptr, ptr + bytes) was freed: recorded calls writing it
 * need not store (core/alloc.c calls it). */
void nb_fuse_note_free(void *ptr, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
