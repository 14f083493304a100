/* clip.c - gradient clipping (torch.nn.utils.clip_grad_norm_ and
 * clip_grad_value_). The norms are computed on the gradients' device and
 * dtype (only the final total norm is read back, and only when asked), in
 * PyTorch's order: per-gradient norms, then the norm of those, then
 * clip_coef = min(max_norm / (total_norm + 1e-6), 1) applied to every
 * gradient, through nb_foreach_norm and nb_foreach_mul_ (one launch each
 * where the backend has multi-tensor kernels, CUDA; PyTorch's foreach
 * path). The gradients are updated in place, so the .grad storage - and
 * any view of it - is kept and no gradient-sized temporary is made for it.
 */
#include <math.h>
#include <stdlib.h>

#include "nb_autograd.h"
#include "nb_foreach.h"
#include "nb_extension.h"
#include "nb_ops.h"
#include "nb_optim.h"

static nb_status check_list(const char *op, nb_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: bad parameter list (n %d, list %s)", op, n,
                            params ? "given" : "NULL");
    for (int i = 0; i < n; i++)
        if (!params[i]) return nb_set_error(NB_ERR_INVALID_ARG, "%s: parameter %d is NULL", op, i);
    return NB_OK;
}

/* |g|: relu(g) + relu(-g) is exact (one term is 0). */
static nb_tensor *abs_of(nb_tensor *g) { return nb_add(nb_relu(g), nb_relu(nb_neg(g))); }

/* The norm_type-norm of the elements of x (0-dim) with ops; NULL on error.
 * The total norm and the norms of a mixed-dtype list (those of the
 * multi-tensor norm where it runs, nb_foreach_norm, otherwise the same). */
static nb_tensor *vector_norm(nb_tensor *x, double p) {
    if (nb_dtype_size(nb_dtype_of(x)) == 2) /* 16-bit: in float32, rounded once at the end */
        return nb_to_dtype(vector_norm(nb_to_dtype(x, NB_F32), p), nb_dtype_of(x));
    if (nb_numel(x) == 0) return nb_scalar_like(x, 0.0, nb_dtype_of(x)); /* torch.norm of an empty tensor is 0 */
    if (isinf(p)) { /* max |x| = max(amax(x), amax(-x)); NaN propagates */
        nb_tensor *hi = nb_max(x, NULL, 0, false), *lo = hi ? nb_max(nb_neg(x), NULL, 0, false) : NULL;
        return lo ? nb_max(nb_stack((nb_tensor *[]){hi, lo}, 2, 0), NULL, 0, false) : NULL;
    }
    if (p == 2.0) return nb_sqrt(nb_sum(nb_mul(x, x), NULL, 0, false));
    if (p == 1.0) return nb_sum(abs_of(x), NULL, 0, false);
    return nb_pow_scalar(nb_sum(nb_pow_scalar(abs_of(x), p), NULL, 0, false), 1.0 / p);
}

static nb_status scale_by_coef(nb_tensor **g, int k, nb_tensor *total, double max_norm, double *total_out);

/* The body of clip_grad_norm_ over the k gradients g, inside a scope with
 * grad off: the per-gradient norms (one launch where the backend has a
 * multi-tensor norm), then the norm of those. */
static nb_status clip_norm(nb_tensor **g, int k, double max_norm, double p, double *total_out) {
    bool mixed = false;
    for (int i = 0; i < k; i++) mixed |= nb_dtype_of(g[i]) != nb_dtype_of(g[0]);
    nb_tensor *norms = NULL;
    if (!mixed)
        norms = nb_foreach_norm(g, k, p);
    else { /* a norm per gradient, promoted to float64 as torch.stack does */
        nb_tensor **each = malloc(sizeof *each * (size_t)k);
        if (!each) return nb_set_error(NB_ERR_OOM, "clip_grad_norm_: out of host memory");
        bool ok = true;
        for (int i = 0; i < k && ok; i++) ok = (each[i] = nb_to_dtype(vector_norm(g[i], p), NB_F64)) != NULL;
        if (ok) norms = nb_stack(each, k, 0);
        free(each);
    }
    nb_tensor *total = !norms ? NULL : k == 1 && isinf(p) ? nb_reshape(norms, 0, NULL) : vector_norm(norms, p);
    return total ? scale_by_coef(g, k, total, max_norm, total_out) : nb_last_status();
}

/* Multiplies the k gradients by clamp(max_norm / (total + 1e-6), max=1)
 * (PyTorch's clip_coef), on the device (one launch where the backend has a
 * multi-tensor multiply); *total_out = total when asked (the one host read). */
static nb_status scale_by_coef(nb_tensor **g, int k, nb_tensor *total, double max_norm, double *total_out) {
    /* PyTorch: max_norm / (total_norm + 1e-6) is reciprocal(total + 1e-6) * max_norm. */
    nb_tensor *one = nb_scalar_like(total, 1.0, nb_dtype_of(total));
    nb_tensor *coef = nb_mul_scalar(nb_div(one, nb_add_scalar(total, 1e-6)), max_norm);
    coef = coef ? nb_where(nb_gt(coef, one), one, coef) : NULL; /* clamp(max=1.0); NaN stays NaN */
    if (!coef) return nb_last_status();
    nb_status st = nb_foreach_mul_(g, k, coef);
    if (st == NB_OK && total_out) *total_out = nb_item(total);
    return st;
}

/* Collects the existing gradients of params into a malloc'd array (*k of them). */
static nb_tensor **grads_of(const char *op, nb_tensor *const *params, int n, int *k) {
    nb_tensor **g = malloc(sizeof *g * (size_t)(n > 0 ? n : 1));
    if (!g) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    *k = 0;
    for (int i = 0; i < n; i++)
        if (nb_tensor_grad(params[i])) g[(*k)++] = nb_tensor_grad(params[i]);
    return g;
}

nb_status nb_clip_grad_norm_(nb_tensor *const *params, int n, double max_norm, double norm_type,
                             double *total_norm_out) {
    const char *op = "clip_grad_norm_";
    nb_status st = check_list(op, params, n);
    if (st != NB_OK) return st;
    if (!(max_norm >= 0.0)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: max_norm must be >= 0 (got %g)", op, max_norm);
    if (!(norm_type > 0.0))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: norm_type must be > 0 or INFINITY (got %g)", op, norm_type);
    if (nb_op_take_fresh()) nb_clear_error(); /* valid arguments: an earlier call's error goes (nb_extension.h) */
    int k = 0;
    nb_tensor **g = grads_of(op, params, n, &k);
    if (!g) return NB_ERR_OOM;
    if (total_norm_out) *total_norm_out = 0.0; /* no gradients: PyTorch returns tensor(0.) */
    if (k > 0) {
        nb_scope *s = nb_op_scope_begin();
        bool prev = nb_set_grad_enabled(false);
        st = s ? clip_norm(g, k, max_norm, norm_type, total_norm_out)
               : nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        nb_set_grad_enabled(prev);
        if (s) nb_scope_end(s);
    }
    free(g);
    return st;
}

nb_status nb_clip_grad_value_(nb_tensor *const *params, int n, double clip_value) {
    const char *op = "clip_grad_value_";
    nb_status st = check_list(op, params, n);
    if (st != NB_OK) return st;
    if (!(clip_value >= 0.0) || !isfinite(clip_value))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: clip_value must be >= 0 and finite (got %g)", op, clip_value);
    if (nb_op_take_fresh()) nb_clear_error();
    nb_scope *s = nb_op_scope_begin();
    if (!s) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < n && st == NB_OK; i++) {
        nb_tensor *g = nb_tensor_grad(params[i]);
        if (!g) continue;
        /* clamp_(min=-c, max=c) as maximum then minimum: NaN-propagating, as torch.clamp. */
        nb_tensor *lo = nb_scalar_like(g, -clip_value, nb_dtype_of(g));
        nb_tensor *hi = nb_scalar_like(g, clip_value, nb_dtype_of(g));
        st = lo && hi ? nb_maximum_(g, lo) : nb_last_status();
        if (st == NB_OK) st = nb_minimum_(g, hi);
    }
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return st;
}

/* module.parameters() (each shared tensor once), with op in the NULL error. */
static nb_tensor **module_params(const char *op, nb_module *m, int *n) {
    if (!m) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    return nb_module_parameter_list(m, n);
}

nb_status nb_clip_grad_norm_module_(nb_module *m, double max_norm, double norm_type, double *total_norm_out) {
    int n = 0;
    nb_tensor **params = module_params("clip_grad_norm_", m, &n);
    if (!params) return nb_last_status();
    nb_status st = nb_clip_grad_norm_(params, n, max_norm, norm_type, total_norm_out);
    free(params);
    return st;
}

nb_status nb_clip_grad_value_module_(nb_module *m, double clip_value) {
    int n = 0;
    nb_tensor **params = module_params("clip_grad_value_", m, &n);
    if (!params) return nb_last_status();
    nb_status st = nb_clip_grad_value_(params, n, clip_value);
    free(params);
    return st;
}
