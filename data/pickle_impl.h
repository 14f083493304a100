/* pickle_impl.h - the restricted unpickler of PyTorch checkpoints (not
 * installed; pickle.c, used by pt.c): Python's pickle machine cut to the
 * opcodes and globals that torch.load(weights_only=True) accepts
 * (torch/_weights_only_unpickler.py), building a tree of values. */
#ifndef NB_PICKLE_IMPL_H
#define NB_PICKLE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_core.h"

typedef enum pk_kind {
    PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_COMPLEX, PK_STR, PK_BYTES,
    PK_TUPLE, PK_LIST, PK_DICT, PK_SET, /* containers: items (a dict's keys and values alternate) */
    PK_GLOBAL,                          /* an allowed global (a class, function, dtype or storage type) */
    PK_STORAGE,                         /* what a persistent id names: the loader's storage */
    PK_TENSOR
} pk_kind;

/* The allowed globals nabla tells apart (a PK_GLOBAL's i). */
typedef enum pk_global {
    G_ORDERED_DICT, G_COUNTER, G_PARAMETER, G_GET_LAYOUT, G_SIZE, G_TENSOR, G_DEVICE, G_ENCODE, G_BYTEARRAY,
    G_SET, G_COMPLEX, G_DTYPE, G_TENSOR_CLASS, G_STORAGE_TYPE, G_QSCHEME, G_REBUILD_TENSOR, G_REBUILD_TENSOR_V2,
    G_REBUILD_TENSOR_V3, G_REBUILD_PARAMETER, G_REBUILD_PARAMETER_WITH_STATE, G_REBUILD_FROM_TYPE_V2, G_REBUILD_OTHER
} pk_global;

typedef struct pk_value pk_value;
struct pk_value {
    pk_kind kind;
    bool parameter;      /* PK_TENSOR made by nn.Parameter; PK_DICT made by OrderedDict or Counter (BUILD may
                            set their attributes, which are not kept) */
    int64_t i;           /* PK_INT, PK_BOOL (0 or 1); PK_GLOBAL: its pk_global */
    int dtype;           /* PK_GLOBAL of a dtype or storage type, PK_STORAGE: the nb_dtype, -1 when nabla has
                            none (then name says which), -2 for an untyped storage */
    double f, imag;      /* PK_FLOAT; PK_COMPLEX: f the real part */
    char *s;             /* PK_STR (UTF-8, NUL-terminated), PK_BYTES; PK_GLOBAL: "module.name" */
    size_t len;          /* bytes in s */
    pk_value **items;    /* containers */
    size_t n, cap;
    nb_tensor *tensor;   /* PK_TENSOR: a reference the value holds until pk_free */
    void *storage;       /* PK_STORAGE: the loader's */
};

typedef struct pk_unpickler pk_unpickler;

/* What the caller provides: storages and the tensors over them. */
typedef struct pk_callbacks {
    /* BINPERSID's ('storage', storage_type, key, location, numel): fills
     * `out` (a PK_STORAGE: storage and dtype) or returns an error. */
    nb_status (*persistent_load)(void *ctx, const pk_value *pid, pk_value *out);
    /* A CPU tensor of storage's memory read as dtype, with PyTorch's
     * geometry (offset and strides in elements), checked to lie inside the
     * storage; NULL with an error set. */
    nb_tensor *(*tensor)(void *ctx, const pk_value *storage, nb_dtype dtype, int64_t offset, int ndim,
                         const int64_t *size, const int64_t *stride);
    void *ctx;
} pk_callbacks;

/* Runs the pickle data[0..len) (`label` names it in messages) and returns
 * its result; every value lives in *u until pk_free(*u) (also on failure).
 * NULL with NB_ERR_FORMAT (corrupt data, an opcode or global that
 * weights_only refuses, named), NB_ERR_UNSUPPORTED (an allowed global
 * nabla cannot build: sparse, quantized or meta tensors, subclasses),
 * NB_ERR_DTYPE, NB_ERR_OOM, or the callbacks' errors. */
pk_value *pk_load(const uint8_t *data, size_t len, const char *label, const pk_callbacks *cb, pk_unpickler **u);
void pk_free(pk_unpickler *u);
/* Whether v is a PK_STR equal to s. */
bool pk_is_str(const pk_value *v, const char *s);

#endif
