/* layer_norm.c - nn.LayerNorm(normalized_shape, eps, elementwise_affine)
 * over the last dims (weight ones, bias zeros, as PyTorch's
 * reset_parameters) and nn.GELU(approximate); both forward to the fused ops
 * nb_layer_norm and nb_gelu.
 */
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "nn_impl.h"
#include "nb_transformer.h"

typedef struct nb_layer_norm_ctx {
    int n_norm;
    int64_t shape[NB_MAX_DIMS];
    double eps;
    nb_tensor *weight, *bias; /* borrowed; NULL without elementwise_affine */
} nb_layer_norm_ctx;

static nb_tensor *layer_norm_forward(nb_module *m, nb_tensor *x) {
    const nb_layer_norm_ctx *c = nb_module_ctx(m);
    return nb_layer_norm(x, c->n_norm, c->shape, c->weight, c->bias, c->eps);
}

static const nb_module_ops layer_norm_ops = {"LayerNorm", layer_norm_forward, free, NULL};

/* A new parameter of the normalized shape filled with value and registered
 * as name; NULL on failure (the module keeps nothing half-made). */
static nb_tensor *filled_param(nb_module *m, const char *name, const nb_layer_norm_ctx *c, nb_dtype dt,
                               double value) {
    nb_tensor *t = nb_tensor_new_unscoped(c->n_norm, c->shape, dt, nb_default_device());
    if (!t) return NULL;
    if (nb_fill_(t, value)) {
        nb_release(t);
        return NULL;
    }
    return nb_module_adopt_parameter(m, name, t) ? NULL : t;
}

nb_module *nb_nn_layer_norm_ex(int n_norm, const int64_t *normalized_shape, double eps, bool elementwise_affine,
                                   nb_dtype dt) {
    if (n_norm < 1 || n_norm > NB_MAX_DIMS || !normalized_shape)
        return NB_FAIL(NB_ERR_INVALID_ARG, "LayerNorm: normalized_shape must have 1 to %d dims (got %d)", NB_MAX_DIMS,
                       normalized_shape ? n_norm : 0);
    for (int i = 0; i < n_norm; i++)
        if (normalized_shape[i] < 1)
            return NB_FAIL(NB_ERR_INVALID_ARG, "LayerNorm: normalized_shape[%d] = %lld must be >= 1", i,
                           (long long)normalized_shape[i]);
    if (!(eps >= 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "LayerNorm: eps %g must be >= 0", eps);
    if (!nb_nn_check_dtype("LayerNorm", NB_OP_LAYER_NORM, dt)) return NULL;
    nb_layer_norm_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "LayerNorm: out of host memory");
    c->n_norm = n_norm;
    memcpy(c->shape, normalized_shape, sizeof(int64_t) * (size_t)n_norm);
    c->eps = nb_option(eps, 1e-5); /* 0: PyTorch's default; NB_ZERO: an actual 0 */
    nb_module *m = nb_module_new(&layer_norm_ops, c);
    if (!m || !elementwise_affine) return m;
    c->weight = filled_param(m, "weight", c, dt, 1.0);
    if (c->weight) c->bias = filled_param(m, "bias", c, dt, 0.0);
    if (!c->bias) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_layer_norm(int64_t normalized_shape, double eps) {
    return nb_nn_layer_norm_ex(1, &normalized_shape, eps, true, NB_F32);
}

/* ---- GELU --------------------------------------------------------------------- */

static nb_tensor *gelu_forward(nb_module *m, nb_tensor *x) {
    return nb_gelu(x, *(const nb_gelu_approximate *)nb_module_ctx(m));
}

static const nb_module_ops gelu_ops = {"GELU", gelu_forward, free, NULL};

nb_module *nb_nn_gelu(nb_gelu_approximate approximate) {
    if (approximate != NB_GELU_ERF && approximate != NB_GELU_TANH)
        return NB_FAIL(NB_ERR_INVALID_ARG, "GELU: approximate must be NB_GELU_ERF or NB_GELU_TANH (got %d)",
                       (int)approximate);
    nb_gelu_approximate *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "GELU: out of host memory");
    *c = approximate;
    return nb_module_new(&gelu_ops, c);
}
