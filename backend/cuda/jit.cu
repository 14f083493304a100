// jit.cu - the CUDA backend's run-time compiler (jit.cuh): NVRTC, an
// in-memory cache per device and a disk cache of cubins.
#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "jit.cuh"
#include "jit_headers.h"
#include "nb_extension.h"

namespace nbc {

// ---- keys ---------------------------------------------------------------------------

struct Key {
    uint64_t h[2];
};

// Two 64-bit multiplicative streams (FNV-1a, and one with another odd
// multiplier and an offset), each finished by splitmix64's mixer: a
// 128-bit name, so distinct sources do not share a file (not a
// cryptographic hash: the cache trusts its directory).
struct Hasher {
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    void bytes(const void *p, size_t n) {
        const unsigned char *c = (const unsigned char *)p;
        for (size_t i = 0; i < n; i++) {
            a = (a ^ c[i]) * 0x100000001b3ull;
            b = (b ^ c[i]) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull; // another odd multiplier
        }
    }
    void str(const char *s) { bytes(s, strlen(s) + 1); } // the NUL separates fields
    static uint64_t mix(uint64_t z) {
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    Key key() const { return Key{{mix(a), mix(b ^ a)}}; }
};

// ---- the in-memory cache: open addressing on the key, per device ------------------------

struct Entry {
    Key key;
    int dev; // -1: empty slot
    cudaKernel_t kernel;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *table;
static size_t cap, used;
static std::atomic<uint64_t> n_compiled[NB_MAX_DEVICES], n_disk[NB_MAX_DEVICES];

static bool same(const Key &x, const Key &y) { return x.h[0] == y.h[0] && x.h[1] == y.h[1]; }

// The entry of (key, dev) or the empty slot where it belongs (lock held, cap > 0).
static Entry *probe(Entry *t, size_t c, const Key &key, int dev) {
    for (size_t i = (key.h[0] ^ (uint64_t)dev) & (c - 1);; i = (i + 1) & (c - 1))
        if (t[i].dev < 0 || (t[i].dev == dev && same(t[i].key, key))) return &t[i];
}

static bool grow(void) { // lock held
    size_t c = cap ? 2 * cap : 256;
    Entry *t = (Entry *)malloc(sizeof *t * c);
    if (!t) return false;
    for (size_t i = 0; i < c; i++) t[i].dev = -1;
    for (size_t i = 0; i < cap; i++)
        if (table[i].dev >= 0) *probe(t, c, table[i].key, table[i].dev) = table[i];
    free(table);
    table = t, cap = c;
    return true;
}

static bool lookup(const Key &key, int dev, cudaKernel_t *out) {
    pthread_mutex_lock(&lock);
    Entry *e = cap ? probe(table, cap, key, dev) : nullptr;
    bool hit = e && e->dev >= 0;
    if (hit) *out = e->kernel;
    pthread_mutex_unlock(&lock);
    return hit;
}

// Keeps k for (key, dev); another thread may have added it first (then
// its kernel is served: both are the same code). Without memory for the
// table, k is still returned, just not kept.
static cudaKernel_t remember(const Key &key, int dev, cudaKernel_t k) {
    pthread_mutex_lock(&lock);
    if ((used + 1) * 2 > cap && !grow()) {
        pthread_mutex_unlock(&lock);
        return k;
    }
    Entry *e = probe(table, cap, key, dev);
    if (e->dev < 0) *e = Entry{key, dev, k}, used++;
    cudaKernel_t r = e->kernel;
    pthread_mutex_unlock(&lock);
    return r;
}

// ---- the disk cache ------------------------------------------------------------------------

static const char MAGIC[8] = {'N', 'B', 'J', 'I', 'T', '0', '0', '1'};
struct FileHead {
    char magic[8];
    uint64_t h[2];
    uint64_t bytes; // of the cubin after the head
};

// The cache directory into dir (created), or false when the disk cache is
// off or no directory can be made.
static bool cache_dir(char *dir, size_t len) {
    const char *env = getenv("NB_KERNEL_CACHE");
    if (env && (!*env || !strcmp(env, "0") || !strcmp(env, "off"))) return false;
    int n;
    if (env) n = snprintf(dir, len, "%s", env);
    else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME"))
        n = snprintf(dir, len, "%s/nabla/kernels", getenv("XDG_CACHE_HOME"));
    else if (getenv("HOME") && *getenv("HOME")) n = snprintf(dir, len, "%s/.cache/nabla/kernels", getenv("HOME"));
    else return false;
    if (n <= 0 || (size_t)n >= len) return false;
    for (char *p = dir + 1;; p++) { // mkdir -p
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(dir, 0755) && errno != EEXIST) return false;
            if (!end) *p = '/';
        }
        if (end) break;
    }
    return true;
}

static void file_name(char *path, size_t len, const char *dir, const Key &key, int arch) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    snprintf(path, len, "%s/%016llx%016llx-sm_%d-nvrtc%d.%d.cubin", dir, (unsigned long long)key.h[0],
             (unsigned long long)key.h[1], arch, major, minor);
}

// The cubin of key from the disk cache (malloc'd, *bytes set), or NULL.
static void *disk_read(const Key &key, int arch, size_t *bytes) {
    char dir[4000], path[4200];
    if (!cache_dir(dir, sizeof dir)) return nullptr;
    file_name(path, sizeof path, dir, key, arch);
    FILE *f = fopen(path, "rb");
    if (!f) return nullptr;
    FileHead h;
    void *cubin = nullptr;
    if (fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, MAGIC, sizeof MAGIC) && same(Key{{h.h[0], h.h[1]}}, key) &&
        h.bytes > 0 && h.bytes < ((uint64_t)1 << 30)) {
        cubin = malloc(h.bytes);
        int extra = 0;
        if (cubin && (fread(cubin, 1, h.bytes, f) != h.bytes || fread(&extra, 1, 1, f) != 0)) {
            free(cubin); // short or long: not a file this code wrote
            cubin = nullptr;
        }
    }
    fclose(f);
    if (cubin) *bytes = h.bytes;
    return cubin;
}

// Best effort: a cache that cannot be written only costs a compile later.
static void disk_write(const Key &key, int arch, const void *cubin, size_t bytes) {
    char dir[4000], path[4200];
    if (!cache_dir(dir, sizeof dir)) return;
    file_name(path, sizeof path, dir, key, arch);
    unsigned char *buf = (unsigned char *)malloc(sizeof(FileHead) + bytes);
    if (!buf) return;
    FileHead h;
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    h.h[0] = key.h[0], h.h[1] = key.h[1], h.bytes = bytes;
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, cubin, bytes);
    nb_status prev = nb_last_status();
    if (nb_write_file_atomic("kernel cache", path, buf, sizeof h + bytes) && prev == NB_OK) nb_clear_error();
    free(buf);
}

static void dump_source(const Key &key, const char *src) {
    const char *dir = getenv("NB_COMPILE_DUMP");
    if (!dir || !*dir) return;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%016llx%016llx.cu", dir, (unsigned long long)key.h[0],
                 (unsigned long long)key.h[1]) >= (int)sizeof path)
        return;
    mkdir(dir, 0755);
    nb_status prev = nb_last_status();
    if (nb_write_file_atomic("NB_COMPILE_DUMP", path, src, strlen(src)) && prev == NB_OK) nb_clear_error();
}

// ---- NVRTC ----------------------------------------------------------------------------------

static nb_status nvrtc_fail(const char *slot, const char *call, nvrtcResult r) {
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s failed: %s", slot, call, nvrtcGetErrorString(r));
}

// The cubin of src for sm_<arch> (malloc'd).
static nb_status compile(const char *slot, const char *src, const char *name, int arch, void **cubin,
                         size_t *bytes) {
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, nbc_jit_header_count, nbc_jit_header_texts,
                                       nbc_jit_header_names);
    if (r != NVRTC_SUCCESS) return nvrtc_fail(slot, "nvrtcCreateProgram", r);
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    // nvcc's defaults for the compiled kernels (-O3, no fast math): FMA
    // contraction on, IEEE division and square root, denormals kept
    const char *opts[] = {arch_opt, "--std=c++17"};
    r = nvrtcCompileProgram(prog, 2, opts);
    nb_status st = NB_OK;
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        char log[1024] = "";
        if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 0) {
            char *full = (char *)malloc(n);
            if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS) snprintf(log, sizeof log, "%s", full);
            free(full);
        }
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: NVRTC could not compile kernel %s: %s: %s", slot, name,
                          nvrtcGetErrorString(r), log);
    } else if ((r = nvrtcGetCUBINSize(prog, bytes)) != NVRTC_SUCCESS) {
        st = nvrtc_fail(slot, "nvrtcGetCUBINSize", r);
    } else if (*bytes == 0) {
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: NVRTC made no cubin for kernel %s", slot, name);
    } else if (!(*cubin = malloc(*bytes))) {
        st = nb_set_error(NB_ERR_OOM, "%s: no memory for a %zu-byte cubin", slot, *bytes);
    } else if ((r = nvrtcGetCUBIN(prog, (char *)*cubin)) != NVRTC_SUCCESS) {
        free(*cubin);
        *cubin = nullptr;
        st = nvrtc_fail(slot, "nvrtcGetCUBIN", r);
    }
    nvrtcDestroyProgram(&prog);
    return st;
}

// The headers' text and NVRTC's version, hashed once (they key every kernel).
static Hasher base;
static pthread_once_t base_once = PTHREAD_ONCE_INIT;
static void make_base(void) {
    int v[2] = {0, 0};
    nvrtcVersion(&v[0], &v[1]);
    base.bytes(v, sizeof v);
    for (int i = 0; i < nbc_jit_header_count; i++) base.str(nbc_jit_header_names[i]), base.str(nbc_jit_header_texts[i]);
    base.str("--std=c++17");
}

nb_status jit_kernel(nb_backend *be, const char *slot, const char *src, const char *name, cudaKernel_t *out) {
    int dev = device_of(be), major = 0, minor = 0;
    NBC_TRY(slot, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    NBC_TRY(slot, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    const int arch = major * 10 + minor;
    pthread_once(&base_once, make_base);
    Hasher h = base;
    h.str(src), h.str(name), h.bytes(&arch, sizeof arch);
    const Key key = h.key();
    if (lookup(key, dev, out)) return NB_OK;

    dump_source(key, src);
    size_t bytes = 0;
    void *cubin = disk_read(key, arch, &bytes);
    bool from_disk = cubin != nullptr;
    if (!from_disk) {
        nb_status st = compile(slot, src, name, arch, &cubin, &bytes);
        if (st) return st;
        n_compiled[dev].fetch_add(1, std::memory_order_relaxed);
    }
    // Loading a module is not a stream operation; a capture on this thread
    // in global mode would refuse it, so the mode is relaxed around it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaLibrary_t lib;
    cudaKernel_t k;
    cudaError_t e = cudaLibraryLoadData(&lib, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess && (e = cudaLibraryGetKernel(&k, lib, name)) != cudaSuccess) cudaLibraryUnload(lib);
    if (e != cudaSuccess && from_disk) { // a cache file that does not load: compile again
        (void)cudaGetLastError();
        free(cubin);
        cubin = nullptr;
        from_disk = false;
        nb_status st = compile(slot, src, name, arch, &cubin, &bytes);
        if (st) {
            cudaThreadExchangeStreamCaptureMode(&mode);
            return st;
        }
        n_compiled[dev].fetch_add(1, std::memory_order_relaxed);
        e = cudaLibraryLoadData(&lib, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0);
        if (e == cudaSuccess && (e = cudaLibraryGetKernel(&k, lib, name)) != cudaSuccess) cudaLibraryUnload(lib);
    }
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
        free(cubin);
        return cuda_fail(slot, "cudaLibraryLoadData", e);
    }
    if (from_disk) n_disk[dev].fetch_add(1, std::memory_order_relaxed);
    else disk_write(key, arch, cubin, bytes);
    free(cubin);
    // Libraries stay loaded for the process: kernels already launched or
    // captured into graphs keep pointing at them.
    *out = remember(key, dev, k);
    return NB_OK;
}

nb_status jit_launch(nb_backend *be, const char *slot, cudaKernel_t k, unsigned grid, unsigned block, void *param) {
    void *args[1] = {param};
    cudaError_t e = cudaLaunchKernel((const void *)k, dim3(grid), dim3(block), args, 0, stream_of(be));
    if (e != cudaSuccess) return cuda_fail(slot, "cudaLaunchKernel", e);
    return launched(slot);
}

void jit_counters(int d, uint64_t *compiled, uint64_t *disk_loads) {
    *compiled = n_compiled[d].load(std::memory_order_relaxed);
    *disk_loads = n_disk[d].load(std::memory_order_relaxed);
}

} // namespace nbc
