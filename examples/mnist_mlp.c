/* mnist_mlp.c - trains a 784-512-512-10 ReLU MLP on MNIST with Adam (peak
 * lr 1e-3, cosine-annealed to 0 per step over the run), batch 128.
 *
 *   mnist_mlp [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]
 *             [--save PATH] [--save-every STEPS] [--resume PATH] [--stop-after EPOCHS]
 *             [--device cpu|cuda] [--amp] [--cuda-graph] [--compile] [--distributed] [--max-steps N]
 *             [--dtype float32|float64] [--bitlinear]
 *
 * --bitlinear puts BitNet b1.58's BitLinear (nb_nn_bitlinear: int8 activations,
 * ternary weights, trained straight through) in place of every Linear.
 *
 * Data-parallel: `mpirun -np 2 mnist_mlp --distributed` (CPU, MPI), or one
 * process per GPU with --device cuda (NCCL); each rank trains on its shard of
 * every global batch of 2 x --batch-size samples (README: "Data-parallel").
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

/* --dtype float64: the images as float64 (the labels stay int64). */
static bool as_dtype(nb_dataset **ds) {
    nb_scope *s = nb_scope_begin();
    nb_dataset *d = nb_dataset_from_tensors(nb_to_dtype(nb_dataset_x(*ds), NB_F64), nb_dataset_y(*ds));
    nb_scope_end(s);
    if (!d) return false;
    nb_dataset_free(*ds);
    *ds = d;
    return true;
}

int main(int argc, char **argv) {
    nb_example_args a = {.epochs = 10, .batch_size = 128, .lr = 1e-3, .seed = 0, .threads = 0, .data = NULL};
    if (nb_example_parse(argc, argv, &a) != 0) return 2;
    if (!nb_example_set_threads(argv[0], a.threads)) return 2;
    nb_manual_seed(a.seed);
    if (!nb_example_distributed_begin(argv[0], &a)) return 1;

    nb_dataset *train = NULL, *test = NULL;
    nb_mnist_options mo = {.flatten = true};
    if (nb_mnist_load(a.data, true, mo, &train) != NB_OK || nb_mnist_load(a.data, false, mo, &test) != NB_OK) {
        fprintf(stderr, "mnist_mlp: %s\n", nb_last_error());
        return 1;
    }
    if (a.dtype == NB_F64 && (!as_dtype(&train) || !as_dtype(&test))) {
        fprintf(stderr, "mnist_mlp: %s\n", nb_last_error());
        return 1;
    }
    nb_dtype dt = a.dtype == NB_F64 ? NB_F64 : NB_F32;
    nb_module *(*lin)(int64_t, int64_t, bool, nb_dtype) = a.bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex;
    nb_module *net = nb_nn_sequential(lin(784, 512, true, dt), nb_nn_relu(), lin(512, 512, true, dt), nb_nn_relu(),
                                      lin(512, 10, true, dt));
    if (net && !nb_example_distributed_model(argv[0], &a, net)) return 1;
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = a.lr}) : NULL;
    nb_loader_options lo = {.batch_size = a.batch_size, .shuffle = true, .seed = a.seed, .prefetch = true,
                            .pin_memory = true};
    nb_loader *loader = opt ? nb_loader_new(train, nb_example_loader_shard(&a, lo)) : NULL;
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
    nb_example_distributed_end(&a);
    nb_module_free(net);
    nb_dataset_free(train);
    nb_dataset_free(test);
    if (!r.ok) return 1;
    printf("final: test_accuracy=%.4f train_loss=%.4f seconds=%.2f\n", r.test_accuracy, r.train_loss, r.seconds);
    return 0;
}
