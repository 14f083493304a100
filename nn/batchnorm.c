/* batchnorm.c - nn.BatchNorm1d, BatchNorm2d and BatchNorm3d: parameters weight (ones)
 * and bias (zeros), buffers running_mean (zeros), running_var (ones) and
 * num_batches_tracked (int64 scalar, +1 per training forward), as PyTorch's
 * _BatchNorm with affine=True and track_running_stats=True. Training mode
 * normalises with batch statistics and updates the running ones (nb_batch_norm);
 * eval mode uses the running statistics.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_nn.h"
#include "nn_impl.h"
#include "nb_ops.h"

typedef struct nb_bn_ctx {
    const char *kind;
    int min_dim, max_dim; /* accepted input ranks */
    double eps, momentum;
    /* borrowed from the module's parameters and buffers */
    nb_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} nb_bn_ctx;

/* num_batches_tracked += 1 with ops (no host access, no autograd). */
static nb_status count_batch(nb_tensor *counter) {
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *next = nb_add_scalar(counter, 1);
    nb_status st = next ? nb_copy_(counter, next) : nb_last_status();
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return st;
}

static nb_tensor *bn_forward(nb_module *m, nb_tensor *x) {
    nb_bn_ctx *c = nb_module_ctx(m);
    int nd = nb_dim(x);
    if (nd < c->min_dim || nd > c->max_dim) {
        if (c->min_dim == c->max_dim)
            return NB_FAIL(NB_ERR_SHAPE, "%s: expected %dD input (got %dD input)", c->kind, c->min_dim, nd);
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected %dD or %dD input (got %dD input)", c->kind, c->min_dim,
                       c->max_dim, nd);
    }
    bool training = nb_module_is_training(m);
    nb_tensor *y = nb_batch_norm(x, c->running_mean, c->running_var, c->weight, c->bias, training, c->momentum,
                                 c->eps);
    if (y && training && count_batch(c->num_batches_tracked) != NB_OK) return NULL;
    return y;
}

static const nb_module_ops bn1d_ops = {"BatchNorm1d", bn_forward, free, NULL};
static const nb_module_ops bn2d_ops = {"BatchNorm2d", bn_forward, free, NULL};
static const nb_module_ops bn3d_ops = {"BatchNorm3d", bn_forward, free, NULL};

nb_tensor *nb_nn_filled_tensor(nb_module *m, const char *name, bool param, int64_t n, nb_dtype dt, double value) {
    nb_tensor *t = nb_tensor_new_unscoped(n < 0 ? 0 : 1, &n, dt, nb_default_device());
    if (!t) return NULL;
    if (nb_fill_(t, value) != NB_OK) {
        nb_release(t);
        return NULL;
    }
    nb_status st = param ? nb_module_adopt_parameter(m, name, t) : nb_module_adopt_buffer(m, name, t);
    return st ? NULL : t;
}

static nb_module *bn_new(const nb_module_ops *ops, int min_dim, int max_dim, int64_t num_features, double eps,
                         double momentum) {
    if (num_features <= 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: num_features must be > 0 (got %lld)", ops->kind,
                       (long long)num_features);
    if (!(eps >= 0) || !isfinite(eps) || !(momentum >= 0 && momentum <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eps (%g) must be >= 0 and momentum (%g) in [0, 1]", ops->kind, eps,
                       momentum);
    nb_bn_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    c->kind = ops->kind;
    c->min_dim = min_dim, c->max_dim = max_dim;
    c->eps = nb_option(eps, 1e-5);           /* 0 selects PyTorch's default, NB_ZERO an actual 0 */
    c->momentum = nb_option(momentum, 0.1); /* likewise: NB_ZERO freezes the running statistics */
    nb_module *m = nb_module_new(ops, c);
    if (!m) return NULL;
    if (!(c->weight = nb_nn_filled_tensor(m, "weight", true, num_features, NB_F32, 1.0)) ||
        !(c->bias = nb_nn_filled_tensor(m, "bias", true, num_features, NB_F32, 0.0)) ||
        !(c->running_mean = nb_nn_filled_tensor(m, "running_mean", false, num_features, NB_F32, 0.0)) ||
        !(c->running_var = nb_nn_filled_tensor(m, "running_var", false, num_features, NB_F32, 1.0)) ||
        !(c->num_batches_tracked = nb_nn_filled_tensor(m, "num_batches_tracked", false, -1, NB_I64, 0.0))) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_batch_norm1d(int64_t num_features, double eps, double momentum) {
    return bn_new(&bn1d_ops, 2, 3, num_features, eps, momentum);
}

nb_module *nb_nn_batch_norm2d(int64_t num_features, double eps, double momentum) {
    return bn_new(&bn2d_ops, 4, 4, num_features, eps, momentum);
}

nb_module *nb_nn_batch_norm3d(int64_t num_features, double eps, double momentum) {
    return bn_new(&bn3d_ops, 5, 5, num_features, eps, momentum);
}
