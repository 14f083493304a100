/* bench_common.c - the timed training-step loop of the benchmarks. */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

nb_bench_args nb_bench_parse(int argc, char **argv) {
    nb_bench_args a = {20, 3, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--steps")) a.steps = v;
        else if (!strcmp(argv[i], "--warmup")) a.warmup = v;
        else if (!strcmp(argv[i], "--threads")) a.threads = v;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--warmup N] [--threads N]\n", argv[0]);
            exit(2);
        }
    }
    if (a.steps < 1) a.steps = 1;
    return a;
}

int nb_bench_fail(const char *workload) {
    fprintf(stderr, "bench %s: %s\n", workload, nb_last_error());
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static nb_status one_step(nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y, double *loss) {
    nb_scope *s = nb_scope_begin();
    nb_optimizer_zero_grad(opt);
    nb_tensor *out = nb_forward(net, x);
    nb_tensor *l = out ? nb_cross_entropy(nb_reshape(out, 2, (int64_t[]){-1, nb_size(out, -1)}),
                                          nb_reshape(y, 1, (int64_t[]){-1}))
                       : NULL;
    nb_status st = l ? nb_backward(l) : nb_last_status();
    if (st == NB_OK) st = nb_optimizer_step(opt);
    *loss = nb_item(l);
    nb_scope_end(s);
    return st;
}

int nb_bench_train_steps(const char *workload, nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y,
                         const nb_bench_args *a) {
    double *ms = malloc(sizeof(double) * (size_t)a->steps), loss = 0;
    if (!ms) return 1;
    for (int i = 0; i < a->warmup + a->steps; i++) {
        double t = now_ms();
        if (one_step(net, opt, x, y, &loss) != NB_OK) {
            free(ms);
            return nb_bench_fail(workload);
        }
        if (i >= a->warmup) ms[i - a->warmup] = now_ms() - t;
    }
    qsort(ms, (size_t)a->steps, sizeof *ms, cmp_double);
    double median = a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
    printf("workload=%s device=cpu mode=fp32 threads=%d nabla median_ms=%.3f min_ms=%.3f loss=%.4f blas=\"%s\"\n",
           workload, nb_get_num_threads(), median, ms[0], loss, nb_backend_info(NB_CPU));
    free(ms);
    return 0;
}
