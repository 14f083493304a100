/* cpu_backend.c - the CPU backend: raw host memory (64-byte aligned, for
 * AVX-512 loads and whole cache lines), the synchronous execution model
 * (streams and events are tokens), the vtable of the kernels the slot list
 * gives the CPU (backend/nb_slots.def), and nb_cpu_backend_init, which registers cpu:0
 * (backend/registry.c calls it). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "cpu_common.h"
#include "nb_impl.h"
#include "threadpool.h"
#include "blas.h"
#include "isa.h"

#define NB_CPU_ALIGN 64

static void *cpu_alloc_bytes(size_t bytes) {
    size_t rounded = (bytes + NB_CPU_ALIGN - 1) / NB_CPU_ALIGN * NB_CPU_ALIGN;
    if (rounded == 0) rounded = NB_CPU_ALIGN; /* a valid pointer for empty tensors */
    if (rounded < bytes) return NULL;           /* overflow */
    return aligned_alloc(NB_CPU_ALIGN, rounded);
}

static nb_status cpu_alloc(nb_backend *be, size_t bytes, void **ptr) {
    (void)be;
    *ptr = cpu_alloc_bytes(bytes);
    return *ptr ? NB_OK : NB_ERR_OOM;
}

static void cpu_free(nb_backend *be, void *ptr, size_t bytes) {
    (void)be, (void)bytes;
    free(ptr);
}

static void *cpu_host_alloc(nb_backend *be, size_t bytes) {
    (void)be;
    return cpu_alloc_bytes(bytes);
}
static void cpu_host_free(nb_backend *be, void *ptr) { cpu_free(be, ptr, 0); }

/* Every CPU copy is a memcpy that is done when it returns. */
static nb_status cpu_memcpy(nb_backend *be, void *dst, const void *src, size_t bytes, void *stream) {
    (void)be, (void)stream;
    if (bytes) memcpy(dst, src, bytes);
    return NB_OK;
}

static void cpu_set_num_threads(nb_backend *be, int n) {
    (void)be;
    nb_cpu_set_num_threads(n);
}
static int cpu_get_num_threads(nb_backend *be) {
    (void)be;
    return nb_cpu_get_num_threads();
}
/* "isa=avx512 (...); OpenBLAS ...; oneDNN ...": the kernels' level (isa.h), the BLAS and oneDNN. */
static const char *cpu_info(nb_backend *be) {
    (void)be;
    static _Thread_local char buf[1536];
    snprintf(buf, sizeof buf, "%s; %s; %s", nb_cpu_isa_info(), nb_cpu_blas_info(), nb_cpu_dnnl_info());
    return buf;
}

/* Kernels run before they return, so streams and events are tokens: every
 * wait is already satisfied and every event has completed. */
static int cpu_stream_tokens[NB_STREAM_KIND_COUNT];
static int cpu_event_token;
static void *cpu_stream_create(nb_backend *be, nb_stream_kind kind) {
    (void)be;
    return &cpu_stream_tokens[kind];
}
static void cpu_stream_destroy(nb_backend *be, void *s) { (void)be, (void)s; }
static nb_status cpu_stream_sync(nb_backend *be, void *s) {
    (void)be, (void)s;
    return NB_OK;
}
static nb_status cpu_sync(nb_backend *be) {
    (void)be;
    return NB_OK;
}
static void *cpu_event_create(nb_backend *be) {
    (void)be;
    return &cpu_event_token;
}
static void cpu_event_destroy(nb_backend *be, void *e) { (void)be, (void)e; }
static nb_status cpu_event_record(nb_backend *be, void *e, void *s) {
    (void)be, (void)e, (void)s;
    return NB_OK;
}
static nb_status cpu_event_wait(nb_backend *be, void *s, void *e) {
    (void)be, (void)e, (void)s;
    return NB_OK;
}
static int cpu_event_query(nb_backend *be, void *e) {
    (void)be, (void)e;
    return 1;
}
static nb_status cpu_event_sync(nb_backend *be, void *e) {
    (void)be, (void)e;
    return NB_OK;
}

/* The profiler's marks: the host clock (the CPU's slots finish before they return). */
static void *cpu_timer_mark(nb_backend *be) {
    (void)be;
    double *t = malloc(sizeof *t);
    if (t) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *t = 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
    }
    return t;
}
static double cpu_timer_elapsed_ms(nb_backend *be, void *a, void *b) {
    (void)be;
    return *(double *)b - *(double *)a;
}
static void cpu_timer_free(nb_backend *be, void *m) {
    (void)be;
    free(m);
}

/* The slots of isa.h's kernels are filled in by nb_cpu_backend_use_kernels
 * (the level chosen at start-up); the others are built once. */
static struct nb_backend_i cpu_iface = {
    .info = cpu_info,
    .set_num_threads = cpu_set_num_threads,
    .get_num_threads = cpu_get_num_threads,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_sync,
    .synchronize = cpu_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_query = cpu_event_query,
    .timer_mark = cpu_timer_mark,
    .timer_elapsed_ms = cpu_timer_elapsed_ms,
    .timer_free = cpu_timer_free,
    .event_synchronize = cpu_event_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
#define NB_CPU_SET_1(slot) .slot = nb_cpu_##slot,
#define NB_CPU_SET_ISA(slot)
#define NB_CPU_SET_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CPU_SET_##cpu(slot)
#include "nb_slots.def"
#undef NB_SLOT
};

static nb_backend cpu_backend = {
    .iface = &cpu_iface,
    .device = {NB_DEVICE_CPU, 0},
    .name = "cpu",
    .version = NB_BACKEND_INTERFACE_VERSION,
    .context = NULL,
};

void nb_cpu_backend_use_kernels(const nb_cpu_isa_kernels *k) {
#define NB_CPU_USE_ISA(slot) cpu_iface.slot = k->slot;
#define NB_CPU_USE_1(slot)
#define NB_CPU_USE_0(slot)
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) NB_CPU_USE_##cpu(slot)
#include "nb_slots.def"
#undef NB_SLOT
}

/* One instance: the whole host is cpu:0 (its threads are the pool's). */
nb_status nb_cpu_backend_init(void) {
    nb_cpu_backend_use_kernels(nb_cpu_isa_kernels_get());
    return nb_backend_register(&cpu_backend);
}
