/* op_cases_reduce.c - op harness cases of the reduce, scan and sort
 * families: reductions over one dim, several dims and all of [2, 3, 4];
 * scans along a middle dim; sorts, topk and kthvalue along the last and a
 * middle dim (values; the integer outputs exactly). */
#include <math.h>

#include "op_harness.h"

static const int D1[1] = {1}, D02[2] = {0, 2};

#define RED(NAME)                                                                                      \
    static nb_tensor *NAME##_d1(nb_tensor *const *x, const nb_op_case *c) {                            \
        (void)c;                                                                                       \
        return nb_##NAME(x[0], D1, 1, false);                                                          \
    }                                                                                                  \
    static nb_tensor *NAME##_d02k(nb_tensor *const *x, const nb_op_case *c) {                          \
        (void)c;                                                                                       \
        return nb_##NAME(x[0], D02, 2, true);                                                          \
    }                                                                                                  \
    static nb_tensor *NAME##_all(nb_tensor *const *x, const nb_op_case *c) {                           \
        (void)c;                                                                                       \
        return nb_##NAME(x[0], NULL, 0, false);                                                        \
    }
RED(sum)
RED(mean)
RED(max)
RED(min)
RED(amax)
RED(amin)
RED(prod)
RED(logsumexp)
RED(all)
RED(any)

#define REDCASES(ID, NAME, K)                                                                                        \
    {.op = NB_OP_##ID, .label = #NAME " dim 1", .fn = NAME##_d1, .n_in = 1, .in = {IN(K, 2, 3, 4)}},                  \
        {.op = NB_OP_##ID, .label = #NAME " dims 0, 2 keepdim", .fn = NAME##_d02k, .n_in = 1, .in = {IN(K, 2, 3, 4)}}, \
        {.op = NB_OP_##ID, .label = #NAME " all", .fn = NAME##_all, .n_in = 1, .in = {IN(K, 2, 3, 4)}}

static nb_tensor *max_dim(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_max_dim(x[0], 1, false, NULL); }
static nb_tensor *min_dim(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_min_dim(x[0], -1, true, NULL); }
static nb_tensor *max_dim_idx(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *i;
    return nb_max_dim(x[0], 1, false, &i) ? i : NULL;
}
static nb_tensor *argmax(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_argmax(x[0], 1, false); }
static nb_tensor *argmin(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_argmin(x[0], -1, true); }
static nb_tensor *var(nb_tensor *const *x, const nb_op_case *c) { return nb_var(x[0], D1, 1, c->p[0], false); }
static nb_tensor *std_(nb_tensor *const *x, const nb_op_case *c) { return nb_std(x[0], D02, 2, c->p[0], true); }
static nb_tensor *norm(nb_tensor *const *x, const nb_op_case *c) { return nb_norm(x[0], c->p[0], D1, 1, false); }

static nb_tensor *cumsum(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cumsum(x[0], 1); }
static nb_tensor *cumprod(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cumprod(x[0], 1); }
static nb_tensor *cummax(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cummax(x[0], 1, NULL); }
static nb_tensor *cummin(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cummin(x[0], -1, NULL); }
static nb_tensor *cummax_idx(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *i;
    return nb_cummax(x[0], 1, &i) ? i : NULL;
}
static nb_tensor *logcumsumexp(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_logcumsumexp(x[0], 1); }

static nb_tensor *sort_v(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *v;
    return nb_sort(x[0], (int)c->p[0], c->p[1] != 0, true, &v, NULL) == NB_OK ? v : NULL;
}
static nb_tensor *sort_i(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *i;
    return nb_sort(x[0], (int)c->p[0], c->p[1] != 0, true, NULL, &i) == NB_OK ? i : NULL;
}
static nb_tensor *argsort(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_argsort(x[0], 1, true); }
static nb_tensor *topk_v(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *v;
    return nb_topk(x[0], 2, -1, c->p[0] != 0, true, &v, NULL) == NB_OK ? v : NULL;
}
static nb_tensor *topk_i(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *i;
    return nb_topk(x[0], 2, 1, true, true, NULL, &i) == NB_OK ? i : NULL;
}
static nb_tensor *kth_v(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *v;
    return nb_kthvalue(x[0], 2, -1, false, &v, NULL) == NB_OK ? v : NULL;
}

#define X1(ID, LABEL, FN, K, ...) {.op = NB_OP_##ID, .label = LABEL, .fn = FN, .n_in = 1, .in = {IN(K, 2, 3, 4)}, __VA_ARGS__}

/* The boundaries are random, not sorted: the count that computes the
 * insertion index is defined for any, and the harness compares devices and
 * dtypes (PyTorch's values on sorted boundaries: tests/torch_diff). */
static nb_tensor *searchsorted(nb_tensor *const *x, const nb_op_case *c) {
    return nb_searchsorted(x[0], x[1], false, c->p[0] != 0, NULL);
}
static nb_tensor *bucketize(nb_tensor *const *x, const nb_op_case *c) {
    return nb_bucketize(x[1], x[0], true, c->p[0] != 0);
}
static nb_tensor *histc(nb_tensor *const *x, const nb_op_case *c) { return nb_histc(x[0], 5, c->p[0], c->p[1]); }

static const nb_op_case cases[] = {
    REDCASES(SUM, sum, K_REAL),
    REDCASES(MEAN, mean, K_REAL),
    REDCASES(MAX, max, K_REAL),
    REDCASES(MIN, min, K_REAL),
    REDCASES(AMAX, amax, K_REAL),
    REDCASES(AMIN, amin, K_REAL),
    REDCASES(PROD, prod, K_AWAY0),
    REDCASES(LOGSUMEXP, logsumexp, K_REAL),
    REDCASES(ALL, all, K_REAL),
    REDCASES(ANY, any, K_REAL),
    X1(MAX_DIM, "max dim 1 (values)", max_dim, K_REAL, .flags = C_NOINT),
    X1(MAX_DIM, "max dim 1 (indices)", max_dim_idx, K_REAL, .flags = C_NOGRAD),
    X1(MIN_DIM, "min dim -1 keepdim", min_dim, K_REAL, .flags = C_NOINT),
    X1(ARGMAX, "argmax dim 1", argmax, K_REAL, .tol = 0),
    X1(ARGMIN, "argmin dim -1 keepdim", argmin, K_REAL, .tol = 0),
    X1(VAR, "var dim 1 correction 1", var, K_REAL, .p = {1}),
    X1(VAR, "var dim 1 correction 0", var, K_REAL, .p = {0}),
    X1(STD, "std dims 0, 2 keepdim", std_, K_REAL, .p = {1}),
    X1(NORM, "2-norm dim 1", norm, K_AWAY0, .p = {2}),
    X1(NORM, "1-norm dim 1", norm, K_AWAY0, .p = {1}),
    X1(NORM, "3-norm dim 1", norm, K_AWAY0, .p = {3}),
    X1(NORM, "inf-norm dim 1", norm, K_AWAY0, .p = {INFINITY}),
    X1(CUMSUM, "cumsum dim 1", cumsum, K_REAL, .tol = 0),
    X1(CUMPROD, "cumprod dim 1", cumprod, K_AWAY0, .tol = 0),
    X1(CUMMAX, "cummax dim 1 (values)", cummax, K_REAL, .tol = 0),
    X1(CUMMAX, "cummax dim 1 (indices)", cummax_idx, K_REAL, .flags = C_NOGRAD),
    X1(CUMMIN, "cummin dim -1 (values)", cummin, K_REAL, .tol = 0),
    X1(LOGCUMSUMEXP, "logcumsumexp dim 1", logcumsumexp, K_REAL, .tol = 0),
    X1(SORT, "sort dim -1 (values)", sort_v, K_REAL, .p = {-1, 0}),
    X1(SORT, "sort dim 1 descending (values)", sort_v, K_REAL, .p = {1, 1}),
    X1(SORT, "sort dim 1 (indices, stable)", sort_i, K_REAL, .p = {1, 0}, .flags = C_NOGRAD),
    X1(ARGSORT, "argsort dim 1 descending", argsort, K_REAL, .tol = 0),
    {.op = NB_OP_SEARCHSORTED, .label = "searchsorted rows, left", .fn = searchsorted, .n_in = 2,
     .in = {IN(K_POS, 2, 4), IN(K_POS, 2, 5)}, .p = {0}, .flags = C_NOGRAD},
    {.op = NB_OP_SEARCHSORTED, .label = "searchsorted rows, right", .fn = searchsorted, .n_in = 2,
     .in = {IN(K_POS, 2, 4), IN(K_POS, 2, 5)}, .p = {1}, .flags = C_NOGRAD},
    {.op = NB_OP_BUCKETIZE, .label = "bucketize 1-D boundaries, int32", .fn = bucketize, .n_in = 2,
     .in = {IN(K_POS, 6), IN(K_POS, 2, 3, 4)}, .p = {0}, .flags = C_NOGRAD},
    {.op = NB_OP_HISTC, .label = "histc 5 bins over [-1, 1]", .fn = histc, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)},
     .p = {-1, 1}, .flags = C_NOGRAD},
    {.op = NB_OP_HISTC, .label = "histc 5 bins over the data's range", .fn = histc, .n_in = 1,
     .in = {IN(K_REAL, 2, 3, 4)}, .p = {0, 0}, .flags = C_NOGRAD},
    X1(TOPK, "topk 2 largest (values)", topk_v, K_REAL, .p = {1}),
    X1(TOPK, "topk 2 smallest (values)", topk_v, K_REAL, .p = {0}),
    X1(TOPK, "topk 2 dim 1 (indices)", topk_i, K_REAL, .flags = C_NOGRAD),
    X1(KTHVALUE, "kthvalue 2 dim -1 (values)", kth_v, K_REAL, .tol = 0),
};

const nb_case_table nb_cases_reduce = {cases, (int)(sizeof cases / sizeof cases[0])};
