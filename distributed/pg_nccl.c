/* pg_nccl.c - the NCCL backend of the process group (CUDA tensors). Every
 * collective runs on the group's communication stream, ordered after the
 * caller's current stream by an event, and the current stream waits for it
 * through another (PyTorch's ProcessGroupNCCL does the same): compute and
 * communication overlap wherever the caller waits late (DDP's buckets).
 * The tensors are marked used on the communication stream
 * (nb_record_stream) so the caching allocator does not hand their memory
 * to the compute stream before the collective is done.
 *
 * Failures (PyTorch's NCCL watchdog): the communicator is non-blocking, and
 * a watchdog thread per group polls ncclCommGetAsyncError and the
 * completion events of launched collectives; an error, or a collective (or
 * the communicator's start-up) not done after NB_DIST_TIMEOUT seconds
 * (default 600; collectives replayed from a CUDA graph are not timed),
 * aborts the communicator, which ends its kernels, so no
 * rank waits forever: the waiting call and every later one return
 * NB_ERR_DEVICE naming the cause. Built only with NCCL, into
 * libnabla_cuda.so and the static library (nccl_linked.c finds it). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist_impl.h"

#ifdef NB_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#define N_EVENTS 64 /* completion events, reused round robin */

typedef struct {
    ncclComm_t comm;
    nb_stream *stream; /* the communication stream (per device, for the process) */
    nb_event *pre;     /* "the current stream's work so far", re-recorded per call */
    nb_event *done[N_EVENTS];
    int next;
    /* the watchdog's view, under lock: when each completion event was
     * recorded (0: nothing outstanding on it) */
    pthread_mutex_t lock;
    /* every use of comm (an enqueue, an error poll, the abort) holds it, so
     * no call reaches a communicator the abort has freed (PyTorch's
     * NCCLComm::mutex_); never held across a wait */
    pthread_mutex_t comm_lock;
    double launched[N_EVENTS];
    double timeout;        /* seconds */
    atomic_bool aborted;   /* the communicator was aborted: every call fails */
    char why[384];         /* the cause, once aborted */
    pthread_t watchdog;
    bool watching;
    atomic_bool stop;
} nccl_ctx;

static nb_stream *comm_streams[NB_MAX_DEVICES];

static nb_status nccl_fail(ncclResult_t r, const char *op) {
    return nb_set_error(NB_ERR_DEVICE, "%s: NCCL error %d: %s", op, (int)r, ncclGetErrorString(r));
}
#define NCCL_TRY(op, call)                                  \
    do {                                                    \
        ncclResult_t r_ = (call);                           \
        if (r_ != ncclSuccess) return nccl_fail(r_, op);    \
    } while (0)

static ncclDataType_t nccl_type(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return ncclFloat32;
    case NB_F64: return ncclFloat64;
    case NB_F16: return ncclFloat16;
    case NB_BF16: return ncclBfloat16;
    case NB_I32: return ncclInt32;
    case NB_I64: return ncclInt64;
    case NB_I8: return ncclInt8;
    case NB_I16: return ncclFloat16; /* moved, never reduced (process_group.c) */
    default: return ncclUint8; /* uint8, bool */
    }
}

static ncclRedOp_t nccl_op(nb_dist_op op) {
    switch (op) {
    case NB_DIST_AVG: return ncclAvg;
    case NB_DIST_MAX: return ncclMax;
    case NB_DIST_MIN: return ncclMin;
    default: return ncclSum;
    }
}

static cudaStream_t raw(nb_stream *s) { return (cudaStream_t)nb_stream_handle(s); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* NB_DIST_TIMEOUT in seconds (default 600, PyTorch's 10 minutes). */
static double dist_timeout(void) {
    const char *t = getenv("NB_DIST_TIMEOUT");
    return t && atof(t) > 0 ? atof(t) : 600.0;
}

/* Aborts the communicator once, keeping the first cause. */
static void abort_comm(nccl_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void abort_comm(nccl_ctx *c, const char *fmt, ...) {
    pthread_mutex_lock(&c->comm_lock);
    if (!atomic_load(&c->aborted)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, sizeof c->why, fmt, ap);
        va_end(ap);
        atomic_store(&c->aborted, true); /* after why: readers that see it read why */
        if (c->comm) ncclCommAbort(c->comm); /* its kernels end; the streams drain */
        c->comm = NULL;
    }
    pthread_mutex_unlock(&c->comm_lock);
}

/* The communicator's asynchronous state (ncclInProgress while a
 * non-blocking call finishes), or ncclInvalidUsage once aborted. */
static ncclResult_t comm_state(nccl_ctx *c) {
    ncclResult_t r = ncclInvalidUsage;
    pthread_mutex_lock(&c->comm_lock);
    if (c->comm && ncclCommGetAsyncError(c->comm, &r) != ncclSuccess) r = ncclInternalError;
    pthread_mutex_unlock(&c->comm_lock);
    return r;
}

/* Locks the communicator for an enqueue: NULL once aborted (unlocked). */
static ncclComm_t comm_take(nccl_ctx *c) {
    pthread_mutex_lock(&c->comm_lock);
    if (c->comm) return c->comm;
    pthread_mutex_unlock(&c->comm_lock);
    return NULL;
}
static ncclResult_t comm_give(nccl_ctx *c, ncclResult_t r) {
    pthread_mutex_unlock(&c->comm_lock);
    return r;
}

static nb_status aborted_error(nccl_ctx *c, const char *op) {
    return nb_set_error(NB_ERR_DEVICE, "%s: the NCCL communicator was aborted: %s", op, c->why);
}

/* A non-blocking call's enqueue finishes in the background: waits for it
 * (ncclInProgress), within the timeout. */
static nb_status settle(nccl_ctx *c, ncclResult_t r, const char *op) {
    double until = now_s() + c->timeout;
    while (r == ncclInProgress && !atomic_load(&c->aborted)) {
        if (now_s() > until) {
            abort_comm(c, "%s did not finish within NB_DIST_TIMEOUT=%.0f s (a rank did not join)", op, c->timeout);
            break;
        }
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        r = comm_state(c);
    }
    if (atomic_load(&c->aborted)) return aborted_error(c, op);
    if (r != ncclSuccess) {
        abort_comm(c, "%s: NCCL error %d: %s", op, (int)r, ncclGetErrorString(r));
        return aborted_error(c, op);
    }
    return NB_OK;
}

/* The watchdog: every 50 ms, the communicator's asynchronous error and the
 * age of the oldest collective not done. */
static void *watch(void *arg) {
    nccl_ctx *c = arg;
    while (!atomic_load(&c->stop) && !atomic_load(&c->aborted)) {
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        ncclResult_t r = comm_state(c);
        if (r != ncclSuccess && r != ncclInProgress && !atomic_load(&c->aborted)) {
            abort_comm(c, "NCCL reported error %d: %s (another rank failed?)", (int)r, ncclGetErrorString(r));
            break;
        }
        double oldest = 0, t = now_s();
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < N_EVENTS; i++) {
            if (!c->launched[i]) continue;
            nb_status prev = nb_last_status();
            if (nb_event_query(c->done[i]) && nb_last_status() == prev) c->launched[i] = 0;
            else if (!oldest || c->launched[i] < oldest) oldest = c->launched[i];
        }
        pthread_mutex_unlock(&c->lock);
        if (oldest && t - oldest > c->timeout)
            abort_comm(c, "a collective did not finish within NB_DIST_TIMEOUT=%.0f s (a rank stopped or hangs)",
                       c->timeout);
    }
    return NULL;
}

/* Orders the communication stream after the caller's current stream. */
static nb_status begin(nb_process_group *pg, const char *op) {
    nccl_ctx *c = pg->ctx;
    if (atomic_load(&c->aborted)) return aborted_error(c, op);
    nb_status st = nb_event_record(c->pre, nb_current_stream(pg->device));
    return st ? st : nb_stream_wait_event(c->stream, c->pre);
}

/* Records the collective's end on the communication stream into a
 * completion event (*ev), and keeps the tensors' memory alive for it. */
static nb_status end(nb_process_group *pg, nb_tensor *a, const nb_tensor *b, nb_event **ev) {
    nccl_ctx *c = pg->ctx;
    nb_status st = NB_OK;
    if (a) st = nb_record_stream(a, c->stream);
    if (!st && b) st = nb_record_stream((nb_tensor *)b, c->stream);
    pthread_mutex_lock(&c->lock);
    int k = c->next;
    nb_event *e = c->done[k];
    c->next = (c->next + 1) % N_EVENTS;
    if (!st) st = nb_event_record(e, c->stream);
    /* the watchdog times it; not an event recorded into a CUDA graph being
     * captured (a query of it would invalidate the capture; replays are
     * not timed) */
    c->launched[k] = st || nb_graph_is_capturing(pg->device) ? 0 : now_s();
    pthread_mutex_unlock(&c->lock);
    *ev = e;
    return st;
}

/* The caller's current stream waits for ev. */
static nb_status join(nb_process_group *pg, nb_event *ev) {
    return nb_stream_wait_event(nb_current_stream(pg->device), ev);
}

/* An all-reduce enqueued on the communication stream, under the comm lock. */
static ncclResult_t enqueue_all_reduce(nccl_ctx *c, const void *src, void *dst, size_t n, ncclDataType_t t,
                                       ncclRedOp_t op) {
    if (!comm_take(c)) return ncclInvalidUsage;
    return comm_give(c, ncclAllReduce(src, dst, n, t, op, c->comm, raw(c->stream)));
}

static nb_status c_all_reduce(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, nb_dist_op op,
                              nb_pg_work *w) {
    nccl_ctx *c = pg->ctx;
    nb_status st = begin(pg, "all_reduce");
    if (!st)
        st = settle(c, enqueue_all_reduce(c, buf, buf, (size_t)n, nccl_type(dt), nccl_op(op)), "all_reduce");
    if (st) return st;
    nb_event *e;
    st = end(pg, t, NULL, &e);
    w->req = e;
    return st;
}

static nb_status c_wait(nb_process_group *pg, nb_pg_work *w) {
    nccl_ctx *c = pg->ctx;
    nb_status st = join(pg, w->req);
    w->req = NULL;
    return !st && atomic_load(&c->aborted) ? aborted_error(c, "wait") : st;
}

static nb_status c_broadcast(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, int src) {
    nccl_ctx *c = pg->ctx;
    nb_status st = begin(pg, "broadcast");
    if (!st)
        st = settle(c, comm_take(c) ? comm_give(c, ncclBroadcast(buf, buf, (size_t)n, nccl_type(dt), src, c->comm,
                                                                 raw(c->stream)))
                                    : ncclInvalidUsage,
                    "broadcast");
    if (st) return st;
    nb_event *e;
    st = end(pg, t, NULL, &e);
    return st ? st : join(pg, e);
}

static nb_status c_all_gather(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in, const void *src,
                              int64_t n, nb_dtype dt) {
    nccl_ctx *c = pg->ctx;
    nb_status st = begin(pg, "all_gather");
    if (!st)
        st = settle(c,
                    comm_take(c) ? comm_give(c, ncclAllGather(src, dst, (size_t)n, nccl_type(dt), c->comm, raw(c->stream)))
                                 : ncclInvalidUsage,
                    "all_gather");
    if (st) return st;
    nb_event *e;
    st = end(pg, out, in, &e);
    return st ? st : join(pg, e);
}

static nb_status c_reduce_scatter(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in,
                                  const void *src, int64_t n, nb_dtype dt, nb_dist_op op) {
    nccl_ctx *c = pg->ctx;
    nb_status st = begin(pg, "reduce_scatter");
    if (!st)
        st = settle(c,
                    comm_take(c) ? comm_give(c, ncclReduceScatter(src, dst, (size_t)n, nccl_type(dt), nccl_op(op),
                                                                  c->comm, raw(c->stream)))
                                 : ncclInvalidUsage,
                    "reduce_scatter");
    if (st) return st;
    nb_event *e;
    st = end(pg, out, in, &e);
    return st ? st : join(pg, e);
}

/* A barrier is an all-reduce of one value, waited for by the host. */
static nb_status c_barrier(nb_process_group *pg) {
    nccl_ctx *c = pg->ctx;
    nb_tensor *one = nb_tensor_new_unscoped(1, (int64_t[]){1}, NB_F32, pg->device);
    if (!one) return nb_last_status();
    nb_status st = nb_fill_(one, 1.0) ? nb_last_status() : begin(pg, "barrier");
    if (!st)
        st = settle(c, enqueue_all_reduce(c, nb_pg_data(one), nb_pg_data(one), 1, ncclFloat32, ncclSum), "barrier");
    nb_event *e = NULL;
    if (!st) st = end(pg, one, NULL, &e);
    if (!st) st = nb_stream_synchronize(c->stream); /* an abort by the watchdog ends the wait */
    if (!st && atomic_load(&c->aborted)) st = aborted_error(c, "barrier");
    nb_release(one);
    return st;
}

static void c_destroy(nb_process_group *pg) {
    nccl_ctx *c = pg->ctx;
    if (!c) return;
    if (c->stream) nb_stream_synchronize(c->stream); /* the watchdog still ends a hung collective */
    if (c->watching) {
        atomic_store(&c->stop, true);
        pthread_join(c->watchdog, NULL);
    }
    if (c->comm) ncclCommDestroy(c->comm); /* an aborted one is freed already (NULL) */
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->comm_lock);
    nb_event_free(c->pre);
    for (int i = 0; i < N_EVENTS; i++) nb_event_free(c->done[i]);
    free(c);
    pg->ctx = NULL;
}

static const nb_pg_backend_i nccl_iface = {
    .name = "NCCL",
    .all_reduce = c_all_reduce,
    .wait = c_wait,
    .progress = NULL,
    .broadcast = c_broadcast,
    .all_gather = c_all_gather,
    .reduce_scatter = c_reduce_scatter,
    .barrier = c_barrier,
    .destroy = c_destroy,
};

/* The unique id through a file: rank 0 writes it whole (a temporary file
 * renamed into place), the others wait for it (NB_DIST_TIMEOUT seconds,
 * default 600). */
static nb_status id_through_file(nb_process_group *pg, const char *path, ncclUniqueId *id) {
    if (!path || !*path)
        return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: NCCL with %d processes outside mpirun needs a file to "
                                                "exchange its id: set NB_DIST_INIT_FILE (or init_file)", pg->size);
    if (pg->rank == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(id, sizeof *id, 1, f) == 1;
        if (f && fclose(f) != 0) ok = false;
        if (!ok || rename(tmp, path) != 0) {
            int e = errno;
            remove(tmp);
            return nb_set_error(NB_ERR_IO, "distributed_init: cannot write the NCCL id to %s: %s", path, strerror(e));
        }
        return NB_OK;
    }
    double limit = dist_timeout(), waited = 0;
    time_t start = time(NULL);
    for (;;) {
        struct stat sb;
        /* a file older than this run (a crashed job's) is not the id: wait
           for rank 0 to replace it (ranks start within a minute) */
        FILE *f = stat(path, &sb) == 0 && sb.st_mtime >= start - 60 ? fopen(path, "rb") : NULL;
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1) return NB_OK;
        }
        if (waited >= limit)
            return nb_set_error(NB_ERR_IO, "distributed_init: rank %d waited %.0f s for rank 0's NCCL id in %s", pg->rank,
                                waited, path);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        waited += 0.01;
    }
}

nb_status nb_pg_nccl_init(nb_process_group *pg, const char *init_file) {
    int dev = pg->device.index;
    if (cudaSetDevice(dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return nb_set_error(NB_ERR_DEVICE, "distributed_init: cannot use cuda:%d", dev);
    }
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_OOM, "distributed_init: out of host memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->comm_lock, NULL);
    c->timeout = dist_timeout();
    pg->ctx = c, pg->be = &nccl_iface; /* c_destroy frees what was made on failure */
    if (!comm_streams[dev] && !(comm_streams[dev] = nb_stream_new(pg->device))) return nb_last_status();
    c->stream = comm_streams[dev];
    if (!(c->pre = nb_event_new(pg->device))) return nb_last_status();
    for (int i = 0; i < N_EVENTS; i++)
        if (!(c->done[i] = nb_event_new(pg->device))) return nb_last_status();
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (pg->rank == 0) NCCL_TRY("distributed_init", ncclGetUniqueId(&id));
    nb_status st = NB_OK;
    if (pg->size > 1) st = init_file ? id_through_file(pg, init_file, &id) : nb_mpi_bootstrap_bcast(pg, &id, sizeof id);
    if (st) return st;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* a rank that never joins cannot hang this one: settle times the start-up */
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, pg->size, id, pg->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        c->comm = NULL;
        if (pg->size > 1 && init_file && pg->rank == 0) remove(init_file);
        return nccl_fail(r, "distributed_init");
    }
    st = settle(c, r, "distributed_init (ncclCommInitRankConfig)");
    if (pg->size > 1 && init_file && pg->rank == 0) remove(init_file); /* joined or failed: the id is spent */
    if (st) return st;
    if (pthread_create(&c->watchdog, NULL, watch, c) != 0)
        return nb_set_error(NB_ERR_OOM, "distributed_init: cannot start the NCCL watchdog thread");
    c->watching = true;
    return NB_OK;
}

#endif
