/* test_pt.c - PyTorch's checkpoint format (data/pt.c, data/pickle.c,
 * data/zip.c): nabla's round trips (every dtype, views that share a
 * storage, strides and offsets, equal files for equal tensors), loading
 * into a module through nb_module_load_state_dict, hostile files
 * (os.system, storages out of range or missing, truncated archives, bad
 * CRCs, refused opcodes, deep nesting), and torch itself
 * (tests/interop/pt_interop.py: torch.save's files loaded here, nabla's
 * files loaded by torch.load(weights_only=True)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_data.h"
#include "nb_test.h"

static const nb_dtype dtypes[] = {NB_F32, NB_F64, NB_F16, NB_BF16, NB_I64, NB_I32, NB_U8, NB_BOOL};
static const char *const dtype_names[] = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"};

static const char *kind_of(nb_dtype dt) {
    return dt == NB_BOOL ? "b" : dt == NB_U8 ? "u" : dt == NB_I32 || dt == NB_I64 ? "i" : "f";
}

static nb_tensor *made(nb_dtype dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = nb_test_value(kind_of(dt), i);
    nb_tensor *t = nb_to_dtype(nb_from_data(v, ndim, shape, NB_F64), dt);
    free(v);
    return t;
}

/* t holds v(i) of kind at every C-order position. */
static void ck_values(nb_tensor *t, const char *kind, const char *what) {
    ck_assert_msg(t != NULL, "%s: missing: %s", what, nb_last_error());
    double *got = nb_test_values_of(t);
    for (int64_t i = 0; i < nb_numel(t); i++)
        ck_assert_msg(got[i] == nb_test_value(kind, i), "%s[%lld] = %g, not %g", what, (long long)i, got[i], nb_test_value(kind, i));
    free(got);
}

static void ck_strides(const nb_tensor *t, int n, const int64_t *want, int64_t offset) {
    ck_assert_int_eq(nb_dim(t), n);
    for (int i = 0; i < n; i++) ck_assert_int_eq(nb_strides(t)[i], want[i]);
    ck_assert_int_eq(nb_storage_offset(t), offset);
}

/* The state_dict both sides write: every dtype, then a base with three views of it. */
static int sample_state(nb_named_tensor *ts) {
    int n = 0;
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        ts[n++] = (nb_named_tensor){dtype_names[d], made(dtypes[d], 3, (int64_t[]){3, 4, 5})};
    nb_tensor *base = made(NB_F32, 1, (int64_t[]){40});
    ts[n++] = (nb_named_tensor){"base", base};
    ts[n++] = (nb_named_tensor){"view", nb_view(nb_narrow(base, 0, 4, 12), 2, (int64_t[]){3, 4})};
    ts[n++] = (nb_named_tensor){"strided", nb_slice(base, 0, 1, 40, 3)};
    ts[n++] = (nb_named_tensor){"transposed", nb_transpose(nb_view(nb_narrow(base, 0, 0, 12), 2, (int64_t[]){3, 4}), 0, 1)};
    ts[n++] = (nb_named_tensor){"scalar", nb_scalar(2.5, NB_F64)};
    ts[n++] = (nb_named_tensor){"empty", nb_zeros(NB_SHAPE(0, 3), NB_F32)};
    return n;
}

/* What sample_state wrote (or torch_all.pt holds), read back from f. */
static void ck_sample_state(const nb_pt *f, const char *what) {
    char label[128];
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        nb_tensor *t = nb_pt_get(f, dtype_names[d]);
        snprintf(label, sizeof label, "%s: %s", what, dtype_names[d]);
        ck_values(t, kind_of(dtypes[d]), label);
        ck_assert_int_eq(nb_dtype_of(t), dtypes[d]);
        nb_ck_shape(t, 3, (int64_t[]){3, 4, 5});
    }
    nb_tensor *base = nb_pt_get(f, "base"), *view = nb_pt_get(f, "view"), *strided = nb_pt_get(f, "strided"),
              *tr = nb_pt_get(f, "transposed");
    ck_values(base, "f", "base");
    NB_CK_NOTNULL(view), NB_CK_NOTNULL(strided), NB_CK_NOTNULL(tr);
    ck_strides(view, 2, (int64_t[]){4, 1}, 4);
    ck_strides(strided, 1, (int64_t[]){3}, 1);
    ck_strides(tr, 2, (int64_t[]){1, 4}, 0);
    ck_assert(nb_shares_storage(base, view) && nb_shares_storage(base, strided) && nb_shares_storage(base, tr));
    double *b = nb_test_values_of(base), *v = nb_test_values_of(view), *s = nb_test_values_of(strided),
           *t = nb_test_values_of(tr);
    for (int i = 0; i < 12; i++) ck_assert(v[i] == b[4 + i]);
    for (int i = 0; i < 13; i++) ck_assert(s[i] == b[1 + 3 * i]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) ck_assert(t[i * 3 + j] == b[j * 4 + i]);
    free(b), free(v), free(s), free(t);
    ck_assert_double_eq(nb_item(nb_pt_get(f, "scalar")), 2.5);
    ck_assert_int_eq(nb_dim(nb_pt_get(f, "scalar")), 0);
    nb_ck_shape(nb_pt_get(f, "empty"), 2, (int64_t[]){0, 3});
}

START_TEST(test_pt_round_trip) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_pt_XXXXXX", path[256], path2[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    nb_named_tensor ts[16];
    int n = sample_state(ts);
    snprintf(path, sizeof path, "%s/a.pt", dir);
    snprintf(path2, sizeof path2, "%s/b.pt", dir);
    NB_CK_OK(nb_pt_save(path, ts, n));
    NB_CK_OK(nb_pt_save(path2, ts, n));
    size_t la, lb;
    char *a = nb_test_slurp(path, &la), *b = nb_test_slurp(path2, &lb);
    ck_assert_msg(la == lb && !memcmp(a, b, la), "equal tensors, different files");
    free(a), free(b);
    nb_pt *f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(f->n, n);
    for (int i = 0; i < n; i++) ck_assert_str_eq(f->entries[i].name, ts[i].name);
    ck_sample_state(f, "round trip");
    /* loaded tensors outlive the file's handle and can be written (the mapping is copy-on-write) */
    nb_tensor *keep = nb_pt_get(f, "float32");
    nb_retain(keep);
    nb_pt_free(f);
    NB_CK_OK(nb_fill_(keep, 1.0));
    ck_assert_double_eq(nb_item(nb_sum(keep, NULL, 0, false)), 60.0);
    nb_release(keep);
    f = nb_pt_load(path);
    ck_values(nb_pt_get(f, "float32"), "f", "the file after a write through a loaded tensor");
    /* a state_dict under a prefix */
    nb_named_tensor *sd;
    ck_assert_int_eq(nb_pt_state_dict(f, NULL, &sd), n);
    free(sd);
    nb_pt_free(f);
    /* errors */
    NB_CK_FAILS(nb_pt_save(path, (nb_named_tensor[]){{"a", ts[0].tensor}, {"a", ts[1].tensor}}, 2) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pt_save(path, (nb_named_tensor[]){{NULL, ts[0].tensor}}, 1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pt_save(NULL, ts, 1) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_pt_load(NULL), NB_ERR_INVALID_ARG);
    snprintf(path2, sizeof path2, "%s/missing.pt", dir);
    NB_CK_FAILS(nb_pt_load(path2), NB_ERR_IO);
    /* a failed save leaves the old file */
    snprintf(path2, sizeof path2, "%s/no/such/dir.pt", dir);
    NB_CK_FAILS(nb_pt_save(path2, ts, n) == NB_OK, NB_ERR_IO);
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    nb_pt_free(f);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* A module's state_dict through a .pt: nb_pt_save of nb_module_state_dict, then nb_module_load_state_dict. */
START_TEST(test_pt_module) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_pt_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/net.pt", dir);
    nb_manual_seed(1);
    nb_module *a = nb_nn_sequential(nb_nn_linear(4, 3), nb_nn_relu(), nb_nn_linear(3, 2));
    nb_module *b = nb_nn_sequential(nb_nn_linear(4, 3), nb_nn_relu(), nb_nn_linear(3, 2));
    nb_named_tensor *sd;
    int n = nb_module_state_dict(a, &sd);
    ck_assert_int_eq(n, 4);
    NB_CK_OK(nb_pt_save(path, sd, n));
    nb_load_report r;
    NB_CK_OK(nb_module_load_state_dict(b, path, true, &r));
    ck_assert_int_eq(r.n_missing + r.n_unexpected + r.n_mismatched, 0);
    nb_load_report_free(&r);
    nb_tensor *x = made(NB_F32, 2, (int64_t[]){5, 4});
    double *ya = nb_test_values_of(nb_forward(a, x)), *yb = nb_test_values_of(nb_forward(b, x));
    for (int i = 0; i < 10; i++) ck_assert(ya[i] == yb[i]);
    free(ya), free(yb);
    /* a file missing a key: strict refuses and names it */
    NB_CK_OK(nb_pt_save(path, sd, 1));
    free(sd);
    NB_CK_FAILS(nb_module_load_state_dict(b, path, true, NULL) == NB_OK, NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "missing"));
    nb_module_free(a), nb_module_free(b);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* Runs pt_interop.py mode dir; false when it exits 77 (no torch). */
static bool interop(const char *mode, const char *dir) {
    char script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("pt_interop.py", script, sizeof script), "pt_interop.py not found");
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", nb_test_python(), script, mode, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) return false;
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "pt_interop.py %s failed (status %d)", mode, rc);
    return true;
}

START_TEST(test_pt_hostile) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_pt_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    interop("write", dir); /* the hostile files need no torch */
    const struct {
        const char *file;
        nb_status st;
        const char *says;
    } cases[] = {
        {"os_system.pt", NB_ERR_FORMAT, "global os.system is not allowed"},
        {"builtins_eval.pt", NB_ERR_FORMAT, "global builtins.eval is not allowed"},
        {"out_of_range.pt", NB_ERR_FORMAT, "reaching element 7 of storage 0, which holds 6"},
        {"negative_stride.pt", NB_ERR_FORMAT, "negative size or stride"},
        {"short_storage.pt", NB_ERR_FORMAT, "holds 24 bytes"},
        {"missing_storage.pt", NB_ERR_FORMAT, "no record archive/data/0"},
        {"no_pickle.pt", NB_ERR_FORMAT, "no record archive/data.pkl"},
        {"frame.pt", NB_ERR_FORMAT, "opcode 0x95"},
        {"deep.pt", NB_ERR_FORMAT, "deeper than 64"},
        {"underflow.pt", NB_ERR_FORMAT, "stack is empty"},
        {"cut.pt", NB_ERR_FORMAT, "truncated"},
        {"complex_dtype.pt", NB_ERR_DTYPE, "torch.ComplexFloatStorage"},
        {"truncated.pt", NB_ERR_FORMAT, "not a zip"},
        {"bad_crc.pt", NB_ERR_FORMAT, "CRC-32"},
        {"build_dict.pt", NB_ERR_FORMAT, "can only BUILD"},
        {"huge_shape.pt", NB_ERR_FORMAT, "2^62"},
        {"blowup.pt", NB_ERR_FORMAT, "unfold"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(path, sizeof path, "%s/hostile/%s", dir, cases[i].file);
        nb_clear_error();
        nb_pt *f = nb_pt_load(path);
        ck_assert_msg(!f, "%s loaded", cases[i].file);
        ck_assert_msg(nb_last_status() == cases[i].st && strstr(nb_last_error(), cases[i].says), "%s: %s",
                      cases[i].file, nb_last_error());
    }
    snprintf(path, sizeof path, "%s/hostile/short.pt", dir); /* torch.int16 */
    nb_pt *f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(nb_dtype_of(nb_pt_get(f, "t")), NB_I16);
    nb_ck_close(nb_pt_get(f, "t"), (double[]){-3, -2, -1, 0, 1, 300}, 6, 0, 0);
    nb_pt_free(f);
    snprintf(path, sizeof path, "%s/hostile/good.pt", dir);
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    nb_tensor *t = nb_pt_get(f, "t");
    nb_ck_shape(t, 2, (int64_t[]){2, 3});
    ck_assert_double_eq(nb_item(nb_sum(t, NULL, 0, false)), 15.0);
    nb_pt_free(f);
    snprintf(path, sizeof path, "%s/hostile/counter.pt", dir);
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(f->n, 2);
    ck_assert_str_eq(f->entries[1].name, "c.b");
    ck_assert_int_eq(f->entries[1].i, 2);
    nb_pt_free(f);
    snprintf(path, sizeof path, "%s/hostile/untyped.pt", dir); /* bytes 4..7 of the float 1.0f: 00 00 80 3f */
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    t = nb_pt_get(f, "t");
    ck_assert_int_eq(nb_dtype_of(t), NB_U8);
    nb_ck_close(t, (double[]){0, 0, 0x80, 0x3f}, 4, 0, 0);
    nb_pt_free(f);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_pt_against_torch) {
    nb_scope *s = nb_scope_begin();
    char dir[64] = "/tmp/nb_pt_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    if (!interop("write", dir)) {
        printf("pt_interop: skipped: %s lacks torch\n", nb_test_python());
        nb_test_rmtree(dir);
        nb_scope_end(s);
        return;
    }
    /* torch.save's files */
    snprintf(path, sizeof path, "%s/torch_all.pt", dir);
    nb_pt *f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    ck_sample_state(f, "torch_all.pt");
    nb_tensor *p = nb_pt_get(f, "param");
    ck_values(p, "f", "param"), nb_ck_shape(p, 2, (int64_t[]){2, 3});
    nb_pt_free(f);
    snprintf(path, sizeof path, "%s/torch_ckpt.pt", dir);
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    const struct {
        const char *name;
        nb_pt_kind kind;
        int64_t i;
        double f;
        const char *s;
    } leaves[] = {{"epoch", NB_PT_INT, 7, 0, NULL},         {"lr", NB_PT_FLOAT, 0, 0.125, NULL},
                  {"name", NB_PT_STRING, 0, 0, "run-1"},    {"betas.0", NB_PT_FLOAT, 0, 0.9, NULL},
                  {"betas.1", NB_PT_FLOAT, 0, 0.999, NULL}, {"flag", NB_PT_BOOL, 1, 0, NULL},
                  {"nothing", NB_PT_NONE, 0, 0, NULL},      {"big", NB_PT_INT, (int64_t)1 << 40, 0, NULL},
                  {"neg", NB_PT_INT, -3, 0, NULL},          {"dtype", NB_PT_STRING, 0, 0, "torch.float16"},
                  {"device", NB_PT_STRING, 0, 0, "cpu"},    {"steps.2", NB_PT_INT, 3, 0, NULL},
                  {"size.1", NB_PT_INT, 5, 0, NULL}};
    for (size_t k = 0; k < sizeof leaves / sizeof *leaves; k++) {
        const nb_pt_entry *e = NULL;
        for (int i = 0; i < f->n; i++)
            if (!strcmp(f->entries[i].name, leaves[k].name)) e = &f->entries[i];
        ck_assert_msg(e && e->kind == leaves[k].kind, "%s", leaves[k].name);
        if (e->kind == NB_PT_INT || e->kind == NB_PT_BOOL) ck_assert_int_eq(e->i, leaves[k].i);
        if (e->kind == NB_PT_FLOAT) ck_assert_double_eq(e->f, leaves[k].f);
        if (e->kind == NB_PT_STRING) ck_assert_str_eq(e->s, leaves[k].s);
    }
    bool bytes = false, cplx = false;
    for (int i = 0; i < f->n; i++) {
        const nb_pt_entry *e = &f->entries[i];
        if (!strcmp(e->name, "data")) bytes = e->kind == NB_PT_BYTES && e->len == 4 && !memcmp(e->s, "\x00\xff" "ab", 4);
        if (!strcmp(e->name, "z")) cplx = e->kind == NB_PT_COMPLEX && e->f == 1.5 && e->imag == -2.0;
    }
    ck_assert_msg(bytes && cplx, "bytes %d, complex %d", bytes, cplx);
    nb_named_tensor *sd;
    ck_assert_int_eq(nb_pt_state_dict(f, "model", &sd), 2);
    ck_assert_str_eq(sd[0].name, "fc.weight");
    ck_assert_str_eq(sd[1].name, "fc.bias");
    free(sd);
    nb_pt_free(f);
    snprintf(path, sizeof path, "%s/torch_legacy.pt", dir);
    NB_CK_FAILS(nb_pt_load(path), NB_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "legacy"));
    /* a PyTorch model's state_dict in a nabla module gives PyTorch's output */
    nb_module *net = nb_nn_sequential(nb_nn_linear(4, 3), nb_nn_relu(), nb_nn_linear(3, 2));
    snprintf(path, sizeof path, "%s/torch_net.pt", dir);
    NB_CK_OK(nb_module_load_state_dict(net, path, true, NULL));
    snprintf(path, sizeof path, "%s/torch_net_io.pt", dir);
    f = nb_pt_load(path);
    NB_CK_NOTNULL(f);
    double *y = nb_test_values_of(nb_forward(net, nb_pt_get(f, "x"))), *want = nb_test_values_of(nb_pt_get(f, "y"));
    for (int i = 0; i < 10; i++) ck_assert_double_eq_tol(y[i], want[i], 1e-6);
    free(y), free(want);
    nb_pt_free(f);
    /* nabla's files for torch.load(weights_only=True) */
    nb_named_tensor ts[16];
    int n = sample_state(ts);
    snprintf(path, sizeof path, "%s/nabla_all.pt", dir);
    NB_CK_OK(nb_pt_save(path, ts, n));
    n = nb_module_state_dict(net, &sd);
    snprintf(path, sizeof path, "%s/nabla_net.pt", dir);
    NB_CK_OK(nb_pt_save(path, sd, n));
    free(sd);
    interop("check", dir);
    nb_module_free(net);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_pt(void) {
    Suite *s = suite_create("pt");
    TCase *t = tcase_create("pt");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_pt_round_trip);
    tcase_add_test(t, test_pt_module);
    tcase_add_test(t, test_pt_hostile);
    tcase_add_test(t, test_pt_against_torch);
    suite_add_tcase(s, t);
    return s;
}
