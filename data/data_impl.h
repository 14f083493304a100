/* data_impl.h - internals shared by data/dataset.c and data/loader.c (not
 * installed): the dataset struct, whose tensors the loader gathers from. */
#ifndef NB_DATA_IMPL_H
#define NB_DATA_IMPL_H

#include "nb_data.h"

struct nb_dataset {
    nb_tensor *x, *y; /* owned references, contiguous, one device: x [n, ...], y [n, ...], any dtypes */
    int64_t n;        /* samples */
};

/* The Philox streams of the data module's draws (sampler.c): the counter's
 * high word is stream << 48 | epoch + 1, so no two uses share numbers. */
enum { NB_DRAW_SHUFFLE = 0, NB_DRAW_REPLACE = 1, NB_DRAW_WEIGHTED = 2, NB_DRAW_SAMPLE = 3, NB_DRAW_SPLIT = 4 };
/* 64 random bits: draw d of (seed, stream, epoch). */
uint64_t nb_data_draw(uint64_t seed, uint64_t stream, int64_t epoch, uint64_t d);
/* p = a permutation of 0..n-1, Fisher-Yates with the draws of stream (NB_DRAW_SHUFFLE: nb_loader's order). */
void nb_data_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream, int64_t epoch);

/* Files (npy.c): a regular file's bytes (malloc'd; *len their count), or
 * NULL with NB_ERR_IO / NB_ERR_OOM naming op; the file mapped whole
 * (MAP_PRIVATE; writable: copy-on-write), or NULL with NB_ERR_IO or
 * NB_ERR_FORMAT (an empty file). */
uint8_t *nb_data_read_file(const char *op, const char *path, size_t *len);
void *nb_data_map_file(const char *op, const char *path, bool writable, size_t *len);

/* The dataset length a sampler was made for. */
int64_t nb_sampler_dataset_len(const nb_sampler *s);

struct nb_map_dataset {
    int64_t len;
    nb_status (*get_item)(void *state, int64_t index, nb_generator *gen, nb_sample *out);
    void *state;
    void (*free_state)(void *state);
};

struct nb_iterable_dataset {
    nb_reset_fn reset;
    nb_next_item_fn next;
    void *state;
    void (*free_state)(void *state);
};

#endif
