/* bench_common.h - flags and the timed training-step loop shared by the
 * benchmarks in tests/bench (one output line per workload, in the format of
 * shared/bench/torch_ref.py so the two can be divided). */
#ifndef NB_BENCH_COMMON_H
#define NB_BENCH_COMMON_H

#include "nabla.h"

typedef struct nb_bench_args {
    int steps, warmup, threads;
} nb_bench_args;

/* --steps (20) --warmup (3) --threads (0 = all cores); exits on a bad flag. */
nb_bench_args nb_bench_parse(int argc, char **argv);
/* Prints the last error for workload and returns 1. */
int nb_bench_fail(const char *workload);
/* Times zero_grad + forward + cross_entropy(logits reshaped to [-1, C], y
 * flattened) + backward + step, and prints the result line. Returns 0 on success. */
int nb_bench_train_steps(const char *workload, nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y,
                         const nb_bench_args *a);

#endif
