/* bpe_io.c - byte-level BPE files: GPT-2's vocab.json + merges.txt and Hugging
 * Face's tokenizer.json, read and written with jansson. Loading checks
 * before trusting: ids dense and unique, every merge's tokens and result
 * present, a token for each of the 256 bytes, and (tokenizer.json) a
 * model, normalizer and pre-tokenizer this tokenizer implements exactly. */
#include <string.h>

#include <jansson.h>

#include "bpe_impl.h"

/* ---- vocabularies ---------------------------------------------------------------------------- */

/* The tokens of a {"token": id} object in id order, added to t; ids must
 * be 0 .. n-1 each once. */
static nb_status load_vocab(nb_bpe *t, const char *op, const json_t *vocab, const char *path) {
    size_t n = json_object_size(vocab);
    if (!json_is_object(vocab) || n == 0 || n > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s: the vocabulary must be a non-empty {\"token\": id} object", op, path);
    const char **by_id = calloc(n, sizeof *by_id);
    if (!by_id) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    nb_status st = NB_OK;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || (size_t)id >= n || by_id[id]) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: token \"%s\" has id %lld; the ids must be 0 .. %zu each once", op,
                              path, key, (long long)id, n - 1);
            break;
        }
        by_id[id] = key;
    }
    for (size_t i = 0; !st && i < n; i++)
        if (nb_bpe_add_token(t, op, by_id[i], strlen(by_id[i]), false) < 0) st = nb_last_status();
    free(by_id);
    return st;
}

/* One merge "A B" (the text up to the first space, and the rest). */
static nb_status add_merge_text(nb_bpe *t, const char *op, const char *s, size_t n, const char *path, size_t line) {
    const char *sp = memchr(s, ' ', n);
    int32_t a = sp ? nb_strmap_find(&t->vocab, s, (size_t)(sp - s)) : -1;
    int32_t b = sp ? nb_strmap_find(&t->vocab, sp + 1, n - (size_t)(sp + 1 - s)) : -1;
    if (a < 0 || b < 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s: merge %zu \"%.*s\" is not two tokens separated by a space", op, path,
                            line, (int)(n > 80 ? 80 : n), s);
    return nb_bpe_add_merge(t, op, a, b);
}

nb_bpe *nb_bpe_load_gpt2(const char *vocab_path, const char *merges_path) {
    const char *op = "bpe_load_gpt2";
    if (!vocab_path || !merges_path) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    char *merges;
    size_t mlen;
    if (nb_read_text_file(op, merges_path, false, &merges, &mlen)) return NULL;
    json_error_t err;
    json_t *vocab = json_load_file(vocab_path, JSON_REJECT_DUPLICATES, &err);
    if (!vocab) {
        FILE *f = fopen(vocab_path, "rb");
        nb_set_error(f ? NB_ERR_FORMAT : NB_ERR_IO, "%s: %s: %s (line %d)", op, vocab_path,
                     f ? err.text : "cannot open", err.line);
        if (f) fclose(f);
        free(merges);
        return NULL;
    }
    nb_bpe *t = nb_bpe_alloc(op);
    nb_status st = t ? load_vocab(t, op, vocab, vocab_path) : nb_last_status();
    json_decref(vocab);
    size_t line = 0;
    for (char *p = merges; !st && p < merges + mlen; line++) {
        char *nl = memchr(p, '\n', (size_t)(merges + mlen - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(merges + mlen - p);
        if (n && p[n - 1] == '\r') n--;
        bool header = line == 0 && n >= 8 && !memcmp(p, "#version", 8);
        if (n && !header) st = add_merge_text(t, op, p, n, merges_path, line + 1);
        p += (nl ? (size_t)(nl - p) + 1 : n + 1);
    }
    free(merges);
    int32_t eot = st ? -1 : nb_bpe_token_to_id(t, "<|endoftext|>");
    if (eot >= 0) t->added[eot] = 1; /* GPT2Tokenizer's special token (its bytes are its text) */
    if (!st) st = nb_bpe_finish(t, op, vocab_path);
    if (st) {
        nb_bpe_free(t);
        return NULL;
    }
    t->pretok = NB_BPE_GPT2;
    return t;
}

/* ---- tokenizer.json ------------------------------------------------------------------------------ */

static bool is_null_or(const json_t *v, bool (*ok)(const json_t *)) { return !v || json_is_null(v) || ok(v); }
static bool empty_string(const json_t *v) { return json_is_string(v) && !json_string_value(v)[0]; }
static bool is_false(const json_t *v) { return json_is_false(v); }
static bool is_zero(const json_t *v) { return json_is_number(v) && json_number_value(v) == 0; }

/* A ByteLevel pre-tokenizer without add_prefix_space; *regex says whether it
 * runs GPT-2's own pattern (use_regex, true by default). */
static bool byte_level(const json_t *p, bool *regex) {
    const char *type = json_string_value(json_object_get(p, "type"));
    json_t *ur = json_object_get(p, "use_regex");
    *regex = !ur || json_is_true(ur);
    return type && !strcmp(type, "ByteLevel") && is_null_or(json_object_get(p, "add_prefix_space"), is_false);
}

/* Which pre-tokenizer p is: GPT-2's ByteLevel, or Split(pattern, Isolated)
 * then ByteLevel(use_regex false) with one of the two known patterns. */
static nb_status pretokenizer_of(const json_t *p, nb_bpe_pretokenizer *kind, const char *path) {
    bool regex;
    if (p && byte_level(p, &regex) && regex) return *kind = NB_BPE_GPT2, NB_OK;
    const char *type = p ? json_string_value(json_object_get(p, "type")) : NULL;
    json_t *seq = json_object_get(p, "pretokenizers");
    if (type && !strcmp(type, "Sequence") && json_array_size(seq) == 2) {
        json_t *split = json_array_get(seq, 0);
        const char *st = json_string_value(json_object_get(split, "type"));
        const char *beh = json_string_value(json_object_get(split, "behavior"));
        const char *pat = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
        bool plain = st && !strcmp(st, "Split") && beh && !strcmp(beh, "Isolated") &&
                     is_null_or(json_object_get(split, "invert"), is_false) && byte_level(json_array_get(seq, 1), &regex) &&
                     !regex;
        if (plain && pat && !strcmp(pat, nb_bpe_pattern_llama3)) return *kind = NB_BPE_LLAMA3, NB_OK;
        if (plain && pat && !strcmp(pat, nb_bpe_pattern_gpt2)) return *kind = NB_BPE_GPT2, NB_OK;
        if (pat) return nb_set_error(NB_ERR_UNSUPPORTED, "bpe_load_tokenizer_json: %s: the split pattern \"%s\" is not "
                                                         "GPT-2's or Llama 3's", path, pat);
    }
    char *dump = p ? json_dumps(p, JSON_COMPACT) : NULL;
    nb_status st = nb_set_error(NB_ERR_UNSUPPORTED, "bpe_load_tokenizer_json: %s: pre_tokenizer %.200s is not GPT-2's "
                                                    "ByteLevel or Llama 3's Split + ByteLevel", path, dump ? dump : "null");
    free(dump);
    return st;
}

/* model.merges: "A B" strings or ["A", "B"] pairs. */
static nb_status load_merges(nb_bpe *t, const char *op, const json_t *merges, const char *path) {
    if (!json_is_array(merges)) return nb_set_error(NB_ERR_FORMAT, "%s: %s: model.merges must be an array", op, path);
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        nb_status st;
        if (json_is_string(m)) st = add_merge_text(t, op, json_string_value(m), json_string_length(m), path, i + 1);
        else {
            const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
            int32_t ia = a ? nb_bpe_token_to_id(t, a) : -1, ib = b ? nb_bpe_token_to_id(t, b) : -1;
            st = json_array_size(m) == 2 && ia >= 0 && ib >= 0
                     ? nb_bpe_add_merge(t, op, ia, ib)
                     : nb_set_error(NB_ERR_FORMAT, "%s: %s: merge %zu is not a pair of tokens", op, path, i + 1);
        }
        if (st) return st;
    }
    return NB_OK;
}

static int by_id(const void *x, const void *y) {
    json_int_t a = json_integer_value(json_object_get(*(json_t *const *)x, "id"));
    json_int_t b = json_integer_value(json_object_get(*(json_t *const *)y, "id"));
    return (a > b) - (a < b);
}

/* added_tokens: those inside the vocabulary are marked (their bytes become
 * their text); the others must continue its ids. */
static nb_status load_added(nb_bpe *t, const char *op, const json_t *added, const char *path) {
    size_t n = json_array_size(added);
    if (added && !json_is_array(added)) return nb_set_error(NB_ERR_FORMAT, "%s: %s: added_tokens must be an array", op, path);
    json_t **items = malloc(sizeof *items * (n + 1));
    if (!items) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    nb_status st = NB_OK;
    for (size_t i = 0; i < n && !st; i++) {
        items[i] = json_array_get(added, i);
        if (!json_is_integer(json_object_get(items[i], "id")) || !json_is_string(json_object_get(items[i], "content")))
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: added token %zu needs an integer id and a string content", op, path, i);
    }
    if (!st) qsort(items, n, sizeof *items, by_id);
    for (size_t i = 0; i < n && !st; i++) {
        json_int_t id = json_integer_value(json_object_get(items[i], "id"));
        const char *text = json_string_value(json_object_get(items[i], "content"));
        size_t len = json_string_length(json_object_get(items[i], "content"));
        if (id >= 0 && id < t->vocab.n && nb_strmap_find(&t->vocab, text, len) == id) {
            t->raw_off[id] = t->raw.len, t->raw_len[id] = (uint32_t)len, t->added[id] = 1;
            if (!nb_strbuf_add(&t->raw, text, len)) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        } else if (id == t->vocab.n) {
            if (nb_bpe_add_token(t, op, text, len, true) < 0) st = nb_last_status();
        } else
            st = nb_set_error(NB_ERR_FORMAT, "%s: %s: added token \"%s\" has id %lld: neither its vocabulary entry nor "
                                             "the next id (%d)", op, path, text, (long long)id, t->vocab.n);
    }
    free(items);
    return st;
}

nb_bpe *nb_bpe_load_tokenizer_json(const char *path) {
    const char *op = "bpe_load_tokenizer_json";
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        FILE *f = fopen(path, "rb");
        nb_set_error(f ? NB_ERR_FORMAT : NB_ERR_IO, "%s: %s: %s (line %d)", op, path, f ? err.text : "cannot open", err.line);
        if (f) fclose(f);
        return NULL;
    }
    json_t *model = json_object_get(root, "model"), *norm = json_object_get(root, "normalizer");
    const char *type = json_string_value(json_object_get(model, "type"));
    nb_bpe_pretokenizer kind = NB_BPE_GPT2;
    nb_status st = NB_OK;
    if (!json_is_object(model) || (type && strcmp(type, "BPE")))
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s: model type %s is not BPE", op, path, type ? type : "(none)");
    else if (norm && !json_is_null(norm))
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s: normalizer %s is not supported (byte-level BPE has none)", op,
                          path, json_string_value(json_object_get(norm, "type")) ? json_string_value(json_object_get(norm, "type")) : "?");
    else if (!is_null_or(json_object_get(model, "dropout"), is_zero) ||
             !is_null_or(json_object_get(model, "byte_fallback"), is_false) ||
             !is_null_or(json_object_get(model, "continuing_subword_prefix"), empty_string) ||
             !is_null_or(json_object_get(model, "end_of_word_suffix"), empty_string))
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s: BPE with dropout, byte_fallback or subword affixes is not supported",
                          op, path);
    else st = pretokenizer_of(json_object_get(root, "pre_tokenizer"), &kind, path);
    nb_bpe *t = st ? NULL : nb_bpe_alloc(op);
    if (!st && !t) st = nb_last_status();
    if (!st) st = load_vocab(t, op, json_object_get(model, "vocab"), path);
    if (!st) st = load_merges(t, op, json_object_get(model, "merges"), path);
    if (!st) st = load_added(t, op, json_object_get(root, "added_tokens"), path);
    if (!st) st = nb_bpe_finish(t, op, path);
    if (!st) t->pretok = kind, t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    json_decref(root);
    if (st) {
        nb_bpe_free(t);
        return NULL;
    }
    return t;
}

/* ---- saving --------------------------------------------------------------------------------------------- */

static json_t *vocab_json(const nb_bpe *t) {
    json_t *o = json_object();
    for (int32_t id = 0; o && id < t->vocab.n; id++)
        if (json_object_set_new(o, nb_strmap_key(&t->vocab, id), json_integer(id))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static nb_status dump_atomic(const char *op, const char *path, json_t *o) {
    char *text = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text) return nb_set_error(NB_ERR_OOM, "%s: out of host memory (or a token that is not UTF-8)", op);
    nb_status st = nb_write_file_atomic(op, path, text, strlen(text));
    free(text);
    return st;
}

nb_status nb_bpe_save_gpt2(const nb_bpe *t, const char *vocab_path, const char *merges_path) {
    const char *op = "bpe_save_gpt2";
    if (!t || !vocab_path || !merges_path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op);
    nb_strbuf m = {0};
    bool ok = nb_strbuf_add(&m, "#version: 0.2\n", 14);
    for (int32_t i = 0; ok && i < t->n_merges; i++) {
        const char *a = nb_strmap_key(&t->vocab, t->merge_a[i]), *b = nb_strmap_key(&t->vocab, t->merge_b[i]);
        ok = nb_strbuf_add(&m, a, strlen(a)) && nb_strbuf_add(&m, " ", 1) && nb_strbuf_add(&m, b, strlen(b)) &&
             nb_strbuf_add(&m, "\n", 1);
    }
    nb_status st = ok ? dump_atomic(op, vocab_path, vocab_json(t)) : nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if (!st) st = nb_write_file_atomic(op, merges_path, m.p, m.len);
    nb_strbuf_free(&m);
    return st;
}

static json_t *byte_level_json(bool use_regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex",
                     use_regex);
}

nb_status nb_bpe_save_tokenizer_json(const nb_bpe *t, const char *path) {
    const char *op = "bpe_save_tokenizer_json";
    if (!t || !path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op);
    json_t *added = json_array(), *merges = json_array();
    for (int32_t id = 0; added && id < t->vocab.n; id++)
        if (t->added[id])
            json_array_append_new(added, json_pack("{s:i, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", id, "content",
                                                   t->raw.p + t->raw_off[id], (size_t)t->raw_len[id], "single_word", 0,
                                                   "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1));
    nb_strbuf m = {0};
    for (int32_t i = 0; merges && i < t->n_merges; i++) {
        const char *a = nb_strmap_key(&t->vocab, t->merge_a[i]), *b = nb_strmap_key(&t->vocab, t->merge_b[i]);
        m.len = 0;
        if (!nb_strbuf_add(&m, a, strlen(a)) || !nb_strbuf_add(&m, " ", 1) || !nb_strbuf_add(&m, b, strlen(b))) break;
        json_array_append_new(merges, json_stringn(m.p, m.len));
    }
    nb_strbuf_free(&m);
    json_t *pre = t->pretok == NB_BPE_GPT2
                      ? byte_level_json(true)
                      : json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type",
                                  "Split", "pattern", "Regex", nb_bpe_pattern_llama3, "behavior", "Isolated", "invert", 0,
                                  byte_level_json(false));
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout", "unk_token",
                              "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                              "ignore_merges", t->ignore_merges, "vocab", vocab_json(t), "merges", merges);
    json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:n, s:o, s:o}", "version", "1.0", "truncation", "padding",
                             "added_tokens", added, "normalizer", "pre_tokenizer", pre, "post_processor", "decoder",
                             byte_level_json(true), "model", model);
    return dump_atomic(op, path, root);
}
