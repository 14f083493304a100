/* test_ops_index_into.c - embedding's and index_select's gradient added
 * straight into a leaf's existing .grad (the engine's index_into_grad; the
 * index_add slot with accumulate): a tied embedding/decoder weight, a
 * second backward into a kept .grad, the lookup's backward running before
 * the decoder's (deferred), padding_idx and repeated indices, on
 * every device, float64 and float32. Each result must equal, bit for bit,
 * the rule's path (a zeroed table plus an add), which a gradient hook on
 * the leaf forces, and the accumulating path must launch no add. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

enum { V = 37, D = 20, B = 3, T = 17, PAD = 5 };

static nb_status keep_grad_hook(nb_tensor *grad, nb_tensor **replace, void *user) {
    (void)grad, (void)replace, (void)user;
    return NB_OK;
}

/* idx [B, T] in [0, V) with repeats and PAD among them. */
static nb_tensor *ids(nb_device dev) {
    int64_t v[B * T];
    for (int i = 0; i < B * T; i++) v[i] = (i * 7 + i / 5) % 11 == 3 ? PAD : (i * 13 + 2) % 23;
    nb_tensor *t = nb_to_device(nb_from_data(v, 2, (int64_t[]){B, T}, NB_I64), dev);
    NB_CK_NOTNULL(t);
    return t;
}

static nb_tensor *on(nb_tensor *t, nb_device dev, nb_dtype dt) {
    nb_tensor *r = nb_to_device(nb_to_dtype(t, dt), dev);
    NB_CK_NOTNULL(r);
    return r;
}

/* The backward's slot report (nb_profiler_report's text), malloc'd;
 * seed NULL: out is a one-element loss. */
static char *profiled_backward(nb_tensor *out, nb_tensor *seed) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    nb_profiler_start();
    NB_CK_OK(seed ? nb_backward_with(out, seed) : nb_backward(out));
    nb_profiler_report(f);
    fclose(f);
    return buf;
}

/* The calls of slot name in a report (0 if it has no row). */
static long slot_calls(const char *rep, const char *name) {
    size_t n = strlen(name);
    for (const char *p = rep; (p = strstr(p, name)) != NULL; p += n)
        if ((p == rep || p[-1] == '\n') && p[n] == ' ') {
            long calls = 0;
            ck_assert_int_eq(sscanf(p + n, "%*s %ld", &calls), 1);
            return calls;
        }
    return 0;
}

/* A tied weight: emb = embedding(idx, w) read with seed r1, and the
 * decoder x w^T read with seed r2; then a second backward through the
 * embedding alone into the kept .grad. hook: the rule's path.
 * decoder_first: the decoder recorded before the lookup, so the lookup's
 * backward runs first, before w has a .grad (the engine defers it to the
 * pass's end, as under autocast, whose cast of the parameters is recorded
 * first). Returns w's .grad after each backward (retained) and, in
 * *adds, the first backward's binary slot calls. */
static void tied_grads(nb_device dev, nb_dtype dt, bool hook, int64_t pad, bool decoder_first, nb_tensor **g1,
                       nb_tensor **g2, long *adds) {
    nb_tensor *w = on(nb_test_randn(NB_SHAPE(V, D), NB_F64, 1), dev, dt);
    NB_CK_OK(nb_set_requires_grad(w, true));
    if (hook) ck_assert_int_gt(nb_register_hook(w, keep_grad_hook, NULL), 0);
    nb_tensor *idx = ids(dev);
    nb_tensor *x = on(nb_test_randn(NB_SHAPE(B * T, D), NB_F64, 2), dev, dt);
    nb_tensor *r1 = on(nb_test_randn(NB_SHAPE(B, T, D), NB_F64, 3), dev, dt);
    nb_tensor *r2 = on(nb_test_randn(NB_SHAPE(B * T, V), NB_F64, 4), dev, dt);
    nb_tensor *logits = decoder_first ? nb_matmul(x, nb_transpose(w, 0, 1)) : NULL;
    nb_tensor *emb = nb_embedding(idx, w, pad);
    if (!decoder_first) logits = nb_matmul(x, nb_transpose(w, 0, 1));
    nb_tensor *loss = nb_add(nb_sum(nb_mul(emb, r1), NULL, 0, false), nb_sum(nb_mul(logits, r2), NULL, 0, false));
    char *rep1 = profiled_backward(loss, NULL);
    *adds = slot_calls(rep1, "binary");
    free(rep1);
    *g1 = nb_clone(nb_tensor_grad(w));
    NB_CK_NOTNULL(*g1);
    nb_retain(*g1);
    /* the embedding alone, seeded directly: the only kernels are the
     * index_add and, on the rule's path, the add into .grad */
    nb_tensor *emb2 = nb_embedding(idx, w, pad);
    char *rep = profiled_backward(emb2, r1);
    ck_assert_msg(strstr(rep, "index_add") != NULL, "no index_add in the backward: %s", rep);
    if (!hook) ck_assert_msg(strstr(rep, "\nbinary ") == NULL, "the accumulating path launched an add: %s", rep);
    free(rep);
    *g2 = nb_tensor_grad(w);
    nb_retain(*g2);
}

START_TEST(test_embedding_grad_into_tied) {
    nb_device devs[9] = {{NB_DEVICE_CPU, 0}};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < 4; c++) {
                nb_scope *s = nb_scope_begin();
                nb_dtype dt = t ? NB_F32 : NB_F64;
                int64_t pad = c & 1 ? PAD : NB_NO_PADDING_IDX;
                nb_tensor *a1, *a2, *b1, *b2;
                long adds_into, adds_rule;
                tied_grads(devs[d], dt, false, pad, c & 2, &a1, &a2, &adds_into);
                tied_grads(devs[d], dt, true, pad, c & 2, &b1, &b2, &adds_rule);
                /* the table's add is gone, whichever gradient came first (deferred or not) */
                ck_assert_msg(adds_into == adds_rule - 1, "binary calls: %ld into .grad, %ld by the rule", adds_into,
                              adds_rule);
                nb_ck_bitwise(a1, b1);
                nb_ck_bitwise(a2, b2);
                /* against the sums by hand: g2 = g1 + the embedding's rows */
                double *h1 = nb_test_values_of(a1), *h2 = nb_test_values_of(a2);
                double *r1 = nb_test_values_of(nb_test_randn(NB_SHAPE(B, T, D), NB_F64, 3));
                double *iv = nb_test_values_of(ids(devs[d]));
                double want[V * D];
                memcpy(want, h1, sizeof want);
                for (int i = 0; i < B * T; i++)
                    if ((int64_t)iv[i] != pad)
                        for (int c = 0; c < D; c++) want[(int64_t)iv[i] * D + c] += r1[i * D + c];
                nb_ck_close(a2, want, V * D, 1e-5, 1e-5);
                if (pad != NB_NO_PADDING_IDX)
                    for (int c = 0; c < D; c++) ck_assert(h2[PAD * D + c] == h1[PAD * D + c]);
                free(h1), free(h2), free(r1), free(iv);
                nb_release(a1), nb_release(a2), nb_release(b1), nb_release(b2);
                nb_scope_end(s);
            }
}
END_TEST

/* index_select along dim 1 of a leaf whose .grad exists: the same bits as
 * the rule's path. */
static nb_tensor *select_grad(nb_device dev, nb_dtype dt, bool hook) {
    nb_tensor *x = on(nb_test_randn(NB_SHAPE(4, 9, 6), NB_F64, 5), dev, dt);
    NB_CK_OK(nb_set_requires_grad(x, true));
    if (hook) ck_assert_int_gt(nb_register_hook(x, keep_grad_hook, NULL), 0);
    nb_tensor *idx = nb_to_device(nb_from_data((int64_t[]){2, 8, 2, 0, 2, 5, 8}, 1, (int64_t[]){7}, NB_I64), dev);
    nb_tensor *r = on(nb_test_randn(NB_SHAPE(4, 7, 6), NB_F64, 6), dev, dt);
    NB_CK_OK(nb_backward(nb_sum(nb_mul(x, x), NULL, 0, false))); /* .grad = 2x */
    char *rep = profiled_backward(nb_index_select(x, 1, idx), r);
    ck_assert_msg(strstr(rep, "index_add") != NULL, "no index_add in the backward: %s", rep);
    if (!hook) ck_assert_msg(strstr(rep, "\nbinary ") == NULL, "the accumulating path launched an add: %s", rep);
    free(rep);
    nb_tensor *g = nb_tensor_grad(x);
    nb_retain(g);
    return g;
}

START_TEST(test_index_select_grad_into) {
    nb_device devs[9] = {{NB_DEVICE_CPU, 0}};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int t = 0; t < 2; t++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *a = select_grad(devs[d], t ? NB_F32 : NB_F64, false);
            nb_tensor *b = select_grad(devs[d], t ? NB_F32 : NB_F64, true);
            nb_ck_bitwise(a, b);
            nb_release(a), nb_release(b);
            nb_scope_end(s);
        }
}
END_TEST

Suite *nb_suite_ops_index_into(void) {
    Suite *s = suite_create("ops_index_into");
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_embedding_grad_into_tied);
    tcase_add_test(g, test_index_select_grad_into);
    tcase_set_timeout(g, 120);
    suite_add_tcase(s, g);
    return s;
}
