/* dataset.c - tensor datasets (x [N, ...] and y [N, ...] of any dtypes; the
 * loader gathers batches from the tensors themselves), and the MNIST loader: finds
 * the four IDX files (raw or .gz), checks that they are MNIST-shaped and
 * agree, and converts pixels to float32 on the host once, as torchvision's
 * ToTensor + Normalize do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "nb_ops.h"

/* ---- datasets --------------------------------------------------------- */

/* A dataset over tensors the caller no longer needs (its references move in). */
static nb_dataset *dataset_wrap(nb_tensor *x, nb_tensor *y) {
    nb_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        nb_release(x), nb_release(y);
        return NB_FAIL(NB_ERR_OOM, "dataset: out of host memory");
    }
    ds->x = x, ds->y = y;
    ds->n = nb_size(x, 0);
    return ds;
}

nb_dataset *nb_dataset_from_tensors(nb_tensor *x, nb_tensor *y) {
    if (!x || !y) { /* keep the first error (a failed op upstream) */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "dataset_from_tensors: %s is NULL", x ? "y" : "x");
        return NULL;
    }
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
    if (nb_dim(x) < 1 || nb_dim(y) < 1 || nb_size(x, 0) != nb_size(y, 0))
        return NB_FAIL(NB_ERR_SHAPE, "dataset_from_tensors: need x [N, ...] and y [N, ...] (got x %s, y %s)",
                       nb_fmt_shape(nb_dim(x), nb_shape(x), a, sizeof a),
                       nb_fmt_shape(nb_dim(y), nb_shape(y), b, sizeof b));
    nb_device dx = nb_device_of(x), dy = nb_device_of(y);
    if (dx.type != dy.type || dx.index != dy.index)
        return NB_FAIL(NB_ERR_DEVICE, "dataset_from_tensors: x and y are on different devices");
    /* contiguous (the loader's gather kernel needs it): a new reference when
     * already contiguous, else one copy; never a host copy */
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *xc = nb_contiguous(x), *yc = nb_contiguous(y);
    if (xc) nb_retain(xc);
    if (yc) nb_retain(yc);
    nb_scope_end(s);
    if (!xc || !yc) {
        nb_release(xc), nb_release(yc);
        return NULL;
    }
    return dataset_wrap(xc, yc);
}

void nb_dataset_free(nb_dataset *ds) {
    if (!ds) return;
    nb_release(ds->x), nb_release(ds->y);
    free(ds);
}

/* A NULL dataset (a failed load upstream): keeps that error, else records one. */
static bool no_ds(const char *op, const nb_dataset *ds) {
    if (ds) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: dataset is NULL", op);
    return true;
}

int64_t nb_dataset_len(const nb_dataset *ds) { return no_ds("dataset_len", ds) ? -1 : ds->n; }
nb_tensor *nb_dataset_x(const nb_dataset *ds) { return no_ds("dataset_x", ds) ? NULL : ds->x; }
nb_tensor *nb_dataset_y(const nb_dataset *ds) { return no_ds("dataset_y", ds) ? NULL : ds->y; }

/* ---- MNIST ------------------------------------------------------------ */

#define MNIST_SIDE 28
#define MNIST_MEAN 0.1307f /* PyTorch examples/mnist/main.py, transforms.Normalize */
#define MNIST_STD 0.3081f

nb_status nb_mnist_default_dir(char *buf, size_t len) {
    if (!buf) return nb_set_error(NB_ERR_INVALID_ARG, "mnist_default_dir: NULL buffer");
    const char *env = getenv("NB_MNIST_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env) n = snprintf(buf, len, "%s", env);
    else if (xdg && *xdg) n = snprintf(buf, len, "%s/nabla/mnist", xdg);
    else if (home && *home) n = snprintf(buf, len, "%s/.cache/nabla/mnist", home);
    else return nb_set_error(NB_ERR_INVALID_ARG, "mnist_default_dir: neither NB_MNIST_DIR nor HOME is set");
    if (n < 0 || (size_t)n >= len)
        return nb_set_error(NB_ERR_INVALID_ARG, "mnist_default_dir: buffer of %zu bytes too short", len);
    return NB_OK;
}

/* Finds dir/name or dir/name.gz and reads it. */
static nb_status mnist_read(const char *dir, const char *name, nb_idx *out) {
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n + 3 >= sizeof path)
        return nb_set_error(NB_ERR_INVALID_ARG, "mnist_load: directory name too long: %s", dir);
    if (access(path, F_OK) != 0) {
        strcat(path, ".gz");
        if (access(path, F_OK) != 0)
            return nb_set_error(NB_ERR_IO,
                                "mnist_load: no %s (or %s.gz) in %s: run data/fetch_mnist.sh to "
                                "download MNIST there, or set NB_MNIST_DIR",
                                name, name, dir);
    }
    nb_status st = nb_idx_read(path, out);
    if (st) {
        char why[768];
        snprintf(why, sizeof why, "%s", nb_last_error());
        nb_set_error(st, "mnist_load: %s", why);
    }
    return st;
}

static nb_status mnist_check(const char *dir, const nb_idx *img, const nb_idx *lab) {
    if (img->ndim != 3 || img->shape[1] != MNIST_SIDE || img->shape[2] != MNIST_SIDE)
        return nb_set_error(NB_ERR_FORMAT, "mnist_load: images in %s are not [N, 28, 28] (%d dims, last %lld)",
                            dir, img->ndim, (long long)img->shape[img->ndim - 1]);
    if (lab->ndim != 1)
        return nb_set_error(NB_ERR_FORMAT, "mnist_load: labels in %s have %d dimensions, expected 1",
                            dir, lab->ndim);
    if (img->shape[0] != lab->shape[0])
        return nb_set_error(NB_ERR_FORMAT, "mnist_load: %lld images but %lld labels in %s",
                            (long long)img->shape[0], (long long)lab->shape[0], dir);
    for (size_t i = 0; i < lab->bytes; i++)
        if (lab->data[i] > 9)
            return nb_set_error(NB_ERR_FORMAT, "mnist_load: label %zu is %d (not a digit) in %s", i,
                                lab->data[i], dir);
    return NB_OK;
}

/* Host conversion, in torchvision's float32 order: p/255, then (v-mean)/std;
 * through a table of the 256 byte values (the same floats, 10x faster). */
static void mnist_convert(const nb_idx *img, const nb_idx *lab, int64_t n, nb_mnist_transform tf,
                          float *hx, int64_t *hy) {
    float table[256];
    for (int p = 0; p < 256; p++) {
        float v = (float)p / 255.0f;
        table[p] = tf == NB_MNIST_NORMALIZE ? (v - MNIST_MEAN) / MNIST_STD : v;
    }
    size_t pixels = (size_t)n * MNIST_SIDE * MNIST_SIDE;
    for (size_t i = 0; i < pixels; i++) hx[i] = table[img->data[i]];
    for (int64_t i = 0; i < n; i++) hy[i] = lab->data[i];
}

static nb_status mnist_build(const nb_idx *img, const nb_idx *lab, nb_mnist_options opts,
                             nb_dataset **out) {
    int64_t n = img->shape[0];
    if (opts.limit > 0 && opts.limit < n) n = opts.limit;
    float *hx = malloc((size_t)n * MNIST_SIDE * MNIST_SIDE * sizeof(float));
    int64_t *hy = malloc((size_t)n * sizeof(int64_t));
    if (!hx || !hy) {
        free(hx), free(hy);
        return nb_set_error(NB_ERR_OOM, "mnist_load: cannot allocate %lld images", (long long)n);
    }
    mnist_convert(img, lab, n, opts.transform, hx, hy);
    int64_t xs4[4] = {n, 1, MNIST_SIDE, MNIST_SIDE}, xs2[2] = {n, MNIST_SIDE * MNIST_SIDE};
    nb_device dev = nb_default_device();
    nb_tensor *x = opts.flatten ? nb_tensor_new_unscoped(2, xs2, NB_F32, dev)
                                : nb_tensor_new_unscoped(4, xs4, NB_F32, dev);
    nb_tensor *y = x ? nb_tensor_new_unscoped(1, &n, NB_I64, dev) : NULL;
    nb_status st = !y ? (nb_last_status() ? nb_last_status() : NB_ERR_OOM)
                      : nb_copy_from_host(x, hx, (size_t)nb_numel(x) * sizeof(float));
    if (!st) st = nb_copy_from_host(y, hy, (size_t)n * sizeof(int64_t));
    free(hx), free(hy); /* the tensors hold the data: no second copy */
    if (st) {
        nb_release(x), nb_release(y);
        return st;
    }
    *out = dataset_wrap(x, y);
    return *out ? NB_OK : NB_ERR_OOM;
}

nb_status nb_mnist_load(const char *dir, bool train, nb_mnist_options opts, nb_dataset **out) {
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "mnist_load: NULL output");
    *out = NULL;
    if (opts.limit < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "mnist_load: limit %lld < 0", (long long)opts.limit);
    if (opts.transform != NB_MNIST_NORMALIZE && opts.transform != NB_MNIST_UNIT)
        return nb_set_error(NB_ERR_INVALID_ARG, "mnist_load: unknown transform %d", (int)opts.transform);
    char defdir[4096];
    if (!dir) {
        nb_status st = nb_mnist_default_dir(defdir, sizeof defdir);
        if (st) return st;
        dir = defdir;
    }
    const char *pre = train ? "train" : "t10k";
    char iname[64], lname[64];
    snprintf(iname, sizeof iname, "%s-images-idx3-ubyte", pre);
    snprintf(lname, sizeof lname, "%s-labels-idx1-ubyte", pre);
    nb_idx img = {0}, lab = {0};
    nb_status st = mnist_read(dir, iname, &img);
    if (!st) st = mnist_read(dir, lname, &lab);
    if (!st) st = mnist_check(dir, &img, &lab);
    if (!st) st = mnist_build(&img, &lab, opts, out);
    nb_idx_free(&img), nb_idx_free(&lab);
    return st;
}
