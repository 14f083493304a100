/* ops_loss_margin.c - the losses over classes and embeddings
 * (multilabel_soft_margin, multi_margin, multilabel_margin,
 * cosine_embedding, triplet_margin with and without a distance function)
 * and the distances they use (pairwise_distance, cosine_similarity), all
 * written from differentiable ops (formulas: PyTorch's docs and ATen's
 * Loss.cpp / Distance.cpp). Tests: tests/test_ops_loss.c. */
#include <math.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* Autocast (float32), a library scope, then f on three tensors. */
typedef nb_tensor *(*loss3_fn)(nb_tensor *a, nb_tensor *b, nb_tensor *c, const nb_loss_options *o, void *extra);
static nb_tensor *run3(nb_op_id id, const char *op, loss3_fn f, nb_tensor *a, nb_tensor *b, nb_tensor *c,
                       nb_loss_options o, void *extra) {
    nb_tensor *in[3] = {a, b, c};
    if (!nb_autocast_inputs(id, 3, in) || !nb_check_inputs(op, 3, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, f(in[0], in[1], in[2], &o, extra));
}

static nb_tensor *run2(nb_op_id id, const char *op, loss3_fn f, nb_tensor *a, nb_tensor *b, nb_loss_options o) {
    nb_tensor *in[2] = {a, b};
    if (!nb_autocast_inputs(id, 2, in) || !nb_check_inputs(op, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, f(in[0], in[1], NULL, &o, NULL));
}

static bool known_reduction(const char *op, nb_reduction r) {
    if ((unsigned)r <= NB_REDUCTION_NONE) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: bad reduction %d", op, (int)r);
    return false;
}

/* input [N, C] or [C] of a float dtype the op takes; weight NULL or [C]. */
static bool class_input(const char *op, nb_op_id id, nb_tensor *input, nb_tensor *weight, nb_reduction r) {
    if (!nb_check_dtypes(id, 1, &input) || !known_reduction(op, r)) return false;
    char a[NB_SHAPE_BUF];
    if (input->ndim != 1 && input->ndim != 2) {
        nb_set_error(NB_ERR_SHAPE, "%s: input %s must be [N, C] or [C]", op,
                     nb_fmt_shape(input->ndim, input->shape, a, sizeof a));
        return false;
    }
    if (!nb_loss_weight_check(op, "weight", weight, input)) return false;
    if (weight && (weight->ndim != 1 || weight->shape[0] != input->shape[input->ndim - 1])) {
        nb_set_error(NB_ERR_SHAPE, "%s: weight %s must be [C] = [%lld]", op,
                     nb_fmt_shape(weight->ndim, weight->shape, a, sizeof a), (long long)input->shape[input->ndim - 1]);
        return false;
    }
    return true;
}

/* Int64 class indices; any outside [lo, C) is NB_ERR_INVALID_ARG (a host
 * read, as PyTorch's CPU check). */
static bool indices_in_range(const char *op, nb_tensor *t, int64_t lo, int64_t C) {
    if (t->dtype != NB_I64) {
        nb_set_error(NB_ERR_DTYPE, "%s: target must be int64 class indices, got %s", op, nb_dtype_name(t->dtype));
        return false;
    }
    nb_tensor *bad = nb_any(nb_logical_or(nb_lt_scalar(t, (double)lo), nb_ge_scalar(t, (double)C)), NULL, 0, false);
    if (!bad) return false;
    if (nb_item(bad) == 0) return true;
    nb_set_error(NB_ERR_INVALID_ARG, "%s: a target is outside [%lld, %lld)", op, (long long)lo, (long long)C);
    return false;
}

/* [1, C] of 0, 1, ..., C - 1 (int64) on t's device. */
static nb_tensor *class_row(nb_tensor *t, int64_t C) {
    return nb_reshape(nb_arange_on(0, (double)C, 1, NB_I64, t->storage->device), NB_SHAPE(1, C));
}

/* ---- multilabel_soft_margin_loss --------------------------------------------- */

static nb_tensor *mlsm_impl(nb_tensor *x, nb_tensor *t, nb_tensor *unused, const nb_loss_options *o, void *e) {
    (void)unused, (void)e;
    const char *op = "multilabel_soft_margin_loss";
    if (!nb_loss_check(op, NB_OP_MULTILABEL_SOFT_MARGIN_LOSS, x, t, o->reduction) ||
        !nb_loss_weight_check(op, "weight", o->weight, x))
        return NULL;
    if (x->ndim == 0) return NB_FAIL(NB_ERR_SHAPE, "%s: input must have a class dim", op);
    nb_tensor *l = nb_neg(nb_add(nb_mul(t, nb_logsigmoid(x)),
                                 nb_mul(nb_add_scalar(nb_neg(t), 1.0), nb_logsigmoid(nb_neg(x)))));
    if (o->weight) l = nb_mul(l, o->weight);
    int cd = x->ndim - 1;
    nb_tensor *rows = nb_mul_scalar(nb_sum(l, &cd, 1, false), 1.0 / (double)x->shape[cd]);
    return nb_loss_reduce(rows, o->reduction);
}

nb_tensor *nb_multilabel_soft_margin_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run2(NB_OP_MULTILABEL_SOFT_MARGIN_LOSS, "multilabel_soft_margin_loss", mlsm_impl, input, target, opts);
}

/* ---- multi_margin_loss ---------------------------------------------------------- */

static nb_tensor *multi_margin_impl(nb_tensor *input, nb_tensor *target, nb_tensor *unused, const nb_loss_options *o,
                                    void *e) {
    (void)unused, (void)e;
    const char *op = "multi_margin_loss";
    if (!class_input(op, NB_OP_MULTI_MARGIN_LOSS, input, o->weight, o->reduction)) return NULL;
    double p = nb_option(o->p, 1.0);
    if (p != 1 && p != 2) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: p must be 1 or 2 (got %g)", op, p);
    bool batched = input->ndim == 2;
    int64_t N = batched ? input->shape[0] : 1, C = input->shape[input->ndim - 1];
    if (target->ndim != (batched ? 1 : 0) || (batched && target->shape[0] != N)) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: target %s must be [N] for input [N, C] (a 0-d one for [C]); input %s", op,
                       nb_fmt_shape(target->ndim, target->shape, a, sizeof a),
                       nb_fmt_shape(input->ndim, input->shape, b, sizeof b));
    }
    if (!indices_in_range(op, target, 0, C)) return NULL;
    nb_tensor *x = nb_reshape(input, NB_SHAPE(N, C)), *t = nb_reshape(target, NB_SHAPE(N, 1));
    nb_tensor *xy = nb_gather(x, 1, t); /* [N, 1] */
    nb_tensor *z = nb_clamp_scalar(nb_add(nb_add_scalar(nb_neg(xy), nb_option(o->margin, 1.0)), x), 0.0, NAN);
    if (p == 2) z = nb_mul(z, z);
    nb_tensor *zero = nb_scalar_like(x, 0.0, x->dtype);
    z = nb_where(nb_eq(class_row(x, C), t), zero, z); /* j = y adds nothing */
    if (o->weight) z = nb_mul(z, nb_reshape(nb_index_select(o->weight, 0, nb_reshape(t, NB_SHAPE(N))), NB_SHAPE(N, 1)));
    int one = 1;
    nb_tensor *rows = nb_mul_scalar(nb_sum(z, &one, 1, false), 1.0 / (double)C);
    return nb_loss_reduce(batched ? rows : nb_reshape(rows, 0, NULL), o->reduction);
}

nb_tensor *nb_multi_margin_loss(nb_tensor *input, nb_tensor *target, nb_loss_options opts) {
    return run2(NB_OP_MULTI_MARGIN_LOSS, "multi_margin_loss", multi_margin_impl, input, target, opts);
}

/* ---- multilabel_margin_loss --------------------------------------------------- */

static nb_tensor *mlm_impl(nb_tensor *input, nb_tensor *target, nb_tensor *unused, const nb_loss_options *o, void *e) {
    (void)unused, (void)e;
    const char *op = "multilabel_margin_loss";
    if (!class_input(op, NB_OP_MULTILABEL_MARGIN_LOSS, input, NULL, o->reduction)) return NULL;
    if (target->ndim != input->ndim || memcmp(target->shape, input->shape, sizeof(int64_t) * (size_t)input->ndim)) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "%s: target %s must have the input's shape %s", op,
                       nb_fmt_shape(target->ndim, target->shape, a, sizeof a),
                       nb_fmt_shape(input->ndim, input->shape, b, sizeof b));
    }
    bool batched = input->ndim == 2;
    int64_t N = batched ? input->shape[0] : 1, C = input->shape[input->ndim - 1];
    if (!indices_in_range(op, target, -1, C)) return NULL;
    nb_tensor *x = nb_reshape(input, NB_SHAPE(N, C)), *t = nb_reshape(target, NB_SHAPE(N, C));
    /* the targets of a row: the entries before its first -1 */
    nb_tensor *ended = nb_cumsum(nb_to_dtype(nb_eq_scalar(t, -1.0), NB_I64), 1);
    nb_tensor *valid = nb_eq_scalar(ended, 0.0); /* [N, J] */
    nb_tensor *safe = nb_where(valid, t, nb_scalar_like(t, 0, NB_I64));
    nb_tensor *hit = nb_logical_and(nb_eq(nb_unsqueeze(safe, 2), nb_unsqueeze(class_row(x, C), 0)),
                                    nb_unsqueeze(valid, 2)); /* [N, J, C]: target j is class c */
    nb_tensor *is_target = nb_any(hit, (int[]){1}, 1, false); /* [N, C] */
    nb_tensor *xj = nb_gather(x, 1, safe);                    /* [N, J] */
    nb_tensor *pair = nb_clamp_scalar(nb_add_scalar(nb_sub(nb_unsqueeze(x, 1), nb_unsqueeze(xj, 2)), 1.0), 0.0, NAN);
    nb_tensor *counts = nb_logical_and(nb_unsqueeze(valid, 2), nb_unsqueeze(nb_logical_not(is_target), 1));
    nb_tensor *z = nb_where(counts, pair, nb_scalar_like(x, 0.0, x->dtype));
    nb_tensor *rows = nb_mul_scalar(nb_sum(z, (int[]){1, 2}, 2, false), 1.0 / (double)C);
    return nb_loss_reduce(batched ? rows : nb_reshape(rows, 0, NULL), o->reduction);
}

nb_tensor *nb_multilabel_margin_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    return run2(NB_OP_MULTILABEL_MARGIN_LOSS, "multilabel_margin_loss", mlm_impl, input, target,
                (nb_loss_options){.reduction = reduction});
}

/* ---- cosine_embedding_loss -------------------------------------------------------- */

static nb_tensor *cosine_embedding_impl(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, const nb_loss_options *o, void *e) {
    (void)e;
    const char *op = "cosine_embedding_loss";
    if (!nb_loss_check(op, NB_OP_COSINE_EMBEDDING_LOSS, x1, x2, o->reduction)) return NULL;
    if (y->ndim > 1) return NB_FAIL(NB_ERR_SHAPE, "%s: the target must be 0-d or 1-d (multi-target not supported)", op);
    if (x1->ndim != y->ndim + 1 || x2->ndim != y->ndim + 1)
        return NB_FAIL(NB_ERR_SHAPE, "%s: a %d-d target needs %d-d inputs, got %d-d and %d-d", op, y->ndim,
                       y->ndim + 1, x1->ndim, x2->ndim);
    int d = y->ndim;
    nb_tensor *prod = nb_sum(nb_mul(x1, x2), &d, 1, false);
    nb_tensor *m1 = nb_add_scalar(nb_sum(nb_mul(x1, x1), &d, 1, false), 1e-12);
    nb_tensor *m2 = nb_add_scalar(nb_sum(nb_mul(x2, x2), &d, 1, false), 1e-12);
    nb_tensor *cos = nb_div(prod, nb_sqrt(nb_mul(m1, m2)));
    if (!cos) return NULL;
    nb_tensor *zero = nb_scalar_like(cos, 0.0, cos->dtype);
    nb_tensor *pos = nb_add_scalar(nb_neg(cos), 1.0);
    nb_tensor *neg = nb_clamp_scalar(nb_add_scalar(cos, -o->margin), 0.0, NAN);
    nb_tensor *l = nb_add(nb_where(nb_eq_scalar(y, 1.0), pos, zero), nb_where(nb_eq_scalar(y, -1.0), neg, zero));
    return nb_loss_reduce(l, o->reduction);
}

nb_tensor *nb_cosine_embedding_loss(nb_tensor *input1, nb_tensor *input2, nb_tensor *target, nb_loss_options opts) {
    return run3(NB_OP_COSINE_EMBEDDING_LOSS, "cosine_embedding_loss", cosine_embedding_impl, input1, input2, target,
                opts, NULL);
}

/* ---- distances ------------------------------------------------------------------------ */

static nb_tensor *pairwise_impl(nb_tensor *x1, nb_tensor *x2, double p, double eps, bool keepdim) {
    nb_tensor *in[2] = {x1, x2};
    if (!nb_check_inputs("pairwise_distance", 2, in) || !nb_check_dtypes(NB_OP_PAIRWISE_DISTANCE, 2, in)) return NULL;
    if (!(p >= 1)) return NB_FAIL(NB_ERR_INVALID_ARG, "pairwise_distance: p must be >= 1 or inf (got %g)", p);
    int nd = x1->ndim > x2->ndim ? x1->ndim : x2->ndim;
    if (nd == 0) return NB_FAIL(NB_ERR_SHAPE, "pairwise_distance: the inputs are 0-d (no dim to take the norm over)");
    int last = nd - 1;
    return nb_norm(nb_add_scalar(nb_sub(x1, x2), eps), p, &last, 1, keepdim);
}

nb_tensor *nb_pairwise_distance(nb_tensor *x1, nb_tensor *x2, double p, double eps, bool keepdim) {
    nb_tensor *in[2] = {x1, x2};
    if (!nb_autocast_inputs(NB_OP_PAIRWISE_DISTANCE, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, pairwise_impl(in[0], in[1], nb_option(p, 2.0), nb_option(eps, 1e-6), keepdim));
}

static nb_tensor *cosine_similarity_impl(nb_tensor *x1, nb_tensor *x2, int dim, double eps) {
    nb_tensor *in[2] = {x1, x2};
    if (!nb_check_inputs("cosine_similarity", 2, in) || !nb_check_dtypes(NB_OP_COSINE_SIMILARITY, 2, in)) return NULL;
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(x1->ndim, x1->shape, x2->ndim, x2->shape, &nd, shape)) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "cosine_similarity: x1 %s and x2 %s do not broadcast",
                       nb_fmt_shape(x1->ndim, x1->shape, a, sizeof a), nb_fmt_shape(x2->ndim, x2->shape, b, sizeof b));
    }
    if (dim < -nd || dim >= (nd ? nd : 1))
        return NB_FAIL(NB_ERR_INVALID_ARG, "cosine_similarity: dim %d out of range for %d dims", dim, nd);
    if (dim < 0) dim += nd;
    x1 = nb_broadcast_to(x1, nd, shape), x2 = nb_broadcast_to(x2, nd, shape);
    nb_tensor *n1 = nb_clamp_min_passthrough(nb_norm(x1, 2, &dim, 1, true), eps);
    nb_tensor *n2 = nb_clamp_min_passthrough(nb_norm(x2, 2, &dim, 1, true), eps);
    return nb_sum(nb_mul(nb_div(x1, n1), nb_div(x2, n2)), nd ? &dim : NULL, nd ? 1 : 0, false);
}

nb_tensor *nb_cosine_similarity(nb_tensor *x1, nb_tensor *x2, int dim, double eps) {
    nb_tensor *in[2] = {x1, x2};
    if (!nb_autocast_inputs(NB_OP_COSINE_SIMILARITY, 2, in)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, cosine_similarity_impl(in[0], in[1], dim, nb_option(eps, 1e-8)));
}

/* ---- triplet_margin_loss ----------------------------------------------------------------- */

typedef struct triplet_distance {
    nb_distance_fn fn; /* NULL: pairwise_distance(p, eps) */
    void *user;
    double p, eps;
    bool with_distance; /* triplet_margin_with_distance_loss (names the op in errors and checks) */
} triplet_distance;

static nb_tensor *distance(const triplet_distance *d, nb_tensor *a, nb_tensor *b) {
    if (!d->fn) return pairwise_impl(a, b, d->p, d->eps, false);
    nb_tensor *r = d->fn(a, b, d->user);
    if (!r && nb_last_status() == NB_OK)
        nb_set_error(NB_ERR_INVALID_ARG, "triplet_margin_with_distance_loss: the distance function gave NULL");
    return r;
}

static nb_tensor *triplet_impl(nb_tensor *a, nb_tensor *p, nb_tensor *n, const nb_loss_options *o, void *extra) {
    const triplet_distance *d = extra;
    const char *op = d->with_distance ? "triplet_margin_with_distance_loss" : "triplet_margin_loss";
    nb_op_id id = d->with_distance ? NB_OP_TRIPLET_MARGIN_WITH_DISTANCE_LOSS : NB_OP_TRIPLET_MARGIN_LOSS;
    if (a->ndim != p->ndim || a->ndim != n->ndim)
        return NB_FAIL(NB_ERR_SHAPE, "%s: anchor, positive and negative have %d, %d and %d dims; they must have the "
                       "same number", op, a->ndim, p->ndim, n->ndim);
    if (!nb_loss_check(op, id, a, p, o->reduction) || !nb_loss_check(op, id, a, n, o->reduction)) return NULL;
    nb_tensor *dp = distance(d, a, p), *dn = distance(d, a, n);
    if (dn && o->swap) dn = nb_minimum(dn, distance(d, p, n));
    nb_tensor *l = nb_add_scalar(nb_sub(dp, dn), nb_option(o->margin, 1.0));
    return nb_loss_reduce(nb_clamp_scalar(l, 0.0, NAN), o->reduction);
}

nb_tensor *nb_triplet_margin_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative, nb_loss_options opts) {
    triplet_distance d = {NULL, NULL, nb_option(opts.p, 2.0), nb_option(opts.eps, 1e-6), false};
    return run3(NB_OP_TRIPLET_MARGIN_LOSS, "triplet_margin_loss", triplet_impl, anchor, positive, negative, opts, &d);
}

nb_tensor *nb_triplet_margin_with_distance_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative,
                                                nb_distance_fn distance_fn, void *user, nb_loss_options opts) {
    triplet_distance d = {distance_fn, user, 2.0, 1e-6, true}; /* NULL: PyTorch's default, pairwise_distance */
    return run3(NB_OP_TRIPLET_MARGIN_WITH_DISTANCE_LOSS, "triplet_margin_with_distance_loss", triplet_impl, anchor,
                positive, negative, opts, &d);
}

nb_tensor *nb_pdist(nb_tensor *x, double p) {
    if (!nb_check_inputs("pdist", 1, &x) || !nb_check_dtypes(NB_OP_PDIST, 1, &x)) return NULL;
    if (x->ndim != 2) return NB_FAIL(NB_ERR_SHAPE, "pdist: input must be 2-d [N, M], got %d-d", x->ndim);
    p = nb_option(p, 2.0);
    if (!(p >= 1)) return NB_FAIL(NB_ERR_INVALID_ARG, "pdist: p must be >= 1 or inf (got %g)", p);
    int64_t N = x->shape[0], n = N > 1 ? N * (N - 1) / 2 : 0;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));
    if (!rows) return NB_FAIL(NB_ERR_OOM, "pdist: out of host memory");
    for (int64_t i = 0, k = 0; i < N; i++) /* the pairs i < j, row by row (PyTorch's order) */
        for (int64_t j = i + 1; j < N; j++, k++) rows[k] = i, rows[n + k] = j;
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *ii = nb_from_data_on(rows, 1, &n, NB_I64, x->storage->device);
    nb_tensor *jj = nb_from_data_on(rows + n, 1, &n, NB_I64, x->storage->device);
    free(rows);
    /* only those pairs' differences enter the norm: no row meets itself, so no 0/0 gradient */
    nb_tensor *d = ii && jj ? nb_sub(nb_index_select(x, 0, ii), nb_index_select(x, 0, jj)) : NULL;
    int last = 1;
    return nb_scope_return(s, d ? nb_norm(d, p, &last, 1, false) : NULL);
}

nb_tensor *nb_cdist(nb_tensor *x1, nb_tensor *x2, double p) {
    nb_tensor *in[2] = {x1, x2};
    if (!nb_check_inputs("cdist", 2, in) || !nb_check_dtypes(NB_OP_CDIST, 2, in)) return NULL;
    p = nb_option(p, 2.0);
    if (!(p >= 1)) return NB_FAIL(NB_ERR_INVALID_ARG, "cdist: p must be >= 1 or inf (got %g)", p);
    if (x1->ndim < 2 || x2->ndim < 2 || x1->shape[x1->ndim - 1] != x2->shape[x2->ndim - 1]) {
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        return NB_FAIL(NB_ERR_SHAPE, "cdist: x1 %s and x2 %s must be [*, P, M] and [*, R, M]",
                       nb_fmt_shape(x1->ndim, x1->shape, a, sizeof a), nb_fmt_shape(x2->ndim, x2->shape, b, sizeof b));
    }
    nb_scope *s = nb_op_scope_begin();
    /* [*, P, 1, M] - [*, 1, R, M], the norm over M: exact (PyTorch's p = 2 may use a GEMM for large inputs) */
    nb_tensor *d = nb_sub(nb_unsqueeze(x1, -2), nb_unsqueeze(x2, -3));
    int last = -1;
    return nb_scope_return(s, d ? nb_norm(d, p, &last, 1, false) : NULL);
}
