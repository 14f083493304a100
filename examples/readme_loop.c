/* readme_loop.c - the training loop shown in README.md, kept compiling by
 * tests/run_all.sh, which builds it against the installed library with
 * pkg-config. */
#include <nabla.h>   /* cc train.c $(pkg-config --cflags --libs nabla) */
#include <stdio.h>

int main(void) {
    nb_dataset *train;
    if (nb_mnist_load(NULL, true, (nb_mnist_options){.flatten = true}, &train) != NB_OK)
        return fprintf(stderr, "%s\n", nb_last_error()), 1;
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 10));
    nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
    nb_loader *loader = nb_loader_new(train, (nb_loader_options){.batch_size = 128, .shuffle = true});
    for (nb_batch b; nb_loader_next(loader, &b);) {
        nb_scope *step = nb_scope_begin();      /* temporaries and the tape die with the scope */
        nb_tensor *loss = nb_cross_entropy(nb_forward(net, b.x), b.y);
        nb_optimizer_zero_grad(opt);
        nb_backward(loss);
        nb_optimizer_step(opt);
        printf("loss %.4f\n", nb_item(loss));
        nb_scope_end(step);
    }
    nb_loader_free(loader), nb_optimizer_free(opt), nb_module_free(net), nb_dataset_free(train);
}
