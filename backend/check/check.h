/* check.h - what the shared contract checks have in common (internal).
 *
 * Each kernel slot whose check column in backend/nb_slots.def is 1 has a
 * check nb_check_<slot>, with the slot's parameters, in
 * backend/check/<family>.c. The slot's dispatcher (nb_kernel_<slot>,
 * backend/nb_backend_impl.h) runs it before any backend sees the call: it
 * checks what the slot's contract promises every backend (dtypes, shapes,
 * strides, dims, ranges of scalar arguments) and fails with the error set
 * naming the slot, so the kernels check only their own limits (cuDNN's
 * int32 sizes, the CPU's host-side index ranges). A check never reads
 * tensor data: it runs on the host before the kernel is enqueued.
 */
#ifndef NB_CHECK_H
#define NB_CHECK_H

#include "nb_backend_util.h"

/* Masks of dtypes (NB_DTM of nb_op_table.h). */
#define NB_CHK_F (NB_DTM(NB_F32) | NB_DTM(NB_F64))      /* float32, float64 */
#define NB_CHK_H (NB_DTM(NB_F16) | NB_DTM(NB_BF16))     /* the 16-bit floats */
#define NB_CHK_FH (NB_CHK_F | NB_CHK_H)                 /* every float */

/* Whether dt is a dtype and in mask (a bad value is in no mask). */
static inline bool nb_dtype_in(nb_dtype dt, unsigned mask) {
    return (unsigned)dt < NB_DTYPE_COUNT && (mask & NB_DTM(dt));
}

/* NB_ERR_INVALID_ARG "<slot>: dim d out of range for [..] dtype" unless
 * 0 <= dim < v->ndim. */
nb_status nb_check_dim(const char *slot, const nb_kview *v, int dim);
/* Each non-NULL view of vs[0..n): vs[0]'s shape (NB_ERR_SHAPE "<slot>:
 * shapes A and B differ"), vs[0]'s dtype, which is in `dtypes`
 * (NB_ERR_DTYPE "<slot>: needs <what> tensors of one dtype (A, B)"), and
 * contiguous where asked (NB_ERR_INVALID_ARG "<slot>: A must be
 * contiguous"). */
nb_status nb_check_alike(const char *slot, int n, const nb_kview *const *vs, unsigned dtypes, const char *what,
                         bool contiguous);

/* The norms' views. nb_check_rows: x a contiguous float32/float64 [R, M]
 * (NB_ERR_INVALID_ARG; NULL x too) and each non-NULL vs[i] of x's shape,
 * contiguous, in x's dtype (NB_ERR_SHAPE). nb_check_vector: v NULL (an
 * optional view left out) or a contiguous view of n elements of dt
 * (NB_ERR_SHAPE naming `what`). */
nb_status nb_check_rows(const char *slot, const nb_kview *x, const nb_kview *const *vs, int nv);
/* nb_check_rows that also takes float16/bfloat16 rows. */
nb_status nb_check_rows16(const char *slot, const nb_kview *x, const nb_kview *const *vs, int nv);
nb_status nb_check_vector(const char *slot, const char *what, const nb_kview *v, int64_t n, nb_dtype dt);

#endif
