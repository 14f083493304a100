/* linalg.c - the shared contract checks of the linalg_solve, linalg_det, linalg_cholesky, linalg_qr, linalg_eigh, linalg_svd, linalg_lstsq slots (check.h). */
#include "check.h"

nb_status nb_check_linalg_solve(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)x, (void)a, (void)b;
    return NB_OK;
}

nb_status nb_check_linalg_det(nb_backend *be, const nb_kview *det, const nb_kview *sign, const nb_kview *logabsdet, const nb_kview *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)det, (void)sign, (void)logabsdet, (void)a;
    return NB_OK;
}

nb_status nb_check_linalg_cholesky(nb_backend *be, const nb_kview *l, const nb_kview *a, bool upper) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)l, (void)a, (void)upper;
    return NB_OK;
}

nb_status nb_check_linalg_qr(nb_backend *be, const nb_kview *q, const nb_kview *r, const nb_kview *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)q, (void)r, (void)a;
    return NB_OK;
}

nb_status nb_check_linalg_eigh(nb_backend *be, const nb_kview *w, const nb_kview *v, const nb_kview *a, bool upper) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)w, (void)v, (void)a, (void)upper;
    return NB_OK;
}

nb_status nb_check_linalg_svd(nb_backend *be, const nb_kview *u, const nb_kview *s, const nb_kview *vh, const nb_kview *a) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)u, (void)s, (void)vh, (void)a;
    return NB_OK;
}

nb_status nb_check_linalg_lstsq(nb_backend *be, const nb_kview *x, const nb_kview *a, const nb_kview *b) {
    /* STUB: not yet moved from the backends */
    (void)be, (void)x, (void)a, (void)b;
    return NB_OK;
}
