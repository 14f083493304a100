/* dist_check.c - the process group, DDP and ZeRO-1 checked across real
 * processes: run under `mpirun -np N dist_check` (CPU, MPI) or one process
 * per GPU with --device cuda (NCCL); alone it is a world of one. Each rank
 * checks what it received against values it computes itself; the exit
 * status is the number of failed checks on this rank (capped), and the
 * last line "dist_check: rank R of N: K checks, F failed". The Check suite
 * `distributed` (test_distributed.c) runs it with 2 ranks.
 *
 *   dist_check [--device cpu|cuda] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nabla.h"

static int checks, failed, rank, world;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            failed++;                                                        \
            fprintf(stderr, "dist_check rank %d line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, " (%s)\n", nb_last_error());                     \
        }                                                                    \
    } while (0)

static nb_device dev;

/* A float64 copy of t on the host (n elements). */
static void host64(nb_tensor *t, double *out, int64_t n) {
    nb_tensor *c = nb_to_device(nb_to_dtype(nb_contiguous(t), NB_F64), NB_CPU);
    if (!c || nb_to_host(c, out, (size_t)n * sizeof(double))) memset(out, 0xff, (size_t)n * sizeof(double));
}

static nb_tensor *from64(const double *v, int64_t n, nb_dtype dt) {
    return nb_to_device(nb_to_dtype(nb_from_data(v, NB_SHAPE(n), NB_F64), dt), dev);
}

/* ---- collectives ---------------------------------------------------------- */

static void check_collectives(nb_process_group *pg) {
    enum { N = 37 };
    double v[N * 64], got[N * 64], got2[N]; /* worlds up to 64 (main refuses more) */
    const nb_dtype dts[] = {NB_F32, NB_F64, NB_I64};
    for (int d = 0; d < 3; d++) {
        nb_scope *s = nb_scope_begin();
        for (int i = 0; i < N; i++) v[i] = (rank + 1) * (i - 5);
        nb_tensor *t = from64(v, N, dts[d]), *a = from64(v, N, dts[d]), *mx = from64(v, N, dts[d]);
        CHECK(nb_all_reduce(pg, t, NB_DIST_SUM) == NB_OK, "all_reduce sum %s", nb_dtype_name(dts[d]));
        host64(t, got, N);
        double tri = world * (world + 1) / 2.0;
        bool ok = true;
        for (int i = 0; i < N; i++) ok &= got[i] == tri * (i - 5);
        CHECK(ok, "all_reduce sum %s values", nb_dtype_name(dts[d]));
        if (dts[d] != NB_I64) {
            CHECK(nb_all_reduce(pg, a, NB_DIST_AVG) == NB_OK, "all_reduce avg");
            host64(a, got, N);
            ok = true;
            for (int i = 0; i < N; i++) ok &= fabs(got[i] - tri / world * (i - 5)) <= 1e-6 * fabs(tri * (i - 5));
            CHECK(ok, "all_reduce avg %s values", nb_dtype_name(dts[d]));
        }
        CHECK(nb_all_reduce(pg, mx, NB_DIST_MAX) == NB_OK, "all_reduce max");
        host64(mx, got, N);
        ok = true;
        for (int i = 0; i < N; i++) ok &= got[i] == (i >= 5 ? world : 1) * (double)(i - 5);
        CHECK(ok, "all_reduce max %s values", nb_dtype_name(dts[d]));
        nb_scope_end(s);
    }
    nb_scope *s = nb_scope_begin();
    /* broadcast from the last rank */
    for (int i = 0; i < N; i++) v[i] = rank * 100 + i;
    nb_tensor *b = from64(v, N, NB_F32);
    CHECK(nb_broadcast(pg, b, world - 1) == NB_OK, "broadcast");
    host64(b, got, N);
    bool ok = true;
    for (int i = 0; i < N; i++) ok &= got[i] == (world - 1) * 100 + i;
    CHECK(ok, "broadcast values");
    /* all_gather, out of place and in place */
    nb_tensor *mine = from64(v, N, NB_F32), *all = nb_zeros(NB_SHAPE(N * world), NB_F32);
    CHECK(nb_all_gather(pg, all, mine) == NB_OK, "all_gather");
    host64(all, got, N * world);
    ok = true;
    for (int r = 0; r < world; r++)
        for (int i = 0; i < N; i++) ok &= got[r * N + i] == r * 100 + i;
    CHECK(ok, "all_gather values");
    nb_tensor *all2 = nb_zeros(NB_SHAPE(N * world), NB_F32);
    nb_tensor *slot = nb_narrow(all2, 0, rank * N, N);
    CHECK(nb_copy_(slot, mine) == NB_OK && nb_all_gather(pg, all2, slot) == NB_OK, "all_gather in place");
    host64(all2, got, N * world);
    ok = true;
    for (int r = 0; r < world; r++)
        for (int i = 0; i < N; i++) ok &= got[r * N + i] == r * 100 + i;
    CHECK(ok, "all_gather in place values");
    /* reduce_scatter: element j of the whole is (rank + 1) * j */
    for (int j = 0; j < N * world; j++) v[j] = (rank + 1) * j;
    nb_tensor *whole = from64(v, N * world, NB_F64), *part = nb_zeros(NB_SHAPE(N), NB_F64),
              *avg = nb_zeros(NB_SHAPE(N), NB_F64);
    CHECK(nb_reduce_scatter(pg, part, whole, NB_DIST_SUM) == NB_OK, "reduce_scatter");
    CHECK(nb_reduce_scatter(pg, avg, whole, NB_DIST_AVG) == NB_OK, "reduce_scatter avg");
    double tri = world * (world + 1) / 2.0;
    host64(part, got, N);
    host64(avg, got2, N);
    ok = true;
    for (int i = 0; i < N; i++) ok &= got[i] == tri * (rank * N + i) && fabs(got2[i] - tri / world * (rank * N + i)) < 1e-9 * (1 + got[i]);
    CHECK(ok, "reduce_scatter values");
    /* async */
    nb_tensor *c = nb_ones(NB_SHAPE(N), NB_F32);
    nb_work *w = nb_all_reduce_async(pg, c, NB_DIST_SUM);
    CHECK(w && nb_work_wait(w) == NB_OK, "all_reduce async");
    host64(c, got, N);
    CHECK(got[0] == world && got[N - 1] == world, "all_reduce async values");
    CHECK(nb_barrier(pg) == NB_OK, "barrier");
    /* bool SUM is a logical or; uint8 sums; AVG of integers is refused */
    for (int i = 0; i < N; i++) v[i] = i % world == rank;
    nb_tensor *bl = nb_to_dtype(from64(v, N, NB_F64), NB_BOOL), *u8 = nb_to_dtype(from64(v, N, NB_F64), NB_U8);
    CHECK(nb_all_reduce(pg, bl, NB_DIST_SUM) == NB_OK && nb_all_reduce(pg, u8, NB_DIST_SUM) == NB_OK, "bool, uint8 sum");
    host64(bl, got, N);
    host64(u8, got2, N);
    ok = true;
    for (int i = 0; i < N; i++) ok &= got[i] == 1 && got2[i] == 1;
    CHECK(ok, "bool sum is or, uint8 sum counts");
    CHECK(nb_all_reduce(pg, u8, NB_DIST_AVG) == NB_ERR_DTYPE, "AVG of uint8 refused");
    /* errors, the same on every rank (nothing is sent) */
    nb_tensor *m = nb_zeros(NB_SHAPE(4, 6), NB_F32);
    CHECK(nb_all_reduce(pg, nb_transpose(m, 0, 1), NB_DIST_SUM) == NB_ERR_INVALID_ARG &&
              strstr(nb_last_error(), "not contiguous"), "non-contiguous refused");
    CHECK(nb_all_gather(pg, nb_zeros(NB_SHAPE(N * world + 1), NB_F32), mine) == NB_ERR_SHAPE,
          "all_gather sizes refused");
    CHECK(nb_broadcast(pg, b, world) == NB_ERR_INVALID_ARG, "broadcast src out of range refused");
    CHECK(nb_all_reduce(pg, NULL, NB_DIST_SUM) == NB_ERR_INVALID_ARG, "NULL refused");
    if (nb_process_group_backend(pg) == NB_DIST_MPI)
        CHECK(nb_all_reduce(pg, nb_zeros(NB_SHAPE(3), NB_BF16), NB_DIST_SUM) == NB_ERR_UNSUPPORTED,
              "bfloat16 sum through MPI refused");
    nb_scope_end(s);
}

/* ---- the sampler ------------------------------------------------------------ */

static void check_shards(nb_process_group *pg) {
    enum { ROWS = 103 };
    nb_scope *s = nb_scope_begin();
    double xs[ROWS];
    for (int i = 0; i < ROWS; i++) xs[i] = i;
    nb_dataset *ds = nb_dataset_from_tensors(nb_from_data(xs, NB_SHAPE(ROWS, 1), NB_F64),
                                             nb_to_dtype(nb_from_data(xs, NB_SHAPE(ROWS), NB_F64), NB_I64));
    int64_t per = (ROWS + world - 1) / world;
    nb_loader *l = nb_loader_new(ds, (nb_loader_options){.batch_size = 5, .shuffle = true, .seed = 3,
                                                         .num_replicas = world, .rank = rank});
    CHECK(l != NULL, "sharded loader");
    for (int epoch = 0; l && epoch < 2; epoch++, nb_loader_reset(l)) {
        double mine[ROWS], *all = malloc(sizeof(double) * (size_t)(per * world));
        int64_t k = 0;
        for (nb_batch b; nb_loader_next(l, &b);)
            for (int64_t j = 0; j < b.size; j++) mine[k++] = (double)b.indices[j];
        CHECK(k == per, "rank's shard has %lld rows, want %lld", (long long)k, (long long)per);
        nb_tensor *m = from64(mine, per, NB_F64), *g = nb_zeros(NB_SHAPE(per * world), NB_F64);
        CHECK(nb_all_gather(pg, g, m) == NB_OK, "gather the shards");
        host64(g, all, per * world);
        int seen[ROWS] = {0};
        for (int64_t i = 0; i < per * world; i++) seen[(int)all[i]]++;
        int twice = 0, missing = 0;
        for (int i = 0; i < ROWS; i++) twice += seen[i] > 1 ? seen[i] - 1 : 0, missing += seen[i] == 0;
        CHECK(missing == 0 && twice == per * world - ROWS, "epoch %d: shards disjoint but for the %lld padding rows "
              "(%d rows missing, %d repeated)", epoch, (long long)(per * world - ROWS), missing, twice);
        free(all);
    }
    nb_loader_free(l);
    nb_dataset_free(ds);
    nb_scope_end(s);
}

/* ---- DDP -------------------------------------------------------------------- */

static nb_module *mlp(uint64_t seed, bool extra) {
    nb_manual_seed(seed);
    nb_module *m = nb_nn_sequential(nb_nn_linear(5, 64), nb_nn_tanh(), nb_nn_linear(64, 48), nb_nn_tanh(),
                                    nb_nn_linear(48, 3));
    if (m && extra) { /* a parameter the forward never uses */
        nb_tensor *w = nb_zeros(NB_SHAPE(2, 2), NB_F32);
        nb_module_register_parameter(m, "unused", w);
    }
    return m;
}

/* The batch of rank r: 4 rows of 5 features and their classes. */
static void batch_of(int r, nb_tensor **x, nb_tensor **y) {
    nb_generator g = nb_generator_new(100 + (uint64_t)r);
    *x = nb_to_device(nb_randn(NB_SHAPE(4, 5), NB_F32, &g), dev);
    double cls[4] = {r % 3, (r + 1) % 3, 2, 0};
    *y = nb_to_device(nb_to_dtype(nb_from_data(cls, NB_SHAPE(4), NB_F64), NB_I64), dev);
}

static nb_tensor *loss_of(nb_module *m, int r) {
    nb_tensor *x, *y;
    batch_of(r, &x, &y);
    return nb_cross_entropy(nb_forward(m, x), y);
}

/* max |a - b| / max |b| over the parameters (or their gradients) of two modules. */
static double rel_diff(nb_module *a, nb_module *b, bool grads) {
    nb_named_tensor pa[16], pb[16];
    int n = nb_module_parameters(a, pa, 16);
    nb_module_parameters(b, pb, 16);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        nb_tensor *x = grads ? nb_tensor_grad(pa[i].tensor) : pa[i].tensor, *y = grads ? nb_tensor_grad(pb[i].tensor) : pb[i].tensor;
        if (!x || !y) return INFINITY;
        int64_t k = nb_numel(x);
        double *u = malloc(sizeof(double) * (size_t)k), *w = malloc(sizeof(double) * (size_t)k), dm = 0, sm = 0;
        host64(x, u, k), host64(y, w, k);
        for (int64_t j = 0; j < k; j++) dm = fmax(dm, fabs(u[j] - w[j])), sm = fmax(sm, fabs(w[j]));
        free(u), free(w);
        worst = fmax(worst, dm / (sm > 0 ? sm : 1));
    }
    return worst;
}

/* ZeRO-1 checkpoints: 3 steps, the state gathered and written by rank 0,
 * resumed by every rank into fresh objects for 2 more steps, equals 5
 * uninterrupted steps bit for bit. */
static void zero1_steps(nb_ddp *d, nb_optimizer *o, nb_module *m, int from, int to) {
    for (int step = from; step < to; step++) {
        nb_scope *s = nb_scope_begin();
        nb_module_zero_grad(m);
        CHECK(nb_backward(loss_of(m, rank + step)) == NB_OK && nb_ddp_step(d, o) == NB_OK, "zero1 step %d", step);
        nb_scope_end(s);
    }
}

static void check_zero1_checkpoint(nb_process_group *pg) {
    nb_scope *s = nb_scope_begin();
    nb_adam_options ao = {.lr = 1e-2, .weight_decay = 0.1};
    /* a path every rank shares: rank 0's pid */
    double pid = (double)getpid();
    nb_tensor *pt = from64(&pid, 1, NB_F64);
    CHECK(nb_broadcast(pg, pt, 0) == NB_OK, "broadcast the path");
    char path[64];
    snprintf(path, sizeof path, "/tmp/nb_dist_check_%.0f.st", nb_item(pt));
    nb_module *a = mlp(1, false), *b = mlp(1, false), *c = mlp(77, false);
    nb_ddp *da = nb_ddp_new(a, pg, &(nb_ddp_options){.zero1 = true}), *db = nb_ddp_new(b, pg, &(nb_ddp_options){.zero1 = true});
    nb_ddp *dc = nb_ddp_new(c, pg, &(nb_ddp_options){.zero1 = true});
    CHECK(da && db && dc, "zero1 ddps");
    if (!da || !db || !dc) goto out;
    nb_tensor *sa = nb_ddp_shard_parameters(da), *sb = nb_ddp_shard_parameters(db), *sc = nb_ddp_shard_parameters(dc);
    nb_tensor *fb = nb_ddp_full_parameters(db), *fc = nb_ddp_full_parameters(dc);
    nb_optimizer *oa = nb_adamw_params(&sa, 1, ao), *ob = nb_adamw_params(&sb, 1, ao), *oc = nb_adamw_params(&sc, 1, ao);
    nb_optimizer *fob = nb_adamw_params(&fb, 1, ao), *foc = nb_adamw_params(&fc, 1, ao);
    zero1_steps(da, oa, a, 0, 5);
    zero1_steps(db, ob, b, 0, 3);
    CHECK(nb_ddp_gather_optimizer(db, ob, fob) == NB_OK, "gather the optimizer");
    if (rank == 0)
        CHECK(nb_save_checkpoint(path, &(nb_checkpoint){.module = b, .optimizer = fob}) == NB_OK, "rank 0 saves");
    CHECK(nb_barrier(pg) == NB_OK, "barrier after the save");
    CHECK(nb_load_checkpoint(path, &(nb_checkpoint){.module = c, .optimizer = foc}, NULL) == NB_OK, "every rank loads");
    CHECK(nb_ddp_scatter_optimizer(dc, foc, oc) == NB_OK, "scatter the optimizer");
    zero1_steps(dc, oc, c, 3, 5);
    double d = rel_diff(c, a, false);
    CHECK(d == 0, "resumed ZeRO-1 run differs from the uninterrupted one by %g", d);
    CHECK(nb_ddp_gather_optimizer(db, ob, foc) == NB_ERR_INVALID_ARG, "an optimizer on another ddp's parameters refused");
    CHECK(nb_barrier(pg) == NB_OK, "barrier before removing the file");
    if (rank == 0) remove(path);
    nb_optimizer_free(oa), nb_optimizer_free(ob), nb_optimizer_free(oc), nb_optimizer_free(fob), nb_optimizer_free(foc);
out:
    nb_ddp_free(da), nb_ddp_free(db), nb_ddp_free(dc);
    nb_module_free(a), nb_module_free(b), nb_module_free(c);
    nb_scope_end(s);
}

static void check_ddp(nb_process_group *pg) {
    nb_scope *s = nb_scope_begin();
    /* each rank starts from its own weights: DDP makes them rank 0's */
    nb_module *net = mlp(1 + (uint64_t)rank, false), *ref = mlp(1, false);
    nb_ddp *ddp = nb_ddp_new(net, pg, &(nb_ddp_options){.bucket_cap_mb = 0.004});
    CHECK(ddp != NULL, "ddp_new");
    if (!ddp) goto out;
    CHECK(nb_ddp_num_buckets(ddp) >= 2, "small buckets: %d", nb_ddp_num_buckets(ddp));
    CHECK(rel_diff(net, ref, false) == 0, "parameters broadcast from rank 0");
    /* the reference: the mean of every rank's mean loss, on one replica */
    nb_tensor *total = NULL;
    for (int r = 0; r < world; r++) {
        nb_tensor *l = loss_of(ref, r);
        total = total ? nb_add(total, l) : l;
    }
    CHECK(nb_backward(nb_mul_scalar(total, 1.0 / world)) == NB_OK, "reference backward");
    nb_module_zero_grad(net);
    CHECK(nb_backward(loss_of(net, rank)) == NB_OK, "ddp backward");
    double d = rel_diff(net, ref, true);
    CHECK(d < 1e-6, "averaged gradients differ from the whole batch's by %g", d);
    /* no_sync: two micro-batches, the second reduces their sum */
    nb_module_zero_grad(net), nb_module_zero_grad(ref);
    nb_ddp_set_no_sync(ddp, true);
    CHECK(nb_backward(loss_of(net, rank)) == NB_OK, "no_sync backward");
    nb_ddp_set_no_sync(ddp, false);
    CHECK(nb_backward(loss_of(net, (rank + 1) % world)) == NB_OK, "synced backward");
    total = NULL;
    for (int r = 0; r < world; r++) {
        nb_tensor *l = nb_add(loss_of(ref, r), loss_of(ref, (r + 1) % world));
        total = total ? nb_add(total, l) : l;
    }
    CHECK(nb_backward(nb_mul_scalar(total, 1.0 / world)) == NB_OK, "reference accumulation");
    d = rel_diff(net, ref, true);
    CHECK(d < 1e-6, "accumulated gradients differ by %g", d);
    /* ZeRO-1 against plain DDP: three AdamW steps */
    nb_module *z = mlp(1, false), *p = mlp(1, false);
    nb_ddp *dz = nb_ddp_new(z, pg, &(nb_ddp_options){.zero1 = true}), *dp = nb_ddp_new(p, pg, NULL);
    nb_tensor *shard = dz ? nb_ddp_shard_parameters(dz) : NULL;
    nb_tensor *zflat = NULL;
    CHECK(nb_module_flat_buffers(z, &zflat, NULL, 1) == 1 && shard && nb_numel(shard) * world == nb_numel(zflat),
          "zero1 shard: 1/world of the flat parameters");
    nb_optimizer *oz = shard ? nb_adamw_params(&shard, 1, (nb_adam_options){.lr = 1e-2, .weight_decay = 0.1}) : NULL;
    nb_optimizer *op = nb_adamw(p, (nb_adam_options){.lr = 1e-2, .weight_decay = 0.1});
    CHECK(nb_ddp_shard_parameters(dp) == NULL, "no shard without zero1");
    for (int step = 0; oz && dp && step < 3; step++) {
        nb_module_zero_grad(z), nb_module_zero_grad(p);
        CHECK(nb_backward(loss_of(z, rank + step)) == NB_OK && nb_ddp_step(dz, oz) == NB_OK, "zero1 step");
        CHECK(nb_backward(loss_of(p, rank + step)) == NB_OK && nb_ddp_step(dp, op) == NB_OK, "ddp step");
    }
    d = rel_diff(z, p, false);
    CHECK(d < 1e-6, "ZeRO-1 parameters differ from DDP's by %g", d);
    nb_tensor *zg = NULL;
    CHECK(nb_module_flat_buffers(z, NULL, &zg, 1) == 1 && nb_item(nb_sum(nb_abs(zg), NULL, 0, false)) == 0,
          "zero1's step spends the local gradients");
    nb_optimizer_free(oz), nb_optimizer_free(op);
    nb_ddp_free(dz), nb_ddp_free(dp);
    nb_module_free(z), nb_module_free(p);
    check_zero1_checkpoint(pg);
    /* a frozen parameter: reduced with its bucket, never awaited */
    nb_module *fz = mlp(1, false);
    nb_named_tensor fp[8];
    nb_module_parameters(fz, fp, 8);
    nb_set_requires_grad(fp[1].tensor, false); /* 0.bias */
    nb_ddp *dfz = nb_ddp_new(fz, pg, &(nb_ddp_options){.bucket_cap_mb = 0.004});
    nb_optimizer *ofz = nb_sgd(fz, (nb_sgd_options){.lr = 0.1});
    double before = nb_item(nb_sum(fp[1].tensor, NULL, 0, false));
    for (int step = 0; dfz && step < 2; step++) {
        nb_module_zero_grad(fz);
        CHECK(nb_backward(loss_of(fz, rank + step)) == NB_OK && nb_ddp_step(dfz, ofz) == NB_OK,
              "step with a frozen parameter");
    }
    CHECK(dfz && nb_item(nb_sum(fp[1].tensor, NULL, 0, false)) == before, "the frozen parameter is unchanged");
    nb_optimizer_free(ofz);
    nb_ddp_free(dfz);
    nb_module_free(fz);
    /* an unused parameter is named */
    nb_module *u = mlp(1, true);
    nb_ddp *du = nb_ddp_new(u, pg, NULL);
    nb_optimizer *ou = nb_sgd(u, (nb_sgd_options){.lr = 0.1});
    CHECK(du && nb_backward(loss_of(u, rank)) == NB_OK, "backward with an unused parameter");
    CHECK(nb_ddp_step(du, ou) == NB_ERR_STATE && strstr(nb_last_error(), "parameter unused "),
          "step after a backward that left parameter unused out");
    nb_optimizer_free(ou);
    nb_ddp_free(du);
    nb_module_free(u);
    nb_ddp_free(ddp);
out:
    nb_module_free(net), nb_module_free(ref);
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    dev = NB_CPU;
    if (argc == 3 && !strcmp(argv[1], "--device") && nb_device_parse(argv[2], &dev) != NB_OK) return 100;
    dev = nb_distributed_local_device(dev); /* one GPU per rank */
    nb_set_num_threads(1);
    nb_set_default_device(dev);
    nb_process_group *pg = nb_distributed_init((nb_distributed_options){.device = dev});
    if (!pg) {
        fprintf(stderr, "dist_check: %s\n", nb_last_error());
        return 100;
    }
    rank = nb_process_group_rank(pg), world = nb_process_group_size(pg);
    if (world > 64) {
        fprintf(stderr, "dist_check: at most 64 ranks\n");
        return 100;
    }
    check_collectives(pg);
    check_shards(pg);
    check_ddp(pg);
    printf("dist_check: rank %d of %d (%s on %s): %d checks, %d failed\n", rank, world,
           nb_process_group_backend(pg) == NB_DIST_NCCL ? "NCCL" : "MPI", dev.type == NB_DEVICE_CUDA ? "cuda" : "cpu",
           checks, failed);
    nb_distributed_destroy(pg);
    return failed > 99 ? 99 : failed;
}
