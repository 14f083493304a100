/* threadpool.c - the persistent thread pool behind nb_cpu_parallel_for, and the
 * one thread count (nb_cpu_set_num_threads) that nabla's loops and OpenBLAS
 * share. Workers are created lazily, live for the process, and sleep on a
 * condition variable between jobs (after a short poll, see spin_new_job); a
 * job is published by bumping a generation counter under the pool lock.
 * Only one user thread at a time owns the workers (a trylock); others run
 * their loops serially, which is always correct because every kernel is
 * written for any partition. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "blas.h"
#include "nb_impl.h"
#include "threadpool.h"

#define NB_POOL_MAX_THREADS 256

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* workers wait here for a new generation */
    pthread_cond_t done; /* the owner waits here for pending == 0 */
    pthread_mutex_t busy; /* held by the user thread whose job is running */
    int nworkers;         /* started workers; worker i runs chunk i + 1 */
    atomic_uint_fast64_t generation; /* bumped (under lock) once per job */
    /* the current job, written under lock before its generation is published */
    nb_cpu_range_fn fn;
    void *ctx;
    int64_t n;
    int chunks;
    atomic_int pending; /* worker chunks not yet finished (decremented under lock) */
} pool;

static pool P = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .busy = PTHREAD_MUTEX_INITIALIZER,
};
static atomic_int num_threads; /* 0 until pool_init */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local bool in_parallel; /* inside a chunk: nested calls run serially */

void nb_cpu_flush_denormals(void) {
#if defined(__x86_64__) || defined(__SSE__)
    _mm_setcsr(_mm_getcsr() | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
#endif
}

/* Waiting: a waiter first polls for up to NB_POOL_SPIN_NS (a futex wake-up
 * costs ~20 us on a VM, more than a small kernel), then sleeps on its
 * condition variable. The poll is kept short because OpenBLAS's threads run
 * on the same cores between our jobs. */
#ifndef NB_POOL_SPIN_NS
#define NB_POOL_SPIN_NS 10000
#endif

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__SSE__)
    _mm_pause();
#endif
}

/* Polls until *gen != seen (true) or the spin time is over (false). */
static bool spin_new_job(uint64_t seen) {
    int64_t until = now_ns() + NB_POOL_SPIN_NS;
    for (;;) {
        for (int i = 0; i < 32; i++) {
            if (atomic_load_explicit(&P.generation, memory_order_acquire) != seen) return true;
            cpu_relax();
        }
        if (now_ns() > until) return false;
    }
}

static void spin_done(void) {
    int64_t until = now_ns() + NB_POOL_SPIN_NS;
    for (;;) {
        for (int i = 0; i < 32; i++) {
            if (atomic_load_explicit(&P.pending, memory_order_acquire) == 0) return;
            cpu_relax();
        }
        if (now_ns() > until) return;
    }
}

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > NB_POOL_MAX_THREADS ? NB_POOL_MAX_THREADS : (int)n;
}

static int clamp_threads(int n) {
    if (n <= 0) return online_cores();
    return n > NB_POOL_MAX_THREADS ? NB_POOL_MAX_THREADS : n;
}

/* After fork() only the forking thread exists in the child: forget the
 * workers and re-create the locks (they may have been held). */
static void pool_atfork_child(void) {
    pthread_mutex_init(&P.lock, NULL);
    pthread_mutex_init(&P.busy, NULL);
    pthread_cond_init(&P.wake, NULL);
    pthread_cond_init(&P.done, NULL);
    P.nworkers = 0;
    atomic_store(&P.pending, 0);
    in_parallel = false;
}

static void pool_init(void) {
    const char *env = getenv("NB_NUM_THREADS");
    int n = 0;
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == 0 && v > 0 && v <= NB_POOL_MAX_THREADS) n = (int)v;
    }
    atomic_store(&num_threads, clamp_threads(n));
    nb_cpu_flush_denormals();
    pthread_atfork(NULL, NULL, pool_atfork_child);
}

int nb_cpu_get_num_threads(void) {
    pthread_once(&pool_once, pool_init);
    return atomic_load(&num_threads);
}

void nb_cpu_set_num_threads(int n) {
    pthread_once(&pool_once, pool_init);
    n = clamp_threads(n);
    atomic_store(&num_threads, n);
    nb_cpu_blas_set_num_threads(n); /* keeps OpenBLAS equal (if loaded) */
}

/* Chunk i of k over [0, n): sizes differ by at most one. */
static int64_t chunk_begin(int64_t n, int k, int i) {
    return (n / k) * i + (i < n % k ? i : n % k);
}

typedef struct worker_arg {
    int id;
    uint64_t gen0; /* the generation when it was started: jobs after it are its own */
} worker_arg;

static void *worker_main(void *argp) {
    worker_arg arg = *(worker_arg *)argp;
    free(argp);
    nb_cpu_flush_denormals();
    in_parallel = true;
    uint64_t seen = arg.gen0;
    int chunk = arg.id + 1;
    for (;;) {
        bool fresh = spin_new_job(seen);
        pthread_mutex_lock(&P.lock);
        if (!fresh)
            while (atomic_load(&P.generation) == seen) pthread_cond_wait(&P.wake, &P.lock);
        seen = atomic_load(&P.generation);
        nb_cpu_range_fn fn = P.fn;
        void *ctx = P.ctx;
        int64_t n = P.n;
        int k = P.chunks;
        pthread_mutex_unlock(&P.lock);
        if (chunk >= k) continue;
        fn(ctx, chunk_begin(n, k, chunk), chunk_begin(n, k, chunk + 1));
        pthread_mutex_lock(&P.lock);
        if (atomic_fetch_sub(&P.pending, 1) == 1) pthread_cond_signal(&P.done);
        pthread_mutex_unlock(&P.lock);
    }
    return NULL;
}

/* Starts workers until `want` exist (called with P.lock held, before the
 * job's generation is published); returns how many exist. */
static int ensure_workers(int want) {
    while (P.nworkers < want) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) break;
        arg->id = P.nworkers;
        arg->gen0 = atomic_load(&P.generation);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t th;
        int rc = pthread_create(&th, &attr, worker_main, arg);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            free(arg);
            break;
        }
        P.nworkers++;
    }
    return P.nworkers;
}

void nb_cpu_parallel_for(int64_t n, int64_t grain, nb_cpu_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = nb_cpu_get_num_threads();
    int64_t k64 = n / grain;
    int k = k64 < 1 ? 1 : k64 > nt ? nt : (int)k64;
    if (k == 1 || in_parallel || pthread_mutex_trylock(&P.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&P.lock);
    int have = ensure_workers(k - 1);
    if (have < k - 1) k = have + 1; /* could not start more threads: use fewer */
    P.fn = fn, P.ctx = ctx, P.n = n, P.chunks = k;
    atomic_store(&P.pending, k - 1);
    atomic_fetch_add(&P.generation, 1);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);

    in_parallel = true;
    fn(ctx, 0, chunk_begin(n, k, 1));
    in_parallel = false;

    spin_done();
    pthread_mutex_lock(&P.lock);
    while (atomic_load(&P.pending) > 0) pthread_cond_wait(&P.done, &P.lock);
    pthread_mutex_unlock(&P.lock);
    pthread_mutex_unlock(&P.busy);
}
