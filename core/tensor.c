/* tensor.c - tensor creation, reference counting, metadata and host access.
 * Storage is reference counted and tagged with its device; a tensor is a
 * (storage, offset, shape, strides, dtype) view of it. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"

/* A metadata query given NULL (a failed op upstream): keeps that op's
 * error, else records one naming the query. */
static void null_meta(const char *fn) {
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL tensor", fn);
}

int64_t nb_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void nb_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

int nb_wrap_dim(int dim, int ndim) {
    int d = dim < 0 ? dim + (ndim ? ndim : 1) : dim; /* a 0-dim tensor takes dim 0 and -1, as PyTorch */
    return d >= 0 && d < (ndim ? ndim : 1) ? d : -1;
}

char *nb_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t len) {
    if (!buf || !len || (ndim > 0 && !shape)) {
        if (buf && len) snprintf(buf, len, "(null)");
        return NB_FAIL(NB_ERR_INVALID_ARG, "fmt_shape: NULL %s", buf && len ? "shape" : "buffer");
    }
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

char *nb_shape_str(const nb_tensor *t, char *buf, size_t len) {
    if (!buf || !len) return null_meta("shape_str"), buf;
    if (!t) return null_meta("shape_str"), snprintf(buf, len, "(null)"), buf;
    char s[NB_SHAPE_BUF];
    snprintf(buf, len, "%s %s", nb_fmt_shape(t->ndim, t->shape, s, sizeof s), nb_dtype_name(t->dtype));
    return buf;
}

bool nb_broadcast_shapes(int na, const int64_t *a, int nbd, const int64_t *b, int *out_ndim,
                         int64_t *out) {
    int n = na > nbd ? na : nbd;
    for (int i = 0; i < n; i++) {
        int64_t x = i < n - na ? 1 : a[i - (n - na)];
        int64_t y = i < n - nbd ? 1 : b[i - (n - nbd)];
        if (x != y && x != 1 && y != 1) return false;
        out[i] = x == 1 ? y : x;
    }
    *out_ndim = n;
    return true;
}

/* ---- storage ------------------------------------------------------------ */

/* Storage on dev, allocated for the calling thread's current stream there. */
static nb_storage *storage_new(size_t bytes, nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    nb_storage *s = nb_host_calloc(1, sizeof *s);
    if (!s) return NB_FAIL(NB_ERR_OOM, "tensor: out of host memory");
    s->data = nb_alloc_raw(be, bytes, nb_backend_current_stream(be), &s->block);
    if (!s->data) {
        free(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->bytes = bytes;
    s->device = be->device;
    s->backend = be;
    return s;
}

static void storage_release(nb_storage *s) {
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (s->release) s->release(s->release_ctx);
    else nb_free_raw(s->backend, s->block);
    free(s);
}

/* ---- tensors ---------------------------------------------------------- */

static bool check_shape(const char *op, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: ndim %d outside [0, %d]", op, ndim, NB_MAX_DIMS);
        return false;
    }
    if (ndim && !shape) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL shape for %d dims", op, ndim);
        return false;
    }
    int64_t n = 1; /* the product of max(size, 1): [0, 2^62, 2^62] fails as [2^62, 2^62, 0] does */
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || n > INT64_MAX / 8 / (shape[i] ? shape[i] : 1)) {
            char b[NB_SHAPE_BUF];
            nb_set_error(NB_ERR_INVALID_ARG, "%s: bad shape %s", op, nb_fmt_shape(ndim, shape, b, sizeof b));
            return false;
        }
        n *= shape[i] ? shape[i] : 1;
    }
    return true;
}

static nb_tensor *tensor_alloc(nb_storage *s, nb_dtype dt, int ndim, const int64_t *shape,
                               const int64_t *strides, int64_t offset) {
    nb_tensor *t = nb_host_calloc(1, sizeof *t);
    if (!t) return NB_FAIL(NB_ERR_OOM, "tensor: out of host memory");
    atomic_init(&t->refcount, 1);
    t->magic = NB_TENSOR_LIVE;
    atomic_fetch_add(&s->refcount, 1);
    t->storage = s;
    t->dtype = dt;
    t->ndim = ndim;
    t->offset = offset;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    if (strides) memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    else nb_contiguous_strides(ndim, shape, t->strides);
    return t;
}

nb_tensor *nb_tensor_new_unscoped(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev) {
    if (!check_shape("empty", ndim, shape)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "empty: bad dtype %d", (int)dt);
    nb_storage *s = storage_new((size_t)nb_shape_numel(ndim, shape) * nb_dtype_size(dt), dev);
    if (!s) return NULL;
    nb_tensor *t = tensor_alloc(s, dt, ndim, shape, NULL, 0);
    storage_release(s);
    return t;
}

nb_tensor *nb_tensor_alias_unscoped(const nb_tensor *t) {
    return tensor_alloc(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
}

void nb_tensor_take_storage(nb_tensor *t, const nb_tensor *src) {
    if (t->ndim != src->ndim || t->dtype != src->dtype || memcmp(t->shape, src->shape, sizeof(int64_t) * (size_t)t->ndim))
        abort(); /* a broken invariant of the caller */
    atomic_fetch_add(&src->storage->refcount, 1);
    storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    memcpy(t->strides, src->strides, sizeof t->strides);
}

nb_tensor *nb_tensor_from_host_memory(void *data, int ndim, const int64_t *shape, nb_dtype dt, void (*release)(void *),
                                      void *ctx) {
    const char *op = "tensor_from_host_memory";
    if (!check_shape(op, ndim, shape)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "%s: bad dtype %d", op, (int)dt);
    size_t bytes = (size_t)nb_shape_numel(ndim, shape) * nb_dtype_size(dt);
    if ((!data && bytes) || ((uintptr_t)data % nb_dtype_size(dt)))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %s data at %p (it must be non-NULL and aligned to %zu bytes)", op,
                       nb_dtype_name(dt), data, nb_dtype_size(dt));
    nb_backend *be = nb_backend_get(NB_CPU);
    nb_storage *s = be ? nb_host_calloc(1, sizeof *s) : NULL;
    if (!s) return be ? NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op) : NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data, s->bytes = bytes, s->device = be->device, s->backend = be;
    nb_tensor *t = tensor_alloc(s, dt, ndim, shape, NULL, 0);
    storage_release(s);
    t = nb_scope_adopt(t);
    if (t) s->release = release, s->release_ctx = ctx; /* only now: on any failure the caller keeps the memory */
    return t;
}

nb_tensor *nb_tensor_new(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev) {
    return nb_scope_adopt(nb_tensor_new_unscoped(ndim, shape, dt, dev));
}

nb_status nb_tensor_rebase(nb_tensor *t, nb_tensor *base, int64_t offset) {
    if (!t || !base) return nb_set_error(NB_ERR_INVALID_ARG, "tensor_rebase: NULL %s", t ? "base" : "tensor");
    int64_t n = nb_numel(t);
    if (t->dtype != base->dtype || base->storage->backend != t->storage->backend || offset < 0 ||
        offset + n > (int64_t)(base->storage->bytes / nb_dtype_size(base->dtype)))
        return nb_set_error(NB_ERR_INVALID_ARG, "tensor_rebase: the buffer does not hold the tensor at %lld",
                            (long long)offset);
    nb_scope *s = nb_op_scope_begin(); /* the copy's view dies here, not in the caller's scope (a reference to base) */
    nb_tensor *dst = nb_tensor_view_of(base, t->ndim, t->shape, NULL, offset);
    nb_status st = dst ? nb_copy_(dst, t) : nb_last_status();
    nb_scope_end(s);
    if (st) return st;
    atomic_fetch_add(&base->storage->refcount, 1);
    storage_release(t->storage);
    t->storage = base->storage;
    t->offset = offset;
    nb_contiguous_strides(t->ndim, t->shape, t->strides);
    return NB_OK;
}

nb_tensor *nb_tensor_view_of(const nb_tensor *t, int ndim, const int64_t *shape,
                             const int64_t *strides, int64_t offset) {
    if (!t) return NB_FAIL(NB_ERR_INVALID_ARG, "view: NULL tensor");
    if (!check_shape("view", ndim, shape)) return NULL; /* an expand to [2^40, 2^40] must not wrap numel */
    return nb_scope_adopt(tensor_alloc(t->storage, t->dtype, ndim, shape, strides, offset));
}

nb_tensor *nb_tensor_view_as(const nb_tensor *t, nb_dtype dt, int ndim, const int64_t *shape,
                             const int64_t *strides, int64_t offset) {
    if (!check_shape("view", ndim, shape)) return NULL;
    return nb_scope_adopt(tensor_alloc(t->storage, dt, ndim, shape, strides, offset));
}

/* ---- ownership debugging ------------------------------------------------
 * Under NB_DEBUG_OWNERSHIP=1 a tensor's last release frees its storage,
 * gradient and graph as always, but keeps the struct, marked freed and
 * pointing at an empty storage, with a note of what freed it; a later use
 * (any op, nb_item, nb_to_host, nb_backward) or release fails with an error
 * naming the tensor and that note. The last QUARANTINE freed tensors are
 * kept; older ones are freed for good. */
#define QUARANTINE 65536

bool nb_own_debug;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static nb_tensor *quarantine[QUARANTINE];
static size_t n_quarantined;
static _Thread_local const char *releaser;
static _Thread_local unsigned bad_releases;
static nb_storage dead_storage = {.device = {NB_DEVICE_CPU, 0}}; /* what a freed tensor points at */

__attribute__((constructor)) static void read_own_debug(void) { /* at load: no check on the hot path */
    const char *e = getenv("NB_DEBUG_OWNERSHIP");
    if (e && *e && strcmp(e, "0") != 0) nb_own_debug = true;
}
void nb_set_ownership_debug(bool on) { nb_own_debug = on; }
void nb_own_set_releaser(const char *what) { releaser = what; }
unsigned nb_own_bad_releases(void) { return bad_releases; }

bool nb_tensor_freed(const nb_tensor *t, const char *op) {
    if (!nb_own_debug || !t || t->magic == NB_TENSOR_LIVE) return false;
    char b[NB_SHAPE_BUF];
    nb_set_error(NB_ERR_STATE, "%s: a freed tensor (shape %s, %s), freed by %s: a tensor lives until the scope "
                 "that owns it ends or its last nb_release; keep it longer with nb_retain",
                 op, nb_fmt_shape(t->ndim, t->shape, b, sizeof b), nb_dtype_name(t->dtype),
                 t->magic == NB_TENSOR_FREED && t->freed_by ? t->freed_by : "an unknown release (not a tensor?)");
    return true;
}

static void quarantine_put(nb_tensor *t) {
    char note[192];
    snprintf(note, sizeof note, "%s", releaser ? releaser : "nb_release (a reference given up by hand)");
    t->freed_by = strdup(note);
    t->magic = NB_TENSOR_FREED;
    t->storage = &dead_storage;
    t->grad = NULL, t->grad_fn = NULL, t->hooks = NULL, t->cast_copy = NULL;
    pthread_mutex_lock(&own_lock);
    nb_tensor *old = quarantine[n_quarantined % QUARANTINE];
    quarantine[n_quarantined++ % QUARANTINE] = t;
    pthread_mutex_unlock(&own_lock);
    if (old) free(old->freed_by), free(old);
}

void nb_retain(nb_tensor *t) {
    if (!t || nb_tensor_freed(t, "retain")) return;
    atomic_fetch_add(&t->refcount, 1);
}

nb_tape_hooks nb_tape;

void nb_release(nb_tensor *t) {
    if (!t) return;
    if (nb_tensor_freed(t, "release")) { /* released more often than retained */
        bad_releases++;
        fprintf(stderr, "nabla: %s\n", nb_last_error());
        return;
    }
    if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
    nb_release(t->grad);
    nb_release(t->cast_copy);
    if (t->hooks) nb_tape.free_hooks(t->hooks);   /* hooks and a grad_fn exist only once */
    if (t->grad_fn) nb_tape.release(t->grad_fn); /* the tape has registered (nb_impl.h) */
    storage_release(t->storage);
    if (nb_own_debug) quarantine_put(t);
    else free(t);
}

nb_tensor *nb_empty_on(int ndim, const int64_t *shape, nb_dtype dt, nb_device dev) {
    return nb_tensor_new(ndim, shape, dt, dev);
}

nb_tensor *nb_empty(int ndim, const int64_t *shape, nb_dtype dt) {
    return nb_tensor_new(ndim, shape, dt, nb_default_device());
}

nb_tensor *nb_full_on(int ndim, const int64_t *shape, double value, nb_dtype dt, nb_device dev) {
    nb_tensor *t = nb_tensor_new(ndim, shape, dt, dev);
    if (t && nb_fill_(t, value) != NB_OK) return NULL;
    return t;
}

nb_tensor *nb_full(int ndim, const int64_t *shape, double value, nb_dtype dt) {
    return nb_full_on(ndim, shape, value, dt, nb_default_device());
}

nb_tensor *nb_zeros(int ndim, const int64_t *shape, nb_dtype dt) { return nb_full(ndim, shape, 0, dt); }
nb_tensor *nb_ones(int ndim, const int64_t *shape, nb_dtype dt) { return nb_full(ndim, shape, 1, dt); }
nb_tensor *nb_scalar(double value, nb_dtype dt) { return nb_full(0, NULL, value, dt); }

nb_tensor *nb_empty_like(const nb_tensor *t) {
    if (!t) return null_meta("empty_like"), NULL;
    return nb_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
}

nb_tensor *nb_scalar_like(const nb_tensor *t, double value, nb_dtype dt) {
    if (!t) return null_meta("scalar_like"), NULL;
    nb_tensor *r = nb_tensor_new(0, NULL, dt, t->storage->device);
    if (!r) return NULL;
    nb_kview v = nb_kview_of(r);
    return nb_kernel_fill(NB_BE(r), &v, value) == NB_OK ? r : NULL;
}

nb_tensor *nb_zeros_like(const nb_tensor *t) {
    if (!t) return null_meta("zeros_like"), NULL;
    nb_tensor *r = nb_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
    return r && nb_fill_(r, 0) == NB_OK ? r : NULL;
}

nb_tensor *nb_ones_like(const nb_tensor *t) {
    if (!t) return null_meta("ones_like"), NULL;
    nb_tensor *r = nb_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
    return r && nb_fill_(r, 1) == NB_OK ? r : NULL;
}

nb_tensor *nb_from_data_on(const void *host, int ndim, const int64_t *shape, nb_dtype dt, nb_device dev) {
    if (!host) return NB_FAIL(NB_ERR_INVALID_ARG, "from_data: NULL data");
    nb_tensor *t = nb_tensor_new(ndim, shape, dt, dev);
    if (!t) return NULL;
    size_t bytes = (size_t)nb_numel(t) * nb_dtype_size(dt);
    return nb_copy_from_host(t, host, bytes) == NB_OK ? t : NULL;
}

nb_tensor *nb_from_data(const void *host, int ndim, const int64_t *shape, nb_dtype dt) {
    return nb_from_data_on(host, ndim, shape, dt, nb_default_device());
}

nb_tensor *nb_arange_on(double start, double end, double step, nb_dtype dt, nb_device dev) {
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return NB_FAIL(NB_ERR_INVALID_ARG, "arange: bad range start=%g end=%g step=%g", start, end, step);
    double n = ceil((end - start) / step);
    if (n > (double)(INT64_MAX / 8))
        return NB_FAIL(NB_ERR_INVALID_ARG, "arange: %g elements are too many (start=%g end=%g step=%g)", n, start,
                       end, step);
    int64_t len = n > 0 ? (int64_t)n : 0;
    nb_tensor *t = nb_tensor_new(1, &len, dt, dev);
    if (!t) return NULL;
    nb_kview v = nb_kview_of(t);
    return nb_kernel_arange(NB_BE(t), &v, start, step) == NB_OK ? t : NULL;
}

nb_tensor *nb_arange(double start, double end, double step, nb_dtype dt) {
    return nb_arange_on(start, end, step, dt, nb_default_device());
}

/* ---- metadata ------------------------------------------------------------- */

int nb_dim(const nb_tensor *t) {
    if (!t) return null_meta("dim"), -1;
    return t->ndim;
}
int64_t nb_size(const nb_tensor *t, int dim) {
    if (!t) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "size: NULL tensor");
        return -1;
    }
    int d = t->ndim ? nb_wrap_dim(dim, t->ndim) : -1; /* a 0-dim tensor has no dim to ask about */
    if (d < 0) {
        char b[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_INVALID_ARG, "size: dim %d out of range for a %d-dim tensor of shape %s", dim, t->ndim,
                     nb_fmt_shape(t->ndim, t->shape, b, sizeof b));
        return -1;
    }
    return t->shape[d];
}
const int64_t *nb_shape(const nb_tensor *t) {
    if (!t) return null_meta("shape"), NULL;
    return t->shape;
}
const int64_t *nb_strides(const nb_tensor *t) {
    if (!t) return null_meta("strides"), NULL;
    return t->strides;
}
int64_t nb_numel(const nb_tensor *t) {
    if (!t) return null_meta("numel"), -1;
    return nb_shape_numel(t->ndim, t->shape);
}
nb_dtype nb_dtype_of(const nb_tensor *t) {
    if (!t) return null_meta("dtype_of"), NB_DTYPE_COUNT;
    return t->dtype;
}
nb_device nb_device_of(const nb_tensor *t) {
    if (!t) return null_meta("device_of"), (nb_device){NB_DEVICE_TYPE_COUNT, -1};
    return t->storage->device;
}

bool nb_is_contiguous(const nb_tensor *t) {
    if (!t) return null_meta("is_contiguous"), false;
    if (nb_numel(t) == 0) return true; /* as PyTorch: no element, any strides */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

nb_kview nb_kview_of(const nb_tensor *t) {
    nb_kview v;
    v.data = (char *)t->storage->data + (size_t)t->offset * nb_dtype_size(t->dtype);
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) v.shape[i] = t->shape[i], v.strides[i] = t->strides[i];
    return v;
}

nb_kview nb_kview_expand(const nb_tensor *t, int ndim, const int64_t *shape) {
    nb_kview v = nb_kview_of(t);
    int lead = ndim - t->ndim;
    NB_ASSERT(lead >= 0);
    v.ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        int j = i - lead;
        int64_t sz = j >= 0 ? t->shape[j] : 1;
        v.strides[i] = j >= 0 && sz == shape[i] ? t->strides[j] : 0;
        NB_ASSERT(sz == shape[i] || sz == 1);
        v.shape[i] = shape[i];
    }
    return v;
}

/* ---- host access ------------------------------------------------------- */

/* The stream handle of s on be (NULL: the current stream). */
static void *stream_handle(nb_backend *be, nb_stream *s) {
    return s ? nb_stream_handle(s) : nb_backend_current_stream(be);
}

/* Copies between host and device memory on be's stream (a handle). Inside
 * a CUDA graph capture such a copy would become a graph node that every
 * replay runs again on the same host address (a freed buffer, nb_item's
 * stack slot): it is refused before anything is enqueued, and the capture
 * is marked failed (nb_graph_capture_end reports it). The backend refuses a
 * copy on another stream that joined the capture. */
static nb_status host_copy(nb_backend *be, bool to_host, void *dst, const void *src, size_t bytes, void *stream) {
    nb_status st;
    if (nb_graph_capturing_stream(be, stream))
        st = nb_set_error(NB_ERR_STATE, "%s: a copy between host and device memory cannot be captured in a graph "
                                        "(each replay would repeat it on the same host memory): do it outside the "
                                        "captured step (nb_item, nb_to_host, nb_from_data, nb_copy_from_host)",
                          to_host ? "to_host" : "copy_from_host");
    else
        st = to_host ? be->iface->memcpy_d2h(be, dst, src, bytes, stream)
                     : be->iface->memcpy_h2d(be, dst, src, bytes, stream);
    if (st == NB_ERR_STATE) nb_graph_fail(be);
    return st;
}

/* dst and src are contiguous with the same bytes; copies across devices
 * without a bounce through pageable host memory where the backends allow:
 * to the CPU by the source's d2h, from the CPU by the destination's h2d,
 * between devices by the destination's peer copy (else through a pinned
 * host buffer). Synchronous for the host. */
static nb_status copy_across(nb_tensor *dst, const nb_tensor *src, size_t bytes) {
    nb_backend *db = dst->storage->backend, *sb = src->storage->backend;
    nb_kview d = nb_kview_of(dst), s = nb_kview_of(src);
    if (!bytes) return NB_OK;
    if (dst->storage->device.type == NB_DEVICE_CPU) {
        nb_status st = host_copy(sb, true, d.data, s.data, bytes, nb_backend_current_stream(sb));
        return st ? st : sb->iface->stream_synchronize(sb, nb_backend_current_stream(sb));
    }
    if (src->storage->device.type == NB_DEVICE_CPU) {
        /* the source may be freed or rewritten once we return: sync first */
        nb_status st = host_copy(db, false, d.data, s.data, bytes, nb_backend_current_stream(db));
        return st ? st : db->iface->stream_synchronize(db, nb_backend_current_stream(db));
    }
    if (db->iface->memcpy_peer) {
        nb_status st = sb->iface->stream_synchronize(sb, nb_backend_current_stream(sb));
        if (st == NB_OK) st = db->iface->memcpy_peer(db, d.data, sb, s.data, bytes);
        return st ? st : db->iface->stream_synchronize(db, nb_backend_current_stream(db));
    }
    void *buf = nb_host_alloc(src->storage->device, bytes);
    if (!buf) return nb_last_status();
    nb_status st = host_copy(sb, true, buf, s.data, bytes, nb_backend_current_stream(sb));
    if (st == NB_OK) st = sb->iface->stream_synchronize(sb, nb_backend_current_stream(sb));
    if (st == NB_OK) st = host_copy(db, false, d.data, buf, bytes, nb_backend_current_stream(db));
    if (st == NB_OK) st = db->iface->stream_synchronize(db, nb_backend_current_stream(db));
    nb_host_free(src->storage->device, buf);
    return st;
}

nb_status nb_to_host_async(const nb_tensor *t, void *dst, size_t bytes, nb_stream *s) {
    if (!t || !dst) return nb_set_error(NB_ERR_INVALID_ARG, "to_host: NULL argument");
    if (nb_tensor_freed(t, "to_host")) return NB_ERR_STATE;
    size_t need = (size_t)nb_numel(t) * nb_dtype_size(t->dtype);
    if (bytes < need) return nb_set_error(NB_ERR_INVALID_ARG, "to_host: buffer of %zu bytes, need %zu", bytes, need);
    if (!need) return NB_OK;
    nb_backend *be = t->storage->backend;
    if (s && !nb_same_device(nb_stream_device(s), t->storage->device))
        return nb_set_error(NB_ERR_DEVICE, "to_host: the stream is not on the tensor's device");
    if (!nb_is_contiguous(t)) {
        /* the contiguous copy is made on the current stream: s waits for it */
        nb_scope *sc = nb_op_scope_begin();
        nb_tensor *c = nb_dense_as(t, t->dtype);
        nb_stream *cur = nb_current_stream(t->storage->device);
        nb_status st = c ? NB_OK : nb_last_status();
        if (st == NB_OK && s && s != cur) st = nb_stream_wait_stream(s, cur);
        if (st == NB_OK) st = nb_to_host_async(c, dst, bytes, s);
        if (st == NB_OK && c != t) st = nb_record_stream(c, s ? s : cur);
        nb_scope_end(sc);
        return st;
    }
    nb_kview v = nb_kview_of(t);
    return host_copy(be, true, dst, v.data, need, stream_handle(be, s));
}

nb_status nb_to_host(const nb_tensor *t, void *dst, size_t bytes) {
    nb_status st = nb_to_host_async(t, dst, bytes, NULL);
    if (st != NB_OK) return st;
    nb_backend *be = t->storage->backend; /* a sync point: pending errors surface here */
    return be->iface->stream_synchronize(be, nb_backend_current_stream(be));
}

double nb_item(const nb_tensor *t) {
    if (!t) return null_meta("item"), NAN;
    if (nb_tensor_freed(t, "item")) return NAN;
    if (nb_numel(t) != 1) {
        char b[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_SHAPE, "item: tensor of shape %s has %lld elements, not 1",
                     nb_fmt_shape(t->ndim, t->shape, b, sizeof b), (long long)nb_numel(t));
        return NAN;
    }
    double v = NAN;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *d = nb_dense_as(t, NB_F64);
    if (d) nb_to_host(d, &v, sizeof v);
    nb_scope_end(s);
    return v;
}

nb_status nb_copy_from_host_async(nb_tensor *t, const void *src, size_t bytes, nb_stream *s) {
    if (!t || !src) return nb_set_error(NB_ERR_INVALID_ARG, "copy_from_host: NULL argument");
    if (nb_tensor_freed(t, "copy_from_host")) return NB_ERR_STATE;
    size_t need = (size_t)nb_numel(t) * nb_dtype_size(t->dtype);
    if (bytes < need) return nb_set_error(NB_ERR_INVALID_ARG, "copy_from_host: %zu bytes given, need %zu", bytes, need);
    if (!nb_is_contiguous(t)) return nb_set_error(NB_ERR_INVALID_ARG, "copy_from_host: tensor is not contiguous");
    if (s && !nb_same_device(nb_stream_device(s), t->storage->device))
        return nb_set_error(NB_ERR_DEVICE, "copy_from_host: the stream is not on the tensor's device");
    if (!need) return NB_OK;
    nb_kview v = nb_kview_of(t);
    nb_backend *be = t->storage->backend;
    nb_bump_version(t);
    return host_copy(be, false, v.data, src, need, stream_handle(be, s));
}

nb_status nb_copy_from_host(nb_tensor *t, const void *src, size_t bytes) {
    nb_status st = nb_copy_from_host_async(t, src, bytes, NULL);
    if (st != NB_OK || !t) return st;
    /* from pinned memory the copy is asynchronous: src is reusable only once it has run */
    nb_backend *be = t->storage->backend;
    return be->iface->stream_synchronize(be, nb_backend_current_stream(be));
}

void *nb_host_alloc(nb_device dev, size_t bytes) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return NULL;
    void *p = be->iface->host_alloc ? be->iface->host_alloc(be, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
    return p ? p : NB_FAIL(NB_ERR_OOM, "host_alloc: out of pinned host memory allocating %zu bytes", bytes);
}

void nb_host_free(nb_device dev, void *ptr) {
    if (!ptr) return;
    nb_backend *be = nb_backend_get(dev);
    if (!be) return;
    if (be->iface->host_free) be->iface->host_free(be, ptr);
    else free(ptr);
}

nb_status nb_fill_(nb_tensor *t, double value) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "fill_: NULL tensor");
    nb_bump_version(t);
    nb_kview v = nb_kview_of(t);
    return nb_kernel_fill(NB_BE(t), &v, value);
}

nb_status nb_copy_(nb_tensor *dst, const nb_tensor *src) {
    if (!dst || !src) return nb_set_error(NB_ERR_INVALID_ARG, "copy_: NULL tensor");
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    int nd;
    int64_t shp[NB_MAX_DIMS];
    if (src->ndim > dst->ndim || !nb_broadcast_shapes(dst->ndim, dst->shape, src->ndim, src->shape, &nd, shp) ||
        nb_shape_numel(nd, shp) != nb_numel(dst))
        return nb_set_error(NB_ERR_SHAPE, "copy_: source %s does not broadcast to destination %s",
                            nb_fmt_shape(src->ndim, src->shape, a, sizeof a),
                            nb_fmt_shape(dst->ndim, dst->shape, b, sizeof b));
    if (!nb_same_device(src->storage->device, dst->storage->device)) { /* move it over, then copy there */
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *moved = nb_to_device((nb_tensor *)src, dst->storage->device);
        nb_status st = moved ? nb_copy_(dst, moved) : nb_last_status();
        nb_scope_end(s);
        return st;
    }
    nb_bump_version(dst);
    nb_kview d = nb_kview_of(dst), s = nb_kview_expand(src, dst->ndim, dst->shape);
    return nb_kernel_copy(NB_BE(dst), &d, &s);
}

nb_tensor *nb_dense_as(const nb_tensor *t, nb_dtype dt) {
    if (t->dtype == dt && nb_is_contiguous(t)) return (nb_tensor *)t;
    nb_tensor *c = nb_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (!c) return NULL;
    nb_kview vd = nb_kview_of(c), vs = nb_kview_of(t);
    return nb_kernel_copy(NB_BE(t), &vd, &vs) == NB_OK ? c : NULL;
}

nb_tensor *nb_to_device(nb_tensor *t, nb_device dev) {
    if (!t) return null_meta("to_device"), NULL;
    if (nb_same_device(t->storage->device, dev)) {
        nb_retain(t);
        return nb_scope_adopt(t);
    }
    if (!nb_backend_get(dev)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *c = nb_dense_as(t, t->dtype);
    nb_tensor *r = c ? nb_tensor_new_unscoped(t->ndim, t->shape, t->dtype, dev) : NULL;
    if (r && copy_across(r, c, (size_t)nb_numel(c) * nb_dtype_size(c->dtype)) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    nb_scope_end(s);
    return nb_scope_adopt(r);
}

void *nb_data_ptr(const nb_tensor *t) {
    if (!t) return null_meta("data_ptr"), NULL;
    return (char *)t->storage->data + t->offset * (int64_t)nb_dtype_size(t->dtype);
}

void nb_increment_version(nb_tensor *t) { nb_bump_version(t); }

int64_t nb_storage_offset(const nb_tensor *t) {
    if (!t) return null_meta("storage_offset"), -1;
    return t->offset;
}

bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b) { return a && b && a->storage == b->storage; }
