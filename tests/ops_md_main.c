/* ops_md_main.c - build/tests/nabla-ops-md: prints OPS.md's generated table;
 *   build/tests/nabla-ops-md > /tmp/t && (replace the block in autograd/OPS.md) */
#include <stdio.h>
#include <stdlib.h>

#include "ops_md.h"

int main(void) {
    size_t n = nb_ops_md_table(NULL, 0);
    char *s = malloc(n + 1);
    if (!s) return 1;
    nb_ops_md_table(s, n + 1);
    fputs(s, stdout);
    free(s);
    return 0;
}
