/* error.c - per-thread last error (status and message), nb_last_error(). */
#include <stdarg.h>
#include <stdio.h>

#include "nb_impl.h"

static _Thread_local nb_status last_status = NB_OK;
static _Thread_local char last_msg[1024];

nb_status nb_set_error(nb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_status = s;
    return s;
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
    }
    return "unknown status";
}
