/* test_op_table.c - the op table (core/nb_op_table.h) and OPS.md agree
 * with the headers: every row names a function that exists (checked at
 * compile time), every function declared in autograd/nb_ops.h,
 * nb_functional.h, nb_linalg.h and nb_quantize.h is a row (or one of the few non-op helpers), and
 * autograd/OPS.md holds exactly the table nabla-ops-md generates. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "ops_md.h"

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

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

/* Declared in the op headers but not ops: dtype rules. */
static const char *const not_ops[] = {"nb_promote_types", "nb_result_type"};

static bool is_row(const char *fn) {
    if (strncmp(fn, "nb_", 3)) return false;
    return nb_op_find(fn + 3) != NB_OP_COUNT;
}

static int check_header(const char *path) {
    char *h = nb_test_slurp(path, NULL);
    int n = 0;
    for (const char *line = h; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *name;
        size_t len = declared_name(line, &name);
        if (!len) continue;
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)len, name);
        bool helper = false;
        for (size_t i = 0; i < sizeof not_ops / sizeof not_ops[0]; i++) helper |= !strcmp(buf, not_ops[i]);
        ck_assert_msg(helper || is_row(buf), "%s is declared in %s but has no row in core/nb_op_table.h", buf, path);
        n++;
    }
    free(h);
    return n;
}

/* Every row's function exists with the row's name: taking its address
 * fails to compile otherwise. */
#define NB_OP_FN(id, name, family, flags, dtypes, slots, bw, ac) {#name, (void (*)(void))nb_##name},
static const struct {
    const char *name;
    void (*fn)(void);
} row_fns[] = {NB_OP_TABLE(NB_OP_FN)};
#undef NB_OP_FN

START_TEST(op_table_rows_are_functions) {
    ck_assert_int_eq((int)(sizeof row_fns / sizeof row_fns[0]), NB_OP_COUNT);
    for (int i = 0; i < NB_OP_COUNT; i++) {
        ck_assert(row_fns[i].fn != NULL);
        ck_assert_str_eq(row_fns[i].name, nb_op_name((nb_op_id)i));
        ck_assert_int_eq(nb_op_find(row_fns[i].name), i);
        const nb_op_info *r = nb_op_get((nb_op_id)i);
        ck_assert_msg(r->dtypes != 0, "%s takes no dtype", r->name);
    }
    ck_assert_ptr_null(nb_op_get(NB_OP_COUNT));
    ck_assert_str_eq(nb_op_name(NB_OP_COUNT), "invalid op");
    ck_assert_int_eq(nb_op_find("no_such_op"), NB_OP_COUNT);
    ck_assert_int_eq(nb_op_find(NULL), NB_OP_COUNT);
}
END_TEST

START_TEST(op_table_covers_the_headers) {
    int n = check_header(NB_SOURCE_ROOT "/autograd/nb_ops.h");
    n += check_header(NB_SOURCE_ROOT "/autograd/nb_functional.h");
    n += check_header(NB_SOURCE_ROOT "/autograd/nb_linalg.h");
    n += check_header(NB_SOURCE_ROOT "/autograd/nb_quantize.h");
    ck_assert_int_gt(n, 150); /* the scanner found the declarations */
}
END_TEST

START_TEST(ops_md_holds_the_generated_table) {
    char *md = nb_test_slurp(NB_SOURCE_ROOT "/autograd/OPS.md", NULL);
    size_t n = nb_ops_md_table(NULL, 0);
    char *want = malloc(n + 1);
    ck_assert_ptr_nonnull(want);
    nb_ops_md_table(want, n + 1);
    ck_assert_msg(strstr(md, want) != NULL, "autograd/OPS.md's op table is out of date: regenerate it with "
                  "build/tests/nabla-ops-md and paste it between the markers");
    free(want);
    free(md);
}
END_TEST

/* The capability query answers from the row and the backend. */
START_TEST(supports_query) {
    ck_assert(nb_backend_supports(NB_CPU, NB_OP_MATMUL, NB_F32));
    ck_assert(nb_backend_supports(NB_CPU, NB_OP_ADD, NB_I32));
    ck_assert(!nb_backend_supports(NB_CPU, NB_OP_MATMUL, NB_I32)); /* not in the row */
    ck_assert(nb_backend_supports(NB_CPU, NB_OP_ADD, NB_F16));     /* an LP row: float32 math inside */
    ck_assert(!nb_backend_supports(NB_CPU, NB_OP_LOG, NB_F16));    /* not in the row */
    ck_assert(nb_backend_supports(NB_CPU, NB_OP_CAT, NB_BF16));    /* data movement moves 2-byte elements */
    ck_assert(!nb_backend_supports(NB_CPU, NB_OP_COUNT, NB_F32));
    ck_assert(!nb_backend_supports(NB_CUDA(15), NB_OP_ADD, NB_F32));
    nb_scope *s = nb_scope_begin();
    nb_tensor *h = nb_zeros(NB_SHAPE(2, 2), NB_F16);
    NB_CK_FAILS(nb_log(h), NB_ERR_DTYPE);
    ck_assert_msg(strstr(nb_last_error(), "log: float16 is not supported"), "%s", nb_last_error());
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_op_table(void) {
    Suite *s = suite_create("op_table");
    TCase *tc = tcase_create("op_table");
    tcase_add_test(tc, op_table_rows_are_functions);
    tcase_add_test(tc, op_table_covers_the_headers);
    tcase_add_test(tc, ops_md_holds_the_generated_table);
    tcase_add_test(tc, supports_query);
    suite_add_tcase(s, tc);
    return s;
}
