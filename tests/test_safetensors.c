/* test_safetensors.c - the safetensors reader and writer: exact bytes of a
 * small file (the layout of the safetensors project), round trips of every
 * dtype, determinism, CRC-32s, atomic writes that a failed write cannot
 * damage, and hand-made corrupt files that must each fail with a message
 * naming the problem. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "nb_test.h"

static char dir[64];
static nb_scope *scope; /* every test's tensors */

static void tmp_setup(void) {
    strcpy(dir, "/tmp/nb_st_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    scope = nb_scope_begin();
}

static void tmp_teardown(void) {
    nb_scope_end(scope);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.') unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static const char *path_in(const char *name) {
    static char p[2][256];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *b, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

static int count_tmp_files(void) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* The exact bytes: u64 LE length, compact JSON (metadata first, then the
 * tensors in order) padded with spaces to 8, then the data. */
START_TEST(st_exact_layout) {
    float a[2] = {1.0f, -2.5f};
    int64_t b = 7;
    nb_tensor *ta = nb_from_data(a, NB_SHAPE(2), NB_F32), *tb = nb_from_data(&b, 0, NULL, NB_I64);
    nb_named_tensor ts[] = {{"w", ta}, {"n", tb}};
    nb_st_pair meta[] = {{"format", "pt"}};
    NB_CK_OK(nb_safetensors_save(path_in("x.st"), ts, 2, meta, 1));
    char expect[512];
    unsigned ca = (unsigned)crc32(0, (const Bytef *)a, 8), cb = (unsigned)crc32(0, (const Bytef *)&b, 8);
    int n = snprintf(expect, sizeof expect,
                     "{\"__metadata__\":{\"format\":\"pt\",\"crc32.w\":\"%08x\",\"crc32.n\":\"%08x\"},"
                     "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}",
                     ca, cb);
    size_t hlen = ((size_t)n + 7) / 8 * 8, len;
    unsigned char *f = read_all(path_in("x.st"), &len);
    ck_assert_uint_eq(len, 8 + hlen + 16);
    uint64_t got_h = 0;
    for (int i = 7; i >= 0; i--) got_h = got_h << 8 | f[i];
    ck_assert_uint_eq(got_h, hlen);
    ck_assert_int_eq(memcmp(f + 8, expect, (size_t)n), 0);
    for (size_t i = (size_t)n; i < hlen; i++) ck_assert_int_eq(f[8 + i], ' ');
    ck_assert_int_eq(memcmp(f + 8 + hlen, a, 8), 0);
    ck_assert_int_eq(memcmp(f + 8 + hlen + 8, &b, 8), 0);
    free(f);
}
END_TEST

START_TEST(st_roundtrip_all_dtypes) {
    double v[6] = {1.5, 2, 0, 3, 255, 1}; /* exact in f16 and bf16 too */
    nb_tensor *t[NB_DTYPE_COUNT];
    nb_named_tensor ts[NB_DTYPE_COUNT + 2];
    const char *names[NB_DTYPE_COUNT] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16", "i8", "i16"};
    for (int d = 0; d < NB_DTYPE_COUNT; d++) {
        t[d] = nb_test_tensor(NB_SHAPE(2, 3), (nb_dtype)d, v);
        NB_CK_NOTNULL(t[d]);
        ts[d] = (nb_named_tensor){names[d], t[d]};
    }
    nb_tensor *empty = nb_zeros(NB_SHAPE(0, 4), NB_F32);
    nb_tensor *tr = nb_transpose(t[NB_F64], 0, 1); /* non-contiguous: saved in C order */
    ts[NB_DTYPE_COUNT] = (nb_named_tensor){"empty", empty};
    ts[NB_DTYPE_COUNT + 1] = (nb_named_tensor){"fc1.weight", tr};
    nb_st_pair meta[] = {{"k", "v"}, {"epoch", "3"}};
    NB_CK_OK(nb_safetensors_save(path_in("a.st"), ts, NB_DTYPE_COUNT + 2, meta, 2));
    nb_safetensors *f = nb_safetensors_load(path_in("a.st"));
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(f->n_tensors, NB_DTYPE_COUNT + 2);
    for (int d = 0; d < NB_DTYPE_COUNT; d++) {
        nb_tensor *g = nb_safetensors_get(f, names[d]);
        nb_ck_shape(g, NB_SHAPE(2, 3));
        ck_assert_int_eq(nb_dtype_of(g), d);
        double want[6] = {1.5, 2, 0, 3, 255, 1};
        if ((d >= NB_I32 && d <= NB_BOOL) || d == NB_I8 || d == NB_I16) want[0] = 1; /* truncated by the cast */
        if (d == NB_BOOL) want[1] = want[3] = want[4] = 1;
        if (d == NB_I8) want[4] = -1; /* 255 wraps */
        nb_ck_close(g, want, 6, 0, 0);
    }
    nb_ck_shape(nb_safetensors_get(f, "empty"), NB_SHAPE(0, 4));
    nb_ck_close(nb_safetensors_get(f, "fc1.weight"), (double[]){1.5, 3, 2, 255, 0, 1}, 6, 0, 0);
    ck_assert_str_eq(nb_safetensors_meta(f, "k"), "v");
    ck_assert_str_eq(nb_safetensors_meta(f, "epoch"), "3");
    ck_assert_ptr_nonnull(nb_safetensors_meta(f, "crc32.fc1.weight"));
    ck_assert_ptr_null(nb_safetensors_meta(f, "nope"));
    ck_assert_ptr_null(nb_safetensors_get(f, "nope"));
    nb_safetensors_free(f);
}
END_TEST

/* Same tensors, same bytes: no timestamps, stable order. */
START_TEST(st_deterministic) {
    nb_generator g = nb_generator_new(5);
    nb_tensor *w = nb_randn(NB_SHAPE(64, 33), NB_F32, &g);
    nb_named_tensor ts[] = {{"w", w}};
    NB_CK_OK(nb_safetensors_save(path_in("1.st"), ts, 1, NULL, 0));
    NB_CK_OK(nb_safetensors_save(path_in("2.st"), ts, 1, NULL, 0));
    size_t l1, l2;
    unsigned char *a = read_all(path_in("1.st"), &l1), *b = read_all(path_in("2.st"), &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_int_eq(memcmp(a, b, l1), 0);
    free(a), free(b);
    ck_assert_int_eq(count_tmp_files(), 0);
}
END_TEST

START_TEST(st_save_bad_args) {
    nb_tensor *t = nb_ones(NB_SHAPE(2), NB_F32);
    nb_named_tensor dup[] = {{"a", t}, {"a", t}}, reserved[] = {{"__metadata__", t}}, empty[] = {{"", t}};
    nb_st_pair crc[] = {{"crc32.a", "00000000"}}, twice[] = {{"k", "1"}, {"k", "2"}};
    NB_CK_FAILS(nb_safetensors_save(path_in("b.st"), dup, 2, NULL, 0) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "'a' repeats"));
    NB_CK_FAILS(nb_safetensors_save(path_in("b.st"), reserved, 1, NULL, 0) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_safetensors_save(path_in("b.st"), empty, 1, NULL, 0) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_safetensors_save(path_in("b.st"), dup, 1, crc, 1) == NB_OK, NB_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "reserved prefix"));
    NB_CK_FAILS(nb_safetensors_save(path_in("b.st"), dup, 1, twice, 2) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_safetensors_save(NULL, dup, 1, NULL, 0) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_safetensors_save("/nonexistent_dir_nb/x.st", dup, 1, NULL, 0) == NB_OK, NB_ERR_IO);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "/nonexistent_dir_nb/x.st"));
    ck_assert_int_eq(access(path_in("b.st"), F_OK), -1); /* nothing was created */
    NB_CK_FAILS(nb_safetensors_load(path_in("missing.st")), NB_ERR_IO);
    NB_CK_FAILS(nb_safetensors_load(dir), NB_ERR_IO); /* a directory */
}
END_TEST

/* A write that fails half-way (file size limit) leaves the old file as it
 * was and no temporary file behind. */
START_TEST(st_failed_write_keeps_old_file) {
    nb_tensor *small = nb_ones(NB_SHAPE(4), NB_F32), *big = nb_zeros(NB_SHAPE(1 << 20), NB_F32);
    nb_named_tensor s1[] = {{"w", small}}, s2[] = {{"w", big}};
    NB_CK_OK(nb_safetensors_save(path_in("c.st"), s1, 1, NULL, 0));
    size_t l0, l1;
    unsigned char *before = read_all(path_in("c.st"), &l0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1 << 16, 1 << 16}; /* 64 KiB: the 4 MiB write fails with EFBIG */
        setrlimit(RLIMIT_FSIZE, &rl);
        nb_status st = nb_safetensors_save(path_in("c.st"), s2, 1, NULL, 0);
        _exit(st == NB_ERR_IO && strstr(nb_last_error(), "cannot write") ? 0 : 1);
    }
    int ws;
    waitpid(pid, &ws, 0);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the limited write should fail with an i/o error");
    unsigned char *after = read_all(path_in("c.st"), &l1);
    ck_assert_uint_eq(l0, l1);
    ck_assert_int_eq(memcmp(before, after, l0), 0);
    ck_assert_int_eq(count_tmp_files(), 0);
    free(before), free(after);
    nb_safetensors *f = nb_safetensors_load(path_in("c.st"));
    NB_CK_NOTNULL(f);
    nb_safetensors_free(f);
}
END_TEST

/* ---- corrupt files -------------------------------------------------------- */

/* A file of the given JSON header and n data bytes (valued 0..n-1). */
static unsigned char *make(const char *json, size_t n, size_t *len) {
    size_t h = strlen(json);
    *len = 8 + h + n;
    unsigned char *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, h);
    for (size_t i = 0; i < n; i++) b[8 + h + i] = (unsigned char)i;
    return b;
}

/* The file must fail to load with NB_ERR_FORMAT and a message holding `why`. */
static void expect_bad(const unsigned char *b, size_t len, const char *why) {
    nb_clear_error();
    nb_safetensors *f = nb_safetensors_load_buffer(b, len, "bad.st");
    ck_assert_msg(f == NULL, "a corrupt file loaded (expected: %s)", why);
    ck_assert_int_eq(nb_last_status(), NB_ERR_FORMAT);
    ck_assert_msg(strstr(nb_last_error(), why) && strstr(nb_last_error(), "bad.st"), "message '%s' lacks '%s'",
                  nb_last_error(), why);
}

static void expect_bad_json(const char *json, size_t n, const char *why) {
    size_t len;
    unsigned char *b = make(json, n, &len);
    expect_bad(b, len, why);
    free(b);
}

#define T(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

START_TEST(st_corrupt_files) {
    /* a valid file without CRCs (another writer's), as a baseline */
    size_t len;
    unsigned char *ok = make("{" T("a", "F32", "[2]", 0, 8) "," T("b", "U8", "[3]", 8, 11) "}", 11, &len);
    nb_safetensors *f = nb_safetensors_load_buffer(ok, len, "ok.st");
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(f->n_tensors, 2);
    nb_ck_close(nb_safetensors_get(f, "b"), (double[]){8, 9, 10}, 3, 0, 0);
    nb_safetensors_free(f);
    /* truncated: too short for the length, and data cut off */
    expect_bad(ok, 5, "shorter than the 8-byte header length");
    expect_bad(ok, len - 2, "out of range");
    free(ok);
    unsigned char huge[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'};
    expect_bad(huge, sizeof huge, "header length 1099511627776 exceeds the file");
    expect_bad_json("{\"a\":{\"dtype\":\"F32\",", 0, "bad JSON header");
    expect_bad_json("", 0, "bad JSON header");
    expect_bad_json("[1, 2]", 0, "the JSON header is not an object");
    expect_bad_json("{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8, "duplicate");
    expect_bad_json("{\"a\":5}", 0, "entry of tensor 'a' is not an object");
    expect_bad_json("{" T("a", "U16", "[2]", 0, 4) "}", 4, "dtype 'U16'");
    expect_bad_json("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no dtype");
    expect_bad_json("{" T("a", "F32", "[-1]", 0, 4) "}", 4, "shape[0] is not a non-negative integer");
    expect_bad_json("{" T("a", "F32", "[1.5]", 0, 4) "}", 4, "shape[0]");
    expect_bad_json("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, "at most 8");
    expect_bad_json("{" T("a", "F32", "[4611686018427387904,4]", 0, 4) "}", 4, "overflows");
    expect_bad_json("{" T("a", "F32", "[4611686018427387904,0]", 0, 0) "}", 0, "overflows");
    expect_bad_json("{" T("a", "F32", "[3]", 0, 8) "}", 8, "need 12");
    expect_bad_json("{" T("a", "F32", "[2]", 0, 8) "}", 4, "out of range");
    expect_bad_json("{" T("a", "F32", "[0]", 9, 9) "}", 4, "out of range");
    expect_bad_json("{" T("a", "F32", "[2]", 8, 0) "}", 8, "out of range");
    expect_bad_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets is not");
    expect_bad_json("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[1]", 4, 8) "}", 8, "overlap");
    expect_bad_json("{" T("a", "F32", "[1]", 4, 8) "}", 8, "belong to no tensor");
    expect_bad_json("{" T("a", "F32", "[1]", 0, 4) "}", 8, "4 bytes after the last tensor");
    expect_bad_json("{\"__metadata__\":{\"k\":1}," T("a", "U8", "[1]", 0, 1) "}", 1, "metadata 'k' is not a string");
    expect_bad_json("{\"__metadata__\":[]}", 0, "__metadata__ is not an object");
    expect_bad_json("{\"__metadata__\":{\"crc32.a\":\"zz\"}," T("a", "U8", "[1]", 0, 1) "}", 1, "not 8 hex digits");
    expect_bad_json("{\"__metadata__\":{\"crc32.q\":\"00000000\"}," T("a", "U8", "[1]", 0, 1) "}", 1,
                    "'crc32.q' names no tensor");
    expect_bad_json("{\"__metadata__\":{\"crc32.a\":\"00000000\"}," T("a", "U8", "[1]", 0, 1) "}", 1,
                    "'a' fails its CRC-32 check");
    expect_bad_json("{\"__metadata__\":{\"crc32.a\":\"d202ef8d\"}," T("a", "U8", "[1]", 0, 1) "," T("b", "U8", "[1]", 1,
                                                                                                     2) "}",
                    2, "tensor 'b' has no CRC-32");
    expect_bad_json("{\"a\\u0000b\":{}}", 0, "bad JSON header"); /* NUL in a name */
}
END_TEST

/* A file written by nabla, with one data byte flipped, fails its CRC check
 * when loaded from disk. */
START_TEST(st_flipped_byte_fails_crc) {
    nb_tensor *w = nb_arange(0, 100, 1, NB_F32);
    nb_named_tensor ts[] = {{"w", w}};
    NB_CK_OK(nb_safetensors_save(path_in("d.st"), ts, 1, NULL, 0));
    size_t len;
    unsigned char *b = read_all(path_in("d.st"), &len);
    b[len - 7] ^= 0x10;
    write_all(path_in("d.st"), b, len);
    free(b);
    NB_CK_FAILS(nb_safetensors_load(path_in("d.st")), NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "tensor 'w' fails its CRC-32 check"));
}
END_TEST

/* Regression (issue 13): a save killed between open and rename left
 * "<path>.tmp.<pid>.<k>" forever; the next save to path removes those of
 * processes that are gone, and leaves a live process's and other files'. */
START_TEST(st_stale_tmp_cleanup) {
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* its pid is now free: a killed saver's */
    char dead[512], live[512], other[512];
    snprintf(dead, sizeof dead, "%s.tmp.%ld.3", path_in("m.st"), (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld.0", path_in("m.st"), (long)getppid());
    snprintf(other, sizeof other, "%s.tmp.%ld.0", path_in("n.st"), (long)child);
    write_all(dead, "x", 1), write_all(live, "x", 1), write_all(other, "x", 1);
    nb_tensor *t = nb_ones(NB_SHAPE(3), NB_F32);
    NB_CK_OK(nb_safetensors_save(path_in("m.st"), (nb_named_tensor[]){{"a", t}}, 1, NULL, 0));
    ck_assert_msg(access(dead, F_OK) != 0, "%s was not removed", dead);
    ck_assert_int_eq(access(live, F_OK), 0);
    ck_assert_int_eq(access(other, F_OK), 0);
}
END_TEST

Suite *nb_suite_safetensors(void) {
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_add_test(tc, st_exact_layout);
    tcase_add_test(tc, st_stale_tmp_cleanup);
    tcase_add_test(tc, st_roundtrip_all_dtypes);
    tcase_add_test(tc, st_deterministic);
    tcase_add_test(tc, st_save_bad_args);
    tcase_add_test(tc, st_failed_write_keeps_old_file);
    tcase_add_test(tc, st_corrupt_files);
    tcase_add_test(tc, st_flipped_byte_fails_crc);
    suite_add_tcase(s, tc);
    return s;
}
