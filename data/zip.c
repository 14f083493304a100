/* zip.c - reading and writing zip archives in memory (zip_impl.h): the
 * container of NumPy's .npz and PyTorch's .pt files. PKWARE's APPNOTE.TXT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nb_extension.h"
#include "zip_impl.h"

enum { SIG_LOCAL = 0x04034b50, SIG_CENTRAL = 0x02014b50, SIG_END = 0x06054b50, SIG_END64 = 0x06064b50,
       SIG_LOC64 = 0x07064b50 };
#define U32_MAX_ZIP 0xffffffffu

static uint64_t rd(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint32_t zip_crc32(const void *data, size_t len) {
    uLong crc = crc32(0, Z_NULL, 0);
    for (size_t off = 0; off < len;) { /* zlib's lengths are 32-bit */
        uInt k = len - off > (1u << 30) ? 1u << 30 : (uInt)(len - off);
        crc = crc32(crc, (const Bytef *)data + off, k);
        off += k;
    }
    return (uint32_t)crc;
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* The zip64 extra field (id 1): the 8-byte values of the fields whose 32-bit ones are 0xffffffff, in order. */
static bool zip64_extra(const uint8_t *x, size_t len, zip_member *m, bool u64, bool c64, bool l64) {
    while (len >= 4) {
        unsigned id = (unsigned)rd(x, 2);
        size_t sz = (size_t)rd(x + 2, 2);
        if (sz > len - 4) return false;
        if (id == 1) {
            const uint8_t *v = x + 4;
            size_t need = 8u * (size_t)(u64 + c64 + l64);
            if (sz < need) return false;
            if (u64) m->usize = rd(v, 8), v += 8;
            if (c64) m->csize = rd(v, 8), v += 8;
            if (l64) m->local = rd(v, 8);
            return true;
        }
        x += 4 + sz, len -= 4 + sz;
    }
    return !(u64 || c64 || l64);
}

const uint8_t *zip_member_data(const uint8_t *buf, size_t len, const zip_member *m, const char *fmt, const char *path,
                               uint8_t **owned) {
    *owned = NULL;
    if (m->flags & 1)
        return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: %s: member %.*s is encrypted", fmt, path, (int)m->name_len, m->name);
    if (m->start > len || m->csize > len - m->start)
        return NB_FAIL(NB_ERR_FORMAT, "%s: %s: member %.*s runs past the end of the file", fmt, path, (int)m->name_len,
                       m->name);
    const uint8_t *data = buf + m->start;
    if (m->method == 0) {
        if (m->csize != m->usize)
            return NB_FAIL(NB_ERR_FORMAT, "%s: %s: stored member %.*s has sizes %llu and %llu", fmt, path,
                           (int)m->name_len, m->name, (unsigned long long)m->csize, (unsigned long long)m->usize);
    } else if (m->method == 8) {
        /* deflate expands at most about 1032:1: a larger claim is a lie (a zip bomb), refused before allocating */
        if (m->usize > m->csize * 1032 + 1024 || m->usize > SIZE_MAX / 2)
            return NB_FAIL(NB_ERR_FORMAT, "%s: %s: member %.*s claims %llu bytes from %llu compressed", fmt, path,
                           (int)m->name_len, m->name, (unsigned long long)m->usize, (unsigned long long)m->csize);
        uint8_t *out = malloc(m->usize ? (size_t)m->usize : 1);
        if (!out)
            return NB_FAIL(NB_ERR_OOM, "%s: %s: out of host memory (%llu bytes)", fmt, path,
                           (unsigned long long)m->usize);
        z_stream z;
        memset(&z, 0, sizeof z);
        int zr = inflateInit2(&z, -15); /* a raw deflate stream */
        size_t in_left = (size_t)m->csize, out_left = (size_t)m->usize;
        z.next_in = (Bytef *)data, z.next_out = out;
        while (zr == Z_OK) { /* zlib's counts are 32-bit: feed at most 1 GiB at a time */
            uInt ci = in_left > (1u << 30) ? 1u << 30 : (uInt)in_left, co = out_left > (1u << 30) ? 1u << 30 : (uInt)out_left;
            z.avail_in = ci, z.avail_out = co;
            zr = inflate(&z, Z_NO_FLUSH);
            in_left -= ci - z.avail_in, out_left -= co - z.avail_out;
            if (zr == Z_OK && ci == z.avail_in && co == z.avail_out) zr = Z_BUF_ERROR; /* no progress */
        }
        inflateEnd(&z);
        if (zr != Z_STREAM_END || out_left || in_left) {
            free(out);
            return NB_FAIL(NB_ERR_FORMAT, "%s: %s: member %.*s: corrupt deflate data (or not %llu bytes)", fmt, path,
                           (int)m->name_len, m->name, (unsigned long long)m->usize);
        }
        data = *owned = out;
    } else
        return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: %s: member %.*s uses compression method %d (nabla reads stored and "
                       "deflated members)", fmt, path, (int)m->name_len, m->name, m->method);
    if (zip_crc32(data, (size_t)m->usize) != m->crc) {
        free(*owned), *owned = NULL;
        return NB_FAIL(NB_ERR_FORMAT, "%s: %s: member %.*s fails its CRC-32", fmt, path, (int)m->name_len, m->name);
    }
    return data;
}

/* Sets m->start from m's local header; false when the header or the data leaves the file. */
static bool member_range(const uint8_t *buf, size_t len, zip_member *m) {
    if (m->local > len || len - m->local < 30 || rd(buf + m->local, 4) != SIG_LOCAL) return false;
    m->start = m->local + 30 + rd(buf + m->local + 26, 2) + rd(buf + m->local + 28, 2);
    return m->start <= len && m->csize <= len - m->start;
}

static int by_local(const void *a, const void *b) {
    const zip_member *x = *(zip_member *const *)a, *y = *(zip_member *const *)b;
    return (x->local > y->local) - (x->local < y->local);
}

static int by_name(const void *a, const void *b) {
    const zip_member *x = *(zip_member *const *)a, *y = *(zip_member *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

const zip_member *zip_find(zip_member *const *by_name_, size_t n, const char *name, size_t len) {
    zip_member key = {.name = name, .name_len = len};
    const zip_member *kp = &key;
    zip_member *const *hit = bsearch(&kp, by_name_, n, sizeof *by_name_, by_name);
    return hit ? *hit : NULL;
}

nb_status zip_read_dir(const uint8_t *buf, size_t len, const char *fmt, const char *path, zip_member **out,
                       size_t *n, zip_member ***sorted) {
    *out = NULL, *n = 0;
    if (sorted) *sorted = NULL;
    const uint8_t *end = NULL;
    for (size_t back = 22; back <= len && back <= 22 + 65535 && !end; back++)
        if (rd(buf + len - back, 4) == SIG_END) end = buf + len - back;
    if (!end) return nb_set_error(NB_ERR_FORMAT, "%s: %s: not a zip file (no end of central directory)", fmt, path);
    uint64_t entries = rd(end + 10, 2), cd_size = rd(end + 12, 4), cd_off = rd(end + 16, 4);
    if (entries == 0xffff || cd_size == U32_MAX_ZIP || cd_off == U32_MAX_ZIP) {
        const uint8_t *loc = end - buf >= 20 ? end - 20 : NULL;
        uint64_t z = loc && rd(loc, 4) == SIG_LOC64 ? rd(loc + 8, 8) : UINT64_MAX;
        if (z > len || len - z < 56 || rd(buf + z, 4) != SIG_END64)
            return nb_set_error(NB_ERR_FORMAT, "%s: %s: a zip64 end record is missing or misplaced", fmt, path);
        entries = rd(buf + z + 32, 8), cd_size = rd(buf + z + 40, 8), cd_off = rd(buf + z + 48, 8);
    }
    if (cd_off > len || cd_size > len - cd_off || entries > cd_size / 46)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s: the central directory (%llu entries, %llu bytes at %llu) does not "
                            "fit the file", fmt, path, (unsigned long long)entries, (unsigned long long)cd_size,
                            (unsigned long long)cd_off);
    zip_member *ms = calloc(entries ? (size_t)entries : 1, sizeof *ms);
    zip_member **order = calloc(entries ? (size_t)entries : 1, sizeof *order);
    nb_status st = ms && order ? NB_OK : nb_set_error(NB_ERR_OOM, "%s: %s: out of host memory", fmt, path);
    const uint8_t *p = buf + cd_off, *cd_end = p + cd_size;
    size_t nm = 0;
    for (uint64_t k = 0; !st && k < entries; k++) {
        if (cd_end - p < 46 || rd(p, 4) != SIG_CENTRAL) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: central directory entry %llu is corrupt", fmt, path,
                              (unsigned long long)k);
            break;
        }
        zip_member m = {.flags = (unsigned)rd(p + 8, 2), .method = (int)rd(p + 10, 2), .crc = (uint32_t)rd(p + 16, 4),
                        .csize = rd(p + 20, 4), .usize = rd(p + 24, 4), .local = rd(p + 42, 4)};
        size_t nlen = (size_t)rd(p + 28, 2), xlen = (size_t)rd(p + 30, 2), clen = (size_t)rd(p + 32, 2);
        if ((size_t)(cd_end - p) - 46 < nlen + xlen + clen) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: central directory entry %llu runs past it", fmt, path,
                              (unsigned long long)k);
            break;
        }
        m.name = (const char *)p + 46, m.name_len = nlen;
        if (!zip64_extra(p + 46 + nlen, xlen, &m, m.usize == U32_MAX_ZIP, m.csize == U32_MAX_ZIP, m.local == U32_MAX_ZIP))
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: member %.*s has a bad zip64 field", fmt, path, (int)nlen, m.name);
        else if (!member_range(buf, len, &m))
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: member %.*s: its local header or data lies outside the file", fmt,
                              path, (int)nlen, m.name);
        else if (memchr(m.name, 0, nlen))
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: a member name holds a NUL byte", fmt, path);
        p += 46 + nlen + xlen + clen;
        if (!st) ms[nm] = m, order[nm] = &ms[nm], nm++;
    }
    if (!st && nm > 1) { /* overlaps in file order, then duplicates (and zip_find's order) by name */
        qsort(order, nm, sizeof *order, by_local);
        for (size_t i = 0; !st && i + 1 < nm; i++)
            if (order[i + 1]->local < order[i]->start + order[i]->csize)
                st = nb_set_error(NB_ERR_FORMAT, "%s: %s: members %.*s and %.*s overlap", fmt, path,
                                  (int)order[i]->name_len, order[i]->name, (int)order[i + 1]->name_len, order[i + 1]->name);
        qsort(order, nm, sizeof *order, by_name);
        for (size_t i = 0; !st && i + 1 < nm; i++)
            if (!by_name(&order[i], &order[i + 1]))
                st = nb_set_error(NB_ERR_FORMAT, "%s: %s: two members named %.*s", fmt, path, (int)order[i]->name_len,
                                  order[i]->name);
    }
    if (st) {
        free(order), free(ms);
        return st;
    }
    if (sorted) *sorted = order;
    else free(order);
    *out = ms, *n = nm;
    return NB_OK;
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* What the central directory repeats of a member. */
typedef struct zip_written {
    char *name;
    uint32_t crc;
    uint64_t csize, usize, local;
    int method;
} zip_written;

static void put(zip_writer *z, const void *src, size_t n) {
    if (z->st) return;
    if (n > SIZE_MAX - z->len) {
        z->st = nb_set_error(NB_ERR_OOM, "%s: the archive passes the address space", z->op);
        return;
    }
    if (z->len + n > z->cap) {
        size_t cap = z->cap ? z->cap : 4096;
        while (cap < z->len + n) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * cap;
        uint8_t *np = realloc(z->buf, cap);
        if (!np) {
            z->st = nb_set_error(NB_ERR_OOM, "%s: out of host memory (%zu bytes)", z->op, cap);
            return;
        }
        z->buf = np, z->cap = cap;
    }
    if (n) memcpy(z->buf + z->len, src, n);
    z->len += n;
}

static void put_le(zip_writer *z, uint64_t v, int n) {
    uint8_t x[8];
    for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(z, x, (size_t)n);
}

/* A member's fixed fields from "version needed" to the sizes (local and central headers share them). */
static void put_fields(zip_writer *z, const zip_written *w, bool z64) {
    put_le(z, z64 ? 45 : 20, 2);          /* version needed: 4.5 for zip64 */
    put_le(z, 0, 2);                      /* flags */
    put_le(z, (uint64_t)w->method, 2);
    put_le(z, 0, 2), put_le(z, 0x21, 2);  /* 00:00, 1980-01-01: no timestamp (equal contents, equal files) */
    put_le(z, w->crc, 4);
    put_le(z, z64 ? U32_MAX_ZIP : w->csize, 4), put_le(z, z64 ? U32_MAX_ZIP : w->usize, 4);
}

void zip_writer_add(zip_writer *z, const char *name, const void *data, size_t len, bool deflated, unsigned align) {
    if (z->st) return;
    size_t nlen = strlen(name);
    if (nlen > 65535) {
        z->st = nb_set_error(NB_ERR_INVALID_ARG, "%s: a member name of %zu bytes (65535 at most)", z->op, nlen);
        return;
    }
    if (z->n == z->n_cap) {
        size_t cap = z->n_cap ? 2 * z->n_cap : 16;
        zip_written *nw = realloc(z->w, cap * sizeof *nw);
        if (!nw) {
            z->st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", z->op);
            return;
        }
        z->w = nw, z->n_cap = cap;
    }
    zip_written *w = &z->w[z->n];
    memset(w, 0, sizeof *w);
    if (!(w->name = malloc(nlen + 1))) {
        z->st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", z->op);
        return;
    }
    memcpy(w->name, name, nlen + 1);
    z->n++;
    w->usize = w->csize = len, w->local = z->len, w->method = deflated ? 8 : 0;
    w->crc = zip_crc32(data, len);
    uint8_t *packed = NULL;
    if (deflated) { /* raw deflate at zlib's default level, as zipfile.ZIP_DEFLATED */
        uLong bound = len <= (1u << 30) ? compressBound((uLong)len) + 64 : 0;
        packed = bound ? malloc(bound) : NULL;
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        int zr = packed ? deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) : Z_MEM_ERROR;
        if (zr == Z_OK) {
            zs.next_in = (Bytef *)data, zs.avail_in = (uInt)len, zs.next_out = packed, zs.avail_out = (uInt)bound;
            zr = deflate(&zs, Z_FINISH);
            w->csize = zs.total_out;
            deflateEnd(&zs);
        }
        if (zr != Z_STREAM_END) {
            free(packed);
            z->st = len > (1u << 30) ? nb_set_error(NB_ERR_UNSUPPORTED, "%s: compressed members above 1 GiB (%s)", z->op, name)
                                     : nb_set_error(NB_ERR_OOM, "%s: cannot deflate %s", z->op, name);
            return;
        }
        data = packed;
    }
    bool z64 = w->usize >= U32_MAX_ZIP || w->csize >= U32_MAX_ZIP;
    size_t xlen = z64 ? 20 : 0, pad = 0;
    if (align > 1) { /* an "FB" field of 'Z's up to the boundary, as PyTorch's writer pads */
        size_t at = z->len + 30 + nlen + xlen + 4;
        pad = (align - at % align) % align;
    }
    put_le(z, SIG_LOCAL, 4);
    put_fields(z, w, z64);
    put_le(z, nlen, 2), put_le(z, xlen + (align > 1 ? 4 + pad : 0), 2);
    put(z, name, nlen);
    if (z64) put_le(z, 1, 2), put_le(z, 16, 2), put_le(z, w->usize, 8), put_le(z, w->csize, 8);
    if (align > 1) {
        put_le(z, 0x4246, 2), put_le(z, pad, 2); /* "FB" */
        for (size_t i = 0; i < pad; i++) put(z, "Z", 1);
    }
    put(z, data, (size_t)w->csize);
    free(packed);
}

void zip_writer_free(zip_writer *z) {
    for (size_t i = 0; i < z->n; i++) free(z->w[i].name);
    free(z->w), free(z->buf);
    z->w = NULL, z->buf = NULL, z->n = z->n_cap = z->len = z->cap = 0;
}

nb_status zip_writer_finish(zip_writer *z, const char *path) {
    uint64_t cd_off = z->len, n = z->n;
    for (size_t i = 0; i < z->n && !z->st; i++) {
        const zip_written *w = &z->w[i];
        bool z64 = w->usize >= U32_MAX_ZIP || w->csize >= U32_MAX_ZIP || w->local >= U32_MAX_ZIP;
        size_t nlen = strlen(w->name);
        put_le(z, SIG_CENTRAL, 4);
        put_le(z, z64 ? 45 : 20, 2); /* version made by */
        put_fields(z, w, z64);
        put_le(z, nlen, 2), put_le(z, z64 ? 28 : 0, 2), put_le(z, 0, 2); /* name, extra, comment lengths */
        put_le(z, 0, 2), put_le(z, 0, 2), put_le(z, 0, 4);                /* disk, internal, external attributes */
        put_le(z, z64 ? U32_MAX_ZIP : w->local, 4);
        put(z, w->name, nlen);
        if (z64) put_le(z, 1, 2), put_le(z, 24, 2), put_le(z, w->usize, 8), put_le(z, w->csize, 8), put_le(z, w->local, 8);
    }
    uint64_t cd_size = z->len - cd_off;
    bool z64 = n >= 0xffff || cd_off >= U32_MAX_ZIP || cd_size >= U32_MAX_ZIP;
    if (z64) {
        uint64_t rec = z->len;
        put_le(z, SIG_END64, 4), put_le(z, 44, 8), put_le(z, 45, 2), put_le(z, 45, 2), put_le(z, 0, 4),
            put_le(z, 0, 4), put_le(z, n, 8), put_le(z, n, 8), put_le(z, cd_size, 8), put_le(z, cd_off, 8);
        put_le(z, SIG_LOC64, 4), put_le(z, 0, 4), put_le(z, rec, 8), put_le(z, 1, 4);
    }
    put_le(z, SIG_END, 4), put_le(z, 0, 4);
    put_le(z, z64 ? 0xffff : n, 2), put_le(z, z64 ? 0xffff : n, 2);
    put_le(z, z64 ? U32_MAX_ZIP : cd_size, 4), put_le(z, z64 ? U32_MAX_ZIP : cd_off, 4), put_le(z, 0, 2);
    nb_status st = z->st ? z->st : nb_write_file_atomic(z->op, path, z->buf, z->len);
    zip_writer_free(z);
    return st;
}
