/* test_option_defaults.c - a zero-initialised options struct (or a 0
 * argument documented so) gives PyTorch's default call, and NB_ZERO (or the
 * documented sentinel) an actual 0, for the options whose PyTorch default
 * is not zero: cross-entropy's ignore_index, SGD's lr, gradcheck's
 * tolerances, TransformerEncoderLayer's dropout and layer_norm_eps,
 * BatchNorm's and LayerNorm's eps and momentum, DataLoader's batch_size. */
#include <math.h>

#include "nb_test.h"
#include "suites.h"

static double item(nb_tensor *t) {
    NB_CK_NOTNULL(t);
    return nb_item(t);
}

START_TEST(test_cross_entropy_zeroed_is_default) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(11);
    nb_tensor *x = nb_randn(NB_SHAPE(4, 3), NB_F64, NULL);
    nb_tensor *t = nb_from_data((int64_t[]){0, 2, 0, 1}, NB_SHAPE(4), NB_I64);
    nb_cross_entropy_options dflt = NB_CROSS_ENTROPY_DEFAULTS;
    /* {0} is F.cross_entropy's defaults: class 0 counts (ignore_index -100) */
    ck_assert(item(nb_cross_entropy_ex(x, t, (nb_cross_entropy_options){0})) == item(nb_cross_entropy(x, t)));
    dflt.label_smoothing = 0.1;
    double want = item(nb_cross_entropy_ex(x, t, dflt));
    ck_assert(item(nb_cross_entropy_ex(x, t, (nb_cross_entropy_options){.label_smoothing = 0.1})) == want);
    /* NB_IGNORE_CLASS_0 ignores class 0: the mean of rows 1 and 3 alone */
    nb_tensor *rows = nb_cross_entropy_ex(x, t, (nb_cross_entropy_options){.reduction = NB_REDUCTION_NONE});
    NB_CK_NOTNULL(rows);
    double r[4];
    NB_CK_OK(nb_to_host(rows, r, sizeof r));
    double got = item(nb_cross_entropy_ex(x, t, (nb_cross_entropy_options){.ignore_index = NB_IGNORE_CLASS_0}));
    ck_assert_double_eq_tol(got, (r[1] + r[3]) / 2, 1e-15);
    ck_assert(item(nb_nll_loss(nb_log_softmax(x, 1), t, (nb_cross_entropy_options){0})) ==
              item(nb_nll_loss(nb_log_softmax(x, 1), t, NB_CROSS_ENTROPY_DEFAULTS)));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_sgd_lr_default) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *p = nb_ones(NB_SHAPE(2), NB_F32);
    NB_CK_OK(nb_set_requires_grad(p, true));
    nb_optimizer *o = nb_sgd_params(&p, 1, (nb_sgd_options){0}); /* torch.optim.SGD(params): lr 1e-3 */
    NB_CK_NOTNULL(o);
    ck_assert(nb_optimizer_get_lr(o) == 1e-3);
    nb_optimizer_free(o);
    o = nb_sgd_params(&p, 1, (nb_sgd_options){.lr = NB_ZERO});
    NB_CK_NOTNULL(o);
    ck_assert(nb_optimizer_get_lr(o) == 0);
    nb_optimizer_free(o);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *square(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_mul(in[0], in[0]);
}

START_TEST(test_gradcheck_zeroed_is_default) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((double[]){0.5, -1.25, 2}, NB_SHAPE(3), NB_F64);
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_gradcheck(square, &x, 1, NULL, &(nb_gradcheck_options){0})); /* eps 0 would give 0/0 */
    NB_CK_OK(nb_gradgradcheck(square, &x, 1, NULL, &(nb_gradcheck_options){0}));
    nb_scope_end(s);
}
END_TEST

/* The encoder layer's train-mode output from seed 5. */
static nb_tensor *encoder_out(nb_encoder_layer_options o, nb_tensor *x) {
    nb_manual_seed(5);
    nb_module *m = nb_nn_transformer_encoder_layer(o);
    NB_CK_NOTNULL(m);
    nb_tensor *y = nb_forward(m, x);
    NB_CK_NOTNULL(y);
    nb_retain(y);
    nb_module_free(m);
    return y;
}

START_TEST(test_encoder_layer_zeroed_is_default) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(6);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 5, 8), NB_F32, NULL);
    nb_encoder_layer_options zero = {.d_model = 8, .nhead = 2}, dflt = NB_ENCODER_LAYER_OPTIONS(8, 2);
    nb_tensor *a = encoder_out(zero, x), *b = encoder_out(dflt, x); /* dropout 0.1 in both */
    ck_assert(item(nb_sum(nb_ne(a, b), NULL, 0, false)) == 0);
    zero.dropout = NB_ZERO, dflt.dropout = 0.1;
    nb_tensor *c = encoder_out(zero, x); /* no dropout: another output */
    ck_assert(item(nb_sum(nb_ne(a, c), NULL, 0, false)) > 0);
    nb_release(a), nb_release(b), nb_release(c);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_norm_eps_and_momentum) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((float[]){1, 2, 3, 5}, NB_SHAPE(4, 1), NB_F32);
    /* momentum NB_ZERO: frozen running statistics; 0: PyTorch's 0.1 */
    nb_module *frozen = nb_nn_batch_norm1d(1, 0, NB_ZERO), *dflt = nb_nn_batch_norm1d(1, 0, 0);
    NB_CK_NOTNULL(nb_forward(frozen, x));
    NB_CK_NOTNULL(nb_forward(dflt, x));
    ck_assert(item(nb_module_get(frozen, "running_mean")) == 0);
    ck_assert_double_eq_tol(item(nb_module_get(dflt, "running_mean")), 0.1 * 2.75, 1e-6);
    nb_module_free(frozen), nb_module_free(dflt);
    /* LayerNorm eps NB_ZERO: exactly x normalised by its own std, no eps */
    int64_t one = 2;
    nb_module *ln = nb_nn_layer_norm_ex(1, &one, NB_ZERO, false, NB_F64);
    nb_tensor *y = nb_forward(ln, nb_from_data((double[]){1, 3}, NB_SHAPE(1, 2), NB_F64));
    NB_CK_NOTNULL(y);
    double v[2];
    NB_CK_OK(nb_to_host(y, v, sizeof v));
    ck_assert(v[0] == -1 && v[1] == 1);
    nb_module_free(ln);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_loader_batch_size_default) {
    nb_scope *s = nb_scope_begin();
    nb_dataset *ds = nb_dataset_from_tensors(nb_arange(0, 3, 1, NB_F32), nb_arange(0, 3, 1, NB_I64));
    NB_CK_NOTNULL(ds);
    nb_loader *l = nb_loader_new(ds, (nb_loader_options){0}); /* DataLoader(ds): batch_size 1 */
    NB_CK_NOTNULL(l);
    nb_batch b;
    int n = 0;
    for (; nb_loader_next(l, &b); n++) ck_assert_int_eq(nb_numel(b.x), 1);
    ck_assert_int_eq(n, 3);
    nb_loader_free(l);
    nb_dataset_free(ds);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_option_defaults(void) {
    Suite *s = suite_create("option_defaults");
    TCase *c = tcase_create("option_defaults");
    tcase_add_test(c, test_cross_entropy_zeroed_is_default);
    tcase_add_test(c, test_sgd_lr_default);
    tcase_add_test(c, test_gradcheck_zeroed_is_default);
    tcase_add_test(c, test_encoder_layer_zeroed_is_default);
    tcase_add_test(c, test_norm_eps_and_momentum);
    tcase_add_test(c, test_loader_batch_size_default);
    suite_add_tcase(s, c);
    return s;
}
