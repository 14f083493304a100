/* ops_cast.c - nb_to_dtype (Tensor.to(dtype)): the cast forward through the
 * backend's copy slot and its backward (the gradient cast back to the input's
 * dtype). Kernel: backend/cpu/cast.c. Tests: tests/test_ops_cast.c. */
#include "nb_autograd_impl.h"

/* ---- casts ------------------------------------------------------------- */

bool nb_cast_record(nb_tensor *t, nb_tensor *out) {
    bool failed = false;
    if (nb_dtype_is_float(out->dtype)) nb_record(NB_OP_TO_DTYPE, out, 1, &t, &failed);
    return !failed;
}

/* t cast to dt, contiguous; with keep_transposed a transposed matrix
 * stays transposed (PyTorch's preserve_format for that layout): the cast
 * reads and writes whole rows, and for the gradient of a transposed
 * weight (autocast.c) the transpose's backward then hands the weight a
 * contiguous gradient. */
static nb_tensor *to_dtype_impl(nb_tensor *t, nb_dtype dt, bool keep_transposed) {
    if (!nb_check_inputs("to_dtype", 1, &t)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) return NB_FAIL(NB_ERR_DTYPE, "to_dtype: bad dtype %d", (int)dt);
    bool tr = keep_transposed && t->ndim == 2 && t->shape[0] > 1 && t->shape[1] > 1 && t->strides[0] == 1 &&
              t->strides[1] == t->shape[0];
    nb_tensor *buf = tr ? nb_tensor_new(2, (int64_t[]){t->shape[1], t->shape[0]}, dt, t->storage->device)
                        : nb_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    nb_tensor *out = tr && buf ? nb_tensor_view_of(buf, 2, t->shape, (int64_t[]){1, t->shape[0]}, 0) : buf;
    if (!out) return NULL;
    nb_kview o = nb_kview_of(buf), vt = nb_kview_of(t);
    if (tr) /* both as [cols, rows], dense: a flat copy */
        vt.shape[0] = t->shape[1], vt.shape[1] = t->shape[0], vt.strides[0] = t->strides[1], vt.strides[1] = 1;
    if (nb_kernel_copy(NB_BE(t), &o, &vt) != NB_OK) return NULL;
    return nb_cast_record(t, out) ? out : NULL;
}

nb_status nb_bw_cast(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    if (n->autocast_cast && g->dtype == n->in[0]->dtype) { /* float32 already (nb_grad_f32_ok): handed on */
        /* Nothing outside sees an autocast cast's output, so g was made in
         * this pass by a rule or the engine (never the caller's seed or a
         * hook's tensor): the node's reference is dropped (g stays the pass
         * scope's), so a leaf may keep g as its .grad without a copy. */
        n->grad_acc = NULL;
        if (atomic_load(&g->refcount) > 1) nb_release(g);
        else if (!nb_scope_adopt(g)) return nb_last_status(); /* released: out of host memory */
        gin[0] = g;
        return NB_OK;
    }
    nb_scope *s = nb_op_scope_begin();
    gin[0] = nb_scope_return(s, to_dtype_impl(g, n->in[0]->dtype, true));
    return gin[0] ? NB_OK : nb_last_status();
}

nb_tensor *nb_to_dtype(nb_tensor *t, nb_dtype dt) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, to_dtype_impl(t, dt, false));
}
