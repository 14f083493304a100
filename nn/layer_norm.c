/* PLACEHOLDER (being written) */
typedef int nb_placeholder_nn_layer_norm_c;
