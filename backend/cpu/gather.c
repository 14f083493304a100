/* gather.c - placeholder until its kernels land (op-coverage issue). */
typedef int nb_placeholder_gather;
