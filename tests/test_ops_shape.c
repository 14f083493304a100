/* test_ops_shape.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_ops_shape(void) { return suite_create("ops_shape"); }
