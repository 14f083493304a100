/* nb_test.c - helpers shared by the Check suites. */
#include "nb_test.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

nb_tensor *nb_test_tensor(int ndim, const int64_t *shape, nb_dtype dt, const double *values) {
    nb_tensor *d = nb_from_data(values, ndim, shape, NB_F64);
    if (!d || dt == NB_F64) return d;
    return nb_to_dtype(d, dt);
}

double *nb_test_values_of(const nb_tensor *t) {
    int64_t n = nb_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(v);
    nb_test_values(t, v, n);
    return v;
}

int64_t nb_test_values(const nb_tensor *t, double *out, int64_t n) {
    int64_t numel = nb_numel(t);
    double *buf = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    ck_assert_ptr_nonnull(buf);
    nb_scope *s = nb_scope_begin();
    nb_tensor *d = nb_to_dtype((nb_tensor *)t, NB_F64);
    NB_CK_NOTNULL(d);
    NB_CK_OK(nb_to_host(d, buf, sizeof(double) * (size_t)numel));
    nb_scope_end(s);
    for (int64_t i = 0; i < n && i < numel; i++) out[i] = buf[i];
    free(buf);
    return numel;
}

void nb_ck_close(const nb_tensor *t, const double *expected, int64_t n, double atol, double rtol) {
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_numel(t), n);
    double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(got);
    nb_test_values(t, got, n);
    for (int64_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(expected[i]);
        ck_assert_msg(got[i] == expected[i] || fabs(got[i] - expected[i]) <= tol || (isnan(got[i]) && isnan(expected[i])),
                      "element %lld: got %.10g, expected %.10g", (long long)i, got[i], expected[i]);
    }
    free(got);
}

void nb_ck_close_to(const nb_tensor *got, const nb_tensor *want, double atol) {
    NB_CK_NOTNULL(got);
    NB_CK_NOTNULL(want);
    ck_assert_int_eq(nb_numel(got), nb_numel(want));
    double *e = nb_test_values_of(want);
    nb_ck_close(got, e, nb_numel(want), atol, 0);
    free(e);
}

double nb_test_rel_err(const nb_tensor *got, const double *want, int64_t n) {
    NB_CK_NOTNULL(got);
    ck_assert_int_eq(nb_numel(got), n);
    double *g = nb_test_values_of(got), e = 0, m = 0;
    for (int64_t k = 0; k < n; k++) e = fmax(e, fabs(g[k] - want[k])), m = fmax(m, fabs(want[k]));
    free(g);
    return m > 0 ? e / m : e > 0 ? INFINITY : 0;
}

void nb_ck_shape(const nb_tensor *t, int ndim, const int64_t *shape) {
    NB_CK_NOTNULL(t);
    ck_assert_int_eq(nb_dim(t), ndim);
    for (int i = 0; i < ndim; i++) ck_assert_int_eq(nb_size(t, i), shape[i]);
}

nb_tensor *nb_test_randn(int ndim, const int64_t *shape, nb_dtype dt, uint64_t seed) {
    nb_generator g = nb_generator_new(seed);
    nb_tensor *t = nb_randn(ndim, shape, dt, &g);
    NB_CK_NOTNULL(t);
    return t;
}

nb_tensor *nb_test_randn_grad(int ndim, const int64_t *shape, uint64_t seed) {
    nb_generator g = nb_generator_new(seed);
    nb_tensor *t = nb_randn(ndim, shape, NB_F64, &g);
    NB_CK_NOTNULL(t);
    NB_CK_OK(nb_set_requires_grad(t, true));
    return t;
}

void nb_ck_bitwise(const nb_tensor *a, const nb_tensor *b) {
    NB_CK_NOTNULL(a);
    NB_CK_NOTNULL(b);
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    ck_assert_int_eq(nb_dtype_of(a), nb_dtype_of(b));
    const size_t bytes = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    NB_CK_OK(nb_to_host(a, x, bytes));
    NB_CK_OK(nb_to_host(b, y, bytes));
    ck_assert_msg(memcmp(x, y, bytes) == 0, "results differ bitwise");
    free(x);
    free(y);
}

nb_tensor *nb_test_bool_mask(int64_t L, int64_t S, uint64_t seed, double *additive) {
    bool *m = malloc((size_t)(L * S));
    ck_assert_ptr_nonnull(m);
    uint64_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < L * S; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        m[i] = (x >> 61) < 5 || i % S == (i / S) % S;
        if (additive) additive[i] = m[i] ? 0 : -INFINITY;
    }
    nb_tensor *t = nb_from_data(m, NB_SHAPE(L, S), NB_BOOL);
    free(m);
    NB_CK_NOTNULL(t);
    return t;
}

void nb_ck_gradcheck(nb_gradcheck_fn f, nb_tensor *const *in, int n, void *ctx) {
    NB_CK_OK(nb_gradcheck(f, in, n, ctx, NULL));
}

int nb_test_limit_address_space(size_t extra) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (!f || fscanf(f, "%ld", &pages) != 1) {
        if (f) fclose(f);
        return 1;
    }
    fclose(f);
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)extra;
    struct rlimit rl = {lim, lim};
    return setrlimit(RLIMIT_AS, &rl) ? 2 : 0;
}

char *nb_test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

void nb_test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void nb_test_rmtree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_msg(system(cmd) == 0, "cannot remove %s", dir);
}

int nb_test_accelerators(nb_device *devs, int max) {
    int n = 0;
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; t != NB_DEVICE_CPU && i < nb_device_count((nb_device_type)t) && n < max; i++)
            devs[n++] = (nb_device){(nb_device_type)t, i};
    return n;
}

bool nb_test_find_script(const char *name, char *out, size_t len) {
    snprintf(out, len, "tests/interop/%s", name);
    if (!access(out, R_OK)) return true;
    char exe[1024] = {0}, file[512];
    if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) return false;
    snprintf(file, sizeof file, "%s", __FILE__);
    char *fdir = dirname(file);
    if (fdir[0] == '/') snprintf(out, len, "%s/interop/%s", fdir, name);
    else snprintf(out, len, "%s/../%s/interop/%s", dirname(exe), fdir, name);
    return !access(out, R_OK);
}

const char *nb_test_python(void) {
    const char *p = getenv("NB_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

double nb_test_value(const char *kind, int64_t i) {
    int64_t b = i * 37 % 101;
    if (!strcmp(kind, "b")) return b % 3 == 0;
    if (!strcmp(kind, "u")) return (double)b;
    if (!strcmp(kind, "i")) return (double)(b - 50);
    return (double)(b - 50) * 0.25;
}
