/* op_cases_shape.c - op harness cases of the view, shape, index and gather
 * families, on [2, 3, 4]-sized inputs. Scatters that assign use fixed
 * indices without repeats (a repeated destination keeps one source, which
 * finite differences cannot see); reductions and gathers take random ones. */
#include "op_harness.h"

#define V1(ID, LABEL, FN, ...) {.op = NB_OP_##ID, .label = LABEL, .fn = FN, .n_in = 1, .in = {IN(K_REAL, __VA_ARGS__)}}

/* ---- views ---- */
static nb_tensor *reshape(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_reshape(x[0], NB_SHAPE(4, -1)); }
static nb_tensor *reshape_t(nb_tensor *const *x, const nb_op_case *c) { /* a copy: the strides do not allow a view */
    (void)c;
    return nb_reshape(nb_transpose(x[0], 0, 2), NB_SHAPE(-1));
}
static nb_tensor *view(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_view(x[0], NB_SHAPE(6, 4)); }
static nb_tensor *permute(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_permute(x[0], (const int[]){2, 0, 1}); }
static nb_tensor *transpose(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_transpose(x[0], 0, 2); }
static nb_tensor *narrow(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_narrow(x[0], 1, 1, 2); }
static nb_tensor *slice(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_slice(x[0], 2, 0, 4, 2); }
static nb_tensor *expand(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_expand(x[0], NB_SHAPE(2, 3, 4)); }
static nb_tensor *unsqueeze(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_unsqueeze(x[0], 1); }
static nb_tensor *squeeze(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_squeeze(x[0], 1); }
static nb_tensor *flatten(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_flatten(x[0], 0, 1); }
static nb_tensor *contiguous(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_contiguous(nb_transpose(x[0], 1, 2)); }
static nb_tensor *clone(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_clone(x[0]); }
static nb_tensor *select_(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_select(x[0], 1, -1); }
static nb_tensor *diagonal(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_diagonal(x[0], 1, 1, 2); }
static nb_tensor *unfold(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_unfold(x[0], 2, 2, 1); }
static nb_tensor *movedim(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_movedim(x[0], (const int[]){0}, (const int[]){2}, 1);
}
static nb_tensor *broadcast_to(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_broadcast_to(x[0], NB_SHAPE(2, 3, 4)); }
static nb_tensor *diag_embed(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_diag_embed(x[0], 1, -2, -1); }

/* ---- shape ops ---- */
static nb_tensor *flip(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_flip(x[0], (const int[]){0, 2}, 2); }
static nb_tensor *rot90(nb_tensor *const *x, const nb_op_case *c) { return nb_rot90(x[0], (int64_t)c->p[0], 0, 2); }
static nb_tensor *roll(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_roll(x[0], (const int64_t[]){1, -3}, 2, (const int[]){0, 2}, 2);
}
static nb_tensor *repeat(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_repeat(x[0], (const int64_t[]){2, 1, 2}, 3); }
static nb_tensor *tile(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_tile(x[0], (const int64_t[]){2}, 1); }
static nb_tensor *pad(nb_tensor *const *x, const nb_op_case *c) {
    return nb_pad(x[0], (const int64_t[]){1, 2, 2, 1}, 4, (nb_pad_mode)c->p[0], 0.25);
}
static nb_tensor *pad_crop(nb_tensor *const *x, const nb_op_case *c) {
    return nb_pad(x[0], (const int64_t[]){-1, 2}, 2, (nb_pad_mode)c->p[0], 0.25);
}
static nb_tensor *tril(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_tril(x[0], 0); }
static nb_tensor *triu(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_triu(x[0], 1); }
static nb_tensor *meshgrid(nb_tensor *const *x, const nb_op_case *c) {
    nb_tensor *o[2];
    if (nb_meshgrid(x, 2, (nb_meshgrid_indexing)c->p[0], o) != NB_OK) return NULL;
    return nb_stack(o, 2, 0);
}

/* ---- indexing, joining ---- */
static nb_tensor *embedding(nb_tensor *const *x, const nb_op_case *c) { return nb_embedding(x[0], x[1], (int64_t)c->p[0]); }
static nb_tensor *index_select(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_index_select(x[0], 1, x[1]); }
static nb_tensor *cat(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_cat(x, 3, 1); }
static nb_tensor *cat5(nb_tensor *const *x, const nb_op_case *c) { /* more inputs than a tape node holds */
    (void)c;
    nb_tensor *v[6] = {x[0], x[1], x[0], x[1], x[1], x[0]};
    return nb_cat(v, 6, 0);
}
static nb_tensor *stack(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_stack(x, 2, 1); }
static nb_tensor *split(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *o[4];
    return nb_split(x[0], 2, 2, o, 4) == 2 ? nb_cat((nb_tensor *[]){o[1], o[0]}, 2, 2) : NULL;
}
static nb_tensor *chunk(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *o[4];
    return nb_chunk(x[0], 3, 1, o, 4) == 3 ? nb_cat((nb_tensor *[]){o[2], o[0]}, 2, 1) : NULL;
}
static nb_tensor *split_with_sizes(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *o[4];
    return nb_split_with_sizes(x[0], (const int64_t[]){1, 0, 3}, 3, 2, o, 4) == 3 ? nb_cat((nb_tensor *[]){o[2], o[0]}, 2, 2)
                                                                                 : NULL;
}
static nb_tensor *unbind(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    nb_tensor *o[4];
    return nb_unbind(x[0], 1, o, 4) == 3 ? nb_stack((nb_tensor *[]){o[2], o[0]}, 2, 0) : NULL;
}
static nb_tensor *where(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_where(x[0], x[1], x[2]); }
static nb_tensor *masked_fill(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_masked_fill(x[0], x[1], 0.5); }
static nb_tensor *index_add(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_index_add(x[0], 0, x[1], x[2], 1.5); }
/* a fixed index [2, 0] (no repeats) on x's device */
static nb_tensor *fixed_index2(const nb_tensor *like) {
    return nb_from_data_on((const int64_t[]){2, 0}, NB_SHAPE(2), NB_I64, nb_device_of(like));
}
static nb_tensor *index_copy(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_index_copy(x[0], 0, fixed_index2(x[0]), x[1]);
}
static nb_tensor *one_hot(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_one_hot(x[0], 4); }
static nb_tensor *nonzero(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_nonzero(nb_mul(x[0], nb_to_dtype(x[1], nb_dtype_of(x[0]))));
}
static nb_tensor *masked_select(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_masked_select(x[0], x[1]); }

/* ---- gather, scatter ---- */
static nb_tensor *scatter_index(const nb_tensor *like) { /* [3, 2] into a dim of 4, no repeats per row */
    return nb_from_data_on((const int64_t[]){0, 2, 1, 3, 3, 0}, NB_SHAPE(3, 2), NB_I64, nb_device_of(like));
}
static nb_tensor *gather(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_gather(x[0], 1, x[1]); }
static nb_tensor *scatter(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_scatter(x[0], 1, scatter_index(x[0]), x[1]); }
static nb_tensor *scatter_value(nb_tensor *const *x, const nb_op_case *c) {
    (void)c;
    return nb_scatter_value(x[0], 1, scatter_index(x[0]), -0.75);
}
static nb_tensor *scatter_add(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_scatter_add(x[0], 1, x[1], x[2]); }
static const char *const reduces[] = {"sum", "prod", "mean", "amax", "amin"};
static nb_tensor *scatter_reduce(nb_tensor *const *x, const nb_op_case *c) {
    return nb_scatter_reduce(x[0], 1, x[1], x[2], reduces[(int)c->p[0]], c->p[1] != 0);
}
static nb_tensor *take_along_dim(nb_tensor *const *x, const nb_op_case *c) { (void)c; return nb_take_along_dim(x[0], x[1], 1); }

#define SR(MODE, INCL) \
    {.op = NB_OP_SCATTER_REDUCE, .label = "scatter_reduce " #MODE " include_self " #INCL, .fn = scatter_reduce, .n_in = 3, \
     .in = {IN(K_AWAY0, 3, 4), IDX(0, 4, 3, 3), IN(K_AWAY0, 3, 3)}, .p = {MODE, INCL}}

static const nb_op_case cases[] = {
    V1(RESHAPE, "reshape [4, -1]", reshape, 2, 3, 4),
    V1(RESHAPE, "reshape of a transposed view (a copy)", reshape_t, 2, 3, 4),
    V1(VIEW, "view [6, 4]", view, 2, 3, 4),
    V1(PERMUTE, "permute 2, 0, 1", permute, 2, 3, 4),
    V1(TRANSPOSE, "transpose 0, 2", transpose, 2, 3, 4),
    V1(NARROW, "narrow dim 1 from 1 length 2", narrow, 2, 3, 4),
    V1(SLICE, "slice dim 2 ::2", slice, 2, 3, 4),
    V1(EXPAND, "expand [2, 1, 4] to [2, 3, 4]", expand, 2, 1, 4),
    V1(UNSQUEEZE, "unsqueeze 1", unsqueeze, 2, 3),
    V1(SQUEEZE, "squeeze 1", squeeze, 2, 1, 4),
    V1(FLATTEN, "flatten 0..1", flatten, 2, 3, 4),
    V1(CONTIGUOUS, "contiguous of a transposed view", contiguous, 2, 3, 4),
    V1(CLONE, "clone", clone, 2, 3, 4),
    V1(SELECT, "select dim 1 index -1", select_, 2, 3, 4),
    V1(DIAGONAL, "diagonal offset 1 of dims 1, 2", diagonal, 2, 3, 4),
    V1(UNFOLD, "unfold dim 2 size 2 step 1 (overlapping)", unfold, 2, 3, 4),
    V1(MOVEDIM, "movedim 0 to 2", movedim, 2, 3, 4),
    V1(BROADCAST_TO, "broadcast_to [2, 3, 4]", broadcast_to, 3, 1),
    V1(DIAG_EMBED, "diag_embed offset 1", diag_embed, 2, 3),
    V1(FLIP, "flip dims 0, 2", flip, 2, 3, 4),
    V1(ROLL, "roll (1, -3) on dims (0, 2)", roll, 2, 3, 4),
    {.op = NB_OP_ROT90, .label = "rot90 k 1 dims 0, 2", .fn = rot90, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {1}},
    {.op = NB_OP_ROT90, .label = "rot90 k -2 dims 0, 2", .fn = rot90, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {-2}},
    {.op = NB_OP_ROT90, .label = "rot90 k 3 dims 0, 2", .fn = rot90, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {3}},
    V1(REPEAT, "repeat (2, 1, 2)", repeat, 2, 3),
    V1(TILE, "tile (2)", tile, 2, 3),
    {.op = NB_OP_PAD, .label = "pad constant", .fn = pad, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {NB_PAD_CONSTANT}},
    {.op = NB_OP_PAD, .label = "pad reflect", .fn = pad, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {NB_PAD_REFLECT}},
    {.op = NB_OP_PAD, .label = "pad replicate", .fn = pad, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {NB_PAD_REPLICATE}},
    {.op = NB_OP_PAD, .label = "pad circular", .fn = pad, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)}, .p = {NB_PAD_CIRCULAR}},
    {.op = NB_OP_PAD, .label = "pad constant cropping", .fn = pad_crop, .n_in = 1, .in = {IN(K_REAL, 2, 3, 4)},
     .p = {NB_PAD_CONSTANT}},
    V1(TRIL, "tril 0", tril, 2, 3, 4),
    V1(TRIU, "triu 1", triu, 3, 4),
    {.op = NB_OP_MESHGRID, .label = "meshgrid ij", .fn = meshgrid, .n_in = 2, .in = {IN(K_REAL, 3), IN(K_REAL, 3)},
     .p = {NB_MESHGRID_IJ}},
    {.op = NB_OP_MESHGRID, .label = "meshgrid xy", .fn = meshgrid, .n_in = 2, .in = {IN(K_REAL, 3), IN(K_REAL, 3)},
     .p = {NB_MESHGRID_XY}},
    {.op = NB_OP_EMBEDDING, .label = "embedding", .fn = embedding, .n_in = 2, .in = {IDX(0, 5, 2, 3), IN(K_REAL, 5, 4)},
     .p = {(double)NB_NO_PADDING_IDX}},
    /* the padding row gets no gradient by definition, which finite differences see */
    {.op = NB_OP_EMBEDDING, .label = "embedding padding_idx 1", .fn = embedding, .n_in = 2,
     .in = {IDX(0, 5, 2, 3), IN(K_REAL, 5, 4)}, .p = {1}, .flags = C_NOGC},
    /* a table larger than the index: CUDA zeroes it and sums only the hit rows */
    {.op = NB_OP_EMBEDDING, .label = "embedding, table of 11 rows, padding_idx 1", .fn = embedding, .n_in = 2,
     .in = {IDX(0, 11, 2, 2), IN(K_REAL, 11, 4)}, .p = {1}, .flags = C_NOGC},
    {.op = NB_OP_INDEX_SELECT, .label = "index_select dim 1, repeats", .fn = index_select, .n_in = 2,
     .in = {IN(K_REAL, 2, 3, 4), IDX(0, 3, 5)}},
    {.op = NB_OP_CAT, .label = "cat dim 1", .fn = cat, .n_in = 3, .in = {IN(K_REAL, 2, 1, 4), IN(K_REAL, 2, 3, 4), IN(K_REAL, 2, 2, 4)}},
    {.op = NB_OP_CAT, .label = "cat of 6 along dim 0", .fn = cat5, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 1, 3)}},
    {.op = NB_OP_STACK, .label = "stack dim 1", .fn = stack, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_REAL, 2, 3)}},
    V1(SPLIT, "split 2 along dim 2", split, 2, 3, 4),
    V1(CHUNK, "chunk 3 along dim 1", chunk, 2, 3, 4),
    V1(SPLIT_WITH_SIZES, "split_with_sizes (1, 0, 3) along dim 2", split_with_sizes, 2, 3, 4),
    V1(UNBIND, "unbind dim 1", unbind, 2, 3, 4),
    {.op = NB_OP_WHERE, .label = "where, broadcast", .fn = where, .n_in = 3, .in = {IN(K_BOOL, 2, 3), IN(K_REAL, 2, 3), IN(K_REAL, 3)}},
    {.op = NB_OP_MASKED_FILL, .label = "masked_fill 0.5", .fn = masked_fill, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_BOOL, 3)}},
    {.op = NB_OP_INDEX_ADD, .label = "index_add dim 0 alpha 1.5, repeats", .fn = index_add, .n_in = 3,
     .in = {IN(K_REAL, 4, 3), IDX(0, 4, 5), IN(K_REAL, 5, 3)}},
    {.op = NB_OP_INDEX_ADD, .label = "index_add dim 0 alpha 1.5, table of 9 rows", .fn = index_add, .n_in = 3,
     .in = {IN(K_REAL, 9, 3), IDX(0, 9, 3), IN(K_REAL, 3, 3)}},
    {.op = NB_OP_INDEX_COPY, .label = "index_copy dim 0", .fn = index_copy, .n_in = 2, .in = {IN(K_REAL, 4, 3), IN(K_REAL, 2, 3)}},
    {.op = NB_OP_ONE_HOT, .label = "one_hot 4", .fn = one_hot, .n_in = 1, .in = {IDX(0, 4, 5)}},
    {.op = NB_OP_NONZERO, .label = "nonzero", .fn = nonzero, .n_in = 2, .in = {IN(K_REAL, 2, 3), IN(K_BOOL, 2, 3)}},
    {.op = NB_OP_MASKED_SELECT, .label = "masked_select, broadcast", .fn = masked_select, .n_in = 2,
     .in = {IN(K_REAL, 2, 3), IN(K_BOOL, 3)}},
    {.op = NB_OP_GATHER, .label = "gather dim 1", .fn = gather, .n_in = 2, .in = {IN(K_REAL, 3, 4), IDX(0, 4, 3, 5)}},
    {.op = NB_OP_SCATTER, .label = "scatter dim 1", .fn = scatter, .n_in = 2, .in = {IN(K_REAL, 3, 4), IN(K_REAL, 3, 2)}},
    {.op = NB_OP_SCATTER_VALUE, .label = "scatter value dim 1", .fn = scatter_value, .n_in = 1, .in = {IN(K_REAL, 3, 4)}},
    {.op = NB_OP_SCATTER_ADD, .label = "scatter_add dim 1, repeats", .fn = scatter_add, .n_in = 3,
     .in = {IN(K_REAL, 3, 4), IDX(0, 4, 3, 3), IN(K_REAL, 3, 3)}},
    SR(0, 1), SR(1, 1), SR(2, 1), SR(3, 1), SR(4, 0), SR(2, 0),
    {.op = NB_OP_TAKE_ALONG_DIM, .label = "take_along_dim 1", .fn = take_along_dim, .n_in = 2,
     .in = {IN(K_REAL, 3, 4), IDX(0, 4, 3, 2)}},
};

const nb_case_table nb_cases_shape = {cases, (int)(sizeof cases / sizeof cases[0])};
