/* iter16.c - float32 inner loops over bfloat16/float16 operands
 * (nb_cpu_iter_run16, half16.h): the unary, unary_backward and binary
 * kernels run their float32 loops this way on 16-bit tensors, a chunk of
 * NB_CHUNK16 elements at a time through float32 buffers on the stack,
 * instead of widening whole tensors into float32 copies first. */
#include "half16.h"

/* elements per chunk: the buffers (NB_ITER_MAX_OPS of them) stay in L1 */
#define NB_CHUNK16 256

typedef struct run16 {
    nb_cpu_loop_fn fn;
    const void *ctx;
    int nops;
    nb_dtype dt[NB_ITER_MAX_OPS];
} run16;

/* Contiguous runs get plain indexed loops (the compiler vectorises them). */
static void widen16(nb_dtype dt, const char *src, int64_t stride, float *restrict dst, int64_t n) {
    if (stride == 2) {
        uint16_t h[NB_CHUNK16];
        memcpy(h, src, (size_t)n * 2);
        if (dt == NB_BF16)
            for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
        else
            for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32(h[i]);
    } else if (dt == NB_BF16) {
        for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(*(const bf16 *)(src + i * stride));
    } else {
        for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32(*(const f16 *)(src + i * stride));
    }
}

static void narrow16(nb_dtype dt, const float *restrict src, char *dst, int64_t stride, int64_t n) {
    if (stride == 2) {
        uint16_t h[NB_CHUNK16];
        if (dt == NB_BF16)
            for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(src[i]);
        else
            for (int64_t i = 0; i < n; i++) h[i] = f32_to_f16(src[i]);
        memcpy(dst, h, (size_t)n * 2);
    } else if (dt == NB_BF16) {
        for (int64_t i = 0; i < n; i++) *(bf16 *)(dst + i * stride) = f32_to_bf16(src[i]);
    } else {
        for (int64_t i = 0; i < n; i++) *(f16 *)(dst + i * stride) = f32_to_f16(src[i]);
    }
}

/* The iterator's inner loop: n elements of every operand at p[k], byte
 * strides s[k]. A broadcast input (stride 0) is widened once and keeps
 * stride 0. Inputs are widened before the output chunk is written, so an
 * output that aliases an input element for element is safe. */
static void loop16(char **p, const int64_t *s, int64_t n, const void *arg) {
    const run16 *r = arg;
    float buf[NB_ITER_MAX_OPS][NB_CHUNK16];
    char *pp[NB_ITER_MAX_OPS];
    int64_t ss[NB_ITER_MAX_OPS];
    for (int64_t i0 = 0; i0 < n; i0 += NB_CHUNK16) {
        const int64_t m = n - i0 < NB_CHUNK16 ? n - i0 : NB_CHUNK16;
        for (int k = 0; k < r->nops; k++) {
            char *at = p[k] + i0 * s[k];
            if (!nb_dtype_is_16bit(r->dt[k])) {
                pp[k] = at, ss[k] = s[k];
                continue;
            }
            pp[k] = (char *)buf[k];
            ss[k] = k > 0 && s[k] == 0 ? 0 : (int64_t)sizeof(float);
            if (k > 0) widen16(r->dt[k], at, s[k], buf[k], s[k] == 0 ? 1 : m);
        }
        r->fn(pp, ss, m, r->ctx);
        if (nb_dtype_is_16bit(r->dt[0])) narrow16(r->dt[0], buf[0], p[0] + i0 * s[0], s[0], m);
    }
}

void nb_cpu_iter_run16(const nb_cpu_iter *it, int64_t grain, nb_cpu_loop_fn fn, const void *ctx,
                       const nb_dtype *dt) {
    run16 r = {.fn = fn, .ctx = ctx, .nops = it->nops};
    for (int k = 0; k < it->nops; k++) r.dt[k] = dt[k];
    nb_cpu_iter_run(it, grain, loop16, &r);
}
