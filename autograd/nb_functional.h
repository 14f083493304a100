/* nb_functional.h - the ops of torch.nn.functional: softmax, losses,
 * convolution, pooling, normalization, dropout and sampling, resizing,
 * attention, and the decoders' RMSNorm and rotary embedding. The
 * conventions of nb_ops.h hold here (it includes this header): each
 * returns a new scoped tensor that records its backward when an input
 * requires grad, NULL with nb_last_error() set on bad input; each section
 * names its family (autograd/ops_<family>.c, backend/cpu/<family>.c,
 * tests/test_ops_<family>.c). Each op's dtypes: autograd/OPS.md.
 */
#ifndef NB_FUNCTIONAL_H
#define NB_FUNCTIONAL_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- softmax (ops_softmax.c; backend/cpu/softmax.c) -------------------------- */

/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along dim. */
nb_tensor *nb_softmax(nb_tensor *t, int dim);
nb_tensor *nb_log_softmax(nb_tensor *t, int dim);

/* ---- losses (ops_loss.c; backend/cpu/loss.c) --------------------------------- */

/* A loss's reduction (PyTorch's reduction argument): NB_REDUCTION_MEAN
 * 'mean' (the default), NB_REDUCTION_SUM 'sum', NB_REDUCTION_NONE 'none'
 * (the loss per element). */
typedef enum nb_reduction { NB_REDUCTION_MEAN = 0, NB_REDUCTION_SUM, NB_REDUCTION_NONE } nb_reduction;

/* The ignore_index that ignores class 0 (an ignore_index left 0 means -100). */
#define NB_IGNORE_CLASS_0 INT64_MIN
/* Options of the cross-entropy losses; a zeroed struct is PyTorch's defaults.
 * ignore_index: targets equal to it add nothing (class indices only); 0,
 * as in a zeroed struct, means PyTorch's default -100, and
 * NB_IGNORE_CLASS_0 ignores class 0. */
typedef struct nb_cross_entropy_options {
    int64_t ignore_index;   /* default -100 (left 0); NB_IGNORE_CLASS_0 for class 0 */
    nb_reduction reduction; /* mean over non-ignored targets (default), sum, none */
    nb_tensor *weight;      /* class weights [C] of the input's dtype, or NULL (borrowed) */
    double label_smoothing; /* in [0, 1]; 0 = none (Szegedy et al. 2016) */
} nb_cross_entropy_options;
/* PyTorch's defaults written out (the same as a zeroed struct). */
#define NB_CROSS_ENTROPY_DEFAULTS ((nb_cross_entropy_options){.ignore_index = -100, .reduction = NB_REDUCTION_MEAN})

/* F.cross_entropy (PyTorch's doc and its cross_entropy_loss): input logits
 * [C] (unbatched), [N, C] or [N, C, d1, ..., dk], f32/f64; target either
 * class indices (int64) of the input's shape without C ([], [N],
 * [N, d1, ..., dk]), each in [0, C) or ignore_index, or class
 * probabilities of the input's shape and dtype. With class indices the
 * loss of an element is w[t] (lse - x[t]) (w = weight, or 1), and the mean
 * divides the sum by the sum of w[t] over the non-ignored elements (NaN
 * when there is none, as PyTorch); label_smoothing e mixes in the uniform
 * distribution: (1 - e) nll + e / C * (-sum_c w_c log p_c), the second
 * term masked and averaged likewise (PyTorch's formula). With
 * probabilities the target becomes t (1 - e) + e / C, the loss of an
 * element is -sum_c w_c t_c log p_c, and the mean divides by the number of
 * elements (N d1 ... dk); ignore_index must stay -100 (PyTorch's rule:
 * NB_ERR_INVALID_ARG otherwise). reduction none
 * returns the target's shape ([] for unbatched input). The common case
 * ([N, C], class indices, no weight, no smoothing; and [N, C, d...] after a
 * copy to [N d..., C]) is one fused kernel: the forward saves the
 * log-sum-exp per row and the backward is softmax - onehot; the rest is
 * written from log_softmax, gather and sums. Errors: NB_ERR_SHAPE (shapes
 * that do not fit, weight not [C]), NB_ERR_DTYPE (target neither int64 nor
 * the input's float dtype, weight of another dtype), NB_ERR_INVALID_ARG (a
 * class index outside [0, C), label_smoothing outside [0, 1], a bad
 * reduction). */
nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target);
nb_tensor *nb_cross_entropy_ex(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_options opts);

/* F.nll_loss: the negative log-likelihood of class indices, for inputs that
 * are already log-probabilities (log_softmax's output): input [C], [N, C]
 * or [N, C, d1, ..., dk], target int64 of the input's shape without C.
 * Element loss -w[t] input[t] (0 where t == ignore_index); mean divides by
 * the sum of w[t] (NaN when nothing counts). opts.label_smoothing must be
 * 0. Gradient: -w[t] at the target class, 0 elsewhere. Errors as
 * nb_cross_entropy_ex. */
nb_tensor *nb_nll_loss(nb_tensor *input, nb_tensor *target, nb_cross_entropy_options opts);

/* F.mse_loss: mean (or sum, none) of (input - target)^2; same shapes or broadcastable. */
nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);

/* Options of the regression, binary and KL losses below; a zeroed struct is
 * PyTorch's defaults. */
typedef struct nb_loss_options {
    nb_reduction reduction; /* mean (default), sum, none */
    double beta;            /* smooth_l1_loss: default 1.0 (left 0); NB_ZERO for 0, which is l1_loss */
    double delta;           /* huber_loss: default 1.0 (left 0); must be > 0 */
    nb_tensor *weight;      /* binary_cross_entropy(_with_logits): a rescaling weight broadcast to the
                               input, or NULL (borrowed) */
    nb_tensor *pos_weight;  /* binary_cross_entropy_with_logits: the weight of positive examples,
                               broadcast over the input ([C] for [N, C]), or NULL (borrowed) */
    bool log_target;        /* kl_div: the target is given as log-probabilities */
    bool batchmean;         /* kl_div: reduction='batchmean', the sum divided by input.size(0)
                               (the KL divergence's true mean; overrides reduction) */
    double margin;          /* margin_ranking_loss, cosine_embedding_loss: default 0;
                               hinge_embedding_loss, multi_margin_loss, triplet_margin_loss(_with_distance):
                               default 1.0 (left 0), NB_ZERO for 0 */
    nb_flag log_input;      /* poisson_nll_loss: the input is log(rate) (default true) */
    bool full;              /* poisson_nll_loss: add the Stirling term; gaussian_nll_loss: add log(2 pi) / 2 */
    double eps;             /* poisson_nll_loss: 1e-8; gaussian_nll_loss: 1e-6; triplet_margin_loss:
                               1e-6 (left 0; NB_ZERO for 0) */
    double p;               /* multi_margin_loss: 1 or 2 (default 1); triplet_margin_loss: the norm's
                               degree, >= 1 or INFINITY (default 2) (left 0) */
    bool swap;              /* triplet_margin_loss(_with_distance): the distance swap (Balntas et al. 2016) */
} nb_loss_options;

/* These losses (PyTorch's torch.nn.functional of the same names and
 * formulas) take input and target of one float dtype (float32 or float64;
 * under autocast float32) whose shapes broadcast together, and return the
 * loss per element (reduction none, the broadcast shape), its sum, or its
 * mean (a 0-d tensor; NaN over zero elements, as PyTorch). They are written
 * from differentiable ops, so their gradients (first and second order) follow
 * from those, on every backend. Errors: NB_ERR_SHAPE (shapes that do not
 * broadcast), NB_ERR_DTYPE (dtypes differ, or not float), NB_ERR_INVALID_ARG
 * (a bad reduction, huber's delta <= 0, smooth_l1's beta < 0). */

/* F.l1_loss: |input - target|. */
nb_tensor *nb_l1_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/* F.smooth_l1_loss (Girshick 2015, Fast R-CNN): with d = |input - target|,
 * 0.5 d^2 / beta where d < beta, else d - 0.5 beta; beta 0 is l1_loss. */
nb_tensor *nb_smooth_l1_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.huber_loss (Huber 1964): 0.5 d^2 where d < delta, else
 * delta (d - 0.5 delta); smooth_l1_loss times beta when beta = delta. */
nb_tensor *nb_huber_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.binary_cross_entropy: input probabilities in [0, 1], target in [0, 1]:
 * -w (t log(x) + (1 - t) log(1 - x)), each log clamped to >= -100 as
 * PyTorch does, so x = 0 or 1 gives a finite loss. An input outside [0, 1]
 * gives NaN (PyTorch raises; checking would cost a device sync). Under
 * autocast it runs in float32 (PyTorch refuses it there: use
 * binary_cross_entropy_with_logits). */
nb_tensor *nb_binary_cross_entropy(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.binary_cross_entropy_with_logits: a sigmoid and binary_cross_entropy in
 * one stable expression (PyTorch's): with l = log(1 + exp(-|x|)) + max(-x, 0),
 * w ((1 - t) x + (1 + (p - 1) t) l), p = pos_weight (1 without). */
nb_tensor *nb_binary_cross_entropy_with_logits(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.kl_div: input log-probabilities, target probabilities: t (log t - x),
 * 0 where t = 0 (xlogy); with log_target, exp(t) (t - x). batchmean divides
 * the sum by input.size(0) (PyTorch's advice; reduction mean averages over
 * every element, as PyTorch's default does). */
nb_tensor *nb_kl_div(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.soft_margin_loss: log(1 + exp(-y x)) for labels y (1 or -1), as a
 * softplus (finite for large -y x). */
nb_tensor *nb_soft_margin_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/* F.hinge_embedding_loss: x where y = 1, max(0, margin - x) where y = -1
 * (PyTorch's implementation: for other y both terms add). */
nb_tensor *nb_hinge_embedding_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.margin_ranking_loss: max(0, -y (x1 - x2) + margin), the three of one
 * dtype and number of dimensions (PyTorch's check), broadcasting together. */
nb_tensor *nb_margin_ranking_loss(nb_tensor *input1, nb_tensor *input2, nb_tensor *target, nb_loss_options opts);

/* F.poisson_nll_loss: with log_input, exp(x) - t x; else x - t log(x + eps);
 * full adds t log t - t + log(2 pi t) / 2 where t > 1 (Stirling). */
nb_tensor *nb_poisson_nll_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.gaussian_nll_loss (Nix & Weigend 1994): (log v + (x - t)^2 / v) / 2
 * with v = max(var, eps) (the clamp passes the gradient through, as
 * PyTorch's no_grad clamp); full adds log(2 pi) / 2. var has the input's
 * shape, or that shape without its last dim (one variance per row), or with
 * the last dim 1; a negative var is NB_ERR_INVALID_ARG (a host read, as
 * PyTorch's check). */
nb_tensor *nb_gaussian_nll_loss(nb_tensor *input, nb_tensor *target, nb_tensor *var, nb_loss_options opts);

/* The losses over classes below take input [N, C] or [C] (unbatched) and
 * reduce over the batch (none keeps [N]); weight (may be NULL) is [C] of the
 * input's dtype. */
/* F.multilabel_soft_margin_loss: target [N, C] of 0/1 labels in the input's
 * dtype; per row -sum_c w_c (t log sigmoid(x) + (1 - t) log sigmoid(-x)) / C. */
nb_tensor *nb_multilabel_soft_margin_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.multi_margin_loss: target [N] int64 class indices in [0, C) (else
 * NB_ERR_INVALID_ARG, a host read); per row
 * sum_{j != y} w_y max(0, margin - x_y + x_j)^p / C, p 1 or 2. */
nb_tensor *nb_multi_margin_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts);
/* F.multilabel_margin_loss: target int64 of the input's shape holding each
 * row's target classes, ended by the first -1 (the rest ignored); per row
 * sum over targets j and non-targets i of max(0, 1 - (x_j - x_i)) / C.
 * Memory O(N C^2). Errors: a target outside [-1, C) (NB_ERR_INVALID_ARG). */
nb_tensor *nb_multilabel_margin_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);

/* F.ctc_loss's options; zeroed: PyTorch's defaults (blank 0, mean, no
 * zero_infinity). */
typedef struct nb_ctc_loss_options {
    int64_t blank;          /* the blank class, in [0, C) */
    nb_reduction reduction; /* mean: each loss over its target length (at least 1), then the batch mean; sum; none */
    bool zero_infinity;     /* infinite losses (no alignment fits) and their gradients become 0 */
} nb_ctc_loss_options;
/* F.ctc_loss (Graves et al. 2006): the negative log likelihood of each
 * target sequence under every alignment of the inputs, with blanks.
 * log_probs [T, N, C] (log_softmax output; float32/float64, float32 under
 * autocast), targets [N, S] padded or 1-D concatenated (the first
 * target_lengths[0] entries for sample 0, ...), input_lengths and
 * target_lengths [N] (<= T, <= S); unbatched: [T, C], [S], 0-d, 0-d.
 * Targets and lengths int64 or int32, read to the host (as PyTorch's
 * lengths are host integers). Result: 0-d, or [N] for reduction none.
 * Gradient as PyTorch's (LossCTC.cpp: exp(lp) - exp(lcab + nll - lp),
 * eq. 16 of the paper, the gradient for the logits behind log_softmax;
 * the same as the true one after log_softmax's backward), 0 past each
 * input length. Not twice differentiable. The recursions are nabla ops
 * over time (every backend; T steps of a few kernels each). Errors:
 * NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_INVALID_ARG (a length out of range, a
 * target outside [0, C), a bad blank or reduction). */
nb_tensor *nb_ctc_loss(nb_tensor *log_probs, nb_tensor *targets, nb_tensor *input_lengths, nb_tensor *target_lengths,
                       nb_ctc_loss_options opts);
/* F.cosine_embedding_loss: x1, x2 [N, D] with target [N] (or [D] with a 0-d
 * target) of 1 / -1 labels in the input's dtype; with
 * cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) (ATen's), 1 - cos
 * where y = 1 and max(0, cos - margin) where y = -1 (0 for other y). */
nb_tensor *nb_cosine_embedding_loss(nb_tensor *input1, nb_tensor *input2, nb_tensor *target, nb_loss_options opts);
/* F.triplet_margin_loss (Schroff et al. 2015; Balntas et al. 2016):
 * max(0, margin + d(a, p) - d(a, n)) with d = nb_pairwise_distance(., ., p,
 * eps); swap uses min(d(a, n), d(p, n)). anchor, positive, negative of one
 * float dtype and number of dims ([N, D] or [D]), broadcasting together. */
nb_tensor *nb_triplet_margin_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative, nb_loss_options opts);
/* A distance per row of two tensors (the pairwise_distance shape rule),
 * differentiable; NULL with the error set on failure. */
typedef nb_tensor *(*nb_distance_fn)(nb_tensor *x1, nb_tensor *x2, void *user);
/* F.triplet_margin_with_distance_loss: as triplet_margin_loss with
 * distance(x1, x2, user) (NULL: nb_pairwise_distance with p 2, eps 1e-6);
 * opts.p and opts.eps are not used. */
nb_tensor *nb_triplet_margin_with_distance_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative,
                                                nb_distance_fn distance, void *user, nb_loss_options opts);

/* ---- distances (ops_loss_margin.c) ------------------------------------------ */

/* F.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim
 * (ATen's; eps keeps the norm's gradient finite at x1 = x2), the two
 * broadcasting together; keepdim keeps that dim as 1. p 0 (left) is 2, else
 * >= 1 or INFINITY (PyTorch's p in [0, 1), NB_ZERO included, is
 * NB_ERR_INVALID_ARG here); eps 0 (left) is 1e-6, NB_ZERO for 0.
 * float32/float64. Errors: NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_INVALID_ARG
 * (p < 1). */
nb_tensor *nb_pairwise_distance(nb_tensor *x1, nb_tensor *x2, double p, double eps, bool keepdim);
/* F.cosine_similarity: sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) over
 * dim (the norms' clamps pass the gradient through, ATen's), the two
 * broadcasting together; eps 0 (left) is 1e-8, NB_ZERO for 0. */
nb_tensor *nb_cosine_similarity(nb_tensor *x1, nb_tensor *x2, int dim, double eps);
/* F.pdist: the p-norm distances of the rows of x [N, M], pairs i < j in
 * row order ([N (N - 1) / 2]); p 2 when left 0, else >= 1 or INFINITY
 * (p < 1, NB_ZERO included: NB_ERR_INVALID_ARG). */
nb_tensor *nb_pdist(nb_tensor *x, double p);
/* torch.cdist: the p-norm distances between the rows of x1 [*, P, M] and
 * x2 [*, R, M] (batch dims broadcasting) -> [*, P, R]; p 2 when left 0,
 * else >= 1 or INFINITY (p < 1, NB_ZERO included: NB_ERR_INVALID_ARG).
 * Computed exactly (the difference's norm), never by PyTorch's GEMM
 * expansion for large p = 2 inputs; a zero distance's gradient is 0. */
nb_tensor *nb_cdist(nb_tensor *x1, nb_tensor *x2, double p);

/* ---- convolution (ops_conv.c; backend/cpu/conv.c) ---------------------------- */

/* convolution (autograd/ops_conv.c; kernels backend/cpu/conv.c)
 * NCHW (NCL for 1-d). Shapes: x [N, Cin, H, W], weight [Cout, Cin/groups,
 * kh, kw], bias [Cout] or NULL; Cin and Cout divisible by groups. Output
 * H_out = floor((H + 2*pad - dilation*(kh-1) - 1) / stride) + 1 (PyTorch's
 * Conv2d doc). CPU: 3x3 stride-1 undilated kernels with >= 8 channels per
 * group use Winograd F(2x2, 3x3) (Lavin & Gray 2016); the rest im2col +
 * OpenBLAS GEMM; threaded over the batch, deterministic. CUDA: cuDNN.
 * Dtypes: float32, float64, and bfloat16/float16 (float32 accumulation;
 * the CPU through float32 copies) for conv1d, conv2d, conv_transpose1d
 * and conv_transpose2d, which are on autocast's lower-precision list for
 * CUDA tensors (float32 list on the CPU). */
typedef struct nb_conv2d_options {
    int64_t stride[2];   /* default 1 (0 means default) */
    int64_t padding[2];  /* default 0 */
    int64_t dilation[2]; /* default 1 (0 means default) */
    int64_t groups;      /* default 1 (0 means default) */
    bool padding_same;   /* padding='same' (stride must be 1): output size = input size */
} nb_conv2d_options;
/* F.conv1d's options: conv2d's for one spatial dim; zeroed: PyTorch's
 * defaults (stride 1, padding 0, dilation 1, groups 1). */
typedef struct nb_conv1d_options {
    int64_t stride, padding, dilation, groups; /* as above; 0 = default */
    bool padding_same;                         /* padding='same' (stride 1, padding 0): output length = input length */
} nb_conv1d_options;
/* F.conv_transpose2d's options, per (h, w); zeroed: PyTorch's defaults
 * (stride 1, padding 0, output_padding 0, dilation 1, groups 1). */
typedef struct nb_conv_transpose2d_options {
    int64_t stride[2], padding[2], output_padding[2], dilation[2], groups; /* 0 = default */
} nb_conv_transpose2d_options;

/* F.conv2d: x [N, Cin, H, W] (or unbatched [Cin, H, W]), weight [Cout,
 * Cin/groups, kh, kw], bias [Cout] or NULL -> [N, Cout, H_out, W_out], H_out
 * and W_out as above (padding_same: H and W). Errors: NB_ERR_SHAPE (ranks,
 * channels that do not fit the weight or groups, bias not [Cout], an input
 * smaller than the dilated kernel), NB_ERR_INVALID_ARG (negative stride,
 * padding or dilation, groups < 0, padding_same with a stride or a padding),
 * NB_ERR_DTYPE, NB_ERR_DEVICE. */
nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_options opts);

/* x [N, Cin, L], weight [Cout, Cin/groups, k]. */
nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv1d_options opts);

/* F.conv_transpose2d: weight [Cin, Cout/groups, kh, kw]; H_out = (H-1)*stride
 * - 2*pad + dilation*(kh-1) + output_padding + 1. */
nb_tensor *nb_conv_transpose2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias,
                               nb_conv_transpose2d_options opts);

/* F.conv_transpose1d: x [N, Cin, L] (or [Cin, L]), weight [Cin, Cout/groups,
 * k]; L_out = (L-1)*stride - 2*pad + dilation*(k-1) + output_padding + 1
 * (conv_transpose2d on [N, C, 1, L] views). */
typedef struct nb_conv_transpose1d_options {
    int64_t stride, padding, output_padding, dilation, groups; /* 0 = default */
} nb_conv_transpose1d_options;
/* F.conv_transpose1d, as above; bias [Cout] or NULL. Errors as
 * conv_transpose2d's. */
nb_tensor *nb_conv_transpose1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias,
                               nb_conv_transpose1d_options opts);

/* F.conv3d: x [N, Cin, D, H, W] (or [Cin, D, H, W]), weight [Cout,
 * Cin/groups, kd, kh, kw], bias [Cout] or NULL; per dim out = floor((in +
 * 2*pad - dilation*(k-1) - 1) / stride) + 1 (PyTorch's Conv3d doc), or
 * out = in with padding_same (stride 1; an odd total padding puts the extra
 * one after). Computed as kd 2-d convolutions (one per kernel depth tap, of
 * the input depth slices that tap reads, batched over the output depths)
 * summed: the conv2d kernels and their backward rules, on any backend
 * that has conv2d. Errors as conv2d's. */
typedef struct nb_conv3d_options {
    int64_t stride[3];   /* (d, h, w); 0 = 1 */
    int64_t padding[3];  /* default 0 */
    int64_t dilation[3]; /* 0 = 1 */
    int64_t groups;      /* 0 = 1 */
    bool padding_same;   /* padding='same' (stride 1, padding 0): output size = input size */
} nb_conv3d_options;
/* F.conv3d, as above. */
nb_tensor *nb_conv3d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv3d_options opts);

/* F.conv_transpose3d: x [N, Cin, D, H, W] (or unbatched), weight [Cin,
 * Cout/groups, kd, kh, kw]; per dim out = (in-1)*stride - 2*pad +
 * dilation*(k-1) + output_padding + 1, output_padding smaller than the
 * stride or the dilation (PyTorch's rule). Computed as kd conv_transpose2d
 * (one per depth tap) placed at their output depths and summed. */
typedef struct nb_conv_transpose3d_options {
    int64_t stride[3], padding[3], output_padding[3], dilation[3], groups; /* 0 = default */
} nb_conv_transpose3d_options;
/* F.conv_transpose3d, as above; bias [Cout] or NULL. */
nb_tensor *nb_conv_transpose3d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias,
                               nb_conv_transpose3d_options opts);

/* torchvision.ops.deform_conv2d: deformable convolution (v1, Dai et al.
 * 2017; with a mask v2, Zhu et al. 2019). x [B, Cin, H, W]; offset [B,
 * 2*offset_groups*kh*kw, Ho, Wo], channel 2*(g*kh*kw + i*kw + j) the y and
 * the next the x shift of tap (i, j) for the channels of offset group g
 * (Cin divisible by offset_groups); weight [Cout, Cin/groups, kh, kw]
 * (groups = Cin / weight's dim 1); bias [Cout] or NULL; mask [B,
 * offset_groups*kh*kw, Ho, Wo] or NULL (v1). Ho, Wo as conv2d's. Tap (i, j)
 * of output (oh, ow) samples x bilinearly at (oh*sh - ph + i*dh + dy, ow*sw
 * - pw + j*dw + dx), corners outside the input reading 0, times the mask.
 * Composite (floor, gather, matmul): gradients for x, offset, mask, weight
 * and bias. Batched input only, as torchvision. Errors: NB_ERR_SHAPE,
 * NB_ERR_DTYPE, NB_ERR_INVALID_ARG (negative stride/padding/dilation). */
typedef struct nb_deform_conv2d_options {
    int64_t stride[2], padding[2], dilation[2]; /* stride/dilation 0 = 1 */
} nb_deform_conv2d_options;
/* torchvision.ops.deform_conv2d(input, offset, weight, bias, stride, padding,
 * dilation, mask), as above. */
nb_tensor *nb_deform_conv2d(nb_tensor *x, nb_tensor *offset, nb_tensor *weight, nb_tensor *bias, nb_tensor *mask,
                            nb_deform_conv2d_options opts);

/* ---- pooling (ops_pool.c; backend/cpu/pool.c) -------------------------------- */

/* pooling (autograd/ops_pool.c; kernels backend/cpu/pool.c)
 * x [N, C, H, W] or [C, H, W] (1-d: [N, C, L] or [C, L]). Output sizes as
 * PyTorch's MaxPool2d/AvgPool2d docs; padding <= kernel/2. The 1-d and
 * 2-d pools take float32, float64, bfloat16 and float16 (16-bit tensors,
 * float32 arithmetic inside); the 3-d ones float32 and float64. */
typedef struct nb_pool2d_options {
    int64_t kernel[2];   /* (h, w) window size, required (>= 1) */
    int64_t stride[2];   /* 0 = kernel (PyTorch's default stride=None) */
    int64_t padding[2];  /* implicit padding on both sides, in [0, kernel/2]; default 0 */
    int64_t dilation[2]; /* max pool only; 0 = 1 */
    bool ceil_mode;      /* ceil, not floor, in the output size (a window must start in the input or left padding) */
    bool count_include_pad_false; /* avg pool: PyTorch's count_include_pad=False */
    int64_t divisor_override;     /* avg pool: 0 = none */
} nb_pool2d_options;
/* The 1-d pools' options (F.max_pool1d, avg_pool1d, lp_pool1d): the 2-d
 * ones' for one spatial dim, L. */
typedef struct nb_pool1d_options {
    int64_t kernel, stride, padding, dilation; /* stride 0 = kernel; dilation 0 = 1 */
    bool ceil_mode;                            /* as nb_pool2d_options' */
    bool count_include_pad_false;              /* avg pool: PyTorch's count_include_pad=False */
} nb_pool1d_options;

/* Max pooling; if indices != NULL, *indices gets the int64 flat positions
 * (h*W + w within each plane; PyTorch's return_indices), owned like any op result. */
nb_tensor *nb_max_pool2d(nb_tensor *x, nb_pool2d_options opts, nb_tensor **indices);
nb_tensor *nb_max_pool1d(nb_tensor *x, nb_pool1d_options opts, nb_tensor **indices);
nb_tensor *nb_avg_pool2d(nb_tensor *x, nb_pool2d_options opts);
nb_tensor *nb_avg_pool1d(nb_tensor *x, nb_pool1d_options opts);

/* F.fractional_max_pool2d / 3d's options (kernel_size required; either
 * output_size or output_ratio in (0, 1), per spatial dim: 2-d uses the
 * first two entries, (h, w)). */
typedef struct nb_fractional_max_pool_options {
    int64_t kernel_size[3]; /* the window per dim, >= 1 (required) */
    int64_t output_size[3]; /* 0: from output_ratio, int(input size * ratio) */
    double output_ratio[3]; /* in (0, 1), for the dims whose output_size is 0 */
    nb_tensor *random_samples; /* [N, C, 2] ((w, h) as PyTorch's) or [N, C, 3] ((t, h, w)) in [0, 1), float;
                                  NULL: drawn from generator (PyTorch's _random_samples) */
    nb_generator *generator;   /* NULL: the default generator */
} nb_fractional_max_pool_options;
/* F.fractional_max_pool2d / fractional_max_pool3d (Graham 2014): x [N, C,
 * H, W] ([C, H, W]) or [N, C, T, H, W] ([C, T, H, W]); each (n, c) plane
 * pooled by the maximum over kernel-sized windows whose starts are
 * PyTorch's pseudo-random sequence from that plane's sample (computed in
 * x's float type, as generate_intervals). *indices (or NULL): int64
 * positions of the maxima, flattened within the plane, as PyTorch's.
 * Gradient to the first maximum of each window. float32/float64. The
 * window starts are built on the host (the samples are read back); the
 * values are a gather and a max. Errors: NB_ERR_SHAPE, NB_ERR_INVALID_ARG
 * (kernel + output - 1 past the input, a bad ratio). */
nb_tensor *nb_fractional_max_pool2d(nb_tensor *x, nb_fractional_max_pool_options opts, nb_tensor **indices);
nb_tensor *nb_fractional_max_pool3d(nb_tensor *x, nb_fractional_max_pool_options opts, nb_tensor **indices);

/* Adaptive pooling to an output size (PyTorch's index rule: start =
 * floor(i*in/out), end = ceil((i+1)*in/out)). */
nb_tensor *nb_adaptive_avg_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w);
nb_tensor *nb_adaptive_avg_pool1d(nb_tensor *x, int64_t out_l);
nb_tensor *nb_adaptive_max_pool2d(nb_tensor *x, int64_t out_h, int64_t out_w, nb_tensor **indices);
/* F.lp_pool2d / lp_pool1d: each window's p-norm (sum x^p)^(1/p), written as
 * PyTorch's: avg_pool(x^p) times the window size, sign(a) relu(|a|), to the
 * power 1/p (kernel, stride (0 = kernel) and ceil_mode of the options; no
 * padding or dilation, as PyTorch). A negative x with a non-integer p gives
 * NaN, as PyTorch. Errors: norm_type not positive and finite, the pools'. */
nb_tensor *nb_lp_pool2d(nb_tensor *x, double norm_type, nb_pool2d_options opts);
nb_tensor *nb_lp_pool1d(nb_tensor *x, double norm_type, nb_pool1d_options opts);
/* F.adaptive_max_pool1d: x [N, C, L] or [C, L] (adaptive_max_pool2d on
 * [*, 1, L]); indices (may be NULL) the positions along L.
 * F.adaptive_max_pool3d: x [N, C, D, H, W] or unbatched, per depth slice
 * over (H, W) then over depth (exact for max); no indices. float32/float64. */
nb_tensor *nb_adaptive_max_pool1d(nb_tensor *x, int64_t out_l, nb_tensor **indices);
nb_tensor *nb_adaptive_max_pool3d(nb_tensor *x, int64_t out_d, int64_t out_h, int64_t out_w);
/* F.max_unpool1d / 2d / 3d: the inverse of max pooling with indices: x
 * placed into zeros at the flat per-plane positions indices (int64, x's
 * shape, as max_pool's return_indices) gives; the output size per dim is
 * output_size (NULL or 0 entries: (in - 1) stride - 2 padding + kernel,
 * stride 0 meaning kernel). x [N, C, *in] or unbatched. Gradient: x gets
 * g gathered at indices. Errors: NB_ERR_SHAPE, NB_ERR_DTYPE (indices not
 * int64), NB_ERR_INVALID_ARG (an index outside the output plane, bad sizes). */
nb_tensor *nb_max_unpool1d(nb_tensor *x, nb_tensor *indices, int64_t kernel, int64_t stride, int64_t padding,
                           int64_t output_size);
/* F.max_unpool2d: as above, kernel, stride, padding (required) and
 * output_size (may be NULL) per (h, w). */
nb_tensor *nb_max_unpool2d(nb_tensor *x, nb_tensor *indices, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], const int64_t output_size[2]);
/* F.max_unpool3d: likewise per (d, h, w). */
nb_tensor *nb_max_unpool3d(nb_tensor *x, nb_tensor *indices, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], const int64_t output_size[3]);

/* 3-d pooling of x [N, C, D, H, W] or [C, D, H, W] (torch.nn.functional's
 * max_pool3d, avg_pool3d, adaptive_avg_pool3d): per dim the output size and
 * the rules of the 2-d ops above (padding <= kernel/2, ceil_mode,
 * count_include_pad, divisor_override, dilation for max only). Computed as
 * a 2-d pool over (h, w) then one over depth: exact, since a window is a
 * box (max of maxima; every PyTorch divisor is a product of per-dim
 * counts), and max keeps PyTorch's tie order (first in (d, h, w)). max
 * indices: flat d*H*W + h*W + w positions (return_indices). */
typedef struct nb_pool3d_options {
    int64_t kernel[3];   /* (d, h, w) */
    int64_t stride[3];   /* 0 = kernel */
    int64_t padding[3];  /* in [0, kernel/2]; default 0 */
    int64_t dilation[3]; /* max pool only; 0 = 1 */
    bool ceil_mode;      /* as nb_pool2d_options' */
    bool count_include_pad_false; /* avg pool */
    int64_t divisor_override;     /* avg pool: 0 = none */
} nb_pool3d_options;
/* F.max_pool3d (indices as above, or NULL), F.avg_pool3d and
 * F.adaptive_avg_pool3d (to out_d x out_h x out_w), as above. float32/float64.
 * Errors: NB_ERR_SHAPE (a rank other than 4 or 5, an input smaller than the
 * window), NB_ERR_INVALID_ARG (bad kernel, stride, padding or dilation). */
nb_tensor *nb_max_pool3d(nb_tensor *x, nb_pool3d_options opts, nb_tensor **indices);
nb_tensor *nb_avg_pool3d(nb_tensor *x, nb_pool3d_options opts);
nb_tensor *nb_adaptive_avg_pool3d(nb_tensor *x, int64_t out_d, int64_t out_h, int64_t out_w);
/* F.lp_pool3d over avg_pool3d likewise (kernel, stride, ceil_mode). */
nb_tensor *nb_lp_pool3d(nb_tensor *x, double norm_type, nb_pool3d_options opts);

/* ---- batch normalization (ops_batch_norm.c; backend/cpu/batch_norm.c) -------- */

/* F.batch_norm on x [N, C] or [N, C, *]: training uses batch statistics
 * (biased variance to normalise) and, when running_mean/running_var are
 * given, updates them in place: r = (1 - momentum) * r + momentum * stat,
 * with the unbiased variance (PyTorch's BatchNorm doc; momentum 0.1,
 * eps 1e-5 are the module defaults). eval (training false) uses the running
 * statistics. weight/bias [C] may be NULL. Gradients flow to x, weight, bias. */
nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *weight,
                         nb_tensor *bias, bool training, double momentum, double eps);

/* ---- group, instance and local response normalization (ops_group_norm.c) ----
 * eps, momentum, alpha, beta and k left 0 take PyTorch's defaults (NB_ZERO
 * asks for 0). float32/float64; written from batch_norm's fused kernels
 * (group_norm, instance_norm) and from other ops, so their gradients, first
 * and second order, follow from those. weight and bias (NULL or [C] of the
 * input's dtype) scale and shift per channel. Errors: NB_ERR_SHAPE,
 * NB_ERR_DTYPE, NB_ERR_INVALID_ARG (bad sizes or options). */

/* F.group_norm (Wu & He 2018): x [N, C, *], the C channels split into
 * num_groups groups (C divisible by it); each (sample, group) normalised by
 * its mean and biased variance, y = (x - mean) / sqrt(var + eps) (eps
 * 1e-5), then the affine. A group of one element gives 0 (then the bias). */
nb_tensor *nb_group_norm(nb_tensor *x, int64_t num_groups, nb_tensor *weight, nb_tensor *bias, double eps);
/* F.instance_norm (Ulyanov et al. 2016): x [N, C, *] (at least 3 dims),
 * each (sample, channel) normalised over *; with use_input_stats (training,
 * or track_running_stats false) by its own statistics, and the running
 * ones (NULL, or both [C], contiguous) updated in place as batch_norm's
 * (momentum 0.1; unbiased variance), averaged over the batch; without, by
 * the running statistics. One spatial element with use_input_stats is
 * NB_ERR_INVALID_ARG (PyTorch's check). */
nb_tensor *nb_instance_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *weight,
                            nb_tensor *bias, bool use_input_stats, double momentum, double eps);
/* F.local_response_norm (Krizhevsky et al. 2012): x [N, C, *] (at least 3
 * dims); x / (k + alpha mean_window(x^2))^beta, the mean over `size`
 * channels around each (zero-padded, divided by size as PyTorch's
 * avg_pool). Defaults alpha 1e-4, beta 0.75, k 1. */
nb_tensor *nb_local_response_norm(nb_tensor *x, int64_t size, double alpha, double beta, double k);
/* F.normalize: x / max(||x||_p over dim, eps), p 2 when left 0 (>= 1 or
 * INFINITY), eps 1e-12 when left 0 (the clamp cuts the gradient where it
 * holds, as PyTorch's clamp_min). */
nb_tensor *nb_normalize(nb_tensor *x, double p, int dim, double eps);

/* ---- recurrent layers (ops_rnn.c) ------------------------------------------------
 * PyTorch's RNN (tanh or ReLU), LSTM (Hochreiter & Schmidhuber 1997, with
 * the forget gate of Gers et al. 2000; proj_size as Sak et al. 2014) and
 * GRU (Cho et al. 2014), as torch.nn's docs give them, gates in PyTorch's
 * order and layouts (LSTM: i, f, g, o; GRU: r, z, n):
 *   RNN:  h' = act(W_ih x + b_ih + W_hh h + b_hh)
 *   LSTM: i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (W_ih x + b_ih + W_hh h + b_hh)
 *         c' = f c + i g;  h' = o tanh(c')  (times W_hr with proj_size)
 *   GRU:  r, z = sigmoid(W_i{r,z} x + b_i{r,z} + W_h{r,z} h + b_h{r,z})
 *         n = tanh(W_in x + b_in + r (W_hn h + b_hn));  h' = (1 - z) n + z h
 * On a backend with fused recurrent kernels (CUDA: cuDNN's RNN API, as
 * PyTorch runs nn.LSTM) nb_rnn and nb_rnn_packed run each run of layers
 * without dropout between them in one call (nb_cudnn_enabled(), the
 * default); its backward is not differentiable again, so a double
 * backward through it fails with NB_ERR_UNSUPPORTED, as PyTorch's does
 * (nb_set_cudnn_enabled(false) before the forward avoids it). Elsewhere,
 * and for the cells, the input projections of every step are one GEMM per
 * layer and direction and the steps are written from differentiable ops
 * (linear, sigmoid, tanh, mul, add), so gradients, first and second order,
 * follow from those. float32/float64. */

/* The recurrence: an Elman RNN with tanh (the default, nn.RNN's
 * nonlinearity='tanh') or ReLU, an LSTM, or a GRU. */
typedef enum nb_rnn_mode { NB_RNN_TANH = 0, NB_RNN_RELU, NB_RNN_LSTM, NB_RNN_GRU } nb_rnn_mode;
/* Options of nb_rnn, nb_rnn_packed and the nn recurrent modules; zeroed:
 * PyTorch's defaults (tanh RNN, one layer, bias, sequence first, no dropout,
 * one direction, no projection). */
typedef struct nb_rnn_options {
    nb_rnn_mode mode;     /* RNN with tanh (default) or ReLU, LSTM, GRU */
    int64_t num_layers;   /* 1 (left 0) */
    nb_flag bias;         /* default true: b_ih and b_hh per layer and direction */
    bool batch_first;     /* input and output [B, T, *] instead of [T, B, *] (the states stay [L * D, B, H]) */
    double dropout;       /* dropout on each layer's output but the last, in training */
    bool training;        /* nb_rnn only (modules use their mode) */
    bool bidirectional;   /* D = 2: a reverse direction, outputs concatenated [forward, reverse] */
    int64_t proj_size;    /* LSTM: h projected to this size by W_hr (0: none) */
    nb_generator *generator; /* dropout's draws (NULL: the default generator) */
    nb_dtype dtype;          /* modules (nb_nn.h): the parameters' dtype, float32 (left 0) or float64 */
} nb_rnn_options;

/* torch's _VF.rnn_tanh / rnn_relu / lstm / gru (what nn.RNN, LSTM and GRU
 * call): input [T, B, I] ([B, T, I] batch_first; [T, I] unbatched); hx the
 * initial hidden states [L * D, B, H_out] ([L * D, H_out] unbatched) or
 * NULL for zeros, H_out = proj_size or H; cx (LSTM only) the initial cell
 * states [L * D, B, H] or NULL. params: PyTorch's _flat_weights, per layer
 * then direction: w_ih [G H, I_l], w_hh [G H, H_out], then b_ih [G H] and
 * b_hh [G H] when bias, then w_hr [proj_size, H] with proj_size (G = 1, 4,
 * 3 for RNN, LSTM, GRU; I_l = I for layer 0, D H_out after). Writes
 * output [T, B, D H_out] (batch_first [B, T, ...]), h_n [L * D, B, H_out],
 * and for LSTM c_n [L * D, B, H] to out, and returns the count (2 or 3),
 * or -1: NB_ERR_SHAPE (sizes that do not fit, naming them), NB_ERR_DTYPE,
 * NB_ERR_INVALID_ARG (a wrong number of params, proj_size without LSTM or
 * >= H, cx without LSTM, bad options). */
int nb_rnn(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params, int n_params,
           nb_rnn_options opts, nb_tensor **out);
/* torch.nn.utils.rnn.PackedSequence: a batch of sequences of different
 * lengths, sorted by decreasing length, stored time-major without
 * padding. The tensors are owned like op results. */
typedef struct nb_packed_sequence {
    nb_tensor *data;             /* [sum of lengths, *]: step 0 of every sequence, then step 1 of those that
                                    have one, ... (each step in the sorted order) */
    nb_tensor *batch_sizes;      /* int64 [T] on the CPU: how many sequences have step t */
    nb_tensor *sorted_indices;   /* int64 [B]: the caller's index of each sorted sequence; NULL when the batch
                                    came sorted (enforce_sorted) */
    nb_tensor *unsorted_indices; /* int64 [B]: the inverse permutation; NULL with sorted_indices */
} nb_packed_sequence;
/* nn.utils.rnn.pack_padded_sequence: input [T, B, *] ([B, T, *]
 * batch_first) and lengths (int64/int32 [B], each in [1, T]; read to the
 * host) to a packed sequence. enforce_sorted: lengths must already
 * decrease (NB_ERR_INVALID_ARG otherwise) and no indices are kept; else
 * the batch is sorted (a stable sort: ties keep their order, where
 * torch.sort may not). Differentiable (an index_select). */
nb_status nb_pack_padded_sequence(nb_tensor *input, nb_tensor *lengths, bool batch_first, bool enforce_sorted,
                                  nb_packed_sequence *out);
/* nn.utils.rnn.pad_packed_sequence: back to padded [T', B, *] ([B, T',
 * *] batch_first) in the caller's batch order, padding_value past each
 * length, T' = total_length or (0) the longest length; *lengths (if
 * lengths is not NULL) the int64 [B] lengths on the CPU. Differentiable
 * (an index_copy). Errors: a malformed sequence, total_length below the
 * longest. */
nb_status nb_pad_packed_sequence(const nb_packed_sequence *seq, bool batch_first, double padding_value,
                                 int64_t total_length, nb_tensor **padded, nb_tensor **lengths);
/* nn.utils.rnn.pad_sequence: n tensors [L_i, *] (same trailing dims and
 * dtype) stacked to [max L, n, *] ([n, max L, *] batch_first), padded
 * with padding_value on the right (padding_side "right"), or on the left
 * with padding_left. Differentiable. */
nb_tensor *nb_pad_sequence(nb_tensor *const *seqs, int n, bool batch_first, double padding_value, bool padding_left);
/* nn.utils.rnn.pack_sequence: pad_sequence then pack_padded_sequence. */
nb_status nb_pack_sequence(nb_tensor *const *seqs, int n, bool enforce_sorted, nb_packed_sequence *out);
/* nb_rnn on a packed sequence (what nn.RNN / LSTM / GRU do with one):
 * input data [rows, I]; each sequence runs over its own length (the
 * reverse direction starts at its last step; h_n holds the state after it).
 * hx / cx as nb_rnn's, in the caller's batch order (NULL: zeros). Writes
 * the packed output (data [rows, D H_out], input's batch sizes and
 * indices) and h_n (and c_n for LSTM) to states; returns 1 or 2, or -1
 * (nb_rnn's errors, a malformed sequence). opts.batch_first is ignored,
 * as PyTorch's. Padded steps are computed and masked (B x T steps of
 * work). */
int nb_rnn_packed(const nb_packed_sequence *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *const *params,
                  int n_params, nb_rnn_options opts, nb_packed_sequence *output, nb_tensor **states);
/* torch's rnn_tanh_cell / rnn_relu_cell / lstm_cell / gru_cell (nn.RNNCell,
 * LSTMCell, GRUCell): one step. input [B, I] or [I]; hx [B, H] (or [H]) or
 * NULL for zeros; cx likewise, LSTM only; w_ih [G H, I], w_hh [G H, H],
 * b_ih and b_hh [G H] or both NULL. Writes h' (and c' for LSTM) to out and
 * returns the count (1 or 2), or -1 (errors as nb_rnn). */
int nb_rnn_cell(nb_tensor *input, nb_tensor *hx, nb_tensor *cx, nb_tensor *w_ih, nb_tensor *w_hh, nb_tensor *b_ih,
                nb_tensor *b_hh, nb_rnn_mode mode, nb_tensor **out);

/* ---- layer normalization (ops_layer_norm.c; backend/cpu/layer_norm.c) -------- */

/* F.layer_norm over the last n_norm dims of x (their sizes are
 * normalized_shape); weight/bias of normalized_shape or NULL. Fused kernels;
 * the forward saves mean and rstd (Ba, Kiros, Hinton 2016; PyTorch's doc).
 * float32/float64; a float16/bfloat16 x (its weight and bias 16-bit or
 * float32) is normalized in float32 and the result rounded back to x's
 * dtype, as PyTorch's 16-bit kernels accumulate. */
nb_tensor *nb_layer_norm(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight,
                         nb_tensor *bias, double eps);

/* ---- dropout (ops_dropout.c; backend/cpu/random.c) --------------------------- */

/* F.dropout: in training, zeroes each element with probability p (Bernoulli
 * from gen, NULL = default generator) and scales the rest by 1/(1-p)
 * (inverted dropout); identity (a new reference) when !training or p == 0.
 * Float dtypes, bfloat16/float16 included (the mask in x's dtype).
 * Errors: p outside [0, 1]. */
nb_tensor *nb_dropout(nb_tensor *x, double p, bool training, nb_generator *gen);
/* F.dropout1d / dropout2d / dropout3d (Tompson et al. 2015): whole
 * channels zeroed with probability p, one draw per (sample, channel), the
 * rest scaled by 1 / (1 - p); x [N, C, *] with 1, 2 or 3 trailing dims (or
 * unbatched [C, *]). F.alpha_dropout (Klambauer et al. 2017) keeps SELU's
 * mean and variance: dropped elements become -1.7580993408473766 (SELU's
 * negative saturation), then an affine map a x + b restores the moments
 * (ATen's formula); F.feature_alpha_dropout does so per channel of [N, C,
 * *]. Identity (a new reference) when !training or p == 0; zeros for p 1.
 * Written from ops (rand, ge, mul), so on every backend; the draws come
 * from gen (NULL: the default generator). Errors: p outside [0, 1], a rank
 * the function does not take (NB_ERR_SHAPE). */
nb_tensor *nb_dropout1d(nb_tensor *x, double p, bool training, nb_generator *gen);
nb_tensor *nb_dropout2d(nb_tensor *x, double p, bool training, nb_generator *gen);
nb_tensor *nb_dropout3d(nb_tensor *x, double p, bool training, nb_generator *gen);
nb_tensor *nb_alpha_dropout(nb_tensor *x, double p, bool training, nb_generator *gen);
nb_tensor *nb_feature_alpha_dropout(nb_tensor *x, double p, bool training, nb_generator *gen);

/* ---- sampling (ops_random.c; composites) ------------------------------------ */

/* torch.multinomial(p, num_samples, replacement, generator): int64 indices
 * [num_samples] (p [C]) or [N, num_samples] (p [N, C]) drawn with
 * probability proportional to p's rows (f32/f64, not normalized). Without
 * replacement (or one sample) by the Gumbel-max trick, topk of p / q with q
 * ~ Exp(1) (aten's CPU algorithm), so samples are distinct and zero-
 * probability categories never drawn; with replacement by inverse-CDF
 * sampling, computed in float64 whatever p's dtype (float32 and float64
 * probabilities of the same values give the same samples). gen NULL = the
 * default generator; deterministic given it (the samples differ from
 * PyTorch's, whose generator is another). The checks
 * read the distribution to the host. Not differentiable. Errors:
 * NB_ERR_SHAPE (p not 1-D or 2-D), NB_ERR_INVALID_ARG (negative, infinite or
 * NaN probabilities, a row summing to 0, num_samples < 0, more samples
 * without replacement than nonzero categories), NB_ERR_DTYPE. */
nb_tensor *nb_multinomial(nb_tensor *p, int64_t num_samples, bool replacement, nb_generator *gen);

/* ---- im2col / col2im, embedding_bag, affine_grid (ops_fold.c) ---------------------- */

/* The sliding blocks of F.unfold / F.fold: kernel (required, >= 1),
 * dilation and stride (0 means 1), padding (>= 0), per (h, w). */
typedef struct nb_fold_options {
    int64_t kernel[2], dilation[2], padding[2], stride[2]; /* (h, w) each; as above */
} nb_fold_options;
/* F.unfold (ATen's im2col): x [N, C, H, W] (or [C, H, W]) -> [N, C kh kw,
 * L], column c kh kw + i kw + j holding, for each of the L = oh ow blocks
 * in row order, the pixel at (block row) stride + i dilation - padding
 * (zeros outside the image). One gather; its gradient scatters back
 * (overlaps summed). float32/float64. Errors: NB_ERR_SHAPE (a rank other
 * than 3 or 4, an image smaller than the kernel), NB_ERR_INVALID_ARG. */
nb_tensor *nb_im2col(nb_tensor *x, nb_fold_options opts);
/* F.fold (ATen's col2im), unfold's adjoint: cols [N, C kh kw, L] (or
 * unbatched) summed into [N, C, out_h, out_w], overlapping blocks adding
 * up (a deterministic index_add). L must be the block count of that
 * output size. Errors: NB_ERR_SHAPE (sizes that do not fit, naming them),
 * NB_ERR_INVALID_ARG. */
nb_tensor *nb_col2im(nb_tensor *cols, int64_t out_h, int64_t out_w, nb_fold_options opts);

/* F.embedding_bag's mode: NB_BAG_MEAN 'mean' (the default), NB_BAG_SUM 'sum',
 * NB_BAG_MAX 'max'. */
typedef enum nb_embedding_bag_mode { NB_BAG_MEAN = 0, NB_BAG_SUM, NB_BAG_MAX } nb_embedding_bag_mode;
/* F.embedding_bag's options; a zeroed struct is PyTorch's defaults (mode
 * mean, no per-sample weights, no padding index, offsets without the last). */
typedef struct nb_embedding_bag_options {
    nb_embedding_bag_mode mode;    /* how a bag's rows combine: mean (default), sum, max */
    nb_tensor *per_sample_weights; /* mode sum only: a weight per index (input's shape), or NULL (borrowed) */
    bool include_last_offset;      /* offsets has B + 1 entries, the last one the end */
    bool has_padding_idx;          /* padding_idx is set: that index is left out of its bag (and of mean's count) */
    int64_t padding_idx;           /* negative counts from num_embeddings */
} nb_embedding_bag_options;
/* F.embedding_bag: the sums, means or maxima of bags of rows of weight [V,
 * D]: input [B, N] int64 (B bags of N; offsets NULL), or 1-d int64 with
 * offsets int64 [B] (bag b starts at offsets[b]; offsets[0] must be 0,
 * unchecked: reading it would cost a device sync) -> [B, D]. An empty bag
 * gives zeros. Gradients reach weight (and per_sample_weights). Written
 * from embedding, index_add and scatter_reduce (max: the ties share the
 * gradient, as scatter_reduce's amax). Errors: NB_ERR_DTYPE,
 * NB_ERR_SHAPE, NB_ERR_INVALID_ARG (per_sample_weights with another mode,
 * offsets with a 2-d input), an index outside [0, V). */
nb_tensor *nb_embedding_bag(nb_tensor *input, nb_tensor *weight, nb_tensor *offsets, nb_embedding_bag_options opts);
/* F.affine_grid for 2-d: theta [N, 2, 3] -> the sampling grid [N, H, W, 2]
 * of (x, y) = theta (x_base, y_base, 1), x_base and y_base spanning [-1,
 * 1] at the pixel centres ((2 j + 1) / W - 1), or at the corners with
 * align_corners (PyTorch's linspace rule; 0 for a size of 1). One matmul;
 * gradients reach theta. */
nb_tensor *nb_affine_grid(nb_tensor *theta, int64_t N, int64_t H, int64_t W, bool align_corners);

/* F.grid_sample's mode (the interpolation). */
typedef enum nb_grid_sample_mode {
    NB_GRID_SAMPLE_BILINEAR = 0, /* 'bilinear' (the default; trilinear for 5-d input) */
    NB_GRID_SAMPLE_NEAREST,      /* 'nearest' */
    NB_GRID_SAMPLE_BICUBIC       /* 'bicubic' (4-d input only) */
} nb_grid_sample_mode;
/* F.grid_sample's padding_mode: what a sample outside the input reads. */
typedef enum nb_grid_sample_padding {
    NB_GRID_SAMPLE_ZEROS = 0, /* samples outside the input read 0 */
    NB_GRID_SAMPLE_BORDER,    /* coordinates clipped to the border pixels */
    NB_GRID_SAMPLE_REFLECTION /* coordinates reflected at the borders (at the pixel centres or corners) */
} nb_grid_sample_padding;
/* F.grid_sample's options; zeroed: PyTorch's defaults (bilinear, zeros,
 * align_corners false). */
typedef struct nb_grid_sample_options {
    nb_grid_sample_mode mode;            /* bilinear (default), nearest, bicubic */
    nb_grid_sample_padding padding_mode; /* zeros (default), border, reflection */
    bool align_corners;                  /* -1 and 1 are the corner pixels' centres, not the image's outer edges */
} nb_grid_sample_options;
/* F.grid_sample (Jaderberg et al. 2015, spatial transformers): output
 * [N, C, Ho, Wo] sampled from input [N, C, H, W] at grid [N, Ho, Wo, 2]
 * = (x, y) in [-1, 1] (-1 the left / top edge: the first pixel's centre
 * with align_corners, its outer edge without); 5-d input [N, C, D, H, W]
 * with grid [N, Do, Ho, Wo, 3] = (x, y, z) samples a volume (trilinear).
 * Bilinear (weights of the 2^d neighbours), nearest (round half to even,
 * as PyTorch's nearbyint) or bicubic (4-d only: the 4 x 4 taps with Keys'
 * cubic convolution weights, A = -0.75, each tap padded as PyTorch's);
 * padding as the enum. Gradients reach input (a deterministic scatter of
 * the gathers) and grid (bilinear, bicubic; none for nearest, where
 * PyTorch's is 0). One float dtype for both (float32 under autocast, as
 * PyTorch). Composite: gathers and arithmetic, on every backend. Errors:
 * NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_INVALID_ARG (a bad enum). */
nb_tensor *nb_grid_sample(nb_tensor *input, nb_tensor *grid, nb_grid_sample_options opts);

/* ---- resizing (ops_upsample.c; backend/cpu/upsample.c) ----------------------- */

/* F.interpolate's mode: NB_INTERPOLATE_NEAREST 'nearest' (the default),
 * NB_INTERPOLATE_BILINEAR 'bilinear'. */
typedef enum nb_interpolate_mode { NB_INTERPOLATE_NEAREST, NB_INTERPOLATE_BILINEAR } nb_interpolate_mode;

/* F.interpolate on x [N, C, H, W] to size [out_h, out_w]; align_corners for
 * bilinear only (as PyTorch; nearest is PyTorch's legacy 'nearest'). */
nb_tensor *nb_interpolate(nb_tensor *x, int64_t out_h, int64_t out_w, nb_interpolate_mode mode,
                          bool align_corners);

/* ---- attention (ops_attention.c; backend/cpu/attention.c) -------------------- */

/* F.scaled_dot_product_attention's options; zeroed: PyTorch's defaults (no
 * mask, no dropout, not causal, scale 1/sqrt(E), no GQA). */
typedef struct nb_sdpa_options {
    nb_tensor *attn_mask; /* NULL, bool (true = may attend) or float (added to the scores);
                             broadcastable to [..., L, S] */
    double dropout_p;     /* on the attention weights, training only; 0 = none */
    bool is_causal;       /* mask out j > i (with attn_mask NULL, as PyTorch) */
    double scale;         /* 0 = 1/sqrt(E) */
    nb_generator *gen;    /* for dropout; NULL = default */
    bool enable_gqa;      /* grouped-query attention: k, v have fewer heads (see below) */
} nb_sdpa_options;

/* F.scaled_dot_product_attention: softmax(q k^T * scale + mask) v for
 * q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev], the leading
 * (batch) dims broadcast as PyTorch's (k and v of [1, H, S, E] serve every
 * batch element; the expanded copy is made once). dtypes: float32,
 * float64, bfloat16 and float16 (the 16-bit ones with float32 scores,
 * softmax and log-sum-exp; an additive mask in q's dtype); under autocast
 * q, k, v and a float mask run in the autocast dtype, as PyTorch. 4-d
 * [B, h, L, E] inputs with unit last stride (the heads of a projection) are
 * read in place, and the output then comes back in [B, L, h, Ev] memory
 * order (a non-contiguous view). A fused,
 * tiled kernel with an online softmax (FlashAttention, Dao et al. 2022) that
 * never holds the full [..., L, S] score matrix; the forward saves the
 * log-sum-exp per row, and the backward recomputes the scores from it. A
 * row whose every score is masked gives NaN, as PyTorch.
 * enable_gqa (PyTorch 2.5's; Ainslie et al. 2023, "GQA"): q [..., Hq, L, E],
 * k [..., Hk, S, E], v [..., Hk, S, Ev] with Hq a multiple of Hk (at least
 * 3 dims, at most 7); kv head j serves q heads j*Hq/Hk .. (j+1)*Hq/Hk - 1
 * (PyTorch's repeat_interleave). Cost: with a mask or is_causal, k and v
 * are repeated to Hq heads (one contiguous copy each, Hq/Hk times their
 * size; the gradient is summed back over each group); without either (the
 * KV-cache decode step), q is regrouped to [..., Hk, (Hq/Hk) L, E] instead,
 * so k and v are not copied. Errors: NB_ERR_SHAPE (heads that do not
 * divide, fewer than 3 dims). */
nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_sdpa_options opts);

/* ---- decoders: RMSNorm (ops_rms_norm.c; backend/cpu/rms_norm.c) -------------- */

/* F.rms_norm (PyTorch 2.4; Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) +
 * eps) * weight over the last n_norm dims of x, whose sizes are
 * normalized_shape; weight of normalized_shape or NULL. eps 0 means
 * PyTorch's eps=None, torch.finfo(x.dtype).eps (1.1920929e-07 for float32);
 * Llama checkpoints set 1e-5 or 1e-6. A fused kernel; the forward saves
 * 1/sqrt(mean(x^2) + eps) per row, the mean of squares accumulated in double.
 * Gradients to x and weight. f32/f64, one dtype; a float16/bfloat16 x (its
 * weight 16-bit or float32) is computed in float32 and rounded back to x's
 * dtype once (eps 0: float32's epsilon, as PyTorch's kernel, which upcasts
 * 16-bit inputs, takes it): through float32 copies,
 * or, where no gradient is recorded and the backend has 16-bit kernels
 * (CUDA), in one kernel with the same math.
 * Errors: NB_ERR_SHAPE (normalized_shape or weight do not fit),
 * NB_ERR_INVALID_ARG (eps negative, NaN or infinite), NB_ERR_DTYPE. */
nb_tensor *nb_rms_norm(nb_tensor *x, int n_norm, const int64_t *normalized_shape, nb_tensor *weight, double eps);

/* A pre-norm block's residual add and the norm after it (vLLM's
 * fused_add_rms_norm): *sum = x + residual (nb_add) and the result
 * nb_rms_norm(*sum, n_norm, normalized_shape, weight, eps), both new
 * tensors in the caller's scope. Where nothing records a gradient, outside
 * an autocast region, with x, residual and weight of one dtype and x and
 * residual of one shape, the backend's fused kernel computes both in one
 * pass when it has one (CUDA; 16-bit rows where its norms take them): the
 * same bits as the two ops. Otherwise the two ops run, with their
 * broadcasting, promotion, gradients and autocast policies (under autocast
 * the norm runs in float32, the sum in the inputs' dtype). Errors:
 * NB_ERR_INVALID_ARG (sum NULL), and those of nb_add and nb_rms_norm
 * (*sum is then NULL). */
nb_tensor *nb_add_rms_norm(nb_tensor *x, nb_tensor *residual, int n_norm, const int64_t *normalized_shape,
                           nb_tensor *weight, double eps, nb_tensor **sum);

/* ---- decoders: rotary embedding (ops_rope.c; backend/cpu/rope.c) ------------- */

/* Rotary position embedding (RoFormer, Su et al. 2021) in Llama's
 * rotate-half layout, Hugging Face's apply_rotary_pos_emb for one tensor:
 *   out = x * cos + rotate_half(x) * sin,  rotate_half(x) = cat(-x2, x1)
 * where x1, x2 are the halves of the last dim. x [..., T, D] (D even; e.g.
 * [B, heads, T, head_dim]); cos, sin [T, D/2], the tables of the angles
 * pos_t * inv_freq_i (Hugging Face's [T, D] tables are these twice over;
 * nb_nn_rotary_embedding in nb_decoder.h builds them with theta, Llama 3's
 * frequency scaling and a position offset for a KV cache). One fused
 * kernel. Gradients: x gets the inverse rotation of g; cos and sin, when
 * they require grad, get sum(g1 x1 + g2 x2) and sum(g2 x1 - g1 x2) over
 * the leading dims. f32/f64, one dtype; a float16/bfloat16 x (cos and sin
 * 16-bit or float32) is rotated in float32 and rounded back once (in one
 * kernel where no gradient is recorded, the tables are in x's dtype and
 * the backend has 16-bit kernels: CUDA).
 * Errors: NB_ERR_SHAPE (shapes that do not fit, D odd), NB_ERR_DTYPE. */
nb_tensor *nb_apply_rotary_pos_emb(nb_tensor *x, nb_tensor *cos, nb_tensor *sin);

#ifdef __cplusplus
}
#endif
#endif
