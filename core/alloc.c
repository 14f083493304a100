/* alloc.c - the caching allocator: per device, freed blocks are kept in
 * size classes and reused, so the training hot path does not call the
 * device allocator (malloc, cudaMalloc) per op. Sizes round up to classes
 * of a quarter of their power of two (at most 25% slack). Statistics as
 * torch.cuda.memory_allocated / memory_reserved / max_memory_allocated. */
#include <pthread.h>
#include <string.h>

#include "nb_impl.h"

#define NB_MAX_DEVICE_INDEX 16
#define NB_NUM_CLASSES 256

typedef struct {
    void **ptrs;
    int len, cap;
} free_list;

typedef struct {
    pthread_mutex_t lock;
    free_list classes[NB_NUM_CLASSES];
    nb_memory_stats stats;
} dev_cache;

static dev_cache caches[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICE_INDEX];
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;

static void caches_init(void) {
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < NB_MAX_DEVICE_INDEX; i++) pthread_mutex_init(&caches[t][i].lock, NULL);
}

static dev_cache *cache_of(nb_device dev) {
    pthread_once(&caches_once, caches_init);
    NB_ASSERT((unsigned)dev.type < NB_DEVICE_TYPE_COUNT && (unsigned)dev.index < NB_MAX_DEVICE_INDEX);
    return &caches[dev.type][dev.index];
}

/* Size class: 256-byte minimum, then quarters of each power of two. */
static int size_class(size_t bytes, size_t *rounded) {
    if (bytes <= 256) {
        *rounded = 256;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t quarter = (size_t)1 << (e - 2);
    size_t q = (bytes - ((size_t)1 << e) + quarter - 1) / quarter; /* 1..4 */
    *rounded = ((size_t)1 << e) + q * quarter;
    return 1 + (e - 8) * 4 + (int)(q - 1);
}

static void *pop_cached(dev_cache *c, int cls) {
    free_list *fl = &c->classes[cls];
    return fl->len ? fl->ptrs[--fl->len] : NULL;
}

/* The rounded size of every block in class k (inverse of size_class). */
static size_t class_size(int k) {
    if (k == 0) return 256;
    int e = (k - 1) / 4 + 8, q = (k - 1) % 4 + 1;
    return ((size_t)1 << e) + (size_t)q * ((size_t)1 << (e - 2));
}

static void release_cached(nb_backend *be, dev_cache *c) {
    for (int k = 0; k < NB_NUM_CLASSES; k++) {
        free_list *fl = &c->classes[k];
        for (int i = 0; i < fl->len; i++) {
            be->iface->free(be, fl->ptrs[i], class_size(k));
            c->stats.reserved -= class_size(k);
        }
        fl->len = 0;
    }
}

void *nb_alloc_raw(nb_backend *be, nb_device dev, size_t bytes, size_t *rounded) {
    dev_cache *c = cache_of(dev);
    int cls = size_class(bytes, rounded);
    if (cls >= NB_NUM_CLASSES) return NB_FAIL(NB_ERR_OOM, "alloc: %zu bytes is too large", bytes);
    pthread_mutex_lock(&c->lock);
    void *p = pop_cached(c, cls);
    if (!p) {
        p = be->iface->alloc(be, *rounded);
        if (!p) { /* give the cache back and try once more */
            release_cached(be, c);
            p = be->iface->alloc(be, *rounded);
        }
        if (p) {
            c->stats.reserved += *rounded;
            c->stats.device_allocs++;
        }
    }
    if (p) {
        c->stats.allocated += *rounded;
        if (c->stats.allocated > c->stats.peak_allocated) c->stats.peak_allocated = c->stats.allocated;
    }
    pthread_mutex_unlock(&c->lock);
    if (!p) return NB_FAIL(NB_ERR_OOM, "alloc: out of memory allocating %zu bytes on %s", bytes, be->name);
    return p;
}

void nb_free_raw(nb_backend *be, nb_device dev, void *ptr, size_t rounded) {
    if (!ptr) return;
    dev_cache *c = cache_of(dev);
    size_t r;
    int cls = size_class(rounded, &r);
    NB_ASSERT(r == rounded);
    pthread_mutex_lock(&c->lock);
    free_list *fl = &c->classes[cls];
    if (fl->len == fl->cap) {
        int cap = fl->cap ? fl->cap * 2 : 8;
        void **np = realloc(fl->ptrs, sizeof(void *) * (size_t)cap);
        if (!np) { /* cannot cache it: give it back */
            be->iface->free(be, ptr, rounded);
            c->stats.reserved -= rounded;
            c->stats.allocated -= rounded;
            pthread_mutex_unlock(&c->lock);
            return;
        }
        fl->ptrs = np, fl->cap = cap;
    }
    fl->ptrs[fl->len++] = ptr;
    c->stats.allocated -= rounded;
    pthread_mutex_unlock(&c->lock);
}

nb_memory_stats nb_memory_stats_get(nb_device dev) {
    nb_memory_stats s = {0};
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT || (unsigned)dev.index >= NB_MAX_DEVICE_INDEX) return s;
    dev_cache *c = cache_of(dev);
    pthread_mutex_lock(&c->lock);
    s = c->stats;
    pthread_mutex_unlock(&c->lock);
    return s;
}

void nb_memory_reset_peak(nb_device dev) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT || (unsigned)dev.index >= NB_MAX_DEVICE_INDEX) return;
    dev_cache *c = cache_of(dev);
    pthread_mutex_lock(&c->lock);
    c->stats.peak_allocated = c->stats.allocated;
    pthread_mutex_unlock(&c->lock);
}

void nb_memory_empty_cache(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return;
    dev_cache *c = cache_of(dev);
    pthread_mutex_lock(&c->lock);
    release_cached(be, c);
    pthread_mutex_unlock(&c->lock);
}
