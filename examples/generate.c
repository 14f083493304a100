/* generate.c - continues a prompt with a GPT-2 or Llama checkpoint in
 * Hugging Face's layout: a directory with config.json, model.safetensors
 * (or shards) and the tokenizer as tokenizer.json or vocab.json +
 * merges.txt (gpt_train --save writes all of them; so does transformers'
 * save_pretrained for GPT-2 and Llama models with byte-level BPE).
 *
 *   build/examples/generate --model gpt_train_out --prompt "a small" [flags]
 *
 * Tokens are printed as they come (the KV cache makes each one a forward of
 * one position). --temperature 0 is greedy decoding; otherwise tokens are
 * drawn after top-k and top-p filtering from the seeded generator, so a
 * seed gives the same text. Generation stops at --max-new-tokens, the
 * model's eos_token_id, or the model's longest sequence. Ends with
 *   generated: N tokens, prefill P tokens in X ms, decode Y tokens/s
 * Flags: --model DIR --prompt TEXT --max-new-tokens N (100) --temperature X
 * (0.8) --top-k N (40) --top-p X (1) --seed N (0) --threads N (all cores)
 * --bos 0|1 (prepend the tokenizer's <|begin_of_text|> or <|endoftext|>; 1)
 * --device cpu|cuda|cuda:N --dtype auto|float32|bfloat16|float16 (auto:
 * config.json's torch_dtype, as the checkpoint was saved; bf16 and f16
 * are accepted for the 16-bit names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nabla.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct stream_ctx {
    const nb_bpe *tok;
    int64_t count;
    double first; /* time the first token arrived */
} stream_ctx;

static bool print_token(void *user, int64_t token) {
    stream_ctx *c = user;
    if (c->count++ == 0) c->first = now_seconds();
    if (nb_bpe_is_special(c->tok, (int32_t)token)) return true; /* <|endoftext|> and the like are not text */
    char buf[256];
    int32_t id = (int32_t)token;
    int64_t n = nb_bpe_decode(c->tok, &id, 1, buf, sizeof buf);
    if (n > 0) fwrite(buf, 1, (size_t)(n < (int64_t)sizeof buf ? n : (int64_t)sizeof buf - 1), stdout);
    fflush(stdout);
    return true;
}

static nb_bpe *load_tokenizer(const char *dir) {
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/tokenizer.json", dir);
    if (!access(a, R_OK)) return nb_bpe_load_tokenizer_json(a);
    snprintf(a, sizeof a, "%s/vocab.json", dir);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    return nb_bpe_load_gpt2(a, b);
}

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s --model DIR [--prompt TEXT] [--max-new-tokens N] [--temperature X] [--top-k N] [--top-p X]\n"
            "          [--seed N] [--threads N] [--bos 0|1] [--device cpu|cuda|cuda:N]\n"
            "          [--dtype auto|float32|bfloat16|float16]\n",
            prog);
    return 2;
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = "", *device = "cpu", *dtype = "auto";
    int64_t max_new = 100, top_k = 40;
    double temperature = 0.8, top_p = 1;
    uint64_t seed = 0;
    int threads = 0, bos = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) return usage(argv[0]);
        if (!strcmp(f, "--model")) model_dir = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--prompt")) prompt = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--device")) device = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--dtype")) dtype = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--max-new-tokens")) max_new = strtoll(v, &end, 10);
        else if (!strcmp(f, "--top-k")) top_k = strtoll(v, &end, 10);
        else if (!strcmp(f, "--temperature")) temperature = strtod(v, &end);
        else if (!strcmp(f, "--top-p")) top_p = strtod(v, &end);
        else if (!strcmp(f, "--seed")) seed = strtoull(v, &end, 10);
        else if (!strcmp(f, "--threads")) threads = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--bos")) bos = (int)strtol(v, &end, 10);
        else return usage(argv[0]);
        if (!end || *end || (end == v && *v)) return usage(argv[0]);
    }
    if (!model_dir || max_new < 0 || top_k < 0 || temperature < 0 || top_p < 0 || top_p > 1) return usage(argv[0]);
    nb_dtype dt = !strcmp(dtype, "auto") ? NB_DTYPE_COUNT
                  : !strcmp(dtype, "float32") || !strcmp(dtype, "f32") ? NB_F32
                  : !strcmp(dtype, "bfloat16") || !strcmp(dtype, "bf16") ? NB_BF16
                  : !strcmp(dtype, "float16") || !strcmp(dtype, "f16") ? NB_F16 : NB_DTYPE_COUNT + 1;
    if (dt > NB_DTYPE_COUNT) return usage(argv[0]);
    nb_set_num_threads(threads);
    nb_device d = NB_CPU;
    if (!strncmp(device, "cuda", 4) && (device[4] == 0 || device[4] == ':'))
        d = (nb_device){NB_DEVICE_CUDA, device[4] ? atoi(device + 5) : 0};
    else if (strcmp(device, "cpu")) return usage(argv[0]);
    if (nb_set_default_device(d) != NB_OK) return fprintf(stderr, "generate: --device %s: %s\n", device, nb_last_error()), 1;
    nb_bpe *tok = load_tokenizer(model_dir);
    if (!tok) return fprintf(stderr, "generate: tokenizer: %s\n", nb_last_error()), 1;
    nb_load_report r;
    double t0 = now_seconds();
    nb_module *m = nb_from_pretrained_as(model_dir, dt, &r);
    nb_load_report_free(&r);
    if (!m) return fprintf(stderr, "generate: model: %s\n", nb_last_error()), 1;
    bool llama = nb_llama_get_config(m).vocab_size > 0;
    int64_t eos = llama ? nb_llama_get_config(m).eos_token_id : nb_gpt2_get_config(m).eos_token_id;
    printf("model: %s from %s (%lld parameters in %s, loaded in %.1f s), tokenizer %d tokens\n",
           llama ? "LlamaForCausalLM" : "GPT2LMHeadModel", model_dir, (long long)nb_module_num_params(m),
           nb_dtype_name(llama ? nb_llama_get_config(m).dtype : nb_gpt2_get_config(m).dtype), now_seconds() - t0,
           nb_bpe_vocab_size(tok));
    size_t plen = strlen(prompt);
    int64_t n = nb_bpe_encode(tok, prompt, plen, true, NULL, 0);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n + 2));
    int32_t *pid = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!ids || !pid || nb_bpe_encode(tok, prompt, plen, true, pid, n) != n) return fprintf(stderr, "generate: out of memory\n"), 1;
    int64_t k = 0;
    int32_t b = nb_bpe_token_to_id(tok, "<|begin_of_text|>");
    if (b < 0) b = nb_bpe_token_to_id(tok, "<|endoftext|>");
    if ((bos && b >= 0) || n == 0) ids[k++] = b >= 0 ? b : 0;
    for (int64_t i = 0; i < n; i++) ids[k++] = pid[i];
    nb_generator g = nb_generator_new(seed);
    stream_ctx sc = {.tok = tok};
    printf("%s", prompt);
    fflush(stdout);
    double ts = now_seconds();
    int64_t got = nb_generate(m, ids, k, NULL, 0,
                              (nb_generate_options){.max_new_tokens = max_new, .temperature = temperature, .top_k = top_k,
                                                    .top_p = top_p, .stop_tokens = &eos, .n_stop_tokens = 1, .gen = &g,
                                                    .callback = print_token, .user = &sc});
    double te = now_seconds();
    if (got < 0) return fprintf(stderr, "\ngenerate: %s\n", nb_last_error()), 1;
    printf("\ngenerated: %lld tokens, prefill %lld tokens in %.0f ms, decode %.1f tokens/s\n", (long long)got,
           (long long)k, 1e3 * (sc.first - ts), got > 1 ? (double)(got - 1) / (te - sc.first) : 0.0);
    free(ids), free(pid);
    nb_module_free(m);
    nb_bpe_free(tok);
    return 0;
}
