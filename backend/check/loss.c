/* loss.c - the shared contract checks of cross_entropy and its backward:
 * contiguous float logits [n, c] (and glogits like them), int64 target [n],
 * per-row tensors [n] (float32 for 16-bit logits). The targets' values are
 * the backends' to check (the CPU reads them on the host, CUDA's kernels
 * report through the stream's error word). */
#include "check.h"

/* dt is one of the dtypes in mask m (NB_DTM bits). */
static nb_status check_ce(const char *name, const nb_kview *x, const nb_kview *t, const nb_kview *const *rows,
                          int nrows, const nb_kview *mat2) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    bool fl = nb_dtype_in(x->dtype, NB_CHK_FH);
    nb_dtype rdt = nb_dtype_is_16bit(x->dtype) ? NB_F32 : x->dtype; /* the per-row tensors */
    if (x->ndim != 2 || !fl || !nb_view_is_contiguous(x) ||
        (mat2 && (!nb_view_same_shape(x, mat2) || mat2->dtype != x->dtype || !nb_view_is_contiguous(mat2))))
        return nb_set_error(NB_ERR_SHAPE, "%s: logits %s must be a contiguous float [n, c] matrix", name,
                            nb_view_str(x, b1, sizeof b1));
    int64_t n = x->shape[0];
    if (t->ndim != 1 || t->shape[0] != n || t->dtype != NB_I64)
        return nb_set_error(NB_ERR_SHAPE, "%s: target %s must be int64 [%lld] for logits %s", name,
                            nb_view_str(t, b1, sizeof b1), (long long)n, nb_view_str(x, b2, sizeof b2));
    for (int i = 0; i < nrows; i++)
        if (rows[i]->ndim != 1 || rows[i]->shape[0] != n || rows[i]->dtype != rdt)
            return nb_set_error(NB_ERR_SHAPE, "%s: per-row tensor %s must be %s [%lld]", name,
                                nb_view_str(rows[i], b1, sizeof b1), nb_dtype_name(rdt), (long long)n);
    return NB_OK;
}

nb_status nb_check_cross_entropy(nb_backend *be, const nb_kview *loss, const nb_kview *lse, const nb_kview *valid,
                                 const nb_kview *logits, const nb_kview *target, int64_t ignore_index) {
    (void)be, (void)ignore_index;
    return check_ce("cross_entropy", logits, target, (const nb_kview *[]){loss, lse, valid}, valid ? 3 : 2, NULL);
}

nb_status nb_check_cross_entropy_backward(nb_backend *be, const nb_kview *glogits, const nb_kview *gloss,
                                          const nb_kview *logits, const nb_kview *lse, const nb_kview *target,
                                          int64_t ignore_index) {
    (void)be, (void)ignore_index;
    /* a 16-bit gradient of other logits: a dtype error (float32 and float64
     * ones fail check_ce's matrix test) */
    if (nb_dtype_is_16bit(logits->dtype) && glogits->dtype != logits->dtype)
        return nb_set_error(NB_ERR_DTYPE, "cross_entropy_backward: glogits %s, logits %s",
                            nb_dtype_name(glogits->dtype), nb_dtype_name(logits->dtype));
    return check_ce("cross_entropy_backward", logits, target, (const nb_kview *[]){gloss, lse}, 2, glogits);
}
