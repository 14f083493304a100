// cuda_backend.cu - the CUDA backend's device half: one nb_backend per GPU
// (cuda:N) registered by nb_cuda_backend_init without making a context, the
// device guard, the device's state (library handles per host thread,
// properties, a sticky fault), streams with their device error words,
// events, memory (cudaMalloc under core's caching allocator, pinned host
// buffers, async and peer copies), graphs, and the vtable of the kernels
// the other files of backend/cuda implement (the slots whose cuda column in
// backend/nb_slots.def is 1).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <cusolverDn.h>
#include <pthread.h>
#include <string.h>

#include "cuda_common.cuh"
#include "jit.cuh"
#include <atomic>


namespace nbc {

constexpr int MAX_STREAMS = 64;

// A thread's library handles on one device (PyTorch's handle pool): cuBLAS,
// cuDNN and cuSOLVER keep the stream set on a handle, so "set the stream,
// call" on a shared handle races with another thread's. Made on first use;
// a thread that ends gives its sets back for the next thread.
struct Handles {
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cusolverDnHandle_t solver;
    Handles *next; // in the device's pool of free sets
};

struct Ctx {
    int dev;
    cudaDeviceProp prop;
    char info[256];
    pthread_mutex_t lock;
    // Streams are pooled (PyTorch's stream pool): nb_stream_free gives one
    // back and a later stream_create takes it again, so a handle the caching
    // allocator recorded (nb_record_stream) stays a valid stream.
    struct {
        cudaStream_t s; // made once, never destroyed
        int *word;      // device error word
        bool in_use;
    } streams[MAX_STREAMS];
    int n_streams;            // entries made (in use or free)
    cublasLtHandle_t lt;      // shared: cuBLASLt takes the stream per call
    Handles *pool;            // sets that ended threads gave back
    std::atomic<bool> dead;   // a sticky fault: every later call fails
    char dead_why[512];
};

static Ctx ctxs[NB_MAX_DEVICES];
// nb_device_counters, per device (launches are counted on the calling
// thread's current CUDA device, which the device guard sets)
static std::atomic<uint64_t> n_launches[NB_MAX_DEVICES], n_syncs[NB_MAX_DEVICES], n_h2d[NB_MAX_DEVICES],
    n_d2h[NB_MAX_DEVICES];
static nb_backend backends[NB_MAX_DEVICES];

Ctx *ctx_of(nb_backend *be) { return (Ctx *)be->context; }
int device_of(nb_backend *be) { return ctx_of(be)->dev; }

// ---- device guard ------------------------------------------------------------------
// Whether device d has its primary context: the driver's answer, through
// the runtime's entry point (cudart links no libcuda). Unknown: yes.
typedef int (*PrimaryCtxState)(int dev, unsigned *flags, int *active);
static PrimaryCtxState primary_state;
static pthread_once_t primary_once = PTHREAD_ONCE_INIT;
static void find_primary_state(void) {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &f, 12000, cudaEnableDefault, &q) ==
            cudaSuccess && q == cudaDriverEntryPointSuccess)
        primary_state = (PrimaryCtxState)f;
    else (void)cudaGetLastError();
}
static bool has_context(int d) {
    pthread_once(&primary_once, find_primary_state);
    unsigned flags = 0;
    int active = 1;
    if (primary_state && primary_state(d, &flags, &active) != 0) active = 1;
    return active != 0;
}
// Back to the caller's device after a guarded call, unless that device has no
// context (a thread that never chose one reads device 0): cudaSetDevice would
// make one (c10's MaybeSetDevice).
static void restore_device(int prev, int dev) {
    if (prev >= 0 && prev != dev && has_context(prev)) cudaSetDevice(prev);
}

// c10::cuda::CUDAGuard: the device current for the scope, the caller's after.
struct Guard {
    int dev, prev = -1;
    explicit Guard(int d) : dev(d) {
        if (cudaGetDevice(&prev) != cudaSuccess) (void)cudaGetLastError(), prev = -1;
        if (prev != dev && cudaSetDevice(dev) != cudaSuccess) (void)cudaGetLastError();
    }
    ~Guard() { restore_device(prev, dev); }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;
};

// Errors after which the context cannot run anything again (CUDA's "sticky"
// errors): the device is marked unusable with the first one's text.
static bool sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed: return true;
    default: return false;
    }
}

static nb_status unusable(Ctx *c) {
    return nb_set_error(NB_ERR_DEVICE, "cuda:%d is unusable after a device fault (the first: %s); the process must "
                        "restart to use it again", c->dev, c->dead_why);
}

nb_status cuda_fail(const char *slot, const char *call, cudaError_t e) {
    (void)cudaGetLastError(); // clear a non-sticky error
    nb_status st = e == cudaErrorMemoryAllocation ? NB_ERR_OOM : NB_ERR_DEVICE;
    int d = -1;
    if (sticky(e) && cudaGetDevice(&d) == cudaSuccess && d >= 0 && d < NB_MAX_DEVICES) {
        Ctx *c = &ctxs[d];
        pthread_mutex_lock(&c->lock);
        if (!c->dead.load()) {
            snprintf(c->dead_why, sizeof c->dead_why, "%s: %s failed: %s (%s)", slot, call, cudaGetErrorString(e),
                     cudaGetErrorName(e));
            c->dead.store(true);
        }
        pthread_mutex_unlock(&c->lock);
    }
    return nb_set_error(st, "%s: %s failed on cuda: %s (%s)", slot, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

// The dispatchers' guard (nb_backend_impl.h): every kernel slot runs with
// its device current and leaves the caller's current device as it was.
static nb_status device_enter(nb_backend *be, int *prev) {
    Ctx *c = ctx_of(be);
    if (c->dead.load(std::memory_order_relaxed)) return unusable(c);
    int p = -1;
    if (cudaGetDevice(&p) != cudaSuccess) (void)cudaGetLastError(), p = -1;
    *prev = p;
    if (p != c->dev) {
        cudaError_t e = cudaSetDevice(c->dev);
        if (e != cudaSuccess) return cuda_fail("device guard", "cudaSetDevice", e);
    }
    return NB_OK;
}
static void device_exit(nb_backend *be, int prev) { restore_device(prev, ctx_of(be)->dev); }

void count_launch(void) {
    int d = 0;
    if (cudaGetDevice(&d) == cudaSuccess && d >= 0 && d < NB_MAX_DEVICES)
        n_launches[d].fetch_add(1, std::memory_order_relaxed);
}

nb_status launched(const char *slot) {
    count_launch();
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? NB_OK : cuda_fail(slot, "kernel launch", e);
}

// ---- slot tags, for the error word ------------------------------------------------

static const char *tags[1024];
static int n_tags;
static pthread_mutex_t tag_lock = PTHREAD_MUTEX_INITIALIZER;

int slot_tag(const char *slot) {
    pthread_mutex_lock(&tag_lock);
    int t = 0;
    for (; t < n_tags; t++)
        if (!strcmp(tags[t], slot)) break;
    if (t == n_tags && n_tags < 1023) tags[n_tags++] = slot;
    pthread_mutex_unlock(&tag_lock);
    return t + 1;
}

static const char *tag_name(int t) { return t >= 1 && t <= n_tags ? tags[t - 1] : "a kernel"; }

static const char *err_text(int kind) {
    switch (kind) {
    case ERR_INDEX: return "an index is out of range (found by the kernel)";
    case ERR_ZERO_DIV: return "integer division by zero";
    case ERR_TARGET: return "a target is outside [0, C) (found by the kernel)";
    case ERR_SINGULAR: return "a matrix is singular";
    case ERR_NOT_PD: return "a matrix is not positive-definite";
    case ERR_RANK: return "a matrix is rank-deficient";
    case ERR_CONVERGE: return "the algorithm failed to converge";
    default: return "a device error";
    }
}

static nb_status err_status(int kind) {
    return kind == ERR_INDEX || kind == ERR_ZERO_DIV || kind == ERR_TARGET || kind == ERR_SINGULAR ||
                   kind == ERR_NOT_PD || kind == ERR_RANK || kind == ERR_CONVERGE
               ? NB_ERR_INVALID_ARG
               : NB_ERR_DEVICE;
}

int *err_word(nb_backend *be) {
    Ctx *c = ctx_of(be);
    cudaStream_t s = stream_of(be);
    int n = __atomic_load_n(&c->n_streams, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (c->streams[i].s == s) return c->streams[i].word;
    return c->streams[0].word; // every stream of ours is registered; not reached
}

// After the stream is idle: its error word, reported once and cleared. The
// read and the clear are ordered on the stream itself (a stream of ours
// never waits for the legacy default stream).
static nb_status check_word(Ctx *c, cudaStream_t s, int *word) {
    int w = 0;
    cudaError_t e = cudaMemcpyAsync(&w, word, sizeof w, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return cuda_fail("synchronize", "cudaMemcpyAsync(error word)", e);
    if (!w) return NB_OK;
    cudaMemsetAsync(word, 0, sizeof(int), s);
    int kind = w / 1024, tag = w % 1024;
    return nb_set_error(err_status(kind), "%s: %s (reported at a sync point on cuda:%d; NB_SYNC_DEBUG=1 "
                        "synchronizes after every kernel)", tag_name(tag), err_text(kind), c->dev);
}

// ---- execution model -------------------------------------------------------------

// A stream and its error word: a free one of the pool, else a new one.
static void *stream_create(nb_backend *be, nb_stream_kind kind) {
    (void)kind;
    Ctx *c = ctx_of(be);
    if (c->dead.load()) return unusable(c), nullptr;
    Guard g(c->dev);
    pthread_mutex_lock(&c->lock);
    int i = 0;
    while (i < c->n_streams && c->streams[i].in_use) i++;
    cudaError_t err = cudaSuccess;
    bool full = i == MAX_STREAMS;
    if (!full && i == c->n_streams) { // a new entry, published once made
        cudaStream_t st = nullptr;
        int *word = nullptr;
        err = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        if (err == cudaSuccess) err = cudaMalloc(&word, sizeof(int));
        if (err == cudaSuccess) err = cudaMemset(word, 0, sizeof(int));
        if (err == cudaSuccess) {
            c->streams[i].s = st, c->streams[i].word = word;
            __atomic_store_n(&c->n_streams, i + 1, __ATOMIC_RELEASE);
        } else {
            if (st) cudaStreamDestroy(st);
            if (word) cudaFree(word);
        }
    }
    void *r = nullptr;
    if (!full && err == cudaSuccess) {
        c->streams[i].in_use = true;
        r = (void *)c->streams[i].s;
    }
    pthread_mutex_unlock(&c->lock); // cuda_fail takes the lock (a sticky error)
    if (full)
        nb_set_error(NB_ERR_DEVICE, "stream_create: %d streams are alive on cuda:%d (the most; nb_stream_free "
                     "releases one)", MAX_STREAMS, c->dev);
    else if (err != cudaSuccess) cuda_fail("stream_create", "cudaStreamCreate", err);
    return r;
}

// A host wait on a stream being captured into a graph would fail deep in
// CUDA (and invalidate the capture): name it instead.
bool stream_capturing(cudaStream_t s) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) (void)cudaGetLastError();
    return cs != cudaStreamCaptureStatusNone;
}
static nb_status no_sync_in_capture(const char *what) {
    return nb_set_error(NB_ERR_STATE, "%s: the host cannot wait for a stream while a CUDA graph is being captured "
                                      "(nb_item, nb_to_host and synchronize are not allowed in a captured step)",
                        what);
}

// Waits for the stream's work, reports its pending error word, and gives
// the stream back to the pool (core never passes a stream in a capture:
// nb_stream_free asks stream_capture_id first).
static void stream_destroy(nb_backend *be, void *sp) {
    Ctx *c = ctx_of(be);
    cudaStream_t s = (cudaStream_t)sp;
    Guard g(c->dev);
    int i = 0, n = __atomic_load_n(&c->n_streams, __ATOMIC_ACQUIRE);
    while (i < n && c->streams[i].s != s) i++;
    if (i == n) return; // not ours
    if (!c->dead.load() && cudaStreamSynchronize(s) == cudaSuccess) check_word(c, s, c->streams[i].word);
    else (void)cudaGetLastError();
    pthread_mutex_lock(&c->lock);
    c->streams[i].in_use = false;
    pthread_mutex_unlock(&c->lock);
}

static nb_status stream_synchronize(nb_backend *be, void *s) {
    Ctx *c = ctx_of(be);
    if (c->dead.load()) return unusable(c);
    Guard g(c->dev);
    if (stream_capturing((cudaStream_t)s)) return no_sync_in_capture("stream_synchronize");
    n_syncs[c->dev].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("stream_synchronize", cudaStreamSynchronize((cudaStream_t)s));
    int n = __atomic_load_n(&c->n_streams, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (c->streams[i].s == (cudaStream_t)s) return check_word(c, (cudaStream_t)s, c->streams[i].word);
    return NB_OK;
}

static nb_status synchronize(nb_backend *be) {
    Ctx *c = ctx_of(be);
    if (c->dead.load()) return unusable(c);
    Guard g(c->dev);
    int n = __atomic_load_n(&c->n_streams, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (stream_capturing(c->streams[i].s)) return no_sync_in_capture("synchronize");
    n_syncs[c->dev].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("synchronize", cudaDeviceSynchronize());
    nb_status st = NB_OK;
    for (int i = 0; i < n; i++) {
        nb_status r = check_word(c, c->streams[i].s, c->streams[i].word);
        if (st == NB_OK) st = r;
    }
    return st;
}

static void *event_create(nb_backend *be) {
    Guard g(device_of(be));
    cudaEvent_t e;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        cuda_fail("event_create", "cudaEventCreate", err);
        return nullptr;
    }
    return (void *)e;
}
static void event_destroy(nb_backend *be, void *e) {
    Guard g(device_of(be));
    cudaEventDestroy((cudaEvent_t)e);
}
static nb_status event_record(nb_backend *be, void *e, void *s) {
    Guard g(device_of(be));
    NBC_TRY("event_record", cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
    return NB_OK;
}
static nb_status event_wait(nb_backend *be, void *s, void *e) {
    Guard g(device_of(be));
    NBC_TRY("event_wait", cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
    return NB_OK;
}
// Any answer but "done" or "not yet" is a failure, never "done": a block
// the allocator would recycle on it may still be in use.
static int event_query(nb_backend *be, void *e) {
    Guard g(device_of(be));
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r == cudaSuccess) return 1;
    if (r == cudaErrorNotReady) return 0;
    cuda_fail("event_query", "cudaEventQuery", r);
    return -1;
}
static nb_status event_synchronize(nb_backend *be, void *e) {
    Guard g(device_of(be));
    n_syncs[device_of(be)].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("event_synchronize", cudaEventSynchronize((cudaEvent_t)e));
    return NB_OK;
}

// ---- memory ------------------------------------------------------------------------

static nb_status dev_alloc(nb_backend *be, size_t bytes, void **p) {
    Ctx *c = ctx_of(be);
    *p = nullptr;
    if (c->dead.load()) return unusable(c);
    Guard g(c->dev);
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) return NB_OK;
    *p = nullptr;
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return NB_ERR_OOM; // the allocator frees its cache and retries
    }
    return cuda_fail("alloc", "cudaMalloc", e);
}
static void dev_free(nb_backend *be, void *p, size_t bytes) {
    (void)bytes;
    Guard g(device_of(be));
    cudaFree(p);
}
static void *host_alloc(nb_backend *be, size_t bytes) {
    Guard g(device_of(be));
    void *p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return p;
}
static void host_free(nb_backend *be, void *p) {
    (void)be;
    cudaFreeHost(p);
}
static cudaStream_t stream_or_current(nb_backend *be, void *s) { return s ? (cudaStream_t)s : stream_of(be); }
// Host copies are never captured: a replay would repeat them on the same host
// address (core refuses them on the captured stream; this catches a stream
// that joined the capture).
static nb_status no_host_copy_in_capture(const char *what) {
    return nb_set_error(NB_ERR_STATE, "%s: a copy between host and device memory cannot be captured in a CUDA graph "
                                      "(each replay would repeat it on the same host memory)",
                        what);
}
static nb_status memcpy_h2d(nb_backend *be, void *dst, const void *src, size_t bytes, void *s) {
    Guard g(device_of(be));
    if (stream_capturing(stream_or_current(be, s))) return no_host_copy_in_capture("memcpy_h2d");
    n_h2d[device_of(be)].fetch_add(bytes, std::memory_order_relaxed);
    NBC_TRY("memcpy_h2d", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_or_current(be, s)));
    return NB_OK;
}
static nb_status memcpy_d2h(nb_backend *be, void *dst, const void *src, size_t bytes, void *s) {
    Guard g(device_of(be));
    if (stream_capturing(stream_or_current(be, s))) return no_host_copy_in_capture("memcpy_d2h");
    n_d2h[device_of(be)].fetch_add(bytes, std::memory_order_relaxed);
    NBC_TRY("memcpy_d2h", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_or_current(be, s)));
    return NB_OK;
}
static nb_status memcpy_d2d(nb_backend *be, void *dst, const void *src, size_t bytes, void *s) {
    Guard g(device_of(be));
    NBC_TRY("memcpy_d2d", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_or_current(be, s)));
    return NB_OK;
}
// Between two GPUs (core orders it after the source's stream and syncs after).
static nb_status memcpy_peer(nb_backend *be, void *dst, nb_backend *src_be, const void *src, size_t bytes) {
    if (src_be->device.type != NB_DEVICE_CUDA)
        return nb_set_error(NB_ERR_UNSUPPORTED, "memcpy_peer: from %s to cuda is a host copy", src_be->name);
    Guard g(device_of(be));
    NBC_TRY("memcpy_peer", cudaMemcpyPeerAsync(dst, device_of(be), src, device_of(src_be), bytes, stream_of(be)));
    return NB_OK;
}

static const char *info(nb_backend *be) { return ctx_of(be)->info; }

// ---- CUDA graphs (core/graph.c) ------------------------------------------------------
// Relaxed capture: the caching allocator may call cudaMalloc during a
// capture (a new segment of the graph's pool), which the global and
// thread-local modes forbid.
static nb_status graph_capture_begin(nb_backend *be, void *s) {
    Guard g(device_of(be));
    NBC_TRY("graph_capture_begin", cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeRelaxed));
    return NB_OK;
}
static nb_status graph_capture_end(nb_backend *be, void *s, void **exec) {
    Guard guard(device_of(be));
    cudaGraph_t g = nullptr;
    NBC_TRY("graph_capture_end", cudaStreamEndCapture((cudaStream_t)s, &g));
    cudaGraphExec_t x = nullptr;
    cudaError_t e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) return cuda_fail("graph_capture_end", "cudaGraphInstantiate", e);
    *exec = x;
    return NB_OK;
}
static nb_status graph_launch(nb_backend *be, void *exec, void *s) {
    Ctx *c = ctx_of(be);
    if (c->dead.load()) return unusable(c);
    Guard g(c->dev);
    count_launch();
    NBC_TRY("graph_replay", cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s));
    return NB_OK;
}
static void graph_destroy(nb_backend *be, void *exec) {
    Guard g(device_of(be));
    cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
// The id of the capture s takes part in (0: none): a side stream that waited
// on the captured stream's event is captured too, into the same graph.
static unsigned long long stream_capture_id(nb_backend *be, void *s) {
    Guard g(device_of(be));
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo((cudaStream_t)s, &cs, &id) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    // an invalidated capture still holds the stream: core refuses to free it
    // or wait on it as for an active one
    return cs != cudaStreamCaptureStatusNone ? (id ? id : ~0ull) : 0;
}

// The profiler's marks: timed events recorded on the current stream.
static void *timer_mark(nb_backend *be) {
    Guard g(device_of(be));
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    cudaEventRecord(e, stream_of(be));
    return e;
}
static double timer_elapsed_ms(nb_backend *be, void *a, void *b) {
    Guard g(device_of(be));
    float ms = 0;
    if (cudaEventSynchronize((cudaEvent_t)b) != cudaSuccess ||
        cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b) != cudaSuccess)
        (void)cudaGetLastError();
    return ms;
}
static void timer_free(nb_backend *be, void *m) {
    Guard g(device_of(be));
    cudaEventDestroy((cudaEvent_t)m);
}

void count_sync(nb_backend *be) { n_syncs[device_of(be)].fetch_add(1, std::memory_order_relaxed); }

static void counters(nb_backend *be, nb_device_counters *c) {
    int d = device_of(be);
    c->kernel_launches = n_launches[d].load(std::memory_order_relaxed);
    c->host_syncs = n_syncs[d].load(std::memory_order_relaxed);
    c->h2d_bytes = n_h2d[d].load(std::memory_order_relaxed);
    c->d2h_bytes = n_d2h[d].load(std::memory_order_relaxed);
    jit_counters(d, &c->kernels_compiled, &c->kernel_cache_loads);
}

} // namespace nbc

using namespace nbc;

// ---- the vtable ---------------------------------------------------------------------

static struct nb_backend_i cuda_iface;
static pthread_once_t iface_once = PTHREAD_ONCE_INIT;

// Filled by assignment (the kernel slots from the slot list).
static void fill_iface(void) {
    nb_backend_i *i = &cuda_iface;
    i->norms_16bit = true; // rms_norm.cu's 16-bit forward kernels
    i->info = info;
    i->counters = counters;
    i->graph_capture_begin = graph_capture_begin;
    i->graph_capture_end = graph_capture_end;
    i->graph_launch = graph_launch;
    i->graph_destroy = graph_destroy;
    i->stream_capture_id = stream_capture_id;
    i->device_enter = device_enter;
    i->device_exit = device_exit;
    i->timer_mark = timer_mark;
    i->timer_elapsed_ms = timer_elapsed_ms;
    i->timer_free = timer_free;
    i->stream_create = stream_create;
    i->stream_destroy = stream_destroy;
    i->stream_synchronize = stream_synchronize;
    i->synchronize = synchronize;
    i->event_create = event_create;
    i->event_destroy = event_destroy;
    i->event_record = event_record;
    i->event_wait = event_wait;
    i->event_query = event_query;
    i->event_synchronize = event_synchronize;
    i->alloc = dev_alloc;
    i->free = dev_free;
    i->host_alloc = host_alloc;
    i->host_free = host_free;
    i->memcpy_h2d = memcpy_h2d;
    i->memcpy_d2h = memcpy_d2h;
    i->memcpy_d2d = memcpy_d2d;
    i->memcpy_peer = memcpy_peer;
#define NB_CUDA_SET_1(slot) i->slot = nb_cuda_##slot;
#define NB_CUDA_SET_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CUDA_SET_##cuda(slot)
#include "nb_slots.def"
#undef NB_SLOT
}

// ---- init ---------------------------------------------------------------------------
// Counting devices and reading their properties makes no CUDA context: a
// program that never touches a GPU pays no context, no handle and no
// device memory (cudaSetDevice would make one; the first stream, allocation
// or kernel of a device does).

static nb_status init_device(int d) {
    Ctx *c = &ctxs[d];
    c->dev = d;
    c->n_streams = 0;
    c->lt = nullptr;
    c->pool = nullptr;
    pthread_mutex_init(&c->lock, nullptr);
    NBC_TRY("cuda init", cudaGetDeviceProperties(&c->prop, d));
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    snprintf(c->info, sizeof c->info, "%s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d.%d, driver %d.%d, cuDNN %zu",
             c->prop.name, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
             (double)c->prop.totalGlobalMem / (1 << 30), rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10,
             cudnnGetVersion());
    pthread_once(&iface_once, fill_iface);
    nb_backend *be = &backends[d];
    be->iface = &cuda_iface;
    be->device = NB_CUDA(d);
    be->name = "cuda";
    be->version = NB_BACKEND_INTERFACE_VERSION;
    be->context = c;
    return nb_backend_register(be);
}

extern "C" nb_status nb_cuda_backend_init(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { // no driver or no GPU: no device registered
        (void)cudaGetLastError();
        return NB_OK;
    }
    for (int d = 0; d < n && d < NB_MAX_DEVICES; d++)
        if (init_device(d) != NB_OK) return nb_last_status();
    return NB_OK;
}

// ---- library handles -------------------------------------------------------------------
// Each thread's sets, one per device; at thread exit they go back to their
// device's pool (handles are costly to make: cuDNN's loads its kernels).
struct ThreadHandles {
    Handles *h[NB_MAX_DEVICES] = {};
    ~ThreadHandles() {
        for (int d = 0; d < NB_MAX_DEVICES; d++)
            if (h[d]) {
                Ctx *c = &ctxs[d];
                pthread_mutex_lock(&c->lock);
                h[d]->next = c->pool;
                c->pool = h[d];
                pthread_mutex_unlock(&c->lock);
                h[d] = nullptr; // a later use on this thread (another destructor) makes a fresh set
            }
    }
};
static thread_local ThreadHandles thread_handles;

static Handles *handles_of(Ctx *c) {
    Handles *&h = thread_handles.h[c->dev];
    if (h) return h;
    pthread_mutex_lock(&c->lock);
    if (c->pool) h = c->pool, c->pool = h->next;
    pthread_mutex_unlock(&c->lock);
    if (!h) h = (Handles *)calloc(1, sizeof(Handles));
    if (!h) nb_set_error(NB_ERR_OOM, "cuda: out of host memory for library handles");
    return h;
}

// The calling thread's handles on be's device, set to its current stream;
// made on first use (with the device current: the slots' guard). NULL when
// the library cannot start: cuBLAS's sets the error (NB_ERR_OOM when it
// lacks device memory); cuDNN's callers fall back to their own kernels and
// cuSOLVER's report it.
extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be) {
    Handles *h = handles_of(ctx_of(be));
    if (!h) return nullptr;
    if (!h->dnn && cudnnCreate(&h->dnn) != CUDNN_STATUS_SUCCESS) h->dnn = nullptr;
    if (h->dnn) cudnnSetStream(h->dnn, stream_of(be));
    return h->dnn;
}
extern "C" cusolverDnHandle_t nb_cuda_cusolver(nb_backend *be) {
    Handles *h = handles_of(ctx_of(be));
    if (!h) return nullptr;
    if (!h->solver && cusolverDnCreate(&h->solver) != CUSOLVER_STATUS_SUCCESS) h->solver = nullptr;
    if (h->solver) cusolverDnSetStream(h->solver, stream_of(be));
    return h->solver;
}
extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be) {
    Handles *h = handles_of(ctx_of(be));
    if (!h) return nullptr;
    cublasStatus_t st = h->blas ? CUBLAS_STATUS_SUCCESS : cublasCreate(&h->blas);
    if (st != CUBLAS_STATUS_SUCCESS) {
        h->blas = nullptr;
        nb_set_error(st == CUBLAS_STATUS_ALLOC_FAILED ? NB_ERR_OOM : NB_ERR_DEVICE,
                     "cuda: cublasCreate failed on cuda:%d (status %d)", device_of(be), (int)st);
        return nullptr;
    }
    cublasSetStream(h->blas, stream_of(be));
    return h->blas;
}
// cuBLASLt's handle holds no stream (each call names it): one per device.
extern "C" cublasLtHandle_t nb_cuda_cublaslt(nb_backend *be) {
    Ctx *c = ctx_of(be);
    cublasLtHandle_t lt = __atomic_load_n(&c->lt, __ATOMIC_ACQUIRE);
    if (lt) return lt;
    pthread_mutex_lock(&c->lock);
    if (!c->lt && cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS) __atomic_store_n(&c->lt, lt, __ATOMIC_RELEASE);
    lt = c->lt;
    pthread_mutex_unlock(&c->lock);
    if (!lt) nb_set_error(NB_ERR_DEVICE, "cuda: cublasLtCreate failed on cuda:%d", c->dev);
    return lt;
}
extern "C" int nb_cuda_sm_count(nb_backend *be) { return ctx_of(be)->prop.multiProcessorCount; }
