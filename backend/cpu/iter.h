/* iter.h - the N-d strided iterator behind the CPU backend's elementwise
 * kernels (internal), in the spirit of PyTorch's TensorIterator: operands of
 * one shape are reduced to their fewest dims (size-1 dims dropped, dims
 * merged where every operand is contiguous across them), and a typed inner
 * loop is called once per run of the innermost dim with byte strides, so the
 * all-contiguous case is a single call per thread chunk whose loop the
 * compiler vectorises. Each element is visited once by one inner call, so
 * results never depend on the thread count.
 */
#ifndef NB_CPU_ITER_H
#define NB_CPU_ITER_H

#include <stdbool.h>

#include "nb_backend_util.h"

#define NB_ITER_MAX_OPS 4

/* Inner loop: n elements; ptrs[i] points at operand i's first element and
 * strides[i] is its step in bytes (operand 0 is the output). ctx is the
 * kernel's constant data (e.g. a scalar). */
typedef void (*nb_cpu_loop_fn)(char **ptrs, const int64_t *strides, int64_t n, const void *ctx);

typedef struct nb_cpu_iter {
    int nops, ndim; /* ndim >= 1 after coalescing */
    int64_t numel;
    int64_t shape[NB_MAX_DIMS];                    /* outermost first */
    int64_t strides[NB_ITER_MAX_OPS][NB_MAX_DIMS]; /* bytes */
    int64_t esize[NB_ITER_MAX_OPS];                /* element bytes */
    char *base[NB_ITER_MAX_OPS];
} nb_cpu_iter;

/* Builds the iterator over views[0]'s shape; every view must have that shape
 * (the slot's shared check, backend/check/, has made sure). */
void nb_cpu_iter_init(nb_cpu_iter *it, int nops, const nb_kview *const *views);
/* Runs fn over all elements, split across threads above `grain` elements.
 * When an input is transposed against the output (contiguous along the
 * second-last dim, strided along the last), it walks 32x32 tiles of the
 * last two dims instead of whole rows, so both stay in cache. */
void nb_cpu_iter_run(const nb_cpu_iter *it, int64_t grain, nb_cpu_loop_fn fn, const void *ctx);


#endif
