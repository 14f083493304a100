/* example_common.c - flag parsing and the train/evaluate loop shared by the
 * MNIST examples, with --save/--save-every/--resume checkpoints
 * (nb_save_checkpoint) that resume a run bit for bit. */
#include "example_common.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- flags ------------------------------------------------------------------ */

bool nb_flag_int(const char *prog, const char *flag, const char *v, int64_t min, int64_t max, int64_t *out) {
    const char *d = v[0] == '-' ? v + 1 : v;
    bool digits = *d != 0;
    for (const char *c = d; *c; c++) digits = digits && *c >= '0' && *c <= '9';
    errno = 0;
    long long x = digits ? strtoll(v, NULL, 10) : 0;
    if (!digits || errno == ERANGE || x < min || x > max) {
        fprintf(stderr, "%s: %s %s: must be an integer in [%lld, %lld]\n", prog, flag, v, (long long)min,
                (long long)max);
        return false;
    }
    *out = x;
    return true;
}

bool nb_flag_u64(const char *prog, const char *flag, const char *v, uint64_t *out) {
    bool digits = *v != 0;
    for (const char *c = v; *c; c++) digits = digits && *c >= '0' && *c <= '9';
    errno = 0;
    unsigned long long x = digits ? strtoull(v, NULL, 10) : 0;
    if (!digits || errno == ERANGE) {
        fprintf(stderr, "%s: %s %s: must be an integer in [0, 2^64)\n", prog, flag, v);
        return false;
    }
    *out = x;
    return true;
}

bool nb_flag_double(const char *prog, const char *flag, const char *v, double min, bool min_open, double max,
                    double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno == ERANGE || !isfinite(x) || x < min || (min_open && x == min) || x > max) {
        fprintf(stderr, "%s: %s %s: must be a number in %s%g, %g]\n", prog, flag, v, min_open ? "(" : "[", min, max);
        return false;
    }
    *out = x;
    return true;
}

bool nb_example_set_threads(const char *prog, int64_t n) {
    nb_set_num_threads((int)n);
    if (n > 0 && nb_get_num_threads() != n) {
        fprintf(stderr, "%s: --threads %lld: nabla runs at most %d threads\n", prog, (long long)n, nb_get_num_threads());
        return false;
    }
    return true;
}

bool nb_example_set_device(const char *prog, const char *v, nb_device *out) {
    nb_device d;
    if (nb_device_parse(v, &d) != NB_OK) {
        fprintf(stderr, "%s: --device %s: must be cpu, cuda or cuda:N\n", prog, v);
        return false;
    }
    if (nb_set_default_device(d) != NB_OK) {
        fprintf(stderr, "%s: --device %s: %s\n", prog, v, nb_last_error());
        return false;
    }
    *out = d;
    return true;
}

bool nb_example_check_writable(const char *prog, const char *flag, const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!*path || strlen(path) >= sizeof dir) {
        fprintf(stderr, "%s: %s '%s': not a usable file name\n", prog, flag, path);
        return false;
    }
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else memcpy(dir, path, (size_t)(slash - path)), dir[slash - path] = 0;
    struct stat sb;
    const char *why = stat(dir, &sb) != 0 ? strerror(errno)
                      : !S_ISDIR(sb.st_mode) ? "not a directory"
                      : access(dir, W_OK | X_OK) != 0 ? strerror(errno) : NULL;
    if (why) {
        fprintf(stderr, "%s: %s %s: cannot write in %s: %s\n", prog, flag, path, dir, why);
        return false;
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s %s: is a directory\n", prog, flag, path);
        return false;
    }
    return true;
}

bool nb_example_check_loss(const char *prog, int64_t step, double loss) {
    if (isfinite(loss)) return true;
    fprintf(stderr, "%s: step %lld: the training loss is %g; the run diverged (try a smaller --lr)\n", prog,
            (long long)step, loss);
    return false;
}

static const char *const schedules[] = {"cosine", "wsd", "constant"};

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]\n"
            "          [--save PATH [--save-every STEPS]] [--resume PATH] [--stop-after EPOCHS]\n"
            "          [--lr-schedule cosine|wsd|constant] [--device cpu|cuda|cuda:N] [--cuda-graph]\n"
            "          [--compile] [--amp] [--distributed] [--max-steps N] [--dtype float32|float64]\n"
            "          [--log-dir DIR] [--no-progress] [--onnx PATH] [--bitlinear] (mnist_mlp)\n"
            "          [--images DIR] [--export-images DIR] (mnist_cnn)\n",
            prog);
    return 2;
}

int nb_example_parse(int argc, char **argv, nb_example_args *a) {
    const char *prog = argv[0];
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        bool ok = true;
        if (!strcmp(f, "--cuda-graph") || !strcmp(f, "--compile") || !strcmp(f, "--amp") || !strcmp(f, "--distributed") ||
            !strcmp(f, "--no-progress") || !strcmp(f, "--bitlinear")) { /* bare flags */
            *(!strcmp(f, "--compile") ? &a->compile
              : f[2] == 'c'   ? &a->cuda_graph
              : f[2] == 'a' ? &a->amp
              : f[2] == 'd' ? &a->distributed
              : f[2] == 'b' ? &a->bitlinear
                            : &a->no_progress) = true;
            i--;
            continue;
        }
        if (strncmp(f, "--", 2)) return usage(prog);
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", prog, f);
            return usage(prog);
        }
        if (!strcmp(f, "--epochs")) ok = nb_flag_int(prog, f, v, 1, 100000, &x), a->epochs = (int)x;
        else if (!strcmp(f, "--batch-size")) ok = nb_flag_int(prog, f, v, 1, INT32_MAX, &a->batch_size);
        else if (!strcmp(f, "--lr")) ok = nb_flag_double(prog, f, v, 0, true, DBL_MAX, &a->lr);
        else if (!strcmp(f, "--seed")) ok = nb_flag_u64(prog, f, v, &a->seed);
        else if (!strcmp(f, "--threads")) ok = nb_flag_int(prog, f, v, 0, 4096, &x), a->threads = (int)x;
        else if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--images")) a->images = v;
        else if (!strcmp(f, "--export-images")) a->export_images = v;
        else if (!strcmp(f, "--save")) a->save = v;
        else if (!strcmp(f, "--save-every")) ok = nb_flag_int(prog, f, v, 0, INT64_MAX, &a->save_every);
        else if (!strcmp(f, "--resume")) a->resume = v;
        else if (!strcmp(f, "--log-dir")) a->log_dir = v;
        else if (!strcmp(f, "--onnx")) a->onnx = v;
        else if (!strcmp(f, "--device")) ok = nb_example_set_device(prog, v, &a->device);
        else if (!strcmp(f, "--dtype")) {
            ok = !strcmp(v, "float32") || !strcmp(v, "float64");
            a->dtype = ok && v[5] == '6' ? NB_F64 : NB_F32;
            if (!ok) fprintf(stderr, "%s: --dtype %s: must be float32 or float64\n", prog, v);
        } else if (!strcmp(f, "--max-steps")) ok = nb_flag_int(prog, f, v, 0, INT64_MAX, &a->max_steps);
        else if (!strcmp(f, "--stop-after")) ok = nb_flag_int(prog, f, v, 0, 100000, &x), a->stop_after = (int)x;
        else if (!strcmp(f, "--lr-schedule")) {
            a->schedule = -1;
            for (int k = 0; k < 3; k++)
                if (!strcmp(v, schedules[k])) a->schedule = k;
            if (a->schedule < 0) {
                fprintf(stderr, "%s: --lr-schedule %s: must be cosine, wsd or constant\n", prog, v);
                ok = false;
            }
        } else {
            fprintf(stderr, "%s: unknown flag %s\n", prog, f);
            return usage(prog);
        }
        if (!ok) return 2;
    }
    if (a->cuda_graph && a->compile) {
        fprintf(stderr, "%s: --compile captures its own graphs: drop --cuda-graph\n", prog);
        return 2;
    }
    if (a->cuda_graph && a->device.type != NB_DEVICE_CUDA) {
        fprintf(stderr, "%s: --cuda-graph needs --device cuda\n", prog);
        return 2;
    }
    if (a->save_every && !a->save) {
        fprintf(stderr, "%s: --save-every needs --save PATH\n", prog);
        return 2;
    }
    if (a->save && !nb_example_check_writable(prog, "--save", a->save)) return 2;
    if (a->onnx && !nb_example_check_writable(prog, "--onnx", a->onnx)) return 2;
    return 0;
}

/* A reference of our own to t (it outlives the scope that made it). */
static nb_tensor *keep(nb_tensor *t) {
    nb_retain(t);
    return t;
}

double nb_example_accuracy(nb_module *net, nb_dataset *test, int64_t batch_size) {
    nb_loader *ld = nb_loader_new(test, (nb_loader_options){.batch_size = batch_size});
    if (!ld) return -1;
    bool was_training = nb_module_is_training(net), prev = nb_set_grad_enabled(false);
    nb_module_train(net, false);
    /* counted on the device, read once */
    nb_tensor *correct = keep(nb_full_on(0, NULL, 0, NB_I64, nb_device_of(nb_dataset_x(test))));
    for (nb_batch b; correct && nb_loader_next(ld, &b);) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_argmax(nb_forward(net, b.x), 1, false);
        nb_tensor *c = keep(nb_add(correct, nb_sum(nb_eq(pred, b.y), NULL, 0, false)));
        nb_scope_end(s);
        nb_release(correct);
        correct = c;
    }
    double n = correct && nb_loader_status(ld) == NB_OK ? nb_item(correct) : NAN;
    nb_release(correct);
    nb_module_train(net, was_training);
    nb_set_grad_enabled(prev);
    nb_loader_free(ld);
    return isnan(n) ? -1 : n / (double)nb_dataset_len(test);
}

/* The lr at a step of the run (per batch, PyTorch's schedulers' formulas):
 * cosine: annealing from the peak to 0 over the run (SGDR without restarts,
 * Loshchilov & Hutter 2017; CosineAnnealingLR with eta_min 0); wsd: the
 * peak for the first 2/3 of the steps, then linear to 0 (warmup-stable-decay
 * without warmup, Hu et al. 2024, MiniCPM); constant: the peak. Either decay
 * removes the last epochs' jitter of a constant-lr Adam. */
static void set_lr(nb_optimizer *opt, const nb_example_args *a, int64_t step, int64_t total) {
    double t = (double)step / (double)total, lr = a->lr;
    if (a->schedule == NB_LR_COSINE) lr = 0.5 * a->lr * (1 + cos(3.14159265358979323846 * t));
    else if (a->schedule == NB_LR_WSD && t > 2.0 / 3.0) lr = a->lr * (1 - t) * 3.0;
    nb_optimizer_set_lr(opt, lr);
}

/* A run in progress: what a checkpoint must carry besides the model,
 * optimizer, loader and RNG (nb_checkpoint) is the current epoch's running
 * loss, so that a resumed epoch prints the same mean. */
typedef struct run {
    nb_module *net;
    nb_optimizer *opt;
    nb_loader *loader;
    const nb_example_args *a;
    int64_t global_step, total_steps;
    double loss_sum; /* over the current epoch's steps so far, as of the last read of acc */
    nb_tensor *acc;  /* float64 0-d on the device: loss_sum plus the losses since (ours) */
    int64_t steps;
    /* --cuda-graph: full batches are copied into gx, gy and a step captured
     * once (after warm eager steps) is replayed */
    nb_tensor *gx, *gy;
    nb_graph *graph;
    int warm;
    nb_compiled *compiled; /* --compile: run_step through nb_compile (made at the first step) */
    const char *name;  /* the program, for messages */
    bool reported;     /* the failure's message is printed already */
    nb_tensor **params; /* --amp: the module's parameters, cast ahead each step (nb_autocast_cache_params) */
    int n_params;
    nb_progress *bar;      /* the epoch's progress bar (NULL: none) */
    nb_summary_writer *tb; /* --log-dir (NULL: none) */
    double mark_sum, mark_time, mark_samples; /* at the last logged point: loss_sum, time, samples */
    int64_t mark_steps;
} run;

/* The device sum restarted at loss_sum: float64 additions of each step's
 * float32 loss, in order, so the sum is the same bits as adding on the host.
 * One tensor, updated in place, so a captured step adds into it too. */
static nb_status acc_reset(run *r) {
    if (r->acc) return nb_fill_(r->acc, r->loss_sum);
    nb_scope *s = nb_scope_begin();
    r->acc = keep(nb_full_on(0, NULL, r->loss_sum, NB_F64, nb_default_device()));
    nb_scope_end(s);
    return r->acc ? NB_OK : nb_last_status();
}

/* Reads the device sum into loss_sum (a host sync); false with the message
 * printed if it is not finite (the run diverged). */
static bool acc_read(run *r) {
    double v = nb_item(r->acc);
    if (!nb_example_check_loss(r->name, r->global_step, v)) return r->reported = true, false;
    r->loss_sum = v;
    return true;
}

/* Writes a->save; user metadata: the epoch's running loss (%.17g round-trips
 * exactly) and the schedule's length. */
static nb_status save_run(run *r) {
    if (!acc_read(r)) return NB_ERR_STATE;
    if (r->a->pg && nb_process_group_rank(r->a->pg) > 0) return NB_OK; /* --distributed: rank 0 writes */
    char sum[40], steps[32], total[32], lr[40];
    snprintf(sum, sizeof sum, "%.17g", r->loss_sum);
    snprintf(steps, sizeof steps, "%lld", (long long)r->steps);
    snprintf(total, sizeof total, "%lld", (long long)r->total_steps);
    snprintf(lr, sizeof lr, "%.17g", r->a->lr);
    nb_st_pair user[] = {{"epoch_loss_sum", sum}, {"epoch_steps", steps}, {"total_steps", total}, {"lr", lr},
                         {"lr_schedule", schedules[r->a->schedule]}};
    nb_checkpoint ck = {.module = r->net, .optimizer = r->opt, .loader = r->loader,
                        .global_step = r->global_step, .user = user, .n_user = 5};
    return nb_save_checkpoint(r->a->save, &ck);
}

/* The run's lr and schedule must be the checkpoint's (the optimizer's
 * state was built under them; a different --lr would silently change the
 * run). Files from before these keys were saved are taken as they are. */
static bool resume_flags_match(const run *r, const nb_safetensors *f, const char *name) {
    const char *lr = nb_safetensors_meta(f, "user.lr"), *sch = nb_safetensors_meta(f, "user.lr_schedule");
    char mine[40];
    snprintf(mine, sizeof mine, "%.17g", r->a->lr);
    if (lr && strcmp(lr, mine)) {
        fprintf(stderr, "%s: --resume: %s was trained with --lr %.17g, these flags give --lr %.17g\n", name,
                r->a->resume, strtod(lr, NULL), r->a->lr);
        return false;
    }
    if (sch && strcmp(sch, schedules[r->a->schedule])) {
        fprintf(stderr, "%s: --resume: %s was trained with --lr-schedule %s, these flags give %s\n", name,
                r->a->resume, sch, schedules[r->a->schedule]);
        return false;
    }
    return true;
}

/* Restores a->resume into r; prints the reason and returns false on failure. */
static bool resume_run(run *r, const char *name) {
    nb_checkpoint ck = {.module = r->net, .optimizer = r->opt, .loader = r->loader};
    nb_safetensors *f = NULL;
    if (nb_load_checkpoint(r->a->resume, &ck, &f) != NB_OK) {
        fprintf(stderr, "%s: --resume: %s\n", name, nb_last_error());
        return false;
    }
    const char *sum = nb_safetensors_meta(f, "user.epoch_loss_sum"), *steps = nb_safetensors_meta(f, "user.epoch_steps"),
               *total = nb_safetensors_meta(f, "user.total_steps");
    bool ok = sum && steps && total;
    if (!ok) fprintf(stderr, "%s: --resume: %s was not written by this example\n", name, r->a->resume);
    else if (strtoll(total, NULL, 10) != r->total_steps) {
        fprintf(stderr, "%s: --resume: %s follows a schedule of %s steps, these flags give %lld (use the same --epochs "
                        "and --batch-size)\n", name, r->a->resume, total, (long long)r->total_steps);
        ok = false;
    } else if (!resume_flags_match(r, f, name)) {
        ok = false;
    } else {
        r->global_step = ck.global_step;
        r->loss_sum = strtod(sum, NULL);
        r->steps = strtoll(steps, NULL, 10);
    }
    nb_safetensors_free(f);
    return ok;
}

/* One training step on x, y; the loss is added to acc in place. With
 * --amp the forward pass and the loss run under bfloat16 autocast (the
 * backward pass and the optimizer step outside it, as in PyTorch). */
static nb_status run_step(run *r, nb_tensor *x, nb_tensor *y) {
    nb_scope *step = nb_scope_begin();
    nb_device dev = nb_device_of(x);
    nb_status ast = r->a->amp ? nb_autocast_begin(dev, NB_BF16) : NB_OK;
    bool open = r->a->amp && !ast;
    if (open) ast = nb_autocast_cache_params(r->params, r->n_params); /* multi-tensor casts */
    nb_tensor *loss = ast ? NULL : nb_cross_entropy(nb_forward(r->net, x), y);
    if (!ast && !loss) ast = nb_last_status(); /* before nb_autocast_end, a call of its own */
    if (open) nb_autocast_end(dev);
    nb_optimizer_zero_grad(r->opt);
    nb_status st = ast ? ast : nb_backward(loss);
    if (st == NB_OK) st = r->a->ddp ? nb_ddp_step(r->a->ddp, r->opt) : nb_optimizer_step(r->opt);
    nb_tensor *sum = st == NB_OK ? nb_add(r->acc, nb_to_dtype(nb_detach(loss), NB_F64)) : NULL;
    if (st == NB_OK) st = sum ? nb_copy_(r->acc, sum) : nb_last_status();
    nb_scope_end(step);
    return st;
}

/* A step of batch b through the captured graph (--cuda-graph): a full batch
 * is copied into the static inputs; the first ones run eagerly to warm the
 * caches and the optimizer's state, then one is captured and replayed from
 * then on. A short last batch runs eagerly. */
static nb_status graph_step(run *r, const nb_batch *b) {
    enum { WARM = 3 };
    if (b->size != r->a->batch_size) return run_step(r, b->x, b->y);
    if (!r->gx) {
        nb_scope *s = nb_scope_begin();
        r->gx = keep(nb_zeros_like(b->x)), r->gy = keep(nb_zeros_like(b->y));
        nb_scope_end(s);
        if (!r->gx || !r->gy) return nb_last_status();
    }
    nb_status st = nb_copy_(r->gx, b->x);
    if (!st) st = nb_copy_(r->gy, b->y);
    if (st) return st;
    if (!r->graph && r->warm < WARM) {
        r->warm++;
        return run_step(r, r->gx, r->gy);
    }
    if (!r->graph) {
        nb_device dev = nb_device_of(r->gx);
        if ((st = nb_graph_capture_begin(dev))) return st;
        st = run_step(r, r->gx, r->gy);
        nb_graph *g = nb_graph_capture_end(dev);
        if (st) return nb_graph_free(g), st;
        if (!g) return nb_last_status();
        r->graph = g;
    }
    return nb_graph_replay(r->graph);
}

/* run_step as an nb_step_fn over {x, y}: its loss goes to acc in place. */
static nb_status compiled_work(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    (void)out;
    return run_step(ctx, in[0], in[1]);
}

/* A step of batch b through nb_compile (--compile): eager warm-up calls, then
 * one captured graph per batch shape (the last, short batch is a trace of
 * its own), replayed; eager on the CPU. */
static nb_status compiled_step(run *r, const nb_batch *b) {
    if (!r->compiled && !(r->compiled = nb_compile(compiled_work, r, 2, 0, &(nb_compile_options){.module = r->net})))
        return nb_last_status();
    return nb_compiled_step(r->compiled, (nb_tensor *[]){b->x, b->y}, NULL);
}

/* Every 100 steps, after acc_read: the loss since the last point on the
 * progress bar, and with --log-dir the scalars nb_example_train lists. */
static bool log_point(run *r, double samples) {
    if (r->steps <= r->mark_steps) return true;
    double loss = (r->loss_sum - r->mark_sum) / (double)(r->steps - r->mark_steps), t = now_seconds();
    nb_progress_set_postfix(r->bar, "loss=%.4f", loss);
    if (r->tb) {
        double norm = 0;
        nb_status st = nb_clip_grad_norm_module_(r->net, INFINITY, 2.0, &norm); /* INFINITY: measure only */
        int64_t g = r->global_step;
        if (!st) st = nb_summary_writer_add_scalar(r->tb, "train/loss", loss, g);
        if (!st) st = nb_summary_writer_add_scalar(r->tb, "train/lr", nb_optimizer_get_lr(r->opt), g);
        if (!st) st = nb_summary_writer_add_scalar(r->tb, "train/samples_per_sec", (samples - r->mark_samples) / (t - r->mark_time), g);
        if (!st) st = nb_summary_writer_add_scalar(r->tb, "train/grad_norm", norm, g);
        if (st) return false;
    }
    r->mark_sum = r->loss_sum, r->mark_steps = r->steps, r->mark_time = t, r->mark_samples = samples;
    return true;
}

/* The rest of the current epoch; returns the epoch's mean loss, or a
 * negative value on error. */
static double train_epoch(run *r, double *samples) {
    int64_t nbatches = nb_loader_num_batches(r->loader);
    r->mark_sum = r->loss_sum, r->mark_steps = r->steps, r->mark_time = now_seconds(), r->mark_samples = 0;
    for (nb_batch b; nb_loader_next(r->loader, &b);) {
        set_lr(r->opt, r->a, r->global_step++, r->total_steps);
        nb_status st = r->a->compile ? compiled_step(r, &b) : r->a->cuda_graph ? graph_step(r, &b) : run_step(r, b.x, b.y);
        if (st != NB_OK) return -1;
        r->steps++;
        *samples += (double)b.size;
        nb_progress_update(r->bar, 1);
        if (r->steps % 100 == 0 && (!acc_read(r) || !log_point(r, *samples))) return -1;
        if (r->a->max_steps && r->global_step >= r->a->max_steps) break; /* --max-steps: the run ends here */
        /* the end of an epoch is saved after its line is printed */
        if (r->a->save_every && r->global_step % r->a->save_every == 0 && nb_loader_position(r->loader) < nbatches &&
            save_run(r) != NB_OK)
            return -1;
    }
    if (!acc_read(r)) return -1;
    return r->steps ? r->loss_sum / (double)r->steps : -1;
}

/* Releases what the run made. */
static void run_free(run *r) {
    nb_graph_free(r->graph);
    nb_compiled_free(r->compiled);
    nb_release(r->acc), nb_release(r->gx), nb_release(r->gy);
    free(r->params);
    nb_progress_close(r->bar);
    if (r->tb && nb_summary_writer_close(r->tb) && !r->reported) fprintf(stderr, "%s: --log-dir: %s\n", r->name, nb_last_error());
}

/* Zeros shaped as batch_size of test's samples (on its device). */
static nb_tensor *example_batch(nb_dataset *test, int64_t batch_size) {
    nb_tensor *x = nb_dataset_x(test);
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, nb_shape(x), sizeof(int64_t) * (size_t)nb_dim(x));
    shape[0] = batch_size;
    return nb_full_on(nb_dim(x), shape, 0, nb_dtype_of(x), nb_device_of(x));
}

/* The model's summary (nb_module_summary) for a batch of batch_size samples
 * (at most the test set's: a batch the loader never makes is not measured). */
static bool print_summary(nb_module *net, nb_dataset *test, int64_t batch_size) {
    nb_scope *s = nb_scope_begin();
    int64_t n = nb_dataset_len(test);
    nb_tensor *in = example_batch(test, batch_size < n ? batch_size : n);
    bool ok = in && nb_module_summary(net, 1, &in, NULL, NULL) == NB_OK;
    nb_scope_end(s);
    return ok;
}

nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name) {
    nb_example_result r = {0};
    double t0 = now_seconds();
    run rn = {.net = net, .opt = opt, .loader = loader, .a = a,
              .total_steps = nb_loader_num_batches(loader) * a->epochs, .name = name};
    if (a->amp && !(rn.params = nb_module_parameter_list(net, &rn.n_params))) { /* for nb_autocast_cache_params */
        fprintf(stderr, "%s: %s\n", name, nb_last_error());
        return r;
    }
    bool rank0 = !a->pg || nb_process_group_rank(a->pg) == 0;
    if (rank0 && !a->resume && !print_summary(net, test, a->batch_size)) {
        fprintf(stderr, "%s: summary: %s\n", name, nb_last_error());
        free(rn.params);
        return r;
    }
    if (a->log_dir && rank0 && !(rn.tb = nb_summary_writer_open(a->log_dir, NULL))) {
        fprintf(stderr, "%s: --log-dir: %s\n", name, nb_last_error());
        free(rn.params);
        return r;
    }
    int first = 0, last = a->stop_after > 0 && a->stop_after < a->epochs ? a->stop_after : a->epochs;
    bool mid_epoch = false; /* resuming inside an epoch: keep its position and running loss */
    if (a->resume) {
        if (!resume_run(&rn, name)) {
            run_free(&rn);
            return r;
        }
        mid_epoch = nb_loader_position(loader) < nb_loader_num_batches(loader);
        first = (int)nb_loader_epoch(loader) + !mid_epoch;
        r.train_loss = rn.steps ? rn.loss_sum / (double)rn.steps : 0;
    }
    for (int e = first; e < last; e++) {
        double samples = 0, te = now_seconds();
        nb_module_train(net, true);
        if (!(mid_epoch && e == first)) {
            if (nb_loader_epoch(loader) != e || nb_loader_position(loader) != 0) nb_loader_seek(loader, e, 0);
            rn.loss_sum = 0, rn.steps = 0;
        }
        char desc[64];
        snprintf(desc, sizeof desc, "epoch %d/%d", e + 1, a->epochs);
        nb_progress_close(rn.bar);
        rn.bar = a->no_progress || !rank0 ? NULL
                 : nb_progress_new(nb_loader_num_batches(loader), &(nb_progress_options){.desc = desc, .unit = "batch"});
        if (rn.bar && nb_loader_position(loader)) nb_progress_update(rn.bar, nb_loader_position(loader)); /* resumed */
        r.train_loss = acc_reset(&rn) == NB_OK ? train_epoch(&rn, &samples) : -1;
        nb_progress_close(rn.bar);
        rn.bar = NULL;
        double dt = now_seconds() - te;
        /* a failed epoch's message, before the evaluation's calls clear it */
        r.test_accuracy = r.train_loss < 0 ? -1 : nb_example_accuracy(net, test, 1000);
        if (r.train_loss < 0 || r.test_accuracy < 0) {
            if (!rn.reported) fprintf(stderr, "%s: %s\n", name, nb_last_error());
            run_free(&rn);
            return r;
        }
        printf("epoch %d/%d: train_loss=%.4f test_accuracy=%.4f samples/s=%.0f\n", e + 1, a->epochs, r.train_loss,
               r.test_accuracy, samples / dt);
        fflush(stdout);
        if (rn.tb && (nb_summary_writer_add_scalar(rn.tb, "train/epoch_loss", r.train_loss, rn.global_step) ||
                      nb_summary_writer_add_scalar(rn.tb, "eval/test_accuracy", r.test_accuracy, rn.global_step) ||
                      nb_summary_writer_flush(rn.tb))) {
            fprintf(stderr, "%s: --log-dir: %s\n", name, nb_last_error());
            rn.reported = true;
            run_free(&rn);
            return r;
        }
        if (a->save && save_run(&rn) != NB_OK) {
            if (!rn.reported) fprintf(stderr, "%s: --save: %s\n", name, nb_last_error());
            run_free(&rn);
            return r;
        }
        if (a->max_steps && rn.global_step >= a->max_steps) break;
    }
    if (first >= last) r.test_accuracy = nb_example_accuracy(net, test, 1000); /* nothing left to train */
    if (a->onnx && rank0) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *in = example_batch(test, 1);
        nb_status st = in ? nb_onnx_export(net, 1, &in, a->onnx, NULL) : nb_last_status();
        nb_scope_end(s);
        if (st) {
            fprintf(stderr, "%s: --onnx: %s\n", name, nb_last_error());
            run_free(&rn);
            return r;
        }
        printf("onnx: %s\n", a->onnx);
    }
    r.seconds = now_seconds() - t0;
    run_free(&rn);
    r.ok = true;
    return r;
}

/* ---- --distributed ----------------------------------------------------------- */

bool nb_example_distributed_begin(const char *prog, nb_example_args *a) {
    if (!a->distributed) return true;
    if (a->cuda_graph || a->compile) {
        fprintf(stderr, "%s: --distributed does not capture CUDA graphs yet: drop %s\n", prog,
                a->compile ? "--compile" : "--cuda-graph");
        return false;
    }
    a->device = nb_distributed_local_device(a->device); /* one GPU per rank */
    nb_set_default_device(a->device);
    a->pg = nb_distributed_init((nb_distributed_options){.device = a->device});
    if (!a->pg) {
        fprintf(stderr, "%s: --distributed: %s\n", prog, nb_last_error());
        return false;
    }
    if (nb_process_group_rank(a->pg) > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "%s: --distributed: cannot silence rank %d's output\n", prog, nb_process_group_rank(a->pg));
        return false;
    }
    return true;
}

bool nb_example_distributed_model(const char *prog, nb_example_args *a, nb_module *net) {
    if (!a->pg) return true;
    a->ddp = nb_ddp_new(net, a->pg, NULL);
    if (!a->ddp) fprintf(stderr, "%s: --distributed: %s\n", prog, nb_last_error());
    else printf("%s: rank %d of %d (%s), %d gradient buckets\n", prog, nb_process_group_rank(a->pg),
                nb_process_group_size(a->pg), nb_process_group_backend(a->pg) == NB_DIST_NCCL ? "NCCL" : "MPI",
                nb_ddp_num_buckets(a->ddp));
    return a->ddp != NULL;
}

nb_loader_options nb_example_loader_shard(const nb_example_args *a, nb_loader_options o) {
    if (a->pg) o.num_replicas = nb_process_group_size(a->pg), o.rank = nb_process_group_rank(a->pg);
    return o;
}

void nb_example_distributed_end(nb_example_args *a) {
    nb_ddp_free(a->ddp);
    nb_distributed_destroy(a->pg);
    a->ddp = NULL, a->pg = NULL;
}
