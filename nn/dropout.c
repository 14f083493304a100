/* dropout.c - nn.Dropout (and Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout over the
 * functionals of the same names) (p): in training mode zeroes each element with
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

/* ---- Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout ------------------------------- */

typedef nb_tensor *(*dropout_fn)(nb_tensor *x, double p, bool training, nb_generator *gen);
typedef struct variant_ctx {
    double p;
    dropout_fn fn;
} variant_ctx;

static nb_tensor *variant_forward(nb_module *m, nb_tensor *x) {
    const variant_ctx *c = nb_module_ctx(m);
    return c->fn(x, c->p, nb_module_is_training(m), NULL);
}

static const nb_module_ops d1_ops = {"Dropout1d", variant_forward, free, NULL};
static const nb_module_ops d2_ops = {"Dropout2d", variant_forward, free, NULL};
static const nb_module_ops d3_ops = {"Dropout3d", variant_forward, free, NULL};
static const nb_module_ops ad_ops = {"AlphaDropout", variant_forward, free, NULL};
static const nb_module_ops fad_ops = {"FeatureAlphaDropout", variant_forward, free, NULL};

static nb_module *variant(const nb_module_ops *ops, double p, dropout_fn fn) {
    if (!(p >= 0 && p <= 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: dropout probability has to be between 0 and 1, but got %g", ops->kind, p);
    variant_ctx *c = malloc(sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", ops->kind);
    c->p = p, c->fn = fn;
    return nb_module_new(ops, c);
}

nb_module *nb_nn_dropout1d(double p) { return variant(&d1_ops, p, nb_dropout1d); }
nb_module *nb_nn_dropout2d(double p) { return variant(&d2_ops, p, nb_dropout2d); }
nb_module *nb_nn_dropout3d(double p) { return variant(&d3_ops, p, nb_dropout3d); }
nb_module *nb_nn_alpha_dropout(double p) { return variant(&ad_ops, p, nb_alpha_dropout); }
nb_module *nb_nn_feature_alpha_dropout(double p) { return variant(&fad_ops, p, nb_feature_alpha_dropout); }
