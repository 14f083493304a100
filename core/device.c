/* device.c - dtype facts, the registry of backend instances keyed by
 * (device type, index), the default device, the one thread-count owner
 * (nb_set_num_threads) and the device helpers (parse, count, info).
 * Core names no backend: backend/registry.c lists the init functions of the
 * backends this build has, and each registers the devices it finds. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"

static const size_t dtype_sizes[NB_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1, 2, 2, 1, 2};
static const char *const dtype_names[NB_DTYPE_COUNT] = {"float32", "float64", "int32",    "int64", "uint8",
                                                        "bool",    "float16", "bfloat16", "int8",  "int16"};
static const char *const type_names[NB_DEVICE_TYPE_COUNT] = {"cpu", "cuda"};

size_t nb_dtype_size(nb_dtype dt) { return (unsigned)dt < NB_DTYPE_COUNT ? dtype_sizes[dt] : 0; }
const char *nb_dtype_name(nb_dtype dt) {
    return (unsigned)dt < NB_DTYPE_COUNT ? dtype_names[dt] : "invalid dtype";
}
bool nb_dtype_is_float(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64 || dt == NB_F16 || dt == NB_BF16; }

/* ---- registry ------------------------------------------------------------------- */

static nb_backend *registry[NB_DEVICE_TYPE_COUNT][NB_MAX_DEVICES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once[NB_DEVICE_TYPE_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static nb_device default_device = {NB_DEVICE_CPU, 0};
static int requested_threads; /* the last nb_set_num_threads argument (0 = all cores) */

nb_status nb_backend_register(nb_backend *be) {
    if (!be || !be->iface || (unsigned)be->device.type >= NB_DEVICE_TYPE_COUNT ||
        (unsigned)be->device.index >= NB_MAX_DEVICES)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_backend_register: bad backend or device");
    if (be->version != NB_BACKEND_INTERFACE_VERSION)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_backend_register: backend %s built for interface %d, nabla has %d",
                            be->name, be->version, NB_BACKEND_INTERFACE_VERSION);
    pthread_mutex_lock(&registry_lock);
    bool taken = registry[be->device.type][be->device.index] != NULL;
    if (!taken) registry[be->device.type][be->device.index] = be;
    pthread_mutex_unlock(&registry_lock);
    if (taken)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_backend_register: %s:%d is already registered", be->name,
                            be->device.index);
    return NB_OK;
}

void nb_backend_unregister(nb_backend *be) {
    pthread_mutex_lock(&registry_lock);
    if (be && (unsigned)be->device.type < NB_DEVICE_TYPE_COUNT && (unsigned)be->device.index < NB_MAX_DEVICES &&
        registry[be->device.type][be->device.index] == be)
        registry[be->device.type][be->device.index] = NULL;
    pthread_mutex_unlock(&registry_lock);
}

/* Runs the init of every built-in backend of a device type, once, on the
 * first use of that type: a program that only uses the CPU never starts
 * the CUDA runtime. A backend that fails to start (a CUDA driver without a
 * GPU) registers nothing; its error is not kept. */
static void init_type(nb_device_type t) {
    nb_status st = nb_last_status();
    for (const nb_backend_entry *e = nb_builtin_backends; e->init; e++)
        if (e->type == t) e->init();
    if (st == NB_OK) nb_clear_error();
}
static void init_cpu(void) { init_type(NB_DEVICE_CPU); }
static void init_cuda(void) { init_type(NB_DEVICE_CUDA); }
static void (*const init_of[NB_DEVICE_TYPE_COUNT])(void) = {init_cpu, init_cuda};

static void ensure_init(nb_device_type t) { pthread_once(&init_once[t], init_of[t]); }

nb_backend *nb_backend_get(nb_device dev) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT)
        return NB_FAIL(NB_ERR_DEVICE, "no such device type %d", (int)dev.type);
    if ((unsigned)dev.index >= NB_MAX_DEVICES)
        return NB_FAIL(NB_ERR_DEVICE, "no such device %s:%d", type_names[dev.type], dev.index);
    ensure_init(dev.type);
    nb_backend *be = registry[dev.type][dev.index]; /* written once, before init returns */
    if (be) return be;
    for (int i = 0; i < NB_MAX_DEVICES; i++)
        if (registry[dev.type][i])
            return NB_FAIL(NB_ERR_DEVICE, "no such device %s:%d (this machine has %d)", type_names[dev.type],
                           dev.index, nb_device_count(dev.type));
    return NB_FAIL(NB_ERR_DEVICE, "device %s:%d: nabla was built without its backend or found no such device",
                   type_names[dev.type], dev.index);
}

int nb_device_count(nb_device_type type) {
    if ((unsigned)type >= NB_DEVICE_TYPE_COUNT) return 0;
    ensure_init(type);
    int n = 0;
    for (int i = 0; i < NB_MAX_DEVICES; i++) n += registry[type][i] != NULL;
    return n;
}

const char *nb_backend_info(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    if (!be) return "";
    return be->iface->info ? be->iface->info(be) : be->name;
}

nb_status nb_device_parse(const char *s, nb_device *dev) {
    if (!s || !dev) return nb_set_error(NB_ERR_INVALID_ARG, "device_parse: NULL argument");
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++) {
        size_t n = strlen(type_names[t]);
        if (strncmp(s, type_names[t], n)) continue;
        if (!s[n]) {
            *dev = (nb_device){(nb_device_type)t, 0};
            return NB_OK;
        }
        if (s[n] != ':' || !s[n + 1]) break;
        char *end;
        long i = strtol(s + n + 1, &end, 10);
        if (*end || i < 0 || i >= NB_MAX_DEVICES || s[n + 1] == '+' || s[n + 1] == '-' || s[n + 1] == ' ') break;
        *dev = (nb_device){(nb_device_type)t, (int)i};
        return NB_OK;
    }
    return nb_set_error(NB_ERR_INVALID_ARG, "device_parse: \"%s\" is not a device (cpu, cuda, cuda:N)", s);
}

char *nb_device_str(nb_device dev, char *buf, size_t len) {
    if (!buf || !len) return nb_set_error(NB_ERR_INVALID_ARG, "device_str: NULL or empty buffer"), NULL;
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT) snprintf(buf, len, "invalid device");
    else if (dev.type == NB_DEVICE_CPU) snprintf(buf, len, "cpu");
    else snprintf(buf, len, "%s:%d", type_names[dev.type], dev.index);
    return buf;
}

nb_device nb_default_device(void) { return default_device; }

nb_status nb_set_default_device(nb_device dev) {
    if (!nb_backend_get(dev)) return nb_last_status();
    default_device = dev;
    return NB_OK;
}

/* ---- matmul precision ------------------------------------------------------------ */

static const char *const precisions[] = {"highest", "high", "medium"};
static int matmul_precision; /* index into precisions */

nb_status nb_set_float32_matmul_precision(const char *p) {
    for (int i = 0; p && i < 3; i++)
        if (!strcmp(p, precisions[i])) {
            matmul_precision = i;
            return NB_OK;
        }
    return nb_set_error(NB_ERR_INVALID_ARG, "set_float32_matmul_precision: \"%s\" is not highest, high or medium",
                        p ? p : "(null)");
}

const char *nb_get_float32_matmul_precision(void) { return precisions[matmul_precision]; }
int nb_float32_matmul_precision(void) { return matmul_precision; }

static bool cudnn_enabled = true;

bool nb_set_cudnn_enabled(bool enabled) {
    bool prev = cudnn_enabled;
    cudnn_enabled = enabled;
    return prev;
}
bool nb_cudnn_enabled(void) { return cudnn_enabled; }

/* ---- threads -------------------------------------------------------------------- */

void nb_set_num_threads(int n) {
    ensure_init(NB_DEVICE_CPU); /* the backends with host threads */
    requested_threads = n;
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < NB_MAX_DEVICES; i++) {
            nb_backend *be = registry[t][i];
            if (be && be->iface->set_num_threads) be->iface->set_num_threads(be, n);
        }
}

/* The count of the first backend with host threads (the CPU's). */
int nb_get_num_threads(void) {
    ensure_init(NB_DEVICE_CPU); /* the backends with host threads */
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < NB_MAX_DEVICES; i++) {
            nb_backend *be = registry[t][i];
            if (be && be->iface->get_num_threads) return be->iface->get_num_threads(be);
        }
    return requested_threads > 0 ? requested_threads : 1;
}
