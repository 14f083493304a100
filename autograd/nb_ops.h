/* nb_ops.h - differentiable tensor operations (PyTorch's names and semantics).
 *
 * Every op: returns a new tensor (or a view, where noted) owned as described
 * in nb_core.h; records its backward rule when grad mode is on and an input
 * requires grad; returns NULL with nb_last_error() set on bad input, naming
 * the op and the shapes; returns NULL at once if an input is NULL.
 * Binary ops broadcast as NumPy/PyTorch (align trailing dims; a dim of 1
 * stretches). Inputs must share device and dtype (no implicit promotion yet:
 * NB_ERR_DTYPE). Float ops take f32 and f64; add/sub/mul and comparisons also
 * take integer dtypes. Each op's backward rule lives next to its forward in
 * autograd/ops_<family>.c; its gradcheck test in tests/test_ops_<family>.c.
 */
#ifndef NB_OPS_H
#define NB_OPS_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise (autograd/ops_elementwise.c) --------------------------- */

nb_tensor *nb_add(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_div(nb_tensor *a, nb_tensor *b);
/* a ** b elementwise; gradient w.r.t. b is a**b * log(a) (defined for a > 0). */
nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_add_scalar(nb_tensor *a, double s);
nb_tensor *nb_mul_scalar(nb_tensor *a, double s);
nb_tensor *nb_pow_scalar(nb_tensor *a, double exponent);
nb_tensor *nb_neg(nb_tensor *a);
nb_tensor *nb_exp(nb_tensor *a);
nb_tensor *nb_log(nb_tensor *a);
nb_tensor *nb_sqrt(nb_tensor *a);
nb_tensor *nb_relu(nb_tensor *a);    /* gradient at 0 is 0, as PyTorch */
nb_tensor *nb_sigmoid(nb_tensor *a);
nb_tensor *nb_tanh(nb_tensor *a);

/* Comparisons (not differentiable): bool tensors of the broadcast shape. */
nb_tensor *nb_eq(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_ne(nb_tensor *a, nb_tensor *b);
nb_tensor *nb_gt(nb_tensor *a, nb_tensor *b);

/* ---- matmul (autograd/ops_matmul.c) ------------------------------------ */

/* torch.matmul: 1-D x 1-D dot; 2-D x 2-D [n,k]x[k,m]; batched [..., n, k] x
 * [..., k, m] with the batch dims broadcast; a 1-D operand gets a dim of 1
 * prepended (left) or appended (right), removed from the result. f32/f64,
 * through the backend's GEMM (OpenBLAS sgemm/dgemm on the CPU). */
nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b);
/* x [..., in] @ weight[out, in]^T + bias[out] (bias may be NULL): F.linear. */
nb_tensor *nb_linear_fn(nb_tensor *x, nb_tensor *weight, nb_tensor *bias);

/* ---- reductions (autograd/ops_reduce.c) ---------------------------------- */

/* dims: n_dims dims to reduce (negative counts from the end); dims NULL or
 * n_dims 0 reduces over all. keepdim keeps reduced dims as size 1.
 * Float sums accumulate in the element type in a fixed order (deterministic
 * whatever the thread count). */
nb_tensor *nb_sum(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
nb_tensor *nb_mean(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
/* torch.amax: gradient shared evenly among tied maxima. */
nb_tensor *nb_max(nb_tensor *t, const int *dims, int n_dims, bool keepdim);
/* torch.max(t, dim): values, and if indices != NULL the int64 argmax (first
 * maximum) into *indices (owned like any op result). Gradient flows to that index. */
nb_tensor *nb_max_dim(nb_tensor *t, int dim, bool keepdim, nb_tensor **indices);
/* int64 index of the first maximum along dim (not differentiable). */
nb_tensor *nb_argmax(nb_tensor *t, int dim, bool keepdim);

/* ---- views and shape (autograd/ops_view.c) ------------------------------ */

/* Views share storage with their input; writes through one show in the other.
 * reshape returns a view when the strides allow and a copy otherwise; view
 * fails (NB_ERR_SHAPE) where a copy would be needed. One size may be -1. */
nb_tensor *nb_reshape(nb_tensor *t, int ndim, const int64_t *shape);
nb_tensor *nb_view(nb_tensor *t, int ndim, const int64_t *shape);
nb_tensor *nb_permute(nb_tensor *t, const int *dims); /* nb_dim(t) entries */
nb_tensor *nb_transpose(nb_tensor *t, int dim0, int dim1);
/* Elements start..start+length-1 of dim (torch.narrow). */
nb_tensor *nb_narrow(nb_tensor *t, int dim, int64_t start, int64_t length);
/* Python's t[..., start:end:step, ...] on one dim; step >= 1; start/end are
 * clamped like Python slices (negative counts from the end). */
nb_tensor *nb_slice(nb_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Broadcast view to shape (-1 keeps a size); new leading dims allowed. */
nb_tensor *nb_expand(nb_tensor *t, int ndim, const int64_t *shape);
nb_tensor *nb_unsqueeze(nb_tensor *t, int dim);
/* Removes dim if its size is 1 (else returns a view unchanged, as PyTorch). */
nb_tensor *nb_squeeze(nb_tensor *t, int dim);
/* A contiguous tensor with t's values (t itself, with a new reference, if
 * already contiguous). */
nb_tensor *nb_contiguous(nb_tensor *t);
/* Merges dims start..end (inclusive; negative counts from the end). */
nb_tensor *nb_flatten(nb_tensor *t, int start_dim, int end_dim);

/* ---- softmax and losses (autograd/ops_loss.c) -------------------------- */

/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along dim. */
nb_tensor *nb_softmax(nb_tensor *t, int dim);
nb_tensor *nb_log_softmax(nb_tensor *t, int dim);

typedef enum nb_reduction { NB_REDUCTION_MEAN = 0, NB_REDUCTION_SUM, NB_REDUCTION_NONE } nb_reduction;

typedef struct nb_cross_entropy_options {
    int64_t ignore_index;   /* targets equal to it add nothing (default -100) */
    nb_reduction reduction; /* mean over non-ignored targets (default), sum, none */
} nb_cross_entropy_options;
#define NB_CROSS_ENTROPY_DEFAULTS ((nb_cross_entropy_options){.ignore_index = -100, .reduction = NB_REDUCTION_MEAN})

/* F.cross_entropy with class indices: logits [N, C] (f32/f64), target [N]
 * int64 in [0, C) or ignore_index. Fused log-softmax + NLL: the forward
 * saves the log-sum-exp per row, and the backward is softmax - onehot.
 * Errors: NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_INVALID_ARG (a target out of
 * range, found by the kernel). Mean over zero non-ignored targets is NaN, as
 * PyTorch. */
nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target);
nb_tensor *nb_cross_entropy_ex(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_options opts);
/* F.mse_loss: mean (or sum, none) of (input - target)^2; same shapes or broadcastable. */
nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);

#ifdef __cplusplus
}
#endif
#endif
