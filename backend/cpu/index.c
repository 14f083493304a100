/* index.c - CPU index_select, index_add, index_copy and where. A
 * contiguous tensor is seen as [outer, size, inner] around the indexed dim.
 * index_select copies whole inner runs, split over threads by output row.
 * index_add (the backward of index_select and embedding) zeroes its output
 * (threads split it into contiguous row spans) and adds g's rows in index
 * order; threads split the (outer, column block) pairs, so every output
 * element is written by one thread and summed in a fixed order, whatever
 * the thread count (PyTorch's deterministic index_add
 * / embedding backward, with no atomics). Accumulating into gx (a
 * parameter's .grad), the index is sorted stably and each hit row gets its
 * run's sum, formed from zero, added once. index_copy overwrites rows in
 * index order per outer slice (the last repeat wins, deterministically).
 * where walks the strided iterator (iter.h) with one loop per element
 * size, so it takes every dtype.
 * nonzero (torch.nonzero, masked_select) cannot be a composite of other
 * kernels (its output size depends on the data): the input (any dtype, any
 * strides) is cut into at most NZ_BLOCKS fixed blocks of C-order positions;
 * one pass counts the nonzero elements per block, a prefix sum gives each
 * block its first output row, and a second pass writes the positions. The
 * blocks depend only on numel, so the output is the same for any thread
 * count (it is fully determined anyway: C order). */
#include <stdlib.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

/* [outer, size, inner] around dim of a contiguous view. */
static void split_dims(const nb_kview *v, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= v->shape[d];
    for (int d = dim + 1; d < v->ndim; d++) *inner *= v->shape[d];
}

/* Every entry of the 1-d index in [0, size): data, so the backend's to
 * check (the rest: backend/check/index.c). */
static nb_status check_index_values(const char *op, const nb_kview *index, int64_t size) {
    const int64_t *idx = index->data;
    for (int64_t i = 0; i < index->shape[0]; i++)
        if (idx[i] < 0 || idx[i] >= size)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: index %lld (at position %lld) is out of range [0, %lld)",
                                op, (long long)idx[i], (long long)i, (long long)size);
    return NB_OK;
}

/* ---- index_select ------------------------------------------------------- */

typedef struct sel_job {
    char *out;
    const char *x;
    const int64_t *idx;
    int64_t k, size, inner;
    size_t es; /* element bytes */
} sel_job;

/* Output rows r0..r1 of [outer * k, inner]; rows of one 4- or 8-byte
 * element (index_select along the last dim) are moved without memcpy calls. */
static void sel_rows(void *arg, int64_t r0, int64_t r1) {
    const sel_job *j = arg;
    size_t row = (size_t)j->inner * j->es;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->k, i = r % j->k;
        const char *src = j->x + (size_t)(o * j->size + j->idx[i]) * row;
        char *dst = j->out + (size_t)r * row;
        if (row == 4) *(uint32_t *)dst = *(const uint32_t *)src;
        else if (row == 8) *(uint64_t *)dst = *(const uint64_t *)src;
        else memcpy(dst, src, row);
    }
}

nb_status nb_cpu_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                              const nb_kview *index) {
    (void)be;
    nb_status st = check_index_values("index_select", index, x->shape[dim]);
    if (st != NB_OK) return st;
    sel_job j = {out->data, x->data, index->data, index->shape[0], x->shape[dim], 1, nb_dtype_size(x->dtype)};
    int64_t outer;
    split_dims(x, dim, &outer, &j.inner);
    int64_t rows = outer * j.k;
    if (rows == 0 || j.inner == 0) return NB_OK;
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / j.inner + 1, sel_rows, &j);
    return NB_OK;
}

/* ---- index_add ---------------------------------------------------------- */

typedef struct add_job {
    char *gx;
    const char *g;
    const int64_t *idx;
    int64_t k, size, inner, skip;
    int64_t cb, ncb; /* column block width and count per outer slice */
} add_job;

typedef struct zero_job {
    char *p;
    int64_t row; /* bytes */
} zero_job;

static void zero_rows(void *arg, int64_t r0, int64_t r1) {
    const zero_job *z = arg;
    memset(z->p + r0 * z->row, 0, (size_t)((r1 - r0) * z->row));
}

/* accumulate: the index sorted stably (key, then position), so each row's
 * positions form a run in index order; a run's sum is formed from zero in
 * a register-sized chunk and added to its row once. */
typedef struct key_pos {
    int64_t key, pos;
} key_pos;

typedef struct acc_job {
    char *gx;
    const char *g;
    const key_pos *kp;    /* [k], sorted */
    const int64_t *start; /* [nruns + 1]: each run's first entry in kp */
    int64_t nruns, k, size, inner, skip;
} acc_job;

#define ACC_CHUNK 256 /* elements of a run's sum held at once */

#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP_ADD32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b))) /* wraps, as PyTorch */
#define WRAP_ADD64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define WRAP_ADD8(a, b) ((uint8_t)((a) + (b)))
#define WRAP_ADDI8(a, b) ((int8_t)(uint8_t)((unsigned)(uint8_t)(a) + (uint8_t)(b)))
#define WRAP_ADDI16(a, b) ((int16_t)(uint16_t)((unsigned)(uint16_t)(a) + (uint16_t)(b)))
#define T float
#define S f32
#define ADD PLAIN_ADD
#include "index_add.t.h"
#define T double
#define S f64
#define ADD PLAIN_ADD
#include "index_add.t.h"
#define T int32_t
#define S i32
#define ADD WRAP_ADD32
#include "index_add.t.h"
#define T int64_t
#define S i64
#define ADD WRAP_ADD64
#include "index_add.t.h"
#define T uint8_t
#define S u8
#define ADD WRAP_ADD8
#include "index_add.t.h"
#define T int8_t
#define S i8
#define ADD WRAP_ADDI8
#include "index_add.t.h"
#define T int16_t
#define S i16
#define ADD WRAP_ADDI16
#include "index_add.t.h"

static int by_key_pos(const void *a, const void *b) {
    const key_pos *x = a, *y = b;
    return x->key != y->key ? (x->key < y->key ? -1 : 1) : (x->pos < y->pos ? -1 : x->pos > y->pos);
}

/* gx += the runs' sums (the accumulate form). */
static nb_status index_add_into(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g,
                                int64_t skip_index) {
    int64_t k = index->shape[0], outer;
    acc_job j = {gx->data, g->data, NULL, NULL, 0, k, gx->shape[dim], 1, skip_index};
    split_dims(gx, dim, &outer, &j.inner);
    if (outer * k * j.inner == 0) return NB_OK;
    void *block;
    char *ws = nb_alloc_raw(be, (size_t)k * (sizeof(key_pos) + sizeof(int64_t)) + sizeof(int64_t),
                            nb_backend_current_stream(be), &block);
    if (!ws) return nb_set_error(NB_ERR_OOM, "index_add: out of memory to sort an index of %lld entries", (long long)k);
    key_pos *kp = (key_pos *)ws;
    int64_t *start = (int64_t *)(kp + k);
    const int64_t *idx = index->data;
    for (int64_t i = 0; i < k; i++) kp[i] = (key_pos){idx[i], i};
    qsort(kp, (size_t)k, sizeof *kp, by_key_pos);
    for (int64_t i = 0; i < k; i++)
        if (i == 0 || kp[i].key != kp[i - 1].key) start[j.nruns++] = i;
    start[j.nruns] = k;
    j.kp = kp, j.start = start;
    nb_cpu_range_fn fn = gx->dtype == NB_F32 ? acc_runs_f32 : gx->dtype == NB_F64 ? acc_runs_f64
                       : gx->dtype == NB_I32 ? acc_runs_i32 : gx->dtype == NB_I64 ? acc_runs_i64
                       : gx->dtype == NB_I8 ? acc_runs_i8 : gx->dtype == NB_I16 ? acc_runs_i16
                       : acc_runs_u8;
    nb_cpu_parallel_for(outer * j.nruns, NB_CPU_GRAIN / (j.inner * (k / j.nruns)) + 1, fn, &j);
    nb_free_raw(be, block);
    return NB_OK;
}

nb_status nb_cpu_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g,
                           int64_t skip_index, bool accumulate) {
    nb_status st = check_index_values("index_add", index, gx->shape[dim]);
    if (st != NB_OK) return st;
    if (accumulate) return index_add_into(be, gx, dim, index, g, skip_index);
    nb_cpu_range_fn fn = gx->dtype == NB_F32 ? add_units_f32 : gx->dtype == NB_F64 ? add_units_f64
                       : gx->dtype == NB_I32 ? add_units_i32 : gx->dtype == NB_I64 ? add_units_i64
                       : gx->dtype == NB_I8 ? add_units_i8 : gx->dtype == NB_I16 ? add_units_i16
                       : add_units_u8; /* the dtypes the check lets through */
    add_job j = {gx->data, g->data, index->data, index->shape[0], gx->shape[dim], 1, skip_index, 0, 1};
    int64_t outer;
    split_dims(gx, dim, &outer, &j.inner);
    if (outer * j.size * j.inner == 0) return NB_OK;
    /* Column blocks only so that every thread has work; the sums do not
     * depend on them. Blocks are multiples of 16 elements (whole cache lines). */
    int nt = nb_cpu_get_num_threads();
    int64_t work = outer * (j.size + j.k) * j.inner;
    int64_t per = work < NB_CPU_GRAIN || outer >= nt ? 1 : (nt + outer - 1) / outer;
    j.cb = (j.inner + per - 1) / per;
    j.cb = j.cb < j.inner ? (j.cb + 15) / 16 * 16 : j.inner;
    j.ncb = (j.inner + j.cb - 1) / j.cb;
    int64_t units = outer * j.ncb;
    int64_t grain = work < NB_CPU_GRAIN ? units : 1;
    /* zeroed first in contiguous spans (an embedding's gradient is mostly
     * rows no index names: one streaming pass, not a strided one per block) */
    zero_job z = {gx->data, (int64_t)nb_dtype_size(gx->dtype) * j.inner};
    nb_cpu_parallel_for(outer * j.size, NB_CPU_GRAIN / j.inner + 1, zero_rows, &z);
    nb_cpu_parallel_for(units, grain, fn, &j);
    return NB_OK;
}

/* ---- index_copy ------------------------------------------------------------ */

typedef struct copy_job {
    char *out;
    const char *src;
    const int64_t *idx;
    int64_t k, size;
    size_t row; /* bytes of one inner run */
} copy_job;

/* Outer slices o0..o1: src's rows copied in index order, so the last of
 * repeated indices wins on every thread count. */
static void copy_outer(void *arg, int64_t o0, int64_t o1) {
    const copy_job *j = arg;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t i = 0; i < j->k; i++)
            memcpy(j->out + (size_t)(o * j->size + j->idx[i]) * j->row, j->src + (size_t)(o * j->k + i) * j->row,
                   j->row);
}

nb_status nb_cpu_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                            const nb_kview *src) {
    (void)be;
    nb_status st = check_index_values("index_copy", index, out->shape[dim]);
    if (st != NB_OK) return st;
    int64_t outer, inner;
    split_dims(out, dim, &outer, &inner);
    copy_job j = {out->data, src->data, index->data, index->shape[0], out->shape[dim],
                  (size_t)inner * nb_dtype_size(out->dtype)};
    if (outer * j.k * inner == 0) return NB_OK;
    nb_cpu_parallel_for(outer, NB_CPU_GRAIN / (j.k * inner) + 1, copy_outer, &j);
    return NB_OK;
}

/* ---- where --------------------------------------------------------------- */

/* Element types by size: where only moves bits. */
#define T uint8_t
#define S 1
#include "where.t.h"
#define T uint16_t
#define S 2
#include "where.t.h"
#define T uint32_t
#define S 4
#include "where.t.h"
#define T uint64_t
#define S 8
#include "where.t.h"

/* Shapes and dtypes checked: backend/check/binary.c. */
nb_status nb_cpu_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                       const nb_kview *b) {
    (void)be;
    size_t es = nb_dtype_size(out->dtype);
    nb_cpu_loop_fn fn = es == 1 ? where_1 : es == 2 ? where_2 : es == 4 ? where_4 : where_8;
    NB_ASSERT(es == 1 || es == 2 || es == 4 || es == 8);
    nb_cpu_iter it;
    const nb_kview *ops[4] = {out, cond, a, b};
    nb_cpu_iter_init(&it, 4, ops);
    nb_cpu_iter_run(&it, NB_CPU_GRAIN, fn, NULL);
    return NB_OK;
}

/* ---- nonzero: the compaction behind torch.nonzero and masked_select ---- */

#define NZ_BLOCKS 64

typedef struct nz_job {
    const nb_kview *x;
    int64_t numel, block;    /* elements per block */
    int64_t count[NZ_BLOCKS]; /* pass 1: per block; pass 2: first row */
    int64_t *out;            /* NULL in pass 1 */
    bool flat;               /* out [n] of C-order positions, else [n, ndim] */
} nz_job;

/* x's element at byte pointer p is != 0 (NaN counts; -0.0 does not). */
static bool nz_at(const char *p, nb_dtype dt) {
    switch (dt) {
    case NB_F32: return *(const float *)p != 0;
    case NB_F64: return *(const double *)p != 0;
    case NB_I32: return *(const int32_t *)p != 0;
    case NB_I64: return *(const int64_t *)p != 0;
    case NB_I16: return *(const int16_t *)p != 0;
    case NB_F16: case NB_BF16: return (*(const uint16_t *)p & 0x7FFF) != 0; /* +-0 is zero */
    default: return *(const uint8_t *)p != 0; /* u8, i8, bool */
    }
}

/* Walks positions [b, e) in C order with an odometer over x's strides. */
static void nz_block(nz_job *j, int64_t blk) {
    const nb_kview *x = j->x;
    int64_t b = blk * j->block, e = b + j->block < j->numel ? b + j->block : j->numel;
    int64_t idx[NB_MAX_DIMS], off = 0, rem = b;
    size_t es = nb_dtype_size(x->dtype);
    for (int d = x->ndim - 1; d >= 0; d--) {
        idx[d] = rem % x->shape[d], rem /= x->shape[d];
        off += idx[d] * x->strides[d];
    }
    int64_t n = 0, row = j->count[blk];
    for (int64_t pos = b; pos < e; pos++) {
        if (nz_at((const char *)x->data + off * (int64_t)es, x->dtype)) {
            if (j->out && j->flat) j->out[row + n] = pos;
            else if (j->out) memcpy(j->out + (row + n) * x->ndim, idx, sizeof(int64_t) * (size_t)x->ndim);
            n++;
        }
        for (int d = x->ndim - 1; d >= 0; d--) { /* next position */
            off += x->strides[d];
            if (++idx[d] < x->shape[d]) break;
            off -= idx[d] * x->strides[d];
            idx[d] = 0;
        }
    }
    if (!j->out) j->count[blk] = n;
}

static void nz_range(void *arg, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) nz_block(arg, b);
}

nb_status nb_cpu_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x) {
    (void)be;
    char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
    nz_job j = {.x = x, .numel = nb_view_numel(x)};
    int64_t nblk = (j.numel + NB_CPU_GRAIN - 1) / NB_CPU_GRAIN;
    nblk = nblk < 1 ? 1 : nblk > NZ_BLOCKS ? NZ_BLOCKS : nblk;
    j.block = (j.numel + nblk - 1) / nblk;
    if (j.numel == 0) nblk = 0;
    nb_cpu_parallel_for(nblk, 1, nz_range, &j);
    int64_t total = 0;
    for (int64_t b = 0; b < nblk; b++) {
        int64_t c = j.count[b];
        j.count[b] = total, total += c;
    }
    if (!out) {
        *count = total;
        return NB_OK;
    }
    j.flat = out->ndim == 1;
    /* out's dtype and layout are checked (backend/check/index.c); its rows
     * must be the count, which is data */
    if (out->shape[0] != total)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nonzero: out %s must be contiguous int64 [%lld, %d] or [%lld] for input %s",
                            nb_view_str(out, b1, sizeof b1), (long long)total, x->ndim, (long long)total,
                            nb_view_str(x, b2, sizeof b2));
    j.out = out->data;
    if (total > 0) nb_cpu_parallel_for(nblk, 1, nz_range, &j);
    return NB_OK;
}
