/* activation.c - the parameter-free modules nn.ReLU, nn.Sigmoid, nn.Tanh and
 * nn.Flatten: thin wrappers over the ops in nb_ops.h.
 */
#include <stdlib.h>

#include "nb_impl.h"
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

static const nb_module_ops relu_ops = {"ReLU", relu_forward, NULL};
static const nb_module_ops sigmoid_ops = {"Sigmoid", sigmoid_forward, NULL};
static const nb_module_ops tanh_ops = {"Tanh", tanh_forward, NULL};
static const nb_module_ops flatten_ops = {"Flatten", flatten_forward, free};

nb_module *nb_relu_module(void) { return nb_module_new(&relu_ops, NULL); }
nb_module *nb_sigmoid_module(void) { return nb_module_new(&sigmoid_ops, NULL); }
nb_module *nb_tanh_module(void) { return nb_module_new(&tanh_ops, NULL); }

/* The dims are checked against the input's rank at forward time (nb_flatten). */
nb_module *nb_flatten_module(int start_dim, int end_dim) {
    nb_flatten_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "flatten: out of host memory");
    c->start_dim = start_dim, c->end_dim = end_dim;
    return nb_module_new(&flatten_ops, c);
}
