/* rope.c - the CPU's rotary position embedding (Su et al. 2021, "RoFormer:
 * enhanced transformer with rotary position embedding"), in the rotate-half
 * layout of Llama and Hugging Face's apply_rotary_pos_emb: the pairs are
 * (x[i], x[i + D/2]), not adjacent elements. For x [N, T, D] and tables
 * cos, sin [T, D/2]:
 *   out[i]       = x[i] cos - x[i + h] sin
 *   out[i + h]   = x[i + h] cos + x[i] sin          (h = D/2)
 * and with inverse the angle is negated (sin -> -sin), which is the
 * backward: a rotation's transpose is its inverse. Rows are independent, so
 * any split over threads gives the same bits. */
#include "cpu_common.h"
#include "iter.h"
#include "nb_impl.h"
#include "threadpool.h"

typedef struct rope_job {
    char *out;
    const char *x, *cos, *sin;
    int64_t T, h;
    bool inverse;
} rope_job;

#define T_ float
#define S f32
#include "rope.t.h"
#define T_ double
#define S f64
#include "rope.t.h"

nb_status nb_cpu_rope(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *cos,
                      const nb_kview *sin, bool inverse) {
    (void)be; /* checked: backend/check/rope.c */
    int64_t T = x->shape[1], h = x->shape[2] / 2;
    int64_t rows = x->shape[0] * T;
    if (rows == 0 || h == 0) return NB_OK;
    rope_job j = {.out = out->data, .x = x->data, .cos = cos->data, .sin = sin->data, .T = T, .h = h,
                  .inverse = inverse};
    nb_cpu_parallel_for(rows, NB_CPU_GRAIN / (2 * h) + 1, x->dtype == NB_F32 ? rope_rows_f32 : rope_rows_f64, &j);
    return NB_OK;
}
