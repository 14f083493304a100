/* test_ops_shape.c - flip, roll, repeat, tile, pad (every mode), tril/triu,
 * diagonal, diag_embed, unfold, movedim, broadcast_to and meshgrid: hand
 * values (PyTorch's documented examples where there are some), a
 * gradcheck of every differentiable op, and error paths. */
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* 0, 1, ..., n-1 as float64 reshaped to shape. */
static nb_tensor *iota(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    nb_tensor *t = nb_reshape(nb_arange(0, (double)n, 1, NB_F64), ndim, shape);
    NB_CK_NOTNULL(t);
    return t;
}

/* One op with its arguments, for the gradchecks. */
typedef struct {
    int kind;
    int dims[NB_MAX_DIMS], n;
    int64_t a[NB_MAX_DIMS * 2];
    int na;
    double v;
} op_ctx;

enum { K_FLIP, K_ROLL, K_REPEAT, K_TILE, K_PAD, K_TRIL, K_TRIU, K_DIAG, K_DIAG_EMBED, K_UNFOLD, K_MOVEDIM, K_BCAST };

static nb_tensor *f_op(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    op_ctx *c = ctx;
    nb_tensor *x = in[0];
    switch (c->kind) {
    case K_FLIP: return nb_flip(x, c->dims, c->n);
    case K_ROLL: return nb_roll(x, c->a, c->na, c->dims, c->n);
    case K_REPEAT: return nb_repeat(x, c->a, c->na);
    case K_TILE: return nb_tile(x, c->a, c->na);
    case K_PAD: return nb_pad(x, c->a, c->na, (nb_pad_mode)c->n, c->v);
    case K_TRIL: return nb_tril(x, c->a[0]);
    case K_TRIU: return nb_triu(x, c->a[0]);
    case K_DIAG: return nb_diagonal(x, c->a[0], c->dims[0], c->dims[1]);
    case K_DIAG_EMBED: return nb_diag_embed(x, c->a[0], c->dims[0], c->dims[1]);
    case K_UNFOLD: return nb_unfold(x, c->dims[0], c->a[0], c->a[1]);
    case K_MOVEDIM: return nb_movedim(x, c->dims, c->dims + c->n, c->n);
    default: return nb_broadcast_to(x, c->na, c->a);
    }
}

static void gradcheck_op(op_ctx c, int ndim, const int64_t *shape, uint64_t seed) {
    nb_tensor *x = nb_test_randn_grad(ndim, shape, seed);
    nb_ck_gradcheck(f_op, &x, 1, &c);
}

/* ---- flip / roll -------------------------------------------------------------------------- */

START_TEST(test_flip) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = iota(NB_SHAPE(2, 3));
    nb_ck_close(nb_flip(x, (int[]){0}, 1), (double[]){3, 4, 5, 0, 1, 2}, 6, 0, 0);
    nb_ck_close(nb_flip(x, (int[]){-1}, 1), (double[]){2, 1, 0, 5, 4, 3}, 6, 0, 0);
    nb_ck_close(nb_flip(x, (int[]){0, 1}, 2), (double[]){5, 4, 3, 2, 1, 0}, 6, 0, 0);
    /* no dims: a copy, not a view */
    nb_tensor *c = nb_flip(x, NULL, 0);
    NB_CK_OK(nb_fill_(c, 7));
    nb_ck_close(x, (double[]){0, 1, 2, 3, 4, 5}, 6, 0, 0);
    nb_ck_close(nb_flip(nb_to_dtype(x, NB_I32), (int[]){1}, 1), (double[]){2, 1, 0, 5, 4, 3}, 6, 0, 0);
    gradcheck_op((op_ctx){.kind = K_FLIP, .dims = {0, -1}, .n = 2}, NB_SHAPE(3, 2, 4), 1);
    gradcheck_op((op_ctx){.kind = K_FLIP, .dims = {1}, .n = 1}, NB_SHAPE(3, 2, 4), 2);
    NB_CK_FAILS(nb_flip(x, (int[]){2}, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "flip"));
    NB_CK_FAILS(nb_flip(x, (int[]){1, -1}, 2), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "twice"));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_roll) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *v = nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, 2, 3, 4, 5});
    nb_ck_close(nb_roll(v, (int64_t[]){2}, 1, NULL, 0), (double[]){4, 5, 1, 2, 3}, 5, 0, 0);
    nb_ck_close(nb_roll(v, (int64_t[]){-1}, 1, (int[]){0}, 1), (double[]){2, 3, 4, 5, 1}, 5, 0, 0);
    nb_ck_close(nb_roll(v, (int64_t[]){12}, 1, (int[]){0}, 1), (double[]){4, 5, 1, 2, 3}, 5, 0, 0);
    /* PyTorch's doc example: x = [[1, 2], [3, 4], [5, 6], [7, 8]] */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
    nb_ck_close(nb_roll(x, (int64_t[]){1}, 1, NULL, 0), (double[]){8, 1, 2, 3, 4, 5, 6, 7}, 8, 0, 0);
    nb_ck_close(nb_roll(x, (int64_t[]){1}, 1, (int[]){0}, 1), (double[]){7, 8, 1, 2, 3, 4, 5, 6}, 8, 0, 0);
    nb_ck_close(nb_roll(x, (int64_t[]){-1}, 1, (int[]){0}, 1), (double[]){3, 4, 5, 6, 7, 8, 1, 2}, 8, 0, 0);
    nb_ck_close(nb_roll(x, (int64_t[]){2, 1}, 2, (int[]){0, 1}, 2), (double[]){6, 5, 8, 7, 2, 1, 4, 3}, 8, 0, 0);
    nb_ck_shape(nb_roll(x, (int64_t[]){0}, 1, NULL, 0), 2, (int64_t[]){4, 2});
    gradcheck_op((op_ctx){.kind = K_ROLL, .a = {3}, .na = 1}, NB_SHAPE(3, 4), 3);
    gradcheck_op((op_ctx){.kind = K_ROLL, .a = {1, -2}, .na = 2, .dims = {0, 2}, .n = 2}, NB_SHAPE(3, 2, 4), 4);
    NB_CK_FAILS(nb_roll(x, (int64_t[]){1, 2}, 2, (int[]){0}, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_roll(x, (int64_t[]){1, 2}, 2, NULL, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_roll(x, (int64_t[]){1}, 1, (int[]){2}, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[4, 2]"));
    nb_scope_end(s);
}
END_TEST

/* ---- repeat / tile ---------------------------------------------------------------------------- */

START_TEST(test_repeat_tile) {
    nb_scope *s = nb_scope_begin();
    /* PyTorch's doc: x = [1, 2, 3]; x.repeat(4, 2) is [4, 6]; x.repeat(4, 2, 1).size() [4, 2, 3] */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *r = nb_repeat(x, (int64_t[]){4, 2}, 2);
    nb_ck_shape(r, 2, (int64_t[]){4, 6});
    double want[24];
    for (int i = 0; i < 24; i++) want[i] = 1 + i % 3;
    nb_ck_close(r, want, 24, 0, 0);
    nb_ck_shape(nb_repeat(x, (int64_t[]){4, 2, 1}, 3), 3, (int64_t[]){4, 2, 3});
    nb_tensor *col = nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){1, 2});
    nb_ck_close(nb_repeat(col, (int64_t[]){1, 3}, 2), (double[]){1, 1, 1, 2, 2, 2}, 6, 0, 0);
    nb_ck_shape(nb_repeat(col, (int64_t[]){0, 3}, 2), 2, (int64_t[]){0, 3});
    /* five repeated dims: the index_select path (10 interleaved dims > 8) */
    nb_tensor *big = iota(NB_SHAPE(2, 1, 2, 1, 2));
    nb_tensor *rb = nb_repeat(big, (int64_t[]){2, 3, 2, 2, 2}, 5);
    nb_ck_shape(rb, 5, (int64_t[]){4, 3, 4, 2, 4});
    nb_tensor *rb2 = nb_repeat(nb_repeat(big, (int64_t[]){2, 3, 1, 1, 1}, 5), (int64_t[]){1, 1, 2, 2, 2}, 5);
    double a[384], b[384];
    nb_test_values(rb, a, 384), nb_test_values(rb2, b, 384);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert(a[383] == 7 && a[1] == 1 && a[2] == 0);
    /* tile: PyTorch's doc examples */
    nb_ck_close(nb_tile(x, (int64_t[]){2}, 1), (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    nb_tensor *y = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_ck_close(nb_tile(y, (int64_t[]){2, 2}, 2), (double[]){1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}, 16, 0, 0);
    nb_ck_close(nb_tile(y, (int64_t[]){2}, 1), (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 8, 0, 0); /* 1 prepended */
    nb_ck_shape(nb_tile(y, (int64_t[]){3, 1, 1}, 3), 3, (int64_t[]){3, 2, 2});
    nb_ck_close(nb_tile(nb_to_dtype(y, NB_I64), NULL, 0), (double[]){1, 2, 3, 4}, 4, 0, 0);
    gradcheck_op((op_ctx){.kind = K_REPEAT, .a = {2, 1, 3}, .na = 3}, NB_SHAPE(2, 3), 5);
    gradcheck_op((op_ctx){.kind = K_REPEAT, .a = {2, 2, 2, 2, 3}, .na = 5}, NB_SHAPE(2, 1, 2, 1, 2), 6);
    gradcheck_op((op_ctx){.kind = K_TILE, .a = {3}, .na = 1}, NB_SHAPE(2, 3), 7);
    NB_CK_FAILS(nb_repeat(y, (int64_t[]){2}, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "repeat"));
    NB_CK_FAILS(nb_repeat(y, (int64_t[]){2, -1}, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_tile(y, (int64_t[]){-2}, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- pad ------------------------------------------------------------------------------------ */

START_TEST(test_pad_values) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *v = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 2, 3, 4});
    const int64_t p21[2] = {2, 1};
    nb_ck_close(nb_pad(v, p21, 2, NB_PAD_REFLECT, 0), (double[]){3, 2, 1, 2, 3, 4, 3}, 7, 0, 0);
    nb_ck_close(nb_pad(v, p21, 2, NB_PAD_REPLICATE, 0), (double[]){1, 1, 1, 2, 3, 4, 4}, 7, 0, 0);
    nb_ck_close(nb_pad(v, p21, 2, NB_PAD_CIRCULAR, 0), (double[]){3, 4, 1, 2, 3, 4, 1}, 7, 0, 0);
    nb_ck_close(nb_pad(v, p21, 2, NB_PAD_CONSTANT, 9), (double[]){9, 9, 1, 2, 3, 4, 9}, 7, 0, 0);
    nb_ck_close(nb_pad(v, (int64_t[]){-1, 2}, 2, NB_PAD_CONSTANT, 0), (double[]){2, 3, 4, 0, 0}, 5, 0, 0);
    nb_ck_close(nb_pad(v, (int64_t[]){-1, -3}, 2, NB_PAD_CONSTANT, 0), NULL, 0, 0, 0);
    nb_ck_close(nb_pad(v, (int64_t[]){4, 4}, 2, NB_PAD_CIRCULAR, 0), (double[]){1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4},
                12, 0, 0);
    nb_ck_close(nb_pad(v, (int64_t[]){3, 3}, 2, NB_PAD_REFLECT, 0), (double[]){4, 3, 2, 1, 2, 3, 4, 3, 2, 1}, 10, 0, 0);
    /* 2-D: the last dim first */
    nb_tensor *m = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *c = nb_pad(m, (int64_t[]){1, 1, 1, 0}, 4, NB_PAD_CONSTANT, 0);
    nb_ck_shape(c, 2, (int64_t[]){3, 4});
    nb_ck_close(c, (double[]){0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0}, 12, 0, 0);
    nb_tensor *m23 = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *r = nb_pad(m23, (int64_t[]){1, 1, 1, 1}, 4, NB_PAD_REFLECT, 0);
    nb_ck_shape(r, 2, (int64_t[]){4, 5});
    nb_ck_close(r, (double[]){5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2}, 20, 0, 0);
    nb_tensor *rep = nb_pad(m23, (int64_t[]){0, 1, 1, 0}, 4, NB_PAD_REPLICATE, 0);
    nb_ck_close(rep, (double[]){1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6}, 12, 0, 0);
    /* int dtype, a transposed input, and no pads (a copy) */
    nb_ck_close(nb_pad(nb_to_dtype(v, NB_I32), p21, 2, NB_PAD_CONSTANT, -1), (double[]){-1, -1, 1, 2, 3, 4, -1}, 7,
                0, 0);
    nb_ck_close(nb_pad(nb_transpose(m, 0, 1), (int64_t[]){0, 1}, 2, NB_PAD_CONSTANT, 0), (double[]){1, 3, 0, 2, 4, 0},
                6, 0, 0);
    nb_tensor *same = nb_pad(m, NULL, 0, NB_PAD_REFLECT, 0);
    NB_CK_OK(nb_fill_(same, 0));
    nb_ck_close(m, (double[]){1, 2, 3, 4}, 4, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_pad_grad_errors) {
    nb_scope *s = nb_scope_begin();
    const int64_t sh[3] = {2, 3, 4};
    for (int mode = NB_PAD_CONSTANT; mode <= NB_PAD_CIRCULAR; mode++)
        gradcheck_op((op_ctx){.kind = K_PAD, .a = {2, 1, 1, 2}, .na = 4, .n = mode, .v = 0.5}, 3, sh, 10 + mode);
    gradcheck_op((op_ctx){.kind = K_PAD, .a = {-1, 2, 1, -1, 0, 1}, .na = 6, .n = NB_PAD_CONSTANT}, 3, sh, 20);
    gradcheck_op((op_ctx){.kind = K_PAD, .a = {3, 3}, .na = 2, .n = NB_PAD_REFLECT}, 3, sh, 21);
    /* by hand: reflect's copies add up */
    nb_tensor *v = nb_zeros(NB_SHAPE(4), NB_F64);
    NB_CK_OK(nb_set_requires_grad(v, true));
    NB_CK_OK(nb_backward(nb_sum(nb_pad(v, (int64_t[]){2, 1}, 2, NB_PAD_REFLECT, 0), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(v), (double[]){1, 2, 3, 1}, 4, 0, 0);
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 4), NB_F64);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){4, 0}, 2, NB_PAD_REFLECT, 0), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "reflect"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[2, 4]"));
    NB_CK_FAILS(nb_pad(x, (int64_t[]){0, 3, 0, 2}, 4, NB_PAD_REFLECT, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){5, 0}, 2, NB_PAD_CIRCULAR, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(nb_zeros(NB_SHAPE(2, 0), NB_F64), (int64_t[]){1, 0}, 2, NB_PAD_REPLICATE, 0),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){1, 1, 1}, 3, NB_PAD_CONSTANT, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){1, 1, 1, 1, 1, 1}, 6, NB_PAD_CONSTANT, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){-3, -2}, 2, NB_PAD_CONSTANT, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){1, 1}, 2, (nb_pad_mode)7, 0), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- tril / triu ------------------------------------------------------------------------------- */

START_TEST(test_tril_triu) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_add_scalar(iota(NB_SHAPE(3, 3)), 1);
    nb_ck_close(nb_tril(x, 0), (double[]){1, 0, 0, 4, 5, 0, 7, 8, 9}, 9, 0, 0);
    nb_ck_close(nb_tril(x, -1), (double[]){0, 0, 0, 4, 0, 0, 7, 8, 0}, 9, 0, 0);
    nb_ck_close(nb_tril(x, 1), (double[]){1, 2, 0, 4, 5, 6, 7, 8, 9}, 9, 0, 0);
    nb_ck_close(nb_triu(x, 0), (double[]){1, 2, 3, 0, 5, 6, 0, 0, 9}, 9, 0, 0);
    nb_ck_close(nb_triu(x, 1), (double[]){0, 2, 3, 0, 0, 6, 0, 0, 0}, 9, 0, 0);
    nb_ck_close(nb_triu(x, -1), (double[]){1, 2, 3, 4, 5, 6, 0, 8, 9}, 9, 0, 0);
    nb_ck_close(nb_triu(x, 5), (double[]){0, 0, 0, 0, 0, 0, 0, 0, 0}, 9, 0, 0);
    /* non-square, batched, int dtype */
    nb_tensor *r = nb_add_scalar(iota(NB_SHAPE(2, 2, 3)), 1);
    nb_ck_close(nb_tril(r, 1), (double[]){1, 2, 0, 4, 5, 6, 7, 8, 0, 10, 11, 12}, 12, 0, 0);
    nb_tensor *ti = nb_triu(nb_to_dtype(r, NB_I64), 0);
    ck_assert_int_eq(nb_dtype_of(ti), NB_I64);
    nb_ck_close(ti, (double[]){1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}, 12, 0, 0);
    gradcheck_op((op_ctx){.kind = K_TRIL, .a = {-1}}, NB_SHAPE(2, 3, 4), 30);
    gradcheck_op((op_ctx){.kind = K_TRIU, .a = {1}}, NB_SHAPE(4, 3), 31);
    NB_CK_FAILS(nb_tril(nb_zeros(NB_SHAPE(3), NB_F64), 0), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "tril"));
    NB_CK_FAILS(nb_triu(nb_scalar(1, NB_F64), 0), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* ---- diagonal / diag_embed ---------------------------------------------------------------------- */

START_TEST(test_diagonal) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = iota(NB_SHAPE(3, 3));
    nb_ck_close(nb_diagonal(x, 0, 0, 1), (double[]){0, 4, 8}, 3, 0, 0);
    nb_ck_close(nb_diagonal(x, 1, 0, 1), (double[]){1, 5}, 2, 0, 0);
    nb_ck_close(nb_diagonal(x, -1, 0, 1), (double[]){3, 7}, 2, 0, 0);
    nb_ck_close(nb_diagonal(x, -2, 1, 0), (double[]){2}, 1, 0, 0); /* swapped dims: offset counts along dim 0 */
    nb_ck_shape(nb_diagonal(x, 5, 0, 1), 1, (int64_t[]){0});
    nb_ck_shape(nb_diagonal(x, -4, 0, 1), 1, (int64_t[]){0});
    nb_tensor *y = iota(NB_SHAPE(2, 2, 3));
    nb_ck_close(nb_diagonal(y, 0, 1, 2), (double[]){0, 4, 6, 10}, 4, 0, 0);
    nb_ck_close(nb_diagonal(y, 0, 0, 2), (double[]){0, 7, 3, 10}, 4, 0, 0); /* [j, i] = y[i, j, i] */
    nb_ck_close(nb_diagonal(y, 1, -2, -1), (double[]){1, 5, 7, 11}, 4, 0, 0);
    /* a view: writes show in the input */
    nb_tensor *d = nb_diagonal(x, 1, 0, 1);
    NB_CK_OK(nb_fill_(d, -1));
    nb_ck_close(x, (double[]){0, -1, 2, 3, 4, -1, 6, 7, 8}, 9, 0, 0);
    gradcheck_op((op_ctx){.kind = K_DIAG, .a = {0}, .dims = {0, 1}}, NB_SHAPE(3, 4), 40);
    gradcheck_op((op_ctx){.kind = K_DIAG, .a = {1}, .dims = {-1, 0}}, NB_SHAPE(4, 2, 3), 41);
    gradcheck_op((op_ctx){.kind = K_DIAG, .a = {-2}, .dims = {2, 1}}, NB_SHAPE(2, 3, 4), 42);
    NB_CK_FAILS(nb_diagonal(x, 0, 1, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_diagonal(x, 0, 0, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_diagonal(nb_zeros(NB_SHAPE(3), NB_F64), 0, 0, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "diagonal"));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_diag_embed) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *v = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    nb_ck_close(nb_diag_embed(v, 0, -2, -1), (double[]){1, 0, 0, 2}, 4, 0, 0);
    nb_tensor *up = nb_diag_embed(v, 1, -2, -1);
    nb_ck_shape(up, 2, (int64_t[]){3, 3});
    nb_ck_close(up, (double[]){0, 1, 0, 0, 0, 2, 0, 0, 0}, 9, 0, 0);
    nb_ck_close(nb_diag_embed(v, -1, 0, 1), (double[]){0, 0, 0, 1, 0, 0, 0, 2, 0}, 9, 0, 0);
    nb_tensor *m = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *b = nb_diag_embed(m, 0, -2, -1);
    nb_ck_shape(b, 3, (int64_t[]){2, 2, 2});
    nb_ck_close(b, (double[]){1, 0, 0, 2, 3, 0, 0, 4}, 8, 0, 0);
    nb_ck_close(nb_diag_embed(m, 0, 0, 2), (double[]){1, 0, 3, 0, 0, 2, 0, 4}, 8, 0, 0); /* [i, b, i] = m[b, i] */
    nb_ck_close(nb_diag_embed(nb_to_dtype(v, NB_I64), 0, 1, 0), (double[]){1, 0, 0, 2}, 4, 0, 0);
    /* diagonal undoes diag_embed */
    nb_ck_close(nb_diagonal(nb_diag_embed(m, -1, 2, 0), -1, 2, 0), (double[]){1, 2, 3, 4}, 4, 0, 0);
    gradcheck_op((op_ctx){.kind = K_DIAG_EMBED, .a = {0}, .dims = {-2, -1}}, NB_SHAPE(2, 3), 50);
    gradcheck_op((op_ctx){.kind = K_DIAG_EMBED, .a = {2}, .dims = {0, 2}}, NB_SHAPE(2, 3), 51);
    gradcheck_op((op_ctx){.kind = K_DIAG_EMBED, .a = {-1}, .dims = {1, 0}}, NB_SHAPE(3), 52);
    NB_CK_FAILS(nb_diag_embed(v, 0, 0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_diag_embed(v, 0, 0, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_diag_embed(nb_scalar(1, NB_F64), 0, 0, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- unfold / movedim / broadcast_to -------------------------------------------------------------- */

START_TEST(test_unfold) {
    nb_scope *s = nb_scope_begin();
    /* PyTorch's doc: x = arange(1., 8); x.unfold(0, 2, 1) / (0, 2, 2) */
    nb_tensor *x = nb_arange(1, 8, 1, NB_F64);
    nb_tensor *u = nb_unfold(x, 0, 2, 1);
    nb_ck_shape(u, 2, (int64_t[]){6, 2});
    nb_ck_close(u, (double[]){1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7}, 12, 0, 0);
    nb_ck_close(nb_unfold(x, 0, 2, 2), (double[]){1, 2, 3, 4, 5, 6}, 6, 0, 0);
    nb_ck_close(nb_unfold(x, 0, 3, 2), (double[]){1, 2, 3, 3, 4, 5, 5, 6, 7}, 9, 0, 0);
    nb_ck_close(nb_unfold(x, -1, 2, 3), (double[]){1, 2, 4, 5}, 4, 0, 0);
    nb_ck_shape(nb_unfold(x, 0, 7, 1), 2, (int64_t[]){1, 7});
    nb_tensor *m = iota(NB_SHAPE(2, 4));
    nb_tensor *um = nb_unfold(m, 1, 3, 1);
    nb_ck_shape(um, 3, (int64_t[]){2, 2, 3});
    nb_ck_close(um, (double[]){0, 1, 2, 1, 2, 3, 4, 5, 6, 5, 6, 7}, 12, 0, 0);
    nb_ck_close(nb_unfold(m, 0, 2, 1), (double[]){0, 4, 1, 5, 2, 6, 3, 7}, 8, 0, 0); /* [1, 4, 2] */
    /* a view; overlapping windows sum their gradients */
    nb_tensor *x2 = nb_arange(0, 5, 1, NB_F64);
    NB_CK_OK(nb_fill_(nb_unfold(x2, 0, 2, 3), -1));
    nb_ck_close(x2, (double[]){-1, -1, 2, -1, -1}, 5, 0, 0);
    nb_tensor *w = nb_zeros(NB_SHAPE(5), NB_F64);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_backward(nb_sum(nb_unfold(w, 0, 3, 1), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(w), (double[]){1, 2, 3, 2, 1}, 5, 0, 0);
    gradcheck_op((op_ctx){.kind = K_UNFOLD, .dims = {1}, .a = {3, 1}}, NB_SHAPE(2, 5, 2), 60);
    gradcheck_op((op_ctx){.kind = K_UNFOLD, .dims = {-1}, .a = {2, 3}}, NB_SHAPE(3, 7), 61);
    gradcheck_op((op_ctx){.kind = K_UNFOLD, .dims = {0}, .a = {3, 2}}, NB_SHAPE(7, 2), 62);
    NB_CK_FAILS(nb_unfold(x, 0, 8, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "unfold"));
    NB_CK_FAILS(nb_unfold(x, 0, 2, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_unfold(x, 1, 2, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_movedim_broadcast_to) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = iota(NB_SHAPE(2, 3, 4));
    nb_tensor *m = nb_movedim(x, (int[]){0}, (int[]){2}, 1);
    nb_ck_shape(m, 3, (int64_t[]){3, 4, 2});
    double a[24], b[24];
    nb_test_values(m, a, 24), nb_test_values(nb_permute(x, (int[]){1, 2, 0}), b, 24);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    /* PyTorch's doc: movedim(t [3, 2, 1], (1, 2), (0, 1)) has shape [2, 1, 3] */
    nb_ck_shape(nb_movedim(nb_zeros(NB_SHAPE(3, 2, 1), NB_F64), (int[]){1, 2}, (int[]){0, 1}, 2), 3,
                (int64_t[]){2, 1, 3});
    nb_tensor *m2 = nb_movedim(x, (int[]){0, 1}, (int[]){-1, 0}, 2); /* 0 -> 2, 1 -> 0, 2 fills 1 */
    nb_ck_shape(m2, 3, (int64_t[]){3, 4, 2});
    nb_test_values(m2, a, 24);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    gradcheck_op((op_ctx){.kind = K_MOVEDIM, .dims = {2, 0, 0, 1}, .n = 2}, NB_SHAPE(2, 3, 4), 70);
    NB_CK_FAILS(nb_movedim(x, (int[]){0, 0}, (int[]){1, 2}, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_movedim(x, (int[]){3}, (int[]){0}, 1), NB_ERR_INVALID_ARG);
    /* broadcast_to */
    nb_tensor *v = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_ck_close(nb_broadcast_to(v, NB_SHAPE(2, 3)), (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    nb_tensor *c = nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){1, 2});
    nb_ck_close(nb_broadcast_to(c, NB_SHAPE(-1, 3)), (double[]){1, 1, 1, 2, 2, 2}, 6, 0, 0);
    gradcheck_op((op_ctx){.kind = K_BCAST, .a = {2, 3, 4}, .na = 3}, NB_SHAPE(3, 1), 71);
    NB_CK_FAILS(nb_broadcast_to(v, NB_SHAPE(2, 4)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "broadcast_to"));
    NB_CK_FAILS(nb_broadcast_to(c, NB_SHAPE(3)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_broadcast_to(v, NB_SHAPE(-1, 3)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* ---- meshgrid ------------------------------------------------------------------------------------ */

static nb_tensor *f_meshgrid(nb_tensor *const *in, int n, void *ctx) {
    nb_tensor *out[2];
    if (nb_meshgrid(in, n, *(nb_meshgrid_indexing *)ctx, out) != NB_OK) return NULL;
    return nb_mul(out[0], nb_exp(out[1]));
}

START_TEST(test_meshgrid) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *y = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){4, 5});
    nb_tensor *out[3];
    NB_CK_OK(nb_meshgrid((nb_tensor *[]){x, y}, 2, NB_MESHGRID_IJ, out));
    nb_ck_shape(out[0], 2, (int64_t[]){3, 2});
    nb_ck_close(out[0], (double[]){1, 1, 2, 2, 3, 3}, 6, 0, 0);
    nb_ck_close(out[1], (double[]){4, 5, 4, 5, 4, 5}, 6, 0, 0);
    NB_CK_OK(nb_meshgrid((nb_tensor *[]){x, y}, 2, NB_MESHGRID_XY, out));
    nb_ck_shape(out[0], 2, (int64_t[]){2, 3});
    nb_ck_close(out[0], (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    nb_ck_close(out[1], (double[]){4, 4, 4, 5, 5, 5}, 6, 0, 0);
    /* three inputs, one 0-d: xy swaps only the first two dims */
    NB_CK_OK(nb_meshgrid((nb_tensor *[]){x, y, nb_scalar(7, NB_F64)}, 3, NB_MESHGRID_XY, out));
    nb_ck_shape(out[2], 3, (int64_t[]){2, 3, 1});
    nb_ck_close(out[2], (double[]){7, 7, 7, 7, 7, 7}, 6, 0, 0);
    NB_CK_OK(nb_meshgrid(&x, 1, NB_MESHGRID_IJ, out));
    nb_ck_close(out[0], (double[]){1, 2, 3}, 3, 0, 0);
    nb_meshgrid_indexing ij = NB_MESHGRID_IJ, xy = NB_MESHGRID_XY;
    nb_tensor *in[2] = {nb_test_randn_grad(NB_SHAPE(3), 80), nb_test_randn_grad(NB_SHAPE(4), 81)};
    nb_ck_gradcheck(f_meshgrid, in, 2, &ij);
    nb_ck_gradcheck(f_meshgrid, in, 2, &xy);
    NB_CK_OK(nb_meshgrid((nb_tensor *[]){x, y}, 2, NB_MESHGRID_IJ, out));
    nb_clear_error();
    ck_assert_int_ne(nb_meshgrid((nb_tensor *[]){x, nb_zeros(NB_SHAPE(2, 2), NB_F64)}, 2, ij, out), NB_OK);
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_int_eq(nb_meshgrid((nb_tensor *[]){x, nb_to_dtype(y, NB_F32)}, 2, ij, out), NB_ERR_DTYPE);
    ck_assert_int_eq(nb_meshgrid(&x, 0, ij, out), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_meshgrid(&x, 1, (nb_meshgrid_indexing)5, out), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "meshgrid"));
    nb_scope_end(s);
}
END_TEST

/* A repeat count whose product overflows int64 is an error, not a wrap. */
START_TEST(test_repeat_overflow) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_zeros(NB_SHAPE(4), NB_F32);
    NB_CK_FAILS(nb_repeat(t, (int64_t[]){(int64_t)1 << 62}, 1), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* Regressions (issue 13): circular pad crops before it wraps, as PyTorch;
 * a constant crop larger than the dim is an error; pads near INT64_MAX are
 * an error, not a size wrapped to 2 and a heap overflow. */
START_TEST(test_pad_crop_and_overflow) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(1, (int64_t[]){4}, NB_F32, (double[]){1, 2, 3, 4});
    nb_ck_close(nb_pad(x, (int64_t[]){-1, 2}, 2, NB_PAD_CIRCULAR, 0), (double[]){2, 3, 4, 2, 3}, 5, 0, 0);
    nb_ck_close(nb_pad(x, (int64_t[]){2, -1}, 2, NB_PAD_CIRCULAR, 0), (double[]){2, 3, 1, 2, 3}, 5, 0, 0);
    nb_ck_close(nb_pad(x, (int64_t[]){1, -3}, 2, NB_PAD_CIRCULAR, 0), (double[]){1, 1}, 2, 0, 0);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){-1, 4}, 2, NB_PAD_CIRCULAR, 0), NB_ERR_INVALID_ARG); /* 4 > 3 left */
    /* reflect maps onto the uncropped input, as PyTorch: (-3, 1) gives [4, 3] */
    nb_ck_close(nb_pad(x, (int64_t[]){-3, 1}, 2, NB_PAD_REFLECT, 0), (double[]){4, 3}, 2, 0, 0);
    nb_ck_close(nb_pad(x, (int64_t[]){-4, 1}, 2, NB_PAD_CONSTANT, 7), (double[]){7}, 1, 0, 0);
    NB_CK_FAILS(nb_pad(x, (int64_t[]){-5, 2}, 2, NB_PAD_CONSTANT, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pad(nb_zeros(NB_SHAPE(0), NB_F32), (int64_t[]){-1, 2}, 2, NB_PAD_CONSTANT, 0), NB_ERR_INVALID_ARG);
    for (int m = 0; m < 4; m++) {
        NB_CK_FAILS(nb_pad(x, (int64_t[]){INT64_MAX, INT64_MAX}, 2, (nb_pad_mode)m, 0), NB_ERR_INVALID_ARG);
        NB_CK_FAILS(nb_pad(x, (int64_t[]){INT64_MIN, 2}, 2, (nb_pad_mode)m, 0), NB_ERR_INVALID_ARG);
        NB_CK_FAILS(nb_pad(x, (int64_t[]){INT64_MAX / 2, INT64_MAX / 2}, 2, (nb_pad_mode)m, 0), NB_ERR_INVALID_ARG);
    }
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_shape(void) {
    Suite *s = suite_create("ops_shape");
    TCase *c = tcase_create("shape");
    tcase_add_test(c, test_flip);
    tcase_add_test(c, test_pad_crop_and_overflow);
    tcase_add_test(c, test_roll);
    tcase_add_test(c, test_repeat_tile);
    tcase_add_test(c, test_pad_values);
    tcase_add_test(c, test_pad_grad_errors);
    tcase_add_test(c, test_tril_triu);
    tcase_add_test(c, test_diagonal);
    tcase_add_test(c, test_diag_embed);
    tcase_add_test(c, test_unfold);
    tcase_add_test(c, test_movedim_broadcast_to);
    tcase_add_test(c, test_meshgrid);
    tcase_add_test(c, test_repeat_overflow);
    tcase_set_timeout(c, 300);
    suite_add_tcase(s, c);
    return s;
}
