/* bench_pointwise.c - a fused elementwise program (the pointwise slot)
 * against its nodes run one slot call at a time, on every device: the
 * bias + GELU (tanh) + dropout group of a transformer's FFN forward and the
 * matching backward group (dropout's mask and scale, GELU's rule, a cast to
 * float32), at bert-base's FFN shape [4096, 3072] (batch 32 x 128 tokens)
 * in bfloat16 and float32. Prints the median time of each and the ratio,
 * and checks that both give the same bits.
 *
 *   bench_pointwise [--device cpu|cuda] [--reps N] [--rows R] [--cols C] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "nb_impl.h"

typedef struct prog {
    nb_pw_node nodes[16];
    int n_nodes, outputs[2], n_out, n_in;
} prog;

static int node(prog *p, nb_pw_kind kind, int op, nb_dtype dt, int a, int b, int c, double value) {
    p->nodes[p->n_nodes] = (nb_pw_node){kind, op, dt, a, b, c, value};
    return p->n_nodes++;
}

/* The slot calls the nodes stand for, on whole tensors (tmp[i]: node i's buffer). */
static nb_status slot_by_slot(nb_backend *be, const prog *p, const nb_kview *views, nb_kview *tmp) {
    nb_status st = NB_OK;
    for (int i = 0; i < p->n_nodes && !st; i++) {
        const nb_pw_node *nd = &p->nodes[i];
        switch (nd->kind) {
        case NB_PW_INPUT: tmp[i] = views[p->n_out + nd->a]; break;
        case NB_PW_CONST: st = nb_kernel_fill(be, &tmp[i], nd->value); break;
        case NB_PW_CAST: st = nb_kernel_copy(be, &tmp[i], &tmp[nd->a]); break;
        case NB_PW_UNARY: st = nb_kernel_unary(be, nd->op, &tmp[i], &tmp[nd->a], nd->value); break;
        case NB_PW_UNARY_BACKWARD:
            st = nb_kernel_unary_backward(be, nd->op, &tmp[i], &tmp[nd->a], &tmp[nd->b], &tmp[nd->b], nd->value);
            break;
        case NB_PW_BINARY: st = nb_kernel_binary(be, nd->op, &tmp[i], &tmp[nd->a], &tmp[nd->b]); break;
        case NB_PW_WHERE: st = nb_kernel_where(be, &tmp[i], &tmp[nd->a], &tmp[nd->b], &tmp[nd->c]); break;
        default: st = NB_ERR_INVALID_ARG;
        }
    }
    /* the outputs are the nodes' own buffers here (no copy): tmp[outputs[k]] = views[k] */
    return st;
}

static int cmp(const void *a, const void *b) { return nb_bench_cmp_double(a, b); }

static double median_ms(nb_device dev, int reps, nb_status (*fn)(void *), void *ctx) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = nb_bench_now_ms();
        for (int k = 0; k < 10; k++)
            if (fn(ctx)) exit(nb_bench_fail("pointwise"));
        if (nb_device_synchronize(dev)) exit(nb_bench_fail("pointwise"));
        t[r] = (nb_bench_now_ms() - t0) / 10;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    double m = t[reps / 2];
    free(t);
    return m;
}

typedef struct run {
    nb_backend *be;
    const prog *p;
    nb_kview views[8], tmp[16];
} run;

static nb_status fused(void *ctx) {
    run *r = ctx;
    nb_pw_program pp = {r->p->n_nodes, r->p->nodes, r->p->n_out, r->p->outputs, r->p->n_in, 0, NULL};
    return nb_kernel_pointwise(r->be, r->p->n_out + r->p->n_in, r->views, &pp);
}
static nb_status unfused(void *ctx) {
    run *r = ctx;
    return slot_by_slot(r->be, r->p, r->views, r->tmp);
}

/* Node buffers for the slot-by-slot run: an output node writes its output view. */
static void buffers(run *r, nb_device dev, int64_t R, int64_t C) {
    for (int i = 0; i < r->p->n_nodes; i++) {
        nb_tensor *t = nb_empty_on(2, (int64_t[]){R, C}, r->p->nodes[i].dtype, dev);
        if (!t) exit(nb_bench_fail("pointwise"));
        r->tmp[i] = nb_kview_of(t);
        for (int k = 0; k < r->p->n_out; k++)
            if (r->p->outputs[k] == i) r->tmp[i] = r->views[k];
    }
}

static bool same_bits(const nb_tensor *a, const nb_tensor *b) {
    size_t n = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    char *x = malloc(n), *y = malloc(n);
    bool same = !nb_to_host(a, x, n) && !nb_to_host(b, y, n) && !memcmp(x, y, n);
    free(x), free(y);
    return same;
}

int main(int argc, char **argv) {
    nb_device dev = nb_device_count(NB_DEVICE_CUDA) > 0 ? NB_CUDA(0) : NB_CPU;
    int reps = 21;
    int64_t R = 4096, C = 3072;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device")) dev = !strcmp(argv[i + 1], "cpu") ? NB_CPU : NB_CUDA(0);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows")) R = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols")) C = atoll(argv[i + 1]);
    }
    nb_backend *be = nb_backend_get(dev);
    if (!be || reps < 1) return nb_bench_fail("pointwise");
    printf("%-34s %-9s %12s %12s %7s %6s\n", "group", "dtype", "slots ms", "fused ms", "ratio", "bits");
    const nb_dtype dts[2] = {NB_BF16, NB_F32};
    for (int d = 0; d < 2; d++) {
        nb_scope *sc = nb_scope_begin();
        nb_dtype dt = dts[d];
        nb_tensor *x = nb_to_dtype(nb_randn_on(2, (int64_t[]){R, C}, NB_F32, NULL, dev), dt);
        nb_tensor *bias = nb_to_dtype(nb_randn_on(1, &C, NB_F32, NULL, dev), dt);
        nb_tensor *mask = nb_gt_scalar(nb_rand_on(2, (int64_t[]){R, C}, NB_F32, NULL, dev), 0.1);
        nb_tensor *y[2], *h[2], *gx[2];
        for (int k = 0; k < 2; k++) {
            y[k] = nb_empty_on(2, (int64_t[]){R, C}, dt, dev), h[k] = nb_empty_on(2, (int64_t[]){R, C}, dt, dev);
            gx[k] = nb_empty_on(2, (int64_t[]){R, C}, NB_F32, dev);
        }
        if (!x || !bias || !mask || !y[1] || !h[1] || !gx[1]) return nb_bench_fail("pointwise");
        nb_kview bv = nb_kview_of(bias);
        bv.ndim = 2, bv.shape[0] = R, bv.shape[1] = C, bv.strides[0] = 0, bv.strides[1] = 1;

        prog f = {0}; /* forward: h = x + bias; y = mask ? gelu_tanh(h) / 0.9 : 0 */
        int xi = node(&f, NB_PW_INPUT, 0, dt, 0, -1, -1, 0), bi = node(&f, NB_PW_INPUT, 0, dt, 1, -1, -1, 0);
        int mi = node(&f, NB_PW_INPUT, 0, NB_BOOL, 2, -1, -1, 0);
        int hh = node(&f, NB_PW_BINARY, NB_BINARY_ADD, dt, xi, bi, -1, 0);
        int a = node(&f, NB_PW_UNARY, NB_UNARY_GELU_TANH, dt, hh, -1, -1, 0);
        int s = node(&f, NB_PW_UNARY, NB_UNARY_MUL_SCALAR, dt, a, -1, -1, 1 / 0.9);
        int z = node(&f, NB_PW_CONST, 0, dt, -1, -1, -1, 0);
        int yy = node(&f, NB_PW_WHERE, 0, dt, mi, s, z, 0);
        f.outputs[0] = yy, f.outputs[1] = hh, f.n_out = 2, f.n_in = 3;

        prog b = {0}; /* backward: gx = float32(gelu_tanh'(h) * (mask ? g / 0.9 : 0)), g = y */
        int gi = node(&b, NB_PW_INPUT, 0, dt, 0, -1, -1, 0), hi = node(&b, NB_PW_INPUT, 0, dt, 1, -1, -1, 0);
        int mb = node(&b, NB_PW_INPUT, 0, NB_BOOL, 2, -1, -1, 0);
        int zb = node(&b, NB_PW_CONST, 0, dt, -1, -1, -1, 0);
        int gm = node(&b, NB_PW_WHERE, 0, dt, mb, gi, zb, 0);
        int gs = node(&b, NB_PW_UNARY, NB_UNARY_MUL_SCALAR, dt, gm, -1, -1, 1 / 0.9);
        int gg = node(&b, NB_PW_UNARY_BACKWARD, NB_UNARY_GELU_TANH, dt, gs, hi, -1, 0);
        b.outputs[0] = node(&b, NB_PW_CAST, 0, NB_F32, gg, -1, -1, 0), b.n_out = 1, b.n_in = 3;

        for (int g = 0; g < 2; g++) {
            run rf = {be, g ? &b : &f, {{0}}, {{0}}}, ru = rf;
            if (!g) {
                nb_kview v[5] = {nb_kview_of(y[0]), nb_kview_of(h[0]), nb_kview_of(x), bv, nb_kview_of(mask)};
                memcpy(rf.views, v, sizeof v);
                memcpy(ru.views, v, sizeof v);
                ru.views[0] = nb_kview_of(y[1]), ru.views[1] = nb_kview_of(h[1]);
            } else {
                nb_kview v[4] = {nb_kview_of(gx[0]), nb_kview_of(y[0]), nb_kview_of(h[0]), nb_kview_of(mask)};
                memcpy(rf.views, v, sizeof v);
                memcpy(ru.views, v, sizeof v);
                ru.views[0] = nb_kview_of(gx[1]);
            }
            buffers(&ru, dev, R, C);
            double tu = median_ms(dev, reps, unfused, &ru), tf = median_ms(dev, reps, fused, &rf);
            bool same = g ? same_bits(gx[0], gx[1]) : same_bits(y[0], y[1]) && same_bits(h[0], h[1]);
            printf("%-34s %-9s %12.4f %12.4f %6.2fx %6s\n", g ? "dropout+gelu backward, cast f32" : "bias+gelu_tanh+dropout",
                   nb_dtype_name(dt), tu, tf, tu / tf, same ? "same" : "DIFFER");
            if (!same) return 1;
        }
        nb_scope_end(sc);
    }
    return 0;
}
