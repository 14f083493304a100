/* test_examples.c - the example programs as a user runs them (issue 13's
 * findings): every bad flag value is refused before any work, with a
 * message naming the flag (no int wrap-around: --epochs 4294967297 used to
 * run one epoch); --threads above the pool's limit is an error, not a
 * silent cap; an unwritable --save is refused at once; a diverging run
 * (--lr 1e308) stops with an error naming the step instead of exiting 0;
 * --resume with another --lr or --lr-schedule than the checkpoint's is
 * refused; bert_mlm --compile 1 (padded masked positions) prints the
 * eager run's lines. The programs run on a tiny generated MNIST directory
 * (64 + 16 images) and a generated text corpus in a temporary directory. */
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

static char g_dir[64];
static char g_bin[1200]; /* build/examples */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Writes an MNIST-shaped IDX pair of n images for split prefix into g_dir. */
static void write_split(const char *prefix, int n) {
    char p[256];
    size_t bytes = 16 + (size_t)n * 784;
    uint8_t *b = malloc(bytes);
    ck_assert_ptr_nonnull(b);
    uint8_t h[16] = {0, 0, 8, 3, 0, 0, (uint8_t)(n >> 8), (uint8_t)n, 0, 0, 0, 28, 0, 0, 0, 28};
    memcpy(b, h, 16);
    for (size_t i = 16; i < bytes; i++) b[i] = (uint8_t)((i * 37) % 251);
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", g_dir, prefix);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, bytes, f), bytes);
    fclose(f);
    uint8_t l[8 + 256] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
    for (int i = 0; i < n; i++) l[8 + i] = (uint8_t)(i % 10);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", g_dir, prefix);
    f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(l, 1, 8 + (size_t)n, f), 8 + (size_t)n);
    fclose(f);
    free(b);
}

static void setup(void) {
    strcpy(g_dir, "/tmp/nb_test_examples_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    char exe[1024] = {0};
    ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
    snprintf(g_bin, sizeof g_bin, "%s/../examples", dirname(exe));
    write_split("train", 64);
    write_split("t10k", 16);
}

static void teardown(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Runs "program args" (stderr into stdout); returns its exit status and
 * leaves its output in out. */
static int run(const char *program, const char *args, char *out, size_t len) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/%s --data %s --threads 1 %s 2>&1", g_bin, program, g_dir, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* program args must exit with status `want` and print `needle`. */
static void expect(const char *program, const char *args, int want, const char *needle) {
    char out[8192];
    int st = run(program, args, out, sizeof out);
    ck_assert_msg(st == want, "%s %s: exit %d, want %d; output:\n%s", program, args, st, want, out);
    ck_assert_msg(strstr(out, needle), "%s %s: output lacks \"%s\":\n%s", program, args, needle, out);
}

START_TEST(test_bad_flags_named) {
    const char *progs[] = {"mnist_mlp", "mnist_cnn"};
    for (int i = 0; i < 2; i++) {
        expect(progs[i], "--epochs 4294967297", 2, "--epochs 4294967297: must be an integer in [1,");
        expect(progs[i], "--threads 4294967298", 2, "--threads 4294967298: must be an integer");
        expect(progs[i], "--threads 1000", 2, "--threads 1000: nabla runs at most");
        expect(progs[i], "--batch-size 12x", 2, "--batch-size 12x: must be an integer");
        expect(progs[i], "--lr -1", 2, "--lr -1: must be a number in (0,");
        expect(progs[i], "--lr nan", 2, "--lr nan: must be a number");
        expect(progs[i], "--seed -3", 2, "--seed -3: must be an integer in [0, 2^64)");
        expect(progs[i], "--lr-schedule linear", 2, "--lr-schedule linear: must be cosine, wsd or constant");
        expect(progs[i], "--bogus 1", 2, "unknown flag --bogus");
        expect(progs[i], "--save /nonexistent/dir/ck.st", 2, "--save /nonexistent/dir/ck.st: cannot write");
        expect(progs[i], "--save-every 3", 2, "--save-every needs --save");
    }
    expect("bert_mlm", "--layers 4294967297", 2, "--layers 4294967297: must be an integer in [1,");
    expect("bert_mlm", "--dropout 1", 2, "--dropout 1: must be a number");
    expect("bert_mlm", "--warmup 10 --steps 10", 2, "--warmup 10: must be below --steps 10");
    expect("char_lstm", "--hidden 0", 2, "--hidden 0: must be an integer in [1,");
    expect("char_lstm", "--lr 0", 2, "--lr 0: must be a number in (0,");
    expect("char_lstm", "--bogus 1", 2, "unknown flag --bogus");
    expect("char_lstm", "--data /nonexistent --steps 1", 1, "cannot read /nonexistent/train.txt");
}
END_TEST

START_TEST(test_divergence_and_resume_flags) {
    expect("mnist_mlp", "--epochs 1 --batch-size 16 --lr 1e308", 1, "the training loss is");
    char ck[256], args[1024];
    snprintf(ck, sizeof ck, "%s/run.st", g_dir);
    snprintf(args, sizeof args, "--epochs 2 --stop-after 1 --batch-size 16 --save %s", ck);
    expect("mnist_mlp", args, 0, "final:");
    snprintf(args, sizeof args, "--epochs 2 --batch-size 16 --resume %s --lr 0.002", ck);
    expect("mnist_mlp", args, 1, "was trained with --lr 0.001, these flags give --lr 0.002");
    snprintf(args, sizeof args, "--epochs 2 --batch-size 16 --resume %s --lr-schedule wsd", ck);
    expect("mnist_mlp", args, 1, "was trained with --lr-schedule cosine, these flags give wsd");
    snprintf(args, sizeof args, "--epochs 2 --batch-size 16 --resume %s", ck);
    expect("mnist_mlp", args, 0, "epoch 2/2");
}
END_TEST

/* --log-dir writes an event file, --onnx a model, and the run prints the
 * model's summary and (not a terminal) the progress bar's plain lines. */
START_TEST(test_log_dir_onnx_summary) {
    char args[1024], out[16384], path[256];
    snprintf(args, sizeof args, "--epochs 1 --batch-size 16 --log-dir %s/logs --onnx %s/mlp.onnx", g_dir, g_dir);
    int st = run("mnist_mlp", args, out, sizeof out);
    ck_assert_msg(st == 0, "exit %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "Total params: 669,706") && strstr(out, "epoch 1/1: 100%|") && strstr(out, "onnx: "),
                  "%s", out);
    snprintf(path, sizeof path, "%s/mlp.onnx", g_dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    snprintf(args, sizeof args, "ls %s/logs/events.out.tfevents.* >/dev/null 2>&1", g_dir);
    ck_assert_int_eq(system(args), 0);
    expect("mnist_mlp", "--onnx /nonexistent/dir/m.onnx", 2, "--onnx /nonexistent/dir/m.onnx: cannot write");
}
END_TEST

/* A small English-like corpus: train.txt and eval.txt in g_dir. */
static void write_corpus(void) {
    static const char *w[] = {"the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "red", "big",
                              "small", "quickly", "house", "bird", "sang", "and", "then", "slept"};
    const char *names[2] = {"train.txt", "eval.txt"};
    for (int f = 0; f < 2; f++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[f]);
        FILE *o = fopen(p, "w");
        ck_assert_ptr_nonnull(o);
        for (unsigned i = 0; i < (f ? 40u : 400u); i++) {
            unsigned x = i * 2654435761u + (unsigned)f * 97u;
            for (int k = 0; k < 6 + (int)(x % 7); k++, x = x * 1103515245u + 12345u) fprintf(o, "%s ", w[(x >> 16) % 20]);
            fprintf(o, "\n");
        }
        fclose(o);
    }
}

/* The compiled step with padded masked positions computes what the eager
 * one does: the same log and final lines (the CPU runs it eagerly, so this
 * checks the padding; GPU replays are checked by the compile suite). */
START_TEST(test_bert_mlm_compile) {
    write_corpus();
    const char *flags = "--layers 1 --hidden 32 --heads 2 --seq 16 --batch-size 8 --steps 12 --warmup 2 "
                        "--log-every 6 --vocab-size 64 --no-progress";
    char args[1024], eager[8192], compiled[8192];
    ck_assert_int_eq(run("bert_mlm", flags, eager, sizeof eager), 0);
    snprintf(args, sizeof args, "%s --compile 1", flags);
    ck_assert_int_eq(run("bert_mlm", args, compiled, sizeof compiled), 0);
    ck_assert_msg(strstr(compiled, "compile: 1 trace(s), 0 graph(s), 0 of 12 steps replayed"), "%s", compiled);
    const char *keys[] = {"step 6: mlm_loss=", "step 12: mlm_loss=", "final: "};
    for (int i = 0; i < 3; i++) {
        const char *a = strstr(eager, keys[i]), *b = strstr(compiled, keys[i]);
        ck_assert_msg(a && b, "%s:\n%s\n---\n%s", keys[i], eager, compiled);
        const char *end = strstr(a, i == 2 ? " seconds=" : " tokens/s="); /* those vary from run to run */
        ck_assert_ptr_nonnull(end);
        size_t n = (size_t)(end - a);
        ck_assert_msg(!strncmp(a, b, n), "eager:\n%s\ncompiled:\n%s", eager, compiled);
    }
}
END_TEST

Suite *nb_suite_examples(void) {
    Suite *s = suite_create("examples");
    TCase *c = tcase_create("examples");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_add_test(c, test_bad_flags_named);
    tcase_add_test(c, test_divergence_and_resume_flags);
    tcase_add_test(c, test_log_dir_onnx_summary);
    tcase_add_test(c, test_bert_mlm_compile);
    tcase_set_timeout(c, 300);
    suite_add_tcase(s, c);
    return s;
}
