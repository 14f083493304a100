/* pg_mpi.c - the MPI backend of the process group (CPU tensors), on a
 * duplicate of MPI_COMM_WORLD so that the caller's own MPI traffic never
 * matches ours; also MPI as NCCL's bootstrap under mpirun. Open MPI's
 * non-blocking collectives progress only inside MPI calls: DDP's hooks
 * call progress (MPI_Testall) as backward goes on. Without Open MPI's
 * headers at build time every entry point reports NB_ERR_UNSUPPORTED. */
#include <stdlib.h>

#include "dist_impl.h"

#ifdef NB_WITH_MPI
#include <limits.h>
#include <mpi.h>

typedef struct {
    MPI_Comm comm;
} mpi_ctx;

static nb_status mpi_fail(int rc, const char *op) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = 0;
    return nb_set_error(NB_ERR_DEVICE, "%s: MPI error %d: %s", op, rc, len ? msg : "(no message)");
}
#define MPI_TRY(op, call)                      \
    do {                                       \
        int rc_ = (call);                      \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, op); \
    } while (0)

static MPI_Comm comm_of(nb_process_group *pg) { return ((mpi_ctx *)pg->ctx)->comm; }

static MPI_Datatype mpi_type(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return MPI_FLOAT;
    case NB_F64: return MPI_DOUBLE;
    case NB_I32: return MPI_INT32_T;
    case NB_I64: return MPI_INT64_T;
    case NB_I8: return MPI_INT8_T;
    case NB_I16: return MPI_INT16_T;
    case NB_F16: case NB_BF16: return MPI_UINT16_T; /* moved, never reduced */
    default: return MPI_UINT8_T;                    /* uint8, bool */
    }
}

static MPI_Op mpi_op(nb_dist_op op) { /* bool SUM arrives as MAX (process_group.c) */
    return op == NB_DIST_MAX ? MPI_MAX : op == NB_DIST_MIN ? MPI_MIN : MPI_SUM; /* AVG: sum, then scaled */
}

static nb_status count_of(const char *op, int64_t n, int *c) {
    if (n > INT_MAX)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %lld elements exceed MPI's int count", op, (long long)n);
    *c = (int)n;
    return NB_OK;
}

/* MPI initialized by nabla is finalized when the last group using it goes. */
static bool we_inited;
static int users;

static nb_status ensure_init(nb_process_group *pg) {
    if (pg->mpi_inited) return NB_OK;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: MPI was already finalized");
    if (!inited) {
        int provided = 0;
        /* nabla's worker threads never call MPI: the caller's thread does */
        MPI_TRY("distributed_init", MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided));
        we_inited = true;
    }
    pg->mpi_inited = true; /* this group counts as a user of MPI */
    users++;
    return NB_OK;
}

static nb_status m_all_reduce(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, nb_dist_op op,
                              nb_pg_work *w) {
    (void)t;
    int c = 0;
    nb_status st = count_of("all_reduce", n, &c);
    if (st) return st;
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return nb_set_error(NB_ERR_OOM, "all_reduce: out of host memory");
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, c, mpi_type(dt), mpi_op(op), comm_of(pg), r);
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_fail(rc, "all_reduce");
    }
    w->req = r;
    return NB_OK;
}

static nb_status m_wait(nb_process_group *pg, nb_pg_work *w) {
    (void)pg;
    MPI_Request *r = w->req;
    int rc = MPI_Wait(r, MPI_STATUS_IGNORE);
    free(r);
    w->req = NULL;
    return rc == MPI_SUCCESS ? NB_OK : mpi_fail(rc, "all_reduce (wait)");
}

static void m_progress(nb_process_group *pg, nb_pg_work *w, int n) {
    (void)pg;
    for (int i = 0; i < n; i++)
        if (w[i].active) {
            int done = 0;
            MPI_Test(w[i].req, &done, MPI_STATUS_IGNORE); /* a finished request stays waitable: MPI_Wait on MPI_REQUEST_NULL returns at once */
        }
}

static nb_status m_broadcast(nb_process_group *pg, nb_tensor *t, void *buf, int64_t n, nb_dtype dt, int src) {
    (void)t;
    int c = 0;
    nb_status st = count_of("broadcast", n, &c);
    if (!st) MPI_TRY("broadcast", MPI_Bcast(buf, c, mpi_type(dt), src, comm_of(pg)));
    return st;
}

static nb_status m_all_gather(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in, const void *src,
                              int64_t n, nb_dtype dt) {
    (void)out, (void)in;
    int c = 0;
    nb_status st = count_of("all_gather", n, &c);
    if (st) return st;
    bool in_place = (const char *)src == (char *)dst + (size_t)pg->rank * (size_t)n * nb_dtype_size(dt);
    MPI_TRY("all_gather", MPI_Allgather(in_place ? MPI_IN_PLACE : src, c, mpi_type(dt), dst, c, mpi_type(dt),
                                        comm_of(pg)));
    return NB_OK;
}

static nb_status m_reduce_scatter(nb_process_group *pg, nb_tensor *out, void *dst, const nb_tensor *in,
                                  const void *src, int64_t n, nb_dtype dt, nb_dist_op op) {
    (void)out, (void)in;
    int c = 0;
    nb_status st = count_of("reduce_scatter", n * pg->size, &c);
    if (st) return st;
    size_t es = nb_dtype_size(dt);
    const char *s = src, *d = dst;
    if (d < s + (size_t)n * (size_t)pg->size * es && s < d + (size_t)n * es)
        return nb_set_error(NB_ERR_INVALID_ARG, "reduce_scatter: through MPI the output may not overlap the input");
    MPI_TRY("reduce_scatter", MPI_Reduce_scatter_block(src, dst, (int)n, mpi_type(dt), mpi_op(op), comm_of(pg)));
    return NB_OK;
}

static nb_status m_barrier(nb_process_group *pg) {
    MPI_TRY("barrier", MPI_Barrier(comm_of(pg)));
    return NB_OK;
}

static void m_destroy(nb_process_group *pg) {
    mpi_ctx *c = pg->ctx;
    if (c) MPI_Comm_free(&c->comm);
    free(c);
    pg->ctx = NULL;
}

static const nb_pg_backend_i mpi_iface = {
    .name = "MPI",
    .all_reduce = m_all_reduce,
    .wait = m_wait,
    .progress = m_progress,
    .broadcast = m_broadcast,
    .all_gather = m_all_gather,
    .reduce_scatter = m_reduce_scatter,
    .barrier = m_barrier,
    .destroy = m_destroy,
};

nb_status nb_pg_mpi_init(nb_process_group *pg) {
    nb_status st = ensure_init(pg);
    if (st) return st;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != pg->rank || size != pg->size)
        return nb_set_error(NB_ERR_INVALID_ARG, "distributed_init: MPI says rank %d of %d, the environment rank %d of %d",
                            rank, size, pg->rank, pg->size);
    mpi_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_OOM, "distributed_init: out of host memory");
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_fail(rc, "distributed_init");
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN); /* errors come back as statuses */
    pg->ctx = c, pg->be = &mpi_iface;
    return NB_OK;
}

nb_status nb_mpi_bootstrap_bcast(nb_process_group *pg, void *bytes, int n) {
    nb_status st = ensure_init(pg);
    if (st) return st;
    MPI_TRY("distributed_init (NCCL id)", MPI_Bcast(bytes, n, MPI_BYTE, 0, MPI_COMM_WORLD));
    return NB_OK;
}

nb_status nb_mpi_bootstrap_barrier(void) {
    MPI_TRY("barrier", MPI_Barrier(MPI_COMM_WORLD));
    return NB_OK;
}

void nb_mpi_finalize_if(nb_process_group *pg) {
    if (!pg || !pg->mpi_inited) return;
    pg->mpi_inited = false;
    int finalized = 0;
    if (--users == 0 && we_inited && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
}

#else /* !NB_WITH_MPI */

nb_status nb_pg_mpi_init(nb_process_group *pg) {
    (void)pg;
    return nb_set_error(NB_ERR_UNSUPPORTED, "distributed_init: this build has no MPI backend (install Open MPI's "
                                            "libopenmpi-dev and rebuild)");
}
nb_status nb_mpi_bootstrap_bcast(nb_process_group *pg, void *bytes, int n) {
    (void)pg, (void)bytes, (void)n;
    return nb_set_error(NB_ERR_UNSUPPORTED, "distributed_init: under mpirun NCCL exchanges its id over MPI, which this "
                                            "build lacks: set NB_DIST_INIT_FILE to a path every rank can read");
}
nb_status nb_mpi_bootstrap_barrier(void) {
    return nb_set_error(NB_ERR_UNSUPPORTED, "barrier: this build has no MPI");
}
void nb_mpi_finalize_if(nb_process_group *pg) { (void)pg; }

#endif
