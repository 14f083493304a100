/* test_mnist_e2e.c - end to end: the README's MLP (784-512-512-10, Adam
 * 1e-3, batch 128) trains one epoch on real MNIST and must reach >= 0.95
 * test accuracy. Needs the data: data/fetch_mnist.sh (run by .ci/run). */
#include <stdio.h>
#include <stdlib.h>

#include "nb_test.h"

static double accuracy(nb_module *net, nb_dataset *test) {
    nb_loader *ld = nb_loader_new(test, (nb_loader_options){.batch_size = 1000});
    NB_CK_NOTNULL(ld);
    double correct = 0;
    nb_module_train(net, false);
    NB_NO_GRAD {
        for (nb_batch b; nb_loader_next(ld, &b);) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *pred = nb_argmax(nb_forward(net, b.x), 1, false);
            correct += nb_item(nb_sum(nb_to_dtype(nb_eq(pred, b.y), NB_F64), NULL, 0, false));
            nb_scope_end(s);
        }
    }
    nb_loader_free(ld);
    return correct / (double)nb_dataset_len(test);
}

START_TEST(mlp_one_epoch_reaches_95) {
    nb_dataset *train = NULL, *test = NULL;
    nb_mnist_options mo = {.flatten = true};
    nb_status st = nb_mnist_load(NULL, true, mo, &train);
    ck_assert_msg(st == NB_OK, "MNIST missing (run data/fetch_mnist.sh): %s", nb_last_error());
    NB_CK_OK(nb_mnist_load(NULL, false, mo, &test));
    nb_manual_seed(0);
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                   nb_nn_linear(512, 10));
    nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
    nb_loader *ld = nb_loader_new(train, (nb_loader_options){.batch_size = 128, .shuffle = true, .seed = 0});
    NB_CK_NOTNULL(ld);
    double first = -1, last = 0;
    for (nb_batch b; nb_loader_next(ld, &b);) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *loss = nb_cross_entropy(nb_forward(net, b.x), b.y);
        nb_optimizer_zero_grad(opt);
        NB_CK_OK(nb_backward(loss));
        NB_CK_OK(nb_optimizer_step(opt));
        last = nb_item(loss);
        if (first < 0) first = last;
        nb_scope_end(s);
    }
    double acc = accuracy(net, test);
    printf("mnist_e2e: first loss %.4f, last loss %.4f, test accuracy %.4f\n", first, last, acc);
    ck_assert_msg(last < first, "loss did not fall: %g -> %g", first, last);
    ck_assert_msg(acc >= 0.95, "test accuracy %.4f < 0.95 after one epoch", acc);
    nb_loader_free(ld);
    nb_optimizer_free(opt);
    nb_module_free(net);
    nb_dataset_free(train);
    nb_dataset_free(test);
}
END_TEST

Suite *nb_suite_mnist_e2e(void) {
    Suite *s = suite_create("mnist_e2e");
    TCase *tc = tcase_create("mlp");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, mlp_one_epoch_reaches_95);
    suite_add_tcase(s, tc);
    return s;
}
