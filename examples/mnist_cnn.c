/* mnist_cnn.c - trains the network of PyTorch's MNIST example on MNIST:
 * conv 1->32 3x3, ReLU, conv 32->64 3x3, ReLU, max_pool 2, dropout 0.25,
 * flatten, linear 9216->128, ReLU, dropout 0.5, linear 128->10; Adam (lr
 * 1e-3 for the first 2/3 of the steps, then linear to 0: --lr-schedule wsd),
 * batch 64.
 *
 *   mnist_cnn [--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--data DIR]
 *             [--save PATH] [--save-every STEPS] [--resume PATH] [--stop-after EPOCHS]
 *             [--device cpu|cuda] [--amp] [--cuda-graph] [--compile] [--distributed] [--max-steps N]
 *             [--images DIR] [--export-images DIR]
 *
 * --export-images DIR writes MNIST as torchvision's ImageFolder layout,
 * DIR/{train,test}/<digit>/<index>.png (8-bit gray, libpng), and exits.
 * --images DIR trains on those folders instead of the IDX files: each split
 * is decoded by a DataLoader (ImageFolder, gray, ToTensor and the MNIST
 * Normalize, --threads workers) and then trained on as the IDX tensors are.
 *
 * --distributed: one data-parallel rank (see mnist_mlp.c). Every rank draws
 * the same dropout masks for its own rows (one seed), as PyTorch does when
 * every rank calls manual_seed with the same value.
 *
 * Prints one line per epoch and, last, exactly
 *   final: test_accuracy=0.XXXX train_loss=X.XXXX seconds=S */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "example_common.h"
#include "nabla.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* MNIST's split as DIR/split/<label>/<index>.png. */
static nb_status export_split(const char *data, const char *dir, bool train) {
    const char *split = train ? "train" : "test";
    nb_dataset *ds = NULL;
    nb_status st = nb_mnist_load(data, train, (nb_mnist_options){.transform = NB_MNIST_UNIT}, &ds);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, split);
    mkdir(dir, 0777), mkdir(path, 0777);
    for (int d = 0; !st && d < 10; d++) {
        snprintf(path, sizeof path, "%s/%s/%d", dir, split, d);
        mkdir(path, 0777);
    }
    nb_scope *s = nb_scope_begin();
    /* bytes again: p/255 in float32 times 255 rounds back to p */
    nb_tensor *px = st ? NULL : nb_to_dtype(nb_round(nb_mul_scalar(nb_dataset_x(ds), 255.0)), NB_U8);
    int64_t *labels = NULL;
    if (!st && !px) st = nb_last_status();
    int64_t n = st ? 0 : nb_dataset_len(ds);
    if (!st && !(labels = malloc(sizeof *labels * (size_t)n))) st = nb_set_error(NB_ERR_OOM, "out of memory");
    if (!st) st = nb_to_host(nb_dataset_y(ds), labels, sizeof *labels * (size_t)n);
    for (int64_t i = 0; !st && i < n; i++) {
        nb_scope *one = nb_scope_begin();
        snprintf(path, sizeof path, "%s/%s/%lld/%05lld.png", dir, split, (long long)labels[i], (long long)i);
        st = nb_image_write_png(path, nb_select(px, 0, i));
        nb_scope_end(one);
    }
    free(labels);
    nb_scope_end(s);
    nb_dataset_free(ds);
    return st;
}

/* DIR/split decoded by a DataLoader with `workers` threads into a tensor dataset. */
static nb_dataset *folder_split(const char *dir, bool train, int workers) {
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", dir, train ? "train" : "test");
    nb_image_folder_options fo = {.mode = NB_IMAGE_GRAY,
                                  .transforms = {.normalize = true, .mean = {0.1307}, .std = {0.3081}}};
    nb_map_dataset *ds = nb_image_folder(root, fo);
    if (!ds) return NULL;
    for (int d = 0; d < 10; d++) { /* labels are the sorted class names: "0".."9" */
        char want[2] = {(char)('0' + d), 0};
        const char *c = nb_image_folder_class(ds, d);
        if (nb_image_folder_num_classes(ds) != 10 || !c || strcmp(c, want)) {
            nb_map_dataset_free(ds);
            nb_set_error(NB_ERR_FORMAT, "%s: the classes are not the digits 0..9", root);
            return NULL;
        }
    }
    nb_device dev = nb_default_device();
    nb_set_default_device(NB_CPU); /* decoded on the host (the default device is global: the workers' too) */
    nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 1000, .num_workers = workers});
    int64_t nb = dl ? nb_dataloader_num_batches(dl) : 0;
    nb_tensor **xs = calloc((size_t)(nb ? nb : 1), sizeof *xs), **ys = calloc((size_t)(nb ? nb : 1), sizeof *ys);
    nb_dataset *out = NULL;
    nb_scope *s = nb_scope_begin();
    int64_t k = 0;
    for (nb_sample b; xs && ys && dl && nb_dataloader_next(dl, &b); k++) { /* the batch's own tensors die at the next call */
        xs[k] = nb_clone(nb_sample_get(&b, "image"));
        ys[k] = nb_clone(nb_sample_get(&b, "label"));
    }
    nb_dataloader_free(dl);
    nb_set_default_device(dev);
    if (dl && xs && ys && k == nb && nb_last_status() == NB_OK) {
        nb_tensor *x = nb_cat(xs, (int)nb, 0), *y = nb_cat(ys, (int)nb, 0);
        if (x && y) out = nb_dataset_from_tensors(nb_to_device(x, dev), nb_to_device(y, dev));
    }
    nb_scope_end(s);
    free(xs), free(ys);
    nb_map_dataset_free(ds);
    return out;
}

static nb_module *make_cnn(void) {
    nb_pool2d_options pool = {.kernel = {2, 2}};
    return nb_nn_sequential(nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.stride = {1, 1}}, true), nb_nn_relu(),
                         nb_nn_max_pool2d(pool), nb_nn_dropout(0.25), nb_nn_flatten(1, -1),
                         nb_nn_linear(9216, 128), nb_nn_relu(), nb_nn_dropout(0.5), nb_nn_linear(128, 10));
}

int main(int argc, char **argv) {
    nb_example_args a = {.epochs = 3, .batch_size = 64, .lr = 1e-3, .seed = 0, .threads = 0, .data = NULL,
                         .schedule = NB_LR_WSD};
    if (nb_example_parse(argc, argv, &a) != 0) return 2;
    if (!nb_example_set_threads(argv[0], a.threads)) return 2;
    if (a.dtype == NB_F64) {
        fprintf(stderr, "mnist_cnn: --dtype float64 is mnist_mlp's (the convolutions run in float32)\n");
        return 2;
    }
    nb_manual_seed(a.seed);
    if (!nb_example_distributed_begin(argv[0], &a)) return 1;

    if (a.export_images) {
        if (export_split(a.data, a.export_images, true) || export_split(a.data, a.export_images, false)) {
            fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
            return 1;
        }
        printf("mnist_cnn: wrote 70000 PNGs under %s\n", a.export_images);
        return 0;
    }
    nb_dataset *train = NULL, *test = NULL;
    nb_mnist_options mo = {.flatten = false}; /* [N, 1, 28, 28] */
    if (a.images) {
        double t0 = now();
        train = folder_split(a.images, true, nb_get_num_threads());
        test = train ? folder_split(a.images, false, nb_get_num_threads()) : NULL;
        if (!test) {
            fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
            return 1;
        }
        printf("mnist_cnn: decoded %lld images from %s in %.2f s (%d workers)\n",
               (long long)(nb_dataset_len(train) + nb_dataset_len(test)), a.images, now() - t0, nb_get_num_threads());
    } else if (nb_mnist_load(a.data, true, mo, &train) != NB_OK || nb_mnist_load(a.data, false, mo, &test) != NB_OK) {
        fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
        return 1;
    }
    nb_module *net = make_cnn();
    if (net && !nb_example_distributed_model(argv[0], &a, net)) return 1;
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = a.lr}) : NULL;
    nb_loader_options lo = {.batch_size = a.batch_size, .shuffle = true, .seed = a.seed, .prefetch = true,
                            .pin_memory = true};
    nb_loader *loader = opt ? nb_loader_new(train, nb_example_loader_shard(&a, lo)) : NULL;
    if (!loader) {
        fprintf(stderr, "mnist_cnn: %s\n", nb_last_error());
        return 1;
    }
    char dev[32];
    printf("mnist_cnn: %lld parameters, %s, %d threads, %lld train / %lld test samples\n",
           (long long)nb_module_num_params(net), nb_device_str(a.device, dev, sizeof dev), nb_get_num_threads(), (long long)nb_dataset_len(train),
           (long long)nb_dataset_len(test));
    nb_example_result r = nb_example_train(net, opt, loader, test, &a, "mnist_cnn");
    nb_loader_free(loader);
    nb_optimizer_free(opt);
    nb_example_distributed_end(&a);
    nb_module_free(net);
    nb_dataset_free(train);
    nb_dataset_free(test);
    if (!r.ok) return 1;
    printf("final: test_accuracy=%.4f train_loss=%.4f seconds=%.2f\n", r.test_accuracy, r.train_loss, r.seconds);
    return 0;
}
