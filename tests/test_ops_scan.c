/* test_ops_scan.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_scan(void) { return suite_create("ops_scan"); }
