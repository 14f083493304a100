/* cuda_cnn_slots.c - checks and times the CUDA backend's CNN-family slots
 * (conv, pool, batch_norm, upsample, layer_norm; backend/cuda/) directly
 * through the backend interface, at the training hot-path shapes (the MNIST
 * CNN, BERT's layer norms) and at edge geometries the op harness does not
 * reach ('same' and cropped padding, overlapping max windows with NaNs, long
 * and unaligned rows). Each case runs on the CPU backend (the reference)
 * and twice on cuda:0 with every output pre-filled with NaN (so an element
 * left unwritten shows), compares the first GPU result with the CPU's
 * (max |gpu - cpu| / max |cpu|), the two GPU results bit for bit, and times
 * the GPU slot (host clock over repeated calls, then a synchronize).
 *
 *   cuda_cnn_slots [--reps N] [--self-test (the CPU plays the device)]
 * prints one line per case; exit status 1 if any case fails, 0 (with a
 * note) when there is no CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nabla.h"
#include "nb_backend_util.h"

#define MAXB 12

typedef struct buf {
    nb_dtype dt;
    int ndim;
    int64_t shape[4], n;
    double *init;   /* pristine values (as double) */
    void *h, *d;    /* CPU working copy, device copy */
    void *blk;      /* device block */
    bool out;       /* compared after the run */
    double tol;     /* output tolerance (relative to the reference's max |.|) */
} buf;

typedef struct ctx {
    const char *name;
    buf b[MAXB];
    int nb;
    /* runs the slot(s) on be with the host (dev false) or device pointers */
    nb_status (*call)(nb_backend *be, struct ctx *c, bool dev);
    int64_t p[16];  /* case parameters */
    double f[4];
    nb_conv_params conv;
    nb_pool_params pool;
} ctx;

static nb_backend *cpu, *gpu;
static int reps = 20, failures;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static size_t esize(nb_dtype dt) { return nb_dtype_size(dt); }

/* kind: 0 NaN (outputs), 1 normal, 2 positive (variances), 3 zeros, 4 int64 indices (set later) */
static buf *add(ctx *c, nb_dtype dt, int ndim, const int64_t *shape, int kind, bool out, double tol) {
    buf *b = &c->b[c->nb++];
    memset(b, 0, sizeof *b);
    b->dt = dt, b->ndim = ndim, b->out = out, b->tol = tol, b->n = 1;
    for (int i = 0; i < ndim; i++) b->shape[i] = shape[i], b->n *= shape[i];
    b->init = malloc(sizeof(double) * (size_t)(b->n ? b->n : 1));
    b->h = malloc(esize(dt) * (size_t)(b->n ? b->n : 1));
    for (int64_t i = 0; i < b->n; i++)
        b->init[i] = kind == 0 ? NAN : kind == 1 ? nrand() : kind == 2 ? 0.5 + urand() : 0;
    return b;
}

static void put(const buf *b, void *dst) {
    for (int64_t i = 0; i < b->n; i++) {
        if (b->dt == NB_F32) ((float *)dst)[i] = (float)b->init[i];
        else if (b->dt == NB_F64) ((double *)dst)[i] = b->init[i];
        else ((int64_t *)dst)[i] = (int64_t)b->init[i];
    }
}
static double get(const buf *b, const void *src, int64_t i) {
    if (b->dt == NB_F32) return ((const float *)src)[i];
    if (b->dt == NB_F64) return ((const double *)src)[i];
    return (double)((const int64_t *)src)[i];
}

static nb_kview view(const buf *b, bool dev) {
    nb_kview v;
    memset(&v, 0, sizeof v);
    v.data = dev ? b->d : b->h, v.dtype = b->dt, v.ndim = b->ndim;
    int64_t st = 1;
    for (int i = b->ndim - 1; i >= 0; i--) v.shape[i] = b->shape[i], v.strides[i] = st, st *= b->shape[i];
    return v;
}

static bool upload_all(ctx *c) {
    for (int i = 0; i < c->nb; i++) {
        buf *b = &c->b[i];
        size_t bytes = esize(b->dt) * (size_t)b->n;
        if (!b->d) {
            b->d = nb_alloc_raw(gpu, bytes ? bytes : 1, nb_backend_current_stream(gpu), &b->blk);
            if (!b->d) return false;
        }
        void *tmp = malloc(bytes ? bytes : 1);
        put(b, tmp);
        nb_status st = gpu->iface->memcpy_h2d(gpu, b->d, tmp, bytes, NULL);
        if (st == NB_OK) st = gpu->iface->synchronize(gpu);
        free(tmp);
        if (st != NB_OK) return false;
    }
    return true;
}

static void *download(const buf *b) {
    size_t bytes = esize(b->dt) * (size_t)b->n;
    void *tmp = malloc(bytes ? bytes : 1);
    if (gpu->iface->memcpy_d2h(gpu, tmp, b->d, bytes, NULL) != NB_OK || gpu->iface->synchronize(gpu) != NB_OK) {
        free(tmp);
        return NULL;
    }
    return tmp;
}

static void run_case(ctx *c) {
    char why[256] = "";
    double worst = 0, us = 0;
    bool ok = true, same = true;
    for (int i = 0; i < c->nb; i++) put(&c->b[i], c->b[i].h);
    if (c->call(cpu, c, false) != NB_OK) {
        snprintf(why, sizeof why, "cpu: %s", nb_last_error());
        ok = false;
        goto done;
    }
    void *r1[MAXB] = {0}, *r2[MAXB] = {0};
    for (int pass = 0; pass < 2 && ok; pass++) {
        if (!upload_all(c) || c->call(gpu, c, true) != NB_OK || gpu->iface->synchronize(gpu) != NB_OK) {
            snprintf(why, sizeof why, "cuda: %s", nb_last_error());
            ok = false;
            break;
        }
        for (int i = 0; i < c->nb; i++)
            if (c->b[i].out) (pass ? r2 : r1)[i] = download(&c->b[i]);
    }
    for (int i = 0; i < c->nb && ok; i++) {
        buf *b = &c->b[i];
        if (!b->out) continue;
        if (!r1[i] || !r2[i]) {
            snprintf(why, sizeof why, "download failed: %s", nb_last_error());
            ok = false;
            break;
        }
        same &= memcmp(r1[i], r2[i], esize(b->dt) * (size_t)b->n) == 0;
        double maxref = 0, maxdiff = 0;
        int64_t bad = -1;
        for (int64_t k = 0; k < b->n; k++) {
            double r = get(b, b->h, k);
            if (isfinite(r) && fabs(r) > maxref) maxref = fabs(r);
        }
        for (int64_t k = 0; k < b->n; k++) {
            double r = get(b, b->h, k), g = get(b, r1[i], k);
            if (isnan(r) || isnan(g) || isinf(r) || isinf(g)) {
                if (!(isnan(r) && isnan(g)) && r != g && bad < 0) bad = k;
                continue;
            }
            if (fabs(g - r) > maxdiff) maxdiff = fabs(g - r);
        }
        double rel = maxdiff / (maxref > 0 ? maxref : 1);
        if (rel > worst) worst = rel;
        if (bad >= 0) {
            snprintf(why, sizeof why, "output %d element %lld: cuda %g, cpu %g", i, (long long)bad,
                     get(b, r1[i], bad), get(b, b->h, bad));
            ok = false;
        } else if (rel > b->tol) {
            snprintf(why, sizeof why, "output %d off by %.3g (tolerance %.1g)", i, rel, b->tol);
            ok = false;
        }
    }
    for (int i = 0; i < MAXB; i++) free(r1[i]), free(r2[i]);
    if (ok && !same) snprintf(why, sizeof why, "two runs differ in their bits"), ok = false;
    if (ok) {
        c->call(gpu, c, true); /* warm */
        gpu->iface->synchronize(gpu);
        double t0 = now_us();
        for (int r = 0; r < reps; r++) c->call(gpu, c, true);
        gpu->iface->synchronize(gpu);
        us = (now_us() - t0) / reps;
    }
done:
    printf("%-58s %s  err %.2e  %8.1f us%s%s\n", c->name, ok ? "ok  " : "FAIL", worst, us, why[0] ? "  " : "", why);
    if (!ok) failures++;
    for (int i = 0; i < c->nb; i++) {
        if (c->b[i].blk) nb_free_raw(gpu, c->b[i].blk);
        free(c->b[i].init), free(c->b[i].h);
    }
    c->nb = 0;
}

#define V(i) view(&c->b[i], dev)

/* ---- layer norm ----------------------------------------------------------------- */

static nb_status ln_fwd(nb_backend *be, ctx *c, bool dev) { /* x, w, b, out, mean, rstd */
    nb_kview x = V(0), w = V(1), b = V(2), o = V(3), m = V(4), r = V(5);
    nb_layer_norm_args a = {&x, c->p[0] ? &w : NULL, c->p[0] ? &b : NULL, 1e-5};
    return nb_kernel_layer_norm(be, &o, &m, &r, &a);
}
static nb_status ln_bwd(nb_backend *be, ctx *c, bool dev) { /* x, w, gy, mean, rstd, gx, gw, gb */
    nb_kview x = V(0), w = V(1), gy = V(2), m = V(3), r = V(4), gx = V(5), gw = V(6), gb = V(7);
    nb_layer_norm_args a = {&x, c->p[0] ? &w : NULL, NULL, 0};
    return nb_kernel_layer_norm_backward(be, &gx, c->p[0] ? &gw : NULL, c->p[0] ? &gb : NULL, &gy, &m, &r, &a);
}

static void case_ln(int64_t R, int64_t M, nb_dtype dt, bool affine) {
    ctx c = {0};
    char name[96];
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    int64_t rm[2] = {R, M}, r1[1] = {R}, m1[1] = {M};
    snprintf(name, sizeof name, "layer_norm [%lld, %lld] %s%s", (long long)R, (long long)M, nb_dtype_name(dt),
             affine ? "" : " no affine");
    c.name = name, c.p[0] = affine, c.call = ln_fwd;
    add(&c, dt, 2, rm, 1, false, 0), add(&c, dt, 1, m1, 1, false, 0), add(&c, dt, 1, m1, 1, false, 0);
    add(&c, dt, 2, rm, 0, true, tol), add(&c, dt, 1, r1, 0, true, tol), add(&c, dt, 1, r1, 0, true, tol);
    run_case(&c);
    /* backward with the forward's statistics computed on the host in double */
    snprintf(name, sizeof name, "layer_norm_backward [%lld, %lld] %s%s", (long long)R, (long long)M,
             nb_dtype_name(dt), affine ? "" : " no affine");
    c.call = ln_bwd;
    buf *x = add(&c, dt, 2, rm, 1, false, 0);
    add(&c, dt, 1, m1, 1, false, 0), add(&c, dt, 2, rm, 1, false, 0);
    buf *mean = add(&c, dt, 1, r1, 3, false, 0), *rstd = add(&c, dt, 1, r1, 3, false, 0);
    for (int64_t i = 0; i < R; i++) {
        double s = 0, q = 0;
        for (int64_t j = 0; j < M; j++) s += x->init[i * M + j];
        s /= (double)M;
        for (int64_t j = 0; j < M; j++) q += (x->init[i * M + j] - s) * (x->init[i * M + j] - s);
        mean->init[i] = dt == NB_F32 ? (float)s : s, rstd->init[i] = 1 / sqrt(q / (double)M + 1e-5);
        if (dt == NB_F32) rstd->init[i] = (float)rstd->init[i];
    }
    add(&c, dt, 2, rm, 0, true, tol), add(&c, dt, 1, m1, 0, true, tol), add(&c, dt, 1, m1, 0, true, tol);
    run_case(&c);
}

/* ---- convolution ---------------------------------------------------------------- */

static nb_status conv_fwd(nb_backend *be, ctx *c, bool dev) { /* x, w, bias, out */
    nb_kview x = V(0), w = V(1), b = V(2), o = V(3);
    return nb_kernel_conv2d(be, &o, &x, &w, c->p[0] ? &b : NULL, &c->conv);
}
static nb_status conv_bwd_in(nb_backend *be, ctx *c, bool dev) { /* gy, w, gx */
    nb_kview gy = V(0), w = V(1), gx = V(2);
    return nb_kernel_conv2d_backward_input(be, &gx, &gy, &w, &c->conv);
}
static nb_status conv_bwd_w(nb_backend *be, ctx *c, bool dev) { /* gy, x, gw, gbias */
    nb_kview gy = V(0), x = V(1), gw = V(2), gb = V(3);
    return nb_kernel_conv2d_backward_weight(be, &gw, c->p[0] ? &gb : NULL, &gy, &x, &c->conv);
}

/* x [n, ci, h, w], w [co, ci/g, kh, kw], out [n, co, ho, wo] as given (so 'same' and cropped outputs work). */
static void case_conv(const char *label, nb_dtype dt, const int64_t *xs, const int64_t *ws, int64_t ho, int64_t wo,
                      nb_conv_params p, bool bias) {
    ctx c = {0};
    char name[128];
    double tol = dt == NB_F32 ? 1e-4 : 1e-11;
    int64_t ys[4] = {xs[0], ws[0], ho, wo}, bs[1] = {ws[0]};
    c.conv = p, c.p[0] = bias;
    snprintf(name, sizeof name, "conv2d %s %s", label, nb_dtype_name(dt));
    c.name = name, c.call = conv_fwd;
    add(&c, dt, 4, xs, 1, false, 0), add(&c, dt, 4, ws, 1, false, 0), add(&c, dt, 1, bs, 1, false, 0);
    add(&c, dt, 4, ys, 0, true, tol);
    run_case(&c);
    snprintf(name, sizeof name, "conv2d_backward_input %s %s", label, nb_dtype_name(dt));
    c.call = conv_bwd_in;
    add(&c, dt, 4, ys, 1, false, 0), add(&c, dt, 4, ws, 1, false, 0), add(&c, dt, 4, xs, 0, true, tol);
    run_case(&c);
    snprintf(name, sizeof name, "conv2d_backward_weight %s %s", label, nb_dtype_name(dt));
    c.call = conv_bwd_w;
    add(&c, dt, 4, ys, 1, false, 0), add(&c, dt, 4, xs, 1, false, 0), add(&c, dt, 4, ws, 0, true, tol);
    add(&c, dt, 1, bs, 0, bias, tol);
    run_case(&c);
}

/* ---- pooling ------------------------------------------------------------------------ */

static nb_status maxp_fwd(nb_backend *be, ctx *c, bool dev) { /* x, out, idx */
    nb_kview x = V(0), o = V(1), i = V(2);
    return c->p[0] ? nb_kernel_adaptive_max_pool2d(be, &o, &i, &x) : nb_kernel_max_pool2d(be, &o, &i, &x, &c->pool);
}
static nb_status maxp_bwd(nb_backend *be, ctx *c, bool dev) { /* gy, idx, gx */
    nb_kview gy = V(0), i = V(1), gx = V(2);
    return nb_kernel_max_pool2d_backward(be, &gx, &gy, &i);
}
static nb_status avgp_fwd(nb_backend *be, ctx *c, bool dev) { /* x, out */
    nb_kview x = V(0), o = V(1);
    return c->p[0] ? nb_kernel_adaptive_avg_pool2d(be, &o, &x) : nb_kernel_avg_pool2d(be, &o, &x, &c->pool);
}
static nb_status avgp_bwd(nb_backend *be, ctx *c, bool dev) { /* gy, gx */
    nb_kview gy = V(0), gx = V(1);
    return c->p[0] ? nb_kernel_adaptive_avg_pool2d_backward(be, &gx, &gy)
                   : nb_kernel_avg_pool2d_backward(be, &gx, &gy, &c->pool);
}

static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil, bool ceil_mode) {
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) o--;
    return o;
}

/* adaptive: p.kernel holds the output size. nan_frac: share of NaN / -inf inputs (max only). */
static void case_pool(const char *label, nb_dtype dt, const int64_t *xs, nb_pool_params p, bool adaptive, bool is_max,
                      double nan_frac) {
    ctx c = {0};
    char name[128];
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    int64_t ho = adaptive ? p.kernel[0] : pool_out(xs[2], p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], p.ceil_mode);
    int64_t wo = adaptive ? p.kernel[1] : pool_out(xs[3], p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], p.ceil_mode);
    int64_t ys[4] = {xs[0], xs[1], ho, wo};
    c.pool = p, c.p[0] = adaptive;
    snprintf(name, sizeof name, "%s%s %s %s", adaptive ? "adaptive_" : "", is_max ? "max_pool2d" : "avg_pool2d", label,
             nb_dtype_name(dt));
    c.name = name, c.call = is_max ? maxp_fwd : avgp_fwd;
    buf *x = add(&c, dt, 4, xs, 1, false, 0);
    for (int64_t i = 0; i < x->n; i++)
        if (urand() < nan_frac) x->init[i] = urand() < 0.5 ? NAN : -INFINITY;
    add(&c, dt, 4, ys, 0, true, tol);
    if (is_max) add(&c, NB_I64, 4, ys, 3, true, 0);
    run_case(&c);
    snprintf(name, sizeof name, "%s%s_backward %s %s", adaptive ? "adaptive_" : "", is_max ? "max_pool2d" : "avg_pool2d",
             label, nb_dtype_name(dt));
    c.call = is_max ? maxp_bwd : avgp_bwd;
    add(&c, dt, 4, ys, 1, false, 0);
    if (is_max) { /* indices from a CPU forward on fresh inputs (duplicates where windows overlap) */
        buf *ix = add(&c, NB_I64, 4, ys, 3, false, 0);
        ctx t = {0};
        t.pool = p, t.p[0] = adaptive;
        buf *tx = add(&t, dt, 4, xs, 1, false, 0);
        add(&t, dt, 4, ys, 0, false, 0), add(&t, NB_I64, 4, ys, 3, false, 0);
        for (int i = 0; i < t.nb; i++) put(&t.b[i], t.b[i].h);
        (void)tx;
        if (maxp_fwd(cpu, &t, false) != NB_OK) fprintf(stderr, "cpu max pool: %s\n", nb_last_error());
        for (int64_t i = 0; i < ix->n; i++) ix->init[i] = (double)((const int64_t *)t.b[2].h)[i];
        for (int i = 0; i < t.nb; i++) free(t.b[i].init), free(t.b[i].h);
    }
    add(&c, dt, 4, xs, 0, true, tol);
    run_case(&c);
}

/* ---- batch norm ---------------------------------------------------------------------- */

static nb_status bn_fwd(nb_backend *be, ctx *c, bool dev) { /* x, w, b, rm, rv, out, smean, sinv */
    nb_kview x = V(0), w = V(1), b = V(2), rm = V(3), rv = V(4), o = V(5), sm = V(6), si = V(7);
    nb_batch_norm_args a = {&x, &w, &b, &rm, &rv, c->p[0], 0.1, 1e-5};
    return nb_kernel_batch_norm(be, &o, &sm, &si, &a);
}
static nb_status bn_bwd(nb_backend *be, ctx *c, bool dev) { /* x, gy, w, smean, sinv, rm, rv, gx, gw, gb */
    nb_kview x = V(0), gy = V(1), w = V(2), sm = V(3), si = V(4), rm = V(5), rv = V(6), gx = V(7), gw = V(8), gb = V(9);
    nb_batch_norm_args a = {&x, &w, NULL, &rm, &rv, c->p[0], 0.1, 1e-5};
    return nb_kernel_batch_norm_backward(be, &gx, &gw, &gb, &gy, &sm, &si, &a);
}

static void case_bn(int ndim, const int64_t *xs, nb_dtype dt, bool training) {
    ctx c = {0};
    char name[128];
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    int64_t cs[1] = {xs[1]};
    snprintf(name, sizeof name, "batch_norm [%lld, %lld, ...] %d-d %s %s", (long long)xs[0], (long long)xs[1], ndim,
             training ? "training" : "eval", nb_dtype_name(dt));
    c.name = name, c.p[0] = training, c.call = bn_fwd;
    add(&c, dt, ndim, xs, 1, false, 0), add(&c, dt, 1, cs, 1, false, 0), add(&c, dt, 1, cs, 1, false, 0);
    add(&c, dt, 1, cs, 1, training, tol), add(&c, dt, 1, cs, 2, training, tol); /* running stats: updated */
    add(&c, dt, ndim, xs, 0, true, tol), add(&c, dt, 1, cs, 0, training, tol), add(&c, dt, 1, cs, 0, training, tol);
    run_case(&c);
    snprintf(name, sizeof name, "batch_norm_backward [%lld, %lld, ...] %d-d %s %s", (long long)xs[0],
             (long long)xs[1], ndim, training ? "training" : "eval", nb_dtype_name(dt));
    c.call = bn_bwd;
    add(&c, dt, ndim, xs, 1, false, 0), add(&c, dt, ndim, xs, 1, false, 0), add(&c, dt, 1, cs, 1, false, 0);
    add(&c, dt, 1, cs, 1, false, 0), add(&c, dt, 1, cs, 2, false, 0), add(&c, dt, 1, cs, 1, false, 0);
    add(&c, dt, 1, cs, 2, false, 0);
    add(&c, dt, ndim, xs, 0, true, tol), add(&c, dt, 1, cs, 0, true, tol), add(&c, dt, 1, cs, 0, true, tol);
    run_case(&c);
}

/* ---- upsample ---------------------------------------------------------------------------- */

static nb_status up_fwd(nb_backend *be, ctx *c, bool dev) { /* x, out */
    nb_kview x = V(0), o = V(1);
    return nb_kernel_upsample2d(be, &o, &x, c->p[0], c->p[1]);
}
static nb_status up_bwd(nb_backend *be, ctx *c, bool dev) { /* gy, gx */
    nb_kview gy = V(0), gx = V(1);
    return nb_kernel_upsample2d_backward(be, &gx, &gy, c->p[0], c->p[1]);
}

static void case_up(const int64_t *xs, int64_t ho, int64_t wo, bool bilinear, bool align, nb_dtype dt) {
    ctx c = {0};
    char name[128];
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    int64_t ys[4] = {xs[0], xs[1], ho, wo};
    snprintf(name, sizeof name, "upsample2d %lldx%lld -> %lldx%lld %s%s %s", (long long)xs[2], (long long)xs[3],
             (long long)ho, (long long)wo, bilinear ? "bilinear" : "nearest", align ? " align_corners" : "",
             nb_dtype_name(dt));
    c.name = name, c.p[0] = bilinear, c.p[1] = align, c.call = up_fwd;
    add(&c, dt, 4, xs, 1, false, 0), add(&c, dt, 4, ys, 0, true, tol);
    run_case(&c);
    snprintf(name, sizeof name, "upsample2d_backward %lldx%lld -> %lldx%lld %s%s %s", (long long)xs[2],
             (long long)xs[3], (long long)ho, (long long)wo, bilinear ? "bilinear" : "nearest",
             align ? " align_corners" : "", nb_dtype_name(dt));
    c.call = up_bwd;
    add(&c, dt, 4, ys, 1, false, 0), add(&c, dt, 4, xs, 0, true, tol);
    run_case(&c);
}

int main(int argc, char **argv) {
    bool self_test = false; /* --self-test: the CPU plays the device (checks this program) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--self-test")) self_test = true;
    }
    cpu = nb_backend_get(NB_CPU);
    gpu = self_test ? cpu : nb_backend_get(NB_CUDA(0));
    if (!gpu) {
        printf("cuda_cnn_slots: no CUDA device (%s): nothing to check\n", nb_last_error());
        return 0;
    }
    printf("cuda_cnn_slots on %s\n", gpu->iface->info ? gpu->iface->info(gpu) : "cuda:0");
    const nb_dtype dts[2] = {NB_F32, NB_F64};

    /* BERT layer norms (hot), then the other row layouts: unaligned width, long rows. */
    case_ln(512, 768, NB_F32, true);
    case_ln(4096, 768, NB_F32, true);
    case_ln(512, 768, NB_F64, true);
    case_ln(37, 1030, NB_F32, true);  /* scalar loads, rows past the register cache */
    case_ln(64, 2048, NB_F32, false); /* vector loads, rows past the register cache */
    case_ln(130, 20, NB_F64, true);   /* gw/gb over three row chunks */

    for (int t = 0; t < 2; t++) {
        nb_dtype dt = dts[t];
        nb_conv_params p1 = {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
        /* the MNIST CNN (hot) */
        case_conv("MNIST conv1 [64, 1, 28, 28] * [32, 1, 3, 3]", dt, (int64_t[]){64, 1, 28, 28},
                  (int64_t[]){32, 1, 3, 3}, 26, 26, p1, true);
        case_conv("MNIST conv2 [64, 32, 26, 26] * [64, 32, 3, 3]", dt, (int64_t[]){64, 32, 26, 26},
                  (int64_t[]){64, 32, 3, 3}, 24, 24, p1, true);
        /* 'same' with an even kernel: one more row/column of padding at the end (explicit padding path) */
        nb_conv_params ps = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
        case_conv("same 4x4 [2, 3, 7, 6]", dt, (int64_t[]){2, 3, 7, 6}, (int64_t[]){4, 3, 4, 4}, 7, 6, ps, true);
        /* a smaller output than cuDNN's (conv_transpose's output_padding >= stride): cropped input side */
        nb_conv_params pc = {.stride = {2, 2}, .padding = {1, 1}, .dilation = {3, 1}, .groups = 1};
        case_conv("cropped stride 2 dilation 3 [2, 4, 11, 9]", dt, (int64_t[]){2, 4, 11, 9}, (int64_t[]){6, 4, 3, 3},
                  3, 5, pc, false);
        nb_conv_params pg = {.stride = {2, 1}, .padding = {1, 0}, .dilation = {2, 1}, .groups = 2};
        case_conv("groups 2 stride (2, 1) dilation (2, 1) [3, 4, 9, 7]", dt, (int64_t[]){3, 4, 9, 7},
                  (int64_t[]){6, 2, 3, 2}, 4, 6, pg, true);

        nb_pool_params k2 = {.kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1}};
        case_pool("2x2 MNIST [64, 64, 24, 24]", dt, (int64_t[]){64, 64, 24, 24}, k2, false, true, 0);
        nb_pool_params k3 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1},
                             .ceil_mode = true};
        case_pool("3x3 s2 p1 ceil, NaN/-inf [4, 3, 13, 11]", dt, (int64_t[]){4, 3, 13, 11}, k3, false, true, 0.15);
        nb_pool_params kd = {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 3}};
        case_pool("3x2 s(1,2) p1 dilation (2,3) [2, 3, 9, 12]", dt, (int64_t[]){2, 3, 9, 12}, kd, false, true, 0);
        case_pool("3x3 s2 p1 ceil", dt, (int64_t[]){4, 3, 13, 11}, k3, false, false, 0);
        nb_pool_params kx = k3;
        kx.count_include_pad = true;
        case_pool("3x3 s2 p1 ceil count_include_pad", dt, (int64_t[]){4, 3, 13, 11}, kx, false, false, 0);
        kx.divisor_override = 5;
        case_pool("3x3 s2 p1 ceil divisor_override 5", dt, (int64_t[]){4, 3, 13, 11}, kx, false, false, 0);
        nb_pool_params ad = {.kernel = {5, 4}};
        case_pool("13x11 -> 5x4", dt, (int64_t[]){4, 3, 13, 11}, ad, true, false, 0);
        case_pool("13x11 -> 5x4, NaN/-inf", dt, (int64_t[]){4, 3, 13, 11}, ad, true, true, 0.1);

        case_bn(4, (int64_t[]){64, 32, 26, 26}, dt, true);
        case_bn(4, (int64_t[]){64, 32, 26, 26}, dt, false);
        case_bn(2, (int64_t[]){16, 40}, dt, true);
        case_bn(3, (int64_t[]){1, 5, 1}, dt, true); /* M = 1: unbiased variance NaN */

        case_up((int64_t[]){2, 3, 7, 5}, 13, 11, false, false, dt);
        case_up((int64_t[]){2, 3, 7, 5}, 14, 10, false, false, dt);
        case_up((int64_t[]){2, 3, 7, 5}, 13, 11, true, false, dt);
        case_up((int64_t[]){2, 3, 7, 5}, 13, 11, true, true, dt);
        case_up((int64_t[]){2, 3, 7, 5}, 3, 2, true, false, dt);
        case_up((int64_t[]){2, 3, 7, 5}, 7, 1, true, true, dt);
    }
    printf("cuda_cnn_slots: %d failure%s\n", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
