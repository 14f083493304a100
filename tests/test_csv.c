/* test_csv.c - nb_csv_load (data/csv.c) as numpy.loadtxt reads the same
 * files: headers, comments, blank lines, quotes, CRLF, blank-separated
 * columns, usecols, max_rows, exact int64, and files that must fail with
 * the line and column named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_data.h"
#include "nb_test.h"

static char dir[64];

static const char *file_with(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    nb_test_write_file(path, text, strlen(text));
    return path;
}

static void ck_values(nb_tensor *t, int64_t rows, int64_t cols, const double *want) {
    NB_CK_NOTNULL(t);
    nb_ck_shape(t, NB_SHAPE(rows, cols));
    double *got = nb_test_values_of(t);
    for (int64_t i = 0; i < rows * cols; i++)
        ck_assert_msg(got[i] == want[i], "element %lld: %.17g, not %.17g", (long long)i, got[i], want[i]);
    free(got);
}

/* Loading text fails with code, and the message holds part. */
static void ck_fails(const char *text, nb_csv_options o, nb_status code, const char *part) {
    nb_clear_error();
    ck_assert_ptr_null(nb_csv_load(file_with("bad.csv", text), o));
    ck_assert_int_eq(nb_last_status(), code);
    ck_assert_msg(strstr(nb_last_error(), part), "'%s' lacks '%s'", nb_last_error(), part);
}

START_TEST(test_csv_load) {
    nb_scope *s = nb_scope_begin();
    strcpy(dir, "/tmp/nb_csv_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* a header, a comment line, a trailing comment, a blank line, quotes, blanks, CRLF */
    const char *p = file_with("a.csv", "x,y,label\r\n# measured\r\n1.5, -2,3\r\n\r\n \"0.25\",1e3 ,  7 # ok\r\n"
                                       "nan,inf,-0\n");
    nb_tensor *t = nb_csv_load(p, (nb_csv_options){.skip_rows = 1});
    ck_assert_int_eq(nb_dtype_of(t), NB_F32);
    double got[9];
    nb_tensor *w = nb_to_dtype(t, NB_F64);
    NB_CK_OK(nb_to_host(w, got, sizeof got));
    ck_assert(got[0] == 1.5 && got[1] == -2 && got[2] == 3 && got[3] == 0.25 && got[4] == 1000 && got[5] == 7);
    ck_assert(got[6] != got[6] && got[7] > 1e300 && got[8] == 0);
    /* float64, blank-separated, usecols reordering, max_rows */
    p = file_with("b.txt", "  1 2\t3 4  \n5 6 7 8\n9 10 11 12\n");
    ck_values(nb_csv_load(p, (nb_csv_options){.delimiter = ' ', .dtype = NB_F64}), 3, 4,
              (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    ck_values(nb_csv_load(p, (nb_csv_options){.delimiter = ' ', .dtype = NB_F64, .max_rows = 2,
                                              .usecols = (int64_t[]){3, 0}, .n_usecols = 2}),
              2, 2, (double[]){4, 1, 8, 5});
    /* int64 beyond 2^53 exactly; semicolons */
    p = file_with("c.csv", "9007199254740993;-9223372036854775808\n1;2\n");
    t = nb_csv_load(p, (nb_csv_options){.delimiter = ';', .dtype = NB_I64});
    int64_t ints[4];
    NB_CK_OK(nb_to_host(t, ints, sizeof ints));
    ck_assert(ints[0] == 9007199254740993LL && ints[1] == INT64_MIN && ints[2] == 1 && ints[3] == 2);
    /* bool and uint8 */
    ck_values(nb_to_dtype(nb_csv_load(file_with("d.csv", "0,1\n1,0\n"), (nb_csv_options){.dtype = NB_BOOL}),
                          NB_F64), 2, 2, (double[]){0, 1, 1, 0});
    ck_assert_int_eq(nb_dtype_of(nb_csv_load(file_with("e.csv", "255\n"), (nb_csv_options){.dtype = NB_U8})), NB_U8);
    /* no rows: [0, 0], or [0, k] with usecols */
    t = nb_csv_load(file_with("f.csv", "# nothing\n\n"), (nb_csv_options){0});
    nb_ck_shape(t, NB_SHAPE(0, 0));
    t = nb_csv_load(file_with("g.csv", ""), (nb_csv_options){.usecols = (int64_t[]){1}, .n_usecols = 1});
    nb_ck_shape(t, NB_SHAPE(0, 1));
    /* a file without the final newline */
    ck_values(nb_csv_load(file_with("h.csv", "1,2"), (nb_csv_options){.dtype = NB_F64}), 1, 2, (double[]){1, 2});
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_csv_errors) {
    nb_scope *s = nb_scope_begin();
    strcpy(dir, "/tmp/nb_csv_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    nb_csv_options o = {0};
    ck_fails("1,2\n3\n", o, NB_ERR_FORMAT, ":2: 1 columns, the first row has 2");
    ck_fails("1,2\n3,x\n", o, NB_ERR_FORMAT, ":2: column 2: 'x' is not a number");
    ck_fails("1,,2\n", o, NB_ERR_FORMAT, ":1: column 2 is empty");
    ck_fails("1,2\n3,4.5\n", (nb_csv_options){.dtype = NB_I64}, NB_ERR_FORMAT, "'4.5' is not an integer");
    ck_fails("2147483648\n", (nb_csv_options){.dtype = NB_I32}, NB_ERR_FORMAT, "not an integer in [-2147483648");
    ck_fails("99999999999999999999\n", (nb_csv_options){.dtype = NB_I64}, NB_ERR_FORMAT, "not an integer");
    ck_fails("2\n", (nb_csv_options){.dtype = NB_BOOL}, NB_ERR_FORMAT, "not an integer in [0, 1]");
    ck_fails("1,2\n", (nb_csv_options){.usecols = (int64_t[]){2}, .n_usecols = 1}, NB_ERR_FORMAT, "no column 2");
    ck_fails("1,\0002\n", o, NB_ERR_FORMAT, "column 2 is empty"); /* the text stops at the NUL for file_with */
    const char nul[] = "1,2\n3,\0\n";
    char path[256];
    snprintf(path, sizeof path, "%s/nul.csv", dir);
    nb_test_write_file(path, nul, sizeof nul - 1);
    NB_CK_FAILS(nb_csv_load(path, o) != NULL, NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "NUL byte"));
    char longf[700];
    memset(longf, '1', 698), longf[698] = '\n', longf[699] = 0;
    ck_fails(longf, o, NB_ERR_FORMAT, "characters, not a number");
    /* bad arguments */
    const char *p = file_with("ok.csv", "1\n");
    NB_CK_FAILS(nb_csv_load(NULL, o) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_csv_load(p, (nb_csv_options){.delimiter = '#'}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_csv_load(p, (nb_csv_options){.skip_rows = -1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_csv_load(p, (nb_csv_options){.dtype = NB_DTYPE_COUNT}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_csv_load(p, (nb_csv_options){.n_usecols = 1}) != NULL, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_csv_load(p, (nb_csv_options){.usecols = (int64_t[]){0, 0}, .n_usecols = 2}) != NULL,
                NB_ERR_INVALID_ARG);
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    NB_CK_FAILS(nb_csv_load(path, o) != NULL, NB_ERR_IO);
    NB_CK_FAILS(nb_csv_load(dir, o) != NULL, NB_ERR_IO); /* a directory */
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_csv(void) {
    Suite *s = suite_create("csv");
    TCase *t = tcase_create("csv");
    tcase_add_test(t, test_csv_load);
    tcase_add_test(t, test_csv_errors);
    suite_add_tcase(s, t);
    return s;
}
