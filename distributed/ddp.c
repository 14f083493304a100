/* ddp.c - DistributedDataParallel: gradient buckets over the flat gradient
 * buffers, all-reduced as backward fills them (PyTorch's Reducer), and
 * ZeRO-1's sharded step (llm.c's). A bucket is a contiguous range of a
 * flat gradient buffer (nb_module_flatten_parameters lays the parameters
 * out in registration order), so its all-reduce runs in place on the
 * gradients themselves: no copy into or out of bucket storage. The buckets
 * are cut from the end of the buffer (backward produces the last layers'
 * gradients first); the first is capped at 1 MiB so communication starts
 * early, as PyTorch does. Buckets are launched strictly in order (NCCL
 * needs every rank to issue the same collectives in the same order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"
#include "nb_autograd.h"

#define MAX_GROUPS 4
#define FIRST_BUCKET_BYTES ((double)(1 << 20))

typedef struct bucket {
    nb_tensor *grad;   /* the view of the flat gradient it reduces (owned reference) */
    int n_params, pending; /* parameters awaited in it (frozen ones are not); those not ready yet */
    nb_pg_work work;
} bucket;

typedef struct param {
    nb_ddp *ddp;
    nb_tensor *t; /* borrowed from the module */
    const char *name;
    int bucket;
    int64_t hook;
    bool ready;
} param;

struct nb_ddp {
    nb_module *m; /* borrowed */
    nb_process_group *pg;
    nb_ddp_options o;
    int n_groups;
    nb_tensor *flat[MAX_GROUPS], *gflat[MAX_GROUPS]; /* borrowed from the module */
    param *params;
    int n_params;
    bucket *buckets;
    int n_buckets, next_launch, n_ready;
    bool no_sync;
    int64_t pre_hook; /* the buffers' broadcast before each forward (0: none) */
    /* zero1 */
    nb_tensor *shard, *shard_grad; /* owned */
    nb_tensor *full;               /* owned: the whole flat parameters as a leaf (checkpoints) */
};

/* ---- buckets --------------------------------------------------------------- */

static nb_status launch_ready(nb_ddp *d) {
    while (d->next_launch < d->n_buckets && d->buckets[d->next_launch].pending == 0) {
        bucket *b = &d->buckets[d->next_launch];
        nb_status st = nb_pg_all_reduce_start(d->pg, b->grad, NB_DIST_AVG, &b->work);
        if (st) return st;
        d->next_launch++;
    }
    return NB_OK;
}

/* The end of an iteration's reduction: the current stream (or the process)
 * waits for every bucket, and the counters start over. */
static nb_status finish(nb_ddp *d) {
    nb_status st = NB_OK;
    for (int i = 0; i < d->n_buckets; i++) {
        nb_status s = nb_pg_work_wait(d->pg, &d->buckets[i].work);
        if (!st) st = s;
        d->buckets[i].pending = d->buckets[i].n_params;
    }
    for (int i = 0; i < d->n_params; i++) d->params[i].ready = false;
    d->next_launch = 0, d->n_ready = 0;
    return st;
}

static const char *missing_param(const nb_ddp *d) {
    for (int i = 0; i < d->n_params; i++)
        if (!d->params[i].ready && d->params[i].bucket >= 0) return d->params[i].name;
    return "?";
}

static nb_status on_grad(nb_tensor *leaf, void *user) {
    (void)leaf;
    param *p = user;
    nb_ddp *d = p->ddp;
    if (d->no_sync || d->o.zero1) return NB_OK;
    if (p->ready)
        return nb_set_error(NB_ERR_STATE, "ddp: parameter %s received a second gradient before its bucket was reduced: "
                            "parameter %s got no gradient in an earlier backward (every parameter must take part "
                            "in the loss; unused parameters are not supported)", p->name, missing_param(d));
    p->ready = true;
    d->n_ready++;
    bucket *b = &d->buckets[p->bucket];
    b->pending--;
    nb_status st = b->pending == 0 ? launch_ready(d) : NB_OK;
    if (!st && d->pg->be->progress) /* MPI: let the launched buckets move */
        for (int i = 0; i < d->next_launch; i++) d->pg->be->progress(d->pg, &d->buckets[i].work, 1);
    if (!st && d->next_launch == d->n_buckets) st = finish(d);
    else if (st) { /* a failed launch (an aborted communicator): wait for the launched buckets and start over,
                      so the caller can carry on after handling the error */
        char why[512];
        snprintf(why, sizeof why, "%s", nb_last_error());
        finish(d);
        nb_set_error(st, "%s", why);
    }
    return st;
}

/* ---- buffers ---------------------------------------------------------------- */

static nb_status broadcast_buffers(nb_ddp *d) {
    int n = nb_module_buffers(d->m, NULL, 0);
    if (n <= 0) return n < 0 ? nb_last_status() : NB_OK;
    nb_named_tensor *bs = malloc(sizeof *bs * (size_t)n);
    if (!bs) return nb_set_error(NB_ERR_OOM, "ddp: out of host memory");
    nb_module_buffers(d->m, bs, n);
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) st = nb_broadcast(d->pg, bs[i].tensor, 0);
    free(bs);
    return st;
}

/* PyTorch syncs buffers only for forwards that will be followed by a
 * synced backward: grad enabled and no_sync off. */
static nb_status before_forward(nb_module *m, nb_tensor *input, nb_tensor **replace, void *user) {
    (void)m, (void)input, (void)replace;
    nb_ddp *d = user;
    return nb_is_grad_enabled() && !d->no_sync ? broadcast_buffers(d) : NB_OK;
}

/* ---- construction ------------------------------------------------------------ */

static int group_of(const nb_ddp *d, const nb_tensor *g) {
    for (int i = 0; i < d->n_groups; i++)
        if (nb_shares_storage(g, d->gflat[i])) return i;
    return -1;
}

/* An owned 1-d view of elements [lo, lo + len) of a flat buffer (a bucket,
 * a ZeRO-1 shard, the whole for checkpoints), or NULL with an error. */
static nb_tensor *flat_slice(nb_tensor *flat, int64_t lo, int64_t len) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *v = nb_tensor_view_of(flat, 1, &len, (int64_t[]){1}, nb_storage_offset(flat) + lo);
    nb_retain(v);
    nb_scope_end(s);
    return v;
}

/* Closes bucket k as the range [lo, hi) of group g's flat gradient. */
static nb_status close_bucket(nb_ddp *d, int k, int g, int64_t lo, int64_t hi) {
    d->buckets[k].grad = flat_slice(d->gflat[g], lo, hi - lo);
    return d->buckets[k].grad ? NB_OK : nb_last_status();
}

/* Cuts each group's buffer into buckets from its end. */
static nb_status make_buckets(nb_ddp *d) {
    double cap = (d->o.bucket_cap_mb > 0 ? d->o.bucket_cap_mb : 25.0) * 1048576.0;
    d->buckets = calloc((size_t)d->n_params + 1, sizeof *d->buckets);
    if (!d->buckets) return nb_set_error(NB_ERR_OOM, "ddp: out of host memory");
    for (int g = 0; g < d->n_groups; g++) {
        int64_t hi = nb_numel(d->gflat[g]), lo = 0;
        double bytes = 0, es = (double)nb_dtype_size(nb_dtype_of(d->gflat[g]));
        int open = -1;
        for (int i = d->n_params - 1; i >= 0; i--) {
            param *p = &d->params[i];
            if (group_of(d, nb_tensor_grad(p->t)) != g) continue;
            if (open < 0) {
                open = d->n_buckets++;
                bytes = 0;
            }
            if (nb_requires_grad(p->t)) { /* a frozen parameter is reduced with its bucket, never awaited */
                p->bucket = open;
                d->buckets[open].n_params++;
            }
            lo = nb_storage_offset(nb_tensor_grad(p->t)) - nb_storage_offset(d->gflat[g]);
            bytes += (double)nb_numel(p->t) * es;
            if (bytes >= (open == 0 && cap > FIRST_BUCKET_BYTES ? FIRST_BUCKET_BYTES : cap)) {
                nb_status st = close_bucket(d, open, g, lo, hi);
                if (st) return st;
                hi = lo, open = -1;
            }
        }
        if (open >= 0) { /* the group's first parameters */
            nb_status st = close_bucket(d, open, g, 0, hi);
            if (st) return st;
        }
    }
    for (int i = 0; i < d->n_buckets; i++) d->buckets[i].pending = d->buckets[i].n_params;
    return NB_OK;
}

static nb_status make_shard(nb_ddp *d) {
    if (d->n_groups != 1)
        return nb_set_error(NB_ERR_UNSUPPORTED, "ddp: zero1 shards one flat buffer; the module's parameters form %d "
                            "(dtype, device) groups", d->n_groups);
    int64_t n = nb_numel(d->flat[0]), w = d->pg->size;
    if (n % w)
        return nb_set_error(NB_ERR_UNSUPPORTED, "ddp: zero1 needs the flat parameters (%lld elements) to split evenly "
                            "over world size %lld: the module was flattened before nb_ddp_new", (long long)n, (long long)w);
    int64_t s = n / w;
    if (!(d->shard = flat_slice(d->flat[0], s * d->pg->rank, s))) return nb_last_status();
    nb_status st = nb_set_requires_grad(d->shard, true); /* a leaf: the optimizer's parameter */
    if (st) return st;
    d->shard_grad = nb_tensor_new_unscoped(1, &s, nb_dtype_of(d->flat[0]), d->pg->device);
    if (!d->shard_grad) return nb_last_status();
    return nb_fill_(d->shard_grad, 0);
}

void nb_ddp_free(nb_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->n_buckets; i++) {
        nb_pg_work_wait(d->pg, &d->buckets[i].work);
        nb_release(d->buckets[i].grad);
    }
    for (int i = 0; i < d->n_params; i++)
        if (d->params[i].hook > 0) nb_remove_hook(d->params[i].t, d->params[i].hook);
    if (d->pre_hook > 0) nb_module_remove_hook(d->m, d->pre_hook);
    if (d->shard) nb_tensor_set_grad(d->shard, NULL, false);
    nb_release(d->shard), nb_release(d->shard_grad), nb_release(d->full);
    free(d->buckets);
    free(d->params);
    free(d);
}

nb_ddp *nb_ddp_new(nb_module *m, nb_process_group *pg, const nb_ddp_options *opts) {
    nb_op_take_fresh();
    if (!m || !pg) return NB_FAIL(NB_ERR_INVALID_ARG, "ddp_new: NULL %s", m ? "process group" : "module");
    nb_ddp *d = calloc(1, sizeof *d);
    if (!d) return NB_FAIL(NB_ERR_OOM, "ddp_new: out of host memory");
    d->m = m, d->pg = pg;
    if (opts) d->o = *opts;
    nb_scope *s = nb_op_scope_begin();
    nb_named_tensor *ps = NULL;
    nb_status st = NB_OK;
    int n = nb_module_parameters(m, NULL, 0);
    if (n < 0) st = nb_last_status(), n = 0;
    if (!st && !(ps = malloc(sizeof *ps * (size_t)(n ? n : 1)))) st = nb_set_error(NB_ERR_OOM, "ddp_new: out of host memory");
    if (!st && !(d->params = calloc((size_t)(n ? n : 1), sizeof *d->params)))
        st = nb_set_error(NB_ERR_OOM, "ddp_new: out of host memory");
    if (!st) nb_module_parameters(m, ps, n);
    for (int i = 0; i < n && !st; i++) { /* distinct tensors, in registration order; checked before m changes */
        bool seen = false;
        for (int j = 0; j < d->n_params && !seen; j++) seen = d->params[j].t == ps[i].tensor;
        if (seen) continue;
        nb_device dv = nb_device_of(ps[i].tensor);
        if (dv.type != pg->device.type || dv.index != pg->device.index) {
            char a[32], b[32];
            st = nb_set_error(NB_ERR_DEVICE, "ddp_new: parameter %s is on %s, the process group on %s", ps[i].name,
                              nb_device_str(dv, a, sizeof a), nb_device_str(pg->device, b, sizeof b));
        } else if (d->o.zero1 && !nb_requires_grad(ps[i].tensor)) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "ddp_new: zero1 steps every element of the flat parameters, and "
                              "parameter %s is frozen (requires_grad false)", ps[i].name);
        }
        d->params[d->n_params++] = (param){.ddp = d, .t = ps[i].tensor, .name = ps[i].name, .bucket = -1};
    }
    /* with zero1 every rank's shard is the same length (all_gather's rule) */
    if (!st) st = nb_module_flatten_parameters_ex(m, d->o.zero1 ? 64 * (int64_t)pg->size : 1);
    if (!st) d->n_groups = nb_module_flat_buffers(m, d->flat, d->gflat, MAX_GROUPS);
    for (int i = 0; i < d->n_params && !st; i++) /* a parameter registered after an earlier flatten */
        if (!nb_tensor_grad(d->params[i].t) || group_of(d, nb_tensor_grad(d->params[i].t)) < 0)
            st = nb_set_error(NB_ERR_INVALID_ARG, "ddp_new: parameter %s is not in the module's flat buffers "
                              "(registered after nb_module_flatten_parameters?)", d->params[i].name);
    for (int g = 0; g < d->n_groups && !st; g++) st = nb_pg_check(pg, "ddp_new", d->gflat[g], true);
    /* every rank starts from rank 0's weights and buffers */
    for (int g = 0; g < d->n_groups && !st; g++) st = nb_broadcast(pg, d->flat[g], 0);
    if (!st) st = broadcast_buffers(d);
    if (!st) st = d->o.zero1 ? make_shard(d) : NB_OK;
    if (!st) st = make_buckets(d);
    for (int i = 0; i < d->n_params && !st; i++) {
        if (d->params[i].bucket < 0) continue; /* frozen */
        d->params[i].hook = nb_register_post_accumulate_grad_hook(d->params[i].t, on_grad, &d->params[i]);
        if (d->params[i].hook < 0) st = nb_last_status();
    }
    if (!st && !d->o.no_broadcast_buffers && nb_module_buffers(m, NULL, 0) > 0) {
        d->pre_hook = nb_module_register_forward_pre_hook(m, before_forward, d);
        if (d->pre_hook < 0) st = nb_last_status();
    }
    free(ps);
    nb_scope_end(s);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", nb_last_error());
        nb_ddp_free(d);
        return NB_FAIL(st, "%s", msg);
    }
    return d;
}

/* ---- steps ---------------------------------------------------------------------- */

nb_status nb_ddp_set_no_sync(nb_ddp *d, bool no_sync) {
    if (!d) return nb_set_error(NB_ERR_INVALID_ARG, "ddp_set_no_sync: NULL ddp");
    d->no_sync = no_sync;
    return NB_OK;
}

nb_status nb_ddp_step(nb_ddp *d, nb_optimizer *opt) {
    nb_op_take_fresh();
    if (!d || !opt) return nb_set_error(NB_ERR_INVALID_ARG, "ddp_step: NULL %s", d ? "optimizer" : "ddp");
    if (!d->o.zero1) {
        if (d->n_ready > 0)
            return nb_set_error(NB_ERR_STATE, "ddp_step: the last backward left parameter %s without a gradient, so its "
                                "bucket was never reduced (unused parameters are not supported)", missing_param(d));
        return nb_optimizer_step(opt);
    }
    nb_status st = nb_reduce_scatter(d->pg, d->shard_grad, d->gflat[0], NB_DIST_AVG);
    if (!st) st = nb_fill_(d->gflat[0], 0); /* the local gradients are spent */
    if (st) return st;
    if (nb_tensor_grad(d->shard) != d->shard_grad) /* zero_grad(set_to_none) may have dropped it */
        st = nb_tensor_set_grad(d->shard, d->shard_grad, false);
    if (st) return st;
    st = nb_optimizer_step(opt);
    if (!st) st = nb_all_gather(d->pg, d->flat[0], d->shard);
    return st;
}

nb_tensor *nb_ddp_shard_parameters(nb_ddp *d) {
    if (!d) return NB_FAIL(NB_ERR_INVALID_ARG, "ddp_shard_parameters: NULL ddp");
    if (!d->o.zero1) return NB_FAIL(NB_ERR_STATE, "ddp_shard_parameters: this ddp was made without zero1");
    if (!nb_tensor_grad(d->shard) && nb_tensor_set_grad(d->shard, d->shard_grad, false)) return NULL;
    return d->shard;
}

/* ---- ZeRO-1 checkpoints --------------------------------------------------------- */

/* The element-wise optimizers' state tensors (nb_optim.h's State: lists). */
static const char *const state_names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg",
                                          "acc_delta", "sum", "exp_inf", "ax", "grad_avg", "prev", "step_size",
                                          "variance"};
static const char *const scalar_names[] = {"mu_product", "eta", "mu"};

nb_tensor *nb_ddp_full_parameters(nb_ddp *d) {
    if (!d) return NB_FAIL(NB_ERR_INVALID_ARG, "ddp_full_parameters: NULL ddp");
    if (!d->o.zero1) return NB_FAIL(NB_ERR_STATE, "ddp_full_parameters: this ddp was made without zero1");
    if (!d->full && (d->full = flat_slice(d->flat[0], 0, nb_numel(d->flat[0]))) &&
        nb_set_requires_grad(d->full, true)) {
        nb_release(d->full);
        d->full = NULL;
    }
    return d->full;
}

/* Checks a (shard, full) pair of optimizers against d. */
static nb_status check_pair_opt(nb_ddp *d, const char *op, nb_optimizer *shard, nb_optimizer *full) {
    if (!d || !shard || !full) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL argument", op);
    if (!d->o.zero1) return nb_set_error(NB_ERR_STATE, "%s: this ddp was made without zero1", op);
    if (!nb_ddp_full_parameters(d)) return nb_last_status();
    if (nb_optimizer_num_params(shard) != 1 || nb_optimizer_param(shard, 0) != d->shard ||
        nb_optimizer_num_params(full) != 1 || nb_optimizer_param(full, 0) != d->full)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: the optimizers must be built on nb_ddp_shard_parameters and "
                            "nb_ddp_full_parameters alone", op);
    for (size_t i = 0; i < sizeof scalar_names / sizeof *scalar_names; i++) {
        double v;
        nb_optimizer *o[2] = {shard, full};
        for (int k = 0; k < 2; k++)
            if (nb_optimizer_state_scalar(o[k], 0, scalar_names[i], &v) == NB_OK)
                return nb_set_error(NB_ERR_UNSUPPORTED, "%s: optimizer state with the scalar %s is not sharded "
                                    "(element-wise tensor state only)", op, scalar_names[i]);
    }
    nb_clear_error(); /* the probes above */
    return NB_OK;
}

/* Copies from's step count, lr and state into to (shard -> full through
 * all_gather, or full -> shard through this rank's slice). */
static nb_status move_state(nb_ddp *d, const char *op, nb_optimizer *from, nb_optimizer *to, bool gather) {
    nb_status st = check_pair_opt(d, op, gather ? from : to, gather ? to : from);
    if (st) return st;
    int64_t step = nb_optimizer_step_count(from, 0);
    if (step < 0) return nb_last_status();
    if ((st = nb_optimizer_set_lr(to, nb_optimizer_get_lr(from)))) return st;
    if ((st = nb_optimizer_init_state(to, 0, step))) return st;
    nb_scope *s = nb_op_scope_begin();
    int64_t n = nb_numel(d->shard);
    for (size_t i = 0; i < sizeof state_names / sizeof *state_names && !st; i++) {
        nb_tensor *a = nb_optimizer_state(from, 0, state_names[i]), *b = nb_optimizer_state(to, 0, state_names[i]);
        if (!a && !b) continue;
        if (!a || !b) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: state %s is in one optimizer and not the other (different "
                              "kinds or options)", op, state_names[i]);
            break;
        }
        st = gather ? nb_all_gather(d->pg, b, a) : nb_copy_(b, nb_narrow(a, 0, n * d->pg->rank, n));
    }
    nb_scope_end(s);
    return st;
}

nb_status nb_ddp_gather_optimizer(nb_ddp *d, nb_optimizer *shard, nb_optimizer *full) {
    nb_op_take_fresh();
    return move_state(d, "ddp_gather_optimizer", shard, full, true);
}

nb_status nb_ddp_scatter_optimizer(nb_ddp *d, nb_optimizer *full, nb_optimizer *shard) {
    nb_op_take_fresh();
    return move_state(d, "ddp_scatter_optimizer", full, shard, false);
}

int nb_ddp_num_buckets(const nb_ddp *d) {
    if (!d) return nb_set_error(NB_ERR_INVALID_ARG, "ddp_num_buckets: NULL ddp"), -1;
    return d->n_buckets;
}

int64_t nb_ddp_bucket_numel(const nb_ddp *d, int i) {
    if (!d || i < 0 || i >= d->n_buckets)
        return nb_set_error(NB_ERR_INVALID_ARG, "ddp_bucket_numel: %s", d ? "bucket index out of range" : "NULL ddp"), -1;
    return nb_numel(d->buckets[i].grad);
}
