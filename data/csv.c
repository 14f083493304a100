/* csv.c - numpy.loadtxt for files of numbers: delimited text into a 2-D
 * tensor. Numbers are read in the C locale whatever the program's (a
 * German locale would read "1.5" as 1), floats with strtod and integers
 * with strtoll so int64 ids keep every bit. (newlocale and uselocale are
 * POSIX 2008; meson builds with _GNU_SOURCE.) */
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_extension.h"

typedef struct csv_parse {
    const char *path;
    nb_csv_options o;
    bool integer;     /* parse as int64 (integer dtypes), else as double */
    int64_t lo, hi;   /* an integer dtype's range */
    union {
        double *f;
        int64_t *i;
    } v;
    int64_t n, cap;   /* values kept, room (8 bytes each) */
    int64_t rows, cols;
} csv_parse;

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Room for k more values. */
static nb_status reserve(csv_parse *p, int64_t k) {
    if (p->n + k <= p->cap) return NB_OK;
    int64_t cap = p->cap ? 2 * p->cap : 1024;
    while (cap < p->n + k) cap *= 2;
    void *nv = realloc(p->v.f, (size_t)cap * sizeof(double));
    if (!nv) return nb_set_error(NB_ERR_OOM, "csv_load: out of host memory");
    p->v.f = nv, p->cap = cap;
    return NB_OK;
}

/* The field [field, field + len) as a number into value slot `at`. */
static nb_status parse_field(csv_parse *p, const char *field, size_t len, int64_t at, int64_t line, int64_t col) {
    char tmp[512];
    while (len && is_blank(*field)) field++, len--;
    while (len && is_blank(field[len - 1])) len--;
    if (len >= 2 && field[0] == '"' && field[len - 1] == '"') field++, len -= 2; /* a quoted number */
    if (!len)
        return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: column %lld is empty", p->path, (long long)line,
                            (long long)col + 1);
    if (len >= sizeof tmp)
        return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: column %lld is %zu characters, not a number",
                            p->path, (long long)line, (long long)col + 1, len);
    memcpy(tmp, field, len), tmp[len] = 0;
    char *end;
    errno = 0;
    if (p->integer) {
        long long x = strtoll(tmp, &end, 10);
        if (*end || errno || x < p->lo || x > p->hi)
            return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: column %lld: '%s' is not an integer in [%lld, %lld]",
                                p->path, (long long)line, (long long)col + 1, tmp, (long long)p->lo,
                                (long long)p->hi);
        p->v.i[at] = x;
    } else {
        double x = strtod(tmp, &end); /* overflow gives inf, as numpy's float() does */
        if (*end)
            return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: column %lld: '%s' is not a number", p->path,
                                (long long)line, (long long)col + 1, tmp);
        p->v.f[at] = x;
    }
    return NB_OK;
}

/* Where column c's value goes in its row (usecols order), or -1 when it is not kept. */
static int64_t kept_at(const csv_parse *p, int64_t c) {
    if (!p->o.usecols) return c;
    for (int i = 0; i < p->o.n_usecols; i++)
        if (p->o.usecols[i] == c) return i;
    return -1;
}

/* One line [s, e): its fields as a row, or nothing for a blank line or a comment. */
static nb_status parse_line(csv_parse *p, const char *s, const char *e, int64_t line) {
    const char *hash = memchr(s, '#', (size_t)(e - s));
    if (hash) e = hash;
    const char *q = s;
    while (q < e && is_blank(*q)) q++;
    if (q == e) return NB_OK; /* blank lines are skipped, as numpy does */
    bool ws = p->o.delimiter == ' ';
    if (ws) s = q;
    int64_t col = 0, kept = 0, start = p->n;
    for (const char *f = s;;) {
        const char *fe = f;
        if (ws) while (fe < e && !is_blank(*fe)) fe++;
        else while (fe < e && *fe != p->o.delimiter) fe++;
        int64_t at = kept_at(p, col);
        if (at >= 0) {
            nb_status st = reserve(p, p->o.usecols ? p->o.n_usecols : col + 1);
            if (!st) st = parse_field(p, f, (size_t)(fe - f), start + at, line, col);
            if (st) return st;
            kept++;
        }
        col++;
        if (fe >= e) break;
        f = fe + 1;
        if (ws) {
            while (f < e && is_blank(*f)) f++;
            if (f >= e) break; /* trailing blanks */
        }
    }
    if (p->o.usecols && kept < p->o.n_usecols)
        for (int i = 0; i < p->o.n_usecols; i++)
            if (p->o.usecols[i] >= col)
                return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: %lld columns, no column %lld (usecols)",
                                    p->path, (long long)line, (long long)col, (long long)p->o.usecols[i]);
    p->n = start + kept;
    if (p->rows == 0) p->cols = kept;
    else if (kept != p->cols)
        return nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: %lld columns, the first row has %lld", p->path,
                            (long long)line, (long long)col, (long long)p->cols);
    p->rows++;
    return NB_OK;
}

nb_tensor *nb_csv_load(const char *path, nb_csv_options o) {
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "csv_load: NULL path"), NULL;
    if (!o.delimiter) o.delimiter = ',';
    nb_dtype dt = o.dtype;
    if (dt < 0 || dt >= NB_DTYPE_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "csv_load: dtype %d is not a dtype", (int)dt), NULL;
    if (o.delimiter == '\n' || o.delimiter == '#' || o.delimiter == '"' || o.skip_rows < 0 || o.max_rows < 0 ||
        o.n_usecols < 0 || (o.n_usecols > 0 && !o.usecols))
        return nb_set_error(NB_ERR_INVALID_ARG, "csv_load: bad options (delimiter '%c', skip_rows %lld, max_rows %lld, "
                            "%d usecols)", o.delimiter, (long long)o.skip_rows, (long long)o.max_rows,
                            o.n_usecols), NULL;
    if (!o.n_usecols) o.usecols = NULL;
    for (int i = 0; o.usecols && i < o.n_usecols; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++) dup = dup || o.usecols[j] == o.usecols[i];
        if (o.usecols[i] < 0 || dup)
            return nb_set_error(NB_ERR_INVALID_ARG, "csv_load: usecols[%d] = %lld is negative or repeated", i,
                                (long long)o.usecols[i]), NULL;
    }
    csv_parse p = {.path = path, .o = o};
    p.integer = !nb_dtype_is_float(dt);
    p.lo = dt == NB_I32 ? INT32_MIN : dt == NB_I64 ? INT64_MIN : dt == NB_I16 ? INT16_MIN : dt == NB_I8 ? INT8_MIN : 0;
    p.hi = dt == NB_I32 ? INT32_MAX : dt == NB_I64 ? INT64_MAX : dt == NB_I16 ? INT16_MAX : dt == NB_I8 ? INT8_MAX
         : dt == NB_U8 ? 255 : 1;
    size_t len;
    uint8_t *raw = nb_data_read_file("csv_load", path, &len);
    if (!raw) return NULL;
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    nb_status st = c ? NB_OK : nb_set_error(NB_ERR_OOM, "csv_load: no C locale");
    const char *s = (const char *)raw, *end = s + len;
    int64_t line = 0;
    for (; !st && s < end && (!o.max_rows || p.rows < o.max_rows);) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        if (!e) e = end;
        line++;
        if (memchr(s, 0, (size_t)(e - s)))
            st = nb_set_error(NB_ERR_FORMAT, "csv_load: %s:%lld: a NUL byte (not a text file)", path, (long long)line);
        else if (line > o.skip_rows) st = parse_line(&p, s, e, line);
        s = e + 1;
    }
    if (c) uselocale(old), freelocale(c);
    free(raw);
    nb_tensor *r = NULL;
    if (!st) {
        if (!p.rows) p.cols = o.usecols ? o.n_usecols : 0;
        int64_t shape[2] = {p.rows, p.cols};
        nb_scope *sc = nb_op_scope_begin();
        nb_tensor *wide = nb_from_data(p.v.f ? (const void *)p.v.f : (const void *)&p, 2, shape,
                                       p.integer ? NB_I64 : NB_F64);
        nb_tensor *t = wide && dt != nb_dtype_of(wide) ? nb_to_dtype(wide, dt) : wide;
        r = nb_scope_return(sc, t);
    }
    free(p.v.f);
    return r;
}
