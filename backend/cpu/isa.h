/* isa.h - run-time choice of the instruction set of the CPU backend's
 * elementwise, reduction, softmax, cross-entropy, norm, random, optimizer,
 * attention and cast kernels (internal).
 *
 * The files of those kernels (backend/cpu/meson.build: isa_src) are
 * compiled once per level below, each copy with its own flags and with its
 * external symbols given the level's suffix (nb_cpu_unary ->
 * nb_cpu_unary_avx512: the asm labels of cpu_common.h's declarations), and
 * each copy defines a table of its slots (isa_table.c): the slots whose
 * cpu column in backend/nb_slots.def is ISA. At start-up
 * (the first nb_cpu_isa_get) the widest level the CPU and the OS support is
 * chosen from cpuid, or the level named by NB_CPU_ISA (baseline, avx2,
 * avx512) if the CPU has it; the CPU backend's vtable points at that
 * level's table. The same source runs at every level: loops the compiler
 * vectorises get the level's vector width, and the hand-vectorised ones
 * (GCC vector extensions, unary_loops.h) take NB_VLEN lanes.
 *
 * Determinism: results depend only on the inputs and the thread count,
 * and not on the level: floating-point contraction stays off (ISO C mode),
 * the auto-vectorised loops keep the source's order of operations, and the
 * hand-vectorised reductions fix their lanes independently of the width
 * (reduce.c's 8 lanes, layer_norm's 8 double lanes, nb_vmax's 16 and
 * nb_vsum_exp's 8 in unary_loops.h). So every level gives the baseline's
 * bits, except for the sign and payload of NaN results (which NaN operand
 * an instruction passes on depends on operand order, which the vectoriser
 * may swap). tests/test_cpu_isa.c checks this for every slot below.
 */
#ifndef NB_CPU_ISA_H
#define NB_CPU_ISA_H

#include <stdbool.h>

#include "cpu_common.h"

#if defined(__x86_64__) && defined(__GNUC__) /* meson.build builds the AVX levels on x86_64 */
#define NB_CPU_ISA_X86 1
#endif

typedef enum nb_cpu_isa {
    NB_CPU_ISA_BASELINE, /* the target's baseline (x86-64: SSE2, 4 float lanes) */
    NB_CPU_ISA_AVX2,     /* x86-64-v3: AVX2, FMA, F16C, BMI2 (8 float lanes) */
    NB_CPU_ISA_AVX512,   /* x86-64-v4: AVX-512 F/BW/CD/DQ/VL (16 float lanes) */
    NB_CPU_ISA_COUNT
} nb_cpu_isa;

/* One level's kernels: the slots whose cpu column in nb_slots.def is ISA
 * (defined by isa_table.c, once per level). */
#define NB_CPU_ISA_FIELD_ISA(slot) nb_status(*slot) NB_SLOT_PARAMS(slot);
#define NB_CPU_ISA_FIELD_1(slot)
#define NB_CPU_ISA_FIELD_0(slot)
typedef struct nb_cpu_isa_kernels {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CPU_ISA_FIELD_##cpu(slot)
#include "nb_slots.def"
#undef NB_SLOT
} nb_cpu_isa_kernels;

extern const nb_cpu_isa_kernels nb_cpu_isa_kernels_baseline;
#if defined(NB_CPU_ISA_X86)
extern const nb_cpu_isa_kernels nb_cpu_isa_kernels_avx2, nb_cpu_isa_kernels_avx512;
#endif

/* The level in use: chosen on the first call (cpuid, then NB_CPU_ISA), thread-safe. */
nb_cpu_isa nb_cpu_isa_get(void);
/* The widest level this CPU, its OS and this build support. */
nb_cpu_isa nb_cpu_isa_max(void);
/* "baseline", "avx2", "avx512"; "?" for a bad value. */
const char *nb_cpu_isa_name(nb_cpu_isa isa);
/* The kernels of the level in use (never NULL). */
const nb_cpu_isa_kernels *nb_cpu_isa_kernels_get(void);
/* Switches the level in use (tests compare the levels in one process):
 * NB_ERR_UNSUPPORTED above nb_cpu_isa_max(), NB_ERR_INVALID_ARG for a bad
 * value. Not safe while kernels run on other threads. */
nb_status nb_cpu_isa_select(nb_cpu_isa isa);
/* One line for nb_backend_info(NB_CPU): "isa=avx512 (widest avx512; cpu avx512_bf16 amx_bf16;
 * NB_CPU_ISA=...)". Static storage, rebuilt on nb_cpu_isa_select. */
const char *nb_cpu_isa_info(void);

/* cpu_backend.c: points the CPU backend's vtable at k's slots. */
void nb_cpu_backend_use_kernels(const nb_cpu_isa_kernels *k);

#endif
