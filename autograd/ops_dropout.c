/* ops_dropout.c - dropout (F.dropout: inverted scaling by 1/(1-p)); the mask
 * comes from the backend's random slot (Philox Bernoulli, backend/cpu/random.c)
 * in the input's dtype (bfloat16 and float16 too) and is multiplied in with
 * the binary kernel, or all three in one launch where the backend has the
 * dropout slot (CUDA: backend/cuda/random.cu). Tests: tests/test_ops_dropout.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- dropout ------------------------------------------------------------------ */

/* saved[0]: the scaled mask (0 or 1/(1-p)); gx = g * mask. */
nb_status nb_bw_dropout(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *mask = n->saved[0];
    if (nb_needs_grad(1, &g)) return (gin[0] = nb_mul(g, mask)) ? NB_OK : nb_last_status(); /* create_graph */
    nb_tensor *gx = nb_empty_like(mask);
    if (!gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(g), vm = nb_kview_of(mask);
    gin[0] = gx;
    return nb_kernel_binary(NB_BE(mask), NB_BINARY_MUL, &vgx, &vg, &vm);
}

static nb_tensor *dropout_impl(nb_tensor *x, double p, nb_generator *gen) {
    if (p == 1) return nb_mul_scalar(x, 0.0); /* as ATen: input * 0, gradient 0 */
    /* the mask in x's dtype (16-bit too: 0 and 1 are exact), scaled by
     * 1 / (1 - p) once (ATen's noise.div_(1 - p)), then one multiply */
    nb_tensor *mask = nb_empty_like(x), *out = nb_empty_like(x);
    if (!mask || !out) return NULL;
    nb_kview vm = nb_kview_of(mask), vo = nb_kview_of(out), vx = nb_kview_of(x);
    if (nb_kernel_has(NB_BE(x), dropout) && nb_is_contiguous(x) && nb_is_contiguous(mask) && nb_is_contiguous(out)) {
        /* the three steps below in one kernel (the same bits) */
        nb_philox_state rng;
        if (nb_rng_philox(mask, gen, &rng) != NB_OK || nb_kernel_dropout(NB_BE(x), &vo, &vm, &vx, p, rng) != NB_OK)
            return NULL;
    } else {
        if (nb_bernoulli_(mask, 1 - p, gen) != NB_OK) return NULL;
        if (nb_kernel_unary(NB_BE(x), NB_UNARY_MUL_SCALAR, &vm, &vm, 1 / (1 - p)) != NB_OK) return NULL;
        if (nb_kernel_binary(NB_BE(x), NB_BINARY_MUL, &vo, &vx, &vm) != NB_OK) return NULL;
    }
    bool failed;
    nb_node *n = nb_record(NB_OP_DROPOUT, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, mask);
    return out;
}

nb_tensor *nb_dropout(nb_tensor *x, double p, bool training, nb_generator *gen) {
    if (!nb_check_inputs("dropout", 1, &x) || !nb_check_dtypes(NB_OP_DROPOUT, 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "dropout: probability has to be between 0 and 1, but got %g", p);
    if (!training || p == 0) { /* identity: the same tensor, one more reference */
        nb_retain(x);
        return nb_scope_adopt(x);
    }
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, dropout_impl(x, p, gen));
}

/* ---- channel and alpha dropout (composites) ----------------------------------- */

/* ATen's _dropout_impl: noise ~ Bernoulli(1 - p) over x's shape, or over
 * [N, C, 1, ...] (feature: whole channels; [C, 1, ...] unbatched when x has
 * feature_dim + 1 dims); plain: x noise / (1 - p); alpha (SELU's, Klambauer
 * et al. 2017): a (x noise + alpha' (noise - 1)) + alpha' a p with
 * alpha' = 1.7580993408473766 and a = 1 / sqrt((alpha'^2 p + 1)(1 - p)). */
static nb_tensor *dropout_composite(const char *op, nb_op_id id, nb_tensor *x, double p, bool training,
                                    nb_generator *gen, int feature_dims, bool alpha) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: probability has to be between 0 and 1, but got %g", op, p);
    bool unbatched = false;
    if (feature_dims) {
        if (x->ndim != feature_dims + 1 && x->ndim != feature_dims + 2) {
            char a[NB_SHAPE_BUF];
            return NB_FAIL(NB_ERR_SHAPE, "%s: expected a %dD (unbatched) or %dD input, got %s", op, feature_dims + 1,
                           feature_dims + 2, nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
        }
        unbatched = x->ndim == feature_dims + 1;
    }
    if (!training || p == 0) { /* identity: the same tensor, one more reference */
        nb_retain(x);
        return nb_scope_adopt(x);
    }
    nb_scope *s = nb_op_scope_begin();
    if (p == 1) return nb_scope_return(s, nb_mul_scalar(x, 0.0));
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    if (feature_dims) /* one draw per (sample, channel) */
        for (int i = unbatched ? 1 : 2; i < x->ndim; i++) shape[i] = 1;
    nb_tensor *u = nb_rand_on(x->ndim, shape, x->dtype, gen, x->storage->device);
    nb_tensor *noise = u ? nb_to_dtype(nb_ge_scalar(u, p), x->dtype) : NULL;
    nb_tensor *y;
    if (!alpha) {
        y = nb_mul(x, nb_mul_scalar(noise, 1 / (1 - p)));
    } else {
        const double al = 1.7580993408473766;
        double a = 1 / sqrt((al * al * p + 1) * (1 - p));
        nb_tensor *b = nb_add_scalar(nb_mul_scalar(nb_add_scalar(noise, -1), al * a), al * a * p);
        y = nb_add(nb_mul(x, nb_mul_scalar(noise, a)), b);
    }
    return nb_scope_return(s, y);
}

nb_tensor *nb_dropout1d(nb_tensor *x, double p, bool training, nb_generator *gen) {
    return dropout_composite("dropout1d", NB_OP_DROPOUT1D, x, p, training, gen, 1, false);
}
nb_tensor *nb_dropout2d(nb_tensor *x, double p, bool training, nb_generator *gen) {
    return dropout_composite("dropout2d", NB_OP_DROPOUT2D, x, p, training, gen, 2, false);
}
nb_tensor *nb_dropout3d(nb_tensor *x, double p, bool training, nb_generator *gen) {
    return dropout_composite("dropout3d", NB_OP_DROPOUT3D, x, p, training, gen, 3, false);
}
nb_tensor *nb_alpha_dropout(nb_tensor *x, double p, bool training, nb_generator *gen) {
    return dropout_composite("alpha_dropout", NB_OP_ALPHA_DROPOUT, x, p, training, gen, 0, true);
}
nb_tensor *nb_feature_alpha_dropout(nb_tensor *x, double p, bool training, nb_generator *gen) {
    if (x && x->ndim < 2) return NB_FAIL(NB_ERR_SHAPE, "feature_alpha_dropout: expected at least a 2D input");
    return dropout_composite("feature_alpha_dropout", NB_OP_FEATURE_ALPHA_DROPOUT, x, p, training, gen,
                             x ? x->ndim - 2 : 0, true);
}
