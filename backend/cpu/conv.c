/* conv.c - CPU 2-d convolution (torch.nn.functional.conv2d) and its two
 * backward kernels, on OpenBLAS GEMMs, by one of two lowerings:
 *
 * Winograd F(2x2, 3x3) (section below) for 3x3, stride-1, undilated kernels
 * with >= 8 channels per group, such as the MNIST CNN's conv2: 16 GEMMs over
 * channels per image replace 2.25x as many multiplies.
 *
 * im2col for everything else: per image and group, im2col unfolds the input
 * into col [K = Cin/G * kh * kw, P = Ho * Wo] so that
 *   forward:          out_g [Cout/G, P] = [W_g | bias_g] @ [col_g ; ones]
 *   backward input:   col_g = W_g^T @ gy_g, then col2im adds col back into gx
 *   backward weight:  [gW_g | gbias_g]^T += [col_g ; ones] @ gy_g^T
 * (Chellapilla et al., "High performance convolutional neural networks for
 * document processing", 2006; Caffe's im2col layout). The bias rides in the
 * GEMMs as a row of ones under col, cheaper than a separate pass over the
 * output or gy. A 1x1 kernel with stride 1, no padding and no bias needs no
 * im2col: col is the input itself.
 *
 * Output sizes come from the views (out / gy), not from the padding
 * formula: positions past the input read as zeros, which also gives
 * PyTorch's asymmetric 'same' padding (extra on the right/bottom) when the
 * caller passes the left padding and a larger output, and conv_transpose2d's
 * output_padding.
 *
 * Threads: images are split into one contiguous range per thread; each
 * thread works in its own scratch (from the caching allocator, sized so that
 * one image's unfolded or transformed planes stay in its L2) and calls
 * single-threaded GEMMs, so the pool and OpenBLAS never run at the same time
 * (OpenBLAS is set to one thread for that span and restored). With fewer
 * images than threads the images run in turn and OpenBLAS threads each GEMM.
 * Determinism: every image's output and input gradient is computed by one
 * thread in a fixed order; the weight gradient sums fixed buckets of images
 * (chosen from the shapes alone) and adds the buckets in order, so results
 * do not depend on how the images are split across threads.
 */
#include <limits.h>
#include <string.h>

#include "blas.h"
#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

/* Buckets of images whose weight gradients are summed separately and then
 * added in order: fixes the summation order whatever the thread count. */
#define NB_CONV_BUCKETS 16
/* ... fewer when their partial sums would take more bytes than this. */
#define NB_CONV_BUCKET_BYTES ((size_t)64 << 20)
#define NB_CONV_ALIGN 64

/* The geometry of one convolution: input x [n, c, h, w], weight
 * [co, cg, kh, kw], output [n, co, ho, wo]. */
typedef struct conv_geom {
    int64_t n, c, h, w, co, ho, wo, kh, kw, groups;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t cg, cog, k, p; /* c/groups, co/groups, K = cg*kh*kw, P = ho*wo */
    bool direct;           /* 1x1, stride 1, no padding, same size: col is x */
    nb_dtype dt;
    size_t es;
} conv_geom;

/* Whether a call's views are all of one 16-bit dtype (d may be NULL): such
 * calls run on float32 copies (half.c). */
static bool all16(const nb_kview *a, const nb_kview *b, const nb_kview *c, const nb_kview *d) {
    return nb_dtype_is_16bit(a->dtype) && b->dtype == a->dtype && c->dtype == a->dtype && (!d || d->dtype == a->dtype);
}

/* Fills g from the views of one kernel call (checked: backend/check/conv.c); fails only past BLAS's int sizes. x
 * is the convolution's input side and y its output side (out, gy), whatever the call computes. */
static nb_status geom_init(conv_geom *g, const char *op, const nb_kview *x, const nb_kview *w,
                           const nb_kview *y, const nb_conv_params *p) {
    char b1[NB_SHAPE_BUF], b2[NB_SHAPE_BUF];
    *g = (conv_geom){.n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
                     .co = y->shape[1], .ho = y->shape[2], .wo = y->shape[3], .kh = w->shape[2],
                     .kw = w->shape[3], .groups = p->groups, .sh = p->stride[0], .sw = p->stride[1],
                     .ph = p->padding[0], .pw = p->padding[1], .dh = p->dilation[0], .dw = p->dilation[1],
                     .dt = x->dtype, .es = nb_dtype_size(x->dtype)};
    g->cg = g->c / g->groups, g->cog = g->co / g->groups;
    g->k = g->cg * g->kh * g->kw, g->p = g->ho * g->wo;
    if (g->k > INT_MAX || g->p > INT_MAX || g->cog > INT_MAX || g->k * g->p > INT64_MAX / 16)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: x %s with w %s exceeds BLAS's int range", op,
                            nb_view_str(x, b1, sizeof b1), nb_view_str(w, b2, sizeof b2));
    g->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
                g->ho == g->h && g->wo == g->w;
    return NB_OK;
}

/* Output columns [lo, hi) of a kernel column whose input column
 * ow*stride + off lies inside [0, size); the others read padding. */
static void valid_range(int64_t off, int64_t stride, int64_t size, int64_t nout, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
    if (h > nout) h = nout;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* im2col: col [cg*kh*kw, ho*wo] from one group's input planes x [cg, h, w];
 * col2im: gx [cg, h, w] = the sum of col's entries at each input position
 * (overwritten), visiting col in a fixed order. */
#define NB_TEMPLATE "conv_im2col.t.h"
#include "template_floats.h"

static void im2col(const conv_geom *g, const void *x, void *col) {
    if (g->dt == NB_F32) im2col_f32(g, x, col);
    else im2col_f64(g, x, col);
}

static void col2im(const conv_geom *g, const void *col, void *x) {
    if (g->dt == NB_F32) col2im_f32(g, col, x);
    else col2im_f64(g, col, x);
}

/* Row-major C [m, n] = op(A) @ op(B) + beta * C with beta 0 or 1; k == 0
 * leaves beta * C (BLAS is not asked to handle empty products). */
static void gemm_ld(const conv_geom *g, const nb_cpu_blas *blas, bool ta, bool tb, int64_t m, int64_t n,
                    int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        for (int64_t i = 0; i < m && beta == 0; i++)
            memset((char *)c + g->es * (size_t)(i * ldc), 0, g->es * (size_t)n);
        return;
    }
    int opa = ta ? NB_CBLAS_TRANS : NB_CBLAS_NO_TRANS, opb = tb ? NB_CBLAS_TRANS : NB_CBLAS_NO_TRANS;
    if (g->dt == NB_F32)
        blas->sgemm(NB_CBLAS_ROW_MAJOR, opa, opb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
    else
        blas->dgemm(NB_CBLAS_ROW_MAJOR, opa, opb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
}

static void gemm(const conv_geom *g, const nb_cpu_blas *blas, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c) {
    gemm_ld(g, blas, ta, tb, m, n, k, a, lda, b, ldb, beta, c, n);
}

/* ---- Winograd F(2x2, 3x3) ------------------------------------------------------
 * Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR
 * 2016): a 2x2 output tile of a 3x3, stride-1 convolution is
 *   Y = A^T [(G g G^T) . (B^T d B)] A
 * for the tile's 4x4 input patch d, with
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1],
 * so the 16 products per tile and channel pair become 16 GEMMs over
 * channels (16 multiplies for 4 outputs instead of 36). Its adjoints give the
 * two gradients: the input gradient is the same algorithm on gy with the
 * kernel rotated by 180 degrees and channels swapped, and the weight
 * gradient is G^T [sum over tiles (A dy A^T) . (B^T d B)] G. Transforms use
 * only additions and halvings; on the CNN's conv2 the float32 results are
 * within ~4e-7 of the largest float64 value for the output and both
 * gradients, as PyTorch's direct float32 kernel. The transform loops run
 * across a row of tiles, which the compiler vectorises. */

/* One Winograd pass: planes in [ci, ih, iw] -> out [co, oh, ow], 2x2
 * output tiles; tile (ty, tx) reads the input patch at (2ty - offh,
 * 2tx - offw). Large planes run in bands of tb tile rows, so that the
 * transformed planes of a band (V and M) stay about NB_CONV_WG_BAND_BYTES. */
typedef struct wg_geom {
    int64_t ci, co, ih, iw, oh, ow, offh, offw;
    int64_t ohs;       /* rows of an output plane (oh is the band's rows after wg_band) */
    int64_t th, tw, t; /* tile rows, tile columns and tiles (of the band, after wg_band) */
    int64_t tn;        /* the GEMMs' n: t rounded up to 16 (OpenBLAS runs these ~20% faster
                        * with n a multiple of 16; the extra columns are ignored) */
    int64_t tb, ld;    /* tile rows per band; row stride of the channel-major layouts */
    int64_t vs, ms;    /* element strides of the 16 slabs of V [16][ci][ld] and M [16][co][ld] */
} wg_geom;

#define NB_CONV_WG_BAND_BYTES ((int64_t)1 << 20)

/* A slab stride of at least c*t elements whose byte size is an odd
 * number of cache lines: the 16 slabs a transform reads or writes at
 * once then fall into different L1 sets (a multiple of 4 KiB, as for the
 * CNN's 64 x 144 floats, put them all in one set). */
static int64_t wg_slab(int64_t c, int64_t t, size_t es) {
    int64_t line = 64 / (int64_t)es, e = (c * t + line - 1) / line * line;
    return (e / line) % 2 ? e : e + line;
}

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

static wg_geom wg_make(int64_t ci, int64_t co, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t offh,
                       int64_t offw, size_t es) {
    wg_geom q = {.ci = ci, .co = co, .ih = ih, .iw = iw, .oh = oh, .ow = ow, .offh = offh, .offw = offw,
                 .ohs = oh, .th = (oh + 1) / 2, .tw = (ow + 1) / 2};
    int64_t row = 16 * (ci + co) * q.tw * (int64_t)es; /* V and M bytes per tile row */
    q.tb = row ? NB_CONV_WG_BAND_BYTES / row : q.th;
    if (q.tb * q.tw < 64) q.tb = q.tw ? (64 + q.tw - 1) / q.tw : 1; /* keep the GEMMs' n >= 64 */
    q.tb = q.tb < 1 ? 1 : q.tb > q.th ? q.th : q.tb;
    q.t = q.tb * q.tw, q.tn = round16(q.t), q.ld = q.tn;
    q.vs = wg_slab(ci, q.ld, es), q.ms = wg_slab(co, q.ld, es);
    return q;
}

/* The band of tile rows from ty0: a pass over output rows 2*ty0.. whose
 * input patches start at 2*ty0 - offh (pointers to in/out stay the planes'). */
static wg_geom wg_band(const wg_geom *q, int64_t ty0) {
    wg_geom b = *q;
    b.th = q->th - ty0 < q->tb ? q->th - ty0 : q->tb;
    b.oh = q->oh - 2 * ty0 < 2 * b.th ? q->oh - 2 * ty0 : 2 * b.th;
    b.offh = q->offh - 2 * ty0;
    b.t = b.th * b.tw, b.tn = round16(b.t);
    return b;
}

/* Elements of one task's scratch: V [16 slabs], M [16 slabs], max(ci, co)
 * split planes [2*tb + 2, 2, tw + 1] and two output rows [2, 2*tw]. */
static int64_t wg_scratch(const wg_geom *q) {
    int64_t c = q->ci > q->co ? q->ci : q->co;
    return 16 * (q->vs + q->ms) + c * (2 * q->tb + 2) * 2 * (q->tw + 1) + 4 * q->tw + 64;
}

#define NB_TEMPLATE "conv_winograd.t.h"
#include "template_floats.h"

/* Winograd takes 3x3, stride 1, dilation 1 convolutions with enough
 * channels per group that the GEMMs outweigh the transforms. */
#define NB_CONV_WG_MIN_CHANNELS 8

static bool wg_ok(const conv_geom *g) {
    return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->cg >= NB_CONV_WG_MIN_CHANNELS && g->cog >= NB_CONV_WG_MIN_CHANNELS &&
           (g->h + 1) / 2 * ((g->w + 1) / 2) <= INT_MAX && (g->ho + 1) / 2 * ((g->wo + 1) / 2) <= INT_MAX;
}

/* Sum of n contiguous values in 8 interleaved double lanes (vectorises;
 * the order is fixed by n alone). */
#define NB_TEMPLATE "conv_lane_sum.t.h"
#include "template_floats.h"

/* One call's shared state: the views' data, the geometry and the
 * per-task workspaces. Task t (of ntasks) owns items [t*n/ntasks, ...).
 * im2col path: the bias rides in the GEMMs: col gets a last row of ones
 * (kx = K + 1), the forward's weight matrix a last column of bias, and the
 * weight gradient's last row becomes the bias gradient. */
typedef struct conv_job {
    conv_geom g;
    const nb_cpu_blas *blas;
    const char *a, *b, *bias; /* inputs: (x, w) forward, (gy, w) input grad, (x, gy) weight grad */
    char *y;                  /* output: out, gx or gw */
    const char *wx;           /* forward: w, or w with a bias column [co, kx] */
    int64_t kx;               /* rows of col used: K, or K + 1 with the ones row */
    bool wg;                  /* Winograd path: q is its geometry, u its weights */
    wg_geom q;
    char *u;
    char *ws; /* ntasks scratch areas of ws_stride bytes, then the shared extras */
    size_t ws_stride;
    int64_t ntasks, nitems;
    char *partial; /* weight grad: per-bucket sums */
    double *bsum;  /* Winograd weight grad: per-bucket bias sums [nitems][co], or NULL */
} conv_job;

static int64_t split(int64_t n, int64_t parts, int64_t i) { return n * i / parts; }

/* Tasks: one per thread when there are at least as many items, else one
 * task (OpenBLAS then threads each GEMM). */
static int64_t task_count(int64_t items) {
    int64_t nt = nb_cpu_get_num_threads();
    return items >= nt && nt > 1 ? nt : 1;
}

static void run_tasks(conv_job *j, nb_cpu_range_fn fn) {
    if (j->ntasks > 1) {
        nb_cpu_blas_set_num_threads(1);
        nb_cpu_parallel_for(j->ntasks, 1, fn, j);
        nb_cpu_blas_set_num_threads(nb_cpu_get_num_threads());
    } else {
        fn(j, 0, 1);
    }
}

static size_t align_up(size_t n) { return (n + NB_CONV_ALIGN - 1) / NB_CONV_ALIGN * NB_CONV_ALIGN; }

/* Allocates ntasks scratch areas of `task` bytes (the im2col buffer
 * [K + 1, P] or the Winograd scratch) and `extra` bytes after them. */
static nb_status job_workspace(conv_job *j, nb_backend *be, size_t task, size_t extra, void **ws_block) {
    j->ws_stride = align_up(task);
    size_t bytes = j->ws_stride * (size_t)j->ntasks + extra;
    j->ws = NULL;
    *ws_block = NULL;
    if (bytes == 0) return NB_OK;
    j->ws = nb_alloc_raw(be, bytes, nb_backend_current_stream(be), ws_block);
    return j->ws ? NB_OK : nb_last_status();
}

static char *job_extra(const conv_job *j) { return j->ws + j->ws_stride * (size_t)j->ntasks; }

/* Bytes of one task's scratch: Winograd's, or im2col's [K + 1, P] (none
 * for a direct convolution). */
static size_t task_bytes(const conv_job *j) {
    if (j->wg) return j->g.es * (size_t)wg_scratch(&j->q);
    return j->g.direct ? 0 : j->g.es * (size_t)((j->g.k + 1) * j->g.p);
}

/* Task t's col buffer, its ones row set when the bias rides along. */
static char *task_col(const conv_job *j, int64_t t) {
    if (j->g.direct) return NULL;
    char *col = j->ws + j->ws_stride * (size_t)t;
    if (j->kx > j->g.k) {
        if (j->g.dt == NB_F32)
            for (int64_t i = 0; i < j->g.p; i++) ((float *)col)[j->g.k * j->g.p + i] = 1.0f;
        else
            for (int64_t i = 0; i < j->g.p; i++) ((double *)col)[j->g.k * j->g.p + i] = 1.0;
    }
    return col;
}

/* Task t's Winograd scratch: V [16, c, t], M [16, c, t], split plane, rows. */
typedef struct wg_bufs {
    char *v, *m, *plane, *rows;
} wg_bufs;

static wg_bufs task_wg(const conv_job *j, int64_t t) {
    const wg_geom *q = &j->q;
    size_t es = j->g.es, v = es * (size_t)(16 * q->vs), m = es * (size_t)(16 * q->ms);
    char *s = j->ws + j->ws_stride * (size_t)t;
    int64_t planes = (q->ci > q->co ? q->ci : q->co) * (2 * q->tb + 2) * 2 * (q->tw + 1);
    /* V's columns [t, tn) enter the GEMMs but only reach M's ignored columns;
     * zeroed once so that no stale NaN or denormal sits there */
    for (int64_t r = 0; r < 16 * q->ci && q->ld > q->t; r++)
        memset(s + es * (size_t)(r / q->ci * q->vs + r % q->ci * q->ld + q->t), 0, es * (size_t)(q->ld - q->t));
    return (wg_bufs){s, s + v, s + v + m, s + v + m + es * (size_t)planes};
}

/* A Winograd convolution of one group, band by band: out [co, oh, ow] =
 * in [ci, ih, iw] conv u[gr] (+ bias [co]). */
static void wg_pass(const conv_job *j, int64_t gr, const char *in, char *out, const char *bias, const wg_bufs *wb) {
    const wg_geom *q = &j->q;
    size_t es = j->g.es;
    for (int64_t ty0 = 0; ty0 < q->th; ty0 += q->tb) {
        wg_geom b = wg_band(q, ty0);
        char *ob = out + es * (size_t)(2 * ty0 * q->ow);
        if (j->g.dt == NB_F32) wg_input_f32(&b, (const float *)in, (float *)wb->v, (float *)wb->plane, false);
        else wg_input_f64(&b, (const double *)in, (double *)wb->v, (double *)wb->plane, false);
        for (int64_t x = 0; x < 16; x++) /* M[x] [co, tn] = U[gr, x] [co, ci] @ V[x] [ci, tn] */
            gemm_ld(&j->g, j->blas, false, false, q->co, b.tn, q->ci,
                    j->u + es * (size_t)((gr * 16 + x) * q->co * q->ci), q->ci, wb->v + es * (size_t)(x * q->vs),
                    q->ld, 0.0, wb->m + es * (size_t)(x * q->ms), q->ld);
        if (j->g.dt == NB_F32)
            wg_output_f32(&b, (const float *)wb->m, (const float *)bias, (float *)ob, (float *)wb->rows);
        else
            wg_output_f64(&b, (const double *)wb->m, (const double *)bias, (double *)ob, (double *)wb->rows);
    }
}

/* One image's Winograd weight gradient for one group, band by band:
 * dU[x] [cog, cg] (+)= (A gy A^T)[x] [cog, t] @ (B^T x B)[x] [t, cg]. V is
 * built tile-major so that this is an NN GEMM (2x OpenBLAS's NT speed here). */
static void wg_weight_pass(const conv_job *j, const char *xg, const char *gyg, char *dst, bool first,
                           const wg_bufs *wb) {
    const wg_geom *q = &j->q;
    size_t es = j->g.es;
    for (int64_t ty0 = 0; ty0 < q->th; ty0 += q->tb) {
        wg_geom b = wg_band(q, ty0);
        const char *gb = gyg + es * (size_t)(2 * ty0 * q->ow);
        if (j->g.dt == NB_F32) {
            wg_input_f32(&b, (const float *)xg, (float *)wb->v, (float *)wb->plane, true);
            wg_grad_tiles_f32(&b, (const float *)gb, (float *)wb->m, (float *)wb->plane);
        } else {
            wg_input_f64(&b, (const double *)xg, (double *)wb->v, (double *)wb->plane, true);
            wg_grad_tiles_f64(&b, (const double *)gb, (double *)wb->m, (double *)wb->plane);
        }
        for (int64_t x = 0; x < 16; x++)
            gemm(&j->g, j->blas, false, false, q->co, q->ci, b.t, wb->m + es * (size_t)(x * q->ms), q->ld,
                 wb->v + es * (size_t)(x * q->vs), q->ci, first && ty0 == 0 ? 0.0 : 1.0,
                 dst + es * (size_t)(x * q->co * q->ci));
    }
}

/* Transforms the weights for the Winograd path into the extra workspace. */
static void wg_prepare(conv_job *j, const void *w, bool flip) {
    j->u = job_extra(j);
    if (j->g.dt == NB_F32) wg_weights_f32(&j->g, w, (float *)j->u, flip);
    else wg_weights_f64(&j->g, w, (double *)j->u, flip);
}

static size_t wg_weight_bytes(const conv_geom *g) {
    return align_up(g->es * (size_t)(g->groups * 16 * g->cog * g->cg));
}

/* ---- forward ---------------------------------------------------------------- */

static void fwd_task(void *arg, int64_t t0, int64_t t1) {
    conv_job *j = arg;
    const conv_geom *g = &j->g;
    size_t es = g->es;
    for (int64_t t = t0; t < t1; t++) {
        char *col = j->wg ? NULL : task_col(j, t);
        wg_bufs wb = j->wg ? task_wg(j, t) : (wg_bufs){0};
        for (int64_t n = split(g->n, j->ntasks, t); n < split(g->n, j->ntasks, t + 1); n++) {
            const char *xn = j->a + es * (size_t)(n * g->c * g->h * g->w);
            char *on = j->y + es * (size_t)(n * g->co * g->p);
            for (int64_t gr = 0; gr < g->groups; gr++) {
                const char *xg = xn + es * (size_t)(gr * g->cg * g->h * g->w);
                char *og = on + es * (size_t)(gr * g->cog * g->p);
                if (j->wg) {
                    wg_pass(j, gr, xg, og, j->bias ? j->bias + es * (size_t)(gr * g->cog) : NULL, &wb);
                    continue;
                }
                if (col) im2col(g, xg, col);
                gemm(g, j->blas, false, false, g->cog, g->p, j->kx, j->wx + es * (size_t)(gr * g->cog * j->kx), j->kx,
                     col ? col : xg, g->p, 0.0, og);
            }
        }
    }
}

/* wext [co, K + 1] = [w | bias]. */
static void build_wext(const conv_geom *g, const char *w, const char *bias, char *wext) {
    size_t es = g->es;
    for (int64_t c = 0; c < g->co; c++) {
        memcpy(wext + es * (size_t)(c * (g->k + 1)), w + es * (size_t)(c * g->k), es * (size_t)g->k);
        memcpy(wext + es * (size_t)(c * (g->k + 1) + g->k), bias + es * (size_t)c, es);
    }
}

nb_status nb_cpu_conv2d(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *w,
                        const nb_kview *bias, const nb_conv_params *p) {
    if (all16(x, w, out, bias)) return nb_cpu_conv2d16(be, out, x, w, bias, p);
    conv_job j = {0};
    conv_geom *g = &j.g;
    nb_status st = geom_init(g, "conv2d", x, w, out, p);
    if (st) return st;
    if (nb_view_numel(out) == 0) return NB_OK;
    if (!(j.blas = nb_cpu_blas_get())) return nb_last_status();
    j.wg = wg_ok(g);
    j.q = wg_make(g->cg, g->cog, g->h, g->w, g->ho, g->wo, g->ph, g->pw, g->es);
    g->direct = g->direct && !bias; /* the bias needs col's ones row */
    j.a = x->data, j.y = out->data, j.bias = bias ? bias->data : NULL;
    j.wx = w->data, j.kx = bias ? g->k + 1 : g->k;
    j.ntasks = task_count(g->n);
    void *ws_block;
    size_t extra = j.wg ? wg_weight_bytes(g) : bias ? g->es * (size_t)(g->co * (g->k + 1)) : 0;
    if ((st = job_workspace(&j, be, task_bytes(&j), extra, &ws_block))) return st;
    if (j.wg) {
        wg_prepare(&j, w->data, false);
    } else if (bias) {
        build_wext(g, w->data, bias->data, job_extra(&j));
        j.wx = job_extra(&j);
    }
    run_tasks(&j, fwd_task);
    nb_free_raw(be, ws_block);
    return NB_OK;
}

/* ---- backward input ------------------------------------------------------------ */

static void bwd_input_task(void *arg, int64_t t0, int64_t t1) {
    conv_job *j = arg;
    const conv_geom *g = &j->g;
    size_t es = g->es;
    for (int64_t t = t0; t < t1; t++) {
        char *col = j->wg ? NULL : task_col(j, t);
        wg_bufs wb = j->wg ? task_wg(j, t) : (wg_bufs){0};
        for (int64_t n = split(g->n, j->ntasks, t); n < split(g->n, j->ntasks, t + 1); n++) {
            const char *gyn = j->a + es * (size_t)(n * g->co * g->p);
            char *gxn = j->y + es * (size_t)(n * g->c * g->h * g->w);
            for (int64_t gr = 0; gr < g->groups; gr++) {
                const char *gyg = gyn + es * (size_t)(gr * g->cog * g->p);
                char *gxg = gxn + es * (size_t)(gr * g->cg * g->h * g->w);
                if (j->wg) { /* the forward algorithm on gy with the flipped kernel */
                    wg_pass(j, gr, gyg, gxg, NULL, &wb);
                    continue;
                }
                gemm(g, j->blas, true, false, g->k, g->p, g->cog, j->b + es * (size_t)(gr * g->cog * g->k), g->k,
                     gyg, g->p, 0.0, col ? col : gxg);
                if (col) col2im(g, col, gxg);
            }
        }
    }
}

nb_status nb_cpu_conv2d_backward_input(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                       const nb_kview *w, const nb_conv_params *p) {
    if (all16(gx, w, gy, NULL)) return nb_cpu_conv2d_backward_input16(be, gx, gy, w, p);
    conv_job j = {0};
    conv_geom *g = &j.g;
    nb_status st = geom_init(g, "conv2d_backward_input", gx, w, gy, p);
    if (st) return st;
    if (nb_view_numel(gx) == 0) return NB_OK;
    if (g->p == 0 || g->cog == 0) { /* nothing flows back */
        memset(gx->data, 0, g->es * (size_t)nb_view_numel(gx));
        return NB_OK;
    }
    if (!(j.blas = nb_cpu_blas_get())) return nb_last_status();
    j.wg = wg_ok(g);
    /* gx = conv(gy, rot180(w)^T) with the patch of tile (ty, tx) at 2ty - (2 - ph) */
    j.q = wg_make(g->cog, g->cg, g->ho, g->wo, g->h, g->w, 2 - g->ph, 2 - g->pw, g->es);
    j.a = gy->data, j.b = w->data, j.y = gx->data, j.kx = g->k;
    j.ntasks = task_count(g->n);
    void *ws_block;
    if ((st = job_workspace(&j, be, task_bytes(&j), j.wg ? wg_weight_bytes(g) : 0, &ws_block))) return st;
    if (j.wg) wg_prepare(&j, w->data, true);
    run_tasks(&j, bwd_input_task);
    nb_free_raw(be, ws_block);
    return NB_OK;
}

/* ---- backward weight -------------------------------------------------------------- */

/* Elements of one bucket's partial sum: [groups][kx][Cout/G] (im2col) or
 * [groups][16][Cout/G][Cin/G] (Winograd). */
static int64_t bucket_elems(const conv_job *j) {
    return j->wg ? j->g.groups * 16 * j->g.cog * j->g.cg : j->g.groups * j->kx * j->g.cog;
}

static char *bucket_dst(const conv_job *j, int64_t b) { return j->partial + j->g.es * (size_t)(b * bucket_elems(j)); }

/* One image's weight-gradient GEMMs for group gr into dst (first: overwrite). */
static void bwd_weight_image(conv_job *j, const char *xg, const char *gyg, char *dst, bool first, char *col,
                             const wg_bufs *wb) {
    const conv_geom *g = &j->g;
    if (j->wg) {
        wg_weight_pass(j, xg, gyg, dst, first, wb);
        return;
    }
    if (col) im2col(g, xg, col);
    /* gW_g^T [kx, Cout/G] (+)= col [kx, P] @ gy_g^T: OpenBLAS runs this
     * orientation ~10% faster than gy_g @ col^T for conv shapes */
    gemm(g, j->blas, false, true, j->kx, g->cog, g->p, col ? col : xg, g->p, gyg, g->p, first ? 0.0 : 1.0, dst);
}

static void bwd_weight_task(void *arg, int64_t t0, int64_t t1) {
    conv_job *j = arg;
    const conv_geom *g = &j->g;
    size_t es = g->es;
    int64_t per_group = j->wg ? 16 * g->cog * g->cg : j->kx * g->cog;
    for (int64_t t = t0; t < t1; t++) {
        char *col = j->wg ? NULL : task_col(j, t);
        wg_bufs wb = j->wg ? task_wg(j, t) : (wg_bufs){0};
        for (int64_t b = split(j->nitems, j->ntasks, t); b < split(j->nitems, j->ntasks, t + 1); b++) {
            char *dst = bucket_dst(j, b);
            for (int64_t n = split(g->n, j->nitems, b); n < split(g->n, j->nitems, b + 1); n++) {
                bool first = n == split(g->n, j->nitems, b);
                const char *xn = j->a + es * (size_t)(n * g->c * g->h * g->w);
                const char *gyn = j->b + es * (size_t)(n * g->co * g->p);
                for (int64_t gr = 0; gr < g->groups; gr++)
                    bwd_weight_image(j, xn + es * (size_t)(gr * g->cg * g->h * g->w),
                                     gyn + es * (size_t)(gr * g->cog * g->p), dst + es * (size_t)(gr * per_group),
                                     first, col, &wb);
                for (int64_t c = 0; j->bsum && c < g->co; c++) {
                    const char *row = gyn + es * (size_t)(c * g->p);
                    double s = g->dt == NB_F32 ? lane_sum_f32((const float *)row, g->p)
                                               : lane_sum_f64((const double *)row, g->p);
                    j->bsum[b * g->co + c] = first ? s : j->bsum[b * g->co + c] + s;
                }
            }
        }
    }
}

/* im2col path: rows r = (group, k) of the buckets: bucket 0's row += the
 * others' in order, then written transposed into gw [Cout, K], or into
 * gbias for the ones row k == K. */
#define NB_TEMPLATE "conv_sum_buckets.t.h"
#include "template_floats.h"

typedef struct sum_job {
    conv_job *j;
    void *gbias;
} sum_job;

static void sum_buckets(void *arg, int64_t r0, int64_t r1) {
    sum_job *s = arg;
    if (s->j->g.dt == NB_F32) sum_buckets_f32(s->j, s->gbias, r0, r1);
    else sum_buckets_f64(s->j, s->gbias, r0, r1);
}

static void add_buckets(void *arg, int64_t e0, int64_t e1) {
    conv_job *j = arg;
    if (j->g.dt == NB_F32) add_buckets_f32(j, e0, e1);
    else add_buckets_f64(j, e0, e1);
}

/* Winograd path: gw from the summed buckets, gbias from the bias sums. */
static void wg_finish(const conv_job *j, const nb_kview *gbias) {
    if (j->g.dt == NB_F32) wg_weight_grad_f32(&j->g, (const float *)j->partial, (float *)j->y);
    else wg_weight_grad_f64(&j->g, (const double *)j->partial, (double *)j->y);
    for (int64_t c = 0; gbias && c < j->g.co; c++) {
        double s = 0;
        for (int64_t b = 0; b < j->nitems; b++) s += j->bsum[b * j->g.co + c];
        if (j->g.dt == NB_F32) ((float *)gbias->data)[c] = (float)s;
        else ((double *)gbias->data)[c] = s;
    }
}

nb_status nb_cpu_conv2d_backward_weight(nb_backend *be, const nb_kview *gw, const nb_kview *gbias,
                                        const nb_kview *gy, const nb_kview *x, const nb_conv_params *p) {
    if (all16(x, gw, gy, gbias)) return nb_cpu_conv2d_backward_weight16(be, gw, gbias, gy, x, p);
    conv_job j = {0};
    conv_geom *g = &j.g;
    nb_status st = geom_init(g, "conv2d_backward_weight", x, gw, gy, p);
    if (st) return st;
    if (g->n == 0 || g->p == 0) { /* an empty sum */
        memset(gw->data, 0, g->es * (size_t)(g->co * g->k));
        if (gbias) memset(gbias->data, 0, g->es * (size_t)g->co);
        return NB_OK;
    }
    if (!(j.blas = nb_cpu_blas_get())) return nb_last_status();
    j.wg = wg_ok(g);
    j.q = wg_make(g->cg, g->cog, g->h, g->w, g->ho, g->wo, g->ph, g->pw, g->es);
    g->direct = g->direct && !gbias; /* the im2col bias gradient needs col's ones row */
    j.a = x->data, j.b = gy->data, j.y = gw->data, j.kx = gbias && !j.wg ? g->k + 1 : g->k;
    size_t bucket = g->es * (size_t)bucket_elems(&j);
    j.nitems = g->n < NB_CONV_BUCKETS ? g->n : NB_CONV_BUCKETS;
    if (bucket && (size_t)j.nitems > NB_CONV_BUCKET_BYTES / bucket)
        j.nitems = NB_CONV_BUCKET_BYTES / bucket > 1 ? (int64_t)(NB_CONV_BUCKET_BYTES / bucket) : 1;
    j.ntasks = task_count(j.nitems);
    void *ws_block;
    size_t pbytes = align_up(bucket * (size_t)j.nitems);
    size_t bbytes = j.wg && gbias ? sizeof(double) * (size_t)(j.nitems * g->co) : 0;
    if ((st = job_workspace(&j, be, task_bytes(&j), pbytes + bbytes, &ws_block))) return st;
    if (!j.ws) return NB_OK; /* no weights and no bias: nothing to write */
    j.partial = job_extra(&j);
    j.bsum = bbytes ? (double *)(j.partial + pbytes) : NULL;
    run_tasks(&j, bwd_weight_task);
    if (j.wg) {
        nb_cpu_parallel_for(bucket_elems(&j), NB_CPU_GRAIN / 4, add_buckets, &j);
        wg_finish(&j, gbias);
    } else {
        sum_job sj = {&j, gbias ? gbias->data : NULL};
        nb_cpu_parallel_for(g->groups * j.kx, NB_CPU_GRAIN / 8 / (g->cog * j.nitems + 1) + 1, sum_buckets, &sj);
    }
    nb_free_raw(be, ws_block);
    return NB_OK;
}
