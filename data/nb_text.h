/* nb_text.h - text data for BERT: BERT's WordPiece tokenizer (train a
 * vocabulary, load/save vocab.txt, encode/decode) and a masked-language-model
 * (MLM) dataset that turns a corpus into fixed-length, masked batches.
 *
 *   // data/fetch_wordnet.sh puts train.txt / eval.txt into nb_wordnet_default_dir
 *   nb_wordpiece *wp = nb_wordpiece_train("train.txt", 8192, (nb_wordpiece_options){0});
 *   nb_wordpiece_save(wp, "vocab.txt");                  // BERT's vocab.txt format
 *   nb_mlm_dataset *ds = nb_mlm_dataset_new("train.txt", wp, 128, (nb_mlm_options){.seed = 1});
 *   int64_t idx[32] = {...};                             // sequence numbers
 *   nb_mlm_batch b;
 *   nb_scope *s = nb_scope_begin();
 *   if (nb_mlm_get_batch(ds, epoch, idx, 32, &b)) fprintf(stderr, "%s\n", nb_last_error());
 *   ... b.input_ids [32,128] int64, b.labels [32,128] int64 (-100 = ignore),
 *       b.attention_mask [32,128] bool, b.token_type_ids [32,128] int64 ...
 *   nb_scope_end(s);                                     // the batch tensors die here
 *   nb_mlm_dataset_free(ds);
 *   nb_wordpiece_free(wp);
 *
 * Threads: every function that takes a const tokenizer or dataset only reads
 * it, so one tokenizer/dataset may be used from several threads at once.
 *
 * Sources: BERT's tokenization.py (github.com/google-research/bert: the
 * BasicTokenizer and WordpieceTokenizer classes) and
 * create_pretraining_data.py (masking); Devlin et al., "BERT: Pre-training
 * of deep bidirectional transformers for language understanding" (2019),
 * section 3.1 (15% of tokens, 80/10/10).
 */
#ifndef NB_TEXT_H
#define NB_TEXT_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- basic tokenization (BERT's BasicTokenizer) --------------------------
 * Per code point of the UTF-8 text, in this order:
 *  - removed: NUL, U+FFFD and invalid UTF-8 bytes, control characters
 *    (Unicode categories Cc and Cf, e.g. \v, \f, U+00AD, U+200B, U+FEFF;
 *    \t \n \r count as whitespace, as in BERT's _is_control);
 *  - whitespace (' ', \t, \n, \r and category Zs, e.g. U+00A0, U+3000)
 *    separates words;
 *  - do_lower_case: lower-case and strip accents (BERT: lower(), then NFD,
 *    then drop category Mn). Exact for ASCII, Latin-1, Latin Extended-A/B,
 *    Latin Extended Additional (U+1E00-1EFF), Greek and Cyrillic (tables
 *    generated with Python's unicodedata, Unicode 14); combining marks (Mn)
 *    are dropped everywhere. Limits: other scripts are neither lower-cased
 *    nor decomposed (Python also decomposes e.g. Hangul syllables into
 *    jamo; nabla keeps them), and letters without a decomposition stay as
 *    they are in both (ß, æ, ø, đ, ł);
 *  - punctuation becomes a word of its own: ASCII 33-47, 58-64, 91-96,
 *    123-126 and every code point of a Unicode category P* (BERT's
 *    _is_punctuation), e.g. "don't." -> don ' t .
 *  - CJK ideographs (BERT's _is_chinese_char ranges) become words of their own.
 */

/* Writes the words of text, as BERT's BasicTokenizer splits them, into out
 * separated by single spaces and NUL-terminated (truncated to len - 1 bytes
 * when out is too short, as snprintf). Returns the length of the whole
 * result (so out needs that + 1 bytes), or -1 on error
 * (NB_ERR_INVALID_ARG: text NULL, or out NULL with len > 0).
 * Example: "Hello, WORLD!  Café" -> "hello , world ! cafe" (do_lower_case). */
int64_t nb_basic_tokenize(const char *text, bool do_lower_case, char *out, size_t len);

/* ---- WordPiece ----------------------------------------------------------- */

/* A WordPiece tokenizer (BERT's FullTokenizer: BasicTokenizer then WordpieceTokenizer; transformers'
 * BertTokenizer): a vocabulary and the casing option; nb_wordpiece_train or nb_wordpiece_load, nb_wordpiece_free. */
typedef struct nb_wordpiece nb_wordpiece;

/* BERT's special tokens, found in a vocabulary by their text, never by a
 * fixed id: a vocabulary trained here has [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3
 * [MASK]=4; Google's BERT vocab.txt has [PAD]=0 [UNK]=100 [CLS]=101 ... */
typedef enum nb_special_token {
    NB_TOKEN_PAD,  /* "[PAD]" */
    NB_TOKEN_UNK,  /* "[UNK]" (required in every vocabulary) */
    NB_TOKEN_CLS,  /* "[CLS]" */
    NB_TOKEN_SEP,  /* "[SEP]" */
    NB_TOKEN_MASK, /* "[MASK]" */
    NB_TOKEN_COUNT /* the number of special tokens (5), not a token */
} nb_special_token;

/* Options of nb_wordpiece_train / nb_wordpiece_load; {0} gives the defaults. */
typedef struct nb_wordpiece_options {
    /* false (default): do_lower_case = True, as bert-base-uncased (lower-case
     * and strip accents before WordPiece); true: keep case and accents. */
    bool cased;
    /* Words longer than this many code points become [UNK]
     * (max_input_chars_per_word); 0 means BERT's 100. At most 10000. */
    int max_input_chars_per_word;
    /* Training only: a pair of symbols is merged only if it occurs at least
     * this often (Hugging Face's min_frequency); 0 means 2. */
    int64_t min_frequency;
} nb_wordpiece_options;

/* Trains a WordPiece vocabulary of at most vocab_size tokens on the UTF-8
 * text file corpus_path (any line structure; newlines are whitespace).
 * Procedure (that of Hugging Face tokenizers' WordPieceTrainer): the corpus
 * is split into words by the basic tokenizer above and each word into
 * characters, all but the first prefixed "##" ("word" -> w ##o ##r ##d);
 * then the adjacent pair of symbols with the highest frequency (summed
 * over the corpus) is merged into one symbol ("w" + "##o" -> "wo",
 * "##o" + "##r" -> "##or"), repeatedly, until the vocabulary has
 * vocab_size tokens or no pair occurs min_frequency times (BPE's rule,
 * Sennrich et al. 2016, not WordPiece's likelihood score). Ties go to the
 * pair whose first, then second, symbol comes earlier in the vocabulary
 * (deterministic: same corpus, same vocabulary). A merge whose text is
 * already a token ("a"+"##bc" after "ab"+"##c") reuses it. Vocabulary order: [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4),
 * then the alphabet in byte order, word-initial characters first, then
 * "##" ones (every character seen, in both forms except punctuation and
 * CJK, so no word with known characters becomes [UNK]), then merged
 * symbols in merge order. Encoding then uses WordPiece's greedy
 * longest-match-first on that vocabulary (nb_wordpiece_encode).
 * Errors (NULL returned):
 *   NB_ERR_INVALID_ARG  corpus_path NULL, options out of range, vocab_size
 *                       smaller than 5 + the corpus's alphabet (the message
 *                       gives the smallest size possible)
 *   NB_ERR_IO           the file cannot be opened or read
 *   NB_ERR_FORMAT       the corpus holds no word
 *   NB_ERR_OOM */
nb_wordpiece *nb_wordpiece_train(const char *corpus_path, int32_t vocab_size,
                                 nb_wordpiece_options opts);

/* Loads a vocabulary in BERT's vocab.txt format: one token per line,
 * id = line number from 0, UTF-8, '\n' or "\r\n" line ends (the last line
 * may lack one). opts.min_frequency is ignored. Google's and Hugging Face's
 * BERT vocab.txt files load as they are (opts.cased must match the model:
 * false for *-uncased).
 * Errors (NULL returned; the message names the file and line):
 *   NB_ERR_INVALID_ARG  path NULL, options out of range
 *   NB_ERR_IO           missing or unreadable file
 *   NB_ERR_FORMAT       an empty file, an empty line (an empty token), a
 *                       token listed twice (both lines named), no "[UNK]",
 *                       more than 2^31 - 1 tokens, a token holding a NUL or
 *                       '\r' byte (no text tokenizes to one, and a token
 *                       ending in '\r' would not read back as itself)
 *   NB_ERR_OOM */
nb_wordpiece *nb_wordpiece_load(const char *vocab_path, nb_wordpiece_options opts);

/* Writes the vocabulary in vocab.txt format (token of id i on line i,
 * each line ended by '\n'), so nb_wordpiece_load gives the same ids.
 * Errors: NB_ERR_INVALID_ARG (NULL argument; a token vocab.txt cannot hold:
 * empty, or holding '\n', '\r' or NUL, checked before the file is opened),
 * NB_ERR_IO (cannot write). */
nb_status nb_wordpiece_save(const nb_wordpiece *wp, const char *path);

/* NULL is ignored. */
void nb_wordpiece_free(nb_wordpiece *wp);

/* The number of tokens (ids are 0 .. size-1); 0 for NULL. */
int32_t nb_wordpiece_vocab_size(const nb_wordpiece *wp);
/* Whether the tokenizer lower-cases (do_lower_case). */
bool nb_wordpiece_lowercases(const nb_wordpiece *wp);
/* The id of an exact token ("##ing", "[MASK]"), or -1 if it is not in the
 * vocabulary (no error is set). */
int32_t nb_wordpiece_token_to_id(const nb_wordpiece *wp, const char *token);
/* The token of an id, borrowed (valid while wp lives); NULL with
 * NB_ERR_INVALID_ARG for an id out of range. */
const char *nb_wordpiece_id_to_token(const nb_wordpiece *wp, int32_t id);
/* The id of a special token, or -1 if the vocabulary has none
 * (NB_TOKEN_UNK is always present). */
int32_t nb_wordpiece_special_id(const nb_wordpiece *wp, nb_special_token which);
/* True for reserved tokens: a token written "[...]" with at least one
 * character inside ([PAD], [UNK], [CLS], [SEP], [MASK], BERT's [unused7]).
 * The tokenizer never produces them from text except [UNK] (brackets are
 * punctuation), so MLM neither masks them nor draws them as random tokens. */
bool nb_wordpiece_is_special(const nb_wordpiece *wp, int32_t id);

/* Tokenizes text (UTF-8): basic tokenization (lower-casing as the
 * tokenizer was made), then per word WordPiece's greedy longest-match-first
 * (BERT's WordpieceTokenizer): the longest vocabulary entry that prefixes
 * the rest of the word, "##"-prefixed after the first piece; a word with a
 * rest that no entry matches, or longer than max_input_chars_per_word code
 * points, becomes the single token [UNK]. No [CLS]/[SEP] are added.
 * Writes the first min(count, cap) ids to ids and returns count, the total
 * (call again with a larger buffer if count > cap); -1 on error
 * (NB_ERR_INVALID_ARG: wp or text NULL, ids NULL with cap > 0, cap < 0;
 * NB_ERR_OOM).
 * Example, vocab {[UNK], un, ##aff, ##able, runn, ##ing, ",", want, ##ed}:
 * "unaffable, running wanted!" -> un ##aff ##able , runn ##ing want ##ed [UNK]
 * ("!" is not in the vocabulary). */
int64_t nb_wordpiece_encode(const nb_wordpiece *wp, const char *text, int32_t *ids, int64_t cap);
/* nb_wordpiece_encode as a new int64 [count] tensor on the default device
 * (the dtype embeddings and the models take; NULL on error, with
 * nb_wordpiece_encode's errors). */
nb_tensor *nb_wordpiece_encode_tensor(const nb_wordpiece *wp, const char *text);

/* Writes the text of ids into out as Hugging Face's convert_tokens_to_string:
 * tokens joined by single spaces, a "##" piece glued to the one before
 * ("un ##aff ##able" -> "unaffable"). skip_special leaves out reserved
 * tokens ("[...]", nb_wordpiece_is_special). NUL-terminated, truncated
 * to len - 1 bytes as snprintf; returns the length of the whole text, or -1
 * (NB_ERR_INVALID_ARG: NULL wp, ids NULL with n > 0, out NULL with len > 0,
 * n < 0, an id out of range). */
int64_t nb_wordpiece_decode(const nb_wordpiece *wp, const int32_t *ids, int64_t n,
                            bool skip_special, char *out, size_t len);

/* ---- the WordNet corpus --------------------------------------------------- */

/* Writes the directory data/fetch_wordnet.sh fills (corpus.txt, train.txt,
 * eval.txt: one sentence per line) into buf: $NB_WORDNET_DIR if set and
 * non-empty, else $XDG_CACHE_HOME/nabla/wordnet, else
 * $HOME/.cache/nabla/wordnet. Errors: NB_ERR_INVALID_ARG (buf NULL or too
 * short, neither NB_WORDNET_DIR nor HOME set). */
nb_status nb_wordnet_default_dir(char *buf, size_t len);

/* ---- masked-language-model dataset ---------------------------------------- */

/* A corpus tokenized into N fixed-length sequences of seq_len tokens, masked on demand per (epoch, index);
 * nb_mlm_dataset_new, nb_mlm_dataset_free. */
typedef struct nb_mlm_dataset nb_mlm_dataset;

/* Label value of positions that are not predicted: nb_cross_entropy's
 * ignore_index default (PyTorch's -100). */
#define NB_MLM_IGNORE_INDEX (-100)

/* Options of nb_mlm_dataset_new; {0} gives the defaults. */
typedef struct nb_mlm_options {
    uint64_t seed;     /* the masking's Philox key */
    double mask_prob;  /* fraction of the maskable tokens chosen; 0 means 0.15 */
    /* false (default): pack consecutive lines into each sequence,
     *   [CLS] line1 [SEP] line2 [SEP] ... [SEP] [PAD]..., a line that does
     *   not fit in what is left starting the next sequence (as RoBERTa's
     *   FULL-SENTENCES; little padding, every line kept whole unless it
     *   alone exceeds seq_len - 2 tokens, then it is truncated);
     * true: one line per sequence, [CLS] line [SEP] [PAD]..., truncated to
     *   seq_len - 2 tokens. */
    bool one_line_per_sequence;
    int64_t max_sequences; /* > 0: stop after this many sequences; 0: the whole file */
} nb_mlm_options;

/* Corpus statistics of a dataset. */
typedef struct nb_mlm_stats {
    int64_t lines;      /* lines in the sequences (those with at least one token) */
    int64_t tokens;     /* WordPiece tokens of those lines (before truncation) */
    int64_t unk_tokens; /* of which [UNK] */
    int64_t truncated;  /* lines cut to seq_len - 2 tokens */
    int64_t sequences;  /* N */
    int64_t real_positions; /* non-[PAD] positions over all sequences */
    int64_t maskable;   /* positions holding a non-reserved token (the masking candidates) */
} nb_mlm_stats;

/* Builds the fixed-length sequences of seq_len tokens from the UTF-8 text
 * file corpus_path (one sentence per line; empty lines and lines with no
 * token are skipped) with tokenizer wp, which is only read during the call
 * (it may be freed afterwards). wp must have [PAD], [CLS], [SEP] and [MASK].
 * Errors (NULL returned):
 *   NB_ERR_INVALID_ARG  NULL argument, seq_len < 3 or > 65536, mask_prob not
 *                       in (0, 1), max_sequences < 0, a tokenizer without
 *                       [PAD]/[CLS]/[SEP]/[MASK] or without a non-reserved token
 *   NB_ERR_IO           the file cannot be opened or read
 *   NB_ERR_FORMAT       the corpus yields no token
 *   NB_ERR_OOM */
nb_mlm_dataset *nb_mlm_dataset_new(const char *corpus_path, const nb_wordpiece *wp,
                                   int64_t seq_len, nb_mlm_options opts);
/* NULL is ignored. */
void nb_mlm_dataset_free(nb_mlm_dataset *ds);
/* N, the number of sequences (0 for NULL). */
int64_t nb_mlm_num_sequences(const nb_mlm_dataset *ds);
/* T, the sequence length (0 for NULL). */
int64_t nb_mlm_seq_len(const nb_mlm_dataset *ds);
/* The vocabulary size of the tokenizer the dataset was built with. */
int32_t nb_mlm_vocab_size(const nb_mlm_dataset *ds);
/* Statistics of the corpus (zeros for NULL). */
nb_mlm_stats nb_mlm_get_stats(const nb_mlm_dataset *ds);

/* Sequence `index` of the dataset as masked for epoch `epoch`, into host
 * buffers of seq_len entries each (any may be NULL to skip it):
 *   input_ids       the token ids after masking;
 *   labels          the original id at the chosen positions,
 *                   NB_MLM_IGNORE_INDEX elsewhere;
 *   attention_mask  1 at real tokens ([CLS], text, [SEP]), 0 at [PAD].
 * Masking (create_pretraining_data.py): of the n maskable positions (not
 * [PAD]/[CLS]/[SEP] or another reserved token, [UNK] included),
 * max(1, floor(mask_prob * n + 0.5)) are chosen uniformly without
 * replacement (none if n = 0); each chosen one becomes [MASK] with
 * probability 0.8, a token drawn uniformly from the non-reserved ids with
 * 0.1 (possibly the same token), and stays unchanged with 0.1. The random
 * numbers are Philox (core/philox.h) draws j = 0 .. 2*seq_len-1 of
 * nb_philox_bits(seed, (epoch * N + index) * seq_len, j), so the result is
 * a pure function of (seed, epoch, index): the same on every run and
 * thread, different for every epoch. An evaluation uses one fixed epoch.
 * Errors: NB_ERR_INVALID_ARG (NULL ds, index not in [0, N), epoch < 0),
 * NB_ERR_OOM. */
nb_status nb_mlm_get_sequence(const nb_mlm_dataset *ds, int64_t epoch, int64_t index,
                              int64_t *input_ids, int64_t *labels, uint8_t *attention_mask);

/* One MLM batch: B = size sequences of T = seq_len tokens. The tensors are
 * new (on the default device) and owned as any new tensor (nb_core.h): by
 * the innermost open scope, else by the caller, who nb_releases each. */
typedef struct nb_mlm_batch {
    nb_tensor *input_ids;      /* [B, T] int64, masked tokens */
    nb_tensor *labels;         /* [B, T] int64, original ids at chosen positions, -100 elsewhere */
    nb_tensor *attention_mask; /* [B, T] bool, true = real token, false = [PAD] */
    nb_tensor *token_type_ids; /* [B, T] int64, all 0 (one segment) */
    int64_t size;              /* B */
    int64_t num_masked;        /* labels != -100 */
} nb_mlm_batch;

/* Fills *out with sequences indices[0..n) masked for epoch (each row as
 * nb_mlm_get_sequence). Errors (*out zeroed, no tensor left behind):
 * NB_ERR_INVALID_ARG (NULL argument, n < 1, an index out of range,
 * epoch < 0), NB_ERR_OOM. */
nb_status nb_mlm_get_batch(const nb_mlm_dataset *ds, int64_t epoch, const int64_t *indices,
                           int64_t n, nb_mlm_batch *out);

/* A permutation of 0..N-1 for shuffling epoch `epoch` (Fisher-Yates on
 * Philox draws keyed by the dataset's seed; a pure function of
 * (seed, epoch), independent of the masking's draws). perm holds N entries.
 * Errors: NB_ERR_INVALID_ARG (NULL argument, epoch < 0). */
nb_status nb_mlm_permutation(const nb_mlm_dataset *ds, int64_t epoch, int64_t *perm);

/* Counts, per token id, how often it stands at a maskable position over
 * all sequences (the expected distribution of the labels, since masking
 * chooses maskable positions uniformly). counts holds n entries (n >= the
 * vocabulary size; ids >= n are not counted) and is overwritten.
 * Errors: NB_ERR_INVALID_ARG (NULL argument, n < vocabulary size). */
nb_status nb_mlm_token_counts(const nb_mlm_dataset *ds, int64_t *counts, int64_t n);
/* The most frequent token at maskable positions (smallest id on ties): the
 * unigram baseline's constant prediction. -1 on error (NULL ds, NB_ERR_OOM)
 * or when the dataset has no maskable position. */
int32_t nb_mlm_most_frequent_token(const nb_mlm_dataset *ds);

#ifdef __cplusplus
}
#endif
#endif
