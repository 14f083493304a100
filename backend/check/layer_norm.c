/* layer_norm.c - the shared contract checks of layer_norm and its backward:
 * x a contiguous float32/float64 [R, M], the other [R, M] views like it, and
 * the per-row [R] and per-column [M] vectors contiguous in x's dtype. */
#include "check.h"

nb_status nb_check_layer_norm(nb_backend *be, const nb_kview *out, const nb_kview *mean, const nb_kview *rstd,
                              const nb_layer_norm_args *a) {
    (void)be;
    const char *op = "layer_norm";
    const nb_kview *x = a->x;
    nb_status st = nb_check_rows(op, x, (const nb_kview *[]){out}, 1);
    if (st) return st;
    int64_t rows = x->shape[0], m = x->shape[1];
    st = nb_check_vector(op, "mean", mean, rows, x->dtype);
    if (!st) st = nb_check_vector(op, "rstd", rstd, rows, x->dtype);
    if (!st) st = nb_check_vector(op, "weight", a->w, m, x->dtype);
    if (!st) st = nb_check_vector(op, "bias", a->b, m, x->dtype);
    return st;
}

nb_status nb_check_layer_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gw, const nb_kview *gb,
                                       const nb_kview *gy, const nb_kview *mean, const nb_kview *rstd,
                                       const nb_layer_norm_args *a) {
    (void)be;
    const char *op = "layer_norm_backward";
    const nb_kview *x = a->x;
    nb_status st = nb_check_rows(op, x, (const nb_kview *[]){gy, gx}, 2);
    if (st) return st;
    int64_t rows = x->shape[0], m = x->shape[1];
    st = nb_check_vector(op, "mean", mean, rows, x->dtype);
    if (!st) st = nb_check_vector(op, "rstd", rstd, rows, x->dtype);
    if (!st) st = nb_check_vector(op, "weight", a->w, m, x->dtype);
    if (!st) st = nb_check_vector(op, "gweight", gw, m, x->dtype);
    if (!st) st = nb_check_vector(op, "gbias", gb, m, x->dtype);
    return st;
}
