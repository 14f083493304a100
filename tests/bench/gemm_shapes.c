/* gemm_shapes.c - the float32 GEMMs of one training step of the mlp, cnn and
 * bert workloads (shapes and transposes as backend/cpu/matmul.c and conv.c
 * pass them, row-major), timed through the BLAS nabla loads (blas.c) and,
 * when libdnnl.so.2 can be loaded, through oneDNN's dnnl_sgemm: GFLOP/s
 * per shape (minimum time of --reps runs, the two libraries interleaved),
 * the step's GEMM time at each, and a square 2048^3 GEMM as the BLAS's own
 * peak on this machine.
 *
 *   gemm_shapes [--threads N] [--reps N] [--workload mlp|cnn|bert|all]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas.h"
#include "nabla.h"

typedef struct shape {
    const char *workload;
    int m, n, k;
    char ta, tb; /* 'N' or 'T' */
    float beta;
    int per_step; /* calls per training step */
} shape;

/* From NB_TRACE-style logs of bench_{mlp,cnn,bert} (forward x W^T with the
 * bias preloaded (beta 1), dX = dY W, dW = dY^T X; conv as im2col GEMMs). */
static const shape shapes[] = {
    {"mlp", 128, 512, 784, 'N', 'T', 1, 1},   {"mlp", 128, 512, 512, 'N', 'T', 1, 1},
    {"mlp", 128, 10, 512, 'N', 'T', 1, 1},    {"mlp", 128, 512, 512, 'N', 'N', 0, 1},
    {"mlp", 128, 512, 10, 'N', 'N', 0, 1},    {"mlp", 512, 784, 128, 'T', 'N', 0, 1},
    {"mlp", 512, 512, 128, 'T', 'N', 0, 1},   {"mlp", 10, 512, 128, 'T', 'N', 0, 1},
    {"cnn", 64, 128, 9216, 'N', 'T', 1, 1},   {"cnn", 64, 9216, 128, 'N', 'N', 0, 1},
    {"cnn", 128, 9216, 64, 'T', 'N', 0, 1},   {"cnn", 64, 10, 128, 'N', 'T', 1, 1},
    {"bert", 512, 2304, 768, 'N', 'T', 1, 6}, {"bert", 512, 768, 768, 'N', 'T', 1, 7},
    {"bert", 512, 3072, 768, 'N', 'T', 1, 6}, {"bert", 512, 768, 3072, 'N', 'T', 1, 6},
    {"bert", 512, 30522, 768, 'N', 'T', 1, 1}, {"bert", 512, 768, 2304, 'N', 'N', 0, 6},
    {"bert", 512, 768, 768, 'N', 'N', 0, 7},  {"bert", 512, 768, 3072, 'N', 'N', 0, 6},
    {"bert", 512, 3072, 768, 'N', 'N', 0, 6}, {"bert", 512, 768, 30522, 'N', 'N', 0, 1},
    {"bert", 2304, 768, 512, 'T', 'N', 0, 6}, {"bert", 768, 768, 512, 'T', 'N', 0, 7},
    {"bert", 3072, 768, 512, 'T', 'N', 0, 6}, {"bert", 768, 3072, 512, 'T', 'N', 0, 6},
    {"bert", 30522, 768, 512, 'T', 'N', 0, 1},
};

typedef int (*dnnl_sgemm_fn)(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const nb_cpu_blas *blas;
static dnnl_sgemm_fn dnnl;

/* lib 0: the BLAS, 1: oneDNN; returns seconds of the fastest of reps runs. */
static double run(int lib, const shape *s, const float *a, const float *b, float *c, int reps) {
    int lda = s->ta == 'N' ? s->k : s->m, ldb = s->tb == 'N' ? s->n : s->k;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now_s();
        if (lib == 0)
            blas->sgemm(NB_CBLAS_ROW_MAJOR, s->ta == 'N' ? NB_CBLAS_NO_TRANS : NB_CBLAS_TRANS,
                        s->tb == 'N' ? NB_CBLAS_NO_TRANS : NB_CBLAS_TRANS, s->m, s->n, s->k, 1.0f, a, lda, b, ldb,
                        s->beta, c, s->n);
        else
            dnnl(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, s->beta, c, s->n);
        t = now_s() - t;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = 2, reps = 5;
    const char *which = "all";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workload")) which = argv[i + 1];
    }
    nb_set_num_threads(threads);
    blas = nb_cpu_blas_get();
    if (!blas) return fprintf(stderr, "gemm_shapes: %s\n", nb_last_error()), 1;
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        void *p = dlsym(h, "dnnl_sgemm");
        memcpy(&dnnl, &p, sizeof p);
        /* oneDNN threads through OpenMP: the same count */
        void (*omp_set)(int) = NULL;
        void *q = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
        if (!q) q = dlsym(h, "omp_set_num_threads");
        memcpy(&omp_set, &q, sizeof q);
        if (omp_set) omp_set(threads);
    }
    size_t big = (size_t)30522 * 3072;
    float *a = aligned_alloc(64, big * 4), *b = aligned_alloc(64, big * 4), *c = aligned_alloc(64, big * 4);
    for (size_t i = 0; i < big; i++) a[i] = (float)(i % 97) * 0.01f, b[i] = (float)(i % 89) * 0.01f, c[i] = 0;
    printf("threads=%d reps=%d blas=\"%s\" onednn=%s\n", threads, reps, nb_cpu_blas_info(), dnnl ? "libdnnl.so.2" : "absent");
    shape sq = {"peak", 2048, 2048, 2048, 'N', 'N', 0, 0};
    double tp = run(0, &sq, a, b, c, reps), tq = dnnl ? run(1, &sq, a, b, c, reps) : 0;
    printf("%-5s %6s %6s %6s %2s %9s %9s\n", "work", "m", "n", "k", "op", "blas GF/s", "dnnl GF/s");
    printf("%-5s %6d %6d %6d NN %9.1f %9.1f\n", "peak", 2048, 2048, 2048, 2.0 * 2048 * 2048 * 2048 / tp / 1e9,
           dnnl ? 2.0 * 2048 * 2048 * 2048 / tq / 1e9 : 0.0);
    double step[2][3] = {{0}}, flops[3] = {0};
    const char *wl[3] = {"mlp", "cnn", "bert"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        if (strcmp(which, "all") && strcmp(which, s->workload)) continue;
        int w = !strcmp(s->workload, "mlp") ? 0 : !strcmp(s->workload, "cnn") ? 1 : 2;
        double t0 = run(0, s, a, b, c, reps), t1 = dnnl ? run(1, s, a, b, c, reps) : 0;
        double f = 2.0 * s->m * s->n * s->k;
        printf("%-5s %6d %6d %6d %c%c %9.1f %9.1f\n", s->workload, s->m, s->n, s->k, s->ta, s->tb, f / t0 / 1e9,
               dnnl ? f / t1 / 1e9 : 0.0);
        step[0][w] += t0 * s->per_step, step[1][w] += t1 * s->per_step, flops[w] += f * s->per_step;
    }
    for (int w = 0; w < 3; w++)
        if (flops[w] > 0)
            printf("step %-4s GEMMs: blas %.2f ms (%.1f GF/s), onednn %.2f ms\n", wl[w], 1e3 * step[0][w],
                   flops[w] / step[0][w] / 1e9, 1e3 * step[1][w]);
    free(a), free(b), free(c);
    return 0;
}
