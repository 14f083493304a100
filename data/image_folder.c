/* image_folder.c - torchvision's common image transforms on tensors and
 * the ImageFolder dataset: root/<class>/.../<image> with classes in sorted
 * order and, per class, files sorted as torchvision's make_dataset sorts
 * them (by directory, then name), extensions .png .jpg .jpeg (any case). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data_impl.h"
#include "nb_extension.h"
#include "nb_functional.h"
#include "nb_ops.h"

/* ---- transforms -------------------------------------------------------------------------------- */

/* An integer in [0, n) from gen (one U(0, 1) draw). */
static int64_t draw_below(nb_generator *gen, int64_t n) {
    double u = nb_item(nb_rand(NB_SHAPE(1), NB_F64, gen));
    int64_t k = (int64_t)floor(u * (double)n);
    return k < n ? k : n - 1;
}

/* [C, H, W] cropped to [h, w] at (top, left); zero padding where the window leaves the image (torchvision pads). */
static nb_tensor *crop(nb_tensor *x, int64_t top, int64_t left, int64_t h, int64_t w) {
    int64_t H = nb_shape(x)[1], W = nb_shape(x)[2];
    int64_t pt = top < 0 ? -top : 0, pl = left < 0 ? -left : 0;
    int64_t pb = top + h > H ? top + h - H : 0, pr = left + w > W ? left + w - W : 0;
    if (pt || pl || pb || pr) {
        x = nb_pad(x, (int64_t[]){pl, pr, pt, pb}, 4, NB_PAD_CONSTANT, 0);
        top += pt, left += pl;
    }
    return nb_narrow(nb_narrow(x, 1, top, h), 2, left, w);
}

nb_tensor *nb_image_transform(nb_tensor *img, const nb_image_transforms *t, nb_generator *gen) {
    const char *op = "image_transform";
    if (!img) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL image", op);
    if (nb_dim(img) != 3) return NB_FAIL(NB_ERR_SHAPE, "%s: the image must be [C, H, W]", op);
    nb_image_transforms none = {0};
    if (!t) t = &none;
    for (int i = 0; i < 2; i++)
        if (t->resize[i] < 0 || t->center_crop[i] < 0 || t->random_crop[i] < 0 || t->random_crop_padding < 0 ||
            !(t->horizontal_flip_p >= 0 && t->horizontal_flip_p <= 1))
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: negative sizes or a flip probability outside [0, 1]", op);
    int64_t C = nb_shape(img)[0];
    if (t->normalize && (C > 4 || C < 1)) return NB_FAIL(NB_ERR_SHAPE, "%s: normalize takes 1 to 4 channels", op);
    nb_scope *s = nb_op_scope_begin();
    /* ToTensor: uint8 to float32 in [0, 1] (a float image is taken as it is) */
    nb_tensor *x = img;
    if (nb_dtype_of(img) == NB_U8) { /* img.float().div(255): a true division, as torchvision */
        x = nb_to_dtype(img, NB_F32);
        x = x ? nb_div(x, nb_scalar_like(x, 255.0, NB_F32)) : NULL;
    }
    if (x && t->resize[0] > 0) {
        int64_t H = nb_shape(x)[1], W = nb_shape(x)[2], h = t->resize[0], w = t->resize[1];
        if (w == 0) { /* Resize(int): the shorter side to size, the other scaled (truncated, as torchvision) */
            if (H <= W) w = (int64_t)((double)t->resize[0] * (double)W / (double)H);
            else h = (int64_t)((double)t->resize[0] * (double)H / (double)W), w = t->resize[0];
        }
        if (h != H || w != W) x = nb_squeeze(nb_interpolate(nb_unsqueeze(x, 0), h, w, NB_INTERPOLATE_BILINEAR, false), 0);
    }
    if (x && t->center_crop[0] > 0) { /* torchvision's center_crop: pad a smaller image (the odd row or column at
                                          the bottom / right), then crop at round((size - crop) / 2) */
        int64_t H = nb_shape(x)[1], W = nb_shape(x)[2], h = t->center_crop[0], w = t->center_crop[1] ? t->center_crop[1] : h;
        if (h > H || w > W) {
            int64_t pt = h > H ? (h - H) / 2 : 0, pb = h > H ? (h - H + 1) / 2 : 0;
            int64_t pl = w > W ? (w - W) / 2 : 0, pr = w > W ? (w - W + 1) / 2 : 0;
            x = nb_pad(x, (int64_t[]){pl, pr, pt, pb}, 4, NB_PAD_CONSTANT, 0);
            H += pt + pb, W += pl + pr;
        }
        if (x) x = crop(x, (int64_t)nearbyint((double)(H - h) / 2.0), (int64_t)nearbyint((double)(W - w) / 2.0), h, w);
    }
    if (x && t->random_crop[0] > 0) {
        int64_t p = t->random_crop_padding, h = t->random_crop[0], w = t->random_crop[1] ? t->random_crop[1] : h;
        if (p) x = nb_pad(x, (int64_t[]){p, p, p, p}, 4, NB_PAD_CONSTANT, 0);
        int64_t H = x ? nb_shape(x)[1] : 0, W = x ? nb_shape(x)[2] : 0;
        if (x && (h > H || w > W)) {
            nb_set_error(NB_ERR_SHAPE, "%s: random crop [%lld, %lld] larger than the (padded) image [%lld, %lld]", op,
                         (long long)h, (long long)w, (long long)H, (long long)W);
            x = NULL;
        }
        if (x) {
            int64_t top = draw_below(gen, H - h + 1), left = draw_below(gen, W - w + 1);
            x = crop(x, top, left, h, w);
        }
    }
    if (x && t->horizontal_flip_p > 0 && nb_item(nb_rand(NB_SHAPE(1), NB_F64, gen)) < t->horizontal_flip_p)
        x = nb_flip(x, (int[]){2}, 1);
    if (x && t->normalize) {
        double m[4], sd[4];
        for (int64_t k = 0; k < C; k++) m[k] = t->mean[k], sd[k] = t->std[k] ? t->std[k] : 1;
        nb_tensor *mt = nb_from_data_on(m, NB_SHAPE(C, 1, 1), NB_F64, nb_device_of(x));
        nb_tensor *st = nb_from_data_on(sd, NB_SHAPE(C, 1, 1), NB_F64, nb_device_of(x));
        x = nb_div(nb_sub(x, nb_to_dtype(mt, NB_F32)), nb_to_dtype(st, NB_F32));
    }
    if (x) x = nb_contiguous(x);
    return nb_scope_return(s, x);
}

/* ---- ImageFolder ------------------------------------------------------------------------------- */

typedef struct entry {
    char *dir, *name; /* sorted by directory, then name */
    int64_t label;
} entry;

typedef struct folder {
    char **classes;
    int64_t n_classes;
    entry *items;
    int64_t n, cap;
    nb_image_mode mode;
    nb_image_transforms tf;
    nb_image_transform_fn fn;
    void *fn_state;
} folder;

static int by_dir_name(const void *a, const void *b) {
    const entry *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->name, y->name);
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool is_image(const char *n) {
    size_t l = strlen(n);
    return (l > 4 && (!strcasecmp(n + l - 4, ".png") || !strcasecmp(n + l - 4, ".jpg"))) ||
           (l > 5 && !strcasecmp(n + l - 5, ".jpeg"));
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directories being walked (device, inode): a symlink back into one of them is not followed again. */
typedef struct ancestors {
    dev_t dev[256];
    ino_t ino[256];
    int n;
} ancestors;

/* Adds the images under dir (recursively, symlinks followed as os.walk(followlinks=True), loops cut) with label. */
static nb_status scan(folder *f, const char *dir, int64_t label, ancestors *up) {
    struct stat ds;
    if (stat(dir, &ds)) return nb_set_error(NB_ERR_IO, "image_folder: cannot read %s", dir);
    for (int i = 0; i < up->n; i++)
        if (up->dev[i] == ds.st_dev && up->ino[i] == ds.st_ino) return NB_OK; /* a loop */
    if (up->n == 256) return nb_set_error(NB_ERR_INVALID_ARG, "image_folder: directories nested deeper than 256 under %s", dir);
    DIR *d = opendir(dir);
    if (!d) return nb_set_error(NB_ERR_IO, "image_folder: cannot read %s", dir);
    up->dev[up->n] = ds.st_dev, up->ino[up->n] = ds.st_ino, up->n++;
    nb_status st = NB_OK;
    errno = 0;
    for (struct dirent *e; !st && (e = readdir(d)); errno = 0) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            st = nb_set_error(NB_ERR_OOM, "image_folder: out of host memory");
            break;
        }
        snprintf(path, len, "%s/%s", dir, e->d_name);
        if (is_dir(path)) st = scan(f, path, label, up);
        else if (is_image(e->d_name)) {
            if (f->n == f->cap) {
                int64_t nc = f->cap ? 2 * f->cap : 256;
                entry *ni = realloc(f->items, sizeof *ni * (size_t)nc);
                if (!ni) st = nb_set_error(NB_ERR_OOM, "image_folder: out of host memory");
                else f->items = ni, f->cap = nc;
            }
            char *dd = st ? NULL : strdup(dir), *nn = st ? NULL : strdup(e->d_name);
            if (!st && (!dd || !nn)) st = nb_set_error(NB_ERR_OOM, "image_folder: out of host memory");
            if (!st) f->items[f->n++] = (entry){dd, nn, label};
            else free(dd), free(nn);
        }
        free(path);
    }
    if (!st && errno) st = nb_set_error(NB_ERR_IO, "image_folder: cannot list %s: %s", dir, strerror(errno));
    closedir(d);
    up->n--;
    return st;
}

static void folder_free(void *state) {
    folder *f = state;
    for (int64_t i = 0; i < f->n; i++) free(f->items[i].dir), free(f->items[i].name);
    for (int64_t i = 0; i < f->n_classes; i++) free(f->classes[i]);
    free(f->items), free(f->classes), free(f);
}

static nb_status folder_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
    const folder *f = state;
    const entry *e = &f->items[i];
    size_t len = strlen(e->dir) + strlen(e->name) + 2;
    char *path = malloc(len);
    if (!path) return nb_set_error(NB_ERR_OOM, "image_folder: out of host memory");
    snprintf(path, len, "%s/%s", e->dir, e->name);
    nb_tensor *img = nb_image_read(path, f->mode);
    free(path);
    if (img) img = f->fn ? f->fn(f->fn_state, img, gen) : nb_image_transform(img, &f->tf, gen);
    nb_status st = nb_sample_set(out, "image", img);
    return st ? st : nb_sample_set(out, "label", nb_scalar((double)e->label, NB_I64));
}

nb_map_dataset *nb_image_folder(const char *root, nb_image_folder_options o) {
    const char *op = "image_folder";
    if (!root) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL root", op);
    if ((unsigned)o.mode > NB_IMAGE_UNCHANGED) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: bad mode %d", op, (int)o.mode);
    DIR *d = opendir(root);
    if (!d) return NB_FAIL(NB_ERR_IO, "%s: cannot read %s", op, root);
    folder *f = calloc(1, sizeof *f);
    nb_status st = f ? NB_OK : nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    int64_t cap = 0;
    errno = 0;
    for (struct dirent *e; !st && (e = readdir(d)); errno = 0) { /* the classes: root's subdirectories (hidden too) */
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(root) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            break;
        }
        snprintf(path, len, "%s/%s", root, e->d_name);
        bool dir = is_dir(path);
        free(path);
        if (!dir) continue;
        if (f->n_classes == cap) {
            cap = cap ? 2 * cap : 16;
            char **nc = realloc(f->classes, sizeof *nc * (size_t)cap);
            if (!nc) {
                st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
                break;
            }
            f->classes = nc;
        }
        if (!(f->classes[f->n_classes] = strdup(e->d_name))) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        else f->n_classes++;
    }
    if (!st && errno) st = nb_set_error(NB_ERR_IO, "%s: cannot list %s: %s", op, root, strerror(errno));
    closedir(d);
    if (!st && !f->n_classes) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: %s has no class directories", op, root);
    if (!st) qsort(f->classes, (size_t)f->n_classes, sizeof *f->classes, by_str);
    for (int64_t k = 0; !st && k < f->n_classes; k++) {
        size_t len = strlen(root) + strlen(f->classes[k]) + 2;
        char *path = malloc(len);
        if (!path) {
            st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
            break;
        }
        snprintf(path, len, "%s/%s", root, f->classes[k]);
        int64_t first = f->n;
        ancestors up = {.n = 0};
        st = scan(f, path, k, &up);
        free(path);
        if (!st && f->n == first) /* as torchvision's make_dataset */
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: no .png/.jpg/.jpeg file for class %s", op, f->classes[k]);
        if (!st) qsort(f->items + first, (size_t)(f->n - first), sizeof *f->items, by_dir_name);
    }
    if (!st && !f->n) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: no .png/.jpg/.jpeg files under %s", op, root);
    nb_map_dataset *ds = NULL;
    if (!st) {
        f->mode = o.mode, f->tf = o.transforms, f->fn = o.transform_fn, f->fn_state = o.transform_state;
        ds = nb_map_dataset_new(f->n, folder_item, f, folder_free);
    }
    if (!ds && f) folder_free(f);
    return ds;
}

static const folder *folder_of(const nb_map_dataset *ds) {
    return ds && ds->get_item == folder_item ? ds->state : NULL;
}

int64_t nb_image_folder_num_classes(const nb_map_dataset *ds) {
    const folder *f = folder_of(ds);
    if (!f) return nb_set_error(NB_ERR_INVALID_ARG, "image_folder_num_classes: not an image folder"), -1;
    return f->n_classes;
}

const char *nb_image_folder_class(const nb_map_dataset *ds, int64_t k) {
    const folder *f = folder_of(ds);
    if (!f || k < 0 || k >= f->n_classes)
        return NB_FAIL(NB_ERR_INVALID_ARG, "image_folder_class: not an image folder, or class %lld outside it", (long long)k);
    return f->classes[k];
}
