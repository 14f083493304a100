/* dataloader.c - torch.utils.data.DataLoader over a map-style dataset:
 * the sampler's indices of the epoch cut into batches, each batch made
 * (every sample's get_item, then collate) in a scope of its own, on the
 * calling thread or on num_workers threads that run ahead.
 *
 * Workers and order. Batch k goes to whichever worker is free (they take
 * batches in order) and lands in ring slot k % cap, cap = num_workers *
 * prefetch_factor; nb_dataloader_next waits for slot pos and frees it, and
 * only batches below pos + cap are started, so a slot is free when its next
 * batch needs it. Every sample's generator is seeded from (seed, epoch,
 * index), so a batch is the same whoever makes it and whenever. A seek or
 * reset bumps the generation: results of the old one are dropped by the
 * worker that made them. A worker copies its batch's indices under the
 * lock, so the epoch's order may change while it works. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_functional.h"
#include "nb_ops.h"

typedef struct worker_arg worker_arg;

typedef struct result {
    int64_t batch; /* -1: empty */
    uint64_t gen;
    bool ready;
    nb_status status;
    char msg[512];
    nb_sample b; /* one reference per field */
} result;

struct nb_dataloader {
    nb_map_dataset *ds;
    nb_dataloader_options o;
    nb_sampler *sampler, *own; /* own: made for shuffle or sequential order */
    int64_t len, nbatches, epoch, pos;
    int64_t *order;            /* [len] this epoch's indices */
    int64_t *next_order;       /* [len] where a new epoch's are computed (swapped in on success) */
    int64_t *last;             /* [batch_size] the indices of the batch given last */
    int64_t last_n;
    nb_status status;
    nb_sample cur;             /* the batch given last (one reference per field) */
    /* "<field>_lengths" names of the padding collate (guarded by mu with workers) */
    char *len_names[NB_SAMPLE_MAX_FIELDS];
    const char *len_of[NB_SAMPLE_MAX_FIELDS];
    int n_len_names;
    /* workers */
    int nw, started, cap;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    result *ring;
    int64_t next; /* the next batch a worker may start */
    uint64_t gen;
    bool quit;
};

static void sample_release(nb_sample *s) {
    for (int i = 0; i < s->n; i++) nb_release(s->fields[i]);
    memset(s, 0, sizeof *s);
}

/* "<name>_lengths", kept by the loader (names of batches must outlive them). */
static const char *lengths_name(nb_dataloader *l, const char *name) {
    if (l->nw) pthread_mutex_lock(&l->mu);
    const char *r = NULL;
    for (int i = 0; i < l->n_len_names && !r; i++)
        if (!strcmp(l->len_of[i], name)) r = l->len_names[i];
    if (!r && l->n_len_names < NB_SAMPLE_MAX_FIELDS) {
        size_t n = strlen(name) + sizeof "_lengths";
        char *s = malloc(n);
        if (s) {
            snprintf(s, n, "%s_lengths", name);
            l->len_of[l->n_len_names] = name, l->len_names[l->n_len_names++] = s, r = s;
        }
    }
    if (l->nw) pthread_mutex_unlock(&l->mu);
    return r;
}

/* ---- making a batch ---------------------------------------------------------------------------- */

static nb_status collate_field(nb_dataloader *l, const nb_sample *smp, int64_t n, int f, nb_sample *b) {
    const char *name = smp[0].names[f];
    nb_tensor **ts = malloc(sizeof *ts * (size_t)n);
    int64_t *lens = malloc(sizeof *lens * (size_t)n);
    nb_status st = ts && lens ? NB_OK : nb_set_error(NB_ERR_OOM, "dataloader: out of host memory");
    bool pad = l->o.collate == NB_COLLATE_PAD;
    for (int64_t i = 0; !st && i < n; i++) {
        ts[i] = nb_sample_get(&smp[i], name);
        if (!ts[i]) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: collate: sample %lld of the batch has no field %s",
                              (long long)i, name);
            break;
        }
        lens[i] = nb_dim(ts[i]) ? nb_shape(ts[i])[0] : 0;
        pad = pad && nb_dim(ts[i]) > 0;
    }
    if (!st && !pad) st = nb_sample_set(b, name, nb_stack(ts, (int)n, 0));
    else if (!st) {
        const char *ln = lengths_name(l, name);
        if (!ln) st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: collate: more than %d padded fields (or out of host "
                                   "memory)", NB_SAMPLE_MAX_FIELDS);
        else if (nb_sample_get(&smp[0], ln))
            st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: collate: the samples have a field %s, the name of %s's "
                              "lengths", ln, name);
        else st = nb_sample_set(b, name, nb_pad_sequence(ts, (int)n, true, l->o.padding_value, false));
        if (!st) st = nb_sample_set(b, ln, nb_from_data_on(lens, NB_SHAPE(n), NB_I64, nb_device_of(ts[0])));
    }
    if (st && nb_last_error()[0] == 0) nb_set_error(st, "dataloader: collate of field %s failed", name);
    free(ts), free(lens);
    return st;
}

/* Batch k (indices idx[0..n)) of epoch into *out, one reference per field; msg gets the error. */
static nb_status make_batch(nb_dataloader *l, int64_t epoch, const int64_t *idx, int64_t n, nb_sample *out, char *msg,
                            size_t msg_len) {
    memset(out, 0, sizeof *out);
    nb_scope *s = nb_op_scope_begin();
    bool prev = nb_set_grad_enabled(false); /* batches are data, as PyTorch's workers make them */
    nb_sample *smp = calloc((size_t)(n ? n : 1), sizeof *smp);
    nb_status st = smp ? NB_OK : nb_set_error(NB_ERR_OOM, "dataloader: out of host memory");
    if (n > INT_MAX) st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: a batch of %lld samples", (long long)n);
    for (int64_t i = 0; !st && i < n; i++) {
        if (idx[i] < 0 || idx[i] >= l->ds->len) { /* a sampler for another dataset */
            st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: index %lld outside the dataset's %lld samples",
                              (long long)idx[i], (long long)l->ds->len);
            break;
        }
        nb_generator g = nb_generator_new(nb_data_draw(l->o.seed, NB_DRAW_SAMPLE, epoch, (uint64_t)idx[i]));
        nb_clear_error();
        st = l->ds->get_item(l->ds->state, idx[i], &g, &smp[i]);
        if (!st && (smp[i].n < 1 || smp[i].n > NB_SAMPLE_MAX_FIELDS))
            st = nb_set_error(NB_ERR_INVALID_ARG, "get_item gave %d fields", smp[i].n);
        if (st) {
            char inner[400];
            snprintf(inner, sizeof inner, "%s", nb_last_error()[0] ? nb_last_error() : nb_status_str(st));
            nb_set_error(st, "dataloader: sample %lld: %s", (long long)idx[i], inner);
        }
    }
    nb_sample b = {0};
    if (!st && l->o.collate_fn) {
        st = l->o.collate_fn(l->o.collate_state, smp, n, &b);
        if (!st && b.n < 1) st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: collate_fn made an empty batch");
        if (st && nb_last_error()[0] == 0) nb_set_error(st, "dataloader: collate_fn failed");
    } else
        for (int f = 0; !st && f < smp[0].n; f++) st = collate_field(l, smp, n, f, &b);
    for (int f = 0; !st && f < b.n; f++)
        if (!b.fields[f]) st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: batch field %s is NULL", b.names[f]);
    if (!st) {
        for (int f = 0; f < b.n; f++) nb_retain(b.fields[f]); /* past the scope */
        *out = b;
    } else
        snprintf(msg, msg_len, "%s", nb_last_error());
    free(smp);
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return st;
}

static int64_t batch_start(const nb_dataloader *l, int64_t k) { return k * l->o.batch_size; }
static int64_t batch_size_of(const nb_dataloader *l, int64_t k) {
    int64_t left = l->len - batch_start(l, k);
    return left < l->o.batch_size ? left : l->o.batch_size;
}

/* ---- workers ----------------------------------------------------------------------------------- */

struct worker_arg {
    nb_dataloader *l;
    int id;
    int64_t *idx; /* [batch_size]: the indices of the batch being made */
};

static void *worker(void *p) {
    worker_arg *a = p;
    nb_dataloader *l = a->l;
    int64_t *idx = a->idx;
    if (l->o.worker_init_fn) l->o.worker_init_fn(l->o.worker_init_state, a->id);
    pthread_mutex_lock(&l->mu);
    while (!l->quit) {
        int64_t k = l->next;
        if (k >= l->nbatches || k >= l->pos + l->cap || l->ring[k % l->cap].batch >= 0) {
            pthread_cond_wait(&l->work, &l->mu);
            continue;
        }
        l->next++;
        uint64_t gen = l->gen;
        int64_t epoch = l->epoch, n = batch_size_of(l, k);
        memcpy(idx, l->order + batch_start(l, k), sizeof *idx * (size_t)n);
        result *r = &l->ring[k % l->cap];
        r->batch = k, r->gen = gen, r->ready = false;
        pthread_mutex_unlock(&l->mu);
        nb_sample b;
        char msg[512] = "";
        nb_status st = make_batch(l, epoch, idx, n, &b, msg, sizeof msg);
        pthread_mutex_lock(&l->mu);
        if (gen == l->gen) {
            r->status = st, r->b = b, r->ready = true;
            snprintf(r->msg, sizeof r->msg, "%s", msg);
            pthread_cond_broadcast(&l->done);
        } else
            sample_release(&b); /* a seek or reset came meanwhile (it emptied the slot) */
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Drops every batch in flight or waiting (the caller holds mu). */
static void drop_all(nb_dataloader *l) {
    l->gen++;
    for (int i = 0; i < l->cap; i++) {
        if (l->ring[i].ready) sample_release(&l->ring[i].b);
        l->ring[i].batch = -1, l->ring[i].ready = false;
    }
}

/* ---- public API -------------------------------------------------------------------------------- */

void nb_dataloader_free(nb_dataloader *l) {
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->quit = true;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
        drop_all(l);
    }
    if (l->nw) pthread_cond_destroy(&l->work), pthread_cond_destroy(&l->done), pthread_mutex_destroy(&l->mu);
    sample_release(&l->cur);
    for (int i = 0; i < l->n_len_names; i++) free(l->len_names[i]);
    nb_sampler_free(l->own);
    for (int i = 0; l->args && i < l->nw; i++) free(l->args[i].idx);
    free(l->args), free(l->threads), free(l->ring), free(l->order), free(l->next_order), free(l->last), free(l);
}

static nb_status new_epoch(nb_dataloader *l, int64_t epoch) {
    nb_status st = nb_sampler_indices(l->sampler, epoch, l->next_order);
    if (!st) {
        int64_t *t = l->order;
        l->order = l->next_order, l->next_order = t, l->epoch = epoch;
    }
    return st;
}

nb_dataloader *nb_dataloader_new(nb_map_dataset *ds, nb_dataloader_options o) {
    const char *op = "dataloader_new";
    if (!ds) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: dataset is NULL", op);
        return NULL;
    }
    if (o.batch_size == 0) o.batch_size = 1;
    if (o.prefetch_factor == 0) o.prefetch_factor = 2;
    if (o.batch_size < 1 || o.num_workers < 0 || o.prefetch_factor < 1 || o.num_workers > 1024 || o.prefetch_factor > 1024)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: batch_size %lld, num_workers %d, prefetch_factor %d", op,
                       (long long)o.batch_size, o.num_workers, o.prefetch_factor);
    if (o.sampler && nb_sampler_dataset_len(o.sampler) != ds->len)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: the sampler is for %lld samples, the dataset has %lld", op,
                       (long long)nb_sampler_dataset_len(o.sampler), (long long)ds->len);
    nb_dataloader *l = calloc(1, sizeof *l);
    if (!l) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    l->ds = ds, l->o = o, l->sampler = o.sampler;
    if (!l->sampler)
        l->sampler = l->own = nb_sampler_new(ds->len, (nb_sampler_options){
                                                        .kind = o.shuffle ? NB_SAMPLER_RANDOM : NB_SAMPLER_SEQUENTIAL,
                                                        .seed = o.seed});
    l->len = l->sampler ? nb_sampler_len(l->sampler) : 0;
    l->nbatches = l->len / o.batch_size + (!o.drop_last && l->len % o.batch_size);
    int64_t most = o.batch_size < l->len ? o.batch_size : l->len > 0 ? l->len : 1; /* the largest batch */
    bool fits = (uint64_t)l->len < SIZE_MAX / 16;
    l->order = fits ? malloc(sizeof *l->order * (size_t)(l->len ? l->len : 1)) : NULL;
    l->next_order = fits ? malloc(sizeof *l->order * (size_t)(l->len ? l->len : 1)) : NULL;
    l->last = malloc(sizeof *l->last * (size_t)most);
    nb_status st = !l->sampler                            ? nb_last_status()
                   : !l->order || !l->next_order || !l->last ? nb_set_error(NB_ERR_OOM, "%s: out of host memory", op)
                                                             : new_epoch(l, 0);
    if (!st && o.num_workers > 0) {
        l->nw = o.num_workers, l->cap = o.num_workers * o.prefetch_factor;
        l->ring = calloc((size_t)l->cap, sizeof *l->ring);
        l->threads = calloc((size_t)l->nw, sizeof *l->threads);
        l->args = calloc((size_t)l->nw, sizeof *l->args);
        bool sync = !pthread_mutex_init(&l->mu, NULL);
        sync = sync && !pthread_cond_init(&l->work, NULL);
        sync = sync && !pthread_cond_init(&l->done, NULL);
        if (!sync) { /* not worth unpicking which one failed: they cannot on Linux */
            free(l->ring), free(l->threads), free(l->args), free(l->order), free(l->next_order), free(l->last),
                nb_sampler_free(l->own), free(l);
            return NB_FAIL(NB_ERR_STATE, "%s: cannot make the workers' lock", op);
        }
        if (!l->ring || !l->threads || !l->args) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        for (int i = 0; !st && i < l->cap; i++) l->ring[i].batch = -1;
        for (int i = 0; !st && i < l->nw; i++) {
            worker_arg *a = &l->args[i];
            a->l = l, a->id = i, a->idx = malloc(sizeof *a->idx * (size_t)most);
            if (!a->idx) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            else if (pthread_create(&l->threads[i], NULL, worker, a))
                st = nb_set_error(NB_ERR_STATE, "%s: cannot start worker %d", op, i);
            else
                l->started++;
        }
    }
    if (st) {
        nb_dataloader_free(l);
        return NULL;
    }
    return l;
}

bool nb_dataloader_next(nb_dataloader *l, nb_sample *batch) {
    if (batch) memset(batch, 0, sizeof *batch);
    if (!l || !batch) {
        nb_set_error(NB_ERR_INVALID_ARG, "dataloader_next: NULL argument");
        if (l) l->status = NB_ERR_INVALID_ARG;
        return false;
    }
    sample_release(&l->cur); /* the caller is done with the last batch */
    int64_t k = l->pos;
    if (k >= l->nbatches) {
        l->status = NB_OK;
        return false;
    }
    int64_t n = batch_size_of(l, k);
    nb_sample b;
    char msg[512] = "";
    nb_status st;
    if (!l->nw) {
        st = make_batch(l, l->epoch, l->order + batch_start(l, k), n, &b, msg, sizeof msg);
    } else {
        pthread_mutex_lock(&l->mu);
        result *r = &l->ring[k % l->cap];
        while (!(r->ready && r->batch == k && r->gen == l->gen)) pthread_cond_wait(&l->done, &l->mu);
        st = r->status, b = r->b;
        snprintf(msg, sizeof msg, "%s", r->msg);
        memset(&r->b, 0, sizeof r->b), r->batch = -1, r->ready = false;
        pthread_mutex_unlock(&l->mu);
    }
    if (st) { /* stays at batch k: the next call tries again */
        nb_set_error(st, "%s", msg[0] ? msg : nb_status_str(st));
        l->status = st;
        if (l->nw) { /* the batch is made again when asked */
            pthread_mutex_lock(&l->mu);
            drop_all(l);
            l->next = k;
            pthread_cond_broadcast(&l->work);
            pthread_mutex_unlock(&l->mu);
        }
        return false;
    }
    memcpy(l->last, l->order + batch_start(l, k), sizeof *l->last * (size_t)n);
    l->last_n = n;
    l->cur = b, *batch = b, l->status = NB_OK;
    if (l->nw) {
        pthread_mutex_lock(&l->mu);
        l->pos = k + 1;
        pthread_cond_broadcast(&l->work); /* a slot is free */
        pthread_mutex_unlock(&l->mu);
    } else
        l->pos = k + 1;
    return true;
}

nb_status nb_dataloader_seek(nb_dataloader *l, int64_t epoch, int64_t batch) {
    if (!l) return nb_set_error(NB_ERR_INVALID_ARG, "dataloader_seek: NULL loader");
    if (epoch < 0 || batch < 0 || batch > l->nbatches)
        return l->status = nb_set_error(NB_ERR_INVALID_ARG, "dataloader_seek: epoch %lld, batch %lld out of range (%lld "
                                        "batches per epoch)", (long long)epoch, (long long)batch, (long long)l->nbatches);
    sample_release(&l->cur);
    if (l->nw) pthread_mutex_lock(&l->mu);
    nb_status st = epoch != l->epoch ? new_epoch(l, epoch) : NB_OK;
    if (!st) l->pos = batch, l->last_n = 0;
    if (l->nw) {
        drop_all(l);
        l->next = l->pos;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
    }
    return l->status = st;
}

void nb_dataloader_reset(nb_dataloader *l) {
    if (!l) {
        nb_set_error(NB_ERR_INVALID_ARG, "dataloader_reset: NULL loader");
        return;
    }
    nb_dataloader_seek(l, l->epoch + 1, 0);
}

static bool no_loader(const char *op, const nb_dataloader *l) {
    if (l) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: loader is NULL", op);
    return true;
}

nb_status nb_dataloader_status(const nb_dataloader *l) {
    return no_loader("dataloader_status", l) ? NB_ERR_INVALID_ARG : l->status;
}
int64_t nb_dataloader_num_batches(const nb_dataloader *l) { return no_loader("dataloader_num_batches", l) ? -1 : l->nbatches; }
int64_t nb_dataloader_epoch(const nb_dataloader *l) { return no_loader("dataloader_epoch", l) ? -1 : l->epoch; }
int64_t nb_dataloader_position(const nb_dataloader *l) { return no_loader("dataloader_position", l) ? -1 : l->pos; }
nb_dataloader_options nb_dataloader_get_options(const nb_dataloader *l) {
    return no_loader("dataloader_get_options", l) ? (nb_dataloader_options){0} : l->o;
}
const int64_t *nb_dataloader_indices(const nb_dataloader *l, int64_t *n) {
    if (n) *n = 0;
    if (no_loader("dataloader_indices", l) || !n) {
        if (l) nb_set_error(NB_ERR_INVALID_ARG, "dataloader_indices: NULL n");
        return NULL;
    }
    *n = l->last_n;
    return l->last;
}
