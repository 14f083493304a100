/* test_ops_foreach.c - nb_foreach.h (in-place, out= and multi-tensor forms,
 * fused optimizer steps) against the out-of-place ops, and the pieces of
 * nb_extension.h that nabla's upper layers build on (owned tensors, views,
 * data pointers, version counters, gradients set by hand). */
#include <math.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* a and b hold the same bits (same dtype and shape, compared in C order). */
static void ck_same_bits(nb_tensor *a, nb_tensor *b) {
    ck_assert_int_eq(nb_dtype_of(a), nb_dtype_of(b));
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    size_t bytes = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    NB_CK_OK(nb_to_host(a, x, bytes));
    NB_CK_OK(nb_to_host(b, y, bytes));
    ck_assert_msg(!memcmp(x, y, bytes), "the bits differ");
    free(x), free(y);
}

/* Element i of t in C order. */
static double at(nb_tensor *t, int64_t i) {
    int64_t n = nb_numel(t);
    return nb_item(nb_narrow(nb_reshape(nb_contiguous(t), 1, &n), 0, i, 1));
}

static nb_tensor *clone(nb_tensor *t) {
    nb_tensor *c = nb_empty_like(t);
    return c && nb_copy_(c, t) == NB_OK ? c : NULL;
}

START_TEST(test_inplace_binary_matches_out_of_place) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *x = nb_randn(NB_SHAPE(4, 5), NB_F32, NULL), *row = nb_randn(NB_SHAPE(5), NB_F32, NULL);
    nb_status (*inplace[])(nb_tensor *, const nb_tensor *) = {nb_add_, nb_sub_,     nb_mul_,
                                                              nb_div_, nb_maximum_, nb_minimum_};
    nb_tensor *(*ops[])(nb_tensor *, nb_tensor *) = {nb_add, nb_sub, nb_mul, nb_div, nb_maximum, nb_minimum};
    for (int k = 0; k < 6; k++) {
        nb_tensor *y = clone(x), *want = ops[k](x, row);
        NB_CK_NOTNULL(want);
        NB_CK_OK(inplace[k](y, row)); /* the row broadcasts over x */
        ck_same_bits(y, want);
        /* a non-contiguous x (a transpose) is written through its strides */
        nb_tensor *base = clone(nb_transpose(x, 0, 1)), *t = nb_transpose(base, 0, 1);
        NB_CK_OK(inplace[k](t, row));
        ck_same_bits(nb_contiguous(t), want);
    }
    /* promotion: a float64 other is used in float64 and rounded into x once */
    nb_tensor *y = clone(x), *d = nb_to_dtype(row, NB_F64);
    NB_CK_OK(nb_mul_(y, d));
    ck_same_bits(y, nb_to_dtype(nb_mul(x, d), NB_F32));
    /* a float result does not fit an integer x; other must broadcast to x */
    nb_tensor *i = nb_zeros(NB_SHAPE(4, 5), NB_I64);
    NB_CK_FAILS(nb_add_(i, x) == NB_OK, NB_ERR_DTYPE);
    NB_CK_FAILS(nb_add_(row, x) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_add_(nb_expand(row, NB_SHAPE(4, 5)), x) == NB_OK,
                NB_ERR_INVALID_ARG); /* an element stored 4 times */
    NB_CK_OK(nb_add_(i, nb_ones(NB_SHAPE(5), NB_I32)));
    ck_assert(nb_item(nb_sum(i, NULL, 0, false)) == 20);
    nb_tensor *z = clone(x);
    NB_CK_OK(nb_mul_scalar_(z, 0.5));
    ck_same_bits(z, nb_mul_scalar(x, 0.5));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_inplace_and_autograd) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_ones(NB_SHAPE(3), NB_F64), *two = nb_full(NB_SHAPE(3), 2, NB_F64);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_FAILS(nb_mul_(w, two) == NB_OK, NB_ERR_STATE); /* grad mode on: refused */
    NB_CK_FAILS(nb_fused_sgd_(1, &w, &two, NULL, &(nb_sgd_hyper){.lr = 0.1}) == NB_OK, NB_ERR_STATE);
    NB_NO_GRAD { NB_CK_OK(nb_mul_(w, two)); }
    ck_assert(nb_item(nb_sum(w, NULL, 0, false)) == 6);
    /* a tensor saved for backward and then written in place fails backward */
    nb_tensor *a = nb_ones(NB_SHAPE(3), NB_F64), *loss = nb_sum(nb_mul(w, a), NULL, 0, false);
    NB_CK_OK(nb_mul_(a, two)); /* a does not require grad: allowed, and recorded as a write */
    NB_CK_FAILS(nb_backward(loss) == NB_OK, NB_ERR_STATE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_index_select_out) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    nb_tensor *x = nb_randn(NB_SHAPE(6, 3), NB_F64, NULL);
    nb_tensor *idx = nb_from_data((int64_t[]){5, 0, 5, 2}, NB_SHAPE(4), NB_I64);
    nb_tensor *out = nb_empty(NB_SHAPE(4, 3), NB_F64);
    NB_CK_OK(nb_index_select_out(out, x, 0, idx));
    ck_same_bits(out, nb_index_select(x, 0, idx));
    NB_CK_OK(nb_index_select_out(nb_empty(NB_SHAPE(6, 4), NB_F64), x, -1,
                                 nb_from_data((int64_t[]){2, 1, 0, 0}, NB_SHAPE(4), NB_I64)));
    NB_CK_FAILS(nb_index_select_out(nb_empty(NB_SHAPE(3, 3), NB_F64), x, 0, idx) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_index_select_out(out, x, 2, idx) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_foreach_norm_and_mul) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *xs[3] = {nb_randn(NB_SHAPE(7), NB_F64, NULL), nb_randn(NB_SHAPE(2, 3), NB_F64, NULL),
                        nb_empty(NB_SHAPE(0), NB_F64)};
    const double ords[] = {1, 2, 3.5, INFINITY};
    for (int k = 0; k < 4; k++) {
        nb_tensor *n = nb_foreach_norm(xs, 3, ords[k]);
        NB_CK_NOTNULL(n);
        ck_assert_int_eq(nb_numel(n), 3);
        for (int i = 0; i < 2; i++) {
            double want = nb_item(nb_norm(xs[i], ords[k], NULL, 0, false));
            double got = at(n, i);
            ck_assert_msg(fabs(got - want) <= 1e-14 * want, "ord %g tensor %d: %.17g, want %.17g", ords[k], i, got,
                          want);
        }
        ck_assert(at(n, 2) == 0); /* the empty tensor's norm */
    }
    NB_CK_FAILS(nb_foreach_norm(xs, 3, 0) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_foreach_norm((nb_tensor *[]){xs[0], nb_ones(NB_SHAPE(2), NB_F32)}, 2, 2) != NULL, NB_ERR_DTYPE);
    nb_tensor *want0 = nb_mul_scalar(xs[0], -1.5), *want1 = nb_mul_scalar(xs[1], -1.5);
    NB_CK_OK(nb_foreach_mul_(xs, 3, nb_scalar(-1.5, NB_F32))); /* the factor cast to each tensor's dtype */
    ck_same_bits(xs[0], want0);
    ck_same_bits(xs[1], want1);
    NB_CK_FAILS(nb_foreach_mul_(xs, 3, nb_ones(NB_SHAPE(2), NB_F64)) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* n parameters of assorted sizes, and their gradients and Adam state. */
static void adam_state(int n, nb_tensor **p, nb_tensor **g, nb_tensor **m, nb_tensor **v, uint64_t seed) {
    nb_manual_seed(seed);
    for (int i = 0; i < n; i++) {
        int64_t len = 1 + (i * 7) % 13;
        p[i] = nb_randn(1, &len, NB_F32, NULL), g[i] = nb_randn(1, &len, NB_F32, NULL);
        m[i] = nb_zeros(1, &len, NB_F32), v[i] = nb_zeros(1, &len, NB_F32);
    }
}

START_TEST(test_fused_adam_is_per_parameter) {
    enum { N = 70 }; /* more than one multi-tensor launch */
    nb_scope *s = nb_scope_begin();
    nb_tensor *p[N], *g[N], *m[N], *v[N], *p1[N], *g1[N], *m1[N], *v1[N];
    adam_state(N, p, g, m, v, 9);
    adam_state(N, p1, g1, m1, v1, 9);
    nb_adam_hyper h = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .decoupled = true};
    for (h.step = 1; h.step <= 3; h.step++) {
        NB_CK_OK(nb_fused_adam_(N, p, g, m, v, NULL, &h));
        for (int i = 0; i < N; i++) NB_CK_OK(nb_fused_adam_(1, &p1[i], &g1[i], &m1[i], &v1[i], NULL, &h));
    }
    for (int i = 0; i < N; i++) ck_same_bits(p[i], p1[i]), ck_same_bits(v[i], v1[i]);
    NB_CK_FAILS(nb_fused_adam_(1, p, g, m, v, v, &h) == NB_OK,
                NB_ERR_INVALID_ARG); /* max_exp_avg_sqs without amsgrad */
    NB_CK_FAILS(nb_fused_adam_(2, p, g, m, (nb_tensor *[]){v[0], v[5]}, NULL, &h) == NB_OK, NB_ERR_SHAPE);
    /* SGD with momentum, first step then another, batch against one by one */
    nb_sgd_hyper sh = {.lr = 0.1, .momentum = 0.9, .nesterov = true, .first_step = true};
    for (int k = 0; k < 2; k++, sh.first_step = false) {
        NB_CK_OK(nb_fused_sgd_(N, p, g, m, &sh));
        for (int i = 0; i < N; i++) NB_CK_OK(nb_fused_sgd_(1, &p1[i], &g1[i], &m1[i], &sh));
    }
    for (int i = 0; i < N; i++) ck_same_bits(p[i], p1[i]), ck_same_bits(m[i], m1[i]);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_extension_tensors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_arange(0, 12, 1, NB_F32);
    nb_tensor *v = nb_tensor_view_of(x, 2, (int64_t[]){2, 3}, (int64_t[]){1, 4}, 2); /* as_strided */
    NB_CK_NOTNULL(v);
    ck_assert(nb_shares_storage(v, x));
    ck_assert_int_eq(nb_storage_offset(v), 2);
    ck_assert_ptr_eq(nb_data_ptr(v), (float *)nb_data_ptr(x) + 2);
    ck_assert(at(v, 5) == 11); /* element (1, 2): 2 + 1 + 2*4 */
    /* an owned tensor outlives the scope it was made in */
    nb_tensor *own = nb_tensor_new_unscoped(NB_SHAPE(2, 3), NB_F32, NB_CPU);
    NB_CK_OK(nb_fill_(own, 1));
    nb_scope_end(s);
    ck_assert(nb_item(nb_sum(own, NULL, 0, false)) == 6);
    /* a gradient set by hand, kept in place by zero_grad when asked */
    s = nb_scope_begin();
    NB_CK_OK(nb_set_requires_grad(own, true));
    nb_tensor *g = nb_full(NB_SHAPE(2, 3), 3, NB_F32);
    NB_CK_FAILS(nb_tensor_set_grad(own, nb_ones(NB_SHAPE(3, 2), NB_F32), false) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_tensor_set_grad(own, nb_ones(NB_SHAPE(2, 3), NB_F64), false) == NB_OK, NB_ERR_DTYPE);
    NB_CK_OK(nb_tensor_set_grad(own, g, true));
    NB_CK_OK(nb_backward(nb_sum(own, NULL, 0, false)));
    ck_assert_ptr_eq(nb_tensor_grad(own), g); /* accumulated into g itself */
    ck_assert(nb_item(nb_sum(g, NULL, 0, false)) == 24);
    nb_tensor_zero_grad(own);
    ck_assert_ptr_eq(nb_tensor_grad(own), g);
    ck_assert(nb_item(nb_sum(g, NULL, 0, false)) == 0);
    NB_CK_OK(nb_tensor_set_grad(own, NULL, false));
    ck_assert_ptr_null(nb_tensor_grad(own));
    NB_CK_FAILS(nb_tensor_set_grad(nb_mul(own, own), NULL, false) == NB_OK, NB_ERR_INVALID_ARG); /* not a leaf */
    nb_scope_end(s);
    nb_release(own);
}
END_TEST

/* What the optimizers, clipping and the loader call these forms with. */
START_TEST(test_callers_dtypes_and_grad_mode) {
    nb_scope *s = nb_scope_begin();
    /* clamp in place on bfloat16 (the binary kernel takes it for maximum/minimum) */
    nb_tensor *p = nb_zeros(NB_SHAPE(4), NB_BF16), *g = nb_from_data((float[]){-3, -0.5f, 0.25f, 9}, NB_SHAPE(4), NB_F32);
    NB_CK_OK(nb_set_requires_grad(p, true));
    NB_CK_OK(nb_tensor_set_grad(p, nb_to_dtype(g, NB_BF16), false));
    NB_CK_OK(nb_clip_grad_value_(&p, 1, 1.0));
    float got[4];
    NB_CK_OK(nb_to_host(nb_to_dtype(nb_tensor_grad(p), NB_F32), got, sizeof got));
    ck_assert(got[0] == -1 && got[1] == -0.5f && got[2] == 0.25f && got[3] == 1);
    double total = 0;
    NB_CK_OK(nb_clip_grad_norm_(&p, 1, 10.0, 2.0, &total));
    ck_assert_msg(fabs(total - sqrt(1 + 0.25 + 0.0625 + 1)) < 1e-2, "total %g", total);
    nb_tensor *h = nb_to_dtype(g, NB_F16);
    NB_CK_NOTNULL(nb_foreach_norm(&h, 1, 2.0)); /* 16-bit: norm by norm with ops */
    /* integer results that do not fit */
    nb_tensor *i = nb_ones(NB_SHAPE(3), NB_I64);
    NB_CK_FAILS(nb_div_(i, nb_ones(NB_SHAPE(3), NB_I64)) == NB_OK, NB_ERR_DTYPE); /* true division */
    NB_CK_FAILS(nb_mul_scalar_(i, 1.5) == NB_OK, NB_ERR_DTYPE);
    NB_CK_OK(nb_mul_scalar_(i, 3));
    ck_assert(nb_item(nb_sum(i, NULL, 0, false)) == 9);
    /* the loader gathers from a dataset whose x requires grad, grad mode on */
    nb_tensor *x = nb_arange(0, 8, 1, NB_F32), *y = nb_arange(0, 8, 1, NB_I64);
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_dataset *ds = nb_dataset_from_tensors(x, y);
    NB_CK_NOTNULL(ds);
    nb_loader *ld = nb_loader_new(ds, (nb_loader_options){.batch_size = 4});
    NB_CK_NOTNULL(ld);
    nb_batch b;
    int batches = 0;
    while (nb_loader_next(ld, &b)) batches++;
    ck_assert_msg(batches == 2 && nb_last_status() == NB_OK, "%d batches: %s", batches, nb_last_error());
    nb_loader_free(ld);
    nb_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

/* A step from user code clears an earlier call's error once, on entry, as
 * an op does (nb_op_take_fresh), then keeps its own. */
START_TEST(test_step_clears_a_stale_error) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_ones(NB_SHAPE(3), NB_F32);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_tensor_set_grad(w, nb_ones(NB_SHAPE(3), NB_F32), false));
    nb_optimizer *opt = nb_adam_params((nb_tensor *[]){w}, 1, (nb_adam_options){0});
    NB_CK_NOTNULL(opt);
    nb_set_error(NB_ERR_SHAPE, "a stale error from an earlier call");
    NB_CK_OK(nb_optimizer_step(opt)); /* valid: the stale error goes */
    ck_assert_int_eq(nb_last_status(), NB_OK);
    nb_optimizer_free(opt);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_foreach(void) {
    Suite *s = suite_create("ops_foreach");
    TCase *c = tcase_create("ops_foreach");
    tcase_add_test(c, test_inplace_binary_matches_out_of_place);
    tcase_add_test(c, test_inplace_and_autograd);
    tcase_add_test(c, test_index_select_out);
    tcase_add_test(c, test_foreach_norm_and_mul);
    tcase_add_test(c, test_fused_adam_is_per_parameter);
    tcase_add_test(c, test_extension_tensors);
    tcase_add_test(c, test_callers_dtypes_and_grad_mode);
    tcase_add_test(c, test_step_clears_a_stale_error);
    suite_add_tcase(s, c);
    return s;
}
