/* PLACEHOLDER (being written) */
typedef int nb_placeholder_nn_embedding_c;
