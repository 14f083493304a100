/* ops_foreach.c - the forms that write into tensors the caller gives:
 * in-place binary ops (Tensor.mul_), index_select's out= form, the
 * multi-tensor ops (torch._foreach_norm, torch._foreach_mul_) and the fused
 * optimizer steps (torch._fused_adam_, torch._fused_sgd_). They record
 * nothing for autograd, as PyTorch's out= and optimizer forms do not: with
 * grad mode on, writing into a tensor that requires grad fails. The
 * optimizers, gradient clipping, the data loader and the process groups are
 * built on these, not on the backend's slots.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nb_autograd_impl.h"
#include "nb_backend_impl.h"

/* The checks shared by every form here: n tensors given, one device, and
 * none of the written ones (the first n_written) requires grad while grad
 * mode is on. */
static bool check_written(const char *op, int n, nb_tensor *const *t, int n_written) {
    if (!nb_check_inputs(op, n, t)) return false;
    if (!nb_is_grad_enabled()) return true;
    for (int i = 0; i < n_written; i++)
        if (t[i]->requires_grad) {
            nb_set_error(NB_ERR_STATE, "%s: writes into a tensor that requires grad (run it with grad mode off)", op);
            return false;
        }
    return true;
}

/* A tensor some element of which is stored twice (an expand): writing it in
 * place would race (PyTorch refuses these too). */
static bool overlaps_itself(const nb_tensor *t) {
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1) return true;
    return false;
}

/* ---- in-place binary ops ---------------------------------------------------- */

static nb_status binary_(nb_op_id id, nb_binary_op kop, nb_tensor *(*out_of_place)(nb_tensor *, nb_tensor *),
                         nb_tensor *x, const nb_tensor *other) {
    char op[32];
    snprintf(op, sizeof op, "%s_", nb_op_name(id));
    nb_tensor *in[2] = {x, (nb_tensor *)other};
    if (!check_written(op, 2, in, 1)) return nb_last_status();
    if (overlaps_itself(x))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: more than one element of x refers to a single memory location",
                            op);
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(other->ndim, other->shape, x->ndim, x->shape, &nd, shape) || nd != x->ndim ||
        nb_shape_numel(nd, shape) != nb_numel(x))
        return nb_set_error(NB_ERR_SHAPE, "%s: other %s does not broadcast to x %s", op,
                            nb_fmt_shape(other->ndim, other->shape, (char[NB_SHAPE_BUF]){0}, NB_SHAPE_BUF),
                            nb_fmt_shape(x->ndim, x->shape, (char[NB_SHAPE_BUF]){0}, NB_SHAPE_BUF));
    nb_dtype r = nb_promote_types(x->dtype, other->dtype);
    if (kop == NB_BINARY_DIV && r != NB_DTYPE_COUNT && !nb_dtype_is_float(r)) r = NB_F32; /* true division */
    if (r == NB_DTYPE_COUNT || nb_dtype_category(r) > nb_dtype_category(x->dtype))
        return nb_set_error(NB_ERR_DTYPE, "%s: the result type %s cannot be stored in x's %s", op,
                            r == NB_DTYPE_COUNT ? "?" : nb_dtype_name(r), nb_dtype_name(x->dtype));
    if (nb_numel(x) == 0) return NB_OK;
    /* the binary kernel's contract checks the dtypes (it also takes the
     * 16-bit floats for maximum/minimum, which the ops' rows do not list) */
    nb_scope *s = nb_op_scope_begin();
    nb_status st;
    if (r == x->dtype && nb_is_contiguous(x)) {
        /* the kernel writes x in place (out == a is allowed); other in x's
         * dtype is exact (r is x's dtype) */
        const nb_tensor *o = other->dtype == r ? other : nb_to_dtype((nb_tensor *)other, r);
        if (!o)
            st = nb_last_status();
        else {
            nb_kview xv = nb_kview_of(x), ov = nb_kview_expand(o, x->ndim, x->shape);
            nb_bump_version(x);
            st = nb_kernel_binary(NB_BE(x), kop, &xv, &xv, &ov);
        }
    } else { /* computed in the promoted type (PyTorch's rule), then stored into x */
        nb_tensor *y = out_of_place(x, (nb_tensor *)other);
        st = y ? nb_copy_(x, y) : nb_last_status();
    }
    nb_scope_end(s);
    return st;
}

nb_status nb_add_(nb_tensor *x, const nb_tensor *other) { return binary_(NB_OP_ADD, NB_BINARY_ADD, nb_add, x, other); }
nb_status nb_sub_(nb_tensor *x, const nb_tensor *other) { return binary_(NB_OP_SUB, NB_BINARY_SUB, nb_sub, x, other); }
nb_status nb_mul_(nb_tensor *x, const nb_tensor *other) { return binary_(NB_OP_MUL, NB_BINARY_MUL, nb_mul, x, other); }
nb_status nb_div_(nb_tensor *x, const nb_tensor *other) { return binary_(NB_OP_DIV, NB_BINARY_DIV, nb_div, x, other); }
nb_status nb_maximum_(nb_tensor *x, const nb_tensor *other) {
    return binary_(NB_OP_MAXIMUM, NB_BINARY_MAXIMUM, nb_maximum, x, other);
}
nb_status nb_minimum_(nb_tensor *x, const nb_tensor *other) {
    return binary_(NB_OP_MINIMUM, NB_BINARY_MINIMUM, nb_minimum, x, other);
}

nb_status nb_mul_scalar_(nb_tensor *x, double s) {
    if (!check_written("mul_scalar_", 1, &x, 1)) return nb_last_status();
    if (overlaps_itself(x))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "mul_scalar_: more than one element of x refers to a single memory location");
    nb_dtype r = nb_scalar_result_type(x, s);
    if (nb_dtype_category(r) > nb_dtype_category(x->dtype))
        return nb_set_error(NB_ERR_DTYPE, "mul_scalar_: the result type %s of x * %g cannot be stored in x's %s",
                            nb_dtype_name(r), s, nb_dtype_name(x->dtype));
    if (nb_numel(x) == 0) return NB_OK;
    if (!nb_is_contiguous(x)) {
        nb_scope *sc = nb_op_scope_begin();
        nb_tensor *y = nb_mul_scalar(x, s);
        nb_status st = y ? nb_copy_(x, y) : nb_last_status();
        nb_scope_end(sc);
        return st;
    }
    nb_kview v = nb_kview_of(x);
    nb_bump_version(x);
    return nb_kernel_unary(NB_BE(x), NB_UNARY_MUL_SCALAR, &v, &v, s);
}

/* ---- out= forms ------------------------------------------------------------- */

nb_status nb_index_select_out(nb_tensor *out, const nb_tensor *x, int dim, const nb_tensor *index) {
    nb_tensor *in[3] = {out, (nb_tensor *)x, (nb_tensor *)index};
    if (!check_written("index_select_out", 3, in, 1)) return nb_last_status();
    if (nb_is_grad_enabled() && x->requires_grad)
        return nb_set_error(NB_ERR_STATE, "index_select_out: out= does not record autograd, and x requires grad");
    int d = nb_wrap_dim(dim, x->ndim);
    if (d < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "index_select_out: dim %d out of range for %d dims", dim, x->ndim);
    if (!nb_check_supported(NB_OP_INDEX_SELECT, x->dtype, x)) return nb_last_status();
    nb_kview ov = nb_kview_of(out), xv = nb_kview_of(x), iv = nb_kview_of(index);
    nb_bump_version(out);
    return nb_kernel_index_select(NB_BE(out), &ov, &xv, d, &iv);
}

/* ---- multi-tensor ops ------------------------------------------------------- */

/* n tensors given, on one device: the list checks of the multi-tensor forms. */
static bool check_list(const char *op, int n, nb_tensor *const *xs, int n_written) {
    if (n < 0 || (n > 0 && !xs)) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: bad tensor list (n %d, list %s)", op, n, xs ? "given" : "NULL");
        return false;
    }
    return n == 0 ? nb_check_inputs(op, 0, NULL) : check_written(op, n, xs, n_written);
}

/* Whether xs are contiguous and of one dtype (the multi-tensor slots' contract). */
static bool uniform(int n, nb_tensor *const *xs) {
    for (int i = 0; i < n; i++)
        if (xs[i]->dtype != xs[0]->dtype || !nb_is_contiguous(xs[i])) return false;
    return true;
}

/* |x|: relu(x) + relu(-x) is exact (one term is 0). */
static nb_tensor *abs_of(nb_tensor *x) { return nb_add(nb_relu(x), nb_relu(nb_neg(x))); }

/* The p-norm of x's elements (0-dim) with ops, in the order of the
 * multi-tensor kernels. */
static nb_tensor *vector_norm(nb_tensor *x, double p) {
    if (nb_dtype_size(nb_dtype_of(x)) == 2) /* 16-bit: in float32, rounded once at the end */
        return nb_to_dtype(vector_norm(nb_to_dtype(x, NB_F32), p), nb_dtype_of(x));
    if (nb_numel(x) == 0) return nb_scalar_like(x, 0.0, x->dtype); /* torch.norm of an empty tensor is 0 */
    if (isinf(p)) { /* max |x| = max(amax(x), amax(-x)); NaN propagates */
        nb_tensor *hi = nb_max(x, NULL, 0, false), *lo = hi ? nb_max(nb_neg(x), NULL, 0, false) : NULL;
        return lo ? nb_max(nb_stack((nb_tensor *[]){hi, lo}, 2, 0), NULL, 0, false) : NULL;
    }
    if (p == 2.0) return nb_sqrt(nb_sum(nb_mul(x, x), NULL, 0, false));
    if (p == 1.0) return nb_sum(abs_of(x), NULL, 0, false);
    return nb_pow_scalar(nb_sum(nb_pow_scalar(abs_of(x), p), NULL, 0, false), 1.0 / p);
}

nb_tensor *nb_foreach_norm(nb_tensor *const *xs, int n, double ord) {
    if (!check_list("foreach_norm", n, xs, 0)) return NULL;
    if (n <= 0) return NB_FAIL(NB_ERR_INVALID_ARG, "foreach_norm: no tensors");
    if (!(ord > 0)) return NB_FAIL(NB_ERR_INVALID_ARG, "foreach_norm: ord %g must be > 0", ord);
    for (int i = 0; i < n; i++)
        if (xs[i]->dtype != xs[0]->dtype || !nb_dtype_is_float(xs[i]->dtype))
            return NB_FAIL(NB_ERR_DTYPE, "foreach_norm: needs tensors of one float dtype (tensor %d is %s, tensor 0 %s)",
                           i, nb_dtype_name(xs[i]->dtype), nb_dtype_name(xs[0]->dtype));
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *out = NULL;
    nb_backend *be = NB_BE(xs[0]);
    bool wide = xs[0]->dtype == NB_F32 || xs[0]->dtype == NB_F64; /* what the multi-tensor kernels take */
    if (nb_kernel_has(be, norm_multi) && wide && uniform(n, xs)) { /* one launch */
        nb_kview *v = malloc(sizeof *v * (size_t)n);
        out = v ? nb_tensor_new(1, (int64_t[]){n}, xs[0]->dtype, xs[0]->storage->device)
                : NB_FAIL(NB_ERR_OOM, "foreach_norm: out of host memory");
        if (out) {
            for (int i = 0; i < n; i++) v[i] = nb_kview_of(xs[i]);
            nb_kview vo = nb_kview_of(out);
            if (nb_kernel_norm_multi(be, n, v, ord, &vo)) out = NULL;
        }
        free(v);
    } else { /* a norm per tensor, recording nothing */
        bool prev = nb_set_grad_enabled(false);
        nb_tensor **norms = malloc(sizeof *norms * (size_t)n);
        if (!norms) out = NB_FAIL(NB_ERR_OOM, "foreach_norm: out of host memory");
        bool ok = norms != NULL;
        for (int i = 0; i < n && ok; i++) ok = (norms[i] = vector_norm(xs[i], ord)) != NULL;
        if (ok) out = nb_stack(norms, n, 0);
        free(norms);
        nb_set_grad_enabled(prev);
    }
    return nb_scope_return(s, out);
}

nb_status nb_foreach_mul_(nb_tensor *const *xs, int n, const nb_tensor *s) {
    if (!check_list("foreach_mul_", n, xs, n)) return nb_last_status();
    if (!s || nb_numel(s) != 1 || !nb_same_device(s->storage->device, n ? xs[0]->storage->device : s->storage->device))
        return nb_set_error(NB_ERR_INVALID_ARG, "foreach_mul_: the factor must be one element on the tensors' device");
    if (n <= 0) return NB_OK;
    nb_backend *be = NB_BE(xs[0]);
    bool multi = nb_kernel_has(be, mul_multi) && uniform(n, xs) && s->dtype == xs[0]->dtype;
    for (int i = 0; i < n && multi; i++) multi = !overlaps_itself(xs[i]);
    if (multi) { /* one launch for every tensor */
        nb_kview *v = malloc(sizeof *v * (size_t)n);
        if (!v) return nb_set_error(NB_ERR_OOM, "foreach_mul_: out of host memory");
        for (int i = 0; i < n; i++) v[i] = nb_kview_of(xs[i]), nb_bump_version(xs[i]);
        nb_kview vs = nb_kview_of(s);
        nb_status st = nb_kernel_mul_multi(be, n, v, &vs);
        free(v);
        return st;
    }
    nb_scope *sc = nb_op_scope_begin();
    nb_tensor *s0 = nb_reshape((nb_tensor *)s, 0, NULL);
    nb_status st = s0 ? NB_OK : nb_last_status();
    for (int i = 0; i < n && st == NB_OK; i++) { /* the factor in each tensor's dtype, then x *= it */
        nb_tensor *c = s0->dtype == xs[i]->dtype ? s0 : nb_to_dtype(s0, xs[i]->dtype);
        st = c ? nb_mul_(xs[i], c) : nb_last_status();
    }
    nb_scope_end(sc);
    return st;
}

/* ---- fused optimizer steps -------------------------------------------------- */

/* The groups i of an optimizer step: lists[k][i] for the k lists given
 * (optional lists NULL), all on one device; the last list (the gradients)
 * is read, the others written in place. */
static bool check_groups(const char *op, int n, int n_lists, nb_tensor *const *const *lists) {
    if (n < 0) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: %d parameters", op, n);
        return false;
    }
    for (int k = 0; k < n_lists; k++)
        if (lists[k] && !check_list(op, n, lists[k], k < n_lists - 1 ? n : 0)) return false;
    for (int k = 1; k < n_lists; k++)
        for (int i = 0; lists[k] && i < n; i++)
            if (!nb_same_device(lists[k][i]->storage->device, lists[0][i]->storage->device)) {
                nb_set_error(NB_ERR_DEVICE, "%s: the tensors of parameter %d are on different devices", op, i);
                return false;
            }
    return true;
}

/* Views of list[0..n) into v (a NULL list gives NULL). */
static nb_kview *views(nb_tensor *const *list, int n, nb_kview *v) {
    if (!list) return NULL;
    for (int i = 0; i < n; i++) v[i] = nb_kview_of(list[i]);
    return v;
}

enum { GROUP_MAX = 64 }; /* tensors per multi-tensor launch */

/* The autocast copies (cast_copy) of params[0..k) as views into v, of the
 * first copy's dtype (a call's copies share one): v[i].data NULL where
 * parameter i has none; NULL when none has one. */
static nb_kview *copy_views(nb_tensor *const *params, int k, nb_kview *v) {
    bool any = false;
    nb_dtype dt = NB_BF16;
    for (int i = 0; i < k; i++) {
        const nb_tensor *c = params[i]->cast_copy;
        v[i] = (nb_kview){0};
        if (!c || (any && c->dtype != dt)) continue;
        v[i] = nb_kview_of(c), dt = c->dtype, any = true;
    }
    return any ? v : NULL;
}

nb_status nb_fused_adam_(int n, nb_tensor *const *params, nb_tensor *const *grads, nb_tensor *const *exp_avgs,
                         nb_tensor *const *exp_avg_sqs, nb_tensor *const *max_exp_avg_sqs, const nb_adam_hyper *h) {
    if (!params || !grads || !exp_avgs || !exp_avg_sqs || !h)
        return nb_set_error(NB_ERR_INVALID_ARG, "fused_adam_: NULL argument");
    if (h->amsgrad != (max_exp_avg_sqs != NULL))
        return nb_set_error(NB_ERR_INVALID_ARG, "fused_adam_: max_exp_avg_sqs is given exactly when amsgrad is set");
    nb_tensor *const *lists[] = {params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, grads};
    if (!check_groups("fused_adam_", n, 5, lists)) return nb_last_status();
    if (n == 0) return NB_OK;
    for (int i = 0; i < n; i++) { /* in-place writes (the storages' version counters) */
        nb_bump_version(params[i]), nb_bump_version(exp_avgs[i]), nb_bump_version(exp_avg_sqs[i]);
        if (max_exp_avg_sqs) nb_bump_version(max_exp_avg_sqs[i]);
    }
    nb_backend *be = NB_BE(params[0]);
    bool multi = nb_kernel_has(be, adam_step_multi);
    for (int i = 0; i < n && multi; i++) /* updated here with their autocast copies: autocast keeps them */
        if (params[i]->dtype == NB_F32) params[i]->keep_cast = true;
    if (!multi || (n == 1 && !h->lr_dev && !h->step_dev && !params[0]->cast_copy)) {
        if (h->lr_dev || h->step_dev)
            return nb_set_error(NB_ERR_UNSUPPORTED, "fused_adam_: the capturable form needs a multi-tensor kernel");
        for (int i = 0; i < n; i++) {
            nb_kview p = nb_kview_of(params[i]), g = nb_kview_of(grads[i]), m = nb_kview_of(exp_avgs[i]),
                     v = nb_kview_of(exp_avg_sqs[i]), mx = {0};
            if (max_exp_avg_sqs) mx = nb_kview_of(max_exp_avg_sqs[i]);
            nb_status st = nb_kernel_adam_step(be, &p, &g, &m, &v, max_exp_avg_sqs ? &mx : NULL, h);
            if (st) return st;
        }
        return NB_OK;
    }
    nb_kview p[GROUP_MAX], g[GROUP_MAX], m[GROUP_MAX], v[GROUP_MAX], mx[GROUP_MAX], cp[GROUP_MAX];
    for (int i = 0; i < n; i += GROUP_MAX) {
        int k = n - i < GROUP_MAX ? n - i : GROUP_MAX;
        nb_adam_hyper hi = *h;
        if (h->step_dev) hi.step_dev = h->step_dev + i;
        nb_kview *copies = copy_views(params + i, k, cp);
        nb_status st = nb_kernel_adam_step_multi(be, k, views(params + i, k, p), views(grads + i, k, g),
                                                 views(exp_avgs + i, k, m), views(exp_avg_sqs + i, k, v),
                                                 max_exp_avg_sqs ? views(max_exp_avg_sqs + i, k, mx) : NULL, copies,
                                                 &hi);
        if (st) return st;
        for (int j = 0; copies && j < k; j++) { /* the copies hold the new values */
            nb_tensor *t = params[i + j];
            if (!cp[j].data) continue;
            nb_bump_version(t->cast_copy);
            t->cast_version = nb_version_of(t);
        }
    }
    return NB_OK;
}

nb_status nb_fused_sgd_(int n, nb_tensor *const *params, nb_tensor *const *grads, nb_tensor *const *momentum_bufs,
                        const nb_sgd_hyper *h) {
    if (!params || !grads || !h) return nb_set_error(NB_ERR_INVALID_ARG, "fused_sgd_: NULL argument");
    nb_tensor *const *lists[] = {params, momentum_bufs, grads};
    if (!check_groups("fused_sgd_", n, 3, lists)) return nb_last_status();
    if (n == 0) return NB_OK;
    for (int i = 0; i < n; i++) {
        nb_bump_version(params[i]);
        if (momentum_bufs) nb_bump_version(momentum_bufs[i]);
    }
    nb_backend *be = NB_BE(params[0]);
    if (!nb_kernel_has(be, sgd_step_multi) || (n == 1 && !h->lr_dev)) {
        if (h->lr_dev)
            return nb_set_error(NB_ERR_UNSUPPORTED, "fused_sgd_: the capturable form needs a multi-tensor kernel");
        for (int i = 0; i < n; i++) {
            nb_kview p = nb_kview_of(params[i]), g = nb_kview_of(grads[i]), b = {0};
            if (momentum_bufs) b = nb_kview_of(momentum_bufs[i]);
            nb_status st = nb_kernel_sgd_step(be, &p, &g, momentum_bufs ? &b : NULL, h);
            if (st) return st;
        }
        return NB_OK;
    }
    nb_kview p[GROUP_MAX], g[GROUP_MAX], b[GROUP_MAX];
    for (int i = 0; i < n; i += GROUP_MAX) {
        int k = n - i < GROUP_MAX ? n - i : GROUP_MAX;
        nb_status st = nb_kernel_sgd_step_multi(be, k, views(params + i, k, p), views(grads + i, k, g),
                                                momentum_bufs ? views(momentum_bufs + i, k, b) : NULL, h);
        if (st) return st;
    }
    return NB_OK;
}
