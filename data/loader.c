/* loader.c - the batching data loader (torch.utils.data.DataLoader for a
 * tensor dataset). A batch is gathered on the host from the dataset's host
 * copy into one of two host slots, then copied into batch tensors that are
 * created once and reused: on any device that copy is the only transfer.
 * With prefetch, a worker thread gathers batch k+1 into the other slot while
 * the caller trains on batch k; the worker only touches host memory (no
 * tensor API, no nb_set_error), so the batches are the same with or
 * without it. The epoch's order is a Fisher-Yates shuffle whose draws are
 * Philox(key = seed, counter = (draw / 2, epoch + 1)): a pure function of
 * (seed, epoch), and disjoint from the tensor fills (counter high word 0).
 *
 * pin_memory: the two host slots are page-locked and each has its own batch
 * tensors; batch k is uploaded into slot k & 1's tensors on the device's copy
 * stream, after the device is done with batch k-2 (event consumed[k & 1])
 * and before the compute stream uses it (event copied[k & 1]); a host slot
 * is gathered into again only after its last upload completed. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_impl.h"
#include "philox.h"

typedef struct slot {
    float *x;   /* [cap, row] */
    int64_t *y; /* [cap] */
} slot;

struct nb_loader {
    nb_dataset *ds; /* borrowed */
    nb_loader_options o;
    int64_t nbatches, epoch, pos;
    int64_t cap;        /* rows per slot: min(batch_size, n) */
    int64_t *perm;      /* [n] dataset rows in this epoch's order */
    slot slots[2];      /* batch k is gathered into slots[k & 1] */
    /* [slot][x, y] of a full batch and of a final short batch (created on
     * first use; slot k & 1 with pin_memory, else slot 0) */
    nb_tensor *full[2][2], *last[2][2];
    nb_device dev;                         /* the dataset's */
    bool pinned;                           /* pin_memory: the slots came from nb_host_alloc */
    nb_event *copied[2], *consumed[2];    /* pin_memory: per slot (NULL: not needed yet) */
    nb_status status;
    /* prefetch: one job at a time; mu guards job, quit and ready */
    bool threaded, job, quit;
    int64_t job_batch, ready; /* batch being gathered; batch gathered (-1: none) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* ---- order and gathering (host only; safe on the worker) -------------- */

static void make_perm(nb_loader *l) {
    int64_t n = l->ds->n;
    for (int64_t i = 0; i < n; i++) l->perm[i] = i;
    if (!l->o.shuffle) return;
    nb_philox_u4 r = {{0}};
    for (int64_t i = n - 1, d = 0; i > 0; i--, d++) {
        if (d % 2 == 0) r = nb_philox4x32_10((uint64_t)d / 2, (uint64_t)l->epoch + 1, l->o.seed);
        int w = (int)(d % 2) * 2;
        uint64_t bits = (uint64_t)r.v[w] << 32 | r.v[w + 1];
        int64_t j = (int64_t)(bits % (uint64_t)(i + 1));
        int64_t t = l->perm[i];
        l->perm[i] = l->perm[j], l->perm[j] = t;
    }
}

static int64_t batch_rows(const nb_loader *l, int64_t k) {
    int64_t start = k * l->o.batch_size, left = l->ds->n - start;
    return left < l->o.batch_size ? left : l->o.batch_size;
}

static void gather(nb_loader *l, int64_t k) {
    const nb_dataset *ds = l->ds;
    slot *s = &l->slots[k & 1];
    const int64_t *idx = l->perm + k * l->o.batch_size;
    int64_t rows = batch_rows(l, k);
    size_t rb = (size_t)ds->row * sizeof(float);
    for (int64_t j = 0; j < rows; j++) {
        memcpy(s->x + j * ds->row, ds->hx + idx[j] * ds->row, rb);
        s->y[j] = ds->hy[idx[j]];
    }
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
        gather(l, k);
        pthread_mutex_lock(&l->mu);
        l->job = false, l->ready = k;
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

/* pin_memory: waits until host slot s's last upload has completed, so it
 * can be gathered into again (usually long done: it was batch k-2's). */
static nb_status slot_free(nb_loader *l, int s) {
    return l->pinned && l->copied[s] ? nb_event_synchronize(l->copied[s]) : NB_OK;
}

/* Asks the (idle) worker to gather batch k, if the epoch has one. */
static void request(nb_loader *l, int64_t k) {
    if (!l->threaded || k >= l->nbatches) return;
    if (slot_free(l, (int)(k & 1)) != NB_OK) return; /* gathered in nb_loader_next instead */
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

nb_loader *nb_loader_new(nb_dataset *ds, nb_loader_options opts) {
    if (!ds) { /* keep the first error (e.g. a failed nb_mnist_load) */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "loader_new: dataset is NULL");
        return NULL;
    }
    if (opts.batch_size < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "loader_new: batch_size %lld < 1", (long long)opts.batch_size);
    nb_loader *l = calloc(1, sizeof *l);
    if (!l) return NB_FAIL(NB_ERR_OOM, "loader_new: out of host memory");
    int64_t n = ds->n, bs = opts.batch_size;
    l->ds = ds, l->o = opts, l->ready = -1;
    l->nbatches = n / bs + (!opts.drop_last && n % bs != 0);
    l->cap = bs < n ? bs : n;
    size_t cap = (size_t)(l->cap ? l->cap : 1), row = (size_t)(ds->row ? ds->row : 1);
    l->perm = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    bool ok = l->perm != NULL;
    l->dev = nb_device_of(ds->x);
    l->pinned = opts.pin_memory;
    for (int s = 0; s < (opts.prefetch || l->pinned ? 2 : 1) && ok; s++) {
        if (l->pinned) {
            l->slots[s].x = nb_host_alloc(l->dev, cap * row * sizeof(float));
            l->slots[s].y = nb_host_alloc(l->dev, cap * sizeof(int64_t));
        } else {
            l->slots[s].x = malloc(cap * row * sizeof(float));
            l->slots[s].y = malloc(cap * sizeof(int64_t));
        }
        ok = l->slots[s].x && l->slots[s].y;
    }
    for (int s = 0; s < 2 && ok && l->pinned; s++) {
        l->copied[s] = nb_event_new(l->dev);
        l->consumed[s] = nb_event_new(l->dev);
        ok = l->copied[s] && l->consumed[s];
    }
    if (!ok) {
        nb_loader_free(l);
        return NB_FAIL(NB_ERR_OOM, "loader_new: cannot allocate %shost buffers or events for batch_size %lld",
                       opts.pin_memory ? "pinned " : "", (long long)bs);
    }
    if (!opts.prefetch && !l->pinned) l->slots[1] = l->slots[0]; /* one buffer, used for every batch */
    make_perm(l);
    if (opts.prefetch) start_worker(l);
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
    if (l->pinned) nb_device_synchronize(l->dev); /* no upload may still read the host slots */
    int nslots = l->slots[1].x == l->slots[0].x ? 1 : 2;
    for (int s = 0; s < nslots; s++) {
        if (l->pinned) nb_host_free(l->dev, l->slots[s].x), nb_host_free(l->dev, l->slots[s].y);
        else free(l->slots[s].x), free(l->slots[s].y);
    }
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 2; i++) nb_release(l->full[s][i]), nb_release(l->last[s][i]);
        nb_event_free(l->copied[s]), nb_event_free(l->consumed[s]);
    }
    free(l->perm);
    free(l);
}

nb_status nb_loader_seek(nb_loader *l, int64_t epoch, int64_t batch) {
    if (!l) return nb_set_error(NB_ERR_INVALID_ARG, "loader_seek: NULL loader");
    if (epoch < 0 || batch < 0 || batch > l->nbatches)
        return l->status = nb_set_error(NB_ERR_INVALID_ARG,
                                        "loader_seek: epoch %lld, batch %lld out of range (%lld batches per epoch)",
                                        (long long)epoch, (long long)batch, (long long)l->nbatches);
    wait_idle(l); /* the worker reads perm */
    if (epoch != l->epoch) {
        l->epoch = epoch;
        make_perm(l);
    }
    l->pos = batch, l->ready = -1, l->status = NB_OK;
    request(l, batch);
    return NB_OK;
}

void nb_loader_reset(nb_loader *l) {
    if (!no_loader("loader_reset", l)) nb_loader_seek(l, l->epoch + 1, 0);
}

/* Slot sl's tensors for a batch of `rows` rows, created on first use
 * (*created set then). */
static nb_status batch_tensors(nb_loader *l, int sl, int64_t rows, nb_tensor ***out, bool *created) {
    nb_tensor **t = rows == l->o.batch_size ? l->full[sl] : l->last[sl];
    *out = t;
    *created = false;
    if (t[0]) return NB_OK;
    *created = true;
    const nb_tensor *x = l->ds->x;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, nb_shape(x), sizeof(int64_t) * (size_t)nb_dim(x));
    shape[0] = rows;
    t[0] = nb_tensor_new_unscoped(nb_dim(x), shape, NB_F32, l->dev);
    t[1] = t[0] ? nb_tensor_new_unscoped(1, &rows, NB_I64, l->dev) : NULL;
    nb_status st = t[1] ? NB_OK : nb_last_status() ? nb_last_status() : NB_ERR_OOM;
    /* written on the copy stream: their memory waits for it when freed */
    for (int i = 0; i < 2 && st == NB_OK && l->pinned; i++) st = nb_record_stream(t[i], nb_stream_copy(l->dev));
    if (st == NB_OK) return NB_OK;
    nb_release(t[0]), nb_release(t[1]);
    t[0] = t[1] = NULL;
    return st;
}

/* pin_memory: uploads host slot sl into t on the copy stream, ordered after
 * the device's use of batch k-2 (the same tensors) and before the compute
 * stream's use of batch k. Tensors just created wait for everything
 * enqueued on the compute stream so far: their memory came from the
 * compute stream's cache, and work already enqueued there may still use it
 * (a block freed by the step before). */
static nb_status upload_async(nb_loader *l, int sl, nb_tensor **t, int64_t rows, bool created) {
    nb_stream *compute = nb_current_stream(l->dev), *copy = nb_stream_copy(l->dev);
    if (!compute || !copy) return nb_last_status();
    /* everything enqueued so far includes every use of batch k-1 */
    nb_status st = nb_event_record(l->consumed[sl ^ 1], compute);
    if (!st) st = nb_stream_wait_event(copy, l->consumed[created ? sl ^ 1 : sl]);
    if (!st) st = nb_copy_from_host_async(t[0], l->slots[sl].x, (size_t)(rows * l->ds->row) * sizeof(float), copy);
    if (!st) st = nb_copy_from_host_async(t[1], l->slots[sl].y, (size_t)rows * sizeof(int64_t), copy);
    if (!st) st = nb_event_record(l->copied[sl], copy);
    if (!st) st = nb_stream_wait_event(compute, l->copied[sl]);
    return st;
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
    int sl = (int)(k & 1);
    nb_status st = NB_OK;
    if (wait_idle(l) != k) { /* not prefetched: gather it here */
        st = slot_free(l, sl);
        if (!st) gather(l, k);
    }
    if (!st) request(l, k + 1); /* overlaps with the upload and the caller's step */
    int64_t rows = batch_rows(l, k);
    nb_tensor **t = NULL;
    const slot *s = &l->slots[sl];
    bool created = false;
    if (!st) st = batch_tensors(l, l->pinned ? sl : 0, rows, &t, &created);
    if (!st && l->pinned) st = upload_async(l, sl, t, rows, created);
    if (!st && !l->pinned) st = nb_copy_from_host(t[0], s->x, (size_t)(rows * l->ds->row) * sizeof(float));
    if (!st && !l->pinned) st = nb_copy_from_host(t[1], s->y, (size_t)rows * sizeof(int64_t));
    l->status = st;
    if (st) return false;
    b->x = t[0], b->y = t[1], b->size = rows, b->index = k;
    b->indices = l->perm + k * l->o.batch_size;
    l->pos = k + 1;
    return true;
}
