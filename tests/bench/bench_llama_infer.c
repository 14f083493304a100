/* bench_llama_infer.c - inference speed of a Llama model with random
 * weights: prefill tokens/s at given context lengths (one forward over the
 * whole prompt into a KV cache, through the fused attention, so memory
 * stays linear in the context) and decode tokens/s at batch 1 (one token
 * per forward, greedy unless --temperature is given). The `llama` workload of tests/bench/llama_infer_ref.py,
 * which runs the same shapes in PyTorch (SDPA).
 *
 *   bench_llama_infer [--config 3.2-1b|tiny] [--contexts 128,4096,100000]
 *                     [--decode N] [--device cpu|cuda|cuda:N] [--threads N]
 *                     [--dtype float32|bfloat16|float16] [--warmup N] [--batch B]
 *                     [--temperature X] [--top-k N] [--top-p X]
 * --config 3.2-1b is Llama 3.2 1B's config.json (nb_llama_config_3_2_1b);
 * tiny is a 2-layer model for a quick check. --dtype is the model's
 * (parameters and KV cache; float32 by default). Decode runs through
 * nb_generate (greedy, or sampled with --temperature X > 0 and --top-k /
 * --top-p, drawn from a generator seeded 0): on CUDA a captured step replayed per token, or op
 * by op with --eager-decode 1; --profile 1 adds the kernel-slot profile
 * (nb_profiler_report) of a prefill and 32 eager decode steps. --warmup N
 * (default 1) untimed prefills run before the timed one (cuDNN compiles its
 * attention kernel for a new shape on first use). --batch B > 1 decodes B
 * prompts of the context's length together (nb_generate_batch; the prefill
 * figure stays batch 1's) and counts B tokens per step. --bitnet 1 builds
 * the model with BitLinear projections and packs them (nb_module_bitnet_pack:
 * 2-bit weights, int8 activations); --int8 1 converts its Linear layers to
 * int8 weight-only (nb_module_int8_weight_only; the tied LM head stays in
 * --dtype). Prints per
 * context:
 *   workload=llama config=... device=... context=C prefill_ms=... prefill_tokens_per_s=...
 *     decode_tokens=N decode_tokens_per_s=... prefill_peak_gib=... peak_gib=...
 * (the device's peak allocation after the prefill, and after decoding too)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nabla.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The argmax of the last position's logits of hidden [1, T, H]. */
static int64_t next_token(nb_module *m, nb_tensor *hidden) {
    int64_t T = nb_size(hidden, 1), tok = -1;
    nb_tensor *a = nb_argmax(nb_to_dtype(nb_causal_lm_head(m, nb_narrow(hidden, 1, T - 1, 1)), NB_F32), -1, false);
    if (!a || nb_to_host(a, &tok, sizeof tok)) return -1;
    return tok;
}

/* When nb_generate hands over its third and its last token: the timed
 * tokens come after the first steps (the first is the prefill's; after
 * the second, generate captures its step on CUDA). */
typedef struct timing {
    double first, last;
    int n;
} timing;

static bool on_token(void *user, int64_t tok) {
    timing *t = user;
    (void)tok;
    t->last = now_ms();
    if (++t->n == 3) t->first = t->last;
    return true;
}

/* nb_generate_batch over B prompts of ids[0..C), prompt b rotated by b
 * when rotate (else B copies of one prompt); the largest count, or -1. */
static int64_t generate_batch(nb_module *m, const int64_t *ids, int64_t C, int B, bool rotate, nb_generate_options go,
                              nb_batch_token_callback cb, void *user) {
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(B * C)), *lens = malloc(sizeof(int64_t) * (size_t)B);
    const int64_t **ps = malloc(sizeof(int64_t *) * (size_t)B);
    int64_t *n_new = malloc(sizeof(int64_t) * (size_t)B), got = -1;
    if (all && lens && ps && n_new) {
        for (int b = 0; b < B; b++) {
            for (int64_t i = 0; i < C; i++) all[b * C + i] = ids[(i + (rotate ? b : 0)) % C];
            ps[b] = all + b * C, lens[b] = C;
        }
        got = nb_generate_batch(m, B, ps, lens, NULL, 0, n_new, cb, user, go);
    }
    free(all), free(lens), free(ps), free(n_new);
    return got;
}

/* nb_generate_batch's callback: sequence 0's tokens time the steps. */
static bool on_seq_token(void *user, int64_t seq, int64_t tok) {
    return seq != 0 || on_token(user, tok);
}

int main(int argc, char **argv) {
    const char *config = "3.2-1b", *contexts = "128,4096", *device = "cpu", *dtype = "float32";
    int decode = 32, threads = 0, eager = 0, profile = 0, warmup = 1, batch = 1, bitnet = 0, int8 = 0, top_k = 0;
    double temperature = 0, top_p = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--config")) config = argv[i + 1];
        else if (!strcmp(argv[i], "--contexts")) contexts = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--decode")) decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
        else if (!strcmp(argv[i], "--eager-decode")) eager = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--profile")) profile = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bitnet")) bitnet = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--int8")) int8 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--temperature")) temperature = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--top-k")) top_k = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--top-p")) top_p = atof(argv[i + 1]);
        else return fprintf(stderr, "usage: %s [--config 3.2-1b|tiny] [--contexts A,B,..] [--decode N] "
                                    "[--device cpu|cuda|cuda:N] [--threads N] [--dtype float32|bfloat16|float16] [--eager-decode 0|1] [--profile 0|1] [--warmup N] [--batch B] [--bitnet 0|1] [--int8 0|1] [--temperature X] [--top-k N] [--top-p X]\n",
                            argv[0]), 2;
    }
    if (batch < 1) batch = 1;
    nb_set_num_threads(threads);
    nb_device dev = NB_CPU;
    if (!strncmp(device, "cuda", 4)) dev = (nb_device){NB_DEVICE_CUDA, device[4] == ':' ? atoi(device + 5) : 0};
    if (nb_set_default_device(dev) != NB_OK) return fprintf(stderr, "bench_llama_infer: %s\n", nb_last_error()), 1;
    nb_manual_seed(0);
    nb_llama_config c = nb_llama_config_3_2_1b();
    c.dtype = !strcmp(dtype, "bfloat16") ? NB_BF16 : !strcmp(dtype, "float16") ? NB_F16 : NB_F32;
    if (c.dtype == NB_F32 && strcmp(dtype, "float32")) return fprintf(stderr, "bench_llama_infer: --dtype %s\n", dtype), 2;
    if (!strcmp(config, "tiny")) {
        c.hidden_size = 256, c.intermediate_size = 1024, c.num_hidden_layers = 2, c.num_attention_heads = 8;
        c.num_key_value_heads = 2, c.head_dim = 32, c.vocab_size = 4096;
    } else if (strcmp(config, "3.2-1b")) return fprintf(stderr, "bench_llama_infer: unknown --config %s\n", config), 2;
    c.bitlinear = bitnet != 0;
    nb_module *m = nb_llama(c);
    if (!m || (bitnet && nb_module_bitnet_pack(m) != NB_OK) || (int8 && nb_module_int8_weight_only(m) != NB_OK))
        return fprintf(stderr, "bench_llama_infer: %s\n", nb_last_error()), 1;
    nb_module_train(m, false);
    printf("llama %s%s: %lld parameters, %d layers, %lld heads over %lld kv heads of %lld, %s, %d threads\n", config,
           bitnet ? " (BitNet b1.58, packed)" : int8 ? " (int8 weight-only)" : "", (long long)nb_module_num_params(m), c.num_hidden_layers, (long long)c.num_attention_heads,
           (long long)c.num_key_value_heads, (long long)c.head_dim, nb_dtype_name(c.dtype), nb_get_num_threads());
    bool prev = nb_set_grad_enabled(false);
    int rc = 0;
    for (const char *p = contexts; rc == 0 && *p;) {
        int64_t C = strtoll(p, (char **)&p, 10);
        if (*p == ',') p++;
        nb_kv_cache *cache = NULL; /* made after the warm-up's, so that the two never coexist (peak memory) */
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)(C > 0 ? C : 1));
        if (C < 1 || !ids) {
            fprintf(stderr, "bench_llama_infer: context %lld: %s\n", (long long)C, ids ? "must be >= 1" : "out of memory");
            free(ids);
            rc = 1;
            break;
        }
        uint64_t x = 88172645463325252ull;
        for (int64_t i = 0; i < C; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, ids[i] = (int64_t)(x % (uint64_t)c.vocab_size);
        nb_memory_reset_peak(dev);
        for (int w = 0; w < warmup && rc == 0; w++) {
            nb_kv_cache *wc = nb_kv_cache_new(m, 1, C + decode);
            nb_scope *s = nb_scope_begin();
            if (!wc || next_token(m, nb_causal_lm_hidden(m, nb_from_data(ids, 2, (int64_t[]){1, C}, NB_I64), wc)) < 0)
                rc = 1, fprintf(stderr, "bench_llama_infer: context %lld: %s\n", (long long)C, nb_last_error());
            nb_scope_end(s);
            nb_kv_cache_free(wc);
        }
        if (rc || !(cache = nb_kv_cache_new(m, 1, C + decode))) {
            if (!rc) fprintf(stderr, "bench_llama_infer: context %lld: %s\n", (long long)C, nb_last_error());
            free(ids);
            rc = 1;
            break;
        }
        nb_scope *s = nb_scope_begin();
        double t0 = now_ms();
        int64_t tok = next_token(m, nb_causal_lm_hidden(m, nb_from_data(ids, 2, (int64_t[]){1, C}, NB_I64), cache));
        double t1 = now_ms(), prefill_ms = t1 - t0;
        double prefill_peak = (double)nb_memory_stats_get(dev).peak_allocated / (1 << 30);
        nb_scope_end(s);
        nb_kv_cache_free(cache);
        cache = NULL;
        /* decode: nb_generate's loop (its own prefill, then `decode` timed tokens after the third) */
        timing tm = {0};
        nb_generator gen = nb_generator_new(0);
        nb_generate_options go = {.max_new_tokens = decode + 3, .temperature = temperature, .top_k = top_k,
                                  .top_p = top_p, .gen = &gen, .eager_decode = eager != 0};
        int64_t got = -1;
        if (tok >= 0 && batch == 1) {
            go.callback = on_token, go.user = &tm;
            got = nb_generate(m, ids, C, NULL, 0, go);
        } else if (tok >= 0) { /* B prompts: ids rotated by b */
            got = generate_batch(m, ids, C, batch, true, go, on_seq_token, &tm);
        }
        if (got != decode + 3) tok = -1;
        t1 = tm.first;
        double t2 = tm.last;
        if (tok < 0) {
            fprintf(stderr, "bench_llama_infer: context %lld: %s\n", (long long)C, nb_last_error());
            rc = 1;
        } else
            printf("workload=llama config=%s dtype=%s device=%s context=%lld batch=%d warmup=%d prefill_ms=%.1f prefill_tokens_per_s=%.0f "
                   "decode=%s temperature=%g top_k=%d top_p=%g decode_tokens=%d decode_tokens_per_s=%.2f prefill_peak_gib=%.2f "
                   "peak_gib=%.2f\n",
                   config, nb_dtype_name(c.dtype), device, (long long)C, batch, warmup, prefill_ms, (double)C / (prefill_ms * 1e-3),
                   eager ? "eager" : "generate", temperature, top_k, top_p, decode,
                   batch * decode / ((t2 - t1) * 1e-3), prefill_peak, (double)nb_memory_stats_get(dev).peak_allocated / (1 << 30));
        fflush(stdout);
        if (profile && tok >= 0) { /* where a decode step's device time goes: 32 eager steps after the prefill */
            nb_generate_options po = go;
            po.max_new_tokens = 33, po.eager_decode = true, po.callback = NULL, po.user = NULL;
            nb_profiler_start();
            if (batch == 1) nb_generate(m, ids, C, NULL, 0, po);
            else generate_batch(m, ids, C, batch, false, po, NULL, NULL); /* the same prompt B times */
            nb_profiler_report(stdout);
        }
        nb_kv_cache_free(cache);
        free(ids);
    }
    nb_set_grad_enabled(prev);
    nb_module_free(m);
    return rc;
}
