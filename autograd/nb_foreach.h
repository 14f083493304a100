/* nb_foreach.h - ops that write into tensors the caller gives: in-place
 * arithmetic (Tensor.add_ ...), index_select's out= form, index_copy_, the multi-tensor
 * ops (torch._foreach_norm, torch._foreach_mul_) and the fused optimizer
 * steps (torch._fused_adam_, torch._fused_sgd_). nabla's optimizers,
 * gradient clipping, data loader and process groups are built on these.
 *
 * None of them records autograd (PyTorch's out= and optimizer forms do not
 * either): with grad mode on, writing into a tensor that requires grad
 * fails with NB_ERR_STATE (and so does index_select_out reading one, as
 * PyTorch's out= forms); run them under NB_NO_GRAD. Each bumps the
 * version counter of what it writes, so a tensor saved for backward that
 * shares the storage fails backward instead of giving a wrong gradient.
 * Common errors: NB_ERR_INVALID_ARG (NULL, a bad list, a written tensor
 * with an element stored twice, an expand), NB_ERR_DEVICE (tensors on
 * different devices), NB_ERR_DTYPE, NB_ERR_SHAPE. Kernels: the backend's
 * binary, unary, index_select and multi-tensor slots (autograd/ops_foreach.c).
 */
#ifndef NB_FOREACH_H
#define NB_FOREACH_H

#include "nb_backend.h" /* nb_adam_hyper, nb_sgd_hyper */
#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensor.index_copy_: input's slices at index along dim replaced by
 * source's in place (nb_index_copy's checks and semantics: the last of
 * repeated indices wins; ops_index.c). What a static KV cache's update at
 * a position held on the device needs: nothing of input's size is
 * allocated, and it can be captured in a CUDA graph. input contiguous
 * (NB_ERR_INVALID_ARG otherwise); neither input nor source may require
 * grad while grad mode is on (NB_ERR_STATE). */
nb_status nb_index_copy_(nb_tensor *input, int dim, nb_tensor *index, nb_tensor *source);

/* x = x OP other in place (Tensor.add_, sub_, mul_, div_, maximum_ and
 * minimum_, which propagate NaN as torch.maximum): other
 * broadcasts to x's shape; the result is computed in the promoted dtype
 * (torch.result_type) and stored in x's, which must be of its category or
 * above (a float result into an integer x fails with NB_ERR_DTYPE, as in
 * PyTorch). div_ is true division (an integer x fails). Dtypes: those of
 * the backend's binary kernel (nb_add .. nb_minimum's, and bfloat16/float16
 * for maximum_ and minimum_). */
nb_status nb_add_(nb_tensor *x, const nb_tensor *other);
nb_status nb_sub_(nb_tensor *x, const nb_tensor *other);
nb_status nb_mul_(nb_tensor *x, const nb_tensor *other);
nb_status nb_div_(nb_tensor *x, const nb_tensor *other);
nb_status nb_maximum_(nb_tensor *x, const nb_tensor *other);
nb_status nb_minimum_(nb_tensor *x, const nb_tensor *other);
/* x = x * s in place (Tensor.mul_ with a Python number): float dtypes, and
 * integers when s is integral (PyTorch's result type; NB_ERR_DTYPE else). */
nb_status nb_mul_scalar_(nb_tensor *x, double s);

/* torch.index_select(x, dim, index, out=out): out, contiguous, of x's
 * dtype and shape but index's length along dim; index a 1-D int64 tensor
 * of positions in [0, x's size at dim). dim may be negative. */
nb_status nb_index_select_out(nb_tensor *out, const nb_tensor *x, int dim, const nb_tensor *index);

/* torch._foreach_norm as one tensor: a new 1-D [n] tensor whose element i
 * is the ord-norm of all of xs[i]'s elements ((sum |x|^ord)^(1/ord); ord
 * INFINITY: max |x|; an empty tensor's norm is 0; NaN propagates). n >= 1
 * tensors of one float dtype on one device; ord > 0. One launch where the
 * backend has a multi-tensor norm (CUDA) and the tensors are contiguous
 * float32 or float64 (float32 sums there); otherwise norm by norm with ops
 * (sqrt(sum(x * x)) for ord 2). Deterministic. NULL with the error set. */
nb_tensor *nb_foreach_norm(nb_tensor *const *xs, int n, double ord);
/* xs[i] *= s for each of the n tensors (torch._foreach_mul_ with a tensor):
 * s holds one element, on the tensors' device, read there (a captured CUDA
 * graph reads its current value); it is cast to each tensor's dtype
 * first. One launch where the backend has a multi-tensor multiply and the
 * tensors are contiguous and of s's dtype. */
nb_status nb_foreach_mul_(nb_tensor *const *xs, int n, const nb_tensor *s);

/* One Adam / AdamW update of n parameters in place (torch._fused_adam_ /
 * _fused_adamw_; Kingma & Ba, ICLR 2015; Loshchilov & Hutter, ICLR 2019):
 * the formula of nb_optim.h's Adam with h's hyperparameters (h->step: the
 * step count of this update, from 1). Parameter i's tensors params[i],
 * grads[i], exp_avgs[i], exp_avg_sqs[i] (and max_exp_avg_sqs[i], given
 * exactly when h->amsgrad) are contiguous, of one shape, on one device;
 * every tensor of a call has one dtype, float32 or float64. grads are only
 * read. h->lr_dev / h->step_dev (the capturable form, for steps replayed in
 * a CUDA graph: device float64 values read when the kernel runs) need the
 * backend's multi-tensor kernel (NB_ERR_UNSUPPORTED elsewhere). Launches
 * one kernel per 64 parameters where the backend has one (CUDA, the CPU's
 * loop), with results bit-identical to a call per parameter. */
nb_status nb_fused_adam_(int n, nb_tensor *const *params, nb_tensor *const *grads, nb_tensor *const *exp_avgs,
                         nb_tensor *const *exp_avg_sqs, nb_tensor *const *max_exp_avg_sqs, const nb_adam_hyper *h);
/* One SGD update of n parameters in place (torch._fused_sgd_; the formula
 * of nb_optim.h's SGD): momentum_bufs NULL when h->momentum is 0, else one
 * per parameter (initialised to the gradient when h->first_step). Tensors
 * and h->lr_dev as nb_fused_adam_'s. */
nb_status nb_fused_sgd_(int n, nb_tensor *const *params, nb_tensor *const *grads, nb_tensor *const *momentum_bufs,
                        const nb_sgd_hyper *h);

#ifdef __cplusplus
}
#endif
#endif
