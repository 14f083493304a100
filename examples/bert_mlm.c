/* bert_mlm.c - pre-trains a small BERT (4 layers, hidden 256, 4 heads, seq
 * 128 by default) with masked-language modelling on the English glosses of
 * WordNet (data/fetch_wordnet.sh), then evaluates it on the held-out split.
 *
 *   data/fetch_wordnet.sh && build/examples/bert_mlm [flags]
 *
 * Flow: a WordPiece vocabulary is trained on train.txt (or loaded from the
 * copy cached next to the corpus, vocab-<size>.txt, BERT's vocab.txt
 * format); the corpus becomes packed, masked sequences (15% of tokens,
 * 80/10/10); AdamW as BERT (weight decay 0.01 except biases and LayerNorm,
 * gradients clipped to norm 1) with the lr warmed up linearly for --warmup
 * steps, then decayed linearly to 0 at the last step. Defaults: 1000 steps
 * of batch 32, peak lr 1e-3, warmup 100, dropout 0 (a run this short
 * underfits; dropout 0.1 cost 3 points of accuracy at equal time), post-LN
 * as BERT (--norm-first 1 for pre-LN); --minutes 13 stops training early on
 * a slower machine so the whole run stays within 15 minutes. The decoder runs on
 * the masked positions only (gathered with nb_index_select), as in BERT's
 * own pre-training code. Prints every --log-every steps
 *   step N: mlm_loss=X mlm_accuracy=Y tokens/s=Z
 * (means over the interval; tokens/s counts all B*T positions), and ends
 * with exactly
 *   final: mlm_accuracy=0.XXXX unigram_accuracy=0.XXXX eval_loss=X.XXXX seconds=S
 * where the accuracies are over the masked positions of eval.txt (masking
 * fixed by the seed) and unigram_accuracy is that of always predicting the
 * training set's most frequent label token. seconds is the whole run,
 * tokenizer included. Same seed and thread count give the same lines
 * (tokens/s and seconds aside) unless --minutes stops the run early.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "example_common.h"
#include "nabla.h"

typedef struct args {
    int layers;
    int64_t hidden, heads, seq, batch, vocab;
    int64_t steps, warmup, log_every;
    double lr, minutes, dropout;
    uint64_t seed;
    int threads;
    int norm_first;
    const char *data;
} args;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--layers N] [--hidden N] [--heads N] [--seq N] [--batch-size N] [--vocab-size N]\n"
            "          [--steps N] [--warmup N] [--lr X] [--dropout X] [--minutes X] [--log-every N]\n"
            "          [--seed N] [--threads N] [--norm-first 0|1] [--data DIR]\n",
            prog);
    return 2;
}

static int parse(int argc, char **argv, args *a) {
    const char *prog = argv[0];
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        bool ok = true;
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", prog, f);
            return usage(prog);
        }
        if (!strcmp(f, "--layers")) ok = nb_flag_int(prog, f, v, 1, 1000, &x), a->layers = (int)x;
        else if (!strcmp(f, "--hidden")) ok = nb_flag_int(prog, f, v, 1, 1 << 20, &a->hidden);
        else if (!strcmp(f, "--heads")) ok = nb_flag_int(prog, f, v, 1, 1 << 20, &a->heads);
        else if (!strcmp(f, "--seq")) ok = nb_flag_int(prog, f, v, 3, 65536, &a->seq);
        else if (!strcmp(f, "--batch-size")) ok = nb_flag_int(prog, f, v, 1, INT32_MAX, &a->batch);
        else if (!strcmp(f, "--vocab-size")) ok = nb_flag_int(prog, f, v, 64, INT32_MAX, &a->vocab);
        else if (!strcmp(f, "--steps")) ok = nb_flag_int(prog, f, v, 1, INT64_MAX, &a->steps);
        else if (!strcmp(f, "--warmup")) ok = nb_flag_int(prog, f, v, 0, INT64_MAX, &a->warmup);
        else if (!strcmp(f, "--log-every")) ok = nb_flag_int(prog, f, v, 1, INT64_MAX, &a->log_every);
        else if (!strcmp(f, "--lr")) ok = nb_flag_double(prog, f, v, 0, true, DBL_MAX, &a->lr);
        else if (!strcmp(f, "--dropout")) ok = nb_flag_double(prog, f, v, 0, false, 0.999999, &a->dropout);
        else if (!strcmp(f, "--minutes")) ok = nb_flag_double(prog, f, v, 0, false, 1e7, &a->minutes);
        else if (!strcmp(f, "--seed")) ok = nb_flag_u64(prog, f, v, &a->seed);
        else if (!strcmp(f, "--threads")) ok = nb_flag_int(prog, f, v, 0, 4096, &x), a->threads = (int)x;
        else if (!strcmp(f, "--norm-first")) ok = nb_flag_int(prog, f, v, 0, 1, &x), a->norm_first = (int)x;
        else if (!strcmp(f, "--data")) a->data = v;
        else {
            fprintf(stderr, "%s: unknown flag %s\n", prog, f);
            return usage(prog);
        }
        if (!ok) return 2;
    }
    if (a->warmup >= a->steps) {
        fprintf(stderr, "%s: --warmup %lld: must be below --steps %lld\n", prog, (long long)a->warmup,
                (long long)a->steps);
        return 2;
    }
    return 0;
}

/* BERT's schedule: linear warmup to lr over `warmup` updates, then linear
 * decay to 0 at update `steps` (update numbers from 1). */
static double lr_at(const args *a, int64_t update) {
    if (update <= a->warmup) return a->lr * (double)update / (double)a->warmup;
    return a->lr * (double)(a->steps - update) / (double)(a->steps - a->warmup);
}

/* ---- data ------------------------------------------------------------------------------ */

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The vocabulary cached as dir/vocab-<size>.txt, trained on train.txt and
 * saved there the first time. */
static nb_wordpiece *vocabulary(const char *dir, const char *train, int64_t size) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab-%lld.txt", dir, (long long)size);
    if (file_exists(path)) {
        nb_wordpiece *wp = nb_wordpiece_load(path, (nb_wordpiece_options){0});
        if (wp) printf("vocabulary: %d tokens from %s\n", nb_wordpiece_vocab_size(wp), path);
        return wp;
    }
    double t = now_seconds();
    nb_wordpiece *wp = nb_wordpiece_train(train, (int32_t)size, (nb_wordpiece_options){0});
    if (!wp) return NULL;
    printf("vocabulary: %d WordPiece tokens trained on %s in %.1f s", nb_wordpiece_vocab_size(wp), train,
           now_seconds() - t);
    if (nb_wordpiece_save(wp, path) == NB_OK) printf(", saved to %s\n", path);
    else printf(" (not cached: %s)\n", nb_last_error());
    return wp;
}

/* The masked positions of a batch: flat indices into [B*T] and their labels
 * (host buffers of B*T entries); returns their number M. */
static int64_t masked_positions(const nb_mlm_batch *b, int64_t *idx, int64_t *lab, int64_t bt) {
    if (nb_to_host(b->labels, lab, sizeof(int64_t) * (size_t)bt)) return -1;
    int64_t m = 0;
    for (int64_t i = 0; i < bt; i++)
        if (lab[i] != NB_MLM_IGNORE_INDEX) idx[m] = i, lab[m++] = lab[i];
    return m;
}

typedef struct mlm_out {
    nb_tensor *loss; /* cross-entropy, reduction as asked */
    int64_t masked, correct, unigram;
} mlm_out;

/* Forward of one batch: encoder on every position, MLM head on the masked
 * ones; counts the correct predictions (and those of always `frequent`). */
static bool mlm_forward(nb_module *bert, const nb_mlm_batch *b, int64_t *idx, int64_t *lab, int32_t frequent,
                        nb_reduction red, mlm_out *o) {
    int64_t B = nb_size(b->input_ids, 0), T = nb_size(b->input_ids, 1), H = nb_bert_get_config(bert).hidden_size;
    int64_t m = masked_positions(b, idx, lab, B * T);
    memset(o, 0, sizeof *o);
    if (m <= 0) return m == 0;
    nb_tensor *h = nb_bert_encode(bert, b->input_ids, b->token_type_ids, b->attention_mask);
    nb_tensor *sel = nb_index_select(nb_reshape(h, 2, (int64_t[]){B * T, H}), 0, nb_from_data(idx, 1, &m, NB_I64));
    nb_tensor *logits = nb_bert_mlm_head(bert, sel);
    nb_tensor *target = nb_from_data(lab, 1, &m, NB_I64);
    o->loss = nb_cross_entropy_ex(logits, target, (nb_cross_entropy_options){.ignore_index = -100, .reduction = red});
    nb_tensor *pred = nb_argmax(logits, -1, false);
    if (!o->loss || !pred || nb_to_host(pred, idx, sizeof(int64_t) * (size_t)m)) return false;
    o->masked = m;
    for (int64_t i = 0; i < m; i++) o->correct += idx[i] == lab[i], o->unigram += lab[i] == frequent;
    return true;
}

/* ---- training and evaluation ------------------------------------------------------------ */

/* AdamW as BERT: weight decay 0.01, none on biases and LayerNorm
 * (nb_decay_split_module), as two parameter groups. */
static nb_optimizer *optimizer(nb_module *bert, const args *a) {
    nb_decay_split sp;
    if (nb_decay_split_module(bert, &sp) != NB_OK) return NULL;
    nb_optimizer *opt = nb_adamw_groups(
        (nb_param_group[]){{sp.decay, sp.n_decay, NULL},
                           {sp.no_decay, sp.n_no_decay, &(nb_adam_options){.weight_decay = NB_ZERO}}},
        2, (nb_adam_options){.lr = a->lr, .betas = {0.9, 0.999}, .eps = 1e-6, .weight_decay = 0.01});
    nb_decay_split_free(&sp);
    return opt;
}

typedef struct totals {
    double loss;
    int64_t masked, correct, unigram, steps;
} totals;

/* Trains for a->steps updates (or until the --minutes budget). */
static bool train(nb_module *bert, nb_mlm_dataset *ds, const args *a, double t_start, bool *diverged) {
    nb_optimizer *opt = NULL;
    int64_t N = nb_mlm_num_sequences(ds), T = a->seq, B = a->batch < N ? a->batch : N;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)N), *idx = malloc(sizeof(int64_t) * (size_t)(B * T));
    int64_t *lab = malloc(sizeof(int64_t) * (size_t)(B * T));
    bool ok = perm && idx && lab && (opt = optimizer(bert, a));
    int64_t epoch = -1, pos = N;
    totals iv = {0};
    double t_iv = now_seconds();
    nb_module_train(bert, true);
    for (int64_t step = 1; ok && step <= a->steps; step++) {
        if (pos + B > N) { /* a new epoch: a fresh order and fresh masks */
            ok = nb_mlm_permutation(ds, ++epoch, perm) == NB_OK;
            pos = 0;
        }
        nb_scope *s = nb_scope_begin();
        nb_mlm_batch b;
        mlm_out o = {0};
        ok = ok && nb_mlm_get_batch(ds, epoch, perm + pos, B, &b) == NB_OK &&
             mlm_forward(bert, &b, idx, lab, -1, NB_REDUCTION_MEAN, &o);
        pos += B;
        nb_module_zero_grad(bert);
        if (ok && o.loss) {
            ok = nb_optimizer_set_lr(opt, lr_at(a, step)) == NB_OK; /* every group */
            ok = ok && nb_backward(o.loss) == NB_OK && nb_clip_grad_norm_module_(bert, 1.0, 2.0, NULL) == NB_OK &&
                 nb_optimizer_step(opt) == NB_OK;
            double l = nb_item(o.loss);
            if (ok && !nb_example_check_loss("bert_mlm", step, l)) *diverged = true, ok = false;
            iv.loss += l, iv.masked += o.masked, iv.correct += o.correct, iv.steps++;
        }
        nb_scope_end(s);
        bool out_of_time = a->minutes > 0 && now_seconds() - t_start > 60 * a->minutes;
        if (ok && (step % a->log_every == 0 || step == a->steps || out_of_time)) {
            double dt = now_seconds() - t_iv;
            printf("step %lld: mlm_loss=%.4f mlm_accuracy=%.4f tokens/s=%.0f\n", (long long)step,
                   iv.loss / (double)(iv.steps ? iv.steps : 1), (double)iv.correct / (double)(iv.masked ? iv.masked : 1),
                   (double)(iv.steps * B * T) / dt);
            fflush(stdout);
            iv = (totals){0}, t_iv = now_seconds();
        }
        if (out_of_time) {
            printf("stopping after step %lld: the --minutes %g budget is spent\n", (long long)step, a->minutes);
            break;
        }
    }
    nb_optimizer_free(opt);
    free(perm), free(idx), free(lab);
    return ok;
}

/* Loss and accuracies over every masked position of the eval split (its
 * masking is epoch 0 of the eval dataset's seed), in eval mode, no grad. */
static bool evaluate(nb_module *bert, nb_mlm_dataset *ds, int64_t batch, int32_t frequent, totals *r) {
    int64_t N = nb_mlm_num_sequences(ds), T = nb_mlm_seq_len(ds);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)batch), *idx = malloc(sizeof(int64_t) * (size_t)(batch * T));
    int64_t *lab = malloc(sizeof(int64_t) * (size_t)(batch * T));
    bool ok = ids && idx && lab, prev = nb_set_grad_enabled(false);
    memset(r, 0, sizeof *r);
    nb_module_train(bert, false);
    for (int64_t i0 = 0; ok && i0 < N; i0 += batch) {
        int64_t n = N - i0 < batch ? N - i0 : batch;
        for (int64_t i = 0; i < n; i++) ids[i] = i0 + i;
        nb_scope *s = nb_scope_begin();
        nb_mlm_batch b;
        mlm_out o;
        ok = nb_mlm_get_batch(ds, 0, ids, n, &b) == NB_OK &&
             mlm_forward(bert, &b, idx, lab, frequent, NB_REDUCTION_SUM, &o);
        if (ok && o.loss) r->loss += nb_item(o.loss);
        r->masked += o.masked, r->correct += o.correct, r->unigram += o.unigram;
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    free(ids), free(idx), free(lab);
    return ok && r->masked > 0;
}

/* ---- main ------------------------------------------------------------------------------- */

static int fail(const char *what) {
    fprintf(stderr, "bert_mlm: %s: %s\n", what, nb_last_error());
    return 1;
}

int main(int argc, char **argv) {
    args a = {.layers = 4, .hidden = 256, .heads = 4, .seq = 128, .batch = 32, .vocab = 8192, .steps = 1000,
              .warmup = 100, .log_every = 50, .lr = 1e-3, .minutes = 13, .dropout = 0, .seed = 0, .threads = 0};
    if (parse(argc, argv, &a)) return 2;
    double t0 = now_seconds();
    if (!nb_example_set_threads(argv[0], a.threads)) return 2;
    nb_manual_seed(a.seed);
    char dir[4000], train_path[4200], eval_path[4200];
    if (a.data) snprintf(dir, sizeof dir, "%s", a.data);
    else if (nb_wordnet_default_dir(dir, sizeof dir) != NB_OK) return fail("corpus directory");
    snprintf(train_path, sizeof train_path, "%s/train.txt", dir);
    snprintf(eval_path, sizeof eval_path, "%s/eval.txt", dir);
    if (!file_exists(train_path) || !file_exists(eval_path)) {
        fprintf(stderr, "bert_mlm: no corpus in %s: run data/fetch_wordnet.sh first\n", dir);
        return 1;
    }
    nb_wordpiece *wp = vocabulary(dir, train_path, a.vocab);
    if (!wp) return fail("vocabulary");
    nb_mlm_dataset *train_ds = nb_mlm_dataset_new(train_path, wp, a.seq, (nb_mlm_options){.seed = a.seed});
    nb_mlm_dataset *eval_ds = nb_mlm_dataset_new(eval_path, wp, a.seq, (nb_mlm_options){.seed = a.seed + 1});
    if (!train_ds || !eval_ds) return fail("corpus");
    nb_mlm_stats ts = nb_mlm_get_stats(train_ds), es = nb_mlm_get_stats(eval_ds);
    printf("corpus: train %lld lines, %lld tokens, %lld sequences of %lld; eval %lld lines, %lld sequences\n",
           (long long)ts.lines, (long long)ts.tokens, (long long)ts.sequences, (long long)a.seq, (long long)es.lines,
           (long long)es.sequences);

    nb_bert_config c = nb_bert_config_base(nb_wordpiece_vocab_size(wp));
    c.hidden_size = a.hidden, c.num_layers = a.layers, c.num_heads = a.heads, c.intermediate_size = 4 * a.hidden;
    c.max_position = a.seq, c.pad_token_id = nb_wordpiece_special_id(wp, NB_TOKEN_PAD);
    c.dropout = c.embedding_dropout = a.dropout;
    c.norm_first = a.norm_first;
    nb_module *bert = nb_bert(c);
    if (!bert) return fail("model");
    printf("model: BERT %d layers, hidden %lld, %lld heads, %lld parameters; %d threads; batch %lld, %lld steps, "
           "lr %g (warmup %lld, linear decay), AdamW\n",
           a.layers, (long long)a.hidden, (long long)a.heads, (long long)nb_module_num_params(bert),
           nb_get_num_threads(), (long long)a.batch, (long long)a.steps, a.lr, (long long)a.warmup);
    fflush(stdout);

    int32_t frequent = nb_mlm_most_frequent_token(train_ds);
    totals r;
    bool diverged = false;
    if (!train(bert, train_ds, &a, t0, &diverged)) return diverged ? 1 : fail("training");
    if (!evaluate(bert, eval_ds, a.batch, frequent, &r)) return fail("evaluation");
    printf("eval: %lld masked tokens; most frequent training label \"%s\"\n", (long long)r.masked,
           nb_wordpiece_id_to_token(wp, frequent));
    printf("final: mlm_accuracy=%.4f unigram_accuracy=%.4f eval_loss=%.4f seconds=%.0f\n",
           (double)r.correct / (double)r.masked, (double)r.unigram / (double)r.masked, r.loss / (double)r.masked,
           now_seconds() - t0);
    nb_module_free(bert);
    nb_mlm_dataset_free(train_ds);
    nb_mlm_dataset_free(eval_ds);
    nb_wordpiece_free(wp);
    return 0;
}
