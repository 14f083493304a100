/* runner.h - what the differential runner's op handlers share (runner.c,
 * runner_ops.c, runner_ops_nn.c). A handler reads its inputs c->in[] (any
 * may be NULL: the case passes NULL to the op) and its arguments c->args
 * (JSON, read with the helpers below), calls the nabla op and stores up to
 * RUNNER_MAX_OUT results in c->out[] (c->n_out of them), returning the op's
 * status. */
#ifndef NB_TORCH_DIFF_RUNNER_H
#define NB_TORCH_DIFF_RUNNER_H

#include <jansson.h>

#include "nabla.h"

#define RUNNER_MAX_IN 32
#define RUNNER_MAX_OUT 4

typedef struct dcase {
    nb_tensor *in[RUNNER_MAX_IN];
    int n_in;
    json_t *args;
    nb_tensor *out[RUNNER_MAX_OUT];
    int n_out;
} dcase;

/* Argument k of the case, or d when absent. ad also reads "nan", "inf". */
int64_t ai(const dcase *c, const char *k, int64_t d);
double ad(const dcase *c, const char *k, double d);
bool ab(const dcase *c, const char *k, bool d);
const char *as(const dcase *c, const char *k, const char *d);
/* A list argument into out (at most cap entries); its length, -1 if absent. */
int al(const dcase *c, const char *k, int64_t *out, int cap);
int ali(const dcase *c, const char *k, int *out, int cap);
/* The dtype named as PyTorch names it ("float32"), NB_DTYPE_COUNT if none. */
nb_dtype dtype_named(const char *s);

/* One result: the op's output, or its failure. */
#define OUT1(expr) \
    do { c->out[0] = (expr); c->n_out = 1; return c->out[0] ? NB_OK : nb_last_status(); } while (0)
/* A status-returning op that wrote outputs 0..n-1. */
#define OUTS(n, expr) \
    do { c->n_out = (n); return (expr); } while (0)

#endif
