/* cpu_common.h - the CPU backend's kernels and the helpers its files share
 * (internal). The kernels' declarations are generated from the slot list
 * (backend/nb_slots.def: its `cpu` column), whose contracts they meet:
 * nb_cpu_<slot> in backend/cpu/<family>.c; cpu_backend.c and isa_table.c
 * put them in the vtable. Supported dtypes (the op table autograd/OPS.md
 * has them per op):
 *   copy, fill: all eight (casts; bool is != 0; float16/bfloat16 round to
 *           nearest even)
 *   binary: float32/float64 all ops; integers arithmetic, remainder/fmod,
 *           rounding division, bitwise ops and shifts; comparisons on the
 *           six computing dtypes
 *   unary: float32/float64 all ops; integers neg, abs, sign, the rounding
 *           ops, add/mul scalar
 *   unary_backward, softmax*, cross_entropy*, random (uniform, normal),
 *   adam/sgd, conv/pool/norm, matmul (OpenBLAS), linalg (LAPACKE),
 *   layer_norm*, attention*, rms_norm*, rope: float32/float64
 *   index_add: float32/float64, int32/int64/uint8 (wrapping)
 *   reduce, argmax/argmin, scan, sort, scatter: the six computing dtypes
 *   index_select, index_copy, where, gather, nonzero: every dtype (they
 *           move elements)
 * float16/bfloat16: copy, fill and the element-moving kernels take them as
 * they are; unary, unary_backward and binary run their float32 loops chunk
 * by chunk (iter16.c); the other computing slots that take them (reduce,
 * matmul, conv, pooling, cross_entropy, random's bernoulli, attention) run
 * on float32 copies through half.c's adapters.
 * Any other combination returns NB_ERR_DTYPE with a message naming the op.
 */
#ifndef NB_CPU_COMMON_H
#define NB_CPU_COMMON_H

#include "nb_backend_impl.h"

/* Token pasting through one expansion: NB_CPU_CAT(row_max_, S) is
 * row_max_f32 when S is f32 (the included templates, *.t.h). */
#define NB_CPU_CAT2(a, b) a##b
#define NB_CPU_CAT(a, b) NB_CPU_CAT2(a, b)

/* The kernels compiled once per instruction-set level (cpu column ISA;
 * isa.h) are built with -DNB_ISA_SUFFIX=_<level>: their declarations give
 * each copy its level's symbol (nb_cpu_copy_avx2) by an asm label, so the
 * copies link side by side and each level's isa_table.c names its own.
 * Files outside those levels see no declaration of them (they go through
 * nb_cpu_isa_kernels_get()). NB_ISA_SYMBOL labels the few other external
 * symbols of those files. */
#ifdef NB_ISA_SUFFIX
#define NB_ISA_STR_(x) #x
#define NB_ISA_STR(x) NB_ISA_STR_(x)
#define NB_ISA_SYMBOL(name) __asm__(#name NB_ISA_STR(NB_ISA_SUFFIX))
#define NB_CPU_DECL_ISA(slot) nb_status nb_cpu_##slot NB_SLOT_PARAMS(slot) NB_ISA_SYMBOL(nb_cpu_##slot);
#else
#define NB_ISA_SYMBOL(name)
#define NB_CPU_DECL_ISA(slot)
#endif
#define NB_CPU_DECL_1(slot) nb_status nb_cpu_##slot NB_SLOT_PARAMS(slot);
#define NB_CPU_DECL_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CPU_DECL_##cpu(slot)
#include "nb_slots.def"
#undef NB_SLOT

/* half.c: bfloat16/float16 arithmetic through float32 copies (the slots
 * below route 16-bit operands here) */
nb_status nb_cpu_matmul16(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                          double beta);
/* conv2d and pooling slots with 16-bit views (the float32 slots route them
 * here): float32 copies, results rounded back; errors as the float32 slots'. */
nb_status nb_cpu_conv2d16(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                          const nb_kview *bias, const nb_conv_params *p);
nb_status nb_cpu_conv2d_backward_input16(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w,
                                         const nb_conv_params *p);
nb_status nb_cpu_conv2d_backward_weight16(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                          const nb_kview *gy, const nb_kview *x, const nb_conv_params *p);
typedef enum nb_cpu_pool_kind {
    NB_CPU_POOL_MAX, NB_CPU_POOL_MAX_BACKWARD, NB_CPU_POOL_AVG, NB_CPU_POOL_AVG_BACKWARD,
    NB_CPU_POOL_ADAPTIVE_AVG, NB_CPU_POOL_ADAPTIVE_AVG_BACKWARD, NB_CPU_POOL_ADAPTIVE_MAX
} nb_cpu_pool_kind;
nb_status nb_cpu_pool16(nb_backend *be, nb_cpu_pool_kind kind, const nb_kview *dst, const nb_kview *src,
                        const nb_kview *indices, const nb_pool_params *p);
nb_status nb_cpu_reduce16(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale);
/* q, k, v, out (and gradients) that are 16-bit, 4-d [B1, B2, R, C] or
 * strided views run the attention kernels on dense [B, R, C] copies */
bool nb_cpu_attention_views_dense(const nb_kview *const *v, int n);
nb_status nb_cpu_bernoulli16(nb_backend *be, const nb_kview *dst, double p, uint64_t seed, uint64_t offset);
nb_status nb_cpu_cross_entropy16(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *valid, const nb_kview *logits, const nb_kview *target, int64_t ignore_index);
nb_status nb_cpu_cross_entropy_backward16(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss, const nb_kview *logits, const nb_kview *lse, const nb_kview *target, int64_t ignore_index);
nb_status nb_cpu_attention_dense(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_attention_args *a);
nb_status nb_cpu_attention_backward_dense(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                          const nb_kview *gout, const nb_kview *out, const nb_kview *lse,
                                          const nb_attention_args *a);

/* How BLAS reads a rows x cols matrix with element strides (sr, sc)
 * (matmul.c, also used by half.c's bf16 GEMM). */
typedef struct nb_cpu_mat_layout {
    int trans;  /* NB_CBLAS_NO_TRANS or NB_CBLAS_TRANS */
    int ld;
    bool copy;  /* no BLAS layout fits: pass a contiguous copy */
} nb_cpu_mat_layout;
nb_cpu_mat_layout nb_cpu_layout_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc);
/* Element offset of batch i in view v (batch dims are all but the last two). */
int64_t nb_cpu_batch_offset(const nb_kview *v, int64_t i);

#endif
