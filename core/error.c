/* error.c - per-thread last error (status and message), nb_last_error(). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "nb_impl.h"

static _Thread_local nb_status last_status = NB_OK;
static _Thread_local char last_msg[1024];

nb_status nb_set_error(nb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    last_status = s;
    return s;
}

static _Thread_local int fault_countdown; /* > 0: the countdown-th host calloc fails */
static _Thread_local bool pending_failure;

void nb_fault_inject_host_alloc(int n) { fault_countdown = n > 0 ? n : 0; }

void *nb_host_calloc(size_t n, size_t size) {
    if (fault_countdown > 0 && --fault_countdown == 0) return NULL;
    return calloc(n, size);
}

void nb_fail_pending(nb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    last_status = s;
    pending_failure = true;
}

bool nb_take_pending_failure(void) {
    bool p = pending_failure;
    pending_failure = false;
    return p;
}

const char *nb_last_error(void) { return last_msg; }
nb_status nb_last_status(void) { return last_status; }

void nb_clear_error(void) {
    last_status = NB_OK;
    last_msg[0] = 0;
}

const char *nb_status_str(nb_status s) {
    switch (s) {
    case NB_OK: return "ok";
    case NB_ERR_INVALID_ARG: return "invalid argument";
    case NB_ERR_SHAPE: return "shape error";
    case NB_ERR_DTYPE: return "dtype error";
    case NB_ERR_DEVICE: return "device error";
    case NB_ERR_OOM: return "out of memory";
    case NB_ERR_IO: return "i/o error";
    case NB_ERR_FORMAT: return "format error";
    case NB_ERR_UNSUPPORTED: return "unsupported";
    case NB_ERR_STATE: return "state error";
    case NB_ERR_MISMATCH: return "mismatch";
    case NB_ERR_ANOMALY: return "numerical anomaly";
    }
    return "unknown status";
}

double nb_option(double v, double dflt) {
    if (v != 0.0) return v;
    return signbit(v) ? 0.0 : dflt;
}
