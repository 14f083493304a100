/* ops_cast.c - nb_to_dtype (Tensor.to(dtype)): the cast forward through the
 * backend's copy slot and its backward (the gradient cast back to the input's
 * dtype). Kernel: backend/cpu/cast.c. Tests: tests/test_ops_cast.c. */
#include "nb_autograd_impl.h"

/* ---- casts ------------------------------------------------------------- */

/* g cast to dt; a transposed matrix (the gradient of a transposed
 * weight, autocast.c) keeps its layout, as PyTorch's preserve_format: the
 * cast reads and writes whole rows, and the transpose's backward then
 * hands the weight a contiguous gradient. */
static nb_tensor *cast_keep_layout(nb_tensor *g, nb_dtype dt) {
    bool transposed = g->ndim == 2 && g->shape[0] > 1 && g->shape[1] > 1 && g->strides[0] == 1 &&
                      g->strides[1] == g->shape[0];
    if (!transposed) return nb_to_dtype(g, dt);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *buf = nb_tensor_new(2, (int64_t[]){g->shape[1], g->shape[0]}, dt, g->storage->device);
    nb_tensor *out = buf ? nb_tensor_view_of(buf, 2, g->shape, (int64_t[]){1, g->shape[0]}, 0) : NULL;
    if (!out) return nb_scope_return(s, NULL);
    nb_kview o = nb_kview_of(buf), vg = nb_kview_of(g); /* both as [cols, rows], dense: a flat copy */
    vg.shape[0] = g->shape[1], vg.shape[1] = g->shape[0], vg.strides[0] = g->strides[1], vg.strides[1] = 1;
    if (nb_kernel_copy(NB_BE(g), &o, &vg) != NB_OK || !nb_cast_record(g, out)) return nb_scope_return(s, NULL);
    return nb_scope_return(s, out);
}

nb_status nb_bw_cast(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = cast_keep_layout(g, n->in[0]->dtype);
    return gin[0] ? NB_OK : nb_last_status();
}

bool nb_cast_record(nb_tensor *t, nb_tensor *out) {
    bool failed = false;
    if (nb_dtype_is_float(out->dtype)) nb_record(NB_OP_TO_DTYPE, out, 1, &t, &failed);
    return !failed;
}

static nb_tensor *to_dtype_impl(nb_tensor *t, nb_dtype dt) {
    if (!nb_check_inputs("to_dtype", 1, &t)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "to_dtype: bad dtype %d", (int)dt);
    nb_tensor *out = nb_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (!out) return NULL;
    nb_kview o = nb_kview_of(out), vt = nb_kview_of(t);
    if (nb_kernel_copy(NB_BE(t), &o, &vt) != NB_OK) return NULL;
    return nb_cast_record(t, out) ? out : NULL;
}

nb_tensor *nb_to_dtype(nb_tensor *t, nb_dtype dt) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, to_dtype_impl(t, dt));
}
