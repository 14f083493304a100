/* bench_common.c - the timed training-step loop of the benchmarks. */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(const char *prog) {
    fprintf(stderr, "usage: %s [--steps N] [--warmup N] [--threads N] [--device cpu|cuda|cuda:N] [--tf32] "
                    "[--config NAME] [--amp] [--graph] [--fuse] [--compile] [--profile] [--distributed] [--batch N] [--seq N] "
                    "[--dropout P]\n",
            prog);
    exit(2);
}

static nb_process_group *group; /* left at exit (MPI must be finalized) */
static void leave_group(void) { nb_distributed_destroy(group); }

nb_bench_args nb_bench_parse(int argc, char **argv) {
    nb_bench_args a = {.steps = 20, .warmup = 3, .device = NB_CPU, .dropout = -1};
    bool distributed = false;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--distributed")) {
            distributed = true;
            continue;
        }
        if (!strcmp(f, "--fuse")) { /* --graph with nb_graph_options.fuse */
            a.graph = a.fuse = true;
            continue;
        }
        if (!strcmp(f, "--compile")) {
            a.compile = true;
            continue;
        }
        if (!strcmp(f, "--tf32") || !strcmp(f, "--profile") || !strcmp(f, "--graph") || !strcmp(f, "--amp")) {
            *(f[2] == 't' ? &a.tf32 : f[2] == 'p' ? &a.profile : f[2] == 'g' ? &a.graph : &a.amp) = true;
            continue;
        }
        if (i + 1 >= argc) usage(argv[0]);
        const char *v = argv[++i];
        if (!strcmp(f, "--steps")) a.steps = atoi(v);
        else if (!strcmp(f, "--warmup")) a.warmup = atoi(v);
        else if (!strcmp(f, "--threads")) a.threads = atoi(v);
        else if (!strcmp(f, "--config")) a.variant = v;
        else if (!strcmp(f, "--padding")) a.padding = atoi(v);
        else if (!strcmp(f, "--batch")) a.batch = atoi(v);
        else if (!strcmp(f, "--seq")) a.seq = atoi(v);
        else if (!strcmp(f, "--dropout")) {
            a.dropout = atof(v);
            if (!(a.dropout >= 0 && a.dropout < 1)) usage(argv[0]);
        } else if (!strcmp(f, "--device")) {
            if (nb_device_parse(v, &a.device) != NB_OK) usage(argv[0]);
        } else usage(argv[0]);
    }
    if (a.steps < 1) a.steps = 1;
    if (a.warmup < 0) a.warmup = 0;
    if (a.compile && a.graph) {
        fprintf(stderr, "%s: --compile captures its own graph: drop --graph/--fuse\n", argv[0]);
        exit(2);
    }
    nb_set_num_threads(a.threads);
    if (distributed) a.device = nb_distributed_local_device(a.device); /* one GPU per rank */
    if (distributed && !(a.pg = nb_distributed_init((nb_distributed_options){.device = a.device}))) {
        fprintf(stderr, "%s: --distributed: %s\n", argv[0], nb_last_error());
        exit(2);
    }
    if (a.pg) group = a.pg, atexit(leave_group);
    if (nb_set_default_device(a.device) != NB_OK ||
        nb_set_float32_matmul_precision(a.tf32 ? "high" : "highest") != NB_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], nb_last_error());
        exit(2);
    }
    nb_manual_seed(0);
    return a;
}

int nb_bench_fail(const char *workload) {
    fprintf(stderr, "bench %s: %s\n", workload, nb_last_error());
    return 1;
}

double nb_bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

int nb_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One step (without the timing's synchronize); the loss tensor is kept (in
 * *loss) for the final read. */
static bool amp; /* --amp */
static nb_ddp *ddp; /* --distributed */
/* --amp: the parameters, cast ahead in multi-tensor launches (nb_autocast_cache_params) */
static nb_tensor **amp_params;
static int n_amp_params;
static nb_tensor *(*forward)(nb_module *net, nb_tensor *x, void *ctx); /* nb_bench_args.forward */
static void *forward_ctx;

static nb_status step_work(nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y, nb_tensor **loss) {
    nb_scope *s = nb_scope_begin();
    nb_optimizer_zero_grad(opt);
    if (amp) nb_autocast_begin(nb_device_of(x), NB_BF16);
    nb_status cst = amp ? nb_autocast_cache_params(amp_params, n_amp_params) : NB_OK;
    nb_tensor *out = cst != NB_OK ? NULL : forward ? forward(net, x, forward_ctx) : nb_forward(net, x);
    nb_tensor *l = out ? nb_cross_entropy(nb_reshape(out, 2, (int64_t[]){-1, nb_size(out, -1)}),
                                          nb_reshape(y, 1, (int64_t[]){-1}))
                       : NULL;
    if (amp) nb_autocast_end(nb_device_of(x));
    nb_status st = l ? nb_backward(l) : nb_last_status();
    if (st == NB_OK) st = ddp ? nb_ddp_step(ddp, opt) : nb_optimizer_step(opt);
    nb_release(*loss);
    *loss = NULL;
    if (st == NB_OK) *loss = nb_detach(l), nb_retain(*loss);
    nb_scope_end(s);
    return st;
}

/* --compile: step_work as an nb_step_fn over inputs {x, y} and output {loss}. */
typedef struct bench_model {
    nb_module *net;
    nb_optimizer *opt;
} bench_model;
static nb_status compiled_work(void *ctx, nb_tensor *const *in, nb_tensor **out) {
    bench_model *m = ctx;
    return step_work(m->net, m->opt, in[0], in[1], &out[0]);
}

/* One timed step: eager, a replay (with a graph) or a compiled call (with c;
 * its loss is borrowed); ends with a device synchronize. */
static nb_status one_step(nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y, nb_tensor **loss,
                          nb_graph *g, nb_compiled *c) {
    nb_status st = c ? nb_compiled_step(c, (nb_tensor *[]){x, y}, loss)
                   : g ? nb_graph_replay(g) : step_work(net, opt, x, y, loss);
    return st == NB_OK ? nb_device_synchronize(nb_device_of(x)) : st;
}

/* torch_ref.py's mode string: fp32, or tf32/amp/graph joined by '+' (graph+fuse with --fuse, compile with --compile). */
static const char *mode_name(const nb_bench_args *a) {
    static char m[40];
    snprintf(m, sizeof m, "%s%s%s%s%s%s%s", a->tf32 ? "tf32" : "", a->tf32 && a->amp ? "+" : "", a->amp ? "amp" : "",
             (a->tf32 || a->amp) && (a->graph || a->compile) ? "+" : "", a->graph ? "graph" : "",
             a->fuse ? "+fuse" : "", a->compile ? "compile" : "");
    if (!m[0]) snprintf(m, sizeof m, "fp32");
    return m;
}

/* The run's host buffers freed (every exit of nb_bench_train_steps); rc passed through. */
static int train_steps_end(double *ms, int rc) {
    free(ms), free(amp_params), amp_params = NULL;
    return rc;
}

int nb_bench_train_steps(const char *workload, nb_module *net, nb_optimizer *opt, nb_tensor *x, nb_tensor *y,
                         const nb_bench_args *a) {
    double *ms = malloc(sizeof(double) * (size_t)a->steps);
    nb_tensor *loss = NULL;
    if (!ms) return 1;
    nb_device dev = nb_device_of(x);
    nb_device_counters c0 = {0};
    nb_graph *g = NULL;
    uint64_t graph_kernels = 0; /* kernels the capture recorded into the graph */
    amp = a->amp;
    forward = a->forward, forward_ctx = a->forward_ctx;
    if (amp && !(amp_params = nb_module_parameter_list(net, &n_amp_params))) /* for nb_autocast_cache_params */
        return train_steps_end(ms, nb_bench_fail(workload));
    if (a->pg && !(ddp = nb_ddp_new(net, a->pg, NULL))) return train_steps_end(ms, nb_bench_fail(workload));
    bench_model model = {net, opt};
    nb_compiled *c = NULL; /* --compile: the last warm-up call captures */
    if (a->compile && !(c = nb_compile(compiled_work, &model, 2, 1,
                                       &(nb_compile_options){.module = net, .warmup = a->warmup > 1 ? a->warmup - 1 : 1})))
        return train_steps_end(ms, nb_bench_fail(workload));
    for (int i = 0; i < a->warmup + a->steps; i++) {
        if (i == a->warmup && a->graph) { /* capture one step after the eager warm-up */
            uint64_t k0 = nb_device_counters_get(dev).kernel_launches;
            nb_status st = nb_graph_capture_begin_with(dev, &(nb_graph_options){.fuse = a->fuse});
            if (!st) st = step_work(net, opt, x, y, &loss);
            char why[512];
            snprintf(why, sizeof why, "%s", nb_last_error()); /* the first failure's message */
            nb_graph *cg = nb_graph_is_capturing(dev) ? nb_graph_capture_end(dev) : NULL;
            if (st || !cg) {
                if (!st) snprintf(why, sizeof why, "%s", nb_last_error());
                fprintf(stderr, "bench %s: %s\n", workload, why);
                nb_graph_free(cg);
                nb_release(loss);
                return train_steps_end(ms, 1);
            }
            g = cg;
            graph_kernels = nb_device_counters_get(dev).kernel_launches - k0;
        }
        if (i == a->warmup) {
            c0 = nb_device_counters_get(dev);
            if (a->profile) nb_profiler_start();
        }
        double t = nb_bench_now_ms();
        if (one_step(net, opt, x, y, &loss, g, c) != NB_OK) {
            nb_graph_free(g);
            if (!c) nb_release(loss); /* a compiled step's is borrowed */
            nb_compiled_free(c);
            return train_steps_end(ms, nb_bench_fail(workload));
        }
        if (i >= a->warmup) ms[i - a->warmup] = nb_bench_now_ms() - t;
    }
    nb_device_counters c1 = nb_device_counters_get(dev);
    if (a->profile) nb_profiler_report(stderr);
    double l = nb_item(loss); /* with a graph: the captured step's loss, as the last replay left it */
    if (c) graph_kernels = nb_compiled_get_stats(c).graph_kernels;
    if (!c) nb_release(loss);
    nb_graph_free(g);
    nb_compiled_free(c);
    nb_ddp_free(ddp);
    ddp = NULL;
    qsort(ms, (size_t)a->steps, sizeof *ms, nb_bench_cmp_double);
    char world[32] = "";
    if (a->pg) {
        snprintf(world, sizeof world, "world=%d ", nb_process_group_size(a->pg));
        if (nb_process_group_rank(a->pg) != 0) return train_steps_end(ms, 0); /* rank 0 reports */
    }
    double median = a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
    char d[32];
    printf("workload=%s device=%s mode=%s threads=%d %snabla median_ms=%.3f min_ms=%.3f loss=%.4f "
           "launches_per_step=%.1f syncs_per_step=%.1f graph_kernels=%llu info=\"%s\"\n",
           workload, nb_device_str(dev, d, sizeof d), mode_name(a), nb_get_num_threads(), world, median,
           ms[0], l, (double)(c1.kernel_launches - c0.kernel_launches) / a->steps,
           (double)(c1.host_syncs - c0.host_syncs) / a->steps, (unsigned long long)graph_kernels, nb_backend_info(dev));
    return train_steps_end(ms, 0);
}
