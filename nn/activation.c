/* activation.c - the activation modules (nn.ReLU, nn.Sigmoid, nn.Tanh,
 * nn.LeakyReLU, nn.ELU, nn.SELU, nn.SiLU, nn.Mish, nn.Softplus,
 * nn.Hardtanh, nn.Hardsigmoid, nn.Hardswish, nn.LogSigmoid, nn.ReLU6,
 * nn.CELU, nn.Softsign, nn.Softshrink, nn.Hardshrink, nn.Tanhshrink,
 * nn.Threshold, nn.GLU, nn.PReLU, nn.RReLU, nn.Softmax, nn.LogSoftmax,
 * nn.Softmin, nn.Softmax2d) and nn.Flatten: thin wrappers over the ops in nb_ops.h; the ones with
 * hyperparameters keep them in a small ctx.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"
#include "nb_ops.h"
#include "nn_impl.h"

static nb_tensor *relu_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb_relu(x);
}

static nb_tensor *sigmoid_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb_sigmoid(x);
}

static nb_tensor *tanh_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb_tanh(x);
}

typedef struct nb_flatten_ctx {
    int start_dim, end_dim;
} nb_flatten_ctx;

static nb_tensor *flatten_forward(nb_module *m, nb_tensor *x) {
    const nb_flatten_ctx *c = nb_module_ctx(m);
    return nb_flatten(x, c->start_dim, c->end_dim);
}

static const nb_module_ops relu_ops = {"ReLU", relu_forward, NULL, NULL};
static const nb_module_ops sigmoid_ops = {"Sigmoid", sigmoid_forward, NULL, NULL};
static const nb_module_ops tanh_ops = {"Tanh", tanh_forward, NULL, NULL};
static const nb_module_ops flatten_ops = {"Flatten", flatten_forward, free, NULL};

nb_module *nb_nn_relu(void) { return nb_module_new(&relu_ops, NULL); }
nb_module *nb_nn_sigmoid(void) { return nb_module_new(&sigmoid_ops, NULL); }
nb_module *nb_nn_tanh(void) { return nb_module_new(&tanh_ops, NULL); }

/* The dims are checked against the input's rank at forward time (nb_flatten). */
nb_module *nb_nn_flatten(int start_dim, int end_dim) {
    nb_flatten_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "flatten: out of host memory");
    c->start_dim = start_dim, c->end_dim = end_dim;
    return nb_module_new(&flatten_ops, c);
}

/* ---- op coverage: activation modules ---------------------------------------- */

/* The hyperparameters of a module (at most two; unused ones 0). */
typedef struct nb_act_ctx {
    double p0, p1;
} nb_act_ctx;

static nb_module *act_module(const nb_module_ops *ops, double p0, double p1) {
    nb_act_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    c->p0 = p0, c->p1 = p1;
    return nb_module_new(ops, c);
}

static nb_tensor *leaky_relu_forward(nb_module *m, nb_tensor *x) {
    const nb_act_ctx *c = nb_module_ctx(m);
    return nb_leaky_relu(x, c->p0);
}
static nb_tensor *elu_forward(nb_module *m, nb_tensor *x) {
    const nb_act_ctx *c = nb_module_ctx(m);
    return nb_elu(x, c->p0);
}
static nb_tensor *softplus_forward(nb_module *m, nb_tensor *x) {
    const nb_act_ctx *c = nb_module_ctx(m);
    return nb_softplus(x, c->p0, c->p1);
}
static nb_tensor *hardtanh_forward(nb_module *m, nb_tensor *x) {
    const nb_act_ctx *c = nb_module_ctx(m);
    return nb_hardtanh(x, c->p0, c->p1);
}

/* Parameter-free modules: forward is the op itself. */
#define PLAIN_ACT(NAME, KIND)                                                   \
    static nb_tensor *NAME##_forward(nb_module *m, nb_tensor *x) {              \
        (void)m;                                                                \
        return nb_##NAME(x);                                                    \
    }                                                                           \
    static const nb_module_ops NAME##_ops = {KIND, NAME##_forward, NULL, NULL};       \
    nb_module *nb_nn_##NAME(void) { return nb_module_new(&NAME##_ops, NULL); }
PLAIN_ACT(selu, "SELU")
PLAIN_ACT(silu, "SiLU")
PLAIN_ACT(mish, "Mish")
PLAIN_ACT(hardsigmoid, "Hardsigmoid")
PLAIN_ACT(hardswish, "Hardswish")
PLAIN_ACT(logsigmoid, "LogSigmoid")

static const nb_module_ops leaky_relu_ops = {"LeakyReLU", leaky_relu_forward, free, NULL};
static const nb_module_ops elu_ops = {"ELU", elu_forward, free, NULL};
static const nb_module_ops softplus_ops = {"Softplus", softplus_forward, free, NULL};
static const nb_module_ops hardtanh_ops = {"Hardtanh", hardtanh_forward, free, NULL};

nb_module *nb_nn_leaky_relu(double negative_slope) { return act_module(&leaky_relu_ops, negative_slope, 0); }
nb_module *nb_nn_elu(double alpha) { return act_module(&elu_ops, alpha, 0); }

nb_module *nb_nn_softplus(double beta, double threshold) {
    if (beta == 0 || !isfinite(beta) || isnan(threshold))
        return NB_FAIL(NB_ERR_INVALID_ARG, "Softplus: beta must be finite and nonzero and threshold not NaN "
                       "(beta %g, threshold %g)", beta, threshold);
    return act_module(&softplus_ops, beta, threshold);
}

nb_module *nb_nn_hardtanh(double min_val, double max_val) {
    if (!(min_val <= max_val))
        return NB_FAIL(NB_ERR_INVALID_ARG, "Hardtanh: min_val %g must not exceed max_val %g", min_val, max_val);
    return act_module(&hardtanh_ops, min_val, max_val);
}

/* ---- the activations of ops_activation.c, ReLU6 and the softmax modules ------ */

PLAIN_ACT(relu6, "ReLU6")
PLAIN_ACT(softsign, "Softsign")
PLAIN_ACT(tanhshrink, "Tanhshrink")

#define PARAM_ACT(NAME, KIND, CALL)                                             \
    static nb_tensor *NAME##_forward(nb_module *m, nb_tensor *x) {              \
        const nb_act_ctx *c = nb_module_ctx(m);                                 \
        return CALL;                                                            \
    }                                                                           \
    static const nb_module_ops NAME##_ops = {KIND, NAME##_forward, free, NULL};
PARAM_ACT(celu, "CELU", nb_celu(x, c->p0))
PARAM_ACT(softshrink, "Softshrink", nb_softshrink(x, c->p0))
PARAM_ACT(hardshrink, "Hardshrink", nb_hardshrink(x, c->p0))
PARAM_ACT(threshold, "Threshold", nb_threshold(x, c->p0, c->p1))
PARAM_ACT(glu, "GLU", nb_glu(x, (int)c->p0))
PARAM_ACT(rrelu, "RReLU", nb_rrelu(x, c->p0, c->p1, nb_module_is_training(m), NULL))
PARAM_ACT(softmax, "Softmax", nb_softmax(x, (int)c->p0))
PARAM_ACT(log_softmax, "LogSoftmax", nb_log_softmax(x, (int)c->p0))
PARAM_ACT(softmin, "Softmin", nb_softmin(x, (int)c->p0))

nb_module *nb_nn_celu(double alpha) {
    if (nb_option(alpha, 1.0) == 0) return NB_FAIL(NB_ERR_INVALID_ARG, "CELU: alpha must be nonzero");
    return act_module(&celu_ops, alpha, 0);
}
nb_module *nb_nn_softshrink(double lambd) {
    if (!(nb_option(lambd, 0.5) >= 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "Softshrink: lambd %g must be >= 0", lambd);
    return act_module(&softshrink_ops, lambd, 0);
}
nb_module *nb_nn_hardshrink(double lambd) { return act_module(&hardshrink_ops, lambd, 0); }
nb_module *nb_nn_threshold(double threshold, double value) { return act_module(&threshold_ops, threshold, value); }
nb_module *nb_nn_glu(int dim) { return act_module(&glu_ops, dim, 0); }
nb_module *nb_nn_rrelu(double lower, double upper) {
    double lo = nb_option(lower, 1.0 / 8), hi = nb_option(upper, 1.0 / 3);
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi))
        return NB_FAIL(NB_ERR_INVALID_ARG, "RReLU: lower %g must be <= upper %g (both finite)", lo, hi);
    return act_module(&rrelu_ops, lower, upper);
}
nb_module *nb_nn_softmax(int dim) { return act_module(&softmax_ops, dim, 0); }
nb_module *nb_nn_log_softmax(int dim) { return act_module(&log_softmax_ops, dim, 0); }
nb_module *nb_nn_softmin(int dim) { return act_module(&softmin_ops, dim, 0); }

/* Softmax2d: over the channels, dim -3 of [N, C, H, W] or [C, H, W]. */
static nb_tensor *softmax2d_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    if (x && nb_dim(x) != 3 && nb_dim(x) != 4)
        return NB_FAIL(NB_ERR_SHAPE, "Softmax2d: expected a 3-d or 4-d input (got %d-d)", nb_dim(x));
    return nb_softmax(x, -3);
}
static const nb_module_ops softmax2d_ops = {"Softmax2d", softmax2d_forward, NULL, NULL};
nb_module *nb_nn_softmax2d(void) { return nb_module_new(&softmax2d_ops, NULL); }

/* PReLU: parameter "weight" [num_parameters] filled with init. */
static nb_tensor *prelu_forward(nb_module *m, nb_tensor *x) { return nb_prelu(x, nb_module_get(m, "weight")); }
static const nb_module_ops prelu_ops = {"PReLU", prelu_forward, NULL, NULL};

nb_module *nb_nn_prelu(int64_t num_parameters, double init) {
    if (num_parameters < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "PReLU: num_parameters %lld must be >= 1", (long long)num_parameters);
    nb_module *m = nb_module_new(&prelu_ops, NULL);
    nb_tensor *w = m ? nb_tensor_new_unscoped(1, &num_parameters, NB_F32, nb_default_device()) : NULL;
    nb_status st = w ? nb_fill_(w, nb_option(init, 0.25)) : nb_last_status();
    if (!st) st = nb_module_adopt_parameter(m, "weight", w);
    else nb_release(w);
    if (st) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_status nb_nn_flatten_get_dims(nb_module *m, int *start_dim, int *end_dim) {
    if (!m || !start_dim || !end_dim || nb_module_kind(m) != flatten_ops.kind)
        return nb_set_error(NB_ERR_INVALID_ARG, "flatten_get_dims: module is %s, not a Flatten",
                            m ? nb_module_kind(m) : "NULL");
    const nb_flatten_ctx *c = nb_module_ctx(m);
    *start_dim = c->start_dim, *end_dim = c->end_dim;
    return NB_OK;
}
