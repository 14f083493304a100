/* mnist_mlp.c - trains a 784-512-512-10 ReLU MLP on MNIST with Adam (peak
 * lr 1e-3, cosine-annealed to 0 per step over the run), batch 128.
 *
 *   mnist_mlp [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]
 *             [--save PATH] [--save-every STEPS] [--resume PATH] [--stop-after EPOCHS]
 *
 * Prints one line per epoch and, last, exactly
 *   final: test_accuracy=0.XXXX train_loss=X.XXXX seconds=S
 * Same seed and thread count give the same losses and accuracies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_common.h"
#include "nabla.h"

int main(int argc, char **argv) {
    nb_example_args a = {.epochs = 10, .batch_size = 128, .lr = 1e-3, .seed = 0, .threads = 0, .data = NULL};
    if (nb_example_parse(argc, argv, &a) != 0) return 2;
    if (!nb_example_set_threads(argv[0], a.threads)) return 2;
    nb_manual_seed(a.seed);

    nb_dataset *train = NULL, *test = NULL;
    nb_mnist_options mo = {.flatten = true};
    if (nb_mnist_load(a.data, true, mo, &train) != NB_OK || nb_mnist_load(a.data, false, mo, &test) != NB_OK) {
        fprintf(stderr, "mnist_mlp: %s\n", nb_last_error());
        return 1;
    }
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                   nb_nn_linear(512, 10));
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = a.lr}) : NULL;
    nb_loader *loader = opt ? nb_loader_new(train, (nb_loader_options){.batch_size = a.batch_size, .shuffle = true,
                                                                         .seed = a.seed, .prefetch = true,
                                                                         .pin_memory = true})
                            : NULL;
    if (!loader) {
        fprintf(stderr, "mnist_mlp: %s\n", nb_last_error());
        return 1;
    }
    char dev[32];
    printf("mnist_mlp: %lld parameters, %s, %d threads, %lld train / %lld test samples\n",
           (long long)nb_module_num_params(net), nb_device_str(a.device, dev, sizeof dev), nb_get_num_threads(), (long long)nb_dataset_len(train),
           (long long)nb_dataset_len(test));
    nb_example_result r = nb_example_train(net, opt, loader, test, &a, "mnist_mlp");
    nb_loader_free(loader);
    nb_optimizer_free(opt);
    nb_module_free(net);
    nb_dataset_free(train);
    nb_dataset_free(test);
    if (!r.ok) return 1;
    printf("final: test_accuracy=%.4f train_loss=%.4f seconds=%.2f\n", r.test_accuracy, r.train_loss, r.seconds);
    return 0;
}
