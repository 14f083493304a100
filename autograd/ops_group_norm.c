/* ops_group_norm.c - the normalizations written from other ops:
 * group_norm and instance_norm through batch_norm's fused kernels on a
 * [1, N * groups, *] view (the statistics of each group, or of each
 * (sample, channel), are a "channel" of that view; PyTorch's own instance
 * norm does the same), local_response_norm from a padded window sum, and
 * normalize from a norm. Gradients (first and second order) follow from
 * those ops. Tests: tests/test_ops_group_norm.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* v [C] viewed as [1, C, 1, ...] for an input of ndim dims. */
static nb_tensor *per_channel(nb_tensor *v, int ndim) {
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shape[i] = 1;
    shape[1] = v->shape[0];
    return nb_reshape(v, ndim, shape);
}

/* x * weight + bias with [C] weight and bias (either may be NULL). */
static nb_tensor *affine(nb_tensor *y, nb_tensor *w, nb_tensor *b) {
    if (y && w) y = nb_mul(y, per_channel(w, y->ndim));
    if (y && b) y = nb_add(y, per_channel(b, y->ndim));
    return y;
}

/* weight / bias: NULL or [C] of x's dtype and device. */
static bool channel_vector(const char *op, const char *what, nb_tensor *v, nb_tensor *x) {
    if (!v) return true;
    if (!nb_check_inputs(op, 2, (nb_tensor *[]){x, v})) return false;
    if (v->dtype != x->dtype) {
        nb_set_error(NB_ERR_DTYPE, "%s: %s is %s, the input %s", op, what, nb_dtype_name(v->dtype),
                     nb_dtype_name(x->dtype));
        return false;
    }
    if (v->ndim != 1 || v->shape[0] != x->shape[1]) {
        char a[NB_SHAPE_BUF];
        nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be [C] = [%lld]", op, what,
                     nb_fmt_shape(v->ndim, v->shape, a, sizeof a), (long long)x->shape[1]);
        return false;
    }
    return true;
}

/* x [N, C, *] of a float dtype the op takes. */
static bool batched_input(const char *op, nb_op_id id, nb_tensor *x, int min_dim) {
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(id, 1, &x)) return false;
    if (x->ndim >= min_dim) return true;
    char a[NB_SHAPE_BUF];
    nb_set_error(NB_ERR_SHAPE, "%s: input %s must be [N, C%s]", op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a),
                 min_dim > 2 ? ", *, ..." : ", *");
    return false;
}

/* Normalizes each of the rows groups of x viewed as [1, rows, *] with its
 * own mean and biased variance (batch_norm in training mode on that view),
 * updating running_mean / running_var of [rows] when given. */
static nb_tensor *normalize_rows(nb_tensor *x, int64_t rows, nb_tensor *rm, nb_tensor *rv, bool use_stats,
                                 double momentum, double eps) {
    int64_t n = nb_numel(x), per = rows ? n / rows : 0;
    if (use_stats && per == 1) /* one element per group: x - mean is 0 (batch_norm would refuse it) */
        return nb_mul_scalar(x, 0.0);
    nb_tensor *v = nb_reshape(x, NB_SHAPE(1, rows, per));
    nb_tensor *y = nb_batch_norm(v, rm, rv, NULL, NULL, use_stats, momentum, eps);
    return nb_reshape(y, x->ndim, x->shape);
}

nb_tensor *nb_group_norm(nb_tensor *x, int64_t num_groups, nb_tensor *weight, nb_tensor *bias, double eps) {
    nb_tensor *in[3] = {x, weight, bias};
    if (!nb_autocast_inputs(NB_OP_GROUP_NORM, 3, in)) return NULL;
    x = in[0], weight = in[1], bias = in[2];
    const char *op = "group_norm";
    if (!batched_input(op, NB_OP_GROUP_NORM, x, 2) || !channel_vector(op, "weight", weight, x) ||
        !channel_vector(op, "bias", bias, x))
        return NULL;
    int64_t C = x->shape[1];
    if (num_groups < 1 || C % num_groups)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: %lld channels are not divisible into %lld groups", op, (long long)C,
                       (long long)num_groups);
    eps = nb_option(eps, 1e-5);
    if (!(eps >= 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eps %g must be >= 0", op, eps);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y = nb_numel(x) ? normalize_rows(x, x->shape[0] * num_groups, NULL, NULL, true, 0, eps) : nb_mul_scalar(x, 1.0);
    return nb_scope_return(s, affine(y, weight, bias));
}

nb_tensor *nb_instance_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *weight,
                            nb_tensor *bias, bool use_input_stats, double momentum, double eps) {
    const char *op = "instance_norm";
    if (!batched_input(op, NB_OP_INSTANCE_NORM, x, 3) || !channel_vector(op, "weight", weight, x) ||
        !channel_vector(op, "bias", bias, x) || !channel_vector(op, "running_mean", running_mean, x) ||
        !channel_vector(op, "running_var", running_var, x))
        return NULL;
    if ((running_mean == NULL) != (running_var == NULL))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: running_mean and running_var must both be given or both NULL", op);
    if (!use_input_stats && !running_mean)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: running_mean and running_var are required without use_input_stats", op);
    int64_t N = x->shape[0], C = x->shape[1], per = N * C != 0 ? nb_numel(x) / (N * C) : 0;
    if (use_input_stats && per == 1) { /* PyTorch's check */
        char a[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: expected more than 1 spatial element when training, got input size %s",
                       op, nb_fmt_shape(x->ndim, x->shape, a, sizeof a));
    }
    eps = nb_option(eps, 1e-5), momentum = nb_option(momentum, 0.1);
    if (!(eps >= 0) || !(momentum >= 0 && momentum <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eps (%g) must be >= 0 and momentum (%g) in [0, 1]", op, eps, momentum);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y;
    if (!nb_numel(x)) {
        y = nb_mul_scalar(x, 1.0);
    } else if (running_mean) {
        /* per (sample, channel) copies of the running statistics, updated by batch_norm, then averaged over
         * the batch back into them (PyTorch's instance_norm) */
        int64_t rep[1] = {N};
        bool prev = nb_set_grad_enabled(false);
        nb_tensor *rm = nb_mul_scalar(nb_tile(running_mean, rep, 1), 1.0); /* fresh and contiguous, also for N = 1 */
        nb_tensor *rv = nb_mul_scalar(nb_tile(running_var, rep, 1), 1.0);
        nb_set_grad_enabled(prev);
        y = rm && rv ? normalize_rows(x, N * C, rm, rv, use_input_stats, momentum, eps) : NULL;
        if (y && use_input_stats) {
            prev = nb_set_grad_enabled(false);
            nb_tensor *m = nb_mean(nb_reshape(rm, NB_SHAPE(N, C)), (int[]){0}, 1, false);
            nb_tensor *v = nb_mean(nb_reshape(rv, NB_SHAPE(N, C)), (int[]){0}, 1, false);
            nb_status st = m && v ? nb_copy_(running_mean, m) : nb_last_status();
            if (!st) st = nb_copy_(running_var, v);
            nb_set_grad_enabled(prev);
            if (st) y = NULL;
        }
    } else {
        y = normalize_rows(x, N * C, NULL, NULL, true, 0, eps);
    }
    return nb_scope_return(s, affine(y, weight, bias));
}

nb_tensor *nb_local_response_norm(nb_tensor *x, int64_t size, double alpha, double beta, double k) {
    const char *op = "local_response_norm";
    if (!batched_input(op, NB_OP_LOCAL_RESPONSE_NORM, x, 3)) return NULL;
    if (size < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: size %lld must be >= 1", op, (long long)size);
    alpha = nb_option(alpha, 1e-4), beta = nb_option(beta, 0.75), k = nb_option(k, 1.0);
    nb_scope *s = nb_op_scope_begin();
    /* the mean of x^2 over a window of `size` channels, zero-padded (size / 2 before, (size - 1) / 2 after),
     * dividing by size: PyTorch's avg_pool with count_include_pad */
    int64_t pads[2 * NB_MAX_DIMS] = {0};
    int np = 2 * (x->ndim - 1);
    pads[np - 2] = size / 2, pads[np - 1] = (size - 1) / 2;
    nb_tensor *sq = nb_pad(nb_mul(x, x), pads, np, NB_PAD_CONSTANT, 0.0);
    int last = x->ndim;
    nb_tensor *avg = nb_mul_scalar(nb_sum(nb_unfold(sq, 1, size, 1), &last, 1, false), 1.0 / (double)size);
    nb_tensor *div = nb_pow_scalar(nb_add_scalar(nb_mul_scalar(avg, alpha), k), beta);
    return nb_scope_return(s, nb_div(x, div));
}

nb_tensor *nb_normalize(nb_tensor *x, double p, int dim, double eps) {
    const char *op = "normalize";
    if (!nb_check_inputs(op, 1, &x) || !nb_check_dtypes(NB_OP_NORMALIZE, 1, &x)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *n = nb_norm(x, nb_option(p, 2.0), &dim, 1, true);
    nb_tensor *y = n ? nb_div(x, nb_clamp_scalar(n, nb_option(eps, 1e-12), NAN)) : NULL;
    return nb_scope_return(s, y);
}
