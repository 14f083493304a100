/* activation.c - the activation modules (nn.ReLU, nn.Sigmoid, nn.Tanh,
 * nn.LeakyReLU, nn.ELU, nn.SELU, nn.SiLU, nn.Mish, nn.Softplus,
 * nn.Hardtanh, nn.Hardsigmoid, nn.Hardswish, nn.LogSigmoid) and
 * nn.Flatten: thin wrappers over the ops in nb_ops.h; the ones with
 * hyperparameters keep them in a small ctx.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"
#include "nb_ops.h"

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
