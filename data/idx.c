/* idx.c - a reader for IDX files (the MNIST format, raw or gzip-compressed).
 * zlib's gzread reads both transparently; the header is validated before
 * any allocation (magic, ubyte type, ndim, nonzero sizes, a size cap, and
 * for a raw file its exact length), then the data is read in bounded chunks
 * so a truncated file or a corrupt gzip stream gives NB_ERR_FORMAT, and one
 * more byte is read to reject trailing garbage. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "nb_data.h"
#include "nb_impl.h"

/* deflate cannot compress better than about 1032:1 (zlib's FAQ), so a .gz
 * file of S bytes never holds more than this many bytes of data. */
#define NB_GZ_MAX_RATIO 1032u
#define NB_IDX_CHUNK ((unsigned)1 << 24) /* bytes per gzread */

typedef struct idx_file {
    const char *path;
    gzFile gz;
    uint64_t file_bytes; /* on disk */
} idx_file;

/* zlib's message without the "path: " it starts with. */
static const char *gz_msg(const idx_file *f, const char *msg) {
    size_t n = strlen(f->path);
    return strncmp(msg, f->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

/* Reads exactly n bytes. Returns NB_OK, or NB_ERR_FORMAT naming `what`
 * (truncated or corrupt) / NB_ERR_IO (a read error of the file system). */
static nb_status read_exact(idx_file *f, void *dst, uint64_t n, const char *what) {
    uint8_t *p = dst;
    uint64_t got = 0;
    while (got < n) {
        uint64_t left = n - got;
        unsigned ask = left < NB_IDX_CHUNK ? (unsigned)left : NB_IDX_CHUNK;
        int r = gzread(f->gz, p + got, ask);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f->gz, &zerr);
            if (zerr == Z_ERRNO)
                return nb_set_error(NB_ERR_IO, "idx_read: %s: read failed: %s", f->path, strerror(errno));
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: corrupt gzip data in the %s: %s", f->path,
                                what, gz_msg(f, msg));
        }
        if (r == 0) break;
        got += (uint64_t)r;
    }
    if (got < n)
        return nb_set_error(NB_ERR_FORMAT,
                            "idx_read: %s: truncated %s: %llu of %llu bytes present", f->path, what,
                            (unsigned long long)got, (unsigned long long)n);
    return NB_OK;
}

static uint32_t be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Reads and checks the header; fills ndim/shape/bytes of out. */
static nb_status read_header(idx_file *f, nb_idx *out) {
    uint8_t magic[4];
    nb_status st = read_exact(f, magic, 4, "header");
    if (st) return st;
    if (magic[0] != 0 || magic[1] != 0)
        return nb_set_error(NB_ERR_FORMAT,
                            "idx_read: %s: not an IDX file (magic 0x%02x%02x%02x%02x, expected 0x0000TTNN)",
                            f->path, magic[0], magic[1], magic[2], magic[3]);
    if (magic[2] != 0x08)
        return nb_set_error(NB_ERR_FORMAT,
                            "idx_read: %s: data type 0x%02x not supported (only 0x08, unsigned byte)",
                            f->path, magic[2]);
    int ndim = magic[3];
    if (ndim < 1 || ndim > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: %d dimensions (expected 1 to %d)", f->path,
                            ndim, NB_MAX_DIMS);
    uint8_t dims[4 * NB_MAX_DIMS];
    st = read_exact(f, dims, 4 * (uint64_t)ndim, "header");
    if (st) return st;
    uint64_t bytes = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = be32(dims + 4 * i);
        if (d == 0)
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: dimension %d has size 0", f->path, i);
        if (d > NB_IDX_MAX_BYTES / bytes) /* bytes * d would pass the cap (or overflow) */
            return nb_set_error(NB_ERR_FORMAT,
                                "idx_read: %s: header declares more than %llu bytes of data "
                                "(dimension %d is %llu): corrupt header",
                                f->path, (unsigned long long)NB_IDX_MAX_BYTES, i,
                                (unsigned long long)d);
        bytes *= d;
        out->shape[i] = (int64_t)d;
    }
    out->ndim = ndim;
    out->bytes = (size_t)bytes;
    return NB_OK;
}

/* Rejects a declared size the file cannot hold, before allocating it. */
static nb_status check_size(idx_file *f, const nb_idx *h) {
    uint64_t want = 4 + 4 * (uint64_t)h->ndim + h->bytes;
    if (gzdirect(f->gz)) {
        if (f->file_bytes < want)
            return nb_set_error(NB_ERR_FORMAT,
                                "idx_read: %s: truncated: the file has %llu bytes, its header declares %llu",
                                f->path, (unsigned long long)f->file_bytes, (unsigned long long)want);
        if (f->file_bytes > want)
            return nb_set_error(NB_ERR_FORMAT,
                                "idx_read: %s: %llu trailing bytes after the %llu bytes the header declares",
                                f->path, (unsigned long long)(f->file_bytes - want),
                                (unsigned long long)want);
    } else if (want / NB_GZ_MAX_RATIO > f->file_bytes) {
        return nb_set_error(NB_ERR_FORMAT,
                            "idx_read: %s: the header declares %llu bytes, more than a %llu-byte gzip "
                            "file can hold: corrupt or truncated",
                            f->path, (unsigned long long)want, (unsigned long long)f->file_bytes);
    }
    return NB_OK;
}

static nb_status read_body(idx_file *f, nb_idx *out) {
    nb_status st = check_size(f, out);
    if (st) return st;
    out->data = malloc(out->bytes);
    if (!out->data)
        return nb_set_error(NB_ERR_OOM, "idx_read: %s: cannot allocate %zu bytes", f->path, out->bytes);
    st = read_exact(f, out->data, out->bytes, "data");
    if (st) return st;
    /* A .gz file's length is unknown until read: one more byte must be EOF. */
    uint8_t extra;
    int r = gzread(f->gz, &extra, 1);
    if (r > 0)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: trailing bytes after the %zu data bytes the header declares",
                            f->path, out->bytes);
    if (r < 0) {
        int zerr;
        const char *msg = gzerror(f->gz, &zerr);
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: corrupt gzip data after the data: %s", f->path,
                            gz_msg(f, msg));
    }
    return NB_OK;
}

nb_status nb_idx_read(const char *path, nb_idx *out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "idx_read: NULL output");
    memset(out, 0, sizeof *out);
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "idx_read: NULL path");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return nb_set_error(NB_ERR_IO, "idx_read: cannot open %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return nb_set_error(NB_ERR_IO, "idx_read: cannot read %s: not a regular file", path);
    idx_file f = {.path = path, .file_bytes = (uint64_t)sb.st_size};
    errno = 0;
    f.gz = gzopen(path, "rb");
    if (!f.gz)
        return nb_set_error(errno ? NB_ERR_IO : NB_ERR_OOM, "idx_read: cannot open %s: %s", path,
                            errno ? strerror(errno) : "out of memory");
    gzbuffer(f.gz, 1u << 17);
    if (f.file_bytes == 0) {
        gzclose(f.gz);
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: empty file", path);
    }
    nb_status st = read_header(&f, out);
    if (!st) st = read_body(&f, out);
    gzclose(f.gz);
    if (st) nb_idx_free(out);
    return st;
}

void nb_idx_free(nb_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

nb_tensor *nb_idx_load(const char *path) {
    nb_idx idx;
    if (nb_idx_read(path, &idx)) return NULL;
    nb_tensor *t = nb_from_data(idx.data, idx.ndim, idx.shape, NB_U8);
    nb_idx_free(&idx);
    return t;
}
