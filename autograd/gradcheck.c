/* gradcheck.c - compares autograd's gradients with float64 central
 * differences, as torch.autograd.gradcheck (eps 1e-6, atol 1e-5, rtol 1e-3).
 * The scalar checked is sum(f(inputs) * v) for a fixed random v, so every
 * output element's gradient is exercised at once. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

typedef struct {
    nb_gradcheck_fn f;
    nb_tensor *const *in;
    int n;
    void *ctx;
    nb_tensor *v; /* random weights of the output elements */
} gc_problem;

/* sum(f(in) * v) as a double; NAN (with the error kept) if f fails. */
static double objective(gc_problem *p) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *y = p->f(p->in, p->n, p->ctx);
    double r = NAN;
    if (y && !p->v) {
        nb_generator g = nb_generator_new(0x5eed);
        p->v = nb_tensor_new_unscoped(y->ndim, y->shape, NB_F64, y->storage->device);
        if (p->v && nb_uniform_(p->v, 0.5, 1.5, &g) != NB_OK) p->v = NULL;
    }
    if (y && p->v) r = nb_item(nb_sum(nb_mul(nb_to_dtype(y, NB_F64), p->v), NULL, 0, false));
    nb_scope_end(s);
    return r;
}

static nb_status analytical(gc_problem *p) {
    nb_scope *s = nb_op_scope_begin();
    for (int i = 0; i < p->n; i++) nb_tensor_zero_grad(p->in[i]);
    nb_tensor *y = p->f(p->in, p->n, p->ctx);
    nb_tensor *l = y && p->v ? nb_sum(nb_mul(nb_to_dtype(y, NB_F64), p->v), NULL, 0, false) : NULL;
    /* an output that does not depend on the inputs through the graph (a
     * piecewise-constant op, the zero second derivative of floor): the
     * analytical gradient is 0, as PyTorch's gradcheck takes it */
    nb_status st = !l ? nb_last_status() : nb_requires_grad(l) ? nb_backward(l) : NB_OK;
    nb_scope_end(s);
    return st;
}

static nb_status check_input(gc_problem *p, int i, const nb_gradcheck_options *o) {
    nb_tensor *x = p->in[i];
    int64_t n = nb_numel(x);
    double *val = malloc(sizeof(double) * (size_t)(n ? n : 1)), *ana = calloc((size_t)(n ? n : 1), sizeof(double));
    nb_status st = val && ana ? nb_to_host(x, val, sizeof(double) * (size_t)n) : NB_ERR_OOM;
    if (st == NB_OK && x->grad) st = nb_to_host(x->grad, ana, sizeof(double) * (size_t)n);
    for (int64_t j = 0; st == NB_OK && j < n; j++) {
        double orig = val[j];
        bool prev = nb_set_grad_enabled(false);
        val[j] = orig + o->eps;
        nb_copy_from_host(x, val, sizeof(double) * (size_t)n);
        double fp = objective(p);
        val[j] = orig - o->eps;
        nb_copy_from_host(x, val, sizeof(double) * (size_t)n);
        double fm = objective(p);
        val[j] = orig;
        nb_copy_from_host(x, val, sizeof(double) * (size_t)n);
        nb_set_grad_enabled(prev);
        double num = (fp - fm) / (2 * o->eps);
        if (!(fabs(ana[j] - num) <= o->atol + o->rtol * fabs(num)))
            st = nb_set_error(NB_ERR_MISMATCH, "gradcheck: input %d element %lld: analytical %.10g, numerical %.10g", i,
                              (long long)j, ana[j], num);
    }
    free(val);
    free(ana);
    return st;
}

/* torch.autograd.gradcheck's eps 1e-6, atol 1e-5, rtol 1e-3 where a field is
 * left 0 (NB_ZERO asks for an exact 0 tolerance). */
static nb_gradcheck_options options_of(const nb_gradcheck_options *opts) {
    nb_gradcheck_options o = opts ? *opts : (nb_gradcheck_options){0};
    return (nb_gradcheck_options){nb_option(o.eps, 1e-6), nb_option(o.atol, 1e-5), nb_option(o.rtol, 1e-3)};
}

nb_status nb_gradcheck(nb_gradcheck_fn f, nb_tensor *const *inputs, int n_inputs, void *ctx,
                       const nb_gradcheck_options *opts) {
    nb_gradcheck_options o = options_of(opts);
    if (!f || !inputs || n_inputs < 1) return nb_set_error(NB_ERR_INVALID_ARG, "gradcheck: bad arguments");
    if (!(o.eps > 0)) return nb_set_error(NB_ERR_INVALID_ARG, "gradcheck: eps %g must be > 0", o.eps);
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "gradcheck: input %d is NULL", i);
        if (inputs[i]->requires_grad && (inputs[i]->dtype != NB_F64 || !nb_is_contiguous(inputs[i])))
            return nb_set_error(NB_ERR_DTYPE, "gradcheck: input %d must be a contiguous float64 tensor", i);
    }
    gc_problem p = {f, inputs, n_inputs, ctx, NULL};
    nb_status st = isnan(objective(&p)) ? nb_last_status() : NB_OK;
    if (st == NB_OK) st = analytical(&p);
    for (int i = 0; st == NB_OK && i < n_inputs; i++)
        if (inputs[i]->requires_grad) st = check_input(&p, i, &o);
    nb_release(p.v);
    if (st == NB_OK) {
        for (int i = 0; i < n_inputs; i++) nb_tensor_zero_grad(inputs[i]);
    }
    return st;
}

/* ---- gradgradcheck ------------------------------------------------------------ */

typedef struct {
    nb_gradcheck_fn f;
    void *ctx;
    int n; /* f's inputs; the checked function takes one more, u */
} gg_problem;

/* (inputs, u) -> the gradients of <f(inputs), u> with respect to the inputs
 * that require grad, flattened and concatenated, with their graph. */
static nb_tensor *gg_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    gg_problem *p = ctx;
    bool prev = nb_set_grad_enabled(true); /* gradcheck's finite differences run with grad mode off */
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *r = NULL, *y = p->f(in, p->n, p->ctx), *u = in[p->n];
    nb_tensor *yd = y && y->dtype != NB_F64 ? nb_to_dtype(y, NB_F64) : y;
    nb_tensor **req = calloc((size_t)p->n, sizeof *req), **g = calloc((size_t)p->n, sizeof *g);
    int k = 0;
    for (int i = 0; req && i < p->n; i++)
        if (in[i]->requires_grad) req[k++] = in[i];
    nb_grad_options o = {.create_graph = true, .materialize_grads = true};
    if (yd && req && g && nb_grad(&yd, &u, 1, req, k, g, &o) == NB_OK) {
        for (int i = 0; i < k && g[i]; i++) g[i] = nb_reshape(g[i], 1, (int64_t[]){-1});
        r = k && g[k - 1] ? nb_cat(g, k, 0) : NULL;
    } else if (!req || !g)
        nb_set_error(NB_ERR_OOM, "gradgradcheck: out of host memory");
    free(req), free(g);
    r = nb_scope_return(s, r);
    nb_set_grad_enabled(prev);
    return r;
}

/* The gradients of <f(in), u> computed with and without create_graph
 * agree: a rule's recorded form (what the double backward differentiates)
 * computes the same gradient as its first-order kernels. */
static nb_status same_first_order(gg_problem *p, nb_tensor *const *in, nb_tensor *u, const nb_gradcheck_options *o) {
    nb_scope *s = nb_op_scope_begin();
    nb_status st = NB_OK;
    for (int i = 0; i < p->n && st == NB_OK; i++) {
        if (!in[i]->requires_grad) continue;
        nb_tensor *g[2] = {NULL, NULL};
        for (int k = 0; k < 2 && st == NB_OK; k++) {
            nb_tensor *y = p->f(in, p->n, p->ctx);
            nb_tensor *yd = y && y->dtype != NB_F64 ? nb_to_dtype(y, NB_F64) : y;
            nb_grad_options go = {.create_graph = k == 1, .materialize_grads = true};
            st = yd ? nb_grad(&yd, &u, 1, &in[i], 1, &g[k], &go) : nb_last_status();
        }
        int64_t n = st == NB_OK ? nb_numel(g[0]) : 0;
        double *a = malloc(sizeof(double) * (size_t)(n ? n : 1)), *b = malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (st == NB_OK && (!a || !b)) st = nb_set_error(NB_ERR_OOM, "gradgradcheck: out of host memory");
        if (st == NB_OK) st = nb_to_host(nb_to_dtype(g[0], NB_F64), a, sizeof(double) * (size_t)n);
        if (st == NB_OK) st = nb_to_host(nb_to_dtype(g[1], NB_F64), b, sizeof(double) * (size_t)n);
        for (int64_t j = 0; st == NB_OK && j < n; j++)
            if (!(fabs(b[j] - a[j]) <= o->atol + o->rtol * fabs(a[j])) && !(isnan(a[j]) && isnan(b[j])))
                st = nb_set_error(NB_ERR_MISMATCH, "gradgradcheck: input %d element %lld: the gradient recorded under "
                                  "create_graph is %.10g, the first-order one %.10g", i, (long long)j, b[j], a[j]);
        free(a), free(b);
    }
    nb_scope_end(s);
    return st;
}

nb_status nb_gradgradcheck(nb_gradcheck_fn f, nb_tensor *const *inputs, int n_inputs, void *ctx,
                           const nb_gradcheck_options *opts) {
    if (!f || !inputs || n_inputs < 1) return nb_set_error(NB_ERR_INVALID_ARG, "gradgradcheck: bad arguments");
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "gradgradcheck: input %d is NULL", i);
    nb_tensor **all = calloc((size_t)n_inputs + 1, sizeof *all);
    if (!all) return nb_set_error(NB_ERR_OOM, "gradgradcheck: out of host memory");
    nb_scope *s = nb_op_scope_begin();
    nb_status st = NB_OK;
    nb_tensor *y = NULL;
    NB_NO_GRAD { y = f(inputs, n_inputs, ctx); }
    nb_tensor *u = y ? nb_tensor_new(y->ndim, y->shape, NB_F64, y->storage->device) : NULL;
    nb_generator g = nb_generator_new(0x96ad);
    if (!u || nb_uniform_(u, -1.0, 1.0, &g) != NB_OK || nb_set_requires_grad(u, true) != NB_OK)
        st = nb_last_status();
    gg_problem p = {f, ctx, n_inputs};
    nb_gradcheck_options o = options_of(opts);
    if (st == NB_OK) st = same_first_order(&p, inputs, u, &o);
    if (st == NB_OK) {
        memcpy(all, inputs, sizeof *all * (size_t)n_inputs);
        all[n_inputs] = u;
        st = nb_gradcheck(gg_fn, all, n_inputs + 1, &p, &o);
    }
    nb_scope_end(s);
    free(all);
    return st;
}
