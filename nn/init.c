/* init.c - placeholder until nn.init lands. */
typedef int nb_placeholder_nn_init;
