/* test_ops_rope.c - apply_rotary_pos_emb: values against PyTorch 1.13 running
 * Hugging Face's formula x * cos + rotate_half(x) * sin (pasted here), the
 * fused kernel against the same formula composed from nb_cat / nb_narrow /
 * nb_mul on [B, H, T, D] inputs (also a transposed one; float64 to 1e-12,
 * float32 to 1e-6), the rotation undone by the opposite angle, gradchecks of
 * x and of the cos/sin tables, and error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_test.h"
#include "suites.h"

/* cos/sin tables [T, D/2] of positions offset .. offset+T-1 with theta. */
static void tables(int64_t T, int64_t D, int64_t offset, double theta, nb_dtype dt, nb_tensor **c, nb_tensor **s) {
    int64_t h = D / 2;
    double *cv = malloc(sizeof(double) * (size_t)(T * h + 1)), *sv = malloc(sizeof(double) * (size_t)(T * h + 1));
    ck_assert(cv && sv);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < h; i++) {
            double a = (double)(offset + t) / pow(theta, (double)(2 * i) / (double)D);
            cv[t * h + i] = cos(a), sv[t * h + i] = sin(a);
        }
    *c = nb_test_tensor(NB_SHAPE(T, h), dt, cv);
    *s = nb_test_tensor(NB_SHAPE(T, h), dt, sv);
    free(cv), free(sv);
    NB_CK_NOTNULL(*c);
    NB_CK_NOTNULL(*s);
}

/* Hugging Face's apply_rotary_pos_emb from plain ops. */
static nb_tensor *naive_rope(nb_tensor *x, nb_tensor *c, nb_tensor *s) {
    int64_t h = nb_size(x, -1) / 2;
    nb_tensor *cc[2] = {c, c}, *ss[2] = {s, s};
    nb_tensor *cf = nb_cat(cc, 2, -1), *sf = nb_cat(ss, 2, -1);
    nb_tensor *rh[2] = {nb_neg(nb_narrow(x, -1, h, h)), nb_narrow(x, -1, 0, h)};
    nb_tensor *r = nb_add(nb_mul(x, cf), nb_mul(nb_cat(rh, 2, -1), sf));
    NB_CK_NOTNULL(r);
    return r;
}

START_TEST(test_rope_torch_values) {
    nb_scope *sc = nb_scope_begin();
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i / 7.0 - 1;
    nb_tensor *x = nb_test_tensor(NB_SHAPE(2, 3, 4), NB_F64, xv), *c, *s;
    tables(3, 4, 5, 10000, NB_F64, &c, &s);
    /* x = arange(24).reshape(2, 3, 4) / 7 - 1, positions 5, 6, 7, theta 10000 */
    nb_ck_close(nb_apply_rotary_pos_emb(x, c, s),
                (double[]){-0.9686080959368966, -0.8275121264695835, 0.7563084279036911, -0.613553722457705,
                           -0.4514180511642892, -0.2852001542672012, -0.017417684579084103, -0.01713257327984131,
                           -0.17386536311615186, 0.2450472301652041, 0.41695619453552896, 0.5900128136697406,
                           1.1615401214225858, 0.798952601172053, -0.401283725010444, 1.1842681569691142,
                           1.673586151434497, 1.323205331656958, 1.1495905241948137, 1.7968637920024138,
                           -0.00772423918841092, 1.8352326351636272, 2.8356227997848324, 2.4200022666825616},
                24, 1e-14, 1e-13);
    nb_scope_end(sc);
}
END_TEST

START_TEST(test_rope_reference) {
    nb_scope *sc = nb_scope_begin();
    nb_generator g = nb_generator_new(3);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 5, 8), NB_F64, &g), *c, *s;
    tables(5, 8, 11, 500000, NB_F64, &c, &s);
    double *want = nb_test_values_of(naive_rope(x, c, s));
    nb_tensor *y = nb_apply_rotary_pos_emb(x, c, s);
    nb_ck_shape(y, 4, (int64_t[]){2, 3, 5, 8});
    nb_ck_close(y, want, 240, 1e-12, 1e-12);
    /* float32 against the float64 result */
    nb_ck_close(nb_apply_rotary_pos_emb(nb_to_dtype(x, NB_F32), nb_to_dtype(c, NB_F32), nb_to_dtype(s, NB_F32)), want,
                240, 1e-6, 1e-6);
    free(want);
    /* a non-contiguous input ([B, T, H, D] transposed to [B, H, T, D], as attention has it) */
    nb_tensor *xt = nb_transpose(nb_randn(NB_SHAPE(2, 5, 3, 8), NB_F64, &g), 1, 2);
    want = nb_test_values_of(naive_rope(xt, c, s));
    nb_ck_close(nb_apply_rotary_pos_emb(xt, c, s), want, 240, 1e-12, 1e-12);
    free(want);
    /* the opposite angle undoes the rotation, and the norm of each pair is kept */
    double *xv = nb_test_values_of(x);
    nb_tensor *back = nb_apply_rotary_pos_emb(nb_apply_rotary_pos_emb(x, c, s), c, nb_neg(s));
    nb_ck_close(back, xv, 240, 1e-12, 0);
    nb_tensor *sq = nb_mul(y, y), *sqx = nb_mul(x, x);
    nb_tensor *pn = nb_add(nb_narrow(sq, -1, 0, 4), nb_narrow(sq, -1, 4, 4));
    double *px = nb_test_values_of(nb_add(nb_narrow(sqx, -1, 0, 4), nb_narrow(sqx, -1, 4, 4)));
    nb_ck_close(pn, px, 120, 1e-12, 1e-12);
    free(xv), free(px);
    /* position 0 is the identity */
    tables(5, 8, 0, 10000, NB_F64, &c, &s);
    double *x0 = nb_test_values_of(nb_narrow(x, 2, 0, 1));
    nb_ck_close(nb_narrow(nb_apply_rotary_pos_emb(x, c, s), 2, 0, 1), x0, 48, 0, 0);
    free(x0);
    nb_scope_end(sc);
}
END_TEST

START_TEST(test_rope_errors) {
    nb_scope *sc = nb_scope_begin();
    nb_tensor *c, *s;
    tables(3, 4, 0, 10000, NB_F64, &c, &s);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(2, 3, 5), NB_F64), c, s), NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "apply_rotary_pos_emb"));
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(2, 4, 4), NB_F64), c, s), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(4), NB_F64), c, s), NB_ERR_SHAPE);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(2, 3, 4), NB_F64), c, nb_zeros(NB_SHAPE(3, 4), NB_F64)),
                NB_ERR_SHAPE);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(2, 3, 4), NB_F32), c, s), NB_ERR_DTYPE);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(nb_zeros(NB_SHAPE(2, 3, 4), NB_I64), nb_to_dtype(c, NB_I64),
                                        nb_to_dtype(s, NB_I64)),
                NB_ERR_DTYPE);
    NB_CK_FAILS(nb_apply_rotary_pos_emb(NULL, c, s), NB_ERR_INVALID_ARG);
    nb_scope_end(sc);
}
END_TEST

typedef struct {
    bool transpose;
    nb_tensor *c, *s; /* fixed tables, unless the inputs carry them */
} rope_ctx;

static nb_tensor *f_rope(nb_tensor *const *in, int n, void *ctx) {
    const rope_ctx *r = ctx;
    nb_tensor *x = r->transpose ? nb_transpose(in[0], 1, 2) : in[0];
    return nb_apply_rotary_pos_emb(x, n > 1 ? in[1] : r->c, n > 2 ? in[2] : r->s);
}

START_TEST(test_rope_gradcheck) {
    nb_scope *sc = nb_scope_begin();
    rope_ctx r = {false, NULL, NULL};
    tables(3, 6, 2, 10000, NB_F64, &r.c, &r.s);
    nb_tensor *in[3] = {nb_test_randn_grad(NB_SHAPE(2, 2, 3, 6), 1), NULL, NULL};
    nb_ck_gradcheck(f_rope, in, 1, &r);
    r.transpose = true;
    in[0] = nb_test_randn_grad(NB_SHAPE(2, 3, 2, 6), 2);
    nb_ck_gradcheck(f_rope, in, 1, &r);
    /* the tables too, with x and without */
    r.transpose = false;
    in[0] = nb_test_randn_grad(NB_SHAPE(2, 3, 6), 3);
    in[1] = nb_test_randn_grad(NB_SHAPE(3, 3), 4);
    in[2] = nb_test_randn_grad(NB_SHAPE(3, 3), 5);
    nb_ck_gradcheck(f_rope, in, 3, &r);
    in[0] = nb_randn(NB_SHAPE(2, 3, 6), NB_F64, NULL);
    nb_ck_gradcheck(f_rope, in, 3, &r);
    nb_scope_end(sc);
}
END_TEST

Suite *nb_suite_ops_rope(void) {
    Suite *s = suite_create("ops_rope");
    TCase *tc = tcase_create("rope");
    tcase_add_test(tc, test_rope_torch_values);
    tcase_add_test(tc, test_rope_reference);
    tcase_add_test(tc, test_rope_errors);
    tcase_add_test(tc, test_rope_gradcheck);
    suite_add_tcase(s, tc);
    return s;
}
