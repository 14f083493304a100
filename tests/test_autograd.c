/* test_autograd.c - the tape: gradients of small graphs computed by hand,
 * accumulation across backward calls, backward twice (NB_ERR_STATE),
 * non-scalar outputs, grad mode, detach, tensors used twice, diamonds,
 * the tape being freed by backward and by scope end, and gradcheck
 * itself catching a wrong gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"
#include "nb_test.h"
#include "suites.h"

static size_t allocated_now(void) { return nb_memory_stats_get(NB_CPU).allocated; }

static nb_tensor *leaf(int ndim, const int64_t *shape, const double *v) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

START_TEST(test_simple_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = leaf(NB_SHAPE(3), (double[]){1, 2, 3});
    ck_assert(nb_is_leaf(w) && nb_requires_grad(w));
    ck_assert_ptr_null(nb_tensor_grad(w));
    nb_tensor *sq = nb_mul(w, w);
    ck_assert(!nb_is_leaf(sq) && nb_requires_grad(sq));
    nb_tensor *loss = nb_sum(sq, NULL, 0, false);
    ck_assert_double_eq(nb_item(loss), 14);
    NB_CK_OK(nb_backward(loss));
    nb_ck_close(nb_tensor_grad(w), (double[]){2, 4, 6}, 3, 0, 1e-15);
    nb_ck_shape(nb_tensor_grad(w), 1, (int64_t[]){3});
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(w)), NB_F64);
    ck_assert_ptr_null(nb_tensor_grad(sq)); /* non-leaves keep no .grad, as PyTorch */
    /* ops on tensors that do not require grad record nothing */
    nb_tensor *c = nb_ones(NB_SHAPE(3), NB_F64);
    nb_tensor *d = nb_mul(c, c);
    ck_assert(!nb_requires_grad(d) && nb_is_leaf(d));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_grad_accumulates) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = leaf(NB_SHAPE(3), (double[]){1, 2, 3});
    for (int k = 1; k <= 3; k++) {
        nb_scope *it = nb_scope_begin();
        NB_CK_OK(nb_backward(nb_sum(nb_mul(w, w), NULL, 0, false))); /* a new graph each time */
        nb_scope_end(it);
        nb_ck_close(nb_tensor_grad(w), (double[]){2.0 * k, 4.0 * k, 6.0 * k}, 3, 0, 1e-15);
    }
    /* a different graph adds its own gradient: d(sum(3w))/dw = 3 */
    NB_CK_OK(nb_backward(nb_sum(nb_mul_scalar(w, 3), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(w), (double[]){9, 15, 21}, 3, 0, 1e-15);
    nb_tensor_zero_grad(w);
    ck_assert_ptr_null(nb_tensor_grad(w));
    NB_CK_OK(nb_backward(nb_sum(nb_mul_scalar(w, 3), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(w), (double[]){3, 3, 3}, 3, 0, 1e-15);
    nb_tensor_zero_grad(w);
    nb_tensor_zero_grad(w); /* no grad: nothing to do */
    nb_tensor_zero_grad(NULL);
    ck_assert_ptr_null(nb_tensor_grad(w));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_backward_twice_fails) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = leaf(NB_SHAPE(2), (double[]){1, -1});
    nb_tensor *loss = nb_sum(nb_exp(nb_mul(w, w)), NULL, 0, false);
    NB_CK_OK(nb_backward(loss));
    nb_ck_close(nb_tensor_grad(w), (double[]){2 * exp(1.0), -2 * exp(1.0)}, 2, 0, 1e-14);
    NB_CK_FAILS(nb_backward(loss) == NB_OK, NB_ERR_STATE);
    /* the failed backward leaves the gradient as it was */
    nb_ck_close(nb_tensor_grad(w), (double[]){2 * exp(1.0), -2 * exp(1.0)}, 2, 0, 1e-14);
    /* a graph sharing the freed part fails too (PyTorch without retain_graph) */
    nb_tensor *y = nb_mul_scalar(w, 2);
    nb_tensor *l1 = nb_sum(y, NULL, 0, false), *l2 = nb_sum(nb_exp(y), NULL, 0, false);
    NB_CK_OK(nb_backward(l1));
    NB_CK_FAILS(nb_backward(l2) == NB_OK, NB_ERR_STATE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_backward_non_scalar) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, 2, 3});
    nb_tensor *y = nb_mul_scalar(x, 3);
    NB_CK_FAILS(nb_backward(y) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "backward"));
    /* a wrong explicit gradient */
    NB_CK_FAILS(nb_backward_with(y, nb_ones(NB_SHAPE(2), NB_F64)) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_backward_with(y, nb_ones(NB_SHAPE(3), NB_F32)) == NB_OK, NB_ERR_DTYPE); /* issue 13 */
    /* same ndim and numel but another shape: [2, 3] is not a gradient of [3, 2] */
    nb_tensor *m = nb_reshape(nb_mul_scalar(nb_expand(nb_reshape(x, NB_SHAPE(3, 1)), NB_SHAPE(3, 2)), 1), NB_SHAPE(3, 2));
    NB_CK_FAILS(nb_backward_with(m, nb_ones(NB_SHAPE(2, 3), NB_F64)) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_null(nb_tensor_grad(x));
    nb_tensor *l32 = leaf(NB_SHAPE(3, 2), (double[]){1, 2, 3, 4, 5, 6});
    NB_CK_FAILS(nb_backward_with(l32, nb_ones(NB_SHAPE(2, 3), NB_F64)) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_null(nb_tensor_grad(l32));
    nb_tensor *r32 = nb_reshape(nb_mul_scalar(nb_reshape(l32, NB_SHAPE(6)), 2), NB_SHAPE(3, 2));
    NB_CK_FAILS(nb_backward_with(r32, nb_ones(NB_SHAPE(2, 3), NB_F64)) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_null(nb_tensor_grad(l32));
    NB_CK_OK(nb_backward_with(y, nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(nb_tensor_grad(x), (double[]){3, 6, 9}, 3, 0, 1e-15);
    /* a one-element non-0-d output is a valid seed */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(nb_sum(x, (int[]){0}, 1, true)));
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 1, 1}, 3, 0, 0);
    /* output that needs no grad */
    NB_CK_FAILS(nb_backward(nb_scalar(1, NB_F64)) == NB_OK, NB_ERR_STATE);
    NB_CK_FAILS(nb_backward(NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* Backward on a leaf itself: its gradient is the seed. The leaf's .grad must
 * not alias the caller's seed tensor (a later accumulation would write into it). */
START_TEST(test_backward_on_leaf) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, 2, 3});
    nb_tensor *g = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 1, 1});
    NB_CK_OK(nb_backward_with(x, g));
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 1, 1}, 3, 0, 0);
    NB_CK_OK(nb_backward_with(x, g));
    nb_ck_close(nb_tensor_grad(x), (double[]){2, 2, 2}, 3, 0, 0);
    nb_ck_close(g, (double[]){1, 1, 1}, 3, 0, 0);
    nb_tensor *sc = leaf(0, NULL, (double[]){5});
    NB_CK_OK(nb_backward(sc));
    ck_assert_double_eq(nb_item(nb_tensor_grad(sc)), 1);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_no_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    ck_assert(nb_is_grad_enabled());
    nb_tensor *y = NULL;
    NB_NO_GRAD {
        ck_assert(!nb_is_grad_enabled());
        y = nb_exp(nb_mul(x, x));
    }
    ck_assert(nb_is_grad_enabled());
    ck_assert(!nb_requires_grad(y) && nb_is_leaf(y));
    nb_ck_close(y, (double[]){exp(1.0), exp(4.0)}, 2, 0, 1e-12);
    NB_CK_FAILS(nb_backward(nb_sum(y, NULL, 0, false)) == NB_OK, NB_ERR_STATE);

    bool prev = nb_set_grad_enabled(false);
    ck_assert(prev);
    ck_assert(!nb_set_grad_enabled(false)); /* nesting: the previous mode was off */
    nb_tensor *z = nb_matmul(x, x);
    ck_assert(!nb_requires_grad(z));
    nb_tensor *v = nb_transpose(nb_unsqueeze(x, 0), 0, 1);
    ck_assert(!nb_requires_grad(v) && nb_is_leaf(v));
    nb_set_grad_enabled(prev);
    ck_assert(nb_is_grad_enabled());
    ck_assert(nb_requires_grad(nb_add(x, x)));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_detach) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, 2, 3});
    nb_tensor *y = nb_mul_scalar(x, 2);
    nb_tensor *d = nb_detach(y);
    ck_assert(!nb_requires_grad(d) && nb_is_leaf(d));
    nb_ck_close(d, (double[]){2, 4, 6}, 3, 0, 0);
    /* d(x * detach(x))/dx = detach(x): the detached factor is a constant */
    nb_tensor *loss = nb_sum(nb_mul(x, nb_detach(x)), NULL, 0, false);
    NB_CK_OK(nb_backward(loss));
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 2, 3}, 3, 0, 0);
    /* detach shares storage */
    nb_tensor *dx = nb_detach(x);
    NB_CK_OK(nb_fill_(dx, 7));
    nb_ck_close(x, (double[]){7, 7, 7}, 3, 0, 0);
    ck_assert_ptr_null(nb_detach(NULL));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_used_twice) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, -2, 0.5});
    /* sum(x*x + (x+x)): grad 2x + 2 */
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_mul(x, x), nb_add(x, x)), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){4, -2, 3}, 3, 0, 1e-15);
    nb_tensor_zero_grad(x);
    /* x - x has zero gradient; x / x too */
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_sub(x, x), nb_div(x, x)), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 0, 0}, 3, 1e-15, 0);
    nb_scope_end(s);
}
END_TEST

/* x -> y = 2x -> {a = y*y, b = 3y} -> z = a + b: dz/dx = 2(2y + 3) = 8x + 6 */
START_TEST(test_diamond) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, -2});
    nb_tensor *y = nb_mul_scalar(x, 2);
    nb_tensor *a = nb_mul(y, y), *b = nb_mul_scalar(y, 3);
    nb_tensor *z = nb_sum(nb_add(a, b), NULL, 0, false);
    ck_assert_double_eq(nb_item(z), (4 + 6) + (16 - 12));
    NB_CK_OK(nb_backward(z));
    nb_ck_close(nb_tensor_grad(x), (double[]){14, -10}, 2, 0, 1e-15);
    /* two leaves meeting at several nodes: f = sum((u*v) * u + v) */
    nb_tensor *u = leaf(NB_SHAPE(2), (double[]){2, 3});
    nb_tensor *v = leaf(NB_SHAPE(2), (double[]){5, -1});
    NB_CK_OK(nb_backward(nb_sum(nb_add(nb_mul(nb_mul(u, v), u), v), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(u), (double[]){2 * 2 * 5, 2 * 3 * -1}, 2, 0, 1e-15); /* 2uv */
    nb_ck_close(nb_tensor_grad(v), (double[]){4 + 1, 9 + 1}, 2, 0, 1e-15);          /* u^2 + 1 */
    nb_scope_end(s);
}
END_TEST

START_TEST(test_requires_grad_rules) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *i = nb_zeros(NB_SHAPE(2), NB_I32);
    NB_CK_FAILS(nb_set_requires_grad(i, true) == NB_OK, NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "requires_grad"));
    NB_CK_FAILS(nb_set_requires_grad(nb_zeros(NB_SHAPE(2), NB_BOOL), true) == NB_OK, NB_ERR_DTYPE);
    NB_CK_OK(nb_set_requires_grad(i, false)); /* turning it off is fine */
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    nb_tensor *y = nb_exp(x);
    NB_CK_FAILS(nb_set_requires_grad(y, false) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_set_requires_grad(NULL, true) == NB_OK, NB_ERR_INVALID_ARG);
    nb_tensor *f = nb_zeros(NB_SHAPE(2), NB_F32);
    NB_CK_OK(nb_set_requires_grad(f, true));
    ck_assert(nb_requires_grad(f));
    NB_CK_OK(nb_set_requires_grad(f, false));
    ck_assert(!nb_requires_grad(f));
    ck_assert(!nb_requires_grad(NULL));
    /* a float32 graph gives a float32 gradient */
    NB_CK_OK(nb_set_requires_grad(f, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul_scalar(f, 0.5), NULL, 0, false)));
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(f)), NB_F32);
    nb_ck_close(nb_tensor_grad(f), (double[]){0.5, 0.5}, 2, 0, 0);
    /* a leaf that is a (transposed) view: its gradient has its shape, contiguous */
    nb_tensor *vl = nb_transpose(nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6}), 0, 1);
    NB_CK_OK(nb_set_requires_grad(vl, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(vl, vl), NULL, 0, false)));
    nb_ck_shape(nb_tensor_grad(vl), 2, (int64_t[]){3, 2});
    ck_assert(nb_is_contiguous(nb_tensor_grad(vl)));
    nb_ck_close(nb_tensor_grad(vl), (double[]){2, 8, 4, 10, 6, 12}, 6, 0, 0);
    /* mixing a grad leaf with an int64-derived float tensor */
    nb_tensor *c = nb_to_dtype(nb_arange(1, 3, 1, NB_I64), NB_F64);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(x, c), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 2}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* backward frees the tape: the intermediates it saved die with it */
START_TEST(test_tape_freed_after_backward) {
    nb_scope *outer = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(1000), (double[1000]){0});
    NB_CK_OK(nb_fill_(x, 0.5));
    size_t base = allocated_now();
    nb_tensor *loss;
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_exp(x);
    nb_tensor *z = nb_mul(nb_tanh(y), y);
    loss = nb_sum(nb_reshape(nb_transpose(nb_unsqueeze(z, 0), 0, 1), NB_SHAPE(-1)), NULL, 0, false);
    nb_retain(loss);
    nb_scope_end(s);
    /* only the tape keeps y, tanh(y) and z alive now */
    ck_assert_uint_gt(allocated_now(), base + 3 * 8192);
    NB_CK_OK(nb_backward(loss));
    /* left: x's gradient (8000 bytes -> 8192) and the 0-d loss (512) */
    ck_assert_uint_eq(allocated_now(), base + 8192 + 512);
    double e = exp(0.5), th = tanh(e);
    double want = (1 - th * th) * e * e + th * e; /* d/dx [tanh(e^x) e^x] */
    double g[3];
    nb_test_values(nb_tensor_grad(x), g, 3);
    ck_assert_double_eq_tol(g[0], want, 1e-12);
    nb_release(loss);
    nb_tensor_zero_grad(x);
    ck_assert_uint_eq(allocated_now(), base);
    nb_scope_end(outer);
}
END_TEST

/* a graph that is never backpropagated dies with its scope */
START_TEST(test_tape_freed_at_scope_end) {
    size_t base = allocated_now();
    nb_scope *s = nb_scope_begin();
    nb_generator gen = nb_generator_new(1);
    nb_tensor *w = nb_randn(NB_SHAPE(32, 32), NB_F64, &gen);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *h = w;
    for (int i = 0; i < 5; i++) h = nb_tanh(nb_matmul(h, w));
    nb_tensor *loss = nb_mean(nb_log_softmax(h, 1), NULL, 0, false);
    NB_CK_NOTNULL(loss);
    nb_scope_end(s);
    ck_assert_uint_eq(allocated_now(), base);
    /* and after a backward too, grads included */
    s = nb_scope_begin();
    w = nb_randn(NB_SHAPE(32, 32), NB_F64, &gen);
    NB_CK_OK(nb_set_requires_grad(w, true));
    h = w;
    for (int i = 0; i < 5; i++) h = nb_tanh(nb_matmul(h, w));
    NB_CK_OK(nb_backward(nb_mean(nb_log_softmax(h, 1), NULL, 0, false)));
    NB_CK_NOTNULL(nb_tensor_grad(w));
    nb_scope_end(s);
    ck_assert_uint_eq(allocated_now(), base);
}
END_TEST

/* gradcheck is not vacuous: x * detach(x) has analytical gradient x but
 * numerical gradient 2x. */
static nb_tensor *f_wrong_grad(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_mul(in[0], nb_detach(in[0]));
}
static nb_tensor *f_right_grad(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_mul(in[0], in[0]);
}

START_TEST(test_gradcheck_detects_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3, 2), 4);
    NB_CK_OK(nb_gradcheck(f_right_grad, &x, 1, NULL, NULL));
    ck_assert_ptr_null(nb_tensor_grad(x)); /* cleared on success */
    nb_clear_error();
    ck_assert_int_ne(nb_gradcheck(f_wrong_grad, &x, 1, NULL, NULL), NB_OK);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "gradcheck"));
    /* float32 inputs are refused */
    nb_tensor *f = nb_zeros(NB_SHAPE(2), NB_F32);
    NB_CK_OK(nb_set_requires_grad(f, true));
    NB_CK_FAILS(nb_gradcheck(f_right_grad, &f, 1, NULL, NULL) == NB_OK, NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* A 300k-op chain, kept alive only by its last tensor (the scope that made
 * it has ended) and freed by releasing that tensor, then built again and
 * differentiated: neither the release nor the backward walk recurses per
 * node (this overflowed the stack before). */
START_TEST(test_deep_chain) {
    enum { DEPTH = 300000 };
    for (int pass = 0; pass < 2; pass++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_ones(NB_SHAPE(1), NB_F32), *y = x;
        nb_set_requires_grad(x, true);
        nb_retain(x);
        for (int i = 0; i < DEPTH; i++) {
            y = nb_add_scalar(y, 1e-6);
            NB_CK_NOTNULL(y);
        }
        nb_retain(y);
        nb_scope_end(s); /* each node now keeps its input alive: y holds the chain */
        if (pass == 1) {
            nb_scope *t = nb_scope_begin();
            NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
            ck_assert_double_eq(nb_item(nb_tensor_grad(x)), 1);
            nb_scope_end(t);
        }
        nb_release(y); /* frees DEPTH nodes and tensors */
        nb_release(x);
    }
}
END_TEST

/* ---- ownership, grad mode and failure paths ------------------------------- */

/* The example at the top of nb_autograd.h run with no scope open: every
 * result, nb_mul's intermediate included, belongs to the root scope, so
 * releasing it frees everything (8,192 bytes leaked before the rule). */
START_TEST(test_header_example_without_scope) {
    nb_scope_release_root();
    size_t base = allocated_now();
    nb_tensor *w = nb_randn(NB_SHAPE(3), NB_F64, NULL);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *loss = nb_sum(nb_mul(w, w), NULL, 0, false);
    NB_CK_OK(nb_backward(loss));
    double g[3], v[3];
    nb_test_values(nb_tensor_grad(w), g, 3);
    nb_test_values(w, v, 3);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(g[i], 2 * v[i]);
    ck_assert_uint_gt(allocated_now(), base);
    nb_scope_release_root();
    ck_assert_uint_eq(allocated_now(), base);
}
END_TEST

static bool grad_off_then_return(void) {
    NB_NO_GRAD {
        if (!nb_is_grad_enabled()) return true; /* leaves the block early */
    }
    return false;
}

static nb_status no_grad_fn(void *ctx) {
    *(bool *)ctx = nb_is_grad_enabled();
    return NB_OK;
}

/* NB_NO_GRAD restores grad mode however its block is left (a break or a
 * return used to leave grad mode off for good). */
START_TEST(test_no_grad_block_exits) {
    ck_assert(nb_is_grad_enabled());
    NB_NO_GRAD { ck_assert(!nb_is_grad_enabled()); }
    ck_assert(nb_is_grad_enabled());
    for (int i = 0; i < 3; i++) NB_NO_GRAD {
            if (i == 1) break; /* leaves NB_NO_GRAD's own block */
        }
    ck_assert(nb_is_grad_enabled());
    ck_assert(grad_off_then_return());
    ck_assert(nb_is_grad_enabled());
    NB_NO_GRAD {
        NB_NO_GRAD { ck_assert(!nb_is_grad_enabled()); }
        ck_assert(!nb_is_grad_enabled()); /* nested: the outer block's mode */
    }
    ck_assert(nb_is_grad_enabled());
    bool inside = true;
    NB_CK_OK(nb_no_grad_call(no_grad_fn, &inside));
    ck_assert(!inside);
    ck_assert(nb_is_grad_enabled());
}
END_TEST

/* Host allocation failures in the tape become errors: a failed node
 * allocation fails the op; a failed save (which cannot return a status)
 * fails the op through its scope, and nothing leaks. */
START_TEST(test_tape_alloc_failures) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_randn_grad(NB_SHAPE(2, 3), 1), *b = nb_test_randn_grad(NB_SHAPE(2, 3), 2);
    size_t base = allocated_now();
    int failures = 0;
    for (int n = 1; n <= 8; n++) { /* fail the n-th host allocation of one nb_mul */
        nb_clear_error();
        nb_fault_inject_host_alloc(n);
        nb_tensor *c = nb_mul(a, b);
        nb_fault_inject_host_alloc(0);
        if (c) continue;
        failures++;
        ck_assert_int_eq(nb_last_status(), NB_ERR_OOM);
        ck_assert_msg(strstr(nb_last_error(), "host memory"), "message: %s", nb_last_error());
    }
    ck_assert_int_ge(failures, 3); /* the output's storage and tensor, the node, the saves */
    nb_scope_end(s);
    s = nb_scope_begin();
    ck_assert_uint_le(allocated_now(), base);
    nb_tensor *ok = nb_mul(nb_test_randn_grad(NB_SHAPE(2), 3), nb_test_randn_grad(NB_SHAPE(2), 4));
    NB_CK_OK(nb_backward(nb_sum(ok, NULL, 0, false)));
    nb_scope_end(s);
}
END_TEST

/* A successful call clears an earlier, unrelated failure, so a later NULL
 * cannot report a stale message. */
START_TEST(test_stale_error_cleared) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    ck_assert_ptr_null(nb_matmul(x, x)); /* [2,3] @ [2,3] */
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    NB_CK_NOTNULL(nb_add(x, x));
    ck_assert_int_eq(nb_last_status(), NB_OK);
    ck_assert_str_eq(nb_last_error(), "");
    ck_assert_ptr_null(nb_exp(NULL));
    ck_assert_msg(strstr(nb_last_error(), "NULL"), "message: %s", nb_last_error());
    nb_scope_end(s);
}
END_TEST

/* x + detach(x): the tape sees only the first term, so its gradient (1) is
 * half the numerical one (2). */
static nb_tensor *f_half_tracked(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_add(in[0], nb_detach(in[0]));
}

/* Regressions (issue 13): a gradient of the wrong dtype is a dtype error
 * (it read "shape error"); a failed gradcheck is NB_ERR_MISMATCH ("mismatch",
 * it read "state error"); a state_dict message counts "size mismatches". */
START_TEST(test_error_statuses_named) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(2, 3), 5);
    nb_tensor *y = nb_mul_scalar(w, 2);
    NB_CK_FAILS(nb_backward_with(y, nb_ones(NB_SHAPE(2, 3), NB_F32)) == NB_OK, NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "dtype float32 does not match output dtype float64"));
    NB_CK_FAILS(nb_backward_with(y, nb_ones(NB_SHAPE(3, 2), NB_F64)) == NB_OK, NB_ERR_SHAPE);
    NB_CK_OK(nb_backward_with(y, nb_ones(NB_SHAPE(2, 3), NB_F64)));
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3), 6);
    NB_CK_FAILS(nb_gradcheck(f_half_tracked, &x, 1, NULL, NULL) == NB_OK, NB_ERR_MISMATCH);
    ck_assert_str_eq(nb_status_str(NB_ERR_MISMATCH), "mismatch");
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "analytical"));
    nb_scope_end(s);
    nb_module *a = nb_nn_sequential(nb_nn_linear(2, 3), nb_nn_linear(3, 4));
    nb_module *b = nb_nn_sequential(nb_nn_linear(2, 5), nb_nn_linear(5, 4));
    nb_named_tensor *sd = NULL;
    int n = nb_module_state_dict(a, &sd);
    ck_assert_int_eq(n, 4);
    NB_CK_FAILS(nb_module_load_tensors(b, sd, n, true, NULL) == NB_OK, NB_ERR_SHAPE);
    ck_assert_msg(strstr(nb_last_error(), "3 size mismatches ("), "%s", nb_last_error());
    free(sd);
    nb_module_free(a), nb_module_free(b);
}
END_TEST

Suite *nb_suite_autograd(void) {
    Suite *s = suite_create("autograd");
    TCase *c = tcase_create("engine");
    tcase_add_test(c, test_simple_grad);
    tcase_add_test(c, test_error_statuses_named);
    tcase_add_test(c, test_grad_accumulates);
    tcase_add_test(c, test_backward_twice_fails);
    tcase_add_test(c, test_backward_non_scalar);
    tcase_add_test(c, test_backward_on_leaf);
    tcase_add_test(c, test_no_grad);
    tcase_add_test(c, test_detach);
    tcase_add_test(c, test_used_twice);
    tcase_add_test(c, test_diamond);
    tcase_add_test(c, test_requires_grad_rules);
    tcase_add_test(c, test_gradcheck_detects_errors);
    suite_add_tcase(s, c);
    TCase *m = tcase_create("tape_memory");
    tcase_add_test(m, test_tape_freed_after_backward);
    tcase_add_test(m, test_tape_freed_at_scope_end);
    tcase_add_test(m, test_deep_chain);
    tcase_add_test(m, test_header_example_without_scope);
    tcase_add_test(m, test_no_grad_block_exits);
    tcase_add_test(m, test_tape_alloc_failures);
    tcase_add_test(m, test_stale_error_cleared);
    tcase_set_timeout(m, 300);
    suite_add_tcase(s, m);
    return s;
}
