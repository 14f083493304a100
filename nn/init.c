/* init.c - torch.nn.init functions that need more than a random fill:
 * orthogonal_ (Saxe et al. 2013, "Exact solutions to the nonlinear dynamics
 * of learning in deep linear neural networks"), by PyTorch's algorithm: a
 * normal matrix, its QR, Q's columns multiplied by sign(diag(R)) so that Q
 * is uniform over the orthogonal group (Mezzadri 2006, math-ph/0609050). */
#include "nb_impl.h"
#include "nb_autograd.h"
#include "nb_linalg.h"
#include "nb_nn.h"
#include "nb_ops.h"

/* sign(diag(R)) for R [k, n], k <= n, as a [k] tensor of R's dtype. */
static nb_tensor *diag_sign(nb_tensor *R) {
    int64_t k = R->shape[0], st = R->strides[0] + R->strides[1];
    nb_tensor *d = nb_tensor_view_of(R, 1, &k, &st, R->offset);
    nb_tensor *zero = nb_full_on(0, NULL, 0, R->dtype, R->storage->device);
    return nb_sub(nb_to_dtype(nb_gt(d, zero), R->dtype), nb_to_dtype(nb_gt(zero, d), R->dtype));
}

static nb_status orthogonal_fill(nb_tensor *t, double gain, nb_generator *gen) {
    int64_t rows = t->shape[0], cols = nb_numel(t) / rows;
    nb_tensor *flat = nb_empty_on(NB_SHAPE(rows, cols), t->dtype, nb_device_of(t)), *Q, *R;
    if (!flat) return nb_last_status();
    nb_status st = nb_normal_(flat, 0, 1, gen);
    if (st != NB_OK) return st;
    if (rows < cols) flat = nb_transpose(flat, 0, 1);
    if ((st = nb_linalg_qr(flat, NB_QR_REDUCED, &Q, &R)) != NB_OK) return st;
    nb_tensor *q = nb_mul(Q, diag_sign(R));
    if (rows < cols) q = nb_transpose(q, 0, 1);
    q = nb_reshape(nb_mul_scalar(q, gain), t->ndim, t->shape);
    return q ? nb_copy_(t, q) : nb_last_status();
}

nb_status nb_init_orthogonal_(nb_tensor *t, double gain, nb_generator *gen) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "init.orthogonal_: NULL tensor");
    char b[NB_SHAPE_BUF];
    if (t->ndim < 2)
        return nb_set_error(NB_ERR_SHAPE, "init.orthogonal_: only tensors with 2 or more dimensions are supported, got %s",
                            nb_fmt_shape(t->ndim, t->shape, b, sizeof b));
    if (!nb_backend_supports(nb_device_of(t), NB_OP_LINALG_QR, t->dtype))
        return nb_set_error(NB_ERR_DTYPE, "init.orthogonal_: %s is not supported (it needs linalg_qr in that dtype "
                            "on the tensor's device)", nb_dtype_name(t->dtype));
    if (nb_numel(t) == 0) return NB_OK;
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_op_scope_begin();
    nb_status st = orthogonal_fill(t, gain, gen);
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return st;
}
