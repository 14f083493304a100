/* cpu_kernels.h - the CPU backend's kernels, one per slot of struct
 * nb_backend_i (internal; the vtable in cpu_backend.c points at them).
 * Contracts are those of backend/nb_backend.h; the files that implement
 * them are named beside each group. Supported dtypes (the op table
 * autograd/OPS.md has them per op):
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
 * float16/bfloat16 are storage dtypes: only copy, fill and the
 * element-moving kernels take them.
 * Any other combination returns NB_ERR_DTYPE with a message naming the op.
 */
#ifndef NB_CPU_KERNELS_H
#define NB_CPU_KERNELS_H

#include "nb_backend.h"

/* binary.c, unary.c, cast.c */
nb_status nb_cpu_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src);
nb_status nb_cpu_fill(nb_backend *be, const nb_kview *dst, double value);
nb_status nb_cpu_arange(nb_backend *be, const nb_kview *dst, double start, double step);
nb_status nb_cpu_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                        const nb_kview *b);
nb_status nb_cpu_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x,
                       double alpha);
nb_status nb_cpu_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx,
                                const nb_kview *gy, const nb_kview *x, const nb_kview *y,
                                double alpha);

/* reduce.c */
nb_status nb_cpu_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x,
                        double scale);
nb_status nb_cpu_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim);

/* matmul.c */
nb_status nb_cpu_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                        double alpha, double beta);

/* softmax.c */
nb_status nb_cpu_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log);
nb_status nb_cpu_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *y, int dim, bool log);
nb_status nb_cpu_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse,
                               const nb_kview *logits, const nb_kview *target, int64_t ignore_index);
nb_status nb_cpu_cross_entropy_backward(nb_backend *be, const nb_kview *glogits,
                                        const nb_kview *gloss, const nb_kview *logits,
                                        const nb_kview *lse, const nb_kview *target,
                                        int64_t ignore_index);

/* random.c */
nb_status nb_cpu_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                        uint64_t seed, uint64_t offset, const uint64_t *offset_base);

/* optim.c */
nb_status nb_cpu_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                           const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h);
nb_status nb_cpu_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                          const nb_kview *momentum_buf, const nb_sgd_hyper *h);
nb_status nb_cpu_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                 const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h);
nb_status nb_cpu_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                const nb_kview *momentum_bufs, const nb_sgd_hyper *h);

/* CNN kernels: conv.c, pool.c, batch_norm.c, upsample.c */
nb_status nb_cpu_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w, const nb_kview *bias, const nb_conv_params *p);
nb_status nb_cpu_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w, const nb_conv_params *p);
nb_status nb_cpu_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias, const nb_kview *gy, const nb_kview *x, const nb_conv_params *p);
nb_status nb_cpu_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x, const nb_pool_params *p);
nb_status nb_cpu_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *indices);
nb_status nb_cpu_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p);
nb_status nb_cpu_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_pool_params *p);
nb_status nb_cpu_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x);
nb_status nb_cpu_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy);
nb_status nb_cpu_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x);
nb_status nb_cpu_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean, const nb_kview *save_invstd, const nb_kview *running_mean, const nb_kview *running_var, const nb_kview *x, const nb_kview *weight, const nb_kview *bias, bool training, double momentum, double eps);
nb_status nb_cpu_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight, const nb_kview *gbias, const nb_kview *gy, const nb_kview *x, const nb_kview *weight, const nb_kview *save_mean, const nb_kview *save_invstd, const nb_kview *running_mean, const nb_kview *running_var, bool training, double eps);
nb_status nb_cpu_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear, bool align_corners);
nb_status nb_cpu_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear, bool align_corners);

/* transformer kernels: index.c, layer_norm.c, attention.c */
nb_status nb_cpu_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index);
nb_status nb_cpu_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g, int64_t skip_index);
nb_status nb_cpu_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a, const nb_kview *b);
nb_status nb_cpu_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd, const nb_kview *x, const nb_kview *w, const nb_kview *b, double eps);
nb_status nb_cpu_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gb, const nb_kview *gy, const nb_kview *x, const nb_kview *w, const nb_kview *mean, const nb_kview *rstd);
nb_status nb_cpu_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q, const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale, double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base);
nb_status nb_cpu_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv, const nb_kview *gout, const nb_kview *q, const nb_kview *k, const nb_kview *v, const nb_kview *out, const nb_kview *lse, const nb_kview *mask, bool is_causal, double scale, double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base);

/* op coverage: binary.c (logic). The binary slot's new ops, by dtype:
 *   remainder, fmod, div_trunc, div_floor: f32/f64/i32/i64/u8 (integer
 *     division by zero -> NB_ERR_INVALID_ARG); pow: also i32/i64/u8
 *   atan2: f32/f64; bitwise and/or/xor: integers and bool; shifts: integers
 *   bool: add/maximum (or), mul/minimum (and), comparisons */
/* op coverage: reduce.c, scan.c */
/* dtypes: reduce PROD as reduce (integers into int64 or their own dtype);
 * argmin all six; scan all six (LOGSUMEXP float32/float64); scan_backward
 * float32/float64. */
nb_status nb_cpu_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices,
                        const nb_kview *x, int dim);
nb_status nb_cpu_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                      const nb_kview *x, int dim);
nb_status nb_cpu_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                               const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim);
/* op coverage: sort.c, gather.c */
nb_status nb_cpu_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim, bool descending);
nb_status nb_cpu_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index);
nb_status nb_cpu_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src, nb_scatter_mode mode, bool include_self);
/* op coverage: shape.c, index.c (nonzero, index_copy: all six dtypes) */
nb_status nb_cpu_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x);
nb_status nb_cpu_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src);
/* op coverage: linalg.c */
/* linalg_*: float32/float64 through LAPACKE (loaded by blas.c); the batch runs
 * sequentially and OpenBLAS threads each call (see linalg.c). */
nb_status nb_cpu_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
nb_status nb_cpu_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet, const nb_kview *a);
nb_status nb_cpu_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper);
nb_status nb_cpu_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a);
nb_status nb_cpu_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper);
nb_status nb_cpu_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh, const nb_kview *a);
nb_status nb_cpu_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
/* half.c: bfloat16/float16 arithmetic through float32 copies (the slots
 * below route 16-bit operands here) */
nb_status nb_cpu_unary16(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha);
nb_status nb_cpu_unary_backward16(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *x, const nb_kview *y, double alpha);
nb_status nb_cpu_binary16(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a, const nb_kview *b);
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
nb_status nb_cpu_cross_entropy16(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *logits, const nb_kview *target, int64_t ignore_index);
nb_status nb_cpu_cross_entropy_backward16(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss, const nb_kview *logits, const nb_kview *lse, const nb_kview *target, int64_t ignore_index);
nb_status nb_cpu_attention_dense(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q, const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale, double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base);
nb_status nb_cpu_attention_backward_dense(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv, const nb_kview *gout, const nb_kview *q, const nb_kview *k, const nb_kview *v, const nb_kview *out, const nb_kview *lse, const nb_kview *mask, bool is_causal, double scale, double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base);

/* decoders: rms_norm.c, rope.c (float32/float64) */
nb_status nb_cpu_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                          const nb_kview *w, double eps);
nb_status nb_cpu_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                   const nb_kview *x, const nb_kview *w, const nb_kview *rstd);
nb_status nb_cpu_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                      const nb_kview *sin, bool inverse);

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
