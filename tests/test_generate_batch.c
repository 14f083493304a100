/* test_generate_batch.c - batched decoding (nn/generate_batch.c) and the
 * left-padded KV cache under it (nb_kv_cache_set_left_padding): a padded
 * batch's hidden states equal each sequence's own forward, prefill and
 * decode steps, for GPT-2 and Llama; nb_generate_batch gives every
 * sequence the tokens nb_generate gives it alone (greedy, eager and
 * captured, on the CPU and on a GPU when there is one), stops sequences on
 * their own (stop tokens, the callback, length caps), samples
 * reproducibly, and refuses bad arguments. */
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_test.h"
#include "suites.h"

/* A 2-layer model on dev (made there: the default device is dev meanwhile). */
static nb_module *tiny(bool llama, nb_device dev) {
    nb_module *m;
    NB_CK_OK(nb_set_default_device(dev));
    if (llama) {
        nb_llama_config c = nb_llama_config_default();
        c.vocab_size = 40, c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 2;
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 24, c.rms_norm_eps = 1e-5;
        c.initializer_range = 0.2;
        m = nb_llama(c);
    } else {
        nb_gpt2_config c = nb_gpt2_config_default();
        c.vocab_size = 40, c.n_positions = 24, c.n_embd = 16, c.n_layer = 2, c.n_head = 4;
        c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0, c.initializer_range = 0.2;
        m = nb_gpt2(c);
    }
    NB_CK_OK(nb_set_default_device(NB_CPU));
    NB_CK_NOTNULL(m);
    nb_module_train(m, false);
    return m;
}

static const int64_t P0[5] = {4, 17, 9, 30, 2}, P1[2] = {11, 25}, P2[7] = {7, 13, 3, 38, 21, 5, 16};
static const int64_t *const PROMPTS[3] = {P0, P1, P2};
static const int64_t LENS[3] = {5, 2, 7};

/* A padded batch's hidden states at each sequence's own positions equal its
 * forward alone; then one decode step of [3, 1] equals each sequence's own
 * cached step. */
START_TEST(test_left_padding_forward) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    for (int llama = 0; llama < 2; llama++) {
        nb_module *m = tiny(llama, NB_CPU);
        int64_t ids[3 * 7], pad[3], next[3] = {8, 19, 33};
        for (int b = 0; b < 3; b++) {
            pad[b] = 7 - LENS[b];
            for (int i = 0; i < 7; i++) ids[b * 7 + i] = i < pad[b] ? 39 : PROMPTS[b][i - pad[b]];
        }
        nb_kv_cache *c = nb_kv_cache_new(m, 3, 12);
        NB_CK_NOTNULL(c);
        NB_CK_OK(nb_kv_cache_set_left_padding(c, pad));
        nb_tensor *h = nb_causal_lm_hidden(m, nb_from_data(ids, 2, (int64_t[]){3, 7}, NB_I64), c);
        nb_tensor *h1 = nb_causal_lm_hidden(m, nb_from_data(next, 2, (int64_t[]){3, 1}, NB_I64), c);
        NB_CK_NOTNULL(h1);
        for (int b = 0; b < 3; b++) {
            nb_kv_cache *one = nb_kv_cache_new(m, 1, 12);
            nb_tensor *want = nb_causal_lm_hidden(m, nb_from_data(PROMPTS[b], 2, (int64_t[]){1, LENS[b]}, NB_I64), one);
            nb_ck_close_to(nb_narrow(nb_narrow(h, 0, b, 1), 1, pad[b], LENS[b]), want, 1e-5);
            want = nb_causal_lm_hidden(m, nb_from_data(&next[b], 2, (int64_t[]){1, 1}, NB_I64), one);
            nb_ck_close_to(nb_narrow(h1, 0, b, 1), want, 1e-5);
            nb_kv_cache_free(one);
        }
        /* the static decode step (what a captured greedy batch replays) on a second padded cache: the same logits */
        nb_kv_cache *d = nb_kv_cache_new(m, 3, 12);
        NB_CK_OK(nb_kv_cache_set_left_padding(d, pad));
        NB_CK_NOTNULL(nb_causal_lm_hidden(m, nb_from_data(ids, 2, (int64_t[]){3, 7}, NB_I64), d));
        nb_tensor *pos = nb_from_data((int64_t[]){7}, 1, (int64_t[]){1}, NB_I64), *keys = nb_arange(0, 12, 1, NB_I64);
        nb_ck_close_to(nb_decoder_step_at(m, nb_from_data(next, 2, (int64_t[]){3, 1}, NB_I64), d, pos, keys), h1, 1e-5);
        nb_kv_cache_free(d);
        NB_CK_FAILS(nb_kv_cache_set_left_padding(c, pad) == NB_OK, NB_ERR_STATE); /* it holds tokens */
        NB_CK_OK(nb_kv_cache_crop(c, 0));
        NB_CK_FAILS(nb_kv_cache_set_left_padding(c, (int64_t[]){0, 12, 0}) == NB_OK, NB_ERR_INVALID_ARG);
        NB_CK_OK(nb_kv_cache_set_left_padding(c, NULL));
        nb_kv_cache_free(c);
        nb_module_free(m);
    }
    nb_scope_end(s);
}
END_TEST

typedef struct stopper {
    int64_t seq, after, seen;
} stopper;

static bool stop_one(void *user, int64_t seq, int64_t tok) {
    stopper *st = user;
    (void)tok;
    return seq != st->seq || ++st->seen < st->after;
}

/* Greedy: each sequence's tokens are nb_generate's for it alone, with and
 * without a captured step; a stop token and the callback stop sequences on
 * their own. */
static void check_matches_alone(nb_device dev) {
    nb_manual_seed(11);
    for (int llama = 0; llama < 2; llama++) {
        nb_module *m = tiny(llama, dev);
        int64_t alone[3][10], n_alone[3];
        for (int b = 0; b < 3; b++) {
            n_alone[b] = nb_generate(m, PROMPTS[b], LENS[b], alone[b], 10, (nb_generate_options){.max_new_tokens = 10});
            ck_assert_int_eq(n_alone[b], 10);
        }
        for (int eager = 0; eager < 2; eager++) {
            int64_t out[3 * 10], n_new[3];
            nb_generate_options o = {.max_new_tokens = 10, .eager_decode = eager};
            ck_assert_int_eq(nb_generate_batch(m, 3, PROMPTS, LENS, out, 10, n_new, NULL, NULL, o), 10);
            for (int b = 0; b < 3; b++) {
                ck_assert_int_eq(n_new[b], 10);
                for (int i = 0; i < 10; i++)
                    ck_assert_msg(out[b * 10 + i] == alone[b][i], "%s on %s, eager %d: sequence %d token %d: %lld, "
                                  "alone %lld", llama ? "llama" : "gpt2", dev.type == NB_DEVICE_CUDA ? "cuda" : "cpu",
                                  eager, b, i, (long long)out[b * 10 + i], (long long)alone[b][i]);
            }
            /* a stop token (sequence 0's 4th) ends each sequence at its first one, the callback sequence 1
               after 2 tokens */
            int64_t stop = alone[0][3], most = 0;
            stopper st = {1, 2, 0};
            o.stop_tokens = &stop, o.n_stop_tokens = 1;
            int64_t got = nb_generate_batch(m, 3, PROMPTS, LENS, out, 10, n_new, stop_one, &st, o);
            for (int b = 0; b < 3; b++) {
                int64_t want = b == 1 ? 2 : 10;
                for (int i = 0; i < 10; i++)
                    if (alone[b][i] == stop) want = want < i + 1 ? want : i + 1;
                ck_assert_int_eq(n_new[b], want);
                for (int i = 0; i < n_new[b]; i++) ck_assert_int_eq(out[b * 10 + i], alone[b][i]);
                most = want > most ? want : most;
            }
            ck_assert_int_le(n_new[0], 4);
            ck_assert_int_eq(got, most);
        }
        nb_module_free(m);
    }
}

/* Sampling, alone and batched: the same generator state gives the same tokens and leaves the generator at the same
 * offset op by op (eager_decode) and with the step captured (the default on a device with graphs, which then
 * launches far fewer kernels: a capture that failed would fall back to eager steps silently). */
static void check_sampled_capture(nb_device dev) {
    nb_manual_seed(13);
    nb_module *m = tiny(true, dev);
    uint64_t launches[2];
    int64_t out[2][3 * 12], n_new[2][3], offset[2];
    for (int eager = 1; eager >= 0; eager--) {
        nb_generator g = nb_generator_new(21);
        nb_generate_options o = {.max_new_tokens = 12, .temperature = 0.9, .top_k = 10, .top_p = 0.95, .gen = &g,
                                 .eager_decode = eager};
        uint64_t l0 = nb_device_counters_get(dev).kernel_launches;
        ck_assert_int_eq(nb_generate(m, P2, 7, out[eager], 12, o), 12);
        launches[eager] = nb_device_counters_get(dev).kernel_launches - l0;
        ck_assert_int_eq(nb_generate_batch(m, 3, PROMPTS, LENS, out[eager] + 12, 8, n_new[eager], NULL, NULL, o), 12);
        offset[eager] = (int64_t)g.offset;
    }
    ck_assert(!memcmp(out[0], out[1], sizeof out[0]) && !memcmp(n_new[0], n_new[1], sizeof n_new[0]));
    ck_assert_int_eq(offset[0], offset[1]);
    ck_assert_int_eq(offset[0], 12 + 12 * 2); /* a block per token alone, a [3, 1] fill (2 blocks) per batch step */
    if (dev.type == NB_DEVICE_CUDA)
        ck_assert_msg(2 * launches[0] < launches[1], "graph decode launched %llu kernels, eager %llu",
                      (unsigned long long)launches[0], (unsigned long long)launches[1]);
    nb_module_free(m);
}

START_TEST(test_generate_batch_matches_alone) {
    nb_scope *s = nb_scope_begin();
    check_matches_alone(NB_CPU);
    check_sampled_capture(NB_CPU);
    if (nb_device_count(NB_DEVICE_CUDA) > 0) { /* the GPU machine */
        check_matches_alone(NB_CUDA(0));
        check_sampled_capture(NB_CUDA(0));
    }
    nb_scope_end(s);
}
END_TEST

/* The model's 24 positions: a prompt of 20 gets 4 tokens, as alone; the
 * batch's cache holds 24 positions from the longest prompt, so a short
 * prompt beside it gets 4 too. Sampling: the same seed gives the same
 * tokens, every one in the vocabulary. */
START_TEST(test_generate_batch_limits_and_sampling) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(12);
    nb_module *m = tiny(true, NB_CPU);
    int64_t longp[20], out[2 * 10], n_new[2];
    for (int i = 0; i < 20; i++) longp[i] = (i * 7) % 40;
    const int64_t *ps[2] = {longp, P1}, lens[2] = {20, 2};
    ck_assert_int_eq(nb_generate_batch(m, 2, ps, lens, out, 10, n_new, NULL, NULL,
                                       (nb_generate_options){.max_new_tokens = 10}), 4);
    ck_assert_int_eq(n_new[0], 4);
    ck_assert_int_eq(n_new[1], 4);
    int64_t alone[10];
    ck_assert_int_eq(nb_generate(m, longp, 20, alone, 10, (nb_generate_options){.max_new_tokens = 10}), 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out[i], alone[i]);
    int64_t a[3 * 6], b[3 * 6], na[3], nb[3];
    for (int r = 0; r < 2; r++) {
        nb_generator g = nb_generator_new(77);
        nb_generate_options o = {.max_new_tokens = 6, .temperature = 0.9, .top_k = 5, .top_p = 0.9, .gen = &g};
        ck_assert_int_eq(nb_generate_batch(m, 3, PROMPTS, LENS, r ? b : a, 6, r ? nb : na, NULL, NULL, o), 6);
    }
    ck_assert(!memcmp(a, b, sizeof a) && !memcmp(na, nb, sizeof na));
    for (int i = 0; i < 18; i++) ck_assert(a[i] >= 0 && a[i] < 40);
    /* bad arguments */
    nb_generate_options o = {.max_new_tokens = 3};
    NB_CK_FAILS(nb_generate_batch(m, 0, PROMPTS, LENS, out, 10, n_new, NULL, NULL, o) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_generate_batch(m, 3, PROMPTS, (int64_t[]){5, 0, 7}, out, 10, n_new, NULL, NULL, o) >= 0,
                NB_ERR_INVALID_ARG);
    const int64_t bad[1] = {40}, *pb[1] = {bad};
    NB_CK_FAILS(nb_generate_batch(m, 1, pb, (int64_t[]){1}, out, 10, n_new, NULL, NULL, o) >= 0, NB_ERR_INVALID_ARG);
    o.callback = (nb_token_callback)1; /* the single-sequence callback is not this function's */
    NB_CK_FAILS(nb_generate_batch(m, 3, PROMPTS, LENS, out, 10, n_new, NULL, NULL, o) >= 0, NB_ERR_INVALID_ARG);
    nb_module *relu = nb_nn_relu();
    NB_CK_FAILS(nb_generate_batch(relu, 3, PROMPTS, LENS, out, 10, n_new, NULL, NULL, o) >= 0, NB_ERR_INVALID_ARG);
    nb_module_free(relu);
    nb_module_free(m);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_generate_batch(void) {
    Suite *s = suite_create("generate_batch");
    TCase *tc = tcase_create("generate_batch");
    tcase_add_test(tc, test_left_padding_forward);
    tcase_add_test(tc, test_generate_batch_matches_alone);
    tcase_add_test(tc, test_generate_batch_limits_and_sampling);
    suite_add_tcase(s, tc);
    return s;
}
