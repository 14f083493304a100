/* nb_optim.h - optimizers (torch.optim's names, defaults and update rules).
 *
 *   nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
 *   for (...) {
 *       nb_scope *s = nb_scope_begin();
 *       nb_zero_grad(opt);
 *       nb_backward(nb_cross_entropy(nb_forward(net, x), y));
 *       nb_step(opt);
 *       nb_scope_end(s);
 *   }
 *   nb_optimizer_free(opt);
 *
 * Options are plain structs written as designated initialisers. A field
 * left 0 takes PyTorch's default (lr 1e-3 for Adam/AdamW, betas (0.9,
 * 0.999), eps 1e-8, AdamW's weight_decay 1e-2; every other default is 0 or
 * false anyway). Where PyTorch's default is not 0, ask for an actual 0 with
 * NB_ZERO: `(nb_adam_options){.weight_decay = NB_ZERO}` is AdamW without
 * weight decay, `.betas = {NB_ZERO, 0.999}` is Adam with beta1 = 0.
 *
 * Parameters: an optimizer keeps its own reference to every parameter
 * (nb_retain), so the module may be freed before or after it. The update
 * itself is the backend's adam_step/sgd_step kernel, in place on the
 * parameter; optimizer state (exp_avg, ...) lives on the parameter's device
 * in its dtype and is created on the first step that sees a gradient.
 * One parameter group with one learning rate (nb_optimizer_set_lr).
 */
#ifndef NB_OPTIM_H
#define NB_OPTIM_H

#include "nb_core.h"
#include "nb_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An explicit zero for an option field whose zero would mean "default":
 * -0.0, which compares equal to 0 and differs only in its sign bit. */
#define NB_ZERO (-0.0)

/* torch.optim.SGD. p: parameter, g: gradient, b: momentum buffer, t: step.
 *   g = maximize ? -grad : grad;  g += weight_decay * p
 *   if momentum: b = (t == 1) ? g : momentum * b + (1 - dampening) * g
 *                g = nesterov ? g + momentum * b : b
 *   p -= lr * g
 * lr has no default here and must be > 0; momentum, dampening and
 * weight_decay >= 0; nesterov needs momentum > 0 and dampening 0. */
typedef struct nb_sgd_options {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    bool nesterov;
    bool maximize;
} nb_sgd_options;

/* torch.optim.Adam / AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019).
 *   g = maximize ? -grad : grad
 *   Adam: g += weight_decay * p;   AdamW: p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
 *   vmax = max(vmax, v) (amsgrad; then v below is vmax)
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Defaults (a field left 0): lr 1e-3, betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0 for Adam and 1e-2 for AdamW. Valid ranges: lr >= 0,
 * 0 <= beta < 1, eps >= 0, weight_decay >= 0. */
typedef struct nb_adam_options {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    bool amsgrad;
    bool maximize;
} nb_adam_options;

typedef struct nb_optimizer nb_optimizer;

/* Optimizers over every parameter of a module (nb_module_parameters, each
 * shared tensor once), or over an explicit list of n distinct float leaf
 * tensors. Return NULL with nb_last_error() set ("adam: lr must be >= 0
 * (got -1)") on: a NULL module or list, an empty parameter list, duplicates,
 * non-float or non-leaf tensors (NB_ERR_INVALID_ARG / NB_ERR_DTYPE); an
 * option out of range (NB_ERR_INVALID_ARG); NB_ERR_OOM. */
nb_optimizer *nb_sgd(nb_module *m, nb_sgd_options opts);
nb_optimizer *nb_adam(nb_module *m, nb_adam_options opts);
nb_optimizer *nb_adamw(nb_module *m, nb_adam_options opts);
nb_optimizer *nb_sgd_params(nb_tensor *const *params, int n, nb_sgd_options opts);
nb_optimizer *nb_adam_params(nb_tensor *const *params, int n, nb_adam_options opts);
nb_optimizer *nb_adamw_params(nb_tensor *const *params, int n, nb_adam_options opts);
/* Releases the state and the optimizer's references to the parameters. NULL is ignored. */
void nb_optimizer_free(nb_optimizer *opt);

/* Drops every parameter's gradient (zero_grad(set_to_none=True)). */
void nb_zero_grad(nb_optimizer *opt);
/* One update of every parameter that has a gradient; the others are
 * skipped (their state and step count unchanged), as PyTorch. Runs under no
 * grad. Errors: NB_ERR_INVALID_ARG (NULL), the kernel's errors (e.g.
 * NB_ERR_UNSUPPORTED on a backend without the slot); parameters before the
 * failing one keep their update. */
nb_status nb_step(nb_optimizer *opt);

/* The learning rate of the (single) parameter group, for schedulers.
 * set_lr fails with NB_ERR_INVALID_ARG unless lr >= 0 and finite. */
double nb_optimizer_get_lr(const nb_optimizer *opt);
nb_status nb_optimizer_set_lr(nb_optimizer *opt, double lr);
/* "SGD", "Adam" or "AdamW". */
const char *nb_optimizer_kind(const nb_optimizer *opt);
/* The options in force, with defaults filled in (NB_ZERO reads as 0);
 * lr follows nb_optimizer_set_lr. Fail (zeroed struct) for another kind. */
nb_sgd_options nb_optimizer_sgd_options(const nb_optimizer *opt);
nb_adam_options nb_optimizer_adam_options(const nb_optimizer *opt);

/* ---- state, for checkpoints ---------------------------------------------- */

/* Number of parameters, and the i-th one (borrowed), in the order given at
 * construction (nb_module_parameters' order for a module). */
int nb_optimizer_num_params(const nb_optimizer *opt);
nb_tensor *nb_optimizer_param(const nb_optimizer *opt, int i);
/* The i-th parameter's state tensor (borrowed, contiguous, the parameter's
 * shape, dtype and device) by PyTorch's state_dict name: "exp_avg",
 * "exp_avg_sq", "max_exp_avg_sq" (amsgrad) for Adam/AdamW, "momentum_buffer"
 * (momentum > 0) for SGD. NULL when the optimizer has no such state, or it
 * has not been created yet (before the first step that saw a gradient). */
nb_tensor *nb_optimizer_state(const nb_optimizer *opt, int i, const char *name);
/* Updates applied to the i-th parameter so far (PyTorch's state "step";
 * also counted for SGD); -1 for a bad index. */
int64_t nb_optimizer_step_count(const nb_optimizer *opt, int i);
/* For loading a checkpoint: creates the i-th parameter's state tensors
 * (zeros, to be overwritten with nb_copy_) if absent and sets its step
 * count (>= 0). A momentum buffer that exists holds history, as in
 * PyTorch's state: the next SGD step computes momentum * b + ... from it
 * rather than starting b from g. Errors: NB_ERR_INVALID_ARG, NB_ERR_OOM. */
nb_status nb_optimizer_init_state(nb_optimizer *opt, int i, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
