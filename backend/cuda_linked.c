/* cuda_linked.c - how the registry starts the CUDA backend: the static
 * library calls its init directly (NB_CUDA_LINKED: the reference pulls the
 * backend's objects into the program), the shared library loads
 * libnabla_cuda.so first (plugin.c). A build without the plugin's library
 * beside it has no CUDA device (a note in nb_last_error, cleared by the
 * registry). */
#include "nb_impl.h"

nb_status nb_cuda_backend_start(void);

#ifdef NB_CUDA_LINKED
nb_status nb_cuda_backend_init(void);
nb_status nb_cuda_backend_start(void) { return nb_cuda_backend_init(); }
#else
void *nb_cuda_plugin_symbol(const char *name);
nb_status nb_cuda_backend_start(void) {
    nb_status (*init)(void);
    *(void **)&init = nb_cuda_plugin_symbol("nb_cuda_backend_init");
    return init ? init() : nb_last_status();
}
#endif
