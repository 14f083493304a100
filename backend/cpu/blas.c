/* blas.c - finds and loads a CBLAS (OpenBLAS first) with dlopen on first
 * use, after choosing OpenBLAS's kernels through OPENBLAS_CORETYPE and
 * setting FTZ/DAZ on the loading thread (OpenBLAS's worker threads are
 * created while it initialises and inherit that thread's MXCSR). Keeps
 * OpenBLAS's thread count equal to nabla's, and shortens the busy-wait of
 * its idle threads (choose_thread_timeout). Loads LAPACKE after it
 * (nb_cpu_lapack_get). Under an address-space limit it checks that
 * OpenBLAS's buffers fit before OpenBLAS first needs them (address_space_ok).
 * See blas.h for why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "nb_impl.h"
#include "threadpool.h"

typedef void (*set_threads_fn)(int);
typedef char *(*get_str_fn)(void);

static struct {
    pthread_mutex_t lock; /* guards set_threads against a concurrent nb_cpu_set_num_threads */
    bool ok;
    nb_cpu_blas fns;
    set_threads_fn set_threads; /* NULL for a BLAS without openblas_set_num_threads */
    char info[1024]; /* room for "not loaded: " + err */
    char err[768];
    void *handle; /* the BLAS library, searched last for LAPACKE_* */
    atomic_int ready_threads; /* OpenBLAS's buffers are mapped for this many threads (address_space_ok) */
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static const char *const blas_libs[] = {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"};
#define NB_NUM_BLAS_LIBS (int)(sizeof blas_libs / sizeof blas_libs[0])

/* OpenBLAS's kernel family for this CPU, or NULL to leave its detection alone.
 * __builtin_cpu_supports also checks that the OS saves the vector registers. */
static const char *pick_coretype(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
    if (__builtin_cpu_supports("avx2")) return "Haswell";
#endif
    return NULL;
}

/* dlsym into a function pointer without the object-to-function cast that
 * ISO C (and -Wpedantic) rejects. */
static void sym(void *h, const char *name, void *fnptr, size_t size) {
    void *p = dlsym(h, name);
    if (p) memcpy(fnptr, &p, size);
}

static bool openblas_preloaded(void) {
    for (int i = 0; i < 2; i++) { /* the OpenBLAS names only */
        void *h = dlopen(blas_libs[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            dlclose(h); /* RTLD_NOLOAD took a reference */
            return true;
        }
    }
    return false;
}

/* Sets OPENBLAS_CORETYPE unless the user did; describes what happened in note. */
static void choose_coretype(bool preloaded, char *note, size_t len) {
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env && *env) {
        snprintf(note, len, "OPENBLAS_CORETYPE=%s from the environment", env);
    } else if (preloaded) {
        snprintf(note, len, "OpenBLAS was loaded before nabla: its own kernel choice kept");
    } else {
        const char *ct = pick_coretype();
        if (ct && setenv("OPENBLAS_CORETYPE", ct, 1) == 0) /* unset or empty */
            snprintf(note, len, "OPENBLAS_CORETYPE=%s set by nabla", ct);
        else
            snprintf(note, len, "OpenBLAS's own kernel detection");
    }
    if (preloaded && env && *env)
        snprintf(note + strlen(note), len - strlen(note), "; OpenBLAS was loaded before nabla");
}

/* OpenBLAS's idle threads busy-wait (with sched_yield) for 2^28 cycles,
 * ~0.1 s, after every call, competing for the cores with nabla's own
 * threads between GEMMs; 2^16 cycles (~25 us) still covers back-to-back
 * GEMMs. Measured on a 2-core MLP step (batch 128, 784-512-512-10, Adam):
 * 3.5 ms mean with 16 vs 3.9-4.3 ms (bimodal) with the default. A user's
 * own OPENBLAS_THREAD_TIMEOUT is kept. */
static void choose_thread_timeout(void) {
    const char *env = getenv("OPENBLAS_THREAD_TIMEOUT");
    if (!env || !*env) setenv("OPENBLAS_THREAD_TIMEOUT", "16", 1);
}

static void *open_first(const char **which) {
    size_t used = (size_t)snprintf(B.err, sizeof B.err, "matmul: no BLAS could be loaded (");
    for (int i = 0; i < NB_NUM_BLAS_LIBS; i++) {
        void *h = dlopen(blas_libs[i], RTLD_NOW | RTLD_GLOBAL);
        if (h) {
            *which = blas_libs[i];
            return h;
        }
        const char *e = dlerror();
        if (used < sizeof B.err)
            used += (size_t)snprintf(B.err + used, sizeof B.err - used, "%s%s", i ? "; " : "",
                                     e ? e : blas_libs[i]);
    }
    if (used < sizeof B.err)
        snprintf(B.err + used, sizeof B.err - used, "); install libopenblas0 or set LD_LIBRARY_PATH");
    return NULL;
}

static void blas_load(void) {
    char note[160];
    bool preloaded = openblas_preloaded();
    choose_coretype(preloaded, note, sizeof note);
    if (!preloaded) choose_thread_timeout();
    nb_cpu_flush_denormals(); /* before OpenBLAS starts its threads */
    const char *lib = NULL;
    void *h = open_first(&lib);
    if (!h) {
        snprintf(B.info, sizeof B.info, "not loaded: %s", B.err);
        return;
    }
    nb_cpu_blas f = {0};
    set_threads_fn set_threads = NULL;
    get_str_fn corename = NULL, config = NULL;
    sym(h, "cblas_sgemm", &f.sgemm, sizeof f.sgemm);
    sym(h, "cblas_dgemm", &f.dgemm, sizeof f.dgemm);
    sym(h, "openblas_set_num_threads", &set_threads, sizeof set_threads);
    sym(h, "openblas_get_corename", &corename, sizeof corename);
    sym(h, "openblas_get_config", &config, sizeof config);
    if (!f.sgemm || !f.dgemm) {
        snprintf(B.err, sizeof B.err, "matmul: %s has no cblas_sgemm/cblas_dgemm", lib);
        snprintf(B.info, sizeof B.info, "not loaded: %s", B.err);
        return;
    }
    B.handle = h;
    snprintf(B.info, sizeof B.info, "%s core=%s (%s; %s)", config ? config() : lib,
             corename ? corename() : "?", note, lib);
    pthread_mutex_lock(&B.lock);
    B.fns = f;
    B.set_threads = set_threads;
    if (set_threads) set_threads(nb_cpu_get_num_threads());
    B.ok = true;
    pthread_mutex_unlock(&B.lock);
}

/* Address-space limits (ulimit -v). OpenBLAS maps a 128 MiB buffer for
 * each of its threads (and from a pool for calling threads) the first time
 * a GEMM uses them, and OpenBLAS 0.3.21 retries a failed mmap forever
 * (OpenBLAS issue 5289, fixed upstream by PR 5303): under a limit between
 * about 500 and 800 MB, mnist_mlp hung inside its first large GEMM. So the
 * first time OpenBLAS is about to run on t threads (more than before),
 * nabla makes it map its buffers at once with one multi-threaded warm-up
 * GEMM (1-20 ms, once), and when RLIMIT_AS is finite it first reserves
 * (t + 1) * 128 MiB + 64 MiB of address space itself (PROT_NONE, released
 * at once): if that fails, the call fails with NB_ERR_OOM and a message
 * instead of hanging. The buffers stay mapped, so later GEMMs need no more
 * room, even under a limit set afterwards. The estimate is conservative:
 * a limit within about 250 MB of OpenBLAS's real need is refused. */
#define NB_OPENBLAS_BUFFER ((size_t)128 << 20)

static bool address_space_ok(void) {
    int t = nb_cpu_get_num_threads();
    if (!B.set_threads || atomic_load(&B.ready_threads) >= t) return true; /* fast path: one atomic load */
    pthread_mutex_lock(&B.lock);
    bool ok = true;
    if (atomic_load(&B.ready_threads) < t) {
        struct rlimit rl;
        if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY) {
            size_t need = ((size_t)t + 1) * NB_OPENBLAS_BUFFER + ((size_t)64 << 20);
            void *probe = mmap(NULL, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (probe == MAP_FAILED) {
                ok = false;
                nb_set_error(NB_ERR_OOM,
                             "matmul: the address-space limit (ulimit -v %llu KiB) leaves less than the %zu MiB that "
                             "OpenBLAS's buffers need for %d threads, and OpenBLAS 0.3.21 waits forever when it "
                             "cannot map them (OpenBLAS issue 5289): raise the limit or use fewer threads "
                             "(nb_set_num_threads)",
                             (unsigned long long)(rl.rlim_cur >> 10), need >> 20, t);
            } else {
                munmap(probe, need);
            }
        }
        if (ok) {
            const int w = t <= 4 ? 512 : 1024; /* large enough for OpenBLAS to use every thread */
            float *m = calloc(3 * (size_t)w * (size_t)w, sizeof *m);
            if (m) B.fns.sgemm(NB_CBLAS_ROW_MAJOR, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, w, w, w, 1.0f, m, w,
                               m + (size_t)w * w, w, 0.0f, m + 2 * (size_t)w * w, w);
            free(m);
            if (m) atomic_store(&B.ready_threads, t);
        }
    }
    pthread_mutex_unlock(&B.lock);
    return ok;
}

const nb_cpu_blas *nb_cpu_blas_get(void) {
    pthread_once(&blas_once, blas_load);
    if (!B.ok) return NB_FAIL(NB_ERR_UNSUPPORTED, "%s", B.err);
    return address_space_ok() ? &B.fns : NULL;
}

const char *nb_cpu_blas_info(void) {
    pthread_once(&blas_once, blas_load);
    return B.info;
}

void nb_cpu_blas_set_num_threads(int n) {
    pthread_mutex_lock(&B.lock);
    if (B.set_threads) B.set_threads(n);
    pthread_mutex_unlock(&B.lock);
}


/* ---- LAPACKE ------------------------------------------------------------- */

static struct {
    bool ok;
    nb_cpu_lapack fns;
    char err[1024]; /* room for the BLAS's error */
} L;
static pthread_once_t lapack_once = PTHREAD_ONCE_INIT;

/* Fills f from h; returns the name of the first missing function, or NULL. */
static const char *lapack_syms(void *h, nb_cpu_lapack *f) {
#define NB_LSYM(name)                                          \
    do {                                                       \
        sym(h, "LAPACKE_" #name, &f->name, sizeof f->name);    \
        if (!f->name) return "LAPACKE_" #name;                 \
    } while (0)
    NB_LSYM(sgesv); NB_LSYM(dgesv); NB_LSYM(sgetrf); NB_LSYM(dgetrf);
    NB_LSYM(spotrf); NB_LSYM(dpotrf); NB_LSYM(sgeqrf); NB_LSYM(dgeqrf);
    NB_LSYM(sorgqr); NB_LSYM(dorgqr); NB_LSYM(ssyevd); NB_LSYM(dsyevd);
    NB_LSYM(sgesdd); NB_LSYM(dgesdd); NB_LSYM(sgels); NB_LSYM(dgels);
#undef NB_LSYM
    return NULL;
}

static void lapack_load(void) {
    if (!nb_cpu_blas_get()) { /* OpenBLAS first, so its CORETYPE and threads hold */
        snprintf(L.err, sizeof L.err, "linalg: LAPACKE needs a BLAS: %s", B.err);
        return;
    }
    static const char *const libs[] = {"liblapacke.so.3", "liblapacke.so"};
    size_t used = (size_t)snprintf(L.err, sizeof L.err, "linalg: no LAPACKE could be loaded (");
    for (int i = 0; i <= 2; i++) {
        void *h = i < 2 ? dlopen(libs[i], RTLD_NOW | RTLD_LOCAL) : B.handle;
        const char *why = h ? NULL : dlerror();
        nb_cpu_lapack f = {0};
        const char *missing = h ? lapack_syms(h, &f) : NULL;
        if (h && !missing) {
            L.fns = f;
            L.ok = true;
            return;
        }
        if (used < sizeof L.err)
            used += (size_t)snprintf(L.err + used, sizeof L.err - used, "%s%s: %s", i ? "; " : "",
                                     i < 2 ? libs[i] : "the BLAS library", why ? why : "no ");
        if (missing && used < sizeof L.err)
            used += (size_t)snprintf(L.err + used, sizeof L.err - used, "%s", missing);
        if (h && i < 2) dlclose(h);
    }
    if (used < sizeof L.err)
        snprintf(L.err + used, sizeof L.err - used, "); install liblapacke (Debian: liblapacke)");
}

const nb_cpu_lapack *nb_cpu_lapack_get(void) {
    pthread_once(&lapack_once, lapack_load);
    if (!L.ok) return NB_FAIL(NB_ERR_UNSUPPORTED, "%s", L.err);
    return address_space_ok() ? &L.fns : NULL; /* LAPACK runs OpenBLAS's GEMMs too */
}
