/* test_null_args_data.c - test_null_args.c's calls for the data headers
 * (data/nb_bpe.h, data/nb_data.h, data/nb_text.h) and utils/, split from
 * it to keep files short; the header scan there checks them. */
#include <stdio.h>

#include "nb_module_summary.h"
#include "nb_onnx.h"
#include "nb_progress.h"
#include "nb_tensorboard.h"
#include "null_args.h"

void nb_null_args_data(void) {
    /* utils/nb_tensorboard.h (a NULL log_dir is the default: the options fail first) */
    NP(nb_summary_writer_open, NULL, &(nb_summary_writer_options){.max_queue = -1});
    NP(nb_summary_writer_path, NULL);
    NS(nb_summary_writer_add_scalar, NULL, NULL, 0, 0);
    NS(nb_summary_writer_add_histogram, NULL, NULL, NULL, 0);
    NS(nb_summary_writer_add_text, NULL, NULL, NULL, 0);
    NS(nb_summary_writer_flush, NULL);
    NV(nb_summary_writer_close, NULL);
    /* utils/nb_onnx.h */
    NS(nb_onnx_export, NULL, 1, NULL, NULL, NULL);
    /* utils/nb_module_summary.h */
    NS(nb_module_summary, NULL, 1, NULL, NULL, NULL);
    NV(nb_summary_free, NULL);
    /* utils/nb_progress.h (NULL options are the defaults) */
    nb_null_args_note("nb_progress_new");
    nb_progress_close(nb_progress_new(0, &(nb_progress_options){.disable = true}));
    NV(nb_progress_update, NULL, 1);
    NV(nb_progress_set_postfix, NULL, NULL);
    NI(nb_progress_count, NULL);
    NP(nb_progress_format, NULL, NULL, 0);
    NV(nb_progress_clear, NULL);
    NV(nb_progress_close, NULL);
    /* data/nb_bpe.h */
    NP(nb_bpe_load_gpt2, NULL, NULL);
    NP(nb_bpe_load_tokenizer_json, NULL);
    NP(nb_bpe_train, NULL, 300, (nb_bpe_train_options){0});
    NS(nb_bpe_save_gpt2, NULL, NULL, NULL);
    NS(nb_bpe_save_tokenizer_json, NULL, NULL);
    NV(nb_bpe_free, NULL);
    NX(nb_bpe_vocab_size, NULL);
    NX(nb_bpe_num_merges, NULL);
    NX(nb_bpe_get_pretokenizer, NULL);
    NI(nb_bpe_token_to_id, NULL, NULL);
    NP(nb_bpe_id_to_token, NULL, 0);
    NB(nb_bpe_is_special, NULL, 0);
    NI(nb_bpe_encode, NULL, NULL, 0, false, NULL, 0);
    NI(nb_bpe_decode, NULL, NULL, 0, NULL, 0);
    NI(nb_bpe_encode_file, NULL, NULL, NULL, false);
    NP(nb_bpe_encode_tensor, NULL, NULL, 0, false);
    NI(nb_bpe_pretokenize, NB_BPE_GPT2, NULL, 1, NULL, 0);
    /* data/nb_data.h */
    NP(nb_csv_load, NULL, (nb_csv_options){0});
    NP(nb_iterable_dataset_new, NULL, NULL, NULL, NULL);
    NP(nb_chain_dataset, NULL, 1);
    NS(nb_iterable_dataset_reset, NULL, 0);
    NS(nb_iterable_dataset_next, NULL, NULL, NULL);
    NV(nb_iterable_dataset_free, NULL);
    NP(nb_dataloader_new_iterable, NULL, (nb_dataloader_options){0});
    NS(nb_idx_read, NULL, NULL);
    NV(nb_idx_free, NULL);
    NP(nb_idx_load, NULL);
    NP(nb_npy_load, NULL);
    NP(nb_npy_load_mmap, NULL);
    NS(nb_npy_save, NULL, NULL);
    NP(nb_npz_load, NULL);
    NP(nb_npz_get, NULL, NULL);
    NV(nb_npz_free, NULL);
    NS(nb_npz_save, NULL, NULL, 0, false);
    NP(nb_pt_load, NULL);
    NP(nb_pt_get, NULL, NULL);
    NI(nb_pt_state_dict, NULL, NULL, NULL);
    NV(nb_pt_free, NULL);
    NS(nb_pt_save, NULL, NULL, 0);
    NS(nb_sample_set, NULL, NULL, NULL);
    NP(nb_sample_get, NULL, NULL);
    NP(nb_map_dataset_new, 1, NULL, NULL, NULL);
    NP(nb_map_dataset_from_tensors, NULL);
    NP(nb_subset, NULL, NULL, 1);
    NP(nb_concat_dataset, NULL, 1);
    NS(nb_random_split, NULL, NULL, 1, 0, NULL);
    NI(nb_map_dataset_len, NULL);
    NS(nb_map_dataset_get, NULL, 0, NULL, NULL);
    NV(nb_map_dataset_free, NULL);
    NP(nb_sampler_new, -1, (nb_sampler_options){0});
    NI(nb_sampler_len, NULL);
    NS(nb_sampler_indices, NULL, 0, NULL);
    NV(nb_sampler_free, NULL);
    NP(nb_dataloader_new, NULL, (nb_dataloader_options){0});
    NB(nb_dataloader_next, NULL, NULL);
    NS(nb_dataloader_status, NULL);
    NP(nb_dataloader_indices, NULL, NULL);
    NV(nb_dataloader_reset, NULL);
    NS(nb_dataloader_seek, NULL, 0, 0);
    NI(nb_dataloader_num_batches, NULL);
    NI(nb_dataloader_epoch, NULL);
    NI(nb_dataloader_position, NULL);
    NV(nb_dataloader_get_options, NULL);
    NV(nb_dataloader_free, NULL);
    NP(nb_token_shard_open, NULL);
    NV(nb_token_shard_close, NULL);
    NI(nb_token_shard_len, NULL);
    NS(nb_token_shard_read, NULL, 0, 1, NULL);
    NS(nb_token_shard_write, NULL, NULL, 1, false);
    NP(nb_token_window_dataset, NULL, 0, 1, 1);
    NP(nb_image_read, NULL, NB_IMAGE_RGB);
    NP(nb_image_decode, NULL, 1, NULL, NB_IMAGE_RGB);
    NS(nb_image_write_png, NULL, NULL);
    NS(nb_image_write_jpeg, NULL, NULL, 0);
    NP(nb_image_transform, NULL, NULL, NULL);
    NP(nb_image_folder, NULL, (nb_image_folder_options){0});
    NI(nb_image_folder_num_classes, NULL);
    NP(nb_image_folder_class, NULL, 0);
    NP(nb_dataset_from_tensors, NULL, NULL);
    NV(nb_dataset_free, NULL);
    NI(nb_dataset_len, NULL);
    NP(nb_dataset_x, NULL);
    NP(nb_dataset_y, NULL);
    NS(nb_mnist_default_dir, NULL, 1);
    NS(nb_mnist_load, NULL, false, (nb_mnist_options){0}, NULL);
    NP(nb_loader_new, NULL, (nb_loader_options){0});
    NV(nb_loader_free, NULL);
    NB(nb_loader_next, NULL, NULL);
    NS(nb_loader_status, NULL);
    NV(nb_loader_reset, NULL);
    NS(nb_loader_seek, NULL, 0, 0);
    NI(nb_loader_num_batches, NULL);
    NI(nb_loader_epoch, NULL);
    NX(nb_loader_get_options, NULL);
    NI(nb_loader_position, NULL);
    /* data/nb_text.h */
    NP(nb_wordpiece_encode_tensor, NULL, NULL);
    NI(nb_basic_tokenize, NULL, false, NULL, 1);
    NP(nb_wordpiece_train, NULL, 0, (nb_wordpiece_options){0});
    NP(nb_wordpiece_load, NULL, (nb_wordpiece_options){0});
    NS(nb_wordpiece_save, NULL, NULL);
    NV(nb_wordpiece_free, NULL);
    NI(nb_wordpiece_vocab_size, NULL);
    NB(nb_wordpiece_lowercases, NULL);
    NI(nb_wordpiece_token_to_id, NULL, NULL);
    NQ(nb_wordpiece_id_to_token, NULL, 0);
    NI(nb_wordpiece_special_id, NULL, (nb_special_token)0);
    NB(nb_wordpiece_is_special, NULL, 0);
    NI(nb_wordpiece_encode, NULL, NULL, NULL, 1);
    NI(nb_wordpiece_decode, NULL, NULL, 1, false, NULL, 1);
    NS(nb_wordnet_default_dir, NULL, 1);
    NP(nb_mlm_dataset_new, NULL, NULL, 0, (nb_mlm_options){0});
    NV(nb_mlm_dataset_free, NULL);
    NI(nb_mlm_num_sequences, NULL);
    NI(nb_mlm_seq_len, NULL);
    NI(nb_mlm_vocab_size, NULL);
    NX(nb_mlm_get_stats, NULL);
    NS(nb_mlm_get_sequence, NULL, 0, 0, NULL, NULL, NULL);
    NS(nb_mlm_get_batch, NULL, 0, NULL, 1, NULL);
    NS(nb_mlm_permutation, NULL, 0, NULL);
    NS(nb_mlm_token_counts, NULL, NULL, 1);
    NI(nb_mlm_most_frequent_token, NULL);
}
