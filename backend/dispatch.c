/* dispatch.c - the slot list's run-time side (nb_backend_impl.h): slot
 * names and kinds, the dispatchers' errors, and the slot trace that tests
 * use to hold the op table's slot lists to what ops really call. */
#include <stdbool.h>
#include <stdio.h>

#include "nb_backend_util.h"

static const char *const slot_names[NB_SLOT_COUNT] = {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) [NB_SLOT_##slot] = #slot,
#include "nb_slots.def"
#undef NB_SLOT
};

#define NB_SLOT_IS_REQ 1
#define NB_SLOT_IS_OPT 0
static const bool slot_required[NB_SLOT_COUNT] = {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) [NB_SLOT_##slot] = NB_SLOT_IS_##kind,
#include "nb_slots.def"
#undef NB_SLOT
};

const char *nb_slot_name(nb_slot_id slot) { return (unsigned)slot < NB_SLOT_COUNT ? slot_names[slot] : "invalid slot"; }

bool nb_slot_required(nb_slot_id slot) { return (unsigned)slot < NB_SLOT_COUNT && slot_required[slot]; }

bool nb_backend_has_slot(const nb_backend *be, nb_slot_id slot) {
    switch (slot) {
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) \
    case NB_SLOT_##slot: return be->iface->slot != NULL;
#include "nb_slots.def"
#undef NB_SLOT
    default: return false;
    }
}

nb_status nb_kernel_missing(nb_backend *be, nb_slot_id slot) {
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: not supported on backend %s:%d", nb_slot_name(slot), be->name,
                        be->device.index);
}

nb_status nb_kernel_null(nb_slot_id slot, const char *param) {
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s is NULL", nb_slot_name(slot), param);
}

const char *nb_view_str(const nb_kview *v, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < v->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "", (long long)v->shape[d]);
    if (used < len) snprintf(buf + used, len - used, "] %s", nb_dtype_name(v->dtype));
    return buf;
}

/* ---- slot trace ---------------------------------------------------------------------- */

bool nb_slot_trace_on; /* some thread traces: the dispatchers call nb_slot_trace_mark */
static _Atomic int tracers;
static _Thread_local bool *trace_used;

void nb_slot_trace_begin(bool *used) {
    if (!trace_used) tracers++;
    trace_used = used;
    nb_slot_trace_on = true;
}

void nb_slot_trace_end(void) {
    if (trace_used && --tracers == 0) nb_slot_trace_on = false;
    trace_used = NULL;
}

void nb_slot_trace_mark(nb_slot_id slot) {
    if (trace_used && (unsigned)slot < NB_SLOT_COUNT) trace_used[slot] = true;
}
