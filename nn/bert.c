/* PLACEHOLDER (being written) */
typedef int nb_placeholder_nn_bert_c;
