/* generate.c - autoregressive decoding with a KV cache: one forward over the
 * prompt (prefill) fills the cache, then each new token is one forward of a
 * single position (decode). The next token comes from the last position's
 * logits, read to the host: argmax (greedy), or a draw after transformers'
 * logits warpers in their order (temperature, top-k, top-p). Draws come from
 * Philox through the caller's nb_generator (one counter block per token), so
 * a seed fixes the output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_autograd.h"
#include "nb_ops.h"
#include "philox.h"

/* ---- sampling -------------------------------------------------------------------------- */

typedef struct ranked {
    float logit;
    int64_t id;
} ranked;

/* Descending logits, ties by ascending id (a total order: deterministic). */
static int by_logit_desc(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

bool nb_generate_options_ok(const nb_generate_options *o) {
    if (o->temperature >= 0 && isfinite(o->temperature) && o->top_k >= 0 && o->top_p >= 0 && o->top_p <= 1 &&
        o->n_stop_tokens >= 0 && (o->n_stop_tokens == 0 || o->stop_tokens))
        return true;
    nb_set_error(NB_ERR_INVALID_ARG,
                 "generate: temperature %g must be finite and >= 0, top_k %lld >= 0, top_p %g in [0, 1], and "
                 "n_stop_tokens %d >= 0 with stop_tokens given",
                 o->temperature, (long long)o->top_k, o->top_p, o->n_stop_tokens);
    return false;
}

int64_t nb_sample_logits(const float *logits, int64_t n, const nb_generate_options *o) {
    if (!logits || n < 1 || !o) return nb_set_error(NB_ERR_INVALID_ARG, "sample_logits: needs logits and n >= 1"), -1;
    if (!nb_generate_options_ok(o)) return -1;
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(logits[i]) && logits[i] > -INFINITY && (best < 0 || logits[i] > logits[best])) best = i;
    if (best < 0) return nb_set_error(NB_ERR_INVALID_ARG, "sample_logits: every logit is -inf or NaN"), -1;
    if (o->temperature == 0) return best; /* greedy: the first maximum, as torch.argmax */
    /* the candidates, most likely first: every finite logit / temperature */
    ranked *r = malloc(sizeof *r * (size_t)n);
    if (!r) return nb_set_error(NB_ERR_OOM, "sample_logits: out of host memory"), -1;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(logits[i]) && logits[i] > -INFINITY) r[m++] = (ranked){(float)(logits[i] / o->temperature), i};
    qsort(r, (size_t)m, sizeof *r, by_logit_desc);
    int64_t keep = m;
    if (o->top_k > 0 && o->top_k < m) { /* TopKLogitsWarper: scores below the k-th largest go */
        keep = o->top_k;
        while (keep < m && r[keep].logit == r[o->top_k - 1].logit) keep++;
    }
    double total = 0, mx = r[0].logit;
    for (int64_t i = 0; i < keep; i++) total += exp(r[i].logit - mx);
    if (o->top_p > 0 && o->top_p < 1) { /* TopPLogitsWarper: keep while the mass before a token is < top_p */
        double before = 0;
        int64_t k = 0;
        while (k < keep && before < o->top_p * total) before += exp(r[k++].logit - mx);
        keep = k;
        total = before;
    }
    nb_generator *gen = o->gen ? o->gen : nb_default_generator();
    uint64_t off = nb_generator_advance(gen, 1);
    double u = nb_bits_to_unit(nb_philox_bits(gen->seed, off, 0)) * total, acc = 0;
    int64_t tok = r[keep - 1].id;
    for (int64_t i = 0; i < keep; i++) {
        acc += exp(r[i].logit - mx);
        if (u < acc) {
            tok = r[i].id;
            break;
        }
    }
    free(r);
    return tok;
}

/* ---- generate ------------------------------------------------------------------------------ */

/* The logits of the last position of hidden [1, T, H] as float32 on the host. */
static bool last_logits(nb_module *m, nb_tensor *hidden, float *out, int64_t V) {
    int64_t T = nb_size(hidden, 1);
    nb_tensor *l = nb_to_dtype(nb_causal_lm_head(m, nb_narrow(hidden, 1, T - 1, 1)), NB_F32);
    return l && nb_to_host(l, out, sizeof(float) * (size_t)V) == NB_OK;
}

bool nb_generate_is_stop(const nb_generate_options *o, int64_t tok) {
    for (int i = 0; i < o->n_stop_tokens; i++)
        if (o->stop_tokens[i] == tok) return true;
    return false;
}

static int64_t generate_loop(nb_module *m, const nb_decoder_ctx *c, const int64_t *ids, int64_t n_prompt,
                             int64_t total, int64_t *out, int64_t cap, const nb_generate_options *o) {
    int64_t V = c->s.vocab, n = 0;
    float *logits = malloc(sizeof(float) * (size_t)V);
    nb_kv_cache *cache = logits ? nb_kv_cache_new(m, 1, total) : NULL;
    if (!cache) {
        free(logits);
        if (!logits) nb_set_error(NB_ERR_OOM, "generate: out of host memory");
        return -1;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *prompt = nb_from_data(ids, 2, (int64_t[]){1, n_prompt}, NB_I64);
    bool ok = last_logits(m, nb_causal_lm_hidden(m, prompt, cache), logits, V);
    nb_scope_end(s);
    while (ok) {
        int64_t tok = nb_sample_logits(logits, V, o);
        if (tok < 0) {
            ok = false;
            break;
        }
        if (n < cap) out[n] = tok;
        n++;
        if ((o->callback && !o->callback(o->user, tok)) || nb_generate_is_stop(o, tok) || n == o->max_new_tokens ||
            n_prompt + n >= total)
            break;
        s = nb_op_scope_begin();
        nb_tensor *next = nb_from_data(&tok, 2, (int64_t[]){1, 1}, NB_I64);
        ok = last_logits(m, nb_causal_lm_hidden(m, next, cache), logits, V);
        nb_scope_end(s);
    }
    nb_kv_cache_free(cache);
    free(logits);
    return ok ? n : -1;
}

/* ---- greedy decoding as a replayed CUDA graph ---------------------------------------------------- */

/* The state one captured step reads and advances on the device. */
typedef struct graph_decode {
    nb_module *m;
    nb_kv_cache *cache;
    nb_tensor *ids;  /* [1, 1] int64: the step's input token, overwritten with its output */
    nb_tensor *pos;  /* [1] int64: the input token's position, advanced by the step */
    nb_tensor *keys; /* [max_len] int64: 0 .. max_len - 1 */
} graph_decode;

/* One decode step, all on the device: the next token (argmax of the last logits, the first maximum, as greedy
 * decoding on the host) into ids, pos + 1 into pos. */
static bool graph_step(graph_decode *d) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = nb_decoder_step_at(d->m, d->ids, d->cache, d->pos, d->keys);
    nb_tensor *tok = nb_argmax(nb_to_dtype(nb_causal_lm_head(d->m, h), NB_F32), -1, false); /* [1, 1] */
    nb_tensor *next = nb_add_scalar(d->pos, 1);
    bool ok = tok && next && !nb_copy_(d->ids, tok) && !nb_copy_(d->pos, next);
    nb_scope_end(s);
    return ok;
}

/* Emits tok; true when generation goes on. */
static bool emit(const nb_generate_options *o, int64_t tok, int64_t *out, int64_t cap, int64_t *n, int64_t n_prompt,
                 int64_t total) {
    if (*n < cap) out[*n] = tok;
    (*n)++;
    return !((o->callback && !o->callback(o->user, tok)) || nb_generate_is_stop(o, tok) || *n == o->max_new_tokens ||
             n_prompt + *n >= total);
}

/* Greedy decoding with the step captured once and replayed per token (nb_generate_options.eager_decode). The
 * prefill and the first step run eagerly (the first step also warms up what the capture must not create); a
 * capture that fails leaves the steps eager, with the same results. */
static int64_t generate_graph(nb_module *m, const nb_decoder_ctx *c, const int64_t *ids, int64_t n_prompt,
                              int64_t total, int64_t *out, int64_t cap, const nb_generate_options *o, nb_device dev) {
    int64_t V = c->s.vocab, n = 0, tok = -1;
    float *logits = malloc(sizeof(float) * (size_t)V);
    graph_decode d = {m, logits ? nb_kv_cache_new(m, 1, total) : NULL, NULL, NULL, NULL};
    nb_graph *g = NULL;
    bool ok = d.cache != NULL, more = true;
    if (!logits) nb_set_error(NB_ERR_OOM, "generate: out of host memory");
    if (ok) {
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *prompt = nb_from_data(ids, 2, (int64_t[]){1, n_prompt}, NB_I64);
        ok = last_logits(m, nb_causal_lm_hidden(m, prompt, d.cache), logits, V) && (tok = nb_sample_logits(logits, V, o)) >= 0;
        nb_scope_end(s);
    }
    if (ok) more = emit(o, tok, out, cap, &n, n_prompt, total);
    if (ok && more) {
        int64_t P = n_prompt;
        d.ids = nb_tensor_new_unscoped(2, (int64_t[]){1, 1}, NB_I64, dev);
        d.pos = nb_tensor_new_unscoped(1, (int64_t[]){1}, NB_I64, dev);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *k = nb_arange(0, (double)total, 1, NB_I64);
        if (k && (nb_device_of(k).type != dev.type || nb_device_of(k).index != dev.index)) k = nb_to_device(k, dev);
        if (k) nb_retain(k), d.keys = k;
        nb_scope_end(s);
        ok = d.ids && d.pos && d.keys && !nb_copy_from_host(d.ids, &tok, sizeof tok) &&
             !nb_copy_from_host(d.pos, &P, sizeof P);
    }
    for (bool first = true; ok && more; first = false) {
        if (g) ok = nb_graph_replay(g) == NB_OK;
        else ok = graph_step(&d);
        ok = ok && nb_to_host(d.ids, &tok, sizeof tok) == NB_OK;
        if (ok) more = emit(o, tok, out, cap, &n, n_prompt, total);
        if (ok && more && first) { /* capture the step once it has run eagerly */
            if (nb_graph_capture_begin(dev) == NB_OK) {
                bool stepped = graph_step(&d);
                g = nb_graph_capture_end(dev);
                if (!stepped || !g) nb_graph_free(g), g = NULL;
            }
            nb_clear_error(); /* a failed capture: the steps stay eager */
        }
    }
    nb_graph_free(g);
    nb_release(d.ids), nb_release(d.pos), nb_release(d.keys);
    nb_kv_cache_free(d.cache);
    free(logits);
    return ok ? n : -1;
}

int64_t nb_generate(nb_module *m, const int64_t *ids, int64_t n_prompt, int64_t *out, int64_t cap,
                    nb_generate_options o) {
    const nb_decoder_ctx *c = nb_decoder_ctx_of(m);
    if (!c) return nb_set_error(NB_ERR_INVALID_ARG, "generate: module is %s, not a GPT-2 or Llama model",
                                m ? nb_module_kind(m) : "NULL"), -1;
    if (!ids || n_prompt < 1 || o.max_new_tokens < 0 || cap < 0 || (cap > 0 && !out))
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: needs a prompt of n_prompt >= 1 ids (got %lld), "
                                                "max_new_tokens %lld >= 0 and an output of cap %lld >= 0",
                            (long long)n_prompt, (long long)o.max_new_tokens, (long long)cap), -1;
    if (!nb_generate_options_ok(&o)) return -1;
    for (int64_t i = 0; i < n_prompt; i++)
        if (ids[i] < 0 || ids[i] >= c->s.vocab)
            return nb_set_error(NB_ERR_INVALID_ARG, "generate: prompt id %lld at %lld is outside [0, %lld)",
                                (long long)ids[i], (long long)i, (long long)c->s.vocab), -1;
    int64_t limit = c->s.max_positions;
    if (n_prompt > limit)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: a prompt of %lld tokens exceeds the model's %lld positions",
                            (long long)n_prompt, (long long)limit), -1;
    if (o.max_new_tokens == 0 || n_prompt == limit) return 0;
    int64_t total = o.max_new_tokens < limit - n_prompt ? n_prompt + o.max_new_tokens : limit;
    bool training = nb_module_is_training(m), prev = nb_set_grad_enabled(false);
    nb_module_train(m, false); /* decoding runs in eval mode (no dropout), restored after */
    nb_device dev = nb_device_of(nb_module_get(c->embed, "weight"));
    int64_t n = o.temperature == 0 && !o.eager_decode && nb_graph_supported(dev)
                    ? generate_graph(m, c, ids, n_prompt, total, out, cap, &o, dev)
                    : generate_loop(m, c, ids, n_prompt, total, out, cap, &o);
    nb_module_train(m, training);
    nb_set_grad_enabled(prev);
    return n;
}
