/* test_null_args.c - every public function given NULL: the README promises
 * that errors never crash. Each function of the public headers that takes
 * a pointer is called with NULL there (ops also with a valid first tensor
 * and NULL for the others); it must not crash, and must fail the way its
 * return type says: NULL, a non-zero nb_status, -1, NaN or false, leaving
 * a message in nb_last_error() (functions returning void just return). A
 * scan of the headers fails the test for a function missing here, so a new
 * function cannot skip the rule. The calls for autograd/nb_ops.h and the
 * data and utils headers live in test_null_args_ops.c and
 * test_null_args_data.c. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "null_args.h"
#include "suites.h"

/* ---- the names called (null_args.h) ------------------------------------------------ */

#define MAX_NAMES 1024
static const char *called[MAX_NAMES];
static int n_called;

void nb_null_args_note(const char *fn) {
    for (int i = 0; i < n_called; i++)
        if (!strcmp(called[i], fn)) return;
    ck_assert_int_lt(n_called, MAX_NAMES);
    called[n_called++] = fn;
}

void nb_null_args_failed(const char *fn, bool failed) {
    ck_assert_msg(failed, "%s given NULL did not fail", fn);
    ck_assert_msg(nb_last_status() != NB_OK && nb_last_error()[0], "%s given NULL left no error", fn);
}

static nb_tensor *gc_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return in[0];
}

START_TEST(test_every_public_function_survives_null) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(2, 2), NB_F32);
    NB_CK_NOTNULL(x);
    (void)gc_fn;
    /* core/nb_core.h */
    NV(nb_scope_end, NULL);
    NV(nb_retain, NULL);
    NV(nb_release, NULL);
    NP(nb_empty, 2, NULL, (nb_dtype)0);
    NP(nb_zeros, 2, NULL, (nb_dtype)0);
    NP(nb_ones, 2, NULL, (nb_dtype)0);
    NP(nb_full, 2, NULL, 0, (nb_dtype)0);
    NP(nb_empty_on, 2, NULL, (nb_dtype)0, NB_CPU);
    NP(nb_from_data, NULL, 2, NULL, (nb_dtype)0);
    NP(nb_zeros_like, NULL);
    NP(nb_ones_like, NULL);
    NP(nb_empty_like, NULL);
    NP(nb_scalar_like, NULL, 1, NB_F32);
    /* core/nb_extension.h */
    NS(nb_set_error, NB_ERR_INVALID_ARG, NULL);
    NV(nb_scope_return, NULL, NULL);
    NV(nb_scope_adopt, NULL);
    NP(nb_tensor_from_host_memory, NULL, 1, (int64_t[]){2}, NB_F32, NULL, NULL);
    NP(nb_tensor_new, 2, NULL, NB_F32, NB_CPU);
    NP(nb_tensor_new_unscoped, 2, NULL, NB_F32, NB_CPU);
    NS(nb_tensor_rebase, NULL, x, 0);
    NS(nb_tensor_rebase, x, NULL, 0);
    NP(nb_tensor_view_of, NULL, 1, (int64_t[]){1}, NULL, 0);
    NP(nb_tensor_view_of, x, 1, NULL, NULL, 0);
    NP(nb_data_ptr, NULL);
    NV(nb_increment_version, NULL);
    NI(nb_storage_offset, NULL);
    NB(nb_shares_storage, NULL, x);
    NB(nb_shares_storage, x, NULL);
    NP(nb_fmt_shape, 2, NULL, (char[8]){0}, 8);
    NP(nb_fmt_shape, 0, NULL, NULL, 0);
    NP(nb_stream_handle, NULL);
    NB(nb_graph_add_replay_hook, NB_CPU, NULL, NULL);
    NV(nb_generator_advance, NULL, 0); /* the default generator, advanced by nothing */
    /* autograd/nb_foreach.h: NULLs leave x untouched (checked below) */
    NS(nb_add_, NULL, x);
    NS(nb_add_, x, NULL);
    NS(nb_sub_, x, NULL);
    NS(nb_mul_, x, NULL);
    NS(nb_div_, x, NULL);
    NS(nb_maximum_, x, NULL);
    NS(nb_minimum_, x, NULL);
    NS(nb_mul_scalar_, NULL, 2);
    NS(nb_index_select_out, NULL, x, 0, NULL);
    NS(nb_index_select_out, x, x, 0, NULL);
    NP(nb_foreach_norm, NULL, 1, 2.0);
    NP(nb_foreach_norm, (nb_tensor *[]){x, NULL}, 2, 2.0);
    NS(nb_foreach_mul_, (nb_tensor *[]){x}, 1, NULL);
    NS(nb_foreach_mul_, NULL, 1, x);
    NS(nb_fused_adam_, 1, NULL, NULL, NULL, NULL, NULL, NULL);
    NS(nb_fused_adam_, 1, (nb_tensor *[]){x}, (nb_tensor *[]){x}, (nb_tensor *[]){NULL}, (nb_tensor *[]){x}, NULL,
       &(nb_adam_hyper){.lr = 1, .step = 1});
    NS(nb_fused_sgd_, 1, NULL, NULL, NULL, NULL);
    NS(nb_fused_sgd_, 1, (nb_tensor *[]){x}, (nb_tensor *[]){NULL}, NULL, &(nb_sgd_hyper){.lr = 1});
    NI(nb_dim, NULL);
    NI(nb_size, NULL, 0);
    NQ(nb_shape, NULL);
    NQ(nb_strides, NULL);
    NI(nb_numel, NULL);
    NX(nb_dtype_of, NULL);
    NX(nb_device_of, NULL);
    NB(nb_is_contiguous, NULL);
    NQ(nb_shape_str, NULL, NULL, 1);
    NS(nb_to_host, NULL, NULL, 0);
    ND(nb_item, NULL);
    NS(nb_copy_from_host, NULL, NULL, 0);
    NS(nb_copy_, NULL, NULL);
    NS(nb_fill_, NULL, 0);
    NP(nb_to_device, NULL, NB_CPU);
    NP(nb_to_dtype, NULL, (nb_dtype)0);
    NP(nb_rand, 2, NULL, (nb_dtype)0, NULL);
    NP(nb_randn, 2, NULL, (nb_dtype)0, NULL);
    NS(nb_uniform_, NULL, 0, 0, NULL);
    NS(nb_normal_, NULL, 0, 0, NULL);
    NS(nb_bernoulli_, NULL, 0, NULL);
    NOK(nb_randperm, 1, NULL); /* the default generator */
    NP(nb_randint, 0, 2, 2, NULL, NB_I64, NULL);
    NP(nb_multinomial, NULL, 1, false, NULL);
    NP(nb_isclose, NULL, x, 1e-5, 1e-8, false);
    NP(nb_isclose, x, NULL, 1e-5, 1e-8, false);
    NS(nb_allclose, x, NULL, 1e-5, 1e-8, false, (bool[1]){0});
    NS(nb_allclose, x, x, 1e-5, 1e-8, false, NULL);
    NI(nb_repr, NULL, NULL, 0);
    NS(nb_print, NULL);
    NS(nb_device_parse, NULL, NULL);
    NS(nb_device_parse, "cpu", NULL);
    NP(nb_device_str, NB_CPU, NULL, 0);
    NSOK(nb_set_current_stream, NULL); /* NULL: back to the compute stream */
    NX(nb_stream_device, NULL);
    NS(nb_stream_synchronize, NULL);
    NS(nb_stream_wait_stream, NULL, NULL);
    NS(nb_stream_wait_stream, nb_stream_compute(NB_CPU), NULL);
    NV(nb_event_free, NULL);
    NV(nb_stream_free, NULL);
    NS(nb_event_record, NULL, NULL);
    NS(nb_stream_wait_event, NULL, NULL);
    NS(nb_stream_wait_event, nb_stream_compute(NB_CPU), NULL);
    NB(nb_event_query, NULL);
    NS(nb_event_synchronize, NULL);
    NS(nb_set_float32_matmul_precision, NULL);
    NP(nb_full_on, 2, NULL, 0, NB_F32, NB_CPU);
    NP(nb_from_data_on, NULL, 2, NULL, NB_F32, NB_CPU);
    NP(nb_rand_on, 2, NULL, NB_F32, NULL, NB_CPU);
    NP(nb_randn_on, 2, NULL, NB_F32, NULL, NB_CPU);
    NS(nb_record_stream, NULL, NULL);
    NS(nb_record_stream, x, NULL);
    NV(nb_host_free, NB_CPU, NULL);
    NS(nb_copy_from_host_async, NULL, NULL, 0, NULL);
    NS(nb_to_host_async, NULL, NULL, 0, NULL);
    NS(nb_no_grad_call, NULL, NULL);
    NV(nb_profiler_report, NULL); /* NULL: stderr */
    NS(nb_profiler_export_chrome_trace, NULL);
    NS(nb_write_file_atomic, NULL, NULL, NULL, 0);
    NS(nb_graph_replay, NULL);
    NS(nb_graph_capture_begin_with, NB_CPU, NULL); /* NULL: the zero options; the CPU has no graphs */
    NS(nb_module_flatten_parameters, NULL);
    NS(nb_module_flatten_parameters_ex, NULL, 1);
    NI(nb_module_flat_buffers, NULL, NULL, NULL, 0);
    NV(nb_graph_free, NULL);
    /* decoders (nb_ops.h, nn/nb_decoder.h) */
    NP(nb_rms_norm, NULL, 1, (int64_t[]){2}, NULL, 1e-6);
    {
        nb_tensor *sum = NULL;
        NP(nb_add_rms_norm, NULL, NULL, 1, (int64_t[]){2}, NULL, 1e-6, &sum);
        NP(nb_add_rms_norm, NULL, NULL, 1, (int64_t[]){2}, NULL, 1e-6, NULL);
        ck_assert_ptr_null(sum);
    }
    NP(nb_apply_rotary_pos_emb, NULL, NULL, NULL);
    /* quantization (nb_quantize.h) */
    NP(nb_fake_quantize_per_tensor_affine, NULL, 0.1, 0, 0, 255);
    NP(nb_fake_quantize_per_channel_affine, NULL, NULL, NULL, 0, 0, 255);
    NP(nb_fake_quantize_per_channel_affine, x, NULL, NULL, 0, 0, 255);
    NP(nb_fake_quantize_learnable_per_tensor_affine, NULL, NULL, NULL, 0, 255, 1.0);
    NP(nb_fake_quantize_learnable_per_tensor_affine, x, NULL, NULL, 0, 255, 1.0);
    NP(nb_fake_quantize_learnable_per_channel_affine, NULL, NULL, NULL, 0, 0, 255, 1.0);
    NP(nb_fake_quantize_learnable_per_channel_affine, NULL, NULL, NULL, -1, 0, 255, 1.0);
    NP(nb_bitnet_weight_quant, NULL);
    NP(nb_bitnet_activation_quant, NULL);
    NS(nb_bitnet_pack, NULL, NULL, NULL);
    NP(nb_bitnet_linear, NULL, NULL, NULL, NULL);
    NP(nb_bitnet_linear, x, NULL, NULL, NULL);
    NS(nb_module_bitnet_pack, NULL);
    NP(nb_quantize_per_tensor, NULL, 0.1, 0, NB_I8);
    NP(nb_quantize_per_channel, NULL, NULL, NULL, 0, NB_I8);
    NP(nb_quantize_per_channel, x, NULL, NULL, 0, NB_I8);
    NP(nb_dequantize_per_tensor, NULL, 0.1, 0);
    NP(nb_dequantize_per_channel, NULL, NULL, NULL, 0);
    NS(nb_int8_weight_quantize, NULL, NULL, NULL);
    NP(nb_linear_int8, NULL, NULL, NULL, NULL);
    NP(nb_linear_int8, x, NULL, NULL, NULL);
    NS(nb_module_int8_weight_only, NULL);
    NS(nb_nn_rotary_embedding_forward, NULL, 4, 0, NULL, NULL);
    NX(nb_gpt2_get_config, NULL);
    NX(nb_llama_get_config, NULL);
    NP(nb_kv_cache_new, NULL, 1, 8);
    NV(nb_kv_cache_free, NULL);
    NI(nb_kv_cache_length, NULL);
    NS(nb_kv_cache_crop, NULL, 0);
    NS(nb_kv_cache_set_left_padding, NULL, NULL);
    NB(nb_is_causal_lm, NULL);
    NP(nb_causal_lm_hidden, NULL, NULL, NULL);
    NP(nb_causal_lm_head, NULL, NULL);
    NP(nb_causal_lm_forward, NULL, NULL, NULL);
    NI(nb_generate, NULL, NULL, 0, NULL, 0, (nb_generate_options){0});
    NI(nb_generate_batch, NULL, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, (nb_generate_options){0});
    NI(nb_sample_logits, NULL, 0, NULL);
    NP(nb_sample_tokens, NULL, NULL);
    NS(nb_hf_config_load, NULL, NULL, NULL, NULL);
    NS(nb_causal_lm_load_weights, NULL, NULL, true, NULL);
    NS(nb_save_pretrained, NULL, NULL);
    NP(nb_from_pretrained, NULL, NULL);
    NP(nb_from_pretrained_as, NULL, NB_F32, NULL);
    nb_null_args_ops(x); /* autograd/nb_ops.h: test_null_args_ops.c */
    /* autograd/nb_linalg.h */
    NP(nb_linalg_solve, NULL, NULL);
    NP(nb_linalg_solve, x, NULL);
    NP(nb_linalg_inv, NULL);
    NP(nb_linalg_det, NULL);
    NS(nb_linalg_slogdet, NULL, NULL, NULL);
    NP(nb_linalg_cholesky, NULL, false);
    NS(nb_linalg_qr, NULL, (nb_linalg_qr_mode)0, NULL, NULL);
    NS(nb_linalg_eigh, NULL, 'L', NULL, NULL);
    NS(nb_linalg_svd, NULL, false, NULL, NULL, NULL);
    NP(nb_linalg_svdvals, NULL);
    NP(nb_linalg_lstsq, NULL, NULL, NULL);
    NP(nb_linalg_lstsq, x, NULL, NULL);
    /* autograd/nb_autograd.h */
    NS(nb_autocast_cache_params, NULL, 1);
    NS(nb_set_requires_grad, NULL, false);
    NS(nb_tensor_set_grad, NULL, NULL, false);
    NB(nb_requires_grad, NULL);
    NB(nb_is_leaf, NULL);
    NP(nb_tensor_grad, NULL);
    NV(nb_tensor_zero_grad, NULL);
    NP(nb_detach, NULL);
    NS(nb_backward, NULL);
    NS(nb_backward_with, NULL, NULL);
    NS(nb_gradcheck, (nb_gradcheck_fn)0, NULL, 1, NULL, NULL);
    NS(nb_gradgradcheck, (nb_gradcheck_fn)0, NULL, 1, NULL, NULL);
    NS(nb_backward_ex, NULL, NULL, NULL);
    NS(nb_grad, NULL, NULL, 1, NULL, 1, NULL, NULL);
    NI(nb_register_hook, NULL, NULL, NULL);
    NI(nb_register_post_accumulate_grad_hook, NULL, NULL, NULL);
    NS(nb_remove_hook, NULL, 1);
    NS(nb_function_apply, NULL, NULL, 1, NULL, NULL);
    NS(nb_ctx_save_for_backward, NULL, NULL, 0);
    NP(nb_ctx_saved_tensor, NULL, 0);
    NI(nb_ctx_num_saved, NULL);
    NB(nb_ctx_needs_input_grad, NULL, 0);
    NS(nb_ctx_mark_non_differentiable, NULL, NULL);
    NV(nb_ctx_set_materialize_grads, NULL, false);
    NS(nb_ctx_set_value, NULL, NULL, 0.0);
    ND(nb_ctx_value, NULL, NULL);
    NP(nb_ctx_user, NULL);
    /* core/nb_op_table.h */
    NX(nb_op_find, NULL);
    /* nn/nb_nn.h */
    NP(nb_forward, NULL, NULL);
    NI(nb_module_register_forward_pre_hook, NULL, NULL, NULL);
    NI(nb_module_register_forward_hook, NULL, NULL, NULL);
    NI(nb_forward_n, NULL, 0, NULL, NULL, 1);
    NI(nb_module_register_forward_pre_hook_n, NULL, NULL, NULL);
    NI(nb_module_register_forward_hook_n, NULL, NULL, NULL);
    NS(nb_nn_module_list_append, NULL, NULL);
    NP(nb_nn_module_list_array, NULL, 1);
    NS(nb_nn_parameter_list_append, NULL, NULL);
    NP(nb_nn_triplet_margin_with_distance_loss, NULL, NULL, (nb_loss_options){.reduction = (nb_reduction)9});
    NS(nb_module_remove_hook, NULL, 1);
    NV(nb_module_free, NULL);
    NV(nb_module_train, NULL, false);
    NB(nb_module_is_training, NULL);
    NQ(nb_module_kind, NULL);
    NS(nb_module_add, NULL, NULL, NULL);
    NP(nb_module_child, NULL, NULL);
    NI(nb_module_parameters, NULL, NULL, 1);
    NP(nb_module_parameter_list, NULL, NULL);
    NI(nb_module_buffers, NULL, NULL, 1);
    NI(nb_module_num_params, NULL);
    NP(nb_nn_sequential_n, NULL, NULL);
    NS(nb_nn_sequential_append, NULL, NULL);
    NP(nb_module_new, NULL, NULL);
    NP(nb_module_ctx, NULL);
    NS(nb_module_register_parameter, NULL, NULL, NULL);
    NS(nb_module_register_buffer, NULL, NULL, NULL);
    NP(nb_module_get, NULL, NULL);
    NP(nb_module_child_at, NULL, 0);
    NP(nb_nn_sequential_array, NULL, 1);
    NI(nb_module_num_children, NULL);
    NQ(nb_module_child_name, NULL, 0);
    NV(nb_module_zero_grad, NULL);
    NV(nb_load_report_free, NULL);
    NI(nb_module_state_dict, NULL, NULL);
    NS(nb_module_state_dict_save, NULL, NULL);
    NS(nb_module_load_tensors, NULL, NULL, 1, false, NULL);
    NS(nb_module_load_state_dict, NULL, NULL, false, NULL);
    NS(nb_init_orthogonal_, NULL, 0, NULL);
    ND(nb_init_calculate_gain, NULL, 0);
    NS(nb_init_calculate_fan_in_and_fan_out, NULL, (int64_t[1]){0}, (int64_t[1]){0});
    NS(nb_init_calculate_fan_in_and_fan_out, x, NULL, NULL);
    NS(nb_init_xavier_uniform_, NULL, 1, NULL);
    NS(nb_init_xavier_normal_, NULL, 1, NULL);
    NS(nb_init_kaiming_uniform_, NULL, 0, NB_FAN_IN, NULL, NULL);
    NS(nb_init_kaiming_normal_, NULL, 0, NB_FAN_IN, NULL, NULL);
    NS(nb_init_trunc_normal_, NULL, 0, 1, -2, 2, NULL);
    NS(nb_init_constant_, NULL, 0);
    NS(nb_init_zeros_, NULL);
    NS(nb_init_ones_, NULL);
    /* nn/nb_transformer.h */
    NI(nb_nn_embedding_padding_idx, NULL);
    NP(nb_nn_layer_norm_ex, 0, NULL, 0, false, (nb_dtype)0);
    NP(nb_nn_multihead_attention_forward, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    NP(nb_nn_transformer_encoder_layer_forward, NULL, NULL, NULL, NULL);
    { /* norm NULL means no final norm: the call succeeds */
        nb_null_args_note("nb_nn_transformer_encoder");
        nb_module *enc = nb_nn_transformer_encoder(NB_ENCODER_LAYER_OPTIONS(8, 2), 1, NULL);
        ck_assert_msg(enc != NULL, "transformer_encoder with norm NULL: %s", nb_last_error());
        nb_module_free(enc);
    }
    { /* likewise for the decoder */
        nb_null_args_note("nb_nn_transformer_decoder");
        nb_module *dec = nb_nn_transformer_decoder(NB_ENCODER_LAYER_OPTIONS(8, 2), 1, NULL);
        ck_assert_msg(dec != NULL, "transformer_decoder with norm NULL: %s", nb_last_error());
        nb_module_free(dec);
    }
    NP(nb_nn_transformer_encoder_forward, NULL, NULL, NULL, NULL);
    NP(nb_nn_transformer_encoder_forward_ex, NULL, NULL, (nb_encoder_forward_options){.is_causal = true});
    NP(nb_nn_transformer_encoder_layer_forward_ex, NULL, NULL, (nb_encoder_forward_options){.is_causal = true});
    NX(nb_bert_get_config, NULL);
    NP(nb_bert_encode, NULL, NULL, NULL, NULL);
    NP(nb_bert_mlm_head, NULL, NULL);
    NP(nb_bert_forward, NULL, NULL, NULL, NULL);
    /* optim/nb_optim.h */
    NP(nb_sgd, NULL, (nb_sgd_options){0});
    NP(nb_adam, NULL, (nb_adam_options){0});
    NP(nb_adamw, NULL, (nb_adam_options){0});
    NP(nb_sgd_params, NULL, 1, (nb_sgd_options){0});
    NP(nb_adam_params, NULL, 1, (nb_adam_options){0});
    NP(nb_adamw_params, NULL, 1, (nb_adam_options){0});
    NV(nb_optimizer_free, NULL);
    NV(nb_optimizer_zero_grad, NULL);
    NS(nb_optimizer_step, NULL);
    ND(nb_optimizer_get_lr, NULL);
    NS(nb_optimizer_set_lr, NULL, 0);
    NQ(nb_optimizer_kind, NULL);
    NX(nb_optimizer_sgd_options, NULL);
    NX(nb_optimizer_adam_options, NULL);
    NI(nb_optimizer_num_params, NULL);
    NP(nb_optimizer_param, NULL, 0);
    NP(nb_optimizer_state, NULL, 0, NULL);
    NI(nb_optimizer_step_count, NULL, 0);
    NS(nb_optimizer_init_state, NULL, 0, 0);
    NP(nb_sgd_groups, NULL, 1, (nb_sgd_options){.lr = 0.1});
    NP(nb_adam_groups, NULL, 1, (nb_adam_options){0});
    NP(nb_adamw_groups, NULL, 1, (nb_adam_options){0});
#define OPTIM_NULLS(name, opts_t)                  \
    NP(nb_##name, NULL, (opts_t){0});              \
    NP(nb_##name##_params, NULL, 1, (opts_t){0});  \
    NP(nb_##name##_groups, NULL, 1, (opts_t){0})
    OPTIM_NULLS(adadelta, nb_adadelta_options);
    OPTIM_NULLS(adafactor, nb_adafactor_options);
    OPTIM_NULLS(adagrad, nb_adagrad_options);
    OPTIM_NULLS(adamax, nb_adamax_options);
    OPTIM_NULLS(asgd, nb_asgd_options);
    OPTIM_NULLS(lbfgs, nb_lbfgs_options);
    OPTIM_NULLS(nadam, nb_nadam_options);
    OPTIM_NULLS(radam, nb_radam_options);
    OPTIM_NULLS(rmsprop, nb_rmsprop_options);
    OPTIM_NULLS(rprop, nb_rprop_options);
    OPTIM_NULLS(lion, nb_lion_options);
    OPTIM_NULLS(muon, nb_muon_options);
#undef OPTIM_NULLS
    NS(nb_optimizer_add_param_group, NULL, NULL);
    NS(nb_optimizer_step_closure, NULL, NULL, NULL, NULL);
    NI(nb_optimizer_num_param_groups, NULL);
    NI(nb_optimizer_group_params, NULL, 0, NULL);
    ND(nb_optimizer_get_group_lr, NULL, 0);
    NS(nb_optimizer_set_group_lr, NULL, 0, 0.1);
    NS(nb_optimizer_get_group_option, NULL, 0, NULL, NULL);
    NS(nb_optimizer_set_group_option, NULL, 0, NULL, 0);
    NS(nb_optimizer_group_options, NULL, 0, NULL, 0);
    NS(nb_decay_split_module, NULL, NULL);
    NV(nb_decay_split_free, NULL);
    NS(nb_optimizer_state_scalar, NULL, 0, NULL, NULL);
    NP(nb_step_lr, NULL, 0, 0);
    NP(nb_multi_step_lr, NULL, NULL, 1, 0);
    NP(nb_exponential_lr, NULL, 0);
    NP(nb_cosine_annealing_lr, NULL, 0, 0);
    NP(nb_linear_lr, NULL, 0, 0, 0);
    NP(nb_one_cycle_lr, NULL, 0, 0, (nb_one_cycle_options){0});
    NP(nb_sequential_lr, NULL, NULL, 1, NULL);
    NS(nb_scheduler_step, NULL);
    ND(nb_scheduler_get_last_lr, NULL);
    NI(nb_scheduler_last_epoch, NULL);
    NQ(nb_scheduler_kind, NULL);
    NV(nb_scheduler_free, NULL);
    NP(nb_constant_lr, NULL, 0.5, 5);
    NP(nb_polynomial_lr, NULL, 5, 1.0);
    NP(nb_lambda_lr, NULL, NULL, NULL);
    NP(nb_multiplicative_lr, NULL, NULL, NULL);
    NP(nb_cosine_annealing_warm_restarts, NULL, 5, 1, 0.0);
    NP(nb_cyclic_lr, NULL, 0.01, 0.1, (nb_cyclic_lr_options){0});
    NP(nb_reduce_lr_on_plateau, NULL, (nb_reduce_lr_on_plateau_options){0});
    NP(nb_chained_scheduler, NULL, NULL, 1);
    NS(nb_scheduler_step_metric, NULL, 0);
    ND(nb_scheduler_get_group_last_lr, NULL, 0);
    NI(nb_scheduler_state_size, NULL);
    NS(nb_scheduler_state_dict, NULL, NULL, 1);
    NS(nb_scheduler_load_state_dict, NULL, NULL, 1);
    NS(nb_clip_grad_norm_, NULL, 1, 0, 0, NULL);
    NS(nb_clip_grad_norm_module_, NULL, 0, 0, NULL);
    NS(nb_clip_grad_value_, NULL, 1, 0);
    NS(nb_clip_grad_value_module_, NULL, 0);
    /* optim/nb_checkpoint.h */
    NS(nb_save_checkpoint, NULL, NULL);
    NS(nb_load_checkpoint, NULL, NULL, NULL);
    nb_null_args_data(); /* data/nb_bpe.h, nb_data.h, nb_text.h: test_null_args_data.c */
    /* core/nb_safetensors.h */
    NS(nb_safetensors_save, NULL, NULL, 1, NULL, 0);
    NP(nb_safetensors_load, NULL);
    NP(nb_safetensors_load_buffer, NULL, 1, NULL);
    NV(nb_safetensors_free, NULL);
    NP(nb_safetensors_get, NULL, NULL);
    NQ(nb_safetensors_meta, NULL, NULL);


    /* a valid object first, NULL after it */
    nb_module *net = nb_nn_sequential(nb_nn_linear(2, 3), nb_nn_relu());
    NB_CK_NOTNULL(net);
    NP(nb_forward, net, NULL);
    NI(nb_forward_n, net, 1, NULL, NULL, 1);
    NI(nb_forward_n, net, 1, (nb_tensor *[]){NULL}, (nb_tensor *[1]){NULL}, 1);
    NS(nb_nn_module_list_append, net, NULL);
    NS(nb_module_add, net, "extra", NULL);
    NS(nb_module_add, net, NULL, nb_nn_relu());
    NS(nb_module_register_parameter, net, "w", NULL);
    NS(nb_module_register_buffer, net, NULL, nb_zeros(NB_SHAPE(2), NB_F32));
    NP(nb_module_get, net, NULL);
    NP(nb_module_child, net, NULL);
    NS(nb_nn_sequential_append, net, NULL);
    NS(nb_module_state_dict_save, net, NULL);
    NS(nb_module_load_state_dict, net, NULL, true, NULL);
    NS(nb_module_load_tensors, net, NULL, 2, true, NULL);
    nb_module *mha = nb_nn_multihead_attention(4, 2, 0, true);
    NB_CK_NOTNULL(mha);
    NP(nb_nn_multihead_attention_forward, mha, NULL, x, x, NULL, NULL, NULL);
    NP(nb_nn_multihead_attention_forward, mha, x, NULL, x, NULL, NULL, NULL);
    nb_module_free(mha);
    nb_optimizer *opt = nb_sgd(net, (nb_sgd_options){.lr = 0.1});
    NB_CK_NOTNULL(opt);
    NP(nb_optimizer_state, opt, 0, NULL);
    NP(nb_multi_step_lr, opt, NULL, 2, 0.1);
    NP(nb_sequential_lr, opt, NULL, 2, NULL);
    NS(nb_scheduler_state_dict, NULL, NULL, 1);
    NP(nb_sgd_params, (nb_tensor *[]){NULL}, 1, (nb_sgd_options){.lr = 0.1});
    NS(nb_optimizer_get_group_option, opt, 0, NULL, NULL);
    NS(nb_optimizer_set_group_option, opt, 0, NULL, 0);
    NS(nb_optimizer_group_options, opt, 0, NULL, 0);
    NS(nb_optimizer_state_scalar, opt, 0, NULL, NULL);
    NS(nb_optimizer_add_param_group, opt, NULL);
    NS(nb_optimizer_step_closure, opt, NULL, NULL, NULL);
    NS(nb_decay_split_module, net, NULL);
    NP(nb_chained_scheduler, opt, NULL, 1);
    NP(nb_lambda_lr, opt, NULL, NULL);
    {
        nb_scheduler *sch = nb_step_lr(opt, 2, 0.5);
        NB_CK_NOTNULL(sch);
        NS(nb_scheduler_state_dict, sch, NULL, 1);
        NS(nb_scheduler_load_state_dict, sch, NULL, 1);
        nb_scheduler_free(sch);
    }
    NS(nb_clip_grad_norm_, (nb_tensor *[]){x, NULL}, 2, 1.0, 2.0, NULL);
    NS(nb_clip_grad_value_, (nb_tensor *[]){NULL}, 1, 1.0);
    nb_optimizer_free(opt);
    nb_module_free(net);
    NP(nb_dataset_from_tensors, x, NULL);
    NP(nb_cat, (nb_tensor *[]){x, NULL}, 2, 0);
    NP(nb_stack, (nb_tensor *[]){NULL, x}, 2, 0);
    NS(nb_meshgrid, (nb_tensor *[]){NULL}, 1, NB_MESHGRID_IJ, (nb_tensor *[1]){0});
    NS(nb_gradcheck, gc_fn, (nb_tensor *[]){NULL}, 1, NULL, NULL);
    NS(nb_gradgradcheck, gc_fn, (nb_tensor *[]){NULL}, 1, NULL, NULL);
    {
        nb_tensor *gr[1];
        NS(nb_grad, (nb_tensor *[]){x}, NULL, 1, (nb_tensor *[]){NULL}, 1, gr, NULL);
        NS(nb_grad, (nb_tensor *[]){NULL}, NULL, 1, (nb_tensor *[]){x}, 1, gr, NULL);
        NS(nb_grad, (nb_tensor *[]){x}, NULL, 1, (nb_tensor *[]){x}, 1, NULL, NULL);
        NI(nb_register_hook, x, NULL, NULL);
        NS(nb_function_apply, &(nb_function){0}, (nb_tensor *[]){x}, 1, NULL, NULL);
    }
    NS(nb_safetensors_save, "/nonexistent/x.safetensors", (nb_named_tensor[]){{"a", NULL}}, 1, NULL, 0);
    NP(nb_safetensors_load_buffer, NULL, 8, "buffer");
    /* the second-position NULLs above also leave x untouched */
    ck_assert(nb_item(nb_sum(x, NULL, 0, false)) == 4);
    nb_scope_end(s);

    /* distributed/nb_distributed.h */
    NV(nb_distributed_destroy, NULL);
    NI(nb_process_group_rank, NULL);
    NI(nb_process_group_size, NULL);
    NI(nb_process_group_local_rank, NULL);
    NX(nb_process_group_backend, NULL);
    NX(nb_process_group_device, NULL);
    NS(nb_all_reduce, NULL, NULL, NB_DIST_SUM);
    NS(nb_broadcast, NULL, NULL, 0);
    NS(nb_all_gather, NULL, NULL, NULL);
    NS(nb_reduce_scatter, NULL, NULL, NULL, NB_DIST_SUM);
    NS(nb_barrier, NULL);
    NP(nb_all_reduce_async, NULL, NULL, NB_DIST_SUM);
    NS(nb_work_wait, NULL);
    NP(nb_ddp_new, NULL, NULL, NULL);
    NV(nb_ddp_free, NULL);
    NS(nb_ddp_set_no_sync, NULL, true);
    NS(nb_ddp_step, NULL, NULL);
    NP(nb_ddp_shard_parameters, NULL);
    NP(nb_ddp_full_parameters, NULL);
    NS(nb_ddp_gather_optimizer, NULL, NULL, NULL);
    NS(nb_ddp_scatter_optimizer, NULL, NULL, NULL);
    NS(nb_nn_conv2d_get_options, NULL, NULL);
    NS(nb_nn_pool2d_get_options, NULL, NULL);
    NS(nb_nn_flatten_get_dims, NULL, NULL, NULL);
    NI(nb_ddp_num_buckets, NULL);
    NI(nb_ddp_bucket_numel, NULL, 0);
    /* the scan: every function of the public headers that takes a pointer was called */
    static const char *const headers[] = {"core/nb_core.h",
                                          "autograd/nb_ops.h",
                                          "autograd/nb_functional.h",
                                          "autograd/nb_linalg.h",
                                          "autograd/nb_quantize.h",
                                          "autograd/nb_autograd.h",
                                          "core/nb_op_table.h",
                                          "nn/nb_nn.h",
                                          "nn/nb_transformer.h",
                                          "optim/nb_optim.h",
                                          "optim/nb_lr_scheduler.h",
                                          "optim/nb_checkpoint.h",
                                          "nn/nb_decoder.h",
                                          "data/nb_bpe.h",
                                          "data/nb_data.h",
                                          "data/nb_text.h",
                                          "core/nb_safetensors.h",
                                          "distributed/nb_distributed.h",
                                          "core/nb_extension.h",
                                          "autograd/nb_foreach.h",
                                          "utils/nb_tensorboard.h",
                                          "utils/nb_progress.h",
                                          "utils/nb_module_summary.h",
                                          "utils/nb_onnx.h"};
    int found = 0;
    for (size_t h = 0; h < sizeof headers / sizeof headers[0]; h++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", NB_SOURCE_ROOT, headers[h]);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot open %s", path);
        char *text = calloc(1, 1 << 20);
        ck_assert_ptr_nonnull(text);
        size_t len = fread(text, 1, (1 << 20) - 1, f);
        fclose(f);
        text[len] = 0;
        for (char *c = strstr(text, "/*"); c; c = strstr(c, "/*")) { /* blank the comments */
            char *e = strstr(c + 2, "*/");
            if (!e) break;
            memset(c, ' ', (size_t)(e + 2 - c));
        }
        /* a declaration: a line starting with a letter (not typedef, not a
         * macro body), an nb_ identifier, '(' ... ');' */
        for (char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
            if (!isalpha((unsigned char)line[0]) || !strncmp(line, "typedef", 7) || !strncmp(line, "struct", 6)) continue;
            char *paren = strchr(line, '('), *eol = strchr(line, '\n'), *semi = strchr(line, ';');
            if (!paren || (eol && paren > eol) || !semi || (strchr(line, '{') && strchr(line, '{') < semi)) continue;
            char *b = paren;
            while (b > line && (isalnum((unsigned char)b[-1]) || b[-1] == '_')) b--;
            if (strncmp(b, "nb_", 3)) continue;
            bool has_ptr = memchr(paren, '*', (size_t)(semi - paren)) != NULL;
            if (!has_ptr) continue;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(paren - b), b);
            bool seen = false;
            for (int i = 0; i < n_called && !seen; i++) seen = !strcmp(called[i], name);
            ck_assert_msg(seen, "%s (%s) takes a pointer but tests/test_null_args*.c never give it NULL", name,
                          headers[h]);
            found++;
        }
        free(text);
    }
    ck_assert_int_gt(found, 350); /* the scan found the declarations */
}
END_TEST

Suite *nb_suite_null_args(void) {
    Suite *s = suite_create("null_args");
    TCase *c = tcase_create("null_args");
    tcase_add_test(c, test_every_public_function_survives_null);
    suite_add_tcase(s, c);
    return s;
}
