/* random.c - CPU random fills by the Philox layout of core/philox.h:
 * element i takes the 64 bits nb_philox_bits(seed, offset, i), so values
 * depend only on (seed, offset, i) and never on how threads split the work.
 * Blocks are computed eight at a time (philox_batch.h), same bits.
 *   uniform:   a + (b - a) * u, u in [0, 1) (53 bits); kept below b after
 *              rounding to the dtype (torch.Tensor.uniform_ is [from, to))
 *   normal:    a + b * n, n ~ N(0, 1) by Box-Muller (nb_bits_to_normal)
 *   bernoulli: 1 if u < a else 0, any dtype */
#include <math.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "philox_batch.h"
#include "threadpool.h"

#define NB_RNG_GRAIN 8192 /* Philox is ~20x the cost of an add per element */

typedef struct rng_job {
    void *data;
    nb_dtype dt;
    nb_rng_dist dist;
    double a, b;
    uint64_t seed, offset;
} rng_job;

static double draw(const rng_job *j, uint64_t bits) {
    switch (j->dist) {
    case NB_RNG_UNIFORM: return j->a + (j->b - j->a) * nb_bits_to_unit(bits);
    case NB_RNG_NORMAL: return j->a + j->b * nb_bits_to_normal(bits);
    default: return nb_bits_to_unit(bits) < j->a ? 1.0 : 0.0;
    }
}

static void put(const rng_job *j, int64_t i, double v) {
    bool clamp = j->dist == NB_RNG_UNIFORM && j->b > j->a; /* [a, b): never b itself */
    switch (j->dt) {
    case NB_F32: {
        float f = (float)v;
        if (clamp && f >= (float)j->b) f = nextafterf((float)j->b, -INFINITY);
        ((float *)j->data)[i] = f;
        break;
    }
    case NB_F64:
        if (clamp && v >= j->b) v = nextafter(j->b, -INFINITY);
        ((double *)j->data)[i] = v;
        break;
    case NB_I32: ((int32_t *)j->data)[i] = (int32_t)v; break;
    case NB_I64: ((int64_t *)j->data)[i] = (int64_t)v; break;
    case NB_U8: ((uint8_t *)j->data)[i] = (uint8_t)v; break;
    case NB_I8: ((int8_t *)j->data)[i] = (int8_t)v; break;
    case NB_I16: ((int16_t *)j->data)[i] = (int16_t)v; break;
    default: ((bool *)j->data)[i] = v != 0; break;
    }
}

/* Bernoulli(p) as an integer compare: u = (bits >> 11) 2^-53 < p exactly when
 * (bits >> 11) < ceil(p 2^53) (p 2^53 is exact), so no double per element. */
static void bernoulli_run(const rng_job *j, int64_t i, int64_t n, const uint64_t *bits) {
    uint64_t th = nb_bits_threshold(j->a);
    switch (j->dt) {
    case NB_F32:
        for (int64_t k = 0; k < n; k++) ((float *)j->data)[i + k] = (bits[k] >> 11) < th ? 1.0f : 0.0f;
        break;
    case NB_F64:
        for (int64_t k = 0; k < n; k++) ((double *)j->data)[i + k] = (bits[k] >> 11) < th ? 1.0 : 0.0;
        break;
    default:
        for (int64_t k = 0; k < n; k++) put(j, i + k, (bits[k] >> 11) < th ? 1.0 : 0.0);
    }
}

static void rng_chunk(void *arg, int64_t i0, int64_t i1) {
    const rng_job *j = arg;
    uint64_t bits[256];
    for (int64_t i = i0; i < i1; i += 256) {
        int64_t n = i1 - i < 256 ? i1 - i : 256;
        nb_philox_bits_run(j->seed, j->offset, (uint64_t)i, n, bits);
        if (j->dist == NB_RNG_BERNOULLI) bernoulli_run(j, i, n, bits);
        else
            for (int64_t k = 0; k < n; k++) put(j, i + k, draw(j, bits[k]));
    }
}

nb_status nb_cpu_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                        nb_philox_state rng) {
    uint64_t seed = rng.seed, offset = rng.offset;
    if (rng.offset_base) offset += *rng.offset_base; /* host memory here: the CPU captures no graphs */
    /* checked: backend/check/random.c; 16-bit dst: bernoulli's 0 and 1, exact through a float32 copy */
    if (nb_dtype_is_16bit(dst->dtype)) return nb_cpu_bernoulli16(be, dst, a, seed, offset);
    rng_job j = {dst->data, dst->dtype, dist, a, b, seed, offset};
    nb_cpu_parallel_for(nb_view_numel(dst), NB_RNG_GRAIN, rng_chunk, &j);
    return NB_OK;
}
