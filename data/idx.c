/* idx.c - a reader for IDX files (the MNIST format, raw or gzip-compressed).
 * A file starting with the gzip magic (1f 8b) is inflated by zlib's inflate
 * directly (not gzread, which ignores bytes after the last gzip member and
 * reports a bad CRC wherever it happens to notice it); anything else is read
 * as is. The header is validated before any allocation (magic, ubyte type,
 * ndim, nonzero sizes, a size cap, and for a raw file its exact length).
 * The data buffer grows as the stream proves it holds the data (doubling,
 * from 1 MiB), so a small gzip file whose header claims gigabytes allocates
 * only what it decompresses to. A truncated file, a corrupt stream, a
 * failed CRC-32 or length check, and bytes after the end (trailing garbage
 * after the gzip stream, or data past the declared size) are NB_ERR_FORMAT,
 * each named. Concatenated gzip members are one stream, as gunzip reads them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "nb_data.h"
#include "nb_extension.h"

#define NB_IDX_IN_CHUNK ((size_t)1 << 17)   /* compressed bytes per fread */
#define NB_IDX_FIRST_ALLOC ((size_t)1 << 20) /* the data buffer's first size */

typedef struct idx_file {
    const char *path;
    FILE *fp;
    uint64_t file_bytes; /* on disk */
    bool gz;
    bool gz_done; /* the last gzip member ended and the file has nothing after it */
    z_stream zs;
    bool zs_live;
    uint8_t *in; /* NB_IDX_IN_CHUNK bytes of compressed input */
} idx_file;

/* Tops up the compressed input; false at end of file (or on a read error,
 * which sets *st). */
static bool refill(idx_file *f, nb_status *st) {
    if (f->zs.avail_in) return true;
    size_t n = fread(f->in, 1, NB_IDX_IN_CHUNK, f->fp);
    if (n == 0 && ferror(f->fp)) {
        *st = nb_set_error(NB_ERR_IO, "idx_read: %s: read failed: %s", f->path, strerror(errno));
        return false;
    }
    f->zs.next_in = f->in;
    f->zs.avail_in = (uInt)n;
    return n > 0;
}

/* After a member's end: another member (gzip magic) continues the stream;
 * end of file ends it; any other byte is trailing garbage. */
static nb_status member_end(idx_file *f) {
    nb_status st = NB_OK;
    if (!refill(f, &st)) {
        if (st) return st;
        f->gz_done = true;
        return NB_OK;
    }
    if (f->zs.avail_in < 2) { /* the magic may straddle the input buffer */
        uint8_t b0 = f->zs.next_in[0];
        int c = fgetc(f->fp);
        if (c == EOF || b0 != 0x1f || c != 0x8b)
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: trailing bytes after the gzip stream", f->path);
        f->in[0] = b0, f->in[1] = (uint8_t)c;
        f->zs.next_in = f->in, f->zs.avail_in = 2;
    } else if (f->zs.next_in[0] != 0x1f || f->zs.next_in[1] != 0x8b) {
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: trailing bytes after the gzip stream", f->path);
    }
    if (inflateReset(&f->zs) != Z_OK)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: cannot restart inflate for the next gzip member", f->path);
    return NB_OK;
}

/* Inflates up to n bytes into dst; *got is how many came (fewer only at the
 * end of the stream). `what` names the part being read in messages. */
static nb_status gz_read(idx_file *f, uint8_t *dst, size_t n, size_t *got, const char *what) {
    *got = 0;
    nb_status st = NB_OK;
    while (*got < n && !f->gz_done) {
        if (!refill(f, &st)) {
            if (st) return st;
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: truncated gzip stream in the %s (%zu of %zu bytes)",
                                f->path, what, *got, n);
        }
        f->zs.next_out = dst + *got;
        size_t ask = n - *got;
        f->zs.avail_out = ask > UINT32_MAX ? UINT32_MAX : (uInt)ask;
        uInt before = f->zs.avail_out;
        int r = inflate(&f->zs, Z_NO_FLUSH);
        *got += before - f->zs.avail_out;
        if (r == Z_STREAM_END) {
            if ((st = member_end(f))) return st;
        } else if (r == Z_DATA_ERROR) {
            const char *msg = f->zs.msg ? f->zs.msg : "invalid data";
            if (!strcmp(msg, "incorrect data check"))
                return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: gzip CRC-32 mismatch: the compressed data is corrupt",
                                    f->path);
            if (!strcmp(msg, "incorrect length check"))
                return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: gzip length check failed: the stream is corrupt",
                                    f->path);
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: corrupt gzip data in the %s: %s", f->path, what, msg);
        } else if (r == Z_MEM_ERROR) {
            return nb_set_error(NB_ERR_OOM, "idx_read: %s: inflate ran out of memory", f->path);
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: corrupt gzip stream in the %s (zlib error %d)", f->path,
                                what, r);
        }
    }
    return NB_OK;
}

/* Reads up to n bytes (raw or inflated); *got as gz_read. */
static nb_status read_some(idx_file *f, uint8_t *dst, size_t n, size_t *got, const char *what) {
    if (f->gz) return gz_read(f, dst, n, got, what);
    *got = fread(dst, 1, n, f->fp);
    if (*got < n && ferror(f->fp))
        return nb_set_error(NB_ERR_IO, "idx_read: %s: read failed: %s", f->path, strerror(errno));
    return NB_OK;
}

/* Reads exactly n bytes, else NB_ERR_FORMAT (truncated) naming `what`. */
static nb_status read_exact(idx_file *f, uint8_t *dst, size_t n, const char *what) {
    size_t got;
    nb_status st = read_some(f, dst, n, &got, what);
    if (st) return st;
    if (got < n)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: truncated %s: %zu of %zu bytes present", f->path, what, got,
                            n);
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
    st = read_exact(f, dims, 4 * (size_t)ndim, "header");
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

/* A raw file's length must be exactly what its header declares. */
static nb_status check_raw_size(idx_file *f, const nb_idx *h) {
    uint64_t want = 4 + 4 * (uint64_t)h->ndim + h->bytes;
    if (f->file_bytes < want)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: truncated: the file has %llu bytes, its header declares %llu",
                            f->path, (unsigned long long)f->file_bytes, (unsigned long long)want);
    if (f->file_bytes > want)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: %llu trailing bytes after the %llu bytes the header declares",
                            f->path, (unsigned long long)(f->file_bytes - want), (unsigned long long)want);
    return NB_OK;
}

/* deflate cannot compress better than about 1032:1 (zlib's FAQ), so a .gz
 * file of S bytes never holds more than this many bytes of data. */
#define NB_GZ_MAX_RATIO 1032u

static nb_status read_body(idx_file *f, nb_idx *out) {
    if (!f->gz) {
        nb_status st = check_raw_size(f, out);
        if (st) return st;
    } else if ((4 + 4 * (uint64_t)out->ndim + out->bytes) / NB_GZ_MAX_RATIO > f->file_bytes) {
        return nb_set_error(NB_ERR_FORMAT,
                            "idx_read: %s: the header declares %zu bytes, more than a %llu-byte gzip file can hold: "
                            "corrupt or truncated", f->path, out->bytes, (unsigned long long)f->file_bytes);
    }
    /* grow the buffer as the data arrives: never more than twice what the stream holds */
    size_t cap = 0, have = 0;
    while (have < out->bytes) {
        size_t want = cap ? (cap > out->bytes / 2 ? out->bytes : 2 * cap)
                          : (out->bytes < NB_IDX_FIRST_ALLOC ? out->bytes : NB_IDX_FIRST_ALLOC);
        uint8_t *p = realloc(out->data, want);
        if (!p) return nb_set_error(NB_ERR_OOM, "idx_read: %s: cannot allocate %zu bytes", f->path, want);
        out->data = p, cap = want;
        size_t got;
        nb_status st = read_some(f, out->data + have, cap - have, &got, "data");
        if (st) return st;
        have += got;
        if (have < cap)
            return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: truncated data: %zu of %zu bytes present", f->path,
                                have, out->bytes);
    }
    /* the stream must end here: one more byte is trailing data */
    uint8_t extra;
    size_t got;
    nb_status st = read_some(f, &extra, 1, &got, "data");
    if (st) return st;
    if (got)
        return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: trailing bytes after the %zu data bytes the header declares",
                            f->path, out->bytes);
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
    if (f.file_bytes == 0) return nb_set_error(NB_ERR_FORMAT, "idx_read: %s: empty file", path);
    f.fp = fopen(path, "rb");
    if (!f.fp) return nb_set_error(NB_ERR_IO, "idx_read: cannot open %s: %s", path, strerror(errno));
    nb_status st = NB_OK;
    int c0 = fgetc(f.fp), c1 = fgetc(f.fp);
    f.gz = c0 == 0x1f && c1 == 0x8b;
    if (f.gz) {
        f.in = malloc(NB_IDX_IN_CHUNK);
        if (!f.in) st = nb_set_error(NB_ERR_OOM, "idx_read: %s: out of host memory", path);
        else if (inflateInit2(&f.zs, 15 + 16) != Z_OK) /* 15: the largest window; +16: gzip wrapper only */
            st = nb_set_error(NB_ERR_OOM, "idx_read: %s: cannot start inflate", path);
        else {
            f.zs_live = true;
            f.in[0] = (uint8_t)c0, f.in[1] = (uint8_t)c1;
            f.zs.next_in = f.in, f.zs.avail_in = 2;
        }
    } else {
        rewind(f.fp);
    }
    if (!st) st = read_header(&f, out);
    if (!st) st = read_body(&f, out);
    if (f.zs_live) inflateEnd(&f.zs);
    free(f.in);
    fclose(f.fp);
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
