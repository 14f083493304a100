/* test_profile.c - the kernel-slot profiler (core/profile.c): the report's
 * table, and the Chrome trace export read back with jansson as a trace
 * viewer reads it (traceEvents of complete "X" events with a name, a
 * timestamp and a duration in microseconds, per process and thread). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_test.h"

static void *other_thread(void *arg) {
    (void)arg;
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(8, 8), NB_F32);
    nb_tensor *r = nb_add(a, a);
    nb_scope_end(s);
    return r ? NULL : (void *)1;
}

START_TEST(test_profiler_trace) {
    nb_scope *s = nb_scope_begin();
    FILE *null = fopen("/dev/null", "w");
    nb_profiler_report(null); /* whatever an NB_PROFILE run began */
    char dir[64] = "/tmp/nb_prof_XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/trace.json", dir);
    NB_CK_FAILS(nb_profiler_export_chrome_trace(path) == NB_OK, NB_ERR_STATE); /* not started */
    nb_profiler_start();
    nb_tensor *x = nb_randn(NB_SHAPE(16, 32), NB_F32, NULL), *w = nb_randn(NB_SHAPE(32, 8), NB_F32, NULL);
    nb_tensor *y = nb_relu(nb_matmul(x, w));
    NB_CK_NOTNULL(y);
    pthread_t th;
    void *rc = (void *)1;
    ck_assert_int_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
    ck_assert_int_eq(pthread_join(th, &rc), 0);
    ck_assert_ptr_null(rc);
    NB_CK_OK(nb_profiler_export_chrome_trace(path));
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    ck_assert_msg(root != NULL, "trace: %s (line %d)", err.text, err.line);
    json_t *evs = json_object_get(root, "traceEvents");
    ck_assert(json_is_array(evs));
    size_t i, n_x = 0;
    json_t *e;
    bool tid[2] = {false, false}, named_host = false;
    double last_end = 0;
    json_array_foreach(evs, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        ck_assert_ptr_nonnull(ph);
        if (!strcmp(ph, "M")) {
            named_host |= json_integer_value(json_object_get(e, "pid")) == 0 &&
                          !strcmp(json_string_value(json_object_get(json_object_get(e, "args"), "name")), "host");
            continue;
        }
        ck_assert_str_eq(ph, "X");
        n_x++;
        ck_assert(json_is_string(json_object_get(e, "name")));
        double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
        ck_assert(ts >= 0 && dur >= 0);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), 0); /* the CPU: host events only */
        json_int_t t = json_integer_value(json_object_get(e, "tid"));
        ck_assert(t == 0 || t == 1);
        tid[t] = true;
        if (ts + dur > last_end) last_end = ts + dur;
    }
    ck_assert(named_host);
    ck_assert_int_ge(n_x, 4); /* randn x2, matmul, relu on this thread; ones, add on the other */
    ck_assert(tid[0] && tid[1]);
    json_decref(root);
    /* the report still has every call, then the profile is over */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    nb_profiler_report(mem);
    fclose(mem);
    char want[64];
    snprintf(want, sizeof want, "profile: %zu slot calls", n_x);
    ck_assert_msg(strstr(text, want), "report: %s (want '%s')", text, want);
    free(text);
    NB_CK_FAILS(nb_profiler_export_chrome_trace(path) == NB_OK, NB_ERR_STATE); /* reported: nothing left */
    nb_profiler_start();
    snprintf(path, sizeof path, "%s/no/such/dir/trace.json", dir);
    NB_CK_FAILS(nb_profiler_export_chrome_trace(path) == NB_OK, NB_ERR_IO);
    nb_profiler_report(null);
    fclose(null);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

/* On a GPU: each call also on the device's timeline (pid 1, "cuda:0"), its kernel inside the profile's span. */
START_TEST(test_profiler_trace_cuda) {
    if (nb_device_count(NB_DEVICE_CUDA) < 1) return;
    nb_scope *s = nb_scope_begin();
    FILE *null = fopen("/dev/null", "w");
    nb_profiler_report(null);
    char dir[64] = "/tmp/nb_prof_XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/trace.json", dir);
    nb_profiler_start();
    nb_tensor *x = nb_full_on(2, (int64_t[]){256, 256}, 0.01, NB_F32, NB_CUDA(0));
    for (int i = 0; i < 4; i++) x = nb_tanh(nb_matmul(x, x));
    NB_CK_NOTNULL(x);
    NB_CK_OK(nb_profiler_export_chrome_trace(path));
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    ck_assert_msg(root != NULL, "trace: %s", err.text);
    size_t i, host = 0, kernel = 0;
    json_t *e;
    bool named = false;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        json_int_t pid = json_integer_value(json_object_get(e, "pid"));
        if (!strcmp(ph, "M")) {
            named |= pid == 1 && !strcmp(json_string_value(json_object_get(json_object_get(e, "args"), "name")), "cuda:0");
            continue;
        }
        if (pid == 0) host++;
        if (pid != 1) continue;
        kernel++;
        ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "kernel");
        ck_assert(json_number_value(json_object_get(e, "ts")) >= 0 && json_number_value(json_object_get(e, "dur")) >= 0);
    }
    ck_assert(named);
    ck_assert_int_ge(kernel, 8); /* 4 matmuls, 4 tanh (and the fill) */
    ck_assert_int_eq(kernel, host);
    json_decref(root);
    nb_profiler_report(null);
    fclose(null);
    nb_test_rmtree(dir);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_profile(void) {
    Suite *s = suite_create("profile");
    TCase *t = tcase_create("profile");
    tcase_add_test(t, test_profiler_trace);
    tcase_add_test(t, test_profiler_trace_cuda);
    suite_add_tcase(s, t);
    return s;
}
