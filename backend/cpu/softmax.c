/* softmax.c - CPU softmax / log_softmax along a dim and their backward
 * (cross entropy is in loss.c). A contiguous tensor is seen as [outer, size, inner] around
 * dim: with inner == 1 each row is contiguous; otherwise blocks of up to
 * SOFTMAX_COLS neighbouring columns are processed together so memory is read
 * in rows. Every reduction over `size` runs sequentially in a fixed order
 * (float32 accumulates in double) and threads split rows or column blocks,
 * so results do not depend on the thread count. Formulas (PyTorch's):
 *   softmax y = exp(x - max) / sum exp(x - max)   (float32 rows: vector exp)
 *   log_softmax y = (x - max) - log(sum exp(x - max))
 *   softmax backward gx = y * (gy - sum(gy * y))
 *   log_softmax backward gx = gy - exp(y) * sum(gy) */
#include <string.h>
#include <tgmath.h>

#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"
#include "unary_loops.h"

#define SOFTMAX_COLS 64

typedef struct sm_job {
    char *out;             /* y (forward) or gx (backward) */
    const char *x, *y, *g; /* x (forward); y and gy (backward) */
    int64_t outer, size, inner, ncb;
    bool log;
} sm_job;

#define MAXF(x, y) ((x) != (x) || (x) > (y) ? (x) : (y))

/* A row's max and sum of exp(x - max) (storing the exps in y unless NULL):
 * float32 through the vector helpers of unary_loops.h (same bits at every
 * instruction-set level), float64 sequentially with libm. */
static double row_max_f64(const double *x, int64_t n) {
    double mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = MAXF(x[i], mx);
    return mx;
}
static double row_sum_exp_f64(const double *x, int64_t n, double mx, double *y) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = exp(x[i] - mx);
        if (y) y[i] = e;
        sum += e;
    }
    return sum;
}
static float row_max_f32(const float *x, int64_t n) { return nb_vmax(x, n); }
static double row_sum_exp_f32(const float *x, int64_t n, float mx, float *y) { return nb_vsum_exp(x, n, mx, y); }

#define NB_TEMPLATE "softmax.t.h"
#include "template_floats.h"

/* Fills the [outer, size, inner] geometry of a (checked: backend/check/softmax.c). */
static void sm_setup(sm_job *j, const nb_kview *a, int dim) {
    j->outer = j->inner = 1;
    for (int d = 0; d < dim; d++) j->outer *= a->shape[d];
    for (int d = dim + 1; d < a->ndim; d++) j->inner *= a->shape[d];
    j->size = a->shape[dim];
    j->ncb = (j->inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
}

static void sm_launch(sm_job *j, bool f32, nb_cpu_range_fn rows32, nb_cpu_range_fn rows64,
                      nb_cpu_range_fn cols32, nb_cpu_range_fn cols64) {
    if (j->outer * j->size * j->inner == 0) return;
    if (j->inner == 1)
        nb_cpu_parallel_for(j->outer, NB_CPU_GRAIN / j->size + 1, f32 ? rows32 : rows64, j);
    else
        nb_cpu_parallel_for(j->outer * j->ncb, NB_CPU_GRAIN / (j->size * SOFTMAX_COLS) + 1,
                            f32 ? cols32 : cols64, j);
}

nb_status nb_cpu_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log) {
    (void)be;
    sm_job j = {.out = out->data, .x = x->data, .log = log};
    sm_setup(&j, x, dim);
    sm_launch(&j, x->dtype == NB_F32, sm_rows_f32, sm_rows_f64, sm_cols_f32, sm_cols_f64);
    return NB_OK;
}

nb_status nb_cpu_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *y, int dim, bool log) {
    (void)be;
    sm_job j = {.out = gx->data, .y = y->data, .g = gy->data, .log = log};
    sm_setup(&j, y, dim);
    sm_launch(&j, y->dtype == NB_F32, smb_rows_f32, smb_rows_f64, smb_cols_f32, smb_cols_f64);
    return NB_OK;
}
