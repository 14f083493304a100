/* test_ops_compare.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_compare(void) { return suite_create("ops_compare"); }
