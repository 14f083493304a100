/* nb_nn.h - modules with named parameters (torch.nn's names and defaults).
 *
 *   nb_module *net = nb_sequential(nb_linear(784, 512), nb_relu_module(),
 *                                  nb_linear(512, 10));
 *   nb_tensor *logits = nb_forward(net, x);        // x [batch, 784]
 *   nb_module_free(net);
 *
 * Ownership: a module owns its parameters, buffers and children; a
 * container takes ownership of the modules passed to it (also when it fails:
 * then it frees them). nb_module_free frees the whole tree. Parameters are
 * created outside any scope and live until their module is freed.
 * Parameter names follow PyTorch's state_dict: a child added as "fc1" gives
 * "fc1.weight"; nb_sequential names its children "0", "1", ...
 * Constructors take their randomness from the default generator
 * (nb_manual_seed) and return NULL with nb_last_error() set on bad sizes.
 */
#ifndef NB_NN_H
#define NB_NN_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_module nb_module;

/* Runs the module's forward. NULL in gives NULL out (first error kept). */
nb_tensor *nb_forward(nb_module *m, nb_tensor *x);
void nb_module_free(nb_module *m); /* NULL is ignored */

/* train (default) or eval mode, for the module and all its children. */
void nb_module_train(nb_module *m, bool training);
bool nb_module_is_training(const nb_module *m);
/* "Linear", "Sequential", ... */
const char *nb_module_kind(const nb_module *m);

/* Adds a named child (name must be unique and non-empty; copied).
 * Errors: NB_ERR_INVALID_ARG. */
nb_status nb_module_add(nb_module *parent, const char *name, nb_module *child);
/* A named child (borrowed), or NULL. */
nb_module *nb_module_child(nb_module *m, const char *name);

typedef struct nb_named_tensor {
    const char *name; /* "fc1.weight"; owned by the module tree */
    nb_tensor *tensor; /* borrowed */
} nb_named_tensor;

/* Parameters of the tree in registration order, depth first, each named by
 * its dotted path. Returns the count; writes up to `cap` entries to out
 * (out may be NULL to ask for the count). */
int nb_module_parameters(nb_module *m, nb_named_tensor *out, int cap);
/* Buffers (e.g. BatchNorm's running_mean) likewise. */
int nb_module_buffers(nb_module *m, nb_named_tensor *out, int cap);
/* Total number of parameter elements. */
int64_t nb_module_num_params(nb_module *m);

/* ---- modules ------------------------------------------------------------ */

/* y = x W^T + b; weight [out, in], bias [out]. PyTorch's init: weight by
 * kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and bias
 * U(-1/sqrt(in), 1/sqrt(in)). dtype f32; nb_linear_ex takes bias and dtype. */
nb_module *nb_linear(int64_t in_features, int64_t out_features);
nb_module *nb_linear_ex(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt);
nb_module *nb_relu_module(void);
nb_module *nb_sigmoid_module(void);
nb_module *nb_tanh_module(void);
/* Flattens dims start..end (torch.nn.Flatten's defaults are 1, -1). */
nb_module *nb_flatten_module(int start_dim, int end_dim);

/* A container that applies its children in order (takes ownership). If any
 * child is NULL (a failed constructor), frees the others and returns NULL
 * with that constructor's error kept. The macro counts its arguments
 * (sizeof does not evaluate them, so each constructor runs once).
 * nb_sequential_n is the NULL-terminated variadic form, which cannot tell a
 * failed constructor from the end of the list: prefer the macro. */
nb_module *nb_sequential_n(nb_module *first, ...);
#define nb_sequential(...)                                 \
    nb_sequential_array((nb_module *[]){__VA_ARGS__},      \
                        (int)(sizeof((nb_module *[]){__VA_ARGS__}) / sizeof(nb_module *)))
/* Appends a child named by its index. */
nb_status nb_sequential_append(nb_module *seq, nb_module *child);

/* ---- defining modules --------------------------------------------------- */

/* The vtable of a module kind. forward is required; free_ctx may be NULL. */
typedef struct nb_module_ops {
    const char *kind;
    nb_tensor *(*forward)(nb_module *m, nb_tensor *x);
    void (*free_ctx)(void *ctx);
} nb_module_ops;

/* A module of a user-defined kind; ctx is the kind's own state (freed by
 * ops->free_ctx). */
nb_module *nb_module_new(const nb_module_ops *ops, void *ctx);
void *nb_module_ctx(nb_module *m);
/* Registers a parameter (requires_grad is set) or buffer; the module takes
 * the caller's reference. Errors: NB_ERR_INVALID_ARG (duplicate name). */
nb_status nb_module_register_parameter(nb_module *m, const char *name, nb_tensor *t);
nb_status nb_module_register_buffer(nb_module *m, const char *name, nb_tensor *t);
/* A parameter or buffer of m itself by name (borrowed), or NULL. */
nb_tensor *nb_module_get(nb_module *m, const char *name);
/* The i-th child (borrowed), or NULL past the end. */
nb_module *nb_module_child_at(nb_module *m, int i);

/* ---- additions (nn/ owner) ------------------------------------------------ */

/* nb_sequential over an array: children[0..n) (n >= 0; n 0 gives an empty
 * Sequential that returns its input). Takes ownership of every non-NULL
 * child; if any child is NULL, frees the others and returns NULL keeping the
 * failed constructor's error. Unlike the NULL-terminated nb_sequential_n it
 * sees a NULL anywhere in the list:
 *   nb_sequential_array((nb_module *[]){a, b, c}, 3) */
nb_module *nb_sequential_array(nb_module *const *children, int n);
/* Number of direct children, and the name of the i-th (borrowed; NULL past the end). */
int nb_module_num_children(const nb_module *m);
const char *nb_module_child_name(const nb_module *m, int i);
/* Drops the gradient of every parameter of the tree (module.zero_grad(set_to_none=True)). */
void nb_module_zero_grad(nb_module *m);

#ifdef __cplusplus
}
#endif
#endif
