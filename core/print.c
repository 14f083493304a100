/* print.c - nb_repr / nb_print: PyTorch's tensor repr (torch/_tensor_str.py
 * of PyTorch 1.13, with its default print options: precision 4, threshold
 * 1000 elements, 3 edge items, line width 80), so that nabla and PyTorch
 * print the same tensor alike:
 *
 *   tensor([[ 0.1000, -2.0000],
 *           [ 3.5000,     inf]], dtype=torch.float64, requires_grad=True)
 *
 * The element format is chosen once per tensor from its nonzero finite
 * values (or from the summarized ones): integers in floats print as "2.",
 * a range wider than 1000x or beyond 1e8 (or below 1e-4 for non-integers)
 * in scientific notation "1.0000e+08", else fixed "%.4f"; every element is
 * padded to the widest. The tensor is read to the host once (as float64,
 * or int64 for integer dtypes). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_impl.h"

enum { PRECISION = 4, THRESHOLD = 1000, EDGE = 3, LINEWIDTH = 80 };

/* A growing string. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap ? 2 * b->cap : 256) + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

typedef struct fmt {
    bool floating, int_mode, sci_mode, is_bool;
    int width;
} fmt;

/* One element as PyTorch's _Formatter.format writes it, before padding. */
static int element(const fmt *f, double v, int64_t iv, char *out, size_t len) {
    if (f->is_bool) return snprintf(out, len, "%s", iv ? "True" : "False");
    if (!f->floating) return snprintf(out, len, "%lld", (long long)iv);
    if (isnan(v)) return snprintf(out, len, "nan"); /* Python prints no sign on NaN */
    if (isinf(v)) return snprintf(out, len, "%sinf", v < 0 ? "-" : "");
    if (f->sci_mode) return snprintf(out, len, "%.*e", PRECISION, v);
    if (f->int_mode) return snprintf(out, len, "%.0f.", v);
    return snprintf(out, len, "%.*f", PRECISION, v);
}

/* PyTorch's _Formatter.__init__ over the values that will be printed. */
static fmt make_fmt(nb_dtype dt, const double *v, const int64_t *iv, const bool *shown, int64_t n) {
    fmt f = {.floating = nb_dtype_is_float(dt), .int_mode = true, .is_bool = dt == NB_BOOL, .width = 1};
    char s[64];
    if (!f.floating) {
        for (int64_t i = 0; i < n; i++)
            if (shown[i]) {
                int w = element(&f, 0, iv[i], s, sizeof s);
                f.width = w > f.width ? w : f.width;
            }
        return f;
    }
    double mn = INFINITY, mx = 0;
    bool any = false;
    for (int64_t i = 0; i < n; i++) {
        if (!shown[i] || !isfinite(v[i]) || v[i] == 0) continue;
        any = true;
        double a = fabs(v[i]);
        mn = a < mn ? a : mn, mx = a > mx ? a : mx;
        if (v[i] != ceil(v[i])) f.int_mode = false;
    }
    if (!any) return f;
    f.sci_mode = mx / mn > 1000.0 || mx > 1e8 || (!f.int_mode && mn < 1e-4);
    for (int64_t i = 0; i < n; i++) {
        if (!shown[i] || !isfinite(v[i]) || v[i] == 0) continue;
        int w = element(&f, v[i], 0, s, sizeof s);
        f.width = w > f.width ? w : f.width;
    }
    return f;
}

typedef struct ctx {
    const nb_tensor *t;
    const double *v;
    const int64_t *iv;
    bool summarize;
    fmt f;
    sbuf *b;
} ctx;

static void pad_element(ctx *c, int64_t i) {
    char s[64];
    int w = element(&c->f, c->v ? c->v[i] : 0, c->iv ? c->iv[i] : 0, s, sizeof s);
    put(c->b, "%*s%s", w < c->f.width ? c->f.width - w : 0, "", s);
}

/* PyTorch's _tensor_str_with_formatter for the sub-tensor at element offset
 * off of dims d.. (C order, contiguous host copy). */
static void tensor_str(ctx *c, int d, int64_t off, int indent) {
    int nd = c->t->ndim;
    if (nd == 0) {
        pad_element(c, 0);
        return;
    }
    int64_t n = c->t->shape[d], stride = 1;
    for (int k = d + 1; k < nd; k++) stride *= c->t->shape[k];
    bool cut = c->summarize && n > 2 * EDGE;
    put(c->b, "[");
    if (d == nd - 1) { /* _vector_str: rows of elements that fit the line width */
        int per_line = (LINEWIDTH - indent) / (c->f.width + 2);
        per_line = per_line > 1 ? per_line : 1;
        int64_t items = cut ? 2 * EDGE + 1 : n;
        for (int64_t j = 0; j < items; j++) {
            if (j) put(c->b, j % per_line ? ", " : ",\n%*s", (int)(indent + 1), "");
            if (cut && j == EDGE) put(c->b, " ...");
            else pad_element(c, off + (cut && j > EDGE ? n - (2 * EDGE + 1 - j) : j));
        }
    } else {
        int64_t items = cut ? 2 * EDGE + 1 : n;
        for (int64_t j = 0; j < items; j++) {
            if (j) {
                put(c->b, ",");
                for (int k = 0; k < nd - d - 1; k++) put(c->b, "\n");
                put(c->b, "%*s", indent + 1, "");
            }
            if (cut && j == EDGE) put(c->b, "...");
            else tensor_str(c, d + 1, off + (cut && j > EDGE ? n - (2 * EDGE + 1 - j) : j) * stride, indent + 1);
        }
    }
    put(c->b, "]");
}

/* Marks the elements a summarized print shows (get_summarized_data). */
static void mark_shown(const nb_tensor *t, bool summarize, bool *shown, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool s = true;
        int64_t r = i;
        for (int d = t->ndim - 1; d >= 0 && summarize; d--) {
            int64_t k = r % t->shape[d];
            r /= t->shape[d];
            if (t->shape[d] > 2 * EDGE && k >= EDGE && k < t->shape[d] - EDGE) s = false;
        }
        shown[i] = s;
    }
}

/* "grad_fn=<AddBackward0>": the op's name in CamelCase, as PyTorch's node names. */
static void grad_fn_name(const nb_tensor *t, char *out, size_t len) {
    const char *name = nb_op_name((nb_op_id)nb_tape.op(t->grad_fn));
    size_t k = 0;
    bool up = true;
    for (const char *p = name; *p && k + 12 < len; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        out[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        up = false;
    }
    snprintf(out + k, len - k, "Backward0");
}

static nb_status repr(const nb_tensor *t, sbuf *b) {
    int64_t n = nb_numel(t);
    bool integer = !nb_dtype_is_float(t->dtype);
    double *v = NULL;
    int64_t *iv = NULL;
    bool *shown = NULL;
    nb_status st = NB_OK;
    if (n > 0) {
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *h = nb_dense_as(t, integer ? NB_I64 : NB_F64);
        void *dst = integer ? (void *)(iv = malloc(sizeof *iv * (size_t)n)) : (void *)(v = malloc(sizeof *v * (size_t)n));
        shown = malloc(sizeof *shown * (size_t)n);
        if (!dst || !shown) st = nb_set_error(NB_ERR_OOM, "repr: out of host memory");
        else if (!h || nb_to_host(h, dst, (size_t)n * 8)) st = nb_last_status();
        nb_scope_end(s);
    }
    bool summarize = n > THRESHOLD;
    put(b, "tensor(");
    if (!st && n > 0) {
        mark_shown(t, summarize, shown, n);
        ctx c = {t, v, iv, summarize, make_fmt(t->dtype, v, iv, shown, n), b};
        tensor_str(&c, 0, 0, 7);
    } else if (!st) {
        put(b, "[]");
    }
    free(v), free(iv), free(shown);
    if (st) return st;
    /* suffixes, wrapped at the line width as _add_suffixes does */
    char suffix[4][160];
    int ns = 0;
    nb_device dev = t->storage->device, def = nb_default_device();
    if (dev.type != def.type || dev.index != def.index)
        snprintf(suffix[ns++], sizeof suffix[0], "device='%s:%d'", dev.type == NB_DEVICE_CUDA ? "cuda" : "cpu",
                 dev.index);
    if (n == 0 && t->ndim != 1) {
        int k = snprintf(suffix[ns], sizeof suffix[0], "size=(");
        for (int d = 0; d < t->ndim; d++)
            k += snprintf(suffix[ns] + k, sizeof suffix[0] - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        snprintf(suffix[ns] + k, sizeof suffix[0] - (size_t)k, ")");
        ns++;
    }
    bool default_dtype = t->dtype == NB_F32 || (n > 0 && (t->dtype == NB_I64 || t->dtype == NB_BOOL));
    if (!default_dtype) snprintf(suffix[ns++], sizeof suffix[0], "dtype=torch.%s", nb_dtype_name(t->dtype));
    if (t->grad_fn) {
        char g[120];
        grad_fn_name(t, g, sizeof g);
        snprintf(suffix[ns++], sizeof suffix[0], "grad_fn=<%s>", g);
    } else if (t->requires_grad) {
        snprintf(suffix[ns++], sizeof suffix[0], "requires_grad=True");
    }
    if (b->oom) return nb_set_error(NB_ERR_OOM, "repr: out of host memory");
    const char *nl = b->len ? strrchr(b->p, '\n') : NULL;
    size_t last = nl ? (size_t)(b->p + b->len - nl) + 1 : b->len + 2; /* PyTorch's len - rfind('\n') + 1 */
    for (int i = 0; i < ns; i++) {
        size_t l = strlen(suffix[i]);
        if (last + l + 2 > LINEWIDTH) {
            put(b, ",\n       %s", suffix[i]);
            last = 7 + l;
        } else {
            put(b, ", %s", suffix[i]);
            last += l + 2;
        }
    }
    put(b, ")");
    return b->oom ? nb_set_error(NB_ERR_OOM, "repr: out of host memory") : NB_OK;
}

int64_t nb_repr(const nb_tensor *t, char *buf, size_t len) {
    if (buf && len) buf[0] = 0;
    if (!t || (!buf && len)) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "repr: NULL %s", t ? "buffer" : "tensor");
        return -1;
    }
    sbuf b = {0};
    nb_status st = repr(t, &b);
    int64_t n = st ? -1 : (int64_t)b.len;
    if (!st && len) snprintf(buf, len, "%s", b.p);
    free(b.p);
    return n;
}

nb_status nb_print(const nb_tensor *t) {
    if (!t) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "print: NULL tensor");
        return nb_last_status();
    }
    sbuf b = {0};
    nb_status st = repr(t, &b);
    if (!st && printf("%s\n", b.p) < 0) st = nb_set_error(NB_ERR_IO, "print: cannot write to stdout");
    free(b.p);
    return st;
}
