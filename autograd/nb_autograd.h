/* nb_autograd.h - reverse-mode automatic differentiation (torch.autograd).
 *
 *   nb_scope *s = nb_scope_begin();      // owns every result below
 *   nb_tensor *w = nb_randn(NB_SHAPE(3), NB_F64, NULL);
 *   nb_set_requires_grad(w, true);
 *   nb_tensor *loss = nb_sum(nb_mul(w, w), NULL, 0, false);
 *   nb_backward(loss);                   // nb_tensor_grad(w) is now 2*w
 *   nb_scope_end(s);                     // w, its grad, the intermediates and the tape are freed
 *
 * ---- the model ---------------------------------------------------------------
 *
 * What is recorded. While grad mode is on (the default, per thread), an op
 * with an input that requires grad records one node on the tape: the op
 * (its id in core/nb_op_table.h), its backward rule, references to its
 * inputs that require grad, the op's parameters, and the tensors its rule
 * needs ("saved": detached aliases of their storage plus each storage's
 * version). The result requires grad and holds the node (its grad_fn); a
 * leaf is a tensor no op made (nb_is_leaf), and only leaves that require
 * grad (parameters, nb_set_requires_grad) get a .grad. Ops on tensors that
 * require no grad, and ops under no_grad, record nothing. Composite ops
 * record the nodes of the ops they are made of; custom functions
 * (nb_function_apply) record one node whose backward is the user's.
 *
 * Backward. nb_backward / nb_backward_ex / nb_grad walk the nodes reachable
 * from the outputs in decreasing recording order (a topological order: a
 * node's inputs were recorded before it), so each node runs once, with the
 * sum of the gradients of its output. nb_backward adds into the .grad of
 * every leaf reached (accumulation: call nb_tensor_zero_grad or the
 * optimizer's zero_grad between steps); nb_grad returns the gradients of the
 * given inputs instead and touches no .grad, running only the nodes on a
 * path to them. Gradients are computed in the outputs' order of recording,
 * deterministically: the same graph gives the same bits.
 *
 * When the graph is freed. A backward frees the tape of every node it
 * reached (input references and saved tensors), unless retain_graph is set;
 * a second backward through a freed node fails with NB_ERR_STATE naming it.
 * The nodes themselves live as long as the tensors that hold them: a scope
 * ending (nb_scope_end) releases a step's intermediates and, with them,
 * any tape no backward freed. retain_graph keeps the tape, so the same
 * graph can be backpropagated again (its saved tensors stay in memory).
 *
 * Higher-order gradients. With create_graph (nb_backward_ex, nb_grad) grad
 * mode stays on during backward, saved tensors are handed to the rules
 * connected to the graphs that made them, and the rules compute with
 * recorded ops, so the gradients are themselves differentiable (a gradient
 * penalty, a Hessian-vector product). create_graph implies retain_graph.
 * The ops whose rule is differentiable are marked "yes, twice" in
 * autograd/OPS.md and pass gradgradcheck in the op harness; through any
 * other op, the double backward fails with NB_ERR_UNSUPPORTED naming it.
 * Without create_graph the rules keep their fused first-order kernels.
 * With create_graph, nb_backward_ex stores a .grad that has a graph of its
 * own, which references the leaf: as in PyTorch this is a reference cycle,
 * broken by nb_tensor_zero_grad (prefer nb_grad for higher-order work).
 *
 * In-place safety. Every in-place write (nb_copy_, nb_fill_, the random _
 * fills, nb_copy_from_host, optimizer steps, in-place gradient
 * accumulation, batch norm's running statistics) bumps its storage's
 * version counter, shared by a tensor and its views. A backward whose node
 * saved a tensor that was written since fails with NB_ERR_STATE and
 * PyTorch's message ("one of the variables needed for gradient computation
 * has been modified by an inplace operation"), instead of computing a wrong
 * gradient.
 *
 * Hooks. A gradient hook on a tensor (nb_register_hook) sees the tensor's
 * gradient once per backward, complete, before it is used (a non-leaf's
 * before its node runs, a leaf's before it is added to .grad or returned by
 * nb_grad), and may replace it. A post-accumulate-grad hook on a leaf runs
 * after nb_backward updated its .grad (what DDP's bucketing and
 * per-parameter clipping use). Module forward hooks are in nn/nb_nn.h.
 *
 * Anomaly detection (nb_set_detect_anomaly): every op that records a node
 * checks that its forward did not turn finite inputs into NaN or inf, and
 * every backward rule that its gradients hold no NaN or inf; the first one
 * fails with NB_ERR_ANOMALY naming the op, its shapes and the forward that
 * recorded it. It synchronizes per op: for debugging.
 *
 * Thread safety. Grad mode and the tape are per thread: each thread records
 * its own graphs, and threads may run backward on disjoint graphs
 * concurrently. A graph (and the .grad of its leaves) must be used by one
 * thread at a time: two threads backpropagating into the same parameters
 * concurrently race on their .grad. Hooks and custom backward functions
 * run on the thread that called backward, inside it: they may record and
 * run ops, and may run a backward of their own on a graph disjoint from the
 * running one. Anomaly mode is process-wide, as PyTorch's.
 *
 * Errors: after a failed backward the tape of the nodes it reached is freed
 * (unless retained) and leaf gradients are unspecified.
 */
#ifndef NB_AUTOGRAD_H
#define NB_AUTOGRAD_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a leaf tensor as a parameter whose gradient nb_backward accumulates.
 * Errors: NB_ERR_DTYPE for non-float tensors, NB_ERR_INVALID_ARG for a non-leaf. */
nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad);
bool nb_requires_grad(const nb_tensor *t);
/* True for tensors created by the user rather than by a recorded op. */
bool nb_is_leaf(const nb_tensor *t);
/* The accumulated gradient (borrowed; owned by t), or NULL if none yet. */
nb_tensor *nb_tensor_grad(const nb_tensor *t);
/* Sets leaf t's gradient to grad (PyTorch's `t.grad = grad`): grad of t's
 * shape, dtype and device, or NULL to drop it; t takes its own reference.
 * With keep_storage (grad a view of a flat gradient buffer: nn's
 * flatten_parameters, DDP's buckets), backward accumulates into grad in
 * place and nb_tensor_zero_grad zeroes it instead of dropping it.
 * Errors: NB_ERR_INVALID_ARG (t NULL or not a leaf), NB_ERR_SHAPE,
 * NB_ERR_DTYPE, NB_ERR_DEVICE. */
nb_status nb_tensor_set_grad(nb_tensor *t, nb_tensor *grad, bool keep_storage);
/* Drops t's gradient (PyTorch's zero_grad(set_to_none=True)). */
void nb_tensor_zero_grad(nb_tensor *t);
/* A new tensor sharing t's storage (and its version counter), cut from the
 * graph (requires_grad false). */
nb_tensor *nb_detach(nb_tensor *t);

/* Backpropagates from `out`. out must be a one-element tensor (the gradient
 * seed is 1), else use nb_backward_with. Errors: NB_ERR_STATE when out does
 * not require grad, its graph was already freed, or a saved tensor was
 * modified in place; kernel errors. */
nb_status nb_backward(nb_tensor *out);
/* As nb_backward with an explicit gradient of out's shape and dtype
 * (NB_ERR_SHAPE for another shape, NB_ERR_DTYPE for another dtype). */
nb_status nb_backward_with(nb_tensor *out, nb_tensor *grad_out);

/* Options of nb_backward_ex (Tensor.backward's keyword arguments); a zeroed
 * struct is PyTorch's defaults. */
typedef struct nb_backward_options {
    bool retain_graph; /* keep the tape for another backward (default: freed) */
    bool create_graph; /* record the backward, so .grad can be differentiated; implies retain_graph */
} nb_backward_options;
/* Tensor.backward(gradient, retain_graph, create_graph): grad_out NULL means
 * ones for a one-element out (NB_ERR_SHAPE otherwise); opts NULL = all false. */
nb_status nb_backward_ex(nb_tensor *out, nb_tensor *grad_out, const nb_backward_options *opts);

/* Options of nb_grad (torch.autograd.grad's keyword arguments); a zeroed
 * struct is PyTorch's defaults. */
typedef struct nb_grad_options {
    bool retain_graph;      /* keep the tape for another backward (default: freed) */
    bool create_graph;      /* record the backward: the gradients can be differentiated; implies retain_graph */
    bool allow_unused;      /* an input the outputs do not depend on gets NULL instead of an error */
    bool materialize_grads; /* ... gets zeros instead (PyTorch 2.1's materialize_grads) */
} nb_grad_options;
/* torch.autograd.grad: the gradients of sum_i <outputs[i], grad_outputs[i]>
 * with respect to inputs[0..n_inputs), into grads[] (scoped results of the
 * inputs' shapes and dtypes). grad_outputs NULL, or a NULL entry, means ones
 * for a one-element output. Inputs may be leaves or op results; no .grad is
 * touched; only the nodes on a path from the outputs to an input run.
 * Errors: NB_ERR_INVALID_ARG (NULL arrays or entries, counts < 1),
 * NB_ERR_STATE (an output or input that does not require grad, an unused
 * input without allow_unused, a freed graph, an in-place modification),
 * NB_ERR_SHAPE/NB_ERR_DTYPE (a grad_output that does not fit its output),
 * NB_ERR_UNSUPPORTED (a double backward through an op whose rule is not
 * differentiable). On failure every grads[i] is NULL. */
nb_status nb_grad(nb_tensor *const *outputs, nb_tensor *const *grad_outputs, int n_outputs, nb_tensor *const *inputs,
                  int n_inputs, nb_tensor **grads, const nb_grad_options *opts);

/* While grad mode is off (per thread) ops record nothing. Nestable:
 *   bool prev = nb_set_grad_enabled(false); ... nb_set_grad_enabled(prev); */
bool nb_set_grad_enabled(bool enabled); /* returns the previous mode */
bool nb_is_grad_enabled(void); /* this thread's grad mode (torch.is_grad_enabled) */
/* torch.no_grad() as a block: NB_NO_GRAD { ... } runs the block once with
 * grad mode off and restores the previous mode however the block is left,
 * also by break, return or goto (a cleanup attribute, GCC and Clang). */
static inline void nb__grad_restore(const bool *prev) { nb_set_grad_enabled(*prev); }
#if defined(__GNUC__) || defined(__clang__)
#define NB_NO_GRAD                                                                                 \
    for (bool nb__prev __attribute__((cleanup(nb__grad_restore))) = nb_set_grad_enabled(false), \
                                                                 nb__once = true;              \
         nb__once; nb__once = false)
#endif
/* The portable form: runs fn(ctx) with grad mode off, then restores it;
 * returns fn's status. */
nb_status nb_no_grad_call(nb_status (*fn)(void *ctx), void *ctx);

/* ---- hooks (autograd/hooks.c) ---------------------------------------------- */

/* A gradient hook (Tensor.register_hook): called with the tensor's complete
 * gradient; to replace it, set *replace to a tensor of the same shape and
 * dtype (an op result, e.g. nb_mul_scalar(grad, 0.5)); leave it NULL to keep
 * grad. A non-OK status fails the backward with that status. */
typedef nb_status (*nb_grad_hook_fn)(nb_tensor *grad, nb_tensor **replace, void *user);
/* Registers fn on t (which must require grad; a leaf or an op result).
 * Hooks run in registration order, each seeing the previous one's result.
 * Returns a handle > 0 for nb_remove_hook, or -1 (NB_ERR_INVALID_ARG for
 * NULL, NB_ERR_STATE for a tensor that does not require grad, NB_ERR_OOM). */
int64_t nb_register_hook(nb_tensor *t, nb_grad_hook_fn fn, void *user);
/* A post-accumulate-grad hook (Tensor.register_post_accumulate_grad_hook):
 * called with the leaf after nb_backward added to its .grad. Leaves only
 * (NB_ERR_STATE for an op result); returns a handle or -1 as above. */
typedef nb_status (*nb_post_accumulate_grad_hook_fn)(nb_tensor *leaf, void *user);
int64_t nb_register_post_accumulate_grad_hook(nb_tensor *t, nb_post_accumulate_grad_hook_fn fn, void *user);
/* Removes a hook registered on t (handle.remove()). Errors:
 * NB_ERR_INVALID_ARG for NULL or a handle t does not have. */
nb_status nb_remove_hook(nb_tensor *t, int64_t handle);

/* ---- anomaly detection (autograd/hooks.c) ------------------------------------ */

/* torch.autograd.set_detect_anomaly: while on, the first op whose forward
 * (recording a node) or backward produces NaN or inf fails with
 * NB_ERR_ANOMALY, naming the op, the shapes and the forward op that recorded
 * the node. Process-wide; off by default; costs a host sync per op. */
void nb_set_detect_anomaly(bool enabled);
bool nb_is_anomaly_enabled(void);

/* ---- custom functions (autograd/function.c) --------------------------------- */

/* The ctx a custom function's callbacks receive (PyTorch's ctx): saved
 * tensors, values and flags, read and written with nb_ctx_* below. Opaque. */
typedef struct nb_function_ctx nb_function_ctx;
/* torch.autograd.Function: an op given as a forward and a backward
 * callback. The forward runs with grad mode off (the ops inside record
 * nothing) and writes n_outputs new tensors; one node is recorded for them
 * all. The backward receives one gradient per output (zeros for an output
 * that got none, unless materialize_grads is turned off: then NULL) and
 * writes one gradient per input into grad_inputs (NULL: none), each of its
 * input's shape and dtype. Under create_graph it runs with grad mode on and
 * the saved tensors connected, so a backward built from nabla ops is
 * differentiable again. */
typedef struct nb_function {
    const char *name; /* for messages: "backward of <name>" (copied, up to 63 characters) */
    int n_outputs;    /* 1 .. 16 */
    /* Function.forward (required): writes outputs[0..n_outputs) computed from inputs[0..n_inputs) (a NULL
     * output: NB_ERR_INVALID_ARG); returns NB_OK, or a status that fails nb_function_apply. */
    nb_status (*forward)(nb_function_ctx *ctx, nb_tensor *const *inputs, int n_inputs, nb_tensor **outputs);
    /* Function.backward (required): from grad_outputs[0..n_outputs) writes grad_inputs[i] for each input
     * (NULL: no gradient); a wrong shape or dtype fails with NB_ERR_SHAPE; another status fails the backward. */
    nb_status (*backward)(nb_function_ctx *ctx, nb_tensor *const *grad_outputs, nb_tensor **grad_inputs);
} nb_function;
/* Function.apply: runs fn on inputs[0..n_inputs) (1 to 16; NULL entries
 * are allowed and passed on as NULL) and writes fn->n_outputs scoped
 * results to outputs; user is nb_ctx_user's value. *fn is copied (its
 * callbacks must stay valid while the graph lives). When grad mode is on
 * and an input requires grad, the differentiable outputs require grad and
 * hold the function's node. An output that is one of the inputs is
 * returned as a new view of it. Errors: NB_ERR_INVALID_ARG (bad fn or
 * counts, a NULL output from forward), the forward's status. */
nb_status nb_function_apply(const nb_function *fn, nb_tensor *const *inputs, int n_inputs, nb_tensor **outputs,
                            void *user);
/* ctx.save_for_backward, in forward: inputs or outputs (or other tensors)
 * for backward; version-checked there like an op's saved tensors. */
nb_status nb_ctx_save_for_backward(nb_function_ctx *ctx, nb_tensor *const *tensors, int n);
/* ctx.saved_tensors, in backward: the i-th saved tensor (borrowed), NULL
 * with NB_ERR_INVALID_ARG past the end. */
nb_tensor *nb_ctx_saved_tensor(nb_function_ctx *ctx, int i);
int nb_ctx_num_saved(const nb_function_ctx *ctx);
/* ctx.needs_input_grad[i]: whether input i requires grad (false past the end). */
bool nb_ctx_needs_input_grad(const nb_function_ctx *ctx, int i);
/* ctx.mark_non_differentiable, in forward: output t (one of the outputs
 * forward writes) gets no gradient and does not require grad. */
nb_status nb_ctx_mark_non_differentiable(nb_function_ctx *ctx, nb_tensor *t);
/* ctx.set_materialize_grads (default true). */
void nb_ctx_set_materialize_grads(nb_function_ctx *ctx, bool materialize);
/* Non-tensor values kept for backward (ctx.<key> = value); a key is at most
 * 31 characters, 16 keys per function. nb_ctx_value of a missing key is NaN
 * with NB_ERR_INVALID_ARG. */
nb_status nb_ctx_set_value(nb_function_ctx *ctx, const char *key, double value);
double nb_ctx_value(const nb_function_ctx *ctx, const char *key);
/* The user pointer given to nb_function_apply. */
void *nb_ctx_user(const nb_function_ctx *ctx);

/* ---- autocast (torch.autocast) -------------------------------------------------
 * Mixed precision: between nb_autocast_begin(dev, NB_BF16) and
 * nb_autocast_end(dev), ops on tensors of dev's device type run as
 * PyTorch's autocast runs them:
 *   lower precision (float32 inputs cast to the autocast dtype, float32
 *     accumulation inside): matmul, linear, bmm, scaled_dot_product_attention,
 *     and conv1d/conv2d/conv_transpose1d/conv_transpose2d on devices other
 *     than the CPU (whose 16-bit convolution runs on float32 copies, so
 *     there they stay float32);
 *   float32 (16-bit inputs cast to float32): softmax, log_softmax,
 *     layer_norm, rms_norm, cross_entropy (16-bit logits of its fused
 *     kernel are read as float32 there, with the same bits), mse_loss, sum;
 *   every other op: in its inputs' dtypes (an add of float32 and bfloat16
 *     promotes to float32).
 * float64 inputs are never cast. Casts are recorded ops, so gradients reach
 * the float32 parameters in float32 (the optimizer updates them there;
 * linear writes the gradients of its cast weight, bias and input in
 * float32 directly, without PyTorch's rounding to 16 bits,
 * autograd/OPS.md); a
 * parameter's cast is made once per region and cached until the outermost
 * nb_autocast_end, so wrap each forward pass (not the optimizer step) in a
 * region. Backward runs without autocast, each op in its forward's dtypes.
 * Regions nest (the innermost dtype applies). The lists: autograd/OPS.md.
 * Errors: NB_ERR_DTYPE (a dtype other than bfloat16/float16), NB_ERR_DEVICE,
 * NB_ERR_STATE (more than 16 nested regions; end without begin). */

/* Opens an autocast region of dtype (NB_BF16 or NB_F16) for dev's device
 * type (torch.autocast(device_type, dtype) entered), and closes the
 * innermost one (exited); errors as above. */
nb_status nb_autocast_begin(nb_device dev, nb_dtype dtype);
nb_status nb_autocast_end(nb_device dev);
/* Whether an autocast region is open for dev's device type. */
bool nb_autocast_is_enabled(nb_device dev);
/* The dtype of the innermost autocast region open for dev's device type
 * (torch.get_autocast_dtype inside the region); NB_F32 when none is open. */
nb_dtype nb_autocast_get_dtype(nb_device dev);
/* Fills the region's parameter cast cache ahead of the forward pass: each
 * params[i] that autocast could cast (a contiguous float32 leaf that
 * requires grad, on a device type with an open region, not cached yet) is
 * cast now to the innermost region's dtype and cached as if an op of the
 * lower-precision list had cast it: the same values, the same recorded
 * cast (its gradient reaches the parameter in float32), kept until the
 * outermost nb_autocast_end. Where the backend has multi-tensor casts
 * (CUDA: up to 48 tensors a launch) consecutive parameters of one device
 * are cast together, instead of one launch per parameter on first use. A
 * nabla extension (PyTorch casts each parameter on first use); a listed
 * parameter that no lower-precision op uses costs its copy and nothing
 * else. Others are left alone. Inside a backward pass it does nothing.
 * Errors: NB_ERR_INVALID_ARG (n < 0, a NULL list or entry), NB_ERR_OOM,
 * the copy's device errors (NB_ERR_DEVICE), NB_ERR_ANOMALY (anomaly mode
 * recording the casts); on error the casts already cached stay. */
nb_status nb_autocast_cache_params(nb_tensor *const *params, int n);

/* ---- gradcheck ------------------------------------------------------- */

/* f maps n_inputs tensors to one output tensor (any shape). */
typedef nb_tensor *(*nb_gradcheck_fn)(nb_tensor *const *inputs, int n_inputs, void *ctx);

/* A field left 0 takes PyTorch's default; NB_ZERO asks for a 0 tolerance. */
typedef struct nb_gradcheck_options {
    double eps;  /* finite-difference step (default 1e-6; must be > 0) */
    double atol; /* default 1e-5 */
    double rtol; /* default 1e-3 */
} nb_gradcheck_options;

/* Compares the analytical gradient of sum(f(inputs) * v), for a fixed random
 * v, with float64 central differences (torch.autograd.gradcheck's method and
 * tolerances: |analytical - numerical| <= atol + rtol * |numerical|).
 * Inputs that require grad must be contiguous float64 and are checked;
 * their .grad is cleared. f must be deterministic (no dropout). Returns
 * NB_OK when all entries agree; otherwise NB_ERR_MISMATCH with a message
 * naming the input, the element and both values (other statuses: f or a
 * backward failed, bad arguments). opts NULL = defaults. */
nb_status nb_gradcheck(nb_gradcheck_fn f, nb_tensor *const *inputs, int n_inputs, void *ctx,
                       const nb_gradcheck_options *opts);
/* torch.autograd.gradgradcheck: gradcheck of the gradient. For a fixed
 * random grad_output u (float64, requiring grad), the function
 * (inputs, u) -> the gradients of <f(inputs), u> with respect to the inputs
 * that require grad (nb_grad with create_graph, flattened and concatenated)
 * is checked by nb_gradcheck, so its analytical gradient is a double
 * backward of f. Same inputs, options and statuses as nb_gradcheck (an op
 * without a differentiable backward: NB_ERR_UNSUPPORTED). */
nb_status nb_gradgradcheck(nb_gradcheck_fn f, nb_tensor *const *inputs, int n_inputs, void *ctx,
                           const nb_gradcheck_options *opts);

#ifdef __cplusplus
}
#endif
#endif
