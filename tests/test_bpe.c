/* test_bpe.c - byte-level BPE (data/nb_bpe.h): the two pre-tokenizers
 * against Python's regex module running GPT-2's and Llama 3's patterns
 * (piece boundaries pasted), GPT-2's real vocab.json/merges.txt (fetched by
 * data/fetch_gpt2_tokenizer.sh; the test says so and skips that part when
 * they are absent) against OpenAI's encoder.py (ids pasted), a vocabulary
 * trained here against encoder.py run on the files it saved (ids pasted),
 * save/load round trips in both formats, tokenizer.json's Llama 3 options
 * (Split pattern, added tokens past the vocabulary, ignore_merges), exact
 * round trips on random bytes (invalid UTF-8 and NUL included), and errors. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

static char dir[64];

static void tmp_setup(void) {
    strcpy(dir, "/tmp/nb_bpe_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void tmp_teardown(void) {
    nb_test_rmtree(dir);
}

static const char *path_in(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void ck_ids(const nb_bpe *t, const char *text, bool special, const int32_t *want, int64_t n) {
    int32_t got[512];
    int64_t m = nb_bpe_encode(t, text, strlen(text), special, got, 512);
    ck_assert_int_eq(m, n);
    for (int64_t i = 0; i < n; i++) ck_assert_msg(got[i] == want[i], "id %lld: got %d, want %d", (long long)i, got[i], want[i]);
}

/* decode(encode(x)) == x, byte for byte. */
static void ck_round_trip(const nb_bpe *t, const char *x, size_t n, bool special) {
    int32_t *ids = malloc(sizeof(int32_t) * (n + 1));
    char *back = malloc(n + 1);
    int64_t k = nb_bpe_encode(t, x, n, special, ids, (int64_t)n + 1);
    ck_assert(k >= 0 && k <= (int64_t)n);
    ck_assert_int_eq(nb_bpe_decode(t, ids, k, back, n + 1), (int64_t)n);
    ck_assert_msg(!memcmp(back, x, n), "round trip of %zu bytes differs", n);
    free(ids), free(back);
}

/* ---- pre-tokenizers --------------------------------------------------------------------------- */

static const char *pretok_texts[] = {
    "Hello world! It's 2024, isn't it?",
    "I'M HERE'S   three   spaces\tand\ttabs\n\n\nnewlines  \n  end",
    "12345678 x1y22z333 3.14159 \u00bd \u00b2 \u0663\u0664",
    "na\u00efve caf\u00e9 \u00dcn\u00efc\u00f6d\u00e9 \u65e5\u672c\u8a9e \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac "
    "\u0440\u0443\u0441\u0441\u043a\u0438\u0439",
    "  leading, (parens) [brackets] {braces} 'quote' \"dq\" --dash-- ...",
    "emoji \U0001F917\U0001F917 mixed\U0001F917text\r\nwindows\r\n\r\n",
    "tabs\t\t\tx  \u3000ideographic\u00a0nbsp",
    "'s 't 'RE 've 'M 'll 'D 'x",
};

/* [e for m in regex.finditer(PATTERN, text) for e in [len(text[:m.end()].encode())]]
 * with Python's regex module (2026.5.9); -1 ends a list */
static const int64_t gpt2_ends[8][24] = {
    {5, 11, 12, 15, 17, 22, 23, 27, 29, 32, 33, -1},
    {1, 2, 3, 8, 9, 10, 12, 18, 20, 27, 28, 31, 32, 36, 38, 39, 47, 51, 55, -1},
    {8, 10, 11, 12, 14, 15, 18, 20, 21, 26, 29, 32, 37, -1},
    {6, 12, 24, 34, 51, 66, -1},
    {1, 9, 10, 12, 18, 19, 21, 29, 30, 32, 38, 39, 41, 46, 47, 49, 51, 52, 55, 59, 61, 65, -1},
    {5, 14, 20, 24, 28, 29, 30, 37, 41, -1},
    {4, 6, 7, 8, 10, 13, 24, 26, 30, -1},
    {2, 4, 5, 7, 9, 11, 13, 15, 16, 18, 20, 22, 23, 25, 26, -1},
};
static const int64_t llama3_ends[8][24] = {
    {5, 11, 12, 15, 17, 18, 21, 22, 23, 27, 29, 32, 33, -1},
    {1, 3, 8, 10, 12, 18, 20, 27, 31, 36, 39, 47, 50, 51, 55, -1},
    {3, 6, 8, 10, 11, 12, 14, 15, 18, 19, 20, 21, 24, 26, 27, 29, 30, 32, 33, 37, -1},
    {6, 12, 24, 34, 51, 66, -1},
    {1, 9, 10, 12, 18, 19, 21, 29, 30, 32, 38, 39, 41, 46, 47, 49, 51, 52, 55, 59, 61, 65, -1},
    {5, 14, 20, 28, 30, 37, 41, -1},
    {4, 6, 8, 10, 24, 30, -1},
    {2, 4, 5, 7, 9, 11, 13, 15, 16, 18, 20, 22, 23, 25, 26, -1},
};

START_TEST(test_pretokenizers_match_regex) {
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 2; k++) {
            const int64_t *want = k ? llama3_ends[i] : gpt2_ends[i];
            int64_t got[64], n = nb_bpe_pretokenize(k ? NB_BPE_LLAMA3 : NB_BPE_GPT2, pretok_texts[i],
                                                    strlen(pretok_texts[i]), got, 64);
            int64_t m = 0;
            while (want[m] >= 0) m++;
            ck_assert_msg(n == m, "text %d, pattern %d: %lld pieces, want %lld", i, k, (long long)n, (long long)m);
            for (int64_t j = 0; j < n; j++) ck_assert_int_eq(got[j], want[j]);
        }
    /* invalid UTF-8 bytes are units of no class: they join punctuation */
    const char bad[] = "a\xff\xfe b\xc3(";
    int64_t e[8];
    ck_assert_int_eq(nb_bpe_pretokenize(NB_BPE_GPT2, bad, 8, e, 8), 4);
    ck_assert(e[0] == 1 && e[1] == 3 && e[2] == 5 && e[3] == 8);
    ck_assert_int_eq(nb_bpe_pretokenize(NB_BPE_GPT2, NULL, 0, NULL, 0), 0);
    ck_assert_int_eq(nb_bpe_pretokenize(NB_BPE_GPT2, NULL, 3, e, 8), -1);
}
END_TEST

/* ---- GPT-2's own files ---------------------------------------------------------------------------- */

static bool gpt2_files(char *vocab, char *merges, size_t len) {
    const char *d = getenv("NB_GPT2_TOKENIZER_DIR");
    char def[512];
    if (!d || !*d) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg) snprintf(def, sizeof def, "%s/nabla/gpt2", xdg);
        else snprintf(def, sizeof def, "%s/.cache/nabla/gpt2", home ? home : "");
        d = def;
    }
    snprintf(vocab, len, "%s/vocab.json", d);
    snprintf(merges, len, "%s/merges.txt", d);
    return !access(vocab, R_OK) && !access(merges, R_OK);
}

static const char *gpt2_text = "Hello world! It's a test: na\u00efve caf\u00e9, 1234567 numbers, don't stop\u2014  multiple   "
                               "spaces\n\nnew line\ttab. \u00dcn\u00efc\u00f6d\u00e9 \u65e5\u672c\u8a9e emoji \U0001F917 "
                               "<|endoftext|> done.  ";
/* OpenAI's gpt-2/src/encoder.py (regex module) on GPT-2's vocab.json and merges.txt */
static const int32_t gpt2_ids[] = {
    15496, 995, 0, 632, 338, 257, 1332, 25, 41492, 40304, 11, 17031, 2231, 3134, 3146, 11, 836, 470, 2245, 960, 220,
    3294, 220, 220, 9029, 198, 198, 3605, 1627, 197, 8658, 13, 49363, 77, 26884, 66, 9101, 67, 2634, 10545, 245, 98,
    17312, 105, 45739, 252, 44805, 12520, 97, 245, 1279, 91, 437, 1659, 5239, 91, 29, 1760, 13, 220, 220};

START_TEST(test_gpt2_files) {
    char vocab[600], merges[600];
    if (!gpt2_files(vocab, merges, sizeof vocab)) {
        printf("test_bpe: GPT-2's vocab.json/merges.txt not found: run data/fetch_gpt2_tokenizer.sh; part skipped\n");
        return;
    }
    nb_bpe *t = nb_bpe_load_gpt2(vocab, merges);
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_bpe_vocab_size(t), 50257);
    ck_assert_int_eq(nb_bpe_num_merges(t), 50000);
    ck_assert_int_eq(nb_bpe_token_to_id(t, "\u0120the"), 262);
    ck_assert(nb_bpe_is_special(t, 50256) && !nb_bpe_is_special(t, 262));
    int n = (int)(sizeof gpt2_ids / sizeof *gpt2_ids);
    ck_ids(t, gpt2_text, false, gpt2_ids, n);
    ck_round_trip(t, gpt2_text, strlen(gpt2_text), false);
    /* added tokens split out: " <|endoftext|>" is 220, 50256 instead of 1279, 91, 437, 1659, 5239, 91, 29 */
    int32_t with_special[64];
    memcpy(with_special, gpt2_ids, sizeof(int32_t) * 50);
    with_special[50] = 220, with_special[51] = 50256;
    memcpy(with_special + 52, gpt2_ids + 57, sizeof(int32_t) * 4);
    ck_ids(t, gpt2_text, true, with_special, 56);
    ck_round_trip(t, gpt2_text, strlen(gpt2_text), true);
    /* saved in both formats and loaded again: the same ids */
    NB_CK_OK(nb_bpe_save_gpt2(t, path_in("vocab.json"), path_in("merges.txt")));
    NB_CK_OK(nb_bpe_save_tokenizer_json(t, path_in("tokenizer.json")));
    nb_bpe *a = nb_bpe_load_gpt2(path_in("vocab.json"), path_in("merges.txt"));
    nb_bpe *b = nb_bpe_load_tokenizer_json(path_in("tokenizer.json"));
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    ck_ids(a, gpt2_text, true, with_special, 56);
    ck_ids(b, gpt2_text, true, with_special, 56);
    ck_assert(nb_bpe_is_special(b, 50256));
    nb_bpe_free(a), nb_bpe_free(b), nb_bpe_free(t);
}
END_TEST

/* ---- a trained vocabulary -------------------------------------------------------------------------------- */

static const char *corpus_lines = "the quick brown fox jumps over the lazy dog.\n"
                                  "a quick brown dog jumps over the lazy fox!\n"
                                  "the dog's bone, the fox's den: 42 bones, 7 dens.\n"
                                  "Jumping foxes and lazy dogs; quick, quicker, quickest.\n"
                                  "  indented line with   spaces\tand tabs\n";

static nb_bpe *train_small(nb_bpe_pretokenizer kind, int32_t size) {
    FILE *f = fopen(path_in("corpus.txt"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 3; i++) fputs(corpus_lines, f);
    fclose(f);
    const char *sp[] = {"<|endoftext|>"};
    nb_bpe *t = nb_bpe_train(path_in("corpus.txt"), size,
                             (nb_bpe_train_options){.pretokenizer = kind, .special_tokens = sp, .n_special_tokens = 1});
    NB_CK_NOTNULL(t);
    return t;
}

static const char *trained_text = "The quickest brown foxes' dens: 1234 lazy dogs jumped over 7 bones!\n  Unseen w\u00f6rds ok?";
/* encoder.py on the vocab.json/merges.txt this test saves from the 320-token vocabulary */
static const int32_t trained_ids[] = {51,  71, 68,  318, 83,  296, 271, 264, 6,   290, 82,  25,  220, 16, 17,
                                      18,  19, 280, 270, 82,  288, 302, 295, 310, 291, 264, 0,   309, 220, 52,
                                      77,  82, 68,  273, 220, 86,  127, 114, 81,  67,  82,  220, 78,  74,  30};

START_TEST(test_trained_vocabulary) {
    nb_bpe *t = train_small(NB_BPE_GPT2, 320);
    ck_assert_int_eq(nb_bpe_vocab_size(t), 320);
    ck_assert_int_eq(nb_bpe_num_merges(t), 63);
    ck_assert_str_eq(nb_bpe_id_to_token(t, 0), "!"); /* GPT-2's byte order */
    ck_assert_str_eq(nb_bpe_id_to_token(t, 220), "\u0120"); /* the space byte */
    ck_assert_str_eq(nb_bpe_id_to_token(t, 319), "<|endoftext|>");
    ck_assert(nb_bpe_is_special(t, 319));
    int n = (int)(sizeof trained_ids / sizeof *trained_ids);
    ck_ids(t, trained_text, false, trained_ids, n);
    NB_CK_OK(nb_bpe_save_gpt2(t, path_in("v.json"), path_in("m.txt")));
    NB_CK_OK(nb_bpe_save_tokenizer_json(t, path_in("t.json")));
    nb_bpe *a = nb_bpe_load_gpt2(path_in("v.json"), path_in("m.txt"));
    nb_bpe *b = nb_bpe_load_tokenizer_json(path_in("t.json"));
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    ck_ids(a, trained_text, false, trained_ids, n);
    ck_ids(b, trained_text, false, trained_ids, n);
    ck_assert_int_eq(nb_bpe_token_to_id(b, "<|endoftext|>"), 319);
    /* the same corpus trains the same vocabulary */
    nb_bpe *again = train_small(NB_BPE_GPT2, 320);
    for (int32_t id = 0; id < 320; id++) ck_assert_str_eq(nb_bpe_id_to_token(again, id), nb_bpe_id_to_token(t, id));
    /* min_frequency stops early; a size below the alphabet is refused */
    nb_bpe *few = nb_bpe_train(path_in("corpus.txt"), 5000, (nb_bpe_train_options){.min_frequency = 100});
    NB_CK_NOTNULL(few);
    ck_assert_int_lt(nb_bpe_vocab_size(few), 300);
    NB_CK_FAILS(nb_bpe_train(path_in("corpus.txt"), 256, (nb_bpe_train_options){.special_tokens = (const char *[]){"x"},
                                                                                .n_special_tokens = 1}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_bpe_train(path_in("none.txt"), 300, (nb_bpe_train_options){0}), NB_ERR_IO);
    nb_bpe_free(few), nb_bpe_free(again), nb_bpe_free(a), nb_bpe_free(b), nb_bpe_free(t);
}
END_TEST

/* ---- Llama 3 options of tokenizer.json --------------------------------------------------------------------- */

START_TEST(test_tokenizer_json_llama3) {
    nb_bpe *t = train_small(NB_BPE_LLAMA3, 300);
    NB_CK_OK(nb_bpe_save_tokenizer_json(t, path_in("t.json")));
    /* as Llama 3's file: two more added tokens past the vocabulary, a token
     * no merge reaches ("Ġxyzzy"), and ignore_merges */
    json_error_t err;
    json_t *root = json_load_file(path_in("t.json"), 0, &err);
    ck_assert_ptr_nonnull(root);
    json_t *model = json_object_get(root, "model");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(
                         json_object_get(root, "pre_tokenizer"), "pretokenizers"), 0), "pattern"), "Regex")),
                     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    json_object_del(json_object_get(model, "vocab"), "<|endoftext|>");
    json_object_set_new(json_object_get(model, "vocab"), "\u0120xyzzy", json_integer(299));
    json_t *added = json_object_get(root, "added_tokens");
    json_object_set_new(json_array_get(added, 0), "id", json_integer(300));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b}", "id", 301, "content", "<|eot_id|>", "special", 1));
    ck_assert_int_eq(json_dump_file(root, path_in("l3.json"), 0), 0);
    json_object_set_new(model, "ignore_merges", json_true());
    ck_assert_int_eq(json_dump_file(root, path_in("l3i.json"), 0), 0);
    json_decref(root);
    nb_bpe *plain = nb_bpe_load_tokenizer_json(path_in("l3.json")), *ign = nb_bpe_load_tokenizer_json(path_in("l3i.json"));
    NB_CK_NOTNULL(plain);
    NB_CK_NOTNULL(ign);
    ck_assert_int_eq(nb_bpe_get_pretokenizer(ign), NB_BPE_LLAMA3);
    ck_assert_int_eq(nb_bpe_vocab_size(ign), 302);
    ck_assert(nb_bpe_is_special(ign, 300) && nb_bpe_is_special(ign, 301));
    int32_t ids[32];
    ck_assert_int_eq(nb_bpe_encode(ign, " xyzzy", 6, true, ids, 32), 1);
    ck_assert_int_eq(ids[0], 299);
    ck_assert_int_gt(nb_bpe_encode(plain, " xyzzy", 6, true, ids, 32), 1); /* merges never make it */
    int64_t hi = nb_bpe_encode(ign, "hi", 2, true, NULL, 0);
    ck_assert_int_eq(nb_bpe_encode(ign, "hi<|eot_id|><|endoftext|>", 25, true, ids, 32), hi + 2);
    ck_assert(ids[hi] == 301 && ids[hi + 1] == 300);
    char out[32];
    ck_assert_int_eq(nb_bpe_decode(ign, ids, hi + 2, out, sizeof out), 25);
    ck_assert_str_eq(out, "hi<|eot_id|><|endoftext|>");
    nb_bpe_free(plain), nb_bpe_free(ign), nb_bpe_free(t);
}
END_TEST

/* ---- any bytes round-trip ------------------------------------------------------------------------------------ */

START_TEST(test_round_trip_random_bytes) {
    nb_bpe *ts[2] = {train_small(NB_BPE_GPT2, 330), train_small(NB_BPE_LLAMA3, 330)};
    uint64_t x = 88172645463325252ull;
    char buf[3000];
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(trial * 13 % 2900);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* half the trials: any byte; the others: mostly text-like bytes */
            static const char text_like[] = " \n\tabcxyz'0123456789.,!\xc3\xa9\xe6\x97\xa5<|>";
            buf[i] = trial % 2 ? (char)(x & 0xFF) : text_like[x % (sizeof text_like - 1)];
        }
        if (trial % 5 == 0 && n > 20) memcpy(buf + n / 2, "<|endoftext|>", 13);
        for (int k = 0; k < 2; k++) {
            ck_round_trip(ts[k], buf, n, trial % 3 == 0);
        }
    }
    nb_bpe_free(ts[0]), nb_bpe_free(ts[1]);
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------------------------- */

START_TEST(test_errors) {
    nb_bpe *t = train_small(NB_BPE_GPT2, 300);
    NB_CK_OK(nb_bpe_save_gpt2(t, path_in("v.json"), path_in("m.txt")));
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("none.json"), path_in("m.txt")), NB_ERR_IO);
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("v.json"), path_in("none.txt")), NB_ERR_IO);
    write_file(path_in("bad.json"), "{\"a\": 0, ");
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("bad.json"), path_in("m.txt")), NB_ERR_FORMAT);
    write_file(path_in("gap.json"), "{\"a\": 0, \"b\": 2}");
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("gap.json"), path_in("m.txt")), NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "each once"));
    write_file(path_in("nobytes.json"), "{\"a\": 0, \"b\": 1}");
    write_file(path_in("empty.txt"), "#version: 0.2\n");
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("nobytes.json"), path_in("empty.txt")), NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "no token for byte"));
    write_file(path_in("badm.txt"), "#version: 0.2\nt h\nqq zz\n");
    NB_CK_FAILS(nb_bpe_load_gpt2(path_in("v.json"), path_in("badm.txt")), NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "merge 3"));
    write_file(path_in("norm.json"), "{\"normalizer\": {\"type\": \"NFC\"}, \"model\": {\"type\": \"BPE\"}}");
    NB_CK_FAILS(nb_bpe_load_tokenizer_json(path_in("norm.json")), NB_ERR_UNSUPPORTED);
    write_file(path_in("wp.json"), "{\"model\": {\"type\": \"WordPiece\"}}");
    NB_CK_FAILS(nb_bpe_load_tokenizer_json(path_in("wp.json")), NB_ERR_UNSUPPORTED);
    write_file(path_in("pre.json"), "{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"model\": {\"type\": \"BPE\"}}");
    NB_CK_FAILS(nb_bpe_load_tokenizer_json(path_in("pre.json")), NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "Whitespace"));
    int32_t ids[4] = {0, 1, 400, 2};
    char out[16];
    ck_assert_int_eq(nb_bpe_decode(t, ids, 4, out, sizeof out), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_bpe_encode(t, NULL, 3, false, ids, 4), -1);
    ck_assert_int_eq(nb_bpe_encode(NULL, "a", 1, false, ids, 4), -1);
    ck_assert_int_eq(nb_bpe_encode(t, "", 0, false, NULL, 0), 0);
    /* a short output buffer: the count is still the total, and decode truncates as snprintf */
    ck_assert_int_eq(nb_bpe_encode(t, "the lazy dog", 12, false, ids, 1), nb_bpe_encode(t, "the lazy dog", 12, false, NULL, 0));
    int32_t w[8];
    int64_t k = nb_bpe_encode(t, "the lazy dog", 12, false, w, 8);
    ck_assert_int_eq(nb_bpe_decode(t, w, k, out, 5), 12);
    ck_assert_str_eq(out, "the ");
    ck_assert_ptr_null(nb_bpe_id_to_token(t, 300));
    ck_assert_int_eq(nb_bpe_token_to_id(t, "no such token"), -1);
    nb_bpe_free(t);
}
END_TEST

Suite *nb_suite_bpe(void) {
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("bpe");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_pretokenizers_match_regex);
    tcase_add_test(tc, test_gpt2_files);
    tcase_add_test(tc, test_trained_vocabulary);
    tcase_add_test(tc, test_tokenizer_json_llama3);
    tcase_add_test(tc, test_round_trip_random_bytes);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
