/* text_util.c - small containers for the text pipeline: a growable byte
 * buffer, whole-file reading, and a string-interning hash map (open
 * addressing, linear probing, FNV-1a) that gives every distinct string the
 * next dense id; vocabularies, word counts and symbol tables are all such
 * maps. Keys live in one arena, so a map of 100k words costs a few
 * allocations, not 100k. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text_impl.h"

bool nb_strbuf_add(nb_strbuf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0; /* always NUL-terminated, so the buffer is a C string */
    return true;
}

void nb_strbuf_free(nb_strbuf *b) {
    free(b->p);
    *b = (nb_strbuf){0};
}

nb_status nb_read_text_file(const char *op, const char *path, bool drop_nul, char **data, size_t *len) {
    *data = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return nb_set_error(NB_ERR_IO, "%s: cannot open %s: %s", op, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return nb_set_error(NB_ERR_IO, "%s: %s is a directory", op, path);
    }
    nb_strbuf b = {0};
    char chunk[1 << 16];
    size_t got;
    if (!nb_strbuf_add(&b, "", 0)) goto oom;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!nb_strbuf_add(&b, chunk, got)) goto oom;
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        nb_strbuf_free(&b);
        return nb_set_error(NB_ERR_IO, "%s: cannot read %s: %s", op, path, strerror(e));
    }
    fclose(f);
    if (drop_nul) {
        size_t w = 0;
        for (size_t r = 0; r < b.len; r++)
            if (b.p[r]) b.p[w++] = b.p[r];
        b.p[w] = 0, b.len = w;
    }
    *data = b.p, *len = b.len;
    return NB_OK;
oom:
    fclose(f);
    nb_strbuf_free(&b);
    return nb_set_error(NB_ERR_OOM, "%s: out of memory reading %s", op, path);
}

static uint32_t fnv1a(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int32_t nb_strmap_find(const nb_strmap *m, const char *s, size_t len) {
    if (!m->cap) return -1;
    uint32_t h = fnv1a(s, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int32_t id = m->slots[i];
        if (id < 0) return -1;
        if (m->hashes[id] == h && m->lens[id] == len && !memcmp(nb_strmap_key(m, id), s, len))
            return id;
    }
}

/* Doubles the slot table (load factor <= 1/2) and reinserts every id. */
static bool rehash(nb_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    int32_t *slots = malloc(cap * sizeof *slots);
    if (!slots) return false;
    memset(slots, 0xFF, cap * sizeof *slots); /* all -1 */
    for (int32_t id = 0; id < m->n; id++) {
        size_t i = m->hashes[id] & (cap - 1);
        while (slots[i] >= 0) i = (i + 1) & (cap - 1);
        slots[i] = id;
    }
    free(m->slots);
    m->slots = slots, m->cap = cap;
    return true;
}

static bool grow_ids(nb_strmap *m) {
    int32_t cap = m->ids_cap ? m->ids_cap * 2 : 64;
    uint32_t *h = realloc(m->hashes, (size_t)cap * sizeof *h);
    if (!h) return false;
    m->hashes = h;
    size_t *o = realloc(m->offs, (size_t)cap * sizeof *o);
    if (!o) return false;
    m->offs = o;
    uint32_t *l = realloc(m->lens, (size_t)cap * sizeof *l);
    if (!l) return false;
    m->lens = l;
    m->ids_cap = cap;
    return true;
}

int32_t nb_strmap_intern(nb_strmap *m, const char *s, size_t len, bool *created) {
    if (created) *created = false;
    int32_t id = nb_strmap_find(m, s, len);
    if (id >= 0) return id;
    if (m->n == INT32_MAX || len > UINT32_MAX) return -1;
    if ((size_t)(m->n + 1) * 2 > m->cap && !rehash(m)) return -1;
    if (m->n == m->ids_cap && !grow_ids(m)) return -1;
    size_t off = m->arena.len;
    if (!nb_strbuf_add(&m->arena, s, len) || !nb_strbuf_add(&m->arena, "", 1)) return -1;
    id = m->n++;
    uint32_t h = fnv1a(s, len);
    m->hashes[id] = h, m->offs[id] = off, m->lens[id] = (uint32_t)len;
    size_t i = h & (m->cap - 1);
    while (m->slots[i] >= 0) i = (i + 1) & (m->cap - 1);
    m->slots[i] = id;
    if (created) *created = true;
    return id;
}

void nb_strmap_free(nb_strmap *m) {
    free(m->slots), free(m->hashes), free(m->offs), free(m->lens);
    nb_strbuf_free(&m->arena);
    *m = (nb_strmap){0};
}
