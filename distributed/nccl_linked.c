/* nccl_linked.c - where the NCCL process group comes from: linked in (the
 * static library, NB_NCCL_LINKED), from libnabla_cuda.so (the shared
 * library: NCCL loads with the CUDA backend, on first use), or nowhere (a
 * build without NCCL). */
#include "dist_impl.h"

#if defined(NB_NCCL_LINKED)
nb_pg_init_fn nb_pg_nccl_linked(void) { return nb_pg_nccl_init; }
#elif defined(NB_WITH_NCCL)
void *nb_cuda_plugin_symbol(const char *name); /* backend/plugin.c */
nb_pg_init_fn nb_pg_nccl_linked(void) {
    nb_pg_init_fn f;
    *(void **)&f = nb_cuda_plugin_symbol("nb_pg_nccl_init");
    return f;
}
#else
nb_pg_init_fn nb_pg_nccl_linked(void) {
    nb_set_error(NB_ERR_UNSUPPORTED, "distributed_init: this build has no NCCL backend (it comes with the CUDA "
                                     "backend where libnccl is found)");
    return NULL;
}
#endif
