/* bench_common.h - flags and the timed training-step loop shared by the
 * benchmarks in tests/bench (one output line per workload, in the format of
 * shared/bench/torch_ref.py so the two can be divided). */
#ifndef NB_BENCH_COMMON_H
#define NB_BENCH_COMMON_H

#include "nabla.h"

typedef struct nb_bench_args {
    int steps, warmup, threads;
    nb_device device;
    bool tf32;
    bool amp;     /* --amp: forward under bf16 autocast (torch_ref.py's --amp) */
    bool graph;   /* --graph: the timed steps replay one captured step (CUDA graphs) */
    bool fuse;    /* --fuse: --graph, the capture fusing elementwise ops (nb_graph_options.fuse) */
    bool compile; /* --compile: the steps through nb_compile (warm-up calls eager, then a fused graph) */
    bool profile; /* --profile: the kernel-slot profile of the timed steps (nb_profiler_report) */
    const char *variant; /* a workload's own flag (bench_bert: --config bert-base) */
    int padding;         /* --padding N: bench_bert's padded sequences (its comment) */
    int batch, seq;      /* --batch N, --seq N: bench_gpt's shape (0: the workload's default) */
    double dropout;      /* --dropout P: bench_gpt's three dropouts (-1: the workload's default) */
    /* The step's forward: NULL for nb_forward(net, x), else forward(net, x, forward_ctx)
     * (bench_bert passes its attention mask this way) */
    nb_tensor *(*forward)(nb_module *net, nb_tensor *x, void *ctx);
    void *forward_ctx;
    nb_process_group *pg; /* --distributed: DDP over the launcher's ranks (weak scaling: each
                             rank steps its own batch; rank 0 prints, with world=N) */
} nb_bench_args;

/* --steps (20) --warmup (3) --threads (0 = all cores) --device (cpu; cuda,
 * cuda:N) --tf32 (nb_set_float32_matmul_precision("high")) and, for the
 * workloads that have one, --config NAME, --padding N, --batch N, --seq N,
 * --dropout P, --amp (the forward and loss under
 * nb_autocast bfloat16), --graph (after the warm-up steps
 * one step is captured and the timed steps replay it, as torch_ref.py's
 * --graph), --fuse (--graph with fusion), --compile (every step through
 * nb_compile: the warm-up's last call captures a fused graph that the timed
 * steps replay), --profile and --distributed (under mpirun or torchrun; with
 * --device cuda each rank takes cuda:LOCAL_RANK when several GPUs are
 * visible). Sets the threads, the default
 * device, the matmul precision and the seed (0); exits with a message on a
 * bad flag or a device this build cannot use. */
nb_bench_args nb_bench_parse(int argc, char **argv);
/* Prints the last error for workload and returns 1. */
int nb_bench_fail(const char *workload);
/* CLOCK_MONOTONIC in milliseconds. */
double nb_bench_now_ms(void);
/* qsort's comparator for doubles, ascending (medians). */
int nb_bench_cmp_double(const void *a, const void *b);
/* Times zero_grad + forward + cross_entropy(logits reshaped to [-1, C], y
 * flattened) + backward + step, each step ended by a device synchronize
 * (as torch_ref.py's), the loss read back once at the end. Prints the result
 * line, with the kernel launches and host synchronizations per step where
 * the device counts them (the syncs include the timing's own, one a step). Returns 0 on success. */
int nb_bench_train_steps(const char *workload, nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y,
                         const nb_bench_args *a);

#endif
