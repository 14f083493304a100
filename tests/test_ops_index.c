/* test_ops_index.c - embedding, index_select, cat, stack, split, chunk,
 * where, masked_fill, bmm, index_add, index_copy, one_hot, nonzero and
 * masked_select: forward values against naive host references
 * and hand values, gradients by hand (padding_idx rows, repeated indices),
 * gradchecks of every op, error paths, and the embedding backward giving
 * the same bits for 1 and 2 threads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

static nb_tensor *idx_tensor(int ndim, const int64_t *shape, const int64_t *v) {
    nb_tensor *t = nb_from_data(v, ndim, shape, NB_I64);
    NB_CK_NOTNULL(t);
    return t;
}

static nb_tensor *bool_tensor(int ndim, const int64_t *shape, const bool *v) {
    nb_tensor *t = nb_from_data(v, ndim, shape, NB_BOOL);
    NB_CK_NOTNULL(t);
    return t;
}

/* ---- embedding ---------------------------------------------------------------------------- */

typedef struct {
    nb_tensor *idx;
    int64_t pad;
    nb_tensor *keep; /* NULL, or [*idx.shape, 1]: 0 at padding positions */
} emb_ctx;

/* embedding, times `keep` when given: the forward then no longer reads the
 * padding row either, so its numerical gradient is 0 like the analytical one. */
static nb_tensor *f_embedding(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    emb_ctx *c = ctx;
    nb_tensor *e = nb_embedding(c->idx, in[0], c->pad);
    return c->keep ? nb_mul(e, c->keep) : e;
}

START_TEST(test_embedding_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_reshape(nb_arange(0, 15, 1, NB_F64), NB_SHAPE(5, 3));
    nb_tensor *idx = idx_tensor(NB_SHAPE(2, 2), (int64_t[]){0, 4, 2, 0});
    nb_tensor *e = nb_embedding(idx, w, NB_NO_PADDING_IDX);
    nb_ck_shape(e, 3, (int64_t[]){2, 2, 3});
    nb_ck_close(e, (double[]){0, 1, 2, 12, 13, 14, 6, 7, 8, 0, 1, 2}, 12, 0, 0);
    /* the padding row is still looked up (PyTorch only skips its gradient) */
    nb_ck_close(nb_embedding(idx, w, -1), (double[]){0, 1, 2, 12, 13, 14, 6, 7, 8, 0, 1, 2}, 12, 0, 0);
    /* 0-d and 1-D indices; float32 weight */
    nb_tensor *e0 = nb_embedding(nb_full(0, NULL, 3, NB_I64), w, NB_NO_PADDING_IDX);
    nb_ck_shape(e0, 1, (int64_t[]){3});
    nb_ck_close(e0, (double[]){9, 10, 11}, 3, 0, 0);
    nb_tensor *e32 = nb_embedding(idx_tensor(NB_SHAPE(3), (int64_t[]){1, 1, 3}), nb_to_dtype(w, NB_F32), 1);
    ck_assert_int_eq(nb_dtype_of(e32), NB_F32);
    nb_ck_close(e32, (double[]){3, 4, 5, 3, 4, 5, 9, 10, 11}, 9, 0, 0);
    /* a transposed (non-contiguous) weight */
    nb_tensor *wt = nb_transpose(nb_reshape(nb_arange(0, 6, 1, NB_F64), NB_SHAPE(2, 3)), 0, 1); /* [3, 2] */
    nb_ck_close(nb_embedding(idx_tensor(NB_SHAPE(2), (int64_t[]){2, 0}), wt, NB_NO_PADDING_IDX),
                (double[]){2, 5, 0, 3}, 4, 0, 0);
    /* empty indices */
    nb_ck_shape(nb_embedding(nb_zeros(NB_SHAPE(0), NB_I64), w, NB_NO_PADDING_IDX), 2, (int64_t[]){0, 3});
    nb_scope_end(s);
}
END_TEST

START_TEST(test_embedding_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_zeros(NB_SHAPE(5, 3), NB_F64);
    NB_CK_FAILS(nb_embedding(idx_tensor(NB_SHAPE(3), (int64_t[]){1, 7, 2}), w, NB_NO_PADDING_IDX), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "embedding"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index 7"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[5, 3]"));
    NB_CK_FAILS(nb_embedding(idx_tensor(NB_SHAPE(2), (int64_t[]){-1, 0}), w, NB_NO_PADDING_IDX), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index -1"));
    /* int32 ids are taken (as PyTorch); float ids are not */
    nb_ck_shape(nb_embedding(nb_zeros(NB_SHAPE(2), NB_I32), w, NB_NO_PADDING_IDX), 2, (const int64_t[]){2, 3});
    NB_CK_FAILS(nb_embedding(nb_zeros(NB_SHAPE(2), NB_F32), w, NB_NO_PADDING_IDX), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_embedding(nb_zeros(NB_SHAPE(2), NB_I64), nb_zeros(NB_SHAPE(5), NB_F64), NB_NO_PADDING_IDX),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_embedding(nb_zeros(NB_SHAPE(2), NB_I64), nb_zeros(NB_SHAPE(5, 3), NB_I64), NB_NO_PADDING_IDX),
                NB_ERR_DTYPE);
    NB_CK_FAILS(nb_embedding(nb_zeros(NB_SHAPE(2), NB_I64), w, 5), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "padding_idx"));
    NB_CK_FAILS(nb_embedding(nb_zeros(NB_SHAPE(2), NB_I64), w, -6), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_embedding(NULL, w, NB_NO_PADDING_IDX), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_embedding_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_zeros(NB_SHAPE(4, 2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *idx = idx_tensor(NB_SHAPE(5), (int64_t[]){1, 3, 1, 0, 1});
    nb_tensor *e = nb_embedding(idx, w, 0);
    nb_tensor *g = nb_test_tensor(NB_SHAPE(5, 2), NB_F64, (double[]){1, 2, 10, 20, 100, 200, 5, 5, 1000, 2000});
    NB_CK_OK(nb_backward_with(e, g));
    /* row 1 sums positions 0, 2, 4; row 3 position 1; row 0 is padding; row 2 unused */
    nb_ck_close(nb_tensor_grad(w), (double[]){0, 0, 1101, 2202, 0, 0, 10, 20}, 8, 0, 0);
    /* padding_idx given as -4 is the same row 0 */
    nb_tensor_zero_grad(w);
    NB_CK_OK(nb_backward_with(nb_embedding(idx, w, -4), g));
    nb_ck_close(nb_tensor_grad(w), (double[]){0, 0, 1101, 2202, 0, 0, 10, 20}, 8, 0, 0);
    /* no padding: row 0 gets its gradient */
    nb_tensor_zero_grad(w);
    NB_CK_OK(nb_backward_with(nb_embedding(idx, w, NB_NO_PADDING_IDX), g));
    nb_ck_close(nb_tensor_grad(w), (double[]){5, 5, 1101, 2202, 0, 0, 10, 20}, 8, 0, 0);
    /* refilling the index buffer before backward (a loader reusing its batch
     * tensor) does not change the gradient: the op keeps its own copy */
    nb_tensor_zero_grad(w);
    e = nb_embedding(idx, w, NB_NO_PADDING_IDX);
    NB_CK_OK(nb_fill_(idx, 2));
    NB_CK_OK(nb_backward_with(e, g));
    nb_ck_close(nb_tensor_grad(w), (double[]){5, 5, 1101, 2202, 0, 0, 10, 20}, 8, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_embedding_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_randn_grad(NB_SHAPE(6, 3), 1);
    emb_ctx c = {idx_tensor(NB_SHAPE(7), (int64_t[]){0, 5, 2, 2, 5, 1, 2}), NB_NO_PADDING_IDX, NULL};
    nb_ck_gradcheck(f_embedding, &w, 1, &c);
    /* padding_idx 2 (and -4, the same row): its gradient is zero, the other
     * rows accumulate their repeats */
    c.keep = nb_test_tensor(NB_SHAPE(7, 1), NB_F64, (double[]){1, 1, 0, 0, 1, 1, 0});
    c.pad = 2;
    nb_ck_gradcheck(f_embedding, &w, 1, &c);
    c.pad = -4;
    nb_ck_gradcheck(f_embedding, &w, 1, &c);
    NB_CK_OK(nb_backward(nb_sum(nb_embedding(c.idx, w, 2), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(w), (double[]){1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2}, 18, 0, 0);
    nb_tensor_zero_grad(w);
    /* indices of any shape */
    emb_ctx c2 = {idx_tensor(NB_SHAPE(2, 3), (int64_t[]){3, 3, 0, 4, 1, 3}), NB_NO_PADDING_IDX, NULL};
    nb_ck_gradcheck(f_embedding, &w, 1, &c2);
    emb_ctx c3 = {idx_tensor(NB_SHAPE(2, 1, 2), (int64_t[]){5, 0, 0, 5}), 0,
                  nb_test_tensor(NB_SHAPE(2, 1, 2, 1), NB_F64, (double[]){1, 0, 0, 1})};
    nb_ck_gradcheck(f_embedding, &w, 1, &c3);
    nb_scope_end(s);
}
END_TEST

/* grad of weight [v, d] f32 for random repeated indices at a thread count. */
static void embedding_grad_bits(int threads, int64_t v, int64_t d, int64_t k, float *out) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator gen = nb_generator_new(42);
    nb_tensor *w = nb_randn(NB_SHAPE(v, d), NB_F32, &gen);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *r = nb_rand(NB_SHAPE(k), NB_F64, &gen);
    /* many repeats among the first 40 rows, so the order of additions matters */
    nb_tensor *idx = nb_to_dtype(nb_mul_scalar(r, 40), NB_I64);
    nb_tensor *g = nb_randn(NB_SHAPE(k, d), NB_F32, &gen);
    NB_CK_OK(nb_backward_with(nb_embedding(idx, w, 7), g));
    NB_CK_OK(nb_to_host(nb_tensor_grad(w), out, sizeof(float) * (size_t)(v * d)));
    /* reference: the same sums in index order, on the host */
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)k);
    float *gv = malloc(sizeof(float) * (size_t)(k * d)), *ref = calloc((size_t)(v * d), sizeof(float));
    ck_assert(iv && gv && ref);
    NB_CK_OK(nb_to_host(idx, iv, sizeof(int64_t) * (size_t)k));
    NB_CK_OK(nb_to_host(g, gv, sizeof(float) * (size_t)(k * d)));
    for (int64_t i = 0; i < k; i++)
        if (iv[i] != 7)
            for (int64_t j = 0; j < d; j++) ref[iv[i] * d + j] += gv[i * d + j];
    ck_assert_int_eq(memcmp(ref, out, sizeof(float) * (size_t)(v * d)), 0);
    free(iv), free(gv), free(ref);
    nb_scope_end(s);
}

START_TEST(test_embedding_deterministic) {
    int prev = nb_get_num_threads();
    int64_t v = 3000, d = 96, k = 4096;
    float *a = malloc(sizeof(float) * (size_t)(v * d)), *b = malloc(sizeof(float) * (size_t)(v * d));
    ck_assert(a && b);
    embedding_grad_bits(1, v, d, k, a);
    embedding_grad_bits(2, v, d, k, b);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * (size_t)(v * d)), 0);
    /* a narrow embedding dim: blocks of a 5-wide row */
    embedding_grad_bits(1, 50000, 5, 300, a);
    embedding_grad_bits(2, 50000, 5, 300, b);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * 50000 * 5), 0);
    free(a), free(b);
    nb_set_num_threads(prev);
}
END_TEST

/* ---- index_select ------------------------------------------------------------------------- */

typedef struct {
    int dim;
    nb_tensor *idx;
} sel_ctx;

static nb_tensor *f_index_select(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    sel_ctx *c = ctx;
    return nb_index_select(in[0], c->dim, c->idx);
}

/* naive reference on [a, b, c] along dim */
static void ref_select3(const double *x, const int64_t *sh, int dim, const int64_t *idx, int64_t k, double *out) {
    int64_t o[3] = {sh[0], sh[1], sh[2]};
    o[dim] = k;
    for (int64_t i = 0; i < o[0]; i++)
        for (int64_t j = 0; j < o[1]; j++)
            for (int64_t l = 0; l < o[2]; l++) {
                int64_t p[3] = {i, j, l};
                p[dim] = idx[p[dim]];
                out[(i * o[1] + j) * o[2] + l] = x[(p[0] * sh[1] + p[1]) * sh[2] + p[2]];
            }
}

START_TEST(test_index_select_forward) {
    nb_scope *s = nb_scope_begin();
    int64_t sh[3] = {3, 4, 5};
    nb_tensor *x = nb_mul_scalar(nb_reshape(nb_arange(0, 60, 1, NB_F64), 3, sh), 0.5);
    double *xv = nb_test_values_of(x), want[120];
    int64_t iv[4] = {2, 0, 2, 1};
    nb_tensor *idx = idx_tensor(NB_SHAPE(4), iv);
    for (int dim = 0; dim < 3; dim++) {
        nb_tensor *y = nb_index_select(x, dim, idx);
        int64_t o[3] = {3, 4, 5};
        o[dim] = 4;
        nb_ck_shape(y, 3, o);
        ref_select3(xv, sh, dim, iv, 4, want);
        nb_ck_close(y, want, o[0] * o[1] * o[2], 0, 0);
        /* negative dim */
        nb_ck_close(nb_index_select(x, dim - 3, idx), want, o[0] * o[1] * o[2], 0, 0);
    }
    /* hand values: rows 1 and 0 of a 2x2 */
    nb_tensor *m = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_ck_close(nb_index_select(m, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){1, 0})), (double[]){3, 4, 1, 2}, 4, 0, 0);
    nb_ck_close(nb_index_select(m, 1, idx_tensor(NB_SHAPE(3), (int64_t[]){1, 1, 0})), (double[]){2, 2, 1, 4, 4, 3},
                6, 0, 0);
    /* a transposed input, an int64 input and a 0-d index */
    nb_ck_close(nb_index_select(nb_transpose(m, 0, 1), 0, idx_tensor(NB_SHAPE(1), (int64_t[]){1})), (double[]){2, 4},
                2, 0, 0);
    nb_tensor *mi = nb_to_dtype(m, NB_I64);
    nb_tensor *yi = nb_index_select(mi, 1, idx_tensor(NB_SHAPE(1), (int64_t[]){0}));
    ck_assert_int_eq(nb_dtype_of(yi), NB_I64);
    nb_ck_close(yi, (double[]){1, 3}, 2, 0, 0);
    nb_tensor *y0 = nb_index_select(m, 0, nb_full(0, NULL, 1, NB_I64));
    nb_ck_shape(y0, 2, (int64_t[]){1, 2});
    nb_ck_close(y0, (double[]){3, 4}, 2, 0, 0);
    /* an empty index */
    nb_ck_shape(nb_index_select(m, 1, nb_zeros(NB_SHAPE(0), NB_I64)), 2, (int64_t[]){2, 0});
    free(xv);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_index_select_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *m = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_FAILS(nb_index_select(m, 1, idx_tensor(NB_SHAPE(2), (int64_t[]){0, 3})), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index 3"));
    NB_CK_FAILS(nb_index_select(m, 2, idx_tensor(NB_SHAPE(1), (int64_t[]){0})), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_index_select(m, 0, nb_zeros(NB_SHAPE(1), NB_F64)), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_index_select(m, 0, nb_zeros(NB_SHAPE(1, 1), NB_I64)), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index_select"));
    NB_CK_FAILS(nb_index_select(nb_scalar(1, NB_F64), 0, nb_zeros(NB_SHAPE(1), NB_I64)), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_index_select_grad) {
    nb_scope *s = nb_scope_begin();
    /* by hand: repeated indices accumulate */
    nb_tensor *x = nb_zeros(NB_SHAPE(3, 2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_tensor *y = nb_index_select(x, 0, idx_tensor(NB_SHAPE(3), (int64_t[]){2, 0, 2}));
    NB_CK_OK(nb_backward_with(y, nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6})));
    nb_ck_close(nb_tensor_grad(x), (double[]){3, 4, 0, 0, 6, 8}, 6, 0, 0);
    /* gradchecks along dims 0, 1 and 2 */
    nb_tensor *t = nb_test_randn_grad(NB_SHAPE(4, 3, 2), 3);
    sel_ctx c0 = {0, idx_tensor(NB_SHAPE(5), (int64_t[]){3, 0, 3, 1, 3})};
    nb_ck_gradcheck(f_index_select, &t, 1, &c0);
    sel_ctx c1 = {1, idx_tensor(NB_SHAPE(4), (int64_t[]){2, 2, 0, 2})};
    nb_ck_gradcheck(f_index_select, &t, 1, &c1);
    sel_ctx c2 = {-1, idx_tensor(NB_SHAPE(3), (int64_t[]){1, 1, 1})};
    nb_ck_gradcheck(f_index_select, &t, 1, &c2);
    nb_tensor *t2 = nb_test_randn_grad(NB_SHAPE(5, 4), 4);
    sel_ctx c3 = {1, idx_tensor(NB_SHAPE(6), (int64_t[]){0, 3, 3, 1, 0, 3})};
    nb_ck_gradcheck(f_index_select, &t2, 1, &c3);
    nb_scope_end(s);
}
END_TEST

/* ---- cat / stack ----------------------------------------------------------------------------- */

typedef struct {
    int dim;
} dim_ctx;

static nb_tensor *f_cat(nb_tensor *const *in, int n, void *ctx) {
    return nb_cat(in, n, ((dim_ctx *)ctx)->dim);
}

static nb_tensor *f_stack(nb_tensor *const *in, int n, void *ctx) {
    return nb_stack(in, n, ((dim_ctx *)ctx)->dim);
}

/* reference cat of n [r_i, c] (dim 0) or [r, c_i] (dim 1) matrices */
static void ref_cat2(double *const *xs, const int64_t (*sh)[2], int n, int dim, double *out) {
    int64_t rows = dim == 0 ? 0 : sh[0][0], cols = dim == 1 ? 0 : sh[0][1];
    for (int i = 0; i < n; i++) rows += dim == 0 ? sh[i][0] : 0, cols += dim == 1 ? sh[i][1] : 0;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        for (int64_t r = 0; r < sh[i][0]; r++)
            for (int64_t c = 0; c < sh[i][1]; c++) {
                int64_t orow = dim == 0 ? off + r : r, ocol = dim == 1 ? off + c : c;
                out[orow * cols + ocol] = xs[i][r * sh[i][1] + c];
            }
        off += sh[i][dim];
    }
    (void)rows;
}

START_TEST(test_cat_forward) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(9);
    static const int64_t sh0[3][2] = {{2, 3}, {1, 3}, {4, 3}}, sh1[3][2] = {{2, 1}, {2, 4}, {2, 2}};
    for (int dim = 0; dim < 2; dim++) {
        const int64_t(*sh)[2] = dim == 0 ? sh0 : sh1;
        nb_tensor *ts[3];
        double *xs[3], want[64];
        for (int i = 0; i < 3; i++) ts[i] = nb_randn(2, sh[i], NB_F64, &g), xs[i] = nb_test_values_of(ts[i]);
        ref_cat2(xs, sh, 3, dim, want);
        nb_tensor *c = nb_cat(ts, 3, dim);
        nb_ck_shape(c, 2, dim == 0 ? (int64_t[]){7, 3} : (int64_t[]){2, 7});
        int64_t numel = dim == 0 ? 21 : 14;
        nb_ck_close(c, want, numel, 0, 0);
        nb_ck_close(nb_cat(ts, 3, dim - 2), want, numel, 0, 0); /* dim -2 / -1 */
        for (int i = 0; i < 3; i++) free(xs[i]);
    }
    /* hand values, 1-D; a transposed input; one input alone */
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){3, 4, 5});
    nb_ck_close(nb_cat((nb_tensor *[]){b, a, b}, 3, 0), (double[]){3, 4, 5, 1, 2, 3, 4, 5}, 8, 0, 0);
    nb_tensor *m = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_ck_close(nb_cat((nb_tensor *[]){m, nb_transpose(m, 0, 1)}, 2, -1), (double[]){1, 2, 1, 3, 3, 4, 2, 4}, 8, 0, 0);
    nb_ck_close(nb_cat(&m, 1, 0), (double[]){1, 2, 3, 4}, 4, 0, 0);
    /* an empty piece, int dtype, and seven pieces (more than one node holds) */
    nb_tensor *e = nb_zeros(NB_SHAPE(2, 0), NB_F64);
    nb_ck_close(nb_cat((nb_tensor *[]){e, m, e}, 3, 1), (double[]){1, 2, 3, 4}, 4, 0, 0);
    nb_tensor *ci = nb_cat((nb_tensor *[]){nb_to_dtype(a, NB_I32), nb_to_dtype(b, NB_I32)}, 2, 0);
    ck_assert_int_eq(nb_dtype_of(ci), NB_I32);
    nb_ck_close(ci, (double[]){1, 2, 3, 4, 5}, 5, 0, 0);
    nb_tensor *seven[7];
    double want7[7];
    for (int i = 0; i < 7; i++) seven[i] = nb_full(NB_SHAPE(1), i * 10, NB_F64), want7[i] = i * 10;
    nb_ck_close(nb_cat(seven, 7, 0), want7, 7, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cat_stack_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_zeros(NB_SHAPE(2, 3), NB_F64), *b = nb_zeros(NB_SHAPE(3, 2), NB_F64);
    NB_CK_FAILS(nb_cat((nb_tensor *[]){a, b}, 2, 0), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cat"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[3, 2]"));
    NB_CK_FAILS(nb_cat((nb_tensor *[]){a, nb_zeros(NB_SHAPE(2, 3, 1), NB_F64)}, 2, 0), NB_ERR_SHAPE);
    /* mixed dtypes promote (torch.cat): float64 with float32 gives float64 */
    ck_assert_int_eq(nb_dtype_of(nb_cat((nb_tensor *[]){a, nb_zeros(NB_SHAPE(2, 3), NB_F32)}, 2, 0)), NB_F64);
    NB_CK_FAILS(nb_cat((nb_tensor *[]){a, a}, 2, 2), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cat((nb_tensor *[]){a}, 0, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cat((nb_tensor *[]){nb_scalar(1, NB_F64)}, 1, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cat((nb_tensor *[]){a, NULL}, 2, 0), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_stack((nb_tensor *[]){a, nb_zeros(NB_SHAPE(2, 4), NB_F64)}, 2, 0), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "stack"));
    NB_CK_FAILS(nb_stack((nb_tensor *[]){a, a}, 2, 3), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_stack((nb_tensor *[]){a}, 0, 0), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cat_grad) {
    nb_scope *s = nb_scope_begin();
    dim_ctx d0 = {0}, d1 = {1}, dm = {-1};
    nb_tensor *r[3] = {nb_test_randn_grad(NB_SHAPE(2, 3), 1), nb_test_randn_grad(NB_SHAPE(1, 3), 2),
                       nb_test_randn_grad(NB_SHAPE(3, 3), 3)};
    nb_ck_gradcheck(f_cat, r, 3, &d0);
    nb_tensor *c[3] = {nb_test_randn_grad(NB_SHAPE(2, 2, 1), 4), nb_test_randn_grad(NB_SHAPE(2, 2, 3), 5),
                       nb_test_randn_grad(NB_SHAPE(2, 2, 2), 6)};
    nb_ck_gradcheck(f_cat, c, 3, &dm);
    nb_tensor *m[3] = {nb_test_randn_grad(NB_SHAPE(2, 1, 2), 7), nb_test_randn_grad(NB_SHAPE(2, 3, 2), 8),
                       nb_test_randn_grad(NB_SHAPE(2, 2, 2), 9)};
    nb_ck_gradcheck(f_cat, m, 3, &d1);
    /* one input constant */
    m[1] = nb_randn(NB_SHAPE(2, 3, 2), NB_F64, NULL);
    nb_ck_gradcheck(f_cat, m, 3, &d1);
    /* nine inputs: the node chain, with constants in the middle */
    nb_tensor *many[9];
    for (int i = 0; i < 9; i++)
        many[i] = i == 4 || i == 5 ? nb_randn(NB_SHAPE(2, 1 + i % 3), NB_F64, NULL)
                                   : nb_test_randn_grad(NB_SHAPE(2, 1 + i % 3), (uint64_t)(20 + i));
    nb_ck_gradcheck(f_cat, many, 9, &d1);
    /* by hand: the gradient of each piece is its slice of g */
    nb_tensor *a = nb_zeros(NB_SHAPE(2), NB_F64), *b = nb_zeros(NB_SHAPE(1), NB_F64);
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward_with(nb_cat((nb_tensor *[]){a, b, a}, 3, 0),
                              nb_test_tensor(NB_SHAPE(5), NB_F64, (double[]){1, 2, 3, 4, 5})));
    nb_ck_close(nb_tensor_grad(a), (double[]){5, 7}, 2, 0, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){3}, 1, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_stack) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){5, 6, 7, 8});
    nb_tensor *ab[2] = {a, b};
    nb_tensor *s0 = nb_stack(ab, 2, 0), *s1 = nb_stack(ab, 2, 1), *s2 = nb_stack(ab, 2, -1);
    nb_ck_shape(s0, 3, (int64_t[]){2, 2, 2});
    nb_ck_close(s0, (double[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0, 0);
    nb_ck_close(s1, (double[]){1, 2, 5, 6, 3, 4, 7, 8}, 8, 0, 0);
    nb_ck_close(s2, (double[]){1, 5, 2, 6, 3, 7, 4, 8}, 8, 0, 0);
    nb_ck_shape(nb_stack((nb_tensor *[]){nb_scalar(1, NB_F64), nb_scalar(2, NB_F64)}, 2, 0), 1, (int64_t[]){2});
    dim_ctx d = {1}, dl = {-1};
    nb_tensor *g[3] = {nb_test_randn_grad(NB_SHAPE(2, 3), 1), nb_test_randn_grad(NB_SHAPE(2, 3), 2),
                       nb_test_randn_grad(NB_SHAPE(2, 3), 3)};
    nb_ck_gradcheck(f_stack, g, 3, &d);
    nb_ck_gradcheck(f_stack, g, 3, &dl);
    nb_tensor *g6[6];
    for (int i = 0; i < 6; i++) g6[i] = nb_test_randn_grad(NB_SHAPE(3), (uint64_t)(10 + i));
    nb_ck_gradcheck(f_stack, g6, 6, &d);
    nb_scope_end(s);
}
END_TEST

/* ---- split / chunk ---------------------------------------------------------------------------- */

typedef struct {
    bool chunk;
    int64_t size; /* split_size or chunks */
    int dim;
} split_ctx;

/* sum over pieces i of (i + 1) * sum(piece_i^2): every piece used once */
static nb_tensor *f_split_sum(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    split_ctx *c = ctx;
    nb_tensor *p[16];
    int k = c->chunk ? nb_chunk(in[0], (int)c->size, c->dim, p, 16) : nb_split(in[0], c->size, c->dim, p, 16);
    ck_assert_int_gt(k, 0);
    nb_tensor *total = nb_scalar(0, NB_F64);
    for (int i = 0; i < k; i++) total = nb_add(total, nb_mul_scalar(nb_sum(nb_mul(p[i], p[i]), NULL, 0, false), i + 1));
    return total;
}

START_TEST(test_split_chunk) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 10, 1, NB_F64), NB_SHAPE(5, 2));
    nb_tensor *p[8];
    ck_assert_int_eq(nb_split(x, 2, 0, p, 8), 3);
    nb_ck_shape(p[0], 2, (int64_t[]){2, 2});
    nb_ck_shape(p[2], 2, (int64_t[]){1, 2});
    nb_ck_close(p[1], (double[]){4, 5, 6, 7}, 4, 0, 0);
    nb_ck_close(p[2], (double[]){8, 9}, 2, 0, 0);
    ck_assert_int_eq(nb_split(x, 1, -1, p, 8), 2);
    nb_ck_close(p[1], (double[]){1, 3, 5, 7, 9}, 5, 0, 0);
    ck_assert_int_eq(nb_split(x, 7, 0, p, 8), 1); /* one piece: all of it */
    nb_ck_shape(p[0], 2, (int64_t[]){5, 2});
    /* cap below the count: writes cap pieces, returns the count */
    p[1] = NULL;
    ck_assert_int_eq(nb_split(x, 1, 0, p, 1), 5);
    ck_assert_ptr_null(p[1]);
    nb_ck_close(p[0], (double[]){0, 1}, 2, 0, 0);
    ck_assert_int_eq(nb_split(x, 1, 0, NULL, 0), 5);
    /* chunk as torch.chunk: 5 rows in 3 chunks -> 2, 2, 1; 6 in 4 -> 2, 2, 2 */
    ck_assert_int_eq(nb_chunk(x, 3, 0, p, 8), 3);
    nb_ck_shape(p[2], 2, (int64_t[]){1, 2});
    nb_tensor *y = nb_arange(0, 6, 1, NB_F64);
    ck_assert_int_eq(nb_chunk(y, 4, 0, p, 8), 3);
    nb_ck_close(p[2], (double[]){4, 5}, 2, 0, 0);
    ck_assert_int_eq(nb_chunk(y, 6, 0, p, 8), 6);
    ck_assert_int_eq(nb_chunk(y, 10, 0, p, 8), 6);
    ck_assert_int_eq(nb_chunk(nb_zeros(NB_SHAPE(0), NB_F64), 3, 0, p, 8), 3); /* torch.chunk: 3 empty */
    ck_assert_int_eq(nb_split(nb_zeros(NB_SHAPE(0), NB_F64), 2, 0, p, 8), 1);
    /* pieces are views: writing one shows in x */
    ck_assert_int_eq(nb_split(x, 2, 0, p, 8), 3);
    NB_CK_OK(nb_fill_(p[2], -1));
    nb_ck_close(nb_narrow(x, 0, 4, 1), (double[]){-1, -1}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_split_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(4, 2), NB_F64), *p[4];
    nb_clear_error();
    ck_assert_int_eq(nb_split(x, 0, 0, p, 4), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "split_size 0"));
    nb_clear_error();
    ck_assert_int_eq(nb_split(x, -2, 0, p, 4), -1);
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_split(x, 1, 2, p, 4), -1);
    ck_assert_int_eq(nb_split(x, 1, 0, NULL, 4), -1);
    ck_assert_int_eq(nb_split(nb_scalar(1, NB_F64), 1, 0, p, 4), -1);
    ck_assert_int_eq(nb_split(NULL, 1, 0, p, 4), -1);
    nb_clear_error();
    ck_assert_int_eq(nb_chunk(x, 0, 0, p, 4), -1);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "chunk"));
    ck_assert_int_eq(nb_chunk(x, 2, -3, p, 4), -1);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_split_chunk_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(5, 3), 5);
    split_ctx c[] = {{false, 2, 0}, {false, 1, 1}, {false, 2, -1}, {true, 3, 0}, {true, 2, 1}, {true, 4, 0}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) nb_ck_gradcheck(f_split_sum, &x, 1, &c[i]);
    /* by hand: d/dx of sum_i (i+1) sum(p_i^2) = 2 (i+1) x on piece i */
    nb_tensor *y = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    NB_CK_OK(nb_set_requires_grad(y, true));
    split_ctx c2 = {false, 2, 0};
    NB_CK_OK(nb_backward(f_split_sum(&y, 1, &c2)));
    nb_ck_close(nb_tensor_grad(y), (double[]){2, 4, 12}, 3, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* ---- where / masked_fill ---------------------------------------------------------------------- */

typedef struct {
    nb_tensor *cond;
    double value;
} where_ctx;

static nb_tensor *f_where(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_where(((where_ctx *)ctx)->cond, in[0], in[1]);
}

static nb_tensor *f_masked_fill(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    where_ctx *c = ctx;
    return nb_masked_fill(in[0], c->cond, c->value);
}

START_TEST(test_where_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *c = bool_tensor(NB_SHAPE(2, 3), (bool[]){1, 0, 1, 0, 0, 1});
    nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *b = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){-1, -2, -3, -4, -5, -6});
    nb_ck_close(nb_where(c, a, b), (double[]){1, -2, 3, -4, -5, 6}, 6, 0, 0);
    /* broadcasting: cond [3], a [2, 1], b [] -> [2, 3] */
    nb_tensor *c3 = bool_tensor(NB_SHAPE(3), (bool[]){0, 1, 1});
    nb_tensor *a21 = nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){10, 20});
    nb_tensor *w = nb_where(c3, a21, nb_scalar(-7, NB_F64));
    nb_ck_shape(w, 2, (int64_t[]){2, 3});
    nb_ck_close(w, (double[]){-7, 10, 10, -7, 20, 20}, 6, 0, 0);
    /* cond [2, 1, 1] against [3] and [4, 1]: -> [2, 4, 3], naive reference */
    nb_tensor *cb = bool_tensor(NB_SHAPE(2, 1, 1), (bool[]){1, 0});
    nb_tensor *x3 = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *y41 = nb_test_tensor(NB_SHAPE(4, 1), NB_F64, (double[]){-1, -2, -3, -4});
    nb_tensor *wb = nb_where(cb, x3, y41);
    nb_ck_shape(wb, 3, (int64_t[]){2, 4, 3});
    double want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) want[(i * 4 + j) * 3 + k] = i == 0 ? k + 1 : -(j + 1);
    nb_ck_close(wb, want, 24, 0, 0);
    /* float32, int64 and a transposed operand */
    nb_ck_close(nb_where(c, nb_to_dtype(a, NB_F32), nb_to_dtype(b, NB_F32)), (double[]){1, -2, 3, -4, -5, 6}, 6, 0, 0);
    nb_tensor *wi = nb_where(c, nb_to_dtype(a, NB_I64), nb_to_dtype(b, NB_I64));
    ck_assert_int_eq(nb_dtype_of(wi), NB_I64);
    nb_ck_close(wi, (double[]){1, -2, 3, -4, -5, 6}, 6, 0, 0);
    nb_tensor *at = nb_transpose(nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 4, 2, 5, 3, 6}), 0, 1);
    nb_ck_close(nb_where(c, at, b), (double[]){1, -2, 3, -4, -5, 6}, 6, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_where_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    nb_tensor *c = bool_tensor(NB_SHAPE(3), (bool[]){1, 0, 1});
    NB_CK_FAILS(nb_where(nb_zeros(NB_SHAPE(3), NB_F64), a, a), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "where"));
    ck_assert_int_eq(nb_dtype_of(nb_where(c, a, nb_zeros(NB_SHAPE(2, 3), NB_F32))), NB_F64); /* promotes */
    NB_CK_FAILS(nb_where(c, a, nb_zeros(NB_SHAPE(4), NB_F64)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_where(bool_tensor(NB_SHAPE(2), (bool[]){1, 0}), a, a), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_masked_fill(a, nb_zeros(NB_SHAPE(3), NB_F64), 0), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_masked_fill(nb_zeros(NB_SHAPE(3), NB_F64), nb_zeros(NB_SHAPE(2, 3), NB_BOOL), 0), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "masked_fill"));
    NB_CK_FAILS(nb_masked_fill(a, nb_zeros(NB_SHAPE(2), NB_BOOL), 0), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_where_grad) {
    nb_scope *s = nb_scope_begin();
    /* by hand: g split by the mask, summed over broadcast dims */
    nb_tensor *a = nb_zeros(NB_SHAPE(2, 1), NB_F64), *b = nb_zeros(NB_SHAPE(3), NB_F64);
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    nb_tensor *c = bool_tensor(NB_SHAPE(2, 3), (bool[]){1, 0, 1, 0, 0, 1});
    NB_CK_OK(nb_backward_with(nb_where(c, a, b), nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6})));
    nb_ck_close(nb_tensor_grad(a), (double[]){4, 6}, 2, 0, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){4, 7, 0}, 3, 0, 0);
    /* gradchecks: same shapes, broadcast a and b, broadcast cond */
    where_ctx w1 = {c, 0};
    nb_tensor *in1[2] = {nb_test_randn_grad(NB_SHAPE(2, 3), 1), nb_test_randn_grad(NB_SHAPE(2, 3), 2)};
    nb_ck_gradcheck(f_where, in1, 2, &w1);
    nb_tensor *in2[2] = {nb_test_randn_grad(NB_SHAPE(2, 1), 3), nb_test_randn_grad(NB_SHAPE(3), 4)};
    nb_ck_gradcheck(f_where, in2, 2, &w1);
    where_ctx w3 = {bool_tensor(NB_SHAPE(2, 1, 3), (bool[]){1, 0, 0, 0, 1, 1}), 0};
    nb_tensor *in3[2] = {nb_test_randn_grad(NB_SHAPE(4, 3), 5), nb_test_randn_grad(NB_SHAPE(4, 1), 6)};
    nb_ck_gradcheck(f_where, in3, 2, &w3);
    in3[1] = nb_randn(NB_SHAPE(1), NB_F64, NULL); /* b constant */
    nb_ck_gradcheck(f_where, in3, 2, &w3);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_masked_fill) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *m = bool_tensor(NB_SHAPE(3), (bool[]){0, 1, 0});
    nb_tensor *y = nb_masked_fill(x, m, -INFINITY);
    nb_ck_shape(y, 2, (int64_t[]){2, 3});
    double yv[6];
    nb_test_values(y, yv, 6);
    ck_assert(yv[0] == 1 && isinf(yv[1]) && yv[1] < 0 && yv[2] == 3 && yv[3] == 4 && isinf(yv[4]) && yv[5] == 6);
    nb_tensor *m23 = bool_tensor(NB_SHAPE(2, 3), (bool[]){1, 0, 0, 0, 0, 1});
    nb_ck_close(nb_masked_fill(nb_to_dtype(x, NB_F32), m23, 0.5), (double[]){0.5, 2, 3, 4, 5, 0.5}, 6, 0, 0);
    nb_ck_close(nb_masked_fill(nb_to_dtype(x, NB_I32), m23, 9), (double[]){9, 2, 3, 4, 5, 9}, 6, 0, 0);
    /* gradient: g where the mask is false */
    nb_tensor *t = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_OK(nb_set_requires_grad(t, true));
    NB_CK_OK(nb_backward(nb_sum(nb_masked_fill(t, m, 5), NULL, 0, false)));
    nb_ck_close(nb_tensor_grad(t), (double[]){1, 0, 1, 1, 0, 1}, 6, 0, 0);
    where_ctx c = {m23, -3};
    nb_tensor *in = nb_test_randn_grad(NB_SHAPE(2, 3), 7);
    nb_ck_gradcheck(f_masked_fill, &in, 1, &c);
    where_ctx c2 = {bool_tensor(NB_SHAPE(2, 1, 1), (bool[]){0, 1}), 2};
    nb_tensor *in2 = nb_test_randn_grad(NB_SHAPE(2, 2, 3), 8);
    nb_ck_gradcheck(f_masked_fill, &in2, 1, &c2);
    nb_scope_end(s);
}
END_TEST

/* ---- bmm ------------------------------------------------------------------------------------------ */

/* ---- index_add / index_copy ------------------------------------------------------------------- */

typedef struct {
    int dim;
    nb_tensor *idx;
    double alpha;
    bool copy;
} put_ctx;

static nb_tensor *f_index_put(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    put_ctx *c = ctx;
    return c->copy ? nb_index_copy(in[0], c->dim, c->idx, in[1]) : nb_index_add(in[0], c->dim, c->idx, in[1], c->alpha);
}

START_TEST(test_index_add) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *src = nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *x = nb_ones(NB_SHAPE(3, 2), NB_F64);
    nb_ck_close(nb_index_add(x, 0, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 2, 0}), src, 2),
                (double[]){13, 17, 1, 1, 7, 9}, 6, 0, 0);
    nb_ck_close(x, (double[]){1, 1, 1, 1, 1, 1}, 6, 0, 0); /* out of place */
    /* PyTorch's doc: ones(5, 3).index_add_(0, [0, 4, 2], [[1,2,3],[4,5,6],[7,8,9]]) */
    nb_tensor *t = nb_test_tensor(NB_SHAPE(3, 3), NB_F32, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    nb_tensor *y = nb_index_add(nb_ones(NB_SHAPE(5, 3), NB_F32), 0, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 4, 2}), t, 1);
    nb_ck_close(y, (double[]){2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7}, 15, 0, 0);
    /* along dim -1 of a transposed input, alpha -1 */
    nb_tensor *s23 = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6});
    nb_tensor *c = nb_index_add(nb_transpose(nb_zeros(NB_SHAPE(2, 2), NB_F64), 0, 1), -1,
                                idx_tensor(NB_SHAPE(3), (int64_t[]){1, 1, 0}), s23, -1);
    nb_ck_close(c, (double[]){-3, -3, -6, -9}, 4, 0, 0);
    /* gradients: input and source, repeated indices, both dims */
    put_ctx p0 = {0, idx_tensor(NB_SHAPE(5), (int64_t[]){0, 3, 3, 1, 0}), 0.5, false};
    nb_tensor *in0[2] = {nb_test_randn_grad(NB_SHAPE(4, 3), 1), nb_test_randn_grad(NB_SHAPE(5, 3), 2)};
    nb_ck_gradcheck(f_index_put, in0, 2, &p0);
    put_ctx p1 = {1, idx_tensor(NB_SHAPE(2), (int64_t[]){2, 2}), 1, false};
    nb_tensor *in1[2] = {nb_test_randn_grad(NB_SHAPE(3, 4), 3), nb_test_randn_grad(NB_SHAPE(3, 2), 4)};
    nb_ck_gradcheck(f_index_put, in1, 2, &p1);
    in1[0] = nb_randn(NB_SHAPE(3, 4), NB_F64, NULL); /* source only */
    nb_ck_gradcheck(f_index_put, in1, 2, &p1);
    /* errors */
    nb_tensor *z = nb_zeros(NB_SHAPE(3, 2), NB_F64);
    NB_CK_FAILS(nb_index_add(z, 0, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 5, 1}), src, 1), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index_add"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index 5"));
    NB_CK_FAILS(nb_index_add(z, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){0, 1}), src, 1), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[3, 2]"));
    NB_CK_FAILS(nb_index_add(z, 2, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 1, 2}), src, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_index_add(z, 0, nb_zeros(NB_SHAPE(3), NB_F64), src, 1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_index_add(z, 0, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 1, 2}), nb_to_dtype(src, NB_F32), 1),
                NB_ERR_DTYPE);
    /* integers too (as PyTorch), wrapping on overflow; bool is refused */
    nb_tensor *zi = nb_index_add(nb_to_dtype(z, NB_I64), 0, idx_tensor(NB_SHAPE(3), (int64_t[]){0, 2, 0}),
                                 nb_to_dtype(src, NB_I64), 2);
    ck_assert_int_eq(nb_dtype_of(zi), NB_I64);
    nb_ck_close(zi, (double[]){12, 16, 0, 0, 6, 8}, 6, 0, 0);
    nb_tensor *u8 = nb_index_add(nb_full(NB_SHAPE(2), 250, NB_U8), 0, idx_tensor(NB_SHAPE(2), (int64_t[]){0, 0}),
                                 nb_full(NB_SHAPE(2), 5, NB_U8), 1);
    nb_ck_close(u8, (double[]){4, 250}, 2, 0, 0);
    NB_CK_FAILS(nb_index_add(nb_zeros(NB_SHAPE(3), NB_BOOL), 0, idx_tensor(NB_SHAPE(1), (int64_t[]){0}),
                             nb_zeros(NB_SHAPE(1), NB_BOOL), 1), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_index_copy) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *src = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *x = nb_ones(NB_SHAPE(4, 2), NB_F64);
    nb_ck_close(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){3, 0}), src), (double[]){3, 4, 1, 1, 1, 1, 1, 2},
                8, 0, 0);
    nb_ck_close(x, (double[]){1, 1, 1, 1, 1, 1, 1, 1}, 8, 0, 0);
    /* repeated indices: the last one wins (deterministic here) */
    nb_ck_close(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){1, 1}), src), (double[]){1, 1, 3, 4, 1, 1, 1, 1},
                8, 0, 0);
    /* dim 1, int64 and bool dtypes */
    nb_tensor *ci = nb_index_copy(nb_zeros(NB_SHAPE(2, 3), NB_I64), 1, idx_tensor(NB_SHAPE(2), (int64_t[]){2, 0}),
                                  nb_to_dtype(src, NB_I64));
    ck_assert_int_eq(nb_dtype_of(ci), NB_I64);
    nb_ck_close(ci, (double[]){2, 0, 1, 4, 0, 3}, 6, 0, 0);
    nb_tensor *cb = nb_index_copy(nb_zeros(NB_SHAPE(3), NB_BOOL), 0, idx_tensor(NB_SHAPE(1), (int64_t[]){1}),
                                  nb_ones(NB_SHAPE(1), NB_BOOL));
    nb_ck_close(cb, (double[]){0, 1, 0}, 3, 0, 0);
    /* gradients by hand: input's copied rows get none, source gets g's rows */
    nb_tensor *a = nb_zeros(NB_SHAPE(3, 2), NB_F64), *b = nb_zeros(NB_SHAPE(2, 2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(a, true));
    NB_CK_OK(nb_set_requires_grad(b, true));
    NB_CK_OK(nb_backward_with(nb_index_copy(a, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){2, 0}), b),
                              nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){1, 2, 3, 4, 5, 6})));
    nb_ck_close(nb_tensor_grad(a), (double[]){0, 0, 3, 4, 0, 0}, 6, 0, 0);
    nb_ck_close(nb_tensor_grad(b), (double[]){5, 6, 1, 2}, 4, 0, 0);
    put_ctx p0 = {0, idx_tensor(NB_SHAPE(2), (int64_t[]){3, 1}), 1, true};
    nb_tensor *in0[2] = {nb_test_randn_grad(NB_SHAPE(4, 3), 5), nb_test_randn_grad(NB_SHAPE(2, 3), 6)};
    nb_ck_gradcheck(f_index_put, in0, 2, &p0);
    put_ctx p1 = {-1, idx_tensor(NB_SHAPE(3), (int64_t[]){4, 0, 2}), 1, true};
    nb_tensor *in1[2] = {nb_test_randn_grad(NB_SHAPE(2, 5), 7), nb_test_randn_grad(NB_SHAPE(2, 3), 8)};
    nb_ck_gradcheck(f_index_put, in1, 2, &p1);
    in1[1] = nb_randn(NB_SHAPE(2, 3), NB_F64, NULL); /* input only */
    nb_ck_gradcheck(f_index_put, in1, 2, &p1);
    NB_CK_FAILS(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){4, 0}), src), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "index_copy"));
    NB_CK_FAILS(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){-1, 0}), src), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(3), (int64_t[]){1, 2, 0}), src), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_index_copy(x, 1, idx_tensor(NB_SHAPE(2), (int64_t[]){1, 0}), nb_zeros(NB_SHAPE(3, 2), NB_F64)),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_index_copy(x, 0, idx_tensor(NB_SHAPE(2), (int64_t[]){1, 0}), nb_to_dtype(src, NB_I32)),
                NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

/* One index on an accelerator (a KV cache's write per decode step: CUDA copies without sorting it): the CPU's
 * values along a middle dim in bfloat16 and float32, and a bad index reported through the device's error word
 * on the next synchronisation, naming index_copy, with the destination unchanged. */
START_TEST(test_index_copy_one_index_device) {
    nb_device devs[8];
    int nd = nb_test_accelerators(devs, 8);
    for (int d = 0; d < nd; d++)
        for (int half = 0; half < 2; half++) {
            nb_scope *s = nb_scope_begin();
            nb_dtype dt = half ? NB_BF16 : NB_F32;
            nb_generator g = nb_generator_new(4);
            nb_tensor *x = nb_to_dtype(nb_randn(NB_SHAPE(3, 5, 8), NB_F32, &g), dt);
            nb_tensor *src = nb_to_dtype(nb_randn(NB_SHAPE(3, 1, 8), NB_F32, &g), dt);
            nb_tensor *want = nb_index_copy(x, 1, idx_tensor(NB_SHAPE(1), (int64_t[]){2}), src);
            nb_tensor *xd = nb_to_device(x, devs[d]), *sd = nb_to_device(src, devs[d]);
            nb_tensor *got = nb_index_copy(xd, 1, nb_to_device(idx_tensor(NB_SHAPE(1), (int64_t[]){2}), devs[d]), sd);
            nb_ck_close_to(nb_to_dtype(nb_to_device(got, NB_CPU), NB_F32), nb_to_dtype(want, NB_F32), 0);
            for (int bad = 0; bad < 2; bad++) {
                nb_tensor *xc = nb_clone(xd);
                NB_CK_OK(nb_index_copy_(xc, 1, nb_to_device(idx_tensor(NB_SHAPE(1), (int64_t[]){bad ? -1 : 5}), devs[d]),
                                        sd));
                ck_assert_int_eq(nb_device_synchronize(devs[d]), NB_ERR_INVALID_ARG);
                ck_assert_ptr_nonnull(strstr(nb_last_error(), "index_copy"));
                nb_ck_close_to(nb_to_device(xc, NB_CPU), x, 0);
            }
            nb_scope_end(s);
        }
}
END_TEST

/* ---- one_hot / nonzero / masked_select ------------------------------------------------------------ */

START_TEST(test_one_hot) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = idx_tensor(NB_SHAPE(3), (int64_t[]){0, 2, 1});
    nb_tensor *o = nb_one_hot(t, 3);
    ck_assert_int_eq(nb_dtype_of(o), NB_I64);
    nb_ck_shape(o, 2, (int64_t[]){3, 3});
    nb_ck_close(o, (double[]){1, 0, 0, 0, 0, 1, 0, 1, 0}, 9, 0, 0);
    nb_ck_close(nb_one_hot(t, -1), (double[]){1, 0, 0, 0, 0, 1, 0, 1, 0}, 9, 0, 0);
    nb_ck_shape(nb_one_hot(t, 5), 2, (int64_t[]){3, 5});
    nb_tensor *o2 = nb_one_hot(idx_tensor(NB_SHAPE(2, 2), (int64_t[]){0, 1, 3, 1}), -1);
    nb_ck_shape(o2, 3, (int64_t[]){2, 2, 4});
    nb_ck_close(o2, (double[]){1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0}, 16, 0, 0);
    nb_ck_close(nb_one_hot(nb_full(0, NULL, 2, NB_I64), 4), (double[]){0, 0, 1, 0}, 4, 0, 0);
    nb_ck_shape(nb_one_hot(nb_zeros(NB_SHAPE(0), NB_I64), 5), 2, (int64_t[]){0, 5});
    NB_CK_FAILS(nb_one_hot(idx_tensor(NB_SHAPE(2), (int64_t[]){0, 3}), 3), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "one_hot"));
    NB_CK_FAILS(nb_one_hot(idx_tensor(NB_SHAPE(2), (int64_t[]){-1, 0}), -1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_one_hot(nb_zeros(NB_SHAPE(2), NB_F32), 3), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_one_hot(nb_zeros(NB_SHAPE(0), NB_I64), -1), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_one_hot(t, -2), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_nonzero) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *m = nb_test_tensor(NB_SHAPE(3, 2), NB_F64, (double[]){0, 1, 2, 0, 0, 3});
    nb_tensor *nz = nb_nonzero(m);
    ck_assert_int_eq(nb_dtype_of(nz), NB_I64);
    nb_ck_shape(nz, 2, (int64_t[]){3, 2});
    nb_ck_close(nz, (double[]){0, 1, 1, 0, 2, 1}, 6, 0, 0);
    nb_ck_close(nb_nonzero(nb_transpose(m, 0, 1)), (double[]){0, 1, 1, 0, 1, 2}, 6, 0, 0); /* C order of the view */
    nb_ck_close(nb_nonzero(nb_to_dtype(m, NB_I32)), (double[]){0, 1, 1, 0, 2, 1}, 6, 0, 0);
    nb_tensor *f = nb_test_tensor(NB_SHAPE(4), NB_F32, (double[]){-0.0, NAN, 0, 1}); /* NaN counts, -0 does not */
    nb_tensor *nf = nb_nonzero(f);
    nb_ck_shape(nf, 2, (int64_t[]){2, 1});
    nb_ck_close(nf, (double[]){1, 3}, 2, 0, 0);
    nb_ck_close(nb_nonzero(bool_tensor(NB_SHAPE(3), (bool[]){1, 0, 1})), (double[]){0, 2}, 2, 0, 0);
    nb_ck_shape(nb_nonzero(nb_scalar(5, NB_F64)), 2, (int64_t[]){1, 0});
    nb_ck_shape(nb_nonzero(nb_scalar(0, NB_F64)), 2, (int64_t[]){0, 0});
    nb_ck_shape(nb_nonzero(nb_zeros(NB_SHAPE(2, 3), NB_U8)), 2, (int64_t[]){0, 2});
    nb_ck_shape(nb_nonzero(nb_zeros(NB_SHAPE(0, 3), NB_F64)), 2, (int64_t[]){0, 2});
    nb_scope_end(s);
}
END_TEST

/* nonzero of a large random mask (several blocks) at a thread count, as host int64. */
static int64_t nonzero_large(int threads, int64_t *out, int64_t cap) {
    nb_set_num_threads(threads);
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_rand(NB_SHAPE(300, 1000), NB_F32, &g);
    nb_tensor *mask = nb_gt(x, nb_scalar(0.7, NB_F32));
    nb_tensor *nz = nb_nonzero(nb_transpose(mask, 0, 1));
    NB_CK_NOTNULL(nz);
    int64_t n = nb_size(nz, 0);
    ck_assert_int_le(n * 2, cap);
    NB_CK_OK(nb_to_host(nz, out, sizeof(int64_t) * (size_t)(n * 2)));
    nb_scope_end(s);
    return n;
}

START_TEST(test_nonzero_large) {
    int prev = nb_get_num_threads();
    int64_t cap = 2 * 300 * 1000;
    int64_t *a = malloc(sizeof(int64_t) * (size_t)cap), *b = malloc(sizeof(int64_t) * (size_t)cap);
    ck_assert(a && b);
    int64_t na = nonzero_large(1, a, cap), nb = nonzero_large(2, b, cap);
    ck_assert_int_eq(na, nb);
    ck_assert(na > 80000 && na < 100000);
    ck_assert_int_eq(memcmp(a, b, sizeof(int64_t) * (size_t)(na * 2)), 0);
    for (int64_t i = 1; i < na; i++) /* strictly increasing C-order positions */
        ck_assert(a[2 * i] * 300 + a[2 * i + 1] > a[2 * i - 2] * 300 + a[2 * i - 1]);
    free(a), free(b);
    nb_set_num_threads(prev);
}
END_TEST

typedef struct {
    nb_tensor *mask;
} msel_ctx;

static nb_tensor *f_masked_select(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_masked_select(in[0], ((msel_ctx *)ctx)->mask);
}

START_TEST(test_masked_select) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){1, 2, 3, 4});
    nb_tensor *r = nb_masked_select(t, bool_tensor(NB_SHAPE(2, 2), (bool[]){1, 0, 0, 1}));
    nb_ck_shape(r, 1, (int64_t[]){2});
    nb_ck_close(r, (double[]){1, 4}, 2, 0, 0);
    nb_ck_close(nb_masked_select(t, bool_tensor(NB_SHAPE(2), (bool[]){0, 1})), (double[]){2, 4}, 2, 0, 0);
    nb_tensor *v = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    nb_tensor *m22 = bool_tensor(NB_SHAPE(2, 2), (bool[]){1, 1, 0, 1});
    nb_ck_close(nb_masked_select(v, m22), (double[]){1, 2, 2}, 3, 0, 0);
    nb_ck_close(nb_masked_select(nb_to_dtype(t, NB_I32), m22), (double[]){1, 2, 4}, 3, 0, 0);
    nb_ck_shape(nb_masked_select(t, nb_zeros(NB_SHAPE(2, 2), NB_BOOL)), 1, (int64_t[]){0});
    /* gradient: g scattered into zeros, summed over the broadcast dim */
    nb_tensor *w = nb_zeros(NB_SHAPE(2), NB_F64);
    NB_CK_OK(nb_set_requires_grad(w, true));
    NB_CK_OK(nb_backward_with(nb_masked_select(w, m22), nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(nb_tensor_grad(w), (double[]){1, 5}, 2, 0, 0);
    msel_ctx c = {bool_tensor(NB_SHAPE(3, 4), (bool[]){1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0})};
    nb_tensor *in = nb_test_randn_grad(NB_SHAPE(3, 4), 9);
    nb_ck_gradcheck(f_masked_select, &in, 1, &c);
    nb_tensor *in2 = nb_test_randn_grad(NB_SHAPE(4), 10);
    nb_ck_gradcheck(f_masked_select, &in2, 1, &c);
    NB_CK_FAILS(nb_masked_select(t, nb_zeros(NB_SHAPE(2, 2), NB_U8)), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "masked_select"));
    NB_CK_FAILS(nb_masked_select(t, nb_zeros(NB_SHAPE(3), NB_BOOL)), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_index(void) {
    Suite *s = suite_create("ops_index");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_embedding_forward);
    tcase_add_test(f, test_embedding_errors);
    tcase_add_test(f, test_index_select_forward);
    tcase_add_test(f, test_index_select_errors);
    tcase_add_test(f, test_cat_forward);
    tcase_add_test(f, test_cat_stack_errors);
    tcase_add_test(f, test_split_chunk);
    tcase_add_test(f, test_split_errors);
    tcase_add_test(f, test_where_forward);
    tcase_add_test(f, test_where_errors);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_embedding_grad_by_hand);
    tcase_add_test(g, test_embedding_gradcheck);
    tcase_add_test(g, test_embedding_deterministic);
    tcase_add_test(g, test_index_select_grad);
    tcase_add_test(g, test_cat_grad);
    tcase_add_test(g, test_stack);
    tcase_add_test(g, test_split_chunk_grad);
    tcase_add_test(g, test_where_grad);
    tcase_add_test(g, test_masked_fill);
    tcase_add_test(g, test_index_add);
    tcase_add_test(g, test_index_copy);
    tcase_add_test(g, test_index_copy_one_index_device);
    tcase_add_test(g, test_one_hot);
    tcase_add_test(g, test_nonzero);
    tcase_add_test(g, test_nonzero_large);
    tcase_add_test(g, test_masked_select);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
