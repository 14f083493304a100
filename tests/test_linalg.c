/* test_linalg.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_linalg(void) { return suite_create("linalg"); }
