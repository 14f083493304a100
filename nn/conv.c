/* conv.c - nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d: modules holding
 * "weight" and "bias" (float32) and calling the functional ops of
 * autograd/ops_conv.c. Initialisation is PyTorch's _ConvNd.reset_parameters:
 * weight by kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)), then bias by U(-1/sqrt(fan_in), 1/sqrt(fan_in)), where
 * fan_in = weight.size(1) * kernel elements (Cin/groups * k*k for a
 * convolution, Cout/groups * k*k for a transposed one), both drawn from the
 * default generator in that order so that a seed fixes the network.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"
#include "nn_impl.h"
#include "nb_ops.h"

typedef enum conv_kind { CONV_2D, CONV_1D, CONV_T2D, CONV_3D, CONV_T1D, CONV_T3D } conv_kind;

typedef struct nb_conv_ctx {
    conv_kind kind;
    nb_conv2d_options o2;
    nb_conv1d_options o1;
    nb_conv_transpose2d_options ot;
    nb_conv3d_options o3;
    nb_conv_transpose1d_options ot1;
    nb_conv_transpose3d_options ot3;
    nb_tensor *weight, *bias; /* borrowed from the module's parameters; bias may be NULL */
} nb_conv_ctx;

static nb_tensor *conv_forward(nb_module *m, nb_tensor *x) {
    nb_conv_ctx *c = nb_module_ctx(m);
    switch (c->kind) {
    case CONV_2D: return nb_conv2d(x, c->weight, c->bias, c->o2);
    case CONV_1D: return nb_conv1d(x, c->weight, c->bias, c->o1);
    case CONV_3D: return nb_conv3d(x, c->weight, c->bias, c->o3);
    case CONV_T1D: return nb_conv_transpose1d(x, c->weight, c->bias, c->ot1);
    case CONV_T3D: return nb_conv_transpose3d(x, c->weight, c->bias, c->ot3);
    default: return nb_conv_transpose2d(x, c->weight, c->bias, c->ot);
    }
}

static const nb_module_ops conv2d_ops = {"Conv2d", conv_forward, free, NULL};
static const nb_module_ops conv1d_ops = {"Conv1d", conv_forward, free, NULL};
static const nb_module_ops conv_t2d_ops = {"ConvTranspose2d", conv_forward, free, NULL};
static const nb_module_ops conv3d_ops = {"Conv3d", conv_forward, free, NULL};
static const nb_module_ops conv_t1d_ops = {"ConvTranspose1d", conv_forward, free, NULL};
static const nb_module_ops conv_t3d_ops = {"ConvTranspose3d", conv_forward, free, NULL};

/* kaiming_uniform_(a=sqrt(5)) as torch.nn.init computes it: gain =
 * sqrt(2 / (1 + a^2)), bound = sqrt(3) * gain / sqrt(fan_in) = 1/sqrt(fan_in). */
static double kaiming_bound(int64_t fan_in) {
    double a = sqrt(5.0), gain = sqrt(2.0 / (1.0 + a * a));
    return sqrt(3.0) * (gain / sqrt((double)fan_in));
}

static nb_tensor *new_param(nb_module *m, const char *name, int ndim, const int64_t *shape, double bound) {
    nb_tensor *t = nb_tensor_new_unscoped(ndim, shape, NB_F32, nb_default_device());
    if (!t) return NULL;
    if (nb_numel(t) && nb_uniform_(t, -bound, bound, NULL)) {
        nb_release(t);
        return NULL;
    }
    return nb_module_adopt_parameter(m, name, t) ? NULL : t;
}

/* Checks the sizes common to every kind; stride/dilation/padding values
 * are checked by the op at the first forward, except those PyTorch rejects
 * in the constructor (below). */
static bool bad_sizes(const char *kind, int64_t in, int64_t out, int64_t k, int64_t groups) {
    if (in <= 0 || out <= 0 || k <= 0 || groups < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: in_channels (%lld), out_channels (%lld) and kernel_size (%lld) must be "
                     "positive and groups (%lld) not negative", kind, (long long)in, (long long)out, (long long)k,
                     (long long)groups);
        return true;
    }
    int64_t g = groups ? groups : 1;
    if (in % g || out % g) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: in_channels %lld and out_channels %lld must be divisible by groups %lld",
                     kind, (long long)in, (long long)out, (long long)g);
        return true;
    }
    return false;
}

/* weight [w0, w1, *k] (kdims kernel dims of size k), bias [nbias]. */
static nb_module *make(const nb_module_ops *ops, nb_conv_ctx *c, int64_t w0, int64_t w1, int kdims, int64_t k,
                       int64_t nbias, bool bias) {
    nb_module *m = nb_module_new(ops, c);
    if (!m) return NULL;
    int64_t shape[5] = {w0, w1, k, k, k}, fan_in = w1 * (kdims == 3 ? k * k * k : kdims == 2 ? k * k : k);
    double bound = kaiming_bound(fan_in);
    c->weight = new_param(m, "weight", 2 + kdims, shape, bound);
    if (c->weight && bias) c->bias = new_param(m, "bias", 1, &nbias, 1.0 / sqrt((double)fan_in));
    if (!c->weight || (bias && !c->bias)) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

static nb_conv_ctx *new_ctx(const char *kind, conv_kind k) {
    nb_conv_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", kind);
    c->kind = k;
    return c;
}

nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv2d_options opts,
                            bool bias) {
    if (bad_sizes("Conv2d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    if (opts.padding_same && (opts.stride[0] > 1 || opts.stride[1] > 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "Conv2d: padding='same' is not supported for strided convolutions "
                       "(stride %lld, %lld)", (long long)opts.stride[0], (long long)opts.stride[1]);
    nb_conv_ctx *c = new_ctx("Conv2d", CONV_2D);
    if (!c) return NULL;
    c->o2 = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv2d_ops, c, out_channels, in_channels / g, 2, kernel_size, out_channels, bias);
}

nb_module *nb_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv1d_options opts,
                            bool bias) {
    if (bad_sizes("Conv1d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    if (opts.padding_same && opts.stride > 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "Conv1d: padding='same' is not supported for strided convolutions "
                       "(stride %lld)", (long long)opts.stride);
    nb_conv_ctx *c = new_ctx("Conv1d", CONV_1D);
    if (!c) return NULL;
    c->o1 = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv1d_ops, c, out_channels, in_channels / g, 1, kernel_size, out_channels, bias);
}

nb_module *nb_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                      nb_conv_transpose2d_options opts, bool bias) {
    if (bad_sizes("ConvTranspose2d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    nb_conv_ctx *c = new_ctx("ConvTranspose2d", CONV_T2D);
    if (!c) return NULL;
    c->ot = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv_t2d_ops, c, in_channels, out_channels / g, 2, kernel_size, out_channels, bias);
}

nb_module *nb_nn_conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv3d_options opts,
                        bool bias) {
    if (bad_sizes("Conv3d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    if (opts.padding_same && (opts.stride[0] > 1 || opts.stride[1] > 1 || opts.stride[2] > 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "Conv3d: padding='same' is not supported for strided convolutions");
    nb_conv_ctx *c = new_ctx("Conv3d", CONV_3D);
    if (!c) return NULL;
    c->o3 = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv3d_ops, c, out_channels, in_channels / g, 3, kernel_size, out_channels, bias);
}

nb_module *nb_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                  nb_conv_transpose1d_options opts, bool bias) {
    if (bad_sizes("ConvTranspose1d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    nb_conv_ctx *c = new_ctx("ConvTranspose1d", CONV_T1D);
    if (!c) return NULL;
    c->ot1 = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv_t1d_ops, c, in_channels, out_channels / g, 1, kernel_size, out_channels, bias);
}

nb_module *nb_nn_conv_transpose3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                  nb_conv_transpose3d_options opts, bool bias) {
    if (bad_sizes("ConvTranspose3d", in_channels, out_channels, kernel_size, opts.groups)) return NULL;
    nb_conv_ctx *c = new_ctx("ConvTranspose3d", CONV_T3D);
    if (!c) return NULL;
    c->ot3 = opts;
    int64_t g = opts.groups ? opts.groups : 1;
    return make(&conv_t3d_ops, c, in_channels, out_channels / g, 3, kernel_size, out_channels, bias);
}

nb_status nb_nn_conv2d_get_options(nb_module *m, nb_conv2d_options *out) {
    if (!m || !out || nb_module_kind(m) != conv2d_ops.kind)
        return nb_set_error(NB_ERR_INVALID_ARG, "conv2d_get_options: module is %s, not a Conv2d",
                            m ? nb_module_kind(m) : "NULL");
    *out = ((const nb_conv_ctx *)nb_module_ctx(m))->o2;
    return NB_OK;
}
