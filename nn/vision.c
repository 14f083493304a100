/* vision.c - nn.PixelShuffle, nn.PixelUnshuffle, nn.ChannelShuffle and nn.Upsample (with
 * UpsamplingNearest2d and UpsamplingBilinear2d) over nb_pixel_shuffle,
 * nb_pixel_unshuffle and nb_interpolate.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nn_impl.h"

typedef struct vision_ctx {
    int64_t factor;          /* PixelShuffle / PixelUnshuffle */
    int64_t size[2];         /* Upsample: the output size, or 0 for scale */
    double scale[2];
    nb_interpolate_mode mode;
    bool align_corners;
} vision_ctx;

static nb_tensor *shuffle_forward(nb_module *m, nb_tensor *x) {
    return nb_pixel_shuffle(x, ((const vision_ctx *)nb_module_ctx(m))->factor);
}
static nb_tensor *unshuffle_forward(nb_module *m, nb_tensor *x) {
    return nb_pixel_unshuffle(x, ((const vision_ctx *)nb_module_ctx(m))->factor);
}

/* The output size: given, or floor(in * scale) (PyTorch's rule without recompute_scale_factor). */
static nb_tensor *upsample_forward(nb_module *m, nb_tensor *x) {
    const vision_ctx *c = nb_module_ctx(m);
    if (x && nb_dim(x) != 4)
        return NB_FAIL(NB_ERR_SHAPE, "%s: expected a 4-d input [N, C, H, W] (got %d-d)", nb_module_kind(m), nb_dim(x));
    int64_t h = c->size[0], w = c->size[1];
    if (x && !h) h = (int64_t)floor((double)nb_shape(x)[2] * c->scale[0]), w = (int64_t)floor((double)nb_shape(x)[3] * c->scale[1]);
    return nb_interpolate(x, h, w, c->mode, c->align_corners);
}

static nb_tensor *channel_shuffle_forward(nb_module *m, nb_tensor *x) {
    return nb_channel_shuffle(x, ((const vision_ctx *)nb_module_ctx(m))->factor);
}
static const nb_module_ops channel_shuffle_ops = {"ChannelShuffle", channel_shuffle_forward, free, NULL};
static const nb_module_ops shuffle_ops = {"PixelShuffle", shuffle_forward, free, NULL};
static const nb_module_ops unshuffle_ops = {"PixelUnshuffle", unshuffle_forward, free, NULL};
static const nb_module_ops upsample_ops = {"Upsample", upsample_forward, free, NULL};
static const nb_module_ops up_nearest_ops = {"UpsamplingNearest2d", upsample_forward, free, NULL};
static const nb_module_ops up_bilinear_ops = {"UpsamplingBilinear2d", upsample_forward, free, NULL};

static nb_module *make(const nb_module_ops *ops, vision_ctx v) {
    vision_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    *c = v;
    return nb_module_new(ops, c);
}

nb_module *nb_nn_pixel_shuffle(int64_t upscale_factor) {
    if (upscale_factor < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "PixelShuffle: upscale_factor must be >= 1");
    return make(&shuffle_ops, (vision_ctx){.factor = upscale_factor});
}

nb_module *nb_nn_pixel_unshuffle(int64_t downscale_factor) {
    if (downscale_factor < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "PixelUnshuffle: downscale_factor must be >= 1");
    return make(&unshuffle_ops, (vision_ctx){.factor = downscale_factor});
}

static nb_module *upsample(const nb_module_ops *ops, int64_t out_h, int64_t out_w, double scale_h, double scale_w,
                           nb_interpolate_mode mode, bool align_corners) {
    bool by_size = out_h > 0 && out_w > 0, by_scale = scale_h > 0 && scale_w > 0 && isfinite(scale_h) && isfinite(scale_w);
    if (by_size == by_scale || (out_h < 0 || out_w < 0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: give either the size (both > 0) or the scale_factor (both > 0, "
                       "finite), not both", ops->kind);
    if (mode != NB_INTERPOLATE_NEAREST && mode != NB_INTERPOLATE_BILINEAR)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: mode must be nearest or bilinear", ops->kind);
    return make(ops, (vision_ctx){.size = {by_size ? out_h : 0, by_size ? out_w : 0}, .scale = {scale_h, scale_w},
                                  .mode = mode, .align_corners = align_corners});
}

nb_module *nb_nn_upsample(int64_t out_h, int64_t out_w, double scale_h, double scale_w, nb_interpolate_mode mode,
                          bool align_corners) {
    return upsample(&upsample_ops, out_h, out_w, scale_h, scale_w, mode, align_corners);
}

nb_module *nb_nn_upsampling_nearest2d(int64_t out_h, int64_t out_w, double scale_h, double scale_w) {
    return upsample(&up_nearest_ops, out_h, out_w, scale_h, scale_w, NB_INTERPOLATE_NEAREST, false);
}

nb_module *nb_nn_upsampling_bilinear2d(int64_t out_h, int64_t out_w, double scale_h, double scale_w) {
    return upsample(&up_bilinear_ops, out_h, out_w, scale_h, scale_w, NB_INTERPOLATE_BILINEAR, true);
}

nb_module *nb_nn_channel_shuffle(int64_t groups) {
    if (groups < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "ChannelShuffle: groups must be >= 1");
    return make(&channel_shuffle_ops, (vision_ctx){.factor = groups});
}

/* ---- Unfold / Fold ------------------------------------------------------------------- */

typedef struct fold_ctx {
    nb_fold_options o;
    int64_t h, w; /* Fold's output size */
} fold_ctx;

static nb_tensor *unfold_forward(nb_module *m, nb_tensor *x) { return nb_im2col(x, ((const fold_ctx *)nb_module_ctx(m))->o); }
static nb_tensor *fold_forward(nb_module *m, nb_tensor *x) {
    const fold_ctx *c = nb_module_ctx(m);
    return nb_col2im(x, c->h, c->w, c->o);
}
static const nb_module_ops unfold_ops = {"Unfold", unfold_forward, free, NULL};
static const nb_module_ops fold_ops = {"Fold", fold_forward, free, NULL};

static nb_module *fold_new(const nb_module_ops *ops, int64_t h, int64_t w, nb_fold_options o) {
    for (int i = 0; i < 2; i++)
        if (o.kernel[i] < 1 || o.dilation[i] < 0 || o.stride[i] < 0 || o.padding[i] < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: kernel_size must be >= 1, dilation, padding and stride >= 0",
                           ops->kind);
    fold_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    c->o = o, c->h = h, c->w = w;
    return nb_module_new(ops, c);
}

nb_module *nb_nn_unfold(nb_fold_options o) { return fold_new(&unfold_ops, 0, 0, o); }

nb_module *nb_nn_fold(int64_t out_h, int64_t out_w, nb_fold_options o) {
    if (out_h < 1 || out_w < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "Fold: output_size must be positive");
    return fold_new(&fold_ops, out_h, out_w, o);
}
