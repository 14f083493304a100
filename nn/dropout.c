/* dropout.c - nn.Dropout(p): in training mode zeroes each element with
 * probability p and scales the rest by 1/(1-p) (nb_dropout, drawing from the
 * default generator); identity in eval mode.
 */
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"
#include "nb_ops.h"

typedef struct nb_dropout_ctx {
    double p;
} nb_dropout_ctx;

static nb_tensor *dropout_forward(nb_module *m, nb_tensor *x) {
    const nb_dropout_ctx *c = nb_module_ctx(m);
    return nb_dropout(x, c->p, nb_module_is_training(m), NULL);
}

static const nb_module_ops dropout_ops = {"Dropout", dropout_forward, free, NULL};

nb_module *nb_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) /* PyTorch's ValueError */
        return NB_FAIL(NB_ERR_INVALID_ARG, "Dropout: dropout probability has to be between 0 and 1, but got %g", p);
    nb_dropout_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "Dropout: out of host memory");
    c->p = p;
    return nb_module_new(&dropout_ops, c);
}
