/* dnnl.c - oneDNN's sgemm for the CPU matmul's top-level float32 GEMMs
 * (blas.h: nb_cpu_dnnl_sgemm), loaded at run time like OpenBLAS: built
 * unless meson's -Donednn=disabled, used only where libdnnl.so.2 (Debian:
 * libdnnl2) loads, and only with NB_CPU_GEMM=onednn (matmul.c): OpenBLAS
 * stays the default.
 *
 * Measured on a 2-core AMD EPYC (AVX-512) with tests/bench/gemm_shapes,
 * each GEMM alone (repeated, caches warm): oneDNN 2.6's JIT sgemm beat
 * OpenBLAS 0.3.21 by 1.3-1.4x on the mlp's and cnn's small GEMMs at 2
 * threads and by ~9% over a bert step's GEMMs, and lost where a dimension is
 * tiny (< 32). Inside the training steps it did not: mlp 2.64 vs 2.57 ms
 * (best of 8 interleaved runs, 2 threads; 4.35 vs 4.66 ms at 1 thread),
 * bert's matmul slot 2104 vs 2103 ms over 2 steps. So it is an opt-in for
 * machines where it measures faster (an Intel Xeon, where its kernels are
 * tuned): compare with tests/bench/cpu_scaling.sh under each setting.
 *
 * Threads: Debian's oneDNN runs on OpenMP (libgomp). Its team is sized to
 * nabla's thread count before each call (omp_set_num_threads is per calling
 * thread), and OMP_WAIT_POLICY is set to PASSIVE before loading (unless the
 * user set it), so that idle OpenMP threads sleep at once instead of
 * spinning against nabla's pool and OpenBLAS's threads after every GEMM.
 * If libgomp was loaded before (another library), its policy stays. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "threadpool.h"

static struct {
    nb_dnnl_sgemm_fn sgemm;
    void (*omp_set_num_threads)(int);
    char info[256];
} D;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
static _Thread_local int omp_threads_set; /* this thread's OpenMP team size, 0: never set */

static void dnnl_load(void) {
#if defined(NB_WITH_ONEDNN)
    const char *want = getenv("NB_CPU_GEMM");
    if (!want || strcmp(want, "onednn")) {
        snprintf(D.info, sizeof D.info, "oneDNN off (NB_CPU_GEMM=onednn uses it)");
        return;
    }
    void *g = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    bool gomp_loaded = g != NULL;
    if (g) dlclose(g); /* RTLD_NOLOAD took a reference */
    const char *pol = getenv("OMP_WAIT_POLICY");
    if (!pol || !*pol) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(D.info, sizeof D.info, "oneDNN not loaded (%.200s)", e ? e : "libdnnl.so.2");
        return;
    }
    void *p = dlsym(h, "dnnl_sgemm"), *q = dlsym(h, "omp_set_num_threads");
    if (!p) {
        snprintf(D.info, sizeof D.info, "oneDNN not used: libdnnl.so.2 has no dnnl_sgemm");
        return;
    }
    memcpy(&D.sgemm, &p, sizeof p);
    if (q) memcpy(&D.omp_set_num_threads, &q, sizeof q);
    typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } ver_t;
    const ver_t *(*version)(void) = NULL;
    void *v = dlsym(h, "dnnl_version");
    if (v) memcpy(&version, &v, sizeof v);
    const ver_t *ver = version ? version() : NULL;
    snprintf(D.info, sizeof D.info, "oneDNN %d.%d.%d sgemm (NB_CPU_GEMM=onednn%s)", ver ? ver->major : 0,
             ver ? ver->minor : 0, ver ? ver->patch : 0,
             gomp_loaded ? "; libgomp loaded before nabla: its OMP_WAIT_POLICY kept" : "");
#else
    snprintf(D.info, sizeof D.info, "oneDNN not built (-Donednn=disabled)");
#endif
}

nb_dnnl_sgemm_fn nb_cpu_dnnl_sgemm(void) {
    pthread_once(&dnnl_once, dnnl_load);
    if (!D.sgemm) return NULL;
    int t = nb_cpu_get_num_threads();
    if (D.omp_set_num_threads && omp_threads_set != t) {
        D.omp_set_num_threads(t);
        omp_threads_set = t;
    }
    return D.sgemm;
}

const char *nb_cpu_dnnl_info(void) {
    pthread_once(&dnnl_once, dnnl_load);
    return D.info;
}
