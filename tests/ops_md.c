/* ops_md.c - prints autograd/OPS.md's main table from the op table
 * (core/nb_op_table.h), one row per op: build/tests/nabla-ops-md. The
 * op_table suite checks that OPS.md holds exactly this table between its
 * markers, so the table, the dispatch and the document cannot drift. */
#include <stdio.h>

#include "nabla.h"
#include "nb_autograd_impl.h"
#include "ops_md.h"

static void dtypes(unsigned m, char *buf, size_t len) {
    static const char *const short_names[NB_DTYPE_COUNT] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16", "i8", "i16"};
    size_t pos = 0;
    buf[0] = 0;
    for (int d = 0; d < NB_DTYPE_COUNT && pos < len; d++)
        if (m & NB_DTM(d)) pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "", short_names[d]);
}

size_t nb_ops_md_table(char *out, size_t len) {
    size_t pos = 0;
#define PUT(...)                                                                                  \
    do {                                                                                          \
        int k = snprintf(out ? out + pos : NULL, out && pos < len ? len - pos : 0, __VA_ARGS__); \
        pos += k > 0 ? (size_t)k : 0;                                                             \
    } while (0)
    PUT("%s\n", NB_OPS_MD_BEGIN);
    PUT("| id | function | family (ops_<family>.c, cpu/<family>.c, test_ops_<family>.c) | dtypes | backward | kind "
        "| autocast | kernel slots |\n");
    PUT("|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < NB_OP_COUNT; i++) {
        const nb_op_info *r = nb_op_get((nb_op_id)i);
        char dt[96];
        dtypes(r->dtypes, dt, sizeof dt);
        char kind[64] = "";
        size_t k = 0;
        if (r->flags & NB_OPF_VIEW) k += (size_t)snprintf(kind + k, sizeof kind - k, "%sview", k ? ", " : "");
        if (r->flags & NB_OPF_COMPOSITE) k += (size_t)snprintf(kind + k, sizeof kind - k, "%scomposite", k ? ", " : "");
        if (r->flags & NB_OPF_SYNC) k += (size_t)snprintf(kind + k, sizeof kind - k, "%shost sync", k ? ", " : "");
        if (r->flags & NB_OPF_RANDOM) k += (size_t)snprintf(kind + k, sizeof kind - k, "%srandom", k ? ", " : "");
        if (r->flags & NB_OPF_LP) k += (size_t)snprintf(kind + k, sizeof kind - k, "%slp", k ? ", " : "");
        if (!k) snprintf(kind, sizeof kind, "kernel");
        char slots[512] = "";
        const bool *sl = nb_op_slots((nb_op_id)i);
        for (int s = 0, n = 0; s < NB_SLOT_COUNT; s++)
            if (sl[s]) n += snprintf(slots + n, sizeof slots - (size_t)n, "%s%s", n ? ", " : "", nb_slot_name((nb_slot_id)s));
        static const char *const autocast[] = {[NB_AUTOCAST_NONE] = "", [NB_AUTOCAST_LOWER] = "lower",
                                               [NB_AUTOCAST_FP32] = "float32",
                                               [NB_AUTOCAST_LOWER_EXCEPT_CPU] = "lower (CPU: float32)"};
        PUT("| %d | nb_%s | %s | %s | %s | %s | %s | %s |\n", i, r->name, r->family, dt,
            r->flags & NB_OPF_DIFF2 ? "yes, twice" : r->flags & NB_OPF_DIFF ? "yes" : "no", kind,
            autocast[r->autocast], slots);
    }
    PUT("%s\n", NB_OPS_MD_END);
#undef PUT
    return pos;
}
