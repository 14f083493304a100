/* test_autocast.c - nb_autocast_begin/end (torch.autocast) on every device:
 * the lists' casts, float32 gradients for float32 parameters close to a
 * float32 run's, backward outside autocast, nesting, float64 untouched, the
 * errors, an MLP whose autocast training tracks float32 training,
 * cross_entropy on 16-bit logits with the explicit cast's bits, the
 * convolutions in bfloat16, the cast cache filled ahead, the casts kept
 * between steps for a fused Adam's parameters, and linear's float32
 * gradients of autocast's casts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

#define FOR_DEVICES(dev)                                                                          \
    for (int t_ = 0; t_ < NB_DEVICE_TYPE_COUNT; t_++)                                             \
        for (int i_ = 0; i_ < nb_device_count((nb_device_type)t_); i_++)                         \
            for (nb_device dev = {(nb_device_type)t_, i_}; dev.index == i_; dev.index = -1)

/* A parameter: scale * N(0, 1) from g on dev, a leaf that requires grad (in the current scope). */
static nb_tensor *rand_param(int ndim, const int64_t *shape, double scale, nb_generator *g, nb_device dev) {
    nb_tensor *p = nb_detach(nb_mul_scalar(nb_randn_on(ndim, shape, NB_F32, g, dev), scale));
    NB_CK_OK(nb_set_requires_grad(p, true));
    return p;
}

/* n class labels in [0, 10) from g on dev (int64). */
static nb_tensor *class_labels(int64_t n, nb_generator *g, nb_device dev) {
    return nb_to_dtype(nb_mul_scalar(nb_rand_on(1, (int64_t[]){n}, NB_F64, g, dev), 9.99), NB_I64);
}

/* Linear(in, hidden), ReLU, Linear(hidden, 10) made on dev (the default device restored to the CPU). */
static nb_module *mlp_on(nb_device dev, int64_t in, int64_t hidden) {
    NB_CK_OK(nb_set_default_device(dev));
    nb_module *net = nb_nn_sequential(nb_nn_linear(in, hidden), nb_nn_relu(), nb_nn_linear(hidden, 10));
    NB_CK_OK(nb_set_default_device(NB_CPU));
    return net;
}

/* sum |t.grad|, read to the host. */
static double grad_abs_sum(nb_tensor *t) { return nb_item(nb_sum(nb_abs(nb_tensor_grad(t)), NULL, 0, false)); }

/* The |gradient| sums of an autocast run within bfloat16's error (3%) of a float32 run's. */
static void ck_grads_close(const double *got, const double *ref, int n) {
    for (int k = 0; k < n; k++)
        ck_assert_msg(fabs(got[k] - ref[k]) <= 3e-2 * ref[k], "grad %d: |g| %g under autocast, %g in float32", k,
                      got[k], ref[k]);
}

START_TEST(test_autocast_errors) {
    NB_CK_FAILS(nb_autocast_begin(NB_CPU, NB_F32) == NB_OK, NB_ERR_DTYPE);
    NB_CK_FAILS(nb_autocast_end(NB_CPU) == NB_OK, NB_ERR_STATE);
    ck_assert(!nb_autocast_is_enabled(NB_CPU));
    NB_CK_OK(nb_autocast_begin(NB_CPU, NB_BF16));
    NB_CK_OK(nb_autocast_begin(NB_CPU, NB_F16)); /* nested: the inner dtype applies */
    ck_assert(nb_autocast_is_enabled(NB_CPU));
    ck_assert_int_eq(nb_autocast_get_dtype(NB_CPU), NB_F16);
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(2, 3), NB_F32), *b = nb_ones(NB_SHAPE(3, 2), NB_F32);
    ck_assert_int_eq(nb_dtype_of(nb_matmul(a, b)), NB_F16);
    NB_CK_OK(nb_autocast_end(NB_CPU));
    ck_assert_int_eq(nb_autocast_get_dtype(NB_CPU), NB_BF16);
    ck_assert_int_eq(nb_dtype_of(nb_matmul(a, b)), NB_BF16);
    /* float64 is never cast */
    nb_tensor *a64 = nb_ones(NB_SHAPE(2, 3), NB_F64), *b64 = nb_ones(NB_SHAPE(3, 2), NB_F64);
    ck_assert_int_eq(nb_dtype_of(nb_matmul(a64, b64)), NB_F64);
    NB_CK_OK(nb_autocast_end(NB_CPU));
    ck_assert(!nb_autocast_is_enabled(NB_CPU));
    ck_assert_int_eq(nb_autocast_get_dtype(NB_CPU), NB_F32);
    ck_assert_int_eq(nb_dtype_of(nb_matmul(a, b)), NB_F32);
    nb_scope_end(s);
}
END_TEST

/* linear -> gelu -> linear -> cross_entropy with and without autocast: the
 * dtypes along the way, and the float32 gradients within bfloat16's error. */
START_TEST(test_autocast_lists_and_grads) {
    FOR_DEVICES(dev) {
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(3);
        nb_tensor *x = nb_randn_on(NB_SHAPE(16, 32), NB_F32, &g, dev);
        nb_tensor *w1 = rand_param(NB_SHAPE(64, 32), 0.2, &g, dev), *w2 = rand_param(NB_SHAPE(10, 64), 0.2, &g, dev);
        nb_tensor *y = class_labels(16, &g, dev);
        double ref[2] = {0}, got[2] = {0};
        for (int ac = 0; ac < 2; ac++) {
            nb_tensor_zero_grad(w1), nb_tensor_zero_grad(w2);
            if (ac) NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
            nb_tensor *h = nb_linear(x, w1, NULL);
            ck_assert_int_eq(nb_dtype_of(h), ac ? NB_BF16 : NB_F32);
            nb_tensor *a = nb_gelu(h, NB_GELU_ERF); /* not on a list: runs in its input's dtype */
            ck_assert_int_eq(nb_dtype_of(a), ac ? NB_BF16 : NB_F32);
            nb_tensor *logits = nb_linear(a, w2, NULL);
            nb_tensor *p = nb_softmax(logits, -1); /* float32 list */
            ck_assert_int_eq(nb_dtype_of(p), NB_F32);
            nb_tensor *loss = nb_cross_entropy(logits, y);
            ck_assert_int_eq(nb_dtype_of(loss), NB_F32);
            if (ac) NB_CK_OK(nb_autocast_end(dev));
            NB_CK_OK(nb_backward(loss));
            ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(w1)), NB_F32); /* the master weights' dtype */
            double *out = ac ? got : ref;
            out[0] = grad_abs_sum(w1), out[1] = grad_abs_sum(w2);
        }
        ck_grads_close(got, ref, 2);
        nb_scope_end(s);
    }
}
END_TEST

/* conv2d (with bias) -> relu -> conv_transpose2d under autocast: on CUDA
 * both convolutions run in bfloat16 (the lower-precision list, as
 * PyTorch), on the CPU in float32 (no 16-bit convolution kernel there);
 * the float32 parameters get float32 gradients within bfloat16's error of
 * a float32 run's. */
START_TEST(test_autocast_conv) {
    FOR_DEVICES(dev) {
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(5);
        nb_tensor *x = nb_randn_on(NB_SHAPE(4, 3, 10, 10), NB_F32, &g, dev);
        nb_tensor *w = rand_param(NB_SHAPE(8, 3, 3, 3), 0.3, &g, dev), *b = rand_param(NB_SHAPE(8), 0.3, &g, dev);
        nb_tensor *wt = rand_param(NB_SHAPE(8, 2, 3, 3), 0.3, &g, dev);
        nb_tensor *params[3] = {w, b, wt};
        double ref[3] = {0}, got[3] = {0};
        for (int ac = 0; ac < 2; ac++) {
            for (int k = 0; k < 3; k++) nb_tensor_zero_grad(params[k]);
            if (ac) NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
            nb_tensor *h = nb_conv2d(x, w, b, (nb_conv2d_options){.stride = {1, 1}, .padding = {1, 1}});
            const nb_dtype lp = ac && dev.type != NB_DEVICE_CPU ? NB_BF16 : NB_F32;
            ck_assert_int_eq(nb_dtype_of(h), lp);
            nb_tensor *y = nb_conv_transpose2d(nb_relu(h), wt, NULL,
                                               (nb_conv_transpose2d_options){.stride = {2, 2}, .padding = {1, 1}});
            ck_assert_int_eq(nb_dtype_of(y), lp);
            nb_tensor *loss = nb_sum(nb_mul(y, y), NULL, 0, false); /* float32 list */
            ck_assert_int_eq(nb_dtype_of(loss), NB_F32);
            if (ac) NB_CK_OK(nb_autocast_end(dev));
            NB_CK_OK(nb_backward(loss));
            double *out = ac ? got : ref;
            for (int k = 0; k < 3; k++) {
                ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(params[k])), NB_F32);
                out[k] = grad_abs_sum(params[k]);
            }
        }
        ck_grads_close(got, ref, 3);
        /* conv3d is on no list: float32 in, float32 out (its 2-d taps not cast) */
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *v = nb_randn_on(NB_SHAPE(1, 2, 4, 5, 5), NB_F32, &g, dev);
        nb_tensor *w3 = nb_randn_on(NB_SHAPE(3, 2, 2, 3, 3), NB_F32, &g, dev);
        ck_assert_int_eq(nb_dtype_of(nb_conv3d(v, w3, NULL, (nb_conv3d_options){0})), NB_F32);
        ck_assert_int_eq(nb_dtype_of(nb_conv2d(x, w, b, (nb_conv2d_options){0})), dev.type == NB_DEVICE_CPU ? NB_F32
                                                                                                            : NB_BF16);
        NB_CK_OK(nb_autocast_end(dev));
        nb_scope_end(s);
    }
}
END_TEST

/* cross_entropy of bfloat16 logits under autocast reads them as float32 in
 * the fused kernel instead of casting them first: the loss, its dtype and
 * the 16-bit gradient have the bits of the explicit cast's path, with an
 * ignored target; the mean counts in float32 (4095 is no bfloat16). Rows
 * of 37 classes start at every 16-byte offset (the CUDA backward's
 * vectors begin at each row's first boundary); 30522 is BERT's vocabulary;
 * rows of 5 are shorter than a vector. */
START_TEST(test_autocast_cross_entropy_16bit_logits) {
    const int64_t shapes[3][2] = {{4095, 37}, {33, 30522}, {64, 5}}; /* every 16-byte offset; BERT's; < 8 */
    FOR_DEVICES(dev) for (int z = 0; z < 3; z++) {
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(5);
        const int64_t N = shapes[z][0], C = shapes[z][1];
        nb_tensor *base = nb_to_dtype(nb_mul_scalar(nb_randn_on(NB_SHAPE(N, C), NB_F32, &g, dev), 3.0), NB_BF16);
        nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand_on(NB_SHAPE(N), NB_F64, &g, dev), C - 1e-3), NB_I64);
        NB_CK_OK(nb_fill_(nb_narrow(y, 0, 7, 1), -100)); /* one ignored row */
        nb_tensor *lg[2], *loss[2];
        for (int k = 0; k < 2; k++) {
            lg[k] = nb_detach(nb_contiguous(base));
            NB_CK_OK(nb_set_requires_grad(lg[k], true));
            if (k == 0) { /* autocast: the fused kernel on 16-bit logits */
                NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
                loss[k] = nb_cross_entropy(lg[k], y);
                NB_CK_OK(nb_autocast_end(dev));
            } else { /* the explicit cast */
                loss[k] = nb_cross_entropy(nb_to_dtype(lg[k], NB_F32), y);
            }
            NB_CK_NOTNULL(loss[k]);
            ck_assert_int_eq(nb_dtype_of(loss[k]), NB_F32);
            NB_CK_OK(nb_backward(loss[k]));
        }
        ck_assert(nb_item(loss[0]) == nb_item(loss[1]));
        nb_tensor *g0 = nb_tensor_grad(lg[0]), *g1 = nb_tensor_grad(lg[1]);
        ck_assert_int_eq(nb_dtype_of(g0), NB_BF16);
        ck_assert(nb_item(nb_sum(nb_ne(g0, g1), NULL, 0, false)) == 0);
        nb_scope_end(s);
    }
}
END_TEST

/* The mnist_mlp network on fixed random data: 40 Adam steps with autocast
 * lower the loss as float32 training does (within 5%). */
START_TEST(test_autocast_training) {
    FOR_DEVICES(dev) {
        double final[2];
        for (int ac = 0; ac < 2; ac++) {
            nb_manual_seed(11);
            nb_module *net = mlp_on(dev, 64, 128);
            nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 3e-3});
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(5);
            nb_tensor *x = nb_randn_on(NB_SHAPE(128, 64), NB_F32, &g, dev);
            nb_tensor *y = class_labels(128, &g, dev);
            for (int step = 0; step < 40; step++) {
                nb_scope *st = nb_scope_begin();
                nb_optimizer_zero_grad(opt);
                if (ac) NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
                nb_tensor *loss = nb_cross_entropy(nb_forward(net, x), y);
                if (ac) NB_CK_OK(nb_autocast_end(dev));
                NB_CK_OK(nb_backward(loss));
                NB_CK_OK(nb_optimizer_step(opt));
                final[ac] = nb_item(loss);
                nb_scope_end(st);
            }
            nb_scope_end(s);
            nb_optimizer_free(opt);
            nb_module_free(net);
        }
        ck_assert_msg(final[0] < 1.5, "float32 training did not learn: %g", final[0]);
        ck_assert_msg(fabs(final[1] - final[0]) <= 0.05 * final[0] + 0.02, "loss %g with autocast, %g in float32",
                      final[1], final[0]);
    }
}
END_TEST

/* nb_autocast_cache_params: five Adam steps of an MLP under autocast give
 * the same loss and parameter bits with the cache filled ahead (one
 * multi-tensor cast on CUDA) as with the casts made on first use, with
 * tensors autocast would not cast in the list (float64, not requiring
 * grad, listed twice) and a call outside a region; ops read the cached
 * casts; the errors. */
START_TEST(test_autocast_cache_params) {
    NB_CK_FAILS(nb_autocast_cache_params(NULL, 2) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_autocast_cache_params(NULL, -1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_autocast_cache_params((nb_tensor *[]){NULL}, 1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_OK(nb_autocast_cache_params(NULL, 0));
    FOR_DEVICES(dev) {
        double loss[2];
        nb_tensor *w_end[2] = {NULL, NULL};
        for (int pre = 0; pre < 2; pre++) {
            nb_manual_seed(21);
            nb_module *net = mlp_on(dev, 48, 96);
            nb_named_tensor ps[8];
            int np = nb_module_parameters(net, ps, 8);
            ck_assert_int_eq(np, 4);
            nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 3e-3});
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(9);
            nb_tensor *x = nb_randn_on(NB_SHAPE(32, 48), NB_F32, &g, dev);
            nb_tensor *y = class_labels(32, &g, dev);
            nb_tensor *f64 = nb_randn_on(NB_SHAPE(3), NB_F64, &g, dev);
            NB_CK_OK(nb_set_requires_grad(f64, true));
            nb_tensor *list[7] = {ps[0].tensor, ps[1].tensor, ps[2].tensor, ps[3].tensor, ps[0].tensor, x, f64};
            NB_CK_OK(nb_autocast_cache_params(list, 7)); /* no region open: nothing to do */
            for (int step = 0; step < 5; step++) {
                nb_scope *st = nb_scope_begin();
                nb_optimizer_zero_grad(opt);
                NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
                if (pre) NB_CK_OK(nb_autocast_cache_params(list, 7));
                nb_tensor *out = nb_forward(net, x);
                ck_assert_int_eq(nb_dtype_of(out), NB_BF16);
                nb_tensor *l = nb_cross_entropy(out, y);
                NB_CK_OK(nb_autocast_end(dev));
                NB_CK_OK(nb_backward(l));
                ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(ps[0].tensor)), NB_F32);
                ck_assert_ptr_null(nb_tensor_grad(f64)); /* never cast, never used */
                NB_CK_OK(nb_optimizer_step(opt));
                loss[pre] = nb_item(l);
                nb_scope_end(st);
            }
            w_end[pre] = nb_to_device(ps[0].tensor, NB_CPU);
            nb_retain(w_end[pre]);
            nb_scope_end(s);
            nb_optimizer_free(opt);
            nb_module_free(net);
        }
        ck_assert_msg(loss[0] == loss[1], "loss %.9g with the cache filled ahead, %.9g without", loss[1], loss[0]);
        size_t bytes = sizeof(float) * (size_t)nb_numel(w_end[0]);
        float *h0 = malloc(bytes), *h1 = malloc(bytes);
        ck_assert(h0 && h1);
        NB_CK_OK(nb_to_host(w_end[0], h0, bytes));
        NB_CK_OK(nb_to_host(w_end[1], h1, bytes));
        ck_assert_msg(!memcmp(h0, h1, bytes), "the first layer's weights differ after 5 steps");
        free(h0), free(h1);
        nb_release(w_end[0]), nb_release(w_end[1]);
        /* the cache is what the op reads: on the CPU, a weight changed
         * behind nabla's back (its version counter unmoved) still computes
         * with the cast cached ahead, so doubling it (exact in bfloat16)
         * doubles only a fresh region's output; a write through an op moves
         * the counter, and the op casts again */
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(4);
        nb_tensor *x = nb_randn_on(NB_SHAPE(4, 8), NB_F32, &g, dev);
        nb_tensor *w = rand_param(NB_SHAPE(5, 8), 1.0, &g, dev);
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        NB_CK_OK(nb_autocast_cache_params(&w, 1));
        if (dev.type == NB_DEVICE_CPU) {
            float *p = nb_data_ptr(w);
            for (int64_t k = 0; k < nb_numel(w); k++) p[k] *= 2;
        } else {
            bool prev = nb_set_grad_enabled(false);
            NB_CK_OK(nb_copy_(w, nb_mul_scalar(w, 2.0)));
            nb_set_grad_enabled(prev);
        }
        nb_tensor *cached = nb_to_dtype(nb_linear(x, w, NULL), NB_F32);
        NB_CK_OK(nb_autocast_end(dev));
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *fresh = nb_to_dtype(nb_linear(x, w, NULL), NB_F32);
        NB_CK_OK(nb_autocast_end(dev));
        bool same = false;
        NB_CK_OK(nb_allclose(dev.type == NB_DEVICE_CPU ? nb_mul_scalar(cached, 2.0) : cached, fresh, 0, 0, false,
                             &same));
        ck_assert_msg(same, dev.type == NB_DEVICE_CPU ? "linear did not read the cast cached ahead"
                                                      : "linear read a cast made before an in-place write");
        nb_scope_end(s);
    }
}
END_TEST

/* A parameter written in place inside a region (a step, a fill) is cast
 * again: the cache keys its casts by the storage's version counter. */
START_TEST(test_autocast_cache_sees_inplace_writes) {
    FOR_DEVICES(dev) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *w = nb_full_on(NB_SHAPE(4, 4), 1, NB_F32, dev), *x = nb_full_on(NB_SHAPE(2, 4), 1, NB_F32, dev);
        NB_CK_OK(nb_set_requires_grad(w, true));
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        double before = nb_item(nb_sum(nb_to_dtype(nb_matmul(x, w), NB_F32), NULL, 0, false)); /* 2*4*4 ones: 32 */
        NB_NO_GRAD {
            NB_CK_OK(nb_fill_(w, 2));
        }
        double after = nb_item(nb_sum(nb_to_dtype(nb_matmul(x, w), NB_F32), NULL, 0, false));
        NB_CK_OK(nb_autocast_end(dev));
        ck_assert(before == 32);
        ck_assert_msg(after == 64, "the cast made before the write was served (%g)", after);
        nb_scope_end(s);
    }
}
END_TEST

/* A parameter that a fused Adam/AdamW updates keeps its autocast cast
 * between regions: from the third step on (the first step's update marks
 * it, the second's forward keeps its cast, that step's update writes it),
 * the forward reads the copy the optimizer wrote, launching one cast (a
 * copy-slot call) fewer per parameter, with the loss and weight bits of a
 * run whose parameters are cast every step (their version counters moved
 * by hand after each step, which makes a kept copy stale); an in-place
 * write after a step makes the next region cast the new values. */
START_TEST(test_autocast_kept_copies) {
    FOR_DEVICES(dev) {
        double loss[2];
        uint64_t fwd_calls[2] = {0, 0};
        nb_tensor *w_end[2] = {NULL, NULL};
        for (int stale = 0; stale < 2; stale++) {
            nb_manual_seed(31);
            nb_module *net = mlp_on(dev, 48, 96);
            nb_named_tensor ps[8];
            ck_assert_int_eq(nb_module_parameters(net, ps, 8), 4);
            nb_optimizer *opt = nb_adamw(net, (nb_adam_options){.lr = 3e-3});
            nb_scope *s = nb_scope_begin();
            nb_generator g = nb_generator_new(9);
            nb_tensor *x = nb_randn_on(NB_SHAPE(32, 48), NB_F32, &g, dev);
            nb_tensor *y = class_labels(32, &g, dev);
            for (int step = 0; step < 5; step++) {
                nb_scope *st = nb_scope_begin();
                nb_optimizer_zero_grad(opt);
                NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
                uint64_t c0 = nb_device_counters_get(dev).kernel_calls;
                nb_tensor *l = nb_cross_entropy(nb_forward(net, x), y);
                if (step == 4) fwd_calls[stale] = nb_device_counters_get(dev).kernel_calls - c0;
                NB_CK_OK(nb_autocast_end(dev));
                NB_CK_OK(nb_backward(l));
                ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(ps[0].tensor)), NB_F32);
                NB_CK_OK(nb_optimizer_step(opt));
                for (int k = 0; stale && k < 4; k++) nb_increment_version(ps[k].tensor);
                loss[stale] = nb_item(l);
                nb_scope_end(st);
            }
            w_end[stale] = nb_to_device(nb_detach(nb_clone(ps[0].tensor)), NB_CPU); /* before the write below */
            nb_retain(w_end[stale]);
            if (!stale) { /* an in-place write after the step: the region casts the new values */
                NB_NO_GRAD {
                    NB_CK_OK(nb_mul_scalar_(ps[0].tensor, 2));
                }
                NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
                nb_tensor *got = nb_linear(x, ps[0].tensor, NULL);
                NB_CK_OK(nb_autocast_end(dev));
                nb_tensor *want = nb_linear(nb_to_dtype(x, NB_BF16), nb_to_dtype(ps[0].tensor, NB_BF16), NULL);
                nb_ck_bitwise(got, want);
            }
            nb_scope_end(s);
            nb_optimizer_free(opt);
            nb_module_free(net);
        }
        ck_assert_msg(loss[0] == loss[1], "loss %.9g with kept copies, %.9g casting every step", loss[0], loss[1]);
        nb_ck_bitwise(w_end[0], w_end[1]);
        ck_assert_msg(fwd_calls[1] - fwd_calls[0] == 4,
                      "the forward made %llu kernel calls with kept copies, %llu casting every step (4 casts "
                      "fewer expected)",
                      (unsigned long long)fwd_calls[0], (unsigned long long)fwd_calls[1]);
        nb_release(w_end[0]), nb_release(w_end[1]);
    }
}
END_TEST

static nb_status double_grad(nb_tensor *grad, nb_tensor **replace, void *user) {
    (void)user;
    *replace = nb_mul_scalar(grad, 2);
    return *replace ? NB_OK : nb_last_status();
}

/* A permuted view of a parameter (F.linear(x, W.t()), GPT-2's Conv1D with
 * W [in, out]) is cast through the parameter's cached cast: the output is
 * that of a contiguous W^T, W's gradient comes back contiguous in W's own
 * layout (close to the contiguous copy's, transposed), a hook on the view
 * and nb_grad with the view as an input still see its gradient, and on the CPU a
 * weight doubled behind nabla's back after nb_autocast_cache_params still
 * computes with the cast cached ahead. */
START_TEST(test_autocast_permuted_param) {
    FOR_DEVICES(dev) {
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(12);
        nb_tensor *x = nb_randn_on(NB_SHAPE(6, 8), NB_F32, &g, dev);
        nb_tensor *w = rand_param(NB_SHAPE(8, 5), 1.0, &g, dev), *b = rand_param(NB_SHAPE(5), 1.0, &g, dev);
        nb_tensor *wt = nb_detach(nb_contiguous(nb_transpose(w, 0, 1))), *bt = nb_detach(nb_clone(b));
        NB_CK_OK(nb_set_requires_grad(wt, true));
        NB_CK_OK(nb_set_requires_grad(bt, true));
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *y1 = nb_linear(x, nb_transpose(w, 0, 1), b), *y2 = nb_linear(x, wt, bt);
        NB_CK_OK(nb_autocast_end(dev));
        ck_assert_int_eq(nb_dtype_of(y1), NB_BF16);
        nb_ck_close_to(y1, y2, 0.05);
        NB_CK_OK(nb_backward(nb_sum(nb_pow_scalar(nb_to_dtype(y1, NB_F32), 2), NULL, 0, false)));
        NB_CK_OK(nb_backward(nb_sum(nb_pow_scalar(nb_to_dtype(y2, NB_F32), 2), NULL, 0, false)));
        nb_tensor *gw = nb_tensor_grad(w);
        ck_assert_int_eq(nb_dtype_of(gw), NB_F32);
        nb_ck_shape(gw, 2, (int64_t[]){8, 5});
        ck_assert(nb_is_contiguous(gw));
        double scale = nb_item(nb_amax(nb_abs(nb_tensor_grad(wt)), NULL, 0, false));
        nb_ck_close_to(gw, nb_contiguous(nb_transpose(nb_tensor_grad(wt), 0, 1)), 0.02 * scale);
        nb_ck_close_to(nb_tensor_grad(b), nb_tensor_grad(bt), 0.02 * scale);
        /* the view's own node stays in the graph: a hook on W.t() that
         * doubles its gradient doubles W's, and nb_grad reaches W.t() */
        nb_tensor *gw1 = nb_clone(gw);
        nb_tensor_zero_grad(w);
        nb_tensor *wv = nb_transpose(w, 0, 1);
        ck_assert(nb_register_hook(wv, double_grad, NULL) > 0);
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *y4 = nb_linear(x, wv, b);
        NB_CK_OK(nb_autocast_end(dev));
        nb_tensor *l4 = nb_sum(nb_pow_scalar(nb_to_dtype(y4, NB_F32), 2), NULL, 0, false);
        nb_tensor *gv = NULL;
        NB_CK_OK(nb_grad(&l4, NULL, 1, &wv, 1, &gv, &(nb_grad_options){.retain_graph = true}));
        nb_ck_shape(gv, 2, (int64_t[]){5, 8});
        NB_CK_OK(nb_backward(l4));
        nb_ck_close_to(nb_tensor_grad(w), nb_mul_scalar(gw1, 2), 1e-6 * scale);
        if (dev.type == NB_DEVICE_CPU) {
            NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
            NB_CK_OK(nb_autocast_cache_params(&w, 1));
            float *p = nb_data_ptr(w);
            for (int64_t k = 0; k < nb_numel(w); k++) p[k] *= 2;
            nb_tensor *y3 = nb_linear(x, nb_transpose(w, 0, 1), b);
            NB_CK_OK(nb_autocast_end(dev));
            bool same = false;
            NB_CK_OK(nb_allclose(nb_to_dtype(y3, NB_F32), nb_to_dtype(y1, NB_F32), 0, 0, false, &same));
            ck_assert_msg(same, "linear(x, W.t()) did not read W's cast cached ahead");
        }
        nb_scope_end(s);
    }
}
END_TEST

/* Under autocast, linear's weight, bias and input gradients come from the GEMM in
 * float32 (nb_grad_f32_ok): the float32 sums, not sums rounded to 16 bits
 * and cast back. Inputs are 16-bit values, so the float64 host sums are
 * exact references and float32 sums meet them within 1e-5 where a 16-bit
 * rounding would leave up to 2^-9; the same for a 3-d input's gradient
 * (through linear's reshapes). Weights plain, transposed (GPT-2's Conv1D)
 * and without a bias; on a GPU also a large unaligned product (the
 * padded GEMM). A weight whose cast feeds two linears and a matmul sums
 * float32 and 16-bit gradients; an explicit nb_to_dtype (not autocast's)
 * keeps the 16-bit gradient its hooks would see, and one to the same dtype
 * does not give the caller's seed to the leaf as its .grad. */
START_TEST(test_autocast_linear_grads_float32) {
    const int64_t sizes[3][3] = {{64, 48, 96}, {37, 13, 29}, {1024, 768, 2601}}; /* rows, in, out */
    FOR_DEVICES(dev) {
        const int n_dt = dev.type == NB_DEVICE_CPU ? 1 : 2;
        for (int di = 0; di < n_dt; di++)
            for (int z = 0; z < (dev.type == NB_DEVICE_CPU ? 2 : 3); z++)
                for (int form = 0; form < 3; form++) { /* W [O, I] with a bias, W [I, O] used as W.t(), no bias */
                    nb_dtype dt = di ? NB_F16 : NB_BF16;
                    int64_t R = sizes[z][0], I = sizes[z][1], O = sizes[z][2];
                    nb_scope *s = nb_scope_begin();
                    nb_generator g = nb_generator_new(31 + z);
                    /* 16-bit values held in float32 (the casts keep them exactly) */
                    nb_tensor *x = nb_to_dtype(nb_to_dtype(nb_randn_on(NB_SHAPE(R, I), NB_F32, &g, dev), dt), NB_F32);
                    nb_tensor *r = nb_to_dtype(nb_to_dtype(nb_randn_on(NB_SHAPE(R, O), NB_F32, &g, dev), dt), NB_F32);
                    int64_t ws[2] = {form == 1 ? I : O, form == 1 ? O : I};
                    nb_tensor *w = nb_detach(nb_to_dtype(nb_to_dtype(nb_randn_on(2, ws, NB_F32, &g, dev), dt), NB_F32));
                    nb_tensor *b = form == 2 ? NULL : nb_detach(nb_full_on(NB_SHAPE(O), 0.0, NB_F32, dev));
                    NB_CK_OK(nb_set_requires_grad(w, true));
                    if (b) NB_CK_OK(nb_set_requires_grad(b, true));
                    x = nb_detach(x);
                    if (form == 0) NB_CK_OK(nb_set_requires_grad(x, true)); /* and used as [1, R, I] */
                    NB_CK_OK(nb_autocast_begin(dev, dt));
                    nb_tensor *y =
                        nb_linear(form == 0 ? nb_unsqueeze(x, 0) : x, form == 1 ? nb_transpose(w, 0, 1) : w, b);
                    NB_CK_OK(nb_autocast_end(dev));
                    ck_assert_msg(y != NULL, "%s", nb_last_error());
                    /* d loss / d y = r, exactly a 16-bit value */
                    NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(y, NB_F32), form == 0 ? nb_unsqueeze(r, 0) : r),
                                                NULL, 0, false)));
                    double *xv = nb_test_values_of(x), *rv = nb_test_values_of(r);
                    double *ww = calloc((size_t)(I * O), sizeof *ww), *wb = calloc((size_t)O, sizeof *wb);
                    ck_assert(ww && wb);
                    for (int64_t row = 0; row < R; row++)
                        for (int64_t o = 0; o < O; o++) {
                            double gv = rv[row * O + o];
                            wb[o] += gv;
                            for (int64_t in = 0; in < I; in++)
                                ww[form == 1 ? in * O + o : o * I + in] += xv[row * I + in] * gv;
                        }
                    nb_tensor *gw = nb_tensor_grad(w);
                    ck_assert_int_eq(nb_dtype_of(gw), NB_F32);
                    ck_assert(nb_is_contiguous(gw));
                    double e = nb_test_rel_err(gw, ww, I * O);
                    char dn[16];
                    ck_assert_msg(e < 1e-5, "%s %s [%lld, %lld, %lld] form %d: weight gradient off by %g of its "
                                  "largest (rounded to 16 bits?)", nb_device_str(dev, dn, sizeof dn), nb_dtype_name(dt),
                                  (long long)R, (long long)I, (long long)O, form, e);
                    if (b) {
                        e = nb_test_rel_err(nb_tensor_grad(b), wb, O);
                        ck_assert_msg(e < 1e-5, "form %d: bias gradient off by %g of its largest", form, e);
                    }
                    if (form == 0) { /* x's gradient through the reshapes: r w in float32 */
                        double *wv = nb_test_values_of(w), *wx = calloc((size_t)(R * I), sizeof *wx);
                        ck_assert(wv && wx);
                        for (int64_t row = 0; row < R; row++)
                            for (int64_t o = 0; o < O; o++)
                                for (int64_t in = 0; in < I; in++) wx[row * I + in] += rv[row * O + o] * wv[o * I + in];
                        e = nb_test_rel_err(nb_tensor_grad(x), wx, R * I);
                        ck_assert_msg(e < 1e-5, "input gradient off by %g of its largest", e);
                        free(wv), free(wx);
                    }
                    free(xv), free(rv), free(ww), free(wb);
                    nb_scope_end(s);
                }
        nb_scope *s = nb_scope_begin();
        nb_generator g = nb_generator_new(5);
        nb_tensor *x = nb_to_dtype(nb_to_dtype(nb_randn_on(NB_SHAPE(16, 8), NB_F32, &g, dev), NB_BF16), NB_F32);
        nb_tensor *u = nb_to_dtype(nb_to_dtype(nb_randn_on(NB_SHAPE(16, 4), NB_F32, &g, dev), NB_BF16), NB_F32);
        nb_tensor *w = rand_param(NB_SHAPE(4, 8), 1.0, &g, dev);
        nb_tensor *w64 = nb_detach(nb_to_dtype(w, NB_F64));
        NB_CK_OK(nb_set_requires_grad(w64, true));
        /* W's one cached cast feeds two linears (float32 gradients) and a matmul (a bfloat16 one) */
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *y = nb_add(nb_linear(x, w, NULL), nb_linear(nb_mul_scalar(x, 2), w, NULL));
        nb_tensor *z = nb_matmul(u, w);
        NB_CK_OK(nb_autocast_end(dev));
        ck_assert_int_eq(nb_dtype_of(y), NB_BF16);
        NB_CK_OK(nb_backward(nb_add(nb_sum(nb_to_dtype(y, NB_F32), NULL, 0, false),
                                    nb_sum(nb_to_dtype(z, NB_F32), NULL, 0, false))));
        nb_tensor *x64 = nb_to_dtype(x, NB_F64), *u64 = nb_to_dtype(u, NB_F64);
        NB_CK_OK(nb_backward(nb_add(nb_sum(nb_matmul(nb_mul_scalar(x64, 3), nb_transpose(w64, 0, 1)), NULL, 0, false),
                                    nb_sum(nb_matmul(u64, w64), NULL, 0, false))));
        ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(w)), NB_F32);
        nb_ck_close_to(nb_tensor_grad(w), nb_tensor_grad(w64), 0.05); /* the matmul's part rounded to bfloat16 */
        /* a bfloat16 weight (no cast) beside a float32 bias: the weight's gradient in its own dtype, the
         * bias's the float32 sums */
        nb_tensor *wh = nb_detach(nb_to_dtype(w, NB_BF16)), *bf = rand_param(NB_SHAPE(4), 1.0, &g, dev);
        NB_CK_OK(nb_set_requires_grad(wh, true));
        nb_tensor *r = nb_to_dtype(nb_to_dtype(nb_randn_on(NB_SHAPE(16, 4), NB_F32, &g, dev), NB_BF16), NB_F32);
        NB_CK_OK(nb_autocast_begin(dev, NB_BF16));
        nb_tensor *yh = nb_linear(x, wh, bf);
        NB_CK_OK(nb_autocast_end(dev));
        NB_CK_OK(nb_backward(nb_sum(nb_mul(nb_to_dtype(yh, NB_F32), r), NULL, 0, false)));
        ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(wh)), NB_BF16);
        ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(bf)), NB_F32);
        nb_ck_close_to(nb_tensor_grad(bf), nb_sum(nb_to_dtype(r, NB_F64), (int[]){0}, 1, false), 1e-5);
        nb_ck_close_to(nb_tensor_grad(wh), nb_matmul(nb_transpose(nb_to_dtype(r, NB_F64), 0, 1), x64), 0.1);
        /* a cast to the same dtype hands the caller's seed on, and the leaf must not keep it as .grad */
        nb_tensor *v = nb_detach(nb_full_on(NB_SHAPE(3), 1.0, NB_F32, dev));
        nb_tensor *seed = nb_full_on(NB_SHAPE(3), 2.0, NB_F32, dev);
        NB_CK_OK(nb_set_requires_grad(v, true));
        NB_CK_OK(nb_backward_with(nb_to_dtype(v, NB_F32), seed));
        NB_CK_OK(nb_fill_(seed, 7));
        ck_assert(nb_item(nb_sum(nb_tensor_grad(v), NULL, 0, false)) == 6);
        /* an explicit cast is the user's tensor: its gradient stays 16-bit, rounded once */
        nb_tensor_zero_grad(w);
        nb_tensor *wb = nb_to_dtype(w, NB_BF16);
        NB_CK_OK(nb_backward(nb_sum(nb_to_dtype(nb_linear(nb_to_dtype(x, NB_BF16), wb, NULL), NB_F32), NULL, 0,
                                    false)));
        nb_tensor *gw = nb_tensor_grad(w);
        nb_ck_close_to(gw, nb_to_dtype(nb_to_dtype(gw, NB_BF16), NB_F32), 0);
        nb_scope_end(s);
    }
}
END_TEST

Suite *nb_suite_autocast(void) {
    Suite *s = suite_create("autocast");
    TCase *c = tcase_create("autocast");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, test_autocast_errors);
    tcase_add_test(c, test_autocast_lists_and_grads);
    tcase_add_test(c, test_autocast_training);
    tcase_add_test(c, test_autocast_cross_entropy_16bit_logits);
    tcase_add_test(c, test_autocast_conv);
    tcase_add_test(c, test_autocast_cache_params);
    tcase_add_test(c, test_autocast_cache_sees_inplace_writes);
    tcase_add_test(c, test_autocast_kept_copies);
    tcase_add_test(c, test_autocast_permuted_param);
    tcase_add_test(c, test_autocast_linear_grads_float32);
    suite_add_tcase(s, c);
    return s;
}
