/* token_shard.c - memory-mapped token shards for language-model
 * pretraining, in llm.c's .bin layout (dev/data/data_common.py's
 * write_datafile): 256 little-endian int32 (header[0] the magic, [1] the
 * version, [2] the token count), then the tokens: magic 20240520 version 1
 * holds uint16 tokens (GPT-2), magic 20240801 version 7 uint32 (Llama 3).
 * A shard is mapped read-only and read window by window; the window dataset
 * serves (input_ids, labels) pairs to a DataLoader; nb_bpe_encode_file
 * writes a text corpus as a shard with the project's BPE. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "data_impl.h"
#include "nb_bpe.h"
#include "nb_extension.h"
#include "nb_ops.h"
#include "text_impl.h"

enum { HEADER_INTS = 256, MAGIC_U16 = 20240520, VERSION_U16 = 1, MAGIC_U32 = 20240801, VERSION_U32 = 7 };

struct nb_token_shard {
    void *map;
    size_t map_len;
    const uint8_t *tokens;
    int width; /* bytes per token: 2 or 4 */
    int64_t n;
};

nb_token_shard *nb_token_shard_open(const char *path) {
    const char *op = "token_shard_open";
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    size_t len;
    void *map = nb_data_map_file(op, path, false, &len);
    if (!map) return NULL;
    if (len < HEADER_INTS * 4) {
        munmap(map, len);
        return NB_FAIL(NB_ERR_FORMAT, "%s: %s has %zu bytes, less than the 1024-byte header", op, path, len);
    }
    const uint8_t *b = map;
    int32_t h[3];
    for (int i = 0; i < 3; i++)
        h[i] = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                         (uint32_t)b[4 * i + 3] << 24);
    int width = h[0] == MAGIC_U16 && h[1] == VERSION_U16 ? 2 : h[0] == MAGIC_U32 && h[1] == VERSION_U32 ? 4 : 0;
    nb_status s = NB_OK;
    if (!width)
        s = nb_set_error(NB_ERR_FORMAT, "%s: %s: magic %d version %d is not llm.c's (20240520 v1 uint16, 20240801 v7 "
                         "uint32)", op, path, h[0], h[1]);
    else if (h[2] < 0 || (size_t)h[2] * (size_t)width != len - HEADER_INTS * 4)
        s = nb_set_error(NB_ERR_FORMAT, "%s: %s: the header says %d tokens (%lld bytes), the file holds %zu bytes of "
                         "tokens", op, path, h[2], (long long)h[2] * width, len - HEADER_INTS * 4);
    nb_token_shard *t = s ? NULL : calloc(1, sizeof *t);
    if (!s && !t) s = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    if (s) {
        munmap(map, len);
        return NULL;
    }
    t->map = map, t->map_len = len, t->tokens = b + HEADER_INTS * 4, t->width = width, t->n = h[2];
    return t;
}

void nb_token_shard_close(nb_token_shard *t) {
    if (!t) return;
    munmap(t->map, t->map_len);
    free(t);
}

int64_t nb_token_shard_len(const nb_token_shard *t) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "token_shard_len: NULL shard"), -1;
    return t->n;
}

nb_status nb_token_shard_read(const nb_token_shard *t, int64_t start, int64_t n, int64_t *out) {
    if (!t || (!out && n)) return nb_set_error(NB_ERR_INVALID_ARG, "token_shard_read: NULL argument");
    if (start < 0 || n < 0 || start > t->n || n > t->n - start)
        return nb_set_error(NB_ERR_INVALID_ARG, "token_shard_read: tokens [%lld, %lld) outside the shard's %lld",
                            (long long)start, (long long)(start + n), (long long)t->n);
    const uint8_t *p = t->tokens + (size_t)start * (size_t)t->width;
    for (int64_t i = 0; i < n; i++, p += t->width)
        out[i] = t->width == 2 ? (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8)
                               : (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    return NB_OK;
}

nb_status nb_token_shard_write(const char *path, const int64_t *tokens, int64_t n, bool uint32_tokens) {
    const char *op = "token_shard_write";
    if (!path || (!tokens && n) || n < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument or n < 0", op);
    if (n > INT32_MAX) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld tokens (a shard holds < 2^31)", op, (long long)n);
    int w = uint32_tokens ? 4 : 2;
    uint64_t top = uint32_tokens ? UINT32_MAX : UINT16_MAX;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint64_t)tokens[i] > top)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: token %lld at %lld does not fit uint%d", op, (long long)tokens[i],
                                (long long)i, 8 * w);
    size_t len = HEADER_INTS * 4 + (size_t)n * (size_t)w;
    uint8_t *b = calloc(1, len);
    if (!b) return nb_set_error(NB_ERR_OOM, "%s: out of host memory (%zu bytes)", op, len);
    uint32_t h[3] = {uint32_tokens ? MAGIC_U32 : MAGIC_U16, uint32_tokens ? VERSION_U32 : VERSION_U16, (uint32_t)n};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(h[i] >> (8 * k));
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < w; k++) b[HEADER_INTS * 4 + (size_t)i * (size_t)w + (size_t)k] = (uint8_t)((uint64_t)tokens[i] >> (8 * k));
    nb_status st = nb_write_file_atomic(op, path, b, len);
    free(b);
    return st;
}

int64_t nb_bpe_encode_file(const nb_bpe *tok, const char *text_path, const char *shard_path, bool uint32_tokens) {
    const char *op = "bpe_encode_file";
    if (!tok || !text_path || !shard_path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op), -1;
    int32_t eot = nb_bpe_token_to_id(tok, "<|endoftext|>");
    if (eot < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: the vocabulary has no <|endoftext|>", op), -1;
    FILE *f = fopen(text_path, "rb");
    if (!f) return nb_set_error(NB_ERR_IO, "%s: cannot open %s: %s", op, text_path, strerror(errno)), -1;
    int64_t *all = NULL, n = 0, cap = 0;
    int32_t *ids = NULL;
    int64_t ids_cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    nb_status st = NB_OK;
    while (!st && (len = getline(&line, &lcap, f)) > 0) {
        if (line[len - 1] == '\n') len--;
        if (len == 0) continue;
        int64_t need = nb_bpe_encode(tok, line, (size_t)len, false, NULL, 0);
        if (need < 0) {
            st = nb_last_status();
            break;
        }
        if (need > ids_cap) {
            int32_t *p = realloc(ids, sizeof *p * (size_t)need);
            if (!p) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            else ids = p, ids_cap = need;
        }
        while (!st && n + need + 1 > cap) {
            int64_t nc = cap ? 2 * cap : 1 << 20;
            int64_t *p = realloc(all, sizeof *p * (size_t)nc);
            if (!p) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            else all = p, cap = nc;
        }
        if (st) break;
        nb_bpe_encode(tok, line, (size_t)len, false, ids, need);
        for (int64_t i = 0; i < need; i++) all[n++] = ids[i];
        all[n++] = eot; /* each line is a document, closed by <|endoftext|> as gpt_train's stream */
    }
    if (!st && ferror(f)) st = nb_set_error(NB_ERR_IO, "%s: cannot read %s", op, text_path);
    fclose(f);
    free(line), free(ids);
    if (!st) st = nb_token_shard_write(shard_path, all, n, uint32_tokens);
    free(all);
    return st ? -1 : n;
}

/* ---- windows as a map-style dataset ----------------------------------------------------------- */

typedef struct windows {
    int n;
    nb_token_shard **shards;
    int64_t *ends; /* cumulative window counts */
    int64_t seq_len, stride;
} windows;

static nb_status window_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    (void)gen;
    const windows *w = state;
    int k = 0;
    while (i >= w->ends[k]) k++;
    int64_t start = (i - (k ? w->ends[k - 1] : 0)) * w->stride, T = w->seq_len;
    nb_tensor *x = nb_empty_on(NB_SHAPE(T + 1), NB_I64, NB_CPU);
    if (!x) return nb_last_status();
    nb_status st = nb_token_shard_read(w->shards[k], start, T + 1, (int64_t *)nb_data_ptr(x));
    if (!st) st = nb_sample_set(out, "input_ids", nb_narrow(x, 0, 0, T));
    return st ? st : nb_sample_set(out, "labels", nb_narrow(x, 0, 1, T));
}

static void windows_free(void *state) {
    windows *w = state;
    for (int i = 0; i < w->n; i++) nb_token_shard_close(w->shards[i]);
    free(w->shards), free(w->ends), free(w);
}

nb_map_dataset *nb_token_window_dataset(const char *const *paths, int n_paths, int64_t seq_len, int64_t stride) {
    const char *op = "token_window_dataset";
    if (!paths || n_paths < 1 || seq_len < 1 || stride < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %d paths, seq_len %lld, stride %lld (each >= 1)", op, n_paths,
                       (long long)seq_len, (long long)stride);
    windows *w = calloc(1, sizeof *w);
    if (w) w->shards = calloc((size_t)n_paths, sizeof *w->shards), w->ends = calloc((size_t)n_paths, sizeof *w->ends);
    if (!w || !w->shards || !w->ends) {
        if (w) free(w->shards), free(w->ends), free(w);
        return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    }
    w->seq_len = seq_len, w->stride = stride;
    int64_t total = 0;
    for (int i = 0; i < n_paths; i++) {
        if (!(w->shards[i] = nb_token_shard_open(paths[i]))) {
            windows_free(w);
            return NULL;
        }
        w->n = i + 1;
        int64_t n = w->shards[i]->n; /* windows of seq_len + 1 tokens, starting every stride */
        total += n > seq_len ? (n - seq_len - 1) / stride + 1 : 0;
        w->ends[i] = total;
    }
    nb_map_dataset *d = nb_map_dataset_new(total, window_item, w, windows_free);
    if (!d) windows_free(w);
    return d;
}
