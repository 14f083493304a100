/* ops_cast.c - nb_to_dtype (Tensor.to(dtype)): the cast forward through the
 * backend's copy slot and its backward (the gradient cast back to the input's
 * dtype). Kernel: backend/cpu/cast.c. Tests: tests/test_ops_cast.c. */
#include "nb_autograd_impl.h"

/* ---- casts ------------------------------------------------------------- */

nb_status nb_bw_cast(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb_to_dtype(g, n->in[0]->dtype);
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
