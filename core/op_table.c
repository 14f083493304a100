/* op_table.c - the rows of nb_op_table.h as data, name lookup, and the
 * capability query (nb_backend_supports) that ops consult instead of fixed
 * dtype gates. */
#include <string.h>

#include "nb_impl.h"

/* A new row needs no count here: the op harness fails for a row without
 * cases, the op_table suite for an OPS.md that differs, and a backend
 * without the row's slots answers no through nb_backend_supports. */

/* Each row's flags and backward column agree: NB_OPF_DIFF exactly where
 * the row has a rule of its own (BW(f)) or through the ops it calls. */
#define BW(f) 1
#define BW_CALLS 2
#define BW_NONE 0
#define NB_OP_ROW(id, name, family, flags, dtypes, slots, bw, ac)                                 \
    _Static_assert(!((flags) & NB_OPF_DIFF) == !(bw), #name ": NB_OPF_DIFF and the bw column disagree");
NB_OP_TABLE(NB_OP_ROW)
#undef NB_OP_ROW
#undef BW
#undef BW_CALLS
#undef BW_NONE

static const nb_op_info rows[NB_OP_COUNT] = {
#define AC(p) NB_AUTOCAST_##p
#define NB_OP_ROW(id, name, family, flags, dtypes, slots, bw, ac) [NB_OP_##id] = {#name, #family, (flags), (dtypes), ac},
    NB_OP_TABLE(NB_OP_ROW)
#undef NB_OP_ROW
#undef AC
};

/* The slots column: row_slots[op][slot] for each K(slot) of the row. */
static const bool row_slots[NB_OP_COUNT][NB_SLOT_COUNT] = {
#define K(slot) [NB_SLOT_##slot] = true,
#define NB_OP_ROW(id, name, family, flags, dtypes, slots, bw, ac) [NB_OP_##id] = {slots},
    NB_OP_TABLE(NB_OP_ROW)
#undef NB_OP_ROW
#undef K
};

/* The same column as a list per row, for the capability check every op call
 * makes: slot id + 1 each, 0 after the last; a row that lists more slots
 * than fit fails to build. */
#define NB_ROW_SLOTS_MAX 16
#define K(slot) +1
#define NB_OP_ROW(id, name, family, flags, dtypes, slots, bw, ac)                                 \
    _Static_assert((0 slots) < NB_ROW_SLOTS_MAX, #name ": more kernel slots than NB_ROW_SLOTS_MAX - 1");
NB_OP_TABLE(NB_OP_ROW)
#undef NB_OP_ROW
#undef K
static const uint8_t row_slot_list[NB_OP_COUNT][NB_ROW_SLOTS_MAX] = {
#define K(slot) NB_SLOT_##slot + 1,
#define NB_OP_ROW(id, name, family, flags, dtypes, slots, bw, ac) [NB_OP_##id] = {slots},
    NB_OP_TABLE(NB_OP_ROW)
#undef NB_OP_ROW
#undef K
};
_Static_assert(NB_SLOT_COUNT < 255, "row_slot_list stores slot ids + 1 in a byte");

const bool *nb_op_slots(nb_op_id op) { return (unsigned)op < NB_OP_COUNT ? row_slots[op] : NULL; }

const nb_op_info *nb_op_get(nb_op_id op) { return (unsigned)op < NB_OP_COUNT ? &rows[op] : NULL; }

const char *nb_op_name(nb_op_id op) { return (unsigned)op < NB_OP_COUNT ? rows[op].name : "invalid op"; }

nb_op_id nb_op_find(const char *name) {
    if (!name) return nb_set_error(NB_ERR_INVALID_ARG, "op_find: NULL name"), NB_OP_COUNT;
    for (int i = 0; i < NB_OP_COUNT; i++)
        if (!strcmp(rows[i].name, name)) return (nb_op_id)i;
    return NB_OP_COUNT;
}

/* The backend's dtypes (0: all) take dt. */
static bool be_dtype(nb_backend *be, nb_dtype dt) { return !be->iface->dtypes || (be->iface->dtypes & NB_DTM(dt)); }

/* The first slot the row lists that be has no kernel for (a NULL field of
 * its vtable, read by slot id); NB_SLOT_COUNT when it has them all. */
static nb_slot_id missing_slot(nb_backend *be, nb_op_id op) {
    for (int i = 0; i < NB_ROW_SLOTS_MAX && row_slot_list[op][i]; i++)
        if (!nb_backend_has_slot(be, (nb_slot_id)(row_slot_list[op][i] - 1)))
            return (nb_slot_id)(row_slot_list[op][i] - 1);
    return NB_SLOT_COUNT;
}

static bool be_supports(nb_backend *be, nb_op_id op, nb_dtype dt) {
    return (rows[op].dtypes & NB_DTM(dt)) && be_dtype(be, dt) && missing_slot(be, op) == NB_SLOT_COUNT;
}

bool nb_backend_supports(nb_device dev, nb_op_id op, nb_dtype dt) {
    if ((unsigned)op >= NB_OP_COUNT || (unsigned)dt >= NB_DTYPE_COUNT) return false;
    nb_status st = nb_last_status();
    nb_backend *be = nb_backend_get(dev);
    if (!be) {
        if (st == NB_OK) nb_clear_error(); /* a query, not a failure */
        return false;
    }
    return be_supports(be, op, dt);
}

/* "float32, float64" for a mask. */
static const char *mask_names(unsigned mask, char *buf, size_t len) {
    size_t pos = 0;
    buf[0] = 0;
    for (int d = 0; d < NB_DTYPE_COUNT && pos < len; d++)
        if (mask & NB_DTM(d)) pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "", nb_dtype_name((nb_dtype)d));
    return buf;
}

bool nb_check_supported(nb_op_id op, nb_dtype dt, const nb_tensor *t) {
    const nb_op_info *r = nb_op_get(op);
    NB_ASSERT(r);
    if (nb_slot_trace_on) /* an op asked inside another needs its row's slots too */
        for (int i = 0; i < NB_ROW_SLOTS_MAX && row_slot_list[op][i]; i++)
            nb_slot_trace_mark((nb_slot_id)(row_slot_list[op][i] - 1));
    if (!(r->dtypes & NB_DTM(dt))) {
        char b[160];
        nb_set_error(NB_ERR_DTYPE, "%s: %s is not supported (it takes %s)", r->name, nb_dtype_name(dt),
                     mask_names(r->dtypes, b, sizeof b));
        return false;
    }
    nb_backend *be = t->storage->backend;
    if (!be_dtype(be, dt)) {
        nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s is not supported on backend %s:%d", r->name, nb_dtype_name(dt),
                     be->name, t->storage->device.index);
        return false;
    }
    nb_slot_id s = missing_slot(be, op);
    if (s != NB_SLOT_COUNT) {
        nb_set_error(NB_ERR_UNSUPPORTED, "%s: not supported on backend %s:%d (it has no %s kernel)", r->name,
                     be->name, t->storage->device.index, nb_slot_name(s));
        return false;
    }
    return true;
}
