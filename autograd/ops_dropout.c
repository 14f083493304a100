/* ops_dropout.c - dropout (F.dropout: inverted scaling by 1/(1-p)); the mask
 * comes from the backend's random slot (Philox Bernoulli, backend/cpu/random.c)
 * in the input's dtype (bfloat16 and float16 too) and is multiplied in with
 * the binary kernel, or all three in one launch where the backend has the
 * dropout slot (CUDA: backend/cuda/random.cu). Tests: tests/test_ops_dropout.c. */
#include <math.h>

#include "nb_autograd_impl.h"

/* ---- dropout ------------------------------------------------------------------ */

/* saved[0]: the scaled mask (0 or 1/(1-p)); gx = g * mask. */
nb_status nb_bw_dropout(nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *mask = n->saved[0];
    if (nb_needs_grad(1, &g)) return (gin[0] = nb_mul(g, mask)) ? NB_OK : nb_last_status(); /* create_graph */
    nb_tensor *gx = nb_empty_like(mask);
    if (!gx) return nb_last_status();
    nb_kview vgx = nb_kview_of(gx), vg = nb_kview_of(g), vm = nb_kview_of(mask);
    gin[0] = gx;
    return nb_kernel_binary(NB_BE(mask), NB_BINARY_MUL, &vgx, &vg, &vm);
}

static nb_tensor *dropout_impl(nb_tensor *x, double p, nb_generator *gen) {
    if (p == 1) return nb_mul_scalar(x, 0.0); /* as ATen: input * 0, gradient 0 */
    /* the mask in x's dtype (16-bit too: 0 and 1 are exact), scaled by
     * 1 / (1 - p) once (ATen's noise.div_(1 - p)), then one multiply */
    nb_tensor *mask = nb_empty_like(x), *out = nb_empty_like(x);
    if (!mask || !out) return NULL;
    nb_kview vm = nb_kview_of(mask), vo = nb_kview_of(out), vx = nb_kview_of(x);
    if (nb_kernel_has(NB_BE(x), dropout) && nb_is_contiguous(x) && nb_is_contiguous(mask) && nb_is_contiguous(out)) {
        /* the three steps below in one kernel (the same bits) */
        nb_philox_state rng;
        if (nb_rng_philox(mask, gen, &rng) != NB_OK || nb_kernel_dropout(NB_BE(x), &vo, &vm, &vx, p, rng) != NB_OK)
            return NULL;
    } else {
        if (nb_bernoulli_(mask, 1 - p, gen) != NB_OK) return NULL;
        if (nb_kernel_unary(NB_BE(x), NB_UNARY_MUL_SCALAR, &vm, &vm, 1 / (1 - p)) != NB_OK) return NULL;
        if (nb_kernel_binary(NB_BE(x), NB_BINARY_MUL, &vo, &vx, &vm) != NB_OK) return NULL;
    }
    bool failed;
    nb_node *n = nb_record(NB_OP_DROPOUT, out, 1, &x, &failed);
    if (failed) return NULL;
    if (n) nb_save(n, 0, mask);
    return out;
}

nb_tensor *nb_dropout(nb_tensor *x, double p, bool training, nb_generator *gen) {
    if (!nb_check_inputs("dropout", 1, &x) || !nb_check_dtypes(NB_OP_DROPOUT, 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "dropout: probability has to be between 0 and 1, but got %g", p);
    if (!training || p == 0) { /* identity: the same tensor, one more reference */
        nb_retain(x);
        return nb_scope_adopt(x);
    }
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, dropout_impl(x, p, gen));
}
