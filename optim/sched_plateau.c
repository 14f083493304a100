/* sched_plateau.c - ReduceLROnPlateau: lowers the lrs when a metric stops
 * improving, as PyTorch 2.11's (its step, _reduce_lr and _is_better; the
 * rule is in nb_lr_scheduler.h). It reads the lrs it changes from the
 * optimizer, so other changes to them carry.
 */
#include <math.h>
#include <stdlib.h>

#include "sched_impl.h"

nb_scheduler *nb_reduce_lr_on_plateau(nb_optimizer *opt, nb_reduce_lr_on_plateau_options o) {
    const char *op = "reduce_lr_on_plateau";
    double factor = nb_option(o.factor, 0.1), patience = nb_option(o.patience, 10.0);
    double threshold = nb_option(o.threshold, 1e-4), eps = nb_option(o.eps, 1e-8);
    if (!(factor >= 0.0 && factor < 1.0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: Factor should be < 1.0 (and >= 0; got %g)", op, factor);
    if (o.mode != NB_PLATEAU_MIN && o.mode != NB_PLATEAU_MAX)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: mode %d is unknown (NB_PLATEAU_MIN or NB_PLATEAU_MAX)", op,
                       (int)o.mode);
    if (o.threshold_mode != NB_THRESHOLD_REL && o.threshold_mode != NB_THRESHOLD_ABS)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: threshold mode %d is unknown", op, (int)o.threshold_mode);
    if (!(patience >= 0.0) || !isfinite(patience) || patience != floor(patience))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: patience must be a count >= 0 (got %g)", op, patience);
    if (!isfinite(threshold))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: threshold must be finite (got %g)", op, threshold);
    if (o.cooldown < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: cooldown must be >= 0 (got %lld)", op, (long long)o.cooldown);
    if (!(eps >= 0.0) || !isfinite(eps))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: eps must be >= 0 and finite (got %g)", op, eps);
    nb_scheduler *s = nb_sched_new(NB_SCHED_PLATEAU, opt, op);
    if (!s) return NULL;
    if (nb_sched_fill_pg(s, NB_PG_MIN_LR, nb_option(o.min_lr, 0.0), o.min_lrs, op, "min_lr")) {
        nb_scheduler_free(s);
        return NULL;
    }
    s->pmode = o.mode;
    s->threshold_mode = o.threshold_mode;
    s->factor = factor;
    s->patience = patience;
    s->threshold = threshold;
    s->cooldown = o.cooldown;
    s->eps = eps;
    s->last_epoch = 0;
    s->best = o.mode == NB_PLATEAU_MIN ? INFINITY : -INFINITY; /* mode_worse */
    return s;
}

static bool is_better(const nb_scheduler *s, double a, double best) {
    if (s->pmode == NB_PLATEAU_MIN && s->threshold_mode == NB_THRESHOLD_REL) return a < best * (1. - s->threshold);
    if (s->pmode == NB_PLATEAU_MIN) return a < best - s->threshold;
    if (s->threshold_mode == NB_THRESHOLD_REL) return a > best * (s->threshold + 1.);
    return a > best + s->threshold;
}

nb_status nb_sched_plateau_step(nb_scheduler *s, double current) {
    double best = s->best;
    int64_t bad = s->num_bad_epochs, cooldown_counter = s->cooldown_counter;
    if (is_better(s, current, best)) best = current, bad = 0;
    else bad += 1;
    if (cooldown_counter > 0) { /* ignore any bad epochs in cooldown */
        cooldown_counter -= 1;
        bad = 0;
    }
    if ((double)bad > s->patience) { /* _reduce_lr */
        for (int g = 0; g < s->n_groups; g++) {
            double old_lr = s->opt->groups[g].o.head.lr, min_lr = *nb_sched_pg(s, g, NB_PG_MIN_LR);
            double new_lr = min_lr > old_lr * s->factor ? min_lr : old_lr * s->factor; /* Python's max() */
            if (old_lr - new_lr > s->eps) s->opt->groups[g].o.head.lr = new_lr;
        }
        cooldown_counter = s->cooldown;
        bad = 0;
    }
    s->last_epoch += 1;
    s->best = best, s->num_bad_epochs = bad, s->cooldown_counter = cooldown_counter;
    for (int g = 0; g < s->n_groups; g++) *nb_sched_pg(s, g, NB_PG_LAST_LR) = s->opt->groups[g].o.head.lr;
    return NB_OK;
}
