// cuda_kernels.h - the kernel slots of the CUDA backend, one group per
// file of backend/cuda (internal). NB_CUDA_SET_KERNEL_SLOTS fills them into
// the vtable (cuda_backend.cu); their contracts are nb_backend.h's.
#pragma once

#include "nb_backend_util.h"

extern "C" {
// copy.cu
nb_status nb_cuda_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src);
// The copy for other slots' own use (no profiler row of its own).
nb_status nb_cuda_copy_into(nb_backend *be, const nb_kview *dst, const nb_kview *src);
nb_status nb_cuda_fill(nb_backend *be, const nb_kview *dst, double value);
nb_status nb_cuda_arange(nb_backend *be, const nb_kview *dst, double start, double step);
// matmul.cu
nb_status nb_cuda_matmul(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, double alpha,
                         double beta);
nb_status nb_cuda_addmm(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b, const nb_kview *bias);
nb_status nb_cuda_matmul_bgrad(nb_backend *be, const nb_kview *c, const nb_kview *a, const nb_kview *b,
                               const nb_kview *asum);
// attention.cu
nb_status nb_cuda_attention(nb_backend *be, const nb_kview *out, const nb_kview *lse, const nb_kview *q,
                            const nb_kview *k, const nb_kview *v, const nb_kview *mask, bool is_causal, double scale,
                            double dropout_p, uint64_t seed, uint64_t offset, const uint64_t *offset_base);
nb_status nb_cuda_attention_backward(nb_backend *be, const nb_kview *gq, const nb_kview *gk, const nb_kview *gv,
                                     const nb_kview *gout, const nb_kview *q, const nb_kview *k, const nb_kview *v,
                                     const nb_kview *out, const nb_kview *lse, const nb_kview *mask, bool is_causal,
                                     double scale, double dropout_p, uint64_t seed, uint64_t offset,
                                     const uint64_t *offset_base);
// linalg.cu
nb_status nb_cuda_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
nb_status nb_cuda_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet,
                             const nb_kview *a);
nb_status nb_cuda_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper);
nb_status nb_cuda_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b);
// linalg_decomp.cu
nb_status nb_cuda_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a);
nb_status nb_cuda_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper);
nb_status nb_cuda_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh,
                             const nb_kview *a);
// conv.cu
nb_status nb_cuda_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                         const nb_kview *bias, const nb_conv_params *p);
nb_status nb_cuda_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *w,
                                        const nb_conv_params *p);
nb_status nb_cuda_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                         const nb_kview *gy, const nb_kview *x, const nb_conv_params *p);
// pool.cu
nb_status nb_cuda_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x,
                             const nb_pool_params *p);
nb_status nb_cuda_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                      const nb_kview *indices);
nb_status nb_cuda_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p);
nb_status nb_cuda_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                      const nb_pool_params *p);
nb_status nb_cuda_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x);
nb_status nb_cuda_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy);
nb_status nb_cuda_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                      const nb_kview *x);
// batch_norm.cu
nb_status nb_cuda_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean,
                             const nb_kview *save_invstd, const nb_kview *running_mean, const nb_kview *running_var,
                             const nb_kview *x, const nb_kview *weight, const nb_kview *bias, bool training,
                             double momentum, double eps);
nb_status nb_cuda_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight,
                                      const nb_kview *gbias, const nb_kview *gy, const nb_kview *x,
                                      const nb_kview *weight, const nb_kview *save_mean, const nb_kview *save_invstd,
                                      const nb_kview *running_mean, const nb_kview *running_var, bool training,
                                      double eps);
// upsample.cu
nb_status nb_cuda_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear,
                             bool align_corners);
nb_status nb_cuda_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear,
                                      bool align_corners);
// layer_norm.cu
nb_status nb_cuda_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd,
                             const nb_kview *x, const nb_kview *w, const nb_kview *b, double eps);
nb_status nb_cuda_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gb,
                                      const nb_kview *gy, const nb_kview *x, const nb_kview *w, const nb_kview *mean,
                                      const nb_kview *rstd);
// unary.cu
nb_status nb_cuda_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha);
nb_status nb_cuda_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                 const nb_kview *x, const nb_kview *y, double alpha);
// binary.cu
nb_status nb_cuda_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a,
                         const nb_kview *b);
// random.cu
nb_status nb_cuda_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b, uint64_t seed,
                         uint64_t offset, const uint64_t *offset_base);
nb_status nb_cuda_dropout(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x, double p,
                          uint64_t seed, uint64_t offset, const uint64_t *offset_base);
// optim.cu
nb_status nb_cuda_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad, const nb_kview *exp_avg,
                            const nb_kview *exp_avg_sq, const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h);
nb_status nb_cuda_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                           const nb_kview *momentum_buf, const nb_sgd_hyper *h);
nb_status nb_cuda_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                  const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                  const nb_kview *max_exp_avg_sqs, const nb_adam_hyper *h);
nb_status nb_cuda_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                 const nb_kview *momentum_bufs, const nb_sgd_hyper *h);
// rms_norm.cu (decoders)
nb_status nb_cuda_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                           const nb_kview *w, double eps);
nb_status nb_cuda_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                    const nb_kview *x, const nb_kview *w, const nb_kview *rstd);
nb_status nb_cuda_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                       const nb_kview *sin, bool inverse);
// foreach.cu
nb_status nb_cuda_norm_multi(nb_backend *be, int n, const nb_kview *xs, double p, const nb_kview *out);
nb_status nb_cuda_mul_multi(nb_backend *be, int n, const nb_kview *xs, const nb_kview *s);
nb_status nb_cuda_cast_multi(nb_backend *be, int n, const nb_kview *dst, const nb_kview *src);
// reduce.cu
nb_status nb_cuda_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x, double scale);
nb_status nb_cuda_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim);
nb_status nb_cuda_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim);
// scan.cu
nb_status nb_cuda_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                       const nb_kview *x, int dim);
nb_status nb_cuda_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                                const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim);
// sort.cu
nb_status nb_cuda_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                       bool descending);
// gather.cu
nb_status nb_cuda_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, const nb_kview *index);
nb_status nb_cuda_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                          nb_scatter_mode mode, bool include_self);
// index.cu
nb_status nb_cuda_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                               const nb_kview *index);
nb_status nb_cuda_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index, const nb_kview *g,
                            int64_t skip_index);
nb_status nb_cuda_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                             const nb_kview *src);
nb_status nb_cuda_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                        const nb_kview *b);
nb_status nb_cuda_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x);
// softmax.cu
nb_status nb_cuda_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log);
nb_status nb_cuda_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *y, int dim,
                                   bool log);
// loss.cu
nb_status nb_cuda_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *logits,
                                const nb_kview *target, int64_t ignore_index);
nb_status nb_cuda_cross_entropy_backward(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                         const nb_kview *logits, const nb_kview *lse, const nb_kview *target,
                                         int64_t ignore_index);
}

#define NB_CUDA_SET_KERNEL_SLOTS(i) \
    do {                            \
        (i)->copy = nb_cuda_copy;   \
        (i)->fill = nb_cuda_fill;   \
        (i)->arange = nb_cuda_arange; \
        (i)->matmul = nb_cuda_matmul; \
        (i)->addmm = nb_cuda_addmm;   \
        (i)->matmul_bgrad = nb_cuda_matmul_bgrad; \
        (i)->attention = nb_cuda_attention; \
        (i)->attention_backward = nb_cuda_attention_backward; \
        (i)->linalg_solve = nb_cuda_linalg_solve; \
        (i)->linalg_det = nb_cuda_linalg_det; \
        (i)->linalg_cholesky = nb_cuda_linalg_cholesky; \
        (i)->linalg_lstsq = nb_cuda_linalg_lstsq; \
        (i)->linalg_qr = nb_cuda_linalg_qr; \
        (i)->linalg_eigh = nb_cuda_linalg_eigh; \
        (i)->linalg_svd = nb_cuda_linalg_svd; \
        (i)->unary = nb_cuda_unary; \
        (i)->unary_backward = nb_cuda_unary_backward; \
        (i)->binary = nb_cuda_binary; \
        (i)->random = nb_cuda_random; \
        (i)->adam_step = nb_cuda_adam_step; \
        (i)->sgd_step = nb_cuda_sgd_step; \
        (i)->adam_step_multi = nb_cuda_adam_step_multi; \
        (i)->sgd_step_multi = nb_cuda_sgd_step_multi; \
        (i)->norm_multi = nb_cuda_norm_multi; \
        (i)->rms_norm = nb_cuda_rms_norm; \
        (i)->rms_norm_backward = nb_cuda_rms_norm_backward; \
        (i)->rope = nb_cuda_rope; \
        (i)->mul_multi = nb_cuda_mul_multi; \
        (i)->cast_multi = nb_cuda_cast_multi; \
        (i)->dropout = nb_cuda_dropout; \
        NB_CUDA_SET_CNN_SLOTS(i);     \
        NB_CUDA_SET_REDUCE_SLOTS(i);  \
    } while (0)

// conv.cu, pool.cu, batch_norm.cu, upsample.cu, layer_norm.cu
#define NB_CUDA_SET_CNN_SLOTS(i)                                                \
    do {                                                                        \
        (i)->conv2d = nb_cuda_conv2d;                                           \
        (i)->conv2d_backward_input = nb_cuda_conv2d_backward_input;             \
        (i)->conv2d_backward_weight = nb_cuda_conv2d_backward_weight;           \
        (i)->max_pool2d = nb_cuda_max_pool2d;                                   \
        (i)->max_pool2d_backward = nb_cuda_max_pool2d_backward;                 \
        (i)->avg_pool2d = nb_cuda_avg_pool2d;                                   \
        (i)->avg_pool2d_backward = nb_cuda_avg_pool2d_backward;                 \
        (i)->adaptive_avg_pool2d = nb_cuda_adaptive_avg_pool2d;                 \
        (i)->adaptive_avg_pool2d_backward = nb_cuda_adaptive_avg_pool2d_backward; \
        (i)->adaptive_max_pool2d = nb_cuda_adaptive_max_pool2d;                 \
        (i)->batch_norm = nb_cuda_batch_norm;                                   \
        (i)->batch_norm_backward = nb_cuda_batch_norm_backward;                 \
        (i)->upsample2d = nb_cuda_upsample2d;                                   \
        (i)->upsample2d_backward = nb_cuda_upsample2d_backward;                 \
        (i)->layer_norm = nb_cuda_layer_norm;                                   \
        (i)->layer_norm_backward = nb_cuda_layer_norm_backward;                 \
    } while (0)

// reduce.cu, scan.cu, sort.cu, gather.cu, index.cu, softmax.cu, loss.cu
#define NB_CUDA_SET_REDUCE_SLOTS(i)                                 \
    do {                                                            \
        (i)->reduce = nb_cuda_reduce;                               \
        (i)->argmax = nb_cuda_argmax;                               \
        (i)->argmin = nb_cuda_argmin;                               \
        (i)->scan = nb_cuda_scan;                                   \
        (i)->scan_backward = nb_cuda_scan_backward;                 \
        (i)->sort = nb_cuda_sort;                                   \
        (i)->gather = nb_cuda_gather;                               \
        (i)->scatter = nb_cuda_scatter;                             \
        (i)->index_select = nb_cuda_index_select;                   \
        (i)->index_add = nb_cuda_index_add;                         \
        (i)->index_copy = nb_cuda_index_copy;                       \
        (i)->where = nb_cuda_where;                                 \
        (i)->nonzero = nb_cuda_nonzero;                             \
        (i)->softmax = nb_cuda_softmax;                             \
        (i)->softmax_backward = nb_cuda_softmax_backward;           \
        (i)->cross_entropy = nb_cuda_cross_entropy;                 \
        (i)->cross_entropy_backward = nb_cuda_cross_entropy_backward; \
    } while (0)
