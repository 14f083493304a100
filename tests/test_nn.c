/* test_nn.c - modules: dotted parameter names and shapes (PyTorch's
 * state_dict names), Linear's initialisation bounds and order, forward
 * values against hand-computed results, train/eval propagation, ownership
 * on failure (NULL children, duplicate names) and the module tree's
 * bookkeeping (cache invalidation, detaching a freed child); nn.init: the
 * gain table, fans, the xavier/kaiming bounds and variances, trunc_normal_'s
 * range and moments (also far in a tail), determinism by generator, and
 * the errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"

static void ck_named(const nb_named_tensor *nt, const char *name, int ndim, const int64_t *shape) {
    ck_assert_str_eq(nt->name, name);
    nb_ck_shape(nt->tensor, ndim, shape);
    ck_assert(nb_requires_grad(nt->tensor));
}

/* Overwrites a float64 parameter with host values. */
static void set_f64(nb_tensor *t, const double *v) {
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_copy_from_host(t, v, sizeof(double) * (size_t)nb_numel(t)));
}

START_TEST(test_sequential_names) {
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 10));
    NB_CK_NOTNULL(net);
    ck_assert_str_eq(nb_module_kind(net), "Sequential");
    ck_assert_int_eq(nb_module_num_children(net), 3);
    ck_assert_str_eq(nb_module_kind(nb_module_child(net, "0")), "Linear");
    ck_assert_str_eq(nb_module_kind(nb_module_child(net, "1")), "ReLU");
    ck_assert_str_eq(nb_module_child_name(net, 2), "2");
    ck_assert_ptr_null(nb_module_child(net, "3"));
    nb_named_tensor p[8];
    ck_assert_int_eq(nb_module_parameters(net, NULL, 0), 4);
    ck_assert_int_eq(nb_module_parameters(net, p, 8), 4);
    ck_named(&p[0], "0.weight", NB_SHAPE(512, 784));
    ck_named(&p[1], "0.bias", NB_SHAPE(512));
    ck_named(&p[2], "2.weight", NB_SHAPE(10, 512));
    ck_named(&p[3], "2.bias", NB_SHAPE(10));
    ck_assert_ptr_eq(p[0].tensor, nb_module_get(nb_module_child(net, "0"), "weight"));
    /* cap smaller than the count: the count, and only cap entries written */
    nb_named_tensor q[2] = {{NULL, NULL}, {NULL, NULL}};
    ck_assert_int_eq(nb_module_parameters(net, q, 1), 4);
    ck_assert_str_eq(q[0].name, "0.weight");
    ck_assert_ptr_null(q[1].name);
    ck_assert_int_eq(nb_module_buffers(net, NULL, 0), 0);
    ck_assert_int_eq(nb_module_num_params(net), 784 * 512 + 512 + 512 * 10 + 10);
    nb_module_free(net);
}
END_TEST

/* A user-defined kind: y = fc2(tanh(fc1(x))) * scale. */
static nb_tensor *two_layer_forward(nb_module *m, nb_tensor *x) {
    nb_tensor *h = nb_tanh(nb_forward(nb_module_child(m, "fc1"), x));
    return nb_mul(nb_forward(nb_module_child(m, "fc2"), h), nb_module_get(m, "scale"));
}
static const nb_module_ops two_layer_ops = {"TwoLayer", two_layer_forward, NULL, NULL};

START_TEST(test_named_children) {
    nb_module *m = nb_module_new(&two_layer_ops, NULL);
    NB_CK_NOTNULL(m);
    /* no scope is open: nb_zeros' reference is ours to hand to the module */
    NB_CK_OK(nb_module_register_parameter(m, "scale", nb_zeros(NB_SHAPE(1), NB_F32)));
    NB_CK_OK(nb_module_add(m, "fc1", nb_nn_linear(4, 3)));
    nb_named_tensor p[8];
    ck_assert_int_eq(nb_module_parameters(m, p, 8), 3); /* cached now ... */
    NB_CK_OK(nb_module_add(m, "fc2", nb_nn_linear(3, 2)));  /* ... and invalidated */
    NB_CK_OK(nb_module_register_buffer(m, "count", nb_zeros(NB_SHAPE(1), NB_I64)));
    ck_assert_int_eq(nb_module_parameters(m, p, 8), 5);
    ck_named(&p[0], "scale", NB_SHAPE(1));
    ck_named(&p[1], "fc1.weight", NB_SHAPE(3, 4));
    ck_named(&p[2], "fc1.bias", NB_SHAPE(3));
    ck_named(&p[3], "fc2.weight", NB_SHAPE(2, 3));
    ck_named(&p[4], "fc2.bias", NB_SHAPE(2));
    nb_named_tensor b[2];
    ck_assert_int_eq(nb_module_buffers(m, b, 2), 1);
    ck_assert_str_eq(b[0].name, "count");
    ck_assert(!nb_requires_grad(b[0].tensor));

    /* nesting two levels deep, and invalidation from a grandchild upwards */
    nb_module *root = nb_nn_sequential(m, nb_nn_relu());
    NB_CK_NOTNULL(root);
    ck_assert_int_eq(nb_module_parameters(root, p, 8), 5);
    ck_assert_str_eq(p[1].name, "0.fc1.weight");
    NB_CK_OK(nb_module_add(nb_module_child(root, "0"), "fc3", nb_nn_linear_ex(2, 2, false, NB_F32)));
    ck_assert_int_eq(nb_module_parameters(root, p, 8), 6);
    ck_assert_str_eq(p[5].name, "0.fc3.weight");
    ck_assert_ptr_eq(nb_module_child(root, "0.fc3"), nb_module_child(m, "fc3"));
    ck_assert_int_eq(nb_module_buffers(root, b, 2), 1);
    ck_assert_str_eq(b[0].name, "0.count");
    ck_assert_int_eq(nb_module_num_params(root), 1 + 12 + 3 + 6 + 2 + 4);

    /* forward through the user kind */
    nb_scope *s = nb_scope_begin();
    NB_CK_OK(nb_fill_(nb_module_get(m, "scale"), 2.0));
    nb_tensor *y = nb_forward(root, nb_ones(NB_SHAPE(5, 4), NB_F32));
    nb_ck_shape(y, NB_SHAPE(5, 2));
    nb_scope_end(s);
    nb_module_free(root);
}
END_TEST

START_TEST(test_linear_init_bounds) {
    nb_manual_seed(1234);
    const int64_t in = 256, out = 64;
    nb_module *lin = nb_nn_linear_ex(in, out, true, NB_F64);
    NB_CK_NOTNULL(lin);
    nb_tensor *w = nb_module_get(lin, "weight"), *b = nb_module_get(lin, "bias");
    nb_ck_shape(w, NB_SHAPE(64, 256));
    nb_ck_shape(b, NB_SHAPE(64));
    static double wv[64 * 256], bv[64];
    nb_test_values(w, wv, in * out);
    nb_test_values(b, bv, out);
    double bound = 1.0 / sqrt((double)in), sum = 0, sq = 0;
    for (int64_t i = 0; i < in * out; i++) {
        ck_assert_msg(fabs(wv[i]) <= bound * (1 + 1e-12), "weight %lld = %g", (long long)i, wv[i]);
        sum += wv[i];
    }
    double mean = sum / (double)(in * out);
    for (int64_t i = 0; i < in * out; i++) sq += (wv[i] - mean) * (wv[i] - mean);
    double sd = sqrt(sq / (double)(in * out - 1)), want = bound / sqrt(3.0);
    /* U(-b, b) has sd b/sqrt(3); with 16384 samples the estimate is within ~1% */
    ck_assert_msg(fabs(sd - want) < 0.03 * want, "weight std %g, expected ~%g", sd, want);
    ck_assert_msg(fabs(mean) < 0.03 * want, "weight mean %g", mean);
    double bmax = 0;
    for (int i = 0; i < out; i++) {
        ck_assert(fabs(bv[i]) <= bound * (1 + 1e-12));
        if (fabs(bv[i]) > bmax) bmax = fabs(bv[i]);
    }
    ck_assert(bmax > 0.5 * bound); /* drawn, not left at 0 */

    /* weight first, then bias, from the default generator: the same draws by hand */
    nb_manual_seed(1234);
    nb_tensor *w2 = nb_empty(NB_SHAPE(64, 256), NB_F64);
    nb_tensor *b2 = nb_empty(NB_SHAPE(64), NB_F64);
    double a = sqrt(5.0), wb = sqrt(3.0) * (sqrt(2.0 / (1.0 + a * a)) / sqrt(256.0));
    NB_CK_OK(nb_uniform_(w2, -wb, wb, NULL));
    NB_CK_OK(nb_uniform_(b2, -bound, bound, NULL));
    nb_ck_close(w2, wv, in * out, 0, 0);
    nb_ck_close(b2, bv, out, 0, 0);
    nb_module_free(lin);

    nb_module *nobias = nb_nn_linear_ex(3, 2, false, NB_F32);
    ck_assert_ptr_null(nb_module_get(nobias, "bias"));
    ck_assert_int_eq(nb_module_parameters(nobias, NULL, 0), 1);
    ck_assert_int_eq(nb_dtype_of(nb_module_get(nobias, "weight")), NB_F32);
    nb_module_free(nobias);
    NB_CK_FAILS(nb_nn_linear(-1, 3), NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_linear_ex(2, 3, true, NB_I32), NB_ERR_DTYPE);
}
END_TEST

START_TEST(test_linear_forward_values) {
    nb_module *lin = nb_nn_linear_ex(3, 2, true, NB_F64);
    NB_CK_NOTNULL(lin);
    set_f64(nb_module_get(lin, "weight"), (const double[]){1, 2, 3, 4, 5, 6});
    set_f64(nb_module_get(lin, "bias"), (const double[]){0.5, -1});
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3), NB_F64, (const double[]){1, 0, -1, 2, 1, 0});
    nb_tensor *y = nb_forward(lin, x);
    nb_ck_shape(y, NB_SHAPE(2, 2));
    /* y = x W^T + b: [1-3+0.5, 4-6-1], [2+2+0.5, 8+5-1] */
    nb_ck_close(y, (const double[]){-1.5, -3, 4.5, 12}, 4, 0, 1e-15);
    NB_CK_OK(nb_backward(nb_sum(y, NULL, 0, false)));
    /* d sum / dW[j, :] = sum over rows of x; d sum / db[j] = batch size */
    nb_ck_close(nb_tensor_grad(nb_module_get(lin, "weight")), (const double[]){3, 1, -1, 3, 1, -1}, 6, 0, 1e-15);
    nb_ck_close(nb_tensor_grad(nb_module_get(lin, "bias")), (const double[]){2, 2}, 2, 0, 1e-15);
    /* wrong feature size: linear's shape error, and NULL in gives NULL out */
    NB_CK_FAILS(nb_forward(lin, nb_zeros(NB_SHAPE(2, 4), NB_F64)), NB_ERR_SHAPE);
    nb_clear_error();
    ck_assert_ptr_null(nb_forward(lin, NULL));
    ck_assert_int_ne(nb_last_status(), NB_OK);
    NB_CK_FAILS(nb_forward(NULL, x), NB_ERR_INVALID_ARG);
    nb_scope_end(s);
    nb_module_zero_grad(lin);
    ck_assert_ptr_null(nb_tensor_grad(nb_module_get(lin, "weight")));
    nb_module_free(lin);
}
END_TEST

START_TEST(test_sequential_forward_values) {
    nb_module *l1 = nb_nn_linear_ex(2, 2, true, NB_F64), *l2 = nb_nn_linear_ex(2, 1, true, NB_F64);
    set_f64(nb_module_get(l1, "weight"), (const double[]){1, -1, 2, 1});
    set_f64(nb_module_get(l1, "bias"), (const double[]){0, -1});
    set_f64(nb_module_get(l2, "weight"), (const double[]){3, -2});
    set_f64(nb_module_get(l2, "bias"), (const double[]){0.25});
    nb_module *net = nb_nn_sequential(l1, nb_nn_relu(), l2);
    NB_CK_NOTNULL(net);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 2), NB_F64, (const double[]){1, 2, -1, 0.5});
    /* h = relu([1-2, 2+2-1], [-1-0.5, -2+0.5-1]) = [0, 3], [0, 0]; y = 3h0 - 2h1 + 0.25 */
    nb_ck_close(nb_forward(net, x), (const double[]){-5.75, 0.25}, 2, 0, 1e-15);
    nb_scope_end(s);
    nb_module_free(net);

    s = nb_scope_begin();
    nb_tensor *z = nb_test_tensor(NB_SHAPE(1, 2, 2), NB_F64, (const double[]){0, 1, -2, 0.5});
    nb_module *sig = nb_nn_sigmoid(), *th = nb_nn_tanh(), *fl = nb_nn_flatten(1, -1);
    nb_ck_close(nb_forward(sig, z),
                (const double[]){0.5, 1 / (1 + exp(-1.0)), 1 / (1 + exp(2.0)), 1 / (1 + exp(-0.5))}, 4, 0,
                1e-15);
    nb_ck_close(nb_forward(th, z), (const double[]){0, tanh(1.0), tanh(-2.0), tanh(0.5)}, 4, 0, 1e-15);
    nb_tensor *f = nb_forward(fl, z);
    nb_ck_shape(f, NB_SHAPE(1, 4));
    nb_ck_close(f, (const double[]){0, 1, -2, 0.5}, 4, 0, 0);
    ck_assert_str_eq(nb_module_kind(fl), "Flatten");
    nb_scope_end(s);
    nb_module_free(sig);
    nb_module_free(th);
    nb_module_free(fl);
}
END_TEST

START_TEST(test_train_eval) {
    nb_module *inner = nb_nn_sequential(nb_nn_linear(2, 2), nb_nn_tanh());
    nb_module *net = nb_nn_sequential(inner, nb_nn_linear(2, 1));
    NB_CK_NOTNULL(net);
    ck_assert(nb_module_is_training(net));
    nb_module_train(net, false);
    ck_assert(!nb_module_is_training(net));
    ck_assert(!nb_module_is_training(inner));
    ck_assert(!nb_module_is_training(nb_module_child(net, "0.1")));
    ck_assert(!nb_module_is_training(nb_module_child(net, "1")));
    nb_module_train(inner, true); /* a subtree only */
    ck_assert(nb_module_is_training(nb_module_child(net, "0.0")));
    ck_assert(!nb_module_is_training(net));
    nb_module_train(net, true);
    ck_assert(nb_module_is_training(nb_module_child(net, "1")));
    nb_module_free(net);
}
END_TEST

START_TEST(test_null_children) {
    /* a failed constructor: the others are freed, its error is kept. (The
     * NULL-terminated nb_nn_sequential sees a failure only in first place: a
     * later NULL reads as its end marker; the array form sees any.) */
    NB_CK_FAILS(nb_nn_sequential(nb_nn_linear_ex(2, 2, true, NB_BOOL)), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_nn_sequential_array((nb_module *[]){nb_nn_linear(2, 2), nb_nn_relu(), nb_nn_linear(2, -3)}, 3),
                NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "linear") != NULL, "message: %s", nb_last_error());
    nb_clear_error();
    ck_assert_ptr_null(nb_nn_sequential_array((nb_module *[]){nb_nn_linear(2, 2), NULL, nb_nn_tanh()}, 3));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    nb_module *empty = nb_nn_sequential_array(NULL, 0);
    NB_CK_NOTNULL(empty);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(2), NB_F32);
    ck_assert_ptr_eq(nb_forward(empty, x), x); /* an empty Sequential is the identity */
    nb_scope_end(s);
    nb_module_free(empty);

    nb_module *m = nb_nn_sequential(nb_nn_relu());
    NB_CK_FAILS(nb_module_add(m, "x", NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_register_parameter(m, "w", NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_nn_sequential_append(NULL, nb_nn_relu()) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_new(NULL, NULL), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_module_parameters(NULL, NULL, 0), -1);
    nb_module_free(NULL);
    nb_module_free(m);
}
END_TEST

START_TEST(test_duplicate_names) {
    nb_module *m = nb_module_new(&two_layer_ops, NULL);
    NB_CK_OK(nb_module_add(m, "fc1", nb_nn_linear(2, 2)));
    NB_CK_FAILS(nb_module_add(m, "fc1", nb_nn_linear(2, 2)) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "fc1") != NULL, "message: %s", nb_last_error());
    NB_CK_FAILS(nb_module_add(m, "", nb_nn_linear(2, 2)) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_add(m, "a.b", nb_nn_linear(2, 2)) == NB_OK, NB_ERR_INVALID_ARG);
    /* parameters, buffers and children share one namespace, as attributes do */
    NB_CK_FAILS(nb_module_register_parameter(m, "fc1", nb_zeros(NB_SHAPE(1), NB_F32)) == NB_OK,
                NB_ERR_INVALID_ARG);
    nb_module *fc1 = nb_module_child(m, "fc1");
    NB_CK_FAILS(nb_module_register_buffer(fc1, "weight", nb_zeros(NB_SHAPE(1), NB_F32)) == NB_OK,
                NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_register_parameter(m, "n", nb_zeros(NB_SHAPE(1), NB_I32)) == NB_OK,
                NB_ERR_DTYPE);
    /* a module already in a tree can't be added again, nor a module to itself */
    NB_CK_FAILS(nb_module_add(m, "again", fc1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_module_add(fc1, "loop", m) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_module_num_children(m), 1);
    ck_assert_int_eq(nb_module_parameters(m, NULL, 0), 2);
    nb_module_free(m);
}
END_TEST

START_TEST(test_tree_edits_and_append) {
    nb_module *net = nb_nn_sequential(nb_nn_linear(2, 3), nb_nn_relu());
    NB_CK_OK(nb_nn_sequential_append(net, nb_nn_linear(3, 4)));
    nb_named_tensor p[4];
    ck_assert_int_eq(nb_module_parameters(net, p, 4), 4);
    ck_assert_str_eq(p[2].name, "2.weight");
    NB_CK_FAILS(nb_nn_sequential_append(nb_module_child(net, "0"), nb_nn_relu()) == NB_OK, NB_ERR_INVALID_ARG);
    /* freeing a child detaches it from its parent */
    nb_module_free(nb_module_child(net, "0"));
    ck_assert_int_eq(nb_module_num_children(net), 2);
    ck_assert_int_eq(nb_module_parameters(net, p, 4), 2);
    ck_assert_str_eq(p[0].name, "2.weight");
    nb_module_free(net);

    /* a parameter shared by two modules is listed once (PyTorch's remove_duplicate) */
    nb_module *a = nb_nn_linear(2, 2);
    nb_tensor *w = nb_module_get(a, "weight");
    nb_module *b = nb_module_new(&two_layer_ops, NULL);
    NB_CK_OK(nb_module_register_parameter(b, "tied", w)); /* b takes its own reference */
    nb_module *both = nb_nn_sequential(a, b);
    ck_assert_int_eq(nb_module_parameters(both, p, 4), 2);
    ck_assert_str_eq(p[0].name, "0.weight");
    ck_assert_str_eq(p[1].name, "0.bias");
    int np = -1;
    nb_tensor **pl = nb_module_parameter_list(both, &np); /* the same tensors */
    ck_assert_ptr_nonnull(pl);
    ck_assert_int_eq(np, 2);
    ck_assert_ptr_eq(pl[0], w);
    ck_assert_ptr_eq(pl[1], p[1].tensor);
    free(pl);
    ck_assert_int_eq(nb_module_num_params(both), 6);
    nb_module_free(both);
}
END_TEST

START_TEST(test_forward_without_scope) {
    /* with no scope open, results go to the thread's root scope: releasing
     * it frees each step's activations and tape; x, retained, survives */
    nb_module *net = nb_nn_sequential(nb_nn_linear(8, 16), nb_nn_relu(), nb_nn_linear(16, 4), nb_nn_tanh());
    NB_CK_NOTNULL(net);
    nb_tensor *x = nb_ones(NB_SHAPE(3, 8), NB_F32);
    nb_retain(x); /* ours, past the root scope's release */
    size_t before = nb_memory_stats_get(NB_CPU).allocated;
    for (int i = 0; i < 3; i++) {
        nb_tensor *y = nb_forward(net, x);
        nb_ck_shape(y, NB_SHAPE(3, 4));
        nb_tensor *loss = nb_sum(y, NULL, 0, false);
        NB_CK_OK(nb_backward(loss));
        nb_module_zero_grad(net);
        ck_assert_uint_gt(nb_scope_root_size(), 0);
        nb_scope_release_root();
        ck_assert_uint_eq(nb_scope_root_size(), 0);
    }
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).allocated, before);
    nb_release(x);
    nb_module_free(net);
}
END_TEST

/* ---- nn.init ---------------------------------------------------------------- */

START_TEST(init_gain_and_fans) {
    ck_assert(nb_init_calculate_gain("linear", NAN) == 1);
    ck_assert(nb_init_calculate_gain("conv_transpose3d", NAN) == 1);
    ck_assert(nb_init_calculate_gain("sigmoid", NAN) == 1);
    ck_assert(fabs(nb_init_calculate_gain("tanh", NAN) - 5.0 / 3) < 1e-15);
    ck_assert(nb_init_calculate_gain("relu", NAN) == sqrt(2.0));
    ck_assert(nb_init_calculate_gain("selu", NAN) == 0.75);
    ck_assert(nb_init_calculate_gain("leaky_relu", NAN) == sqrt(2.0 / (1 + 0.01 * 0.01)));
    ck_assert(nb_init_calculate_gain("leaky_relu", sqrt(5.0)) == sqrt(2.0 / 6));
    ck_assert(isnan(nb_init_calculate_gain("swish", NAN)));
    ck_assert_int_eq(nb_last_status(), NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "swish"));
    ck_assert(isnan(nb_init_calculate_gain("leaky_relu", INFINITY)));
    nb_scope *s = nb_scope_begin();
    int64_t fi = 0, fo = 0;
    NB_CK_OK(nb_init_calculate_fan_in_and_fan_out(nb_zeros(NB_SHAPE(4, 3, 2, 5), NB_F32), &fi, &fo));
    ck_assert_int_eq(fi, 30);
    ck_assert_int_eq(fo, 40);
    NB_CK_FAILS(nb_init_calculate_fan_in_and_fan_out(nb_zeros(NB_SHAPE(4), NB_F32), &fi, &fo) == NB_OK,
                NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

/* Mean and variance of t's values; the largest |value| into *amax. */
static void moments(nb_tensor *t, double *mean, double *var, double *amax) {
    double *v = nb_test_values_of(t), s = 0, q = 0, m = 0;
    int64_t n = nb_numel(t);
    for (int64_t i = 0; i < n; i++) s += v[i], m = fabs(v[i]) > m ? fabs(v[i]) : m;
    for (int64_t i = 0; i < n; i++) q += (v[i] - s / (double)n) * (v[i] - s / (double)n);
    *mean = s / (double)n, *var = q / (double)(n - 1), *amax = m;
    free(v);
}

/* a [O, I, 3, 3] weight (O I 9 = 98304 draws): uniform bound b has variance
 * b^2 / 3; the bounds hold exactly, the variance to about 2% (many standard
 * errors) */
static void ck_fill(nb_tensor *w, bool uniform, double want_std) {
    double mean, var, amax;
    moments(w, &mean, &var, &amax);
    ck_assert_msg(fabs(sqrt(var) / want_std - 1) < 0.02, "std %g, want %g", sqrt(var), want_std);
    ck_assert_msg(fabs(mean) < 0.02 * want_std, "mean %g", mean);
    if (uniform) ck_assert(amax <= sqrt(3.0) * want_std && amax > 0.99 * sqrt(3.0) * want_std);
}

START_TEST(init_xavier_kaiming) {
    nb_scope *s = nb_scope_begin();
    enum { O = 128, I = 48 };
    double fi = I * 9, fo = O * 9;
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F32 : NB_F64;
        nb_tensor *w = nb_empty(NB_SHAPE(O, I, 3, 3), dt);
        nb_generator g = nb_generator_new(3);
        NB_CK_OK(nb_init_xavier_uniform_(w, 2, &g));
        ck_fill(w, true, 2 * sqrt(2 / (fi + fo)));
        NB_CK_OK(nb_init_xavier_normal_(w, 1, &g));
        ck_fill(w, false, sqrt(2 / (fi + fo)));
        NB_CK_OK(nb_init_kaiming_uniform_(w, 0, NB_FAN_IN, NULL, &g)); /* PyTorch's defaults: gain sqrt(2) */
        ck_fill(w, true, sqrt(2 / fi));
        NB_CK_OK(nb_init_kaiming_uniform_(w, sqrt(5.0), NB_FAN_IN, "leaky_relu", &g)); /* nn.Linear's and Conv's */
        ck_fill(w, true, sqrt(2.0 / 6) / sqrt(fi));
        NB_CK_OK(nb_init_kaiming_normal_(w, 0, NB_FAN_OUT, "relu", &g));
        ck_fill(w, false, sqrt(2 / fo));
        NB_CK_OK(nb_init_kaiming_normal_(w, 0, NB_FAN_IN, "tanh", &g));
        ck_fill(w, false, 5.0 / 3 / sqrt(fi));
    }
    /* the same generator state, the same values */
    nb_tensor *a = nb_empty(NB_SHAPE(5, 7), NB_F32), *b = nb_empty(NB_SHAPE(5, 7), NB_F32);
    nb_generator g1 = nb_generator_new(9), g2 = nb_generator_new(9);
    NB_CK_OK(nb_init_kaiming_normal_(a, 0, NB_FAN_IN, NULL, &g1));
    NB_CK_OK(nb_init_kaiming_normal_(b, 0, NB_FAN_IN, NULL, &g2));
    ck_assert(nb_item(nb_sum(nb_ne(a, b), NULL, 0, false)) == 0);
    nb_scope_end(s);
}
END_TEST

/* truncated normal moments: Z = Phi(beta) - Phi(alpha), mean = mu + sigma
 * (phi(alpha) - phi(beta)) / Z, var = sigma^2 (1 + (alpha phi(alpha) - beta
 * phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z)^2) */
static void trunc_moments(double mu, double sigma, double a, double b, double *mean, double *var) {
    double al = (a - mu) / sigma, be = (b - mu) / sigma;
    double pa = exp(-al * al / 2) / sqrt(2 * M_PI), pb = exp(-be * be / 2) / sqrt(2 * M_PI);
    double Z = al >= 0 ? 0.5 * (erfc(al / sqrt(2.0)) - erfc(be / sqrt(2.0)))
                       : 0.5 * (erfc(-be / sqrt(2.0)) - erfc(-al / sqrt(2.0)));
    double r = (pa - pb) / Z;
    *mean = mu + sigma * r, *var = sigma * sigma * (1 + (al * pa - be * pb) / Z - r * r);
}

START_TEST(init_trunc_normal) {
    nb_scope *s = nb_scope_begin();
    /* PyTorch's defaults; a shifted, scaled one; one 4 to 5 standard deviations out */
    const double cfg[3][4] = {{0, 1, -2, 2}, {1.5, 0.02, 1.46, 1.55}, {0, 1, 4, 5}};
    for (int c = 0; c < 3; c++)
        for (int d = 0; d < 2; d++) {
            nb_dtype dt = d ? NB_F32 : NB_F64;
            nb_tensor *t = nb_empty(NB_SHAPE(400, 250), dt);
            nb_generator g = nb_generator_new(21);
            NB_CK_OK(nb_init_trunc_normal_(t, cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], &g));
            double want_m, want_v, mean, var, amax;
            trunc_moments(cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], &want_m, &want_v);
            moments(t, &mean, &var, &amax);
            double se = sqrt(want_v / 1e5);
            ck_assert_msg(fabs(mean - want_m) < 6 * se, "config %d: mean %.9g, want %.9g", c, mean, want_m);
            ck_assert_msg(fabs(var / want_v - 1) < 0.03, "config %d: var %g, want %g", c, var, want_v);
            ck_assert(nb_item(nb_sum(nb_lt_scalar(t, (float)cfg[c][2]), NULL, 0, false)) == 0);
            ck_assert(nb_item(nb_sum(nb_gt_scalar(t, (float)cfg[c][3]), NULL, 0, false)) == 0);
            ck_assert(nb_item(nb_sum(nb_logical_not(nb_isfinite(t)), NULL, 0, false)) == 0);
        }
    /* infinite bounds: the plain normal */
    nb_tensor *t = nb_empty(NB_SHAPE(100000), NB_F64);
    NB_CK_OK(nb_init_trunc_normal_(t, 0, 2, -INFINITY, INFINITY, NULL));
    double mean, var, amax;
    moments(t, &mean, &var, &amax);
    ck_assert(fabs(mean) < 0.03 && fabs(var / 4 - 1) < 0.03 && isfinite(amax));
    NB_CK_FAILS(nb_init_trunc_normal_(t, 0, 0, -2, 2, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_init_trunc_normal_(t, 0, 1, 2, -2, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_init_trunc_normal_(t, NAN, 1, -2, 2, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

START_TEST(init_constants_and_errors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *i = nb_empty(NB_SHAPE(2, 3), NB_I64);
    NB_CK_OK(nb_init_constant_(i, 7));
    nb_ck_close(i, (double[]){7, 7, 7, 7, 7, 7}, 6, 0, 0);
    NB_CK_OK(nb_init_zeros_(i));
    nb_ck_close(i, (double[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    NB_CK_OK(nb_init_ones_(i));
    nb_ck_close(i, (double[]){1, 1, 1, 1, 1, 1}, 6, 0, 0);
    /* the random fills take float tensors only, and a fan needs 2 dims */
    NB_CK_FAILS(nb_init_xavier_uniform_(i, 1, NULL) == NB_OK, NB_ERR_DTYPE);
    NB_CK_FAILS(nb_init_kaiming_normal_(i, 0, NB_FAN_IN, NULL, NULL) == NB_OK, NB_ERR_DTYPE);
    NB_CK_FAILS(nb_init_trunc_normal_(i, 0, 1, -2, 2, NULL) == NB_OK, NB_ERR_DTYPE);
    nb_tensor *v = nb_zeros(NB_SHAPE(5), NB_F32);
    NB_CK_FAILS(nb_init_xavier_normal_(v, 1, NULL) == NB_OK, NB_ERR_SHAPE);
    NB_CK_FAILS(nb_init_kaiming_uniform_(v, 0, NB_FAN_IN, NULL, NULL) == NB_OK, NB_ERR_SHAPE);
    nb_tensor *w = nb_zeros(NB_SHAPE(5, 4), NB_F32);
    NB_CK_FAILS(nb_init_kaiming_uniform_(w, 0, (nb_init_fan_mode)7, NULL, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_init_kaiming_uniform_(w, 0, NB_FAN_IN, "softmax", NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_init_xavier_uniform_(w, INFINITY, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    /* empty tensors are left alone (PyTorch: a no-op) */
    nb_tensor *e = nb_empty(NB_SHAPE(0, 4), NB_F32);
    NB_CK_OK(nb_init_xavier_uniform_(e, 1, NULL));
    NB_CK_OK(nb_init_kaiming_normal_(e, 0, NB_FAN_OUT, NULL, NULL));
    NB_CK_OK(nb_init_trunc_normal_(e, 0, 1, -2, 2, NULL));
    /* parameters are filled without autograd */
    nb_module *lin = nb_nn_linear(4, 3);
    nb_named_tensor p[2];
    ck_assert_int_eq(nb_module_parameters(lin, p, 2), 2);
    NB_CK_OK(nb_init_xavier_uniform_(p[0].tensor, 1, NULL));
    NB_CK_OK(nb_init_zeros_(p[1].tensor));
    ck_assert_ptr_null(nb_tensor_grad(p[0].tensor));
    ck_assert(nb_item(nb_sum(nb_abs(p[1].tensor), NULL, 0, false)) == 0);
    nb_module_free(lin);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_nn(void) {
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("modules");
    tcase_add_test(tc, test_sequential_names);
    tcase_add_test(tc, test_named_children);
    tcase_add_test(tc, test_linear_init_bounds);
    tcase_add_test(tc, test_linear_forward_values);
    tcase_add_test(tc, test_sequential_forward_values);
    tcase_add_test(tc, test_train_eval);
    tcase_add_test(tc, test_null_children);
    tcase_add_test(tc, test_duplicate_names);
    tcase_add_test(tc, test_tree_edits_and_append);
    tcase_add_test(tc, test_forward_without_scope);
    tcase_add_test(tc, init_gain_and_fans);
    tcase_add_test(tc, init_xavier_kaiming);
    tcase_add_test(tc, init_trunc_normal);
    tcase_add_test(tc, init_constants_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
