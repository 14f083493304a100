/* nb_autograd.h - reverse-mode automatic differentiation.
 *
 *   nb_scope *s = nb_scope_begin();      // owns every result below
 *   nb_tensor *w = nb_randn(NB_SHAPE(3), NB_F64, NULL);
 *   nb_set_requires_grad(w, true);
 *   nb_tensor *loss = nb_sum(nb_mul(w, w), NULL, 0, false);
 *   nb_backward(loss);                   // nb_tensor_grad(w) is now 2*w
 *   nb_scope_end(s);                     // w, its grad, the intermediates and the tape are freed
 *
 * Every op on tensors that require grad records a node on the tape: the op's
 * backward rule, its inputs and what backward needs (saved by the forward).
 * nb_backward walks the nodes reachable from the output in reverse recording
 * order, accumulates gradients into the .grad of leaf tensors that require
 * grad, and then frees the tape (the saved tensors and the input references);
 * a second backward through the same graph fails with NB_ERR_STATE.
 *
 * Known limits: tensors saved for backward are not version-checked, so an
 * in-place write (nb_fill_, nb_copy_, an optimizer step) to one of them
 * before backward silently changes the gradient; and after a failed
 * backward the graph is freed and leaf gradients are unspecified.
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
/* Drops t's gradient (PyTorch's zero_grad(set_to_none=True)). */
void nb_tensor_zero_grad(nb_tensor *t);
/* A new tensor sharing t's storage, cut from the graph (requires_grad false). */
nb_tensor *nb_detach(nb_tensor *t);

/* Backpropagates from `out`. out must be a one-element tensor (the gradient
 * seed is 1), else use nb_backward_with. Errors: NB_ERR_STATE when out does
 * not require grad or its graph was already freed; kernel errors. */
nb_status nb_backward(nb_tensor *out);
/* As nb_backward with an explicit gradient of out's shape and dtype
 * (NB_ERR_SHAPE for another shape, NB_ERR_DTYPE for another dtype). */
nb_status nb_backward_with(nb_tensor *out, nb_tensor *grad_out);

/* While grad mode is off (per thread) ops record nothing. Nestable:
 *   bool prev = nb_set_grad_enabled(false); ... nb_set_grad_enabled(prev); */
bool nb_set_grad_enabled(bool enabled); /* returns the previous mode */
bool nb_is_grad_enabled(void);
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

/* ---- gradcheck ------------------------------------------------------- */

/* f maps n_inputs tensors to one output tensor (any shape). */
typedef nb_tensor *(*nb_gradcheck_fn)(nb_tensor *const *inputs, int n_inputs, void *ctx);

typedef struct nb_gradcheck_options {
    double eps;  /* finite-difference step (default 1e-6) */
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

#ifdef __cplusplus
}
#endif
#endif
