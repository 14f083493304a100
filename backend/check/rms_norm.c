/* rms_norm.c - the shared contract checks of rms_norm, its backward and add_rms_norm: x a
 * contiguous float32/float64 [R, M] (the forward also float16/bfloat16 on a
 * backend whose norms_16bit is set), the other [R, M] views like it, rstd
 * [R] and the weights [M] contiguous in x's dtype. */
#include "check.h"

nb_status nb_check_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *rstd, const nb_kview *x,
                            const nb_kview *w, double eps) {
    (void)eps;
    const char *op = "rms_norm";
    /* 16-bit rows where the backend says its forward takes them (nb_backend_i.norms_16bit) */
    nb_status st = x && nb_dtype_in(x->dtype, NB_CHK_H) && be->iface->norms_16bit
                       ? nb_check_rows16(op, x, (const nb_kview *[]){out}, 1)
                       : nb_check_rows(op, x, (const nb_kview *[]){out}, 1);
    if (!st) st = nb_check_vector(op, "rstd", rstd, x->shape[0], x->dtype);
    if (!st) st = nb_check_vector(op, "weight", w, x->shape[1], x->dtype);
    return st;
}

nb_status nb_check_rms_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gy,
                                     const nb_kview *x, const nb_kview *w, const nb_kview *rstd) {
    (void)be;
    const char *op = "rms_norm_backward";
    nb_status st = nb_check_rows(op, x, (const nb_kview *[]){gy, gx}, 2);
    if (!st) st = nb_check_vector(op, "rstd", rstd, x->shape[0], x->dtype);
    if (!st) st = nb_check_vector(op, "weight", w, x->shape[1], x->dtype);
    if (!st) st = nb_check_vector(op, "gweight", gw, x->shape[1], x->dtype);
    return st;
}

nb_status nb_check_add_rms_norm(nb_backend *be, const nb_kview *out, const nb_kview *sum, const nb_kview *x,
                                const nb_kview *residual, const nb_kview *w, double eps) {
    (void)eps;
    const char *op = "add_rms_norm";
    const nb_kview *rows[3] = {out, sum, residual};
    nb_status st = x && nb_dtype_in(x->dtype, NB_CHK_H) && be->iface->norms_16bit ? nb_check_rows16(op, x, rows, 3)
                                                                                    : nb_check_rows(op, x, rows, 3);
    if (!st) st = nb_check_vector(op, "weight", w, x->shape[1], x->dtype);
    return st;
}
