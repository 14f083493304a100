/* dataloader.c - torch.utils.data.DataLoader over a map-style dataset:
 * the sampler's indices of the epoch cut into batches (or a batch
 * sampler's lists of them), each batch made (every sample's get_item, then
 * collate) in a scope of its own, on the calling thread or on num_workers
 * threads that run ahead; or over an iterable dataset, whose stream is
 * read one batch after another in turn (the turn passes from batch k to
 * k + 1), the collates in parallel.
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

#define UNKNOWN INT64_MAX /* an iterable dataset's batch count before its stream has ended */

/* A batch staged in pinned host memory for its copy to the device (pin_memory): its fields' bytes one after
   another, 64-byte aligned. The buffer is written again only once the copy out of it has completed. */
typedef struct staged {
    uint8_t *host;       /* nb_host_alloc on the device */
    size_t cap;
    nb_event *ev;        /* recorded on the copy stream after the copy out of host */
    bool pending;        /* ev is recorded: wait for it before writing host */
    int n;
    const char *names[NB_SAMPLE_MAX_FIELDS];
    nb_dtype dt[NB_SAMPLE_MAX_FIELDS];
    int ndim[NB_SAMPLE_MAX_FIELDS];
    int64_t shape[NB_SAMPLE_MAX_FIELDS][NB_MAX_DIMS];
    size_t off[NB_SAMPLE_MAX_FIELDS], bytes[NB_SAMPLE_MAX_FIELDS];
    struct staged *next_free;
} staged;

typedef struct result {
    int64_t batch; /* -1: empty */
    uint64_t gen;
    bool ready;
    bool end;      /* an iterable dataset's stream ended before this batch */
    int64_t got;   /* its samples */
    staged *stage; /* pin_memory: the batch is here, not in b */
    nb_status status;
    char msg[512];
    nb_sample b; /* one reference per field */
} result;

struct nb_dataloader {
    nb_map_dataset *ds;        /* or: */
    nb_iterable_dataset *it;
    nb_dataloader_options o;
    nb_sampler *sampler, *own; /* own: made for shuffle or sequential order */
    int64_t len, nbatches, epoch, pos;
    int64_t *order;            /* [len] this epoch's indices */
    int64_t *next_order;       /* [len] where a new epoch's are computed (swapped in on success) */
    int64_t *offs, *next_offs; /* batch_sampler: batch k is order[offs[k], offs[k + 1]) ([offs_cap]) */
    int64_t order_cap, offs_cap; /* batch_sampler: the entries order / next_order and offs / next_offs hold */
    int64_t *last;             /* [batch_size] the indices of the batch given last */
    /* iterable: the batch whose samples the stream gives next (-1: none until a seek, after a failed read),
       whether a worker reads it now (outside mu), whether the stream must be found again by a seek */
    int64_t turn;
    bool reading, resync;
    bool seeking; /* no batch is started while a seek waits for the reader (the order is about to change) */
    /* pin_memory to a CUDA device: nw + cap staging buffers (at most cap wait in the ring, nw are being
       filled), the free ones listed (guarded by mu); stage0 serves num_workers 0 */
    bool pinning;
    staged *stages, *free_stages, stage0;
    int n_stages;
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
    pthread_cond_t work, done, turn_cv;
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

/* The samples of a map-style batch: get_item of idx[0..n). */
static nb_status get_samples(nb_dataloader *l, int64_t epoch, const int64_t *idx, int64_t n, nb_sample *smp) {
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= l->ds->len) /* a sampler for another dataset */
            return nb_set_error(NB_ERR_INVALID_ARG, "dataloader: index %lld outside the dataset's %lld samples",
                                (long long)idx[i], (long long)l->ds->len);
        nb_generator g = nb_generator_new(nb_data_draw(l->o.seed, NB_DRAW_SAMPLE, epoch, (uint64_t)idx[i]));
        nb_clear_error();
        nb_status st = l->ds->get_item(l->ds->state, idx[i], &g, &smp[i]);
        if (!st && (smp[i].n < 1 || smp[i].n > NB_SAMPLE_MAX_FIELDS))
            st = nb_set_error(NB_ERR_INVALID_ARG, "get_item gave %d fields", smp[i].n);
        if (st) {
            char inner[400];
            snprintf(inner, sizeof inner, "%s", nb_last_error()[0] ? nb_last_error() : nb_status_str(st));
            return nb_set_error(st, "dataloader: sample %lld: %s", (long long)idx[i], inner);
        }
    }
    return NB_OK;
}

/* ---- an iterable dataset's turn -------------------------------------------------------------- */

/* Waits (workers) until batch k of generation gen may read the stream; false when a seek or reset came first. */
static bool take_turn(nb_dataloader *l, int64_t k, uint64_t gen) {
    if (!l->nw) return true;
    pthread_mutex_lock(&l->mu);
    while (l->gen == gen && !l->quit && (l->turn != k || l->reading)) pthread_cond_wait(&l->turn_cv, &l->mu);
    bool mine = l->gen == gen && !l->quit;
    if (mine) l->reading = true;
    pthread_mutex_unlock(&l->mu);
    return mine;
}

/* Batch k read got of its n samples (st: the read failed): the turn passes on, or the epoch's length is known. */
static void end_turn(nb_dataloader *l, int64_t k, uint64_t gen, int64_t got, int64_t n, nb_status st) {
    if (l->nw) pthread_mutex_lock(&l->mu);
    l->reading = false;
    if (gen == l->gen) {
        /* after a failure the stream's place is lost (the next call seeks); after its end nothing more is read */
        l->turn = st || got < n ? -1 : k + 1;
        if (!st && got < n) l->nbatches = k + (got > 0 && !l->o.drop_last);
    }
    if (l->nw) {
        pthread_cond_broadcast(&l->turn_cv);
        pthread_cond_broadcast(&l->done);
        pthread_mutex_unlock(&l->mu);
    }
}

/* The samples of an iterable dataset's batch k (positions k * batch_size...): up to n from the stream, *got of them. */
static nb_status read_samples(nb_dataloader *l, int64_t epoch, int64_t k, uint64_t gen, int64_t n, nb_sample *smp,
                              int64_t *got) {
    *got = 0;
    if (!take_turn(l, k, gen)) return NB_ERR_STATE; /* dropped: nobody sees the result */
    nb_status st = NB_OK;
    for (int64_t i = 0; i < n; i++) {
        int64_t p = k * l->o.batch_size + i;
        nb_generator g = nb_generator_new(nb_data_draw(l->o.seed, NB_DRAW_SAMPLE, epoch, (uint64_t)p));
        nb_clear_error();
        st = nb_iterable_dataset_next(l->it, &g, &smp[i]);
        if (st) {
            char inner[400];
            snprintf(inner, sizeof inner, "%s", nb_last_error());
            nb_set_error(st, "dataloader: sample %lld of epoch %lld: %s", (long long)p, (long long)epoch, inner);
            break;
        }
        if (!smp[i].n) break; /* the end */
        ++*got;
    }
    end_turn(l, k, gen, *got, n, st);
    if (!st && *got < n && l->o.drop_last) *got = 0; /* a short last batch is dropped (its samples die with the scope) */
    return st;
}

/* Batch k (indices idx[0..n); an iterable dataset's: up to n samples read, *got of them) of epoch into *out,
   one reference per field; msg gets the error. An iterable dataset's batch of no samples is empty (*got 0). */
static nb_status make_batch(nb_dataloader *l, int64_t epoch, int64_t k, uint64_t gen, const int64_t *idx, int64_t n,
                            nb_sample *out, int64_t *got, char *msg, size_t msg_len) {
    memset(out, 0, sizeof *out);
    *got = 0;
    nb_scope *s = nb_op_scope_begin();
    bool prev = nb_set_grad_enabled(false); /* batches are data, as PyTorch's workers make them */
    nb_sample *smp = calloc((size_t)(n ? n : 1), sizeof *smp);
    nb_status st = smp ? NB_OK : nb_set_error(NB_ERR_OOM, "dataloader: out of host memory");
    if (!st && n > INT_MAX) st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader: a batch of %lld samples", (long long)n);
    if (!st && l->it) {
        st = read_samples(l, epoch, k, gen, n, smp, got);
        n = *got;
    } else if (!st) {
        st = get_samples(l, epoch, idx, n, smp);
        *got = n;
    }
    nb_sample b = {0};
    if (!st && !n) { /* the stream had ended */
    } else if (!st && l->o.collate_fn) {
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

static int64_t batch_start(const nb_dataloader *l, int64_t k) { return l->offs ? l->offs[k] : k * l->o.batch_size; }
/* Batch k's size (an iterable dataset's: the most it may hold). */
static int64_t batch_size_of(const nb_dataloader *l, int64_t k) {
    if (l->offs) return l->offs[k + 1] - l->offs[k];
    if (l->it) return l->o.batch_size;
    int64_t left = l->len - batch_start(l, k);
    return left < l->o.batch_size ? left : l->o.batch_size;
}

/* ---- pin_memory: pinned staging and the copy to the device -------------------------------------- */

/* Writes batch *b (CPU tensors) into g's pinned memory and releases it; fields on another device stay in *b
   (nothing is staged: g->n 0). Runs on a worker: the copy out of g's last batch must be done first. */
static nb_status stage_batch(nb_dataloader *l, staged *g, nb_sample *b) {
    g->n = 0;
    for (int f = 0; f < b->n; f++)
        if (nb_device_of(b->fields[f]).type != NB_DEVICE_CPU) return NB_OK; /* made on a device already */
    nb_status st = g->pending ? nb_event_synchronize(g->ev) : NB_OK;
    if (st) return st;
    g->pending = false;
    size_t total = 0;
    for (int f = 0; f < b->n; f++) {
        g->off[f] = total;
        g->bytes[f] = (size_t)nb_numel(b->fields[f]) * nb_dtype_size(nb_dtype_of(b->fields[f]));
        total += (g->bytes[f] + 63) & ~(size_t)63;
    }
    if (total > g->cap) {
        nb_host_free(l->o.device, g->host);
        g->cap = 0;
        if (!(g->host = nb_host_alloc(l->o.device, total))) return nb_last_status();
        g->cap = total;
    }
    for (int f = 0; f < b->n; f++) {
        nb_tensor *t = b->fields[f];
        if ((st = nb_to_host(t, g->host + g->off[f], g->bytes[f]))) return st;
        g->names[f] = b->names[f], g->dt[f] = nb_dtype_of(t), g->ndim[f] = nb_dim(t);
        memcpy(g->shape[f], nb_shape(t), sizeof(int64_t) * (size_t)nb_dim(t));
    }
    g->n = b->n;
    sample_release(b);
    return NB_OK;
}

/* The batch on the device: from g (copied on the copy stream, which the current stream then waits for) or,
   for what was not staged, *b's fields moved there (synchronously). On the loader's thread. */
static nb_status to_device(nb_dataloader *l, staged *g, nb_sample *b) {
    nb_device dev = l->o.device;
    nb_status st = NB_OK;
    if (g && g->n) {
        nb_stream *copy = nb_stream_copy(dev), *cur = nb_current_stream(dev);
        if (!g->ev && !(g->ev = nb_event_new(dev))) return nb_last_status();
        nb_scope *s = nb_op_scope_begin();
        st = nb_set_current_stream(copy); /* allocated for the copy stream, which writes them first */
        for (int f = 0; !st && f < g->n; f++) {
            nb_tensor *t = nb_empty_on(g->ndim[f], g->shape[f], g->dt[f], dev);
            st = t ? nb_copy_from_host_async(t, g->host + g->off[f], g->bytes[f], copy) : nb_last_status();
            if (!st) st = nb_sample_set(b, g->names[f], t);
        }
        nb_status st2 = nb_set_current_stream(cur);
        if (!st) st = st2;
        /* even after a failure some copies may be under way: the buffer is reused only after them */
        nb_status rec = nb_event_record(g->ev, copy);
        if (rec) nb_stream_synchronize(copy);
        g->pending = !rec;
        if (!st) st = rec;
        if (!st) st = nb_stream_wait_event(cur, g->ev);
        for (int f = 0; !st && f < b->n; f++) st = nb_record_stream(b->fields[f], cur); /* freed after cur's use */
        for (int f = 0; !st && f < b->n; f++) nb_retain(b->fields[f]);
        if (st) memset(b, 0, sizeof *b);
        nb_scope_end(s);
        return st;
    }
    for (int f = 0; f < b->n; f++) {
        nb_device d = nb_device_of(b->fields[f]);
        if (d.type == dev.type && d.index == dev.index) continue;
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *t = nb_to_device(b->fields[f], dev);
        if (t) nb_retain(t), nb_release(b->fields[f]), b->fields[f] = t;
        nb_scope_end(s);
        if (!t) return nb_last_status();
    }
    return st;
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
        if (l->seeking || k >= l->nbatches || k >= l->pos + l->cap || l->ring[k % l->cap].batch >= 0) {
            pthread_cond_wait(&l->work, &l->mu);
            continue;
        }
        l->next++;
        uint64_t gen = l->gen;
        int64_t epoch = l->epoch, n = batch_size_of(l, k), got;
        if (!l->it) memcpy(idx, l->order + batch_start(l, k), sizeof *idx * (size_t)n);
        result *r = &l->ring[k % l->cap];
        r->batch = k, r->gen = gen, r->ready = false, r->end = false;
        pthread_mutex_unlock(&l->mu);
        nb_sample b;
        char msg[512] = "";
        nb_status st = make_batch(l, epoch, k, gen, idx, n, &b, &got, msg, sizeof msg);
        staged *g = NULL;
        if (!st && got && l->pinning) {
            pthread_mutex_lock(&l->mu);
            g = l->free_stages;
            if (!g) abort(); /* nw + cap buffers: at most cap wait in the ring, nw are being filled */
            l->free_stages = g->next_free;
            pthread_mutex_unlock(&l->mu);
            if ((st = stage_batch(l, g, &b))) snprintf(msg, sizeof msg, "%s", nb_last_error());
        }
        pthread_mutex_lock(&l->mu);
        if (gen == l->gen && (!g || !st)) {
            r->status = st, r->b = b, r->stage = g, r->ready = true, r->end = !st && !got, r->got = got;
            snprintf(r->msg, sizeof r->msg, "%s", msg);
            pthread_cond_broadcast(&l->done);
        } else {
            sample_release(&b); /* a seek or reset came meanwhile (it emptied the slot) */
            if (g) g->next_free = l->free_stages, l->free_stages = g;
            if (gen == l->gen) { /* staging failed */
                r->status = st, r->ready = true, r->got = got;
                snprintf(r->msg, sizeof r->msg, "%s", msg);
                pthread_cond_broadcast(&l->done);
            }
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Drops every batch in flight or waiting (the caller holds mu). */
static void drop_all(nb_dataloader *l) {
    l->gen++;
    pthread_cond_broadcast(&l->turn_cv); /* workers waiting for an old generation's turn give up */
    for (int i = 0; i < l->cap; i++) {
        result *r = &l->ring[i];
        if (r->ready) sample_release(&r->b);
        if (r->ready && r->stage) r->stage->next_free = l->free_stages, l->free_stages = r->stage;
        r->batch = -1, r->ready = false, r->stage = NULL;
    }
}

/* Restarts the stream of an iterable dataset for epoch and reads past batch `batch`'s samples (their
   generators as the batches' own: a stream may draw from them); the caller holds mu, and no read is under way
   after this (the generation was bumped). */
static nb_status find_in_stream(nb_dataloader *l, int64_t epoch, int64_t batch) {
    l->resync = true, l->turn = -1, l->seeking = true;
    while (l->nw && l->reading) pthread_cond_wait(&l->turn_cv, &l->mu); /* releases mu: hence seeking */
    l->seeking = false;
    nb_status st = nb_iterable_dataset_reset(l->it, epoch);
    int64_t skip = batch * l->o.batch_size, c = 0; /* bounded by nb_dataloader_seek */
    nb_scope *s = nb_op_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    for (; !st && c < skip; c++) {
        nb_scope *one = nb_scope_begin();
        nb_sample smp;
        nb_generator g = nb_generator_new(nb_data_draw(l->o.seed, NB_DRAW_SAMPLE, epoch, (uint64_t)c));
        st = nb_iterable_dataset_next(l->it, &g, &smp);
        nb_scope_end(one);
        if (!st && !smp.n) break;
    }
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    int64_t nb = UNKNOWN;
    if (!st && c < skip) { /* the stream ended: at the end of the epoch, or short of batch */
        nb = c / l->o.batch_size + (!l->o.drop_last && c % l->o.batch_size);
        if (nb != batch)
            return nb_set_error(NB_ERR_INVALID_ARG, "dataloader_seek: epoch %lld's stream has %lld batches, not %lld",
                                (long long)epoch, (long long)nb, (long long)batch);
    }
    if (st) return st;
    l->epoch = epoch, l->pos = batch, l->turn = batch, l->nbatches = nb, l->resync = false;
    return NB_OK;
}

/* ---- public API -------------------------------------------------------------------------------- */

void nb_dataloader_free(nb_dataloader *l) {
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->quit = true;
        pthread_cond_broadcast(&l->work);
        pthread_cond_broadcast(&l->turn_cv);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
        drop_all(l);
    }
    if (l->nw)
        pthread_cond_destroy(&l->work), pthread_cond_destroy(&l->done), pthread_cond_destroy(&l->turn_cv),
            pthread_mutex_destroy(&l->mu);
    sample_release(&l->cur);
    for (int i = 0; i <= l->n_stages; i++) {
        staged *g = i < l->n_stages ? &l->stages[i] : &l->stage0;
        if (g->pending) nb_event_synchronize(g->ev); /* no copy may read freed memory */
        if (g->ev) nb_event_free(g->ev);
        if (g->host) nb_host_free(l->o.device, g->host);
    }
    free(l->stages);
    for (int i = 0; i < l->n_len_names; i++) free(l->len_names[i]);
    nb_sampler_free(l->own);
    for (int i = 0; l->args && i < l->nw; i++) free(l->args[i].idx);
    free(l->args), free(l->threads), free(l->ring), free(l->order), free(l->next_order), free(l->offs),
        free(l->next_offs), free(l->last), free(l);
}

/* Grows *a and *b (both kept) to n entries; cap is their size. */
static bool grow2(int64_t **a, int64_t **b, int64_t *cap, int64_t n) {
    if (n <= *cap) return true;
    if ((uint64_t)n > SIZE_MAX / 16) return false;
    int64_t *na = realloc(*a, sizeof **a * (size_t)n);
    if (na) *a = na;
    int64_t *nb = na ? realloc(*b, sizeof **b * (size_t)n) : NULL;
    if (nb) *b = nb, *cap = n;
    return nb != NULL;
}

/* A batch sampler's batches of epoch into next_order / next_offs. */
static nb_status batch_sampler_epoch(nb_dataloader *l, int64_t epoch, int64_t *nbatches) {
    const char *op = "dataloader: batch_sampler";
    void *state = l->o.batch_sampler_state;
    int64_t nb = l->o.batch_sampler_len(state, epoch), bs = l->o.batch_size;
    if (nb < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld batches in epoch %lld", op, (long long)nb, (long long)epoch);
    if (nb > INT64_MAX / 4 || !grow2(&l->offs, &l->next_offs, &l->offs_cap, nb + 1))
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory for %lld batches", op, (long long)nb);
    int64_t off = 0;
    l->next_offs[0] = 0;
    for (int64_t k = 0; k < nb; k++) {
        int64_t n = 0, want = l->order_cap; /* room for batch_size more, growing geometrically */
        while (want < off + bs) want = want ? 2 * want : off + bs;
        if ((off > INT64_MAX / 4 - bs) || !grow2(&l->order, &l->next_order, &l->order_cap, want))
            return nb_set_error(NB_ERR_OOM, "%s: out of host memory for the indices of %lld batches", op, (long long)nb);
        nb_clear_error();
        nb_status st = l->o.batch_sampler(state, epoch, k, l->next_order + off, &n);
        if (st) {
            if (nb_last_error()[0] == 0) nb_set_error(st, "%s: batch %lld of epoch %lld failed", op, (long long)k, (long long)epoch);
            return st;
        }
        if (n < 1 || n > bs)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: batch %lld of epoch %lld has %lld indices, not 1 to batch_size %lld",
                                op, (long long)k, (long long)epoch, (long long)n, (long long)bs);
        l->next_offs[k + 1] = off += n;
    }
    int64_t *t = l->offs;
    l->offs = l->next_offs, l->next_offs = t;
    *nbatches = nb;
    return NB_OK;
}

/* epoch's order (the caller holds mu with workers). */
static nb_status new_epoch(nb_dataloader *l, int64_t epoch) {
    int64_t nb = l->nbatches;
    nb_status st = l->o.batch_sampler ? batch_sampler_epoch(l, epoch, &nb)
                                      : nb_sampler_indices(l->sampler, epoch, l->next_order);
    if (!st) {
        int64_t *t = l->order;
        l->order = l->next_order, l->next_order = t, l->epoch = epoch, l->nbatches = nb;
    }
    return st;
}

static nb_status start_workers(nb_dataloader *l, int64_t most) {
    const char *op = "dataloader_new";
    l->nw = l->o.num_workers, l->cap = l->o.num_workers * l->o.prefetch_factor;
    l->ring = calloc((size_t)l->cap, sizeof *l->ring);
    l->threads = calloc((size_t)l->nw, sizeof *l->threads);
    l->args = calloc((size_t)l->nw, sizeof *l->args);
    bool sync = !pthread_mutex_init(&l->mu, NULL);
    sync = sync && !pthread_cond_init(&l->work, NULL);
    sync = sync && !pthread_cond_init(&l->done, NULL);
    sync = sync && !pthread_cond_init(&l->turn_cv, NULL);
    if (!sync) { /* not worth unpicking which one failed: they cannot on Linux */
        l->nw = 0;
        return nb_set_error(NB_ERR_STATE, "%s: cannot make the workers' lock", op);
    }
    if (!l->ring || !l->threads || !l->args) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    for (int i = 0; i < l->cap; i++) l->ring[i].batch = -1;
    for (int i = 0; i < l->nw; i++) {
        worker_arg *a = &l->args[i];
        a->l = l, a->id = i, a->idx = malloc(sizeof *a->idx * (size_t)most);
        if (!a->idx) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        if (pthread_create(&l->threads[i], NULL, worker, a))
            return nb_set_error(NB_ERR_STATE, "%s: cannot start worker %d", op, i);
        l->started++;
    }
    return NB_OK;
}

/* A loader over ds or it (the other NULL). */
static nb_dataloader *loader_new(nb_map_dataset *ds, nb_iterable_dataset *it, nb_dataloader_options o) {
    const char *op = it ? "dataloader_new_iterable" : "dataloader_new";
    if (!ds && !it) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: dataset is NULL", op);
        return NULL;
    }
    bool bsamp = o.batch_sampler || o.batch_sampler_len;
    if (o.batch_size == 0 && !bsamp) o.batch_size = 1;
    if (o.prefetch_factor == 0) o.prefetch_factor = 2;
    if (o.batch_size < 1 || o.num_workers < 0 || o.prefetch_factor < 1 || o.num_workers > 1024 || o.prefetch_factor > 1024)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: batch_size %lld%s, num_workers %d, prefetch_factor %d", op,
                       (long long)o.batch_size, bsamp ? " (with batch_sampler: the most indices a batch holds)" : "",
                       o.num_workers, o.prefetch_factor);
    if (bsamp && (!o.batch_sampler || !o.batch_sampler_len || o.shuffle || o.sampler || o.drop_last))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: batch_sampler needs batch_sampler_len, and excludes shuffle, sampler "
                       "and drop_last (as PyTorch's)", op);
    if (it && (o.shuffle || o.sampler || bsamp))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: an iterable dataset takes no shuffle, sampler or batch_sampler (its "
                       "order is its stream's)", op);
    if (o.sampler && nb_sampler_dataset_len(o.sampler) != ds->len)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: the sampler is for %lld samples, the dataset has %lld", op,
                       (long long)nb_sampler_dataset_len(o.sampler), (long long)ds->len);
    if (o.device.type < 0 || o.device.type >= NB_DEVICE_TYPE_COUNT || o.device.index < 0 ||
        (o.device.type != NB_DEVICE_CPU && o.device.index >= nb_device_count(o.device.type)))
        return NB_FAIL(NB_ERR_DEVICE, "%s: device %d:%d is not there (%d CUDA devices)", op, (int)o.device.type,
                       o.device.index, nb_device_count(NB_DEVICE_CUDA));
    nb_dataloader *l = calloc(1, sizeof *l);
    if (!l) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    l->ds = ds, l->it = it, l->o = o, l->sampler = o.sampler;
    l->pinning = o.pin_memory && o.device.type != NB_DEVICE_CPU;
    nb_status st = NB_OK;
    int64_t most = o.batch_size; /* the largest batch */
    if (it) {
        l->nbatches = UNKNOWN, l->turn = 0;
        st = nb_iterable_dataset_reset(it, 0);
    } else if (bsamp) {
        st = new_epoch(l, 0);
    } else {
        if (!l->sampler)
            l->sampler = l->own = nb_sampler_new(ds->len, (nb_sampler_options){
                                                            .kind = o.shuffle ? NB_SAMPLER_RANDOM : NB_SAMPLER_SEQUENTIAL,
                                                            .seed = o.seed});
        l->len = l->sampler ? nb_sampler_len(l->sampler) : 0;
        l->nbatches = l->len / o.batch_size + (!o.drop_last && l->len % o.batch_size);
        most = o.batch_size < l->len ? o.batch_size : l->len > 0 ? l->len : 1;
        bool fits = (uint64_t)l->len < SIZE_MAX / 16;
        l->order = fits ? malloc(sizeof *l->order * (size_t)(l->len ? l->len : 1)) : NULL;
        l->next_order = fits ? malloc(sizeof *l->order * (size_t)(l->len ? l->len : 1)) : NULL;
        st = !l->sampler                        ? nb_last_status()
             : !l->order || !l->next_order      ? nb_set_error(NB_ERR_OOM, "%s: out of host memory", op)
                                                : new_epoch(l, 0);
    }
    if (!st && (uint64_t)most > SIZE_MAX / 16) st = nb_set_error(NB_ERR_OOM, "%s: batch_size %lld", op, (long long)most);
    if (!st && !(l->last = malloc(sizeof *l->last * (size_t)most))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if (!st && o.num_workers > 0 && l->pinning) {
        int ns = o.num_workers * (1 + o.prefetch_factor);
        if (!(l->stages = calloc((size_t)ns, sizeof *l->stages))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        else l->n_stages = ns;
        for (int i = 0; !st && i < ns; i++) l->stages[i].next_free = l->free_stages, l->free_stages = &l->stages[i];
    }
    if (!st && o.num_workers > 0) st = start_workers(l, most);
    if (st) {
        nb_dataloader_free(l);
        return NULL;
    }
    return l;
}

nb_dataloader *nb_dataloader_new(nb_map_dataset *ds, nb_dataloader_options o) { return loader_new(ds, NULL, o); }
nb_dataloader *nb_dataloader_new_iterable(nb_iterable_dataset *ds, nb_dataloader_options o) {
    if (!ds) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "dataloader_new_iterable: dataset is NULL");
        return NULL;
    }
    return loader_new(NULL, ds, o);
}

/* Seeks to (epoch, batch) (the caller holds mu with workers, and has dropped what was in flight). */
static nb_status seek_locked(nb_dataloader *l, int64_t epoch, int64_t batch) {
    if (l->it) return find_in_stream(l, epoch, batch);
    int64_t was = l->epoch;
    nb_status st = epoch != l->epoch ? new_epoch(l, epoch) : NB_OK;
    if (!st && batch > l->nbatches) { /* a batch sampler's epoch too short: back to where it was */
        st = nb_set_error(NB_ERR_INVALID_ARG, "dataloader_seek: batch %lld past epoch %lld's %lld batches",
                          (long long)batch, (long long)epoch, (long long)l->nbatches);
        if (was != epoch) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", nb_last_error());
            if (new_epoch(l, was)) l->pos = 0; /* it gave that epoch before: it cannot fail now but for memory */
            nb_set_error(st, "%s", msg);
        }
    }
    if (!st) l->pos = batch;
    return st;
}

/* Drops what the workers made or are making and positions the loader at (epoch, batch), where they go on. */
static nb_status reposition(nb_dataloader *l, int64_t epoch, int64_t batch) {
    if (l->nw) pthread_mutex_lock(&l->mu);
    if (l->nw) drop_all(l);
    nb_status st = seek_locked(l, epoch, batch);
    if (l->nw) {
        l->next = l->pos;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
    }
    return st;
}

bool nb_dataloader_next(nb_dataloader *l, nb_sample *batch) {
    if (batch) memset(batch, 0, sizeof *batch);
    if (!l || !batch) {
        nb_set_error(NB_ERR_INVALID_ARG, "dataloader_next: NULL argument");
        if (l) l->status = NB_ERR_INVALID_ARG;
        return false;
    }
    sample_release(&l->cur); /* the caller is done with the last batch */
    /* an iterable dataset's read failed: find the batch in its stream again */
    if (l->resync && (l->status = reposition(l, l->epoch, l->pos))) return false;
    int64_t k = l->pos;
    if (l->nw) pthread_mutex_lock(&l->mu); /* a worker sets an iterable dataset's nbatches */
    bool past = k >= l->nbatches;
    if (l->nw) pthread_mutex_unlock(&l->mu);
    if (past) {
        l->status = NB_OK;
        return false;
    }
    int64_t n = batch_size_of(l, k), got = 0;
    nb_sample b = {0};
    char msg[512] = "";
    nb_status st;
    bool end = false;
    staged *g = NULL;
    if (!l->nw) {
        st = make_batch(l, l->epoch, k, l->gen, l->it ? NULL : l->order + batch_start(l, k), n, &b, &got, msg,
                        sizeof msg);
        end = !st && !got;
        if (!st && !end && l->pinning && (st = stage_batch(l, &l->stage0, &b))) snprintf(msg, sizeof msg, "%s", nb_last_error());
        if (!st && l->pinning) g = &l->stage0;
    } else {
        pthread_mutex_lock(&l->mu);
        result *r = &l->ring[k % l->cap];
        while (!(r->ready && r->batch == k && r->gen == l->gen) && k < l->nbatches) pthread_cond_wait(&l->done, &l->mu);
        if (r->ready && r->batch == k && r->gen == l->gen) {
            st = r->status, b = r->b, end = r->end, got = r->got, g = r->stage;
            snprintf(msg, sizeof msg, "%s", r->msg);
            memset(&r->b, 0, sizeof r->b), r->batch = -1, r->ready = false, r->end = false, r->stage = NULL;
        } else /* an iterable dataset's stream ended before batch k */
            st = NB_OK, end = true;
        pthread_mutex_unlock(&l->mu);
    }
    if (!st && !end && l->o.device.type != NB_DEVICE_CPU) {
        st = to_device(l, g, &b);
        if (st) sample_release(&b), snprintf(msg, sizeof msg, "%s", nb_last_error());
    }
    if (g && l->nw) { /* the buffer is free again (written next only after the copy out of it is done) */
        pthread_mutex_lock(&l->mu);
        g->next_free = l->free_stages, l->free_stages = g;
        pthread_mutex_unlock(&l->mu);
    }
    if (end) {
        l->status = NB_OK;
        return false;
    }
    if (st) { /* stays at batch k: the next call tries again */
        nb_set_error(st, "%s", msg[0] ? msg : nb_status_str(st));
        l->status = st;
        if (l->it) l->resync = true;
        if (l->nw) { /* the batch is made again when asked */
            pthread_mutex_lock(&l->mu);
            drop_all(l);
            if (l->it) l->turn = -1; /* nothing is read before the stream is found again */
            l->next = k;
            pthread_cond_broadcast(&l->work);
            pthread_mutex_unlock(&l->mu);
        }
        return false;
    }
    n = got;
    if (l->it) /* positions in the stream */
        for (int64_t i = 0; i < n; i++) l->last[i] = k * l->o.batch_size + i;
    else
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
    if (epoch < 0 || batch < 0 || (!l->it && !l->o.batch_sampler && batch > l->nbatches) ||
        batch > INT64_MAX / 4 / l->o.batch_size) /* (batch + cap) * batch_size stays far from overflow */
        return l->status = nb_set_error(NB_ERR_INVALID_ARG, "dataloader_seek: epoch %lld, batch %lld out of range (%lld "
                                        "batches per epoch)", (long long)epoch, (long long)batch, (long long)l->nbatches);
    sample_release(&l->cur);
    l->last_n = 0;
    return l->status = reposition(l, epoch, batch);
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
int64_t nb_dataloader_num_batches(const nb_dataloader *l) {
    return no_loader("dataloader_num_batches", l) || l->it ? -1 : l->nbatches;
}
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
