/* npy.c - NumPy's .npy files (numpy.save / numpy.load; the format:
 * numpy/lib/format.py, "NEP 1"): read (also memory-mapped) and written
 * byte for byte as NumPy 1.24+ writes them. npz.c reads and writes the zip
 * archives of them (numpy.savez). Tests: tests/test_npy.c against NumPy
 * (tests/interop/npy_interop.py). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "nb_ops.h"
#include "npy_impl.h"
#include "text_impl.h"

/* ---- the header ------------------------------------------------------------------------------- */

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* A Python literal's parser over the header dict (what numpy writes and
 * ast.literal_eval reads: strings in either quotes, True/False, tuples of
 * ints, spaces between). */
typedef struct lexer {
    const char *p, *end;
} lexer;

static void skip_space(lexer *l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}

static bool eat(lexer *l, char c) {
    skip_space(l);
    if (l->p < l->end && *l->p == c) return l->p++, true;
    return false;
}

/* A quoted string into buf (at most len - 1 characters). */
static bool read_string(lexer *l, char *buf, size_t len) {
    skip_space(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return false;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= len) return false;
        buf[n++] = *l->p++;
    }
    if (l->p >= l->end) return false;
    l->p++;
    buf[n] = 0;
    return true;
}

static bool read_word(lexer *l, const char *w) {
    skip_space(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n)) return false;
    l->p += n;
    return true;
}

/* (d0, d1, ...) with a trailing comma allowed: "()" and "(3,)" too. */
static bool read_shape(lexer *l, int *ndim, int64_t *shape) {
    if (!eat(l, '(')) return false;
    *ndim = 0;
    for (;;) {
        if (eat(l, ')')) return true;
        skip_space(l);
        int64_t v = 0;
        const char *start = l->p;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return false;
            v = v * 10 + (*l->p++ - '0');
        }
        if (l->p == start || *ndim == NB_MAX_DIMS) return false;
        if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2's long */
        shape[(*ndim)++] = v;
        if (!eat(l, ',')) return eat(l, ')');
    }
}

/* The element types NumPy names in descr that nabla reads: '<f4' etc. */
static nb_status parse_descr(const char *name, const char *d, npy_header *h) {
    char order = d[0], kind = d[1];
    int size = 0;
    if (strlen(d) < 2 || !strchr("<>|=", order) || !((kind >= 'a' && kind <= 'z') || (kind >= 'A' && kind <= 'Z')))
        return nb_set_error(NB_ERR_FORMAT, "npy: %s: descr '%s' is not a NumPy type string", name, d);
    bool ok = d[2] != 0;
    for (const char *c = d + 2; ok && *c; c++) ok = *c >= '0' && *c <= '9' && (size = size * 10 + (*c - '0')) <= 16;
    if (!ok) kind = '?'; /* '|O', '<M8[ns]', '|S20', ...: types nabla has no dtype for */
    h->swap = order == '>' && size > 1; /* '=' and '|': native (nabla runs little-endian) */
    h->itemsize = size;
    h->kind = kind;
    switch (kind) {
    case 'f': h->dtype = size == 2 ? NB_F16 : size == 4 ? NB_F32 : size == 8 ? NB_F64 : NB_DTYPE_COUNT; break;
    case 'i': h->dtype = size == 1 ? NB_I8 : size == 2 ? NB_I16 : size == 4 ? NB_I32 : size == 8 ? NB_I64 : NB_DTYPE_COUNT; break;
    case 'u': h->dtype = size == 1 ? NB_U8 : size == 2 ? NB_I32 : size == 4 || size == 8 ? NB_I64 : NB_DTYPE_COUNT; break;
    case 'b': h->dtype = size == 1 ? NB_BOOL : NB_DTYPE_COUNT; break;
    default: h->dtype = NB_DTYPE_COUNT;
    }
    if (h->dtype == NB_DTYPE_COUNT)
        return nb_set_error(NB_ERR_DTYPE, "npy: %s: NumPy type '%s' has no nabla dtype (nabla reads bool, int8-64, "
                            "uint8-64, float16/32/64)", name, d);
    /* bools are read as != 0 (a byte other than 0 or 1 is no C bool) */
    h->exact = !h->swap && size == (int)nb_dtype_size(h->dtype) && (kind != 'u' || size == 1) && kind != 'b';
    return NB_OK;
}

nb_status npy_parse_header(const uint8_t *buf, size_t len, const char *name, npy_header *h) {
    memset(h, 0, sizeof *h);
    if (len < 10 || memcmp(buf, magic, 6))
        return nb_set_error(NB_ERR_FORMAT, "npy: %s: not a .npy file (no \\x93NUMPY magic)", name);
    int major = buf[6];
    size_t hlen, pre;
    if (major == 1) hlen = (size_t)buf[8] | (size_t)buf[9] << 8, pre = 10;
    else if (major == 2 || major == 3) {
        if (len < 12) return nb_set_error(NB_ERR_FORMAT, "npy: %s: truncated header", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24, pre = 12;
    } else
        return nb_set_error(NB_ERR_FORMAT, "npy: %s: format version %d.%d (nabla reads 1.0, 2.0 and 3.0)", name, major,
                            buf[7]);
    if (hlen > NB_NPY_MAX_HEADER || hlen > len - pre)
        return nb_set_error(NB_ERR_FORMAT, "npy: %s: header of %zu bytes %s", name, hlen,
                            hlen > NB_NPY_MAX_HEADER ? "exceeds the limit" : "runs past the end of the file");
    lexer l = {(const char *)buf + pre, (const char *)buf + pre + hlen};
    char key[32], descr[32];
    bool seen[3] = {false, false, false};
    if (!eat(&l, '{')) goto bad;
    while (!eat(&l, '}')) {
        if (!read_string(&l, key, sizeof key) || !eat(&l, ':')) goto bad;
        if (!strcmp(key, "descr")) {
            skip_space(&l);
            if (l.p < l.end && *l.p == '[')
                return nb_set_error(NB_ERR_DTYPE, "npy: %s: a structured array (nabla reads plain arrays)", name);
            if (!read_string(&l, descr, sizeof descr)) goto bad;
            seen[0] = true;
        } else if (!strcmp(key, "fortran_order")) {
            if (read_word(&l, "True")) h->fortran = true;
            else if (!read_word(&l, "False")) goto bad;
            seen[1] = true;
        } else if (!strcmp(key, "shape")) {
            if (!read_shape(&l, &h->ndim, h->shape)) goto bad;
            seen[2] = true;
        } else
            goto bad;
        if (!eat(&l, ',')) {
            if (!eat(&l, '}')) goto bad;
            break;
        }
    }
    if (!seen[0] || !seen[1] || !seen[2]) goto bad;
    nb_status st = parse_descr(name, descr, h);
    if (st) return st;
    size_t n = 1, bound = 1; /* bound: the product of max(size, 1), so a 0 does not hide a huge size */
    for (int i = 0; i < h->ndim; i++) {
        size_t d = h->shape[i] ? (size_t)h->shape[i] : 1;
        if (bound > SIZE_MAX / 16 / d) return nb_set_error(NB_ERR_FORMAT, "npy: %s: shape too large", name);
        bound *= d, n *= (size_t)h->shape[i];
    }
    h->numel = n;
    h->data_offset = pre + hlen;
    h->data_bytes = n * (size_t)h->itemsize;
    if (len - h->data_offset != h->data_bytes)
        return nb_set_error(NB_ERR_FORMAT, "npy: %s: the shape and type need %zu data bytes, the file has %zu", name,
                            h->data_bytes, len - h->data_offset);
    return NB_OK;
bad:
    return nb_set_error(NB_ERR_FORMAT, "npy: %s: header is not a dict of 'descr', 'fortran_order' and 'shape': %.*s",
                        name, (int)(hlen < 200 ? hlen : 200), (const char *)buf + pre);
}

/* ---- values into nabla dtypes ------------------------------------------------------------------ */

static uint64_t load_uint(const uint8_t *p, int size, bool swap) {
    uint64_t v = 0;
    for (int b = 0; b < size; b++) v |= (uint64_t)p[swap ? size - 1 - b : b] << (8 * b);
    return v;
}

/* The n elements at src (NumPy's type h) as nabla's h->dtype at dst. */
static nb_status convert(const npy_header *h, const uint8_t *src, void *dst, const char *name) {
    int size = h->itemsize;
    size_t n = h->numel;
    if (h->exact) {
        memcpy(dst, src, h->data_bytes);
        return NB_OK;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t u = load_uint(src + i * (size_t)size, size, h->swap);
        switch (h->kind) {
        case 'i': { /* sign-extend */
            int64_t v = size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
            if (h->dtype == NB_I32) ((int32_t *)dst)[i] = (int32_t)v;
            else if (h->dtype == NB_I16) ((int16_t *)dst)[i] = (int16_t)v;
            else if (h->dtype == NB_I8) ((int8_t *)dst)[i] = (int8_t)v;
            else ((int64_t *)dst)[i] = v;
            break;
        }
        case 'u':
            if (h->dtype == NB_I32) ((int32_t *)dst)[i] = (int32_t)u;
            else {
                if (u > (uint64_t)INT64_MAX)
                    return nb_set_error(NB_ERR_DTYPE, "npy: %s: uint64 value %llu at %zu does not fit int64", name,
                                        (unsigned long long)u, i);
                ((int64_t *)dst)[i] = (int64_t)u;
            }
            break;
        case 'b': ((uint8_t *)dst)[i] = u != 0; break;
        default: /* byte-swapped floats: the bits as they are */
            if (size == 2) ((uint16_t *)dst)[i] = (uint16_t)u;
            else if (size == 4) ((uint32_t *)dst)[i] = (uint32_t)u;
            else if (size == 8) ((uint64_t *)dst)[i] = u;
            else ((uint8_t *)dst)[i] = (uint8_t)u;
        }
    }
    return NB_OK;
}

nb_tensor *npy_tensor_from_bytes(const uint8_t *buf, size_t len, const char *name) {
    npy_header h;
    if (npy_parse_header(buf, len, name, &h)) return NULL;
    size_t out_bytes = h.numel * nb_dtype_size(h.dtype);
    void *host = malloc(out_bytes ? out_bytes : 1);
    if (!host) return NB_FAIL(NB_ERR_OOM, "npy: %s: out of host memory (%zu bytes)", name, out_bytes);
    if (convert(&h, buf + h.data_offset, host, name)) return free(host), NULL;
    nb_tensor *t;
    if (!h.fortran || h.ndim < 2) {
        t = nb_from_data(host, h.ndim, h.shape, h.dtype);
    } else { /* column-major: the reversed shape in C order, its dims reversed back */
        int64_t rev[NB_MAX_DIMS];
        int perm[NB_MAX_DIMS];
        for (int i = 0; i < h.ndim; i++) rev[i] = h.shape[h.ndim - 1 - i], perm[i] = h.ndim - 1 - i;
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *r = nb_contiguous(nb_permute(nb_from_data(host, h.ndim, rev, h.dtype), perm));
        t = nb_scope_return(s, r);
    }
    free(host);
    return t;
}

/* ---- files ------------------------------------------------------------------------------------- */

/* The data module's file access (npy, npz, images, token shards): path
 * opened for reading, or -1 with NB_ERR_IO naming op when it cannot be or
 * is not a regular file; *len its size. */
static int open_regular(const char *op, const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nb_set_error(NB_ERR_IO, "%s: cannot open %s: %s", op, path, strerror(errno)), -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: %s is not a regular file", op, path), -1;
    }
    *len = (size_t)st.st_size;
    return fd;
}

uint8_t *nb_data_read_file(const char *op, const char *path, size_t *len) {
    size_t n;
    int fd = open_regular(op, path, &n);
    if (fd < 0) return NULL;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory reading %s (%zu bytes)", op, path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        return NB_FAIL(NB_ERR_IO, "%s: cannot read %s", op, path);
    }
    *len = n;
    return buf;
}

void *nb_data_map_file(const char *op, const char *path, bool writable, size_t *len) {
    int fd = open_regular(op, path, len);
    if (fd < 0) return NULL;
    if (!*len) {
        close(fd);
        return NB_FAIL(NB_ERR_FORMAT, "%s: %s is empty", op, path);
    }
    void *base = mmap(NULL, *len, PROT_READ | (writable ? PROT_WRITE : 0), MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) return NB_FAIL(NB_ERR_IO, "%s: cannot map %s: %s", op, path, strerror(err));
    return base;
}

nb_tensor *nb_npy_load(const char *path) {
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "npy_load: NULL path");
    size_t len;
    uint8_t *buf = nb_data_read_file("npy_load", path, &len);
    if (!buf) return NULL;
    nb_tensor *t = npy_tensor_from_bytes(buf, len, path);
    free(buf);
    return t;
}

typedef struct mapping {
    void *base;
    size_t len;
} mapping;

static void unmap(void *ctx) {
    mapping *m = ctx;
    munmap(m->base, m->len);
    free(m);
}

nb_tensor *nb_npy_load_mmap(const char *path) {
    const char *op = "npy_load_mmap";
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    size_t len;
    /* copy-on-write: writes through the tensor stay in this process, the file is never changed */
    void *base = nb_data_map_file(op, path, true, &len);
    if (!base) return NULL;
    npy_header h;
    mapping *m = NULL;
    nb_status s = npy_parse_header(base, len, path, &h);
    if (!s && (!h.exact || (h.fortran && h.ndim > 1) || (h.data_offset % nb_dtype_size(h.dtype))))
        s = nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s holds data nabla cannot use as it lies (another byte order or "
                         "width, bools, Fortran order, or data not aligned to its element size): use nb_npy_load", op,
                         path);
    if (!s && !(m = malloc(sizeof *m))) s = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    nb_tensor *t = NULL;
    if (!s) {
        m->base = base, m->len = len;
        t = nb_tensor_from_host_memory((uint8_t *)base + h.data_offset, h.ndim, h.shape, h.dtype, unmap, m);
    }
    if (!t) {
        free(m);
        munmap(base, len);
    }
    return t;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static const char *npy_descr(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return "<f4";
    case NB_F64: return "<f8";
    case NB_F16: return "<f2";
    case NB_I32: return "<i4";
    case NB_I64: return "<i8";
    case NB_U8: return "|u1";
    case NB_I8: return "|i1";
    case NB_I16: return "<i2";
    case NB_BOOL: return "|b1";
    default: return NULL;
    }
}

uint8_t *npy_encode(const char *op, nb_tensor *t, size_t *len) {
    const char *descr = npy_descr(nb_dtype_of(t));
    if (!descr)
        return NB_FAIL(NB_ERR_DTYPE, "%s: NumPy has no %s (cast to float32 first)", op, nb_dtype_name(nb_dtype_of(t)));
    /* numpy's _write_array_header: the dict's repr, spare spaces for the first axis to grow, then padding to 64 */
    char hdr[64 + 24 * NB_MAX_DIMS + 64];
    int nd = nb_dim(t);
    const int64_t *shape = nb_shape(t);
    int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < nd; i++) k += snprintf(hdr + k, sizeof hdr - (size_t)k, i ? ", %lld" : "%lld", (long long)shape[i]);
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%s), }", nd == 1 ? "," : "");
    if (nd > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
        for (int i = digits; i < 21; i++) hdr[k++] = ' ';
    }
    size_t hlen = (size_t)k + 1, pad = 64 - (10 + hlen) % 64; /* magic 6, version 2, length 2 */
    size_t bytes = (size_t)nb_numel(t) * nb_dtype_size(nb_dtype_of(t)), head = 10 + hlen + pad;
    uint8_t *buf = malloc(head + bytes);
    if (!buf) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory (%zu bytes)", op, head + bytes);
    memcpy(buf, magic, 6);
    buf[6] = 1, buf[7] = 0;
    buf[8] = (uint8_t)((hlen + pad) & 0xff), buf[9] = (uint8_t)((hlen + pad) >> 8);
    memcpy(buf + 10, hdr, (size_t)k);
    memset(buf + 10 + k, ' ', pad);
    buf[head - 1] = '\n';
    if (bytes && nb_to_host(t, buf + head, bytes)) return free(buf), NULL;
    *len = head + bytes;
    return buf;
}

nb_status nb_npy_save(const char *path, nb_tensor *t) {
    const char *op = "npy_save";
    if (!path || !t) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, path ? "tensor" : "path");
    size_t len;
    uint8_t *buf = npy_encode(op, t, &len);
    if (!buf) return nb_last_status();
    nb_status st = nb_write_file_atomic(op, path, buf, len);
    free(buf);
    return st;
}
