/* generate_batch.c - nb_generate over a batch of prompts of different
 * lengths: the prompts left-padded to the longest in one KV cache
 * (nb_kv_cache_set_left_padding gives each sequence its own positions and
 * keeps padding out of attention through a [B, 1, T, S] mask; prompts of
 * one length need none), one prefill of [B, P], then one forward of
 * [B, 1] per step for every sequence; a sequence that has stopped keeps
 * feeding a token, whose outputs are dropped. The loop is nb_generate's
 * (generate.c's nb_decode_tokens): the tokens come from nb_sample_tokens
 * over the [B, V] logits on the device (only B tokens read back per step),
 * and on a device with CUDA graphs the step is captured (the tokens, the
 * cache index and the padding live on the device) and replayed per token. */
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_autograd.h"
#include "nb_ops.h"

typedef struct batch_run {
    const nb_decoder_ctx *c;
    const nb_generate_options *o;
    int64_t B, P, total; /* sequences, padded prompt length, cache length */
    const int64_t *n_prompt;
    int64_t *out, cap, *n_new;
    nb_batch_token_callback callback;
    void *user;
    bool *done;
    int64_t *tok; /* [B]: each sequence's latest token (nb_decode_tokens writes it) */
} batch_run;

/* Hands each running sequence its token tok[b]; false once every sequence has stopped. */
static bool emit_all(void *ctx, const int64_t *tok) {
    batch_run *r = ctx;
    bool any = false;
    for (int64_t b = 0; b < r->B; b++) {
        if (r->done[b]) continue;
        int64_t t = tok[b], n = r->n_new[b];
        if (n < r->cap) r->out[b * r->cap + n] = t;
        r->n_new[b] = ++n;
        r->done[b] = (r->callback && !r->callback(r->user, b, t)) || nb_generate_is_stop(r->o, t) ||
                     n == r->o->max_new_tokens || r->P + n >= r->total || r->n_prompt[b] + n >= r->c->s.max_positions;
        any |= !r->done[b];
    }
    return any;
}

int64_t nb_generate_batch(nb_module *m, int64_t batch, const int64_t *const *prompts, const int64_t *n_prompt,
                          int64_t *out, int64_t cap, int64_t *n_new, nb_batch_token_callback callback, void *user,
                          nb_generate_options o) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c) return nb_set_error(NB_ERR_INVALID_ARG, "generate_batch: module is %s, not a GPT-2 or Llama model",
                                m ? nb_module_kind(m) : "NULL"), -1;
    if (batch < 1 || !prompts || !n_prompt || !n_new || o.max_new_tokens < 0 || cap < 0 || (cap > 0 && !out) ||
        o.callback)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate_batch: needs batch %lld >= 1 prompts with their lengths and "
                                                "n_new, max_new_tokens %lld >= 0, an output of cap %lld >= 0, and "
                                                "the per-sequence callback argument instead of opts.callback",
                            (long long)batch, (long long)o.max_new_tokens, (long long)cap), -1;
    if (!nb_generate_options_ok(&o)) return -1;
    int64_t P = 0, limit = c->s.max_positions;
    for (int64_t b = 0; b < batch; b++) {
        if (!prompts[b] || n_prompt[b] < 1 || n_prompt[b] > limit)
            return nb_set_error(NB_ERR_INVALID_ARG, "generate_batch: prompt %lld needs 1 to %lld ids (got %lld)",
                                (long long)b, (long long)limit, (long long)n_prompt[b]), -1;
        for (int64_t i = 0; i < n_prompt[b]; i++)
            if (prompts[b][i] < 0 || prompts[b][i] >= c->s.vocab)
                return nb_set_error(NB_ERR_INVALID_ARG, "generate_batch: prompt %lld's id %lld at %lld is outside "
                                                        "[0, %lld)", (long long)b, (long long)prompts[b][i],
                                    (long long)i, (long long)c->s.vocab), -1;
        P = n_prompt[b] > P ? n_prompt[b] : P;
    }
    memset(n_new, 0, sizeof(int64_t) * (size_t)batch);
    if (o.max_new_tokens == 0 || P == limit) return 0;
    batch_run r = {c, &o, batch, P, o.max_new_tokens < limit - P ? P + o.max_new_tokens : limit,
                   n_prompt, out, cap, n_new, callback, user, calloc((size_t)batch, sizeof(bool)),
                   malloc(sizeof(int64_t) * (size_t)batch)};
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(batch * P)), *pad = malloc(sizeof(int64_t) * (size_t)batch);
    bool ok = r.done && r.tok && ids && pad;
    if (!ok) nb_set_error(NB_ERR_OOM, "generate_batch: out of host memory");
    for (int64_t b = 0; ok && b < batch; b++) { /* left-padded with the prompt's first id */
        pad[b] = P - n_prompt[b];
        for (int64_t i = 0; i < P; i++) ids[b * P + i] = prompts[b][i < pad[b] ? 0 : i - pad[b]];
        r.done[b] = n_prompt[b] == limit;
    }
    bool training = nb_module_is_training(m), prev = nb_set_grad_enabled(false);
    nb_module_train(m, false); /* decoding runs in eval mode (no dropout), restored after */
    nb_device dev = nb_device_of(nb_module_get(c->embed, "weight"));
    bool padded = false; /* prompts of one length: no padding, so no mask (the prefill stays causal) */
    for (int64_t b = 0; ok && b < batch; b++) padded |= pad[b] > 0;
    nb_kv_cache *cache = ok ? nb_kv_cache_new(m, batch, r.total) : NULL;
    ok = cache && (!padded || nb_kv_cache_set_left_padding(cache, pad) == NB_OK);
    if (ok)
        ok = nb_decode_tokens(m, cache, ids, batch, P, r.total, &o, dev, !o.eager_decode && nb_graph_supported(dev),
                              r.tok, emit_all, &r);
    nb_kv_cache_free(cache);
    nb_module_train(m, training);
    nb_set_grad_enabled(prev);
    int64_t most = 0;
    for (int64_t b = 0; b < batch; b++) most = n_new[b] > most ? n_new[b] : most;
    free(r.done), free(r.tok), free(ids), free(pad);
    return ok ? most : -1;
}
