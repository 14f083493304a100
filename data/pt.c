/* pt.c - PyTorch's checkpoint format (nb_data.h, "PyTorch checkpoints"):
 * torch.load(weights_only=True) and torch.save of a state_dict. A zip
 * (zip.c) whose records share one folder: data.pkl (pickle.c's restricted
 * unpickler), data/<key> per storage, byteorder and version. PyTorch's
 * torch/serialization.py and caffe2/serialize/inline_container.cc define
 * the layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "pickle_impl.h"
#include "zip_impl.h"

/* ---- memory that tensors borrow ------------------------------------------------------------------ */

/* The file's mapping, or a block copied out of it: freed when the last tensor over it goes. */
typedef struct holder {
    void *base;
    size_t len;
    bool mapped;
    int refs;
} holder;

static void holder_drop(void *ctx) {
    holder *h = ctx;
    if (!h || __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL)) return;
    if (h->mapped) munmap(h->base, h->len);
    else free(h->base);
    free(h);
}

/* ---- loading ----------------------------------------------------------------------------------- */

typedef struct storage {
    char *key;
    int dtype;          /* nb_dtype, or -2: untyped (bytes) */
    const uint8_t *data;
    size_t nbytes;
    holder *mem;        /* what data lies in */
    nb_tensor *base[NB_DTYPE_COUNT]; /* the 1-d tensors over it, per dtype read (owned) */
    int swapped;        /* big-endian files: the element size already swapped to, 0 before */
} storage;

typedef struct loader {
    const char *path;
    const uint8_t *buf;
    size_t len;
    holder *file;
    zip_member *ms;
    size_t n_ms;
    zip_member **by_name; /* ms sorted by name, for zip_find */
    const char *prefix; /* the archive folder, with its '/' */
    size_t prefix_len;
    bool big_endian;
    storage **st; /* each allocated alone: PK_STORAGE values point at them */
    size_t n_st, cap_st;
    char label[300];
} loader;

/* The record prefix + name (a binary search: a hostile archive may hold many members and name many storages). */
static const zip_member *find_record(const loader *L, const char *name) {
    char full[512];
    size_t n = strlen(name);
    if (L->prefix_len + n >= sizeof full) return NULL;
    memcpy(full, L->prefix, L->prefix_len), memcpy(full + L->prefix_len, name, n);
    return zip_find(L->by_name, L->n_ms, full, L->prefix_len + n);
}

/* The bytes of record `name` (*owned set when inflated), NULL with an error when absent or bad. */
static const uint8_t *record(loader *L, const char *name, size_t *len, uint8_t **owned) {
    const zip_member *m = find_record(L, name);
    *owned = NULL;
    if (!m) return NB_FAIL(NB_ERR_FORMAT, "pt: %s: the archive has no record %.*s%s", L->path, (int)L->prefix_len,
                           L->prefix, name);
    const uint8_t *d = zip_member_data(L->buf, L->len, m, "pt", L->path, owned);
    *len = (size_t)m->usize;
    return d;
}

/* persistent_load(('storage', storage_type, key, location, numel)): the record data/<key>. */
static nb_status load_storage(void *ctx, const pk_value *pid, pk_value *out) {
    loader *L = ctx;
    int64_t numel;
    if (pid->n != 5 || pid->items[1]->kind != PK_GLOBAL || pid->items[2]->kind != PK_STR ||
        pid->items[4]->kind != PK_INT || (numel = pid->items[4]->i) < 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: a storage id other than ('storage', type, key, location, numel)", L->label);
    const pk_value *type = pid->items[1];
    if (type->i != G_STORAGE_TYPE)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s is not a storage type", L->label, type->s);
    if (type->dtype == -1)
        return nb_set_error(NB_ERR_DTYPE, "%s: a storage of %s, a dtype nabla lacks", L->label, type->s);
    const char *key = pid->items[2]->s;
    for (size_t i = 0; i < L->n_st; i++)
        if (!strcmp(L->st[i]->key, key)) {
            if (L->st[i]->dtype != type->dtype)
                return nb_set_error(NB_ERR_FORMAT, "%s: storage %s is named with two types", L->label, key);
            out->storage = L->st[i], out->dtype = type->dtype;
            return NB_OK;
        }
    size_t es = type->dtype == -2 ? 1 : nb_dtype_size((nb_dtype)type->dtype);
    if (strlen(key) > 200 || (uint64_t)numel > SIZE_MAX / es)
        return nb_set_error(NB_ERR_FORMAT, "%s: storage %.40s: a bad key or size", L->label, key);
    char name[256];
    snprintf(name, sizeof name, "data/%s", key);
    size_t len;
    uint8_t *owned;
    const uint8_t *d = record(L, name, &len, &owned);
    if (!d) return nb_last_status();
    if (len != (size_t)numel * es) {
        free(owned);
        return nb_set_error(NB_ERR_FORMAT, "%s: storage %s holds %zu bytes, not the %lld elements of %zu its id says",
                            L->label, key, len, (long long)numel, es);
    }
    storage *s = calloc(1, sizeof *s);
    holder *h = owned ? malloc(sizeof *h) : NULL;
    if (L->n_st == L->cap_st) {
        size_t cap = L->cap_st ? 2 * L->cap_st : 16;
        storage **ns = realloc(L->st, cap * sizeof *ns);
        if (ns) L->st = ns, L->cap_st = cap;
    }
    if (!s || (owned && !h) || L->n_st == L->cap_st || !(s->key = strdup(key))) {
        free(s), free(h), free(owned);
        return nb_set_error(NB_ERR_OOM, "pt: out of host memory");
    }
    s->dtype = type->dtype, s->data = d, s->nbytes = len;
    if (owned) *h = (holder){.base = owned, .len = len, .refs = 1}, s->mem = h;
    else s->mem = L->file, __atomic_add_fetch(&L->file->refs, 1, __ATOMIC_RELAXED);
    L->st[L->n_st++] = s;
    out->storage = s, out->dtype = type->dtype;
    return NB_OK;
}

/* The storage's bytes as a 1-d tensor of dtype dt, made once per dtype. */
static nb_tensor *storage_base(loader *L, storage *s, nb_dtype dt) {
    if (s->base[dt]) return s->base[dt];
    size_t es = nb_dtype_size(dt);
    if (s->nbytes % es)
        return NB_FAIL(NB_ERR_FORMAT, "%s: storage %s (%zu bytes) read as %s", L->label, s->key, s->nbytes, nb_dtype_name(dt));
    if (L->big_endian && es > 1) { /* swap once, in place (the mapping is copy-on-write) */
        if (s->swapped && s->swapped != (int)es)
            return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: a big-endian storage read with two element sizes", L->label);
        if (!s->swapped) {
            uint8_t *p = (uint8_t *)s->data;
            for (size_t i = 0; i < s->nbytes; i += es)
                for (size_t a = 0, b = es - 1; a < b; a++, b--) {
                    uint8_t t = p[i + a];
                    p[i + a] = p[i + b], p[i + b] = t;
                }
            s->swapped = (int)es;
        }
    }
    int64_t n = (int64_t)(s->nbytes / es);
    nb_tensor *t;
    if ((uintptr_t)s->data % es == 0) {
        __atomic_add_fetch(&s->mem->refs, 1, __ATOMIC_RELAXED);
        t = nb_tensor_from_host_memory((void *)s->data, 1, &n, dt, holder_drop, s->mem);
        if (!t) holder_drop(s->mem);
    } else { /* not aligned to its elements: a copy */
        t = nb_tensor_new(1, &n, dt, NB_CPU);
        if (t && n) memcpy(nb_data_ptr(t), s->data, s->nbytes);
    }
    if (t) nb_retain(t); /* the loader's reference, dropped at the end of the load */
    return s->base[dt] = t;
}

static nb_tensor *make_tensor(void *ctx, const pk_value *sv, nb_dtype dt, int64_t offset, int ndim,
                              const int64_t *size, const int64_t *stride) {
    loader *L = ctx;
    storage *s = sv->storage;
    size_t es = nb_dtype_size(dt);
    uint64_t elems = s->nbytes / es, last = (uint64_t)offset, numel = 1;
    if (offset < 0) return NB_FAIL(NB_ERR_FORMAT, "%s: a negative storage offset", L->label);
    uint64_t nonzero = 1; /* the product of the sizes other than 0: what a shape may hold */
    for (int d = 0; d < ndim; d++) {
        if (size[d] < 0 || stride[d] < 0)
            return NB_FAIL(NB_ERR_FORMAT, "%s: a negative size or stride", L->label);
        if (size[d] && (nonzero = nonzero <= ((uint64_t)1 << 62) / (uint64_t)size[d] ? nonzero * (uint64_t)size[d]
                                                                                       : UINT64_MAX) == UINT64_MAX)
            return NB_FAIL(NB_ERR_FORMAT, "%s: a tensor of more than 2^62 elements", L->label);
        numel = size[d] ? numel * (uint64_t)size[d] : 0;
    }
    if (!numel) return nb_tensor_new(ndim, size, dt, NB_CPU);
    for (int d = 0; d < ndim; d++) { /* the last element's index, overflow-checked */
        uint64_t step = (uint64_t)(size[d] - 1);
        if (stride[d] && step > (UINT64_MAX - last) / (uint64_t)stride[d]) return NB_FAIL(NB_ERR_FORMAT, "%s: a tensor past its storage", L->label);
        last += step * (uint64_t)stride[d];
    }
    if (last >= elems)
        return NB_FAIL(NB_ERR_FORMAT, "%s: a tensor reaching element %llu of storage %s, which holds %llu", L->label,
                       (unsigned long long)last, s->key, (unsigned long long)elems);
    nb_tensor *base = storage_base(L, s, dt);
    if (!base) return NULL;
    return nb_tensor_view_of(base, ndim, size, stride, offset);
}

/* ---- the tree of values, as named entries ---------------------------------------------------------- */

typedef struct flat {
    nb_pt *f;
    int cap;
    size_t budget; /* entries and containers visited, and bytes of names and strings copied: shared containers
                      and strings may not unfold without bound */
    const char *label;
} flat;

static nb_status add_entry(flat *F, const char *name, const pk_value *v) {
    nb_pt *f = F->f;
    if (f->n == F->cap) {
        int cap = F->cap ? 2 * F->cap : 64;
        nb_pt_entry *ne = F->cap < (1 << 29) ? realloc(f->entries, (size_t)cap * sizeof *ne) : NULL;
        if (!ne) return nb_set_error(NB_ERR_OOM, "pt: out of host memory");
        f->entries = ne, F->cap = cap;
    }
    nb_pt_entry e = {0};
    size_t cost = strlen(name) + (v->kind == PK_STR || v->kind == PK_BYTES || v->kind == PK_GLOBAL ? v->len : 0);
    if (cost > F->budget)
        return nb_set_error(NB_ERR_FORMAT, "%s: shared values unfold to more than the pickle holds", F->label);
    F->budget -= cost;
    if (!(e.name = strdup(name))) return nb_set_error(NB_ERR_OOM, "pt: out of host memory");
    switch (v->kind) {
    case PK_TENSOR: e.kind = NB_PT_TENSOR, e.tensor = v->tensor, nb_retain(v->tensor); break;
    case PK_NONE: e.kind = NB_PT_NONE; break;
    case PK_BOOL: e.kind = NB_PT_BOOL, e.i = v->i; break;
    case PK_INT: e.kind = NB_PT_INT, e.i = v->i; break;
    case PK_FLOAT: e.kind = NB_PT_FLOAT, e.f = v->f; break;
    case PK_COMPLEX: e.kind = NB_PT_COMPLEX, e.f = v->f, e.imag = v->imag; break;
    default: /* strings, bytes, and dtypes by name */
        e.kind = v->kind == PK_BYTES ? NB_PT_BYTES : NB_PT_STRING, e.len = v->len;
        char *s = malloc(v->len + 1);
        if (!s) {
            free((char *)e.name);
            return nb_set_error(NB_ERR_OOM, "pt: out of host memory");
        }
        memcpy(s, v->s, v->len + 1);
        e.s = s;
    }
    f->entries[f->n++] = e;
    return NB_OK;
}

static nb_status flatten(flat *F, const pk_value *v, char *name, size_t nlen, int depth) {
    if (depth > 64) return nb_set_error(NB_ERR_FORMAT, "%s: nested deeper than 64 levels (or a cycle)", F->label);
    if (!F->budget--)
        return nb_set_error(NB_ERR_FORMAT, "%s: shared containers unfold to more entries than the pickle holds", F->label);
    bool dict = v->kind == PK_DICT;
    if (v->kind == PK_STORAGE)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: a bare storage (not a tensor) at %s", F->label, nlen ? name : "the top");
    if (!dict && v->kind != PK_LIST && v->kind != PK_TUPLE && v->kind != PK_SET) return add_entry(F, name, v);
    for (size_t i = 0; i < v->n; i += dict ? 2 : 1) {
        char part[48];
        const char *key = part;
        size_t klen;
        if (!dict) klen = (size_t)snprintf(part, sizeof part, "%zu", i);
        else if (v->items[i]->kind == PK_INT) klen = (size_t)snprintf(part, sizeof part, "%lld", (long long)v->items[i]->i);
        else if (v->items[i]->kind == PK_STR && !memchr(v->items[i]->s, 0, v->items[i]->len))
            key = v->items[i]->s, klen = v->items[i]->len;
        else
            return nb_set_error(NB_ERR_UNSUPPORTED, "%s: a dict key that is a %s (nabla names entries by str and int "
                                "keys)", F->label, v->items[i]->kind == PK_STR ? "str holding a NUL" : "non-string");
        size_t at = nlen ? nlen + 1 : 0;
        if (at + klen >= 4096) return nb_set_error(NB_ERR_UNSUPPORTED, "%s: an entry name past 4095 bytes", F->label);
        if (nlen) name[nlen] = '.';
        memcpy(name + at, key, klen), name[at + klen] = 0;
        nb_status st = flatten(F, dict ? v->items[i + 1] : v->items[i], name, at + klen, depth + 1);
        name[nlen] = 0;
        if (st) return st;
    }
    return NB_OK;
}

static int by_entry_name(const void *a, const void *b) {
    return strcmp((*(const nb_pt_entry *const *)a)->name, (*(const nb_pt_entry *const *)b)->name);
}

void nb_pt_free(nb_pt *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        free((char *)f->entries[i].name), free((char *)f->entries[i].s);
        if (f->entries[i].tensor) nb_release(f->entries[i].tensor);
    }
    free(f->entries), free(f);
}

/* The archive's folder: every record lies in the first record's folder (PyTorch's reader requires it). */
static nb_status find_prefix(loader *L) {
    if (!L->n_ms) return nb_set_error(NB_ERR_FORMAT, "pt: %s: an empty zip, not a PyTorch checkpoint", L->path);
    const char *slash = memchr(L->ms[0].name, '/', L->ms[0].name_len);
    if (!slash) return nb_set_error(NB_ERR_FORMAT, "pt: %s: its records are not in a folder (not a PyTorch checkpoint)", L->path);
    L->prefix = L->ms[0].name, L->prefix_len = (size_t)(slash - L->ms[0].name) + 1;
    for (size_t i = 1; i < L->n_ms; i++)
        if (L->ms[i].name_len < L->prefix_len || memcmp(L->ms[i].name, L->prefix, L->prefix_len))
            return nb_set_error(NB_ERR_FORMAT, "pt: %s: record %.*s lies outside the archive's folder %.*s", L->path,
                                (int)L->ms[i].name_len, L->ms[i].name, (int)L->prefix_len, L->prefix);
    return NB_OK;
}

static nb_status load(loader *L, nb_pt *f) {
    nb_status st = zip_read_dir(L->buf, L->len, "pt", L->path, &L->ms, &L->n_ms, &L->by_name);
    if (!st) st = find_prefix(L);
    if (st) return st;
    uint8_t *owned = NULL;
    size_t len;
    if (find_record(L, "byteorder")) {
        const uint8_t *b = record(L, "byteorder", &len, &owned);
        if (!b) return nb_last_status();
        L->big_endian = len == 3 && !memcmp(b, "big", 3);
        if (!L->big_endian && !(len == 6 && !memcmp(b, "little", 6))) st = nb_set_error(NB_ERR_FORMAT, "pt: %s: byteorder is neither little nor big", L->path);
        free(owned);
        if (st) return st;
    }
    const uint8_t *pkl = record(L, "data.pkl", &len, &owned);
    if (!pkl) return nb_last_status();
    snprintf(L->label, sizeof L->label, "pt: %s: data.pkl", L->path);
    pk_callbacks cb = {load_storage, make_tensor, L};
    pk_unpickler *u;
    pk_value *root = pk_load(pkl, len, L->label, &cb, &u);
    if (root) {
        char *name = malloc(4096);
        flat F = {f, 0, 16 * len + (1 << 20), L->label};
        if (!name) st = nb_set_error(NB_ERR_OOM, "pt: out of host memory");
        else name[0] = 0, st = flatten(&F, root, name, 0, 0);
        free(name);
    } else
        st = nb_last_status();
    pk_free(u);
    free(owned);
    if (!st && f->n > 1) { /* two entries of one name: "a.b" beside {"a": {"b": ...}} */
        const nb_pt_entry **o = malloc((size_t)f->n * sizeof *o);
        if (!o) return nb_set_error(NB_ERR_OOM, "pt: out of host memory");
        for (int i = 0; i < f->n; i++) o[i] = &f->entries[i];
        qsort(o, (size_t)f->n, sizeof *o, by_entry_name);
        for (int i = 0; !st && i + 1 < f->n; i++)
            if (!strcmp(o[i]->name, o[i + 1]->name))
                st = nb_set_error(NB_ERR_FORMAT, "%s: two entries named %s", L->label, o[i]->name);
        free(o);
    }
    return st;
}

nb_pt *nb_pt_load(const char *path) {
    const char *op = "pt_load";
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    size_t len;
    void *base = nb_data_map_file(op, path, true, &len);
    if (!base) return NULL;
    const uint8_t *b = base;
    if (len >= 2 && b[0] == 0x80 && b[1] <= 5) {
        munmap(base, len);
        return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: %s is in PyTorch's legacy format (before 1.6, a bare pickle): load and "
                       "save it again with a newer torch.save", op, path);
    }
    if (len >= 262 && !memcmp(b + 257, "ustar", 5)) {
        munmap(base, len);
        return NB_FAIL(NB_ERR_UNSUPPORTED, "%s: %s is in PyTorch's legacy tar format: load and save it again with a "
                       "newer torch.save", op, path);
    }
    holder *file = malloc(sizeof *file);
    nb_pt *f = calloc(1, sizeof *f);
    if (!file || !f) {
        free(file), free(f), munmap(base, len);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    *file = (holder){.base = base, .len = len, .mapped = true, .refs = 1};
    loader L = {.path = path, .buf = b, .len = len, .file = file};
    snprintf(L.label, sizeof L.label, "pt: %s", path);
    nb_scope *s = nb_op_scope_begin();
    nb_status st = load(&L, f);
    for (size_t i = 0; i < L.n_st; i++) {
        for (int d = 0; d < NB_DTYPE_COUNT; d++)
            if (L.st[i]->base[d]) nb_release(L.st[i]->base[d]);
        holder_drop(L.st[i]->mem);
        free(L.st[i]->key), free(L.st[i]);
    }
    nb_scope_end(s);
    free(L.st), free(L.ms), free(L.by_name);
    holder_drop(file); /* the tensors over the mapping keep it */
    if (st) {
        nb_pt_free(f);
        return NULL;
    }
    return f;
}

nb_tensor *nb_pt_get(const nb_pt *f, const char *name) {
    if (!f || !name) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "pt_get: NULL %s", f ? "name" : "file");
        return NULL;
    }
    for (int i = 0; i < f->n; i++)
        if (f->entries[i].kind == NB_PT_TENSOR && !strcmp(f->entries[i].name, name)) return f->entries[i].tensor;
    return NULL;
}

int nb_pt_state_dict(const nb_pt *f, const char *prefix, nb_named_tensor **out) {
    if (!f || !out) {
        nb_set_error(NB_ERR_INVALID_ARG, "pt_state_dict: NULL %s", f ? "out" : "file");
        return -1;
    }
    size_t pl = prefix ? strlen(prefix) : 0;
    if (pl && prefix[pl - 1] == '.') pl--;
    *out = malloc(((size_t)f->n + 1) * sizeof **out);
    if (!*out) {
        nb_set_error(NB_ERR_OOM, "pt_state_dict: out of host memory");
        return -1;
    }
    int k = 0;
    for (int i = 0; i < f->n; i++) {
        const nb_pt_entry *e = &f->entries[i];
        if (e->kind != NB_PT_TENSOR) continue;
        if (pl && (strncmp(e->name, prefix, pl) || e->name[pl] != '.')) continue;
        (*out)[k].name = e->name + (pl ? pl + 1 : 0), (*out)[k].tensor = e->tensor, k++;
    }
    return k;
}

/* ---- saving ------------------------------------------------------------------------------------ */

/* A pickle being written (protocol 2, the opcodes torch.save's pickler uses). */
typedef struct pkl {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} pkl;

static void emit(pkl *w, const void *src, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        uint8_t *np = realloc(w->p, cap);
        if (!np) {
            w->oom = true;
            return;
        }
        w->p = np, w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void emit_byte(pkl *w, uint8_t b) { emit(w, &b, 1); }

static void emit_int(pkl *w, int64_t v) {
    uint8_t b[9];
    int n;
    if (v >= 0 && v < 256) b[0] = 'K', b[1] = (uint8_t)v, n = 2;                          /* BININT1 */
    else if (v >= 0 && v < 65536) b[0] = 'M', b[1] = (uint8_t)v, b[2] = (uint8_t)(v >> 8), n = 3; /* BININT2 */
    else if (v >= INT32_MIN && v <= INT32_MAX) {                                          /* BININT */
        b[0] = 'J';
        for (int i = 0; i < 4; i++) b[1 + i] = (uint8_t)((uint64_t)v >> (8 * i));
        n = 5;
    } else { /* LONG1, 8 bytes of two's complement */
        emit_byte(w, 0x8a), emit_byte(w, 8);
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
        n = 8;
    }
    emit(w, b, (size_t)n);
}

static void emit_str(pkl *w, const char *s) { /* BINUNICODE */
    size_t n = strlen(s);
    uint8_t b[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    emit(w, b, 5), emit(w, s, n);
}

static void emit_global(pkl *w, const char *module, const char *name) {
    emit_byte(w, 'c'), emit(w, module, strlen(module)), emit_byte(w, '\n'), emit(w, name, strlen(name)), emit_byte(w, '\n');
}

static void emit_tuple(pkl *w, int n, const int64_t *v) {
    emit_byte(w, '(');
    for (int i = 0; i < n; i++) emit_int(w, v[i]);
    emit_byte(w, 't');
}

static const char *storage_type(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return "FloatStorage";
    case NB_F64: return "DoubleStorage";
    case NB_F16: return "HalfStorage";
    case NB_BF16: return "BFloat16Storage";
    case NB_I64: return "LongStorage";
    case NB_I32: return "IntStorage";
    case NB_U8: return "ByteStorage";
    case NB_I8: return "CharStorage";
    case NB_I16: return "ShortStorage";
    case NB_BOOL: return "BoolStorage";
    default: return NULL;
    }
}

/* One storage written: the range [lo, hi) of a storage in elements, shared by the tensors of its group. */
typedef struct group {
    const nb_tensor *first;
    int64_t lo, hi;
} group;

nb_status nb_pt_save(const char *path, const nb_named_tensor *ts, int n) {
    const char *op = "pt_save";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    if (n < 0 || (n && !ts)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d tensors", op, n);
    for (int i = 0; i < n; i++) {
        if (!ts[i].name || !ts[i].tensor)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor %d: NULL name or tensor", op, i);
        if (!storage_type(nb_dtype_of(ts[i].tensor)))
            return nb_set_error(NB_ERR_DTYPE, "%s: %s: a dtype torch.save cannot name", op, ts[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(ts[i].name, ts[j].name)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: two tensors named %s", op, ts[i].name);
    }
    group *g = calloc(n ? (size_t)n : 1, sizeof *g);
    int *gi = calloc(n ? (size_t)n : 1, sizeof *gi), ng = 0;
    if (!g || !gi) {
        free(g), free(gi);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    }
    /* tensors of one storage, dtype and device are saved as views of one storage, as torch.save does */
    for (int i = 0; i < n; i++) {
        const nb_tensor *t = ts[i].tensor;
        int64_t lo = nb_storage_offset(t), hi = lo + 1;
        const int64_t *sz = nb_shape(t), *sd = nb_strides(t);
        if (nb_numel(t) == 0) hi = lo;
        else
            for (int d = 0; d < nb_dim(t); d++) hi += (sz[d] - 1) * sd[d];
        int k = -1;
        for (int j = 0; j < ng && k < 0 && hi > lo; j++)
            if (g[j].hi > g[j].lo && nb_shares_storage(t, g[j].first) && nb_dtype_of(t) == nb_dtype_of(g[j].first) &&
                nb_device_of(t).type == nb_device_of(g[j].first).type && nb_device_of(t).index == nb_device_of(g[j].first).index)
                k = j;
        if (k < 0) g[k = ng++] = (group){t, lo, hi};
        else {
            if (lo < g[k].lo) g[k].lo = lo;
            if (hi > g[k].hi) g[k].hi = hi;
        }
        gi[i] = k;
    }
    pkl w = {0};
    emit_byte(&w, 0x80), emit_byte(&w, 2); /* PROTO 2, torch.save's default */
    emit_global(&w, "collections", "OrderedDict"), emit_byte(&w, ')'), emit_byte(&w, 'R');
    emit_byte(&w, '(');
    for (int i = 0; i < n; i++) {
        const nb_tensor *t = ts[i].tensor;
        char key[24];
        snprintf(key, sizeof key, "%d", gi[i]);
        emit_str(&w, ts[i].name);
        emit_global(&w, "torch._utils", "_rebuild_tensor_v2");
        emit_byte(&w, '('); /* (storage, storage_offset, size, stride, requires_grad, backward_hooks) */
        emit_byte(&w, '(');
        emit_str(&w, "storage"), emit_global(&w, "torch", storage_type(nb_dtype_of(t))), emit_str(&w, key);
        emit_str(&w, "cpu"), emit_int(&w, g[gi[i]].hi - g[gi[i]].lo);
        emit_byte(&w, 't'), emit_byte(&w, 'Q');
        emit_int(&w, g[gi[i]].hi > g[gi[i]].lo ? nb_storage_offset(t) - g[gi[i]].lo : 0);
        emit_tuple(&w, nb_dim(t), nb_shape(t)), emit_tuple(&w, nb_dim(t), nb_strides(t));
        emit_byte(&w, 0x89); /* requires_grad False: a state_dict's tensors are detached */
        emit_global(&w, "collections", "OrderedDict"), emit_byte(&w, ')'), emit_byte(&w, 'R');
        emit_byte(&w, 't'), emit_byte(&w, 'R');
    }
    emit_byte(&w, 'u'), emit_byte(&w, '.');
    nb_status st = w.oom ? nb_set_error(NB_ERR_OOM, "%s: out of host memory", op) : NB_OK;
    zip_writer z = {.op = op};
    if (!st) {
        zip_writer_add(&z, "archive/data.pkl", w.p, w.len, false, 64);
        zip_writer_add(&z, "archive/.format_version", "1", 1, false, 64);
        zip_writer_add(&z, "archive/.storage_alignment", "64", 2, false, 64);
        zip_writer_add(&z, "archive/byteorder", "little", 6, false, 64);
    }
    free(w.p);
    for (int k = 0; k < ng && !st && !z.st; k++) {
        size_t es = nb_dtype_size(nb_dtype_of(g[k].first)), bytes = (size_t)(g[k].hi - g[k].lo) * es;
        uint8_t *host = malloc(bytes ? bytes : 1);
        if (!host) {
            st = nb_set_error(NB_ERR_OOM, "%s: out of host memory (%zu bytes)", op, bytes);
            break;
        }
        if (bytes) {
            nb_scope *s = nb_op_scope_begin();
            int64_t len = g[k].hi - g[k].lo, one = 1;
            nb_tensor *range = nb_tensor_view_of(g[k].first, 1, &len, &one, g[k].lo);
            st = range ? nb_to_host(range, host, bytes) : nb_last_status();
            nb_scope_end(s);
        }
        char name[48];
        snprintf(name, sizeof name, "archive/data/%d", k);
        if (!st) zip_writer_add(&z, name, host, bytes, false, 64);
        free(host);
    }
    if (!st) zip_writer_add(&z, "archive/version", "3\n", 2, false, 64);
    free(g), free(gi);
    if (st) {
        zip_writer_free(&z);
        return st;
    }
    return zip_writer_finish(&z, path);
}
