/* example_common.h - flag parsing and the train/evaluate loop shared by the
 * MNIST examples (mnist_mlp, mnist_cnn), with resumable checkpoints:
 *
 *   mnist_mlp --epochs 2 --save run.safetensors --save-every 100
 *   mnist_mlp --epochs 2 --resume run.safetensors --save run.safetensors
 *
 * A resumed run prints the same per-epoch losses and accuracies as the run
 * that was never interrupted and ends with a byte-identical checkpoint
 * (same flags, seed and thread count; only samples/s and seconds differ). */
#ifndef NB_EXAMPLE_COMMON_H
#define NB_EXAMPLE_COMMON_H

#include "nabla.h"

typedef enum nb_lr_schedule { NB_LR_COSINE = 0, NB_LR_WSD, NB_LR_CONSTANT } nb_lr_schedule;

typedef struct nb_example_args {
    int epochs;
    int64_t batch_size;
    double lr;
    uint64_t seed;
    int threads; /* 0 = all cores */
    const char *data; /* NULL = the default MNIST cache */
    const char *save;   /* --save PATH: checkpoint after every epoch (NULL = none) */
    int64_t save_every; /* --save-every N: also every N training steps (0 = off) */
    const char *resume; /* --resume PATH: continue the run saved there */
    int stop_after;     /* --stop-after N: end after N epochs of the --epochs
                           schedule, as an interrupted run (0 = run them all) */
    int schedule;       /* --lr-schedule: an nb_lr_schedule (default cosine) */
} nb_example_args;

typedef struct nb_example_result {
    bool ok;
    double test_accuracy, train_loss, seconds;
} nb_example_result;

/* Parses --epochs --batch-size --lr --seed --threads --data --save
 * --save-every --resume --stop-after; prints usage and returns non-zero on
 * a bad flag. */
int nb_example_parse(int argc, char **argv, nb_example_args *a);
/* Fraction of test samples classified correctly (eval mode, no grad). */
double nb_example_accuracy(nb_module *net, nb_dataset *test, int64_t batch_size);
/* Trains for a->epochs with the lr set per step by a->schedule from a->lr,
 * printing a line per epoch; returns the last
 * epoch's mean training loss and the final test accuracy. The loader's
 * seed must be a->seed (it is saved in checkpoints). With a->resume, the
 * model, optimizer, loader, RNG, step and the epoch's running loss are
 * restored first; with a->save, a checkpoint (nb_save_checkpoint) is written
 * after each epoch's line and every a->save_every steps within an epoch. */
nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name);

#endif
