/* softmax.c - the shared contract checks of the softmax slots (check.h):
 * out, x (and gx, gy, y) of one shape and one float32/float64 dtype,
 * contiguous, and a dim of theirs. */
#include "check.h"

static nb_status check_softmax_views(const char *slot, int n, const nb_kview *const *vs, int dim) {
    nb_status st = nb_check_dim(slot, vs[0], dim);
    return st ? st : nb_check_alike(slot, n, vs, NB_CHK_F, "float32 or float64", true);
}

nb_status nb_check_softmax(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim, bool log) {
    (void)be;
    return check_softmax_views(log ? "log_softmax" : "softmax", 2, (const nb_kview *[]){x, out}, dim);
}

nb_status nb_check_softmax_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gy, const nb_kview *y,
                                    int dim, bool log) {
    (void)be;
    return check_softmax_views(log ? "log_softmax_backward" : "softmax_backward", 3,
                               (const nb_kview *[]){y, gy, gx}, dim);
}
