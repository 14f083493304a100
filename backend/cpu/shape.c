/* shape.c - CPU nonzero: the compaction behind torch.nonzero and
 * masked_select, which a composite of existing kernels cannot express (its
 * output size depends on the data). The input (any dtype, any strides) is
 * cut into at most NZ_BLOCKS fixed blocks of C-order positions; one pass
 * counts the nonzero elements per block, a prefix sum gives each block its
 * first output row, and a second pass writes the positions. The blocks
 * depend only on numel, so the output is the same for any thread count
 * (it is fully determined anyway: C order). */
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "nb_impl.h"
#include "pool.h"

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
    case NB_F16: case NB_BF16: return (*(const uint16_t *)p & 0x7FFF) != 0; /* +-0 is zero */
    default: return *(const uint8_t *)p != 0; /* u8, bool */
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
    nz_job j = {.x = x, .numel = nb_cpu_numel(x)};
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
    bool ok = out->dtype == NB_I64 && nb_cpu_is_contiguous(out) && (out->ndim == 1 || out->ndim == 2) &&
              out->shape[0] == total && (j.flat || out->shape[1] == x->ndim);
    if (!ok)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nonzero: out %s must be contiguous int64 [%lld, %d] or [%lld] for input %s",
                            nb_cpu_view_str(out, b1, sizeof b1), (long long)total, x->ndim, (long long)total,
                            nb_cpu_view_str(x, b2, sizeof b2));
    j.out = out->data;
    if (total > 0) nb_cpu_parallel_for(nblk, 1, nz_range, &j);
    return NB_OK;
}
