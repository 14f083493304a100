/* ops_loss.c - cross_entropy (fused log-softmax + NLL) and mse_loss: forward
 * dispatch and backward rules. Kernels: backend/cpu/loss.c. Tests:
 * tests/test_ops_loss.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- cross_entropy ------------------------------------------------------------ */

/* saved: logits, lse, target; p.cross_entropy.ignore_index */
/* create_graph: (softmax(logits) - onehot(target)) * g per row, rows whose
 * target is ignore_index zeroed, as recorded ops (the softmax recomputed
 * from the connected logits, not the saved log-sum-exp). */
static nb_tensor *ce_grad_ops(nb_tensor *g, nb_tensor *logits, nb_tensor *target, int64_t ignore_index) {
    int64_t c = logits->shape[1];
    nb_tensor *classes = nb_reshape(nb_arange_on(0, (double)c, 1, NB_I64, logits->storage->device), NB_SHAPE(1, c));
    nb_tensor *t = nb_unsqueeze(target, 1);
    nb_tensor *onehot = nb_to_dtype(nb_eq(classes, t), logits->dtype);
    nb_tensor *valid = nb_to_dtype(nb_ne_scalar(t, (double)ignore_index), logits->dtype);
    return nb_mul(nb_sub(nb_softmax(logits, 1), onehot), nb_mul(nb_unsqueeze(g, 1), valid));
}

static nb_status ce_backward(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *logits = n->saved[0], *lse = n->saved[1], *target = n->saved[2];
    if (nb_needs_grad(2, (nb_tensor *[]){g, logits})) {
        gin[0] = ce_grad_ops(g, logits, target, n->p.cross_entropy.ignore_index);
        return gin[0] ? NB_OK : nb_last_status();
    }
    nb_tensor *gc = nb_contiguous(g), *gx = nb_empty_like(logits);
    if (!gc || !gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(gc), vx = nb_kview_of(logits), vl = nb_kview_of(lse),
             vt = nb_kview_of(target);
    gin[0] = gx;
    return NB_CALL(logits, cross_entropy_backward, &vgx, &vg, &vx, &vl, &vt, n->p.cross_entropy.ignore_index);
}

/* Per-row losses [N] of logits [N, C] (one node, fused backward). */
static nb_tensor *ce_rows(nb_tensor *logits, nb_tensor *target, int64_t ignore_index) {
    nb_tensor *x = nb_contiguous(logits), *t = nb_contiguous(target);
    int64_t n = logits->shape[0];
    nb_tensor *loss = nb_tensor_new(1, &n, logits->dtype, logits->storage->device);
    nb_tensor *lse = nb_tensor_new(1, &n, logits->dtype, logits->storage->device);
    if (!x || !t || !loss || !lse) return NULL;
    nb_kview vl = nb_kview_of(loss), vs = nb_kview_of(lse), vx = nb_kview_of(x), vt = nb_kview_of(t);
    if (NB_CALL(x, cross_entropy, &vl, &vs, &vx, &vt, ignore_index) != NB_OK) return NULL;
    bool failed;
    nb_node *node = nb_record(NB_OP_CROSS_ENTROPY, ce_backward, loss, 1, &logits, &failed);
    if (failed) return NULL;
    if (node) {
        node->p.cross_entropy.ignore_index = ignore_index;
        nb_save(node, 0, x), nb_save(node, 1, lse), nb_save(node, 2, t);
    }
    return loss;
}

static nb_tensor *ce_impl(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_options o) {
    nb_tensor *in[2] = {logits, target};
    if (!nb_check_inputs("cross_entropy", 2, in) || !nb_check_dtypes(NB_OP_CROSS_ENTROPY, 1, in)) return NULL;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
        return NB_FAIL(NB_ERR_SHAPE, "cross_entropy: logits %s and target %s; expected [N, C] and [N]",
                       nb_fmt_shape(logits->ndim, logits->shape, a, sizeof a),
                       nb_fmt_shape(target->ndim, target->shape, b, sizeof b));
    if (target->dtype != NB_I64)
        return NB_FAIL(NB_ERR_DTYPE, "cross_entropy: target must be int64 class indices, got %s",
                       nb_dtype_name(target->dtype));
    if ((unsigned)o.reduction > NB_REDUCTION_NONE)
        return NB_FAIL(NB_ERR_INVALID_ARG, "cross_entropy: bad reduction %d", (int)o.reduction);
    nb_tensor *rows = ce_rows(logits, target, o.ignore_index);
    if (!rows || o.reduction == NB_REDUCTION_NONE) return rows;
    nb_tensor *total = nb_sum(rows, NULL, 0, false);
    if (o.reduction == NB_REDUCTION_SUM) return total;
    /* mean over the targets that count (PyTorch: NaN when none does) */
    nb_tensor *ign = nb_scalar_like(target, (double)o.ignore_index, NB_I64);
    nb_tensor *count = nb_sum(nb_to_dtype(nb_ne(target, ign), logits->dtype), NULL, 0, false);
    return nb_div(total, count);
}

nb_tensor *nb_cross_entropy_ex(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_options opts) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, ce_impl(logits, target, opts));
}

nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target) {
    return nb_cross_entropy_ex(logits, target, NB_CROSS_ENTROPY_DEFAULTS);
}

/* ---- mse_loss ----------------------------------------------------------------- */

static nb_tensor *mse_impl(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    nb_tensor *in[2] = {input, target};
    if (!nb_check_inputs("mse_loss", 2, in) || !nb_check_dtypes(NB_OP_MSE_LOSS, 2, in)) return NULL;
    if ((unsigned)reduction > NB_REDUCTION_NONE)
        return NB_FAIL(NB_ERR_INVALID_ARG, "mse_loss: bad reduction %d", (int)reduction);
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(input->ndim, input->shape, target->ndim, target->shape, &nd, shape)) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "mse_loss: input %s and target %s do not broadcast",
                       nb_fmt_shape(input->ndim, input->shape, a, sizeof a),
                       nb_fmt_shape(target->ndim, target->shape, b, sizeof b));
    }
    nb_tensor *d = nb_sub(input, target);
    nb_tensor *sq = nb_mul(d, d);
    if (reduction == NB_REDUCTION_NONE) return sq;
    return reduction == NB_REDUCTION_SUM ? nb_sum(sq, NULL, 0, false) : nb_mean(sq, NULL, 0, false);
}

nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, mse_impl(input, target, reduction));
}
