/* test_ops_sort.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_sort(void) { return suite_create("ops_sort"); }
