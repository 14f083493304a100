/* test_sampling.c - the next-token rule of generation (nn/generate.c):
 * nb_sample_logits on a host array, and nb_sample_tokens, the same rule as
 * tensor ops over a batch of rows on every device: transformers' warpers
 * (temperature, top-k with ties, top-p) give the distributions they define,
 * greedy is the first maximum with NaN skipped, one uniform per row is
 * drawn, and bad input is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_decoder.h"
#include "nb_test.h"
#include "suites.h"

/* Frequencies of nb_sample_logits's picks over n draws. */
static void draw_freq(const float *logits, int64_t V, nb_generate_options o, int n, double *freq) {
    nb_generator g = nb_generator_new(2024);
    o.gen = &g;
    float buf[8];
    for (int64_t i = 0; i < V; i++) freq[i] = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf, logits, sizeof(float) * (size_t)V);
        int64_t t = nb_sample_logits(buf, V, &o);
        ck_assert(t >= 0 && t < V);
        freq[t] += 1.0 / n;
    }
}

START_TEST(test_sampling_warpers) {
    const float lg[4] = {logf(0.5f), logf(0.3f), logf(0.2f), -INFINITY};
    double f[4];
    const int n = 20000;
    draw_freq(lg, 4, (nb_generate_options){.temperature = 1}, n, f);
    const double p1[4] = {0.5, 0.3, 0.2, 0};
    for (int i = 0; i < 4; i++) ck_assert_msg(fabs(f[i] - p1[i]) < 0.015, "token %d: %g vs %g", i, f[i], p1[i]);
    /* temperature 2: p^(1/2) renormalised */
    double z = sqrt(0.5) + sqrt(0.3) + sqrt(0.2);
    draw_freq(lg, 4, (nb_generate_options){.temperature = 2}, n, f);
    for (int i = 0; i < 3; i++) ck_assert(fabs(f[i] - sqrt(p1[i]) / z) < 0.015);
    /* top_k 2: {0, 1} renormalised */
    draw_freq(lg, 4, (nb_generate_options){.temperature = 1, .top_k = 2}, n, f);
    ck_assert(fabs(f[0] - 0.625) < 0.015 && fabs(f[1] - 0.375) < 0.015 && f[2] == 0 && f[3] == 0);
    /* top_p 0.6: the mass before token 2 is 0.8 >= 0.6, so {0, 1}; top_p 0.45: {0} */
    draw_freq(lg, 4, (nb_generate_options){.temperature = 1, .top_p = 0.6}, n, f);
    ck_assert(fabs(f[0] - 0.625) < 0.015 && f[2] == 0);
    draw_freq(lg, 4, (nb_generate_options){.temperature = 1, .top_p = 0.45}, n, f);
    ck_assert(fabs(f[0] - 1) < 1e-9 && f[1] == 0);
    /* greedy: the first maximum; -inf and NaN never win */
    float tie[4] = {1, 3, 3, NAN};
    ck_assert_int_eq(nb_sample_logits(tie, 4, &(nb_generate_options){0}), 1);
    float dead[2] = {-INFINITY, NAN};
    NB_CK_FAILS(nb_sample_logits(dead, 2, &(nb_generate_options){.temperature = 1}) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sample_logits(tie, 0, &(nb_generate_options){0}) >= 0, NB_ERR_INVALID_ARG);
}
END_TEST

/* Frequencies of the tokens nb_sample_tokens draws for n copies of the row lg[0..4) in one call on dev, in dtype
 * dt; checks the result's shape, dtype and device, and that one uniform per row was drawn. */
static void batch_freq(nb_device dev, nb_dtype dt, const float *lg, nb_generate_options o, int n, double *freq) {
    nb_generator g = nb_generator_new(7);
    o.gen = &g;
    float *rows = malloc(sizeof(float) * 4 * (size_t)n);
    int64_t *tok = malloc(sizeof(int64_t) * (size_t)n);
    ck_assert(rows && tok);
    for (int i = 0; i < n; i++) memcpy(rows + 4 * i, lg, sizeof(float) * 4);
    nb_tensor *l = nb_to_dtype(nb_to_device(nb_from_data(rows, 2, (int64_t[]){n, 4}, NB_F32), dev), dt);
    nb_tensor *t = nb_sample_tokens(l, &o);
    NB_CK_NOTNULL(t);
    ck_assert(nb_dim(t) == 2 && nb_size(t, 0) == n && nb_size(t, 1) == 1 && nb_dtype_of(t) == NB_I64);
    ck_assert(nb_device_of(t).type == dev.type);
    ck_assert_int_eq(g.offset, o.temperature > 0 ? (uint64_t)(n + 1) / 2 : 0);
    NB_CK_OK(nb_to_host(t, tok, sizeof(int64_t) * (size_t)n));
    for (int i = 0; i < 4; i++) freq[i] = 0;
    for (int i = 0; i < n; i++) {
        ck_assert(tok[i] >= 0 && tok[i] < 4);
        freq[tok[i]] += 1.0 / n;
    }
    free(rows), free(tok);
}

static void check_batch_rule(nb_device dev) {
    const float lg[4] = {logf(0.5f), logf(0.3f), logf(0.2f), -INFINITY};
    const int n = 20000;
    double f[4];
    for (int half = 0; half < 2; half++) { /* bfloat16 logits: the probabilities move by under 1% */
        batch_freq(dev, half ? NB_BF16 : NB_F32, lg, (nb_generate_options){.temperature = 1}, n, f);
        const double p1[4] = {0.5, 0.3, 0.2, 0};
        for (int i = 0; i < 4; i++) ck_assert_msg(fabs(f[i] - p1[i]) < 0.015, "token %d: %g vs %g", i, f[i], p1[i]);
    }
    double z = sqrt(0.5) + sqrt(0.3) + sqrt(0.2);
    batch_freq(dev, NB_F32, lg, (nb_generate_options){.temperature = 2}, n, f);
    for (int i = 0; i < 3; i++) ck_assert(fabs(f[i] - sqrt((double[]){0.5, 0.3, 0.2}[i]) / z) < 0.015);
    batch_freq(dev, NB_F32, lg, (nb_generate_options){.temperature = 1, .top_k = 2}, n, f);
    ck_assert(fabs(f[0] - 0.625) < 0.015 && fabs(f[1] - 0.375) < 0.015 && f[2] == 0 && f[3] == 0);
    batch_freq(dev, NB_F32, lg, (nb_generate_options){.temperature = 1, .top_p = 0.6}, n, f);
    ck_assert(fabs(f[0] - 0.625) < 0.015 && f[2] == 0 && f[3] == 0);
    batch_freq(dev, NB_F32, lg, (nb_generate_options){.temperature = 1, .top_p = 0.45}, n, f);
    ck_assert(fabs(f[0] - 1) < 1e-9);
    batch_freq(dev, NB_F32, lg, (nb_generate_options){.temperature = 1, .top_k = 3, .top_p = 0.9}, n, f);
    ck_assert(fabs(f[0] - 0.5) < 0.015 && fabs(f[2] - 0.2) < 0.015 && f[3] == 0);
    /* ties at the k-th are kept: top_k 1 over {2, 2, 1, 0} keeps ids 0 and 1, half each */
    batch_freq(dev, NB_F32, (const float[]){2, 2, 1, 0}, (nb_generate_options){.temperature = 1, .top_k = 1}, n, f);
    ck_assert(fabs(f[0] - 0.5) < 0.015 && fabs(f[1] - 0.5) < 0.015);
    /* greedy: the first maximum, NaN skipped; a dead row gives id 0 and a row with +inf its first +inf, greedy or
     * sampled; [2, 1, 4] gives [2, 1, 1] */
    const float rows[4][4] = {{1, 3, 3, NAN}, {NAN, -INFINITY, 2, 2}, {-INFINITY, NAN, -INFINITY, NAN},
                              {1, INFINITY, 3, INFINITY}};
    nb_tensor *l = nb_to_device(nb_from_data(rows, 2, (int64_t[]){4, 4}, NB_F32), dev);
    for (int sampled = 0; sampled < 2; sampled++) {
        nb_generator g = nb_generator_new(1);
        nb_tensor *t = nb_sample_tokens(l, &(nb_generate_options){.temperature = sampled ? 1e-3 : 0, .gen = &g});
        int64_t got[4];
        NB_CK_OK(nb_to_host(t, got, sizeof got));
        if (sampled) /* the tied maxima share the mass */
            ck_assert(got[0] >= 1 && got[0] <= 2 && got[1] >= 2 && got[1] <= 3 && got[2] == 0 && got[3] == 1);
        else
            ck_assert(got[0] == 1 && got[1] == 2 && got[2] == 0 && got[3] == 1);
    }
    nb_tensor *t3 = nb_sample_tokens(nb_reshape(nb_narrow(l, 0, 0, 2), 3, (int64_t[]){2, 1, 4}),
                                     &(nb_generate_options){0});
    ck_assert(nb_dim(t3) == 3 && nb_size(t3, 0) == 2 && nb_size(t3, 1) == 1 && nb_size(t3, 2) == 1);
    /* the same generator state gives the same tokens */
    nb_generator ga = nb_generator_new(3), gb = nb_generator_new(3);
    nb_tensor *w = nb_to_device(nb_randn(NB_SHAPE(64, 50), NB_F32, NULL), dev);
    nb_tensor *a = nb_sample_tokens(w, &(nb_generate_options){.temperature = 0.8, .top_p = 0.9, .gen = &ga});
    nb_tensor *b = nb_sample_tokens(w, &(nb_generate_options){.temperature = 0.8, .top_p = 0.9, .gen = &gb});
    int64_t ta[64], tb[64];
    NB_CK_OK(nb_to_host(a, ta, sizeof ta));
    NB_CK_OK(nb_to_host(b, tb, sizeof tb));
    ck_assert(!memcmp(ta, tb, sizeof ta));
    /* errors */
    NB_CK_FAILS(nb_sample_tokens(nb_to_dtype(l, NB_I64), &(nb_generate_options){0}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sample_tokens(nb_sum(l, NULL, 0, false), &(nb_generate_options){0}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sample_tokens(l, &(nb_generate_options){.temperature = -1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sample_tokens(l, &(nb_generate_options){.top_p = 1.5}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_sample_tokens(nb_empty_on(2, (int64_t[]){2, 0}, NB_F32, dev), &(nb_generate_options){0}) != NULL,
                NB_ERR_INVALID_ARG);
}

START_TEST(test_sample_tokens_batch) {
    nb_scope *s = nb_scope_begin();
    nb_device devs[8];
    int n = nb_test_accelerators(devs, 8);
    check_batch_rule(NB_CPU);
    for (int i = 0; i < n; i++) check_batch_rule(devs[i]);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_sampling(void) {
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("sampling");
    tcase_add_test(tc, test_sampling_warpers);
    tcase_add_test(tc, test_sample_tokens_batch);
    suite_add_tcase(s, tc);
    return s;
}
