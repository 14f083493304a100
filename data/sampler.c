/* sampler.c - torch.utils.data's samplers: Sequential, Random (with and
 * without replacement, num_samples), SubsetRandom, WeightedRandom (with
 * and without replacement), Distributed, and a user's own. An epoch's
 * indices are a pure function of (options, seed, epoch), drawn with
 * Philox (core/philox.h) under key = seed and a counter whose high word
 * is (stream << 48 | epoch + 1): resuming at any epoch recomputes them, and
 * no two uses share draws. The shuffle is nb_loader's Fisher-Yates (stream
 * 0), so a shuffled DataLoader visits a tensor dataset in nb_loader's order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_extension.h"
#include "philox.h"

struct nb_sampler {
    nb_sampler_options o;
    int64_t n;        /* the dataset's length */
    int64_t len;      /* indices per epoch */
    int64_t *indices; /* SUBSET_RANDOM: a copy */
    double *weights;  /* WEIGHTED_RANDOM: a copy */
};

/* 64 random bits: draw d of (seed, stream, epoch). */
uint64_t nb_data_draw(uint64_t seed, uint64_t stream, int64_t epoch, uint64_t d) {
    nb_philox_u4 r = nb_philox4x32_10(d / 2, stream << 48 | (uint64_t)(epoch + 1), seed);
    int w = (int)(d % 2) * 2;
    return (uint64_t)r.v[w] << 32 | r.v[w + 1];
}

static double uniform(uint64_t bits) { return (double)(bits >> 11) * 0x1p-53; }

void nb_data_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream, int64_t epoch) {
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1, d = 0; i > 0; i--, d++) {
        int64_t j = (int64_t)(nb_data_draw(seed, stream, epoch, (uint64_t)d) % (uint64_t)(i + 1));
        int64_t t = p[i];
        p[i] = p[j], p[j] = t;
    }
}

static bool flag(nb_flag f, bool dflt) { return f == NB_FLAG_TRUE || (f != NB_FLAG_FALSE && dflt); }

nb_sampler *nb_sampler_new(int64_t dataset_len, nb_sampler_options o) {
    const char *op = "sampler_new";
    if (dataset_len < 0) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dataset length %lld < 0", op, (long long)dataset_len);
    if (o.num_samples < 0 || (uint64_t)o.num_samples > SIZE_MAX / 16)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: num_samples %lld outside [0, 2^59]", op, (long long)o.num_samples);
    nb_sampler *s = calloc(1, sizeof *s);
    if (!s) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    s->o = o, s->n = dataset_len;
    nb_status st = NB_OK;
    switch (o.kind) {
    case NB_SAMPLER_SEQUENTIAL: s->len = dataset_len; break;
    case NB_SAMPLER_RANDOM:
        s->len = o.num_samples ? o.num_samples : dataset_len;
        if (!flag(o.replacement, false) && s->len > dataset_len)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld samples without replacement from %lld", op,
                              (long long)s->len, (long long)dataset_len);
        if (flag(o.replacement, false) && s->len && !dataset_len)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: drawing from an empty dataset", op);
        break;
    case NB_SAMPLER_SUBSET_RANDOM:
        if (o.n_indices < 0 || (o.n_indices && !o.indices)) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld indices given", op, (long long)o.n_indices);
            break;
        }
        s->len = o.n_indices;
        if (!(s->indices = malloc(sizeof(int64_t) * (size_t)(s->len ? s->len : 1)))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        for (int64_t i = 0; !st && i < s->len; i++) {
            if (o.indices[i] < 0 || o.indices[i] >= dataset_len)
                st = nb_set_error(NB_ERR_INVALID_ARG, "%s: index %lld outside the dataset's %lld", op,
                                  (long long)o.indices[i], (long long)dataset_len);
            else s->indices[i] = o.indices[i];
        }
        break;
    case NB_SAMPLER_WEIGHTED_RANDOM: {
        if (o.n_weights < 1 || !o.weights || o.n_weights > dataset_len) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: WeightedRandom needs 1 to %lld weights (one per sample; %lld "
                              "given)", op, (long long)dataset_len, (long long)o.n_weights);
            break;
        }
        s->len = o.num_samples ? o.num_samples : o.n_weights;
        int64_t positive = 0;
        if (!(s->weights = malloc(sizeof(double) * (size_t)o.n_weights))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        for (int64_t i = 0; !st && i < o.n_weights; i++) {
            if (!(o.weights[i] >= 0) || isinf(o.weights[i]))
                st = nb_set_error(NB_ERR_INVALID_ARG, "%s: weight %lld is %g (weights are finite and >= 0)", op, (long long)i,
                                  o.weights[i]);
            else s->weights[i] = o.weights[i], positive += o.weights[i] > 0;
        }
        if (!st && !positive) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: every weight is 0", op);
        if (!st && !flag(o.replacement, true) && s->len > positive)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld samples without replacement from %lld positive weights", op,
                              (long long)s->len, (long long)positive);
        break;
    }
    case NB_SAMPLER_DISTRIBUTED:
        if (o.num_replicas < 1 || o.rank < 0 || o.rank >= o.num_replicas)
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: rank %d out of range for num_replicas %d", op, o.rank, o.num_replicas);
        else if (o.drop_last) s->len = dataset_len / o.num_replicas;
        else s->len = (dataset_len + o.num_replicas - 1) / o.num_replicas;
        break;
    case NB_SAMPLER_CUSTOM:
        if (!o.custom_len || !o.custom_indices) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: CUSTOM needs custom_len and custom_indices", op);
        else if ((s->len = o.custom_len(o.custom_state)) < 0) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: custom_len gave %lld", op, (long long)s->len);
        break;
    default: st = nb_set_error(NB_ERR_INVALID_ARG, "%s: bad kind %d", op, (int)o.kind);
    }
    if (st) {
        nb_sampler_free(s);
        return NULL;
    }
    return s;
}

void nb_sampler_free(nb_sampler *s) {
    if (!s) return;
    free(s->indices), free(s->weights), free(s);
}

int64_t nb_sampler_dataset_len(const nb_sampler *s) { return s->n; }

int64_t nb_sampler_len(const nb_sampler *s) {
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "sampler_len: NULL sampler"), -1;
    return s->len;
}

/* Efraimidis-Spirakis: the num_samples largest keys u^(1 / w) (a weighted draw without replacement). */
typedef struct keyed {
    double key;
    int64_t i;
} keyed;
static int by_key(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    return x->key < y->key ? 1 : x->key > y->key ? -1 : (x->i > y->i) - (x->i < y->i);
}

nb_status nb_sampler_indices(const nb_sampler *s, int64_t epoch, int64_t *out) {
    const char *op = "sampler_indices";
    if (!s || (!out && s->len)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op);
    if (epoch < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: epoch %lld < 0", op, (long long)epoch);
    const nb_sampler_options *o = &s->o;
    uint64_t seed = o->seed;
    switch (o->kind) {
    case NB_SAMPLER_SEQUENTIAL:
        for (int64_t i = 0; i < s->len; i++) out[i] = i;
        return NB_OK;
    case NB_SAMPLER_RANDOM:
        if (flag(o->replacement, false)) {
            for (int64_t i = 0; i < s->len; i++) out[i] = (int64_t)(nb_data_draw(seed, NB_DRAW_REPLACE, epoch, (uint64_t)i) % (uint64_t)s->n);
            return NB_OK;
        }
        if (s->len == s->n) return nb_data_permutation(out, s->n, seed, NB_DRAW_SHUFFLE, epoch), NB_OK;
        else {
            int64_t *p = malloc(sizeof *p * (size_t)(s->n ? s->n : 1));
            if (!p) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            nb_data_permutation(p, s->n, seed, NB_DRAW_SHUFFLE, epoch);
            memcpy(out, p, sizeof *p * (size_t)s->len);
            free(p);
            return NB_OK;
        }
    case NB_SAMPLER_SUBSET_RANDOM:
        nb_data_permutation(out, s->len, seed, NB_DRAW_SHUFFLE, epoch);
        for (int64_t i = 0; i < s->len; i++) out[i] = s->indices[out[i]];
        return NB_OK;
    case NB_SAMPLER_WEIGHTED_RANDOM: {
        int64_t m = o->n_weights;
        if (flag(o->replacement, true)) { /* inverse CDF of the running sums */
            double *cum = malloc(sizeof *cum * (size_t)m);
            if (!cum) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            double total = 0;
            for (int64_t i = 0; i < m; i++) cum[i] = total += s->weights[i];
            for (int64_t k = 0; k < s->len; k++) {
                double u = uniform(nb_data_draw(seed, NB_DRAW_WEIGHTED, epoch, (uint64_t)k)) * total;
                int64_t lo = 0, hi = m - 1;
                while (lo < hi) { /* the first i with cum[i] > u */
                    int64_t mid = lo + (hi - lo) / 2;
                    if (cum[mid] > u) hi = mid;
                    else lo = mid + 1;
                }
                while (lo > 0 && s->weights[lo] == 0) lo--; /* rounding at the top never picks a zero weight */
                out[k] = lo;
            }
            free(cum);
            return NB_OK;
        }
        keyed *k = malloc(sizeof *k * (size_t)m);
        if (!k) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        for (int64_t i = 0; i < m; i++) {
            double u = uniform(nb_data_draw(seed, NB_DRAW_WEIGHTED, epoch, (uint64_t)i));
            k[i].key = s->weights[i] > 0 ? log(u > 0 ? u : 0x1p-60) / s->weights[i] : -INFINITY, k[i].i = i;
        }
        qsort(k, (size_t)m, sizeof *k, by_key);
        for (int64_t i = 0; i < s->len; i++) out[i] = k[i].i;
        free(k);
        return NB_OK;
    }
    case NB_SAMPLER_DISTRIBUTED: {
        int64_t n = s->n, total = s->len * o->num_replicas;
        int64_t *p = malloc(sizeof *p * (size_t)(n ? n : 1));
        if (!p) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        if (flag(o->shuffle, true)) nb_data_permutation(p, n, seed, NB_DRAW_SHUFFLE, epoch);
        else
            for (int64_t i = 0; i < n; i++) p[i] = i;
        /* padded by repeating from the start (or cut with drop_last) to num_replicas * len, then every
           num_replicas-th from rank */
        for (int64_t i = 0; i < s->len; i++) {
            int64_t j = o->rank + i * o->num_replicas;
            out[i] = p[j < total ? j % n : 0];
        }
        free(p);
        return NB_OK;
    }
    case NB_SAMPLER_CUSTOM: {
        nb_status st = o->custom_indices(o->custom_state, epoch, out);
        for (int64_t i = 0; !st && i < s->len; i++)
            if (out[i] < 0 || out[i] >= s->n)
                st = nb_set_error(NB_ERR_INVALID_ARG, "%s: the custom sampler gave index %lld outside [0, %lld)", op,
                                  (long long)out[i], (long long)s->n);
        return st;
    }
    }
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: bad kind", op);
}
