/* ckpt_impl.h - what checkpoint.c (files, module, loader, RNG) shares with
 * ckpt_optim.c (optimizer and scheduler state): lists of metadata pairs and
 * named tensors being gathered for a save, typed metadata reads for a load.
 * Not installed.
 */
#ifndef NB_CKPT_IMPL_H
#define NB_CKPT_IMPL_H

#include "nb_checkpoint.h"
#include "sched_impl.h"

#define NB_CKPT_OPT "optimizer."

/* Growing lists of metadata pairs and named tensors (owned strings). */
typedef struct nb_ckpt_lists {
    nb_st_pair *meta;
    int n_meta, cap_meta;
    nb_named_tensor *ts;
    int n_ts, cap_ts;
} nb_ckpt_lists;

void nb_ckpt_lists_free(nb_ckpt_lists *l);
/* Adds key (printf-formatted from kfmt) = value. */
nb_status nb_ckpt_put(nb_ckpt_lists *l, const char *value, const char *kfmt, ...) __attribute__((format(printf, 3, 4)));
nb_status nb_ckpt_put_i64(nb_ckpt_lists *l, const char *key, int64_t v);
nb_status nb_ckpt_put_u64(nb_ckpt_lists *l, const char *key, uint64_t v);
/* "%.17g", which round-trips every double exactly through strtod. */
nb_status nb_ckpt_put_f64(nb_ckpt_lists *l, const char *key, double v);
nb_status nb_ckpt_put_tensor(nb_ckpt_lists *l, const char *name, nb_tensor *t);

typedef struct nb_ckpt_reader {
    const nb_safetensors *f;
    const char *path;
} nb_ckpt_reader;

/* The value of key, or NULL with NB_ERR_FORMAT set ("has no 'key'"). */
const char *nb_ckpt_req(const nb_ckpt_reader *r, const char *key);
nb_status nb_ckpt_bad_value(const nb_ckpt_reader *r, const char *key, const char *v, const char *want);
nb_status nb_ckpt_get_i64(const nb_ckpt_reader *r, const char *key, int64_t min, int64_t *out);
nb_status nb_ckpt_get_u64(const nb_ckpt_reader *r, const char *key, uint64_t *out);
/* A finite double >= min. */
nb_status nb_ckpt_get_f64(const nb_ckpt_reader *r, const char *key, double min, double *out);
nb_status nb_ckpt_get_bool(const nb_ckpt_reader *r, const char *key, bool *out);

/* The module name of tensor t in the state_dict sd, or "". */
const char *nb_ckpt_name_of(const nb_named_tensor *sd, int n, const nb_tensor *t);

/* ---- ckpt_optim.c ---------------------------------------------------------------- */

nb_status nb_ckpt_save_optimizer(nb_ckpt_lists *l, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd);
nb_status nb_ckpt_save_scheduler(nb_ckpt_lists *l, const nb_scheduler *s);

/* An optimizer's state read from a file, checked, not yet applied. */
typedef struct nb_ckpt_opt_plan {
    int n, n_groups;
    nb_optim_options *options; /* [n_groups] */
    double *initial_lr;        /* [n_groups] */
    nb_param_state *state;     /* [n]; tensors owned until committed */
} nb_ckpt_opt_plan;

nb_status nb_ckpt_plan_optimizer(const nb_ckpt_reader *r, const nb_optimizer *opt, const nb_named_tensor *sd, int nsd,
                                 nb_ckpt_opt_plan *p);
/* Swaps the planned state in (cannot fail). */
void nb_ckpt_commit_optimizer(nb_optimizer *opt, nb_ckpt_opt_plan *p);
void nb_ckpt_plan_free(nb_ckpt_opt_plan *p);
/* The scheduler's state values from the file (malloc'd, *n of them). */
nb_status nb_ckpt_plan_scheduler(const nb_ckpt_reader *r, const nb_scheduler *s, nb_scheduler_value **out, int *n);

#endif
