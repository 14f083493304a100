/* ops_fold.c - F.unfold / F.fold (ATen's im2col / col2im), F.embedding_bag
 * and F.affine_grid, written from index_select, index_add, embedding,
 * scatter_reduce and matmul: one host-computed index list per call maps
 * every (channel block, position) of the columns to its pixel, so im2col
 * is one gather and col2im one deterministic index_add (overlaps summed in
 * a fixed order). Tests: tests/test_ops_fold.c, the op harness,
 * tests/torch_diff. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* The window geometry of im2col / col2im over a (H, W) image. */
typedef struct fold_geom {
    int64_t kh, kw, dh, dw, ph, pw, sh, sw; /* kernel, dilation, padding, stride */
    int64_t H, W, Hp, Wp, oh, ow;            /* image, padded image, blocks per dim */
} fold_geom;

static bool geometry(const char *op, nb_fold_options o, int64_t H, int64_t W, fold_geom *g) {
    *g = (fold_geom){.kh = o.kernel[0], .kw = o.kernel[1], .dh = o.dilation[0] ? o.dilation[0] : 1,
                     .dw = o.dilation[1] ? o.dilation[1] : 1, .ph = o.padding[0], .pw = o.padding[1],
                     .sh = o.stride[0] ? o.stride[0] : 1, .sw = o.stride[1] ? o.stride[1] : 1, .H = H, .W = W};
    if (g->kh < 1 || g->kw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0 || g->sh < 1 || g->sw < 1) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: kernel_size, dilation and stride must be >= 1, padding >= 0", op);
        return false;
    }
    g->Hp = H + 2 * g->ph, g->Wp = W + 2 * g->pw;
    int64_t eh = g->dh * (g->kh - 1) + 1, ew = g->dw * (g->kw - 1) + 1;
    g->oh = g->Hp >= eh ? (g->Hp - eh) / g->sh + 1 : 0, g->ow = g->Wp >= ew ? (g->Wp - ew) / g->sw + 1 : 0;
    if (g->oh < 1 || g->ow < 1) {
        nb_set_error(NB_ERR_SHAPE, "%s: the (padded) %lld x %lld image is smaller than the %lld x %lld dilated kernel",
                     op, (long long)g->Hp, (long long)g->Wp, (long long)eh, (long long)ew);
        return false;
    }
    return true;
}

/* For column row r = ki kw + kj and block l = bi ow + bj, the flat position
 * in the padded image: int64 [kh kw L] on dev. */
static nb_tensor *pixel_index(const fold_geom *g, nb_device dev) {
    int64_t K = g->kh * g->kw, L = g->oh * g->ow, n = K * L;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    if (!idx) return NB_FAIL(NB_ERR_OOM, "fold: out of host memory");
    for (int64_t ki = 0; ki < g->kh; ki++)
        for (int64_t kj = 0; kj < g->kw; kj++)
            for (int64_t bi = 0; bi < g->oh; bi++)
                for (int64_t bj = 0; bj < g->ow; bj++) {
                    int64_t y = bi * g->sh + ki * g->dh, x = bj * g->sw + kj * g->dw;
                    idx[((ki * g->kw + kj) * g->oh + bi) * g->ow + bj] = y * g->Wp + x;
                }
    nb_tensor *t = nb_from_data_on(idx, 1, &n, NB_I64, dev);
    free(idx);
    return t;
}

nb_tensor *nb_im2col(nb_tensor *x, nb_fold_options o) {
    if (!nb_check_inputs("unfold", 1, &x) || !nb_check_dtypes(NB_OP_IM2COL, 1, &x)) return NULL;
    if (x->ndim != 3 && x->ndim != 4) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "unfold: input %s must be [N, C, H, W] or [C, H, W]",
                       nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    }
    bool unbatched = x->ndim == 3;
    int64_t N = unbatched ? 1 : x->shape[0], C = x->shape[x->ndim - 3];
    fold_geom g;
    if (!geometry("unfold", o, x->shape[x->ndim - 2], x->shape[x->ndim - 1], &g)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    int64_t K = g.kh * g.kw, L = g.oh * g.ow;
    nb_tensor *xp = nb_pad(nb_reshape(x, NB_SHAPE(N, C, g.H, g.W)), (int64_t[]){g.pw, g.pw, g.ph, g.ph}, 4,
                           NB_PAD_CONSTANT, 0.0);
    nb_tensor *idx = pixel_index(&g, x->storage->device);
    nb_tensor *cols = xp && idx ? nb_index_select(nb_reshape(xp, NB_SHAPE(N, C, g.Hp * g.Wp)), 2, idx) : NULL;
    nb_tensor *y = cols ? nb_reshape(cols, NB_SHAPE(N, C * K, L)) : NULL; /* [N, C, K L] -> [N, C K, L] */
    if (y && unbatched) y = nb_squeeze(y, 0);
    return nb_scope_return(s, y);
}

nb_tensor *nb_col2im(nb_tensor *cols, int64_t out_h, int64_t out_w, nb_fold_options o) {
    if (!nb_check_inputs("fold", 1, &cols) || !nb_check_dtypes(NB_OP_COL2IM, 1, &cols)) return NULL;
    char a[NB_SHAPE_BUF];
    if (cols->ndim != 2 && cols->ndim != 3)
        return NB_FAIL(NB_ERR_SHAPE, "fold: input %s must be [N, C kh kw, L] or [C kh kw, L]",
                       nb_fmt_shape(cols->ndim, cols->shape, a, sizeof a));
    fold_geom g;
    if (!geometry("fold", o, out_h, out_w, &g)) return NULL;
    bool unbatched = cols->ndim == 2;
    int64_t N = unbatched ? 1 : cols->shape[0], CK = cols->shape[cols->ndim - 2], L = cols->shape[cols->ndim - 1];
    int64_t K = g.kh * g.kw;
    if (CK % K || L != g.oh * g.ow)
        return NB_FAIL(NB_ERR_SHAPE, "fold: input %s must have C * %lld rows and %lld blocks (%lld x %lld) for output "
                       "size %lld x %lld", nb_fmt_shape(cols->ndim, cols->shape, a, sizeof a), (long long)K,
                       (long long)(g.oh * g.ow), (long long)g.oh, (long long)g.ow, (long long)out_h, (long long)out_w);
    int64_t C = CK / K;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *idx = pixel_index(&g, cols->storage->device);
    nb_tensor *z = nb_full_on(NB_SHAPE(N, C, g.Hp * g.Wp), 0.0, cols->dtype, cols->storage->device);
    nb_tensor *img = idx && z ? nb_index_add(z, 2, idx, nb_reshape(cols, NB_SHAPE(N, C, K * L)), 1.0) : NULL;
    nb_tensor *y = NULL;
    if (img) { /* crop the padding */
        y = nb_reshape(img, NB_SHAPE(N, C, g.Hp, g.Wp));
        y = nb_narrow(nb_narrow(y, 2, g.ph, g.H), 3, g.pw, g.W);
        if (y) y = nb_contiguous(y);
    }
    if (y && unbatched) y = nb_squeeze(y, 0);
    return nb_scope_return(s, y);
}

/* ---- embedding_bag ------------------------------------------------------------------- */

nb_tensor *nb_embedding_bag(nb_tensor *input, nb_tensor *weight, nb_tensor *offsets, nb_embedding_bag_options o) {
    nb_tensor *in[2] = {input, weight};
    const char *op = "embedding_bag";
    if (!nb_check_inputs(op, 2, in) || !nb_check_dtypes(NB_OP_EMBEDDING_BAG, 1, &weight)) return NULL;
    if (input->dtype != NB_I64) return NB_FAIL(NB_ERR_DTYPE, "%s: input must be int64 indices", op);
    if ((unsigned)o.mode > NB_BAG_MAX) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: bad mode %d", op, (int)o.mode);
    if (weight->ndim != 2) return NB_FAIL(NB_ERR_SHAPE, "%s: weight must be 2-d [num_embeddings, dim]", op);
    if (o.per_sample_weights && o.mode != NB_BAG_SUM)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: per_sample_weights are only supported for mode sum", op);
    int64_t B, L = nb_numel(input), D = weight->shape[1];
    nb_device dev = input->storage->device;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *seg; /* the bag of each index */
    if (input->ndim == 2) {
        if (offsets) {
            nb_scope_end(s);
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: offsets must be NULL for a 2-d input", op);
        }
        B = input->shape[0];
        int64_t per = input->shape[1];
        seg = nb_div_mode(nb_arange_on(0, (double)L, 1, NB_I64, dev), nb_scalar_like(input, (double)(per ? per : 1), NB_I64),
                          NB_ROUNDING_FLOOR);
    } else if (input->ndim == 1 && offsets && offsets->dtype == NB_I64 && offsets->ndim == 1) {
        int64_t nb = offsets->shape[0];
        B = o.include_last_offset ? nb - 1 : nb;
        if (B < 0) B = 0;
        /* a 1 at each bag's start (offsets past the first), summed: the bag ids; offsets[0] must be 0 */
        nb_tensor *starts = nb >= 2 ? nb_narrow(offsets, 0, 1, (o.include_last_offset ? nb - 2 : nb - 1)) : NULL;
        nb_tensor *marks = nb_full_on(1, &L, 0.0, NB_I64, dev);
        if (marks && starts && nb_numel(starts)) {
            nb_tensor *ones = nb_full_on(1, starts->shape, 1.0, NB_I64, dev);
            /* starts equal to L (empty trailing bags) have no position: clamp them out of the marks */
            nb_tensor *inside = nb_lt_scalar(starts, (double)L);
            nb_tensor *safe = nb_where(inside, starts, nb_scalar_like(starts, 0, NB_I64));
            marks = nb_scatter_add(marks, 0, safe, nb_mul(ones, nb_to_dtype(inside, NB_I64)));
        }
        seg = marks ? nb_cumsum(marks, 0) : NULL;
    } else {
        nb_scope_end(s);
        return NB_FAIL(NB_ERR_SHAPE, "%s: input must be 2-d [B, N], or 1-d with int64 1-d offsets", op);
    }
    nb_tensor *flat = nb_reshape(input, 1, &L);
    nb_tensor *emb = nb_embedding(flat, weight, NB_NO_PADDING_IDX); /* [L, D] */
    nb_tensor *keep = NULL;
    if (emb && o.has_padding_idx) { /* the padding index leaves its bag */
        int64_t p = o.padding_idx < 0 ? o.padding_idx + weight->shape[0] : o.padding_idx;
        keep = nb_to_dtype(nb_ne_scalar(flat, (double)p), weight->dtype);
        emb = nb_mul(emb, nb_unsqueeze(keep, 1));
    }
    if (emb && o.per_sample_weights) emb = nb_mul(emb, nb_unsqueeze(nb_reshape(o.per_sample_weights, 1, &L), 1));
    nb_tensor *zeros = nb_full_on(NB_SHAPE(B, D), 0.0, weight->dtype, dev);
    nb_tensor *out = NULL;
    if (emb && seg && zeros) {
        if (o.mode == NB_BAG_MAX) {
            nb_tensor *idx = nb_expand(nb_unsqueeze(seg, 1), NB_SHAPE(L, D));
            if (keep) /* padding entries out of the max: their rows go to a bag past the end, dropped */
                idx = nb_where(nb_unsqueeze(nb_gt_scalar(keep, 0.5), 1), idx, nb_scalar_like(seg, (double)B, NB_I64));
            nb_tensor *big = nb_full_on(NB_SHAPE(B + 1, D), 0.0, weight->dtype, dev);
            out = nb_narrow(nb_scatter_reduce(big, 0, idx, emb, "amax", false), 0, 0, B);
        } else {
            out = nb_index_add(zeros, 0, seg, emb, 1.0);
            if (out && o.mode == NB_BAG_MEAN) {
                nb_tensor *w = keep ? keep : nb_full_on(1, &L, 1.0, weight->dtype, dev);
                nb_tensor *cnt = nb_index_add(nb_full_on(1, &B, 0.0, weight->dtype, dev), 0, seg, w, 1.0);
                out = nb_div(out, nb_unsqueeze(nb_clamp_scalar(cnt, 1.0, NAN), 1));
            }
        }
    }
    return nb_scope_return(s, out);
}

/* ---- affine_grid ----------------------------------------------------------------------- */

nb_tensor *nb_affine_grid(nb_tensor *theta, int64_t N, int64_t H, int64_t W, bool align_corners) {
    if (!nb_check_inputs("affine_grid", 1, &theta) || !nb_check_dtypes(NB_OP_AFFINE_GRID, 1, &theta)) return NULL;
    if (theta->ndim != 3 || theta->shape[0] != N || theta->shape[1] != 2 || theta->shape[2] != 3) {
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "affine_grid: theta %s must be [N, 2, 3] = [%lld, 2, 3]",
                       nb_fmt_shape(theta->ndim, theta->shape, a, sizeof a), (long long)N);
    }
    if (H < 1 || W < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "affine_grid: the size must be positive");
    /* the base grid [H W, 3] of (x, y, 1), x and y in [-1, 1] at pixel centres (or corners with align_corners) */
    double *base = malloc(sizeof(double) * (size_t)(H * W * 3));
    if (!base) return NB_FAIL(NB_ERR_OOM, "affine_grid: out of host memory");
    for (int64_t i = 0; i < H; i++)
        for (int64_t j = 0; j < W; j++) {
            double x = W > 1 ? -1.0 + 2.0 * (double)j / (double)(W - 1) : 0.0;
            double y = H > 1 ? -1.0 + 2.0 * (double)i / (double)(H - 1) : 0.0;
            if (!align_corners) x = x * (double)(W - 1) / (double)W, y = y * (double)(H - 1) / (double)H;
            double *b = base + (i * W + j) * 3;
            b[0] = x, b[1] = y, b[2] = 1.0;
        }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *g = nb_to_dtype(nb_from_data_on(base, NB_SHAPE(H * W, 3), NB_F64, theta->storage->device), theta->dtype);
    free(base);
    /* [N, H W, 3] @ theta^T [N, 3, 2] -> [N, H, W, 2] */
    nb_tensor *grid = g ? nb_matmul(nb_expand(nb_unsqueeze(g, 0), NB_SHAPE(N, H * W, 3)), nb_transpose(theta, 1, 2)) : NULL;
    return nb_scope_return(s, grid ? nb_reshape(grid, NB_SHAPE(N, H, W, 2)) : NULL);
}

/* ---- grid_sample --------------------------------------------------------------------------- */

/* PyTorch's grid_sampler_unnormalize: grid coordinate g in [-1, 1] to a
 * pixel coordinate of a dim of `size`. */
static nb_tensor *unnormalize(nb_tensor *g, int64_t size, bool align_corners) {
    double n = (double)size;
    return align_corners ? nb_mul_scalar(nb_add_scalar(g, 1), (n - 1) / 2)
                         : nb_mul_scalar(nb_add_scalar(nb_mul_scalar(nb_add_scalar(g, 1), n), -1), 0.5);
}

/* PyTorch's compute_coordinates: the padding mode's reflection and
 * clipping of a pixel coordinate (each differentiable as PyTorch's: the
 * clip's gradient is 0 outside, the reflection's the sign of its fold). */
static nb_tensor *pad_coordinate(nb_tensor *x, int64_t size, nb_grid_sample_options o) {
    double n = (double)size;
    if (o.padding_mode == NB_GRID_SAMPLE_REFLECTION) {
        /* reflect_coordinates(x, twice_low, twice_high) */
        double lo2 = o.align_corners ? 0 : -1, hi2 = o.align_corners ? 2 * (n - 1) : 2 * n - 1;
        if (lo2 == hi2) {
            x = nb_mul_scalar(x, 0);
        } else {
            double min = lo2 / 2, span = (hi2 - lo2) / 2;
            nb_tensor *t = nb_abs(nb_add_scalar(x, -min));
            nb_tensor *extra = nb_fmod_scalar(t, span);
            nb_tensor *flips = nb_floor(nb_div(nb_detach(t), t ? nb_scalar_like(t, span, t->dtype) : NULL));
            nb_tensor *even = nb_eq_scalar(nb_remainder_scalar(flips, 2), 0);
            x = nb_where(even, nb_add_scalar(extra, min), nb_add_scalar(nb_neg(extra), span + min));
        }
    }
    if (o.padding_mode != NB_GRID_SAMPLE_ZEROS) x = nb_clamp_scalar(x, 0, n - 1);
    return x;
}

/* The cubic convolution weights (Keys 1981, A = -0.75 as PyTorch's
 * get_cubic_upsample_coefficients) of the taps at -1, 0, 1, 2 for the
 * fraction t. */
static void cubic_weights(nb_tensor *t, nb_tensor **w) {
    const double A = -0.75;
    nb_tensor *u[4] = {nb_add_scalar(t, 1), t, nb_add_scalar(nb_neg(t), 1), nb_add_scalar(nb_neg(t), 2)};
    for (int i = 0; i < 4; i++) {
        nb_tensor *x = u[i];
        if (i == 1 || i == 2) /* ((A + 2) x - (A + 3)) x x + 1 */
            w[i] = nb_add_scalar(nb_mul(nb_mul(nb_add_scalar(nb_mul_scalar(x, A + 2), -(A + 3)), x), x), 1);
        else /* ((A x - 5 A) x + 8 A) x - 4 A */
            w[i] = nb_add_scalar(nb_mul(nb_add_scalar(nb_mul(nb_add_scalar(nb_mul_scalar(x, A), -5 * A), x), 8 * A), x),
                                 -4 * A);
    }
}

nb_tensor *nb_grid_sample(nb_tensor *input, nb_tensor *grid, nb_grid_sample_options o) {
    nb_tensor *in[2] = {input, grid};
    if (!nb_autocast_inputs(NB_OP_GRID_SAMPLE, 2, in) || !nb_check_inputs("grid_sample", 2, in) ||
        !nb_check_dtypes(NB_OP_GRID_SAMPLE, 2, in))
        return NULL;
    input = in[0], grid = in[1];
    if ((unsigned)o.mode > NB_GRID_SAMPLE_BICUBIC || (unsigned)o.padding_mode > NB_GRID_SAMPLE_REFLECTION)
        return NB_FAIL(NB_ERR_INVALID_ARG, "grid_sample: mode %d or padding_mode %d is not one of the enums",
                       (int)o.mode, (int)o.padding_mode);
    int d = input->ndim - 2; /* spatial dims: 2 or 3 */
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if ((d != 2 && d != 3) || grid->ndim != d + 2 || grid->shape[0] != input->shape[0] || grid->shape[d + 1] != d)
        return NB_FAIL(NB_ERR_SHAPE, "grid_sample: input %s and grid %s must be [N, C, H, W] with [N, Ho, Wo, 2], "
                       "or [N, C, D, H, W] with [N, Do, Ho, Wo, 3]", nb_fmt_shape(input->ndim, input->shape, a, sizeof a),
                       nb_fmt_shape(grid->ndim, grid->shape, b, sizeof b));
    if (o.mode == NB_GRID_SAMPLE_BICUBIC && d != 2)
        return NB_FAIL(NB_ERR_SHAPE, "grid_sample: bicubic interpolation only supports 4-d input (as PyTorch)");
    if (input->dtype != grid->dtype)
        return NB_FAIL(NB_ERR_DTYPE, "grid_sample: input (%s) and grid (%s) must share a dtype",
                       nb_dtype_name(input->dtype), nb_dtype_name(grid->dtype));
    int64_t N = input->shape[0], C = input->shape[1], P = 1, size[3];
    for (int k = 0; k < d; k++) size[k] = input->shape[input->ndim - 1 - k], P *= grid->shape[1 + k];
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *src = nb_reshape(input, NB_SHAPE(N, C, -1));
    nb_tensor *g = nb_reshape(grid, NB_SHAPE(N, 1, P, d));
    /* per spatial dim k (0 = x, the input's last dim): its taps' positions (detached floats) and weights */
    int taps = o.mode == NB_GRID_SAMPLE_NEAREST ? 1 : o.mode == NB_GRID_SAMPLE_BILINEAR ? 2 : 4;
    nb_tensor *pos[3][4] = {{0}}, *w[3][4] = {{0}};
    for (int k = 0; k < d && g; k++) {
        nb_tensor *x = unnormalize(nb_squeeze(nb_narrow(g, 3, k, 1), 3), size[k], o.align_corners); /* [N, 1, P] */
        if (o.mode != NB_GRID_SAMPLE_BICUBIC) x = pad_coordinate(x, size[k], o);
        if (o.mode == NB_GRID_SAMPLE_NEAREST) { /* nearbyint: half to even */
            pos[k][0] = nb_round(nb_detach(x));
            continue;
        }
        nb_tensor *lo = nb_floor(nb_detach(x)), *t = nb_sub(x, lo);
        if (o.mode == NB_GRID_SAMPLE_BILINEAR) {
            pos[k][0] = lo, pos[k][1] = nb_add_scalar(lo, 1);
            w[k][0] = nb_add_scalar(nb_neg(t), 1), w[k][1] = t;
        } else { /* the taps at lo - 1 .. lo + 2, each padded as PyTorch's get_value_bounded */
            for (int i = 0; i < 4; i++) pos[k][i] = pad_coordinate(nb_add_scalar(lo, i - 1), size[k], o);
            cubic_weights(t, w[k]);
        }
    }
    nb_tensor *out = NULL;
    int corners = d == 2 ? taps * taps : taps * taps * taps;
    for (int c = 0; c < corners && g; c++) {
        nb_tensor *wt = NULL, *valid = NULL, *idx = NULL;
        int64_t stride = 1;
        for (int k = 0, rest = c; k < d; k++, rest /= taps) {
            int i = rest % taps;
            if (w[k][i]) wt = wt ? nb_mul(wt, w[k][i]) : w[k][i];
            nb_tensor *p = nb_to_dtype(pos[k][i], NB_I64); /* truncation, as PyTorch's cast */
            nb_tensor *ok = nb_logical_and(nb_ge_scalar(pos[k][i], 0), nb_le_scalar(pos[k][i], (double)(size[k] - 1)));
            valid = valid ? nb_logical_and(valid, ok) : ok;
            nb_tensor *ik = nb_mul_scalar(p, (double)stride);
            idx = idx ? nb_add(idx, ik) : ik;
            stride *= size[k];
        }
        nb_tensor *zero_i = idx ? nb_scalar_like(idx, 0, NB_I64) : NULL;
        idx = nb_expand(nb_where(valid, idx, zero_i), NB_SHAPE(N, C, P));
        nb_tensor *v = nb_gather(src, 2, idx); /* [N, C, P] */
        v = nb_where(valid, v, v ? nb_scalar_like(v, 0, v->dtype) : NULL);
        if (wt) v = nb_mul(v, wt);
        out = out ? nb_add(out, v) : v;
    }
    int64_t oshape[NB_MAX_DIMS] = {N, C};
    for (int i = 0; i < d; i++) oshape[2 + i] = grid->shape[1 + i];
    return nb_scope_return(s, out ? nb_reshape(out, d + 2, oshape) : NULL);
}
