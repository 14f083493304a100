/* isa_table.c - one instruction-set level's table of kernels (isa.h),
 * compiled once per level: isa_rename.h turns nb_cpu_isa_kernels into
 * nb_cpu_isa_kernels_avx2 and every nb_cpu_<slot> into that level's copy. */
#include "isa.h"

#define NB_CPU_ISA_INIT(s) .s = nb_cpu_##s,
const nb_cpu_isa_kernels NB_ISA_NAME(nb_cpu_isa_kernels) = {NB_CPU_ISA_SLOTS(NB_CPU_ISA_INIT)};
