/* bench_loader.c - DataLoader throughput over an image folder, beside
 * tests/bench/loader_ref.py (torchvision's ImageFolder and DataLoader with
 * the same transforms and num_workers): one epoch of RandomCrop(28,
 * padding 2), RandomHorizontalFlip, ToTensor and Normalize over N RGB
 * 32x32 PNGs in 10 classes, batch 256, shuffled.
 *
 *   bench_loader --dir DIR [--images N] [--workers W] [--prefetch P] [--threads T] [--train-cuda]
 * writes the images into DIR first when DIR has none (a pattern per image);
 * prints: workload=loader images=N workers=W nabla images_per_s=... seconds=...
 * --train-cuda: the batches go to GPU 0 (pin_memory, the copy stream) and
 * train a small CNN (conv 3->32 3x3, ReLU, conv 32->64 3x3 stride 2, ReLU,
 * flatten, linear -> 10; Adam), one step per batch read back with nb_item;
 * prints the epoch's seconds, the seconds the loop waited in
 * nb_dataloader_next for a batch (data_wait_s), and of those the wait for
 * the first batch (first_wait_s: the workers start with the epoch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "nabla.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int make_images(const char *dir, int n) {
    char p[4200];
    mkdir(dir, 0777);
    for (int c = 0; c < 10; c++) {
        snprintf(p, sizeof p, "%s/class%d", dir, c);
        mkdir(p, 0777);
    }
    uint8_t px[3 * 32 * 32];
    for (int i = 0; i < n; i++) {
        nb_scope *s = nb_scope_begin();
        for (int k = 0; k < 3 * 32 * 32; k++) px[k] = (uint8_t)((k * 31 + i * 17 + (k / 32) * (i % 7)) % 256);
        snprintf(p, sizeof p, "%s/class%d/%06d.png", dir, i % 10, i);
        nb_status st = nb_image_write_png(p, nb_from_data(px, 3, (int64_t[]){3, 32, 32}, NB_U8));
        nb_scope_end(s);
        if (st) return fprintf(stderr, "bench_loader: %s\n", nb_last_error()), 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int n = 60000, workers = 2, threads = 1, prefetch = 0;
    bool train = false;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--train-cuda")) {
            train = true, i--;
            continue;
        }
        if (i + 1 >= argc) return fprintf(stderr, "bench_loader: %s needs a value\n", argv[i]), 2;
        if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--images")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workers")) workers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefetch")) prefetch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else return fprintf(stderr, "usage: bench_loader --dir DIR [--images N] [--workers W] [--prefetch P] [--threads T] [--train-cuda]\n"), 2;
    }
    if (!dir) return fprintf(stderr, "bench_loader: --dir is required\n"), 2;
    nb_set_num_threads(threads); /* each worker's ops run serially; the workers are the parallelism */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/class0", dir);
    struct stat st;
    if (stat(probe, &st) && make_images(dir, n)) return 1;
    nb_map_dataset *ds = nb_image_folder(dir, (nb_image_folder_options){
                                                  .transforms = {.random_crop = {28, 28}, .random_crop_padding = 2,
                                                                 .horizontal_flip_p = 0.5, .normalize = true,
                                                                 .mean = {0.5, 0.5, 0.5}, .std = {0.25, 0.25, 0.25}}});
    nb_dataloader_options lo = {.batch_size = 256, .shuffle = true, .seed = 1, .num_workers = workers,
                                .prefetch_factor = prefetch};
    nb_module *net = NULL;
    nb_optimizer *opt = NULL;
    if (train) {
        if (nb_device_count(NB_DEVICE_CUDA) < 1) return fprintf(stderr, "bench_loader: --train-cuda: no GPU\n"), 1;
        lo.device = NB_CUDA(0), lo.pin_memory = true;
        nb_set_default_device(NB_CUDA(0));
        net = nb_nn_sequential(nb_nn_conv2d(3, 32, 3, (nb_conv2d_options){0}, true), nb_nn_relu(),
                               nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.stride = {2, 2}}, true), nb_nn_relu(),
                               nb_nn_flatten(1, -1), nb_nn_linear(64 * 12 * 12, 10));
        opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
        nb_set_default_device(NB_CPU); /* samples are made on the host (the default device is the workers' too) */
    }
    nb_dataloader *dl = ds ? nb_dataloader_new(ds, lo) : NULL;
    if (!dl || (train && !opt)) return fprintf(stderr, "bench_loader: %s\n", nb_last_error()), 1;
    double t0 = now(), wait = 0, first = 0, loss = 0;
    int64_t images = 0;
    nb_sample b;
    for (;;) {
        double w0 = now();
        if (!nb_dataloader_next(dl, &b)) break;
        wait += now() - w0;
        if (!images) first = wait;
        images += nb_shape(nb_sample_get(&b, "image"))[0];
        if (!train) continue;
        nb_scope *s = nb_scope_begin();
        nb_optimizer_zero_grad(opt);
        nb_tensor *l = nb_cross_entropy(nb_forward(net, nb_sample_get(&b, "image")), nb_sample_get(&b, "label"));
        nb_backward(l);
        nb_optimizer_step(opt);
        loss = nb_item(l);
        nb_scope_end(s);
    }
    double dt = now() - t0;
    if (nb_dataloader_status(dl)) return fprintf(stderr, "bench_loader: %s\n", nb_last_error()), 1;
    if (train)
        printf("workload=loader_train_cuda images=%lld workers=%d prefetch=%d epoch_s=%.3f data_wait_s=%.3f "
               "first_wait_s=%.3f last_loss=%.4f\n", (long long)images, workers, prefetch ? prefetch : 2, dt, wait, first,
               loss);
    else
        printf("workload=loader images=%lld workers=%d nabla images_per_s=%.0f seconds=%.2f\n", (long long)images, workers,
               (double)images / dt, dt);
    nb_dataloader_free(dl);
    nb_optimizer_free(opt);
    nb_module_free(net);
    nb_map_dataset_free(ds);
    return 0;
}
