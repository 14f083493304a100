/* gpt_train.c - trains a small GPT-2 (or Llama) language model from scratch
 * on the English glosses of WordNet (data/fetch_wordnet.sh), reports the
 * validation loss and perplexity against a unigram model's, saves the model
 * in Hugging Face's layout and ends by sampling a few lines.
 *
 *   data/fetch_wordnet.sh && build/examples/gpt_train [flags]
 *
 * Flow: a byte-level BPE vocabulary (GPT-2's pre-tokenizer, <|endoftext|>
 * last) is trained on train.txt, or loaded from the copy cached next to the
 * corpus (bpe-<size>/vocab.json, merges.txt); each line of train.txt and
 * eval.txt becomes its tokens followed by <|endoftext|>, all in one stream
 * per split, cached as a token shard in llm.c's .bin layout
 * (bpe-<size>/train.bin, eval.bin; nb_bpe_encode_file) and read from it. Training draws B windows of T+1 tokens at random positions
 * (a seeded xorshift) and minimises the next-token cross-entropy with AdamW
 * (betas 0.9/0.95, weight decay 0.1 on matrices, gradients clipped to norm
 * 1), the learning rate warmed up linearly for --warmup steps and then
 * cosine-decayed to 10% at the last step. --minutes stops training early so
 * the whole run stays within its budget. Validation covers eval.txt's
 * stream in consecutive windows of T+1 (every token predicted once);
 * the unigram baseline predicts every token with its training frequency
 * (add-one smoothed). Prints
 *   step N: loss=X lr=Y tokens/s=Z
 *   eval step N: val_loss=X val_ppl=Y
 * and ends with
 *   final: val_loss=X val_ppl=Y unigram_ppl=Z ppl_ratio=R steps=N seconds=S
 * then writes --save DIR (config.json, model.safetensors, vocab.json,
 * merges.txt, tokenizer.json) and prints --samples lines of text sampled
 * with temperature 0.8 and top-k 40. Same seed and thread count give the
 * same numbers (tokens/s and seconds aside) unless --minutes cuts the run.
 * --bitlinear (with --arch llama) trains BitNet b1.58: BitLinear q/k/v/o and
 * gate/up/down projections (nb_llama_config.bitlinear).
 * A progress bar over the steps goes to stderr (--no-progress: none);
 * --log-dir DIR writes the logged numbers and the gradient norm as
 * TensorBoard scalars there (tools/nabla-plot DIR draws them); --onnx PATH
 * exports the trained GPT-2 as ONNX (input_ids [batch, sequence]).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nabla.h"

typedef struct args {
    const char *arch, *data, *save, *device, *log_dir, *onnx;
    bool no_progress, bitlinear;
    int layers, samples, threads;
    int64_t hidden, heads, seq, batch, vocab, steps, warmup, log_every, eval_every;
    double lr, minutes, dropout;
    uint64_t seed;
} args;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--arch gpt2|llama] [--layers N] [--hidden N] [--heads N] [--seq N] [--batch-size N]\n"
            "          [--vocab-size N] [--steps N] [--warmup N] [--lr X] [--dropout X] [--minutes X]\n"
            "          [--log-every N] [--eval-every N] [--samples N] [--seed N] [--threads N] [--data DIR]\n"
            "          [--save DIR] [--device cpu|cuda|cuda:N] [--log-dir DIR] [--no-progress] [--onnx PATH]\n"
            "          [--bitlinear] (with --arch llama)\n",
            prog);
    return 2;
}

static int parse(int argc, char **argv, args *a) {
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(f, "--no-progress") || !strcmp(f, "--bitlinear")) { /* bare flags */
            *(f[2] == 'n' ? &a->no_progress : &a->bitlinear) = true, i--;
            continue;
        }
        if (!v) return usage(argv[0]);
        if (!strcmp(f, "--arch")) a->arch = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--layers")) a->layers = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--hidden")) a->hidden = strtoll(v, &end, 10);
        else if (!strcmp(f, "--heads")) a->heads = strtoll(v, &end, 10);
        else if (!strcmp(f, "--seq")) a->seq = strtoll(v, &end, 10);
        else if (!strcmp(f, "--batch-size")) a->batch = strtoll(v, &end, 10);
        else if (!strcmp(f, "--vocab-size")) a->vocab = strtoll(v, &end, 10);
        else if (!strcmp(f, "--steps")) a->steps = strtoll(v, &end, 10);
        else if (!strcmp(f, "--warmup")) a->warmup = strtoll(v, &end, 10);
        else if (!strcmp(f, "--log-every")) a->log_every = strtoll(v, &end, 10);
        else if (!strcmp(f, "--eval-every")) a->eval_every = strtoll(v, &end, 10);
        else if (!strcmp(f, "--samples")) a->samples = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--lr")) a->lr = strtod(v, &end);
        else if (!strcmp(f, "--dropout")) a->dropout = strtod(v, &end);
        else if (!strcmp(f, "--minutes")) a->minutes = strtod(v, &end);
        else if (!strcmp(f, "--seed")) a->seed = strtoull(v, &end, 10);
        else if (!strcmp(f, "--threads")) a->threads = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--data")) a->data = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--save")) a->save = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--device")) a->device = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--log-dir")) a->log_dir = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--onnx")) a->onnx = v, end = (char *)v + strlen(v);
        else return usage(argv[0]);
        if (!end || *end || end == v) return usage(argv[0]);
    }
    if (a->bitlinear && strcmp(a->arch, "llama")) {
        fprintf(stderr, "%s: --bitlinear: only --arch llama has BitLinear layers (GPT-2's are Conv1D)\n", argv[0]);
        return 2;
    }
    if (a->onnx && strcmp(a->arch, "gpt2")) {
        fprintf(stderr, "%s: --onnx: only --arch gpt2 has an ONNX translation\n", argv[0]);
        return 2;
    }
    bool ok = (!strcmp(a->arch, "gpt2") || !strcmp(a->arch, "llama")) && a->layers >= 1 && a->hidden >= 1 &&
              a->heads >= 1 && a->seq >= 2 && a->batch >= 1 && a->vocab >= 300 && a->vocab <= INT32_MAX &&
              a->steps >= 1 && a->warmup >= 0 && a->warmup < a->steps && a->log_every >= 1 && a->eval_every >= 1 &&
              a->samples >= 0 && a->lr > 0 && a->minutes >= 0 && a->dropout >= 0 && a->dropout < 1 && a->threads >= 0;
    return ok ? 0 : usage(argv[0]);
}

/* "cpu", "cuda" or "cuda:N" -> the default device (fails cleanly without that backend). */
static bool set_device(const char *s) {
    nb_device d = NB_CPU;
    if (!strncmp(s, "cuda", 4) && (s[4] == 0 || s[4] == ':')) d = (nb_device){NB_DEVICE_CUDA, s[4] ? atoi(s + 5) : 0};
    else if (strcmp(s, "cpu")) return fprintf(stderr, "gpt_train: --device %s is not cpu, cuda or cuda:N\n", s), false;
    if (nb_set_default_device(d) != NB_OK) return fprintf(stderr, "gpt_train: --device %s: %s\n", s, nb_last_error()), false;
    return true;
}

/* lr: linear warmup to a->lr, then cosine decay to a->lr / 10 at the last step. */
static double lr_at(const args *a, int64_t step) {
    if (step <= a->warmup) return a->lr * (double)step / (double)(a->warmup ? a->warmup : 1);
    double t = (double)(step - a->warmup) / (double)(a->steps - a->warmup);
    return a->lr * (0.1 + 0.9 * 0.5 * (1 + cos(M_PI * t)));
}

/* ---- data ---------------------------------------------------------------------------------------- */

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The BPE vocabulary cached as dir/bpe-<size>/, trained on train.txt the first time. */
static nb_bpe *vocabulary(const char *dir, const char *train, int64_t size) {
    char sub[4200], v[4300], m[4300];
    snprintf(sub, sizeof sub, "%s/bpe-%lld", dir, (long long)size);
    snprintf(v, sizeof v, "%s/vocab.json", sub);
    snprintf(m, sizeof m, "%s/merges.txt", sub);
    if (file_exists(v) && file_exists(m)) {
        nb_bpe *t = nb_bpe_load_gpt2(v, m);
        if (t) printf("vocabulary: %d byte-level BPE tokens from %s\n", nb_bpe_vocab_size(t), sub);
        return t;
    }
    double t0 = now_seconds();
    const char *eot[] = {"<|endoftext|>"};
    nb_bpe *t = nb_bpe_train(train, (int32_t)size, (nb_bpe_train_options){.special_tokens = eot, .n_special_tokens = 1});
    if (!t) return NULL;
    printf("vocabulary: %d byte-level BPE tokens trained on %s in %.1f s", nb_bpe_vocab_size(t), train, now_seconds() - t0);
    mkdir(sub, 0777);
    for (int i = 0; i < 2; i++) { /* token shards of an earlier vocabulary */
        char shard[4300];
        snprintf(shard, sizeof shard, "%s/%s.bin", sub, i ? "eval" : "train");
        unlink(shard);
    }
    if (nb_bpe_save_gpt2(t, v, m) == NB_OK) printf(", saved to %s\n", sub);
    else printf(" (not cached: %s)\n", nb_last_error());
    return t;
}

typedef struct stream {
    int32_t *ids;
    int64_t n, cap;
} stream;

/* The split's token stream (every line of <split>.txt as its tokens then
 * <|endoftext|>) from the token shard dir/bpe-<size>/<split>.bin, which
 * nb_bpe_encode_file writes the first time (llm.c's .bin layout). */
static bool load_tokens(const nb_bpe *tok, const char *dir, int64_t size, const char *split, stream *s) {
    char text[4200], shard[4300];
    snprintf(text, sizeof text, "%s/%s.txt", dir, split);
    snprintf(shard, sizeof shard, "%s/bpe-%lld/%s.bin", dir, (long long)size, split);
    struct stat ts, ss;
    if (stat(shard, &ss) || (stat(text, &ts) == 0 && ts.st_mtime > ss.st_mtime)) { /* none yet, or the text changed */
        double t0 = now_seconds();
        if (nb_bpe_encode_file(tok, text, shard, nb_bpe_vocab_size(tok) > 65536) < 0) {
            fprintf(stderr, "gpt_train: %s\n", nb_last_error());
            return false;
        }
        printf("tokens: %s written in %.1f s\n", shard, now_seconds() - t0);
    }
    nb_token_shard *t = nb_token_shard_open(shard);
    int64_t n = t ? nb_token_shard_len(t) : -1, chunk[4096];
    s->ids = n > 0 ? malloc(sizeof *s->ids * (size_t)n) : NULL;
    bool ok = s->ids != NULL;
    for (int64_t i = 0; ok && i < n; i += 4096) {
        int64_t k = n - i < 4096 ? n - i : 4096;
        ok = nb_token_shard_read(t, i, k, chunk) == NB_OK;
        for (int64_t j = 0; ok && j < k; j++) s->ids[i + j] = (int32_t)chunk[j];
    }
    nb_token_shard_close(t);
    if (!ok) fprintf(stderr, "gpt_train: %s: %s\n", shard, nb_last_error());
    s->n = s->cap = ok ? n : 0;
    return ok;
}

static uint64_t xorshift(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* ---- training and evaluation ------------------------------------------------------------------------ */

/* Mean cross-entropy (nats) of predicting ids[i+1] from ids[..i] over
 * windows starting at starts[0..B). */
static nb_tensor *batch_loss(nb_module *m, const stream *s, const int64_t *starts, int64_t B, int64_t T, int64_t V,
                             int64_t *x, int64_t *y, nb_reduction red) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) x[b * T + t] = s->ids[starts[b] + t], y[b * T + t] = s->ids[starts[b] + t + 1];
    nb_tensor *xi = nb_from_data(x, 2, (int64_t[]){B, T}, NB_I64), *yi = nb_from_data(y, 1, (int64_t[]){B * T}, NB_I64);
    nb_device d = nb_default_device();
    if (d.type != NB_DEVICE_CPU) xi = nb_to_device(xi, d), yi = nb_to_device(yi, d);
    nb_tensor *logits = nb_forward(m, xi);
    return nb_cross_entropy_ex(nb_reshape(logits, 2, (int64_t[]){B * T, V}), yi,
                               (nb_cross_entropy_options){.ignore_index = -100, .reduction = red});
}

/* Validation loss over the eval stream in consecutive windows (at most max_windows). */
static double evaluate(nb_module *m, const stream *ev, const args *a, int64_t V, int64_t max_windows, int64_t *x,
                       int64_t *y) {
    int64_t T = a->seq, windows = (ev->n - 1) / T, B = a->batch;
    if (max_windows > 0 && windows > max_windows) windows = max_windows;
    int64_t *starts = malloc(sizeof(int64_t) * (size_t)B);
    double total = 0;
    int64_t count = 0;
    bool prev = nb_set_grad_enabled(false);
    nb_module_train(m, false);
    for (int64_t w0 = 0; starts && w0 < windows; w0 += B) {
        int64_t n = windows - w0 < B ? windows - w0 : B;
        for (int64_t i = 0; i < n; i++) starts[i] = (w0 + i) * T;
        nb_scope *s = nb_scope_begin();
        nb_tensor *l = batch_loss(m, ev, starts, n, T, V, x, y, NB_REDUCTION_SUM);
        total += l ? nb_item(l) : NAN, count += n * T;
        nb_scope_end(s);
    }
    nb_module_train(m, true);
    nb_set_grad_enabled(prev);
    free(starts);
    return total / (double)(count ? count : 1);
}

/* exp(mean -log p(token)) with p the add-one smoothed training frequency. */
static double unigram_ppl(const stream *tr, const stream *ev, int64_t V) {
    int64_t *c = calloc((size_t)V, sizeof *c);
    if (!c) return NAN;
    for (int64_t i = 0; i < tr->n; i++) c[tr->ids[i]]++;
    double nll = 0;
    for (int64_t i = 1; i < ev->n; i++) nll -= log((double)(c[ev->ids[i]] + 1) / (double)(tr->n + V));
    free(c);
    return exp(nll / (double)(ev->n - 1));
}

static nb_optimizer *make_optimizer(nb_module *m, const args *a, nb_optimizer **nodecay) {
    int n = nb_module_parameters(m, NULL, 0);
    nb_named_tensor *p = malloc(sizeof *p * (size_t)n);
    nb_tensor **dec = malloc(sizeof *dec * (size_t)n), **nod = malloc(sizeof *nod * (size_t)n);
    nb_optimizer *o = NULL;
    int nd = 0, nn = 0;
    if (p && dec && nod) {
        nb_module_parameters(m, p, n);
        for (int i = 0; i < n; i++) {
            if (nb_dim(p[i].tensor) >= 2) dec[nd++] = p[i].tensor;
            else nod[nn++] = p[i].tensor;
        }
        nb_adam_options opt = {.lr = a->lr, .betas = {0.9, 0.95}, .eps = 1e-8, .weight_decay = 0.1};
        o = nb_adamw_params(dec, nd, opt);
        opt.weight_decay = NB_ZERO;
        *nodecay = o ? nb_adamw_params(nod, nn, opt) : NULL;
    }
    free(p), free(dec), free(nod);
    return o && *nodecay ? o : NULL;
}

typedef struct result {
    double val_loss;
    int64_t steps;
} result;

/* tb (may be NULL): the --log-dir writer; train/loss, train/lr,
 * train/tokens_per_sec and train/grad_norm (before clipping) at each
 * --log-every point, eval/val_loss and eval/val_ppl at each evaluation. */
static bool train(nb_module *m, const stream *tr, const stream *ev, const args *a, int64_t V, double t0,
                  nb_summary_writer *tb, result *r) {
    int64_t T = a->seq, B = a->batch;
    int64_t *starts = malloc(sizeof(int64_t) * (size_t)B), *x = malloc(sizeof(int64_t) * (size_t)(B * T));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)(B * T));
    nb_optimizer *nodecay = NULL, *opt = starts && x && y ? make_optimizer(m, a, &nodecay) : NULL;
    bool ok = opt != NULL;
    uint64_t rng = a->seed * 0x9E3779B97F4A7C15ull + 0x1234567;
    double iv_loss = 0, t_iv = now_seconds();
    int64_t iv_steps = 0;
    r->steps = 0;
    nb_progress *bar = a->no_progress ? NULL : nb_progress_new(a->steps, &(nb_progress_options){.desc = "train", .unit = "step"});
    for (int64_t step = 1; ok && step <= a->steps; step++) {
        for (int64_t b = 0; b < B; b++) starts[b] = (int64_t)(xorshift(&rng) % (uint64_t)(tr->n - T - 1));
        nb_scope *s = nb_scope_begin();
        nb_tensor *loss = batch_loss(m, tr, starts, B, T, V, x, y, NB_REDUCTION_MEAN);
        nb_optimizer_zero_grad(opt), nb_optimizer_zero_grad(nodecay);
        double lr = lr_at(a, step), norm = 0;
        ok = loss && nb_backward(loss) == NB_OK && nb_clip_grad_norm_module_(m, 1.0, 2.0, &norm) == NB_OK &&
             nb_optimizer_set_lr(opt, lr) == NB_OK && nb_optimizer_set_lr(nodecay, lr) == NB_OK &&
             nb_optimizer_step(opt) == NB_OK && nb_optimizer_step(nodecay) == NB_OK;
        double l = ok ? nb_item(loss) : 0;
        if (ok) iv_loss += l, iv_steps++, r->steps = step;
        nb_scope_end(s);
        nb_progress_set_postfix(bar, "loss=%.4f", l);
        nb_progress_update(bar, 1);
        bool out_of_time = a->minutes > 0 && now_seconds() - t0 > 60 * a->minutes;
        if (ok && (step % a->log_every == 0 || step == a->steps || out_of_time)) {
            double mean = iv_loss / (double)iv_steps, tps = (double)(iv_steps * B * T) / (now_seconds() - t_iv);
            nb_progress_clear(bar); /* the line goes where the bar was */
            printf("step %lld: loss=%.4f lr=%.2e tokens/s=%.0f\n", (long long)step, mean, lr, tps);
            fflush(stdout);
            iv_loss = 0, iv_steps = 0;
            ok = !tb || (!nb_summary_writer_add_scalar(tb, "train/loss", mean, step) &&
                         !nb_summary_writer_add_scalar(tb, "train/lr", lr, step) &&
                         !nb_summary_writer_add_scalar(tb, "train/tokens_per_sec", tps, step) &&
                         !nb_summary_writer_add_scalar(tb, "train/grad_norm", norm, step));
        }
        if (ok && step % a->eval_every == 0 && step != a->steps && !out_of_time) {
            double vl = evaluate(m, ev, a, V, 4 * B, x, y);
            nb_progress_clear(bar);
            printf("eval step %lld: val_loss=%.4f val_ppl=%.2f (first %lld windows)\n", (long long)step, vl, exp(vl),
                   (long long)(4 * B));
            fflush(stdout);
            ok = !tb || (!nb_summary_writer_add_scalar(tb, "eval/val_loss", vl, step) &&
                         !nb_summary_writer_add_scalar(tb, "eval/val_ppl", exp(vl), step) && !nb_summary_writer_flush(tb));
        }
        if (step % a->log_every == 0 || (step % a->eval_every == 0)) t_iv = now_seconds();
        if (out_of_time) {
            nb_progress_clear(bar);
            printf("stopping after step %lld: the --minutes %g budget is spent\n", (long long)step, a->minutes);
            break;
        }
    }
    nb_progress_close(bar);
    if (ok) r->val_loss = evaluate(m, ev, a, V, 0, x, y);
    if (ok && tb)
        ok = !nb_summary_writer_add_scalar(tb, "eval/val_loss", r->val_loss, r->steps) &&
             !nb_summary_writer_add_scalar(tb, "eval/val_ppl", exp(r->val_loss), r->steps);
    nb_optimizer_free(opt), nb_optimizer_free(nodecay);
    free(starts), free(x), free(y);
    return ok;
}

/* ---- sampling, saving ---------------------------------------------------------------------------------- */

static void sample_lines(nb_module *m, const nb_bpe *tok, const args *a) {
    int32_t eot = nb_bpe_token_to_id(tok, "<|endoftext|>");
    const char *prompts[] = {"a", "the", "an", "any", "of", "to"};
    nb_generator g = nb_generator_new(a->seed + 7);
    for (int i = 0; i < a->samples; i++) {
        const char *p = prompts[i % 6];
        int32_t pid[16];
        int64_t n = nb_bpe_encode(tok, p, strlen(p), false, pid, 16), ids[160], out[128];
        ids[0] = eot;
        for (int64_t k = 0; k < n; k++) ids[k + 1] = pid[k];
        int64_t stop = eot;
        int64_t got = nb_generate(m, ids, n + 1, out, 128,
                                  (nb_generate_options){.max_new_tokens = a->seq - n - 1 < 64 ? a->seq - n - 1 : 64,
                                                        .temperature = 0.8, .top_k = 40, .stop_tokens = &stop,
                                                        .n_stop_tokens = 1, .gen = &g});
        if (got < 0) {
            fprintf(stderr, "gpt_train: sampling: %s\n", nb_last_error());
            return;
        }
        int32_t all[160];
        for (int64_t k = 0; k < n; k++) all[k] = pid[k];
        int64_t len = n;
        for (int64_t k = 0; k < got && out[k] != eot; k++) all[len++] = (int32_t)out[k];
        char text[2048];
        nb_bpe_decode(tok, all, len, text, sizeof text);
        printf("sample %d: %s\n", i + 1, text);
    }
}

static bool save_all(nb_module *m, const nb_bpe *tok, const char *dir) {
    char v[4200], mg[4200], tj[4200];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(mg, sizeof mg, "%s/merges.txt", dir);
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    return nb_save_pretrained(m, dir) == NB_OK && nb_bpe_save_gpt2(tok, v, mg) == NB_OK &&
           nb_bpe_save_tokenizer_json(tok, tj) == NB_OK;
}

static int fail(const char *what) {
    fprintf(stderr, "gpt_train: %s: %s\n", what, nb_last_error());
    return 1;
}

int main(int argc, char **argv) {
    args a = {.arch = "gpt2", .layers = 4, .hidden = 256, .heads = 4, .seq = 128, .batch = 16, .vocab = 4096,
              .steps = 1200, .warmup = 60, .log_every = 50, .eval_every = 200, .lr = 2e-3, .minutes = 13,
              .dropout = 0, .samples = 4, .seed = 0, .threads = 0, .save = "gpt_train_out", .device = "cpu"};
    if (parse(argc, argv, &a)) return 2;
    double t0 = now_seconds();
    nb_set_num_threads(a.threads);
    nb_manual_seed(a.seed);
    if (!set_device(a.device)) return 1;
    char dir[4000], train_path[4200], eval_path[4200];
    if (a.data) snprintf(dir, sizeof dir, "%s", a.data);
    else if (nb_wordnet_default_dir(dir, sizeof dir) != NB_OK) return fail("corpus directory");
    snprintf(train_path, sizeof train_path, "%s/train.txt", dir);
    snprintf(eval_path, sizeof eval_path, "%s/eval.txt", dir);
    if (!file_exists(train_path) || !file_exists(eval_path)) {
        fprintf(stderr, "gpt_train: no corpus in %s: run data/fetch_wordnet.sh first\n", dir);
        return 1;
    }
    nb_bpe *tok = vocabulary(dir, train_path, a.vocab);
    if (!tok) return fail("vocabulary");
    stream tr = {0}, ev = {0};
    if (!load_tokens(tok, dir, a.vocab, "train", &tr) || !load_tokens(tok, dir, a.vocab, "eval", &ev) ||
        ev.n <= a.seq + 1 || tr.n <= a.seq + 1)
        return fail("tokenizing the corpus");
    int64_t V = nb_bpe_vocab_size(tok);
    struct stat st;
    printf("corpus: train %lld tokens, eval %lld tokens (%.2f bytes per token)\n", (long long)tr.n, (long long)ev.n,
           stat(train_path, &st) ? 0.0 : (double)st.st_size / (double)tr.n);
    nb_module *m;
    if (!strcmp(a.arch, "gpt2")) {
        nb_gpt2_config c = nb_gpt2_config_default();
        c.vocab_size = V, c.n_positions = a.seq, c.n_embd = a.hidden, c.n_layer = a.layers, c.n_head = a.heads;
        c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = a.dropout;
        c.bos_token_id = c.eos_token_id = V - 1;
        m = nb_gpt2(c);
    } else {
        nb_llama_config c = nb_llama_config_default();
        c.vocab_size = V, c.hidden_size = a.hidden, c.intermediate_size = (8 * a.hidden / 3 + 63) / 64 * 64;
        c.num_hidden_layers = a.layers, c.num_attention_heads = a.heads, c.num_key_value_heads = a.heads;
        c.max_position_embeddings = a.seq, c.tie_word_embeddings = true, c.rms_norm_eps = 1e-5;
        c.attention_dropout = a.dropout, c.bos_token_id = c.eos_token_id = V - 1, c.bitlinear = a.bitlinear;
        m = nb_llama(c);
    }
    if (!m) return fail("model");
    printf("model: %s%s %d layers, hidden %lld, %lld heads, %lld parameters; %d threads; batch %lld x %lld tokens, "
           "%lld steps, lr %g (warmup %lld, cosine), AdamW\n",
           a.arch, a.bitlinear ? " (BitLinear)" : "", a.layers, (long long)a.hidden, (long long)a.heads, (long long)nb_module_num_params(m),
           nb_get_num_threads(), (long long)a.batch, (long long)a.seq, (long long)a.steps, a.lr, (long long)a.warmup);
    {   /* the model's summary for one batch of ids */
        nb_scope *sc = nb_scope_begin();
        nb_tensor *ids = nb_full(NB_SHAPE(a.batch, a.seq), 0, NB_I64);
        nb_status st = ids ? nb_module_summary(m, 1, &ids, NULL, NULL) : nb_last_status();
        nb_scope_end(sc);
        if (st) return fail("summary");
    }
    fflush(stdout);
    double uni = unigram_ppl(&tr, &ev, V);
    result r;
    nb_summary_writer *tb = NULL;
    if (a.log_dir && !(tb = nb_summary_writer_open(a.log_dir, NULL))) return fail("--log-dir");
    bool trained = train(m, &tr, &ev, &a, V, t0, tb, &r);
    if (!trained) {
        nb_summary_writer_close(tb); /* what was logged before the failure reaches the file */
        return fail("training");
    }
    if (nb_summary_writer_close(tb)) return fail("--log-dir");
    double ppl = exp(r.val_loss);
    printf("final: val_loss=%.4f val_ppl=%.2f unigram_ppl=%.2f ppl_ratio=%.2f steps=%lld seconds=%.0f\n", r.val_loss,
           ppl, uni, uni / ppl, (long long)r.steps, now_seconds() - t0);
    fflush(stdout);
    if (!save_all(m, tok, a.save)) return fail("saving");
    printf("saved: %s (config.json, model.safetensors, vocab.json, merges.txt, tokenizer.json)\n", a.save);
    if (a.onnx) { /* GPT-2 only: Llama has no ONNX translation yet */
        nb_scope *sc = nb_scope_begin();
        nb_tensor *ids = nb_full(NB_SHAPE(1, a.seq), 0, NB_I64);
        nb_status st = ids ? nb_onnx_export(m, 1, &ids, a.onnx, NULL) : nb_last_status();
        nb_scope_end(sc);
        if (st) return fail("--onnx");
        printf("onnx: %s\n", a.onnx);
    }
    sample_lines(m, tok, &a);
    nb_module_free(m);
    nb_bpe_free(tok);
    free(tr.ids), free(ev.ids);
    return 0;
}
