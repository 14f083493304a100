/* dnnl.c - oneDNN's sgemm for the CPU matmul's top-level float32 GEMMs
 * (blas.h: nb_cpu_dnnl_sgemm), loaded at run time like OpenBLAS: built
 * unless meson's -Donednn=disabled, used only where libdnnl.so.2 (Debian:
 * libdnnl2) loads, and only with NB_CPU_GEMM=onednn (matmul.c): OpenBLAS
 * stays the default. Also oneDNN's bfloat16 GEMM (nb_cpu_dnnl_gemm_bf16:
 * bfloat16 operands, float32 accumulation and result) for the bfloat16
 * matmul (half.c), on by default where the library loads
 * (NB_CPU_BF16_GEMM=0 turns it off): Debian's OpenBLAS has no sbgemm.
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
    nb_dnnl_gemm_bf16_fn gemm_bf16;
    void (*omp_set_num_threads)(int);
    char info[256];
} D;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
static _Thread_local int omp_threads_set; /* this thread's OpenMP team size, 0: never set */

static void dnnl_load(void) {
#if defined(NB_WITH_ONEDNN)
    const char *want = getenv("NB_CPU_GEMM"), *bf = getenv("NB_CPU_BF16_GEMM");
    bool use_sgemm = want && !strcmp(want, "onednn"), use_bf16 = !(bf && !strcmp(bf, "0"));
    if (!use_sgemm && !use_bf16) {
        snprintf(D.info, sizeof D.info, "oneDNN off (NB_CPU_GEMM=onednn uses its sgemm; NB_CPU_BF16_GEMM=0)");
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
    void *p = dlsym(h, "dnnl_sgemm"), *pb = dlsym(h, "dnnl_gemm_bf16bf16f32"), *q = dlsym(h, "omp_set_num_threads");
    if (!p || !pb) {
        snprintf(D.info, sizeof D.info, "oneDNN not used: libdnnl.so.2 has no dnnl_sgemm or dnnl_gemm_bf16bf16f32");
        return;
    }
    if (use_sgemm) memcpy(&D.sgemm, &p, sizeof p);
    if (use_bf16) memcpy(&D.gemm_bf16, &pb, sizeof pb);
    if (q) memcpy(&D.omp_set_num_threads, &q, sizeof q);
    typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } ver_t;
    const ver_t *(*version)(void) = NULL;
    void *v = dlsym(h, "dnnl_version");
    if (v) memcpy(&version, &v, sizeof v);
    const ver_t *ver = version ? version() : NULL;
    snprintf(D.info, sizeof D.info, "oneDNN %d.%d.%d%s%s%s", ver ? ver->major : 0, ver ? ver->minor : 0,
             ver ? ver->patch : 0, use_sgemm ? " sgemm (NB_CPU_GEMM=onednn)" : "",
             use_bf16 ? " bf16 gemm" : "", gomp_loaded ? "; libgomp loaded before nabla: its OMP_WAIT_POLICY kept" : "");
#else
    snprintf(D.info, sizeof D.info, "oneDNN not built (-Donednn=disabled)");
#endif
}

/* Sizes the calling thread's OpenMP team to nabla's thread count. */
static void omp_team(void) {
    int t = nb_cpu_get_num_threads();
    if (D.omp_set_num_threads && omp_threads_set != t) {
        D.omp_set_num_threads(t);
        omp_threads_set = t;
    }
}

nb_dnnl_sgemm_fn nb_cpu_dnnl_sgemm(void) {
    pthread_once(&dnnl_once, dnnl_load);
    if (!D.sgemm) return NULL;
    omp_team();
    return D.sgemm;
}

nb_dnnl_gemm_bf16_fn nb_cpu_dnnl_gemm_bf16(void) {
    pthread_once(&dnnl_once, dnnl_load);
    if (!D.gemm_bf16) return NULL;
    omp_team();
    return D.gemm_bf16;
}

const char *nb_cpu_dnnl_info(void) {
    pthread_once(&dnnl_once, dnnl_load);
    return D.info;
}
