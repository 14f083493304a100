/* npz.c - NumPy's .npz archives (numpy.savez, savez_compressed and
 * numpy.load of them): a zip file (PKWARE's APPNOTE.TXT: local headers,
 * the central directory, the end record; zip64 where sizes or offsets pass
 * 4 GiB, as Python's zipfile writes them) of .npy members, stored or
 * deflated (zlib). Members are read from the central directory (numpy's
 * members carry their sizes after the data), each CRC-32 checked. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "npy_impl.h"
#include "text_impl.h"

enum { SIG_LOCAL = 0x04034b50, SIG_CENTRAL = 0x02014b50, SIG_END = 0x06054b50, SIG_END64 = 0x06064b50,
       SIG_LOC64 = 0x07064b50 };
#define U32_MAX_ZIP 0xffffffffu

static uint64_t rd(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- reading ----------------------------------------------------------------------------------- */

typedef struct member {
    const char *name; /* not NUL-terminated */
    size_t name_len;
    int method;
    uint32_t crc;
    uint64_t csize, usize, local;
    unsigned flags;
} member;

/* The zip64 extra field (id 1): the 8-byte values of the fields whose 32-bit ones are 0xffffffff, in order. */
static bool zip64_extra(const uint8_t *x, size_t len, member *m, bool u64, bool c64, bool l64) {
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

/* The bytes of member m (stored, or inflated into *owned), CRC-checked. */
static const uint8_t *member_data(const uint8_t *buf, size_t len, const member *m, const char *path, uint8_t **owned) {
    *owned = NULL;
    if (m->local > len || len - m->local < 30 || rd(buf + m->local, 4) != SIG_LOCAL)
        return NB_FAIL(NB_ERR_FORMAT, "npz: %s: member %.*s: no local header at %llu", path, (int)m->name_len, m->name,
                       (unsigned long long)m->local);
    uint64_t start = m->local + 30 + rd(buf + m->local + 26, 2) + rd(buf + m->local + 28, 2);
    if (start > len || m->csize > len - start)
        return NB_FAIL(NB_ERR_FORMAT, "npz: %s: member %.*s runs past the end of the file", path, (int)m->name_len, m->name);
    if (m->flags & 1)
        return NB_FAIL(NB_ERR_UNSUPPORTED, "npz: %s: member %.*s is encrypted", path, (int)m->name_len, m->name);
    const uint8_t *data = buf + start;
    if (m->method == 0) {
        if (m->csize != m->usize)
            return NB_FAIL(NB_ERR_FORMAT, "npz: %s: stored member %.*s has sizes %llu and %llu", path, (int)m->name_len,
                           m->name, (unsigned long long)m->csize, (unsigned long long)m->usize);
    } else if (m->method == 8) {
        /* deflate expands at most about 1032:1: a larger claim is a lie (a zip bomb), refused before allocating */
        if (m->usize > m->csize * 1032 + 1024 || m->usize > SIZE_MAX / 2)
            return NB_FAIL(NB_ERR_FORMAT, "npz: %s: member %.*s claims %llu bytes from %llu compressed", path,
                           (int)m->name_len, m->name, (unsigned long long)m->usize, (unsigned long long)m->csize);
        uint8_t *out = malloc(m->usize ? (size_t)m->usize : 1);
        if (!out) return NB_FAIL(NB_ERR_OOM, "npz: %s: out of host memory (%llu bytes)", path, (unsigned long long)m->usize);
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
            return NB_FAIL(NB_ERR_FORMAT, "npz: %s: member %.*s: corrupt deflate data (or not %llu bytes)", path,
                           (int)m->name_len, m->name, (unsigned long long)m->usize);
        }
        data = *owned = out;
    } else
        return NB_FAIL(NB_ERR_UNSUPPORTED, "npz: %s: member %.*s uses compression method %d (nabla reads stored and "
                       "deflated members)", path, (int)m->name_len, m->name, m->method);
    uLong crc = crc32(0, Z_NULL, 0);
    for (uint64_t off = 0; off < m->usize;) {
        uInt n = m->usize - off > (1u << 30) ? 1u << 30 : (uInt)(m->usize - off);
        crc = crc32(crc, data + off, n);
        off += n;
    }
    if ((uint32_t)crc != m->crc) {
        free(*owned), *owned = NULL;
        return NB_FAIL(NB_ERR_FORMAT, "npz: %s: member %.*s fails its CRC-32", path, (int)m->name_len, m->name);
    }
    return data;
}

void nb_npz_free(nb_npz *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free((char *)f->arrays[i].name), nb_release(f->arrays[i].tensor);
    free(f->arrays);
    free(f);
}

/* The data range of m ([start, start + csize) after its local header), or false when it leaves the file. */
static bool member_range(const uint8_t *buf, size_t len, const member *m, uint64_t *start) {
    if (m->local > len || len - m->local < 30 || rd(buf + m->local, 4) != SIG_LOCAL) return false;
    *start = m->local + 30 + rd(buf + m->local + 26, 2) + rd(buf + m->local + 28, 2);
    return *start <= len && m->csize <= len - *start;
}

static int by_local(const void *a, const void *b) {
    const member *x = *(member *const *)a, *y = *(member *const *)b;
    return (x->local > y->local) - (x->local < y->local);
}

static int by_name(const void *a, const void *b) {
    const member *x = *(member *const *)a, *y = *(member *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Reads the central directory of buf and loads every .npy member into f.
 * The members' data may not overlap and their names must differ (checked
 * sorted, in n log n): so the file's size bounds what deflate can expand
 * them to, however many directory entries point at one member. */
static nb_status load_members(const uint8_t *buf, size_t len, const char *path, nb_npz *f) {
    const uint8_t *end = NULL;
    for (size_t back = 22; back <= len && back <= 22 + 65535 && !end; back++)
        if (rd(buf + len - back, 4) == SIG_END) end = buf + len - back;
    if (!end) return nb_set_error(NB_ERR_FORMAT, "npz: %s: not a zip file (no end of central directory)", path);
    uint64_t entries = rd(end + 10, 2), cd_size = rd(end + 12, 4), cd_off = rd(end + 16, 4);
    if (entries == 0xffff || cd_size == U32_MAX_ZIP || cd_off == U32_MAX_ZIP) {
        const uint8_t *loc = end - buf >= 20 ? end - 20 : NULL;
        uint64_t z = loc && rd(loc, 4) == SIG_LOC64 ? rd(loc + 8, 8) : UINT64_MAX;
        if (z > len || len - z < 56 || rd(buf + z, 4) != SIG_END64)
            return nb_set_error(NB_ERR_FORMAT, "npz: %s: a zip64 end record is missing or misplaced", path);
        entries = rd(buf + z + 32, 8), cd_size = rd(buf + z + 40, 8), cd_off = rd(buf + z + 48, 8);
    }
    if (cd_off > len || cd_size > len - cd_off || entries > cd_size / 46)
        return nb_set_error(NB_ERR_FORMAT, "npz: %s: the central directory (%llu entries, %llu bytes at %llu) does not "
                            "fit the file", path, (unsigned long long)entries, (unsigned long long)cd_size,
                            (unsigned long long)cd_off);
    member *ms = calloc(entries ? (size_t)entries : 1, sizeof *ms);
    member **order = calloc(entries ? (size_t)entries : 1, sizeof *order);
    f->arrays = calloc(entries ? (size_t)entries : 1, sizeof *f->arrays);
    nb_status st = ms && order && f->arrays ? NB_OK : nb_set_error(NB_ERR_OOM, "npz: %s: out of host memory", path);
    size_t nm = 0;
    const uint8_t *p = buf + cd_off, *cd_end = p + cd_size;
    for (uint64_t k = 0; !st && k < entries; k++) {
        if (cd_end - p < 46 || rd(p, 4) != SIG_CENTRAL) {
            st = nb_set_error(NB_ERR_FORMAT, "npz: %s: central directory entry %llu is corrupt", path, (unsigned long long)k);
            break;
        }
        member m = {.flags = (unsigned)rd(p + 8, 2), .method = (int)rd(p + 10, 2), .crc = (uint32_t)rd(p + 16, 4),
                    .csize = rd(p + 20, 4), .usize = rd(p + 24, 4), .local = rd(p + 42, 4)};
        size_t nlen = (size_t)rd(p + 28, 2), xlen = (size_t)rd(p + 30, 2), clen = (size_t)rd(p + 32, 2);
        if ((size_t)(cd_end - p) - 46 < nlen + xlen + clen) {
            st = nb_set_error(NB_ERR_FORMAT, "npz: %s: central directory entry %llu runs past it", path, (unsigned long long)k);
            break;
        }
        m.name = (const char *)p + 46, m.name_len = nlen;
        uint64_t start;
        if (!zip64_extra(p + 46 + nlen, xlen, &m, m.usize == U32_MAX_ZIP, m.csize == U32_MAX_ZIP, m.local == U32_MAX_ZIP))
            st = nb_set_error(NB_ERR_FORMAT, "npz: %s: member %.*s has a bad zip64 field", path, (int)nlen, m.name);
        else if (!member_range(buf, len, &m, &start))
            st = nb_set_error(NB_ERR_FORMAT, "npz: %s: member %.*s: its local header or data lies outside the file", path,
                              (int)nlen, m.name);
        else if (memchr(m.name, 0, nlen))
            st = nb_set_error(NB_ERR_FORMAT, "npz: %s: a member name holds a NUL byte", path);
        p += 46 + nlen + xlen + clen;
        /* numpy.load lists the .npy members by name without ".npy" (others it gives as bytes: skipped here) */
        if (!st && nlen >= 4 && !memcmp(m.name + nlen - 4, ".npy", 4)) ms[nm] = m, order[nm] = &ms[nm], nm++;
    }
    if (!st && nm > 1) {
        qsort(order, nm, sizeof *order, by_local);
        for (size_t i = 0; !st && i + 1 < nm; i++) {
            uint64_t start;
            member_range(buf, len, order[i], &start);
            if (order[i + 1]->local < start + order[i]->csize)
                st = nb_set_error(NB_ERR_FORMAT, "npz: %s: members %.*s and %.*s overlap", path, (int)order[i]->name_len,
                                  order[i]->name, (int)order[i + 1]->name_len, order[i + 1]->name);
        }
        qsort(order, nm, sizeof *order, by_name);
        for (size_t i = 0; !st && i + 1 < nm; i++)
            if (!by_name(&order[i], &order[i + 1]))
                st = nb_set_error(NB_ERR_FORMAT, "npz: %s: two members named %.*s", path, (int)order[i]->name_len,
                                  order[i]->name);
    }
    for (size_t k = 0; !st && k < nm; k++) { /* in the directory's order */
        const member *m = &ms[k];
        char *key = malloc(m->name_len - 3);
        if (!key) {
            st = nb_set_error(NB_ERR_OOM, "npz: %s: out of host memory", path);
            break;
        }
        memcpy(key, m->name, m->name_len - 4), key[m->name_len - 4] = 0;
        uint8_t *owned;
        const uint8_t *data = member_data(buf, len, m, path, &owned);
        char label[512];
        snprintf(label, sizeof label, "%s[%s]", path, key);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *t = data ? npy_tensor_from_bytes(data, (size_t)m->usize, label) : NULL;
        if (t) nb_retain(t); /* the file's own reference, past the scope */
        nb_scope_end(s);
        free(owned);
        if (!t) {
            free(key);
            st = nb_last_status();
            break;
        }
        f->arrays[f->n].name = key, f->arrays[f->n].tensor = t, f->n++;
    }
    free(ms), free(order);
    return st;
}

nb_npz *nb_npz_load(const char *path) {
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "npz_load: NULL path");
    size_t len;
    uint8_t *buf = nb_data_read_file("npz_load", path, &len);
    if (!buf) return NULL;
    nb_npz *f = calloc(1, sizeof *f);
    nb_status st = f ? load_members(buf, len, path, f) : nb_set_error(NB_ERR_OOM, "npz_load: out of host memory");
    free(buf);
    if (st) {
        nb_npz_free(f);
        return NULL;
    }
    return f;
}

nb_tensor *nb_npz_get(const nb_npz *f, const char *name) {
    if (!f || !name) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "npz_get: NULL %s", f ? "name" : "file");
        return NULL;
    }
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->arrays[i].name, name)) return f->arrays[i].tensor;
    return NULL;
}

/* ---- writing ----------------------------------------------------------------------------------- */

typedef struct zbuf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} zbuf;

static void put(zbuf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * cap;
        uint8_t *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np, b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(zbuf *b, uint64_t v, int n) {
    uint8_t x[8];
    for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)n);
}

/* What the central directory repeats of a member. */
typedef struct written {
    uint32_t crc;
    uint64_t csize, usize, local;
    int method;
} written;

/* A member's fixed fields from "version needed" to the sizes (local and central headers share them). */
static void put_fields(zbuf *b, const written *w, bool z64) {
    put_le(b, z64 ? 45 : 20, 2);          /* version needed: 4.5 for zip64 */
    put_le(b, 0, 2);                      /* flags */
    put_le(b, (uint64_t)w->method, 2);
    put_le(b, 0, 2), put_le(b, 0x21, 2);  /* 00:00, 1980-01-01: no timestamp (equal arrays, equal files) */
    put_le(b, w->crc, 4);
    put_le(b, z64 ? U32_MAX_ZIP : w->csize, 4), put_le(b, z64 ? U32_MAX_ZIP : w->usize, 4);
}

static nb_status check_names(const nb_named_tensor *arrays, int n) {
    if (n < 0 || (n && !arrays)) return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: %d arrays", n);
    for (int i = 0; i < n; i++) {
        if (!arrays[i].name || !arrays[i].name[0] || !arrays[i].tensor || strlen(arrays[i].name) > 60000)
            return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: array %d: NULL or empty name, or NULL tensor", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(arrays[i].name, arrays[j].name))
                return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: two arrays named %s", arrays[i].name);
    }
    return NB_OK;
}

nb_status nb_npz_save(const char *path, const nb_named_tensor *arrays, int n, bool compressed) {
    const char *op = "npz_save";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    nb_status st = check_names(arrays, n);
    if (st) return st;
    written *w = calloc(n ? (size_t)n : 1, sizeof *w);
    if (!w) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    zbuf b = {0};
    for (int i = 0; i < n && !st; i++) {
        size_t len;
        uint8_t *npy = npy_encode(op, arrays[i].tensor, &len), *data = npy;
        if (!npy) {
            st = nb_last_status();
            break;
        }
        w[i].usize = len, w[i].csize = len, w[i].local = b.len, w[i].method = compressed ? 8 : 0;
        w[i].crc = (uint32_t)crc32(0, Z_NULL, 0);
        for (size_t off = 0; off < len;) {
            uInt k = len - off > (1u << 30) ? 1u << 30 : (uInt)(len - off);
            w[i].crc = (uint32_t)crc32(w[i].crc, npy + off, k);
            off += k;
        }
        uint8_t *packed = NULL;
        if (compressed) { /* raw deflate at zlib's default level, as zipfile.ZIP_DEFLATED */
            uLong bound = compressBound((uLong)len) + 64;
            packed = len <= (1u << 30) ? malloc(bound) : NULL;
            z_stream z;
            memset(&z, 0, sizeof z);
            int zr = packed ? deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) : Z_MEM_ERROR;
            if (zr == Z_OK) {
                z.next_in = npy, z.avail_in = (uInt)len, z.next_out = packed, z.avail_out = (uInt)bound;
                zr = deflate(&z, Z_FINISH);
                w[i].csize = z.total_out;
                deflateEnd(&z);
            }
            if (zr != Z_STREAM_END) {
                free(npy), free(packed);
                st = len > (1u << 30) ? nb_set_error(NB_ERR_UNSUPPORTED, "%s: compressed members above 1 GiB (%s)", op,
                                                     arrays[i].name)
                                      : nb_set_error(NB_ERR_OOM, "%s: cannot deflate %s", op, arrays[i].name);
                break;
            }
            data = packed;
        }
        bool z64 = w[i].usize >= U32_MAX_ZIP || w[i].csize >= U32_MAX_ZIP;
        size_t nlen = strlen(arrays[i].name) + 4;
        put_le(&b, SIG_LOCAL, 4);
        put_fields(&b, &w[i], z64);
        put_le(&b, nlen, 2), put_le(&b, z64 ? 20 : 0, 2);
        put(&b, arrays[i].name, nlen - 4), put(&b, ".npy", 4);
        if (z64) put_le(&b, 1, 2), put_le(&b, 16, 2), put_le(&b, w[i].usize, 8), put_le(&b, w[i].csize, 8);
        put(&b, data, (size_t)w[i].csize);
        free(npy), free(packed);
    }
    uint64_t cd_off = b.len;
    for (int i = 0; i < n && !st; i++) {
        bool z64 = w[i].usize >= U32_MAX_ZIP || w[i].csize >= U32_MAX_ZIP || w[i].local >= U32_MAX_ZIP;
        size_t nlen = strlen(arrays[i].name) + 4;
        put_le(&b, SIG_CENTRAL, 4);
        put_le(&b, z64 ? 45 : 20, 2); /* version made by */
        put_fields(&b, &w[i], z64);
        put_le(&b, nlen, 2), put_le(&b, z64 ? 28 : 0, 2), put_le(&b, 0, 2); /* name, extra, comment lengths */
        put_le(&b, 0, 2), put_le(&b, 0, 2), put_le(&b, 0, 4);                /* disk, internal, external attributes */
        put_le(&b, z64 ? U32_MAX_ZIP : w[i].local, 4);
        put(&b, arrays[i].name, nlen - 4), put(&b, ".npy", 4);
        if (z64) put_le(&b, 1, 2), put_le(&b, 24, 2), put_le(&b, w[i].usize, 8), put_le(&b, w[i].csize, 8), put_le(&b, w[i].local, 8);
    }
    uint64_t cd_size = b.len - cd_off;
    bool z64 = n >= 0xffff || cd_off >= U32_MAX_ZIP || cd_size >= U32_MAX_ZIP;
    if (!st && z64) {
        uint64_t rec = b.len;
        put_le(&b, SIG_END64, 4), put_le(&b, 44, 8), put_le(&b, 45, 2), put_le(&b, 45, 2), put_le(&b, 0, 4),
            put_le(&b, 0, 4), put_le(&b, (uint64_t)n, 8), put_le(&b, (uint64_t)n, 8), put_le(&b, cd_size, 8),
            put_le(&b, cd_off, 8);
        put_le(&b, SIG_LOC64, 4), put_le(&b, 0, 4), put_le(&b, rec, 8), put_le(&b, 1, 4);
    }
    if (!st) {
        put_le(&b, SIG_END, 4), put_le(&b, 0, 4);
        put_le(&b, z64 ? 0xffff : (uint64_t)n, 2), put_le(&b, z64 ? 0xffff : (uint64_t)n, 2);
        put_le(&b, z64 ? U32_MAX_ZIP : cd_size, 4), put_le(&b, z64 ? U32_MAX_ZIP : cd_off, 4), put_le(&b, 0, 2);
    }
    free(w);
    if (!st && b.oom) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory building %s", op, path);
    if (!st) st = nb_write_file_atomic(op, path, b.p, b.len);
    free(b.p);
    return st;
}
