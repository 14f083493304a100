/* nb_optim.h - optimizers (torch.optim's names, defaults and update rules).
 *
 *   nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
 *   for (...) {
 *       nb_scope *s = nb_scope_begin();
 *       nb_optimizer_zero_grad(opt);
 *       nb_backward(nb_cross_entropy(nb_forward(net, x), y));
 *       nb_optimizer_step(opt);
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
void nb_optimizer_zero_grad(nb_optimizer *opt);
/* One update of every parameter that has a gradient; the others are
 * skipped (their state and step count unchanged), as PyTorch. Runs under no
 * grad. Errors: NB_ERR_INVALID_ARG (NULL), the kernel's errors (e.g.
 * NB_ERR_UNSUPPORTED on a backend without the slot); parameters before the
 * failing one keep their update. */
nb_status nb_optimizer_step(nb_optimizer *opt);

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

/* ---- learning-rate schedulers (optim/scheduler.c) ------------------------
 * torch.optim.lr_scheduler with one parameter group:
 *
 *   nb_scheduler *sch = nb_sequential_lr(opt, (nb_scheduler *[]){
 *           nb_linear_lr(opt, 0.1, 1.0, 5),
 *           nb_cosine_annealing_lr(opt, 95, 0.0)}, 2, (int64_t[]){5});
 *   for (epoch...) { ...train...; nb_scheduler_step(sch); }
 *   nb_scheduler_free(sch);
 *
 * A scheduler reads and writes the optimizer's lr (nb_optimizer_get_lr /
 * nb_optimizer_set_lr); the optimizer must outlive it. Constructing one
 * performs PyTorch's initial step (last_epoch -1 -> 0), which sets the lr
 * of step 0, and remembers the lr it found as its base lr (PyTorch's group
 * "initial_lr"; OneCycleLR's is max_lr / div_factor).
 *
 * The lr after each step is computed exactly as PyTorch 1.13/2.x's get_lr
 * does, including its recursive ("chainable") forms, which multiply the
 * optimizer's current lr rather than evaluating a closed form in the step
 * count: StepLR/MultiStepLR/ExponentialLR multiply by gamma,
 * CosineAnnealingLR uses
 *   lr_t = (1 + cos(pi t / T)) / (1 + cos(pi (t-1) / T)) * (lr_{t-1} - eta_min) + eta_min
 * (with PyTorch's special case when (t - 1 - T) % 2T == 0), LinearLR
 *   lr_t = lr_{t-1} * (1 + (e - s) / (T s + (t - 1)(e - s)))   (t <= T).
 * So an lr set by hand between steps carries into the next one, as in
 * PyTorch, and the sequences match PyTorch's float64 values bit for bit
 * (same operations in the same order; checked against torch 1.13 with
 * glibc's cos over 100 steps of every scheduler here).
 *
 * Differences from PyTorch: the base lr is per scheduler (two independent
 * schedulers over one optimizer: the second takes the lr the first left as
 * its base, where PyTorch reuses the group's "initial_lr"; SequentialLR
 * reproduces the shared initial_lr exactly, see there). No last_epoch
 * constructor argument (resume with nb_scheduler_set_state); OneCycleLR
 * does not cycle momentum (as cycle_momentum=False).
 *
 * Constructors return NULL with nb_last_error() set on a NULL optimizer, an
 * argument out of PyTorch's range (NB_ERR_INVALID_ARG), NB_ERR_OOM. */
typedef struct nb_scheduler nb_scheduler;

/* StepLR: lr *= gamma every step_size steps (step_size >= 1, gamma >= 0). */
nb_scheduler *nb_step_lr(nb_optimizer *opt, int64_t step_size, double gamma);
/* MultiStepLR: lr *= gamma^k at step m, k = how many times m is among the
 * n milestones (any order, repeats allowed, n >= 0; copied). gamma >= 0. */
nb_scheduler *nb_multi_step_lr(nb_optimizer *opt, const int64_t *milestones, int n, double gamma);
/* ExponentialLR: lr *= gamma every step (gamma >= 0). */
nb_scheduler *nb_exponential_lr(nb_optimizer *opt, double gamma);
/* CosineAnnealingLR (Loshchilov & Hutter 2017, SGDR without restarts), in
 * PyTorch's recursive form above; continues past T_max (the cosine rises
 * again). T_max >= 1, eta_min >= 0 and finite. */
nb_scheduler *nb_cosine_annealing_lr(nb_optimizer *opt, int64_t T_max, double eta_min);
/* LinearLR (warmup): the lr factor goes linearly from start_factor at step
 * 0 to end_factor at step total_iters, then stays. PyTorch's defaults are
 * (1/3, 1.0, 5). 0 < start_factor <= 1, 0 <= end_factor <= 1,
 * total_iters >= 1. */
nb_scheduler *nb_linear_lr(nb_optimizer *opt, double start_factor, double end_factor, int64_t total_iters);

typedef enum nb_anneal_strategy { NB_ANNEAL_COS = 0, NB_ANNEAL_LINEAR } nb_anneal_strategy;

/* OneCycleLR's options (Smith & Topin 2017, "Super-Convergence"). A field
 * left 0 takes PyTorch's default: pct_start 0.3 (NB_ZERO for 0),
 * anneal_strategy cos, div_factor 25, final_div_factor 1e4, three_phase
 * false. 0 <= pct_start <= 1, div_factor > 0, final_div_factor > 0. */
typedef struct nb_one_cycle_options {
    double pct_start;
    nb_anneal_strategy anneal_strategy;
    double div_factor;
    double final_div_factor;
    bool three_phase;
} nb_one_cycle_options;

/* OneCycleLR over total_steps (>= 1) steps: from initial_lr = max_lr /
 * div_factor up to max_lr at step pct_start * total_steps - 1, then down to
 * min_lr = initial_lr / final_div_factor at step total_steps - 1 (three
 * phase: up, back down to initial_lr at 2 pct_start total_steps - 2, then
 * to min_lr). Ignores the optimizer's lr, as PyTorch. Stepping past step
 * total_steps fails (NB_ERR_STATE, "Tried to step ... times"), as PyTorch;
 * a phase of zero length reached fails with NB_ERR_INVALID_ARG (PyTorch's
 * ZeroDivisionError). max_lr >= 0 and finite. One difference: at step
 * total_steps (the lr after the last update, never used by one) the linear
 * anneal extrapolates below min_lr and can be negative in PyTorch
 * (-0.00714 for max_lr 0.5 over 100 steps); an optimizer lr must be >= 0,
 * so it is clamped to 0. Momentum is not cycled (cycle_momentum=False):
 * that would need a momentum/beta1 setter on nb_optimizer. */
nb_scheduler *nb_one_cycle_lr(nb_optimizer *opt, double max_lr, int64_t total_steps, nb_one_cycle_options opts);

/* SequentialLR: schedulers[0] runs until step milestones[0], where
 * schedulers[1] takes over (stepped to its epoch 0 with its closed form,
 * PyTorch's scheduler.step(0)), and so on; n >= 1 schedulers and n - 1
 * non-decreasing milestones (copied). Takes ownership of the n children
 * ALWAYS, also when it fails (so a NULL child from a failed nested
 * constructor neither leaks the others nor crashes: it is an error).
 * The children must be over opt, created in array order as in PyTorch's
 * examples, and not themselves SequentialLR. As PyTorch, it resets the lr
 * to the group's initial_lr (children[0]'s base lr, or the base lr of the
 * last OneCycleLR child, which overwrote it in PyTorch; each later child's
 * base lr is set to that), undoes every child's initial step and redoes
 * children[0]'s. */
nb_scheduler *nb_sequential_lr(nb_optimizer *opt, nb_scheduler *const *schedulers, int n, const int64_t *milestones);

/* scheduler.step(): advances one step and sets the optimizer's lr. On
 * error (NULL; OneCycleLR past total_steps; an lr that set_lr rejects, e.g.
 * NaN) the scheduler and the lr are unchanged. */
nb_status nb_scheduler_step(nb_scheduler *s);
/* get_last_lr()[0]: the lr the scheduler last set (NAN for NULL). */
double nb_scheduler_get_last_lr(const nb_scheduler *s);
/* last_epoch: steps taken since construction (0 right after it); -1 for NULL. */
int64_t nb_scheduler_last_epoch(const nb_scheduler *s);
/* "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
 * "LinearLR", "OneCycleLR", "SequentialLR" (NULL for NULL). */
const char *nb_scheduler_kind(const nb_scheduler *s);
/* Frees the scheduler and, for SequentialLR, its children. NULL is ignored. */
void nb_scheduler_free(nb_scheduler *s);

/* ---- scheduler state, for checkpoints ---------------------------------------
 * Everything that changes as a scheduler steps; the hyperparameters are not
 * state (rebuild the scheduler with the same constructor, then set_state).
 * A scheduler has nb_scheduler_num_states(s) records: 1, or for SequentialLR
 * 1 + n, its own (index 0) then its children's in order. A child that has
 * not run yet has last_epoch -1 (PyTorch's value after SequentialLR undid
 * its initial step). The exact float64 values restore the exact sequence:
 * after set_state the next steps are bit-identical to those of the
 * scheduler that get_state was called on. */
typedef struct nb_scheduler_state {
    int64_t last_epoch; /* PyTorch's last_epoch */
    double base_lr;     /* base_lrs[0] (the group's "initial_lr") */
    double last_lr;     /* _last_lr[0] */
} nb_scheduler_state;

int nb_scheduler_num_states(const nb_scheduler *s);
/* Writes the num_states records to out (n must equal num_states). */
nb_status nb_scheduler_get_state(const nb_scheduler *s, nb_scheduler_state *out, int n);
/* Restores the records (n must equal num_states) and sets the optimizer's
 * lr to in[0].last_lr, the lr the scheduler last set: the recursive forms
 * continue from the optimizer's lr, so this alone resumes exactly (restore
 * the optimizer's lr afterwards only if it was changed by hand after the
 * last step). Errors, leaving everything unchanged: NB_ERR_INVALID_ARG
 * (NULL, wrong n, last_epoch < 0 at index 0 or < -1 for a child,
 * an lr negative or not finite, OneCycleLR's last_epoch > total_steps). */
nb_status nb_scheduler_set_state(nb_scheduler *s, const nb_scheduler_state *in, int n);

/* ---- gradient clipping (optim/clip.c) ---------------------------------------
 * torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a
 * gradient are skipped (and NULL entries are an error). Gradients are
 * changed in place (their storage is kept, so views of it see the change),
 * under no grad, computed in the gradient's dtype and device as PyTorch.
 *
 * clip_grad_norm_: total_norm = the norm_type-norm of the per-gradient
 * norm_type-norms (= the norm of all gradients concatenated); for
 * norm_type INFINITY the max of |g|. Then, as PyTorch,
 *   clip_coef = min(max_norm / (total_norm + 1e-6), 1.0)
 * and every gradient is multiplied by clip_coef (a no-op factor of 1 when
 * total_norm <= max_norm - 1e-6). *total_norm_out (may be NULL) gets
 * total_norm before clipping, as a double (0 with no gradients; NaN/inf
 * pass through as with error_if_nonfinite=False). norm_type: > 0 or INFINITY
 * (2.0 is the usual one); max_norm >= 0 (INFINITY only measures). Gradients of different
 * dtypes have their norms promoted to float64 (PyTorch would reject mixing).
 * Errors: NB_ERR_INVALID_ARG (NULL list or entry, n < 0, bad max_norm or
 * norm_type), the ops' errors. */
nb_status nb_clip_grad_norm_(nb_tensor *const *params, int n, double max_norm, double norm_type,
                             double *total_norm_out);
/* The same over nb_module_parameters(m). */
nb_status nb_clip_grad_norm_module_(nb_module *m, double max_norm, double norm_type, double *total_norm_out);
/* clip_grad_value_: every gradient element clamped to [-clip_value,
 * clip_value] (clip_value >= 0 and finite). NaN stays NaN. Errors as above. */
nb_status nb_clip_grad_value_(nb_tensor *const *params, int n, double clip_value);
nb_status nb_clip_grad_value_module_(nb_module *m, double clip_value);

#ifdef __cplusplus
}
#endif
#endif
