/* example_common.h - flag parsing and the train/evaluate loop shared by the
 * MNIST examples (mnist_mlp, mnist_cnn). */
#ifndef NB_EXAMPLE_COMMON_H
#define NB_EXAMPLE_COMMON_H

#include "nabla.h"

typedef struct nb_example_args {
    int epochs;
    int64_t batch_size;
    double lr;
    uint64_t seed;
    int threads; /* 0 = all cores */
    const char *data; /* NULL = the default MNIST cache */
} nb_example_args;

typedef struct nb_example_result {
    bool ok;
    double test_accuracy, train_loss, seconds;
} nb_example_result;

/* Parses --epochs --batch-size --lr --seed --threads --data; prints usage
 * and returns non-zero on a bad flag. */
int nb_example_parse(int argc, char **argv, nb_example_args *a);
/* Fraction of test samples classified correctly (eval mode, no grad). */
double nb_example_accuracy(nb_module *net, nb_dataset *test, int64_t batch_size);
/* Trains for a->epochs with the lr cosine-annealed per step from a->lr to
 * 0, printing a line per epoch; returns the last
 * epoch's mean training loss and the final test accuracy. */
nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name);

#endif
