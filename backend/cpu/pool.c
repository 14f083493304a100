/* pool.c - CPU max, average and adaptive pooling over NCHW planes, with
 * their backward passes (PyTorch's ATen/native/cpu/{Max,Avg,Adaptive*}PoolKernel.cpp
 * formulas). Every view is contiguous; a tensor is seen as N*C independent
 * planes and threads split whole planes statically (nb_cpu_parallel_for), so
 * each gx plane is zeroed and then accumulated by one thread in a fixed
 * order: backward scatters need no atomics and give the same bits for any
 * thread count. Sums of float32 windows accumulate in double.
 *
 * Windows (per dim; rows shown):
 *   max: h0 = oh*sH - padH, h1 = min(h0 + dH*(kH-1) + 1, H), h0 stepped up by
 *        dH until >= 0; the first max wins, a NaN wins over numbers (later
 *        NaNs replace earlier ones, as PyTorch's `val > max || isnan(val)`).
 *   avg: h0 = oh*sH - padH, h1 = min(h0 + kH, H + padH); with
 *        count_include_pad the divisor is (h1-h0)*(w1-w0) on this window,
 *        then the window is clipped to [0, H) x [0, W); without it the divisor
 *        is the clipped window's size; divisor_override replaces both.
 *   adaptive: rows floor(oh*H/Ho) .. ceil((oh+1)*H/Ho) - 1.
 *
 * Max pooling's speed: a data-dependent branch per element mispredicts half
 * the time on real data, so rows whose column taps lie inside the plane
 * (column stride 1 or 2) run branch-free loops that GCC vectorises: the 2x2
 * stride-2 pool with taps in registers, other windows with taps outside and
 * outputs inside. Border outputs and other strides take the generic loop.
 * All paths visit a window's taps in the same order, so they pick the same
 * index. On [64, 64, 24, 24] float32 2x2 this is ~10x the branchy loop. */
#include <math.h>
#include <string.h>

#include "cpu_common.h"
#include "nb_impl.h"
#include "threadpool.h"

typedef struct pool_job {
    const nb_pool_params *p;
    char *out;           /* y (forward) or gx (backward) */
    const char *in;      /* x (forward) or gy (backward) */
    int64_t *idx;        /* max forward: indices out (may be NULL) */
    const int64_t *cidx; /* max backward: indices in */
    int64_t H, W, Ho, Wo;
} pool_job;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
/* PyTorch's adaptive start_index / end_index without float rounding. */
static inline int64_t ad_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
static inline int64_t ad_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

/* The avg window of output (oh, ow), clipped; returns the divisor (0: empty window). */
static int64_t avg_window(const nb_pool_params *p, int64_t H, int64_t W, int64_t oh, int64_t ow, int64_t *h0,
                          int64_t *h1, int64_t *w0, int64_t *w1) {
    int64_t a0 = oh * p->stride[0] - p->padding[0], b0 = ow * p->stride[1] - p->padding[1];
    int64_t a1 = min64(a0 + p->kernel[0], H + p->padding[0]);
    int64_t b1 = min64(b0 + p->kernel[1], W + p->padding[1]);
    int64_t padded = (a1 - a0) * (b1 - b0);
    *h0 = max64(a0, 0), *w0 = max64(b0, 0), *h1 = min64(a1, H), *w1 = min64(b1, W);
    if (*h0 >= *h1 || *w0 >= *w1) return 0;
    if (p->divisor_override) return p->divisor_override;
    return p->count_include_pad ? padded : (*h1 - *h0) * (*w1 - *w0);
}

/* Whether max pooling can take the vectorised rows (column stride 1 or 2,
 * 32-bit flat indices), and the outputs [a, b) whose column taps all lie
 * in [0, W): w0 = ow*sW - padW >= 0 and w0 + dW*(kW-1) < W. */
static bool fast_columns(const nb_pool_params *p, int64_t W, int64_t Wo, int64_t plane, int64_t *a, int64_t *b) {
    int64_t sW = p->stride[1], last = W - 1 - p->dilation[1] * (p->kernel[1] - 1) + p->padding[1];
    *a = (p->padding[1] + sW - 1) / sW;
    *b = last >= 0 ? min64(Wo, last / sW + 1) : 0;
    return (sW == 1 || sW == 2) && plane <= INT32_MAX / 2 && *a < *b; /* room for h0 past H */
}

/* A NaN-aware first-max update (PyTorch's `val > max || isnan(val)`), written
 * as selects so that the fast rows below vectorise instead of branching on
 * data (a mispredicted branch per element costs ~10x on random inputs). */
#define MAX_UPD(T, v, k)                                \
    do {                                                \
        T v_ = (v);                                     \
        int t_ = (v_ > m) | (v_ != v_);                 \
        m = t_ ? v_ : m;                                \
        mi = t_ ? (k) : mi;                             \
    } while (0)

/* Outputs ow in [a, b) of one row whose column taps all lie inside the
 * plane, for a column stride SW of 1 or 2: rows [h0, h1) step dH (already
 * clipped), taps j < kW step dW. Taps run outside and outputs inside, in
 * chunks (maxima in the output row, argmaxes as 32-bit flat indices in a
 * local array: lanes as wide as float's), so that GCC vectorises the inner
 * loop; each output sees its taps in the generic path's order, hence the
 * same first maximum. */
#define MAX_CHUNK 64

/* The 2x2 stride-2 window (the common CNN pool) with both rows h, h+1
 * inside: all taps in registers, which beats the chunked rows on short rows. */


#define NB_TEMPLATE "pool.t.h"
#include "template_floats.h"

/* ---- dispatch (views and windows checked: backend/check/pool.c) ------------- */

/* Both views of one 16-bit dtype: the call runs on float32 copies (half.c). */
static bool is16(const nb_kview *a, const nb_kview *b) { return nb_dtype_is_16bit(a->dtype) && b->dtype == a->dtype; }

/* Runs fn32/fn64 over the N*C planes; a plane's cost is about its input size. */
static nb_status launch(const nb_kview *o, const nb_kview *i, pool_job *j, nb_cpu_range_fn f32,
                        nb_cpu_range_fn f64) {
    j->H = i->shape[2], j->W = i->shape[3], j->Ho = o->shape[2], j->Wo = o->shape[3];
    int64_t planes = o->shape[0] * o->shape[1];
    int64_t cost = max64(j->H * j->W, j->Ho * j->Wo);
    nb_cpu_parallel_for(planes, NB_CPU_GRAIN / (cost ? cost : 1) + 1, o->dtype == NB_F32 ? f32 : f64, j);
    return NB_OK;
}

nb_status nb_cpu_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices, const nb_kview *x,
                            const nb_pool_params *p) {
    if (is16(out, x)) return nb_cpu_pool16(be, NB_CPU_POOL_MAX, out, x, indices, p);
    pool_job j = {.p = p, .out = out->data, .in = x->data, .idx = indices ? indices->data : NULL};
    return launch(out, x, &j, maxpool_fwd_f32, maxpool_fwd_f64);
}

nb_status nb_cpu_max_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                     const nb_kview *indices) {
    if (is16(gx, gy)) return nb_cpu_pool16(be, NB_CPU_POOL_MAX_BACKWARD, gx, gy, indices, NULL);
    pool_job j = {.out = gx->data, .in = gy->data, .cidx = indices->data};
    return launch(gy, gx, &j, maxpool_bwd_f32, maxpool_bwd_f64);
}

nb_status nb_cpu_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_pool_params *p) {
    if (is16(out, x)) return nb_cpu_pool16(be, NB_CPU_POOL_AVG, out, x, NULL, p);
    pool_job j = {.p = p, .out = out->data, .in = x->data};
    return launch(out, x, &j, avgpool_fwd_f32, avgpool_fwd_f64);
}

nb_status nb_cpu_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                     const nb_pool_params *p) {
    if (is16(gx, gy)) return nb_cpu_pool16(be, NB_CPU_POOL_AVG_BACKWARD, gx, gy, NULL, p);
    pool_job j = {.p = p, .out = gx->data, .in = gy->data};
    return launch(gy, gx, &j, avgpool_bwd_f32, avgpool_bwd_f64);
}

nb_status nb_cpu_adaptive_avg_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *x) {
    if (is16(out, x)) return nb_cpu_pool16(be, NB_CPU_POOL_ADAPTIVE_AVG, out, x, NULL, NULL);
    pool_job j = {.out = out->data, .in = x->data};
    return launch(out, x, &j, adavg_fwd_f32, adavg_fwd_f64);
}

nb_status nb_cpu_adaptive_avg_pool2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy) {
    if (is16(gx, gy)) return nb_cpu_pool16(be, NB_CPU_POOL_ADAPTIVE_AVG_BACKWARD, gx, gy, NULL, NULL);
    pool_job j = {.out = gx->data, .in = gy->data};
    return launch(gy, gx, &j, adavg_bwd_f32, adavg_bwd_f64);
}

nb_status nb_cpu_adaptive_max_pool2d(nb_backend *be, const nb_kview *out, const nb_kview *indices,
                                     const nb_kview *x) {
    if (is16(out, x)) return nb_cpu_pool16(be, NB_CPU_POOL_ADAPTIVE_MAX, out, x, indices, NULL);
    pool_job j = {.out = out->data, .in = x->data, .idx = indices ? indices->data : NULL};
    return launch(out, x, &j, admax_fwd_f32, admax_fwd_f64);
}
