/* mlm.c - the masked-language-model dataset: a corpus tokenized once into
 * fixed-length [CLS] ... [SEP] [PAD]... sequences (host int32 rows), and
 * BERT's masking (create_pretraining_data.py: a fixed 15% of the maskable
 * tokens, 80% [MASK] / 10% random / 10% kept) drawn from Philox as a pure
 * function of (seed, epoch, sequence index), applied when a batch is asked
 * for. Batches are assembled in plain host buffers and become tensors with
 * nb_from_data. */
#include <math.h>
#include <string.h>

#include "philox.h"
#include "text_impl.h"

struct nb_mlm_dataset {
    int64_t n, T;
    int32_t *ids;      /* [n, T], [PAD]-filled */
    int32_t *len;      /* [n]: real tokens of each row (they come first) */
    uint8_t *reserved; /* per vocabulary id */
    int32_t *normal;   /* the non-reserved ids (random replacements) */
    int32_t n_normal, vocab, pad, unk, cls, sep, mask;
    uint64_t seed;
    double mask_prob;
    nb_mlm_stats stats;
};

nb_status nb_wordnet_default_dir(char *buf, size_t len) {
    if (!buf) return nb_set_error(NB_ERR_INVALID_ARG, "wordnet_default_dir: NULL buffer");
    const char *env = getenv("NB_WORDNET_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env) n = snprintf(buf, len, "%s", env);
    else if (xdg && *xdg) n = snprintf(buf, len, "%s/nabla/wordnet", xdg);
    else if (home && *home) n = snprintf(buf, len, "%s/.cache/nabla/wordnet", home);
    else return nb_set_error(NB_ERR_INVALID_ARG, "wordnet_default_dir: neither NB_WORDNET_DIR nor HOME is set");
    if (n < 0 || (size_t)n >= len)
        return nb_set_error(NB_ERR_INVALID_ARG, "wordnet_default_dir: buffer of %zu bytes too short", len);
    return NB_OK;
}

void nb_mlm_dataset_free(nb_mlm_dataset *ds) {
    if (!ds) return;
    free(ds->ids), free(ds->len), free(ds->reserved), free(ds->normal);
    free(ds);
}

/* Row assembly state. */
typedef struct builder {
    nb_mlm_dataset *ds;
    int64_t cap_rows, max_rows, pos; /* pos: tokens in the open row, 0 = none open */
    bool one_line;
} builder;

static void close_row(builder *b) {
    nb_mlm_dataset *ds = b->ds;
    int32_t *row = ds->ids + ds->n * ds->T;
    for (int64_t p = b->pos; p < ds->T; p++) row[p] = ds->pad;
    ds->len[ds->n++] = (int32_t)b->pos;
    ds->stats.real_positions += b->pos;
    b->pos = 0;
}

/* Adds one line's L tokens; 1 = added, 0 = max_sequences reached, -1 = OOM. */
static int add_line(builder *b, const int32_t *tok, int64_t L) {
    nb_mlm_dataset *ds = b->ds;
    int64_t full = L;
    if (L > ds->T - 2) L = ds->T - 2;
    if (b->pos && (b->one_line || b->pos + L + 1 > ds->T)) close_row(b);
    if (!b->pos) {
        if (b->max_rows && ds->n == b->max_rows) return 0;
        if (ds->n == b->cap_rows) {
            int64_t cap = b->cap_rows ? b->cap_rows * 2 : 1024;
            int32_t *ids = realloc(ds->ids, (size_t)(cap * ds->T) * sizeof *ids);
            if (!ids) return -1;
            ds->ids = ids;
            int32_t *len = realloc(ds->len, (size_t)cap * sizeof *len);
            if (!len) return -1;
            ds->len = len, b->cap_rows = cap;
        }
        ds->ids[ds->n * ds->T] = ds->cls;
        b->pos = 1;
    }
    int32_t *row = ds->ids + ds->n * ds->T;
    memcpy(row + b->pos, tok, (size_t)L * sizeof *tok);
    b->pos += L;
    row[b->pos++] = ds->sep;
    ds->stats.lines++, ds->stats.tokens += full, ds->stats.truncated += full > L;
    for (int64_t i = 0; i < full; i++) ds->stats.unk_tokens += tok[i] == ds->unk;
    for (int64_t i = 0; i < L; i++) ds->stats.maskable += !ds->reserved[tok[i]];
    return 1;
}

/* Tokenizes the corpus line by line into rows. */
static nb_status build_rows(nb_mlm_dataset *ds, const nb_wordpiece *wp, const char *path,
                            nb_mlm_options opts) {
    char *text;
    size_t len;
    nb_status st = nb_read_text_file("mlm_dataset_new", path, true, &text, &len);
    if (st) return st;
    builder b = {.ds = ds, .max_rows = opts.max_sequences, .one_line = opts.one_line_per_sequence};
    int32_t *tok = NULL;
    int64_t cap = 0;
    int r = 1;
    for (char *line = text; r == 1 && line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (nl) *nl = 0;
        int64_t n = nb_wordpiece_encode(wp, line, tok, cap);
        if (n > cap) { /* a longer line than any so far: grow and redo */
            free(tok);
            cap = n * 2;
            n = (tok = malloc((size_t)cap * sizeof *tok)) ? nb_wordpiece_encode(wp, line, tok, cap) : -1;
        }
        line = nl ? nl + 1 : text + len;
        if (n < 0) r = -1;
        if (n > 0) r = add_line(&b, tok, n);
    }
    if (r >= 0 && b.pos) close_row(&b);
    free(tok), free(text);
    if (r < 0) return nb_set_error(NB_ERR_OOM, "mlm_dataset_new: out of memory tokenizing %s", path);
    if (ds->n == 0) return nb_set_error(NB_ERR_FORMAT, "mlm_dataset_new: %s yields no token", path);
    ds->stats.sequences = ds->n;
    return NB_OK;
}

/* Copies what masking needs from the tokenizer. */
static nb_status take_vocab(nb_mlm_dataset *ds, const nb_wordpiece *wp) {
    static const char *const names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int k = 0; k < NB_TOKEN_COUNT; k++)
        if (wp->special[k] < 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "mlm_dataset_new: the vocabulary has no %s token",
                                names[k]);
    ds->vocab = wp->vocab.n;
    ds->pad = wp->special[NB_TOKEN_PAD], ds->unk = wp->special[NB_TOKEN_UNK];
    ds->cls = wp->special[NB_TOKEN_CLS];
    ds->sep = wp->special[NB_TOKEN_SEP], ds->mask = wp->special[NB_TOKEN_MASK];
    ds->reserved = malloc((size_t)ds->vocab);
    ds->normal = malloc((size_t)ds->vocab * sizeof *ds->normal);
    if (!ds->reserved || !ds->normal) return nb_set_error(NB_ERR_OOM, "mlm_dataset_new: out of memory");
    memcpy(ds->reserved, wp->reserved, (size_t)ds->vocab);
    for (int32_t id = 0; id < ds->vocab; id++)
        if (!ds->reserved[id]) ds->normal[ds->n_normal++] = id;
    if (ds->n_normal == 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "mlm_dataset_new: the vocabulary has only reserved tokens");
    return NB_OK;
}

nb_mlm_dataset *nb_mlm_dataset_new(const char *corpus_path, const nb_wordpiece *wp, int64_t seq_len,
                                   nb_mlm_options opts) {
    if (!corpus_path || !wp)
        return NB_FAIL(NB_ERR_INVALID_ARG, "mlm_dataset_new: NULL %s", wp ? "corpus path" : "tokenizer");
    if (seq_len < 3 || seq_len > 65536)
        return NB_FAIL(NB_ERR_INVALID_ARG, "mlm_dataset_new: seq_len %lld not in [3, 65536]",
                       (long long)seq_len);
    double p = opts.mask_prob == 0 ? 0.15 : opts.mask_prob;
    if (!(p > 0 && p < 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "mlm_dataset_new: mask_prob %g not in (0, 1)", opts.mask_prob);
    if (opts.max_sequences < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "mlm_dataset_new: max_sequences %lld < 0",
                       (long long)opts.max_sequences);
    nb_mlm_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return NB_FAIL(NB_ERR_OOM, "mlm_dataset_new: out of memory");
    ds->T = seq_len, ds->seed = opts.seed, ds->mask_prob = p;
    nb_status st = take_vocab(ds, wp);
    if (!st) st = build_rows(ds, wp, corpus_path, opts);
    if (st) {
        nb_mlm_dataset_free(ds);
        return NULL;
    }
    return ds;
}

/* A NULL dataset (a failed build upstream): keeps that error, else records one. */
static bool no_ds(const char *op, const nb_mlm_dataset *ds) {
    if (ds) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL dataset", op);
    return true;
}

int64_t nb_mlm_num_sequences(const nb_mlm_dataset *ds) { return no_ds("mlm_num_sequences", ds) ? -1 : ds->n; }
int64_t nb_mlm_seq_len(const nb_mlm_dataset *ds) { return no_ds("mlm_seq_len", ds) ? -1 : ds->T; }
int32_t nb_mlm_vocab_size(const nb_mlm_dataset *ds) { return no_ds("mlm_vocab_size", ds) ? -1 : ds->vocab; }
nb_mlm_stats nb_mlm_get_stats(const nb_mlm_dataset *ds) { return no_ds("mlm_get_stats", ds) ? (nb_mlm_stats){0} : ds->stats; }

/* Masks row `index` for `epoch` into the outputs (T entries each); cand is
 * T int32 of scratch. */
static void mask_row(const nb_mlm_dataset *ds, int64_t epoch, int64_t index, int32_t *cand,
                     int64_t *ids, int64_t *labels, uint8_t *attn) {
    const int64_t T = ds->T;
    const int32_t *row = ds->ids + index * T;
    int64_t L = ds->len[index], nc = 0;
    for (int64_t p = 0; p < T; p++) {
        ids[p] = row[p], labels[p] = NB_MLM_IGNORE_INDEX, attn[p] = p < L;
        if (p < L && !ds->reserved[row[p]]) cand[nc++] = (int32_t)p;
    }
    if (nc == 0) return;
    int64_t k = (int64_t)floor(ds->mask_prob * (double)nc + 0.5);
    if (k < 1) k = 1;
    /* Draws 0..T-1 shuffle, T..2T-1 decide: T Philox blocks per (epoch, index). */
    uint64_t base = ((uint64_t)epoch * (uint64_t)ds->n + (uint64_t)index) * (uint64_t)T;
    for (int64_t j = 0; j < k; j++) { /* the first k of a Fisher-Yates shuffle */
        int64_t r = j + (int64_t)(nb_philox_bits(ds->seed, base, (uint64_t)j) % (uint64_t)(nc - j));
        int32_t t = cand[j];
        cand[j] = cand[r], cand[r] = t;
    }
    for (int64_t j = 0; j < k; j++) {
        int32_t p = cand[j];
        uint64_t bits = nb_philox_bits(ds->seed, base, (uint64_t)(T + j));
        double u = (double)(uint32_t)(bits >> 32) * 0x1.0p-32;
        labels[p] = row[p];
        if (u < 0.8) ids[p] = ds->mask;
        else if (u < 0.9) ids[p] = ds->normal[(uint32_t)bits % (uint32_t)ds->n_normal];
    }
}

static nb_status check_index(const nb_mlm_dataset *ds, const char *op, int64_t epoch, int64_t index) {
    if (epoch < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: epoch %lld < 0", op, (long long)epoch);
    if (index < 0 || index >= ds->n)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: sequence index %lld not in [0, %lld)", op,
                            (long long)index, (long long)ds->n);
    return NB_OK;
}

nb_status nb_mlm_get_sequence(const nb_mlm_dataset *ds, int64_t epoch, int64_t index, int64_t *input_ids,
                              int64_t *labels, uint8_t *attention_mask) {
    if (!ds) return nb_set_error(NB_ERR_INVALID_ARG, "mlm_get_sequence: NULL dataset");
    nb_status st = check_index(ds, "mlm_get_sequence", epoch, index);
    if (st) return st;
    size_t T = (size_t)ds->T;
    char *tmp = malloc(T * (sizeof(int32_t) + 2 * sizeof(int64_t) + 1));
    if (!tmp) return nb_set_error(NB_ERR_OOM, "mlm_get_sequence: out of memory");
    int64_t *i64 = (int64_t *)tmp, *l64 = i64 + T;
    int32_t *cand = (int32_t *)(l64 + T);
    uint8_t *m8 = (uint8_t *)(cand + T);
    mask_row(ds, epoch, index, cand, i64, l64, m8);
    if (input_ids) memcpy(input_ids, i64, T * sizeof *i64);
    if (labels) memcpy(labels, l64, T * sizeof *l64);
    if (attention_mask) memcpy(attention_mask, m8, T);
    free(tmp);
    return NB_OK;
}

nb_status nb_mlm_get_batch(const nb_mlm_dataset *ds, int64_t epoch, const int64_t *indices, int64_t n,
                           nb_mlm_batch *out) {
    if (out) *out = (nb_mlm_batch){0};
    if (!ds || !indices || !out)
        return nb_set_error(NB_ERR_INVALID_ARG, "mlm_get_batch: NULL %s",
                            !ds ? "dataset" : !indices ? "indices" : "output");
    if (n < 1) return nb_set_error(NB_ERR_INVALID_ARG, "mlm_get_batch: batch size %lld < 1", (long long)n);
    for (int64_t b = 0; b < n; b++) {
        nb_status st = check_index(ds, "mlm_get_batch", epoch, indices[b]);
        if (st) return st;
    }
    size_t T = (size_t)ds->T, cells = (size_t)n * T;
    char *tmp = malloc(cells * (2 * sizeof(int64_t) + 1) + T * sizeof(int32_t));
    if (!tmp) return nb_set_error(NB_ERR_OOM, "mlm_get_batch: out of memory");
    int64_t *ids = (int64_t *)tmp, *labels = ids + cells;
    int32_t *cand = (int32_t *)(labels + cells);
    uint8_t *attn = (uint8_t *)(cand + T);
    int64_t masked = 0;
    for (int64_t b = 0; b < n; b++) {
        mask_row(ds, epoch, indices[b], cand, ids + b * T, labels + b * T, attn + b * T);
        for (size_t p = 0; p < T; p++) masked += labels[b * T + p] != NB_MLM_IGNORE_INDEX;
    }
    /* An inner scope, so that a failure leaves no tensor behind; on success
     * the four tensors move to the caller's scope (or the caller). */
    nb_scope *s = nb_op_scope_begin();
    if (!s) {
        free(tmp);
        return nb_set_error(NB_ERR_OOM, "mlm_get_batch: out of memory");
    }
    const int64_t shape[2] = {n, ds->T};
    nb_tensor *t[4] = {nb_from_data(ids, 2, shape, NB_I64), nb_from_data(labels, 2, shape, NB_I64),
                       nb_from_data(attn, 2, shape, NB_BOOL), nb_zeros(2, shape, NB_I64)};
    free(tmp);
    bool ok = t[0] && t[1] && t[2] && t[3];
    for (int k = 0; ok && k < 4; k++) nb_retain(t[k]);
    nb_scope_end(s);
    if (!ok) return nb_last_status() ? nb_last_status() : nb_set_error(NB_ERR_OOM, "mlm_get_batch: out of memory");
    for (int k = 0; k < 4; k++)
        if (!nb_scope_adopt(t[k])) { /* adopt released t[k]; release the rest */
            for (int r = k + 1; r < 4; r++) nb_release(t[r]);
            return nb_last_status();
        }
    *out = (nb_mlm_batch){t[0], t[1], t[2], t[3], n, masked};
    return NB_OK;
}

nb_status nb_mlm_permutation(const nb_mlm_dataset *ds, int64_t epoch, int64_t *perm) {
    if (!ds || !perm)
        return nb_set_error(NB_ERR_INVALID_ARG, "mlm_permutation: NULL %s", ds ? "output" : "dataset");
    if (epoch < 0) return nb_set_error(NB_ERR_INVALID_ARG, "mlm_permutation: epoch %lld < 0", (long long)epoch);
    /* Another Philox key than the masking's, so the two streams never meet. */
    uint64_t key = ds->seed ^ 0x9E3779B97F4A7C15ull, base = (uint64_t)epoch * (uint64_t)ds->n;
    for (int64_t i = 0; i < ds->n; i++) perm[i] = i;
    for (int64_t i = ds->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(nb_philox_bits(key, base, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    return NB_OK;
}

nb_status nb_mlm_token_counts(const nb_mlm_dataset *ds, int64_t *counts, int64_t n) {
    if (!ds || !counts)
        return nb_set_error(NB_ERR_INVALID_ARG, "mlm_token_counts: NULL %s", ds ? "counts" : "dataset");
    if (n < ds->vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "mlm_token_counts: %lld counts for a vocabulary of %d",
                            (long long)n, ds->vocab);
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int64_t r = 0; r < ds->n; r++) {
        const int32_t *row = ds->ids + r * ds->T;
        for (int32_t p = 0; p < ds->len[r]; p++)
            if (!ds->reserved[row[p]]) counts[row[p]]++;
    }
    return NB_OK;
}

int32_t nb_mlm_most_frequent_token(const nb_mlm_dataset *ds) {
    if (!ds) return (int32_t)(nb_set_error(NB_ERR_INVALID_ARG, "mlm_most_frequent_token: NULL dataset"), -1);
    int64_t *counts = malloc((size_t)ds->vocab * sizeof *counts);
    if (!counts) return (int32_t)(nb_set_error(NB_ERR_OOM, "mlm_most_frequent_token: out of memory"), -1);
    nb_mlm_token_counts(ds, counts, ds->vocab);
    int32_t best = -1;
    for (int32_t id = 0; id < ds->vocab; id++)
        if (counts[id] > 0 && (best < 0 || counts[id] > counts[best])) best = id;
    free(counts);
    return best;
}
