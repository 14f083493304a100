/* test_text.c - the text pipeline: BERT's basic tokenization (punctuation,
 * case, accents, whitespace, control characters, Unicode punctuation, CJK;
 * expected strings written by hand from tokenization.py's rules and checked
 * against it), WordPiece greedy longest-match-first on hand-written
 * vocabularies (ours and a BERT-style one with [UNK] at 100), vocab.txt
 * save/load, vocabulary training (hand-computed merge orders, tie-breaking,
 * determinism), the MLM dataset (layout, 15% and 80/10/10 rates, labels,
 * determinism in (seed, epoch, index), batches), and every error path.
 * All files are generated into a temporary directory. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_test.h"

/* ---- temporary files ------------------------------------------------------- */

static char g_dir[64];

static void tmp_setup(void) {
    strcpy(g_dir, "/tmp/nb_test_text_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static void tmp_teardown(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Writes text to g_dir/name; returns the path (a static buffer per slot). */
static const char *write_text(const char *name, const char *text) {
    static char paths[8][256];
    static int slot;
    char *path = paths[slot++ % 8];
    snprintf(path, 256, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (*text) ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* ---- basic tokenization ---------------------------------------------------- */

static void ck_basic(const char *text, bool lower, const char *expected) {
    char out[512];
    int64_t n = nb_basic_tokenize(text, lower, out, sizeof out);
    ck_assert_msg(n == (int64_t)strlen(expected), "length %lld for \"%s\": got \"%s\"", (long long)n, text,
                  out);
    ck_assert_str_eq(out, expected);
}

START_TEST(basic_punctuation) {
    ck_basic("Hello, world! (a-b) don't.", true, "hello , world ! ( a - b ) don ' t .");
    ck_basic("x+y=z; [1]{2}<3>@#$%^&*~`|\\/\"?", true,
             "x + y = z ; [ 1 ] { 2 } < 3 > @ # $ % ^ & * ~ ` | \\ / \" ?");
    ck_basic("e.g.", true, "e . g .");
    ck_basic("...", true, ". . .");
}
END_TEST

START_TEST(basic_case) {
    ck_basic("HeLLo WoRLD 42", true, "hello world 42");
    ck_basic("HeLLo WoRLD 42", false, "HeLLo WoRLD 42");
    ck_basic("\xc3\x89T\xc3\x89", false, "\xc3\x89T\xc3\x89"); /* cased keeps accents: ÉTÉ */
}
END_TEST

START_TEST(basic_accents) {
    /* Café Ñandú naïve ÅNGSTRÖM -> cafe nandu naive angstrom */
    ck_basic("Caf\xc3\xa9 \xc3\x91" "and\xc3\xba na\xc3\xafve \xc3\x85NGSTR\xc3\x96M", true,
             "cafe nandu naive angstrom");
    ck_basic("e\xcc\x81te", true, "ete");                       /* e + U+0301 combining acute */
    ck_basic("Stra\xc3\x9f" "e \xc3\x98re", true, "stra\xc3\x9f" "e \xc3\xb8re"); /* ß, ø: no NFD */
    ck_basic("\xce\x86\xce\x9b\xce\xa6\xce\x91", true, "\xce\xb1\xce\xbb\xcf\x86\xce\xb1"); /* ΆΛΦΑ -> αλφα */
    ck_basic("Vi\xe1\xbb\x87t", true, "viet");                  /* ệ U+1EC7 */
    ck_basic("\xd0\x81\xd0\x96", true, "\xd0\xb5\xd0\xb6");     /* ЁЖ -> еж */
}
END_TEST

START_TEST(basic_whitespace) {
    /* tab, newline, CRLF, U+00A0, U+3000, U+2028 all separate words */
    ck_basic("  a\t\tb\nc\r\nd\xc2\xa0" "e\xe3\x80\x80" "f\xe2\x80\xa8g  ", true, "a b c d e f g");
    ck_basic("", true, "");
    ck_basic(" \t\r\n ", true, "");
}
END_TEST

START_TEST(basic_control) {
    /* Cc / Cf removed without splitting: \x01, DEL, \v, U+200B, U+FEFF, soft hyphen */
    ck_basic("a\x01" "b\x7f" " c\xe2\x80\x8b" "d\xef\xbb\xbf" " e\vf co\xc2\xad" "op", true, "ab cd ef coop");
    ck_basic("a\xff" "b \xef\xbf\xbd" "c \xc0\xaf" "d", true, "ab c d"); /* invalid UTF-8, U+FFFD, overlong */
}
END_TEST

START_TEST(basic_unicode_punct_cjk) {
    /* em dash, guillemets, ¿: category P*; € (Sc) is not punctuation */
    ck_basic("a\xe2\x80\x94" "b \xc2\xab" "x\xc2\xbb \xc2\xbfqu\xc3\xa9?", true,
             "a \xe2\x80\x94 b \xc2\xab x \xc2\xbb \xc2\xbf que ?");
    ck_basic("a\xe2\x82\xac" "b $5", true, "a\xe2\x82\xac" "b $ 5");
    ck_basic("ab\xe4\xb8\xad\xe6\x96\x87" "cd", true, "ab \xe4\xb8\xad \xe6\x96\x87 cd"); /* 中文 */
}
END_TEST

START_TEST(basic_buffer_and_errors) {
    char out[6];
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(nb_basic_tokenize("hello world", true, out, sizeof out), 11);
    ck_assert_str_eq(out, "hello");
    ck_assert_int_eq(nb_basic_tokenize("Hello World", true, NULL, 0), 11); /* size query */
    nb_clear_error();
    ck_assert_int_eq(nb_basic_tokenize(NULL, true, out, sizeof out), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_basic_tokenize("a", true, NULL, 4), -1);
}
END_TEST

/* ---- WordPiece on hand-written vocabularies ---------------------------------- */

/* Ids 0-4 specials, then 5.. */
static const char *k_vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nrunn\n##ing\n,\nwant\n"
                             "##ed\na\nab\n##b\n##c\n##bc\n";
enum { V_UN = 5, V_AFF, V_ABLE, V_RUNN, V_ING, V_COMMA, V_WANT, V_ED, V_A, V_AB, V_B, V_C, V_BC, V_N };

static nb_wordpiece *hand_vocab(nb_wordpiece_options o) {
    nb_wordpiece *wp = nb_wordpiece_load(write_text("vocab.txt", k_vocab), o);
    NB_CK_NOTNULL(wp);
    return wp;
}

static void ck_encode(const nb_wordpiece *wp, const char *text, const int32_t *expected, int64_t n) {
    int32_t ids[64];
    int64_t got = nb_wordpiece_encode(wp, text, ids, 64);
    ck_assert_msg(got == n, "\"%s\": %lld tokens, expected %lld", text, (long long)got, (long long)n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] == expected[i], "\"%s\" token %lld: %d, expected %d", text, (long long)i, ids[i],
                      expected[i]);
}
#define CK_ENCODE(wp, text, ...) \
    ck_encode(wp, text, (const int32_t[]){__VA_ARGS__}, sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

START_TEST(wordpiece_greedy) {
    nb_wordpiece *wp = hand_vocab((nb_wordpiece_options){0});
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), V_N);
    /* BERT's docstring example; "!" is not in the vocabulary -> [UNK]. */
    CK_ENCODE(wp, "unaffable, running wanted!", V_UN, V_AFF, V_ABLE, V_COMMA, V_RUNN, V_ING, V_WANT, V_ED, 1);
    CK_ENCODE(wp, "UNAFFABLE", V_UN, V_AFF, V_ABLE);      /* lower-cased first */
    CK_ENCODE(wp, "abc", V_AB, V_C);                      /* longest first piece, not a ##bc */
    CK_ENCODE(wp, "abbc", V_AB, V_BC);
    CK_ENCODE(wp, "unwanted", 1);                         /* un + no match for "wanted" -> whole word [UNK] */
    CK_ENCODE(wp, "a b", V_A, 1);                         /* "b" alone: only ##b exists -> [UNK] */
    int32_t none[1];
    ck_assert_int_eq(nb_wordpiece_encode(wp, "  \t", none, 1), 0);
    nb_wordpiece_free(wp);
    /* Cased: "UNAFFABLE" matches nothing. */
    wp = hand_vocab((nb_wordpiece_options){.cased = true});
    ck_assert(!nb_wordpiece_lowercases(wp));
    CK_ENCODE(wp, "UNAFFABLE unaffable", 1, V_UN, V_AFF, V_ABLE);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(wordpiece_max_chars_and_cap) {
    nb_wordpiece *wp = hand_vocab((nb_wordpiece_options){.max_input_chars_per_word = 6});
    CK_ENCODE(wp, "unaffable runn running", 1, V_RUNN, 1); /* 9 and 7 chars > 6 */
    nb_wordpiece_free(wp);
    wp = hand_vocab((nb_wordpiece_options){0});
    char word[128];
    memset(word, 'a', 101), word[101] = 0; /* 101 code points > 100: [UNK] without matching */
    CK_ENCODE(wp, word, 1);
    int32_t ids[3] = {-7, -7, -7};
    ck_assert_int_eq(nb_wordpiece_encode(wp, "unaffable, running", ids, 2), 6); /* total count */
    ck_assert_int_eq(ids[0], V_UN);
    ck_assert_int_eq(ids[1], V_AFF);
    ck_assert_int_eq(ids[2], -7); /* nothing past cap */
    ck_assert_int_eq(nb_wordpiece_encode(wp, "unaffable", NULL, 0), 3);
    NB_CK_FAILS(nb_wordpiece_encode(wp, "x", NULL, 1) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_wordpiece_encode(wp, NULL, ids, 1) >= 0, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_wordpiece_encode(NULL, "x", ids, 1) >= 0, NB_ERR_INVALID_ARG);
    /* the tensor form: int64 ids, as embeddings take them (owned by the scope) */
    nb_scope *sc = nb_scope_begin();
    nb_tensor *t = nb_wordpiece_encode_tensor(wp, "unaffable, running");
    ck_assert_int_eq(nb_dtype_of(t), NB_I64);
    ck_assert_int_eq(nb_numel(t), 6);
    int64_t d[6];
    ck_assert_int_eq(nb_to_host(t, d, sizeof d), NB_OK);
    ck_assert_int_eq(d[0], V_UN);
    ck_assert_int_eq(d[1], V_AFF);
    ck_assert_int_eq(d[5], V_ING);
    t = nb_wordpiece_encode_tensor(wp, "");
    ck_assert_int_eq(nb_numel(t), 0);
    NB_CK_FAILS(nb_wordpiece_encode_tensor(wp, NULL) != NULL, NB_ERR_INVALID_ARG);
    nb_scope_end(sc);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(wordpiece_lookup_and_decode) {
    nb_wordpiece *wp = hand_vocab((nb_wordpiece_options){0});
    const nb_special_token k[] = {NB_TOKEN_PAD, NB_TOKEN_UNK, NB_TOKEN_CLS, NB_TOKEN_SEP, NB_TOKEN_MASK};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(nb_wordpiece_special_id(wp, k[i]), i);
        ck_assert(nb_wordpiece_is_special(wp, i));
    }
    ck_assert(!nb_wordpiece_is_special(wp, V_UN));
    ck_assert(!nb_wordpiece_is_special(wp, V_N));
    ck_assert_int_eq(nb_wordpiece_token_to_id(wp, "##able"), V_ABLE);
    ck_assert_int_eq(nb_wordpiece_token_to_id(wp, "able"), -1);
    ck_assert_str_eq(nb_wordpiece_id_to_token(wp, V_BC), "##bc");
    NB_CK_FAILS(nb_wordpiece_id_to_token(wp, V_N), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_wordpiece_id_to_token(wp, -1), NB_ERR_INVALID_ARG);
    const int32_t ids[] = {2, V_UN, V_AFF, V_ABLE, V_COMMA, V_RUNN, V_ING, 3, 0};
    char out[64];
    ck_assert_int_eq(nb_wordpiece_decode(wp, ids, 9, false, out, sizeof out),
                     (int64_t)strlen("[CLS] unaffable , running [SEP] [PAD]"));
    ck_assert_str_eq(out, "[CLS] unaffable , running [SEP] [PAD]");
    ck_assert_int_eq(nb_wordpiece_decode(wp, ids, 9, true, out, sizeof out), 19);
    ck_assert_str_eq(out, "unaffable , running");
    ck_assert_int_eq(nb_wordpiece_decode(wp, ids + 2, 2, true, out, sizeof out), 9); /* leading ## kept */
    ck_assert_str_eq(out, "##affable");
    ck_assert_int_eq(nb_wordpiece_decode(wp, ids, 9, true, out, 6), 19);
    ck_assert_str_eq(out, "unaff");
    const int32_t bad[] = {V_UN, V_N};
    NB_CK_FAILS(nb_wordpiece_decode(wp, bad, 2, false, out, sizeof out) >= 0, NB_ERR_INVALID_ARG);
    nb_wordpiece_free(wp);
}
END_TEST

/* A vocab.txt laid out like Google's: [PAD], [unused0..98], [UNK]=100,
 * [CLS]=101, [SEP]=102, [MASK]=103, then words; CRLF line ends, no final one. */
START_TEST(wordpiece_bert_layout) {
    char text[4096] = "[PAD]\r\n";
    for (int i = 0; i < 99; i++) sprintf(text + strlen(text), "[unused%d]\r\n", i);
    strcat(text, "[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nthe\r\ncat\r\n##s\r\n.");
    nb_wordpiece *wp = nb_wordpiece_load(write_text("bert.txt", text), (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 108);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_PAD), 0);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_UNK), 100);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_CLS), 101);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_SEP), 102);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_MASK), 103);
    ck_assert(nb_wordpiece_is_special(wp, 57)); /* [unused56] */
    ck_assert_str_eq(nb_wordpiece_id_to_token(wp, 107), ".");
    CK_ENCODE(wp, "The cats. Dogs", 104, 105, 106, 107, 100);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(wordpiece_save_load_roundtrip) {
    nb_wordpiece *wp = hand_vocab((nb_wordpiece_options){0});
    char path[256];
    snprintf(path, sizeof path, "%s/saved.txt", g_dir);
    NB_CK_OK(nb_wordpiece_save(wp, path));
    FILE *f = fopen(path, "rb");
    char buf[512] = {0};
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), strlen(k_vocab));
    fclose(f);
    ck_assert_str_eq(buf, k_vocab); /* byte-identical vocab.txt */
    nb_wordpiece *back = nb_wordpiece_load(path, (nb_wordpiece_options){0});
    NB_CK_NOTNULL(back);
    ck_assert_int_eq(nb_wordpiece_vocab_size(back), V_N);
    for (int32_t id = 0; id < V_N; id++)
        ck_assert_str_eq(nb_wordpiece_id_to_token(back, id), nb_wordpiece_id_to_token(wp, id));
    CK_ENCODE(back, "unaffable, running wanted!", V_UN, V_AFF, V_ABLE, V_COMMA, V_RUNN, V_ING, V_WANT, V_ED, 1);
    nb_wordpiece_free(back);
    nb_wordpiece_free(wp);
}
END_TEST

static void ck_load_fails(const char *name, const char *text, nb_status st, const char *needle) {
    const char *path = text ? write_text(name, text) : name;
    nb_clear_error();
    ck_assert_ptr_null(nb_wordpiece_load(path, (nb_wordpiece_options){0}));
    ck_assert_int_eq(nb_last_status(), st);
    ck_assert_msg(strstr(nb_last_error(), needle), "\"%s\" lacks \"%s\"", nb_last_error(), needle);
}

START_TEST(wordpiece_load_errors) {
    ck_load_fails("/nonexistent/vocab.txt", NULL, NB_ERR_IO, "cannot open");
    ck_load_fails("empty.txt", "", NB_ERR_FORMAT, "empty");
    ck_load_fails("nounk.txt", "[PAD]\nthe\n", NB_ERR_FORMAT, "no [UNK]");
    ck_load_fails("dup.txt", "[UNK]\nthe\ncat\nthe\n", NB_ERR_FORMAT, "line 4 repeats line 2");
    ck_load_fails("blank.txt", "[UNK]\n\nthe\n", NB_ERR_FORMAT, "line 2 is empty");
    ck_load_fails(g_dir, NULL, NB_ERR_IO, "directory");
    NB_CK_FAILS(nb_wordpiece_load(NULL, (nb_wordpiece_options){0}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_wordpiece_load(write_text("v.txt", "[UNK]\n"),
                                  (nb_wordpiece_options){.max_input_chars_per_word = -1}),
                NB_ERR_INVALID_ARG);
    nb_wordpiece *wp = hand_vocab((nb_wordpiece_options){0});
    NB_CK_FAILS(nb_wordpiece_save(wp, "/nonexistent/dir/v.txt") == NB_OK, NB_ERR_IO);
    NB_CK_FAILS(nb_wordpiece_save(NULL, "x") == NB_OK, NB_ERR_INVALID_ARG);
    nb_wordpiece_free(wp);
    nb_wordpiece_free(NULL);
}
END_TEST

/* ---- training ---------------------------------------------------------------- */

static const char *vocab_token(const nb_wordpiece *wp, int32_t id) { return nb_wordpiece_id_to_token(wp, id); }

START_TEST(train_hand_computed) {
    /* Words ab x3, ac x1. Alphabet in byte order: a b c, then ##a ##b ##c
     * (ids 5..10). Pairs: (a, ##b) 3, (a, ##c) 1. */
    const char *corpus = write_text("c1.txt", "ab ab\nab ac\n");
    nb_wordpiece *wp = nb_wordpiece_train(corpus, 100, (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    const char *expect[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##a", "##b", "##c", "ab"};
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 12); /* (a, ##c) occurs once < min_frequency 2 */
    for (int i = 0; i < 12; i++) ck_assert_str_eq(vocab_token(wp, i), expect[i]);
    nb_wordpiece_free(wp);
    wp = nb_wordpiece_train(corpus, 100, (nb_wordpiece_options){.min_frequency = 1});
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 13);
    ck_assert_str_eq(vocab_token(wp, 12), "ac");
    nb_wordpiece_free(wp);
    wp = nb_wordpiece_train(corpus, 11, (nb_wordpiece_options){0}); /* exactly specials + alphabet */
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 11);
    nb_wordpiece_free(wp);
    NB_CK_FAILS(nb_wordpiece_train(corpus, 10, (nb_wordpiece_options){0}), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "at least 11"));
}
END_TEST

START_TEST(train_tie_break_and_continuations) {
    /* xy and zw once each: equal counts, the pair of older symbols wins:
     * x (6) < z (8), so "xy" then "zw". */
    const char *corpus = write_text("c2.txt", "xy zw");
    nb_wordpiece *wp = nb_wordpiece_train(corpus, 100, (nb_wordpiece_options){.min_frequency = 1});
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 15);
    ck_assert_str_eq(vocab_token(wp, 5), "w");
    ck_assert_str_eq(vocab_token(wp, 13), "xy");
    ck_assert_str_eq(vocab_token(wp, 14), "zw");
    nb_wordpiece_free(wp);
    /* a b ##a ##b = 5..8. "abab" x2: pairs (a,##b), (##b,##a), (##a,##b),
     * 2 each; a (5) is the oldest: "ab" (9) first. The word is then
     * ab ##a ##b: (ab,##a) 2 vs (##a,##b) 2: ab (9) is newer than ##a (7),
     * so "##ab" (10); then "abab" (11). */
    corpus = write_text("c3.txt", "abab abab");
    wp = nb_wordpiece_train(corpus, 100, (nb_wordpiece_options){0});
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 12);
    ck_assert_str_eq(vocab_token(wp, 9), "ab");
    ck_assert_str_eq(vocab_token(wp, 10), "##ab");
    ck_assert_str_eq(vocab_token(wp, 11), "abab");
    CK_ENCODE(wp, "abab ab babab", 11, 9, 6, 10, 10); /* babab: b ##ab ##ab */
    nb_wordpiece_free(wp);
}
END_TEST

/* A generated corpus: Zipf-like word frequencies over a few sentences. */
static const char *gen_corpus(void) {
    static char text[1 << 16];
    const char *words[] = {"the", "cat", "sat", "on", "mat", "a", "dog", "ate", "bone", "quickly"};
    text[0] = 0;
    for (int i = 0; i < 400; i++) {
        char line[128];
        snprintf(line, sizeof line, "The %s %s, the %s!\n", words[1 + i % 9], words[1 + (i * 7) % 9],
                 words[1 + (i / 3) % 9]);
        strcat(text, line);
    }
    strcat(text, "Zebra \xc3\xa9l\xc3\xa8ve [MASK]\n");
    return write_text("gen.txt", text);
}

START_TEST(train_generated_corpus) {
    const char *corpus = gen_corpus();
    nb_wordpiece *wp = nb_wordpiece_train(corpus, 60, (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 60); /* the size asked for */
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_PAD), 0);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_UNK), 1);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_CLS), 2);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_SEP), 3);
    ck_assert_int_eq(nb_wordpiece_special_id(wp, NB_TOKEN_MASK), 4);
    /* 21 letters and ! , [ ] ("[MASK]" in text is punctuation + "mask"):
     * 25 initial + 21 "##" symbols; the first merges are th, the. */
    ck_assert_str_eq(vocab_token(wp, 5), "!");
    ck_assert_str_eq(vocab_token(wp, 30), "##a");
    ck_assert_str_eq(vocab_token(wp, 51), "th");
    ck_assert_str_eq(vocab_token(wp, 52), "the");
    ck_assert_int_ge(nb_wordpiece_token_to_id(wp, "##e"), 0); /* élève lower-cased, accents stripped */
    ck_assert_int_eq(nb_wordpiece_token_to_id(wp, "##!"), -1); /* punctuation has no ## form */
    ck_assert_int_eq(nb_wordpiece_token_to_id(wp, "Z"), -1);
    /* Deterministic: a second training gives the same vocabulary. */
    nb_wordpiece *again = nb_wordpiece_train(corpus, 60, (nb_wordpiece_options){0});
    for (int32_t id = 0; id < 60; id++) ck_assert_str_eq(vocab_token(again, id), vocab_token(wp, id));
    nb_wordpiece_free(again);
    nb_wordpiece_free(wp);
    /* Unbounded: it stops when no pair occurs twice; then every frequent
     * word is one token, and a word seen once still avoids [UNK]. */
    wp = nb_wordpiece_train(corpus, 100000, (nb_wordpiece_options){0});
    ck_assert_int_eq(nb_wordpiece_vocab_size(wp), 71);
    const char *whole[] = {"the", "cat", "dog", "bone", "quickly", "a"};
    for (int i = 0; i < 6; i++) {
        int32_t id[4];
        ck_assert_int_eq(nb_wordpiece_encode(wp, whole[i], id, 4), 1);
        ck_assert_str_eq(vocab_token(wp, id[0]), whole[i]);
    }
    CK_ENCODE(wp, "Zebra", nb_wordpiece_token_to_id(wp, "z"), nb_wordpiece_token_to_id(wp, "##e"),
              nb_wordpiece_token_to_id(wp, "##b"), nb_wordpiece_token_to_id(wp, "##r"),
              nb_wordpiece_token_to_id(wp, "##a"));
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(train_errors) {
    NB_CK_FAILS(nb_wordpiece_train("/nonexistent/corpus.txt", 100, (nb_wordpiece_options){0}), NB_ERR_IO);
    NB_CK_FAILS(nb_wordpiece_train(write_text("e.txt", " \n\t\n"), 100, (nb_wordpiece_options){0}),
                NB_ERR_FORMAT);
    NB_CK_FAILS(nb_wordpiece_train(NULL, 100, (nb_wordpiece_options){0}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_wordpiece_train(write_text("x.txt", "x"), 100, (nb_wordpiece_options){.min_frequency = -1}),
                NB_ERR_INVALID_ARG);
}
END_TEST

/* ---- MLM ---------------------------------------------------------------------- */

/* Tokens w0..w49 (ids 5..54) for exact layouts: line i of `lines` words. */
static nb_wordpiece *word_vocab(void) {
    char text[2048] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 0; i < 50; i++) sprintf(text + strlen(text), "w%d\n", i);
    nb_wordpiece *wp = nb_wordpiece_load(write_text("words.txt", text), (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    return wp;
}

/* A corpus of n lines; line i has len(i) words w((i + k) % 50). */
static const char *word_corpus(const char *name, int n, int (*len)(int)) {
    size_t cap = (size_t)n * 400 + 1;
    char *text = malloc(cap);
    text[0] = 0;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < len(i); k++) at += (size_t)sprintf(text + at, "%sw%d", k ? " " : "", (i + k) % 50);
        text[at++] = '\n', text[at] = 0;
    }
    const char *path = write_text(name, text);
    free(text);
    return path;
}
static int len_layout(int i) { return (int[]){3, 4, 2, 9, 1}[i]; }
static int len_twenty(int i) { return (void)i, 20; }
static int len_varied(int i) { return 1 + (i * 7) % 23; }

/* The unmasked row: labels where chosen, else the input. */
static void original_row(const nb_mlm_dataset *ds, int64_t idx, int64_t *orig, uint8_t *attn) {
    int64_t ids[64], labels[64];
    NB_CK_OK(nb_mlm_get_sequence(ds, 0, idx, ids, labels, attn));
    for (int p = 0; p < nb_mlm_seq_len(ds); p++) orig[p] = labels[p] != NB_MLM_IGNORE_INDEX ? labels[p] : ids[p];
}

START_TEST(mlm_layout) {
    nb_wordpiece *wp = word_vocab();
    const char *corpus = word_corpus("layout.txt", 5, len_layout);
    /* Packed, T = 8: [CLS] w0 w1 w2 [SEP] (4 words don't fit) | [CLS] w1..w4 [SEP] w2 w3 ... */
    nb_mlm_dataset *ds = nb_mlm_dataset_new(corpus, wp, 8, (nb_mlm_options){.seed = 3});
    NB_CK_NOTNULL(ds);
    const int64_t W = 5; /* id of w0 */
    const int64_t rows[4][8] = {
        {2, W + 0, W + 1, W + 2, 3, 0, 0, 0},
        {2, W + 1, W + 2, W + 3, W + 4, 3, 0, 0},
        {2, W + 2, W + 3, 3, 0, 0, 0, 0},           /* line 2; line 3 (9 words) needs a new row */
        {2, W + 3, W + 4, W + 5, W + 6, W + 7, W + 8, 3}, /* truncated to T - 2 = 6 */
    };
    ck_assert_int_eq(nb_mlm_num_sequences(ds), 5); /* row 4: [CLS] w4 [SEP] */
    for (int r = 0; r < 4; r++) {
        int64_t orig[8];
        uint8_t attn[8];
        original_row(ds, r, orig, attn);
        for (int p = 0; p < 8; p++) {
            ck_assert_int_eq(orig[p], rows[r][p]);
            ck_assert_int_eq(attn[p], rows[r][p] != 0);
        }
    }
    nb_mlm_stats st = nb_mlm_get_stats(ds);
    ck_assert_int_eq(st.lines, 5);
    ck_assert_int_eq(st.tokens, 19);
    ck_assert_int_eq(st.truncated, 1);
    ck_assert_int_eq(st.maskable, 3 + 4 + 2 + 6 + 1);
    ck_assert_int_eq(st.real_positions, 5 + 6 + 4 + 8 + 3);
    nb_mlm_dataset_free(ds);
    /* One line per sequence, T = 6: line 0 then line 1 in its own row. */
    ds = nb_mlm_dataset_new(corpus, wp, 6, (nb_mlm_options){.one_line_per_sequence = true});
    ck_assert_int_eq(nb_mlm_num_sequences(ds), 5);
    int64_t orig[6];
    uint8_t attn[6];
    original_row(ds, 1, orig, attn);
    const int64_t row1[6] = {2, W + 1, W + 2, W + 3, W + 4, 3};
    for (int p = 0; p < 6; p++) ck_assert_int_eq(orig[p], row1[p]);
    nb_mlm_dataset_free(ds);
    ds = nb_mlm_dataset_new(corpus, wp, 6, (nb_mlm_options){.one_line_per_sequence = true, .max_sequences = 2});
    ck_assert_int_eq(nb_mlm_num_sequences(ds), 2);
    nb_mlm_dataset_free(ds);
    nb_wordpiece_free(wp);
}
END_TEST

/* Masks every row of ds for `epochs` epochs and checks the invariants;
 * counts chosen / masked / random / kept. */
typedef struct mask_counts {
    int64_t maskable, chosen, mask, random, kept;
} mask_counts;

static mask_counts ck_masking(const nb_mlm_dataset *ds, int epochs) {
    mask_counts c = {0};
    const int64_t T = nb_mlm_seq_len(ds);
    for (int e = 0; e < epochs; e++)
        for (int64_t r = 0; r < nb_mlm_num_sequences(ds); r++) {
            int64_t ids[64], labels[64], orig[64];
            uint8_t attn[64];
            original_row(ds, r, orig, attn);
            NB_CK_OK(nb_mlm_get_sequence(ds, e, r, ids, labels, attn));
            int64_t n = 0, k = 0;
            for (int64_t p = 0; p < T; p++) {
                bool maskable = orig[p] >= 5;
                n += maskable;
                if (labels[p] == NB_MLM_IGNORE_INDEX) {
                    ck_assert_int_eq(ids[p], orig[p]); /* untouched */
                    continue;
                }
                ck_assert_msg(maskable, "position %lld of row %lld (token %lld) chosen", (long long)p,
                              (long long)r, (long long)orig[p]);
                ck_assert_int_eq(labels[p], orig[p]);
                k++;
                if (ids[p] == 4) c.mask++;
                else if (ids[p] == orig[p]) c.kept++;
                else {
                    ck_assert_int_ge(ids[p], 5); /* random tokens are never reserved */
                    c.random++;
                }
            }
            int64_t want = (int64_t)(0.15 * (double)n + 0.5);
            ck_assert_int_eq(k, n == 0 ? 0 : want < 1 ? 1 : want);
            c.maskable += n, c.chosen += k;
        }
    return c;
}

START_TEST(mlm_rates) {
    nb_wordpiece *wp = word_vocab();
    /* 20 maskable tokens per row: exactly 3 chosen each (15%). */
    nb_mlm_dataset *ds = nb_mlm_dataset_new(word_corpus("twenty.txt", 200, len_twenty), wp, 24,
                                            (nb_mlm_options){.seed = 11, .one_line_per_sequence = true});
    mask_counts c = ck_masking(ds, 2);
    ck_assert_int_eq(c.chosen * 20, c.maskable * 3);
    nb_mlm_dataset_free(ds);
    /* Varied lengths, packed: rate ~15%, at least one per row; 80/10/10. */
    ds = nb_mlm_dataset_new(word_corpus("varied.txt", 3000, len_varied), wp, 64, (nb_mlm_options){.seed = 5});
    c = ck_masking(ds, 3);
    double rate = (double)c.chosen / (double)c.maskable;
    ck_assert_msg(fabs(rate - 0.15) < 0.005, "masking rate %g", rate);
    ck_assert_int_gt(c.chosen, 10000);
    double fm = (double)c.mask / (double)c.chosen, fr = (double)c.random / (double)c.chosen,
           fk = (double)c.kept / (double)c.chosen;
    /* A random draw equals the original with probability 1/50. */
    ck_assert_msg(fabs(fm - 0.8) < 0.015, "[MASK] fraction %g", fm);
    ck_assert_msg(fabs(fr - 0.1 * 49 / 50) < 0.012, "random fraction %g", fr);
    ck_assert_msg(fabs(fk - (0.1 + 0.1 / 50)) < 0.012, "kept fraction %g", fk);
    nb_mlm_dataset_free(ds);
    /* Rows with a single maskable token still get one. */
    ds = nb_mlm_dataset_new(word_corpus("one.txt", 20, len_twenty), wp, 3, (nb_mlm_options){.seed = 1});
    ck_assert_int_eq(nb_mlm_num_sequences(ds), 20);
    c = ck_masking(ds, 1);
    ck_assert_int_eq(c.chosen, 20);
    nb_mlm_dataset_free(ds);
    nb_wordpiece_free(wp);
}
END_TEST

/* Row r of epoch e as one comparable array (ids then labels). */
static void row_of(const nb_mlm_dataset *ds, int64_t e, int64_t r, int64_t *out) {
    NB_CK_OK(nb_mlm_get_sequence(ds, e, r, out, out + nb_mlm_seq_len(ds), NULL));
}

START_TEST(mlm_determinism) {
    nb_wordpiece *wp = word_vocab();
    const char *corpus = word_corpus("det.txt", 300, len_varied);
    nb_mlm_dataset *a = nb_mlm_dataset_new(corpus, wp, 32, (nb_mlm_options){.seed = 7});
    nb_mlm_dataset *b = nb_mlm_dataset_new(corpus, wp, 32, (nb_mlm_options){.seed = 7});
    nb_mlm_dataset *c = nb_mlm_dataset_new(corpus, wp, 32, (nb_mlm_options){.seed = 8});
    int64_t n = nb_mlm_num_sequences(a), diff_epoch = 0, diff_seed = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t x[64], y[64], z[64], w[64];
        row_of(a, 2, r, x), row_of(b, 2, r, y), row_of(a, 3, r, z), row_of(c, 2, r, w);
        ck_assert_mem_eq(x, y, sizeof x);
        diff_epoch += memcmp(x, z, sizeof x) != 0;
        diff_seed += memcmp(x, w, sizeof x) != 0;
    }
    ck_assert_int_gt(diff_epoch, n * 9 / 10);
    ck_assert_int_gt(diff_seed, n * 9 / 10);
    /* Batches: row b of a batch is nb_mlm_get_sequence of indices[b]. */
    nb_scope *s = nb_scope_begin();
    const int64_t idx[3] = {n - 1, 0, 5};
    nb_mlm_batch batch;
    NB_CK_OK(nb_mlm_get_batch(a, 4, idx, 3, &batch));
    ck_assert_int_eq(batch.size, 3);
    const int64_t shape[2] = {3, 32};
    nb_ck_shape(batch.input_ids, 2, shape);
    nb_ck_shape(batch.labels, 2, shape);
    nb_ck_shape(batch.attention_mask, 2, shape);
    nb_ck_shape(batch.token_type_ids, 2, shape);
    ck_assert_int_eq(nb_dtype_of(batch.input_ids), NB_I64);
    ck_assert_int_eq(nb_dtype_of(batch.labels), NB_I64);
    ck_assert_int_eq(nb_dtype_of(batch.attention_mask), NB_BOOL);
    ck_assert_int_eq(nb_dtype_of(batch.token_type_ids), NB_I64);
    int64_t ids[96], labels[96], tt[96], masked = 0;
    uint8_t attn[96];
    NB_CK_OK(nb_to_host(batch.input_ids, ids, sizeof ids));
    NB_CK_OK(nb_to_host(batch.labels, labels, sizeof labels));
    NB_CK_OK(nb_to_host(batch.attention_mask, attn, sizeof attn));
    NB_CK_OK(nb_to_host(batch.token_type_ids, tt, sizeof tt));
    for (int k = 0; k < 3; k++) {
        int64_t ri[32], rl[32];
        uint8_t ra[32];
        NB_CK_OK(nb_mlm_get_sequence(a, 4, idx[k], ri, rl, ra));
        ck_assert_mem_eq(ids + 32 * k, ri, sizeof ri);
        ck_assert_mem_eq(labels + 32 * k, rl, sizeof rl);
        ck_assert_mem_eq(attn + 32 * k, ra, sizeof ra);
        for (int p = 0; p < 32; p++) {
            masked += rl[p] != NB_MLM_IGNORE_INDEX;
            ck_assert_int_eq(tt[32 * k + p], 0);
        }
    }
    ck_assert_int_eq(batch.num_masked, masked);
    nb_scope_end(s);
    /* Permutations: a permutation, a function of (seed, epoch). */
    int64_t *p1 = malloc((size_t)n * sizeof *p1), *p2 = malloc((size_t)n * sizeof *p2);
    char *seen = calloc((size_t)n, 1);
    NB_CK_OK(nb_mlm_permutation(a, 1, p1));
    NB_CK_OK(nb_mlm_permutation(b, 1, p2));
    ck_assert_mem_eq(p1, p2, (size_t)n * sizeof *p1);
    for (int64_t i = 0; i < n; i++) ck_assert(!seen[p1[i]]++);
    NB_CK_OK(nb_mlm_permutation(a, 2, p2));
    ck_assert(memcmp(p1, p2, (size_t)n * sizeof *p1) != 0);
    free(p1), free(p2), free(seen);
    nb_mlm_dataset_free(a), nb_mlm_dataset_free(b), nb_mlm_dataset_free(c);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(mlm_token_counts) {
    nb_wordpiece *wp = word_vocab();
    /* "w3 w3 w1" x2, "w2": w3 is the most frequent label candidate. */
    const char *corpus = write_text("freq.txt", "w3 w3 w1\nw3 w3 w1\n\nw2 [MASK]\n");
    nb_mlm_dataset *ds = nb_mlm_dataset_new(corpus, wp, 16, (nb_mlm_options){0});
    NB_CK_NOTNULL(ds);
    int64_t counts[55];
    NB_CK_OK(nb_mlm_token_counts(ds, counts, 55));
    ck_assert_int_eq(counts[5 + 3], 4);
    ck_assert_int_eq(counts[5 + 1], 2);
    ck_assert_int_eq(counts[5 + 2], 1);
    ck_assert_int_eq(counts[1], 0); /* "[MASK]" in text: [ mask ] -> [UNK]s, never counted */
    ck_assert_int_eq(counts[2] + counts[3] + counts[0], 0);
    ck_assert_int_eq(nb_mlm_get_stats(ds).maskable, 7);
    ck_assert_int_eq(nb_mlm_get_stats(ds).unk_tokens, 3);
    ck_assert_int_eq(nb_mlm_most_frequent_token(ds), 8);
    ck_assert_int_eq(nb_mlm_vocab_size(ds), 55);
    NB_CK_FAILS(nb_mlm_token_counts(ds, counts, 54) == NB_OK, NB_ERR_INVALID_ARG);
    nb_mlm_dataset_free(ds);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(mlm_errors) {
    nb_wordpiece *wp = word_vocab();
    const char *corpus = word_corpus("err.txt", 10, len_varied);
    nb_mlm_options o = {0};
    NB_CK_FAILS(nb_mlm_dataset_new("/nonexistent/c.txt", wp, 16, o), NB_ERR_IO);
    NB_CK_FAILS(nb_mlm_dataset_new(write_text("blank.txt", "\n\n  \n"), wp, 16, o), NB_ERR_FORMAT);
    NB_CK_FAILS(nb_mlm_dataset_new(corpus, wp, 2, o), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mlm_dataset_new(corpus, NULL, 16, o), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mlm_dataset_new(corpus, wp, 16, (nb_mlm_options){.mask_prob = 1.5}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mlm_dataset_new(corpus, wp, 16, (nb_mlm_options){.max_sequences = -1}), NB_ERR_INVALID_ARG);
    nb_wordpiece *nomask = nb_wordpiece_load(write_text("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nw1\n"),
                                             (nb_wordpiece_options){0});
    NB_CK_FAILS(nb_mlm_dataset_new(corpus, nomask, 16, o), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[MASK]"));
    nb_wordpiece_free(nomask);
    nb_mlm_dataset *ds = nb_mlm_dataset_new(corpus, wp, 16, o);
    NB_CK_NOTNULL(ds);
    int64_t ids[16];
    int64_t n = nb_mlm_num_sequences(ds);
    NB_CK_FAILS(nb_mlm_get_sequence(ds, 0, n, ids, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mlm_get_sequence(ds, -1, 0, ids, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_mlm_batch b;
    const int64_t bad[2] = {0, -1};
    NB_CK_FAILS(nb_mlm_get_batch(ds, 0, bad, 2, &b) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(b.input_ids);
    NB_CK_FAILS(nb_mlm_get_batch(ds, 0, bad, 0, &b) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_mlm_permutation(ds, -1, ids) == NB_OK, NB_ERR_INVALID_ARG);
    nb_mlm_dataset_free(ds);
    nb_mlm_dataset_free(NULL);
    nb_wordpiece_free(wp);
}
END_TEST

START_TEST(wordnet_dir) {
    char buf[256];
    setenv("NB_WORDNET_DIR", "/data/wn", 1);
    NB_CK_OK(nb_wordnet_default_dir(buf, sizeof buf));
    ck_assert_str_eq(buf, "/data/wn");
    unsetenv("NB_WORDNET_DIR");
    setenv("XDG_CACHE_HOME", "/c", 1);
    NB_CK_OK(nb_wordnet_default_dir(buf, sizeof buf));
    ck_assert_str_eq(buf, "/c/nabla/wordnet");
    NB_CK_FAILS(nb_wordnet_default_dir(buf, 4) == NB_OK, NB_ERR_INVALID_ARG);
}
END_TEST

/* Writes n bytes (NULs included) to g_dir/name. */
static const char *write_bytes(const char *name, const char *b, size_t n) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Regressions (issue 13): a vocab token ending in '\r' (from a "\r\r\n"
 * line) used to load and then not read back after nb_wordpiece_save: it is
 * an error now; training on a corpus with a NUL byte keeps the text after
 * it (NUL is removed, as the header says). */
START_TEST(wordpiece_cr_and_nul) {
    ck_load_fails("cr.txt", "[UNK]\nthe\r\r\ncat\n", NB_ERR_FORMAT, "line 2 holds a carriage-return");
    ck_load_fails("cr2.txt", "[UNK]\nt\rhe\n", NB_ERR_FORMAT, "line 2");
    const char v[] = "[UNK]\nth\0e\n";
    nb_clear_error();
    ck_assert_ptr_null(nb_wordpiece_load(write_bytes("nul.txt", v, sizeof v - 1), (nb_wordpiece_options){0}));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "NUL"));
    /* CRLF files still load, and save back as LF */
    nb_wordpiece *wp = nb_wordpiece_load(write_text("crlf.txt", "[UNK]\r\nthe\r\n"), (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    ck_assert_str_eq(nb_wordpiece_id_to_token(wp, 1), "the");
    nb_wordpiece_free(wp);
    /* a corpus with NULs: everything after the first one used to be dropped */
    const char corpus[] = "alpha be\0ta gamma\0delta\nalpha";
    wp = nb_wordpiece_train(write_bytes("corpus.txt", corpus, sizeof corpus - 1), 200, (nb_wordpiece_options){0});
    NB_CK_NOTNULL(wp);
    ck_assert_int_ge(nb_wordpiece_token_to_id(wp, "##t"), 0); /* from "beta", after the first NUL */
    int32_t ids[16];
    int64_t n = nb_wordpiece_encode(wp, "gammadelta beta", ids, 16);
    ck_assert_int_gt(n, 0);
    for (int64_t i = 0; i < n; i++) ck_assert_int_ne(ids[i], nb_wordpiece_special_id(wp, NB_TOKEN_UNK));
    nb_wordpiece_free(wp);
}
END_TEST

Suite *nb_suite_text(void) {
    Suite *s = suite_create("text");
    TCase *basic = tcase_create("basic");
    tcase_add_test(basic, basic_punctuation);
    tcase_add_test(basic, wordpiece_cr_and_nul);
    tcase_add_test(basic, basic_case);
    tcase_add_test(basic, basic_accents);
    tcase_add_test(basic, basic_whitespace);
    tcase_add_test(basic, basic_control);
    tcase_add_test(basic, basic_unicode_punct_cjk);
    tcase_add_test(basic, basic_buffer_and_errors);
    suite_add_tcase(s, basic);
    TCase *wp = tcase_create("wordpiece");
    tcase_add_checked_fixture(wp, tmp_setup, tmp_teardown);
    tcase_add_test(wp, wordpiece_greedy);
    tcase_add_test(wp, wordpiece_max_chars_and_cap);
    tcase_add_test(wp, wordpiece_lookup_and_decode);
    tcase_add_test(wp, wordpiece_bert_layout);
    tcase_add_test(wp, wordpiece_save_load_roundtrip);
    tcase_add_test(wp, wordpiece_load_errors);
    tcase_add_test(wp, train_hand_computed);
    tcase_add_test(wp, train_tie_break_and_continuations);
    tcase_add_test(wp, train_generated_corpus);
    tcase_add_test(wp, train_errors);
    suite_add_tcase(s, wp);
    TCase *mlm = tcase_create("mlm");
    tcase_add_checked_fixture(mlm, tmp_setup, tmp_teardown);
    tcase_set_timeout(mlm, 300);
    tcase_add_test(mlm, mlm_layout);
    tcase_add_test(mlm, mlm_rates);
    tcase_add_test(mlm, mlm_determinism);
    tcase_add_test(mlm, mlm_token_counts);
    tcase_add_test(mlm, mlm_errors);
    tcase_add_test(mlm, wordnet_dir);
    suite_add_tcase(s, mlm);
    return s;
}
