/* nb_nn.h - modules with named parameters (torch.nn's names and defaults).
 *
 *   nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(),
 *                                  nb_nn_linear(512, 10));
 *   nb_tensor *logits = nb_forward(net, x);        // x [batch, 784]
 *   nb_module_free(net);
 *
 * Ownership: a module owns its parameters, buffers and children; a
 * container takes ownership of the modules passed to it (also when it fails:
 * then it frees them). nb_module_free frees the whole tree. A module holds
 * its own reference to each parameter, which lives until the module is
 * freed, whatever scope it was made in.
 * Parameter names follow PyTorch's state_dict: a child added as "fc1" gives
 * "fc1.weight"; nb_nn_sequential names its children "0", "1", ...
 * Constructors take their randomness from the default generator
 * (nb_manual_seed) and return NULL with nb_last_error() set on bad sizes.
 */
#ifndef NB_NN_H
#define NB_NN_H

#include "nb_core.h"
#include "nb_ops.h"
#include "nb_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A module (torch.nn.Module): a node of a module tree holding its kind's ops and state, named
 * parameters, buffers and children, hooks and its train/eval mode (opaque; nn/module.c). */
typedef struct nb_module nb_module;

/* Runs the module's forward on one tensor. NULL in gives NULL out (first
 * error kept). A module whose forward gives several tensors returns the
 * first (LSTM: output). */
nb_tensor *nb_forward(nb_module *m, nb_tensor *x);

/* Most inputs one forward takes, and most outputs it gives. */
#define NB_FORWARD_MAX 8
/* Module.__call__ with several tensors, the one convention of every module:
 * inputs in[0..n_in) in the order of the PyTorch forward's parameters (an
 * entry may be NULL where that parameter is optional, as PyTorch's None:
 * MultiheadAttention takes query, key, value, key_padding_mask, attn_mask),
 * outputs in the order of its return value, tuples flattened (LSTM gives
 * output, h_n, c_n). Writes the first min(count, max_out) outputs to out
 * (owned like op results) and returns the count (>= 1); a module may skip
 * computing outputs past max_out (MultiheadAttention's weights: PyTorch's
 * need_weights=False when max_out is 1). A module defined with a
 * one-tensor forward takes exactly one input. Returns -1 with the error
 * set: NB_ERR_INVALID_ARG (NULL m, n_in outside [0, NB_FORWARD_MAX], in or
 * out NULL, max_out < 1, an input count or NULL input the module does not
 * take), and the forward's own. */
int nb_forward_n(nb_module *m, int n_in, nb_tensor *const *in, nb_tensor **out, int max_out);

/* Module.register_forward_pre_hook / register_forward_hook: a forward runs
 * m's pre-hooks on the inputs, the forward, then m's forward hooks on the
 * inputs and outputs, in registration order, through nb_forward and
 * nb_forward_n alike (and the containers' children, which are called
 * through them). The one-tensor hooks see the first input and the first
 * output, and may set *replace to a new one (e.g. an op result); the _n
 * hooks see all of them and may replace entries of in (pre-hooks) or out
 * (forward hooks; n_out is the count the caller asked for, at most the
 * forward's). A hook's non-OK status fails the forward (NULL or -1, the
 * hook's error kept). Returns a handle > 0, or -1 (NB_ERR_INVALID_ARG for
 * NULL, NB_ERR_OOM). */
typedef nb_status (*nb_forward_pre_hook_fn)(nb_module *m, nb_tensor *input, nb_tensor **replace, void *user);
/* A forward hook (register_forward_hook's hook(module, input, output)): input the first input (NULL when the
 * forward took none), output the first output; setting *replace (left NULL) replaces that output. */
typedef nb_status (*nb_forward_hook_fn)(nb_module *m, nb_tensor *input, nb_tensor *output, nb_tensor **replace,
                                        void *user);
/* A forward pre-hook seeing every input: it may replace entries of in[0..n_in). */
typedef nb_status (*nb_forward_pre_hook_n_fn)(nb_module *m, int n_in, nb_tensor **in, void *user);
/* A forward hook seeing every input and the outputs out[0..n_out), which it may replace (a NULL left in
 * out fails the forward with NB_ERR_INVALID_ARG). */
typedef nb_status (*nb_forward_hook_n_fn)(nb_module *m, int n_in, nb_tensor *const *in, int n_out, nb_tensor **out,
                                          void *user);
/* Registers fn on m, called with user (not owned) by every later forward of m until
 * nb_module_remove_hook(m, handle). Returns the handle (> 0, unique in the process), or -1:
 * NB_ERR_INVALID_ARG (m or fn NULL), NB_ERR_OOM. */
int64_t nb_module_register_forward_pre_hook(nb_module *m, nb_forward_pre_hook_fn fn, void *user);
int64_t nb_module_register_forward_hook(nb_module *m, nb_forward_hook_fn fn, void *user);
int64_t nb_module_register_forward_pre_hook_n(nb_module *m, nb_forward_pre_hook_n_fn fn, void *user);
int64_t nb_module_register_forward_hook_n(nb_module *m, nb_forward_hook_n_fn fn, void *user);
/* Removes a hook by its handle (NB_ERR_INVALID_ARG: NULL or no such handle). */
nb_status nb_module_remove_hook(nb_module *m, int64_t handle);
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

/* Parameters of the tree in registration order, depth first, each named by
 * its dotted path (nb_named_tensor is in nb_safetensors.h; here its name is
 * owned by the module tree and its tensor borrowed). Returns the count; writes up to `cap` entries to out
 * (out may be NULL to ask for the count). */
int nb_module_parameters(nb_module *m, nb_named_tensor *out, int cap);
/* module.parameters() as an array: the tensors of nb_module_parameters, in
 * its order (each shared tensor once, borrowed), in a malloc'ed array the
 * caller frees; *n gets their count (a module without parameters: a
 * non-NULL array and 0). NULL on error: NB_ERR_INVALID_ARG (m or n NULL),
 * NB_ERR_OOM. */
nb_tensor **nb_module_parameter_list(nb_module *m, int *n);
/* Buffers (e.g. BatchNorm's running_mean) likewise. */
int nb_module_buffers(nb_module *m, nb_named_tensor *out, int cap);
/* Flat parameter and gradient buffers (llm.c's; PyTorch FSDP's flat
 * parameters): moves the parameters of root module m, per (dtype, device),
 * into one contiguous buffer, each parameter becoming a view into it (its
 * values, name and identity unchanged, so optimizers and references built
 * before stay valid), and gives each a gradient that is a view into one
 * gradient buffer (a gradient present is carried over). From then on
 * backward accumulates into those views, nb_module_zero_grad zeroes each
 * gradient buffer with one fill (gradients stay allocated, zeroed:
 * PyTorch's zero_grad(set_to_none=False)), and the buffers are what a
 * gradient all-reduce or norm can take whole. state_dict names and
 * checkpoints are unchanged. Each parameter starts at a multiple of 64
 * elements. Calling it again does nothing. Errors: NB_ERR_INVALID_ARG (a
 * child module, a non-contiguous parameter), NB_ERR_UNSUPPORTED (more than
 * 4 (dtype, device) groups), NB_ERR_OOM. */
nb_status nb_module_flatten_parameters(nb_module *m);
/* The same with each buffer's length padded (zeros) to a multiple of
 * pad_multiple elements (>= 1): ZeRO-1 splits it evenly over the ranks.
 * Does nothing when m is already flat. */
nb_status nb_module_flatten_parameters_ex(nb_module *m, int64_t pad_multiple);
/* The flat buffers (borrowed): up to cap parameter and gradient buffers
 * (either array may be NULL); returns their number (0: not flattened), -1
 * for NULL m. */
int nb_module_flat_buffers(nb_module *m, nb_tensor **params, nb_tensor **grads, int cap);
/* Total number of parameter elements. */
int64_t nb_module_num_params(nb_module *m);

/* ---- modules ------------------------------------------------------------ */

/* y = x W^T + b; weight [out, in], bias [out]. PyTorch's init: weight by
 * kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and bias
 * U(-1/sqrt(in), 1/sqrt(in)). dtype f32; nb_nn_linear_ex takes bias and dtype. */
nb_module *nb_nn_linear(int64_t in_features, int64_t out_features);
nb_module *nb_nn_linear_ex(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt);
/* BitLinear of BitNet b1.58 (Ma et al. 2024, "The Era of 1-bit LLMs"; the
 * forward of its "Training Tips, Code and FAQ"): a Linear (the same
 * parameters "weight" [out, in] and "bias" [out], the same init, so a
 * Linear's state_dict loads) whose forward is
 *   y = F.linear(activation_quant(rms_norm(x)), weight_quant(weight), bias)
 * with a parameter-free RMSNorm over the last dim (eps 1e-6,
 * NB_BITLINEAR_EPS), per-token int8 activations and ternary absmean
 * weights (nb_bitnet_activation_quant, nb_bitnet_weight_quant in
 * nb_quantize.h), gradients straight through to the latent weights, which
 * any optimizer trains. x [..., in] float32/float64 (or 16-bit, as the
 * quantizers take it). Errors as nb_nn_linear_ex's; forward as nb_linear's
 * and nb_rms_norm's. */
#define NB_BITLINEAR_EPS 1e-6
nb_module *nb_nn_bitlinear(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt);
/* Packs every BitLinear of m's tree (m included) for inference: its
 * weight becomes the buffers "weight_packed" (uint8) and "weight_scale"
 * (float32 [1]) of nb_bitnet_pack (nb_quantize.h), the float weight is
 * released (16x less weight memory than float32), and the forward runs
 * nb_bitnet_linear on the RMS-normalized input (int8 activations, exact
 * integer sums; equal to the training forward up to float rounding). The
 * state_dict then holds the packed tensors: nb_module_state_dict_save
 * writes the packed checkpoint, which loads into a model built with
 * BitLinear and packed the same way. A packed model is for inference: run
 * it without grad (a forward on an input that requires grad fails, see
 * nb_bitnet_linear). A MultiheadAttention built with bitlinear
 * (nb_encoder_layer_options) packs its in_proj_weight the same way, as one
 * matrix with one scale (as its training forward quantizes it), into
 * "in_proj_weight_packed" and "in_proj_weight_scale".
 * Modules already packed, and other modules, are left as they are.
 * Errors: NB_ERR_INVALID_ARG (NULL m), nb_bitnet_pack's; on an error the
 * module being packed keeps its float weight. */
nb_status nb_module_bitnet_pack(nb_module *m);
/* Converts every Linear of m's tree (m included) to int8 weight-only
 * (torchao's int8_weight_only): its weight becomes the buffers
 * "weight_int8" (int8 [out, in]) and "weight_scale" (float32 [out]) of
 * nb_int8_weight_quantize (nb_quantize.h), the float weight is released
 * (half a bfloat16 weight's memory, a quarter of a float32 one's), and the
 * forward runs nb_linear_int8 (the int8 kernel for up to 16 rows, a
 * matmul on the weight cast to the input's dtype above). The bias stays a parameter in its dtype. The
 * state_dict then holds the int8 tensors; it loads into a model built the
 * same way and converted. nn.Linear modules convert, and so does a
 * decoder's tied LM head, which gets an int8 copy of the embedding's weight
 * (the embedding keeps the float one: the tie is cut, as for inference);
 * a MultiheadAttention built without bitlinear trades its in_proj_weight
 * for "in_proj_weight_int8" and "in_proj_weight_scale" (per row of the
 * [3E, E] matrix); GPT-2's Conv1D and BERT's tied decoder stay float;
 * converted modules and others are left as they are. Errors: NB_ERR_INVALID_ARG (NULL m),
 * nb_int8_weight_quantize's; on an error the module being converted keeps
 * its float weight. */
nb_status nb_module_int8_weight_only(nb_module *m);
nb_module *nb_nn_relu(void);
nb_module *nb_nn_sigmoid(void);
nb_module *nb_nn_tanh(void);
/* Flattens dims start..end (torch.nn.Flatten's defaults are 1, -1). */
nb_module *nb_nn_flatten(int start_dim, int end_dim);

/* nn.Unflatten(dim, unflattened_size): dim becomes the n sizes (one may be
 * -1, inferred), checked against the input at forward time. */
nb_module *nb_nn_unflatten(int dim, int n, const int64_t *sizes);

/* The padding modules (nb_pad): dims 1, 2 or 3 (ZeroPad1d/2d/3d, ...),
 * padding 2 * dims sizes in F.pad's order (last dim first: left, right,
 * then top, bottom, then front, back); a module of d dims takes (d + 1)-d
 * or (d + 2)-d input. ZeroPad and ConstantPad (value) may crop with
 * negative sizes; Reflection, Replication and Circular take sizes >= 0
 * (NB_ERR_INVALID_ARG) within nb_pad's limits. */
nb_module *nb_nn_zero_pad(int dims, const int64_t *padding);
nb_module *nb_nn_constant_pad(int dims, const int64_t *padding, double value);
nb_module *nb_nn_reflection_pad(int dims, const int64_t *padding);
nb_module *nb_nn_replication_pad(int dims, const int64_t *padding);
nb_module *nb_nn_circular_pad(int dims, const int64_t *padding);

/* A container that applies its children in order (takes ownership). If any
 * child is NULL (a failed constructor), frees the others and returns NULL
 * with that constructor's error kept. The macro counts its arguments
 * (sizeof does not evaluate them, so each constructor runs once).
 * nb_nn_sequential_n is the NULL-terminated variadic form, which cannot tell a
 * failed constructor from the end of the list: prefer the macro. */
nb_module *nb_nn_sequential_n(nb_module *first, ...);
/* nb_nn_sequential(a, b, ...): nn.Sequential(a, b, ...), nb_nn_sequential_array over its arguments (see above). */
#define nb_nn_sequential(...)                                 \
    nb_nn_sequential_array((nb_module *[]){__VA_ARGS__},      \
                        (int)(sizeof((nb_module *[]){__VA_ARGS__}) / sizeof(nb_module *)))
/* Appends a child named by its index. */
nb_status nb_nn_sequential_append(nb_module *seq, nb_module *child);

/* Sequential's forward through nb_forward_n: the first child gets the
 * inputs, every next one the outputs of the one before (all of them), and
 * the last one's outputs are returned. */

/* ---- holders (nn/containers.c) ------------------------------------------
 * ModuleList, ModuleDict, ParameterList and ParameterDict only hold: their
 * forward fails (NB_ERR_INVALID_ARG), as PyTorch's. Entries are children
 * (nb_module_child_at, nb_module_child, nb_module_num_children) or
 * parameters (nb_module_get, nb_module_parameters) of the holder, so their
 * state_dict keys are PyTorch's: "layers.0.weight", "heads.cls.bias",
 * "scales.0". Constructors return NULL only on NB_ERR_OOM. */
/* nn.ModuleList(): an empty list (kind "ModuleList"), filled with nb_nn_module_list_append. */
nb_module *nb_nn_module_list(void);
/* nn.ModuleList(modules): children[0..n) named "0", "1", ... (ownership of
 * each taken, also on failure; a NULL child fails the whole list, keeping
 * its constructor's error, as nb_nn_sequential_array). */
nb_module *nb_nn_module_list_array(nb_module *const *children, int n);
/* ModuleList.append: child named by its index (ownership taken, also on
 * failure). Errors: NB_ERR_INVALID_ARG (list not a ModuleList, child NULL). */
nb_status nb_nn_module_list_append(nb_module *list, nb_module *child);
/* nn.ModuleDict: entries added with nb_module_add(dict, key, child) (keys
 * unique, without "."), found with nb_module_child(dict, key), in insertion
 * order as PyTorch's. */
nb_module *nb_nn_module_dict(void);
/* nn.ParameterList: ParameterList.append registers p as "0", "1", ... (the
 * list takes its own reference). Errors: NB_ERR_INVALID_ARG (list not a
 * ParameterList, p NULL or not a leaf), NB_ERR_DTYPE (p not float). */
nb_module *nb_nn_parameter_list(void);
nb_status nb_nn_parameter_list_append(nb_module *list, nb_tensor *p);
/* nn.ParameterDict: entries registered with nb_module_register_parameter(dict,
 * key, p), read with nb_module_get(dict, key). */
nb_module *nb_nn_parameter_dict(void);
/* nn.Identity: returns its inputs unchanged (nb_forward_n: every input, as
 * outputs in the same order). */
nb_module *nb_nn_identity(void);

/* ---- defining modules --------------------------------------------------- */

/* The vtable of a module kind: forward (one tensor in, one out) or
 * forward_n (nb_forward_n's convention: writes its outputs to out, which
 * has NB_FORWARD_MAX entries, and returns their count or -1 with the error
 * set; outputs past max_out may be left unset) or both (forward then
 * serves a call with one input and one output asked, forward_n the
 * others); free_ctx may be NULL. */
typedef struct nb_module_ops {
    const char *kind; /* PyTorch's class name ("Linear"), nb_module_kind's; borrowed, like the ops */
    nb_tensor *(*forward)(nb_module *m, nb_tensor *x); /* one tensor in, one out (NULL with the error set) */
    void (*free_ctx)(void *ctx);                       /* frees the ctx of nb_module_new; may be NULL */
    /* inputs in[0..n_in), outputs to out; returns their count (>= 1) or -1 */
    int (*forward_n)(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out);
} nb_module_ops;

/* A module of a user-defined kind; ctx is the kind's own state (freed by
 * ops->free_ctx). */
nb_module *nb_module_new(const nb_module_ops *ops, void *ctx);
void *nb_module_ctx(nb_module *m);
/* Registers a parameter (requires_grad is set) or buffer. The module takes
 * a reference of its own (nb_core.h's ownership rule), so the tensor lives
 * as long as the module whatever scope it was made in; the caller's
 * reference is untouched, on success and on failure.
 * Errors: NB_ERR_INVALID_ARG (NULL, bad or duplicate name, a non-leaf
 * parameter), NB_ERR_DTYPE (a parameter that is not float). */
nb_status nb_module_register_parameter(nb_module *m, const char *name, nb_tensor *t);
nb_status nb_module_register_buffer(nb_module *m, const char *name, nb_tensor *t);
/* A parameter or buffer of m itself by name (borrowed), or NULL. */
nb_tensor *nb_module_get(nb_module *m, const char *name);
/* The i-th child (borrowed), or NULL past the end. */
nb_module *nb_module_child_at(nb_module *m, int i);

/* ---- additions (nn/ owner) ------------------------------------------------ */

/* nb_nn_sequential over an array: children[0..n) (n >= 0; n 0 gives an empty
 * Sequential that returns its input). Takes ownership of every non-NULL
 * child; if any child is NULL, frees the others and returns NULL keeping the
 * failed constructor's error. Unlike the NULL-terminated nb_nn_sequential_n it
 * sees a NULL anywhere in the list:
 *   nb_nn_sequential_array((nb_module *[]){a, b, c}, 3) */
nb_module *nb_nn_sequential_array(nb_module *const *children, int n);
/* Number of direct children, and the name of the i-th (borrowed; NULL past the end). */
int nb_module_num_children(const nb_module *m);
const char *nb_module_child_name(const nb_module *m, int i);
/* Drops the gradient of every parameter of the tree (module.zero_grad(set_to_none=True)). */
void nb_module_zero_grad(nb_module *m);

/* ---- CNN modules (nn/conv.c, nn/pooling.c, nn/batchnorm.c, nn/dropout.c) ----
 * PyTorch's default initialisation: conv weight kaiming_uniform_(a=sqrt(5)),
 * i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = Cin/groups * kh * kw
 * (ConvTranspose2d: fan_in from weight dim 1: Cout/groups * kh * kw), bias
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Parameters "weight", "bias". */
/* The constructors take (in_channels, out_channels, kernel_size, opts, bias), PyTorch's with a square
 * or cubic kernel; the options are the functional's (nb_functional.h; 0 fields are PyTorch's defaults),
 * checked by the op at forward time except what PyTorch's constructor rejects. Parameters float32 on
 * the default device; "bias" [Cout] only with bias. Errors (NULL): NB_ERR_INVALID_ARG (a size < 1,
 * groups < 0 or not dividing both channel counts, padding_same with a stride > 1), NB_ERR_OOM.
 * nn.Conv2d: weight [Cout, Cin/groups, k, k], input [N, Cin, H, W] or [Cin, H, W]. */
nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                            nb_conv2d_options opts, bool bias);
/* nn.Conv1d: weight [Cout, Cin/groups, k], input [N, Cin, L] or [Cin, L]; otherwise as Conv2d. */
nb_module *nb_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                            nb_conv1d_options opts, bool bias);
/* nn.ConvTranspose2d: weight [Cin, Cout/groups, k, k] (fan_in from its dim 1), input [N, Cin, H, W] or
 * [Cin, H, W]. */
nb_module *nb_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                      nb_conv_transpose2d_options opts, bool bias);
/* Conv3d (weight [Cout, Cin/groups, k, k, k]), ConvTranspose1d (weight
 * [Cin, Cout/groups, k]) and ConvTranspose3d ([Cin, Cout/groups, k, k,
 * k]), cubic kernels, initialised as above. */
nb_module *nb_nn_conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv3d_options opts,
                        bool bias);
/* nn.ConvTranspose1d: weight [Cin, Cout/groups, k], input [N, Cin, L] or [Cin, L]. */
nb_module *nb_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                  nb_conv_transpose1d_options opts, bool bias);
/* nn.ConvTranspose3d: weight [Cin, Cout/groups, k, k, k], input [N, Cin, D, H, W] or [Cin, D, H, W]. */
nb_module *nb_nn_conv_transpose3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                  nb_conv_transpose3d_options opts, bool bias);
/* nn.MaxPool2d / MaxPool1d / AvgPool2d / AvgPool1d (nb_pool2d_options, nb_pool1d_options: 0 fields are
 * PyTorch's defaults) and AdaptiveAvgPool2d(out_h, out_w) / AdaptiveAvgPool1d(out_l); no parameters.
 * Errors (NULL): NB_ERR_INVALID_ARG (kernel < 1, stride or dilation < 0, padding outside
 * [0, kernel/2]; an adaptive output size < 1), NB_ERR_OOM. */
nb_module *nb_nn_max_pool2d(nb_pool2d_options opts);
nb_module *nb_nn_max_pool1d(nb_pool1d_options opts);
nb_module *nb_nn_avg_pool2d(nb_pool2d_options opts);
nb_module *nb_nn_avg_pool1d(nb_pool1d_options opts);
nb_module *nb_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
nb_module *nb_nn_adaptive_avg_pool1d(int64_t out_l);
/* The options a module was built with, as stored (PyTorch's attributes
 * conv.stride, pool.kernel_size, flatten.start_dim; 0 fields are the
 * defaults), for code that reads a model (nb_onnx_export). Errors:
 * NB_ERR_INVALID_ARG (NULL, or a module of another kind: Conv2d;
 * MaxPool2d or AvgPool2d; Flatten). */
nb_status nb_nn_conv2d_get_options(nb_module *m, nb_conv2d_options *out);
nb_status nb_nn_pool2d_get_options(nb_module *m, nb_pool2d_options *out);
nb_status nb_nn_flatten_get_dims(nb_module *m, int *start_dim, int *end_dim);
/* MaxPool3d, AvgPool3d (nb_pool3d_options: PyTorch's defaults when 0),
 * AdaptiveAvgPool3d and AdaptiveMaxPool2d (its forward gives the values;
 * nb_adaptive_max_pool2d has the indices). */
nb_module *nb_nn_max_pool3d(nb_pool3d_options opts);
nb_module *nb_nn_avg_pool3d(nb_pool3d_options opts);
nb_module *nb_nn_adaptive_avg_pool3d(int64_t out_d, int64_t out_h, int64_t out_w);
nb_module *nb_nn_adaptive_max_pool2d(int64_t out_h, int64_t out_w);
/* LPPool2d / LPPool1d(norm_type, kernel, stride, ceil_mode) (nb_lp_pool2d;
 * padding and dilation must be left 0). */
nb_module *nb_nn_lp_pool2d(double norm_type, nb_pool2d_options opts);
nb_module *nb_nn_lp_pool1d(double norm_type, nb_pool1d_options opts);
nb_module *nb_nn_lp_pool3d(double norm_type, nb_pool3d_options opts);
/* AdaptiveMaxPool1d(L) and AdaptiveMaxPool3d(D, H, W) (the values). */
nb_module *nb_nn_adaptive_max_pool1d(int64_t out_l);
nb_module *nb_nn_adaptive_max_pool3d(int64_t out_d, int64_t out_h, int64_t out_w);
/* FractionalMaxPool2d / 3d: nb_fractional_max_pool2d / 3d with these
 * options; each forward draws its samples from opts.generator (NULL: the
 * default generator; opts.random_samples is ignored). Errors at
 * construction: a kernel size < 1, neither a positive output size nor a
 * ratio in (0, 1). */
nb_module *nb_nn_fractional_max_pool2d(nb_fractional_max_pool_options opts);
nb_module *nb_nn_fractional_max_pool3d(nb_fractional_max_pool_options opts);
/* MaxUnpool1d/2d/3d(kernel_size, stride (0: kernel_size), padding), cubic
 * windows; nb_forward_n takes (input, indices) (nb_max_unpool2d's; the
 * default output size). */
nb_module *nb_nn_max_unpool1d(int64_t kernel_size, int64_t stride, int64_t padding);
nb_module *nb_nn_max_unpool2d(int64_t kernel_size, int64_t stride, int64_t padding);
nb_module *nb_nn_max_unpool3d(int64_t kernel_size, int64_t stride, int64_t padding);
/* Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout(p) (nb_dropout1d ...):
 * active in training mode, identity in eval; draws from the default
 * generator. Errors: p outside [0, 1] (NB_ERR_INVALID_ARG). */
nb_module *nb_nn_dropout1d(double p);
nb_module *nb_nn_dropout2d(double p);
nb_module *nb_nn_dropout3d(double p);
nb_module *nb_nn_alpha_dropout(double p);
nb_module *nb_nn_feature_alpha_dropout(double p);
/* PixelShuffle(upscale_factor), PixelUnshuffle(downscale_factor)
 * (nb_pixel_shuffle). Upsample on [N, C, H, W] (nb_interpolate): either
 * the size (out_h, out_w > 0; scales 0) or the scale factors (> 0; size 0),
 * the output being floor(in * scale); UpsamplingNearest2d is mode nearest,
 * UpsamplingBilinear2d bilinear with align_corners, as PyTorch's. Errors:
 * NB_ERR_INVALID_ARG (both or neither of size and scale, a bad mode or
 * factor). */
nb_module *nb_nn_pixel_shuffle(int64_t upscale_factor);
nb_module *nb_nn_pixel_unshuffle(int64_t downscale_factor);
/* ChannelShuffle(groups) (nb_channel_shuffle). */
nb_module *nb_nn_channel_shuffle(int64_t groups);
/* nn.Upsample(size or scale_factor, mode, align_corners) as described above; its input must be 4-d
 * (NB_ERR_SHAPE at forward time). */
nb_module *nb_nn_upsample(int64_t out_h, int64_t out_w, double scale_h, double scale_w, nb_interpolate_mode mode,
                          bool align_corners);
/* nn.UpsamplingNearest2d / UpsamplingBilinear2d(size or scale_factor): Upsample in mode nearest, and
 * bilinear with align_corners=True; errors as Upsample's. */
nb_module *nb_nn_upsampling_nearest2d(int64_t out_h, int64_t out_w, double scale_h, double scale_w);
nb_module *nb_nn_upsampling_bilinear2d(int64_t out_h, int64_t out_w, double scale_h, double scale_w);
/* nn.Unfold(kernel, dilation, padding, stride) and nn.Fold(output_size, ...)
 * over nb_im2col / nb_col2im (nb_fold_options; kernel required). */
nb_module *nb_nn_unfold(nb_fold_options opts);
nb_module *nb_nn_fold(int64_t out_h, int64_t out_w, nb_fold_options opts);
/* nn.EmbeddingBag(num_embeddings, embedding_dim, mode, include_last_offset,
 * padding_idx): parameter "weight" [num, dim] N(0, 1), the padding row
 * zeroed (Embedding's init); opts as nb_embedding_bag's (per_sample_weights
 * comes with the forward). nb_forward_n takes (input[, offsets[,
 * per_sample_weights]]); nb_forward a 2-d input. float32. */
nb_module *nb_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, nb_embedding_bag_options opts);
/* nn.Bilinear(in1_features, in2_features, out_features, bias): parameters
 * "weight" [out, in1, in2] and "bias" [out], both U(-1/sqrt(in1),
 * 1/sqrt(in1)) (PyTorch's init); nb_forward_n takes (input1, input2). */
nb_module *nb_nn_bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias, nb_dtype dt);
/* BatchNorm1d ([N, C] or [N, C, L]) / BatchNorm2d ([N, C, H, W]): parameters
 * "weight" (ones), "bias" (zeros); buffers "running_mean" (zeros),
 * "running_var" (ones), "num_batches_tracked" (int64 0, +1 per training
 * forward). eps 1e-5 and momentum 0.1 when given 0; NB_ZERO asks for an
 * actual 0 (momentum 0: running statistics never move). */
nb_module *nb_nn_batch_norm1d(int64_t num_features, double eps, double momentum);
nb_module *nb_nn_batch_norm2d(int64_t num_features, double eps, double momentum);
/* BatchNorm3d: [N, C, D, H, W], otherwise as above. */
nb_module *nb_nn_batch_norm3d(int64_t num_features, double eps, double momentum);
/* nn.GroupNorm(num_groups, num_channels, eps, affine=True) over [N, C, *]
 * (nb_group_norm): parameters "weight" (ones) and "bias" (zeros) [C] when
 * affine; eps 1e-5 when left 0 (NB_ZERO for 0). The _ex form takes affine
 * and the dtype. Errors: NB_ERR_INVALID_ARG (num_channels not divisible by
 * num_groups, a size < 1, eps < 0), NB_ERR_DTYPE. */
nb_module *nb_nn_group_norm(int64_t num_groups, int64_t num_channels, double eps);
nb_module *nb_nn_group_norm_ex(int64_t num_groups, int64_t num_channels, double eps, bool affine, nb_dtype dt);
/* nn.InstanceNorm1d ([N, C, L] or [C, L]), InstanceNorm2d ([N, C, H, W] or
 * [C, H, W]), InstanceNorm3d ([N, C, D, H, W] or [C, D, H, W])
 * (nb_instance_norm), PyTorch's defaults: affine and track_running_stats
 * false, eps 1e-5, momentum 0.1 (left 0; NB_ZERO for 0). affine adds
 * "weight" (ones) and "bias" (zeros); track_running_stats the buffers
 * "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked"
 * (kept at 0: PyTorch's InstanceNorm never counts), which eval mode then normalises with (without
 * them, eval uses each instance's statistics too, as PyTorch). float32. Errors: NB_ERR_INVALID_ARG
 * (num_features < 1, eps < 0, momentum outside [0, 1]), NB_ERR_OOM. */
nb_module *nb_nn_instance_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats);
/* InstanceNorm2d ([N, C, H, W] or [C, H, W]), as above. */
nb_module *nb_nn_instance_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats);
/* InstanceNorm3d ([N, C, D, H, W] or [C, D, H, W]), as above. */
nb_module *nb_nn_instance_norm3d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats);
/* nn.LocalResponseNorm(size, alpha, beta, k) (nb_local_response_norm; 0
 * takes the defaults 1e-4, 0.75, 1). Errors: size < 1 (NB_ERR_INVALID_ARG). */
nb_module *nb_nn_local_response_norm(int64_t size, double alpha, double beta, double k);
/* Dropout(p): active in train mode, identity in eval; draws from the
 * default generator. */
nb_module *nb_nn_dropout(double p);

/* ---- recurrent modules (nn/rnn.c) ----------------------------------------------
 * nn.RNN, nn.LSTM and nn.GRU over nb_rnn (nb_functional.h: formulas,
 * shapes, options), and nn.RNNCell, LSTMCell, GRUCell over nb_rnn_cell.
 * Parameters as PyTorch's, per layer then direction: weight_ih_l{k}
 * [G H, I_k], weight_hh_l{k} [G H, H_out], bias_ih_l{k} and bias_hh_l{k}
 * [G H] (unless opts.bias is NB_FLAG_FALSE), weight_hr_l{k} [proj_size, H]
 * (LSTM with proj_size), "_reverse" for the second direction; the cells'
 * are weight_ih, weight_hh, bias_ih, bias_hh. All U(-1/sqrt(H), 1/sqrt(H))
 * from the default generator (PyTorch's reset_parameters). opts: a zeroed
 * struct is PyTorch's defaults (1 layer, bias, [T, B, I], no dropout,
 * one direction, float32); nb_nn_rnn takes opts.mode NB_RNN_TANH (default)
 * or NB_RNN_RELU (nonlinearity='relu'), the cells only bias, dtype and
 * (RNNCell) mode. Dropout between layers acts in training mode.
 * nb_forward_n: RNN and GRU take (input[, h_0]) and give (output, h_n);
 * LSTM takes (input[, h_0[, c_0]]) and gives (output, h_n, c_n) (PyTorch's
 * (output, (h_n, c_n)) flattened); the cells take (input[, hx[, cx]]) and
 * give h' (LSTMCell: h', c'). nb_forward gives output (the cells: h').
 * On CUDA the layers run through cuDNN's RNN API (nb_rnn in
 * nb_functional.h; nb_set_cudnn_enabled). Errors: NB_ERR_INVALID_ARG
 * (sizes < 1, more than 64 layers, a bad mode
 * or option), NB_ERR_DTYPE, NB_ERR_OOM. */
/* The constructors, (input_size, hidden_size, opts) as PyTorch's: nn.RNN, LSTM, GRU, RNNCell, LSTMCell,
 * GRUCell (kinds of those names). LSTM and GRU ignore opts.mode; RNN and RNNCell take NB_RNN_TANH or
 * NB_RNN_RELU; a cell given num_layers, batch_first, bidirectional, proj_size or dropout fails
 * (NB_ERR_INVALID_ARG). */
nb_module *nb_nn_rnn(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
nb_module *nb_nn_lstm(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
nb_module *nb_nn_gru(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
nb_module *nb_nn_rnn_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
nb_module *nb_nn_lstm_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
nb_module *nb_nn_gru_cell(int64_t input_size, int64_t hidden_size, nb_rnn_options opts);
/* An RNN, LSTM or GRU module on a packed sequence (PyTorch's forward with a
 * PackedSequence): nb_rnn_packed with the module's parameters and options
 * (dropout in training mode). Writes the packed output and h_n (and c_n)
 * to states; returns 1 or 2, or -1 (NB_ERR_INVALID_ARG for another kind
 * of module, nb_rnn_packed's errors). */
int nb_nn_rnn_forward_packed(nb_module *m, const nb_packed_sequence *input, nb_tensor *hx, nb_tensor *cx,
                             nb_packed_sequence *output, nb_tensor **states);

/* nn.AdaptiveLogSoftmaxWithLoss (Grave et al. 2017): classes below
 * cutoffs[0] in the head's shortlist, the rest in clusters [cutoffs[i],
 * cutoffs[i+1]) (the last up to n_classes), each through its tail of two
 * linears (in_features -> in_features // div_value^(i+1) -> its size).
 * cutoffs: 1 to 32 increasing values in [1, n_classes); div_value 4 when
 * left 0; head_bias; parameters of dtype (float32 when 0, float64), named
 * as PyTorch's (head.weight, tail.0.0.weight, ...). nb_forward_n takes
 * (input [N, in_features] or [in_features], target int64 [N] or 0-d) and
 * gives (output: each target's log-probability [N], loss: -mean(output)).
 * Errors: NB_ERR_INVALID_ARG (bad sizes or cutoffs, as PyTorch's; a
 * projection of size 0, which PyTorch builds), NB_ERR_SHAPE, a target
 * outside [0, n_classes) (gather's error). */
nb_module *nb_nn_adaptive_log_softmax_with_loss(int64_t in_features, int64_t n_classes, const int64_t *cutoffs,
                                                int n_cutoffs, double div_value, bool head_bias, nb_dtype dtype);
/* Its log_prob(input): [N, n_classes] ([n_classes]) log-probabilities; and
 * predict(input): the int64 argmax class. NULL with NB_ERR_INVALID_ARG for
 * another kind of module. */
nb_tensor *nb_nn_adaptive_log_softmax_log_prob(nb_module *m, nb_tensor *input);
nb_tensor *nb_nn_adaptive_log_softmax_predict(nb_module *m, nb_tensor *input);

/* ---- parametrizations (nn/parametrize.c) ---------------------------------------
 * torch.nn.utils.parametrizations.weight_norm / spectral_norm and
 * parametrize.remove_parametrizations. The parameter `name` (NULL:
 * "weight") of m is replaced, as PyTorch's, by the children
 * parametrizations.<name> holding the originals (weight norm: original0 = g,
 * original1 = v; spectral norm: original) and parametrizations.<name>.0
 * (spectral norm's buffers _u, _v): the state_dict keys are PyTorch's, and
 * m's parameters() now list the originals (build the optimizer after);
 * nb_module_get(m, name) still finds the (recomputed) tensor.
 * Each forward of m recomputes the tensor first (a forward pre-hook) in
 * the same tensor object m's forward reads (nb_tensor_rebind), so
 * gradients reach the originals, and graphs of earlier forwards keep
 * theirs (several forwards before one backward work). One parametrization
 * per tensor. */
/* weight_norm (Salimans & Kingma 2016): w = g v / ||v||, the norm over
 * every dim but dim (PyTorch's default 0; -1 or NB_DIM_NONE: over the
 * whole tensor, as PyTorch's dim=None); g starts as ||w||, v as w.
 * Errors: NB_ERR_INVALID_ARG (no such parameter, a name already
 * parametrized among them; a bad dim). */
nb_status nb_nn_weight_norm(nb_module *m, const char *name, int dim);
/* spectral_norm's options; zeroed: PyTorch's defaults. */
typedef struct nb_spectral_norm_options {
    int64_t n_power_iterations; /* per forward in training mode; 1 when left 0 */
    double eps;                 /* of the normalizations; 1e-12 when left 0 */
    int dim;                    /* the output dim: 0 means PyTorch's default (0, or 1 for ConvTranspose) */
} nb_spectral_norm_options;
/* spectral_norm (Miyato et al. 2018): w / sigma, sigma = u . (W v) with W
 * the weight as a matrix [size(dim), rest] and u, v from power iterations
 * (normalize(W v) -> u, normalize(W^T u) -> v) run in training mode on the
 * buffers (u, v drawn N(0, 1) from the default generator and iterated 15
 * times at registration, as PyTorch's). A 1-d weight is normalized. */
nb_status nb_nn_spectral_norm(nb_module *m, const char *name, nb_spectral_norm_options opts);
/* Removes the parametrization of name: the parameter comes back as a leaf
 * holding the parametrized value (leave_parametrized), or spectral norm's
 * original. It is the module's tensor object, not PyTorch's `original`
 * object: an optimizer holding the originals must be rebuilt. Errors:
 * NB_ERR_INVALID_ARG (none; weight_norm without leave_parametrized, which
 * has two originals, as PyTorch's). */
nb_status nb_nn_remove_parametrizations(nb_module *m, const char *name, bool leave_parametrized);

/* ---- loss modules (nn/loss.c) ---------------------------------------------------
 * torch.nn's losses as modules: each keeps its options and calls the
 * functional of the same name (nb_functional.h: formulas, shapes, dtypes,
 * errors) on the tensors given to nb_forward_n, in PyTorch's forward
 * order; the result is the loss's only output:
 *   nb_module *crit = nb_nn_cross_entropy_loss((nb_cross_entropy_options){.label_smoothing = 0.1});
 *   nb_tensor *loss;
 *   nb_forward_n(crit, 2, (nb_tensor *[]){logits, target}, &loss, 1);
 * Inputs: (input, target); (input1, input2, target) for MarginRankingLoss and
 * CosineEmbeddingLoss; (input, target, var) for GaussianNLLLoss; (anchor,
 * positive, negative) for the triplet losses; (x1, x2) for CosineSimilarity
 * and PairwiseDistance. Another count is NB_ERR_INVALID_ARG, naming them.
 * A zeroed options struct is PyTorch's defaults. A weight or pos_weight in
 * the options becomes the module's buffer "weight" / "pos_weight" (a
 * reference of its own; PyTorch's register_buffer), which the forward uses,
 * so it is in the state_dict and loads with it. Constructors fail with
 * NB_ERR_INVALID_ARG for a bad reduction, NB_ERR_OOM; other option errors
 * come from the forward, as PyTorch's. */
nb_module *nb_nn_l1_loss(nb_reduction reduction);  /* L1Loss */
nb_module *nb_nn_mse_loss(nb_reduction reduction); /* MSELoss */
nb_module *nb_nn_cross_entropy_loss(nb_cross_entropy_options opts); /* CrossEntropyLoss */
nb_module *nb_nn_nll_loss(nb_cross_entropy_options opts);           /* NLLLoss */
nb_module *nb_nn_smooth_l1_loss(nb_loss_options opts); /* SmoothL1Loss: beta */
nb_module *nb_nn_huber_loss(nb_loss_options opts);     /* HuberLoss: delta */
nb_module *nb_nn_bce_loss(nb_loss_options opts);             /* BCELoss */
nb_module *nb_nn_bce_with_logits_loss(nb_loss_options opts); /* BCEWithLogitsLoss */
nb_module *nb_nn_kl_div_loss(nb_loss_options opts);                /* KLDivLoss (nb_kl_div): log_target, batchmean */
nb_module *nb_nn_soft_margin_loss(nb_reduction reduction);         /* SoftMarginLoss */
nb_module *nb_nn_hinge_embedding_loss(nb_loss_options opts);       /* HingeEmbeddingLoss: margin */
nb_module *nb_nn_margin_ranking_loss(nb_loss_options opts);        /* MarginRankingLoss: margin */
nb_module *nb_nn_poisson_nll_loss(nb_loss_options opts);           /* PoissonNLLLoss: log_input, full, eps */
nb_module *nb_nn_gaussian_nll_loss(nb_loss_options opts);          /* GaussianNLLLoss: full, eps */
nb_module *nb_nn_multilabel_soft_margin_loss(nb_loss_options opts); /* MultiLabelSoftMarginLoss: weight */
nb_module *nb_nn_multi_margin_loss(nb_loss_options opts);          /* MultiMarginLoss: p, margin, weight */
nb_module *nb_nn_multilabel_margin_loss(nb_reduction reduction);   /* MultiLabelMarginLoss */
nb_module *nb_nn_cosine_embedding_loss(nb_loss_options opts);      /* CosineEmbeddingLoss: margin */
nb_module *nb_nn_triplet_margin_loss(nb_loss_options opts);        /* TripletMarginLoss: margin, p, eps, swap */
/* distance(x1, x2, user) as nb_triplet_margin_with_distance_loss's (NULL:
 * pairwise_distance); user is passed through, not owned. */
nb_module *nb_nn_triplet_margin_with_distance_loss(nb_distance_fn distance, void *user, nb_loss_options opts);
/* CTCLoss: forward_n (log_probs, targets, input_lengths, target_lengths), nb_ctc_loss's. */
nb_module *nb_nn_ctc_loss(nb_ctc_loss_options opts);
/* nn.CosineSimilarity(dim, eps) and nn.PairwiseDistance(p, eps, keepdim):
 * the arguments as nb_cosine_similarity's and nb_pairwise_distance's
 * (PyTorch's defaults: dim 1, eps 1e-8; p 2, eps 1e-6, keepdim false;
 * dim is taken as given). */
nb_module *nb_nn_cosine_similarity(int dim, double eps);
nb_module *nb_nn_pairwise_distance(double p, double eps, bool keepdim);

/* ---- state_dict (nn/state_dict.c) -------------------------------------------
 * A module's state_dict is its parameters then its buffers, by dotted name
 * ("fc1.weight", "bn1.running_mean"), as PyTorch's keys. Files are
 * safetensors (nb_safetensors.h) with metadata {"format": "pt"}, so
 * `safetensors.torch.load_file(path)` gives a dict that
 * `model.load_state_dict` takes; nb_pt_save (nb_data.h) writes
 * torch.save's format from nb_module_state_dict's list. */

/* What a load found, by name (all strings owned by the report; free it with
 * nb_load_report_free). As PyTorch's load_state_dict result, plus shapes. */
typedef struct nb_load_report {
    int n_missing;     /* model keys absent from the source */
    char **missing;    /* those keys, missing[0..n_missing) */
    int n_unexpected;  /* source keys the model does not have */
    char **unexpected; /* those keys, unexpected[0..n_unexpected) */
    int n_mismatched;  /* "fc1.weight: file [3, 4], model [4, 4]" */
    char **mismatched; /* those lines, mismatched[0..n_mismatched) */
} nb_load_report;
/* Frees the lists and zeroes the report; NULL or a zeroed report is ignored. */
void nb_load_report_free(nb_load_report *r);

/* The state_dict as a malloc'd array (free() it; names and tensors borrowed
 * from m, valid while m is unchanged): parameters, then buffers. Returns the
 * count, or -1 with nb_last_error() set (NULL module or out, NB_ERR_OOM). */
int nb_module_state_dict(nb_module *m, nb_named_tensor **out);
/* Writes m's state_dict to path (atomically, with per-tensor CRC-32; see
 * nb_safetensors_save). Errors: NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_module_state_dict_save(nb_module *m, const char *path);
/* Copies n named tensors into m's parameters and buffers of the same name
 * (casting dtype if needed, like PyTorch's param.copy_; no autograd).
 * Everything is checked before anything is copied, so on failure m is
 * unchanged. A shape mismatch is always an error (NB_ERR_SHAPE), as in
 * PyTorch; with strict, missing or unexpected keys are too (NB_ERR_FORMAT);
 * non-strict loading skips them. The message names the keys, e.g.
 *   "load_state_dict: 1 missing key (2.bias); 1 unexpected key (3.weight)".
 * report (may be NULL) receives the lists whatever the outcome; the caller
 * frees it with nb_load_report_free. Other errors: NB_ERR_INVALID_ARG
 * (NULL m, or NULL ts with n > 0), NB_ERR_OOM. */
nb_status nb_module_load_tensors(nb_module *m, const nb_named_tensor *ts, int n, bool strict,
                                 nb_load_report *report);
/* nb_module_load_tensors from the file at path: safetensors, or PyTorch's
 * torch.save format (a .pt / .pth / .bin file, told apart by its magic:
 * every tensor of the checkpoint by its dotted name, nb_pt_load in
 * nb_data.h). A checkpoint that nests the state_dict under a key such as
 * "model" gives keys "model.fc.weight": load it with nb_pt_load,
 * nb_pt_state_dict(f, "model", ...) and nb_module_load_tensors. Any error
 * of the file's loader is returned first, and m is left unchanged. */
nb_status nb_module_load_state_dict(nb_module *m, const char *path, bool strict, nb_load_report *report);

/* ---- activation modules, op coverage (nn/activation.c) --------------------- */
/* torch.nn's activation modules: forward applies the op of nb_ops.h of the
 * same name (formulas, dtypes and gradients there); no parameters. The
 * arguments are PyTorch's, whose defaults are LeakyReLU(0.01), ELU(1.0),
 * Softplus(1, 20), Hardtanh(-1, 1). Kinds: "LeakyReLU", "ELU", "SELU",
 * "SiLU", "Mish", "Softplus", "Hardtanh", "Hardsigmoid", "Hardswish",
 * "LogSigmoid". Errors (NULL returned): Softplus with beta 0 or not finite
 * or threshold NaN, Hardtanh with min_val > max_val (NB_ERR_INVALID_ARG). */
nb_module *nb_nn_leaky_relu(double negative_slope);
nb_module *nb_nn_elu(double alpha);
nb_module *nb_nn_selu(void);
nb_module *nb_nn_silu(void);
nb_module *nb_nn_mish(void);
nb_module *nb_nn_softplus(double beta, double threshold);
nb_module *nb_nn_hardtanh(double min_val, double max_val);
nb_module *nb_nn_hardsigmoid(void);
nb_module *nb_nn_hardswish(void);
nb_module *nb_nn_logsigmoid(void);
/* More of torch.nn's activations, over the ops of the same names
 * (nb_ops.h), with PyTorch's arguments (0 takes the default where the op
 * says so): ReLU6, CELU(alpha 1), Softsign, Softshrink(lambd 0.5),
 * Hardshrink(lambd 0.5), Tanhshrink, Threshold(threshold, value), GLU(dim;
 * PyTorch's default -1), RReLU(lower 1/8, upper 1/3; random slopes in
 * training mode from the default generator, their mean in eval),
 * Softmax(dim), LogSoftmax(dim), Softmin(dim) (the dim as given; PyTorch's
 * implicit dim=None is not kept), Softmax2d (over dim -3 of a 3-d or 4-d
 * input), and PReLU(num_parameters 1, init 0.25 when left 0) with the
 * parameter "weight" [num_parameters]. Errors: NB_ERR_INVALID_ARG for
 * CELU's alpha NB_ZERO, a negative Softshrink lambd, RReLU's lower > upper,
 * PReLU's num_parameters < 1. */
nb_module *nb_nn_relu6(void);
nb_module *nb_nn_celu(double alpha);
nb_module *nb_nn_softsign(void);
nb_module *nb_nn_softshrink(double lambd);
nb_module *nb_nn_hardshrink(double lambd);
nb_module *nb_nn_tanhshrink(void);
nb_module *nb_nn_threshold(double threshold, double value);
nb_module *nb_nn_glu(int dim);
nb_module *nb_nn_rrelu(double lower, double upper);
nb_module *nb_nn_softmax(int dim);
nb_module *nb_nn_log_softmax(int dim);
nb_module *nb_nn_softmin(int dim);
nb_module *nb_nn_softmax2d(void);
nb_module *nb_nn_prelu(int64_t num_parameters, double init);

/* ---- nn.init (nn/init.c) ---------------------------------------------------- */

/* torch.nn.init.orthogonal_(tensor, gain, generator): fills t (ndim >= 2,
 * f32/f64, any device; viewed as rows = shape[0] by cols = numel / rows) in
 * place, no autograd, with a (semi-)orthogonal matrix times gain: rows <=
 * cols gives W W^T = gain^2 I, rows > cols gives W^T W = gain^2 I. PyTorch's
 * algorithm: a N(0, 1) [rows, cols] matrix from gen (NULL = default),
 * transposed when rows < cols, its QR (nb_linalg_qr), Q times
 * sign(diag(R)) (uniform over the orthogonal group, Mezzadri 2006),
 * transposed back (Saxe et al. 2013). An empty tensor is left as is.
 * Errors: NB_ERR_SHAPE (ndim < 2), NB_ERR_DTYPE, LAPACK's (NB_ERR_UNSUPPORTED
 * when no LAPACKE can be loaded). */
nb_status nb_init_orthogonal_(nb_tensor *t, double gain, nb_generator *gen);

/* torch.nn.init.calculate_gain: the recommended gain of a nonlinearity,
 * PyTorch's table: 1 for "linear", "conv1d/2d/3d",
 * "conv_transpose1d/2d/3d" and "sigmoid"; 5/3 "tanh"; sqrt(2) "relu";
 * sqrt(2 / (1 + param^2)) "leaky_relu" (param: the negative slope, NAN for
 * PyTorch's None = 0.01); 3/4 "selu". NAN with NB_ERR_INVALID_ARG for any
 * other name, NULL or a non-finite slope. */
double nb_init_calculate_gain(const char *nonlinearity, double param);
/* fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field,
 * the receptive field being the product of shape[2:]
 * (torch.nn.init._calculate_fan_in_and_fan_out). Errors: NB_ERR_SHAPE for
 * ndim < 2, NB_ERR_INVALID_ARG for NULL. */
nb_status nb_init_calculate_fan_in_and_fan_out(const nb_tensor *t, int64_t *fan_in, int64_t *fan_out);

/* The in-place initialisers below fill t (float dtypes, any device, ndim >= 2
 * where a fan is needed) without autograd, drawing from gen (NULL: the
 * default generator); an empty tensor is left as is. Errors: NB_ERR_INVALID_ARG
 * (NULL, bad arguments), NB_ERR_DTYPE (not a float tensor), NB_ERR_SHAPE
 * (ndim < 2). torch.nn.init.uniform_ and normal_ are nb_uniform_ and
 * nb_normal_ (nb_core.h). */

/* xavier_uniform_: U(-b, b) with b = gain sqrt(6 / (fan_in + fan_out));
 * xavier_normal_: N(0, gain^2 2 / (fan_in + fan_out)) (Glorot & Bengio
 * 2010, "Understanding the difficulty of training deep feedforward neural
 * networks"; PyTorch's default gain is 1). */
nb_status nb_init_xavier_uniform_(nb_tensor *t, double gain, nb_generator *gen);
nb_status nb_init_xavier_normal_(nb_tensor *t, double gain, nb_generator *gen);

/* Which fan kaiming_ divides by: fan_in keeps the forward pass's variance,
 * fan_out the backward pass's (PyTorch's mode='fan_in' / 'fan_out'). */
typedef enum nb_init_fan_mode { NB_FAN_IN, NB_FAN_OUT } nb_init_fan_mode;
/* kaiming_uniform_: U(-b, b) with b = gain sqrt(3 / fan); kaiming_normal_:
 * N(0, gain^2 / fan); gain = nb_init_calculate_gain(nonlinearity, a), fan
 * by mode (He et al. 2015, "Delving deep into rectifiers"). PyTorch's
 * defaults: a = 0, NB_FAN_IN, nonlinearity "leaky_relu" (NULL means that),
 * so gain sqrt(2). Errors as above, and an unsupported nonlinearity. */
nb_status nb_init_kaiming_uniform_(nb_tensor *t, double a, nb_init_fan_mode mode, const char *nonlinearity,
                                   nb_generator *gen);
/* kaiming_normal_: N(0, gain^2 / fan), arguments and errors as kaiming_uniform_'s. */
nb_status nb_init_kaiming_normal_(nb_tensor *t, double a, nb_init_fan_mode mode, const char *nonlinearity,
                                  nb_generator *gen);

/* trunc_normal_: N(mean, std^2) restricted to [a, b] (any ndim), by PyTorch's
 * inverse-CDF method: u ~ U(erf(alpha / sqrt 2), erf(beta / sqrt 2)) with
 * alpha = (a - mean) / std, beta = (b - mean) / std, then
 * mean + std sqrt(2) erfinv(u), clamped to [a, b]; computed in float64 and
 * rounded once into t (so a truncation far in a tail stays accurate).
 * PyTorch's defaults: mean 0, std 1, a -2, b 2. Errors: NB_ERR_INVALID_ARG
 * unless mean is finite, 0 < std < inf and a <= b (a, b may be infinite). */
nb_status nb_init_trunc_normal_(nb_tensor *t, double mean, double std, double a, double b, nb_generator *gen);

/* constant_ / zeros_ / ones_: every element set (any dtype; nb_fill_). */
nb_status nb_init_constant_(nb_tensor *t, double value);
nb_status nb_init_zeros_(nb_tensor *t);
nb_status nb_init_ones_(nb_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
