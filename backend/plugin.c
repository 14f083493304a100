/* plugin.c - the CUDA backend as a library loaded on first use. In the
 * shared build the CUDA backend (and NCCL's process group) live in
 * libnabla_cuda.so beside libnabla.so, so a program that never asks for a
 * CUDA device loads neither it nor the CUDA libraries it links (cuBLAS,
 * cuDNN, NCCL: about 190 MB of resident memory and 0.1-0.4 s at start-up),
 * as ggml's dynamically loaded backends do. The static library links the
 * backend in (cuda_linked.c). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nb_impl.h"

#ifndef NB_CUDA_PLUGIN
#define NB_CUDA_PLUGIN "libnabla_cuda.so.0"
#endif
#define PLUGIN NB_CUDA_PLUGIN /* meson names it: the soname of libnabla_cuda */

static void *plugin;
static char plugin_error[512];
static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;

/* Beside the library holding this code first (its directory, found by
 * dladdr), then the loader's search path (LD_LIBRARY_PATH, the cache). */
static void open_plugin(void) {
    Dl_info info;
    char path[4096];
    if (dladdr(&plugin_once, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        snprintf(path, sizeof path, "%s", info.dli_fname);
        char *slash = strrchr(path, '/');
        snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", PLUGIN);
        plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!plugin) plugin = dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        const char *e = dlerror();
        snprintf(plugin_error, sizeof plugin_error, "%s", e ? e : PLUGIN " not found");
    }
}

void *nb_cuda_plugin_symbol(const char *name) {
    pthread_once(&plugin_once, open_plugin);
    if (!plugin) return NB_FAIL(NB_ERR_UNSUPPORTED, "cuda: cannot load the CUDA backend: %s", plugin_error);
    void *f = dlsym(plugin, name);
    return f ? f : NB_FAIL(NB_ERR_UNSUPPORTED, "cuda: %s lacks %s", PLUGIN, name);
}
