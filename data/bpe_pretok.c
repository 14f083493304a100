/* bpe_pretok.c - the pre-tokenizers of byte-level BPE, i.e. the two regular
 * expressions of nb_bpe.h run as hand-written matchers with the regex
 * engines' leftmost-first alternation and greedy, backtracking quantifiers
 * (each alternative below says which branch it is), and GPT-2's
 * bytes_to_unicode map. Text is scanned as code points; a byte that does
 * not start a valid UTF-8 sequence is one unit of no class. */
#include <string.h>

#include "bpe_impl.h"

const char *const nb_bpe_pattern_gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char *const nb_bpe_pattern_llama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ---- units ------------------------------------------------------------------------------- */

typedef enum unit_class { U_LETTER, U_NUMBER, U_SPACE, U_OTHER } unit_class;

typedef struct text {
    const uint8_t *s;
    size_t n;
} text;

/* The length (1-4 bytes) of the unit at i and its code point (0xFFFFFFFF
 * for an invalid byte: overlong forms, surrogates and values past
 * U+10FFFF are invalid, as in Python's and Rust's decoders). */
static size_t unit_at(const text *t, size_t i, uint32_t *cp) {
    const uint8_t *s = t->s + i;
    size_t left = t->n - i;
    uint32_t c = s[0];
    *cp = 0xFFFFFFFFu;
    if (c < 0x80) return *cp = c, 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || len > left || c > 0xF4) return 1;
    uint32_t v = c & (0x3Fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 1;
        v = v << 6 | (s[k] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return 1;
    *cp = v;
    return len;
}

static unit_class class_of(uint32_t cp) {
    if (cp == 0xFFFFFFFFu) return U_OTHER;
    if (nb_bpe_is_letter(cp)) return U_LETTER;
    if (nb_bpe_is_number(cp)) return U_NUMBER;
    return nb_bpe_is_space(cp) ? U_SPACE : U_OTHER;
}

/* The class of the unit at i (U_SPACE past the end is never asked). */
static unit_class cls(const text *t, size_t i, uint32_t *cp, size_t *len) {
    uint32_t c;
    size_t l = unit_at(t, i, &c);
    if (cp) *cp = c;
    if (len) *len = l;
    return class_of(c);
}

/* The end of the run of units of class k starting at i (at most max units). */
static size_t run(const text *t, size_t i, unit_class k, size_t max) {
    size_t len;
    for (size_t count = 0; i < t->n && count < max && cls(t, i, NULL, &len) == k; count++) i += len;
    return i;
}

/* 's|'t|'re|'ve|'m|'ll|'d (ASCII case folded when fold): the end, or 0. */
static size_t contraction(const text *t, size_t i, bool fold) {
    if (t->s[i] != '\'' || i + 1 >= t->n) return 0;
    uint8_t a = t->s[i + 1], b = i + 2 < t->n ? t->s[i + 2] : 0;
    if (fold) a = a >= 'A' && a <= 'Z' ? a + 32 : a, b = b >= 'A' && b <= 'Z' ? b + 32 : b;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a space unit i: the whole run if it ends the text or
 * leaves one space unit, else the run without its last unit (which then
 * starts the next piece, as " word"). */
static size_t space_run(const text *t, size_t i) {
    size_t j = i, last = i, len;
    while (j < t->n && cls(t, j, NULL, &len) == U_SPACE) last = j, j += len;
    if (j == t->n || last == i) return j;
    return last;
}

/* ---- GPT-2 --------------------------------------------------------------------------------- */

static size_t gpt2_piece(const text *t, size_t i) {
    size_t e = contraction(t, i, false), len;
    if (e) return e;                                  /* 's|'t|'re|'ve|'m|'ll|'d */
    unit_class k = cls(t, i, NULL, &len);
    if (t->s[i] == ' ' && i + 1 < t->n) {             /* " ?" taken: ' ' then a run of one class */
        unit_class k2 = cls(t, i + 1, NULL, NULL);
        if (k2 != U_SPACE) return run(t, i + 1, k2, SIZE_MAX);
    }
    if (k != U_SPACE) return run(t, i, k, SIZE_MAX);  /* \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+ */
    return space_run(t, i);                           /* \s+(?!\S) | \s+ */
}

/* ---- Llama 3 (cl100k) ----------------------------------------------------------------------- */

static bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

static size_t llama3_piece(const text *t, size_t i) {
    size_t e = contraction(t, i, true), len;
    if (e) return e;                                   /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    uint32_t cp;
    unit_class k = cls(t, i, &cp, &len);
    if (k != U_LETTER && k != U_NUMBER && !is_newline(cp) && i + len < t->n &&
        cls(t, i + len, NULL, NULL) == U_LETTER)       /* [^\r\n\p{L}\p{N}]?\p{L}+ with the optional unit */
        return run(t, i + len, U_LETTER, SIZE_MAX);
    if (k == U_LETTER) return run(t, i, U_LETTER, SIZE_MAX);
    if (k == U_NUMBER) return run(t, i, U_NUMBER, 3); /* \p{N}{1,3} */
    size_t j = t->s[i] == ' ' && i + 1 < t->n && cls(t, i + 1, NULL, NULL) == U_OTHER ? i + 1 : i;
    if (cls(t, j, NULL, NULL) == U_OTHER) {            /* ?[^\s\p{L}\p{N}]+[\r\n]* */
        j = run(t, j, U_OTHER, SIZE_MAX);
        while (j < t->n && (t->s[j] == '\r' || t->s[j] == '\n')) j++;
        return j;
    }
    size_t end = i, after_nl = 0;                      /* \s*[\r\n]+: up to the last newline of the run */
    while (end < t->n && cls(t, end, &cp, &len) == U_SPACE) {
        end += len;
        if (is_newline(cp)) after_nl = end;
    }
    if (after_nl) return after_nl;
    return space_run(t, i);                            /* \s+(?!\S) | \s+ */
}

bool nb_bpe_split(nb_bpe_pretokenizer kind, const char *s, size_t n, nb_bpe_piece_fn fn, void *ctx) {
    text t = {(const uint8_t *)s, n};
    for (size_t i = 0; i < n;) {
        size_t e = kind == NB_BPE_LLAMA3 ? llama3_piece(&t, i) : gpt2_piece(&t, i);
        NB_ASSERT(e > i && e <= n);
        if (!fn(ctx, s + i, e - i)) return false;
        i = e;
    }
    return true;
}

typedef struct ends_ctx {
    const char *base;
    int64_t *ends, cap, n;
} ends_ctx;

static bool record_end(void *p, const char *piece, size_t n) {
    ends_ctx *c = p;
    if (c->n < c->cap) c->ends[c->n] = (int64_t)(piece - c->base + (ptrdiff_t)n);
    c->n++;
    return true;
}

int64_t nb_bpe_pretokenize(nb_bpe_pretokenizer kind, const char *s, size_t len, int64_t *ends, int64_t cap) {
    if ((!s && len) || (!ends && cap) || cap < 0 || (kind != NB_BPE_GPT2 && kind != NB_BPE_LLAMA3))
        return nb_set_error(NB_ERR_INVALID_ARG, "bpe_pretokenize: bad arguments"), -1;
    ends_ctx c = {s, ends, cap, 0};
    nb_bpe_split(kind, s, len, record_end, &c);
    return c.n;
}

/* ---- bytes_to_unicode ------------------------------------------------------------------------ */

/* GPT-2: the 188 printable bytes (33-126, 161-172, 174-255) stand for
 * themselves; the other 68 (0-32, 127-160, 173) are numbered 256, 257, ...
 * in byte order. */
uint32_t nb_bpe_byte_char(uint8_t b) {
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33 + (b - 127u);
    if (b == 173) return 256u + 67;
    return b;
}

int nb_bpe_char_byte(uint32_t cp) {
    if (cp < 256) return nb_bpe_byte_char((uint8_t)cp) == cp ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(127 + cp - 289);
    return cp == 256 + 67 ? 173 : -1;
}

uint8_t nb_bpe_base_byte(int i) { /* the printable bytes in order, then the others */
    if (i < 94) return (uint8_t)(33 + i);
    if (i < 106) return (uint8_t)(161 + i - 94);
    if (i < 188) return (uint8_t)(174 + i - 106);
    int j = i - 188;
    return (uint8_t)(j <= 32 ? j : j <= 66 ? 127 + j - 33 : 173);
}

bool nb_bpe_bytes_to_text(const char *s, size_t n, nb_strbuf *out) {
    for (size_t i = 0; i < n; i++) {
        char u[4];
        int k = nb_utf8_put(nb_bpe_byte_char((uint8_t)s[i]), u);
        if (!nb_strbuf_add(out, u, (size_t)k)) return false;
    }
    return true;
}
