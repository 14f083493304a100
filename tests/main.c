/* main.c - runs every Check suite (tests/suites.h), or those named on the
 * command line, and ends with Check's summary and a plain
 * "N passed, N failed" line. Exit status 0 only when nothing failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

typedef struct {
    const char *name;
    Suite *(*make)(void);
} suite_entry;

#define NB_ENTRY(name) {#name, nb_suite_##name},
static const suite_entry all_suites[] = {NB_SUITES(NB_ENTRY)};
#undef NB_ENTRY

static int wanted(const char *name, int argc, char **argv) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    /* Check's timeouts only stop hangs: its 4 s default failed tests on a
     * busy 2-core machine (the ASan suite beside a build), so every test
     * case gets 10 minutes unless the caller or the suite says otherwise
     * (Check reads this when a test case is created). */
    setenv("CK_DEFAULT_TIMEOUT", "600", 0);
    SRunner *sr = NULL;
    for (size_t i = 0; i < sizeof all_suites / sizeof all_suites[0]; i++) {
        if (!wanted(all_suites[i].name, argc, argv)) continue;
        Suite *s = all_suites[i].make();
        if (!sr) sr = srunner_create(s);
        else srunner_add_suite(sr, s);
    }
    if (!sr) {
        fprintf(stderr, "no such suite\n");
        return 2;
    }
    srunner_run_all(sr, CK_NORMAL);
    int run = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("%d passed, %d failed\n", run - failed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
