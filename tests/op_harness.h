/* op_harness.h - the one op test harness (ggml's test-backend-ops is the
 * model). A table of cases, at least one per row of the op table
 * (core/nb_op_table.h), each a small function of some inputs; for every
 * registered device and every dtype the case and the backend support, the
 * harness (tests/test_op_harness.c) checks
 *   - the forward against a float64 CPU reference run on the same input
 *     values (float dtypes: |got - ref| <= tol (1 + |ref|); integer and
 *     bool dtypes, and float64 everywhere but rounding: exact or 1e-12),
 *   - gradients: nb_gradcheck in float64 on every device; for other float
 *     dtypes, the gradient of sum(out * v) against the float64 CPU one;
 *     for the ops whose backward is differentiable (NB_OPF_DIFF2: "yes,
 *     twice" in OPS.md), nb_gradgradcheck in float64 (double backward),
 *   - determinism: the same bits twice (forward and gradients).
 * The cases live in tests/op_cases_<group>.c; an op of the table without a
 * case fails the suite. */
#ifndef NB_OP_HARNESS_H
#define NB_OP_HARNESS_H

#include "nabla.h"

/* How an input's values are drawn (by a seeded Philox stream, on the host,
 * then cast to the run's dtype). Float kinds follow the run's dtype (integer
 * runs draw integers in [-5, 5], uint8 and bool runs in [0, 9] and {0, 1});
 * INDEX is int64 in [lo, hi) and BOOL is bool whatever the run's dtype. */
typedef enum nb_in_kind {
    K_REAL,  /* N(0, 1) */
    K_POS,   /* U(0.5, 2) */
    K_UNIT,  /* U(-0.9, 0.9) */
    K_AWAY0, /* |x| in [0.5, 2], either sign: away from a kink at 0 */
    K_GT1,   /* U(1.2, 3) */
    K_INDEX, /* int64 in [lo, hi) */
    K_BOOL,  /* bool, about half true */
} nb_in_kind;

typedef struct nb_in_spec {
    nb_in_kind kind;
    int ndim;
    int64_t shape[5]; /* up to 5-d (the 3-d convolutions and pools) */
    int64_t lo, hi; /* K_INDEX */
} nb_in_spec;

typedef struct nb_op_case nb_op_case;
/* Runs the op on x (inputs in the case's order); returns its (first)
 * output, scoped. */
typedef nb_tensor *(*nb_case_fn)(nb_tensor *const *x, const nb_op_case *c);

/* flags */
#define C_NOGRAD 1u   /* no gradient check (not differentiable here) */
#define C_NOGC 2u     /* compare float gradients with the CPU's, but skip the finite-difference gradcheck */
#define C_NOINT 4u    /* float dtypes only, although the row takes integers */
#define C_NO16 8u     /* not in float16/bfloat16 even where the backend has them */
#define C_NOGG 16u    /* no gradgradcheck although the op is twice differentiable (say why at the case) */

struct nb_op_case {
    nb_op_id op;
    const char *label;
    nb_case_fn fn;                          /* or one of: */
    nb_tensor *(*f1)(nb_tensor *);          /* fn = f1(x[0]) */
    nb_tensor *(*f2)(nb_tensor *, nb_tensor *); /* fn = f2(x[0], x[1]) */
    int n_in;
    nb_in_spec in[4];
    unsigned dtypes; /* NB_DTM_* mask to run; 0: the op's row */
    double tol;      /* float32 (and 16-bit) tolerance; 0: 2e-5 */
    unsigned flags;
    double p[4];     /* numeric arguments the case function reads */
};

#define NB_NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* An input of kind k and the given shape; IN0(k) is 0-d. */
#define IN(k, ...) {k, NB_NDIM(__VA_ARGS__), {__VA_ARGS__}, 0, 0}
#define IN0(k) {k, 0, {0}, 0, 0}
#define IDX(lo_, hi_, ...) {K_INDEX, NB_NDIM(__VA_ARGS__), {__VA_ARGS__}, lo_, hi_}

/* The tables, one per group of families (tests/op_cases_*.c). */
typedef struct nb_case_table {
    const nb_op_case *cases;
    int n;
} nb_case_table;
extern const nb_case_table nb_cases_elementwise, nb_cases_reduce, nb_cases_shape, nb_cases_nn, nb_cases_linalg;

#endif
