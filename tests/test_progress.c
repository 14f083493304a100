/* test_progress.c - nb_progress (utils/progress.c): tqdm's layout, the
 * bar's fill, plain lines when the output is not a terminal (one per tenth,
 * or every miniters updates with no total), postfix text and disable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_progress.h"
#include "nb_test.h"

static int count_lines(FILE *f, char last[1024]) {
    rewind(f);
    int n = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) n++, snprintf(last, 1024, "%s", line);
    return n;
}

START_TEST(test_progress_layout) {
    setenv("LC_ALL", "C", 1); /* ASCII cells */
    nb_progress *p = nb_progress_new(10, &(nb_progress_options){.desc = "train", .unit = "step", .ncols = 100,
                                                                 .disable = true});
    NB_CK_NOTNULL(p);
    char buf[1024];
    char want[128]; /* 12 + 63 blank cells + 25 = 100 columns */
    snprintf(want, sizeof want, "train:   0%%|%63s| 0/10 [00:00<?, ?step/s]", "");
    ck_assert_str_eq(nb_progress_format(p, buf, sizeof buf), want);
    nb_progress_update(p, 5);
    nb_progress_set_postfix(p, "loss=%.2f", 0.125);
    nb_progress_format(p, buf, sizeof buf);
    ck_assert_int_eq((int)strlen(buf), 100); /* the bar takes what the text leaves */
    ck_assert_msg(!strncmp(buf, "train:  50%|", 12), "%s", buf);
    char *bar = buf + 12, *end = strchr(bar, '|');
    ck_assert_ptr_nonnull(end);
    int cells = (int)(end - bar), full = 0;
    for (char *c = bar; c < end; c++) full += *c == '#';
    /* half the cells (the rate's digits, which depend on the machine's speed, set how many there are) */
    ck_assert_int_eq(full, cells / 2);
    if (cells % 2) ck_assert_int_eq(bar[full], '5'); /* the half cell in tenths */
    ck_assert_msg(strstr(end, "| 5/10 [00:00<00:00, ") && strstr(buf, "step/s, loss=0.12]"), "%s", buf);
    ck_assert_int_eq(nb_progress_count(p), 5);
    nb_progress_set_postfix(p, NULL);
    ck_assert_ptr_null(strstr(nb_progress_format(p, buf, sizeof buf), "loss"));
    nb_progress_close(p);
    /* no total: a count and a rate, no bar */
    p = nb_progress_new(0, &(nb_progress_options){.disable = true});
    nb_progress_update(p, 3);
    nb_progress_format(p, buf, sizeof buf);
    ck_assert_msg(!strncmp(buf, "3 [00:00, ", 10) && strstr(buf, "it/s]"), "%s", buf);
    nb_progress_close(p);
    unsetenv("LC_ALL");
}
END_TEST

/* Not a terminal: a line at each tenth and one at close (tqdm's fixed
 * layout), or every miniters updates with no total. */
START_TEST(test_progress_plain_lines) {
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    nb_progress *p = nb_progress_new(100, &(nb_progress_options){.file = f, .desc = "epoch 1"});
    for (int i = 0; i < 100; i++) nb_progress_update(p, 1);
    nb_progress_close(p);
    char last[1024];
    ck_assert_int_eq(count_lines(f, last), 10); /* 10%..90%, then the close */
    ck_assert_msg(!strncmp(last, "epoch 1: 100%|", 14) && strstr(last, "| 100/100 ["), "%s", last);
    fclose(f);
    f = tmpfile();
    p = nb_progress_new(-1, &(nb_progress_options){.file = f, .miniters = 10});
    for (int i = 0; i < 35; i++) nb_progress_update(p, 1);
    nb_progress_close(p);
    ck_assert_int_eq(count_lines(f, last), 4);
    ck_assert_msg(!strncmp(last, "35 [", 4), "%s", last);
    fclose(f);
    f = tmpfile();
    p = nb_progress_new(10, &(nb_progress_options){.file = f, .disable = true});
    nb_progress_update(p, 10);
    nb_progress_close(p);
    ck_assert_int_eq(count_lines(f, last), 0);
    fclose(f);
}
END_TEST

Suite *nb_suite_progress(void) {
    Suite *s = suite_create("progress");
    TCase *t = tcase_create("progress");
    tcase_add_test(t, test_progress_layout);
    tcase_add_test(t, test_progress_plain_lines);
    suite_add_tcase(s, t);
    return s;
}
