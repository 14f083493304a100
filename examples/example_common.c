/* example_common.c - flag parsing and the train/evaluate loop shared by the
 * MNIST examples, with --save/--save-every/--resume checkpoints
 * (nb_save_checkpoint) that resume a run bit for bit. */
#include "example_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_schedule(const char *v) {
    return !strcmp(v, "cosine") ? NB_LR_COSINE : !strcmp(v, "wsd") ? NB_LR_WSD : !strcmp(v, "constant") ? NB_LR_CONSTANT : -1;
}

int nb_example_parse(int argc, char **argv, nb_example_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) goto usage;
        if (!strcmp(f, "--epochs")) a->epochs = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--batch-size")) a->batch_size = strtoll(v, &end, 10);
        else if (!strcmp(f, "--lr")) a->lr = strtod(v, &end);
        else if (!strcmp(f, "--seed")) a->seed = strtoull(v, &end, 10);
        else if (!strcmp(f, "--threads")) a->threads = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--data")) a->data = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--save")) a->save = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--save-every")) a->save_every = strtoll(v, &end, 10);
        else if (!strcmp(f, "--resume")) a->resume = v, end = (char *)v + strlen(v);
        else if (!strcmp(f, "--stop-after")) a->stop_after = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--lr-schedule")) a->schedule = parse_schedule(v), end = (char *)v + strlen(v);
        else goto usage;
        if (!end || *end || end == v) goto usage;
        i++;
    }
    if (a->epochs >= 1 && a->batch_size >= 1 && a->lr > 0 && a->threads >= 0 && a->save_every >= 0 &&
        a->stop_after >= 0 && (!a->save_every || a->save) && a->schedule >= 0)
        return 0;
usage:
    fprintf(stderr,
            "usage: %s [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]\n"
            "          [--save PATH [--save-every STEPS]] [--resume PATH] [--stop-after EPOCHS]\n"
            "          [--lr-schedule cosine|wsd|constant]\n",
            argv[0]);
    return 2;
}

double nb_example_accuracy(nb_module *net, nb_dataset *test, int64_t batch_size) {
    nb_loader *ld = nb_loader_new(test, (nb_loader_options){.batch_size = batch_size});
    if (!ld) return -1;
    bool was_training = nb_module_is_training(net), prev = nb_set_grad_enabled(false);
    nb_module_train(net, false);
    double correct = 0;
    for (nb_batch b; nb_loader_next(ld, &b);) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_argmax(nb_forward(net, b.x), 1, false);
        correct += nb_item(nb_sum(nb_to_dtype(nb_eq(pred, b.y), NB_F64), NULL, 0, false));
        nb_scope_end(s);
    }
    nb_module_train(net, was_training);
    nb_set_grad_enabled(prev);
    nb_loader_free(ld);
    return correct / (double)nb_dataset_len(test);
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
    double loss_sum; /* over the current epoch's steps so far */
    int64_t steps;
} run;

/* Writes a->save; user metadata: the epoch's running loss (%.17g round-trips
 * exactly) and the schedule's length. */
static nb_status save_run(const run *r) {
    char sum[40], steps[32], total[32];
    snprintf(sum, sizeof sum, "%.17g", r->loss_sum);
    snprintf(steps, sizeof steps, "%lld", (long long)r->steps);
    snprintf(total, sizeof total, "%lld", (long long)r->total_steps);
    nb_st_pair user[] = {{"epoch_loss_sum", sum}, {"epoch_steps", steps}, {"total_steps", total}};
    nb_checkpoint ck = {.module = r->net, .optimizer = r->opt, .loader = r->loader,
                        .global_step = r->global_step, .user = user, .n_user = 3};
    return nb_save_checkpoint(r->a->save, &ck);
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
    } else {
        r->global_step = ck.global_step;
        r->loss_sum = strtod(sum, NULL);
        r->steps = strtoll(steps, NULL, 10);
    }
    nb_safetensors_free(f);
    return ok;
}

/* The rest of the current epoch; returns the epoch's mean loss, or a
 * negative value on error. */
static double train_epoch(run *r, double *samples) {
    int64_t nbatches = nb_loader_num_batches(r->loader);
    for (nb_batch b; nb_loader_next(r->loader, &b);) {
        set_lr(r->opt, r->a, r->global_step++, r->total_steps);
        nb_scope *step = nb_scope_begin();
        nb_tensor *loss = nb_cross_entropy(nb_forward(r->net, b.x), b.y);
        nb_optimizer_zero_grad(r->opt);
        nb_status st = loss ? nb_backward(loss) : nb_last_status();
        if (st == NB_OK) st = nb_optimizer_step(r->opt);
        double l = nb_item(loss);
        nb_scope_end(step);
        if (st != NB_OK) return -1;
        r->loss_sum += l;
        r->steps++;
        *samples += (double)b.size;
        /* the end of an epoch is saved after its line is printed */
        if (r->a->save_every && r->global_step % r->a->save_every == 0 && nb_loader_position(r->loader) < nbatches &&
            save_run(r) != NB_OK)
            return -1;
    }
    return r->steps ? r->loss_sum / (double)r->steps : -1;
}

nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name) {
    nb_example_result r = {0};
    double t0 = now_seconds();
    run rn = {net, opt, loader, a, 0, nb_loader_num_batches(loader) * a->epochs, 0, 0};
    int first = 0, last = a->stop_after > 0 && a->stop_after < a->epochs ? a->stop_after : a->epochs;
    bool mid_epoch = false; /* resuming inside an epoch: keep its position and running loss */
    if (a->resume) {
        if (!resume_run(&rn, name)) return r;
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
        r.train_loss = train_epoch(&rn, &samples);
        double dt = now_seconds() - te;
        r.test_accuracy = nb_example_accuracy(net, test, 1000);
        if (r.train_loss < 0 || r.test_accuracy < 0) {
            fprintf(stderr, "%s: %s\n", name, nb_last_error());
            return r;
        }
        printf("epoch %d/%d: train_loss=%.4f test_accuracy=%.4f samples/s=%.0f\n", e + 1, a->epochs, r.train_loss,
               r.test_accuracy, samples / dt);
        fflush(stdout);
        if (a->save && save_run(&rn) != NB_OK) {
            fprintf(stderr, "%s: --save: %s\n", name, nb_last_error());
            return r;
        }
    }
    if (first >= last) r.test_accuracy = nb_example_accuracy(net, test, 1000); /* nothing left to train */
    r.seconds = now_seconds() - t0;
    r.ok = true;
    return r;
}
