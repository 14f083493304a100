/* cpu_backend.c - the CPU backend: raw host memory (64-byte aligned, for
 * AVX-512 loads and whole cache lines), the vtable of kernels declared in
 * cpu_kernels.h, and nb_cpu_backend(), the built-in singleton the core finds
 * without registration (core/device.c). */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "nb_impl.h"

#define NB_CPU_ALIGN 64

static void *cpu_alloc(nb_backend *be, size_t bytes) {
    (void)be;
    size_t rounded = (bytes + NB_CPU_ALIGN - 1) / NB_CPU_ALIGN * NB_CPU_ALIGN;
    if (rounded == 0) rounded = NB_CPU_ALIGN; /* a valid pointer for empty tensors */
    if (rounded < bytes) return NULL;           /* overflow */
    return aligned_alloc(NB_CPU_ALIGN, rounded);
}

static void cpu_free(nb_backend *be, void *ptr, size_t bytes) {
    (void)be, (void)bytes;
    free(ptr);
}

static nb_status cpu_memcpy(nb_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
    return NB_OK;
}

static void cpu_set_num_threads(nb_backend *be, int n) {
    (void)be;
    nb_cpu_set_num_threads(n);
}

static const struct nb_backend_i cpu_iface = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_to_host = cpu_memcpy,
    .memcpy_from_host = cpu_memcpy,
    .set_num_threads = cpu_set_num_threads,
    .copy = nb_cpu_copy,
    .fill = nb_cpu_fill,
    .binary = nb_cpu_binary,
    .unary = nb_cpu_unary,
    .unary_backward = nb_cpu_unary_backward,
    .reduce = nb_cpu_reduce,
    .argmax = nb_cpu_argmax,
    .matmul = nb_cpu_matmul,
    .softmax = nb_cpu_softmax,
    .softmax_backward = nb_cpu_softmax_backward,
    .cross_entropy = nb_cpu_cross_entropy,
    .cross_entropy_backward = nb_cpu_cross_entropy_backward,
    .random = nb_cpu_random,
    .adam_step = nb_cpu_adam_step,
    .sgd_step = nb_cpu_sgd_step,
    .conv2d = nb_cpu_conv2d,
    .conv2d_backward_input = nb_cpu_conv2d_backward_input,
    .conv2d_backward_weight = nb_cpu_conv2d_backward_weight,
    .max_pool2d = nb_cpu_max_pool2d,
    .max_pool2d_backward = nb_cpu_max_pool2d_backward,
    .avg_pool2d = nb_cpu_avg_pool2d,
    .avg_pool2d_backward = nb_cpu_avg_pool2d_backward,
    .adaptive_avg_pool2d = nb_cpu_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = nb_cpu_adaptive_avg_pool2d_backward,
    .adaptive_max_pool2d = nb_cpu_adaptive_max_pool2d,
    .batch_norm = nb_cpu_batch_norm,
    .batch_norm_backward = nb_cpu_batch_norm_backward,
    .upsample2d = nb_cpu_upsample2d,
    .upsample2d_backward = nb_cpu_upsample2d_backward,
    .index_select = nb_cpu_index_select,
    .index_add = nb_cpu_index_add,
    .where = nb_cpu_where,
    .layer_norm = nb_cpu_layer_norm,
    .layer_norm_backward = nb_cpu_layer_norm_backward,
    .attention = nb_cpu_attention,
    .attention_backward = nb_cpu_attention_backward,
    /* op coverage: binary, logic */
    /* op coverage: reductions, scans */
    .argmin = nb_cpu_argmin,
    .scan = nb_cpu_scan,
    .scan_backward = nb_cpu_scan_backward,
    /* op coverage: sorting, gather/scatter */
    .sort = nb_cpu_sort,
    .gather = nb_cpu_gather,
    .scatter = nb_cpu_scatter,
    /* op coverage: shape, indexing */
    .nonzero = nb_cpu_nonzero,
    .index_copy = nb_cpu_index_copy,
    /* op coverage: linear algebra */
    .linalg_solve = nb_cpu_linalg_solve,
    .linalg_det = nb_cpu_linalg_det,
    .linalg_cholesky = nb_cpu_linalg_cholesky,
    .linalg_qr = nb_cpu_linalg_qr,
    .linalg_eigh = nb_cpu_linalg_eigh,
    .linalg_svd = nb_cpu_linalg_svd,
    .linalg_lstsq = nb_cpu_linalg_lstsq,
    /* decoders */
    .rms_norm = nb_cpu_rms_norm,
    .rms_norm_backward = nb_cpu_rms_norm_backward,
    .rope = nb_cpu_rope,
};

static nb_backend cpu_backend = {
    .iface = &cpu_iface,
    .type = NB_DEVICE_CPU,
    .name = "cpu",
    .version = NB_BACKEND_INTERFACE_VERSION,
    .context = NULL,
};

nb_backend *nb_cpu_backend(void) { return &cpu_backend; }
