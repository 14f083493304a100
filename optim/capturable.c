/* capturable.c - lr and step counts in device memory, for optimizers whose
 * parameters live on a device with CUDA graphs (PyTorch's capturable=True):
 * the fused update kernels read them when they run, so a step captured in a
 * graph and replayed takes the lr set since (nb_optimizer_set_lr, any
 * scheduler) and counts its steps. The host keeps its own step counts (for
 * checkpoints and for the update's checks) and a mirror of what the device
 * holds; a replay's hooks keep the two in step (core/graph.c).
 *
 * Each device the parameters live on has its own lr words and counters (a
 * kernel reads its own device's memory). Nothing here is freed before the
 * optimizer: a graph captured earlier keeps the words and counters it
 * captured, also after nb_optimizer_add_param_group. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

typedef struct captured_call {
    nb_optimizer *opt;
    int n, *idx; /* the parameters the captured call stepped; NULL: an lr refresh of device `dev` */
    int dev;
} captured_call;

/* One device's lr words, per group. */
typedef struct dev_lr {
    nb_device dev;
    nb_tensor **lr; /* per group: float64 0-d, or NULL */
    double *lr_val; /* what each holds */
    int n_groups;
    bool lr_hooked; /* its before-replay refresh is registered for the current capture */
} dev_lr;

typedef struct nb_optim_dev {
    dev_lr *devs;
    int n_devs;
    int *chunk;         /* per parameter: the tensor of chunks holding its counter (-1: none yet) */
    int64_t *pos;       /* ...and its element there */
    double *steps_host; /* what each counter holds (NAN: unknown, upload before use) */
    int n_params;       /* length of the three above */
    nb_tensor **chunks; /* float64 [k] counters, one tensor per batch that first needed them */
    int n_chunks;
    captured_call **calls; /* hook contexts, freed with the optimizer */
    int n_calls;
} nb_optim_dev;

bool nb_optim_capturable(const nb_tensor *p) { return nb_graph_supported(nb_device_of(p)); }

void nb_optim_dev_free(nb_optimizer *opt) {
    nb_optim_dev *m = opt->devm;
    if (!m) return;
    for (int d = 0; d < m->n_devs; d++) {
        for (int g = 0; g < m->devs[d].n_groups; g++) nb_release(m->devs[d].lr[g]);
        free(m->devs[d].lr), free(m->devs[d].lr_val);
    }
    for (int i = 0; i < m->n_chunks; i++) nb_release(m->chunks[i]);
    for (int i = 0; i < m->n_calls; i++) free(m->calls[i]->idx), free(m->calls[i]);
    free(m->devs), free(m->chunk), free(m->pos), free(m->steps_host), free(m->chunks), free(m->calls), free(m);
    opt->devm = NULL;
}

static void *grow(void *p, size_t elem, int n) { return realloc(p, elem * (size_t)(n > 0 ? n : 1)); }

static void *no_memory(const nb_optimizer *opt) { return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", opt->d->op); }

/* The optimizer's mirror, with room for every parameter it has now. */
static nb_optim_dev *mirror(nb_optimizer *opt) {
    nb_optim_dev *m = opt->devm;
    if (!m) {
        if (!(m = calloc(1, sizeof *m))) return no_memory(opt);
        opt->devm = m;
    }
    if (m->n_params < opt->n) { /* parameters added: their counters are made when first stepped */
        int *chunk = grow(m->chunk, sizeof *chunk, opt->n);
        if (chunk) m->chunk = chunk;
        int64_t *pos = chunk ? grow(m->pos, sizeof *pos, opt->n) : NULL;
        if (pos) m->pos = pos;
        double *host = pos ? grow(m->steps_host, sizeof *host, opt->n) : NULL;
        if (!host) return no_memory(opt);
        m->steps_host = host;
        for (int i = m->n_params; i < opt->n; i++) m->chunk[i] = -1, m->pos[i] = 0, m->steps_host[i] = NAN;
        m->n_params = opt->n;
    }
    return m;
}

/* dev's lr words (index *d in devs), with a slot for every group. */
static dev_lr *lr_of(nb_optimizer *opt, nb_optim_dev *m, nb_device dev, int *d) {
    int k = 0;
    while (k < m->n_devs && (m->devs[k].dev.type != dev.type || m->devs[k].dev.index != dev.index)) k++;
    if (k == m->n_devs) {
        dev_lr *devs = grow(m->devs, sizeof *devs, m->n_devs + 1);
        if (!devs) return no_memory(opt);
        m->devs = devs;
        m->devs[m->n_devs++] = (dev_lr){.dev = dev};
    }
    dev_lr *l = &m->devs[k];
    if (l->n_groups < opt->n_groups) {
        nb_tensor **lr = grow(l->lr, sizeof *lr, opt->n_groups);
        if (lr) l->lr = lr;
        double *val = lr ? grow(l->lr_val, sizeof *val, opt->n_groups) : NULL;
        if (!val) return no_memory(opt);
        l->lr_val = val;
        for (int g = l->n_groups; g < opt->n_groups; g++) l->lr[g] = NULL, l->lr_val[g] = NAN;
        l->n_groups = opt->n_groups;
    }
    *d = k;
    return l;
}

/* Counters on dev for the parameters idx[0..n) that have none: one tensor
 * for them all. */
static nb_status make_counters(nb_optimizer *opt, nb_optim_dev *m, nb_device dev, int n, const int *idx) {
    int64_t k = 0;
    for (int j = 0; j < n; j++) k += m->chunk[idx[j]] < 0;
    if (!k) return NB_OK;
    nb_tensor **chunks = grow(m->chunks, sizeof *chunks, m->n_chunks + 1);
    if (!chunks) return no_memory(opt), nb_last_status();
    m->chunks = chunks;
    nb_tensor *t = nb_tensor_new_unscoped(1, &k, NB_F64, dev);
    if (!t) return nb_last_status();
    int c = m->n_chunks++;
    m->chunks[c] = t;
    for (int j = 0, e = 0; j < n; j++)
        if (m->chunk[idx[j]] < 0) m->chunk[idx[j]] = c, m->pos[idx[j]] = e++, m->steps_host[idx[j]] = NAN;
    return NB_OK;
}

/* Writes v into parameter i's counter (a kernel, on the current stream). */
static nb_status write_counter(nb_optim_dev *m, int i, double v) {
    nb_tensor *e = nb_narrow(m->chunks[m->chunk[i]], 0, m->pos[i], 1);
    return e ? nb_fill_(e, v) : nb_last_status();
}

static double *counter_at(nb_optim_dev *m, int i) { return (double *)nb_data_ptr(m->chunks[m->chunk[i]]) + m->pos[i]; }

/* Before a replay: the groups' lr as set now, on the call's device. */
static void refresh_lr(void *ctx, int delta) {
    captured_call *c = ctx;
    nb_optimizer *opt = c->opt;
    nb_optim_dev *m = opt->devm;
    if (!m || c->dev >= m->n_devs) return;
    dev_lr *l = &m->devs[c->dev];
    if (delta == -1) { /* the capture ended: the next capture registers again */
        l->lr_hooked = false;
        return;
    }
    if (delta != 0) return;
    for (int g = 0; g < l->n_groups && g < opt->n_groups; g++)
        if (l->lr[g] && l->lr_val[g] != opt->groups[g].o.head.lr && nb_fill_(l->lr[g], opt->groups[g].o.head.lr) == NB_OK)
            l->lr_val[g] = opt->groups[g].o.head.lr;
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

/* Registers fn for the capture under way on dev with a context that lives
 * as long as the optimizer (idx: copied; NULL for an lr refresh). */
static nb_status hook(nb_optimizer *opt, nb_optim_dev *m, nb_device dev, void (*fn)(void *, int), int n,
                      const int *idx, int d) {
    captured_call *c = malloc(sizeof *c);
    int *ci = c && idx ? malloc(sizeof *ci * (size_t)n) : NULL;
    captured_call **calls = c && (ci || !idx) ? grow(m->calls, sizeof *calls, m->n_calls + 1) : NULL;
    if (!calls) {
        free(c), free(ci);
        return no_memory(opt), nb_last_status();
    }
    m->calls = calls;
    if (ci) memcpy(ci, idx, sizeof *ci * (size_t)n);
    *c = (captured_call){opt, idx ? n : 0, ci, d};
    m->calls[m->n_calls++] = c;
    return nb_graph_add_replay_hook(dev, fn, c) ? NB_OK : nb_last_status();
}

nb_status nb_optim_dev_prepare(nb_optimizer *opt, int g, int n, const int *idx, nb_tensor *const *p,
                               const double **lr_dev, double **step_dev) {
    nb_device dev = nb_device_of(p[0]);
    bool cap = nb_graph_is_capturing(dev);
    nb_optim_dev *m = mirror(opt);
    if (!m) return nb_last_status();
    int d = 0;
    dev_lr *l = lr_of(opt, m, dev, &d);
    if (!l) return nb_last_status();
    const char *warm = "%s: %s is not on the device yet; take one eager step before capturing a graph";
    double lr = opt->groups[g].o.head.lr;
    if (!l->lr[g]) {
        if (cap) return nb_set_error(NB_ERR_STATE, warm, opt->d->op, "the lr");
        if (!(l->lr[g] = nb_tensor_new_unscoped(0, NULL, NB_F64, dev))) return nb_last_status();
    }
    /* In a capture nothing runs: an lr set since the last eager step is
     * written by refresh_lr before each replay, as later changes are. */
    if (l->lr_val[g] != lr && !cap) {
        nb_status st = nb_fill_(l->lr[g], lr);
        if (st) return st;
        l->lr_val[g] = lr;
    }
    *lr_dev = nb_data_ptr(l->lr[g]);
    for (int j = 0; j < n; j++)
        if (cap && (m->chunk[idx[j]] < 0 || m->steps_host[idx[j]] != (double)opt->state[idx[j]].step))
            return nb_set_error(NB_ERR_STATE, warm, opt->d->op, "the step count");
    nb_status st = make_counters(opt, m, dev, n, idx);
    for (int j = 0; j < n && !st; j++) {
        int i = idx[j];
        if (m->steps_host[i] != (double)opt->state[i].step) /* a checkpoint load, or the first step */
            st = write_counter(m, i, (double)opt->state[i].step);
        if (st) break;
        m->steps_host[i] = (double)opt->state[i].step + 1; /* what the kernel will leave */
        step_dev[j] = counter_at(m, i);
    }
    if (st || !cap) return st;
    st = hook(opt, m, dev, replay_steps, n, idx, d);
    if (!st && !l->lr_hooked) st = hook(opt, m, dev, refresh_lr, 0, NULL, d);
    if (!st) l->lr_hooked = true;
    return st;
}
