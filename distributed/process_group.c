/* process_group.c - torch.distributed's process group: the launcher's
 * environment, the choice of backend (pg_mpi.c, pg_nccl.c), and the
 * collectives' argument checks, which are the same for both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

/* ---- the launcher's environment ------------------------------------------ */

static bool env_int(const char *name, int *v) {
    const char *s = getenv(name);
    if (!s || !*s) return false;
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || x < 0 || x > 1 << 24) return false;
    *v = (int)x;
    return true;
}

nb_status nb_dist_env(int *rank, int *size, int *local_rank, bool *under_mpirun) {
    *rank = 0, *size = 1, *local_rank = -1, *under_mpirun = false;
    if (env_int("OMPI_COMM_WORLD_SIZE", size)) {
        *under_mpirun = true;
        if (!env_int("OMPI_COMM_WORLD_RANK", rank))
            return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: OMPI_COMM_WORLD_SIZE is set but not OMPI_COMM_WORLD_RANK");
        env_int("OMPI_COMM_WORLD_LOCAL_RANK", local_rank);
    } else if (env_int("WORLD_SIZE", size)) {
        if (!env_int("RANK", rank))
            return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: WORLD_SIZE is set but not RANK (torchrun sets both)");
        env_int("LOCAL_RANK", local_rank);
    } else if (getenv("RANK")) {
        return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: RANK is set but not WORLD_SIZE");
    }
    if (*size < 1 || *rank >= *size)
        return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: rank %d outside a world of size %d", *rank, *size);
    if (*local_rank < 0) *local_rank = *rank;
    return NB_OK;
}

nb_device nb_distributed_local_device(nb_device dev) {
    if (dev.type != NB_DEVICE_CUDA) return dev;
    int rank, size, local;
    bool mpirun;
    if (nb_dist_env(&rank, &size, &local, &mpirun) != NB_OK) {
        nb_clear_error(); /* nb_distributed_init reports a bad environment */
        return dev;
    }
    int n = nb_device_count(NB_DEVICE_CUDA);
    return n > 1 && size > 1 ? NB_CUDA(local % n) : dev;
}

/* ---- the group ------------------------------------------------------------- */

bool nb_distributed_available(nb_dist_backend backend) {
    switch (backend) {
    case NB_DIST_MPI:
#ifdef NB_WITH_MPI
        return true;
#else
        return false;
#endif
    case NB_DIST_NCCL:
#ifdef NB_WITH_NCCL
        return true;
#else
        return false;
#endif
    default: return nb_distributed_available(NB_DIST_MPI) || nb_distributed_available(NB_DIST_NCCL);
    }
}

nb_process_group *nb_distributed_init(nb_distributed_options opts) {
    nb_op_take_fresh();
    nb_process_group *pg = calloc(1, sizeof *pg);
    if (!pg) return NB_FAIL(NB_ERR_OOM, "distributed_init: out of host memory");
    bool mpirun;
    if (nb_dist_env(&pg->rank, &pg->size, &pg->local_rank, &mpirun)) goto fail;
    pg->device = opts.device;
    pg->backend = opts.backend ? opts.backend : opts.device.type == NB_DEVICE_CUDA ? NB_DIST_NCCL : NB_DIST_MPI;
    if (pg->backend != NB_DIST_MPI && pg->backend != NB_DIST_NCCL) {
        nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: unknown backend %d", (int)opts.backend);
        goto fail;
    }
    if (!nb_backend_get(pg->device)) goto fail;
    char d[32];
    nb_device_str(pg->device, d, sizeof d);
    if (pg->backend == NB_DIST_NCCL && pg->device.type != NB_DEVICE_CUDA) {
        nb_set_error(NB_ERR_DEVICE, "distributed_init: NCCL communicates CUDA tensors; the group's device is %s", d);
        goto fail;
    }
    if (pg->backend == NB_DIST_MPI && pg->device.type != NB_DEVICE_CPU) {
        nb_set_error(NB_ERR_DEVICE, "distributed_init: the MPI backend communicates CPU tensors; the group's device is %s "
                                    "(use NCCL)", d);
        goto fail;
    }
    if (pg->backend == NB_DIST_MPI && pg->size > 1 && !mpirun) {
        nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: the MPI backend needs its processes started by mpirun "
                                         "(WORLD_SIZE=%d came from another launcher)", pg->size);
        goto fail;
    }
    /* NCCL's id: over MPI under mpirun (unless a file is named explicitly
       or this build has no MPI), else through the file */
    const char *file = opts.init_file ? opts.init_file : getenv("NB_DIST_INIT_FILE");
    bool over_mpi = mpirun && !opts.init_file && nb_distributed_available(NB_DIST_MPI);
    if (pg->backend == NB_DIST_NCCL && pg->size > 1 && !over_mpi && (!file || !*file)) {
        nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: NCCL with %d processes outside mpirun needs a file to "
                                         "exchange its id: set NB_DIST_INIT_FILE (or init_file)", pg->size);
        goto fail;
    }
    nb_pg_init_fn nccl_init = pg->backend == NB_DIST_NCCL ? nb_pg_nccl_linked() : NULL;
    nb_status st = pg->backend == NB_DIST_MPI ? nb_pg_mpi_init(pg)
                   : nccl_init                ? nccl_init(pg, over_mpi ? NULL : file)
                                              : nb_last_status();
    if (st) goto fail;
    return pg;
fail:;
    nb_status err = nb_last_status();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nb_last_error());
    if (pg->be) pg->be->destroy(pg);
    nb_mpi_finalize_if(pg);
    free(pg);
    return NB_FAIL(err ? err : NB_ERR_INVALID_ARG, "%s", msg);
}

void nb_distributed_destroy(nb_process_group *pg) {
    if (!pg) return;
    if (pg->be) pg->be->destroy(pg);
    nb_mpi_finalize_if(pg);
    free(pg);
}

/* A NULL group: an error, unless one is pending (a failed nb_distributed_init's). */
static bool no_group(const char *fn, const nb_process_group *pg) {
    if (!pg && nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL process group", fn);
    return !pg;
}

int nb_process_group_rank(const nb_process_group *pg) { return no_group("process_group_rank", pg) ? -1 : pg->rank; }
int nb_process_group_size(const nb_process_group *pg) { return no_group("process_group_size", pg) ? -1 : pg->size; }
int nb_process_group_local_rank(const nb_process_group *pg) {
    return no_group("process_group_local_rank", pg) ? -1 : pg->local_rank;
}
nb_dist_backend nb_process_group_backend(const nb_process_group *pg) {
    return no_group("process_group_backend", pg) ? NB_DIST_AUTO : pg->backend;
}
nb_device nb_process_group_device(const nb_process_group *pg) {
    return no_group("process_group_device", pg) ? NB_CPU : pg->device;
}

/* ---- argument checks ------------------------------------------------------ */

void *nb_pg_data(const nb_tensor *t) { return nb_data_ptr(t); }

static bool carried(nb_dist_backend b, nb_dtype dt, bool reduce) {
    switch (dt) {
    case NB_F32: case NB_F64: case NB_I32: case NB_I64: case NB_U8: case NB_I8: case NB_BOOL: return true;
    case NB_F16: case NB_BF16: return !reduce || b == NB_DIST_NCCL;
    case NB_I16: return !reduce || b != NB_DIST_NCCL; /* NCCL has no int16 type: moved as 16-bit words */
    default: return false;
    }
}

nb_status nb_pg_check(nb_process_group *pg, const char *op, const nb_tensor *t, bool reduce) {
    if (!pg || !t) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, pg ? "tensor" : "process group");
    char s[96], d[32], gd[32];
    nb_shape_str(t, s, sizeof s);
    nb_device dev = nb_device_of(t);
    if (dev.type != pg->device.type || dev.index != pg->device.index)
        return nb_set_error(NB_ERR_DEVICE, "%s: tensor %s is on %s, the process group communicates on %s", op, s,
                            nb_device_str(dev, d, sizeof d), nb_device_str(pg->device, gd, sizeof gd));
    if (!nb_is_contiguous(t))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor %s is not contiguous", op, s);
    if (!carried(pg->backend, nb_dtype_of(t), reduce))
        return nb_set_error(nb_dtype_of(t) == NB_F16 || nb_dtype_of(t) == NB_BF16 || nb_dtype_of(t) == NB_I16
                                ? NB_ERR_UNSUPPORTED
                                : NB_ERR_DTYPE,
                            "%s: %s %s cannot be %s by %s", op, nb_dtype_name(nb_dtype_of(t)), s,
                            reduce ? "reduced" : "sent", pg->be->name);
    return NB_OK;
}

/* The op as the backend runs it: bool SUM is a logical or (MAX), as
 * PyTorch's; AVG needs a floating dtype. */
static nb_status check_op(const char *name, nb_dist_op *op, nb_dtype dt) {
    if ((unsigned)*op > NB_DIST_MIN) return nb_set_error(NB_ERR_INVALID_ARG, "%s: unknown reduce op %d", name, (int)*op);
    bool fl = dt == NB_F32 || dt == NB_F64 || dt == NB_F16 || dt == NB_BF16;
    if (*op == NB_DIST_AVG && !fl)
        return nb_set_error(NB_ERR_DTYPE, "%s: AVG of %s (average floating tensors, or SUM)", name, nb_dtype_name(dt));
    if (dt == NB_BOOL && *op == NB_DIST_SUM) *op = NB_DIST_MAX;
    return NB_OK;
}

/* ---- collectives ---------------------------------------------------------- */

nb_status nb_pg_all_reduce_start(nb_process_group *pg, nb_tensor *t, nb_dist_op op, nb_pg_work *w) {
    nb_status st = nb_pg_check(pg, "all_reduce", t, true);
    if (!st) st = check_op("all_reduce", &op, nb_dtype_of(t));
    if (st) return st;
    memset(w, 0, sizeof *w);
    w->t = t, w->op = op;
    st = pg->be->all_reduce(pg, t, nb_pg_data(t), nb_numel(t), nb_dtype_of(t), op, w);
    if (!st) w->active = true;
    return st;
}

/* AVG's scale after a sum: MPI has no average (NCCL's ncclAvg does it). */
static nb_status finish_avg(nb_process_group *pg, nb_tensor *t, nb_dist_op op) {
    if (op != NB_DIST_AVG || pg->backend == NB_DIST_NCCL || pg->size == 1) return NB_OK;
    bool prev = nb_set_grad_enabled(false); /* a collective writes t as data, as torch.distributed */
    nb_status st = nb_mul_scalar_(t, 1.0 / pg->size);
    nb_set_grad_enabled(prev);
    return st;
}

nb_status nb_pg_work_wait(nb_process_group *pg, nb_pg_work *w) {
    if (!w->active) return NB_OK;
    w->active = false;
    nb_status st = pg->be->wait(pg, w);
    return st ? st : finish_avg(pg, w->t, w->op);
}

nb_status nb_all_reduce(nb_process_group *pg, nb_tensor *t, nb_dist_op op) {
    nb_op_take_fresh();
    nb_pg_work w;
    nb_status st = nb_pg_all_reduce_start(pg, t, op, &w);
    return st ? st : nb_pg_work_wait(pg, &w);
}

struct nb_work {
    nb_process_group *pg;
    nb_pg_work w;
};

nb_work *nb_all_reduce_async(nb_process_group *pg, nb_tensor *t, nb_dist_op op) {
    nb_op_take_fresh();
    nb_work *w = malloc(sizeof *w);
    if (!w) return NB_FAIL(NB_ERR_OOM, "all_reduce: out of host memory");
    w->pg = pg;
    if (nb_pg_all_reduce_start(pg, t, op, &w->w)) {
        free(w);
        return NULL;
    }
    nb_retain(t); /* the caller may drop t before waiting */
    return w;
}

nb_status nb_work_wait(nb_work *w) {
    nb_op_take_fresh();
    if (!w) return nb_set_error(NB_ERR_INVALID_ARG, "work_wait: NULL work");
    nb_tensor *t = w->w.t;
    nb_status st = nb_pg_work_wait(w->pg, &w->w);
    nb_release(t);
    free(w);
    return st;
}

nb_status nb_broadcast(nb_process_group *pg, nb_tensor *t, int src) {
    nb_op_take_fresh();
    nb_status st = nb_pg_check(pg, "broadcast", t, false);
    if (st) return st;
    if (src < 0 || src >= pg->size)
        return nb_set_error(NB_ERR_INVALID_ARG, "broadcast: src %d outside a world of size %d", src, pg->size);
    return nb_numel(t) ? pg->be->broadcast(pg, t, nb_pg_data(t), nb_numel(t), nb_dtype_of(t), src) : NB_OK;
}

/* all_gather / reduce_scatter: in and out of one dtype, big = world * small. */
static nb_status check_pair(nb_process_group *pg, const char *op, const nb_tensor *big, const nb_tensor *small,
                            bool reduce) {
    nb_status st = nb_pg_check(pg, op, big, reduce);
    if (!st) st = nb_pg_check(pg, op, small, reduce);
    if (st) return st;
    char a[96], b[96];
    if (nb_dtype_of(big) != nb_dtype_of(small))
        return nb_set_error(NB_ERR_DTYPE, "%s: %s and %s tensors", op, nb_dtype_name(nb_dtype_of(big)),
                            nb_dtype_name(nb_dtype_of(small)));
    if (nb_numel(big) != nb_numel(small) * pg->size)
        return nb_set_error(NB_ERR_SHAPE, "%s: the whole tensor %s must have world size (%d) x %lld elements (the "
                            "shard %s)", op, nb_shape_str(big, a, sizeof a), pg->size, (long long)nb_numel(small),
                            nb_shape_str(small, b, sizeof b));
    return NB_OK;
}

nb_status nb_all_gather(nb_process_group *pg, nb_tensor *out, const nb_tensor *in) {
    nb_op_take_fresh();
    nb_status st = check_pair(pg, "all_gather", out, in, false);
    if (st) return st;
    int64_t n = nb_numel(in);
    void *dst = nb_pg_data(out);
    const void *src = nb_pg_data(in);
    if (n == 0) return NB_OK;
    return pg->be->all_gather(pg, out, dst, in, src, n, nb_dtype_of(in));
}

nb_status nb_reduce_scatter(nb_process_group *pg, nb_tensor *out, const nb_tensor *in, nb_dist_op op) {
    nb_op_take_fresh();
    nb_status st = check_pair(pg, "reduce_scatter", in, out, true);
    if (!st) st = check_op("reduce_scatter", &op, nb_dtype_of(in));
    if (st) return st;
    int64_t n = nb_numel(out);
    void *dst = nb_pg_data(out);
    const void *src = nb_pg_data(in);
    if (n == 0) return NB_OK;
    st = pg->be->reduce_scatter(pg, out, dst, in, src, n, nb_dtype_of(in), op);
    return st ? st : finish_avg(pg, out, op);
}

nb_status nb_barrier(nb_process_group *pg) {
    nb_op_take_fresh();
    if (!pg) return nb_set_error(NB_ERR_INVALID_ARG, "barrier: NULL process group");
    return pg->be->barrier(pg);
}
