/* test_npy.c - NumPy's .npy and .npz files (data/npy.c, data/npz.c): round
 * trips of every dtype and shape, the memory-mapped load, the atomic
 * write, hostile files (truncated, lying headers, bad CRCs, a deflate
 * bomb), and NumPy itself (tests/interop/npy_interop.py reads nabla's files,
 * compares them with numpy.save's bytes, and writes files of every type,
 * order and byte order that nabla then loads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_data.h"
#include "nb_test.h"

static nb_tensor *made(nb_dtype dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    const char *kind = dt == NB_BOOL ? "b" : dt == NB_U8 ? "u" : dt == NB_I32 || dt == NB_I64 ? "i" : "f";
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = nb_test_value(kind, i);
    nb_tensor *t = nb_to_dtype(nb_from_data(v, ndim, shape, NB_F64), dt);
    free(v);
    return t;
}

/* t holds v(i) of kind at every C-order position. */
static void ck_values(nb_tensor *t, const char *kind, const char *what) {
    NB_CK_NOTNULL(t);
    double *got = nb_test_values_of(t);
    for (int64_t i = 0; i < nb_numel(t); i++)
        ck_assert_msg(got[i] == nb_test_value(kind, i), "%s: element %lld is %g, not %g", what, (long long)i, got[i],
                      nb_test_value(kind, i));
    free(got);
}

static void ck_same(nb_tensor *a, nb_tensor *b) {
    ck_assert_int_eq(nb_dtype_of(a), nb_dtype_of(b));
    nb_ck_shape(a, nb_dim(b), nb_shape(b));
    double *x = nb_test_values_of(a), *y = nb_test_values_of(b);
    for (int64_t i = 0; i < nb_numel(a); i++) ck_assert(x[i] == y[i]);
    free(x), free(y);
}

static const nb_dtype dtypes[] = {NB_F32, NB_F64, NB_F16, NB_I32, NB_I64, NB_U8, NB_BOOL};
static const char *const dtype_names[] = {"float32", "float64", "float16", "int32", "int64", "uint8", "bool"};

START_TEST(test_npy_round_trips) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_npy_XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.npy", dir);
    const int64_t shapes[][3] = {{3, 4, 5}, {7, 0, 0}, {0, 3, 0}};
    const int ndims[] = {3, 1, 2};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (int k = 0; k < 3; k++) {
            nb_tensor *t = made(dtypes[d], ndims[k], shapes[k]);
            NB_CK_OK(nb_npy_save(path, t));
            ck_same(nb_npy_load(path), t);
            nb_tensor *m = nb_npy_load_mmap(path);
            if (dtypes[d] == NB_BOOL) ck_assert_int_eq(nb_last_status(), NB_ERR_UNSUPPORTED);
            else if (nb_numel(t)) ck_same(m, t);
        }
    /* 0-d, and a transposed view saved in C order of its values */
    NB_CK_OK(nb_npy_save(path, nb_scalar(2.5, NB_F64)));
    nb_tensor *z = nb_npy_load(path);
    ck_assert_int_eq(nb_dim(z), 0);
    ck_assert_double_eq(nb_item(z), 2.5);
    nb_tensor *t = made(NB_F32, 2, (int64_t[]){3, 4}), *tt = nb_transpose(t, 0, 1);
    NB_CK_OK(nb_npy_save(path, tt));
    ck_same(nb_npy_load(path), nb_contiguous(tt));
    /* the mapping is copy-on-write: a write through the tensor leaves the file */
    nb_tensor *m = nb_npy_load_mmap(path);
    NB_CK_OK(nb_fill_(m, 7));
    ck_same(nb_npy_load(path), nb_contiguous(tt));
    /* bfloat16: no NumPy type; the previous file stays */
    ck_assert_int_eq(nb_npy_save(path, nb_to_dtype(t, NB_BF16)), NB_ERR_DTYPE);
    ck_same(nb_npy_load(path), nb_contiguous(tt));
    ck_assert_int_eq(nb_npy_save(NULL, t), NB_ERR_INVALID_ARG);
    ck_assert_ptr_null(nb_npy_load("/nonexistent/x.npy"));
    ck_assert_int_eq(nb_last_status(), NB_ERR_IO);
    /* .npz, stored and deflated */
    nb_named_tensor arr[2] = {{"a", made(NB_F32, 3, (int64_t[]){3, 4, 5})}, {"b", made(NB_I64, 1, (int64_t[]){7})}};
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/a.npz", dir);
        NB_CK_OK(nb_npz_save(path, arr, 2, c == 1));
        nb_npz *f = nb_npz_load(path);
        NB_CK_NOTNULL(f);
        ck_assert_int_eq(f->n, 2);
        ck_assert_str_eq(f->arrays[0].name, "a");
        ck_same(nb_npz_get(f, "a"), arr[0].tensor);
        ck_same(nb_npz_get(f, "b"), arr[1].tensor);
        ck_assert_ptr_null(nb_npz_get(f, "c"));
        nb_npz_free(f);
    }
    nb_named_tensor dup[2] = {arr[0], {"a", arr[1].tensor}};
    ck_assert_int_eq(nb_npz_save(path, dup, 2, false), NB_ERR_INVALID_ARG);
    ck_assert_int_eq(nb_npz_save(path, (nb_named_tensor[]){{"", t}}, 1, false), NB_ERR_INVALID_ARG);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* A .npy whose header is hdr (padded as numpy pads) followed by n data bytes. */
static void write_npy(const char *path, const char *hdr, size_t n) {
    size_t hl = strlen(hdr) + 1, pad = 64 - (10 + hl) % 64, len = 10 + hl + pad + n;
    uint8_t *b = calloc(1, len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)((hl + pad) & 0xff), b[9] = (uint8_t)((hl + pad) >> 8);
    memcpy(b + 10, hdr, hl - 1);
    memset(b + 9 + hl, ' ', pad);
    b[9 + hl + pad] = '\n';
    nb_test_write_file(path, b, len);
    free(b);
}

START_TEST(test_npy_hostile_files) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_npy_XXXXXX", path[128], path2[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/h.npy", dir);
    struct {
        const char *hdr;
        size_t bytes;
        nb_status want;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 47, NB_ERR_FORMAT},      /* truncated */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 49, NB_ERR_FORMAT},      /* trailing */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }", 8, NB_ERR_FORMAT},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, NB_ERR_DTYPE},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, NB_ERR_DTYPE},
        {"{'descr': '<f4', 'shape': (2,), }", 8, NB_ERR_FORMAT},                                 /* a key missing */
        {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", 8, NB_ERR_FORMAT},
        {"{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }", 8, NB_ERR_FORMAT},
        {"not a dict", 8, NB_ERR_FORMAT},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_npy(path, cases[k].hdr, cases[k].bytes);
        ck_assert_ptr_null(nb_npy_load(path));
        ck_assert_msg(nb_last_status() == cases[k].want, "case %zu: %s", k, nb_last_error());
        ck_assert_ptr_null(nb_npy_load_mmap(path));
    }
    nb_test_write_file(path, "\x93NUMPY\x01\x00\xff\xff{", 11); /* a header length past the file */
    ck_assert_ptr_null(nb_npy_load(path));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    nb_test_write_file(path, "PK\x03\x04", 4);
    ck_assert_ptr_null(nb_npy_load(path));
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    ck_assert_ptr_null(nb_npz_load(path)); /* no end record */
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    /* a good .npz, then its member's bytes flipped (CRC), cut short, and a deflated member claiming 2^31 bytes */
    snprintf(path2, sizeof path2, "%s/h.npz", dir);
    nb_named_tensor arr[1] = {{"x", made(NB_F64, 1, (int64_t[]){50})}};
    for (int c = 0; c < 2; c++) {
        NB_CK_OK(nb_npz_save(path2, arr, 1, c == 1));
        size_t n;
        uint8_t *b = (uint8_t *)nb_test_slurp(path2, &n);
        b[40 + 30] ^= 1; /* inside the member's data */
        nb_test_write_file(path, b, n);
        ck_assert_ptr_null(nb_npz_load(path));
        ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
        b[40 + 30] ^= 1;
        nb_test_write_file(path, b, n / 2);
        ck_assert_ptr_null(nb_npz_load(path));
        ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
        if (c == 1) { /* the central directory's uncompressed size (offset 24 of its entry) */
            size_t cd = 0;
            for (size_t i = 0; i + 4 <= n; i++)
                if (!memcmp(b + i, "PK\x01\x02", 4)) cd = i;
            ck_assert_uint_gt(cd, 0);
            memcpy(b + cd + 24, "\x00\x00\x00\x80", 4);
            nb_test_write_file(path, b, n);
            ck_assert_ptr_null(nb_npz_load(path));
            ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
            ck_assert_ptr_nonnull(strstr(nb_last_error(), "claims"));
        }
        free(b);
    }
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_npy_against_numpy) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_npy_XXXXXX", path[256], script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("npy_interop.py", script, sizeof script), "npy_interop.py not found");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int64_t shape[3] = {3, 4, 5};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        snprintf(path, sizeof path, "%s/nabla_%s.npy", dir, dtype_names[d]);
        NB_CK_OK(nb_npy_save(path, made(dtypes[d], 3, shape)));
    }
    snprintf(path, sizeof path, "%s/nabla_scalar.npy", dir);
    NB_CK_OK(nb_npy_save(path, nb_scalar(2.5, NB_F64)));
    snprintf(path, sizeof path, "%s/nabla_empty.npy", dir);
    NB_CK_OK(nb_npy_save(path, nb_zeros(NB_SHAPE(0, 3), NB_F32)));
    nb_named_tensor arr[2] = {{"a", made(NB_F32, 3, shape)}, {"b", made(NB_I64, 1, (int64_t[]){7})}};
    snprintf(path, sizeof path, "%s/nabla.npz", dir);
    NB_CK_OK(nb_npz_save(path, arr, 2, false));
    snprintf(path, sizeof path, "%s/nabla_c.npz", dir);
    NB_CK_OK(nb_npz_save(path, arr, 2, true));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("npy_interop: skipped: /usr/bin/python3 lacks numpy\n");
    } else {
        ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "npy_interop.py failed (status %d)", rc);
        /* NumPy's files: every type, order and byte order, with their nabla dtypes */
        const struct {
            const char *name, *kind;
            nb_dtype dt;
        } types[] = {{"bool", "b", NB_BOOL},    {"int8", "i", NB_I8},      {"int16", "i", NB_I16},
                     {"int32", "i", NB_I32},    {"int64", "i", NB_I64},    {"uint8", "u", NB_U8},
                     {"uint16", "u", NB_I32},   {"uint32", "u", NB_I64},   {"uint64", "u", NB_I64},
                     {"float16", "f", NB_F16},  {"float32", "f", NB_F32},  {"float64", "f", NB_F64}};
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
            for (int v = 0; v < 4; v++) {
                snprintf(path, sizeof path, "%s/np/%s_%s_%s.npy", dir, types[k].name, v & 1 ? "be" : "le", v & 2 ? "f" : "c");
                nb_tensor *t = nb_npy_load(path);
                ck_values(t, types[k].kind, path);
                ck_assert_int_eq(nb_dtype_of(t), types[k].dt);
                nb_ck_shape(t, 3, shape);
                nb_tensor *m = nb_npy_load_mmap(path); /* only what needs no conversion maps */
                bool maps = (!(v & 1) || types[k].dt == NB_U8 || types[k].dt == NB_I8) && !(v & 2) &&
                            types[k].dt != NB_BOOL && /* one byte: no order */
                            (types[k].dt != NB_I32 || !strcmp(types[k].name, "int32")) &&
                            (types[k].dt != NB_I64 || !strcmp(types[k].name, "int64"));
                if (maps) ck_values(m, types[k].kind, path);
                else ck_assert_msg(!m && nb_last_status() == NB_ERR_UNSUPPORTED, "%s mapped", path);
            }
        snprintf(path, sizeof path, "%s/np/scalar.npy", dir);
        ck_assert_double_eq(nb_item(nb_npy_load(path)), -1.5);
        snprintf(path, sizeof path, "%s/np/empty.npy", dir);
        nb_ck_shape(nb_npy_load(path), 2, (int64_t[]){2, 0});
        snprintf(path, sizeof path, "%s/np/complex.npy", dir);
        ck_assert_ptr_null(nb_npy_load(path));
        ck_assert_int_eq(nb_last_status(), NB_ERR_DTYPE);
        for (int c = 0; c < 2; c++) {
            snprintf(path, sizeof path, "%s/np/%s.npz", dir, c ? "packed" : "plain");
            nb_npz *f = nb_npz_load(path);
            NB_CK_NOTNULL(f);
            ck_assert_int_eq(f->n, 2);
            ck_values(nb_npz_get(f, "x"), "f", path);
            ck_values(nb_npz_get(f, "y"), "i", path);
            nb_npz_free(f);
        }
    }
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_npy(void) {
    Suite *s = suite_create("npy");
    TCase *t = tcase_create("npy");
    tcase_add_test(t, test_npy_round_trips);
    tcase_add_test(t, test_npy_hostile_files);
    tcase_add_test(t, test_npy_against_numpy);
    suite_add_tcase(s, t);
    return s;
}
