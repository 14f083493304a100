/* iter.c - the strided N-d iterator of iter.h: dim coalescing and the
 * threaded driver that walks a chunk of flat indices row by row. */
#include <stdio.h>
#include <string.h>

#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

void nb_cpu_iter_init(nb_cpu_iter *it, int nops, const nb_kview *const *views) {
    NB_ASSERT(nops >= 1 && nops <= NB_ITER_MAX_OPS);
    memset(it, 0, sizeof *it);
    it->nops = nops;
    const nb_kview *v0 = views[0];
    it->numel = nb_view_numel(v0);
    for (int i = 0; i < nops; i++) {
        it->base[i] = views[i]->data;
        it->esize[i] = (int64_t)nb_dtype_size(views[i]->dtype);
    }
    int nd = 0;
    for (int d = 0; d < v0->ndim; d++) {
        if (v0->shape[d] == 1) continue; /* size-1 dims carry no stride */
        it->shape[nd] = v0->shape[d];
        for (int i = 0; i < nops; i++)
            it->strides[i][nd] = views[i]->strides[d] * (int64_t)nb_dtype_size(views[i]->dtype);
        /* merge into the previous (outer) dim when all operands run on across it */
        bool merge = nd > 0;
        for (int i = 0; i < nops && merge; i++)
            merge = it->strides[i][nd - 1] == it->strides[i][nd] * it->shape[nd];
        if (merge) {
            it->shape[nd - 1] *= it->shape[nd];
            for (int i = 0; i < nops; i++) it->strides[i][nd - 1] = it->strides[i][nd];
        } else {
            nd++;
        }
    }
    if (nd == 0) { /* a scalar or all-ones shape */
        it->shape[0] = 1;
        for (int i = 0; i < nops; i++) it->strides[i][0] = 0;
        nd = 1;
    }
    it->ndim = nd;
}

typedef struct iter_job {
    const nb_cpu_iter *it;
    nb_cpu_loop_fn fn;
    const void *ctx;
} iter_job;

static void iter_chunk(void *arg, int64_t begin, int64_t end) {
    const iter_job *job = arg;
    const nb_cpu_iter *it = job->it;
    int last = it->ndim - 1, nops = it->nops;
    int64_t idx[NB_MAX_DIMS], rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    int64_t inner[NB_ITER_MAX_OPS];
    for (int i = 0; i < nops; i++) inner[i] = it->strides[i][last];
    for (int64_t pos = begin; pos < end;) {
        char *ptrs[NB_ITER_MAX_OPS];
        for (int i = 0; i < nops; i++) {
            char *p = it->base[i];
            for (int d = 0; d <= last; d++) p += idx[d] * it->strides[i][d];
            ptrs[i] = p;
        }
        int64_t n = it->shape[last] - idx[last];
        if (n > end - pos) n = end - pos;
        job->fn(ptrs, inner, n, job->ctx);
        pos += n;
        idx[last] += n;
        for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* ---- tiled walk for transposed inputs ---- */

#define NB_ITER_TILE 32

/* True when some input runs along the second-last dim but jumps whole cache
 * lines along the last, while the output is contiguous along the last. */
static bool wants_tiles(const nb_cpu_iter *it) {
    int L = it->ndim - 1;
    if (L < 1 || it->strides[0][L] != it->esize[0] || it->shape[L] < NB_ITER_TILE ||
        it->shape[L - 1] < NB_ITER_TILE)
        return false;
    for (int i = 1; i < it->nops; i++) {
        int64_t inner = it->strides[i][L] < 0 ? -it->strides[i][L] : it->strides[i][L];
        if (it->strides[i][L - 1] == it->esize[i] && inner >= 64) return true;
    }
    return false;
}

/* Tasks are (outer index, row tile, column tile) over the last two dims. */
static void tile_chunk(void *arg, int64_t t0, int64_t t1) {
    const iter_job *job = arg;
    const nb_cpu_iter *it = job->it;
    int L = it->ndim - 1, nops = it->nops;
    int64_t rows = it->shape[L - 1], cols = it->shape[L];
    int64_t rt = (rows + NB_ITER_TILE - 1) / NB_ITER_TILE, ct = (cols + NB_ITER_TILE - 1) / NB_ITER_TILE;
    int64_t inner[NB_ITER_MAX_OPS];
    for (int i = 0; i < nops; i++) inner[i] = it->strides[i][L];
    for (int64_t t = t0; t < t1; t++) {
        int64_t c0 = (t % ct) * NB_ITER_TILE, r0 = (t / ct % rt) * NB_ITER_TILE, o = t / ct / rt;
        char *base[NB_ITER_MAX_OPS];
        for (int i = 0; i < nops; i++) base[i] = it->base[i];
        for (int d = L - 2; d >= 0; d--) { /* the outer multi-index of o */
            int64_t k = o % it->shape[d];
            o /= it->shape[d];
            for (int i = 0; i < nops; i++) base[i] += k * it->strides[i][d];
        }
        int64_t r1 = r0 + NB_ITER_TILE < rows ? r0 + NB_ITER_TILE : rows;
        int64_t w = cols - c0 < NB_ITER_TILE ? cols - c0 : NB_ITER_TILE;
        for (int64_t r = r0; r < r1; r++) {
            char *ptrs[NB_ITER_MAX_OPS];
            for (int i = 0; i < nops; i++) ptrs[i] = base[i] + r * it->strides[i][L - 1] + c0 * inner[i];
            job->fn(ptrs, inner, w, job->ctx);
        }
    }
}

void nb_cpu_iter_run(const nb_cpu_iter *it, int64_t grain, nb_cpu_loop_fn fn, const void *ctx) {
    iter_job job = {it, fn, ctx};
    if (wants_tiles(it)) {
        int L = it->ndim - 1;
        int64_t tiles = (it->shape[L - 1] + NB_ITER_TILE - 1) / NB_ITER_TILE *
                        ((it->shape[L] + NB_ITER_TILE - 1) / NB_ITER_TILE) *
                        (it->numel / (it->shape[L - 1] * it->shape[L]));
        nb_cpu_parallel_for(tiles, grain / (NB_ITER_TILE * NB_ITER_TILE) + 1, tile_chunk, &job);
        return;
    }
    nb_cpu_parallel_for(it->numel, grain, iter_chunk, &job);
}
