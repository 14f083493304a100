/* nn_impl.h - internals shared by the module files of nn/ (not installed). */
#ifndef NB_NN_IMPL_H
#define NB_NN_IMPL_H

#include "nb_nn.h"
#include "nb_transformer.h"
#include "nb_op_table.h"

/* Registers t, taking the caller's own reference (a tensor made with
 * nb_tensor_new_unscoped): the module ends up the only owner. On failure t
 * is released. */
nb_status nb_module_adopt_parameter(nb_module *m, const char *name, nb_tensor *t);
nb_status nb_module_adopt_buffer(nb_module *m, const char *name, nb_tensor *t);
/* Removes m's own parameter name and hands the caller its reference (NULL
 * with NB_ERR_INVALID_ARG when there is none). */
nb_tensor *nb_module_take_parameter(nb_module *m, const char *name);
/* Trades m's float parameter param (the tensor weight) for two buffers:
 * quantize(weight) registered as names[0] and names[1], then the parameter
 * released. On an error the parameter stays (a buffer may be registered).
 * The packed BitLinear, int8 Linear, int8 tied head and MultiheadAttention's
 * in_proj_weight (nn/linear.c, decoder_layers.c, attention.c). */
nb_status nb_module_weight_to_buffers(nb_module *m, const char *param, nb_tensor *weight,
                                      nb_status (*quantize)(nb_tensor *, nb_tensor **, nb_tensor **),
                                      const char *const names[2]);
/* nb_module_bitnet_pack (bitnet) or nb_module_int8_weight_only on one
 * module: a MultiheadAttention built with (bitnet) or without bitlinear
 * trades in_proj_weight for "in_proj_weight_packed" and
 * "in_proj_weight_scale", or "in_proj_weight_int8" and
 * "in_proj_weight_scale"; NB_OK for other modules and converted ones
 * (nn/attention.c). */
nb_status nb_mha_convert(nb_module *m, bool bitnet);
/* A tensor nb_module_get finds under name that is neither a parameter nor
 * a buffer (not in parameters(), buffers() or the state_dict): a
 * parametrized weight. set retains t; drop releases it (no-op if absent). */
nb_status nb_module_set_attribute(nb_module *m, const char *name, nb_tensor *t);
void nb_module_drop_attribute(nb_module *m, const char *name);
/* Runs m's forward pre-hooks on in[0..n_in) (each may replace entries), as
 * nb_forward_n does first: for forwards that do not go through it (an RNN
 * on a packed sequence). */
nb_status nb_module_run_pre_hooks(nb_module *m, int n_in, nb_tensor **in);
/* Runs m's forward hooks on (in, out[0..n_out)) (each may replace outputs),
 * as nb_forward_n does last. With the pre-hooks, what a module's typed
 * forward (extra arguments, called by its parent directly) wraps around its
 * work so that hooks see it as PyTorch's __call__ would. */
nb_status nb_module_run_post_hooks(nb_module *m, int n_in, nb_tensor *const *in, int n_out, nb_tensor **out);
/* Whether m has forward hooks or pre-hooks (a forward that bypasses m's
 * nb_forward, as a fused product of its weight, must not then run). */
bool nb_module_has_hooks(const nb_module *m);

/* A module's dtype check through the capability query: whether the default
 * device runs op in dt (NB_ERR_DTYPE naming the dtypes the op takes, or
 * NB_ERR_UNSUPPORTED naming the backend). `module` names it in messages. */
bool nb_nn_check_dtype(const char *module, nb_op_id op, nb_dtype dt);

/* ---- shared by transformer.c and transformer_decoder.c ---------------------- */
/* relu, gelu or gelu (tanh) of x. */
nb_tensor *nb_nn_activation_apply(nb_activation a, nb_tensor *x);
/* The causal attn_mask for the T = size(-2) positions of src: bool [T, T],
 * true above the diagonal (may NOT attend: MultiheadAttention's convention). */
nb_tensor *nb_nn_causal_mask(const nb_tensor *src);
/* Fills PyTorch's defaults for the 0 fields of a layer's options and checks
 * the rest (errors name kind). */
bool nb_nn_layer_options(const char *kind, nb_encoder_layer_options *o);
/* Adds child under name and stores it in *slot; false on failure (the child freed). */
bool nb_nn_add_child(nb_module *m, const char *name, nb_module *child, nb_module **slot);
/* TransformerEncoder's and TransformerDecoder's ctx: num_layers copies of a
 * layer in the child "layers" (a ModuleList), then "norm" (NULL: none). */
typedef struct nb_layer_stack_ctx {
    int num_layers;
    nb_module *layers, *norm; /* borrowed children */
} nb_layer_stack_ctx;
/* A module of ops whose ctx is an nb_layer_stack_ctx: num_layers (>= 1)
 * layers from make_layer(o), each a copy of the first (PyTorch's
 * _get_clones), then norm (may be NULL; ownership taken, also on failure). */
nb_module *nb_nn_layer_stack(const nb_module_ops *ops, nb_module *(*make_layer)(nb_encoder_layer_options),
                             nb_encoder_layer_options o, int num_layers, nb_module *norm);
/* A [n] tensor (0-d for n < 0) of dtype dt filled with value, registered in m
 * as a parameter or a buffer under name; NULL on failure. */
nb_tensor *nb_nn_filled_tensor(nb_module *m, const char *name, bool param, int64_t n, nb_dtype dt, double value);
/* Copies the parameters of from into to (same kind and options): PyTorch's deepcopy of a layer. */
nb_status nb_nn_copy_params(nb_module *to, nb_module *from);

/* A weight file's tensors (state_dict.c): safetensors, or PyTorch's zip
 * format (.pt, .bin) told apart by the zip magic. tensors[0..n) stay valid
 * until nb_weights_close. Errors: the loaders'. */
typedef struct nb_weights {
    const nb_named_tensor *tensors;
    int n;
    struct nb_safetensors *st;
    struct nb_pt *pt;
    nb_named_tensor *owned;
} nb_weights;
nb_status nb_weights_open(const char *path, nb_weights *w);
void nb_weights_close(nb_weights *w);

/* MultiheadAttention (nb_nn_multihead_attention_ex) whose in_proj and
 * out_proj are BitNet b1.58's BitLinear when bitlinear is set (the same
 * parameters; nn/attention.c). */
nb_module *nb_mha_new(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, nb_dtype dt, bool bitlinear);

#endif
