/* attention_memory.c - shows that nabla's fused attention never holds the
 * [L, S] score matrix: one head of dim 64 at seq 16384 (float32), forward
 * and backward (q, k, v require grad; loss = sum(out * r) with a random r),
 * timing both and printing the allocator's peak after nb_memory_reset_peak
 * next to the 1 GiB that one naive [16384, 16384] float32 score matrix
 * needs, then checks a few output rows against a float64 host reference.
 * Also times other shapes, e.g. BERT's attention (batch*heads 48,
 * seq 128, dim 64): attention_memory --batch 48 --seq 128 --steps 20.
 *
 *   attention_memory [--seq N] [--dim N] [--batch N] [--steps N] [--threads N] [--dropout P]
 * prints: workload=attention seq=... dim=... batch=... threads=... fwd_ms=... bwd_ms=... (medians)
 *         peak_mib=... naive_scores_mib=..., a summary line and the check line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nabla.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(void) {
    fprintf(stderr, "attention_memory: %s\n", nb_last_error());
    return 1;
}

typedef struct {
    int64_t seq, dim, batch;
    int steps, threads;
    double dropout;
} args;

static args parse(int argc, char **argv) {
    args a = {16384, 64, 1, 1, 2, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!strcmp(f, "--seq")) a.seq = atoll(v);
        else if (!strcmp(f, "--dim")) a.dim = atoll(v);
        else if (!strcmp(f, "--batch")) a.batch = atoll(v);
        else if (!strcmp(f, "--steps")) a.steps = atoi(v);
        else if (!strcmp(f, "--threads")) a.threads = atoi(v);
        else if (!strcmp(f, "--dropout")) a.dropout = atof(v);
        else {
            fprintf(stderr, "usage: %s [--seq N] [--dim N] [--batch N] [--steps N] [--threads N] [--dropout P]\n",
                    argv[0]);
            exit(2);
        }
    }
    if (a.steps < 1) a.steps = 1;
    return a;
}

/* Max |out - reference| over a few rows of batch 0, the reference computed
 * on the host in double: softmax(q_i . k_j / sqrt(E)) v (no dropout). */
static double check_rows(nb_tensor *const *qkv, int64_t seq, int64_t dim) {
    size_t n = (size_t)(seq * dim);
    float *h[4];
    for (int i = 0; i < 4; i++) h[i] = malloc(sizeof(float) * n);
    double err = -1, *w = malloc(sizeof(double) * (size_t)seq);
    nb_scope *s = nb_scope_begin();
    nb_tensor *q0 = nb_narrow(qkv[0], 0, 0, 1), *k0 = nb_narrow(qkv[1], 0, 0, 1), *v0 = nb_narrow(qkv[2], 0, 0, 1);
    nb_tensor *out = nb_scaled_dot_product_attention(q0, k0, v0, (nb_sdpa_options){0});
    nb_tensor *t[4] = {q0, k0, v0, out};
    bool ok = w && out;
    for (int i = 0; i < 4 && ok; i++) ok = h[i] && nb_to_host(t[i], h[i], sizeof(float) * n) == NB_OK;
    int64_t rows[4] = {0, 1, seq / 2, seq - 1};
    for (int r = 0; r < 4 && ok; r++) {
        const float *qi = h[0] + rows[r] * dim;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < seq; j++) {
            double d = 0;
            for (int64_t e = 0; e < dim; e++) d += (double)qi[e] * h[1][j * dim + e];
            w[j] = d / sqrt((double)dim), mx = fmax(mx, w[j]);
        }
        for (int64_t j = 0; j < seq; j++) sum += (w[j] = exp(w[j] - mx));
        for (int64_t e = 0; e < dim; e++) {
            double o = 0;
            for (int64_t j = 0; j < seq; j++) o += w[j] * h[2][j * dim + e];
            err = fmax(err, fabs(o / sum - h[3][rows[r] * dim + e]));
        }
    }
    nb_scope_end(s);
    for (int i = 0; i < 4; i++) free(h[i]);
    free(w);
    return err;
}

/* One forward and backward; times in *fwd and *bwd (ms). */
static nb_status step(nb_tensor *const *qkv, nb_tensor *r, double p, double *fwd, double *bwd) {
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < 3; i++) nb_tensor_zero_grad(qkv[i]);
    double t0 = now_ms();
    nb_tensor *out = nb_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], (nb_sdpa_options){.dropout_p = p});
    double t1 = now_ms();
    nb_tensor *loss = nb_sum(nb_mul(out, r), NULL, 0, false);
    double t2 = now_ms();
    nb_status st = loss ? nb_backward(loss) : nb_last_status();
    double t3 = now_ms();
    nb_scope_end(s);
    *fwd = t1 - t0, *bwd = t3 - t2;
    return st;
}

int main(int argc, char **argv) {
    args a = parse(argc, argv);
    nb_set_num_threads(a.threads);
    nb_generator g = nb_generator_new(0);
    nb_tensor *qkv[3], *r;
    for (int i = 0; i < 3; i++) {
        qkv[i] = nb_randn(NB_SHAPE(a.batch, a.seq, a.dim), NB_F32, &g);
        if (!qkv[i] || nb_set_requires_grad(qkv[i], true)) return fail();
    }
    if (!(r = nb_randn(NB_SHAPE(a.batch, a.seq, a.dim), NB_F32, &g))) return fail();
    double *fwd = malloc(sizeof(double) * (size_t)a.steps), *bwd = malloc(sizeof(double) * (size_t)a.steps);
    if (!fwd || !bwd) return 1;
    double warm_f, warm_b; /* the first step loads OpenBLAS and fills the allocator's cache */
    if (a.steps > 1 && step(qkv, r, a.dropout, &warm_f, &warm_b)) return fail();
    for (int i = 0; i < 3; i++) nb_tensor_zero_grad(qkv[i]);
    nb_memory_reset_peak(NB_CPU);
    size_t before = nb_memory_stats_get(NB_CPU).allocated;
    for (int i = 0; i < a.steps; i++)
        if (step(qkv, r, a.dropout, &fwd[i], &bwd[i])) return fail();
    nb_memory_stats m = nb_memory_stats_get(NB_CPU);
    qsort(fwd, (size_t)a.steps, sizeof *fwd, cmp_double);
    qsort(bwd, (size_t)a.steps, sizeof *bwd, cmp_double);
    double mib = 1024.0 * 1024.0, naive = (double)(a.batch * a.seq * a.seq) * 4 / mib;
    printf("workload=attention seq=%lld dim=%lld batch=%lld dtype=float32 dropout=%g threads=%d steps=%d "
           "fwd_ms=%.2f bwd_ms=%.2f total_ms=%.2f peak_mib=%.1f peak_above_inputs_mib=%.1f naive_scores_mib=%.0f\n",
           (long long)a.seq, (long long)a.dim, (long long)a.batch, a.dropout, nb_get_num_threads(), a.steps,
           fwd[a.steps / 2], bwd[a.steps / 2], fwd[a.steps / 2] + bwd[a.steps / 2], (double)m.peak_allocated / mib,
           (double)(m.peak_allocated - before) / mib, naive);
    printf("inputs (q, k, v, r) %.1f MiB; one naive [batch, %lld, %lld] float32 score matrix %.0f MiB; "
           "nabla's peak %.1f MiB (%.1f%% of it)\n",
           (double)before / mib, (long long)a.seq, (long long)a.seq, naive, (double)m.peak_allocated / mib,
           100.0 * (double)m.peak_allocated / mib / naive);
    double err = check_rows(qkv, a.seq, a.dim);
    if (err < 0) return fail();
    printf("check: rows 0, 1, %lld, %lld of batch 0 against a float64 host reference: max |diff| = %.2e\n",
           (long long)a.seq / 2, (long long)a.seq - 1, err);
    free(fwd);
    free(bwd);
    for (int i = 0; i < 3; i++) nb_release(qkv[i]);
    nb_release(r);
    return 0;
}
