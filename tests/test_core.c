/* test_core.c - tensors without autograd: creation, metadata, host access,
 * nb_copy_ with broadcasting and casts among the six dtypes, NumPy
 * broadcasting of binary ops, error paths (status, message naming the op,
 * NULL propagation keeping the first error), scopes and the caching
 * allocator's statistics. Expected values are computed by hand from
 * PyTorch's semantics. The forward values of views, and that they share
 * storage, are tested in test_ops_view.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

/* An op that must fail with status st and name `word` in its message. */
#define CK_FAILS_MSG(expr, st, word)                                                            \
    do {                                                                                         \
        NB_CK_FAILS(expr, st);                                                                   \
        ck_assert_msg(strstr(nb_last_error(), (word)) != NULL, "message \"%s\" lacks \"%s\"",   \
                      nb_last_error(), (word));                                                  \
    } while (0)
/* The same for a function returning nb_status. */
#define CK_FAILS_ST(expr, st, word) CK_FAILS_MSG((expr) == NB_OK, st, word)

static size_t allocated_now(void) { return nb_memory_stats_get(NB_CPU).allocated; }

/* A tensor of dtype dt built from host bytes (not through nb_to_dtype). */
static nb_tensor *typed_tensor(nb_dtype dt, const double *v, int64_t n) {
    unsigned char buf[8 * 16];
    ck_assert_int_le(n, 16);
    for (int64_t i = 0; i < n; i++) {
        void *p = buf + (size_t)i * nb_dtype_size(dt);
        switch (dt) {
        case NB_F32: *(float *)p = (float)v[i]; break;
        case NB_F64: *(double *)p = v[i]; break;
        case NB_I32: *(int32_t *)p = (int32_t)v[i]; break;
        case NB_I64: *(int64_t *)p = (int64_t)v[i]; break;
        case NB_U8: *(uint8_t *)p = (uint8_t)v[i]; break;
        case NB_BOOL: *(bool *)p = v[i] != 0; break;
        default: ck_abort();
        }
    }
    nb_tensor *t = nb_from_data(buf, 1, &n, dt);
    NB_CK_NOTNULL(t);
    return t;
}

/* Reads t's raw bytes and converts them to doubles on the host. */
static void typed_values(const nb_tensor *t, double *out, int64_t n) {
    unsigned char buf[8 * 16];
    ck_assert_int_le(n, 16);
    ck_assert_int_eq(nb_numel(t), n);
    NB_CK_OK(nb_to_host(t, buf, sizeof buf));
    for (int64_t i = 0; i < n; i++) {
        const void *p = buf + (size_t)i * nb_dtype_size(nb_dtype_of(t));
        switch (nb_dtype_of(t)) {
        case NB_F32: out[i] = *(const float *)p; break;
        case NB_F64: out[i] = *(const double *)p; break;
        case NB_I32: out[i] = *(const int32_t *)p; break;
        case NB_I64: out[i] = (double)*(const int64_t *)p; break;
        case NB_U8: out[i] = *(const uint8_t *)p; break;
        case NB_BOOL: {
            uint8_t byte = *(const uint8_t *)p;
            ck_assert_msg(byte <= 1, "bool byte %u is not 0/1", byte);
            out[i] = byte;
            break;
        }
        default: ck_abort();
        }
    }
}

/* ---- creation and metadata ---------------------------------------------- */

START_TEST(test_create_basic) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *z = nb_zeros(NB_SHAPE(2, 3), NB_F32);
    nb_ck_shape(z, 2, (int64_t[]){2, 3});
    ck_assert_int_eq(nb_numel(z), 6);
    ck_assert_int_eq(nb_dtype_of(z), NB_F32);
    ck_assert_int_eq(nb_device_of(z).type, NB_DEVICE_CPU);
    ck_assert_int_eq(nb_strides(z)[0], 3);
    ck_assert_int_eq(nb_strides(z)[1], 1);
    ck_assert(nb_is_contiguous(z));
    nb_ck_close(z, (double[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);

    nb_tensor *o = nb_ones(NB_SHAPE(4), NB_I64);
    nb_ck_close(o, (double[]){1, 1, 1, 1}, 4, 0, 0);
    nb_tensor *f = nb_full(NB_SHAPE(2, 2), 2.5, NB_F64);
    nb_ck_close(f, (double[]){2.5, 2.5, 2.5, 2.5}, 4, 0, 0);
    nb_tensor *fb = nb_full(NB_SHAPE(2), 0.25, NB_BOOL); /* nonzero -> true */
    double v[16];
    typed_values(fb, v, 2);
    ck_assert(v[0] == 1 && v[1] == 1);

    nb_tensor *e = nb_empty(NB_SHAPE(0, 5), NB_F32); /* empty tensors are valid */
    NB_CK_NOTNULL(e);
    ck_assert_int_eq(nb_numel(e), 0);

    nb_tensor *zl = nb_zeros_like(f), *ol = nb_ones_like(z);
    nb_ck_shape(zl, 2, (int64_t[]){2, 2});
    ck_assert_int_eq(nb_dtype_of(zl), NB_F64);
    nb_ck_close(zl, (double[]){0, 0, 0, 0}, 4, 0, 0);
    nb_ck_close(ol, (double[]){1, 1, 1, 1, 1, 1}, 6, 0, 0);
    NB_CK_OK(nb_fill_(zl, -3));
    nb_ck_close(zl, (double[]){-3, -3, -3, -3}, 4, 0, 0);

    /* strides of a shape with a size-1 dim, as PyTorch: [2,1,3] -> [3,3,1] */
    nb_tensor *u = nb_zeros(NB_SHAPE(2, 1, 3), NB_F32);
    ck_assert_int_eq(nb_strides(u)[0], 3);
    ck_assert_int_eq(nb_strides(u)[1], 3);
    ck_assert_int_eq(nb_strides(u)[2], 1);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_from_data_and_to_host) {
    nb_scope *s = nb_scope_begin();
    int32_t src[6] = {1, -2, 3, -4, 5, -6}, dst[6] = {0};
    nb_tensor *t = nb_from_data(src, NB_SHAPE(3, 2), NB_I32);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_to_host(t, dst, sizeof dst));
    ck_assert_mem_eq(src, dst, sizeof src);
    src[0] = 100; /* the tensor holds a copy */
    NB_CK_OK(nb_to_host(t, dst, sizeof dst));
    ck_assert_int_eq(dst[0], 1);

    double d[4] = {0.5, 1.5, -2.25, 1e300}, back[4];
    nb_tensor *td = nb_from_data(d, NB_SHAPE(2, 2), NB_F64);
    NB_CK_OK(nb_to_host(td, back, sizeof back));
    ck_assert_mem_eq(d, back, sizeof d);

    double nd[4] = {9, 8, 7, 6};
    NB_CK_OK(nb_copy_from_host(td, nd, sizeof nd));
    nb_ck_close(td, nd, 4, 0, 0);

    CK_FAILS_ST(nb_to_host(td, back, sizeof back - 1), NB_ERR_INVALID_ARG, "to_host");
    CK_FAILS_ST(nb_copy_from_host(td, nd, 8), NB_ERR_INVALID_ARG, "copy_from_host");
    CK_FAILS_ST(nb_copy_from_host(nb_transpose(td, 0, 1), nd, sizeof nd), NB_ERR_INVALID_ARG, "contiguous");
    CK_FAILS_MSG(nb_from_data(NULL, NB_SHAPE(2), NB_F64), NB_ERR_INVALID_ARG, "from_data");

    /* nb_to_host of a non-contiguous view gives C order of the view */
    double tr[4];
    NB_CK_OK(nb_to_host(nb_transpose(td, 0, 1), tr, sizeof tr));
    ck_assert(tr[0] == 9 && tr[1] == 7 && tr[2] == 8 && tr[3] == 6);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_arange) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_arange(0, 5, 1, NB_I64);
    nb_ck_shape(a, 1, (int64_t[]){5});
    ck_assert_int_eq(nb_dtype_of(a), NB_I64);
    nb_ck_close(a, (double[]){0, 1, 2, 3, 4}, 5, 0, 0);
    nb_ck_close(nb_arange(1, 2.5, 0.5, NB_F64), (double[]){1, 1.5, 2}, 3, 0, 0);
    nb_ck_close(nb_arange(5, 0, -2, NB_I32), (double[]){5, 3, 1}, 3, 0, 0);
    nb_ck_close(nb_arange(0, 1, 0.25, NB_F32), (double[]){0, 0.25, 0.5, 0.75}, 4, 0, 0);
    ck_assert_int_eq(nb_numel(nb_arange(3, 3, 1, NB_F64)), 0);
    ck_assert_int_eq(nb_numel(nb_arange(3, 0, 1, NB_F64)), 0);
    CK_FAILS_MSG(nb_arange(0, 1, 0, NB_F64), NB_ERR_INVALID_ARG, "arange");
    nb_scope_end(s);
}
END_TEST

START_TEST(test_scalar_item_metadata) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *sc = nb_scalar(3.5, NB_F64);
    ck_assert_int_eq(nb_dim(sc), 0);
    ck_assert_int_eq(nb_numel(sc), 1);
    ck_assert(nb_is_contiguous(sc));
    ck_assert_double_eq(nb_item(sc), 3.5);
    ck_assert_double_eq(nb_item(nb_scalar(-7, NB_I32)), -7);
    ck_assert_double_eq(nb_item(nb_full(NB_SHAPE(1, 1), 2, NB_U8)), 2);

    nb_tensor *v = nb_zeros(NB_SHAPE(2), NB_F64);
    nb_clear_error();
    ck_assert(isnan(nb_item(v)));
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "item"));

    nb_tensor *t = nb_zeros(NB_SHAPE(2, 3, 4), NB_F32);
    ck_assert_int_eq(nb_size(t, -1), 4);
    ck_assert_int_eq(nb_size(t, -3), 2);
    ck_assert_int_eq(nb_size(t, 1), 3);
    ck_assert_int_eq(nb_shape(t)[2], 4);
    char buf[64];
    ck_assert_str_eq(nb_shape_str(t, buf, sizeof buf), "[2, 3, 4] float32");
    ck_assert_str_eq(nb_shape_str(sc, buf, sizeof buf), "[] float64");

    const nb_dtype dts[6] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8, NB_BOOL};
    const size_t sizes[6] = {4, 8, 4, 8, 1, 1};
    const char *names[6] = {"float32", "float64", "int32", "int64", "uint8", "bool"};
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(nb_dtype_size(dts[i]), sizes[i]);
        ck_assert_str_eq(nb_dtype_name(dts[i]), names[i]);
        ck_assert(nb_dtype_is_float(dts[i]) == (i < 2));
    }
    ck_assert_str_eq(nb_status_str(NB_ERR_SHAPE), "shape error");
    ck_assert_str_eq(nb_status_str(NB_OK), "ok");
    ck_assert_int_eq(nb_default_device().type, NB_DEVICE_CPU);
    nb_scope_end(s);
}
END_TEST

/* Tensors with a zero-size dim are valid and contiguous (PyTorch: numel 0
 * is always contiguous); ops on them give empty results, not errors. */
START_TEST(test_empty_tensors) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *z = nb_zeros(NB_SHAPE(5, 0), NB_F64);
    NB_CK_NOTNULL(z);
    ck_assert_int_eq(nb_numel(z), 0);
    ck_assert(nb_is_contiguous(z));
    double buf[1];
    NB_CK_OK(nb_to_host(z, buf, sizeof buf));
    nb_ck_shape(nb_add(z, z), 2, (int64_t[]){5, 0});
    nb_ck_shape(nb_transpose(z, 0, 1), 2, (int64_t[]){0, 5});
    nb_ck_shape(nb_reshape(z, NB_SHAPE(-1)), 1, (int64_t[]){0});
    nb_ck_close(nb_sum(z, (int[]){1}, 1, false), (double[]){0, 0, 0, 0, 0}, 5, 0, 0);
    nb_ck_shape(nb_softmax(z, 1), 2, (int64_t[]){5, 0});
    nb_ck_shape(nb_exp(nb_zeros(NB_SHAPE(2, 0, 3), NB_F32)), 3, (int64_t[]){2, 0, 3});
    nb_scope_end(s);
}
END_TEST

/* ---- copy_ and casts ----------------------------------------------------- */

START_TEST(test_copy_casts_all_dtypes) {
    const nb_dtype dts[6] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8, NB_BOOL};
    const double base[4] = {0, 1, 2, 5};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *src = typed_tensor(dts[i], base, 4);
            nb_tensor *dst = nb_full(NB_SHAPE(4), 7, dts[j]);
            NB_CK_OK(nb_copy_(dst, src));
            double got[16], want[4];
            for (int k = 0; k < 4; k++) {
                want[k] = dts[i] == NB_BOOL ? base[k] != 0 : base[k];
                if (dts[j] == NB_BOOL) want[k] = want[k] != 0;
            }
            typed_values(dst, got, 4);
            for (int k = 0; k < 4; k++)
                ck_assert_msg(got[k] == want[k], "%s -> %s element %d: got %g, want %g", nb_dtype_name(dts[i]),
                              nb_dtype_name(dts[j]), k, got[k], want[k]);
            /* nb_to_dtype does the same conversion into a new tensor */
            nb_tensor *c = nb_to_dtype(src, dts[j]);
            NB_CK_NOTNULL(c);
            ck_assert_int_eq(nb_dtype_of(c), dts[j]);
            typed_values(c, got, 4);
            for (int k = 0; k < 4; k++) ck_assert(got[k] == want[k]);
            nb_scope_end(s);
        }
}
END_TEST

START_TEST(test_copy_float_to_int_truncates) {
    nb_scope *s = nb_scope_begin();
    const double v[4] = {-2.7, 2.9, 0.5, -0.0};
    nb_tensor *src = typed_tensor(NB_F64, v, 4);
    double got[16];
    typed_values(nb_to_dtype(src, NB_I32), got, 4);
    ck_assert(got[0] == -2 && got[1] == 2 && got[2] == 0 && got[3] == 0);
    typed_values(nb_to_dtype(src, NB_I64), got, 4);
    ck_assert(got[0] == -2 && got[1] == 2 && got[2] == 0 && got[3] == 0);
    typed_values(nb_to_dtype(src, NB_BOOL), got, 4); /* nonzero -> 1 */
    ck_assert(got[0] == 1 && got[1] == 1 && got[2] == 1 && got[3] == 0);
    typed_values(nb_to_dtype(src, NB_F32), got, 4);
    ck_assert(got[0] == (double)-2.7f && got[1] == (double)2.9f && got[2] == 0.5);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_copy_broadcast) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *dst = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    NB_CK_OK(nb_copy_(dst, nb_test_tensor(NB_SHAPE(3), NB_F64, (double[]){1, 2, 3})));
    nb_ck_close(dst, (double[]){1, 2, 3, 1, 2, 3}, 6, 0, 0);
    NB_CK_OK(nb_copy_(dst, nb_test_tensor(NB_SHAPE(2, 1), NB_F64, (double[]){-1, 4})));
    nb_ck_close(dst, (double[]){-1, -1, -1, 4, 4, 4}, 6, 0, 0);
    NB_CK_OK(nb_copy_(dst, nb_scalar(9, NB_F64)));
    nb_ck_close(dst, (double[]){9, 9, 9, 9, 9, 9}, 6, 0, 0);
    /* broadcasting plus a cast: int32 row into a float32 matrix */
    nb_tensor *d32 = nb_zeros(NB_SHAPE(2, 2), NB_F32);
    NB_CK_OK(nb_copy_(d32, nb_test_tensor(NB_SHAPE(2), NB_I32, (double[]){3, -5})));
    nb_ck_close(d32, (double[]){3, -5, 3, -5}, 4, 0, 0);

    CK_FAILS_ST(nb_copy_(dst, nb_zeros(NB_SHAPE(4), NB_F64)), NB_ERR_SHAPE, "copy_");
    CK_FAILS_ST(nb_copy_(dst, nb_zeros(NB_SHAPE(3, 1), NB_F64)), NB_ERR_SHAPE, "copy_");
    /* the source may not be larger than the destination */
    CK_FAILS_ST(nb_copy_(nb_zeros(NB_SHAPE(3), NB_F64), dst), NB_ERR_SHAPE, "copy_");
    CK_FAILS_ST(nb_copy_(nb_zeros(NB_SHAPE(1, 3), NB_F64), dst), NB_ERR_SHAPE, "copy_");
    CK_FAILS_ST(nb_copy_(NULL, dst), NB_ERR_INVALID_ARG, "copy_");
    nb_scope_end(s);
}
END_TEST

/* ---- broadcasting of binary ops ------------------------------------------- */

START_TEST(test_broadcast_binary) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_reshape(nb_arange(0, 6, 1, NB_F64), NB_SHAPE(2, 1, 3)); /* a[i][0][k] = 3i + k */
    nb_tensor *b = nb_reshape(nb_arange(0, 40, 10, NB_F64), NB_SHAPE(4, 1));   /* b[j][0] = 10j */
    nb_tensor *c = nb_add(a, b);
    nb_ck_shape(c, 3, (int64_t[]){2, 4, 3});
    double want[24], want_mul[24], want_sub[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                want[i * 12 + j * 3 + k] = 3 * i + k + 10 * j;
                want_mul[i * 12 + j * 3 + k] = (3 * i + k) * (10 * j);
                want_sub[i * 12 + j * 3 + k] = 10 * j - (3 * i + k);
            }
    nb_ck_close(c, want, 24, 0, 0);
    nb_ck_close(nb_mul(a, b), want_mul, 24, 0, 0);
    nb_ck_close(nb_sub(b, a), want_sub, 24, 0, 0);
    /* with a 0-d tensor and in integers */
    nb_ck_close(nb_add(nb_arange(0, 3, 1, NB_F64), nb_scalar(0.5, NB_F64)), (double[]){0.5, 1.5, 2.5}, 3, 0, 0);
    nb_tensor *ia = nb_test_tensor(NB_SHAPE(2, 1), NB_I64, (double[]){1, 2});
    nb_tensor *ib = nb_test_tensor(NB_SHAPE(3), NB_I64, (double[]){10, 20, 30});
    nb_tensor *ic = nb_add(ia, ib);
    ck_assert_int_eq(nb_dtype_of(ic), NB_I64);
    nb_ck_close(ic, (double[]){11, 21, 31, 12, 22, 32}, 6, 0, 0);
    /* inputs that are themselves non-contiguous views */
    nb_tensor *m = nb_reshape(nb_arange(0, 6, 1, NB_F64), NB_SHAPE(2, 3));
    nb_ck_close(nb_add(nb_transpose(m, 0, 1), nb_test_tensor(NB_SHAPE(2), NB_F64, (double[]){100, 200})),
                (double[]){100, 203, 101, 204, 102, 205}, 6, 0, 0);
    CK_FAILS_MSG(nb_add(nb_zeros(NB_SHAPE(2, 3), NB_F64), nb_zeros(NB_SHAPE(4), NB_F64)), NB_ERR_SHAPE, "add");
    CK_FAILS_MSG(nb_mul(nb_zeros(NB_SHAPE(2, 3), NB_F64), nb_zeros(NB_SHAPE(3, 2), NB_F64)), NB_ERR_SHAPE, "mul");
    nb_scope_end(s);
}
END_TEST

/* ---- error paths ------------------------------------------------------------ */

START_TEST(test_error_paths) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *f32 = nb_zeros(NB_SHAPE(2, 3), NB_F32), *f64 = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    /* mixed dtypes promote (tests/test_ops_binary_logic.c); shapes must broadcast */
    CK_FAILS_MSG(nb_add(f32, nb_zeros(NB_SHAPE(4), NB_F64)), NB_ERR_SHAPE, "add");
    CK_FAILS_MSG(nb_sub(f64, nb_zeros(NB_SHAPE(3, 3), NB_F32)), NB_ERR_SHAPE, "sub");
    CK_FAILS_MSG(nb_silu(nb_zeros(NB_SHAPE(2), NB_I32)), NB_ERR_DTYPE, "silu");
    CK_FAILS_MSG(nb_log(nb_zeros(NB_SHAPE(2), NB_F16)), NB_ERR_DTYPE, "log"); /* no 16-bit log */
    CK_FAILS_MSG(nb_matmul(f64, f64), NB_ERR_SHAPE, "matmul");
    CK_FAILS_MSG(nb_sum(f64, (int[]){2}, 1, false), NB_ERR_INVALID_ARG, "sum");
    CK_FAILS_MSG(nb_sum(f64, (int[]){-3}, 1, false), NB_ERR_INVALID_ARG, "sum");
    CK_FAILS_MSG(nb_softmax(f64, 2), NB_ERR_INVALID_ARG, "softmax");
    CK_FAILS_MSG(nb_transpose(f64, 0, 2), NB_ERR_INVALID_ARG, "transpose");
    /* ndim above NB_MAX_DIMS and negative sizes */
    CK_FAILS_MSG(nb_zeros(NB_SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), NB_F32), NB_ERR_INVALID_ARG, "ndim");
    CK_FAILS_MSG(nb_empty(-1, NULL, NB_F32), NB_ERR_INVALID_ARG, "ndim");
    CK_FAILS_MSG(nb_ones(NB_SHAPE(2, -3), NB_F32), NB_ERR_INVALID_ARG, "-3");
    CK_FAILS_MSG(nb_reshape(f64, NB_SHAPE(1, 1, 1, 1, 1, 1, 2, 1, 3)), NB_ERR_INVALID_ARG, "reshape");
    CK_FAILS_MSG(nb_unsqueeze(nb_zeros(NB_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), NB_F32), 0), NB_ERR_INVALID_ARG,
                 "unsqueeze");
    CK_FAILS_MSG(nb_empty(NB_SHAPE(2), (nb_dtype)17), NB_ERR_DTYPE, "dtype");
    /* a device this build or machine lacks: the first CUDA index past those present */
    const nb_device cuda = {NB_DEVICE_CUDA, nb_device_count(NB_DEVICE_CUDA)};
    CK_FAILS_ST(nb_set_default_device(cuda), NB_ERR_DEVICE, "device");
    CK_FAILS_ST(nb_fill_(NULL, 1), NB_ERR_INVALID_ARG, "fill_");
    NB_CK_FAILS(nb_empty_on(NB_SHAPE(2), NB_F32, cuda), NB_ERR_DEVICE);
    NB_CK_FAILS(nb_to_device(f32, cuda), NB_ERR_DEVICE);
    /* sizes whose byte count overflows, and an allocation the device refuses */
    const int64_t huge = (int64_t)1 << 40;
    CK_FAILS_MSG(nb_empty(NB_SHAPE(huge, huge), NB_F32), NB_ERR_INVALID_ARG, "shape");
    size_t before = nb_memory_stats_get(NB_CPU).allocated;
    NB_CK_FAILS(nb_empty(NB_SHAPE((int64_t)1 << 45), NB_F64), NB_ERR_OOM); /* 256 TiB */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).allocated, before);
    /* an arange too long to count in int64 */
    CK_FAILS_MSG(nb_arange(0, 1e30, 1, NB_F64), NB_ERR_INVALID_ARG, "arange");
    /* a shape error message shows the shapes */
    NB_CK_FAILS(nb_add(nb_zeros(NB_SHAPE(2, 3), NB_F64), nb_zeros(NB_SHAPE(5), NB_F64)), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[2, 3]"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "[5]"));
    nb_clear_error();
    ck_assert_int_eq(nb_last_status(), NB_OK);
    ck_assert_str_eq(nb_last_error(), "");
    nb_scope_end(s);
}
END_TEST

START_TEST(test_null_propagates_first_error) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F64);
    nb_clear_error();
    nb_tensor *bad = nb_reshape(x, NB_SHAPE(5));
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    char first[1024];
    snprintf(first, sizeof first, "%s", nb_last_error());
    ck_assert_ptr_nonnull(strstr(first, "reshape"));
    /* a chain of ops on the NULL returns NULL and keeps the first error */
    nb_tensor *r = nb_sum(nb_exp(nb_matmul(nb_add(bad, x), nb_transpose(bad, 0, 1))), NULL, 0, false);
    ck_assert_ptr_null(r);
    ck_assert_ptr_null(nb_softmax(nb_relu(nb_reshape(nb_mul_scalar(bad, 2), NB_SHAPE(6))), 0));
    ck_assert_ptr_null(nb_cross_entropy(bad, NULL));
    ck_assert_ptr_null(nb_to_dtype(nb_contiguous(nb_expand(bad, NB_SHAPE(2, 3))), NB_F32));
    ck_assert_ptr_null(nb_slice(nb_narrow(nb_unsqueeze(nb_flatten(bad, 0, -1), 0), 0, 0, 1), 0, 0, 1, 1));
    ck_assert_ptr_null(nb_mse_loss(x, bad, NB_REDUCTION_MEAN));
    ck_assert_ptr_null(nb_linear(bad, x, NULL));
    ck_assert_ptr_null(nb_max_dim(nb_squeeze(nb_permute(bad, (int[]){1, 0}), 0), 0, false, NULL));
    ck_assert_int_eq(nb_last_status(), NB_ERR_SHAPE);
    ck_assert_str_eq(nb_last_error(), first);
    /* with no earlier error, a NULL input reports one */
    nb_clear_error();
    ck_assert_ptr_null(nb_add(NULL, x));
    ck_assert_int_ne(nb_last_status(), NB_OK);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "add"));
    nb_scope_end(s);
}
END_TEST

/* ---- scopes -------------------------------------------------------------------- */

START_TEST(test_scope_frees_tensors) {
    size_t before = allocated_now();
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(100, 100), NB_F64);
    nb_tensor *b = nb_exp(nb_add(a, a));
    nb_tensor *c = nb_transpose(b, 0, 1); /* a view keeps b's storage alive */
    NB_CK_NOTNULL(c);
    ck_assert_uint_ge(allocated_now(), before + 3 * 80000);
    nb_scope *inner = nb_scope_begin();
    nb_tensor *d = nb_mul(c, c);
    NB_CK_NOTNULL(d);
    size_t with_inner = allocated_now();
    nb_scope_end(inner); /* d dies, c lives */
    ck_assert_uint_lt(allocated_now(), with_inner);
    ck_assert_double_eq_tol(nb_item(nb_narrow(nb_narrow(c, 0, 0, 1), 1, 0, 1)), exp(2.0), 1e-12);
    nb_scope_end(s);
    ck_assert_uint_eq(allocated_now(), before);
}
END_TEST

START_TEST(test_scope_retain_keeps_alive) {
    size_t before = allocated_now();
    nb_scope *outer = nb_scope_begin();
    size_t in_outer = allocated_now();
    nb_scope *s = nb_scope_begin();
    nb_tensor *keep = nb_full(NB_SHAPE(1000), 3, NB_F64);
    nb_tensor *drop = nb_full(NB_SHAPE(1000), 4, NB_F64);
    NB_CK_NOTNULL(drop);
    nb_retain(keep);
    nb_scope_end(s);
    /* keep's block (8000 bytes, rounded to a multiple of 512: 8192) is all that is left */
    ck_assert_uint_eq(allocated_now(), in_outer + 8192);
    double v[1000];
    NB_CK_OK(nb_to_host(keep, v, sizeof v));
    ck_assert_double_eq(v[0], 3);
    ck_assert_double_eq(v[999], 3);
    nb_release(keep);
    ck_assert_uint_eq(allocated_now(), in_outer);
    nb_scope_end(outer);
    ck_assert_uint_eq(allocated_now(), before);

    /* with no scope open the thread's root scope owns the tensor */
    size_t root = nb_scope_root_size();
    nb_tensor *own = nb_zeros(NB_SHAPE(10), NB_F32);
    NB_CK_NOTNULL(own);
    ck_assert_uint_eq(allocated_now(), before + 512);
    ck_assert_uint_eq(nb_scope_root_size(), root + 1);
    nb_scope_release_root();
    ck_assert_uint_eq(nb_scope_root_size(), 0);
    nb_release(NULL);
    ck_assert_uint_eq(allocated_now(), before);
}
END_TEST

/* Scopes end in reverse order: the wrong order and a second end are user
 * errors that change nothing (they used to abort). */
START_TEST(test_scope_order_errors) {
    size_t before = allocated_now();
    nb_scope *a = nb_scope_begin(), *b = nb_scope_begin();
    nb_tensor *t = nb_zeros(NB_SHAPE(4), NB_F32);
    NB_CK_FAILS(nb_scope_end(a) == NB_OK, NB_ERR_STATE);
    ck_assert(strstr(nb_last_error(), "1 inner scope is still open"));
    ck_assert_double_eq(nb_item(nb_sum(t, NULL, 0, false)), 0); /* b and a are still open: t lives */
    NB_CK_OK(nb_scope_end(b));
    NB_CK_FAILS(nb_scope_end(b) == NB_OK, NB_ERR_STATE);
    NB_CK_OK(nb_scope_end(a));
    NB_CK_OK(nb_scope_end(NULL));
    ck_assert_uint_eq(allocated_now(), before);
}
END_TEST

/* ---- caching allocator ---------------------------------------------------- */

START_TEST(test_alloc_stats) {
    nb_scope *sc = nb_scope_begin();
    nb_memory_empty_cache(NB_CPU);
    nb_memory_reset_peak(NB_CPU);
    nb_memory_stats m0 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m0.peak_allocated, m0.allocated);

    /* a 1 MiB request is the small pool's largest: a 2 MiB segment, split */
    nb_scope *s = nb_scope_begin();
    nb_tensor *big = nb_empty(NB_SHAPE(131072), NB_F64);
    NB_CK_NOTNULL(big);
    nb_memory_stats m1 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m1.allocated, m0.allocated + 1048576);
    ck_assert_uint_eq(m1.reserved, m0.reserved + 2097152);
    ck_assert_uint_eq(m1.segments, m0.segments + 1);
    ck_assert_uint_eq(m1.peak_allocated, m1.allocated);
    ck_assert_uint_eq(m1.device_allocs, m0.device_allocs + 1);
    /* the second half of the segment serves the next one: no device call */
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(131072), NB_F64));
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, m1.device_allocs);
    nb_scope_end(s);

    nb_memory_stats m2 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m2.allocated, m0.allocated);
    ck_assert_uint_eq(m2.reserved, m1.reserved); /* cached, not returned */
    ck_assert_uint_eq(m2.peak_allocated, m1.peak_allocated + 1048576);

    /* a 1.5 MiB request is large: a 20 MiB segment, whose rest (18.5 MiB) is
     * split off and serves a 12 MiB request; 10.5 MiB no longer fits in
     * what is left, and being over 10 MiB gets a segment of its own size
     * rounded to 2 MiB (12 MiB) */
    s = nb_scope_begin();
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(196608), NB_F64)); /* 1.5 MiB */
    nb_memory_stats m3 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m3.reserved, m2.reserved + ((size_t)20 << 20));
    ck_assert_uint_eq(m3.device_allocs, m2.device_allocs + 1);
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(1572864), NB_F64)); /* 12 MiB */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, m3.device_allocs);
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(1376256), NB_F64)); /* 10.5 MiB */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).reserved, m3.reserved + ((size_t)12 << 20));
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, m3.device_allocs + 1);
    nb_scope_end(s);

    nb_memory_reset_peak(NB_CPU);
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).peak_allocated, m0.allocated);
    nb_memory_empty_cache(NB_CPU); /* every segment is whole again: all go back */
    nb_memory_stats m4 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m4.reserved, m0.reserved);
    ck_assert_uint_eq(m4.segments, m0.segments);
    ck_assert_uint_eq(m4.allocated, m0.allocated);
    ck_assert_uint_eq(m4.device_frees, m3.device_frees + 3);

    /* sizes round up to multiples of 512 bytes */
    size_t a0 = allocated_now();
    s = nb_scope_begin();
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(1000), NB_F64)); /* 8000 bytes -> 8192 */
    ck_assert_uint_eq(allocated_now(), a0 + 8192);
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(513), NB_F64)); /* 4104 bytes -> 4608 */
    ck_assert_uint_eq(allocated_now(), a0 + 8192 + 4608);
    nb_scope_end(s);
    ck_assert_uint_eq(allocated_now(), a0);
    nb_memory_stats bad = nb_memory_stats_get((nb_device){NB_DEVICE_CUDA, 99});
    ck_assert_uint_eq(bad.allocated, 0);
    nb_scope_end(sc);
}
END_TEST

/* Blocks are reused only on the stream they were allocated on; one that
 * nb_record_stream marked as used elsewhere waits for that stream (on the
 * CPU its event has always completed, so it comes back at the next
 * allocation). */
START_TEST(test_alloc_streams) {
    nb_scope *sc = nb_scope_begin();
    nb_stream *compute = nb_stream_compute(NB_CPU), *copy = nb_stream_copy(NB_CPU);
    ck_assert_ptr_nonnull(compute);
    ck_assert_ptr_nonnull(copy);
    ck_assert_ptr_ne(compute, copy);
    ck_assert_ptr_eq(nb_current_stream(NB_CPU), compute);
    nb_memory_empty_cache(NB_CPU);
    nb_memory_stats m0 = nb_memory_stats_get(NB_CPU);
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_empty(NB_SHAPE(4096), NB_F32); /* compute stream: a new segment */
    NB_CK_NOTNULL(t);
    nb_scope_end(s);
    NB_CK_OK(nb_set_current_stream(copy));
    ck_assert_ptr_eq(nb_current_stream(NB_CPU), copy);
    s = nb_scope_begin();
    t = nb_empty(NB_SHAPE(4096), NB_F32); /* the cached block is the compute stream's: a new one */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, m0.device_allocs + 2);
    NB_CK_OK(nb_record_stream(t, compute));
    nb_scope_end(s); /* freed, pending on an event of the compute stream */
    nb_memory_stats m1 = nb_memory_stats_get(NB_CPU);
    ck_assert_uint_eq(m1.active, m1.allocated + 16384);
    s = nb_scope_begin();
    ck_assert_ptr_nonnull(nb_empty(NB_SHAPE(4096), NB_F32)); /* the event completed: reused */
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, m0.device_allocs + 2);
    nb_scope_end(s);
    NB_CK_OK(nb_set_current_stream(NULL));
    ck_assert_ptr_eq(nb_current_stream(NB_CPU), compute);
    /* events and synchronisation are there and trivially done on the CPU */
    nb_event *e = nb_event_new(NB_CPU);
    NB_CK_NOTNULL(e);
    NB_CK_OK(nb_event_record(e, copy));
    NB_CK_OK(nb_stream_wait_event(compute, e));
    ck_assert(nb_event_query(e));
    NB_CK_OK(nb_event_synchronize(e));
    nb_event_free(e);
    NB_CK_OK(nb_stream_wait_stream(compute, copy));
    NB_CK_OK(nb_stream_synchronize(copy));
    NB_CK_OK(nb_device_synchronize(NB_CPU));
    NB_CK_FAILS(nb_device_synchronize(NB_CUDA(15)) == NB_OK, NB_ERR_DEVICE);
    NB_CK_FAILS(nb_record_stream(NULL, compute) == NB_OK, NB_ERR_INVALID_ARG);
    nb_scope_end(sc);
}
END_TEST

/* No device allocation per op in a steady training step: after warm-up the
 * cache serves every block (forward, backward, gradients). */
START_TEST(test_alloc_hot_path_reuses) {
    nb_scope *outer = nb_scope_begin();
    nb_generator g = nb_generator_new(1);
    nb_tensor *w = nb_randn(NB_SHAPE(16, 8), NB_F32, &g);
    NB_CK_OK(nb_set_requires_grad(w, true));
    nb_tensor *b = nb_zeros(NB_SHAPE(8), NB_F32);
    NB_CK_OK(nb_set_requires_grad(b, true));
    uint64_t allocs_after_warmup = 0;
    size_t allocated_after_warmup = 0;
    for (int it = 0; it < 30; it++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_randn(NB_SHAPE(4, 16), NB_F32, &g);
        nb_tensor *h = nb_relu(nb_add(nb_matmul(x, w), b));
        nb_tensor *tgt = nb_arange(0, 4, 1, NB_I64);
        nb_tensor *loss = nb_add(nb_cross_entropy(h, tgt), nb_mean(nb_mul(h, h), NULL, 0, false));
        NB_CK_OK(nb_backward(loss));
        nb_tensor_zero_grad(w);
        nb_tensor_zero_grad(b);
        nb_scope_end(s);
        if (it == 2) {
            allocs_after_warmup = nb_memory_stats_get(NB_CPU).device_allocs;
            allocated_after_warmup = allocated_now();
        }
        if (it > 2) ck_assert_uint_eq(allocated_now(), allocated_after_warmup);
    }
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).device_allocs, allocs_after_warmup);
    nb_scope_end(outer);
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__)
/* A thread that allocates and frees a 192 MiB tensor: its arena of the CPU cache keeps the segment. */
static void *cache_big_block(void *arg) {
    (void)arg;
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_empty(NB_SHAPE(48, 1 << 20), NB_F32);
    nb_scope_end(s);
    return t ? arg : (void *)1;
}
#endif

/* The CPU cache is split in arenas, one per group of threads: when memory runs out, the retry frees what every
   arena caches, not only the requesting thread's. In a child with RLIMIT_AS 100 MiB above its size, which holds
   another thread's cached 192 MiB segment: a 128 MiB request succeeds once that segment is given back. Skipped
   under AddressSanitizer (its shadow memory does not live with RLIMIT_AS). */
START_TEST(test_alloc_oom_retry_empties_every_arena) {
#if defined(__SANITIZE_ADDRESS__)
    return;
#else
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pthread_t th;
        void *r = (void *)1;
        if (pthread_create(&th, NULL, cache_big_block, NULL) || pthread_join(th, &r) || r) _exit(3);
        nb_memory_stats m = nb_memory_stats_get(NB_CPU);
        if (m.reserved < ((size_t)192 << 20)) _exit(4); /* the segment is cached */
        int lim = nb_test_limit_address_space((size_t)100 << 20); /* 100 MiB above its size now */
        if (lim) _exit(lim == 1 ? 5 : 6);
        alarm(30);
        nb_tensor *t = nb_empty(NB_SHAPE(32, 1 << 20), NB_F32); /* 128 MiB: only with the other arena's room */
        if (!t) fprintf(stderr, "child: %s\n", nb_last_error());
        _exit(t && nb_memory_stats_get(NB_CPU).num_alloc_retries >= 1 ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "the child did not exit (signal %d)", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    ck_assert_msg(WEXITSTATUS(st) == 0, "child exit %d (1: the request failed, 3-6: setup)", WEXITSTATUS(st));
#endif
}
END_TEST

/* nb_version(): the loaded library's version is the headers' (one build),
 * and the macros agree with the string. */
START_TEST(test_version) {
    ck_assert_str_eq(nb_version(), NB_VERSION_STRING);
    int major, minor, patch;
    ck_assert_int_eq(sscanf(nb_version(), "%d.%d.%d", &major, &minor, &patch), 3);
    ck_assert_int_eq(major, NB_VERSION_MAJOR);
    ck_assert_int_eq(minor, NB_VERSION_MINOR);
    ck_assert_int_eq(patch, NB_VERSION_PATCH);
    ck_assert_int_eq(NB_VERSION, major * 10000 + minor * 100 + patch);
    ck_assert(NB_VERSION >= NB_VERSION_ENCODE(0, 1, 0));
}
END_TEST

Suite *nb_suite_core(void) {
    Suite *s = suite_create("core");
    TCase *c = tcase_create("tensor");
    tcase_add_test(c, test_create_basic);
    tcase_add_test(c, test_version);
    tcase_add_test(c, test_from_data_and_to_host);
    tcase_add_test(c, test_arange);
    tcase_add_test(c, test_scalar_item_metadata);
    tcase_add_test(c, test_empty_tensors);
    tcase_add_test(c, test_copy_casts_all_dtypes);
    tcase_add_test(c, test_copy_float_to_int_truncates);
    tcase_add_test(c, test_copy_broadcast);
    suite_add_tcase(s, c);
    tcase_add_test(c, test_broadcast_binary);
    TCase *e = tcase_create("errors");
    tcase_add_test(e, test_error_paths);
    tcase_add_test(e, test_null_propagates_first_error);
    suite_add_tcase(s, e);
    TCase *m = tcase_create("memory");
    tcase_add_test(m, test_scope_frees_tensors);
    tcase_add_test(m, test_scope_retain_keeps_alive);
    tcase_add_test(m, test_scope_order_errors);
    tcase_add_test(m, test_alloc_stats);
    tcase_add_test(m, test_alloc_streams);
    tcase_add_test(m, test_alloc_hot_path_reuses);
    tcase_add_test(m, test_alloc_oom_retry_empties_every_arena);
    tcase_set_timeout(m, 300);
    suite_add_tcase(s, m);
    return s;
}
