/* dataset_iter.c - iterable datasets (torch.utils.data.IterableDataset):
 * a stream of samples restarted each epoch, and ChainDataset, the streams
 * of several one after another. */
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_extension.h"

nb_iterable_dataset *nb_iterable_dataset_new(nb_reset_fn reset, nb_next_item_fn next, void *state,
                                             void (*free_state)(void *)) {
    if (!reset || !next) return NB_FAIL(NB_ERR_INVALID_ARG, "iterable_dataset_new: NULL %s", reset ? "next" : "reset");
    nb_iterable_dataset *d = calloc(1, sizeof *d);
    if (!d) return NB_FAIL(NB_ERR_OOM, "iterable_dataset_new: out of host memory");
    d->reset = reset, d->next = next, d->state = state, d->free_state = free_state;
    return d;
}

void nb_iterable_dataset_free(nb_iterable_dataset *d) {
    if (!d) return;
    if (d->free_state) d->free_state(d->state);
    free(d);
}

nb_status nb_iterable_dataset_reset(nb_iterable_dataset *d, int64_t epoch) {
    if (!d || epoch < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "iterable_dataset_reset: %s", d ? "negative epoch" : "NULL dataset");
    nb_status st = d->reset(d->state, epoch);
    if (st && nb_last_error()[0] == 0) nb_set_error(st, "iterable_dataset_reset: reset of epoch %lld failed", (long long)epoch);
    return st;
}

nb_status nb_iterable_dataset_next(nb_iterable_dataset *d, nb_generator *gen, nb_sample *out) {
    if (!d || !out) return nb_set_error(NB_ERR_INVALID_ARG, "iterable_dataset_next: NULL %s", d ? "sample" : "dataset");
    memset(out, 0, sizeof *out);
    nb_status st = d->next(d->state, gen ? gen : nb_default_generator(), out);
    if (!st && (out->n < 0 || out->n > NB_SAMPLE_MAX_FIELDS))
        st = nb_set_error(NB_ERR_INVALID_ARG, "iterable_dataset_next: next gave %d fields", out->n);
    if (st) {
        if (nb_last_error()[0] == 0) nb_set_error(st, "iterable_dataset_next: next failed");
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- ChainDataset ------------------------------------------------------------------------------ */

typedef struct chain {
    nb_iterable_dataset **parts;
    int n, at; /* the part being read */
    int64_t epoch;
} chain;

static nb_status chain_reset(void *state, int64_t epoch) {
    chain *c = state;
    c->at = 0, c->epoch = epoch;
    return c->n ? nb_iterable_dataset_reset(c->parts[0], epoch) : NB_OK;
}

static nb_status chain_next(void *state, nb_generator *gen, nb_sample *out) {
    chain *c = state;
    while (c->at < c->n) {
        nb_status st = nb_iterable_dataset_next(c->parts[c->at], gen, out);
        if (st || out->n) return st;
        if (++c->at < c->n && (st = nb_iterable_dataset_reset(c->parts[c->at], c->epoch))) return st;
    }
    return NB_OK; /* every part has ended */
}

static void chain_free(void *state) {
    chain *c = state;
    free(c->parts), free(c);
}

nb_iterable_dataset *nb_chain_dataset(nb_iterable_dataset *const *datasets, int n) {
    if (n < 0 || (n && !datasets)) return NB_FAIL(NB_ERR_INVALID_ARG, "chain_dataset: NULL datasets or n < 0");
    for (int i = 0; i < n; i++)
        if (!datasets[i]) return NB_FAIL(NB_ERR_INVALID_ARG, "chain_dataset: dataset %d is NULL", i);
    chain *c = calloc(1, sizeof *c);
    nb_iterable_dataset **parts = malloc(sizeof *parts * (size_t)(n ? n : 1));
    if (!c || !parts) {
        free(c), free(parts);
        return NB_FAIL(NB_ERR_OOM, "chain_dataset: out of host memory");
    }
    memcpy(parts, datasets, sizeof *parts * (size_t)n);
    c->parts = parts, c->n = n;
    nb_iterable_dataset *d = nb_iterable_dataset_new(chain_reset, chain_next, c, chain_free);
    if (!d) chain_free(c);
    return d;
}
