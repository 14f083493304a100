/* test_deprecated.c - nb_deprecated.h: the old names still build and call
 * the new functions, and using one warns at compile time naming its
 * replacement (checked by compiling a snippet with the system's cc). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nabla.h"
#include "nb_test.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

START_TEST(test_deprecated_aliases_work) {
    nb_scope *s = nb_scope_begin();
    nb_module *net = nb_nn_sequential_array((nb_module *[]){nb_linear_ex(3, 2, true, NB_F32), nb_relu_module()}, 2);
    NB_CK_NOTNULL(net);
    ck_assert_str_eq(nb_module_kind(nb_module_child_at(net, 0)), "Linear");
    ck_assert_str_eq(nb_module_kind(nb_module_child_at(net, 1)), "ReLU");
    nb_optimizer *opt = nb_sgd(net, (nb_sgd_options){.lr = 0.1});
    NB_CK_NOTNULL(opt);
    nb_zero_grad(opt);
    NB_CK_OK(nb_backward(nb_sum(nb_forward(net, nb_ones(NB_SHAPE(4, 3), NB_F32)), NULL, 0, false)));
    NB_CK_OK(nb_step(opt));
    nb_optimizer_free(opt);
    nb_module_free(net);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_deprecated_names_warn) {
    if (system("command -v cc >/dev/null 2>&1") != 0) {
        printf("deprecated: skipped: no cc\n");
        return;
    }
    char exe[1024] = {0}, dir[] = "/tmp/nb_dep_XXXXXX", src[128], log[128], cmd[4096], gen[1200], umbrella[600];
    ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
    snprintf(gen, sizeof gen, "%s/../core/nb_version.h", dirname(exe)); /* dirname may change exe: once */
    snprintf(umbrella, sizeof umbrella, "%s/include/nabla.h", NB_SOURCE_ROOT);
    if (access(gen, R_OK) || access(umbrella, R_OK)) { /* a test binary copied away from its build tree */
        printf("deprecated: skipped: no build tree beside the test binary (%s)\n", gen);
        return;
    }
    gen[strlen(gen) - strlen("/nb_version.h")] = 0;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/old.c", dir);
    snprintf(log, sizeof log, "%s/cc.log", dir);
    const char *code = "#include \"nabla.h\"\n"
                       "int main(void) {\n"
                       "    nb_module *m = nb_sequential(nb_relu_module());\n"
                       "    nb_module_free(m);\n"
                       "    return 0;\n"
                       "}\n";
    nb_test_write_file(src, code, strlen(code));
    int k = snprintf(cmd, sizeof cmd, "cc -std=c11 -fsyntax-only -I%s", gen);
    const char *dirs[] = {"include", "core", "autograd", "nn", "optim", "data", "distributed", "utils", "backend"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " -I%s/%s", NB_SOURCE_ROOT, dirs[i]);
    snprintf(cmd + k, sizeof cmd - (size_t)k, " %s > %s 2>&1", src, log);
    ck_assert_int_eq(system(cmd), 0); /* warnings, not errors */
    char *out = nb_test_slurp(log, NULL);
    ck_assert_msg(strstr(out, "nb_relu_module") && strstr(out, "renamed nb_nn_relu") &&
                      strstr(out, "renamed nb_nn_sequential"),
                  "cc said:\n%s", out);
    free(out);
    nb_test_rmtree(dir);
}
END_TEST

Suite *nb_suite_deprecated(void) {
    Suite *s = suite_create("deprecated");
    TCase *t = tcase_create("deprecated");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_deprecated_aliases_work);
    tcase_add_test(t, test_deprecated_names_warn);
    suite_add_tcase(s, t);
    return s;
}
