/* generate.c - autoregressive decoding with a KV cache: one forward over the
 * prompt (prefill) fills the cache, then each new token is one forward of a
 * single position (decode). The next token comes from the last position's
 * logits on the model's device (nb_sample_tokens): argmax (greedy), or a draw
 * after transformers' logits warpers in their order (temperature, top-k,
 * top-p); only the token is read back. Draws come from Philox through the
 * caller's nb_generator (one counter block per token), so a seed fixes the
 * output, and a captured step draws at replay time what the eager step would. */
#include <math.h>

#include "decoder_impl.h"
#include "nb_autograd.h"
#include "nb_ops.h"

/* ---- sampling ------------------------------------------------------------------------------ */

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

/* The rule, as tensor ops on the logits' device with no host reads (so a CUDA graph can hold it): NaN logits become
 * -inf; greedy is the first maximum; sampling sorts each row (descending, ties by ascending id), keeps the top k
 * (ties at the k-th kept) and then the tokens whose sorted mass before them is < top_p, and inverts the kept
 * cumulative mass at u * (kept mass), u one uniform draw per row. */
nb_tensor *nb_sample_tokens(nb_tensor *logits, const nb_generate_options *o) {
    if (!logits || !o) return nb_set_error(NB_ERR_INVALID_ARG, "sample_tokens: needs logits and options"), NULL;
    if (!nb_generate_options_ok(o)) return NULL;
    int nd = nb_dim(logits);
    if (nd < 1 || nb_size(logits, -1) < 1 || !nb_dtype_is_float(nb_dtype_of(logits)))
        return nb_set_error(NB_ERR_INVALID_ARG, "sample_tokens: logits must be floating with a last dim >= 1 (%d dims)",
                            nd), NULL;
    int64_t V = nb_size(logits, -1), shape[NB_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == nd - 1 ? 1 : nb_size(logits, d);
    nb_device dev = nb_device_of(logits);
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin(); /* the [.., V] intermediates die here */
    nb_tensor *l = nb_to_dtype(logits, NB_F32), *tok = NULL;
    if (l && o->temperature > 0 && o->temperature != 1) /* scores / temperature, as TemperatureLogitsWarper */
        l = nb_div(l, nb_full_on(0, NULL, o->temperature, NB_F32, dev));
    l = nb_masked_fill(l, nb_isnan(l), -INFINITY);
    if (o->temperature == 0) {
        tok = nb_argmax(l, -1, true); /* greedy: the first maximum, as torch.argmax */
    } else {
        nb_tensor *v = NULL, *idx = NULL;
        if (l && nb_sort(l, -1, true, true, &v, &idx) == NB_OK) {
            if (o->top_k > 0 && o->top_k < V) /* TopKLogitsWarper: scores below the k-th largest go */
                v = nb_masked_fill(v, nb_lt(v, nb_narrow(v, -1, o->top_k - 1, 1)), -INFINITY);
            /* unnormalised probabilities: the row's largest logit (the first, sorted) subtracted, no softmax pass */
            nb_tensor *p = nb_exp(nb_sub(v, nb_narrow(v, -1, 0, 1)));
            nb_tensor *c = nb_cumsum(p, -1);
            if (o->top_p > 0 && o->top_p < 1) { /* TopPLogitsWarper: keep while the mass before a token is < top_p */
                nb_tensor *parts[2] = {nb_full_on(nd, shape, 0, NB_F32, dev), nb_narrow(c, -1, 0, V - 1)};
                nb_tensor *before = nb_cat(parts, 2, -1); /* the exclusive prefix sums */
                p = nb_masked_fill(p, nb_ge(before, nb_mul_scalar(nb_narrow(c, -1, V - 1, 1), o->top_p)), 0);
                c = nb_cumsum(p, -1);
            }
            nb_tensor *u = nb_rand_on(nd, shape, NB_F32, o->gen, dev);
            /* the position: how many cumulative masses are <= u * total, less than the number kept (rounding can
             * put u * total at the total), at least 0 (a row of NaN keeps none) */
            nb_tensor *at = u && c ? nb_mul(u, nb_narrow(c, -1, V - 1, 1)) : NULL;
            int last = -1;
            nb_tensor *n = nb_sum(nb_le(c, at), &last, 1, true);
            nb_tensor *kept = nb_add_scalar(nb_sum(nb_gt_scalar(p, 0), &last, 1, true), -1);
            tok = nb_gather(idx, -1, nb_clamp_scalar(nb_minimum(n, kept), 0, NAN));
        }
    }
    tok = nb_scope_return(s, tok);
    nb_set_grad_enabled(prev);
    return tok;
}

int64_t nb_sample_logits(const float *logits, int64_t n, const nb_generate_options *o) {
    if (!logits || n < 1 || !o) return nb_set_error(NB_ERR_INVALID_ARG, "sample_logits: needs logits and n >= 1"), -1;
    if (!nb_generate_options_ok(o)) return -1;
    int64_t live = 0;
    for (int64_t i = 0; i < n && !live; i++) live = !isnan(logits[i]) && logits[i] > -INFINITY;
    if (!live) return nb_set_error(NB_ERR_INVALID_ARG, "sample_logits: every logit is -inf or NaN"), -1;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *t = nb_sample_tokens(nb_from_data_on(logits, 1, &n, NB_F32, NB_CPU), o);
    int64_t tok = -1;
    if (t && nb_to_host(t, &tok, sizeof tok) != NB_OK) tok = -1;
    nb_scope_end(s);
    return tok;
}

/* ---- generate ------------------------------------------------------------------------------ */

/* The next token of every sequence from hidden [B, T, H] (its last position), as [B, 1] int64 on the model's
 * device. */
static nb_tensor *next_tokens(nb_module *m, nb_tensor *hidden, const nb_generate_options *o) {
    int64_t T = hidden ? nb_size(hidden, 1) : 0;
    nb_tensor *l = hidden ? nb_causal_lm_head(m, nb_narrow(hidden, 1, T - 1, 1)) : NULL; /* [B, 1, V] */
    return l ? nb_reshape(nb_sample_tokens(l, o), 2, (int64_t[]){nb_size(hidden, 0), 1}) : NULL;
}

bool nb_generate_is_stop(const nb_generate_options *o, int64_t tok) {
    for (int i = 0; i < o->n_stop_tokens; i++)
        if (o->stop_tokens[i] == tok) return true;
    return false;
}

/* The state one decode step reads and advances on the device. */
typedef struct decode_state {
    nb_module *m;
    nb_kv_cache *cache;
    const nb_generate_options *o;
    nb_tensor *ids;  /* [B, 1] int64: the step's input tokens, overwritten with its output */
    nb_tensor *pos;  /* [1] int64: the input tokens' cache position, advanced by the step (static steps only) */
    nb_tensor *keys; /* [total] int64: 0 .. total - 1 (static steps only) */
} decode_state;

/* One decode step, all on the device: the next tokens into ids and, for the static step (the one a graph
 * captures: the KV cache written at pos, attention over the whole cache under a mask), pos + 1 into pos. */
static bool decode_step(decode_state *d) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *h = d->pos ? nb_decoder_step_at(d->m, d->ids, d->cache, d->pos, d->keys)
                          : nb_causal_lm_hidden(d->m, d->ids, d->cache);
    nb_tensor *tok = next_tokens(d->m, h, d->o);
    bool ok = tok && !nb_copy_(d->ids, tok);
    if (ok && d->pos) {
        nb_tensor *next = nb_add_scalar(d->pos, 1);
        ok = next && !nb_copy_(d->pos, next);
    }
    nb_scope_end(s);
    return ok;
}

bool nb_decode_tokens(nb_module *m, nb_kv_cache *cache, const int64_t *ids, int64_t B, int64_t P, int64_t total,
                      const nb_generate_options *o, nb_device dev, bool graphs, int64_t *tok,
                      bool (*emit)(void *ctx, const int64_t *tok), void *ctx) {
    decode_state d = {m, cache, o, nb_tensor_new_unscoped(2, (int64_t[]){B, 1}, NB_I64, dev), NULL, NULL};
    nb_graph *g = NULL;
    bool ok = d.ids != NULL, more = true;
    size_t bytes = sizeof(int64_t) * (size_t)B;
    if (ok) {
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *prompt = nb_from_data(ids, 2, (int64_t[]){B, P}, NB_I64);
        nb_tensor *t = next_tokens(m, nb_causal_lm_hidden(m, prompt, cache), o);
        ok = t && !nb_copy_(d.ids, t) && nb_to_host(d.ids, tok, bytes) == NB_OK;
        nb_scope_end(s);
    }
    if (ok) more = emit(ctx, tok);
    if (ok && more && graphs) {
        d.pos = nb_tensor_new_unscoped(1, (int64_t[]){1}, NB_I64, dev);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *k = nb_arange(0, (double)total, 1, NB_I64);
        if (k && (nb_device_of(k).type != dev.type || nb_device_of(k).index != dev.index)) k = nb_to_device(k, dev);
        if (k) nb_retain(k), d.keys = k;
        nb_scope_end(s);
        ok = d.pos && d.keys && !nb_copy_from_host(d.pos, &P, sizeof P);
    }
    for (bool first = true; ok && more; first = false) {
        ok = (g ? nb_graph_replay(g) == NB_OK : decode_step(&d)) && nb_to_host(d.ids, tok, bytes) == NB_OK;
        if (ok) more = emit(ctx, tok);
        if (ok && more && first && graphs) { /* capture the step once it has run eagerly */
            if (nb_graph_capture_begin(dev) == NB_OK) {
                bool stepped = decode_step(&d);
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

/* One sequence's emitting: out, the callback, the stops. */
typedef struct single_run {
    const nb_generate_options *o;
    int64_t *out, cap, n, n_prompt, total;
} single_run;

static bool emit_one(void *ctx, const int64_t *tok) {
    single_run *r = ctx;
    const nb_generate_options *o = r->o;
    if (r->n < r->cap) r->out[r->n] = *tok;
    r->n++;
    return !((o->callback && !o->callback(o->user, *tok)) || nb_generate_is_stop(o, *tok) ||
             r->n == o->max_new_tokens || r->n_prompt + r->n >= r->total);
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
    single_run r = {&o, out, cap, 0, n_prompt, total};
    nb_kv_cache *cache = nb_kv_cache_new(m, 1, total);
    int64_t tok;
    bool ok = cache && nb_decode_tokens(m, cache, ids, 1, n_prompt, total, &o, dev,
                                        !o.eager_decode && nb_graph_supported(dev), &tok, emit_one, &r);
    nb_kv_cache_free(cache);
    int64_t n = ok ? r.n : -1;
    nb_module_train(m, training);
    nb_set_grad_enabled(prev);
    return n;
}
