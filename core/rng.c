/* rng.c - generators (Philox 4x32-10 key + counter offset) and the random
 * fills; the numbers themselves come from the backend's `random` kernel by
 * the layout in philox.h, so they are the same on every device and thread count. */
#include <pthread.h>

#include <math.h>

#include "nb_impl.h"
#include "philox.h"

static nb_generator default_gen = {0x2545F4914F6CDD1DULL, 0};
static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;

nb_generator nb_generator_new(uint64_t seed) { return (nb_generator){seed, 0}; }

void nb_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&gen_lock);
    default_gen = nb_generator_new(seed);
    pthread_mutex_unlock(&gen_lock);
}

nb_generator *nb_default_generator(void) { return &default_gen; }

/* gen's offset before it moves to v (set) or by v; the default generator
 * under its lock (several threads draw from it). */
static uint64_t move_offset(nb_generator *gen, uint64_t v, bool set) {
    bool dflt = gen == NULL || gen == &default_gen;
    if (dflt) {
        gen = &default_gen;
        pthread_mutex_lock(&gen_lock);
    }
    uint64_t before = gen->offset;
    gen->offset = set ? v : before + v;
    if (dflt) pthread_mutex_unlock(&gen_lock);
    return before;
}

uint64_t nb_generator_advance(nb_generator *gen, uint64_t blocks) { return move_offset(gen, blocks, false); }

uint64_t nb_generator_exchange(nb_generator *gen, uint64_t offset) { return move_offset(gen, offset, true); }

nb_status nb_rng_philox(const nb_tensor *t, nb_generator *gen, nb_philox_state *rng) {
    rng->seed = gen ? gen->seed : default_gen.seed;
    rng->offset = nb_generator_advance(gen, nb_philox_blocks((uint64_t)nb_numel(t)));
    bool failed;
    rng->offset_base = nb_graph_rng_base(t->storage->backend, gen, &rng->offset, &failed); /* capturing a graph */
    return failed ? nb_last_status() : NB_OK;
}

static nb_status random_fill(const char *op, nb_tensor *t, nb_rng_dist dist, double a, double b,
                             nb_generator *gen) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL tensor", op);
    bool half = t->dtype == NB_F16 || t->dtype == NB_BF16;
    if (dist != NB_RNG_BERNOULLI && !nb_dtype_is_compute_float(t->dtype) && !half)
        return nb_set_error(NB_ERR_DTYPE, "%s: needs a float tensor, got %s", op, nb_dtype_name(t->dtype));
    half = half && dist != NB_RNG_BERNOULLI;
    nb_philox_state rng;
    if (nb_rng_philox(t, gen, &rng) != NB_OK) return nb_last_status();
    if (nb_is_contiguous(t) && !half) {
        nb_kview v = nb_kview_of(t);
        nb_bump_version(t);
        return nb_kernel_random(NB_BE(t), &v, dist, a, b, rng);
    }
    nb_scope *s = nb_op_scope_begin();
    /* 16-bit tensors: the float32 draws of the same stream, rounded (a 16-bit model starts as its float32 twin) */
    nb_tensor *c = nb_tensor_new(t->ndim, t->shape, half ? NB_F32 : t->dtype, t->storage->device);
    nb_status st = c ? NB_OK : nb_last_status();
    if (c) {
        nb_kview v = nb_kview_of(c);
        st = nb_kernel_random(NB_BE(c), &v, dist, a, b, rng);
    }
    if (st == NB_OK) st = nb_copy_(t, c);
    nb_scope_end(s);
    return st;
}

nb_status nb_uniform_(nb_tensor *t, double low, double high, nb_generator *gen) {
    if (!(low <= high)) return nb_set_error(NB_ERR_INVALID_ARG, "uniform_: low %g > high %g", low, high);
    return random_fill("uniform_", t, NB_RNG_UNIFORM, low, high, gen);
}

nb_status nb_normal_(nb_tensor *t, double mean, double std, nb_generator *gen) {
    if (!(std >= 0)) return nb_set_error(NB_ERR_INVALID_ARG, "normal_: std %g < 0", std);
    return random_fill("normal_", t, NB_RNG_NORMAL, mean, std, gen);
}

nb_status nb_bernoulli_(nb_tensor *t, double p, nb_generator *gen) {
    if (!(p >= 0 && p <= 1)) return nb_set_error(NB_ERR_INVALID_ARG, "bernoulli_: p %g outside [0, 1]", p);
    return random_fill("bernoulli_", t, NB_RNG_BERNOULLI, p, 0, gen);
}

nb_tensor *nb_rand_on(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen, nb_device dev) {
    nb_tensor *t = nb_empty_on(ndim, shape, dt, dev);
    return t && nb_uniform_(t, 0, 1, gen) == NB_OK ? t : NULL;
}

nb_tensor *nb_rand(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen) {
    return nb_rand_on(ndim, shape, dt, gen, nb_default_device());
}

nb_tensor *nb_randn_on(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen, nb_device dev) {
    nb_tensor *t = nb_empty_on(ndim, shape, dt, dev);
    return t && nb_normal_(t, 0, 1, gen) == NB_OK ? t : NULL;
}

nb_tensor *nb_randn(int ndim, const int64_t *shape, nb_dtype dt, nb_generator *gen) {
    return nb_randn_on(ndim, shape, dt, gen, nb_default_device());
}

/* Fisher-Yates on the host: a permutation is index data the caller asked
 * for, built here once and then uploaded to the tensor's device. */
nb_tensor *nb_randperm(int64_t n, nb_generator *gen) {
    if (n < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "randperm: n = %lld < 0", (long long)n);
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!p) return NB_FAIL(NB_ERR_OOM, "randperm: out of host memory for %lld indices", (long long)n);
    uint64_t seed = gen ? gen->seed : default_gen.seed;
    uint64_t offset = nb_generator_advance(gen, nb_philox_blocks((uint64_t)n));
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        /* unbiased enough for n < 2^32: 64 random bits mod (i+1) */
        uint64_t j = nb_philox_bits(seed, offset, (uint64_t)i) % (uint64_t)(i + 1);
        int64_t tmp = p[i];
        p[i] = p[j], p[j] = tmp;
    }
    nb_tensor *t = nb_from_data(p, 1, &n, NB_I64);
    free(p);
    return t;
}
