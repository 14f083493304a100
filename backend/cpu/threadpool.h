/* threadpool.h - the CPU backend's persistent thread pool (internal).
 *
 * nb_cpu_parallel_for splits [0, n) statically into at most
 * nb_cpu_get_num_threads() contiguous chunks; the calling thread runs chunk
 * 0 and the workers run the others. Idle workers sleep on a condition
 * variable: they poll for a new job for only ~10 us after the last one
 * (a futex wake-up costs about that much on a VM, more than a small kernel),
 * because OpenBLAS's own threads share the same cores. The partition depends only
 * on n, grain and the thread count, and kernels are written so that their
 * results do not depend on it at all (see reduce.c).
 *
 * Floating-point environment: workers set FTZ and DAZ (flush denormal
 * results and inputs to zero) when they start. Denormal floats, which appear
 * in backward passes as gradients shrink, make GEMMs and elementwise loops
 * several times slower (microcode assists); PyTorch offers the same switch as
 * torch.set_flush_denormal(True). The thread that first initialises the pool
 * or OpenBLAS gets the same setting, so that chunk 0 (run by the caller) and
 * the other chunks compute alike.
 */
#ifndef NB_CPU_POOL_H
#define NB_CPU_POOL_H

#include <stdint.h>

/* The one thread count of nabla's loops and OpenBLAS (n <= 0: the online
 * cores; NB_NUM_THREADS from the environment is the default). */
void nb_cpu_set_num_threads(int n);
int nb_cpu_get_num_threads(void);

/* Elements per task below which splitting a loop is not worth a wake-up. */
#define NB_CPU_GRAIN 32768
/* The same for memory-bound elementwise loops (copy, fill, add, mul, relu,
 * their backward): with AVX-512 such a task of 32768 floats takes about as
 * long as waking a sleeping worker on a VM (10-50 us), so their tasks are 4x
 * larger. Measured on the mlp step (2 threads): relu + relu backward + the
 * bias copies 0.33 -> 0.11 ms per step. */
#define NB_CPU_GRAIN_LIGHT 131072

typedef void (*nb_cpu_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs fn(ctx, begin, end) over a static partition of [0, n) into
 * k = clamp(n / grain, 1, threads) chunks and returns when all are done.
 * Calls made from inside a chunk (nesting), from a second user thread while
 * the pool is busy, or with k == 1 run fn(ctx, 0, n) on the calling thread. */
void nb_cpu_parallel_for(int64_t n, int64_t grain, nb_cpu_range_fn fn, void *ctx);

/* Sets FTZ and DAZ (MXCSR bits 15 and 6) on the calling thread; a no-op on
 * targets without SSE. */
void nb_cpu_flush_denormals(void);

#endif
