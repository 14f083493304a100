/* test_ops_view.c - the view and shape ops (reshape in its view and copy
 * cases, view, permute, transpose, narrow, slice with a step and clamped
 * bounds, expand, unsqueeze, squeeze, contiguous, flatten): forward values,
 * storage shared with the base (written through nb_copy_/nb_fill_), error
 * paths, scattered gradients checked by hand, gradients from overlapping
 * views accumulating, slices' gradients meeting in one lazily zeroed
 * buffer (every device), and a gradcheck of each op and of chains of views. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* An op that must fail with status st and name `word` in its message. */
#define CK_FAILS_MSG(expr, st, word)                                                            \
    do {                                                                                         \
        NB_CK_FAILS(expr, st);                                                                   \
        ck_assert_msg(strstr(nb_last_error(), (word)) != NULL, "message \"%s\" lacks \"%s\"",   \
                      nb_last_error(), (word));                                                  \
    } while (0)

#define UNARY_FN(name, expr)                                                   \
    static nb_tensor *name(nb_tensor *const *in, int n, void *ctx) {           \
        (void)n, (void)ctx;                                                    \
        nb_tensor *a = in[0];                                                  \
        return expr;                                                           \
    }

UNARY_FN(f_reshape, nb_reshape(a, NB_SHAPE(2, -1, 2)))
UNARY_FN(f_reshape_copy, nb_reshape(nb_transpose(a, 0, 1), NB_SHAPE(12)))
UNARY_FN(f_view, nb_view(a, NB_SHAPE(4, 3)))
UNARY_FN(f_permute, nb_permute(a, (int[]){2, 0, 1}))
UNARY_FN(f_permute_neg, nb_permute(a, (int[]){-1, -3, -2}))
UNARY_FN(f_transpose, nb_transpose(a, 0, 2))
UNARY_FN(f_narrow, nb_narrow(a, 1, 1, 2))
UNARY_FN(f_slice_cols, nb_slice(a, 1, 1, 4, 2))
UNARY_FN(f_slice_rows, nb_slice(a, 0, 0, 3, 2))
UNARY_FN(f_slice_neg, nb_slice(a, -1, -3, 100, 2))
UNARY_FN(f_expand, nb_expand(a, NB_SHAPE(2, 3, 4)))
UNARY_FN(f_expand_keep, nb_expand(a, NB_SHAPE(-1, 5)))
UNARY_FN(f_unsqueeze, nb_unsqueeze(a, 1))
UNARY_FN(f_unsqueeze_end, nb_unsqueeze(a, -1))
UNARY_FN(f_squeeze, nb_squeeze(a, 1))
UNARY_FN(f_contiguous, nb_contiguous(nb_transpose(a, 0, 1)))
UNARY_FN(f_contiguous_noop, nb_contiguous(a))
UNARY_FN(f_flatten, nb_flatten(a, 1, 2))
UNARY_FN(f_flatten_all_t, nb_flatten(nb_transpose(a, 0, 2), 0, -1))
/* chains: views of views, and views feeding arithmetic */
UNARY_FN(f_chain_views, nb_reshape(nb_slice(nb_transpose(nb_unsqueeze(a, 0), 1, 2), 2, 0, 3, 2), NB_SHAPE(-1)))
UNARY_FN(f_view_arith, nb_mul(nb_narrow(a, 1, 0, 2), nb_exp(nb_narrow(a, 1, 2, 2))))
UNARY_FN(f_overlap, nb_add(nb_narrow(a, 0, 0, 2), nb_mul_scalar(nb_narrow(a, 0, 1, 2), 3)))
UNARY_FN(f_expand_mul, nb_mul(nb_expand(nb_unsqueeze(a, 0), NB_SHAPE(2, 3, 4)), nb_transpose(nb_expand(a, NB_SHAPE(2, 3, 4)), 1, 1)))

static void gc1(nb_gradcheck_fn f, nb_tensor *a) { nb_ck_gradcheck(f, &a, 1, NULL); }

static nb_tensor *leaf_arange(double n, int ndim, const int64_t *shape) {
    nb_tensor *t = nb_reshape(nb_arange(0, n, 1, NB_F64), ndim, shape);
    NB_CK_NOTNULL(t);
    t = nb_contiguous(nb_detach(t));
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

/* ---- forward values and shared storage ------------------------------------ */

START_TEST(test_reshape_view_share_storage) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *base = nb_arange(0, 12, 1, NB_F64);
    nb_tensor *m = nb_reshape(base, NB_SHAPE(3, 4));
    nb_ck_shape(m, 2, (int64_t[]){3, 4});
    ck_assert(nb_is_contiguous(m));
    nb_tensor *r = nb_reshape(base, NB_SHAPE(2, -1));
    nb_ck_shape(r, 2, (int64_t[]){2, 6});
    nb_ck_shape(nb_reshape(m, NB_SHAPE(-1)), 1, (int64_t[]){12});
    nb_ck_shape(nb_view(base, NB_SHAPE(2, 3, -1)), 3, (int64_t[]){2, 3, 2});
    nb_ck_shape(nb_reshape(nb_scalar(1, NB_F64), NB_SHAPE(1, 1)), 2, (int64_t[]){1, 1});
    ck_assert_int_eq(nb_dim(nb_reshape(nb_zeros(NB_SHAPE(1, 1), NB_F64), 0, NULL)), 0);

    /* writes through the view show in the base */
    NB_CK_OK(nb_copy_(nb_narrow(m, 0, 1, 1), nb_full(NB_SHAPE(1, 4), -1, NB_F64)));
    nb_ck_close(base, (double[]){0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11}, 12, 0, 0);
    NB_CK_OK(nb_fill_(nb_view(r, NB_SHAPE(12)), 5));
    nb_ck_close(m, (double[]){5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, 12, 0, 0);

    CK_FAILS_MSG(nb_reshape(base, NB_SHAPE(5, -1)), NB_ERR_SHAPE, "reshape");
    CK_FAILS_MSG(nb_reshape(base, NB_SHAPE(5, 2)), NB_ERR_SHAPE, "reshape");
    CK_FAILS_MSG(nb_reshape(base, NB_SHAPE(-1, -1)), NB_ERR_SHAPE, "reshape");
    CK_FAILS_MSG(nb_view(base, NB_SHAPE(-2, 6)), NB_ERR_SHAPE, "view");
    nb_scope_end(s);
}
END_TEST

START_TEST(test_reshape_copies_transposed) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 6, 1, NB_F64), NB_SHAPE(2, 3)); /* [[0,1,2],[3,4,5]] */
    nb_tensor *xt = nb_transpose(x, 0, 1);                                 /* [[0,3],[1,4],[2,5]] */
    ck_assert(!nb_is_contiguous(xt));
    nb_tensor *flat = nb_reshape(xt, NB_SHAPE(6));
    nb_ck_close(flat, (double[]){0, 3, 1, 4, 2, 5}, 6, 0, 0);
    ck_assert(nb_is_contiguous(flat));
    NB_CK_OK(nb_fill_(flat, 7)); /* a copy: x is unchanged */
    nb_ck_close(x, (double[]){0, 1, 2, 3, 4, 5}, 6, 0, 0);

    CK_FAILS_MSG(nb_view(xt, NB_SHAPE(6)), NB_ERR_SHAPE, "view");
    /* a view that only inserts a size-1 dim is possible on the transposed strides */
    nb_tensor *v = nb_view(xt, NB_SHAPE(3, 1, 2));
    NB_CK_NOTNULL(v);
    nb_ck_close(v, (double[]){0, 3, 1, 4, 2, 5}, 6, 0, 0);
    NB_CK_OK(nb_fill_(v, 1));
    nb_ck_close(x, (double[]){1, 1, 1, 1, 1, 1}, 6, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_permute_transpose) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 24, 1, NB_F64), NB_SHAPE(2, 3, 4));
    nb_tensor *p = nb_permute(x, (int[]){2, 0, 1}); /* p[k][i][j] = x[i][j][k] = 12i + 4j + k */
    nb_ck_shape(p, 3, (int64_t[]){4, 2, 3});
    ck_assert_int_eq(nb_strides(p)[0], 1);
    ck_assert_int_eq(nb_strides(p)[1], 12);
    ck_assert_int_eq(nb_strides(p)[2], 4);
    ck_assert(!nb_is_contiguous(p));
    double want[24];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) want[k * 6 + i * 3 + j] = 12 * i + 4 * j + k;
    nb_ck_close(p, want, 24, 0, 0);

    nb_tensor *t = nb_transpose(x, 0, -1); /* t[k][j][i] = x[i][j][k] */
    nb_ck_shape(t, 3, (int64_t[]){4, 3, 2});
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) want[k * 6 + j * 2 + i] = 12 * i + 4 * j + k;
    nb_ck_close(t, want, 24, 0, 0);
    /* a permuted view shares storage */
    NB_CK_OK(nb_copy_(nb_narrow(t, 0, 3, 1), nb_zeros(NB_SHAPE(1, 3, 2), NB_F64)));
    double back[24];
    nb_test_values(x, back, 24);
    for (int i = 0; i < 24; i++) ck_assert_double_eq(back[i], i % 4 == 3 ? 0 : i);

    CK_FAILS_MSG(nb_permute(x, (int[]){0, 0, 1}), NB_ERR_INVALID_ARG, "permute");
    CK_FAILS_MSG(nb_permute(x, (int[]){0, 1, 3}), NB_ERR_INVALID_ARG, "permute");
    CK_FAILS_MSG(nb_transpose(x, 0, 3), NB_ERR_INVALID_ARG, "transpose");
    nb_scope_end(s);
}
END_TEST

START_TEST(test_narrow_slice) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_arange(0, 10, 1, NB_F64);
    nb_ck_close(nb_slice(x, 0, 1, 8, 3), (double[]){1, 4, 7}, 3, 0, 0);
    nb_ck_close(nb_slice(x, 0, 0, 10, 4), (double[]){0, 4, 8}, 3, 0, 0);
    nb_ck_close(nb_slice(x, 0, -3, 100, 1), (double[]){7, 8, 9}, 3, 0, 0);   /* negative start, end clamped */
    nb_ck_close(nb_slice(x, -1, -100, 2, 1), (double[]){0, 1}, 2, 0, 0);     /* start clamped to 0 */
    nb_ck_close(nb_slice(x, 0, 2, -5, 2), (double[]){2, 4}, 2, 0, 0);        /* negative end */
    ck_assert_int_eq(nb_numel(nb_slice(x, 0, 5, 2, 1)), 0);                   /* end < start: empty */
    ck_assert_int_eq(nb_numel(nb_slice(x, 0, 20, 30, 1)), 0);
    nb_ck_close(nb_narrow(x, 0, 2, 3), (double[]){2, 3, 4}, 3, 0, 0);
    nb_ck_close(nb_narrow(x, 0, -3, 2), (double[]){7, 8}, 2, 0, 0);
    CK_FAILS_MSG(nb_slice(x, 0, 0, 5, 0), NB_ERR_INVALID_ARG, "slice");
    CK_FAILS_MSG(nb_slice(x, 1, 0, 5, 1), NB_ERR_INVALID_ARG, "slice");
    CK_FAILS_MSG(nb_narrow(x, 0, 8, 3), NB_ERR_INVALID_ARG, "narrow");
    CK_FAILS_MSG(nb_narrow(x, 0, 0, -1), NB_ERR_INVALID_ARG, "narrow");

    /* columns 1 and 3 of a [3, 4] matrix, written through the view */
    nb_tensor *m = nb_reshape(nb_arange(0, 12, 1, NB_F64), NB_SHAPE(3, 4));
    nb_tensor *c = nb_slice(m, 1, 1, 4, 2);
    nb_ck_shape(c, 2, (int64_t[]){3, 2});
    ck_assert_int_eq(nb_strides(c)[1], 2);
    nb_ck_close(c, (double[]){1, 3, 5, 7, 9, 11}, 6, 0, 0);
    NB_CK_OK(nb_copy_(c, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){-1, -2})));
    nb_ck_close(m, (double[]){0, -1, 2, -2, 4, -1, 6, -2, 8, -1, 10, -2}, 12, 0, 0);
    /* fill_ through a strided view: rows 0 and 2 */
    NB_CK_OK(nb_fill_(nb_slice(m, 0, 0, 3, 2), 100));
    nb_ck_close(m, (double[]){100, 100, 100, 100, 4, -1, 6, -2, 100, 100, 100, 100}, 12, 0, 0);
    /* a slice of a slice */
    nb_ck_close(nb_slice(nb_slice(x, 0, 1, 10, 2), 0, 1, 5, 2), (double[]){3, 7}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_expand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3, 1), NB_F64, (double[]){1, 2, 3});
    nb_tensor *e = nb_expand(x, NB_SHAPE(2, 3, 4)); /* new leading dim */
    nb_ck_shape(e, 3, (int64_t[]){2, 3, 4});
    ck_assert_int_eq(nb_strides(e)[0], 0);
    ck_assert_int_eq(nb_strides(e)[2], 0);
    double want[24];
    for (int i = 0; i < 24; i++) want[i] = 1 + (i / 4) % 3;
    nb_ck_close(e, want, 24, 0, 0);
    nb_tensor *e2 = nb_expand(x, NB_SHAPE(-1, 2));
    nb_ck_shape(e2, 2, (int64_t[]){3, 2});
    nb_ck_close(e2, (double[]){1, 1, 2, 2, 3, 3}, 6, 0, 0);
    /* a view: a write to the base shows through the expansion */
    NB_CK_OK(nb_fill_(x, 4));
    nb_ck_close(e2, (double[]){4, 4, 4, 4, 4, 4}, 6, 0, 0);
    CK_FAILS_MSG(nb_expand(x, NB_SHAPE(3, 2, 1)), NB_ERR_SHAPE, "expand");
    CK_FAILS_MSG(nb_expand(nb_zeros(NB_SHAPE(3, 2), NB_F64), NB_SHAPE(3, 4)), NB_ERR_SHAPE, "expand");
    CK_FAILS_MSG(nb_expand(x, NB_SHAPE(3)), NB_ERR_SHAPE, "expand");
    CK_FAILS_MSG(nb_expand(x, NB_SHAPE(-1, 3, 1)), NB_ERR_SHAPE, "expand"); /* -1 on a new dim */
    nb_scope_end(s);
}
END_TEST

START_TEST(test_unsqueeze_squeeze_flatten) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 12, 1, NB_F64), NB_SHAPE(3, 4));
    nb_ck_shape(nb_unsqueeze(x, 0), 3, (int64_t[]){1, 3, 4});
    nb_ck_shape(nb_unsqueeze(x, 1), 3, (int64_t[]){3, 1, 4});
    nb_ck_shape(nb_unsqueeze(x, 2), 3, (int64_t[]){3, 4, 1});
    nb_ck_shape(nb_unsqueeze(x, -1), 3, (int64_t[]){3, 4, 1});
    nb_ck_shape(nb_unsqueeze(x, -3), 3, (int64_t[]){1, 3, 4});
    CK_FAILS_MSG(nb_unsqueeze(x, 3), NB_ERR_INVALID_ARG, "unsqueeze");
    nb_tensor *u = nb_unsqueeze(x, 1);
    nb_ck_shape(nb_squeeze(u, 1), 2, (int64_t[]){3, 4});
    nb_ck_shape(nb_squeeze(u, 0), 3, (int64_t[]){3, 1, 4}); /* size 3: unchanged */
    nb_ck_shape(nb_squeeze(nb_zeros(NB_SHAPE(2, 1), NB_F64), -1), 1, (int64_t[]){2});
    CK_FAILS_MSG(nb_squeeze(x, 2), NB_ERR_INVALID_ARG, "squeeze");
    nb_ck_close(nb_squeeze(u, 1), (double[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12, 0, 0);

    nb_tensor *y = nb_reshape(nb_arange(0, 24, 1, NB_F64), NB_SHAPE(2, 3, 4));
    nb_ck_shape(nb_flatten(y, 1, 2), 2, (int64_t[]){2, 12});
    nb_ck_shape(nb_flatten(y, 0, 1), 2, (int64_t[]){6, 4});
    nb_ck_shape(nb_flatten(y, 0, -1), 1, (int64_t[]){24});
    nb_ck_shape(nb_flatten(y, 1, 1), 3, (int64_t[]){2, 3, 4});
    nb_ck_shape(nb_flatten(nb_scalar(2, NB_F64), 0, -1), 1, (int64_t[]){1});
    CK_FAILS_MSG(nb_flatten(y, 2, 1), NB_ERR_INVALID_ARG, "flatten");
    /* flatten of a permuted tensor copies and keeps C order of the view */
    nb_tensor *f = nb_flatten(nb_transpose(nb_reshape(nb_arange(0, 4, 1, NB_F64), NB_SHAPE(2, 2)), 0, 1), 0, 1);
    nb_ck_close(f, (double[]){0, 2, 1, 3}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients ------------------------------------------------------------- */

START_TEST(test_view_grads_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* narrow: the gradient lands in the narrowed columns */
    nb_tensor *x = leaf_arange(12, NB_SHAPE(3, 4));
    nb_tensor *y = nb_narrow(x, 1, 1, 2);
    ck_assert(nb_requires_grad(y) && !nb_is_leaf(y));
    NB_CK_OK(nb_backward_with(y, nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6})));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0}, 12, 0, 0);
    /* slice with step 2 */
    nb_tensor *v = leaf_arange(6, NB_SHAPE(6));
    NB_CK_OK(nb_backward_with(nb_slice(v, 0, 1, 6, 2), nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(nb_tensor_grad(v), (double[]){0, 1, 0, 2, 0, 3}, 6, 0, 0);
    /* overlapping views accumulate: sum(x[0:3]) + 2 sum(x[2:5]) */
    nb_tensor *o = leaf_arange(5, NB_SHAPE(5));
    nb_tensor *l = nb_add(nb_sum(nb_narrow(o, 0, 0, 3), NULL, 0, false),
                          nb_mul_scalar(nb_sum(nb_narrow(o, 0, 2, 3), NULL, 0, false), 2));
    NB_CK_OK(nb_backward(l));
    nb_ck_close(nb_tensor_grad(o), (double[]){1, 1, 3, 2, 2}, 5, 0, 0);
    /* expand sums over the broadcast dims, new leading ones included */
    nb_tensor *e = leaf_arange(3, NB_SHAPE(3, 1));
    NB_CK_OK(nb_backward(nb_sum(nb_expand(e, NB_SHAPE(2, 3, 4)), NULL, 0, false)));
    nb_ck_shape(nb_tensor_grad(e), 2, (int64_t[]){3, 1});
    nb_ck_close(nb_tensor_grad(e), (double[]){8, 8, 8}, 3, 0, 0);
    nb_tensor *e2 = leaf_arange(2, NB_SHAPE(2));
    NB_CK_OK(nb_backward_with(nb_expand(e2, NB_SHAPE(3, 2)),
                              nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 10, 2, 20, 3, 30})));
    nb_ck_close(nb_tensor_grad(e2), (double[]){6, 60}, 2, 0, 0);
    /* permute: grad[i][j][k] = g[k][i][j] */
    nb_tensor *p = leaf_arange(24, NB_SHAPE(2, 3, 4));
    nb_tensor *g = nb_reshape(nb_arange(0, 24, 1, NB_F64), NB_SHAPE(4, 2, 3));
    NB_CK_OK(nb_backward_with(nb_permute(p, (int[]){2, 0, 1}), g));
    double want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) want[i * 12 + j * 4 + k] = k * 6 + i * 3 + j;
    nb_ck_close(nb_tensor_grad(p), want, 24, 0, 0);
    ck_assert(nb_is_contiguous(nb_tensor_grad(p)));
    /* reshape of a transposed tensor (a copy): flat = [x00, x10, x01, x11, x02, x12] */
    nb_tensor *r = leaf_arange(6, NB_SHAPE(2, 3));
    NB_CK_OK(nb_backward_with(nb_reshape(nb_transpose(r, 0, 1), NB_SHAPE(6)), nb_arange(0, 6, 1, NB_F64)));
    nb_ck_close(nb_tensor_grad(r), (double[]){0, 2, 4, 1, 3, 5}, 6, 0, 0);
    /* unsqueeze / squeeze / flatten pass the gradient through reshaped */
    nb_tensor *u = leaf_arange(3, NB_SHAPE(3));
    NB_CK_OK(nb_backward_with(nb_flatten(nb_unsqueeze(nb_squeeze(nb_unsqueeze(u, 0), 0), 1), 0, 1),
                              nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){7, 8, 9})));
    nb_ck_shape(nb_tensor_grad(u), 1, (int64_t[]){3});
    nb_ck_close(nb_tensor_grad(u), (double[]){7, 8, 9}, 3, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_view_grad_metadata) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf_arange(6, NB_SHAPE(2, 3));
    /* contiguous of a contiguous tensor is the tensor itself, graph included */
    nb_tensor *c = nb_contiguous(x);
    ck_assert_ptr_eq(c, x);
    nb_tensor *t = nb_transpose(x, 0, 1);
    nb_tensor *ct = nb_contiguous(t);
    ck_assert(nb_is_contiguous(ct) && nb_requires_grad(ct) && !nb_is_leaf(ct));
    nb_ck_close(ct, (double[]){0, 3, 1, 4, 2, 5}, 6, 0, 0);
    NB_CK_OK(nb_backward_with(ct, nb_reshape(nb_arange(0, 6, 1, NB_F64), NB_SHAPE(3, 2))));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 2, 4, 1, 3, 5}, 6, 0, 0);
    /* the gradient of a leaf viewed through an expand + a reduction has the leaf's shape */
    nb_tensor *b = leaf_arange(4, NB_SHAPE(1, 4));
    NB_CK_OK(nb_backward(nb_mean(nb_expand(b, NB_SHAPE(3, 4)), NULL, 0, false)));
    nb_ck_shape(nb_tensor_grad(b), 2, (int64_t[]){1, 4});
    nb_ck_close(nb_tensor_grad(b), (double[]){0.25, 0.25, 0.25, 0.25}, 4, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_view_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *m = nb_test_randn_grad(NB_SHAPE(3, 4), 1);
    nb_tensor *c = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 2);
    nb_tensor *col = nb_test_randn_grad(NB_SHAPE(3, 1), 3);
    gc1(f_reshape, m);
    gc1(f_reshape_copy, m);
    gc1(f_view, m);
    gc1(f_permute, c);
    gc1(f_permute_neg, c);
    gc1(f_transpose, c);
    gc1(f_narrow, m);
    gc1(f_slice_cols, m);
    gc1(f_slice_rows, m);
    gc1(f_slice_neg, m);
    gc1(f_expand, col);
    gc1(f_expand_keep, col);
    gc1(f_unsqueeze, m);
    gc1(f_unsqueeze_end, m);
    gc1(f_squeeze, nb_test_randn_grad(NB_SHAPE(3, 1, 4), 4));
    gc1(f_squeeze, m); /* size 4: no-op */
    gc1(f_contiguous, m);
    gc1(f_contiguous_noop, m);
    gc1(f_flatten, c);
    gc1(f_flatten_all_t, c);
    gc1(f_chain_views, m);
    gc1(f_view_arith, m);
    gc1(f_overlap, m);
    gc1(f_expand_mul, m);
    nb_scope_end(s);
}
END_TEST

/* Regressions (issue 13): int64 overflow in shape arithmetic is an error,
 * whatever the order of the dims. */
START_TEST(test_shape_overflow) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *v = nb_zeros(NB_SHAPE(4), NB_F32);
    NB_CK_FAILS(nb_narrow(v, 0, INT64_MAX, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_narrow(v, 0, 2, INT64_MAX), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_expand(nb_ones(NB_SHAPE(1, 1), NB_F32), NB_SHAPE(1LL << 40, 1LL << 40)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_broadcast_to(nb_ones(NB_SHAPE(1), NB_F32), NB_SHAPE(1LL << 62, 1LL << 62, 1)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_empty(NB_SHAPE(0, 1LL << 62, 1LL << 62), NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_empty(NB_SHAPE(1LL << 62, 1LL << 62, 0), NB_F32), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_reshape(nb_zeros(NB_SHAPE(0), NB_F32), NB_SHAPE(1LL << 40, 1LL << 40, 0)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_reshape(v, NB_SHAPE(1LL << 32, 1LL << 32, 4)), NB_ERR_SHAPE);
    /* still fine: an expanded empty tensor and a large but countable view */
    nb_ck_shape(nb_expand(nb_ones(NB_SHAPE(1, 0), NB_F32), NB_SHAPE(1LL << 20, 0)), 2, (int64_t[]){1LL << 20, 0});
    nb_tensor *big = nb_expand(nb_ones(NB_SHAPE(1), NB_F32), NB_SHAPE(1LL << 20, 1LL << 20));
    nb_ck_shape(big, 2, (int64_t[]){1LL << 20, 1LL << 20});
    nb_scope_end(s);
}
END_TEST

/* Slices' gradients meet in one buffer zeroed only where no adjacent
 * unit-step slice wrote (engine.c's slice_into_acc): loss = sum_k w_k *
 * sum(slice_k(x)) gives x.grad = the sum of w_k over the slices holding
 * each element, checked by hand for pieces left out, pieces in reverse,
 * overlaps, slices of another dim or step, a plain use of x beside them,
 * and a gap between two pieces; on the CPU and every accelerator, in
 * float64 and float32. */
typedef struct {
    int dim;
    int64_t start, end, step;
    double w;
} slice_use;

static void check_slice_grads(nb_device dev, nb_dtype dt, const slice_use *u, int n, double plain_w) {
    enum { R = 3, C = 8 };
    nb_scope *s = nb_scope_begin();
    double v[R * C], want[R * C];
    for (int i = 0; i < R * C; i++) v[i] = i, want[i] = plain_w;
    nb_tensor *x = nb_to_device(nb_test_tensor(NB_SHAPE(R, C), dt, v), dev);
    NB_CK_NOTNULL(x);
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_tensor *h = nb_mul_scalar(x, 2); /* not a leaf: the slices' gradients meet in h's node */
    nb_tensor *loss = plain_w ? nb_mul_scalar(nb_sum(h, NULL, 0, false), plain_w) : NULL;
    for (int k = 0; k < n; k++) {
        nb_tensor *p = nb_slice(h, u[k].dim, u[k].start, u[k].end, u[k].step);
        nb_tensor *t = nb_mul_scalar(nb_sum(p, NULL, 0, false), u[k].w);
        loss = loss ? nb_add(loss, t) : t;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                int64_t i = u[k].dim == 0 ? r : c;
                if (i >= u[k].start && i < u[k].end && (i - u[k].start) % u[k].step == 0) want[r * C + c] += u[k].w;
            }
    }
    NB_CK_OK(nb_backward(loss));
    for (int i = 0; i < R * C; i++) want[i] *= 2;
    nb_ck_close(nb_tensor_grad(x), want, R * C, 0, 0);
    nb_scope_end(s);
}

START_TEST(test_slice_grad_lazy_zero) {
    const slice_use chunk_some[] = {{1, 0, 2, 1, 1}, {1, 4, 6, 1, 3}, {1, 6, 8, 1, 4}}; /* [2, 4) never sliced */
    const slice_use reverse[] = {{1, 6, 8, 1, 4}, {1, 4, 6, 1, 3}, {1, 2, 4, 1, 2}, {1, 0, 2, 1, 1}};
    const slice_use overlap[] = {{1, 0, 5, 1, 1}, {1, 3, 8, 1, 2}};
    const slice_use dims[] = {{1, 2, 6, 1, 1}, {0, 1, 3, 1, 5}};
    const slice_use steps[] = {{1, 0, 4, 1, 1}, {1, 1, 8, 2, 7}};
    const slice_use gap[] = {{1, 0, 2, 1, 1}, {1, 6, 8, 1, 2}, {1, 2, 6, 1, 3}};
    struct {
        const slice_use *u;
        int n;
        double plain;
    } cases[] = {{chunk_some, 3, 0}, {reverse, 4, 0}, {overlap, 2, 0}, {dims, 2, 0},
                 {steps, 2, 0},      {gap, 3, 0},     {chunk_some, 3, 0.5}, {reverse, 4, 1}};
    nb_device devs[9] = {{NB_DEVICE_CPU, 0}};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int t = 0; t < 2; t++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                check_slice_grads(devs[d], t ? NB_F32 : NB_F64, cases[c].u, cases[c].n, cases[c].plain);
}
END_TEST

Suite *nb_suite_ops_view(void) {
    Suite *s = suite_create("ops_view");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_reshape_view_share_storage);
    tcase_add_test(f, test_shape_overflow);
    tcase_add_test(f, test_reshape_copies_transposed);
    tcase_add_test(f, test_permute_transpose);
    tcase_add_test(f, test_narrow_slice);
    tcase_add_test(f, test_expand);
    tcase_add_test(f, test_unsqueeze_squeeze_flatten);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_view_grads_by_hand);
    tcase_add_test(g, test_view_grad_metadata);
    tcase_add_test(g, test_view_gradcheck);
    tcase_add_test(g, test_slice_grad_lazy_zero);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
