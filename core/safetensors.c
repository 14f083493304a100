/* safetensors.c - the safetensors reader and writer (format and guarantees
 * in nb_safetensors.h). The reader trusts nothing: it checks the header
 * length against the file before allocating, lets jansson parse the JSON,
 * checks every entry and the tiling of the data section, and only then
 * reads tensor bytes (bounded by the file's size) and checks their CRC-32.
 * The writer copies tensors to the host one at a time (twice: once for the
 * CRCs that the header needs, once to write), so its extra memory is the
 * largest tensor, and publishes the file with write-fsync-rename. The
 * temporary files of saves that were killed (whose process is gone) are
 * removed by the next save to the same path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "nb_impl.h"
#include "nb_safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes host-order data; safetensors is little-endian"
#endif

#define CRC_PREFIX "crc32."

static const char *const st_dtype_names[NB_DTYPE_COUNT] = {
    [NB_F32] = "F32", [NB_F64] = "F64", [NB_I32] = "I32", [NB_I64] = "I64",
    [NB_U8] = "U8",   [NB_BOOL] = "BOOL", [NB_F16] = "F16", [NB_BF16] = "BF16", [NB_I8] = "I8", [NB_I16] = "I16"};

static int st_dtype_parse(const char *s) {
    for (int d = 0; d < NB_DTYPE_COUNT; d++)
        if (!strcmp(s, st_dtype_names[d])) return d;
    return -1;
}

/* zlib's crc32 takes uInt lengths; feed it in chunks. */
static uint32_t crc_of(const void *data, size_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, k);
        p += k, n -= k;
    }
    return (uint32_t)crc;
}

/* ---- reading: a byte source (a file or a buffer) ------------------------- */

typedef struct src {
    const char *label; /* for messages */
    int fd;            /* -1 for a buffer */
    const uint8_t *buf;
    uint64_t size;
} src;

static nb_status src_read(const src *s, uint64_t off, void *dst, size_t n) {
    if (n == 0) return NB_OK;
    if (s->fd < 0) {
        memcpy(dst, s->buf + off, n);
        return NB_OK;
    }
    uint8_t *p = dst;
    while (n > 0) {
        ssize_t r = pread(s->fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return nb_set_error(r == 0 ? NB_ERR_FORMAT : NB_ERR_IO, "safetensors: %s: read failed at byte %llu: %s",
                                s->label, (unsigned long long)off, r == 0 ? "file shrank while reading" : strerror(errno));
        p += r, off += (uint64_t)r, n -= (size_t)r;
    }
    return NB_OK;
}

/* One tensor entry of the header, validated. */
typedef struct entry {
    const char *name; /* borrowed from the JSON until copied */
    int dtype, ndim;
    int64_t shape[NB_MAX_DIMS];
    uint64_t begin, end;
    bool has_crc;
    uint32_t crc;
} entry;

/* A format error; the format string starts with the file's label ("%s: "). */
#define FMT_ERR(...) nb_set_error(NB_ERR_FORMAT, "safetensors: %s: " __VA_ARGS__)

/* Reads a JSON integer >= 0 into *out; false if it is not one. */
static bool json_u64(json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static nb_status parse_entry(const src *s, const char *name, json_t *v, uint64_t data_size, entry *e) {
    e->name = name;
    if (!name[0]) return FMT_ERR("a tensor has an empty name", s->label);
    if (!json_is_object(v)) return FMT_ERR("entry of tensor '%s' is not an object", s->label, name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return FMT_ERR("tensor '%s' has no dtype string", s->label, name);
    if ((e->dtype = st_dtype_parse(json_string_value(dt))) < 0)
        return FMT_ERR("tensor '%s' has dtype '%.32s'; nabla reads F32, F64, I32, I64, I16, I8, U8, BOOL, F16 and BF16", s->label, name,
                       json_string_value(dt));
    if (!json_is_array(sh)) return FMT_ERR("tensor '%s' has no shape array", s->label, name);
    if (json_array_size(sh) > NB_MAX_DIMS)
        return FMT_ERR("tensor '%s' has %zu dims; nabla supports at most %d", s->label, name, json_array_size(sh),
                       NB_MAX_DIMS);
    e->ndim = (int)json_array_size(sh);
    /* The product of the non-zero sizes must stay below 2^60 (as for any
     * nabla tensor), also when another size is 0. */
    uint64_t numel = 1, bytes;
    bool zero = false;
    for (int d = 0; d < e->ndim; d++) {
        uint64_t n;
        if (!json_u64(json_array_get(sh, (size_t)d), &n))
            return FMT_ERR("tensor '%s': shape[%d] is not a non-negative integer", s->label, name, d);
        e->shape[d] = (int64_t)n;
        if (n == 0) zero = true;
        else if (numel > ((uint64_t)INT64_MAX / 8) / n)
            return FMT_ERR("tensor '%s': the element count of its shape overflows", s->label, name);
        else numel *= n;
    }
    bytes = (zero ? 0 : numel) * nb_dtype_size((nb_dtype)e->dtype); /* < 2^63: no overflow */
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_u64(json_array_get(off, 0), &e->begin) ||
        !json_u64(json_array_get(off, 1), &e->end))
        return FMT_ERR("tensor '%s': data_offsets is not [begin, end] of non-negative integers", s->label, name);
    if (e->begin > e->end || e->end > data_size)
        return FMT_ERR("tensor '%s': data_offsets [%llu, %llu] out of range (data section is %llu bytes)", s->label,
                       name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_size);
    if (e->end - e->begin != bytes)
        return FMT_ERR("tensor '%s': data_offsets span %llu bytes but its shape and dtype need %llu", s->label,
                       name, (unsigned long long)(e->end - e->begin), (unsigned long long)bytes);
    return NB_OK;
}

static int entry_cmp(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Sorted by offset, the tensors must tile [0, data_size) exactly. */
static nb_status check_tiling(const src *s, entry *es, int n, uint64_t data_size) {
    qsort(es, (size_t)n, sizeof *es, entry_cmp);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (es[i].begin < at)
            return FMT_ERR("tensors '%s' and '%s' overlap (bytes %llu..%llu and %llu..%llu)", s->label,
                           es[i - 1].name, es[i].name, (unsigned long long)es[i - 1].begin,
                           (unsigned long long)es[i - 1].end, (unsigned long long)es[i].begin,
                           (unsigned long long)es[i].end);
        if (es[i].begin > at)
            return FMT_ERR("bytes %llu..%llu of the data section belong to no tensor (before '%s')", s->label,
                           (unsigned long long)at, (unsigned long long)es[i].begin, es[i].name);
        at = es[i].end;
    }
    if (at != data_size)
        return FMT_ERR("%llu bytes after the last tensor's data", s->label, (unsigned long long)(data_size - at));
    return NB_OK;
}

/* Parses "crc32.<name>" metadata into the entries; checks they cover all or none. */
static nb_status attach_crcs(const src *s, json_t *meta, entry *es, int n) {
    const char *key;
    json_t *v;
    int with = 0;
    json_object_foreach(meta, key, v) {
        if (strncmp(key, CRC_PREFIX, strlen(CRC_PREFIX))) continue;
        const char *tn = key + strlen(CRC_PREFIX), *hex = json_string_value(v);
        entry *e = NULL;
        for (int i = 0; i < n && !e; i++)
            if (!strcmp(es[i].name, tn)) e = &es[i];
        if (!e) return FMT_ERR("metadata '%s' names no tensor", s->label, key);
        char *endp = NULL;
        unsigned long c = strtoul(hex, &endp, 16);
        if (strlen(hex) != 8 || *endp || hex[0] == '-' || hex[0] == '+')
            return FMT_ERR("metadata '%s' is '%.20s', not 8 hex digits", s->label, key, hex);
        e->has_crc = true, e->crc = (uint32_t)c, with++;
    }
    if (with > 0 && with < n)
        for (int i = 0; i < n; i++)
            if (!es[i].has_crc) return FMT_ERR("tensor '%s' has no CRC-32 (metadata '" CRC_PREFIX "%s')", s->label,
                                               es[i].name, es[i].name);
    return NB_OK;
}

void nb_safetensors_free(nb_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) {
        free((char *)f->tensors[i].name);
        nb_release(f->tensors[i].tensor);
    }
    for (int i = 0; i < f->n_meta; i++) free((char *)f->meta[i].key), free((char *)f->meta[i].value);
    free(f->tensors);
    free(f->meta);
    free(f);
}

static nb_status copy_meta(nb_safetensors *f, json_t *meta) {
    size_t n = meta ? json_object_size(meta) : 0;
    f->meta = calloc(n ? n : 1, sizeof *f->meta);
    if (!f->meta) return nb_set_error(NB_ERR_OOM, "safetensors: out of host memory");
    const char *key;
    json_t *v;
    if (!meta) return NB_OK;
    json_object_foreach(meta, key, v) {
        nb_st_pair *p = &f->meta[f->n_meta];
        p->key = strdup(key), p->value = strdup(json_string_value(v));
        f->n_meta++;
        if (!p->key || !p->value) return nb_set_error(NB_ERR_OOM, "safetensors: out of host memory");
    }
    return NB_OK;
}

/* Reads, CRC-checks and wraps each tensor's bytes (entries sorted by offset). */
static nb_status read_tensors(const src *s, uint64_t data_start, const entry *es, int n, nb_safetensors *f) {
    uint64_t max_bytes = 1;
    for (int i = 0; i < n; i++) max_bytes = es[i].end - es[i].begin > max_bytes ? es[i].end - es[i].begin : max_bytes;
    uint8_t *buf = malloc((size_t)max_bytes);
    f->tensors = calloc(n ? (size_t)n : 1, sizeof *f->tensors);
    if (!buf || !f->tensors) return free(buf), nb_set_error(NB_ERR_OOM, "safetensors: out of host memory");
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) {
        const entry *e = &es[i];
        size_t bytes = (size_t)(e->end - e->begin);
        if ((st = src_read(s, data_start + e->begin, buf, bytes))) break;
        if (e->has_crc && crc_of(buf, bytes) != e->crc) {
            st = FMT_ERR("tensor '%s' fails its CRC-32 check (stored %08x, data has %08x)", s->label, e->name,
                         (unsigned)e->crc, (unsigned)crc_of(buf, bytes));
            break;
        }
        if (e->dtype == NB_BOOL)
            for (size_t k = 0; k < bytes; k++) buf[k] = buf[k] != 0;
        nb_named_tensor *nt = &f->tensors[f->n_tensors];
        nt->name = strdup(e->name);
        nt->tensor = nb_tensor_new_unscoped(e->ndim, e->shape, (nb_dtype)e->dtype, nb_default_device());
        f->n_tensors++;
        if (!nt->name) st = nb_set_error(NB_ERR_OOM, "safetensors: out of host memory");
        else if (!nt->tensor) st = nb_last_status();
        else if (bytes) st = nb_copy_from_host(nt->tensor, buf, bytes);
    }
    free(buf);
    return st;
}

/* Validates the JSON header (already parsed) and builds the file. */
static nb_safetensors *load_parsed(const src *s, json_t *root, uint64_t data_start) {
    uint64_t data_size = s->size - data_start;
    if (!json_is_object(root)) return FMT_ERR("the JSON header is not an object", s->label), NULL;
    json_t *meta = json_object_get(root, "__metadata__");
    const char *key;
    json_t *v;
    if (meta && !json_is_object(meta)) return FMT_ERR("__metadata__ is not an object", s->label), NULL;
    if (meta) {
        json_object_foreach(meta, key, v) {
            if (!json_is_string(v)) return FMT_ERR("metadata '%s' is not a string", s->label, key), NULL;
        }
    }
    size_t cap = json_object_size(root);
    entry *es = calloc(cap ? cap : 1, sizeof *es);
    nb_safetensors *f = calloc(1, sizeof *f);
    nb_status st = (!es || !f) ? nb_set_error(NB_ERR_OOM, "safetensors: out of host memory") : NB_OK;
    int n = 0;
    if (!st) {
        json_object_foreach(root, key, v) {
            if (!strcmp(key, "__metadata__")) continue;
            if ((st = parse_entry(s, key, v, data_size, &es[n]))) break;
            n++;
        }
    }
    if (!st) st = check_tiling(s, es, n, data_size);
    if (!st && meta) st = attach_crcs(s, meta, es, n);
    if (!st) st = copy_meta(f, meta);
    if (!st) st = read_tensors(s, data_start, es, n, f);
    free(es);
    if (st) nb_safetensors_free(f);
    return st ? NULL : f;
}

static nb_safetensors *load_src(const src *s) {
    if (s->size < 8)
        return FMT_ERR("file is %llu bytes, shorter than the 8-byte header length", s->label,
                       (unsigned long long)s->size),
               NULL;
    uint8_t le[8];
    if (src_read(s, 0, le, 8)) return NULL;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | le[i];
    if (hlen > s->size - 8)
        return FMT_ERR("header length %llu exceeds the file (%llu bytes)", s->label, (unsigned long long)hlen,
                       (unsigned long long)s->size),
               NULL;
    if (hlen > NB_ST_MAX_HEADER)
        return FMT_ERR("header length %llu exceeds the %llu-byte limit", s->label, (unsigned long long)hlen,
                       (unsigned long long)NB_ST_MAX_HEADER),
               NULL;
    char *h = malloc(hlen ? (size_t)hlen : 1);
    if (!h) return NB_FAIL(NB_ERR_OOM, "safetensors: out of host memory for a %llu-byte header", (unsigned long long)hlen);
    if (src_read(s, 8, h, (size_t)hlen)) return free(h), NULL;
    json_error_t jerr;
    json_t *root = json_loadb(h, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    free(h);
    if (!root)
        return FMT_ERR("bad JSON header at byte %d (line %d, column %d): %s", s->label, jerr.position, jerr.line,
                       jerr.column, jerr.text),
               NULL;
    nb_safetensors *f = load_parsed(s, root, 8 + hlen);
    json_decref(root);
    return f;
}

nb_safetensors *nb_safetensors_load_buffer(const void *data, size_t len, const char *name) {
    if (!data && len) return NB_FAIL(NB_ERR_INVALID_ARG, "safetensors: NULL buffer of %zu bytes", len);
    src s = {.label = name ? name : "<buffer>", .fd = -1, .buf = data, .size = len};
    return load_src(&s);
}

nb_safetensors *nb_safetensors_load(const char *path) {
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "safetensors: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NB_FAIL(NB_ERR_IO, "safetensors: cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return NB_FAIL(NB_ERR_IO, "safetensors: %s is not a regular file", path);
    }
    src s = {.label = path, .fd = fd, .size = (uint64_t)sb.st_size};
    nb_safetensors *f = load_src(&s);
    close(fd);
    return f;
}

/* A NULL file or name: keeps an earlier error (a failed load), else records one. */
static bool null_arg(const char *op, const void *f, const void *name) {
    if (f && name) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, f ? "name" : "file");
    return true;
}

nb_tensor *nb_safetensors_get(const nb_safetensors *f, const char *name) {
    if (null_arg("safetensors_get", f, name)) return NULL;
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return f->tensors[i].tensor;
    return NULL;
}

const char *nb_safetensors_meta(const nb_safetensors *f, const char *key) {
    if (null_arg("safetensors_meta", f, key)) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}

/* ---- writing ---------------------------------------------------------------- */

static nb_status check_save_args(const char *path, const nb_named_tensor *ts, int n, const nb_st_pair *meta,
                                 int n_meta) {
    if (!path || n < 0 || n_meta < 0 || (n && !ts) || (n_meta && !meta))
        return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: NULL path or list, or a negative count");
    for (int i = 0; i < n; i++) {
        if (!ts[i].name || !ts[i].tensor)
            return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: tensor %d has a NULL name or tensor", i);
        if (!ts[i].name[0] || !strcmp(ts[i].name, "__metadata__"))
            return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: tensor %d has the reserved name '%s'", i,
                                ts[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(ts[i].name, ts[j].name))
                return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: name '%s' repeats", ts[i].name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: metadata %d has a NULL key or value", i);
        if (!strncmp(meta[i].key, CRC_PREFIX, strlen(CRC_PREFIX)))
            return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: metadata key '%s' uses the reserved prefix '"
                                CRC_PREFIX "'", meta[i].key);
        for (int j = 0; j < i; j++)
            if (!strcmp(meta[i].key, meta[j].key))
                return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: metadata key '%s' repeats", meta[i].key);
    }
    return NB_OK;
}

/* Adds key: value (a string) to obj; jansson refuses strings that are not UTF-8. */
static nb_status json_put_str(json_t *obj, const char *key, const char *value) {
    json_t *s = json_string(value);
    if (!s || json_object_set_new(obj, key, s))
        return nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: '%s' or its value is not valid UTF-8", key);
    return NB_OK;
}

/* The JSON entry of one tensor: {"dtype": ..., "shape": [...], "data_offsets": [at, at + bytes]}. */
static json_t *tensor_entry(const nb_tensor *t, uint64_t at, uint64_t bytes) {
    json_t *shape = json_array();
    for (int d = 0; shape && d < nb_dim(t); d++)
        if (json_array_append_new(shape, json_integer(nb_size(t, d)))) json_decref(shape), shape = NULL;
    if (!shape) return NULL;
    return json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_names[nb_dtype_of(t)], "shape", shape,
                     "data_offsets", (json_int_t)at, (json_int_t)(at + bytes));
}

/* The metadata object: the caller's pairs, then "crc32.<name>" per tensor. */
static json_t *metadata_object(const nb_named_tensor *ts, int n, const uint32_t *crcs, const nb_st_pair *meta,
                               int n_meta) {
    json_t *md = json_object();
    if (!md) return NB_FAIL(NB_ERR_OOM, "safetensors_save: out of host memory");
    nb_status st = NB_OK;
    for (int i = 0; i < n_meta && !st; i++) st = json_put_str(md, meta[i].key, meta[i].value);
    for (int i = 0; i < n && !st; i++) {
        char hex[9], *key = malloc(strlen(CRC_PREFIX) + strlen(ts[i].name) + 1);
        if (!key) st = nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory");
        else {
            snprintf(hex, sizeof hex, "%08x", (unsigned)crcs[i]);
            strcat(strcpy(key, CRC_PREFIX), ts[i].name);
            st = json_put_str(md, key, hex);
        }
        free(key);
    }
    if (st) json_decref(md);
    return st ? NULL : md;
}

/* The header JSON (compact, in the given order) padded with spaces to a multiple of 8. */
static char *build_header(const nb_named_tensor *ts, int n, const uint32_t *crcs, const nb_st_pair *meta,
                          int n_meta, size_t *len) {
    json_t *root = json_object(), *md = metadata_object(ts, n, crcs, meta, n_meta);
    nb_status st = !md ? nb_last_status() : !root ? nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory")
                                                  : NB_OK;
    if (!st && json_object_size(md) && json_object_set(root, "__metadata__", md))
        st = nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory");
    uint64_t at = 0;
    for (int i = 0; i < n && !st; i++) {
        uint64_t bytes = (uint64_t)nb_numel(ts[i].tensor) * nb_dtype_size(nb_dtype_of(ts[i].tensor));
        json_t *e = tensor_entry(ts[i].tensor, at, bytes);
        if (!e) st = nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory");
        else if (json_object_set_new(root, ts[i].name, e))
            st = nb_set_error(NB_ERR_INVALID_ARG, "safetensors_save: tensor name '%s' is not valid UTF-8", ts[i].name);
        at += bytes;
    }
    char *js = st ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root), json_decref(md);
    if (!js) return st ? NULL : NB_FAIL(NB_ERR_OOM, "safetensors_save: out of host memory");
    size_t l = strlen(js), padded = (l + 7) / 8 * 8;
    char *h = realloc(js, padded + 1);
    if (!h) return free(js), NB_FAIL(NB_ERR_OOM, "safetensors_save: out of host memory");
    memset(h + l, ' ', padded - l);
    h[padded] = 0;
    *len = padded;
    return h;
}

static nb_status write_all(int fd, const void *p, size_t n, const char *tmp) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return nb_set_error(NB_ERR_IO, "safetensors_save: cannot write %s: %s", tmp, strerror(errno));
        b += w, n -= (size_t)w;
    }
    return NB_OK;
}

/* Host copy of tensor t into *buf (grown as needed); its byte count in *bytes. */
static nb_status host_copy(const nb_tensor *t, uint8_t **buf, size_t *cap, size_t *bytes) {
    *bytes = (size_t)nb_numel(t) * nb_dtype_size(nb_dtype_of(t));
    if (*bytes > *cap) {
        uint8_t *nb = realloc(*buf, *bytes);
        if (!nb) return nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory (%zu bytes)", *bytes);
        *buf = nb, *cap = *bytes;
    }
    return *bytes ? nb_to_host(t, *buf, *bytes) : NB_OK;
}

/* Creates "<path>.tmp.<pid>.<k>" exclusively; returns the fd or -1. */
static int open_tmp(const char *path, char *tmp, size_t len) {
    static atomic_uint counter;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

/* Removes "<path>.tmp.<pid>.<k>" files whose process no longer exists: the
 * leftovers of saves killed between open and rename. A live process's
 * temporary file (another save in progress) is left alone. Best effort. */
static void remove_stale_tmps(const char *path) {
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (slash == path) strcpy(dir, "/");
    else if (slash && (size_t)(slash - path) < sizeof dir) memcpy(dir, path, (size_t)(slash - path)), dir[slash - path] = 0;
    else if (slash) return;
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) || strncmp(n + blen, ".tmp.", 5)) continue;
        char *end;
        errno = 0;
        long pid = strtol(n + blen + 5, &end, 10);
        if (errno || pid <= 0 || *end != '.' || end[1] < '0' || end[1] > '9') continue;
        strtoul(end + 1, &end, 10);
        if (*end || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) unlinkat(dirfd(d), n, 0);
    }
    closedir(d);
}

/* Best-effort fsync of path's directory, so that the rename itself is durable. */
static void sync_dir(const char *path) {
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/');
    if (slash == path) strcpy(dir, "/");
    else if (slash && (size_t)(slash - path) < sizeof dir) memcpy(dir, path, (size_t)(slash - path)), dir[slash - path] = 0;
    else if (slash) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
}

nb_status nb_safetensors_save(const char *path, const nb_named_tensor *ts, int n, const nb_st_pair *meta, int n_meta) {
    nb_status st = check_save_args(path, ts, n, meta, n_meta);
    if (st) return st;
    uint32_t *crcs = calloc(n ? (size_t)n : 1, sizeof *crcs);
    uint8_t *buf = NULL;
    size_t cap = 0, bytes = 0, hlen = 0;
    if (!crcs) return nb_set_error(NB_ERR_OOM, "safetensors_save: out of host memory");
    for (int i = 0; i < n && !st; i++)
        if (!(st = host_copy(ts[i].tensor, &buf, &cap, &bytes))) crcs[i] = crc_of(buf, bytes);
    char *header = st ? NULL : build_header(ts, n, crcs, meta, n_meta, &hlen);
    free(crcs);
    if (!header) return free(buf), st ? st : nb_last_status();
    char tmp[4200];
    if (strlen(path) < 4096) remove_stale_tmps(path);
    int fd = strlen(path) < 4096 ? open_tmp(path, tmp, sizeof tmp) : (errno = ENAMETOOLONG, -1);
    if (fd < 0) {
        free(buf), free(header);
        return nb_set_error(NB_ERR_IO, "safetensors_save: cannot create a temporary file beside %s: %s", path,
                            strerror(errno));
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    st = write_all(fd, le, 8, tmp);
    if (!st) st = write_all(fd, header, hlen, tmp);
    for (int i = 0; i < n && !st; i++)
        if (!(st = host_copy(ts[i].tensor, &buf, &cap, &bytes))) st = write_all(fd, buf, bytes, tmp);
    free(buf), free(header);
    if (!st && fsync(fd)) st = nb_set_error(NB_ERR_IO, "safetensors_save: cannot fsync %s: %s", tmp, strerror(errno));
    if (close(fd) && !st) st = nb_set_error(NB_ERR_IO, "safetensors_save: cannot close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path))
        st = nb_set_error(NB_ERR_IO, "safetensors_save: cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st) unlink(tmp);
    else sync_dir(path);
    return st;
}
