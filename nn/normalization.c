/* normalization.c - nn.GroupNorm, nn.InstanceNorm1d/2d/3d and
 * nn.LocalResponseNorm over the functionals of autograd/ops_group_norm.c,
 * with PyTorch's parameters (weight ones, bias zeros, when affine) and
 * buffers (running_mean zeros, running_var ones, num_batches_tracked, when
 * InstanceNorm tracks running statistics; as PyTorch's, the counter is
 * never incremented).
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nn_impl.h"

typedef struct norm_ctx {
    const char *kind;
    int batched_dim; /* InstanceNorm: the batched input's rank (one less: unbatched) */
    int64_t groups;  /* GroupNorm */
    double eps, momentum;
    int64_t size;    /* LocalResponseNorm */
    double alpha, beta, k;
    bool track;
    /* borrowed from the module; NULL when absent */
    nb_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} norm_ctx;

static nb_tensor *group_norm_forward(nb_module *m, nb_tensor *x) {
    const norm_ctx *c = nb_module_ctx(m);
    return nb_group_norm(x, c->groups, c->weight, c->bias, c->eps);
}

static nb_tensor *instance_norm_forward(nb_module *m, nb_tensor *x) {
    const norm_ctx *c = nb_module_ctx(m);
    int nd = nb_dim(x);
    if (nd != c->batched_dim && nd != c->batched_dim - 1)
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected %dD (unbatched) or %dD (batched) input (got %dD input)", c->kind,
                       c->batched_dim - 1, c->batched_dim, nd);
    bool training = nb_module_is_training(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *xb = nd == c->batched_dim ? x : nb_unsqueeze(x, 0);
    nb_tensor *y = nb_instance_norm(xb, c->running_mean, c->running_var, c->weight, c->bias, training || !c->track,
                                    c->momentum, c->eps);
    if (y && nd != c->batched_dim) y = nb_squeeze(y, 0); /* num_batches_tracked stays: PyTorch's InstanceNorm never counts */
    return nb_scope_return(s, y);
}

static nb_tensor *lrn_forward(nb_module *m, nb_tensor *x) {
    const norm_ctx *c = nb_module_ctx(m);
    return nb_local_response_norm(x, c->size, c->alpha, c->beta, c->k);
}

static const nb_module_ops group_norm_ops = {"GroupNorm", group_norm_forward, free, NULL};
static const nb_module_ops in1d_ops = {"InstanceNorm1d", instance_norm_forward, free, NULL};
static const nb_module_ops in2d_ops = {"InstanceNorm2d", instance_norm_forward, free, NULL};
static const nb_module_ops in3d_ops = {"InstanceNorm3d", instance_norm_forward, free, NULL};
static const nb_module_ops lrn_ops = {"LocalResponseNorm", lrn_forward, free, NULL};

/* The module with weight and bias when affine (and the running statistics when track). */
static nb_module *with_tensors(const nb_module_ops *ops, norm_ctx *c, int64_t n, bool affine, nb_dtype dt) {
    nb_module *m = nb_module_new(ops, c);
    if (!m) return NULL;
    bool ok = true;
    if (affine) ok = (c->weight = nb_nn_filled_tensor(m, "weight", true, n, dt, 1.0)) && (c->bias = nb_nn_filled_tensor(m, "bias", true, n, dt, 0.0));
    if (ok && c->track)
        ok = (c->running_mean = nb_nn_filled_tensor(m, "running_mean", false, n, dt, 0.0)) &&
             (c->running_var = nb_nn_filled_tensor(m, "running_var", false, n, dt, 1.0)) &&
             (c->num_batches_tracked = nb_nn_filled_tensor(m, "num_batches_tracked", false, -1, NB_I64, 0.0));
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_group_norm_ex(int64_t num_groups, int64_t num_channels, double eps, bool affine, nb_dtype dt) {
    if (num_groups < 1 || num_channels < 1 || num_channels % num_groups)
        return NB_FAIL(NB_ERR_INVALID_ARG, "GroupNorm: num_channels %lld must be divisible by num_groups %lld (both >= 1)",
                       (long long)num_channels, (long long)num_groups);
    if (!(nb_option(eps, 1e-5) >= 0) || !isfinite(eps)) return NB_FAIL(NB_ERR_INVALID_ARG, "GroupNorm: eps %g must be >= 0", eps);
    if (!nb_nn_check_dtype("GroupNorm", NB_OP_GROUP_NORM, dt)) return NULL;
    norm_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "GroupNorm: out of host memory");
    c->kind = group_norm_ops.kind, c->groups = num_groups, c->eps = eps;
    return with_tensors(&group_norm_ops, c, num_channels, affine, dt);
}

nb_module *nb_nn_group_norm(int64_t num_groups, int64_t num_channels, double eps) {
    return nb_nn_group_norm_ex(num_groups, num_channels, eps, true, NB_F32);
}

static nb_module *instance_norm_new(const nb_module_ops *ops, int batched_dim, int64_t num_features, double eps,
                                    double momentum, bool affine, bool track_running_stats) {
    if (num_features < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: num_features must be > 0 (got %lld)", ops->kind, (long long)num_features);
    /* kept as given (NB_ZERO included): nb_instance_norm applies the defaults */
    if (!(nb_option(eps, 1e-5) >= 0) || !isfinite(eps) || !(nb_option(momentum, 0.1) >= 0 && momentum <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eps (%g) must be >= 0 and momentum (%g) in [0, 1]", ops->kind, eps,
                       momentum);
    norm_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    c->kind = ops->kind, c->batched_dim = batched_dim, c->eps = eps, c->momentum = momentum;
    c->track = track_running_stats;
    return with_tensors(ops, c, num_features, affine, NB_F32);
}

nb_module *nb_nn_instance_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats) {
    return instance_norm_new(&in1d_ops, 3, num_features, eps, momentum, affine, track_running_stats);
}
nb_module *nb_nn_instance_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats) {
    return instance_norm_new(&in2d_ops, 4, num_features, eps, momentum, affine, track_running_stats);
}
nb_module *nb_nn_instance_norm3d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats) {
    return instance_norm_new(&in3d_ops, 5, num_features, eps, momentum, affine, track_running_stats);
}

nb_module *nb_nn_local_response_norm(int64_t size, double alpha, double beta, double k) {
    if (size < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "LocalResponseNorm: size %lld must be >= 1", (long long)size);
    norm_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "LocalResponseNorm: out of host memory");
    c->kind = lrn_ops.kind, c->size = size, c->alpha = alpha, c->beta = beta, c->k = k;
    return nb_module_new(&lrn_ops, c);
}
