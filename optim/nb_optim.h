/* nb_optim.h - optimizers (torch.optim's names, defaults, update rules and
 * parameter groups) and gradient clipping. Learning-rate schedulers are in
 * nb_lr_scheduler.h (included at the end); the table of every optimizer and
 * option is optim/OPTIM.md.
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
 * left 0 takes PyTorch's default (each struct lists them). Where PyTorch's
 * default is not 0, ask for an actual 0 with NB_ZERO:
 * `(nb_adam_options){.weight_decay = NB_ZERO}` is AdamW without weight
 * decay, `.betas = {NB_ZERO, 0.999}` is Adam with beta1 = 0. A yes/no
 * option whose PyTorch default is true is an nb_flag.
 *
 * Parameter groups (torch.optim's param_groups): every kind has three
 * constructors, nb_<kind>(module, opts) over a module's parameters,
 * nb_<kind>_params(list, n, opts) over a list, and nb_<kind>_groups(groups,
 * n_groups, opts) over several groups, each with its own hyperparameters:
 *
 *   nb_decay_split sp;                    // BERT's recipe: no decay on biases and norms
 *   nb_decay_split_module(net, &sp);
 *   nb_optimizer *opt = nb_adamw_groups((nb_param_group[]){
 *           {sp.decay, sp.n_decay, NULL},
 *           {sp.no_decay, sp.n_no_decay, &(nb_adam_options){.weight_decay = NB_ZERO}}},
 *       2, (nb_adam_options){.lr = 1e-4, .weight_decay = 0.01});
 *   nb_decay_split_free(&sp);
 *
 * A group's options struct (of the optimizer's own options type) overrides
 * the constructor's options field by field, as a PyTorch group dict
 * overrides the defaults: a field left 0 (or a NULL struct) inherits the
 * constructor's value, NB_ZERO asks for 0. A bool field is true in a group
 * when the group or the constructor sets it (a group can turn a flag on, not
 * off). Groups may be added later (nb_optimizer_add_param_group).
 *
 * Parameters: an optimizer keeps its own reference to every parameter
 * (nb_retain), so the module may be freed before or after it. Parameter i
 * is the i-th of the groups' lists, group after group (PyTorch's state_dict
 * numbering). Optimizer state (exp_avg, ...) lives on the parameter's
 * device in its dtype and is created on the first step that sees a
 * gradient. SGD and Adam/AdamW run as fused backend kernels (adam_step,
 * sgd_step); the others are compositions of nabla ops, so they run on any
 * device. Results do not depend on PyTorch's foreach/fused switches (there
 * are none) and match torch.optim's float64 trajectories (tests/optim_ref).
 */
#ifndef NB_OPTIM_H
#define NB_OPTIM_H

#include "nb_core.h"
#include "nb_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options, one struct per optimizer (p: parameter, g: gradient,
 * t: this step from 1; maximize negates g first; every lr >= 0 and every
 * weight_decay >= 0; the formulas are torch.optim's, documented on
 * pytorch.org/docs/stable/generated/torch.optim.<Name>.html) ------------- */

/* torch.optim.SGD.
 *   g += weight_decay * p
 *   if momentum: b = (t == 1) ? g : momentum * b + (1 - dampening) * g
 *                g = nesterov ? g + momentum * b : b
 *   p -= lr * g
 * lr >= 0, default 1e-3 (PyTorch's since 2.2; NB_ZERO for 0);
 * momentum and weight_decay >= 0; nesterov needs momentum > 0 and
 * dampening 0. State: momentum_buffer (momentum != 0). */
typedef struct nb_sgd_options {
    double lr;           /* learning rate, >= 0; default 1e-3 (NB_ZERO for 0) */
    double momentum;     /* momentum factor, >= 0; default 0 (plain SGD) */
    double dampening;    /* dampening of the momentum's gradient term, finite; default 0 */
    double weight_decay; /* L2 penalty added to the gradient, >= 0; default 0 */
    bool nesterov;       /* Nesterov momentum (needs momentum > 0, dampening 0); default false */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_sgd_options;

/* torch.optim.Adam / AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019).
 *   Adam: g += weight_decay * p;   AdamW (or decoupled_weight_decay): p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
 *   vmax = max(vmax, v) (amsgrad; then v below is vmax)
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0 for Adam
 * and 1e-2 for AdamW. 0 <= beta < 1, eps >= 0. decoupled_weight_decay makes
 * Adam AdamW (PyTorch 2.11's Adam option). State: exp_avg, exp_avg_sq,
 * max_exp_avg_sq (amsgrad). */
typedef struct nb_adam_options {
    double lr;                   /* learning rate, >= 0; default 1e-3 */
    double betas[2];             /* beta1, beta2: running-average coefficients of g and g^2, each in [0, 1);
                                    default (0.9, 0.999) (NB_ZERO for 0) */
    double eps;                  /* added to the denominator, >= 0; default 1e-8 */
    double weight_decay;         /* L2 penalty (Adam) or decoupled decay (AdamW), >= 0; default 0 for Adam,
                                    1e-2 for AdamW (NB_ZERO for 0) */
    bool amsgrad;                /* keep the running max of v (AMSGrad, Reddi et al. 2018); default false */
    bool maximize;               /* ascend the objective (negate g); default false */
    bool decoupled_weight_decay; /* Adam decays p as AdamW does; default false (AdamW always decouples) */
} nb_adam_options;

/* torch.optim.Adadelta (Zeiler 2012, "ADADELTA").
 *   g += weight_decay * p;   v = rho * v + (1 - rho) * g^2
 *   delta = sqrt(u + eps) / sqrt(v + eps) * g;   u = rho * u + (1 - rho) * delta^2
 *   p -= lr * delta
 * Defaults: lr 1.0, rho 0.9, eps 1e-6. 0 <= rho <= 1.
 * State: square_avg (v), acc_delta (u). */
typedef struct nb_adadelta_options {
    double lr;           /* scale of delta, >= 0; default 1.0 */
    double rho;          /* running-average coefficient of g^2 and delta^2, in [0, 1]; default 0.9 */
    double eps;          /* added inside both square roots, >= 0; default 1e-6 */
    double weight_decay; /* L2 penalty added to the gradient, >= 0; default 0 */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_adadelta_options;

/* torch.optim.Adafactor (Shazeer & Stern 2018), PyTorch's variant:
 *   beta2_t = 1 - t^beta2_decay;   rho = min(lr, 1 / sqrt(t))
 *   alpha = max(eps[1], RMS(p)) * rho;   p *= 1 - lr * weight_decay
 *   ndim >= 2 (factored over the last two dims, [..., R, C]):
 *     row = lerp(row, mean(g^2, -1), 1 - beta2_t)   [..., R, 1]
 *     col = lerp(col, mean(g^2, -2), 1 - beta2_t)   [..., 1, C]
 *     v = row * col / max(mean(row, -2), eps[0])
 *   else: v = lerp(v, g^2, 1 - beta2_t)
 *   u = g / sqrt(max(v, eps[0]^2));   p -= alpha / max(1, RMS(u) / d) * u
 * Defaults: lr 1e-2, beta2_decay -0.8 (<= 0), eps (None, 1e-3) where None
 * (eps[0] left 0) is the dtype's machine epsilon, d 1.0 (>= 1), weight_decay 0.
 * State: row_var, col_var (ndim >= 2) or variance. */
typedef struct nb_adafactor_options {
    double lr;           /* learning rate (rho's cap), >= 0; default 1e-2 */
    double beta2_decay;  /* exponent of beta2_t = 1 - t^beta2_decay, <= 0 and finite; default -0.8 */
    double eps[2];       /* eps[0]: floor of sqrt(v) and of mean(row), >= 0, left 0 the dtype's
                            machine epsilon (PyTorch's None; NB_ZERO for 0); eps[1]: floor of RMS(p), >= 0,
                            default 1e-3 */
    double d;            /* update clipping threshold, >= 1 and finite; default 1.0 */
    double weight_decay; /* decoupled decay (p *= 1 - lr * weight_decay), >= 0; default 0 */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_adafactor_options;

/* torch.optim.Adagrad (Duchi et al. 2011).
 *   g += weight_decay * p;   clr = lr / (1 + (t - 1) * lr_decay)
 *   s += g^2;   p -= clr * g / (sqrt(s) + eps)
 * Defaults: lr 1e-2, lr_decay 0, initial_accumulator_value 0, eps 1e-10.
 * State: sum (starts at initial_accumulator_value). */
typedef struct nb_adagrad_options {
    double lr;                        /* learning rate, >= 0; default 1e-2 */
    double lr_decay;                  /* lr decay per step (clr above), >= 0; default 0 */
    double weight_decay;              /* L2 penalty added to the gradient, >= 0; default 0 */
    double initial_accumulator_value; /* starting value of the state sum, >= 0; default 0 */
    double eps;                       /* added to the denominator, >= 0; default 1e-10 */
    bool maximize;                    /* ascend the objective (negate g); default false */
} nb_adagrad_options;

/* torch.optim.Adamax (Kingma & Ba 2015, section 7).
 *   g += weight_decay * p;   m = beta1 * m + (1 - beta1) * g
 *   u = max(beta2 * u, |g| + eps);   p -= lr / (1 - beta1^t) * m / u
 * Defaults: lr 2e-3, betas (0.9, 0.999), eps 1e-8. State: exp_avg, exp_inf. */
typedef struct nb_adamax_options {
    double lr;           /* learning rate, >= 0; default 2e-3 */
    double betas[2];     /* beta1 (average of g), beta2 (decay of the infinity norm u), each in [0, 1);
                            default (0.9, 0.999) (NB_ZERO for 0) */
    double eps;          /* added to |g| in u, >= 0; default 1e-8 */
    double weight_decay; /* L2 penalty added to the gradient, >= 0; default 0 */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_adamax_options;

/* torch.optim.ASGD (Polyak & Juditsky 1992).
 *   g += weight_decay * p;   p *= 1 - lambd * eta;   p -= eta * g
 *   ax = (mu == 1) ? p : ax + mu * (p - ax)
 *   eta = lr / (1 + lambd * lr * t)^alpha;   mu = 1 / max(1, t - t0)
 * Defaults: lr 1e-2, lambd 1e-4, alpha 0.75, t0 1e6. State: ax (the
 * average), eta, mu (scalars; eta starts at lr, mu at 1). */
typedef struct nb_asgd_options {
    double lr;           /* learning rate (eta's start), >= 0; default 1e-2 */
    double lambd;        /* decay term, >= 0; default 1e-4 */
    double alpha;        /* power of eta's decay, finite; default 0.75 */
    double t0;           /* step from which the average ax is taken, finite; default 1e6 */
    double weight_decay; /* L2 penalty added to the gradient, >= 0; default 0 */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_asgd_options;

/* LBFGS's line_search_fn (PyTorch's None or "strong_wolfe"). */
typedef enum nb_line_search {
    NB_LINE_SEARCH_NONE = 0,    /* none: a fixed step of lr (PyTorch's line_search_fn=None) */
    NB_LINE_SEARCH_STRONG_WOLFE /* strong-Wolfe line search ("strong_wolfe") */
} nb_line_search;

/* torch.optim.LBFGS (Nocedal 1980; after minFunc): up to max_iter L-BFGS
 * iterations per step over all parameters as one flat vector, with a fixed
 * step lr or a strong-Wolfe line search (c1 1e-4, c2 0.9, 25 evaluations).
 * It re-evaluates the loss, so it needs nb_optimizer_step_closure. One
 * parameter group only (as PyTorch). Defaults: lr 1, max_iter 20, max_eval
 * max_iter * 5 / 4, tolerance_grad 1e-7, tolerance_change 1e-9,
 * history_size 100, no line search. State (on parameter 0, PyTorch's
 * names): tensors d, prev_flat_grad, old_dirs [k, N], old_stps [k, N], ro
 * [k]; scalars func_evals, n_iter, t, H_diag, prev_loss. */
typedef struct nb_lbfgs_options {
    double lr;                     /* step size (the line search's first trial step), >= 0; default 1 */
    int64_t max_iter;              /* L-BFGS iterations per step, >= 1; default 20 */
    int64_t max_eval;              /* loss evaluations per step, >= 1; default max_iter * 5 / 4 */
    double tolerance_grad;         /* stop when max |flat gradient| <= this, >= 0; default 1e-7 */
    double tolerance_change;       /* stop when the step or the loss changes by less, >= 0; default 1e-9 */
    int64_t history_size;          /* curvature pairs kept, >= 1; default 100 */
    nb_line_search line_search_fn; /* line search; default NB_LINE_SEARCH_NONE (fixed step lr) */
} nb_lbfgs_options;

/* torch.optim.NAdam (Dozat 2016, "Incorporating Nesterov momentum into Adam").
 *   g += weight_decay * p  (or p *= 1 - lr * weight_decay, decoupled_weight_decay)
 *   mu_t = beta1 (1 - 0.5 * 0.96^(t psi));   P = prod mu_1..t (state mu_product)
 *   m = lerp(m, g, 1 - beta1);   v = beta2 v + (1 - beta2) g^2
 *   denom = sqrt(v / (1 - beta2^t)) + eps
 *   p -= lr (1 - mu_t) / (1 - P) * g / denom + lr mu_{t+1} / (1 - P mu_{t+1}) * m / denom
 * Defaults: lr 2e-3, betas (0.9, 0.999), eps 1e-8, momentum_decay (psi) 4e-3.
 * State: exp_avg, exp_avg_sq; scalar mu_product. */
typedef struct nb_nadam_options {
    double lr;                   /* learning rate, >= 0; default 2e-3 */
    double betas[2];             /* beta1, beta2: running-average coefficients of g and g^2, each in [0, 1);
                                    default (0.9, 0.999) (NB_ZERO for 0) */
    double eps;                  /* added to the denominator, >= 0; default 1e-8 */
    double weight_decay;         /* L2 penalty, or decoupled decay with decoupled_weight_decay, >= 0; default 0 */
    double momentum_decay;       /* psi of the momentum schedule mu_t, >= 0; default 4e-3 (NB_ZERO for 0) */
    bool decoupled_weight_decay; /* decay p as AdamW (p *= 1 - lr * weight_decay); default false */
    bool maximize;               /* ascend the objective (negate g); default false */
} nb_nadam_options;

/* torch.optim.RAdam (Liu et al. 2020, "On the variance of the adaptive learning rate").
 *   g += weight_decay * p  (or p *= 1 - lr * weight_decay, decoupled_weight_decay)
 *   m = lerp(m, g, 1 - beta1);   v = beta2 v + (1 - beta2) g^2
 *   rho_inf = 2 / (1 - beta2) - 1;   rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
 *   rho_t > 5: r = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
 *              p -= lr m / (1 - beta1^t) * sqrt(1 - beta2^t) / (sqrt(v) + eps) * r
 *   else:      p -= lr m / (1 - beta1^t)
 * Defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8. State: exp_avg, exp_avg_sq. */
typedef struct nb_radam_options {
    double lr;                   /* learning rate, >= 0; default 1e-3 */
    double betas[2];             /* beta1, beta2: running-average coefficients of g and g^2, each in [0, 1);
                                    default (0.9, 0.999) (NB_ZERO for 0) */
    double eps;                  /* added to the denominator, >= 0; default 1e-8 */
    double weight_decay;         /* L2 penalty, or decoupled decay with decoupled_weight_decay, >= 0; default 0 */
    bool decoupled_weight_decay; /* decay p as AdamW (p *= 1 - lr * weight_decay); default false */
    bool maximize;               /* ascend the objective (negate g); default false */
} nb_radam_options;

/* torch.optim.RMSprop (Hinton's lecture 6e; centered: Graves 2013).
 *   g += weight_decay * p;   v = alpha v + (1 - alpha) g^2
 *   centered: ga = lerp(ga, g, 1 - alpha); avg = sqrt(v - ga^2) + eps  else avg = sqrt(v) + eps
 *   momentum > 0: b = momentum b + g / avg; p -= lr b    else p -= lr g / avg
 * Defaults: lr 1e-2, alpha 0.99, eps 1e-8, momentum 0. State: square_avg,
 * momentum_buffer (momentum > 0), grad_avg (centered). */
typedef struct nb_rmsprop_options {
    double lr;           /* learning rate, >= 0; default 1e-2 */
    double alpha;        /* smoothing constant of v (and ga), >= 0; default 0.99 (NB_ZERO for 0) */
    double eps;          /* added to the denominator, >= 0; default 1e-8 */
    double weight_decay; /* L2 penalty added to the gradient, >= 0; default 0 */
    double momentum;     /* momentum factor, >= 0; default 0 (no momentum buffer) */
    bool centered;       /* normalise by the centered variance v - ga^2; default false */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_rmsprop_options;

/* torch.optim.Rprop (Riedmiller & Braun 1993, iRprop-).
 *   s = sign(g * prev);  eta = etaplus (s > 0), etaminus (s < 0), 1 (s = 0)
 *   step_size = clamp(step_size * eta, step_sizes[0], step_sizes[1])
 *   g = 0 where s < 0;   p -= sign(g) * step_size;   prev = g
 * lr is only the initial step size. Defaults: lr 1e-2, etas (0.5, 1.2)
 * (0 < etaminus < 1 < etaplus), step_sizes (1e-6, 50).
 * State: prev, step_size. */
typedef struct nb_rprop_options {
    double lr;            /* initial step size, >= 0; default 1e-2 */
    double etas[2];       /* etaminus, etaplus: step size factors, 0 < etaminus < 1 < etaplus (finite);
                             default (0.5, 1.2) */
    double step_sizes[2]; /* minimum, maximum step size, 0 <= min <= max (finite); default (1e-6, 50) */
    bool maximize;        /* ascend the objective (negate g); default false */
} nb_rprop_options;

/* Lion (Chen et al. 2023, "Symbolic discovery of optimization algorithms",
 * Algorithm 2; not in torch.optim):
 *   p *= 1 - lr * weight_decay;   c = beta1 m + (1 - beta1) g
 *   p -= lr * sign(c);            m = beta2 m + (1 - beta2) g
 * Defaults (the paper's): lr 1e-4, betas (0.9, 0.99), weight_decay 0.
 * State: exp_avg. */
typedef struct nb_lion_options {
    double lr;           /* learning rate, >= 0; default 1e-4 */
    double betas[2];     /* beta1 (interpolation c), beta2 (average m), each in [0, 1];
                            default (0.9, 0.99) (NB_ZERO for 0) */
    double weight_decay; /* decoupled decay (p *= 1 - lr * weight_decay), >= 0; default 0 */
    bool maximize;       /* ascend the objective (negate g); default false */
} nb_lion_options;

/* How Muon scales lr by the weight's shape [A, B]: "original" (Keller
 * Jordan) sqrt(max(1, A / B)); "match_rms_adamw" (Moonshot, Liu et al. 2025)
 * 0.2 sqrt(max(A, B)). */
typedef enum nb_muon_adjust_lr {
    NB_MUON_ADJUST_ORIGINAL = 0,   /* "original": lr sqrt(max(1, A / B)) */
    NB_MUON_ADJUST_MATCH_RMS_ADAMW /* "match_rms_adamw": lr 0.2 sqrt(max(A, B)) */
} nb_muon_adjust_lr;

/* Muon (K. Jordan 2024, "Muon: an optimizer for hidden layers"), as
 * torch.optim.Muon (PyTorch 2.9+), for 2-D parameters:
 *   b = lerp(b, g, 1 - momentum);   u = nesterov ? lerp(g, b, momentum) : b
 *   O = NewtonSchulz(u): X = u / max(||u||_F, eps) (transposed if A > B), then
 *       ns_steps times: G = X X^T; X = a X + (b G + c G G) X
 *   p *= 1 - lr * weight_decay;   p -= adjust(lr, shape) * O
 * The Newton-Schulz iteration runs in the parameter's dtype (PyTorch's in
 * bfloat16). Parameters that are not 2-D, and every parameter of a group
 * with adamw set (embeddings and the output head in the modded-nanogpt
 * recipe, Keller Jordan's MuonWithAuxAdam use_muon=False), get AdamW with
 * the group's lr and weight_decay and adamw_betas, adamw_eps.
 * Defaults: lr 1e-3, weight_decay 0.1, momentum 0.95, nesterov true,
 * ns_coefficients (3.4445, -4.7750, 2.0315), eps 1e-7, ns_steps 5 (< 100),
 * adjust original; adamw_betas (0.9, 0.999), adamw_eps 1e-8.
 * State: momentum_buffer (Muon), exp_avg, exp_avg_sq (AdamW). */
typedef struct nb_muon_options {
    double lr;                      /* learning rate (before adjust), >= 0; default 1e-3 */
    double weight_decay;            /* decoupled decay, >= 0 (also the AdamW part's); default 0.1 (NB_ZERO for 0) */
    double momentum;                /* momentum factor, >= 0; default 0.95 (NB_ZERO for 0) */
    nb_flag nesterov;               /* Nesterov momentum; default true (NB_FLAG_FALSE for false) */
    double ns_coefficients[3];      /* a, b, c of the Newton-Schulz iteration, finite;
                                       default (3.4445, -4.7750, 2.0315) */
    double eps;                     /* floor of ||u||_F, >= 0; default 1e-7 */
    int64_t ns_steps;               /* Newton-Schulz iterations, < 100; default 5 */
    nb_muon_adjust_lr adjust_lr_fn; /* lr scaling by the shape; default NB_MUON_ADJUST_ORIGINAL */
    bool adamw;                     /* every parameter of the group gets AdamW (nabla's option, not PyTorch's);
                                       default false */
    double adamw_betas[2];          /* beta1, beta2 of the AdamW part, each in [0, 1); default (0.9, 0.999) */
    double adamw_eps;               /* eps of the AdamW part, >= 0; default 1e-8 */
} nb_muon_options;

/* ---- construction ------------------------------------------------------------ */

/* An optimizer (torch.optim.Optimizer): its kind, parameter groups with
 * their hyperparameters, and per-parameter state. Opaque; made by the
 * constructors below, freed with nb_optimizer_free. */
typedef struct nb_optimizer nb_optimizer;

/* One parameter group: n parameters (borrowed for the call) and an
 * options struct of the optimizer's type (NULL: the constructor's). */
typedef struct nb_param_group {
    nb_tensor *const *params; /* the group's n parameters: distinct float leaf tensors (borrowed) */
    int n;                    /* number of parameters, >= 0 */
    const void *options;      /* options struct of the optimizer's kind (nb_adam_options, ...) overriding
                                 the constructor's field by field, or NULL (the constructor's) */
} nb_param_group;

/* Optimizers over every parameter of a module (nb_module_parameters, each
 * shared tensor once), over an explicit list of n distinct float leaf
 * tensors, or over n_groups groups. Return NULL with nb_last_error() set
 * ("adam: lr must be >= 0 (got -1)") on: a NULL module or list, an empty
 * parameter list (a group may be empty; not all of them), a parameter in
 * two places, non-float or non-leaf tensors (NB_ERR_INVALID_ARG /
 * NB_ERR_DTYPE); an option out of range (NB_ERR_INVALID_ARG); Muon with no
 * matrix to orthogonalise is fine (all AdamW); LBFGS with several groups
 * (NB_ERR_INVALID_ARG); NB_ERR_OOM. */
nb_optimizer *nb_sgd(nb_module *m, nb_sgd_options opts);
nb_optimizer *nb_sgd_params(nb_tensor *const *params, int n, nb_sgd_options opts);
nb_optimizer *nb_sgd_groups(const nb_param_group *groups, int n_groups, nb_sgd_options opts);
nb_optimizer *nb_adam(nb_module *m, nb_adam_options opts);
nb_optimizer *nb_adam_params(nb_tensor *const *params, int n, nb_adam_options opts);
nb_optimizer *nb_adam_groups(const nb_param_group *groups, int n_groups, nb_adam_options opts);
nb_optimizer *nb_adamw(nb_module *m, nb_adam_options opts);
nb_optimizer *nb_adamw_params(nb_tensor *const *params, int n, nb_adam_options opts);
nb_optimizer *nb_adamw_groups(const nb_param_group *groups, int n_groups, nb_adam_options opts);
nb_optimizer *nb_adadelta(nb_module *m, nb_adadelta_options opts);
nb_optimizer *nb_adadelta_params(nb_tensor *const *params, int n, nb_adadelta_options opts);
nb_optimizer *nb_adadelta_groups(const nb_param_group *groups, int n_groups, nb_adadelta_options opts);
nb_optimizer *nb_adafactor(nb_module *m, nb_adafactor_options opts);
nb_optimizer *nb_adafactor_params(nb_tensor *const *params, int n, nb_adafactor_options opts);
nb_optimizer *nb_adafactor_groups(const nb_param_group *groups, int n_groups, nb_adafactor_options opts);
nb_optimizer *nb_adagrad(nb_module *m, nb_adagrad_options opts);
nb_optimizer *nb_adagrad_params(nb_tensor *const *params, int n, nb_adagrad_options opts);
nb_optimizer *nb_adagrad_groups(const nb_param_group *groups, int n_groups, nb_adagrad_options opts);
nb_optimizer *nb_adamax(nb_module *m, nb_adamax_options opts);
nb_optimizer *nb_adamax_params(nb_tensor *const *params, int n, nb_adamax_options opts);
nb_optimizer *nb_adamax_groups(const nb_param_group *groups, int n_groups, nb_adamax_options opts);
nb_optimizer *nb_asgd(nb_module *m, nb_asgd_options opts);
nb_optimizer *nb_asgd_params(nb_tensor *const *params, int n, nb_asgd_options opts);
nb_optimizer *nb_asgd_groups(const nb_param_group *groups, int n_groups, nb_asgd_options opts);
nb_optimizer *nb_lbfgs(nb_module *m, nb_lbfgs_options opts);
nb_optimizer *nb_lbfgs_params(nb_tensor *const *params, int n, nb_lbfgs_options opts);
nb_optimizer *nb_lbfgs_groups(const nb_param_group *groups, int n_groups, nb_lbfgs_options opts);
nb_optimizer *nb_nadam(nb_module *m, nb_nadam_options opts);
nb_optimizer *nb_nadam_params(nb_tensor *const *params, int n, nb_nadam_options opts);
nb_optimizer *nb_nadam_groups(const nb_param_group *groups, int n_groups, nb_nadam_options opts);
nb_optimizer *nb_radam(nb_module *m, nb_radam_options opts);
nb_optimizer *nb_radam_params(nb_tensor *const *params, int n, nb_radam_options opts);
nb_optimizer *nb_radam_groups(const nb_param_group *groups, int n_groups, nb_radam_options opts);
nb_optimizer *nb_rmsprop(nb_module *m, nb_rmsprop_options opts);
nb_optimizer *nb_rmsprop_params(nb_tensor *const *params, int n, nb_rmsprop_options opts);
nb_optimizer *nb_rmsprop_groups(const nb_param_group *groups, int n_groups, nb_rmsprop_options opts);
nb_optimizer *nb_rprop(nb_module *m, nb_rprop_options opts);
nb_optimizer *nb_rprop_params(nb_tensor *const *params, int n, nb_rprop_options opts);
nb_optimizer *nb_rprop_groups(const nb_param_group *groups, int n_groups, nb_rprop_options opts);
nb_optimizer *nb_lion(nb_module *m, nb_lion_options opts);
nb_optimizer *nb_lion_params(nb_tensor *const *params, int n, nb_lion_options opts);
nb_optimizer *nb_lion_groups(const nb_param_group *groups, int n_groups, nb_lion_options opts);
nb_optimizer *nb_muon(nb_module *m, nb_muon_options opts);
nb_optimizer *nb_muon_params(nb_tensor *const *params, int n, nb_muon_options opts);
nb_optimizer *nb_muon_groups(const nb_param_group *groups, int n_groups, nb_muon_options opts);
/* Releases the state and the optimizer's references to the parameters. NULL is ignored. */
void nb_optimizer_free(nb_optimizer *opt);

/* add_param_group: appends a group (its parameters get the next indices),
 * its options inheriting the constructor's as above. Errors as for the
 * constructors (a parameter already in the optimizer: NB_ERR_INVALID_ARG);
 * on error the optimizer is unchanged. Schedulers built before do not see
 * the new group (their step then fails with NB_ERR_STATE), as PyTorch's. */
nb_status nb_optimizer_add_param_group(nb_optimizer *opt, const nb_param_group *group);

/* ---- stepping ------------------------------------------------------------------- */

/* Drops every parameter's gradient (zero_grad(set_to_none=True)). */
void nb_optimizer_zero_grad(nb_optimizer *opt);
/* One update of every parameter that has a gradient; the others are
 * skipped (their state and step count unchanged), as PyTorch. Runs under no
 * grad. Errors: NB_ERR_INVALID_ARG (NULL; LBFGS, which needs a closure),
 * NB_ERR_STATE (a gradient of another shape or dtype), the kernels' errors;
 * parameters before the failing one keep their update.
 * Inside a CUDA graph capture (nb_graph_capture_begin) only Adam, AdamW and
 * SGD step, and only with contiguous parameters and gradients of their
 * layout, after one eager step: their fused updates read lr and the step
 * count from device memory, so replays count steps and follow lr changes
 * (PyTorch's capturable=True). Any other optimizer, or a parameter the
 * fused update cannot take, fails with NB_ERR_STATE and updates nothing
 * (PyTorch's capturable optimizers). */
nb_status nb_optimizer_step(nb_optimizer *opt);

/* A closure re-evaluates the model: zeroes the gradients, runs forward and
 * backward (grad mode is on while it runs) and writes the loss to *loss.
 * It returns NB_OK or an error, which the step returns. */
typedef nb_status (*nb_closure_fn)(void *user, double *loss);
/* optimizer.step(closure): evaluates the closure (once, or as often as
 * LBFGS needs), steps, and writes the first evaluation's loss to *loss
 * (may be NULL), as PyTorch returns it. Errors: nb_optimizer_step's, a NULL
 * closure, the closure's. */
nb_status nb_optimizer_step_closure(nb_optimizer *opt, nb_closure_fn closure, void *user, double *loss);

/* ---- groups and hyperparameters -------------------------------------------------- */

/* len(optimizer.param_groups): the number of parameter groups (-1 for
 * NULL, with NB_ERR_INVALID_ARG set). */
int nb_optimizer_num_param_groups(const nb_optimizer *opt);
/* Group g's parameters are indices first .. first + count - 1; returns
 * count (-1 for a bad group, *first untouched). first may be NULL. */
int nb_optimizer_group_params(const nb_optimizer *opt, int group, int *first);
/* Group 0's lr (NAN for NULL); set_lr sets every group's lr (for one group,
 * the usual case, that group's), as a loop over param_groups. set_lr fails
 * with NB_ERR_INVALID_ARG unless lr >= 0 and finite. */
double nb_optimizer_get_lr(const nb_optimizer *opt);
nb_status nb_optimizer_set_lr(nb_optimizer *opt, double lr);
double nb_optimizer_get_group_lr(const nb_optimizer *opt, int group);
nb_status nb_optimizer_set_group_lr(nb_optimizer *opt, int group, double lr);
/* Any hyperparameter of a group by its PyTorch param_group key ("lr",
 * "momentum", "betas.0", "weight_decay", "amsgrad", ...; optim/OPTIM.md
 * lists them), as a double (bools 0/1, enums and ints as numbers).
 * set_group_option validates the new value as the constructor would.
 * Errors: NB_ERR_INVALID_ARG (bad group, unknown key, a value out of range). */
nb_status nb_optimizer_get_group_option(const nb_optimizer *opt, int group, const char *key, double *value);
nb_status nb_optimizer_set_group_option(nb_optimizer *opt, int group, const char *key, double value);
/* Copies group g's resolved options (defaults filled in) into out, which
 * must be the optimizer's options type of `size` bytes (NB_ERR_INVALID_ARG
 * otherwise): nb_optimizer_group_options(opt, 1, &o, sizeof o). */
nb_status nb_optimizer_group_options(const nb_optimizer *opt, int group, void *out, size_t size);
/* PyTorch's class name: "SGD", "Adam", "AdamW", "Adadelta", "Adafactor",
 * "Adagrad", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam", "RMSprop",
 * "Rprop", "Lion", "Muon". */
const char *nb_optimizer_kind(const nb_optimizer *opt);
/* Group 0's options (the others: nb_optimizer_group_options). Fail (zeroed
 * struct) for another kind. */
nb_sgd_options nb_optimizer_sgd_options(const nb_optimizer *opt);
nb_adam_options nb_optimizer_adam_options(const nb_optimizer *opt);

/* ---- the decay / no-decay split (BERT, Hugging Face Trainer) --------------------- */

/* The decay / no-decay split of a module's parameters.
 * Splits the parameters of m (nb_module_parameters' order) into those that
 * take weight decay and those that do not: biases (a name whose last part is
 * "bias") and every parameter of a normalisation layer (a module whose kind
 * contains "Norm": LayerNorm, BatchNorm1d, ...), as Hugging Face's
 * get_decay_parameter_names. The arrays are malloc'd, the tensors borrowed
 * from m; free them with nb_decay_split_free. Errors: NB_ERR_INVALID_ARG
 * (NULL), NB_ERR_OOM. */
typedef struct nb_decay_split {
    nb_tensor **decay;    /* the n_decay parameters that take weight decay (malloc'd array, tensors borrowed) */
    int n_decay;          /* number of entries in decay */
    nb_tensor **no_decay; /* the n_no_decay biases and normalisation parameters (malloc'd, borrowed) */
    int n_no_decay;       /* number of entries in no_decay */
} nb_decay_split;
/* Fills *out with m's split (a non-NULL out is zeroed first, so it is safe to free on error).
 * Errors: NB_ERR_INVALID_ARG (NULL m or out), NB_ERR_OOM. */
nb_status nb_decay_split_module(nb_module *m, nb_decay_split *out);
/* Frees the arrays of s and zeroes it (not the tensors). NULL is ignored. */
void nb_decay_split_free(nb_decay_split *s);

/* ---- state, for checkpoints ---------------------------------------------- */

/* Number of parameters, and the i-th one (borrowed). */
int nb_optimizer_num_params(const nb_optimizer *opt);
nb_tensor *nb_optimizer_param(const nb_optimizer *opt, int i);
/* The i-th parameter's state tensor (borrowed, contiguous, on the
 * parameter's device in its dtype) by PyTorch's state name (each options
 * struct above lists its kind's). NULL when the optimizer has no such
 * state or it has not been created yet (before the first step that saw a
 * gradient). */
nb_tensor *nb_optimizer_state(const nb_optimizer *opt, int i, const char *name);
/* The i-th parameter's scalar state by name (NAdam's mu_product, ASGD's eta
 * and mu, LBFGS's n_iter, ...). Errors: NB_ERR_INVALID_ARG (bad index or
 * name, or the state not created yet). */
nb_status nb_optimizer_state_scalar(const nb_optimizer *opt, int i, const char *name, double *value);
/* Updates applied to the i-th parameter so far (PyTorch's state "step";
 * counted for every kind); -1 for a bad index. */
int64_t nb_optimizer_step_count(const nb_optimizer *opt, int i);
/* For loading a checkpoint: creates the i-th parameter's state tensors
 * (zeros, to be overwritten with nb_copy_) if absent, marks the state as
 * started and sets its step count (>= 0). A momentum buffer that exists
 * holds history, as in PyTorch's state: the next SGD step computes
 * momentum * b + ... from it rather than starting b from g.
 * Errors: NB_ERR_INVALID_ARG, NB_ERR_OOM. */
nb_status nb_optimizer_init_state(nb_optimizer *opt, int i, int64_t step);

/* ---- gradient clipping (optim/clip.c) --------------------------------------- */

/* torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a
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

#include "nb_lr_scheduler.h"

#endif
