/* pooling.c - the parameter-free modules nn.MaxPool1d/2d/3d,
 * nn.AvgPool1d/2d/3d, nn.AdaptiveAvgPool1d/2d/3d, nn.AdaptiveMaxPool2d and
 * nn.FractionalMaxPool2d/3d: each keeps its options and calls the op in
 * nb_ops.h (autograd/ops_pool.c). The window is checked at construction
 * (kernel_size >= 1, stride and dilation >= 0 where 0 is the default,
 * 0 <= padding <= kernel_size/2) so a bad module fails where it is built;
 * sizes that depend on the input are checked by the op at forward time.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"
#include "nb_ops.h"

typedef struct pool_ctx {
    nb_pool2d_options o2;
    nb_pool1d_options o1;
    nb_pool3d_options o3;
    int64_t out[3]; /* adaptive output size */
    double norm_type; /* LPPool */
    nb_fractional_max_pool_options fr; /* FractionalMaxPool (random_samples NULL: drawn each forward) */
} pool_ctx;

static nb_tensor *max2d_forward(nb_module *m, nb_tensor *x) {
    return nb_max_pool2d(x, ((pool_ctx *)nb_module_ctx(m))->o2, NULL);
}
static nb_tensor *max1d_forward(nb_module *m, nb_tensor *x) {
    return nb_max_pool1d(x, ((pool_ctx *)nb_module_ctx(m))->o1, NULL);
}
static nb_tensor *avg2d_forward(nb_module *m, nb_tensor *x) {
    return nb_avg_pool2d(x, ((pool_ctx *)nb_module_ctx(m))->o2);
}
static nb_tensor *avg1d_forward(nb_module *m, nb_tensor *x) {
    return nb_avg_pool1d(x, ((pool_ctx *)nb_module_ctx(m))->o1);
}
static nb_tensor *adavg2d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_adaptive_avg_pool2d(x, c->out[0], c->out[1]);
}
static nb_tensor *adavg1d_forward(nb_module *m, nb_tensor *x) {
    return nb_adaptive_avg_pool1d(x, ((pool_ctx *)nb_module_ctx(m))->out[1]);
}

static nb_tensor *max3d_forward(nb_module *m, nb_tensor *x) {
    return nb_max_pool3d(x, ((pool_ctx *)nb_module_ctx(m))->o3, NULL);
}
static nb_tensor *avg3d_forward(nb_module *m, nb_tensor *x) {
    return nb_avg_pool3d(x, ((pool_ctx *)nb_module_ctx(m))->o3);
}
static nb_tensor *adavg3d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_adaptive_avg_pool3d(x, c->out[0], c->out[1], c->out[2]);
}
static nb_tensor *admax2d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_adaptive_max_pool2d(x, c->out[0], c->out[1], NULL);
}

static nb_tensor *lp2d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_lp_pool2d(x, c->norm_type, c->o2);
}
static nb_tensor *lp1d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_lp_pool1d(x, c->norm_type, c->o1);
}
static nb_tensor *lp3d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_lp_pool3d(x, c->norm_type, c->o3);
}
static nb_tensor *admax1d_forward(nb_module *m, nb_tensor *x) {
    return nb_adaptive_max_pool1d(x, ((const pool_ctx *)nb_module_ctx(m))->out[0], NULL);
}
static nb_tensor *admax3d_forward(nb_module *m, nb_tensor *x) {
    const pool_ctx *c = nb_module_ctx(m);
    return nb_adaptive_max_pool3d(x, c->out[0], c->out[1], c->out[2]);
}
/* MaxUnpool: nb_forward_n (input, indices) */
static int unpool_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    const pool_ctx *c = nb_module_ctx(m);
    if (n_in != 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: forward takes (input, indices), got %d inputs", nb_module_kind(m),
                            n_in), -1;
    const nb_pool3d_options *o = &c->o3;
    switch ((int)c->norm_type) { /* the dims */
    case 1: out[0] = nb_max_unpool1d(in[0], in[1], o->kernel[0], o->stride[0], o->padding[0], 0); break;
    case 2: out[0] = nb_max_unpool2d(in[0], in[1], o->kernel, o->stride, o->padding, NULL); break;
    default: out[0] = nb_max_unpool3d(in[0], in[1], o->kernel, o->stride, o->padding, NULL); break;
    }
    return out[0] ? 1 : -1;
}
static const nb_module_ops lp3d_ops = {"LPPool3d", lp3d_forward, free, NULL};
static const nb_module_ops admax1d_ops = {"AdaptiveMaxPool1d", admax1d_forward, free, NULL};
static const nb_module_ops admax3d_ops = {"AdaptiveMaxPool3d", admax3d_forward, free, NULL};
static const nb_module_ops unpool1d_ops = {"MaxUnpool1d", NULL, free, unpool_forward};
static const nb_module_ops unpool2d_ops = {"MaxUnpool2d", NULL, free, unpool_forward};
static const nb_module_ops unpool3d_ops = {"MaxUnpool3d", NULL, free, unpool_forward};
static const nb_module_ops lp2d_ops = {"LPPool2d", lp2d_forward, free, NULL};
static const nb_module_ops lp1d_ops = {"LPPool1d", lp1d_forward, free, NULL};
static const nb_module_ops max3d_ops = {"MaxPool3d", max3d_forward, free, NULL};
static const nb_module_ops avg3d_ops = {"AvgPool3d", avg3d_forward, free, NULL};
static const nb_module_ops adavg3d_ops = {"AdaptiveAvgPool3d", adavg3d_forward, free, NULL};
static const nb_module_ops admax2d_ops = {"AdaptiveMaxPool2d", admax2d_forward, free, NULL};
static const nb_module_ops max2d_ops = {"MaxPool2d", max2d_forward, free, NULL};
static const nb_module_ops max1d_ops = {"MaxPool1d", max1d_forward, free, NULL};
static const nb_module_ops avg2d_ops = {"AvgPool2d", avg2d_forward, free, NULL};
static const nb_module_ops avg1d_ops = {"AvgPool1d", avg1d_forward, free, NULL};
static const nb_module_ops adavg2d_ops = {"AdaptiveAvgPool2d", adavg2d_forward, free, NULL};
static const nb_module_ops adavg1d_ops = {"AdaptiveAvgPool1d", adavg1d_forward, free, NULL};

/* One dim of a window: false with an error naming the module. */
static bool window_ok(const char *kind, int64_t k, int64_t s, int64_t pad, int64_t dil) {
    if (k >= 1 && s >= 0 && dil >= 0 && pad >= 0 && pad <= k / 2) return true;
    nb_set_error(NB_ERR_INVALID_ARG,
                 "%s: bad window: kernel_size %lld (>= 1), stride %lld (>= 0, 0 = kernel_size), dilation %lld "
                 "(>= 0, 0 = 1), padding %lld (in [0, kernel_size/2])",
                 kind, (long long)k, (long long)s, (long long)dil, (long long)pad);
    return false;
}

static nb_tensor *fractional2d_forward(nb_module *m, nb_tensor *x) {
    return nb_fractional_max_pool2d(x, ((pool_ctx *)nb_module_ctx(m))->fr, NULL);
}
static nb_tensor *fractional3d_forward(nb_module *m, nb_tensor *x) {
    return nb_fractional_max_pool3d(x, ((pool_ctx *)nb_module_ctx(m))->fr, NULL);
}
static const nb_module_ops fractional2d_ops = {"FractionalMaxPool2d", fractional2d_forward, free, NULL};
static const nb_module_ops fractional3d_ops = {"FractionalMaxPool3d", fractional3d_forward, free, NULL};

static nb_module *make(const nb_module_ops *ops, const pool_ctx *src) {
    pool_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    *c = *src;
    return nb_module_new(ops, c); /* frees c on failure */
}

static nb_module *make2d(const nb_module_ops *ops, nb_pool2d_options o) {
    for (int d = 0; d < 2; d++)
        if (!window_ok(ops->kind, o.kernel[d], o.stride[d], o.padding[d], o.dilation[d])) return NULL;
    return make(ops, &(pool_ctx){.o2 = o});
}

static nb_module *make1d(const nb_module_ops *ops, nb_pool1d_options o) {
    if (!window_ok(ops->kind, o.kernel, o.stride, o.padding, o.dilation)) return NULL;
    return make(ops, &(pool_ctx){.o1 = o});
}

static nb_module *make3d(const nb_module_ops *ops, nb_pool3d_options o) {
    for (int d = 0; d < 3; d++)
        if (!window_ok(ops->kind, o.kernel[d], o.stride[d], o.padding[d], o.dilation[d])) return NULL;
    return make(ops, &(pool_ctx){.o3 = o});
}

nb_module *nb_nn_lp_pool2d(double norm_type, nb_pool2d_options opts) {
    if (!(norm_type > 0) || !isfinite(norm_type))
        return NB_FAIL(NB_ERR_INVALID_ARG, "LPPool2d: norm_type %g must be positive and finite", norm_type);
    nb_module *m = make2d(&lp2d_ops, opts);
    if (m) ((pool_ctx *)nb_module_ctx(m))->norm_type = norm_type;
    return m;
}

nb_module *nb_nn_lp_pool1d(double norm_type, nb_pool1d_options opts) {
    if (!(norm_type > 0) || !isfinite(norm_type))
        return NB_FAIL(NB_ERR_INVALID_ARG, "LPPool1d: norm_type %g must be positive and finite", norm_type);
    nb_module *m = make1d(&lp1d_ops, opts);
    if (m) ((pool_ctx *)nb_module_ctx(m))->norm_type = norm_type;
    return m;
}

nb_module *nb_nn_lp_pool3d(double norm_type, nb_pool3d_options opts) {
    if (!(norm_type > 0) || !isfinite(norm_type))
        return NB_FAIL(NB_ERR_INVALID_ARG, "LPPool3d: norm_type %g must be positive and finite", norm_type);
    nb_module *m = make3d(&lp3d_ops, opts);
    if (m) ((pool_ctx *)nb_module_ctx(m))->norm_type = norm_type;
    return m;
}

/* MaxUnpool{1,2,3}d(kernel_size, stride (0: kernel_size), padding), cubic windows; norm_type holds the dims */
static nb_module *unpool_new(const nb_module_ops *ops, int dims, int64_t kernel, int64_t stride, int64_t padding) {
    if (kernel < 1 || stride < 0 || padding < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: kernel_size %lld must be >= 1, stride and padding >= 0", ops->kind,
                       (long long)kernel);
    pool_ctx c = {.norm_type = dims};
    for (int i = 0; i < 3; i++) c.o3.kernel[i] = kernel, c.o3.stride[i] = stride ? stride : kernel, c.o3.padding[i] = padding;
    return make(ops, &c);
}
nb_module *nb_nn_max_unpool1d(int64_t kernel_size, int64_t stride, int64_t padding) {
    return unpool_new(&unpool1d_ops, 1, kernel_size, stride, padding);
}
nb_module *nb_nn_max_unpool2d(int64_t kernel_size, int64_t stride, int64_t padding) {
    return unpool_new(&unpool2d_ops, 2, kernel_size, stride, padding);
}
nb_module *nb_nn_max_unpool3d(int64_t kernel_size, int64_t stride, int64_t padding) {
    return unpool_new(&unpool3d_ops, 3, kernel_size, stride, padding);
}

nb_module *nb_nn_adaptive_max_pool1d(int64_t out_l) {
    if (out_l < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "AdaptiveMaxPool1d: output_size must be positive");
    return make(&admax1d_ops, &(pool_ctx){.out = {out_l}});
}

nb_module *nb_nn_adaptive_max_pool3d(int64_t out_d, int64_t out_h, int64_t out_w) {
    if (out_d < 1 || out_h < 1 || out_w < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "AdaptiveMaxPool3d: output_size must be positive");
    return make(&admax3d_ops, &(pool_ctx){.out = {out_d, out_h, out_w}});
}

nb_module *nb_nn_max_pool3d(nb_pool3d_options opts) { return make3d(&max3d_ops, opts); }
nb_module *nb_nn_avg_pool3d(nb_pool3d_options opts) { return make3d(&avg3d_ops, opts); }
nb_module *nb_nn_max_pool2d(nb_pool2d_options opts) { return make2d(&max2d_ops, opts); }
nb_module *nb_nn_max_pool1d(nb_pool1d_options opts) { return make1d(&max1d_ops, opts); }
nb_module *nb_nn_avg_pool2d(nb_pool2d_options opts) { return make2d(&avg2d_ops, opts); }
nb_module *nb_nn_avg_pool1d(nb_pool1d_options opts) { return make1d(&avg1d_ops, opts); }

static nb_module *make_adaptive(const nb_module_ops *ops, int64_t h, int64_t w) {
    if (h < 1 || w < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: output_size must be positive, got [%lld, %lld]", ops->kind,
                       (long long)h, (long long)w);
    return make(ops, &(pool_ctx){.out = {h, w}});
}

nb_module *nb_nn_adaptive_max_pool2d(int64_t out_h, int64_t out_w) { return make_adaptive(&admax2d_ops, out_h, out_w); }

nb_module *nb_nn_adaptive_avg_pool3d(int64_t out_d, int64_t out_h, int64_t out_w) {
    if (out_d < 1 || out_h < 1 || out_w < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "AdaptiveAvgPool3d: output_size must be positive, got [%lld, %lld, %lld]",
                       (long long)out_d, (long long)out_h, (long long)out_w);
    return make(&adavg3d_ops, &(pool_ctx){.out = {out_d, out_h, out_w}});
}

nb_module *nb_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    return make_adaptive(&adavg2d_ops, out_h, out_w);
}

nb_module *nb_nn_adaptive_avg_pool1d(int64_t out_l) {
    if (out_l < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "AdaptiveAvgPool1d: output_size must be positive, got %lld",
                       (long long)out_l);
    return make_adaptive(&adavg1d_ops, 1, out_l);
}

static nb_module *make_fractional(const nb_module_ops *ops, int d, nb_fractional_max_pool_options o) {
    for (int i = 0; i < d; i++)
        if (o.kernel_size[i] < 1 || (o.output_size[i] < 1 && !(o.output_ratio[i] > 0 && o.output_ratio[i] < 1)))
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: kernel_size must be positive, and output_size positive or "
                           "output_ratio in (0, 1) (dim %d)", ops->kind, i);
    o.random_samples = NULL;
    return make(ops, &(pool_ctx){.fr = o});
}
nb_module *nb_nn_fractional_max_pool2d(nb_fractional_max_pool_options opts) {
    return make_fractional(&fractional2d_ops, 2, opts);
}
nb_module *nb_nn_fractional_max_pool3d(nb_fractional_max_pool_options opts) {
    return make_fractional(&fractional3d_ops, 3, opts);
}

nb_status nb_nn_pool2d_get_options(nb_module *m, nb_pool2d_options *out) {
    const char *k = m ? nb_module_kind(m) : NULL;
    if (!out || (k != max2d_ops.kind && k != avg2d_ops.kind))
        return nb_set_error(NB_ERR_INVALID_ARG, "pool2d_get_options: module is %s, not a MaxPool2d or AvgPool2d",
                            k ? k : "NULL");
    *out = ((const pool_ctx *)nb_module_ctx(m))->o2;
    return NB_OK;
}
