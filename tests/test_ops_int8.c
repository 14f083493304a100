/* test_ops_int8.c - the int8 and int16 dtypes: every integer op they take
 * against the same op in int64 cast back (two's complement wrapping makes
 * the narrow result the wide one modulo 2^8 or 2^16: add, sub, mul, pow,
 * the shifts, the divisions of the minimum by -1), on every device; type
 * promotion (torch.promote_types); casts from floats and from each other;
 * reductions (sum and prod in int64, as PyTorch), scans, sort, gather,
 * scatter and index_add; safetensors, .npy and csv. The op harness
 * (test_op_harness.c) runs every integer row on them too; PyTorch's values:
 * tests/torch_diff. */
#include <stdlib.h>
#include <unistd.h>

#include "nb_test.h"
#include "suites.h"

static const nb_dtype narrow[2] = {NB_I8, NB_I16};

/* n values of dtype dt's range with both ends, in a fixed order */
static double *range_values(nb_dtype dt, int64_t n) {
    double lo = dt == NB_I8 ? -128 : -32768, hi = dt == NB_I8 ? 127 : 32767;
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = i == 0 ? lo : i == 1 ? hi : i == 2 ? -1 : i == 3 ? 0 : lo + (double)((r >> 33) % (uint64_t)(hi - lo + 1));
    }
    return v;
}

/* Asserts got (dt) equals want (int64 or bool) cast to dt, element by element. */
static void ck_same_as_wide(nb_tensor *got, nb_tensor *want, nb_dtype dt, const char *what) {
    ck_assert_msg(got && want, "%s: %s", what, nb_last_error());
    nb_dtype gdt = nb_dtype_of(got);
    ck_assert_msg(gdt == (nb_dtype_of(want) == NB_BOOL ? NB_BOOL : dt), "%s: dtype %s", what, nb_dtype_name(gdt));
    double *g = nb_test_values_of(got), *w = nb_test_values_of(nb_to_dtype(want, gdt));
    int64_t n = nb_numel(got);
    for (int64_t i = 0; i < n; i++) ck_assert_msg(g[i] == w[i], "%s [%lld]: %g, want %g", what, (long long)i, g[i], w[i]);
    free(g), free(w);
}

typedef nb_tensor *(*bin_fn)(nb_tensor *, nb_tensor *);

START_TEST(test_binary_wraps_as_int64) {
    static const struct {
        const char *name;
        bin_fn f;
        bool divides; /* the divisor must be nonzero */
        bool small_b; /* b in [-3, 9]: powers and shifts */
    } ops[] = {
        {"add", nb_add, 0, 0},           {"sub", nb_sub, 0, 0},
        {"mul", nb_mul, 0, 0},           {"pow", nb_pow, 0, 1},
        {"maximum", nb_maximum, 0, 0},   {"minimum", nb_minimum, 0, 0},
        {"bitwise_and", nb_bitwise_and, 0, 0}, {"bitwise_or", nb_bitwise_or, 0, 0},
        {"bitwise_xor", nb_bitwise_xor, 0, 0}, {"left_shift", nb_bitwise_left_shift, 0, 1},
        {"right_shift", nb_bitwise_right_shift, 0, 1}, {"floor_divide", nb_floor_divide, 1, 0},
        {"remainder", nb_remainder, 1, 0}, {"fmod", nb_fmod, 1, 0},
        {"eq", nb_eq, 0, 0},             {"lt", nb_lt, 0, 0},
        {"ge", nb_ge, 0, 0},
    };
    const int64_t n = 257;
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 2; k++) {
            nb_dtype dt = narrow[k];
            double *a = range_values(dt, n), *b = range_values(dt, n + 7) + 7;
            double small[257];
            for (int64_t i = 0; i < n; i++) small[i] = (double)((int64_t)(b[i] + 32768) % 13 - 3);
            small[0] = 8, small[1] = 7, small[2] = dt == NB_I8 ? 9 : 17; /* at and past the width */
            b[5] = -1;                                                     /* with a[0], the minimum: min / -1 wraps */
            for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
                nb_scope *s = nb_scope_begin();
                const double *bv = ops[o].small_b ? small : b;
                double bz[257];
                for (int64_t i = 0; i < n; i++) bz[i] = ops[o].divides && bv[i] == 0 ? 3 : bv[i];
                bz[0] = ops[o].divides ? -1 : bz[0];
                nb_tensor *x = nb_to_device(nb_test_tensor(1, &n, dt, a), devs[d]);
                nb_tensor *y = nb_to_device(nb_test_tensor(1, &n, dt, bz), devs[d]);
                nb_tensor *got = ops[o].f(x, y);
                nb_tensor *want = ops[o].f(nb_to_dtype(x, NB_I64), nb_to_dtype(y, NB_I64));
                char what[64];
                snprintf(what, sizeof what, "%s %s on device %d", ops[o].name, nb_dtype_name(dt), d);
                ck_same_as_wide(got, want, dt, what);
                nb_scope_end(s);
            }
            free(a), free(b - 7);
        }
}
END_TEST

START_TEST(test_unary_and_scalars_wrap) {
    const int64_t n = 200;
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 2; k++) {
            nb_dtype dt = narrow[k];
            double *a = range_values(dt, n);
            nb_scope *s = nb_scope_begin();
            nb_tensor *x = nb_to_device(nb_test_tensor(1, &n, dt, a), devs[d]), *w = nb_to_dtype(x, NB_I64);
            ck_same_as_wide(nb_neg(x), nb_neg(w), dt, "neg");
            ck_same_as_wide(nb_abs(x), nb_abs(w), dt, "abs"); /* abs(min) wraps to min, as PyTorch */
            ck_same_as_wide(nb_sign(x), nb_sign(w), dt, "sign");
            ck_same_as_wide(nb_bitwise_not(x), nb_bitwise_not(w), dt, "bitwise_not");
            ck_same_as_wide(nb_add_scalar(x, 100), nb_add_scalar(w, 100), dt, "add_scalar");
            ck_same_as_wide(nb_mul_scalar(x, -3), nb_mul_scalar(w, -3), dt, "mul_scalar");
            /* a scalar the dtype holds keeps it; one it does not (or a float) gives float32 */
            ck_assert_int_eq(nb_dtype_of(nb_add_scalar(x, dt == NB_I8 ? 127 : 32767)), dt);
            ck_assert_int_eq(nb_dtype_of(nb_add_scalar(x, dt == NB_I8 ? 128 : 32768)), NB_F32);
            ck_assert_int_eq(nb_dtype_of(nb_mul_scalar(x, 0.5)), NB_F32);
            nb_scope_end(s);
            free(a);
        }
}
END_TEST

/* torch.promote_types: uint8 with int8 is int16; the narrow ints join the
 * wider ints and lose to any float. */
START_TEST(test_promotion) {
    nb_scope *s = nb_scope_begin();
    static const struct {
        nb_dtype a, b, want;
    } t[] = {
        {NB_U8, NB_I8, NB_I16},  {NB_I8, NB_I16, NB_I16},  {NB_U8, NB_I16, NB_I16}, {NB_I8, NB_I32, NB_I32},
        {NB_I16, NB_I64, NB_I64}, {NB_I8, NB_BOOL, NB_I8},  {NB_I16, NB_F16, NB_F16}, {NB_I8, NB_BF16, NB_BF16},
        {NB_I16, NB_F32, NB_F32}, {NB_I8, NB_I8, NB_I8},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        nb_tensor *a = nb_zeros(1, (int64_t[]){2}, t[i].a), *b = nb_zeros(1, (int64_t[]){2}, t[i].b);
        nb_tensor *c = nb_add(a, b), *c2 = nb_add(b, a);
        ck_assert_msg(c && nb_dtype_of(c) == t[i].want && nb_dtype_of(c2) == t[i].want, "%s + %s: %s",
                      nb_dtype_name(t[i].a), nb_dtype_name(t[i].b), c ? nb_dtype_name(nb_dtype_of(c)) : "NULL");
    }
    /* uint8 200 + int8 -100 computes in int16: 100, no wrap */
    nb_tensor *u = nb_test_tensor(1, (int64_t[]){1}, NB_U8, (double[]){200});
    nb_tensor *i8 = nb_test_tensor(1, (int64_t[]){1}, NB_I8, (double[]){-100});
    nb_ck_close(nb_add(u, i8), (double[]){100}, 1, 0, 0);
    ck_assert_str_eq(nb_dtype_name(NB_I8), "int8");
    ck_assert_str_eq(nb_dtype_name(NB_I16), "int16");
    ck_assert_int_eq((int)nb_dtype_size(NB_I8), 1);
    ck_assert_int_eq((int)nb_dtype_size(NB_I16), 2);
    ck_assert(!nb_dtype_is_float(NB_I8) && !nb_dtype_is_float(NB_I16));
    nb_scope_end(s);
}
END_TEST

/* float to int8 truncates toward zero and wraps through int64 (PyTorch's
 * CPU cast of in-range values; 300 wraps to 44); int8 and int16 convert
 * into each other and into every dtype exactly; same bits on every device. */
START_TEST(test_casts) {
    static const double f[8] = {-1.75, -0.5, 0.5, 1.99, 127.9, -128.9, 300, -300};
    static const double want8[8] = {-1, 0, 0, 1, 127, -128, 44, -44};
    static const double want16[8] = {-1, 0, 0, 1, 127, -128, 300, -300};
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_to_device(nb_test_tensor(1, (int64_t[]){8}, NB_F32, f), devs[d]);
        nb_ck_close(nb_to_dtype(x, NB_I8), want8, 8, 0, 0);
        nb_ck_close(nb_to_dtype(x, NB_I16), want16, 8, 0, 0);
        nb_ck_close(nb_to_dtype(nb_to_dtype(x, NB_F64), NB_I8), want8, 8, 0, 0);
        nb_tensor *w = nb_to_dtype(x, NB_I16); /* int16 300 to int8 wraps to 44 */
        nb_ck_close(nb_to_dtype(w, NB_I8), want8, 8, 0, 0);
        for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) { /* -128 .. 127 survive every dtype but uint8 and bool */
            if (dt == NB_U8 || dt == NB_BOOL) continue;
            nb_tensor *r = nb_to_dtype(nb_to_dtype(nb_to_dtype(x, NB_I8), (nb_dtype)dt), NB_I8);
            nb_ck_close(r, want8, 8, 0, 0);
        }
        nb_tensor *full = nb_full(1, (int64_t[]){3}, -7, NB_I8);
        nb_ck_close(nb_to_device(full, devs[d]), (double[]){-7, -7, -7}, 3, 0, 0);
        nb_ck_close(nb_arange_on(-3, 3, 2, NB_I16, devs[d]), (double[]){-3, -1, 1}, 3, 0, 0);
        nb_scope_end(s);
    }
}
END_TEST

/* sum and prod are int64 (no wrap at the narrow width), max/min/argmax
 * keep the dtype, cumsum is int64 and cummax int8/int16, sort puts the
 * negatives first; gather, scatter_reduce and index_add wrap in the dtype. */
START_TEST(test_reductions_sort_index) {
    nb_device devs[9] = {NB_CPU};
    int nd = 1 + nb_test_accelerators(devs + 1, 8);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < 2; k++) {
            nb_dtype dt = narrow[k];
            nb_scope *s = nb_scope_begin();
            const double v[6] = {100, 100, -128, 5, -1, 127};
            nb_tensor *x = nb_to_device(nb_test_tensor(2, (int64_t[]){2, 3}, dt, v), devs[d]);
            nb_tensor *sum = nb_sum(x, NULL, 0, false);
            ck_assert_int_eq(nb_dtype_of(sum), NB_I64);
            nb_ck_close(sum, (double[]){203}, 1, 0, 0);
            nb_tensor *pr = nb_prod(x, (int[]){1}, 1, false);
            ck_assert_int_eq(nb_dtype_of(pr), NB_I64);
            nb_ck_close(pr, (double[]){-1280000, -635}, 2, 0, 0);
            nb_tensor *mx = nb_amax(x, (int[]){1}, 1, false);
            ck_assert_int_eq(nb_dtype_of(mx), dt);
            nb_ck_close(mx, (double[]){100, 127}, 2, 0, 0);
            nb_ck_close(nb_argmax(x, 1, false), (double[]){0, 2}, 2, 0, 0);
            nb_tensor *cs = nb_cumsum(x, 1);
            ck_assert_int_eq(nb_dtype_of(cs), NB_I64);
            nb_ck_close(cs, (double[]){100, 200, 72, 5, 4, 131}, 6, 0, 0);
            nb_tensor *ci = NULL, *cm = nb_cummax(x, 1, &ci);
            ck_assert_int_eq(nb_dtype_of(cm), dt);
            nb_ck_close(cm, (double[]){100, 100, 100, 5, 5, 127}, 6, 0, 0);
            nb_tensor *sv = NULL, *si = NULL;
            ck_assert_int_eq(nb_sort(nb_reshape(x, 1, (int64_t[]){6}), 0, false, true, &sv, &si), NB_OK);
            nb_ck_close(sv, (double[]){-128, -1, 5, 100, 100, 127}, 6, 0, 0);
            nb_ck_close(si, (double[]){2, 4, 3, 0, 1, 5}, 6, 0, 0);
            nb_tensor *idx = nb_to_device(nb_test_tensor(2, (int64_t[]){2, 2}, NB_I64, (double[]){2, 0, 1, 1}), devs[d]);
            nb_ck_close(nb_gather(x, 1, idx), (double[]){-128, 100, -1, -1}, 4, 0, 0);
            /* index_add of rows [100, 100, -128] + [5, -1, 127] into row 0 twice: wraps in int8 */
            nb_tensor *rows = nb_to_device(nb_test_tensor(1, (int64_t[]){2}, NB_I64, (double[]){0, 0}), devs[d]);
            nb_tensor *ia = nb_index_add(x, 0, rows, x, 1);
            nb_tensor *ia64 = nb_index_add(nb_to_dtype(x, NB_I64), 0, rows, nb_to_dtype(x, NB_I64), 1);
            ck_same_as_wide(ia, ia64, dt, "index_add");
            nb_tensor *sr = nb_scatter_reduce(x, 1, idx, nb_narrow(x, 1, 0, 2), "sum", true);
            nb_tensor *sr64 = nb_scatter_reduce(nb_to_dtype(x, NB_I64), 1, idx, nb_to_dtype(nb_narrow(x, 1, 0, 2), NB_I64),
                                                "sum", true);
            ck_same_as_wide(sr, sr64, dt, "scatter_reduce sum");
            nb_ck_close(nb_nonzero(nb_to_device(nb_test_tensor(1, (int64_t[]){4}, dt, (double[]){0, -3, 0, 1}), devs[d])),
                        (double[]){1, 3}, 2, 0, 0);
            nb_scope_end(s);
        }
}
END_TEST

/* safetensors I8/I16 and .npy <i1/<i2 keep the dtype and the values. */
START_TEST(test_file_round_trips) {
    nb_scope *s = nb_scope_begin();
    char dir[] = "/tmp/nb_int8_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char st[64], npy[64];
    snprintf(st, sizeof st, "%s/t.safetensors", dir);
    snprintf(npy, sizeof npy, "%s/t.npy", dir);
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = narrow[k];
        double *v = range_values(dt, 50);
        nb_tensor *t = nb_test_tensor(2, (int64_t[]){5, 10}, dt, v);
        nb_named_tensor nt[1] = {{"q", t}};
        ck_assert_int_eq(nb_safetensors_save(st, nt, 1, NULL, 0), NB_OK);
        nb_safetensors *f = nb_safetensors_load(st);
        ck_assert_ptr_nonnull(f);
        nb_tensor *r = nb_safetensors_get(f, "q");
        ck_assert_int_eq(nb_dtype_of(r), dt);
        nb_ck_close(r, v, 50, 0, 0);
        nb_safetensors_free(f);
        ck_assert_int_eq(nb_npy_save(npy, t), NB_OK);
        nb_tensor *r2 = nb_npy_load(npy);
        ck_assert_ptr_nonnull(r2);
        ck_assert_int_eq(nb_dtype_of(r2), dt);
        nb_ck_close(r2, v, 50, 0, 0);
        free(v);
    }
    /* csv: integers of the dtype's range exactly; 1.5 and 128 are format errors for int8 */
    char csv[64];
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    nb_test_write_file(csv, "-128,127\n5,-3\n", 14);
    nb_tensor *c = nb_csv_load(csv, (nb_csv_options){.dtype = NB_I8});
    ck_assert_int_eq(nb_dtype_of(c), NB_I8);
    nb_ck_close(c, (double[]){-128, 127, 5, -3}, 4, 0, 0);
    nb_test_write_file(csv, "1.5,128\n", 8);
    NB_CK_FAILS(nb_csv_load(csv, (nb_csv_options){.dtype = NB_I8}), NB_ERR_FORMAT);
    nb_test_write_file(csv, "40000\n", 6);
    NB_CK_FAILS(nb_csv_load(csv, (nb_csv_options){.dtype = NB_I16}), NB_ERR_FORMAT);
    unlink(csv);
    unlink(st), unlink(npy), rmdir(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_ops_int8(void) {
    Suite *s = suite_create("ops_int8");
    TCase *tc = tcase_create("int8");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_binary_wraps_as_int64);
    tcase_add_test(tc, test_unary_and_scalars_wrap);
    tcase_add_test(tc, test_promotion);
    tcase_add_test(tc, test_casts);
    tcase_add_test(tc, test_reductions_sort_index);
    tcase_add_test(tc, test_file_round_trips);
    suite_add_tcase(s, tc);
    return s;
}
