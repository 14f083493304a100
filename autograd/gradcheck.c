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
    nb_status st = l ? nb_backward(l) : nb_last_status();
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

nb_status nb_gradcheck(nb_gradcheck_fn f, nb_tensor *const *inputs, int n_inputs, void *ctx,
                       const nb_gradcheck_options *opts) {
    nb_gradcheck_options o = {1e-6, 1e-5, 1e-3};
    if (opts) o = *opts;
    if (!f || !inputs || n_inputs < 1) return nb_set_error(NB_ERR_INVALID_ARG, "gradcheck: bad arguments");
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
