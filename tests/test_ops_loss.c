/* test_ops_loss.c - cross_entropy, mse_loss and the losses written from
 * ops (l1, smooth_l1, huber, binary cross-entropy, kl_div, soft margin,
 * hinge embedding, margin ranking): values computed by hand (a
 * 2x3 cross entropy with every reduction, ignore_index and the all-ignored
 * NaN), gradients by hand (softmax - onehot), gradchecks along every
 * reduction, error paths, and float32 against float64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* softmax([1, 2, 3]) and the two rows of the cross-entropy example */
#define SM0 0.09003057317038046
#define SM1 0.24472847105479764
#define SM2 0.6652409557748218
#define LSE123 3.4076059644443806 /* log(e + e^2 + e^3) */
#define CE_ROW0 0.4076059644443806 /* logits [1, 2, 3], target 2 */
#define CE_ROW1 1.4076059644443804 /* logits [1, 0, -1], target 1 */

typedef struct {
    nb_tensor *target;
    nb_cross_entropy_options opts;
} ce_ctx;

static nb_tensor *f_ce(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const ce_ctx *c = ctx;
    return nb_cross_entropy_ex(in[0], c->target, c->opts);
}

static nb_tensor *f_ce_transposed(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const ce_ctx *c = ctx;
    return nb_cross_entropy_ex(nb_transpose(in[0], 0, 1), c->target, c->opts);
}

static nb_tensor *f_mse(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_mse_loss(in[0], in[1], *(const nb_reduction *)ctx);
}

static nb_tensor *ce_logits(void) {
    return nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 1, 0, -1});
}
static nb_tensor *targets(int64_t a, int64_t b) {
    int64_t t[2] = {a, b};
    nb_tensor *r = nb_from_data(t, NB_SHAPE(2), NB_I64);
    NB_CK_NOTNULL(r);
    return r;
}
static nb_cross_entropy_options ce_opts(nb_reduction r, int64_t ignore) {
    nb_cross_entropy_options o = NB_CROSS_ENTROPY_DEFAULTS;
    o.reduction = r;
    o.ignore_index = ignore;
    return o;
}

/* ---- softmax ---------------------------------------------------------------------- */

/* ---- cross entropy ------------------------------------------------------------ */

START_TEST(test_cross_entropy_forward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = ce_logits();
    nb_tensor *mean = nb_cross_entropy(x, targets(2, 1));
    ck_assert_int_eq(nb_dim(mean), 0);
    ck_assert_double_eq_tol(nb_item(mean), (CE_ROW0 + CE_ROW1) / 2, 1e-14);
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy_ex(x, targets(2, 1), ce_opts(NB_REDUCTION_SUM, -100))),
                            CE_ROW0 + CE_ROW1, 1e-14);
    nb_tensor *none = nb_cross_entropy_ex(x, targets(2, 1), ce_opts(NB_REDUCTION_NONE, -100));
    nb_ck_shape(none, 1, (int64_t[]){2});
    nb_ck_close(none, (double[]){CE_ROW0, CE_ROW1}, 2, 0, 1e-14);
    /* ignore_index: the ignored row adds 0 and is not counted in the mean */
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy(x, targets(2, -100))), CE_ROW0, 1e-14);
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy_ex(x, targets(2, -100), ce_opts(NB_REDUCTION_SUM, -100))),
                            CE_ROW0, 1e-14);
    nb_ck_close(nb_cross_entropy_ex(x, targets(2, -100), ce_opts(NB_REDUCTION_NONE, -100)), (double[]){CE_ROW0, 0}, 2,
                0, 1e-14);
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy_ex(x, targets(2, 1), ce_opts(NB_REDUCTION_MEAN, 1))), CE_ROW0,
                            1e-14);
    nb_cross_entropy_options ig0 = ce_opts(NB_REDUCTION_MEAN, NB_IGNORE_CLASS_0); /* 0 would mean the default */
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy_ex(x, targets(0, 1), ig0)), CE_ROW1, 1e-14);
    /* all ignored: the mean is 0/0 = NaN (PyTorch), the sum 0 */
    ck_assert(isnan(nb_item(nb_cross_entropy(x, targets(-100, -100)))));
    ck_assert_double_eq(nb_item(nb_cross_entropy_ex(x, targets(-100, -100), ce_opts(NB_REDUCTION_SUM, -100))), 0);
    /* large logits stay finite */
    nb_tensor *big = nb_add_scalar(x, 1000);
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy(big, targets(2, 1))), (CE_ROW0 + CE_ROW1) / 2, 1e-11);
    nb_tensor *far = nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0, 800});
    int64_t t0 = 0;
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy(far, nb_from_data(&t0, NB_SHAPE(1), NB_I64))), 800, 1e-9);
    /* equals -mean(log_softmax picked at the targets) */
    nb_tensor *ls = nb_log_softmax(x, 1);
    double lv[6];
    nb_test_values(ls, lv, 6);
    ck_assert_double_eq_tol(-(lv[2] + lv[4]) / 2, nb_item(mean), 1e-14);
    /* a strided logits tensor */
    nb_tensor *xt = nb_transpose(nb_contiguous(nb_transpose(x, 0, 1)), 0, 1);
    ck_assert_double_eq_tol(nb_item(nb_cross_entropy(xt, targets(2, 1))), (CE_ROW0 + CE_ROW1) / 2, 1e-14);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cross_entropy_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = ce_logits();
    NB_CK_FAILS(nb_cross_entropy(x, targets(3, 0)), NB_ERR_INVALID_ARG); /* C = 3 */
    NB_CK_FAILS(nb_cross_entropy(x, targets(0, -1)), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cross_entropy_ex(x, targets(0, -100), ce_opts(NB_REDUCTION_MEAN, 5)), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_cross_entropy(x, nb_test_tensor(NB_SHAPE(2), NB_I32, (double[]){0, 1})), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cross_entropy"));
    NB_CK_FAILS(nb_cross_entropy(x, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0, 1})), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_cross_entropy(nb_to_dtype(x, NB_I64), targets(0, 1)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_cross_entropy(x, nb_arange(0, 3, 1, NB_I64)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "cross_entropy"));
    NB_CK_FAILS(nb_cross_entropy(nb_reshape(x, NB_SHAPE(6)), targets(0, 1)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_cross_entropy(nb_reshape(x, NB_SHAPE(1, 2, 3)), targets(0, 1)), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_cross_entropy(x, nb_reshape(targets(0, 1), NB_SHAPE(2, 1))), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_cross_entropy_ex(x, targets(0, 1), ce_opts((nb_reduction)7, -100)), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cross_entropy_grad_by_hand) {
    nb_scope *s = nb_scope_begin();
    /* mean: (softmax - onehot) / N */
    nb_tensor *x = ce_logits();
    NB_CK_OK(nb_set_requires_grad(x, true));
    NB_CK_OK(nb_backward(nb_cross_entropy(x, targets(2, 1))));
    nb_ck_close(nb_tensor_grad(x), (double[]){SM0 / 2, SM1 / 2, (SM2 - 1) / 2, SM2 / 2, (SM1 - 1) / 2, SM0 / 2}, 6, 1e-15,
                1e-13);
    /* an ignored row gets no gradient and the mean divides by 1 */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(nb_cross_entropy(x, targets(-100, 0))));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 0, 0, SM2 - 1, SM1, SM0}, 6, 1e-15, 1e-13);
    /* none with per-row weights */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward_with(nb_cross_entropy_ex(x, targets(0, 2), ce_opts(NB_REDUCTION_NONE, -100)),
                              nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){2, -1})));
    nb_ck_close(nb_tensor_grad(x), (double[]){2 * (SM0 - 1), 2 * SM1, 2 * SM2, -SM2, -SM1, -(SM0 - 1)}, 6, 1e-15, 1e-13);
    /* all rows ignored, summed: zero gradient */
    nb_tensor_zero_grad(x);
    NB_CK_OK(nb_backward(nb_cross_entropy_ex(x, targets(-100, -100), ce_opts(NB_REDUCTION_SUM, -100))));
    nb_ck_close(nb_tensor_grad(x), (double[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cross_entropy_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_randn_grad(NB_SHAPE(4, 5), 9);
    int64_t tv[4] = {4, 0, 2, 2}, tig[4] = {1, -100, 3, -100};
    nb_tensor *t = nb_from_data(tv, NB_SHAPE(4), NB_I64), *tg = nb_from_data(tig, NB_SHAPE(4), NB_I64);
    for (int r = 0; r < 3; r++) {
        ce_ctx c = {t, ce_opts((nb_reduction)r, -100)};
        NB_CK_OK(nb_gradcheck(f_ce, &x, 1, &c, NULL));
        ce_ctx ci = {tg, ce_opts((nb_reduction)r, -100)};
        NB_CK_OK(nb_gradcheck(f_ce, &x, 1, &ci, NULL));
        ce_ctx c2 = {t, ce_opts((nb_reduction)r, 2)}; /* a custom ignore_index */
        NB_CK_OK(nb_gradcheck(f_ce, &x, 1, &c2, NULL));
    }
    nb_tensor *xt = nb_test_randn_grad(NB_SHAPE(5, 4), 10);
    ce_ctx c = {t, NB_CROSS_ENTROPY_DEFAULTS};
    NB_CK_OK(nb_gradcheck(f_ce_transposed, &xt, 1, &c, NULL));
    nb_scope_end(s);
}
END_TEST

/* ---- mse ---------------------------------------------------------------------------- */

START_TEST(test_mse_loss) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3});
    nb_tensor *tg = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0, 2, 5});
    nb_ck_close(nb_mse_loss(in, tg, NB_REDUCTION_NONE), (double[]){1, 0, 4}, 3, 0, 0);
    ck_assert_double_eq(nb_item(nb_mse_loss(in, tg, NB_REDUCTION_SUM)), 5);
    ck_assert_double_eq_tol(nb_item(nb_mse_loss(in, tg, NB_REDUCTION_MEAN)), 5.0 / 3, 1e-15);
    ck_assert_int_eq(nb_dim(nb_mse_loss(in, tg, NB_REDUCTION_MEAN)), 0);
    /* grads: d/dinput = 2 (x - t) / n, d/dtarget = -that */
    NB_CK_OK(nb_set_requires_grad(in, true));
    NB_CK_OK(nb_set_requires_grad(tg, true));
    NB_CK_OK(nb_backward(nb_mse_loss(in, tg, NB_REDUCTION_MEAN)));
    nb_ck_close(nb_tensor_grad(in), (double[]){2.0 / 3, 0, -4.0 / 3}, 3, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(tg), (double[]){-2.0 / 3, 0, 4.0 / 3}, 3, 0, 1e-15);
    /* a broadcast target [3] against input [2, 3] */
    nb_tensor *in2 = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 2, 3, 0, 0, 0});
    ck_assert_double_eq_tol(nb_item(nb_mse_loss(in2, nb_detach(tg), NB_REDUCTION_MEAN)), (5.0 + 29.0) / 6, 1e-15);
    NB_CK_FAILS(nb_mse_loss(in, nb_zeros(NB_SHAPE(4), NB_F64), NB_REDUCTION_MEAN), NB_ERR_SHAPE);
    ck_assert_msg(strstr(nb_last_error(), "mse_loss") != NULL, "message \"%s\" does not name mse_loss",
                  nb_last_error());
    NB_CK_FAILS(nb_mse_loss(in, nb_zeros(NB_SHAPE(3), NB_F32), NB_REDUCTION_MEAN), NB_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "mse_loss"));
    NB_CK_FAILS(nb_mse_loss(in, tg, (nb_reduction)9), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

/* ---- l1, smooth_l1, huber, binary cross-entropy, kl_div: values by hand ----------------- */

START_TEST(test_regression_losses) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 2, 3, -1});
    nb_tensor *tg = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0, 2, 5, -0.5}); /* d = 1, 0, 2, 0.5 */
    nb_ck_close(nb_l1_loss(in, tg, NB_REDUCTION_NONE), (double[]){1, 0, 2, 0.5}, 4, 0, 0);
    ck_assert_double_eq(nb_item(nb_l1_loss(in, tg, NB_REDUCTION_SUM)), 3.5);
    /* smooth_l1, beta 1 (a zeroed struct): 0.5 d^2 below 1, d - 0.5 from 1 on */
    nb_ck_close(nb_smooth_l1_loss(in, tg, (nb_loss_options){.reduction = NB_REDUCTION_NONE}),
                (double[]){0.5, 0, 1.5, 0.125}, 4, 0, 1e-15);
    /* beta 2: 0.25 d^2 below 2 */
    nb_ck_close(nb_smooth_l1_loss(in, tg, (nb_loss_options){.reduction = NB_REDUCTION_NONE, .beta = 2}),
                (double[]){0.25, 0, 1, 0.0625}, 4, 0, 1e-15);
    /* beta NB_ZERO: l1 */
    ck_assert_double_eq(nb_item(nb_smooth_l1_loss(in, tg, (nb_loss_options){.reduction = NB_REDUCTION_SUM,
                                                                         .beta = NB_ZERO})), 3.5);
    /* huber, delta 1.5: 0.5 d^2 below 1.5, 1.5 (d - 0.75) from it */
    nb_ck_close(nb_huber_loss(in, tg, (nb_loss_options){.reduction = NB_REDUCTION_NONE, .delta = 1.5}),
                (double[]){0.5, 0, 1.875, 0.125}, 4, 0, 1e-15);
    ck_assert_double_eq_tol(nb_item(nb_huber_loss(in, tg, (nb_loss_options){0})), (0.5 + 0 + 1.5 + 0.125) / 4, 1e-15);
    NB_CK_FAILS(nb_huber_loss(in, tg, (nb_loss_options){.delta = NB_ZERO}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_smooth_l1_loss(in, tg, (nb_loss_options){.beta = -1}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_l1_loss(in, nb_zeros(NB_SHAPE(3), NB_F64), NB_REDUCTION_MEAN), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "l1_loss"));
    /* gradients: l1's sign (d/dinput), smooth_l1's d / beta inside, sign outside */
    NB_CK_OK(nb_set_requires_grad(in, true));
    NB_CK_OK(nb_backward(nb_smooth_l1_loss(in, tg, (nb_loss_options){.reduction = NB_REDUCTION_SUM})));
    nb_ck_close(nb_tensor_grad(in), (double[]){1, 0, -1, -0.5}, 4, 0, 1e-15);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_binary_losses) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *p = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.25, 0.5, 0.9});
    nb_tensor *t = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 0, 0.5});
    double want[3] = {-log(0.25), -log(0.5), -(0.5 * log(0.9) + 0.5 * log(0.1))};
    nb_ck_close(nb_binary_cross_entropy(p, t, (nb_loss_options){.reduction = NB_REDUCTION_NONE}), want, 3, 0, 1e-14);
    /* logs clamped at -100: p = 0 with t = 1 costs 100, not inf */
    nb_tensor *edge = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0, 1});
    nb_ck_close(nb_binary_cross_entropy(edge, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 0}),
                                        (nb_loss_options){.reduction = NB_REDUCTION_NONE}),
                (double[]){100, 100}, 2, 0, 0);
    /* with logits: the same as sigmoid then binary_cross_entropy, and finite at |x| = 100 */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){-1.0986122886681098, 0, 2.1972245773362196});
    nb_ck_close(nb_binary_cross_entropy_with_logits(x, t, (nb_loss_options){.reduction = NB_REDUCTION_NONE}), want, 3,
                0, 1e-14);
    nb_tensor *big = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){100, -100});
    nb_ck_close(nb_binary_cross_entropy_with_logits(big, nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0, 1}),
                                                    (nb_loss_options){.reduction = NB_REDUCTION_NONE}),
                (double[]){100, 100}, 2, 0, 1e-12);
    /* pos_weight 3 triples the positive term: t = 1 -> 3 log(1 + e^-x) */
    nb_tensor *pw = nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){3});
    ck_assert_double_eq_tol(nb_item(nb_binary_cross_entropy_with_logits(
                                nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){0}),
                                nb_test_tensor(NB_SHAPE(1), NB_F64, (double[]){1}),
                                (nb_loss_options){.pos_weight = pw})),
                            3 * log(2.0), 1e-15);
    /* weight rescales each element */
    nb_tensor *w = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){2, 0, 1});
    ck_assert_double_eq_tol(nb_item(nb_binary_cross_entropy(p, t, (nb_loss_options){.reduction = NB_REDUCTION_SUM,
                                                                                    .weight = w})),
                            2 * want[0] + want[2], 1e-14);
    NB_CK_FAILS(nb_binary_cross_entropy(p, t, (nb_loss_options){.weight = nb_ones(NB_SHAPE(3), NB_F32)}), NB_ERR_DTYPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_kl_div) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *logq = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){log(0.5), log(0.5), log(0.25), log(0.75)});
    nb_tensor *p = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (double[]){0.25, 0.75, 0, 1}); /* a zero: xlogy's 0 */
    double e[4] = {0.25 * (log(0.25) - log(0.5)), 0.75 * (log(0.75) - log(0.5)), 0, -log(0.75)};
    nb_ck_close(nb_kl_div(logq, p, (nb_loss_options){.reduction = NB_REDUCTION_NONE}), e, 4, 0, 1e-15);
    double sum = e[0] + e[1] + e[2] + e[3];
    ck_assert_double_eq_tol(nb_item(nb_kl_div(logq, p, (nb_loss_options){0})), sum / 4, 1e-15);
    ck_assert_double_eq_tol(nb_item(nb_kl_div(logq, p, (nb_loss_options){.batchmean = true})), sum / 2, 1e-15);
    /* log_target: the same divergence from log p (p > 0 only) */
    nb_tensor *p2 = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0.25, 0.75});
    nb_tensor *q2 = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){log(0.5), log(0.5)});
    ck_assert_double_eq_tol(nb_item(nb_kl_div(q2, nb_log(p2), (nb_loss_options){.reduction = NB_REDUCTION_SUM,
                                                                                .log_target = true})),
                            e[0] + e[1], 1e-15);
    /* the gradient through a zero target is finite (0) */
    NB_CK_OK(nb_set_requires_grad(p, true));
    NB_CK_OK(nb_backward(nb_kl_div(logq, p, (nb_loss_options){.reduction = NB_REDUCTION_SUM})));
    ck_assert(isfinite(nb_item(nb_sum(nb_tensor_grad(p), NULL, 0, false))));
    nb_scope_end(s);
}
END_TEST

START_TEST(test_margin_losses) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){0.5, -0.25, 2, 0});
    nb_tensor *y = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, -1, -1, 1});
    /* soft margin: log(1 + exp(-y x)) */
    double sm[4] = {log1p(exp(-0.5)), log1p(exp(-0.25)), log1p(exp(2)), log(2.0)};
    nb_ck_close(nb_soft_margin_loss(x, y, NB_REDUCTION_NONE), sm, 4, 0, 1e-15);
    /* hinge embedding, margin 1 (a zeroed struct): x where y = 1, max(0, 1 - x) where y = -1 */
    nb_ck_close(nb_hinge_embedding_loss(x, y, (nb_loss_options){.reduction = NB_REDUCTION_NONE}),
                (double[]){0.5, 1.25, 0, 0}, 4, 0, 1e-15);
    ck_assert_double_eq(nb_item(nb_hinge_embedding_loss(x, y, (nb_loss_options){.reduction = NB_REDUCTION_SUM,
                                                                                 .margin = NB_ZERO})),
                        0.5 + 0.25);
    /* margin ranking: max(0, -y (x1 - x2) + margin) */
    nb_tensor *x2 = nb_test_tensor(NB_SHAPE(4), NB_F64, (double[]){1, 0, 1, 0});
    nb_ck_close(nb_margin_ranking_loss(x, x2, y, (nb_loss_options){.reduction = NB_REDUCTION_NONE, .margin = 0.1}),
                (double[]){0.6, 0, 1.1, 0.1}, 4, 0, 1e-15);
    NB_CK_FAILS(nb_margin_ranking_loss(nb_reshape(x, NB_SHAPE(1, 4)), x2, y, (nb_loss_options){0}), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "margin_ranking_loss"));
    nb_scope_end(s);
}
END_TEST

/* The losses over classes, by hand. */
START_TEST(test_class_losses) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){0.5, -0.25, 2, 0, 1, -1});
    nb_tensor *t = nb_from_data((int64_t[]){2, 0}, NB_SHAPE(2), NB_I64);
    /* multi_margin: sum_{j != y} max(0, 1 - x_y + x_j) / C; row 0 (y = 2): 0 + 0; row 1 (y = 0): 2 + 0 */
    nb_ck_close(nb_multi_margin_loss(x, t, (nb_loss_options){.reduction = NB_REDUCTION_NONE}), (double[]){0, 2.0 / 3},
                2, 0, 1e-15);
    /* p 2, margin 3: row 0: (3 - 2 + 0.5)^2 + (3 - 2 - 0.25)^2, row 1: 4^2 + 2^2 */
    double r0 = (1.5 * 1.5 + 0.75 * 0.75) / 3, r1 = (16.0 + 4.0) / 3;
    ck_assert_double_eq_tol(nb_item(nb_multi_margin_loss(x, t, (nb_loss_options){.p = 2, .margin = 3})),
                            (r0 + r1) / 2, 1e-14);
    NB_CK_FAILS(nb_multi_margin_loss(x, nb_from_data((int64_t[]){3, 0}, NB_SHAPE(2), NB_I64), (nb_loss_options){0}),
                NB_ERR_INVALID_ARG);
    /* multilabel_margin: row 0 targets {2}: (1 - 2 + 0.5) -> 0, (1 - 2 - 0.25) -> 0; row 1 targets {1, 0}
     * (then ended by -1): non-target 2: max(0, 1 - 1 - 1) + max(0, 1 - 0 - 1) = 0 */
    nb_tensor *mt = nb_from_data((int64_t[]){2, -1, 0, 1, 0, -1}, NB_SHAPE(2, 3), NB_I64);
    nb_ck_close(nb_multilabel_margin_loss(x, mt, NB_REDUCTION_NONE), (double[]){0, 0}, 2, 0, 1e-15);
    nb_tensor *x2 = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.2, 0.1, 0.3});
    nb_tensor *t2 = nb_from_data((int64_t[]){0, -1, 2}, NB_SHAPE(3), NB_I64); /* the 2 after -1 is ignored */
    /* target 0 against non-targets 1 and 2: (1 - 0.2 + 0.1) + (1 - 0.2 + 0.3) over C = 3 */
    ck_assert_double_eq_tol(nb_item(nb_multilabel_margin_loss(x2, t2, NB_REDUCTION_MEAN)), (0.9 + 1.1) / 3, 1e-15);
    /* poisson: exp(x) - t x; gaussian: (log v + d^2 / v) / 2 */
    nb_tensor *y = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (double[]){1, 0, 2, 3, 1, 0});
    ck_assert_double_eq_tol(nb_item(nb_poisson_nll_loss(x, y, (nb_loss_options){.reduction = NB_REDUCTION_SUM})),
                            exp(0.5) - 0.5 + exp(-0.25) + exp(2) - 4 + 1 + exp(1) - 1 + exp(-1), 1e-13);
    nb_tensor *v = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){0.5, 2});
    double g = 0;
    const double xs[6] = {0.5, -0.25, 2, 0, 1, -1}, ys[6] = {1, 0, 2, 3, 1, 0}, vs[2] = {0.5, 2};
    for (int i = 0; i < 6; i++) g += 0.5 * (log(vs[i / 3]) + (xs[i] - ys[i]) * (xs[i] - ys[i]) / vs[i / 3]);
    ck_assert_double_eq_tol(nb_item(nb_gaussian_nll_loss(x, y, v, (nb_loss_options){.reduction = NB_REDUCTION_SUM})),
                            g, 1e-13);
    NB_CK_FAILS(nb_gaussian_nll_loss(x, y, nb_neg(v), (nb_loss_options){0}), NB_ERR_INVALID_ARG);
    /* triplet: max(0, 1 + |a - p + eps| - |a - n + eps|) */
    nb_tensor *a = nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0, 0});
    nb_tensor *pp = nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){3, 4});
    nb_tensor *nn = nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0, 1});
    ck_assert_double_eq_tol(nb_item(nb_triplet_margin_loss(a, pp, nn, (nb_loss_options){.eps = NB_ZERO})),
                            1 + 5 - 1, 1e-14);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_mse_gradcheck) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[2] = {nb_test_randn_grad(NB_SHAPE(3, 4), 11), nb_test_randn_grad(NB_SHAPE(3, 4), 12)};
    nb_tensor *bc[2] = {nb_test_randn_grad(NB_SHAPE(2, 3, 4), 13), nb_test_randn_grad(NB_SHAPE(4), 14)};
    for (int r = 0; r < 3; r++) {
        nb_reduction red = (nb_reduction)r;
        NB_CK_OK(nb_gradcheck(f_mse, in, 2, &red, NULL));
        NB_CK_OK(nb_gradcheck(f_mse, bc, 2, &red, NULL));
    }
    nb_scope_end(s);
}
END_TEST

/* ---- float32 ------------------------------------------------------------------- */

START_TEST(test_losses_float32) {
    nb_scope *s = nb_scope_begin();
    nb_generator g = nb_generator_new(17);
    nb_tensor *x32 = nb_mul_scalar(nb_randn(NB_SHAPE(16, 10), NB_F32, &g), 3);
    nb_tensor *x64 = nb_to_dtype(x32, NB_F64);
    nb_tensor *pairs[4][2] = {
        {nb_softmax(x32, 1), nb_softmax(x64, 1)},
        {nb_log_softmax(x32, 0), nb_log_softmax(x64, 0)},
        {nb_mse_loss(x32, nb_narrow(x32, 0, 0, 1), NB_REDUCTION_NONE),
         nb_mse_loss(x64, nb_narrow(x64, 0, 0, 1), NB_REDUCTION_NONE)},
        {NULL, NULL},
    };
    nb_tensor *tgt = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(16), NB_F64, &g), 10), NB_I64);
    pairs[3][0] = nb_cross_entropy_ex(x32, tgt, ce_opts(NB_REDUCTION_NONE, -100));
    pairs[3][1] = nb_cross_entropy_ex(x64, tgt, ce_opts(NB_REDUCTION_NONE, -100));
    for (int p = 0; p < 4; p++) {
        int64_t n = nb_numel(pairs[p][1]);
        double *want = malloc(sizeof(double) * (size_t)n);
        nb_test_values(pairs[p][1], want, n);
        ck_assert_int_eq(nb_dtype_of(pairs[p][0]), NB_F32);
        nb_ck_close(pairs[p][0], want, n, 1e-5, 1e-5);
        free(want);
    }
    /* the float32 cross-entropy gradient */
    NB_CK_OK(nb_set_requires_grad(x32, true));
    NB_CK_OK(nb_set_requires_grad(x64, true));
    NB_CK_OK(nb_backward(nb_cross_entropy(x32, tgt)));
    NB_CK_OK(nb_backward(nb_cross_entropy(x64, tgt)));
    double want[160];
    nb_test_values(nb_tensor_grad(x64), want, 160);
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(x32)), NB_F32);
    nb_ck_close(nb_tensor_grad(x32), want, 160, 1e-6, 1e-5);
    nb_scope_end(s);
}
END_TEST

typedef struct {
    nb_tensor *target, *weight;
    double smoothing;
    nb_reduction red;
    bool nll;
} ce_ext;

static nb_tensor *f_ce_ext(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    const ce_ext *c = ctx;
    nb_cross_entropy_options o = NB_CROSS_ENTROPY_DEFAULTS;
    o.weight = c->weight, o.label_smoothing = c->smoothing, o.reduction = c->red;
    if (c->target) o.ignore_index = 2; /* class indices only */
    return c->nll ? nb_nll_loss(nb_log_softmax(in[0], 1), c->target, o)
                  : nb_cross_entropy_ex(in[0], c->target ? c->target : in[1], o);
}

/* issue 13: class weights, label smoothing, [N, C, d...] and unbatched
 * inputs, probability targets, nll_loss: values by hand, float64
 * gradchecks (PyTorch agreement is the differential suite's). */
/* ctc_loss by hand: with the same distribution (0.3 blank, 0.7 class 1) at every step, target (1) over 2 steps
 * sums the alignments 11, _1, 1_; target (1, 1) over 3 steps has only 1_1; (1, 1) over 2 steps none. */
START_TEST(test_ctc_loss_by_hand) {
    nb_scope *s = nb_scope_begin();
    double p[2] = {log(0.3), log(0.7)};
    nb_tensor *lp = nb_test_tensor(NB_SHAPE(3, 3, 2), NB_F64, (double[]){p[0], p[1], p[0], p[1], p[0], p[1], p[0], p[1],
                                                                       p[0], p[1], p[0], p[1], p[0], p[1], p[0], p[1],
                                                                       p[0], p[1]});
    nb_tensor *tg = nb_test_tensor(NB_SHAPE(3, 2), NB_I64, (double[]){1, 0, 1, 1, 1, 1});
    nb_tensor *il = nb_test_tensor(NB_SHAPE(3), NB_I64, (double[]){2, 3, 2});
    nb_tensor *tl = nb_test_tensor(NB_SHAPE(3), NB_I64, (double[]){1, 2, 2});
    nb_tensor *l = nb_ctc_loss(lp, tg, il, tl, (nb_ctc_loss_options){.reduction = NB_REDUCTION_NONE});
    nb_ck_close(l, (double[]){-log(0.49 + 0.21 + 0.21), -log(0.7 * 0.3 * 0.7), INFINITY}, 3, 1e-14, 0);
    l = nb_ctc_loss(lp, tg, il, tl, (nb_ctc_loss_options){.reduction = NB_REDUCTION_NONE, .zero_infinity = true});
    nb_ck_close(l, (double[]){-log(0.91), -log(0.147), 0}, 3, 1e-14, 0);
    /* mean: each over its target length */
    l = nb_ctc_loss(nb_narrow(lp, 1, 0, 2), nb_narrow(tg, 0, 0, 2), nb_narrow(il, 0, 0, 2), nb_narrow(tl, 0, 0, 2),
                    (nb_ctc_loss_options){0});
    ck_assert_double_eq_tol(nb_item(l), (-log(0.91) / 1 - log(0.147) / 2) / 2, 1e-14);
    /* errors: a target outside [0, C), a length past T, a blank outside [0, C), float targets */
    NB_CK_FAILS(nb_ctc_loss(lp, nb_test_tensor(NB_SHAPE(3, 2), NB_I64, (double[]){1, 0, 2, 1, 1, 1}), il, tl,
                            (nb_ctc_loss_options){0}), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "outside [0, 2)"));
    NB_CK_FAILS(nb_ctc_loss(lp, tg, nb_test_tensor(NB_SHAPE(3), NB_I64, (double[]){2, 4, 2}), tl, (nb_ctc_loss_options){0}),
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_ctc_loss(lp, tg, il, tl, (nb_ctc_loss_options){.blank = 2}), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_ctc_loss(lp, nb_to_dtype(tg, NB_F64), il, tl, (nb_ctc_loss_options){0}), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_ctc_loss(lp, tg, il, nb_narrow(tl, 0, 0, 2), (nb_ctc_loss_options){0}), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_cross_entropy_extensions) {
    nb_scope *s = nb_scope_begin();
    /* by hand: logits [[0, ln 3]] (p = [1/4, 3/4]), target 1, weight [2, 5], smoothing 0.2:
     * nll = 5 * ln(4/3); smooth = -(2 ln(1/4) + 5 ln(3/4)); mean divides both by w[t] = 5 */
    nb_tensor *x = nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0, log(3.0)});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){2, 5});
    nb_cross_entropy_options o = NB_CROSS_ENTROPY_DEFAULTS;
    o.weight = w, o.label_smoothing = 0.2;
    double nll = log(4.0 / 3.0), smooth = -(2 * log(0.25) + 5 * log(0.75)) / 5;
    nb_ck_close(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){1}), o),
                (double[]){0.8 * nll + 0.1 * smooth}, 1, 0, 1e-12);
    /* probabilities [0.5, 0.5] with weights: -(2 * 0.5 ln 1/4 + 5 * 0.5 ln 3/4) */
    o.label_smoothing = 0;
    nb_ck_close(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0.5, 0.5}), o),
                (double[]){-(log(0.25) + 2.5 * log(0.75))}, 1, 0, 1e-12);
    /* unbatched [C] with a 0-d target; none keeps the 0-d shape */
    o = NB_CROSS_ENTROPY_DEFAULTS;
    o.reduction = NB_REDUCTION_NONE;
    nb_tensor *u = nb_cross_entropy_ex(nb_reshape(x, NB_SHAPE(2)), nb_scalar(1, NB_I64), o);
    nb_ck_shape(u, 0, NULL);
    nb_ck_close(u, (double[]){nll}, 1, 0, 1e-12);
    /* [N, C, d]: the loss per (n, d), the same as the [N d, C] rows */
    nb_tensor *sp = nb_test_randn_grad(NB_SHAPE(2, 3, 4), 31);
    nb_tensor *st = nb_test_tensor(NB_SHAPE(2, 4), NB_I64, (double[]){0, 1, 2, 2, 1, 0, 2, 1});
    nb_tensor *per = nb_cross_entropy_ex(sp, st, o);
    nb_ck_shape(per, 2, (int64_t[]){2, 4});
    int src = 1, dst = -1;
    nb_tensor *rows = nb_cross_entropy_ex(nb_reshape(nb_movedim(sp, &src, &dst, 1), NB_SHAPE(8, 3)),
                                          nb_reshape(st, NB_SHAPE(8)), o);
    double a[8], b[8];
    nb_test_values(per, a, 8), nb_test_values(rows, b, 8);
    for (int i = 0; i < 8; i++) ck_assert_double_eq_tol(a[i], b[i], 1e-12);
    /* gradchecks: weights + smoothing + ignore_index 2, spatial, probabilities, nll_loss */
    nb_tensor *wt = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){0.5, 2, 1.5});
    nb_tensor *t3 = nb_test_tensor(NB_SHAPE(4), NB_I64, (double[]){0, 2, 1, 1});
    for (int r = 0; r < 3; r++) {
        ce_ext c = {t3, wt, 0.1, (nb_reduction)r, false};
        nb_tensor *in = nb_test_randn_grad(NB_SHAPE(4, 3), 32 + (uint64_t)r);
        nb_ck_gradcheck(f_ce_ext, &in, 1, &c);
        c.nll = true, c.smoothing = 0;
        nb_ck_gradcheck(f_ce_ext, &in, 1, &c);
        ce_ext cs = {st, NULL, 0.2, (nb_reduction)r, false};
        nb_ck_gradcheck(f_ce_ext, &sp, 1, &cs);
        ce_ext cp = {NULL, wt, 0.1, (nb_reduction)r, false};
        nb_tensor *pin[2] = {in, nb_softmax(nb_test_randn_grad(NB_SHAPE(4, 3), 40), 1)};
        pin[1] = nb_detach(pin[1]);
        NB_CK_OK(nb_set_requires_grad(pin[1], true));
        nb_ck_gradcheck(f_ce_ext, pin, 2, &cp);
    }
    /* errors */
    o = NB_CROSS_ENTROPY_DEFAULTS;
    o.weight = nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 1, 1});
    NB_CK_FAILS(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){1}), o), NB_ERR_SHAPE);
    o.weight = nb_to_dtype(w, NB_F32);
    NB_CK_FAILS(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){1}), o), NB_ERR_DTYPE);
    o = NB_CROSS_ENTROPY_DEFAULTS;
    o.label_smoothing = 1.5;
    NB_CK_FAILS(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){1}), o), NB_ERR_INVALID_ARG);
    o.label_smoothing = 0.1;
    NB_CK_FAILS(nb_nll_loss(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){1}), o), NB_ERR_INVALID_ARG);
    o.label_smoothing = 0;
    NB_CK_FAILS(nb_nll_loss(x, nb_test_tensor(NB_SHAPE(1), NB_I64, (double[]){2}), o), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nll_loss(x, nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0.5, 0.5}), o), NB_ERR_DTYPE);
    o.ignore_index = NB_IGNORE_CLASS_0; /* class 0: only the default is allowed with probabilities */
    NB_CK_FAILS(nb_cross_entropy_ex(x, nb_test_tensor(NB_SHAPE(1, 2), NB_F64, (double[]){0.5, 0.5}), o),
                NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_loss(void) {
    Suite *s = suite_create("ops_loss");
    TCase *f = tcase_create("forward");
    tcase_add_test(f, test_cross_entropy_forward);
    tcase_add_test(f, test_cross_entropy_extensions);
    tcase_add_test(f, test_cross_entropy_errors);
    tcase_add_test(f, test_mse_loss);
    tcase_add_test(f, test_regression_losses);
    tcase_add_test(f, test_binary_losses);
    tcase_add_test(f, test_kl_div);
    tcase_add_test(f, test_margin_losses);
    tcase_add_test(f, test_class_losses);
    tcase_add_test(f, test_losses_float32);
    tcase_add_test(f, test_ctc_loss_by_hand);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, test_cross_entropy_grad_by_hand);
    tcase_add_test(g, test_cross_entropy_gradcheck);
    tcase_add_test(g, test_mse_gradcheck);
    tcase_set_timeout(g, 300);
    suite_add_tcase(s, g);
    return s;
}
