/* data_impl.h - internals shared by data/dataset.c and data/loader.c (not
 * installed): the dataset struct, whose tensors the loader gathers from. */
#ifndef NB_DATA_IMPL_H
#define NB_DATA_IMPL_H

#include "nb_data.h"

struct nb_dataset {
    nb_tensor *x, *y; /* owned references, contiguous, one device: x [n, ...], y [n, ...], any dtypes */
    int64_t n;        /* samples */
};

#endif
