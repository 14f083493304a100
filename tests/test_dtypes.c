/* test_dtypes.c - placeholder suite until its tests land. */
#include "nb_test.h"

Suite *nb_suite_dtypes(void) { return suite_create("dtypes"); }
