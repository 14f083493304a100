/* scan.c - CPU cumulative ops along one dim (cumsum, cumprod, cummax,
 * cummin, logcumsumexp) and their backward rules: the scan and
 * scan_backward slots of backend/nb_slots.def.
 *
 * Work is split over the "lines" (every position of the other dims), each
 * line walked sequentially along dim by one thread, so each output element
 * has one fixed evaluation order whatever the thread count. Floats
 * accumulate in double (PyTorch's CPU acc_type), integers in int64.
 * Elements are loaded and stored through small dtype switches: a scan is
 * memory bound and the branch is perfectly predicted.
 */
#include <math.h>
#include <string.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

#define SCAN_MAX_VIEWS 5

typedef struct scan_job {
    nb_reduce_op op;
    const nb_kview *v[SCAN_MAX_VIEWS]; /* forward: out, indices, x; backward: gx, g, x, out, indices */
    const nb_kview *ref;               /* the view whose shape defines the lines */
    int dim;
    int64_t n; /* length along dim */
} scan_job;

static double ldf(nb_dtype dt, const char *p) {
    return dt == NB_F32 ? (double)*(const float *)p : *(const double *)p;
}
static void stf(nb_dtype dt, char *p, double v) {
    if (dt == NB_F32) *(float *)p = (float)v;
    else *(double *)p = v;
}
static int64_t ldi(nb_dtype dt, const char *p) {
    switch (dt) {
    case NB_I32: return *(const int32_t *)p;
    case NB_I64: return *(const int64_t *)p;
    case NB_I8: return *(const int8_t *)p;
    case NB_I16: return *(const int16_t *)p;
    default: return *(const uint8_t *)p; /* u8, bool */
    }
}
static void sti(nb_dtype dt, char *p, int64_t v) {
    switch (dt) {
    case NB_F32: *(float *)p = (float)v; break;
    case NB_F64: *(double *)p = (double)v; break;
    case NB_I32: *(int32_t *)p = (int32_t)v; break;
    case NB_I64: *(int64_t *)p = v; break;
    case NB_I8: *(int8_t *)p = (int8_t)v; break;
    case NB_I16: *(int16_t *)p = (int16_t)v; break;
    case NB_BOOL: *(uint8_t *)p = v != 0; break;
    default: *(uint8_t *)p = (uint8_t)v; break;
    }
}

/* Byte pointers to line m's first element in each view, and byte steps along dim. */
static void line_ptrs(const scan_job *j, int64_t m, char **p, int64_t *step) {
    int64_t off[SCAN_MAX_VIEWS] = {0};
    for (int d = j->ref->ndim - 1; d >= 0; d--) {
        if (d == j->dim) continue;
        int64_t i = m % j->ref->shape[d];
        m /= j->ref->shape[d];
        for (int k = 0; k < SCAN_MAX_VIEWS; k++)
            if (j->v[k]) off[k] += i * j->v[k]->strides[d];
    }
    for (int k = 0; k < SCAN_MAX_VIEWS; k++) {
        if (!j->v[k]) {
            p[k] = NULL, step[k] = 0;
            continue;
        }
        int64_t es = (int64_t)nb_dtype_size(j->v[k]->dtype);
        p[k] = (char *)j->v[k]->data + off[k] * es;
        step[k] = j->v[k]->strides[j->dim] * es;
    }
}

/* PyTorch's _log_add_exp_helper: exact for infinities, NaN propagates. */
static double log_add_exp(double a, double b) {
    if (isnan(a) || isnan(b)) return a + b; /* fmin/fmax would drop the NaN */
    double lo = fmin(a, b), hi = fmax(a, b);
    if (lo != hi || isfinite(lo)) return log1p(exp(lo - hi)) + hi;
    return a;
}

/* ---- forward ---------------------------------------------------------------------- */

static void scan_line_float(const scan_job *j, char **p, const int64_t *st) {
    const nb_kview *o = j->v[0], *x = j->v[2];
    nb_reduce_op op = j->op;
    double acc = op == NB_REDUCE_PROD ? 1.0 : op == NB_REDUCE_LOGSUMEXP ? -INFINITY : 0.0;
    int64_t best = 0;
    for (int64_t i = 0; i < j->n; i++) {
        double v = ldf(x->dtype, p[2] + i * st[2]);
        switch (op) {
        case NB_REDUCE_SUM: acc += v; break;
        case NB_REDUCE_PROD: acc *= v; break;
        case NB_REDUCE_LOGSUMEXP: acc = log_add_exp(acc, v); break;
        case NB_REDUCE_MAX:
            if (i == 0 || isnan(v) || (!isnan(acc) && v >= acc)) acc = v, best = i;
            break;
        default:
            if (i == 0 || isnan(v) || (!isnan(acc) && v <= acc)) acc = v, best = i;
            break;
        }
        stf(o->dtype, p[0] + i * st[0], acc);
        if (p[1]) *(int64_t *)(p[1] + i * st[1]) = best;
    }
}

static void scan_line_int(const scan_job *j, char **p, const int64_t *st) {
    const nb_kview *o = j->v[0], *x = j->v[2];
    nb_reduce_op op = j->op;
    int64_t acc = op == NB_REDUCE_PROD ? 1 : 0, best = 0;
    for (int64_t i = 0; i < j->n; i++) {
        int64_t v = ldi(x->dtype, p[2] + i * st[2]);
        switch (op) {
        case NB_REDUCE_SUM: acc = (int64_t)((uint64_t)acc + (uint64_t)v); break; /* wraps, no UB */
        case NB_REDUCE_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)v); break;
        case NB_REDUCE_MAX:
            if (i == 0 || v >= acc) acc = v, best = i;
            break;
        default:
            if (i == 0 || v <= acc) acc = v, best = i;
            break;
        }
        sti(o->dtype, p[0] + i * st[0], acc);
        if (p[1]) *(int64_t *)(p[1] + i * st[1]) = best;
    }
}

static void scan_lines(void *arg, int64_t m0, int64_t m1) {
    const scan_job *j = arg;
    bool fl = nb_dtype_is_float(j->v[2]->dtype);
    for (int64_t m = m0; m < m1; m++) {
        char *p[SCAN_MAX_VIEWS];
        int64_t st[SCAN_MAX_VIEWS];
        line_ptrs(j, m, p, st);
        if (fl) scan_line_float(j, p, st);
        else scan_line_int(j, p, st);
    }
}

static void run_lines(scan_job *j, nb_cpu_range_fn fn) {
    int64_t total = nb_view_numel(j->ref);
    int64_t lines = j->n ? total / j->n : 0;
    nb_cpu_parallel_for(lines, NB_CPU_GRAIN / (j->n ? j->n : 1) + 1, fn, j);
}

nb_status nb_cpu_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                      const nb_kview *x, int dim) {
    (void)be; /* checked: backend/check/scan.c */
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    scan_job j = {op, {out, ext ? indices : NULL, x, NULL, NULL}, x, dim, x->shape[dim]};
    run_lines(&j, scan_lines);
    return NB_OK;
}

/* ---- backward --------------------------------------------------------------------- */

/* Views: 0 gx, 1 g, 2 x, 3 out, 4 indices. */
static void prod_back_line(const scan_job *j, char **p, const int64_t *st) {
    nb_dtype dt = j->v[0]->dtype;
    int64_t n = j->n, k = 0;
    while (k < n && ldf(dt, p[2] + k * st[2]) != 0.0) k++; /* first zero, or n */
    double acc = 0;
    for (int64_t i = k - 1; i >= 0; i--) { /* before the zero: revcumsum(g*out)/x */
        acc += ldf(dt, p[1] + i * st[1]) * ldf(dt, p[3] + i * st[3]);
        stf(dt, p[0] + i * st[0], acc / ldf(dt, p[2] + i * st[2]));
    }
    if (k == n) return;
    /* at the zero: sum_{j>=k} g_j * prod_{m<=j, m != k} x_m, left to right */
    double pr = k ? ldf(dt, p[3] + (k - 1) * st[3]) : 1.0, s = ldf(dt, p[1] + k * st[1]) * pr;
    for (int64_t i = k + 1; i < n; i++) {
        pr *= ldf(dt, p[2] + i * st[2]);
        s += ldf(dt, p[1] + i * st[1]) * pr;
    }
    stf(dt, p[0] + k * st[0], s);
    for (int64_t i = k + 1; i < n; i++) stf(dt, p[0] + i * st[0], 0.0); /* two zeros in the product */
}

static void lse_back_line(const scan_job *j, char **p, const int64_t *st) {
    nb_dtype dt = j->v[0]->dtype;
    double t = 0, next = 0;
    for (int64_t i = j->n - 1; i >= 0; i--) {
        double oi = ldf(dt, p[3] + i * st[3]), xi = ldf(dt, p[2] + i * st[2]);
        double r = i == j->n - 1 ? 0.0 : oi == next ? 1.0 : exp(oi - next);
        t = ldf(dt, p[1] + i * st[1]) + r * t;
        stf(dt, p[0] + i * st[0], xi == oi ? t : exp(xi - oi) * t);
        next = oi;
    }
}

static void scan_back_lines(void *arg, int64_t m0, int64_t m1) {
    const scan_job *j = arg;
    nb_dtype dt = j->v[0]->dtype;
    for (int64_t m = m0; m < m1; m++) {
        char *p[SCAN_MAX_VIEWS];
        int64_t st[SCAN_MAX_VIEWS];
        line_ptrs(j, m, p, st);
        if (j->op == NB_REDUCE_SUM) {
            double acc = 0;
            for (int64_t i = j->n - 1; i >= 0; i--) {
                acc += ldf(dt, p[1] + i * st[1]);
                stf(dt, p[0] + i * st[0], acc);
            }
        } else if (j->op == NB_REDUCE_PROD) {
            prod_back_line(j, p, st);
        } else if (j->op == NB_REDUCE_LOGSUMEXP) {
            lse_back_line(j, p, st);
        } else { /* scatter g to the indices, in increasing position order */
            for (int64_t i = 0; i < j->n; i++) stf(dt, p[0] + i * st[0], 0.0);
            for (int64_t i = 0; i < j->n; i++) {
                int64_t t = *(const int64_t *)(p[4] + i * st[4]); /* checked by indices_ok */
                char *q = p[0] + t * st[0];
                stf(dt, q, ldf(dt, q) + ldf(dt, p[1] + i * st[1]));
            }
        }
    }
}

/* Every index in [0, n): checked up front (one serial int64 pass) so the
 * threaded scatter never needs to report from a worker. */
static bool indices_ok(const scan_job *j) {
    int64_t lines = j->n ? nb_view_numel(j->ref) / j->n : 0;
    for (int64_t m = 0; m < lines; m++) {
        char *p[SCAN_MAX_VIEWS];
        int64_t st[SCAN_MAX_VIEWS];
        line_ptrs(j, m, p, st);
        for (int64_t i = 0; i < j->n; i++) {
            int64_t t = *(const int64_t *)(p[4] + i * st[4]);
            if (t < 0 || t >= j->n) return false;
        }
    }
    return true;
}

nb_status nb_cpu_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                               const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim) {
    (void)be; /* checked (but the indices' values): backend/check/scan.c */
    bool need_xo = op == NB_REDUCE_PROD || op == NB_REDUCE_LOGSUMEXP;
    bool need_i = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    const nb_kview *vs[] = {g, need_xo ? x : NULL, need_xo ? out : NULL, need_i ? indices : NULL};
    scan_job j = {op, {gx, g, vs[1], vs[2], vs[3]}, gx, dim, gx->shape[dim]};
    if (need_i && !indices_ok(&j))
        return nb_set_error(NB_ERR_INVALID_ARG, "scan_backward: an index is outside [0, %lld)", (long long)j.n);
    run_lines(&j, scan_back_lines);
    return NB_OK;
}
