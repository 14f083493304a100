/* text_impl.h - internals shared by the text files of data/ (not installed):
 * Unicode classes and UTF-8 (text_unicode.c), a growable byte buffer and a
 * string-interning hash map (text_util.c), the basic tokenizer's word
 * splitter (basic_tokenizer.c) and the tokenizer struct (wordpiece.c,
 * wordpiece_train.c). */
#ifndef NB_TEXT_IMPL_H
#define NB_TEXT_IMPL_H

#include <stdint.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_text.h"

/* ---- Unicode (text_unicode.c) ------------------------------------------ */

/* Decodes the code point at *s and advances *s past it; an invalid or
 * truncated sequence yields 0xFFFD and advances one byte. *s must not point
 * at the terminating NUL. */
uint32_t nb_utf8_next(const char **s);
/* Writes cp (<= 0x10FFFF) as UTF-8 into out (4 bytes room); returns bytes. */
int nb_utf8_put(uint32_t cp, char *out);
bool nb_uc_is_space(uint32_t cp);   /* BERT's _is_whitespace */
bool nb_uc_is_control(uint32_t cp); /* BERT's _is_control (Cc, Cf; not \t \n \r) */
bool nb_uc_is_punct(uint32_t cp);   /* BERT's _is_punctuation */
bool nb_uc_is_cjk(uint32_t cp);     /* BERT's _is_chinese_char */
/* Lower-case and strip accents (BERT's lower() + _run_strip_accents) of
 * one code point; 0 when it disappears (a combining mark). */
uint32_t nb_uc_fold(uint32_t cp);

/* ---- buffers and maps (text_util.c) --------------------------------------- */

typedef struct nb_strbuf {
    char *p;
    size_t len, cap;
} nb_strbuf;

/* Appends n bytes; false on allocation failure (the buffer is unchanged). */
bool nb_strbuf_add(nb_strbuf *b, const void *s, size_t n);
void nb_strbuf_free(nb_strbuf *b);

/* Reads a whole file into a NUL-terminated malloc'd buffer (*len bytes
 * before the NUL). `op` names the caller in error messages. drop_nul
 * removes the file's own NUL bytes (BERT's _clean_text drops U+0000), so a
 * corpus is not cut short at its first NUL; without it they stay, for the
 * caller to reject. Errors: NB_ERR_IO (missing, a directory, unreadable),
 * NB_ERR_OOM. */
nb_status nb_read_text_file(const char *op, const char *path, bool drop_nul, char **data, size_t *len);

/* nb_write_file_atomic: nb_extension.h (core/file.c). */

/* Interns strings: each distinct key gets the next id 0, 1, 2, ... */
typedef struct nb_strmap {
    int32_t *slots;    /* cap entries: -1 empty, else an id */
    size_t cap;        /* a power of two */
    uint32_t *hashes;  /* per id */
    size_t *offs;      /* per id: offset of the NUL-terminated key in arena */
    uint32_t *lens;    /* per id: key bytes */
    int32_t n, ids_cap;
    nb_strbuf arena;
} nb_strmap;

/* The id of the key s[0..len), or -1. */
int32_t nb_strmap_find(const nb_strmap *m, const char *s, size_t len);
/* The id of the key, adding it if new (*created set); -1 on allocation failure. */
int32_t nb_strmap_intern(nb_strmap *m, const char *s, size_t len, bool *created);
static inline const char *nb_strmap_key(const nb_strmap *m, int32_t id) {
    return m->arena.p + m->offs[id];
}
void nb_strmap_free(nb_strmap *m);

/* ---- basic tokenizer (basic_tokenizer.c) ---------------------------------- */

/* Appends the words of text to out, each followed by a NUL; adds their
 * number to *nwords. false on allocation failure. */
bool nb_basic_split(const char *text, bool lower, nb_strbuf *out, int64_t *nwords);

/* ---- tokenizer (wordpiece.c) ---------------------------------------------- */

struct nb_wordpiece {
    nb_strmap vocab; /* token -> id, id = line of vocab.txt */
    bool lower;
    int max_chars;
    int32_t special[NB_TOKEN_COUNT]; /* ids, -1 when absent */
    uint8_t *reserved;               /* per id: 1 for "[...]" tokens */
};

/* Validates options; fills lower and max_chars. `op` names the caller. */
nb_status nb_wordpiece_init_options(nb_wordpiece *wp, const char *op, nb_wordpiece_options opts);
/* Finds the special tokens and reserved flags once vocab is filled; fails
 * (NB_ERR_FORMAT, naming `what`) when there is no [UNK]. */
nb_status nb_wordpiece_finish(nb_wordpiece *wp, const char *op, const char *what);

#endif
