/* parametrize.c - torch.nn.utils.parametrizations.weight_norm and
 * spectral_norm, and parametrize.remove_parametrizations.
 *
 * As PyTorch's, the parametrized module m loses the parameter `name` and
 * gains the children parametrizations.<name> (a ParametrizationList
 * holding the originals: original0 = g and original1 = v for weight norm,
 * original for spectral norm) and parametrizations.<name>.0 (_WeightNorm,
 * or _SpectralNorm with its buffers _u and _v), so the state_dict keys are
 * PyTorch's. m's modules read their weight through a pointer kept in
 * their context, so the weight stays the same tensor object: a forward
 * pre-hook on m recomputes the parametrized value from the originals and
 * rebases that object onto it (its storage and autograd node), as the
 * in-place ops do (autograd/ops_activation.c). Gradients then reach the
 * originals; graphs of earlier forwards keep their own node and values
 * (two forwards before one backward, as a GAN's discriminator, work).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nn_impl.h"

typedef enum { WEIGHT_NORM, SPECTRAL_NORM } param_kind;

typedef struct param_ctx {
    param_kind kind;
    nb_module *owner;    /* the parametrized module (it owns this one through its children) */
    char name[64];       /* the parametrized tensor's name */
    nb_tensor *target;   /* the module's former parameter object: rebased at each forward (owned) */
    int dim;             /* weight norm: the dim kept (-1 or NB_DIM_NONE: none); spectral: the output dim */
    int64_t iterations;  /* spectral norm's power iterations per training forward */
    double eps;
    int64_t hook;        /* the pre-hook's handle on owner */
} param_ctx;

static void param_ctx_free(void *p) {
    param_ctx *c = p;
    if (c) nb_release(c->target);
    free(c);
}

static nb_tensor *no_forward(nb_module *m, nb_tensor *x) {
    (void)x;
    return NB_FAIL(NB_ERR_INVALID_ARG, "%s: not callable (its owner's forward recomputes the tensor)", nb_module_kind(m));
}

static const nb_module_ops list_ops = {"ParametrizationList", no_forward, param_ctx_free, NULL};
static const nb_module_ops weight_norm_ops = {"_WeightNorm", no_forward, NULL, NULL};
static const nb_module_ops spectral_norm_ops = {"_SpectralNorm", no_forward, NULL, NULL};

/* ||v|| over every dim but dim, kept as size 1 (PyTorch's norm_except_dim; dim -1 or NB_DIM_NONE: the whole
 * tensor, a 0-d norm). */
static nb_tensor *norm_except_dim(nb_tensor *v, int dim) {
    if (dim == -1 || dim == NB_DIM_NONE) return nb_norm(v, 2, NULL, 0, false);
    int dims[NB_MAX_DIMS], n = 0;
    for (int i = 0; i < nb_dim(v); i++)
        if (i != dim) dims[n++] = i;
    return n ? nb_norm(v, 2, dims, n, true) : nb_abs(v);
}

/* W as a matrix [size(dim), rest] (spectral norm's _reshape_weight_to_matrix). */
static nb_tensor *as_matrix(nb_tensor *w, int dim) {
    if (dim != 0) {
        int perm[NB_MAX_DIMS], n = 1;
        perm[0] = dim;
        for (int i = 0; i < nb_dim(w); i++)
            if (i != dim) perm[n++] = i;
        w = nb_permute(w, perm);
    }
    return w ? nb_reshape(w, NB_SHAPE(nb_shape(w)[0], -1)) : NULL;
}

/* normalize(m @ x) along its only dim, eps as spectral norm's. */
static nb_tensor *normalized_mv(nb_tensor *m, nb_tensor *x, double eps) {
    return nb_normalize(nb_squeeze(nb_matmul(m, nb_unsqueeze(x, 1)), 1), 2, 0, eps);
}

/* Spectral norm's power iterations on its buffers u and v (no autograd). */
static nb_status power_method(nb_module *sn, nb_tensor *wm, int64_t n, double eps) {
    nb_tensor *u = nb_module_get(sn, "_u"), *v = nb_module_get(sn, "_v");
    nb_status st = u && v ? NB_OK : nb_last_status();
    NB_NO_GRAD {
        nb_tensor *w = nb_detach(wm), *wt = w ? nb_transpose(w, 0, 1) : NULL;
        for (int64_t i = 0; st == NB_OK && i < n; i++) {
            st = nb_copy_(u, normalized_mv(w, v, eps));
            if (st == NB_OK) st = nb_copy_(v, normalized_mv(wt, u, eps));
        }
    }
    return st;
}

/* The parametrized value from the originals (differentiable). */
static nb_tensor *compute(nb_module *list, param_ctx *c) {
    if (c->kind == WEIGHT_NORM) {
        nb_tensor *g = nb_module_get(list, "original0"), *v = nb_module_get(list, "original1");
        return nb_mul(v, nb_div(g, norm_except_dim(v, c->dim))); /* torch._weight_norm */
    }
    nb_module *sn = nb_module_child(list, "0");
    nb_tensor *w = nb_module_get(list, "original");
    if (!sn || !w) return NULL;
    if (nb_dim(w) == 1) return nb_normalize(w, 2, 0, c->eps);
    nb_tensor *wm = as_matrix(w, c->dim);
    if (!wm || (nb_module_is_training(c->owner) && power_method(sn, wm, c->iterations, c->eps) != NB_OK)) return NULL;
    nb_tensor *u = nb_clone(nb_module_get(sn, "_u")), *v = nb_clone(nb_module_get(sn, "_v"));
    nb_tensor *sigma = nb_sum(nb_mul(u, nb_squeeze(nb_matmul(wm, nb_unsqueeze(v, 1)), 1)), NULL, 0, false);
    return nb_div(w, sigma);
}

/* Recomputes the target and rebases the module's tensor object onto it. */
static nb_status refresh(nb_module *list) {
    param_ctx *c = nb_module_ctx(list);
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = compute(list, c);
    nb_status st = w ? nb_tensor_rebind(c->target, w) : nb_last_status();
    nb_scope_end(s);
    return st;
}

static nb_status pre_hook(nb_module *m, int n_in, nb_tensor **in, void *user) {
    (void)m, (void)n_in, (void)in;
    return refresh(user);
}

static nb_module *parametrizations_of(nb_module *m, bool create) {
    nb_module *p = nb_module_child(m, "parametrizations");
    if (p || !create) return p;
    p = nb_nn_module_dict();
    if (!p || nb_module_add(m, "parametrizations", p) != NB_OK) return NULL;
    return p;
}

/* Replaces m's parameter name by the parametrization of kind k. */
static nb_status parametrize(nb_module *m, const char *name, param_kind k, int dim, int64_t iterations, double eps) {
    const char *op = k == WEIGHT_NORM ? "weight_norm" : "spectral_norm";
    if (!m) return nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    if (!name) name = "weight";
    if (strlen(name) >= sizeof ((param_ctx *)0)->name)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: name \"%s\" is too long", op, name);
    nb_tensor *w = nb_module_get(m, name); /* a parameter, buffer or attribute of m itself */
    bool is_param = w && nb_is_leaf(w) && nb_requires_grad(w); /* parameters are leaves that require grad */
    if (!is_param)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s has no parameter \"%s\"", op, nb_module_kind(m), name);
    nb_module *pz = parametrizations_of(m, false);
    if (pz && nb_module_child(pz, name))
        return nb_set_error(NB_ERR_STATE, "%s: \"%s\" is already parametrized (nabla allows one parametrization per "
                            "tensor)", op, name);
    int nd = nb_dim(w);
    if (k == WEIGHT_NORM && dim != -1 && dim != NB_DIM_NONE && (dim < -nd || dim >= nd))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: dim %d out of range for %d dims", op, dim, nd);
    if (k == WEIGHT_NORM && dim < -1 && dim != NB_DIM_NONE) dim += nd;
    if (k == SPECTRAL_NORM) {
        if (dim == 0 && !strncmp(nb_module_kind(m), "ConvTranspose", 13)) dim = 1; /* PyTorch's default there */
        if (dim < 0) dim += nd;
        if (nd > 1 && (dim < 0 || dim >= nd)) return nb_set_error(NB_ERR_INVALID_ARG, "%s: bad dim for %d dims", op, nd);
        if (iterations < 1) return nb_set_error(NB_ERR_INVALID_ARG, "%s: n_power_iterations must be positive", op);
    }
    param_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    *c = (param_ctx){.kind = k, .owner = m, .dim = dim, .iterations = iterations, .eps = eps};
    snprintf(c->name, sizeof c->name, "%s", name);
    nb_module *list = nb_module_new(&list_ops, c);
    if (!list) return nb_last_status(); /* nb_module_new freed c */
    nb_module *fn = nb_module_new(k == WEIGHT_NORM ? &weight_norm_ops : &spectral_norm_ops, NULL);
    nb_status st = fn ? nb_module_add(list, "0", fn) : nb_last_status();
    nb_scope *s = nb_scope_begin();
    nb_tensor *wd = nb_detach(w);
    if (st == NB_OK && k == WEIGHT_NORM) { /* right_inverse: g = ||w|| except dim, v = w */
        nb_tensor *g = norm_except_dim(wd, dim);
        st = g ? nb_module_register_parameter(list, "original0", nb_contiguous(g)) : nb_last_status();
        if (st == NB_OK) st = nb_module_register_parameter(list, "original1", nb_clone(wd));
    } else if (st == NB_OK) { /* u, v ~ N(0, 1) normalized, then 15 power iterations (PyTorch's init) */
        st = nb_module_register_parameter(list, "original", nb_clone(wd));
        if (st == NB_OK && nd > 1) {
            nb_tensor *wm = as_matrix(wd, dim);
            int64_t h = wm ? nb_shape(wm)[0] : 0, wc = wm ? nb_shape(wm)[1] : 0;
            nb_tensor *u = nb_normalize(nb_randn_on(NB_SHAPE(h), nb_dtype_of(w), NULL, nb_device_of(w)), 2, 0, eps);
            nb_tensor *v = nb_normalize(nb_randn_on(NB_SHAPE(wc), nb_dtype_of(w), NULL, nb_device_of(w)), 2, 0, eps);
            st = u && v ? nb_module_register_buffer(fn, "_u", nb_contiguous(u)) : nb_last_status();
            if (st == NB_OK) st = nb_module_register_buffer(fn, "_v", nb_contiguous(v));
            if (st == NB_OK) st = power_method(fn, wm, 15, eps);
        }
    }
    nb_scope_end(s);
    if (st == NB_OK && !(pz = parametrizations_of(m, true))) st = nb_last_status();
    if (st == NB_OK) st = nb_module_add(pz, name, list);
    else nb_module_free(list);
    if (st != NB_OK) return st;
    /* from here on the list is m's: the parameter moves out of m into the target */
    c->target = nb_module_take_parameter(m, name);
    if (!c->target) return nb_last_status();
    /* m's forward and nb_module_get still find it by name (modules that look their weight up) */
    st = nb_module_set_attribute(m, name, c->target);
    c->hook = st == NB_OK ? nb_module_register_forward_pre_hook_n(m, pre_hook, list) : -1;
    if (c->hook < 0) return nb_last_status();
    return refresh(list);
}

nb_status nb_nn_weight_norm(nb_module *m, const char *name, int dim) {
    return parametrize(m, name, WEIGHT_NORM, dim, 0, 0);
}

nb_status nb_nn_spectral_norm(nb_module *m, const char *name, nb_spectral_norm_options opts) {
    int64_t it = opts.n_power_iterations ? opts.n_power_iterations : 1;
    double eps = nb_option(opts.eps, 1e-12);
    return parametrize(m, name, SPECTRAL_NORM, opts.dim, it, eps);
}

nb_status nb_nn_remove_parametrizations(nb_module *m, const char *name, bool leave_parametrized) {
    const char *op = "remove_parametrizations";
    if (!m) return nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    if (!name) name = "weight";
    nb_module *pz = parametrizations_of(m, false), *list = pz ? nb_module_child(pz, name) : NULL;
    if (!list) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s has no parametrization of \"%s\"", op, nb_module_kind(m), name);
    param_ctx *c = nb_module_ctx(list);
    if (!leave_parametrized && c->kind == WEIGHT_NORM)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: weight_norm has two originals (g, v): only leave_parametrized=true "
                            "can remove it (PyTorch's error too)", op);
    nb_status st = NB_OK;
    NB_NO_GRAD {
        nb_scope *s = nb_scope_begin();
        nb_tensor *w = leave_parametrized ? compute(list, c) : nb_module_get(list, c->kind == WEIGHT_NORM ? "original1" : "original");
        /* the target becomes a leaf parameter again, holding the value */
        st = w ? nb_tensor_rebind(c->target, nb_clone(nb_detach(w))) : nb_last_status();
        nb_scope_end(s);
    }
    if (st != NB_OK) return st;
    nb_tensor *t = c->target;
    nb_module_drop_attribute(m, name);
    nb_retain(t);
    st = nb_module_adopt_parameter(m, name, t); /* sets requires_grad; releases t on failure */
    if (st != NB_OK) {
        nb_module_set_attribute(m, name, t);
        return st;
    }
    nb_module_remove_hook(m, c->hook);
    nb_module_free(list); /* detaches it from pz; releases the list's reference to t */
    if (nb_module_num_children(pz) == 0) nb_module_free(pz);
    return NB_OK;
}
