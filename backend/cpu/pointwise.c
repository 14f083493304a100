/* pointwise.c - the pointwise slot on the CPU: a blocked executor of a
 * fused elementwise program (nb_pw_program). The views are merged as the
 * iterators merge them and cut into chunks of about CHUNK elements along
 * their first merged dim; each chunk runs the program node by node with
 * the backend's own kernels (copy, fill, unary, unary_backward, binary,
 * where, through the vtable: the instruction-set level in use), its
 * intermediates in a scratch buffer small enough to stay in cache, and the
 * outputs written last, so an output that is an input's own view reads
 * before it writes. The same kernels give the same bits as the slot-by-slot
 * run. Chunks run in parallel on the pool; each task takes one scratch
 * buffer for its whole range. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_common.h"
#include "nb_backend_util.h"
#include "nb_impl.h"
#include "philox.h"
#include "threadpool.h"

#define CHUNK 4096 /* elements: a few node buffers of 16-32 KiB stay in L1/L2 */

typedef struct pw_geom {
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    int64_t st[NB_PW_MAX_VIEWS][NB_MAX_DIMS];
} pw_geom;

typedef struct pw_job {
    nb_backend *be;
    const nb_pw_program *p;
    const nb_kview *views;
    int nv;
    pw_geom g;
    int64_t rows_per; /* rows of dim 0 per chunk */
    int64_t row;      /* elements per row (the product of dims 1..) */
    size_t scratch;   /* bytes of one chunk's node buffers */
    _Atomic nb_status st;
    char why[256];
} pw_job;

/* View k of the job over rows [r0, r1) of dim 0. */
static nb_kview slice(const pw_job *j, int k, int64_t r0, int64_t r1) {
    nb_kview v = {0};
    v.dtype = j->views[k].dtype;
    v.ndim = j->g.ndim;
    char *base = j->views[k].data;
    if (v.ndim == 0) {
        v.data = base;
        return v;
    }
    v.data = base + r0 * j->g.st[k][0] * (int64_t)nb_dtype_size(v.dtype);
    for (int d = 0; d < v.ndim; d++) v.shape[d] = j->g.shape[d], v.strides[d] = j->g.st[k][d];
    v.shape[0] = r1 - r0;
    return v;
}

/* A dense view of the chunk's shape over buf. */
static nb_kview dense(const nb_kview *like, nb_dtype dt, void *buf) {
    nb_kview v = *like;
    v.data = buf, v.dtype = dt;
    int64_t s = 1;
    for (int d = v.ndim - 1; d >= 0; d--) v.strides[d] = s, s *= v.shape[d];
    return v;
}

/* A DROPOUT node's values over v, elements e0, e0 + 1, ... in C order:
 * the dropout slot's mask (1/(1-p) rounded to float32, then to v's dtype
 * where 16-bit, as unary mul_scalar rounds it; random's bernoulli test). */
static nb_status dropout_mask(nb_backend *be, const nb_pw_program *p, const nb_pw_node *nd, int64_t e0,
                              const nb_kview *v) {
    const nb_philox_state *r = &p->rng[nd->a];
    const uint64_t off = r->offset + (r->offset_base ? *r->offset_base : 0);
    const uint64_t th = nb_bits_threshold(1 - nd->value);
    const double scale = 1 / (1 - nd->value);
    float f = (float)scale;
    uint16_t h = 0;
    if (nb_dtype_is_16bit(v->dtype)) { /* the copy slot's rounding of the float32 scale */
        nb_kview src = {.data = &f, .dtype = NB_F32}, dst = {.data = &h, .dtype = v->dtype};
        nb_status st = be->iface->copy(be, &dst, &src);
        if (st) return st;
    }
    const int64_t n = nb_view_numel(v);
    for (int64_t k = 0; k < n; k++) {
        const bool keep = (nb_philox_bits(r->seed, off, (uint64_t)(e0 + k)) >> 11) < th;
        switch (v->dtype) {
        case NB_F64: ((double *)v->data)[k] = keep ? scale : 0; break;
        case NB_F32: ((float *)v->data)[k] = keep ? f : 0; break;
        default: ((uint16_t *)v->data)[k] = keep ? h : 0; break; /* +0 in both 16-bit formats */
        }
    }
    return NB_OK;
}

static nb_status run_chunk(const pw_job *j, int64_t r0, int64_t r1, char *scratch, nb_kview *val) {
    const nb_pw_program *p = j->p;
    const struct nb_backend_i *f = j->be->iface;
    nb_backend *be = j->be;
    nb_kview shape = slice(j, 0, r0, r1);
    size_t per = (size_t)(r1 - r0) * (size_t)j->row * 8; /* bytes of one node buffer (8: the widest dtype) */
    nb_status st = NB_OK;
    for (int i = 0; i < p->n_nodes && !st; i++) {
        const nb_pw_node *nd = &p->nodes[i];
        if (nd->kind == NB_PW_INPUT) {
            val[i] = slice(j, p->n_out + nd->a, r0, r1);
            continue;
        }
        val[i] = dense(&shape, nd->dtype, scratch + per * (size_t)i);
        switch (nd->kind) {
        case NB_PW_CONST: st = f->fill(be, &val[i], nd->value); break;
        case NB_PW_CAST: st = f->copy(be, &val[i], &val[nd->a]); break;
        case NB_PW_UNARY: st = f->unary(be, (nb_unary_op)nd->op, &val[i], &val[nd->a], nd->value); break;
        case NB_PW_UNARY_BACKWARD: {
            const nb_kview *v = nd->b >= 0 ? &val[nd->b] : &val[nd->a];
            st = f->unary_backward(be, (nb_unary_op)nd->op, &val[i], &val[nd->a], v, v, nd->value);
            break;
        }
        case NB_PW_BINARY:
            st = f->binary(be, (nb_binary_op)nd->op, &val[i], &val[nd->a], &val[nd->b]);
            break;
        case NB_PW_WHERE: st = f->where(be, &val[i], &val[nd->a], &val[nd->b], &val[nd->c]); break;
        case NB_PW_DROPOUT: st = dropout_mask(be, p, nd, r0 * j->row, &val[i]); break;
        default: st = nb_set_error(NB_ERR_INVALID_ARG, "pointwise: node %d: bad kind", i);
        }
    }
    for (int k = 0; k < p->n_out && !st; k++) {
        nb_kview out = slice(j, k, r0, r1);
        st = f->copy(be, &out, &val[p->outputs[k]]);
    }
    return st;
}

static void run_range(void *ctx, int64_t begin, int64_t end) {
    pw_job *j = ctx;
    if (atomic_load(&j->st)) return;
    char *scratch = malloc(j->scratch ? j->scratch : 1);
    nb_kview *val = malloc(sizeof *val * (size_t)j->p->n_nodes);
    nb_status st = scratch && val ? NB_OK : nb_set_error(NB_ERR_OOM, "pointwise: no memory for a chunk's buffers");
    int64_t rows = j->g.ndim ? j->g.shape[0] : 1;
    for (int64_t c = begin; c < end && !st; c++) {
        int64_t r0 = c * j->rows_per, r1 = r0 + j->rows_per < rows ? r0 + j->rows_per : rows;
        st = run_chunk(j, r0, r1, scratch, val);
    }
    free(scratch);
    free(val);
    nb_status none = NB_OK;
    if (st && atomic_compare_exchange_strong(&j->st, &none, st)) snprintf(j->why, sizeof j->why, "%s", nb_last_error());
}

/* The program, views and dtypes checked: backend/check/pointwise.c. */
nb_status nb_cpu_pointwise(nb_backend *be, int n, const nb_kview *views, const nb_pw_program *prog) {
    pw_job j = {.be = be, .p = prog, .views = views, .nv = n};
    if (nb_view_numel(&views[0]) == 0) return NB_OK;
    nb_view_merge_dims(n, views, &j.g.ndim, j.g.shape, j.g.st);
    j.row = 1;
    for (int d = 1; d < j.g.ndim; d++) j.row *= j.g.shape[d];
    j.rows_per = j.row >= CHUNK ? 1 : CHUNK / j.row;
    int64_t rows = j.g.ndim ? j.g.shape[0] : 1, chunks = (rows + j.rows_per - 1) / j.rows_per;
    j.scratch = (size_t)j.rows_per * (size_t)j.row * 8 * (size_t)prog->n_nodes;
    atomic_init(&j.st, NB_OK);
    int64_t per_task = (int64_t)(NB_CPU_GRAIN_LIGHT / ((int64_t)j.rows_per * j.row)) + 1;
    nb_cpu_parallel_for(chunks, per_task, run_range, &j);
    nb_status st = atomic_load(&j.st);
    if (st) return nb_set_error(st, "%s", j.why);
    return NB_OK;
}
