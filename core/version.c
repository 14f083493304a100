/* version.c - nb_version(): the library's own version, for programs that
 * compare it with the headers they were built with. */
#include "nb_version.h"

const char *nb_version(void) { return NB_VERSION_STRING; }
