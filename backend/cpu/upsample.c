/* upsample.c - CPU F.interpolate on x [N, C, H, W] -> [N, C, Ho, Wo]
 * (contiguous; float32/float64), modes nearest and bilinear, and their
 * backward. Source indices follow PyTorch's UpSample.h:
 *   nearest (legacy): src = min(floor(dst * (float)in/out), in - 1), with
 *     in == out the identity and out == 2*in giving dst >> 1;
 *   bilinear: align_corners: src = dst * (in-1)/(out-1) (0 when out == 1);
 *     otherwise src = max((dst + 0.5) * in/out - 0.5, 0); i0 = floor(src)
 *     clamped to in-1, i1 = i0 + (i0 < in-1), lambda1 = src - i0, lambda0 =
 *     1 - lambda1; computed in the tensor's dtype as PyTorch's CPU kernel does.
 * Per-axis index and weight tables are built once per call (in a caching
 * allocator workspace). Threads split the N*C planes; the backward zeroes a
 * plane of gx and scatters into it in output order from one thread, so it
 * needs no atomics and gives the same bits for any thread count.
 */
#include <math.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

/* Source taps of one output index along an axis: value = l0*x[i0] + l1*x[i1]. */
typedef struct up_tap {
    int64_t i0, i1;
    double l0, l1; /* in the dtype's precision, stored as double */
} up_tap;

typedef struct up_job {
    char *dst;       /* out (forward) or gx (backward) */
    const char *src; /* x (forward) or gy (backward) */
    nb_dtype dt;
    int64_t H, W, Ho, Wo;
    const up_tap *th, *tw; /* Ho and Wo entries */
    bool bilinear;
} up_job;

static int64_t nearest_src(int64_t dst, int64_t in, int64_t out) {
    if (out == in) return dst;
    if (out == 2 * in) return dst >> 1;
    float scale = (float)in / (float)out;
    int64_t s = (int64_t)floorf((float)dst * scale);
    return s < in - 1 ? s : in - 1;
}

#define T float
#define S f32
#define FLOOR floorf
#include "upsample_tap.t.h"
#define T double
#define S f64
#define FLOOR floor
#include "upsample_tap.t.h"

static void fill_taps(up_tap *t, int64_t in, int64_t out, nb_dtype dt, bool bilinear, bool align) {
    for (int64_t d = 0; d < out; d++) {
        if (!bilinear) {
            int64_t s = nearest_src(d, in, out);
            t[d] = (up_tap){s, s, 1, 0};
        } else {
            t[d] = dt == NB_F32 ? linear_tap_f32(d, in, out, align) : linear_tap_f64(d, in, out, align);
        }
    }
}

#define NB_TEMPLATE "upsample.t.h"
#include "template_floats.h"

static nb_status up_run(nb_backend *be, const nb_kview *xside, const nb_kview *yside, char *dst,
                        const char *src, bool bilinear, bool align, bool backward) {
    up_job j = {.dst = dst, .src = src, .dt = xside->dtype, .H = xside->shape[2], .W = xside->shape[3],
                .Ho = yside->shape[2], .Wo = yside->shape[3], .bilinear = bilinear};
    int64_t planes = xside->shape[0] * xside->shape[1];
    if (planes == 0) return NB_OK;
    if (j.Ho * j.Wo == 0 || j.H * j.W == 0) { /* nothing to read: gx is all zeros */
        if (backward) memset(dst, 0, nb_dtype_size(j.dt) * (size_t)(planes * j.H * j.W));
        return NB_OK;
    }
    void *ws_block;
    size_t bytes = sizeof(up_tap) * (size_t)(j.Ho + j.Wo);
    up_tap *taps = nb_alloc_raw(be, bytes, nb_backend_current_stream(be), &ws_block);
    if (!taps) return nb_last_status();
    fill_taps(taps, j.H, j.Ho, j.dt, bilinear, align);
    fill_taps(taps + j.Ho, j.W, j.Wo, j.dt, bilinear, align);
    j.th = taps, j.tw = taps + j.Ho;
    int64_t work = (j.Ho * j.Wo + j.H * j.W) * (bilinear ? 4 : 1);
    bool f32 = j.dt == NB_F32;
    nb_cpu_range_fn fn = backward ? (f32 ? up_bwd_f32 : up_bwd_f64) : (f32 ? up_fwd_f32 : up_fwd_f64);
    nb_cpu_parallel_for(planes, NB_CPU_GRAIN / work + 1, fn, &j);
    nb_free_raw(be, ws_block);
    return NB_OK;
}

nb_status nb_cpu_upsample2d(nb_backend *be, const nb_kview *out, const nb_kview *x, bool bilinear,
                            bool align_corners) {
    return up_run(be, x, out, out->data, x->data, bilinear, align_corners, false);
}

nb_status nb_cpu_upsample2d_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, bool bilinear,
                                     bool align_corners) {
    return up_run(be, gx, gy, gx->data, gy->data, bilinear, align_corners, true);
}
