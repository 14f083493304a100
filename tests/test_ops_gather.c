/* test_ops_gather.c - gather, scatter (tensor and scalar), scatter_add,
 * scatter_reduce (every reduce, include_self both ways) and take_along_dim:
 * PyTorch's documented examples and hand-computed values, gradchecks (every
 * op and input, including prod with zeros), index and shape errors, and the
 * same bits at 1 and 2 threads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *idx(int ndim, const int64_t *shape, const int64_t *v) {
    nb_tensor *t = nb_from_data(v, ndim, shape, NB_I64);
    NB_CK_NOTNULL(t);
    return t;
}

static nb_tensor *f64(int ndim, const int64_t *shape, const double *v) { return nb_test_tensor(ndim, shape, NB_F64, v); }

START_TEST(test_gather_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = f64(NB_SHAPE(2, 2), (double[]){1, 2, 3, 4});
    /* torch.gather's doc example */
    nb_ck_close(nb_gather(t, 1, idx(NB_SHAPE(2, 2), (int64_t[]){0, 0, 1, 0})), (double[]){1, 1, 4, 3}, 4, 0, 0);
    nb_ck_close(nb_gather(t, 0, idx(NB_SHAPE(1, 2), (int64_t[]){1, 0})), (double[]){3, 2}, 2, 0, 0);
    nb_ck_close(nb_gather(t, -1, idx(NB_SHAPE(1, 3), (int64_t[]){1, 1, 0})), (double[]){2, 2, 1}, 3, 0, 0);
    /* every dtype; a transposed input */
    nb_dtype dts[] = {NB_F32, NB_I32, NB_I64, NB_U8, NB_BOOL};
    for (int k = 0; k < 5; k++) {
        nb_tensor *y = nb_transpose(nb_to_dtype(f64(NB_SHAPE(2, 3), (double[]){1, 0, 3, 4, 5, 0}), dts[k]), 0, 1);
        nb_tensor *g = nb_gather(y, 0, idx(NB_SHAPE(2, 2), (int64_t[]){2, 0, 1, 1}));
        ck_assert_int_eq(nb_dtype_of(g), dts[k]);
        nb_ck_close(g, dts[k] == NB_BOOL ? (double[]){1, 1, 0, 1} : (double[]){3, 4, 0, 5}, 4, 0, 0);
    }
    nb_scope_end(s);
}
END_TEST

/* 3-d along the middle dim against naive host loops; index smaller than
 * the input outside dim, src larger than the index. */
START_TEST(test_gather_scatter_3d) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_randn(NB_SHAPE(3, 4, 5), NB_F64, &g), *src = nb_randn(NB_SHAPE(3, 6, 5), NB_F64, &g);
    nb_tensor *ix = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(2, 6, 4), NB_F64, &g), 4), NB_I64);
    double xv[60], sv[90], got[60], want[60];
    int64_t iv[48];
    nb_test_values(x, xv, 60);
    nb_test_values(src, sv, 90);
    NB_CK_OK(nb_to_host(ix, iv, sizeof iv));
    nb_test_values(nb_gather(x, 1, ix), got, 48);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 6; b++)
            for (int c = 0; c < 4; c++)
                ck_assert(got[(a * 6 + b) * 4 + c] == xv[(a * 4 + iv[(a * 6 + b) * 4 + c]) * 5 + c]);
    memcpy(want, xv, sizeof want);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 6; b++)
            for (int c = 0; c < 4; c++) want[(a * 4 + iv[(a * 6 + b) * 4 + c]) * 5 + c] += sv[(a * 6 + b) * 5 + c];
    nb_ck_close(nb_scatter_add(x, 1, ix, src), want, 60, 1e-14, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_scatter_forward) {
    nb_scope *s = nb_scope_begin();
    /* Tensor.scatter_'s doc examples */
    nb_tensor *src = nb_reshape(nb_arange(1, 11, 1, NB_F64), NB_SHAPE(2, 5));
    nb_tensor *z = nb_zeros(NB_SHAPE(3, 5), NB_F64);
    nb_ck_close(nb_scatter(z, 0, idx(NB_SHAPE(1, 4), (int64_t[]){0, 1, 2, 0}), src),
                (double[]){1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}, 15, 0, 0);
    nb_ck_close(nb_scatter(z, 1, idx(NB_SHAPE(2, 3), (int64_t[]){0, 1, 2, 0, 1, 4}), src),
                (double[]){1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0}, 15, 0, 0);
    nb_ck_close(nb_scatter_value(nb_full(NB_SHAPE(2, 4), 2, NB_F64), 1, idx(NB_SHAPE(2, 1), (int64_t[]){2, 3}), 1.23),
                (double[]){2, 2, 1.23, 2, 2, 2, 2, 1.23}, 8, 0, 0);
    /* duplicates: the last source in index order wins; self is unchanged */
    nb_tensor *x = f64(NB_SHAPE(3), (double[]){7, 8, 9});
    nb_ck_close(nb_scatter(x, 0, idx(NB_SHAPE(3), (int64_t[]){2, 0, 2}), f64(NB_SHAPE(3), (double[]){1, 2, 3})),
                (double[]){2, 8, 3}, 3, 0, 0);
    nb_ck_close(x, (double[]){7, 8, 9}, 3, 0, 0);
    nb_tensor *b = nb_scatter_value(nb_zeros(NB_SHAPE(4), NB_BOOL), 0, idx(NB_SHAPE(2), (int64_t[]){3, 1}), 1);
    nb_ck_close(b, (double[]){0, 1, 0, 1}, 4, 0, 0);
    /* scatter_add's doc examples */
    nb_tensor *ones = nb_ones(NB_SHAPE(2, 5), NB_F64);
    nb_ck_close(nb_scatter_add(z, 0, idx(NB_SHAPE(1, 5), (int64_t[]){0, 1, 2, 0, 0}), ones),
                (double[]){1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}, 15, 0, 0);
    nb_ck_close(nb_scatter_add(z, 0, idx(NB_SHAPE(2, 5), (int64_t[]){0, 1, 2, 0, 0, 0, 1, 2, 2, 2}), ones),
                (double[]){2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1}, 15, 0, 0);
    nb_ck_close(nb_scatter_add(nb_zeros(NB_SHAPE(3), NB_I32), 0, idx(NB_SHAPE(3), (int64_t[]){1, 1, 0}),
                               nb_full(NB_SHAPE(3), 4, NB_I32)),
                (double[]){4, 8, 0}, 3, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* scatter_reduce on input [1, 2, 3, 4], src [1..6], index [0, 1, 0, 1, 2, 1]:
 * destination 0 gets {1, 3}, 1 gets {2, 4, 6}, 2 gets {5}, 3 nothing. */
START_TEST(test_scatter_reduce_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in = f64(NB_SHAPE(4), (double[]){1, 2, 3, 4}), *src = f64(NB_SHAPE(6), (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *ix = idx(NB_SHAPE(6), (int64_t[]){0, 1, 0, 1, 2, 1});
    const char *names[] = {"sum", "prod", "mean", "amax", "amin"};
    double incl[5][4] = {{5, 14, 8, 4}, {3, 96, 15, 4}, {5.0 / 3, 3.5, 4, 4}, {3, 6, 5, 4}, {1, 2, 3, 4}};
    double excl[5][4] = {{4, 12, 5, 4}, {3, 48, 5, 4}, {2, 4, 5, 4}, {3, 6, 5, 4}, {1, 2, 5, 4}};
    for (int k = 0; k < 5; k++) {
        nb_ck_close(nb_scatter_reduce(in, 0, ix, src, names[k], true), incl[k], 4, 1e-15, 0);
        nb_ck_close(nb_scatter_reduce(in, 0, ix, src, names[k], false), excl[k], 4, 1e-15, 0);
        nb_ck_close(nb_scatter_reduce(nb_to_dtype(in, NB_F32), 0, ix, nb_to_dtype(src, NB_F32), names[k], false),
                    excl[k], 4, 1e-6, 0);
    }
    /* integers: mean rounds down (floor, also below zero) */
    nb_tensor *ii = nb_to_dtype(in, NB_I64), *is = nb_to_dtype(src, NB_I64);
    nb_ck_close(nb_scatter_reduce(ii, 0, ix, is, "mean", true), (double[]){1, 3, 4, 4}, 4, 0, 0);
    nb_ck_close(nb_scatter_reduce(ii, 0, ix, is, "prod", true), (double[]){3, 96, 15, 4}, 4, 0, 0);
    nb_ck_close(nb_scatter_reduce(nb_to_dtype(f64(NB_SHAPE(1), (double[]){-7}), NB_I32), 0,
                                  idx(NB_SHAPE(1), (int64_t[]){0}), nb_to_dtype(f64(NB_SHAPE(1), (double[]){0}), NB_I32),
                                  "mean", true),
                (double[]){-4}, 1, 0, 0);
    /* amax/amin propagate NaN; 2-D along dim 1 */
    nb_tensor *n = nb_scatter_reduce(in, 0, ix, f64(NB_SHAPE(6), (double[]){1, NAN, 3, 4, 5, 6}), "amax", true);
    double got[4];
    nb_test_values(n, got, 4);
    ck_assert(got[0] == 3 && isnan(got[1]) && got[2] == 5 && got[3] == 4);
    nb_tensor *m = nb_scatter_reduce(nb_zeros(NB_SHAPE(2, 2), NB_F64), 1, idx(NB_SHAPE(2, 2), (int64_t[]){1, 1, 0, 1}),
                                     f64(NB_SHAPE(2, 3), (double[]){3, 5, 9, -1, 2, 9}), "amin", false);
    nb_ck_close(m, (double[]){0, 3, -1, 2}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_take_along_dim) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = f64(NB_SHAPE(2, 3), (double[]){10, 30, 20, 60, 40, 50});
    /* with argsort: the sorted values (the doc's use) */
    nb_ck_close(nb_take_along_dim(x, nb_argsort(x, 1, false), 1), (double[]){10, 20, 30, 40, 50, 60}, 6, 0, 0);
    /* indices [1, 2] broadcast over the rows */
    nb_tensor *r = nb_take_along_dim(x, idx(NB_SHAPE(1, 2), (int64_t[]){2, 0}), 1);
    nb_ck_shape(r, 2, (int64_t[]){2, 2});
    nb_ck_close(r, (double[]){20, 10, 50, 60}, 4, 0, 0);
    /* input [1, 3] broadcast over indices [2, 1] along dim 1 */
    nb_tensor *r2 = nb_take_along_dim(f64(NB_SHAPE(1, 3), (double[]){1, 2, 3}), idx(NB_SHAPE(2, 1), (int64_t[]){2, 0}), 1);
    nb_ck_shape(r2, 2, (int64_t[]){2, 1});
    nb_ck_close(r2, (double[]){3, 1}, 2, 0, 0);
    /* dim=None: flattened */
    nb_tensor *r3 = nb_take_along_dim(x, idx(NB_SHAPE(3), (int64_t[]){5, 0, 3}), NB_DIM_NONE);
    nb_ck_close(r3, (double[]){50, 10, 60}, 3, 0, 0);
    NB_CK_FAILS(nb_take_along_dim(x, idx(NB_SHAPE(3), (int64_t[]){0, 1, 2}), 1), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_take_along_dim(x, idx(NB_SHAPE(3, 1), (int64_t[]){0, 1, 2}), 1), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_take_along_dim(x, idx(NB_SHAPE(1, 1), (int64_t[]){3}), 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "take_along_dim"));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_gather_scatter_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F64), *src = nb_ones(NB_SHAPE(2, 3), NB_F64);
    nb_tensor *bad = idx(NB_SHAPE(1, 2), (int64_t[]){0, 3});
    NB_CK_FAILS(nb_gather(x, 1, bad), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "gather"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index 3"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "size 3"));
    NB_CK_FAILS(nb_gather(x, 0, idx(NB_SHAPE(1, 1), (int64_t[]){-1})), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index -1"));
    NB_CK_FAILS(nb_scatter(x, 1, bad, src), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "scatter: index 3"));
    NB_CK_FAILS(nb_scatter_add(x, 0, bad, src), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "scatter_add: index 3 is out of bounds for dim 0 with size 2"));
    NB_CK_FAILS(nb_scatter_reduce(x, 1, bad, src, "amax", true), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "scatter_reduce"));
    NB_CK_FAILS(nb_scatter_value(x, 1, bad, 1), NB_ERR_INVALID_ARG);
    /* dtypes, shapes, dims, reduce names */
    nb_tensor *i32 = nb_to_dtype(idx(NB_SHAPE(1, 2), (int64_t[]){1, 0}), NB_I32), *ok = idx(NB_SHAPE(1, 2), (int64_t[]){0, 1});
    /* int32 indices, as PyTorch 2.x */
    double *xv = nb_test_values_of(x);
    nb_ck_close(nb_gather(x, 1, i32), (double[]){xv[1], xv[0]}, 2, 0, 0);
    free(xv);
    NB_CK_NOTNULL(nb_scatter_add(x, 1, i32, nb_ones(NB_SHAPE(1, 2), nb_dtype_of(x))));
    NB_CK_FAILS(nb_gather(x, 1, nb_zeros(NB_SHAPE(1, 2), NB_U8)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_gather(x, 1, idx(NB_SHAPE(2), (int64_t[]){0, 1})), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_gather(x, 1, idx(NB_SHAPE(3, 1), (int64_t[]){0, 1, 0})), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_gather(x, 2, ok), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_scatter(x, 1, ok, nb_ones(NB_SHAPE(1, 1), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_scatter(x, 1, ok, nb_ones(NB_SHAPE(2, 3), NB_F32)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_scatter_reduce(x, 1, ok, src, "max", true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_scatter_reduce(x, 1, ok, src, NULL, true), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_scatter_add(nb_zeros(NB_SHAPE(1, 2), NB_BOOL), 1, ok, nb_ones(NB_SHAPE(1, 2), NB_BOOL)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_scatter(x, 1, ok, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_gather(nb_scalar(1, NB_F64), 0, nb_scalar(0, NB_I64)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients --------------------------------------------------------------------------- */

typedef struct {
    int op, dim;
    nb_tensor *index;
    const char *reduce;
    bool include_self;
} gs_ctx;

static nb_tensor *f_gs(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const gs_ctx *c = ctx;
    switch (c->op) {
    case 0: return nb_gather(in[0], c->dim, c->index);
    case 1: return nb_scatter(in[0], c->dim, c->index, in[1]);
    case 2: return nb_scatter_value(in[0], c->dim, c->index, 0.5);
    case 3: return nb_scatter_add(in[0], c->dim, c->index, in[1]);
    case 4: return nb_scatter_reduce(in[0], c->dim, c->index, in[1], c->reduce, c->include_self);
    default: return nb_take_along_dim(in[0], c->index, c->dim);
    }
}

START_TEST(test_gather_scatter_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3, 4), 1);
    nb_tensor *dup = idx(NB_SHAPE(2, 3), (int64_t[]){0, 2, 2, 1, 1, 0}); /* repeats within rows and columns */
    gs_ctx g0 = {0, 0, dup, NULL, false}, g1 = {0, 1, dup, NULL, false};
    nb_ck_gradcheck(f_gs, &x, 1, &g0);
    nb_ck_gradcheck(f_gs, &x, 1, &g1);
    /* scatter: distinct targets per line (a lost duplicate would have a zero numerical gradient) */
    nb_tensor *perm = idx(NB_SHAPE(2, 3), (int64_t[]){3, 0, 2, 1, 2, 0});
    nb_tensor *in2[2] = {x, nb_test_randn_grad(NB_SHAPE(2, 4), 2)};
    gs_ctx sc = {1, 1, perm, NULL, false}, sv = {2, 1, perm, NULL, false};
    nb_ck_gradcheck(f_gs, in2, 2, &sc);
    nb_ck_gradcheck(f_gs, &x, 1, &sv);
    gs_ctx sa0 = {3, 0, dup, NULL, false}, sa1 = {3, 1, dup, NULL, false};
    nb_ck_gradcheck(f_gs, in2, 2, &sa0);
    nb_ck_gradcheck(f_gs, in2, 2, &sa1);
    const char *names[] = {"sum", "mean", "amax", "amin", "prod"};
    for (int k = 0; k < 5; k++)
        for (int incl = 0; incl < 2; incl++) {
            gs_ctx r0 = {4, 0, dup, names[k], incl}, r1 = {4, 1, dup, names[k], incl};
            nb_ck_gradcheck(f_gs, in2, 2, &r0);
            nb_ck_gradcheck(f_gs, in2, 2, &r1);
        }
    /* prod with zeros: a single zero in a group, two zeros in a group, a zero in self */
    nb_tensor *self = f64(NB_SHAPE(3), (double[]){0, 1.5, -2}), *src = f64(NB_SHAPE(5), (double[]){0, 2, 0.5, 0, 0});
    NB_CK_OK(nb_set_requires_grad(self, true));
    NB_CK_OK(nb_set_requires_grad(src, true));
    nb_tensor *pin[2] = {self, src};
    nb_tensor *pix = idx(NB_SHAPE(5), (int64_t[]){0, 0, 1, 2, 2});
    for (int incl = 0; incl < 2; incl++) {
        gs_ctx p = {4, 0, pix, "prod", incl};
        nb_ck_gradcheck(f_gs, pin, 2, &p);
    }
    /* take_along_dim with broadcasting */
    gs_ctx t = {5, 1, idx(NB_SHAPE(1, 2), (int64_t[]){3, 3}), NULL, false};
    nb_ck_gradcheck(f_gs, &x, 1, &t);
    /* amax ties share the gradient: self 2 and both sources equal 2 */
    nb_tensor *a = f64(NB_SHAPE(1), (double[]){2}), *b = f64(NB_SHAPE(3), (double[]){2, 1, 2});
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward(nb_sum(nb_scatter_reduce(a, 0, idx(NB_SHAPE(3), (int64_t[]){0, 0, 0}), b, "amax", true), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(a), (double[]){1.0 / 3}, 1, 1e-15, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){1.0 / 3, 0, 1.0 / 3}, 3, 1e-15, 0);
    nb_scope_end(s);
}
END_TEST

/* scatter_add of many duplicates and the gather backward at `threads`. */
static void scatter_bits(int threads, int64_t rows, int64_t cols, float *out, float *gout) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(11);
    nb_tensor *src = nb_randn(NB_SHAPE(rows, cols), NB_F32, &g);
    nb_tensor *ix = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(rows, cols), NB_F32, &g), 16), NB_I64);
    NB_CK_OK(nb_to_host(nb_scatter_add(nb_zeros(NB_SHAPE(rows, 16), NB_F32), 1, ix, src), out,
                        sizeof(float) * (size_t)(rows * 16)));
    nb_tensor *w = nb_randn(NB_SHAPE(rows, 16), NB_F32, &g);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_gather(w, 1, ix), src), NULL, 0, false)));
    NB_CK_OK(nb_to_host(nb_tensor_grad(w), gout, sizeof(float) * (size_t)(rows * 16)));
    nb_scope_end(s);
}

START_TEST(test_scatter_deterministic) {
    int prev = nb_get_num_threads();
    int64_t rows = 64, cols = 4096, n = rows * 16;
    float *a = malloc(sizeof(float) * (size_t)n * 4);
    ck_assert_ptr_nonnull(a);
    scatter_bits(1, rows, cols, a, a + n);
    scatter_bits(2, rows, cols, a + 2 * n, a + 3 * n);
    ck_assert_int_eq(memcmp(a, a + 2 * n, sizeof(float) * (size_t)n * 2), 0);
    free(a);
    nb_set_num_threads(prev);
}
END_TEST

/* float16/bfloat16 move as 2-byte elements (review: they were copied byte by byte). */
START_TEST(test_gather_f16) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F32, (double[]){1, 2, 3});
    nb_tensor *idx = nb_test_tensor(NB_SHAPE(2), NB_I64, (double[]){2, 0});
    for (nb_dtype dt = NB_F16; dt <= NB_BF16; dt++) {
        nb_tensor *g = nb_gather(nb_to_dtype(x, dt), 0, idx);
        NB_CK_NOTNULL(g);
        ck_assert_int_eq(nb_dtype_of(g), dt);
        nb_ck_close(nb_to_dtype(g, NB_F32), (double[]){3, 1}, 2, 0, 0);
    }
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_gather(void) {
    Suite *s = suite_create("ops_gather");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_gather_forward);
    tcase_add_test(f, test_gather_scatter_3d);
    tcase_add_test(f, test_scatter_forward);
    tcase_add_test(f, test_scatter_reduce_forward);
    tcase_add_test(f, test_take_along_dim);
    tcase_add_test(f, test_gather_scatter_errors);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_gather_scatter_gradcheck);
    tcase_add_test(g, test_scatter_deterministic);
    tcase_add_test(g, test_gather_f16);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
