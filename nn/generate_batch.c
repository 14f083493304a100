/* generate_batch.c - nb_generate over a batch of prompts of different
 * lengths: the prompts left-padded to the longest in one KV cache
 * (nb_kv_cache_set_left_padding gives each sequence its own positions and
 * keeps padding out of attention through a [B, 1, T, S] mask; prompts of
 * one length need none), one prefill of [B, P], then one forward of
 * [B, 1] per step for every sequence; a sequence that has stopped keeps
 * feeding a token, whose outputs are dropped. The tokens come from
 * nb_sample_tokens over the [B, V] logits on the device (only B tokens read
 * back per step). On a device with CUDA graphs the step is captured (as
 * generate.c does for one sequence): the tokens, the cache index and the
 * padding live on the device, and the step is replayed per token. */
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_autograd.h"
#include "nb_foreach.h"
#include "nb_ops.h"

typedef struct batch_run {
    nb_module *m;
    const nb_decoder_ctx *c;
    const nb_generate_options *o;
    int64_t B, V, P, total; /* sequences, vocabulary, padded prompt length, cache length */
    const int64_t *n_prompt;
    int64_t *out, cap, *n_new;
    nb_batch_token_callback callback;
    void *user;
    bool *done;
    int64_t *tok; /* [B]: each sequence's latest token */
} batch_run;

/* The next token of every sequence from hidden [B, T, H] (its last position), as [B, 1] int64 on the device. */
static nb_tensor *next_tokens(batch_run *r, nb_tensor *hidden) {
    int64_t T = hidden ? nb_size(hidden, 1) : 0;
    nb_tensor *l = hidden ? nb_causal_lm_head(r->m, nb_narrow(hidden, 1, T - 1, 1)) : NULL; /* [B, 1, V] */
    return l ? nb_reshape(nb_sample_tokens(l, r->o), 2, (int64_t[]){r->B, 1}) : NULL;
}

/* Hands each running sequence its token; false once every sequence has stopped. */
static bool emit_all(batch_run *r) {
    bool any = false;
    for (int64_t b = 0; b < r->B; b++) {
        if (r->done[b]) continue;
        int64_t t = r->tok[b], n = r->n_new[b];
        if (n < r->cap) r->out[b * r->cap + n] = t;
        r->n_new[b] = ++n;
        r->done[b] = (r->callback && !r->callback(r->user, b, t)) || nb_generate_is_stop(r->o, t) ||
                     n == r->o->max_new_tokens || r->P + n >= r->total || r->n_prompt[b] + n >= r->c->s.max_positions;
        any |= !r->done[b];
    }
    return any;
}

/* The step's device state: ids [B, 1] in, the next tokens out into ids; for the static step (the one a graph
 * captures), the cache index pos [1] advanced and the cache's keys. */
typedef struct batch_state {
    nb_tensor *ids, *pos, *keys;
} batch_state;

static bool decode_step(batch_run *r, nb_kv_cache *cache, batch_state *d) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = d->pos ? nb_decoder_step_at(r->m, d->ids, cache, d->pos, d->keys)
                          : nb_causal_lm_hidden(r->m, d->ids, cache);
    nb_tensor *tok = next_tokens(r, h);
    bool ok = tok && !nb_copy_(d->ids, tok);
    if (ok && d->pos) {
        nb_tensor *next = nb_add_scalar(d->pos, 1);
        ok = next && !nb_copy_(d->pos, next);
    }
    nb_scope_end(s);
    return ok;
}

/* The prefill's tokens into d->ids and r->tok, then the decode steps, eager or (graphs) captured once the first
 * has run eagerly and replayed per token (a capture that fails leaves them eager, with the same results). */
static bool decode(batch_run *r, nb_kv_cache *cache, const int64_t *ids, bool graphs, nb_device dev) {
    batch_state d = {nb_tensor_new_unscoped(2, (int64_t[]){r->B, 1}, NB_I64, dev), NULL, NULL};
    nb_graph *g = NULL;
    bool ok = d.ids != NULL;
    if (ok) {
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *prompt = nb_from_data(ids, 2, (int64_t[]){r->B, r->P}, NB_I64);
        nb_tensor *t = next_tokens(r, nb_causal_lm_hidden(r->m, prompt, cache));
        ok = t && !nb_copy_(d.ids, t) && nb_to_host(d.ids, r->tok, sizeof(int64_t) * (size_t)r->B) == NB_OK;
        nb_scope_end(s);
    }
    bool more = ok && emit_all(r);
    if (more && graphs) {
        d.pos = nb_tensor_new_unscoped(1, (int64_t[]){1}, NB_I64, dev);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *k = nb_arange(0, (double)r->total, 1, NB_I64);
        if (k && (nb_device_of(k).type != dev.type || nb_device_of(k).index != dev.index)) k = nb_to_device(k, dev);
        if (k) nb_retain(k), d.keys = k;
        nb_scope_end(s);
        ok = d.pos && d.keys && !nb_copy_from_host(d.pos, &r->P, sizeof r->P);
    }
    for (bool first = true; ok && more; first = false) {
        ok = (g ? nb_graph_replay(g) == NB_OK : decode_step(r, cache, &d)) &&
             nb_to_host(d.ids, r->tok, sizeof(int64_t) * (size_t)r->B) == NB_OK;
        if (ok) more = emit_all(r);
        if (graphs && ok && more && first) { /* capture the step once it has run eagerly */
            if (nb_graph_capture_begin(dev) == NB_OK) {
                bool stepped = decode_step(r, cache, &d);
                g = nb_graph_capture_end(dev);
                if (!stepped || !g) nb_graph_free(g), g = NULL;
            }
            nb_clear_error(); /* a failed capture: the steps stay eager */
        }
    }
    nb_graph_free(g);
    nb_release(d.ids), nb_release(d.pos), nb_release(d.keys);
    return ok;
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
    batch_run r = {m, c, &o, batch, c->s.vocab, P, o.max_new_tokens < limit - P ? P + o.max_new_tokens : limit,
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
    if (ok) ok = decode(&r, cache, ids, !o.eager_decode && nb_graph_supported(dev), dev);
    nb_kv_cache_free(cache);
    nb_module_train(m, training);
    nb_set_grad_enabled(prev);
    int64_t most = 0;
    for (int64_t b = 0; b < batch; b++) most = n_new[b] > most ? n_new[b] : most;
    free(r.done), free(r.tok), free(ids), free(pad);
    return ok ? most : -1;
}
