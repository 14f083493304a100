/* test_ops_fold.c - unfold / fold (im2col / col2im), embedding_bag and
 * affine_grid: values by hand, fold(unfold(x)) = x times each pixel's
 * block count, the identity transform's grid, and the errors. Against
 * PyTorch: tests/torch_diff; float64 gradchecks: the op harness. */
#include <math.h>
#include <stdlib.h>

#include "nb_test.h"

START_TEST(test_unfold_fold) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 1, 3, 3), NB_F64, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    nb_fold_options o = {.kernel = {2, 2}};
    /* rows: the kernel's 4 taps; columns: the 4 blocks (top-left corners 1, 2, 4, 5) */
    nb_ck_close(nb_im2col(x, o), (double[]){1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}, 16, 0, 0);
    /* fold(unfold(x)): each pixel times the number of blocks covering it */
    nb_ck_close(nb_col2im(nb_im2col(x, o), 3, 3, o), (double[]){1, 4, 3, 8, 20, 12, 7, 16, 9}, 9, 0, 0);
    NB_CK_FAILS(nb_im2col(x, (nb_fold_options){.kernel = {4, 4}}), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_col2im(nb_ones(NB_SHAPE(1, 4, 3), NB_F64), 3, 3, o), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_im2col(x, (nb_fold_options){0}), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_embedding_bag_and_grid) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_test_tensor(NB_SHAPE(4, 2), NB_F64, (double[]){0, 1, 10, 11, 20, 21, 30, 31});
    nb_tensor *idx = nb_from_data((int64_t[]){1, 3, 2, 0}, NB_SHAPE(4), NB_I64);
    nb_tensor *off = nb_from_data((int64_t[]){0, 2, 2}, NB_SHAPE(3), NB_I64); /* bags {1, 3}, {}, {2, 0} */
    nb_ck_close(nb_embedding_bag(idx, w, off, (nb_embedding_bag_options){.mode = NB_BAG_SUM}),
                (double[]){40, 42, 0, 0, 20, 22}, 6, 0, 0);
    nb_ck_close(nb_embedding_bag(idx, w, off, (nb_embedding_bag_options){0}), (double[]){20, 21, 0, 0, 10, 11}, 6, 0, 0);
    nb_ck_close(nb_embedding_bag(idx, w, off, (nb_embedding_bag_options){.mode = NB_BAG_MAX}),
                (double[]){30, 31, 0, 0, 20, 21}, 6, 0, 0);
    /* padding_idx 3 leaves bag 0 with {1} */
    nb_ck_close(nb_embedding_bag(idx, w, off, (nb_embedding_bag_options){.has_padding_idx = true, .padding_idx = 3}),
                (double[]){10, 11, 0, 0, 10, 11}, 6, 0, 0);
    NB_CK_FAILS(nb_embedding_bag(idx, w, off, (nb_embedding_bag_options){.per_sample_weights = w}), NB_ERR_INVALID_ARG);
    /* the identity transform gives the base grid: pixel centres (2 j + 1) / W - 1 */
    nb_tensor *theta = nb_test_tensor(NB_SHAPE(1, 2, 3), NB_F64, (double[]){1, 0, 0, 0, 1, 0});
    nb_ck_close(nb_affine_grid(theta, 1, 1, 2, false), (double[]){-0.5, 0, 0.5, 0}, 4, 1e-15, 0);
    nb_ck_close(nb_affine_grid(theta, 1, 2, 1, true), (double[]){0, -1, 0, 1}, 4, 1e-15, 0);
    NB_CK_FAILS(nb_affine_grid(theta, 2, 2, 2, false), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_fold(void) {
    Suite *s = suite_create("ops_fold");
    TCase *t = tcase_create("fold");
    tcase_add_test(t, test_unfold_fold);
    tcase_add_test(t, test_embedding_bag_and_grid);
    suite_add_tcase(s, t);
    return s;
}
