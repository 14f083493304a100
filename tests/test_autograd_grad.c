/* test_autograd_grad.c - functional gradients and higher orders: nb_grad
 * (torch.autograd.grad) with non-leaf inputs, several outputs,
 * allow_unused and materialize_grads; retain_graph; create_graph in
 * nb_grad and nb_backward_ex (a gradient of a gradient, third order); the
 * error naming an op without a differentiable backward; and two examples
 * against PyTorch's float64 values (tests/autograd_ref/gen_ref.py): a
 * Hessian-vector product through a causal transformer block and a WGAN-GP
 * critic step with its gradient penalty. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_ref/autograd_ref.h"
#include "nb_test.h"
#include "suites.h"

static nb_tensor *leaf(int ndim, const int64_t *shape, const double *v) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

static nb_tensor *sum_all(nb_tensor *t) { return nb_sum(t, NULL, 0, false); }

/* The first example: d/dx (d/dx sum(x^3)) = 6x; nb_grad leaves .grad alone. */
START_TEST(test_grad_of_grad) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(3), (double[]){1, -2, 0.5});
    nb_tensor *y = sum_all(nb_mul(nb_mul(x, x), x));
    nb_tensor *g;
    NB_CK_OK(nb_grad(&y, NULL, 1, &x, 1, &g, &(nb_grad_options){.create_graph = true}));
    nb_ck_close(g, (double[]){3, 12, 0.75}, 3, 0, 1e-15);
    ck_assert(nb_requires_grad(g) && !nb_is_leaf(g));
    ck_assert_ptr_null(nb_tensor_grad(x)); /* grad() touches no .grad */
    nb_tensor *gg;
    NB_CK_OK(nb_grad((nb_tensor *[]){sum_all(g)}, NULL, 1, &x, 1, &gg, &(nb_grad_options){.create_graph = true}));
    nb_ck_close(gg, (double[]){6, -12, 3}, 3, 0, 1e-15);
    /* third order: d/dx sum(6x) = 6 */
    nb_tensor *ggg;
    NB_CK_OK(nb_grad((nb_tensor *[]){sum_all(gg)}, NULL, 1, &x, 1, &ggg, NULL));
    nb_ck_close(ggg, (double[]){6, 6, 6}, 3, 0, 1e-15);
    ck_assert(!nb_requires_grad(ggg));
    /* without create_graph the gradient is a constant, as in PyTorch */
    nb_tensor *y2 = sum_all(nb_mul(nb_mul(x, x), x)), *g2;
    NB_CK_OK(nb_grad(&y2, NULL, 1, &x, 1, &g2, NULL));
    ck_assert(!nb_requires_grad(g2));
    NB_CK_FAILS(nb_backward(sum_all(g2)) == NB_OK, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "does not require grad"));
    nb_scope_end(s);
}
END_TEST

/* Inputs may be op results; several outputs with their grad_outputs. */
START_TEST(test_grad_inputs_and_outputs) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 3});
    nb_tensor *y = nb_mul_scalar(x, 2);                 /* y = 2x */
    nb_tensor *z = sum_all(nb_mul(y, y));               /* z = sum(y^2): dz/dy = 2y */
    nb_tensor *gr[2];
    NB_CK_OK(nb_grad(&z, NULL, 1, (nb_tensor *[]){y, x}, 2, gr, NULL));
    nb_ck_close(gr[0], (double[]){4, 12}, 2, 0, 0);
    nb_ck_close(gr[1], (double[]){8, 24}, 2, 0, 0);
    /* two outputs: <a, u> + <b, w> with a = x^2, b = 3x */
    nb_tensor *a = nb_mul(x, x), *b = nb_mul_scalar(x, 3);
    nb_tensor *u = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){1, 2});
    nb_tensor *w = nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){-1, 0.5});
    nb_tensor *gx;
    NB_CK_OK(nb_grad((nb_tensor *[]){a, b}, (nb_tensor *[]){u, w}, 2, &x, 1, &gx, NULL));
    nb_ck_close(gx, (double[]){2 * 1 * 1 - 3, 2 * 3 * 2 + 1.5}, 2, 0, 1e-15);
    /* a grad_output of the wrong shape; a non-scalar output without one */
    NB_CK_FAILS(nb_grad(&a, (nb_tensor *[]){nb_ones(NB_SHAPE(3), NB_F64)}, 1, &x, 1, &gx, NULL) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_null(gx);
    NB_CK_FAILS(nb_grad(&a, NULL, 1, &x, 1, &gx, NULL) == NB_OK, NB_ERR_SHAPE);
    /* an input that does not require grad */
    nb_tensor *c = nb_ones(NB_SHAPE(2), NB_F64);
    NB_CK_FAILS(nb_grad(&z, NULL, 1, &c, 1, &gx, NULL) == NB_OK, NB_ERR_STATE);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_grad_unused) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 3}), *v = leaf(NB_SHAPE(2), (double[]){5, 6});
    nb_tensor *y = sum_all(nb_exp(x)), *gr[2] = {NULL, NULL};
    NB_CK_FAILS(nb_grad(&y, NULL, 1, (nb_tensor *[]){x, v}, 2, gr, &(nb_grad_options){.retain_graph = true}) == NB_OK,
                NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "allow_unused"));
    ck_assert(!gr[0] && !gr[1]);
    NB_CK_OK(nb_grad(&y, NULL, 1, (nb_tensor *[]){x, v}, 2, gr,
                     &(nb_grad_options){.allow_unused = true, .retain_graph = true}));
    nb_ck_close(gr[0], (double[]){exp(1.0), exp(3.0)}, 2, 0, 1e-15);
    ck_assert_ptr_null(gr[1]);
    NB_CK_OK(nb_grad(&y, NULL, 1, (nb_tensor *[]){x, v}, 2, gr, &(nb_grad_options){.materialize_grads = true}));
    nb_ck_close(gr[1], (double[]){0, 0}, 2, 0, 0);
    nb_scope_end(s);
}
END_TEST

/* retain_graph keeps the tape for a second backward; without it the second fails. */
START_TEST(test_retain_graph) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){1, 2});
    nb_tensor *y = sum_all(nb_exp(nb_mul(x, x)));
    NB_CK_OK(nb_backward_ex(y, NULL, &(nb_backward_options){.retain_graph = true}));
    NB_CK_OK(nb_backward_ex(y, NULL, &(nb_backward_options){.retain_graph = true}));
    nb_ck_close(nb_tensor_grad(x), (double[]){4 * exp(1.0), 8 * exp(4.0)}, 2, 0, 1e-14);
    NB_CK_OK(nb_backward(y)); /* frees it */
    nb_ck_close(nb_tensor_grad(x), (double[]){6 * exp(1.0), 12 * exp(4.0)}, 2, 0, 1e-14);
    NB_CK_FAILS(nb_backward(y) == NB_OK, NB_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "retain_graph"));
    /* nb_grad frees the graph too unless retained */
    nb_tensor *z = sum_all(nb_sin(x)), *g;
    NB_CK_OK(nb_grad(&z, NULL, 1, &x, 1, &g, NULL));
    NB_CK_FAILS(nb_grad(&z, NULL, 1, &x, 1, &g, NULL) == NB_OK, NB_ERR_STATE);
    /* the message says the graph was freed and names the fix, as PyTorch's (not "unused") */
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "already freed"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "retain_graph"));
    nb_scope_end(s);
}
END_TEST

/* nb_backward_ex with create_graph: .grad has a graph of its own, which the
 * next backward differentiates (PyTorch's loss.backward(create_graph=True)). */
START_TEST(test_backward_create_graph) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2), (double[]){0.5, -1});
    nb_tensor *y = sum_all(nb_mul(nb_sin(x), x)); /* dy/dx = cos(x) x + sin(x) */
    NB_CK_OK(nb_backward_ex(y, NULL, &(nb_backward_options){.create_graph = true}));
    nb_tensor *gx = nb_tensor_grad(x);
    ck_assert(nb_requires_grad(gx) && !nb_is_leaf(gx));
    double c0 = cos(0.5) * 0.5 + sin(0.5), c1 = cos(-1.0) * -1 + sin(-1.0);
    nb_ck_close(gx, (double[]){c0, c1}, 2, 0, 1e-15);
    /* d/dx sum(dy/dx) = -sin(x) x + 2 cos(x); retained, as this backward also
     * walks y's graph (which PyTorch would free as well) */
    nb_tensor *h;
    NB_CK_OK(nb_grad((nb_tensor *[]){sum_all(gx)}, NULL, 1, &x, 1, &h, &(nb_grad_options){.retain_graph = true}));
    nb_ck_close(h, (double[]){-sin(0.5) * 0.5 + 2 * cos(0.5), -sin(-1.0) * -1 + 2 * cos(-1.0)}, 2, 0, 1e-15);
    /* a second create_graph backward accumulates out of place, keeping the graph */
    NB_CK_OK(nb_backward_ex(y, NULL, &(nb_backward_options){.create_graph = true}));
    nb_ck_close(nb_tensor_grad(x), (double[]){2 * c0, 2 * c1}, 2, 0, 1e-15);
    ck_assert(nb_requires_grad(nb_tensor_grad(x)));
    nb_tensor_zero_grad(x); /* the .grad's graph references x: drop it (a cycle otherwise) */
    /* a parameter whose .grad is a view of a flat buffer cannot hold a graph: an error, not a broken view */
    nb_module *lin = nb_nn_linear_ex(2, 1, false, NB_F64);
    NB_CK_OK(nb_module_flatten_parameters(lin));
    nb_tensor *w = nb_module_get(lin, "weight");
    nb_tensor *o = sum_all(nb_sin(nb_forward(lin, nb_unsqueeze(x, 0))));
    NB_CK_FAILS(nb_backward_ex(o, NULL, &(nb_backward_options){.create_graph = true}) == NB_OK, NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "flat gradient buffer"));
    nb_tensor *gw; /* nb_grad works, and plain backward still accumulates into the view */
    NB_CK_OK(nb_grad(&o, NULL, 1, &w, 1, &gw, &(nb_grad_options){.create_graph = true}));
    NB_CK_OK(nb_backward(o));
    double *want = nb_test_values_of(gw);
    nb_ck_close(nb_tensor_grad(w), want, 2, 0, 1e-15);
    free(want);
    nb_module_free(lin);
    nb_tensor_zero_grad(x); /* the failed create_graph backward may have left x a .grad with a graph */
    nb_scope_end(s);
}
END_TEST

/* An op whose backward is not differentiable fails the double backward,
 * naming it; the first-order gradient under create_graph is still right. */
START_TEST(test_double_backward_unsupported) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = leaf(NB_SHAPE(2, 2), (double[]){2, 1, 0.5, 3});
    nb_tensor *y = nb_linalg_solve(x, nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){1, -1}));
    nb_tensor *l = sum_all(nb_mul(y, y)), *g, *ref;
    NB_CK_OK(nb_grad(&l, NULL, 1, &x, 1, &ref, &(nb_grad_options){.retain_graph = true}));
    NB_CK_OK(nb_grad(&l, NULL, 1, &x, 1, &g, &(nb_grad_options){.create_graph = true}));
    double *a = nb_test_values_of(g);
    nb_ck_close(ref, a, 4, 0, 1e-15);
    free(a);
    ck_assert(nb_requires_grad(g));
    nb_tensor *gg;
    NB_CK_FAILS(nb_grad((nb_tensor *[]){sum_all(nb_mul(g, g))}, NULL, 1, &x, 1, &gg, NULL) == NB_OK,
                NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "double backward through linalg_solve is not supported"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "double backward"));
    nb_scope_end(s);
}
END_TEST

/* prod and cumprod have exact rules where an element is 0 (the harness
 * draws away from 0): their double backward there, by gradgradcheck. */
static nb_tensor *prod_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_prod(in[0], (int[]){1}, 1, false);
}
static nb_tensor *cumprod_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_cumprod(in[0], 1);
}

START_TEST(test_double_backward_at_zero) {
    nb_scope *s = nb_scope_begin();
    /* rows with no zero, one zero, two zeros */
    nb_tensor *x = leaf(NB_SHAPE(3, 4), (double[]){0.5, -1.5, 2, 0.75, 0.5, 0, 2, -1, 0, 1.25, 0, 3});
    NB_CK_OK(nb_gradgradcheck(prod_fn, &x, 1, NULL, NULL));
    NB_CK_OK(nb_gradgradcheck(cumprod_fn, &x, 1, NULL, NULL));
    nb_scope_end(s);
}
END_TEST

/* ---- a Hessian-vector product against PyTorch -------------------------------------------- */

static nb_tensor *ref_tensor(const double *v, int ndim, const int64_t *shape, bool grad) {
    nb_tensor *t = nb_test_tensor(ndim, shape, NB_F64, v);
    NB_CK_NOTNULL(t);
    if (grad) NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

/* gen_ref.py's block_loss: emb, wq, wk, wv, ln_w, ln_b, w1, b1, w2, b2 */
static nb_tensor *block_loss(nb_tensor *const *p) {
    int64_t idv[HVP_B * HVP_T], tgv[HVP_B * HVP_T];
    for (int i = 0; i < HVP_B * HVP_T; i++) idv[i] = hvp_ids[i], tgv[i] = hvp_tgt[i];
    nb_tensor *ids = nb_from_data(idv, NB_SHAPE(HVP_B, HVP_T), NB_I64);
    nb_tensor *tgt = nb_from_data(tgv, NB_SHAPE(HVP_B * HVP_T), NB_I64);
    nb_tensor *x = nb_embedding(ids, p[0], NB_NO_PADDING_IDX);
    nb_tensor *q = nb_linear(x, p[1], NULL), *k = nb_linear(x, p[2], NULL), *v = nb_linear(x, p[3], NULL);
    nb_tensor *a = nb_scaled_dot_product_attention(q, k, v, (nb_sdpa_options){.is_causal = true});
    nb_tensor *h = nb_layer_norm(nb_add(x, a), 1, (int64_t[]){HVP_D}, p[4], p[5], 1e-5);
    nb_tensor *f = nb_gelu(nb_linear(h, p[6], p[7]), NB_GELU_ERF);
    nb_tensor *logits = nb_linear(f, p[8], p[9]);
    return nb_cross_entropy(nb_reshape(logits, NB_SHAPE(HVP_B * HVP_T, HVP_V)), tgt);
}

START_TEST(test_hessian_vector_product_vs_pytorch) {
    nb_scope *s = nb_scope_begin();
    const double *init[HVP_N] = {hvp_init_emb, hvp_init_wq, hvp_init_wk, hvp_init_wv, hvp_init_ln_w,
                                 hvp_init_ln_b, hvp_init_w1, hvp_init_b1, hvp_init_w2, hvp_init_b2};
    const double *dir[HVP_N] = {hvp_dir_emb, hvp_dir_wq, hvp_dir_wk, hvp_dir_wv, hvp_dir_ln_w,
                                hvp_dir_ln_b, hvp_dir_w1, hvp_dir_b1, hvp_dir_w2, hvp_dir_b2};
    const double *grad[HVP_N] = {hvp_grad_emb, hvp_grad_wq, hvp_grad_wk, hvp_grad_wv, hvp_grad_ln_w,
                                 hvp_grad_ln_b, hvp_grad_w1, hvp_grad_b1, hvp_grad_w2, hvp_grad_b2};
    const double *hv[HVP_N] = {hvp_hv_emb, hvp_hv_wq, hvp_hv_wk, hvp_hv_wv, hvp_hv_ln_w,
                               hvp_hv_ln_b, hvp_hv_w1, hvp_hv_b1, hvp_hv_w2, hvp_hv_b2};
    const int64_t shapes[HVP_N][2] = {{HVP_V, HVP_D}, {HVP_D, HVP_D}, {HVP_D, HVP_D}, {HVP_D, HVP_D}, {HVP_D, 0},
                                      {HVP_D, 0},     {HVP_H, HVP_D}, {HVP_H, 0},     {HVP_V, HVP_H}, {HVP_V, 0}};
    nb_tensor *p[HVP_N], *v[HVP_N], *g[HVP_N], *h[HVP_N];
    for (int i = 0; i < HVP_N; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        p[i] = ref_tensor(init[i], nd, shapes[i], true);
        v[i] = ref_tensor(dir[i], nd, shapes[i], false);
    }
    nb_tensor *loss = block_loss(p);
    NB_CK_NOTNULL(loss);
    ck_assert_msg(fabs(nb_item(loss) - hvp_loss) <= 1e-12, "loss %.17g, PyTorch %.17g", nb_item(loss), hvp_loss);
    NB_CK_OK(nb_grad(&loss, NULL, 1, p, HVP_N, g, &(nb_grad_options){.create_graph = true}));
    nb_tensor *gv = NULL;
    for (int i = 0; i < HVP_N; i++) {
        nb_ck_close(g[i], grad[i], nb_numel(p[i]), 1e-12, 1e-9);
        nb_tensor *t = sum_all(nb_mul(g[i], v[i]));
        gv = gv ? nb_add(gv, t) : t;
    }
    NB_CK_OK(nb_grad(&gv, NULL, 1, p, HVP_N, h, NULL));
    for (int i = 0; i < HVP_N; i++) nb_ck_close(h[i], hv[i], nb_numel(p[i]), 1e-9, 1e-6);
    nb_scope_end(s);
}
END_TEST

/* ---- WGAN-GP against PyTorch ---------------------------------------------------------------- */

static nb_tensor *critic(nb_tensor *x, nb_tensor *const *p) {
    nb_tensor *h = nb_leaky_relu(nb_conv2d(x, p[0], p[1], (nb_conv2d_options){.padding = {1, 1}}), 0.2);
    return nb_linear(nb_flatten(h, 1, -1), p[2], p[3]);
}

START_TEST(test_wgan_gp_vs_pytorch) {
    nb_scope *s = nb_scope_begin();
    const int64_t img[4] = {GP_N, 1, 4, 4};
    const double *init[4] = {gp_init_conv_w, gp_init_conv_b, gp_init_fc_w, gp_init_fc_b};
    const double *grad[4] = {gp_grad_conv_w, gp_grad_conv_b, gp_grad_fc_w, gp_grad_fc_b};
    const double *step[4] = {gp_step_conv_w, gp_step_conv_b, gp_step_fc_w, gp_step_fc_b};
    const int64_t shp[4][4] = {{GP_C, 1, 3, 3}, {GP_C}, {1, GP_C * 16}, {1}};
    const int nds[4] = {4, 1, 2, 1};
    /* the critic's parameters live in a module, as a training loop holds them */
    nb_tensor *p[4];
    for (int i = 0; i < 4; i++) p[i] = ref_tensor(init[i], nds[i], shp[i], true);
    nb_tensor *real = ref_tensor(gp_real, 4, img, false), *fake = ref_tensor(gp_fake, 4, img, false);
    nb_tensor *alpha = ref_tensor(gp_alpha, 4, (int64_t[]){GP_N, 1, 1, 1}, false);
    nb_optimizer *opt = nb_adam_params(p, 4, (nb_adam_options){.lr = 1e-4, .betas = {0.5, 0.9}});
    NB_CK_NOTNULL(opt);

    nb_tensor *x_hat = nb_detach(nb_add(nb_mul(alpha, real), nb_mul(nb_add_scalar(nb_neg(alpha), 1), fake)));
    NB_CK_OK(nb_set_requires_grad(x_hat, true));
    nb_tensor *d_hat = critic(x_hat, p), *gx;
    NB_CK_OK(nb_grad(&d_hat, (nb_tensor *[]){nb_ones_like(d_hat)}, 1, &x_hat, 1, &gx,
                     &(nb_grad_options){.create_graph = true}));
    nb_tensor *norms = nb_norm(nb_flatten(gx, 1, -1), 2, (int[]){1}, 1, false);
    nb_tensor *dev = nb_add_scalar(norms, -1);
    nb_tensor *penalty = nb_mul_scalar(nb_mean(nb_mul(dev, dev), NULL, 0, false), gp_lambda);
    nb_tensor *d_loss = nb_add(nb_sub(nb_mean(critic(fake, p), NULL, 0, false), nb_mean(critic(real, p), NULL, 0, false)),
                               penalty);
    NB_CK_NOTNULL(d_loss);
    ck_assert_msg(fabs(nb_item(penalty) - gp_penalty) <= 1e-12, "penalty %.17g, PyTorch %.17g", nb_item(penalty),
                  gp_penalty);
    ck_assert_msg(fabs(nb_item(d_loss) - gp_d_loss) <= 1e-12, "loss %.17g, PyTorch %.17g", nb_item(d_loss), gp_d_loss);
    nb_optimizer_zero_grad(opt);
    NB_CK_OK(nb_backward(d_loss));
    for (int i = 0; i < 4; i++) nb_ck_close(nb_tensor_grad(p[i]), grad[i], nb_numel(p[i]), 1e-9, 1e-6);
    NB_CK_OK(nb_optimizer_step(opt));
    for (int i = 0; i < 4; i++) nb_ck_close(p[i], step[i], nb_numel(p[i]), 1e-9, 1e-6);
    nb_optimizer_free(opt);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_autograd_grad(void) {
    Suite *s = suite_create("autograd_grad");
    TCase *tc = tcase_create("grad");
    tcase_add_test(tc, test_grad_of_grad);
    tcase_add_test(tc, test_grad_inputs_and_outputs);
    tcase_add_test(tc, test_grad_unused);
    tcase_add_test(tc, test_retain_graph);
    tcase_add_test(tc, test_backward_create_graph);
    tcase_add_test(tc, test_double_backward_unsupported);
    tcase_add_test(tc, test_double_backward_at_zero);
    tcase_add_test(tc, test_hessian_vector_product_vs_pytorch);
    tcase_add_test(tc, test_wgan_gp_vs_pytorch);
    suite_add_tcase(s, tc);
    return s;
}
