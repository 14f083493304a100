/* bench_mlp.c - times one full training step (forward, cross_entropy,
 * backward, Adam) of the `mlp` workload of shared/bench/torch_ref.py:
 * 784-512-512-10 ReLU MLP, batch 128, synthetic inputs.
 *
 *   bench_mlp [--steps N] [--warmup N] [--threads N] [--device cuda] [--tf32]
 * prints: workload=mlp device=cpu mode=fp32 threads=T nabla median_ms=... */
#include "bench_common.h"

static nb_module *make_mlp(void) {
    return nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                         nb_nn_linear(512, 10));
}

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    nb_module *net = make_mlp();
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_generator g = nb_generator_new(0);
    nb_tensor *x = nb_randn(NB_SHAPE(128, 784), NB_F32, &g);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(128), NB_F64, &g), 9.999), NB_I64);
    if (!opt || !x || !y) return nb_bench_fail("mlp");
    int rc = nb_bench_train_steps("mlp", net, opt, x, y, &a);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return rc;
}
