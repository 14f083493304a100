/* lbfgs.c - torch.optim.LBFGS (Nocedal 1980, "Updating quasi-Newton
 * matrices with limited storage"; PyTorch's port of minFunc, with the
 * strong-Wolfe line search of torch/optim/lbfgs.py's _strong_wolfe and
 * _cubic_interpolate), statement by statement in PyTorch's order, as a
 * composition of ops over the parameters seen as one flat vector. Scalars
 * PyTorch keeps as 0-d tensors (dot products, t, H_diag) are doubles here.
 * State lives on parameter 0, under PyTorch's names: tensors d,
 * prev_flat_grad, old_dirs [k, N], old_stps [k, N], ro [k]; scalars
 * func_evals, n_iter, t, H_diag, prev_loss.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_ops.h"
#include "optim_impl.h"

static const nb_field fields[] = {
    NB_FIELD(nb_lbfgs_options, lr, "lr", NB_FIELD_F64),
    NB_FIELD(nb_lbfgs_options, max_iter, "max_iter", NB_FIELD_INT),
    NB_FIELD(nb_lbfgs_options, max_eval, "max_eval", NB_FIELD_INT),
    NB_FIELD(nb_lbfgs_options, tolerance_grad, "tolerance_grad", NB_FIELD_F64),
    NB_FIELD(nb_lbfgs_options, tolerance_change, "tolerance_change", NB_FIELD_F64),
    NB_FIELD(nb_lbfgs_options, history_size, "history_size", NB_FIELD_INT),
    NB_FIELD(nb_lbfgs_options, line_search_fn, "line_search_fn", NB_FIELD_ENUM),
};
enum { D, PREV_FLAT_GRAD, OLD_DIRS, OLD_STPS, RO, N_TENSORS };
static const char *const tensors[] = {"d", "prev_flat_grad", "old_dirs", "old_stps", "ro"};
enum { FUNC_EVALS, N_ITER, T, H_DIAG, PREV_LOSS, N_SCALARS };
static const char *const scalars[] = {"func_evals", "n_iter", "t", "H_diag", "prev_loss"};
static const nb_lbfgs_options torch_defaults = {
    .lr = 1, .max_iter = 20, .tolerance_grad = 1e-7, .tolerance_change = 1e-9, .history_size = 100};

/* max_eval's default comes from max_iter (PyTorch: max_iter * 5 // 4). */
static void finish(void *options) {
    nb_lbfgs_options *o = options;
    if (o->max_eval == 0) o->max_eval = o->max_iter * 5 / 4;
}

static bool has_tensor(const void *o, const nb_tensor *p, int k, int *ndim, int64_t *shape) {
    (void)o, (void)p, (void)k, (void)ndim, (void)shape;
    return false; /* made by the step itself, on parameter 0 */
}

/* ---- the flat-vector view of the parameters ------------------------------------ */

typedef struct lbfgs {
    nb_optimizer *opt;
    const nb_lbfgs_options *o;
    nb_closure_fn closure;
    void *user;
    int64_t numel;
} lbfgs;

/* Replaces *slot by t, keeping an owned reference (t may be scoped). */
static void own(nb_tensor **slot, nb_tensor *t) {
    if (t) nb_retain(t);
    nb_release(*slot);
    *slot = t;
}

/* float(closure()), with grad mode on, as PyTorch's enable_grad wrapper. */
static nb_status evaluate(lbfgs *c, double *loss) {
    bool prev = nb_set_grad_enabled(true);
    nb_status st = c->closure(c->user, loss);
    nb_set_grad_enabled(prev);
    return st;
}

/* _gather_flat_grad: every gradient flattened and joined (zeros for none). */
static nb_tensor *gather_flat_grad(lbfgs *c) {
    int n = c->opt->n;
    nb_tensor **views = malloc(sizeof *views * (size_t)n);
    if (!views) return NB_FAIL(NB_ERR_OOM, "lbfgs: out of host memory");
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        nb_tensor *p = c->opt->params[i], *g = nb_tensor_grad(p);
        int64_t numel = nb_numel(p);
        views[i] = g ? nb_reshape(g, 1, &numel) : nb_expand(nb_optim_scalar(p, 0.0), 1, &numel);
        ok = views[i] != NULL;
    }
    nb_tensor *flat = ok ? nb_cat(views, n, 0) : NULL;
    free(views);
    return flat;
}

/* _add_grad: p += step * update[offset : offset + numel].view_as(p). */
static nb_status add_grad(lbfgs *c, double step, nb_tensor *update) {
    int64_t offset = 0;
    for (int i = 0; i < c->opt->n; i++) {
        nb_tensor *p = c->opt->params[i];
        int64_t numel = nb_numel(p);
        nb_tensor *part = nb_reshape(nb_narrow(update, 0, offset, numel), nb_dim(p), nb_shape(p));
        nb_status st = nb_optim_assign(p, nb_optim_axpy(p, step, part));
        if (st) return st;
        offset += numel;
    }
    return NB_OK;
}

/* _clone_param / _set_param. */
static nb_tensor **clone_params(lbfgs *c) {
    nb_tensor **x = calloc((size_t)c->opt->n, sizeof *x);
    if (!x) return NB_FAIL(NB_ERR_OOM, "lbfgs: out of host memory");
    for (int i = 0; i < c->opt->n; i++) {
        x[i] = nb_empty_like(c->opt->params[i]);
        if (!x[i] || nb_copy_(x[i], c->opt->params[i])) return free(x), NULL;
    }
    return x;
}

static nb_status set_params(lbfgs *c, nb_tensor *const *x) {
    for (int i = 0; i < c->opt->n; i++) {
        nb_status st = nb_copy_(c->opt->params[i], x[i]);
        if (st) return st;
    }
    return NB_OK;
}

/* The reductions PyTorch reads back as numbers. */
static nb_status to_double(nb_tensor *t, double *out) {
    if (!t) return nb_last_status();
    *out = nb_item(t);
    return NB_OK;
}
static nb_status dot(nb_tensor *a, nb_tensor *b, double *out) {
    return to_double(nb_sum(nb_mul(a, b), NULL, 0, false), out);
}
static nb_status abs_max(nb_tensor *a, double *out) { return to_double(nb_max(nb_abs(a), NULL, 0, false), out); }

/* Row i of a [k, N] history matrix as an [N] view. */
static nb_tensor *row(nb_tensor *m, int64_t i) {
    int64_t n = nb_size(m, 1);
    return nb_reshape(nb_narrow(m, 0, i, 1), 1, &n);
}

/* _directional_evaluate: the loss and flat gradient at x + t d; the
 * parameters are back at x afterwards. */
static nb_status directional_evaluate(lbfgs *c, nb_tensor *const *x, double t, nb_tensor *d, double *f,
                                      nb_tensor **g) {
    nb_status st = add_grad(c, t, d);
    if (!st) st = evaluate(c, f);
    if (!st && !(*g = gather_flat_grad(c))) st = nb_last_status();
    nb_status st2 = set_params(c, x);
    return st ? st : st2;
}

/* ---- the strong-Wolfe line search (torch/optim/lbfgs.py) -------------------------- */

static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                                const double *bounds) {
    double xmin_bound, xmax_bound;
    if (bounds) xmin_bound = bounds[0], xmax_bound = bounds[1];
    else if (x1 <= x2) xmin_bound = x1, xmax_bound = x2;
    else xmin_bound = x2, xmax_bound = x1;
    double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        double d2 = sqrt(d2_square), min_pos;
        if (x1 <= x2) min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2));
        else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return fmin(fmax(min_pos, xmin_bound), xmax_bound);
    }
    return (xmin_bound + xmax_bound) / 2.;
}

/* Python's min(max(a, lo), hi) keeps NaN out differently from fmin/fmax;
 * the interpolation above only sees finite values in practice. */

typedef struct ls_result {
    double f, t;
    nb_tensor *g;
    int64_t evals;
} ls_result;

static nb_status strong_wolfe(lbfgs *c, nb_tensor *const *x, double t, nb_tensor *d, double f, nb_tensor *g,
                              double gtd, ls_result *out) {
    const double c1 = 1e-4, c2 = 0.9, tolerance_change = c->o->tolerance_change;
    const int max_ls = 25;
    double d_norm = 0, f_new = 0, gtd_new = 0;
    nb_tensor *g_new = NULL;
    nb_status st = abs_max(d, &d_norm);
    if (!st) st = directional_evaluate(c, x, t, d, &f_new, &g_new);
    if (!st) st = dot(g_new, d, &gtd_new);
    if (st) return st;
    int64_t ls_func_evals = 1;
    double t_prev = 0, f_prev = f, gtd_prev = gtd;
    nb_tensor *g_prev = g;
    bool done = false;
    int ls_iter = 0, nb = 0; /* nb: bracket entries */
    double bracket[2] = {0}, bracket_f[2] = {0}, bracket_gtd[2] = {0};
    nb_tensor *bracket_g[2] = {NULL, NULL};
    while (ls_iter < max_ls) {
        if (f_new > (f + c1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
            nb = 2, bracket[0] = t_prev, bracket[1] = t, bracket_f[0] = f_prev, bracket_f[1] = f_new;
            bracket_g[0] = g_prev, bracket_g[1] = g_new, bracket_gtd[0] = gtd_prev, bracket_gtd[1] = gtd_new;
            break;
        }
        if (fabs(gtd_new) <= -c2 * gtd) {
            nb = 1, bracket[0] = t, bracket_f[0] = f_new, bracket_g[0] = g_new;
            done = true;
            break;
        }
        if (gtd_new >= 0) {
            nb = 2, bracket[0] = t_prev, bracket[1] = t, bracket_f[0] = f_prev, bracket_f[1] = f_new;
            bracket_g[0] = g_prev, bracket_g[1] = g_new, bracket_gtd[0] = gtd_prev, bracket_gtd[1] = gtd_new;
            break;
        }
        double bounds[2] = {t + 0.01 * (t - t_prev), t * 10}, tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
        t_prev = tmp, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
        st = directional_evaluate(c, x, t, d, &f_new, &g_new);
        if (!st) st = dot(g_new, d, &gtd_new);
        if (st) return st;
        ls_func_evals++;
        ls_iter++;
    }
    if (ls_iter == max_ls) { /* reached max number of iterations */
        nb = 2, bracket[0] = 0, bracket[1] = t, bracket_f[0] = f, bracket_f[1] = f_new;
        bracket_g[0] = g, bracket_g[1] = g_new;
    }
    /* zoom: refine the bracket until a point satisfies the conditions */
    bool insuf_progress = false;
    int low_pos = bracket_f[0] <= bracket_f[nb - 1] ? 0 : 1, high_pos = 1 - low_pos;
    while (!done && ls_iter < max_ls) {
        if (fabs(bracket[1] - bracket[0]) * d_norm < tolerance_change) break;
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1], NULL);
        double hi = fmax(bracket[0], bracket[1]), lo = fmin(bracket[0], bracket[1]), eps = 0.1 * (hi - lo);
        if (fmin(hi - t, t - lo) < eps) { /* interpolation close to the boundary */
            if (insuf_progress || t >= hi || t <= lo) {
                t = fabs(t - hi) < fabs(t - lo) ? hi - eps : lo + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        st = directional_evaluate(c, x, t, d, &f_new, &g_new);
        if (!st) st = dot(g_new, d, &gtd_new);
        if (st) return st;
        ls_func_evals++;
        ls_iter++;
        if (f_new > (f + c1 * t * gtd) || f_new >= bracket_f[low_pos]) {
            bracket[high_pos] = t, bracket_f[high_pos] = f_new, bracket_g[high_pos] = g_new;
            bracket_gtd[high_pos] = gtd_new;
            low_pos = bracket_f[0] <= bracket_f[1] ? 0 : 1, high_pos = 1 - low_pos;
        } else {
            if (fabs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0) { /* old high becomes new low */
                bracket[high_pos] = bracket[low_pos], bracket_f[high_pos] = bracket_f[low_pos];
                bracket_g[high_pos] = bracket_g[low_pos], bracket_gtd[high_pos] = bracket_gtd[low_pos];
            }
            bracket[low_pos] = t, bracket_f[low_pos] = f_new, bracket_g[low_pos] = g_new;
            bracket_gtd[low_pos] = gtd_new;
        }
    }
    *out = (ls_result){bracket_f[low_pos], bracket[low_pos], bracket_g[low_pos], ls_func_evals};
    return NB_OK;
}

/* ---- the step ------------------------------------------------------------------- */

/* The two-loop recursion: d = -H g from the history (PyTorch's "iteration
 * in L-BFGS loop collapsed to use just one buffer"). */
static nb_tensor *direction(nb_tensor *flat_grad, nb_tensor *old_dirs, nb_tensor *old_stps, nb_tensor *ro,
                            double h_diag) {
    int64_t num_old = old_dirs ? nb_size(old_dirs, 0) : 0;
    double *al = malloc(sizeof *al * (size_t)(num_old + 1)), *ro_h = malloc(sizeof *ro_h * (size_t)(num_old + 1));
    nb_tensor *q = nb_neg(flat_grad), *r = NULL;
    if (!al || !ro_h) {
        free(al), free(ro_h);
        return NB_FAIL(NB_ERR_OOM, "lbfgs: out of host memory");
    }
    if (num_old) { /* ro's entries as numbers, as PyTorch's alpha=... reads them */
        nb_tensor *r64 = nb_dtype_of(ro) == NB_F64 ? ro : nb_to_dtype(ro, NB_F64);
        if (!r64 || nb_to_host(r64, ro_h, sizeof *ro_h * (size_t)num_old)) q = NULL;
    }
    for (int64_t i = num_old - 1; i >= 0 && q; i--) {
        double dq = 0;
        if (dot(row(old_stps, i), q, &dq)) q = NULL;
        else al[i] = dq * ro_h[i], q = nb_optim_axpy(q, -al[i], row(old_dirs, i));
    }
    if (q) r = nb_mul_scalar(q, h_diag);
    for (int64_t i = 0; i < num_old && r; i++) {
        double dr = 0;
        if (dot(row(old_dirs, i), r, &dr)) r = NULL;
        else r = nb_optim_axpy(r, al[i] - dr * ro_h[i], row(old_stps, i));
    }
    free(al), free(ro_h);
    return r;
}

/* Appends row v ([N], or 0-d for ro) to the history h ([k, N] or [k];
 * NULL when empty), dropping the oldest row when k == limit. */
static nb_tensor *push_row(nb_tensor *h, nb_tensor *v, int64_t limit) {
    nb_tensor *v2 = nb_unsqueeze(v, 0);
    if (!h) return v2 ? nb_contiguous(v2) : NULL;
    if (nb_size(h, 0) == limit) h = limit > 1 ? nb_narrow(h, 0, 1, limit - 1) : NULL;
    return h ? nb_cat((nb_tensor *[]){h, v2}, 2, 0) : nb_contiguous(v2);
}

/* Everything of one step between its first evaluation and the end. */
static nb_status iterate(lbfgs *c, nb_param_state *s, nb_tensor *flat_grad_in, double loss) {
    const nb_lbfgs_options *o = c->o;
    nb_tensor *flat_grad = NULL, *d = NULL, *prev_flat_grad = NULL, *old_dirs = NULL, *old_stps = NULL, *ro = NULL;
    own(&flat_grad, flat_grad_in);
    own(&d, s->t[D]), own(&prev_flat_grad, s->t[PREV_FLAT_GRAD]);
    own(&old_dirs, s->t[OLD_DIRS]), own(&old_stps, s->t[OLD_STPS]), own(&ro, s->t[RO]);
    double t = s->s[T], h_diag = s->s[H_DIAG], prev_loss = s->s[PREV_LOSS];
    int64_t n_iter = 0, current_evals = 1;
    nb_status st = NB_OK;
    while (n_iter < o->max_iter && !st) {
        nb_scope *sc = nb_op_scope_begin();
        if (!sc) {
            st = nb_last_status();
            break;
        }
        n_iter++;
        s->s[N_ITER] += 1;
        bool stop = false;
        /* compute the descent direction */
        if (s->s[N_ITER] == 1) {
            own(&d, nb_neg(flat_grad));
            own(&old_dirs, NULL), own(&old_stps, NULL), own(&ro, NULL);
            h_diag = 1;
        } else {
            nb_tensor *y = nb_sub(flat_grad, prev_flat_grad), *sv = nb_mul_scalar(d, t);
            double ys = 0, yy = 0;
            st = dot(y, sv, &ys);
            if (!st && ys > 1e-10) { /* update the memory */
                own(&old_dirs, push_row(old_dirs, y, o->history_size));
                own(&old_stps, push_row(old_stps, sv, o->history_size));
                own(&ro, push_row(ro, nb_optim_scalar(flat_grad, 1. / ys), o->history_size));
                st = (!old_dirs || !old_stps || !ro) ? nb_last_status() : dot(y, y, &yy);
                if (!st) h_diag = ys / yy;
            }
            if (!st) own(&d, direction(flat_grad, old_dirs, old_stps, ro, h_diag));
            if (!st && !d) st = nb_last_status();
        }
        if (!st) {
            nb_tensor *copy = prev_flat_grad ? prev_flat_grad : nb_empty_like(flat_grad);
            if (!copy || nb_copy_(copy, flat_grad)) st = nb_last_status();
            else own(&prev_flat_grad, copy);
            prev_loss = loss;
        }
        /* the step length */
        double gtd = 0;
        if (!st && s->s[N_ITER] == 1) {
            double sum = 0;
            st = to_double(nb_sum(nb_abs(flat_grad), NULL, 0, false), &sum);
            t = fmin(1., 1. / sum) * o->lr;
        } else {
            t = o->lr;
        }
        if (!st) st = dot(flat_grad, d, &gtd);
        if (!st && gtd > -o->tolerance_change) stop = true; /* directional derivative below tolerance */
        int64_t ls_func_evals = 0;
        bool opt_cond = false;
        if (!st && !stop) {
            if (o->line_search_fn == NB_LINE_SEARCH_STRONG_WOLFE) {
                nb_tensor **x = clone_params(c);
                ls_result r = {0};
                st = x ? strong_wolfe(c, x, t, d, loss, flat_grad, gtd, &r) : nb_last_status();
                free(x);
                if (!st) loss = r.f, t = r.t, ls_func_evals = r.evals, own(&flat_grad, r.g);
                if (!st) st = add_grad(c, t, d);
                double gmax = 0;
                if (!st) st = abs_max(flat_grad, &gmax);
                opt_cond = gmax <= o->tolerance_grad;
            } else {
                st = add_grad(c, t, d);
                if (!st && n_iter != o->max_iter) { /* no re-evaluation after the last iteration */
                    st = evaluate(c, &loss);
                    nb_tensor *fg = st ? NULL : gather_flat_grad(c);
                    if (!st && !fg) st = nb_last_status();
                    if (!st) own(&flat_grad, fg);
                    double gmax = 0;
                    if (!st) st = abs_max(flat_grad, &gmax);
                    opt_cond = gmax <= o->tolerance_grad;
                    ls_func_evals = 1;
                }
            }
            current_evals += ls_func_evals;
            s->s[FUNC_EVALS] += (double)ls_func_evals;
            /* check conditions */
            double dt_max = 0;
            if (!st && (n_iter == o->max_iter || current_evals >= o->max_eval || opt_cond)) stop = true;
            if (!st && !stop) st = abs_max(nb_mul_scalar(d, t), &dt_max);
            if (!st && !stop && (dt_max <= o->tolerance_change || fabs(loss - prev_loss) < o->tolerance_change))
                stop = true; /* lack of progress */
        }
        nb_scope_end(sc);
        if (stop) break;
    }
    if (!st) { /* the state PyTorch caches */
        own(&s->t[D], d), own(&s->t[PREV_FLAT_GRAD], prev_flat_grad);
        own(&s->t[OLD_DIRS], old_dirs), own(&s->t[OLD_STPS], old_stps), own(&s->t[RO], ro);
        s->s[T] = t, s->s[H_DIAG] = h_diag, s->s[PREV_LOSS] = prev_loss;
    }
    nb_tensor **mine[] = {&flat_grad, &d, &prev_flat_grad, &old_dirs, &old_stps, &ro};
    for (size_t k = 0; k < sizeof mine / sizeof *mine; k++) own(mine[k], NULL);
    return st;
}

static nb_status lbfgs_step(nb_optimizer *opt, nb_closure_fn closure, void *user, double *loss_out) {
    if (!closure)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "lbfgs: LBFGS re-evaluates the loss: step it with nb_optimizer_step_closure");
    lbfgs c = {opt, &opt->groups[0].o.lbfgs, closure, user, 0};
    nb_param_state *s = &opt->state[0];
    nb_scope *sc = nb_op_scope_begin();
    if (!sc) return nb_last_status();
    bool prev = nb_set_grad_enabled(false);
    double loss = NAN, gmax = 0;
    nb_tensor *flat_grad = NULL;
    nb_status st = evaluate(&c, &loss); /* the initial f(x) and df/dx */
    if (!st) {
        s->started = true;
        s->s[FUNC_EVALS] += 1;
        if (!(flat_grad = gather_flat_grad(&c))) st = nb_last_status();
    }
    if (!st) st = abs_max(flat_grad, &gmax);
    if (!st && !(gmax <= c.o->tolerance_grad)) st = iterate(&c, s, flat_grad, loss);
    nb_set_grad_enabled(prev);
    nb_scope_end(sc);
    if (st) return st;
    for (int i = 0; i < opt->n; i++) opt->state[i].step++;
    if (loss_out) *loss_out = loss;
    return NB_OK;
}

static nb_status check(const char *op, const void *options) {
    const nb_lbfgs_options *o = options;
    nb_status st = nb_optim_check_nonneg(op, "lr", o->lr);
    if (!st && o->max_iter < 1)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: max_iter must be >= 1 (got %lld)", op, (long long)o->max_iter);
    if (!st && o->max_eval < 1)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: max_eval must be >= 1 (got %lld)", op, (long long)o->max_eval);
    if (!st) st = nb_optim_check_nonneg(op, "tolerance_grad", o->tolerance_grad);
    if (!st) st = nb_optim_check_nonneg(op, "tolerance_change", o->tolerance_change);
    if (!st && o->history_size < 1)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: history_size must be >= 1 (got %lld)", op,
                          (long long)o->history_size);
    if (!st && o->line_search_fn != NB_LINE_SEARCH_NONE && o->line_search_fn != NB_LINE_SEARCH_STRONG_WOLFE)
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: only 'strong_wolfe' is supported (line_search_fn %d)", op,
                          (int)o->line_search_fn);
    return st;
}

/* A checkpoint's state tensors: on parameter 0 only; d and prev_flat_grad
 * [N], old_dirs and old_stps [k, N] and ro [k] with 1 <= k <= history_size. */
static nb_status check_tensor(const nb_optimizer *opt, const void *options, int i, int k, const nb_tensor *t) {
    const nb_lbfgs_options *o = options;
    int64_t n = 0;
    for (int j = 0; j < opt->n; j++) n += nb_numel(opt->params[j]);
    bool ok = i == 0 && nb_dtype_of(t) == nb_dtype_of(opt->params[0]);
    if (ok && (k == D || k == PREV_FLAT_GRAD)) ok = nb_dim(t) == 1 && nb_size(t, 0) == n;
    else if (ok && k == RO) ok = nb_dim(t) == 1 && nb_size(t, 0) >= 1 && nb_size(t, 0) <= o->history_size;
    else if (ok) ok = nb_dim(t) == 2 && nb_size(t, 1) == n && nb_size(t, 0) >= 1 && nb_size(t, 0) <= o->history_size;
    if (ok) return NB_OK;
    char b[NB_SHAPE_BUF];
    return nb_set_error(NB_ERR_SHAPE, "lbfgs: state '%s' of parameter %d is %s, which does not fit %lld parameters",
                        tensors[k], i, nb_shape_str(t, b, sizeof b), (long long)n);
}

const nb_optim_desc nb_lbfgs_desc = {
    .name = "LBFGS",
    .op = "lbfgs",
    .options_size = sizeof(nb_lbfgs_options),
    .torch_defaults = &torch_defaults,
    .fields = fields,
    .n_fields = sizeof fields / sizeof *fields,
    .tensor_names = tensors,
    .n_tensors = N_TENSORS,
    .scalar_names = scalars,
    .n_scalars = N_SCALARS,
    .one_group = true,
    .finish = finish,
    .check = check,
    .has_tensor = has_tensor,
    .step = lbfgs_step,
    .check_tensor = check_tensor,
};

NB_OPTIM_CONSTRUCTORS(lbfgs, nb_lbfgs_options, nb_lbfgs_desc)
