/* test_dataloader.c - map-style datasets, samplers and nb_dataloader
 * (data/dataset_map.c, sampler.c, dataloader.c): bit-identical batches for
 * any num_workers and prefetch_factor, exact resumption mid-epoch for every
 * sampler, each sampler's law, the padding and custom collates, Subset /
 * ConcatDataset / random_split, a failing get_item stopping the loader with
 * its message (and nothing leaked: the ASan run), a tensor dataset
 * visited in nb_loader's order, iterable datasets (ChainDataset, resume by
 * reading the stream again, a failed read) and batch samplers. */
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "nb_bpe.h"
#include "nb_checkpoint.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "nb_test.h"

/* Sample i: "fixed" [3] float32 = i + U(0, 1) from the sample's generator, "seq" [1 + i % 4] float32 = 0, 1,
 * ..., "label" int64 i. fail_at: that sample's get_item fails. */
typedef struct toy {
    int64_t fail_at;
} toy;

static nb_status toy_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    const toy *t = state;
    if (i == t->fail_at) return nb_set_error(NB_ERR_IO, "toy: cannot read sample %lld", (long long)i);
    nb_status st = nb_sample_set(out, "fixed", nb_add_scalar(nb_rand(NB_SHAPE(3), NB_F32, gen), (double)i));
    if (!st) st = nb_sample_set(out, "seq", nb_arange(0, (double)(1 + i % 4), 1, NB_F32));
    return st ? st : nb_sample_set(out, "label", nb_scalar((double)i, NB_I64));
}

/* Every batch of two epochs as float64 host values, field by field, with the indices. */
typedef struct run {
    int n;
    double *vals[64][6];
    int64_t counts[64][6];
    int64_t idx[64][8], nidx[64];
} run;

static void record(nb_dataloader *dl, run *r, int epochs) {
    r->n = 0;
    for (int e = 0; e < epochs; e++) {
        nb_sample b;
        while (nb_dataloader_next(dl, &b)) {
            ck_assert_int_lt(r->n, 64);
            ck_assert_int_le(b.n, 6);
            for (int f = 0; f < b.n; f++) r->vals[r->n][f] = nb_test_values_of(b.fields[f]), r->counts[r->n][f] = nb_numel(b.fields[f]);
            const int64_t *ix = nb_dataloader_indices(dl, &r->nidx[r->n]);
            memcpy(r->idx[r->n], ix, sizeof(int64_t) * (size_t)r->nidx[r->n]);
            r->n++;
        }
        NB_CK_OK(nb_dataloader_status(dl));
        nb_dataloader_reset(dl);
    }
}

static void ck_runs_equal(const run *a, const run *b, const char *what) {
    ck_assert_msg(a->n == b->n, "%s: %d batches, not %d", what, b->n, a->n);
    for (int k = 0; k < a->n; k++) {
        ck_assert_int_eq(a->nidx[k], b->nidx[k]);
        ck_assert(!memcmp(a->idx[k], b->idx[k], sizeof(int64_t) * (size_t)a->nidx[k]));
        for (int f = 0; f < 6 && a->vals[k][f]; f++) {
            ck_assert_int_eq(a->counts[k][f], b->counts[k][f]);
            ck_assert_msg(!memcmp(a->vals[k][f], b->vals[k][f], sizeof(double) * (size_t)a->counts[k][f]),
                          "%s: batch %d field %d differs", what, k, f);
        }
    }
}

static void run_free(run *r) {
    for (int k = 0; k < r->n; k++)
        for (int f = 0; f < 6; f++) free(r->vals[k][f]), r->vals[k][f] = NULL;
}

START_TEST(test_workers_give_the_same_batches) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = -1};
    nb_map_dataset *ds = nb_map_dataset_new(23, toy_item, &t, NULL);
    NB_CK_NOTNULL(ds);
    static run ref, got;
    const int workers[] = {0, 1, 4, 4}, prefetch[] = {0, 1, 1, 3};
    for (int c = 0; c < 4; c++) {
        nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 5, .shuffle = true, .seed = 9,
                                                                          .collate = NB_COLLATE_PAD, .padding_value = -1,
                                                                          .num_workers = workers[c],
                                                                          .prefetch_factor = prefetch[c]});
        NB_CK_NOTNULL(dl);
        ck_assert_int_eq(nb_dataloader_num_batches(dl), 5);
        record(dl, c ? &got : &ref, 2);
        if (c) ck_runs_equal(&ref, &got, "num_workers");
        if (c) run_free(&got);
        nb_dataloader_free(dl);
    }
    /* the batches (fixed, fixed_lengths, seq, seq_lengths, label): labels are the indices, "seq" padded with its
       lengths, the epochs differ */
    ck_assert_int_eq(ref.n, 10);
    for (int k = 0; k < ref.n; k++) {
        for (int64_t i = 0; i < ref.nidx[k]; i++) ck_assert_double_eq(ref.vals[k][4][i], (double)ref.idx[k][i]);
        int64_t maxlen = 0;
        for (int64_t i = 0; i < ref.nidx[k]; i++) maxlen = 1 + ref.idx[k][i] % 4 > maxlen ? 1 + ref.idx[k][i] % 4 : maxlen;
        ck_assert_int_eq(ref.counts[k][2], ref.nidx[k] * maxlen);
        for (int64_t i = 0; i < ref.nidx[k]; i++) {
            ck_assert_double_eq(ref.vals[k][1][i], 3); /* fixed_lengths */
            ck_assert_double_eq(ref.vals[k][3][i], (double)(1 + ref.idx[k][i] % 4)); /* seq_lengths */
            for (int64_t j = 0; j < maxlen; j++)
                ck_assert_double_eq(ref.vals[k][2][i * maxlen + j], j < 1 + ref.idx[k][i] % 4 ? (double)j : -1.0);
        }
    }
    ck_assert(memcmp(ref.idx[0], ref.idx[5], sizeof(int64_t) * 5) != 0);
    run_free(&ref);
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_resume_every_sampler) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = -1};
    nb_map_dataset *ds = nb_map_dataset_new(20, toy_item, &t, NULL);
    double w[20];
    for (int i = 0; i < 20; i++) w[i] = i % 3;
    int64_t sub[7] = {3, 5, 7, 11, 13, 17, 19};
    const nb_sampler_options opts[] = {
        {.kind = NB_SAMPLER_SEQUENTIAL},
        {.kind = NB_SAMPLER_RANDOM, .seed = 4},
        {.kind = NB_SAMPLER_RANDOM, .seed = 4, .replacement = NB_FLAG_TRUE, .num_samples = 30},
        {.kind = NB_SAMPLER_SUBSET_RANDOM, .seed = 4, .indices = sub, .n_indices = 7},
        {.kind = NB_SAMPLER_WEIGHTED_RANDOM, .seed = 4, .weights = w, .n_weights = 20},
        {.kind = NB_SAMPLER_WEIGHTED_RANDOM, .seed = 4, .weights = w, .n_weights = 20, .num_samples = 9,
         .replacement = NB_FLAG_FALSE},
        {.kind = NB_SAMPLER_DISTRIBUTED, .seed = 4, .num_replicas = 3, .rank = 1},
    };
    static run full, rest;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        nb_sampler *sm = nb_sampler_new(20, opts[k]);
        NB_CK_NOTNULL(sm);
        nb_dataloader_options o = {.batch_size = 3, .sampler = sm, .collate = NB_COLLATE_PAD, .num_workers = 2};
        nb_dataloader *a = nb_dataloader_new(ds, o), *b = nb_dataloader_new(ds, o);
        NB_CK_OK(nb_dataloader_seek(a, 1, 0));
        record(a, &full, 1);
        NB_CK_OK(nb_dataloader_seek(b, 1, 2));
        ck_assert_int_eq(nb_dataloader_epoch(b), 1);
        ck_assert_int_eq(nb_dataloader_position(b), 2);
        record(b, &rest, 1);
        ck_assert_int_eq(rest.n, full.n - 2);
        /* rest is full from batch 2 */
        run tail = full;
        tail.n = full.n - 2;
        memmove(tail.vals, full.vals[2], sizeof full.vals[0] * (size_t)tail.n);
        memmove(tail.counts, full.counts[2], sizeof full.counts[0] * (size_t)tail.n);
        memmove(tail.idx, full.idx[2], sizeof full.idx[0] * (size_t)tail.n);
        memmove(tail.nidx, full.nidx + 2, sizeof full.nidx[0] * (size_t)tail.n);
        ck_runs_equal(&tail, &rest, "resume");
        for (int i = 0; i < 2; i++)
            for (int f = 0; f < 6; f++) free(full.vals[i][f]), full.vals[i][f] = NULL;
        full.n = 0;
        for (int i = 0; i < tail.n; i++)
            for (int f = 0; f < 6; f++) free(tail.vals[i][f]);
        run_free(&rest);
        nb_dataloader_free(a), nb_dataloader_free(b);
        nb_sampler_free(sm);
    }
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

static int64_t count_of(const int64_t *v, int64_t n, int64_t x) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += v[i] == x;
    return c;
}

START_TEST(test_sampler_laws) {
    int64_t out[4000];
    /* sequential, and a permutation each epoch (different epochs differ; the same epoch repeats) */
    nb_sampler *sq = nb_sampler_new(10, (nb_sampler_options){0});
    NB_CK_OK(nb_sampler_indices(sq, 3, out));
    for (int i = 0; i < 10; i++) ck_assert_int_eq(out[i], i);
    nb_sampler_free(sq);
    nb_sampler *r = nb_sampler_new(50, (nb_sampler_options){.kind = NB_SAMPLER_RANDOM, .seed = 1});
    int64_t a[50], b[50];
    NB_CK_OK(nb_sampler_indices(r, 0, a));
    NB_CK_OK(nb_sampler_indices(r, 1, b));
    for (int i = 0; i < 50; i++) ck_assert_int_eq(count_of(a, 50, i), 1);
    ck_assert(memcmp(a, b, sizeof a));
    NB_CK_OK(nb_sampler_indices(r, 0, b));
    ck_assert(!memcmp(a, b, sizeof a));
    nb_sampler_free(r);
    /* with replacement: num_samples draws in range; without, at most the length */
    r = nb_sampler_new(5, (nb_sampler_options){.kind = NB_SAMPLER_RANDOM, .replacement = NB_FLAG_TRUE, .num_samples = 4000});
    ck_assert_int_eq(nb_sampler_len(r), 4000);
    NB_CK_OK(nb_sampler_indices(r, 0, out));
    for (int i = 0; i < 5; i++) ck_assert(count_of(out, 4000, i) > 600 && count_of(out, 4000, i) < 1000);
    nb_sampler_free(r);
    ck_assert_ptr_null(nb_sampler_new(5, (nb_sampler_options){.kind = NB_SAMPLER_RANDOM, .num_samples = 6}));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    /* weighted: zero weights never drawn, frequencies follow the weights; without replacement distinct */
    double w[4] = {1, 0, 3, 0};
    r = nb_sampler_new(4, (nb_sampler_options){.kind = NB_SAMPLER_WEIGHTED_RANDOM, .weights = w, .n_weights = 4,
                                               .num_samples = 4000, .seed = 2});
    NB_CK_OK(nb_sampler_indices(r, 0, out));
    ck_assert_int_eq(count_of(out, 4000, 1) + count_of(out, 4000, 3), 0);
    ck_assert(count_of(out, 4000, 2) > 2700 && count_of(out, 4000, 2) < 3300);
    nb_sampler_free(r);
    r = nb_sampler_new(4, (nb_sampler_options){.kind = NB_SAMPLER_WEIGHTED_RANDOM, .weights = w, .n_weights = 4,
                                               .num_samples = 2, .replacement = NB_FLAG_FALSE});
    NB_CK_OK(nb_sampler_indices(r, 0, out));
    ck_assert((out[0] == 0 && out[1] == 2) || (out[0] == 2 && out[1] == 0));
    nb_sampler_free(r);
    ck_assert_ptr_null(nb_sampler_new(4, (nb_sampler_options){.kind = NB_SAMPLER_WEIGHTED_RANDOM, .weights = w,
                                                              .n_weights = 4, .num_samples = 3, .replacement = NB_FLAG_FALSE}));
    w[0] = -1;
    ck_assert_ptr_null(nb_sampler_new(4, (nb_sampler_options){.kind = NB_SAMPLER_WEIGHTED_RANDOM, .weights = w, .n_weights = 4}));
    /* distributed: the ranks' shards are disjoint and cover the epoch, padded by repeating from the start */
    int64_t seen[11] = {0};
    for (int rank = 0; rank < 4; rank++) {
        nb_sampler *d = nb_sampler_new(11, (nb_sampler_options){.kind = NB_SAMPLER_DISTRIBUTED, .num_replicas = 4,
                                                                .rank = rank, .seed = 3});
        ck_assert_int_eq(nb_sampler_len(d), 3);
        NB_CK_OK(nb_sampler_indices(d, 2, out));
        for (int i = 0; i < 3; i++) seen[out[i]]++;
        nb_sampler_free(d);
    }
    int64_t total = 0;
    for (int i = 0; i < 11; i++) {
        ck_assert_int_ge(seen[i], 1);
        total += seen[i];
    }
    ck_assert_int_eq(total, 12);
    ck_assert_ptr_null(nb_sampler_new(11, (nb_sampler_options){.kind = NB_SAMPLER_DISTRIBUTED, .num_replicas = 2, .rank = 2}));
    /* subset random: a permutation of the subset */
    int64_t sub[3] = {9, 2, 4};
    r = nb_sampler_new(10, (nb_sampler_options){.kind = NB_SAMPLER_SUBSET_RANDOM, .indices = sub, .n_indices = 3});
    NB_CK_OK(nb_sampler_indices(r, 0, out));
    ck_assert_int_eq(count_of(out, 3, 9) + count_of(out, 3, 2) + count_of(out, 3, 4), 3);
    nb_sampler_free(r);
    sub[0] = 10;
    ck_assert_ptr_null(nb_sampler_new(10, (nb_sampler_options){.kind = NB_SAMPLER_SUBSET_RANDOM, .indices = sub, .n_indices = 3}));
}
END_TEST

/* A custom collate: one field, the sum of every sample's "fixed". */
static nb_status sum_collate(void *state, const nb_sample *smp, int64_t n, nb_sample *batch) {
    (void)state;
    nb_tensor *acc = nb_zeros(NB_SHAPE(3), NB_F32);
    for (int64_t i = 0; i < n; i++) acc = nb_add(acc, nb_sample_get(&smp[i], "fixed"));
    return nb_sample_set(batch, "sum", acc);
}

START_TEST(test_collate_errors_and_combinators) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = 7};
    nb_map_dataset *ds = nb_map_dataset_new(12, toy_item, &t, NULL);
    for (int w = 0; w < 2; w++) {
        nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 4, .collate = NB_COLLATE_PAD,
                                                                          .num_workers = w ? 3 : 0});
        nb_sample b;
        ck_assert(nb_dataloader_next(dl, &b));
        ck_assert(!nb_dataloader_next(dl, &b)); /* batch 1 holds sample 7 */
        ck_assert_int_eq(nb_dataloader_status(dl), NB_ERR_IO);
        ck_assert_msg(strstr(nb_last_error(), "sample 7") && strstr(nb_last_error(), "cannot read"), "%s", nb_last_error());
        ck_assert(!nb_dataloader_next(dl, &b)); /* it stays there */
        ck_assert_int_eq(nb_dataloader_position(dl), 1);
        NB_CK_OK(nb_dataloader_seek(dl, 0, 2));
        ck_assert(nb_dataloader_next(dl, &b));
        ck_assert_double_eq(nb_item(nb_select(nb_sample_get(&b, "label"), 0, 0)), 8);
        nb_dataloader_free(dl);
    }
    /* the default collate stacks: fields of different sizes fail, named */
    t.fail_at = -1;
    nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 4});
    nb_sample b;
    ck_assert(!nb_dataloader_next(dl, &b));
    ck_assert_int_eq(nb_dataloader_status(dl), NB_ERR_SHAPE);
    nb_dataloader_free(dl);
    dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 5, .collate_fn = sum_collate, .num_workers = 2});
    ck_assert(nb_dataloader_next(dl, &b));
    ck_assert_int_eq(b.n, 1);
    ck_assert_str_eq(b.names[0], "sum");
    ck_assert(nb_item(nb_sum(nb_sample_get(&b, "sum"), NULL, 0, false)) > 30); /* 3 * (0+1+2+3+4) = 30, plus noise */
    nb_dataloader_free(dl);
    /* Subset, ConcatDataset, random_split */
    nb_map_dataset *sub = nb_subset(ds, (int64_t[]){5, 1}, 2), *cat = nb_concat_dataset((nb_map_dataset *[]){sub, ds}, 2);
    ck_assert_int_eq(nb_map_dataset_len(cat), 14);
    nb_sample one;
    NB_CK_OK(nb_map_dataset_get(cat, 1, NULL, &one));
    ck_assert_double_eq(nb_item(nb_sample_get(&one, "label")), 1);
    NB_CK_OK(nb_map_dataset_get(cat, 13, NULL, &one));
    ck_assert_double_eq(nb_item(nb_sample_get(&one, "label")), 11);
    ck_assert_int_eq(nb_map_dataset_get(cat, 14, NULL, &one), NB_ERR_INVALID_ARG);
    nb_map_dataset *parts[2];
    NB_CK_OK(nb_random_split(ds, (int64_t[]){9, 3}, 2, 5, parts));
    int64_t seen[12] = {0};
    for (int p = 0; p < 2; p++)
        for (int64_t i = 0; i < nb_map_dataset_len(parts[p]); i++) {
            NB_CK_OK(nb_map_dataset_get(parts[p], i, NULL, &one));
            seen[(int)nb_item(nb_sample_get(&one, "label"))]++;
        }
    for (int i = 0; i < 12; i++) ck_assert_int_eq(seen[i], 1);
    nb_map_dataset_free(parts[0]), nb_map_dataset_free(parts[1]);
    ck_assert_int_eq(nb_random_split(ds, (int64_t[]){9, 4}, 2, 5, parts), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(parts[0]);
    nb_map_dataset_free(cat), nb_map_dataset_free(sub);
    ck_assert_ptr_null(nb_subset(ds, (int64_t[]){12}, 1));
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

/* A tensor dataset through nb_dataloader: nb_loader's batches and order. */
START_TEST(test_tensor_dataset_matches_loader) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_dataset *td = nb_dataset_from_tensors(nb_randn(NB_SHAPE(17, 2, 3), NB_F32, NULL),
                                             nb_arange(0, 17, 1, NB_I64));
    nb_map_dataset *ds = nb_map_dataset_from_tensors(td);
    nb_loader *ld = nb_loader_new(td, (nb_loader_options){.batch_size = 4, .shuffle = true, .seed = 3});
    nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 4, .shuffle = true, .seed = 3,
                                                                      .num_workers = 2});
    for (int e = 0; e < 2; e++) {
        nb_batch a;
        nb_sample b;
        while (nb_loader_next(ld, &a)) {
            ck_assert(nb_dataloader_next(dl, &b));
            double *x = nb_test_values_of(a.x), *y = nb_test_values_of(nb_sample_get(&b, "x"));
            ck_assert(!memcmp(x, y, sizeof(double) * (size_t)nb_numel(a.x)));
            free(x), free(y);
            ck_assert_double_eq(nb_item(nb_sum(nb_sub(a.y, nb_sample_get(&b, "y")), NULL, 0, false)), 0);
        }
        ck_assert(!nb_dataloader_next(dl, &b));
        nb_loader_reset(ld), nb_dataloader_reset(dl);
    }
    nb_dataloader_free(dl), nb_loader_free(ld);
    nb_map_dataset_free(ds), nb_dataset_free(td);
    nb_scope_end(s);
}
END_TEST

/* Token shards in llm.c's layout: both widths round trip, windows split as (input_ids, labels), hostile headers
 * fail; a corpus tokenized with a BPE into a shard holds each line's tokens then <|endoftext|>. */
START_TEST(test_token_shards) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_shard_XXXXXX", p16[128], p32[128], bad[128], txt[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(p16, sizeof p16, "%s/a.bin", dir), snprintf(p32, sizeof p32, "%s/b.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir), snprintf(txt, sizeof txt, "%s/corpus.txt", dir);
    int64_t tok[100], got[100];
    for (int i = 0; i < 100; i++) tok[i] = (i * 977) % 65536;
    NB_CK_OK(nb_token_shard_write(p16, tok, 100, false));
    tok[5] = 70000;
    ck_assert_int_eq(nb_token_shard_write(p16, tok, 100, false), NB_ERR_INVALID_ARG); /* does not fit uint16 */
    NB_CK_OK(nb_token_shard_write(p32, tok, 37, true));
    nb_token_shard *a = nb_token_shard_open(p16), *b = nb_token_shard_open(p32);
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    ck_assert_int_eq(nb_token_shard_len(a), 100);
    NB_CK_OK(nb_token_shard_read(b, 0, 37, got));
    ck_assert(!memcmp(got, tok, sizeof(int64_t) * 37));
    tok[5] = 5 * 977 % 65536;
    NB_CK_OK(nb_token_shard_read(a, 90, 10, got));
    ck_assert(!memcmp(got, tok + 90, sizeof(int64_t) * 10));
    ck_assert_int_eq(nb_token_shard_read(a, 95, 6, got), NB_ERR_INVALID_ARG);
    nb_token_shard_close(a), nb_token_shard_close(b);
    /* windows: seq_len 8 over 100 + 37 tokens every 8 tokens: 12 + 4 windows */
    const char *paths[2] = {p16, p32};
    nb_map_dataset *w = nb_token_window_dataset(paths, 2, 8, 8);
    ck_assert_int_eq(nb_map_dataset_len(w), 16);
    nb_sample one;
    NB_CK_OK(nb_map_dataset_get(w, 13, NULL, &one)); /* the second shard's window at 8 */
    tok[5] = 70000;
    double *x = nb_test_values_of(nb_sample_get(&one, "input_ids")), *y = nb_test_values_of(nb_sample_get(&one, "labels"));
    for (int i = 0; i < 8; i++) {
        ck_assert_double_eq(x[i], (double)tok[8 + i]);
        ck_assert_double_eq(y[i], (double)tok[9 + i]);
    }
    free(x), free(y);
    nb_map_dataset_free(w);
    w = nb_token_window_dataset(paths, 1, 8, 1);
    ck_assert_int_eq(nb_map_dataset_len(w), 92);
    nb_sampler *rs = nb_sampler_new(92, (nb_sampler_options){.kind = NB_SAMPLER_RANDOM, .replacement = NB_FLAG_TRUE,
                                                             .num_samples = 12, .seed = 1});
    nb_dataloader *dl = nb_dataloader_new(w, (nb_dataloader_options){.batch_size = 4, .sampler = rs, .num_workers = 2});
    nb_sample bt;
    int nb = 0;
    while (nb_dataloader_next(dl, &bt)) {
        nb_ck_shape(nb_sample_get(&bt, "input_ids"), 2, (int64_t[]){4, 8});
        ck_assert_int_eq(nb_dtype_of(nb_sample_get(&bt, "labels")), NB_I64);
        nb++;
    }
    ck_assert_int_eq(nb, 3);
    nb_dataloader_free(dl), nb_sampler_free(rs), nb_map_dataset_free(w);
    /* hostile: a header that lies about the count, another magic, a file shorter than the header */
    size_t n;
    uint8_t *buf = (uint8_t *)nb_test_slurp(p16, &n);
    buf[8] = 101;
    nb_test_write_file(bad, buf, n);
    ck_assert_ptr_null(nb_token_shard_open(bad));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    buf[8] = 100, buf[0] ^= 1;
    nb_test_write_file(bad, buf, n);
    ck_assert_ptr_null(nb_token_shard_open(bad));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    nb_test_write_file(bad, buf, 100);
    ck_assert_ptr_null(nb_token_shard_open(bad));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    free(buf);
    /* a corpus through a BPE */
    const char *corpus = "the cat sat on the mat\n\nthe dog sat on the log\n";
    nb_test_write_file(txt, corpus, strlen(corpus));
    const char *eot[] = {"<|endoftext|>"};
    nb_bpe *bpe = nb_bpe_train(txt, 270, (nb_bpe_train_options){.special_tokens = eot, .n_special_tokens = 1});
    NB_CK_NOTNULL(bpe);
    snprintf(bad, sizeof bad, "%s/corpus.bin", dir);
    int64_t count = nb_bpe_encode_file(bpe, txt, bad, false);
    nb_tensor *l1 = nb_bpe_encode_tensor(bpe, "the cat sat on the mat", 22, false);
    nb_tensor *l2 = nb_bpe_encode_tensor(bpe, "the dog sat on the log", 22, false);
    ck_assert_int_eq(nb_dtype_of(l1), NB_I64);
    ck_assert_int_eq(count, nb_numel(l1) + nb_numel(l2) + 2);
    a = nb_token_shard_open(bad);
    int64_t all[64];
    NB_CK_OK(nb_token_shard_read(a, 0, count, all));
    double *v1 = nb_test_values_of(l1);
    for (int64_t i = 0; i < nb_numel(l1); i++) ck_assert_double_eq((double)all[i], v1[i]);
    ck_assert_int_eq(all[nb_numel(l1)], nb_bpe_token_to_id(bpe, "<|endoftext|>"));
    free(v1);
    nb_token_shard_close(a);
    nb_bpe_free(bpe);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* A checkpoint holds the DataLoader's place: a loader restored from one gives the remaining batches of that epoch. */
START_TEST(test_checkpoint_resumes_dataloader) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = -1};
    nb_map_dataset *ds = nb_map_dataset_new(20, toy_item, &t, NULL);
    nb_module *m = nb_nn_linear(3, 2);
    nb_dataloader_options o = {.batch_size = 3, .shuffle = true, .seed = 6, .collate = NB_COLLATE_PAD, .num_workers = 2};
    nb_dataloader *a = nb_dataloader_new(ds, o), *b = nb_dataloader_new(ds, o);
    nb_sample bt;
    nb_dataloader_reset(a); /* epoch 1 */
    for (int i = 0; i < 3; i++) ck_assert(nb_dataloader_next(a, &bt));
    char path[64] = "/tmp/nb_ckdl_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    NB_CK_OK(nb_save_checkpoint(path, &(nb_checkpoint){.module = m, .dataloader = a}));
    NB_CK_OK(nb_load_checkpoint(path, &(nb_checkpoint){.module = m, .dataloader = b}, NULL));
    ck_assert_int_eq(nb_dataloader_epoch(b), 1);
    ck_assert_int_eq(nb_dataloader_position(b), 3);
    static run ra, rb;
    record(a, &ra, 1);
    record(b, &rb, 1);
    ck_runs_equal(&ra, &rb, "checkpoint");
    run_free(&ra), run_free(&rb);
    /* another seed: refused, the loader unchanged */
    nb_dataloader_options o2 = o;
    o2.seed = 7;
    nb_dataloader *c = nb_dataloader_new(ds, o2);
    ck_assert_int_eq(nb_load_checkpoint(path, &(nb_checkpoint){.module = m, .dataloader = c}, NULL), NB_ERR_STATE);
    ck_assert_int_eq(nb_dataloader_epoch(c), 0);
    unlink(path);
    nb_dataloader_free(a), nb_dataloader_free(b), nb_dataloader_free(c);
    nb_module_free(m);
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

/* ---- iterable datasets and batch samplers ------------------------------------------------- */

/* A stream of len samples per epoch: sample p is "x" [2] float32 = p + U(0, 1) from its generator and
   "pos" int64 p + 100 * epoch. fail_once_at: that position's next fails once (then works). */
typedef struct stream {
    int64_t len, epoch, p, fail_once_at, resets;
} stream;

static nb_status stream_reset(void *state, int64_t epoch) {
    stream *st = state;
    st->epoch = epoch, st->p = 0, st->resets++;
    return NB_OK;
}

static nb_status stream_next(void *state, nb_generator *gen, nb_sample *out) {
    stream *st = state;
    ck_assert_int_le(st->p, st->len); /* never read past the end */
    if (st->p == st->len) return NB_OK;
    if (st->p == st->fail_once_at) {
        st->fail_once_at = -1;
        return nb_set_error(NB_ERR_IO, "stream: lost sample %lld", (long long)st->p);
    }
    nb_status s = nb_sample_set(out, "x", nb_add_scalar(nb_rand(NB_SHAPE(2), NB_F32, gen), (double)st->p));
    if (!s) s = nb_sample_set(out, "pos", nb_scalar((double)(st->p + 100 * st->epoch), NB_I64));
    st->p++;
    return s;
}

START_TEST(test_iterable_dataset) {
    nb_scope *s = nb_scope_begin();
    static run ref, got;
    stream st = {.len = 13, .fail_once_at = -1};
    nb_iterable_dataset *ds = nb_iterable_dataset_new(stream_reset, stream_next, &st, NULL);
    NB_CK_NOTNULL(ds);
    /* the same batches for any num_workers and prefetch_factor */
    const int workers[] = {0, 1, 4, 4}, prefetch[] = {0, 1, 1, 3};
    for (int c = 0; c < 4; c++) {
        nb_dataloader *dl = nb_dataloader_new_iterable(ds, (nb_dataloader_options){
                                                               .batch_size = 4, .seed = 3, .num_workers = workers[c],
                                                               .prefetch_factor = prefetch[c]});
        NB_CK_NOTNULL(dl);
        ck_assert_int_eq(nb_dataloader_num_batches(dl), -1);
        record(dl, c ? &got : &ref, 2);
        if (c) ck_runs_equal(&ref, &got, "iterable num_workers");
        if (c) run_free(&got);
        nb_dataloader_free(dl);
    }
    ck_assert_int_eq(ref.n, 8); /* 4 + 4 + 4 + 1, two epochs */
    for (int k = 0; k < 8; k++) {
        ck_assert_int_eq(ref.nidx[k], k % 4 == 3 ? 1 : 4);
        for (int64_t i = 0; i < ref.nidx[k]; i++) {
            int64_t p = (k % 4) * 4 + i;
            ck_assert_int_eq(ref.idx[k][i], p);
            ck_assert_double_eq(ref.vals[k][1][i], (double)(p + 100 * (k / 4)));
            ck_assert(ref.vals[k][0][2 * i] >= (double)p && ref.vals[k][0][2 * i] < (double)p + 1);
        }
    }
    ck_assert(ref.vals[0][0][0] != ref.vals[4][0][0]); /* each epoch draws anew */
    /* drop_last; the end is sticky until a reset */
    nb_dataloader *dl = nb_dataloader_new_iterable(ds, (nb_dataloader_options){.batch_size = 4, .drop_last = true,
                                                                              .num_workers = 2});
    nb_sample b;
    for (int k = 0; k < 3; k++) ck_assert(nb_dataloader_next(dl, &b));
    ck_assert(!nb_dataloader_next(dl, &b));
    ck_assert(!nb_dataloader_next(dl, &b));
    NB_CK_OK(nb_dataloader_status(dl));
    nb_dataloader_free(dl);
    /* resume mid-epoch (and at the end), with workers: the same remaining batches */
    for (int at = 0; at <= 4; at++) {
        dl = nb_dataloader_new_iterable(ds, (nb_dataloader_options){.batch_size = 4, .seed = 3, .num_workers = 3});
        NB_CK_OK(nb_dataloader_seek(dl, 1, at));
        record(dl, &got, 1);
        ck_assert_int_eq(got.n, 4 - at);
        for (int k = 0; k < got.n; k++) {
            ck_assert_msg(!memcmp(got.vals[k][0], ref.vals[4 + at + k][0], sizeof(double) * 2 * (size_t)got.nidx[k]), "at %d k %d: %g %g vs %g %g", at, k, got.vals[k][0][0], got.vals[k][0][2], ref.vals[4 + at + k][0][0], ref.vals[4 + at + k][0][2]);
            ck_assert(!memcmp(got.idx[k], ref.idx[4 + at + k], sizeof(int64_t) * (size_t)got.nidx[k]));
        }
        run_free(&got);
        nb_dataloader_free(dl);
    }
    dl = nb_dataloader_new_iterable(ds, (nb_dataloader_options){.batch_size = 4, .seed = 3});
    NB_CK_FAILS(nb_dataloader_seek(dl, 0, 5) == NB_OK, NB_ERR_INVALID_ARG); /* past the stream */
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "has 4 batches, not 5"));
    nb_dataloader_free(dl);
    /* a read that fails stops the loader with its message; the next call finds its place and goes on */
    for (int w = 0; w <= 3; w += 3) {
        st.fail_once_at = 6;
        dl = nb_dataloader_new_iterable(ds, (nb_dataloader_options){.batch_size = 4, .seed = 3, .num_workers = w});
        ck_assert(nb_dataloader_next(dl, &b));
        ck_assert(!nb_dataloader_next(dl, &b));
        ck_assert_int_eq(nb_dataloader_status(dl), NB_ERR_IO);
        ck_assert_ptr_nonnull(strstr(nb_last_error(), "sample 6 of epoch 0: stream: lost sample 6"));
        int64_t resets = st.resets;
        record(dl, &got, 1);
        ck_assert_int_eq(st.resets, resets + 2); /* the seek, then the next epoch's */
        ck_assert_int_eq(got.n, 3);
        for (int k = 0; k < 3; k++)
            ck_assert(!memcmp(got.vals[k][0], ref.vals[1 + k][0], sizeof(double) * 2 * (size_t)got.nidx[k]));
        run_free(&got);
        nb_dataloader_free(dl);
    }
    /* ChainDataset: 13 + 5 samples */
    stream st2 = {.len = 5, .fail_once_at = -1};
    nb_iterable_dataset *ds2 = nb_iterable_dataset_new(stream_reset, stream_next, &st2, NULL);
    nb_iterable_dataset *parts[2] = {ds, ds2};
    nb_iterable_dataset *ch = nb_chain_dataset(parts, 2);
    dl = nb_dataloader_new_iterable(ch, (nb_dataloader_options){.batch_size = 5, .num_workers = 2});
    nb_dataloader_reset(dl); /* epoch 1 for both parts */
    int64_t n = 0, last = -1;
    while (nb_dataloader_next(dl, &b)) {
        double *pos = nb_test_values_of(nb_sample_get(&b, "pos"));
        for (int64_t i = 0; i < nb_numel(nb_sample_get(&b, "pos")); i++, n++) {
            ck_assert_double_eq(pos[i], (double)(100 + (n < 13 ? n : n - 13)));
            last = (int64_t)pos[i];
        }
        free(pos);
    }
    ck_assert_int_eq(n, 18);
    ck_assert_int_eq(last, 104);
    nb_dataloader_free(dl);
    /* bad uses */
    NB_CK_FAILS(nb_iterable_dataset_new(NULL, stream_next, &st, NULL) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_dataloader_new_iterable(ds, (nb_dataloader_options){.shuffle = true}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_chain_dataset((nb_iterable_dataset *[]){NULL}, 1) != NULL, NB_ERR_INVALID_ARG);
    run_free(&ref);
    nb_iterable_dataset_free(ch), nb_iterable_dataset_free(ds2), nb_iterable_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

/* Buckets: epoch e's batch k holds the indices i with i % 3 == k, up to 4 of them, rotated by e. *state: the
   batch that fails (-2: every batch claims 5 indices, writing none). */
static int64_t buckets_len(void *state, int64_t epoch) {
    (void)state;
    return 3 + epoch % 2; /* the count varies by epoch: a fourth batch of index 0 on odd epochs */
}

static nb_status buckets(void *state, int64_t epoch, int64_t k, int64_t *indices, int64_t *n) {
    const int64_t *bad = state;
    if (*bad == k) return nb_set_error(NB_ERR_INVALID_ARG, "buckets: no batch %lld", (long long)k);
    if (*bad == -2) return *n = 5, NB_OK;
    *n = 0;
    if (k == 3) return indices[(*n)++] = 0, NB_OK;
    for (int64_t i = 0; i < 10; i++)
        if (i % 3 == k && *n < 4) indices[(*n)++] = (i + epoch) % 10;
    return NB_OK;
}

START_TEST(test_batch_sampler) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = -1};
    nb_map_dataset *ds = nb_map_dataset_new(10, toy_item, &t, NULL);
    int64_t bad = -1;
    nb_dataloader_options o = {.batch_size = 4, .seed = 2, .collate = NB_COLLATE_PAD, .batch_sampler = buckets,
                               .batch_sampler_len = buckets_len, .batch_sampler_state = &bad};
    static run ref, got;
    for (int w = 0; w <= 3; w += 3) {
        o.num_workers = w;
        nb_dataloader *dl = nb_dataloader_new(ds, o);
        NB_CK_NOTNULL(dl);
        ck_assert_int_eq(nb_dataloader_num_batches(dl), 3);
        record(dl, w ? &got : &ref, 2);
        if (w) ck_runs_equal(&ref, &got, "batch_sampler num_workers"), run_free(&got);
        nb_dataloader_free(dl);
    }
    ck_assert_int_eq(ref.n, 7);
    const int64_t want0[] = {0, 3, 6, 9}, want4[] = {1, 4, 7, 0};
    ck_assert_int_eq(ref.nidx[0], 4);
    ck_assert(!memcmp(ref.idx[0], want0, sizeof want0));
    ck_assert(!memcmp(ref.idx[3], want4, sizeof want4));
    ck_assert_int_eq(ref.nidx[1], 3);
    ck_assert_int_eq(ref.nidx[6], 1);
    /* resume into an epoch of another length */
    o.num_workers = 2;
    nb_dataloader *dl = nb_dataloader_new(ds, o);
    NB_CK_OK(nb_dataloader_seek(dl, 1, 2));
    ck_assert_int_eq(nb_dataloader_num_batches(dl), 4);
    record(dl, &got, 1);
    ck_assert_int_eq(got.n, 2);
    ck_assert(!memcmp(got.vals[0][0], ref.vals[5][0], sizeof(double) * (size_t)got.counts[0][0]));
    run_free(&got);
    NB_CK_FAILS(nb_dataloader_seek(dl, 2, 4) == NB_OK, NB_ERR_INVALID_ARG); /* epoch 2 has 3 */
    ck_assert_int_eq(nb_dataloader_epoch(dl), 2); /* reset by record */
    bad = 1;
    NB_CK_FAILS(nb_dataloader_seek(dl, 3, 0) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "buckets: no batch 1"));
    ck_assert_int_eq(nb_dataloader_epoch(dl), 2); /* stays */
    nb_dataloader_free(dl);
    /* bad options */
    bad = -1;
    o.num_workers = 0;
    o.shuffle = true;
    NB_CK_FAILS(nb_dataloader_new(ds, o) != NULL, NB_ERR_INVALID_ARG);
    o.shuffle = false, o.batch_size = 0;
    NB_CK_FAILS(nb_dataloader_new(ds, o) != NULL, NB_ERR_INVALID_ARG);
    o.batch_size = 4, bad = -2; /* more indices than batch_size */
    NB_CK_FAILS(nb_dataloader_new(ds, o) != NULL, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "has 5 indices, not 1 to batch_size 4"));
    run_free(&ref);
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_checkpoint_resumes_iterable) {
    nb_scope *s = nb_scope_begin();
    stream st = {.len = 11, .fail_once_at = -1}, st2 = st; /* a loader reads its own stream */
    nb_iterable_dataset *ds = nb_iterable_dataset_new(stream_reset, stream_next, &st, NULL);
    nb_iterable_dataset *ds2 = nb_iterable_dataset_new(stream_reset, stream_next, &st2, NULL);
    nb_module *m = nb_nn_linear(3, 2);
    nb_dataloader_options o = {.batch_size = 3, .seed = 6, .num_workers = 2};
    nb_dataloader *a = nb_dataloader_new_iterable(ds, o), *b = nb_dataloader_new_iterable(ds2, o);
    nb_sample bt;
    nb_dataloader_reset(a);
    for (int i = 0; i < 2; i++) ck_assert(nb_dataloader_next(a, &bt));
    char path[64] = "/tmp/nb_ckdl_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    NB_CK_OK(nb_save_checkpoint(path, &(nb_checkpoint){.module = m, .dataloader = a}));
    static run ra, rb;
    record(a, &ra, 1);
    NB_CK_OK(nb_load_checkpoint(path, &(nb_checkpoint){.module = m, .dataloader = b}, NULL));
    ck_assert_int_eq(nb_dataloader_position(b), 2);
    record(b, &rb, 1);
    ck_runs_equal(&ra, &rb, "iterable checkpoint");
    ck_assert_int_eq(ra.n, 2);
    run_free(&ra), run_free(&rb);
    /* a stream too short for the saved position: the load fails and changes nothing */
    stream st3 = {.len = 2, .fail_once_at = -1};
    nb_iterable_dataset *ds3 = nb_iterable_dataset_new(stream_reset, stream_next, &st3, NULL);
    nb_dataloader *c = nb_dataloader_new_iterable(ds3, o);
    nb_module *m2 = nb_nn_linear(3, 2);
    nb_named_tensor *sd;
    int nsd = nb_module_state_dict(m2, &sd);
    double w0 = nb_item(nb_select(nb_flatten(sd[0].tensor, 0, -1), 0, 0));
    ck_assert_int_eq(nb_load_checkpoint(path, &(nb_checkpoint){.module = m2, .dataloader = c}, NULL), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "positioning the DataLoader"));
    ck_assert_double_eq(nb_item(nb_select(nb_flatten(sd[0].tensor, 0, -1), 0, 0)), w0);
    ck_assert_int_eq(nb_dataloader_epoch(c), 0);
    free(sd);
    (void)nsd;
    nb_dataloader_free(c);
    nb_module_free(m2);
    nb_iterable_dataset_free(ds3);
    unlink(path);
    nb_dataloader_free(a), nb_dataloader_free(b);
    nb_module_free(m);
    nb_iterable_dataset_free(ds), nb_iterable_dataset_free(ds2);
    nb_scope_end(s);
}
END_TEST

/* Batches delivered on a CUDA device (pinned and copied on the copy stream, or copied synchronously) hold what
   the CPU batches hold; without a GPU only the device check runs. */
START_TEST(test_pin_memory_to_device) {
    nb_scope *s = nb_scope_begin();
    toy t = {.fail_at = -1};
    nb_map_dataset *ds = nb_map_dataset_new(23, toy_item, &t, NULL);
    nb_dataloader_options o = {.batch_size = 5, .shuffle = true, .seed = 9, .collate = NB_COLLATE_PAD};
    o.device = NB_CUDA(99);
    NB_CK_FAILS(nb_dataloader_new(ds, o) != NULL, NB_ERR_DEVICE);
    if (nb_device_count(NB_DEVICE_CUDA) > 0) {
        static run ref, got;
        o.device = NB_CPU;
        nb_dataloader *dl = nb_dataloader_new(ds, o);
        record(dl, &ref, 2);
        nb_dataloader_free(dl);
        const int workers[] = {0, 3, 2};
        const bool pin[] = {true, true, false};
        for (int c = 0; c < 3; c++) {
            o.device = NB_CUDA(0), o.num_workers = workers[c], o.pin_memory = pin[c];
            dl = nb_dataloader_new(ds, o);
            NB_CK_NOTNULL(dl);
            nb_sample b;
            ck_assert(nb_dataloader_next(dl, &b));
            for (int f = 0; f < b.n; f++) ck_assert_int_eq(nb_device_of(b.fields[f]).type, NB_DEVICE_CUDA);
            NB_CK_OK(nb_dataloader_seek(dl, 0, 0));
            record(dl, &got, 2); /* nb_test_values_of reads them back */
            ck_runs_equal(&ref, &got, "on the device");
            run_free(&got);
            nb_dataloader_free(dl);
        }
        run_free(&ref);
    }
    nb_map_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_dataloader(void) {
    Suite *s = suite_create("dataloader");
    TCase *t = tcase_create("dataloader");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_workers_give_the_same_batches);
    tcase_add_test(t, test_resume_every_sampler);
    tcase_add_test(t, test_sampler_laws);
    tcase_add_test(t, test_collate_errors_and_combinators);
    tcase_add_test(t, test_tensor_dataset_matches_loader);
    tcase_add_test(t, test_token_shards);
    tcase_add_test(t, test_checkpoint_resumes_dataloader);
    tcase_add_test(t, test_iterable_dataset);
    tcase_add_test(t, test_batch_sampler);
    tcase_add_test(t, test_checkpoint_resumes_iterable);
    tcase_add_test(t, test_pin_memory_to_device);
    suite_add_tcase(s, t);
    return s;
}
