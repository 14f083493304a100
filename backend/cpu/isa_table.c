/* isa_table.c - one instruction-set level's table of kernels (isa.h),
 * compiled once per level (-DNB_ISA_SUFFIX=_<level>): the table is
 * nb_cpu_isa_kernels_<level>, and every nb_cpu_<slot> it names is that
 * level's copy (cpu_common.h's asm labels). */
#include "isa.h"

#define NB_ISA_CAT_(a, b) a##b
#define NB_ISA_CAT(a, b) NB_ISA_CAT_(a, b)

#define NB_CPU_ISA_INIT_ISA(slot) .slot = nb_cpu_##slot,
#define NB_CPU_ISA_INIT_1(slot)
#define NB_CPU_ISA_INIT_0(slot)
const nb_cpu_isa_kernels NB_ISA_CAT(nb_cpu_isa_kernels, NB_ISA_SUFFIX) = {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CPU_ISA_INIT_##cpu(slot)
#include "nb_slots.def"
#undef NB_SLOT
};
