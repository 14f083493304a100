/* wordpiece_train.c - trains a WordPiece vocabulary by BPE merges (as Hugging
 * Face tokenizers' WordPieceTrainer): words are counted once, each distinct
 * word is a sequence of symbol ids (w ##o ##r ##d), and the most frequent
 * adjacent pair is merged until the vocabulary is full. Fast because a merge
 * only visits the words that contain its pair: every pair keeps the list of
 * words it occurs in, and a max-heap with lazy deletion (an entry is stale
 * when its count differs from the pair's current count) finds the best
 * pair. The wordnet corpus (8.7 MB) trains in seconds. */
#include <string.h>

#include "text_impl.h"

typedef struct pair_rec {
    int32_t a, b;     /* symbol ids; b is always a "##" symbol */
    int64_t count;    /* occurrences weighted by word frequency */
    int32_t stamp;    /* the last merge step that touched the pair */
    int32_t *words;   /* words that contain (or once contained) the pair */
    int32_t nw, capw;
} pair_rec;

typedef struct heap_ent {
    int64_t count;
    int32_t pair;
} heap_ent;

typedef struct trainer {
    int32_t nwords;
    int64_t *freq;     /* per distinct word */
    int32_t *sym;      /* every word's symbols, word w at woff[w] */
    int64_t *woff;
    int32_t *wlen;     /* current symbols of each word */
    nb_strmap syms;    /* symbol text -> symbol id */
    pair_rec *pairs;
    int32_t npairs, cap_pairs;
    uint64_t *keys;    /* pair map: (a << 32 | b) -> pair index in vals */
    int32_t *vals;
    size_t mcap;
    heap_ent *heap;
    size_t nheap, cap_heap;
    int32_t *touched;  /* pairs touched by the current merge */
    int32_t ntouched, cap_touched;
} trainer;

/* Grows *p (of *cap elements of size sz) to hold at least n; false on OOM. */
static bool reserve(void **p, int64_t *cap, int64_t n, size_t sz) {
    if (n <= *cap) return true;
    int64_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    void *q = realloc(*p, (size_t)c * sz);
    if (!q) return false;
    *p = q, *cap = c;
    return true;
}
#define RESERVE(arr, cap, n) reserve((void **)&(arr), &(cap), (n), sizeof *(arr))

static size_t pair_slot(const trainer *t, uint64_t key) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (t->mcap - 1);
    while (t->vals[i] >= 0 && t->keys[i] != key) i = (i + 1) & (t->mcap - 1);
    return i;
}

static bool pair_map_grow(trainer *t) {
    size_t old = t->mcap, cap = old ? old * 2 : 1 << 16;
    uint64_t *ok = t->keys;
    int32_t *ov = t->vals;
    t->keys = malloc(cap * sizeof *t->keys), t->vals = malloc(cap * sizeof *t->vals);
    if (!t->keys || !t->vals) {
        free(t->keys), free(t->vals);
        t->keys = ok, t->vals = ov;
        return false;
    }
    memset(t->vals, 0xFF, cap * sizeof *t->vals);
    t->mcap = cap;
    for (size_t i = 0; i < old; i++)
        if (ov[i] >= 0) {
            size_t j = pair_slot(t, ok[i]);
            t->keys[j] = ok[i], t->vals[j] = ov[i];
        }
    free(ok), free(ov);
    return true;
}

/* Adds delta to pair (a, b), creating it if needed; for delta > 0 records
 * word w in its list. Marks the pair touched by `step`. -1 on OOM. */
static int pair_add(trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w, int32_t step) {
    if ((size_t)(t->npairs + 1) * 2 > t->mcap && !pair_map_grow(t)) return -1;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = pair_slot(t, key);
    int32_t p = t->vals[i];
    if (p < 0) {
        int64_t cap = t->cap_pairs;
        if (!RESERVE(t->pairs, cap, t->npairs + 1)) return -1;
        t->cap_pairs = (int32_t)cap;
        p = t->npairs++;
        t->pairs[p] = (pair_rec){.a = a, .b = b, .stamp = -1};
        t->keys[i] = key, t->vals[i] = p;
    }
    pair_rec *r = &t->pairs[p];
    r->count += delta;
    NB_ASSERT(r->count >= 0);
    if (delta > 0 && (r->nw == 0 || r->words[r->nw - 1] != w)) {
        int64_t cap = r->capw;
        if (!RESERVE(r->words, cap, r->nw + 1)) return -1;
        r->capw = (int32_t)cap;
        r->words[r->nw++] = w;
    }
    if (r->stamp != step) {
        int64_t cap = t->cap_touched;
        if (!RESERVE(t->touched, cap, t->ntouched + 1)) return -1;
        t->cap_touched = (int32_t)cap;
        r->stamp = step;
        t->touched[t->ntouched++] = p;
    }
    return 0;
}

/* Heap order: higher count first; ties to the pair of older symbols. */
static bool heap_before(const trainer *t, heap_ent x, heap_ent y) {
    if (x.count != y.count) return x.count > y.count;
    const pair_rec *px = &t->pairs[x.pair], *py = &t->pairs[y.pair];
    return px->a != py->a ? px->a < py->a : px->b < py->b;
}

static bool heap_push(trainer *t, heap_ent e) {
    int64_t cap = (int64_t)t->cap_heap;
    if (!RESERVE(t->heap, cap, (int64_t)t->nheap + 1)) return false;
    t->cap_heap = (size_t)cap;
    size_t i = t->nheap++;
    while (i > 0 && heap_before(t, e, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
    return true;
}

static heap_ent heap_pop(trainer *t) {
    heap_ent top = t->heap[0], last = t->heap[--t->nheap];
    size_t i = 0, n = t->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(t, t->heap[c + 1], t->heap[c])) c++;
        if (!heap_before(t, t->heap[c], last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n) t->heap[i] = last;
    return top;
}

static void trainer_free(trainer *t) {
    free(t->freq), free(t->sym), free(t->woff), free(t->wlen);
    nb_strmap_free(&t->syms);
    for (int32_t p = 0; p < t->npairs; p++) free(t->pairs[p].words);
    free(t->pairs), free(t->keys), free(t->vals), free(t->heap), free(t->touched);
}

/* Counts the corpus's words and builds the alphabet and the words' symbol
 * sequences. *alphabet = number of alphabet symbols. */
static nb_status load_words(trainer *t, const char *path, bool lower, int32_t *alphabet) {
    char *text;
    size_t len;
    nb_status st = nb_read_text_file("wordpiece_train", path, true, &text, &len);
    if (st) return st;
    nb_strbuf words = {0};
    nb_strmap wmap = {0};
    int64_t nw = 0, cap_freq = 0, cap_sym = 0, nsym = 0;
    uint8_t *seen = calloc(0x110000 / 8, 1); /* code points present */
    bool ok = seen && nb_basic_split(text, lower, &words, &nw);
    free(text);
    for (size_t off = 0; ok && nw && off < words.len;) { /* count distinct words */
        size_t n = strlen(words.p + off);
        bool created;
        int32_t id = nb_strmap_intern(&wmap, words.p + off, n, &created);
        ok = id >= 0 && RESERVE(t->freq, cap_freq, (int64_t)id + 1);
        if (ok && created) t->freq[id] = 0;
        if (ok) t->freq[id]++;
        off += n + 1;
    }
    nb_strbuf_free(&words);
    t->nwords = wmap.n;
    for (int32_t w = 0; ok && w < t->nwords; w++)
        for (const char *p = nb_strmap_key(&wmap, w); *p;) {
            uint32_t cp = nb_utf8_next(&p);
            seen[cp / 8] |= (uint8_t)(1u << (cp % 8));
        }
    /* The alphabet, in code point (= UTF-8 byte) order: every character,
     * then the "##" form of those that can continue a word. */
    char s[8] = "##";
    for (int form = 0; ok && form < 2; form++)
        for (uint32_t cp = 0; ok && cp < 0x110000; cp++) {
            if (!(seen[cp / 8] >> (cp % 8) & 1)) continue;
            if (form && (nb_uc_is_punct(cp) || nb_uc_is_cjk(cp))) continue;
            int n = nb_utf8_put(cp, s + 2);
            ok = nb_strmap_intern(&t->syms, form ? s : s + 2, (size_t)(form ? n + 2 : n), NULL) >= 0;
        }
    free(seen);
    *alphabet = t->syms.n;
    ok = ok && (t->woff = malloc(((size_t)t->nwords + 1) * sizeof *t->woff)) &&
         (t->wlen = malloc(((size_t)t->nwords + 1) * sizeof *t->wlen));
    for (int32_t w = 0; ok && w < t->nwords; w++) { /* word -> symbol ids */
        t->woff[w] = nsym;
        int32_t n = 0;
        for (const char *p = nb_strmap_key(&wmap, w); ok && *p; n++) {
            const char *c = p;
            nb_utf8_next(&p);
            memcpy(s + 2, c, (size_t)(p - c));
            int32_t id = n ? nb_strmap_find(&t->syms, s, (size_t)(p - c) + 2)
                           : nb_strmap_find(&t->syms, c, (size_t)(p - c));
            NB_ASSERT(id >= 0);
            ok = RESERVE(t->sym, cap_sym, nsym + 1);
            if (ok) t->sym[nsym++] = id;
        }
        t->wlen[w] = n;
    }
    nb_strmap_free(&wmap);
    if (!ok) return nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory reading %s", path);
    if (t->nwords == 0) return nb_set_error(NB_ERR_FORMAT, "wordpiece_train: %s holds no word", path);
    return NB_OK;
}

/* Pushes the touched pairs' current counts and clears the touched list. */
static bool push_touched(trainer *t) {
    for (int32_t k = 0; k < t->ntouched; k++) {
        int32_t p = t->touched[k];
        if (t->pairs[p].count > 0 && !heap_push(t, (heap_ent){t->pairs[p].count, p})) return false;
    }
    t->ntouched = 0;
    return true;
}

/* Replaces pair p = (a, b) by symbol c in every word that holds it. */
static bool merge_pair(trainer *t, int32_t p, int32_t c, int32_t step) {
    int32_t a = t->pairs[p].a, b = t->pairs[p].b;
    int32_t *list = t->pairs[p].words, nw = t->pairs[p].nw; /* detached: pairs may move */
    t->pairs[p].words = NULL, t->pairs[p].nw = t->pairs[p].capw = 0;
    bool ok = true;
    for (int32_t k = 0; ok && k < nw; k++) {
        int32_t w = list[k], len = t->wlen[w], *s = t->sym + t->woff[w];
        int i = 0;
        while (i + 1 < len && !(s[i] == a && s[i + 1] == b)) i++;
        if (i + 1 >= len) continue; /* a stale entry */
        int64_t f = t->freq[w];
        for (i = 0; ok && i + 1 < len; i++) ok = pair_add(t, s[i], s[i + 1], -f, w, step) == 0;
        int32_t j = 0;
        for (i = 0; i < len; j++) {
            if (i + 1 < len && s[i] == a && s[i + 1] == b) s[j] = c, i += 2;
            else s[j] = s[i++];
        }
        t->wlen[w] = len = j;
        for (i = 0; ok && i + 1 < len; i++) ok = pair_add(t, s[i], s[i + 1], f, w, step) == 0;
    }
    free(list);
    NB_ASSERT(!ok || t->pairs[p].count == 0);
    return ok && push_touched(t);
}

/* The BPE loop: merges until 5 + symbols = vocab_size or no pair is frequent enough. */
static nb_status train_merges(trainer *t, int32_t vocab_size, int64_t min_freq) {
    for (int32_t w = 0; w < t->nwords; w++)
        for (int32_t i = 0; i + 1 < t->wlen[w]; i++) {
            const int32_t *s = t->sym + t->woff[w];
            if (pair_add(t, s[i], s[i + 1], t->freq[w], w, 0))
                return nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory");
        }
    if (!push_touched(t)) return nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory");
    nb_strbuf merged = {0};
    for (int32_t step = 1; t->nheap > 0 && NB_TOKEN_COUNT + t->syms.n < vocab_size;) {
        heap_ent e = heap_pop(t);
        const pair_rec *r = &t->pairs[e.pair];
        if (e.count != r->count || e.count == 0) continue; /* stale */
        if (e.count < min_freq) break;
        const char *sb = nb_strmap_key(&t->syms, r->b);
        NB_ASSERT(sb[0] == '#' && sb[1] == '#');
        merged.len = 0;
        int32_t c = -1;
        if (nb_strbuf_add(&merged, nb_strmap_key(&t->syms, r->a), t->syms.lens[r->a]) &&
            nb_strbuf_add(&merged, sb + 2, t->syms.lens[r->b] - 2))
            c = nb_strmap_intern(&t->syms, merged.p, merged.len, NULL);
        if (c < 0 || !merge_pair(t, e.pair, c, step++)) {
            nb_strbuf_free(&merged);
            return nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory");
        }
    }
    nb_strbuf_free(&merged);
    return NB_OK;
}

nb_wordpiece *nb_wordpiece_train(const char *corpus_path, int32_t vocab_size, nb_wordpiece_options opts) {
    if (!corpus_path) return NB_FAIL(NB_ERR_INVALID_ARG, "wordpiece_train: NULL corpus path");
    nb_wordpiece *wp = calloc(1, sizeof *wp);
    if (!wp) return NB_FAIL(NB_ERR_OOM, "wordpiece_train: out of memory");
    trainer t = {0};
    int32_t alphabet = 0;
    nb_status st = nb_wordpiece_init_options(wp, "wordpiece_train", opts);
    if (!st && opts.min_frequency < 0)
        st = nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_train: min_frequency %lld < 0",
                          (long long)opts.min_frequency);
    if (!st) st = load_words(&t, corpus_path, wp->lower, &alphabet);
    if (!st && vocab_size < NB_TOKEN_COUNT + alphabet)
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "wordpiece_train: vocab_size %d is smaller than the 5 special tokens + the %d "
                          "characters of %s (at least %d)",
                          vocab_size, alphabet, corpus_path, NB_TOKEN_COUNT + alphabet);
    if (!st) st = train_merges(&t, vocab_size, opts.min_frequency ? opts.min_frequency : 2);
    static const char *const specials[NB_TOKEN_COUNT] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int k = 0; !st && k < NB_TOKEN_COUNT; k++)
        if (nb_strmap_intern(&wp->vocab, specials[k], strlen(specials[k]), NULL) < 0)
            st = nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory");
    for (int32_t id = 0; !st && id < t.syms.n; id++)
        if (nb_strmap_intern(&wp->vocab, nb_strmap_key(&t.syms, id), t.syms.lens[id], NULL) < 0)
            st = nb_set_error(NB_ERR_OOM, "wordpiece_train: out of memory");
    trainer_free(&t);
    if (!st) st = nb_wordpiece_finish(wp, "wordpiece_train", "the trained vocabulary");
    if (st) {
        nb_wordpiece_free(wp);
        return NULL;
    }
    return wp;
}
