/* capturable.c - lr and step counts in device memory, for optimizers whose
 * parameters live on a device with CUDA graphs (PyTorch's capturable=True):
 * the fused update kernels read them when they run, so a step captured in a
 * graph and replayed takes the lr set since (nb_optimizer_set_lr, any
 * scheduler) and counts its steps. The host keeps its own step counts (for
 * checkpoints and for the update's checks) and a mirror of what the device
 * holds; a replay's hooks keep the two in step (core/graph.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

typedef struct captured_call {
    nb_optimizer *opt;
    int n, *idx; /* the parameters the captured call stepped */
} captured_call;

typedef struct nb_optim_dev {
    nb_device dev;
    nb_tensor *steps;     /* float64 [n]: the device's step counts */
    double *steps_host;   /* what each holds (NAN: unknown, upload before use) */
    nb_tensor **lr;       /* per group: float64 0-d, or NULL */
    double *lr_val;       /* what each holds */
    int n_groups;
    captured_call **calls; /* hook contexts, freed with the optimizer */
    int n_calls;
    bool lr_hooked;       /* the before-replay lr refresh is registered for the current capture */
} nb_optim_dev;

bool nb_optim_capturable(const nb_tensor *p) { return nb_graph_supported(nb_device_of(p)); }

void nb_optim_dev_free(nb_optimizer *opt) {
    nb_optim_dev *m = opt->devm;
    if (!m) return;
    nb_release(m->steps);
    for (int g = 0; g < m->n_groups; g++) nb_release(m->lr[g]);
    for (int i = 0; i < m->n_calls; i++) free(m->calls[i]->idx), free(m->calls[i]);
    free(m->calls), free(m->lr), free(m->lr_val), free(m->steps_host), free(m);
    opt->devm = NULL;
}

/* The mirror for the optimizer's (first) device, made on first use. */
static nb_optim_dev *mirror(nb_optimizer *opt, nb_device dev) {
    nb_optim_dev *m = opt->devm;
    if (m && m->n_groups < opt->n_groups) { /* groups added since */
        nb_tensor **lr = realloc(m->lr, sizeof *lr * (size_t)opt->n_groups);
        double *val = lr ? realloc(m->lr_val, sizeof *val * (size_t)opt->n_groups) : NULL;
        if (lr) m->lr = lr;
        if (!val) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", opt->d->op);
        m->lr_val = val;
        for (int g = m->n_groups; g < opt->n_groups; g++) m->lr[g] = NULL, m->lr_val[g] = NAN;
        m->n_groups = opt->n_groups;
    }
    if (m && opt->n != (int)nb_numel(m->steps)) nb_optim_dev_free(opt), m = NULL; /* parameters added */
    if (m) return m;
    m = calloc(1, sizeof *m);
    if (!m) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", opt->d->op);
    opt->devm = m;
    m->dev = dev;
    m->n_groups = opt->n_groups;
    m->lr = calloc((size_t)opt->n_groups, sizeof *m->lr);
    m->lr_val = malloc(sizeof *m->lr_val * (size_t)opt->n_groups);
    m->steps_host = malloc(sizeof *m->steps_host * (size_t)(opt->n ? opt->n : 1));
    int64_t n = opt->n;
    m->steps = m->lr && m->lr_val && m->steps_host ? nb_tensor_new_unscoped(1, &n, NB_F64, dev) : NULL;
    if (!m->steps) {
        nb_optim_dev_free(opt);
        return nb_last_status() ? NULL : NB_FAIL(NB_ERR_OOM, "%s: out of host memory", opt->d->op);
    }
    for (int g = 0; g < opt->n_groups; g++) m->lr_val[g] = NAN;
    for (int i = 0; i < opt->n; i++) m->steps_host[i] = NAN;
    return m;
}

/* Writes v into element i of t (a kernel, on the current stream). */
static nb_status write_elem(nb_tensor *t, int64_t i, double v) {
    nb_tensor *e = nb_narrow(t, 0, i, 1);
    return e ? nb_fill_(e, v) : nb_last_status();
}

/* Before a replay: the groups' lr as set now. */
static void refresh_lr(void *ctx, int delta) {
    nb_optimizer *opt = ctx;
    nb_optim_dev *m = opt->devm;
    if (!m) return;
    if (delta == -1) { /* the capture ended: the next capture registers again */
        m->lr_hooked = false;
        return;
    }
    if (delta != 0) return;
    for (int g = 0; g < m->n_groups && g < opt->n_groups; g++)
        if (m->lr[g] && m->lr_val[g] != opt->groups[g].o.head.lr && nb_fill_(m->lr[g], opt->groups[g].o.head.lr) == NB_OK)
            m->lr_val[g] = opt->groups[g].o.head.lr;
}

/* After each replay (+1) the captured call's steps happened; at the end of
 * the capture (-1) they had not. */
static void replay_steps(void *ctx, int delta) {
    captured_call *c = ctx;
    if (delta == 0) return;
    nb_optim_dev *m = c->opt->devm;
    for (int j = 0; j < c->n; j++) {
        c->opt->state[c->idx[j]].step += delta;
        if (m) m->steps_host[c->idx[j]] += delta;
    }
}

nb_status nb_optim_dev_prepare(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                               const double **lr_dev, double **step_dev) {
    nb_device dev = nb_device_of(p[0]);
    bool cap = nb_graph_is_capturing(dev);
    nb_optim_dev *m = mirror(opt, dev);
    if (!m) return nb_last_status();
    const char *warm = "%s: %s is not on the device yet; take one eager step before capturing a graph";
    double lr = opt->groups[g].o.head.lr;
    if (!m->lr[g]) {
        if (cap) return nb_set_error(NB_ERR_STATE, warm, opt->d->op, "the lr");
        if (!(m->lr[g] = nb_tensor_new_unscoped(0, NULL, NB_F64, m->dev))) return nb_last_status();
    }
    /* In a capture nothing runs: an lr set since the last eager step is
     * written by refresh_lr before each replay, as later changes are. */
    if (m->lr_val[g] != lr && !cap) {
        nb_status st = nb_fill_(m->lr[g], lr);
        if (st) return st;
        m->lr_val[g] = lr;
    }
    *lr_dev = nb_data_ptr(m->lr[g]);
    double *base = nb_data_ptr(m->steps);
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        if (m->steps_host[i] != (double)opt->state[i].step) { /* a checkpoint load, or the first step */
            if (cap) return nb_set_error(NB_ERR_STATE, warm, opt->d->op, "the step count");
            nb_status st = write_elem(m->steps, i, (double)opt->state[i].step);
            if (st) return st;
        }
        m->steps_host[i] = (double)opt->state[i].step + 1; /* what the kernel will leave */
        step_dev[j] = base + i;
    }
    if (cap) {
        captured_call *c = malloc(sizeof *c);
        int *ci = c ? malloc(sizeof *ci * (size_t)n) : NULL;
        captured_call **calls = ci ? realloc(m->calls, sizeof *calls * (size_t)(m->n_calls + 1)) : NULL;
        if (!calls) {
            free(c), free(ci);
            return nb_set_error(NB_ERR_OOM, "%s: out of host memory", opt->d->op);
        }
        m->calls = calls;
        memcpy(ci, idx, sizeof *ci * (size_t)n);
        *c = (captured_call){opt, n, ci};
        m->calls[m->n_calls++] = c;
        if (!nb_graph_add_replay_hook(dev, replay_steps, c)) return nb_last_status();
        if (!m->lr_hooked && !nb_graph_add_replay_hook(dev, refresh_lr, opt)) return nb_last_status();
        m->lr_hooked = true;
    }
    return NB_OK;
}
