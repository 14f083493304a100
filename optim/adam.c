/* adam.c - torch.optim.Adam and AdamW: options with PyTorch's defaults and
 * checks, and the update of one parameter through the backend's adam_step
 * kernel (formula in nb_optim.h; Kingma & Ba, "Adam", ICLR 2015; Loshchilov
 * & Hutter, "Decoupled weight decay regularization", ICLR 2019).
 */
#include <math.h>
#include <stdlib.h>

#include "optim_impl.h"

static bool adam_has_state(const nb_optimizer *opt, int which) {
    return which == NB_ST_EXP_AVG || which == NB_ST_EXP_AVG_SQ ||
           (which == NB_ST_MAX_EXP_AVG_SQ && opt->adam.amsgrad);
}

static nb_status adam_update(nb_optimizer *opt, int i, nb_tensor *p, nb_tensor *g, bool first) {
    (void)first; /* the step count carries Adam's history */
    const nb_adam_options *o = &opt->adam;
    nb_tensor *const *st = opt->state[i].state;
    nb_adam_hyper h = {
        .lr = opt->lr,
        .beta1 = o->betas[0],
        .beta2 = o->betas[1],
        .eps = o->eps,
        .weight_decay = o->weight_decay,
        .decoupled = opt->kind == NB_OPTIM_ADAMW,
        .amsgrad = o->amsgrad,
        .maximize = o->maximize,
        .step = opt->state[i].step + 1,
    };
    nb_kview kp = nb_kview_of(p), kg = nb_kview_of(g);
    nb_kview km = nb_kview_of(st[NB_ST_EXP_AVG]), kv = nb_kview_of(st[NB_ST_EXP_AVG_SQ]), kmax = {0};
    if (o->amsgrad) kmax = nb_kview_of(st[NB_ST_MAX_EXP_AVG_SQ]);
    return NB_CALL(p, adam_step, &kp, &kg, &km, &kv, o->amsgrad ? &kmax : NULL, &h);
}

static nb_status adam_check(const char *op, const nb_adam_options *o) {
    if (!(o->lr >= 0.0) || !isfinite(o->lr))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: lr must be >= 0 (got %g)", op, o->lr);
    if (!(o->eps >= 0.0) || !isfinite(o->eps))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: eps must be >= 0 (got %g)", op, o->eps);
    for (int k = 0; k < 2; k++)
        if (!(o->betas[k] >= 0.0 && o->betas[k] < 1.0))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: betas[%d] must be in [0, 1) (got %g)", op, k,
                                o->betas[k]);
    if (!(o->weight_decay >= 0.0) || !isfinite(o->weight_decay))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: weight_decay must be >= 0 (got %g)", op,
                            o->weight_decay);
    return NB_OK;
}

static nb_optimizer *adam_new(nb_optim_kind kind, nb_tensor *const *params, int n, nb_adam_options opts) {
    const char *op = kind == NB_OPTIM_ADAMW ? "adamw" : "adam";
    nb_adam_options o = opts;
    o.lr = nb_optim_default(o.lr, 1e-3);
    o.betas[0] = nb_optim_default(o.betas[0], 0.9);
    o.betas[1] = nb_optim_default(o.betas[1], 0.999);
    o.eps = nb_optim_default(o.eps, 1e-8);
    o.weight_decay = nb_optim_default(o.weight_decay, kind == NB_OPTIM_ADAMW ? 1e-2 : 0.0);
    if (adam_check(op, &o)) return NULL;
    nb_optimizer *opt = nb_optim_new(kind, op, params, n);
    if (!opt) return NULL;
    opt->adam = o;
    opt->lr = o.lr;
    opt->has_state = adam_has_state;
    opt->update = adam_update;
    return opt;
}

nb_optimizer *nb_adam_params(nb_tensor *const *params, int n, nb_adam_options opts) {
    return adam_new(NB_OPTIM_ADAM, params, n, opts);
}

nb_optimizer *nb_adamw_params(nb_tensor *const *params, int n, nb_adam_options opts) {
    return adam_new(NB_OPTIM_ADAMW, params, n, opts);
}

static nb_optimizer *adam_from_module(nb_optim_kind kind, nb_module *m, nb_adam_options opts) {
    int n = 0;
    nb_tensor **params = nb_optim_module_params(m, kind == NB_OPTIM_ADAMW ? "adamw" : "adam", &n);
    if (!params) return NULL;
    nb_optimizer *opt = adam_new(kind, params, n, opts);
    free(params);
    return opt;
}

nb_optimizer *nb_adam(nb_module *m, nb_adam_options opts) { return adam_from_module(NB_OPTIM_ADAM, m, opts); }

nb_optimizer *nb_adamw(nb_module *m, nb_adam_options opts) { return adam_from_module(NB_OPTIM_ADAMW, m, opts); }
