/* alloc.c - the caching allocator, per device (PyTorch's CUDACachingAllocator
 * policy, in C): memory comes from the device in segments; a request takes
 * the smallest cached free block that fits on the same stream (best fit),
 * splits it when the rest is worth keeping, and freed neighbours in a
 * segment coalesce. Requests up to 1 MiB share 2 MiB segments (the small
 * pool); larger ones get a segment of 20 MiB (1-10 MiB requests) or of their
 * size rounded to 2 MiB (the large pool), which splits only when more than
 * 1 MiB would be left. A block freed while other streams may still use it
 * (nb_record_stream) waits for an event per such stream before it is
 * cached again. On a failed device allocation the allocator waits for those
 * events, the unused segments go back to the device and the request is
 * retried once. Statistics use PyTorch's
 * names (nb_core.h). The training hot path allocates from the cache only.
 *
 * Graph pools (PyTorch's private pools): while a CUDA graph is captured on
 * a stream, that stream's requests are served from segments of the graph's
 * own pool, which eager requests never share: a replay writes into that
 * memory, so nothing else may be given it while the graph lives. Blocks
 * freed during the capture are reused by later requests of the same capture
 * (replays run in the same order). A stream that joined the capture (it
 * waited on an event of the captured stream) is served from the same pool:
 * the backend tells by the capture's id. While a capture runs on the
 * device no event is queried (a query would invalidate the capture) and a
 * freed block used by other streams is put aside; its events are recorded
 * when the capture ends. When the graph is freed its pool dies:
 * its free segments go back to the device, and so does each remaining block's
 * segment once freed.
 *
 * The CPU's cache is split in CPU_ARENAS arenas, each with its own lock
 * and segments; a thread allocates from the arena it was given at its
 * first request (round robin), and a block goes back to its own arena
 * whichever thread frees it; an out-of-memory retry empties every arena's
 * cache. Graph captures (CUDA only) keep one cache per device. One lock for the CPU made tensor allocation
 * slower with every thread added (a DataLoader's workers: 278k
 * allocation rounds/s on one thread, 63k on sixteen, on the H200 host). */
#include <pthread.h>
#include <string.h>

#include "nb_impl.h"

#define ROUND 512u                         /* every block a multiple of 512 B */
#define SMALL_SIZE ((size_t)1 << 20)       /* requests up to 1 MiB: small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)    /* the small pool's segment */
#define LARGE_SEGMENT ((size_t)20 << 20)   /* a 1-10 MiB request's segment */
#define MIN_LARGE_ALLOC ((size_t)10 << 20) /* above this, a segment of the request's size */
#define ROUND_LARGE ((size_t)2 << 20)      /* ...rounded to 2 MiB */
#define NUM_BINS 64                        /* size bins: quarters of powers of two */
#define MAX_STREAM_USES 4
#define MAX_POOLS 64                       /* graphs alive at once, per device */
#define CPU_ARENAS 16                      /* the CPU cache's arenas */

typedef struct block block;
typedef struct dev_cache dev_cache;
struct block {
    char *ptr;
    size_t size;       /* bytes of the block (a multiple of ROUND) */
    void *stream;      /* the stream it was allocated on (backend handle) */
    bool small;        /* small or large pool */
    bool allocated;
    block *prev, *next; /* address neighbours in the same segment */
    block *fprev, *fnext; /* free-bin list, or the pending list */
    int n_uses;        /* other streams recorded by nb_record_stream */
    void *uses[MAX_STREAM_USES];
    void *events[MAX_STREAM_USES]; /* while pending: one event per use */
    int n_events;
    int pool;          /* 0: the shared pool; else a graph's private pool */
    dev_cache *owner;  /* the cache (the CPU: the arena) the block belongs to */
};

struct dev_cache {
    pthread_mutex_t lock;
    nb_backend *be;
    block *bins[2][NUM_BINS]; /* [small/large][bin]: free blocks */
    block *pending;           /* freed blocks waiting for their events */
    block *deferred;          /* freed during a capture, used by other streams: events not recorded yet */
    block *spare;             /* recycled block structs */
    nb_memory_stats stats;
    void *cap_stream;         /* the stream being captured into cap_pool (0: none) */
    int cap_pool;
    unsigned long long cap_id; /* the backend's id of that capture (0: not asked yet) */
    bool cap_paused;           /* requests go to the shared pool for now (nb_alloc_capture_pause) */
    int live[MAX_POOLS], n_live; /* graph pools still in use */
};

static dev_cache caches[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICES];
static dev_cache cpu_arenas[NB_MAX_DEVICES][CPU_ARENAS]; /* the CPU devices' (caches[CPU] is unused) */
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;
static _Thread_local int my_arena = -1;
static unsigned next_arena;

static void caches_init(void) {
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < NB_MAX_DEVICES; i++) pthread_mutex_init(&caches[t][i].lock, NULL);
    for (int d = 0; d < NB_MAX_DEVICES; d++)
        for (int i = 0; i < CPU_ARENAS; i++) pthread_mutex_init(&cpu_arenas[d][i].lock, NULL);
}

static dev_cache *with_backend(dev_cache *c, nb_backend *be) {
    nb_backend *unset = NULL; /* set once, by whichever thread comes first (a device's backend never changes) */
    __atomic_compare_exchange_n(&c->be, &unset, be, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return c;
}

/* The cache a request of the calling thread on be's device goes to. */
static dev_cache *cache_of(nb_backend *be) {
    pthread_once(&caches_once, caches_init);
    if (be->device.type != NB_DEVICE_CPU) return with_backend(&caches[be->device.type][be->device.index], be);
    if (my_arena < 0) my_arena = (int)(__atomic_fetch_add(&next_arena, 1, __ATOMIC_RELAXED) % CPU_ARENAS);
    return with_backend(&cpu_arenas[be->device.index][my_arena], be);
}

/* Every cache of be's device (the CPU's arenas) into out[]; returns their count. */
static int caches_of(nb_backend *be, dev_cache **out) {
    pthread_once(&caches_once, caches_init);
    if (be->device.type != NB_DEVICE_CPU) return out[0] = with_backend(&caches[be->device.type][be->device.index], be), 1;
    for (int i = 0; i < CPU_ARENAS; i++) out[i] = with_backend(&cpu_arenas[be->device.index][i], be);
    return CPU_ARENAS;
}

/* c's backend (set once by cache_of; read atomically, as threads meet here). */
static nb_backend *be_of(dev_cache *c) { return __atomic_load_n(&c->be, __ATOMIC_ACQUIRE); }

/* Bin of a size: 0 for < 1 KiB, then four bins per power of two. */
static int bin_of(size_t size) {
    if (size < 1024) return 0;
    int e = 63 - __builtin_clzll((unsigned long long)size); /* 2^e <= size */
    int q = (int)((size >> (e - 2)) & 3);
    int b = 1 + (e - 10) * 4 + q;
    return b < NUM_BINS ? b : NUM_BINS - 1;
}

static void bin_insert(dev_cache *c, block *b) {
    block **head = &c->bins[!b->small][bin_of(b->size)];
    b->fprev = NULL;
    b->fnext = *head;
    if (*head) (*head)->fprev = b;
    *head = b;
}

static void bin_remove(dev_cache *c, block *b) {
    if (b->fprev) b->fprev->fnext = b->fnext;
    else c->bins[!b->small][bin_of(b->size)] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

static block *block_new(dev_cache *c) {
    block *b = c->spare;
    if (b) c->spare = b->fnext;
    else if (!(b = malloc(sizeof *b))) return NULL;
    memset(b, 0, sizeof *b);
    b->owner = c;
    return b;
}

static void block_recycle(dev_cache *c, block *b) {
    b->fnext = c->spare;
    c->spare = b;
}

static bool pool_live(const dev_cache *c, int pool) {
    for (int i = 0; i < c->n_live; i++)
        if (c->live[i] == pool) return true;
    return false;
}

/* The smallest free block of the pool on `stream` that holds size. */
static block *best_fit(dev_cache *c, bool small, size_t size, void *stream, int pool) {
    for (int k = bin_of(size); k < NUM_BINS; k++) {
        block *best = NULL;
        for (block *b = c->bins[!small][k]; b; b = b->fnext)
            if (b->stream == stream && b->pool == pool && b->size >= size && (!best || b->size < best->size)) {
                best = b;
                if (b->size == size) return b; /* none fits better: stop scanning a long bin */
            }
        if (best) return best;
    }
    return NULL;
}

static void update_peaks(nb_memory_stats *s) {
    if (s->allocated > s->peak_allocated) s->peak_allocated = s->allocated;
    if (s->active > s->peak_active) s->peak_active = s->active;
    if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
}

/* Gives every unsplit free segment back to the device (a live graph's
 * excepted: its replays use them). */
static void release_cached(dev_cache *c) {
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < NUM_BINS; k++)
            for (block *b = c->bins[p][k], *nx; b; b = nx) {
                nx = b->fnext;
                if (b->prev || b->next) continue; /* part of a segment still in use */
                if (b->pool && pool_live(c, b->pool)) continue;
                bin_remove(c, b);
                be_of(c)->iface->free(be_of(c), b->ptr, b->size);
                c->stats.reserved -= b->size;
                c->stats.segments--;
                c->stats.device_frees++;
                block_recycle(c, b);
            }
}

/* Puts a freed block back in its bin, merged with free neighbours. */
static void free_block(dev_cache *c, block *b) {
    b->allocated = false;
    b->n_uses = 0;
    block *p = b->prev, *n = b->next;
    if (p && !p->allocated && !p->n_events) { /* absorb the left neighbour */
        bin_remove(c, p);
        p->size += b->size;
        p->next = n;
        if (n) n->prev = p;
        block_recycle(c, b);
        b = p;
    }
    if (n && !n->allocated && !n->n_events) { /* absorb the right neighbour */
        bin_remove(c, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        block_recycle(c, n);
    }
    if (b->pool && !b->prev && !b->next && !pool_live(c, b->pool)) { /* a dead graph's whole segment */
        be_of(c)->iface->free(be_of(c), b->ptr, b->size);
        c->stats.reserved -= b->size;
        c->stats.segments--;
        c->stats.device_frees++;
        block_recycle(c, b);
        return;
    }
    bin_insert(c, b);
}

/* Frees the pending blocks whose events have all completed (wait: after
 * waiting for them). A device that failed leaves its blocks pending. Never
 * while a capture runs on the device. */
static void process_events(dev_cache *c, bool wait) {
    nb_status prev = nb_last_status();
    for (block *b = c->pending, *nx; b; b = nx) {
        nx = b->fnext;
        bool done = true;
        for (int i = 0; i < b->n_events && done; i++)
            done = wait ? be_of(c)->iface->event_synchronize(be_of(c), b->events[i]) == NB_OK
                        : be_of(c)->iface->event_query(be_of(c), b->events[i]) == 1;
        if (!done) {
            if (prev == NB_OK) nb_clear_error(); /* the device's fault is reported by its next call */
            continue;
        }
        for (int i = 0; i < b->n_events; i++) be_of(c)->iface->event_destroy(be_of(c), b->events[i]);
        b->n_events = 0;
        if (b->fprev) b->fprev->fnext = b->fnext;
        else c->pending = b->fnext;
        if (b->fnext) b->fnext->fprev = b->fprev;
        c->stats.active -= b->size;
        free_block(c, b);
    }
}

/* The pool a request on `stream` takes: the capture's when stream is the
 * captured stream or joined its capture, else the shared pool. Lock held. */
static int capture_pool(dev_cache *c, void *stream) {
    if (!c->cap_pool || c->cap_paused) return 0;
    if (stream == c->cap_stream) return c->cap_pool;
    nb_backend *be = be_of(c);
    if (!be->iface->stream_capture_id) return 0;
    if (!c->cap_id) c->cap_id = be->iface->stream_capture_id(be, c->cap_stream);
    return c->cap_id && be->iface->stream_capture_id(be, stream) == c->cap_id ? c->cap_pool : 0;
}

static void record_uses(dev_cache *c, block *b);

void *nb_alloc_raw(nb_backend *be, size_t bytes, void *stream, void **handle) {
    dev_cache *c = cache_of(be);
    if (bytes > ((size_t)1 << 62)) return NB_FAIL(NB_ERR_OOM, "alloc: %zu bytes is too large", bytes);
    size_t size = bytes ? (bytes + ROUND - 1) / ROUND * ROUND : ROUND;
    bool small = size <= SMALL_SIZE;
    pthread_mutex_lock(&c->lock);
    if (c->pending && !c->cap_pool) process_events(c, false);
    const int pool = capture_pool(c, stream);
    block *b = best_fit(c, small, size, stream, pool);
    if (b) bin_remove(c, b);
    else { /* a new segment */
        size_t seg = small ? SMALL_SEGMENT : size <= MIN_LARGE_ALLOC ? LARGE_SEGMENT
                                                   : (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
        void *p = NULL;
        nb_status st = be->iface->alloc(be, seg, &p);
        if (st == NB_ERR_OOM && !c->cap_pool) { /* give the cache back and try once more (not while capturing) */
            c->stats.num_alloc_retries++;
            if (c->pending) process_events(c, true);
            release_cached(c);
            if (be->device.type == NB_DEVICE_CPU) { /* the other arenas' too, one lock at a time */
                pthread_mutex_unlock(&c->lock);
                dev_cache *cs[CPU_ARENAS];
                int n = caches_of(be, cs);
                for (int i = 0; i < n; i++) {
                    if (cs[i] == c) continue;
                    pthread_mutex_lock(&cs[i]->lock);
                    release_cached(cs[i]);
                    pthread_mutex_unlock(&cs[i]->lock);
                }
                pthread_mutex_lock(&c->lock);
            }
            st = be->iface->alloc(be, seg, &p);
        }
        if (st != NB_OK && st != NB_ERR_OOM) { /* not a lack of memory: the backend's error stands */
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        b = st == NB_OK ? block_new(c) : NULL;
        if (!b) {
            if (st == NB_OK) be->iface->free(be, p, seg);
            c->stats.num_ooms++;
            pthread_mutex_unlock(&c->lock);
            nb_memory_stats all = nb_memory_stats_get(be->device); /* the CPU: every arena's */
            size_t alloc = all.allocated, res = all.reserved;
            char d[32];
            return NB_FAIL(NB_ERR_OOM,
                           "alloc: out of memory allocating %zu bytes on %s (%zu bytes allocated, %zu reserved "
                           "by nabla)", bytes, nb_device_str(be->device, d, sizeof d), alloc, res);
        }
        b->ptr = p, b->size = seg, b->stream = stream, b->small = small, b->pool = pool;
        c->stats.reserved += seg;
        c->stats.segments++;
        c->stats.device_allocs++;
    }
    size_t rest = b->size - size;
    if (small ? rest >= ROUND : rest > SMALL_SIZE) { /* split: the tail stays cached */
        block *t = block_new(c);
        if (t) {
            t->ptr = b->ptr + size, t->size = rest, t->stream = stream, t->small = b->small, t->pool = b->pool;
            t->prev = b, t->next = b->next;
            if (b->next) b->next->prev = t;
            b->next = t;
            b->size = size;
            bin_insert(c, t);
        }
    }
    b->allocated = true;
    b->n_uses = 0;
    c->stats.allocated += b->size;
    c->stats.active += b->size;
    update_peaks(&c->stats);
    pthread_mutex_unlock(&c->lock);
    *handle = b;
    return b->ptr;
}

void nb_free_raw(nb_backend *be, void *handle) {
    block *b = handle;
    if (!b) return;
    (void)be;
    if (nb_fuse_on) nb_fuse_note_free(b->ptr, b->size); /* recorded writes to it need not happen */
    dev_cache *c = b->owner; /* the CPU: maybe another thread's arena */
    pthread_mutex_lock(&c->lock);
    c->stats.allocated -= b->size;
    if (b->n_uses && c->cap_pool) { /* no event may be recorded or waited on now: after the capture */
        b->allocated = false;
        b->n_events = -1; /* not free yet: its neighbours must not absorb it */
        b->fprev = NULL;
        b->fnext = c->deferred;
        c->deferred = b;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    record_uses(c, b);
    pthread_mutex_unlock(&c->lock);
}

/* A freed block used by other streams waits for an event per stream (the
 * pending list); without events, the wait is now. Lock held. */
static void record_uses(dev_cache *c, block *b) {
    nb_backend *be = be_of(c);
    int n = 0;
    for (int i = 0; i < b->n_uses; i++) { /* one event per other stream that used it */
        void *ev = be->iface->event_create(be);
        if (ev && be->iface->event_record(be, ev, b->uses[i]) == NB_OK) b->events[n++] = ev;
        else {
            if (ev) be->iface->event_destroy(be, ev);
            be->iface->stream_synchronize(be, b->uses[i]); /* no event: wait now instead */
        }
    }
    b->n_uses = 0;
    if (n) {
        b->n_events = n;
        b->allocated = false;
        b->fprev = NULL;
        b->fnext = c->pending;
        if (c->pending) c->pending->fprev = b;
        c->pending = b;
    } else {
        b->n_events = 0;
        c->stats.active -= b->size;
        free_block(c, b);
    }
}

nb_status nb_alloc_capture_begin(nb_backend *be, void *stream, int pool) {
    dev_cache *c = cache_of(be);
    pthread_mutex_lock(&c->lock);
    nb_status st = NB_OK;
    if (c->cap_pool) st = nb_set_error(NB_ERR_STATE, "graph_capture_begin: a capture is already under way on this device");
    else if (c->n_live == MAX_POOLS && !pool_live(c, pool))
        st = nb_set_error(NB_ERR_STATE, "graph_capture_begin: %d graphs are alive on this device (the most)", MAX_POOLS);
    else {
        c->cap_stream = stream, c->cap_pool = pool;
        if (!pool_live(c, pool)) c->live[c->n_live++] = pool; /* resumed captures keep their one entry */
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void nb_alloc_capture_end(nb_backend *be) {
    dev_cache *c = cache_of(be);
    pthread_mutex_lock(&c->lock);
    c->cap_stream = NULL, c->cap_pool = 0, c->cap_id = 0, c->cap_paused = false;
    for (block *b = c->deferred, *nx; b; b = nx) { /* the capture is over: their events now */
        nx = b->fnext;
        b->fnext = NULL;
        record_uses(c, b);
    }
    c->deferred = NULL;
    pthread_mutex_unlock(&c->lock);
}

void nb_alloc_capture_pause(nb_backend *be, bool paused) {
    dev_cache *c = cache_of(be);
    pthread_mutex_lock(&c->lock);
    c->cap_paused = paused;
    pthread_mutex_unlock(&c->lock);
}

void nb_alloc_pool_release(nb_backend *be, int pool) {
    dev_cache *c = cache_of(be);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n_live; i++)
        if (c->live[i] == pool) c->live[i] = c->live[--c->n_live];
    for (int p = 0; p < 2; p++) /* its free whole segments go back now; the rest when freed */
        for (int k = 0; k < NUM_BINS; k++)
            for (block *b = c->bins[p][k], *nx; b; b = nx) {
                nx = b->fnext;
                if (b->pool != pool || b->prev || b->next) continue;
                bin_remove(c, b);
                be_of(c)->iface->free(be_of(c), b->ptr, b->size);
                c->stats.reserved -= b->size;
                c->stats.segments--;
                c->stats.device_frees++;
                block_recycle(c, b);
            }
    pthread_mutex_unlock(&c->lock);
}

nb_status nb_alloc_record_stream(nb_backend *be, void *handle, void *stream) {
    block *b = handle;
    if (!b || stream == b->stream) return NB_OK;
    (void)be;
    dev_cache *c = b->owner;
    pthread_mutex_lock(&c->lock);
    bool known = false;
    for (int i = 0; i < b->n_uses; i++) known |= b->uses[i] == stream;
    nb_status st = NB_OK;
    if (!known && b->n_uses == MAX_STREAM_USES)
        st = nb_set_error(NB_ERR_INVALID_ARG, "record_stream: a tensor may be recorded on at most %d other streams",
                          MAX_STREAM_USES);
    else if (!known) b->uses[b->n_uses++] = stream;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- statistics ------------------------------------------------------------------- */

/* Every cache of dev into out[] (their count; 0 for a device that is not there). */
static int caches_of_dev(nb_device dev, dev_cache **out) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT || (unsigned)dev.index >= NB_MAX_DEVICES) return 0;
    nb_status st = nb_last_status();
    nb_backend *be = nb_backend_get(dev);
    if (!be) {
        if (st == NB_OK) nb_clear_error();
        return 0;
    }
    return caches_of(be, out);
}

nb_memory_stats nb_memory_stats_get(nb_device dev) {
    nb_memory_stats s = {0};
    dev_cache *cs[CPU_ARENAS];
    int n = caches_of_dev(dev, cs);
    for (int i = 0; i < n; i++) { /* the CPU's arenas add up (their peaks too: an upper bound) */
        pthread_mutex_lock(&cs[i]->lock);
        nb_memory_stats c = cs[i]->stats;
        pthread_mutex_unlock(&cs[i]->lock);
        s.allocated += c.allocated, s.reserved += c.reserved, s.active += c.active;
        s.peak_allocated += c.peak_allocated, s.peak_reserved += c.peak_reserved, s.peak_active += c.peak_active;
        s.segments += c.segments, s.device_allocs += c.device_allocs, s.device_frees += c.device_frees;
        s.num_alloc_retries += c.num_alloc_retries, s.num_ooms += c.num_ooms;
    }
    return s;
}

void nb_memory_reset_peak(nb_device dev) {
    dev_cache *cs[CPU_ARENAS];
    int n = caches_of_dev(dev, cs);
    for (int i = 0; i < n; i++) {
        dev_cache *c = cs[i];
        pthread_mutex_lock(&c->lock);
        c->stats.peak_allocated = c->stats.allocated;
        c->stats.peak_active = c->stats.active;
        c->stats.peak_reserved = c->stats.reserved;
        pthread_mutex_unlock(&c->lock);
    }
}

void nb_memory_empty_cache(nb_device dev) {
    dev_cache *cs[CPU_ARENAS];
    int n = caches_of_dev(dev, cs);
    for (int i = 0; i < n; i++) {
        dev_cache *c = cs[i];
        pthread_mutex_lock(&c->lock);
        if (c->pending && !c->cap_pool) process_events(c, false);
        release_cached(c);
        pthread_mutex_unlock(&c->lock);
    }
}
