/* cuda_reduce_slots.c - checks and times the CUDA backend's reduction-family
 * slots (reduce, argmax/argmin, scan, sort, gather/scatter, index_select,
 * index_add, index_copy, where, nonzero, softmax, cross-entropy;
 * backend/cuda/) directly through the backend interface, at the training
 * hot-path shapes (bias gradients, loss sums, BERT's 30522-row embedding and
 * vocabulary, attention-sized softmax rows) and at the shapes that reach the
 * kernels' other paths (split reductions, column and row modes, strided and
 * transposed views, long sort lines, NaNs and ties, several nonzero blocks),
 * which the op harness's small cases do not. Each case runs on the CPU
 * backend (the reference) and twice on cuda:0 with every output pre-filled
 * (NaN, or a sentinel for integers, so an element left unwritten shows),
 * compares the first GPU result with the CPU's (floats: max |gpu - cpu| /
 * max |cpu|; integers and indices exactly), the two GPU results bit for
 * bit, and times the GPU slot (host clock over repeated calls, then a
 * synchronize). A few cases pass a bad index or target and expect
 * NB_ERR_INVALID_ARG from the slot or the next synchronize.
 *
 *   cuda_reduce_slots [--reps N] [--self-test (the CPU plays the device)]
 * prints one line per case; exit status 1 if any case fails, 0 (with a
 * note) when there is no CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nabla.h"
#include "nb_backend_util.h"

#define MAXB 8
#define SENTINEL_I (-1234567.0) /* prefill of integer outputs */

typedef struct buf {
    nb_dtype dt;
    int ndim;
    int64_t shape[NB_MAX_DIMS], n;
    int vnd; /* > 0: the kernel sees this view of the storage instead */
    int64_t vshape[NB_MAX_DIMS], vstr[NB_MAX_DIMS];
    double *init; /* pristine values (as double) */
    void *h, *d;  /* CPU working copy, device copy */
    void *blk;    /* device block */
    bool out;     /* compared after the run */
    double tol;   /* output tolerance (relative to the reference's max |.|); 0: exact */
} buf;

typedef struct ctx {
    const char *name;
    buf b[MAXB];
    int nb;
    nb_status (*call)(nb_backend *be, struct ctx *c, bool dev);
    int64_t p[8]; /* case parameters */
    double f[2];
} ctx;

static nb_backend *cpu, *gpu;
static int reps = 20, failures;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }
static int64_t irand(int64_t n) { return (int64_t)(urand() * (double)n) % (n > 0 ? n : 1); }

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static bool is_fl(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64; }

/* kind: 0 output prefill (NaN / sentinel), 1 normal, 2 near 1 (products), 3 zeros, 4 set by the case,
 * 5 small integers in [-3, 3] (ties), 6 bits (0/1) */
static buf *add(ctx *c, nb_dtype dt, int ndim, const int64_t *shape, int kind, bool out, double tol) {
    buf *b = &c->b[c->nb++];
    memset(b, 0, sizeof *b);
    b->dt = dt, b->ndim = ndim, b->out = out, b->tol = tol, b->n = 1;
    for (int i = 0; i < ndim; i++) b->shape[i] = shape[i], b->n *= shape[i];
    b->init = malloc(sizeof(double) * (size_t)(b->n ? b->n : 1));
    b->h = malloc(nb_dtype_size(dt) * (size_t)(b->n ? b->n : 1));
    for (int64_t i = 0; i < b->n; i++) {
        double v = kind == 0 ? (is_fl(dt) ? NAN : SENTINEL_I) : kind == 1 ? nrand() : kind == 2 ? 0.9 + 0.2 * urand()
                 : kind == 5 ? (double)(irand(7) - 3) : kind == 6 ? (double)(urand() < 0.5) : 0;
        if (kind == 1 && !is_fl(dt)) v = (double)(irand(201) - 100);
        if ((dt == NB_U8 || dt == NB_BOOL) && kind != 0) v = dt == NB_BOOL ? (double)(v != 0) : fabs(fmod(v, 200));
        b->init[i] = v;
    }
    return b;
}

/* The kernel sees the storage through this view (strides in elements). */
static void set_view(buf *b, int ndim, const int64_t *shape, const int64_t *strides) {
    b->vnd = ndim;
    for (int i = 0; i < ndim; i++) b->vshape[i] = shape[i], b->vstr[i] = strides[i];
}

static void put(const buf *b, void *dst) {
    for (int64_t i = 0; i < b->n; i++) {
        double v = b->init[i];
        switch (b->dt) {
        case NB_F32: ((float *)dst)[i] = (float)v; break;
        case NB_F64: ((double *)dst)[i] = v; break;
        case NB_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
        case NB_I64: ((int64_t *)dst)[i] = (int64_t)v; break;
        default: ((uint8_t *)dst)[i] = v == SENTINEL_I ? 0xAB : (uint8_t)(int64_t)v; break;
        }
    }
}
static double get(const buf *b, const void *src, int64_t i) {
    switch (b->dt) {
    case NB_F32: return ((const float *)src)[i];
    case NB_F64: return ((const double *)src)[i];
    case NB_I32: return ((const int32_t *)src)[i];
    case NB_I64: return (double)((const int64_t *)src)[i];
    default: return ((const uint8_t *)src)[i];
    }
}

static nb_kview view(const buf *b, bool dev) {
    nb_kview v;
    memset(&v, 0, sizeof v);
    v.data = dev ? b->d : b->h, v.dtype = b->dt;
    if (b->vnd) {
        v.ndim = b->vnd;
        for (int i = 0; i < b->vnd; i++) v.shape[i] = b->vshape[i], v.strides[i] = b->vstr[i];
        return v;
    }
    v.ndim = b->ndim;
    int64_t st = 1;
    for (int i = b->ndim - 1; i >= 0; i--) v.shape[i] = b->shape[i], v.strides[i] = st, st *= b->shape[i];
    return v;
}

static bool upload_all(ctx *c) {
    for (int i = 0; i < c->nb; i++) {
        buf *b = &c->b[i];
        size_t bytes = nb_dtype_size(b->dt) * (size_t)b->n;
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
    size_t bytes = nb_dtype_size(b->dt) * (size_t)b->n;
    void *tmp = malloc(bytes ? bytes : 1);
    if (gpu->iface->memcpy_d2h(gpu, tmp, b->d, bytes, NULL) != NB_OK || gpu->iface->synchronize(gpu) != NB_OK) {
        free(tmp);
        return NULL;
    }
    return tmp;
}

static void release(ctx *c) {
    for (int i = 0; i < c->nb; i++) {
        if (c->b[i].blk) nb_free_raw(gpu, c->b[i].blk);
        free(c->b[i].init), free(c->b[i].h);
    }
    c->nb = 0;
}

static void run_case(ctx *c) {
    char why[256] = "";
    double worst = 0, us = 0;
    bool ok = true, same = true;
    void *r1[MAXB] = {0}, *r2[MAXB] = {0};
    for (int i = 0; i < c->nb; i++) put(&c->b[i], c->b[i].h);
    if (c->call(cpu, c, false) != NB_OK) {
        snprintf(why, sizeof why, "cpu: %s", nb_last_error());
        ok = false;
        goto done;
    }
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
        same &= memcmp(r1[i], r2[i], nb_dtype_size(b->dt) * (size_t)b->n) == 0;
        double maxref = 0, maxdiff = 0;
        int64_t bad = -1;
        for (int64_t k = 0; k < b->n; k++) {
            double r = get(b, b->h, k);
            if (isfinite(r) && fabs(r) > maxref) maxref = fabs(r);
        }
        for (int64_t k = 0; k < b->n && bad < 0; k++) {
            double r = get(b, b->h, k), g = get(b, r1[i], k);
            if (b->tol == 0 || !isfinite(r) || !isfinite(g)) {
                if (!(isnan(r) && isnan(g)) && r != g) bad = k;
                continue;
            }
            if (fabs(g - r) > maxdiff) maxdiff = fabs(g - r);
        }
        double rel = maxdiff / (maxref > 0 ? maxref : 1);
        if (rel > worst) worst = rel;
        if (bad >= 0) {
            snprintf(why, sizeof why, "output %d element %lld: cuda %.9g, cpu %.9g", i, (long long)bad,
                     get(b, r1[i], bad), get(b, b->h, bad));
            ok = false;
        } else if (rel > b->tol) {
            snprintf(why, sizeof why, "output %d off by %.3g (tolerance %.1g)", i, rel, b->tol);
            ok = false;
        }
    }
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
    for (int i = 0; i < MAXB; i++) free(r1[i]), free(r2[i]);
    printf("%-66s %s  err %.2e  %9.1f us%s%s\n", c->name, ok ? "ok  " : "FAIL", worst, us, why[0] ? "  " : "", why);
    fflush(stdout);
    if (!ok) failures++;
    release(c);
}

/* A bad index or target: NB_ERR_INVALID_ARG from the slot (CPU) or from the
 * next synchronize (a device backend), then a clean stream. */
static void run_error_case(ctx *c) {
    char why[256] = "";
    for (int i = 0; i < c->nb; i++) put(&c->b[i], c->b[i].h);
    bool ok = upload_all(c);
    nb_status st = ok ? c->call(gpu, c, true) : NB_ERR_DEVICE;
    if (ok && st == NB_OK) st = gpu->iface->synchronize(gpu);
    if (!ok) snprintf(why, sizeof why, "upload failed: %s", nb_last_error());
    else if (st != NB_ERR_INVALID_ARG) snprintf(why, sizeof why, "expected an invalid-argument error, got %d", (int)st), ok = false;
    else snprintf(why, sizeof why, "(%s)", nb_last_error());
    if (ok && gpu->iface->synchronize(gpu) != NB_OK)
        snprintf(why, sizeof why, "the error was not cleared: %s", nb_last_error()), ok = false;
    printf("%-66s %s  %s\n", c->name, ok ? "ok  " : "FAIL", why);
    fflush(stdout);
    if (!ok) failures++;
    release(c);
}

#define V(i) view(&c->b[i], dev)

/* ---- reduce, argmax/argmin --------------------------------------------------------------- */

static nb_status red_call(nb_backend *be, ctx *c, bool dev) { /* x, out */
    nb_kview x = V(0), o = V(1);
    return nb_kernel_reduce(be, (nb_reduce_op)c->p[0], &o, &x, c->f[0]);
}

static const char *const red_names[] = {"sum", "max", "min", "prod"};

/* x [xs] (optionally seen through view vs/vst), out keepdim [os]. */
static void case_red(const char *label, nb_reduce_op op, nb_dtype xdt, nb_dtype odt, int nd, const int64_t *xs,
                     const int64_t *os, double scale, const int64_t *vs, const int64_t *vst, double nan_frac) {
    ctx c = {0};
    char name[160];
    snprintf(name, sizeof name, "reduce %s %s %s -> %s", red_names[op], label, nb_dtype_name(xdt), nb_dtype_name(odt));
    c.name = name, c.call = red_call, c.p[0] = op, c.f[0] = scale;
    buf *x = add(&c, xdt, nd, xs, op == NB_REDUCE_PROD ? 2 : 1, false, 0);
    for (int64_t i = 0; i < x->n && nan_frac > 0; i++)
        if (urand() < nan_frac) x->init[i] = NAN;
    if (vs) set_view(x, nd, vs, vst);
    add(&c, odt, nd, os, 0, true, is_fl(odt) ? (odt == NB_F32 ? 2e-5 : 1e-12) : 0);
    run_case(&c);
}

static nb_status arg_call(nb_backend *be, ctx *c, bool dev) { /* x, values, indices */
    nb_kview x = V(0), v = V(1), i = V(2);
    return c->p[0] ? nb_kernel_argmin(be, &v, &i, &x, (int)c->p[1]) : nb_kernel_argmax(be, &v, &i, &x, (int)c->p[1]);
}

static void case_arg(bool min, nb_dtype dt, int64_t r, int64_t cols, int dim, int kind, double nan_frac) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {r, cols}, os[2] = {dim == 0 ? 1 : r, dim == 0 ? cols : 1};
    snprintf(name, sizeof name, "%s [%lld, %lld] dim %d %s%s%s", min ? "argmin" : "argmax", (long long)r,
             (long long)cols, dim, nb_dtype_name(dt), kind == 5 ? " ties" : "", nan_frac > 0 ? " NaN" : "");
    c.name = name, c.call = arg_call, c.p[0] = min, c.p[1] = dim;
    buf *x = add(&c, dt, 2, xs, kind, false, 0);
    for (int64_t i = 0; i < x->n && nan_frac > 0; i++)
        if (urand() < nan_frac) x->init[i] = NAN;
    add(&c, dt, 2, os, 0, true, 0), add(&c, NB_I64, 2, os, 0, true, 0);
    run_case(&c);
}

/* ---- scan ----------------------------------------------------------------------------------- */

static nb_status scan_call(nb_backend *be, ctx *c, bool dev) { /* x, out, indices */
    nb_kview x = V(0), o = V(1), i = V(2);
    nb_reduce_op op = (nb_reduce_op)c->p[0];
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    return nb_kernel_scan(be, op, &o, ext ? &i : NULL, &x, (int)c->p[1]);
}
static nb_status scanb_call(nb_backend *be, ctx *c, bool dev) { /* g, x, out, indices, gx */
    nb_kview g = V(0), x = V(1), o = V(2), i = V(3), gx = V(4);
    nb_reduce_op op = (nb_reduce_op)c->p[0];
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    return nb_kernel_scan_backward(be, op, &gx, &g, &x, &o, ext ? &i : NULL, (int)c->p[1]);
}

static const char *const scan_names[] = {"cumsum", "cummax", "cummin", "cumprod", "logcumsumexp"};

static void case_scan(nb_reduce_op op, nb_dtype dt, int64_t r, int64_t cols, int dim, int kind) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {r, cols};
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN, fl = is_fl(dt);
    nb_dtype odt = fl || ext ? dt : NB_I64;
    double tol = dt == NB_F32 ? 2e-5 : dt == NB_F64 ? 1e-12 : 0;
    snprintf(name, sizeof name, "scan %s [%lld, %lld] dim %d %s%s", scan_names[op], (long long)r, (long long)cols, dim,
             nb_dtype_name(dt), kind == 5 ? " ties" : "");
    c.name = name, c.call = scan_call, c.p[0] = op, c.p[1] = dim;
    buf *x = add(&c, dt, 2, xs, kind, false, 0);
    if (fl && ext)
        for (int64_t i = 0; i < x->n; i += 97) x->init[i] = NAN;
    add(&c, odt, 2, xs, 0, true, tol), add(&c, NB_I64, 2, xs, 0, ext, 0);
    run_case(&c);
    if (!fl) return;
    /* backward with the CPU forward's out and indices */
    snprintf(name, sizeof name, "scan_backward %s [%lld, %lld] dim %d %s%s", scan_names[op], (long long)r,
             (long long)cols, dim, nb_dtype_name(dt), op == NB_REDUCE_PROD ? " zeros" : "");
    ctx t = {0};
    t.p[0] = op, t.p[1] = dim;
    buf *tx = add(&t, dt, 2, xs, kind, false, 0);
    if (op == NB_REDUCE_PROD)
        for (int64_t i = 0; i < tx->n; i++)
            if (urand() < 0.02) tx->init[i] = 0; /* lines with one and with two zeros */
    add(&t, dt, 2, xs, 0, false, 0), add(&t, NB_I64, 2, xs, 0, false, 0);
    for (int i = 0; i < t.nb; i++) put(&t.b[i], t.b[i].h);
    if (scan_call(cpu, &t, false) != NB_OK) fprintf(stderr, "cpu scan: %s\n", nb_last_error());
    c.call = scanb_call;
    add(&c, dt, 2, xs, 1, false, 0);
    buf *bx = add(&c, dt, 2, xs, 4, false, 0), *bo = add(&c, dt, 2, xs, 4, false, 0);
    buf *bi = add(&c, NB_I64, 2, xs, 4, false, 0);
    for (int64_t i = 0; i < bx->n; i++) {
        bx->init[i] = get(tx, tx->h, i), bo->init[i] = get(&t.b[1], t.b[1].h, i);
        bi->init[i] = get(&t.b[2], t.b[2].h, i);
    }
    add(&c, dt, 2, xs, 0, true, dt == NB_F32 ? 1e-4 : 1e-11);
    release(&t);
    run_case(&c);
}

/* ---- sort ----------------------------------------------------------------------------------- */

static nb_status sort_call(nb_backend *be, ctx *c, bool dev) { /* x, values, indices */
    nb_kview x = V(0), v = V(1), i = V(2);
    return nb_kernel_sort(be, c->p[2] ? &v : NULL, &i, &x, (int)c->p[0], c->p[1] != 0);
}

static void case_sort(nb_dtype dt, int64_t r, int64_t cols, int dim, int64_t k, bool desc, int kind, bool values,
                      bool transposed) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {r, cols}, os[2] = {dim == 0 ? k : r, dim == 0 ? cols : k};
    snprintf(name, sizeof name, "sort [%lld, %lld] dim %d k %lld%s %s%s%s%s", (long long)r, (long long)cols, dim,
             (long long)k, desc ? " descending" : "", nb_dtype_name(dt), kind == 5 ? " ties" : "",
             is_fl(dt) ? " NaN" : "", transposed ? " transposed" : "");
    c.name = name, c.call = sort_call, c.p[0] = dim, c.p[1] = desc, c.p[2] = values;
    buf *x = add(&c, dt, 2, xs, kind, false, 0);
    if (is_fl(dt))
        for (int64_t i = 0; i < x->n; i++) {
            double u = urand();
            if (u < 0.01) x->init[i] = NAN;
            else if (u < 0.02) x->init[i] = u < 0.015 ? -0.0 : 0.0;
            else if (u < 0.03) x->init[i] = u < 0.025 ? INFINITY : -INFINITY;
        }
    if (transposed) { /* storage [cols, r], seen as [r, cols] */
        int64_t st[2] = {1, r};
        set_view(x, 2, xs, st);
    }
    add(&c, dt, 2, os, 0, values, 0), add(&c, NB_I64, 2, os, 0, true, 0);
    run_case(&c);
}

/* ---- gather, scatter ---------------------------------------------------------------------------- */

static nb_status gather_call(nb_backend *be, ctx *c, bool dev) { /* x, index, out */
    nb_kview x = V(0), i = V(1), o = V(2);
    return nb_kernel_gather(be, &o, &x, (int)c->p[0], &i);
}
static nb_status scatter_call(nb_backend *be, ctx *c, bool dev) { /* index, src, out (self) */
    nb_kview i = V(0), s = V(1), o = V(2);
    return nb_kernel_scatter(be, &o, (int)c->p[0], &i, &s, (nb_scatter_mode)c->p[1], c->p[2] != 0);
}

static void case_gather(nb_dtype dt, int64_t r, int64_t cols, int dim, int64_t k, bool bad) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {r, cols}, is[2] = {dim == 0 ? k : r, dim == 0 ? cols : k};
    snprintf(name, sizeof name, "gather [%lld, %lld] dim %d index %lld %s%s", (long long)r, (long long)cols, dim,
             (long long)k, nb_dtype_name(dt), bad ? " (bad index)" : "");
    c.name = name, c.call = gather_call, c.p[0] = dim;
    add(&c, dt, 2, xs, 1, false, 0);
    buf *ix = add(&c, NB_I64, 2, is, 4, false, 0);
    for (int64_t i = 0; i < ix->n; i++) ix->init[i] = (double)irand(xs[dim]);
    if (bad) ix->init[ix->n / 2] = (double)xs[dim];
    add(&c, dt, 2, is, 0, true, 0);
    if (bad) run_error_case(&c);
    else run_case(&c);
}

static const char *const mode_names[] = {"none", "sum", "prod", "mean", "amax", "amin"};

static void case_scatter(nb_dtype dt, nb_scatter_mode mode, bool incl, int64_t r, int64_t cols, int dim, int64_t k,
                         bool bad) {
    ctx c = {0};
    char name[160];
    int64_t os[2] = {r, cols}, is[2] = {dim == 0 ? k : r, dim == 0 ? cols : k};
    snprintf(name, sizeof name, "scatter %s%s [%lld, %lld] dim %d index %lld %s%s", mode_names[mode],
             incl ? "" : " exclude self", (long long)r, (long long)cols, dim, (long long)k, nb_dtype_name(dt),
             bad ? " (bad index)" : "");
    c.name = name, c.call = scatter_call, c.p[0] = dim, c.p[1] = mode, c.p[2] = incl;
    buf *ix = add(&c, NB_I64, 2, is, 4, false, 0);
    for (int64_t i = 0; i < ix->n; i++) ix->init[i] = (double)irand(os[dim] / 2 + 1); /* repeats; some rows untouched */
    if (bad) ix->init[ix->n - 1] = -1;
    add(&c, dt, 2, is, mode == NB_SCATTER_PROD ? 2 : 1, false, 0);
    add(&c, dt, 2, os, mode == NB_SCATTER_PROD ? 2 : 1, true, dt == NB_F32 ? 2e-5 : dt == NB_F64 ? 1e-12 : 0);
    if (bad) run_error_case(&c);
    else run_case(&c);
}

/* ---- index_select, index_add, index_copy, where, nonzero ----------------------------------------- */

static nb_status isel_call(nb_backend *be, ctx *c, bool dev) { /* x, index, out */
    nb_kview x = V(0), i = V(1), o = V(2);
    return nb_kernel_index_select(be, &o, &x, (int)c->p[0], &i);
}
static nb_status iadd_call(nb_backend *be, ctx *c, bool dev) { /* g, index, gx */
    nb_kview g = V(0), i = V(1), gx = V(2);
    return nb_kernel_index_add(be, &gx, (int)c->p[0], &i, &g, c->p[1], false);
}
static nb_status icopy_call(nb_backend *be, ctx *c, bool dev) { /* src, index, out (in place) */
    nb_kview s = V(0), i = V(1), o = V(2);
    return nb_kernel_index_copy(be, &o, (int)c->p[0], &i, &s);
}

/* big [a, size, b] around dim 1 (a or b may be 1), index of k entries in [0, size) with repeats. */
static void case_index(int which, nb_dtype dt, int64_t a, int64_t size, int64_t b, int64_t k, int64_t skip, bool bad) {
    static const char *const names[] = {"index_select", "index_add", "index_copy"};
    ctx c = {0};
    char name[160];
    int64_t bs[3] = {a, size, b}, ss[3] = {a, k, b}, ks[1] = {k};
    snprintf(name, sizeof name, "%s [%lld, %lld, %lld] index %lld %s%s%s", names[which], (long long)a, (long long)size,
             (long long)b, (long long)k, nb_dtype_name(dt), skip >= 0 ? " skip" : "", bad ? " (bad index)" : "");
    c.name = name, c.p[0] = 1, c.p[1] = skip >= 0 ? skip : INT64_MIN;
    c.call = which == 0 ? isel_call : which == 1 ? iadd_call : icopy_call;
    double tol = which == 1 && is_fl(dt) ? (dt == NB_F32 ? 2e-5 : 1e-12) : 0;
    add(&c, dt, 3, which == 0 ? bs : ss, 1, false, 0);
    buf *ix = add(&c, NB_I64, 1, ks, 4, false, 0);
    for (int64_t i = 0; i < k; i++) ix->init[i] = (double)irand(size);
    if (skip >= 0)
        for (int64_t i = 0; i < k; i += 5) ix->init[i] = (double)skip;
    if (bad) ix->init[k / 3] = (double)(size + 7);
    add(&c, dt, 3, which == 0 ? ss : bs, which == 2 ? 1 : 0, true, tol);
    if (bad) run_error_case(&c);
    else run_case(&c);
}

static nb_status where_call(nb_backend *be, ctx *c, bool dev) { /* cond, a, b, out */
    nb_kview cd = V(0), a = V(1), b = V(2), o = V(3);
    return nb_kernel_where(be, &o, &cd, &a, &b);
}

static void case_where(nb_dtype dt, int64_t r, int64_t cols) {
    ctx c = {0};
    char name[160];
    int64_t s2[2] = {r, cols}, s1[1] = {cols}, bst[2] = {0, 1}, ast[2] = {0, 0};
    snprintf(name, sizeof name, "where [%lld, %lld] %s (a scalar, b broadcast rows)", (long long)r, (long long)cols,
             nb_dtype_name(dt));
    c.name = name, c.call = where_call;
    add(&c, NB_BOOL, 2, s2, 6, false, 0);
    buf *a = add(&c, dt, 1, (int64_t[]){1}, 1, false, 0), *b = add(&c, dt, 1, s1, 1, false, 0);
    set_view(a, 2, s2, ast), set_view(b, 2, s2, bst);
    add(&c, dt, 2, s2, 0, true, 0);
    run_case(&c);
}

static nb_status nz_call(nb_backend *be, ctx *c, bool dev) { /* x, out */
    nb_kview x = V(0), o = V(1);
    int64_t count = -1;
    nb_status st = nb_kernel_nonzero(be, NULL, &count, &x);
    if (st != NB_OK) return st;
    if (count != c->p[0])
        return nb_set_error(NB_ERR_INVALID_ARG, "nonzero counted %lld, the CPU %lld", (long long)count,
                            (long long)c->p[0]);
    return nb_kernel_nonzero(be, &o, NULL, &x);
}

/* x [r, cols] (transposed view when asked), a share `dens` nonzero (floats: NaN and -0.0 too). */
static void case_nonzero(nb_dtype dt, int64_t r, int64_t cols, double dens, bool flat, bool transposed) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {r, cols}, tst[2] = {1, r};
    snprintf(name, sizeof name, "nonzero [%lld, %lld] %s density %.2f%s%s", (long long)r, (long long)cols,
             nb_dtype_name(dt), dens, flat ? " flat" : "", transposed ? " transposed" : "");
    c.name = name, c.call = nz_call;
    buf *x = add(&c, dt, 2, xs, 4, false, 0);
    int64_t count = 0;
    for (int64_t i = 0; i < x->n; i++) {
        double u = urand();
        x->init[i] = u < dens ? (is_fl(dt) && u < dens * 0.1 ? NAN : dt == NB_BOOL ? 1 : 1 + irand(3))
                              : (is_fl(dt) && u > 0.99 ? -0.0 : 0);
        count += u < dens;
    }
    if (transposed) set_view(x, 2, xs, tst);
    c.p[0] = count;
    int64_t os[2] = {count, 2};
    add(&c, NB_I64, flat ? 1 : 2, os, 0, true, 0);
    run_case(&c);
}

/* ---- softmax, cross-entropy ------------------------------------------------------------------- */

static nb_status sm_call(nb_backend *be, ctx *c, bool dev) { /* x, out */
    nb_kview x = V(0), o = V(1);
    return nb_kernel_softmax(be, &o, &x, (int)c->p[0], c->p[1] != 0);
}
static nb_status smb_call(nb_backend *be, ctx *c, bool dev) { /* gy, y, gx */
    nb_kview gy = V(0), y = V(1), gx = V(2);
    return nb_kernel_softmax_backward(be, &gx, &gy, &y, (int)c->p[0], c->p[1] != 0);
}

static void case_softmax(nb_dtype dt, int nd, const int64_t *xs, int dim, bool lg) {
    ctx c = {0};
    char name[160], shp[64] = "";
    for (int i = 0; i < nd; i++)
        snprintf(shp + strlen(shp), sizeof shp - strlen(shp), "%s%lld", i ? ", " : "", (long long)xs[i]);
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    snprintf(name, sizeof name, "%s [%s] dim %d %s", lg ? "log_softmax" : "softmax", shp, dim, nb_dtype_name(dt));
    c.name = name, c.call = sm_call, c.p[0] = dim, c.p[1] = lg;
    buf *x = add(&c, dt, nd, xs, 1, false, 0);
    for (int64_t i = 0; i < x->n; i++) x->init[i] *= 4;
    add(&c, dt, nd, xs, 0, true, tol);
    run_case(&c);
    snprintf(name, sizeof name, "%s_backward [%s] dim %d %s", lg ? "log_softmax" : "softmax", shp, dim,
             nb_dtype_name(dt));
    c.call = smb_call;
    add(&c, dt, nd, xs, 1, false, 0);
    buf *y = add(&c, dt, nd, xs, 4, false, 0);
    { /* y = the CPU forward of fresh x */
        ctx t = {0};
        t.p[0] = dim, t.p[1] = lg;
        add(&t, dt, nd, xs, 1, false, 0), add(&t, dt, nd, xs, 0, false, 0);
        for (int i = 0; i < t.nb; i++) put(&t.b[i], t.b[i].h);
        if (sm_call(cpu, &t, false) != NB_OK) fprintf(stderr, "cpu softmax: %s\n", nb_last_error());
        for (int64_t i = 0; i < y->n; i++) y->init[i] = get(&t.b[1], t.b[1].h, i);
        release(&t);
    }
    add(&c, dt, nd, xs, 0, true, tol);
    run_case(&c);
}

static nb_status ce_call(nb_backend *be, ctx *c, bool dev) { /* logits, target, loss, lse */
    nb_kview x = V(0), t = V(1), l = V(2), s = V(3);
    return nb_kernel_cross_entropy(be, &l, &s, NULL, &x, &t, c->p[0]);
}
static nb_status ceb_call(nb_backend *be, ctx *c, bool dev) { /* logits, target, gloss, lse, glogits */
    nb_kview x = V(0), t = V(1), g = V(2), s = V(3), gx = V(4);
    return nb_kernel_cross_entropy_backward(be, &gx, &g, &x, &s, &t, c->p[0]);
}

static void case_ce(nb_dtype dt, int64_t n, int64_t cl, bool gloss_scalar, bool bad) {
    ctx c = {0};
    char name[160];
    int64_t xs[2] = {n, cl}, ns[1] = {n};
    double tol = dt == NB_F32 ? 2e-5 : 1e-12;
    const int64_t ignore = -100;
    snprintf(name, sizeof name, "cross_entropy [%lld, %lld] %s ignore_index -100%s", (long long)n, (long long)cl,
             nb_dtype_name(dt), bad ? " (bad target)" : "");
    c.name = name, c.call = ce_call, c.p[0] = ignore;
    buf *x = add(&c, dt, 2, xs, 1, false, 0);
    for (int64_t i = 0; i < x->n; i++) x->init[i] *= 3;
    buf *t = add(&c, NB_I64, 1, ns, 4, false, 0);
    for (int64_t i = 0; i < n; i++) t->init[i] = urand() < 0.15 ? (double)ignore : (double)irand(cl);
    if (bad) t->init[n / 2] = (double)cl;
    add(&c, dt, 1, ns, 0, true, tol), add(&c, dt, 1, ns, 0, true, tol);
    if (bad) {
        run_error_case(&c);
        return;
    }
    run_case(&c);
    snprintf(name, sizeof name, "cross_entropy_backward [%lld, %lld] %s%s", (long long)n, (long long)cl,
             nb_dtype_name(dt), gloss_scalar ? " (gloss a broadcast scalar)" : "");
    c.call = ceb_call;
    buf *bx = add(&c, dt, 2, xs, 1, false, 0);
    buf *bt = add(&c, NB_I64, 1, ns, 4, false, 0);
    for (int64_t i = 0; i < n; i++) bt->init[i] = urand() < 0.15 ? (double)ignore : (double)irand(cl);
    buf *g = add(&c, dt, 1, ns, 1, false, 0);
    if (gloss_scalar) set_view(g, 1, ns, (int64_t[]){0});
    buf *s = add(&c, dt, 1, ns, 4, false, 0);
    for (int64_t i = 0; i < n; i++) { /* lse of the row, in double */
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cl; j++) mx = fmax(mx, bx->init[i * cl + j]);
        for (int64_t j = 0; j < cl; j++) sum += exp(bx->init[i * cl + j] - mx);
        s->init[i] = mx + log(sum);
    }
    add(&c, dt, 2, xs, 0, true, tol);
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
        printf("cuda_reduce_slots: no CUDA device (%s): nothing to check\n", nb_last_error());
        return 0;
    }
    printf("cuda_reduce_slots on %s\n", gpu->iface->info ? gpu->iface->info(gpu) : "cuda:0");

    /* reduce: bias gradients (column mode, split), loss sums and means (row mode, split), long rows, NaN
     * extremes, products, integers, transposed and multi-dim views, an empty reduced dim */
    case_red("[512, 768] dim 0 (bias grad)", NB_REDUCE_SUM, NB_F32, NB_F32, 2, (int64_t[]){512, 768},
             (int64_t[]){1, 768}, 1, NULL, NULL, 0);
    case_red("[32, 128, 768] dims 0, 1", NB_REDUCE_SUM, NB_F32, NB_F32, 3, (int64_t[]){32, 128, 768},
             (int64_t[]){1, 1, 768}, 1, NULL, NULL, 0);
    case_red("[16384] mean (loss)", NB_REDUCE_SUM, NB_F32, NB_F32, 1, (int64_t[]){16384}, (int64_t[]){1},
             1.0 / 16384, NULL, NULL, 0);
    case_red("[300] mean", NB_REDUCE_SUM, NB_F64, NB_F64, 1, (int64_t[]){300}, (int64_t[]){1}, 1.0 / 300, NULL, NULL,
             0);
    case_red("[16777216] all", NB_REDUCE_SUM, NB_F32, NB_F32, 1, (int64_t[]){1 << 24}, (int64_t[]){1}, 1, NULL, NULL,
             0);
    case_red("[4096, 768] dim 1", NB_REDUCE_SUM, NB_F32, NB_F32, 2, (int64_t[]){4096, 768}, (int64_t[]){4096, 1}, 1,
             NULL, NULL, 0);
    case_red("[64, 50000] dim 1", NB_REDUCE_SUM, NB_F64, NB_F64, 2, (int64_t[]){64, 50000}, (int64_t[]){64, 1}, 1,
             NULL, NULL, 0);
    case_red("[3, 5000000] dim 1", NB_REDUCE_SUM, NB_F32, NB_F32, 2, (int64_t[]){3, 5000000}, (int64_t[]){3, 1}, 1,
             NULL, NULL, 0);
    case_red("[300, 257] dim 1 NaN", NB_REDUCE_MAX, NB_F32, NB_F32, 2, (int64_t[]){300, 257}, (int64_t[]){300, 1}, 1,
             NULL, NULL, 0.002);
    case_red("[300, 257] dim 0 NaN", NB_REDUCE_MIN, NB_F64, NB_F64, 2, (int64_t[]){300, 257}, (int64_t[]){1, 257}, 1,
             NULL, NULL, 0.002);
    case_red("[64, 33] dim 1", NB_REDUCE_PROD, NB_F64, NB_F64, 2, (int64_t[]){64, 33}, (int64_t[]){64, 1}, 1, NULL,
             NULL, 0);
    case_red("[100000] all", NB_REDUCE_SUM, NB_I32, NB_I64, 1, (int64_t[]){100000}, (int64_t[]){1}, 1, NULL, NULL, 0);
    case_red("[1000, 77] dim 0", NB_REDUCE_MAX, NB_U8, NB_U8, 2, (int64_t[]){1000, 77}, (int64_t[]){1, 77}, 1, NULL,
             NULL, 0);
    case_red("[5000] all (bool)", NB_REDUCE_SUM, NB_BOOL, NB_I64, 1, (int64_t[]){5000}, (int64_t[]){1}, 1, NULL, NULL,
             0);
    case_red("[40, 9] dim 1 (int64 prod)", NB_REDUCE_PROD, NB_I64, NB_I64, 2, (int64_t[]){40, 9}, (int64_t[]){40, 1}, 1,
             NULL, NULL, 0);
    case_red("[512, 768] transposed storage dim 0", NB_REDUCE_SUM, NB_F32, NB_F32, 2, (int64_t[]){512, 768},
             (int64_t[]){1, 768}, 1, (int64_t[]){512, 768}, (int64_t[]){1, 512}, 0);
    case_red("[768, 512] transposed storage dim 1", NB_REDUCE_SUM, NB_F32, NB_F32, 2, (int64_t[]){768, 512},
             (int64_t[]){768, 1}, 1, (int64_t[]){768, 512}, (int64_t[]){1, 768}, 0);
    case_red("[8, 300, 5] dims 0, 2", NB_REDUCE_SUM, NB_F64, NB_F64, 3, (int64_t[]){8, 300, 5},
             (int64_t[]){1, 300, 1}, 1, NULL, NULL, 0);
    case_red("[0, 5] dim 0 (empty)", NB_REDUCE_PROD, NB_F32, NB_F32, 2, (int64_t[]){0, 5}, (int64_t[]){1, 5}, 1,
             NULL, NULL, 0);

    case_arg(false, NB_F32, 512, 30522, 1, 1, 0);
    case_arg(false, NB_F32, 64, 1000, 1, 1, 0.01);
    case_arg(true, NB_F64, 1000, 37, 0, 1, 0.01);
    case_arg(false, NB_I32, 200, 3000, 1, 5, 0);
    case_arg(true, NB_I64, 3000, 5, 0, 5, 0);
    case_arg(true, NB_U8, 7, 5000, 1, 1, 0);

    /* scans: along the inner and the outer dim, ties and NaN for cummax/cummin, integers into int64 */
    case_scan(NB_REDUCE_SUM, NB_F32, 64, 1000, 1, 1);
    case_scan(NB_REDUCE_SUM, NB_F64, 1000, 64, 0, 1);
    case_scan(NB_REDUCE_PROD, NB_F64, 50, 40, 1, 2);
    case_scan(NB_REDUCE_MAX, NB_F32, 64, 300, 1, 5);
    case_scan(NB_REDUCE_MIN, NB_F64, 300, 64, 0, 5);
    case_scan(NB_REDUCE_LOGSUMEXP, NB_F32, 64, 300, 1, 1);
    case_scan(NB_REDUCE_SUM, NB_I32, 64, 300, 1, 1);
    case_scan(NB_REDUCE_MAX, NB_I64, 64, 300, 1, 5);
    case_scan(NB_REDUCE_PROD, NB_U8, 16, 20, 1, 5);

    /* sorts: long lines, many short lines, ties (stability), NaN / +-0 / inf, top-k, integers, bool */
    case_sort(NB_F32, 4, 100000, 1, 100000, false, 1, true, false);
    case_sort(NB_F32, 4, 100000, 1, 100000, true, 1, true, false);
    case_sort(NB_F64, 1000, 37, 0, 1000, false, 1, true, true);
    case_sort(NB_I32, 300, 1000, 1, 1000, true, 5, true, false);
    case_sort(NB_I32, 1000, 300, 0, 1000, false, 5, false, false);
    case_sort(NB_F32, 512, 30522, 1, 5, true, 1, true, false);
    case_sort(NB_I64, 33, 513, 1, 3, false, 5, true, true);
    case_sort(NB_U8, 64, 999, 1, 999, false, 1, true, false);
    case_sort(NB_BOOL, 64, 999, 1, 999, true, 6, true, false);

    /* gather / scatter */
    case_gather(NB_F32, 512, 30522, 1, 1, false);
    case_gather(NB_F64, 300, 40, 0, 250, false);
    case_gather(NB_U8, 30, 40, 1, 60, false);
    case_gather(NB_F32, 30, 40, 1, 10, true);
    for (int m = 0; m < NB_SCATTER_MODE_COUNT; m++) {
        case_scatter(NB_F32, (nb_scatter_mode)m, true, 64, 50, 1, 40, false);
        case_scatter(NB_F64, (nb_scatter_mode)m, false, 64, 50, 0, 30, false);
        case_scatter(NB_I32, (nb_scatter_mode)m, m % 2 == 0, 20, 9, 1, 12, false);
    }
    case_scatter(NB_F32, NB_SCATTER_SUM, true, 2, 3000000, 0, 2, false); /* 3M short lines */
    case_scatter(NB_F64, NB_SCATTER_MEAN, false, 5000, 3, 0, 4000, false); /* 3 long lines with counts */
    case_scatter(NB_F32, NB_SCATTER_SUM, true, 8, 9, 1, 5, true);

    /* index_select (embedding lookups), index_add (embedding backward), index_copy */
    case_index(0, NB_F32, 1, 30522, 768, 512, -1, false);
    case_index(0, NB_F64, 1, 30522, 768, 4096, -1, false);
    case_index(0, NB_F32, 8, 100, 7, 33, -1, false);  /* unaligned inner, dim 1 */
    case_index(0, NB_I64, 40, 100, 1, 250, -1, false); /* along the last dim */
    case_index(0, NB_U8, 3, 50, 33, 70, -1, false);
    case_index(0, NB_F32, 1, 100, 16, 20, -1, true);
    case_index(1, NB_F32, 1, 30522, 768, 512, 0, false);
    case_index(1, NB_F32, 1, 30522, 768, 4096, -1, false);
    case_index(1, NB_F64, 6, 40, 10, 300, 3, false);
    case_index(1, NB_I32, 4, 20, 1, 100, -1, false);
    case_index(1, NB_U8, 2, 20, 35, 50, -1, false);
    case_index(1, NB_F32, 1, 100, 16, 20, -1, true);
    case_index(2, NB_F32, 1, 1000, 768, 3000, -1, false);
    case_index(2, NB_I64, 5, 60, 3, 100, -1, false);
    case_index(2, NB_BOOL, 2, 30, 17, 50, -1, false);
    case_index(2, NB_F64, 1, 100, 16, 20, -1, true);

    case_where(NB_F32, 512, 768);
    case_where(NB_I64, 33, 65);
    case_where(NB_U8, 33, 65);

    case_nonzero(NB_BOOL, 1000, 1000, 0.3, false, false);
    case_nonzero(NB_F32, 700, 333, 0.05, true, false);
    case_nonzero(NB_F64, 257, 129, 0.5, false, true);
    case_nonzero(NB_I32, 3, 5, 0.5, false, false);

    /* softmax: attention-sized rows (warp per row), the vocabulary (block per row), a middle dim */
    for (int lg = 0; lg < 2; lg++) {
        case_softmax(NB_F32, 2, (int64_t[]){4096, 128}, 1, lg);
        case_softmax(NB_F32, 2, (int64_t[]){1024, 1000}, 1, lg);
        case_softmax(NB_F32, 2, (int64_t[]){512, 30522}, 1, lg);
        case_softmax(NB_F64, 2, (int64_t[]){300, 7}, 1, lg);
        case_softmax(NB_F64, 3, (int64_t[]){16, 300, 40}, 1, lg);
        case_softmax(NB_F32, 2, (int64_t[]){2000, 64}, 0, lg);
    }

    /* cross-entropy: BERT's vocabulary (hot), small, a broadcast gloss, bad targets */
    case_ce(NB_F32, 512, 30522, false, false);
    case_ce(NB_F32, 4096, 30522, true, false);
    case_ce(NB_F64, 64, 10, false, false);
    case_ce(NB_F64, 6, 5, true, false);
    case_ce(NB_F32, 16, 100, false, true);

    printf("cuda_reduce_slots: %d failure%s\n", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
