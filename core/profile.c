/* profile.c - the kernel-slot profiler (nb_profiler_start/report): a timing
 * mark before and after each slot call (nb_kernel_<slot>), kept per thread in call
 * order and resolved into milliseconds at the report, when every device has
 * finished. Marks come from the backend's timer slots (timed GPU events; the
 * host clock on the CPU). The same marks export as a Chrome / Perfetto
 * trace (nb_profiler_export_chrome_trace). */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_impl.h"

bool nb_prof_on;

typedef struct mark_pair {
    nb_backend *be;
    const char *slot; /* a string literal (the dispatcher's #slot) */
    void *a, *b;
    double host_ms;   /* the host's time inside the slot call (launch work, for a device) */
    double host_t0;   /* when the call began, ms since nb_profiler_start */
    int tid;          /* the calling thread, numbered as threads first call a slot */
} mark_pair;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mark_pair *pairs;
static size_t n_pairs, cap_pairs;
static _Thread_local void *open_mark; /* before's mark, until after */
static _Thread_local double open_host;  /* before's host clock */
static double t_start;
static _Thread_local const char *open_detail; /* nb_prof_detail's row for the open call */
static _Thread_local int my_tid = -1;
static int next_tid;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

__attribute__((constructor)) static void from_env(void) {
    const char *e = getenv("NB_PROFILE");
    if (e && *e && strcmp(e, "0")) nb_profiler_start();
}

void nb_profiler_start(void) {
    t_start = now_ms();
    nb_prof_on = true;
}

void nb_prof_mark_before(nb_backend *be) {
    open_detail = NULL;
    open_mark = be->iface->timer_mark ? be->iface->timer_mark(be) : NULL;
    open_host = now_ms(); /* after the mark: its own cost stays out */
}

void nb_prof_detail(const char *row) {
    if (nb_prof_on) open_detail = row;
}

void nb_prof_mark_after(nb_backend *be, const char *slot) {
    double host = now_ms() - open_host;
    if (open_detail) slot = open_detail, open_detail = NULL;
    void *a = open_mark, *b = a && be->iface->timer_mark ? be->iface->timer_mark(be) : NULL;
    open_mark = NULL;
    pthread_mutex_lock(&lock);
    if (n_pairs == cap_pairs) {
        size_t cap = cap_pairs ? 2 * cap_pairs : 4096;
        mark_pair *p = realloc(pairs, sizeof *p * cap);
        if (!p) { /* out of host memory: this call goes uncounted */
            pthread_mutex_unlock(&lock);
            if (a) be->iface->timer_free(be, a);
            if (b) be->iface->timer_free(be, b);
            return;
        }
        pairs = p, cap_pairs = cap;
    }
    if (my_tid < 0) my_tid = next_tid++; /* under the lock */
    pairs[n_pairs++] = (mark_pair){be, slot, a, b, host, open_host - t_start, my_tid};
    pthread_mutex_unlock(&lock);
}

typedef struct row {
    const char *slot;
    nb_backend *be;
    long calls;
    double ms, host_ms;
} row;

static int by_ms(const void *x, const void *y) {
    double a = ((const row *)x)->ms, b = ((const row *)y)->ms;
    return a < b ? 1 : a > b ? -1 : 0;
}

void nb_profiler_report(FILE *f) {
    if (!f) f = stderr;
    if (t_start == 0) {
        fprintf(f, "profile: nb_profiler_start was not called\n");
        return;
    }
    nb_prof_on = false;
    double wall = now_ms() - t_start;
    pthread_mutex_lock(&lock);
    row *rows = calloc(n_pairs ? n_pairs : 1, sizeof *rows);
    size_t n_rows = 0;
    double total = 0, host_total = 0;
    long calls = 0;
    for (size_t i = 0; rows && i < n_pairs; i++) {
        mark_pair *p = &pairs[i];
        double ms = p->a && p->b ? p->be->iface->timer_elapsed_ms(p->be, p->a, p->b) : 0;
        size_t r = 0;
        while (r < n_rows && !(rows[r].be == p->be && !strcmp(rows[r].slot, p->slot))) r++;
        if (r == n_rows) rows[n_rows++] = (row){p->slot, p->be, 0, 0, 0};
        rows[r].calls++, rows[r].ms += ms, rows[r].host_ms += p->host_ms;
        total += ms, host_total += p->host_ms, calls++;
    }
    for (size_t i = 0; i < n_pairs; i++) {
        if (pairs[i].a) pairs[i].be->iface->timer_free(pairs[i].be, pairs[i].a);
        if (pairs[i].b) pairs[i].be->iface->timer_free(pairs[i].be, pairs[i].b);
    }
    n_pairs = 0;
    pthread_mutex_unlock(&lock);
    if (!rows) return;
    qsort(rows, n_rows, sizeof *rows, by_ms);
    fprintf(f, "%-32s %-8s %9s %10s %9s %6s %12s\n", "slot", "device", "calls", "total_ms", "us/call", "share",
            "host_us/call");
    for (size_t r = 0; r < n_rows; r++) {
        char d[32];
        double c = rows[r].calls ? (double)rows[r].calls : 1;
        fprintf(f, "%-32s %-8s %9ld %10.3f %9.2f %5.1f%% %12.2f\n", rows[r].slot,
                nb_device_str(rows[r].be->device, d, sizeof d), rows[r].calls, rows[r].ms, 1e3 * rows[r].ms / c,
                total > 0 ? 100 * rows[r].ms / total : 0, 1e3 * rows[r].host_ms / c);
    }
    /* wall - host inside slots = the host's own work around them (core, autograd, allocation) */
    fprintf(f, "profile: %ld slot calls, %.3f ms of device (kernel) time in them, %.3f ms of host time inside "
               "them, %.3f ms of wall time\n", calls, total, host_total, wall);
    free(rows);
    t_start = 0;
}

/* ---- Chrome / Perfetto trace -------------------------------------------------------------- */

static json_t *event(const char *name, const char *cat, double ts_ms, double dur_ms, int pid, int tid) {
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(name));
    json_object_set_new(e, "cat", json_string(cat));
    json_object_set_new(e, "ph", json_string("X"));
    json_object_set_new(e, "ts", json_real(1e3 * ts_ms)); /* microseconds */
    json_object_set_new(e, "dur", json_real(1e3 * (dur_ms > 0 ? dur_ms : 0)));
    json_object_set_new(e, "pid", json_integer(pid));
    json_object_set_new(e, "tid", json_integer(tid));
    return e;
}

static json_t *process_name(int pid, const char *name) {
    json_t *e = json_object(), *args = json_object();
    json_object_set_new(args, "name", json_string(name));
    json_object_set_new(e, "name", json_string("process_name"));
    json_object_set_new(e, "ph", json_string("M"));
    json_object_set_new(e, "pid", json_integer(pid));
    json_object_set_new(e, "args", args);
    return e;
}

nb_status nb_profiler_export_chrome_trace(const char *path) {
    const char *op = "profiler_export_chrome_trace";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    if (t_start == 0) return nb_set_error(NB_ERR_STATE, "%s: nb_profiler_start was not called", op);
    json_t *root = json_object(), *evs = json_array();
    if (!root || !evs) {
        json_decref(root), json_decref(evs);
        return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    }
    json_object_set_new(root, "displayTimeUnit", json_string("ms"));
    json_array_append_new(evs, process_name(0, "host"));
    /* each device's timeline: its first timed call is placed where the host began it, the others by the
       device's own clock from there (GPU event times are relative) */
    nb_backend *devs[64];
    void *ref[64];
    double ref_t[64];
    int n_devs = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_pairs; i++) {
        mark_pair *p = &pairs[i];
        bool device = p->be->device.type != NB_DEVICE_CPU && p->a && p->b;
        double dev_ms = p->a && p->b ? p->be->iface->timer_elapsed_ms(p->be, p->a, p->b) : 0;
        /* the host's span of the call; on the CPU the call's own work is timed by the host clock too */
        json_array_append_new(evs, event(p->slot, "host", p->host_t0, device || !(p->a && p->b) ? p->host_ms : dev_ms,
                                         0, p->tid));
        if (!device) continue;
        int d = 0;
        while (d < n_devs && devs[d] != p->be) d++;
        if (d == n_devs && n_devs < 64) {
            char name[32];
            devs[d] = p->be, ref[d] = p->a, ref_t[d] = p->host_t0, n_devs++;
            json_array_append_new(evs, process_name(1 + d, nb_device_str(p->be->device, name, sizeof name)));
        }
        if (d == n_devs) continue; /* more than 64 devices: not drawn */
        double at = ref_t[d] + p->be->iface->timer_elapsed_ms(p->be, ref[d], p->a);
        json_array_append_new(evs, event(p->slot, "kernel", at, dev_ms, 1 + d, 0));
    }
    pthread_mutex_unlock(&lock);
    json_object_set_new(root, "traceEvents", evs);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    nb_status st = nb_write_file_atomic(op, path, text, strlen(text));
    free(text);
    return st;
}
