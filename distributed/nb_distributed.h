/* nb_distributed.h - data-parallel training across processes
 * (torch.distributed and DistributedDataParallel). The collectives come
 * from NCCL between CUDA devices and from MPI (Open MPI) between CPU
 * processes; nabla adds the process group, the gradient buckets and their
 * overlap with backward, and ZeRO-1's sharded optimizer step.
 *
 *   // mpirun -np 2 ./train        (or one process per GPU: see README)
 *   nb_process_group *pg = nb_distributed_init((nb_distributed_options){0});
 *   nb_module *net = ...;                          // same seed on every rank
 *   nb_ddp *ddp = nb_ddp_new(net, pg, NULL);       // broadcasts rank 0's weights
 *   nb_optimizer *opt = nb_adam(net, ...);
 *   nb_loader *ld = nb_loader_new(ds, (nb_loader_options){.batch_size = 64,
 *       .shuffle = true, .seed = 1, .num_replicas = nb_process_group_size(pg),
 *       .rank = nb_process_group_rank(pg)});
 *   while (nb_loader_next(ld, &b)) {
 *       nb_module_zero_grad(net);
 *       nb_backward(loss(net, b));   // buckets all-reduce (average) as they fill
 *       nb_ddp_step(ddp, opt);       // = nb_optimizer_step, or ZeRO-1's step
 *   }
 *   nb_ddp_free(ddp);
 *   nb_distributed_destroy(pg);
 *
 * Launchers. Under `mpirun -np N` the rank, world size and local rank come
 * from Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK); under torchrun
 * or a scheduler from RANK, WORLD_SIZE and LOCAL_RANK; with neither, a
 * single process is rank 0 of 1. The MPI backend needs mpirun (or a world
 * size of 1). NCCL exchanges its unique id over MPI when run under mpirun,
 * else through a file every rank can read (init_file, or $NB_DIST_INIT_FILE:
 * rank 0 writes it, the others wait for it; rank 0 removes it once the
 * communicator exists), as torch's FileStore does.
 *
 * Streams. On a GPU a collective is enqueued on the group's communication
 * stream after everything already enqueued on the caller's current stream
 * (an event), and the current stream waits for it before its later work
 * (another event): calls return without waiting for the device, as
 * PyTorch's NCCL collectives do, and the tensors stay alive for the
 * communication stream (nb_record_stream). On the CPU the MPI collectives
 * have finished when the call returns.
 *
 * Determinism: NCCL and Open MPI pick their algorithms from the message
 * size, the world size and the topology, so the same run on the same
 * machines gives the same bits; a different world size sums in another
 * order.
 *
 * Errors: NB_ERR_INVALID_ARG (NULL, a rank out of range), NB_ERR_SHAPE
 * (sizes that do not match the world size), NB_ERR_DTYPE, NB_ERR_DEVICE (a tensor not on the
 * group's device), NB_ERR_UNSUPPORTED (a backend this build lacks, a
 * reduction of float16/bfloat16 through MPI), NB_ERR_IO (the init file),
 * NB_ERR_DEVICE for a failure inside NCCL or MPI, with their message.
 *
 * Failed ranks (NCCL; PyTorch's watchdog): a rank that dies or hangs must
 * not hang the others. The communicator is non-blocking, and a watchdog
 * thread per group aborts it when NCCL reports an asynchronous error or
 * when its start-up or a launched collective is not done after
 * NB_DIST_TIMEOUT seconds (default 600; also the wait for the init file;
 * collectives replayed from a CUDA graph are not timed, their errors are);
 * the abort ends its kernels, and the call that waits and every later call
 * on the group return NB_ERR_DEVICE naming the cause. After such an error
 * inside a DDP backward, the reducer waits for the buckets it launched and
 * starts over, so the caller can save what it has and leave.
 */
#ifndef NB_DISTRIBUTED_H
#define NB_DISTRIBUTED_H

#include "nb_core.h"
#include "nb_nn.h"
#include "nb_optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.distributed's backend names. */
typedef enum nb_dist_backend {
    NB_DIST_AUTO = 0, /* NCCL when the group's device is a CUDA device, else MPI */
    NB_DIST_MPI,      /* "mpi": Open MPI, CPU tensors */
    NB_DIST_NCCL,     /* "nccl": NCCL, CUDA tensors (one GPU per rank) */
} nb_dist_backend;

/* torch.distributed.ReduceOp. AVG is SUM divided by the world size (NCCL's
 * ncclAvg; through MPI a sum then a scale by 1 / world size). */
typedef enum nb_dist_op {
    NB_DIST_SUM = 0, /* ReduceOp.SUM */
    NB_DIST_AVG,     /* ReduceOp.AVG: SUM / world size (floating dtypes only) */
    NB_DIST_MAX,     /* ReduceOp.MAX */
    NB_DIST_MIN      /* ReduceOp.MIN */
} nb_dist_op;

/* Options of nb_distributed_init (torch.distributed.init_process_group's backend and init_method);
 * (nb_distributed_options){0}: the CPU through MPI. */
typedef struct nb_distributed_options {
    nb_dist_backend backend; /* NB_DIST_AUTO by default */
    nb_device device;        /* the device of the tensors this group communicates: a CUDA
                                device for NCCL (one per process: each rank's own GPU),
                                the CPU for MPI. Default (zero): the CPU */
    const char *init_file;   /* NCCL outside mpirun: where rank 0 publishes the unique id
                                (default: $NB_DIST_INIT_FILE) */
} nb_distributed_options;

/* A process group (torch.distributed.ProcessGroup): the ranks, the backend's communicator and, on a GPU, its
 * communication stream and watchdog; nb_distributed_init, nb_distributed_destroy. */
typedef struct nb_process_group nb_process_group;

/* torch.distributed.init_process_group: joins this process to the group the
 * launcher started (see above). Returns NULL with an error naming the
 * missing variable, backend or library. Build options: MPI where Open MPI's
 * headers were found (nb_distributed_available), NCCL with the CUDA
 * backend. */
nb_process_group *nb_distributed_init(nb_distributed_options opts);
/* The device this process should use for dev's type: with a CUDA dev and
 * several GPUs visible, cuda:(LOCAL_RANK mod count) (from Open MPI's or
 * torchrun's variables; one GPU per rank, as torch.cuda.set_device(
 * local_rank)); otherwise dev itself. Pass the result to
 * nb_distributed_init and nb_set_default_device. */
nb_device nb_distributed_local_device(nb_device dev);
/* destroy_process_group: frees the group after its NCCL work has finished
 * (every nb_work must have been waited for first); MPI is finalized when
 * the last group that uses it goes, if nb_distributed_init initialized it.
 * NULL is ignored. */
void nb_distributed_destroy(nb_process_group *pg);
/* Whether this build has the backend (MPI: Open MPI linked; NCCL: NCCL and
 * the CUDA backend linked; a GPU is not needed to answer). */
bool nb_distributed_available(nb_dist_backend backend);

/* get_rank, get_world_size, LOCAL_RANK (the rank among this host's
 * processes), the backend chosen, the group's device; -1 (NB_DIST_AUTO, the
 * CPU) with NB_ERR_INVALID_ARG for NULL (an earlier error is kept, so
 * nb_process_group_rank(NULL) after a failed init names that failure). */
int nb_process_group_rank(const nb_process_group *pg);
int nb_process_group_size(const nb_process_group *pg);
int nb_process_group_local_rank(const nb_process_group *pg);
nb_dist_backend nb_process_group_backend(const nb_process_group *pg);
nb_device nb_process_group_device(const nb_process_group *pg);

/* ---- collectives ------------------------------------------------------------
 * Every rank calls the same collectives in the same order with tensors of
 * the same dtype and sizes, contiguous and on the group's device. Dtypes:
 * float32, float64, int32, int64, int8, uint8 and bool everywhere; float16
 * and bfloat16 through NCCL (through MPI only broadcast and all_gather);
 * int16 through MPI (through NCCL, which has no int16 type, only broadcast
 * and all_gather). AVG
 * takes floating dtypes only; on bool, SUM is a logical or (MAX), as in
 * PyTorch. Counts through MPI are limited to 2^31 - 1 elements per call. */

/* all_reduce: t = op over the ranks of t, in place. */
nb_status nb_all_reduce(nb_process_group *pg, nb_tensor *t, nb_dist_op op);
/* broadcast: t = src's t on every rank. */
nb_status nb_broadcast(nb_process_group *pg, nb_tensor *t, int src);
/* all_gather_into_tensor: out (world_size * numel(in) elements) = the ranks'
 * `in`, rank after rank. `in` may be rank's own slice of out (in place). */
nb_status nb_all_gather(nb_process_group *pg, nb_tensor *out, const nb_tensor *in);
/* reduce_scatter_tensor: out (numel(in) / world_size elements) = rank's
 * slice of op over the ranks of in. Through NCCL out may be rank's own
 * slice of in; through MPI it may not overlap in (NB_ERR_INVALID_ARG). */
nb_status nb_reduce_scatter(nb_process_group *pg, nb_tensor *out, const nb_tensor *in, nb_dist_op op);
/* barrier: returns when every rank has called it (on a GPU after the
 * device work enqueued before it on every rank has finished). */
nb_status nb_barrier(nb_process_group *pg);

/* all_reduce(async_op=True): starts the reduction and returns its work
 * handle (NULL with an error); nb_work_wait(w) finishes it (the current
 * stream waits for it on a GPU, the process on the CPU), applies AVG's
 * scale where MPI needs it, and frees w. Every work must be waited for. */
typedef struct nb_work nb_work;
/* nb_all_reduce_async: t (as nb_all_reduce's; a reference kept until the wait) reduced with op, started; its
 * handle, or NULL (nb_all_reduce's errors, NB_ERR_OOM). nb_work_wait: finishes and frees w; NB_OK, or the
 * collective's error (NB_ERR_DEVICE), NB_ERR_INVALID_ARG for NULL w. */
nb_work *nb_all_reduce_async(nb_process_group *pg, nb_tensor *t, nb_dist_op op);
nb_status nb_work_wait(nb_work *w);

/* ---- DistributedDataParallel ---------------------------------------------- */

/* A DistributedDataParallel wrapper of a module (torch.nn.parallel.DistributedDataParallel): its gradient
 * buckets and hooks, or ZeRO-1's shards; nb_ddp_new, nb_ddp_free. */
typedef struct nb_ddp nb_ddp;

/* Options of nb_ddp_new, DistributedDataParallel's names; a zeroed struct (or NULL) gives PyTorch's defaults. */
typedef struct nb_ddp_options {
    double bucket_cap_mb;      /* bucket size in MiB (default 25, PyTorch's) */
    bool no_broadcast_buffers; /* by default rank 0's buffers (BatchNorm's running
                                  statistics) are broadcast before each nb_forward of
                                  the module while grad is enabled and no_sync is off
                                  (PyTorch's broadcast_buffers=True); true turns it off.
                                  Every rank must then run those forwards */
    bool zero1;                /* ZeRO stage 1 (llm.c's, DeepSpeed's): gradients are not
                                  all-reduced in backward; nb_ddp_step reduce-scatters
                                  them, steps the optimizer on this rank's shard of the
                                  flat parameters only (its state is 1/world of the
                                  whole), and all-gathers the parameters. Build the
                                  optimizer on nb_ddp_shard_parameters. Every parameter
                                  must require grad; one optimizer setting covers the
                                  whole shard (no per-parameter groups), and clipping
                                  or loss scaling of the reduced gradients is not
                                  offered */
} nb_ddp_options;

/* DistributedDataParallel(module, process_group): flattens m's parameters
 * (nb_module_flatten_parameters: gradients become views of one flat buffer
 * per dtype), broadcasts rank 0's parameters and buffers, splits the flat
 * gradients into buckets of about bucket_cap_mb in reverse registration
 * order (the order backward produces them) and registers a
 * post-accumulate-grad hook on every parameter: when backward has filled a
 * bucket, its all-reduce (AVG) starts at once on the communication stream,
 * overlapping with the rest of backward; the hook that fills the last
 * bucket makes the current stream wait for all of them, so the gradients
 * are averaged when nb_backward returns. Every parameter must receive a
 * gradient in every backward (find_unused_parameters=False): a backward
 * that leaves one out fails the next one's hooks with an error naming it.
 * opts may be NULL (defaults). m stays the caller's (state_dict names are
 * unchanged: no "module." prefix); free the ddp before m. Several (dtype)
 * groups each get buckets, launched group after group. Errors: NULL
 * arguments, a module whose parameters' device is not the group's
 * (NB_ERR_DEVICE, checked before m is touched), gradients the backend
 * cannot reduce (float16/bfloat16 through MPI), with zero1 a module whose
 * flat parameters need more than one group (dtype, device) or that has a
 * frozen parameter, and the collectives' errors. */
nb_ddp *nb_ddp_new(nb_module *m, nb_process_group *pg, const nb_ddp_options *opts);
/* Removes the hooks; m keeps its (flat) parameters. NULL is ignored. */
void nb_ddp_free(nb_ddp *ddp);
/* DDP.no_sync(): while on, backward accumulates gradients locally without
 * communicating; the first backward after turning it off reduces the sum.
 * Gradient accumulation over k micro-batches: k - 1 with no_sync on. */
nb_status nb_ddp_set_no_sync(nb_ddp *ddp, bool no_sync);
/* The optimizer step of a DDP step: nb_optimizer_step(opt), or with zero1:
 * reduce-scatter (AVG) the flat gradient into this rank's shard, zero the
 * flat gradient (the local gradients are spent: the next backward starts
 * from zero whichever zero_grad the loop calls), step opt (built on
 * nb_ddp_shard_parameters), all-gather the flat parameters. */
nb_status nb_ddp_step(nb_ddp *ddp, nb_optimizer *opt);
/* zero1: this rank's shard of the flat parameters as one 1-d leaf tensor
 * (a view into the flat buffer, whose .grad is the shard's averaged
 * gradient after nb_ddp_step's reduce-scatter); build the optimizer on it
 * (nb_adamw_params(&shard, 1, ...)). Only element-wise optimizers (SGD,
 * Adam, AdamW, ...) give the unsharded results. Borrowed; NULL with an
 * error without zero1. */
nb_tensor *nb_ddp_shard_parameters(nb_ddp *ddp);
/* ZeRO-1 checkpoints (rank 0 writes, every rank resumes). The whole flat
 * parameters as one 1-d leaf (a view, borrowed): build a second optimizer
 * of the same kind and options on it (nb_adamw_params(&full, 1, ...)) to
 * hold the whole state while a checkpoint is written or read (it costs
 * the full state's memory while it lives).
 *   save:   nb_ddp_gather_optimizer(ddp, opt, full) on every rank (a
 *           collective), then rank 0 nb_save_checkpoint(path, {.module,
 *           .optimizer = full, ...});
 *   resume: every rank nb_load_checkpoint(path, {.module, .optimizer =
 *           full, ...}), then nb_ddp_scatter_optimizer(ddp, full, opt).
 * Gather copies the shard's step count, lr and state tensors (all_gather);
 * scatter copies the whole's back, this rank's slice. Errors: NULL, no
 * zero1, optimizers not built on the shard / full parameters, kinds whose
 * state has scalars (NAdam, ASGD: NB_ERR_UNSUPPORTED), state tensors one
 * has and the other lacks (different kinds or options), the collectives'. */
nb_tensor *nb_ddp_full_parameters(nb_ddp *ddp);
nb_status nb_ddp_gather_optimizer(nb_ddp *ddp, nb_optimizer *shard, nb_optimizer *full);
nb_status nb_ddp_scatter_optimizer(nb_ddp *ddp, nb_optimizer *full, nb_optimizer *shard);
/* How many buckets, and the elements of bucket i (0 is the first to fill:
 * the last parameters). -1 with NB_ERR_INVALID_ARG for NULL or i out of
 * range. */
int nb_ddp_num_buckets(const nb_ddp *ddp);
int64_t nb_ddp_bucket_numel(const nb_ddp *ddp, int i);

#ifdef __cplusplus
}
#endif
#endif
