/* checkpoint.c - nb_save_checkpoint / nb_load_checkpoint (the file's keys
 * are listed in nb_checkpoint.h). Saving gathers the parts into one list of
 * named tensors and one of metadata strings for nb_safetensors_save.
 * Loading runs in two phases so that a bad file changes nothing: first
 * every key is parsed and checked and the new optimizer state tensors are
 * built aside; then the scheduler, module, optimizer, RNG and loader are
 * updated, with the scheduler (and the lrs it set) rolled back if the
 * module refuses its keys. The optimizer's and scheduler's keys are
 * ckpt_optim.c's.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_impl.h"

/* ---- growing lists of metadata pairs and named tensors (owned strings) ---- */

void nb_ckpt_lists_free(nb_ckpt_lists *l) {
    for (int i = 0; i < l->n_meta; i++) free((char *)l->meta[i].key), free((char *)l->meta[i].value);
    for (int i = 0; i < l->n_ts; i++) free((char *)l->ts[i].name);
    free(l->meta), free(l->ts);
}

static bool grow(void **items, int *cap, int n, size_t size) {
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 32;
    void *p = realloc(*items, size * (size_t)c);
    if (!p) return false;
    *items = p, *cap = c;
    return true;
}

nb_status nb_ckpt_put(nb_ckpt_lists *l, const char *value, const char *kfmt, ...) {
    char key[512];
    va_list ap;
    va_start(ap, kfmt);
    vsnprintf(key, sizeof key, kfmt, ap);
    va_end(ap);
    if (!grow((void **)&l->meta, &l->cap_meta, l->n_meta, sizeof *l->meta))
        return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) return free(k), free(v), nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    l->meta[l->n_meta++] = (nb_st_pair){k, v};
    return NB_OK;
}

nb_status nb_ckpt_put_i64(nb_ckpt_lists *l, const char *key, int64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)v);
    return nb_ckpt_put(l, s, "%s", key);
}

nb_status nb_ckpt_put_u64(nb_ckpt_lists *l, const char *key, uint64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    return nb_ckpt_put(l, s, "%s", key);
}

nb_status nb_ckpt_put_f64(nb_ckpt_lists *l, const char *key, double v) {
    char s[40];
    snprintf(s, sizeof s, "%.17g", v);
    return nb_ckpt_put(l, s, "%s", key);
}

nb_status nb_ckpt_put_tensor(nb_ckpt_lists *l, const char *name, nb_tensor *t) {
    if (!grow((void **)&l->ts, &l->cap_ts, l->n_ts, sizeof *l->ts))
        return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    char *n = strdup(name);
    if (!n) return nb_set_error(NB_ERR_OOM, "save_checkpoint: out of host memory");
    l->ts[l->n_ts++] = (nb_named_tensor){n, t};
    return NB_OK;
}

/* ---- loading: typed metadata ---------------------------------------------- */

const char *nb_ckpt_req(const nb_ckpt_reader *r, const char *key) {
    const char *v = nb_safetensors_meta(r->f, key);
    if (!v) nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s has no '%s' (saved without that part?)", r->path, key);
    return v;
}

nb_status nb_ckpt_bad_value(const nb_ckpt_reader *r, const char *key, const char *v, const char *want) {
    return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: '%s' is '%.40s', not %s", r->path, key, v, want);
}

/* Strict decimal integers: digits only (a leading '-' where signed), and a
 * value that overflows is an error, not strtoll's saturated INT64_MAX. */
static bool all_digits(const char *v) {
    if (!*v) return false;
    for (const char *c = v; *c; c++)
        if (*c < '0' || *c > '9') return false;
    return true;
}

nb_status nb_ckpt_get_i64(const nb_ckpt_reader *r, const char *key, int64_t min, int64_t *out) {
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    const char *want = min >= 0 ? "an integer in [0, 2^63)" : "an integer in [-2^63, 2^63)";
    if (!all_digits(v[0] == '-' ? v + 1 : v)) return nb_ckpt_bad_value(r, key, v, want);
    errno = 0;
    long long x = strtoll(v, NULL, 10);
    if (errno == ERANGE || x < min) return nb_ckpt_bad_value(r, key, v, want);
    *out = x;
    return NB_OK;
}

nb_status nb_ckpt_get_u64(const nb_ckpt_reader *r, const char *key, uint64_t *out) {
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    if (!all_digits(v)) return nb_ckpt_bad_value(r, key, v, "an unsigned integer below 2^64");
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno == ERANGE) return nb_ckpt_bad_value(r, key, v, "an unsigned integer below 2^64");
    *out = x;
    return NB_OK;
}

nb_status nb_ckpt_get_f64(const nb_ckpt_reader *r, const char *key, double min, double *out) {
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x) || !(x >= min)) return nb_ckpt_bad_value(r, key, v, "a finite number in range");
    *out = x;
    return NB_OK;
}

nb_status nb_ckpt_get_bool(const nb_ckpt_reader *r, const char *key, bool *out) {
    const char *v = nb_ckpt_req(r, key);
    if (!v) return NB_ERR_FORMAT;
    if (strcmp(v, "true") && strcmp(v, "false")) return nb_ckpt_bad_value(r, key, v, "true or false");
    *out = !strcmp(v, "true");
    return NB_OK;
}

/* ---- saving ----------------------------------------------------------------- */

const char *nb_ckpt_name_of(const nb_named_tensor *sd, int n, const nb_tensor *t) {
    for (int i = 0; i < n; i++)
        if (sd[i].tensor == t) return sd[i].name;
    return "";
}


/* The loaders a checkpoint holds (nb_loader as "loader.*", nb_dataloader as
 * "dataloader.*"): where they are, and what their order depends on. */
typedef struct loader_view {
    const char *prefix;
    int64_t epoch, position, num_batches;
    uint64_t seed;
} loader_view;

static int loader_views(const nb_checkpoint *ck, loader_view *v) {
    int n = 0;
    if (ck->loader)
        v[n++] = (loader_view){"loader", nb_loader_epoch(ck->loader), nb_loader_position(ck->loader),
                               nb_loader_num_batches(ck->loader), nb_loader_get_options(ck->loader).seed};
    if (ck->dataloader) { /* -1 batches: not checked (an iterable dataset's, or a batch sampler's that varies by epoch) */
        nb_dataloader_options o = nb_dataloader_get_options(ck->dataloader);
        v[n++] = (loader_view){"dataloader", nb_dataloader_epoch(ck->dataloader), nb_dataloader_position(ck->dataloader),
                               o.batch_sampler ? -1 : nb_dataloader_num_batches(ck->dataloader), o.seed};
    }
    return n;
}

static nb_status put_key_i64(nb_ckpt_lists *l, const char *prefix, const char *key, int64_t v) {
    char k[64];
    snprintf(k, sizeof k, "%s.%s", prefix, key);
    return nb_ckpt_put_i64(l, k, v);
}

static nb_status save_parts(nb_ckpt_lists *l, const nb_checkpoint *ck, const nb_named_tensor *sd, int nsd) {
    nb_generator *g = ck->generator ? ck->generator : nb_default_generator();
    nb_status st = nb_ckpt_put(l, "pt", "format");
    if (!st) st = nb_ckpt_put(l, "1", "nabla.checkpoint");
    if (!st) st = nb_ckpt_put_i64(l, "global_step", ck->global_step);
    if (!st) st = nb_ckpt_put_u64(l, "rng.seed", g->seed);
    if (!st) st = nb_ckpt_put_u64(l, "rng.offset", g->offset);
    loader_view v[2];
    int nv = loader_views(ck, v);
    for (int i = 0; i < nv && !st; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.seed", v[i].prefix);
        st = put_key_i64(l, v[i].prefix, "epoch", v[i].epoch);
        if (!st) st = put_key_i64(l, v[i].prefix, "position", v[i].position);
        if (!st) st = nb_ckpt_put_u64(l, k, v[i].seed);
        if (!st) st = put_key_i64(l, v[i].prefix, "num_batches", v[i].num_batches);
    }
    for (int i = 0; i < nsd && !st; i++) st = nb_ckpt_put_tensor(l, sd[i].name, sd[i].tensor);
    if (!st && ck->optimizer) st = nb_ckpt_save_optimizer(l, ck->optimizer, sd, nsd);
    if (!st && ck->scheduler) st = nb_ckpt_save_scheduler(l, ck->scheduler);
    for (int i = 0; i < ck->n_user && !st; i++) st = nb_ckpt_put(l, ck->user[i].value, "user.%s", ck->user[i].key);
    return st;
}

nb_status nb_save_checkpoint(const char *path, const nb_checkpoint *ck) {
    if (!path || !ck || !ck->module || ck->n_user < 0 || (ck->n_user && !ck->user))
        return nb_set_error(NB_ERR_INVALID_ARG, "save_checkpoint: NULL path, checkpoint or module, or a bad user list");
    for (int i = 0; i < ck->n_user; i++)
        if (!ck->user[i].key || !ck->user[i].value)
            return nb_set_error(NB_ERR_INVALID_ARG, "save_checkpoint: user pair %d has a NULL key or value", i);
    nb_named_tensor *sd = NULL;
    int nsd = nb_module_state_dict(ck->module, &sd);
    if (nsd < 0) return nb_last_status();
    for (int i = 0; i < nsd; i++)
        if (!strncmp(sd[i].name, NB_CKPT_OPT, strlen(NB_CKPT_OPT))) {
            nb_status st = nb_set_error(NB_ERR_INVALID_ARG,
                                        "save_checkpoint: module key '%s' uses the reserved prefix '" NB_CKPT_OPT "'",
                                        sd[i].name);
            return free(sd), st;
        }
    nb_ckpt_lists l = {0};
    nb_status st = save_parts(&l, ck, sd, nsd);
    if (!st) st = nb_safetensors_save(path, l.ts, l.n_ts, l.meta, l.n_meta);
    nb_ckpt_lists_free(&l);
    free(sd);
    return st;
}

/* ---- loading: loader ---------------------------------------------------------- */

typedef struct loader_plan {
    int64_t epoch, position;
} loader_plan;

/* The saved place of loader view v, checked against it (its seed and batches per epoch). */
static nb_status plan_loader(const nb_ckpt_reader *r, const loader_view *v, loader_plan *lp) {
    int64_t nb;
    uint64_t seed;
    char k[4][64];
    const char *names[4] = {"epoch", "position", "seed", "num_batches"};
    for (int i = 0; i < 4; i++) snprintf(k[i], sizeof k[i], "%s.%s", v->prefix, names[i]);
    nb_status st = nb_ckpt_get_i64(r, k[0], 0, &lp->epoch);
    if (!st) st = nb_ckpt_get_i64(r, k[1], 0, &lp->position);
    if (!st) st = nb_ckpt_get_u64(r, k[2], &seed);
    if (!st) st = nb_ckpt_get_i64(r, k[3], -1, &nb);
    if (st) return st;
    if (seed != v->seed) /* the order depends on it */
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: %s seed %llu saved, the %s has %llu", r->path, v->prefix,
                            (unsigned long long)seed, v->prefix, (unsigned long long)v->seed);
    if (nb != v->num_batches)
        return nb_set_error(NB_ERR_STATE, "load_checkpoint: %s: %lld batches per epoch saved, the %s has %lld", r->path,
                            (long long)nb, v->prefix, (long long)v->num_batches);
    if (nb >= 0 && lp->position > nb)
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: %s position %lld past %lld batches", r->path, v->prefix,
                            (long long)lp->position, (long long)nb);
    return NB_OK;
}

/* ---- loading ------------------------------------------------------------------ */

typedef struct load_state {
    nb_ckpt_reader r;
    nb_named_tensor *sd, *model_ts; /* module state_dict; the file's non-optimizer tensors */
    int nsd, n_model;
    nb_ckpt_opt_plan opt;
    nb_scheduler_value *sched, *sched_backup;
    int n_sched;
    double *lr_backup; /* the optimizer's group lrs, which loading the scheduler sets */
    loader_plan lp[2];
    int n_loaders;
    int64_t step;
    uint64_t rng_seed, rng_offset;
} load_state;

/* Phase 1: parses and checks everything; changes nothing. */
static nb_status plan_all(const nb_checkpoint *ck, load_state *ls) {
    const nb_ckpt_reader *r = &ls->r;
    const char *ver = nb_safetensors_meta(r->f, "nabla.checkpoint");
    if (!ver || strcmp(ver, "1"))
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s is not a nabla checkpoint (nabla.checkpoint is %s%s%s)",
                            r->path, ver ? "'" : "", ver ? ver : "missing", ver ? "'" : "");
    nb_status st = nb_ckpt_get_i64(r, "global_step", 0, &ls->step);
    if (!st) st = nb_ckpt_get_u64(r, "rng.seed", &ls->rng_seed);
    if (!st) st = nb_ckpt_get_u64(r, "rng.offset", &ls->rng_offset);
    loader_view v[2];
    ls->n_loaders = loader_views(ck, v);
    for (int i = 0; !st && i < ls->n_loaders; i++) st = plan_loader(r, &v[i], &ls->lp[i]);
    if (!st && (ls->nsd = nb_module_state_dict(ck->module, &ls->sd)) < 0) st = nb_last_status();
    if (!st && ck->optimizer) st = nb_ckpt_plan_optimizer(r, ck->optimizer, ls->sd, ls->nsd, &ls->opt);
    if (!st && ck->scheduler) st = nb_ckpt_plan_scheduler(r, ck->scheduler, &ls->sched, &ls->n_sched);
    if (!st && ck->scheduler) {
        nb_optimizer *o = ck->scheduler->opt;
        ls->sched_backup = calloc((size_t)ls->n_sched + 1, sizeof *ls->sched_backup);
        ls->lr_backup = malloc(sizeof *ls->lr_backup * ((size_t)o->n_groups + 1));
        st = ls->sched_backup && ls->lr_backup ? nb_scheduler_state_dict(ck->scheduler, ls->sched_backup, ls->n_sched)
                                               : nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
        for (int g = 0; !st && g < o->n_groups; g++) ls->lr_backup[g] = o->groups[g].o.head.lr;
    }
    if (!st && !(ls->model_ts = malloc(sizeof *ls->model_ts * ((size_t)r->f->n_tensors + 1))))
        st = nb_set_error(NB_ERR_OOM, "load_checkpoint: out of host memory");
    for (int i = 0; !st && i < r->f->n_tensors; i++)
        if (strncmp(r->f->tensors[i].name, NB_CKPT_OPT, strlen(NB_CKPT_OPT)))
            ls->model_ts[ls->n_model++] = r->f->tensors[i];
    return st;
}

/* Phase 2: the DataLoader first (its seek may fail in the user's sampler or
 * stream, or at a position past a batch count only the seek learns, and
 * changes nothing then), then the scheduler (its load validates the last
 * details and changes nothing on failure), then the module (checked before
 * copied), then what cannot fail; a failure puts back what changed before it. */
static nb_status apply_all(nb_checkpoint *ck, load_state *ls) {
    const loader_plan *dl = ck->dataloader ? &ls->lp[ls->n_loaders - 1] : NULL;
    int64_t dl_epoch = dl ? nb_dataloader_epoch(ck->dataloader) : 0, dl_pos = dl ? nb_dataloader_position(ck->dataloader) : 0;
    nb_status st = dl ? nb_dataloader_seek(ck->dataloader, dl->epoch, dl->position) : NB_OK;
    if (st) {
        char why[256];
        snprintf(why, sizeof why, "%s", nb_last_error());
        return nb_set_error(st, "load_checkpoint: %s: positioning the DataLoader: %s", ls->r.path, why);
    }
    st = ck->scheduler ? nb_scheduler_load_state_dict(ck->scheduler, ls->sched, ls->n_sched) : NB_OK;
    if (st) {
        char why[256];
        snprintf(why, sizeof why, "%s", nb_last_error());
        if (dl) nb_dataloader_seek(ck->dataloader, dl_epoch, dl_pos); /* it was there a moment ago */
        return nb_set_error(NB_ERR_FORMAT, "load_checkpoint: %s: %s", ls->r.path, why);
    }
    st = nb_module_load_tensors(ck->module, ls->model_ts, ls->n_model, !ck->non_strict, ck->report);
    if (st) {
        if (dl) {
            char why[512];
            snprintf(why, sizeof why, "%s", nb_last_error());
            nb_dataloader_seek(ck->dataloader, dl_epoch, dl_pos);
            nb_set_error(st, "%s", why);
        }
        if (ck->scheduler) {
            nb_scheduler_load_state_dict(ck->scheduler, ls->sched_backup, ls->n_sched);
            for (int g = 0; g < ck->scheduler->opt->n_groups; g++)
                ck->scheduler->opt->groups[g].o.head.lr = ls->lr_backup[g];
        }
        return st;
    }
    if (ck->optimizer) nb_ckpt_commit_optimizer(ck->optimizer, &ls->opt);
    nb_generator *g = ck->generator ? ck->generator : nb_default_generator();
    g->seed = ls->rng_seed, g->offset = ls->rng_offset;
    ck->global_step = ls->step;
    /* nb_loader last: checked in plan_loader, its seek fails only without memory */
    return ck->loader ? nb_loader_seek(ck->loader, ls->lp[0].epoch, ls->lp[0].position) : NB_OK;
}

nb_status nb_load_checkpoint(const char *path, nb_checkpoint *ck, nb_safetensors **file) {
    if (file) *file = NULL;
    if (ck && ck->report) memset(ck->report, 0, sizeof *ck->report);
    if (!path || !ck || !ck->module)
        return nb_set_error(NB_ERR_INVALID_ARG, "load_checkpoint: NULL path, checkpoint or module");
    nb_safetensors *f = nb_safetensors_load(path);
    if (!f) return nb_last_status();
    load_state ls = {.r = {f, path}};
    nb_status st = plan_all(ck, &ls);
    if (!st) st = apply_all(ck, &ls);
    nb_ckpt_plan_free(&ls.opt);
    free(ls.sd), free(ls.model_ts), free(ls.sched), free(ls.sched_backup), free(ls.lr_backup);
    if (!st && file) *file = f;
    else nb_safetensors_free(f);
    return st;
}
