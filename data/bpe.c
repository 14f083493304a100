/* bpe.c - the byte-level BPE tokenizer: its tables (tokens with their
 * bytes, merges by rank in an open-addressing pair map), encoding and
 * decoding. Encoding splits out added tokens, pre-tokenizes
 * (bpe_pretok.c), and merges each piece with a min-heap of (rank, position)
 * over a linked list of symbols, so a piece of n bytes costs O(n log n)
 * (tokenizers' Word::merge_all; the same result as encoder.py's "merge the
 * lowest-rank pair everywhere, repeat"). Loading and saving files:
 * bpe_io.c; training: bpe_train.c. */
#include <string.h>

#include "bpe_impl.h"

/* ---- tables --------------------------------------------------------------------------------- */

nb_bpe *nb_bpe_alloc(const char *op) {
    nb_bpe *t = calloc(1, sizeof *t);
    if (!t) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    return t;
}

void nb_bpe_free(nb_bpe *t) {
    if (!t) return;
    nb_strmap_free(&t->vocab);
    nb_strbuf_free(&t->raw);
    free(t->raw_off), free(t->raw_len), free(t->added);
    free(t->merge_a), free(t->merge_b), free(t->merge_c);
    free(t->pair_keys), free(t->pair_rank), free(t->added_ids);
    free(t);
}

/* Grows the per-id arrays (doubling) to hold id. */
static bool grow_ids(nb_bpe *t, int32_t id) {
    if (id < t->ids_cap) return true;
    int32_t cap = t->ids_cap ? t->ids_cap : 512;
    while (cap <= id) cap = cap > INT32_MAX / 2 ? INT32_MAX : 2 * cap;
    size_t *o = realloc(t->raw_off, sizeof *o * (size_t)cap);
    if (!o) return false;
    t->raw_off = o;
    uint32_t *l = realloc(t->raw_len, sizeof *l * (size_t)cap);
    if (!l) return false;
    t->raw_len = l;
    uint8_t *a = realloc(t->added, (size_t)cap);
    if (!a) return false;
    t->added = a, t->ids_cap = cap;
    return true;
}

int32_t nb_bpe_add_token(nb_bpe *t, const char *op, const char *text, size_t n, bool added) {
    bool created;
    int32_t id = nb_strmap_intern(&t->vocab, text, n, &created);
    if (id < 0 || !grow_ids(t, id)) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op), -1;
    if (!created) return nb_set_error(NB_ERR_FORMAT, "%s: token \"%.*s\" is listed twice", op, (int)(n > 64 ? 64 : n), text), -1;
    /* the bytes it stands for: each character of the byte alphabet is one
     * byte; other characters (and added tokens) are their own UTF-8 */
    t->raw_off[id] = t->raw.len;
    const char *p = text, *end = text + n;
    bool ok = true;
    while (ok && p < end) {
        const char *q = p;
        uint32_t cp = nb_utf8_next(&q);
        int b = added ? -1 : nb_bpe_char_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            ok = nb_strbuf_add(&t->raw, &c, 1);
        } else ok = nb_strbuf_add(&t->raw, p, (size_t)(q - p));
        p = q;
    }
    if (!ok) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op), -1;
    t->raw_len[id] = (uint32_t)(t->raw.len - t->raw_off[id]);
    t->added[id] = added;
    return id;
}

static size_t pair_slot(const nb_bpe *t, uint64_t key) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (t->pair_cap - 1);
    while (t->pair_rank[i] >= 0 && t->pair_keys[i] != key) i = (i + 1) & (t->pair_cap - 1);
    return i;
}

static bool pair_grow(nb_bpe *t) {
    size_t old = t->pair_cap, cap = old ? 2 * old : 1024;
    uint64_t *k = malloc(cap * sizeof *k);
    int32_t *r = malloc(cap * sizeof *r);
    if (!k || !r) return free(k), free(r), false;
    memset(r, 0xFF, cap * sizeof *r);
    uint64_t *ok = t->pair_keys;
    int32_t *orank = t->pair_rank;
    t->pair_keys = k, t->pair_rank = r, t->pair_cap = cap;
    for (size_t i = 0; i < old; i++)
        if (orank[i] >= 0) {
            size_t j = pair_slot(t, ok[i]);
            t->pair_keys[j] = ok[i], t->pair_rank[j] = orank[i];
        }
    free(ok), free(orank);
    return true;
}

/* The rank of merging a then b, or -1. */
static int32_t rank_of(const nb_bpe *t, int32_t a, int32_t b) {
    if (!t->pair_cap) return -1;
    return t->pair_rank[pair_slot(t, (uint64_t)(uint32_t)a << 32 | (uint32_t)b)];
}

nb_status nb_bpe_add_merge(nb_bpe *t, const char *op, int32_t a, int32_t b) {
    nb_strbuf joined = {0};
    const nb_strmap *v = &t->vocab;
    bool ok = nb_strbuf_add(&joined, nb_strmap_key(v, a), v->lens[a]) &&
              nb_strbuf_add(&joined, nb_strmap_key(v, b), v->lens[b]);
    int32_t c = ok ? nb_strmap_find(v, joined.p, joined.len) : -1;
    if (ok && c < 0) {
        nb_status st = nb_set_error(NB_ERR_FORMAT, "%s: merge \"%s %s\" makes \"%s\", which is not a token", op,
                                    nb_strmap_key(v, a), nb_strmap_key(v, b), joined.p);
        nb_strbuf_free(&joined);
        return st;
    }
    nb_strbuf_free(&joined);
    if (!ok) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if ((size_t)(t->n_merges + 1) * 2 > t->pair_cap && !pair_grow(t))
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    size_t slot = pair_slot(t, (uint64_t)(uint32_t)a << 32 | (uint32_t)b);
    if (t->pair_rank[slot] >= 0) return NB_OK; /* a repeated merge keeps its first (lower) rank */
    int32_t n = t->n_merges;
    if ((n & (n - 1)) == 0) { /* grow the rank arrays at powers of two */
        size_t cap = n ? 2 * (size_t)n : 64;
        int32_t *x = realloc(t->merge_a, cap * sizeof *x), *y = x ? realloc(t->merge_b, cap * sizeof *y) : NULL;
        if (x) t->merge_a = x;
        if (y) t->merge_b = y;
        int32_t *z = y ? realloc(t->merge_c, cap * sizeof *z) : NULL;
        if (z) t->merge_c = z;
        if (!z) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    }
    t->merge_a[n] = a, t->merge_b[n] = b, t->merge_c[n] = c;
    t->pair_keys[slot] = (uint64_t)(uint32_t)a << 32 | (uint32_t)b, t->pair_rank[slot] = n;
    t->n_merges++;
    return NB_OK;
}

/* Added tokens: longer first, so that "<|eot|>" is not cut by a prefix. */
static int by_len_desc(const void *x, const void *y, void *ctx) {
    const nb_bpe *t = ctx;
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    uint32_t la = t->raw_len[a], lb = t->raw_len[b];
    return la != lb ? (la < lb) - (la > lb) : (a > b) - (a < b);
}

nb_status nb_bpe_finish(nb_bpe *t, const char *op, const char *what) {
    for (int b = 0; b < 256; b++) {
        char u[4];
        int k = nb_utf8_put(nb_bpe_byte_char((uint8_t)b), u);
        t->byte_id[b] = nb_strmap_find(&t->vocab, u, (size_t)k);
        if (t->byte_id[b] < 0 || t->added[t->byte_id[b]])
            return nb_set_error(NB_ERR_FORMAT, "%s: %s has no token for byte 0x%02X (\"%.*s\"): not a byte-level "
                                               "BPE vocabulary", op, what, b, k, u);
    }
    free(t->added_ids);
    t->n_added = 0;
    memset(t->added_first, 0, sizeof t->added_first);
    t->added_ids = malloc(sizeof *t->added_ids * (size_t)(t->vocab.n + 1));
    if (!t->added_ids) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    for (int32_t id = 0; id < t->vocab.n; id++)
        if (t->added[id] && t->raw_len[id] > 0) {
            t->added_ids[t->n_added++] = id;
            t->added_first[(uint8_t)t->raw.p[t->raw_off[id]]] = true;
        }
    qsort_r(t->added_ids, (size_t)t->n_added, sizeof *t->added_ids, by_len_desc, t);
    return NB_OK;
}

/* ---- accessors ------------------------------------------------------------------------------------ */

/* A NULL tokenizer: keeps an earlier error (a failed load), else records one. */
static bool no_bpe(const char *op, const nb_bpe *t) {
    if (t) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: tokenizer is NULL", op);
    return true;
}

int32_t nb_bpe_vocab_size(const nb_bpe *t) { return no_bpe("bpe_vocab_size", t) ? 0 : t->vocab.n; }
int32_t nb_bpe_num_merges(const nb_bpe *t) { return no_bpe("bpe_num_merges", t) ? 0 : t->n_merges; }
nb_bpe_pretokenizer nb_bpe_get_pretokenizer(const nb_bpe *t) {
    return no_bpe("bpe_get_pretokenizer", t) ? NB_BPE_GPT2 : t->pretok;
}

int32_t nb_bpe_token_to_id(const nb_bpe *t, const char *token) {
    if (no_bpe("bpe_token_to_id", t)) return -1;
    if (!token) return nb_set_error(NB_ERR_INVALID_ARG, "bpe_token_to_id: token is NULL"), -1;
    return nb_strmap_find(&t->vocab, token, strlen(token));
}

const char *nb_bpe_id_to_token(const nb_bpe *t, int32_t id) {
    if (!t || id < 0 || id >= t->vocab.n)
        return NB_FAIL(NB_ERR_INVALID_ARG, "bpe_id_to_token: id %d outside [0, %d)", id, t ? t->vocab.n : 0);
    return nb_strmap_key(&t->vocab, id);
}

bool nb_bpe_is_special(const nb_bpe *t, int32_t id) {
    return !no_bpe("bpe_is_special", t) && id >= 0 && id < t->vocab.n && t->added[id];
}

/* ---- encode --------------------------------------------------------------------------------------- */

typedef struct heap_ent {
    int32_t rank, pos, a, b;
} heap_ent;

typedef struct enc {
    const nb_bpe *t;
    int32_t *ids;
    int64_t cap, count;
    int32_t *sym, *next, *prev; /* symbols of the piece as a linked list; sym -1 once merged away */
    size_t scap;
    heap_ent *heap;
    size_t hn, hcap;
    nb_strbuf text;
    bool oom;
} enc;

static void emit(enc *e, int32_t id) {
    if (e->count < e->cap) e->ids[e->count] = id;
    e->count++;
}

static bool heap_less(heap_ent x, heap_ent y) { return x.rank != y.rank ? x.rank < y.rank : x.pos < y.pos; }

static bool heap_push(enc *e, int32_t rank, int32_t pos, int32_t a, int32_t b) {
    if (rank < 0) return true;
    if (e->hn == e->hcap) {
        size_t cap = e->hcap ? 2 * e->hcap : 64;
        heap_ent *h = realloc(e->heap, cap * sizeof *h);
        if (!h) return false;
        e->heap = h, e->hcap = cap;
    }
    size_t i = e->hn++;
    e->heap[i] = (heap_ent){rank, pos, a, b};
    while (i > 0 && heap_less(e->heap[i], e->heap[(i - 1) / 2])) {
        heap_ent tmp = e->heap[i];
        e->heap[i] = e->heap[(i - 1) / 2], e->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return true;
}

static heap_ent heap_pop(enc *e) {
    heap_ent top = e->heap[0];
    e->heap[0] = e->heap[--e->hn];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->hn && heap_less(e->heap[l], e->heap[m])) m = l;
        if (r < e->hn && heap_less(e->heap[r], e->heap[m])) m = r;
        if (m == i) break;
        heap_ent tmp = e->heap[i];
        e->heap[i] = e->heap[m], e->heap[m] = tmp;
        i = m;
    }
    return top;
}

static bool bpe_piece(void *ctx, const char *s, size_t n) {
    enc *e = ctx;
    const nb_bpe *t = e->t;
    if (t->ignore_merges) { /* a piece that is itself a token stays whole (Llama 3) */
        e->text.len = 0;
        if (!nb_bpe_bytes_to_text(s, n, &e->text)) return !(e->oom = true);
        int32_t id = nb_strmap_find(&t->vocab, e->text.p, e->text.len);
        if (id >= 0 && !t->added[id]) return emit(e, id), true;
    }
    if (n > e->scap) {
        size_t cap = n > 2 * e->scap ? n : 2 * e->scap;
        int32_t *a = realloc(e->sym, cap * sizeof *a), *b = a ? realloc(e->next, cap * sizeof *b) : NULL;
        if (a) e->sym = a;
        if (b) e->next = b;
        int32_t *c = b ? realloc(e->prev, cap * sizeof *c) : NULL;
        if (!c) return !(e->oom = true);
        e->prev = c, e->scap = cap;
    }
    int32_t m = (int32_t)n;
    for (int32_t i = 0; i < m; i++)
        e->sym[i] = t->byte_id[(uint8_t)s[i]], e->next[i] = i + 1 < m ? i + 1 : -1, e->prev[i] = i - 1;
    e->hn = 0;
    for (int32_t i = 0; i + 1 < m; i++)
        if (!heap_push(e, rank_of(t, e->sym[i], e->sym[i + 1]), i, e->sym[i], e->sym[i + 1])) return !(e->oom = true);
    while (e->hn) {
        heap_ent h = heap_pop(e);
        int32_t j = e->next[h.pos];
        if (e->sym[h.pos] != h.a || j < 0 || e->sym[j] != h.b) continue; /* stale */
        int32_t c = t->merge_c[h.rank];
        e->sym[h.pos] = c, e->sym[j] = -1, e->next[h.pos] = e->next[j];
        if (e->next[j] >= 0) e->prev[e->next[j]] = h.pos;
        int32_t p = e->prev[h.pos], q = e->next[h.pos];
        if ((p >= 0 && !heap_push(e, rank_of(t, e->sym[p], c), p, e->sym[p], c)) ||
            (q >= 0 && !heap_push(e, rank_of(t, c, e->sym[q]), h.pos, c, e->sym[q])))
            return !(e->oom = true);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i]) emit(e, e->sym[i]);
    return true;
}

/* The first added token in s[from..n): its position (n when none) and id. */
static size_t next_added(const nb_bpe *t, const char *s, size_t from, size_t n, int32_t *id) {
    for (size_t i = from; i < n; i++) {
        if (!t->added_first[(uint8_t)s[i]]) continue;
        for (int32_t k = 0; k < t->n_added; k++) {
            int32_t a = t->added_ids[k];
            size_t len = t->raw_len[a];
            if (len <= n - i && !memcmp(s + i, t->raw.p + t->raw_off[a], len)) return *id = a, i;
        }
    }
    return n;
}

int64_t nb_bpe_encode(const nb_bpe *t, const char *text, size_t len, bool special, int32_t *ids, int64_t cap) {
    if (!t || (!text && len) || (!ids && cap) || cap < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "bpe_encode: NULL tokenizer, text or ids, or cap < 0"), -1;
    enc e = {.t = t, .ids = ids, .cap = cap};
    for (size_t pos = 0; pos < len && !e.oom;) {
        int32_t id = -1;
        size_t at = special ? next_added(t, text, pos, len, &id) : len;
        if (at > pos) nb_bpe_split(t->pretok, text + pos, at - pos, bpe_piece, &e);
        if (at < len) emit(&e, id), at += t->raw_len[id];
        pos = at;
    }
    free(e.sym), free(e.next), free(e.prev), free(e.heap);
    nb_strbuf_free(&e.text);
    if (e.oom) return nb_set_error(NB_ERR_OOM, "bpe_encode: out of host memory"), -1;
    return e.count;
}

nb_tensor *nb_bpe_encode_tensor(const nb_bpe *t, const char *text, size_t len, bool special) {
    int64_t n = nb_bpe_encode(t, text, len, special, NULL, 0);
    int32_t *ids = n >= 0 ? malloc(sizeof *ids * (size_t)(n ? n : 1)) : NULL;
    int64_t *wide = ids ? malloc(sizeof *wide * (size_t)(n ? n : 1)) : NULL;
    nb_tensor *r = NULL;
    if (n >= 0 && !wide) nb_set_error(NB_ERR_OOM, "bpe_encode_tensor: out of host memory");
    else if (wide && nb_bpe_encode(t, text, len, special, ids, n) == n) {
        for (int64_t i = 0; i < n; i++) wide[i] = ids[i];
        r = nb_from_data(wide, 1, &n, NB_I64);
    }
    free(ids), free(wide);
    return r;
}

/* ---- decode ----------------------------------------------------------------------------------------- */

int64_t nb_bpe_decode(const nb_bpe *t, const int32_t *ids, int64_t n, char *out, size_t len) {
    if (!t || (!ids && n > 0) || n < 0 || (!out && len))
        return nb_set_error(NB_ERR_INVALID_ARG, "bpe_decode: NULL tokenizer, ids or out, or n < 0"), -1;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab.n)
            return nb_set_error(NB_ERR_INVALID_ARG, "bpe_decode: id %d at %lld outside [0, %d)", ids[i], (long long)i,
                                t->vocab.n), -1;
        size_t l = t->raw_len[ids[i]];
        if (total + 1 < len) memcpy(out + total, t->raw.p + t->raw_off[ids[i]], total + l + 1 <= len ? l : len - 1 - total);
        total += l;
    }
    if (len) out[total < len ? total : len - 1] = 0;
    return (int64_t)total;
}
