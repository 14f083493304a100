/* stream.c - the execution model's core half: each device's compute and
 * copy streams (created by its backend on first use), the calling thread's
 * current stream per device, events, device synchronization, the
 * NB_SYNC_DEBUG switch, and nb_record_stream. The backend halves are the
 * stream/event slots of nb_backend.h; the CPU's are synchronous no-ops. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"

struct nb_stream {
    nb_backend *be;
    void *handle; /* the backend's stream (cudaStream_t; the CPU's is a dummy) */
    nb_stream_kind kind;
};

struct nb_event {
    nb_backend *be;
    void *handle;
};

static nb_stream streams[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICES][NB_STREAM_KIND_COUNT];
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local nb_stream *current[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICES];

/* The device's stream of a kind, created on first use. */
static nb_stream *device_stream(nb_backend *be, nb_stream_kind kind) {
    nb_stream *s = &streams[be->device.type][be->device.index][kind];
    pthread_mutex_lock(&streams_lock);
    if (!s->be) {
        void *h = be->iface->stream_create(be, kind);
        if (h) s->handle = h, s->kind = kind, s->be = be;
    }
    pthread_mutex_unlock(&streams_lock);
    if (!s->be) {
        char d[32];
        return NB_FAIL(NB_ERR_DEVICE, "stream: cannot create a stream on %s: %s", nb_device_str(be->device, d, sizeof d),
                       nb_last_error());
    }
    return s;
}

static nb_stream *stream_of(nb_device dev, nb_stream_kind kind) {
    nb_backend *be = nb_backend_get(dev);
    return be ? device_stream(be, kind) : NULL;
}

nb_stream *nb_stream_compute(nb_device dev) { return stream_of(dev, NB_STREAM_COMPUTE); }

nb_stream *nb_stream_new(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    nb_stream *s = calloc(1, sizeof *s);
    if (!s) return NB_FAIL(NB_ERR_OOM, "stream_new: out of host memory");
    s->be = be, s->kind = NB_STREAM_COMPUTE;
    if (!(s->handle = be->iface->stream_create(be, NB_STREAM_COMPUTE))) {
        free(s);
        char d[32];
        return NB_FAIL(NB_ERR_DEVICE, "stream_new: cannot create a stream on %s: %s",
                       nb_device_str(dev, d, sizeof d), nb_last_error());
    }
    return s;
}

void nb_stream_free(nb_stream *s) {
    if (!s) return;
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++) /* the device's own streams live for the process */
        for (int i = 0; i < NB_MAX_DEVICES; i++)
            for (int k = 0; k < NB_STREAM_KIND_COUNT; k++)
                if (s == &streams[t][i][k]) return;
    if (s->be->iface->stream_capture_id && s->be->iface->stream_capture_id(s->be, s->handle)) {
        nb_set_error(NB_ERR_STATE, "stream_free: the stream is being captured into a CUDA graph; end the capture "
                                   "first (nothing was freed)");
        return;
    }
    nb_stream **cur = &current[s->be->device.type][s->be->device.index];
    if (*cur == s) *cur = NULL; /* the calling thread's current stream goes back to the compute stream */
    s->be->iface->stream_destroy(s->be, s->handle);
    free(s);
}
nb_stream *nb_stream_copy(nb_device dev) { return stream_of(dev, NB_STREAM_COPY); }

nb_stream *nb_current_stream(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    nb_stream *s = current[dev.type][dev.index];
    return s ? s : device_stream(be, NB_STREAM_COMPUTE);
}

void *nb_backend_current_stream(nb_backend *be) {
    nb_stream *s = current[be->device.type][be->device.index];
    if (!s) s = device_stream(be, NB_STREAM_COMPUTE);
    return s ? s->handle : NULL;
}

nb_status nb_set_current_stream(nb_stream *s) {
    if (!s) {
        nb_device d = nb_default_device();
        current[d.type][d.index] = NULL;
        return NB_OK;
    }
    current[s->be->device.type][s->be->device.index] = s;
    return NB_OK;
}

void *nb_stream_handle(const nb_stream *s) {
    return s ? s->handle : NB_FAIL(NB_ERR_INVALID_ARG, "stream_handle: NULL stream");
}

nb_device nb_stream_device(const nb_stream *s) {
    if (!s) nb_set_error(NB_ERR_INVALID_ARG, "stream_device: NULL stream");
    return s ? s->be->device : NB_CPU;
}

nb_status nb_stream_synchronize(nb_stream *s) {
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "stream_synchronize: NULL stream");
    return s->be->iface->stream_synchronize(s->be, s->handle);
}

nb_status nb_device_synchronize(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    return be ? be->iface->synchronize(be) : nb_last_status();
}

nb_status nb_stream_wait_stream(nb_stream *s, nb_stream *on) {
    if (!s || !on) return nb_set_error(NB_ERR_INVALID_ARG, "stream_wait_stream: NULL stream");
    if (s == on) return NB_OK;
    if (s->be != on->be)
        return nb_set_error(NB_ERR_DEVICE, "stream_wait_stream: the streams are on different devices");
    nb_event *e = nb_event_new(on->be->device);
    nb_status st = e ? nb_event_record(e, on) : nb_last_status();
    if (st == NB_OK) st = nb_stream_wait_event(s, e);
    nb_event_free(e); /* the wait has been enqueued: the backend keeps what it needs */
    return st;
}

/* ---- events ------------------------------------------------------------------------ */

nb_event *nb_event_new(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    nb_event *e = malloc(sizeof *e);
    if (!e) return NB_FAIL(NB_ERR_OOM, "event_new: out of host memory");
    e->be = be;
    e->handle = be->iface->event_create(be);
    if (!e->handle) {
        free(e);
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_DEVICE, "event_new: the backend could not create an event");
        return NULL;
    }
    return e;
}

void nb_event_free(nb_event *e) {
    if (!e) return;
    e->be->iface->event_destroy(e->be, e->handle);
    free(e);
}

nb_status nb_event_record(nb_event *e, nb_stream *s) {
    if (!e) return nb_set_error(NB_ERR_INVALID_ARG, "event_record: NULL event");
    if (!s && !(s = nb_current_stream(e->be->device))) return nb_last_status();
    if (s->be != e->be) return nb_set_error(NB_ERR_DEVICE, "event_record: the event and the stream are on different devices");
    if (nb_fuse_on) { /* calls recorded for fusion on s run before the event */
        nb_stream *cur = nb_current_stream(s->be->device);
        nb_status st = cur == s ? NB_OK : nb_set_current_stream(s);
        if (!st) st = nb_fuse_flush(s->be);
        if (cur != s) {
            nb_status st2 = nb_set_current_stream(cur);
            if (!st) st = st2;
        }
        if (st) return st;
    }
    return e->be->iface->event_record(e->be, e->handle, s->handle);
}

nb_status nb_stream_wait_event(nb_stream *s, nb_event *e) {
    if (!s || !e) return nb_set_error(NB_ERR_INVALID_ARG, "stream_wait_event: NULL argument");
    if (s->be != e->be) return nb_set_error(NB_ERR_DEVICE, "stream_wait_event: the event and the stream are on different devices");
    return s->be->iface->event_wait(s->be, s->handle, e->handle);
}

bool nb_event_query(nb_event *e) {
    if (!e) return nb_set_error(NB_ERR_INVALID_ARG, "event_query: NULL event"), false;
    return e->be->iface->event_query(e->be, e->handle) != 0; /* a failed device: true, with its error */
}

nb_status nb_event_synchronize(nb_event *e) {
    if (!e) return nb_set_error(NB_ERR_INVALID_ARG, "event_synchronize: NULL event");
    return e->be->iface->event_synchronize(e->be, e->handle);
}

/* ---- record_stream, NB_SYNC_DEBUG ------------------------------------------------- */

nb_status nb_record_stream(nb_tensor *t, nb_stream *s) {
    if (!t || !s) return nb_set_error(NB_ERR_INVALID_ARG, "record_stream: NULL argument");
    if (s->be != t->storage->backend)
        return nb_set_error(NB_ERR_DEVICE, "record_stream: the stream is not on the tensor's device");
    return nb_alloc_record_stream(s->be, t->storage->block, s->handle);
}

static int sync_debug = -1;
static pthread_once_t sync_debug_once = PTHREAD_ONCE_INIT;
static void read_sync_debug(void) {
    const char *e = getenv("NB_SYNC_DEBUG");
    sync_debug = e && *e && strcmp(e, "0") != 0;
}

bool nb_sync_debug(void) {
    pthread_once(&sync_debug_once, read_sync_debug);
    return sync_debug;
}

static _Atomic uint64_t kernel_calls[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICES];

nb_device_counters nb_device_counters_get(nb_device dev) {
    nb_device_counters c = {0};
    nb_backend *be = nb_backend_get(dev);
    if (!be) return c;
    if (be->iface->counters) be->iface->counters(be, &c);
    c.kernel_calls = atomic_load_explicit(&kernel_calls[dev.type][dev.index], memory_order_relaxed);
    return c;
}

nb_status nb_after_kernel(nb_backend *be, nb_status st, const char *slot) {
    atomic_fetch_add_explicit(&kernel_calls[be->device.type][be->device.index], 1, memory_order_relaxed);
    if (nb_prof_on) nb_prof_mark_after(be, slot);
    if (st != NB_OK || !nb_sync_debug()) return st;
    /* a stream being captured cannot be waited for (the wait would end the
     * capture): the replay's errors show at the next sync point */
    void *cur = nb_backend_current_stream(be);
    if (be->iface->stream_capture_id && be->iface->stream_capture_id(be, cur)) return NB_OK;
    st = be->iface->stream_synchronize(be, cur);
    if (st == NB_OK) return st;
    char why[512];
    snprintf(why, sizeof why, "%s", nb_last_error());
    if (!strncmp(why, slot, strlen(slot))) return st; /* the error word names the op already */
    return nb_set_error(st, "%s: %s (NB_SYNC_DEBUG: found right after this kernel)", slot, why);
}
