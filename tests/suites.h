/* suites.h - every Check suite of the test runner (tests/main.c).
 * A test file defines one `Suite *nb_suite_<name>(void)` and adds it here
 * and to tests/meson.build. */
#ifndef NB_SUITES_H
#define NB_SUITES_H
#include <check.h>

#define NB_SUITES(X) \
    X(core) \
    X(rng) \
    X(autograd) \
    X(autograd_grad) \
    X(autograd_function) \
    X(autograd_hooks) \
    X(ops_unary) \
    X(cpu_isa) \
    X(ops_binary) \
    X(ops_binary_logic) \
    X(ops_cast) \
    X(ops_matmul) \
    X(ops_reduce) \
    X(ops_view) \
    X(ops_softmax) \
    X(ops_loss) \
    X(ops_conv) \
    X(ops_pool) \
    X(ops_batch_norm) \
    X(ops_dropout) \
    X(ops_upsample) \
    X(ops_index) \
    X(ops_index_into) \
    X(ops_layer_norm) \
    X(ops_attention) \
    X(ops_attention_cuda) \
    X(ops_rms_norm) \
    X(ops_rope) \
    X(ops_quantize) \
    X(ops_int8) \
    X(ops_scan) \
    X(ops_sort) \
    X(ops_gather) \
    X(ops_shape) \
    X(ops_linalg) \
    X(ops_foreach) \
    X(option_defaults) \
    X(ownership_debug) \
    X(nn_io) \
    X(ops_group_norm) \
    X(ops_rnn) \
    X(nn_layers) \
    X(ops_einsum) \
    X(ops_activation) \
    X(transformer_decoder) \
    X(ops_fold) \
    X(op_table) \
    X(op_harness) \
    X(text) \
    X(bpe) \
    X(transformer) \
    X(decoder) \
    X(decoder_io) \
    X(generate_batch) \
    X(sampling) \
    X(nn) \
    X(optim) \
    X(data) \
    X(npy) \
    X(pt) \
    X(csv) \
    X(tensorboard) \
    X(progress) \
    X(module_summary) \
    X(deprecated) \
    X(onnx) \
    X(profile) \
    X(dataloader) \
    X(image) \
    X(safetensors) \
    X(checkpoint) \
    X(scheduler) \
    X(optim_ref) \
    X(optim_groups) \
    X(mnist_e2e) \
    X(alloc_faults) \
    X(null_args) \
    X(examples) \
    X(print) \
    X(ops_random) \
    X(cuda_elementwise) \
    X(pointwise) \
    X(graph) \
    X(compile) \
    X(cuda_runtime) \
    X(autocast) \
    X(flat_params) \
    X(distributed)

#define NB_DECLARE_SUITE(name) Suite *nb_suite_##name(void);
NB_SUITES(NB_DECLARE_SUITE)
#undef NB_DECLARE_SUITE

#endif
