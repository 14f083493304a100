/* test_rng.c - the Philox generators: reproducibility (same seed, same
 * numbers; bitwise the same for any thread count), the layout of
 * core/philox.h (element i depends only on seed, offset and i), the
 * counter offset advancing between draws, the distributions' moments, and
 * randperm. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "philox_batch.h"
#include "philox.h"
#include "suites.h"

#define N_BIG 100000

static double *host_copy(const nb_tensor *t) {
    int64_t n = nb_numel(t);
    double *v = malloc(sizeof(double) * (size_t)n);
    ck_assert_ptr_nonnull(v);
    nb_test_values(t, v, n);
    return v;
}

static void moments(const double *v, int64_t n, double *mean, double *std) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *std = sqrt(ss / (double)(n - 1));
}

/* Bitwise equality of two tensors' contents (same dtype and numel). */
static bool same_bits(const nb_tensor *a, const nb_tensor *b) {
    size_t bytes = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    void *x = malloc(bytes ? bytes : 1), *y = malloc(bytes ? bytes : 1);
    ck_assert(x && y);
    NB_CK_OK(nb_to_host(a, x, bytes));
    NB_CK_OK(nb_to_host(b, y, bytes));
    bool same = memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

START_TEST(test_same_seed_same_numbers) {
    nb_scope *s = nb_scope_begin();
    const nb_dtype dts[2] = {NB_F32, NB_F64};
    for (int d = 0; d < 2; d++) {
        nb_generator g1 = nb_generator_new(7), g2 = nb_generator_new(7);
        ck_assert(same_bits(nb_randn(NB_SHAPE(33, 31), dts[d], &g1), nb_randn(NB_SHAPE(33, 31), dts[d], &g2)));
        ck_assert(same_bits(nb_rand(NB_SHAPE(1001), dts[d], &g1), nb_rand(NB_SHAPE(1001), dts[d], &g2)));
        ck_assert_uint_eq(g1.offset, g2.offset);
    }
    /* the default generator, through nb_manual_seed */
    nb_manual_seed(123);
    nb_tensor *a = nb_rand(NB_SHAPE(100), NB_F64, NULL);
    ck_assert_uint_eq(nb_default_generator()->seed, 123);
    ck_assert_uint_eq(nb_default_generator()->offset, 50);
    nb_manual_seed(123);
    nb_tensor *b = nb_rand(NB_SHAPE(100), NB_F64, NULL);
    ck_assert(same_bits(a, b));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_different_seeds_differ) {
    nb_scope *s = nb_scope_begin();
    nb_generator g1 = nb_generator_new(7), g2 = nb_generator_new(8);
    double *a = host_copy(nb_rand(NB_SHAPE(1000), NB_F64, &g1));
    double *b = host_copy(nb_rand(NB_SHAPE(1000), NB_F64, &g2));
    int equal = 0;
    for (int i = 0; i < 1000; i++) equal += a[i] == b[i];
    ck_assert_int_eq(equal, 0);
    free(a);
    free(b);
    nb_scope_end(s);
}
END_TEST

/* core/philox.h fixes the layout every backend follows: element i of a fill
 * at counter offset o uses the 64 bits nb_philox_bits(seed, o, i). */
START_TEST(test_philox_layout) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(0xC0FFEE);
    double *u = host_copy(nb_rand(NB_SHAPE(9), NB_F64, &g)); /* offset 0, takes 5 blocks */
    ck_assert_uint_eq(g.offset, 5);
    double *z = host_copy(nb_randn(NB_SHAPE(9), NB_F64, &g)); /* offset 5 */
    ck_assert_uint_eq(g.offset, 10);
    for (uint64_t i = 0; i < 9; i++) {
        ck_assert_double_eq(u[i], nb_bits_to_unit(nb_philox_bits(0xC0FFEE, 0, i)));
        ck_assert_double_eq_tol(z[i], nb_bits_to_normal(nb_philox_bits(0xC0FFEE, 5, i)), 1e-12);
    }
    free(u);
    free(z);
    /* known answers of the Philox4x32-10 block (Random123's kat_vectors) */
    nb_philox_u4 r = nb_philox4x32_10(0, 0, 0);
    ck_assert_uint_eq(r.v[0], 0x6627e8d5u);
    ck_assert_uint_eq(r.v[1], 0xe169c58du);
    ck_assert_uint_eq(r.v[2], 0xbc57ac4cu);
    ck_assert_uint_eq(r.v[3], 0x9b00dbd8u);
    /* counter 243f6a88 85a308d3 13198a2e 03707344, key a4093822 299f31d0 */
    r = nb_philox4x32_10(0x85a308d3243f6a88ULL, 0x0370734413198a2eULL, 0x299f31d0a4093822ULL);
    ck_assert_uint_eq(r.v[0], 0xd16cfe09u);
    ck_assert_uint_eq(r.v[1], 0x94fdccebu);
    ck_assert_uint_eq(r.v[2], 0x5001e420u);
    ck_assert_uint_eq(r.v[3], 0x24126ea1u);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_offset_advances) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(99);
    ck_assert_uint_eq(g.offset, 0);
    nb_tensor *a = nb_rand(NB_SHAPE(4), NB_F64, &g);
    ck_assert_uint_eq(g.offset, 2);
    nb_tensor *b = nb_rand(NB_SHAPE(4), NB_F64, &g);
    ck_assert_uint_eq(g.offset, 4);
    ck_assert(!same_bits(a, b));
    /* two draws of 4 are the two halves of one draw of 8 */
    nb_generator h = nb_generator_new(99);
    nb_tensor *c = nb_rand(NB_SHAPE(8), NB_F64, &h);
    ck_assert(same_bits(a, nb_narrow(c, 0, 0, 4)));
    ck_assert(same_bits(b, nb_narrow(c, 0, 4, 4)));
    /* an odd count rounds up to whole blocks */
    nb_rand(NB_SHAPE(3), NB_F32, &g);
    ck_assert_uint_eq(g.offset, 6);
    NB_CK_OK(nb_bernoulli_(nb_empty(NB_SHAPE(5), NB_U8), 0.5, &g));
    ck_assert_uint_eq(g.offset, 9);
    /* the default generator advances too */
    nb_manual_seed(5);
    nb_tensor *d1 = nb_randn(NB_SHAPE(10), NB_F64, NULL);
    nb_tensor *d2 = nb_randn(NB_SHAPE(10), NB_F64, NULL);
    ck_assert(!same_bits(d1, d2));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_uniform_range_and_mean) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(2024);
    const nb_dtype dts[2] = {NB_F64, NB_F32};
    for (int d = 0; d < 2; d++) {
        double *v = host_copy(nb_rand(NB_SHAPE(N_BIG), dts[d], &g));
        double lo = 1, hi = 0, mean, std;
        for (int i = 0; i < N_BIG; i++) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
        moments(v, N_BIG, &mean, &std);
        ck_assert(lo >= 0 && hi < 1);
        ck_assert_double_eq_tol(mean, 0.5, 0.01);
        ck_assert_double_eq_tol(std, sqrt(1.0 / 12), 0.01); /* U(0,1): std = 1/sqrt(12) */
        free(v);
    }
    nb_tensor *t = nb_empty(NB_SHAPE(N_BIG), NB_F64);
    NB_CK_OK(nb_uniform_(t, -2, 4, &g));
    double *v = host_copy(t), mean, std;
    for (int i = 0; i < N_BIG; i++) ck_assert(v[i] >= -2 && v[i] < 4);
    moments(v, N_BIG, &mean, &std);
    ck_assert_double_eq_tol(mean, 1, 0.05);
    free(v);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_normal_moments) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(77);
    double mean, std;
    double *v = host_copy(nb_randn(NB_SHAPE(N_BIG), NB_F64, &g));
    moments(v, N_BIG, &mean, &std);
    ck_assert_double_eq_tol(mean, 0, 0.02);
    ck_assert_double_eq_tol(std, 1, 0.02);
    free(v);
    nb_tensor *t = nb_empty(NB_SHAPE(N_BIG), NB_F32);
    NB_CK_OK(nb_normal_(t, 3, 2, &g));
    v = host_copy(t);
    moments(v, N_BIG, &mean, &std);
    ck_assert_double_eq_tol(mean, 3, 0.04);
    ck_assert_double_eq_tol(std, 2, 0.04);
    free(v);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_bernoulli) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    const nb_dtype dts[4] = {NB_F64, NB_F32, NB_I32, NB_BOOL};
    for (int d = 0; d < 4; d++) {
        nb_tensor *t = nb_empty(NB_SHAPE(N_BIG), dts[d]);
        NB_CK_OK(nb_bernoulli_(t, 0.3, &g));
        double *v = host_copy(t);
        int64_t ones = 0;
        for (int i = 0; i < N_BIG; i++) {
            ck_assert(v[i] == 0 || v[i] == 1);
            ones += v[i] == 1;
        }
        ck_assert_double_eq_tol((double)ones / N_BIG, 0.3, 0.01);
        free(v);
    }
    /* element i is 1 exactly when its uniform draw is below p (integer compare in the kernel) */
    nb_generator g2 = nb_generator_new(77);
    const double ps[3] = {0.3, 1.0 / 3.0, 0.5};
    for (int k = 0; k < 3; k++) {
        uint64_t off = g2.offset;
        nb_tensor *b = nb_empty(NB_SHAPE(1001), k == 1 ? NB_U8 : NB_F32);
        NB_CK_OK(nb_bernoulli_(b, ps[k], &g2));
        double *v = host_copy(b);
        for (uint64_t i = 0; i < 1001; i++)
            ck_assert_double_eq(v[i], nb_bits_to_unit(nb_philox_bits(77, off, i)) < ps[k] ? 1 : 0);
        free(v);
    }
    /* bfloat16 and float16 (dropout's 16-bit masks): the same draws, on every device */
    for (int dv = 0; dv < 1 + (nb_device_count(NB_DEVICE_CUDA) > 0); dv++)
        for (int h = 0; h < 2; h++) {
            uint64_t off = g2.offset;
            nb_tensor *b = nb_empty_on(NB_SHAPE(1001), h ? NB_F16 : NB_BF16, dv ? NB_CUDA(0) : NB_CPU);
            NB_CK_OK(nb_bernoulli_(b, 0.3, &g2));
            double *v = host_copy(nb_to_device(nb_to_dtype(b, NB_F64), NB_CPU));
            for (uint64_t i = 0; i < 1001; i++)
                ck_assert_double_eq(v[i], nb_bits_to_unit(nb_philox_bits(77, off, i)) < 0.3 ? 1 : 0);
            free(v);
        }
    nb_tensor *t = nb_empty(NB_SHAPE(1000), NB_F64);
    NB_CK_OK(nb_bernoulli_(t, 0, &g));
    ck_assert_double_eq(nb_item(nb_sum(t, NULL, 0, false)), 0);
    NB_CK_OK(nb_bernoulli_(t, 1, &g));
    ck_assert_double_eq(nb_item(nb_sum(t, NULL, 0, false)), 1000);
    nb_scope_end(s);
}
END_TEST

/* Element i depends only on (seed, offset, i): one thread or two give the same bits. */
START_TEST(test_thread_count_bitwise) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *r[2][4];
    for (int k = 0; k < 2; k++) {
        nb_set_num_threads(k + 1);
        ck_assert_int_eq(nb_get_num_threads(), k + 1);
        nb_generator g = nb_generator_new(42);
        r[k][0] = nb_rand(NB_SHAPE(N_BIG + 1), NB_F64, &g);
        r[k][1] = nb_randn(NB_SHAPE(N_BIG + 1), NB_F32, &g);
        r[k][2] = nb_empty(NB_SHAPE(N_BIG), NB_U8);
        NB_CK_OK(nb_bernoulli_(r[k][2], 0.5, &g));
        r[k][3] = nb_randperm(1000, &g);
    }
    for (int i = 0; i < 4; i++) ck_assert_msg(same_bits(r[0][i], r[1][i]), "draw %d differs across thread counts", i);
    nb_scope_end(s);
}
END_TEST

/* A non-contiguous destination gets the numbers of a contiguous one in its C order. */
START_TEST(test_fill_noncontiguous) {
    nb_scope *s = nb_scope_begin();
    nb_generator g1 = nb_generator_new(11), g2 = nb_generator_new(11);
    nb_tensor *base = nb_zeros(NB_SHAPE(3, 4), NB_F64);
    nb_tensor *view = nb_transpose(base, 0, 1); /* [4, 3] */
    NB_CK_OK(nb_uniform_(view, 0, 1, &g1));
    nb_tensor *ref = nb_rand(NB_SHAPE(4, 3), NB_F64, &g2);
    ck_assert(same_bits(nb_contiguous(view), ref));
    ck_assert_uint_eq(g1.offset, g2.offset);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_randperm) {
    nb_scope *s = nb_scope_begin();
    nb_generator g1 = nb_generator_new(5), g2 = nb_generator_new(5), g3 = nb_generator_new(6);
    nb_tensor *p = nb_randperm(100, &g1);
    NB_CK_NOTNULL(p);
    ck_assert_int_eq(nb_dtype_of(p), NB_I64);
    nb_ck_shape(p, 1, (int64_t[]){100});
    int64_t v[100];
    NB_CK_OK(nb_to_host(p, v, sizeof v));
    bool seen[100] = {0};
    int fixed = 0;
    for (int i = 0; i < 100; i++) {
        ck_assert(v[i] >= 0 && v[i] < 100);
        ck_assert(!seen[v[i]]);
        seen[v[i]] = true;
        fixed += v[i] == i;
    }
    ck_assert_int_lt(fixed, 10); /* shuffled, not the identity */
    ck_assert(same_bits(p, nb_randperm(100, &g2)));
    ck_assert(!same_bits(p, nb_randperm(100, &g3)));
    ck_assert(!same_bits(p, nb_randperm(100, &g1))); /* the offset moved on */
    ck_assert_int_eq(nb_numel(nb_randperm(0, &g1)), 0);
    nb_tensor *one = nb_randperm(1, &g1);
    ck_assert_double_eq(nb_item(one), 0);
    NB_CK_FAILS(nb_randperm(-1, &g1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "randperm"));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_rng_errors) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(1);
    NB_CK_FAILS(nb_rand(NB_SHAPE(3), NB_I32, &g), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_randn(NB_SHAPE(3), NB_I64, &g), NB_ERR_DTYPE);
    nb_tensor *t = nb_empty(NB_SHAPE(3), NB_F64);
    NB_CK_FAILS(nb_normal_(t, 0, -1, &g) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "normal_"));
    NB_CK_FAILS(nb_uniform_(t, 2, 1, &g) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "uniform_"));
    NB_CK_FAILS(nb_bernoulli_(t, 1.5, &g) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "bernoulli_"));
    NB_CK_FAILS(nb_bernoulli_(t, NAN, &g) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_uniform_(NULL, 0, 1, &g) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_uint_eq(g.offset, 0); /* failed draws take no numbers */
    nb_scope_end(s);
}
END_TEST

/* The CPU backend's batched Philox (backend/cpu/philox_batch.h) gives the
 * bits of nb_philox_bits for any start, parity and length. */
START_TEST(test_philox_batch) {
    uint64_t bits[64];
    const uint64_t starts[] = {0, 1, 7, 16, 12345677};
    for (int a = 0; a < 5; a++)
        for (int64_t n = 1; n <= 37; n += 6) {
            nb_philox_bits_run(0xC0FFEE, 99, starts[a], n, bits);
            for (int64_t k = 0; k < n; k++)
                ck_assert_uint_eq(bits[k], nb_philox_bits(0xC0FFEE, 99, starts[a] + (uint64_t)k));
        }
}
END_TEST

Suite *nb_suite_rng(void) {
    Suite *s = suite_create("rng");
    TCase *c = tcase_create("philox");
    tcase_add_test(c, test_same_seed_same_numbers);
    tcase_add_test(c, test_different_seeds_differ);
    tcase_add_test(c, test_philox_layout);
    tcase_add_test(c, test_offset_advances);
    tcase_add_test(c, test_uniform_range_and_mean);
    tcase_add_test(c, test_normal_moments);
    tcase_add_test(c, test_bernoulli);
    tcase_add_test(c, test_thread_count_bitwise);
    tcase_add_test(c, test_fill_noncontiguous);
    tcase_add_test(c, test_randperm);
    tcase_add_test(c, test_rng_errors);
    tcase_add_test(c, test_philox_batch);
    tcase_set_timeout(c, 300);
    suite_add_tcase(s, c);
    return s;
}
