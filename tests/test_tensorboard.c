/* test_tensorboard.c - nb_summary_writer (utils/tensorboard.c): the event
 * file read back by Python's protobuf and checked against PyTorch's
 * histogram algorithm (tests/interop/tensorboard_interop.py), the queue's
 * flush policy, a write that fails part-way leaving a file that parses,
 * bad arguments, and tools/nabla-plot's PNG of two runs. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_data.h"
#include "nb_tensorboard.h"
#include "nb_test.h"

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) ? -1 : (long)sb.st_size;
}

/* Walks the file's records by their lengths: true when they end exactly at
 * the end of the file (CRCs are the Python side's job). */
static bool whole_records(const char *path, int *count) {
    size_t n;
    char *d = nb_test_slurp(path, &n);
    size_t i = 0;
    *count = 0;
    while (i + 12 <= n) {
        uint64_t len = 0;
        for (int k = 0; k < 8; k++) len |= (uint64_t)(uint8_t)d[i + k] << (8 * k);
        if (i + 16 + len > n) break;
        i += 16 + len, ++*count;
    }
    free(d);
    return i == n;
}

START_TEST(test_tensorboard_read_back) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_tb_XXXXXX", script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("tensorboard_interop.py", script, sizeof script), "tensorboard_interop.py not found");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char logdir[128];
    snprintf(logdir, sizeof logdir, "%s/run/a", dir); /* made with its parent */
    nb_summary_writer *w = nb_summary_writer_open(logdir, NULL);
    NB_CK_NOTNULL(w);
    ck_assert_ptr_nonnull(strstr(nb_summary_writer_path(w), "/run/a/events.out.tfevents."));
    /* the formulas tensorboard_interop.py checks against */
    for (int step = 0; step < 25; step++) {
        NB_CK_OK(nb_summary_writer_add_scalar(w, "train/loss", 1.0 / (step + 1), step));
        NB_CK_OK(nb_summary_writer_add_scalar(w, "train/lr", 0.1 * step, step));
    }
    float hv[1000];
    for (int i = 0; i < 1000; i++) hv[i] = (float)((((i * 37) % 101) - 50) * 0.013);
    NB_CK_OK(nb_summary_writer_add_histogram(w, "weights", nb_from_data(hv, NB_SHAPE(1000), NB_F32), 3));
    int64_t iv[50];
    for (int i = 0; i < 50; i++) iv[i] = i % 7 - 3;
    /* a strided view of an int64 tensor: values are read as its elements */
    nb_tensor *ints = nb_from_data(iv, 2, (int64_t[]){5, 10}, NB_I64);
    NB_CK_OK(nb_summary_writer_add_histogram(w, "ints", ints, 4));
    NB_CK_OK(nb_summary_writer_add_text(w, "notes", "hello **nabla** \xe2\x9c\x93", 7));
    NB_CK_OK(nb_summary_writer_close(w));
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", nb_test_python(), script, logdir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) printf("tensorboard_interop: skipped: no protobuf for Python or no protoc-c\n");
    else ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "tensorboard_interop.py failed (status %d)", rc);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* Events reach the file every max_queue events, on flush and on close;
 * flush_secs as small as it gets writes each event. */
START_TEST(test_tensorboard_flush_policy) {
    char dir[64] = "/tmp/nb_tb_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    nb_summary_writer *w = nb_summary_writer_open(dir, &(nb_summary_writer_options){.max_queue = 3, .filename_suffix = ".x"});
    NB_CK_NOTNULL(w);
    const char *path = nb_summary_writer_path(w);
    ck_assert_str_eq(path + strlen(path) - 2, ".x");
    long first = file_size(path); /* file_version, written at once */
    ck_assert_int_gt(first, 0);
    NB_CK_OK(nb_summary_writer_add_scalar(w, "a", 1, 0));
    NB_CK_OK(nb_summary_writer_add_scalar(w, "a", 2, 1));
    ck_assert_int_eq(file_size(path), first);
    NB_CK_OK(nb_summary_writer_add_scalar(w, "a", 3, 2));
    long three = file_size(path);
    ck_assert_int_gt(three, first);
    NB_CK_OK(nb_summary_writer_add_scalar(w, "a", 4, 3));
    ck_assert_int_eq(file_size(path), three);
    NB_CK_OK(nb_summary_writer_flush(w));
    ck_assert_int_gt(file_size(path), three);
    int n;
    ck_assert(whole_records(path, &n));
    ck_assert_int_eq(n, 5);
    NB_CK_OK(nb_summary_writer_close(w));
    w = nb_summary_writer_open(dir, &(nb_summary_writer_options){.flush_secs = 1e-9});
    NB_CK_NOTNULL(w);
    path = nb_summary_writer_path(w);
    first = file_size(path);
    NB_CK_OK(nb_summary_writer_add_text(w, "t", "x", 0));
    ck_assert_int_gt(file_size(path), first);
    NB_CK_OK(nb_summary_writer_close(w));
    nb_test_rmtree(dir);
}
END_TEST

/* A write that fails part-way (the file-size limit) returns NB_ERR_IO and
 * leaves the file at its last whole record; the events stay queued. In a
 * child, since the limit is per process. */
START_TEST(test_tensorboard_failed_write) {
    char dir[64] = "/tmp/nb_tb_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[512];
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN); /* write() then fails with EFBIG */
        nb_summary_writer *w = nb_summary_writer_open(dir, &(nb_summary_writer_options){.max_queue = 1000});
        if (!w) _exit(2);
        snprintf(path, sizeof path, "%s", nb_summary_writer_path(w));
        if (write(fds[1], path, strlen(path) + 1) < 0) _exit(3);
        long before = file_size(path);
        for (int i = 0; i < 50; i++) nb_summary_writer_add_scalar(w, "loss", i, i);
        if (nb_summary_writer_flush(w)) _exit(4); /* ~1.5 KB: fits */
        long good = file_size(path);
        for (int i = 0; i < 200; i++) nb_summary_writer_add_histogram(w, "h", nb_arange(0, 1000 + i, 1, NB_F32), i);
        struct rlimit rl = {(rlim_t)good + 4000, (rlim_t)good + 4000};
        if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(5);
        nb_status st = nb_summary_writer_flush(w);
        if (st != NB_ERR_IO || file_size(path) != good || good <= before) _exit(6);
        if (!strstr(nb_last_error(), path)) _exit(7);
        _exit(0);
    }
    close(fds[1]);
    ssize_t k = read(fds[0], path, sizeof path);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert_int_gt(k, 0);
    int n;
    ck_assert(whole_records(path, &n));
    ck_assert_int_eq(n, 51);
    nb_test_rmtree(dir);
}
END_TEST

START_TEST(test_tensorboard_errors) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_tb_XXXXXX", p[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    NB_CK_FAILS(nb_summary_writer_open(dir, &(nb_summary_writer_options){.max_queue = -1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_summary_writer_open(dir, &(nb_summary_writer_options){.flush_secs = -1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_summary_writer_open("", NULL) != NULL, NB_ERR_INVALID_ARG);
    snprintf(p, sizeof p, "%s/file", dir);
    nb_test_write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/file/sub", dir); /* a file where a directory must be */
    NB_CK_FAILS(nb_summary_writer_open(p, NULL) != NULL, NB_ERR_IO);
    nb_summary_writer *w = nb_summary_writer_open(dir, NULL);
    NB_CK_NOTNULL(w);
    NB_CK_FAILS(nb_summary_writer_add_scalar(w, "", 1, 0) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_summary_writer_add_histogram(w, "h", nb_zeros(NB_SHAPE(0), NB_F32), 0) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_summary_writer_add_histogram(w, "h", nb_full(NB_SHAPE(3), NAN, NB_F32), 0) == NB_OK,
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_summary_writer_add_histogram(w, "h", nb_ones(NB_SHAPE(3), NB_BOOL), 0) == NB_OK, NB_ERR_DTYPE);
    /* no value inside the buckets: beyond 1e20, or nonzero below 1e-12 */
    NB_CK_FAILS(nb_summary_writer_add_histogram(w, "h", nb_full(NB_SHAPE(2), 1e21, NB_F64), 0) == NB_OK,
                NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_summary_writer_close(w));
    ck_assert_int_eq(nb_summary_writer_close(NULL), NB_OK);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* tools/nabla-plot draws two runs' curves from a log directory: a PNG of
 * the figure's size (one panel: 600 x 360 at 100 dpi) with both runs'
 * colours (matplotlib's C0 and C1) in it. Skipped without matplotlib. */
START_TEST(test_tensorboard_nabla_plot) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_tb_XXXXXX", sub[128], cmd[2048], png[160];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int run = 0; run < 2; run++) {
        snprintf(sub, sizeof sub, "%s/run%d", dir, run);
        nb_summary_writer *w = nb_summary_writer_open(sub, NULL);
        NB_CK_NOTNULL(w);
        for (int step = 0; step < 50; step++)
            NB_CK_OK(nb_summary_writer_add_scalar(w, "train/loss", (2.0 + run) / (1 + 0.1 * step), step * 10));
        NB_CK_OK(nb_summary_writer_add_text(w, "note", "not a scalar: not plotted", 0));
        NB_CK_OK(nb_summary_writer_close(w));
    }
    if (system("/usr/bin/python3 -c 'import matplotlib, google.protobuf' 2>/dev/null") != 0) {
        printf("nabla-plot: skipped: /usr/bin/python3 lacks matplotlib or protobuf\n");
        nb_test_rmtree(dir);
        nb_scope_end(s);
        return;
    }
    snprintf(png, sizeof png, "%s/loss.png", dir);
    snprintf(cmd, sizeof cmd, "'%s/tools/nabla-plot' '%s' -o '%s' --tags train/loss", NB_SOURCE_ROOT, dir, png);
    ck_assert_int_eq(system(cmd), 0);
    nb_tensor *img = nb_image_read(png, NB_IMAGE_RGB);
    NB_CK_NOTNULL(img);
    nb_ck_shape(img, NB_SHAPE(3, 360, 600));
    double *px = nb_test_values_of(img);
    int64_t hw = 360 * 600, ink = 0, c0 = 0, c1 = 0;
    for (int64_t i = 0; i < hw; i++) {
        double r = px[i], g = px[hw + i], b = px[2 * hw + i];
        ink += r < 250 || g < 250 || b < 250;
        c0 += r == 0x1f && g == 0x77 && b == 0xb4; /* matplotlib's C0, the first run's solid line */
        c1 += r == 0xff && g == 0x7f && b == 0x0e; /* C1 */
    }
    free(px);
    ck_assert_msg(ink > hw / 50, "%lld pixels drawn", (long long)ink);
    ck_assert_msg(c0 > 100 && c1 > 100, "run colours: %lld and %lld pixels", (long long)c0, (long long)c1);
    /* a tag that is not there: an error naming it, and no file */
    snprintf(cmd, sizeof cmd, "'%s/tools/nabla-plot' '%s' -o '%s/x.png' --tags nope 2>/dev/null", NB_SOURCE_ROOT, dir, dir);
    ck_assert_int_ne(system(cmd), 0);
    snprintf(png, sizeof png, "%s/x.png", dir);
    ck_assert_int_ne(access(png, F_OK), 0);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_tensorboard(void) {
    Suite *s = suite_create("tensorboard");
    TCase *t = tcase_create("tensorboard");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, test_tensorboard_read_back);
    tcase_add_test(t, test_tensorboard_flush_policy);
    tcase_add_test(t, test_tensorboard_failed_write);
    tcase_add_test(t, test_tensorboard_errors);
    tcase_add_test(t, test_tensorboard_nabla_plot);
    suite_add_tcase(s, t);
    return s;
}
