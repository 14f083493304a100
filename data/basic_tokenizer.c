/* basic_tokenizer.c - BERT's BasicTokenizer (tokenization.py): cleaning,
 * whitespace splitting, optional lower-casing with accent stripping, and
 * splitting off punctuation and CJK ideographs. BERT runs these as
 * successive passes over the text; every pass maps one code point at a
 * time, so here they run as one pass that appends finished words to a
 * buffer. */
#include <string.h>

#include "text_impl.h"

/* Appends the current word (if any) plus its NUL. */
static bool end_word(nb_strbuf *out, size_t *start, int64_t *nwords) {
    if (out->len == *start) return true;
    if (!nb_strbuf_add(out, "", 1)) return false;
    *start = out->len;
    (*nwords)++;
    return true;
}

bool nb_basic_split(const char *text, bool lower, nb_strbuf *out, int64_t *nwords) {
    size_t start = out->len; /* where the word being built begins */
    char enc[4];
    for (const char *p = text; *p;) {
        /* ASCII letters and digits are the bulk of the text: fast path. */
        unsigned char c = (unsigned char)*p;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')) {
            char ch = (char)(lower && c <= 'Z' && c >= 'A' ? c + 32 : c);
            if (!nb_strbuf_add(out, &ch, 1)) return false;
            p++;
            continue;
        }
        uint32_t cp = nb_utf8_next(&p);
        if (cp == 0xFFFD || nb_uc_is_control(cp)) continue; /* _clean_text */
        if (nb_uc_is_space(cp)) {
            if (!end_word(out, &start, nwords)) return false;
            continue;
        }
        if (lower && (cp = nb_uc_fold(cp)) == 0) continue; /* a stripped accent */
        if (nb_uc_is_punct(cp) || nb_uc_is_cjk(cp)) {
            /* A word of its own: _run_split_on_punc / _tokenize_chinese_chars. */
            if (!end_word(out, &start, nwords) || !nb_strbuf_add(out, enc, (size_t)nb_utf8_put(cp, enc)) ||
                !end_word(out, &start, nwords))
                return false;
            continue;
        }
        if (!nb_strbuf_add(out, enc, (size_t)nb_utf8_put(cp, enc))) return false;
    }
    return end_word(out, &start, nwords);
}

int64_t nb_basic_tokenize(const char *text, bool do_lower_case, char *out, size_t len) {
    if (!text || (!out && len > 0)) {
        nb_set_error(NB_ERR_INVALID_ARG, "basic_tokenize: NULL %s", text ? "output buffer" : "text");
        return -1;
    }
    nb_strbuf words = {0};
    int64_t n = 0;
    if (!nb_basic_split(text, do_lower_case, &words, &n)) {
        nb_strbuf_free(&words);
        nb_set_error(NB_ERR_OOM, "basic_tokenize: out of memory");
        return -1;
    }
    /* Words are NUL-separated with a NUL after the last: turning the
     * separators into spaces gives the result, words.len - 1 bytes. */
    int64_t total = n ? (int64_t)words.len - 1 : 0;
    for (size_t i = 0; n && i + 1 < words.len; i++)
        if (!words.p[i]) words.p[i] = ' ';
    if (len > 0) {
        size_t k = (size_t)total < len - 1 ? (size_t)total : len - 1;
        if (k) memcpy(out, words.p, k);
        out[k] = 0;
    }
    nb_strbuf_free(&words);
    return total;
}
