/* device.c - dtype facts, the backend registry, the default device and the
 * one thread-count owner (nb_set_num_threads). */
#include <pthread.h>

#include "nb_impl.h"

static const size_t dtype_sizes[NB_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1, 2, 2};
static const char *const dtype_names[NB_DTYPE_COUNT] = {"float32", "float64", "int32",   "int64",
                                                        "uint8",   "bool",    "float16", "bfloat16"};

size_t nb_dtype_size(nb_dtype dt) { return (unsigned)dt < NB_DTYPE_COUNT ? dtype_sizes[dt] : 0; }
const char *nb_dtype_name(nb_dtype dt) {
    return (unsigned)dt < NB_DTYPE_COUNT ? dtype_names[dt] : "invalid dtype";
}
bool nb_dtype_is_float(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64 || dt == NB_F16 || dt == NB_BF16; }

static nb_backend *registry[NB_DEVICE_TYPE_COUNT];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static nb_device default_device = {NB_DEVICE_CPU, 0};

nb_status nb_backend_register(nb_backend *be) {
    if (!be || (unsigned)be->type >= NB_DEVICE_TYPE_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_backend_register: bad backend");
    if (be->version != NB_BACKEND_INTERFACE_VERSION)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_backend_register: backend %s built for interface %d, nabla has %d",
                            be->name, be->version, NB_BACKEND_INTERFACE_VERSION);
    pthread_mutex_lock(&registry_lock);
    registry[be->type] = be;
    pthread_mutex_unlock(&registry_lock);
    return NB_OK;
}

nb_backend *nb_backend_get(nb_device dev) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT)
        return NB_FAIL(NB_ERR_DEVICE, "no such device type %d", (int)dev.type);
    if (dev.type == NB_DEVICE_CPU) return nb_cpu_backend();
    pthread_mutex_lock(&registry_lock);
    nb_backend *be = registry[dev.type];
    pthread_mutex_unlock(&registry_lock);
    if (!be) return NB_FAIL(NB_ERR_DEVICE, "device type %d: nabla was built without its backend", (int)dev.type);
    return be;
}

nb_device nb_default_device(void) { return default_device; }

nb_status nb_set_default_device(nb_device dev) {
    if (!nb_backend_get(dev)) return nb_last_status();
    default_device = dev;
    return NB_OK;
}

void nb_set_num_threads(int n) {
    nb_cpu_set_num_threads(n);
    for (int t = NB_DEVICE_CPU + 1; t < NB_DEVICE_TYPE_COUNT; t++) {
        nb_backend *be = registry[t];
        if (be && be->iface->set_num_threads) be->iface->set_num_threads(be, n);
    }
}

int nb_get_num_threads(void) { return nb_cpu_get_num_threads(); }
