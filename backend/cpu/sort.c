/* sort.c - the CPU sort kernel behind sort, argsort, topk and kthvalue: a
 * stable merge sort of every line along one dim (insertion-sorted runs of
 * 16, then bottom-up merges), keyed by the element and tie-broken by the
 * original position, so equal keys keep their order ascending and
 * descending alike. NaN sorts as larger than every number (last ascending,
 * first descending), as PyTorch. Lines are independent: threads take
 * interleaved lines, each with its own workspace from the caching allocator,
 * and the result never depends on the thread count. */
#include <math.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define RUN 16

/* Offset (elements) of line `line` in a view: the line's coordinates
 * (every dim but `dim`, C order over `shape`) dotted with `strides`. */
static int64_t line_offset(int ndim, const int64_t *shape, const int64_t *strides, int dim, int64_t line) {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        off += (line % shape[d]) * strides[d];
        line /= shape[d];
    }
    return off;
}

typedef struct sort_job {
    const nb_kview *values, *indices, *x;
    int dim;
    bool descending;
    int64_t n, k, lines, nslots;
    size_t ws_stride; /* bytes per slot: keys, then two index buffers */
    char *ws;
} sort_job;

#define F_NAN(v) isnan(v)
#define I_NAN(v) ((void)(v), 0)

/* before(a, b): a sorts strictly before b (NaN largest). Merges take the
 * right element only when it is strictly before the left: stable. */
#define T float
#define S f32
#define ISNAN F_NAN
#include "sort.t.h"
#define T double
#define S f64
#define ISNAN F_NAN
#include "sort.t.h"
#define T int32_t
#define S i32
#define ISNAN I_NAN
#include "sort.t.h"
#define T int64_t
#define S i64
#define ISNAN I_NAN
#include "sort.t.h"
#define T uint8_t
#define S u8
#define ISNAN I_NAN
#include "sort.t.h"
#define T int8_t
#define S i8
#define ISNAN I_NAN
#include "sort.t.h"
#define T int16_t
#define S i16
#define ISNAN I_NAN
#include "sort.t.h"

typedef void (*sort_line_fn)(const sort_job *j, int64_t line, char *ws);

typedef struct sort_run {
    const sort_job *j;
    sort_line_fn fn;
} sort_run;

/* Slot c sorts lines c, c + nslots, ... in workspace c. */
static void sort_slots(void *arg, int64_t c0, int64_t c1) {
    const sort_run *r = arg;
    const sort_job *j = r->j;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t l = c; l < j->lines; l += j->nslots) r->fn(j, l, j->ws + (size_t)c * j->ws_stride);
}

/* Arguments checked: backend/check/sort.c. */
nb_status nb_cpu_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                      bool descending) {
    sort_line_fn fn;
    switch (x->dtype) {
    case NB_F32: fn = sort_line_f32; break;
    case NB_F64: fn = sort_line_f64; break;
    case NB_I32: fn = sort_line_i32; break;
    case NB_I64: fn = sort_line_i64; break;
    case NB_I8: fn = sort_line_i8; break;
    case NB_I16: fn = sort_line_i16; break;
    default: fn = sort_line_u8; break; /* uint8 and bool (0/1 bytes) */
    }
    sort_job j = {values, indices, x, dim, descending, x->shape[dim], indices->shape[dim], 0, 0, 0, NULL};
    int64_t numel = nb_view_numel(x);
    if (numel == 0 || j.k == 0) return NB_OK;
    j.lines = numel / j.n;
    int64_t threads = nb_cpu_get_num_threads(), by_work = 1 + numel / 4096;
    j.nslots = threads < j.lines ? threads : j.lines;
    if (j.nslots > by_work) j.nslots = by_work;
    j.ws_stride = (nb_dtype_size(x->dtype) * (size_t)j.n + 7) / 8 * 8 + 16 * (size_t)j.n;
    void *ws_block;
    j.ws = nb_alloc_raw(be, (size_t)j.nslots * j.ws_stride, nb_backend_current_stream(be), &ws_block);
    if (!j.ws)
        return nb_set_error(NB_ERR_OOM, "sort: out of memory for %lld workspaces of %zu bytes", (long long)j.nslots,
                            j.ws_stride);
    sort_run r = {&j, fn};
    nb_cpu_parallel_for(j.nslots, 1, sort_slots, &r);
    nb_free_raw(be, ws_block);
    return NB_OK;
}
