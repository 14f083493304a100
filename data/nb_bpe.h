/* nb_bpe.h - byte-level BPE tokenization as GPT-2 and Llama 3 use it: load
 * GPT-2's vocab.json + merges.txt or a Hugging Face tokenizer.json, encode
 * and decode exactly (any bytes round-trip), train a vocabulary on a corpus,
 * and save it in both formats.
 *
 *   nb_bpe *tok = nb_bpe_load_gpt2("vocab.json", "merges.txt");
 *   int32_t ids[64];
 *   int64_t n = nb_bpe_encode(tok, "Hello world", 11, true, ids, 64);   // 15496 995 with GPT-2's files
 *   char text[64];
 *   nb_bpe_decode(tok, ids, n, text, sizeof text);                      // "Hello world"
 *   nb_bpe_free(tok);
 *
 * Byte-level BPE (Radford et al. 2019, GPT-2; Sennrich et al. 2016): the
 * text is split into pieces by a pre-tokenizer (a regular expression), each
 * piece's bytes become the 256 base symbols (written in vocab.json as the
 * printable characters of GPT-2's bytes_to_unicode: byte 0x20 is "Ġ"), and
 * merges are applied by rank, lowest first, until none applies (OpenAI's
 * encoder.py; transformers' GPT2Tokenizer; tokenizers' BPE model). Every
 * byte string has an encoding and decoding gives the bytes back, so
 * decode(encode(x)) == x for any x, invalid UTF-8 and NUL bytes included.
 *
 * Pre-tokenizers (each a fixed regular expression, implemented directly;
 * \p{L} letters, \p{N} numbers, \s the White_Space property, Unicode 14.0):
 *   NB_BPE_GPT2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   NB_BPE_LLAMA3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *                  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+    (Llama 3, tiktoken's cl100k)
 * Bytes that are not valid UTF-8 count as one character each, of no class
 * (so they group with punctuation); the regex engines of Python and Hugging
 * Face only see valid text. The case-insensitive contractions fold ASCII only.
 *
 * Added (special) tokens such as "<|endoftext|>" or "<|begin_of_text|>" are
 * found in the text as they are (when asked), before pre-tokenization, and
 * decode to their text. No BOS/EOS is added: prepend nb_bpe_token_to_id(t,
 * "<|begin_of_text|>") yourself where a model wants it.
 *
 * Threads: a loaded tokenizer is only read by encode/decode (they keep their
 * scratch per call), so one tokenizer may serve several threads.
 */
#ifndef NB_BPE_H
#define NB_BPE_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A byte-level BPE tokenizer (tokenizers' BPE model with a ByteLevel pre-tokenizer, transformers'
 * GPT2Tokenizer): vocabulary, merges by rank, added tokens and pre-tokenizer; free with nb_bpe_free. */
typedef struct nb_bpe nb_bpe;

/* The pre-tokenizer's regular expression (the patterns above). */
typedef enum nb_bpe_pretokenizer {
    NB_BPE_GPT2 = 0, /* GPT-2's pattern (tokenizers' ByteLevel pre-tokenizer) */
    NB_BPE_LLAMA3    /* Llama 3's (tiktoken's cl100k) pattern */
} nb_bpe_pretokenizer;

/* GPT-2's vocab.json ({"token": id, ...}, ids 0..n-1 each once) and
 * merges.txt (an optional "#version" line, then one "A B" merge per line,
 * by rank; A, B and AB must be tokens). "<|endoftext|>", when present, is an
 * added token (transformers' GPT2Tokenizer). Pre-tokenizer NB_BPE_GPT2.
 * Errors (NULL returned; messages name the file and line): NB_ERR_INVALID_ARG,
 * NB_ERR_IO, NB_ERR_FORMAT (not JSON, ids not dense, a merge of unknown
 * tokens, no token for some byte), NB_ERR_OOM. */
nb_bpe *nb_bpe_load_gpt2(const char *vocab_json_path, const char *merges_txt_path);

/* A Hugging Face tokenizer.json whose model is BPE with a ByteLevel
 * pre-tokenizer (GPT-2's) or a Split of one of the two patterns above
 * followed by ByteLevel without regex (Llama 3's); merges as "A B" strings
 * or ["A", "B"] pairs; model.ignore_merges honoured (Llama 3: a piece that
 * is itself a token is not split); added_tokens become added tokens (their
 * lstrip/rstrip/single_word flags are not applied). Errors: as
 * nb_bpe_load_gpt2, plus NB_ERR_UNSUPPORTED (another model, a normalizer,
 * another pre-tokenizer or pattern, add_prefix_space, byte_fallback, dropout). */
nb_bpe *nb_bpe_load_tokenizer_json(const char *path);

/* Options of nb_bpe_train; {0} gives the defaults. */
typedef struct nb_bpe_train_options {
    nb_bpe_pretokenizer pretokenizer; /* NB_BPE_GPT2 */
    int64_t min_frequency;            /* a pair is merged only if seen this often; 0 = 2 */
    const char *const *special_tokens; /* added after the merged tokens, in order (e.g. "<|endoftext|>") */
    int n_special_tokens;             /* entries of special_tokens (>= 0; each non-empty) */
} nb_bpe_train_options;

/* Trains a byte-level BPE vocabulary of at most vocab_size tokens on the
 * file corpus_path (any bytes; each line is pre-tokenized, the newline too)
 * as tokenizers' BpeTrainer does for ByteLevel: pieces are counted, their
 * bytes are the 256 base tokens (ids 0-255 in GPT-2's order: "!" first),
 * and the most frequent adjacent pair is merged, repeatedly (ties to the
 * pair of smaller ids: deterministic), until vocab_size - n_special_tokens
 * tokens or no pair occurs min_frequency times; special tokens take the
 * last ids. Errors (NULL): NB_ERR_INVALID_ARG (vocab_size < 256 + specials,
 * bad options), NB_ERR_IO, NB_ERR_OOM. */
nb_bpe *nb_bpe_train(const char *corpus_path, int32_t vocab_size, nb_bpe_train_options opts);

/* vocab.json and merges.txt as GPT-2's (so nb_bpe_load_gpt2 and
 * transformers' GPT2Tokenizer read them), written atomically. Added tokens
 * go into vocab.json too. Errors: NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_bpe_save_gpt2(const nb_bpe *t, const char *vocab_json_path, const char *merges_txt_path);
/* tokenizer.json as tokenizers writes it (model BPE, the pre-tokenizer of
 * t, ByteLevel decoder, added_tokens), written atomically. */
nb_status nb_bpe_save_tokenizer_json(const nb_bpe *t, const char *path);

void nb_bpe_free(nb_bpe *t); /* NULL is ignored */

/* Accessors: 0, GPT-2's, -1 or false for a NULL tokenizer, with an error
 * (NB_ERR_INVALID_ARG) unless one is pending from a failed load. */
int32_t nb_bpe_vocab_size(const nb_bpe *t); /* 0 for NULL */
int32_t nb_bpe_num_merges(const nb_bpe *t); /* merges, by rank (0 for NULL) */
nb_bpe_pretokenizer nb_bpe_get_pretokenizer(const nb_bpe *t); /* NB_BPE_GPT2 for NULL */
/* The id of a token as written in vocab.json ("Ġthe", "<|endoftext|>"), or
 * -1 (no error set for a token not in the vocabulary; NB_ERR_INVALID_ARG
 * for a NULL argument). */
int32_t nb_bpe_token_to_id(const nb_bpe *t, const char *token);
/* The token text of an id (borrowed), or NULL with NB_ERR_INVALID_ARG. */
const char *nb_bpe_id_to_token(const nb_bpe *t, int32_t id);
/* Whether id is an added (special) token. */
bool nb_bpe_is_special(const nb_bpe *t, int32_t id);

/* Encodes the len bytes at text: added tokens found in it first (when
 * special is true; otherwise their text is encoded as any other), then
 * pre-tokenization and BPE. Writes the first min(count, cap) ids and
 * returns count (call again with cap >= count for all); -1 on error
 * (NB_ERR_INVALID_ARG: NULL t, text NULL with len > 0, ids NULL with cap
 * > 0, cap < 0; NB_ERR_OOM). */
int64_t nb_bpe_encode(const nb_bpe *t, const char *text, size_t len, bool special, int32_t *ids, int64_t cap);

/* Tokenizes a text corpus into a token shard (nb_data.h): each non-empty
 * line of text_path as a document, its tokens then <|endoftext|> (the
 * stream gpt_train trains on), written to shard_path as uint16 tokens
 * (uint32_tokens: uint32). Returns the token count, or -1
 * (NB_ERR_INVALID_ARG: NULL, no <|endoftext|> in the vocabulary, a token
 * beyond the width; NB_ERR_IO; NB_ERR_OOM). */
int64_t nb_bpe_encode_file(const nb_bpe *t, const char *text_path, const char *shard_path, bool uint32_tokens);
/* nb_bpe_encode as a new int64 [count] tensor on the default device (what
 * embeddings take; NULL on error, as nb_bpe_encode's -1). */
nb_tensor *nb_bpe_encode_tensor(const nb_bpe *t, const char *text, size_t len, bool special);

/* Writes the bytes of ids into out (the inverse of the byte-level map;
 * added tokens as their text), NUL-terminated and truncated to len - 1
 * bytes as snprintf; returns the number of bytes of the whole text (which
 * may itself hold NUL bytes), or -1 (NB_ERR_INVALID_ARG: NULL t, ids NULL
 * with n > 0, out NULL with len > 0, an id out of range). */
int64_t nb_bpe_decode(const nb_bpe *t, const int32_t *ids, int64_t n, char *out, size_t len);

/* The pieces the pre-tokenizer cuts text[0..len) into: writes the end
 * offset of each (exclusive, increasing, the last = len) to ends[0..cap)
 * and returns their number, or -1 (NB_ERR_INVALID_ARG). For tests and
 * tooling. */
int64_t nb_bpe_pretokenize(nb_bpe_pretokenizer kind, const char *text, size_t len, int64_t *ends, int64_t cap);

#ifdef __cplusplus
}
#endif
#endif
