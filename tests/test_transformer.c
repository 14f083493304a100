/* PLACEHOLDER (being written) */
#include "nb_test.h"

Suite *nb_suite_transformer(void) { return suite_create("transformer"); }
