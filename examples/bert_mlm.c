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
 *
 * --device cuda (or cuda:N) trains on a GPU and changes the defaults to a
 * larger model and schedule (6 layers, hidden 512, 8 heads, batch 128,
 * 3000 steps, warmup 300, peak lr 5e-4, --minutes 2, --eval-every 500 (a
 * line with the held-out accuracy and the seconds so far), and --tf32 1: float32
 * matrix products on the tensor cores in TF32, nb_set_float32_matmul_precision
 * ("high")); any flag given still overrides them. --amp 1 runs each training
 * forward pass and loss under bfloat16 autocast (nb_autocast_begin), as
 * torch.autocast does; evaluation stays in float32. Batches are built on the host into page-locked buffers
 * and uploaded asynchronously; the losses and accuracies are summed on the
 * device and read at the log lines only. --compile 1 runs the training
 * step through nb_compile (a fused CUDA graph replayed each step; eager on
 * the CPU): each batch's masked positions are padded to B * round(0.15 T)
 * entries of label -100, so every step has the same shapes, and the
 * gradient norm is not logged (--log-dir). --bitlinear trains BitNet b1.58:
 * BitLinear attention and feed-forward projections (nb_bert_config.bitlinear).
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
    int64_t steps, warmup, log_every, eval_every;
    double lr, minutes, dropout;
    uint64_t seed;
    int threads;
    int norm_first;
    int tf32; /* nb_set_float32_matmul_precision("high") */
    int amp;  /* training forward passes under bfloat16 autocast */
    int compile; /* the training step through nb_compile (masked positions padded to a fixed count) */
    const char *data;
    nb_device device;
    const char *log_dir; /* --log-dir: TensorBoard scalars there */
    bool no_progress;    /* --no-progress: no bar on stderr */
    bool bitlinear;      /* --bitlinear: BitNet b1.58's BitLinear in the encoder layers */
    nb_summary_writer *tb;
} args;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--layers N] [--hidden N] [--heads N] [--seq N] [--batch-size N] [--vocab-size N]\n"
            "          [--steps N] [--warmup N] [--lr X] [--dropout X] [--minutes X] [--log-every N] [--eval-every N]\n"
            "          [--seed N] [--threads N] [--norm-first 0|1] [--data DIR] [--device cpu|cuda|cuda:N]\n"
            "          [--tf32 0|1] [--amp 0|1] [--compile 0|1] [--log-dir DIR] [--no-progress] [--bitlinear]\n",
            prog);
    return 2;
}

static int parse(int argc, char **argv, args *a) {
    const char *prog = argv[0];
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        bool ok = true;
        if (!strcmp(f, "--no-progress") || !strcmp(f, "--bitlinear")) { /* bare flags */
            *(f[2] == 'n' ? &a->no_progress : &a->bitlinear) = true, i--;
            continue;
        }
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
        else if (!strcmp(f, "--eval-every")) ok = nb_flag_int(prog, f, v, 0, INT64_MAX, &a->eval_every);
        else if (!strcmp(f, "--lr")) ok = nb_flag_double(prog, f, v, 0, true, DBL_MAX, &a->lr);
        else if (!strcmp(f, "--dropout")) ok = nb_flag_double(prog, f, v, 0, false, 0.999999, &a->dropout);
        else if (!strcmp(f, "--minutes")) ok = nb_flag_double(prog, f, v, 0, false, 1e7, &a->minutes);
        else if (!strcmp(f, "--seed")) ok = nb_flag_u64(prog, f, v, &a->seed);
        else if (!strcmp(f, "--threads")) ok = nb_flag_int(prog, f, v, 0, 4096, &x), a->threads = (int)x;
        else if (!strcmp(f, "--norm-first")) ok = nb_flag_int(prog, f, v, 0, 1, &x), a->norm_first = (int)x;
        else if (!strcmp(f, "--tf32")) ok = nb_flag_int(prog, f, v, 0, 1, &x), a->tf32 = (int)x;
        else if (!strcmp(f, "--amp")) ok = nb_flag_int(prog, f, v, 0, 1, &x), a->amp = (int)x;
        else if (!strcmp(f, "--compile")) ok = nb_flag_int(prog, f, v, 0, 1, &x), a->compile = (int)x;
        else if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--log-dir")) a->log_dir = v;
        else if (!strcmp(f, "--device")) ok = nb_example_set_device(prog, v, &a->device);
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

/* --device names a GPU (anything but cpu): the defaults become a larger
 * model trained for a fixed number of steps within --minutes 2. */
enum { GPU_STEPS = 3000, GPU_WARMUP = 300 };
#define GPU_LR 5e-4
static bool gpu_requested(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device") && strcmp(argv[i + 1], "cpu")) return true;
    return false;
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

/* ---- batches on the device -------------------------------------------------------------
 * A batch is built on the host (nb_mlm_get_sequence per row) into page-locked
 * buffers and uploaded asynchronously on the compute stream, so the host
 * builds batch k+1 while the device still runs step k. Two buffer sets are
 * used in turn; a set is refilled only after its uploads have completed
 * (an event). The masked positions are found on the host, where the labels
 * are made, so nothing is read back from the device for them. */

typedef struct stage {
    int64_t *ids, *idx, *lab; /* [B*T]: input ids; flat indices and labels of the masked positions */
    uint8_t *attn;            /* [B*T] */
    nb_event *uploaded;       /* after this set's uploads */
} stage;

typedef struct stager {
    nb_device dev;
    int64_t B, T, k;
    stage s[2];
} stager;

static void stager_free(stager *g) {
    nb_device_synchronize(g->dev); /* no upload may still read the buffers */
    for (int i = 0; i < 2; i++) {
        nb_host_free(g->dev, g->s[i].ids), nb_host_free(g->dev, g->s[i].idx);
        nb_host_free(g->dev, g->s[i].lab), nb_host_free(g->dev, g->s[i].attn);
        nb_event_free(g->s[i].uploaded);
    }
}

static bool stager_init(stager *g, nb_device dev, int64_t B, int64_t T) {
    memset(g, 0, sizeof *g);
    g->dev = dev, g->B = B, g->T = T;
    size_t n = (size_t)(B * T);
    bool ok = true;
    for (int i = 0; i < 2 && ok; i++) {
        stage *s = &g->s[i];
        s->ids = nb_host_alloc(dev, n * sizeof(int64_t)), s->idx = nb_host_alloc(dev, n * sizeof(int64_t));
        s->lab = nb_host_alloc(dev, n * sizeof(int64_t)), s->attn = nb_host_alloc(dev, n);
        s->uploaded = nb_event_new(dev);
        ok = s->ids && s->idx && s->lab && s->attn && s->uploaded;
    }
    if (!ok) stager_free(g);
    return ok;
}

/* One batch on the device: input ids and attention mask [n, T], and the
 * masked positions' flat indices and labels [max(m, pad)] (m = 0: no
 * tensors; past m, position 0 with label -100, which the loss ignores). */
typedef struct dev_batch {
    nb_tensor *ids, *attn, *idx, *target;
    int64_t m, unigram; /* masked positions; those whose label is `frequent` */
} dev_batch;

static nb_tensor *upload(stager *g, const void *host, int ndim, const int64_t *shape, nb_dtype dt) {
    nb_tensor *t = nb_empty_on(ndim, shape, dt, g->dev);
    size_t bytes = (size_t)nb_numel(t) * (dt == NB_BOOL ? 1 : sizeof(int64_t));
    return t && nb_copy_from_host_async(t, host, bytes, NULL) == NB_OK ? t : NULL;
}

/* Builds sequences indices[0..n) of epoch into the next buffer set and
 * uploads them (tensors owned by the current scope), the masked positions
 * padded to pad (--compile: every step the same shapes). */
static bool stage_batch(stager *g, const nb_mlm_dataset *ds, int64_t epoch, const int64_t *indices, int64_t n,
                        int32_t frequent, int64_t pad, dev_batch *b) {
    stage *s = &g->s[g->k++ & 1];
    memset(b, 0, sizeof *b);
    if (nb_event_synchronize(s->uploaded) != NB_OK) return false; /* its last uploads are done */
    int64_t T = g->T;
    for (int64_t r = 0; r < n; r++)
        if (nb_mlm_get_sequence(ds, epoch, indices[r], s->ids + r * T, s->lab + r * T, s->attn + r * T) != NB_OK)
            return false;
    for (int64_t i = 0; i < n * T; i++) /* compacted in place: m <= i */
        if (s->lab[i] != NB_MLM_IGNORE_INDEX) s->idx[b->m] = i, s->lab[b->m] = s->lab[i], b->unigram += s->lab[i] == frequent, b->m++;
    int64_t k = b->m; /* the uploaded count */
    for (; k < pad && k < n * T; k++) s->idx[k] = 0, s->lab[k] = NB_MLM_IGNORE_INDEX;
    int64_t shape[2] = {n, T};
    b->ids = upload(g, s->ids, 2, shape, NB_I64);
    b->attn = b->ids ? upload(g, s->attn, 2, shape, NB_BOOL) : NULL;
    if (b->attn && b->m) {
        b->idx = upload(g, s->idx, 1, &k, NB_I64);
        b->target = b->idx ? upload(g, s->lab, 1, &k, NB_I64) : NULL;
    }
    return b->attn && (!b->m || b->target) && nb_event_record(s->uploaded, NULL) == NB_OK;
}

/* A float64 or int64 0-d running total on the device: acc += x (x's dtype
 * converted), in place (a compiled step's graph keeps acc). */
static nb_status accumulate(nb_tensor *acc, nb_tensor *x) {
    nb_tensor *sum = nb_add(acc, nb_to_dtype(nb_detach(x), nb_dtype_of(acc)));
    return sum ? nb_copy_(acc, sum) : nb_last_status();
}

/* A fresh 0-d total of dtype dt on dev, ours. */
static nb_tensor *total_new(nb_device dev, nb_dtype dt) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_full_on(0, NULL, 0, dt, dev);
    nb_retain(t);
    nb_scope_end(s);
    return t;
}

typedef struct mlm_out {
    nb_tensor *loss;    /* cross-entropy, reduction as asked */
    nb_tensor *correct; /* int64 0-d: masked positions predicted right */
} mlm_out;

/* Forward of one batch: encoder on every position, MLM head on the masked
 * ones. */
static bool mlm_forward(nb_module *bert, const dev_batch *b, nb_reduction red, mlm_out *o) {
    int64_t B = nb_size(b->ids, 0), T = nb_size(b->ids, 1), H = nb_bert_get_config(bert).hidden_size;
    memset(o, 0, sizeof *o);
    if (b->m == 0) return true;
    nb_tensor *h = nb_bert_encode(bert, b->ids, NULL, b->attn);
    nb_tensor *sel = nb_index_select(nb_reshape(h, 2, (int64_t[]){B * T, H}), 0, b->idx);
    nb_tensor *logits = nb_bert_mlm_head(bert, sel);
    o->loss = nb_cross_entropy_ex(logits, b->target, (nb_cross_entropy_options){.ignore_index = -100, .reduction = red});
    if (logits && nb_dtype_of(logits) != NB_F32) logits = nb_to_dtype(logits, NB_F32); /* autocast's bf16 */
    o->correct = nb_sum(nb_eq(nb_argmax(logits, -1, false), b->target), NULL, 0, false);
    return o->loss && o->correct;
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

/* Reads the device totals of an interval into t (a host sync). */
static bool read_totals(nb_tensor *loss, nb_tensor *correct, totals *t) {
    t->loss = nb_item(loss);
    double c = nb_item(correct);
    t->correct = (int64_t)c;
    return !isnan(c);
}

static bool evaluate(nb_module *bert, nb_mlm_dataset *ds, int64_t batch, int32_t frequent, totals *r);

/* The held-out split to evaluate on every a->eval_every steps. */
typedef struct eval_set {
    nb_mlm_dataset *ds;
    int32_t frequent;
} eval_set;

/* One training step's state: the --compile step's context. */
typedef struct trainer {
    nb_module *bert;
    nb_optimizer *opt;
    nb_tensor **amp_ps; /* --amp: the parameters, cast ahead each step in multi-tensor launches */
    int n_amp;
    bool amp;
    nb_tensor *loss_sum, *correct; /* the interval's device totals, added to in place */
    bool want_norm;                /* read the gradient norm into norm (a host sync: eager steps only) */
    double norm;
} trainer;

/* One update on the batch {ids, attn, idx, target} (an nb_step_fn, no
 * outputs): forward and loss (under autocast with --amp), backward,
 * gradients clipped to norm 1, AdamW, the loss and the correct predictions
 * added to the totals. */
static nb_status train_step(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    (void)out;
    trainer *t = ctx;
    nb_device dev = nb_device_of(in[0]);
    dev_batch b = {.ids = in[0], .attn = in[1], .idx = in[2], .target = in[3], .m = nb_numel(in[2])};
    mlm_out o = {0};
    nb_scope *s = nb_scope_begin();
    nb_status st = t->amp ? nb_autocast_begin(dev, NB_BF16) : NB_OK;
    if (!st) {
        if ((t->amp && nb_autocast_cache_params(t->amp_ps, t->n_amp)) || !mlm_forward(t->bert, &b, NB_REDUCTION_MEAN, &o))
            st = nb_last_status();
        if (st) fprintf(stderr, "bert_mlm: %s\n", nb_last_error()); /* before the next call */
        if (t->amp) nb_autocast_end(dev);
    }
    nb_module_zero_grad(t->bert);
    if (!st) st = nb_backward(o.loss);
    if (!st) st = nb_clip_grad_norm_module_(t->bert, 1.0, 2.0, t->want_norm ? &t->norm : NULL);
    if (!st) st = nb_optimizer_step(t->opt);
    if (!st) st = accumulate(t->loss_sum, o.loss);
    if (!st) st = accumulate(t->correct, o.correct);
    nb_scope_end(s);
    return st;
}

/* Trains for a->steps updates (or until the --minutes budget). The loss and
 * the correct predictions are summed on the device and read at the log
 * lines only; so is the gradient norm for --log-dir (measured on the
 * steps that end with a log line). */
static bool train(nb_module *bert, nb_mlm_dataset *ds, const args *a, double t_start, bool *diverged,
                  const eval_set *ev) {
    nb_optimizer *opt = NULL;
    int64_t N = nb_mlm_num_sequences(ds), T = a->seq, B = a->batch < N ? a->batch : N;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)N);
    stager g;
    bool staged = stager_init(&g, nb_default_device(), B, T);
    nb_tensor *loss_sum = total_new(g.dev, NB_F64), *correct = total_new(g.dev, NB_I64);
    bool ok = perm && staged && loss_sum && correct && (opt = optimizer(bert, a));
    int64_t epoch = -1, pos = N;
    totals iv = {0};
    double t_iv = now_seconds();
    nb_module_train(bert, true);
    int n_amp = 0; /* --amp: the parameters, cast ahead each step in multi-tensor launches */
    nb_tensor **amp_ps = ok && a->amp ? nb_module_parameter_list(bert, &n_amp) : NULL;
    if (ok && a->amp && !amp_ps) {
        fprintf(stderr, "bert_mlm: %s\n", nb_last_error());
        ok = false;
    }
    trainer tr = {bert, opt, amp_ps, n_amp, a->amp, loss_sum, correct, false, 0};
    /* --compile: every batch has B rows and its masked positions padded to
     * at most what masking takes from B full rows, so one trace serves */
    int64_t pad = a->compile ? B * (int64_t)fmax(1, floor(0.15 * (double)T + 0.5)) : 0;
    nb_compiled *cs = NULL;
    if (ok && a->compile && !(cs = nb_compile(train_step, &tr, 4, 0, &(nb_compile_options){.module = bert}))) {
        fprintf(stderr, "bert_mlm: %s\n", nb_last_error());
        ok = false;
    }
    nb_progress *bar = a->no_progress ? NULL : nb_progress_new(a->steps, &(nb_progress_options){.desc = "train", .unit = "step"});
    for (int64_t step = 1; ok && step <= a->steps; step++) {
        bool log_now = step % a->log_every == 0 || step == a->steps;
        double norm = 0;
        if (pos + B > N) { /* a new epoch: a fresh order and fresh masks */
            ok = nb_mlm_permutation(ds, ++epoch, perm) == NB_OK;
            pos = 0;
        }
        nb_scope *s = nb_scope_begin();
        dev_batch b;
        ok = ok && stage_batch(&g, ds, epoch, perm + pos, B, -1, pad, &b);
        pos += B;
        if (ok && b.m) { /* a batch without masked positions (none to learn from) is skipped */
            ok = nb_optimizer_set_lr(opt, lr_at(a, step)) == NB_OK; /* every group */
            tr.want_norm = a->tb && log_now && !cs;
            nb_tensor *in[4] = {b.ids, b.attn, b.idx, b.target};
            ok = ok && (cs ? nb_compiled_step(cs, in, NULL) : train_step(&tr, in, NULL)) == NB_OK;
            norm = tr.norm;
            iv.masked += b.m, iv.steps++;
        }
        nb_scope_end(s);
        nb_progress_update(bar, 1);
        bool out_of_time = a->minutes > 0 && now_seconds() - t_start > 60 * a->minutes;
        if (ok && (log_now || out_of_time)) {
            ok = read_totals(loss_sum, correct, &iv);
            if (ok && !nb_example_check_loss("bert_mlm", step, iv.loss)) *diverged = true, ok = false;
            double dt = now_seconds() - t_iv, loss = iv.loss / (double)(iv.steps ? iv.steps : 1);
            double acc = (double)iv.correct / (double)(iv.masked ? iv.masked : 1), tps = (double)(iv.steps * B * T) / dt;
            nb_progress_clear(bar); /* the line goes where the bar was */
            if (ok) printf("step %lld: mlm_loss=%.4f mlm_accuracy=%.4f tokens/s=%.0f\n", (long long)step, loss, acc, tps);
            fflush(stdout);
            nb_progress_set_postfix(bar, "mlm_loss=%.4f", loss);
            if (ok && a->tb)
                ok = !nb_summary_writer_add_scalar(a->tb, "train/mlm_loss", loss, step) &&
                     !nb_summary_writer_add_scalar(a->tb, "train/mlm_accuracy", acc, step) &&
                     !nb_summary_writer_add_scalar(a->tb, "train/lr", lr_at(a, step), step) &&
                     !nb_summary_writer_add_scalar(a->tb, "train/tokens_per_sec", tps, step) &&
                     (!log_now || cs || !nb_summary_writer_add_scalar(a->tb, "train/grad_norm", norm, step));
            iv = (totals){0}, t_iv = now_seconds();
            ok = ok && !nb_fill_(loss_sum, 0) && !nb_fill_(correct, 0);
        }
        if (ok && a->eval_every && step % a->eval_every == 0 && step != a->steps && !out_of_time) {
            totals r;
            ok = evaluate(bert, ev->ds, a->batch, ev->frequent, &r);
            nb_module_train(bert, true);
            nb_progress_clear(bar);
            if (ok)
                printf("eval at step %lld (%.0f s): mlm_accuracy=%.4f unigram_accuracy=%.4f (%.2fx)\n",
                       (long long)step, now_seconds() - t_start, (double)r.correct / (double)r.masked,
                       (double)r.unigram / (double)r.masked, (double)r.correct / (double)(r.unigram ? r.unigram : 1));
            fflush(stdout);
            if (ok && a->tb)
                ok = !nb_summary_writer_add_scalar(a->tb, "eval/mlm_accuracy", (double)r.correct / (double)r.masked, step) &&
                     !nb_summary_writer_add_scalar(a->tb, "eval/mlm_loss", r.loss / (double)r.masked, step) &&
                     !nb_summary_writer_flush(a->tb);
            t_iv = now_seconds(); /* the interval's tokens/s leaves the evaluation out */
        }
        if (out_of_time) {
            nb_progress_clear(bar);
            printf("stopping after step %lld: the --minutes %g budget is spent\n", (long long)step, a->minutes);
            break;
        }
    }
    nb_progress_close(bar);
    if (cs) {
        nb_compiled_stats cst = nb_compiled_get_stats(cs);
        printf("compile: %d trace(s), %d graph(s), %lld of %lld steps replayed%s%s\n", cst.traces, cst.graphs,
               (long long)cst.replays, (long long)cst.calls, cst.reason[0] ? "; eager because: " : "", cst.reason);
    }
    nb_compiled_free(cs);
    nb_release(loss_sum), nb_release(correct);
    nb_optimizer_free(opt);
    if (staged) stager_free(&g);
    free(perm), free(amp_ps);
    return ok;
}

/* Loss and accuracies over every masked position of the eval split (its
 * masking is epoch 0 of the eval dataset's seed), in eval mode, no grad. */
static bool evaluate(nb_module *bert, nb_mlm_dataset *ds, int64_t batch, int32_t frequent, totals *r) {
    int64_t N = nb_mlm_num_sequences(ds), T = nb_mlm_seq_len(ds);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)batch);
    stager g;
    bool staged = stager_init(&g, nb_default_device(), batch, T);
    nb_tensor *loss_sum = total_new(g.dev, NB_F64), *correct = total_new(g.dev, NB_I64);
    bool ok = ids && staged && loss_sum && correct, prev = nb_set_grad_enabled(false);
    memset(r, 0, sizeof *r);
    nb_module_train(bert, false);
    for (int64_t i0 = 0; ok && i0 < N; i0 += batch) {
        int64_t n = N - i0 < batch ? N - i0 : batch;
        for (int64_t i = 0; i < n; i++) ids[i] = i0 + i;
        nb_scope *s = nb_scope_begin();
        dev_batch b;
        mlm_out o;
        ok = stage_batch(&g, ds, 0, ids, n, frequent, 0, &b) && mlm_forward(bert, &b, NB_REDUCTION_SUM, &o);
        if (ok && o.loss) ok = !accumulate(loss_sum, o.loss) && !accumulate(correct, o.correct);
        r->masked += b.m, r->unigram += b.unigram;
        nb_scope_end(s);
    }
    int64_t masked = r->masked, unigram = r->unigram;
    ok = ok && read_totals(loss_sum, correct, r);
    r->masked = masked, r->unigram = unigram;
    nb_set_grad_enabled(prev);
    nb_release(loss_sum), nb_release(correct);
    if (staged) stager_free(&g);
    free(ids);
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
    if (gpu_requested(argc, argv)) /* the GPU's defaults; flags still override them */
        a.layers = 6, a.hidden = 512, a.heads = 8, a.batch = 128, a.steps = GPU_STEPS, a.warmup = GPU_WARMUP,
        a.lr = GPU_LR, a.log_every = 200, a.eval_every = 500, a.minutes = 2, a.tf32 = 1;
    if (parse(argc, argv, &a)) return 2;
    nb_set_float32_matmul_precision(a.tf32 ? "high" : "highest");
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
    c.norm_first = a.norm_first, c.bitlinear = a.bitlinear;
    nb_module *bert = nb_bert(c);
    if (!bert) return fail("model");
    char dev[32];
    printf("model: BERT%s %d layers, hidden %lld, %lld heads, %lld parameters; %s, %d threads; batch %lld, %lld steps, "
           "lr %g (warmup %lld, linear decay), AdamW\n",
           a.bitlinear ? " (BitLinear)" : "", a.layers, (long long)a.hidden, (long long)a.heads, (long long)nb_module_num_params(bert),
           nb_device_str(a.device, dev, sizeof dev), nb_get_num_threads(), (long long)a.batch, (long long)a.steps, a.lr,
           (long long)a.warmup);
    {   /* the model's summary for one batch of ids */
        nb_scope *sc = nb_scope_begin();
        nb_tensor *ids = nb_full(NB_SHAPE(a.batch, a.seq), 0, NB_I64);
        nb_status st = ids ? nb_module_summary(bert, 1, &ids, NULL, NULL) : nb_last_status();
        nb_scope_end(sc);
        if (st) return fail("summary");
    }
    fflush(stdout);

    int32_t frequent = nb_mlm_most_frequent_token(train_ds);
    totals r;
    bool diverged = false;
    eval_set ev = {eval_ds, frequent};
    if (a.log_dir && !(a.tb = nb_summary_writer_open(a.log_dir, NULL))) return fail("--log-dir");
    if (!train(bert, train_ds, &a, t0, &diverged, &ev)) {
        nb_summary_writer_close(a.tb); /* what was logged before the failure reaches the file */
        return diverged ? 1 : fail("training");
    }
    if (!evaluate(bert, eval_ds, a.batch, frequent, &r)) return fail("evaluation");
    if (a.tb && (nb_summary_writer_add_scalar(a.tb, "eval/mlm_accuracy", (double)r.correct / (double)r.masked, a.steps) ||
                 nb_summary_writer_add_scalar(a.tb, "eval/mlm_loss", r.loss / (double)r.masked, a.steps) ||
                 nb_summary_writer_close(a.tb)))
        return fail("--log-dir");
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
