/* bench_cnn.c - times one full training step (forward, cross_entropy,
 * backward, Adam) of the `cnn` workload of shared/bench/torch_ref.py: the
 * PyTorch MNIST example network, batch 64, synthetic inputs, train mode
 * (dropout on).
 *
 *   bench_cnn [--steps N] [--warmup N] [--threads N] [--device cuda] [--tf32]
 * prints: workload=cnn device=cpu mode=fp32 threads=T nabla median_ms=... */
#include "bench_common.h"

static nb_module *make_cnn(void) {
    nb_pool2d_options pool = {.kernel = {2, 2}};
    return nb_nn_sequential(nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_max_pool2d(pool), nb_nn_dropout(0.25), nb_nn_flatten(1, -1),
                         nb_nn_linear(9216, 128), nb_nn_relu(), nb_nn_dropout(0.5), nb_nn_linear(128, 10));
}

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    nb_module *net = make_cnn();
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_generator g = nb_generator_new(0);
    nb_tensor *x = nb_randn(NB_SHAPE(64, 1, 28, 28), NB_F32, &g);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(64), NB_F64, &g), 9.999), NB_I64);
    if (!opt || !x || !y) return nb_bench_fail("cnn");
    int rc = nb_bench_train_steps("cnn", net, opt, x, y, &a);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return rc;
}
