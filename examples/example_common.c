/* example_common.c - flag parsing and the train/evaluate loop shared by the
 * MNIST examples. */
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
        else goto usage;
        if (!end || *end || end == v) goto usage;
        i++;
    }
    if (a->epochs >= 1 && a->batch_size >= 1 && a->lr > 0 && a->threads >= 0) return 0;
usage:
    fprintf(stderr, "usage: %s [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]\n",
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

/* Cosine annealing from the peak lr to 0 over the whole run (SGDR's
 * schedule without restarts, Loshchilov & Hutter 2017; PyTorch's
 * CosineAnnealingLR with eta_min 0, stepped per batch): it removes the
 * last epochs' jitter of a constant-lr Adam. */
static void set_cosine_lr(nb_optimizer *opt, double peak, int64_t step, int64_t total) {
    nb_optimizer_set_lr(opt, 0.5 * peak * (1 + cos(3.14159265358979323846 * (double)step / (double)total)));
}

/* One epoch; returns the mean loss, or a negative value on error. */
static double train_epoch(nb_module *net, nb_optimizer *opt, nb_loader *loader, double *samples,
                          const nb_example_args *a, int64_t *global_step, int64_t total_steps) {
    double loss_sum = 0;
    int64_t steps = 0;
    for (nb_batch b; nb_loader_next(loader, &b);) {
        set_cosine_lr(opt, a->lr, (*global_step)++, total_steps);
        nb_scope *step = nb_scope_begin();
        nb_tensor *loss = nb_cross_entropy(nb_forward(net, b.x), b.y);
        nb_zero_grad(opt);
        nb_status st = loss ? nb_backward(loss) : nb_last_status();
        if (st == NB_OK) st = nb_step(opt);
        double l = nb_item(loss);
        nb_scope_end(step);
        if (st != NB_OK) return -1;
        loss_sum += l;
        steps++;
        *samples += (double)b.size;
    }
    return steps ? loss_sum / (double)steps : -1;
}

nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name) {
    nb_example_result r = {0};
    double t0 = now_seconds();
    int64_t global_step = 0, total_steps = nb_loader_num_batches(loader) * a->epochs;
    for (int e = 0; e < a->epochs; e++) {
        double samples = 0, te = now_seconds();
        nb_module_train(net, true);
        if (e > 0) nb_loader_reset(loader);
        r.train_loss = train_epoch(net, opt, loader, &samples, a, &global_step, total_steps);
        double dt = now_seconds() - te;
        r.test_accuracy = nb_example_accuracy(net, test, 1000);
        if (r.train_loss < 0 || r.test_accuracy < 0) {
            fprintf(stderr, "%s: %s\n", name, nb_last_error());
            return r;
        }
        printf("epoch %d/%d: train_loss=%.4f test_accuracy=%.4f samples/s=%.0f\n", e + 1, a->epochs, r.train_loss,
               r.test_accuracy, samples / dt);
        fflush(stdout);
    }
    r.seconds = now_seconds() - t0;
    r.ok = true;
    return r;
}
