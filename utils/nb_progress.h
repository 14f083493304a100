/* nb_progress.h - a progress bar for long loops (tqdm's): count, rate,
 * elapsed time and ETA, redrawn in place on a terminal, plain lines
 * otherwise.
 *
 *   nb_progress *bar = nb_progress_new(steps, &(nb_progress_options){.desc = "train", .unit = "step"});
 *   for (int64_t i = 0; i < steps; i++) {
 *       ...
 *       nb_progress_set_postfix(bar, "loss=%.4f", loss);   // shown after the rate
 *       nb_progress_update(bar, 1);
 *   }
 *   nb_progress_close(bar);
 *
 * On a terminal (isatty), the line
 *   train:  45%|███████▏        | 450/1000 [00:05<00:06, 88.21step/s, loss=0.1234]
 * is redrawn with a carriage return at most every mininterval seconds and
 * ended with a newline by nb_progress_close; its width is the terminal's.
 * When the file is not a terminal (a log, a pipe), the same text is
 * printed as whole lines: one at each tenth of total (every
 * miniters updates when total is unknown) and one at close, so logs stay
 * readable. Unicode blocks are drawn when the locale's charset is UTF-8
 * (LC_ALL, LC_CTYPE, LANG), '#' otherwise. Formats follow tqdm's
 * format_meter. */
#ifndef NB_PROGRESS_H
#define NB_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A progress bar (opaque): nb_progress_new makes one, nb_progress_close frees it. */
typedef struct nb_progress nb_progress;

/* tqdm's arguments; zero-initialised means its defaults. */
typedef struct nb_progress_options {
    const char *desc;   /* the prefix ("desc: "); NULL: none */
    const char *unit;   /* the rate's unit; NULL: "it" */
    FILE *file;         /* where it is drawn; NULL: stderr */
    double mininterval; /* least seconds between redraws on a terminal; 0: 0.1 */
    int64_t miniters;   /* with total unknown and no terminal: a line every miniters updates; 0: 1000 */
    int ncols;          /* the line's width; 0: the terminal's (COLUMNS, then 80) */
    bool disable;       /* draw nothing (updates still count) */
} nb_progress_options;

/* A bar over total steps (total <= 0: unknown, no percentage or ETA);
 * opt may be NULL. Returns NULL only when out of host memory (NB_ERR_OOM). */
nb_progress *nb_progress_new(int64_t total, const nb_progress_options *opt);
/* Adds n steps (n >= 0) and redraws if due. NULL: no-op. */
void nb_progress_update(nb_progress *p, int64_t n);
#if defined(__GNUC__) || defined(__clang__)
/* Text shown after the rate (printf-style; at most 255 bytes kept), e.g.
 * "loss=0.1234"; NULL clears it. Shown at the next redraw. NULL p: no-op. */
void nb_progress_set_postfix(nb_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#else
/* As above (compilers without the format attribute). */
void nb_progress_set_postfix(nb_progress *p, const char *fmt, ...);
#endif
/* The steps counted so far (-1, NB_ERR_INVALID_ARG, for NULL). */
int64_t nb_progress_count(const nb_progress *p);
/* The bar's text as it would be drawn now, without the carriage return or
 * newline, into buf (at most len bytes, NUL-terminated); returns buf, or
 * NULL (NB_ERR_INVALID_ARG) for NULL p, buf or len 0. */
char *nb_progress_format(const nb_progress *p, char *buf, size_t len);
/* Erases the bar from the terminal line (tqdm.write's first half), so that
 * the caller can print a line of its own there; the next update draws it
 * again below. Nothing when not on a terminal. NULL: no-op. */
void nb_progress_clear(nb_progress *p);
/* Draws the final state, ends the line and frees the bar. NULL: no-op. */
void nb_progress_close(nb_progress *p);

#ifdef __cplusplus
}
#endif

#endif
