/* loader.c - the batching data loader (torch.utils.data.DataLoader for a
 * tensor dataset). A batch is gathered from the dataset's tensors by the
 * backend's index_select kernel (rows picked by the epoch's order, kept as
 * an int64 tensor on the dataset's device) straight into batch tensors the
 * loader owns: no host copy of the dataset, and any dtypes. With prefetch
 * there are two sets of batch tensors: a worker thread gathers batch k+1
 * into one while the caller trains on batch k in the other (the worker
 * calls only that kernel: no scopes, no tensor allocation; after a failure
 * there nb_loader_next gathers again and reports it), so the batches are
 * the same with or without it. The worker runs on the CPU only: on a GPU
 * the gather is a kernel enqueued on the caller's current stream, which
 * already overlaps the device's work, and keeping every launch on the
 * caller's thread keeps the stream order. pin_memory changes nothing here:
 * no batch crosses from the host. The epoch's order is a Fisher-Yates shuffle whose draws
 * are Philox(key = seed, counter = (draw / 2, epoch + 1)): a pure function
 * of (seed, epoch) (nb_data_permutation, shared with the samplers).
 * With num_replicas > 1 (torch.utils.data.DistributedSampler) every rank
 * draws the same permutation of all N rows, pads it to a multiple of
 * num_replicas by repeating it from the start, and keeps every
 * num_replicas-th entry from its rank on: the shards are disjoint and
 * together cover the (padded) epoch, reshuffled each epoch from the shared
 * seed. Batch k of every rank together is batch k of a single loader with
 * batch_size * num_replicas (without padding). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_autograd.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "nb_foreach.h"

/* A set of batch tensors: x, y of a full batch and of a final short one. */
typedef struct slot {
    nb_tensor *full[2], *last[2]; /* unscoped, owned */
} slot;

struct nb_loader {
    nb_dataset *ds; /* borrowed */
    nb_loader_options o;
    int64_t n;          /* rows this loader visits per epoch (its shard's, padded) */
    int64_t nbatches, epoch, pos;
    int64_t *perm;      /* [n] dataset rows in this epoch's order (host) */
    int64_t *all;       /* [N] the whole dataset's order when sharded (else NULL) */
    nb_tensor *order;   /* the same as an int64 tensor on the dataset's device */
    slot slots[2];      /* batch k is gathered into slots[k & 1] (one slot without prefetch) */
    nb_status status;
    /* prefetch: one job at a time; mu guards job, quit, ready and the worker's failure */
    bool threaded, job, quit;
    int64_t job_batch, ready; /* batch being gathered; batch gathered (-1: none) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* ---- order and gathering ------------------------------------------------ */

static void make_perm(nb_loader *l) {
    int64_t n = l->ds->n, *p = l->all ? l->all : l->perm;
    if (l->o.shuffle) nb_data_permutation(p, n, l->o.seed, NB_DRAW_SHUFFLE, l->epoch);
    else
        for (int64_t i = 0; i < n; i++) p[i] = i;
    if (l->all) /* this rank's shard of the padded order */
        for (int64_t i = 0; i < l->n; i++) l->perm[i] = p[(l->o.rank + i * l->o.num_replicas) % n];
}

/* The epoch's order: on the host, then in the order tensor (main thread only). */
static nb_status new_order(nb_loader *l) {
    make_perm(l);
    return nb_copy_from_host(l->order, l->perm, (size_t)l->n * sizeof(int64_t));
}

static int64_t batch_rows(const nb_loader *l, int64_t k) {
    int64_t start = k * l->o.batch_size, left = l->n - start;
    return left < l->o.batch_size ? left : l->o.batch_size;
}

static nb_tensor **slot_tensors(nb_loader *l, int64_t k) {
    slot *s = &l->slots[l->threaded ? (k & 1) : 0];
    return batch_rows(l, k) == l->o.batch_size ? s->full : s->last;
}

/* Gathers batch k into its slot (index_select into the slot's tensors;
 * also called on the worker, whose scope the index view dies in). */
static nb_status gather(nb_loader *l, int64_t k) {
    nb_tensor **t = slot_tensors(l, k), *src[2] = {l->ds->x, l->ds->y};
    nb_scope *s = nb_op_scope_begin();
    int64_t rows = batch_rows(l, k);
    nb_tensor *idx = nb_tensor_view_of(l->order, 1, &rows, NULL, nb_storage_offset(l->order) + k * l->o.batch_size);
    nb_status st = idx ? NB_OK : nb_last_status();
    bool prev = nb_set_grad_enabled(false); /* batches are data, as PyTorch's DataLoader makes them */
    for (int i = 0; i < 2 && !st; i++) st = nb_index_select_out(t[i], src[i], 0, idx);
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return st;
}

/* ---- prefetch worker --------------------------------------------------- */

static void *worker(void *arg) {
    nb_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->quit && !l->job) pthread_cond_wait(&l->cv, &l->mu);
        if (l->quit) break;
        int64_t k = l->job_batch;
        pthread_mutex_unlock(&l->mu);
        nb_status st = gather(l, k);
        pthread_mutex_lock(&l->mu);
        l->job = false, l->ready = st ? -1 : k; /* a failure: nb_loader_next gathers again and reports it */
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Waits until the worker is idle; returns the batch it last gathered. */
static int64_t wait_idle(nb_loader *l) {
    if (!l->threaded) return -1;
    pthread_mutex_lock(&l->mu);
    while (l->job) pthread_cond_wait(&l->cv, &l->mu);
    int64_t r = l->ready;
    pthread_mutex_unlock(&l->mu);
    return r;
}

/* Asks the (idle) worker to gather batch k, if the epoch has one. */
static void request(nb_loader *l, int64_t k) {
    if (!l->threaded || k >= l->nbatches) return;
    pthread_mutex_lock(&l->mu);
    l->job = true, l->job_batch = k, l->ready = -1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* ---- public API -------------------------------------------------------- */

/* A NULL loader: keeps an earlier error, else records one. */
static bool no_loader(const char *op, const nb_loader *l) {
    if (l) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: loader is NULL", op);
    return true;
}

int64_t nb_loader_num_batches(const nb_loader *l) { return no_loader("loader_num_batches", l) ? -1 : l->nbatches; }
int64_t nb_loader_epoch(const nb_loader *l) { return no_loader("loader_epoch", l) ? -1 : l->epoch; }
nb_loader_options nb_loader_get_options(const nb_loader *l) {
    return no_loader("loader_get_options", l) ? (nb_loader_options){0} : l->o;
}
int64_t nb_loader_position(const nb_loader *l) { return no_loader("loader_position", l) ? -1 : l->pos; }
nb_status nb_loader_status(const nb_loader *l) {
    return no_loader("loader_status", l) ? NB_ERR_INVALID_ARG : l->status;
}

static void start_worker(nb_loader *l) {
    if (pthread_mutex_init(&l->mu, NULL)) return;
    if (pthread_cond_init(&l->cv, NULL)) {
        pthread_mutex_destroy(&l->mu);
        return;
    }
    l->threaded = pthread_create(&l->thread, NULL, worker, l) == 0;
    if (!l->threaded) pthread_cond_destroy(&l->cv), pthread_mutex_destroy(&l->mu);
}

/* The batch tensors of one slot: [rows, ...] like x and y, for a full and a short batch. */
static bool make_slot(nb_loader *l, slot *s) {
    const nb_dataset *ds = l->ds;
    int64_t rows[2] = {l->o.batch_size < l->n ? l->o.batch_size : l->n, l->n % l->o.batch_size};
    nb_tensor **dst[2] = {s->full, s->last}, *src[2] = {ds->x, ds->y};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 2; i++) {
            int64_t shape[NB_MAX_DIMS];
            memcpy(shape, nb_shape(src[i]), sizeof(int64_t) * (size_t)nb_dim(src[i]));
            shape[0] = rows[r];
            if (!(dst[r][i] = nb_tensor_new_unscoped(nb_dim(src[i]), shape, nb_dtype_of(src[i]), nb_device_of(src[i]))))
                return false;
        }
    return true;
}

nb_loader *nb_loader_new(nb_dataset *ds, nb_loader_options opts) {
    if (!ds) { /* keep the first error (e.g. a failed nb_mnist_load) */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "loader_new: dataset is NULL");
        return NULL;
    }
    if (opts.batch_size == 0) opts.batch_size = 1; /* PyTorch's default */
    if (opts.batch_size < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "loader_new: batch_size %lld < 1", (long long)opts.batch_size);
    if (opts.num_replicas < 0 || opts.rank < 0 || opts.rank >= (opts.num_replicas > 1 ? opts.num_replicas : 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "loader_new: rank %d out of range for num_replicas %d", opts.rank,
                       opts.num_replicas);
    if (opts.num_replicas > 1 && ds->n == 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "loader_new: cannot shard an empty dataset over %d replicas",
                       opts.num_replicas);
    nb_loader *l = calloc(1, sizeof *l);
    if (!l) return NB_FAIL(NB_ERR_OOM, "loader_new: out of host memory");
    bool sharded = opts.num_replicas > 1;
    int64_t bs = opts.batch_size, n = sharded ? (ds->n + opts.num_replicas - 1) / opts.num_replicas : ds->n;
    l->ds = ds, l->o = opts, l->ready = -1, l->n = n;
    l->nbatches = n / bs + (!opts.drop_last && n % bs != 0);
    l->perm = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    l->all = sharded ? malloc((size_t)ds->n * sizeof(int64_t)) : NULL;
    l->order = l->perm && (!sharded || l->all) ? nb_tensor_new_unscoped(1, &n, NB_I64, nb_device_of(ds->x)) : NULL;
    bool worker = opts.prefetch && nb_device_of(ds->x).type == NB_DEVICE_CPU;
    bool ok = l->order && make_slot(l, &l->slots[0]) && (!worker || make_slot(l, &l->slots[1]));
    if (ok && new_order(l) != NB_OK) ok = false;
    if (!ok) {
        nb_status st = nb_last_status();
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nb_last_error());
        nb_loader_free(l);
        return NB_FAIL(st ? st : NB_ERR_OOM, "loader_new: cannot make the batch tensors for batch_size %lld: %s",
                       (long long)bs, msg[0] ? msg : "out of host memory");
    }
    if (worker) start_worker(l);
    request(l, 0);
    return l;
}

void nb_loader_free(nb_loader *l) {
    if (!l) return;
    if (l->threaded) {
        wait_idle(l);
        pthread_mutex_lock(&l->mu);
        l->quit = true;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->cv), pthread_mutex_destroy(&l->mu);
    }
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 2; i++) nb_release(l->slots[s].full[i]), nb_release(l->slots[s].last[i]);
    nb_release(l->order);
    free(l->perm);
    free(l->all);
    free(l);
}

nb_status nb_loader_seek(nb_loader *l, int64_t epoch, int64_t batch) {
    if (!l) return nb_set_error(NB_ERR_INVALID_ARG, "loader_seek: NULL loader");
    if (epoch < 0 || batch < 0 || batch > l->nbatches)
        return l->status = nb_set_error(NB_ERR_INVALID_ARG,
                                        "loader_seek: epoch %lld, batch %lld out of range (%lld batches per epoch)",
                                        (long long)epoch, (long long)batch, (long long)l->nbatches);
    wait_idle(l); /* the worker reads the order */
    if (epoch != l->epoch) {
        l->epoch = epoch;
        nb_status st = new_order(l);
        if (st) return l->status = st;
    }
    l->pos = batch, l->ready = -1, l->status = NB_OK;
    request(l, batch);
    return NB_OK;
}

void nb_loader_reset(nb_loader *l) {
    if (!no_loader("loader_reset", l)) nb_loader_seek(l, l->epoch + 1, 0);
}

bool nb_loader_next(nb_loader *l, nb_batch *b) {
    if (b) memset(b, 0, sizeof *b);
    if (!l || !b) {
        nb_set_error(NB_ERR_INVALID_ARG, "loader_next: NULL argument");
        if (l) l->status = NB_ERR_INVALID_ARG;
        return false;
    }
    int64_t k = l->pos;
    if (k >= l->nbatches) return false;
    nb_status st = NB_OK;
    if (wait_idle(l) != k) st = gather(l, k); /* not prefetched (or the worker failed): gather it here */
    if (st) {
        l->status = st;
        return false;
    }
    request(l, k + 1); /* overlaps with the caller's step */
    nb_tensor **t = slot_tensors(l, k);
    b->x = t[0], b->y = t[1], b->size = batch_rows(l, k), b->index = k;
    b->indices = l->perm + k * l->o.batch_size;
    l->pos = k + 1;
    return true;
}
