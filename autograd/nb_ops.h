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
 * Sums run in a fixed order (deterministic whatever the thread count); the
 * CPU backend accumulates float32 in double. */
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

/* ---- convolution (autograd/ops_conv.c; kernels backend/cpu/conv.c) ---------
 * NCHW (NCL for 1-d). Shapes: x [N, Cin, H, W], weight [Cout, Cin/groups,
 * kh, kw], bias [Cout] or NULL; Cin and Cout divisible by groups. Output
 * H_out = floor((H + 2*pad - dilation*(kh-1) - 1) / stride) + 1 (PyTorch's
 * Conv2d doc). CPU: 3x3 stride-1 undilated kernels with >= 8 channels per
 * group use Winograd F(2x2, 3x3) (Lavin & Gray 2016); the rest im2col +
 * OpenBLAS GEMM; threaded over the batch, deterministic. */
typedef struct nb_conv2d_options {
    int64_t stride[2];   /* default 1 (0 means default) */
    int64_t padding[2];  /* default 0 */
    int64_t dilation[2]; /* default 1 (0 means default) */
    int64_t groups;      /* default 1 (0 means default) */
    bool padding_same;   /* padding='same' (stride must be 1): output size = input size */
} nb_conv2d_options;
typedef struct nb_conv1d_options {
    int64_t stride, padding, dilation, groups; /* as above; 0 = default */
    bool padding_same;
} nb_conv1d_options;
typedef struct nb_conv_transpose2d_options {
    int64_t stride[2], padding[2], output_padding[2], dilation[2], groups; /* 0 = default */
} nb_conv_transpose2d_options;

nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_options opts);
/* x [N, Cin, L], weight [Cout, Cin/groups, k]. */
nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv1d_options opts);
/* F.conv_transpose2d: weight [Cin, Cout/groups, kh, kw]; H_out = (H-1)*stride
 * - 2*pad + dilation*(kh-1) + output_padding + 1. */
nb_tensor *nb_conv_transpose2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias,
                               nb_conv_transpose2d_options opts);

/* ---- pooling (autograd/ops_pool.c; kernels backend/cpu/pooling.c) ----------
 * x [N, C, H, W] or [C, H, W] (1-d: [N, C, L] or [C, L]). Output sizes as
 * PyTorch's MaxPool2d/AvgPool2d docs; padding <= kernel/2. */
typedef struct nb_pool2d_options {
    int64_t kernel[2];
    int64_t stride[2];   /* 0 = kernel (PyTorch's default stride=None) */
    int64_t padding[2];
    int64_t dilation[2]; /* max pool only; 0 = 1 */
    bool ceil_mode;
    bool count_include_pad_false; /* avg pool: PyTorch's count_include_pad=False */
    int64_t divisor_override;     /* avg pool: 0 = none */
} nb_pool2d_options;
typedef struct nb_pool1d_options {
    int64_t kernel, stride, padding, dilation; /* stride 0 = kernel; dilation 0 = 1 */
    bool ceil_mode;
    bool count_include_pad_false;
} nb_pool1d_options;

/* Max pooling; if indices != NULL, *indices gets the int64 flat positions
 * (h*W + w within each plane; PyTorch's return_indices), owned like any op result. */
nb_tensor *nb_max_pool2d(nb_tensor *x, nb_pool2d_options opts, nb_tensor **indices);
nb_tensor *nb_max_pool1d(nb_tensor *x, nb_pool1d_options opts, nb_tensor **indices);
nb_tensor *nb_avg_pool2d(nb_tensor *x, nb_pool2d_options opts);
nb_tensor *nb_avg_pool1d(nb_tensor *x, nb_pool1d_options opts);
/* Adaptive pooling to an output size (PyTorch's index rule: start =
 * floor(i*in/out), end = ceil((i+1)*in/out)). */
nb_tensor *nb_adaptive_avg_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w);
nb_tensor *nb_adaptive_avg_pool1d(nb_tensor *x, int64_t out_l);
nb_tensor *nb_adaptive_max_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w, nb_tensor **indices);

/* ---- normalisation, dropout, resizing (autograd/ops_norm.c, ops_upsample.c) */

/* F.batch_norm on x [N, C] or [N, C, *]: training uses batch statistics
 * (biased variance to normalise) and, when running_mean/running_var are
 * given, updates them in place: r = (1 - momentum) * r + momentum * stat,
 * with the unbiased variance (PyTorch's BatchNorm doc; momentum 0.1,
 * eps 1e-5 are the module defaults). eval (training false) uses the running
 * statistics. weight/bias [C] may be NULL. Gradients flow to x, weight, bias. */
nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *weight,
                         nb_tensor *bias, bool training, double momentum, double eps);
/* F.dropout: in training, zeroes each element with probability p (Bernoulli
 * from gen, NULL = default generator) and scales the rest by 1/(1-p)
 * (inverted dropout); identity (a new reference) when !training or p == 0.
 * Errors: p outside [0, 1]. */
nb_tensor *nb_dropout(nb_tensor *x, double p, bool training, nb_generator *gen);

typedef enum nb_interpolate_mode { NB_INTERPOLATE_NEAREST, NB_INTERPOLATE_BILINEAR } nb_interpolate_mode;
/* F.interpolate on x [N, C, H, W] to size [out_h, out_w]; align_corners for
 * bilinear only (as PyTorch; nearest is PyTorch's legacy 'nearest'). */
nb_tensor *nb_interpolate(nb_tensor *x, int64_t out_h, int64_t out_w, nb_interpolate_mode mode,
                          bool align_corners);

/* ---- indexing and joining (autograd/ops_index.c; kernels backend/cpu/index.c) */

/* Marks "no padding_idx" for nb_embedding. */
#define NB_NO_PADDING_IDX INT64_MIN
/* F.embedding: rows of weight [V, D] picked by int64 indices of any shape
 * -> [*indices.shape, D]. The gradient of weight accumulates the rows of g
 * per index in a fixed order (deterministic, no atomics); the padding_idx
 * row (negative counts from V) gets no gradient. Errors: an index outside
 * [0, V) -> NB_ERR_INVALID_ARG naming it. */
nb_tensor *nb_embedding(nb_tensor *indices, nb_tensor *weight, int64_t padding_idx);
/* torch.index_select: t's slices along dim picked by a 1-D int64 index. */
nb_tensor *nb_index_select(nb_tensor *t, int dim, nb_tensor *index);
/* torch.cat of n tensors (same shape but along dim) along dim. */
nb_tensor *nb_cat(nb_tensor *const *ts, int n, int dim);
/* torch.stack: n tensors of one shape joined along a new dim. */
nb_tensor *nb_stack(nb_tensor *const *ts, int n, int dim);
/* torch.split / torch.chunk: views along dim (the last piece may be
 * smaller). Writes up to cap pieces to out (owned like op results) and
 * returns the number of pieces, or -1 on error. */
int nb_split(nb_tensor *t, int64_t split_size, int dim, nb_tensor **out, int cap);
int nb_chunk(nb_tensor *t, int chunks, int dim, nb_tensor **out, int cap);
/* torch.where(cond, a, b): cond bool; the three broadcast together;
 * gradients flow to a and b. */
nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b);
/* Tensor.masked_fill: value where mask (bool, broadcastable to t) is true. */
nb_tensor *nb_masked_fill(nb_tensor *t, nb_tensor *mask, double value);
/* torch.bmm: [B, n, k] x [B, k, m] -> [B, n, m] (no broadcasting). */
nb_tensor *nb_bmm(nb_tensor *a, nb_tensor *b);

/* ---- transformer ops (autograd/ops_nlp.c, ops_attention.c) ---------------- */

/* F.layer_norm over the last n_norm dims of x (their sizes are
 * normalized_shape); weight/bias of normalized_shape or NULL. Fused kernels;
 * the forward saves mean and rstd (Ba, Kiros, Hinton 2016; PyTorch's doc). */
nb_tensor *nb_layer_norm(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                         nb_tensor *bias, double eps);
typedef enum nb_gelu_approximate { NB_GELU_ERF = 0, NB_GELU_TANH } nb_gelu_approximate;
/* F.gelu: x * Phi(x) (exact, erf) or the tanh approximation (Hendrycks &
 * Gimpel 2016), as PyTorch's approximate='none' / 'tanh'. */
nb_tensor *nb_gelu(nb_tensor *x, nb_gelu_approximate approximate);

typedef struct nb_sdpa_options {
    nb_tensor *attn_mask; /* NULL, bool (true = may attend) or float (added to the scores);
                             broadcastable to [..., L, S] */
    double dropout_p;     /* on the attention weights, training only; 0 = none */
    bool is_causal;       /* mask out j > i (with attn_mask NULL, as PyTorch) */
    double scale;         /* 0 = 1/sqrt(E) */
    nb_generator *gen;    /* for dropout; NULL = default */
} nb_sdpa_options;
/* F.scaled_dot_product_attention: softmax(q k^T * scale + mask) v for
 * q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]. A fused,
 * tiled kernel with an online softmax (FlashAttention, Dao et al. 2022) that
 * never holds the full [..., L, S] score matrix; the forward saves the
 * log-sum-exp per row, and the backward recomputes the scores from it. A
 * row whose every score is masked gives NaN, as PyTorch. */
nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_sdpa_options opts);

/* ---- unary math and activations (autograd/ops_math.c) --------------------- */

/* ---- arithmetic, comparisons, logic, type promotion (autograd/ops_elementwise.c) */

/* ---- reductions over dims (autograd/ops_reduce.c) --------------------------- */

/* ---- cumulative ops (autograd/ops_scan.c) ----------------------------------- */

/* ---- sorting (autograd/ops_sort.c) ------------------------------------------ */

/* ---- gather/scatter and indexing (autograd/ops_gather.c) -------------------- */

/* ---- shape ops and indexing (autograd/ops_shape.c, ops_index.c) ------------- */

#ifdef __cplusplus
}
#endif
#endif
