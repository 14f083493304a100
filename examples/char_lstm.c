/* char_lstm.c - a character-level LSTM language model on the English
 * glosses of WordNet (data/fetch_wordnet.sh), evaluated by perplexity on
 * the held-out split against the unigram model's.
 *
 *   data/fetch_wordnet.sh && build/examples/char_lstm [flags]
 *
 * Model: Embedding(V, --embed) -> LSTM(--hidden, --layers, batch_first) ->
 * Linear(V), V the distinct bytes of train.txt (one more id for a byte only
 * eval.txt has). Training: windows of --seq + 1 bytes at offsets drawn from
 * the seed, zero initial states, cross-entropy on the next byte, Adam
 * (--lr), gradients clipped to norm 1, --steps steps or --minutes of
 * training, whichever ends first. Evaluation: the first --eval-chars bytes
 * of eval.txt as --batch-size contiguous streams read --seq at a time, the
 * LSTM's states carried from window to window (no gradients). The unigram
 * model is train.txt's byte frequencies with add-one smoothing. Prints
 * every --log-every steps
 *   step N: loss=X chars/s=Y
 * and ends with exactly
 *   final: val_ppl=X unigram_ppl=Y ratio=Z steps=N seconds=S
 * (ratio = unigram_ppl / val_ppl; seconds: the whole run). Same seed and
 * thread count give the same lines (chars/s and seconds aside) unless
 * --minutes stops the run early.
 *
 * --device cuda (or cuda:N) trains on a GPU with larger defaults (hidden
 * 512, 2 layers, batch 128, seq 128, --minutes 0.75, --eval-chars 400000);
 * flags given still override them.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_common.h"
#include "nabla.h"

typedef struct args {
    int64_t embed, hidden, layers, seq, batch, steps, log_every, eval_chars;
    double lr, minutes;
    uint64_t seed;
    int64_t threads;
    const char *data;
    nb_device device;
    bool on_gpu;
    const char *log_dir; /* --log-dir: TensorBoard scalars there */
    bool no_progress;    /* --no-progress: no bar on stderr */
} args;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--embed N] [--hidden N] [--layers N] [--seq N] [--batch-size N] [--steps N] [--lr X]\n"
            "          [--minutes X] [--log-every N] [--eval-chars N] [--seed N] [--threads N] [--data DIR]\n"
            "          [--device cpu|cuda|cuda:N] [--log-dir DIR] [--no-progress]\n",
            prog);
    return 2;
}

static int parse(int argc, char **argv, args *a) {
    const char *prog = argv[0];
    bool gpu = false;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--device") && strcmp(argv[i + 1], "cpu")) gpu = true;
    *a = (args){.embed = 64, .hidden = gpu ? 512 : 256, .layers = gpu ? 2 : 1, .seq = gpu ? 128 : 64,
                .batch = gpu ? 128 : 32, .steps = 100000, .log_every = 100, .eval_chars = gpu ? 400000 : 100000,
                .lr = 2e-3, .minutes = gpu ? 0.75 : 9, .seed = 1, .device = nb_default_device(), .on_gpu = gpu};
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--no-progress")) { /* a bare flag */
            a->no_progress = true, i--;
            continue;
        }
        if (!v) return usage(prog);
        bool ok = true;
        if (!strcmp(f, "--embed")) ok = nb_flag_int(prog, f, v, 1, 1 << 16, &a->embed);
        else if (!strcmp(f, "--hidden")) ok = nb_flag_int(prog, f, v, 1, 1 << 16, &a->hidden);
        else if (!strcmp(f, "--layers")) ok = nb_flag_int(prog, f, v, 1, 64, &a->layers);
        else if (!strcmp(f, "--seq")) ok = nb_flag_int(prog, f, v, 1, 1 << 16, &a->seq);
        else if (!strcmp(f, "--batch-size")) ok = nb_flag_int(prog, f, v, 1, 1 << 20, &a->batch);
        else if (!strcmp(f, "--steps")) ok = nb_flag_int(prog, f, v, 1, INT64_MAX, &a->steps);
        else if (!strcmp(f, "--log-every")) ok = nb_flag_int(prog, f, v, 1, INT64_MAX, &a->log_every);
        else if (!strcmp(f, "--eval-chars")) ok = nb_flag_int(prog, f, v, 1, INT64_MAX, &a->eval_chars);
        else if (!strcmp(f, "--lr")) ok = nb_flag_double(prog, f, v, 0, true, DBL_MAX, &a->lr);
        else if (!strcmp(f, "--minutes")) ok = nb_flag_double(prog, f, v, 0, true, 1e7, &a->minutes);
        else if (!strcmp(f, "--seed")) ok = nb_flag_u64(prog, f, v, &a->seed);
        else if (!strcmp(f, "--threads")) ok = nb_flag_int(prog, f, v, 0, 4096, &a->threads);
        else if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--log-dir")) a->log_dir = v;
        else if (!strcmp(f, "--device")) ok = nb_example_set_device(prog, v, &a->device);
        else {
            fprintf(stderr, "%s: unknown flag %s\n", prog, f);
            return usage(prog);
        }
        if (!ok) return 2;
    }
    return nb_example_set_threads(prog, a->threads) ? 0 : 2;
}

/* The whole file (*n bytes), or NULL with a message. */
static unsigned char *read_file(const char *dir, const char *name, int64_t *n) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "char_lstm: cannot read %s (run data/fetch_wordnet.sh, or give --data DIR)\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "char_lstm: cannot read %s\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* splitmix64: the window offsets, from the seed alone. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct model {
    nb_module *root; /* a ModuleDict: embed, lstm, head */
    nb_module *embed, *lstm, *head;
} model;

/* logits [B, T, V] of ids [B, T] from initial states h, c (NULL: zeros); *hn, *cn get the last states. */
static nb_tensor *run(const model *m, nb_tensor *ids, nb_tensor *h, nb_tensor *c, nb_tensor **hn, nb_tensor **cn) {
    nb_tensor *out[3];
    nb_tensor *in[3] = {nb_forward(m->embed, ids), h, c};
    if (nb_forward_n(m->lstm, h ? 3 : 1, in, out, 3) < 0) return NULL;
    if (hn) *hn = out[1], *cn = out[2];
    return nb_forward(m->head, out[0]);
}

int main(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    double t0 = now_seconds();
    char dir[1024];
    if (a.data) snprintf(dir, sizeof dir, "%s", a.data);
    else if (nb_wordnet_default_dir(dir, sizeof dir)) return fprintf(stderr, "char_lstm: %s\n", nb_last_error()), 1;
    int64_t n_train, n_eval;
    unsigned char *train = read_file(dir, "train.txt", &n_train), *eval = train ? read_file(dir, "eval.txt", &n_eval) : NULL;
    if (!eval) return free(train), 1;
    if (n_train < a.seq + 2) return fprintf(stderr, "char_lstm: train.txt is shorter than --seq + 2 bytes\n"), 1;
    /* the vocabulary: train's bytes, then one id for bytes it lacks; the unigram model's counts */
    int64_t count[256] = {0}, id_of[256];
    for (int64_t i = 0; i < n_train; i++) count[train[i]]++;
    int64_t V = 0;
    for (int b = 0; b < 256; b++) id_of[b] = count[b] ? V++ : -1;
    int64_t unk = V++;
    for (int b = 0; b < 256; b++)
        if (id_of[b] < 0) id_of[b] = unk;
    if (a.eval_chars > n_eval) a.eval_chars = n_eval;
    double nll = 0;
    for (int64_t i = 0; i < a.eval_chars; i++) /* add-one smoothing over the V ids */
        nll -= log((double)(count[eval[i]] + 1) / (double)(n_train + V));
    double unigram_ppl = exp(nll / (double)a.eval_chars);
    printf("char_lstm: %lld train bytes, %lld eval bytes, vocabulary %lld, device %s\n", (long long)n_train,
           (long long)a.eval_chars, (long long)V, a.on_gpu ? "cuda" : "cpu");

    nb_manual_seed(a.seed);
    model m = {.root = nb_nn_module_dict()};
    m.embed = nb_nn_embedding(V, a.embed, NB_NO_PADDING_IDX);
    m.lstm = nb_nn_lstm(a.embed, a.hidden, (nb_rnn_options){.num_layers = a.layers, .batch_first = true});
    m.head = nb_nn_linear(a.hidden, V);
    if (!m.root || nb_module_add(m.root, "embed", m.embed) || nb_module_add(m.root, "lstm", m.lstm) ||
        nb_module_add(m.root, "head", m.head))
        return fprintf(stderr, "char_lstm: %s\n", nb_last_error()), 1;
    nb_optimizer *opt = nb_adam(m.root, (nb_adam_options){.lr = a.lr});
    if (!opt) return fprintf(stderr, "char_lstm: %s\n", nb_last_error()), 1;

    int64_t B = a.batch, T = a.seq;
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)(B * T)), *yb = malloc(sizeof(int64_t) * (size_t)(B * T));
    uint64_t rng = a.seed;
    double loss_sum = 0, t_train = now_seconds(), t_log = t_train;
    int64_t step = 0, logged = 0;
    nb_summary_writer *tb = a.log_dir ? nb_summary_writer_open(a.log_dir, NULL) : NULL;
    if (a.log_dir && !tb) return fprintf(stderr, "char_lstm: --log-dir: %s\n", nb_last_error()), 1;
    nb_progress *bar = a.no_progress ? NULL : nb_progress_new(a.steps, &(nb_progress_options){.desc = "train", .unit = "step"});
    for (; step < a.steps && now_seconds() - t_train < 60 * a.minutes; step++) {
        for (int64_t b = 0; b < B; b++) {
            int64_t off = (int64_t)(next_u64(&rng) % (uint64_t)(n_train - T - 1));
            for (int64_t t = 0; t < T; t++) xb[b * T + t] = id_of[train[off + t]], yb[b * T + t] = id_of[train[off + t + 1]];
        }
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_from_data_on(xb, NB_SHAPE(B, T), NB_I64, a.device);
        nb_tensor *y = nb_from_data_on(yb, NB_SHAPE(B * T), NB_I64, a.device);
        nb_optimizer_zero_grad(opt);
        nb_tensor *logits = run(&m, x, NULL, NULL, NULL, NULL);
        nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, NB_SHAPE(B * T, V)), y);
        nb_status st = nb_backward(loss);
        double norm = 0;
        if (!st) st = nb_clip_grad_norm_module_(m.root, 1.0, 2.0, &norm);
        if (!st) st = nb_optimizer_step(opt);
        if (st) {
            fprintf(stderr, "char_lstm: step %lld: %s\n", (long long)step, nb_last_error());
            nb_summary_writer_close(tb); /* what was logged before reaches the file */
            return 1;
        }
        double l = nb_item(loss); /* one host read per step: the loss of a short run is what it is for */
        loss_sum += l;
        nb_scope_end(s);
        nb_progress_set_postfix(bar, "loss=%.4f", l);
        nb_progress_update(bar, 1);
        if ((step + 1) % a.log_every == 0) {
            double t = now_seconds(), mean = loss_sum / (double)(step + 1 - logged);
            double cps = (double)((step + 1 - logged) * B * T) / (t - t_log);
            nb_progress_clear(bar); /* the line goes where the bar was */
            printf("step %lld: loss=%.4f chars/s=%.0f\n", (long long)(step + 1), mean, cps);
            fflush(stdout);
            if (tb && (nb_summary_writer_add_scalar(tb, "train/loss", mean, step + 1) ||
                       nb_summary_writer_add_scalar(tb, "train/lr", a.lr, step + 1) ||
                       nb_summary_writer_add_scalar(tb, "train/chars_per_sec", cps, step + 1) ||
                       nb_summary_writer_add_scalar(tb, "train/grad_norm", norm, step + 1)))
                return fprintf(stderr, "char_lstm: --log-dir: %s\n", nb_last_error()), 1;
            loss_sum = 0, logged = step + 1, t_log = t;
        }
        if (!isfinite(loss_sum)) {
            fprintf(stderr, "char_lstm: the training loss is not finite at step %lld\n", (long long)(step + 1));
            nb_summary_writer_close(tb);
            return 1;
        }
    }

    nb_progress_close(bar);
    /* evaluation: B contiguous streams of the first eval_chars bytes, states carried */
    nb_module_train(m.root, false);
    int64_t per = (a.eval_chars - 1) / B, windows = per / T;
    if (windows < 1) B = 1, per = a.eval_chars - 1, windows = per / T;
    double total = 0;
    int64_t counted = 0;
    nb_tensor *h = NULL, *c = NULL;
    bool prev = nb_set_grad_enabled(false);
    for (int64_t w = 0; w < windows; w++) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t i = b * per + w * T + t;
                xb[b * T + t] = id_of[eval[i]], yb[b * T + t] = id_of[eval[i + 1]];
            }
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_from_data_on(xb, NB_SHAPE(B, T), NB_I64, a.device);
        nb_tensor *y = nb_from_data_on(yb, NB_SHAPE(B * T), NB_I64, a.device);
        nb_tensor *hn = NULL, *cn = NULL;
        nb_tensor *logits = run(&m, x, h, c, &hn, &cn);
        nb_tensor *l = nb_cross_entropy_ex(nb_reshape(logits, NB_SHAPE(B * T, V)), y,
                                           (nb_cross_entropy_options){.reduction = NB_REDUCTION_SUM});
        if (!l) {
            fprintf(stderr, "char_lstm: eval: %s\n", nb_last_error());
            nb_summary_writer_close(tb);
            return 1;
        }
        total += nb_item(l), counted += B * T;
        nb_release(h), nb_release(c);
        nb_retain(hn), nb_retain(cn); /* the states outlive the window's scope */
        h = hn, c = cn;
        nb_scope_end(s);
    }
    nb_release(h), nb_release(c);
    nb_set_grad_enabled(prev);
    double val_ppl = exp(total / (double)counted);
    if (tb && (nb_summary_writer_add_scalar(tb, "eval/val_ppl", val_ppl, step) || nb_summary_writer_close(tb)))
        return fprintf(stderr, "char_lstm: --log-dir: %s\n", nb_last_error()), 1;
    printf("final: val_ppl=%.4f unigram_ppl=%.4f ratio=%.3f steps=%lld seconds=%.1f\n", val_ppl, unigram_ppl,
           unigram_ppl / val_ppl, (long long)step, now_seconds() - t0);
    free(xb), free(yb), free(train), free(eval);
    nb_optimizer_free(opt);
    nb_module_free(m.root);
    return 0;
}
