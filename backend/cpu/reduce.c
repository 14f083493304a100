/* reduce.c - CPU sum/prod/max/min over any set of dims, argmax and argmin.
 *
 * Determinism: the result of each output element is defined independently
 * of threads. Its reduced elements, in C order, are cut into fixed blocks
 * of NB_RED_BLOCK; a block is combined in a fixed order (8 interleaved
 * lanes where the run is contiguous, so the loop vectorises, else
 * sequentially), and block results are combined left to right. Threads
 * then either take whole output elements, or (few outputs, long
 * reductions) take (output, block) pairs into a buffer combined in order
 * afterwards; both give the same bits. float32 accumulates in double and
 * integers in int64 (PyTorch sums integers into int64).
 *
 * A fast path covers "sum dim 0 of a contiguous [n, m] matrix" (a bias
 * gradient): rows are walked contiguously, accumulating vectors of columns,
 * with the same block structure, so it gives the generic path's bits.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define NB_RED_BLOCK 4096 /* reduced elements per block: fixes the order */
#define NB_RED_COLS 256   /* columns per task in the [n, m] dim-0 path */
#define NB_RED_LANES 8

typedef struct red_plan {
    int nk, nr; /* kept and reduced dims after coalescing (nr >= 1) */
    int64_t kshape[NB_MAX_DIMS], kx[NB_MAX_DIMS], ko[NB_MAX_DIMS]; /* x and out strides */
    int64_t rshape[NB_MAX_DIMS], rx[NB_MAX_DIMS];
    int64_t M, R, nblocks;
} red_plan;

/* Appends a dim to a group, merging it into the group's last dim when
 * every stride runs on across both. */
static void group_add(int *n, int64_t *shape, int64_t *s1, int64_t *s2, int64_t size, int64_t a,
                      int64_t b) {
    int k = *n;
    if (k > 0 && s1[k - 1] == a * size && (!s2 || s2[k - 1] == b * size)) {
        shape[k - 1] *= size;
        s1[k - 1] = a;
        if (s2) s2[k - 1] = b;
        return;
    }
    shape[k] = size, s1[k] = a;
    if (s2) s2[k] = b;
    *n = k + 1;
}

/* Groups out's and x's dims (checked: backend/check/reduce.c). */
static void plan_init(red_plan *pl, const nb_kview *out, const nb_kview *x) {
    memset(pl, 0, sizeof *pl);
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->shape[d];
        if (n == 1 && out->shape[d] == 1) continue;
        if (out->shape[d] == 1)
            group_add(&pl->nr, pl->rshape, pl->rx, NULL, n, x->strides[d], 0);
        else
            group_add(&pl->nk, pl->kshape, pl->kx, pl->ko, n, x->strides[d], out->strides[d]);
    }
    if (pl->nr == 0) pl->rshape[0] = 1, pl->rx[0] = 0, pl->nr = 1;
    pl->M = pl->R = 1;
    for (int d = 0; d < pl->nk; d++) pl->M *= pl->kshape[d];
    for (int d = 0; d < pl->nr; d++) pl->R *= pl->rshape[d];
    pl->nblocks = (pl->R + NB_RED_BLOCK - 1) / NB_RED_BLOCK;
}

/* Element offsets in x and out of output element m. */
static void kept_offsets(const red_plan *pl, int64_t m, int64_t *xo, int64_t *oo) {
    int64_t a = 0, b = 0;
    for (int d = pl->nk - 1; d >= 0; d--) {
        int64_t i = m % pl->kshape[d];
        m /= pl->kshape[d];
        a += i * pl->kx[d], b += i * pl->ko[d];
    }
    *xo = a, *oo = b;
}

/* Stores v (an accumulator, already scaled) into out at element offset o. */
static void store_f(nb_dtype dt, void *base, int64_t o, double v) {
    switch (dt) {
    case NB_F32: ((float *)base)[o] = (float)v; break;
    case NB_F64: ((double *)base)[o] = v; break;
    case NB_I32: ((int32_t *)base)[o] = (int32_t)v; break;
    case NB_I64: ((int64_t *)base)[o] = (int64_t)v; break;
    case NB_I8: ((int8_t *)base)[o] = (int8_t)(int64_t)v; break;
    case NB_I16: ((int16_t *)base)[o] = (int16_t)(int64_t)v; break;
    default: ((uint8_t *)base)[o] = (uint8_t)(int64_t)v; break;
    }
}
static void store_i(nb_dtype dt, void *base, int64_t o, int64_t v, double scale) {
    if (nb_dtype_is_float(dt)) store_f(dt, base, o, (double)v * scale);
    else if (dt == NB_I32) ((int32_t *)base)[o] = (int32_t)v;
    else if (dt == NB_I64) ((int64_t *)base)[o] = v;
    else if (dt == NB_I8) ((int8_t *)base)[o] = (int8_t)v;
    else if (dt == NB_I16) ((int16_t *)base)[o] = (int16_t)v;
    else ((uint8_t *)base)[o] = (uint8_t)v;
}

#define MAXF(x, y) ((x) != (x) || (x) > (y) ? (x) : (y))
#define MINF(x, y) ((x) != (x) || (x) < (y) ? (x) : (y))
#define MAXI(x, y) ((x) > (y) ? (x) : (y))
#define MINI(x, y) ((x) < (y) ? (x) : (y))

typedef struct red_job {
    const red_plan *pl;
    nb_reduce_op op;
    const char *x;
    const nb_kview *out;
    double scale;
    void *partial; /* M * nblocks accumulators, or NULL */
} red_job;

/* Per (T, accumulator A) functions:
 *   seg:   combine n elements at stride s (elements), in a fixed order
 *   range: combine reduced flat indices [r0, r1) of one output
 *   value: combine the output's blocks left to right
 *   the thread bodies for the two parallel plans and the dim-0 path. */

#define STORE_F(dt, base, o, v, scale) store_f(dt, base, o, (v) * (scale))
#define STORE_I(dt, base, o, v, scale) store_i(dt, base, o, v, scale)
/* Integer products wrap (two's complement, as PyTorch) without signed-overflow UB. */
#define MULF(a, b) ((a) * (b))
#define MULI(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define T float
#define A double
#define S f32
#define MAX MAXF
#define MIN MINF
#define MUL MULF
#define STORE STORE_F
#include "reduce.t.h"
#define T double
#define A double
#define S f64
#define MAX MAXF
#define MIN MINF
#define MUL MULF
#define STORE STORE_F
#include "reduce.t.h"
#define T int32_t
#define A int64_t
#define S i32
#define MAX MAXI
#define MIN MINI
#define MUL MULI
#define STORE STORE_I
#include "reduce.t.h"
#define T int64_t
#define A int64_t
#define S i64
#define MAX MAXI
#define MIN MINI
#define MUL MULI
#define STORE STORE_I
#include "reduce.t.h"
#define T uint8_t
#define A int64_t
#define S u8
#define MAX MAXI
#define MIN MINI
#define MUL MULI
#define STORE STORE_I
#include "reduce.t.h"
#define T int8_t
#define A int64_t
#define S i8
#define MAX MAXI
#define MIN MINI
#define MUL MULI
#define STORE STORE_I
#include "reduce.t.h"
#define T int16_t
#define A int64_t
#define S i16
#define MAX MAXI
#define MIN MINI
#define MUL MULI
#define STORE STORE_I
#include "reduce.t.h"

typedef struct red_fns {
    nb_cpu_range_fn outputs, blocks, cols;
    size_t acc_size;
} red_fns;

static red_fns fns_of(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return (red_fns){outputs_f32, blocks_f32, cols_f32, sizeof(double)};
    case NB_F64: return (red_fns){outputs_f64, blocks_f64, cols_f64, sizeof(double)};
    case NB_I32: return (red_fns){outputs_i32, blocks_i32, cols_i32, sizeof(int64_t)};
    case NB_I64: return (red_fns){outputs_i64, blocks_i64, cols_i64, sizeof(int64_t)};
    case NB_I8: return (red_fns){outputs_i8, blocks_i8, cols_i8, sizeof(int64_t)};
    case NB_I16: return (red_fns){outputs_i16, blocks_i16, cols_i16, sizeof(int64_t)};
    default: return (red_fns){outputs_u8, blocks_u8, cols_u8, sizeof(int64_t)}; /* u8, bool */
    }
}

/* Runs the plan: the dim-0 path, (output, block) pairs, or whole outputs. */
static void red_run(red_job *job, const red_fns *f) {
    const red_plan *pl = job->pl;
    int nt = nb_cpu_get_num_threads();
    if (pl->nk == 1 && pl->nr == 1 && pl->kx[0] == 1 && pl->rx[0] != 1) {
        int64_t ncb = (pl->kshape[0] + NB_RED_COLS - 1) / NB_RED_COLS;
        int64_t grain = NB_CPU_GRAIN / (NB_RED_COLS * pl->R) + 1;
        nb_cpu_parallel_for(ncb, grain, f->cols, job);
        return;
    }
    int64_t tasks = pl->M * pl->nblocks;
    if (pl->M < 2 * nt && pl->nblocks > 1 && nt > 1) {
        char stack[4096];
        size_t bytes = (size_t)tasks * f->acc_size;
        job->partial = bytes <= sizeof stack ? (void *)stack : malloc(bytes);
        if (job->partial) {
            nb_cpu_parallel_for(tasks, NB_CPU_GRAIN / NB_RED_BLOCK, f->blocks, job);
            f->outputs(job, 0, pl->M); /* combines the partials in order */
            if (job->partial != (void *)stack) free(job->partial);
            job->partial = NULL;
            return;
        }
    }
    nb_cpu_parallel_for(pl->M, NB_CPU_GRAIN / pl->R + 1, f->outputs, job);
}

nb_status nb_cpu_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x,
                        double scale) {
    if (nb_dtype_is_16bit(x->dtype)) return nb_cpu_reduce16(be, op, out, x, scale);
    /* 16-bit out only from 16-bit x, whose float32 copy the adapter reduces
     * (CUDA writes one from any x) */
    static const char *const names[] = {"sum", "max", "min", "prod"};
    if (nb_dtype_is_16bit(out->dtype))
        return nb_set_error(NB_ERR_DTYPE, "%s: cannot reduce %s into %s", names[op], nb_dtype_name(x->dtype),
                            nb_dtype_name(out->dtype));
    red_plan pl;
    plan_init(&pl, out, x);
    if (pl.M == 0) return NB_OK;
    if (pl.R == 0) {
        /* sum or prod (max/min over nothing fail their check): scale * the
         * empty sum or product; a mean over nothing (scale 1/0) is
         * 0 * inf = NaN, as PyTorch's 0/0 */
        double v = op == NB_REDUCE_PROD ? 1.0 : 0.0;
        return nb_cpu_fill(be, out, nb_dtype_is_float(out->dtype) ? v * scale : v);
    }
    red_job job = {&pl, op, x->data, out, scale, NULL};
    red_fns f = fns_of(x->dtype);
    red_run(&job, &f);
    return NB_OK;
}

/* ---- argmax, argmin --------------------------------------------------------- */

typedef struct am_job {
    const nb_kview *values, *indices, *x;
    int dim;
    int64_t M;
    bool min;
} am_job;

/* The row scans: scan_<S> (first maximum) and scanmin_<S> (first minimum). */
#define T float
#define S f32
#define ISNAN(v) ((v) != (v))
#include "argscan.t.h"
#define T double
#define S f64
#define ISNAN(v) ((v) != (v))
#include "argscan.t.h"
#define T int32_t
#define S i32
#define ISNAN(v) 0
#include "argscan.t.h"
#define T int64_t
#define S i64
#define ISNAN(v) 0
#include "argscan.t.h"
#define T uint8_t
#define S u8
#define ISNAN(v) 0
#include "argscan.t.h"
#define T int8_t
#define S i8
#define ISNAN(v) 0
#include "argscan.t.h"
#define T int16_t
#define S i16
#define ISNAN(v) 0
#include "argscan.t.h"

typedef int64_t (*scan_fn)(const char *p, int64_t n, int64_t s, char *best);
static scan_fn scan_of(nb_dtype dt, bool min) {
    switch (dt) {
    case NB_F32: return min ? scanmin_f32 : scan_f32;
    case NB_F64: return min ? scanmin_f64 : scan_f64;
    case NB_I32: return min ? scanmin_i32 : scan_i32;
    case NB_I64: return min ? scanmin_i64 : scan_i64;
    case NB_I8: return min ? scanmin_i8 : scan_i8;
    case NB_I16: return min ? scanmin_i16 : scan_i16;
    default: return min ? scanmin_u8 : scan_u8;
    }
}

static void argmax_rows(void *arg, int64_t m0, int64_t m1) {
    const am_job *j = arg;
    const nb_kview *x = j->x;
    size_t es = nb_dtype_size(x->dtype);
    scan_fn scan = scan_of(x->dtype, j->min);
    for (int64_t m = m0; m < m1; m++) {
        int64_t rem = m, xo = 0, io = 0, vo = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            if (d == j->dim) continue;
            int64_t i = rem % x->shape[d];
            rem /= x->shape[d];
            xo += i * x->strides[d], io += i * j->indices->strides[d];
            if (j->values) vo += i * j->values->strides[d];
        }
        char *best = j->values ? (char *)j->values->data + vo * (int64_t)es : NULL;
        int64_t bi = scan((const char *)x->data + xo * (int64_t)es, x->shape[j->dim],
                          x->strides[j->dim], best);
        ((int64_t *)j->indices->data)[io] = bi;
    }
}

/* Checked: backend/check/reduce.c. */
static void arg_reduce(bool min, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim) {
    int64_t n = x->shape[dim], M = n ? nb_view_numel(x) / n : 0;
    am_job job = {values, indices, x, dim, M, min};
    nb_cpu_parallel_for(M, NB_CPU_GRAIN / (n ? n : 1) + 1, argmax_rows, &job);
}

nb_status nb_cpu_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim) {
    (void)be;
    arg_reduce(false, values, indices, x, dim);
    return NB_OK;
}

nb_status nb_cpu_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim) {
    (void)be;
    arg_reduce(true, values, indices, x, dim);
    return NB_OK;
}
