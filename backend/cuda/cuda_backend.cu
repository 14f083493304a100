// cuda_backend.cu - the CUDA backend's device half: one nb_backend per GPU
// (cuda:N) registered by nb_cuda_backend_init, its context (library handles,
// the cuBLASLt workspace, properties), streams with their device error
// words, events, memory (cudaMalloc under core's caching allocator, pinned
// host buffers, async and peer copies), and the
// vtable of the kernels the other files of backend/cuda implement (the
// slots whose cuda column in backend/nb_slots.def is 1).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <cusolverDn.h>
#include <pthread.h>
#include <string.h>

#include "cuda_common.cuh"
#include <atomic>


namespace nbc {

constexpr int MAX_STREAMS = 16;

struct Ctx {
    int dev;
    cudaDeviceProp prop;
    char info[256];
    pthread_mutex_t lock;
    struct {
        cudaStream_t s;
        int *word;       // device error word
        int *host_word;  // pinned, for reading it back at sync points
    } streams[MAX_STREAMS];
    int n_streams;
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cusolverDnHandle_t solver;
};

static Ctx ctxs[NB_MAX_DEVICES];
// nb_device_counters, per device (launches are counted on the calling
// thread's current CUDA device, which the slots set)
static std::atomic<uint64_t> n_launches[NB_MAX_DEVICES], n_syncs[NB_MAX_DEVICES], n_h2d[NB_MAX_DEVICES],
    n_d2h[NB_MAX_DEVICES];
static nb_backend backends[NB_MAX_DEVICES];

Ctx *ctx_of(nb_backend *be) { return (Ctx *)be->context; }
int device_of(nb_backend *be) { return ctx_of(be)->dev; }

nb_status cuda_fail(const char *slot, const char *call, cudaError_t e) {
    (void)cudaGetLastError(); // clear a non-sticky error
    nb_status st = e == cudaErrorMemoryAllocation ? NB_ERR_OOM : NB_ERR_DEVICE;
    return nb_set_error(st, "%s: %s failed on cuda: %s (%s)", slot, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

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
    for (int i = 0; i < c->n_streams; i++)
        if (c->streams[i].s == s) return c->streams[i].word;
    return c->streams[0].word; // every stream of ours is registered; not reached
}

// After the stream is idle: its error word, reported once and cleared.
static nb_status check_word(Ctx *c, int i) {
    int w = 0;
    cudaError_t e = cudaMemcpy(&w, c->streams[i].word, sizeof w, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return cuda_fail("synchronize", "cudaMemcpy(error word)", e);
    if (!w) return NB_OK;
    cudaMemset(c->streams[i].word, 0, sizeof(int));
    int kind = w / 1024, tag = w % 1024;
    return nb_set_error(err_status(kind), "%s: %s (reported at a sync point on cuda:%d; NB_SYNC_DEBUG=1 "
                        "synchronizes after every kernel)", tag_name(tag), err_text(kind), c->dev);
}

// ---- execution model -------------------------------------------------------------

static void *stream_create(nb_backend *be, nb_stream_kind kind) {
    (void)kind;
    Ctx *c = ctx_of(be);
    cudaSetDevice(c->dev);
    pthread_mutex_lock(&c->lock);
    void *r = nullptr;
    if (c->n_streams < MAX_STREAMS) {
        auto &e = c->streams[c->n_streams];
        cudaError_t err = cudaStreamCreateWithFlags(&e.s, cudaStreamNonBlocking);
        if (err == cudaSuccess) err = cudaMalloc(&e.word, sizeof(int));
        if (err == cudaSuccess) err = cudaMemset(e.word, 0, sizeof(int));
        if (err == cudaSuccess) {
            c->n_streams++;
            r = (void *)e.s;
        } else {
            cuda_fail("stream_create", "cudaStreamCreate", err);
        }
    } else {
        nb_set_error(NB_ERR_DEVICE, "stream_create: at most %d streams per device", MAX_STREAMS);
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

static void stream_destroy(nb_backend *be, void *s) {
    (void)be, (void)s; // streams live for the process, with their words
}

// A host wait on a stream being captured into a graph would fail deep in
// CUDA (and invalidate the capture): name it instead.
static bool capturing(cudaStream_t s) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) (void)cudaGetLastError();
    return cs != cudaStreamCaptureStatusNone;
}
static nb_status no_sync_in_capture(const char *what) {
    return nb_set_error(NB_ERR_STATE, "%s: the host cannot wait for a stream while a CUDA graph is being captured "
                                      "(nb_item, nb_to_host and synchronize are not allowed in a captured step)",
                        what);
}

static nb_status stream_synchronize(nb_backend *be, void *s) {
    Ctx *c = ctx_of(be);
    cudaSetDevice(c->dev);
    if (capturing((cudaStream_t)s)) return no_sync_in_capture("stream_synchronize");
    n_syncs[c->dev].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("stream_synchronize", cudaStreamSynchronize((cudaStream_t)s));
    for (int i = 0; i < c->n_streams; i++)
        if (c->streams[i].s == (cudaStream_t)s) return check_word(c, i);
    return NB_OK;
}

static nb_status synchronize(nb_backend *be) {
    Ctx *c = ctx_of(be);
    cudaSetDevice(c->dev);
    for (int i = 0; i < c->n_streams; i++)
        if (capturing(c->streams[i].s)) return no_sync_in_capture("synchronize");
    n_syncs[c->dev].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("synchronize", cudaDeviceSynchronize());
    nb_status st = NB_OK;
    for (int i = 0; i < c->n_streams; i++) {
        nb_status s = check_word(c, i);
        if (st == NB_OK) st = s;
    }
    return st;
}

static void *event_create(nb_backend *be) {
    cudaSetDevice(device_of(be));
    cudaEvent_t e;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        cuda_fail("event_create", "cudaEventCreate", err);
        return nullptr;
    }
    return (void *)e;
}
static void event_destroy(nb_backend *be, void *e) {
    (void)be;
    cudaEventDestroy((cudaEvent_t)e);
}
static nb_status event_record(nb_backend *be, void *e, void *s) {
    (void)be;
    NBC_TRY("event_record", cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
    return NB_OK;
}
static nb_status event_wait(nb_backend *be, void *s, void *e) {
    (void)be;
    NBC_TRY("event_wait", cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
    return NB_OK;
}
static bool event_query(nb_backend *be, void *e) {
    (void)be;
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r != cudaSuccess && r != cudaErrorNotReady) (void)cudaGetLastError();
    return r != cudaErrorNotReady;
}
static nb_status event_synchronize(nb_backend *be, void *e) {
    n_syncs[device_of(be)].fetch_add(1, std::memory_order_relaxed);
    NBC_TRY("event_synchronize", cudaEventSynchronize((cudaEvent_t)e));
    return NB_OK;
}

// ---- memory ------------------------------------------------------------------------

static void *dev_alloc(nb_backend *be, size_t bytes) {
    cudaSetDevice(device_of(be));
    void *p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return p;
}
static void dev_free(nb_backend *be, void *p, size_t bytes) {
    (void)bytes;
    cudaSetDevice(device_of(be));
    cudaFree(p);
}
static void *host_alloc(nb_backend *be, size_t bytes) {
    cudaSetDevice(device_of(be));
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
    if (capturing(stream_or_current(be, s))) return no_host_copy_in_capture("memcpy_h2d");
    n_h2d[device_of(be)].fetch_add(bytes, std::memory_order_relaxed);
    NBC_TRY("memcpy_h2d", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_or_current(be, s)));
    return NB_OK;
}
static nb_status memcpy_d2h(nb_backend *be, void *dst, const void *src, size_t bytes, void *s) {
    if (capturing(stream_or_current(be, s))) return no_host_copy_in_capture("memcpy_d2h");
    n_d2h[device_of(be)].fetch_add(bytes, std::memory_order_relaxed);
    NBC_TRY("memcpy_d2h", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_or_current(be, s)));
    return NB_OK;
}
static nb_status memcpy_d2d(nb_backend *be, void *dst, const void *src, size_t bytes, void *s) {
    NBC_TRY("memcpy_d2d", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_or_current(be, s)));
    return NB_OK;
}
// Between two GPUs (core orders it after the source's stream and syncs after).
static nb_status memcpy_peer(nb_backend *be, void *dst, nb_backend *src_be, const void *src, size_t bytes) {
    if (src_be->device.type != NB_DEVICE_CUDA)
        return nb_set_error(NB_ERR_UNSUPPORTED, "memcpy_peer: from %s to cuda is a host copy", src_be->name);
    NBC_TRY("memcpy_peer", cudaMemcpyPeerAsync(dst, device_of(be), src, device_of(src_be), bytes, stream_of(be)));
    return NB_OK;
}

static const char *info(nb_backend *be) { return ctx_of(be)->info; }

// ---- CUDA graphs (core/graph.c) ------------------------------------------------------
// Relaxed capture: the caching allocator may call cudaMalloc during a
// capture (a new segment of the graph's pool), which the global and
// thread-local modes forbid.
static nb_status graph_capture_begin(nb_backend *be, void *s) {
    cudaSetDevice(device_of(be));
    NBC_TRY("graph_capture_begin", cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeRelaxed));
    return NB_OK;
}
static nb_status graph_capture_end(nb_backend *be, void *s, void **exec) {
    cudaSetDevice(device_of(be));
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
    cudaSetDevice(device_of(be));
    count_launch();
    NBC_TRY("graph_replay", cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s));
    return NB_OK;
}
static void graph_destroy(nb_backend *be, void *exec) {
    (void)be;
    cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

// The profiler's marks: timed events recorded on the current stream.
static void *timer_mark(nb_backend *be) {
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    cudaEventRecord(e, stream_of(be));
    return e;
}
static double timer_elapsed_ms(nb_backend *be, void *a, void *b) {
    (void)be;
    float ms = 0;
    if (cudaEventSynchronize((cudaEvent_t)b) != cudaSuccess ||
        cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b) != cudaSuccess)
        (void)cudaGetLastError();
    return ms;
}
static void timer_free(nb_backend *be, void *m) {
    (void)be;
    cudaEventDestroy((cudaEvent_t)m);
}

void count_sync(nb_backend *be) { n_syncs[device_of(be)].fetch_add(1, std::memory_order_relaxed); }

static void counters(nb_backend *be, nb_device_counters *c) {
    int d = device_of(be);
    c->kernel_launches = n_launches[d].load(std::memory_order_relaxed);
    c->host_syncs = n_syncs[d].load(std::memory_order_relaxed);
    c->h2d_bytes = n_h2d[d].load(std::memory_order_relaxed);
    c->d2h_bytes = n_d2h[d].load(std::memory_order_relaxed);
}

} // namespace nbc

using namespace nbc;

// ---- the vtable ---------------------------------------------------------------------

static struct nb_backend_i cuda_iface;
static pthread_once_t iface_once = PTHREAD_ONCE_INIT;

// Filled by assignment (the kernel slots from the slot list).
static void fill_iface(void) {
    nb_backend_i *i = &cuda_iface;
    i->info = info;
    i->counters = counters;
    i->graph_capture_begin = graph_capture_begin;
    i->graph_capture_end = graph_capture_end;
    i->graph_launch = graph_launch;
    i->graph_destroy = graph_destroy;
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
#define NB_SLOT(slot, kind, cpu, cuda, check) NB_CUDA_SET_##cuda(slot)
#include "nb_slots.def"
#undef NB_SLOT
}

// ---- init ---------------------------------------------------------------------------

static nb_status init_device(int d) {
    Ctx *c = &ctxs[d];
    memset(c, 0, sizeof *c);
    c->dev = d;
    pthread_mutex_init(&c->lock, nullptr);
    NBC_TRY("cuda init", cudaSetDevice(d));
    NBC_TRY("cuda init", cudaGetDeviceProperties(&c->prop, d));
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS)
        return nb_set_error(NB_ERR_DEVICE, "cuda init: cublasLtCreate failed on cuda:%d", d);
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS)
        return nb_set_error(NB_ERR_DEVICE, "cuda init: cublasCreate failed on cuda:%d", d);
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

// Lazily made library handles (cuDNN and cuSOLVER load large libraries:
// only programs that use them pay for it).
extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be) {
    Ctx *c = ctx_of(be);
    pthread_mutex_lock(&c->lock);
    if (!c->dnn && cudnnCreate(&c->dnn) != CUDNN_STATUS_SUCCESS) c->dnn = nullptr;
    pthread_mutex_unlock(&c->lock);
    if (c->dnn) cudnnSetStream(c->dnn, stream_of(be));
    return c->dnn;
}
extern "C" cusolverDnHandle_t nb_cuda_cusolver(nb_backend *be) {
    Ctx *c = ctx_of(be);
    pthread_mutex_lock(&c->lock);
    if (!c->solver && cusolverDnCreate(&c->solver) != CUSOLVER_STATUS_SUCCESS) c->solver = nullptr;
    pthread_mutex_unlock(&c->lock);
    if (c->solver) cusolverDnSetStream(c->solver, stream_of(be));
    return c->solver;
}
extern "C" cublasLtHandle_t nb_cuda_cublaslt(nb_backend *be) { return ctx_of(be)->lt; }
extern "C" cublasHandle_t nb_cuda_cublas(nb_backend *be) {
    cublasSetStream(ctx_of(be)->blas, stream_of(be));
    return ctx_of(be)->blas;
}
extern "C" int nb_cuda_sm_count(nb_backend *be) { return ctx_of(be)->prop.multiProcessorCount; }
