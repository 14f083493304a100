/* tensorboard.c - nb_summary_writer: TensorBoard's event files (record
 * framing, CRC-32C, the queue and its writes); the Event protobufs are
 * packed by protobuf-c from proto/tensorboard.proto. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_tensorboard.h"
#include "tensorboard.pb-c.h"

struct nb_summary_writer {
    pthread_mutex_t lock;
    int fd;
    char *path;
    int max_queue;
    double flush_secs;
    uint8_t *q; /* queued records, whole */
    size_t len, cap;
    int queued;
    off_t written; /* bytes on disk: where a failed write is cut back to */
    double last_write;
};

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
 * Debian 12 has no C library for it (zlib's crc32 is the other polynomial);
 * the table is built once. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

/* TFRecord's masked CRC: a CRC of data that holds CRCs is still checkable */
static uint32_t masked_crc32c(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    c ^= 0xFFFFFFFFu;
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static double now_secs(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes the queue at the end of the file; on failure cuts the file back to
 * its last complete record and keeps the queue. Called with the lock held. */
static nb_status flush_locked(nb_summary_writer *w) {
    size_t done = 0;
    while (done < w->len) {
        ssize_t k = pwrite(w->fd, w->q + done, w->len - done, w->written + (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENOSPC;
            if (ftruncate(w->fd, w->written)) { /* the next write starts at `written` anyway */
            }
            return nb_set_error(NB_ERR_IO, "summary_writer: cannot write %s: %s", w->path, strerror(e));
        }
        done += (size_t)k;
    }
    if (w->len && fdatasync(w->fd))
        return nb_set_error(NB_ERR_IO, "summary_writer: cannot sync %s: %s", w->path, strerror(errno));
    w->written += (off_t)w->len;
    w->len = 0;
    w->queued = 0;
    w->last_write = now_secs(CLOCK_MONOTONIC);
    return NB_OK;
}

/* Frames a packed Event as one record in the queue, then writes the queue
 * if it is due. */
static nb_status add_event(nb_summary_writer *w, Tensorboard__Event *ev) {
    size_t n = tensorboard__event__get_packed_size(ev);
    pthread_mutex_lock(&w->lock);
    nb_status st = NB_OK;
    if (w->len + n + 16 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n + 16) cap *= 2;
        uint8_t *q = realloc(w->q, cap);
        if (!q) {
            st = nb_set_error(NB_ERR_OOM, "summary_writer: out of host memory (%zu bytes)", cap);
            goto out;
        }
        w->q = q, w->cap = cap;
    }
    uint8_t *r = w->q + w->len;
    put_le(r, n, 8);
    put_le(r + 8, masked_crc32c(r, 8), 4);
    tensorboard__event__pack(ev, r + 12);
    put_le(r + 12 + n, masked_crc32c(r + 12, n), 4);
    w->len += n + 16;
    if (++w->queued >= w->max_queue || now_secs(CLOCK_MONOTONIC) - w->last_write >= w->flush_secs) st = flush_locked(w);
out:
    pthread_mutex_unlock(&w->lock);
    return st;
}

/* mkdir -p */
static int make_dirs(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        int r = mkdir(path, 0777);
        *p = c;
        if (r && errno != EEXIST) return -1;
        if (!c) return 0;
    }
}

static atomic_int file_uid;

nb_summary_writer *nb_summary_writer_open(const char *log_dir, const nb_summary_writer_options *opt) {
    const char *op = "summary_writer_open";
    nb_summary_writer_options o = opt ? *opt : (nb_summary_writer_options){0};
    if (o.max_queue < 0 || o.flush_secs < 0 || isnan(o.flush_secs))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: max_queue %d and flush_secs %g must be >= 0", op, o.max_queue,
                       o.flush_secs);
    char host[256] = "localhost", dir[4096], name[4096 + 512];
    if (gethostname(host, sizeof host)) strcpy(host, "localhost");
    host[sizeof host - 1] = 0;
    time_t t = time(NULL);
    int k;
    if (log_dir) {
        k = snprintf(dir, sizeof dir, "%s", log_dir);
    } else { /* PyTorch's runs/<datetime>_<host><comment> */
        char stamp[64];
        struct tm tm;
        strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", localtime_r(&t, &tm));
        k = snprintf(dir, sizeof dir, "runs/%s_%s%s", stamp, host, o.comment ? o.comment : "");
    }
    if (k <= 0 || k >= (int)sizeof dir) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: empty or too long a log_dir", op);
    if (make_dirs(dir)) return NB_FAIL(NB_ERR_IO, "%s: cannot make directory %s: %s", op, dir, strerror(errno));
    k = snprintf(name, sizeof name, "%s/events.out.tfevents.%010lld.%s.%d.%d%s", dir, (long long)t, host, (int)getpid(),
                 atomic_fetch_add(&file_uid, 1), o.filename_suffix ? o.filename_suffix : "");
    if (k >= (int)sizeof name) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: too long a file name in %s", op, dir);
    nb_summary_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(name))) {
        free(w);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    w->fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        nb_set_error(NB_ERR_IO, "%s: cannot create %s: %s", op, name, strerror(errno));
        free(w->path), free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->max_queue = o.max_queue ? o.max_queue : 10;
    w->flush_secs = o.flush_secs > 0 ? o.flush_secs : 120;
    w->last_write = now_secs(CLOCK_MONOTONIC);
    /* the file's first record, written at once as TensorBoard's writer does */
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = now_secs(CLOCK_REALTIME);
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (add_event(w, &ev) || nb_summary_writer_flush(w)) {
        char *p = strdup(nb_last_error());
        unlink(w->path);
        nb_summary_writer_close(w);
        nb_set_error(NB_ERR_IO, "%s", p ? p : "summary_writer_open: cannot write the first event");
        free(p);
        return NULL;
    }
    return w;
}

const char *nb_summary_writer_path(const nb_summary_writer *w) {
    return w ? w->path : NB_FAIL(NB_ERR_INVALID_ARG, "summary_writer_path: NULL writer");
}

static nb_status check_args(const char *op, nb_summary_writer *w, const char *tag) {
    if (!w || !tag) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, w ? "tag" : "writer");
    if (!*tag) return nb_set_error(NB_ERR_INVALID_ARG, "%s: empty tag", op);
    return NB_OK;
}

/* An Event holding one Summary.Value at step, written to w. */
static nb_status add_value(nb_summary_writer *w, Tensorboard__Summary__Value *v, int64_t step) {
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    Tensorboard__Summary__Value *vals[1] = {v};
    sum.n_value = 1, sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = now_secs(CLOCK_REALTIME);
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return add_event(w, &ev);
}

nb_status nb_summary_writer_add_scalar(nb_summary_writer *w, const char *tag, double value, int64_t step) {
    nb_status st = check_args("summary_writer_add_scalar", w, tag);
    if (st) return st;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    return add_value(w, &v, step);
}

nb_status nb_summary_writer_add_text(nb_summary_writer *w, const char *tag, const char *text, int64_t step) {
    const char *op = "summary_writer_add_text";
    nb_status st = check_args(op, w, tag);
    if (st) return st;
    if (!text) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL text", op);
    size_t n = strlen(tag) + sizeof "/text_summary";
    char *full = malloc(n);
    if (!full) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    snprintf(full, n, "%s/text_summary", tag);
    Tensorboard__SummaryMetadata__PluginData plugin = TENSORBOARD__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    plugin.plugin_name = "text"; /* content: TextPluginData{version 0}, which packs to no bytes */
    Tensorboard__SummaryMetadata meta = TENSORBOARD__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    Tensorboard__TensorShapeProto__Dim dim = TENSORBOARD__TENSOR_SHAPE_PROTO__DIM__INIT, *dims[1] = {&dim};
    dim.size = 1;
    Tensorboard__TensorShapeProto shape = TENSORBOARD__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 1, shape.dim = dims;
    ProtobufCBinaryData str = {strlen(text), (uint8_t *)text};
    Tensorboard__TensorProto tensor = TENSORBOARD__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORBOARD__DATA_TYPE__DT_STRING;
    tensor.tensor_shape = &shape;
    tensor.n_string_val = 1, tensor.string_val = &str;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = full;
    v.metadata = &meta;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR;
    v.tensor = &tensor;
    st = add_value(w, &v, step);
    free(full);
    return st;
}

/* PyTorch's bins="tensorflow" edges: -b[n-1..0], 0, b[0..n-1] with
 * b[0] = 1e-12, b[k+1] = b[k] * 1.1 while below 1e20 (the same double
 * products as its Python loop), built once. */
static double *tf_edges;
static int n_tf_edges;
static pthread_once_t edges_once = PTHREAD_ONCE_INIT;

static void edges_init(void) {
    int n = 0;
    for (double v = 1e-12; v < 1e20; v *= 1.1) n++;
    tf_edges = malloc(sizeof(double) * (size_t)(2 * n + 1));
    if (!tf_edges) return;
    double v = 1e-12;
    for (int k = 0; k < n; k++, v *= 1.1) tf_edges[n + 1 + k] = v, tf_edges[n - 1 - k] = -v;
    tf_edges[n] = 0;
    n_tf_edges = 2 * n + 1;
}

/* numpy.histogram's bucket of v for edges e[0..m-1]: the last i with
 * e[i] <= v, the top edge in the last bucket; -1 outside [e[0], e[m-1]]. */
static int bucket_of(const double *e, int m, double v) {
    if (v < e[0] || v > e[m - 1]) return -1;
    if (v == e[m - 1]) return m - 2;
    int lo = 0, hi = m - 1; /* e[lo] <= v < e[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (e[mid] <= v) lo = mid;
        else hi = mid;
    }
    return lo;
}

nb_status nb_summary_writer_add_histogram(nb_summary_writer *w, const char *tag, nb_tensor *values, int64_t step) {
    const char *op = "summary_writer_add_histogram";
    nb_status st = check_args(op, w, tag);
    if (st) return st;
    if (!values) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL values", op);
    if (nb_dtype_of(values) == NB_BOOL) return nb_set_error(NB_ERR_DTYPE, "%s: bool values", op);
    int64_t n = nb_numel(values);
    if (n <= 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: no values (PyTorch refuses an empty histogram)", op);
    pthread_once(&edges_once, edges_init);
    int m = n_tf_edges, nb = m - 1;
    double *x = malloc(sizeof(double) * (size_t)n), *count = calloc((size_t)nb, sizeof(double));
    if (!x || !count || !tf_edges) {
        free(x), free(count);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    }
    nb_scope *s = nb_op_scope_begin();
    NB_NO_GRAD { st = nb_to_host(nb_to_dtype(values, NB_F64), x, sizeof(double) * (size_t)n); }
    nb_scope_end(s);
    double lo = st ? 0 : x[0], hi = lo, sum = 0, sum_sq = 0;
    for (int64_t i = 0; !st && i < n; i++) {
        if (!isfinite(x[i])) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: value %g at %lld is not finite", op, x[i], (long long)i);
        lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
        sum += x[i], sum_sq += x[i] * x[i];
        int b = bucket_of(tf_edges, m, x[i]);
        if (b >= 0) count[b] += 1;
    }
    free(x);
    if (st) return free(count), st;
    /* make_histogram's trim: from one bucket before the first used one
     * (or a 0 in front when that is bucket 0) to the last used one */
    int first = -1, last = -1;
    for (int b = 0; b < nb; b++)
        if (count[b] > 0) last = b, first = first < 0 ? b : first;
    if (first < 0) { /* nothing in [-1e20, 1e20] but zeros' neighbours: PyTorch's make_histogram fails too */
        free(count);
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: no value falls in the buckets (|v| in [1e-12, 1e20) or 0)", op);
    }
    Tensorboard__HistogramProto h = TENSORBOARD__HISTOGRAM_PROTO__INIT;
    h.min = lo, h.max = hi, h.num = (double)n, h.sum = sum, h.sum_squares = sum_sq;
    /* numpy's searchsorted over the cumulative used-bucket counts gives
     * start = first and end = last + 1: counts[first-1:last+1] with limits
     * edges[first:last+2] (a 0 in front when first is bucket 0) */
    h.n_bucket = h.n_bucket_limit = (size_t)(last - first + 2);
    h.bucket_limit = (double *)tf_edges + first;
    if (first > 0) {
        h.bucket = count + first - 1;
    } else { /* np.concatenate([[0], counts[:end]]) and limits[0:end+1] */
        h.bucket = malloc(sizeof(double) * h.n_bucket);
        if (!h.bucket) return free(count), nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        h.bucket[0] = 0;
        memcpy(h.bucket + 1, count, sizeof(double) * (h.n_bucket - 1));
    }
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO;
    v.histo = &h;
    st = add_value(w, &v, step);
    if (first == 0) free(h.bucket);
    free(count);
    return st;
}

nb_status nb_summary_writer_flush(nb_summary_writer *w) {
    if (!w) return nb_set_error(NB_ERR_INVALID_ARG, "summary_writer_flush: NULL writer");
    pthread_mutex_lock(&w->lock);
    nb_status st = flush_locked(w);
    pthread_mutex_unlock(&w->lock);
    return st;
}

nb_status nb_summary_writer_close(nb_summary_writer *w) {
    if (!w) return NB_OK;
    nb_status st = nb_summary_writer_flush(w);
    if (close(w->fd) && !st) st = nb_set_error(NB_ERR_IO, "summary_writer_close: %s: %s", w->path, strerror(errno));
    pthread_mutex_destroy(&w->lock);
    free(w->q), free(w->path), free(w);
    return st;
}
