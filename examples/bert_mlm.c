/* PLACEHOLDER (being written) */
#include <stdio.h>
int main(void) { fputs("not implemented yet\n", stderr); return 1; }
