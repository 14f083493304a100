/* gather.c - CPU gather and scatter (with the reductions of scatter_reduce)
 * along one dim, on views of any strides. Every index is checked before any
 * element moves, so a bad index fails cleanly and nothing is read or written
 * out of bounds. Work is split by line: a line is one setting of the
 * coordinates other than dim, and a scatter's destinations in a line are
 * only ever written by sources of the same line. Threads take whole lines
 * and walk each line's index in order, so every destination element is
 * updated by one thread in a fixed order (duplicates: the last write wins
 * for plain scatter; sums and products accumulate in index order); results
 * are bitwise the same for any thread count, with no atomics. */
#include <math.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

/* As sort.c: offset of line `line` (coordinates over `shape`, all dims but dim). */
static int64_t line_offset(int ndim, const int64_t *shape, const int64_t *strides, int dim, int64_t line) {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        off += (line % shape[d]) * strides[d];
        line /= shape[d];
    }
    return off;
}

/* Every entry of index in [0, size): data, so the backend's to check (the
 * rest: backend/check/gather.c). */
static nb_status check_index_values(const char *op, const nb_kview *index, int dim, int64_t size) {
    int64_t numel = nb_view_numel(index);
    if (numel == 0) return NB_OK;
    int64_t n = index->shape[dim], lines = numel / n, s = index->strides[dim];
    for (int64_t l = 0; l < lines; l++) {
        const int64_t *ip =
            (const int64_t *)index->data + line_offset(index->ndim, index->shape, index->strides, dim, l);
        for (int64_t i = 0; i < n; i++)
            if (ip[i * s] < 0 || ip[i * s] >= size)
                return nb_set_error(NB_ERR_INVALID_ARG, "%s: index %lld is out of bounds for dim %d with size %lld", op,
                                    (long long)ip[i * s], dim, (long long)size);
    }
    return NB_OK;
}

/* ---- gather --------------------------------------------------------------- */

typedef struct line_job {
    const nb_kview *dst, *index, *src;
    int dim, mode;
    bool include_self;
    int64_t n, lines, nslots;
    int64_t *counts; /* per slot: dst->shape[dim] entries (scatter reductions) */
} line_job;

static void gather_lines(void *arg, int64_t l0, int64_t l1) {
    const line_job *j = arg;
    const nb_kview *o = j->dst, *x = j->src, *ix = j->index;
    size_t es = nb_dtype_size(o->dtype);
    int d = j->dim;
    for (int64_t l = l0; l < l1; l++) {
        char *op = (char *)o->data + (size_t)line_offset(o->ndim, ix->shape, o->strides, d, l) * es;
        const char *xp = (const char *)x->data + (size_t)line_offset(x->ndim, ix->shape, x->strides, d, l) * es;
        const int64_t *ip = (const int64_t *)ix->data + line_offset(ix->ndim, ix->shape, ix->strides, d, l);
        int64_t os = o->strides[d], xs = x->strides[d], is = ix->strides[d];
        if (es == 8) /* typed moves: no memcpy call per element */
            for (int64_t i = 0; i < j->n; i++) ((uint64_t *)op)[i * os] = ((const uint64_t *)xp)[ip[i * is] * xs];
        else if (es == 4)
            for (int64_t i = 0; i < j->n; i++) ((uint32_t *)op)[i * os] = ((const uint32_t *)xp)[ip[i * is] * xs];
        else if (es == 2) /* float16, bfloat16 */
            for (int64_t i = 0; i < j->n; i++) ((uint16_t *)op)[i * os] = ((const uint16_t *)xp)[ip[i * is] * xs];
        else
            for (int64_t i = 0; i < j->n; i++) op[i * os] = xp[ip[i * is] * xs];
    }
}

nb_status nb_cpu_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index) {
    (void)be;
    nb_status st = check_index_values("gather", index, dim, x->shape[dim]);
    if (st != NB_OK) return st;
    int64_t numel = nb_view_numel(index);
    if (numel == 0) return NB_OK;
    line_job j = {out, index, x, dim, 0, false, index->shape[dim], numel / index->shape[dim], 0, NULL};
    nb_cpu_parallel_for(j.lines, NB_CPU_GRAIN / j.n + 1, gather_lines, &j);
    return NB_OK;
}

/* ---- scatter ------------------------------------------------------------------ */

enum { M_ASSIGN = NB_SCATTER_ASSIGN, M_SUM = NB_SCATTER_SUM, M_PROD = NB_SCATTER_PROD, M_MEAN = NB_SCATTER_MEAN,
       M_AMAX = NB_SCATTER_AMAX, M_AMIN = NB_SCATTER_AMIN };

#define F_NAN(v) isnan(v)
#define I_NAN(v) ((void)(v), 0)
/* The mean of integers rounds down, as PyTorch (floor division). */
#define F_DIV(a, c) ((a) / (c))
#define I_DIV(a, c) ((a) / (c) - (((a) % (c) != 0) && (((a) < 0) != ((c) < 0))))

/* One line: counts (the slot's, all zero on entry and on exit) track how
 * many sources each destination got, for include_self = false (the first
 * source replaces self) and for mean. amax/amin propagate NaN as PyTorch. */
#define T float
#define S f32
#define ISNAN F_NAN
#define DIV F_DIV
#include "scatter.t.h"
#define T double
#define S f64
#define ISNAN F_NAN
#define DIV F_DIV
#include "scatter.t.h"
#define T int32_t
#define S i32
#define ISNAN I_NAN
#define DIV I_DIV
#include "scatter.t.h"
#define T int64_t
#define S i64
#define ISNAN I_NAN
#define DIV I_DIV
#include "scatter.t.h"
#define T uint8_t
#define S u8
#define ISNAN I_NAN
#define DIV F_DIV
#include "scatter.t.h"
#define T int8_t
#define S i8
#define ISNAN I_NAN
#define DIV I_DIV
#include "scatter.t.h"
#define T int16_t
#define S i16
#define ISNAN I_NAN
#define DIV I_DIV
#include "scatter.t.h"

typedef void (*scatter_line_fn)(const line_job *j, int64_t l, int64_t *counts);

typedef struct scatter_run {
    const line_job *j;
    scatter_line_fn fn;
} scatter_run;

/* Slot c handles lines c, c + nslots, ... with count buffer c. */
static void scatter_slots(void *arg, int64_t c0, int64_t c1) {
    const scatter_run *r = arg;
    const line_job *j = r->j;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t l = c; l < j->lines; l += j->nslots) r->fn(j, l, j->counts + c * j->dst->shape[j->dim]);
}

/* The line function of a dtype backend/check/gather.c lets through. */
static scatter_line_fn scatter_fn(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return scatter_line_f32;
    case NB_F64: return scatter_line_f64;
    case NB_I32: return scatter_line_i32;
    case NB_I64: return scatter_line_i64;
    case NB_I8: return scatter_line_i8;
    case NB_I16: return scatter_line_i16;
    default: return scatter_line_u8; /* uint8; bool (plain scatter only) */
    }
}

nb_status nb_cpu_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                         nb_scatter_mode mode, bool include_self) {
    nb_status st = check_index_values("scatter", index, dim, out->shape[dim]);
    if (st != NB_OK) return st;
    scatter_line_fn fn = scatter_fn(out->dtype);
    int64_t numel = nb_view_numel(index);
    if (numel == 0) return NB_OK;
    line_job j = {out, index, src, dim, mode, include_self, index->shape[dim], numel / index->shape[dim], 0, NULL};
    int64_t threads = nb_cpu_get_num_threads(), by_work = 1 + numel / NB_CPU_GRAIN;
    j.nslots = threads < j.lines ? threads : j.lines;
    if (j.nslots > by_work) j.nslots = by_work;
    size_t bytes = sizeof(int64_t) * (size_t)(j.nslots * out->shape[dim]);
    void *ws_block;
    j.counts = nb_alloc_raw(be, bytes, nb_backend_current_stream(be), &ws_block);
    if (!j.counts)
        return nb_set_error(NB_ERR_OOM, "scatter: out of memory for %zu bytes of counts", bytes);
    memset(j.counts, 0, bytes);
    scatter_run r = {&j, fn};
    nb_cpu_parallel_for(j.nslots, 1, scatter_slots, &r);
    nb_free_raw(be, ws_block);
    return NB_OK;
}
