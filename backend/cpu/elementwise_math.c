/* elementwise_math.c - placeholder until the unary math kernels land. */
typedef int nb_placeholder_elementwise_math;
