/* progress.c - nb_progress: tqdm's progress bar (format_meter's layout). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "nb_extension.h"
#include "nb_progress.h"

struct nb_progress {
    nb_progress_options o;
    int64_t total, n, last_line_n;
    int last_tenth;
    int drawn; /* columns of the line on a terminal now (0: none) */
    double t0, last_draw;
    bool tty, utf8;
    char postfix[256];
};

/* Terminal columns of UTF-8 text (each character one column). */
static int columns(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool utf8_locale(void) {
    const char *v = getenv("LC_ALL");
    if (!v || !*v) v = getenv("LC_CTYPE");
    if (!v || !*v) v = getenv("LANG");
    return v && (strstr(v, "UTF-8") || strstr(v, "utf-8") || strstr(v, "UTF8") || strstr(v, "utf8"));
}

nb_progress *nb_progress_new(int64_t total, const nb_progress_options *opt) {
    nb_progress *p = calloc(1, sizeof *p);
    if (!p) return NB_FAIL(NB_ERR_OOM, "progress_new: out of host memory");
    p->o = opt ? *opt : (nb_progress_options){0};
    if (!p->o.file) p->o.file = stderr;
    if (!p->o.unit) p->o.unit = "it";
    if (!(p->o.mininterval > 0)) p->o.mininterval = 0.1;
    if (p->o.miniters <= 0) p->o.miniters = 1000;
    p->total = total > 0 ? total : 0;
    p->tty = isatty(fileno(p->o.file)) == 1;
    p->utf8 = utf8_locale();
    p->t0 = now();
    p->last_draw = -1e300;
    if (p->o.ncols <= 0) {
        struct winsize ws;
        const char *cols = getenv("COLUMNS");
        if (p->tty && !ioctl(fileno(p->o.file), TIOCGWINSZ, &ws) && ws.ws_col > 0) p->o.ncols = ws.ws_col;
        else if (cols && atoi(cols) > 0) p->o.ncols = atoi(cols);
        else p->o.ncols = 80;
    }
    if (p->tty && !p->o.disable) { /* the empty bar at once, as tqdm */
        char line[1024];
        nb_progress_format(p, line, sizeof line);
        fprintf(p->o.file, "\r%s", line);
        fflush(p->o.file);
        p->drawn = columns(line);
        p->last_draw = p->t0;
    }
    return p;
}

/* tqdm's format_interval: [h:]mm:ss */
static void interval(char *b, size_t len, double s) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(b, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(b, len, "%02ld:%02ld", t / 60, t % 60);
}

char *nb_progress_format(const nb_progress *p, char *buf, size_t len) {
    if (!p || !buf || !len) return NB_FAIL(NB_ERR_INVALID_ARG, "progress_format: NULL %s", p ? "buffer" : "bar");
    double el = now() - p->t0, rate = el > 0 && p->n > 0 ? (double)p->n / el : 0;
    char e[32], r[64], rest[32], right[512];
    interval(e, sizeof e, el);
    if (!rate) snprintf(r, sizeof r, "?%s/s", p->o.unit);
    else if (rate < 1) snprintf(r, sizeof r, "%5.2fs/%s", 1 / rate, p->o.unit);
    else snprintf(r, sizeof r, "%5.2f%s/s", rate, p->o.unit);
    const char *sep = p->postfix[0] ? ", " : "";
    char desc[300] = "";
    if (p->o.desc && *p->o.desc) snprintf(desc, sizeof desc, "%s: ", p->o.desc);
    if (!p->total) {
        snprintf(buf, len, "%s%lld [%s, %s%s%s]", desc, (long long)p->n, e, r, sep, p->postfix);
        return buf;
    }
    if (rate) interval(rest, sizeof rest, (double)(p->total - p->n) / rate);
    else snprintf(rest, sizeof rest, "?");
    double frac = p->n >= p->total ? 1 : (double)p->n / (double)p->total;
    char left[320];
    snprintf(left, sizeof left, "%s%3.0f%%|", desc, frac * 100);
    snprintf(right, sizeof right, "| %lld/%lld [%s<%s, %s%s%s]", (long long)p->n, (long long)p->total, e, rest, r, sep,
             p->postfix);
    int width = p->o.ncols - columns(left) - columns(right); /* columns: a desc may be UTF-8 */
    if (width > 200) width = 200;
    char bar[200 * 3 + 1];
    size_t k = 0;
    if (width > 0) { /* whole cells, then one cell in eighths (tenths in ASCII) */
        static const char *eighths[] = {" ", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589"};
        int parts = p->utf8 ? 8 : 10;
        int64_t fill = (int64_t)(frac * width * parts);
        int full = (int)(fill / parts), part = (int)(fill % parts);
        for (int i = 0; i < full; i++) {
            const char *c = p->utf8 ? "\u2588" : "#";
            memcpy(bar + k, c, strlen(c)), k += strlen(c);
        }
        if (full < width) {
            if (p->utf8) memcpy(bar + k, eighths[part], strlen(eighths[part])), k += strlen(eighths[part]);
            else bar[k++] = part ? (char)('0' + part) : ' ';
            for (int i = full + 1; i < width; i++) bar[k++] = ' ';
        }
    }
    bar[k] = 0;
    snprintf(buf, len, "%s%s%s", left, bar, right);
    return buf;
}

static void draw(nb_progress *p, bool final) {
    char line[1024];
    nb_progress_format(p, line, sizeof line);
    if (p->tty) { /* padded over a longer line drawn before, as tqdm */
        int w = columns(line);
        fprintf(p->o.file, "\r%s%*s%s", line, p->drawn > w ? p->drawn - w : 0, "", final ? "\n" : "");
        p->drawn = final ? 0 : w;
    } else {
        fprintf(p->o.file, "%s\n", line);
    }
    fflush(p->o.file);
}

void nb_progress_clear(nb_progress *p) {
    if (!p || !p->tty || !p->drawn) return;
    fprintf(p->o.file, "\r%*s\r", p->drawn, "");
    fflush(p->o.file);
    p->drawn = 0;
    p->last_draw = -1e300; /* redrawn at the next update */
}

void nb_progress_update(nb_progress *p, int64_t n) {
    if (!p || n < 0) return;
    p->n += n;
    if (p->o.disable) return;
    if (p->tty) {
        double t = now();
        if (t - p->last_draw >= p->o.mininterval) draw(p, false), p->last_draw = t;
    } else if (p->total) { /* a line at each tenth */
        int tenth = (int)(p->n >= p->total ? 10 : p->n * 10 / p->total);
        if (tenth > p->last_tenth && p->n < p->total) p->last_tenth = tenth, draw(p, false);
    } else if (p->n - p->last_line_n >= p->o.miniters) {
        p->last_line_n = p->n;
        draw(p, false);
    }
}

void nb_progress_set_postfix(nb_progress *p, const char *fmt, ...) {
    if (!p) return;
    p->postfix[0] = 0;
    if (!fmt) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->postfix, sizeof p->postfix, fmt, ap);
    va_end(ap);
}

int64_t nb_progress_count(const nb_progress *p) {
    return p ? p->n : (nb_set_error(NB_ERR_INVALID_ARG, "progress_count: NULL bar"), -1);
}

void nb_progress_close(nb_progress *p) {
    if (!p) return;
    if (!p->o.disable) draw(p, true);
    free(p);
}
