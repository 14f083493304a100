/* image.c - images as tensors: PNG (libpng's simplified API) and JPEG
 * (libjpeg-turbo) decoded to uint8 [C, H, W] as torchvision.io.read_image
 * does, the channel conversions of PIL's Image.convert ("L": ITU-R 601-2
 * luma, (19595 R + 38470 G + 7471 B + 2^15) >> 16; "RGB": alpha dropped,
 * gray replicated), PNG and JPEG writers, torchvision's common transforms,
 * and the ImageFolder dataset (root/<class>/<image>, classes and files in
 * sorted order). Built without libpng / libjpeg (the `images` option),
 * the readers and writers fail with NB_ERR_UNSUPPORTED. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_impl.h"
#include "nb_extension.h"
#include "nb_functional.h"
#include "nb_ops.h"
#include "npy_impl.h"
#include "text_impl.h"

#ifdef NB_HAVE_IMAGES
#include <jpeglib.h>
#include <jerror.h> /* JWRN_JPEG_EOF */
#include <png.h>
#endif

/* ---- decoding ---------------------------------------------------------------------------------- */

/* An interleaved 8-bit image: h * w pixels of c channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA). */
typedef struct pixels {
    uint8_t *p;
    int64_t h, w;
    int c;
} pixels;

#ifdef NB_HAVE_IMAGES
/* libpng's low-level reader (the simplified API would apply gAMA chunks and treat 16-bit data as linear,
 * where PIL does neither): palettes expanded (their tRNS to alpha, as PIL's P -> RGBA), gray below 8 bits
 * expanded, 16-bit samples cut to their high byte (PIL's RGB;16B), no gamma. */
typedef struct png_src {
    const uint8_t *p;
    size_t len, pos;
    char msg[200];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
    png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->pos) png_error(png, "truncated PNG data");
    memcpy(out, s->p + s->pos, n);
    s->pos += n;
}

static void png_fail(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_quiet(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static nb_status decode_png(const uint8_t *buf, size_t len, const char *name, pixels *out) {
    png_src src = {.p = buf, .len = len};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_quiet);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return nb_set_error(NB_ERR_OOM, "image_read: %s: out of host memory", name);
    }
    uint8_t *volatile px = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(px), free(rows);
        return nb_set_error(NB_ERR_FORMAT, "image_read: %s: %s", name, src.msg[0] ? src.msg : "corrupt PNG");
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if ((uint64_t)w * h > NB_IMAGE_MAX_PIXELS) {
        png_destroy_read_struct(&png, &info, NULL);
        return nb_set_error(NB_ERR_FORMAT, "image_read: %s: %u x %u pixels exceed NB_IMAGE_MAX_PIXELS", name, w, h);
    }
    if (type == PNG_COLOR_TYPE_PALETTE) {
        png_set_palette_to_rgb(png);
        if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    }
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int c = png_get_channels(png, info);
    size_t row = png_get_rowbytes(png, info);
    if (c < 1 || c > 4 || row != (size_t)w * (size_t)c) png_error(png, "unexpected layout after conversion");
    px = malloc(row * h + 1);
    rows = malloc(sizeof *rows * (size_t)(h ? h : 1));
    if (!px || !rows) png_error(png, "out of host memory");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = px + row * y;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->p = px, out->h = h, out->w = w, out->c = c;
    return NB_OK;
}

typedef struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    bool truncated; /* libjpeg's "premature end of data" warning (it pads the image out): an error here, as PIL's */
} jerr;

static void jpeg_fail(j_common_ptr c) {
    jerr *e = (jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

static void jpeg_quiet(j_common_ptr c, int level) { /* warnings are not printed */
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) ((jerr *)c->err)->truncated = true;
}

static nb_status decode_jpeg(const uint8_t *buf, size_t len, const char *name, pixels *out) {
    struct jpeg_decompress_struct d;
    jerr e;
    uint8_t *volatile p = NULL;
    memset(&d, 0, sizeof d);
    d.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_fail, e.mgr.emit_message = jpeg_quiet, e.truncated = false;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&d);
        free(p);
        return nb_set_error(NB_ERR_FORMAT, "image_read: %s: %s", name, e.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, buf, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&d);
        return nb_set_error(NB_ERR_UNSUPPORTED, "image_read: %s: a CMYK JPEG", name);
    }
    if ((uint64_t)d.image_width * d.image_height > NB_IMAGE_MAX_PIXELS) {
        jpeg_destroy_decompress(&d);
        return nb_set_error(NB_ERR_FORMAT, "image_read: %s: %u x %u pixels exceed NB_IMAGE_MAX_PIXELS", name,
                            d.image_width, d.image_height);
    }
    d.out_color_space = d.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&d);
    int c = d.output_components;
    size_t row = (size_t)d.output_width * (size_t)c;
    p = malloc(row * d.output_height + 1);
    if (!p) {
        jpeg_destroy_decompress(&d);
        return nb_set_error(NB_ERR_OOM, "image_read: %s: out of host memory", name);
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = p + row * d.output_scanline;
        jpeg_read_scanlines(&d, &r, 1);
    }
    jpeg_finish_decompress(&d);
    out->p = p, out->h = d.output_height, out->w = d.output_width, out->c = c;
    jpeg_destroy_decompress(&d);
    if (e.truncated) {
        free(out->p), out->p = NULL;
        return nb_set_error(NB_ERR_FORMAT, "image_read: %s: truncated JPEG data", name);
    }
    return NB_OK;
}
#endif

/* The pixels as [C, H, W] uint8 in mode's channels (PIL's conversions). */
static nb_tensor *to_chw(const pixels *px, nb_image_mode mode) {
    int c = px->c, oc = mode == NB_IMAGE_GRAY ? 1 : mode == NB_IMAGE_RGB ? 3 : c;
    int64_t hw = px->h * px->w;
    uint8_t *o = malloc((size_t)hw * (size_t)oc + 1);
    if (!o) return NB_FAIL(NB_ERR_OOM, "image_read: out of host memory");
    for (int64_t i = 0; i < hw; i++) {
        const uint8_t *s = px->p + i * c;
        if (oc == c) {
            for (int k = 0; k < c; k++) o[k * hw + i] = s[k];
        } else if (oc == 1) {
            o[i] = c < 3 ? s[0] : (uint8_t)((s[0] * 19595u + s[1] * 38470u + s[2] * 7471u + 0x8000u) >> 16);
        } else { /* RGB */
            for (int k = 0; k < 3; k++) o[k * hw + i] = c < 3 ? s[0] : s[k];
        }
    }
    nb_tensor *t = nb_from_data(o, 3, (int64_t[]){oc, px->h, px->w}, NB_U8);
    free(o);
    return t;
}

nb_tensor *nb_image_decode(const void *data, size_t len, const char *name, nb_image_mode mode) {
    if (!data || (unsigned)mode > NB_IMAGE_UNCHANGED) return NB_FAIL(NB_ERR_INVALID_ARG, "image_decode: NULL data or a bad mode");
    if (!name) name = "image";
#ifdef NB_HAVE_IMAGES
    const uint8_t *b = data;
    pixels px = {0};
    nb_status st;
    if (len >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) st = decode_png(b, len, name, &px);
    else if (len >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) st = decode_jpeg(b, len, name, &px);
    else st = nb_set_error(NB_ERR_FORMAT, "image_read: %s: neither a PNG nor a JPEG", name);
    nb_tensor *t = st ? NULL : to_chw(&px, mode);
    free(px.p);
    return t;
#else
    (void)len, (void)mode;
    return NB_FAIL(NB_ERR_UNSUPPORTED, "image_read: %s: nabla was built without libpng and libjpeg", name);
#endif
}

nb_tensor *nb_image_read(const char *path, nb_image_mode mode) {
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "image_read: NULL path");
    size_t len;
    uint8_t *buf = nb_data_read_file("image_read", path, &len);
    if (!buf) return NULL;
    nb_tensor *t = nb_image_decode(buf, len, path, mode);
    free(buf);
    return t;
}

/* ---- encoding ---------------------------------------------------------------------------------- */

/* img as interleaved host bytes ([C, H, W] uint8, C 1 to 4 (JPEG: 1 or 3)); *c, *h, *w set. */
static uint8_t *interleaved(const char *op, nb_tensor *img, int max_c, int *c, int64_t *h, int64_t *w) {
    if (!img) return NB_FAIL(NB_ERR_INVALID_ARG, "%s: NULL image", op);
    const int64_t *s = nb_shape(img);
    if (nb_dtype_of(img) != NB_U8 || nb_dim(img) != 3 || s[0] < 1 || s[0] > max_c || s[0] == (max_c == 3 ? 2 : 0) ||
        s[1] < 1 || s[2] < 1 || s[1] > 65535 || s[2] > 65535)
        return NB_FAIL(NB_ERR_SHAPE, "%s: the image must be uint8 [C, H, W] with C in 1..%d and sides in [1, 65535]", op,
                       max_c);
    *c = (int)s[0], *h = s[1], *w = s[2];
    int64_t hw = s[1] * s[2];
    uint8_t *chw = malloc((size_t)(hw * s[0])), *o = chw ? malloc((size_t)(hw * s[0])) : NULL;
    if (!o) return free(chw), NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    if (nb_to_host(img, chw, (size_t)(hw * s[0]))) return free(chw), free(o), NULL;
    for (int k = 0; k < *c; k++)
        for (int64_t i = 0; i < hw; i++) o[i * *c + k] = chw[k * hw + i];
    free(chw);
    return o;
}

nb_status nb_image_write_png(const char *path, nb_tensor *img) {
    const char *op = "image_write_png";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
#ifdef NB_HAVE_IMAGES
    int c;
    int64_t h, w;
    uint8_t *px = interleaved(op, img, 4, &c, &h, &w);
    if (!px) return nb_last_status();
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION, pi.width = (png_uint_32)w, pi.height = (png_uint_32)h;
    static const png_uint_32 formats[5] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB, PNG_FORMAT_RGBA};
    pi.format = formats[c];
    png_alloc_size_t size = 0;
    nb_status st = NB_OK;
    void *mem = NULL;
    if (!png_image_write_to_memory(&pi, NULL, &size, 0, px, 0, NULL) || !(mem = malloc(size)) ||
        !png_image_write_to_memory(&pi, mem, &size, 0, px, 0, NULL))
        st = nb_set_error(mem || !size ? NB_ERR_IO : NB_ERR_OOM, "%s: %s: %s", op, path, pi.message[0] ? pi.message : "cannot encode");
    if (!st) st = nb_write_file_atomic(op, path, mem, size);
    free(mem), free(px);
    return st;
#else
    (void)img;
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: nabla was built without libpng", op);
#endif
}

#ifdef NB_HAVE_IMAGES
/* libjpeg's output into a buffer that grows (ours, so an error path frees the live one). */
typedef struct jdest {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap;
} jdest;

static void jd_init(j_compress_ptr c) {
    jdest *d = (jdest *)c->dest;
    if (!d->buf && !(d->buf = malloc(d->cap = 1 << 16))) ERREXIT(c, JERR_OUT_OF_MEMORY);
    d->pub.next_output_byte = d->buf, d->pub.free_in_buffer = d->cap;
}

static boolean jd_empty(j_compress_ptr c) { /* the whole buffer is full (libjpeg's contract) */
    jdest *d = (jdest *)c->dest;
    uint8_t *nb = d->cap < SIZE_MAX / 2 ? realloc(d->buf, 2 * d->cap) : NULL;
    if (!nb) ERREXIT(c, JERR_OUT_OF_MEMORY);
    d->pub.next_output_byte = nb + d->cap, d->pub.free_in_buffer = d->cap;
    d->buf = nb, d->cap *= 2;
    return TRUE;
}

static void jd_term(j_compress_ptr c) { (void)c; }
#endif

nb_status nb_image_write_jpeg(const char *path, nb_tensor *img, int quality) {
    const char *op = "image_write_jpeg";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    if (quality == 0) quality = 75; /* PIL's default */
    if (quality < 1 || quality > 100) return nb_set_error(NB_ERR_INVALID_ARG, "%s: quality %d outside [1, 100]", op, quality);
#ifdef NB_HAVE_IMAGES
    int c;
    int64_t h, w;
    uint8_t *px = interleaved(op, img, 3, &c, &h, &w);
    if (!px) return nb_last_status();
    if (h > 65500 || w > 65500) /* JPEG_MAX_DIMENSION */
        return free(px), nb_set_error(NB_ERR_SHAPE, "%s: JPEG sides are at most 65500 (the image is %lld x %lld)", op,
                                      (long long)h, (long long)w);
    volatile int q = quality; /* kept across the setjmp */
    struct jpeg_compress_struct j;
    jerr e;
    memset(&j, 0, sizeof j);
    /* the output, in heap memory: what it holds is valid after a longjmp (a local changed after setjmp is not) */
    jdest *volatile o = calloc(1, sizeof *o);
    if (!o) return free(px), nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    j.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_fail, e.mgr.emit_message = jpeg_quiet, e.truncated = false;
    if (setjmp(e.jump)) {
        jpeg_destroy_compress(&j);
        free(o->buf), free(o), free(px);
        return nb_set_error(NB_ERR_IO, "%s: %s: %s", op, path, e.msg);
    }
    jpeg_create_compress(&j);
    o->pub.init_destination = jd_init, o->pub.empty_output_buffer = jd_empty, o->pub.term_destination = jd_term;
    j.dest = &o->pub;
    j.image_width = (JDIMENSION)w, j.image_height = (JDIMENSION)h, j.input_components = c;
    j.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&j);
    jpeg_set_quality(&j, q, TRUE);
    jpeg_start_compress(&j, TRUE);
    while (j.next_scanline < j.image_height) {
        JSAMPROW r = px + (size_t)j.next_scanline * (size_t)w * (size_t)c;
        jpeg_write_scanlines(&j, &r, 1);
    }
    jpeg_finish_compress(&j);
    jpeg_destroy_compress(&j);
    nb_status st = nb_write_file_atomic(op, path, o->buf, o->cap - o->pub.free_in_buffer);
    free(o->buf), free(o), free(px);
    return st;
#else
    (void)img;
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: nabla was built without libjpeg", op);
#endif
}
