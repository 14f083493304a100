/* sgd.c - torch.optim.SGD: options with PyTorch's checks, and the update of
 * one parameter through the backend's sgd_step kernel (the formula is in
 * nb_optim.h, from torch.optim.SGD's documentation and implementation).
 */
#include <math.h>
#include <stdlib.h>

#include "optim_impl.h"

static bool sgd_has_state(const nb_optimizer *opt, int which) {
    return which == NB_ST_MOMENTUM && opt->sgd.momentum != 0.0;
}

static nb_status sgd_update(nb_optimizer *opt, int i, nb_tensor *p, nb_tensor *g, bool first) {
    const nb_sgd_options *o = &opt->sgd;
    nb_sgd_hyper h = {
        .lr = opt->lr,
        .momentum = o->momentum,
        .dampening = o->dampening,
        .weight_decay = o->weight_decay,
        .nesterov = o->nesterov,
        .maximize = o->maximize,
        .first_step = first,
    };
    nb_tensor *buf = opt->state[i].state[NB_ST_MOMENTUM];
    nb_kview kp = nb_kview_of(p), kg = nb_kview_of(g), kb = {0};
    if (buf) kb = nb_kview_of(buf);
    return NB_CALL(p, sgd_step, &kp, &kg, buf ? &kb : NULL, &h);
}

/* PyTorch's argument checks, plus a required lr (nb_sgd_options has no default). */
static nb_status sgd_check(const nb_sgd_options *o) {
    if (!(o->lr > 0.0) || !isfinite(o->lr))
        return nb_set_error(NB_ERR_INVALID_ARG, "sgd: lr must be > 0 (got %g); SGD's lr has no default", o->lr);
    if (!(o->momentum >= 0.0) || !isfinite(o->momentum))
        return nb_set_error(NB_ERR_INVALID_ARG, "sgd: momentum must be >= 0 (got %g)", o->momentum);
    if (!(o->weight_decay >= 0.0) || !isfinite(o->weight_decay))
        return nb_set_error(NB_ERR_INVALID_ARG, "sgd: weight_decay must be >= 0 (got %g)", o->weight_decay);
    if (!isfinite(o->dampening))
        return nb_set_error(NB_ERR_INVALID_ARG, "sgd: dampening must be finite (got %g)", o->dampening);
    if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "sgd: nesterov momentum requires a momentum > 0 and zero dampening "
                            "(got momentum %g, dampening %g)", o->momentum, o->dampening);
    return NB_OK;
}

nb_optimizer *nb_sgd_params(nb_tensor *const *params, int n, nb_sgd_options opts) {
    nb_sgd_options o = opts; /* every SGD default is 0; NB_ZERO reads as 0 */
    o.lr = nb_optim_default(o.lr, 0.0);
    o.momentum = nb_optim_default(o.momentum, 0.0);
    o.dampening = nb_optim_default(o.dampening, 0.0);
    o.weight_decay = nb_optim_default(o.weight_decay, 0.0);
    if (sgd_check(&o)) return NULL;
    nb_optimizer *opt = nb_optim_new(NB_OPTIM_SGD, "sgd", params, n);
    if (!opt) return NULL;
    opt->sgd = o;
    opt->lr = o.lr;
    opt->has_state = sgd_has_state;
    opt->update = sgd_update;
    return opt;
}

nb_optimizer *nb_sgd(nb_module *m, nb_sgd_options opts) {
    int n = 0;
    nb_tensor **params = nb_optim_module_params(m, "sgd", &n);
    if (!params) return NULL;
    nb_optimizer *opt = nb_sgd_params(params, n, opts);
    free(params);
    return opt;
}
