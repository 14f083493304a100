/* dist_impl.h - the process group's backend interface (pg_mpi.c, pg_nccl.c)
 * and the work record the DDP reducer keeps without allocating. */
#ifndef NB_DIST_IMPL_H
#define NB_DIST_IMPL_H

#include "nb_distributed.h"
#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_foreach.h"

/* An outstanding collective: MPI's request, or NCCL's completion event. */
typedef struct nb_pg_work {
    void *req;           /* MPI_Request (heap: its size is the MPI's), or the nb_event */
    nb_tensor *t;        /* the tensor AVG scales after an MPI sum (borrowed) */
    nb_dist_op op;
    bool active;
} nb_pg_work;

typedef struct nb_pg_backend_i {
    const char *name;
    /* Starts op over n elements of buf in place; *w (zeroed by the caller)
     * records how to wait. */
    nb_status (*all_reduce)(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, nb_dist_op op,
                            nb_pg_work *w);
    /* Finishes w (the current stream waits on a GPU; MPI_Wait on the CPU). */
    nb_status (*wait)(nb_process_group *pg, nb_pg_work *w);
    /* Lets outstanding MPI requests progress (NULL: nothing to do). */
    void (*progress)(nb_process_group *pg, nb_pg_work *w, int n);
    /* Blocking from the caller's view (ordered on the current stream on a GPU). */
    nb_status (*broadcast)(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, int src);
    nb_status (*all_gather)(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in, const void *src,
                            int64_t n, nb_dtype dt);
    nb_status (*reduce_scatter)(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in,
                                const void *src, int64_t n, nb_dtype dt, nb_dist_op op);
    nb_status (*barrier)(nb_process_group *pg);
    void (*destroy)(nb_process_group *pg);
} nb_pg_backend_i;

struct nb_process_group {
    int rank, size, local_rank;
    nb_dist_backend backend;
    nb_device device;
    const nb_pg_backend_i *be;
    void *ctx;          /* the backend's state */
    bool mpi_inited;    /* this group uses MPI (the last such group to go finalizes it, if nabla
                           initialized it) */
};

/* The launcher's view: rank, size, local rank from Open MPI's or torchrun's
 * variables (1 process otherwise); *under_mpirun when Open MPI's are set. */
nb_status nb_dist_env(int *rank, int *size, int *local_rank, bool *under_mpirun);

/* Backends: each sets pg->be and pg->ctx (NB_ERR_UNSUPPORTED when not built). */
nb_status nb_pg_mpi_init(nb_process_group *pg);
/* NCCL: init_file NULL exchanges the id over MPI (mpirun), else through
 * the file (process_group.c checks one is given when size > 1). Defined in
 * pg_nccl.c, which joins libnabla_cuda.so (and the static library). */
nb_status nb_pg_nccl_init(nb_process_group *pg, const char *init_file);
typedef nb_status (*nb_pg_init_fn)(nb_process_group *pg, const char *init_file);
/* nb_pg_nccl_init where this build has it (nccl_linked.c: linked in, or
 * from the CUDA backend's library, loaded now), else NULL with the error. */
nb_pg_init_fn nb_pg_nccl_linked(void);
/* MPI as the bootstrap of NCCL under mpirun: initializes MPI if needed
 * (pg then counts as a user of MPI), then broadcasts bytes from rank 0. */
nb_status nb_mpi_bootstrap_bcast(nb_process_group *pg, void *bytes, int n);
nb_status nb_mpi_bootstrap_barrier(void);
void nb_mpi_finalize_if(nb_process_group *pg);

/* Starts an all-reduce of contiguous t into w (DDP's buckets); checks as
 * nb_all_reduce does. nb_pg_work_wait finishes it and applies AVG's scale
 * where the backend needs it. */
nb_status nb_pg_all_reduce_start(nb_process_group *pg, nb_tensor *t, nb_dist_op op, nb_pg_work *w);
nb_status nb_pg_work_wait(nb_process_group *pg, nb_pg_work *w);
/* Checks t against the group: non-NULL, contiguous, on its device, a dtype
 * the backend carries (reduce: one it can reduce). */
nb_status nb_pg_check(nb_process_group *pg, const char *op, const nb_tensor *t, bool reduce);
/* The first byte of t's elements on its device. */
void *nb_pg_data(const nb_tensor *t);

#endif
