/* test_ops_sort.c - sort, argsort, topk and kthvalue: hand-computed values
 * and indices (stability of equal keys ascending and descending, NaN last
 * ascending and first descending, every dtype, strided input, long lines
 * that reach the merge passes), error paths, gradchecks of the values of
 * each op, and the same bits at 1 and 2 threads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static void ck_idx(const nb_tensor *t, const int64_t *want, int64_t n) {
    ck_assert_int_eq(nb_dtype_of(t), NB_I64);
    ck_assert_int_eq(nb_numel(t), n);
    int64_t got[256];
    NB_CK_OK(nb_to_host(t, got, sizeof got));
    for (int64_t i = 0; i < n; i++) ck_assert_msg(got[i] == want[i], "index %lld: got %lld want %lld", (long long)i,
                                                 (long long)got[i], (long long)want[i]);
}

START_TEST(test_sort_stable) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){3, 1, 2, 1, 3});
    nb_tensor *v, *i;
    NB_CK_OK(nb_sort(x, 0, false, true, &v, &i));
    nb_ck_close(v, (double[]){1, 1, 2, 3, 3}, 5, 0, 0);
    ck_idx(i, (int64_t[]){1, 3, 2, 0, 4}, 5);
    NB_CK_OK(nb_sort(x, -1, true, false, &v, &i));
    nb_ck_close(v, (double[]){3, 3, 2, 1, 1}, 5, 0, 0);
    ck_idx(i, (int64_t[]){0, 4, 2, 1, 3}, 5);
    /* every dtype, along dim 0 of a [3, 2] */
    nb_dtype dts[] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8};
    for (int k = 0; k < 5; k++) {
        nb_tensor *y = nb_test_tensor(NB_SHAPE(3, 2), dts[k], (double[]){5, 0, 1, 7, 5, 0});
        NB_CK_OK(nb_sort(y, 0, false, true, &v, &i));
        ck_assert_int_eq(nb_dtype_of(v), dts[k]);
        nb_ck_close(v, (double[]){1, 0, 5, 0, 5, 7}, 6, 0, 0);
        ck_idx(i, (int64_t[]){1, 0, 0, 2, 2, 1}, 6);
        NB_CK_OK(nb_sort(y, 0, true, true, &v, NULL));
        nb_ck_close(v, (double[]){5, 7, 5, 0, 1, 0}, 6, 0, 0);
    }
    nb_tensor *bl = nb_from_data((bool[]){1, 0, 1, 0}, NB_SHAPE(4), NB_BOOL);
    NB_CK_OK(nb_sort(bl, 0, false, true, &v, &i));
    nb_ck_close(v, (double[]){0, 0, 1, 1}, 4, 0, 0);
    ck_idx(i, (int64_t[]){1, 3, 0, 2}, 4);
    /* a long line (merge passes) with 3 distinct keys: stable in both orders */
    double kv[100];
    for (int k = 0; k < 100; k++) kv[k] = (k * 7) % 3;
    nb_tensor *l = nb_test_tensor(NB_SHAPE(100), NB_F32, kv);
    for (int desc = 0; desc < 2; desc++) {
        NB_CK_OK(nb_sort(l, 0, desc, true, &v, &i));
        int64_t want[100], n = 0;
        for (int key = 0; key < 3; key++)
            for (int k = 0; k < 100; k++)
                if (kv[k] == (desc ? 2 - key : key)) want[n++] = k;
        ck_idx(i, want, 100);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(test_sort_nan) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(6), NB_F32, (double[]){2, NAN, -INFINITY, NAN, 0, INFINITY});
    nb_tensor *v, *i;
    double got[6];
    NB_CK_OK(nb_sort(x, 0, false, true, &v, &i));
    ck_idx(i, (int64_t[]){2, 4, 0, 5, 1, 3}, 6);
    nb_test_values(v, got, 6);
    ck_assert(isinf(got[0]) && got[0] < 0 && got[1] == 0 && got[2] == 2 && isinf(got[3]) && isnan(got[4]) &&
              isnan(got[5]));
    NB_CK_OK(nb_sort(x, 0, true, true, &v, &i));
    ck_idx(i, (int64_t[]){1, 3, 5, 0, 4, 2}, 6);
    /* topk largest takes the NaNs first; smallest never */
    NB_CK_OK(nb_topk(x, 3, 0, true, true, &v, &i));
    ck_idx(i, (int64_t[]){1, 3, 5}, 3);
    NB_CK_OK(nb_topk(x, 2, 0, false, true, NULL, &i));
    ck_idx(i, (int64_t[]){2, 4}, 2);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_argsort_strided) {
    nb_scope *s = nb_scope_begin();
    /* x^T of [[4, 1], [2, 2], [0, 9]] is [[4, 2, 0], [1, 2, 9]] (strided rows) */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3, 2), NB_I64, (double[]){4, 1, 2, 2, 0, 9});
    nb_tensor *t = nb_transpose(x, 0, 1);
    ck_idx(nb_argsort(t, -1, false), (int64_t[]){2, 1, 0, 0, 1, 2}, 6);
    ck_idx(nb_argsort(t, 1, true), (int64_t[]){0, 1, 2, 2, 1, 0}, 6);
    ck_idx(nb_argsort(t, 0, false), (int64_t[]){1, 0, 0, 0, 1, 1}, 6);
    /* 0-d and empty inputs */
    nb_tensor *v, *i;
    NB_CK_OK(nb_sort(nb_scalar(3, NB_F64), 0, false, true, &v, &i));
    ck_assert_int_eq(nb_dim(v), 0);
    ck_assert(nb_item(v) == 3 && nb_item(i) == 0);
    NB_CK_OK(nb_sort(nb_zeros(NB_SHAPE(2, 0), NB_F32), 1, false, true, &v, &i));
    nb_ck_shape(i, 2, (int64_t[]){2, 0});
    nb_scope_end(s);
}
END_TEST

START_TEST(test_topk_kthvalue) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, 5, 3, 5, 2});
    nb_tensor *v, *i;
    NB_CK_OK(nb_topk(x, 3, 0, true, true, &v, &i));
    nb_ck_close(v, (double[]){5, 5, 3}, 3, 0, 0);
    ck_idx(i, (int64_t[]){1, 3, 2}, 3);
    NB_CK_OK(nb_topk(x, 2, -1, false, false, &v, &i));
    nb_ck_close(v, (double[]){1, 2}, 2, 0, 0);
    ck_idx(i, (int64_t[]){0, 4}, 2);
    NB_CK_OK(nb_topk(x, 0, 0, true, true, &v, &i));
    nb_ck_shape(v, 1, (int64_t[]){0});
    /* [2, 3] along dim 0 and 1 */
    nb_tensor *y = nb_test_tensor(NB_SHAPE(2, 3), NB_I32, (double[]){4, 8, 1, 6, 2, 1});
    NB_CK_OK(nb_topk(y, 1, 0, true, true, &v, &i));
    nb_ck_shape(v, 2, (int64_t[]){1, 3});
    nb_ck_close(v, (double[]){6, 8, 1}, 3, 0, 0);
    ck_idx(i, (int64_t[]){1, 0, 0}, 3);
    NB_CK_OK(nb_topk(y, 2, 1, true, true, &v, &i));
    nb_ck_close(v, (double[]){8, 4, 6, 2}, 4, 0, 0);
    ck_idx(i, (int64_t[]){1, 0, 0, 1}, 4);
    /* kthvalue, 1-based k-th smallest */
    nb_tensor *z = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){3, 1, 2, 1, 3});
    int64_t ks[] = {1, 2, 3, 4, 5}, wi[] = {1, 3, 2, 0, 4};
    double wv[] = {1, 1, 2, 3, 3};
    for (int k = 0; k < 5; k++) {
        NB_CK_OK(nb_kthvalue(z, ks[k], 0, false, &v, &i));
        ck_assert_int_eq(nb_dim(v), 0);
        ck_assert(nb_item(v) == wv[k] && nb_item(i) == (double)wi[k]);
    }
    NB_CK_OK(nb_kthvalue(y, 2, 1, true, &v, &i));
    nb_ck_shape(v, 2, (int64_t[]){2, 1});
    nb_ck_close(v, (double[]){4, 2}, 2, 0, 0);
    ck_idx(i, (int64_t[]){0, 1}, 2);
    NB_CK_OK(nb_kthvalue(y, 1, 0, false, &v, &i));
    nb_ck_shape(v, 1, (int64_t[]){3});
    nb_ck_close(v, (double[]){4, 2, 1}, 3, 0, 0);
    ck_idx(i, (int64_t[]){0, 1, 0}, 3);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_sort_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F32), *v, *i;
    NB_CK_FAILS(nb_sort(x, 2, false, true, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "sort"));
    NB_CK_FAILS(nb_argsort(x, -3, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_topk(x, 4, 1, true, true, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "topk"));
    NB_CK_FAILS(nb_topk(x, -1, 1, true, true, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_kthvalue(x, 0, 1, false, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "kthvalue"));
    NB_CK_FAILS(nb_kthvalue(x, 3, 0, false, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(v);
    NB_CK_FAILS(nb_sort(NULL, 0, false, true, &v, &i) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- gradients --------------------------------------------------------------------- */

typedef struct {
    int op, dim;
    int64_t k;
    bool flag;
} sort_ctx;

static nb_tensor *f_sort(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const sort_ctx *c = ctx;
    nb_tensor *v = NULL;
    nb_status st = c->op == 0   ? nb_sort(in[0], c->dim, c->flag, true, &v, NULL)
                   : c->op == 1 ? nb_topk(in[0], c->k, c->dim, c->flag, true, &v, NULL)
                                : nb_kthvalue(in[0], c->k, c->dim, c->flag, &v, NULL);
    return st == NB_OK ? v : NULL;
}

START_TEST(test_sort_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(3, 5), 1);
    sort_ctx cs[] = {{0, 1, 0, false}, {0, 0, 0, true}, {1, 1, 2, true}, {1, 0, 2, false},
                     {2, 1, 3, false}, {2, 0, 1, true}, {2, -1, 5, true}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) nb_ck_gradcheck(f_sort, &x, 1, &cs[k]);
    /* by hand: the gradient lands on the source positions */
    nb_tensor *y = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0.5, -1, 3, 2});
    NB_CK_OK(nb_set_requires_grad(y, true));
    nb_tensor *v;
    NB_CK_OK(nb_topk(y, 2, 0, true, true, &v, NULL));
    NB_CK_OK(nb_backward_with(v, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){10, 20})));
    nb_ck_close(nb_tensor_grad(y), (double[]){0, 0, 10, 20}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* Sorts [rows, cols] with many ties at `threads` threads; indices to host. */
static void sort_bits(int threads, int64_t rows, int64_t cols, int64_t *out, float *keys) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(7);
    nb_tensor *x = nb_mul_scalar(nb_randn(NB_SHAPE(rows, cols), NB_F32, &g), 3);
    nb_tensor *xr = nb_to_dtype(nb_to_dtype(x, NB_I32), NB_F32); /* rounded: ties */
    nb_tensor *i;
    NB_CK_OK(nb_sort(xr, 1, true, true, NULL, &i));
    NB_CK_OK(nb_to_host(i, out, sizeof(int64_t) * (size_t)(rows * cols)));
    NB_CK_OK(nb_to_host(xr, keys, sizeof(float) * (size_t)(rows * cols)));
    nb_scope_end(s);
}

START_TEST(test_sort_deterministic) {
    int prev = nb_get_num_threads();
    int64_t rows = 64, cols = 3000;
    int64_t *a = malloc(sizeof(int64_t) * (size_t)(rows * cols)), *b = malloc(sizeof(int64_t) * (size_t)(rows * cols));
    float *k = malloc(sizeof(float) * (size_t)(rows * cols));
    ck_assert(a && b && k);
    sort_bits(1, rows, cols, a, k);
    sort_bits(2, rows, cols, b, k);
    ck_assert_int_eq(memcmp(a, b, sizeof(int64_t) * (size_t)(rows * cols)), 0);
    /* and it is a stable descending order: keys fall, ties keep index order */
    for (int64_t r = 0; r < rows; r++) {
        const float *kr = k + r * cols;
        const int64_t *ar = a + r * cols;
        for (int64_t c = 1; c < cols; c++)
            ck_assert(kr[ar[c - 1]] > kr[ar[c]] || (kr[ar[c - 1]] == kr[ar[c]] && ar[c - 1] < ar[c]));
    }
    free(a), free(b), free(k);
    nb_set_num_threads(prev);
}
END_TEST

/* Regression (issue 13): a 0-d input is one element and takes dim -1. */
START_TEST(test_sort_0d_negative_dim) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *z = nb_scalar(3, NB_F32), *v = NULL, *i = NULL;
    for (int dim = -1; dim <= 0; dim++) {
        NB_CK_OK(nb_sort(z, dim, false, true, &v, &i));
        ck_assert_int_eq(nb_dim(v), 0);
        ck_assert(nb_item(v) == 3 && nb_item(i) == 0);
        ck_assert(nb_item(nb_argsort(z, dim, true)) == 0);
        NB_CK_OK(nb_topk(z, 1, dim, true, true, &v, &i));
        ck_assert(nb_item(v) == 3 && nb_item(i) == 0);
        NB_CK_OK(nb_kthvalue(z, 1, dim, false, &v, &i));
        ck_assert(nb_item(v) == 3 && nb_item(i) == 0);
    }
    NB_CK_FAILS(nb_argsort(z, 1, false), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_argsort(z, -2, false), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_sort(void) {
    Suite *s = suite_create("ops_sort");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_sort_stable);
    tcase_add_test(f, test_sort_0d_negative_dim);
    tcase_add_test(f, test_sort_nan);
    tcase_add_test(f, test_argsort_strided);
    tcase_add_test(f, test_topk_kthvalue);
    tcase_add_test(f, test_sort_errors);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_sort_gradcheck);
    tcase_add_test(g, test_sort_deterministic);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
