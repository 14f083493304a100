/* npy_impl.h - what npy.c shares with npz.c (not installed): a parsed
 * .npy header and the conversions between .npy bytes and tensors. */
#ifndef NB_NPY_IMPL_H
#define NB_NPY_IMPL_H

#include "nb_data.h"

/* The header of a .npy: NumPy's type (kind 'f', 'i', 'u', 'b'; itemsize
 * bytes; swap: big-endian), the nabla dtype it loads as (exact: the bytes
 * are that dtype's as they are), the shape (fortran: column-major data),
 * and where the data lies. */
typedef struct npy_header {
    char kind;
    int itemsize;
    bool swap, exact, fortran;
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    size_t numel, data_offset, data_bytes;
} npy_header;

/* Parses and checks the header of the .npy in buf[0..len) (len must be
 * exactly the header and the data). Errors: NB_ERR_FORMAT, NB_ERR_DTYPE,
 * each naming `name`. */
nb_status npy_parse_header(const uint8_t *buf, size_t len, const char *name, npy_header *h);
/* A new tensor (default device, C order) from a whole .npy in memory. */
nb_tensor *npy_tensor_from_bytes(const uint8_t *buf, size_t len, const char *name);
/* t as a whole .npy (NumPy 1.24's bytes), malloc'd; *len its size. NULL
 * with NB_ERR_DTYPE for a dtype NumPy lacks (bfloat16), NB_ERR_OOM. */
uint8_t *npy_encode(const char *op, nb_tensor *t, size_t *len);

#endif
