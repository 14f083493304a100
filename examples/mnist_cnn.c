/* mnist_cnn.c - trains the network of PyTorch's MNIST example on MNIST:
 * conv 1->32 3x3, ReLU, conv 32->64 3x3, ReLU, max_pool 2, dropout 0.25,
 * flatten, linear 9216->128, ReLU, dropout 0.5, linear 128->10; Adam (lr
 * 1e-3 for the first 2/3 of the steps, then linear to 0: --lr-schedule wsd),
 * batch 64.
 *
 *   mnist_cnn [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]
 *             [--save PATH] [--save-every STEPS] [--resume PATH] [--stop-after EPOCHS]
 *             [--device cpu|cuda] [--amp] [--cuda-graph] [--distributed] [--max-steps N]
 *
 * --distributed: one data-parallel rank (see mnist_mlp.c). Every rank draws
 * the same dropout masks for its own rows (one seed), as PyTorch does when
 * every rank calls manual_seed with the same value.
 *
 * Prints one line per epoch and, last, exactly
 *   final: test_accuracy=0.XXXX train_loss=X.XXXX seconds=S */
#include <stdio.h>

#include "example_common.h"
#include "nabla.h"

static nb_module *make_cnn(void) {
    nb_pool2d_options pool = {.kernel = {2, 2}};
    return nb_nn_sequential(nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_max_pool2d(pool), nb_nn_dropout(0.25), nb_nn_flatten(1, -1),
                         nb_nn_linear(9216, 128), nb_nn_relu(), nb_nn_dropout(0.5), nb_nn_linear(128, 10));
}

int main(int argc, char **argv) {
    nb_example_args a = {.epochs = 3, .batch_size = 64, .lr = 1e-3, .seed = 0, .threads = 0, .data = NULL,
                         .schedule = NB_LR_WSD};
    if (nb_example_parse(argc, argv, &a) != 0) return 2;
    if (!nb_example_set_threads(argv[0], a.threads)) return 2;
    if (a.dtype == NB_F64) {
        fprintf(stderr, "mnist_cnn: --dtype float64 is mnist_mlp's (the convolutions run in float32)\n");
        return 2;
    }
    nb_manual_seed(a.seed);
    if (!nb_example_distributed_begin(argv[0], &a)) return 1;

    nb_dataset *train = NULL, *test = NULL;
    nb_mnist_options mo = {.flatten = false}; /* [N, 1, 28, 28] */
    if (nb_mnist_load(a.data, true, mo, &train) != NB_OK || nb_mnist_load(a.data, false, mo, &test) != NB_OK) {
        fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
        return 1;
    }
    nb_module *net = make_cnn();
    if (net && !nb_example_distributed_model(argv[0], &a, net)) return 1;
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = a.lr}) : NULL;
    nb_loader_options lo = {.batch_size = a.batch_size, .shuffle = true, .seed = a.seed, .prefetch = true,
                            .pin_memory = true};
    nb_loader *loader = opt ? nb_loader_new(train, nb_example_loader_shard(&a, lo)) : NULL;
    if (!loader) {
        fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
        return 1;
    }
    char dev[32];
    printf("mnist_cnn: %lld parameters, %s, %d threads, %lld train / %lld test samples\n",
           (long long)nb_module_num_params(net), nb_device_str(a.device, dev, sizeof dev), nb_get_num_threads(), (long long)nb_dataset_len(train),
           (long long)nb_dataset_len(test));
    nb_example_result r = nb_example_train(net, opt, loader, test, &a, "mnist_cnn");
    nb_loader_free(loader);
    nb_optimizer_free(opt);
    nb_example_distributed_end(&a);
    nb_module_free(net);
    nb_dataset_free(train);
    nb_dataset_free(test);
    if (!r.ok) return 1;
    printf("final: test_accuracy=%.4f train_loss=%.4f seconds=%.2f\n", r.test_accuracy, r.train_loss, r.seconds);
    return 0;
}
