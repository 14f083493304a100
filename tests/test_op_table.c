/* test_op_table.c - the op table (autograd/OPS.md) lists every public op:
 * each function declared in autograd/nb_ops.h and autograd/nb_linalg.h must
 * appear in it by name, so a new op cannot land undocumented. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* name occurs in text as a whole identifier */
static bool mentions(const char *text, const char *name, size_t len) {
    for (const char *p = text; (p = strstr(p, name)); p += len) {
        bool start = p == text || !ident_char(p[-1]);
        if (start && !ident_char(p[len])) return true;
    }
    return false;
}

/* The declared name of a line such as "nb_tensor *nb_abs(nb_tensor *x);":
 * the identifier before the first '(' on a line that starts a declaration. */
static size_t declared_name(const char *line, const char **name) {
    if (!isalpha((unsigned char)line[0]) || !strncmp(line, "typedef", 7)) return 0;
    const char *paren = strchr(line, '(');
    const char *eol = strchr(line, '\n');
    if (!paren || (eol && paren > eol)) return 0;
    const char *b = paren;
    while (b > line && ident_char(b[-1])) b--;
    if (strncmp(b, "nb_", 3)) return 0;
    *name = b;
    return (size_t)(paren - b);
}

static int check_header(const char *table, const char *path) {
    char *h = slurp(path);
    int n = 0;
    for (const char *line = h; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *name;
        size_t len = declared_name(line, &name);
        if (!len) continue;
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)len, name);
        ck_assert_msg(mentions(table, buf, len), "%s is declared in %s but missing from autograd/OPS.md", buf, path);
        n++;
    }
    free(h);
    return n;
}

START_TEST(op_table_lists_every_op) {
    char *table = slurp(NB_SOURCE_ROOT "/autograd/OPS.md");
    int n = check_header(table, NB_SOURCE_ROOT "/autograd/nb_ops.h");
    n += check_header(table, NB_SOURCE_ROOT "/autograd/nb_linalg.h");
    ck_assert_int_gt(n, 150); /* the scanner found the declarations */
    free(table);
}
END_TEST

Suite *nb_suite_op_table(void) {
    Suite *s = suite_create("op_table");
    TCase *tc = tcase_create("op_table");
    tcase_add_test(tc, op_table_lists_every_op);
    suite_add_tcase(s, tc);
    return s;
}
