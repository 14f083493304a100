/* test_ops_gather.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_gather(void) { return suite_create("ops_gather"); }
