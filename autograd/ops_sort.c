/* ops_sort.c - placeholder until its ops land (op-coverage issue). */
typedef int nb_placeholder_ops_sort;
