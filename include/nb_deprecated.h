/* nb_deprecated.h - the public names that changed before 0.1.0, kept as
 * deprecated aliases (a compiler warning naming the replacement) so that
 * programs written against them still build. Removed in 0.2.0 (see
 * CHANGELOG.md). Not aliased, since the old spelling now names something
 * else: nb_linear (now the functional F.linear; the module is nb_nn_linear)
 * and nb_grad (now torch.autograd.grad; a tensor's gradient is
 * nb_tensor_grad). Changed in meaning, so not aliased either: the LR
 * scheduler's state functions (nb_scheduler_state_dict /
 * load_state_dict), nb_blas_info (nb_backend_info(NB_CPU)), and the
 * backend vtable (private since the backend interface v3).
 *
 * Each alias is a static inline function calling the new name, so it costs
 * nothing at run time and adds no symbol to the library. */
#ifndef NB_DEPRECATED_H
#define NB_DEPRECATED_H

#include "nb_nn.h"
#include "nb_optim.h"
#include "nb_transformer.h"
#include "nb_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Variadic: macros that warn where they are used (GCC and Clang). */
#if defined(__GNUC__) || defined(__clang__)
#define NB_DEPRECATED_MACRO(msg) _Pragma(msg)
#else
#define NB_DEPRECATED_MACRO(msg)
#endif
#define nb_sequential(...) \
    NB_DEPRECATED_MACRO("GCC warning \"nb_sequential is deprecated: renamed nb_nn_sequential\"") nb_nn_sequential(__VA_ARGS__)
#define nb_sequential_n(...) \
    NB_DEPRECATED_MACRO("GCC warning \"nb_sequential_n is deprecated: renamed nb_nn_sequential_n\"") nb_nn_sequential_n(__VA_ARGS__)

/* clang-format off */
NB_DEPRECATED("renamed nb_nn_linear_ex") static inline nb_module *nb_linear_ex(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt) { return nb_nn_linear_ex(in_features, out_features, bias, dt); }
NB_DEPRECATED("renamed nb_nn_relu") static inline nb_module *nb_relu_module(void) { return nb_nn_relu(); }
NB_DEPRECATED("renamed nb_nn_sigmoid") static inline nb_module *nb_sigmoid_module(void) { return nb_nn_sigmoid(); }
NB_DEPRECATED("renamed nb_nn_tanh") static inline nb_module *nb_tanh_module(void) { return nb_nn_tanh(); }
NB_DEPRECATED("renamed nb_nn_flatten") static inline nb_module *nb_flatten_module(int start_dim, int end_dim) { return nb_nn_flatten(start_dim, end_dim); }
NB_DEPRECATED("renamed nb_nn_sequential_append") static inline nb_status nb_sequential_append(nb_module *seq, nb_module *child) { return nb_nn_sequential_append(seq, child); }
NB_DEPRECATED("renamed nb_nn_sequential_array") static inline nb_module *nb_sequential_array(nb_module *const *children, int n) { return nb_nn_sequential_array(children, n); }
NB_DEPRECATED("renamed nb_nn_conv2d") static inline nb_module *nb_conv2d_module(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv2d_options opts, bool bias) { return nb_nn_conv2d(in_channels, out_channels, kernel_size, opts, bias); }
NB_DEPRECATED("renamed nb_nn_conv1d") static inline nb_module *nb_conv1d_module(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv1d_options opts, bool bias) { return nb_nn_conv1d(in_channels, out_channels, kernel_size, opts, bias); }
NB_DEPRECATED("renamed nb_nn_conv_transpose2d") static inline nb_module *nb_conv_transpose2d_module(int64_t in_channels, int64_t out_channels, int64_t kernel_size, nb_conv_transpose2d_options opts, bool bias) { return nb_nn_conv_transpose2d(in_channels, out_channels, kernel_size, opts, bias); }
NB_DEPRECATED("renamed nb_nn_max_pool2d") static inline nb_module *nb_max_pool2d_module(nb_pool2d_options opts) { return nb_nn_max_pool2d(opts); }
NB_DEPRECATED("renamed nb_nn_max_pool1d") static inline nb_module *nb_max_pool1d_module(nb_pool1d_options opts) { return nb_nn_max_pool1d(opts); }
NB_DEPRECATED("renamed nb_nn_avg_pool2d") static inline nb_module *nb_avg_pool2d_module(nb_pool2d_options opts) { return nb_nn_avg_pool2d(opts); }
NB_DEPRECATED("renamed nb_nn_avg_pool1d") static inline nb_module *nb_avg_pool1d_module(nb_pool1d_options opts) { return nb_nn_avg_pool1d(opts); }
NB_DEPRECATED("renamed nb_nn_adaptive_avg_pool2d") static inline nb_module *nb_adaptive_avg_pool2d_module(int64_t out_h, int64_t out_w) { return nb_nn_adaptive_avg_pool2d(out_h, out_w); }
NB_DEPRECATED("renamed nb_nn_adaptive_avg_pool1d") static inline nb_module *nb_adaptive_avg_pool1d_module(int64_t out_l) { return nb_nn_adaptive_avg_pool1d(out_l); }
NB_DEPRECATED("renamed nb_nn_batch_norm1d") static inline nb_module *nb_batch_norm1d_module(int64_t num_features, double eps, double momentum) { return nb_nn_batch_norm1d(num_features, eps, momentum); }
NB_DEPRECATED("renamed nb_nn_batch_norm2d") static inline nb_module *nb_batch_norm2d_module(int64_t num_features, double eps, double momentum) { return nb_nn_batch_norm2d(num_features, eps, momentum); }
NB_DEPRECATED("renamed nb_nn_dropout") static inline nb_module *nb_dropout_module(double p) { return nb_nn_dropout(p); }
NB_DEPRECATED("renamed nb_nn_leaky_relu") static inline nb_module *nb_leaky_relu_module(double negative_slope) { return nb_nn_leaky_relu(negative_slope); }
NB_DEPRECATED("renamed nb_nn_elu") static inline nb_module *nb_elu_module(double alpha) { return nb_nn_elu(alpha); }
NB_DEPRECATED("renamed nb_nn_selu") static inline nb_module *nb_selu_module(void) { return nb_nn_selu(); }
NB_DEPRECATED("renamed nb_nn_silu") static inline nb_module *nb_silu_module(void) { return nb_nn_silu(); }
NB_DEPRECATED("renamed nb_nn_mish") static inline nb_module *nb_mish_module(void) { return nb_nn_mish(); }
NB_DEPRECATED("renamed nb_nn_softplus") static inline nb_module *nb_softplus_module(double beta, double threshold) { return nb_nn_softplus(beta, threshold); }
NB_DEPRECATED("renamed nb_nn_hardtanh") static inline nb_module *nb_hardtanh_module(double min_val, double max_val) { return nb_nn_hardtanh(min_val, max_val); }
NB_DEPRECATED("renamed nb_nn_hardsigmoid") static inline nb_module *nb_hardsigmoid_module(void) { return nb_nn_hardsigmoid(); }
NB_DEPRECATED("renamed nb_nn_hardswish") static inline nb_module *nb_hardswish_module(void) { return nb_nn_hardswish(); }
NB_DEPRECATED("renamed nb_nn_logsigmoid") static inline nb_module *nb_logsigmoid_module(void) { return nb_nn_logsigmoid(); }
NB_DEPRECATED("renamed nb_nn_embedding") static inline nb_module *nb_embedding_module(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx) { return nb_nn_embedding(num_embeddings, embedding_dim, padding_idx); }
NB_DEPRECATED("renamed nb_nn_embedding_ex") static inline nb_module *nb_embedding_module_ex(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, nb_dtype dt) { return nb_nn_embedding_ex(num_embeddings, embedding_dim, padding_idx, dt); }
NB_DEPRECATED("renamed nb_nn_embedding_padding_idx") static inline int64_t nb_embedding_padding_idx(const nb_module *m) { return nb_nn_embedding_padding_idx(m); }
NB_DEPRECATED("renamed nb_nn_layer_norm") static inline nb_module *nb_layer_norm_module(int64_t normalized_shape, double eps) { return nb_nn_layer_norm(normalized_shape, eps); }
NB_DEPRECATED("renamed nb_nn_layer_norm_ex") static inline nb_module *nb_layer_norm_module_ex(int n_norm, const int64_t *normalized_shape, double eps, bool elementwise_affine, nb_dtype dt) { return nb_nn_layer_norm_ex(n_norm, normalized_shape, eps, elementwise_affine, dt); }
NB_DEPRECATED("renamed nb_nn_gelu") static inline nb_module *nb_gelu_module(nb_gelu_approximate approximate) { return nb_nn_gelu(approximate); }
NB_DEPRECATED("renamed nb_nn_multihead_attention") static inline nb_module *nb_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias) { return nb_nn_multihead_attention(embed_dim, num_heads, dropout, bias); }
NB_DEPRECATED("renamed nb_nn_multihead_attention_ex") static inline nb_module *nb_multihead_attention_ex(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, nb_dtype dt) { return nb_nn_multihead_attention_ex(embed_dim, num_heads, dropout, bias, dt); }
NB_DEPRECATED("renamed nb_nn_multihead_attention_forward") static inline nb_tensor *nb_mha_forward(nb_module *m, nb_tensor *query, nb_tensor *key, nb_tensor *value, nb_tensor *key_padding_mask, nb_tensor *attn_mask, nb_tensor **attn_weights) { return nb_nn_multihead_attention_forward(m, query, key, value, key_padding_mask, attn_mask, attn_weights); }
NB_DEPRECATED("renamed nb_nn_transformer_encoder_layer") static inline nb_module *nb_transformer_encoder_layer(nb_encoder_layer_options o) { return nb_nn_transformer_encoder_layer(o); }
NB_DEPRECATED("renamed nb_nn_transformer_encoder_layer_forward") static inline nb_tensor *nb_transformer_encoder_layer_forward(nb_module *m, nb_tensor *src, nb_tensor *src_mask, nb_tensor *src_key_padding_mask) { return nb_nn_transformer_encoder_layer_forward(m, src, src_mask, src_key_padding_mask); }
NB_DEPRECATED("renamed nb_nn_transformer_encoder") static inline nb_module *nb_transformer_encoder(nb_encoder_layer_options o, int num_layers, nb_module *norm) { return nb_nn_transformer_encoder(o, num_layers, norm); }
NB_DEPRECATED("renamed nb_nn_transformer_encoder_forward") static inline nb_tensor *nb_transformer_encoder_forward(nb_module *m, nb_tensor *src, nb_tensor *mask, nb_tensor *src_key_padding_mask) { return nb_nn_transformer_encoder_forward(m, src, mask, src_key_padding_mask); }
NB_DEPRECATED("renamed nb_optimizer_zero_grad") static inline void nb_zero_grad(nb_optimizer *opt) { nb_optimizer_zero_grad(opt); }
NB_DEPRECATED("renamed nb_optimizer_step") static inline nb_status nb_step(nb_optimizer *opt) { return nb_optimizer_step(opt); }
NB_DEPRECATED("renamed nb_tensor_zero_grad") static inline void nb_zero_grad_tensor(nb_tensor *t) { nb_tensor_zero_grad(t); }
/* clang-format on */

#ifdef __cplusplus
}
#endif

#endif
