/* ops_common.c - input checks and the broadcasting helper shared by ops. */
#include "nb_autograd_impl.h"

bool nb_check_inputs(const char *op, int n, nb_tensor *const *inputs) {
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: input %d is NULL", op, i);
            return false;
        }
    for (int i = 1; i < n; i++) {
        nb_device a = inputs[0]->storage->device, b = inputs[i]->storage->device;
        if (a.type != b.type || a.index != b.index) {
            nb_set_error(NB_ERR_DEVICE, "%s: inputs on different devices (%d:%d and %d:%d)", op, (int)a.type, a.index,
                         (int)b.type, b.index);
            return false;
        }
    }
    return true;
}

bool nb_check_dtypes(const char *op, int n, nb_tensor *const *inputs, bool need_float) {
    for (int i = 0; i < n; i++) {
        if (inputs[i]->dtype != inputs[0]->dtype) {
            nb_set_error(NB_ERR_DTYPE, "%s: dtypes differ (%s and %s); cast with nb_to_dtype", op,
                         nb_dtype_name(inputs[0]->dtype), nb_dtype_name(inputs[i]->dtype));
            return false;
        }
        if (need_float && !nb_dtype_is_float(inputs[i]->dtype)) {
            nb_set_error(NB_ERR_DTYPE, "%s: needs float32 or float64, got %s", op, nb_dtype_name(inputs[i]->dtype));
            return false;
        }
    }
    return true;
}

nb_tensor *nb_empty_like(const nb_tensor *t) {
    return nb_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
}

nb_tensor *nb_sum_to_shape(nb_tensor *g, int ndim, const int64_t *shape) {
    if (!g) return NULL;
    int lead = g->ndim - ndim;
    NB_ASSERT(lead >= 0);
    int64_t kshape[NB_MAX_DIMS];
    bool any = lead > 0;
    for (int i = 0; i < g->ndim; i++) {
        kshape[i] = i < lead ? 1 : shape[i - lead];
        if (kshape[i] != g->shape[i]) any = true;
    }
    if (!any) {
        nb_retain(g);
        return nb_scope_adopt(g);
    }
    nb_tensor *r = nb_tensor_new(g->ndim, kshape, g->dtype, g->storage->device);
    if (!r) return NULL;
    nb_kview o = nb_kview_of(r), x = nb_kview_of(g);
    if (NB_CALL(g, reduce, NB_REDUCE_SUM, &o, &x, 1.0) != NB_OK) return NULL;
    /* drop the leading dims: a view with the target shape */
    int64_t strides[NB_MAX_DIMS];
    nb_contiguous_strides(ndim, shape, strides);
    return nb_tensor_view_of(r, ndim, shape, strides, 0);
}
