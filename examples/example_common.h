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
    int epochs;             /* [1, 100000] */
    int64_t batch_size;
    double lr;
    uint64_t seed;
    int threads; /* 0 = all cores; at most nabla's pool limit */
    const char *data; /* NULL = the default MNIST cache */
    const char *images;        /* --images DIR: MNIST as image folders DIR/train and DIR/test (mnist_cnn) */
    const char *export_images; /* --export-images DIR: write MNIST there as PNG image folders (mnist_cnn) */
    const char *save;   /* --save PATH: checkpoint after every epoch (NULL = none) */
    int64_t save_every; /* --save-every N: also every N training steps (0 = off) */
    const char *resume; /* --resume PATH: continue the run saved there */
    int stop_after;     /* --stop-after N: end after N epochs of the --epochs
                           schedule, as an interrupted run (0 = run them all) */
    int schedule;       /* --lr-schedule: an nb_lr_schedule (default cosine) */
    nb_device device;   /* --device cpu|cuda|cuda:N (default cpu): made the default device */
    bool cuda_graph;    /* --cuda-graph: full batches replay one captured training step */
    bool compile;       /* --compile: the step through nb_compile (fused graphs on a GPU, eager on the CPU) */
    bool amp;           /* --amp: the forward pass and loss under bfloat16 autocast */
    bool distributed;   /* --distributed: one data-parallel rank of a run started by mpirun or
                           torchrun (nb_example_distributed_begin) */
    int64_t max_steps;  /* --max-steps N: end the run after N training steps (the lr schedule
                           still spans --epochs); 0 = no limit */
    nb_dtype dtype;     /* --dtype float32|float64 (mnist_mlp): the parameters' and inputs' dtype */
    const char *log_dir; /* --log-dir DIR: TensorBoard event files (nb_summary_writer) there */
    bool no_progress;    /* --no-progress: no progress bar on stderr */
    const char *onnx;    /* --onnx PATH: the trained model as ONNX (nb_onnx_export) at the end */
    bool bitlinear;      /* --bitlinear (mnist_mlp): BitNet b1.58's BitLinear in place of every Linear */
    nb_process_group *pg; /* with --distributed: the group, and the DDP wrapper of the model */
    nb_ddp *ddp;
} nb_example_args;

typedef struct nb_example_result {
    bool ok;
    double test_accuracy, train_loss, seconds;
} nb_example_result;

/* Parses --epochs --batch-size --lr --seed --threads --data --save
 * --save-every --resume --stop-after --lr-schedule --device --cuda-graph
 * (a bare flag, with --device cuda) --compile (a bare flag) --amp (a bare flag) --log-dir
 * --no-progress (a bare flag) --onnx --bitlinear (a bare flag), and makes the
 * device the default one (nb_set_default_device). A bad value prints a
 * line naming the flag, the value and what it must be (an integer out of
 * range is an error, never wrapped: --epochs 4294967297 is refused); an
 * unknown flag prints the usage; both return non-zero. A --save path whose
 * directory cannot be written is refused here, before any training. */
int nb_example_parse(int argc, char **argv, nb_example_args *a);

/* ---- flag helpers (also used by bert_mlm) -------------------------------- */

/* Strict decimal integer in [min, max] for flag: prints
 * "prog: --flag VALUE: must be an integer in [min, max]" and returns false
 * otherwise (no wrapping, no trailing characters). */
bool nb_flag_int(const char *prog, const char *flag, const char *v, int64_t min, int64_t max, int64_t *out);
/* Unsigned decimal integer below 2^64 (a seed). */
bool nb_flag_u64(const char *prog, const char *flag, const char *v, uint64_t *out);
/* A finite number in [min, max] (min excluded when min_open). */
bool nb_flag_double(const char *prog, const char *flag, const char *v, double min, bool min_open, double max,
                    double *out);
/* nb_set_num_threads(n) (0 = all cores); false, with a message naming
 * --threads, if nabla cannot run that many (its pool's limit). */
bool nb_example_set_threads(const char *prog, int64_t n);
/* --device's value: parses it and makes it the default device; false, with
 * a message naming --device, for a device this build or machine lacks. */
bool nb_example_set_device(const char *prog, const char *v, nb_device *out);
/* False, with a message naming flag, if path cannot be written: its
 * directory missing or not writable, or path a directory. */
bool nb_example_check_writable(const char *prog, const char *flag, const char *path);
/* False, with a message naming the step, if a training loss is not finite:
 * a run that diverged (an lr too large) stops instead of training on NaN.
 * The loss is summed on the device and read every 100 steps and at each
 * epoch's line (one host sync each), so the step named is where the sum
 * was read. */
bool nb_example_check_loss(const char *prog, int64_t step, double loss);
/* Fraction of test samples classified correctly (eval mode, no grad). */
double nb_example_accuracy(nb_module *net, nb_dataset *test, int64_t batch_size);
/* Prints the model's summary for one batch (nb_module_summary; not when
 * resuming), then trains for a->epochs with the lr set per step by
 * a->schedule from a->lr, printing a line per epoch and a progress bar over each epoch's batches on
 * stderr (nb_progress; none with --no-progress or on ranks but 0). With
 * a->log_dir, every 100 steps it logs train/loss (the mean since the last
 * point), train/lr, train/samples_per_sec and train/grad_norm (the last
 * step's, before the optimizer used it), and each epoch train/epoch_loss
 * and eval/test_accuracy, at the global step (rank 0 only). With a->onnx,
 * the trained model is exported there last (nb_onnx_export, an example
 * batch of one test sample; rank 0). Returns the last
 * epoch's mean training loss and the final test accuracy. The loader's
 * seed must be a->seed (it is saved in checkpoints). With a->resume, the
 * model, optimizer, loader, RNG, step and the epoch's running loss are
 * restored first; with a->save, a checkpoint (nb_save_checkpoint) is written
 * after each epoch's line and every a->save_every steps within an epoch. */
nb_example_result nb_example_train(nb_module *net, nb_optimizer *opt, nb_loader *loader, nb_dataset *test,
                                   const nb_example_args *a, const char *name);

/* --distributed, before the model is built: joins the process group
 * (nb_distributed_init: MPI for --device cpu, NCCL for --device cuda; with
 * several GPUs visible each rank takes cuda:LOCAL_RANK) and silences stdout
 * on every rank but 0. Then nb_example_distributed_model wraps the model in
 * DDP (after it is built, before the optimizer) and nb_example_loader_shard
 * sets the loader's DistributedSampler fields. Every rank trains its shard
 * of each global batch of world_size * --batch-size samples; only rank 0
 * writes --save checkpoints, and every rank can --resume from one. Without
 * --distributed they do nothing. False, with the message printed, on error. */
bool nb_example_distributed_begin(const char *prog, nb_example_args *a);
bool nb_example_distributed_model(const char *prog, nb_example_args *a, nb_module *net);
nb_loader_options nb_example_loader_shard(const nb_example_args *a, nb_loader_options o);
/* Frees the DDP wrapper and leaves the group (NULLs in a). */
void nb_example_distributed_end(nb_example_args *a);

#endif
