/* runner.c - the C side of the differential suite against PyTorch
 * (tests/torch_diff/torch_diff.py drives it).
 *
 *   nabla-torch-diff MANIFEST.json INPUTS.safetensors OUTPUTS.safetensors
 *   nabla-torch-diff --list          (one op a line: name, family, flags)
 *   nabla-torch-diff --repr FILE     (nb_repr of each tensor of FILE, JSON;
 *                                     a name holding ".rg" requires grad)
 *
 * The manifest is a JSON array of cases:
 *   {"op": "add", "in": ["c7.0", "c7.1"], "view": ["", "T"], "req": [true, false],
 *    "gout": ["c7.g0"], "args": {"dim": 1}}
 * in: input tensors of INPUTS by name (null: a NULL input); view: "" as
 * stored, "T" the transpose of the last two dims, "S" every other element
 * of the last dim (strided views); req: which stored inputs require grad;
 * gout: per output, the gradient seed's name (null: not differentiated).
 * For each case i the runner writes to OUTPUTS: "<i>.o<k>" the outputs
 * (contiguous), "<i>.g<j>" the gradients of the inputs that required grad
 * (after backward of sum_k sum(out_k * gout_k)), and metadata "<i>.status"
 * ("ok" or nb_status_str of the failure, "backward: ..." if only backward
 * failed) and "<i>.msg".
 *
 * The op handlers are an X-macro over nb_op_table.h: a row without its
 * handler h_<name> below does not compile, so every public op is covered. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nabla.h"
#include "runner.h"

/* ---- arguments ----------------------------------------------------------------------------------- */

int64_t ai(const dcase *c, const char *k, int64_t d) {
    json_t *v = json_object_get(c->args, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : json_is_real(v) ? (int64_t)json_real_value(v) : d;
}

double ad(const dcase *c, const char *k, double d) {
    json_t *v = json_object_get(c->args, k);
    if (json_is_number(v)) return json_number_value(v);
    if (json_is_string(v)) return strtod(json_string_value(v), NULL); /* "nan", "inf", "-inf" */
    return d;
}

bool ab(const dcase *c, const char *k, bool d) {
    json_t *v = json_object_get(c->args, k);
    return json_is_boolean(v) ? json_is_true(v) : d;
}

const char *as(const dcase *c, const char *k, const char *d) {
    json_t *v = json_object_get(c->args, k);
    return json_is_string(v) ? json_string_value(v) : d;
}

int al(const dcase *c, const char *k, int64_t *out, int cap) {
    json_t *v = json_object_get(c->args, k);
    if (!json_is_array(v)) return -1;
    int n = (int)json_array_size(v);
    for (int i = 0; i < n && i < cap; i++) out[i] = (int64_t)json_integer_value(json_array_get(v, (size_t)i));
    return n < cap ? n : cap;
}

int ali(const dcase *c, const char *k, int *out, int cap) {
    int64_t t[16];
    int n = al(c, k, t, cap < 16 ? cap : 16);
    for (int i = 0; i < n; i++) out[i] = (int)t[i];
    return n;
}

nb_dtype dtype_named(const char *s) {
    for (int d = 0; d < NB_DTYPE_COUNT; d++)
        if (!strcmp(s, nb_dtype_name((nb_dtype)d))) return (nb_dtype)d;
    return NB_DTYPE_COUNT;
}

/* ---- the table -------------------------------------------------------------------------------------- */

#define NB_DECL(id, name, family, flags, dtypes, slots, bw, ac) nb_status h_##name(dcase *c);
NB_OP_TABLE(NB_DECL)
#undef NB_DECL

typedef struct handler {
    const char *name;
    nb_status (*fn)(dcase *c);
} handler;

static const handler handlers[] = {
#define NB_ROW(id, name, family, flags, dtypes, slots, bw, ac) {#name, h_##name},
    NB_OP_TABLE(NB_ROW)
#undef NB_ROW
};
#define N_HANDLERS (int)(sizeof handlers / sizeof handlers[0])

static const handler *find(const char *name) {
    for (int i = 0; i < N_HANDLERS; i++)
        if (!strcmp(handlers[i].name, name)) return &handlers[i];
    return NULL;
}

/* ---- one case ------------------------------------------------------------------------------------------ */

/* Collected results, kept past the case's scope until the file is written. */
typedef struct results {
    nb_named_tensor *ts;
    int n, cap;
    nb_st_pair *meta;
    int n_meta, cap_meta;
} results;

static void put_tensor(results *r, const char *name, nb_tensor *t) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->ts = realloc(r->ts, sizeof *r->ts * (size_t)r->cap);
        if (!r->ts) exit(3);
    }
    nb_tensor *k = nb_contiguous(t);
    if (!k) return;
    nb_retain(k);
    r->ts[r->n++] = (nb_named_tensor){strdup(name), k};
}

static void put_meta(results *r, const char *key, const char *value) {
    if (r->n_meta == r->cap_meta) {
        r->cap_meta = r->cap_meta ? 2 * r->cap_meta : 1024;
        r->meta = realloc(r->meta, sizeof *r->meta * (size_t)r->cap_meta);
        if (!r->meta) exit(3);
    }
    r->meta[r->n_meta++] = (nb_st_pair){strdup(key), strdup(value)};
}

static nb_tensor *apply_view(nb_tensor *t, const char *v) {
    if (!t || !v || !*v) return t;
    if (!strcmp(v, "T")) return nb_transpose(t, -1, -2);
    if (!strcmp(v, "S")) return nb_slice(t, -1, 0, INT64_MAX, 2);
    return NULL;
}

static void run_case(int idx, json_t *jc, const nb_safetensors *f, results *r) {
    char key[64];
    dcase c = {.args = json_object_get(jc, "args")};
    const char *op = json_string_value(json_object_get(jc, "op"));
    json_t *jin = json_object_get(jc, "in"), *jview = json_object_get(jc, "view"), *jreq = json_object_get(jc, "req");
    json_t *jgout = json_object_get(jc, "gout");
    const handler *h = op ? find(op) : NULL;
    nb_scope *s = nb_scope_begin();
    nb_clear_error();
    nb_tensor *stored[RUNNER_MAX_IN] = {0};
    c.n_in = (int)json_array_size(jin);
    if (c.n_in > RUNNER_MAX_IN) { /* a case the runner cannot hold: fail it, never drop inputs silently */
        fprintf(stderr, "torch_diff runner: case of %s has %d inputs (at most %d)\n", op ? op : "?", c.n_in,
                RUNNER_MAX_IN);
        exit(2);
    }
    for (int i = 0; i < c.n_in; i++) {
        const char *name = json_string_value(json_array_get(jin, (size_t)i));
        stored[i] = name ? nb_safetensors_get(f, name) : NULL;
        bool req = json_is_true(json_array_get(jreq, (size_t)i));
        if (stored[i] && req) nb_set_requires_grad(stored[i], true);
        c.in[i] = apply_view(stored[i], json_string_value(json_array_get(jview, (size_t)i)));
    }
    nb_clear_error();
    nb_status st = h ? h->fn(&c) : NB_ERR_UNSUPPORTED;
    const char *status = st ? nb_status_str(st) : "ok";
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", !h ? "runner: no such op" : st ? nb_last_error() : "");
    char bw_status[128] = "";
    if (!st) {
        for (int k = 0; k < c.n_out; k++) {
            snprintf(key, sizeof key, "%d.o%d", idx, k);
            if (c.out[k]) put_tensor(r, key, c.out[k]);
        }
        /* backward of sum_k sum(out_k * gout_k) */
        nb_tensor *loss = NULL;
        bool any = false;
        for (int k = 0; k < c.n_out && k < (int)json_array_size(jgout); k++) {
            const char *gname = json_string_value(json_array_get(jgout, (size_t)k));
            nb_tensor *g = gname ? nb_safetensors_get(f, gname) : NULL;
            if (!g || !c.out[k]) continue;
            nb_tensor *o = c.out[k];
            if (nb_dtype_of(o) == NB_F16 || nb_dtype_of(o) == NB_BF16) /* storage dtypes: the loss in float32 */
                o = nb_to_dtype(o, NB_F32), g = nb_to_dtype(g, NB_F32);
            nb_tensor *term = nb_sum(nb_mul(o, g), NULL, 0, false);
            loss = loss ? nb_add(loss, term) : term;
            any = true;
        }
        if (any) {
            nb_status bst = loss ? nb_backward(loss) : nb_last_status();
            if (bst) {
                snprintf(bw_status, sizeof bw_status, "backward: %s", nb_status_str(bst));
                snprintf(msg, sizeof msg, "%s", nb_last_error());
            }
            for (int i = 0; i < c.n_in && !bst; i++) {
                nb_tensor *g = stored[i] ? nb_tensor_grad(stored[i]) : NULL;
                snprintf(key, sizeof key, "%d.g%d", idx, i);
                if (g) put_tensor(r, key, g);
            }
        }
    }
    for (int i = 0; i < c.n_in; i++)
        if (stored[i]) nb_tensor_zero_grad(stored[i]), nb_set_requires_grad(stored[i], false);
    nb_scope_end(s);
    snprintf(key, sizeof key, "%d.status", idx);
    put_meta(r, key, bw_status[0] ? bw_status : status);
    snprintf(key, sizeof key, "%d.msg", idx);
    put_meta(r, key, msg);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < NB_OP_COUNT; i++) {
            const nb_op_info *o = nb_op_get((nb_op_id)i);
            printf("%s %s %u\n", o->name, o->family, o->flags);
        }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--repr")) { /* nb_repr of every tensor of a file, as a JSON object */
        nb_safetensors *f = nb_safetensors_load(argv[2]);
        if (!f) return fprintf(stderr, "runner: %s\n", nb_last_error()), 2;
        json_t *out = json_object();
        for (int i = 0; i < f->n_tensors; i++) {
            nb_tensor *t = f->tensors[i].tensor;
            const char *name = f->tensors[i].name;
            if (strstr(name, ".rg")) nb_set_requires_grad(t, true);
            int64_t n = nb_repr(t, NULL, 0);
            char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
            if (buf) nb_repr(t, buf, (size_t)n + 1);
            json_object_set_new(out, name, json_string(buf ? buf : nb_last_error()));
            free(buf);
        }
        char *text = json_dumps(out, JSON_COMPACT);
        puts(text ? text : "{}");
        free(text);
        json_decref(out);
        nb_safetensors_free(f);
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s MANIFEST.json INPUTS.safetensors OUTPUTS.safetensors | --list | --repr FILE\n",
                argv[0]);
        return 2;
    }
    json_error_t jerr;
    json_t *cases = json_load_file(argv[1], 0, &jerr);
    if (!json_is_array(cases)) {
        fprintf(stderr, "runner: %s: %s\n", argv[1], jerr.text);
        return 2;
    }
    nb_safetensors *f = nb_safetensors_load(argv[2]);
    if (!f) {
        fprintf(stderr, "runner: %s\n", nb_last_error());
        return 2;
    }
    nb_manual_seed(0);
    results r = {0};
    for (size_t i = 0; i < json_array_size(cases); i++) run_case((int)i, json_array_get(cases, i), f, &r);
    nb_status st = nb_safetensors_save(argv[3], r.ts, r.n, r.meta, r.n_meta);
    if (st) fprintf(stderr, "runner: %s\n", nb_last_error());
    for (int i = 0; i < r.n; i++) free((char *)r.ts[i].name), nb_release(r.ts[i].tensor);
    for (int i = 0; i < r.n_meta; i++) free((char *)r.meta[i].key), free((char *)r.meta[i].value);
    free(r.ts), free(r.meta);
    nb_safetensors_free(f);
    json_decref(cases);
    return st ? 1 : 0;
}
