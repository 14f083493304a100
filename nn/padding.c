/* padding.c - nn.ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and
 * CircularPad in 1d, 2d and 3d, and nn.Unflatten: each keeps its arguments
 * and calls nb_pad / nb_reshape. A padding module of d dims takes a
 * (d + 1)-d (unbatched) or (d + 2)-d input, as PyTorch's.
 */
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "nn_impl.h"

typedef struct pad_ctx {
    nb_pad_mode mode;
    int dims;
    int64_t pads[6];
    double value;
} pad_ctx;

static nb_tensor *pad_forward(nb_module *m, nb_tensor *x) {
    const pad_ctx *c = nb_module_ctx(m);
    int nd = x ? nb_dim(x) : 0;
    if (x && nd != c->dims + 1 && nd != c->dims + 2)
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected a %dD or %dD input (got %dD input)", nb_module_kind(m),
                       c->dims + 1, c->dims + 2, nd);
    return nb_pad(x, c->pads, 2 * c->dims, c->mode, c->value);
}

#define PAD_OPS(F) \
    {{#F "Pad1d", pad_forward, free, NULL}, {#F "Pad2d", pad_forward, free, NULL}, {#F "Pad3d", pad_forward, free, NULL}}
enum { ZERO, CONSTANT, REFLECTION, REPLICATION, CIRCULAR };
static const nb_module_ops pad_ops[5][3] = {PAD_OPS(Zero), PAD_OPS(Constant), PAD_OPS(Reflection),
                                            PAD_OPS(Replication), PAD_OPS(Circular)};

static nb_module *pad_new(int family, nb_pad_mode mode, int dims, const int64_t *padding, double value) {
    if (dims < 1 || dims > 3 || !padding)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dims %d must be 1, 2 or 3, and padding given",
                       pad_ops[family][0].kind, dims);
    const char *kind = pad_ops[family][dims - 1].kind;
    for (int i = 0; i < 2 * dims; i++)
        if (mode != NB_PAD_CONSTANT && padding[i] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: padding %lld must be >= 0", kind, (long long)padding[i]);
    pad_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", kind);
    c->mode = mode, c->dims = dims, c->value = value;
    memcpy(c->pads, padding, sizeof(int64_t) * (size_t)(2 * dims));
    return nb_module_new(&pad_ops[family][dims - 1], c);
}

nb_module *nb_nn_zero_pad(int dims, const int64_t *padding) {
    return pad_new(ZERO, NB_PAD_CONSTANT, dims, padding, 0.0);
}
nb_module *nb_nn_constant_pad(int dims, const int64_t *padding, double value) {
    return pad_new(CONSTANT, NB_PAD_CONSTANT, dims, padding, value);
}
nb_module *nb_nn_reflection_pad(int dims, const int64_t *padding) {
    return pad_new(REFLECTION, NB_PAD_REFLECT, dims, padding, 0.0);
}
nb_module *nb_nn_replication_pad(int dims, const int64_t *padding) {
    return pad_new(REPLICATION, NB_PAD_REPLICATE, dims, padding, 0.0);
}
nb_module *nb_nn_circular_pad(int dims, const int64_t *padding) {
    return pad_new(CIRCULAR, NB_PAD_CIRCULAR, dims, padding, 0.0);
}

/* ---- Unflatten ---------------------------------------------------------------- */

typedef struct unflatten_ctx {
    int dim, n;
    int64_t sizes[NB_MAX_DIMS];
} unflatten_ctx;

static nb_tensor *unflatten_forward(nb_module *m, nb_tensor *x) {
    const unflatten_ctx *c = nb_module_ctx(m);
    int nd = nb_dim(x), d = c->dim < 0 ? c->dim + nd : c->dim;
    if (d < 0 || d >= nd) return NB_FAIL(NB_ERR_INVALID_ARG, "Unflatten: dim %d out of range for %d dims", c->dim, nd);
    if (nd - 1 + c->n > NB_MAX_DIMS)
        return NB_FAIL(NB_ERR_SHAPE, "Unflatten: the result would have more than %d dims", NB_MAX_DIMS);
    int64_t shape[NB_MAX_DIMS];
    const int64_t *in = nb_shape(x);
    int k = 0;
    for (int i = 0; i < d; i++) shape[k++] = in[i];
    for (int i = 0; i < c->n; i++) shape[k++] = c->sizes[i];
    for (int i = d + 1; i < nd; i++) shape[k++] = in[i];
    return nb_reshape(x, k, shape); /* a -1 among sizes is inferred; a wrong product is reshape's error */
}

static const nb_module_ops unflatten_ops = {"Unflatten", unflatten_forward, free, NULL};

nb_module *nb_nn_unflatten(int dim, int n, const int64_t *sizes) {
    if (n < 1 || n > NB_MAX_DIMS || !sizes)
        return NB_FAIL(NB_ERR_INVALID_ARG, "Unflatten: unflattened_size must have 1 to %d sizes", NB_MAX_DIMS);
    unflatten_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "Unflatten: out of host memory");
    c->dim = dim, c->n = n;
    memcpy(c->sizes, sizes, sizeof(int64_t) * (size_t)n);
    return nb_module_new(&unflatten_ops, c);
}
