/* bench_optim.c - times nb_optimizer_step alone, for every optimizer, over
 * the parameters of the `mlp` workload (784-512-512-10, 669,706 float32
 * parameters) with fixed gradients: the fused kernels (SGD, Adam, AdamW)
 * against the compositions of ops (the rest). LBFGS is left out: its step
 * is dominated by the closure's forward and backward passes.
 *
 *   bench_optim [--steps N] [--warmup N] [--threads N]
 * prints a line per optimizer: workload=optim-<kind> ... median_ms=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static nb_optimizer *make(int k, nb_module *m) {
    switch (k) {
    case 0: return nb_sgd(m, (nb_sgd_options){.lr = 1e-3, .momentum = 0.9});
    case 1: return nb_adam(m, (nb_adam_options){0});
    case 2: return nb_adamw(m, (nb_adam_options){0});
    case 3: return nb_adadelta(m, (nb_adadelta_options){0});
    case 4: return nb_adafactor(m, (nb_adafactor_options){0});
    case 5: return nb_adagrad(m, (nb_adagrad_options){0});
    case 6: return nb_adamax(m, (nb_adamax_options){0});
    case 7: return nb_asgd(m, (nb_asgd_options){0});
    case 8: return nb_nadam(m, (nb_nadam_options){0});
    case 9: return nb_radam(m, (nb_radam_options){0});
    case 10: return nb_rmsprop(m, (nb_rmsprop_options){.momentum = 0.9});
    case 11: return nb_rprop(m, (nb_rprop_options){0});
    case 12: return nb_lion(m, (nb_lion_options){0});
    case 13: return nb_muon(m, (nb_muon_options){0});
    default: return NULL;
    }
}

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    nb_set_num_threads(a.threads);
    nb_manual_seed(0);
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                      nb_nn_linear(512, 10));
    if (!net) return nb_bench_fail("optim");
    /* gradients of sum(p * r), r fixed: each .grad is r */
    nb_named_tensor ps[8];
    int n = nb_module_parameters(net, ps, 8);
    nb_generator g = nb_generator_new(1);
    nb_scope *s = nb_scope_begin();
    nb_tensor *total = NULL;
    for (int i = 0; i < n; i++) {
        nb_tensor *r = nb_randn(nb_dim(ps[i].tensor), nb_shape(ps[i].tensor), NB_F32, &g);
        nb_tensor *t = nb_sum(nb_mul(ps[i].tensor, r), NULL, 0, false);
        total = total ? nb_add(total, t) : t;
    }
    if (nb_backward(total) != NB_OK) return nb_bench_fail("optim");
    nb_scope_end(s);
    double *ms = malloc(sizeof(double) * (size_t)a.steps);
    for (int k = 0; ms && k < 14; k++) {
        nb_optimizer *opt = make(k, net);
        if (!opt) return nb_bench_fail("optim");
        for (int i = 0; i < a.warmup + a.steps; i++) {
            double t = now_ms();
            if (nb_optimizer_step(opt) != NB_OK) return nb_bench_fail("optim");
            if (i >= a.warmup) ms[i - a.warmup] = now_ms() - t;
        }
        qsort(ms, (size_t)a.steps, sizeof *ms, cmp_double);
        double median = a.steps % 2 ? ms[a.steps / 2] : 0.5 * (ms[a.steps / 2 - 1] + ms[a.steps / 2]);
        printf("workload=optim-%s device=cpu mode=fp32 threads=%d params=%lld nabla median_ms=%.3f min_ms=%.3f\n",
               nb_optimizer_kind(opt), nb_get_num_threads(), (long long)nb_module_num_params(net), median, ms[0]);
        nb_optimizer_free(opt);
    }
    free(ms);
    nb_module_free(net);
    return 0;
}
