/* batch_norm.c - the shared contract checks of batch_norm and its backward:
 * x a contiguous float32/float64 [N, C, *], out/gx/gy like it, the
 * per-channel views contiguous [C] of x's dtype, and the statistics that
 * the mode (training or eval) reads given. */
#include "check.h"

static nb_status check_x(const char *name, const nb_kview *x, const nb_kview *other, const char *what) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!x) return nb_set_error(NB_ERR_INVALID_ARG, "%s: x is NULL", name);
    if (x->ndim < 2 || !nb_view_is_contiguous(x) || (x->dtype != NB_F32 && x->dtype != NB_F64))
        return nb_set_error(NB_ERR_SHAPE, "%s: x %s must be a contiguous float32/float64 [N, C, *] tensor", name,
                            nb_view_str(x, b1, sizeof b1));
    if (other && (!nb_view_same_shape(x, other) || other->dtype != x->dtype || !nb_view_is_contiguous(other)))
        return nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be contiguous and match x %s", name, what,
                            nb_view_str(other, b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    return NB_OK;
}

/* Per-channel views (each may be NULL): contiguous [C] of x's dtype. */
static nb_status check_chans(const char *name, int n, const char *const *what, const nb_kview *const *vs,
                             const nb_kview *x) {
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    for (int i = 0; i < n; i++) {
        const nb_kview *v = vs[i];
        if (v && (v->ndim != 1 || v->shape[0] != x->shape[1] || v->dtype != x->dtype || !nb_view_is_contiguous(v)))
            return nb_set_error(NB_ERR_SHAPE, "%s: %s %s must be a contiguous [C] tensor of x's dtype (x %s)", name,
                                what[i], nb_view_str(v, b1, sizeof b1), nb_view_str(x, b2, sizeof b2));
    }
    return NB_OK;
}

nb_status nb_check_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean,
                              const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    (void)be;
    const char *name = "batch_norm";
    static const char *const what[] = {"weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd"};
    const nb_kview *chans[] = {a->weight, a->bias, a->running_mean, a->running_var, save_mean, save_invstd};
    nb_status st = check_x(name, a->x, out, "out");
    if (!st) st = check_chans(name, 6, what, chans, a->x);
    if (st) return st;
    if ((a->running_mean == NULL) != (a->running_var == NULL))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: running_mean and running_var must be given together", name);
    if (a->training && (!save_mean || !save_invstd))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: training needs save_mean and save_invstd", name);
    if (!a->training && !a->running_mean)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: eval mode needs running_mean and running_var", name);
    return NB_OK;
}

nb_status nb_check_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight,
                                       const nb_kview *gbias, const nb_kview *gy, const nb_kview *save_mean,
                                       const nb_kview *save_invstd, const nb_batch_norm_args *a) {
    (void)be;
    const char *name = "batch_norm_backward";
    static const char *const what[] = {"gweight", "gbias", "weight", "save_mean", "save_invstd", "running_mean",
                                       "running_var"};
    const nb_kview *chans[] = {gweight, gbias, a->weight, save_mean, save_invstd, a->running_mean, a->running_var};
    nb_status st = check_x(name, a->x, gy, "gy");
    if (!st && gx) st = check_x(name, a->x, gx, "gx");
    if (!st) st = check_chans(name, 7, what, chans, a->x);
    if (st) return st;
    if (a->training ? (!save_mean || !save_invstd) : (!a->running_mean || !a->running_var))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s", name,
                            a->training ? "training needs save_mean and save_invstd"
                                        : "eval mode needs running_mean and running_var");
    return NB_OK;
}
