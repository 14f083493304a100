/* nb_safetensors.h - reading and writing named tensors in the safetensors
 * format (https://github.com/huggingface/safetensors), the file PyTorch users
 * open with `safetensors.torch.load_file`.
 *
 *   nb_named_tensor ts[] = {{"fc1.weight", w}, {"fc1.bias", b}};
 *   nb_st_pair meta[] = {{"format", "pt"}};
 *   if (nb_safetensors_save("net.safetensors", ts, 2, meta, 1)) puts(nb_last_error());
 *   nb_safetensors *f = nb_safetensors_load("net.safetensors");
 *   nb_tensor *w2 = f ? nb_safetensors_get(f, "fc1.weight") : NULL;  // borrowed from f
 *   nb_safetensors_free(f);
 *
 * Layout: an 8-byte little-endian u64 N, then N bytes of JSON (padded with
 * spaces to a multiple of 8), then the data section. The JSON maps each
 * tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}
 * (byte offsets into the data section, C order, little-endian) and may hold
 * "__metadata__", an object of string pairs. Supported dtypes: F32, F64,
 * I32, I64, I16, I8, U8, BOOL, F16 (IEEE binary16) and BF16 (bfloat16),
 * nabla's dtypes; others (F8_*, U16, ...) are refused by name. F16/BF16
 * bits are stored and read unchanged (PyTorch's torch.float16/bfloat16).
 *
 * Integrity: the writer stores each tensor's CRC-32 (zlib's crc32 of its
 * data bytes) in the metadata under "crc32.<name>" as 8 lowercase hex
 * digits; the reader checks every CRC present, and when any tensor has one,
 * every tensor must (files from other writers carry none and are accepted).
 * Writes are atomic: the file is written to "<path>.tmp.<pid>.<n>" in the
 * same directory, fsync'd, renamed over path, and the directory fsync'd, so
 * a failed or killed write leaves any previous file at path intact (a killed
 * one leaves its .tmp file behind until the next save to path, which removes
 * the .tmp files of processes that no longer exist). The output is a pure
 * function of the
 * inputs (no timestamps), so equal tensors give byte-identical files.
 */
#ifndef NB_SAFETENSORS_H
#define NB_SAFETENSORS_H

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A named tensor: an entry of a state_dict ("fc1.weight"). Who owns name and
 * tensor is said where the type is used (a module tree, a loaded file). */
typedef struct nb_named_tensor {
    const char *name;   /* the key, e.g. "fc1.weight" (NUL-terminated UTF-8) */
    nb_tensor *tensor;  /* the tensor stored under it */
} nb_named_tensor;

/* A metadata entry: a string key and a string value. */
typedef struct nb_st_pair {
    const char *key;   /* e.g. "format" (NUL-terminated) */
    const char *value; /* e.g. "pt" (NUL-terminated) */
} nb_st_pair;

/* Largest JSON header accepted (as the safetensors project's own reader),
 * so a corrupt length can never ask for an unbounded allocation. */
#define NB_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB */

/* Writes n tensors (any strides, on any device; copied to the host one at a
 * time) and n_meta metadata pairs to path atomically. The data section
 * follows the order of `tensors`; metadata keys keep their order, and the
 * writer appends "crc32.<name>" for each tensor.
 * Errors (path untouched): NB_ERR_INVALID_ARG (NULL path/name/tensor/key/
 * value, n or n_meta < 0, an empty or repeated name, the name
 * "__metadata__", a repeated metadata key or one starting with "crc32."),
 * NB_ERR_IO (cannot create, write, fsync or rename; the message names the
 * file and errno's text), NB_ERR_OOM. */
nb_status nb_safetensors_save(const char *path, const nb_named_tensor *tensors, int n,
                              const nb_st_pair *meta, int n_meta);

/* A loaded file. Everything in it is owned by it and freed by
 * nb_safetensors_free: names, metadata strings, and one reference to each
 * tensor (new, contiguous, on the default device, no scope owns them;
 * nb_retain one to keep it past the file). Tensors are in data-section
 * order; metadata in the file's order. */
typedef struct nb_safetensors {
    int n_tensors;            /* entries in tensors */
    nb_named_tensor *tensors; /* the tensors, in data-section order */
    int n_meta;               /* entries in meta */
    nb_st_pair *meta;         /* "__metadata__" pairs in the file's order, the "crc32.<name>" ones included */
} nb_safetensors;

/* Reads and validates a file before trusting any of it: the header length
 * against the file size and NB_ST_MAX_HEADER, the JSON (well-formed, an
 * object, no duplicate keys, no NUL in strings), each entry's dtype, shape
 * (at most NB_MAX_DIMS non-negative sizes) and data_offsets, byte counts
 * against shapes (with overflow checks), offsets inside the data section,
 * tensors that tile the data section exactly (no overlap, no gap, nothing
 * after the last), metadata values that are strings, and every CRC-32.
 * Memory used is bounded by the file's size. Returns NULL on failure with
 * the problem named in nb_last_error(), e.g.
 *   "safetensors: ck.st: header length 1099511627776 exceeds the file (80 bytes)".
 * Errors: NB_ERR_INVALID_ARG (NULL path), NB_ERR_IO (cannot open or read),
 * NB_ERR_FORMAT (any check above), NB_ERR_OOM. */
nb_safetensors *nb_safetensors_load(const char *path);
/* The same, from a file's bytes in memory (`name` only labels messages). */
nb_safetensors *nb_safetensors_load_buffer(const void *data, size_t len, const char *name);
/* NULL is ignored. */
void nb_safetensors_free(nb_safetensors *f);

/* The tensor named name (borrowed from f), or NULL (no error set; a NULL f
 * or name also sets NB_ERR_INVALID_ARG unless an error is pending). */
nb_tensor *nb_safetensors_get(const nb_safetensors *f, const char *name);
/* The metadata value of key (borrowed from f), or NULL (as nb_safetensors_get). */
const char *nb_safetensors_meta(const nb_safetensors *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
