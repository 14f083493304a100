/* wordpiece.c - BERT's WordPiece tokenizer: the vocabulary (BERT's vocab.txt
 * format, loaded and saved), special-token lookup by text, encoding
 * (BasicTokenizer, then WordpieceTokenizer's greedy longest-match-first per
 * word, tokenization.py) and decoding. Training lives in wordpiece_train.c. */
#include <errno.h>
#include <string.h>

#include "text_impl.h"

static const char *const special_text[NB_TOKEN_COUNT] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                         "[MASK]"};
#define NB_WP_MAX_CHARS_LIMIT 10000

nb_status nb_wordpiece_init_options(nb_wordpiece *wp, const char *op, nb_wordpiece_options opts) {
    if (opts.max_input_chars_per_word < 0 || opts.max_input_chars_per_word > NB_WP_MAX_CHARS_LIMIT)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: max_input_chars_per_word %d not in [0, %d]", op,
                            opts.max_input_chars_per_word, NB_WP_MAX_CHARS_LIMIT);
    wp->lower = !opts.cased;
    wp->max_chars = opts.max_input_chars_per_word ? opts.max_input_chars_per_word : 100;
    return NB_OK;
}

nb_status nb_wordpiece_finish(nb_wordpiece *wp, const char *op, const char *what) {
    for (int k = 0; k < NB_TOKEN_COUNT; k++)
        wp->special[k] = nb_strmap_find(&wp->vocab, special_text[k], strlen(special_text[k]));
    if (wp->special[NB_TOKEN_UNK] < 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s has no [UNK] token (%d tokens)", op, what,
                            wp->vocab.n);
    wp->reserved = calloc((size_t)wp->vocab.n, 1);
    if (!wp->reserved) return nb_set_error(NB_ERR_OOM, "%s: out of memory", op);
    for (int32_t id = 0; id < wp->vocab.n; id++) {
        uint32_t n = wp->vocab.lens[id];
        const char *t = nb_strmap_key(&wp->vocab, id);
        wp->reserved[id] = n > 2 && t[0] == '[' && t[n - 1] == ']';
    }
    return NB_OK;
}

void nb_wordpiece_free(nb_wordpiece *wp) {
    if (!wp) return;
    nb_strmap_free(&wp->vocab);
    free(wp->reserved);
    free(wp);
}

/* Adds the vocab.txt lines of data (NUL-terminated) to wp->vocab. */
static nb_status parse_vocab(nb_wordpiece *wp, const char *path, char *data, size_t len) {
    if (len == 0) return nb_set_error(NB_ERR_FORMAT, "wordpiece_load: %s is empty", path);
    char *p = data, *end = data + len;
    for (int64_t line = 0; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r') n--;
        if (n == 0)
            return nb_set_error(NB_ERR_FORMAT,
                                "wordpiece_load: %s: line %lld is empty (one token per line expected)",
                                path, (long long)line + 1);
        /* no text tokenizes to a token holding \r or NUL (both are removed or
         * split on), and a token ending in \r could not be saved back */
        if (memchr(p, '\r', n) || memchr(p, 0, n))
            return nb_set_error(NB_ERR_FORMAT, "wordpiece_load: %s: line %lld holds a %s byte inside its token", path,
                                (long long)line + 1, memchr(p, 0, n) ? "NUL" : "carriage-return (\\r)");
        if (wp->vocab.n == INT32_MAX)
            return nb_set_error(NB_ERR_FORMAT, "wordpiece_load: %s: more than %d tokens", path, INT32_MAX);
        bool created;
        int32_t id = nb_strmap_intern(&wp->vocab, p, n, &created);
        if (id < 0) return nb_set_error(NB_ERR_OOM, "wordpiece_load: out of memory reading %s", path);
        if (!created)
            return nb_set_error(NB_ERR_FORMAT, "wordpiece_load: %s: token \"%.*s\" on line %lld repeats line %d",
                                path, (int)(n < 64 ? n : 64), p, (long long)line + 1, id + 1);
        p = e + 1;
    }
    return NB_OK;
}

nb_wordpiece *nb_wordpiece_load(const char *vocab_path, nb_wordpiece_options opts) {
    if (!vocab_path) return NB_FAIL(NB_ERR_INVALID_ARG, "wordpiece_load: NULL path");
    nb_wordpiece *wp = calloc(1, sizeof *wp);
    if (!wp) return NB_FAIL(NB_ERR_OOM, "wordpiece_load: out of memory");
    char *data = NULL;
    size_t len;
    nb_status st = nb_wordpiece_init_options(wp, "wordpiece_load", opts);
    if (!st) st = nb_read_text_file("wordpiece_load", vocab_path, false, &data, &len);
    if (!st) st = parse_vocab(wp, vocab_path, data, len);
    if (!st) st = nb_wordpiece_finish(wp, "wordpiece_load", vocab_path);
    free(data);
    if (st) {
        nb_wordpiece_free(wp);
        return NULL;
    }
    return wp;
}

nb_status nb_wordpiece_save(const nb_wordpiece *wp, const char *path) {
    if (!wp || !path)
        return nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_save: NULL %s", wp ? "path" : "tokenizer");
    for (int32_t id = 0; id < wp->vocab.n; id++) { /* one token a line must read back as itself */
        const char *k = nb_strmap_key(&wp->vocab, id);
        size_t n = wp->vocab.lens[id];
        if (!n || memchr(k, '\n', n) || memchr(k, '\r', n) || memchr(k, 0, n))
            return nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_save: token %d is empty or holds a line break or NUL, "
                                "which vocab.txt cannot hold", id);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return nb_set_error(NB_ERR_IO, "wordpiece_save: cannot create %s: %s", path, strerror(errno));
    bool ok = true;
    for (int32_t id = 0; id < wp->vocab.n && ok; id++)
        ok = fwrite(nb_strmap_key(&wp->vocab, id), 1, wp->vocab.lens[id], f) == wp->vocab.lens[id] &&
             fputc('\n', f) != EOF;
    int e = errno;
    if (fclose(f) != 0 && ok) ok = false, e = errno;
    if (!ok) return nb_set_error(NB_ERR_IO, "wordpiece_save: cannot write %s: %s", path, strerror(e));
    return NB_OK;
}

/* A NULL tokenizer (a failed load upstream): keeps that error, else records one. */
static bool no_wp(const char *op, const nb_wordpiece *wp) {
    if (wp) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL tokenizer", op);
    return true;
}

int32_t nb_wordpiece_vocab_size(const nb_wordpiece *wp) { return no_wp("wordpiece_vocab_size", wp) ? -1 : wp->vocab.n; }
bool nb_wordpiece_lowercases(const nb_wordpiece *wp) { return !no_wp("wordpiece_lowercases", wp) && wp->lower; }

int32_t nb_wordpiece_token_to_id(const nb_wordpiece *wp, const char *token) {
    if (no_wp("wordpiece_token_to_id", wp)) return -1;
    if (!token) return (int32_t)(nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_token_to_id: NULL token"), -1);
    return nb_strmap_find(&wp->vocab, token, strlen(token));
}

const char *nb_wordpiece_id_to_token(const nb_wordpiece *wp, int32_t id) {
    if (!wp) return NB_FAIL(NB_ERR_INVALID_ARG, "wordpiece_id_to_token: NULL tokenizer");
    if (id < 0 || id >= wp->vocab.n)
        return NB_FAIL(NB_ERR_INVALID_ARG, "wordpiece_id_to_token: id %d not in [0, %d)", id, wp->vocab.n);
    return nb_strmap_key(&wp->vocab, id);
}

int32_t nb_wordpiece_special_id(const nb_wordpiece *wp, nb_special_token which) {
    return !no_wp("wordpiece_special_id", wp) && which >= 0 && which < NB_TOKEN_COUNT ? wp->special[which] : -1;
}

bool nb_wordpiece_is_special(const nb_wordpiece *wp, int32_t id) {
    return !no_wp("wordpiece_is_special", wp) && id >= 0 && id < wp->vocab.n && wp->reserved[id];
}

/* Stores id number *count (if it fits) and counts it. */
static inline void put_id(int32_t *ids, int64_t cap, int64_t *count, int32_t id) {
    if (*count < cap) ids[*count] = id;
    (*count)++;
}

/* WordpieceTokenizer on one word of wlen bytes; scratch holds 2 + wlen + 1
 * bytes ("##" + the longest candidate). */
static void encode_word(const nb_wordpiece *wp, const char *w, size_t wlen, char *scratch,
                        int32_t *ids, int64_t cap, int64_t *count) {
    int64_t chars = 0;
    for (size_t i = 0; i < wlen; i++) chars += ((unsigned char)w[i] & 0xC0) != 0x80;
    if (chars > wp->max_chars) {
        put_id(ids, cap, count, wp->special[NB_TOKEN_UNK]);
        return;
    }
    int64_t first = *count;
    scratch[0] = scratch[1] = '#';
    for (size_t start = 0; start < wlen;) {
        /* Longest match first: shrink the end one code point at a time. */
        const char *key = start ? scratch : w;
        size_t pre = start ? 2 : 0, end = wlen;
        int32_t id = -1;
        if (start) memcpy(scratch + 2, w + start, wlen - start);
        while (end > start) {
            id = nb_strmap_find(&wp->vocab, key, pre + end - start);
            if (id >= 0) break;
            do end--;
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
        }
        if (id < 0) { /* no piece matches: the whole word is unknown */
            *count = first;
            put_id(ids, cap, count, wp->special[NB_TOKEN_UNK]);
            return;
        }
        put_id(ids, cap, count, id);
        start = end;
    }
}

int64_t nb_wordpiece_encode(const nb_wordpiece *wp, const char *text, int32_t *ids, int64_t cap) {
    if (!wp || !text || cap < 0 || (!ids && cap > 0)) {
        nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_encode: %s",
                     !wp ? "NULL tokenizer" : !text ? "NULL text" : cap < 0 ? "cap < 0" : "NULL ids");
        return -1;
    }
    nb_strbuf words = {0};
    int64_t nwords = 0, count = 0;
    char *scratch = NULL;
    if (!nb_basic_split(text, wp->lower, &words, &nwords) || !(scratch = malloc(words.len + 3))) {
        nb_strbuf_free(&words);
        nb_set_error(NB_ERR_OOM, "wordpiece_encode: out of memory");
        return -1;
    }
    for (size_t off = 0; nwords && off < words.len;) {
        size_t n = strlen(words.p + off);
        encode_word(wp, words.p + off, n, scratch, ids, cap, &count);
        off += n + 1;
    }
    free(scratch);
    nb_strbuf_free(&words);
    return count;
}

nb_tensor *nb_wordpiece_encode_tensor(const nb_wordpiece *wp, const char *text) {
    int64_t n = nb_wordpiece_encode(wp, text, NULL, 0);
    int32_t *ids = n >= 0 ? malloc(sizeof *ids * (size_t)(n ? n : 1)) : NULL;
    int64_t *wide = ids ? malloc(sizeof *wide * (size_t)(n ? n : 1)) : NULL;
    nb_tensor *r = NULL;
    if (n >= 0 && !wide) nb_set_error(NB_ERR_OOM, "wordpiece_encode_tensor: out of host memory");
    else if (wide && nb_wordpiece_encode(wp, text, ids, n) == n) {
        for (int64_t i = 0; i < n; i++) wide[i] = ids[i];
        r = nb_from_data(wide, 1, &n, NB_I64);
    }
    free(ids), free(wide);
    return r;
}

int64_t nb_wordpiece_decode(const nb_wordpiece *wp, const int32_t *ids, int64_t n, bool skip_special,
                            char *out, size_t len) {
    if (!wp || n < 0 || (!ids && n > 0) || (!out && len > 0)) {
        nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_decode: %s",
                     !wp ? "NULL tokenizer" : n < 0 ? "n < 0" : !ids ? "NULL ids" : "NULL output buffer");
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= wp->vocab.n) {
            nb_set_error(NB_ERR_INVALID_ARG, "wordpiece_decode: ids[%lld] = %d not in [0, %d)",
                         (long long)i, ids[i], wp->vocab.n);
            return -1;
        }
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (skip_special && wp->reserved[ids[i]]) continue;
        const char *t = nb_strmap_key(&wp->vocab, ids[i]);
        size_t tl = wp->vocab.lens[ids[i]];
        bool cont = tl >= 2 && t[0] == '#' && t[1] == '#';
        /* " ".join(tokens).replace(" ##", ""): a space before every token but
         * the first, none before a "##" piece that follows another token. */
        if (cont && total > 0) t += 2, tl -= 2;
        else if (total > 0) {
            if ((size_t)total + 1 < len) out[total] = ' ';
            total++;
        }
        for (size_t k = 0; k < tl; k++, total++)
            if ((size_t)total + 1 < len) out[total] = t[k];
    }
    if (len > 0) out[(size_t)total < len ? (size_t)total : len - 1] = 0;
    return total;
}
