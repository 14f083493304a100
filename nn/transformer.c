/* PLACEHOLDER (being written) */
typedef int nb_placeholder_nn_transformer_c;
