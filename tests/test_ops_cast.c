/* test_ops_cast.c - casts and the float16/bfloat16 storage dtypes: exact
 * bit patterns of the casts (round to nearest even, overflow, NaN,
 * subnormals, float64 rounded once), exhaustive round trips, integer and
 * bool casts, fill, data movement, safetensors F16/BF16, to_dtype's
 * backward, and the rejection of compute ops; plus the "core_fixes" case
 * (nb_size range errors, module registration of a scope-owned tensor).
 * Expected bit patterns are from IEEE 754 binary16 and bfloat16 (the top
 * half of binary32), worked out by hand. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nb_safetensors.h"
#include "nb_test.h"

/* ---- helpers ---------------------------------------------------------------- */

static nb_tensor *from_bits(const uint16_t *bits, int64_t n, nb_dtype dt) {
    return nb_from_data(bits, 1, &n, dt);
}

/* Asserts t (a 16-bit dtype) holds exactly the bit patterns want[0..n). */
static void ck_bits(const nb_tensor *t, const uint16_t *want, int64_t n) {
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_numel(t), n);
    uint16_t got[64];
    ck_assert(n <= 64);
    NB_CK_OK(nb_to_host(t, got, sizeof got));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "element %lld: got 0x%04x, want 0x%04x", (long long)i, got[i], want[i]);
}

static void ck_f32_to(nb_dtype dt, const float *v, const uint16_t *want, int64_t n) {
    ck_bits(nb_to_dtype(nb_from_data(v, 1, &n, NB_F32), dt), want, n);
}

static void ck_f64_to(nb_dtype dt, const double *v, const uint16_t *want, int64_t n) {
    ck_bits(nb_to_dtype(nb_from_data(v, 1, &n, NB_F64), dt), want, n);
}

/* Reference decoding of a binary16 pattern, written from the definition. */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double mag = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -mag : mag;
}

static bool is_nan16(uint16_t h, nb_dtype dt) {
    return dt == NB_F16 ? (h & 0x7C00) == 0x7C00 && (h & 0x3FF) : (h & 0x7F80) == 0x7F80 && (h & 0x7F);
}

/* ---- float16 --------------------------------------------------------------- */

START_TEST(f16_from_f32_bits) {
    nb_scope *s = nb_scope_begin();
    float v[] = {1.0f, -2.0f, 0.0f, -0.0f, 0.1f, 65504.0f, 65519.0f, 65520.0f, 1e10f, -INFINITY,
                 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x3p-25f, 0x1p-14f, 0x7FFp-25f,
                 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 0x1p-26f, 0.33333334f};
    uint16_t want[] = {0x3C00, 0xC000, 0x0000, 0x8000, 0x2E66, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0xFC00,
                       0x0001, 0x0000, 0x0001, 0x0002, 0x0400, 0x0400,
                       0x3C00, 0x3C02, 0x0000, 0x3555};
    /* 65520 is the tie between 65504 and 2^16: even -> inf. 2^-25 ties 0 and
     * 2^-24 -> 0; 3 * 2^-25 ties 1 and 2 units -> 2; (2^11 - 1) 2^-25 is the
     * tie between the largest subnormal and 2^-14 -> 2^-14 (even). */
    ck_f32_to(NB_F16, v, want, 20);
    float nan[] = {NAN, -NAN};
    nb_tensor *h = nb_to_dtype(nb_from_data(nan, NB_SHAPE(2), NB_F32), NB_F16);
    uint16_t got[2];
    NB_CK_OK(nb_to_host(h, got, sizeof got));
    for (int i = 0; i < 2; i++) ck_assert_msg(is_nan16(got[i], NB_F16) && (got[i] & 0x0200), "0x%04x", got[i]);
    ck_assert_int_eq(got[1] & 0x8000, 0x8000);
    nb_scope_end(s);
}
END_TEST

START_TEST(f16_from_f64_rounds_once) {
    nb_scope *s = nb_scope_begin();
    /* 1 + 2^-11 + 2^-40 is just above the tie between 1 and 1 + 2^-10: it
     * rounds up. Through float32 it would first become the tie itself and
     * then round to even (0x3C00): double rounding, which cast.c avoids. */
    double v[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11 - 0x1p-40, 1.0 + 0x1p-11, 65519.999999, 65520.0,
                  0x1p-25 + 0x1p-60, 0x1p-25, 1e300, -1e-300, 0x1p-24 * 1.4999999999};
    uint16_t want[] = {0x3C01, 0x3C00, 0x3C00, 0x7BFF, 0x7C00, 0x0001, 0x0000, 0x7C00, 0x8000, 0x0001};
    ck_f64_to(NB_F16, v, want, 10);
    nb_scope_end(s);
}
END_TEST

START_TEST(f16_all_patterns_round_trip) {
    nb_scope *s = nb_scope_begin();
    static uint16_t all[65536], back[65536];
    static float wide[65536];
    static double wide64[65536];
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    nb_tensor *h = nb_from_data(all, NB_SHAPE(65536), NB_F16);
    nb_tensor *f = nb_to_dtype(h, NB_F32), *d = nb_to_dtype(h, NB_F64);
    NB_CK_OK(nb_to_host(f, wide, sizeof wide));
    NB_CK_OK(nb_to_host(d, wide64, sizeof wide64));
    for (int i = 0; i < 65536; i++) {
        double ref = f16_value((uint16_t)i);
        if (isnan(ref)) ck_assert_msg(isnan(wide[i]) && isnan(wide64[i]), "0x%04x", i);
        else ck_assert_msg((double)wide[i] == ref && wide64[i] == ref && !signbit(wide[i]) == !signbit(ref),
                           "0x%04x: %.17g, %.17g, want %.17g", i, (double)wide[i], wide64[i], ref);
    }
    nb_tensor *outs[2] = {nb_to_dtype(f, NB_F16), nb_to_dtype(d, NB_F16)};
    for (int k = 0; k < 2; k++) {
        NB_CK_OK(nb_to_host(outs[k], back, sizeof back));
        for (int i = 0; i < 65536; i++) {
            if (is_nan16((uint16_t)i, NB_F16)) /* NaN stays NaN, made quiet, sign and payload kept */
                ck_assert_msg(back[i] == (i | 0x0200), "0x%04x -> 0x%04x", i, back[i]);
            else ck_assert_msg(back[i] == i, "0x%04x -> 0x%04x", i, back[i]);
        }
    }
    nb_scope_end(s);
}
END_TEST

/* ---- bfloat16 -------------------------------------------------------------- */

START_TEST(bf16_bits) {
    nb_scope *s = nb_scope_begin();
    /* 1.00390625 = 1 + 2^-8 ties 0x3F80 and 0x3F81 -> even 0x3F80; 1 + 3 * 2^-8
     * ties 0x3F81 and 0x3F82 -> 0x3F82; FLT_MAX rounds past the largest
     * bfloat16 (0x7F7F) to inf; 2^-133 is bfloat16's smallest subnormal. */
    float v[] = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 3.4028235e38f, 0x1.FEp127f, INFINITY, -0.0f, 0.1f};
    uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80, 0x7F7F, 0x7F80, 0x8000, 0x3DCD};
    ck_f32_to(NB_BF16, v, want, 9);
    double d[] = {1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8, 1e39, 0x1.FEFFFFFFFFFp127};
    uint16_t dwant[] = {0x3F81, 0x3F80, 0x7F80, 0x7F7F};
    ck_f64_to(NB_BF16, d, dwant, 4);
    float nan = NAN;
    nb_tensor *b = nb_to_dtype(nb_from_data(&nan, NB_SHAPE(1), NB_F32), NB_BF16);
    uint16_t got;
    NB_CK_OK(nb_to_host(b, &got, sizeof got));
    ck_assert_msg(is_nan16(got, NB_BF16) && (got & 0x40), "0x%04x", got);
    nb_scope_end(s);
}
END_TEST

START_TEST(bf16_all_patterns_round_trip) {
    nb_scope *s = nb_scope_begin();
    static uint16_t all[65536], back[65536];
    static float wide[65536];
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    nb_tensor *f = nb_to_dtype(nb_from_data(all, NB_SHAPE(65536), NB_BF16), NB_F32);
    NB_CK_OK(nb_to_host(f, wide, sizeof wide));
    for (int i = 0; i < 65536; i++) {
        uint32_t u;
        memcpy(&u, &wide[i], sizeof u);
        ck_assert_msg(u == (uint32_t)i << 16, "0x%04x -> 0x%08x", i, u); /* widening is a shift */
    }
    NB_CK_OK(nb_to_host(nb_to_dtype(f, NB_BF16), back, sizeof back));
    for (int i = 0; i < 65536; i++)
        ck_assert_msg(back[i] == (is_nan16((uint16_t)i, NB_BF16) ? i | 0x40 : i), "0x%04x -> 0x%04x", i, back[i]);
    nb_scope_end(s);
}
END_TEST

/* ---- integers, bool, fill, same-dtype copies ------------------------------------ */

START_TEST(int_bool_casts) {
    nb_scope *s = nb_scope_begin();
    int32_t iv[] = {-3, 0, 7, 65504, 65519, 65520, 100000, 2049, 2051};
    int64_t n = 9;
    nb_tensor *i32 = nb_from_data(iv, 1, &n, NB_I32);
    ck_bits(nb_to_dtype(i32, NB_F16), (uint16_t[]){0xC200, 0, 0x4700, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0x6800, 0x6802}, 9);
    /* bfloat16 keeps 8 significant bits: 257 ties 256 and 258 -> 256 */
    int64_t lv[] = {257, 259, -1, 1LL << 40};
    ck_bits(nb_to_dtype(nb_from_data(lv, NB_SHAPE(4), NB_I64), NB_BF16), (uint16_t[]){0x4380, 0x4382, 0xBF80, 0x5380}, 4);
    /* float -> int truncates toward zero */
    uint16_t h[] = {0xC180 /* -2.75 */, 0x4180 /* 2.75 */, 0x3800 /* 0.5 */, 0xB800 /* -0.5 */, 0x5640 /* 100 */};
    nb_tensor *ti = nb_to_dtype(from_bits(h, 5, NB_F16), NB_I32);
    ck_assert_int_eq(nb_dtype_of(ti), NB_I32);
    int32_t got[5];
    NB_CK_OK(nb_to_host(ti, got, sizeof got));
    int32_t want[] = {-2, 2, 0, 0, 100};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(got[i], want[i]);
    int64_t gl[5];
    NB_CK_OK(nb_to_host(nb_to_dtype(nb_to_dtype(from_bits(h, 5, NB_F16), NB_BF16), NB_I64), gl, sizeof gl));
    for (int i = 0; i < 5; i++) ck_assert_int_eq(gl[i], want[i]);
    uint8_t u8[1];
    NB_CK_OK(nb_to_host(nb_to_dtype(from_bits((uint16_t[]){0x437F}, 1, NB_BF16), NB_U8), u8, 1));
    ck_assert_int_eq(u8[0], 255);
    /* bool: != 0, NaN -> true; and back to 0 / 1 */
    uint16_t hb[] = {0x0000, 0x8000, 0x3800, 0x7E00, 0x0001};
    bool gb[5];
    NB_CK_OK(nb_to_host(nb_to_dtype(from_bits(hb, 5, NB_F16), NB_BOOL), gb, sizeof gb));
    ck_assert(!gb[0] && !gb[1] && gb[2] && gb[3] && gb[4]);
    bool bv[] = {true, false};
    ck_bits(nb_to_dtype(nb_from_data(bv, NB_SHAPE(2), NB_BOOL), NB_F16), (uint16_t[]){0x3C00, 0}, 2);
    ck_bits(nb_to_dtype(nb_from_data(bv, NB_SHAPE(2), NB_BOOL), NB_BF16), (uint16_t[]){0x3F80, 0}, 2);
    /* f16 -> bf16 directly: 0x2E66 (0.0999755859375 = float bits 0x3DCCC000)
     * rounds up to 0x3DCD; 65504 rounds up to 65536 (0x4780) */
    ck_bits(nb_to_dtype(from_bits((uint16_t[]){0x2E66, 0x7BFF}, 2, NB_F16), NB_BF16), (uint16_t[]){0x3DCD, 0x4780}, 2);
    nb_scope_end(s);
}
END_TEST

START_TEST(fill_and_item) {
    nb_scope *s = nb_scope_begin();
    ck_bits(nb_full(NB_SHAPE(3), 0.1, NB_F16), (uint16_t[]){0x2E66, 0x2E66, 0x2E66}, 3);
    ck_bits(nb_full(NB_SHAPE(2), 1e6, NB_F16), (uint16_t[]){0x7C00, 0x7C00}, 2);
    ck_bits(nb_full(NB_SHAPE(1), 1.0 + 0x1p-11 + 0x1p-40, NB_F16), (uint16_t[]){0x3C01}, 1);
    ck_bits(nb_full(NB_SHAPE(2), 1.00390625, NB_BF16), (uint16_t[]){0x3F80, 0x3F80}, 2);
    ck_bits(nb_ones(NB_SHAPE(1), NB_BF16), (uint16_t[]){0x3F80}, 1);
    ck_bits(nb_zeros(NB_SHAPE(1), NB_F16), (uint16_t[]){0}, 1);
    ck_assert(nb_item(nb_scalar(0.1, NB_F16)) == 0.0999755859375);
    ck_assert(nb_item(nb_scalar(-3.0, NB_BF16)) == -3.0);
    ck_assert_int_eq(nb_dtype_size(NB_F16), 2);
    ck_assert_int_eq(nb_dtype_size(NB_BF16), 2);
    ck_assert_str_eq(nb_dtype_name(NB_F16), "float16");
    ck_assert_str_eq(nb_dtype_name(NB_BF16), "bfloat16");
    ck_assert(nb_dtype_is_float(NB_F16) && nb_dtype_is_float(NB_BF16));
    char buf[64];
    ck_assert_str_eq(nb_shape_str(nb_zeros(NB_SHAPE(2), NB_BF16), buf, sizeof buf), "[2] bfloat16");
    /* a same-dtype copy moves bits: a signalling NaN stays signalling */
    uint16_t sn[] = {0x7C01, 0x3C00, 0xFD55, 0x0001};
    nb_tensor *a = nb_reshape(from_bits(sn, 4, NB_F16), NB_SHAPE(2, 2));
    nb_tensor *tc = nb_contiguous(nb_transpose(nb_contiguous(nb_transpose(a, 0, 1)), 0, 1));
    ck_bits(tc, sn, 4);
    nb_tensor *dst = nb_empty(NB_SHAPE(4), NB_F16);
    NB_CK_OK(nb_copy_(dst, from_bits(sn, 4, NB_F16)));
    ck_bits(dst, sn, 4);
    nb_scope_end(s);
}
END_TEST

/* ---- data movement and autograd through casts ---------------------------------- */

START_TEST(data_movement) {
    nb_scope *s = nb_scope_begin();
    const nb_dtype dts[2] = {NB_F16, NB_BF16};
    for (int k = 0; k < 2; k++) {
        double v[6] = {1, 2, 3, 4, 5, 6};
        nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 3), dts[k], v);
        ck_assert_int_eq(nb_dtype_of(a), dts[k]);
        nb_ck_close(nb_contiguous(nb_transpose(a, 0, 1)), (double[]){1, 4, 2, 5, 3, 6}, 6, 0, 0);
        nb_tensor *c = nb_cat((nb_tensor *[]){a, a}, 2, 1);
        NB_CK_NOTNULL(c);
        ck_assert_int_eq(nb_dtype_of(c), dts[k]);
        nb_ck_close(c, (double[]){1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, 12, 0, 0);
        nb_tensor *idx = nb_from_data((int64_t[]){2, 0}, NB_SHAPE(2), NB_I64);
        nb_ck_close(nb_index_select(a, 1, idx), (double[]){3, 1, 6, 4}, 4, 0, 0);
        nb_ck_close(nb_reshape(a, NB_SHAPE(3, 2)), v, 6, 0, 0);
        nb_tensor *parts[2];
        ck_assert_int_eq(nb_chunk(a, 2, 1, parts, 2), 2); /* columns {0, 1} and {2} */
        nb_ck_close(nb_contiguous(parts[1]), (double[]){3, 6}, 2, 0, 0);
    }
    nb_scope_end(s);
}
END_TEST

/* where takes every dtype (PyTorch's torch.where on half); it selects
 * elements without arithmetic, so the 16-bit dtypes are data movement. */
START_TEST(where_16bit) {
    nb_scope *s = nb_scope_begin();
    const nb_dtype dts[2] = {NB_F16, NB_BF16};
    for (int k = 0; k < 2; k++) {
        nb_tensor *a = nb_test_tensor(NB_SHAPE(2, 3), dts[k], (double[]){1, 2, 3, 4, 5, 6});
        nb_tensor *cond = nb_from_data((bool[]){true, false, true}, NB_SHAPE(3), NB_BOOL);
        nb_tensor *w = nb_where(cond, a, nb_zeros(NB_SHAPE(2, 3), dts[k]));
        NB_CK_NOTNULL(w);
        ck_assert_int_eq(nb_dtype_of(w), dts[k]);
        nb_ck_close(w, (double[]){1, 0, 3, 4, 0, 6}, 6, 0, 0);
    }
    nb_scope_end(s);
}
END_TEST

START_TEST(to_dtype_backward) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_test_tensor(NB_SHAPE(3), NB_F32, (double[]){0.1, -2, 3});
    NB_CK_OK(nb_set_requires_grad(x, true));
    nb_tensor *h = nb_to_dtype(x, NB_F16);
    NB_CK_NOTNULL(h);
    ck_assert(nb_requires_grad(h));
    nb_tensor *y = nb_sum(nb_mul(nb_to_dtype(h, NB_F32), nb_test_tensor(NB_SHAPE(3), NB_F32, (double[]){1, 2, 3})),
                          NULL, 0, false);
    NB_CK_OK(nb_backward(y));
    nb_ck_close(nb_tensor_grad(x), (double[]){1, 2, 3}, 3, 0, 0); /* exact in float16 */
    ck_assert_int_eq(nb_dtype_of(nb_tensor_grad(x)), NB_F32);
    nb_scope_end(s);
}
END_TEST

/* Ops without a 16-bit form (NB_OPF_LP rows have one) reject the 16-bit
 * dtypes with a message naming them. */
START_TEST(compute_ops_reject) {
    nb_scope *s = nb_scope_begin();
    const nb_dtype dts[2] = {NB_F16, NB_BF16};
    for (int k = 0; k < 2; k++) {
        nb_tensor *a = nb_ones(NB_SHAPE(2, 2), dts[k]);
        NB_CK_FAILS(nb_log(a), NB_ERR_DTYPE);
        ck_assert_msg(strstr(nb_last_error(), nb_dtype_name(dts[k])), "%s", nb_last_error());
        NB_CK_FAILS(nb_sqrt(a), NB_ERR_DTYPE);
        NB_CK_FAILS(nb_softmax(a, -1), NB_ERR_DTYPE);
        ck_assert_int_eq(nb_dtype_of(nb_relu(a)), dts[k]); /* an LP op computes */
    }
    nb_scope_end(s);
}
END_TEST

/* ---- safetensors ------------------------------------------------------------------ */

START_TEST(safetensors_f16_bf16) {
    nb_scope *s = nb_scope_begin();
    uint16_t hb[] = {0x3C00, 0x7C00, 0x7E01, 0x0001, 0x8000, 0x7BFF};
    uint16_t bb[] = {0x3F80, 0x7F80, 0x7FC1, 0x0001, 0xC020, 0x7F7F};
    nb_tensor *h = nb_reshape(from_bits(hb, 6, NB_F16), NB_SHAPE(2, 3));
    nb_tensor *b = from_bits(bb, 6, NB_BF16);
    nb_tensor *ht = nb_transpose(h, 0, 1); /* non-contiguous: saved in C order */
    char path[64];
    snprintf(path, sizeof path, "/tmp/nb_dtypes_%ld.safetensors", (long)getpid());
    nb_named_tensor ts[] = {{"h", h}, {"b", b}, {"ht", ht}};
    NB_CK_OK(nb_safetensors_save(path, ts, 3, NULL, 0));
    nb_safetensors *f = nb_safetensors_load(path);
    unlink(path);
    NB_CK_NOTNULL(f);
    nb_tensor *h2 = nb_safetensors_get(f, "h"), *b2 = nb_safetensors_get(f, "b");
    ck_assert_int_eq(nb_dtype_of(h2), NB_F16);
    ck_assert_int_eq(nb_dtype_of(b2), NB_BF16);
    nb_ck_shape(h2, NB_SHAPE(2, 3));
    ck_bits(h2, hb, 6);
    ck_bits(b2, bb, 6);
    ck_bits(nb_safetensors_get(f, "ht"), (uint16_t[]){0x3C00, 0x0001, 0x7C00, 0x8000, 0x7E01, 0x7BFF}, 6);
    nb_safetensors_free(f);
    /* a file as PyTorch's safetensors writes it: dtype strings "F16" and "BF16" */
    const char hdr[] = "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,6]}}    ";
    uint64_t hlen = sizeof hdr - 1;
    ck_assert_int_eq(hlen % 8, 0);
    unsigned char buf[256];
    memcpy(buf, &hlen, 8);
    memcpy(buf + 8, hdr, hlen);
    memcpy(buf + 8 + hlen, (uint16_t[]){0x3C00, 0xC000, 0x4049}, 6); /* 1, -2; 3.140625 */
    f = nb_safetensors_load_buffer(buf, 8 + hlen + 6, "mem");
    NB_CK_NOTNULL(f);
    nb_ck_close(nb_safetensors_get(f, "a"), (double[]){1, -2}, 2, 0, 0);
    nb_ck_close(nb_safetensors_get(f, "b"), (double[]){3.140625}, 1, 0, 0);
    nb_safetensors_free(f);
    nb_scope_end(s);
}
END_TEST

/* ---- core fixes ---------------------------------------------------------------------- */

START_TEST(size_out_of_range) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_zeros(NB_SHAPE(2, 3), NB_F32);
    ck_assert_int_eq(nb_size(t, -1), 3);
    ck_assert_int_eq(nb_size(t, -2), 2);
    ck_assert_int_eq(nb_size(t, 0), 2);
    NB_CK_FAILS(nb_size(t, 2) != -1, NB_ERR_INVALID_ARG);
    ck_assert_msg(strstr(nb_last_error(), "dim 2") && strstr(nb_last_error(), "[2, 3]"), "%s", nb_last_error());
    NB_CK_FAILS(nb_size(t, -3) != -1, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_size(nb_scalar(1, NB_F32), 0) != -1, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_size(nb_scalar(1, NB_F32), -1) != -1, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_size(NULL, 0) != -1, NB_ERR_INVALID_ARG);
    nb_scope_end(s);
}
END_TEST

static nb_tensor *id_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return x;
}
static const nb_module_ops id_ops = {"Id", id_forward, NULL, NULL};

/* A tensor made inside a scope and registered used to be freed by
 * nb_scope_end while the module still pointed at it when an op had used it
 * first (registration guessed ownership by counting scope references). The
 * module now always takes its own reference. */
START_TEST(module_scope_owned_tensor) {
    size_t base = nb_memory_stats_get(NB_CPU).allocated;
    nb_module *m = nb_module_new(&id_ops, NULL);
    NB_CK_NOTNULL(m);
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_full(NB_SHAPE(2, 2), 2.0, NB_F32); /* only the scope holds it */
    NB_CK_NOTNULL(nb_mul(w, w)); /* an op used it first: the case that was freed */
    NB_CK_OK(nb_module_register_parameter(m, "w", w));
    nb_tensor *b = nb_zeros(NB_SHAPE(8), NB_F32);
    NB_CK_OK(nb_module_register_buffer(m, "b", b));
    nb_tensor *dup = nb_zeros(NB_SHAPE(16), NB_F32); /* fails: the scope keeps its reference */
    NB_CK_FAILS(nb_module_register_buffer(m, "w", dup) == NB_OK, NB_ERR_INVALID_ARG);
    size_t live = nb_memory_stats_get(NB_CPU).allocated;
    nb_scope_end(s);
    size_t after = nb_memory_stats_get(NB_CPU).allocated;
    ck_assert_uint_lt(after, live);  /* dup (and the temporaries) died ... */
    ck_assert_uint_gt(after, base);  /* ... w and b did not */
    ck_assert_ptr_eq(nb_module_get(m, "w"), w);
    nb_ck_close(nb_module_get(m, "w"), (double[]){2, 2, 2, 2}, 4, 0, 0);
    ck_assert(nb_requires_grad(nb_module_get(m, "w")));
    ck_assert_int_eq(nb_numel(nb_module_get(m, "b")), 8);
    nb_module_free(m);
    ck_assert_uint_eq(nb_memory_stats_get(NB_CPU).allocated, base); /* no leak, no double free */
}
END_TEST

Suite *nb_suite_ops_cast(void) {
    Suite *s = suite_create("ops_cast");
    TCase *c = tcase_create("ops_cast");
    tcase_add_test(c, f16_from_f32_bits);
    tcase_add_test(c, f16_from_f64_rounds_once);
    tcase_add_test(c, f16_all_patterns_round_trip);
    tcase_add_test(c, bf16_bits);
    tcase_add_test(c, bf16_all_patterns_round_trip);
    tcase_add_test(c, int_bool_casts);
    tcase_add_test(c, fill_and_item);
    tcase_add_test(c, data_movement);
    tcase_add_test(c, where_16bit);
    tcase_add_test(c, to_dtype_backward);
    tcase_add_test(c, compute_ops_reject);
    tcase_add_test(c, safetensors_f16_bf16);
    suite_add_tcase(s, c);
    TCase *f = tcase_create("core_fixes");
    tcase_add_test(f, size_out_of_range);
    tcase_add_test(f, module_scope_owned_tensor);
    suite_add_tcase(s, f);
    return s;
}
