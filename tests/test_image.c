/* test_image.c - PNG and JPEG as tensors (data/image.c), torchvision's
 * transforms and ImageFolder (data/image_folder.c): round trips of every
 * channel count, PIL's channel conversions, hostile files (truncated data,
 * a header claiming a decompression bomb), the transforms' geometry and
 * draws, an image folder through the DataLoader, and PIL itself
 * (tests/interop/image_interop.py): nabla decodes PIL's files to PIL's
 * arrays, and PIL reads nabla's files to nabla's. Skipped where nabla was
 * built without libpng / libjpeg. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "nb_data.h"
#include "nb_test.h"

/* uint8 [c, h, w] with varied values. */
static nb_tensor *pattern(int64_t c, int64_t h, int64_t w) {
    uint8_t *v = malloc((size_t)(c * h * w));
    for (int64_t k = 0; k < c; k++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) v[(k * h + y) * w + x] = (uint8_t)((x * 37 + y * 11 + k * 71 + (x * y) % 13) % 256);
    nb_tensor *t = nb_from_data(v, 3, (int64_t[]){c, h, w}, NB_U8);
    free(v);
    return t;
}

static void ck_equal(nb_tensor *a, nb_tensor *b, const char *what) {
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    nb_ck_shape(a, nb_dim(b), nb_shape(b));
    double *x = nb_test_values_of(a), *y = nb_test_values_of(b);
    for (int64_t i = 0; i < nb_numel(a); i++)
        ck_assert_msg(x[i] == y[i], "%s: element %lld is %g, not %g", what, (long long)i, x[i], y[i]);
    free(x), free(y);
}

static bool have_images(void) {
    nb_tensor *t = nb_image_decode("\x89PNG\r\n\x1a\n", 8, NULL, NB_IMAGE_RGB);
    return t || nb_last_status() != NB_ERR_UNSUPPORTED;
}

START_TEST(test_image_round_trips) {
    if (!have_images()) return;
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_img_XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.png", dir);
    for (int c = 1; c <= 4; c++) {
        nb_tensor *img = pattern(c, 13, 29);
        NB_CK_OK(nb_image_write_png(path, img));
        ck_equal(nb_image_read(path, NB_IMAGE_UNCHANGED), img, "png unchanged");
        nb_tensor *rgb = nb_image_read(path, NB_IMAGE_RGB), *gray = nb_image_read(path, NB_IMAGE_GRAY);
        nb_ck_shape(rgb, 3, (int64_t[]){3, 13, 29});
        nb_ck_shape(gray, 3, (int64_t[]){1, 13, 29});
        double *g = nb_test_values_of(gray), *v = nb_test_values_of(img);
        int64_t hw = 13 * 29;
        for (int64_t i = 0; i < hw; i += 37) { /* PIL's "L": (19595 R + 38470 G + 7471 B + 2^15) >> 16 */
            double want = c < 3 ? v[i] : (double)(((unsigned)v[i] * 19595u + (unsigned)v[hw + i] * 38470u +
                                                   (unsigned)v[2 * hw + i] * 7471u + 0x8000u) >> 16);
            ck_assert_double_eq(g[i], want);
        }
        free(g), free(v);
    }
    /* JPEG: lossy, close to a smooth image */
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    double smooth[3 * 16 * 24];
    for (int i = 0; i < 3 * 16 * 24; i++) smooth[i] = 100 + 50 * ((i % 24) / 24.0) + 30 * (i / (16 * 24));
    nb_tensor *sm = nb_to_dtype(nb_from_data(smooth, 3, (int64_t[]){3, 16, 24}, NB_F64), NB_U8);
    NB_CK_OK(nb_image_write_jpeg(path, sm, 95));
    nb_tensor *back = nb_image_read(path, NB_IMAGE_RGB);
    nb_ck_shape(back, 3, (int64_t[]){3, 16, 24});
    double err = nb_item(nb_amax(nb_abs(nb_sub(nb_to_dtype(back, NB_F64), nb_to_dtype(sm, NB_F64))), NULL, 0, false));
    ck_assert_msg(err <= 8, "jpeg error %g", err);
    ck_assert_int_eq(nb_image_write_jpeg(path, pattern(2, 4, 4), 90), NB_ERR_SHAPE);
    ck_assert_int_eq(nb_image_write_jpeg(path, sm, 101), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_image_write_png(path, nb_zeros(NB_SHAPE(3, 4, 4), NB_F32)), NB_ERR_SHAPE);
    /* hostile files: truncated PNG and JPEG, neither format, a PNG claiming 2^16 x 2^16 pixels */
    size_t n;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/a.%s", dir, k ? "jpg" : "png");
        if (!k) NB_CK_OK(nb_image_write_png(path, pattern(3, 40, 40)));
        uint8_t *buf = (uint8_t *)nb_test_slurp(path, &n);
        ck_assert_ptr_null(nb_image_decode(buf, n / 2, path, NB_IMAGE_RGB));
        ck_assert_msg(nb_last_status() == NB_ERR_FORMAT, "%s: %s", path, nb_last_error());
        if (!k) { /* IHDR's width and height (bytes 16..23) set to 65536, its CRC recomputed */
            memcpy(buf + 16, "\x00\x01\x00\x00\x00\x01\x00\x00", 8);
            uLong crc = crc32(0, buf + 12, 17);
            for (int i = 0; i < 4; i++) buf[29 + i] = (uint8_t)(crc >> (24 - 8 * i));
            ck_assert_ptr_null(nb_image_decode(buf, n, path, NB_IMAGE_RGB));
            ck_assert_msg(strstr(nb_last_error(), "NB_IMAGE_MAX_PIXELS"), "%s", nb_last_error());
        }
        free(buf);
    }
    ck_assert_ptr_null(nb_image_decode("GIF89a", 6, "x.gif", NB_IMAGE_RGB));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_transforms) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *img = pattern(3, 10, 16);
    /* ToTensor alone */
    nb_tensor *t = nb_image_transform(img, NULL, NULL);
    ck_assert_int_eq(nb_dtype_of(t), NB_F32);
    ck_assert_double_eq_tol(nb_item(nb_select(nb_select(nb_select(t, 0, 0), 0, 1), 0, 0)), 11.0 / 255.0, 1e-7);
    /* Resize(int): the shorter side 5, the other 16 * 5 / 10 = 8; CenterCrop 4 around the center */
    nb_tensor *r = nb_image_transform(img, &(nb_image_transforms){.resize = {5, 0}}, NULL);
    nb_ck_shape(r, 3, (int64_t[]){3, 5, 8});
    nb_tensor *cc = nb_image_transform(img, &(nb_image_transforms){.center_crop = {4, 6}}, NULL);
    ck_equal(cc, nb_narrow(nb_narrow(nb_image_transform(img, NULL, NULL), 1, 3, 4), 2, 5, 6), "center crop");
    /* a center crop larger than the image is zero-padded as torchvision pads: 13 rows from 10 put 1 on top, 2 below */
    nb_tensor *odd = nb_image_transform(img, &(nb_image_transforms){.center_crop = {13, 16}}, NULL);
    ck_assert_double_eq(nb_item(nb_sum(nb_select(odd, 1, 0), NULL, 0, false)), 0);
    ck_assert_double_eq(nb_item(nb_sum(nb_select(odd, 1, 11), NULL, 0, false)), 0);
    ck_equal(nb_narrow(odd, 1, 1, 10), nb_image_transform(img, NULL, NULL), "padded crop");
    /* a center crop larger than the image is zero-padded */
    nb_tensor *big = nb_image_transform(img, &(nb_image_transforms){.center_crop = {12, 16}}, NULL);
    nb_ck_shape(big, 3, (int64_t[]){3, 12, 16});
    ck_assert_double_eq(nb_item(nb_sum(nb_select(big, 1, 0), NULL, 0, false)), 0);
    /* flips and crops drawn from the generator: the same generator state, the same result */
    nb_image_transforms aug = {.random_crop = {6, 6}, .random_crop_padding = 2, .horizontal_flip_p = 0.5,
                               .normalize = true, .mean = {0.5, 0.4, 0.3}, .std = {0.2, 0.2, 0.2}};
    nb_generator g1 = nb_generator_new(7), g2 = nb_generator_new(7);
    ck_equal(nb_image_transform(img, &aug, &g1), nb_image_transform(img, &aug, &g2), "seeded augmentation");
    nb_tensor *flip = nb_image_transform(img, &(nb_image_transforms){.horizontal_flip_p = 1}, NULL);
    ck_equal(flip, nb_flip(nb_image_transform(img, NULL, NULL), (int[]){2}, 1), "flip");
    nb_tensor *norm = nb_image_transform(img, &(nb_image_transforms){.normalize = true, .mean = {0.5, 0.5, 0.5},
                                                                     .std = {0.25, 0.5, 1}}, NULL);
    double v = nb_item(nb_select(nb_select(nb_select(norm, 0, 1), 0, 0), 0, 0)); /* channel 1, pixel (0, 0) = 71 */
    ck_assert_double_eq_tol(v, ((float)71 / 255.0f - 0.5f) / 0.5f, 1e-6);
    ck_assert_ptr_null(nb_image_transform(img, &(nb_image_transforms){.random_crop = {20, 20}}, NULL));
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    nb_scope_end(s);
}
END_TEST

static void mkdir_p(const char *p) { ck_assert_int_eq(mkdir(p, 0777), 0); }

START_TEST(test_image_folder) {
    if (!have_images()) return;
    nb_scope *s = nb_scope_begin();
    char root[64] = "/tmp/nb_imf_XXXXXX", p[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(p, sizeof p, "%s/dog", root);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/cat", root);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/cat/sub", root);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/cat/z.png", root);
    NB_CK_OK(nb_image_write_png(p, pattern(3, 9, 12)));
    snprintf(p, sizeof p, "%s/cat/sub/a.png", root);
    NB_CK_OK(nb_image_write_png(p, pattern(1, 10, 10)));
    snprintf(p, sizeof p, "%s/dog/d.PNG", root);
    NB_CK_OK(nb_image_write_png(p, pattern(4, 8, 8)));
    snprintf(p, sizeof p, "%s/dog/c.jpg", root);
    NB_CK_OK(nb_image_write_jpeg(p, pattern(3, 16, 16), 90));
    snprintf(p, sizeof p, "%s/cat/loop", root); /* a symlink back to its class: not walked twice */
    char target[256];
    snprintf(target, sizeof target, "%s/cat", root);
    ck_assert_int_eq(symlink(target, p), 0);
    snprintf(p, sizeof p, "%s/dog/notes.txt", root);
    FILE *f = fopen(p, "w");
    fputs("not an image", f);
    fclose(f);
    nb_image_folder_options o = {.transforms = {.resize = {8, 8}, .horizontal_flip_p = 0.5, .normalize = true,
                                                .mean = {0.5, 0.5, 0.5}, .std = {0.5, 0.5, 0.5}}};
    nb_map_dataset *ds = nb_image_folder(root, o);
    NB_CK_NOTNULL(ds);
    ck_assert_int_eq(nb_map_dataset_len(ds), 4);
    ck_assert_int_eq(nb_image_folder_num_classes(ds), 2);
    ck_assert_str_eq(nb_image_folder_class(ds, 0), "cat");
    ck_assert_str_eq(nb_image_folder_class(ds, 1), "dog");
    /* torchvision's order: cat/z.png (directory cat) before cat/sub/a.png, then dog/c.jpg, dog/d.PNG */
    nb_sample one;
    NB_CK_OK(nb_map_dataset_get(ds, 1, NULL, &one));
    ck_assert_double_eq(nb_item(nb_sample_get(&one, "label")), 0);
    nb_ck_shape(nb_sample_get(&one, "image"), 3, (int64_t[]){3, 8, 8}); /* gray read as RGB */
    nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 4, .num_workers = 2, .seed = 1});
    nb_sample b;
    ck_assert(nb_dataloader_next(dl, &b));
    nb_ck_shape(nb_sample_get(&b, "image"), 4, (int64_t[]){4, 3, 8, 8});
    ck_equal(nb_sample_get(&b, "label"), nb_from_data((int64_t[]){0, 0, 1, 1}, NB_SHAPE(4), NB_I64), "labels");
    nb_dataloader_free(dl);
    nb_map_dataset_free(ds);
    ck_assert_ptr_null(nb_image_folder("/nonexistent", (nb_image_folder_options){0}));
    ck_assert_int_eq(nb_last_status(), NB_ERR_IO);
    nb_test_rmtree(root);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_image_against_pil) {
    if (!have_images()) return;
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_pil_XXXXXX", path[256], ref[300], script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("image_interop.py", script, sizeof script), "image_interop.py not found");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *mine[] = {"nabla_rgb.png", "nabla_rgba.png", "nabla_l.png", "nabla_rgb.jpg", "nabla_l.jpg"};
    const int chans[] = {3, 4, 1, 3, 1};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, mine[i]);
        nb_tensor *img = pattern(chans[i], 21, 34);
        NB_CK_OK(strstr(mine[i], ".jpg") ? nb_image_write_jpeg(path, img, 90) : nb_image_write_png(path, img));
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("image_interop: skipped: /usr/bin/python3 lacks PIL or NumPy\n");
    } else {
        ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "image_interop.py failed (status %d)", rc);
        /* PIL reads nabla's files as nabla does */
        for (int i = 0; i < 5; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, mine[i]);
            snprintf(ref, sizeof ref, "%s.pil.npy", path);
            ck_equal(nb_image_read(path, NB_IMAGE_UNCHANGED), nb_npy_load(ref), path);
        }
        /* nabla reads PIL's files as PIL does, in each mode */
        const char *theirs[] = {"rgb.png", "rgba.png", "l.png", "la.png", "p.png", "rgb.jpg", "l.jpg", "prog.jpg"};
        const char *suffix[] = {"rgb", "l", "raw"};
        const nb_image_mode modes[] = {NB_IMAGE_RGB, NB_IMAGE_GRAY, NB_IMAGE_UNCHANGED};
        for (int i = 0; i < 8; i++)
            for (int m = 0; m < 3; m++) {
                snprintf(path, sizeof path, "%s/pil/%s", dir, theirs[i]);
                snprintf(ref, sizeof ref, "%s.%s.npy", path, suffix[m]);
                char what[320];
                snprintf(what, sizeof what, "%s as %s", path, suffix[m]);
                ck_equal(nb_image_read(path, modes[m]), nb_npy_load(ref), what);
            }
    }
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* MNIST exported as an image folder (root/<digit>/<index>.png, libpng) reads back through ImageFolder and a
   DataLoader as the IDX files' normalized tensors (what mnist_cnn --images trains on); skipped without MNIST. */
START_TEST(test_mnist_as_image_folder) {
    if (!have_images()) return;
    nb_scope *s = nb_scope_begin();
    nb_dataset *mn = NULL;
    if (nb_mnist_load(NULL, true, (nb_mnist_options){.transform = NB_MNIST_UNIT, .limit = 300}, &mn) != NB_OK) {
        printf("mnist_as_image_folder: skipped: %s\n", nb_last_error());
        nb_clear_error();
        nb_scope_end(s);
        return;
    }
    nb_dataset *norm = NULL;
    NB_CK_OK(nb_mnist_load(NULL, true, (nb_mnist_options){.limit = 300}, &norm));
    char root[64] = "/tmp/nb_mnpng_XXXXXX", p[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    int64_t labels[300];
    NB_CK_OK(nb_to_host(nb_dataset_y(mn), labels, sizeof labels));
    nb_tensor *px = nb_to_dtype(nb_round(nb_mul_scalar(nb_dataset_x(mn), 255.0)), NB_U8);
    for (int d = 0; d < 10; d++) {
        snprintf(p, sizeof p, "%s/%d", root, d);
        mkdir_p(p);
    }
    for (int64_t i = 0; i < 300; i++) {
        snprintf(p, sizeof p, "%s/%lld/%05lld.png", root, (long long)labels[i], (long long)i);
        NB_CK_OK(nb_image_write_png(p, nb_select(px, 0, i)));
    }
    nb_image_folder_options o = {.mode = NB_IMAGE_GRAY, .transforms = {.normalize = true, .mean = {0.1307}, .std = {0.3081}}};
    nb_map_dataset *ds = nb_image_folder(root, o);
    NB_CK_NOTNULL(ds);
    ck_assert_int_eq(nb_map_dataset_len(ds), 300);
    /* ImageFolder's order: by digit, then by (zero-padded) index */
    int64_t order[300], k = 0;
    for (int d = 0; d < 10; d++)
        for (int64_t i = 0; i < 300; i++)
            if (labels[i] == d) order[k++] = i;
    nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 64, .num_workers = 2});
    nb_sample b;
    k = 0;
    double worst = 0;
    while (nb_dataloader_next(dl, &b)) {
        nb_tensor *img = nb_sample_get(&b, "image"), *lab = nb_sample_get(&b, "label");
        int64_t n = nb_shape(img)[0];
        nb_ck_shape(img, 4, (int64_t[]){n, 1, 28, 28});
        nb_tensor *want = nb_index_select(nb_dataset_x(norm), 0, nb_from_data(order + k, 1, &n, NB_I64));
        worst = fmax(worst, nb_item(nb_max(nb_abs(nb_sub(img, want)), NULL, 0, false)));
        ck_equal(lab, nb_index_select(nb_dataset_y(norm), 0, nb_from_data(order + k, 1, &n, NB_I64)), "labels");
        k += n;
    }
    NB_CK_OK(nb_dataloader_status(dl));
    ck_assert_int_eq(k, 300);
    ck_assert_msg(worst <= 1e-6, "pixels differ from the IDX tensors by %g", worst); /* one float32 rounding */
    nb_dataloader_free(dl);
    nb_map_dataset_free(ds);
    nb_dataset_free(mn), nb_dataset_free(norm);
    nb_test_rmtree(root);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_image(void) {
    Suite *s = suite_create("image");
    TCase *t = tcase_create("image");
    tcase_add_test(t, test_image_round_trips);
    tcase_add_test(t, test_transforms);
    tcase_add_test(t, test_image_folder);
    tcase_add_test(t, test_image_against_pil);
    tcase_add_test(t, test_mnist_as_image_folder);
    suite_add_tcase(s, t);
    return s;
}
