/* test_ops_random.c - nb_multinomial and nb_randint: the sampled
 * frequencies against the distribution (bounds of about 5 standard
 * deviations), distinct samples without replacement, zero-probability
 * categories never drawn, determinism by generator, ranges, dtypes and
 * errors. (PyTorch draws other numbers: the differential suite compares
 * shapes, dtypes and errors only.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

START_TEST(test_multinomial) {
    nb_scope *s = nb_scope_begin();
    const double p[4] = {0.1, 0.0, 0.6, 0.3};
    nb_tensor *probs = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 0, 6, 3}); /* unnormalized */
    enum { M = 20000 };
    for (int rep = 0; rep < 2; rep++) {
        nb_generator g = nb_generator_new(42);
        nb_tensor *rows = nb_expand(nb_unsqueeze(probs, 0), NB_SHAPE(M, 4));
        nb_tensor *draw = nb_multinomial(nb_contiguous(rows), 1, rep, &g);
        nb_ck_shape(draw, 2, (int64_t[]){M, 1});
        ck_assert_int_eq(nb_dtype_of(draw), NB_I64);
        double *v = nb_test_values_of(draw);
        int count[4] = {0};
        for (int i = 0; i < M; i++) count[(int)v[i]]++;
        free(v);
        ck_assert_int_eq(count[1], 0);
        for (int c = 0; c < 4; c++) {
            double sd = sqrt(M * p[c] * (1 - p[c])) + 1;
            ck_assert_msg(fabs(count[c] - M * p[c]) < 5 * sd, "category %d: %d draws of %d, p %g", c, count[c], M, p[c]);
        }
        /* the same generator state gives the same draws */
        nb_generator g2 = nb_generator_new(42);
        nb_tensor *again = nb_multinomial(nb_contiguous(rows), 1, rep, &g2);
        ck_assert(nb_item(nb_sum(nb_ne(draw, again), NULL, 0, false)) == 0);
        ck_assert_uint_eq(g.offset, g2.offset);
        ck_assert_uint_gt(g.offset, 0);
    }
    /* without replacement: distinct, all three nonzero categories */
    nb_generator g = nb_generator_new(7);
    for (int t = 0; t < 20; t++) {
        nb_tensor *d = nb_multinomial(probs, 3, false, &g);
        double v[3];
        nb_test_values(d, v, 3);
        ck_assert(v[0] != v[1] && v[1] != v[2] && v[0] != v[2]);
        ck_assert(v[0] != 1 && v[1] != 1 && v[2] != 1);
    }
    /* with replacement: many samples of a [N, C] batch */
    nb_tensor *b = nb_multinomial(nb_test_tensor(NB_SHAPE(2, 2), NB_F32, (double[]){1, 0, 0, 1}), 5, true, &g);
    double bv[10];
    nb_test_values(b, bv, 10);
    for (int i = 0; i < 5; i++) ck_assert(bv[i] == 0 && bv[5 + i] == 1);
    /* errors */
    NB_CK_FAILS(nb_multinomial(nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){-1, 2}), 1, true, NULL),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_multinomial(nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0, 0}), 1, true, NULL),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_multinomial(probs, 4, false, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_multinomial(probs, -1, true, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_multinomial(nb_ones(NB_SHAPE(2, 2, 2), NB_F32), 1, true, NULL), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_multinomial(nb_ones(NB_SHAPE(2), NB_I64), 1, true, NULL), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_randint) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    enum { M = 30000 };
    nb_tensor *r = nb_randint(-3, 4, NB_SHAPE(M), NB_I64, &g);
    ck_assert_int_eq(nb_dtype_of(r), NB_I64);
    double *v = nb_test_values_of(r);
    int count[7] = {0};
    for (int i = 0; i < M; i++) {
        ck_assert(v[i] >= -3 && v[i] < 4 && v[i] == floor(v[i]));
        count[(int)v[i] + 3]++;
    }
    free(v);
    for (int c = 0; c < 7; c++) ck_assert_msg(fabs(count[c] - M / 7.0) < 5 * sqrt(M / 7.0), "value %d: %d", c - 3, count[c]);
    nb_generator g2 = nb_generator_new(3);
    ck_assert(nb_item(nb_sum(nb_ne(r, nb_randint(-3, 4, NB_SHAPE(M), NB_I64, &g2)), NULL, 0, false)) == 0);
    ck_assert_int_eq(nb_dtype_of(nb_randint(0, 2, NB_SHAPE(3), NB_BOOL, NULL)), NB_BOOL);
    nb_tensor *f = nb_randint(10, 12, NB_SHAPE(100), NB_F32, NULL);
    double fv[100];
    nb_test_values(f, fv, 100);
    for (int i = 0; i < 100; i++) ck_assert(fv[i] == 10 || fv[i] == 11);
    /* the whole int64 range: no draw may round to 2^63 (undefined on the cast) */
    nb_tensor *w = nb_randint(INT64_MIN, INT64_MAX, NB_SHAPE(1000), NB_I64, NULL);
    ck_assert_ptr_nonnull(w);
    int64_t wv[1000];
    ck_assert_int_eq(nb_to_host(w, wv, sizeof wv), NB_OK);
    for (int i = 0; i < 1000; i++) ck_assert(wv[i] < INT64_MAX);
    NB_CK_FAILS(nb_randint(3, 3, NB_SHAPE(2), NB_I64, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_randint(0, 300, NB_SHAPE(2), NB_U8, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_randint(-1, 2, NB_SHAPE(2), NB_U8, NULL), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_randint(0, 2, 2, NULL, NB_I64, NULL), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_random(void) {
    Suite *s = suite_create("ops_random");
    TCase *c = tcase_create("sampling");
    tcase_add_test(c, test_multinomial);
    tcase_add_test(c, test_randint);
    tcase_set_timeout(c, 300);
    suite_add_tcase(s, c);
    return s;
}
