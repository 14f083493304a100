/* bench_bitnet.c - BitNet b1.58's packed ternary product (nb_bitnet_linear:
 * int8 activations, 2-bit weights) and the int8 weight-only product
 * (nb_linear_int8) against the float32 product (nb_linear through the
 * BLAS) at BERT-base's and Llama-3.2-1B's linear shapes, batch 1 and 32:
 * median milliseconds over --reps calls, and the weight bytes each reads,
 * on the CPU or (--device cuda) the GPU, where the float product is also
 * timed in bfloat16 (cuBLAS) and the int8 one takes bfloat16 activations.
 *
 *   bench_bitnet [--threads N] [--reps N] [--device cpu|cuda]
 *
 * Prints a line per shape: shape, rows, f32 ms, bf16 ms (GPU; 0 on the
 * CPU), packed ms, the packed product's speed-up over the faster float
 * one, int8 ms and its speed-up, and the weight MB of float32, of the
 * packed form and of int8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "nabla.h"

static nb_device dev;

/* The median of reps timed calls of f (after one untimed), each waited for. */
static double median_ms(nb_tensor *(*f)(void *), void *ctx, int reps) {
    double *t = malloc(sizeof *t * (size_t)reps);
    if (!t) return -1;
    nb_scope *s = nb_scope_begin();
    if (!f(ctx) || nb_device_synchronize(dev)) return free(t), -1;
    nb_scope_end(s);
    for (int r = 0; r < reps; r++) {
        s = nb_scope_begin();
        double t0 = nb_bench_now_ms();
        nb_tensor *y = f(ctx);
        if (nb_device_synchronize(dev)) y = NULL;
        t[r] = nb_bench_now_ms() - t0;
        nb_scope_end(s);
        if (!y) return free(t), -1;
    }
    qsort(t, (size_t)reps, sizeof *t, nb_bench_cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

typedef struct run {
    nb_tensor *x, *w, *packed, *scale, *xh, *wh, *q, *qs;
} run;

static nb_tensor *f32_product(void *c) {
    run *r = c;
    return nb_linear(r->x, r->w, NULL);
}
static nb_tensor *bf16_product(void *c) {
    run *r = c;
    return nb_linear(r->xh, r->wh, NULL);
}
static nb_tensor *int8_product(void *c) {
    run *r = c;
    return nb_linear_int8(r->xh ? r->xh : r->x, r->q, r->qs, NULL);
}
static nb_tensor *packed_product(void *c) {
    run *r = c;
    return nb_bitnet_linear(r->x, r->packed, r->scale, NULL);
}

int main(int argc, char **argv) {
    int threads = 0, reps = 20;
    dev = NB_CPU;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--device") && nb_device_parse(argv[i + 1], &dev) == NB_OK) continue;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps N] [--device cpu|cuda]\n", argv[0]);
            return 2;
        }
    }
    if (nb_set_default_device(dev) != NB_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], nb_last_error());
        return 1;
    }
    bool gpu = dev.type != NB_DEVICE_CPU;
    if (threads > 0) nb_set_num_threads(threads);
    if (reps < 1) {
        fprintf(stderr, "%s: bad --threads or --reps\n", argv[0]);
        return 2;
    }
    static const struct {
        const char *name;
        int64_t n, k;
    } shapes[] = {{"bert-base qkv/o", 768, 768},     {"bert-base ffn up", 3072, 768}, {"bert-base ffn down", 768, 3072},
                  {"llama-1b q/o", 2048, 2048},      {"llama-1b k/v", 512, 2048},     {"llama-1b gate/up", 8192, 2048},
                  {"llama-1b down", 2048, 8192}};
    char dn[32];
    printf("bench_bitnet: %s, %d threads, median of %d calls\n", nb_device_str(dev, dn, sizeof dn),
           nb_get_num_threads(), reps);
    printf("%-20s %5s %10s %10s %10s %8s %10s %8s %9s %9s %9s\n", "shape [N, K]", "rows", "f32 ms", "bf16 ms",
           "packed ms", "vs best", "int8 ms", "vs best", "f32 MB", "packed MB", "int8 MB");
    nb_generator g = nb_generator_new(1);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int64_t M = 1; M <= 32; M += 31) {
            nb_scope *s = nb_scope_begin();
            run r = {.x = nb_randn_on(2, (int64_t[]){M, shapes[i].k}, NB_F32, &g, dev),
                     .w = nb_randn_on(2, (int64_t[]){shapes[i].n, shapes[i].k}, NB_F32, &g, dev)};
            if (gpu) r.xh = nb_to_dtype(r.x, NB_BF16), r.wh = nb_to_dtype(r.w, NB_BF16);
            if (!r.x || !r.w || (gpu && (!r.xh || !r.wh)) || nb_bitnet_pack(r.w, &r.packed, &r.scale) != NB_OK ||
                nb_int8_weight_quantize(r.w, &r.q, &r.qs) != NB_OK) {
                fprintf(stderr, "bench_bitnet: %s\n", nb_last_error());
                return 1;
            }
            double a = median_ms(f32_product, &r, reps), h = gpu ? median_ms(bf16_product, &r, reps) : 0,
                   b = median_ms(packed_product, &r, reps), q = median_ms(int8_product, &r, reps);
            if (a < 0 || h < 0 || b < 0 || q < 0) {
                fprintf(stderr, "bench_bitnet: %s\n", nb_last_error());
                return 1;
            }
            double best = gpu && h < a ? h : a;
            printf("%-20s %5lld %10.4f %10.4f %10.4f %7.2fx %10.4f %7.2fx %9.2f %9.2f %9.2f\n", shapes[i].name,
                   (long long)M, a, h, b, best / b, q, best / q, 4e-6 * (double)(shapes[i].n * shapes[i].k),
                   1e-6 * (double)nb_numel(r.packed), 1e-6 * (double)(nb_numel(r.q) + 4 * nb_numel(r.qs)));
            nb_scope_end(s);
        }
    return 0;
}
