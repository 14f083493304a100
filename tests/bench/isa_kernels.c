/* isa_kernels.c - times the CPU kernels that are compiled per instruction-set
 * level (backend/cpu/isa.h) at the hot shapes of the mlp, cnn and bert
 * workloads, at every level this CPU has, calling each level's table
 * directly: the minimum over --reps runs (robust on a shared machine) and
 * the speedup over the baseline level.
 *
 *   isa_kernels [--threads N] [--reps N]
 * prints one line per kernel: name, shape, then us per call at each level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa.h"
#include "nabla.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static nb_kview view(void *data, nb_dtype dt, int64_t r, int64_t c) {
    nb_kview v = {.data = data, .dtype = dt, .ndim = 2, .shape = {r, c}, .strides = {c, 1}};
    return v;
}
static nb_kview vec(void *data, nb_dtype dt, int64_t n) {
    nb_kview v = {.data = data, .dtype = dt, .ndim = 1, .shape = {n}, .strides = {1}};
    return v;
}

static float *buf(int64_t n, unsigned seed) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    srand(seed);
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX * 4 - 2;
    return p;
}

enum { K_GELU, K_GELU_BW, K_RELU, K_MUL, K_MULS, K_DROPOUT, K_ADAMW, K_CE, K_CE_BW, K_SOFTMAX, K_LN, K_LN_BW,
       K_SUM0, K_CAST_BF16, K_COUNT };
static const char *const names[K_COUNT] = {"gelu", "gelu_backward", "relu", "mul", "mul_scalar", "bernoulli",
                                           "adamw", "cross_entropy", "cross_entropy_bw", "softmax", "layer_norm",
                                           "layer_norm_bw", "sum_dim0", "cast_f32_bf16"};

typedef struct bufs {
    int64_t n, rows, cols;
    float *a, *b, *c, *d, *e, *f;
    int64_t *t;
} bufs;

static void run(const nb_cpu_isa_kernels *k, int which, bufs *B) {
    nb_backend *be = nb_backend_get(NB_CPU);
    int64_t n = B->n, R = B->rows, C = B->cols;
    nb_kview a = vec(B->a, NB_F32, n), b = vec(B->b, NB_F32, n), c = vec(B->c, NB_F32, n);
    switch (which) {
    case K_GELU: k->unary(be, NB_UNARY_GELU, &c, &a, 0); break;
    case K_GELU_BW: k->unary_backward(be, NB_UNARY_GELU, &c, &b, &a, NULL, 0); break;
    case K_RELU: k->unary(be, NB_UNARY_RELU, &c, &a, 0); break;
    case K_MUL: k->binary(be, NB_BINARY_MUL, &c, &a, &b); break;
    case K_MULS: k->unary(be, NB_UNARY_MUL_SCALAR, &c, &a, 1.1); break;
    case K_DROPOUT: k->random(be, &c, NB_RNG_BERNOULLI, 0.9, 0, (nb_philox_state){1, 0, NULL}); break;
    case K_ADAMW: {
        static int64_t step = 0;
        nb_adam_hyper h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                           .decoupled = true, .step = ++step};
        nb_kview g = vec(B->d, NB_F32, n), m = vec(B->e, NB_F32, n), v = vec(B->f, NB_F32, n);
        for (int64_t i = 0; i < 8; i++) ((float *)v.data)[i] = 0; /* keep v >= 0 */
        k->adam_step(be, &c, &g, &m, &v, NULL, &h);
        break;
    }
    case K_CE:
    case K_CE_BW: {
        nb_kview x = view(B->a, NB_F32, R, C), gx = view(B->c, NB_F32, R, C), t = vec(B->t, NB_I64, R);
        nb_kview loss = vec(B->d, NB_F32, R), lse = vec(B->e, NB_F32, R), gl = vec(B->f, NB_F32, R);
        if (which == K_CE) k->cross_entropy(be, &loss, &lse, NULL, &x, &t, -100);
        else k->cross_entropy_backward(be, &gx, &gl, &x, &lse, &t, -100);
        break;
    }
    case K_SOFTMAX: {
        nb_kview x = view(B->a, NB_F32, 4 * 12 * 128, 128), y = view(B->c, NB_F32, 4 * 12 * 128, 128);
        k->softmax(be, &y, &x, 1, false);
        break;
    }
    case K_LN:
    case K_LN_BW: {
        nb_kview x = view(B->a, NB_F32, 512, 768), y = view(B->c, NB_F32, 512, 768), gy = view(B->b, NB_F32, 512, 768);
        nb_kview w = vec(B->d, NB_F32, 768), bb = vec(B->e, NB_F32, 768), mean = vec(B->f, NB_F32, 512),
                 rstd = vec(B->f + 512, NB_F32, 512), gw = vec(B->d + 1024, NB_F32, 768),
                 gb = vec(B->e + 1024, NB_F32, 768);
        nb_layer_norm_args a = {&x, &w, &bb, 1e-5};
        if (which == K_LN) k->layer_norm(be, &y, &mean, &rstd, &a);
        else k->layer_norm_backward(be, &y, &gw, &gb, &gy, &mean, &rstd, &a);
        break;
    }
    case K_SUM0: {
        nb_kview x = view(B->a, NB_F32, 512, 3072), out = view(B->c, NB_F32, 1, 3072);
        k->reduce(be, NB_REDUCE_SUM, &out, &x, 1);
        break;
    }
    case K_CAST_BF16: {
        nb_kview o = vec(B->c, NB_BF16, n);
        k->copy(be, &o, &a);
        break;
    }
    }
}

int main(int argc, char **argv) {
    int threads = 1, reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    nb_set_num_threads(threads);
    const nb_cpu_isa_kernels *tab[NB_CPU_ISA_COUNT] = {&nb_cpu_isa_kernels_baseline};
#if defined(NB_CPU_ISA_X86)
    tab[NB_CPU_ISA_AVX2] = &nb_cpu_isa_kernels_avx2, tab[NB_CPU_ISA_AVX512] = &nb_cpu_isa_kernels_avx512;
#endif
    int top = nb_cpu_isa_max();
    bufs B = {.n = 512 * 3072, .rows = 512, .cols = 30522}; /* bert's FFN activations; its logits */
    int64_t big = B.rows * B.cols;
    B.a = buf(big, 1), B.b = buf(big, 2), B.c = buf(big, 3);
    B.d = buf(B.n, 4), B.e = buf(B.n, 5), B.f = buf(B.n, 6);
    B.t = malloc(sizeof(int64_t) * (size_t)B.rows);
    for (int64_t i = 0; i < B.rows; i++) B.t[i] = (i * 7919) % B.cols;
    for (int64_t i = 0; i < B.n; i++) B.f[i] = B.f[i] * B.f[i]; /* adam's v >= 0 */
    printf("threads=%d reps=%d (min us per call; speedup over baseline)\n%-18s", threads, reps, "kernel");
    for (int l = 0; l <= top; l++) printf(" %18s", nb_cpu_isa_name(l));
    printf("\n");
    for (int w = 0; w < K_COUNT; w++) {
        double best[NB_CPU_ISA_COUNT];
        for (int l = 0; l <= top; l++) best[l] = 1e30;
        for (int r = 0; r < reps; r++)
            for (int l = 0; l <= top; l++) { /* levels interleaved: the same noise for each */
                double t = now_us();
                run(tab[l], w, &B);
                t = now_us() - t;
                if (t < best[l]) best[l] = t;
            }
        printf("%-18s", names[w]);
        for (int l = 0; l <= top; l++) printf(" %10.1f (%4.2fx)", best[l], best[0] / best[l]);
        printf("\n");
    }
    return 0;
}
