/* dataset_map.c - samples (named tensors) and map-style datasets
 * (torch.utils.data.Dataset): a length and a get_item callback; the tensor
 * dataset seen as one; Subset, ConcatDataset and random_split. */
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_extension.h"
#include "nb_ops.h"

nb_status nb_sample_set(nb_sample *s, const char *name, nb_tensor *t) {
    if (!s || !name || !t) {
        if (s && name && nb_last_status() != NB_OK) return nb_last_status(); /* t is a failed op's result */
        return nb_set_error(NB_ERR_INVALID_ARG, "sample_set: NULL %s", !s ? "sample" : !name ? "name" : "tensor");
    }
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return s->fields[i] = t, NB_OK;
    if (s->n < 0 || s->n >= NB_SAMPLE_MAX_FIELDS)
        return nb_set_error(NB_ERR_INVALID_ARG, "sample_set: %s: a sample holds at most %d fields", name, NB_SAMPLE_MAX_FIELDS);
    s->names[s->n] = name, s->fields[s->n] = t, s->n++;
    return NB_OK;
}

nb_tensor *nb_sample_get(const nb_sample *s, const char *name) {
    if (!s || !name) return NB_FAIL(NB_ERR_INVALID_ARG, "sample_get: NULL %s", s ? "name" : "sample");
    for (int i = 0; i < s->n && i < NB_SAMPLE_MAX_FIELDS; i++)
        if (!strcmp(s->names[i], name)) return s->fields[i];
    return NULL;
}

nb_map_dataset *nb_map_dataset_new(int64_t len, nb_get_item_fn get_item, void *state, void (*free_state)(void *)) {
    if (len < 0 || !get_item)
        return NB_FAIL(NB_ERR_INVALID_ARG, "map_dataset_new: %s", len < 0 ? "negative length" : "NULL get_item");
    nb_map_dataset *d = calloc(1, sizeof *d);
    if (!d) return NB_FAIL(NB_ERR_OOM, "map_dataset_new: out of host memory");
    d->len = len, d->get_item = get_item, d->state = state, d->free_state = free_state;
    return d;
}

void nb_map_dataset_free(nb_map_dataset *d) {
    if (!d) return;
    if (d->free_state) d->free_state(d->state);
    free(d);
}

int64_t nb_map_dataset_len(const nb_map_dataset *d) {
    if (!d) return nb_set_error(NB_ERR_INVALID_ARG, "map_dataset_len: NULL dataset"), -1;
    return d->len;
}

nb_status nb_map_dataset_get(nb_map_dataset *d, int64_t index, nb_generator *gen, nb_sample *out) {
    if (!d || !out) return nb_set_error(NB_ERR_INVALID_ARG, "map_dataset_get: NULL %s", d ? "sample" : "dataset");
    memset(out, 0, sizeof *out);
    if (index < 0 || index >= d->len)
        return nb_set_error(NB_ERR_INVALID_ARG, "map_dataset_get: index %lld outside [0, %lld)", (long long)index,
                            (long long)d->len);
    nb_status st = d->get_item(d->state, index, gen ? gen : nb_default_generator(), out);
    if (st == NB_OK && out->n == 0) st = nb_set_error(NB_ERR_INVALID_ARG, "map_dataset_get: sample %lld has no fields", (long long)index);
    if (st != NB_OK) {
        if (nb_last_error()[0] == 0) nb_set_error(st, "map_dataset_get: get_item of sample %lld failed", (long long)index);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- the tensor dataset --------------------------------------------------------------------- */

static nb_status tensors_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    (void)gen;
    const nb_dataset *ds = state;
    nb_status st = nb_sample_set(out, "x", nb_select(ds->x, 0, i));
    return st ? st : nb_sample_set(out, "y", nb_select(ds->y, 0, i));
}

nb_map_dataset *nb_map_dataset_from_tensors(nb_dataset *ds) {
    if (!ds) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "map_dataset_from_tensors: NULL dataset");
        return NULL;
    }
    return nb_map_dataset_new(ds->n, tensors_item, ds, NULL);
}

/* ---- Subset, ConcatDataset, random_split ------------------------------------------------------ */

typedef struct subset {
    nb_map_dataset *base;
    int64_t *indices;
} subset;

static nb_status subset_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    const subset *s = state;
    return s->base->get_item(s->base->state, s->indices[i], gen, out);
}

static void subset_free(void *state) {
    subset *s = state;
    free(s->indices), free(s);
}

nb_map_dataset *nb_subset(nb_map_dataset *ds, const int64_t *indices, int64_t n) {
    const char *op = "subset";
    if (!ds || n < 0 || (n && !indices)) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL dataset or indices, or n < 0", op);
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= ds->len)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: index %lld outside the dataset's %lld samples", op,
                           (long long)indices[i], (long long)ds->len);
    subset *s = calloc(1, sizeof *s);
    int64_t *idx = s ? malloc(sizeof *idx * (size_t)(n ? n : 1)) : NULL;
    nb_map_dataset *d = idx ? nb_map_dataset_new(n, subset_item, s, subset_free) : NULL;
    if (!d) {
        free(idx), free(s);
        return nb_last_status() ? NULL : NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    if (n) memcpy(idx, indices, sizeof *idx * (size_t)n);
    s->base = ds, s->indices = idx;
    return d;
}

typedef struct concat {
    int n;
    nb_map_dataset **parts;
    int64_t *ends; /* cumulative lengths */
} concat;

static nb_status concat_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    const concat *c = state;
    int k = 0;
    while (i >= c->ends[k]) k++; /* i < the total: some k */
    int64_t start = k ? c->ends[k - 1] : 0;
    return c->parts[k]->get_item(c->parts[k]->state, i - start, gen, out);
}

static void concat_free(void *state) {
    concat *c = state;
    free(c->parts), free(c->ends), free(c);
}

nb_map_dataset *nb_concat_dataset(nb_map_dataset *const *datasets, int n) {
    const char *op = "concat_dataset";
    if (n < 1 || !datasets) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %d datasets (at least one)", op, n);
    for (int i = 0; i < n; i++)
        if (!datasets[i]) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dataset %d is NULL", op, i);
    concat *c = calloc(1, sizeof *c);
    if (c) c->parts = malloc(sizeof *c->parts * (size_t)n), c->ends = malloc(sizeof *c->ends * (size_t)n);
    int64_t total = 0;
    for (int i = 0; c && c->parts && c->ends && i < n; i++) {
        if (datasets[i]->len > INT64_MAX - total) {
            concat_free(c);
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: the lengths overflow int64", op);
        }
        c->parts[i] = datasets[i];
        c->ends[i] = total += datasets[i]->len;
    }
    nb_map_dataset *d = c && c->parts && c->ends ? nb_map_dataset_new(total, concat_item, c, concat_free) : NULL;
    if (!d) {
        if (c) concat_free(c);
        return nb_last_status() ? NULL : NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    c->n = n;
    return d;
}

nb_status nb_random_split(nb_map_dataset *ds, const int64_t *lengths, int n, uint64_t seed, nb_map_dataset **out) {
    const char *op = "random_split";
    if (!ds || !lengths || !out || n < 1) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument or n < 1", op);
    for (int i = 0; i < n; i++) out[i] = NULL;
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (lengths[i] < 0 || lengths[i] > ds->len - sum) /* also keeps the sum from overflowing */
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: length %d (%lld) is negative or passes the dataset's %lld", op,
                                i, (long long)lengths[i], (long long)ds->len);
        sum += lengths[i];
    }
    if (sum != ds->len)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: the lengths sum to %lld, the dataset has %lld", op, (long long)sum,
                            (long long)ds->len);
    int64_t *p = malloc(sizeof *p * (size_t)(sum ? sum : 1));
    if (!p) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    nb_data_permutation(p, sum, seed, NB_DRAW_SPLIT, 0);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (!(out[i] = nb_subset(ds, p + off, lengths[i]))) {
            for (int j = 0; j < i; j++) nb_map_dataset_free(out[j]), out[j] = NULL;
            free(p);
            return nb_last_status();
        }
        off += lengths[i];
    }
    free(p);
    return NB_OK;
}
