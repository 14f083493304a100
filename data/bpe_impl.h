/* bpe_impl.h - internals of the byte-level BPE tokenizer (data/bpe*.c; not
 * installed): the Unicode classes and pre-tokenizers, GPT-2's byte-to-
 * character map, and the tokenizer struct shared by loading, encoding,
 * saving and training. */
#ifndef NB_BPE_IMPL_H
#define NB_BPE_IMPL_H

#include "nb_bpe.h"
#include "text_impl.h"

/* ---- Unicode classes (bpe_unicode.c) ----------------------------------------------- */

bool nb_bpe_is_letter(uint32_t cp); /* \p{L} */
bool nb_bpe_is_number(uint32_t cp); /* \p{N} */
bool nb_bpe_is_space(uint32_t cp);  /* \s (White_Space) */

/* ---- pre-tokenizers and the byte map (bpe_pretok.c) ---------------------------------------------- */

/* Calls fn(ctx, piece, n) for each piece of text[0..len) in order; stops
 * (returning false) when fn does. */
typedef bool (*nb_bpe_piece_fn)(void *ctx, const char *piece, size_t n);
bool nb_bpe_split(nb_bpe_pretokenizer kind, const char *text, size_t len, nb_bpe_piece_fn fn, void *ctx);

/* GPT-2's bytes_to_unicode: the code point that stands for byte b in token
 * text, and the inverse (-1 for a code point that stands for no byte). */
uint32_t nb_bpe_byte_char(uint8_t b);
int nb_bpe_char_byte(uint32_t cp);
/* The byte of GPT-2's base token id i (0..255): bytes_to_unicode's order. */
uint8_t nb_bpe_base_byte(int i);
/* Appends the token text of the bytes s[0..n) (each byte's character in
 * UTF-8) to out; false on OOM. */
bool nb_bpe_bytes_to_text(const char *s, size_t n, nb_strbuf *out);

/* The two patterns as the regular expressions of tokenizer.json. */
extern const char *const nb_bpe_pattern_gpt2;
extern const char *const nb_bpe_pattern_llama3;

/* ---- the tokenizer (bpe.c) ------------------------------------------------------------------------ */

struct nb_bpe {
    nb_strmap vocab;       /* token text -> id (ids dense, the map's own) */
    nb_strbuf raw;         /* every token's bytes */
    size_t *raw_off;       /* per id */
    uint32_t *raw_len;
    uint8_t *added;        /* per id: 1 for added (special) tokens */
    int32_t ids_cap;       /* entries of raw_off, raw_len, added */
    int32_t byte_id[256];  /* the token of each single byte */
    int32_t n_merges;
    int32_t *merge_a, *merge_b, *merge_c; /* by rank: a + b -> c */
    uint64_t *pair_keys;   /* (a << 32 | b) -> rank, open addressing */
    int32_t *pair_rank;
    size_t pair_cap;
    nb_bpe_pretokenizer pretok;
    bool ignore_merges;
    int32_t *added_ids;    /* added tokens, longest text first (matched in encode) */
    int32_t n_added;
    bool added_first[256]; /* whether some added token starts with this byte */
};

/* A new empty tokenizer. */
nb_bpe *nb_bpe_alloc(const char *op);
/* Appends a token (text exactly as in vocab.json) and returns its id, -1
 * on OOM or when it exists already (error set). */
int32_t nb_bpe_add_token(nb_bpe *t, const char *op, const char *text, size_t n, bool added);
/* Appends the merge a + b (-> c, the token of their texts joined); error
 * when that token is missing. */
nb_status nb_bpe_add_merge(nb_bpe *t, const char *op, int32_t a, int32_t b);
/* Finds the byte tokens and orders the added tokens once every token and
 * merge is in; NB_ERR_FORMAT naming what when a byte has no token. */
nb_status nb_bpe_finish(nb_bpe *t, const char *op, const char *what);

#endif
