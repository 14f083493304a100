/* test_ops_math.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_math(void) { return suite_create("ops_math"); }
