/* isa_rename.h - force-included (-include) into every file of the kernels
 * compiled once per instruction-set level (isa.h): renames their external
 * symbols with the level's suffix (-DNB_ISA_SUFFIX=_avx2), so the copies
 * link side by side and each level's isa_table.c names its own. A new
 * external symbol of those files must be added here (a link error says so). */
#ifndef NB_CPU_ISA_RENAME_H
#define NB_CPU_ISA_RENAME_H

#ifndef NB_ISA_SUFFIX
#error "isa_rename.h: compile with -DNB_ISA_SUFFIX=_<level>"
#endif
#define NB_ISA_CAT_(a, b) a##b
#define NB_ISA_CAT(a, b) NB_ISA_CAT_(a, b)
/* nb_cpu_isa_kernels -> nb_cpu_isa_kernels_avx2: the level's table (isa_table.c) */
#define NB_ISA_NAME(name) NB_ISA_CAT(name, NB_ISA_SUFFIX)

#define nb_cpu_copy NB_ISA_NAME(nb_cpu_copy)
#define nb_cpu_fill NB_ISA_NAME(nb_cpu_fill)
#define nb_cpu_arange NB_ISA_NAME(nb_cpu_arange)
#define nb_cpu_binary NB_ISA_NAME(nb_cpu_binary)
#define nb_cpu_unary NB_ISA_NAME(nb_cpu_unary)
#define nb_cpu_unary_backward NB_ISA_NAME(nb_cpu_unary_backward)
#define nb_cpu_reduce NB_ISA_NAME(nb_cpu_reduce)
#define nb_cpu_argmax NB_ISA_NAME(nb_cpu_argmax)
#define nb_cpu_argmin NB_ISA_NAME(nb_cpu_argmin)
#define nb_cpu_softmax NB_ISA_NAME(nb_cpu_softmax)
#define nb_cpu_softmax_backward NB_ISA_NAME(nb_cpu_softmax_backward)
#define nb_cpu_cross_entropy NB_ISA_NAME(nb_cpu_cross_entropy)
#define nb_cpu_cross_entropy_backward NB_ISA_NAME(nb_cpu_cross_entropy_backward)
#define nb_cpu_random NB_ISA_NAME(nb_cpu_random)
#define nb_cpu_adam_step NB_ISA_NAME(nb_cpu_adam_step)
#define nb_cpu_sgd_step NB_ISA_NAME(nb_cpu_sgd_step)
#define nb_cpu_adam_step_multi NB_ISA_NAME(nb_cpu_adam_step_multi)
#define nb_cpu_sgd_step_multi NB_ISA_NAME(nb_cpu_sgd_step_multi)
#define nb_cpu_layer_norm NB_ISA_NAME(nb_cpu_layer_norm)
#define nb_cpu_layer_norm_backward NB_ISA_NAME(nb_cpu_layer_norm_backward)
#define nb_cpu_rms_norm NB_ISA_NAME(nb_cpu_rms_norm)
#define nb_cpu_rms_norm_backward NB_ISA_NAME(nb_cpu_rms_norm_backward)
#define nb_cpu_attention NB_ISA_NAME(nb_cpu_attention)
#define nb_cpu_attention_backward NB_ISA_NAME(nb_cpu_attention_backward)
#define nb_cpu_unary_math_name NB_ISA_NAME(nb_cpu_unary_math_name)
#define nb_cpu_unary_math_loop NB_ISA_NAME(nb_cpu_unary_math_loop)
#define nb_cpu_unary_math_rule NB_ISA_NAME(nb_cpu_unary_math_rule)

#endif
