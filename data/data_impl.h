/* data_impl.h - internals shared by data/dataset.c and data/loader.c (not
 * installed): the dataset struct, whose host copy the loader gathers from. */
#ifndef NB_DATA_IMPL_H
#define NB_DATA_IMPL_H

#include "nb_data.h"

struct nb_dataset {
    nb_tensor *x, *y; /* owned references: x [n, ...] float32, y [n] int64 */
    int64_t n;        /* samples */
    int64_t row;      /* elements of one sample of x (product of x's shape[1:]) */
    float *hx;        /* host copy of x, [n, row], C order */
    int64_t *hy;      /* host copy of y, [n] */
};

#endif
