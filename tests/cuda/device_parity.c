/* device_parity.c - the examples' networks stepped on the CPU and on another
 * device from the same weights, inputs and dropout masks: prints the loss on
 * both and, per parameter, the largest gradient difference relative to the
 * gradient's largest magnitude, after a few Adam steps too. Finds where a
 * device's training goes wrong when every op alone passes the op harness
 * (an aliasing or shape-dependent kernel path, a short last batch).
 *
 *   device_parity [--device cuda] [--steps N]
 * Exits 1 if a value is not finite on the device but is on the CPU, or a
 * relative difference exceeds 5e-3 for a gradient (float32 sums in another
 * order: the H100's conv2 weight gradient over 1000 images differed by
 * 1.2e-3) or 2e-2 for a parameter after Adam steps (Adam's normalisation
 * turns the sign noise of near-zero gradients into steps of lr). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nabla.h"

static nb_module *make_mlp(void) {
    return nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                            nb_nn_linear(512, 10));
}

static nb_module *make_cnn(void) {
    nb_pool2d_options pool = {.kernel = {2, 2}};
    return nb_nn_sequential(nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                            nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                            nb_nn_max_pool2d(pool), nb_nn_dropout(0.25), nb_nn_flatten(1, -1),
                            nb_nn_linear(9216, 128), nb_nn_relu(), nb_nn_dropout(0.5), nb_nn_linear(128, 10));
}

typedef struct run {
    nb_module *net;
    nb_optimizer *opt;
} run;

/* A network on dev with the weights of ref (copied through a state dict). */
static run make(nb_module *(*mk)(void), nb_device dev, nb_module *ref) {
    run r = {0};
    nb_set_default_device(dev);
    r.net = mk();
    if (r.net && ref) {
        nb_named_tensor *sd = NULL;
        int n = nb_module_state_dict(ref, &sd);
        if (n < 0 || nb_module_load_tensors(r.net, sd, n, true, NULL) != NB_OK) r.net = NULL;
        free(sd);
    }
    r.opt = r.net ? nb_adam(r.net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_set_default_device(NB_CPU);
    return r;
}

/* One step on x [B, ...] and labels y (host data); the loss, NaN on error. */
static double step(run *r, nb_device dev, const float *x, int ndim, const int64_t *shape, const int64_t *y,
                   uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(seed); /* the same dropout masks on both devices */
    nb_tensor *tx = nb_from_data_on(x, ndim, shape, NB_F32, dev), *ty = nb_from_data_on(y, 1, shape, NB_I64, dev);
    nb_optimizer_zero_grad(r->opt);
    nb_tensor *loss = nb_cross_entropy(nb_forward(r->net, tx), ty);
    double l = loss && nb_backward(loss) == NB_OK ? nb_item(loss) : NAN;
    if (isnan(l)) fprintf(stderr, "  step failed or NaN: %s\n", nb_last_error());
    nb_scope_end(s);
    return l;
}

/* max |a - b| / max |a| per parameter gradient (and parameter, after steps). */
static int compare(run *a, run *b, bool grads) {
    int n = nb_module_parameters(a->net, NULL, 0), bad = 0;
    nb_named_tensor *pa = malloc(sizeof *pa * (size_t)n), *pb = malloc(sizeof *pb * (size_t)n);
    nb_module_parameters(a->net, pa, n);
    nb_module_parameters(b->net, pb, n);
    for (int i = 0; i < n; i++) {
        nb_tensor *ta = grads ? nb_tensor_grad(pa[i].tensor) : pa[i].tensor;
        nb_tensor *tb = grads ? nb_tensor_grad(pb[i].tensor) : pb[i].tensor;
        if (!ta || !tb) continue;
        int64_t m = nb_numel(ta);
        float *ha = malloc(sizeof(float) * (size_t)m), *hb = malloc(sizeof(float) * (size_t)m);
        nb_to_host(ta, ha, sizeof(float) * (size_t)m);
        nb_to_host(tb, hb, sizeof(float) * (size_t)m);
        double amax = 0, dmax = 0;
        int64_t nonfinite = 0;
        for (int64_t j = 0; j < m; j++) {
            if (!isfinite(hb[j]) && isfinite(ha[j])) nonfinite++;
            amax = fmax(amax, fabs(ha[j]));
            dmax = fmax(dmax, fabs((double)ha[j] - hb[j]));
        }
        double rel = amax > 0 ? dmax / amax : dmax;
        bool fail = nonfinite || !(rel <= (grads ? 5e-3 : 2e-2));
        bad += fail;
        if (fail || getenv("NB_PARITY_VERBOSE"))
            printf("  %s %-12s rel diff %.2e, %lld non-finite on the device%s\n", grads ? "grad " : "param",
                   pa[i].name, rel, (long long)nonfinite, fail ? "  <-- FAIL" : "");
        free(ha), free(hb);
    }
    free(pa), free(pb);
    return bad;
}

int main(int argc, char **argv) {
    nb_device dev = {NB_DEVICE_CUDA, 0};
    int steps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device") && nb_device_parse(argv[i + 1], &dev) == NB_OK) continue;
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--device cuda] [--steps N]\n", argv[0]);
            return 2;
        }
    }
    if (nb_set_default_device(dev) != NB_OK) {
        printf("device_parity: %s; nothing to compare\n", nb_last_error());
        return 0;
    }
    nb_set_default_device(NB_CPU);
    struct {
        const char *name;
        nb_module *(*mk)(void);
        int ndim;
        int64_t shape[4];
    } nets[] = {{"mlp", make_mlp, 2, {0, 784}}, {"cnn", make_cnn, 4, {0, 1, 28, 28}}};
    const int64_t batches[] = {64, 32, 1000, 1};
    int bad = 0;
    for (size_t k = 0; k < sizeof nets / sizeof nets[0]; k++)
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            int64_t B = batches[bi], shape[4];
            memcpy(shape, nets[k].shape, sizeof shape);
            shape[0] = B;
            int64_t per = 1;
            for (int d = 1; d < nets[k].ndim; d++) per *= shape[d];
            float *x = malloc(sizeof(float) * (size_t)(B * per));
            int64_t *y = malloc(sizeof(int64_t) * (size_t)B);
            nb_generator g = nb_generator_new(42 + B);
            nb_tensor *rx = nb_rand(1, (int64_t[]){B * per}, NB_F32, &g);
            nb_to_host(rx, x, sizeof(float) * (size_t)(B * per));
            for (int64_t j = 0; j < B; j++) y[j] = (j * 7 + 3) % 10;
            nb_manual_seed(1);
            run c = make(nets[k].mk, NB_CPU, NULL), d = make(nets[k].mk, dev, c.net);
            if (!c.opt || !d.opt) {
                printf("%s batch %lld: setup failed: %s\n", nets[k].name, (long long)B, nb_last_error());
                return 1;
            }
            printf("%s batch %lld:\n", nets[k].name, (long long)B);
            for (int st = 0; st < steps; st++) {
                double lc = step(&c, NB_CPU, x, nets[k].ndim, shape, y, 100 + st);
                double ld = step(&d, dev, x, nets[k].ndim, shape, y, 100 + st);
                printf("  step %d: loss cpu %.7g device %.7g\n", st, lc, ld);
                bad += !isfinite(ld) || fabs(lc - ld) > 1e-3 * fabs(lc);
                bad += compare(&c, &d, true);
                NB_NO_GRAD {
                    nb_optimizer_step(c.opt);
                    nb_optimizer_step(d.opt);
                }
                bad += compare(&c, &d, false);
            }
            nb_optimizer_free(c.opt), nb_optimizer_free(d.opt);
            nb_module_free(c.net), nb_module_free(d.net);
            free(x), free(y);
            nb_scope_release_root();
        }
    printf("device_parity: %d failures\n", bad);
    return bad ? 1 : 0;
}
